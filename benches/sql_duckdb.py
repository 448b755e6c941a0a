"""DuckDB on the CASE benchmark's table: the same queries as `selectjit-sql-bench`, in memory.

Usage: python benches/sql_duckdb.py TABLE.parquet [--reps R] [--threads N]

TABLE.parquet is what `selectjit-sql-bench --parquet TABLE.parquet` writes. Prints the median
milliseconds of each query (its result fetched as an Arrow table, as DataFusion's collect does).
"""

import argparse
import statistics
import time

import duckdb

QUERIES = [
    (
        "case_projection",
        "SELECT CASE WHEN qty < 10 THEN a WHEN qty < 50 THEN b ELSE c END AS r FROM lineitem",
    ),
    (
        "q12_like",
        "SELECT shipmode, "
        "SUM(CASE WHEN priority = '1-URGENT' OR priority = '2-HIGH' THEN 1 ELSE 0 END) AS high, "
        "SUM(CASE WHEN priority <> '1-URGENT' AND priority <> '2-HIGH' THEN 1 ELSE 0 END) AS low "
        "FROM lineitem GROUP BY shipmode ORDER BY shipmode",
    ),
    (
        "q14_like",
        "SELECT 100.0 * SUM(CASE WHEN ptype LIKE 'PROMO%' THEN price * (1 - discount) ELSE 0 END) "
        "/ SUM(price * (1 - discount)) AS promo_revenue FROM lineitem",
    ),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("table")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {a.threads}")
    con.execute(f"CREATE TABLE lineitem AS SELECT * FROM read_parquet('{a.table}')")
    print(f"duckdb {duckdb.__version__}, {a.threads} thread(s), median ms of {a.reps}")
    for name, sql in QUERIES:
        con.sql(sql).to_arrow_table()
        times = []
        for _ in range(a.reps):
            t = time.perf_counter()
            con.sql(sql).to_arrow_table()
            times.append((time.perf_counter() - t) * 1e3)
        print(f"{name:<16} {statistics.median(times):10.2f}")


if __name__ == "__main__":
    main()

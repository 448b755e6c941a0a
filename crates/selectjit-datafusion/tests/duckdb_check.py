"""DuckDB as an independent oracle for the SQL tests.

Usage: python tests/duckdb_check.py DIR

DIR holds what `SELECTJIT_SQL_DUMP=DIR cargo test -p selectjit-datafusion --test sql` writes:
the table `t.parquet`, and per query `NAME.sql` with DataFusion's result (selectjit's rule on)
as `NAME.parquet`. Each query runs on DuckDB over the same table; the results must be equal:
the same rows in order, NULL where NULL, integers, decimals, strings, dates and timestamps
exactly, floats bit for bit where the query only selects them (`SUM`s may add in another
order: within 1e-9 relative there). Queries whose SQL the two engines read differently are
listed in SKIP with the reason.
"""

import math
import pathlib
import sys

import duckdb
import pyarrow.parquet as pq

# DuckDB's and DataFusion's SQL disagree here (not a difference of results).
SKIP = {
    "fallible": "`/` of integers is integer division in DataFusion, a float division in DuckDB",
    "floats": "DuckDB reads the literal -0.0 as a DECIMAL, which has no negative zero",
    "string_views": "`arrow_cast` (to string views and large strings) is DataFusion's own",
}

# Queries whose float results are sums (added in an order each engine chooses).
SUMS = {"q14_like"}


def same_float(a, b, summed):
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if summed:
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return math.copysign(1.0, a) == math.copysign(1.0, b) and a == b


def main():
    d = pathlib.Path(sys.argv[1])
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{d / 't.parquet'}')")
    checked = 0
    failures = []
    for q in sorted(d.glob("*.sql")):
        name = q.stem
        if name in SKIP:
            print(f"{name}: skipped ({SKIP[name]})")
            continue
        sql = q.read_text()
        ours = pq.read_table(d / f"{name}.parquet")
        theirs = con.sql(sql).to_arrow_table()
        if ours.num_rows != theirs.num_rows or ours.num_columns != theirs.num_columns:
            failures.append(f"{name}: {ours.shape} rows x columns, DuckDB {theirs.shape}")
            continue
        for i in range(ours.num_columns):
            a = ours.column(i).to_pylist()
            b = theirs.column(i).to_pylist()
            if any(isinstance(x, float) for x in a + b):
                bad = [
                    j
                    for j, (x, y) in enumerate(zip(a, b))
                    if not same_float(
                        None if x is None else float(x),
                        None if y is None else float(y),
                        name in SUMS,
                    )
                ]
            else:
                # DuckDB gives decimals of its own precision and timestamps with their unit:
                # compare values.
                bad = [j for j, (x, y) in enumerate(zip(a, b)) if x != y]
            if bad:
                j = bad[0]
                failures.append(
                    f"{name} column {ours.column_names[i]}: {len(bad)} rows differ, "
                    f"first row {j}: DataFusion+selectjit {a[j]!r}, DuckDB {b[j]!r}"
                )
        checked += 1
    for f in failures:
        print("FAIL", f)
    print(f"{checked} queries checked against DuckDB, {len(failures)} differ")
    if failures or checked < 10:
        sys.exit(1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""selectjit.arrow against pyarrow.compute and polars on Arrow columns, as users call them.

Two cases on 1M-row float64 columns with 10 % nulls: `if_else(c, a, b)` with a condition 50 %
true, and a 3-branch `case_when` (three conditions, three values and an ELSE). Contenders:
`selectjit.arrow.if_else` / `case_when` (returning pyarrow arrays), `pyarrow.compute.if_else` /
`case_when`, and polars `df.select(pl.when(c).then(a).otherwise(b))` (a `when/then` chain for
case_when) on a DataFrame of the same columns. Every contender allocates its output, on one
thread (the process pinned to one CPU, `POLARS_MAX_THREADS=1`, `pyarrow.set_cpu_count(1)`).
Each output is checked equal to pyarrow's (`.equals()`, type included) before it is timed.
Times are the best (and the median, in the JSON) of interleaved rounds (peers.py's harness).

Needs numpy, pyarrow, polars and the selectjit package (`pip install crates/selectjit-py`).
"""

import argparse
import json
import os
import platform
import sys
from pathlib import Path

os.environ["POLARS_MAX_THREADS"] = "1"
# One core for the whole process, before any library starts a thread: selectjit's engine sizes
# its pool from the CPUs the process may run on, and nothing else can spread either.
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True  # no __pycache__ of peers.py left in the checkout
import peers as P  # noqa: E402  (the shared harness: timing, versions)

np = P.np


def columns(rng, n, null_rate):
    import pyarrow as pa

    vals = rng.standard_normal(n)
    return pa.array(vals, mask=rng.random(n) < null_rate)


def bools(rng, n, density):
    import pyarrow as pa

    return pa.array(rng.random(n) < density)


def cases(rows):
    """(name, rows, dtype, selectjit call, pyarrow call, polars call): each call returns its
    output as a pyarrow array (polars': converted after the timing)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import polars as pl

    import selectjit.arrow as sa

    rng = np.random.default_rng(36)
    out = []
    c = bools(rng, rows, 0.5)
    a, b = columns(rng, rows, 0.1), columns(rng, rows, 0.1)
    df = pl.from_arrow(pa.table({"c": c, "a": a, "b": b}))
    expr = pl.when("c").then("a").otherwise("b")
    out.append(("if_else_f64_10pct_null", rows, "f64",
                lambda: sa.if_else(c, a, b), lambda: pc.if_else(c, a, b),
                lambda: df.select(expr)))
    # 3 branches: conditions 25 % true each (about 58 % of rows take one), the ELSE the rest.
    cs = [bools(rng, rows, 0.25) for _ in range(3)]
    vs = [columns(rng, rows, 0.1) for _ in range(4)]
    cond = pa.StructArray.from_arrays(cs, names=["c1", "c2", "c3"])
    names = {f"c{i + 1}": x for i, x in enumerate(cs)} | {f"v{i}": x for i, x in enumerate(vs)}
    df3 = pl.from_arrow(pa.table(names))
    expr3 = (pl.when("c1").then("v0").when("c2").then("v1").when("c3").then("v2")
             .otherwise("v3"))
    out.append(("case_when3_f64_10pct_null", rows, "f64",
                lambda: sa.case_when(cond, *vs), lambda: pc.case_when(cond, *vs),
                lambda: df3.select(expr3)))
    return out


def run(opts):
    import pyarrow as pa

    pa.set_cpu_count(1)
    results = []
    for name, rows, dtype, sj, pyarrow_call, polars_call in cases(opts.rows):
        want = pyarrow_call()
        got = sj()
        if not (got.type == want.type and got.equals(want)):
            sys.exit(f"{name}: selectjit's output differs from pyarrow's")
        pl_out = polars_call().to_series().to_arrow()
        if isinstance(pl_out, pa.ChunkedArray):
            pl_out = pl_out.combine_chunks()
        polars_ok = pl_out.type == want.type and pl_out.equals(want)
        fns = [sj, pyarrow_call] + ([polars_call] if polars_ok else [])
        stats = P.timeit_stats(fns, opts.rounds, opts.min_batch_ns)
        row = {"case": name, "rows": rows, "dtype": dtype,
               "selectjit_ns": stats[0][0], "pyarrow_ns": stats[1][0],
               "polars_ns": stats[2][0] if polars_ok else None,
               "selectjit_median_ns": stats[0][1], "pyarrow_median_ns": stats[1][1],
               "polars_median_ns": stats[2][1] if polars_ok else None}
        results.append(row)
        pl_txt = (f"polars {row['polars_ns'] / 1e3:9.1f} µs ({row['polars_ns'] / row['selectjit_ns']:.2f}x)"
                  if polars_ok else "polars: output differs")
        print(f"{name:28} selectjit {row['selectjit_ns'] / 1e3:9.1f} µs   "
              f"pyarrow {row['pyarrow_ns'] / 1e3:9.1f} µs ({row['pyarrow_ns'] / row['selectjit_ns']:.2f}x)   "
              + pl_txt, flush=True)
    return results


def markdown(results, env, note):
    lines = ["# selectjit.arrow against pyarrow.compute and polars", ""]
    lines.append(
        f"Measured {env['date']} on {env['host']}, single-threaded (every contender on one "
        f"thread), {env['rounds']} interleaved rounds, batches of at least "
        f"{env['min_batch_ms']:g} ms, the best round. "
        + ", ".join(f"{k} {v}" for k, v in env["versions"].items())
        + f", Python {env['python']}.")
    if note:
        lines += ["", note]
    lines += ["", "| case | rows | dtype | selectjit µs | pyarrow µs | pa/sj | polars µs | pl/sj |",
              "|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in results:
        pl = (f"{r['polars_ns'] / 1e3:.1f} | {r['polars_ns'] / r['selectjit_ns']:.2f}"
              if r["polars_ns"] else "differs | ")
        lines.append(f"| {r['case']} | {r['rows']} | {r['dtype']} | {r['selectjit_ns'] / 1e3:.1f} | "
                     f"{r['pyarrow_ns'] / 1e3:.1f} | {r['pyarrow_ns'] / r['selectjit_ns']:.2f} | {pl} |")
    lines += ["", "Times in µs per call (the best round; medians in the JSON), each contender "
              "allocating its output as users call it: `selectjit.arrow.if_else(c, a, b)` / "
              "`case_when(cond, v0, v1, v2, v3)` returning a `pyarrow.Array`, "
              "`pyarrow.compute.if_else` / `case_when`, polars "
              "`df.select(pl.when(c).then(a).otherwise(b))` (for case_when a chain of three "
              "`when/then` and an `otherwise`). Ratios: peer time / selectjit time (above 1: "
              "selectjit is faster). Inputs: float64 columns with 10 % nulls; if_else's "
              "condition 50 % true without nulls; case_when's three conditions 25 % true each "
              "(a struct array of them), the fourth value the ELSE. Every output was checked "
              "equal to pyarrow's (`.equals()` and the type) before it was timed.", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 rounds of 1 ms batches")
    ap.add_argument("--rows", type=int, default=1 << 20, help="rows per column (default 1M)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--markdown", type=Path, help="write the table here")
    ap.add_argument("--note", default="", help="a line for the markdown (e.g. machine load)")
    ap.add_argument("--host", default=platform.processor() or platform.machine(),
                    help="the host's description for the markdown")
    opts = ap.parse_args()
    opts.rounds, opts.min_batch_ns = (5, 1e6) if opts.quick else (15, 4e6)
    import datetime

    env = {"date": datetime.date.today().isoformat(), "host": opts.host,
           "python": platform.python_version(),
           "versions": P.package_versions(["selectjit", "numpy", "pyarrow", "polars"]),
           "rounds": opts.rounds, "min_batch_ms": opts.min_batch_ns / 1e6}
    results = run(opts)
    if opts.json:
        opts.json.write_text(json.dumps({"env": env, "cases": results}, indent=1) + "\n")
    if opts.markdown:
        opts.markdown.write_text(markdown(results, env, opts.note))


if __name__ == "__main__":
    main()

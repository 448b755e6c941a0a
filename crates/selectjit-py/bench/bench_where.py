"""selectjit.where against numpy.where (and numexpr's where, for the dtypes it keeps) on the
shared benchmark cases, one thread each, outputs checked bytewise before anything is timed.

    python bench/bench_where.py [CASES.json] [--rounds 7] [--case NAME ...] [--quick]

CASES.json defaults to the project's `benches/cases.json`. Prints a Markdown
table: per case the median time of each contender over interleaved rounds (each round times
numpy, numexpr and selectjit one after the other), and the median and range of the per-round
time ratios against selectjit.
"""

import argparse
import json
import os
import pathlib
import platform
import statistics
import sys
import timeit

os.environ["NUMEXPR_NUM_THREADS"] = "1"  # before numexpr is imported
os.environ.setdefault("OMP_NUM_THREADS", "1")

import ml_dtypes  # noqa: E402
import numexpr  # noqa: E402
import numpy as np  # noqa: E402

import selectjit  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
DEFAULT_CASES = ROOT / "benches" / "cases.json"
DTYPES = {
    "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i8": np.int8,
    "f64": np.float64, "i64": np.int64, "complex128": np.complex128,
}
# numexpr's where keeps these dtypes (it computes others, e.g. int8 and float16, in wider types).
NUMEXPR_DTYPES = {"f32", "f64", "i64", "complex128"}


def build(case, seed=0):
    """cond, then, else of a case: cond 'random' (p=0.5, seeded), 'causal' (lower-triangular
    over the last two dims) or 'true'; then/else random values of the case's dtype."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[case["dtype"]]
    cs = tuple(case["cond"])
    fill = case["cond_fill"]
    if fill == "random":
        cond = rng.random(cs) < 0.5
    elif fill == "causal":
        n, m = cs[-2], cs[-1]
        cond = np.ascontiguousarray(np.broadcast_to(np.tril(np.ones((n, m), bool)), cs))
    elif fill == "true":
        cond = np.ones(cs, bool)
    else:
        raise ValueError(f"unknown cond_fill {fill!r}")

    def values(shape):
        v = rng.standard_normal(shape) * 100
        if np.dtype(dt).kind == "c":
            v = v + 1j * rng.standard_normal(shape)
        return np.asarray(v).astype(dt)

    return cond, values(tuple(case["then"])), values(tuple(case["else"]))


def timer(fn, target=0.02):
    """Seconds per call of `fn`, timed over enough calls to take about `target` seconds."""
    fn()
    n = 1
    while True:
        t = timeit.timeit(fn, number=n)
        if t >= target or n >= 1 << 20:
            return t / n
        n = max(n * 2, int(n * target / max(t, 1e-9)))


def main():
    ap = argparse.ArgumentParser(description="selectjit.where vs numpy.where vs numexpr")
    ap.add_argument("cases", nargs="?", default=str(DEFAULT_CASES), help="cases.json")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds (median)")
    ap.add_argument("--case", action="append", help="only these cases (repeatable)")
    ap.add_argument("--quick", action="store_true", help="3 rounds of ~5 ms per timing")
    args = ap.parse_args()
    rounds, target = (3, 0.005) if args.quick else (args.rounds, 0.02)

    cases = json.loads(pathlib.Path(args.cases).read_text())["cases"]
    if args.case:
        cases = [c for c in cases if c["name"] in args.case]
    numexpr.set_num_threads(1)
    engine = selectjit.Engine(threads=1)

    print(f"selectjit {selectjit.__version__} (tier {engine.tier}, 1 thread), numpy "
          f"{np.__version__}, numexpr {numexpr.__version__} (1 thread), Python "
          f"{platform.python_version()}, {platform.machine()}")
    print()
    print("| case | elements | numpy µs | numexpr µs | selectjit µs | selectjit out= µs "
          "| numpy / selectjit | numexpr / selectjit |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    failures = 0
    for case in cases:
        c, t, e = build(case)
        want = np.where(c, t, e)
        got = engine.where(c, t, e)
        out = np.empty_like(want)
        engine.where(c, t, e, out=out)
        if (got.dtype, got.shape, got.tobytes()) != (want.dtype, want.shape, want.tobytes()) \
                or out.tobytes() != want.tobytes():
            print(f"| {case['name']} | selectjit differs from numpy.where | | | | | | |")
            failures += 1
            continue
        contenders = {
            "numpy": lambda: np.where(c, t, e),
            "selectjit": lambda: engine.where(c, t, e),
            "out": lambda: engine.where(c, t, e, out=out),
        }
        ne_note = "n/a"
        if case["dtype"] in NUMEXPR_DTYPES:
            r = numexpr.evaluate("where(c, t, e)", local_dict={"c": c, "t": t, "e": e})
            if (r.dtype, r.shape, r.tobytes()) == (want.dtype, want.shape, want.tobytes()):
                contenders["numexpr"] = lambda: numexpr.evaluate(
                    "where(c, t, e)", local_dict={"c": c, "t": t, "e": e})
            else:
                ne_note = "differs"
        times = {k: [] for k in contenders}
        for _ in range(rounds):
            for k, fn in contenders.items():
                times[k].append(timer(fn, target))
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}

        def ratio(k):
            rs = sorted(a / b for a, b in zip(times[k], times["selectjit"]))
            return statistics.median(rs), rs[0], rs[-1]

        rn = ratio("numpy")
        ratios.append(rn[0])
        cell = lambda r: f"{r[0]:.2f} ({r[1]:.2f}–{r[2]:.2f})"  # noqa: E731
        ne_t = f"{med['numexpr']:.1f}" if "numexpr" in med else ne_note
        ne_r = cell(ratio("numexpr")) if "numexpr" in med else "–"
        print(f"| {case['name']} | {want.size} | {med['numpy']:.1f} | {ne_t} | "
              f"{med['selectjit']:.1f} | {med['out']:.1f} | {cell(rn)} | {ne_r} |")
        sys.stdout.flush()
    if ratios:
        g = float(np.exp(np.mean(np.log(ratios))))
        print()
        print(f"geometric mean of numpy/selectjit time: {g:.2f} over {len(ratios)} cases "
              f"(ratios are medians of {rounds} interleaved rounds; range in parentheses)")
    if failures:
        sys.exit(f"{failures} case(s) differ from numpy.where")


if __name__ == "__main__":
    main()

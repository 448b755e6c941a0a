"""A fused predicate against numpy and numexpr: ReLU, `selectjit.where(selectjit.greater(x, 0),
x, 0)`, on float32 arrays (1M elements by default), against `numpy.where(x > 0, x, 0)` and
numexpr's `where(x > 0, x, 0)` (one thread, then numexpr's default threads), plus selectjit
with `out=` (a preallocated output) and in place (`out=x`, numpy's `np.maximum(x, 0, out=x)`
beside it for reference, though it differs from `where` on NaN and -0.0).

    python bench/bench_predicates.py [--n 1048576] [--rounds 7] [--threads 1]

Every output is checked bytewise against numpy's before anything is timed. Each round times
every contender one after the other (interleaved, so a noisy neighbour hits all alike); the
table gives the median of the rounds, and the ratios the median and range of the per-round
ratios against selectjit. One run: the figures are those of this run only.
"""

import argparse
import os
import platform
import statistics
import timeit

import numpy as np

import selectjit

try:
    import numexpr
except ImportError:  # optional
    numexpr = None


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def best_of(f, number):
    return min(timeit.repeat(f, number=number, repeat=3)) / number


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of selectjit's engine (default 1, as numpy)")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.n).astype(np.float32)
    x[::97] = np.nan
    x[1::89] = -0.0
    engine = selectjit.Engine(threads=args.threads)
    out = np.empty_like(x)
    scratch = x.copy()

    want = np.where(x > 0, x, 0)
    checks = {"selectjit": engine.where(selectjit.greater(x, 0), x, 0),
              "selectjit out=": engine.where(selectjit.greater(x, 0), x, 0, out=out)}
    y = x.copy()
    engine.where(selectjit.greater(y, 0), y, 0, out=y)
    checks["selectjit in place"] = y
    contenders = {
        "numpy.where(x > 0, x, 0)": lambda: np.where(x > 0, x, 0),
        "selectjit": lambda: engine.where(selectjit.greater(x, 0), x, 0),
        "selectjit out=": lambda: engine.where(selectjit.greater(x, 0), x, 0, out=out),
        # In place on a scratch copy (its values stay the ReLU of x after the first call, so
        # every call does the same work).
        "selectjit in place": lambda: engine.where(selectjit.greater(scratch, 0), scratch, 0,
                                                   out=scratch),
        "selectjit.where(x > 0, x, 0)": lambda: engine.where(x > 0, x, 0),
    }
    if numexpr is not None:
        checks["numexpr"] = numexpr.evaluate("where(x > 0, x, 0)", local_dict={"x": x})
        default_threads = numexpr.get_num_threads()

        def ne(threads):
            def run():
                numexpr.set_num_threads(threads)
                return numexpr.evaluate("where(x > 0, x, 0)", local_dict={"x": x})
            return run

        contenders["numexpr, 1 thread"] = ne(1)
        contenders[f"numexpr, {default_threads} threads (default)"] = ne(default_threads)
    for name, got in checks.items():
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name

    number = max(1, int(0.05 / max(best_of(contenders["numpy.where(x > 0, x, 0)"], 3), 1e-7)))
    times = {k: [] for k in contenders}
    for _ in range(args.rounds):
        for k, f in contenders.items():
            times[k].append(best_of(f, number))
    base = times["selectjit"]

    print(f"ReLU on {args.n} float32 elements; {args.rounds} interleaved rounds; "
          f"selectjit engine tier {engine.tier}, threads {engine.threads}")
    print(f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); numpy {np.__version__}"
          + (f", numexpr {numexpr.__version__}" if numexpr else ", numexpr not installed"))
    print()
    print("| contender | median µs | time / selectjit's (median, range) |")
    print("|---|---:|---:|")
    for k, t in times.items():
        r = [a / b for a, b in zip(t, base)]
        print(f"| {k} | {statistics.median(t) * 1e6:.1f} | "
              f"{statistics.median(r):.2f} ({min(r):.2f}–{max(r):.2f}) |")
    r = [a / b for a, b in zip(times["numpy.where(x > 0, x, 0)"], base)]
    print()
    print(f"numpy.where(x > 0, x, 0) / selectjit.where(greater(x, 0), x, 0): "
          f"{statistics.median(r):.2f}x (target >= 5x)")


if __name__ == "__main__":
    main()

"""Per-call cost of selectjit.where against numpy.where on tiny arrays (16 float32 elements
unless the row says otherwise), one thread: the table "Per-call cost on tiny arrays" of the
package README. Each figure is the median of interleaved rounds of calls; outputs are checked
bytewise against numpy.where first.

    python bench/bench_calls.py [--rounds 7] [--calls 20000]
"""

import argparse
import statistics
import time

import numpy as np

import selectjit


def cases():
    rng = np.random.default_rng(0)
    m = rng.random(16) < 0.5
    x = rng.standard_normal(16).astype(np.float32)
    y = rng.standard_normal(16).astype(np.float32)
    x4 = x.reshape(4, 4)
    y4 = y.reshape(4, 4)
    x34 = x[:12].reshape(3, 4)
    return [
        ("three arrays of one shape", (m, x, y)),
        ("`y` a Python float (`where(m, x, 0.5)`)", (m, x, 0.5)),
        ("`y` a numpy scalar (`np.float32(0)`)", (m, x, np.float32(0))),
        ("condition a Python list", (m.tolist(), x, y)),
        ("x int8, y float32 (a cast)", (m, x.astype(np.int8), y)),
        ("condition a row of a 4×4 (broadcast)", (m[:4], x4, y4)),
        ("condition a column of a 3×4, `y` a numpy scalar", (m[:3, None], x34, np.float32(0))),
        ("`x` reversed (`x[::-1]`)", (m, x[::-1], y)),
    ]


def per_call_ns(f, args, calls):
    t = time.perf_counter()
    for _ in range(calls):
        f(*args)
    return (time.perf_counter() - t) / calls * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    engine = selectjit.Engine(threads=1)
    print("| call | numpy.where | selectjit.where | numpy / selectjit |")
    print("|---|---:|---:|---:|")
    for name, args in cases():
        want = np.where(*args)
        got = engine.where(*args)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), name
        nps, sjs = [], []
        for _ in range(a.rounds):
            nps.append(per_call_ns(np.where, args, a.calls))
            sjs.append(per_call_ns(engine.where, args, a.calls))
        n, s = statistics.median(nps), statistics.median(sjs)
        ns = [f"{v:,.0f}".replace(",", " ") for v in (n, s)]
        print(f"| {name} | {ns[0]} ns | {ns[1]} ns | {n / s:.2f} |")


if __name__ == "__main__":
    main()

"""What a fresh output costs: `y = sj.where(sj.greater(x, 0), x, 0)` rebinding `y` in a steady
loop against the same call writing into a preallocated `out=`, one thread, x float32, with the
engine's output pool on and off. Without the pool every call's output is new memory the OS
faults in and zeroes (the C allocator returns large blocks to it on free); with the pool the
previous output's memory comes back. Each figure is the median per-call time of interleaved
rounds; results are checked bytewise against numpy first.

    python bench/bench_alloc.py [--rounds 9] [--seconds 0.25] [--sizes 1M,2M,14M,16M]
"""

import argparse
import statistics
import time

import numpy as np

import selectjit as sj


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20}.get(s[-1], 1)
    return int(s[:-1] if s[-1] in "KM" else s) * mult


def per_call(f, seconds):
    """One round: calls `f` for about `seconds` (three times at least); seconds per call."""
    n, t0 = 0, time.perf_counter()
    while True:
        f()
        n += 1
        t = time.perf_counter() - t0
        if t >= seconds and n >= 3:
            return t / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=0.25, help="per round and variant")
    ap.add_argument("--sizes", default="1M,2M,14M,16M", help="elements of x (K, M suffixes)")
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]

    engines = {"on": sj.Engine(threads=1, output_pool=True),
               "off": sj.Engine(threads=1, output_pool=False)}
    print(f"numpy {np.__version__}, selectjit {sj.__version__}, one thread, x float32, "
          f"median of {args.rounds} rounds")
    print("| elements | output | pool | allocating (ms) | `out=` (ms) | ratio |")
    print("|---:|---:|---|---:|---:|---:|")
    for n in sizes:
        x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        want = np.where(x > 0, x, np.float32(0))
        times = {}
        for name, e in engines.items():
            cond = sj.greater(x, 0)
            out = np.empty_like(x)
            assert e.where(cond, x, 0).tobytes() == want.tobytes()
            assert e.where(cond, x, 0, out=out) is out and out.tobytes() == want.tobytes()
            state = {"y": None}

            def alloc(e=e, cond=cond, state=state):
                state["y"] = e.where(cond, x, 0)

            def into(e=e, cond=cond, out=out):
                e.where(cond, x, 0, out=out)

            times[name] = (alloc, into, [], [])
        for _ in range(args.rounds):  # interleaved: drifts of the host hit every variant alike
            for name, (alloc, into, ta, ti) in times.items():
                alloc()  # steady state: the previous y is alive when the next is made
                ta.append(per_call(alloc, args.seconds))
                ti.append(per_call(into, args.seconds))
        mib = n * 4 / (1 << 20)
        for name, (_, _, ta, ti) in times.items():
            a, i = statistics.median(ta), statistics.median(ti)
            print(f"| {n:,} | {mib:g} MiB | {name} | {a * 1e3:.3f} | {i * 1e3:.3f} | "
                  f"{a / i:.2f}x |")
        stats = engines["on"].output_pool_stats()
        print(f"<!-- pool on: hits {stats['hits']}, misses {stats['misses']}, "
              f"held {stats['held_bytes'] >> 20} MiB -->")
        for e in engines.values():
            e.trim_output_pool()


if __name__ == "__main__":
    main()

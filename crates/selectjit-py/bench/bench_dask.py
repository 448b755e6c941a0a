"""A masked fill on a dask.distributed LocalCluster: selectjit blocks against dask.array.where,
same cluster, same run, with each worker's peak memory against its limit.

    python bench/bench_dask.py                    # 4 GiB of float32, 128 MiB chunks
    python bench/bench_dask.py --gib 8 --memory-limit 9GiB
    python bench/bench_dask.py --tiny             # a few MiB: checks that it works (CI)

The input `x` (float32, `--cols` wide, random normal) is generated on the workers and kept in
their memory; the row mask (90% true) broadcasts over its rows; the fill is -inf. Each timed run
computes `where(mask, x, -inf)` block by block and hands every output block to a sink that
drops it (as `dask.array.store` hands blocks to a file, without the file's cost), so outputs do
not accumulate in worker memory. Contenders: `dask.array.where` (numpy.where per block),
`selectjit.dask.where` (the workers' default engines, which may split a large block across
the host's cores) and `selectjit.Engine(threads=1).where` through `dask.array.blockwise` (one
thread per block, as numpy). Each round times every contender once, in a rotating order; the
table gives the median wall time over the rounds and the median and range of the per-round
ratios. Before timing, every output block of each selectjit contender is compared bytewise with
dask.array.where's on the workers (and, with --tiny, everything with numpy.where here).

Peak memory: each worker process's peak resident set size (Linux VmHWM, reset before each timed
run) against its memory limit; a worker that was restarted or that spilled to disk is reported.
"""

import argparse
import logging
import os
import platform
import statistics
import sys
import time

import cloudpickle
import dask
import dask.array as da
import distributed
import numpy as np
from dask.utils import format_bytes, parse_bytes
from distributed import Client, LocalCluster, wait

import selectjit
import selectjit.dask

# The worker-side helpers below live in this script, which workers cannot import.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Sink:
    """A store target that drops what it is given (`dask.array.store` writes each block into
    it), so that a run's cost is computing the blocks, not keeping or writing them."""

    def __setitem__(self, key, value):
        pass


def reset_peak():
    """On a worker: restart its peak RSS count (Linux: writing 5 to /proc/self/clear_refs)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_and_spill(dask_worker):
    """On a worker: its peak RSS since the last reset, and the bytes it has spilled to disk
    since it started (its SpillBuffer's cumulative count)."""
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    metrics = getattr(dask_worker.data, "cumulative_metrics", {})
    return hwm, int(metrics.get(("disk-write", "bytes"), 0))


def engine_tier():
    """On a worker: the tier its default engine compiles with."""
    return selectjit.default_engine().tier


def same_bytes(a, b):
    """One bool per block pair: their dtypes, shapes and bytes are the same."""
    return np.array([[a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()]])


def contenders(mask, x, fill):
    one_thread = selectjit.Engine(threads=1)   # pickles as each worker's shared engine of 1 thread
    return {
        "dask.array.where": da.where(mask, x, fill),
        "selectjit.dask.where": selectjit.dask.where(mask, x, fill),
        "selectjit 1 thread": da.blockwise(one_thread.where, "ij", mask, "ij", x, "ij",
                                           fill, None, dtype=x.dtype),
    }


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=4.0, help="size of x in GiB (default 4)")
    ap.add_argument("--chunk-mib", type=float, default=128.0, help="block size in MiB (128)")
    ap.add_argument("--cols", type=int, default=8192, help="width of x (8192)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (2)")
    ap.add_argument("--memory-limit", default="5GiB", help="per worker (5GiB)")
    ap.add_argument("--rounds", type=int, default=5, help="timing rounds (5)")
    ap.add_argument("--tiny", action="store_true",
                    help="a check that the script works: 8 MiB in 512 KiB blocks, 1GiB limits, "
                         "1 round, results also compared with numpy.where here")
    args = ap.parse_args()
    if args.tiny:
        args.gib, args.chunk_mib, args.cols = 8 / 1024, 0.5, 1024
        args.memory_limit, args.rounds = "1GiB", 1
    limit = parse_bytes(args.memory_limit)
    chunk_rows = max(1, int(args.chunk_mib * 2**20) // (4 * args.cols))
    rows = max(chunk_rows, int(args.gib * 2**30) // (4 * args.cols) // chunk_rows * chunk_rows)

    print(f"selectjit {selectjit.__version__}, numpy {np.__version__}, dask {dask.__version__}, "
          f"distributed {distributed.__version__}, Python {platform.python_version()}; "
          f"CPU {cpu_model()} ({os.cpu_count()} logical)")
    with LocalCluster(n_workers=args.workers, processes=True, threads_per_worker=1,
                      memory_limit=limit, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        client.wait_for_workers(args.workers, timeout=120)
        rng = da.random.default_rng(0)
        x = rng.standard_normal((rows, args.cols), chunks=(chunk_rows, args.cols),
                                dtype=np.float32)
        mask = rng.random((1, args.cols), chunks=(1, args.cols)) < 0.9
        fill = np.float32(-np.inf)
        t = time.perf_counter()
        x, mask = client.persist([x, mask])
        wait([x, mask])
        print(f"x: {rows} x {args.cols} float32 = {format_bytes(x.nbytes)} in {x.npartitions} "
              f"blocks of {format_bytes(x.nbytes / x.npartitions)}, generated on "
              f"{args.workers} workers (1 thread, memory limit {format_bytes(limit)} each) in "
              f"{time.perf_counter() - t:.1f} s")
        held = client.has_what()
        per_worker = sorted(sum(k[0] == x.name for k in keys) for keys in held.values())
        print(f"blocks of x held per worker: {', '.join(map(str, per_worker))}")
        tiers = sorted({t or "none" for t in client.run(engine_tier).values()})
        print(f"the workers' engines compile with tier {', '.join(tiers)}")
        runs = contenders(mask, x, fill)
        names = list(runs)

        # Correctness, untimed: each selectjit output block against dask.array.where's.
        ref = runs["dask.array.where"]
        for name in names[1:]:
            nb = ref.numblocks
            eq = da.map_blocks(same_bytes, runs[name], ref, dtype=bool,
                               chunks=tuple((1,) * n for n in nb))
            assert client.compute(eq.all()).result(), f"{name} differs from dask.array.where"
            if args.tiny:
                got, xs, ms = client.gather(client.compute([runs[name], x, mask]))
                assert got.tobytes() == np.where(ms, xs, fill).tobytes(), name
        print("every output block of the selectjit contenders is bitwise dask.array.where's")

        pids = client.run(os.getpid)
        times = {n: [] for n in names}
        peaks = {n: {} for n in names}
        spilled = {}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                store = da.store(runs[name], Sink(), lock=False, compute=False)
                client.run(reset_peak)
                t = time.perf_counter()
                client.compute(store).result()
                times[name].append(time.perf_counter() - t)
                for w, (hwm, sp) in client.run(peak_and_spill).items():
                    peaks[name][w] = max(peaks[name].get(w, 0), hwm)
                    spilled[w] = sp
        restarted = client.run(os.getpid) != pids

    ref = times["dask.array.where"]
    print(f"\n{args.rounds} rounds; wall time of the masked fill over all {x.npartitions} blocks "
          f"(median and fastest), the per-round ratio dask.array.where / contender (median and "
          f"range: each round times the contenders back to back, so this is not the ratio of the "
          f"medians), each worker's peak RSS (max over rounds):\n")
    print("| contender | wall s (median) | fastest s | da.where / contender | peak RSS per worker "
          "| over limit |")
    print("|---|---:|---:|---:|---|---|")
    any_over = False
    for name in names:
        ratios = sorted(a / b for a, b in zip(ref, times[name]))
        rss = sorted(peaks[name].values())
        over = [p for p in rss if p > limit]
        any_over |= bool(over)
        print(f"| {name} | {statistics.median(times[name]):.2f} | {min(times[name]):.2f} | "
              f"{statistics.median(ratios):.2f} ({ratios[0]:.2f}–{ratios[-1]:.2f}) | "
              f"{', '.join(format_bytes(p) for p in rss)} | {'YES' if over else 'no'} |")
    print(f"\nmemory limit {format_bytes(limit)} per worker; any worker over it: "
          f"{'YES' if any_over else 'no'}; workers restarted: {'YES' if restarted else 'no'}; "
          f"spilled to disk: {format_bytes(sum(spilled.values()))}")
    print("per-round times (s): " + "; ".join(
        f"{n}: {', '.join(f'{t:.2f}' for t in times[n])}" for n in names))
    if any_over or restarted:
        sys.exit(1)


if __name__ == "__main__":
    main()

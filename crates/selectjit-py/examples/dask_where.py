"""selectjit.where block by block inside dask.array, on any dask scheduler: threads, local
processes, or a dask.distributed cluster (the same graph, one selectjit call per block).

    python examples/dask_where.py                                  # threaded scheduler
    python examples/dask_where.py --scheduler processes            # a pool of local processes
    python examples/dask_where.py --scheduler distributed          # a LocalCluster started here
    python examples/dask_where.py --scheduler distributed=tcp://scheduler:8786   # your cluster
    python examples/dask_where.py --sync                           # synchronous (debugging)

On a cluster every worker needs selectjit (and numpy, dask) installed; each worker process
compiles its own kernels once and reuses them, which the example shows from the workers'
engine statistics.
"""

import argparse
import os

import dask
import dask.array as da
import numpy as np

import selectjit
import selectjit.dask


def masked_scores(scores, mask, fill):
    """`where(mask, scores, fill)` over dask arrays, one selectjit call per block.

    `mask` may be smaller than `scores` (it is broadcast, numpy's rule); `fill` is a scalar or a
    row broadcast along the leading axis. `selectjit.dask.where` lines up the blocks of the
    three inputs and broadcasts size-1 dimensions exactly as numpy would for the whole arrays,
    with `dask.array.where`'s chunks and numpy's result dtype.
    """
    return selectjit.dask.where(mask, scores, fill)


def engine_stats():
    """Run on each worker (`client.run`): its process, and its engine's kernel counters."""
    s = selectjit.default_engine().stats()
    return os.getpid(), s["compiles"], s["generic_compiles"]


def scheduler_arg(value):
    name, _, address = value.partition("=")
    if name not in ("threads", "processes", "synchronous", "distributed") or (
            address and name != "distributed"):
        raise argparse.ArgumentTypeError(
            f"{value!r}: threads, processes, synchronous or distributed[=ADDRESS]")
    return name, address or None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheduler", type=scheduler_arg, default=("threads", None),
                    metavar="threads|processes|distributed[=ADDRESS]",
                    help="threads (default), processes, or distributed: a LocalCluster of two "
                         "worker processes started here, or the cluster whose scheduler is at "
                         "ADDRESS")
    ap.add_argument("--sync", action="store_true", help="synchronous scheduler (debugging)")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=2048)
    args = ap.parse_args()
    scheduler, address = ("synchronous", None) if args.sync else args.scheduler

    rs = da.random.RandomState(42)
    scores = rs.standard_normal((args.rows, args.cols), chunks=(512, 512)).astype(np.float32)
    mask = rs.random_sample((1, args.cols), chunks=(1, 512)) < 0.9     # broadcast over rows
    fill = da.from_array(np.full(args.cols, -np.inf, np.float32), chunks=512)

    out = masked_scores(scores, mask, fill)
    print(f"{out.numblocks[0] * out.numblocks[1]} blocks of {out.chunksize}, dtype {out.dtype}, "
          f"scheduler {scheduler}{' at ' + address if address else ''}")

    if scheduler == "distributed":
        got, s, m, f = compute_on_cluster(address, out, scores, mask, fill)
    else:
        with dask.config.set(scheduler=scheduler):
            got, s, m, f = dask.compute(out, scores, mask, fill)
    want = np.where(m, s, f)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), "differs from numpy.where"
    print(f"{got.size} elements, bit-identical to numpy.where")


def compute_on_cluster(address, *arrays):
    """The arrays computed twice on a dask.distributed cluster (a LocalCluster of two worker
    processes when `address` is None) and gathered; each worker reports the kernels it compiled
    in each run: the second run reuses the first's."""
    from distributed import Client, LocalCluster

    cluster = None
    if address is None:
        cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                               dashboard_address=None)
        address = cluster
    try:
        with Client(address) as client:
            before = client.run(engine_stats)
            for run in (1, 2):
                results = client.gather(client.compute(list(arrays)))
                after = client.run(engine_stats)
                for w in sorted(after):
                    pid, compiles, generic = after[w]
                    prev = before.get(w, (pid, 0, 0))
                    print(f"run {run}: worker {w} (pid {pid}) compiled {compiles - prev[1]} "
                          f"exact and {generic - prev[2]} shape-generic kernels")
                before = after
            return results
    finally:
        if cluster is not None:
            cluster.close()


if __name__ == "__main__":
    main()

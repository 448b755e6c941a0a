"""selectjit.where block by block inside dask.array: the same code scales from one machine's
threads to a dask.distributed cluster (the scheduler runs the same tasks).

    python examples/dask_where.py            # threaded scheduler
    python examples/dask_where.py --sync     # synchronous scheduler (debugging)

With dask.distributed, create a `Client(...)` first; nothing else changes.
"""

import argparse

import dask
import dask.array as da
import numpy as np

import selectjit


def masked_scores(scores, mask, fill):
    """`where(mask, scores, fill)` over dask arrays, one selectjit call per block.

    `mask` may be smaller than `scores` (it is broadcast, numpy's rule); `fill` is a scalar or a
    row broadcast along the leading axis. blockwise lines up the blocks of the three inputs and
    broadcasts size-1 dimensions, exactly as numpy would for the whole arrays.
    """
    dtype = np.result_type(scores.dtype, getattr(fill, "dtype", fill))
    ind = "ij"
    fill_ind = "j" if getattr(fill, "ndim", 0) == 1 else None
    return da.blockwise(
        selectjit.where, ind,
        mask, ind[-mask.ndim:],
        scores, ind,
        fill, fill_ind,
        dtype=dtype,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sync", action="store_true", help="synchronous scheduler")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=2048)
    args = ap.parse_args()

    rs = da.random.RandomState(42)
    scores = rs.standard_normal((args.rows, args.cols), chunks=(512, 512)).astype(np.float32)
    mask = rs.random_sample((1, args.cols), chunks=(1, 512)) < 0.9     # broadcast over rows
    fill = da.from_array(np.full(args.cols, -np.inf, np.float32), chunks=512)

    out = masked_scores(scores, mask, fill)
    print(f"{out.numblocks[0] * out.numblocks[1]} blocks of {out.chunksize}, dtype {out.dtype}")

    with dask.config.set(scheduler="synchronous" if args.sync else "threads"):
        got, s, m, f = dask.compute(out, scores, mask, fill)
    want = np.where(m, s, f)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), "differs from numpy.where"
    print(f"{got.size} elements, bit-identical to numpy.where")


if __name__ == "__main__":
    main()

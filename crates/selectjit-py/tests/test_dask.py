"""Scale-out: selectjit.where per block inside dask.array (blockwise / map_blocks) over many
chunks with broadcasting inputs, bitwise against numpy.where on the whole arrays; and dask
arrays handed to selectjit.where go to dask, as numpy.where sends them."""

import importlib.util
import pathlib

import dask
import dask.array as da
import ml_dtypes
import numpy as np
import pytest

import selectjit

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "dask_where.py"


def load_example():
    spec = importlib.util.spec_from_file_location("dask_where", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int8,
                                   np.complex128], ids=lambda d: np.dtype(d).name)
def test_blockwise_with_broadcasting(scheduler, dtype):
    rng = np.random.default_rng(0)
    s = rng.standard_normal((300, 257)).astype(dtype)
    m = rng.random((1, 257)) < 0.7
    f = rng.standard_normal(257).astype(dtype)
    scores = da.from_array(s, chunks=(37, 50))        # irregular edge chunks, 9 x 6 blocks
    mask = da.from_array(m, chunks=(1, 50))
    fill = da.from_array(f, chunks=50)
    out = load_example().masked_scores(scores, mask, fill)
    assert out.numblocks == (9, 6)
    with dask.config.set(scheduler=scheduler):
        got = out.compute()
    want = np.where(m, s, f)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_map_blocks_three_dims_and_scalars(scheduler):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 64, 96)).astype(np.float32)
    c = rng.random((64, 96)) < 0.5
    dx = da.from_array(x, chunks=(2, 32, 48))
    dc = da.from_array(c, chunks=(32, 48))
    out = da.map_blocks(selectjit.where, dc, dx, np.float32(-1.0), dtype=np.float32)
    with dask.config.set(scheduler=scheduler):
        got = out.compute()
    assert got.tobytes() == np.where(c, x, np.float32(-1.0)).tobytes()


def test_example_runs():
    mod = load_example()
    import sys

    argv = sys.argv
    sys.argv = ["dask_where.py", "--sync", "--rows", "600", "--cols", "520"]
    try:
        mod.main()
    finally:
        sys.argv = argv


def test_dask_arrays_are_dispatched_like_numpy():
    rng = np.random.default_rng(2)
    c = rng.random((40, 30)) < 0.5
    x = rng.standard_normal((40, 30))
    dc = da.from_array(c, chunks=10)
    want = np.where(dc, x, 0.0)
    got = selectjit.where(dc, x, 0.0)
    assert type(got) is type(want)
    assert got.compute().tobytes() == want.compute().tobytes()
    out = np.empty((40, 30))
    r = selectjit.where(dc, x, 0.0, out=out)
    assert r is out and out.tobytes() == np.where(c, x, 0.0).tobytes()

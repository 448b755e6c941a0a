"""selectjit.dask.select and selectjit.dask.nan_to_num against numpy.select / numpy.nan_to_num
on the computed arrays, bitwise, over several chunkings, with lazy predicates over dask arrays
as conditions; the errors numpy raises, raised before anything is computed."""

import dask.array as da
import numpy as np
import pytest

import selectjit
import selectjit.dask as sjd


def data(seed, shape, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    k = rng.random(shape)
    x[k < 0.1] = np.nan
    x[(k >= 0.1) & (k < 0.15)] = np.inf
    x[(k >= 0.15) & (k < 0.2)] = -np.inf
    return x


@pytest.mark.parametrize("chunks", [(7, 11), (50, 60), (100, 13)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64])
def test_nan_to_num(chunks, dtype):
    x = data(1, (100, 60)).astype(dtype)
    r = sjd.nan_to_num(da.from_array(x, chunks=chunks), posinf=9.0)
    assert isinstance(r, da.Array)
    got = r.compute(scheduler="synchronous")
    want = np.nan_to_num(x, posinf=9.0)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("chunks", [(7, 11), (100, 60)])
def test_select(chunks):
    x = data(2, (100, 60))
    dx = da.from_array(x, chunks=chunks)
    row = np.arange(60, dtype=np.float64)
    want = np.select([x < -1, np.isnan(x), x > 1], [x * 2, row, 5], 7)
    for conds in ([dx < -1, da.isnan(dx), dx > 1],
                  [selectjit.less(dx, -1), selectjit.isnan(dx), selectjit.greater(dx, 1)]):
        r = sjd.select(conds, [dx * 2, row, 5], 7)
        assert isinstance(r, da.Array)
        got = r.compute(scheduler="synchronous")
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def test_select_errors():
    dx = da.from_array(data(3, (10,)), chunks=5)
    with pytest.raises(ValueError, match="same length"):
        sjd.select([dx > 0], [])
    with pytest.raises(ValueError, match="empty condition list"):
        sjd.select([], [])
    with pytest.raises(ValueError):
        sjd.select([dx > 0], [np.zeros(3)])
    with pytest.raises(TypeError, match="common dtype"):
        sjd.select([dx > 0], [np.array(["a"])], 1.5)

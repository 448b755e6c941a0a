"""selectjit.dask.where against dask.array.where, bitwise: dtypes (random bit patterns: NaN
payloads, -0.0), chunkings, broadcasting, numpy arrays, lists, Python and numpy scalars, 0-d
arrays; the same dtype, shape and chunks as dask.array.where, the same errors; the package's
layout (the extension re-exported, dask imported only when used, pickling)."""

import pickle
import subprocess
import sys

import cloudpickle
import dask
import dask.array as da
import ml_dtypes
import numpy as np
import pytest

import selectjit
import selectjit.dask as sjd

# Random bit patterns make numpy warn about its own casts (NaN to bool, signalling NaNs widened,
# 1e300 to float16): numpy.where, dask.array.where and selectjit warn alike.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16, ml_dtypes.bfloat16,
          np.float32, np.float64, np.complex64, np.complex128, "M8[ns]", "S4"]


def bits(rng, shape, dtype):
    """An array of `dtype` filled with random bytes (bool: 0/1)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    n = int(np.prod(shape)) * dtype.itemsize
    return rng.integers(0, 256, n, dtype=np.uint8).view(dtype).reshape(shape)


def materialize(a):
    return a.compute(scheduler="synchronous") if isinstance(a, da.Array) else a


def same(cond, x, y, scheduler="synchronous"):
    """selectjit.dask.where and dask.array.where give the same array (type, dtype, shape,
    chunks) whose blocks compute to the same bytes, which are numpy.where's on the whole
    arrays."""
    got = sjd.where(cond, x, y)
    want = da.where(cond, x, y)
    assert isinstance(got, da.Array)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape and got.chunks == want.chunks, (got.chunks, want.chunks)
    g = got.compute(scheduler=scheduler)
    w = want.compute(scheduler=scheduler)
    ref = np.where(materialize(cond), materialize(x), materialize(y))
    assert isinstance(g, np.ndarray)
    assert g.dtype == w.dtype == ref.dtype and g.shape == w.shape == ref.shape
    assert g.tobytes() == w.tobytes() == ref.tobytes()
    return got


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtypes_bitwise(dtype):
    rng = np.random.default_rng(0)
    x = bits(rng, (70, 45), dtype)
    y = bits(rng, (70, 45), dtype)
    c = rng.random((70, 45)) < 0.5
    same(da.from_array(c, chunks=(16, 20)), da.from_array(x, chunks=(16, 20)),
         da.from_array(y, chunks=(16, 20)))


@pytest.mark.parametrize("chunks", [(64, 33), (7, 100), ((10, 20, 34), (1, 99, 1)), -1],
                         ids=["regular", "thin", "irregular", "one"])
def test_chunkings_and_broadcasting(chunks):
    rng = np.random.default_rng(1)
    x = bits(rng, (64, 101), np.float32)
    dx = da.from_array(x, chunks=chunks)
    row = da.from_array(rng.random((1, 101)) < 0.5, chunks=(1, 25))     # chunks differ from x's
    col = da.from_array(rng.random((64, 1)) < 0.5, chunks=(9, 1))
    vec = da.from_array(bits(rng, (101,), np.float32), chunks=50)
    same(row, dx, vec)
    same(col, vec, dx)
    same(row, col, dx)                                     # cond broadcast from two sides
    same(col, dx, np.float32(-np.inf))
    same(dx, dx, dx[::-1])                                 # float condition (non-zero test)


def test_three_dims_and_outer_broadcast():
    rng = np.random.default_rng(2)
    x = da.from_array(bits(rng, (6, 1, 40), np.float64), chunks=(2, 1, 16))
    y = da.from_array(bits(rng, (30, 1), np.float64), chunks=(7, 1))
    c = da.from_array(rng.random((1, 30, 40)) < 0.3, chunks=(1, 10, 20))
    got = same(c, x, y)
    assert got.shape == (6, 30, 40)


@pytest.mark.parametrize("y", [0, -1, 300, 0.5, -0.0, 1e300, 2j, True, np.float32(0.25),
                               np.int16(-7), np.float64(-0.0), np.array(3.5), np.array(7, np.int8),
                               np.array(True)],
                         ids=repr)
@pytest.mark.parametrize("xdtype", [np.int8, np.uint8, np.float16, np.float32, np.complex64,
                                    np.bool_], ids=lambda d: np.dtype(d).name)
def test_scalars_follow_nep50(xdtype, y):
    """Python scalars are weak (`int8 array, 300` wraps as numpy's), numpy scalars and 0-d arrays
    are not, on either side."""
    rng = np.random.default_rng(3)
    x = da.from_array(bits(rng, (20, 30), xdtype), chunks=(8, 16))
    c = da.from_array(rng.random((20, 30)) < 0.5, chunks=(8, 16))
    try:
        np.where(np.ones(1, bool), np.ones(1, xdtype), y)
    except Exception as e:  # noqa: BLE001 - numpy's own error is the expectation
        for w in (da.where, sjd.where):
            with pytest.raises(type(e)):
                w(c, x, y)
        return
    same(c, x, y)
    same(c, y, x)


def test_numpy_arrays_lists_and_mixed_dtypes():
    rng = np.random.default_rng(4)
    x = bits(rng, (40, 30), np.int8)
    y = bits(rng, (40, 30), np.float32)
    c = rng.random((40, 30)) < 0.5
    dc = da.from_array(c, chunks=(10, 15))
    same(dc, x, y)                                  # numpy operands rechunked to the condition's
    same(c, da.from_array(x, chunks=(40, 7)), y)    # numpy condition
    same(c, x, y)                                   # numpy only: one block, like dask's
    same([True, False, True], da.arange(3, chunks=2), [7, 8, 9])
    same(dc, da.from_array(x, chunks=(20, 10)), da.from_array(y, chunks=(5, 30)))


def test_zero_dimensional():
    rng = np.random.default_rng(5)
    x = da.from_array(bits(rng, (12, 5), np.float16), chunks=(5, 5))
    d0 = da.from_array(np.array(True))
    got = same(d0, x, np.float16(1))               # a 0-d dask condition
    assert got.numblocks == (3, 1)
    same(np.array(False), x, 2.0)
    same(da.from_array(np.array(1.5)), x, 7)       # a 0-d dask x: float64, not weak
    for args in [(True, 1.0, 2), (np.array(True), np.float32(1), 0), (np.array(0), 1, 2j),
                 (d0, np.int8(1), 300), (d0, da.from_array(np.array(2, np.uint8)), -1)]:
        try:
            got = same(*args)
        except OverflowError:                      # numpy refuses 300 as int8 / -1 as uint8
            for w in (np.where, da.where, sjd.where):
                with pytest.raises(OverflowError):
                    materialize(w(*args))
            continue
        assert got.shape == () and got.ndim == 0


def test_empty_and_nan_payloads():
    rng = np.random.default_rng(6)
    e = da.from_array(np.empty((0, 8), np.float32), chunks=(4, 4))
    same(da.from_array(rng.random((1, 8)) < 0.5, chunks=(1, 4)), e, np.float32(1))
    nan = np.array([0x7FC00001, 0x7F800001, 0xFFC12345, 0x80000000], np.uint32).view(np.float32)
    x = da.from_array(np.tile(nan, 50), chunks=37)
    same(da.from_array(np.arange(200) % 3 == 0, chunks=50), x, x[::-1])


def test_errors_are_numpys_and_raised_before_computing():
    """Shapes that do not broadcast: numpy's and dask's ValueError. Dtypes that do not promote:
    numpy's DTypePromotionError (dask.array.where returns NotImplemented there)."""
    rng = np.random.default_rng(7)
    x = da.from_array(rng.standard_normal((10, 6)), chunks=5)
    for args, dask_raises in [((x > 0, x, np.zeros((3, 6))), True),
                              ((np.ones((10, 5), bool), x, 0.0), True),
                              ((x > 0, x, np.zeros(6, "M8[s]")), False),
                              ((x > 0, np.zeros(6, "S3"), 1.5), False)]:
        plain = [materialize(a) for a in args]
        with pytest.raises(Exception) as want:
            np.where(*plain)
        with pytest.raises(Exception) as got:
            sjd.where(*args)
        assert type(got.value) is type(want.value), (got, want)
        assert isinstance(want.value, (ValueError, np.exceptions.DTypePromotionError))
        if dask_raises:
            with pytest.raises(type(want.value)):
                da.where(*args)


class Greater:
    """A condition that is not an array: `a > b` evaluated block by block through the hook
    `selectjit.dask.where` offers to such objects (`np.greater` pickles by reference)."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __selectjit_blocks__(self):
        return np.greater, (self.a, self.b)


def test_a_condition_evaluated_on_blocks():
    rng = np.random.default_rng(8)
    a = da.from_array(rng.standard_normal((50, 40)).astype(np.float32), chunks=(20, 15))
    b = rng.standard_normal(40).astype(np.float32)               # numpy, broadcast as a row
    y = da.from_array(bits(rng, (50, 1), np.float32), chunks=(7, 1))
    got = sjd.where(Greater(a, b), a, y)
    want = da.where(a > b, a, y)
    assert got.dtype == want.dtype and got.chunks == want.chunks
    ref = np.where(a.compute() > b, a.compute(), y.compute())
    assert got.compute(scheduler="threads").tobytes() == ref.tobytes()
    got = sjd.where(Greater(a, 0), a, 0.0)                        # ReLU: scalar operand, weak y
    assert got.dtype == np.float32
    assert got.compute().tobytes() == np.maximum(a.compute(), 0).tobytes()
    with pytest.raises(ValueError):
        sjd.where(Greater(a, np.zeros(7)), a, 0.0)                # operands broadcast with x, y


def test_lazy_predicates_blockwise():
    """selectjit's predicates as conditions: evaluated block by block, fused into each block's
    kernel call; bitwise against numpy on the whole arrays."""
    rng = np.random.default_rng(12)
    xn = bits(rng, (60, 33), np.float32)
    bn = bits(rng, (33,), np.float16)                              # another dtype, a row
    x = da.from_array(xn, chunks=(16, 10))
    b = da.from_array(bn, chunks=11)
    cases = [
        (selectjit.greater(x, 0), np.greater(xn, 0), x, 0.0, xn, 0.0),          # ReLU
        (selectjit.less_equal(x, b), np.less_equal(xn, bn), b, x, bn, xn),
        (selectjit.isnan(x), np.isnan(xn), 0.0, x, 0.0, xn),
        (selectjit.logical_not(selectjit.isfinite(x)), ~np.isfinite(xn), x, -1, xn, -1),
        (selectjit.logical_not(x), np.logical_not(xn), 1, x, 1, xn),            # x == 0
        (selectjit.not_equal(xn, b), np.not_equal(xn, bn), x, bn, xn, bn),      # numpy lhs
        (selectjit.equal(x, 2**70 + 1), np.equal(xn, 2**70 + 1), x, 0, xn, 0),  # numpy's eval
    ]
    for p, want_mask, px, py, nx, ny in cases:
        got = sjd.where(p, px, py)
        assert isinstance(got, da.Array)
        want = np.where(want_mask, nx, ny)
        g = got.compute(scheduler="threads")
        assert g.dtype == want.dtype and g.shape == want.shape
        assert g.tobytes() == want.tobytes()
        # Each block's condition is a fused predicate (those numpy evaluates aside).
        make, operands = p.__selectjit_blocks__()
        blocks = [materialize(o[(slice(0, 4),) * (np.ndim(o) - 1) + (slice(0, 5),)])
                  if np.ndim(o) else o for o in operands]
        q = make(*blocks)
        assert q._fused is (p is not cases[-1][0])
    # A predicate over dask arrays is a dask computation anywhere else.
    p = selectjit.greater(x, 0)
    assert p.shape == xn.shape and p.dtype == bool
    assert np.asarray(p).tobytes() == np.greater(xn, 0).tobytes()
    with pytest.raises(ValueError):
        sjd.where(selectjit.greater(x, 0), np.zeros(7), 0.0)


def test_threads_scheduler_and_many_blocks():
    rng = np.random.default_rng(9)
    x = da.from_array(bits(rng, (512, 256), np.float32), chunks=(32, 64))
    m = da.from_array(rng.random((1, 256)) < 0.8, chunks=(1, 64))
    with dask.config.set(scheduler="threads"):
        got = sjd.where(m, x, np.float32(0))
        assert got.numblocks == (16, 4)
        same(m, x, np.float32(0), scheduler="threads")


def test_package_layout_and_lazy_dask_import():
    """`selectjit` is a package re-exporting its extension (the functions' module is
    `selectjit`); neither `import selectjit` nor `import selectjit.dask` imports dask, calling
    `selectjit.dask.where` does; `selectjit.dask` is reachable as an attribute."""
    code = (
        "import sys, selectjit, selectjit.dask\n"
        "assert 'dask' not in sys.modules, 'imported dask early'\n"
        "assert selectjit.where.__module__ == 'selectjit' == selectjit.Engine.__module__\n"
        "assert selectjit.default_engine.__module__ == 'selectjit'\n"
        "assert {'Engine', 'default_engine', 'where', 'greater', 'logical_not', 'SelectError'}"
        " <= set(selectjit.__all__)\n"
        "assert all(getattr(selectjit, n).__module__ == 'selectjit' for n in selectjit.__all__)\n"
        "import numpy as np\n"
        "r = selectjit.dask.where(np.array([True, False]), 1.0, np.zeros(2))\n"
        "assert 'dask' in sys.modules and r.compute().tolist() == [1.0, 0.0]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    import importlib.resources

    files = importlib.resources.files("selectjit")
    assert files.joinpath("py.typed").is_file() and files.joinpath("_selectjit.pyi").is_file()
    assert selectjit.dask is sjd
    with pytest.raises(AttributeError):
        selectjit.no_such_name


def test_what_travels_to_workers_pickles():
    """The functions pickle by reference; the default engine unpickles as the process's default
    engine, another engine as the process's shared engine of its configuration; a graph of
    selectjit.dask.where round-trips through cloudpickle (as dask sends tasks)."""
    for f in (selectjit.where, selectjit.default_engine, sjd.where, selectjit.Engine):
        assert pickle.loads(pickle.dumps(f)) is f
        assert cloudpickle.loads(cloudpickle.dumps(f)) is f
    e = selectjit.default_engine()
    assert pickle.loads(pickle.dumps(e)) is e
    assert pickle.loads(pickle.dumps(e.where)).__self__ is e
    own = selectjit.Engine(threads=1)
    a, b = pickle.loads(pickle.dumps(own)), cloudpickle.loads(cloudpickle.dumps(own))
    assert a is b and a is not own and a.threads == 1
    assert a is selectjit._shared_engine("auto", 1)
    unset = pickle.loads(pickle.dumps(selectjit.Engine()))
    assert unset.threads == selectjit.Engine().threads      # the receiving host's default
    rng = np.random.default_rng(10)
    x = da.from_array(rng.standard_normal((30, 20)), chunks=10)
    r = sjd.where(x > 0, x, 0.0)
    r2 = cloudpickle.loads(cloudpickle.dumps(r))
    assert r2.compute().tobytes() == np.where(x.compute() > 0, x.compute(), 0.0).tobytes()

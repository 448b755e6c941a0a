"""Views in every layout go to the kernels as they are; results bitwise against numpy.where,
memory order included."""

import numpy as np
import pytest

import selectjit
from conftest import assert_same, check

RNG = np.random.default_rng(7)
DTYPES = [np.bool_, np.int8, np.float16, np.float32, np.float64, np.complex128]


def data(shape, dtype):
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) * dt.itemsize
    return RNG.integers(0, 256, n, dtype=np.uint8).view(dt).reshape(shape)


def layouts(a):
    """`a` (3-d) in many memory layouts, each a view with the same values."""
    yield "C", np.ascontiguousarray(a)
    yield "F", np.asfortranarray(a)
    big = np.empty(tuple(2 * d for d in a.shape), a.dtype)
    v = big[1::2, ::2, 1::2]
    v[...] = a
    yield "sliced", v
    r = np.empty_like(a)[::-1, ::-1, ::-1]
    r[...] = a[::-1, ::-1, ::-1]
    yield "reversed", r[::-1, ::-1, ::-1]
    t = np.ascontiguousarray(a.transpose(2, 0, 1)).transpose(1, 2, 0)
    yield "transposed", t
    m = np.empty((a.shape[0], a.shape[1], 2 * a.shape[2]), a.dtype)[:, ::-1, ::-2]
    m[...] = a
    yield "mixed-signs", m


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_layout_combination(dtype, engine):
    shape = (3, 4, 5)
    c0, x0, y0 = RNG.random(shape) < 0.5, data(shape, dtype), data(shape, dtype)
    for nc, c in layouts(c0):
        for nx, x in layouts(x0):
            for ny, y in layouts(y0):
                want = check(c, x, y, engine)
                assert want is not None, (nc, nx, ny)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_layouts_with_broadcasting(dtype, engine):
    x0, y0 = data((3, 4, 5), dtype), data((4, 1), dtype)
    for _, x in layouts(x0):
        check((RNG.random(5) < 0.5)[::-1], x, y0, engine)
        check((RNG.random((3, 1, 5)) < 0.5), x[:, ::-1], y0[::-1], engine)
        check(np.broadcast_to(RNG.random((1, 4, 1)) < 0.5, (3, 4, 5)), x, y0.T[:, :, None], engine)
        check(True, x, y0[::-1], engine)


def test_zero_d_and_scalars():
    for c in (np.array(True), np.array(False), np.bool_(True)):
        check(c, np.array(1.5, np.float32), np.array(-2.5, np.float32))
        check(c, np.array(1.5), np.arange(3.0))
    got = selectjit.where(np.array(True), np.array(1), np.array(2))
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.int64


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4), (2, 0, 3)], ids=str)
def test_empty(shape, engine):
    x = np.zeros(shape, np.float32)
    check(np.ones(shape, bool), x, x, engine)
    check(np.ones(shape[-1:], bool), x, 1.0, engine)
    check(True, x[::-1], np.zeros(shape, np.float64), engine)


def test_broadcast_views_with_zero_strides():
    x = np.broadcast_to(np.arange(5.0), (4, 5))
    y = np.broadcast_to(np.arange(4.0)[:, None], (4, 5))
    c = np.broadcast_to(np.array([True, False, True, False, True]), (4, 5))
    check(c, x, y)
    check(c, x[::-1], y[:, ::-1])


def test_strides_not_multiples_of_the_itemsize():
    """Fields of packed structures: byte strides that are no multiple of the element size are
    copied first (or numpy's path), the result is the same."""
    s = np.zeros(7, dtype=[("a", "i1"), ("b", "<f4"), ("c", "<f8")])
    s["b"] = np.arange(7) * 1.5
    s["c"] = -np.arange(7)
    s["a"] = [0, 1, 2, 0, 1, 0, 5]
    assert s["b"].strides[0] % 4 != 0
    check(s["a"], s["b"], s["c"])
    check(s["a"].view(bool), s["b"][::-1], np.float32(0))
    check(s["a"] > 0, s["c"][::2], s["b"][1::2])


def test_misaligned_views():
    m = np.frombuffer(bytearray(8 * 11 + 1), dtype=np.float64, count=11, offset=1)
    m[...] = np.arange(11) * 1.25
    assert not m.flags.aligned
    check(np.arange(11) % 3 == 0, m, -m[::-1])
    out = np.frombuffer(bytearray(8 * 11 + 3), dtype=np.float64, count=11, offset=3)
    want = np.where(np.arange(11) % 2 == 0, m, 7.0)
    got = selectjit.where(np.arange(11) % 2 == 0, m, 7.0, out=out)
    assert got is out and out.tobytes() == want.tobytes()


def test_noncontiguous_big_inputs_release_the_gil_path():
    x = data((300, 400), np.float32)[:, ::-1]
    y = data((400, 300), np.float32).T
    check(RNG.random((300, 1)) < 0.5, x, y)
    check(RNG.random(400) < 0.5, x[::-2], y[::2])


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_subclasses_give_base_arrays():
    m = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    check([[True, False], [False, True]], m, 0.0)
    rec = np.rec.array([(1, 2.0), (3, 4.0)], dtype=[("a", "i8"), ("b", "f8")])
    check([True, False], rec, rec[::-1])

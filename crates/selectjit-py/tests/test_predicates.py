"""Lazy predicates (`selectjit.greater(x, 0)`, ...): `selectjit.where` with them, bit for bit
against `numpy.where(numpy.greater(x, 0), ...)`, and the predicate as numpy's bool array
everywhere else."""

import pickle
import warnings

import numpy as np
import pytest

import selectjit as sj
from conftest import assert_same

# numpy warns ("invalid value encountered") comparing signaling NaNs and complex NaNs; a fused
# predicate gives the same values without that warning (see docs/python.md).
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

CMPS = ["greater", "greater_equal", "less", "less_equal", "equal", "not_equal"]
TESTS = ["isnan", "isinf", "isfinite"]
DTYPES = ["?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]


def edge_values(dt):
    """Edge values of `dt` (min/max, 0, ±1; NaN payloads of both signs, ±0, ±inf,
    subnormals), as a 1-d array."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return np.array([0, 1, 2, 255], np.uint8).view(bool)  # non-0/1 bytes are true
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = [info.min, info.max, 0, 1, info.max - 1, info.min + 1, info.max // 2 + 1]
        if dt.kind == "i":
            v += [-1, -2]
        return np.array(v, dt)
    if dt.kind == "f":
        bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
        fi = np.finfo(dt)
        n = dt.itemsize * 8
        mant = fi.nmant
        qnan = ((1 << (n - 1)) - 1) ^ ((1 << mant) - 1)  # exponent all ones ...
        payloads = np.array([qnan | (1 << (mant - 1)), qnan | 1, qnan | (1 << (mant - 1)) | 5,
                             (1 << (n - 1)) | qnan | (1 << (mant - 1)) | 3], bits).view(dt)
        sub = np.array([1, 3, (1 << mant) - 1], bits).view(dt)
        v = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, fi.max, -fi.max, fi.tiny,
                      -fi.tiny, 0.5], dt)
        return np.concatenate([v, payloads, sub, -sub])
    # complex: parts from the float edge values
    f = edge_values("f4" if dt.itemsize == 8 else "f8")
    re = np.concatenate([f, f[:5], np.full(5, np.nan, f.dtype)])
    im = np.concatenate([f[::-1], np.zeros(5, f.dtype), f[:5]])
    c = np.empty(len(re), dt)
    c.real, c.imag = re, im
    return c


def grid(dt):
    """Every pair of edge values of `dt`: (lhs column, rhs row)."""
    v = edge_values(dt)
    return v[:, None], v[None, :]


def numpy_pred(kind, *args):
    return getattr(np, kind)(*args)


def check_where(p, want_mask, x, y, **kw):
    """selectjit.where(p, x, y) against numpy.where(want_mask, x, y), and np.asarray(p)
    against want_mask, bit for bit."""
    want = np.where(want_mask, x, y)
    got = sj.where(p, x, y, **kw)
    assert_same(got, want)
    m = np.asarray(p)
    assert_same(m, np.asarray(want_mask), layout=False)
    return got


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("kind", CMPS)
def test_comparisons_of_edge_values(kind, dt):
    a, b = grid(dt)
    p = getattr(sj, kind)(a, b)
    assert p._fused, "a comparison of two arrays of one dtype runs in the kernel"
    want = numpy_pred(kind, a, b)
    # Values to move: of another dtype than the operands' (f8), with a NaN payload and -0.0.
    x = np.arange(want.size, dtype=np.float64).reshape(want.shape) - 3.0
    y = np.array(np.uint64(0x7FF8000000000123)).view(np.float64)
    check_where(p, want, x, y)
    check_where(p, want, x, -0.0)
    # Negated: still fused.
    n = sj.logical_not(p)
    assert n._fused
    check_where(n, np.logical_not(want), x, y)
    # Strided and reversed operands.
    check_where(getattr(sj, kind)(a[::-2], b[:, ::-3]), numpy_pred(kind, a[::-2], b[:, ::-3]),
                x[::-2, ::-3], y)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("kind", TESTS)
def test_tests_of_edge_values(kind, dt):
    v = edge_values(dt)
    p = getattr(sj, kind)(v)
    assert p._fused
    want = numpy_pred(kind, v)
    x = np.arange(v.size, dtype=np.int16)
    check_where(p, want, x, np.int16(-7))
    check_where(sj.logical_not(p), np.logical_not(want), x, np.int16(-7))
    check_where(getattr(sj, kind)(v[::-1]), numpy_pred(kind, v[::-1]), v, v[::-1])


@pytest.mark.parametrize("dt", DTYPES)
def test_logical_not_of_a_mask(dt):
    v = edge_values(dt)
    p = sj.logical_not(v)
    assert p._fused
    want = np.logical_not(v)
    check_where(p, want, v, v[::-1])
    check_where(sj.logical_not(p), np.logical_not(want), v, v[::-1])


@pytest.mark.parametrize("dt", DTYPES)
def test_in_place_relu_and_friends(dt):
    v = edge_values(dt)
    zero = np.zeros((), dt)[()]
    for kind in CMPS:
        for role in ["then", "else"]:
            x = v.copy()
            want = np.where(numpy_pred(kind, x, zero), x, zero) if role == "then" \
                else np.where(numpy_pred(kind, x, zero), zero, x)
            p = getattr(sj, kind)(x, zero)
            r = sj.where(p, x, zero, out=x) if role == "then" else sj.where(p, zero, x, out=x)
            assert r is x
            assert_same(x, want)
    # A reversed view in place, the predicate over the same view.
    x = v.copy()
    xv = x[::-1]
    want = np.where(np.isfinite(xv), xv, zero)
    sj.where(sj.isfinite(xv), xv, zero, out=xv)
    assert_same(xv, want, layout=False)


def test_in_place_where_the_operand_is_not_the_in_place_input():
    x = np.linspace(-2, 2, 11, dtype=np.float32)
    # The predicate reads x, the result goes to x, but x is neither then nor else.
    want = np.where(np.greater(x, 0), np.float32(1), np.float32(2))
    out = sj.where(sj.greater(x, 0), np.float32(1), np.float32(2), out=x)
    assert out is x
    assert_same(x, want)
    # rhs overlapping the output (a shifted view of the same buffer).
    buf = np.arange(12, dtype=np.int32)
    a, o = buf[:-1], buf[1:]
    want = np.where(np.less(o, a), o, np.int32(0))
    sj.where(sj.less(o, a), o, np.int32(0), out=o)
    assert_same(o, want)
    # The predicate's operand is out but in another dtype than the result's.
    x = np.arange(-3, 4, dtype=np.int16)
    want = np.where(np.greater(x, 0), x, 0.5)
    f = want.copy()
    got = sj.where(sj.greater(f, 0), f, 0.5, out=f)
    assert_same(got, np.where(np.greater(want, 0), want, 0.5))


@pytest.mark.parametrize("kind", CMPS + TESTS)
def test_broadcasting_and_layouts(kind):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 1, 5)).astype(np.float32)
    a[0, 0, :2] = [np.nan, -np.inf]
    b = rng.standard_normal((4, 1)).astype(np.float32)
    args = (a,) if kind in TESTS else (a, b)
    p = getattr(sj, kind)(*args)
    want = numpy_pred(kind, *args)
    assert p.shape == want.shape and p.ndim == want.ndim and p.dtype == want.dtype
    x = np.asfortranarray(rng.standard_normal((4, 5)))
    check_where(p, want, x, np.float64(-1.5))
    check_where(p, want, 1.5, x.T[::-1].T)
    # Fortran-ordered operands: numpy's output order follows its bool temporary.
    fa = np.asfortranarray(rng.standard_normal((6, 7)))
    fargs = (fa,) if kind in TESTS else (fa, np.asfortranarray(fa[::-1]))
    check_where(getattr(sj, kind)(*fargs), numpy_pred(kind, *fargs), fa, 0.0)
    # Under the library's other broadcast modes the predicate takes cond's place.
    ops = [np.ones((2, 5), np.float32), np.full(5, np.nan, np.float32)][: len(args)]
    c = getattr(sj, kind)(*ops)
    got = sj.where(c, np.zeros((2, 5)), np.ones((2, 5)), broadcast="none")
    want_c = numpy_pred(kind, *ops)
    assert_same(got, np.where(want_c, np.zeros((2, 5)), np.ones((2, 5))))


def test_scalars_follow_nep50():
    u8 = np.arange(0, 256, 15, dtype=np.uint8)
    # A Python int out of the uint8 range: numpy 2 compares exactly (no OverflowError).
    for kind in CMPS:
        for v in [300, -1, 2**70, 255, 0]:
            p = getattr(sj, kind)(u8, v)
            check_where(p, numpy_pred(kind, u8, v), u8, np.uint8(7))
        assert getattr(sj, kind)(u8, 200)._fused
        assert not getattr(sj, kind)(u8, 300)._fused
    # A Python float compares in float32 (0.1 rounded to float32), fused.
    f32 = np.array([0.1, np.float32(0.1), 0.2, -0.0], np.float32)
    p = sj.greater(f32, 0.1)
    assert p._fused
    check_where(p, np.greater(f32, 0.1), f32, 0.0)
    check_where(sj.equal(f32, 0.1), np.equal(f32, 0.1), f32, 0.0)
    # ints in a float loop: exact ones fused, inexact ones as numpy does them.
    for v in [3, 2**24 + 1, -(2**24) - 1, 2**60 + 1, 10**400]:
        try:
            want = np.equal(f32, v)
        except OverflowError:
            with pytest.raises(OverflowError):
                sj.equal(f32, v)
            continue
        check_where(sj.equal(f32, v), want, f32, 0.0)
    assert sj.equal(f32, 3)._fused and not sj.equal(f32, 2**24 + 1)._fused
    # A float that overflows float16: numpy's warning, numpy's answer.
    f16 = np.array([1, np.inf, 65504], np.float16)
    with warnings.catch_warnings(record=True) as w_np:
        warnings.simplefilter("always")
        want = np.less(f16, 1e6)
    with warnings.catch_warnings(record=True) as w_sj:
        warnings.simplefilter("always")
        p = sj.less(f16, 1e6)
    assert [type(w.message) for w in w_sj] == [type(w.message) for w in w_np]
    check_where(p, want, f16, np.float16(0))
    # Complex scalars, numpy scalars (strong), bool.
    c = edge_values("c8")
    for v in [1 + 1j, complex(np.nan, 0), np.complex128(0.5 - 1j), 0.0]:
        for kind in CMPS:
            check_where(getattr(sj, kind)(c, v), numpy_pred(kind, c, v), c, c[::-1])
    b = edge_values("?")
    for v in [True, False, 1, np.bool_(True)]:
        check_where(sj.equal(b, v), np.equal(b, v), b, ~b)
    # Both scalars: a 0-d predicate.
    p = sj.greater(2, 1.5)
    assert p.shape == () and bool(p) is True
    check_where(p, np.greater(2, 1.5), np.arange(3), -1)


def test_mixed_dtypes_compare_in_numpys_common_type():
    i8 = np.array([-128, -1, 0, 127], np.int8)
    u8 = np.array([255, 255, 0, 127], np.uint8)
    f16 = np.array([-np.inf, -0.0, np.nan, 127.5], np.float16)
    u64 = np.array([2**64 - 1, 2**63, 2**63 - 1, 0], np.uint64)
    i64 = np.array([-1, 2**62, 2**63 - 1, 0], np.int64)
    c8 = np.array([1 + 1j, np.nan, -0.0, 127.5j], np.complex64)
    pairs = [(i8, u8), (u8, f16), (i8, f16), (f16, np.float64(127.5)), (u64, i64),
             (i64, u64), (u64, np.float32(2**63)), (c8, f16), (c8, i8), (u64, 2**63 + 1)]
    for a, b in pairs:
        for kind in CMPS:
            check_where(getattr(sj, kind)(a, b), numpy_pred(kind, a, b), a, b)
    assert sj.less(i8, u8)._fused  # int16
    assert not sj.less(i64, u64)._fused  # numpy's exact mixed loop
    # Non-native byte order: compared in the native dtype.
    be = np.array([1.5, -2, np.nan], ">f4")
    p = sj.greater(be, np.float32(0))
    assert p._fused
    check_where(p, np.greater(be, np.float32(0)), be, np.float32(0))


def test_what_numpy_evaluates_itself():
    # long double, datetimes, strings, objects, subclasses: numpy's result, not fused.
    cases = [
        (np.array([1, 2, 3], np.longdouble), 2),
        (np.array(["2020-01-01", "NaT"], "M8[D]"), np.datetime64("2020-01-01")),
        (np.array(["a", "b"]), "a"),
        (np.array([1, 5, 3], object), 2),
        (np.ma.masked_array([1, 2, 3], [0, 1, 0]), 2),
    ]
    for a, b in cases:
        for kind in ["greater", "equal"]:
            p = getattr(sj, kind)(a, b)
            assert not p._fused
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = numpy_pred(kind, a, b)
            x = np.arange(np.shape(want)[0])
            check_where(p, want, x, -1)
    p = sj.isnan(np.array([np.nan], np.longdouble))
    assert not p._fused and np.asarray(p).tolist() == [True]
    # numpy's own errors where it raises them.
    with pytest.raises(TypeError):
        sj.greater(np.array(["a"]), 1)
    with pytest.raises(TypeError):
        sj.isnan(np.array(["a"]))


def test_broadcast_errors():
    with pytest.raises(sj.BroadcastError):
        sj.greater(np.ones(3), np.ones(4))
    with pytest.raises(ValueError):
        sj.greater(np.ones(3), np.ones(4))
    with pytest.raises(sj.BroadcastError):
        sj.where(sj.greater(np.ones(3), 0), np.ones(4), 0)
    with pytest.raises(ValueError):
        np.where(np.greater(np.ones(3), 0), np.ones(4), 0)
    # An operand reshaped after the predicate was made: checked when it is used.
    a = np.ones(6)
    p = sj.greater(a, np.ones(6))
    a.shape = (2, 3)
    with pytest.raises(sj.BroadcastError):
        sj.where(p, 1, 0)


def test_behaves_as_numpys_bool_array():
    x = np.array([[-1.0, 2.0, np.nan], [0.0, -0.0, 3.0]])
    p, want = sj.greater(x, 0), np.greater(x, 0)
    assert isinstance(p, sj.Predicate)
    assert (p.shape, p.ndim, p.dtype, p.size, len(p)) == (want.shape, want.ndim, want.dtype,
                                                          want.size, len(want))
    assert_same(np.asarray(p), want, layout=False)
    assert_same(np.array(p), want, layout=False)
    assert_same(np.asarray(p, dtype=np.uint8), want.astype(np.uint8), layout=False)
    assert_same(np.array(p, copy=True), want, layout=False)
    assert_same(np.asarray(p, copy=False), want, layout=False)
    with pytest.raises(ValueError):
        np.asarray(p, dtype=np.float32, copy=False)
    assert_same(p[0], want[0])
    assert_same(x[p], x[want])
    assert_same(p & ~p, want & ~want)
    assert_same(p | True, want | True)
    assert_same(p == want, want == want)
    assert_same(np.logical_and(p, sj.less(x, 3)), np.logical_and(want, x < 3))
    assert_same(~p, ~want)
    assert p.sum() == want.sum() and p.any() == want.any() and p.all() == want.all()
    assert np.sum(p) == np.sum(want) and np.count_nonzero(p) == np.count_nonzero(want)
    assert p.tolist() == want.tolist() and list(p[1]) == list(want[1])
    assert repr(p) == repr(want) and str(p) == str(want)
    assert_same(np.nonzero(p)[1], np.nonzero(want)[1])
    # bool(): numpy's truth (one element: its value; more: numpy's ValueError).
    assert bool(sj.greater(np.array([2]), 1)) is True
    assert bool(sj.greater(1, 2)) is False
    with pytest.raises(ValueError):
        bool(p)
    # Pickle round trip (a fused predicate travels as its operands).
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, sj.Predicate) and q._fused
    assert_same(np.asarray(q), want, layout=False)
    # Lazy: a fused predicate reads its operands when used.
    y = np.array([1.0, -1.0])
    lazy = sj.greater(y, 0)
    y[:] = [-1.0, 1.0]
    assert np.asarray(lazy).tolist() == [False, True]
    # A predicate as an operand of another predicate is its bool array.
    assert_same(np.asarray(sj.equal(p, True)), np.equal(want, True), layout=False)


def test_one_argument_where():
    rng = np.random.default_rng(3)
    for c in [rng.integers(0, 3, (4, 5)), [0, 1, 2], np.array([np.nan, 0.0, -0.0]),
              np.zeros((2, 0)), np.ones((3, 1, 2), bool)[:, :, ::-1]]:
        got, want = sj.where(c), np.where(c)
        assert type(got) is tuple and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
    x = np.array([[-1.0, 2.0], [3.0, np.nan]])
    got, want = sj.where(sj.greater(x, 0)), np.where(np.greater(x, 0))
    for g, w in zip(got, want):
        assert_same(g, w)
    with pytest.raises(ValueError):
        sj.where(x, x)
    with pytest.raises(ValueError):
        np.where(x, x)
    with pytest.raises(TypeError):
        sj.where(x, out=x)


def test_exception_hierarchy():
    assert issubclass(sj.ShapeError, sj.SelectError) and issubclass(sj.ShapeError, ValueError)
    assert issubclass(sj.BroadcastError, sj.ShapeError)
    assert issubclass(sj.DTypeError, sj.SelectError) and issubclass(sj.DTypeError, TypeError)
    assert issubclass(sj.CodegenError, sj.SelectError)
    assert not issubclass(sj.CodegenError, ValueError)
    assert issubclass(sj.InvalidArgumentError, ValueError)
    x = np.arange(6.0)
    # out of the wrong shape / dtype: numpy raises ValueError / TypeError, so do these.
    with pytest.raises(sj.ShapeError):
        sj.where(x > 2, x, 0.0, out=np.empty(5))
    with pytest.raises(sj.DTypeError):
        sj.where(x > 2, x, 0.0, out=np.empty(6, np.float32))
    with pytest.raises(TypeError):
        sj.where(x > 2, x, 0.0, out=[0.0] * 6)
    with pytest.raises(sj.BroadcastError):
        sj.where(np.ones(5, bool), x, 0.0)
    with pytest.raises(sj.BroadcastError):
        sj.where(np.ones(6, bool), np.ones((2, 6)), np.ones(2), broadcast="two-step")
    with pytest.raises(sj.InvalidArgumentError):
        sj.where(x > 2, x, 0.0, broadcast="diagonal")
    with pytest.raises(sj.InvalidArgumentError):
        sj.Engine(tier="no-such-tier")
    with pytest.raises(sj.InvalidArgumentError):
        sj.Engine(threads=0)
    ro = np.empty(6)
    ro.flags.writeable = False
    with pytest.raises(sj.SelectError):
        sj.where(x > 2, x, 0.0, out=ro)
    # Exceptions pickle (dask sends them back from worker processes).
    e = pickle.loads(pickle.dumps(sj.BroadcastError("shapes")))
    assert type(e) is sj.BroadcastError and str(e) == "shapes"


@pytest.mark.parametrize("dt", ["f4", "c16"])
def test_large_calls_on_every_engine(engine, dt):
    """Calls of a little over 1 MiB of output (split across threads when the engine has more
    than one), run by compiled kernels."""
    rng = np.random.default_rng(11)
    n = (1 << 20) // np.dtype(dt).itemsize + 17
    raw = rng.integers(0, 256, n * np.dtype(dt).itemsize, dtype=np.uint8)
    a = raw.view(dt)
    b = a[::-1].copy()
    w = (engine or sj).where
    for kind in ["greater"]:
        want = np.where(numpy_pred(kind, a, b), a, b)
        assert_same(w(getattr(sj, kind)(a, b), a, b), want)
        assert_same(w(sj.logical_not(getattr(sj, kind)(a, b)), b, a), want)
    want = np.where(np.isfinite(a), a, np.zeros((), dt))
    x = a.copy()
    assert w(sj.isfinite(x), x, np.zeros((), dt), out=x) is x
    assert_same(x, want)
    relu = np.where(np.greater(a, 0), a, 0) if dt[0] != "c" else None
    if relu is not None:
        x = a.copy()
        w(sj.greater(x, 0), x, 0, out=x)
        assert_same(x, relu)

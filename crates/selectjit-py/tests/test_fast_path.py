"""The common small calls (`where(greater(x, 0), x, 0)` on an exact ndarray with a Python or
numpy scalar, or two arrays of one dtype) take a shorter path in the extension: the same
bytes, dtype and shape as numpy's for every predicate kind and operand type."""

import itertools

import numpy as np
import pytest

import selectjit

CMPS = ["greater", "greater_equal", "less", "less_equal", "equal", "not_equal"]
TESTS = ["isnan", "isinf", "isfinite"]
DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64, np.complex64, np.complex128]
SCALARS = [0, 1, -1, 3, 127, 128, 255, 256, -129, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63),
           0.0, -0.0, 0.5, -2.5, 1e10, 1e300, float("inf"), float("-inf"), float("nan"),
           1 + 2j, complex(0.0, -0.0), True, False,
           np.int8(3), np.uint8(200), np.int64(-5), np.float32(0.25), np.float64(-1.5),
           np.float16(2.0), np.bool_(True), np.complex64(1 - 1j)]


def values(dt, n=16):
    rng = np.random.default_rng(7)
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(max(info.min, -300), min(info.max, 300), n, endpoint=True)
        return np.array([int(info.min), int(info.max), 0, 1, *map(int, v)][:n], dt)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5]
    v = np.concatenate([special, rng.standard_normal(n - len(special)) * 4])
    a = v.astype(dt)
    if dt.kind == "c":
        a.imag = np.concatenate([[0.0, -0.0, np.nan, 1.0], rng.standard_normal(n - 4)])
    return a


def same(got, want):
    assert type(got) is np.ndarray
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def run(kind, args, x, y, out=False):
    """selectjit's where on the predicate against numpy's, allocating and with `out=`, or the
    same exception type."""
    f, uf = getattr(selectjit, kind), getattr(np, kind)
    try:
        with np.errstate(all="ignore"):
            want = np.where(uf(*args), x, y)
    except Exception as e:  # noqa: BLE001 - the same exception type is expected
        with pytest.raises(type(e)), np.errstate(all="ignore"):
            selectjit.where(f(*args), x, y)
        return
    with np.errstate(all="ignore"):
        same(np.asarray(f(*args)), uf(*args))
        same(selectjit.where(f(*args), x, y), want)
        o = np.empty_like(want)
        r = selectjit.where(f(*args), x, y, out=o)
    assert r is o
    same(o, want)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind", CMPS)
def test_array_with_scalars(kind, dt):
    x = values(dt)
    for s in SCALARS:
        run(kind, (x, s), x, 0)
        run(kind, (x, s), x, s if not isinstance(s, complex) or x.dtype.kind == "c" else 0)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind", CMPS)
def test_arrays_of_one_dtype(kind, dt):
    x = values(dt)
    y = x[::-1].copy()
    run(kind, (x, y), x, y)
    run(kind, (x, y), x, 0)
    run(kind, (x, np.array(x[3])), y, 1.5)  # a 0-d operand
    run(kind, (np.array(x[2]), x), x, y)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind", TESTS)
def test_tests(kind, dt):
    x = values(dt)
    run(kind, (x,), x, 0)
    run(kind, (x,), 0.0, x)
    run(kind, (x,), x, x[::-1].copy())


@pytest.mark.parametrize("a,b", list(itertools.permutations([np.int8, np.float32, np.int64,
                                                               np.uint64, np.float16], 2)))
def test_mixed_dtypes(a, b):
    x, y = values(a), values(b)
    for kind in CMPS:
        run(kind, (x, y), x, y)


def test_fast_path_results_are_predicates():
    x = values(np.float32)
    p = selectjit.greater(x, 0)
    assert type(p) is selectjit.Predicate and p._fused
    assert p.shape == (16,) and p.dtype == np.dtype(bool) and p._args == (x, 0)
    assert selectjit.greater.__module__ == "selectjit" and selectjit.greater.__name__ == "greater"
    # Python ints outside the array's range compare exactly in numpy: not fused, numpy's result.
    q = selectjit.greater(values(np.int8), 1000)
    assert not q._fused
    same(np.asarray(q), np.greater(values(np.int8), 1000))
    # A predicate reads its operands when used.
    y = x.copy()
    p = selectjit.less(y, 0)
    y[:] = 1
    assert not np.asarray(p).any()
    same(selectjit.where(p, y, 0), np.where(y < 0, y, 0))


def test_errors_match_numpy():
    x = values(np.float32)
    with pytest.raises(ValueError):
        selectjit.greater(x, np.zeros(3, np.float32))
    with pytest.raises(ValueError):
        selectjit.where(selectjit.greater(x, 0), x, np.zeros(3, np.float32))
    with pytest.raises(ValueError):
        selectjit.where(selectjit.greater(x, 0), x, 0, out=np.empty(3, np.float32))
    with pytest.raises(TypeError):
        selectjit.where(selectjit.greater(x, 0), x, 0, out=np.empty(16, np.float64))
    ro = np.empty(16, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        selectjit.where(selectjit.greater(x, 0), x, 0, out=ro)


def test_out_overlapping_inputs():
    x = values(np.float32)
    a = x.copy()
    want = np.where(a > 0, a, 0)
    selectjit.where(selectjit.greater(a, 0), a, 0, out=a)  # in place
    same(a, want)
    a = x.copy()
    b = np.concatenate([a, a])
    want = np.where(b[:16] > 0, b[:16], 0)
    selectjit.where(selectjit.greater(b[:16], 0), b[:16], 0, out=b[1:17])
    same(b[1:17], want)

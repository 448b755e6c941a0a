"""selectjit.select and selectjit.nan_to_num against numpy.select and numpy.nan_to_num, bytes
and dtypes compared (and errors: type and message), on every dtype, broadcast shapes, lazy
predicates as conditions, `out=` and in place."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import selectjit

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.float16, np.float32, np.float64, np.complex64, np.complex128]
ALL = FLOATS + [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64]


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.tobytes() == b.tobytes()


def specials(dtype, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 10
    k = rng.random(n)
    x[k < 0.1] = np.nan
    x[(k >= 0.1) & (k < 0.15)] = np.inf
    x[(k >= 0.15) & (k < 0.2)] = -np.inf
    x[(k >= 0.2) & (k < 0.25)] = -0.0
    dt = np.dtype(dtype)
    if dt.kind == "c":
        y = x.astype(dt)
        y.imag = np.roll(x, 3)
        return y
    if dt.kind in "iub":
        return rng.integers(0, 2 if dt.kind == "b" else 100, n).astype(dt)
    with np.errstate(all="ignore"):
        return x.astype(dt)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("n", [0, 1, 7, 1000, 70000])
def test_nan_to_num_matches_numpy(dtype, n):
    x = specials(dtype, n, n)
    same(selectjit.nan_to_num(x), np.nan_to_num(x))
    kw = dict(nan=5, posinf=1e3, neginf=-7.5)
    if np.dtype(dtype).kind in "fc":
        same(selectjit.nan_to_num(x, **kw), np.nan_to_num(x, **kw))
    # Not C-contiguous, Fortran order, copy=False in place (the same object back).
    same(selectjit.nan_to_num(x[::-3]), np.nan_to_num(x[::-3]))
    if n == 1000:
        f = np.asfortranarray(x.reshape(20, 50))
        r = selectjit.nan_to_num(f)
        same(r, np.nan_to_num(f))
        assert r.flags.f_contiguous == np.nan_to_num(f).flags.f_contiguous
    y, z = x.copy(), x.copy()
    r = selectjit.nan_to_num(y, copy=False)
    assert r is y
    same(y, np.nan_to_num(z, copy=False))
    y, z = x.copy(), x.copy()
    selectjit.nan_to_num(y[1::2], copy=False)
    np.nan_to_num(z[1::2], copy=False)
    same(y, z)


def test_nan_to_num_scalars_lists_and_copies():
    for v in [np.float32(np.nan), np.float64(-np.inf), 3.5, float("nan"), np.complex64(np.nan)]:
        a, b = selectjit.nan_to_num(v), np.nan_to_num(v)
        assert type(a) is type(b)
        same(a, b)
    same(selectjit.nan_to_num([1.0, np.nan, np.inf]), np.nan_to_num([1.0, np.nan, np.inf]))
    # The default replacements are kept per dtype: -0.0 (or 0) for NaN is not the default's 0.0.
    y = np.array([np.nan, 1.0, np.inf], np.float32)
    for kw in (dict(), dict(nan=-0.0), dict(nan=0), dict(nan=0.0, posinf=2.0), dict()):
        same(selectjit.nan_to_num(y, **kw), np.nan_to_num(y, **kw))
    x = np.arange(5)
    r = selectjit.nan_to_num(x)
    assert r is not x and np.nan_to_num(x) is not x
    same(r, x)
    with pytest.raises(ValueError):
        np.nan_to_num([1.0, np.nan], copy=False)
    with pytest.raises(ValueError):
        selectjit.nan_to_num([1.0, np.nan], copy=False)
    # A value numpy's copyto refuses to cast is refused the same way.
    with pytest.raises(TypeError):
        np.nan_to_num(np.array([np.nan], np.float32), nan=1j)
    with pytest.raises(TypeError):
        selectjit.nan_to_num(np.array([np.nan], np.float32), nan=1j)


def test_nan_to_num_bfloat16_is_replaced():
    x = specials(np.float32, 5000, 3).astype(BF16)
    r = selectjit.nan_to_num(x)
    assert r.dtype == BF16
    f = x.astype(np.float32)
    big = np.float32(ml_dtypes.finfo(BF16).max)
    want = np.where(np.isnan(f), 0, np.where(f == np.inf, big, np.where(f == -np.inf, -big, f)))
    same(r, want.astype(BF16))
    # numpy leaves it untouched (not a float to numpy): the documented divergence.
    same(np.nan_to_num(x), x)


@settings(max_examples=150, deadline=None)
@given(
    dtype=st.sampled_from(ALL + [BF16]),
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=3),
    k=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
    default_scalar=st.booleans(),
)
def test_select_matches_numpy(dtype, shape, k, seed, default_scalar):
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    x = specials(np.float32, int(np.prod(shape)), seed).reshape(shape)

    def sub():
        return tuple(d if rng.random() < 0.7 else 1 for d in shape[int(rng.integers(0, len(shape) + 1)):])

    conds, lazy = [], []
    for _ in range(k):
        kind = rng.integers(0, 4)
        if kind == 0:
            m = rng.random(sub()) < 0.4
            conds.append(m)
            lazy.append(m)
        elif kind == 1:
            t = np.float32(rng.standard_normal())
            conds.append(x < t)
            lazy.append(selectjit.less(x, t))
        elif kind == 2:
            conds.append(np.isnan(x))
            lazy.append(selectjit.isnan(x))
        else:
            conds.append(x != 0)
            lazy.append(selectjit.not_equal(x, 0))
    choices = []
    for i in range(k):
        r = rng.random()
        if r < 0.3:
            choices.append(i + 1)  # a Python scalar (weak)
        else:
            s = sub()
            choices.append(specials(dtype, int(np.prod(s)), seed + i).reshape(s))
    default = 0 if default_scalar else specials(dtype, int(np.prod(shape)), seed + 99).reshape(shape)
    with np.errstate(all="ignore"):
        try:
            want = np.select(conds, choices, default)
        except Exception as e:
            # numpy refuses it (a Python int its copyto will not cast): so do we, in its words.
            for c in (conds, lazy):
                with pytest.raises(type(e)) as ours:
                    selectjit.select(c, choices, default)
                assert str(ours.value) == str(e)
            return
        same(selectjit.select(conds, choices, default), want)
        same(selectjit.select(lazy, choices, default), want)
        out = np.empty_like(want)
        r = selectjit.select(lazy, choices, default, out=out)
        assert r is out
        same(out, want)


def test_select_in_place_and_errors():
    x = specials(np.float64, 1000, 1)
    want = np.select([x < 0, np.isnan(x)], [0.0, -1.0], x)
    y = x.copy()
    r = selectjit.select([selectjit.less(y, 0), selectjit.isnan(y)], [0.0, -1.0], y, out=y)
    assert r is y
    same(y, want)
    # Errors as numpy raises them, in numpy's order.
    cases = [
        ([], []),
        ([x > 0], []),
        ([x], [x]),
        ([x > 0, x[:3] > 0], [x, x]),
        ([x > 0], [x[:3]]),
        ([x > 0], ["a"], 1.5),
        ([x > 0], [np.arange(3)]),
    ]
    for args in cases:
        with pytest.raises(Exception) as ours:
            selectjit.select(*args)
        with pytest.raises(Exception) as theirs:
            np.select(*args)
        assert type(ours.value) is type(theirs.value), args
        assert str(ours.value) == str(theirs.value), args
    # Strings and objects: numpy's own select.
    s = np.array(["a", "bb", "c"])
    same(selectjit.select([s == "a"], [s], "z"), np.select([s == "a"], [s], "z"))
    # out of the wrong shape or dtype.
    with pytest.raises(ValueError):
        selectjit.select([x > 0], [x], out=np.empty(3))
    with pytest.raises(TypeError):
        selectjit.select([x > 0], [x], out=np.empty(1000, np.float32))


def test_select_case_when_over_int32_conditions():
    # CASE WHEN qty < 10 THEN a WHEN qty < 50 THEN b ELSE c END, conditions on another dtype.
    rng = np.random.default_rng(5)
    qty = rng.integers(0, 100, 100000).astype(np.int32)
    a, b, c = (rng.standard_normal(qty.size) for _ in range(3))
    want = np.select([qty < 10, qty < 50], [a, b], c)
    same(selectjit.select([selectjit.less(qty, 10), selectjit.less(qty, 50)], [a, b], c), want)

"""Predicates over ml_dtypes' bfloat16 arrays: numpy's bytes, fused for the loops
`_BF16_FUSED` lists (all) with scalars bfloat16 holds exactly (NaN payloads, ±0, ±inf,
subnormals, and Python scalars that bfloat16 does not hold exactly, which numpy compares in
float32 for a float and after rounding to bfloat16 for an int: those numpy evaluates). The
fused calls set no floating-point warning where ml_dtypes' loops set "invalid" (on signaling
NaNs, and in the ordered comparisons on any NaN): numpy's own float loops set none either."""

import warnings

import numpy as np
import pytest

import selectjit

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
CMPS = ["greater", "greater_equal", "less", "less_equal", "equal", "not_equal"]
TESTS = ["isnan", "isinf", "isfinite"]
FUSED = selectjit._predicates._BF16_FUSED


def exact(s):
    try:
        return s != s or float(np.array(s, BF16)) == s
    except (TypeError, OverflowError, ValueError):
        return False


def special():
    bits = [
        0x0000, 0x8000,  # ±0
        0x7F80, 0xFF80,  # ±inf
        0x7FC0, 0xFFC0, 0x7F81, 0xFFFF, 0x7FA5,  # NaNs, several payloads and signs
        0x0001, 0x8001, 0x007F, 0x0040,  # subnormals
        0x0080, 0x7F7F, 0xFF7F,  # smallest normal, ±max
        0x3F80, 0xBF80, 0x3F81, 0x4380, 0x4381,  # ±1, 1 + ulp, 256, 258
    ]
    rng = np.random.default_rng(3)
    more = rng.integers(0, 1 << 16, 43, dtype=np.uint16)
    return np.concatenate([np.array(bits, np.uint16), more]).view(BF16)


SCALARS = [0, 0.0, -0.0, 1, -1, 1.0, 1.5, float("inf"), float("-inf"), float("nan"), 256,
           257, 1.001, 1.00390625, 0.1, 1e-40, -1e-40, 3e38, 1e39, 2**200, -(2**200), 2**130]


def same(got, want):
    assert type(got) is np.ndarray
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("kind", CMPS)
def test_bf16_against_scalars(kind):
    x = special()
    f, uf = getattr(selectjit, kind), getattr(np, kind)
    for s in SCALARS:
        with np.errstate(all="ignore"):
            try:
                want_mask = uf(x, s)
            except Exception as e:  # noqa: BLE001 - the same exception type is expected
                with pytest.raises(type(e)):
                    f(x, s)
                continue
            p = f(x, s)
            same(np.asarray(p), want_mask)
            same(selectjit.where(p, x, 0), np.where(want_mask, x, 0))
        # The scalars bfloat16 holds exactly are fused (by the loops that do not warn).
        assert p._fused == (exact(s) and kind in FUSED), s


@pytest.mark.parametrize("kind", CMPS)
def test_bf16_arrays(kind):
    x = special()
    y = np.roll(x, 5)
    f, uf = getattr(selectjit, kind), getattr(np, kind)
    with np.errstate(all="ignore"):
        p = f(x, y)
        want = uf(x, y)
    assert p._fused == (kind in FUSED)
    same(np.asarray(p), want)
    if not p._fused:
        return
    same(selectjit.where(p, x, y), np.where(uf(x, y), x, y))
    o = np.empty_like(x)
    selectjit.where(f(x, y), x, y, out=o)
    same(o, np.where(uf(x, y), x, y))
    # Against itself: NaN != NaN whatever the payload.
    same(selectjit.where(f(x, x), x, 0), np.where(uf(x, x), x, 0))


@pytest.mark.parametrize("kind", TESTS)
def test_bf16_tests(kind):
    x = special()
    f, uf = getattr(selectjit, kind), getattr(np, kind)
    with np.errstate(all="ignore"):
        p = f(x)
        want = uf(x)
    assert p._fused == (kind in FUSED)
    same(np.asarray(p), want)
    if not p._fused:
        return
    same(selectjit.where(p, x, 0), np.where(uf(x), x, 0))
    same(selectjit.where(selectjit.logical_not(p), 0, x), np.where(~uf(x), 0, x))


def test_bf16_large():
    x = np.random.default_rng(0).standard_normal(1 << 16).astype(BF16)
    x[::97] = -0.0
    x[::101] = np.nan
    p = selectjit.not_equal(x, 0)
    assert p._fused == ("not_equal" in FUSED)
    same(selectjit.where(p, x, 0), np.where(x != 0, x, 0))
    p = selectjit.isnan(x)
    assert p._fused == ("isnan" in FUSED)
    same(selectjit.where(p, 0, x), np.where(np.isnan(x), 0, x))


def test_bf16_fused_calls_set_no_warning():
    # ml_dtypes' loops set "invalid" on NaNs where numpy's float loops set nothing; the fused
    # calls give numpy's bytes and, like numpy's float loops, no warning (documented).
    x = special()
    quiet = np.array([0x7FC0, 0xFFC0, 0x3F80, 0x0000], np.uint16).view(BF16)
    for a in (x, quiet):
        for kind, args in [(k, (a, s)) for k in CMPS for s in (0, 0.0, a[::-1].copy())] + [
            (k, (a,)) for k in TESTS
        ]:
            f, uf = getattr(selectjit, kind), getattr(np, kind)
            with np.errstate(all="ignore"):
                want = np.where(uf(*args), a, 0)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with np.errstate(invalid="raise"):
                    p = f(*args)
                    assert p._fused, kind
                    same(selectjit.where(p, a, 0), want)


def test_bf16_with_other_dtypes_is_numpy():
    x = special()
    for other in (np.float32(1.5), np.ones(x.shape, np.float32), np.ones(x.shape, np.int8), 1j):
        with np.errstate(all="ignore"):
            try:
                want = np.equal(x, other)
            except TypeError:
                with pytest.raises(TypeError):
                    selectjit.equal(x, other)
                continue
            p = selectjit.equal(x, other)
            same(np.asarray(p), want)

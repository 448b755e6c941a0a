"""Property tests: random shapes (numpy broadcasting), dtypes, bit patterns, memory layouts,
Python scalars and out= (fresh, strided, in place), bitwise against numpy.where."""

import os
import warnings

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import selectjit
from conftest import assert_same

DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32, np.float64,
          np.complex64, np.complex128, ml_dtypes.bfloat16, np.dtype("S2"), np.dtype("U1"),
          np.dtype("M8[s]")]
COND_DTYPES = [np.bool_, np.uint8, np.int16, np.float32, np.float16, np.complex64]
# SELECTJIT_HYPOTHESIS_EXAMPLES raises the count for a longer search.
SETTINGS = settings(max_examples=int(os.environ.get("SELECTJIT_HYPOTHESIS_EXAMPLES", "300")),
                    deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def values(rng, shape, dtype):
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) * dt.itemsize
    raw = rng.integers(0, 256, n, dtype=np.uint8)
    if dt.kind == "M":
        return rng.integers(-(10**12), 10**12, shape).astype(dt)
    if dt.kind in "SU":
        return rng.integers(0x41, 0x5A, shape).astype(np.uint8).view("S1").astype(dt)
    return raw.view(dt).reshape(shape)


def layout(draw, a):
    """`a` as a view of the same values in a drawn memory layout."""
    kind = draw(st.sampled_from(["C", "F", "strided", "reversed", "transposed"]))
    if a.ndim == 0 or a.size == 0 or kind == "C":
        return a
    if kind == "F":
        return np.asfortranarray(a)
    if kind == "strided":
        steps = [draw(st.integers(1, 3)) for _ in range(a.ndim)]
        big = np.empty(tuple(d * s for d, s in zip(a.shape, steps)), a.dtype)
        v = big[tuple(slice(None, None, s) for s in steps)]
        v[...] = a
        return v
    if kind == "reversed":
        flips = tuple(slice(None, None, -1) if draw(st.booleans()) else slice(None)
                      for _ in range(a.ndim))
        return a[flips].copy()[flips]
    perm = draw(st.permutations(range(a.ndim)))
    inv = np.argsort(perm)
    return np.ascontiguousarray(a.transpose(perm)).transpose(inv)


@st.composite
def calls(draw):
    shapes = draw(mutually_broadcastable_shapes(num_shapes=3, max_dims=4, max_side=5))
    cs, xs, ys = shapes.input_shapes
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dx = draw(st.sampled_from(DTYPES))
    dy = dx if draw(st.booleans()) else draw(st.sampled_from(DTYPES))
    cond = layout(draw, values(rng, cs, draw(st.sampled_from(COND_DTYPES))))
    x = layout(draw, values(rng, xs, dx))
    y = layout(draw, values(rng, ys, dy))
    scalar = st.sampled_from([0, 1, -3, 300, 0.5, -0.0, float("nan"), 1e10, 2j, True])
    if draw(st.integers(0, 5)) == 0:
        x = draw(scalar)
    if draw(st.integers(0, 5)) == 0:
        y = draw(scalar)
    return cond, x, y, draw(st.sampled_from(["none", "fresh", "strided", "in-place"]))


@SETTINGS
@given(calls())
def test_where_matches_numpy(call):
    cond, x, y, out_kind = call
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = np.where(cond, x, y)
        except Exception as e:  # noqa: BLE001 - numpy's error is the expectation
            try:
                selectjit.where(cond, x, y)
            except type(e):
                return
            raise AssertionError(f"numpy raised {e!r}, selectjit did not") from None
        if out_kind == "none":
            assert_same(selectjit.where(cond, x, y), want)
            return
        if out_kind == "in-place" and isinstance(x, np.ndarray) and x.shape == want.shape \
                and x.dtype == want.dtype and x.flags.writeable:
            out = x
        elif out_kind == "strided" and want.ndim > 0:
            out = np.empty(tuple(2 * d for d in want.shape), want.dtype)[(slice(None, None, -2),)
                                                                          * want.ndim]
        else:
            out = np.empty_like(want, order="K")
        r = selectjit.where(cond, x, y, out=out)
        assert r is out
        assert_same(np.array(out, order="K", copy=True), np.array(want, order="K", copy=True),
                    layout=False)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(0, 4), st.integers(1, 300))
def test_overlapping_out_reads_the_old_inputs(seed, rows, cols):
    rng = np.random.default_rng(seed)
    buf = rng.standard_normal((rows + 2, cols + 2)).astype(np.float32)
    x = buf[: rows, : cols]
    y = buf[2:, 2:][::-1]
    out = buf[1 : rows + 1, 1 : cols + 1]
    cond = rng.random((rows, cols)) < 0.5
    want = np.where(cond, x.copy(), y.copy())
    selectjit.where(cond, x, y, out=out)
    assert out.tobytes() == want.tobytes()


PRED_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint32, np.int64, np.uint64,
               np.float16, np.float32, np.float64, np.complex64, np.complex128]
CMPS = ["greater", "greater_equal", "less", "less_equal", "equal", "not_equal"]
TESTS = ["isnan", "isinf", "isfinite"]


def pred_values(rng, shape, dtype):
    """Random bit patterns, bools as 0 / 1 (numpy's comparison loops disagree among
    themselves on bool bytes other than 0 and 1: an array-with-0-d `>=` compares the 0-d
    operand's raw byte)."""
    v = values(rng, shape, dtype)
    return v.view(np.uint8) != 0 if v.dtype == np.bool_ else v


@st.composite
def pred_calls(draw):
    """A predicate (random op, operand dtypes and bit patterns, layouts, Python scalars,
    negation) and where's x, y and out."""
    shapes = draw(mutually_broadcastable_shapes(num_shapes=4, max_dims=3, max_side=5))
    ls, rs, xs, ys = shapes.input_shapes
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(CMPS + TESTS + ["logical_not"]))
    dl = draw(st.sampled_from(PRED_DTYPES))
    dr = dl if draw(st.booleans()) else draw(st.sampled_from(PRED_DTYPES))
    lhs = layout(draw, pred_values(rng, ls, dl))
    args = [lhs]
    if kind in CMPS:
        rhs = layout(draw, pred_values(rng, rs, dr))
        if draw(st.integers(0, 3)) == 0:
            rhs = draw(st.sampled_from([0, 1, -1, 127, 255, 300, 2**63, -(2**63), 0.1, -0.0,
                                        float("nan"), float("inf"), 1e300, 65504.0, 1 + 2j,
                                        True]))
        args.append(rhs)
    dx = draw(st.sampled_from([np.float32, np.int16, np.complex128, dl]))
    x = layout(draw, values(rng, xs, dx))
    y = values(rng, ys, dx)
    negate = draw(st.booleans())
    out_kind = draw(st.sampled_from(["none", "fresh", "in-place"]))
    return kind, args, negate, x, y, out_kind


@settings(SETTINGS, max_examples=int(os.environ.get("SELECTJIT_HYPOTHESIS_EXAMPLES", "200")))
@given(pred_calls())
def test_predicates_match_numpy(call):
    kind, args, negate, x, y, out_kind = call
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want_mask = getattr(np, kind)(*args)
        if negate:
            want_mask = np.logical_not(want_mask)
        p = getattr(selectjit, kind)(*args)
        if negate:
            p = selectjit.logical_not(p)
        assert_same(np.asarray(p), np.asarray(want_mask), layout=False)
        try:
            want = np.where(want_mask, x, y)
        except ValueError:
            try:
                selectjit.where(p, x, y)
            except ValueError:
                return
            raise AssertionError("numpy raised, selectjit did not") from None
        if out_kind == "none":
            assert_same(selectjit.where(p, x, y), want)
            return
        lhs = args[0]
        if out_kind == "in-place" and lhs.shape == want.shape and lhs.dtype == want.dtype \
                and lhs.flags.writeable:
            # ReLU-like: the predicate's operand is the in-place output.
            want = np.where(want_mask, lhs, y)
            out = lhs
            r = selectjit.where(p, lhs, y, out=lhs)
        else:
            out = np.empty_like(want, order="K")
            r = selectjit.where(p, x, y, out=out)
        assert r is out
        assert_same(np.array(out, order="K", copy=True), np.array(want, order="K", copy=True),
                    layout=False)

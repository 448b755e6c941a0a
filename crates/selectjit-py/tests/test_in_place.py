"""In place without copies: `where(p, y, 0, out=y)` and its relatives read `y` through the output
buffer (no array-sized temporary), give numpy's bytes, and any other overlap with `out` still
reads the inputs as they were on entry."""

import tracemalloc

import numpy as np
import pytest

import selectjit
from conftest import assert_same

RNG = np.random.default_rng(23)


def values(dt, n=4099):
    """`n` values of the float dtype `dt` with NaNs (a payload, a negative one), +-0.0,
    +-inf, subnormals and the extremes mixed in among random ones."""
    v = RNG.standard_normal(n).astype(dt)
    fi = np.finfo(dt)
    u = np.dtype(f"u{np.dtype(dt).itemsize}")
    mant = fi.nmant
    payload_nan = np.array((1 << (8 * u.itemsize - 1)) - 1 - (1 << (mant - 2)), u).view(dt)
    special = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, fi.tiny / 4, -fi.tiny / 4,
                        fi.max, fi.min, fi.tiny, -fi.tiny], dt)
    special = np.concatenate([special, np.atleast_1d(payload_nan), -np.atleast_1d(payload_nan)])
    idx = RNG.choice(n, special.size * 20, replace=False)
    v[idx] = np.resize(special, idx.size)
    assert np.any(np.signbit(v) & (v == 0)) and np.isnan(v).sum() >= 4
    return v


# The in-place forms: a name, and (call, numpy's result) as functions of the array.
FORMS = {
    "then-python-int": (
        lambda y, m: selectjit.where(selectjit.greater(y, 0), y, 0, out=y),
        lambda y, m: np.where(np.greater(y, 0), y, 0),
    ),
    "then-numpy-scalar": (
        lambda y, m: selectjit.where(selectjit.greater(y, y.dtype.type(0)), y, y.dtype.type(0),
                                     out=y),
        lambda y, m: np.where(np.greater(y, y.dtype.type(0)), y, y.dtype.type(0)),
    ),
    "then-python-float": (
        lambda y, m: selectjit.where(selectjit.less_equal(y, -0.0), y, 1.5, out=y),
        lambda y, m: np.where(np.less_equal(y, -0.0), y, 1.5),
    ),
    "else-isnan": (
        lambda y, m: selectjit.where(selectjit.isnan(y), 0, y, out=y),
        lambda y, m: np.where(np.isnan(y), 0, y),
    ),
    "else-not-greater": (
        lambda y, m: selectjit.where(selectjit.logical_not(selectjit.greater(y, 0)), 0, y, out=y),
        lambda y, m: np.where(np.logical_not(np.greater(y, 0)), 0, y),
    ),
    "both-pred-operands": (
        lambda y, m: selectjit.where(selectjit.equal(y, y), y, 0, out=y),
        lambda y, m: np.where(np.equal(y, y), y, 0),
    ),
    "then-mask": (
        lambda y, m: selectjit.where(m, y, 0, out=y),
        lambda y, m: np.where(m, y, 0),
    ),
    "else-mask": (
        lambda y, m: selectjit.where(m, 0, y, out=y),
        lambda y, m: np.where(m, 0, y),
    ),
}

LAYOUTS = {
    "C": lambda a: a,
    "2d-C": lambda a: a[:4096].reshape(64, 64),
    "2d-F": lambda a: np.asfortranarray(a[:4096].reshape(64, 64)),
    "reversed": lambda a: a[::-1],
    "strided": lambda a: np.repeat(a, 2)[::2],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16], ids=lambda d: d.__name__)
@pytest.mark.parametrize("form", list(FORMS))
def test_in_place_forms_give_numpys_bytes(form, dt, layout):
    call, want_of = FORMS[form]
    y = LAYOUTS[layout](values(dt))
    m = RNG.random(y.shape) < 0.5
    y0 = y.copy()
    want = want_of(y0, m)
    r = call(y, m)
    assert r is y
    assert_same(y, want, layout=False)


def test_in_place_with_an_engine(engine):
    w = (engine or selectjit).where
    y = values(np.float32, 100_003)
    y0 = y.copy()
    assert w(selectjit.greater(y, 0), y, 0, out=y) is y
    assert_same(y, np.where(np.greater(y0, 0), y0, 0))
    y0 = y.copy()
    assert w(selectjit.isnan(y), 0, y, out=y) is y
    assert_same(y, np.where(np.isnan(y0), 0, y0))


# -- other overlaps read a copy ---------------------------------------------------------------

# Each case: `(out, result, numpy's result from the untouched copy y0)`.
PARTIAL = {
    # out reversed over the in-place operand's memory.
    "pred-then-out-reversed": lambda y, y0: (
        o := y[::-1],
        selectjit.where(selectjit.greater(y, 0), y, 0, out=o),
        np.where(np.greater(y0, 0), y0, 0)),
    "pred-else-out-reversed": lambda y, y0: (
        o := y[::-1],
        selectjit.where(selectjit.isnan(y), 0, y, out=o),
        np.where(np.isnan(y0), 0, y0)),
    "mask-then-out-reversed": lambda y, y0: (
        o := y[::-1],
        selectjit.where(y0 > 0, y, 0, out=o),
        np.where(y0 > 0, y0, 0)),
    # out shifted by one element against the operands.
    "pred-then-shifted": lambda y, y0: (
        o := y[:-1],
        selectjit.where(selectjit.greater(y[1:], 0), y[1:], 0, out=o),
        np.where(np.greater(y0[1:], 0), y0[1:], 0)),
    "pred-else-shifted": lambda y, y0: (
        o := y[1:],
        selectjit.where(selectjit.isnan(y[:-1]), np.float32(0), y[:-1], out=o),
        np.where(np.isnan(y0[:-1]), np.float32(0), y0[:-1])),
    # then (or else) in place, but the predicate reads another view of the output's memory.
    "then-in-place-pred-reversed": lambda y, y0: (
        y,
        selectjit.where(selectjit.greater(y[::-1], 0), y, 0, out=y),
        np.where(np.greater(y0[::-1], 0), y0, 0)),
    "else-in-place-pred-shifted": lambda y, y0: (
        o := y[1:],
        selectjit.where(selectjit.isnan(y[:-1]), 0, o, out=o),
        np.where(np.isnan(y0[:-1]), 0, y0[1:])),
    "then-in-place-pred-rhs-shifted": lambda y, y0: (
        o := y[1:],
        selectjit.where(selectjit.less(o, y[:-1]), o, 0, out=o),
        np.where(np.less(y0[1:], y0[:-1]), y0[1:], 0)),
    # then in place, and the predicate reads the output's memory in another dtype.
    "then-in-place-pred-other-dtype": lambda y, y0: (
        y,
        selectjit.where(selectjit.greater(y.view(np.int32), 0), y, 0, out=y),
        np.where(np.greater(y0.view(np.int32), 0), y0, 0)),
    # then in place, and the mask is the output's bytes.
    "then-in-place-mask-of-out-bytes": lambda y, y0: (
        y,
        selectjit.where(y.view(np.uint8)[: y.size], y, 0, out=y),
        np.where(y0.view(np.uint8)[: y0.size], y0, 0)),
    # the predicate reads exactly the output, which is neither then nor else.
    "pred-only-in-out": lambda y, y0: (
        y,
        selectjit.where(selectjit.greater(y, 0), np.float32(1), np.float32(2), out=y),
        np.where(np.greater(y0, 0), np.float32(1), np.float32(2))),
    # then and else both the output.
    "then-and-else-out": lambda y, y0: (
        y,
        selectjit.where(selectjit.greater(y, 0), y, y, out=y),
        np.where(np.greater(y0, 0), y0, y0)),
}


@pytest.mark.parametrize("case", list(PARTIAL))
def test_partial_overlaps_read_inputs_as_on_entry(case):
    base = values(np.float32, 5003)
    y = base.copy()
    # `y0` is an untouched copy at another address: numpy.where computed from it is the
    # result as of the inputs on entry.
    out, r, want = PARTIAL[case](y, base.copy())
    assert r is out
    assert_same(out.copy(), want.astype(np.float32, copy=False), layout=False)


# -- no array-sized temporary ---------------------------------------------------------------------

N = 4_000_000  # 16 MB of float32


def traced_peak(f):
    """Bytes traced by tracemalloc at the peak of `f()` (numpy reports its array data to it),
    after an untraced warm-up call (the kernel's compilation)."""
    f()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        f()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def big():
    y = RNG.standard_normal(N).astype(np.float32)
    y[::1000] = np.nan
    y[1::1000] = -0.0
    return y, y > 0


IN_PLACE = {
    "then-python-int": lambda y, m: selectjit.where(selectjit.greater(y, 0), y, 0, out=y),
    "then-numpy-scalar": lambda y, m: selectjit.where(selectjit.greater(y, np.float32(0)), y,
                                                      np.float32(0), out=y),
    "else-isnan": lambda y, m: selectjit.where(selectjit.isnan(y), 0, y, out=y),
    "else-python-int": lambda y, m: selectjit.where(selectjit.less(y, 0), 0, y, out=y),
    "then-mask": lambda y, m: selectjit.where(m, y, 0, out=y),
    "else-mask": lambda y, m: selectjit.where(m, 0, y, out=y),
    "then-both-pred-operands": lambda y, m: selectjit.where(selectjit.equal(y, y), y, 0, out=y),
    "then-reversed-view": lambda y, m: selectjit.where(selectjit.greater(y[::-1], 0), y[::-1], 0,
                                                       out=y[::-1]),
}

# Calls whose overlap is read from a copy, and the bytes of that copy.
MUST_COPY = {
    "then-out-reversed": (lambda y, m: selectjit.where(m, y, 0, out=y[::-1]), 4 * N),
    "pred-out-reversed": (
        lambda y, m: selectjit.where(selectjit.greater(y[::-1], 0), y, 0, out=y), 4 * N),
    "else-shifted": (lambda y, m: selectjit.where(m[1:], 0, y[:-1], out=y[1:]), 4 * (N - 1)),
}


@pytest.mark.parametrize("form", list(IN_PLACE))
def test_in_place_allocates_no_array_sized_temporary(form, big):
    y0, m = big
    y = y0.copy()
    call = IN_PLACE[form]
    peak = traced_peak(lambda: call(y, m))
    assert peak < y.nbytes // 16, f"{form}: traced peak {peak} bytes for a {y.nbytes}-byte array"
    # Still numpy's result (two calls: the warm-up and the traced one).
    want = y0.copy()
    for _ in range(2):
        want = _numpy_form(form, want, m)
    assert_same(y, want)


def _numpy_form(form, y, m):
    """numpy.where for the forms of IN_PLACE, as a new array."""
    if form == "then-python-int":
        return np.where(np.greater(y, 0), y, 0)
    if form == "then-numpy-scalar":
        return np.where(np.greater(y, np.float32(0)), y, np.float32(0))
    if form == "else-isnan":
        return np.where(np.isnan(y), 0, y)
    if form == "else-python-int":
        return np.where(np.less(y, 0), 0, y)
    if form == "then-mask":
        return np.where(m, y, 0)
    if form == "else-mask":
        return np.where(m, 0, y)
    if form == "then-both-pred-operands":
        return np.where(np.equal(y, y), y, 0)
    if form == "then-reversed-view":
        return np.where(np.greater(y, 0), y, 0)
    raise AssertionError(form)


@pytest.mark.parametrize("form", list(MUST_COPY))
def test_a_copying_call_shows_in_the_measure(form, big):
    """The measure sees a copy: a call whose overlap must be read from a copy peaks above the
    array's size."""
    y0, m = big
    y = y0.copy()
    call, copied = MUST_COPY[form]
    peak = traced_peak(lambda: call(y, m))
    assert peak >= copied, f"{form}: traced peak {peak} bytes, a copy of {copied} bytes expected"

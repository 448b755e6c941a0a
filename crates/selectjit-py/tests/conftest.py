"""Shared helpers: bitwise comparison of results against numpy.where."""

import numpy as np
import pytest

import selectjit


def _significant(a):
    """The bytes of `a` that carry its value, in logical order. x87 long doubles are 10 bytes
    stored in 16: when numpy casts to long double the other 6 are whatever its buffer held, so
    they are compared only when no cast was involved (`padding=True`)."""
    a = np.ascontiguousarray(a)
    ld = np.dtype(np.longdouble)
    if a.dtype.kind in "fc" and a.dtype.base in (ld, np.dtype(np.clongdouble)) and ld.itemsize == 16 \
            and np.finfo(np.longdouble).nmant == 63:
        b = a.view(np.uint8).reshape(-1, 16)[:, :10]
        return b.tobytes()
    return a.tobytes()


def assert_same(got, want, *, layout=True, padding=False):
    """`got` equals `want` bit for bit: type, dtype, shape, every element's bytes (NaN payloads
    and -0.0 included; for long doubles their 10 value bytes unless `padding`) and, with
    `layout`, the memory order (strides)."""
    assert type(got) is type(want), (type(got), type(want))
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.hasobject:
        assert got.tolist() == want.tolist()
        assert all(a is b for a, b in zip(got.ravel().tolist(), want.ravel().tolist()))
    else:
        # tobytes() is in logical (C) order whatever the memory order, so this compares every
        # element's bytes; the uint8 view of a C-ordered copy says the same for the report.
        if padding:
            gb, wb = got.tobytes(), want.tobytes()
        else:
            gb, wb = _significant(got), _significant(want)
        if gb != wb:
            g = np.ascontiguousarray(got).view(np.uint8)
            w = np.ascontiguousarray(want).view(np.uint8)
            bad = np.flatnonzero(g.ravel() != w.ravel())
            raise AssertionError(f"bytes differ at {bad[:10]} (of {g.size}): {got!r} vs {want!r}")
    if layout and want.size > 0:
        assert got.strides == want.strides, (got.strides, want.strides)
        assert got.flags.c_contiguous == want.flags.c_contiguous
        assert got.flags.f_contiguous == want.flags.f_contiguous


def check(cond, x, y, engine=None):
    """selectjit.where(cond, x, y) against numpy.where(cond, x, y): the same result, or the same
    exception type. Returns numpy's result (or None when it raised)."""
    w = (engine or selectjit).where
    try:
        want = np.where(cond, x, y)
    except Exception as e:  # noqa: BLE001 - numpy's own error is the expectation
        with pytest.raises(type(e)):
            w(cond, x, y)
        return None
    got = w(cond, x, y)
    assert_same(got, want)
    return want


def named_tier():
    """A tier this build runs on this host, named (its kernels are then not chosen by measuring):
    avx2, else cranelift (when the package was built with it), else avx512; None if none."""
    for tier in ["avx2", "cranelift", "avx512"]:
        try:
            selectjit.Engine(tier=tier)
            return tier
        except ValueError:
            pass
    return None


@pytest.fixture(params=["default", "named-tier", "two-threads"])
def engine(request):
    """The default engine, an engine of one named tier, and an engine that splits across two
    threads."""
    if request.param == "default":
        return None
    if request.param == "named-tier":
        tier = named_tier()
        if tier is None:
            pytest.skip("no named tier runs here")
        return selectjit.Engine(tier=tier, threads=1)
    return selectjit.Engine(threads=2)

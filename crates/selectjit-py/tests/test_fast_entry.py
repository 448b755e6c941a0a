"""The vectorcall entries of `selectjit.where` and `Engine.where` (3 positional arguments,
optionally `out=`) and the small predicate call's weak scalars written as element bytes:
results, dtypes, warnings and errors are numpy's, and every other form of the call behaves as
the general entry."""

import inspect
import pickle
import warnings

import numpy as np
import pytest

import selectjit

from conftest import assert_same

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64, np.longdouble, np.complex64, np.complex128,
          np.bool_]
SCALARS = [0, 1, -1, 127, 128, -129, 255, 256, 2**15, 2**16, 2**31, 2**32, 2**53, 2**53 + 1,
           2**63 - 1, 2**63, -2**63, 2**64, 2048, 2049, 2**24 + 1, 0.0, -0.0, 0.5, 0.1, 1e-8,
           65504.0, 65520.0, 1e38, 3.5e38, 1e300, float("inf"), float("-inf"), float("nan"),
           1j, complex(0.1, -0.0), complex(1, float("nan")), complex(1e300, 1), -0j]


def numpy_or_error(f):
    """f()'s result, warnings and exception type."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r, e = f(), None
        except Exception as ex:  # noqa: BLE001 (compared by type)
            r, e = None, type(ex)
    return r, e, sorted(str(x.category) for x in w)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_weak_scalars_against_numpy(dt):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(16) * 4).astype(dt)
    o = np.empty_like(x)
    for s in SCALARS:
        for order in (0, 1):
            def mine(out=None):
                p = selectjit.greater(x, 0) if x.dtype != np.bool_ else selectjit.isnan(x)
                args = (p, x, s) if order == 0 else (p, s, x)
                return selectjit.where(*args) if out is None else selectjit.where(*args, out=out)

            def theirs():
                c = (x > 0) if x.dtype != np.bool_ else np.isnan(x)
                return np.where(c, x, s) if order == 0 else np.where(c, s, x)

            got, ge, gw = numpy_or_error(mine)
            want, we, ww = numpy_or_error(theirs)
            assert ge == we, (dt, s, ge, we)
            assert gw == ww, (dt, s, gw, ww)
            if want is not None:
                assert_same(got, want)
                if want.dtype == x.dtype:
                    r, e, w2 = numpy_or_error(lambda: mine(out=o))
                    assert e is None and r is o and w2 == ww
                    assert_same(o, want)


@pytest.mark.parametrize("dt", DTYPES + [">f4", "<i2", ">c8"], ids=str)
def test_result_dtype_of_array_and_weak_scalar(dt):
    x = np.arange(16).astype(dt)
    c = x == x  # noqa: PLR0124
    for s in (1, 1.0, 1j):
        for args in ((c, x, s), (c, s, x)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = np.where(*args)
                got = selectjit.where(*args)
            assert got.dtype == want.dtype, (dt, s)


def test_call_forms_match_the_general_entry():
    x = np.arange(6.0)
    c = x > 2
    general = selectjit._selectjit._where_any
    assert_same(selectjit.where(c, x, 0), np.where(c, x, 0))
    assert_same(selectjit.where(c, x, 0, out=None), np.where(c, x, 0))
    o = np.empty(6)
    assert selectjit.where(c, x, -1.0, out=o) is o
    assert_same(o, np.where(c, x, -1.0))
    assert_same(selectjit.where(c, x, 0, broadcast="numpy"), np.where(c, x, 0))
    assert_same(selectjit.where(c, x, 0, out=o, axis=-1), np.where(c, x, 0))
    assert [a.tolist() for a in selectjit.where(c)] == [[3, 4, 5]]
    bad = [
        lambda f: f(),
        lambda f: f(c, x),
        lambda f: f(c, x, 0, 1),
        lambda f: f(c, x, 0, outt=o),
        lambda f: f(condition=c, x=x, y=0),
        lambda f: f(c, x, 0, out=np.empty(5)),
        lambda f: f(c, x, 0, out=[0.0] * 6),
        lambda f: f(c, x, 0, broadcast=1),
        lambda f: f(c, out=o),
    ]
    for call in bad:
        _, e1, _ = numpy_or_error(lambda: call(selectjit.where))
        _, e2, _ = numpy_or_error(lambda: call(general))
        assert e1 is not None and e1 is e2


def test_where_is_a_documented_picklable_function():
    assert selectjit.where.__name__ == "where"
    assert selectjit.where.__module__ == "selectjit"
    assert "numpy.where" in selectjit.where.__doc__
    params = list(inspect.signature(selectjit.where).parameters)
    assert params == ["condition", "args", "out", "broadcast", "axis"]
    assert pickle.loads(pickle.dumps(selectjit.where)) is selectjit.where


def test_overlapping_out_and_views_decline_the_fast_path():
    x = np.arange(-8.0, 8.0, dtype=np.float32)
    want = np.where(x > 0, x, 0)
    y = x.copy()
    assert selectjit.where(selectjit.greater(y, 0), y, 0, out=y) is y
    assert_same(y, want)
    z = np.arange(-8.0, 8.0, dtype=np.float32)[::-1].copy()[::-1]
    assert_same(selectjit.where(selectjit.greater(z, 0), z, 0), np.where(z > 0, z, 0))


def test_inexact_scalar_warns_once_when_out_is_declined():
    x = np.arange(-8.0, 8.0, dtype=np.float32)
    for out in (np.empty(16, np.complex64)[::2].copy()[:8], np.empty(4, np.complex64), None):
        def mine():
            return selectjit.where(selectjit.greater(x, 0), x, complex(1e300, 1),
                                   **({} if out is None else {"out": out}))
        _, e1, w1 = numpy_or_error(mine)
        _, e2, w2 = numpy_or_error(lambda: np.where(x > 0, x, complex(1e300, 1)))
        if out is None:
            assert (e1, w1) == (e2, w2)
        else:
            # The general path rejects `out` before converting the scalar (no warning).
            assert e1 is not None and w1 == []


PREDICATES = ["greater", "greater_equal", "less", "less_equal", "equal", "not_equal",
              "isnan", "isinf", "isfinite"]


@pytest.mark.parametrize("name", PREDICATES)
def test_predicate_entries_match_the_general_ones(name):
    f = getattr(selectjit, name)
    general = getattr(selectjit._selectjit, f"_{name}_any")
    two = name not in ("isnan", "isinf", "isfinite")
    x = np.array([-1.0, 0.0, np.nan, np.inf, 2.0])
    args = (x, 0.0) if two else (x,)
    uf = getattr(np, name)
    assert_same(selectjit.where(f(*args), x, 7.0), np.where(uf(*args), x, 7.0))
    assert_same(np.asarray(f(*args)), uf(*args))
    assert f.__name__ == name and f.__doc__ == general.__doc__
    assert inspect.signature(f) == inspect.signature(general)
    assert pickle.loads(pickle.dumps(f)) is f
    bad = [(), (x, 0.0, 1.0), (x,) if two else (x, 0.0)]
    for a in bad:
        _, e1, _ = numpy_or_error(lambda: f(*a))
        _, e2, _ = numpy_or_error(lambda: general(*a))
        assert e1 is not None and e1 is e2
    _, e1, _ = numpy_or_error(lambda: f(x1=x, x2=0) if two else f(x=x))
    _, e2, _ = numpy_or_error(lambda: general(x1=x, x2=0) if two else general(x=x))
    assert e1 is not None and e1 is e2


def outcome(f):
    """f()'s result, exception (type and message) and warnings."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r, e = f(), None
        except Exception as ex:  # noqa: BLE001 (compared by type and message)
            r, e = None, (type(ex), str(ex))
    return r, e, sorted(str(x.category) for x in w)


ENGINES = [lambda: selectjit.Engine(threads=1), lambda: selectjit.default_engine()]


@pytest.mark.parametrize("make", ENGINES, ids=["own", "default"])
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_engine_where_matches_where_and_numpy(make, dt):
    e = make()
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(16) * 4).astype(dt)
    c = (x > 0) if x.dtype != np.bool_ else ~x
    for s in (0, 1, -1, 2**31, 0.5, 1e300, float("nan"), 1j):
        for args in ((c, x, s), (c, s, x)):
            lazy = selectjit.greater(x, 0) if x.dtype != np.bool_ else selectjit.isnan(x)
            p = (lazy,) + args[1:]
            want, we, ww = outcome(lambda: np.where(*args))
            for a in (args, p):
                for f in (e.where, lambda *b, **k: selectjit.Engine.where(e, *b, **k)):
                    got, ge, gw = outcome(lambda: f(*a))
                    ref, re_, rw = outcome(lambda: selectjit.where(*a))
                    assert (ge and ge[0]) == (we and we[0]) == (re_ and re_[0]), (dt, s, ge)
                    assert gw == ww == rw, (dt, s, gw, ww)
                    if want is not None:
                        assert_same(got, want)
                        assert_same(ref, want)
                        o = np.empty_like(want)
                        r, e2, _ = outcome(lambda: f(*a, out=o))
                        assert e2 is None and r is o
                        assert_same(o, want)


def test_engine_where_call_forms_match_the_general_method():
    e = selectjit.Engine(threads=1)
    general = selectjit.Engine._where_any
    x = np.arange(6.0)
    c = x > 2
    o = np.empty(6)
    good = [
        lambda f: f(c, x, 0),
        lambda f: f(c, x, 0, out=None),
        lambda f: f(c, x, -1.0, out=o),
        lambda f: f(c, x, 0, broadcast="numpy"),
        lambda f: f(c, x, 0, out=o, axis=-1),
        lambda f: f(c, x, 0, broadcast="two-step"),
        lambda f: f(selectjit.greater(x, 2), 0, x),
    ]
    for call in good:
        got = call(e.where)
        want = call(lambda *a, **k: general(e, *a, **k))
        assert_same(got, want)
        assert_same(got, call(selectjit.where))
    assert [a.tolist() for a in e.where(c)] == [[3, 4, 5]]
    assert e.where(c, x, -1.0, out=o) is o
    bad = [
        lambda f: f(),
        lambda f: f(c, x),
        lambda f: f(c, x, 0, 1),
        lambda f: f(c, x, 0, outt=o),
        lambda f: f(c, x, 0, out=o, outt=o),
        lambda f: f(condition=c, x=x, y=0),
        lambda f: f(c, x, y=0),
        lambda f: f(c, x, 0, out=np.empty(5)),
        lambda f: f(c, x, 0, out=np.empty(6, np.int8)),
        lambda f: f(c, x, 0, out=[0.0] * 6),
        lambda f: f(c, x, 0, broadcast=1),
        lambda f: f(c, x, 0, broadcast="none", axis=0),
        lambda f: f(c, out=o),
        lambda f: f(np.ones(4, bool), x, 0),
        lambda f: f(c, np.arange(6, dtype=np.int8), 2**70),
    ]
    for call in bad:
        _, e1, w1 = outcome(lambda: call(e.where))
        _, e2, w2 = outcome(lambda: call(lambda *a, **k: general(e, *a, **k)))
        _, e3, _ = outcome(lambda: call(lambda *a, **k: selectjit.Engine.where(e, *a, **k)))
        _, e4, _ = outcome(lambda: call(selectjit.where))
        assert e1 is not None and e1 == e2 == e3, (inspect.getsource(call), e1, e2, e3)
        assert e1[0] is e4[0], (e1, e4)
        assert w1 == w2
    for f in (selectjit.Engine.where, general):
        _, e1, _ = outcome(lambda: f(1, c, x, 0))
        _, e2, _ = outcome(lambda: f())
        assert e1[0] is TypeError and e2[0] is TypeError


def test_engine_where_is_a_documented_picklable_method():
    e = selectjit.Engine(threads=1)
    general = selectjit.Engine._where_any
    assert selectjit.Engine.where.__name__ == "where"
    assert selectjit.Engine.where.__qualname__ == general.__qualname__ == "Engine.where"
    assert selectjit.Engine.where.__doc__ == general.__doc__
    assert "selectjit.where" in selectjit.Engine.where.__doc__
    assert selectjit.Engine.where.__text_signature__ == general.__text_signature__
    assert inspect.signature(selectjit.Engine.where) == inspect.signature(general)
    assert inspect.signature(e.where) == inspect.signature(general.__get__(e))
    assert e.where.__self__ is e
    d = selectjit.default_engine()
    assert pickle.loads(pickle.dumps(d.where)).__self__ is d
    w2 = pickle.loads(pickle.dumps(e.where))
    e2 = pickle.loads(pickle.dumps(e))
    assert w2.__self__ is e2 and repr(e2) == repr(e)
    x = np.arange(-8.0, 8.0, dtype=np.float32)
    assert_same(w2(selectjit.greater(x, 0), x, 0), np.where(x > 0, x, 0))

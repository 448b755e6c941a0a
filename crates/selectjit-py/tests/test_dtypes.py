"""Every dtype, every kind of condition, numpy's promotion rules: bitwise against numpy.where."""

import warnings

import ml_dtypes
import numpy as np
import pytest

import selectjit
from conftest import assert_same, check

RNG = np.random.default_rng(20261123)

NUMERIC = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.longdouble, np.complex64, np.complex128,
    np.clongdouble, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
    ml_dtypes.int4,
]
SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4), (600,), (4, 0, 3)]


def raw(shape, dtype):
    """An array of `dtype` whose bytes are random: NaN payloads, signalling NaNs, -0.0, inf,
    denormals, bools other than 0/1, padding bytes."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) * dt.itemsize
    return RNG.integers(0, 256, n, dtype=np.uint8).view(dt).reshape(shape)


def mask(shape, p=0.5):
    return RNG.random(shape) < p


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_same_dtype_every_bit_pattern(dtype, shape, engine):
    x, y = raw(shape, dtype), raw(shape, dtype)
    cond = mask(shape)
    # No cast involved: every byte is moved, long double padding included.
    assert_same((engine or selectjit).where(cond, x, y), np.where(cond, x, y), padding=True)


FLOATS = [d for d in NUMERIC if np.dtype(d).kind in "fc" or "float" in np.dtype(d).name]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_special_float_values_survive(dtype):
    dt = np.dtype(dtype)
    vals = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 1e-40, -1e-310], dtype=np.float64)
    x = vals.astype(dt)
    y = np.full_like(x, 7)
    want = check(np.ones(x.shape, bool), x, y)
    assert want.tobytes() == x.tobytes()


@pytest.mark.parametrize("dx", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dy", NUMERIC, ids=lambda d: np.dtype(d).name)
def test_promotion_of_every_pair(dx, dy):
    shape = (3, 4)
    x = (RNG.standard_normal(shape) * 50).astype(dx)
    y = (RNG.standard_normal(shape) * 50).astype(dy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(mask(shape), x, y)


COND_VALUES = {
    "bool_bytes": np.array([0, 1, 2, 255, 128, 0], np.uint8).view(np.bool_),
    "int8": np.array([0, -1, 1, -128, 127, 0], np.int8),
    "uint8": np.array([0, 255, 1, 2, 0, 9], np.uint8),
    "int64": np.array([0, -(2**63), 1, 2**40, 0, -1], np.int64),
    "uint16": np.array([0, 256, 1, 65535, 0, 512], np.uint16),
    "float32": np.array([np.nan, -0.0, 0.0, 1e-45, -np.inf, 2.0], np.float32),
    "float64": np.array([-np.nan, -0.0, 5e-324, 0.0, np.inf, 0.5], np.float64),
    "float16": np.array([np.nan, -0.0, 0.0, 6e-8, 1.0, -2.0], np.float16),
    "longdouble": np.array([np.nan, -0.0, 0.0, 1e-4000, 1.0, -2.0], np.longdouble),
    "complex64": np.array([0j, -0.0 - 0.0j, complex(np.nan, 0), 1e-45j, 1 + 0j, 0j], np.complex64),
    "complex128": np.array([0j, complex(0, -0.0), 5e-324j, complex(0, np.nan), 2j, 1], np.complex128),
    "bfloat16": np.array([np.nan, -0.0, 0.0, 1e-30, 1.0, -2.0], ml_dtypes.bfloat16),
    "float8": np.array([np.nan, -0.0, 0.0, 0.01, 1.0, -2.0], ml_dtypes.float8_e4m3fn),
    "object": np.array([0, None, "", "a", [], 3.5], dtype=object),
    "str": np.array(["", "a", "0", "False", "", " "]),
    "bytes": np.array([b"", b"a", b"\x00", b"0", b"", b"x"]),
    "datetime": np.array([0, 1, -1, 0, "NaT", 5], "m8[s]"),
}


@pytest.mark.parametrize("name", sorted(COND_VALUES))
def test_condition_is_nonzero_as_numpy_decides(name, engine):
    cond = COND_VALUES[name]
    x = np.arange(6, dtype=np.float32)
    y = -np.arange(6, dtype=np.float32)
    check(cond, x, y, engine)
    check(cond.reshape(2, 3), x.reshape(2, 3), np.float32(-1), engine)
    check(cond[::-2], x[:3], 0.5, engine)


def test_bool_bytes_other_than_0_1_are_true():
    cond = np.array([0, 1, 2, 255], np.uint8).view(bool)
    got = selectjit.where(cond, np.int64(1), np.int64(0))
    assert got.tolist() == [0, 1, 1, 1]
    assert_same(got, np.where(cond, np.int64(1), np.int64(0)))


@pytest.mark.parametrize("cond", [True, False, 0, 1, 0.0, -0.0, float("nan"), 1j, None, [1, 0, 2],
                                  [[True], [False]], (0, 1), np.bool_(True), np.float32(-0.0)],
                         ids=repr)
def test_condition_objects(cond):
    check(cond, np.arange(3.0), np.float64(-1))
    check(cond, 1, 2)


SCALARS = [0, 1, -1, 127, 300, -129, 2**40, 2**62 + 2**38 + 1, 2**63, -(2**63), 2**64, 2**70,
           True, False, 0.0, -0.0, 0.1, 1.5, 1e10, 1e300, float("nan"), float("inf"),
           -float("inf"), 1j, complex(float("nan"), -0.0), 2 + 3j]


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
def test_python_scalars_are_weak(dtype, scalar):
    x = raw((5,), dtype)
    cond = np.array([1, 0, 1, 0, 0], bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(cond, x, scalar)
        check(cond, scalar, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(cond, scalar, scalar)


@pytest.mark.parametrize("scalar", [1e10, 1e300, 2**62 + 1, -0.0, 0.1, float("nan")], ids=repr)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int8], ids=lambda d: np.dtype(d).name)
def test_cast_warnings_match_numpy_every_call(dtype, scalar):
    """Conversions numpy warns about warn here too, on every call (they are never cached)."""
    x = np.zeros(4, dtype)
    cond = np.array([0, 1, 0, 1], bool)
    for _ in range(3):
        with warnings.catch_warnings(record=True) as wn:
            warnings.simplefilter("always")
            want = np.where(cond, x, scalar)
        with warnings.catch_warnings(record=True) as wg:
            warnings.simplefilter("always")
            got = selectjit.where(cond, x, scalar)
        assert_same(got, want)
        assert [w.category for w in wg] == [w.category for w in wn]


def test_scalar_conversions_repeat_exactly():
    """The cache of converted scalars gives the same bits as a fresh conversion, per dtype."""
    cond = np.array([0, 1], bool)
    for dtype in (np.float16, np.float32, np.float64, np.complex64, np.int16, np.uint8):
        x = np.ones(2, dtype)
        for s in (0, 0.5, -0.0, 3, 2.25, 1 + 2j):
            for _ in range(3):
                check(cond, x, s)
                check(cond, s, x)


@pytest.mark.parametrize("value", [np.float32(1.5), np.int8(-3), np.uint64(2**63), np.bool_(True),
                                   np.float16(-0.0), np.complex64(1j), ml_dtypes.bfloat16(2.5),
                                   np.longdouble(1) / 3, np.datetime64(5, "s"), np.str_("ab")],
                         ids=repr)
def test_numpy_scalars_are_strong(value):
    for other in (np.arange(4, dtype=np.float32), np.arange(4, dtype=np.int64), 7, 2.5,
                  np.array(["x", "yy", "z", "w"]), np.array([1, 2, 3, 4], "M8[ms]")):
        check(np.array([1, 0, 1, 0], bool), value, other)


def test_lists_and_nested_sequences():
    check([[1, 0], [0, 1]], [[1, 2], [3, 4]], [[-1.5, -2], [-3, -4]])
    check([True, False], [1, 2**70], 0)
    check([1, 0, 1], (1.5, 2, 3), [1j, 2, 3])
    check([], [], [])
    check([True, False], np.array([b"a", b"bc"]), np.array(["xyz", "w"]))
    check([[]], 1, 2.0)


OTHER = [
    ("S1", ["a", "b"]), ("S4", ["ab", "abcd"]), ("S3", ["x", "yyy"]), ("U1", ["é", "z"]),
    ("U3", ["abc", ""]), ("U4", ["🙂", "abcd"]), ("M8[s]", [0, 10**9]), ("M8[ms]", ["NaT", 5]),
    ("m8[ns]", [1, "NaT"]), ("V3", [b"abc", b"de\x00"]),
    ([("a", "i1"), ("b", "f4")], [(1, 2.5), (3, -0.0)]),
    ([("a", "i4"), ("b", "f4")], [(1, 2.5), (3, -0.0)]),
    ([("a", "f8"), ("b", "f8")], [(1, np.nan), (3, -0.0)]),
    ("2i4", [(1, 2), (3, 4)]), (object, [1, None]),
]


@pytest.mark.parametrize("dtype,values", OTHER, ids=lambda v: str(v)[:20])
def test_other_dtypes_as_numpy(dtype, values, engine):
    x = np.array(values, dtype=dtype)
    y = x[::-1].copy()
    cond = np.array([True, False])
    check(cond, x, y, engine)
    check(cond[:, None], x, y, engine)
    check(True, x[:1], y, engine)


def test_string_dtype_goes_to_numpy():
    sd = np.dtypes.StringDType()
    x = np.array(["a", "bb", "a longer string than sixteen bytes"], dtype=sd)
    y = np.array(["z", "", "w"], dtype=sd)
    want = np.where([1, 0, 1], x, y)
    got = selectjit.where([1, 0, 1], x, y)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_datetimes_of_different_units_are_cast_by_numpy():
    x = np.array(["2020-01-01", "NaT"], "M8[D]")
    y = np.array([1, 2], "M8[ms]")
    check([True, False], x, y)
    check([False, True], x, y)


@pytest.mark.parametrize("x,y", [(np.array(["a"]), 1), (np.array([1], "M8[s]"), 1.5),
                                 (np.array([1], "M8[s]"), np.array([1 + 1j])),
                                 (np.array([1, 2]), np.array([(1, 2)], "i4,i4"))],
                         ids=["str-int", "dt-float", "datetime-complex", "int-struct"])
def test_promotion_errors_are_numpys(x, y):
    with pytest.raises(Exception) as e:
        np.where(True, x, y)
    with pytest.raises(type(e.value)):
        selectjit.where(True, x, y)


def test_large_ints_as_numpy():
    x = np.arange(3, dtype=np.int8)
    check([1, 0, 1], x, 2**70)  # OverflowError in both
    check([1, 0, 1], x, 300)  # wraps in both (unsafe cast of int64 300)
    check([1, 0, 1], np.arange(3, dtype=np.uint64), 2**64 - 1)
    check([1, 0, 1], np.arange(3, dtype=np.float32), 2**62 + 2**38 + 1)

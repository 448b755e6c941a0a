"""selectjit.arrow.if_else and case_when against pyarrow.compute's: results equal (validity,
values at valid slots) and of the same type and class, errors of the same class."""

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")

import selectjit.arrow as sa  # noqa: E402

# Every fixed-width type pyarrow's if_else and case_when take.
FIXED = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.bool_(),
    pa.date32(),
    pa.date64(),
    pa.time32("s"),
    pa.time64("ns"),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("ns", tz="Europe/Paris"),
    pa.timestamp("ms"),
    pa.duration("ms"),
    pa.month_day_nano_interval(),
    pa.decimal128(20, 4),
    pa.decimal256(40, 2),
    pa.binary(5),
]


def _bits(rng, n, density):
    """`n` random bits (1 with probability `density`) as Arrow's bitmap bytes."""
    return np.packbits(rng.random(n) < density, bitorder="little").tobytes()


def rand_array(rng, typ, n, null_rate=0.1, offset=None):
    """A random array of `n` values of `typ` with about `null_rate` nulls, sliced from a
    longer one at a random bit offset (not a multiple of 8 unless drawn so)."""
    off = int(rng.integers(0, 64)) if offset is None else offset
    total = n + off
    validity = pa.py_buffer(_bits(rng, total, 1.0 - null_rate)) if null_rate > 0 else None
    if pa.types.is_boolean(typ):
        data = pa.py_buffer(_bits(rng, total, 0.5))
    elif pa.types.is_floating(typ):
        # Finite values: Array.equals holds NaN unequal to itself.
        vals = rng.standard_normal(total) * 1000
        data = pa.py_buffer(vals.astype(typ.to_pandas_dtype()).tobytes())
    else:
        data = pa.py_buffer(rng.integers(0, 256, total * typ.byte_width, dtype=np.uint8).tobytes())
    arr = pa.Array.from_buffers(typ, total, [validity, data])
    return arr.slice(off, n)


def rand_cond(rng, n, density=0.5, null_rate=0.1, offset=None):
    off = int(rng.integers(0, 64)) if offset is None else offset
    total = n + off
    validity = pa.py_buffer(_bits(rng, total, 1.0 - null_rate)) if null_rate > 0 else None
    arr = pa.Array.from_buffers(pa.bool_(), total, [validity, pa.py_buffer(_bits(rng, total, density))])
    return arr.slice(off, n)


def assert_same(got, want):
    assert type(got) is type(want), (type(got), type(want))
    assert got.type == want.type, (got.type, want.type)
    assert len(got) == len(want)
    assert got.equals(want), (got, want)


@pytest.fixture
def no_fallback(monkeypatch):
    """The call must be computed by selectjit, not handed to pyarrow.compute."""

    def fail(*a, **k):
        raise AssertionError("fell back to pyarrow.compute")

    monkeypatch.setattr(sa, "_pyarrow_if_else", fail)
    monkeypatch.setattr(sa, "_pyarrow_case_when", fail)


def chunked(rng, arr):
    """`arr` cut into random chunks (an empty one among them sometimes)."""
    n = len(arr)
    cuts = sorted(set(int(c) for c in rng.integers(0, n + 1, int(rng.integers(0, 5)))) | {0, n})
    return pa.chunked_array([arr.slice(a, b - a) for a, b in zip(cuts, cuts[1:])], type=arr.type)


@pytest.mark.parametrize("typ", FIXED, ids=str)
def test_if_else_types(typ, no_fallback):
    rng = np.random.default_rng(abs(hash(str(typ))) % 2**32)
    for n in (0, 1, 7, 64, 65, 1000, 4099):
        for null_rate in (0.0, 0.1, 0.5, 1.0):
            c = rand_cond(rng, n, density=rng.random(), null_rate=null_rate)
            a = rand_array(rng, typ, n, null_rate)
            b = rand_array(rng, typ, n, null_rate)
            assert_same(sa.if_else(c, a, b), pc.if_else(c, a, b))


@pytest.mark.parametrize("typ", FIXED, ids=str)
def test_if_else_scalars(typ, no_fallback):
    rng = np.random.default_rng(1)
    n = 333
    c = rand_cond(rng, n)
    a = rand_array(rng, typ, n)
    s = rand_array(rng, typ, 1, 0.0)[0]
    null = pa.scalar(None, typ)
    for left, right in [(a, s), (s, a), (s, s), (a, null), (null, a), (null, s), (null, null)]:
        assert_same(sa.if_else(c, left, right), pc.if_else(c, left, right))
    # A scalar condition broadcast (a null one gives nulls).
    for cs in (True, False, pa.scalar(True), pa.scalar(None, pa.bool_())):
        assert_same(sa.if_else(cs, a, s), pc.if_else(cs, a, s))


def test_if_else_python_scalars(no_fallback):
    rng = np.random.default_rng(2)
    c = rand_cond(rng, 500)
    i = rand_array(rng, pa.int64(), 500)
    f = rand_array(rng, pa.float64(), 500)
    b = rand_array(rng, pa.bool_(), 500)
    for x, s in [(i, 7), (i, -(2**62)), (i, 2**63 - 1), (i, -(2**63)), (f, 1.5), (f, -0.0),
                 (f, 3.0), (f, np.float64(2.5)), (b, True), (b, False)]:
        assert_same(sa.if_else(c, x, s), pc.if_else(c, x, s))
        assert_same(sa.if_else(c, s, x), pc.if_else(c, s, x))


def test_if_else_densities_offsets(no_fallback):
    rng = np.random.default_rng(3)
    for density in (0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 1.0):
        for off in (0, 1, 7, 8, 13, 63):
            n = int(rng.integers(0, 3000))
            c = rand_cond(rng, n, density, null_rate=rng.choice([0.0, 0.2, 1.0]), offset=off)
            a = rand_array(rng, pa.int32(), n, 0.1, offset=(off * 3) % 64)
            b = rand_array(rng, pa.int32(), n, 0.1, offset=(off * 5) % 64)
            assert_same(sa.if_else(c, a, b), pc.if_else(c, a, b))


@pytest.mark.parametrize("typ", [pa.float64(), pa.int32(), pa.bool_(), pa.float16()], ids=str)
def test_large(typ, no_fallback):
    """Lengths of many blocks of rows, sliced at odd offsets."""
    rng = np.random.default_rng(12)
    n = 100_003
    c = rand_cond(rng, n, 0.5, 0.1, offset=5)
    a, b = rand_array(rng, typ, n, 0.1, offset=11), rand_array(rng, typ, n, 0.1, offset=0)
    assert_same(sa.if_else(c, a, b), pc.if_else(c, a, b))
    cond = cond_struct(rng, n + 3, 3).slice(3, n)
    vals = [rand_array(rng, typ, n, 0.2) for _ in range(4)]
    assert_same(sa.case_when(cond, *vals), pc.case_when(cond, *vals))
    assert_same(sa.case_when(cond, *vals[:3]), pc.case_when(cond, *vals[:3]))


@pytest.mark.parametrize("typ", [pa.float64(), pa.int16(), pa.bool_(), pa.binary(3)], ids=str)
def test_if_else_chunked(typ, no_fallback):
    rng = np.random.default_rng(4)
    for n in (0, 10, 1000):
        c = rand_cond(rng, n)
        a = rand_array(rng, typ, n)
        b = rand_array(rng, typ, n)
        for args in [(chunked(rng, c), a, b), (c, chunked(rng, a), chunked(rng, b)),
                     (chunked(rng, c), chunked(rng, a), b[0] if n else pa.scalar(None, typ))]:
            got = sa.if_else(*args)
            want = pc.if_else(*args)
            assert isinstance(got, pa.ChunkedArray)
            assert_same(got, want)


def test_if_else_fallback():
    """What selectjit does not compute is pyarrow.compute's result."""
    rng = np.random.default_rng(5)
    n = 200
    c = rand_cond(rng, n)
    i32 = rand_array(rng, pa.int32(), n)
    s = pa.array([None if x < 0.1 else str(x) for x in rng.random(n)])
    cases = [
        (c, i32, 5),  # int32 and a Python int: int64
        (c, i32, rand_array(rng, pa.int64(), n)),
        (c, i32, 2.5),
        (c, s, "z"),
        (c, s, s),
        (c, s.dictionary_encode(), "z"),
        (c, i32, None),
        (c, pa.array(range(n), pa.decimal128(10, 2)), pa.array(range(n), pa.decimal128(12, 3))),
        (c, pa.array(range(n), pa.timestamp("us")), pa.array(range(n), pa.timestamp("ms"))),
        (list(c.to_pylist()), i32, i32),
        (True, 1, 2),
        (c, np.arange(n, dtype=np.int32), i32),
    ]
    for args in cases:
        got = sa.if_else(*args)
        want = pc.if_else(*args)
        assert type(got) is type(want)
        assert got.type == want.type
        assert got.equals(want)


def test_if_else_errors():
    rng = np.random.default_rng(6)
    c = rand_cond(rng, 10)
    a = rand_array(rng, pa.int64(), 10)
    cases = [
        (c, a, "x"),
        (c, a[:5], a),
        (c[:5], a, a),
        (a, a, a),
        (c, rand_array(rng, pa.timestamp("us", "UTC"), 10), rand_array(rng, pa.timestamp("us", "Asia/Tokyo"), 10)),
        (c, rand_array(rng, pa.binary(2), 10), rand_array(rng, pa.binary(3), 10)),
        (c, rand_array(rng, pa.bool_(), 10), a),
        (c, a, object()),
        (c, rand_array(rng, pa.uint64(), 10), 2**63),  # pyarrow.scalar overflows
        # An extension type (uuid: fixed_size_binary[16] storage) has no kernel in pyarrow.
        (c, pa.ExtensionArray.from_storage(pa.uuid(), rand_array(rng, pa.binary(16), 10, offset=0)),
         pa.ExtensionArray.from_storage(pa.uuid(), rand_array(rng, pa.binary(16), 10, offset=0))),
    ]
    for args in cases:
        with pytest.raises(Exception) as want:
            pc.if_else(*args)
        with pytest.raises(Exception) as got:
            sa.if_else(*args)
        assert got.type is want.type, (args, got.value, want.value)
        assert str(got.value) == str(want.value)


def cond_struct(rng, n, k, null_rate=0.1, offset=None):
    fields = [rand_cond(rng, n, density=rng.random() * 0.6, null_rate=null_rate) for _ in range(k)]
    return pa.StructArray.from_arrays(fields, names=[f"c{i}" for i in range(k)])


@pytest.mark.parametrize("typ", FIXED, ids=str)
def test_case_when_types(typ, no_fallback):
    rng = np.random.default_rng(abs(hash("cw" + str(typ))) % 2**32)
    for n in (0, 1, 100, 4099):
        for k in (1, 2, 3, 5):
            for null_rate in (0.0, 0.1, 1.0):
                cond = cond_struct(rng, n, k, null_rate)
                vals = [rand_array(rng, typ, n, null_rate) for _ in range(k + 1)]
                assert_same(sa.case_when(cond, *vals[:k]), pc.case_when(cond, *vals[:k]))
                assert_same(sa.case_when(cond, *vals), pc.case_when(cond, *vals))


@pytest.mark.parametrize("typ", [pa.float64(), pa.int8(), pa.bool_(), pa.decimal128(9, 3)], ids=str)
def test_case_when_scalars_sliced_chunked(typ, no_fallback):
    rng = np.random.default_rng(7)
    n = 777
    cond = cond_struct(rng, n + 40, 3).slice(13, n)
    vals = [rand_array(rng, typ, n) for _ in range(3)]
    s = rand_array(rng, typ, 1, 0.0)[0]
    null = pa.scalar(None, typ)
    for cases in [(vals[0], s, vals[1], s), (s, s, s), (s, null, vals[2], null), (null, vals[0], vals[1])]:
        assert_same(sa.case_when(cond, *cases), pc.case_when(cond, *cases))
    cc = chunked(rng, cond)
    for cases in [(chunked(rng, vals[0]), s, vals[1]), (vals[0], vals[1], chunked(rng, vals[2]), s)]:
        got = sa.case_when(cc, *cases)
        assert isinstance(got, pa.ChunkedArray)
        assert_same(got, pc.case_when(cc, *cases))
    # A scalar condition broadcast.
    sc = pa.scalar({"a": None, "b": True}, pa.struct([("a", pa.bool_()), ("b", pa.bool_())]))
    assert_same(sa.case_when(sc, vals[0], vals[1], s), pc.case_when(sc, vals[0], vals[1], s))


def test_case_when_fallback_and_errors():
    rng = np.random.default_rng(8)
    n = 50
    cond = cond_struct(rng, n, 2)
    i32 = rand_array(rng, pa.int32(), n)
    i64 = rand_array(rng, pa.int64(), n)
    strs = pa.array([str(x) for x in range(n)])
    for cases in [(i32, i64), (i32, 5), (strs, "z"), (strs, strs, strs)]:
        got, want = sa.case_when(cond, *cases), pc.case_when(cond, *cases)
        assert type(got) is type(want) and got.type == want.type and got.equals(want)
    # A null struct slot: pyarrow refuses it (ArrowInvalid), unless sliced away.
    nulled = pa.StructArray.from_arrays(
        [cond.field(0), cond.field(1)], names=["a", "b"], mask=pa.array([i == 3 for i in range(n)])
    )
    got, want = sa.case_when(nulled[4:], i64[4:], i64[4:]), pc.case_when(nulled[4:], i64[4:], i64[4:])
    assert got.equals(want)
    bad = [
        (nulled, i64, i64),
        (cond, i64),
        (cond, i64, i64, i64, i64),
        (cond, i64[:10], i64),
        (cond, i64, None),
        (cond.field(0), i64),
        (pa.StructArray.from_arrays([i64], names=["x"]), i64),
        (cond, i64, "x"),
    ]
    for args in bad:
        with pytest.raises(Exception) as want:
            pc.case_when(*args)
        with pytest.raises(Exception) as got:
            sa.case_when(*args)
        assert got.type is want.type, (args, got.value, want.value)
        assert str(got.value) == str(want.value)


def test_polars_input():
    pl = pytest.importorskip("polars")
    rng = np.random.default_rng(9)
    n = 1000
    c = rand_cond(rng, n, offset=0)
    a = rand_array(rng, pa.float64(), n, offset=0)
    b = rand_array(rng, pa.float64(), n, offset=0)
    cs, as_, bs = (pl.from_arrow(x) for x in (c, a, b))
    got = sa.if_else(cs, as_, bs)
    assert isinstance(got, pa.ChunkedArray)
    assert_same(got.combine_chunks(), pc.if_else(c, a, b))
    got = sa.if_else(cs, a, 2.0)
    assert_same(got.combine_chunks(), pc.if_else(c, a, 2.0))
    cond = pa.StructArray.from_arrays([c, rand_cond(rng, n, offset=0)], names=["x", "y"])
    got = sa.case_when(pl.from_arrow(cond), as_, b, 0.5)
    assert_same(got.combine_chunks(), pc.case_when(cond, a, b, 0.5))
    # What pyarrow.compute computes is given polars Series as pyarrow arrays.
    s = pl.Series(range(n), dtype=pl.Int32)
    got = sa.if_else(cs, s, 5)
    want = pc.if_else(c, pa.chunked_array(s), 5)
    assert got.type == want.type == pa.int64() and got.equals(want)


def test_nanoarrow_input(no_fallback):
    na = pytest.importorskip("nanoarrow")
    rng = np.random.default_rng(11)
    n = 500
    c = rand_cond(rng, n)
    a = rand_array(rng, pa.int32(), n)
    b = rand_array(rng, pa.int32(), n)
    got = sa.if_else(na.Array(c), na.Array(a), b)
    assert isinstance(got, pa.Array)
    assert_same(got, pc.if_else(c, a, b))
    # A nanoarrow array of several chunks is a chunked array.
    got = sa.if_else(na.Array(pa.chunked_array([c[:100], c[100:]])), a, na.Array(b))
    assert isinstance(got, pa.ChunkedArray)
    assert_same(got, pc.if_else(pa.chunked_array([c[:100], c[100:]]), a, b))
    cond = cond_struct(rng, n, 2)
    got = sa.case_when(na.Array(cond), na.Array(a), b, na.Array(a))
    assert_same(got, pc.case_when(cond, a, b, a))


def test_without_pyarrow(monkeypatch):
    """Without pyarrow: capsule exporters in, capsule exporters out, refusals raised."""
    monkeypatch.setattr(sa, "_pa_module", False)
    rng = np.random.default_rng(10)
    n = 300
    c = rand_cond(rng, n)
    a = rand_array(rng, pa.int64(), n)
    out = sa.if_else(c, a, 3)
    assert isinstance(out, sa.ArrowArray) and len(out) == n
    assert_same(pa.array(out), pc.if_else(c, a, 3))
    # Its own outputs are inputs too.
    out2 = sa.if_else(c, out, a)
    assert_same(pa.array(out2), pc.if_else(c, pc.if_else(c, a, 3), a))
    ch = sa.if_else(chunked(rng, c), a, 1)
    assert isinstance(ch, sa.ArrowChunkedArray)
    assert pa.chunked_array(ch).equals(pc.if_else(chunked(rng, c), a, 1))
    cond = cond_struct(rng, n, 2)
    out = sa.case_when(cond, a, 5, 1)
    assert_same(pa.array(out), pc.case_when(cond, a, 5, 1))
    with pytest.raises(TypeError):
        sa.if_else(c, a, 1.5)
    with pytest.raises(ValueError):
        sa.if_else(c, a[:3], a)
    with pytest.raises(NotImplementedError):
        sa.if_else(c, pa.array(["x"] * n), pa.array(["y"] * n))
    with pytest.raises(TypeError):
        sa.if_else(c, a, "x")

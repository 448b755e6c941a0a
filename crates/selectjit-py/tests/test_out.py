"""out=: any layout, in place on x or y, overlap as numpy's ufuncs, errors leave out untouched."""

import numpy as np
import pytest

import selectjit
from conftest import assert_same

RNG = np.random.default_rng(11)


def f32(shape):
    return RNG.standard_normal(shape).astype(np.float32)


def outs(shape, dtype):
    """Outputs of `shape` in several layouts, each with its own buffer."""
    yield np.empty(shape, dtype)
    yield np.empty(shape, dtype, order="F")
    yield np.empty(tuple(2 * d for d in shape), dtype)[::2, 1::2]
    yield np.empty(shape, dtype)[::-1, ::-1][::-1, ::-1]
    yield np.empty(shape, dtype)[::-1]
    yield np.empty(shape[::-1], dtype).T[:, ::-1]


@pytest.mark.parametrize("shape", [(5, 7), (40, 33)], ids=str)
def test_out_any_layout(shape, engine):
    w = (engine or selectjit).where
    c, x, y = RNG.random(shape) < 0.5, f32(shape), f32(shape[-1:])
    want = np.where(c, x, y)
    for out in outs(shape, np.float32):
        r = w(c, x, y, out=out)
        assert r is out
        assert_same(out.copy(), want)


def test_out_with_scalars_and_promotion():
    c = np.array([True, False, True])
    out = np.empty(3, np.float64)
    r = selectjit.where(c, np.arange(3, dtype=np.int32), 0.5, out=out)
    assert r is out and out.tobytes() == np.where(c, np.arange(3, dtype=np.int32), 0.5).tobytes()
    out0 = np.empty((), np.int64)
    selectjit.where(True, 3, 4, out=out0)
    assert out0 == 3


@pytest.mark.parametrize("which", ["x", "y"])
@pytest.mark.parametrize("layout", ["C", "F", "reversed", "strided"])
def test_in_place(which, layout, engine):
    w = (engine or selectjit).where
    base = f32((30, 20))
    if layout == "F":
        base = np.asfortranarray(base)
    elif layout == "reversed":
        base = base[::-1, ::-1]
    elif layout == "strided":
        base = np.repeat(base, 2, axis=1)[:, ::2]
    other = f32((20,))
    c = RNG.random((30, 1)) < 0.5
    x, y = (base, other) if which == "x" else (other, base)
    want = np.where(c, x, y)
    r = w(c, x, y, out=base)
    assert r is base
    assert base.tobytes() == want.tobytes()


def test_in_place_both_operands_the_output():
    a = f32((6, 6))
    want = a.copy()
    selectjit.where(RNG.random((6, 6)) < 0.5, a, a, out=a)
    assert a.tobytes() == want.tobytes()


def test_in_place_through_another_view_object():
    a = f32((4, 5))
    v = a[...]
    assert v is not a
    c = RNG.random((4, 5)) < 0.5
    want = np.where(c, a, -1.0)
    selectjit.where(c, v, np.float32(-1.0), out=a)
    assert a.tobytes() == want.astype(np.float32).tobytes()


@pytest.mark.parametrize("case", ["reversed-x", "shifted-x", "y-rows", "cond-in-out", "x-strided",
                                  "x-is-transpose"])
def test_overlap_reads_inputs_as_if_copied(case):
    """Like numpy's ufuncs with an overlapping out=: the result is computed from the inputs as
    they were before the call."""
    if case == "cond-in-out":
        buf = np.array([1, 0, 1, 1, 0, 0, 1, 0], np.uint8).view(bool)
        c, x, y, out = buf, np.zeros(8, bool), np.ones(8, bool), buf[::-1]
    else:
        a = f32((8, 8))
        c = RNG.random((8, 8)) < 0.5
        if case == "reversed-x":
            x, y, out = a, np.float32(0), a[::-1, ::-1]
        elif case == "shifted-x":
            big = f32((9, 8))
            x, y, out = big[1:], big[:-1], big[:-1]
        elif case == "y-rows":
            x, y, out = f32((8, 8)), a[0], a
        elif case == "x-strided":
            big = f32((8, 16))
            x, y, out = big[:, ::2], f32((8, 8)), big[:, 1::2]
        else:
            x, y, out = a.T, np.float32(1), a
    want = np.where(c, np.copy(x), np.copy(y))
    r = selectjit.where(c, x, y, out=out)
    assert r is out
    assert out.tobytes() == want.tobytes()


def untouched(out, call):
    before = out.copy()
    call()
    assert out.tobytes() == before.tobytes()


def test_wrong_shape_is_a_value_error_naming_shapes():
    c, x = np.ones((2, 3), bool), f32((2, 3))
    out = f32((3, 2))
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        untouched(out, lambda: selectjit.where(c, x, 0.0, out=out))
    out = f32((2, 3))[None]
    with pytest.raises(ValueError, match="shape"):
        untouched(out, lambda: selectjit.where(c, x, 0.0, out=out))


def test_wrong_dtype_is_a_type_error_naming_dtypes():
    c, x = np.ones(4, bool), f32(4)
    for bad in (np.zeros(4, np.float64), np.zeros(4, np.int32), np.zeros(4, ">f4"),
                np.zeros(4, object)):
        with pytest.raises(TypeError, match=r"float32") as e:
            untouched(bad, lambda: selectjit.where(c, x, x, out=bad))
        assert str(bad.dtype) in str(e.value) or bad.dtype.str in str(e.value)


def test_readonly_out_is_a_value_error():
    c, x = np.ones(4, bool), f32(4)
    ro = f32(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        untouched(ro, lambda: selectjit.where(c, x, 0.0, out=ro))
    bc = np.broadcast_to(f32(1), (4,))
    with pytest.raises(ValueError, match="writeable"):
        selectjit.where(c, x, 0.0, out=bc)


@pytest.mark.parametrize("bad", [[0.0] * 4, (1,), 3.0, "out", None.__class__])
def test_out_not_an_array_is_a_type_error(bad):
    with pytest.raises(TypeError, match="ndarray"):
        selectjit.where(np.ones(4, bool), f32(4), 0.0, out=bad)


def test_broadcast_error_with_out_leaves_it_untouched():
    out = f32((2, 3))
    with pytest.raises(ValueError):
        untouched(out, lambda: selectjit.where(np.ones(3, bool), f32((2, 3)), f32(4), out=out))


def test_promotion_error_with_out_leaves_it_untouched():
    out = np.zeros(2, "U3")
    with pytest.raises(TypeError):
        untouched(out, lambda: selectjit.where([1, 0], np.array(["a", "b"]), 1, out=out))


def test_out_on_numpys_path():
    """Dtypes numpy moves itself (objects, odd itemsizes) still fill out=."""
    x = np.array(["abc", "de"])
    out = np.empty(2, "<U3")
    r = selectjit.where([False, True], x, np.array(["xyz", "w"]), out=out)
    assert r is out and out.tolist() == ["xyz", "de"]
    o = np.empty(2, object)
    selectjit.where([True, False], np.array([None, 1], object), 5, out=o)
    assert o.tolist() == [None, 5]
    bad = np.empty(2, "<U2")
    with pytest.raises(TypeError):
        untouched(bad, lambda: selectjit.where([False, True], x, np.array(["xyz", "w"]), out=bad))


def test_overlapping_output_elements_are_rejected():
    base = f32(8)
    out = np.lib.stride_tricks.as_strided(base, shape=(4, 4), strides=(4, 4))
    assert out.flags.writeable
    with pytest.raises(ValueError, match="overlap"):
        untouched(base, lambda: selectjit.where(np.ones((4, 4), bool), f32((4, 4)), 0.0, out=out))

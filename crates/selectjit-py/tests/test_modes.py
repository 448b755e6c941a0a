"""broadcast="two-step" | "none" | "pdpd" (with axis): the library's other modes, against
references built from numpy (one-way broadcasting with numpy.broadcast_to)."""

import numpy as np
import pytest

import selectjit
from conftest import assert_same

RNG = np.random.default_rng(3)


def f32(shape):
    return RNG.standard_normal(shape).astype(np.float32)


def mask(shape):
    return RNG.random(shape) < 0.5


def two_step_ref(c, x, y):
    out_shape = np.broadcast_shapes(np.shape(x), np.shape(y))
    return np.where(np.broadcast_to(c, out_shape), x, y)


@pytest.mark.parametrize("shapes", [
    ((3,), (2, 3), (2, 3)), ((1, 3), (2, 3), ()), ((2, 1), (2, 3), (3,)), ((), (4, 1), (1, 5)),
    ((5,), (4, 5), (4, 1)), ((0,), (2, 0), (0,)),
], ids=str)
def test_two_step(shapes, engine):
    w = (engine or selectjit).where
    c, x, y = mask(shapes[0]), f32(shapes[1]), f32(shapes[2])
    assert_same(w(c, x, y, broadcast="two-step"), two_step_ref(c, x, y))


@pytest.mark.parametrize("shapes,numpy_ok", [(((3, 5), (2, 3, 4, 5), (2, 3, 4, 5)), False),
                                             (((2, 3), (3,), (3,)), True),
                                             (((2, 1), (1, 3), (3,)), True)], ids=str)
def test_two_step_refuses_what_would_grow_the_output(shapes, numpy_ok):
    c, x, y = mask(shapes[0]), f32(shapes[1]), f32(shapes[2])
    if numpy_ok:
        assert_same(selectjit.where(c, x, y), np.where(c, x, y))
    with pytest.raises(ValueError, match="two-step"):
        selectjit.where(c, x, y, broadcast="two-step")


def test_none_needs_identical_shapes():
    c, x, y = mask((3, 4)), f32((3, 4)), f32((3, 4))
    assert_same(selectjit.where(c, x, y, broadcast="none"), np.where(c, x, y))
    with pytest.raises(ValueError, match="identical"):
        selectjit.where(c, x, f32((4,)), broadcast="none")
    with pytest.raises(ValueError):
        selectjit.where(True, x, y, broadcast="none")


@pytest.mark.parametrize("then,other,axis,placed", [
    ((2, 3, 4, 5), (3, 4), 1, (1, 3, 4, 1)),
    ((2, 3, 4, 5), (4, 5), -1, (1, 1, 4, 5)),
    ((2, 3, 4), (3, 1), -1, (1, 3, 1)),
    ((2, 3, 4), (2, 3, 4), 0, (2, 3, 4)),
    ((2, 3, 4), (1, 3, 1), 0, (1, 3, 1)),
    ((2, 3, 4), (), -1, (1, 1, 1)),
    ((2, 3, 4), (2,), 0, (2, 1, 1)),
], ids=str)
def test_pdpd(then, other, axis, placed, engine):
    w = (engine or selectjit).where
    x, y, c = f32(then), f32(other), mask(other)
    want = np.where(c.reshape(placed), x, y.reshape(placed))
    assert_same(w(c, x, y, broadcast="pdpd", axis=axis), want)


def test_pdpd_errors():
    x = f32((2, 3, 4, 5))
    with pytest.raises(ValueError, match="pdpd"):
        selectjit.where(mask((3, 4)), x, f32((3, 4)), broadcast="pdpd", axis=-1)
    with pytest.raises(ValueError, match="axis"):
        selectjit.where(True, x, 0.0, broadcast="pdpd", axis=-2)
    with pytest.raises(ValueError):
        selectjit.where(True, f32(3), f32((2, 3)), broadcast="pdpd")


def test_modes_on_numpys_path():
    """Dtypes the kernels do not move go to numpy with the inputs placed as the mode says."""
    x = np.array([["ab", "c"], ["d", "efg"]])
    y = np.array(["zz", "y"])
    c = np.array([True, False])
    want = np.where(c, x, y)
    got = selectjit.where(c, x, y, broadcast="two-step")
    assert got.tolist() == want.tolist() and got.dtype == want.dtype
    o = np.array([[None, 1], [2, None]], object)
    got = selectjit.where(np.array([True, False]), o, np.array([5], object), broadcast="pdpd", axis=0)
    want = np.where(np.array([True, False])[:, None], o, np.array([5], object)[:, None])
    assert got.tolist() == want.tolist()


def test_unknown_modes():
    with pytest.raises(ValueError, match="unknown broadcast mode"):
        selectjit.where(True, 1, 2, broadcast="bidirectional")
    with pytest.raises(TypeError, match="broadcast must be a str"):
        selectjit.where(True, 1, 2, broadcast=1)
    with pytest.raises(TypeError):
        selectjit.where(True, 1, 2, axis="0", broadcast="pdpd")


def test_numpy_mode_by_name_and_shape_errors():
    c, x = mask((2, 3)), f32((2, 3))
    assert_same(selectjit.where(c, x, 1.0, broadcast="numpy"), np.where(c, x, 1.0))
    with pytest.raises(ValueError, match=r"\[3\].*\[2,3\].*\[4\]"):
        selectjit.where(mask(3), x, f32(4))
    with pytest.raises(ValueError):
        np.where(mask(3), x, f32(4))

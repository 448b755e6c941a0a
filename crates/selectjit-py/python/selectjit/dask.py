"""`selectjit.where`, `select` and `nan_to_num` over dask arrays, one call per block.

`selectjit.dask.where(condition, x, y)` is `dask.array.where(condition, x, y)`: the same
graph shape (one task per output block, the chunks `dask.array.where` gives), numpy's
broadcasting, and numpy's result dtype (NEP 50: Python scalars are weak), with
`selectjit.where` computing each block. Arguments may be dask arrays, numpy arrays (and other
array-likes), numpy scalars and Python scalars, mixed.

Importing this module does not import dask; calling `where` does.

A condition may also be an object that is not an array but knows how to evaluate itself block
by block: a class with a method `__selectjit_blocks__(self)` returning `(make, operands)`,
where `operands` is a sequence of arrays or scalars (broadcast together with x and y as any
argument is) and `make(*blocks)` builds, from one block of each operand, the condition
`selectjit.where` takes for that output block. `make` travels to the workers, so it must
pickle (a module-level function or class). selectjit's lazy predicates (`selectjit.greater(x, 0)`,
...) are such conditions: each block's predicate is fused into its kernel call.
"""

from typing import TYPE_CHECKING, Any

import numpy as np

from ._selectjit import where as _where

if TYPE_CHECKING:
    import dask.array

__all__ = ["where", "select", "nan_to_num"]


def where(condition: Any, x: Any, y: Any, /) -> "dask.array.Array":
    """`dask.array.where(condition, x, y)` computed block by block with `selectjit.where`.

    Returns a dask array (0-d when every argument is); shapes that do not broadcast are a
    ValueError and dtypes that do not promote numpy's error (e.g. `DTypePromotionError`), both
    raised here, before anything is computed.
    """
    import dask.array as da
    from dask.array.core import broadcast_shapes

    blocks = getattr(type(condition), "__selectjit_blocks__", None)
    if blocks is not None:
        make, operands = blocks(condition)
        operands = tuple(operands)
    else:
        make, operands = None, (condition,)
    args = [_operand(a) for a in (*operands, x, y)]
    scalar = [_is_scalar(a) for a in args]

    # numpy's broadcast rule (dask's implementation of it, which also takes unknown sizes).
    shapes = [() if s else a.shape for a, s in zip(args, scalar)]
    ndim = len(broadcast_shapes(*shapes))
    # The result dtype as numpy.where decides it from x and y alone: Python scalars are passed
    # as they are (weak), anything else as a one-element array of its dtype (0-d arrays are
    # not weak in numpy 2). numpy's own promotion errors are raised here.
    # (The probe's values are not the arguments': numpy's warnings about them, e.g. an overflow
    # casting 1e300 to float16, come from the blocks.)
    probe = [a if s else np.empty(1, a.dtype) for a, s in zip(args[-2:], scalar[-2:])]
    with np.errstate(all="ignore"):
        dtype = np.where(np.ones(1, bool), *probe).dtype

    pairs = []
    for a, s in zip(args, scalar):
        pairs += [a, None] if s else [a, tuple(range(a.ndim))[::-1]]
    return da.blockwise(
        _where_block,
        tuple(range(ndim))[::-1],
        *pairs,
        make=make,
        ncond=len(operands),
        dtype=dtype,
        meta=np.empty((0,) * ndim, dtype),
        token="selectjit-where",
    )


def _where_block(*blocks, make, ncond):
    """One output block: the condition's blocks (built into a condition by `make`, when the
    condition was not an array), then x's and y's."""
    cond = blocks[0] if make is None else make(*blocks[:ncond])
    return _where(cond, blocks[ncond], blocks[ncond + 1])


def _operand(a):
    # Lists and tuples become arrays, as numpy.where and dask.array.where make them.
    return np.asarray(a) if isinstance(a, (list, tuple)) else a


def _is_scalar(a):
    """Whether `a` goes to every block as it is (dask's elemwise rule): Python and numpy
    scalars, 0-d numpy arrays, and objects without a shape. Anything else is an array: dask
    arrays, and array-likes with a shape, which dask converts (numpy arrays become one chunk,
    rechunked to line up with the other arguments)."""
    if np.isscalar(a) or isinstance(a, np.dtype):
        return True
    if isinstance(a, np.ndarray):
        return a.ndim == 0
    shape = getattr(a, "shape", None)
    return not isinstance(shape, tuple)


def select(condlist: Any, choicelist: Any, default: Any = 0) -> "dask.array.Array":
    """`numpy.select(condlist, choicelist, default)` over dask arrays, each output block computed
    by `selectjit.select` (one n-way call per block). Conditions may be bool arrays (dask, numpy)
    or lazy predicates (`selectjit.less(x, 3)` with `x` a dask array: evaluated per block inside
    the kernel). The result dtype and shape are numpy.select's; lists of different lengths, an
    empty list and shapes that do not broadcast raise numpy's errors here, before anything is
    computed.
    """
    import dask.array as da
    from dask.array.core import broadcast_shapes

    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    makes, counts, args = [], [], []
    for c in condlist:
        blocks = getattr(type(c), "__selectjit_blocks__", None)
        if blocks is not None:
            make, operands = blocks(c)
            operands = tuple(operands)
        else:
            make, operands = None, (c,)
        makes.append(make)
        counts.append(len(operands))
        args += [_operand(a) for a in operands]
    values = [_operand(a) for a in (*choicelist, default)]
    args += values
    scalar = [_is_scalar(a) for a in args]
    shapes = [() if s else a.shape for a, s in zip(args, scalar)]
    ndim = len(broadcast_shapes(*shapes))
    # The result dtype as numpy.select decides it: Python scalars weak, anything else by its
    # dtype (numpy's own promotion errors are raised here).
    probe = [
        a if type(a) in (int, float, complex) else np.empty(1, np.asarray(a).dtype if s else a.dtype)
        for a, s in zip(values, scalar[-len(values):])
    ]
    try:
        dtype = np.result_type(*probe)
    except TypeError as e:
        msg = f"Choicelist and default value do not have a common dtype: {e}"
        raise TypeError(msg) from None
    pairs = []
    for a, s in zip(args, scalar):
        pairs += [a, None] if s else [a, tuple(range(a.ndim))[::-1]]
    return da.blockwise(
        _select_block,
        tuple(range(ndim))[::-1],
        *pairs,
        makes=tuple(makes),
        counts=tuple(counts),
        dtype=dtype,
        meta=np.empty((0,) * ndim, dtype),
        token="selectjit-select",
    )


def _select_block(*blocks, makes, counts):
    """One output block: each condition's blocks (built into a condition by its `make`), then
    the choices' and the default's."""
    from . import select as _select

    conds, at = [], 0
    for make, n in zip(makes, counts):
        part = blocks[at : at + n]
        conds.append(part[0] if make is None else make(*part))
        at += n
    values = blocks[at:]
    return _select(conds, list(values[:-1]), values[-1])


def nan_to_num(x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None,
               neginf: Any = None) -> "dask.array.Array":
    """`numpy.nan_to_num` over a dask array, each block computed by `selectjit.nan_to_num` (one
    pass per block; `copy` is accepted for numpy's signature: dask arrays are not written in
    place). Integers and bool come back unchanged; bfloat16 is replaced as any float (see
    `selectjit.nan_to_num`)."""
    import dask.array as da

    x = da.asarray(x)
    return x.map_blocks(
        _nan_to_num_block, nan=nan, posinf=posinf, neginf=neginf, dtype=x.dtype,
        token="selectjit-nan-to-num",
    )


def _nan_to_num_block(block, nan, posinf, neginf):
    from . import nan_to_num as _nan_to_num

    return _nan_to_num(block, copy=True, nan=nan, posinf=posinf, neginf=neginf)

"""`selectjit.where` over dask arrays, one call per block.

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

__all__ = ["where"]


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

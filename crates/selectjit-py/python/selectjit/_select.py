"""`select` and `nan_to_num`: numpy.select and numpy.nan_to_num bit for bit, in one pass.

Both are an n-way select (the first true condition wins) that selectjit runs as one call of its
kernels, conditions computed per element where they are lazy predicates (`selectjit.isnan(x)`,
`selectjit.less(x, 3)`), with no bool temporary and no pass per branch. The checks, the result
dtype and shape, the conversions of the values and their errors are numpy's own, made in the
order numpy makes them; results that selectjit's kernels do not move (object or string dtypes)
come from numpy itself.
"""

import math

import numpy as np

from ._predicates import Predicate, _bfloat16, equal, isnan
from ._selectjit import _select_n

__all__ = ["select", "nan_to_num"]

_WEAK = (int, float, complex)
_BOOL = np.dtype(bool)
# Python scalars converted to a dtype (read-only 0-d arrays), a bounded cache.
_SCALARS = {}


def _broadcast(shapes):
    """numpy's broadcast of `shapes` (its errors too), without numpy's call when every shape is
    one and the same or `()`."""
    first = max(shapes, key=len)
    if all(s == first or s == () for s in shapes):
        return first
    return np.broadcast_shapes(*shapes)


def _converted(value, dtype, casting):
    """`value` as an array of `dtype`, converted as `numpy.copyto(..., casting=casting)` does it
    (numpy.select fills its result with `copyto`, from its arguments made arrays: a Python
    scalar is then an int64 / float64 / complex128 array, not weak): the array itself when it
    already has that dtype."""
    t = type(value)
    if t is np.ndarray and value.dtype == dtype:
        return value
    if isinstance(value, np.generic) and value.dtype == dtype:
        return np.asarray(value)
    if t in _WEAK:
        # Python scalars: numpy's conversion of one, remembered (their repr tells -0.0 from
        # 0.0 and NaN from a number).
        key = (dtype, t, repr(value), casting)
        r = _SCALARS.get(key)
        if r is None:
            a = np.asarray(value)
            r = np.empty(a.shape, dtype)
            np.copyto(r, a, casting=casting)
            r.flags.writeable = False
            if len(_SCALARS) >= 256:
                _SCALARS.clear()
            _SCALARS[key] = r
        return r
    a = np.asarray(value)
    r = np.empty(a.shape, dtype)
    np.copyto(r, a, casting=casting)
    return r


def _check_out(out, shape, dtype):
    if type(out) is not np.ndarray and not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, not {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"out has shape {out.shape} but the result's is {shape}")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype} but the result's is {dtype}")
    if not out.flags.writeable:
        raise ValueError("out is not writeable")


def select(condlist, choicelist, default=0, *, out=None):
    """numpy.select(condlist, choicelist, default), bit for bit, in one pass.

    Each element of the result is the element of the first `choicelist[i]` whose
    `condlist[i]` is true there, else `default`. A condition is a bool array (as numpy
    requires) or a lazy predicate (`selectjit.less(x, 3)`, `selectjit.isnan(x)`, ...), which
    the kernel evaluates per element without making its bool array. The result dtype, shape,
    conversions and errors are numpy.select's. `out`, if given, is an array of exactly the
    result's shape and dtype that receives the result (and is returned); it may be one of the
    choices or the default (read as it was on entry).
    """
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    if out is None:
        r = _select_fast(condlist, choicelist, default)
        if r is not None:
            return r
    choices = [c if type(c) in _WEAK else np.asarray(c) for c in choicelist]
    choices.append(default if type(default) in _WEAK else np.asarray(default))
    try:
        dtype = np.result_type(*choices)
    except TypeError as e:
        msg = f"Choicelist and default value do not have a common dtype: {e}"
        raise TypeError(msg) from None
    # The conditions as numpy.broadcast_arrays takes them, lazy predicates kept lazy.
    conds = [c if isinstance(c, Predicate) else np.asarray(c) for c in condlist]
    cshape = _broadcast([np.shape(c) for c in conds])
    vshape = _broadcast([np.shape(c) for c in choices])
    for i, c in enumerate(conds):
        if c.dtype.type is not np.bool_:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    shape = cshape if len(vshape) == 0 else _broadcast([cshape, vshape])
    # Each value as numpy's copyto converts it into the result: the choices under
    # `same_kind`, the default (numpy.full) under `unsafe`.
    try:
        values = [_converted(c, dtype, "same_kind") for c in choices[:-1]]
        dflt = _converted(choices[-1], dtype, "unsafe")
    except Exception:
        # numpy's conversion refuses a value (e.g. a Python int into an unsigned dtype): its
        # own select raises the error, in its words (made from the broadcast arrays).
        np.select([np.asarray(c) for c in conds], choicelist, default)
        raise
    if out is not None:
        _check_out(out, shape, dtype)
    r = _select_n(conds, values, dflt, dtype, list(shape), out)
    if r is None:
        # A dtype the kernels do not move: numpy's own select.
        arrays = [np.asarray(c) for c in conds]
        r = np.select(arrays, choicelist, default)
        if out is not None:
            np.copyto(out, r)
            r = out
    return r


def _select_fast(condlist, choicelist, default):
    """`select` of the common call with numpy's checks short-cut, or None: every choice and the
    default an exact ndarray or numpy scalar of one dtype (which is then numpy's result dtype,
    converting nothing), every condition a lazy predicate or a bool ndarray, every shape either
    one and the same or `()` (which is then numpy's broadcast)."""
    dt = None
    shape = ()
    values = []
    for v in (*choicelist, default):
        t = type(v)
        if t is not np.ndarray and not isinstance(v, np.generic):
            return None
        d = v.dtype
        if dt is None:
            dt = d
        elif d != dt:
            return None
        s = v.shape
        if s:
            if shape and s != shape:
                return None
            shape = s
        values.append(v if t is np.ndarray else np.asarray(v))
    for c in condlist:
        if isinstance(c, Predicate):
            s = c.shape
        elif type(c) is np.ndarray and c.dtype == _BOOL:
            s = c.shape
        else:
            return None
        if s:
            if shape and s != shape:
                return None
            shape = s
    return _select_n(list(condlist), values[:-1], values[-1], dt, list(shape), None)


def _limits(dtype):
    """(max, min) of a float dtype, bfloat16 included."""
    bf16 = _bfloat16()
    if bf16 is not None and dtype == bf16:
        import ml_dtypes

        f = ml_dtypes.finfo(dtype)
    else:
        f = np.finfo(dtype)
    return f.max, f.min


# nan_to_num's default replacements (0, the largest and the lowest finite value) per dtype.
_DEFAULTS = {}


def _replacements(dtype, nan, posinf, neginf):
    """nan_to_num's three replacements as 0-d arrays of `dtype`, converted as numpy's copyto
    converts them."""
    maxf, minf = _limits(dtype)
    if posinf is not None:
        maxf = posinf
    if neginf is not None:
        minf = neginf
    return [_converted(v, dtype, "same_kind") for v in (nan, maxf, minf)]


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """numpy.nan_to_num(x, copy, nan, posinf, neginf), bit for bit, in one pass per part.

    NaN becomes `nan`, +inf `posinf` (default the dtype's largest finite value), -inf `neginf`
    (default its lowest); complex arrays have their real and imaginary parts replaced
    separately; integer and bool arrays are returned unchanged (as numpy returns them);
    `copy=False` replaces in place. One divergence, on purpose: ml_dtypes' bfloat16 is
    replaced as any float is (numpy leaves it untouched, not seeing it as a float).
    """
    src = x
    bf16 = _bfloat16()
    is_bf16 = bf16 is not None and getattr(x, "dtype", None) == bf16
    if copy and type(x) is np.ndarray and x.flags.c_contiguous:
        # One pass from `x` into a new array (numpy copies first, then replaces).
        xtype = x.dtype.type
        if not (issubclass(xtype, np.inexact) or is_bf16):
            return np.array(x, subok=True, copy=True)
        result = np.empty_like(x) if issubclass(xtype, np.complexfloating) else None
    else:
        x = np.array(x, subok=True, copy=copy)
        xtype = x.dtype.type
        is_bf16 = bf16 is not None and x.dtype == bf16
        if type(x) is not np.ndarray or not (
            issubclass(xtype, np.inexact) or is_bf16
        ):
            # Subclasses, integers and bool: numpy's own.
            return np.nan_to_num(x, copy=False, nan=nan, posinf=posinf, neginf=neginf)
        src = result = x
    iscomplex = issubclass(xtype, np.complexfloating)
    parts = ((src.real, result.real), (src.imag, result.imag)) if iscomplex else ((src, result),)
    part_dtype = src.real.dtype if iscomplex else src.dtype
    if type(nan) is float and nan == 0.0 and posinf is None and neginf is None \
            and math.copysign(1.0, nan) > 0:
        # The default replacements: converted once per dtype.
        values = _DEFAULTS.get(part_dtype)
        if values is None:
            values = _replacements(part_dtype, 0.0, None, None)
            _DEFAULTS[part_dtype] = values
    else:
        values = _replacements(part_dtype, nan, posinf, neginf)
    if result is None:
        # A new real array: the kernel call allocates it (from the output pool).
        conds = [isnan(src), equal(src, np.inf), equal(src, -np.inf)]
        result = _select_n(conds, values, src, part_dtype, list(src.shape), None)
        return result[()] if result.ndim == 0 else result
    for s, d in parts:
        conds = [isnan(s), equal(s, np.inf), equal(s, -np.inf)]
        _select_n(conds, values, s, part_dtype, list(d.shape), d)
    return result[()] if result.ndim == 0 else result

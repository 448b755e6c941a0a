"""Lazy predicates: `selectjit.greater(x, 0)` & co., named as numpy's ufuncs.

A predicate is what `numpy.greater(x, 0)` would return, not yet computed: `selectjit.where`
runs it inside its kernel (one pass, no bool temporary), and anywhere else it is the bool array
numpy would have returned (`numpy.asarray(p)`, `p.shape`, `p.dtype`, `bool(p)`, `p.sum()`,
`p & q`, `x[p]`, ...: each such use evaluates it with numpy).

Which predicates run in the kernel ("fused"): comparisons and tests whose operands are exact
`numpy.ndarray`s, numpy scalars or Python `int` / `float` / `complex` scalars, when numpy's
own type resolution (`ufunc.resolve_dtypes`, NEP 50 for Python scalars) compares both operands
in one dtype that selectjit compares: bool, the integers, float16/32/64, complex64/128 (native
byte order). A Python scalar is converted to that dtype as numpy does, and only when the
conversion is exact for an `int` and does not overflow for a `float` / `complex`. Everything
else (e.g. int64 against uint64, which numpy compares exactly in a mixed loop; an `int` out of
the array's range, which numpy compares exactly; long double; datetimes; strings; objects;
array types of other libraries) is evaluated by numpy itself when the predicate is made, so its
result, warnings and errors are numpy's.

A fused predicate reads its operands when it is used, not when it is made: change an operand in
between and the predicate sees the change.
"""

import functools
import math
import sys
import struct as _struct
import warnings
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from ._errors import BroadcastError
from ._selectjit import (
    _Pred,
    equal,
    greater,
    greater_equal,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    not_equal,
)

__all__ = [
    "Predicate",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "equal",
    "not_equal",
    "isnan",
    "isinf",
    "isfinite",
    "logical_not",
]

_UFUNCS = {
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "isnan": np.isnan,
    "isinf": np.isinf,
    "isfinite": np.isfinite,
    "logical_not": np.logical_not,
}
_CMPS = ("greater", "greater_equal", "less", "less_equal", "equal", "not_equal")
_TESTS = ("isnan", "isinf", "isfinite")
# The dtypes the kernels compare (native byte order; `l` and `q` are one dtype on most hosts).
_SUPPORTED = frozenset(np.dtype(c) for c in "?bBhHiIlLqQefdFD")
_WEAK = (int, float, complex)
_BOOL = np.dtype(bool)


def _normalize(a):
    """An operand as the predicate keeps it: arrays and Python scalars as they are, predicates
    as their bool arrays, lists and tuples as numpy converts them."""
    if type(a) is np.ndarray:
        return a
    if isinstance(a, Predicate):
        return np.asarray(a)
    if isinstance(a, (list, tuple)):
        return np.asarray(a)
    return a


def _fusable_operand(a):
    return type(a) is np.ndarray or type(a) in _WEAK or isinstance(a, np.generic)


def _resolve_arg(a):
    t = type(a)
    if t is np.ndarray:
        return a.dtype
    if t in _WEAK:
        return t  # weak (NEP 50)
    return np.asarray(a).dtype


def _weak_scalar(v, dt):
    """The Python scalar `v` as a 0-d array of `dt` when numpy's conversion is certain to give
    that value without warnings, else None (numpy then evaluates the predicate itself)."""
    if dt.kind in "iu":
        if type(v) is not int:
            return None
        info = np.iinfo(dt)
        return np.array(v, dt) if info.min <= v <= info.max else None
    if dt == _bfloat16():
        return _weak_bfloat16(v, dt)
    if dt.kind not in "fc":
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(all="raise"):
                r = np.array(v, dt)
    except (ArithmeticError, ValueError, TypeError, RuntimeWarning):
        return None
    if type(v) is int:
        # Only ints the dtype holds exactly (numpy may round a large int otherwise).
        re = r.real if dt.kind == "c" else r
        return r if bool(np.isfinite(re)) and int(re) == v else None
    if bool(np.isfinite(v)) and not bool(np.all(np.isfinite(r))):
        return None  # overflows: numpy warns
    return r


# The bfloat16 loops fused: all of them. ml_dtypes' loops set "invalid" on a signaling NaN, and
# its ordered comparisons on any NaN (a RuntimeWarning, or an error under
# `errstate(invalid="raise")`), where numpy's own float loops set nothing; the fused kernels
# give the same bytes and, like numpy's float loops, no warning: a divergence kept on purpose
# (documented in the package README).
_BF16_FUSED = frozenset(_CMPS + _TESTS)


def _bfloat16():
    """ml_dtypes' bfloat16 dtype if ml_dtypes is imported (a bfloat16 array implies it is)."""
    m = sys.modules.get("ml_dtypes")
    bf16 = getattr(m, "bfloat16", None)
    return None if bf16 is None else np.dtype(bf16)


def _weak_bfloat16(v, dt):
    """The Python scalar `v` as a 0-d bfloat16 array when it is exactly a bfloat16 value (then
    numpy's comparison, in float32 or bfloat16, gives what comparing in bfloat16 does), else
    None."""
    if type(v) not in (int, float):
        return None
    if type(v) is int and abs(v) > 2**128:
        return None
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        r = np.array(v, dt)
    f = float(r)
    if f != f:
        return r if v != v else None
    return r if f == v and (type(v) is int or math.copysign(1.0, f) == math.copysign(1.0, v)) else None


# Small bounded caches of numpy's answers (dtype resolution, converted Python scalars): they
# depend only on their keys, and cost microseconds each to recompute.
_LOOPS = {}
_SCALARS = {}
_CACHE_MAX = 512


def _loop_dtype(kind, arg_types):
    """The one dtype numpy's `kind` ufunc compares `arg_types` in, if the kernels compare it."""
    key = (kind, arg_types)
    try:
        return _LOOPS[key]
    except KeyError:
        pass
    bf16 = _bfloat16()
    if bf16 is not None and bf16 in arg_types:
        # ml_dtypes' bfloat16 loops compare the values as floats (a Python float scalar in
        # float32, an int converted to bfloat16 first): with the operands exact in bfloat16
        # (`_weak_scalar` declines the other scalars) that is comparing in bfloat16. But every
        # one of them sets "invalid" on a signaling NaN (a warning, or an error under
        # `errstate(invalid="raise")`), and the ordered comparisons on any NaN, which the
        # fused loops (_BF16_FUSED) do not.
        ok = kind in _BF16_FUSED and all(t == bf16 or t in (int, float) for t in arg_types)
        dt = bf16 if ok else None
        _LOOPS[key] = dt
        return dt
    try:
        dts = _UFUNCS[kind].resolve_dtypes((*arg_types, None))
        ins = dts[:-1]
        dt = ins[0] if all(d == ins[0] for d in ins) and ins[0] in _SUPPORTED else None
    except Exception:  # noqa: BLE001 - numpy raises its own error when it evaluates
        dt = None
    if len(_LOOPS) >= _CACHE_MAX:
        _LOOPS.clear()
    _LOOPS[key] = dt
    return dt


def _weak_scalar_cached(v, dt):
    # Keyed by the value's exact bits (-0.0 and 0.0, NaN payloads differ).
    if type(v) is int:
        bits = v
    elif type(v) is float:
        bits = _struct.pack("<d", v)
    else:
        bits = _struct.pack("<dd", v.real, v.imag)
    key = (type(v), bits, dt)
    try:
        r = _SCALARS[key]
    except KeyError:
        r = _weak_scalar(v, dt)
        if len(_SCALARS) >= _CACHE_MAX:
            _SCALARS.clear()
        _SCALARS[key] = r
    return r


def _plan(kind, args):
    """How the kernels run the predicate: `(op, lhs, rhs, dtype, shape)` with ndarray operands,
    or None when numpy has to evaluate it."""
    if kind == "logical_not":
        (m,) = args
        if type(m) is not np.ndarray or m.dtype not in _SUPPORTED:
            return None
        # logical_not(m) is m == 0 for every dtype compared (NaN is true, -0.0 is false).
        return "equal", m, np.zeros((), m.dtype), m.dtype, m.shape
    # The common calls in straight-line code: arrays, and an array with a Python scalar.
    if len(args) == 2:
        a, b = args
        tb = type(b)
        if type(a) is np.ndarray and (tb is np.ndarray or tb in _WEAK):
            dt = _loop_dtype(kind, (a.dtype, b.dtype if tb is np.ndarray else tb))
            if dt is None:
                return None
            if tb is not np.ndarray:
                b = _weak_scalar_cached(b, dt)
                if b is None:
                    return None
            return kind, a, b, dt, _broadcast2(a.shape, b.shape)
    elif type(args[0]) is np.ndarray:
        a = args[0]
        dt = _loop_dtype(kind, (a.dtype,))
        return None if dt is None else (kind, a, None, dt, a.shape)
    if not all(_fusable_operand(a) for a in args):
        return None
    dt = _loop_dtype(kind, tuple(_resolve_arg(a) for a in args))
    if dt is None:
        return None
    ops = []
    for a in args:
        if type(a) in _WEAK:
            a = _weak_scalar_cached(a, dt)
            if a is None:
                return None
        else:
            a = np.asarray(a)
        ops.append(a)
    if kind in _TESTS:
        return kind, ops[0], None, dt, ops[0].shape
    return kind, ops[0], ops[1], dt, _broadcast2(ops[0].shape, ops[1].shape)


def _broadcast2(a, b):
    """numpy's broadcast of two shapes (its message in a BroadcastError, a ValueError)."""
    if a == b or b == ():
        return a
    if a == ():
        return b
    try:
        return np.broadcast_shapes(a, b)
    except ValueError as e:
        raise BroadcastError(str(e)) from None


def _numpy_eval(kind, negate, args):
    r = _UFUNCS[kind](*args)
    return np.logical_not(r) if negate else r


def _make(kind, negate, args):
    args = tuple(_normalize(a) for a in args)
    plan = _plan(kind, args)
    if plan is None:
        result = _numpy_eval(kind, negate, args)
        if isinstance(result, np.generic):
            result = np.asarray(result)
        return Predicate("equal", negate, None, None, None, kind, args, tuple(result.shape), result)
    op, lhs, rhs, dt, shape = plan
    return Predicate(op, negate, lhs, rhs, dt, kind, args, shape)


def _from_blocks(kind, negate, *blocks):
    """The predicate over one block of each operand (what `selectjit.dask.where` runs)."""
    return _make(kind, negate, blocks)


class Predicate(_Pred, NDArrayOperatorsMixin):
    """A lazy bool array: `numpy.<ufunc>(*operands)` not yet computed. `selectjit.where` fuses
    it into its kernel; everything else sees numpy's bool array (see the module's docs)."""

    __module__ = "selectjit"
    # `_result`, `_shape`, `_kind`, `_args`, `_negate`: the extension's fields (see `_Pred`).
    __slots__ = ("__weakref__",)

    # -- numpy's array protocol ------------------------------------------------------------
    def _evaluate(self):
        if self._result is not None:
            if isinstance(self._result, np.ndarray):
                return self._result
            return np.asarray(self._result)  # another library's array (e.g. dask): computed
        return np.asarray(_numpy_eval(self._kind, self._negate, self._args))

    def __array__(self, dtype=None, copy=None):
        a = self._evaluate()
        fresh = self._result is None or not isinstance(self._result, np.ndarray)
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError("Unable to avoid copy while creating an array as requested.")
            return a.astype(dtype)
        if copy and not fresh:
            return a.copy()
        return a

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(np.asarray(i) if isinstance(i, Predicate) else i for i in inputs)
        out = kwargs.get("out")
        if out is not None:
            if any(isinstance(o, Predicate) for o in out):
                raise TypeError("a selectjit predicate cannot be an output")
        return getattr(ufunc, method)(*inputs, **kwargs)

    # -- what numpy's bool array answers without computing ---------------------------------
    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return _BOOL

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def size(self):
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def itemsize(self):
        return 1

    @property
    def nbytes(self):
        return self.size

    # -- everything else: the bool array's own answer ---------------------------------------
    def __len__(self):
        return len(self._evaluate())

    def __bool__(self):
        return bool(self._evaluate())

    def __int__(self):
        return int(self._evaluate())

    def __float__(self):
        return float(self._evaluate())

    def __complex__(self):
        return complex(self._evaluate())

    def __index__(self):
        return self._evaluate().__index__()

    def __iter__(self):
        return iter(self._evaluate())

    def __getitem__(self, key):
        return self._evaluate()[key]

    def __contains__(self, v):
        return v in self._evaluate()

    def __repr__(self):
        return repr(self._evaluate())

    def __str__(self):
        return str(self._evaluate())

    def __format__(self, spec):
        return format(self._evaluate(), spec)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._evaluate(), name)

    def __reduce__(self):
        if self._result is not None:
            return (np.asarray, (self._evaluate(),))
        return (_from_blocks, (self._kind, self._negate, *self._args))

    # -- selectjit.dask.where --------------------------------------------------------------
    def __selectjit_blocks__(self):
        """`(make, operands)`: the predicate over one block of each operand is
        `make(*blocks)` (see `selectjit.dask`)."""
        if self._result is not None and isinstance(self._result, np.ndarray):
            return _identity, (self._result,)
        return functools.partial(_from_blocks, self._kind, self._negate), self._args


def _identity(block):
    return block


# The predicate functions are the extension's (the common calls are made there; the others
# through `_make`).
for _f in (greater, greater_equal, less, less_equal, equal, not_equal, isnan, isinf, isfinite):
    _f.__module__ = "selectjit"
del _f


def logical_not(x: Any, /) -> "Predicate":
    """`numpy.logical_not(x)` as a lazy predicate: of a predicate, its negation (still
    computed in the kernel); of anything else, `x == 0` (numpy's truth of each element)."""
    if isinstance(x, Predicate):
        return _make(x._kind, not x._negate, x._args)
    return _make("logical_not", False, (x,))


logical_not.__module__ = "selectjit"

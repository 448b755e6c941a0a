"""Arrow columns: `pyarrow.compute.if_else` and `pyarrow.compute.case_when` bit for bit.

`if_else(cond, left, right)` and `case_when(cond, *cases)` take pyarrow.compute's arguments and
return its results: the same type, the same validity and the same values at every valid slot.
Arrays come through the Arrow PyCapsule interface without copying: anything with
`__arrow_c_array__` (pyarrow and nanoarrow arrays, ...) is an array, anything with only
`__arrow_c_stream__` (pyarrow ChunkedArrays, polars Series, ...) a chunked array, and so is an
object with both whose `__arrow_c_array__` fails (a nanoarrow array of several chunks). The result is a
`pyarrow.Array`, or a `pyarrow.ChunkedArray` when an input is chunked (then cut at the union of
the inputs' chunk boundaries). pyarrow is imported on first use; without it, the result is an
object exporting `__arrow_c_array__` (`__arrow_c_stream__` for chunked results) that any Arrow
consumer imports.

Computed here: a boolean condition (a `case_when` condition: a struct of booleans without null
slots) and values that all have one fixed-width type — integers, floats (float16 too),
booleans, dates, times, timestamps (one time zone), durations, intervals, decimals,
fixed-size binary — as arrays, chunked arrays or scalars (`pyarrow.Scalar`s and Python scalars
as pyarrow.compute converts them, null scalars included), broadcast against each other.

Everything else is handed to `pyarrow.compute` itself, so its result and its errors are
pyarrow's: values of different types (pyarrow promotes: int32 and a Python int give int64),
variable-width and nested types (strings, binary, lists, dictionaries, ...), null-typed
values, lists and numpy arrays as arguments, calls with only scalars (pyarrow returns a
scalar), a `case_when` condition with null struct slots (pyarrow refuses them), mismatched
lengths. Nothing is returned on error. Without pyarrow those calls raise `TypeError`,
`ValueError` or `NotImplementedError` (the classes pyarrow's errors derive from).

Null rules (pyarrow's): in `if_else` a null condition gives a null output; in `case_when` a
null child condition counts as false, the first true condition wins, and rows where none is
true take the ELSE value (`cases` one longer than the struct's fields) or are null.
"""

import builtins as _builtins

from . import _selectjit as _ext

__all__ = ["if_else", "case_when", "ArrowArray", "ArrowChunkedArray"]

ArrowArray = _ext.ArrowArray
ArrowChunkedArray = _ext.ArrowChunkedArray

_SCALAR, _ARRAY, _STREAM, _ARRAY_OR_STREAM = 0, 1, 2, 3
_pa_module = None


def _pyarrow():
    """pyarrow, imported on first use; None when it is not installed."""
    global _pa_module
    if _pa_module is None:
        try:
            import pyarrow
        except ImportError:
            _pa_module = False
        else:
            _pa_module = pyarrow
    return _pa_module or None


def _arg(x, pa):
    """`(kind, object)` of an argument as the extension takes it, or None when the call is
    pyarrow.compute's (an argument it converts as an array, or that it refuses)."""
    t = type(x)
    # Python scalars of the types `pyarrow.scalar` gives them (bool, int64, double), converted
    # by the extension (pyarrow's own conversion costs tens of microseconds).
    if t is float or t is bool or (t is int and -(2**63) <= x < 2**63):
        return (_SCALAR, x)
    if pa is not None:
        if isinstance(x, pa.Array):
            return (_ARRAY, x)
        if isinstance(x, pa.ChunkedArray):
            return (_STREAM, x)
        if isinstance(x, pa.Scalar):
            return (_SCALAR, pa.repeat(x, 1))
    if hasattr(t, "__arrow_c_array__"):
        # Exporters of both (nanoarrow's arrays): a chunked array when it has several chunks.
        return (_ARRAY_OR_STREAM if hasattr(t, "__arrow_c_stream__") else _ARRAY, x)
    if hasattr(t, "__arrow_c_stream__"):
        return (_STREAM, x)
    if pa is not None:
        # pyarrow.compute's conversions: lists, tuples and ndarrays are arrays, the rest
        # `pyarrow.scalar(x)` or a TypeError.
        if isinstance(x, (list, tuple)) or (t.__module__ == "numpy" and t.__name__ == "ndarray"):
            return None
        try:
            s = pa.scalar(x)
        except Exception:
            return None
        return (_SCALAR, pa.repeat(s, 1))
    if isinstance(x, (bool, int, float)):
        return (_SCALAR, x)
    raise TypeError(f"selectjit.arrow: an argument of type {t.__name__} needs pyarrow")


def _as_pyarrow(x, pa):
    """An argument as pyarrow.compute takes it: capsule exporters imported (no copy)."""
    if isinstance(x, (pa.Array, pa.ChunkedArray, pa.Scalar)):
        return x
    t = type(x)
    if hasattr(t, "__arrow_c_array__"):
        try:
            return pa.array(x)
        except Exception:
            if not hasattr(t, "__arrow_c_stream__"):
                raise
    if hasattr(t, "__arrow_c_stream__"):
        return pa.chunked_array(x)
    return x


def _result(out, pa):
    """The extension's result as pyarrow objects (when pyarrow is installed)."""
    if pa is None:
        return out
    if isinstance(out, ArrowArray):
        return pa.Array._import_from_c_capsule(*out.__arrow_c_array__())
    return pa.ChunkedArray._import_from_c_capsule(out.__arrow_c_stream__())


def _refused(refusal):
    cls, msg = refusal
    return getattr(_builtins, cls, TypeError)(f"selectjit.arrow: {msg}")


def if_else(cond, left, right, /, *, memory_pool=None):
    """`pyarrow.compute.if_else(cond, left, right)`: `left` where `cond` is true, `right`
    where it is false, null where it is null.

    `cond` a boolean array, chunked array or scalar; `left`, `right` arrays, chunked arrays or
    scalars (Python scalars as pyarrow converts them). Computed by selectjit's kernels when
    the values have one fixed-width type, otherwise by `pyarrow.compute.if_else` itself (see
    the module's documentation). `memory_pool` is passed on to pyarrow only.
    """
    pa = _pyarrow()
    args = [_arg(x, pa) for x in (cond, left, right)]
    if pa is not None and (None in args or all(k == _SCALAR for k, _ in args)):
        return _pyarrow_if_else(pa, cond, left, right, memory_pool)
    out = _ext._arrow_if_else(*args)
    if isinstance(out, tuple):
        if pa is None:
            raise _refused(out)
        return _pyarrow_if_else(pa, cond, left, right, memory_pool)
    return _result(out, pa)


def _pyarrow_if_else(pa, cond, left, right, memory_pool):
    import pyarrow.compute as pc

    return pc.if_else(
        _as_pyarrow(cond, pa), _as_pyarrow(left, pa), _as_pyarrow(right, pa), memory_pool=memory_pool
    )


def case_when(cond, /, *cases, memory_pool=None):
    """`pyarrow.compute.case_when(cond, *cases)`: for each row, the value of the first true
    field of `cond`, else the ELSE value.

    `cond` a struct array (chunked array, scalar) of boolean fields, for instance
    `pyarrow.StructArray.from_arrays([c1, c2], names=["c1", "c2"])`; a null field is false,
    a null struct slot is refused (pyarrow's ArrowInvalid). `cases`: one value per field, plus
    optionally one more, the ELSE (without it, rows where no field is true are null); arrays,
    chunked arrays or scalars. Computed by selectjit's kernels when the values have one
    fixed-width type, otherwise by `pyarrow.compute.case_when` itself (see the module's
    documentation). `memory_pool` is passed on to pyarrow only.
    """
    pa = _pyarrow()
    cond_arg = _arg(cond, pa)
    args = [_arg(x, pa) for x in cases]
    if pa is not None and (
        cond_arg is None
        or None in args
        or not args
        or (cond_arg[0] == _SCALAR and all(k == _SCALAR for k, _ in args))
    ):
        return _pyarrow_case_when(pa, cond, cases, memory_pool)
    if not args:
        raise ValueError("selectjit.arrow: case_when needs at least one case")
    out = _ext._arrow_case_when(cond_arg, args)
    if isinstance(out, tuple):
        if pa is None:
            raise _refused(out)
        return _pyarrow_case_when(pa, cond, cases, memory_pool)
    return _result(out, pa)


def _pyarrow_case_when(pa, cond, cases, memory_pool):
    import pyarrow.compute as pc

    return pc.case_when(
        _as_pyarrow(cond, pa), *[_as_pyarrow(x, pa) for x in cases], memory_pool=memory_pool
    )

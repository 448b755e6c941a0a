"""The extension module of selectjit (re-exported by the package): numpy.where bit for bit, on
selectjit's JIT-compiled Select kernels."""

from typing import Any, Literal, Optional, overload

import numpy as np

__version__: str

BroadcastMode = Literal["numpy", "two-step", "none", "pdpd"]

@overload
def where(condition: Any, /) -> tuple[np.ndarray, ...]:
    """numpy.where(condition): the indices of the non-zero elements (numpy.nonzero)."""

@overload
def where(
    condition: Any,
    x: Any,
    y: Any,
    /,
    *,
    out: Optional[np.ndarray] = None,
    broadcast: BroadcastMode = "numpy",
    axis: int = -1,
) -> np.ndarray:
    """numpy.where(condition, x, y) bit for bit (values, dtype, shape, memory order).

    condition: anything numpy.where takes, or a lazy predicate (selectjit.greater(x, 0), ...),
    computed inside the kernel.
    out: an ndarray of the result's shape and dtype, any layout; may be x or y (in place).
    broadcast: "numpy" (default), "two-step", "none" or "pdpd" (with axis).
    """

class _Pred:
    """The base of selectjit.Predicate: what the kernel needs to compute it."""

    def __new__(
        cls,
        op: str,
        negate: bool,
        lhs: Optional[np.ndarray],
        rhs: Optional[np.ndarray],
        dtype: Optional[np.dtype[Any]],
        kind: Optional[str] = None,
        args: tuple[Any, ...] = (),
        shape: Optional[tuple[int, ...]] = None,
        result: Any = None,
        /,
    ) -> "_Pred": ...
    @property
    def _fused(self) -> bool: ...
    @property
    def _negate(self) -> bool: ...
    @property
    def _kind(self) -> str: ...
    @property
    def _args(self) -> tuple[Any, ...]: ...
    @property
    def _result(self) -> Any: ...
    @property
    def _shape(self) -> tuple[int, ...]: ...

# The lazy predicates (selectjit.Predicate instances; re-exported by the package).
def greater(x1: Any, x2: Any, /) -> Any: ...
def greater_equal(x1: Any, x2: Any, /) -> Any: ...
def less(x1: Any, x2: Any, /) -> Any: ...
def less_equal(x1: Any, x2: Any, /) -> Any: ...
def equal(x1: Any, x2: Any, /) -> Any: ...
def not_equal(x1: Any, x2: Any, /) -> Any: ...
def isnan(x: Any, /) -> Any: ...
def isinf(x: Any, /) -> Any: ...
def isfinite(x: Any, /) -> Any: ...

class Engine:
    """A kernel cache and a code-generation tier (auto, cranelift, avx2, avx512)."""

    def __init__(
        self,
        tier: str = "auto",
        threads: Optional[int] = None,
        output_pool: Optional[bool | int] = None,
    ) -> None:
        """output_pool: outputs of 1 MiB or more from a pool of freed outputs (True, default
        unless SELECTJIT_OUTPUT_POOL=0), not (False or 0), or the pool's cap in bytes."""
    @overload
    def where(self, condition: Any, /) -> tuple[np.ndarray, ...]: ...
    @overload
    def where(
        self,
        condition: Any,
        x: Any,
        y: Any,
        /,
        *,
        out: Optional[np.ndarray] = None,
        broadcast: BroadcastMode = "numpy",
        axis: int = -1,
    ) -> np.ndarray: ...
    def stats(self) -> dict[str, int | bool]: ...
    def tier_choices(self) -> list[str]: ...
    def output_pool_stats(self) -> dict[str, int | bool]:
        """enabled, cap_bytes, held_bytes, held_buffers, live_bytes, live_buffers, hits, misses,
        direct, released."""
    def trim_output_pool(self) -> None:
        """Releases the freed outputs the pool holds (arrays in use are not affected)."""
    @property
    def tier(self) -> Optional[str]: ...
    @property
    def threads(self) -> int: ...

def default_engine() -> Engine:
    """The engine selectjit.where uses (one per process, shared by all threads)."""

def set_output_pool(on: bool) -> bool:
    """Whether outputs come from the engines' pools of freed outputs (process-wide; default
    on). Returns the previous setting."""

def _select_n(
    conds: list[Any],
    values: list[np.ndarray],
    default: np.ndarray,
    dtype: np.dtype[Any],
    shape: list[int],
    out: np.ndarray | None = None,
) -> np.ndarray | None: ...

# Arrow columns (selectjit.arrow): arguments are `(kind, object)` pairs (0 scalar, 1 array,
# 2 chunked array); the result, or a refusal `(exception class name, message)`.
class ArrowArray:
    """An Arrow array exported through the PyCapsule interface."""
    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]: ...
    def __arrow_c_schema__(self) -> Any: ...
    def __len__(self) -> int: ...

class ArrowChunkedArray:
    """A chunked Arrow array exported through the PyCapsule stream interface."""
    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any: ...
    def __arrow_c_schema__(self) -> Any: ...
    def __len__(self) -> int: ...

def _arrow_if_else(
    cond: tuple[int, Any], left: tuple[int, Any], right: tuple[int, Any]
) -> ArrowArray | ArrowChunkedArray | tuple[str, str]: ...
def _arrow_case_when(
    cond: tuple[int, Any], values: list[tuple[int, Any]]
) -> ArrowArray | ArrowChunkedArray | tuple[str, str]: ...

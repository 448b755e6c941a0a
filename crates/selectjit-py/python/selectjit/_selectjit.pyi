"""The extension module of selectjit (re-exported by the package): numpy.where bit for bit, on
selectjit's JIT-compiled Select kernels."""

from typing import Any, Literal, Optional

import numpy as np

__version__: str

BroadcastMode = Literal["numpy", "two-step", "none", "pdpd"]

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

    out: an ndarray of the result's shape and dtype, any layout; may be x or y (in place).
    broadcast: "numpy" (default), "two-step", "none" or "pdpd" (with axis).
    """

class Engine:
    """A kernel cache and a code-generation tier (auto, cranelift, avx2, avx512)."""

    def __init__(self, tier: str = "auto", threads: Optional[int] = None) -> None: ...
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
    @property
    def tier(self) -> Optional[str]: ...
    @property
    def threads(self) -> int: ...

def default_engine() -> Engine:
    """The engine selectjit.where uses (one per process, shared by all threads)."""

"""numpy.where bit for bit, on selectjit's JIT-compiled Select kernels.

`where`, `Engine`, `default_engine` and `set_output_pool` (outputs from a pool of freed outputs,
on by default) come from the compiled extension `selectjit._selectjit`;
`select` and `nan_to_num` are numpy.select and numpy.nan_to_num in one pass (an n-way select:
the first true condition wins); `selectjit.dask.where`, `select` and `nan_to_num` are the same
operations over dask arrays (dask is imported only when that
submodule is used); `selectjit.arrow.if_else` and `case_when` are pyarrow.compute's over Arrow
columns (pyarrow is imported only when they are called). The lazy predicates (`greater`,
`less`, ..., `isnan`, ..., `logical_not`, named as numpy's ufuncs) are conditions `where` computes inside its kernel:
`selectjit.where(selectjit.greater(x, 0), x, 0)` is ReLU in one pass. The exceptions selectjit
raises are `SelectError`s (see `selectjit._errors`).
"""

import threading as _threading
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Optional as _Optional

from ._errors import (
    BroadcastError,
    CodegenError,
    DTypeError,
    InternalError,
    InvalidArgumentError,
    KernelTableError,
    SelectError,
    ShapeError,
)
from ._predicates import (
    Predicate,
    equal,
    greater,
    greater_equal,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    logical_not,
    not_equal,
)
from ._select import nan_to_num, select
from ._selectjit import Engine, __version__, default_engine, set_output_pool, where

# The functions are the package's: `selectjit.where.__module__ == "selectjit"`, as when the
# extension was the top-level module (pickle then names them `selectjit.where`, which a worker
# process resolves by importing this package). `Engine` says so itself (its pyclass module).
where.__module__ = "selectjit"
default_engine.__module__ = "selectjit"
set_output_pool.__module__ = "selectjit"
select.__module__ = "selectjit"
nan_to_num.__module__ = "selectjit"

__all__ = [
    "Engine",
    "default_engine",
    "set_output_pool",
    "where",
    "select",
    "nan_to_num",
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
    "SelectError",
    "ShapeError",
    "BroadcastError",
    "DTypeError",
    "InvalidArgumentError",
    "CodegenError",
    "KernelTableError",
    "InternalError",
]

_shared_engines = {}
_shared_lock = _threading.Lock()


def _shared_engine(tier: str, threads: _Optional[int]) -> Engine:
    """This process's engine of a configuration: what a pickled `Engine` (other than the default
    one) unpickles as, so that tasks sent to a worker process share one kernel cache there."""
    with _shared_lock:
        engine = _shared_engines.get((tier, threads))
        if engine is None:
            engine = Engine(tier=tier, threads=threads)
            _shared_engines[(tier, threads)] = engine
        return engine


if not _TYPE_CHECKING:  # (type checkers see the submodule itself)

    def __getattr__(name):
        # `selectjit.dask` and `selectjit.arrow` without an explicit import (PEP 562);
        # importing a submodule does not import dask or pyarrow either, its functions do.
        if name in ("dask", "arrow"):
            import importlib

            return importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

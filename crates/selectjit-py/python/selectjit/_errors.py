"""selectjit's exceptions. Each is a `SelectError`, and also the builtin exception numpy raises
for the same mistake, so code written for `numpy.where` keeps catching it:

- `ShapeError` (`ValueError`): a shape or layout that does not fit (e.g. `out` of another shape);
  `BroadcastError` (a `ShapeError`): shapes that do not broadcast.
- `DTypeError` (`TypeError`): a dtype that is not the one required (e.g. `out` of another dtype).
- `InvalidArgumentError` (`ValueError`): an argument outside its allowed values (an unknown
  broadcast mode or tier, `threads=0`, a read-only `out`).
- `CodegenError` (`RuntimeError`, deliberately not a `ValueError`): code generation failed.
- `KernelTableError` (`ValueError`): an ahead-of-time kernel table was rejected.
- `InternalError` (`RuntimeError`): a bug in selectjit (please report it).
"""

__all__ = [
    "SelectError",
    "ShapeError",
    "BroadcastError",
    "DTypeError",
    "InvalidArgumentError",
    "CodegenError",
    "KernelTableError",
    "InternalError",
]


class SelectError(Exception):
    """Base class of every exception selectjit raises itself."""

    __module__ = "selectjit"


class ShapeError(SelectError, ValueError):
    """A shape or layout that does not fit."""

    __module__ = "selectjit"


class BroadcastError(ShapeError):
    """Shapes that do not broadcast (under the broadcast mode of the call)."""

    __module__ = "selectjit"


class DTypeError(SelectError, TypeError):
    """A dtype that is not the one required."""

    __module__ = "selectjit"


class InvalidArgumentError(SelectError, ValueError):
    """An argument outside its allowed values."""

    __module__ = "selectjit"


class CodegenError(SelectError, RuntimeError):
    """Code generation failed."""

    __module__ = "selectjit"


class KernelTableError(SelectError, ValueError):
    """An ahead-of-time kernel table was rejected."""

    __module__ = "selectjit"


class InternalError(SelectError, RuntimeError):
    """A bug in selectjit."""

    __module__ = "selectjit"

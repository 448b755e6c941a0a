//! The C ABI (`include/selectjit.h`). Every function returns a status code (or NULL) and never
//! lets a Rust panic cross the boundary; `selectjit_last_error` gives the calling thread's last
//! error message. A failed call writes nothing to its outputs.
//!
//! The ABI can grow: the structs a caller fills in ([`SelectjitOptions`], [`SelectjitCond`]) and
//! the one the library fills ([`SelectjitStats`]) start with `uint32_t struct_size`, which the
//! caller sets to `sizeof` the struct as its header declares it. Fields are only ever appended;
//! the library reads (or writes) only the fields that fit in `struct_size`, takes the default
//! (0) for the fields an older caller's struct lacks, and refuses a larger struct from a newer
//! header unless the fields it does not know are all zero.
//!
//! Inputs are described by [`SelectjitTensor`], outputs by [`SelectjitTensorMut`] (the same
//! fields, a writable `data`): a data pointer, its length in bytes, a shape,
//! optional signed element strides (NULL: row-major contiguous) and the element offset of the
//! first element (coordinate `[0, 0, ...]`) in the buffer, which views with negative strides need:
//! a reversed view of 5 elements has stride -1 and offset 4. Everything the caller hands over is
//! checked before it is read: non-NULL pointers, rank at most 64, and every addressed element
//! (lowest and highest, from the offset, shape and strides) inside the buffer. Overlapping
//! buffers are rejected, except an output that is exactly the `then` or the `else` tensor (same
//! pointer, length, shape, strides and offset): that runs in place; a predicate's operand may
//! then be the output too (in-place ReLU: `x = x > 0 ? x : 0`).
//!
//! One module per C object, as in wasmtime's C API crate; this file only declares and
//! re-exports them.

#![warn(clippy::undocumented_unsafe_blocks)]

// cbindgen reads the modules in the order of these lines, and that is the order of the
// declarations in `include/selectjit.h` (checked by `tests/c_api.rs`). The blank lines keep
// rustfmt from sorting them.

// Status codes, the thread's last error, the boundary no error or panic crosses.
mod error;

// The `struct_size` of the growable structs, and their fields read by it.
mod struct_size;

// `SelectjitTensor`, `SelectjitTensorMut` and the dtype codes.
mod tensor;

// `SelectjitEngine`, `SelectjitOptions` and `SelectjitStats`.
mod engine;

// `SelectjitAotTable` (ahead-of-time kernel tables).
mod aot;

// `SelectjitCond` (masks and predicates).
mod cond;

// The select calls and the broadcast mode codes.
mod select;

// `SelectjitPrepared` (prepared calls).
mod prepared;

// The n-way select.
mod nway;

pub use crate::aot::*;
pub use crate::cond::*;
pub use crate::engine::*;
pub use crate::error::*;
pub use crate::nway::*;
pub use crate::prepared::*;
pub use crate::select::*;
pub use crate::struct_size::*;
pub use crate::tensor::*;

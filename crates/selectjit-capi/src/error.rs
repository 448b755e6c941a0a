//! Status codes and the error boundary. Every call runs inside [`guard`], which turns an error
//! or a panic into a `SELECTJIT_*` status and the calling thread's last error
//! (`selectjit_last_error`, `selectjit_status_name`); handles are freed without unwinding
//! ([`free_box`]).

use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use selectjit_core::Error;

/// Status: success.
pub const SELECTJIT_OK: c_int = 0;
/// Status: the shapes cannot be broadcast under the mode.
pub const SELECTJIT_ERR_BROADCAST: c_int = 1;
/// Status: a buffer does not hold what its shape, strides and offset address.
pub const SELECTJIT_ERR_LAYOUT: c_int = 2;
/// Status: unknown dtype code, or a dtype mismatch.
pub const SELECTJIT_ERR_DTYPE: c_int = 3;
/// Status: an element count or extent overflows.
pub const SELECTJIT_ERR_OVERFLOW: c_int = 4;
/// Status: an argument out of range (mode, backend, rank, pdpd axis, ...).
pub const SELECTJIT_ERR_INVALID: c_int = 5;
/// Status: a required pointer is NULL.
pub const SELECTJIT_ERR_NULL_POINTER: c_int = 6;
/// Status: the output overlaps an input without being exactly `then` or `else`.
pub const SELECTJIT_ERR_OVERLAP: c_int = 7;
/// Status: the output's shape is not the broadcast shape.
pub const SELECTJIT_ERR_OUTPUT_SHAPE: c_int = 8;
/// Status: an internal error (a Rust panic, caught at the boundary).
pub const SELECTJIT_ERR_PANIC: c_int = 9;
/// Status: an ahead-of-time kernel table was rejected (wrong target or features, corrupted).
pub const SELECTJIT_ERR_AOT: c_int = 10;
/// Status: a struct's `struct_size` is smaller than its first version, absurdly large, or
/// larger than this library's struct with fields it does not know set.
pub const SELECTJIT_ERR_STRUCT_SIZE: c_int = 11;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// A failure: its status code and message.
pub(crate) struct Fail(pub(crate) c_int, pub(crate) String);

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        let code = match &e {
            Error::Broadcast(_) => SELECTJIT_ERR_BROADCAST,
            Error::RankTooLarge { .. }
            | Error::Invalid(_)
            | Error::Io { .. }
            | Error::Codegen { .. } => SELECTJIT_ERR_INVALID,
            Error::Aot(_) => SELECTJIT_ERR_AOT,
            Error::Overflow { .. } => SELECTJIT_ERR_OVERFLOW,
            Error::Layout { .. } => SELECTJIT_ERR_LAYOUT,
            Error::DType(_) => SELECTJIT_ERR_DTYPE,
            Error::OutputShape { .. } => SELECTJIT_ERR_OUTPUT_SHAPE,
            _ => SELECTJIT_ERR_INVALID,
        };
        Fail(code, e.to_string())
    }
}

pub(crate) fn fail(code: c_int, msg: impl Into<String>) -> Fail {
    Fail(code, msg.into())
}

/// Runs `f`, turning errors and panics into a status code and the thread's last error.
pub(crate) fn guard(f: impl FnOnce() -> Result<(), Fail>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            set_error("");
            SELECTJIT_OK
        }
        Ok(Err(Fail(code, msg))) => {
            set_error(&msg);
            code
        }
        Err(_) => {
            set_error("internal error (panic)");
            SELECTJIT_ERR_PANIC
        }
    }
}

/// Drops a box handed out with `Box::into_raw` (NULL is ignored), without unwinding.
///
/// # Safety
/// `p` is NULL or came from `Box::into_raw` and was not freed before.
pub(crate) unsafe fn free_box<T>(p: *mut T) {
    if !p.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: from `Box::into_raw`, freed once (the function's contract).
            drop(unsafe { Box::from_raw(p) })
        }));
    }
}

/// The calling thread's last error message ("" after a success). Valid until the next call on
/// this thread.
#[unsafe(no_mangle)]
pub extern "C" fn selectjit_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// The name of a status code.
#[unsafe(no_mangle)]
pub extern "C" fn selectjit_status_name(code: c_int) -> *const c_char {
    let s: &'static [u8] = match code {
        SELECTJIT_OK => b"ok\0",
        SELECTJIT_ERR_BROADCAST => b"broadcast\0",
        SELECTJIT_ERR_LAYOUT => b"layout\0",
        SELECTJIT_ERR_DTYPE => b"dtype\0",
        SELECTJIT_ERR_OVERFLOW => b"overflow\0",
        SELECTJIT_ERR_INVALID => b"invalid\0",
        SELECTJIT_ERR_NULL_POINTER => b"null pointer\0",
        SELECTJIT_ERR_OVERLAP => b"overlap\0",
        SELECTJIT_ERR_OUTPUT_SHAPE => b"output shape\0",
        SELECTJIT_ERR_PANIC => b"panic\0",
        SELECTJIT_ERR_AOT => b"kernel table rejected\0",
        SELECTJIT_ERR_STRUCT_SIZE => b"struct size\0",
        _ => b"unknown\0",
    };
    s.as_ptr() as *const c_char
}

//! Outputs allocated through numpy's memory-handler API (NEP 49) from the engine's pool of
//! freed output buffers ([`selectjit::OutputPool`]): a loop that rebinds `y = where(...)` gets
//! the memory of the previous `y` back instead of fresh pages the OS must fault in and zero.
//!
//! The handler is set only around the allocation of an output (`PyDataMem_SetHandler`, a
//! context variable: other threads and the user's own arrays are untouched), and only for
//! outputs of a pooled size. numpy keeps the handler capsule in each array it allocates and
//! calls the handler's `free` when the array dies, possibly after the engine is gone and on
//! another thread: the capsule owns an `Arc` of the pool (so the pool outlives every array of
//! it), and `free` takes only the pool's own lock, never the GIL.
//!
//! rust-numpy does not bind `PyDataMem_SetHandler` (slot 304 of numpy's C API table, numpy
//! 1.22 and later): its pointer is read from the `_ARRAY_API` capsule once. Without it (an
//! older numpy) outputs are plain numpy allocations.

use std::ffi::{CStr, c_char, c_uint, c_void};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use numpy::npyffi::PY_ARRAY_API;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use selectjit::{Engine, OutputPool};

/// The capsule name numpy requires of a handler.
const CAPSULE_NAME: &CStr = c"mem_handler";
/// The handler's name (`numpy.lib.get_handler_name(arr)`).
pub const HANDLER_NAME: &str = "selectjit_output_pool";
/// numpy's C API feature version that has the handler API (numpy 1.22).
const NPY_1_22_API_VERSION: c_uint = 0x0000_000f;
/// Slot of `PyDataMem_SetHandler` in numpy's C API table.
const SET_HANDLER_SLOT: usize = 304;

/// The process-wide switch of `selectjit.set_output_pool`.
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns allocation through the pools on or off for every engine; returns the previous state.
pub fn set_enabled(on: bool) -> bool {
    ENABLED.swap(on, Ordering::Relaxed)
}

/// numpy's `PyDataMemAllocator`.
#[repr(C)]
struct Allocator {
    ctx: *mut c_void,
    malloc: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void,
    calloc: unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void,
    realloc: unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void, *mut c_void, usize),
}

/// numpy's `PyDataMem_Handler` (version 1).
#[repr(C)]
struct HandlerStruct {
    name: [c_char; 127],
    version: u8,
    allocator: Allocator,
}

/// The pool a handler's `ctx` points at.
///
/// # Safety
/// `ctx` must be the `ctx` of a live handler made by [`Handler::new`] (an `Arc::into_raw` of
/// the pool, released only by the capsule's destructor, after numpy's last use).
unsafe fn pool<'a>(ctx: *mut c_void) -> &'a OutputPool {
    // SAFETY: the caller's contract: `ctx` is a pointer from `Arc::into_raw` whose count is
    // held by the capsule while numpy can call the handler.
    unsafe { &*ctx.cast::<OutputPool>() }
}

fn raw(p: Option<NonNull<u8>>) -> *mut c_void {
    p.map_or(std::ptr::null_mut(), |p| p.as_ptr().cast())
}

unsafe extern "C" fn h_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: numpy passes the `ctx` of the handler it calls, one of ours.
    raw(unsafe { pool(ctx) }.alloc(size))
}

unsafe extern "C" fn h_calloc(ctx: *mut c_void, n: usize, elsize: usize) -> *mut c_void {
    let Some(size) = n.checked_mul(elsize) else {
        return std::ptr::null_mut();
    };
    // SAFETY: as in `h_malloc`; `alloc_zeroed` zeroes a recycled buffer.
    raw(unsafe { pool(ctx) }.alloc_zeroed(size))
}

unsafe extern "C" fn h_realloc(ctx: *mut c_void, ptr: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: as in `h_malloc`.
    let pool = unsafe { pool(ctx) };
    match NonNull::new(ptr.cast::<u8>()) {
        None => raw(pool.alloc(size)),
        // SAFETY: numpy reallocates data it allocated with this handler (an array keeps the
        // handler it was allocated with), and uses `ptr` no more unless NULL is returned.
        Some(p) => raw(unsafe { pool.realloc(p, size) }),
    }
}

unsafe extern "C" fn h_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    if let Some(p) = NonNull::new(ptr.cast::<u8>()) {
        // SAFETY: as in `h_malloc`; numpy frees data allocated with this handler, once.
        unsafe { pool(ctx).free(p, size) };
    }
}

/// Frees the handler and its count of the pool when numpy's last array of it has died.
unsafe extern "C" fn destroy(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed, which `Handler::new` made
    // with this name and a `Box<HandlerStruct>` pointer.
    let p = unsafe { ffi::PyCapsule_GetPointer(capsule, CAPSULE_NAME.as_ptr()) };
    if p.is_null() {
        // SAFETY: GetPointer set an error; a destructor may not leave one.
        unsafe { ffi::PyErr_Clear() };
        return;
    }
    // SAFETY: `p` is the `Box::into_raw` of `Handler::new`, freed only here, once; its `ctx`
    // is the `Arc::into_raw` made for it.
    unsafe {
        let h = Box::from_raw(p.cast::<HandlerStruct>());
        drop(Arc::from_raw(h.allocator.ctx.cast::<OutputPool>()));
    }
}

type SetHandlerFn = unsafe extern "C" fn(*mut ffi::PyObject) -> *mut ffi::PyObject;

/// `PyDataMem_SetHandler`, when the running numpy has it.
fn set_handler_fn(py: Python<'_>) -> Option<SetHandlerFn> {
    static F: PyOnceLock<Option<SetHandlerFn>> = PyOnceLock::new();
    *F.get_or_init(py, || lookup(py).ok().flatten())
}

fn lookup(py: Python<'_>) -> PyResult<Option<SetHandlerFn>> {
    // SAFETY: rust-numpy's table (imported and checked against the running numpy on first
    // use); the GIL is held.
    let feature = unsafe { PY_ARRAY_API.PyArray_GetNDArrayCFeatureVersion(py) };
    if feature < NPY_1_22_API_VERSION {
        return Ok(None);
    }
    let module = py
        .import("numpy._core._multiarray_umath")
        .or_else(|_| py.import("numpy.core.multiarray"))?;
    let capsule = module.getattr("_ARRAY_API")?;
    // SAFETY: `_ARRAY_API` is numpy's capsule of its C API table (a `void *[]`, unnamed), which
    // lives as long as the module (never unloaded); with API feature version 1.22 or later the
    // table has slot 304, `PyDataMem_SetHandler` (checked above).
    unsafe {
        if ffi::PyCapsule_IsValid(capsule.as_ptr(), std::ptr::null()) == 0 {
            return Ok(None);
        }
        let table = ffi::PyCapsule_GetPointer(capsule.as_ptr(), std::ptr::null());
        if table.is_null() {
            return Err(PyErr::fetch(py));
        }
        let slot = table.cast::<*const c_void>().add(SET_HANDLER_SLOT).read();
        if slot.is_null() {
            return Ok(None);
        }
        Ok(Some(std::mem::transmute::<*const c_void, SetHandlerFn>(
            slot,
        )))
    }
}

/// An engine's handler capsule, or none (the engine has no pool, or numpy has no handler API):
/// outputs are then plain numpy allocations.
pub struct Handler(Option<Py<PyAny>>);

impl Handler {
    /// The handler of `engine`'s pool.
    pub fn new(py: Python<'_>, engine: &Engine) -> PyResult<Handler> {
        let (Some(pool), Some(_)) = (engine.output_pool(), set_handler_fn(py)) else {
            return Ok(Handler(None));
        };
        let mut name = [0 as c_char; 127];
        for (d, s) in name.iter_mut().zip(HANDLER_NAME.bytes()) {
            *d = s as c_char;
        }
        let h = Box::new(HandlerStruct {
            name,
            version: 1,
            allocator: Allocator {
                ctx: Arc::into_raw(pool.clone()).cast_mut().cast(),
                malloc: h_malloc,
                calloc: h_calloc,
                realloc: h_realloc,
                free: h_free,
            },
        });
        let p = Box::into_raw(h);
        // SAFETY: a capsule over the handler, with the static name numpy looks for and the
        // destructor that frees it; NULL (with an error set) if it could not be made.
        let cap = unsafe { ffi::PyCapsule_New(p.cast(), CAPSULE_NAME.as_ptr(), Some(destroy)) };
        if cap.is_null() {
            // SAFETY: the capsule was not made: the handler and its count are still ours.
            unsafe {
                let h = Box::from_raw(p);
                drop(Arc::from_raw(h.allocator.ctx.cast::<OutputPool>()));
            }
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `cap` is a new reference.
        let cap = unsafe { Bound::from_owned_ptr(py, cap) };
        Ok(Handler(Some(cap.unbind())))
    }

    /// A handler that allocates nothing itself.
    pub const fn none() -> Handler {
        Handler(None)
    }

    /// Whether outputs of this handler come from a pool.
    pub fn active(&self) -> bool {
        self.0.is_some()
    }

    /// Runs `alloc` (which allocates one array) with this handler set, when the pool is on and
    /// the array's `nbytes` is of a pooled size; else runs it as it is.
    pub fn around<'py, T>(
        &self,
        py: Python<'py>,
        nbytes: usize,
        alloc: impl FnOnce() -> PyResult<T>,
    ) -> PyResult<T> {
        let (Some(cap), Some(set)) = (&self.0, set_handler_fn(py)) else {
            return alloc();
        };
        if nbytes < OutputPool::MIN_POOLED_BYTES || !ENABLED.load(Ordering::Relaxed) {
            return alloc();
        }
        // SAFETY: `set` is numpy's `PyDataMem_SetHandler`, called with the GIL held and a live
        // handler capsule; it returns a new reference to the previous handler, or NULL with an
        // error set.
        let old = unsafe { set(cap.as_ptr()) };
        if old.is_null() {
            return Err(PyErr::fetch(py));
        }
        // Any error of the allocation is fetched into `r` before the handler is restored.
        let r = alloc();
        // SAFETY: `old` is the handler that was in force (a new reference, consumed here);
        // setting it back returns a new reference to ours (dropped) or NULL with an error.
        let restored = unsafe {
            let mine = set(old);
            ffi::Py_DECREF(old);
            if mine.is_null() {
                Err(PyErr::fetch(py))
            } else {
                ffi::Py_DECREF(mine);
                Ok(())
            }
        };
        let out = r?;
        restored?;
        Ok(out)
    }
}

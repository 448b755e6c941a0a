//! The C ABI (`include/selectjit.h`). Every function returns a status code (or NULL) and never
//! lets a Rust panic cross the boundary; `selectjit_last_error` gives the calling thread's last
//! error message.
//!
//! Buffers are described by [`SelectjitTensor`]: a data pointer, its length in bytes, a shape,
//! optional signed element strides (NULL: row-major contiguous) and the element offset of the
//! first element (coordinate `[0, 0, ...]`) in the buffer, which views with negative strides need:
//! a reversed view of 5 elements has stride -1 and offset 4. Everything the caller hands over is
//! checked before it is read: non-NULL pointers, rank at most 64, and every addressed element
//! (lowest and highest, from the offset, shape and strides) inside the buffer. Overlapping
//! buffers are rejected, except an output that is exactly the `then` or the `else` tensor (same
//! pointer, length, shape, strides and offset): that runs in place.

use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use selectjit_core::aot::{AotTable, SelectjitAotTable};
use selectjit_core::{Backend, Broadcast, DType, Engine, EngineConfig, Error, InPlace, MAX_RANK};
use selectjit_core::{Prepared, TensorMut, TensorRef};

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

/// Element type code of `bool` (one byte; the order of codes is that of `DType::ALL`).
pub const SELECTJIT_DTYPE_BOOL: c_int = 0;
/// Element type code of `int8_t`.
pub const SELECTJIT_DTYPE_I8: c_int = 1;
/// Element type code of `int16_t`.
pub const SELECTJIT_DTYPE_I16: c_int = 2;
/// Element type code of `int32_t`.
pub const SELECTJIT_DTYPE_I32: c_int = 3;
/// Element type code of `int64_t`.
pub const SELECTJIT_DTYPE_I64: c_int = 4;
/// Element type code of `uint8_t`.
pub const SELECTJIT_DTYPE_U8: c_int = 5;
/// Element type code of `uint16_t`.
pub const SELECTJIT_DTYPE_U16: c_int = 6;
/// Element type code of `uint32_t`.
pub const SELECTJIT_DTYPE_U32: c_int = 7;
/// Element type code of `uint64_t`.
pub const SELECTJIT_DTYPE_U64: c_int = 8;
/// Element type code of IEEE half precision (2 bytes).
pub const SELECTJIT_DTYPE_F16: c_int = 9;
/// Element type code of bfloat16 (2 bytes).
pub const SELECTJIT_DTYPE_BF16: c_int = 10;
/// Element type code of `float`.
pub const SELECTJIT_DTYPE_F32: c_int = 11;
/// Element type code of `double`.
pub const SELECTJIT_DTYPE_F64: c_int = 12;
/// Element type code of a complex of two `float`s.
pub const SELECTJIT_DTYPE_COMPLEX64: c_int = 13;
/// Element type code of a complex of two `double`s.
pub const SELECTJIT_DTYPE_COMPLEX128: c_int = 14;

/// Broadcast mode: numpy (all three inputs broadcast to each other; ONNX Where).
pub const SELECTJIT_MODE_NUMPY: c_int = 0;
/// Broadcast mode: two-step (then/else to each other, cond one way into the result).
pub const SELECTJIT_MODE_TWO_STEP: c_int = 1;
/// Broadcast mode: none (identical shapes).
pub const SELECTJIT_MODE_NONE: c_int = 2;
/// Broadcast mode: pdpd (output is then's shape; else and cond one way at `pdpd_axis`).
pub const SELECTJIT_MODE_PDPD: c_int = 3;

/// Backend: JIT-compiled kernels, cached.
pub const SELECTJIT_BACKEND_JIT: c_int = 0;
/// Backend: ahead-of-time static kernels.
pub const SELECTJIT_BACKEND_STATIC: c_int = 1;
/// Backend: the reference interpreter.
pub const SELECTJIT_BACKEND_INTERP: c_int = 2;

/// A tensor handed over by C: `len_bytes` bytes at `data`, `rank` dims at `shape`, `rank` signed
/// element strides at `strides` (NULL for row-major contiguous), and `offset`, the index in
/// elements of the element at coordinate `[0, 0, ...]` in the buffer.
///
/// Negative strides walk a dimension backwards from that element, as numpy's and ndarray's views
/// do: `data`/`len_bytes` describe the whole buffer, and `offset` says where the view starts in
/// it. A reversed view of 5 elements is `strides = {-1}`, `offset = 4`; rows reversed in a
/// `[2, 3]` buffer is `strides = {-3, 1}`, `offset = 3`. Every element the view addresses
/// (offset plus the negative spans `(d - 1) * stride`, up to offset plus the positive spans) must
/// lie inside the buffer; a view with a zero dimension addresses nothing. `offset` is the last
/// field, so an initialiser that leaves it out gets 0 (the view starts at `data`).
#[repr(C)]
pub struct SelectjitTensor {
    /// The buffer's first byte (may be NULL when `len_bytes` is 0).
    pub data: *const u8,
    /// The buffer's length in bytes.
    pub len_bytes: usize,
    /// `rank` dimensions (may be NULL when `rank` is 0).
    pub shape: *const usize,
    /// Number of dimensions, at most 64.
    pub rank: usize,
    /// `rank` strides in elements (negative allowed), or NULL for row-major contiguous.
    pub strides: *const isize,
    /// Index in elements of the view's first element (coordinate `[0, 0, ...]`) in the buffer.
    pub offset: usize,
}

/// Cache counters of an engine.
#[repr(C)]
#[derive(Default)]
pub struct SelectjitStats {
    /// Calls served by a cached exact kernel.
    pub hits: u64,
    /// Calls whose signature was not cached.
    pub misses: u64,
    /// Calls run by a shape-generic kernel.
    pub generic_runs: u64,
    /// Kernels evicted from the cache.
    pub evictions: u64,
    /// Exact kernels compiled.
    pub compiles: u64,
    /// Time spent compiling exact kernels, in microseconds.
    pub compile_us: u64,
    /// Signatures in the cache.
    pub len: u64,
    /// The cache's capacity.
    pub capacity: u64,
    /// Calls run by an exact kernel of the engine's AOT table.
    pub aot_exact_runs: u64,
    /// Calls run by a shape-generic kernel of the engine's AOT table.
    pub aot_generic_runs: u64,
    /// Calls run by the static kernels.
    pub static_runs: u64,
    /// Kernels (exact and shape-generic) in the engine's AOT table.
    pub aot_kernels: u64,
    /// 1 when an AOT table was given to the engine and rejected.
    pub aot_rejected: u64,
}

/// An engine (opaque).
pub struct SelectjitEngine(Engine, bool);

/// A prepared call (opaque).
pub struct SelectjitPrepared(Prepared);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// A failure: its status code and message.
struct Fail(c_int, String);

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

fn fail(code: c_int, msg: impl Into<String>) -> Fail {
    Fail(code, msg.into())
}

/// Runs `f`, turning errors and panics into a status code and the thread's last error.
fn guard(f: impl FnOnce() -> Result<(), Fail>) -> c_int {
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

fn dtype_of(code: c_int) -> Result<DType, Fail> {
    usize::try_from(code)
        .ok()
        .and_then(|i| DType::ALL.get(i).copied())
        .ok_or_else(|| fail(SELECTJIT_ERR_DTYPE, format!("unknown dtype code {code}")))
}

fn mode_of(code: c_int, axis: i64) -> Result<Broadcast, Fail> {
    Ok(match code {
        SELECTJIT_MODE_NUMPY => Broadcast::Numpy,
        SELECTJIT_MODE_TWO_STEP => Broadcast::TwoStep,
        SELECTJIT_MODE_NONE => Broadcast::None,
        SELECTJIT_MODE_PDPD => Broadcast::Pdpd { axis },
        _ => {
            return Err(fail(
                SELECTJIT_ERR_INVALID,
                format!("unknown broadcast mode {code}"),
            ));
        }
    })
}

/// A C tensor read but not yet turned into a slice: the data stays a raw pointer until we know
/// how it is used, so that no shared slice of the output's memory exists next to its `&mut`.
struct Raw<'a> {
    ptr: *const u8,
    len: usize,
    shape: &'a [usize],
    strides: Option<&'a [isize]>,
    offset: usize,
}

impl<'a> Raw<'a> {
    fn range(&self) -> (usize, usize) {
        (self.ptr as usize, self.ptr as usize + self.len)
    }

    fn overlaps(&self, o: &Raw) -> bool {
        let ((a0, a1), (b0, b1)) = (self.range(), o.range());
        self.len > 0 && o.len > 0 && a0 < b1 && b0 < a1
    }

    fn same(&self, o: &Raw) -> bool {
        std::ptr::eq(self.ptr, o.ptr)
            && self.len == o.len
            && self.shape == o.shape
            && self.strides == o.strides
            && self.offset == o.offset
    }

    /// A read-only view.
    ///
    /// # Safety
    /// `ptr` covers `len` readable bytes (checked non-NULL when `len > 0`), and no `&mut` to
    /// this memory is alive while the view is.
    unsafe fn view(&self) -> TensorRef<'a, u8> {
        let data: &'a [u8] = if self.len == 0 {
            &[]
        } else {
            // SAFETY: see the function's contract.
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        };
        match self.strides {
            Some(st) => TensorRef::with_layout(data, self.shape, st, self.offset),
            None => TensorRef::new(data, self.shape).with_offset(self.offset),
        }
    }

    /// A writable view.
    ///
    /// # Safety
    /// `ptr` covers `len` writable bytes handed over by the caller, and no other reference to
    /// this memory is alive while the view is.
    unsafe fn view_mut(&self) -> TensorMut<'a, u8> {
        let data: &'a mut [u8] = if self.len == 0 {
            &mut []
        } else {
            // SAFETY: see the function's contract.
            unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u8, self.len) }
        };
        match self.strides {
            Some(st) => TensorMut::with_layout(data, self.shape, st, self.offset),
            None => TensorMut::new(data, self.shape).with_offset(self.offset),
        }
    }
}

/// Reads a shape array of `rank` entries.
///
/// # Safety
/// `shape` points at `rank` readable `usize`s (or is NULL with rank 0).
unsafe fn shape_of<'a>(what: &str, shape: *const usize, rank: usize) -> Result<&'a [usize], Fail> {
    if rank > MAX_RANK {
        return Err(fail(
            SELECTJIT_ERR_INVALID,
            format!("{what}: rank {rank} is more than {MAX_RANK}"),
        ));
    }
    if rank == 0 {
        return Ok(&[]);
    }
    if shape.is_null() {
        return Err(fail(
            SELECTJIT_ERR_NULL_POINTER,
            format!("{what}: shape is NULL"),
        ));
    }
    // SAFETY: non-NULL, and the caller promises `rank` (checked <= 64) entries.
    Ok(unsafe { std::slice::from_raw_parts(shape, rank) })
}

/// # Safety
/// `t` points at a valid `SelectjitTensor` whose pointers honour its lengths (the documented
/// contract of the C API).
unsafe fn raw<'a>(what: &str, t: *const SelectjitTensor) -> Result<Raw<'a>, Fail> {
    if t.is_null() {
        return Err(fail(SELECTJIT_ERR_NULL_POINTER, format!("{what} is NULL")));
    }
    // SAFETY: non-NULL; the caller passes a valid descriptor.
    let t = unsafe { &*t };
    // SAFETY: the caller's contract for `shape`/`rank`.
    let shape = unsafe { shape_of(what, t.shape, t.rank) }?;
    let strides = if t.strides.is_null() {
        None
    } else {
        // SAFETY: non-NULL; `rank` entries per the contract (rank checked above).
        Some(unsafe { std::slice::from_raw_parts(t.strides, t.rank) })
    };
    if t.len_bytes > 0 && t.data.is_null() {
        return Err(fail(
            SELECTJIT_ERR_NULL_POINTER,
            format!("{what}: data is NULL"),
        ));
    }
    if t.len_bytes > isize::MAX as usize {
        return Err(fail(
            SELECTJIT_ERR_LAYOUT,
            format!("{what}: length too large"),
        ));
    }
    Ok(Raw {
        ptr: t.data,
        len: t.len_bytes,
        shape,
        strides,
        offset: t.offset,
    })
}

fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let (a0, a1) = (a.as_ptr() as usize, a.as_ptr() as usize + a.len());
    let (b0, b1) = (b.as_ptr() as usize, b.as_ptr() as usize + b.len());
    !a.is_empty() && !b.is_empty() && a0 < b1 && b0 < a1
}

/// Creates an engine. `backend`: 0 JIT, 1 static kernels, 2 interpreter. `cache_capacity` and
/// `threads`: 0 for the defaults. Returns NULL on error (see `selectjit_last_error`).
#[unsafe(no_mangle)]
pub extern "C" fn selectjit_engine_new(
    backend: c_int,
    cache_capacity: usize,
    threads: usize,
) -> *mut SelectjitEngine {
    let mut out = std::ptr::null_mut();
    guard(|| {
        let cfg = engine_config(backend, cache_capacity, threads)?;
        out = Box::into_raw(Box::new(SelectjitEngine(Engine::with_config(cfg)?, false)));
        Ok(())
    });
    out
}

/// The configuration `selectjit_engine_new` describes.
fn engine_config(
    backend: c_int,
    cache_capacity: usize,
    threads: usize,
) -> Result<EngineConfig, Fail> {
    let backend = match backend {
        SELECTJIT_BACKEND_JIT => Backend::Jit,
        SELECTJIT_BACKEND_STATIC => Backend::Static,
        SELECTJIT_BACKEND_INTERP => Backend::Interp,
        b => return Err(fail(SELECTJIT_ERR_INVALID, format!("unknown backend {b}"))),
    };
    // The environment's settings (SELECTJIT_*) apply, the arguments over them.
    let mut c = EngineConfig::from_env()?.backend(backend);
    if cache_capacity != 0 {
        c = c.cache_capacity(cache_capacity);
    }
    if threads != 0 {
        c = c.threads(threads);
    }
    Ok(c)
}

/// Checks an ahead-of-time kernel table linked into the program (the table an object written by
/// `selectjit aot` defines): `SELECTJIT_OK`, or `SELECTJIT_ERR_AOT` with the reason in
/// `selectjit_last_error` (a table for another architecture, missing CPU features, another
/// format version, corrupted keys, ...).
///
/// # Safety
/// `table` is NULL or points at a table from an object exported by selectjit and linked into
/// this program (or a library that stays loaded).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_aot_table_check(table: *const SelectjitAotTable) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { AotTable::from_raw(table) }?;
        Ok(())
    })
}

/// Creates an engine that serves calls from an ahead-of-time kernel table. `backend` 1 (static)
/// generates no code at all: the table's exact kernel of a call, else the table's
/// shape-generic kernel of its pattern, else the static kernels. Backend 0 (JIT) takes the
/// table's kernels first and generates the others; 2 (interpreter) ignores the table.
/// `cache_capacity` and `threads` as for `selectjit_engine_new`.
///
/// A table that fails the checks of `selectjit_aot_table_check` does not stop the engine: it is
/// created and serves every call without the table; `*table_status` (when not NULL) is then
/// `SELECTJIT_ERR_AOT` and `selectjit_last_error` says why (else `SELECTJIT_OK`), and
/// `selectjit_engine_stats` reports `aot_rejected`. Returns NULL only for an unknown backend
/// (`*table_status` then holds that error's code).
///
/// # Safety
/// `table` as for `selectjit_aot_table_check`; `table_status` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_engine_new_aot(
    table: *const SelectjitAotTable,
    backend: c_int,
    cache_capacity: usize,
    threads: usize,
    table_status: *mut c_int,
) -> *mut SelectjitEngine {
    let mut out = std::ptr::null_mut();
    let code = guard(|| {
        let cfg = engine_config(backend, cache_capacity, threads)?;
        // SAFETY: the caller's contract.
        let t = unsafe { AotTable::from_raw(table) };
        let (eng, why) = match t {
            Ok(t) => (Engine::with_config(cfg.aot(t))?, None),
            Err(e) => (Engine::with_config(cfg)?, Some(e)),
        };
        out = Box::into_raw(Box::new(SelectjitEngine(eng, why.is_some())));
        match why {
            Some(w) => Err(w.into()),
            None => Ok(()),
        }
    });
    if !table_status.is_null() {
        // SAFETY: non-NULL and writable (contract).
        unsafe { table_status.write(code) };
    }
    out
}

/// Destroys an engine made by `selectjit_engine_new` (NULL is ignored).
///
/// # Safety
/// `e` is NULL or a pointer returned by `selectjit_engine_new`, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_engine_free(e: *mut SelectjitEngine) {
    // SAFETY: the caller's contract.
    unsafe { free_box(e) }
}

/// Drops a box handed out with `Box::into_raw` (NULL is ignored), without unwinding.
///
/// # Safety
/// `p` is NULL or came from `Box::into_raw` and was not freed before.
unsafe fn free_box<T>(p: *mut T) {
    if !p.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: from `Box::into_raw`, freed once (the function's contract).
            drop(unsafe { Box::from_raw(p) })
        }));
    }
}

/// The three input shapes of a call.
///
/// # Safety
/// Each pointer covers its rank (see `shape_of`).
unsafe fn shapes3<'a>(
    c: (*const usize, usize),
    t: (*const usize, usize),
    e: (*const usize, usize),
) -> Result<[&'a [usize]; 3], Fail> {
    // SAFETY: the function's contract.
    unsafe {
        Ok([
            shape_of("cond", c.0, c.1)?,
            shape_of("then", t.0, t.1)?,
            shape_of("else", e.0, e.1)?,
        ])
    }
}

/// `out = cond ? then : else`. `dtype` is a `SelectjitDType` code, `mode` 0 numpy, 1 two-step,
/// 2 none, 3 pdpd (with `pdpd_axis`). Returns a status code.
///
/// # Safety
/// `engine` comes from `selectjit_engine_new`; each tensor descriptor's pointers cover the
/// lengths it states.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_select(
    engine: *const SelectjitEngine,
    dtype: c_int,
    mode: c_int,
    pdpd_axis: i64,
    cond: *const SelectjitTensor,
    then: *const SelectjitTensor,
    else_: *const SelectjitTensor,
    out: *const SelectjitTensor,
) -> c_int {
    guard(|| {
        if engine.is_null() {
            return Err(fail(SELECTJIT_ERR_NULL_POINTER, "engine is NULL"));
        }
        // SAFETY: non-NULL engine from `selectjit_engine_new` (contract).
        let eng = unsafe { &(*engine).0 };
        let dt = dtype_of(dtype)?;
        let mode = mode_of(mode, pdpd_axis)?;
        // SAFETY: descriptors are valid per the contract (each is checked for NULL).
        let (c, t, e, o) = unsafe {
            (
                raw("cond", cond)?,
                raw("then", then)?,
                raw("else", else_)?,
                raw("out", out)?,
            )
        };
        let in_then = t.same(&o);
        let in_else = e.same(&o);
        if c.overlaps(&o) {
            return Err(fail(SELECTJIT_ERR_OVERLAP, "out overlaps cond"));
        }
        if in_then && in_else {
            return Err(fail(
                SELECTJIT_ERR_OVERLAP,
                "then and else are both the output buffer",
            ));
        }
        if (!in_then && t.overlaps(&o)) || (!in_else && e.overlaps(&o)) {
            return Err(fail(
                SELECTJIT_ERR_OVERLAP,
                "out overlaps an input without being exactly then or else (in place)",
            ));
        }
        // SAFETY (views): the descriptors cover their lengths (contract); the output overlaps
        // no input that gets a shared view (checked above): in place, the aliased input is
        // reached only through the output's `&mut` view.
        unsafe {
            if in_then {
                eng.select_in_place_dyn(dt, c.view(), o.view_mut(), InPlace::Then, e.view(), mode)?;
            } else if in_else {
                eng.select_in_place_dyn(dt, c.view(), o.view_mut(), InPlace::Else, t.view(), mode)?;
            } else {
                eng.select_dyn(dt, c.view(), t.view(), e.view(), o.view_mut(), mode)?;
            }
        }
        Ok(())
    })
}

/// Writes the output shape of a call into `out_shape` (room for `cap` dims) and its rank into
/// `out_rank`.
///
/// # Safety
/// Shape pointers cover their ranks; `out_shape` has room for `cap` entries; `out_rank` is valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_output_shape(
    mode: c_int,
    pdpd_axis: i64,
    cond_shape: *const usize,
    cond_rank: usize,
    then_shape: *const usize,
    then_rank: usize,
    else_shape: *const usize,
    else_rank: usize,
    out_shape: *mut usize,
    cap: usize,
    out_rank: *mut usize,
) -> c_int {
    guard(|| {
        let mode = mode_of(mode, pdpd_axis)?;
        // SAFETY: shape pointers cover their ranks (contract; ranks are checked <= 64).
        let [c, t, e] = unsafe {
            shapes3(
                (cond_shape, cond_rank),
                (then_shape, then_rank),
                (else_shape, else_rank),
            )
        }?;
        let s = selectjit_core::output_shape(mode, c, t, e)?;
        if out_rank.is_null() || (out_shape.is_null() && !s.is_empty()) {
            return Err(fail(
                SELECTJIT_ERR_NULL_POINTER,
                "out_shape or out_rank is NULL",
            ));
        }
        // SAFETY: non-NULL and valid per the contract.
        unsafe { *out_rank = s.len() };
        if s.len() > cap {
            return Err(fail(
                SELECTJIT_ERR_INVALID,
                format!("output rank {} exceeds the room for {cap} dims", s.len()),
            ));
        }
        // SAFETY: room for `cap` >= s.len() entries (contract, checked).
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), out_shape, s.len()) };
        Ok(())
    })
}

/// Plans a call for contiguous buffers of these shapes once and binds its kernel. Returns NULL
/// on error (see `selectjit_last_error`).
///
/// # Safety
/// `engine` comes from `selectjit_engine_new`; shape pointers cover their ranks.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_prepare(
    engine: *const SelectjitEngine,
    dtype: c_int,
    mode: c_int,
    pdpd_axis: i64,
    cond_shape: *const usize,
    cond_rank: usize,
    then_shape: *const usize,
    then_rank: usize,
    else_shape: *const usize,
    else_rank: usize,
) -> *mut SelectjitPrepared {
    let mut out = std::ptr::null_mut();
    guard(|| {
        if engine.is_null() {
            return Err(fail(SELECTJIT_ERR_NULL_POINTER, "engine is NULL"));
        }
        // SAFETY: non-NULL engine (contract).
        let eng = unsafe { &(*engine).0 };
        // SAFETY: shape pointers cover their ranks (contract; ranks are checked <= 64).
        let [c, t, e] = unsafe {
            shapes3(
                (cond_shape, cond_rank),
                (then_shape, then_rank),
                (else_shape, else_rank),
            )
        }?;
        let p = eng.prepare(dtype_of(dtype)?, c, t, e, mode_of(mode, pdpd_axis)?)?;
        out = Box::into_raw(Box::new(SelectjitPrepared(p)));
        Ok(())
    });
    out
}

/// Runs a prepared call on contiguous buffers of the prepared shapes (lengths in bytes).
///
/// # Safety
/// `p` comes from `selectjit_prepare`; each pointer covers the length given with it; `out`
/// overlaps no input.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_prepared_run(
    p: *const SelectjitPrepared,
    cond: *const u8,
    cond_len: usize,
    then: *const u8,
    then_len: usize,
    else_: *const u8,
    else_len: usize,
    out: *mut u8,
    out_len: usize,
) -> c_int {
    guard(|| {
        if p.is_null() {
            return Err(fail(SELECTJIT_ERR_NULL_POINTER, "prepared call is NULL"));
        }
        let slice = |what: &str, ptr: *const u8, len: usize| -> Result<&[u8], Fail> {
            if len == 0 {
                Ok(&[])
            } else if ptr.is_null() {
                Err(fail(SELECTJIT_ERR_NULL_POINTER, format!("{what} is NULL")))
            } else {
                // SAFETY: non-NULL and `len` readable bytes (contract).
                Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
            }
        };
        let (c, t, e) = (
            slice("cond", cond, cond_len)?,
            slice("then", then, then_len)?,
            slice("else", else_, else_len)?,
        );
        let o = slice("out", out, out_len)?;
        if [c, t, e].iter().any(|x| overlaps(x, o)) {
            return Err(fail(SELECTJIT_ERR_OVERLAP, "out overlaps an input"));
        }
        let o: &mut [u8] = if o.is_empty() {
            &mut []
        } else {
            // SAFETY: writable per the contract, and overlapping no input (checked).
            unsafe { std::slice::from_raw_parts_mut(out, out_len) }
        };
        // SAFETY: non-NULL, from `selectjit_prepare` (contract).
        let prepared = unsafe { &(*p).0 };
        prepared.run_bytes(c, t, e, o)?;
        Ok(())
    })
}

/// Destroys a prepared call (NULL is ignored).
///
/// # Safety
/// `p` is NULL or from `selectjit_prepare`, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_prepared_free(p: *mut SelectjitPrepared) {
    // SAFETY: the caller's contract.
    unsafe { free_box(p) }
}

/// Fills `out` with the engine's cache counters.
///
/// # Safety
/// `engine` comes from `selectjit_engine_new`; `out` points at a writable `SelectjitStats`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_engine_stats(
    engine: *const SelectjitEngine,
    out: *mut SelectjitStats,
) -> c_int {
    guard(|| {
        if engine.is_null() || out.is_null() {
            return Err(fail(SELECTJIT_ERR_NULL_POINTER, "engine or stats is NULL"));
        }
        // SAFETY: non-NULL engine (contract).
        let s = unsafe { &(*engine).0 }.stats();
        let v = SelectjitStats {
            hits: s.hits,
            misses: s.misses,
            generic_runs: s.generic_runs,
            evictions: s.evictions,
            compiles: s.compiles,
            compile_us: s.compile_us,
            len: s.len as u64,
            capacity: s.capacity as u64,
            aot_exact_runs: s.aot_exact_runs,
            aot_generic_runs: s.aot_generic_runs,
            static_runs: s.static_runs,
            aot_kernels: (s.aot_exact_kernels + s.aot_generic_kernels) as u64,
            aot_rejected: unsafe { (*engine).1 } as u64,
        };
        // SAFETY: non-NULL and writable (contract).
        unsafe { out.write(v) };
        Ok(())
    })
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
        _ => b"unknown\0",
    };
    s.as_ptr() as *const c_char
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_codes_follow_dtype_all() {
        let codes = [
            (SELECTJIT_DTYPE_BOOL, DType::Bool),
            (SELECTJIT_DTYPE_I64, DType::I64),
            (SELECTJIT_DTYPE_BF16, DType::BF16),
            (SELECTJIT_DTYPE_F32, DType::F32),
            (SELECTJIT_DTYPE_COMPLEX128, DType::Complex128),
        ];
        for (c, d) in codes {
            assert!(matches!(dtype_of(c), Ok(x) if x == d));
        }
        assert!(dtype_of(15).is_err() && dtype_of(-1).is_err());
    }
}

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

use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use selectjit_core::aot::{AotTable, SelectjitAotTable};
use selectjit_core::{Backend, Broadcast, DType, Engine, EngineConfig, Error, InPlace, MAX_RANK};
use selectjit_core::{CmpOp, Cond, Operand, Prepared, TensorMut, TensorRef, TestOp, Tier};

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

/// Tier (`SelectjitOptions::tier`): the default (the environment's `SELECTJIT_TIER` when the
/// options read it, else `auto`).
pub const SELECTJIT_TIER_DEFAULT: i32 = 0;
/// Tier: the best tier this host runs, chosen per kernel class by measuring.
pub const SELECTJIT_TIER_AUTO: i32 = 1;
/// Tier: Cranelift.
pub const SELECTJIT_TIER_CRANELIFT: i32 = 2;
/// Tier: x86-64 AVX2 code.
pub const SELECTJIT_TIER_AVX2: i32 = 3;
/// Tier: x86-64 AVX-512 code.
pub const SELECTJIT_TIER_AVX512: i32 = 4;

/// Condition kind (`SelectjitCond::kind`): a mask in `lhs` (one byte per element, non-zero true).
pub const SELECTJIT_COND_MASK: u32 = 0;
/// Condition kind: `lhs OP rhs` with `op` a `SELECTJIT_CMP_*` code.
pub const SELECTJIT_COND_CMP: u32 = 1;
/// Condition kind: `isnan(lhs)` (false for integers and bool).
pub const SELECTJIT_COND_ISNAN: u32 = 2;
/// Condition kind: `isinf(lhs)` (false for integers and bool).
pub const SELECTJIT_COND_ISINF: u32 = 3;
/// Condition kind: `isfinite(lhs)` (true for integers and bool).
pub const SELECTJIT_COND_ISFINITE: u32 = 4;

/// Comparison (`SelectjitCond::op`): `==`.
pub const SELECTJIT_CMP_EQ: u32 = 0;
/// Comparison: `!=`.
pub const SELECTJIT_CMP_NE: u32 = 1;
/// Comparison: `<`.
pub const SELECTJIT_CMP_LT: u32 = 2;
/// Comparison: `<=`.
pub const SELECTJIT_CMP_LE: u32 = 3;
/// Comparison: `>`.
pub const SELECTJIT_CMP_GT: u32 = 4;
/// Comparison: `>=`.
pub const SELECTJIT_CMP_GE: u32 = 5;

/// The first version's `sizeof(SelectjitOptions)`: `struct_size`, `backend`, `cache_capacity`
/// and `threads`. Smaller structs are refused.
pub const SELECTJIT_OPTIONS_SIZE_V1: u32 = 24;
/// The first version's `sizeof(SelectjitStats)`: `struct_size`, `reserved` and 23 counters
/// (`capacity` to `blocked_runs`). Smaller structs are refused.
pub const SELECTJIT_STATS_SIZE_V1: u32 = 192;
/// The largest `struct_size` accepted (any struct of the API is far smaller).
pub const SELECTJIT_STRUCT_SIZE_MAX: u32 = 4096;

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
/// field, so an initialiser that leaves it out gets 0 (the view starts at `data`). A rank-0
/// tensor is a scalar (one element).
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

/// An output tensor: the fields of `SelectjitTensor` with a writable `data`.
#[repr(C)]
pub struct SelectjitTensorMut {
    /// The buffer's first byte (may be NULL when `len_bytes` is 0).
    pub data: *mut u8,
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

/// How to build an engine (`selectjit_engine_new`). Zero-initialise it, set `struct_size` to
/// `sizeof(SelectjitOptions)`, then the fields wanted: every field's 0 is its default.
/// Fields are only ever appended; a struct from an older header (its `struct_size` at least
/// `SELECTJIT_OPTIONS_SIZE_V1`) gets the defaults for the fields it lacks.
#[repr(C)]
pub struct SelectjitOptions {
    /// `sizeof(SelectjitOptions)` as the caller's header declares it.
    pub struct_size: u32,
    /// `SELECTJIT_BACKEND_*` (0: JIT).
    pub backend: i32,
    /// Kernels the cache keeps (0: the default, 1024, or `SELECTJIT_CACHE_CAPACITY`).
    pub cache_capacity: u64,
    /// Threads a large call may be split across (0: every available core; 1: the caller's).
    pub threads: u64,
    /// `SELECTJIT_TIER_*` (0: the default).
    pub tier: i32,
    /// Sightings of a signature before its exact kernel is compiled (0: the default, 2, or
    /// `SELECTJIT_EXACT_AFTER`).
    pub exact_after: u32,
    /// Non-zero: the `SELECTJIT_*` environment variables give the defaults of the fields left 0
    /// (a malformed variable is then an error). 0: the environment is not read.
    pub read_env: u32,
    /// With `aot_table`: 0, a rejected table fails `selectjit_engine_new`; non-zero, the engine
    /// is built without it (`selectjit_engine_aot_status` then says why).
    pub aot_fallback: u32,
    /// An ahead-of-time kernel table linked into the program (`selectjit aot`), or NULL.
    pub aot_table: *const SelectjitAotTable,
}

/// The condition of `selectjit_select_cond`: a mask, or a predicate computed per element with
/// numpy's semantics (and of `selectjit_prepare_cond`: a predicate whose operands are
/// placeholders or rank-0 values, see there). Zero-initialise it and set `struct_size` to
/// `sizeof(SelectjitCond)`.
///
/// `lhs` is the mask (`SELECTJIT_COND_MASK`), the compared or tested operand; `rhs` the second
/// operand of a comparison (unused otherwise). Both hold elements of `dtype`, which may differ
/// from the select's dtype (a mask is bytes: `dtype` is unused). Either may be a scalar (a
/// rank-0 tensor); the two broadcast against each other with numpy's rule, and the result takes
/// `cond`'s place in the select's broadcast mode. In an in-place select (the output is exactly
/// `then` or `else`), an operand may be exactly the output too (same fields, `dtype` the
/// select's): it is read as it holds on entry.
#[repr(C)]
pub struct SelectjitCond {
    /// `sizeof(SelectjitCond)` as the caller's header declares it.
    pub struct_size: u32,
    /// `SELECTJIT_COND_*`.
    pub kind: u32,
    /// `SELECTJIT_CMP_*` (comparisons only).
    pub op: u32,
    /// `SELECTJIT_DTYPE_*` of `lhs` and `rhs` (predicates only).
    pub dtype: i32,
    /// Non-zero: the negation (`then` and `else` trade places).
    pub negate: u32,
    /// Must be 0.
    pub reserved: u32,
    /// The mask, or the first operand.
    pub lhs: SelectjitTensor,
    /// A comparison's second operand.
    pub rhs: SelectjitTensor,
}

/// An engine's counters (`selectjit_engine_stats`): the caller sets `struct_size`, the library
/// fills every counter that fits. The counters are those of the Rust `CacheStats::fields()`,
/// by the same names and in the same order (a test holds them to it); new ones are appended.
#[repr(C)]
#[derive(Default)]
pub struct SelectjitStats {
    /// `sizeof(SelectjitStats)` as the caller's header declares it (set by the caller).
    pub struct_size: u32,
    /// Not written by the library.
    pub reserved: u32,
    /// Signatures the cache keeps at most.
    pub capacity: u64,
    /// Signatures held now.
    pub len: u64,
    /// Calls that found their exact kernel.
    pub hits: u64,
    /// Calls whose signature was not in the cache.
    pub misses: u64,
    /// Calls served by a shape-generic kernel while their signature was not yet hot.
    pub generic_runs: u64,
    /// Signatures evicted.
    pub evictions: u64,
    /// Exact-kernel compilations.
    pub compiles: u64,
    /// Time of the exact-kernel compilations, in microseconds.
    pub compile_us: u64,
    /// Shape-generic kernel compilations.
    pub generic_compiles: u64,
    /// Time of the shape-generic compilations, in microseconds.
    pub generic_compile_us: u64,
    /// Compilations that failed (served by the static kernels).
    pub compile_failures: u64,
    /// Shape-generic kernels held now.
    pub generic_len: u64,
    /// Calls run by an exact kernel of the engine's AOT table.
    pub aot_exact_runs: u64,
    /// Calls run by a shape-generic kernel of the engine's AOT table.
    pub aot_generic_runs: u64,
    /// Calls run by the static kernels.
    pub static_runs: u64,
    /// Exact kernels in the engine's AOT table.
    pub aot_exact_kernels: u64,
    /// Shape-generic kernels in the engine's AOT table.
    pub aot_generic_kernels: u64,
    /// Kernel classes whose variant was chosen by measuring.
    pub tier_trials: u64,
    /// Calls timed for those choices.
    pub trial_calls: u64,
    /// Time those calls took beyond the chosen variant's, in nanoseconds.
    pub trial_excess_ns: u64,
    /// Compilations of candidate variants beyond the one kept.
    pub trial_compiles: u64,
    /// Their time in microseconds.
    pub trial_compile_us: u64,
    /// Calls whose predicate no kernel fuses, run in blocks by the static kernels.
    pub blocked_runs: u64,
}

/// Where `SelectjitStats`' counters start: after `struct_size` and `reserved`.
const STATS_HEADER: usize = 8;

/// An engine (opaque).
pub struct SelectjitEngine {
    engine: Engine,
    /// Why the AOT table given in the options was rejected (with `aot_fallback`).
    aot_rejected: Option<String>,
}

/// A prepared call (opaque).
pub struct SelectjitPrepared {
    prepared: Prepared,
    /// `None` for a mask call; for a predicate call, whether the condition's lhs and rhs are
    /// placeholders (their buffers given to `selectjit_prepared_run_cond`) rather than values
    /// fixed when prepared (or absent).
    placeholders: Option<[bool; 2]>,
}

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

/// The size of a growable struct the caller hands over, checked: at least `min` (the first
/// version's size), at most `SELECTJIT_STRUCT_SIZE_MAX`, and when larger than this library's
/// struct, zero in every byte past it (fields of a newer header left at their defaults).
///
/// # Safety
/// `p` is NULL or points at a struct of the API whose `struct_size` readable bytes the caller
/// vouches for.
unsafe fn input_size<T>(what: &str, p: *const T, min: u32) -> Result<usize, Fail> {
    if p.is_null() {
        return Err(fail(SELECTJIT_ERR_NULL_POINTER, format!("{what} is NULL")));
    }
    // SAFETY: non-NULL; every struct of the API starts with its `uint32_t struct_size`.
    let size = unsafe { p.cast::<u32>().read_unaligned() };
    let ours = std::mem::size_of::<T>();
    check_size(what, size, min)?;
    let size = size as usize;
    if size > ours {
        // SAFETY: the caller vouches for `struct_size` (checked <= SELECTJIT_STRUCT_SIZE_MAX)
        // readable bytes.
        let all = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size) };
        if let Some(i) = all[ours..].iter().position(|&b| b != 0) {
            return Err(fail(
                SELECTJIT_ERR_STRUCT_SIZE,
                format!(
                    "{what}: struct_size {size} is larger than this library's {ours} and byte \
                     {} past it is set: a field of a newer header this library does not know",
                    ours + i
                ),
            ));
        }
    }
    Ok(size)
}

/// `struct_size` against the first version's size and the bound.
fn check_size(what: &str, size: u32, min: u32) -> Result<(), Fail> {
    if size < min {
        return Err(fail(
            SELECTJIT_ERR_STRUCT_SIZE,
            format!(
                "{what}: struct_size {size} is smaller than the first version's {min} \
                 (set it to sizeof the struct)"
            ),
        ));
    }
    if size > SELECTJIT_STRUCT_SIZE_MAX {
        return Err(fail(
            SELECTJIT_ERR_STRUCT_SIZE,
            format!(
                "{what}: struct_size {size} is absurdly large (at most \
                 {SELECTJIT_STRUCT_SIZE_MAX}; set it to sizeof the struct)"
            ),
        ));
    }
    Ok(())
}

/// The size of `*p` without reading it.
fn size_of_pointee<T>(_: *const T) -> usize {
    std::mem::size_of::<T>()
}

/// Copies from `$src` (a caller's struct of `$size` bytes) into `$dst` (a struct of defaults)
/// each listed field that fits whole in `$size`. The list must name every field of `$T`: the
/// pattern at the end does not compile otherwise.
macro_rules! read_fields {
    ($T:ident, $src:expr, $size:expr, $dst:ident, [$($f:ident),* $(,)?]) => {{
        $(
            // SAFETY: `$src` is non-NULL (checked by `input_size`); no read happens here.
            let field = unsafe { std::ptr::addr_of!((*$src).$f) };
            if std::mem::offset_of!($T, $f) + size_of_pointee(field) <= $size {
                // SAFETY: inside the `$size` bytes the caller vouches for; unaligned reads
                // because the caller's struct may be anywhere.
                $dst.$f = unsafe { field.read_unaligned() };
            }
        )*
        let $T { $($f: _),* } = &$dst;
    }};
}

impl SelectjitOptions {
    /// Every field at its default (0, NULL).
    fn zeroed() -> SelectjitOptions {
        SelectjitOptions {
            struct_size: 0,
            backend: 0,
            cache_capacity: 0,
            threads: 0,
            tier: 0,
            exact_after: 0,
            read_env: 0,
            aot_fallback: 0,
            aot_table: std::ptr::null(),
        }
    }

    /// The caller's options, the fields its struct lacks at their defaults.
    ///
    /// # Safety
    /// As for `input_size`.
    unsafe fn read(p: *const SelectjitOptions) -> Result<SelectjitOptions, Fail> {
        // SAFETY: the function's contract.
        let size = unsafe { input_size("options", p, SELECTJIT_OPTIONS_SIZE_V1) }?;
        let mut o = SelectjitOptions::zeroed();
        read_fields!(
            SelectjitOptions,
            p,
            size,
            o,
            [
                struct_size,
                backend,
                cache_capacity,
                threads,
                tier,
                exact_after,
                read_env,
                aot_fallback,
                aot_table,
            ]
        );
        Ok(o)
    }
}

const _: () = assert!(
    std::mem::offset_of!(SelectjitOptions, tier) == SELECTJIT_OPTIONS_SIZE_V1 as usize,
    "the first version of SelectjitOptions ends where `tier` starts"
);
const _: () = assert!(
    std::mem::offset_of!(SelectjitStats, blocked_runs) + 8 == SELECTJIT_STATS_SIZE_V1 as usize,
    "the first version of SelectjitStats ends with `blocked_runs`"
);

/// The first version's `sizeof(SelectjitCond)` (it ends with `rhs`; it holds pointers, so it
/// depends on the target).
const COND_SIZE_V1: usize =
    std::mem::offset_of!(SelectjitCond, rhs) + std::mem::size_of::<SelectjitTensor>();

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
    /// `ptr` covers `len` writable bytes handed over by the caller (a `SelectjitTensorMut`),
    /// and no other reference to this memory is alive while the view is.
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

/// The fields of a tensor descriptor, checked.
///
/// # Safety
/// The pointers honour the lengths stated with them (the documented contract of the C API).
unsafe fn raw_parts<'a>(
    what: &str,
    data: *const u8,
    len_bytes: usize,
    (shape, rank): (*const usize, usize),
    strides: *const isize,
    offset: usize,
) -> Result<Raw<'a>, Fail> {
    // SAFETY: the caller's contract for `shape`/`rank`.
    let shape = unsafe { shape_of(what, shape, rank) }?;
    let strides = if strides.is_null() {
        None
    } else {
        // SAFETY: non-NULL; `rank` entries per the contract (rank checked above).
        Some(unsafe { std::slice::from_raw_parts(strides, rank) })
    };
    if len_bytes > 0 && data.is_null() {
        return Err(fail(
            SELECTJIT_ERR_NULL_POINTER,
            format!("{what}: data is NULL"),
        ));
    }
    if len_bytes > isize::MAX as usize {
        return Err(fail(
            SELECTJIT_ERR_LAYOUT,
            format!("{what}: length too large"),
        ));
    }
    Ok(Raw {
        ptr: data,
        len: len_bytes,
        shape,
        strides,
        offset,
    })
}

/// # Safety
/// `t` is NULL or points at a valid `SelectjitTensor` whose pointers honour its lengths.
unsafe fn raw<'a>(what: &str, t: *const SelectjitTensor) -> Result<Raw<'a>, Fail> {
    if t.is_null() {
        return Err(fail(SELECTJIT_ERR_NULL_POINTER, format!("{what} is NULL")));
    }
    // SAFETY: non-NULL; the caller passes a valid descriptor.
    let t = unsafe { &*t };
    // SAFETY: the caller's contract.
    unsafe {
        raw_parts(
            what,
            t.data,
            t.len_bytes,
            (t.shape, t.rank),
            t.strides,
            t.offset,
        )
    }
}

/// # Safety
/// `t` is NULL or points at a valid `SelectjitTensorMut` whose pointers honour its lengths.
unsafe fn raw_mut<'a>(what: &str, t: *const SelectjitTensorMut) -> Result<Raw<'a>, Fail> {
    if t.is_null() {
        return Err(fail(SELECTJIT_ERR_NULL_POINTER, format!("{what} is NULL")));
    }
    // SAFETY: non-NULL; the caller passes a valid descriptor.
    let t = unsafe { &*t };
    // SAFETY: the caller's contract.
    unsafe {
        raw_parts(
            what,
            t.data,
            t.len_bytes,
            (t.shape, t.rank),
            t.strides,
            t.offset,
        )
    }
}

fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let (a0, a1) = (a.as_ptr() as usize, a.as_ptr() as usize + a.len());
    let (b0, b1) = (b.as_ptr() as usize, b.as_ptr() as usize + b.len());
    !a.is_empty() && !b.is_empty() && a0 < b1 && b0 < a1
}

/// The configuration the options describe.
fn engine_config(o: &SelectjitOptions) -> Result<EngineConfig, Fail> {
    let backend = match o.backend {
        SELECTJIT_BACKEND_JIT => Backend::Jit,
        SELECTJIT_BACKEND_STATIC => Backend::Static,
        SELECTJIT_BACKEND_INTERP => Backend::Interp,
        b => return Err(fail(SELECTJIT_ERR_INVALID, format!("unknown backend {b}"))),
    };
    let tier = match o.tier {
        SELECTJIT_TIER_DEFAULT => None,
        t => Some(
            usize::try_from(t - 1)
                .ok()
                .and_then(|i| Tier::ALL.get(i).copied())
                .ok_or_else(|| fail(SELECTJIT_ERR_INVALID, format!("unknown tier {t}")))?,
        ),
    };
    let size = |what: &str, n: u64| {
        usize::try_from(n).map_err(|_| {
            fail(
                SELECTJIT_ERR_INVALID,
                format!("{what} {n} does not fit this machine's size_t"),
            )
        })
    };
    let mut c = if o.read_env != 0 {
        EngineConfig::from_env()?
    } else {
        EngineConfig::new()
    }
    .backend(backend);
    if let Some(t) = tier {
        c = c.tier(t);
    }
    if o.cache_capacity != 0 {
        c = c.cache_capacity(size("cache_capacity", o.cache_capacity)?);
    }
    if o.threads != 0 {
        c = c.threads(size("threads", o.threads)?);
    }
    if o.exact_after != 0 {
        c = c.exact_after(o.exact_after);
    }
    Ok(c)
}

/// Creates an engine into `*out` from `opts` (NULL: every default, with the `SELECTJIT_*`
/// environment variables applied, as `read_env` does). Returns a status code; on error `*out`
/// is left as it was and `selectjit_last_error` says why: an unknown backend or tier, a bad
/// `struct_size`, a malformed environment variable, a tier this host cannot run, or an AOT
/// table that fails the checks of `selectjit_aot_table_check` (unless `aot_fallback` is set:
/// the engine is then built without it, see `selectjit_engine_aot_status`).
///
/// An `aot_table` with backend `SELECTJIT_BACKEND_STATIC` generates no code at all: the table's
/// exact kernel of a call, else its shape-generic kernel of the call's pattern, else the static
/// kernels. With the JIT backend the table's kernels come first and the others are generated;
/// the interpreter ignores the table.
///
/// # Safety
/// `opts` is NULL or points at `opts->struct_size` readable bytes of a `SelectjitOptions`;
/// its `aot_table` as for `selectjit_aot_table_check`; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_engine_new(
    opts: *const SelectjitOptions,
    out: *mut *mut SelectjitEngine,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(SELECTJIT_ERR_NULL_POINTER, "out is NULL"));
        }
        let o = if opts.is_null() {
            SelectjitOptions {
                read_env: 1,
                ..SelectjitOptions::zeroed()
            }
        } else {
            // SAFETY: the caller's contract.
            unsafe { SelectjitOptions::read(opts) }?
        };
        let mut cfg = engine_config(&o)?;
        let mut aot_rejected = None;
        if !o.aot_table.is_null() {
            // SAFETY: the caller's contract.
            match unsafe { AotTable::from_raw(o.aot_table) } {
                Ok(t) => cfg = cfg.aot(t),
                Err(e) if o.aot_fallback != 0 => aot_rejected = Some(e.to_string()),
                Err(e) => return Err(e.into()),
            }
        }
        let engine = Engine::with_config(cfg)?;
        let e = Box::new(SelectjitEngine {
            engine,
            aot_rejected,
        });
        // SAFETY: non-NULL and writable (contract).
        unsafe { out.write(Box::into_raw(e)) };
        Ok(())
    })
}

/// Whether the engine uses the AOT table its options gave: `SELECTJIT_OK` (or no table was
/// given), or `SELECTJIT_ERR_AOT` when it was rejected and the engine built without it
/// (`aot_fallback`), with the reason in `selectjit_last_error`.
///
/// # Safety
/// `engine` is NULL or comes from `selectjit_engine_new`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_engine_aot_status(engine: *const SelectjitEngine) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { engine_ref(engine) }?;
        match &e.aot_rejected {
            Some(why) => Err(fail(SELECTJIT_ERR_AOT, why.clone())),
            None => Ok(()),
        }
    })
}

/// The engine behind a handle.
///
/// # Safety
/// `engine` is NULL or comes from `selectjit_engine_new` and was not freed.
unsafe fn engine_ref<'a>(engine: *const SelectjitEngine) -> Result<&'a SelectjitEngine, Fail> {
    if engine.is_null() {
        return Err(fail(SELECTJIT_ERR_NULL_POINTER, "engine is NULL"));
    }
    // SAFETY: non-NULL, from `selectjit_engine_new` (the caller's contract).
    Ok(unsafe { &*engine })
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

/// A condition read from C, its tensors not yet viewed.
enum RawCond<'a> {
    Mask(Raw<'a>),
    Cmp(CmpOp, DType, Raw<'a>, Raw<'a>),
    Test(TestOp, DType, Raw<'a>),
}

/// Reads a `SelectjitCond`: its negation and its condition.
///
/// # Safety
/// `c` is NULL or points at `c->struct_size` readable bytes of a `SelectjitCond` whose
/// tensors honour their lengths.
unsafe fn read_cond<'a>(c: *const SelectjitCond) -> Result<(RawCond<'a>, bool), Fail> {
    // SAFETY: the function's contract.
    unsafe { input_size("cond", c, COND_SIZE_V1 as u32) }?;
    // SAFETY: non-NULL, and at least as large as this library's struct, the first version
    // (checked above). When fields are appended, read them as `SelectjitOptions::read` does.
    let c = unsafe { &*c };
    if c.reserved != 0 {
        return Err(fail(SELECTJIT_ERR_INVALID, "cond: reserved is not 0"));
    }
    let pred_dtype = || dtype_of(c.dtype).map_err(|Fail(code, m)| Fail(code, format!("cond: {m}")));
    // SAFETY (tensors): the function's contract.
    let cond = match c.kind {
        SELECTJIT_COND_MASK => RawCond::Mask(unsafe { raw("cond", &c.lhs) }?),
        SELECTJIT_COND_CMP => {
            let op = usize::try_from(c.op)
                .ok()
                .and_then(|i| CmpOp::ALL.get(i).copied())
                .ok_or_else(|| {
                    fail(
                        SELECTJIT_ERR_INVALID,
                        format!("cond: unknown comparison {}", c.op),
                    )
                })?;
            let dt = pred_dtype()?;
            // SAFETY: the function's contract.
            let (l, r) = unsafe { (raw("cond lhs", &c.lhs)?, raw("cond rhs", &c.rhs)?) };
            RawCond::Cmp(op, dt, l, r)
        }
        k @ (SELECTJIT_COND_ISNAN | SELECTJIT_COND_ISINF | SELECTJIT_COND_ISFINITE) => {
            let op = TestOp::ALL[(k - SELECTJIT_COND_ISNAN) as usize];
            let dt = pred_dtype()?;
            // SAFETY: the function's contract.
            RawCond::Test(op, dt, unsafe { raw("cond lhs", &c.lhs) }?)
        }
        k => {
            return Err(fail(
                SELECTJIT_ERR_INVALID,
                format!("cond: unknown kind {k}"),
            ));
        }
    };
    Ok((cond, c.negate != 0))
}

/// Runs `out = cond ? then : else` on checked descriptors: rejects overlaps, runs in place when
/// the output is exactly `then` or `else` (a predicate operand exactly the output then reads
/// it as it holds on entry).
fn run_select<'a>(
    eng: &Engine,
    dt: DType,
    mode: Broadcast,
    (cond, negate): (RawCond<'a>, bool),
    t: Raw<'_>,
    e: Raw<'_>,
    o: Raw<'_>,
) -> Result<(), Fail> {
    let in_then = t.same(&o);
    let in_else = e.same(&o);
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
    let in_place = in_then || in_else;
    // A predicate operand: viewed, or the in-place buffer when it is exactly the output.
    let operand = |what: &str, dtype: DType, r: &Raw<'a>| -> Result<Operand<'a>, Fail> {
        if r.same(&o) && in_place {
            if dtype != dt {
                return Err(fail(
                    SELECTJIT_ERR_DTYPE,
                    format!(
                        "{what} is the output (in place) but its dtype {dtype} is not the \
                         select's {dt}"
                    ),
                ));
            }
            return Ok(Operand::in_place());
        }
        if r.overlaps(&o) {
            return Err(fail(
                SELECTJIT_ERR_OVERLAP,
                format!(
                    "out overlaps {what} (allowed only for an operand exactly the output of an \
                     in-place select)"
                ),
            ));
        }
        // SAFETY: the descriptor covers its length (contract) and overlaps the output, the
        // only memory viewed mutably, nowhere (checked above).
        Ok(Operand::from_bytes(dtype, unsafe { r.view() }))
    };
    let cond = match &cond {
        RawCond::Mask(m) => {
            if m.overlaps(&o) {
                return Err(fail(SELECTJIT_ERR_OVERLAP, "out overlaps cond"));
            }
            // SAFETY: as for `operand`: no overlap with the output (checked).
            Cond::mask(unsafe { m.view() })
        }
        RawCond::Cmp(op, d, l, r) => Cond::cmp(
            *op,
            operand("cond lhs", *d, l)?,
            operand("cond rhs", *d, r)?,
        ),
        RawCond::Test(op, d, v) => Cond::test(*op, operand("cond lhs", *d, v)?),
    };
    let cond = if negate { cond.not() } else { cond };
    // SAFETY (views): the descriptors cover their lengths (contract); the output overlaps no
    // input that gets a shared view (checked above): in place, the aliased input is reached
    // only through the output's `&mut` view.
    unsafe {
        if in_then {
            eng.select_in_place_dyn(dt, cond, o.view_mut(), InPlace::Then, e.view(), mode)?;
        } else if in_else {
            eng.select_in_place_dyn(dt, cond, o.view_mut(), InPlace::Else, t.view(), mode)?;
        } else {
            eng.select_dyn(dt, cond, t.view(), e.view(), o.view_mut(), mode)?;
        }
    }
    Ok(())
}

/// `out = cond ? then : else` with a mask `cond` (one byte per element, any non-zero byte
/// true). `dtype` is a `SELECTJIT_DTYPE_*` code of `then`, `else` and `out`; `mode` 0 numpy,
/// 1 two-step, 2 none, 3 pdpd (with `pdpd_axis`). `out` may be exactly `then` or `else` (the
/// same fields): the select then runs in place. Returns a status code; on error `out` is
/// untouched.
///
/// # Safety
/// `engine` comes from `selectjit_engine_new`; each tensor descriptor's pointers cover the
/// lengths it states, `out`'s writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_select(
    engine: *const SelectjitEngine,
    dtype: c_int,
    mode: c_int,
    pdpd_axis: i64,
    cond: *const SelectjitTensor,
    then: *const SelectjitTensor,
    else_: *const SelectjitTensor,
    out: *const SelectjitTensorMut,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let eng = unsafe { engine_ref(engine) }?;
        let dt = dtype_of(dtype)?;
        let mode = mode_of(mode, pdpd_axis)?;
        // SAFETY: descriptors are valid per the contract (each is checked for NULL).
        let (c, t, e, o) = unsafe {
            (
                raw("cond", cond)?,
                raw("then", then)?,
                raw("else", else_)?,
                raw_mut("out", out)?,
            )
        };
        run_select(&eng.engine, dt, mode, (RawCond::Mask(c), false), t, e, o)
    })
}

/// `out = cond ? then : else` with `cond` a `SelectjitCond`: a mask, or a predicate
/// (`lhs OP rhs`, `isnan(lhs)`, ..., negated or not) computed in the kernel, with no mask
/// in memory. Otherwise as `selectjit_select`; in place, a predicate operand may be the
/// output itself (in-place ReLU: `then` and `out` describe `x`, `cond` is `x > 0` with
/// `lhs` describing `x` too, `else` a rank-0 zero).
///
/// # Safety
/// As for `selectjit_select`; `cond` points at `cond->struct_size` readable bytes of a
/// `SelectjitCond` whose tensors honour their lengths.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_select_cond(
    engine: *const SelectjitEngine,
    dtype: c_int,
    mode: c_int,
    pdpd_axis: i64,
    cond: *const SelectjitCond,
    then: *const SelectjitTensor,
    else_: *const SelectjitTensor,
    out: *const SelectjitTensorMut,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let eng = unsafe { engine_ref(engine) }?;
        let dt = dtype_of(dtype)?;
        let mode = mode_of(mode, pdpd_axis)?;
        // SAFETY: descriptors are valid per the contract (each is checked for NULL).
        let (c, t, e, o) = unsafe {
            (
                read_cond(cond)?,
                raw("then", then)?,
                raw("else", else_)?,
                raw_mut("out", out)?,
            )
        };
        run_select(&eng.engine, dt, mode, c, t, e, o)
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
        // SAFETY: the caller's contract.
        let eng = &unsafe { engine_ref(engine) }?.engine;
        // SAFETY: shape pointers cover their ranks (contract; ranks are checked <= 64).
        let [c, t, e] = unsafe {
            shapes3(
                (cond_shape, cond_rank),
                (then_shape, then_rank),
                (else_shape, else_rank),
            )
        }?;
        let p = eng.prepare(dtype_of(dtype)?, c, t, e, mode_of(mode, pdpd_axis)?)?;
        out = Box::into_raw(Box::new(SelectjitPrepared {
            prepared: p,
            placeholders: None,
        }));
        Ok(())
    });
    out
}

/// `len` readable bytes at `ptr` as a slice (NULL allowed when `len` is 0).
///
/// # Safety
/// `ptr` is NULL or covers `len` readable bytes that nothing writes while the slice lives.
unsafe fn input_slice<'a>(what: &str, ptr: *const u8, len: usize) -> Result<&'a [u8], Fail> {
    if len == 0 {
        Ok(&[])
    } else if ptr.is_null() {
        Err(fail(SELECTJIT_ERR_NULL_POINTER, format!("{what} is NULL")))
    } else {
        // SAFETY: non-NULL and `len` readable bytes (the function's contract).
        Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
    }
}

/// The output of a prepared call as a writable slice, once it is known to overlap none of
/// `inputs`.
///
/// # Safety
/// `out` is NULL or covers `out_len` writable bytes; the inputs are slices of the caller's
/// buffers (see `input_slice`).
unsafe fn output_slice<'a>(
    out: *mut u8,
    out_len: usize,
    inputs: &[&[u8]],
) -> Result<&'a mut [u8], Fail> {
    // SAFETY: the function's contract (only the address range is compared below).
    let o = unsafe { input_slice("out", out, out_len) }?;
    if inputs.iter().any(|x| overlaps(x, o)) {
        return Err(fail(SELECTJIT_ERR_OVERLAP, "out overlaps an input"));
    }
    if o.is_empty() {
        return Ok(&mut []);
    }
    // SAFETY: writable per the contract, and overlapping no input (checked); the shared
    // slice `o` is not used again.
    Ok(unsafe { std::slice::from_raw_parts_mut(out, out_len) })
}

/// # Safety
/// `p` is NULL or from `selectjit_prepare` / `selectjit_prepare_cond`, not freed.
unsafe fn prepared_ref<'a>(p: *const SelectjitPrepared) -> Result<&'a SelectjitPrepared, Fail> {
    if p.is_null() {
        return Err(fail(SELECTJIT_ERR_NULL_POINTER, "prepared call is NULL"));
    }
    // SAFETY: non-NULL, from `selectjit_prepare` (the function's contract).
    Ok(unsafe { &*p })
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
        // SAFETY: the caller's contract, for every pointer.
        unsafe {
            let prepared = &prepared_ref(p)?.prepared;
            let (c, t, e) = (
                input_slice("cond", cond, cond_len)?,
                input_slice("then", then, then_len)?,
                input_slice("else", else_, else_len)?,
            );
            let o = output_slice(out, out_len, &[c, t, e])?;
            prepared.run_bytes(c, t, e, o)?;
        }
        Ok(())
    })
}

/// An operand of `selectjit_prepare_cond`: a placeholder (no data: the buffer is given at every
/// run) or a rank-0 value, read now; and whether it is a placeholder.
///
/// # Safety
/// `r` describes memory that honours its length (the C API's contract), not written while the
/// returned operand lives.
unsafe fn prepared_operand<'a>(
    what: &str,
    dtype: DType,
    r: &Raw<'a>,
) -> Result<(Operand<'a>, bool), Fail> {
    if r.ptr.is_null() {
        if r.strides.is_some() || r.offset != 0 {
            return Err(fail(
                SELECTJIT_ERR_INVALID,
                format!(
                    "{what}: a placeholder (data NULL) is a contiguous buffer given at every run: \
                     strides must be NULL and offset 0"
                ),
            ));
        }
        return Ok((Operand::placeholder(dtype, r.shape), true));
    }
    if !r.shape.is_empty() {
        return Err(fail(
            SELECTJIT_ERR_INVALID,
            format!(
                "{what}: an operand of a prepared call is a placeholder (data NULL: its buffer is \
                 given to selectjit_prepared_run_cond) or a value (rank 0, read now), not a \
                 tensor of rank {}",
                r.shape.len()
            ),
        ));
    }
    // SAFETY: the descriptor covers its length (the function's contract); nothing writes it.
    Ok((Operand::from_bytes(dtype, unsafe { r.view() }), false))
}

/// `selectjit_prepare` for a call whose condition is a predicate (`cond->kind` not
/// `SELECTJIT_COND_MASK`): planned once for contiguous buffers of fixed shapes, its kernel bound
/// (one that fuses the predicate where the engine has one, else the static kernels). Each of
/// `cond->lhs` and `cond->rhs` (comparisons only) is either
///
/// - a placeholder: `data` NULL (`len_bytes` 0, `strides` NULL, `offset` 0) and the shape of a
///   contiguous buffer of `cond->dtype` given to `selectjit_prepared_run_cond` at every run; or
/// - a value fixed now: a rank-0 tensor with data (the BERT fill's `0` of `mask == 0`), read
///   during this call.
///
/// `negate` and the other fields as for `selectjit_select_cond`; prepared calls do not run in
/// place. Returns NULL on error (see `selectjit_last_error`).
///
/// # Safety
/// `engine` comes from `selectjit_engine_new`; `cond` points at `cond->struct_size` readable
/// bytes of a `SelectjitCond` whose tensors honour their lengths; shape pointers cover their
/// ranks.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_prepare_cond(
    engine: *const SelectjitEngine,
    dtype: c_int,
    mode: c_int,
    pdpd_axis: i64,
    cond: *const SelectjitCond,
    then_shape: *const usize,
    then_rank: usize,
    else_shape: *const usize,
    else_rank: usize,
) -> *mut SelectjitPrepared {
    let mut out = std::ptr::null_mut();
    guard(|| {
        // SAFETY: the caller's contract.
        let eng = &unsafe { engine_ref(engine) }?.engine;
        let dt = dtype_of(dtype)?;
        let mode = mode_of(mode, pdpd_axis)?;
        // SAFETY: the caller's contract for `cond` and the shapes (ranks checked <= 64).
        let ((c, negate), t, e) = unsafe {
            (
                read_cond(cond)?,
                shape_of("then", then_shape, then_rank)?,
                shape_of("else", else_shape, else_rank)?,
            )
        };
        let (cond, placeholders) = match &c {
            RawCond::Mask(_) => {
                return Err(fail(
                    SELECTJIT_ERR_INVALID,
                    "selectjit_prepare_cond takes a predicate: a call with a mask is prepared \
                     with selectjit_prepare",
                ));
            }
            RawCond::Cmp(op, d, l, r) => {
                // SAFETY: the descriptors honour their lengths (the caller's contract).
                let ((lo, lp), (ro, rp)) = unsafe {
                    (
                        prepared_operand("cond lhs", *d, l)?,
                        prepared_operand("cond rhs", *d, r)?,
                    )
                };
                (Cond::cmp(*op, lo, ro), [lp, rp])
            }
            RawCond::Test(op, d, v) => {
                // SAFETY: as above.
                let (vo, vp) = unsafe { prepared_operand("cond lhs", *d, v) }?;
                (Cond::test(*op, vo), [vp, false])
            }
        };
        let cond = if negate { cond.not() } else { cond };
        let prepared = eng.prepare_cond(dt, cond, t, e, mode)?;
        out = Box::into_raw(Box::new(SelectjitPrepared {
            prepared,
            placeholders: Some(placeholders),
        }));
        Ok(())
    });
    out
}

/// Runs a call prepared by `selectjit_prepare_cond` on contiguous buffers (lengths in bytes):
/// `lhs` and `rhs` are the buffers of the condition's placeholders (`cond->lhs`,
/// `cond->rhs`), elements of `cond->dtype` holding at least their shapes' elements; NULL, 0
/// for an operand fixed as a value when prepared (and for the rhs of a test). `then`, `else`
/// and `out` hold elements of the prepared dtype. A call prepared by `selectjit_prepare` is an
/// error here (and a predicate call in `selectjit_prepared_run`). On error nothing is written.
///
/// # Safety
/// `p` comes from `selectjit_prepare_cond`; each pointer covers the length given with it;
/// `out` overlaps no input.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_prepared_run_cond(
    p: *const SelectjitPrepared,
    lhs: *const u8,
    lhs_len: usize,
    rhs: *const u8,
    rhs_len: usize,
    then: *const u8,
    then_len: usize,
    else_: *const u8,
    else_len: usize,
    out: *mut u8,
    out_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, for every pointer.
        unsafe {
            let p = prepared_ref(p)?;
            let (l, r, t, e) = (
                input_slice("lhs", lhs, lhs_len)?,
                input_slice("rhs", rhs, rhs_len)?,
                input_slice("then", then, then_len)?,
                input_slice("else", else_, else_len)?,
            );
            let o = output_slice(out, out_len, &[l, r, t, e])?;
            let mut operands: [&[u8]; 2] = [&[], &[]];
            let mut n = 0;
            // A mask call: no operand is taken, and the run says why it is no predicate call.
            let slots = p.placeholders.unwrap_or_default();
            let given = [("lhs", l, !lhs.is_null()), ("rhs", r, !rhs.is_null())];
            for ((what, buf, given), placeholder) in given.into_iter().zip(slots) {
                if placeholder {
                    operands[n] = buf;
                    n += 1;
                } else if p.placeholders.is_some() && (given || !buf.is_empty()) {
                    return Err(fail(
                        SELECTJIT_ERR_INVALID,
                        format!(
                            "{what}: the prepared condition has no placeholder there (a value \
                             fixed when prepared, or none): pass NULL, 0"
                        ),
                    ));
                }
            }
            p.prepared.run_cond_bytes(&operands[..n], t, e, o)?;
        }
        Ok(())
    })
}

/// Destroys a prepared call (NULL is ignored).
///
/// # Safety
/// `p` is NULL or from `selectjit_prepare` or `selectjit_prepare_cond`, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_prepared_free(p: *mut SelectjitPrepared) {
    // SAFETY: the caller's contract.
    unsafe { free_box(p) }
}

/// Fills `*out` with the engine's counters. The caller sets `out->struct_size` (at least the
/// first version's size, at most `SELECTJIT_STRUCT_SIZE_MAX`); the library writes each counter
/// that fits in it, zero past its own struct (counters of a newer header this library lacks),
/// and neither `struct_size` nor `reserved`. On error nothing is written.
///
/// # Safety
/// `engine` comes from `selectjit_engine_new`; `out` is NULL or points at `out->struct_size`
/// writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_engine_stats(
    engine: *const SelectjitEngine,
    out: *mut SelectjitStats,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let eng = &unsafe { engine_ref(engine) }?.engine;
        if out.is_null() {
            return Err(fail(SELECTJIT_ERR_NULL_POINTER, "stats is NULL"));
        }
        // SAFETY: non-NULL; the struct starts with its `uint32_t struct_size`.
        let size = unsafe { out.cast::<u32>().read_unaligned() };
        check_size("stats", size, SELECTJIT_STATS_SIZE_V1)?;
        let fields = eng.stats().fields();
        let base = out.cast::<u8>();
        let mut end = STATS_HEADER;
        for (_, v) in &fields {
            if end + 8 > size as usize {
                break;
            }
            // SAFETY: inside the `struct_size` writable bytes the caller vouches for.
            unsafe { base.add(end).cast::<u64>().write_unaligned(*v) };
            end += 8;
        }
        if end < size as usize {
            // SAFETY: as above; counters this library does not have read 0.
            unsafe { base.add(end).write_bytes(0, size as usize - end) };
        }
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
        SELECTJIT_ERR_STRUCT_SIZE => b"struct size\0",
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

    #[test]
    fn op_and_tier_codes_follow_the_rust_order() {
        let cmp = [
            (SELECTJIT_CMP_EQ, CmpOp::Eq),
            (SELECTJIT_CMP_NE, CmpOp::Ne),
            (SELECTJIT_CMP_LT, CmpOp::Lt),
            (SELECTJIT_CMP_LE, CmpOp::Le),
            (SELECTJIT_CMP_GT, CmpOp::Gt),
            (SELECTJIT_CMP_GE, CmpOp::Ge),
        ];
        for (c, op) in cmp {
            assert_eq!(CmpOp::ALL[c as usize], op);
        }
        let tests = [
            (SELECTJIT_COND_ISNAN, TestOp::IsNan),
            (SELECTJIT_COND_ISINF, TestOp::IsInf),
            (SELECTJIT_COND_ISFINITE, TestOp::IsFinite),
        ];
        for (k, op) in tests {
            assert_eq!(TestOp::ALL[(k - SELECTJIT_COND_ISNAN) as usize], op);
        }
        let tiers = [
            (SELECTJIT_TIER_AUTO, Tier::Auto),
            (SELECTJIT_TIER_CRANELIFT, Tier::Cranelift),
            (SELECTJIT_TIER_AVX2, Tier::Avx2),
            (SELECTJIT_TIER_AVX512, Tier::Avx512),
        ];
        for (c, t) in tiers {
            assert_eq!(Tier::ALL[(c - 1) as usize], t);
        }
    }

    /// The stats struct is `struct_size`, `reserved` and one `uint64_t` per entry of
    /// `CacheStats::fields()` (its names against the header: `tests/c_api.rs`), filled by index.
    #[test]
    fn stats_struct_has_one_u64_per_field() {
        let n = Engine::new().stats().fields().len();
        assert_eq!(std::mem::size_of::<SelectjitStats>(), STATS_HEADER + 8 * n);
        assert_eq!(std::mem::offset_of!(SelectjitStats, capacity), STATS_HEADER);
        assert_eq!(
            std::mem::offset_of!(SelectjitStats, blocked_runs),
            STATS_HEADER + 8 * (n - 1)
        );
    }
    /// Hostile and ordinary predicate calls through the C entry points, generated: codes in and
    /// out of range, `struct_size` too small, too large or with a set unknown tail, short
    /// buffers, broadcast operands, scalars, negation, in place with the compared operand the
    /// output. No call panics; a failed call leaves the output as it was; the JIT and static
    /// engines agree with the interpreter bytewise, on the status too.
    #[test]
    fn hostile_and_differential_predicate_calls() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        #[derive(Debug, Clone)]
        struct Case {
            kind: u32,
            op: u32,
            cond_dtype: i32,
            negate: bool,
            size_delta: i64,
            shape: Vec<usize>,
            /// Per operand (lhs, rhs, then, else): which dims of `shape` it keeps (others 1)
            /// and how many leading dims it drops.
            keep: [(u8, usize); 4],
            select_f32: bool,
            /// 0 none, 1 out is then, 2 out is then and lhs is out, 3 out is else.
            in_place: u8,
            short: [usize; 4],
            bytes: Vec<u8>,
        }
        let dims = proptest::collection::vec(1usize..4, 0..4);
        let case = (
            (
                prop_oneof![8 => 1u32..5, 1 => Just(0u32), 1 => 5u32..9],
                0u32..8,
            ),
            prop_oneof![
                6 => prop_oneof![Just(SELECTJIT_DTYPE_F32), Just(SELECTJIT_DTYPE_I32),
                                 Just(SELECTJIT_DTYPE_U8), Just(SELECTJIT_DTYPE_F64)],
                1 => -3i32..20
            ],
            any::<bool>(),
            prop_oneof![8 => Just(0i64), 1 => -16i64..16, 1 => Just(5000i64)],
            dims,
            proptest::array::uniform4((any::<u8>(), 0usize..3)),
            any::<bool>(),
            0u8..4,
            proptest::array::uniform4(prop_oneof![6 => Just(0usize), 1 => 1usize..9]),
            proptest::collection::vec(any::<u8>(), 512),
        )
            .prop_map(
                |(
                    (kind, op),
                    cond_dtype,
                    negate,
                    size_delta,
                    shape,
                    keep,
                    f32_,
                    ip,
                    short,
                    bytes,
                )| {
                    Case {
                        kind,
                        op,
                        cond_dtype,
                        negate,
                        size_delta,
                        shape,
                        keep,
                        select_f32: f32_,
                        in_place: ip,
                        short,
                        bytes,
                    }
                },
            );

        fn engine_c(backend: i32) -> *mut SelectjitEngine {
            let o = SelectjitOptions {
                struct_size: std::mem::size_of::<SelectjitOptions>() as u32,
                backend,
                threads: 1,
                cache_capacity: 8,
                ..SelectjitOptions::zeroed()
            };
            let mut e = std::ptr::null_mut();
            // SAFETY: valid options and out pointer.
            assert_eq!(unsafe { selectjit_engine_new(&o, &mut e) }, SELECTJIT_OK);
            e
        }

        /// Runs the case on `engine`: (status, output bytes, output bytes before).
        fn run(engine: *const SelectjitEngine, c: &Case) -> (c_int, Vec<u8>, Vec<u8>) {
            let sel_w = if c.select_f32 { 4 } else { 2 };
            let cond_w = match c.cond_dtype {
                SELECTJIT_DTYPE_U8 => 1,
                SELECTJIT_DTYPE_F64 => 8,
                _ => 4,
            };
            let shape_of = |(mask, drop): (u8, usize)| -> Vec<usize> {
                let start = drop.min(c.shape.len());
                c.shape[start..]
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| if mask >> i & 1 == 1 { d } else { 1 })
                    .collect()
            };
            let mut shapes = [
                shape_of(c.keep[0]),
                shape_of(c.keep[1]),
                c.shape.clone(),
                shape_of(c.keep[3]),
            ];
            let out_shape = c.shape.clone();
            if c.in_place == 3 {
                shapes[3] = c.shape.clone();
            }
            let widths = [cond_w, cond_w, sel_w, sel_w];
            let bufs: Vec<Vec<u8>> = (0..4)
                .map(|k| {
                    let n = shapes[k].iter().product::<usize>() * widths[k];
                    let n = n.saturating_sub(c.short[k]);
                    c.bytes
                        .iter()
                        .cycle()
                        .skip(k * 37)
                        .take(n)
                        .copied()
                        .collect()
                })
                .collect();
            let mut out = match c.in_place {
                1 | 2 => bufs[2].clone(),
                3 => bufs[3].clone(),
                _ => vec![0xa5u8; out_shape.iter().product::<usize>() * sel_w],
            };
            let before = out.clone();
            let t = |k: usize| SelectjitTensor {
                data: bufs[k].as_ptr(),
                len_bytes: bufs[k].len(),
                shape: shapes[k].as_ptr(),
                rank: shapes[k].len(),
                strides: std::ptr::null(),
                offset: 0,
            };
            let o = SelectjitTensorMut {
                data: out.as_mut_ptr(),
                len_bytes: out.len(),
                shape: out_shape.as_ptr(),
                rank: out_shape.len(),
                strides: std::ptr::null(),
                offset: 0,
            };
            let as_in = SelectjitTensor {
                data: o.data,
                len_bytes: o.len_bytes,
                shape: o.shape,
                rank: o.rank,
                strides: o.strides,
                offset: 0,
            };
            let (then, else_) = match c.in_place {
                1 | 2 => (as_in_copy(&as_in), t(3)),
                3 => (t(2), as_in_copy(&as_in)),
                _ => (t(2), t(3)),
            };
            let lhs = if c.in_place == 2 {
                as_in_copy(&as_in)
            } else {
                t(0)
            };
            let cond_dtype = if c.in_place == 2 {
                if c.select_f32 {
                    SELECTJIT_DTYPE_F32
                } else {
                    SELECTJIT_DTYPE_I16
                }
            } else {
                c.cond_dtype
            };
            // A SelectjitCond followed by 16 more bytes (a newer header's struct).
            #[repr(C)]
            struct Bigger {
                cond: SelectjitCond,
                tail: [u8; 16],
            }
            let mut b = Bigger {
                cond: SelectjitCond {
                    struct_size: 0,
                    kind: c.kind,
                    op: c.op,
                    dtype: cond_dtype,
                    negate: c.negate as u32,
                    reserved: 0,
                    lhs,
                    rhs: t(1),
                },
                tail: [0; 16],
            };
            let size = std::mem::size_of::<SelectjitCond>() as i64 + c.size_delta;
            b.cond.struct_size = size.clamp(0, u32::MAX as i64) as u32;
            if c.size_delta > 0 && c.size_delta <= 16 && c.bytes[0] & 1 == 1 {
                b.tail[(c.size_delta - 1) as usize] = 1;
            }
            let dtype = if c.select_f32 {
                SELECTJIT_DTYPE_F32
            } else {
                SELECTJIT_DTYPE_I16
            };
            // SAFETY: every descriptor covers its buffer (lengths at most the Vec's); the
            // struct is followed by its 16-byte tail, so a struct_size up to that is readable,
            // and larger ones are refused before any read.
            let st = unsafe {
                selectjit_select_cond(
                    engine,
                    dtype,
                    SELECTJIT_MODE_NUMPY,
                    -1,
                    &b.cond,
                    &then,
                    &else_,
                    &o,
                )
            };
            (st, out, before)
        }
        fn as_in_copy(t: &SelectjitTensor) -> SelectjitTensor {
            SelectjitTensor { ..*t }
        }

        let engines = [
            engine_c(SELECTJIT_BACKEND_JIT),
            engine_c(SELECTJIT_BACKEND_STATIC),
            engine_c(SELECTJIT_BACKEND_INTERP),
        ];
        let mut runner = TestRunner::new(Config {
            cases: 384,
            failure_persistence: None,
            ..Config::default()
        });
        let ok_calls = std::cell::Cell::new(0usize);
        runner
            .run(&case, |c| {
                let (want_st, want, before) = run(engines[2], &c);
                prop_assert_ne!(want_st, SELECTJIT_ERR_PANIC, "{}", last_error());
                if want_st != SELECTJIT_OK {
                    prop_assert_eq!(&want, &before, "output written on error");
                } else {
                    ok_calls.set(ok_calls.get() + 1);
                }
                for &e in &engines[..2] {
                    let (st, got, before) = run(e, &c);
                    prop_assert_eq!(st, want_st, "{}", last_error());
                    if st == SELECTJIT_OK {
                        prop_assert_eq!(&got, &want);
                    } else {
                        prop_assert_eq!(&got, &before, "output written on error");
                    }
                }
                Ok(())
            })
            .unwrap();
        // The generator reaches the successful paths too, not only the errors.
        let ok_calls = ok_calls.get();
        assert!(ok_calls >= 384 / 8, "only {ok_calls} successful calls");
        for e in engines {
            // SAFETY: from selectjit_engine_new, freed once.
            unsafe { selectjit_engine_free(e) };
        }
    }

    fn last_error() -> String {
        // SAFETY: a NUL-terminated string owned by this thread.
        unsafe { std::ffi::CStr::from_ptr(selectjit_last_error()) }
            .to_string_lossy()
            .into_owned()
    }
}

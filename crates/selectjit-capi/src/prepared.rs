//! `SelectjitPrepared`: a call planned once for contiguous buffers of fixed shapes
//! (`selectjit_prepare`, `selectjit_prepare_cond`), run on byte buffers
//! (`selectjit_prepared_run`, `selectjit_prepared_run_cond`) and destroyed by
//! `selectjit_prepared_free`.

use std::ffi::c_int;

use selectjit_core::{Cond, DType, Operand, Prepared};

use crate::cond::{RawCond, SelectjitCond, read_cond};
use crate::engine::{SelectjitEngine, engine_ref};
use crate::error::{
    Fail, SELECTJIT_ERR_INVALID, SELECTJIT_ERR_NULL_POINTER, SELECTJIT_ERR_OVERLAP, fail, free_box,
    guard,
};
use crate::select::mode_of;
use crate::tensor::{Raw, dtype_of, shape_of, shapes3};

/// A prepared call (opaque).
pub struct SelectjitPrepared {
    prepared: Prepared,
    /// `None` for a mask call; for a predicate call, whether the condition's lhs and rhs are
    /// placeholders (their buffers given to `selectjit_prepared_run_cond`) rather than values
    /// fixed when prepared (or absent).
    placeholders: Option<[bool; 2]>,
}

fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let (a0, a1) = (a.as_ptr() as usize, a.as_ptr() as usize + a.len());
    let (b0, b1) = (b.as_ptr() as usize, b.as_ptr() as usize + b.len());
    !a.is_empty() && !b.is_empty() && a0 < b1 && b0 < a1
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
        // SAFETY: `engine` is NULL or a live engine from `selectjit_engine_new` (the caller's
        // contract); `engine_ref` checks NULL.
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
        // SAFETY: each pointer covers the length given with it (the caller's contract);
        // `prepared_ref` and `input_slice` check NULLs, `output_slice` that `out` overlaps no
        // input.
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
        // SAFETY: `engine` is NULL or a live engine from `selectjit_engine_new` (the caller's
        // contract); `engine_ref` checks NULL.
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
            RawCond::Bitmap(..) => {
                return Err(fail(
                    SELECTJIT_ERR_INVALID,
                    "selectjit_prepare_cond takes a predicate: a bitmap condition runs in \
                     selectjit_select_cond and selectjit_select_n",
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
                // SAFETY: the descriptor honours its lengths (the caller's contract).
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
        // SAFETY: each pointer covers the length given with it (the caller's contract);
        // `prepared_ref` and `input_slice` check NULLs, `output_slice` that `out` overlaps no
        // input.
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
    // SAFETY: `p` is NULL or from `selectjit_prepare` / `selectjit_prepare_cond`, not freed
    // before (the caller's contract); `free_box` ignores NULL.
    unsafe { free_box(p) }
}

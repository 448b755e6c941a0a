//! The select calls: `selectjit_select` (a mask), `selectjit_select_cond` (a
//! `SelectjitCond`) and `selectjit_output_shape`, with the broadcast mode codes.

use std::ffi::c_int;

use selectjit_core::{Broadcast, Cond, DType, Engine, InPlace, Operand};

use crate::cond::{RawCond, SelectjitCond, bitmap_cond, read_cond};
use crate::engine::{SelectjitEngine, engine_ref};
use crate::error::{
    Fail, SELECTJIT_ERR_DTYPE, SELECTJIT_ERR_INVALID, SELECTJIT_ERR_NULL_POINTER,
    SELECTJIT_ERR_OVERLAP, fail, guard,
};
use crate::tensor::{
    Raw, SelectjitTensor, SelectjitTensorMut, dtype_of, overlaps_bytes, raw, raw_mut, shapes3,
};

/// Broadcast mode: numpy (all three inputs broadcast to each other; ONNX Where).
pub const SELECTJIT_MODE_NUMPY: c_int = 0;
/// Broadcast mode: two-step (then/else to each other, cond one way into the result).
pub const SELECTJIT_MODE_TWO_STEP: c_int = 1;
/// Broadcast mode: none (identical shapes).
pub const SELECTJIT_MODE_NONE: c_int = 2;
/// Broadcast mode: pdpd (output is then's shape; else and cond one way at `pdpd_axis`).
pub const SELECTJIT_MODE_PDPD: c_int = 3;

pub(crate) fn mode_of(code: c_int, axis: i64) -> Result<Broadcast, Fail> {
    Ok(match code {
        SELECTJIT_MODE_NUMPY => Broadcast::Numpy,
        SELECTJIT_MODE_TWO_STEP => Broadcast::TwoStep,
        SELECTJIT_MODE_NONE => Broadcast::Exact,
        SELECTJIT_MODE_PDPD => Broadcast::Pdpd { axis },
        _ => {
            return Err(fail(
                SELECTJIT_ERR_INVALID,
                format!("unknown broadcast mode {code}"),
            ));
        }
    })
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
        RawCond::Bitmap(b, off, valid) => {
            if b.overlaps(&o) || valid.is_some_and(|(v, _)| overlaps_bytes(v, &o)) {
                return Err(fail(SELECTJIT_ERR_OVERLAP, "out overlaps cond"));
            }
            // SAFETY: as for `operand`: no overlap with the output (checked).
            unsafe { bitmap_cond(b, *off, *valid) }?
        }
    };
    let cond = if negate { cond.not() } else { cond };
    // SAFETY: the descriptors cover their lengths (contract); the output overlaps no
    // input that gets a shared view (checked above): in place, the aliased input is reached
    // only through the output's `&mut` view.
    unsafe {
        if in_then {
            eng.select_in_place_bytes(dt, cond, o.view_mut(), InPlace::Then, e.view(), mode)?;
        } else if in_else {
            eng.select_in_place_bytes(dt, cond, o.view_mut(), InPlace::Else, t.view(), mode)?;
        } else {
            eng.select_bytes(dt, cond, t.view(), e.view(), o.view_mut(), mode)?;
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
        // SAFETY: `engine` is NULL or a live engine from `selectjit_engine_new` (the caller's
        // contract); `engine_ref` checks NULL.
        let eng = unsafe { engine_ref(engine) }?;
        let dt = dtype_of(dtype)?;
        let mode = mode_of(mode, pdpd_axis)?;
        // SAFETY: each descriptor's pointers honour its lengths (the caller's contract); `raw`
        // and `raw_mut` check NULLs and ranks before reading.
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
        // SAFETY: `engine` is NULL or a live engine from `selectjit_engine_new` (the caller's
        // contract); `engine_ref` checks NULL.
        let eng = unsafe { engine_ref(engine) }?;
        let dt = dtype_of(dtype)?;
        let mode = mode_of(mode, pdpd_axis)?;
        // SAFETY: each descriptor's pointers honour its lengths (the caller's contract); the
        // readers check NULLs, ranks and `struct_size` before reading.
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
        // SAFETY: `out_rank` is non-NULL (checked above) and writable (the caller's contract).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{
        SELECTJIT_BACKEND_INTERP, SELECTJIT_BACKEND_JIT, SELECTJIT_BACKEND_STATIC,
        SelectjitOptions, selectjit_engine_free, selectjit_engine_new,
    };
    use crate::error::{SELECTJIT_ERR_PANIC, SELECTJIT_OK, selectjit_last_error};
    use crate::tensor::{
        SELECTJIT_DTYPE_F32, SELECTJIT_DTYPE_F64, SELECTJIT_DTYPE_I16, SELECTJIT_DTYPE_I32,
        SELECTJIT_DTYPE_U8,
    };

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
                    bit_offset: 0,
                    validity: std::ptr::null(),
                    validity_len_bytes: 0,
                    validity_offset: 0,
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

//! `selectjit_select_n`: the n-way select (the first true condition wins), every condition a
//! `SelectjitCond`.

use std::ffi::c_int;

use selectjit_core::{Choice, Cond, DType, Operand};

use crate::cond::{RawCond, SelectjitCond, bitmap_cond, read_cond};
use crate::engine::{SelectjitEngine, engine_ref};
use crate::error::{
    Fail, SELECTJIT_ERR_DTYPE, SELECTJIT_ERR_INVALID, SELECTJIT_ERR_NULL_POINTER,
    SELECTJIT_ERR_OVERLAP, fail, guard,
};
use crate::select::mode_of;
use crate::tensor::{
    Raw, SelectjitTensor, SelectjitTensorMut, dtype_of, overlaps_bytes, raw, raw_mut,
};

/// `out = conds[0] ? values[0] : conds[1] ? values[1] : ... : default`, the first true
/// condition winning (numpy.select, SQL `CASE WHEN`): `n` conditions and `n` values (arrays of
/// `n` pointers), `n >= 1`. Each condition is a mask or a predicate as for
/// `selectjit_select_cond`; every condition operand, value and the default broadcast together
/// under `mode` (`SELECTJIT_MODE_NUMPY`, or `SELECTJIT_MODE_NONE` when all shapes are equal)
/// into the output's shape. A value, the default or a predicate operand may be exactly the
/// output (the same descriptor fields; a predicate operand then of the select's dtype): it is
/// read as it holds on entry. Any other overlap with the output is `SELECTJIT_ERR_OVERLAP`.
/// On error nothing is written.
///
/// # Safety
/// `conds` and `values` are NULL or point at `n` pointers each, every one NULL or pointing at a
/// valid `SelectjitCond` / `SelectjitTensor` whose pointers honour their lengths; `default_`
/// and `out` as for `selectjit_select`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_select_n(
    engine: *const SelectjitEngine,
    dtype: c_int,
    mode: c_int,
    n: usize,
    conds: *const *const SelectjitCond,
    values: *const *const SelectjitTensor,
    default_: *const SelectjitTensor,
    out: *const SelectjitTensorMut,
) -> c_int {
    guard(|| {
        // SAFETY: `engine` is NULL or a live engine (the caller's contract); checked for NULL.
        let eng = unsafe { engine_ref(engine) }?;
        let dt = dtype_of(dtype)?;
        let mode = mode_of(mode, -1)?;
        if n == 0 {
            return Err(fail(
                SELECTJIT_ERR_INVALID,
                "an n-way select needs at least one condition (n is 0)",
            ));
        }
        if conds.is_null() || values.is_null() {
            return Err(fail(SELECTJIT_ERR_NULL_POINTER, "conds or values is NULL"));
        }
        // SAFETY: non-NULL (checked), and `n` pointers long (the caller's contract).
        let (cp, vp) = unsafe {
            (
                std::slice::from_raw_parts(conds, n),
                std::slice::from_raw_parts(values, n),
            )
        };
        let mut rc = Vec::with_capacity(n);
        let mut rv = Vec::with_capacity(n);
        for (i, (&c, &v)) in cp.iter().zip(vp).enumerate() {
            // SAFETY: each pointer is NULL or a valid descriptor (the caller's contract); the
            // readers check NULLs, sizes and ranks before reading.
            let (c, v) = unsafe { (read_cond(c), raw(&format!("value {}", i + 1), v)) };
            rc.push(c.map_err(|Fail(k, m)| Fail(k, format!("condition {}: {m}", i + 1)))?);
            rv.push(v?);
        }
        // SAFETY: as above.
        let (d, o) = unsafe { (raw("default", default_)?, raw_mut("out", out)?) };
        run(&eng.engine, dt, mode, &rc, &rv, d, o)
    })
}

/// Runs a checked n-way call: rejects overlaps other than an operand exactly the output.
fn run<'a>(
    eng: &selectjit_core::Engine,
    dt: DType,
    mode: selectjit_core::Broadcast,
    conds: &[(RawCond<'a>, bool)],
    values: &[Raw<'a>],
    default: Raw<'a>,
    o: Raw<'a>,
) -> Result<(), Fail> {
    let operand = |what: String, dtype: DType, r: &Raw<'a>| -> Result<Operand<'a>, Fail> {
        if r.same(&o) {
            if dtype != dt {
                return Err(fail(
                    SELECTJIT_ERR_DTYPE,
                    format!("{what} is the output but its dtype {dtype} is not the select's {dt}"),
                ));
            }
            return Ok(Operand::in_place());
        }
        if r.overlaps(&o) {
            return Err(fail(SELECTJIT_ERR_OVERLAP, format!("out overlaps {what}")));
        }
        // SAFETY: the descriptor covers its length (contract) and overlaps the output, the
        // only memory viewed mutably, nowhere (checked above).
        Ok(Operand::from_bytes(dtype, unsafe { r.view() }))
    };
    let value = |what: String, r: &Raw<'a>| -> Result<Choice<'a, u8>, Fail> {
        if r.same(&o) {
            return Ok(Choice::Out);
        }
        if r.overlaps(&o) {
            return Err(fail(SELECTJIT_ERR_OVERLAP, format!("out overlaps {what}")));
        }
        // SAFETY: as for `operand`.
        Ok(Choice::Tensor(unsafe { r.view() }))
    };
    let mut cs: Vec<Cond<'a>> = Vec::with_capacity(conds.len());
    for (i, (c, negate)) in conds.iter().enumerate() {
        let what = |s: &str| format!("condition {} {s}", i + 1);
        let c = match c {
            RawCond::Mask(m) => {
                if m.overlaps(&o) {
                    return Err(fail(
                        SELECTJIT_ERR_OVERLAP,
                        format!("out overlaps {}", what("mask")),
                    ));
                }
                // SAFETY: as for `operand`: no overlap with the output (checked).
                Cond::mask(unsafe { m.view() })
            }
            RawCond::Cmp(op, d, l, r) => Cond::cmp(
                *op,
                operand(what("lhs"), *d, l)?,
                operand(what("rhs"), *d, r)?,
            ),
            RawCond::Test(op, d, v) => Cond::test(*op, operand(what("lhs"), *d, v)?),
            RawCond::Bitmap(b, off, valid) => {
                if b.overlaps(&o) || valid.is_some_and(|(v, _)| overlaps_bytes(v, &o)) {
                    return Err(fail(
                        SELECTJIT_ERR_OVERLAP,
                        format!("out overlaps {}", what("bitmap")),
                    ));
                }
                // SAFETY: as for `operand`: no overlap with the output (checked).
                unsafe { bitmap_cond(b, *off, *valid) }?
            }
        };
        cs.push(if *negate { c.not() } else { c });
    }
    let vs = values
        .iter()
        .enumerate()
        .map(|(i, v)| value(format!("value {}", i + 1), v))
        .collect::<Result<Vec<_>, _>>()?;
    let d = value("default".to_string(), &default)?;
    // SAFETY: the output's descriptor covers its length (contract); no input viewed shared
    // overlaps it (checked above): operands that are the output are read through it.
    let out = unsafe { o.view_mut() };
    eng.select_n_bytes(dt, &cs, &vs, d, out, mode)?;
    Ok(())
}

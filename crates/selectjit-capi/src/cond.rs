//! `SelectjitCond`: a mask or a predicate (the condition kind and comparison codes), read into a
//! [`RawCond`] whose tensors are not yet viewed.

use selectjit_core::bits::Bitmap;
use selectjit_core::{CmpOp, Cond, DType, TestOp};

use crate::error::{Fail, SELECTJIT_ERR_INVALID, fail};
use crate::struct_size::{input_size, read_fields};
use crate::tensor::{Raw, SelectjitTensor, dtype_of, raw};

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
/// Condition kind: a bitmap in `lhs` (Arrow's bit-packed booleans): `lhs.data` and
/// `lhs.len_bytes` are the bytes, `lhs.shape` the condition's shape (one bit per element in
/// row-major order, least significant bit first, from bit `bit_offset`), `lhs.strides` NULL and
/// `lhs.offset` 0. `validity`, when not NULL, is the condition's validity bitmap (1 = valid; a
/// null condition is false). Needs the second version of the struct (with `bit_offset`).
pub const SELECTJIT_COND_BITMAP: u32 = 5;

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
    /// `SELECTJIT_COND_BITMAP`: the bit of `lhs.data` that holds element 0 (second version).
    pub bit_offset: usize,
    /// `SELECTJIT_COND_BITMAP`: the condition's validity bitmap, or NULL for none.
    pub validity: *const u8,
    /// The length of `validity` in bytes.
    pub validity_len_bytes: usize,
    /// The bit of `validity` that holds element 0's validity.
    pub validity_offset: usize,
}

/// The first version's `sizeof(SelectjitCond)` (it ends with `rhs`; it holds pointers, so it
/// depends on the target).
const COND_SIZE_V1: usize =
    std::mem::offset_of!(SelectjitCond, rhs) + std::mem::size_of::<SelectjitTensor>();

/// The second version's `sizeof(SelectjitCond)` (it ends with `validity_offset`).
const COND_SIZE_V2: usize = std::mem::size_of::<SelectjitCond>();

/// A condition read from C, its tensors not yet viewed.
pub(crate) enum RawCond<'a> {
    Mask(Raw<'a>),
    /// The bytes and shape, the bit offset, and the validity's bytes and bit offset.
    Bitmap(Raw<'a>, usize, Option<(&'a [u8], usize)>),
    Cmp(CmpOp, DType, Raw<'a>, Raw<'a>),
    Test(TestOp, DType, Raw<'a>),
}

/// Reads a `SelectjitCond`: its negation and its condition.
///
/// # Safety
/// `c` is NULL or points at `c->struct_size` readable bytes of a `SelectjitCond` whose
/// tensors honour their lengths.
pub(crate) unsafe fn read_cond<'a>(c: *const SelectjitCond) -> Result<(RawCond<'a>, bool), Fail> {
    // SAFETY: `c` is NULL or covers `struct_size` readable bytes (the function's contract);
    // `input_size` checks NULL and the size.
    let size = unsafe { input_size("cond", c, COND_SIZE_V1 as u32) }?;
    let mut v2 = SelectjitCond {
        struct_size: 0,
        kind: 0,
        op: 0,
        dtype: 0,
        negate: 0,
        reserved: 0,
        lhs: SelectjitTensor::empty(),
        rhs: SelectjitTensor::empty(),
        bit_offset: 0,
        validity: std::ptr::null(),
        validity_len_bytes: 0,
        validity_offset: 0,
    };
    read_fields!(
        SelectjitCond,
        c,
        size,
        v2,
        [
            struct_size,
            kind,
            op,
            dtype,
            negate,
            reserved,
            lhs,
            rhs,
            bit_offset,
            validity,
            validity_len_bytes,
            validity_offset,
        ]
    );
    let c = &v2;
    if c.reserved != 0 {
        return Err(fail(SELECTJIT_ERR_INVALID, "cond: reserved is not 0"));
    }
    let pred_dtype = || dtype_of(c.dtype).map_err(|Fail(code, m)| Fail(code, format!("cond: {m}")));
    let cond = match c.kind {
        // SAFETY: `lhs` honours its lengths (the function's contract); `raw` checks its NULLs
        // and rank before reading.
        SELECTJIT_COND_MASK => RawCond::Mask(unsafe { raw("cond", &c.lhs) }?),
        SELECTJIT_COND_BITMAP => {
            if size < COND_SIZE_V2 {
                return Err(fail(
                    SELECTJIT_ERR_INVALID,
                    "cond: a bitmap needs the struct's second version (with bit_offset)",
                ));
            }
            // SAFETY: `lhs` honours its lengths (the function's contract); `raw` checks its
            // NULLs and rank before reading.
            let bits = unsafe { raw("cond", &c.lhs) }?;
            if bits.strides.is_some() || bits.offset != 0 {
                return Err(fail(
                    SELECTJIT_ERR_INVALID,
                    "cond: a bitmap has no strides and offset 0 (its bit offset is bit_offset)",
                ));
            }
            let valid = if c.validity.is_null() {
                None
            } else {
                // SAFETY: `validity` covers `validity_len_bytes` readable bytes (the
                // function's contract), non-NULL (checked).
                let v = unsafe { std::slice::from_raw_parts(c.validity, c.validity_len_bytes) };
                Some((v, c.validity_offset))
            };
            RawCond::Bitmap(bits, c.bit_offset, valid)
        }
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
            // SAFETY: `lhs` and `rhs` honour their lengths (the function's contract); `raw`
            // checks their NULLs and ranks before reading.
            let (l, r) = unsafe { (raw("cond lhs", &c.lhs)?, raw("cond rhs", &c.rhs)?) };
            RawCond::Cmp(op, dt, l, r)
        }
        k @ (SELECTJIT_COND_ISNAN | SELECTJIT_COND_ISINF | SELECTJIT_COND_ISFINITE) => {
            let op = TestOp::ALL[(k - SELECTJIT_COND_ISNAN) as usize];
            let dt = pred_dtype()?;
            // SAFETY: `lhs` honours its lengths (the function's contract); `raw` checks its
            // NULLs and rank before reading.
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

/// The condition of a bitmap read by [`read_cond`], over `r`'s bytes and shape.
///
/// # Safety
/// `r` covers its length (see [`Raw::view`]) and no mutable view of its memory exists.
pub(crate) unsafe fn bitmap_cond<'a>(
    r: &Raw<'a>,
    bit_offset: usize,
    valid: Option<(&'a [u8], usize)>,
) -> Result<Cond<'a>, Fail> {
    // SAFETY: the caller's contract.
    let v = unsafe { r.view() };
    let n = v
        .shape()
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| {
            fail(
                SELECTJIT_ERR_INVALID,
                "cond: the bitmap's element count overflows",
            )
        })?;
    let bits = Bitmap::new(v.data(), bit_offset, n)?;
    Ok(match valid {
        None => Cond::bitmap(bits, v.shape()),
        Some((b, o)) => Cond::bitmap_with_validity(bits, Bitmap::new(b, o, n)?, v.shape()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmp_and_test_codes_follow_the_rust_order() {
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
    }
}

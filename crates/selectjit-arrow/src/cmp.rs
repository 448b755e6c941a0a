//! `When::Cmp`: a comparison of a column with a column or a scalar, as arrow's comparison
//! kernels (`arrow_ord::cmp`) compute it, in selectjit's kernels where the type allows.

use arrow_array::{Array, BooleanArray, Datum};
use arrow_buffer::{BooleanBuffer, MutableBuffer, NullBuffer};
use arrow_data::ArrayData;
use arrow_schema::{ArrowError, DataType};
use selectjit::{Broadcast, CmpOp, Cond, DType, Operand, TensorMut, TensorRef};

use crate::compute;
use crate::fixed::{check_len, engine, fixed_bytes};

/// The dtype selectjit compares a data type as, and whether it is a float (compared through
/// its total-order key, as arrow does).
pub(crate) fn kernel_dtype(dt: &DataType) -> Option<(DType, bool)> {
    use DataType::*;
    Some(match dt {
        Int8 => (DType::I8, false),
        Int16 => (DType::I16, false),
        Int32 | Date32 | Time32(_) => (DType::I32, false),
        Int64 | Date64 | Time64(_) | Timestamp(_, _) | Duration(_) => (DType::I64, false),
        UInt8 => (DType::U8, false),
        UInt16 => (DType::U16, false),
        UInt32 => (DType::U32, false),
        UInt64 => (DType::U64, false),
        Float16 => (DType::I16, true),
        Float32 => (DType::I32, true),
        Float64 => (DType::I64, true),
        _ => return None,
    })
}

/// The total-order keys of IEEE floats of `w` bytes as signed integers of the same width
/// (Rust's `total_cmp`, which arrow's comparisons use): `x ^ (((x >> (bits-1)) as unsigned) >> 1)`.
fn total_order_keys(b: &[u8], w: usize) -> Vec<u8> {
    let mut out = vec![0u8; b.len()];
    macro_rules! keys {
        ($i:ty, $u:ty) => {
            for (o, c) in out.chunks_exact_mut(w).zip(b.chunks_exact(w)) {
                let x = <$i>::from_le_bytes(c.try_into().expect("width"));
                let k = x ^ ((((x >> (<$i>::BITS - 1)) as $u) >> 1) as $i);
                o.copy_from_slice(&k.to_le_bytes());
            }
        };
    }
    match w {
        2 => keys!(i16, u16),
        4 => keys!(i32, u32),
        _ => keys!(i64, u64),
    }
    out
}

/// Bytes 0 / 1 packed into bits, least significant first.
fn pack(bytes: &[u8]) -> MutableBuffer {
    let mut out = MutableBuffer::from_len_zeroed(bytes.len().div_ceil(8));
    let bits = out.as_slice_mut();
    let mut chunks = bytes.chunks_exact(8);
    for (o, c) in bits.iter_mut().zip(&mut chunks) {
        // Byte i (0 or 1) lands on bit 56 + i of the product.
        let v = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        *o = (v.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let last = bits.len() - 1;
        bits[last] = rest.iter().enumerate().fold(0, |a, (i, &b)| a | (b << i));
    }
    out
}

fn arrow_cmp(op: CmpOp, l: &dyn Datum, r: &dyn Datum) -> Result<BooleanArray, ArrowError> {
    use arrow_ord::cmp;
    match op {
        CmpOp::Eq => cmp::eq(l, r),
        CmpOp::Ne => cmp::neq(l, r),
        CmpOp::Lt => cmp::lt(l, r),
        CmpOp::Le => cmp::lt_eq(l, r),
        CmpOp::Gt => cmp::gt(l, r),
        CmpOp::Ge => cmp::gt_eq(l, r),
    }
}

/// The length checks of a comparison's operands (arrow's messages).
fn check(la: &dyn Array, ls: bool, ra: &dyn Array, rs: bool, len: usize) -> Result<(), ArrowError> {
    check_len(la, ls, len)?;
    check_len(ra, rs, len)
}

/// A comparison an n-way select takes as its condition as it is (`Cond::cmp` on the operands'
/// bytes, compared in the kernel row by row, no bitmap made): integers, dates, times,
/// timestamps and durations (compared as their integers, as arrow does), without a null on
/// either side. Floats are not: arrow compares them in total order, the kernels in IEEE order.
pub(crate) struct Direct {
    op: CmpOp,
    dtype: DType,
    l: (ArrayData, bool),
    r: (ArrayData, bool),
}

impl Direct {
    /// `Some` when `l OP r` over `len` rows can be a `Cond::cmp`; an error as [`predicate`]'s
    /// for operands of another length.
    pub(crate) fn of(
        op: CmpOp,
        l: &dyn Datum,
        r: &dyn Datum,
        len: usize,
    ) -> Result<Option<Direct>, ArrowError> {
        let (la, ls) = l.get();
        let (ra, rs) = r.get();
        check(la, ls, ra, rs, len)?;
        let Some((dtype, false)) = kernel_dtype(la.data_type()) else {
            return Ok(None);
        };
        if la.data_type() != ra.data_type() || la.null_count() > 0 || ra.null_count() > 0 {
            return Ok(None);
        }
        Ok(Some(Direct {
            op,
            dtype,
            l: (la.to_data(), ls),
            r: (ra.to_data(), rs),
        }))
    }

    /// The condition over rows of `shape` (`[len]`, or `[len, 1]` broadcast along a value's
    /// elements).
    pub(crate) fn cond<'a>(&'a self, shape: &'a [usize]) -> Result<Cond<'a>, ArrowError> {
        let w = self.dtype.width();
        let view = |(d, s): &'a (ArrayData, bool)| -> Result<Operand<'a>, ArrowError> {
            let b = fixed_bytes(d, w)?;
            Ok(match s {
                true => Operand::from_bytes(self.dtype, TensorRef::scalar(b)),
                false => Operand::from_bytes(self.dtype, TensorRef::new(b, shape)),
            })
        };
        Ok(Cond::cmp(self.op, view(&self.l)?, view(&self.r)?))
    }
}

/// `l OP r` over `len` rows, arrow's result: null where an operand is null.
pub(crate) fn predicate(
    op: CmpOp,
    l: &dyn Datum,
    r: &dyn Datum,
    len: usize,
) -> Result<BooleanArray, ArrowError> {
    let (la, ls) = l.get();
    let (ra, rs) = r.get();
    check(la, ls, ra, rs, len)?;
    let kd = kernel_dtype(la.data_type()).filter(|_| la.data_type() == ra.data_type());
    let Some((dtype, float)) = kd else {
        // Other types (and type errors): arrow's kernels, a scalar result spread over the rows.
        let p = arrow_cmp(op, l, r)?;
        return Ok(if ls && rs && len != 1 {
            match p.is_valid(0) {
                true => BooleanArray::new(BooleanBuffer::collect_bool(len, |_| p.value(0)), None),
                false => BooleanArray::new_null(len),
            }
        } else {
            p
        });
    };
    if (ls && la.is_null(0)) || (rs && ra.is_null(0)) {
        return Ok(BooleanArray::new_null(len));
    }
    let w = dtype.width();
    let (ld, rd) = (la.to_data(), ra.to_data());
    let (lb, rb) = (fixed_bytes(&ld, w)?, fixed_bytes(&rd, w)?);
    let (lk, rk);
    let (lb, rb) = if float {
        lk = total_order_keys(lb, w);
        rk = total_order_keys(rb, w);
        (&lk[..], &rk[..])
    } else {
        (lb, rb)
    };
    let shape = [len];
    let view = |b, s: bool| match s {
        true => Operand::from_bytes(dtype, TensorRef::scalar(b)),
        false => Operand::from_bytes(dtype, TensorRef::new(b, &shape)),
    };
    let mut pred = vec![0u8; len];
    if len > 0 {
        engine()?
            .select_bytes(
                DType::U8,
                Cond::cmp(op, view(lb, ls), view(rb, rs)),
                TensorRef::scalar(&[1]),
                TensorRef::scalar(&[0]),
                TensorMut::new(&mut pred, &shape),
                Broadcast::Numpy,
            )
            .map_err(compute)?;
    }
    let values = BooleanBuffer::new(pack(&pred).into(), 0, len);
    let side_nulls = |a: &dyn Array, s: bool| if s { None } else { a.nulls().cloned() };
    let nulls = NullBuffer::union(side_nulls(la, ls).as_ref(), side_nulls(ra, rs).as_ref());
    Ok(BooleanArray::new(
        values,
        nulls.filter(|n| n.null_count() > 0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_puts_byte_i_on_bit_i() {
        for n in [0usize, 1, 7, 8, 9, 64, 70] {
            let bytes: Vec<u8> = (0..n).map(|i| ((i * 7 + i / 3) % 3 == 0) as u8).collect();
            let p = pack(&bytes);
            for (i, &b) in bytes.iter().enumerate() {
                assert_eq!((p.as_slice()[i / 8] >> (i % 8)) & 1, b, "n {n} bit {i}");
            }
        }
    }
}

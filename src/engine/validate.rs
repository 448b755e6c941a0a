//! Validation: every operand's buffer checked against its shape, strides and offset, and the
//! broadcast inferred, before anything is read or written.

use crate::error::{Error, Result, ShapeFmt};
use crate::shape::{Broadcast, Dims, Strides, broadcast_shapes, strides_over};
use crate::tensor::{TensorRef, check_output_distinct, validate};

/// One operand's description in elements: buffer length, shape, optional strides, and the
/// index of its first element.
#[derive(Clone, Copy)]
pub(crate) struct Desc<'a> {
    pub len: usize,
    pub shape: &'a [usize],
    pub strides: Option<&'a [isize]>,
    pub offset: usize,
}

impl<'a, T> From<&TensorRef<'a, T>> for Desc<'a> {
    fn from(t: &TensorRef<'a, T>) -> Self {
        Desc {
            len: t.data().len(),
            shape: t.shape(),
            strides: t.strides(),
            offset: t.offset(),
        }
    }
}

/// A validated call: the output shape, the strides of cond, then, else and out over it, and the
/// index of each operand's element at output coordinate `[0, 0, ...]`.
pub(crate) struct Checked {
    pub out: Dims,
    pub st: [Strides; 4],
    pub off: [usize; 4],
}

/// Validates all four operands and infers the broadcast. Nothing is read before this passes.
pub(crate) fn check(
    mode: Broadcast,
    cond: Desc,
    then: Desc,
    else_: Desc,
    out: Desc,
) -> Result<Checked> {
    let v = |what, d: Desc| validate(what, d.len, d.shape, d.strides, d.offset);
    let (lc, lt, le) = (v("cond", cond)?, v("then", then)?, v("else", else_)?);
    let b = broadcast_shapes(mode, cond.shape, then.shape, else_.shape)?;
    if out.shape != b.out.as_slice() {
        return Err(Error::OutputShape {
            got: ShapeFmt(out.shape).to_string(),
            expected: ShapeFmt(&b.out).to_string(),
        });
    }
    let lo = v("output", out)?;
    check_output_distinct(out.shape, &lo.strides)?;
    Ok(Checked {
        st: [
            strides_over(cond.shape, &lc.strides, b.cond, &b.out),
            strides_over(then.shape, &lt.strides, b.then, &b.out),
            strides_over(else_.shape, &le.strides, b.else_, &b.out),
            lo.strides,
        ],
        off: [lc.offset, lt.offset, le.offset, lo.offset],
        out: b.out,
    })
}

/// The common case checked cheaply: no explicit strides (so no offset either) and one shape for
/// all four operands (a valid call in every broadcast mode) of at most `MAX_RANK` dims, whose
/// `n` elements every buffer holds. Returns `n` when it is not 0 (buffers that hold `n`
/// elements bound it, so no count or extent can overflow); `None` sends the call down the
/// general path, which reports any error. One pass, no allocation, no call: this is the cost of
/// every cache hit.
#[inline(always)]
pub(crate) fn same_contiguous(ops: &[Desc; 4]) -> Option<usize> {
    let plain = ops.iter().all(|d| d.strides.is_none() & (d.offset == 0));
    contiguous_elements(ops.map(|d| d.shape), plain, ops.map(|d| d.len))
}

/// [`same_contiguous`] of four views given as their shapes (cond, then, else, out), whether
/// none has explicit strides or an offset, and their buffers' lengths in elements.
#[inline(always)]
pub(crate) fn contiguous_elements(
    shapes: [&[usize]; 4],
    plain: bool,
    lens: [usize; 4],
) -> Option<usize> {
    let [c, t, e, o] = shapes;
    let r = o.len();
    if !plain | (r > crate::shape::MAX_RANK) | (c.len() != r) | (t.len() != r) | (e.len() != r) {
        return None;
    }
    let mut n = 1usize;
    for k in 0..r {
        let d = o[k];
        if (c[k] != d) | (t[k] != d) | (e[k] != d) {
            return None;
        }
        n = n.checked_mul(d)?;
    }
    let fits = (n != 0) & lens.iter().all(|&l| l >= n);
    fits.then_some(n)
}

/// A byte-level source operand: a buffer with its element description, or the output (in place).
pub(crate) enum Operand<'a> {
    Buf(&'a [u8], Desc<'a>),
    Out,
}

impl<'a> Operand<'a> {
    pub(crate) fn desc(&self, out: Desc<'a>) -> Desc<'a> {
        match self {
            Operand::Buf(_, d) => *d,
            Operand::Out => out,
        }
    }
}

//! Validation: every operand's buffer checked against its shape, strides and offset, and the
//! broadcast inferred, before anything is read or written.

use crate::error::{Error, Result, ShapeFmt};
use crate::plan::{ELSE, OPS, RHS, THEN};
use crate::pred::Kind;
use crate::shape::{Broadcast, Dims, Placement, Strides, broadcast_pair, infer, strides_over};
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

/// A validated call: the output shape, the strides of cond (or a predicate's lhs), then, else,
/// out and rhs over it, and the index of each operand's element at output coordinate
/// `[0, 0, ...]` (rhs: strides of 0 and index 0 unless a comparison has one).
pub(crate) struct Checked {
    pub out: Dims,
    pub st: [Strides; OPS],
    pub off: [usize; OPS],
}

impl Checked {
    /// The call with then and else traded (`swap`: a negated condition, or a canonical form's)
    /// once checked: the broadcast rules and the messages see them as the caller gave them
    /// (pdpd's output is then's shape), the kernels and the interpreter in the traded order.
    pub(crate) fn traded(mut self, swap: bool) -> Checked {
        if swap {
            self.st.swap(THEN, ELSE);
            self.off.swap(THEN, ELSE);
        }
        self
    }
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
    let b = infer(mode, cond.shape, then.shape, else_.shape)?;
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
            smallvec::smallvec![0; b.out.len()],
        ],
        off: [lc.offset, lt.offset, le.offset, lo.offset, 0],
        out: b.out,
    })
}

/// A predicate's operand in bytes: a buffer with its description in elements of the compared
/// dtype (a scalar is a buffer of one element of shape `[]`), or the in-place output.
#[derive(Clone, Copy)]
pub(crate) enum PredSrc<'a> {
    Buf(&'a [u8], Desc<'a>),
    Out,
}

/// A call's predicate: its canonical kind, its operands (rhs for comparisons only), and
/// whether the canonical form swapped them (`a > b` runs as `b < a`; errors name the operands
/// as the caller wrote them).
#[derive(Clone, Copy)]
pub(crate) struct Pred<'a> {
    pub kind: Kind,
    pub lhs: PredSrc<'a>,
    pub rhs: Option<PredSrc<'a>>,
    pub swapped: bool,
}

/// [`check`] for a call whose condition is a predicate: its operands validated, broadcast
/// against each other (numpy's rule), and the result placed as cond by `mode`. `in_place`:
/// whether the output holds then or else on entry (the only case an operand may be the output).
pub(crate) fn check_pred(
    mode: Broadcast,
    pred: &Pred<'_>,
    then: Desc,
    else_: Desc,
    out: Desc,
    in_place: bool,
) -> Result<Checked> {
    let names: [&'static str; 2] = match (pred.kind.binary(), pred.swapped) {
        (true, false) => ["lhs", "rhs"],
        (true, true) => ["rhs", "lhs"],
        (false, _) => ["operand", "rhs"],
    };
    let v = |what, d: Desc| validate(what, d.len, d.shape, d.strides, d.offset);
    // Each operand's description (the output's for the in-place buffer) and layout.
    fn desc<'d>(
        s: PredSrc<'d>,
        what: &'static str,
        out: Desc<'d>,
        in_place: bool,
    ) -> Result<(Desc<'d>, Option<crate::tensor::Layout>)> {
        match s {
            PredSrc::Buf(_, d) => {
                let l = validate(what, d.len, d.shape, d.strides, d.offset)?;
                Ok((d, Some(l)))
            }
            PredSrc::Out if in_place => Ok((out, None)),
            PredSrc::Out => Err(Error::Invalid(format!(
                "{what}: the in-place operand is only allowed in an in-place select"
            ))),
        }
    }
    let (dl, ll) = desc(pred.lhs, names[0], out, in_place)?;
    let r = match pred.rhs {
        Some(s) => Some(desc(s, names[1], out, in_place)?),
        None => None,
    };
    let (lt, le) = (v("then", then)?, v("else", else_)?);
    let pshape = match &r {
        Some((dr, _)) => broadcast_pair(names, dl.shape, dr.shape)?,
        None => {
            crate::shape::check_shape(names[0], dl.shape)?;
            dl.shape.into()
        }
    };
    let b = infer(mode, &pshape, then.shape, else_.shape)?;
    if out.shape != b.out.as_slice() {
        return Err(Error::OutputShape {
            got: ShapeFmt(out.shape).to_string(),
            expected: ShapeFmt(&b.out).to_string(),
        });
    }
    let lo = v("output", out)?;
    check_output_distinct(out.shape, &lo.strides)?;
    // An operand's strides over the output: right-aligned into the predicate's shape, which
    // lands where the mode puts cond.
    let over = |d: &Desc, l: &Option<crate::tensor::Layout>| -> (Strides, usize) {
        let Some(l) = l else {
            return (lo.strides.clone(), lo.offset); // the in-place output itself
        };
        let into_pred = Placement {
            start: pshape.len() - d.shape.len(),
            len: d.shape.len(),
        };
        let sp = strides_over(d.shape, &l.strides, into_pred, &pshape);
        (strides_over(&pshape, &sp, b.cond, &b.out), l.offset)
    };
    let (sl, ol) = over(&dl, &ll);
    let (sr, or) = match &r {
        Some((dr, lr)) => over(dr, lr),
        None => (smallvec::smallvec![0; b.out.len()], 0),
    };
    let mut st: [Strides; OPS] = [
        sl,
        strides_over(then.shape, &lt.strides, b.then, &b.out),
        strides_over(else_.shape, &le.strides, b.else_, &b.out),
        lo.strides,
        Strides::new(),
    ];
    st[RHS] = sr;
    Ok(Checked {
        st,
        off: [ol, lt.offset, le.offset, lo.offset, or],
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

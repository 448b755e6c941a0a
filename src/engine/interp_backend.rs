//! The `Interp` backend and [`select_generic`]: the reference interpreter
//! ([`crate::reference`]) on the engine's validated calls.

use super::validate::{Checked, Desc, Operand, PredSrc, check};
use crate::error::Result;
use crate::plan::{COND, OUT, RHS};
use crate::pred::{Kind, eval};
use crate::reference::{self, Src, index};
use crate::shape::Broadcast;
use crate::tensor::{TensorMut, TensorRef};

/// The condition of a call the interpreter runs: the mask's bytes, or a predicate's kind and
/// operands (rhs for comparisons).
#[derive(Clone, Copy)]
pub(crate) enum CondBytes<'a> {
    Mask(&'a [u8]),
    Pred(Kind, PredSrc<'a>, Option<PredSrc<'a>>),
}

/// Runs the interpreter on raw bytes, viewing them as `[u8; W]` elements.
pub(crate) fn interp_bytes(
    width: usize,
    c: &Checked,
    cond: CondBytes<'_>,
    then: &Operand,
    else_: &Operand,
    out: &mut [u8],
) {
    fn src<'a, const W: usize>(o: &Operand<'a>, st: &'a [isize], off: usize) -> Src<'a, [u8; W]> {
        match *o {
            Operand::Buf(b, _) => {
                let n = b.len() / W * W;
                Src::Buf((bytemuck::cast_slice(&b[..n]), st, off))
            }
            Operand::Out => Src::Out,
        }
    }
    fn go<const W: usize>(
        c: &Checked,
        cond: CondBytes<'_>,
        then: &Operand,
        else_: &Operand,
        out: &mut [u8],
    ) {
        let n = out.len() / W * W;
        let o: &mut [[u8; W]] = bytemuck::cast_slice_mut(&mut out[..n]);
        // An operand's element bytes at an output coordinate: from its buffer, or from the
        // output as it is before the coordinate is written (the in-place operand).
        let elem = |s: PredSrc<'_>, op: usize, idx: &[usize], out: &[[u8; W]], w: usize| {
            let mut v = [0u8; 16];
            match s {
                PredSrc::Buf(b, _) => {
                    let i = index(idx, &c.st[op], c.off[op]) * w;
                    v[..w].copy_from_slice(&b[i..i + w]);
                }
                PredSrc::Out => v[..W].copy_from_slice(&out[index(idx, &c.st[OUT], c.off[OUT])]),
            }
            v
        };
        let decide = |idx: &[usize], out: &[[u8; W]]| match cond {
            CondBytes::Mask(m) => m[index(idx, &c.st[COND], c.off[COND])] != 0,
            CondBytes::Pred(kind, lhs, rhs) => {
                let w = kind.operand_width();
                let l = elem(lhs, COND, idx, out, w);
                let r = rhs.map_or([0u8; 16], |r| elem(r, RHS, idx, out, w));
                eval(kind, &l, &r)
            }
        };
        reference::run(
            &c.out,
            decide,
            src::<W>(then, &c.st[1], c.off[1]),
            src::<W>(else_, &c.st[2], c.off[2]),
            (o, &c.st[3], c.off[3]),
        );
    }
    match width {
        1 => go::<1>(c, cond, then, else_, out),
        2 => go::<2>(c, cond, then, else_, out),
        4 => go::<4>(c, cond, then, else_, out),
        8 => go::<8>(c, cond, then, else_, out),
        16 => go::<16>(c, cond, then, else_, out),
        _ => unreachable!("element widths come from DType"),
    }
}

/// Select over any `Clone` element type (strings, ...) through the reference interpreter. Views
/// may have any strides and offsets, as in [`crate::Engine::select`].
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::{Broadcast, TensorMut, TensorRef, select_generic};
/// let then = ["a".to_string(), "b".to_string()];
/// let mut out = vec![String::new(); 2];
/// select_generic(
///     TensorRef::new(&[0, 1], &[2]),
///     TensorRef::new(&then, &[2]),
///     TensorRef::scalar(&["-".to_string()]),
///     TensorMut::new(&mut out, &[2]),
///     Broadcast::Numpy,
/// )?;
/// assert_eq!(out, ["-", "b"]);
/// # Ok(())
/// # }
/// ```
pub fn select_generic<T: Clone>(
    cond: TensorRef<'_, u8>,
    then: TensorRef<'_, T>,
    else_: TensorRef<'_, T>,
    out: TensorMut<'_, T>,
    mode: Broadcast,
) -> Result<()> {
    let (o, shape, strides, offset) = out.into_parts();
    let od = Desc {
        len: o.len(),
        shape,
        strides,
        offset,
    };
    let c = check(mode, (&cond).into(), (&then).into(), (&else_).into(), od)?;
    reference::run(
        &c.out,
        reference::mask((cond.data(), &c.st[0], c.off[0])),
        Src::Buf((then.data(), &c.st[1], c.off[1])),
        Src::Buf((else_.data(), &c.st[2], c.off[2])),
        (o, &c.st[3], c.off[3]),
    );
    Ok(())
}

//! The interpreter behind the `Interp` backend and [`select_generic`], on the engine's
//! validated calls.

use super::validate::{Checked, Desc, Operand, check};
use crate::error::Result;
use crate::interp::{self, Src};
use crate::shape::Broadcast;
use crate::tensor::{TensorMut, TensorRef};

/// Runs the interpreter on raw bytes, viewing them as `[u8; W]` elements.
pub(crate) fn interp_bytes(
    width: usize,
    c: &Checked,
    cond: &[u8],
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
        cond: &[u8],
        then: &Operand,
        else_: &Operand,
        out: &mut [u8],
    ) {
        let n = out.len() / W * W;
        let o: &mut [[u8; W]] = bytemuck::cast_slice_mut(&mut out[..n]);
        interp::run(
            &c.out,
            (cond, &c.st[0], c.off[0]),
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
    interp::run(
        &c.out,
        (cond.data(), &c.st[0], c.off[0]),
        Src::Buf((then.data(), &c.st[1], c.off[1])),
        Src::Buf((else_.data(), &c.st[2], c.off[2])),
        (o, &c.st[3], c.off[3]),
    );
    Ok(())
}

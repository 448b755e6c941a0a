//! The public face: validate buffers, infer the shape, and run the chosen backend.

use crate::dtype::{DType, Element};
use crate::error::{Error, Result, ShapeFmt};
use crate::interp::{self, Src};
use crate::shape::{Broadcast, Dims, Strides, broadcast_shapes, strides_over};
use crate::tensor::{TensorMut, TensorRef, check_output_distinct, validate};

/// Which implementation runs the selects of an [`Engine`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Backend {
    /// The reference interpreter (one element at a time).
    #[default]
    Interp,
}

impl Backend {
    /// Every backend, for tests and benchmarks that compare them.
    pub const ALL: &'static [Backend] = &[Backend::Interp];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Interp => "interp",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "interp" => Ok(Backend::Interp),
            _ => Err(Error::Invalid(format!(
                "unknown backend '{s}' (expected interp)"
            ))),
        }
    }
}

/// Which input an in-place select overwrites with the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlace {
    /// The output buffer holds `then` on entry: `then = cond ? then : else`.
    Then,
    /// The output buffer holds `else` on entry: `else = cond ? then : else`.
    Else,
}

/// One operand's description in elements: buffer length, shape, optional strides.
#[derive(Clone, Copy)]
struct Desc<'a> {
    len: usize,
    shape: &'a [usize],
    strides: Option<&'a [isize]>,
}

impl<'a, T> From<&TensorRef<'a, T>> for Desc<'a> {
    fn from(t: &TensorRef<'a, T>) -> Self {
        Desc {
            len: t.data().len(),
            shape: t.shape(),
            strides: t.strides(),
        }
    }
}

/// A validated call: the output shape and the strides of cond, then, else and out over it.
pub(crate) struct Checked {
    pub out: Dims,
    pub st: [Strides; 4],
}

/// Validates all four operands and infers the broadcast. Nothing is read before this passes.
fn check(mode: Broadcast, cond: Desc, then: Desc, else_: Desc, out: Desc) -> Result<Checked> {
    let sc = validate("cond", cond.len, cond.shape, cond.strides)?;
    let st = validate("then", then.len, then.shape, then.strides)?;
    let se = validate("else", else_.len, else_.shape, else_.strides)?;
    let b = broadcast_shapes(mode, cond.shape, then.shape, else_.shape)?;
    if out.shape != b.out.as_slice() {
        return Err(Error::OutputShape {
            got: ShapeFmt(out.shape).to_string(),
            expected: ShapeFmt(&b.out).to_string(),
        });
    }
    let so = validate("output", out.len, out.shape, out.strides)?;
    check_output_distinct(out.shape, &so)?;
    Ok(Checked {
        st: [
            strides_over(cond.shape, &sc, b.cond, &b.out),
            strides_over(then.shape, &st, b.then, &b.out),
            strides_over(else_.shape, &se, b.else_, &b.out),
            so,
        ],
        out: b.out,
    })
}

/// Selects with a chosen backend. Cheap to share between threads (`Send + Sync`).
#[derive(Debug, Default)]
pub struct Engine {
    backend: Backend,
}

impl Engine {
    /// An engine with the default backend.
    pub fn new() -> Engine {
        Engine::default()
    }

    /// An engine with the given backend.
    pub fn with_backend(backend: Backend) -> Engine {
        Engine { backend }
    }

    /// The backend this engine runs.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// `out = cond ? then : else` with broadcasting under `mode`. `cond` bytes: any non-zero byte
    /// is true. `out` must have the broadcast output shape. Every buffer is checked against its
    /// shape and strides before anything is read or written; on error `out` is untouched.
    pub fn select<T: Element>(
        &self,
        cond: TensorRef<'_, u8>,
        then: TensorRef<'_, T>,
        else_: TensorRef<'_, T>,
        out: TensorMut<'_, T>,
        mode: Broadcast,
    ) -> Result<()> {
        let (o, shape, strides) = out.into_parts();
        let ob: &mut [u8] = bytemuck::cast_slice_mut(o);
        self.run_bytes(
            T::DTYPE.width(),
            mode,
            cond,
            Operand::Buf(bytemuck::cast_slice(then.data()), (&then).into()),
            Operand::Buf(bytemuck::cast_slice(else_.data()), (&else_).into()),
            ob,
            shape,
            strides,
        )
    }

    /// In place: `inout` holds `then` (or `else`, per `role`) on entry and the result on return.
    /// Its shape must be the broadcast output shape.
    pub fn select_in_place<T: Element>(
        &self,
        cond: TensorRef<'_, u8>,
        inout: TensorMut<'_, T>,
        role: InPlace,
        other: TensorRef<'_, T>,
        mode: Broadcast,
    ) -> Result<()> {
        let (o, shape, strides) = inout.into_parts();
        let ob: &mut [u8] = bytemuck::cast_slice_mut(o);
        let other = Operand::Buf(bytemuck::cast_slice(other.data()), (&other).into());
        let (t, e) = match role {
            InPlace::Then => (Operand::Out, other),
            InPlace::Else => (other, Operand::Out),
        };
        self.run_bytes(T::DTYPE.width(), mode, cond, t, e, ob, shape, strides)
    }

    /// Byte-level select for a run-time `dtype`: each buffer holds raw little-endian elements of
    /// `dtype`; shapes and strides count elements. Used by the CLI and by the C ABI.
    pub fn select_dyn(
        &self,
        dtype: DType,
        cond: TensorRef<'_, u8>,
        then: TensorRef<'_, u8>,
        else_: TensorRef<'_, u8>,
        out: TensorMut<'_, u8>,
        mode: Broadcast,
    ) -> Result<()> {
        let w = dtype.width();
        fn elems<'a>(t: &TensorRef<'a, u8>, w: usize) -> Desc<'a> {
            Desc {
                len: t.data().len() / w,
                ..Desc::from(t)
            }
        }
        let (o, shape, strides) = out.into_parts();
        self.run_bytes(
            w,
            mode,
            cond,
            Operand::Buf(then.data(), elems(&then, w)),
            Operand::Buf(else_.data(), elems(&else_, w)),
            o,
            shape,
            strides,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn run_bytes(
        &self,
        width: usize,
        mode: Broadcast,
        cond: TensorRef<'_, u8>,
        then: Operand<'_>,
        else_: Operand<'_>,
        out: &mut [u8],
        out_shape: &[usize],
        out_strides: Option<&[isize]>,
    ) -> Result<()> {
        let od = Desc {
            len: out.len() / width,
            shape: out_shape,
            strides: out_strides,
        };
        let c = check(mode, (&cond).into(), then.desc(od), else_.desc(od), od)?;
        match self.backend {
            Backend::Interp => {
                interp_bytes(width, &c, cond.data(), &then, &else_, out);
            }
        }
        Ok(())
    }
}

/// A byte-level source operand: a buffer with its element description, or the output (in place).
enum Operand<'a> {
    Buf(&'a [u8], Desc<'a>),
    Out,
}

impl<'a> Operand<'a> {
    fn desc(&self, out: Desc<'a>) -> Desc<'a> {
        match self {
            Operand::Buf(_, d) => *d,
            Operand::Out => out,
        }
    }
}

/// Runs the interpreter on raw bytes, viewing them as `[u8; W]` elements.
fn interp_bytes(
    width: usize,
    c: &Checked,
    cond: &[u8],
    then: &Operand,
    else_: &Operand,
    out: &mut [u8],
) {
    fn src<'a, const W: usize>(o: &Operand<'a>, st: &'a [isize]) -> Src<'a, [u8; W]> {
        match *o {
            Operand::Buf(b, _) => {
                let n = b.len() / W * W;
                Src::Buf(bytemuck::cast_slice(&b[..n]), st)
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
            (cond, &c.st[0]),
            src::<W>(then, &c.st[1]),
            src::<W>(else_, &c.st[2]),
            (o, &c.st[3]),
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

/// Select over any `Clone` element type (strings, ...) through the reference interpreter.
pub fn select_generic<T: Clone>(
    cond: TensorRef<'_, u8>,
    then: TensorRef<'_, T>,
    else_: TensorRef<'_, T>,
    out: TensorMut<'_, T>,
    mode: Broadcast,
) -> Result<()> {
    let (o, shape, strides) = out.into_parts();
    let od = Desc {
        len: o.len(),
        shape,
        strides,
    };
    let c = check(mode, (&cond).into(), (&then).into(), (&else_).into(), od)?;
    interp::run(
        &c.out,
        (cond.data(), &c.st[0]),
        Src::Buf(then.data(), &c.st[1]),
        Src::Buf(else_.data(), &c.st[2]),
        (o, &c.st[3]),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_buffers_without_writing() {
        let e = Engine::new();
        let mut out = [7.0f32; 4];
        let r = e.select(
            TensorRef::new(&[1, 0, 1], &[2, 2]),
            TensorRef::new(&[1.0f32; 4], &[2, 2]),
            TensorRef::new(&[2.0f32; 4], &[2, 2]),
            TensorMut::new(&mut out, &[2, 2]),
            Broadcast::Numpy,
        );
        assert!(
            matches!(r, Err(Error::Layout { what: "cond", .. })),
            "{r:?}"
        );
        assert_eq!(out, [7.0; 4]);
    }

    #[test]
    fn in_place_then() {
        let e = Engine::new();
        let mut t = [1u16, 2, 3, 4];
        e.select_in_place(
            TensorRef::new(&[0, 1], &[2]),
            TensorMut::new(&mut t, &[2, 2]),
            InPlace::Then,
            TensorRef::scalar(&[9u16]),
            Broadcast::Numpy,
        )
        .unwrap();
        assert_eq!(t, [9, 2, 9, 4]);
    }

    #[test]
    fn generic_strings() {
        let t: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let e = vec!["x".to_string()];
        let mut out = vec![String::new(); 2];
        select_generic(
            TensorRef::new(&[0, 3], &[2]),
            TensorRef::new(&t, &[2]),
            TensorRef::new(&e, &[]),
            TensorMut::new(&mut out, &[2]),
            Broadcast::Numpy,
        )
        .unwrap();
        assert_eq!(out, ["x", "b"]);
    }
}

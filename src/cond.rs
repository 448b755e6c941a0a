//! The condition of a select: a mask, or a predicate computed per element inside the kernel.
//!
//! ```
//! use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
//!
//! // ReLU in one pass, with no bool temporary: out = x > 0 ? x : 0.
//! let x = [-1.5f32, 2.0, -0.0, 3.0];
//! let mut out = [9.0f32; 4];
//! let xv = TensorRef::new(&x, &[4]);
//! Engine::new().select(
//!     Cond::gt(xv, 0.0f32),
//!     xv,
//!     TensorRef::scalar(&[0.0f32]),
//!     TensorMut::new(&mut out, &[4]),
//!     Broadcast::Numpy,
//! )?;
//! assert_eq!(out, [0.0, 2.0, 0.0, 3.0]);
//! # Ok::<(), selectjit::Error>(())
//! ```

use crate::bits::Bitmap;
use crate::dtype::{DType, Element};
use crate::pred::{CmpOp, Kind, TestOp};
use crate::tensor::TensorRef;

/// One operand of a predicate: a view of elements of some dtype (which may differ from the
/// select's), a scalar held by value, the in-place buffer of an in-place select, or (for a
/// prepared call) a placeholder for a buffer given when the call runs.
///
/// Built from a typed view (`TensorRef<T>`), a value (`0.0f32`, `0i64`, ...: a rank-0 operand),
/// raw bytes with a run-time dtype ([`Operand::from_bytes`]), [`Operand::in_place`], or
/// [`Operand::placeholder`].
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    pub(crate) src: Src<'a>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Src<'a> {
    /// Elements of `dtype`: the buffer's bytes, its shape, strides and offset in elements.
    View {
        dtype: DType,
        bytes: &'a [u8],
        shape: &'a [usize],
        strides: Option<&'a [isize]>,
        offset: usize,
    },
    /// One element by value (little-endian bytes, the first `dtype.width()` of them).
    Scalar { dtype: DType, bytes: [u8; 16] },
    /// The in-place buffer (`then` or `else` of an in-place select), as it is before the call.
    InPlace,
    /// A contiguous row-major buffer of `shape` elements of `dtype`, given when a prepared call
    /// runs (no data here).
    Placeholder { dtype: DType, shape: &'a [usize] },
}

impl<'a> Operand<'a> {
    /// A view of raw little-endian elements of `dtype`: shape, strides and offset of `view`
    /// count elements of `dtype` (the byte buffer holds `len / width` of them).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, DType, Engine, Operand, TensorMut, TensorRef};
    /// // Two f32s as raw little-endian bytes (e.g. read from a file): shape [2] counts f32s.
    /// let bytes: Vec<u8> = [1.5f32, -2.0]
    ///     .iter()
    ///     .flat_map(|v| v.to_le_bytes())
    ///     .collect();
    /// let x = Operand::from_bytes(DType::F32, TensorRef::new(&bytes, &[2]));
    /// assert_eq!(x.dtype(), Some(DType::F32));
    /// let mut out = [0i32; 2]; // out = x < 0 ? 1 : 0, an i32 select on an f32 predicate
    /// Engine::new().select(
    ///     Cond::lt(x, 0.0f32),
    ///     TensorRef::scalar(&[1i32]),
    ///     TensorRef::scalar(&[0i32]),
    ///     TensorMut::new(&mut out, &[2]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [0, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_bytes(dtype: DType, view: TensorRef<'a, u8>) -> Operand<'a> {
        Operand {
            src: Src::View {
                dtype,
                bytes: view.data(),
                shape: view.shape(),
                strides: view.strides(),
                offset: view.offset(),
            },
        }
    }

    /// The buffer of an in-place select ([`crate::Engine::select_in_place`]) as it holds `then`
    /// (or `else`) on entry, with the output's shape and layout: `where(x > 0, x, 0)` with `x`
    /// overwritten. An error in a select that is not in place.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, InPlace, Operand, TensorMut, TensorRef};
    /// // ReLU overwriting x: x = x > 0 ? x : 0.
    /// let mut x = [-1.0f32, 2.0, -3.0];
    /// Engine::new().select_in_place(
    ///     Cond::gt(Operand::in_place(), 0.0f32),
    ///     TensorMut::new(&mut x, &[3]),
    ///     InPlace::Then,
    ///     TensorRef::scalar(&[0.0f32]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(x, [0.0, 2.0, 0.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn in_place() -> Operand<'static> {
        Operand { src: Src::InPlace }
    }

    /// A placeholder for a prepared call ([`crate::Engine::prepare_cond`]): a contiguous
    /// row-major buffer of `shape` elements of `dtype` (which may differ from the select's),
    /// given to [`crate::Prepared::run_cond`] each time the call runs. It has no data, so a
    /// select that runs at once ([`crate::Engine::select`], ...) refuses it.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, DType, Engine, Operand};
    /// // A BERT-style masked fill, prepared once: out = mask == 0 ? -inf : scores, with an i64
    /// // mask [2, 1, 1, 3] over f32 scores [2, 2, 3, 3].
    /// let mask = Operand::placeholder(DType::I64, &[2, 1, 1, 3]);
    /// let prepared = Engine::new().prepare_cond(
    ///     DType::F32,
    ///     Cond::eq(mask, 0i64),
    ///     &[],
    ///     &[2, 2, 3, 3],
    ///     Broadcast::Numpy,
    /// )?;
    /// let scores = [1.0f32; 36];
    /// let mut out = [0.0f32; 36];
    /// let m: [i64; 6] = [1, 1, 0, 1, 0, 0]; // the last key of batch 0 and two of batch 1 masked
    /// prepared.run_cond(&[&m], &[f32::NEG_INFINITY], &scores, &mut out)?;
    /// assert_eq!(out[..3], [1.0, 1.0, f32::NEG_INFINITY]); // batch 0, head 0, query 0
    /// assert_eq!(out[18..21], [1.0, f32::NEG_INFINITY, f32::NEG_INFINITY]); // batch 1
    /// assert_eq!(mask.dtype(), Some(DType::I64));
    /// # Ok(())
    /// # }
    /// ```
    pub fn placeholder(dtype: DType, shape: &'a [usize]) -> Operand<'a> {
        Operand {
            src: Src::Placeholder { dtype, shape },
        }
    }

    /// The dtype of a view, scalar or placeholder (`None` for [`Operand::in_place`], which has
    /// the select's).
    ///
    /// ```
    /// use selectjit::{DType, Operand, TensorRef};
    /// assert_eq!(Operand::from(1.5f64).dtype(), Some(DType::F64));
    /// assert_eq!(
    ///     Operand::from(TensorRef::new(&[1u16, 2], &[2])).dtype(),
    ///     Some(DType::U16)
    /// );
    /// assert_eq!(Operand::in_place().dtype(), None); // the select's dtype
    /// ```
    pub fn dtype(&self) -> Option<DType> {
        match self.src {
            Src::View { dtype, .. }
            | Src::Scalar { dtype, .. }
            | Src::Placeholder { dtype, .. } => Some(dtype),
            Src::InPlace => None,
        }
    }
}

impl<'a, T: Element> From<TensorRef<'a, T>> for Operand<'a> {
    fn from(t: TensorRef<'a, T>) -> Self {
        Operand {
            src: Src::View {
                dtype: T::DTYPE,
                bytes: bytemuck::cast_slice(t.data()),
                shape: t.shape(),
                strides: t.strides(),
                offset: t.offset(),
            },
        }
    }
}

impl<T: Element> From<T> for Operand<'_> {
    fn from(v: T) -> Self {
        let mut bytes = [0u8; 16];
        let b = bytemuck::bytes_of(&v);
        bytes[..b.len()].copy_from_slice(b);
        Operand {
            src: Src::Scalar {
                dtype: T::DTYPE,
                bytes,
            },
        }
    }
}

/// What decides, per element, whether a select takes `then` or `else`: a mask of bytes (any
/// non-zero byte is true), or a predicate computed in the kernel with numpy's semantics —
/// a comparison of two operands of one dtype (`==`, `!=`, `<`, `<=`, `>`, `>=`; floats as
/// IEEE values, f16 / bf16 by value, integers by their signedness, bool as 0/1, complex as
/// numpy 2), a test of one operand (`isnan`, `isinf`, `isfinite`), or the negation of either.
///
/// A predicate's operands broadcast against each other with numpy's rule; the result takes
/// `cond`'s place in the select's broadcast mode. A typed mask view converts into a `Cond`, so
/// [`crate::Engine::select`] takes either.
#[derive(Clone, Copy, Debug)]
pub struct Cond<'a> {
    pub(crate) repr: Repr<'a>,
    /// Negated: `then` and `else` trade places.
    pub(crate) not: bool,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Repr<'a> {
    Mask(TensorRef<'a, u8>),
    /// One bit per element of `shape` (row-major), and the condition's validity (a null is
    /// false).
    Bits {
        bits: Bitmap<'a>,
        valid: Option<Bitmap<'a>>,
        shape: &'a [usize],
    },
    Cmp(CmpOp, Operand<'a>, Operand<'a>),
    Test(TestOp, Operand<'a>),
}

impl<'a> From<TensorRef<'a, u8>> for Cond<'a> {
    fn from(m: TensorRef<'a, u8>) -> Self {
        Cond::mask(m)
    }
}

impl<'a> Cond<'a> {
    /// A mask: one byte per element, any non-zero byte true.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let m = [1u8, 0, 7]; // any non-zero byte is true
    /// let mut out = [0i8; 3];
    /// Engine::new().select(
    ///     Cond::mask(TensorRef::new(&m, &[3])),
    ///     TensorRef::new(&[1i8, 2, 3], &[3]),
    ///     TensorRef::scalar(&[-1i8]),
    ///     TensorMut::new(&mut out, &[3]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, -1, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn mask(m: TensorRef<'a, u8>) -> Cond<'a> {
        Cond {
            repr: Repr::Mask(m),
            not: false,
        }
    }

    /// A bitmap (Arrow's bit-packed booleans): bit `j` of `bits` is the condition of element
    /// `j` of `shape` in row-major order, broadcast as a mask of that shape is. The bitmap
    /// must have exactly as many bits as `shape` has elements (checked by the select). The
    /// engine expands it into byte masks a block at a time (4096 elements) for the kernels
    /// of every tier.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::bits::Bitmap;
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// // Bits 1, 0, 1 from bit offset 3 of one byte (Arrow's order: least significant first).
    /// let bits = Bitmap::new(&[0b0010_1000], 3, 3)?;
    /// let mut out = [0i32; 3];
    /// Engine::new().select(
    ///     Cond::bitmap(bits, &[3]),
    ///     TensorRef::new(&[1, 2, 3], &[3]),
    ///     TensorRef::scalar(&[-1]),
    ///     TensorMut::new(&mut out, &[3]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, -1, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn bitmap(bits: Bitmap<'a>, shape: &'a [usize]) -> Cond<'a> {
        Cond {
            repr: Repr::Bits {
                bits,
                valid: None,
                shape,
            },
            not: false,
        }
    }

    /// [`Cond::bitmap`] with the condition's validity bitmap (1 = valid): a null condition is
    /// false (arrow-rs `zip`, DataFusion, Polars), whatever its bit. Under Arrow C++'s rule a
    /// null condition gives a null output, which only the output's validity shows
    /// ([`crate::bits::select_validity`]): its value is then either side's.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::bits::Bitmap;
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let (bits, valid) = (Bitmap::new(&[0b11], 0, 2)?, Bitmap::new(&[0b01], 0, 2)?);
    /// let mut out = [0u8; 2];
    /// Engine::new().select(
    ///     Cond::bitmap_with_validity(bits, valid, &[2]),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[2]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 0]); // row 1 is null: false
    /// # Ok(())
    /// # }
    /// ```
    pub fn bitmap_with_validity(
        bits: Bitmap<'a>,
        valid: Bitmap<'a>,
        shape: &'a [usize],
    ) -> Cond<'a> {
        Cond {
            repr: Repr::Bits {
                bits,
                valid: Some(valid),
                shape,
            },
            not: false,
        }
    }

    /// `lhs OP rhs`; both operands of one dtype.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, CmpOp, Cond, Engine, TensorMut, TensorRef};
    /// // Element-wise maximum: out = a >= b ? a : b.
    /// let (a, b) = ([1i32, 5, -3], [2i32, 4, -3]);
    /// let (av, bv) = (TensorRef::new(&a, &[3]), TensorRef::new(&b, &[3]));
    /// let mut out = [0i32; 3];
    /// Engine::new().select(
    ///     Cond::cmp(CmpOp::Ge, av, bv),
    ///     av,
    ///     bv,
    ///     TensorMut::new(&mut out, &[3]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [2, 5, -3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cmp(op: CmpOp, lhs: impl Into<Operand<'a>>, rhs: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond {
            repr: Repr::Cmp(op, lhs.into(), rhs.into()),
            not: false,
        }
    }

    /// `lhs == rhs` (numpy's `equal`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let x = [3i64, 0, -2, 0];
    /// let xv = TensorRef::new(&x, &[4]);
    /// // out = x == 0 ? 1 : 0
    /// let mut out = [0u8; 4];
    /// Engine::new().select(
    ///     Cond::eq(xv, 0i64),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [0, 1, 0, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn eq(lhs: impl Into<Operand<'a>>, rhs: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond::cmp(CmpOp::Eq, lhs, rhs)
    }

    /// `lhs != rhs` (numpy's `not_equal`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let x = [-1.0f32, 0.0, 2.0, f32::NAN];
    /// let xv = TensorRef::new(&x, &[4]);
    /// // out = x != 0 ? 1 : 0
    /// let mut out = [0u8; 4];
    /// Engine::new().select(
    ///     Cond::ne(xv, 0.0f32),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 0, 1, 1]); // NaN != 0
    /// # Ok(())
    /// # }
    /// ```
    pub fn ne(lhs: impl Into<Operand<'a>>, rhs: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond::cmp(CmpOp::Ne, lhs, rhs)
    }

    /// `lhs < rhs` (numpy's `less`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let x = [-1.0f32, 0.0, 2.0, f32::NAN];
    /// let xv = TensorRef::new(&x, &[4]);
    /// // out = x < 0 ? 1 : 0
    /// let mut out = [0u8; 4];
    /// Engine::new().select(
    ///     Cond::lt(xv, 0.0f32),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 0, 0, 0]); // NaN compares false
    /// # Ok(())
    /// # }
    /// ```
    pub fn lt(lhs: impl Into<Operand<'a>>, rhs: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond::cmp(CmpOp::Lt, lhs, rhs)
    }

    /// `lhs <= rhs` (numpy's `less_equal`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let x = [-1.0f32, 0.0, 2.0, f32::NAN];
    /// let xv = TensorRef::new(&x, &[4]);
    /// // out = x <= 0 ? 1 : 0
    /// let mut out = [0u8; 4];
    /// Engine::new().select(
    ///     Cond::le(xv, 0.0f32),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 1, 0, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn le(lhs: impl Into<Operand<'a>>, rhs: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond::cmp(CmpOp::Le, lhs, rhs)
    }

    /// `lhs > rhs` (numpy's `greater`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let x = [-1.0f32, 0.0, 2.0, f32::NAN];
    /// let xv = TensorRef::new(&x, &[4]);
    /// // out = x > 0 ? 1 : 0
    /// let mut out = [0u8; 4];
    /// Engine::new().select(
    ///     Cond::gt(xv, 0.0f32),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [0, 0, 1, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn gt(lhs: impl Into<Operand<'a>>, rhs: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond::cmp(CmpOp::Gt, lhs, rhs)
    }

    /// `lhs >= rhs` (numpy's `greater_equal`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let x = [-1.0f32, 0.0, 2.0, f32::NAN];
    /// let xv = TensorRef::new(&x, &[4]);
    /// // out = x >= 0 ? 1 : 0
    /// let mut out = [0u8; 4];
    /// Engine::new().select(
    ///     Cond::ge(xv, 0.0f32),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [0, 1, 1, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn ge(lhs: impl Into<Operand<'a>>, rhs: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond::cmp(CmpOp::Ge, lhs, rhs)
    }

    /// A test of `v`'s values.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef, TestOp};
    /// let x = [1.0f64, f64::NAN, f64::NEG_INFINITY, -0.0];
    /// let xv = TensorRef::new(&x, &[4]);
    /// // out = isnan(x) ? 1 : 0
    /// let mut out = [0u8; 4];
    /// Engine::new().select(
    ///     Cond::test(TestOp::IsNan, xv),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [0, 1, 0, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn test(op: TestOp, v: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond {
            repr: Repr::Test(op, v.into()),
            not: false,
        }
    }

    /// `isnan(v)`: false for integers and bool.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// // numpy's nan_to_num for NaN only: out = isnan(x) ? 0 : x, bit for bit (-0.0 stays).
    /// let x = [1.5f64, f64::NAN, -0.0];
    /// let xv = TensorRef::new(&x, &[3]);
    /// let mut out = [9.0f64; 3];
    /// Engine::new().select(
    ///     Cond::isnan(xv),
    ///     TensorRef::scalar(&[0.0]),
    ///     xv,
    ///     TensorMut::new(&mut out, &[3]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out.map(f64::to_bits), [1.5f64, 0.0, -0.0].map(f64::to_bits));
    /// # Ok(())
    /// # }
    /// ```
    pub fn isnan(v: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond::test(TestOp::IsNan, v)
    }

    /// `isinf(v)`: false for integers and bool.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let x = [1.0f64, f64::NAN, f64::NEG_INFINITY, -0.0];
    /// let xv = TensorRef::new(&x, &[4]);
    /// // out = isinf(x) ? 1 : 0
    /// let mut out = [0u8; 4];
    /// Engine::new().select(
    ///     Cond::isinf(xv),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [0, 0, 1, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn isinf(v: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond::test(TestOp::IsInf, v)
    }

    /// `isfinite(v)`: true for integers and bool.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let x = [1.0f64, f64::NAN, f64::NEG_INFINITY, -0.0];
    /// let xv = TensorRef::new(&x, &[4]);
    /// // out = isfinite(x) ? 1 : 0
    /// let mut out = [0u8; 4];
    /// Engine::new().select(
    ///     Cond::isfinite(xv),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 0, 0, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn isfinite(v: impl Into<Operand<'a>>) -> Cond<'a> {
        Cond::test(TestOp::IsFinite, v)
    }

    /// The negation (numpy's `logical_not`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
    /// let x = [-1.0f32, 0.0, 2.0, f32::NAN];
    /// let xv = TensorRef::new(&x, &[4]);
    /// // out = !(x > 0) ? 1 : 0
    /// let mut out = [0u8; 4];
    /// Engine::new().select(
    ///     Cond::gt(xv, 0.0f32).not(),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 1, 0, 1]); // `!cond` works too
    /// # Ok(())
    /// # }
    /// ```
    #[allow(clippy::should_implement_trait)] // `!cond` works too (`std::ops::Not`)
    pub fn not(self) -> Cond<'a> {
        Cond {
            not: !self.not,
            ..self
        }
    }

    /// Whether this is a mask (not a predicate).
    ///
    /// ```
    /// use selectjit::{Cond, TensorRef};
    /// assert!(Cond::mask(TensorRef::new(&[1u8, 0], &[2])).is_mask());
    /// assert!(Cond::from(TensorRef::from_bools(&[true], &[1])).is_mask());
    /// assert!(!Cond::isnan(1.0f32).is_mask());
    /// ```
    pub fn is_mask(&self) -> bool {
        matches!(self.repr, Repr::Mask(_))
    }

    /// Whether this is a bitmap ([`Cond::bitmap`]).
    ///
    /// ```
    /// use selectjit::{Cond, bits::Bitmap};
    /// assert!(Cond::bitmap(Bitmap::new(&[1], 0, 1).unwrap(), &[1]).is_bitmap());
    /// ```
    pub fn is_bitmap(&self) -> bool {
        matches!(self.repr, Repr::Bits { .. })
    }

    /// The predicate as its kernels see it (see `pred`): its canonical kind over `dtype`
    /// (the operands' dtype, or the select's for an in-place operand), whether the operands
    /// trade places, and whether then and else do.
    pub(crate) fn canonical(&self, select: DType) -> Option<(Kind, bool, bool)> {
        let dt = |o: &Operand<'_>| o.dtype().unwrap_or(select);
        match self.repr {
            Repr::Mask(_) | Repr::Bits { .. } => None,
            Repr::Cmp(op, l, _) => {
                let (c, swap, not) = op.canonical();
                Some((Kind::Cmp(c, dt(&l)), swap, not ^ self.not))
            }
            Repr::Test(t, v) => Some((Kind::Test(t, dt(&v)), false, self.not)),
        }
    }
}

impl<'a> std::ops::Not for Cond<'a> {
    type Output = Cond<'a>;
    fn not(self) -> Cond<'a> {
        Cond::not(self)
    }
}

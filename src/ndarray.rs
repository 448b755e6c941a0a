//! Select on `ndarray` arrays and views (feature `ndarray`).
//!
//! ```
//! use ndarray::{array, s, Array2};
//! use selectjit::Broadcast;
//!
//! let cond = array![true, false, true];                    // [3]: broadcast over the rows
//! let then = Array2::from_shape_fn((2, 3), |(i, j)| (10 * i + j) as f32);
//! let else_ = array![-1.0f32];                             // [1]
//! // Any strides work, reversed views included: `then` with its columns reversed.
//! let out = selectjit::ndarray::select(&cond, &then.slice(s![.., ..;-1]), &else_, Broadcast::Numpy)?;
//! assert_eq!(out, array![[2.0, -1.0, 0.0], [12.0, -1.0, 10.0]].into_dyn());
//!
//! // Into an existing array or view, here a reversed one.
//! let mut dst = Array2::<f32>::zeros((2, 3));
//! selectjit::ndarray::select_into(&cond, &then, &else_, &mut dst.slice_mut(s![..;-1, ..]), Broadcast::Numpy)?;
//! assert_eq!(dst, array![[10.0, -1.0, 12.0], [0.0, -1.0, 2.0]]);
//! # Ok::<(), selectjit::Error>(())
//! ```
//!
//! * Inputs are `&ArrayRef`s, which every array and view dereferences to (`&a`, `&a.view()`,
//!   `&a.slice(...)`); `cond` holds `bool` or `u8` (any non-zero byte is true); `then`, `else`
//!   and the output hold one [`Element`] type. Any dimensionality (`IxDyn` or fixed), any memory
//!   order and strides, negative ones included.
//! * Shapes are broadcast by the chosen [`Broadcast`] mode — the crate's rules (numpy, two-step,
//!   none, pdpd), not ndarray's own broadcasting; a mode's refusal is an error naming the operand
//!   and dimension.
//! * [`select`] returns a new row-major `Array<T, IxDyn>` (the broadcast output's rank is only
//!   known at run time in general; `.into_dimensionality::<Ix2>()` gives a fixed one back).
//!   [`select_into`] writes into any `&mut ArrayRef` of exactly the output shape (an `Array`, an
//!   `ArrayViewMut`, reversed or strided), which is untouched on error.
//! * Views whose elements fill the memory between their lowest and highest element (contiguous,
//!   transposed, reversed, broadcast along some axes) are passed to the kernels as they are.
//!   Views with gaps (e.g. `s![..;2]`, a block of a larger array) are the one exception: their
//!   memory range may hold elements that other views own, so an input with gaps is first copied
//!   to a compact array (broadcast axes stay broadcast), and an output with gaps gets the result
//!   through a compact temporary. The result is the same either way.
//!
//! [`Engine::select_array`] and [`Engine::select_array_into`] do the same on a chosen engine.
//!
//! # Predicates
//!
//! The condition may also be a predicate computed per element inside the kernel, with no mask
//! array in between: a [`Cond`] compares two operands (`x > 0`, `mask == 0`, `a < b`) or tests
//! one (`isnan(x)`), each operand an array or view of any strides and dimensionality, or a
//! scalar. [`select_cond`] and [`select_cond_into`] (and [`Engine::select_array_cond`],
//! [`Engine::select_array_cond_into`]) take it where [`select`] and [`select_into`] take `cond`:
//!
//! ```
//! use ndarray::{arr0, array};
//! use selectjit::Broadcast;
//! use selectjit::ndarray::{Cond, select_cond};
//!
//! let x = array![[-1.5f32, 2.0], [0.5, -0.0]];
//! let relu = select_cond(Cond::gt(&x, 0.0), &x, &arr0(0.0), Broadcast::Numpy)?; // where(x > 0, x, 0)
//! assert_eq!(relu, array![[0.0, 2.0], [0.5, 0.0]].into_dyn());
//!
//! // An i64 key mask over f32 scores, broadcast over the rows: where(mask == 0, -inf, scores).
//! let mask = array![[1i64, 1, 0]];
//! let scores = array![[0.5f32, 1.0, 2.0], [3.0, 4.0, 5.0]];
//! let masked = select_cond(Cond::eq(&mask, 0), &arr0(f32::NEG_INFINITY), &scores, Broadcast::Numpy)?;
//! assert_eq!(masked, array![[0.5, 1.0, f32::NEG_INFINITY], [3.0, 4.0, f32::NEG_INFINITY]].into_dyn());
//! # Ok::<(), selectjit::Error>(())
//! ```
//!
//! * The operands of one predicate hold one [`Element`] type `U` (checked when it compiles; a
//!   literal such as `0` or `0.0` takes the other operand's type), which may differ from the
//!   selected type. Comparisons and tests follow numpy bit for bit (see [`crate::Cond`]: NaN
//!   compares unequal to everything, `-0.0 == 0.0`, integers by their signedness).
//! * The operands broadcast against each other with numpy's rule; their broadcast shape takes
//!   `cond`'s place in the chosen [`Broadcast`] mode. Operand views with gaps are copied compact
//!   first, as `cond` is.

use ::ndarray::{Array, ArrayBase, ArrayRef, ArrayView, Axis, Data, Dimension, IxDyn};

use crate::dtype::Element;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::pred::{CmpOp, TestOp};
use crate::shape::{Broadcast, Dims, broadcast_pair, check_shape, output_shape};
use crate::tensor::{TensorMut, TensorRef};

mod sealed {
    pub trait Sealed {}
    impl Sealed for bool {}
    impl Sealed for u8 {}
}

/// Element types of a `cond` array: `bool` and `u8` (any non-zero byte is true).
pub trait CondElement: Copy + sealed::Sealed + 'static {
    /// The elements as the bytes the kernels read.
    fn as_bytes(s: &[Self]) -> &[u8];
}

impl CondElement for bool {
    fn as_bytes(s: &[bool]) -> &[u8] {
        bytemuck::cast_slice(s)
    }
}

impl CondElement for u8 {
    fn as_bytes(s: &[u8]) -> &[u8] {
        s
    }
}

/// `out = cond ? then : else` on the process-wide default engine, into a new row-major array of
/// the broadcast shape. See the [module docs](self).
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use ndarray::array;
/// use selectjit::Broadcast;
/// let out = selectjit::ndarray::select(
///     &array![true, false],
///     &array![[1i64, 2], [3, 4]],
///     &array![0i64],
///     Broadcast::Numpy,
/// )?;
/// assert_eq!(out, array![[1, 0], [3, 0]].into_dyn());
/// # Ok(())
/// # }
/// ```
pub fn select<C, T, D1, D2, D3>(
    cond: &ArrayRef<C, D1>,
    then: &ArrayRef<T, D2>,
    else_: &ArrayRef<T, D3>,
    mode: Broadcast,
) -> Result<Array<T, IxDyn>>
where
    C: CondElement,
    T: Element,
    D1: Dimension,
    D2: Dimension,
    D3: Dimension,
{
    crate::default_engine().select_array(cond, then, else_, mode)
}

/// `out = cond ? then : else` on the process-wide default engine, into `out`, whose shape must be
/// the broadcast shape; `out` is untouched on error. See the [module docs](self).
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use ndarray::{Array2, array};
/// use selectjit::Broadcast;
/// let mut out = Array2::<u8>::zeros((2, 2));
/// selectjit::ndarray::select_into(
///     &array![[1u8], [0]],
///     &array![7u8, 8],
///     &array![0u8],
///     &mut out,
///     Broadcast::Numpy,
/// )?;
/// assert_eq!(out, array![[7, 8], [0, 0]]);
/// # Ok(())
/// # }
/// ```
pub fn select_into<C, T, D1, D2, D3, D4>(
    cond: &ArrayRef<C, D1>,
    then: &ArrayRef<T, D2>,
    else_: &ArrayRef<T, D3>,
    out: &mut ArrayRef<T, D4>,
    mode: Broadcast,
) -> Result<()>
where
    C: CondElement,
    T: Element,
    D1: Dimension,
    D2: Dimension,
    D3: Dimension,
    D4: Dimension,
{
    crate::default_engine().select_array_into(cond, then, else_, out, mode)
}

/// `out = cond ? then : else` on the process-wide default engine, into a new row-major array of
/// the broadcast shape, with the predicate computed per element in the kernel. See the
/// [module docs](self#predicates).
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use ndarray::{arr0, array, s};
/// use selectjit::Broadcast;
/// use selectjit::ndarray::{Cond, select_cond};
/// // numpy's nan_to_num for NaN only, on a reversed view: where(isnan(x), 0, x).
/// let x = array![1.5f64, f64::NAN, -0.0];
/// let r = x.slice(s![..;-1]);
/// let out = select_cond(Cond::isnan(&r), &arr0(0.0), &r, Broadcast::Numpy)?;
/// assert_eq!(out.map(|v| v.to_bits()), array![-0.0f64, 0.0, 1.5].map(|v| v.to_bits()).into_dyn());
/// # Ok(())
/// # }
/// ```
pub fn select_cond<U, T, D2, D3>(
    cond: Cond<'_, U>,
    then: &ArrayRef<T, D2>,
    else_: &ArrayRef<T, D3>,
    mode: Broadcast,
) -> Result<Array<T, IxDyn>>
where
    U: Element,
    T: Element,
    D2: Dimension,
    D3: Dimension,
{
    crate::default_engine().select_array_cond(cond, then, else_, mode)
}

/// `out = cond ? then : else` on the process-wide default engine, into `out`, whose shape must be
/// the broadcast shape; `out` is untouched on error. See the [module docs](self#predicates).
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use ndarray::{Array2, array};
/// use selectjit::Broadcast;
/// use selectjit::ndarray::{Cond, select_cond_into};
/// // Element-wise minimum: where(a < b, a, b), b broadcast over the rows.
/// let a = array![[1i32, 5, -3], [7, 0, 2]];
/// let b = array![2i32, 4, -3];
/// let mut out = Array2::<i32>::zeros((2, 3));
/// select_cond_into(Cond::lt(&a, &b), &a, &b, &mut out, Broadcast::Numpy)?;
/// assert_eq!(out, array![[1, 4, -3], [2, 0, -3]]);
/// # Ok(())
/// # }
/// ```
pub fn select_cond_into<U, T, D2, D3, D4>(
    cond: Cond<'_, U>,
    then: &ArrayRef<T, D2>,
    else_: &ArrayRef<T, D3>,
    out: &mut ArrayRef<T, D4>,
    mode: Broadcast,
) -> Result<()>
where
    U: Element,
    T: Element,
    D2: Dimension,
    D3: Dimension,
    D4: Dimension,
{
    crate::default_engine().select_array_cond_into(cond, then, else_, out, mode)
}

/// One operand of a [`Cond`]: an array or view of `U` elements (any dimensionality and strides),
/// or one `U` by value (a rank-0 operand).
///
/// Converted from `&array`, `&view`, `&ArrayRef` or a value (`0.0f32`, `0i64`, or a literal
/// that takes the other operand's type); the constructors of [`Cond`] take
/// `impl Into<Operand>`, so it is seldom named.
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use ndarray::{arr0, array};
/// use selectjit::Broadcast;
/// use selectjit::ndarray::{Operand, Cond, select_cond};
/// let x = array![1.0f32, -2.0];
/// let (lhs, rhs): (Operand<'_, f32>, Operand<'_, f32>) = ((&x).into(), 0.0.into());
/// let out = select_cond(Cond::gt(lhs, rhs), &x, &arr0(0.0), Broadcast::Numpy)?; // Cond::gt(&x, 0.0)
/// assert_eq!(out, array![1.0, 0.0].into_dyn());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Operand<'a, U> {
    src: Src<'a, U>,
}

#[derive(Clone, Debug)]
enum Src<'a, U> {
    View(ArrayView<'a, U, IxDyn>),
    Scalar(U),
}

impl<'a, U, S, D> From<&'a ArrayBase<S, D>> for Operand<'a, U>
where
    U: Element,
    S: Data<Elem = U>,
    D: Dimension,
{
    fn from(a: &'a ArrayBase<S, D>) -> Self {
        Operand {
            src: Src::View(a.view().into_dyn()),
        }
    }
}

impl<'a, U: Element, D: Dimension> From<&'a ArrayRef<U, D>> for Operand<'a, U> {
    fn from(a: &'a ArrayRef<U, D>) -> Self {
        Operand {
            src: Src::View(a.view().into_dyn()),
        }
    }
}

impl<U: Element> From<U> for Operand<'_, U> {
    fn from(v: U) -> Self {
        Operand {
            src: Src::Scalar(v),
        }
    }
}

impl<U: Element> Operand<'_, U> {
    fn shape(&self) -> &[usize] {
        match &self.src {
            Src::View(v) => v.shape(),
            Src::Scalar(_) => &[],
        }
    }

    /// The operand as the engine takes it (a view with gaps copied compact, as `cond` is).
    fn input(&self) -> OperandInput<'_, U> {
        match &self.src {
            Src::View(v) => OperandInput::View(Input::new(v)),
            Src::Scalar(x) => OperandInput::Scalar(*x),
        }
    }
}

enum OperandInput<'a, U: Copy> {
    View(Input<'a, U>),
    Scalar(U),
}

impl<U: Element> OperandInput<'_, U> {
    fn operand(&self) -> crate::cond::Operand<'_> {
        match self {
            OperandInput::View(i) => i.view().into(),
            OperandInput::Scalar(x) => (*x).into(),
        }
    }
}

/// A predicate on `ndarray` operands, the condition of [`select_cond`] and its kin: a
/// comparison of two operands (`==`, `!=`, `<`, `<=`, `>`, `>=`), a test of one (`isnan`,
/// `isinf`, `isfinite`), or the negation of either, computed per element inside the kernel with
/// numpy's semantics (those of [`crate::Cond`]).
///
/// The `ndarray` counterpart of [`crate::Cond`], with the same name and constructors. It is a
/// type of its own because its operands are typed (`U`, so a literal such as `0.0` takes the
/// array's element type at compile time) and may be views with gaps, which are copied compact
/// when the select runs; [`crate::Cond`] borrows untyped views and owns no data.
///
/// Operands ([`Operand`]) are arrays or views of one [`Element`] type `U`, which may differ from
/// the selected type, or scalars; they broadcast against each other with numpy's rule, and
/// their broadcast shape takes `cond`'s place in the select's [`Broadcast`] mode. A `Cond`
/// borrows its arrays; views with gaps are copied compact when the select runs.
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use ndarray::{arr0, array};
/// use selectjit::Broadcast;
/// use selectjit::ndarray::{Cond, select_cond};
/// let x = array![-1.0f32, 0.0, 2.0];
/// let keep = Cond::ge(&x, 0.0); // a predicate, not yet evaluated
/// let out = select_cond(!keep, &arr0(-1.0f32), &x, Broadcast::Numpy)?;
/// assert_eq!(out, array![-1.0, 0.0, 2.0].into_dyn());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Cond<'a, U> {
    repr: Repr<'a, U>,
    /// Negated: `then` and `else` trade places.
    not: bool,
}

#[derive(Clone, Debug)]
enum Repr<'a, U> {
    Cmp(CmpOp, Operand<'a, U>, Operand<'a, U>),
    Test(TestOp, Operand<'a, U>),
}

impl<'a, U: Element> Cond<'a, U> {
    /// `lhs OP rhs`.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::array;
    /// use selectjit::{Broadcast, CmpOp};
    /// use selectjit::ndarray::{Cond, select_cond};
    /// // Element-wise maximum: where(a >= b, a, b).
    /// let (a, b) = (array![1i32, 5, -3], array![2i32, 4, -3]);
    /// let out = select_cond(Cond::cmp(CmpOp::Ge, &a, &b), &a, &b, Broadcast::Numpy)?;
    /// assert_eq!(out, array![2, 5, -3].into_dyn());
    /// # Ok(())
    /// # }
    /// ```
    pub fn cmp(op: CmpOp, lhs: impl Into<Operand<'a, U>>, rhs: impl Into<Operand<'a, U>>) -> Self {
        Cond {
            repr: Repr::Cmp(op, lhs.into(), rhs.into()),
            not: false,
        }
    }

    /// `lhs == rhs` (numpy's `equal`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{arr0, array};
    /// use selectjit::Broadcast;
    /// use selectjit::ndarray::{Cond, select_cond};
    /// // An i64 padding mask over f32 scores: where(mask == 0, -inf, scores).
    /// let mask = array![1i64, 0, 1];
    /// let scores = array![0.5f32, 1.0, 2.0];
    /// let out = select_cond(Cond::eq(&mask, 0), &arr0(f32::NEG_INFINITY), &scores, Broadcast::Numpy)?;
    /// assert_eq!(out, array![0.5, f32::NEG_INFINITY, 2.0].into_dyn());
    /// # Ok(())
    /// # }
    /// ```
    pub fn eq(lhs: impl Into<Operand<'a, U>>, rhs: impl Into<Operand<'a, U>>) -> Self {
        Cond::cmp(CmpOp::Eq, lhs, rhs)
    }

    /// `lhs != rhs` (numpy's `not_equal`; true where either is NaN).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{arr0, array};
    /// use selectjit::Broadcast;
    /// use selectjit::ndarray::{Cond, select_cond};
    /// let x = array![-1.0f32, 0.0, f32::NAN];
    /// let out = select_cond(Cond::ne(&x, 0.0), &arr0(1u8), &arr0(0u8), Broadcast::Numpy)?;
    /// assert_eq!(out, array![1, 0, 1].into_dyn()); // NaN != 0
    /// # Ok(())
    /// # }
    /// ```
    pub fn ne(lhs: impl Into<Operand<'a, U>>, rhs: impl Into<Operand<'a, U>>) -> Self {
        Cond::cmp(CmpOp::Ne, lhs, rhs)
    }

    /// `lhs < rhs` (numpy's `less`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::array;
    /// use selectjit::Broadcast;
    /// use selectjit::ndarray::{Cond, select_cond};
    /// // Element-wise minimum of a [2, 2] array and a row [2]: where(a < b, a, b).
    /// let a = array![[1.0f64, 5.0], [-3.0, 7.0]];
    /// let b = array![2.0f64, 4.0];
    /// let out = select_cond(Cond::lt(&a, &b), &a, &b, Broadcast::Numpy)?;
    /// assert_eq!(out, array![[1.0, 4.0], [-3.0, 4.0]].into_dyn());
    /// # Ok(())
    /// # }
    /// ```
    pub fn lt(lhs: impl Into<Operand<'a, U>>, rhs: impl Into<Operand<'a, U>>) -> Self {
        Cond::cmp(CmpOp::Lt, lhs, rhs)
    }

    /// `lhs <= rhs` (numpy's `less_equal`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{arr0, array};
    /// use selectjit::Broadcast;
    /// use selectjit::ndarray::{Cond, select_cond};
    /// let x = array![-1.0f32, 0.0, 2.0, f32::NAN];
    /// let out = select_cond(Cond::le(&x, 0.0), &arr0(1u8), &arr0(0u8), Broadcast::Numpy)?;
    /// assert_eq!(out, array![1, 1, 0, 0].into_dyn()); // NaN compares false
    /// # Ok(())
    /// # }
    /// ```
    pub fn le(lhs: impl Into<Operand<'a, U>>, rhs: impl Into<Operand<'a, U>>) -> Self {
        Cond::cmp(CmpOp::Le, lhs, rhs)
    }

    /// `lhs > rhs` (numpy's `greater`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{arr0, array};
    /// use selectjit::Broadcast;
    /// use selectjit::ndarray::{Cond, select_cond};
    /// // ReLU: where(x > 0, x, 0).
    /// let x = array![-1.5f32, 2.0, f32::NAN];
    /// let out = select_cond(Cond::gt(&x, 0.0), &x, &arr0(0.0), Broadcast::Numpy)?;
    /// assert_eq!(out, array![0.0, 2.0, 0.0].into_dyn());
    /// # Ok(())
    /// # }
    /// ```
    pub fn gt(lhs: impl Into<Operand<'a, U>>, rhs: impl Into<Operand<'a, U>>) -> Self {
        Cond::cmp(CmpOp::Gt, lhs, rhs)
    }

    /// `lhs >= rhs` (numpy's `greater_equal`).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::array;
    /// use selectjit::Broadcast;
    /// use selectjit::ndarray::{Cond, select_cond};
    /// // Clip from below at a per-column floor: where(x >= floor, x, floor).
    /// let x = array![[1u16, 9], [4, 2]];
    /// let floor = array![3u16, 5];
    /// let out = select_cond(Cond::ge(&x, &floor), &x, &floor, Broadcast::Numpy)?;
    /// assert_eq!(out, array![[3, 9], [4, 5]].into_dyn());
    /// # Ok(())
    /// # }
    /// ```
    pub fn ge(lhs: impl Into<Operand<'a, U>>, rhs: impl Into<Operand<'a, U>>) -> Self {
        Cond::cmp(CmpOp::Ge, lhs, rhs)
    }

    /// A test of `v`'s values.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{arr0, array};
    /// use selectjit::{Broadcast, TestOp};
    /// use selectjit::ndarray::{Cond, select_cond};
    /// let x = array![1.0f64, f64::NAN, f64::NEG_INFINITY, -0.0];
    /// let out = select_cond(Cond::test(TestOp::IsInf, &x), &arr0(1u8), &arr0(0u8), Broadcast::Numpy)?;
    /// assert_eq!(out, array![0, 0, 1, 0].into_dyn());
    /// # Ok(())
    /// # }
    /// ```
    pub fn test(op: TestOp, v: impl Into<Operand<'a, U>>) -> Self {
        Cond {
            repr: Repr::Test(op, v.into()),
            not: false,
        }
    }

    /// `isnan(v)`: false for integers.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{arr0, array};
    /// use selectjit::Broadcast;
    /// use selectjit::ndarray::{Cond, select_cond};
    /// // where(isnan(x), 0, x), bit for bit: -0.0 stays -0.0.
    /// let x = array![[1.5f32, f32::NAN], [-0.0, f32::INFINITY]];
    /// let out = select_cond(Cond::isnan(&x), &arr0(0.0f32), &x, Broadcast::Numpy)?;
    /// let want = array![[1.5f32, 0.0], [-0.0, f32::INFINITY]];
    /// assert_eq!(out.map(|v| v.to_bits()), want.map(|v| v.to_bits()).into_dyn());
    /// # Ok(())
    /// # }
    /// ```
    pub fn isnan(v: impl Into<Operand<'a, U>>) -> Self {
        Cond::test(TestOp::IsNan, v)
    }

    /// `isinf(v)`: false for integers.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{arr0, array};
    /// use selectjit::Broadcast;
    /// use selectjit::ndarray::{Cond, select_cond};
    /// // Infinities to the largest finite value: where(isinf(x), MAX, x) (sign aside).
    /// let x = array![1.0f64, f64::INFINITY, f64::NAN];
    /// let out = select_cond(Cond::isinf(&x), &arr0(f64::MAX), &x, Broadcast::Numpy)?;
    /// assert_eq!(out[[1]], f64::MAX);
    /// assert!(out[[2]].is_nan());
    /// # Ok(())
    /// # }
    /// ```
    pub fn isinf(v: impl Into<Operand<'a, U>>) -> Self {
        Cond::test(TestOp::IsInf, v)
    }

    /// `isfinite(v)`: true for integers.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{arr0, array};
    /// use selectjit::Broadcast;
    /// use selectjit::ndarray::{Cond, select_cond};
    /// // Keep the finite values, zero the others.
    /// let x = array![1.0f32, f32::NAN, f32::NEG_INFINITY, -2.0];
    /// let out = select_cond(Cond::isfinite(&x), &x, &arr0(0.0), Broadcast::Numpy)?;
    /// assert_eq!(out, array![1.0, 0.0, 0.0, -2.0].into_dyn());
    /// # Ok(())
    /// # }
    /// ```
    pub fn isfinite(v: impl Into<Operand<'a, U>>) -> Self {
        Cond::test(TestOp::IsFinite, v)
    }

    /// The negation (numpy's `logical_not`); `!cond` works too.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{arr0, array};
    /// use selectjit::Broadcast;
    /// use selectjit::ndarray::{Cond, select_cond};
    /// let x = array![-1.0f32, 0.0, 2.0, f32::NAN];
    /// let out = select_cond(Cond::gt(&x, 0.0).not(), &arr0(1u8), &arr0(0u8), Broadcast::Numpy)?;
    /// assert_eq!(out, array![1, 1, 0, 1].into_dyn()); // not(NaN > 0) is true
    /// # Ok(())
    /// # }
    /// ```
    #[allow(clippy::should_implement_trait)] // `!cond` works too (`std::ops::Not`)
    pub fn not(self) -> Self {
        Cond {
            not: !self.not,
            ..self
        }
    }

    /// The numpy broadcast of the operands' shapes: the shape that takes `cond`'s place.
    fn shape(&self) -> Result<Dims> {
        match &self.repr {
            Repr::Cmp(_, l, r) => broadcast_pair(["lhs", "rhs"], l.shape(), r.shape()),
            Repr::Test(_, v) => {
                check_shape("operand", v.shape())?;
                Ok(v.shape().into())
            }
        }
    }

    /// Runs `f` on this predicate as the engine's [`crate::Cond`] over its operands' inputs.
    fn with_cond<R>(&self, f: impl FnOnce(crate::Cond<'_>) -> R) -> R {
        match &self.repr {
            Repr::Cmp(op, l, r) => {
                let (l, r) = (l.input(), r.input());
                f(crate::Cond {
                    not: self.not,
                    ..crate::Cond::cmp(*op, l.operand(), r.operand())
                })
            }
            Repr::Test(op, v) => {
                let v = v.input();
                f(crate::Cond {
                    not: self.not,
                    ..crate::Cond::test(*op, v.operand())
                })
            }
        }
    }
}

impl<U: Element> std::ops::Not for Cond<'_, U> {
    type Output = Self;
    fn not(self) -> Self {
        Cond::not(self)
    }
}

/// Where a view's elements lie relative to its first element: the lowest and the highest
/// offset in elements, or `None` for a view with no element.
fn span(shape: &[usize], strides: &[isize]) -> Option<(isize, isize)> {
    if shape.contains(&0) {
        return None;
    }
    let (mut lo, mut hi) = (0isize, 0isize);
    for (&d, &s) in shape.iter().zip(strides) {
        // An ndarray view's elements lie in one allocation, so every span fits in isize.
        let x = (d as isize - 1) * s;
        if x < 0 {
            lo += x;
        } else {
            hi += x;
        }
    }
    Some((lo, hi))
}

/// Whether the elements of a view fill its memory range exactly (each element between the
/// lowest and the highest belongs to the view): ignoring axes of length 1 and broadcast axes
/// (stride 0), the absolute strides, in increasing order, are the running products of the
/// lengths, as in a contiguous array of some axis order and signs.
fn dense(shape: &[usize], strides: &[isize]) -> bool {
    let mut axes: smallvec::SmallVec<[(usize, usize); 8]> = shape
        .iter()
        .zip(strides)
        .filter(|(d, s)| **d > 1 && **s != 0)
        .map(|(&d, &s)| (s.unsigned_abs(), d))
        .collect();
    axes.sort_unstable();
    let mut want = 1usize;
    for (s, d) in axes {
        if s != want {
            return false;
        }
        want = want.saturating_mul(d);
    }
    true
}

/// A row-major array of `shape` over `data` (which holds its element count).
fn row_major<T>(shape: &[usize], data: Vec<T>) -> Result<Array<T, IxDyn>> {
    Array::from_shape_vec(IxDyn(shape), data).map_err(|e| Error::Invalid(e.to_string()))
}

/// An input view as the engine takes it: its own elements (or a compact copy when the view has
/// gaps), shape, element strides and the offset of its first element.
struct Input<'a, T: Clone> {
    data: std::borrow::Cow<'a, [T]>,
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
}

impl<'a, T: Copy> Input<'a, T> {
    fn new<D: Dimension>(a: &'a ArrayRef<T, D>) -> Input<'a, T> {
        let shape = a.shape().to_vec();
        let strides = a.strides().to_vec();
        let Some((lo, hi)) = span(&shape, &strides) else {
            return Input {
                data: std::borrow::Cow::Borrowed(&[]),
                shape,
                strides,
                offset: 0,
            };
        };
        if dense(&shape, &strides) {
            let first = a.as_ptr().wrapping_offset(lo);
            let len = (hi - lo) as usize + 1;
            // SAFETY: an `ArrayRef` guarantees that every element its shape and strides address
            // from `as_ptr()` is initialised, lies in one allocation and may be read for the
            // borrow `'a`; the lowest of them is `first` and the highest `first + len - 1`. The
            // view is dense (checked just above): every element of that range is one of its own
            // elements, so the slice covers no memory that another (mutable) view could own.
            let data = unsafe { std::slice::from_raw_parts(first, len) };
            return Input {
                data: std::borrow::Cow::Borrowed(data),
                shape,
                strides,
                offset: (-lo) as usize,
            };
        }
        // Gaps: copy the view's elements to a row-major array, one element along broadcast
        // axes, which keep stride 0.
        let mut v = a.view();
        for (k, &s) in strides.iter().enumerate() {
            if s == 0 && shape[k] > 1 {
                v.collapse_axis(Axis(k), 0);
            }
        }
        let compact: Vec<T> = v.iter().copied().collect();
        let mut acc = 1isize;
        let mut st = vec![0isize; shape.len()];
        for k in (0..shape.len()).rev() {
            if !(strides[k] == 0 && shape[k] > 1) {
                st[k] = acc;
                acc *= shape[k] as isize;
            }
        }
        Input {
            data: std::borrow::Cow::Owned(compact),
            shape,
            strides: st,
            offset: 0,
        }
    }

    fn view(&self) -> TensorRef<'_, T> {
        TensorRef::with_layout(&self.data, &self.shape, &self.strides, self.offset)
    }
}

/// A new row-major array of `shape` (checked by the caller), filled by `run`.
fn new_array<T: Element>(
    shape: &[usize],
    run: impl FnOnce(TensorMut<'_, T>) -> Result<()>,
) -> Result<Array<T, IxDyn>> {
    let mut data = vec![T::zeroed(); shape.iter().product()];
    run(TensorMut::new(&mut data, shape))?;
    row_major(shape, data)
}

/// Runs `run` on `out` as the engine takes it: a dense view as it is, a view with gaps through a
/// row-major temporary that is copied into `out` only once `run` succeeded.
fn write_into<T: Element, D: Dimension>(
    out: &mut ArrayRef<T, D>,
    run: impl FnOnce(TensorMut<'_, T>) -> Result<()>,
) -> Result<()> {
    let shape = out.shape().to_vec();
    let strides = out.strides().to_vec();
    match span(&shape, &strides) {
        Some((lo, hi)) if dense(&shape, &strides) => {
            let first = out.as_mut_ptr().wrapping_offset(lo);
            let len = (hi - lo) as usize + 1;
            // SAFETY: a `&mut ArrayRef` grants unique read-write access to every element its
            // shape and strides address from `as_mut_ptr()`, all in one allocation; the lowest
            // is `first`, the highest `first + len - 1`, and the view is dense (checked): the
            // range holds only its own elements, borrowed mutably here for the duration of
            // this call.
            let data = unsafe { std::slice::from_raw_parts_mut(first, len) };
            run(TensorMut::with_layout(
                data,
                &shape,
                &strides,
                (-lo) as usize,
            ))
        }
        Some(_) => {
            // Gaps: the result goes through a row-major temporary, validated by the same call.
            let tmp = new_array(&shape, run)?;
            out.assign(&tmp);
            Ok(())
        }
        // No element: shapes are still checked.
        None => run(TensorMut::new(&mut [], &shape)),
    }
}

impl Engine {
    /// `out = cond ? then : else` on `ndarray` arrays or views, into a new row-major array of the
    /// broadcast shape (feature `ndarray`; see [`crate::ndarray`]).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::array;
    /// use selectjit::{Broadcast, Engine};
    /// let engine = Engine::new();
    /// let out = engine.select_array(
    ///     &array![[true], [false]],
    ///     &array![1i64, 2],
    ///     &array![[5i64, 6], [7, 8]],
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, array![[1, 2], [7, 8]].into_dyn());
    /// # Ok(())
    /// # }
    /// ```
    pub fn select_array<C, T, D1, D2, D3>(
        &self,
        cond: &ArrayRef<C, D1>,
        then: &ArrayRef<T, D2>,
        else_: &ArrayRef<T, D3>,
        mode: Broadcast,
    ) -> Result<Array<T, IxDyn>>
    where
        C: CondElement,
        T: Element,
        D1: Dimension,
        D2: Dimension,
        D3: Dimension,
    {
        let shape = output_shape(mode, cond.shape(), then.shape(), else_.shape())?;
        new_array(&shape, |out| {
            self.select_inputs(cond, then, else_, out, mode)
        })
    }

    /// `out = cond ? then : else` on `ndarray` arrays or views, into `out` (an array or a
    /// mutable view of any strides, negative ones included) of exactly the broadcast shape
    /// (feature `ndarray`; see [`crate::ndarray`]). On error `out` is untouched.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{Array2, array, s};
    /// use selectjit::{Broadcast, Engine};
    /// // Into a view with its rows reversed.
    /// let mut out = Array2::<f32>::zeros((2, 2));
    /// Engine::new().select_array_into(
    ///     &array![[1u8], [0]],
    ///     &array![1.0f32, 2.0],
    ///     &array![-1.0f32],
    ///     &mut out.slice_mut(s![..;-1, ..]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, array![[-1.0, -1.0], [1.0, 2.0]]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn select_array_into<C, T, D1, D2, D3, D4>(
        &self,
        cond: &ArrayRef<C, D1>,
        then: &ArrayRef<T, D2>,
        else_: &ArrayRef<T, D3>,
        out: &mut ArrayRef<T, D4>,
        mode: Broadcast,
    ) -> Result<()>
    where
        C: CondElement,
        T: Element,
        D1: Dimension,
        D2: Dimension,
        D3: Dimension,
        D4: Dimension,
    {
        write_into(out, |o| self.select_inputs(cond, then, else_, o, mode))
    }

    /// `out = cond ? then : else` on `ndarray` arrays or views, the predicate computed per
    /// element in the kernel, into a new row-major array of the broadcast shape (feature
    /// `ndarray`; see [`crate::ndarray#predicates`]).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{arr0, array};
    /// use selectjit::ndarray::Cond;
    /// use selectjit::{Broadcast, Engine};
    /// // ReLU of a transposed view.
    /// let x = array![[-1.0f32, 2.0, -3.0], [4.0, -5.0, 6.0]];
    /// let xt = x.t();
    /// let out = Engine::new().select_array_cond(Cond::gt(&xt, 0.0), &xt, &arr0(0.0), Broadcast::Numpy)?;
    /// assert_eq!(out, array![[0.0, 4.0], [2.0, 0.0], [0.0, 6.0]].into_dyn());
    /// # Ok(())
    /// # }
    /// ```
    pub fn select_array_cond<U, T, D2, D3>(
        &self,
        cond: Cond<'_, U>,
        then: &ArrayRef<T, D2>,
        else_: &ArrayRef<T, D3>,
        mode: Broadcast,
    ) -> Result<Array<T, IxDyn>>
    where
        U: Element,
        T: Element,
        D2: Dimension,
        D3: Dimension,
    {
        let shape = output_shape(mode, &cond.shape()?, then.shape(), else_.shape())?;
        new_array(&shape, |out| {
            self.select_cond_inputs(&cond, then, else_, out, mode)
        })
    }

    /// `out = cond ? then : else` on `ndarray` arrays or views, the predicate computed per
    /// element in the kernel, into `out` (an array or a mutable view of any strides) of exactly
    /// the broadcast shape (feature `ndarray`; see [`crate::ndarray#predicates`]). On error
    /// `out` is untouched.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use ndarray::{Array2, arr0, array, s};
    /// use selectjit::ndarray::Cond;
    /// use selectjit::{Broadcast, Engine};
    /// // where(mask == 0, -inf, scores): an i64 mask per row over f32 scores, into every other
    /// // column of a wider array (the columns between keep their values).
    /// let mask = array![[1i64], [0]];
    /// let scores = array![[0.5f32, 1.5], [2.5, 3.5]];
    /// let mut out = Array2::<f32>::from_elem((2, 4), 9.0);
    /// Engine::new().select_array_cond_into(
    ///     Cond::eq(&mask, 0),
    ///     &arr0(f32::NEG_INFINITY),
    ///     &scores,
    ///     &mut out.slice_mut(s![.., ..;2]),
    ///     Broadcast::Numpy,
    /// )?;
    /// let ninf = f32::NEG_INFINITY;
    /// assert_eq!(out, array![[0.5, 9.0, 1.5, 9.0], [ninf, 9.0, ninf, 9.0]]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn select_array_cond_into<U, T, D2, D3, D4>(
        &self,
        cond: Cond<'_, U>,
        then: &ArrayRef<T, D2>,
        else_: &ArrayRef<T, D3>,
        out: &mut ArrayRef<T, D4>,
        mode: Broadcast,
    ) -> Result<()>
    where
        U: Element,
        T: Element,
        D2: Dimension,
        D3: Dimension,
        D4: Dimension,
    {
        write_into(out, |o| {
            self.select_cond_inputs(&cond, then, else_, o, mode)
        })
    }

    fn select_inputs<C, T, D1, D2, D3>(
        &self,
        cond: &ArrayRef<C, D1>,
        then: &ArrayRef<T, D2>,
        else_: &ArrayRef<T, D3>,
        out: TensorMut<'_, T>,
        mode: Broadcast,
    ) -> Result<()>
    where
        C: CondElement,
        T: Element,
        D1: Dimension,
        D2: Dimension,
        D3: Dimension,
    {
        let c = Input::new(cond);
        let (t, e) = (Input::new(then), Input::new(else_));
        let cv = c.view();
        let cond_bytes =
            TensorRef::with_layout(C::as_bytes(cv.data()), cv.shape(), &c.strides, c.offset);
        self.select(cond_bytes, t.view(), e.view(), out, mode)
    }

    fn select_cond_inputs<U, T, D2, D3>(
        &self,
        cond: &Cond<'_, U>,
        then: &ArrayRef<T, D2>,
        else_: &ArrayRef<T, D3>,
        out: TensorMut<'_, T>,
        mode: Broadcast,
    ) -> Result<()>
    where
        U: Element,
        T: Element,
        D2: Dimension,
        D3: Dimension,
    {
        // The operands' broadcast first: its errors name them as written (`lhs`, `rhs`).
        cond.shape()?;
        let (t, e) = (Input::new(then), Input::new(else_));
        cond.with_cond(|c| self.select(c, t.view(), e.view(), out, mode))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_views() {
        assert!(dense(&[2, 3], &[3, 1]));
        assert!(dense(&[2, 3], &[-3, -1]));
        assert!(dense(&[2, 3], &[1, 2]));
        assert!(dense(&[2, 3], &[1, -2]));
        assert!(dense(&[4, 2, 3], &[0, 3, 1]));
        assert!(dense(&[1, 5], &[99, 1]));
        assert!(!dense(&[2, 3], &[6, 2]));
        assert!(!dense(&[2, 3], &[4, 1]));
        assert!(!dense(&[3], &[-2]));
        assert_eq!(span(&[2, 3], &[-3, 1]), Some((-3, 2)));
        assert_eq!(span(&[2, 0], &[-3, 1]), None);
    }
}

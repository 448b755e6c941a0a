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

use ::ndarray::{Array, ArrayRef, Axis, Dimension, IxDyn};

use crate::dtype::Element;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::shape::{Broadcast, output_shape};
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
        let n: usize = shape.iter().product();
        let mut data = vec![T::zeroed(); n];
        self.select_inputs(cond, then, else_, TensorMut::new(&mut data, &shape), mode)?;
        row_major(&shape, data)
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
        let shape = out.shape().to_vec();
        let strides = out.strides().to_vec();
        match span(&shape, &strides) {
            Some((lo, hi)) if dense(&shape, &strides) => {
                let first = out.as_mut_ptr().wrapping_offset(lo);
                let len = (hi - lo) as usize + 1;
                // SAFETY: a `&mut ArrayRef` grants unique read-write access to every element its
                // shape and strides address from `as_mut_ptr()`, all in one allocation; the
                // lowest is `first`, the highest `first + len - 1`, and the view is dense
                // (checked): the range holds only its own elements, borrowed mutably here for
                // the duration of this call.
                let data = unsafe { std::slice::from_raw_parts_mut(first, len) };
                let view = TensorMut::with_layout(data, &shape, &strides, (-lo) as usize);
                self.select_inputs(cond, then, else_, view, mode)
            }
            Some(_) => {
                // Gaps: the result goes through a row-major temporary, validated by the same
                // call, and is copied into `out` only once it is complete.
                let mut buf = vec![T::zeroed(); shape.iter().product()];
                self.select_inputs(cond, then, else_, TensorMut::new(&mut buf, &shape), mode)?;
                let tmp = row_major(&shape, buf)?;
                out.assign(&tmp);
                Ok(())
            }
            // No element: shapes are still checked.
            None => self.select_inputs(cond, then, else_, TensorMut::new(&mut [], &shape), mode),
        }
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

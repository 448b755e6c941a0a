//! Strided tensor views and their validation.
//!
//! A view is a buffer, a shape and, optionally, a stride per dimension in elements (row-major
//! contiguous when absent; 0 broadcasts a dimension; negative strides walk a dimension backwards)
//! and the offset of its first element (coordinate `[0, 0, ...]`) in the buffer. This is the
//! model of numpy and ndarray: a reversed view `a[::-1]` of 5 elements is the same buffer with
//! stride -1 and offset 4. Views borrow their shape and strides, so building one never
//! allocates.
//!
//! Before anything is read, every view is checked: one stride per dimension, and the lowest and
//! highest addressed element — the offset plus, over the dimensions, the sum of the negative
//! (respectively positive) spans `(d - 1) * stride` — inside the buffer. A view with a zero
//! dimension addresses nothing and is always valid, whatever its strides and offset.

use crate::error::{Error, Result, ShapeFmt};
use crate::shape::{Strides, check_shape, dense_strides};

/// A read-only strided view of `T` elements.
#[derive(Debug, Clone, Copy)]
pub struct TensorRef<'a, T> {
    data: &'a [T],
    shape: &'a [usize],
    strides: Option<&'a [isize]>,
    offset: usize,
}

/// A writable strided view of `T` elements.
#[derive(Debug)]
pub struct TensorMut<'a, T> {
    data: &'a mut [T],
    shape: &'a [usize],
    strides: Option<&'a [isize]>,
    offset: usize,
}

impl<'a, T> TensorRef<'a, T> {
    /// A row-major contiguous view starting at the first element of `data`.
    ///
    /// ```
    /// use selectjit::TensorRef;
    /// let v = TensorRef::new(&[1u8, 2, 3, 4, 5, 6], &[2, 3]);
    /// assert_eq!(v.shape(), &[2, 3]);
    /// assert_eq!((v.strides(), v.offset()), (None, 0)); // row-major from the first element
    /// ```
    pub fn new(data: &'a [T], shape: &'a [usize]) -> Self {
        TensorRef {
            data,
            shape,
            strides: None,
            offset: 0,
        }
    }

    /// A view with explicit, non-negative or negative, strides in elements (0 broadcasts),
    /// starting at the first element of `data`. With a negative stride the view would step
    /// before the buffer: use [`TensorRef::with_layout`] to say where its first element is.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, TensorMut, TensorRef};
    /// // One row read twice (stride 0 broadcasts): a [2, 3] view of 3 elements.
    /// let row = [1i32, 2, 3];
    /// let rows = TensorRef::with_strides(&row, &[2, 3], &[0, 1]);
    /// let mut out = [0i32; 6];
    /// selectjit::select(
    ///     TensorRef::new(&[1, 0], &[2, 1]),
    ///     rows,
    ///     TensorRef::scalar(&[0]),
    ///     TensorMut::new(&mut out, &[2, 3]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 2, 3, 0, 0, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_strides(data: &'a [T], shape: &'a [usize], strides: &'a [isize]) -> Self {
        TensorRef::with_layout(data, shape, strides, 0)
    }

    /// A view with explicit strides in elements (0 broadcasts, negative walks backwards) whose
    /// first element, coordinate `[0, 0, ...]`, is `data[offset]`.
    ///
    /// ```
    /// use selectjit::TensorRef;
    /// // `x[::-1]` of x = [1, 2, 3, 4, 5]: stride -1, first element at index 4.
    /// let x = [1.0f32, 2.0, 3.0, 4.0, 5.0];
    /// let rev = TensorRef::with_layout(&x, &[5], &[-1], 4);
    /// assert_eq!(rev.offset(), 4);
    /// ```
    pub fn with_layout(
        data: &'a [T],
        shape: &'a [usize],
        strides: &'a [isize],
        offset: usize,
    ) -> Self {
        TensorRef {
            data,
            shape,
            strides: Some(strides),
            offset,
        }
    }

    /// The same view starting at `data[offset]` instead: the element at coordinate
    /// `[0, 0, ...]` is `data[offset]` (e.g. a contiguous block inside a larger buffer).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, TensorMut, TensorRef};
    /// // The last two elements of a larger buffer.
    /// let buf = [9i32, 9, 1, 2];
    /// let tail = TensorRef::new(&buf, &[2]).with_offset(2);
    /// let mut out = [0i32; 2];
    /// selectjit::select(
    ///     TensorRef::new(&[1, 1], &[2]),
    ///     tail,
    ///     TensorRef::scalar(&[0]),
    ///     TensorMut::new(&mut out, &[2]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    /// A rank-0 view of the first element of `data`.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, TensorMut, TensorRef};
    /// let zero = TensorRef::scalar(&[0i16]);
    /// assert!(zero.shape().is_empty()); // rank 0: broadcasts to any shape
    /// let mut out = [7i16; 3];
    /// selectjit::select(
    ///     TensorRef::new(&[1, 0, 0], &[3]),
    ///     TensorRef::new(&[4i16, 5, 6], &[3]),
    ///     zero,
    ///     TensorMut::new(&mut out, &[3]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [4, 0, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scalar(data: &'a [T]) -> Self {
        TensorRef::new(data, &[])
    }

    /// The whole buffer the view addresses into.
    ///
    /// ```
    /// use selectjit::TensorRef;
    /// let buf = [1.0f32, 2.0, 3.0, 4.0];
    /// let v = TensorRef::new(&buf, &[2]).with_offset(2);
    /// assert_eq!(v.data(), &buf[..]); // the whole buffer, not only the viewed elements
    /// ```
    pub fn data(&self) -> &'a [T] {
        self.data
    }
    /// The view's shape.
    ///
    /// ```
    /// use selectjit::TensorRef;
    /// assert_eq!(TensorRef::new(&[0u8; 6], &[3, 2]).shape(), &[3, 2]);
    /// assert!(TensorRef::scalar(&[0u8]).shape().is_empty());
    /// ```
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }
    /// The explicit strides, if the view has them (`None`: row-major contiguous).
    ///
    /// ```
    /// use selectjit::TensorRef;
    /// let x = [1u8, 2, 3];
    /// assert_eq!(TensorRef::new(&x, &[3]).strides(), None);
    /// assert_eq!(
    ///     TensorRef::with_layout(&x, &[3], &[-1], 2).strides(),
    ///     Some(&[-1isize][..])
    /// );
    /// ```
    pub fn strides(&self) -> Option<&'a [isize]> {
        self.strides
    }
    /// Index in [`TensorRef::data`] of the element at coordinate `[0, 0, ...]`.
    ///
    /// ```
    /// use selectjit::TensorRef;
    /// let x = [1u8, 2, 3, 4];
    /// assert_eq!(TensorRef::new(&x, &[2]).offset(), 0);
    /// assert_eq!(TensorRef::new(&x, &[2]).with_offset(2).offset(), 2);
    /// ```
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl<'a> TensorRef<'a, u8> {
    /// A cond view over Rust `bool`s (always 0 or 1 bytes).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, TensorMut, TensorRef};
    /// let cond = TensorRef::from_bools(&[true, false], &[2]);
    /// assert_eq!(cond.data(), &[1, 0]);
    /// let mut out = [0u32; 2];
    /// selectjit::select(
    ///     cond,
    ///     TensorRef::new(&[1u32, 2], &[2]),
    ///     TensorRef::scalar(&[0u32]),
    ///     TensorMut::new(&mut out, &[2]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_bools(data: &'a [bool], shape: &'a [usize]) -> Self {
        let bytes: &'a [u8] = bytemuck::cast_slice(data);
        TensorRef::new(bytes, shape)
    }
}

impl<'a, T> TensorMut<'a, T> {
    /// A row-major contiguous view starting at the first element of `data`.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, TensorMut, TensorRef};
    /// let mut buf = [0u8; 4];
    /// let out = TensorMut::new(&mut buf, &[2, 2]);
    /// assert_eq!(
    ///     (out.shape(), out.strides(), out.offset()),
    ///     (&[2, 2][..], None, 0)
    /// );
    /// selectjit::select(
    ///     TensorRef::new(&[1, 0], &[2, 1]),
    ///     TensorRef::new(&[1u8, 2], &[2]),
    ///     TensorRef::scalar(&[0u8]),
    ///     out,
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(buf, [1, 2, 0, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(data: &'a mut [T], shape: &'a [usize]) -> Self {
        TensorMut {
            data,
            shape,
            strides: None,
            offset: 0,
        }
    }

    /// A view with explicit strides in elements, starting at the first element of `data`.
    /// Output strides must not make two elements overlap (so none is 0 on a dimension of more
    /// than one element).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, TensorMut, TensorRef};
    /// // Write the first column of a row-major [3, 2] buffer: stride 2.
    /// let mut buf = [0i32; 6];
    /// selectjit::select(
    ///     TensorRef::new(&[1, 0, 1], &[3]),
    ///     TensorRef::new(&[1i32, 2, 3], &[3]),
    ///     TensorRef::scalar(&[-1]),
    ///     TensorMut::with_strides(&mut buf, &[3], &[2]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(buf, [1, 0, -1, 0, 3, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_strides(data: &'a mut [T], shape: &'a [usize], strides: &'a [isize]) -> Self {
        TensorMut::with_layout(data, shape, strides, 0)
    }

    /// A view with explicit strides in elements (negative walks backwards) whose first element,
    /// coordinate `[0, 0, ...]`, is `data[offset]`. Strides must not make two elements overlap.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, TensorMut, TensorRef};
    /// // Write through a reversed view `buf[::-1]`: stride -1, first element at index 2.
    /// let mut buf = [0i32; 3];
    /// selectjit::select(
    ///     TensorRef::new(&[1, 0, 1], &[3]),
    ///     TensorRef::new(&[1i32, 2, 3], &[3]),
    ///     TensorRef::scalar(&[-1]),
    ///     TensorMut::with_layout(&mut buf, &[3], &[-1], 2),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(buf, [3, -1, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_layout(
        data: &'a mut [T],
        shape: &'a [usize],
        strides: &'a [isize],
        offset: usize,
    ) -> Self {
        TensorMut {
            data,
            shape,
            strides: Some(strides),
            offset,
        }
    }

    /// The same view starting at `data[offset]` instead: the element at coordinate
    /// `[0, 0, ...]` is `data[offset]`.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, TensorMut, TensorRef};
    /// // Fill the middle two elements of a larger buffer.
    /// let mut buf = [0u8; 4];
    /// selectjit::select(
    ///     TensorRef::new(&[1, 0], &[2]),
    ///     TensorRef::scalar(&[5u8]),
    ///     TensorRef::scalar(&[6u8]),
    ///     TensorMut::new(&mut buf, &[2]).with_offset(1),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(buf, [0, 5, 6, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    /// The view's shape.
    ///
    /// ```
    /// use selectjit::TensorMut;
    /// let mut buf = [0f32; 6];
    /// assert_eq!(TensorMut::new(&mut buf, &[2, 3]).shape(), &[2, 3]);
    /// ```
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }
    /// The explicit strides, if the view has them (`None`: row-major contiguous).
    ///
    /// ```
    /// use selectjit::TensorMut;
    /// let mut buf = [0f32; 6];
    /// assert_eq!(TensorMut::new(&mut buf, &[2, 3]).strides(), None);
    /// assert_eq!(
    ///     TensorMut::with_strides(&mut buf, &[3], &[2]).strides(),
    ///     Some(&[2isize][..])
    /// );
    /// ```
    pub fn strides(&self) -> Option<&'a [isize]> {
        self.strides
    }
    /// Index in the buffer of the element at coordinate `[0, 0, ...]`.
    ///
    /// ```
    /// use selectjit::TensorMut;
    /// let mut buf = [0f32; 4];
    /// assert_eq!(TensorMut::new(&mut buf, &[2]).with_offset(2).offset(), 2);
    /// assert_eq!(TensorMut::with_layout(&mut buf, &[4], &[-1], 3).offset(), 3);
    /// ```
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// The whole buffer the view addresses into.
    ///
    /// ```
    /// use selectjit::TensorMut;
    /// let mut buf = [1u8, 2, 3, 4];
    /// let tail = TensorMut::new(&mut buf, &[2]).with_offset(2);
    /// assert_eq!(tail.data(), &[1, 2, 3, 4]); // the whole buffer
    /// ```
    pub fn data(&self) -> &[T] {
        self.data
    }
    /// Elements in the buffer.
    pub(crate) fn len(&self) -> usize {
        self.data.len()
    }
    /// The buffer's first element, for a kernel to write through.
    pub(crate) fn data_ptr(&mut self) -> *mut T {
        self.data.as_mut_ptr()
    }
    /// The whole buffer the view addresses into, writable.
    ///
    /// ```
    /// use selectjit::TensorMut;
    /// let mut buf = [0u8; 3];
    /// let mut out = TensorMut::new(&mut buf, &[3]);
    /// out.data_mut().fill(7);
    /// assert_eq!(out.data(), &[7, 7, 7]);
    /// ```
    pub fn data_mut(&mut self) -> &mut [T] {
        self.data
    }
    /// Splits the view into its parts: buffer, shape, strides and offset of the first element.
    ///
    /// ```
    /// use selectjit::TensorMut;
    /// let mut buf = [0u8; 3];
    /// let (data, shape, strides, offset) =
    ///     TensorMut::with_layout(&mut buf, &[3], &[-1], 2).into_parts();
    /// assert_eq!(
    ///     (shape, strides, offset),
    ///     (&[3][..], Some(&[-1isize][..]), 2)
    /// );
    /// data[offset] = 1; // coordinate [0]
    /// assert_eq!(buf, [0, 0, 1]);
    /// ```
    pub fn into_parts(self) -> (&'a mut [T], &'a [usize], Option<&'a [isize]>, usize) {
        (self.data, self.shape, self.strides, self.offset)
    }
}

/// A validated layout: strides in elements (explicit, or row-major), and the offset of the
/// element at coordinate `[0, 0, ...]` (0 for a view with a zero dimension, which addresses
/// nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    pub strides: Strides,
    pub offset: usize,
}

/// Checks a view against its buffer: rank and size limits, one stride per dimension, and every
/// addressed element inside a buffer of `len` elements — the lowest (offset plus the negative
/// spans `(d - 1) * stride`) at index 0 or above, the highest (offset plus the positive spans)
/// below `len`. Errors name the operand and the dimension that leaves the buffer.
pub(crate) fn validate(
    what: &'static str,
    len: usize,
    shape: &[usize],
    strides: Option<&[isize]>,
    offset: usize,
) -> Result<Layout> {
    check_shape(what, shape)?;
    let st: Strides = match strides {
        None => dense_strides(shape),
        Some(s) => {
            if s.len() != shape.len() {
                return Err(Error::Layout {
                    what,
                    msg: format!(
                        "{} strides given for shape {} of rank {}",
                        s.len(),
                        ShapeFmt(shape),
                        shape.len()
                    ),
                });
            }
            s.into()
        }
    };
    if shape.contains(&0) {
        return Ok(Layout {
            strides: st,
            offset: 0,
        });
    }
    let describe = || {
        format!(
            "shape {} with strides {:?} and offset {offset}",
            ShapeFmt(shape),
            st.as_slice()
        )
    };
    let overflow = || Error::Overflow {
        what,
        shape: ShapeFmt(shape).to_string(),
    };
    // Exact arithmetic: each span fits in i128; their sum is checked.
    let (mut lo, mut hi) = (offset as i128, offset as i128);
    let (mut lo_dim, mut hi_dim) = (None, None);
    for (k, (&d, &s)) in shape.iter().zip(st.iter()).enumerate() {
        let span = (d as i128 - 1) * s as i128;
        if span < 0 {
            lo = lo.checked_add(span).ok_or_else(overflow)?;
            if lo < 0 && lo_dim.is_none() {
                lo_dim = Some(k);
            }
        } else {
            hi = hi.checked_add(span).ok_or_else(overflow)?;
            if hi >= len as i128 && hi_dim.is_none() {
                hi_dim = Some(k);
            }
        }
    }
    let step = |k: usize| format!("dim {k}: {} steps of stride {}", shape[k] - 1, st[k]);
    if lo < 0 {
        let k = lo_dim.unwrap_or(0);
        return Err(Error::Layout {
            what,
            msg: format!(
                "{} addresses element {lo}, before the start of the buffer ({})",
                describe(),
                step(k)
            ),
        });
    }
    if hi >= len as i128 {
        let why = match hi_dim {
            Some(k) if offset < len => step(k),
            _ => "the offset is past the last element".to_string(),
        };
        return Err(Error::Layout {
            what,
            msg: format!(
                "buffer holds {len} elements but {} addresses element {hi} ({why})",
                describe()
            ),
        });
    }
    Ok(Layout {
        strides: st,
        offset,
    })
}

/// Rejects an output layout in which two coordinates address the same element. The check is the
/// usual sufficient one: ordered by absolute stride, each dimension's stride exceeds the span of
/// all the smaller ones (the sign of a stride does not change which elements a view covers).
pub(crate) fn check_output_distinct(shape: &[usize], strides: &[isize]) -> Result<()> {
    if shape.contains(&0) {
        return Ok(());
    }
    let mut dims: smallvec::SmallVec<[(usize, usize); 8]> = shape
        .iter()
        .zip(strides)
        .filter(|(d, _)| **d > 1)
        .map(|(&d, &s)| (s.unsigned_abs(), d))
        .collect();
    dims.sort_unstable();
    let mut span: usize = 1; // elements covered by the smaller dims, from the first one
    for &(s, d) in &dims {
        if s < span {
            return Err(Error::Layout {
                what: "output",
                msg: format!(
                    "strides {strides:?} over shape {} make output elements overlap",
                    ShapeFmt(shape)
                ),
            });
        }
        // Validated layouts: every span lies inside the buffer, so this does not overflow.
        span = span.saturating_add(s.saturating_mul(d - 1));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(len: usize, shape: &[usize], strides: Option<&[isize]>) -> Result<Layout> {
        validate("then", len, shape, strides, 0)
    }

    #[test]
    fn validate_checks_length() {
        assert!(v(6, &[2, 3], None).is_ok());
        assert!(v(5, &[2, 3], None).is_err());
        assert!(v(1, &[2, 3], Some(&[1, 0])).is_err());
        assert!(v(2, &[2, 3], Some(&[1, 0])).is_ok());
        assert!(v(0, &[2, 0], None).is_ok());
        assert!(v(9, &[2, 3], Some(&[1])).is_err());
        assert!(v(9, &[3, 3], Some(&[isize::MAX, 1])).is_err());
        assert!(v(9, &[3, 3], Some(&[isize::MIN, 1])).is_err());
        assert!(
            v(
                usize::MAX >> 1,
                &[3, 3, 3],
                Some(&[isize::MAX, isize::MAX, 1])
            )
            .is_err()
        );
    }

    #[test]
    fn negative_strides_need_an_offset() {
        // x[::-1] of 5 elements: stride -1 from element 4.
        let l = validate("then", 5, &[5], Some(&[-1]), 4).unwrap();
        assert_eq!((l.strides.as_slice(), l.offset), (&[-1isize][..], 4));
        // Without the offset it steps before the buffer: the error names operand and dim.
        let e = validate("then", 9, &[2, 3], Some(&[-1, 1]), 0).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("then: ") && msg.contains("dim 0"), "{msg}");
        assert!(msg.contains("before the start"), "{msg}");
        // Mixed signs: rows backwards, columns forwards, inside [0, 6).
        assert!(validate("else", 6, &[2, 3], Some(&[-3, 1]), 3).is_ok());
        assert!(validate("else", 5, &[2, 3], Some(&[-3, 1]), 3).is_err());
        let e = validate("else", 6, &[2, 3], Some(&[3, -1]), 3).unwrap_err();
        assert!(e.to_string().contains("dim 0"), "{e}");
        // The highest element past the end names the dim that gets there.
        let e = validate("cond", 6, &[2, 3], Some(&[-1, 2]), 2).unwrap_err();
        assert!(
            e.to_string().contains("dim 1") && e.to_string().starts_with("cond"),
            "{e}"
        );
        // An offset past the end.
        assert!(validate("cond", 3, &[], None, 3).is_err());
        assert!(validate("cond", 3, &[], None, 2).is_ok());
        // A stride-2 reversed slice, x[::-2] of 7 elements: 4 elements from index 6.
        assert!(validate("then", 7, &[4], Some(&[-2]), 6).is_ok());
        assert!(validate("then", 7, &[4], Some(&[-2]), 5).is_err());
    }

    #[test]
    fn zero_size_views_address_nothing() {
        // Any strides and offset: no element is read or written.
        let l = validate("then", 0, &[0, 3], Some(&[-3, -1]), 17).unwrap();
        assert_eq!(l.offset, 0);
        assert!(validate("then", 4, &[3, 0], Some(&[isize::MIN, 1]), 99).is_ok());
        assert!(check_output_distinct(&[0, 4], &[-1, 0]).is_ok());
    }

    #[test]
    fn output_overlap_is_rejected() {
        assert!(check_output_distinct(&[2, 3], &[3, 1]).is_ok());
        assert!(check_output_distinct(&[2, 3], &[1, 2]).is_ok());
        assert!(check_output_distinct(&[2, 3], &[0, 1]).is_err());
        assert!(check_output_distinct(&[2, 3], &[1, 1]).is_err());
        assert!(check_output_distinct(&[1, 3], &[0, 1]).is_ok());
        // Negative strides: reversed and mixed-sign outputs are distinct, reversed overlaps not.
        assert!(check_output_distinct(&[2, 3], &[-3, -1]).is_ok());
        assert!(check_output_distinct(&[2, 3], &[3, -1]).is_ok());
        assert!(check_output_distinct(&[2, 3], &[-1, 2]).is_ok());
        assert!(check_output_distinct(&[2, 3], &[-1, -1]).is_err());
        assert!(check_output_distinct(&[2, 3], &[2, -1]).is_err());
    }
}

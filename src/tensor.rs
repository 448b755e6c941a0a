//! Strided tensor views and their validation.
//!
//! A view is a buffer, a shape and, optionally, a stride per dimension in elements (row-major
//! contiguous when absent; 0 broadcasts a dimension). Views borrow their shape and strides, so
//! building one never allocates.

use crate::error::{Error, Result, ShapeFmt};
use crate::shape::{Strides, check_shape, contiguous_strides};

/// A read-only strided view of `T` elements.
#[derive(Debug, Clone, Copy)]
pub struct TensorRef<'a, T> {
    data: &'a [T],
    shape: &'a [usize],
    strides: Option<&'a [isize]>,
}

/// A writable strided view of `T` elements.
#[derive(Debug)]
pub struct TensorMut<'a, T> {
    data: &'a mut [T],
    shape: &'a [usize],
    strides: Option<&'a [isize]>,
}

impl<'a, T> TensorRef<'a, T> {
    /// A row-major contiguous view.
    pub fn new(data: &'a [T], shape: &'a [usize]) -> Self {
        TensorRef {
            data,
            shape,
            strides: None,
        }
    }

    /// A view with explicit strides in elements (0 broadcasts; negative strides are rejected when
    /// the view is used).
    pub fn with_strides(data: &'a [T], shape: &'a [usize], strides: &'a [isize]) -> Self {
        TensorRef {
            data,
            shape,
            strides: Some(strides),
        }
    }

    /// A rank-0 view of the first element of `data`.
    pub fn scalar(data: &'a [T]) -> Self {
        TensorRef::new(data, &[])
    }

    pub fn data(&self) -> &'a [T] {
        self.data
    }
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }
    /// The explicit strides, if the view has them.
    pub fn strides(&self) -> Option<&'a [isize]> {
        self.strides
    }
}

impl<'a> TensorRef<'a, u8> {
    /// A cond view over Rust `bool`s (always 0 or 1 bytes).
    pub fn from_bools(data: &'a [bool], shape: &'a [usize]) -> Self {
        let bytes: &'a [u8] = bytemuck::cast_slice(data);
        TensorRef::new(bytes, shape)
    }
}

impl<'a, T> TensorMut<'a, T> {
    /// A row-major contiguous view.
    pub fn new(data: &'a mut [T], shape: &'a [usize]) -> Self {
        TensorMut {
            data,
            shape,
            strides: None,
        }
    }

    /// A view with explicit strides in elements. Output strides must not make two elements overlap.
    pub fn with_strides(data: &'a mut [T], shape: &'a [usize], strides: &'a [isize]) -> Self {
        TensorMut {
            data,
            shape,
            strides: Some(strides),
        }
    }

    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }
    pub fn strides(&self) -> Option<&'a [isize]> {
        self.strides
    }
    pub fn data(&self) -> &[T] {
        self.data
    }
    pub fn data_mut(&mut self) -> &mut [T] {
        self.data
    }
    /// Splits the view into its parts.
    pub fn into_parts(self) -> (&'a mut [T], &'a [usize], Option<&'a [isize]>) {
        (self.data, self.shape, self.strides)
    }
}

/// Checks a view against its buffer: rank and size limits, one stride per dimension, no negative
/// strides, and every addressed element inside a buffer of `len` elements. Returns the strides
/// (computed row-major when the view has none).
pub(crate) fn validate(
    what: &'static str,
    len: usize,
    shape: &[usize],
    strides: Option<&[isize]>,
) -> Result<Strides> {
    check_shape(what, shape)?;
    let st: Strides = match strides {
        None => contiguous_strides(shape),
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
            if let Some(k) = s.iter().position(|&v| v < 0) {
                return Err(Error::Layout {
                    what,
                    msg: format!("negative stride {} in dim {k} is not supported", s[k]),
                });
            }
            s.into()
        }
    };
    let need = extent(shape, &st).ok_or_else(|| Error::Overflow {
        what,
        shape: ShapeFmt(shape).to_string(),
    })?;
    if need > len {
        return Err(Error::Layout {
            what,
            msg: format!(
                "buffer holds {len} elements but shape {} with strides {:?} addresses {need}",
                ShapeFmt(shape),
                st.as_slice()
            ),
        });
    }
    Ok(st)
}

/// Number of elements from the first addressed element to one past the last (0 for an empty
/// shape), or `None` on overflow. Strides are non-negative here.
pub(crate) fn extent(shape: &[usize], strides: &[isize]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    let mut last: usize = 0;
    for (&d, &s) in shape.iter().zip(strides) {
        let step = (d - 1).checked_mul(s as usize)?;
        last = last.checked_add(step)?;
    }
    last.checked_add(1).filter(|&v| v <= isize::MAX as usize)
}

/// Rejects an output layout in which two coordinates address the same element. The check is the
/// usual sufficient one: ordered by stride, each dimension's stride exceeds the span of all the
/// smaller ones.
pub(crate) fn check_output_distinct(shape: &[usize], strides: &[isize]) -> Result<()> {
    if shape.contains(&0) {
        return Ok(());
    }
    let mut dims: smallvec::SmallVec<[(usize, usize); 8]> = shape
        .iter()
        .zip(strides)
        .filter(|(d, _)| **d > 1)
        .map(|(&d, &s)| (s as usize, d))
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
        span += s * (d - 1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_checks_length() {
        assert!(validate("then", 6, &[2, 3], None).is_ok());
        assert!(validate("then", 5, &[2, 3], None).is_err());
        assert!(validate("then", 1, &[2, 3], Some(&[1, 0])).is_err());
        assert!(validate("then", 2, &[2, 3], Some(&[1, 0])).is_ok());
        assert!(validate("then", 0, &[2, 0], None).is_ok());
        assert!(validate("then", 9, &[2, 3], Some(&[1])).is_err());
        assert!(validate("then", 9, &[2, 3], Some(&[-1, 1])).is_err());
        assert!(validate("then", 9, &[3, 3], Some(&[isize::MAX, 1])).is_err());
    }

    #[test]
    fn output_overlap_is_rejected() {
        assert!(check_output_distinct(&[2, 3], &[3, 1]).is_ok());
        assert!(check_output_distinct(&[2, 3], &[1, 2]).is_ok());
        assert!(check_output_distinct(&[2, 3], &[0, 1]).is_err());
        assert!(check_output_distinct(&[2, 3], &[1, 1]).is_err());
        assert!(check_output_distinct(&[1, 3], &[0, 1]).is_ok());
    }
}

//! `SelectjitTensor` and `SelectjitTensorMut`: the element-type codes, and the descriptors a
//! caller hands over, checked into a [`Raw`] before they are viewed as Rust tensors.

use std::ffi::c_int;

use selectjit_core::{DType, MAX_RANK, TensorMut, TensorRef};

use crate::error::{
    Fail, SELECTJIT_ERR_DTYPE, SELECTJIT_ERR_INVALID, SELECTJIT_ERR_LAYOUT,
    SELECTJIT_ERR_NULL_POINTER, fail,
};

/// Element type code of `bool` (one byte; the order of codes is that of `DType::ALL`).
pub const SELECTJIT_DTYPE_BOOL: c_int = 0;
/// Element type code of `int8_t`.
pub const SELECTJIT_DTYPE_I8: c_int = 1;
/// Element type code of `int16_t`.
pub const SELECTJIT_DTYPE_I16: c_int = 2;
/// Element type code of `int32_t`.
pub const SELECTJIT_DTYPE_I32: c_int = 3;
/// Element type code of `int64_t`.
pub const SELECTJIT_DTYPE_I64: c_int = 4;
/// Element type code of `uint8_t`.
pub const SELECTJIT_DTYPE_U8: c_int = 5;
/// Element type code of `uint16_t`.
pub const SELECTJIT_DTYPE_U16: c_int = 6;
/// Element type code of `uint32_t`.
pub const SELECTJIT_DTYPE_U32: c_int = 7;
/// Element type code of `uint64_t`.
pub const SELECTJIT_DTYPE_U64: c_int = 8;
/// Element type code of IEEE half precision (2 bytes).
pub const SELECTJIT_DTYPE_F16: c_int = 9;
/// Element type code of bfloat16 (2 bytes).
pub const SELECTJIT_DTYPE_BF16: c_int = 10;
/// Element type code of `float`.
pub const SELECTJIT_DTYPE_F32: c_int = 11;
/// Element type code of `double`.
pub const SELECTJIT_DTYPE_F64: c_int = 12;
/// Element type code of a complex of two `float`s.
pub const SELECTJIT_DTYPE_COMPLEX64: c_int = 13;
/// Element type code of a complex of two `double`s.
pub const SELECTJIT_DTYPE_COMPLEX128: c_int = 14;

/// A tensor handed over by C: `len_bytes` bytes at `data`, `rank` dims at `shape`, `rank` signed
/// element strides at `strides` (NULL for row-major contiguous), and `offset`, the index in
/// elements of the element at coordinate `[0, 0, ...]` in the buffer.
///
/// Negative strides walk a dimension backwards from that element, as numpy's and ndarray's views
/// do: `data`/`len_bytes` describe the whole buffer, and `offset` says where the view starts in
/// it. A reversed view of 5 elements is `strides = {-1}`, `offset = 4`; rows reversed in a
/// `[2, 3]` buffer is `strides = {-3, 1}`, `offset = 3`. Every element the view addresses
/// (offset plus the negative spans `(d - 1) * stride`, up to offset plus the positive spans) must
/// lie inside the buffer; a view with a zero dimension addresses nothing. `offset` is the last
/// field, so an initialiser that leaves it out gets 0 (the view starts at `data`). A rank-0
/// tensor is a scalar (one element).
#[repr(C)]
pub struct SelectjitTensor {
    /// The buffer's first byte (may be NULL when `len_bytes` is 0).
    pub data: *const u8,
    /// The buffer's length in bytes.
    pub len_bytes: usize,
    /// `rank` dimensions (may be NULL when `rank` is 0).
    pub shape: *const usize,
    /// Number of dimensions, at most 64.
    pub rank: usize,
    /// `rank` strides in elements (negative allowed), or NULL for row-major contiguous.
    pub strides: *const isize,
    /// Index in elements of the view's first element (coordinate `[0, 0, ...]`) in the buffer.
    pub offset: usize,
}

impl SelectjitTensor {
    /// No data, rank 0 (a field the caller's struct does not have).
    pub(crate) fn empty() -> SelectjitTensor {
        SelectjitTensor {
            data: std::ptr::null(),
            len_bytes: 0,
            shape: std::ptr::null(),
            rank: 0,
            strides: std::ptr::null(),
            offset: 0,
        }
    }
}

/// An output tensor: the fields of `SelectjitTensor` with a writable `data`.
#[repr(C)]
pub struct SelectjitTensorMut {
    /// The buffer's first byte (may be NULL when `len_bytes` is 0).
    pub data: *mut u8,
    /// The buffer's length in bytes.
    pub len_bytes: usize,
    /// `rank` dimensions (may be NULL when `rank` is 0).
    pub shape: *const usize,
    /// Number of dimensions, at most 64.
    pub rank: usize,
    /// `rank` strides in elements (negative allowed), or NULL for row-major contiguous.
    pub strides: *const isize,
    /// Index in elements of the view's first element (coordinate `[0, 0, ...]`) in the buffer.
    pub offset: usize,
}

pub(crate) fn dtype_of(code: c_int) -> Result<DType, Fail> {
    usize::try_from(code)
        .ok()
        .and_then(|i| DType::ALL.get(i).copied())
        .ok_or_else(|| fail(SELECTJIT_ERR_DTYPE, format!("unknown dtype code {code}")))
}

/// A C tensor read but not yet turned into a slice: the data stays a raw pointer until we know
/// how it is used, so that no shared slice of the output's memory exists next to its `&mut`.
pub(crate) struct Raw<'a> {
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
    pub(crate) shape: &'a [usize],
    pub(crate) strides: Option<&'a [isize]>,
    pub(crate) offset: usize,
}

/// Whether `bytes` and the tensor `o`'s buffer share a byte.
pub(crate) fn overlaps_bytes(bytes: &[u8], o: &Raw) -> bool {
    let (a0, a1) = (
        bytes.as_ptr() as usize,
        bytes.as_ptr() as usize + bytes.len(),
    );
    let (b0, b1) = o.range();
    !bytes.is_empty() && o.len > 0 && a0 < b1 && b0 < a1
}

impl<'a> Raw<'a> {
    fn range(&self) -> (usize, usize) {
        (self.ptr as usize, self.ptr as usize + self.len)
    }

    pub(crate) fn overlaps(&self, o: &Raw) -> bool {
        let ((a0, a1), (b0, b1)) = (self.range(), o.range());
        self.len > 0 && o.len > 0 && a0 < b1 && b0 < a1
    }

    pub(crate) fn same(&self, o: &Raw) -> bool {
        std::ptr::eq(self.ptr, o.ptr)
            && self.len == o.len
            && self.shape == o.shape
            && self.strides == o.strides
            && self.offset == o.offset
    }

    /// A read-only view.
    ///
    /// # Safety
    /// `ptr` covers `len` readable bytes (checked non-NULL when `len > 0`), and no `&mut` to
    /// this memory is alive while the view is.
    pub(crate) unsafe fn view(&self) -> TensorRef<'a, u8> {
        let data: &'a [u8] = if self.len == 0 {
            &[]
        } else {
            // SAFETY: `len > 0`, so `ptr` is non-NULL (checked by `raw_parts`); it covers `len`
            // readable bytes and no `&mut` to them is alive (the function's contract).
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        };
        match self.strides {
            Some(st) => TensorRef::with_layout(data, self.shape, st, self.offset),
            None => TensorRef::new(data, self.shape).with_offset(self.offset),
        }
    }

    /// A writable view.
    ///
    /// # Safety
    /// `ptr` covers `len` writable bytes handed over by the caller (a `SelectjitTensorMut`),
    /// and no other reference to this memory is alive while the view is.
    pub(crate) unsafe fn view_mut(&self) -> TensorMut<'a, u8> {
        let data: &'a mut [u8] = if self.len == 0 {
            &mut []
        } else {
            // SAFETY: `len > 0`, so `ptr` is non-NULL (checked by `raw_parts`); it covers `len`
            // writable bytes and no other reference to them is alive (the function's contract).
            unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u8, self.len) }
        };
        match self.strides {
            Some(st) => TensorMut::with_layout(data, self.shape, st, self.offset),
            None => TensorMut::new(data, self.shape).with_offset(self.offset),
        }
    }
}

/// Reads a shape array of `rank` entries.
///
/// # Safety
/// `shape` points at `rank` readable `usize`s (or is NULL with rank 0).
pub(crate) unsafe fn shape_of<'a>(
    what: &str,
    shape: *const usize,
    rank: usize,
) -> Result<&'a [usize], Fail> {
    if rank > MAX_RANK {
        return Err(fail(
            SELECTJIT_ERR_INVALID,
            format!("{what}: rank {rank} is more than {MAX_RANK}"),
        ));
    }
    if rank == 0 {
        return Ok(&[]);
    }
    if shape.is_null() {
        return Err(fail(
            SELECTJIT_ERR_NULL_POINTER,
            format!("{what}: shape is NULL"),
        ));
    }
    // SAFETY: non-NULL, and the caller promises `rank` (checked <= 64) entries.
    Ok(unsafe { std::slice::from_raw_parts(shape, rank) })
}

/// The fields of a tensor descriptor, checked.
///
/// # Safety
/// The pointers honour the lengths stated with them (the documented contract of the C API).
unsafe fn raw_parts<'a>(
    what: &str,
    data: *const u8,
    len_bytes: usize,
    (shape, rank): (*const usize, usize),
    strides: *const isize,
    offset: usize,
) -> Result<Raw<'a>, Fail> {
    // SAFETY: `shape` covers `rank` entries (the function's contract); `shape_of` checks the
    // rank (<= 64) and NULL before reading.
    let shape = unsafe { shape_of(what, shape, rank) }?;
    let strides = if strides.is_null() {
        None
    } else {
        // SAFETY: non-NULL; `rank` entries per the contract (rank checked above).
        Some(unsafe { std::slice::from_raw_parts(strides, rank) })
    };
    if len_bytes > 0 && data.is_null() {
        return Err(fail(
            SELECTJIT_ERR_NULL_POINTER,
            format!("{what}: data is NULL"),
        ));
    }
    if len_bytes > isize::MAX as usize {
        return Err(fail(
            SELECTJIT_ERR_LAYOUT,
            format!("{what}: length too large"),
        ));
    }
    Ok(Raw {
        ptr: data,
        len: len_bytes,
        shape,
        strides,
        offset,
    })
}

/// # Safety
/// `t` is NULL or points at a valid `SelectjitTensor` whose pointers honour its lengths.
pub(crate) unsafe fn raw<'a>(what: &str, t: *const SelectjitTensor) -> Result<Raw<'a>, Fail> {
    if t.is_null() {
        return Err(fail(SELECTJIT_ERR_NULL_POINTER, format!("{what} is NULL")));
    }
    // SAFETY: non-NULL (checked above); the caller passes a valid descriptor.
    let t = unsafe { &*t };
    // SAFETY: the descriptor's pointers honour its lengths (the function's contract);
    // `raw_parts` checks NULLs and the rank before reading.
    unsafe {
        raw_parts(
            what,
            t.data,
            t.len_bytes,
            (t.shape, t.rank),
            t.strides,
            t.offset,
        )
    }
}

/// # Safety
/// `t` is NULL or points at a valid `SelectjitTensorMut` whose pointers honour its lengths.
pub(crate) unsafe fn raw_mut<'a>(
    what: &str,
    t: *const SelectjitTensorMut,
) -> Result<Raw<'a>, Fail> {
    if t.is_null() {
        return Err(fail(SELECTJIT_ERR_NULL_POINTER, format!("{what} is NULL")));
    }
    // SAFETY: non-NULL (checked above); the caller passes a valid descriptor.
    let t = unsafe { &*t };
    // SAFETY: the descriptor's pointers honour its lengths (the function's contract);
    // `raw_parts` checks NULLs and the rank before reading.
    unsafe {
        raw_parts(
            what,
            t.data,
            t.len_bytes,
            (t.shape, t.rank),
            t.strides,
            t.offset,
        )
    }
}

/// The three input shapes of a call.
///
/// # Safety
/// Each pointer covers its rank (see `shape_of`).
pub(crate) unsafe fn shapes3<'a>(
    c: (*const usize, usize),
    t: (*const usize, usize),
    e: (*const usize, usize),
) -> Result<[&'a [usize]; 3], Fail> {
    // SAFETY: each pointer covers its rank (the function's contract); `shape_of` checks the
    // rank (<= 64) and NULL before reading.
    unsafe {
        Ok([
            shape_of("cond", c.0, c.1)?,
            shape_of("then", t.0, t.1)?,
            shape_of("else", e.0, e.1)?,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_codes_follow_dtype_all() {
        let codes = [
            (SELECTJIT_DTYPE_BOOL, DType::Bool),
            (SELECTJIT_DTYPE_I64, DType::I64),
            (SELECTJIT_DTYPE_BF16, DType::BF16),
            (SELECTJIT_DTYPE_F32, DType::F32),
            (SELECTJIT_DTYPE_COMPLEX128, DType::Complex128),
        ];
        for (c, d) in codes {
            assert!(matches!(dtype_of(c), Ok(x) if x == d));
        }
        assert!(dtype_of(15).is_err() && dtype_of(-1).is_err());
    }
}

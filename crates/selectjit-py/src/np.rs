//! Thin wrappers over the numpy C API (through rust-numpy's `PY_ARRAY_API`) and the few numpy
//! Python functions the module uses. Every raw call is here, each with its safety argument.

use std::os::raw::c_int;

use numpy::npyffi::{
    self, NPY_ARRAY_WRITEABLE, NPY_ITEM_REFCOUNT, NPY_ORDER, NpyTypes, PY_ARRAY_API,
};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// `numpy.ndarray`.
pub fn ndarray_type(py: Python<'_>) -> *mut pyo3::ffi::PyTypeObject {
    // SAFETY: reads a type object pointer from numpy's API table, which rust-numpy imports (and
    // checks against the running numpy) on first use; the GIL is held (`py`).
    unsafe { npyffi::get_type_object(py, NpyTypes::PyArray_Type) }
}

/// Whether `obj` is exactly a `numpy.ndarray` (no subclass).
#[inline]
pub fn is_exact_ndarray(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: `obj` is a live object (borrowed with the GIL held); only its type pointer is read.
    unsafe { pyo3::ffi::Py_TYPE(obj.as_ptr()) == ndarray_type(obj.py()) }
}

/// Whether `obj` is a numpy scalar (an instance of `numpy.generic`).
#[inline]
pub fn is_numpy_scalar(obj: &Bound<'_, PyAny>) -> bool {
    let py = obj.py();
    // SAFETY: reads a type object pointer from numpy's API table (as in `ndarray_type`) and
    // checks the type of a live object with the GIL held.
    unsafe {
        let t = npyffi::get_type_object(py, NpyTypes::PyGenericArrType_Type);
        pyo3::ffi::PyObject_TypeCheck(obj.as_ptr(), t) != 0
    }
}

/// Whether `obj` is a `numpy.ndarray` or an instance of a subclass.
#[inline]
pub fn is_ndarray(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyUntypedArray>()
}

/// `numpy.asarray(obj)` as numpy's `where` does it (`PyArray_FROM_O`): arrays (subclasses
/// included) are returned as they are, anything else is converted.
pub fn from_any<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    if is_ndarray(obj) {
        // SAFETY: checked to be an ndarray (or subclass) just above.
        return Ok(unsafe { obj.clone().cast_into_unchecked() });
    }
    let py = obj.py();
    // SAFETY: PyArray_FromAny with no requested dtype, depth or flags is `PyArray_FROM_O`; it
    // returns a new reference to an ndarray, or NULL with a Python error set, which
    // `from_owned_ptr_or_err` turns into `Err`.
    unsafe {
        let p = PY_ARRAY_API.PyArray_FromAny(
            py,
            obj.as_ptr(),
            std::ptr::null_mut(),
            0,
            0,
            0,
            std::ptr::null_mut(),
        );
        Ok(Bound::from_owned_ptr_or_err(py, p)?.cast_into_unchecked())
    }
}

/// The raw fields of an array that the call reads.
pub struct ArrayInfo {
    pub data: *mut u8,
    pub flags: c_int,
}

/// Data pointer, dtype pointer and flags of `a`.
#[inline]
pub fn info(a: &Bound<'_, PyUntypedArray>) -> ArrayInfo {
    // SAFETY: `a` is a live ndarray; its fields struct is read while the GIL is held.
    let f = unsafe { &*npyffi::_PyArray_GET_ITEM_DATA(a.as_array_ptr()) };
    ArrayInfo {
        data: f.data.cast(),
        flags: f.flags,
    }
}

/// Whether the array's memory may be written.
#[inline]
pub fn writeable(a: &Bound<'_, PyUntypedArray>) -> bool {
    info(a).flags & NPY_ARRAY_WRITEABLE != 0
}

/// Whether numpy's `where` moves elements of this dtype as plain bytes: no object references
/// inside, and an itemsize of 1, 2, 4, 8 or 16 (numpy's own `trivial_copy_loop`).
pub fn movable(d: &Bound<'_, PyArrayDescr>) -> bool {
    d.flags() & NPY_ITEM_REFCOUNT == 0 && matches!(d.itemsize(), 1 | 2 | 4 | 8 | 16)
}

/// Whether two dtypes have the same binary layout (`PyArray_EquivTypes`).
pub fn equiv(a: &Bound<'_, PyArrayDescr>, b: &Bound<'_, PyArrayDescr>) -> bool {
    a.is_equiv_to(b)
}

/// `a.astype(dtype)` (unsafe casting, C order): numpy's own cast, as its `where` applies it to
/// inputs whose dtype is not the result's.
pub fn cast<'py>(
    a: &Bound<'py, PyUntypedArray>,
    dtype: &Bound<'py, PyArrayDescr>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = a.py();
    // SAFETY: PyArray_CastToType steals a reference to the descriptor, so one is made for it
    // (`into_dtype_ptr` on a clone); it returns a new array or NULL with an error set.
    unsafe {
        let p = PY_ARRAY_API.PyArray_CastToType(
            py,
            a.as_array_ptr(),
            dtype.clone().into_dtype_ptr(),
            0,
        );
        Ok(Bound::from_owned_ptr_or_err(py, p)?.cast_into_unchecked())
    }
}

/// A copy of `a` in its own memory (C order).
pub fn copy<'py>(a: &Bound<'py, PyUntypedArray>) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = a.py();
    // SAFETY: PyArray_NewCopy returns a new array or NULL with an error set.
    unsafe {
        let p = PY_ARRAY_API.PyArray_NewCopy(py, a.as_array_ptr(), NPY_ORDER::NPY_CORDER);
        Ok(Bound::from_owned_ptr_or_err(py, p)?.cast_into_unchecked())
    }
}

/// The boolean dtype.
pub fn bool_descr(py: Python<'_>) -> Bound<'_, PyArrayDescr> {
    numpy::dtype::<bool>(py)
}

/// A new, uninitialised array of `dtype` with the given shape and byte strides, which must keep
/// every element inside `shape.product() * itemsize` bytes from the start (as the gap-free
/// layouts of [`crate::layout::numpy_out_strides`] do; checked). Its memory comes from
/// `handler`'s pool when it has one and the array is of a pooled size.
pub fn empty<'py>(
    py: Python<'py>,
    dtype: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
    strides: &[isize],
    handler: &crate::memhandler::Handler,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let itemsize = dtype.itemsize();
    let n = shape
        .iter()
        .try_fold(itemsize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize);
    let fits = match (n, crate::layout::byte_range(shape, strides, itemsize)) {
        (None, _) => false,
        (Some(_), None) => shape.contains(&0),
        (Some(n), Some((lo, hi))) => lo >= 0 && hi as usize <= n,
    };
    if strides.len() != shape.len() || !fits {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
            "selectjit: internal error: strides {strides:?} do not fit shape {shape:?}"
        )));
    }
    let mut dims: crate::layout::Dims<npyffi::npy_intp> =
        shape.iter().map(|&d| d as npyffi::npy_intp).collect();
    let mut st: crate::layout::Dims<npyffi::npy_intp> = strides.iter().copied().collect();
    // SAFETY: `dims` and `st` hold `shape.len()` entries each and outlive the call, which copies
    // them; the descriptor reference is stolen, so one is made for it. With no data pointer numpy
    // allocates `product(dims) * itemsize` bytes and uses the strides given (as its iterator does
    // for allocated outputs); every element they address lies in those bytes (checked above).
    // The result is a new array or NULL with an error set.
    handler.around(py, n.unwrap_or(0), || unsafe {
        let p = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            ndarray_type(py),
            dtype.clone().into_dtype_ptr(),
            shape.len() as c_int,
            dims.as_mut_ptr(),
            if shape.is_empty() {
                std::ptr::null_mut()
            } else {
                st.as_mut_ptr()
            },
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        );
        Ok(Bound::from_owned_ptr_or_err(py, p)?.cast_into_unchecked())
    })
}

/// A new, uninitialised C-contiguous array of `dtype` and `shape` (its memory from `handler`'s
/// pool as in [`empty`]).
pub fn empty_c<'py>(
    py: Python<'py>,
    dtype: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
    handler: &crate::memhandler::Handler,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let n = shape
        .iter()
        .try_fold(dtype.itemsize(), |a, &d| a.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| pyo3::exceptions::PyMemoryError::new_err("array is too big"))?;
    let mut dims: crate::layout::Dims<npyffi::npy_intp> =
        shape.iter().map(|&d| d as npyffi::npy_intp).collect();
    // SAFETY: `dims` holds `shape.len()` entries and outlives the call, which copies them; the
    // descriptor reference is stolen, so one is made for it. With no data pointer and no
    // strides numpy allocates `n` bytes as a C-contiguous array. The result is a new array or
    // NULL with an error set.
    handler.around(py, n, || unsafe {
        let p = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            ndarray_type(py),
            dtype.clone().into_dtype_ptr(),
            shape.len() as c_int,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        );
        Ok(Bound::from_owned_ptr_or_err(py, p)?.cast_into_unchecked())
    })
}

/// `numpy.copyto(dst, src)` for arrays of one dtype and shape: a byte-exact element copy.
pub fn copy_into(dst: &Bound<'_, PyUntypedArray>, src: &Bound<'_, PyUntypedArray>) -> PyResult<()> {
    let py = dst.py();
    // SAFETY: both are live arrays; PyArray_CopyInto returns -1 with an error set on failure.
    let r = unsafe { PY_ARRAY_API.PyArray_CopyInto(py, dst.as_array_ptr(), src.as_array_ptr()) };
    if r < 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(())
}

/// Cached numpy objects.
pub struct Numpy {
    pub where_: Py<PyAny>,
    pub result_type: Py<PyAny>,
    pub array_function: Py<PyAny>,
}

/// numpy's `where`, `result_type` and `ndarray.__array_function__`, imported once.
pub fn numpy(py: Python<'_>) -> PyResult<&Numpy> {
    static NUMPY: PyOnceLock<Numpy> = PyOnceLock::new();
    NUMPY.get_or_try_init(py, || {
        let np = py.import("numpy")?;
        Ok(Numpy {
            where_: np.getattr("where")?.unbind(),
            result_type: np.getattr("result_type")?.unbind(),
            array_function: np
                .getattr("ndarray")?
                .getattr("__array_function__")?
                .unbind(),
        })
    })
}

/// The dtype of `a`.
#[inline]
pub fn dtype<'py>(a: &Bound<'py, PyUntypedArray>) -> Bound<'py, PyArrayDescr> {
    a.dtype()
}

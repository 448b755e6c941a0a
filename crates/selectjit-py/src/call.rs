//! `where(condition, x, y, out=..., broadcast=...)`: numpy's semantics, the library's kernels.
//!
//! The steps follow numpy's own `where` (`PyArray_Where`): the three arguments become arrays as
//! `numpy.asarray` makes them; the result dtype is `numpy.result_type(x, y)` with Python scalars
//! weak; `x` and `y` are cast to it (numpy's cast) when their dtype differs; the condition is
//! cast to bool unless it is one byte of bool or integer (where "non-zero" is the byte itself);
//! the output is allocated in the memory order numpy's iterator picks. Then the library moves
//! the elements, with the GIL released for calls of more than 500 elements (numpy's threshold).
//!
//! What goes to numpy instead: arguments that override `__array_function__` (numpy would hand
//! them to their library), and result dtypes numpy does not move as plain bytes (object,
//! strings or structures whose itemsize is not 1, 2, 4, 8 or 16).

use std::panic::{AssertUnwindSafe, catch_unwind};

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyComplex, PyFloat, PyInt, PyList, PyTuple};
use selectjit::shape::Placement;
use selectjit::{Broadcast, DType, Engine, TensorMut, TensorRef, engine::InPlace};

use crate::layout::{self, ElemView};
use crate::np;
use crate::promote;

/// Output elements from which the GIL is released while the kernel runs (numpy's `where`
/// releases it from the same size).
const DETACH_MIN_ELEMENTS: usize = 500;

/// Shapes as numpy prints them: `(2, 3)`, `(4,)`, `()`.
pub fn shape_str(s: &[usize]) -> String {
    match s {
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Whether numpy's `where` would hand `obj` to another library through `__array_function__`.
fn dispatches(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    if np::is_exact_ndarray(obj)
        || obj.is_none()
        || obj.is_exact_instance_of::<PyFloat>()
        || obj.is_exact_instance_of::<PyInt>()
        || obj.is_exact_instance_of::<PyBool>()
        || obj.is_exact_instance_of::<PyComplex>()
        || obj.is_exact_instance_of::<PyList>()
        || obj.is_exact_instance_of::<PyTuple>()
    {
        return Ok(false);
    }
    let py = obj.py();
    match obj
        .get_type()
        .getattr_opt(pyo3::intern!(py, "__array_function__"))?
    {
        None => Ok(false),
        Some(f) => Ok(!f.is(np::numpy(py)?.array_function.bind(py))),
    }
}

/// The library's dtype for moving elements of `itemsize` bytes (kernels depend on the width
/// only).
fn width_dtype(itemsize: usize) -> Option<DType> {
    Some(match itemsize {
        1 => DType::U8,
        2 => DType::U16,
        4 => DType::U32,
        8 => DType::U64,
        16 => DType::Complex128,
        _ => return None,
    })
}

fn lib_error(e: selectjit::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The checks on `out=`: an ndarray of the output shape and the result dtype, writeable.
fn check_out<'py>(
    out: &Bound<'py, PyAny>,
    shape: &[usize],
    dt: &Bound<'py, PyArrayDescr>,
    inputs: [&Bound<'py, PyUntypedArray>; 3],
) -> PyResult<Bound<'py, PyUntypedArray>> {
    if !np::is_ndarray(out) {
        return Err(PyTypeError::new_err(format!(
            "out must be a numpy.ndarray, not {}",
            out.get_type().name()?
        )));
    }
    // SAFETY: checked to be an ndarray (or subclass) just above.
    let o: Bound<'py, PyUntypedArray> = unsafe { out.clone().cast_into_unchecked() };
    if o.shape() != shape {
        return Err(PyValueError::new_err(format!(
            "out has shape {} but condition {}, x {} and y {} broadcast to {}",
            shape_str(o.shape()),
            shape_str(inputs[0].shape()),
            shape_str(inputs[1].shape()),
            shape_str(inputs[2].shape()),
            shape_str(shape)
        )));
    }
    let od = np::dtype(&o);
    if !np::equiv(&od, dt) {
        return Err(PyTypeError::new_err(format!(
            "out has dtype {} but the result of x ({}) and y ({}) has dtype {} (out shape {})",
            od.str()?,
            np::dtype(inputs[1]).str()?,
            np::dtype(inputs[2]).str()?,
            dt.str()?,
            shape_str(shape)
        )));
    }
    if !np::writeable(&o) {
        return Err(PyValueError::new_err(format!(
            "out is not writeable (shape {}, dtype {})",
            shape_str(shape),
            od.str()?
        )));
    }
    Ok(o)
}

/// An operand ready for the library: its array (kept alive), the view and the absolute byte
/// range of its buffer.
struct Operand<'py> {
    arr: Bound<'py, PyUntypedArray>,
    view: ElemView,
    /// `[start, end)` of the buffer, absolute addresses (empty for a view of nothing).
    range: (usize, usize),
}

impl<'py> Operand<'py> {
    /// The operand over `arr` with elements of `itemsize` bytes, copying `arr` first when its
    /// strides cannot be expressed in elements.
    fn new(arr: Bound<'py, PyUntypedArray>, itemsize: usize) -> PyResult<Self> {
        match layout::elem_view(arr.shape(), arr.strides(), itemsize) {
            Some(view) => Ok(Operand::with_view(arr, view)),
            None => {
                let c = np::copy(&arr)?;
                let view =
                    layout::elem_view(c.shape(), c.strides(), itemsize).ok_or_else(|| {
                        PyRuntimeError::new_err("a C-contiguous copy has no element layout")
                    })?;
                Ok(Operand::with_view(c, view))
            }
        }
    }

    fn with_view(arr: Bound<'py, PyUntypedArray>, view: ElemView) -> Self {
        let base = np::info(&arr).data as usize;
        let start = base.wrapping_add_signed(view.start);
        Operand {
            range: (start, start.wrapping_add(view.len)),
            arr,
            view,
        }
    }

    fn data_ptr(&self) -> *mut u8 {
        np::info(&self.arr).data
    }

    /// The operand's buffer as a byte slice.
    ///
    /// # Safety
    /// No `&mut` slice over any byte of the range may exist while the returned slice is alive
    /// (the caller keeps the output's range apart from every input's, see `run`).
    unsafe fn bytes(&self) -> &[u8] {
        if self.view.len == 0 {
            return &[];
        }
        // SAFETY: `view` was computed from this array's own shape and strides (`elem_view`),
        // so `[data + start, data + start + len)` is exactly the span from the lowest to the
        // highest byte of the elements the array addresses, memory numpy owns for the array's
        // lifetime (`self.arr` keeps it alive while the slice lives, as the slice borrows
        // `self`). The caller guarantees the absence of aliasing `&mut` slices.
        unsafe {
            std::slice::from_raw_parts(self.data_ptr().offset(self.view.start), self.view.len)
        }
    }

    /// The operand's buffer as a mutable byte slice.
    ///
    /// # Safety
    /// No other slice over any byte of the range may exist while the returned one is alive.
    #[allow(clippy::mut_from_ref)]
    unsafe fn bytes_mut(&self) -> &mut [u8] {
        if self.view.len == 0 {
            return &mut [];
        }
        // SAFETY: as in `bytes` for the extent and lifetime; exclusivity is the caller's
        // guarantee (the output is only ever this one slice, and no input slice overlaps it).
        unsafe {
            std::slice::from_raw_parts_mut(self.data_ptr().offset(self.view.start), self.view.len)
        }
    }

    fn overlaps(&self, other: &Operand<'_>) -> bool {
        self.view.len != 0 && other.view.len != 0 && layout::overlaps(self.range, other.range)
    }

    /// Same memory, same layout: an exact in-place operand of `out`.
    fn same_as(&self, out: &Operand<'_>) -> bool {
        self.arr.shape() == out.arr.shape() && self.view == out.view && self.range == out.range
    }
}

/// `where` on `engine` (the body of `selectjit.where` and `Engine.where`).
pub fn where_call<'py>(
    engine: &Engine,
    cond: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    mode: Broadcast,
) -> PyResult<Bound<'py, PyAny>> {
    let py = cond.py();
    if mode == Broadcast::Numpy && (dispatches(cond)? || dispatches(x)? || dispatches(y)?) {
        let r = np::numpy(py)?.where_.bind(py).call1((cond, x, y))?;
        return match out {
            None => Ok(r),
            Some(o) => {
                let ra = np::from_any(&r)?;
                let o = check_out(o, ra.shape(), &np::dtype(&ra), [&ra, &ra, &ra])?;
                np::copy_into(&o, &ra)?;
                Ok(o.into_any())
            }
        };
    }
    let ca = np::from_any(cond)?;
    let xa = np::from_any(x)?;
    let ya = np::from_any(y)?;
    let dt = promote::result_dtype(x, &xa, y, &ya)?;
    let b =
        selectjit::broadcast_shapes(mode, ca.shape(), xa.shape(), ya.shape()).map_err(lib_error)?;
    let out_arr = match out {
        Some(o) => Some(check_out(o, &b.out, &dt, [&ca, &xa, &ya])?),
        None => None,
    };
    let itemsize = dt.itemsize();
    let lib_dt = width_dtype(itemsize).filter(|_| np::movable(&dt));
    let Some(lib_dt) = lib_dt else {
        return numpy_fallback(cond, x, y, [&ca, &xa, &ya], &b, mode, out_arr);
    };

    // The output: the caller's, or a new array in numpy's memory order.
    let fresh_out = out_arr.is_none();
    let o = match out_arr {
        Some(o) => o,
        None => {
            let st = |a: &Bound<'py, PyUntypedArray>, p: Placement| {
                layout::strides_over_output(&b.out, a.shape(), a.strides(), p.start, p.len)
            };
            let ops = [st(&ca, b.cond), st(&xa, b.then), st(&ya, b.else_)];
            let strides = layout::numpy_out_strides(&b.out, &[&ops[0], &ops[1], &ops[2]], itemsize);
            np::empty(py, &dt, &b.out, &strides)?
        }
    };
    if b.out.contains(&0) {
        return Ok(o.into_any());
    }

    // Inputs as the kernels take them: cond as bytes that are non-zero where numpy's bool cast
    // is true, x and y in the result dtype.
    let c1 = {
        let cd = np::dtype(&ca);
        if cd.itemsize() == 1 && matches!(cd.kind(), b'b' | b'i' | b'u') {
            ca.clone()
        } else {
            np::cast(&ca, &np::bool_descr(py))?
        }
    };
    let to_dt = |a: &Bound<'py, PyUntypedArray>| -> PyResult<Bound<'py, PyUntypedArray>> {
        if np::equiv(&np::dtype(a), &dt) {
            Ok(a.clone())
        } else {
            np::cast(a, &dt)
        }
    };
    let (x1, y1) = (to_dt(&xa)?, to_dt(&ya)?);

    // An output whose strides are not whole elements gets the result through a temporary.
    let (target, copy_back) = match layout::elem_view(o.shape(), o.strides(), itemsize) {
        Some(v) => (Operand::with_view(o.clone(), v), false),
        None => {
            let st = layout::numpy_out_strides(&b.out, &[], itemsize);
            let t = np::empty(py, &dt, &b.out, &st)?;
            (Operand::new(t, itemsize)?, true)
        }
    };
    let mut c_op = Operand::new(c1, 1)?;
    let mut x_op = Operand::new(x1, itemsize)?;
    let mut y_op = Operand::new(y1, itemsize)?;

    // Overlap with the caller's output: an input that is the output itself (same memory and
    // layout) runs in place; any other overlap reads a copy, as numpy's ufuncs do.
    let mut role = None;
    if !fresh_out && !copy_back {
        if x_op.overlaps(&target) && x_op.same_as(&target) {
            role = Some(InPlace::Then);
        } else if y_op.overlaps(&target) && y_op.same_as(&target) {
            role = Some(InPlace::Else);
        }
        if c_op.overlaps(&target) {
            c_op = Operand::new(np::copy(&c_op.arr)?, 1)?;
        }
        if role != Some(InPlace::Then) && x_op.overlaps(&target) {
            x_op = Operand::new(np::copy(&x_op.arr)?, itemsize)?;
        }
        if role != Some(InPlace::Else) && y_op.overlaps(&target) {
            y_op = Operand::new(np::copy(&y_op.arr)?, itemsize)?;
        }
    }
    run(
        py,
        engine,
        lib_dt,
        mode,
        (&c_op, &x_op, &y_op, &target),
        (ca.shape(), xa.shape(), ya.shape(), &b.out),
        role,
    )?;
    if copy_back {
        np::copy_into(&o, &target.arr)?;
    }
    Ok(o.into_any())
}

/// Runs the library on prepared operands: `shapes` are cond's, x's, y's and the output's.
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    engine: &Engine,
    dt: DType,
    mode: Broadcast,
    (c, x, y, o): (&Operand<'_>, &Operand<'_>, &Operand<'_>, &Operand<'_>),
    (cs, xs, ys, os): (&[usize], &[usize], &[usize], &[usize]),
    role: Option<InPlace>,
) -> PyResult<()> {
    let n: usize = os.iter().product();
    // SAFETY: the output operand's byte range overlaps no input's that is passed as a slice:
    // a fresh output is new memory; for the caller's output every overlapping input was
    // replaced by a copy above, except the in-place one, which is not made into a slice (the
    // library reads it through the output). Input slices are shared and may overlap each
    // other. The arrays stay alive (borrowed by the operands) until `run` returns.
    let (cb, xb, yb, ob) = unsafe {
        (
            c.bytes(),
            match role {
                Some(InPlace::Then) => &[][..],
                _ => x.bytes(),
            },
            match role {
                Some(InPlace::Else) => &[][..],
                _ => y.bytes(),
            },
            o.bytes_mut(),
        )
    };
    let cref = TensorRef::with_layout(cb, cs, &c.view.strides, c.view.offset);
    let xref = TensorRef::with_layout(xb, xs, &x.view.strides, x.view.offset);
    let yref = TensorRef::with_layout(yb, ys, &y.view.strides, y.view.offset);
    let omut = TensorMut::with_layout(ob, os, &o.view.strides, o.view.offset);
    let call = move || {
        catch_unwind(AssertUnwindSafe(|| match role {
            None => engine.select_dyn(dt, cref, xref, yref, omut, mode),
            Some(InPlace::Then) => {
                engine.select_in_place_dyn(dt, cref, omut, InPlace::Then, yref, mode)
            }
            Some(InPlace::Else) => {
                engine.select_in_place_dyn(dt, cref, omut, InPlace::Else, xref, mode)
            }
        }))
    };
    let r = if n > DETACH_MIN_ELEMENTS {
        py.detach(call)
    } else {
        call()
    };
    match r {
        Ok(r) => r.map_err(lib_error),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            Err(PyRuntimeError::new_err(format!(
                "selectjit: internal error (a panic in the library): {msg}"
            )))
        }
    }
}

/// numpy's own `where` for dtypes the kernels do not move (objects, odd itemsizes), and the
/// copy into `out`. Under the library's other broadcast modes each input is first reshaped to
/// where the mode places it in the output, so numpy's broadcasting gives the same result.
fn numpy_fallback<'py>(
    cond: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    arrays: [&Bound<'py, PyUntypedArray>; 3],
    b: &selectjit::shape::BroadcastShape,
    mode: Broadcast,
    out: Option<Bound<'py, PyUntypedArray>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = cond.py();
    let args: [Bound<'py, PyAny>; 3] = if mode == Broadcast::Numpy {
        [cond.clone(), x.clone(), y.clone()]
    } else {
        let orig = [cond, x, y];
        let place = [b.cond, b.then, b.else_];
        let mut v = Vec::with_capacity(3);
        for k in 0..3 {
            let a = arrays[k];
            if a.ndim() == 0 {
                v.push(orig[k].clone());
                continue;
            }
            let mut shape = vec![1usize; b.out.len()];
            for j in 0..place[k].len {
                shape[place[k].start + j] = a.shape()[j];
            }
            v.push(a.call_method1("reshape", (PyTuple::new(py, shape)?,))?);
        }
        [v[0].clone(), v[1].clone(), v[2].clone()]
    };
    let r = np::numpy(py)?
        .where_
        .bind(py)
        .call1((&args[0], &args[1], &args[2]))?;
    match out {
        None => Ok(r),
        Some(o) => {
            let ra = np::from_any(&r)?;
            np::copy_into(&o, &ra)?;
            Ok(o.into_any())
        }
    }
}

/// The library's broadcast mode from the Python arguments.
pub fn parse_mode(broadcast: Option<&Bound<'_, PyAny>>, axis: i64) -> PyResult<Broadcast> {
    let Some(b) = broadcast else {
        return Ok(Broadcast::Numpy);
    };
    let s: std::borrow::Cow<'_, str> = b
        .cast::<pyo3::types::PyString>()
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "broadcast must be a str (numpy, two-step, none or pdpd), not {}",
                b.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?
        .to_cow()?
        .into_owned()
        .into();
    match s.as_ref() {
        "numpy" => Ok(Broadcast::Numpy),
        "two-step" => Ok(Broadcast::TwoStep),
        "none" => Ok(Broadcast::None),
        "pdpd" => Ok(Broadcast::Pdpd { axis }),
        other => Err(PyValueError::new_err(format!(
            "unknown broadcast mode '{other}' (expected numpy, two-step, none or pdpd)"
        ))),
    }
}

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

use numpy::npyffi::NPY_ARRAY_C_CONTIGUOUS;
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyComplex, PyFloat, PyInt, PyList, PyTuple};
use selectjit::Placement;
use selectjit::{
    Broadcast, Cond, DType, Engine, InPlace, Operand as LibOperand, TensorMut, TensorRef,
};

use crate::errors::{Kind, lib_error, new_err};
use crate::layout::{self, ElemView};
use crate::memhandler::Handler;
use crate::np;
use crate::pred::{self, PyPred};
use crate::promote;
use crate::scalars;

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
        || np::is_numpy_scalar(obj)
        || pred::is_exact_predicate(obj)
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
pub(crate) fn width_dtype(itemsize: usize) -> Option<DType> {
    Some(match itemsize {
        1 => DType::U8,
        2 => DType::U16,
        4 => DType::U32,
        8 => DType::U64,
        16 => DType::Complex128,
        _ => return None,
    })
}

/// The checks on `out=`: an ndarray of the output shape and the result dtype, writeable.
/// `inputs` describes condition, x and y for the messages (called on error only: numpy's
/// dtype names are made in Python, microseconds each).
fn check_out<'py>(
    out: &Bound<'py, PyAny>,
    shape: &[usize],
    dt: &Bound<'py, PyArrayDescr>,
    inputs: impl Fn() -> PyResult<[String; 3]>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    if !np::is_ndarray(out) {
        return Err(new_err(
            Kind::DType,
            format!(
                "out must be a numpy.ndarray, not {}",
                out.get_type().name()?
            ),
        ));
    }
    // SAFETY: checked to be an ndarray (or subclass) just above.
    let o: Bound<'py, PyUntypedArray> = unsafe { out.clone().cast_into_unchecked() };
    let od = np::dtype(&o);
    let what = || {
        let [c, x, y] = inputs().unwrap_or_default();
        format!(
            "condition {c}, x {x}, y {y}: result shape {}, dtype {}",
            shape_str(shape),
            dt.str().map(|s| s.to_string()).unwrap_or_default()
        )
    };
    if o.shape() != shape {
        return Err(new_err(
            Kind::Shape,
            format!(
                "out has shape {} but the result's is {} ({})",
                shape_str(o.shape()),
                shape_str(shape),
                what()
            ),
        ));
    }
    if !np::equiv(&od, dt) {
        return Err(new_err(
            Kind::DType,
            format!(
                "out has dtype {} but the result's is {} ({})",
                od.str()?,
                dt.str()?,
                what()
            ),
        ));
    }
    if !np::writeable(&o) {
        return Err(new_err(
            Kind::Invalid,
            format!(
                "out (shape {}, dtype {}) is not writeable",
                shape_str(o.shape()),
                od.str()?
            ),
        ));
    }
    Ok(o)
}

/// An operand ready for the library: its array (kept alive), the view and the absolute byte
/// range of its buffer.
pub(crate) struct Operand<'py> {
    pub(crate) arr: Bound<'py, PyUntypedArray>,
    pub(crate) view: ElemView,
    /// `[start, end)` of the buffer, absolute addresses (empty for a view of nothing).
    range: (usize, usize),
}

impl<'py> Operand<'py> {
    /// The operand over `arr` with elements of `itemsize` bytes, copying `arr` first when its
    /// strides cannot be expressed in elements.
    pub(crate) fn new(arr: Bound<'py, PyUntypedArray>, itemsize: usize) -> PyResult<Self> {
        if np::info(&arr).flags & NPY_ARRAY_C_CONTIGUOUS != 0
            && let Some(view) = layout::contiguous_view(arr.shape(), itemsize)
        {
            return Ok(Operand::with_view(arr, view));
        }
        match layout::elem_view(arr.shape(), arr.strides(), itemsize) {
            Some(view) => Ok(Operand::with_view(arr, view)),
            None => {
                let c = np::copy(&arr)?;
                let view =
                    layout::elem_view(c.shape(), c.strides(), itemsize).ok_or_else(|| {
                        new_err(Kind::Internal, "a C-contiguous copy has no element layout")
                    })?;
                Ok(Operand::with_view(c, view))
            }
        }
    }

    pub(crate) fn with_view(arr: Bound<'py, PyUntypedArray>, view: ElemView) -> Self {
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
    pub(crate) unsafe fn bytes(&self) -> &[u8] {
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
    pub(crate) unsafe fn bytes_mut(&self) -> &mut [u8] {
        if self.view.len == 0 {
            return &mut [];
        }
        // SAFETY: as in `bytes` for the extent and lifetime; exclusivity is the caller's
        // guarantee (the output is only ever this one slice, and no input slice overlaps it).
        unsafe {
            std::slice::from_raw_parts_mut(self.data_ptr().offset(self.view.start), self.view.len)
        }
    }

    /// The library's tensor over `b` (this operand's bytes, or none for an in-place side) with
    /// `shape`: row-major contiguous views go without strides (the library's fast path for
    /// same-shape contiguous calls needs that).
    pub(crate) fn tensor<'a>(&'a self, b: &'a [u8], shape: &'a [usize]) -> TensorRef<'a, u8> {
        if self.view.contiguous {
            TensorRef::new(b, shape)
        } else {
            TensorRef::with_layout(b, shape, &self.view.strides, self.view.offset)
        }
    }

    pub(crate) fn overlaps(&self, other: &Operand<'_>) -> bool {
        self.view.len != 0 && other.view.len != 0 && layout::overlaps(self.range, other.range)
    }

    /// Same memory, same layout: an exact in-place operand of `out` (every element at the
    /// address of `out`'s element of the same index), however either view was made (a
    /// C-contiguous array's view has no strides, see [`layout::contiguous_view`]).
    pub(crate) fn same_as(&self, out: &Operand<'_>) -> bool {
        self.range == out.range
            && self.arr.shape() == out.arr.shape()
            && layout::same_elements(self.arr.shape(), &self.view, &out.view)
    }
}

/// The output shape and where each input lands in it.
struct Bcast {
    out: layout::Dims<usize>,
    cond: Placement,
    then: Placement,
    else_: Placement,
}

impl Bcast {
    /// The library's rule for `mode`; numpy's rule is worked out here (the library checks the
    /// shapes again when it runs), its messages come from the library.
    fn new(mode: Broadcast, [c, x, y]: [&[usize]; 3]) -> PyResult<Bcast> {
        if mode == Broadcast::Numpy
            && let Some(out) = layout::numpy_broadcast([c, x, y])
        {
            let right = |s: &[usize]| Placement {
                start: out.len() - s.len(),
                len: s.len(),
            };
            return Ok(Bcast {
                cond: right(c),
                then: right(x),
                else_: right(y),
                out,
            });
        }
        let b = selectjit::broadcast_shapes(mode, c, x, y).map_err(lib_error)?;
        Ok(Bcast {
            out: b.out.iter().copied().collect(),
            cond: b.cond,
            then: b.then,
            else_: b.else_,
        })
    }
}

/// One of `x`, `y`: the argument, and its array as numpy converts it unless it is a weak Python
/// scalar (converted only once the result dtype is known, see [`scalars`]).
struct Input<'py> {
    obj: Bound<'py, PyAny>,
    arr: Option<Bound<'py, PyUntypedArray>>,
    weak: Option<u8>,
}

impl<'py> Input<'py> {
    fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        let weak = promote::weak_kind(obj);
        let arr = match weak {
            Some(_) => None,
            None => Some(np::from_any(obj)?),
        };
        Ok(Input {
            obj: obj.clone(),
            arr,
            weak,
        })
    }

    fn shape(&self) -> &[usize] {
        self.arr.as_ref().map_or(&[], |a| a.shape())
    }

    fn strides(&self) -> &[isize] {
        self.arr.as_ref().map_or(&[], |a| a.strides())
    }

    fn c_contiguous(&self) -> bool {
        self.arr
            .as_ref()
            .is_none_or(|a| np::info(a).flags & NPY_ARRAY_C_CONTIGUOUS != 0)
    }

    /// The input in the result dtype: numpy's cast when its dtype differs.
    fn in_dtype(&self, dt: &Bound<'py, PyArrayDescr>) -> PyResult<Bound<'py, PyUntypedArray>> {
        match (&self.arr, self.weak) {
            (Some(a), _) if np::equiv(&np::dtype(a), dt) => Ok(a.clone()),
            (Some(a), _) => np::cast(a, dt),
            (None, Some(kind)) => scalars::convert(&self.obj, kind, dt),
            (None, None) => Err(new_err(Kind::Internal, "an input without an array")),
        }
    }

    /// How the input is named in messages: its shape and dtype.
    fn describe(&self) -> PyResult<String> {
        Ok(match &self.arr {
            Some(a) => format!("{} {}", shape_str(a.shape()), np::dtype(a).str()?),
            None => format!("() Python {}", self.obj.get_type().name()?),
        })
    }
}

/// A fused predicate as a call takes it: its operation, operands (exact ndarrays) and the
/// dtype they compare in, and the shape of its result (the operands' broadcast).
pub(crate) struct PredIn<'py> {
    pub(crate) op: pred::Op,
    pub(crate) negate: bool,
    pub(crate) lhs: Bound<'py, PyUntypedArray>,
    pub(crate) rhs: Option<Bound<'py, PyUntypedArray>>,
    pub(crate) dt: Bound<'py, PyArrayDescr>,
    pub(crate) lib: DType,
    shape: layout::Dims<usize>,
}

impl<'py> PredIn<'py> {
    fn new(py: Python<'py>, p: &PyPred) -> PyResult<Option<Self>> {
        let (Some((dt, lib)), Some(lhs)) = (&p.dtype, &p.lhs) else {
            return Ok(None);
        };
        let lhs = lhs.bind(py).clone();
        let rhs = p.rhs.as_ref().map(|r| r.bind(py).clone());
        let rs: &[usize] = rhs.as_ref().map_or(&[], |r| r.shape());
        let Some(shape) = layout::numpy_broadcast([lhs.shape(), rs, &[]]) else {
            return Err(new_err(
                Kind::Broadcast,
                format!(
                    "operands could not be broadcast together with shapes {} {}",
                    shape_str(lhs.shape()),
                    shape_str(rs)
                ),
            ));
        };
        Ok(Some(PredIn {
            op: p.op,
            negate: p.negate,
            lhs,
            rhs,
            dt: dt.bind(py).clone(),
            lib: *lib,
            shape,
        }))
    }

    fn operands(&self) -> impl Iterator<Item = &Bound<'py, PyUntypedArray>> {
        std::iter::once(&self.lhs).chain(self.rhs.as_ref())
    }

    /// The byte strides of the bool array numpy's ufunc would return for the predicate (its
    /// iterator's `K` order over the operands).
    fn result_strides(&self) -> layout::Dims<isize> {
        let nd = self.shape.len();
        let ops: Vec<layout::Dims<isize>> = self
            .operands()
            .map(|a| {
                layout::strides_over_output(
                    &self.shape,
                    a.shape(),
                    a.strides(),
                    nd - a.ndim(),
                    a.ndim(),
                )
            })
            .collect();
        let refs: Vec<&[isize]> = ops.iter().map(|s| &s[..]).collect();
        layout::numpy_out_strides(&self.shape, &refs, 1)
    }
}

/// The condition of a call: a mask (any array), or a fused predicate.
pub(crate) enum CondIn<'py> {
    Mask(Bound<'py, PyUntypedArray>),
    Pred(PredIn<'py>),
}

impl<'py> CondIn<'py> {
    fn shape(&self) -> &[usize] {
        match self {
            CondIn::Mask(a) => a.shape(),
            CondIn::Pred(p) => &p.shape,
        }
    }

    fn c_contiguous(&self) -> bool {
        match self {
            CondIn::Mask(a) => np::info(a).flags & NPY_ARRAY_C_CONTIGUOUS != 0,
            CondIn::Pred(p) => p
                .operands()
                .all(|a| np::info(a).flags & NPY_ARRAY_C_CONTIGUOUS != 0),
        }
    }

    /// Byte strides of the condition array (a predicate's as numpy would allocate it).
    fn strides(&self) -> layout::Dims<isize> {
        match self {
            CondIn::Mask(a) => a.strides().iter().copied().collect(),
            CondIn::Pred(p) => p.result_strides(),
        }
    }

    fn describe(&self) -> PyResult<String> {
        Ok(match self {
            CondIn::Mask(a) => format!("{} {}", shape_str(a.shape()), np::dtype(a).str()?),
            CondIn::Pred(p) => format!("{} bool (predicate)", shape_str(&p.shape)),
        })
    }
}

/// The condition argument as an array or a fused predicate: a predicate that is not fused is
/// evaluated by numpy (its `__array__`).
pub(crate) fn cond_input<'py>(
    cond: &Bound<'py, PyAny>,
) -> PyResult<(CondIn<'py>, Bound<'py, PyAny>)> {
    if let Ok(p) = cond.cast::<PyPred>() {
        if let Some(p) = PredIn::new(cond.py(), p.get())? {
            return Ok((CondIn::Pred(p), cond.clone()));
        }
        let m = cond.call_method0(pyo3::intern!(cond.py(), "__array__"))?;
        return Ok((CondIn::Mask(np::from_any(&m)?), m));
    }
    Ok((CondIn::Mask(np::from_any(cond)?), cond.clone()))
}

/// `where` on `engine` (the body of `selectjit.where` and `Engine.where`).
pub fn where_call<'py>(
    (engine, handler): (&Engine, &Handler),
    cond: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    mode: Broadcast,
) -> PyResult<Bound<'py, PyAny>> {
    let py = cond.py();
    if mode == Broadcast::Numpy
        && let Some(r) = small_pred_call((engine, handler), cond, x, y, out)?
    {
        return Ok(r);
    }
    if mode == Broadcast::Numpy && (dispatches(cond)? || dispatches(x)? || dispatches(y)?) {
        let r = np::numpy(py)?.where_.bind(py).call1((cond, x, y))?;
        return match out {
            None => Ok(r),
            Some(o) => {
                let ra = np::from_any(&r)?;
                let desc = || -> PyResult<[String; 3]> {
                    let d = format!("{} {}", shape_str(ra.shape()), np::dtype(&ra).str()?);
                    Ok([d.clone(), d.clone(), d])
                };
                let o = check_out(o, ra.shape(), &np::dtype(&ra), desc)?;
                np::copy_into(&o, &ra)?;
                Ok(o.into_any())
            }
        };
    }
    let (ca, cond) = cond_input(cond)?;
    let xi = Input::new(x)?;
    let yi = Input::new(y)?;
    let dt = promote::result_dtype(x, xi.arr.as_ref(), y, yi.arr.as_ref())?;
    let b = Bcast::new(mode, [ca.shape(), xi.shape(), yi.shape()])?;
    let out_arr = match out {
        Some(o) => {
            let descs = || -> PyResult<[String; 3]> {
                Ok([ca.describe()?, xi.describe()?, yi.describe()?])
            };
            Some(check_out(o, &b.out, &dt, descs)?)
        }
        None => None,
    };
    let itemsize = dt.itemsize();
    let lib_dt = width_dtype(itemsize).filter(|_| np::movable(&dt));
    let Some(lib_dt) = lib_dt else {
        let (cond, ca) = match ca {
            CondIn::Mask(a) => (cond, a),
            CondIn::Pred(_) => {
                let m = cond.call_method0(pyo3::intern!(py, "__array__"))?;
                let a = np::from_any(&m)?;
                (m, a)
            }
        };
        return numpy_fallback(&cond, [&ca], [&xi, &yi], &b, mode, out_arr);
    };

    // The output: the caller's, or a new array in numpy's memory order.
    let fresh_out = out_arr.is_none();
    let o = match out_arr {
        Some(o) => o,
        None => {
            let strides = if ca.c_contiguous() && xi.c_contiguous() && yi.c_contiguous() {
                // Row-major inputs keep numpy's iterator in C order.
                layout::numpy_out_strides(&b.out, &[], itemsize)
            } else {
                let st = |shape: &[usize], strides: &[isize], p: Placement| {
                    layout::strides_over_output(&b.out, shape, strides, p.start, p.len)
                };
                let ops = [
                    st(ca.shape(), &ca.strides(), b.cond),
                    st(xi.shape(), xi.strides(), b.then),
                    st(yi.shape(), yi.strides(), b.else_),
                ];
                layout::numpy_out_strides(&b.out, &[&ops[0], &ops[1], &ops[2]], itemsize)
            };
            np::empty(py, &dt, &b.out, &strides, handler)?
        }
    };
    if b.out.contains(&0) {
        return Ok(o.into_any());
    }

    // Inputs as the kernels take them: cond as bytes that are non-zero where numpy's bool cast
    // is true (or a predicate's operands in the dtype they compare in), x and y in the result
    // dtype.
    let mut cops = match &ca {
        CondIn::Mask(a) => {
            let cd = np::dtype(a);
            let c1 = if cd.itemsize() == 1 && matches!(cd.kind(), b'b' | b'i' | b'u') {
                a.clone()
            } else {
                np::cast(a, &np::bool_descr(py))?
            };
            CondOps::Mask(Operand::new(c1, 1)?)
        }
        CondIn::Pred(p) => {
            let conv = |a: &Bound<'py, PyUntypedArray>| -> PyResult<Operand<'py>> {
                let a = if np::equiv(&np::dtype(a), &p.dt) {
                    a.clone()
                } else {
                    np::cast(a, &p.dt)?
                };
                Operand::new(a, p.dt.itemsize())
            };
            CondOps::Pred {
                op: p.op,
                negate: p.negate,
                lib: p.lib,
                lhs: PredArg::View(conv(&p.lhs)?),
                rhs: p.rhs.as_ref().map(conv).transpose()?.map(PredArg::View),
            }
        }
    };
    let (x1, y1) = (xi.in_dtype(&dt)?, yi.in_dtype(&dt)?);

    // An output whose strides are not whole elements gets the result through a temporary.
    let (target, copy_back) = match layout::elem_view(o.shape(), o.strides(), itemsize) {
        Some(v) => (Operand::with_view(o.clone(), v), false),
        None => {
            let st = layout::numpy_out_strides(&b.out, &[], itemsize);
            let t = np::empty(py, &dt, &b.out, &st, &Handler::none())?;
            (Operand::new(t, itemsize)?, true)
        }
    };
    let mut x_op = Operand::new(x1, itemsize)?;
    let mut y_op = Operand::new(y1, itemsize)?;

    // Overlap with the caller's output: an input that is the output itself (same memory and
    // layout) runs in place; any other overlap reads a copy, as numpy's ufuncs do. A
    // predicate's operand that is the in-place input itself, in the result's dtype, is read
    // from the output buffer as it is on entry.
    let mut role = None;
    if !fresh_out && !copy_back {
        if x_op.overlaps(&target) && x_op.same_as(&target) {
            role = Some(InPlace::Then);
        } else if y_op.overlaps(&target) && y_op.same_as(&target) {
            role = Some(InPlace::Else);
        }
        let same_dt = |op: &Operand<'_>| np::equiv(&np::dtype(&op.arr), &dt);
        let fix = |a: &mut PredArg<'py>| -> PyResult<()> {
            if let PredArg::View(op) = a
                && op.overlaps(&target)
            {
                if role.is_some() && op.same_as(&target) && same_dt(op) {
                    *a = PredArg::InPlace;
                } else {
                    let w = np::dtype(&op.arr).itemsize();
                    *op = Operand::new(np::copy(&op.arr)?, w)?;
                }
            }
            Ok(())
        };
        match &mut cops {
            CondOps::Mask(c_op) => {
                if c_op.overlaps(&target) {
                    *c_op = Operand::new(np::copy(&c_op.arr)?, 1)?;
                }
            }
            CondOps::Pred { lhs, rhs, .. } => {
                fix(lhs)?;
                if let Some(r) = rhs {
                    fix(r)?;
                }
            }
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
        (&cops, &x_op, &y_op, &target),
        (ca.shape(), xi.shape(), yi.shape(), &b.out),
        role,
    )?;
    if copy_back {
        np::copy_into(&o, &target.arr)?;
    }
    Ok(o.into_any())
}

/// The common call on a fused predicate, with less preparation than [`where_call`]'s: numpy's
/// broadcast, a `selectjit.Predicate` whose operands are in the dtype it compares, `x` and `y`
/// exact ndarrays in the result dtype or Python scalars, every array C-contiguous and of the
/// output's shape or 0-d, and `out` (if given) an exact C-contiguous ndarray of the result
/// that overlaps no input. None: the general path runs the call (and makes every error).
fn small_pred_call<'py>(
    (engine, handler): (&Engine, &Handler),
    cond: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = cond.py();
    let Ok(p) = cond.cast::<PyPred>() else {
        return Ok(None);
    };
    if !pred::is_exact_predicate(cond) {
        return Ok(None);
    }
    let p = p.get();
    let (Some((pdt, lib)), Some(lhs)) = (&p.dtype, &p.lhs) else {
        return Ok(None);
    };
    let (pdt, lhs, rhs) = (
        pdt.bind(py),
        lhs.bind(py),
        p.rhs.as_ref().map(|r| r.bind(py)),
    );
    let c_contig = |a: &Bound<'py, PyUntypedArray>| np::info(a).flags & NPY_ARRAY_C_CONTIGUOUS != 0;
    let in_dt = |a: &Bound<'py, PyUntypedArray>, d: &Bound<'py, PyArrayDescr>| {
        let ad = np::dtype(a);
        ad.is(d) || np::equiv(&ad, d)
    };
    let ops: [Option<&Bound<'py, PyUntypedArray>>; 2] = [Some(lhs), rhs];
    for a in ops.into_iter().flatten() {
        if !c_contig(a) || !in_dt(a, pdt) {
            return Ok(None);
        }
    }
    let arg = |o: &Bound<'py, PyAny>| -> Option<(Option<Bound<'py, PyUntypedArray>>, Option<u8>)> {
        if np::is_exact_ndarray(o) {
            // SAFETY: checked to be an ndarray just above.
            let a: Bound<'py, PyUntypedArray> = unsafe { o.clone().cast_into_unchecked() };
            c_contig(&a).then_some((Some(a), None))
        } else {
            promote::weak_kind(o).map(|k| (None, Some(k)))
        }
    };
    let (Some((xa, xk)), Some((ya, yk))) = (arg(x), arg(y)) else {
        return Ok(None);
    };
    // The output's shape: the one shape every operand has, unless 0-d.
    let mut shape: &[usize] = &[];
    for s in [
        Some(lhs.shape()),
        rhs.map(|r| r.shape()),
        xa.as_ref().map(|a| a.shape()),
        ya.as_ref().map(|a| a.shape()),
    ]
    .into_iter()
    .flatten()
    {
        if shape.is_empty() {
            shape = s;
        } else if !(s.is_empty() || s == shape) {
            return Ok(None);
        }
    }
    if shape.contains(&0) {
        return Ok(None);
    }
    let shape: layout::Dims<usize> = shape.iter().copied().collect();
    let shape = &shape[..];
    let dt = promote::result_dtype(x, xa.as_ref(), y, ya.as_ref())?;
    let itemsize = dt.itemsize();
    let Some(lib_dt) = width_dtype(itemsize).filter(|_| np::movable(&dt)) else {
        return Ok(None);
    };
    let n: usize = shape.iter().product();
    // The arrays and the output are checked before a scalar is converted: a conversion's
    // warnings are not to be given twice (here and again on the general path).
    if [&xa, &ya].into_iter().flatten().any(|a| !in_dt(a, &dt)) {
        return Ok(None);
    }
    let o = match out {
        None => np::empty_c(py, &dt, shape, handler)?,
        Some(o) if np::is_exact_ndarray(o) => {
            // SAFETY: checked to be an ndarray just above.
            let o: Bound<'py, PyUntypedArray> = unsafe { o.clone().cast_into_unchecked() };
            if !(c_contig(&o) && o.shape() == shape && np::writeable(&o) && in_dt(&o, &dt)) {
                return Ok(None);
            }
            o
        }
        Some(_) => return Ok(None),
    };
    // x and y in the result dtype: arrays as they are, weak scalars as the bytes of one
    // element when their conversion is exact (else numpy's conversion to a 0-d array).
    let value = |a: Option<Bound<'py, PyUntypedArray>>,
                 k: Option<u8>,
                 o: &Bound<'py, PyAny>|
     -> PyResult<Value<'py>> {
        Ok(match (a, k) {
            (Some(a), _) => Value::Arr(a),
            (None, Some(k)) => match scalars::weak_bytes(o, k, &dt) {
                Some((b, n)) => Value::Bytes(b, n),
                None => Value::Arr(scalars::convert(o, k, &dt)?),
            },
            (None, None) => return Err(new_err(Kind::Internal, "an input without an array")),
        })
    };
    let (xv, yv) = (value(xa, xk, x)?, value(ya, yk, y)?);
    let pw = pdt.itemsize();
    // Every array is C-contiguous (checked above, or new): its elements are the `len * w`
    // bytes from its data pointer.
    let span = |a: &Bound<'py, PyUntypedArray>, w: usize| {
        let start = np::info(a).data as usize;
        (start, start.wrapping_add(a.len() * w))
    };
    let target = span(&o, itemsize);
    if out.is_some() {
        let ins = [
            Some(span(lhs, pw)),
            rhs.map(|r| span(r, pw)),
            xv.arr().map(|a| span(a, itemsize)),
            yv.arr().map(|a| span(a, itemsize)),
        ];
        if ins
            .into_iter()
            .flatten()
            .any(|r| layout::overlaps(r, target))
        {
            return Ok(None);
        }
    }
    // SAFETY: each array is C-contiguous (checked above: the inputs, a caller's output; a new
    // output is allocated C-contiguous), so its `len * itemsize` bytes from its data pointer
    // are its elements, memory numpy keeps alive while the array (held here until the call
    // returns) lives. The output's bytes overlap no input's: a new output is new memory and a
    // caller's output that overlaps an input was declined just above.
    let (lb, rb, ob) = unsafe {
        (
            flat_bytes(lhs, pw),
            rhs.map(|r| flat_bytes(r, pw)),
            flat_bytes_mut(&o, itemsize),
        )
    };
    let l = LibOperand::from_bytes(*lib, TensorRef::new(lb, lhs.shape()));
    let cond = match (p.op, rhs.zip(rb)) {
        (pred::Op::Cmp(k), Some((r, rb))) => Cond::cmp(
            k,
            l,
            LibOperand::from_bytes(*lib, TensorRef::new(rb, r.shape())),
        ),
        (pred::Op::Test(t), None) => Cond::test(t, l),
        _ => return Ok(None),
    };
    let cond = if p.negate { cond.not() } else { cond };
    // SAFETY: as above (x and y are inputs, shared slices; a scalar's bytes are on the stack).
    let (xr, yr) = unsafe { (xv.tensor(itemsize), yv.tensor(itemsize)) };
    let om = TensorMut::new(ob, shape);
    guarded(py, n, || {
        engine.select_bytes(lib_dt, cond, xr, yr, om, Broadcast::Numpy)
    })?;
    Ok(Some(o.into_any()))
}

/// The `len * w` bytes of a C-contiguous array's elements.
///
/// # Safety
/// `a` must be C-contiguous with elements of `w` bytes, and no `&mut` slice over its memory
/// may exist while the returned slice lives.
unsafe fn flat_bytes<'a>(a: &'a Bound<'_, PyUntypedArray>, w: usize) -> &'a [u8] {
    // SAFETY: the caller's contract: the array's elements are these bytes, kept alive by the
    // array, which the slice borrows.
    unsafe { std::slice::from_raw_parts(np::info(a).data, a.len() * w) }
}

/// [`flat_bytes`], writable.
///
/// # Safety
/// As [`flat_bytes`], and no other slice over the array's memory may exist while the returned
/// one lives.
#[allow(clippy::mut_from_ref)]
unsafe fn flat_bytes_mut<'a>(a: &'a Bound<'_, PyUntypedArray>, w: usize) -> &'a mut [u8] {
    // SAFETY: the caller's contract, as in `flat_bytes`, with exclusivity.
    unsafe { std::slice::from_raw_parts_mut(np::info(a).data, a.len() * w) }
}

/// `x` or `y` of [`small_pred_call`]: a C-contiguous array in the result dtype, or the bytes of
/// one element (a weak scalar in the result dtype: its first `n` bytes).
enum Value<'py> {
    Arr(Bound<'py, PyUntypedArray>),
    Bytes([u8; 16], usize),
}

impl<'py> Value<'py> {
    fn arr(&self) -> Option<&Bound<'py, PyUntypedArray>> {
        match self {
            Value::Arr(a) => Some(a),
            Value::Bytes(..) => None,
        }
    }

    /// The value as the library's tensor (a scalar 0-d).
    ///
    /// # Safety
    /// As [`flat_bytes`] for an array.
    unsafe fn tensor(&self, w: usize) -> TensorRef<'_, u8> {
        match self {
            // SAFETY: the caller's contract.
            Value::Arr(a) => TensorRef::new(unsafe { flat_bytes(a, w) }, a.shape()),
            Value::Bytes(b, n) => TensorRef::new(&b[..*n], &[]),
        }
    }
}

/// Runs `call` (a library call over `n` output elements) without the GIL from
/// [`DETACH_MIN_ELEMENTS`] elements, a panic in it made an internal error.
pub(crate) fn guarded<T: Send>(
    py: Python<'_>,
    n: usize,
    call: impl FnOnce() -> selectjit::Result<T> + Send,
) -> PyResult<T> {
    let call = move || catch_unwind(AssertUnwindSafe(call));
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
            Err(new_err(
                Kind::Internal,
                format!("selectjit: internal error (a panic in the library): {msg}"),
            ))
        }
    }
}

/// A predicate's operand for the kernel: a view, or the in-place buffer.
enum PredArg<'py> {
    View(Operand<'py>),
    InPlace,
}

/// The condition as the kernel takes it.
enum CondOps<'py> {
    Mask(Operand<'py>),
    Pred {
        op: pred::Op,
        negate: bool,
        lib: DType,
        lhs: PredArg<'py>,
        rhs: Option<PredArg<'py>>,
    },
}

/// Runs the library on prepared operands: `shapes` are cond's, x's, y's and the output's.
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    engine: &Engine,
    dt: DType,
    mode: Broadcast,
    (c, x, y, o): (&CondOps<'_>, &Operand<'_>, &Operand<'_>, &Operand<'_>),
    (cs, xs, ys, os): (&[usize], &[usize], &[usize], &[usize]),
    role: Option<InPlace>,
) -> PyResult<()> {
    let n: usize = os.iter().product();
    // A predicate read from the in-place buffer compares in the select's dtype: the select then
    // runs in the predicate's dtype (the same width as the result's: checked when the operand
    // was made in place).
    let dt = match c {
        CondOps::Pred {
            lib, lhs, rhs: r, ..
        } if matches!(lhs, PredArg::InPlace) || matches!(r, Some(PredArg::InPlace)) => *lib,
        _ => dt,
    };
    // SAFETY: the output operand's byte range overlaps no input's that is passed as a slice:
    // a fresh output is new memory; for the caller's output every overlapping input was
    // replaced by a copy above, except the in-place ones, which are not made into slices (the
    // library reads them through the output). Input slices are shared and may overlap each
    // other. The arrays stay alive (borrowed by the operands) until `run` returns.
    let (xb, yb, ob) = unsafe {
        (
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
    // Row-major contiguous views go without strides: the library's fast path for same-shape
    // contiguous calls needs that.
    fn view<'a>(b: &'a [u8], s: &'a [usize], op: &'a Operand<'_>) -> TensorRef<'a, u8> {
        op.tensor(b, s)
    }
    fn pred_operand<'a>(a: &'a PredArg<'_>, lib: DType) -> LibOperand<'a> {
        match a {
            PredArg::InPlace => LibOperand::in_place(),
            PredArg::View(op) => {
                // SAFETY: as above: a predicate operand that overlapped the caller's output was
                // copied or made the in-place operand, so no `&mut` slice covers its bytes.
                let b = unsafe { op.bytes() };
                LibOperand::from_bytes(lib, view(b, op.arr.shape(), op))
            }
        }
    }
    let cond: Cond<'_> = match c {
        CondOps::Mask(m) => {
            // SAFETY: as above (the mask was copied if it overlapped the output).
            Cond::mask(view(unsafe { m.bytes() }, cs, m))
        }
        CondOps::Pred {
            op,
            negate,
            lib,
            lhs,
            rhs,
        } => {
            let l = pred_operand(lhs, *lib);
            let c = match (op, rhs) {
                (pred::Op::Cmp(k), Some(r)) => Cond::cmp(*k, l, pred_operand(r, *lib)),
                (pred::Op::Test(t), None) => Cond::test(*t, l),
                _ => {
                    return Err(new_err(
                        Kind::Internal,
                        "a predicate with the wrong number of operands",
                    ));
                }
            };
            if *negate { c.not() } else { c }
        }
    };
    let (xref, yref) = (view(xb, xs, x), view(yb, ys, y));
    let omut = if o.view.contiguous {
        TensorMut::new(ob, os)
    } else {
        TensorMut::with_layout(ob, os, &o.view.strides, o.view.offset)
    };
    guarded(py, n, move || match role {
        None => engine.select_bytes(dt, cond, xref, yref, omut, mode),
        Some(InPlace::Then) => {
            engine.select_in_place_bytes(dt, cond, omut, InPlace::Then, yref, mode)
        }
        Some(InPlace::Else) => {
            engine.select_in_place_bytes(dt, cond, omut, InPlace::Else, xref, mode)
        }
    })
}

/// numpy's own `where` for dtypes the kernels do not move (objects, odd itemsizes), and the
/// copy into `out`. Under the library's other broadcast modes each input is first reshaped to
/// where the mode places it in the output, so numpy's broadcasting gives the same result.
fn numpy_fallback<'py>(
    cond: &Bound<'py, PyAny>,
    [ca]: [&Bound<'py, PyUntypedArray>; 1],
    [xi, yi]: [&Input<'py>; 2],
    b: &Bcast,
    mode: Broadcast,
    out: Option<Bound<'py, PyUntypedArray>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = cond.py();
    let place = |obj: &Bound<'py, PyAny>,
                 arr: Option<&Bound<'py, PyUntypedArray>>,
                 p: Placement|
     -> PyResult<Bound<'py, PyAny>> {
        match arr {
            Some(a) if mode != Broadcast::Numpy && a.ndim() > 0 => {
                let mut shape = vec![1usize; b.out.len()];
                for j in 0..p.len {
                    shape[p.start + j] = a.shape()[j];
                }
                a.call_method1("reshape", (PyTuple::new(py, shape)?,))
            }
            _ => Ok(obj.clone()),
        }
    };
    let c = place(cond, Some(ca), b.cond)?;
    let x = place(&xi.obj, xi.arr.as_ref(), b.then)?;
    let y = place(&yi.obj, yi.arr.as_ref(), b.else_)?;
    let r = np::numpy(py)?.where_.bind(py).call1((c, x, y))?;
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
            new_err(
                Kind::DType,
                format!(
                    "broadcast must be a str (numpy, two-step, none or pdpd), not {}",
                    b.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ),
            )
        })?
        .to_cow()?
        .into_owned()
        .into();
    match s.as_ref() {
        "numpy" => Ok(Broadcast::Numpy),
        "two-step" => Ok(Broadcast::TwoStep),
        "none" => Ok(Broadcast::Exact),
        "pdpd" => Ok(Broadcast::Pdpd { axis }),
        other => Err(new_err(
            Kind::Invalid,
            format!("unknown broadcast mode '{other}' (expected numpy, two-step, none or pdpd)"),
        )),
    }
}

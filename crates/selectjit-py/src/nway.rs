//! The kernel call of `select` and `nan_to_num`: the library's n-way select (the first true
//! condition wins) over arrays the Python layer (`selectjit/_select.py`) has already checked
//! and converted as numpy.select and numpy.nan_to_num do — the values and the default in the
//! result dtype, the conditions bool arrays or lazy predicates, their shapes broadcastable to
//! the result's. The output is the caller's (checked by the Python layer) or a new C-ordered
//! array from the output pool; an input that is the output itself is read in place, any other
//! overlap through a copy, as in `where`.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use selectjit::{Broadcast, Choice, Cond, DType, Operand as LibOperand, TensorMut, TensorRef};

use crate::call::{CondIn, Operand, cond_input, guarded, width_dtype};
use crate::errors::{Kind, new_err};
use crate::layout;
use crate::np;
use crate::pred;

/// A predicate's operand: a view, or the output on entry.
enum Arg<'py> {
    View(Operand<'py>),
    Out,
}

/// A condition as the kernel takes it.
enum CondOp<'py> {
    Mask(Operand<'py>),
    Pred {
        op: pred::Op,
        negate: bool,
        lib: DType,
        args: Vec<Arg<'py>>,
    },
}

/// A value or the default: a view, or the output on entry.
type Val<'py> = Arg<'py>;

/// `op`'s bytes as the library's tensor (strided where it is not row-major contiguous).
///
/// # Safety
/// As [`Operand::bytes`]: no `&mut` slice over its bytes is alive with the tensor.
unsafe fn view<'a>(op: &'a Operand<'_>) -> TensorRef<'a, u8> {
    // SAFETY: the caller's contract.
    op.tensor(unsafe { op.bytes() }, op.arr.shape())
}

/// `_select_n(conds, values, default, dtype, shape, out=None)`: the result of
/// `numpy.select(conds, values, default)` for values and a default already in `dtype` and a
/// result of `shape`, into `out` (then returned) or a new array. `None` when `dtype` is not one
/// the kernels move (the caller runs numpy).
#[pyfunction]
#[pyo3(name = "_select_n", signature = (conds, values, default, dtype, shape, out = None))]
pub fn select_n<'py>(
    conds: Vec<Bound<'py, PyAny>>,
    values: Vec<Bound<'py, PyAny>>,
    default: Bound<'py, PyAny>,
    dtype: Bound<'py, PyArrayDescr>,
    shape: Vec<usize>,
    out: Option<Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = dtype.py();
    let itemsize = dtype.itemsize();
    let Some(lib_dt) = width_dtype(itemsize).filter(|_| np::movable(&dtype)) else {
        return Ok(None);
    };
    if conds.is_empty() || conds.len() != values.len() {
        return Err(new_err(
            Kind::Invalid,
            "one value per condition, and at least one condition",
        ));
    }
    let (engine, handler) = (crate::process_engine()?, crate::process_handler(py)?);
    let in_dtype = |o: &Bound<'py, PyAny>| -> PyResult<Operand<'py>> {
        let a = np::from_any(o)?;
        let a = if np::equiv(&np::dtype(&a), &dtype) {
            a
        } else {
            np::cast(&a, &dtype)?
        };
        Operand::new(a, itemsize)
    };
    let mut vals: Vec<Val<'py>> = values
        .iter()
        .map(|v| in_dtype(v).map(Arg::View))
        .collect::<PyResult<_>>()?;
    let mut dflt = Arg::View(in_dtype(&default)?);
    // The conditions (kept alive: a predicate evaluated by numpy is its bool array).
    let mut keep = Vec::with_capacity(conds.len());
    let mut cops: Vec<CondOp<'py>> = Vec::with_capacity(conds.len());
    for c in &conds {
        let (ci, k) = cond_input(c)?;
        keep.push(k);
        cops.push(match ci {
            CondIn::Mask(a) => {
                let cd = np::dtype(&a);
                let c1 = if cd.itemsize() == 1 && matches!(cd.kind(), b'b' | b'i' | b'u') {
                    a
                } else {
                    np::cast(&a, &np::bool_descr(py))?
                };
                CondOp::Mask(Operand::new(c1, 1)?)
            }
            CondIn::Pred(p) => {
                let conv = |a: &Bound<'py, PyUntypedArray>| -> PyResult<Arg<'py>> {
                    let a = if np::equiv(&np::dtype(a), &p.dt) {
                        a.clone()
                    } else {
                        np::cast(a, &p.dt)?
                    };
                    Ok(Arg::View(Operand::new(a, p.dt.itemsize())?))
                };
                let mut args = vec![conv(&p.lhs)?];
                if let Some(r) = &p.rhs {
                    args.push(conv(r)?);
                }
                CondOp::Pred {
                    op: p.op,
                    negate: p.negate,
                    lib: p.lib,
                    args,
                }
            }
        });
    }

    // The output: the caller's, or a new row-major array (numpy.select fills a new array).
    let fresh = out.is_none();
    let o: Bound<'py, PyUntypedArray> = match out {
        Some(o) => np::from_any(&o)?,
        None => np::empty_c(py, &dtype, &shape, handler)?,
    };
    if o.shape() != shape.as_slice() {
        return Err(new_err(Kind::Internal, "an output of another shape"));
    }
    if shape.contains(&0) {
        return Ok(Some(o.into_any()));
    }
    // An output whose strides are not whole elements gets the result through a temporary.
    let (target, copy_back) = match layout::elem_view(o.shape(), o.strides(), itemsize) {
        Some(v) => (Operand::with_view(o.clone(), v), false),
        None => (
            Operand::new(
                np::empty_c(py, &dtype, &shape, &crate::memhandler::Handler::none())?,
                itemsize,
            )?,
            true,
        ),
    };

    // Overlap with the caller's output: an input that is the output itself (same memory and
    // layout) is read in place; any other overlap reads a copy. A predicate's operand is read
    // in place only in the dtype the select then runs in (one for every in-place predicate).
    let mut sel_dt = lib_dt;
    if !fresh && !copy_back {
        let fix = |a: &mut Arg<'py>, w: usize, in_place: bool| -> PyResult<()> {
            if let Arg::View(op) = a
                && op.overlaps(&target)
            {
                if in_place && op.same_as(&target) {
                    *a = Arg::Out;
                } else {
                    *op = Operand::new(np::copy(&op.arr)?, w)?;
                }
            }
            Ok(())
        };
        for v in vals.iter_mut().chain(std::iter::once(&mut dflt)) {
            fix(v, itemsize, true)?;
        }
        let mut pred_dt: Option<DType> = None;
        for c in &mut cops {
            match c {
                CondOp::Mask(m) => {
                    if m.overlaps(&target) {
                        *m = Operand::new(np::copy(&m.arr)?, 1)?;
                    }
                }
                CondOp::Pred { lib, args, .. } => {
                    for a in args.iter_mut() {
                        let (w, same) = match a {
                            Arg::View(op) => {
                                let d = np::dtype(&op.arr);
                                (d.itemsize(), d.itemsize() == itemsize)
                            }
                            Arg::Out => (itemsize, true),
                        };
                        let ok = same && pred_dt.is_none_or(|d| d == *lib);
                        fix(a, w, ok)?;
                        if matches!(a, Arg::Out) {
                            pred_dt = Some(*lib);
                        }
                    }
                }
            }
        }
        // Moving is bitwise: the select runs in the in-place predicate's dtype (same width).
        if let Some(d) = pred_dt {
            sel_dt = d;
        }
    }

    let n: usize = shape.iter().product();
    // SAFETY: the output's byte range overlaps no input that is made a slice below: a fresh
    // output (or the temporary) is new memory; for the caller's output every overlapping input
    // was replaced by a copy above, except those read in place, which are not made slices (the
    // library reads them through the output). Input slices are shared and may overlap each
    // other. The arrays stay alive (owned by the operands) until this function returns.
    let ob = unsafe { target.bytes_mut() };
    fn arg<'a>(a: &'a Arg<'_>, lib: DType) -> LibOperand<'a> {
        match a {
            // SAFETY: as in `select_n`: no `&mut` slice covers an operand made a slice.
            Arg::View(op) => LibOperand::from_bytes(lib, unsafe { view(op) }),
            Arg::Out => LibOperand::in_place(),
        }
    }
    let mut lib_conds: Vec<Cond<'_>> = Vec::with_capacity(cops.len());
    for c in &cops {
        lib_conds.push(match c {
            // SAFETY: as above.
            CondOp::Mask(m) => Cond::mask(unsafe { view(m) }),
            CondOp::Pred {
                op,
                negate,
                lib,
                args,
            } => {
                let l = arg(&args[0], *lib);
                let c = match (op, args.get(1)) {
                    (pred::Op::Cmp(k), Some(r)) => Cond::cmp(*k, l, arg(r, *lib)),
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
        });
    }
    fn choice<'a>(v: &'a Val<'_>) -> Choice<'a, u8> {
        match v {
            // SAFETY: as in `select_n`: no `&mut` slice covers an operand made a slice.
            Arg::View(op) => Choice::Tensor(unsafe { view(op) }),
            Arg::Out => Choice::Out,
        }
    }
    let choices: Vec<Choice<'_, u8>> = vals.iter().map(choice).collect();
    let d = choice(&dflt);
    let omut = if target.view.contiguous {
        TensorMut::new(ob, &shape)
    } else {
        TensorMut::with_layout(ob, &shape, &target.view.strides, target.view.offset)
    };
    guarded(py, n, move || {
        engine.select_n_bytes(sel_dt, &lib_conds, &choices, d, omut, Broadcast::Numpy)
    })?;
    drop(keep);
    if copy_back {
        np::copy_into(&o, &target.arr)?;
    }
    Ok(Some(o.into_any()))
}

//! Lazy predicates (`selectjit.greater(x, 0)`, `selectjit.isnan(x)`, ...): the Python class
//! `selectjit.Predicate` (python/selectjit/_predicates.py) derives from [`PyPred`], which holds
//! what `where` needs to run the predicate inside its kernel. The Python side decides (numpy's
//! own type resolution, NEP 50) whether a predicate can be fused; one that cannot has no
//! `dtype` here and is used through its `__array__` (numpy's own evaluation).

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray};
use pyo3::prelude::*;
use selectjit::{CmpOp, DType, TestOp};

use crate::errors::{Kind, new_err};

/// What a predicate computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Cmp(CmpOp),
    Test(TestOp),
}

/// The base of `selectjit.Predicate`: `_Pred(op, negate, lhs, rhs, dtype)`.
///
/// `op` is numpy's ufunc name (`greater`, ..., `isnan`, ...); `lhs` and `rhs` (None for a
/// test) are exact `numpy.ndarray`s whose values are compared in `dtype` (numpy's loop dtype,
/// native byte order; an operand of another dtype is cast to it when the predicate is used);
/// `dtype` None: not fused (the predicate is evaluated by numpy, through `__array__`).
#[pyclass(name = "_Pred", module = "selectjit._selectjit", subclass, frozen)]
pub struct PyPred {
    pub op: Op,
    pub negate: bool,
    pub lhs: Option<Py<PyUntypedArray>>,
    pub rhs: Option<Py<PyUntypedArray>>,
    pub dtype: Option<(Py<PyArrayDescr>, DType)>,
}

/// The library's dtype of numpy's `d` (native byte order), if it compares such elements.
pub fn lib_dtype(d: &Bound<'_, PyArrayDescr>) -> Option<DType> {
    if !matches!(d.byteorder(), b'=' | b'|') || d.has_fields() || d.has_subarray() {
        return None;
    }
    // Built-in numeric types only (a user dtype of the same kind and size, e.g. ml_dtypes',
    // compares differently).
    let num = d.num();
    if !((0..=15).contains(&num) || num == 23) {
        return None;
    }
    Some(match (d.kind(), d.itemsize()) {
        (b'b', 1) => DType::Bool,
        (b'i', 1) => DType::I8,
        (b'i', 2) => DType::I16,
        (b'i', 4) => DType::I32,
        (b'i', 8) => DType::I64,
        (b'u', 1) => DType::U8,
        (b'u', 2) => DType::U16,
        (b'u', 4) => DType::U32,
        (b'u', 8) => DType::U64,
        (b'f', 2) => DType::F16,
        (b'f', 4) => DType::F32,
        (b'f', 8) => DType::F64,
        (b'c', 8) => DType::Complex64,
        (b'c', 16) => DType::Complex128,
        _ => return None,
    })
}

#[pymethods]
impl PyPred {
    #[new]
    #[pyo3(signature = (op, negate, lhs, rhs, dtype))]
    fn new(
        op: &str,
        negate: bool,
        lhs: Option<Bound<'_, PyAny>>,
        rhs: Option<Bound<'_, PyAny>>,
        dtype: Option<Bound<'_, PyArrayDescr>>,
    ) -> PyResult<Self> {
        let op = match op.parse::<CmpOp>() {
            Ok(c) => Op::Cmp(c),
            Err(_) => Op::Test(
                op.parse::<TestOp>()
                    .map_err(|e| new_err(Kind::Invalid, format!("unknown predicate: {e}")))?,
            ),
        };
        let arr = |o: Option<Bound<'_, PyAny>>| -> PyResult<Option<Py<PyUntypedArray>>> {
            match o {
                None => Ok(None),
                Some(o) if o.is_none() => Ok(None),
                Some(o) if crate::np::is_exact_ndarray(&o) => {
                    Ok(Some(o.cast_into::<PyUntypedArray>()?.unbind()))
                }
                Some(o) => Err(new_err(
                    Kind::DType,
                    format!(
                        "a predicate's operands must be numpy.ndarray, not {}",
                        o.get_type().name()?
                    ),
                )),
            }
        };
        let (lhs, rhs) = (arr(lhs)?, arr(rhs)?);
        let dtype = match dtype {
            None => None,
            Some(d) => {
                let Some(lib) = lib_dtype(&d) else {
                    return Err(new_err(
                        Kind::DType,
                        format!("selectjit does not compare dtype {}", d.str()?),
                    ));
                };
                let want_rhs = matches!(op, Op::Cmp(_));
                if lhs.is_none() || rhs.is_some() != want_rhs {
                    return Err(new_err(
                        Kind::Invalid,
                        "a fused predicate needs its operands (two for a comparison, one for a test)",
                    ));
                }
                Some((d.unbind(), lib))
            }
        };
        Ok(PyPred {
            op,
            negate,
            lhs,
            rhs,
            dtype,
        })
    }

    /// Whether `where` runs this predicate inside its kernel.
    #[getter]
    fn _fused(&self) -> bool {
        self.dtype.is_some()
    }

    /// Negated (numpy's `logical_not` of it).
    #[getter]
    fn _negate(&self) -> bool {
        self.negate
    }
}

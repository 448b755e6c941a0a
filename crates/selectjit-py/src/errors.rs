//! The package's exceptions (`selectjit.SelectError` and its subclasses, defined in Python in
//! `selectjit/_errors.py`, where multiple inheritance from numpy's usual `ValueError` /
//! `TypeError` is plain class syntax) and the mapping of the library's [`selectjit::Error`]
//! onto them.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The exception classes, imported once.
struct Classes {
    select: Py<PyType>,
    shape: Py<PyType>,
    broadcast: Py<PyType>,
    dtype: Py<PyType>,
    invalid: Py<PyType>,
    codegen: Py<PyType>,
    kernel_table: Py<PyType>,
    internal: Py<PyType>,
}

/// Which class an error is raised as.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// `SelectError`: anything without a more precise class.
    Select,
    /// `ShapeError` (a `ValueError`): a shape or layout that does not fit.
    Shape,
    /// `BroadcastError` (a `ShapeError`): shapes that do not broadcast.
    Broadcast,
    /// `DTypeError` (a `TypeError`): a dtype that is not the one required.
    DType,
    /// `InvalidArgumentError` (a `ValueError`): an argument outside its allowed values.
    Invalid,
    /// `CodegenError` (a `RuntimeError`): code generation failed.
    Codegen,
    /// `KernelTableError` (a `ValueError`): an ahead-of-time kernel table was rejected.
    KernelTable,
    /// `InternalError` (a `RuntimeError`): a bug in selectjit.
    Internal,
}

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    static C: PyOnceLock<Classes> = PyOnceLock::new();
    C.get_or_try_init(py, || {
        let m = py.import("selectjit._errors")?;
        let get = |name: &str| -> PyResult<Py<PyType>> {
            Ok(m.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        Ok(Classes {
            select: get("SelectError")?,
            shape: get("ShapeError")?,
            broadcast: get("BroadcastError")?,
            dtype: get("DTypeError")?,
            invalid: get("InvalidArgumentError")?,
            codegen: get("CodegenError")?,
            kernel_table: get("KernelTableError")?,
            internal: get("InternalError")?,
        })
    })
}

/// An exception of class `kind` with message `msg`. (Should the Python classes fail to
/// import, that import error is what is raised.)
pub fn new_err(kind: Kind, msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    Python::attach(|py| match classes(py) {
        Ok(c) => {
            let t = match kind {
                Kind::Select => &c.select,
                Kind::Shape => &c.shape,
                Kind::Broadcast => &c.broadcast,
                Kind::DType => &c.dtype,
                Kind::Invalid => &c.invalid,
                Kind::Codegen => &c.codegen,
                Kind::KernelTable => &c.kernel_table,
                Kind::Internal => &c.internal,
            };
            PyErr::from_type(t.bind(py).clone(), msg)
        }
        Err(e) => e,
    })
}

/// The class of a library error.
pub fn kind_of(e: &selectjit::Error) -> Kind {
    use selectjit::Error as E;
    match e {
        E::Broadcast(_) => Kind::Broadcast,
        E::RankTooLarge { .. } | E::Overflow { .. } | E::Layout { .. } | E::OutputShape { .. } => {
            Kind::Shape
        }
        E::DType(_) => Kind::DType,
        E::Invalid(_) => Kind::Invalid,
        E::Codegen { .. } => Kind::Codegen,
        E::Aot(_) => Kind::KernelTable,
        // I/O (files are not part of this package's calls) and variants added later.
        _ => Kind::Select,
    }
}

/// A library error as the Python exception of its class, with the library's message.
pub fn lib_error(e: selectjit::Error) -> PyErr {
    new_err(kind_of(&e), e.to_string())
}

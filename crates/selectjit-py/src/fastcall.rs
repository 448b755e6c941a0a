//! Module functions and class methods as vectorcall built-ins (`METH_FASTCALL |
//! METH_KEYWORDS`): the common call forms are taken straight from CPython's argument array,
//! without the argument tuple and dict PyO3 builds and parses under the stable ABI of Python
//! 3.9; any other call is handed, as it came, to the function's (or method's) general PyO3
//! entry (so its errors are that entry's).
//!
//! `METH_FASTCALL` is CPython's convention since 3.7 and part of the stable ABI from 3.10: on
//! older Pythons the general entries are the module's functions themselves.

use std::ffi::CStr;
use std::os::raw::c_int;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCFunction, PyDict, PyString, PyTuple, PyType};

use crate::errors::{Kind, new_err};

/// CPython's `METH_FASTCALL`.
const METH_FASTCALL: c_int = 0x0080;

/// A `METH_FASTCALL | METH_KEYWORDS` function.
pub type FastFn = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *const *mut ffi::PyObject,
    ffi::Py_ssize_t,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// The arguments of one vectorcall.
pub struct Args<'py> {
    py: Python<'py>,
    args: *const *mut ffi::PyObject,
    nargs: usize,
    names: Option<Bound<'py, PyTuple>>,
}

impl<'py> Args<'py> {
    /// The interpreter the call runs on.
    pub fn py(&self) -> Python<'py> {
        self.py
    }

    /// Positional arguments.
    pub fn nargs(&self) -> usize {
        self.nargs
    }

    /// Whether the keyword arguments are exactly `names`, in that order.
    pub fn keywords_are(&self, names: &[&str]) -> bool {
        match &self.names {
            None => names.is_empty(),
            Some(n) => {
                n.len() == names.len()
                    && n.iter().zip(names).all(|(k, want)| {
                        k.cast::<PyString>()
                            .ok()
                            .and_then(|k| k.to_cow().ok())
                            .is_some_and(|k| k == *want)
                    })
            }
        }
    }

    /// Argument `i`: positional ones first, then one per keyword name.
    pub fn get(&self, i: usize) -> Option<Bound<'py, PyAny>> {
        let nkw = self.names.as_ref().map_or(0, |n| n.len());
        if i >= self.nargs + nkw {
            return None;
        }
        // SAFETY: `i < nargs + nkw`: CPython's argument array holds that many live (borrowed)
        // objects for the call (`Args` is made only by `enter` from the call's own arguments).
        Some(unsafe { Bound::from_borrowed_ptr(self.py, *self.args.add(i)) })
    }

    /// The call handed to `general` (a callable) as it came.
    pub fn forward(&self, general: &PyOnceLock<Py<PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        self.forward_with(None, general)
    }

    /// The call of a method on `slf` handed to `general` (the method's general descriptor,
    /// called with `slf` first) as it came.
    pub fn forward_method(
        &self,
        slf: &Bound<'py, PyAny>,
        general: &PyOnceLock<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.forward_with(Some(slf), general)
    }

    fn forward_with(
        &self,
        first: Option<&Bound<'py, PyAny>>,
        general: &PyOnceLock<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let pos: Vec<_> = first
            .cloned()
            .into_iter()
            .chain((0..self.nargs).filter_map(|i| self.get(i)))
            .collect();
        let pos = PyTuple::new(py, pos)?;
        let kw = match &self.names {
            None => None,
            Some(n) => {
                let d = PyDict::new(py);
                for (j, k) in n.iter().enumerate() {
                    if let Some(v) = self.get(self.nargs + j) {
                        d.set_item(k, v)?;
                    }
                }
                Some(d)
            }
        };
        let general = general
            .get(py)
            .ok_or_else(|| new_err(Kind::Internal, "selectjit: a general entry is missing"))?;
        general.bind(py).call(pos, kw.as_ref())
    }
}

/// The body of a [`FastFn`]: `body` on the call's arguments, its error (or a panic, as an
/// internal error) set as the Python exception.
///
/// # Safety
/// The arguments must be those CPython passes to a `METH_FASTCALL | METH_KEYWORDS` function,
/// called with the GIL held: `args` holds `nargs` positional arguments followed by one per
/// name of `kwnames` (a tuple of str, or NULL), all live for the call.
pub unsafe fn enter(
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
    body: impl for<'py> FnOnce(&Args<'py>) -> PyResult<Bound<'py, PyAny>>,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls built-in functions with the GIL held (the caller's contract).
    let py = unsafe { Python::assume_attached() };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `kwnames` is NULL or a live tuple (the caller's contract).
        let names = unsafe {
            Bound::from_borrowed_ptr_or_opt(py, kwnames).map(|k| k.cast_into_unchecked())
        };
        let a = Args {
            py,
            args,
            nargs: nargs.max(0) as usize,
            names,
        };
        body(&a).map(Bound::into_ptr)
    }));
    let r = r.unwrap_or_else(|_| {
        Err(new_err(
            Kind::Internal,
            "selectjit: internal error (a panic in a call's arguments)",
        ))
    });
    match r {
        Ok(p) => p,
        Err(e) => {
            e.restore(py);
            std::ptr::null_mut()
        }
    }
}

/// Adds `general` to the module under its name, as the vectorcall built-in `fast` (whose doc
/// is `doc`: the signature line, `--`, then the text) on Python 3.10 and later, `general`
/// itself (kept in `slot` for `fast` to hand calls to) under `_<name>_any`.
pub fn add(
    m: &Bound<'_, PyModule>,
    name: &'static CStr,
    doc: &'static CStr,
    fast: FastFn,
    general: Bound<'_, PyCFunction>,
    slot: &PyOnceLock<Py<PyAny>>,
) -> PyResult<()> {
    let py = m.py();
    let name_str = name
        .to_str()
        .map_err(|_| new_err(Kind::Internal, "a function name that is not UTF-8"))?;
    if py.version_info() < (3, 10) {
        return m.add(name_str, general);
    }
    m.add(format!("_{name_str}_any"), &general)?;
    let _ = slot.set(py, general.into_any().unbind());
    // SAFETY: a `METH_FASTCALL | METH_KEYWORDS` function is stored in the `PyCFunction` slot
    // cast to that type, as C extensions do (both are function pointers); CPython calls it with
    // the fastcall signature it has, as `ml_flags` says.
    let meth = unsafe { std::mem::transmute::<FastFn, ffi::PyCFunction>(fast) };
    // CPython's `PyMethodDef` must outlive the function object: one per module initialisation.
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: ffi::PyMethodDefPointer { PyCFunction: meth },
        ml_flags: METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: doc.as_ptr(),
    }));
    let module_name = m.name()?;
    // SAFETY: `def` lives for the rest of the process; the module and its name are live
    // objects. The result is a new reference or NULL with an error set.
    let f = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyCFunction_NewEx(def, m.as_ptr(), module_name.as_ptr()),
        )?
    };
    m.add(name_str, f)
}

/// Replaces the method `name` of the class `ty` (a PyO3 method, its general entry) by the
/// vectorcall method descriptor `fast` on Python 3.10 and later, with the same doc and text
/// signature; the general descriptor stays on the class as `_<name>_any` (and in `slot`, for
/// `fast` to hand calls to). On older Pythons the class keeps its method as it is.
pub fn replace_method(
    ty: &Bound<'_, PyType>,
    name: &'static CStr,
    fast: FastFn,
    slot: &PyOnceLock<Py<PyAny>>,
) -> PyResult<()> {
    let py = ty.py();
    if py.version_info() < (3, 10) {
        return Ok(());
    }
    let name_str = name
        .to_str()
        .map_err(|_| new_err(Kind::Internal, "a method name that is not UTF-8"))?;
    let general = ty.getattr(name_str)?;
    // The general method's doc as CPython keeps it: the text signature line, `--`, the text.
    let text: Option<String> = general.getattr("__doc__")?.extract()?;
    let sig: Option<String> = general.getattr("__text_signature__")?.extract()?;
    let doc = match sig {
        Some(sig) => format!("{name_str}{sig}\n--\n\n{}", text.unwrap_or_default()),
        None => text.unwrap_or_default(),
    };
    let doc = std::ffi::CString::new(doc)
        .map_err(|_| new_err(Kind::Internal, "a method doc with a NUL character"))?;
    // SAFETY: as in `add`: the function is stored cast to `PyCFunction`, and CPython calls it
    // with the fastcall signature its `ml_flags` say.
    let meth = unsafe { std::mem::transmute::<FastFn, ffi::PyCFunction>(fast) };
    // The descriptor keeps a pointer to its `PyMethodDef` (and the doc): both live for the rest
    // of the process, one per module initialisation.
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: ffi::PyMethodDefPointer { PyCFunction: meth },
        ml_flags: METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: Box::leak(doc.into_boxed_c_str()).as_ptr(),
    }));
    // SAFETY: `ty` is a live type object and `def` lives for the rest of the process. The
    // result is a new reference or NULL with an error set.
    let descr =
        unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(ty.as_type_ptr(), def))? };
    ty.setattr(format!("_{name_str}_any"), &general)?;
    let _ = slot.set(py, general.unbind());
    ty.setattr(name_str, descr)
}

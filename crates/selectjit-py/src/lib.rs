//! The extension module `selectjit._selectjit` of the Python package `selectjit` (whose
//! `__init__.py` re-exports it): `numpy.where` bit for bit, on selectjit's JIT-compiled Select
//! kernels.
//!
//! ```python
//! import numpy as np, selectjit
//! out = selectjit.where(cond, x, y)            # == np.where(cond, x, y), bytes, dtype, shape
//! selectjit.where(cond, x, 0.0, out=x)         # in place
//! ```
//!
//! The work is in [`call`] (numpy's steps: conversion, promotion, casts, output order) and
//! [`layout`] (numpy views as the library's views); [`np`] wraps the numpy C API.
#![warn(clippy::undocumented_unsafe_blocks)]

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use selectjit::Tier;
use selectjit::{Engine, EngineConfig};

mod call;
mod errors;
mod layout;
mod np;
mod pred;
mod promote;
mod scalars;

use errors::{Kind, lib_error, new_err};

/// Which engine a Python `Engine` object runs: its own (with the `threads` it was given, which
/// its pickle carries), or the process-wide default one.
enum Inner {
    /// The engine, the tier it was asked for, and its threads if given.
    Own(Box<Engine>, Tier, Option<usize>),
    Default,
}

/// The process-wide engine of `selectjit.where`: the library's defaults with the settings of
/// the environment (`SELECTJIT_*`), built on first use. A malformed setting, or a tier this
/// host cannot run, is an error of every call that uses it.
fn process_engine() -> PyResult<&'static Engine> {
    static E: std::sync::OnceLock<Result<Engine, selectjit::Error>> = std::sync::OnceLock::new();
    E.get_or_init(|| EngineConfig::from_env().and_then(Engine::with_config))
        .as_ref()
        .map_err(|e| lib_error(e.clone()))
}

/// A selectjit engine: a kernel cache and a code-generation tier.
///
/// `Engine(tier="auto", threads=None)`: `tier` is one of auto, cranelift, avx2, avx512 (a tier
/// this CPU cannot run is a ValueError); `threads` is how many threads a large call may be
/// split across (default: all available; 1 never splits).
#[pyclass(name = "Engine", module = "selectjit", frozen)]
struct PyEngine {
    inner: Inner,
}

impl PyEngine {
    fn engine(&self) -> PyResult<&Engine> {
        match &self.inner {
            Inner::Own(e, ..) => Ok(e),
            Inner::Default => process_engine(),
        }
    }
}

#[pymethods]
impl PyEngine {
    #[new]
    #[pyo3(signature = (tier = "auto".to_string(), threads = None))]
    fn new(tier: String, threads: Option<usize>) -> PyResult<Self> {
        let tier: Tier = tier.parse().map_err(lib_error)?;
        let mut config = EngineConfig::new().tier(tier);
        if let Some(t) = threads {
            if t == 0 {
                return Err(new_err(Kind::Invalid, "threads must be at least 1"));
            }
            config = config.threads(t);
        }
        let engine = Engine::with_config(config).map_err(lib_error)?;
        Ok(PyEngine {
            inner: Inner::Own(Box::new(engine), tier, threads),
        })
    }

    /// Pickling (what dask sends to worker processes): an engine travels as its configuration.
    /// The default engine unpickles as the receiving process's default engine; any other as
    /// that process's shared engine of the same tier and threads (`selectjit._shared_engine`:
    /// created on first use, then reused), so a worker's kernel cache warms once per
    /// configuration, not once per task.
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let package = py.import("selectjit")?;
        match &self.inner {
            Inner::Default => Ok((package.getattr("default_engine")?, PyTuple::empty(py))),
            Inner::Own(_, tier, threads) => {
                let args = (tier.name(), *threads).into_pyobject(py)?;
                Ok((package.getattr("_shared_engine")?, args))
            }
        }
    }

    /// `where(condition, x, y, /, *, out=None, broadcast="numpy", axis=-1)` on this engine,
    /// or `where(condition)`: see `selectjit.where`.
    #[pyo3(signature = (condition, /, *args, out = None, broadcast = None, axis = -1))]
    fn r#where<'py>(
        &self,
        condition: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        out: Option<&Bound<'py, PyAny>>,
        broadcast: Option<&Bound<'py, PyAny>>,
        axis: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        where_args(self.engine(), condition, args, out, broadcast, axis)
    }

    /// The engine's counters (the library's `CacheStats`, every field by name) as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, v) in self.engine()?.stats().fields() {
            d.set_item(name, v)?;
        }
        Ok(d)
    }

    /// The choices the `auto` tier made by measuring, one line each: the kernel class, the
    /// variant kept, and each candidate's fastest time.
    fn tier_choices(&self) -> PyResult<Vec<String>> {
        Ok(self
            .engine()?
            .tier_choices()
            .iter()
            .map(|c| c.to_string())
            .collect())
    }

    /// The tier that compiles this engine's kernels (`None` without a code generator).
    #[getter]
    fn tier(&self) -> PyResult<Option<&'static str>> {
        Ok(self.engine()?.tier().map(|t| t.name()))
    }

    /// Threads a large call may be split across.
    #[getter]
    fn threads(&self) -> PyResult<usize> {
        Ok(self.engine()?.threads())
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(format!(
            "selectjit.Engine(tier={:?}, threads={})",
            self.tier()?.unwrap_or("none"),
            self.threads()?
        ))
    }
}

/// `where(condition, x, y, /, *, out=None, broadcast="numpy", axis=-1)`
///
/// `numpy.where(condition, x, y)` bit for bit (values, dtype, shape, memory order), on
/// selectjit's compiled kernels and the process-wide default engine.
///
/// - `out`: an ndarray of the broadcast shape and the result dtype, any strides; it may be `x`
///   or `y` (in place). Otherwise a ValueError / TypeError, and `out` is not written.
/// - `broadcast`: "numpy" (default), "two-step", "none" or "pdpd" (with `axis`), the library's
///   broadcast modes; shapes a mode refuses are a ValueError.
///
/// `where(condition)` (no x, y) is `numpy.where(condition)`: the indices of the non-zero
/// elements, a tuple of arrays (`numpy.nonzero`).
///
/// `condition` may be a lazy predicate (`selectjit.greater(x, 0)`, ...), computed inside the
/// kernel.
#[pyfunction]
#[pyo3(signature = (condition, /, *args, out = None, broadcast = None, axis = -1))]
fn r#where<'py>(
    condition: &Bound<'py, PyAny>,
    args: &Bound<'py, PyTuple>,
    out: Option<&Bound<'py, PyAny>>,
    broadcast: Option<&Bound<'py, PyAny>>,
    axis: i64,
) -> PyResult<Bound<'py, PyAny>> {
    where_args(process_engine(), condition, args, out, broadcast, axis)
}

/// `where(condition, *args, ...)` as numpy takes it: `args` is `(x, y)`, or empty (then the
/// call is `numpy.where(condition)`).
fn where_args<'py>(
    engine: PyResult<&Engine>,
    condition: &Bound<'py, PyAny>,
    args: &Bound<'py, PyTuple>,
    out: Option<&Bound<'py, PyAny>>,
    broadcast: Option<&Bound<'py, PyAny>>,
    axis: i64,
) -> PyResult<Bound<'py, PyAny>> {
    let py = condition.py();
    match args.len() {
        2 => {
            let mode = call::parse_mode(broadcast, axis)?;
            let (x, y) = (args.get_item(0)?, args.get_item(1)?);
            call::where_call(engine?, condition, &x, &y, out, mode)
        }
        0 => {
            if out.is_some() || broadcast.is_some() || axis != -1 {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "where(condition) takes no out, broadcast or axis",
                ));
            }
            // numpy's where of one argument: `asarray(condition).nonzero()`, a predicate
            // evaluated by numpy first.
            let c = if condition.is_instance_of::<pred::PyPred>() {
                condition.call_method0(pyo3::intern!(py, "__array__"))?
            } else {
                condition.clone()
            };
            np::numpy(py)?.where_.bind(py).call1((c,))
        }
        _ => Err(pyo3::exceptions::PyValueError::new_err(
            "either both or neither of x and y should be given",
        )),
    }
}

/// The engine `selectjit.where` uses (one per process, shared by all threads).
#[pyfunction]
fn default_engine(py: Python<'_>) -> PyResult<Py<PyEngine>> {
    static DEFAULT: pyo3::sync::PyOnceLock<Py<PyEngine>> = pyo3::sync::PyOnceLock::new();
    DEFAULT
        .get_or_try_init(py, || {
            Py::new(
                py,
                PyEngine {
                    inner: Inner::Default,
                },
            )
        })
        .map(|e| e.clone_ref(py))
}

/// numpy.where bit for bit, on selectjit's JIT-compiled Select kernels: `where`, `Engine`,
/// `default_engine` (the package `selectjit` re-exports them).
#[pymodule]
#[pyo3(name = "_selectjit")]
fn selectjit_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(r#where, m)?)?;
    m.add_function(wrap_pyfunction!(default_engine, m)?)?;
    m.add_class::<PyEngine>()?;
    m.add_class::<pred::PyPred>()?;
    pred::register(m)?;
    Ok(())
}

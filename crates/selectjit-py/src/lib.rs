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

mod arrow;
mod call;
mod errors;
mod fastcall;
mod layout;
mod memhandler;
mod np;
mod nway;
mod pred;
mod promote;
mod scalars;

use errors::{Kind, lib_error, new_err};
use memhandler::Handler;

/// Which engine a Python `Engine` object runs: its own (with the `threads` it was given, which
/// its pickle carries, and the numpy memory handler of its output pool), or the process-wide
/// default one.
enum Inner {
    /// The engine, the tier it was asked for, its threads if given, and its handler.
    Own(Box<Engine>, Tier, Option<usize>, Handler),
    Default,
}

/// Whether `SELECTJIT_OUTPUT_POOL` leaves the output pool on (unset or empty: on).
fn output_pool_from_env() -> PyResult<bool> {
    let name = selectjit::env::OUTPUT_POOL;
    match std::env::var(name) {
        Err(_) => Ok(true),
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" | "1" | "on" | "true" | "yes" => Ok(true),
            "0" | "off" | "false" | "no" => Ok(false),
            _ => Err(new_err(
                Kind::Invalid,
                format!("{name}={v:?}: expected 0, 1, off, on, false or true"),
            )),
        },
    }
}

/// The numpy memory handler of the process-wide engine's output pool.
pub(crate) fn process_handler(py: Python<'_>) -> PyResult<&'static Handler> {
    static H: pyo3::sync::PyOnceLock<Handler> = pyo3::sync::PyOnceLock::new();
    H.get_or_try_init(py, || Handler::new(py, process_engine()?))
}

/// The process-wide engine of `selectjit.where` and `selectjit.arrow`: the library's defaults
/// with the settings of the environment (`SELECTJIT_*`), built on first use, the one
/// `selectjit_arrow` runs on (one cache of kernels, one output pool). A malformed setting, or a
/// tier this host cannot run, is an error of every call that uses it.
pub(crate) fn process_engine() -> PyResult<&'static Engine> {
    selectjit_arrow::shared_engine().map_err(|e| lib_error(e.clone()))
}

/// A selectjit engine: a kernel cache and a code-generation tier.
///
/// `Engine(tier="auto", threads=None, output_pool=None)`: `tier` is one of auto, cranelift,
/// avx2, avx512 (a tier this CPU cannot run is a ValueError); `threads` is how many threads a
/// large call may be split across (default: all available; 1 never splits); `output_pool`
/// whether outputs of 1 MiB or more are allocated from a pool of freed outputs (default: on
/// unless `SELECTJIT_OUTPUT_POOL=0`), or the pool's cap in bytes (default 1 GiB; 0: off).
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

    /// The engine and the memory handler of its output pool.
    fn parts(&self, py: Python<'_>) -> PyResult<(&Engine, &Handler)> {
        match &self.inner {
            Inner::Own(e, _, _, h) => Ok((e, h)),
            Inner::Default => Ok((process_engine()?, process_handler(py)?)),
        }
    }
}

#[pymethods]
impl PyEngine {
    #[new]
    #[pyo3(signature = (tier = "auto".to_string(), threads = None, output_pool = None))]
    fn new(
        py: Python<'_>,
        tier: String,
        threads: Option<usize>,
        output_pool: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let tier: Tier = tier.parse().map_err(lib_error)?;
        let mut config = EngineConfig::new().tier(tier);
        config = match output_pool {
            None => config.output_pool(output_pool_from_env()?),
            Some(b) if b.is_instance_of::<pyo3::types::PyBool>() => {
                config.output_pool(b.extract()?)
            }
            Some(n) => match n.extract::<usize>() {
                Ok(cap) => config.output_pool(cap > 0).output_pool_cap(cap),
                Err(_) => {
                    return Err(new_err(
                        Kind::Invalid,
                        "output_pool must be a bool or a cap in bytes (a non-negative int)",
                    ));
                }
            },
        };
        if let Some(t) = threads {
            if t == 0 {
                return Err(new_err(Kind::Invalid, "threads must be at least 1"));
            }
            config = config.threads(t);
        }
        let engine = Engine::with_config(config).map_err(lib_error)?;
        let handler = Handler::new(py, &engine)?;
        Ok(PyEngine {
            inner: Inner::Own(Box::new(engine), tier, threads, handler),
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
            Inner::Own(_, tier, threads, _) => {
                let args = (tier.name(), *threads).into_pyobject(py)?;
                Ok((package.getattr("_shared_engine")?, args))
            }
        }
    }

    /// `where(condition, x, y, /, *, out=None, broadcast="numpy", axis=-1)` on this engine,
    /// or `where(condition)`: see `selectjit.where`.
    //
    // The general entry: the class's `where` is `engine_where_fast`, which hands this (kept as
    // `Engine._where_any`) every call but `where(c, x, y)` and `where(c, x, y, out=o)`.
    #[pyo3(signature = (condition, /, *args, out = None, broadcast = None, axis = -1))]
    fn r#where<'py>(
        &self,
        condition: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        out: Option<&Bound<'py, PyAny>>,
        broadcast: Option<&Bound<'py, PyAny>>,
        axis: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        where_args(
            self.parts(condition.py()),
            condition,
            args,
            out,
            broadcast,
            axis,
        )
    }

    /// The engine's counters (the library's `CacheStats`, every field by name) as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, v) in self.engine()?.stats().fields() {
            d.set_item(name, v)?;
        }
        Ok(d)
    }

    /// The figures of the engine's output pool as a dict: `enabled` (whether outputs come
    /// from it), `cap_bytes`, `held_bytes`, `held_buffers`, `live_bytes`, `live_buffers`,
    /// `hits`, `misses`, `direct`, `released`.
    fn output_pool_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (engine, handler) = self.parts(py)?;
        let d = PyDict::new(py);
        d.set_item("enabled", handler.active())?;
        for (name, v) in engine.output_pool_stats().fields() {
            d.set_item(name, v)?;
        }
        Ok(d)
    }

    /// Releases the freed outputs the engine's pool holds (arrays in use are not affected).
    fn trim_output_pool(&self) -> PyResult<()> {
        self.engine()?.trim_output_pool();
        Ok(())
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

/// `selectjit.where`'s doc, with its signature for `inspect` (as PyO3 writes it for
/// [`r#where`]).
const WHERE_DOC: &std::ffi::CStr = c"where(condition, /, *args, out=None, broadcast=None, axis=-1)
--

`where(condition, x, y, /, *, out=None, broadcast=\"numpy\", axis=-1)`

`numpy.where(condition, x, y)` bit for bit (values, dtype, shape, memory order), on
selectjit's compiled kernels and the process-wide default engine.

- `out`: an ndarray of the broadcast shape and the result dtype, any strides; it may be `x`
  or `y` (in place). Otherwise a ValueError / TypeError, and `out` is not written.
- `broadcast`: \"numpy\" (default), \"two-step\", \"none\" or \"pdpd\" (with `axis`), the library's
  broadcast modes; shapes a mode refuses are a ValueError.

`where(condition)` (no x, y) is `numpy.where(condition)`: the indices of the non-zero
elements, a tuple of arrays (`numpy.nonzero`).

`condition` may be a lazy predicate (`selectjit.greater(x, 0)`, ...), computed inside the
kernel.";

/// The general entry, which [`where_fast`] hands the calls it does not take.
static WHERE_ANY: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();

/// `selectjit.where` as a vectorcall built-in ([`fastcall`]): `where(c, x, y)` and
/// `where(c, x, y, out=o)` go straight to [`call::where_call`] (what [`r#where`] does for
/// them); any other call is passed to [`r#where`] as it came.
///
/// # Safety
/// Called by CPython only, as a `METH_FASTCALL | METH_KEYWORDS` function (see
/// [`fastcall::enter`]).
unsafe extern "C" fn where_fast(
    _module: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargs: pyo3::ffi::Py_ssize_t,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    // SAFETY: the caller's contract (CPython's vectorcall of this function).
    unsafe {
        fastcall::enter(args, nargs, kwnames, |a| {
            where_small(a, |py| {
                process_engine().and_then(|e| Ok((e, process_handler(py)?)))
            })
            .unwrap_or_else(|| a.forward(&WHERE_ANY))
        })
    }
}

/// The general entry of `Engine.where` (the PyO3 method, kept on the class as `_where_any`),
/// which [`engine_where_fast`] hands the calls it does not take.
static ENGINE_WHERE_ANY: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();

/// `Engine.where` as a vectorcall method descriptor ([`fastcall::replace_method`]): as
/// [`where_fast`], on the engine `slf`; any other call is passed to the PyO3 method as it came.
///
/// # Safety
/// Called by CPython only, as a `METH_FASTCALL | METH_KEYWORDS` method of `Engine` (see
/// [`fastcall::enter`]): `slf` is a live object the descriptor has checked is an `Engine`.
unsafe extern "C" fn engine_where_fast(
    slf: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargs: pyo3::ffi::Py_ssize_t,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    // SAFETY: the caller's contract (CPython's vectorcall of this method).
    unsafe {
        fastcall::enter(args, nargs, kwnames, |a| {
            // SAFETY: `slf` is a live (borrowed) object for the call (the caller's contract).
            let slf = Bound::from_borrowed_ptr(a.py(), slf);
            let engine = slf.cast::<PyEngine>()?.get();
            where_small(a, |py| engine.parts(py))
                .unwrap_or_else(|| a.forward_method(&slf, &ENGINE_WHERE_ANY))
        })
    }
}

/// `where(c, x, y)` and `where(c, x, y, out=o)` (`out=None`: no `out`) on the engine `parts`
/// gives; `None` for any other call.
fn where_small<'py, 'e>(
    a: &fastcall::Args<'py>,
    parts: impl FnOnce(Python<'py>) -> PyResult<(&'e Engine, &'e Handler)>,
) -> Option<PyResult<Bound<'py, PyAny>>> {
    let has_out = a.keywords_are(&["out"]);
    let (Some(c), Some(x), Some(y)) = (a.get(0), a.get(1), a.get(2)) else {
        return None;
    };
    if a.nargs() != 3 || !(has_out || a.keywords_are(&[])) {
        return None;
    }
    let out = if has_out { a.get(3) } else { None };
    let out = out.filter(|o| !o.is_none());
    Some(parts(a.py()).and_then(|parts| {
        call::where_call(parts, &c, &x, &y, out.as_ref(), selectjit::Broadcast::Numpy)
    }))
}

/// The general entry of `selectjit.where` (every form of the call; registered as `_where_any`,
/// the module's `where` is [`where_fast`], which hands it every call but `where(c, x, y)` and
/// `where(c, x, y, out=o)`). Its doc is `where`'s ([`WHERE_DOC`]).
#[pyfunction]
#[pyo3(name = "where", signature = (condition, /, *args, out = None, broadcast = None, axis = -1))]
fn r#where<'py>(
    condition: &Bound<'py, PyAny>,
    args: &Bound<'py, PyTuple>,
    out: Option<&Bound<'py, PyAny>>,
    broadcast: Option<&Bound<'py, PyAny>>,
    axis: i64,
) -> PyResult<Bound<'py, PyAny>> {
    let py = condition.py();
    let parts = process_engine().and_then(|e| Ok((e, process_handler(py)?)));
    where_args(parts, condition, args, out, broadcast, axis)
}

/// `where(condition, *args, ...)` as numpy takes it: `args` is `(x, y)`, or empty (then the
/// call is `numpy.where(condition)`).
fn where_args<'py>(
    engine: PyResult<(&Engine, &Handler)>,
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

/// `set_output_pool(on)`: whether outputs of 1 MiB or more come from the engines' pools of
/// freed outputs (every engine that has one; default: on). Returns the previous setting.
#[pyfunction]
fn set_output_pool(on: bool) -> bool {
    memhandler::set_enabled(on)
}

/// numpy.where bit for bit, on selectjit's JIT-compiled Select kernels: `where`, `Engine`,
/// `default_engine`, `set_output_pool` (the package `selectjit` re-exports them).
#[pymodule]
#[pyo3(name = "_selectjit")]
fn selectjit_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    fastcall::add(
        m,
        c"where",
        WHERE_DOC,
        where_fast,
        wrap_pyfunction!(r#where, m)?,
        &WHERE_ANY,
    )?;
    m.add_function(wrap_pyfunction!(default_engine, m)?)?;
    m.add_function(wrap_pyfunction!(set_output_pool, m)?)?;
    m.add_function(wrap_pyfunction!(nway::select_n, m)?)?;
    m.add_class::<PyEngine>()?;
    fastcall::replace_method(
        &m.py().get_type::<PyEngine>(),
        c"where",
        engine_where_fast,
        &ENGINE_WHERE_ANY,
    )?;
    m.add_class::<pred::PyPred>()?;
    pred::register(m)?;
    m.add_function(wrap_pyfunction!(arrow::_arrow_if_else, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::_arrow_case_when, m)?)?;
    m.add_class::<arrow::ArrowArrayOut>()?;
    m.add_class::<arrow::ArrowChunkedOut>()?;
    Ok(())
}

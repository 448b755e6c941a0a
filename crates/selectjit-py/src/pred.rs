//! Lazy predicates (`selectjit.greater(x, 0)`, `selectjit.isnan(x)`, ...): the Python class
//! `selectjit.Predicate` (python/selectjit/_predicates.py) derives from [`PyPred`], which holds
//! what `where` needs to run the predicate inside its kernel. The Python side decides (numpy's
//! own type resolution, NEP 50) whether a predicate can be fused; one that cannot has no
//! `dtype` here and is used through its `__array__` (numpy's own evaluation).

use std::sync::Mutex;

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyComplex, PyComplexMethods, PyFloat, PyFloatMethods, PyString, PyTuple, PyType,
};
use selectjit::{CmpOp, DType, TestOp};

use crate::errors::{Kind, new_err};

/// What a predicate computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Cmp(CmpOp),
    Test(TestOp),
}

/// The base of `selectjit.Predicate`:
/// `_Pred(op, negate, lhs, rhs, dtype, kind=None, args=(), shape=None, result=None)`.
///
/// `op` is numpy's ufunc name (`greater`, ..., `isnan`, ...); `lhs` and `rhs` (None for a
/// test) are exact `numpy.ndarray`s whose values are compared in `dtype` (numpy's loop dtype,
/// native byte order; an operand of another dtype is cast to it when the predicate is used);
/// `dtype` None: not fused (the predicate is evaluated by numpy, through `__array__`).
/// `kind` (numpy's ufunc the predicate stands for, default `op`), `args` (its operands),
/// `shape` (its result's shape; None: the broadcast of `lhs` and `rhs`) and `result` (numpy's
/// result, for a predicate that is not fused) are kept for the Python side.
#[pyclass(name = "_Pred", module = "selectjit._selectjit", subclass, frozen)]
pub struct PyPred {
    pub op: Op,
    pub negate: bool,
    pub lhs: Option<Py<PyUntypedArray>>,
    pub rhs: Option<Py<PyUntypedArray>>,
    pub dtype: Option<(Py<PyArrayDescr>, DType)>,
    kind: Py<PyString>,
    args: Py<PyTuple>,
    shape: Option<Py<PyTuple>>,
    result: Option<Py<PyAny>>,
}

/// The library's dtype of numpy's `d` (native byte order), if it compares such elements.
pub fn lib_dtype(d: &Bound<'_, PyArrayDescr>) -> Option<DType> {
    if !matches!(d.byteorder(), b'=' | b'|') || d.has_fields() || d.has_subarray() {
        return None;
    }
    // Built-in numeric types (a user dtype of the same kind and size may compare differently),
    // and ml_dtypes' bfloat16 (whose loops compare the values as floats, as the kernels do).
    let num = d.num();
    if !((0..=15).contains(&num) || num == 23) {
        return is_bfloat16(d).then_some(DType::BF16);
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

/// The type number of ml_dtypes' `bfloat16` once seen (numpy numbers user dtypes as they are
/// registered), -1 before.
static BF16_NUM: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// Whether `d` is ml_dtypes' `bfloat16` (native byte order checked by the caller).
fn is_bfloat16(d: &Bound<'_, PyArrayDescr>) -> bool {
    use std::sync::atomic::Ordering;
    let num = d.num();
    if num < 256 || d.itemsize() != 2 || d.kind() != b'V' {
        return false;
    }
    if BF16_NUM.load(Ordering::Relaxed) == num {
        return true;
    }
    let t = d.typeobj();
    let named = |attr: &str, want: &str| {
        t.getattr(attr)
            .and_then(|v| v.extract::<String>())
            .is_ok_and(|v| v == want)
    };
    let bf16 = named("__name__", "bfloat16") && named("__module__", "ml_dtypes");
    if bf16 {
        BF16_NUM.store(num, Ordering::Relaxed);
    }
    bf16
}

#[pymethods]
impl PyPred {
    #[new]
    #[pyo3(signature = (op, negate, lhs, rhs, dtype, kind = None, args = None, shape = None, result = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        op: &Bound<'_, PyString>,
        negate: bool,
        lhs: Option<Bound<'_, PyAny>>,
        rhs: Option<Bound<'_, PyAny>>,
        dtype: Option<Bound<'_, PyArrayDescr>>,
        kind: Option<Bound<'_, PyString>>,
        args: Option<Bound<'_, PyTuple>>,
        shape: Option<Bound<'_, PyTuple>>,
        result: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let py = op.py();
        let kind = kind.unwrap_or_else(|| op.clone()).unbind();
        let args = args.unwrap_or_else(|| PyTuple::empty(py)).unbind();
        let shape = shape.map(Bound::unbind);
        let result = result.filter(|r| !r.is_none()).map(Bound::unbind);
        let op = op.to_cow()?;
        let op: &str = &op;
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
            kind,
            args,
            shape,
            result,
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

    /// numpy's ufunc the predicate stands for (its name).
    #[getter]
    fn _kind(&self, py: Python<'_>) -> Py<PyString> {
        self.kind.clone_ref(py)
    }

    /// The operands, as the predicate was made with them.
    #[getter]
    fn _args(&self, py: Python<'_>) -> Py<PyTuple> {
        self.args.clone_ref(py)
    }

    /// numpy's result, for a predicate numpy evaluated when it was made (else None).
    #[getter]
    fn _result(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.result.as_ref().map(|r| r.clone_ref(py))
    }

    /// The shape of the bool array the predicate stands for.
    #[getter]
    fn _shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        if let Some(s) = &self.shape {
            return Ok(s.bind(py).clone());
        }
        let l: &[usize] = match &self.lhs {
            Some(a) => a.bind(py).shape(),
            None => &[],
        };
        let r: &[usize] = match &self.rhs {
            Some(a) => a.bind(py).shape(),
            None => &[],
        };
        // The shapes were checked to broadcast when the predicate was made; an operand
        // reshaped in place since then is a broadcast error of the predicate's use.
        let s = crate::layout::numpy_broadcast([l, r, &[]]).ok_or_else(|| {
            new_err(
                Kind::Broadcast,
                format!(
                    "operands could not be broadcast together with shapes {} {}",
                    crate::call::shape_str(l),
                    crate::call::shape_str(r)
                ),
            )
        })?;
        PyTuple::new(py, s.iter().copied())
    }
}

/// The predicate functions (`selectjit.greater`, ..., `selectjit.isfinite`), in the order of
/// [`KINDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
enum PredKind {
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
    Equal,
    NotEqual,
    IsNan,
    IsInf,
    IsFinite,
}

impl PredKind {
    /// The kernel's operation.
    fn op(self) -> Option<Op> {
        Some(match self {
            PredKind::Greater => Op::Cmp(CmpOp::Gt),
            PredKind::GreaterEqual => Op::Cmp(CmpOp::Ge),
            PredKind::Less => Op::Cmp(CmpOp::Lt),
            PredKind::LessEqual => Op::Cmp(CmpOp::Le),
            PredKind::Equal => Op::Cmp(CmpOp::Eq),
            PredKind::NotEqual => Op::Cmp(CmpOp::Ne),
            PredKind::IsNan => Op::Test(TestOp::IsNan),
            PredKind::IsInf => Op::Test(TestOp::IsInf),
            PredKind::IsFinite => Op::Test(TestOp::IsFinite),
        })
    }
}

/// numpy's ufunc names of the predicate functions, by [`PredKind`].
const KINDS: [&str; 9] = [
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "equal",
    "not_equal",
    "isnan",
    "isinf",
    "isfinite",
];

/// The Python side of the predicates (`selectjit._predicates`), imported on first use: the
/// class `Predicate`, `_make` (the general construction) and numpy's answers `_loop_dtype`
/// and `_weak_scalar_cached`, which the fast construction caches.
struct Helpers {
    cls: Py<PyType>,
    make: Py<PyAny>,
    loop_dtype: Py<PyAny>,
    weak_scalar: Py<PyAny>,
    names: [Py<PyString>; 9],
}

fn helpers(py: Python<'_>) -> PyResult<&'static Helpers> {
    static H: PyOnceLock<Helpers> = PyOnceLock::new();
    H.get_or_try_init(py, || {
        let m = py.import("selectjit._predicates")?;
        let cls = m.getattr("Predicate")?.cast_into::<PyType>()?;
        if !cls.is_subclass_of::<PyPred>()? {
            return Err(new_err(
                Kind::Internal,
                "selectjit.Predicate does not derive from _Pred",
            ));
        }
        Ok(Helpers {
            cls: cls.unbind(),
            make: m.getattr("_make")?.unbind(),
            loop_dtype: m.getattr("_loop_dtype")?.unbind(),
            weak_scalar: m.getattr("_weak_scalar_cached")?.unbind(),
            names: KINDS.map(|k| PyString::intern(py, k).unbind()),
        })
    })
}

/// Whether `obj` is exactly a `selectjit.Predicate` (which numpy's `where` does not hand to
/// another library: the class defines no `__array_function__`).
pub fn is_exact_predicate(obj: &Bound<'_, PyAny>) -> bool {
    helpers(obj.py()).is_ok_and(|h| obj.get_type().is(h.cls.bind(obj.py())))
}

/// What numpy's loop dtype of a predicate depends on, for one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OpKey {
    /// A Python `int` / `float` / `complex` (NEP 50: weak, only its kind matters).
    Weak(u8),
    /// An array of a built-in numeric dtype in native byte order (its type number).
    Fixed(i32),
}

fn array_key(a: &Bound<'_, PyUntypedArray>) -> Option<OpKey> {
    let d = a.dtype();
    lib_dtype(&d).map(|_| OpKey::Fixed(d.num()))
}

/// A small cache: the few keys a program uses, found by a linear scan (faster than hashing
/// for this many), cleared when full.
struct Small<K, V>(Vec<(K, V)>);

impl<K: PartialEq, V> Small<K, V> {
    const MAX: usize = 64;
}

type LoopCache = Small<(PredKind, OpKey, Option<OpKey>), Option<(Py<PyArrayDescr>, DType)>>;
type ScalarCache = Small<(u8, [u64; 2], i32), Option<Py<PyUntypedArray>>>;

/// Cached answers of `_loop_dtype` and `_weak_scalar_cached`.
static LOOPS: Mutex<LoopCache> = Mutex::new(Small(Vec::new()));
static SCALARS: Mutex<ScalarCache> = Mutex::new(Small(Vec::new()));

fn cached<K: PartialEq, V>(
    cache: &Mutex<Small<K, V>>,
    key: K,
    get: impl FnOnce(&V) -> V,
    compute: impl FnOnce() -> PyResult<V>,
) -> PyResult<V> {
    {
        let c = cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, v)) = c.0.iter().find(|(k, _)| *k == key) {
            return Ok(get(v));
        }
    }
    let v = compute()?;
    let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
    if c.0.len() >= Small::<K, V>::MAX {
        c.0.clear();
    }
    let r = get(&v);
    c.0.push((key, v));
    Ok(r)
}

/// numpy's loop dtype of `kind` over operands `a` (and `b`), if the kernels compare in it.
fn loop_dtype<'py>(
    py: Python<'py>,
    h: &Helpers,
    kind: PredKind,
    a: (&Bound<'py, PyAny>, OpKey),
    b: Option<(&Bound<'py, PyAny>, OpKey)>,
) -> PyResult<Option<(Bound<'py, PyArrayDescr>, DType)>> {
    let arg_type = |o: &Bound<'py, PyAny>, k: OpKey| -> PyResult<Bound<'py, PyAny>> {
        Ok(match k {
            OpKey::Weak(_) => o.get_type().into_any(),
            OpKey::Fixed(_) => o.cast::<PyUntypedArray>()?.dtype().into_any(),
        })
    };
    let r = cached(
        &LOOPS,
        (kind, a.1, b.map(|b| b.1)),
        |v| v.as_ref().map(|(d, l)| (d.clone_ref(py), *l)),
        || {
            let mut types = vec![arg_type(a.0, a.1)?];
            if let Some((o, k)) = b {
                types.push(arg_type(o, k)?);
            }
            let d = h
                .loop_dtype
                .bind(py)
                .call1((h.names[kind as usize].bind(py), PyTuple::new(py, types)?))?;
            if d.is_none() {
                return Ok(None);
            }
            let d = d.cast_into::<PyArrayDescr>()?;
            Ok(lib_dtype(&d).map(|l| (d.unbind(), l)))
        },
    )?;
    Ok(r.map(|(d, l)| (d.into_bound(py), l)))
}

/// The weak scalar `v` (of kind `k`) as the predicate compares it in `dt` (numpy's conversion,
/// when certain to be exact), or None: numpy then evaluates the predicate.
fn weak_operand<'py>(
    h: &Helpers,
    v: &Bound<'py, PyAny>,
    k: u8,
    dt: &Bound<'py, PyArrayDescr>,
) -> PyResult<Option<Bound<'py, PyUntypedArray>>> {
    let py = v.py();
    let bits = match k {
        b'f' => [v.cast::<PyFloat>()?.value().to_bits(), 0],
        b'c' => {
            let c = v.cast::<PyComplex>()?;
            [c.real().to_bits(), c.imag().to_bits()]
        }
        _ => match v.extract::<i64>() {
            Ok(i) => [i as u64, 0],
            Err(_) => return Ok(None),
        },
    };
    let r = cached(
        &SCALARS,
        (k, bits, dt.num()),
        |a| a.as_ref().map(|a| a.clone_ref(py)),
        || {
            let a = h.weak_scalar.bind(py).call1((v, dt))?;
            if a.is_none() {
                return Ok(None);
            }
            Ok(Some(a.cast_into::<PyUntypedArray>()?.unbind()))
        },
    )?;
    Ok(r.map(|a| a.into_bound(py)))
}

/// The predicate `kind(*args)` made without the Python side's general path: operands that are
/// exact ndarrays of one shape (or 0-d) and Python scalars, with numpy's loop dtype one the
/// kernels compare (the answers of the Python side, cached). None: the general path decides.
fn fast<'py>(
    h: &Helpers,
    kind: PredKind,
    a: &Bound<'py, PyAny>,
    b: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = a.py();
    if !crate::np::is_exact_ndarray(a) {
        return Ok(None);
    }
    // SAFETY: checked to be an ndarray just above.
    let aa: &Bound<'py, PyUntypedArray> = unsafe { a.cast_unchecked() };
    let Some(ka) = array_key(aa) else {
        return Ok(None);
    };
    // A numpy scalar is, to numpy 2's promotion (NEP 50), its 0-d array.
    let b0 = match b {
        Some(x) if crate::np::is_numpy_scalar(x) => Some(crate::np::from_any(x)?.into_any()),
        _ => None,
    };
    let b = b0.as_ref().or(b);
    let (kb, weak) = match b {
        None => (None, None),
        Some(b) if crate::np::is_exact_ndarray(b) => {
            // SAFETY: checked to be an ndarray just above.
            let ba: &Bound<'py, PyUntypedArray> = unsafe { b.cast_unchecked() };
            let (sa, sb) = (aa.shape(), ba.shape());
            if !(sa == sb || sa.is_empty() || sb.is_empty()) {
                return Ok(None);
            }
            match array_key(ba) {
                Some(k) => (Some((b, k)), None),
                None => return Ok(None),
            }
        }
        Some(b) => match crate::promote::weak_kind(b) {
            Some(k) => (Some((b, OpKey::Weak(k))), Some(k)),
            None => return Ok(None),
        },
    };
    let Some((dt, _)) = loop_dtype(py, h, kind, (a, ka), kb)? else {
        return Ok(None);
    };
    let rhs = match (b, weak) {
        (Some(b), Some(k)) => match weak_operand(h, b, k, &dt)? {
            Some(r) => Some(r.into_any()),
            None => return Ok(None),
        },
        (b, _) => b.cloned(),
    };
    let name = h.names[kind as usize].bind(py);
    let args = match b {
        Some(b) => PyTuple::new(py, [a, b])?,
        None => PyTuple::new(py, [a])?,
    };
    let (Some(op), Some(lib)) = (kind.op(), lib_dtype(&dt)) else {
        return Ok(None);
    };
    let value = PyPred {
        op,
        negate: false,
        // SAFETY: `a` was checked to be an ndarray above.
        lhs: Some(unsafe { a.clone().cast_into_unchecked::<PyUntypedArray>() }.unbind()),
        rhs: match rhs {
            Some(r) => Some(r.cast_into::<PyUntypedArray>()?.unbind()),
            None => None,
        },
        dtype: Some((dt.unbind(), lib)),
        kind: name.clone().unbind(),
        args: args.unbind(),
        shape: None,
        result: None,
    };
    let cls = h.cls.bind(py);
    // SAFETY: `cls` is `selectjit.Predicate`, a Python subclass of `_Pred` (checked when the
    // helpers were imported): what `_Pred.__new__` does when the class is called, without
    // parsing arguments (the class defines no `__init__`).
    let p = unsafe {
        pyo3::impl_::pymethods::tp_new_impl(
            py,
            pyo3::PyClassInitializer::from(value),
            cls.as_type_ptr(),
        )
        .map(|p| Bound::from_owned_ptr(py, p))?
    };
    Ok(Some(p))
}

fn make<'py>(
    kind: PredKind,
    a: &Bound<'py, PyAny>,
    b: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = a.py();
    let h = helpers(py)?;
    if let Some(p) = fast(h, kind, a, b)? {
        return Ok(p);
    }
    let args = match b {
        Some(b) => PyTuple::new(py, [a, b])?,
        None => PyTuple::new(py, [a])?,
    };
    h.make
        .bind(py)
        .call1((h.names[kind as usize].bind(py), false, args))
}

/// The general entries of the predicate functions, by [`PredKind`], which their vectorcall
/// entries hand the calls they do not take.
static GENERAL: [PyOnceLock<Py<PyAny>>; 9] = [const { PyOnceLock::new() }; 9];

/// The body of a predicate function's vectorcall entry: `kind(x1, x2)` (or `kind(x)`), any
/// other call handed to the general entry.
fn fast_entry<'py>(
    kind: PredKind,
    arity: usize,
    a: &crate::fastcall::Args<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    if a.nargs() != arity || !a.keywords_are(&[]) {
        return a.forward(&GENERAL[kind as usize]);
    }
    match (a.get(0), a.get(1)) {
        (Some(x), b) => make(kind, &x, if arity == 2 { b.as_ref() } else { None }),
        (None, _) => a.forward(&GENERAL[kind as usize]),
    }
}

/// A C string constant of literals (checked at compile time).
macro_rules! cstr {
    ($($s:expr),+) => {
        const {
            match std::ffi::CStr::from_bytes_with_nul(concat!($($s),+, "\0").as_bytes()) {
                Ok(c) => c,
                Err(_) => panic!("a C string with a NUL inside"),
            }
        }
    };
}

macro_rules! cmp_fn {
    ($f:ident, $fast:ident, $kind:ident, $name:literal) => {
        #[doc = concat!("`numpy.", $name, "(x1, x2)` as a lazy predicate: `selectjit.where` computes it inside its kernel; anywhere else it is numpy's bool array.")]
        #[pyfunction]
        #[pyo3(name = $name, signature = (x1, x2, /))]
        pub fn $f<'py>(x1: &Bound<'py, PyAny>, x2: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
            make(PredKind::$kind, x1, Some(x2))
        }

        /// The vectorcall entry of the function (see [`crate::fastcall`]).
        ///
        /// # Safety
        /// Called by CPython only, as a `METH_FASTCALL | METH_KEYWORDS` function.
        unsafe extern "C" fn $fast(
            _m: *mut pyo3::ffi::PyObject,
            args: *const *mut pyo3::ffi::PyObject,
            nargs: pyo3::ffi::Py_ssize_t,
            kwnames: *mut pyo3::ffi::PyObject,
        ) -> *mut pyo3::ffi::PyObject {
            // SAFETY: the caller's contract (CPython's vectorcall of this function).
            unsafe { crate::fastcall::enter(args, nargs, kwnames, |a| fast_entry(PredKind::$kind, 2, a)) }
        }
    };
}

macro_rules! test_fn {
    ($f:ident, $fast:ident, $kind:ident, $name:literal) => {
        #[doc = concat!("`numpy.", $name, "(x)` as a lazy predicate: `selectjit.where` computes it inside its kernel; anywhere else it is numpy's bool array.")]
        #[pyfunction]
        #[pyo3(name = $name, signature = (x, /))]
        pub fn $f<'py>(x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
            make(PredKind::$kind, x, None)
        }

        /// The vectorcall entry of the function (see [`crate::fastcall`]).
        ///
        /// # Safety
        /// Called by CPython only, as a `METH_FASTCALL | METH_KEYWORDS` function.
        unsafe extern "C" fn $fast(
            _m: *mut pyo3::ffi::PyObject,
            args: *const *mut pyo3::ffi::PyObject,
            nargs: pyo3::ffi::Py_ssize_t,
            kwnames: *mut pyo3::ffi::PyObject,
        ) -> *mut pyo3::ffi::PyObject {
            // SAFETY: the caller's contract (CPython's vectorcall of this function).
            unsafe { crate::fastcall::enter(args, nargs, kwnames, |a| fast_entry(PredKind::$kind, 1, a)) }
        }
    };
}

cmp_fn!(greater, greater_fast, Greater, "greater");
cmp_fn!(
    greater_equal,
    greater_equal_fast,
    GreaterEqual,
    "greater_equal"
);
cmp_fn!(less, less_fast, Less, "less");
cmp_fn!(less_equal, less_equal_fast, LessEqual, "less_equal");
cmp_fn!(equal, equal_fast, Equal, "equal");
cmp_fn!(not_equal, not_equal_fast, NotEqual, "not_equal");
test_fn!(isnan, isnan_fast, IsNan, "isnan");
test_fn!(isinf, isinf_fast, IsInf, "isinf");
test_fn!(isfinite, isfinite_fast, IsFinite, "isfinite");

/// Adds one predicate function: its vectorcall entry as the function (doc and signature
/// as PyO3 writes them for the general entry).
macro_rules! add_pred {
    ($m:expr, $f:ident, $fast:ident, $kind:ident, $name:literal, $sig:literal, $call:literal) => {
        crate::fastcall::add(
            $m,
            cstr!($name),
            cstr!(
                $name, $sig, "\n--\n\n`numpy.", $name, $call,
                "` as a lazy predicate: `selectjit.where` computes it inside its kernel; anywhere else it is numpy's bool array."
            ),
            $fast,
            wrap_pyfunction!($f, $m)?,
            &GENERAL[PredKind::$kind as usize],
        )?
    };
}

/// Adds the predicate functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_pred!(
        m,
        greater,
        greater_fast,
        Greater,
        "greater",
        "(x1, x2, /)",
        "(x1, x2)"
    );
    add_pred!(
        m,
        greater_equal,
        greater_equal_fast,
        GreaterEqual,
        "greater_equal",
        "(x1, x2, /)",
        "(x1, x2)"
    );
    add_pred!(m, less, less_fast, Less, "less", "(x1, x2, /)", "(x1, x2)");
    add_pred!(
        m,
        less_equal,
        less_equal_fast,
        LessEqual,
        "less_equal",
        "(x1, x2, /)",
        "(x1, x2)"
    );
    add_pred!(
        m,
        equal,
        equal_fast,
        Equal,
        "equal",
        "(x1, x2, /)",
        "(x1, x2)"
    );
    add_pred!(
        m,
        not_equal,
        not_equal_fast,
        NotEqual,
        "not_equal",
        "(x1, x2, /)",
        "(x1, x2)"
    );
    add_pred!(m, isnan, isnan_fast, IsNan, "isnan", "(x, /)", "(x)");
    add_pred!(m, isinf, isinf_fast, IsInf, "isinf", "(x, /)", "(x)");
    add_pred!(
        m,
        isfinite,
        isfinite_fast,
        IsFinite,
        "isfinite",
        "(x, /)",
        "(x)"
    );
    Ok(())
}

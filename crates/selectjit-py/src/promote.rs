//! The result dtype of `where(condition, x, y)`: numpy's `result_type(x, y)`, with Python
//! `int`, `float` and `complex` scalars "weak" (NEP 50), exactly as numpy's `where` computes it.
//! Results for fixed (non-parametric) dtypes are cached, so repeated calls do not go back to
//! Python. Under NEP 50 (numpy 2, which the package requires) a Python scalar's value never
//! changes the result dtype, only its kind does, so weak scalars are keyed by kind.

use std::collections::HashMap;
use std::sync::Mutex;

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::types::{PyComplex, PyFloat, PyInt};

use crate::np;

/// What promotion depends on for one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// A Python scalar of this kind (`i`, `f`, `c`): numpy treats it as weakly typed.
    Weak(u8),
    /// An array of a fixed dtype, identified by its type number, byte order and itemsize.
    Fixed {
        num: i32,
        byteorder: u8,
        size: usize,
    },
}

/// The kind of a Python scalar numpy promotes weakly (`int`, `float`, `complex`, but not
/// `bool` nor subclasses), or `None`.
pub fn weak_kind(obj: &Bound<'_, PyAny>) -> Option<u8> {
    if obj.is_exact_instance_of::<PyFloat>() {
        Some(b'f')
    } else if obj.is_exact_instance_of::<PyInt>() {
        Some(b'i')
    } else if obj.is_exact_instance_of::<PyComplex>() {
        Some(b'c')
    } else {
        None
    }
}

/// Type numbers of numpy's built-in numeric dtypes (bool, integers, floats, complex, half).
fn builtin_numeric(num: i32) -> bool {
    (0..=16).contains(&num) || num == 23
}

/// Whether the byte order is the machine's (`=`) or not applicable (`|`).
fn native(byteorder: u8) -> bool {
    byteorder == b'=' || byteorder == b'|'
}

/// A cache key for a dtype whose promotion depends on its type alone: numpy's built-in numeric
/// types and legacy user types without fields or references (e.g. `ml_dtypes.bfloat16`).
fn fixed_key(d: &Bound<'_, PyArrayDescr>) -> Option<Key> {
    let num = d.num();
    let cacheable = builtin_numeric(num)
        || ((256..2048).contains(&num)
            && !d.has_fields()
            && !d.has_subarray()
            && d.flags() & numpy::npyffi::NPY_ITEM_REFCOUNT == 0);
    cacheable.then(|| Key::Fixed {
        num,
        byteorder: d.byteorder(),
        size: d.itemsize(),
    })
}

type Cache = HashMap<(Key, Key), Py<PyArrayDescr>>;

/// Cached promotions (bounded: cleared when it grows past this many pairs).
static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
const CACHE_MAX: usize = 512;

/// numpy's result dtype of `x` and `y` (the original arguments). `xa` and `ya` are their arrays
/// as numpy converts them, given for every argument that is not a weak Python scalar
/// ([`weak_kind`]).
pub fn result_dtype<'py>(
    x: &Bound<'py, PyAny>,
    xa: Option<&Bound<'py, PyUntypedArray>>,
    y: &Bound<'py, PyAny>,
    ya: Option<&Bound<'py, PyUntypedArray>>,
) -> PyResult<Bound<'py, PyArrayDescr>> {
    let py = x.py();
    let dx = xa.map(np::dtype);
    let dy = ya.map(np::dtype);
    // The common case: one built-in numeric dtype in native byte order for both.
    if let (Some(dx), Some(dy)) = (&dx, &dy)
        && dx.as_ptr() == dy.as_ptr()
        && builtin_numeric(dx.num())
        && native(dx.byteorder())
    {
        return Ok(dx.clone());
    }
    // An array against a weak Python scalar of its own kind or a lower one (int < float <
    // complex; bool arrays excluded): NEP 50 gives the array's dtype.
    let weak_under = |d: &Bound<'py, PyArrayDescr>, o: &Bound<'py, PyAny>| {
        let rank = |k: u8| match k {
            b'i' | b'u' => 1,
            b'f' => 2,
            b'c' => 3,
            _ => 0,
        };
        builtin_numeric(d.num())
            && native(d.byteorder())
            && rank(d.kind()) > 0
            && weak_kind(o).is_some_and(|k| rank(k) <= rank(d.kind()))
    };
    match (&dx, &dy) {
        (Some(d), None) if weak_under(d, y) => return Ok(d.clone()),
        (None, Some(d)) if weak_under(d, x) => return Ok(d.clone()),
        _ => {}
    }
    let key = |o: &Bound<'py, PyAny>, d: &Option<Bound<'py, PyArrayDescr>>| match d {
        None => weak_kind(o).map(Key::Weak),
        Some(d) => fixed_key(d),
    };
    let k = key(x, &dx).zip(key(y, &dy));
    if let Some(k) = k {
        let cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = cache.as_ref().and_then(|c| c.get(&k)) {
            return Ok(d.bind(py).clone());
        }
    }
    // Python scalars go in as themselves (numpy marks them weak), everything else as its array.
    let ox: &Bound<'py, PyAny> = xa.map_or(x, |a| a.as_any());
    let oy: &Bound<'py, PyAny> = ya.map_or(y, |a| a.as_any());
    let d = np::numpy(py)?
        .result_type
        .bind(py)
        .call1((ox, oy))?
        .cast_into::<PyArrayDescr>()?;
    if let Some(k) = k {
        let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        let c = cache.get_or_insert_with(HashMap::new);
        if c.len() >= CACHE_MAX {
            c.clear();
        }
        c.insert(k, d.clone().unbind());
    }
    Ok(d)
}

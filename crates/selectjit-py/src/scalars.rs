//! Python scalars (`int`, `float`, `complex`) as `x` or `y`: numpy's `where` converts them to
//! arrays of their default dtype and casts those to the result dtype. The converted 0-d arrays
//! are cached, keyed by the scalar's kind and bits and the result dtype, so `where(m, x, 0.0)`
//! in a loop does not convert `0.0` on every call. Only conversions that are exact go into the
//! cache: an inexact one (overflow, rounding) is done by numpy on every call, with its warnings.

use std::sync::Mutex;

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::types::{PyComplex, PyComplexMethods, PyFloat, PyFloatMethods};

use crate::np;

/// One converted scalar.
struct Entry {
    kind: u8,
    bits: [u64; 2],
    arr: Py<PyUntypedArray>,
}

/// Recently converted scalars (a small ring).
static CACHE: Mutex<(Vec<Entry>, usize)> = Mutex::new((Vec::new(), 0));
const SLOTS: usize = 16;

/// The scalar's value bits: a float's, an int's (when it fits in `i64`), a complex's parts.
fn bits(obj: &Bound<'_, PyAny>, kind: u8) -> Option<[u64; 2]> {
    match kind {
        b'f' => Some([obj.cast::<PyFloat>().ok()?.value().to_bits(), 0]),
        b'i' => Some([obj.extract::<i64>().ok()? as u64, 0]),
        b'c' => {
            let c = obj.cast::<PyComplex>().ok()?;
            Some([c.real().to_bits(), c.imag().to_bits()])
        }
        _ => None,
    }
}

/// The scalar `obj` (a weak Python scalar of `kind`) as a 0-d array of `dt`, as numpy's
/// `where` has it.
pub fn convert<'py>(
    obj: &Bound<'py, PyAny>,
    kind: u8,
    dt: &Bound<'py, PyArrayDescr>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = obj.py();
    let key = bits(obj, kind);
    if let Some(b) = key {
        let cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        for e in &cache.0 {
            if e.kind == kind && e.bits == b {
                let a = e.arr.bind(py);
                if np::equiv(&np::dtype(a), dt) {
                    return Ok(a.clone());
                }
            }
        }
    }
    let a = np::from_any(obj)?;
    let c = if np::equiv(&np::dtype(&a), dt) {
        a
    } else {
        np::cast(&a, dt)?
    };
    if let Some(b) = key
        && exact(kind, b, &c, dt)
    {
        let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        let entry = Entry {
            kind,
            bits: b,
            arr: c.clone().unbind(),
        };
        let (entries, next) = &mut *cache;
        if entries.len() < SLOTS {
            entries.push(entry);
        } else {
            entries[*next] = entry;
            *next = (*next + 1) % SLOTS;
        }
    }
    Ok(c)
}

/// A value decoded from the converted element.
enum Decoded {
    Int(i128),
    Float(f64, f64),
}

/// The element of the 0-d array `a` of dtype `dt`, when it is a native integer, float or
/// complex of a size read here.
fn decode(a: &Bound<'_, PyUntypedArray>, dt: &Bound<'_, PyArrayDescr>) -> Option<Decoded> {
    let bo = dt.byteorder();
    if !(bo == b'=' || bo == b'|') || !dt.num().lt(&24) {
        return None;
    }
    let size = dt.itemsize();
    if !matches!(size, 1 | 2 | 4 | 8 | 16) {
        return None;
    }
    let mut buf = [0u8; 16];
    // SAFETY: `a` is a live 0-d array of `dt`, so its data pointer addresses one element of
    // `size` (≤ 16) bytes; it is copied out while the GIL is held.
    unsafe { std::ptr::copy_nonoverlapping(np::info(a).data, buf.as_mut_ptr(), size) };
    let u = |n: usize| {
        let mut v = 0u128;
        for (i, b) in buf[..n].iter().enumerate() {
            v |= (*b as u128) << (8 * i);
        }
        v
    };
    let f = |b: &[u8], n: usize| -> Option<f64> {
        Some(match n {
            2 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
            4 => f32::from_le_bytes(b[..4].try_into().ok()?) as f64,
            8 => f64::from_le_bytes(b[..8].try_into().ok()?),
            _ => return None,
        })
    };
    Some(match dt.kind() {
        b'b' => Decoded::Int(buf[0] as i128),
        b'u' => Decoded::Int(u(size) as i128),
        b'i' => {
            let v = u(size);
            let shift = 128 - 8 * size as u32;
            Decoded::Int(((v << shift) as i128) >> shift)
        }
        b'f' => Decoded::Float(f(&buf, size)?, 0.0),
        b'c' => Decoded::Float(f(&buf, size / 2)?, f(&buf[size / 2..], size / 2)?),
        _ => return None,
    })
}

/// Whether the conversion of the scalar (`kind`, `bits`) to `c` lost nothing, so that numpy's
/// cast raised no floating-point warning and caching it changes nothing observable.
fn exact(
    kind: u8,
    bits: [u64; 2],
    c: &Bound<'_, PyUntypedArray>,
    dt: &Bound<'_, PyArrayDescr>,
) -> bool {
    let Some(d) = decode(c, dt) else {
        return false;
    };
    let same = |a: f64, b: f64| !a.is_nan() && a.to_bits() == b.to_bits();
    match (kind, d) {
        (b'i', Decoded::Int(v)) => v == bits[0] as i64 as i128,
        (b'i', Decoded::Float(re, im)) => {
            let v = bits[0] as i64;
            re.fract() == 0.0
                && re.abs() < 9.2e18
                && re as i64 == v
                && im == 0.0
                && !im.is_sign_negative()
        }
        (b'f', Decoded::Float(re, im)) => {
            same(re, f64::from_bits(bits[0])) && im == 0.0 && !im.is_sign_negative()
        }
        (b'c', Decoded::Float(re, im)) => {
            same(re, f64::from_bits(bits[0])) && same(im, f64::from_bits(bits[1]))
        }
        _ => false,
    }
}

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

/// The bytes of one element of `dt` holding the weak Python scalar `obj` (of `kind`), when
/// numpy's conversion is certain to give exactly that value without a warning or an error:
/// an `int` in the range of an integer dtype or small enough to be exact in a float or complex
/// one, a `float` that a float or complex dtype holds exactly, a `complex` whose parts a
/// complex dtype holds exactly (NaN only at full width, as numpy keeps its bits). None for
/// anything else (the caller then converts through [`convert`]), and for dtypes other than
/// numpy's built-in numeric ones in native byte order.
pub fn weak_bytes(
    obj: &Bound<'_, PyAny>,
    kind: u8,
    dt: &Bound<'_, PyArrayDescr>,
) -> Option<([u8; 16], usize)> {
    let num = dt.num();
    if !(matches!(dt.byteorder(), b'=' | b'|') && ((1..=15).contains(&num) || num == 23)) {
        return None;
    }
    let size = dt.itemsize();
    let mut buf = [0u8; 16];
    // A value as a float of `n` bytes, if exact (NaN only at 8 bytes).
    let float = |v: f64, n: usize, out: &mut [u8]| -> Option<()> {
        match n {
            8 => out[..8].copy_from_slice(&v.to_ne_bytes()),
            4 => {
                let f = v as f32;
                if v.is_nan() || f as f64 != v {
                    return None;
                }
                out[..4].copy_from_slice(&f.to_ne_bytes());
            }
            2 => {
                let h = half::f16::from_f64(v);
                if v.is_nan() || h.to_f64() != v {
                    return None;
                }
                out[..2].copy_from_slice(&h.to_ne_bytes());
            }
            _ => return None,
        }
        Some(())
    };
    // The scalar's real and imaginary parts (an `int` only when exact as an f64).
    let parts = || -> Option<(f64, f64)> {
        match kind {
            b'i' => {
                let v = obj.extract::<i64>().ok()?;
                (v.unsigned_abs() <= 1 << 53).then_some((v as f64, 0.0))
            }
            b'f' => Some((obj.cast::<PyFloat>().ok()?.value(), 0.0)),
            b'c' => {
                let c = obj.cast::<PyComplex>().ok()?;
                Some((c.real(), c.imag()))
            }
            _ => None,
        }
    };
    match (dt.kind(), kind) {
        (b'i', b'i') | (b'u', b'i') => {
            let v = obj.extract::<i64>().ok()?;
            let bytes = v.to_ne_bytes();
            let fits = match (dt.kind(), size) {
                (b'i', 1) => i8::try_from(v).is_ok(),
                (b'i', 2) => i16::try_from(v).is_ok(),
                (b'i', 4) => i32::try_from(v).is_ok(),
                (b'i', 8) => true,
                (b'u', 1) => u8::try_from(v).is_ok(),
                (b'u', 2) => u16::try_from(v).is_ok(),
                (b'u', 4) => u32::try_from(v).is_ok(),
                (b'u', 8) => v >= 0,
                _ => false,
            };
            if !fits {
                return None;
            }
            // The low `size` bytes hold the value in the machine's byte order.
            if cfg!(target_endian = "little") {
                buf[..size].copy_from_slice(&bytes[..size]);
            } else {
                buf[..size].copy_from_slice(&bytes[8 - size..]);
            }
        }
        (b'f', b'i' | b'f') => {
            let (re, _) = parts()?;
            float(re, size, &mut buf)?;
        }
        (b'c', b'i' | b'f' | b'c') if matches!(size, 8 | 16) => {
            let (re, im) = parts()?;
            let h = size / 2;
            float(re, h, &mut buf[..h])?;
            float(im, h, &mut buf[h..size])?;
        }
        _ => return None,
    }
    Some((buf, size))
}

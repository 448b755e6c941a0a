//! Bitmap conditions with bit offsets and validity: `selectjit_arrow::zip` equals arrow-select's
//! `zip` and `selectjit_arrow::if_else` equals it with the mask's nulls added (Arrow C++'s
//! rule), over fixed-width types, booleans and strings, arrays at any offset and scalars (null
//! ones included); and `Engine::select_bytes` with `Cond::bitmap_with_validity` equals the
//! interpreter byte for byte. Nothing panics.
#![no_main]

use std::sync::{Arc, OnceLock};

use arbitrary::{Result, Unstructured};
use arrow_array::{Array, ArrayRef, BooleanArray, Datum, Scalar, StringArray, make_array, new_null_array};
use arrow_buffer::{Buffer, MutableBuffer, NullBuffer};
use arrow_data::ArrayData;
use arrow_schema::{DataType, IntervalUnit, TimeUnit};
use libfuzzer_sys::fuzz_target;
use selectjit::bits::Bitmap;
use selectjit::{Backend, Broadcast, Cond, DType, Engine, EngineConfig, TensorMut, TensorRef};

fn engines() -> &'static (Engine, Engine) {
    static E: OnceLock<(Engine, Engine)> = OnceLock::new();
    E.get_or_init(|| {
        (
            Engine::with_config(EngineConfig::new().backend(Backend::Interp)).expect("interp"),
            Engine::new(),
        )
    })
}

fn buf(b: &[u8]) -> Buffer {
    let mut m = MutableBuffer::with_capacity(b.len());
    m.extend_from_slice(b);
    m.into()
}

/// `n` bytes from the input (zeros once it runs out).
fn bytes(u: &mut Unstructured, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    let _ = u.fill_buffer(&mut v);
    v
}

/// `len` bits at a drawn offset: the bytes and the offset.
fn bits(u: &mut Unstructured, len: usize) -> Result<(Vec<u8>, usize)> {
    let off = u.int_in_range(0..=63)?;
    let b = match u.int_in_range(0..=3)? {
        0 => vec![0u8; (off + len).div_ceil(8)],
        1 => vec![0xffu8; (off + len).div_ceil(8)],
        _ => bytes(u, (off + len).div_ceil(8)),
    };
    Ok((b, off))
}

fn width(dt: &DataType) -> usize {
    match dt {
        DataType::FixedSizeBinary(w) => *w as usize,
        _ => dt.primitive_width().unwrap_or(0),
    }
}

/// An array of `len` rows at a drawn offset, with or without nulls.
fn array(u: &mut Unstructured, dt: &DataType, len: usize) -> Result<ArrayRef> {
    let off = u.int_in_range(0..=63)?;
    let total = off + len;
    let nulls = if u.arbitrary()? {
        let (b, _) = bits(u, total)?;
        Some(NullBuffer::from(arrow_buffer::BooleanBuffer::new(buf(&b), 0, total)))
    } else {
        None
    };
    let a = match dt {
        DataType::Utf8 => {
            let words = ["", "x", "yz", "a string longer than twelve"];
            let mut v = Vec::with_capacity(total);
            for i in 0..total {
                let valid = nulls.as_ref().is_none_or(|n| n.is_valid(i));
                v.push(valid.then(|| words[(i * 7 + off) % words.len()]));
            }
            Arc::new(StringArray::from(v)) as ArrayRef
        }
        DataType::Boolean => make_array(
            ArrayData::builder(dt.clone())
                .len(total)
                .add_buffer(buf(&bytes(u, total.div_ceil(8))))
                .nulls(nulls)
                .build()
                .expect("boolean array"),
        ),
        _ => make_array(
            ArrayData::builder(dt.clone())
                .len(total)
                .add_buffer(buf(&bytes(u, total * width(dt))))
                .nulls(nulls)
                .build()
                .expect("fixed-width array"),
        ),
    };
    Ok(a.slice(off, len))
}

enum Side {
    A(ArrayRef),
    S(Scalar<ArrayRef>),
}

impl Side {
    fn datum(&self) -> &dyn Datum {
        match self {
            Side::A(a) => a,
            Side::S(s) => s,
        }
    }
}

fn side(u: &mut Unstructured, dt: &DataType, len: usize) -> Result<Side> {
    Ok(match u.int_in_range(0..=5)? {
        0 => Side::S(Scalar::new(new_null_array(dt, 1))),
        1 => Side::S(Scalar::new(array(u, dt, 1)?)),
        // Now and then a length that does not match: both must refuse it alike.
        2 if u.int_in_range(0..=15)? == 0 => Side::A(array(u, dt, len + 1)?),
        _ => Side::A(array(u, dt, len)?),
    })
}

fn arrow_side(u: &mut Unstructured) -> Result<()> {
    let types = [
        DataType::Int8,
        DataType::UInt16,
        DataType::Float16,
        DataType::Int32,
        DataType::Float64,
        DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        DataType::Decimal128(30, 4),
        DataType::Decimal256(50, 4),
        DataType::Interval(IntervalUnit::MonthDayNano),
        DataType::FixedSizeBinary(3),
        DataType::Boolean,
        DataType::Utf8,
    ];
    let dt = types[u.int_in_range(0..=types.len() - 1)?].clone();
    let len = match u.int_in_range(0..=9)? {
        0 => u.int_in_range(0..=9000)?,
        _ => u.int_in_range(0..=200)?,
    };
    let (mb, mo) = bits(u, len)?;
    let mnulls = if u.arbitrary()? {
        let (nb, no) = bits(u, len)?;
        Some(NullBuffer::new(arrow_buffer::BooleanBuffer::new(buf(&nb), no, len)))
    } else {
        None
    };
    let mask = BooleanArray::new(arrow_buffer::BooleanBuffer::new(buf(&mb), mo, len), mnulls);
    let t = side(u, &dt, len)?;
    // Now and then another type on one side.
    let f = if u.int_in_range(0..=31)? == 0 {
        side(u, &DataType::Int64, len)?
    } else {
        side(u, &dt, len)?
    };
    let want = arrow_select::zip::zip(&mask, t.datum(), f.datum());
    let got = selectjit_arrow::zip(&mask, t.datum(), f.datum());
    match (&want, &got) {
        (Ok(w), Ok(g)) => assert_eq!(g.as_ref(), w.as_ref(), "zip {dt} len {len}"),
        (Err(w), Err(g)) => assert_eq!(g.to_string(), w.to_string()),
        _ => panic!("zip {dt} len {len}: arrow {want:?}, selectjit {got:?}"),
    }
    let got = selectjit_arrow::if_else(&mask, t.datum(), f.datum());
    match (want, got) {
        (Ok(w), Ok(g)) => {
            // Arrow C++'s rule: zip's result, null where the condition is null.
            let nulls = NullBuffer::union(w.nulls(), mask.nulls());
            let w = make_array(w.to_data().into_builder().nulls(nulls).build().expect("nulls"));
            assert_eq!(g.as_ref(), w.as_ref(), "if_else {dt} len {len}");
        }
        (Err(w), Err(g)) => assert_eq!(g.to_string(), w.to_string()),
        (w, g) => panic!("if_else {dt} len {len}: arrow {w:?}, selectjit {g:?}"),
    }
    Ok(())
}

/// `Engine::select_bytes` on a bitmap condition with validity: the JIT engine equals the
/// interpreter.
fn engine_side(u: &mut Unstructured) -> Result<()> {
    let dts = [DType::U8, DType::I16, DType::F32, DType::F64, DType::Complex128];
    let dt = dts[u.int_in_range(0..=dts.len() - 1)?];
    let w = dt.width();
    let n = match u.int_in_range(0..=7)? {
        0 => u.int_in_range(4000..=9000)?,
        _ => u.int_in_range(0..=300)?,
    };
    let (cb, co) = bits(u, n)?;
    let valid = if u.arbitrary()? { Some(bits(u, n)?) } else { None };
    let not: bool = u.arbitrary()?;
    let t_scalar: bool = u.arbitrary()?;
    let e_scalar: bool = u.arbitrary()?;
    let t = bytes(u, if t_scalar { w } else { n * w });
    let e = bytes(u, if e_scalar { w } else { n * w });
    let shape = [n];
    let view = |b: &[u8], scalar: bool| -> (Vec<u8>, Vec<usize>) {
        (b.to_vec(), if scalar { vec![] } else { vec![n] })
    };
    let (tb, ts) = view(&t, t_scalar);
    let (eb, es) = view(&e, e_scalar);
    let run = |eng: &Engine| -> selectjit::Result<Vec<u8>> {
        let bm = Bitmap::new(&cb, co, n)?;
        let mut c = match &valid {
            Some((vb, vo)) => Cond::bitmap_with_validity(bm, Bitmap::new(vb, *vo, n)?, &shape),
            None => Cond::bitmap(bm, &shape),
        };
        if not {
            c = !c;
        }
        let mut out = vec![0u8; n * w];
        eng.select_bytes(
            dt,
            c,
            TensorRef::new(&tb, &ts),
            TensorRef::new(&eb, &es),
            TensorMut::new(&mut out, &shape),
            Broadcast::Numpy,
        )?;
        Ok(out)
    };
    let (interp, jit) = engines();
    let (a, b) = (run(interp), run(jit));
    match (a, b) {
        (Ok(a), Ok(b)) => assert!(a == b, "{dt} n {n} not {not}"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("{dt} n {n}: interp {:?}, jit {:?}", a.err(), b.err()),
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let _ = match u.arbitrary::<bool>() {
        Ok(true) => arrow_side(&mut u),
        _ => engine_side(&mut u),
    };
});

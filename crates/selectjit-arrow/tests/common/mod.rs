//! Random Arrow inputs: arrays of every supported type at bit offsets 0..63 with any null
//! rate, scalars (null ones included), masks of any density; and a row-by-row oracle built with
//! arrow's `interleave` (one row taken from one input at a time).
#![allow(dead_code)]

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Datum, Scalar, StringArray, make_array,
    new_null_array,
};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_data::ArrayData;
use arrow_schema::{DataType, IntervalUnit, TimeUnit};

/// A 64-byte aligned buffer of `b`.
pub fn buf(b: Vec<u8>) -> Buffer {
    let mut m = MutableBuffer::with_capacity(b.len());
    m.extend_from_slice(&b);
    m.into()
}

/// splitmix64.
pub struct Rng(std::cell::Cell<u64>);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(std::cell::Cell::new(seed))
    }
    pub fn next(&self) -> u64 {
        self.0.set(self.0.get().wrapping_add(0x9e37_79b9_7f4a_7c15));
        let mut z = self.0.get();
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn bytes(&self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    /// `n` bits, each set with probability `pct` %.
    pub fn bits(&self, n: usize, pct: usize) -> Vec<u8> {
        let mut b = vec![0u8; n.div_ceil(8)];
        for i in 0..n {
            if self.below(100) < pct {
                b[i / 8] |= 1 << (i % 8);
            }
        }
        b
    }
    pub fn pick<T: Clone>(&self, v: &[T]) -> T {
        v[self.below(v.len())].clone()
    }
}

/// Every type the tests draw from.
pub fn types() -> Vec<DataType> {
    use DataType::*;
    vec![
        Int8,
        UInt8,
        Int16,
        UInt16,
        Int32,
        UInt32,
        Int64,
        UInt64,
        Float16,
        Float32,
        Float64,
        Boolean,
        Date32,
        Date64,
        Time32(TimeUnit::Second),
        Time64(TimeUnit::Nanosecond),
        Timestamp(TimeUnit::Millisecond, Some("+01:00".into())),
        Timestamp(TimeUnit::Nanosecond, None),
        Duration(TimeUnit::Microsecond),
        Interval(IntervalUnit::YearMonth),
        Interval(IntervalUnit::DayTime),
        Interval(IntervalUnit::MonthDayNano),
        Decimal32(7, 2),
        Decimal64(15, 3),
        Decimal128(20, 3),
        Decimal256(40, 5),
        FixedSizeBinary(3),
        FixedSizeBinary(32),
        FixedSizeBinary(0),
        Utf8,
        Binary,
    ]
}

/// Bytes per value of a fixed-width type.
pub fn width(dt: &DataType) -> Option<usize> {
    if let DataType::FixedSizeBinary(w) = dt {
        return Some(*w as usize);
    }
    dt.primitive_width()
}

/// `len` values at a random offset 0..63 of a larger array, each null with probability
/// `null_pct` %.
pub fn array(r: &Rng, dt: &DataType, len: usize, null_pct: usize) -> ArrayRef {
    let off = r.below(64);
    let total = off + len + r.below(3);
    let valid = r.bits(total, 100 - null_pct);
    let is_valid = |i: usize| (valid[i / 8] >> (i % 8)) & 1 == 1;
    let a: ArrayRef = match dt {
        DataType::Utf8 => {
            let words = ["", "a", "bc", "def", "a longer string, past twelve bytes"];
            Arc::new(StringArray::from_iter(
                (0..total).map(|i| is_valid(i).then(|| words[r.below(words.len())])),
            ))
        }
        DataType::Binary => Arc::new(BinaryArray::from_iter(
            (0..total).map(|i| is_valid(i).then(|| r.bytes(r.below(5)))),
        )),
        DataType::Boolean => {
            let d = ArrayData::builder(dt.clone())
                .len(total)
                .add_buffer(buf(r.bytes(total.div_ceil(8))))
                .null_bit_buffer(Some(buf(valid)))
                .build()
                .expect("boolean array");
            make_array(d)
        }
        _ => {
            let w = width(dt).expect("fixed width");
            let d = ArrayData::builder(dt.clone())
                .len(total)
                .add_buffer(buf(r.bytes(total * w)))
                .null_bit_buffer(Some(buf(valid)))
                .build()
                .expect("fixed-width array");
            make_array(d)
        }
    };
    a.slice(off, len)
}

/// A mask of `len` rows at a random offset, true with probability `pct` %, null with
/// probability `null_pct` %.
pub fn mask(r: &Rng, len: usize, pct: usize, null_pct: usize) -> BooleanArray {
    let off = r.below(64);
    let total = off + len + r.below(3);
    let values = r.bits(total, pct);
    let nulls = (null_pct > 0 || r.below(2) == 0).then(|| buf(r.bits(total, 100 - null_pct)));
    let d = ArrayData::builder(DataType::Boolean)
        .len(total)
        .add_buffer(buf(values))
        .null_bit_buffer(nulls)
        .build()
        .expect("mask");
    BooleanArray::from(d).slice(off, len)
}

/// An input: an array of the rows' length or a scalar.
pub enum Input {
    Array(ArrayRef),
    Scalar(Scalar<ArrayRef>),
}

impl Input {
    pub fn datum(&self) -> &dyn Datum {
        match self {
            Input::Array(a) => a,
            Input::Scalar(s) => s,
        }
    }
    /// Where row `i` of this input is in [`Input::source`].
    pub fn row(&self, i: usize) -> usize {
        match self {
            Input::Array(_) => i,
            Input::Scalar(_) => 0,
        }
    }
    pub fn source(&self) -> ArrayRef {
        match self {
            Input::Array(a) => a.clone(),
            Input::Scalar(s) => make_array(s.get().0.to_data()),
        }
    }
    pub fn is_scalar(&self) -> bool {
        matches!(self, Input::Scalar(_))
    }
}

/// An array (three times in four) or a scalar (null one time in three).
pub fn input(r: &Rng, dt: &DataType, len: usize, null_pct: usize) -> Input {
    if r.below(4) != 0 {
        return Input::Array(array(r, dt, len, null_pct));
    }
    let s = match r.below(3) {
        0 => new_null_array(dt, 1),
        1 => array(r, dt, 1, 0),
        _ => array(r, dt, 1, 50),
    };
    Input::Scalar(Scalar::new(s))
}

/// The array whose row `i` is row `picks[i].1` of `sources[picks[i].0]`, or null where
/// `picks[i]` is `None`.
pub fn rows(dt: &DataType, sources: &[ArrayRef], picks: &[Option<(usize, usize)>]) -> ArrayRef {
    let null = new_null_array(dt, 1);
    let mut all: Vec<&dyn Array> = sources.iter().map(|a| a.as_ref()).collect();
    all.push(null.as_ref());
    let idx: Vec<(usize, usize)> = picks
        .iter()
        .map(|p| p.unwrap_or((sources.len(), 0)))
        .collect();
    arrow_select::interleave::interleave(&all, &idx).expect("interleave")
}

/// Whether a mask's row is valid and true.
pub fn true_at(m: &BooleanArray, i: usize) -> bool {
    m.is_valid(i) && m.value(i)
}

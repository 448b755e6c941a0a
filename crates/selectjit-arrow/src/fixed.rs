//! The selects: argument checks in arrow-rs's order, fixed-width types on selectjit's kernels,
//! booleans on words of bits, everything else on arrow-rs's `zip`.

use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};

use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, Datum, PrimitiveArray, downcast_primitive,
    make_array, new_null_array,
};
use arrow_buffer::{BooleanBuffer, Buffer, MutableBuffer, NullBuffer, ScalarBuffer, ToByteSlice};
use arrow_data::ArrayData;
use arrow_schema::{ArrowError, DataType, IntervalUnit};
use selectjit::bits::{
    Bitmap, Bits, Column, NullRule, Validity, case_when_validity, select_bits, select_validity,
};
use selectjit::{
    Broadcast, Choice, Cond, DType, Engine, EngineConfig, OutputPool, TensorMut, TensorRef,
};

use crate::{When, compute, invalid};

/// [`crate::shared_engine`] with its error as arrow's.
pub(crate) fn engine() -> Result<&'static Engine, ArrowError> {
    shared_engine().map_err(|e| compute(e.clone()))
}

/// See [`crate::shared_engine`].
pub(crate) fn shared_engine() -> Result<&'static Engine, &'static selectjit::Error> {
    static E: OnceLock<Result<Engine, selectjit::Error>> = OnceLock::new();
    E.get_or_init(|| EngineConfig::from_env().and_then(Engine::with_config))
        .as_ref()
}

/// How a data type's values are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Bit-packed (Arrow's booleans).
    Bool,
    /// `w` bytes per value in one buffer.
    Fixed(usize),
    /// Variable-width or nested: arrow-rs's `zip`.
    Other,
}

pub(crate) fn layout(dt: &DataType) -> Layout {
    use DataType::*;
    match dt {
        Boolean => Layout::Bool,
        Int8 | UInt8 => Layout::Fixed(1),
        Int16 | UInt16 | Float16 => Layout::Fixed(2),
        Int32 | UInt32 | Float32 | Date32 | Time32(_) | Decimal32(_, _) => Layout::Fixed(4),
        Interval(IntervalUnit::YearMonth) => Layout::Fixed(4),
        Int64
        | UInt64
        | Float64
        | Date64
        | Time64(_)
        | Timestamp(_, _)
        | Duration(_)
        | Decimal64(_, _) => Layout::Fixed(8),
        Interval(IntervalUnit::DayTime) => Layout::Fixed(8),
        Decimal128(_, _) | Interval(IntervalUnit::MonthDayNano) => Layout::Fixed(16),
        Decimal256(_, _) => Layout::Fixed(32),
        FixedSizeBinary(w) if *w >= 0 => Layout::Fixed(*w as usize),
        _ => Layout::Other,
    }
}

/// The selectjit dtype a value of `w` bytes is moved as (only the width matters), and how many
/// of them make one value.
fn move_dtype(w: usize) -> (DType, usize) {
    for (dt, dw) in [
        (DType::Complex128, 16),
        (DType::U64, 8),
        (DType::U32, 4),
        (DType::U16, 2),
    ] {
        if w.is_multiple_of(dw) {
            return (dt, w / dw);
        }
    }
    (DType::U8, w)
}

fn broken(what: &str) -> ArrowError {
    ArrowError::InvalidArgumentError(format!("{what}: its buffers are shorter than its length"))
}

/// The bytes of the `d.len()` values of a fixed-width array from its offset on.
pub(crate) fn fixed_bytes(d: &ArrayData, w: usize) -> Result<&[u8], ArrowError> {
    let buf = d.buffers().first().ok_or_else(|| broken("array"))?;
    let start = d.offset().checked_mul(w).ok_or_else(|| broken("array"))?;
    let end = d
        .len()
        .checked_mul(w)
        .and_then(|n| n.checked_add(start))
        .ok_or_else(|| broken("array"))?;
    buf.as_slice()
        .get(start..end)
        .ok_or_else(|| broken("array"))
}

/// The bits of a boolean array's `d.len()` values.
fn bool_bits(d: &ArrayData) -> Result<Bitmap<'_>, ArrowError> {
    let buf = d.buffers().first().ok_or_else(|| broken("array"))?;
    Bitmap::new(buf.as_slice(), d.offset(), d.len()).map_err(|_| broken("array"))
}

fn bitmap(b: &BooleanBuffer) -> Result<Bitmap<'_>, ArrowError> {
    Bitmap::new(b.values(), b.offset(), b.len()).map_err(|_| broken("bitmap"))
}

/// One input (a side of a select, a value of a case, the default) with its data held.
pub(crate) struct Input {
    data: ArrayData,
    scalar: bool,
}

impl Input {
    fn new(d: &dyn Datum) -> Input {
        let (a, scalar) = d.get();
        Input {
            data: a.to_data(),
            scalar,
        }
    }

    fn null_scalar(&self) -> bool {
        self.scalar && self.data.is_null(0)
    }

    fn validity(&self) -> Result<Validity<'_>, ArrowError> {
        Ok(if self.scalar {
            if self.null_scalar() {
                Validity::AllNull
            } else {
                Validity::AllValid
            }
        } else {
            match self.data.nulls() {
                Some(n) if n.null_count() > 0 => Validity::Bits(bitmap(n.inner())?),
                _ => Validity::AllValid,
            }
        })
    }

    /// Its values and validity as a side of `Engine::select_with_validity`.
    fn column(&self, w: usize) -> Result<Column<'_>, ArrowError> {
        let b = self.bytes(w)?;
        Ok(if self.scalar {
            Column::Scalar(b, !self.null_scalar())
        } else {
            Column::Rows(b, self.validity()?)
        })
    }

    /// The bytes of its values (one value for a scalar).
    fn bytes(&self, w: usize) -> Result<&[u8], ArrowError> {
        fixed_bytes(&self.data, w)
    }

    fn bits(&self) -> Result<Bits<'_>, ArrowError> {
        let b = bool_bits(&self.data)?;
        Ok(if self.scalar {
            Bits::Splat(!self.null_scalar() && b.get(0) == Some(true))
        } else {
            Bits::Map(b)
        })
    }

    /// Its values and validity over `len` rows as an output: an array's own buffers, shared,
    /// or a scalar repeated.
    fn taken_whole(
        &self,
        layout: Layout,
        len: usize,
    ) -> Result<(Buffer, Option<NullBuffer>), ArrowError> {
        let values = match layout {
            Layout::Fixed(w) => {
                let b = self.bytes(w)?;
                if self.scalar {
                    fill(b, len)
                } else {
                    // The array's own values, shared (Arrow's buffers are immutable, as
                    // arrow-rs's `nullif` and its `filter` of every row share theirs): no copy.
                    // `bytes` checked that they lie inside the buffer.
                    let start = self.data.offset() * w;
                    self.data.buffers()[0].slice_with_length(start, b.len())
                }
            }
            Layout::Bool => match self.bits()? {
                Bits::Splat(true) => BooleanBuffer::new_set(len).into_inner(),
                Bits::Splat(false) => BooleanBuffer::new_unset(len).into_inner(),
                Bits::Map(b) => {
                    // A fresh buffer at bit offset 0: the bits select themselves.
                    let mut m = MutableBuffer::from_len_zeroed(len.div_ceil(8));
                    select_bits(
                        b,
                        Validity::AllValid,
                        Bits::Splat(true),
                        Bits::Splat(false),
                        m.as_slice_mut(),
                    )
                    .map_err(compute)?;
                    m.into()
                }
            },
            Layout::Other => return Err(invalid("no copy of a variable-width array")),
        };
        let nulls = if self.scalar {
            self.null_scalar().then(|| NullBuffer::new_null(len))
        } else {
            self.data.nulls().filter(|n| n.null_count() > 0).cloned()
        };
        Ok((values, nulls))
    }
}

/// An input's values as a tensor of `shape` (`[len]`, or `[len, k]` with `kshape = [k]` when
/// a value is `k` elements of the dtype it is moved as); a scalar broadcast.
fn view<'a>(
    i: &'a Input,
    w: usize,
    shape: &'a [usize],
    kshape: &'a [usize],
) -> Result<TensorRef<'a, u8>, ArrowError> {
    let b = i.bytes(w)?;
    Ok(match (i.scalar, shape.len()) {
        (false, _) => TensorRef::new(b, shape),
        (true, 1) => TensorRef::scalar(b),
        (true, _) => TensorRef::new(b, kshape),
    })
}

fn output(
    dt: &DataType,
    len: usize,
    values: Buffer,
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef, ArrowError> {
    let builder = ArrayData::builder(dt.clone())
        .len(len)
        .add_buffer(values)
        .nulls(nulls);
    // The checks `build` makes, but the recount of the null bitmap (a pass over it: a tenth of
    // a call that fills 8192 rows): debug builds make them all.
    #[cfg(debug_assertions)]
    let data = builder.build()?;
    #[cfg(not(debug_assertions))]
    let data = {
        // SAFETY: the array's one buffer holds `len` values of `dt`'s width (every caller
        // builds `values` as `len * w` bytes, or `len` bits for booleans, 64-byte aligned or
        // a `Vec` of the value's type), and `nulls`, when given, is `len` bits whose null
        // count was counted as they were written or by `NullBuffer::new`: what `build`
        // would check, recounting the nulls (which debug builds do).
        let data = unsafe { builder.build_unchecked() };
        data.validate()?;
        data
    };
    Ok(make_array(data))
}

/// An output buffer being written: pages from the engine's [`OutputPool`] for outputs of at
/// least [`OutputPool::MIN_POOLED_BYTES`] (the pages of the last call's output, already mapped,
/// instead of fresh ones the kernel must fault in and zero), an arrow `MutableBuffer`
/// otherwise. Both are 64-byte aligned (Arrow's recommendation).
pub(crate) enum OutBuf {
    Arrow(MutableBuffer),
    Pooled(PoolBlock),
}

/// A block of the engine's output pool, given back to it when dropped (when the last arrow
/// `Buffer` sharing it is dropped).
pub(crate) struct PoolBlock {
    ptr: NonNull<u8>,
    len: usize,
    pool: Arc<OutputPool>,
}

// SAFETY: the block is plain bytes owned by this handle alone (nothing else frees or writes
// it), and the pool it returns to is `Sync`: moving or sharing it is as for a `Vec<u8>`.
unsafe impl Send for PoolBlock {}
// SAFETY: as above: `&PoolBlock` gives no access to the bytes (arrow reads them through the
// `Buffer` it owns).
unsafe impl Sync for PoolBlock {}

impl Drop for PoolBlock {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `self.pool.alloc(self.len)` (in `output_buffer`), is freed
        // only here, once, and nothing uses it afterwards: the last arrow `Buffer` over it is
        // being dropped (it owns this handle).
        unsafe { self.pool.free(self.ptr, self.len) };
    }
}

impl OutBuf {
    pub(crate) fn as_slice_mut(&mut self) -> &mut [u8] {
        match self {
            OutBuf::Arrow(m) => m.as_slice_mut(),
            // SAFETY: `ptr` is a live block of `len` bytes owned by this handle (`&mut self`
            // makes the borrow exclusive). The bytes may be uninitialised: as for
            // `output_buffer`'s `MutableBuffer`, every caller writes all `len` bytes before
            // anything reads them.
            OutBuf::Pooled(b) => unsafe { std::slice::from_raw_parts_mut(b.ptr.as_ptr(), b.len) },
        }
    }

    fn into_buffer(self) -> Buffer {
        match self {
            OutBuf::Arrow(m) => m.into(),
            OutBuf::Pooled(b) => {
                let (ptr, len) = (b.ptr, b.len);
                // SAFETY: `ptr` points to `len` bytes, all written (see `as_slice_mut`), that
                // stay allocated and unwritten as long as the owner `b` lives: the `Buffer`
                // holds it and drops it (returning the block to the pool) with its last clone.
                unsafe { Buffer::from_custom_allocation(ptr, len, Arc::new(b)) }
            }
        }
    }
}

/// A buffer of `n` bytes for a select to fill, 64-byte aligned, not zeroed first (on 1M-row
/// columns zeroing was an extra pass over the output, 11 % of the call). Below
/// [`OutputPool::MIN_POOLED_BYTES`] an arrow `MutableBuffer`: a `malloc`ed `Vec` used from its
/// first 64-byte boundary was faster in a loop of small calls, but took a CASE projection over
/// 4M rows in 8192-row batches, whose outputs stay alive, from 9.1 to 21.5 ms.
fn output_buffer(n: usize) -> OutBuf {
    if n >= OutputPool::MIN_POOLED_BYTES
        && let Ok(engine) = engine()
        && let Some(pool) = engine.output_pool()
        && let Some(ptr) = pool.alloc(n)
    {
        return OutBuf::Pooled(PoolBlock {
            ptr,
            len: n,
            pool: pool.clone(),
        });
    }
    let mut m = MutableBuffer::with_capacity(n);
    // SAFETY: `with_capacity(n)` reserved the `n` bytes; a `u8` has no invalid value, and
    // every caller writes all `n` bytes before anything reads them: it hands the whole buffer
    // to a select whose output shape covers them (`len * w` for shape `[len]` of width `w`, or
    // `[len, k]` of width `w / k`; the engine checks the buffer's length against the shape)
    // or `fill`s every element. On an error the buffer is dropped unread.
    unsafe { m.set_len(n) };
    OutBuf::Arrow(m)
}

/// `len` copies of the value `v` (one value's bytes) in a new buffer.
fn fill(v: &[u8], len: usize) -> Buffer {
    macro_rules! typed {
        ($t:ty) => {{
            let x = <$t>::from_le_bytes(v.try_into().expect("the value's width"));
            let n = len * v.len();
            let mut m = output_buffer(n);
            // SAFETY: every bit pattern is a valid `$t` (an integer); the buffer is 64-byte
            // aligned and `len * size_of::<$t>()` bytes long, so the middle part is all of it
            // (asserted: nothing is left unwritten).
            let (pre, mid, post) = unsafe { m.as_slice_mut().align_to_mut::<$t>() };
            assert!(pre.is_empty() && post.is_empty(), "an aligned output");
            fill_fast(mid, x);
            m.into_buffer()
        }};
    }
    match v.len() {
        1 => typed!(u8),
        2 => typed!(u16),
        4 => typed!(u32),
        8 => typed!(u64),
        16 => typed!(u128),
        w => {
            let mut m = MutableBuffer::with_capacity(len * w);
            m.repeat_slice_n_times(v, len);
            m.into()
        }
    }
}

/// `dst.fill(x)`, with 32-byte stores where the host has AVX2 (the baseline target stores 16
/// bytes at a time: a fill of 64 KiB, two scalars one of them null at 8192 f64 rows, took
/// about half of the call).
fn fill_fast<T: Copy>(dst: &mut [T], x: T) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the host has AVX2 (checked just above).
        unsafe { fill_avx2(dst, x) };
        return;
    }
    dst.fill(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn fill_avx2<T: Copy>(dst: &mut [T], x: T) {
    dst.fill(x)
}

/// A zeroed buffer for the validity of `len` rows: a `Vec` (`calloc`; a bitmap needs no
/// alignment, and `MutableBuffer`'s 64-byte aligned allocation cost more than its pass).
fn validity_buffer(len: usize) -> Vec<u8> {
    vec![0; len.div_ceil(8)]
}

/// A validity bitmap just written, `None` when it has no null.
fn nulls_of(buf: Vec<u8>, len: usize, null_count: usize) -> Option<NullBuffer> {
    (null_count > 0).then(|| {
        let bits = BooleanBuffer::new(Buffer::from_vec(buf), 0, len);
        // SAFETY: `null_count` is the number of 0 bits among the `len` bits of `buf`, as
        // `select_validity` and `case_when_validity` (which wrote them) return it; the
        // bitmap is not counted a second time.
        unsafe { NullBuffer::new_unchecked(bits, null_count) }
    })
}

/// Whether every row of `mask` is true and valid, and whether none is: the words are read
/// until one row of each kind is seen (on a mixed mask, the first word), not counted.
fn all_or_none(mask: &BooleanArray, nulls: Option<&NullBuffer>) -> (bool, bool) {
    let v = mask.values();
    let vc = v.inner().bit_chunks(v.offset(), v.len());
    let nc = nulls.map(|n| n.inner().inner().bit_chunks(n.offset(), n.len()));
    let (mut any_true, mut any_false) = (false, false);
    let mut see = |w: u64, bits: usize| {
        let all = if bits == 64 { !0 } else { (1u64 << bits) - 1 };
        any_true |= w & all != 0;
        any_false |= w & all != all;
        any_true && any_false
    };
    match &nc {
        None => {
            for w in vc.iter() {
                if see(w, 64) {
                    return (false, false);
                }
            }
        }
        Some(nc) => {
            for (w, n) in vc.iter().zip(nc.iter()) {
                if see(w & n, 64) {
                    return (false, false);
                }
            }
        }
    }
    let rest = vc.remainder_bits() & nc.as_ref().map_or(!0, |n| n.remainder_bits());
    if vc.remainder_len() > 0 {
        see(rest, vc.remainder_len());
    }
    (!any_false, !any_true)
}

/// arrow-rs `zip`'s checks, in its order and with its messages.
fn check2(mask_len: usize, t: &dyn Datum, f: &dyn Datum) -> Result<(), ArrowError> {
    let (ta, ts) = t.get();
    let (fa, fs) = f.get();
    if ta.data_type() != fa.data_type() {
        return Err(invalid("arguments need to have the same data type"));
    }
    check_len(ta, ts, mask_len)?;
    check_len(fa, fs, mask_len)
}

/// arrow-rs `zip`'s length check of one argument: a scalar of one element, an array of `len`.
pub(crate) fn check_len(a: &dyn Array, scalar: bool, len: usize) -> Result<(), ArrowError> {
    if scalar && a.len() != 1 {
        return Err(invalid("scalar arrays must have 1 element"));
    }
    if !scalar && a.len() != len {
        return Err(invalid("all arrays should have the same length"));
    }
    Ok(())
}

/// `mask ? t : f` under `rule`.
pub(crate) fn select2(
    mask: &BooleanArray,
    t: &dyn Datum,
    f: &dyn Datum,
    rule: NullRule,
) -> Result<ArrayRef, ArrowError> {
    check2(mask.len(), t, f)?;
    let dt = t.get().0.data_type().clone();
    let lay = layout(&dt);
    if lay == Layout::Other {
        return fallback2(mask, t, f, rule);
    }
    let len = mask.len();
    let mask_nulls = mask.nulls().filter(|n| n.null_count() > 0);
    // Two scalars, one of them null: the other's values everywhere, the validity a word
    // operation on the mask.
    let ((ta, t_scalar), (fa, f_scalar)) = (t.get(), f.get());
    if t_scalar && f_scalar && (ta.is_null(0) || fa.is_null(0)) {
        return scalars_with_a_null(mask, &dt, lay, t, f, rule);
    }
    let (ti, fi) = (Input::new(t), Input::new(f));
    // Every row true, or every row false (and none null when nulls propagate): one side taken
    // whole.
    let (all, none) = all_or_none(mask, mask_nulls);
    if all || (none && (rule == NullRule::NullIsFalse || mask_nulls.is_none())) {
        let (values, nulls) = if all {
            ti.taken_whole(lay, len)?
        } else {
            fi.taken_whole(lay, len)?
        };
        return output(&dt, len, values, nulls);
    }
    let cond = bitmap(mask.values())?;
    let cond_valid = match mask_nulls {
        Some(n) => Validity::Bits(bitmap(n.inner())?),
        None => Validity::AllValid,
    };
    let (tv, fv) = (ti.validity()?, fi.validity()?);
    let all_valid = |v: &Validity<'_>| matches!(v, Validity::AllValid);
    let with_nulls = !(all_valid(&tv)
        && all_valid(&fv)
        && (rule == NullRule::NullIsFalse || mask_nulls.is_none()));
    // Values of 1, 2, 4 or 8 bytes with a validity to compute: both in one pass over the
    // bits where the engine's kernels read them (a validity pass after the select read the
    // condition's bits and the sides' validity a second time, from memory at 1M rows: 40-55
    // us of a 290-370 us call).
    if with_nulls
        && let Layout::Fixed(w @ (1 | 2 | 4 | 8)) = lay
        && !ti.null_scalar()
        && !fi.null_scalar()
    {
        let (tc, fc) = (ti.column(w)?, fi.column(w)?);
        let mut out = output_buffer(len * w);
        let mut vb = validity_buffer(len);
        if let Some(nulls) = engine()?
            .select_with_validity(
                move_dtype(w).0,
                cond,
                cond_valid,
                tc,
                fc,
                rule,
                out.as_slice_mut(),
                &mut vb,
            )
            .map_err(compute)?
        {
            return output(&dt, len, out.into_buffer(), nulls_of(vb, len, nulls));
        }
    }
    let values = match lay {
        Layout::Bool => {
            let mut out = MutableBuffer::from_len_zeroed(len.div_ceil(8));
            select_bits(cond, cond_valid, ti.bits()?, fi.bits()?, out.as_slice_mut())
                .map_err(compute)?;
            out.into()
        }
        // A null scalar's values are never seen: the other side's values everywhere.
        Layout::Fixed(_) if ti.null_scalar() || fi.null_scalar() => {
            let other = if ti.null_scalar() { &fi } else { &ti };
            other.taken_whole(lay, len)?.0
        }
        Layout::Fixed(w) => {
            let mut out = output_buffer(len * w);
            if w > 0 {
                let (dtype, k) = move_dtype(w);
                let (shape, cshape, kshape) = ([len, k], [len, 1], [k]);
                let (shape, cshape): (&[usize], &[usize]) = if k == 1 {
                    (&shape[..1], &cshape[..1])
                } else {
                    (&shape, &cshape)
                };
                let view = |i| view(i, w, shape, &kshape);
                let c = match cond_valid {
                    Validity::Bits(v) => Cond::bitmap_with_validity(cond, v, cshape),
                    _ => Cond::bitmap(cond, cshape),
                };
                engine()?
                    .select_bytes(
                        dtype,
                        c,
                        view(&ti)?,
                        view(&fi)?,
                        TensorMut::new(out.as_slice_mut(), shape),
                        Broadcast::Numpy,
                    )
                    .map_err(compute)?;
            }
            out.into_buffer()
        }
        Layout::Other => unreachable!("handled above"),
    };
    let nulls = if !with_nulls {
        None
    } else {
        let mut vb = validity_buffer(len);
        let n = select_validity(cond, cond_valid, tv, fv, rule, &mut vb).map_err(compute)?;
        nulls_of(vb, len, n)
    };
    output(&dt, len, values, nulls)
}

/// `mask ? t : f` of two scalars, at least one null: the valid one's value everywhere (or
/// nulls), its rows' validity a word operation on the mask, as arrow-rs's scalar zipper does;
/// primitive types built as typed arrays (no `ArrayData` of the inputs, no recount).
fn scalars_with_a_null(
    mask: &BooleanArray,
    dt: &DataType,
    lay: Layout,
    t: &dyn Datum,
    f: &dyn Datum,
    rule: NullRule,
) -> Result<ArrayRef, ArrowError> {
    let len = mask.len();
    let (ta, fa) = (t.get().0, f.get().0);
    let t_null = ta.is_null(0);
    if t_null && fa.is_null(0) {
        return Ok(new_null_array(dt, len));
    }
    let valid_side = if t_null { fa } else { ta };
    let mask_nulls = mask.nulls().filter(|n| n.null_count() > 0);
    let nulls = if mask_nulls.is_none() {
        // The rows that take the valid side are the mask's set bits (its bitmap itself,
        // shared, not copied) or its unset bits (its complement, one word pass).
        let valid = if t_null {
            !mask.values()
        } else {
            mask.values().clone()
        };
        let nulls = len - bitmap(&valid)?.count_ones();
        // SAFETY: `nulls` is the number of unset bits of the bitmap, just counted.
        (nulls > 0).then(|| unsafe { NullBuffer::new_unchecked(valid, nulls) })
    } else {
        // Otherwise as for any select (a null scalar is a side whose every slot is null): one
        // pass over the mask's words, counted as it is written.
        let validity = |a: &dyn Array| {
            if a.is_null(0) {
                Validity::AllNull
            } else {
                Validity::AllValid
            }
        };
        let cond_valid = match mask_nulls {
            Some(n) => Validity::Bits(bitmap(n.inner())?),
            None => Validity::AllValid,
        };
        let mut vb = validity_buffer(len);
        let n = select_validity(
            bitmap(mask.values())?,
            cond_valid,
            validity(ta),
            validity(fa),
            rule,
            &mut vb,
        )
        .map_err(compute)?;
        nulls_of(vb, len, n)
    };
    macro_rules! primitive {
        ($t:ty, $a:ident, $len:ident, $nulls:ident) => {
            primitive_fill::<$t>($a, $len, $nulls)
        };
    }
    downcast_primitive! {
        dt => (primitive, valid_side, len, nulls),
        _ => {
            let (values, _) = Input::new(if t_null { f } else { t }).taken_whole(lay, len)?;
            output(dt, len, values, nulls)
        }
    }
}

/// `len` copies of the scalar `a`'s value with validity `nulls`, as a `PrimitiveArray` of
/// `a`'s type.
fn primitive_fill<T: ArrowPrimitiveType>(
    a: &dyn Array,
    len: usize,
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef, ArrowError> {
    let a = a.as_primitive::<T>();
    let values = ScalarBuffer::new(fill(a.value(0).to_byte_slice(), len), 0, len);
    let out = PrimitiveArray::<T>::try_new(values, nulls)?.with_data_type(a.data_type().clone());
    Ok(Arc::new(out))
}

/// Variable-width and nested types: arrow-rs's `zip`, and under Arrow C++'s rule the mask's
/// nulls added to the output's.
fn fallback2(
    mask: &BooleanArray,
    t: &dyn Datum,
    f: &dyn Datum,
    rule: NullRule,
) -> Result<ArrayRef, ArrowError> {
    let out = arrow_select::zip::zip(mask, t, f)?;
    if rule == NullRule::NullIsFalse || mask.null_count() == 0 || out.data_type() == &DataType::Null
    {
        return Ok(out);
    }
    with_nulls(out, mask.nulls())
}

/// `a` with its nulls and `extra`'s.
fn with_nulls(a: ArrayRef, extra: Option<&NullBuffer>) -> Result<ArrayRef, ArrowError> {
    let nulls = NullBuffer::union(a.nulls(), extra);
    let data = a.to_data().into_builder().nulls(nulls).build()?;
    Ok(make_array(data))
}

/// `CASE WHEN`: see [`crate::case_when`].
pub(crate) fn case_when(
    conds: &[When<'_>],
    values: &[&dyn Datum],
    default: Option<&dyn Datum>,
) -> Result<ArrayRef, ArrowError> {
    if conds.len() != values.len() {
        return Err(ArrowError::InvalidArgumentError(format!(
            "case_when: {} conditions and {} values",
            conds.len(),
            values.len()
        )));
    }
    let all: Vec<&dyn Datum> = values.iter().copied().chain(default).collect();
    let dt = match all.first() {
        Some(d) => d.get().0.data_type().clone(),
        None => return Err(invalid("case_when: no value and no default")),
    };
    if all.iter().any(|d| d.get().0.data_type() != &dt) {
        return Err(invalid("arguments need to have the same data type"));
    }
    // The length: the first array's.
    let cond_len = |c: &When<'_>| match c {
        When::Mask(m) => Some(m.len()),
        When::Cmp(_, l, r) => [l, r].iter().find(|d| !d.get().1).map(|d| d.get().0.len()),
    };
    let len = conds
        .iter()
        .find_map(cond_len)
        .or_else(|| all.iter().find(|d| !d.get().1).map(|d| d.get().0.len()))
        .unwrap_or(1);
    for d in &all {
        let (a, s) = d.get();
        check_len(a, s, len)?;
    }
    if conds
        .iter()
        .any(|c| matches!(c, When::Mask(m) if m.len() != len))
    {
        return Err(invalid("all arrays should have the same length"));
    }
    let lay = layout(&dt);
    let inputs: Vec<Input> = values.iter().map(|v| Input::new(*v)).collect();
    let def = default.map(Input::new);
    // Without a null among the values and the default the output's validity needs no
    // condition's bits: a comparison the kernels make (integers, no null operand) is then the
    // n-way select's condition as it is, compared row by row in the select.
    let no_nulls = inputs
        .iter()
        .chain(&def)
        .map(Input::validity)
        .try_fold(def.is_some(), |a, v| {
            v.map(|v| a && matches!(v, Validity::AllValid))
        })?;
    let direct_ok = no_nulls && len > 0 && matches!(lay, Layout::Fixed(w) if w > 0);
    let preds: Vec<Pred> = conds
        .iter()
        .map(|c| match c {
            When::Mask(m) => Ok(Pred::Mask((*m).clone())),
            When::Cmp(op, l, r) => {
                if direct_ok && let Some(d) = crate::cmp::Direct::of(*op, *l, *r, len)? {
                    return Ok(Pred::Direct(Box::new(d)));
                }
                crate::cmp::predicate(*op, *l, *r, len).map(Pred::Mask)
            }
        })
        .collect::<Result<_, ArrowError>>()?;
    if lay == Layout::Other {
        let masks: Vec<BooleanArray> = preds.iter().map(Pred::mask).collect::<Result<_, _>>()?;
        return zip_chain(&masks, values, default, &dt, len);
    }
    // A condition: its bits and validity (none for a direct comparison).
    let bits: Vec<Option<(Bitmap<'_>, Validity<'_>)>> = preds
        .iter()
        .map(|p| {
            let Pred::Mask(m) = p else {
                return Ok(None);
            };
            let v = match m.nulls().filter(|n| n.null_count() > 0) {
                Some(n) => Validity::Bits(bitmap(n.inner())?),
                None => Validity::AllValid,
            };
            Ok(Some((bitmap(m.values())?, v)))
        })
        .collect::<Result<_, ArrowError>>()?;
    // Every condition's bits (a direct comparison is only made where none are needed).
    let all_bits = || -> Result<Vec<(Bitmap<'_>, Validity<'_>)>, ArrowError> {
        bits.iter()
            .map(|b| b.ok_or_else(|| invalid("case_when: a condition without bits")))
            .collect()
    };
    if conds.is_empty() {
        return match &def {
            Some(d) => {
                let (v, n) = d.taken_whole(lay, len)?;
                output(&dt, len, v, n)
            }
            None => Ok(new_null_array(&dt, len)),
        };
    }
    let values_out: Buffer = match lay {
        Layout::Bool => {
            // From the last branch backwards: out = c_i ? v_i : out.
            let nb = len.div_ceil(8);
            let mut prev: Option<MutableBuffer> = None;
            for ((c, cv), v) in all_bits()?.iter().zip(&inputs).rev() {
                let mut next = MutableBuffer::from_len_zeroed(nb);
                let else_ = match (&prev, &def) {
                    (Some(p), _) => Bits::Map(Bitmap::new(p.as_slice(), 0, len).map_err(compute)?),
                    (None, Some(d)) => d.bits()?,
                    (None, None) => Bits::Splat(false),
                };
                select_bits(*c, *cv, v.bits()?, else_, next.as_slice_mut()).map_err(compute)?;
                prev = Some(next);
            }
            prev.unwrap_or_else(|| MutableBuffer::from_len_zeroed(nb))
                .into()
        }
        Layout::Fixed(w) => {
            let mut out = output_buffer(len * w);
            if w > 0 && len > 0 {
                let (dtype, k) = move_dtype(w);
                let (shape, cshape, kshape) = ([len, k], [len, 1], [k]);
                let (shape, cshape): (&[usize], &[usize]) = if k == 1 {
                    (&shape[..1], &cshape[..1])
                } else {
                    (&shape, &cshape)
                };
                let zeros = vec![0u8; w];
                let view = |i| view(i, w, shape, &kshape).map(Choice::Tensor);
                let cs: Vec<Cond<'_>> = bits
                    .iter()
                    .zip(&preds)
                    .map(|(b, p)| match (b, p) {
                        (Some((c, Validity::Bits(v))), _) => {
                            Ok(Cond::bitmap_with_validity(*c, *v, cshape))
                        }
                        (Some((c, _)), _) => Ok(Cond::bitmap(*c, cshape)),
                        (None, Pred::Direct(d)) => d.cond(cshape),
                        (None, Pred::Mask(_)) => Err(invalid("case_when: a mask without bits")),
                    })
                    .collect::<Result<_, _>>()?;
                let vs: Vec<Choice<'_, u8>> = inputs.iter().map(view).collect::<Result<_, _>>()?;
                let d = match &def {
                    Some(d) => view(d)?,
                    None if k == 1 => Choice::Tensor(TensorRef::scalar(&zeros)),
                    None => Choice::Tensor(TensorRef::new(&zeros, &kshape)),
                };
                engine()?
                    .select_n_bytes(
                        dtype,
                        &cs,
                        &vs,
                        d,
                        TensorMut::new(out.as_slice_mut(), shape),
                        Broadcast::Numpy,
                    )
                    .map_err(compute)?;
            }
            out.into_buffer()
        }
        Layout::Other => unreachable!("handled above"),
    };
    let vals: Vec<Validity<'_>> = inputs
        .iter()
        .map(Input::validity)
        .collect::<Result<_, _>>()?;
    let dv = match &def {
        Some(d) => d.validity()?,
        None => Validity::AllNull,
    };
    let nulls = if vals
        .iter()
        .chain([&dv])
        .all(|v| matches!(v, Validity::AllValid))
    {
        None
    } else {
        let mut vb = validity_buffer(len);
        let n = case_when_validity(len, &all_bits()?, &vals, dv, &mut vb).map_err(compute)?;
        nulls_of(vb, len, n)
    };
    output(&dt, len, values_out, nulls)
}

/// A `case_when` condition as the select takes it.
enum Pred {
    /// A boolean column (a `When::Mask`, or a comparison computed into one).
    Mask(BooleanArray),
    /// A comparison the select makes row by row (boxed: its operands' data is large).
    Direct(Box<crate::cmp::Direct>),
}

impl Pred {
    fn mask(&self) -> Result<BooleanArray, ArrowError> {
        match self {
            Pred::Mask(m) => Ok(m.clone()),
            Pred::Direct(_) => Err(invalid("case_when: a direct comparison of other values")),
        }
    }
}

/// `CASE WHEN` of variable-width or nested values: `out = zip(c_k, v_k, default)`, then
/// `zip(c_{k-1}, v_{k-1}, out)`, ... (arrow-rs's `zip` counts a null condition as false).
fn zip_chain(
    masks: &[BooleanArray],
    values: &[&dyn Datum],
    default: Option<&dyn Datum>,
    dt: &DataType,
    len: usize,
) -> Result<ArrayRef, ArrowError> {
    let mut acc: ArrayRef = match default {
        Some(d) => {
            let (a, s) = d.get();
            if s {
                arrow_select::zip::zip(&BooleanArray::from(vec![false; len]), d, d)?
            } else {
                make_array(a.to_data())
            }
        }
        None => new_null_array(dt, len),
    };
    for (m, v) in masks.iter().zip(values).rev() {
        acc = arrow_select::zip::zip(m, *v, &acc)?;
    }
    Ok(acc)
}

//! The selects: argument checks in arrow-rs's order, fixed-width types on selectjit's kernels,
//! booleans on words of bits, everything else on arrow-rs's `zip`.

use std::sync::OnceLock;

use arrow_array::{Array, ArrayRef, BooleanArray, Datum, make_array, new_null_array};
use arrow_buffer::{BooleanBuffer, Buffer, MutableBuffer, NullBuffer};
use arrow_data::ArrayData;
use arrow_schema::{ArrowError, DataType, IntervalUnit};
use selectjit::bits::{Bitmap, Bits, NullRule, Validity, case_when_validity, select_bits};
use selectjit::{Broadcast, Choice, Cond, DType, Engine, TensorMut, TensorRef};

use crate::{When, compute, invalid};

/// The engine every call shares (`Send + Sync`; its kernels compiled once).
pub(crate) fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(Engine::new)
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

    /// Its values and validity over `len` rows as an output: a copy (a scalar repeated).
    fn copy(&self, layout: Layout, len: usize) -> Result<(Buffer, Option<NullBuffer>), ArrowError> {
        let values = match layout {
            Layout::Fixed(w) => {
                let b = self.bytes(w)?;
                if self.scalar {
                    fill(b, len).into()
                } else {
                    let mut m = MutableBuffer::with_capacity(b.len());
                    m.extend_from_slice(b);
                    m.into()
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
    let data = ArrayData::builder(dt.clone())
        .len(len)
        .add_buffer(values)
        .nulls(nulls)
        .build()?;
    Ok(make_array(data))
}

/// A buffer of `n` bytes for a select to fill, 64-byte aligned, not zeroed first (on 1M-row
/// columns zeroing was an extra pass over the output, 11 % of the call).
fn output_buffer(n: usize) -> MutableBuffer {
    let mut m = MutableBuffer::with_capacity(n);
    // SAFETY: `with_capacity(n)` reserved the `n` bytes; a `u8` has no invalid value, and
    // every caller writes all `n` bytes before anything reads them: it hands the whole buffer
    // to a select whose output shape covers them (`len * w` for shape `[len]` of width `w`, or
    // `[len, k]` of width `w / k`; the engine checks the buffer's length against the shape),
    // or `fill`s every element. On an error the buffer is dropped unread.
    unsafe { m.set_len(n) };
    m
}

/// `len` copies of the value `v` (one value's bytes) in a new buffer.
fn fill(v: &[u8], len: usize) -> MutableBuffer {
    macro_rules! typed {
        ($t:ty) => {{
            let x = <$t>::from_le_bytes(v.try_into().expect("the value's width"));
            let mut m = output_buffer(len * v.len());
            m.typed_data_mut::<$t>().fill(x);
            m
        }};
    }
    match v.len() {
        1 => typed!(u8),
        2 => typed!(u16),
        4 => typed!(u32),
        8 => typed!(u64),
        16 => typed!(i128),
        w => {
            let mut m = MutableBuffer::with_capacity(len * w);
            m.repeat_slice_n_times(v, len);
            m
        }
    }
}

/// A validity bitmap just written, `None` when it has no null.
fn nulls_of(buf: MutableBuffer, len: usize, null_count: usize) -> Option<NullBuffer> {
    (null_count > 0).then(|| NullBuffer::new(BooleanBuffer::new(buf.into(), 0, len)))
}

/// arrow-rs `zip`'s checks, in its order and with its messages.
fn check2(mask_len: usize, t: &dyn Datum, f: &dyn Datum) -> Result<(), ArrowError> {
    let (ta, ts) = t.get();
    let (fa, fs) = f.get();
    if ta.data_type() != fa.data_type() {
        return Err(invalid("arguments need to have the same data type"));
    }
    for (a, s) in [(ta, ts), (fa, fs)] {
        if s && a.len() != 1 {
            return Err(invalid("scalar arrays must have 1 element"));
        }
        if !s && a.len() != mask_len {
            return Err(invalid("all arrays should have the same length"));
        }
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
    let (ti, fi) = (Input::new(t), Input::new(f));
    // Two scalars, one of them null: the other's values everywhere, the validity a word
    // operation on the mask (as arrow-rs's scalar zipper does).
    if ti.scalar && fi.scalar && (ti.null_scalar() || fi.null_scalar()) {
        return scalars_with_a_null(mask, &dt, lay, &ti, &fi, rule);
    }
    // Every row true, or every row false (and none null when nulls propagate): a copy.
    let ones = mask.true_count();
    if ones == len || (ones == 0 && (rule == NullRule::NullIsFalse || mask_nulls.is_none())) {
        let (values, nulls) = if ones == len {
            ti.copy(lay, len)?
        } else {
            fi.copy(lay, len)?
        };
        return output(&dt, len, values, nulls);
    }
    let cond = bitmap(mask.values())?;
    let cond_valid = match mask_nulls {
        Some(n) => Validity::Bits(bitmap(n.inner())?),
        None => Validity::AllValid,
    };
    let (tv, fv) = (ti.validity()?, fi.validity()?);
    let values = match lay {
        Layout::Bool => {
            let mut out = MutableBuffer::from_len_zeroed(len.div_ceil(8));
            select_bits(cond, cond_valid, ti.bits()?, fi.bits()?, out.as_slice_mut())
                .map_err(compute)?;
            out
        }
        // A null scalar's values are never seen: the other side's values everywhere.
        Layout::Fixed(_) if ti.null_scalar() || fi.null_scalar() => {
            let other = if ti.null_scalar() { &fi } else { &ti };
            other.copy(lay, len)?.0.into_mutable().unwrap_or_else(|b| {
                let mut m = MutableBuffer::with_capacity(b.len());
                m.extend_from_slice(b.as_slice());
                m
            })
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
                engine()
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
            out
        }
        Layout::Other => unreachable!("handled above"),
    };
    let all_valid = |v: &Validity<'_>| matches!(v, Validity::AllValid);
    let nulls = if all_valid(&tv)
        && all_valid(&fv)
        && (rule == NullRule::NullIsFalse || mask_nulls.is_none())
    {
        None
    } else {
        let mut vb = MutableBuffer::from_len_zeroed(len.div_ceil(8));
        let n = crate::words::select_validity(cond, cond_valid, tv, fv, rule, vb.as_slice_mut());
        nulls_of(vb, len, n)
    };
    output(&dt, len, values.into(), nulls)
}

/// `mask ? t : f` of two scalars, at least one null.
fn scalars_with_a_null(
    mask: &BooleanArray,
    dt: &DataType,
    lay: Layout,
    ti: &Input,
    fi: &Input,
    rule: NullRule,
) -> Result<ArrayRef, ArrowError> {
    let len = mask.len();
    let (values, _) = if ti.null_scalar() {
        fi.copy(lay, len)?
    } else {
        ti.copy(lay, len)?
    };
    let mask_nulls = mask.nulls().filter(|n| n.null_count() > 0);
    // The rows that take `t`: true and valid.
    let taken = || match mask_nulls {
        Some(n) => mask.values() & n.inner(),
        None => mask.values().clone(),
    };
    let valid = match (ti.null_scalar(), fi.null_scalar()) {
        (true, true) => BooleanBuffer::new_unset(len),
        (false, true) => taken(),
        // Rows that take `f` are valid; under Arrow C++'s rule not those of a null condition.
        (true, false) => match (rule, mask_nulls) {
            (NullRule::NullPropagates, Some(n)) => &!mask.values() & n.inner(),
            _ => !&taken(),
        },
        (false, false) => unreachable!("a null scalar"),
    };
    let nulls = Some(NullBuffer::new(valid)).filter(|n| n.null_count() > 0);
    output(dt, len, values, nulls)
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
        if s && a.len() != 1 {
            return Err(invalid("scalar arrays must have 1 element"));
        }
        if !s && a.len() != len {
            return Err(invalid("all arrays should have the same length"));
        }
    }
    if conds
        .iter()
        .any(|c| matches!(c, When::Mask(m) if m.len() != len))
    {
        return Err(invalid("all arrays should have the same length"));
    }
    let masks: Vec<BooleanArray> = conds
        .iter()
        .map(|c| match c {
            When::Mask(m) => Ok((*m).clone()),
            When::Cmp(op, l, r) => crate::cmp::predicate(*op, *l, *r, len),
        })
        .collect::<Result<_, _>>()?;
    let lay = layout(&dt);
    if lay == Layout::Other {
        return zip_chain(&masks, values, default, &dt, len);
    }
    let inputs: Vec<Input> = values.iter().map(|v| Input::new(*v)).collect();
    let def = default.map(Input::new);
    // A condition: its bits and validity.
    let bits: Vec<(Bitmap<'_>, Validity<'_>)> = masks
        .iter()
        .map(|m| {
            let v = match m.nulls().filter(|n| n.null_count() > 0) {
                Some(n) => Validity::Bits(bitmap(n.inner())?),
                None => Validity::AllValid,
            };
            Ok((bitmap(m.values())?, v))
        })
        .collect::<Result<_, ArrowError>>()?;
    if conds.is_empty() {
        return match &def {
            Some(d) => {
                let (v, n) = d.copy(lay, len)?;
                output(&dt, len, v, n)
            }
            None => Ok(new_null_array(&dt, len)),
        };
    }
    let values_out: MutableBuffer = match lay {
        Layout::Bool => {
            // From the last branch backwards: out = c_i ? v_i : out.
            let nb = len.div_ceil(8);
            let mut prev: Option<MutableBuffer> = None;
            for ((c, cv), v) in bits.iter().zip(&inputs).rev() {
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
                    .map(|(c, cv)| match cv {
                        Validity::Bits(v) => Cond::bitmap_with_validity(*c, *v, cshape),
                        _ => Cond::bitmap(*c, cshape),
                    })
                    .collect();
                let vs: Vec<Choice<'_, u8>> = inputs.iter().map(view).collect::<Result<_, _>>()?;
                let d = match &def {
                    Some(d) => view(d)?,
                    None if k == 1 => Choice::Tensor(TensorRef::scalar(&zeros)),
                    None => Choice::Tensor(TensorRef::new(&zeros, &kshape)),
                };
                engine()
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
            out
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
        let mut vb = MutableBuffer::from_len_zeroed(len.div_ceil(8));
        let n = case_when_validity(len, &bits, &vals, dv, vb.as_slice_mut()).map_err(compute)?;
        nulls_of(vb, len, n)
    };
    output(&dt, len, values_out.into(), nulls)
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

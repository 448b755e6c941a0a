//! N-way select: `out = c1 ? v1 : c2 ? v2 : ... : ck ? vk : default`, the first true condition
//! wins (numpy.select, SQL `CASE WHEN`, Arrow `case_when`, a chain of ONNX `Where`; k = 1 is
//! the two-way select).
//!
//! The whole call is validated first — every buffer, every condition's dtypes, the broadcast of
//! all operands into the output — so an error writes nothing. It then runs in tiles of the
//! output small enough to stay in cache: per tile, the last branch's two-way select writes the
//! tile from the default, and each earlier branch overwrites it in place where its condition
//! holds. Each of those is a call of the engine's two-way path, so every backend and tier runs an
//! n-way select with its own kernels (predicates fused where the tier fuses them), and the
//! operands stream from memory once while the k passes over a tile stay in cache. Where a
//! condition or a value reads the output (in place), the tile's contents on entry are first
//! copied to a scratch tile, which those operands read instead, so every pass sees them as they
//! were.

use super::Engine;
use super::api::resolve;
use super::bitmap::{BLOCK, BitCond};
use super::config::InPlace;
pub use super::nway_pass::Choice;
use super::nway_pass::{Placed, Run, Slot, Val, contiguous};
use crate::bitsel::{self, NCond, Side};
use crate::cond::{Cond, Operand, Repr, Src};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result, ShapeFmt};
use crate::shape::{Broadcast, Dims, Strides, broadcast_pair};
use crate::tensor::{TensorMut, TensorRef, check_output_distinct, validate};

/// Bytes of a tile, the output's and every operand's elements counted: they stay in the caches
/// (L2 and the L3 slices next to it) while the k passes run over them. Measured on the n-way
/// bench cases (a Zen 4 host with 1 MiB of L2 per core and 32 MiB of L3, single-threaded):
/// budgets of 512 KiB to 4 MiB are within noise of each other on the large cases, 8 MiB and more
/// lose up to 1.3x on the 16M-element ones, and tiles of 8 KiB of output took 4x the time of
/// 256 KiB ones on 16M f32 (the two-way call's overhead, once per branch and tile).
const TILE_BYTES: usize = 2 << 20;

/// The operands of a call, validated in the order they are met: their labelled shapes (for
/// the broadcast and its messages) and views (bytes, element width, shape, strides, offset).
#[derive(Default)]
struct Views<'a> {
    shapes: Vec<(String, &'a [usize])>,
    views: Vec<RawView<'a>>,
}

/// A validated view: bytes, element width, shape, element strides, first element.
type RawView<'a> = (&'a [u8], usize, &'a [usize], Strides, usize);

impl<'a> Views<'a> {
    /// Validates a view and adds it: its index.
    fn add(
        &mut self,
        label: String,
        bytes: &'a [u8],
        width: usize,
        shape: &'a [usize],
        strides: Option<&'a [isize]>,
        offset: usize,
    ) -> Result<usize> {
        let l = validate("operand", bytes.len() / width, shape, strides, offset)
            .map_err(|e| Error::Invalid(format!("n-way select, {label}: {e}")))?;
        self.shapes.push((label, shape));
        self.views.push((bytes, width, shape, l.strides, l.offset));
        Ok(self.views.len() - 1)
    }

    /// A value or the default, of element width `w`.
    fn value(&mut self, c: &Choice<'a, u8>, w: usize, label: String) -> Result<Val> {
        Ok(match c {
            Choice::Tensor(t) => {
                let (d, s, st, off) = (t.data(), t.shape(), t.strides(), t.offset());
                Val::Placed(self.add(label, d, w, s, st, off)?)
            }
            Choice::Out => Val::Out,
        })
    }

    /// A predicate's operand: its slot (a view added here, a scalar, or the output).
    fn operand(&mut self, o: &Operand<'a>, label: String) -> Result<Slot> {
        Ok(match o.src {
            Src::View {
                dtype,
                bytes,
                shape,
                strides,
                offset,
            } => Slot::Placed(self.add(label, bytes, dtype.width(), shape, strides, offset)?),
            Src::Scalar { .. } => Slot::Scalar,
            Src::InPlace => Slot::Out,
            Src::Placeholder { .. } => {
                return Err(Error::Invalid(format!(
                    "n-way select, {label}: a placeholder operand has no data"
                )));
            }
        })
    }
}

/// A tile of the output: the index of each dimension before `axis`, and `len` indices of `axis`
/// from `start` (every index of the dimensions after it).
struct Tile<'i> {
    idx: &'i [usize],
    axis: usize,
    start: usize,
    len: usize,
}

impl Placed<'_> {
    /// This operand's view of `t`: its shape there (into `shape`) and the index of its first
    /// element; whether that view is row-major contiguous.
    fn view(&self, t: &Tile<'_>, shape: &mut Dims) -> (usize, bool) {
        shape.clear();
        let mut off = self.offset as isize;
        for (d, (&n, &s)) in self.shape.iter().zip(&self.strides).enumerate() {
            let (index, size) = if d < t.axis {
                (t.idx[d], 1)
            } else if d == t.axis {
                (t.start, t.len)
            } else {
                (0, n)
            };
            if n > 1 {
                // Inside the validated view: the index is below the output's size, which
                // equals this operand's.
                off += index as isize * s;
                shape.push(size);
            } else {
                shape.push(1);
            }
        }
        (off as usize, contiguous(shape, Some(&self.strides)))
    }

    /// This operand as a byte tensor over `t`'s view (`shape`, `off`, `contiguous` from
    /// [`Placed::view`]): a slice of its own elements where contiguous (the engine's fast
    /// paths see a plain contiguous tensor), the strided view otherwise.
    fn tensor<'t>(&'t self, shape: &'t [usize], off: usize, contiguous: bool) -> TensorRef<'t, u8> {
        if contiguous {
            let n: usize = shape.iter().product();
            TensorRef::new(&self.bytes[off * self.width..(off + n) * self.width], shape)
        } else {
            TensorRef::with_layout(self.bytes, shape, &self.strides, off)
        }
    }
}

/// Pads `shape` and `strides` on the left to `rank` dimensions (size 1, stride 0).
fn pad(rank: usize, shape: &[usize], strides: &[isize]) -> (Dims, Strides) {
    let lead = rank - shape.len();
    let mut s: Dims = smallvec::smallvec![1; lead];
    s.extend_from_slice(shape);
    let mut st: Strides = smallvec::smallvec![0; lead];
    st.extend_from_slice(strides);
    (s, st)
}

impl Engine {
    /// N-way select, the first true condition wins:
    /// `out = conds[0] ? values[0] : conds[1] ? values[1] : ... : default` (numpy.select, SQL
    /// `CASE WHEN`; one condition is [`Engine::select`]). Each condition is a mask or a
    /// predicate ([`Cond`]); every condition's operands, every value and the default broadcast
    /// together under `mode` (`Numpy`, or `Exact` when all shapes are equal), and the output has
    /// the broadcast shape. A value or the default may be the output itself ([`Choice::Out`]),
    /// and a predicate may read it ([`Operand::in_place`]): they see it as it was on entry.
    ///
    /// Errors (nothing written): no condition, a different number of values, another broadcast
    /// mode, and every error of [`Engine::select`] (shapes, buffers, a predicate's dtypes).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Choice, Cond, Engine, TensorMut, TensorRef};
    /// // numpy.nan_to_num in one call: NaN -> 0, +inf -> f32::MAX, -inf -> f32::MIN.
    /// let x = [1.5f32, f32::NAN, f32::INFINITY, -2.0, f32::NEG_INFINITY];
    /// let xv = TensorRef::new(&x, &[5]);
    /// let mut out = [0f32; 5];
    /// Engine::new().select_n(
    ///     &[Cond::isnan(xv), Cond::eq(xv, f32::INFINITY), Cond::eq(xv, f32::NEG_INFINITY)],
    ///     &[
    ///         TensorRef::scalar(&[0.0f32]).into(),
    ///         TensorRef::scalar(&[f32::MAX]).into(),
    ///         TensorRef::scalar(&[f32::MIN]).into(),
    ///     ],
    ///     xv.into(),
    ///     TensorMut::new(&mut out, &[5]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1.5, 0.0, f32::MAX, -2.0, f32::MIN]);
    /// // In place: x = x < 0 ? 0 : x > 1 ? 1 : x (a clip), the conditions reading x as it was.
    /// let mut y = [-0.5f32, 0.25, 3.0];
    /// Engine::new().select_n(
    ///     &[Cond::lt(selectjit::Operand::in_place(), 0.0f32),
    ///       Cond::gt(selectjit::Operand::in_place(), 1.0f32)],
    ///     &[TensorRef::scalar(&[0.0f32]).into(), TensorRef::scalar(&[1.0f32]).into()],
    ///     Choice::Out,
    ///     TensorMut::new(&mut y, &[3]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(y, [0.0, 0.25, 1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn select_n<'c, T: Element>(
        &self,
        conds: &[Cond<'c>],
        values: &[Choice<'_, T>],
        default: Choice<'_, T>,
        out: TensorMut<'_, T>,
        mode: Broadcast,
    ) -> Result<()> {
        fn bytes<'a, T: Element>(c: &Choice<'a, T>) -> Choice<'a, u8> {
            match c {
                Choice::Tensor(t) => {
                    let d: &[u8] = bytemuck::cast_slice(t.data());
                    let v = match t.strides() {
                        Some(s) => TensorRef::with_layout(d, t.shape(), s, t.offset()),
                        None => TensorRef::new(d, t.shape()).with_offset(t.offset()),
                    };
                    Choice::Tensor(v)
                }
                Choice::Out => Choice::Out,
            }
        }
        let vals: smallvec::SmallVec<[Choice<'_, u8>; 8]> = values.iter().map(bytes).collect();
        let (o, shape, strides, offset) = out.into_parts();
        let ob: &mut [u8] = bytemuck::cast_slice_mut(o);
        let out = match strides {
            Some(s) => TensorMut::with_layout(ob, shape, s, offset),
            None => TensorMut::new(ob, shape).with_offset(offset),
        };
        self.select_n_bytes(T::DTYPE, conds, &vals, bytes(&default), out, mode)
    }

    /// Byte-level [`Engine::select_n`] for a run-time `dtype`: every value, the default and the
    /// output hold raw little-endian elements of `dtype`; shapes, strides and offsets count
    /// elements. Used by the C ABI, the CLI and Python.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Choice, DType, Engine, TensorMut, TensorRef};
    /// // Two masks over u16 values (little-endian bytes): the first true mask wins.
    /// let (m1, m2) = ([1u8, 0, 0], [1u8, 1, 0]);
    /// let a: Vec<u8> = [1u16, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
    /// let mut out = [0u8; 6];
    /// Engine::new().select_n_bytes(
    ///     DType::U16,
    ///     &[TensorRef::new(&m1, &[3]).into(), TensorRef::new(&m2, &[3]).into()],
    ///     &[Choice::Tensor(TensorRef::new(&a, &[3])), TensorRef::scalar(&[7, 0]).into()],
    ///     TensorRef::scalar(&[9, 0]).into(),
    ///     TensorMut::new(&mut out, &[3]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 0, 7, 0, 9, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn select_n_bytes<'c>(
        &self,
        dtype: DType,
        conds: &[Cond<'c>],
        values: &[Choice<'_, u8>],
        default: Choice<'_, u8>,
        out: TensorMut<'_, u8>,
        mode: Broadcast,
    ) -> Result<()> {
        if conds.iter().any(Cond::is_bitmap) {
            return self.select_n_bitmaps(dtype, conds, values, default, out, mode);
        }
        // A flat call on a single-pass kernel, where the engine has one for it.
        let mut out = out;
        if mode == Broadcast::Numpy
            && let mut flat = super::nway_pass::Flat::new()
            && super::nway_pass::plan(&mut flat, dtype, conds, values, default, &out).is_some()
        {
            match self.run_nway_pass(&mut flat, out) {
                None => return Ok(()),
                Some(o) => out = o,
            }
        }
        // A flat call of at most one tile's output (its operands then fit in the tile too).
        let tile = (TILE_BYTES / 2 / dtype.width()).max(1);
        if mode == Broadcast::Numpy {
            let (shape, strides, offset) = (out.shape(), out.strides(), out.offset());
            let len = out.data().len() / dtype.width();
            match flat_call(
                dtype,
                conds,
                values,
                default,
                (len, shape, strides, offset),
                tile,
            ) {
                Some(Ok(())) => return self.run_flat(dtype, conds, values, default, out),
                Some(Err(e)) => return Err(e),
                None => {}
            }
        }
        self.select_n_tiled(dtype, conds, values, default, out, mode, None)
    }

    /// A call [`flat_call`] accepted: the last branch over the default, then each earlier
    /// branch in place, on the operands as given (every two-way call of one flat shape: the
    /// thread's memo runs it without planning).
    fn run_flat(
        &self,
        dtype: DType,
        conds: &[Cond<'_>],
        values: &[Choice<'_, u8>],
        default: Choice<'_, u8>,
        out: TensorMut<'_, u8>,
    ) -> Result<()> {
        let mode = Broadcast::Numpy;
        fn value<'v>(v: &Choice<'v, u8>) -> Result<TensorRef<'v, u8>> {
            match v {
                Choice::Tensor(t) => Ok(*t),
                // `flat_call` refused it.
                Choice::Out => Err(Error::Invalid("n-way select: a value read in place".into())),
            }
        }
        let k = conds.len();
        let (ob, shape, _, _) = out.into_parts();
        match default {
            Choice::Out => self.select_in_place_bytes(
                dtype,
                conds[k - 1],
                TensorMut::new(&mut *ob, shape),
                InPlace::Else,
                value(&values[k - 1])?,
                mode,
            )?,
            Choice::Tensor(d) => self.select_bytes(
                dtype,
                conds[k - 1],
                value(&values[k - 1])?,
                d,
                TensorMut::new(&mut *ob, shape),
                mode,
            )?,
        }
        for i in (0..k - 1).rev() {
            self.select_in_place_bytes(
                dtype,
                conds[i],
                TensorMut::new(&mut *ob, shape),
                InPlace::Else,
                value(&values[i])?,
                mode,
            )?;
        }
        Ok(())
    }

    /// [`Engine::select_n_bytes`] in tiles of at most `tile` output elements (at least one
    /// innermost row, whatever its size); `None`: as many as [`TILE_BYTES`] hold with the
    /// output's and every operand's elements.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn select_n_tiled(
        &self,
        dtype: DType,
        conds: &[Cond<'_>],
        values: &[Choice<'_, u8>],
        default: Choice<'_, u8>,
        out: TensorMut<'_, u8>,
        mode: Broadcast,
        tile: Option<usize>,
    ) -> Result<()> {
        let k = conds.len();
        if k == 0 {
            return Err(Error::Invalid(
                "an n-way select needs at least one condition".to_string(),
            ));
        }
        if values.len() != k {
            return Err(Error::Invalid(format!(
                "an n-way select takes one value per condition: {k} conditions, {} values",
                values.len()
            )));
        }
        if !matches!(mode, Broadcast::Numpy | Broadcast::Exact) {
            return Err(Error::Broadcast(format!(
                "an n-way select broadcasts under the numpy or none rule, not {}",
                mode.name()
            )));
        }
        let w = dtype.width();
        let (ob, oshape, ostrides, ooff) = out.into_parts();
        let ol = validate("output", ob.len() / w, oshape, ostrides, ooff)?;
        check_output_distinct(oshape, &ol.strides)?;
        let rank = oshape.len();

        // Every operand's buffer validated; the shapes to broadcast, labelled for the messages.
        let mut ops = Views::default();
        // Per condition, the slots of its operands (a mask's, a predicate's lhs and rhs).
        let mut slots: Vec<[Option<Slot>; 2]> = Vec::with_capacity(k);
        let mut reads_out = false;
        for (i, c) in conds.iter().enumerate() {
            let label = format!("condition {}", i + 1);
            resolve(c, dtype).map_err(|e| relabel(e, &label))?;
            let slot = match &c.repr {
                Repr::Mask(m) => [
                    Some(Slot::Placed(ops.add(
                        label,
                        m.data(),
                        1,
                        m.shape(),
                        m.strides(),
                        m.offset(),
                    )?)),
                    None,
                ],
                Repr::Cmp(_, l, r) => [
                    Some(ops.operand(l, format!("{label} lhs"))?),
                    Some(ops.operand(r, format!("{label} rhs"))?),
                ],
                Repr::Test(_, v) => [Some(ops.operand(v, label)?), None],
                // `resolve` above refuses bitmaps: `select_n_bytes` expands them first.
                Repr::Bits { .. } => unreachable!("bitmaps are expanded before validation"),
            };
            reads_out |= slot.iter().any(|s| matches!(s, Some(Slot::Out)));
            slots.push(slot);
        }
        let mut vals: Vec<Val> = Vec::with_capacity(k);
        for (i, v) in values.iter().enumerate() {
            vals.push(ops.value(v, w, format!("value {}", i + 1))?);
        }
        let dflt = ops.value(&default, w, "default".to_string())?;
        reads_out |= vals.iter().any(|v| matches!(v, Val::Out));

        // The broadcast of every operand (the output's own shape for those that read it).
        let mut all = ops.shapes.clone();
        if reads_out || matches!(dflt, Val::Out) {
            all.push(("the output".to_string(), oshape));
        }
        let mut acc: Dims = Dims::new();
        for (i, (label, s)) in all.iter().enumerate() {
            acc = match mode {
                Broadcast::Exact if *s != oshape => {
                    return Err(Error::Broadcast(format!(
                        "none broadcast (n-way select): {label} has shape {}, the output {}",
                        ShapeFmt(s),
                        ShapeFmt(oshape)
                    )));
                }
                _ if i == 0 => s.iter().copied().collect(),
                _ => broadcast_pair(["operands", "operand"], &acc, s).map_err(|_| {
                    Error::Broadcast(format!(
                        "numpy broadcast (n-way select): {label} {} cannot be broadcast with \
                         {}, the shape of the operands before it",
                        ShapeFmt(s),
                        ShapeFmt(&acc)
                    ))
                })?,
            };
        }
        // Whether the last branch and the default span the output by themselves: the tile's first
        // pass selects between them, else it fills the tile with the default first.
        let spans = {
            let [a, b] = slots[k - 1];
            let mut own: Vec<&[usize]> = Vec::new();
            for s in [a, b].into_iter().flatten() {
                match s {
                    Slot::Placed(i) => own.push(ops.shapes[i].1),
                    Slot::Scalar => {}
                    Slot::Out => own.push(oshape),
                }
            }
            for v in [vals[k - 1], dflt] {
                match v {
                    Val::Placed(i) => own.push(ops.shapes[i].1),
                    Val::Out => own.push(oshape),
                }
            }
            let mut b: Dims = Dims::new();
            for s in own {
                b = broadcast_pair(["operands", "operand"], &b, s)?;
            }
            b.as_slice() == oshape
        };
        if acc.as_slice() != oshape {
            return Err(Error::OutputShape {
                got: ShapeFmt(oshape).to_string(),
                expected: ShapeFmt(&acc).to_string(),
            });
        }
        if oshape.contains(&0) {
            return Ok(());
        }
        let placed: Vec<Placed<'_>> = ops
            .views
            .into_iter()
            .map(|(bytes, width, shape, strides, offset)| {
                let (shape, strides) = pad(rank, shape, &strides);
                Placed {
                    bytes,
                    width,
                    shape,
                    strides,
                    offset,
                }
            })
            .collect();
        let (os, ost) = pad(rank, oshape, &ol.strides);
        let outp = Placed {
            bytes: &[],
            width: w,
            shape: os,
            strides: ost,
            offset: ol.offset,
        };
        let run = Run {
            engine: self,
            dtype,
            conds,
            slots: &slots,
            vals: &vals,
            dflt,
            placed: &placed,
            out: &outp,
            scratch: reads_out,
            spans,
        };
        if run.one_pass(ob, oshape) {
            return Ok(());
        }
        let per_elem = w + placed.iter().map(|p| p.width).sum::<usize>();
        let tile = tile.unwrap_or((TILE_BYTES / per_elem).max(1));
        run.tiles(ob, oshape, tile)
    }
}

/// Whether an n-way call is flat, so that its branches run on the operands as given, without
/// tiles: the output row-major and contiguous (offset 0) with at most `tile` elements; every
/// operand either the output's shape, contiguous, or one element (all dimensions 1); nothing but
/// the default read in place; the last branch's condition, its value or the default of the
/// output's shape (then the two-way calls' outputs are the broadcast of their operands). Each
/// buffer holds its elements and each condition resolves for `dtype` (else `Some(Err)`, before
/// anything is written). `None`: the general path runs the call (and makes its errors).
fn flat_call(
    dtype: DType,
    conds: &[Cond<'_>],
    values: &[Choice<'_, u8>],
    default: Choice<'_, u8>,
    (len, shape, strides, offset): (usize, &[usize], Option<&[isize]>, usize),
    tile: usize,
) -> Option<Result<()>> {
    let k = conds.len();
    if k == 0 || values.len() != k || strides.is_some() || offset != 0 {
        return None;
    }
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    if n == 0 || n > tile || len < n {
        return None;
    }
    // `Some(true)`: the output's shape; `Some(false)`: one element.
    let flat = |elems: usize, s: &[usize], st: Option<&[isize]>, off: usize| -> Option<bool> {
        if st.is_some() || off != 0 {
            None
        } else if s == shape {
            (elems >= n).then_some(true)
        } else if s.len() <= shape.len() && s.iter().all(|&d| d == 1) {
            (elems >= 1).then_some(false)
        } else {
            None
        }
    };
    let operand = |o: &Operand<'_>| -> Option<bool> {
        match o.src {
            Src::View {
                dtype,
                bytes,
                shape,
                strides,
                offset,
            } => flat(bytes.len() / dtype.width(), shape, strides, offset),
            Src::Scalar { .. } => Some(false),
            Src::InPlace | Src::Placeholder { .. } => None,
        }
    };
    let mut last_full = false;
    for (i, c) in conds.iter().enumerate() {
        let full = match &c.repr {
            Repr::Mask(m) => flat(m.data().len(), m.shape(), m.strides(), m.offset())?,
            Repr::Cmp(_, l, r) => operand(l)? | operand(r)?,
            Repr::Test(_, v) => operand(v)?,
            Repr::Bits { .. } => return None,
        };
        if i == k - 1 {
            last_full = full;
        }
    }
    let value = |v: &Choice<'_, u8>| match v {
        Choice::Tensor(t) => flat(
            t.data().len() / dtype.width(),
            t.shape(),
            t.strides(),
            t.offset(),
        ),
        Choice::Out => None,
    };
    for v in values {
        value(v)?;
    }
    let spans = last_full
        || value(&values[k - 1])?
        || match default {
            Choice::Out => true,
            d => value(&d)?,
        };
    if !spans {
        return None;
    }
    for (i, c) in conds.iter().enumerate() {
        if let Err(e) = resolve(c, dtype) {
            return Some(Err(relabel(e, &format!("condition {}", i + 1))));
        }
    }
    Some(Ok(()))
}

/// `e` with `what` in front of its message (a condition's dtype error names its branch).
fn relabel(e: Error, what: &str) -> Error {
    match e {
        Error::DType(m) => Error::DType(format!("{what}: {m}")),
        Error::Invalid(m) => Error::Invalid(format!("{what}: {m}")),
        e => e,
    }
}

impl Run<'_, '_> {
    /// Runs every tile of at most `tile` elements (at least one innermost row) of the output.
    fn tiles(&self, out: &mut [u8], oshape: &[usize], tile: usize) -> Result<()> {
        let rank = oshape.len();
        // The first axis after which a tile holds whole rows of at most `tile` elements.
        let mut axis = 0;
        while axis + 1 < rank && oshape[axis + 1..].iter().product::<usize>() > tile {
            axis += 1;
        }
        let mut scratch = Vec::new();
        if rank == 0 {
            let t = Tile {
                idx: &[],
                axis: 0,
                start: 0,
                len: 1,
            };
            return self.tile(&t, out, &mut scratch);
        }
        let inner: usize = oshape[axis + 1..].iter().product();
        let chunk = (tile / inner).clamp(1, oshape[axis]);
        let mut idx = vec![0usize; axis];
        loop {
            let mut start = 0;
            while start < oshape[axis] {
                let len = chunk.min(oshape[axis] - start);
                let t = Tile {
                    idx: &idx,
                    axis,
                    start,
                    len,
                };
                self.tile(&t, out, &mut scratch)?;
                start += len;
            }
            // The next index of the dimensions before `axis`, row-major.
            let mut d = axis;
            loop {
                if d == 0 {
                    return Ok(());
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < oshape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }

    /// One tile: the last branch over the default, then each earlier branch in place.
    fn tile(&self, t: &Tile<'_>, out: &mut [u8], scratch: &mut Vec<u8>) -> Result<()> {
        let (e, dtype, w) = (self.engine, self.dtype, self.dtype.width());
        let mode = Broadcast::Numpy;
        let mut shapes: Vec<Dims> = vec![Dims::new(); self.placed.len()];
        let mut at: Vec<(usize, bool)> = Vec::with_capacity(self.placed.len());
        for (p, s) in self.placed.iter().zip(shapes.iter_mut()) {
            at.push(p.view(t, s));
        }
        let mut oshape = Dims::new();
        let (ooff, ocontig) = self.out.view(t, &mut oshape);
        let n: usize = oshape.iter().product();
        let ostrides: &[isize] = &self.out.strides;
        // The output tile as a fresh mutable tensor for each pass.
        macro_rules! out_tile {
            () => {
                if ocontig {
                    TensorMut::new(&mut out[ooff * w..(ooff + n) * w], &oshape)
                } else {
                    TensorMut::with_layout(&mut *out, &oshape, ostrides, ooff)
                }
            };
        }
        if self.scratch {
            scratch.clear();
            scratch.resize(n * w, 0);
            let src = if ocontig {
                TensorRef::new(&out[ooff * w..(ooff + n) * w], &oshape[..])
            } else {
                TensorRef::with_layout(&*out, &oshape, ostrides, ooff)
            };
            // A copy by the engine's own kernels: a select whose sides are both the tile.
            e.select_bytes(
                dtype,
                TensorRef::scalar(&[1u8][..]),
                src,
                src,
                TensorMut::new(&mut scratch[..], &oshape),
                mode,
            )?;
        }
        let scr: &[u8] = scratch;
        let tensor = |i: usize| -> TensorRef<'_, u8> {
            let (off, contiguous) = at[i];
            self.placed[i].tensor(&shapes[i], off, contiguous)
        };
        let on_entry = || TensorRef::new(scr, &oshape[..]);
        let value = |v: Val| -> TensorRef<'_, u8> {
            match v {
                Val::Placed(i) => tensor(i),
                Val::Out => on_entry(),
            }
        };
        let cond = |i: usize| -> Cond<'_> {
            let op = |o: &Operand<'_>, s: Option<Slot>| -> Operand<'_> {
                match (s, o.src) {
                    (Some(Slot::Placed(j)), Src::View { dtype: d, .. }) => {
                        Operand::from_bytes(d, tensor(j))
                    }
                    (_, Src::Scalar { dtype: d, bytes }) => Operand {
                        src: Src::Scalar { dtype: d, bytes },
                    },
                    _ => Operand::from_bytes(dtype, on_entry()),
                }
            };
            let c = &self.conds[i];
            let [a, b] = self.slots[i];
            let repr = match &c.repr {
                Repr::Mask(_) => match a {
                    Some(Slot::Placed(j)) => Repr::Mask(tensor(j)),
                    _ => unreachable!("a mask is placed"),
                },
                Repr::Cmp(op_, l, r) => Repr::Cmp(*op_, op(l, a), op(r, b)),
                Repr::Test(op_, v) => Repr::Test(*op_, op(v, a)),
                // Validated calls only (no bitmap passes `resolve`).
                Repr::Bits { .. } => unreachable!("bitmaps are expanded before validation"),
            };
            Cond { repr, not: c.not }
        };
        let k = self.conds.len();
        // The last branch over the default: in place when the default is the output itself
        // (and nothing else reads it), into the tile otherwise. Where those operands do not
        // span the output, the tile is filled with the default first (the two-way select's
        // output is the broadcast of its operands).
        let dflt = match (self.dflt, self.scratch, self.spans) {
            (Val::Out, false, _) => Val::Out,
            (d, _, true) => d,
            (d, _, false) => {
                e.select_in_place_bytes(
                    dtype,
                    TensorRef::scalar(&[1u8][..]),
                    out_tile!(),
                    InPlace::Else,
                    value(d),
                    mode,
                )?;
                Val::Out
            }
        };
        match (dflt, self.scratch) {
            (Val::Out, _) => e.select_in_place_bytes(
                dtype,
                cond(k - 1),
                out_tile!(),
                InPlace::Else,
                value(self.vals[k - 1]),
                mode,
            )?,
            (d, _) => e.select_bytes(
                dtype,
                cond(k - 1),
                value(self.vals[k - 1]),
                value(d),
                out_tile!(),
                mode,
            )?,
        }
        for i in (0..k - 1).rev() {
            e.select_in_place_bytes(
                dtype,
                cond(i),
                out_tile!(),
                InPlace::Else,
                value(self.vals[i]),
                mode,
            )?;
        }
        Ok(())
    }
}

impl Engine {
    /// [`Engine::select_n_bytes`] of conditions some of which are bitmaps. A flat call (the
    /// output contiguous, every operand of its shape and contiguous or a single element) runs
    /// a block of [`BLOCK`] elements at a time, each bitmap expanded into the block's byte
    /// mask; any other call expands each bitmap into a byte mask of its shape first.
    pub(super) fn select_n_bitmaps(
        &self,
        dtype: DType,
        conds: &[Cond<'_>],
        values: &[Choice<'_, u8>],
        default: Choice<'_, u8>,
        out: TensorMut<'_, u8>,
        mode: Broadcast,
    ) -> Result<()> {
        let bc: Vec<Option<BitCond<'_>>> = conds
            .iter()
            .map(|c| BitCond::of(c, "condition").transpose())
            .collect::<Result<_>>()?;
        let w = dtype.width();
        let shape = out.shape();
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if let Some(n) = n.filter(|&n| n > 0)
            && mode == Broadcast::Numpy
            && self.config.backend != super::config::Backend::Interp
            && shape.len() <= crate::shape::MAX_RANK
            && out.strides().is_none()
            && out.offset() == 0
            && out.data().len() / w >= n
            && conds.iter().zip(&bc).all(|(c, b)| match b {
                Some(b) => b.shape == shape,
                None => cond_flat(c, shape, n),
            })
            && values
                .iter()
                .chain([&default])
                .all(|v| choice_flat(v, shape, n, w).is_some())
        {
            let (o, ..) = out.into_parts();
            // Every condition a bitmap: the bits straight into opmask registers, where the
            // engine reads them so.
            if let Some(isa) = self.reads_bits()
                && let Some(nconds) = conds
                    .iter()
                    .zip(&bc)
                    .map(|(c, b)| {
                        b.as_ref().map(|b| NCond {
                            bits: b.bits,
                            valid: b.valid,
                            not: c.not,
                        })
                    })
                    .collect::<Option<smallvec::SmallVec<[NCond<'_>; 8]>>>()
            {
                fn side<'x>(c: &Choice<'x, u8>, shape: &[usize], n: usize, w: usize) -> Side<'x> {
                    match *c {
                        Choice::Tensor(t) if choice_flat(c, shape, n, w) == Some(true) => {
                            Side::Full(t.data())
                        }
                        Choice::Tensor(t) => Side::One(t.data()),
                        Choice::Out => Side::Out,
                    }
                }
                let sides: smallvec::SmallVec<[Side<'_>; 8]> =
                    values.iter().map(|v| side(v, shape, n, w)).collect();
                let d = side(&default, shape, n, w);
                if bitsel::select_n_flat(isa, w, &nconds, &sides, d, &mut o[..n * w]) {
                    return Ok(());
                }
            }
            let count = bc.iter().flatten().count();
            // The blocks' masks: this thread's scratch (taken, so that a nested call finds
            // none and makes its own), grown to the widest call seen.
            thread_local! {
                static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
            }
            let mut bufs = SCRATCH.take();
            bufs.resize(bufs.len().max(BLOCK * count), 0);
            let mut run = || -> Result<()> {
                let mut j = 0;
                while j < n {
                    let m = (n - j).min(BLOCK);
                    let sh = [m];
                    let mut chunks = bufs.chunks_mut(BLOCK);
                    let mut masks: smallvec::SmallVec<[&[u8]; 8]> = smallvec::SmallVec::new();
                    for b in bc.iter().flatten() {
                        let c = &mut chunks.next().expect("a block per bitmap")[..m];
                        b.expand(j, c);
                        masks.push(c);
                    }
                    let mut masks = masks.into_iter();
                    let bconds: smallvec::SmallVec<[Cond<'_>; 8]> = conds
                        .iter()
                        .zip(&bc)
                        .map(|(c, b)| match b {
                            Some(_) => Cond {
                                repr: Repr::Mask(TensorRef::new(
                                    masks.next().expect("a mask per bitmap"),
                                    &sh,
                                )),
                                not: c.not,
                            },
                            None => cond_block(c, shape, j, &sh),
                        })
                        .collect();
                    let bvals: smallvec::SmallVec<[Choice<'_, u8>; 8]> = values
                        .iter()
                        .map(|v| choice_block(v, shape, j, &sh, w))
                        .collect();
                    self.select_n_bytes(
                        dtype,
                        &bconds,
                        &bvals,
                        choice_block(&default, shape, j, &sh, w),
                        TensorMut::new(&mut o[j * w..(j + m) * w], &sh),
                        Broadcast::Numpy,
                    )?;
                    j += m;
                }
                Ok(())
            };
            let r = run();
            // Kept for the next call up to 16 conditions' blocks (64 KiB).
            if bufs.len() <= 16 * BLOCK {
                SCRATCH.set(bufs);
            }
            return r;
        }
        let masks: Vec<Option<(Vec<u8>, &[usize])>> = bc
            .iter()
            .map(|b| b.as_ref().map(|b| (b.to_mask(), b.shape)))
            .collect();
        let lowered: Vec<Cond<'_>> = conds
            .iter()
            .zip(&masks)
            .map(|(c, m)| match m {
                Some((m, shape)) => Cond {
                    repr: Repr::Mask(TensorRef::new(m, shape)),
                    not: c.not,
                },
                None => *c,
            })
            .collect();
        self.select_n_bytes(dtype, &lowered, values, default, out, mode)
    }
}

/// How a flat call reads a view of `len` elements: all `n` of the output's `shape`,
/// contiguous (`Some(true)`), or its one element (`Some(false)`).
fn view_flat(
    len: usize,
    vshape: &[usize],
    strides: Option<&[isize]>,
    offset: usize,
    shape: &[usize],
    n: usize,
) -> Option<bool> {
    if strides.is_some() || offset != 0 {
        None
    } else if vshape == shape && len >= n {
        Some(true)
    } else if vshape.len() <= shape.len() && vshape.iter().all(|&d| d == 1) && len >= 1 {
        Some(false)
    } else {
        None
    }
}

/// Whether a predicate's operand is flat (see [`view_flat`]).
fn operand_flat(o: &Operand<'_>, shape: &[usize], n: usize) -> Option<bool> {
    match &o.src {
        Src::View {
            dtype,
            bytes,
            shape: s,
            strides,
            offset,
        } => view_flat(bytes.len() / dtype.width(), s, *strides, *offset, shape, n),
        Src::Scalar { .. } => Some(false),
        Src::InPlace => Some(true),
        Src::Placeholder { .. } => None,
    }
}

fn cond_flat(c: &Cond<'_>, shape: &[usize], n: usize) -> bool {
    match &c.repr {
        Repr::Mask(m) => {
            view_flat(m.data().len(), m.shape(), m.strides(), m.offset(), shape, n).is_some()
        }
        Repr::Cmp(_, l, r) => {
            operand_flat(l, shape, n).is_some() && operand_flat(r, shape, n).is_some()
        }
        Repr::Test(_, v) => operand_flat(v, shape, n).is_some(),
        Repr::Bits { .. } => false,
    }
}

fn choice_flat(c: &Choice<'_, u8>, shape: &[usize], n: usize, w: usize) -> Option<bool> {
    match c {
        Choice::Tensor(t) => view_flat(
            t.data().len() / w,
            t.shape(),
            t.strides(),
            t.offset(),
            shape,
            n,
        ),
        Choice::Out => Some(true),
    }
}

/// Bytes of elements `j..j + sh[0]` of a flat view of `w`-byte elements, or its one element.
fn bytes_block<'x>(b: &'x [u8], full: bool, j: usize, sh: &[usize], w: usize) -> &'x [u8] {
    if full {
        &b[j * w..(j + sh[0]) * w]
    } else {
        &b[..w]
    }
}

fn operand_block<'x>(o: &Operand<'x>, shape: &[usize], j: usize, sh: &'x [usize]) -> Operand<'x> {
    let n = crate::shape::numel(shape);
    match (&o.src, operand_flat(o, shape, n)) {
        (Src::View { dtype, bytes, .. }, Some(full)) => {
            let b = bytes_block(bytes, full, j, sh, dtype.width());
            Operand::from_bytes(*dtype, TensorRef::new(b, if full { sh } else { &[] }))
        }
        _ => *o,
    }
}

/// Elements `j..j + sh[0]` of a flat condition that is not a bitmap.
fn cond_block<'x>(c: &Cond<'x>, shape: &[usize], j: usize, sh: &'x [usize]) -> Cond<'x> {
    let n = crate::shape::numel(shape);
    let repr = match &c.repr {
        Repr::Mask(m) => {
            let full = view_flat(m.data().len(), m.shape(), m.strides(), m.offset(), shape, n)
                == Some(true);
            let b = bytes_block(m.data(), full, j, sh, 1);
            Repr::Mask(TensorRef::new(b, if full { sh } else { &[] }))
        }
        Repr::Cmp(op, l, r) => Repr::Cmp(
            *op,
            operand_block(l, shape, j, sh),
            operand_block(r, shape, j, sh),
        ),
        Repr::Test(op, v) => Repr::Test(*op, operand_block(v, shape, j, sh)),
        Repr::Bits { .. } => c.repr,
    };
    Cond { repr, not: c.not }
}

fn choice_block<'x>(
    c: &Choice<'x, u8>,
    shape: &[usize],
    j: usize,
    sh: &'x [usize],
    w: usize,
) -> Choice<'x, u8> {
    let n = crate::shape::numel(shape);
    match (c, choice_flat(c, shape, n, w)) {
        (Choice::Tensor(t), Some(full)) => {
            let b = bytes_block(t.data(), full, j, sh, w);
            Choice::Tensor(TensorRef::new(b, if full { sh } else { &[] }))
        }
        _ => *c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::config::{Backend, EngineConfig};

    /// Tiling changes nothing: random broadcast calls (reversed and strided outputs, in-place
    /// operands) give the same bytes in tiles of 1, 3, 7 and 64 elements as in one tile, on the
    /// static kernels and the JIT.
    #[test]
    fn tiles_of_any_size_agree() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % n as u64) as usize
        };
        for backend in [Backend::Static, Backend::Jit] {
            let eng = Engine::with_config(EngineConfig::new().backend(backend)).unwrap();
            for _ in 0..150 {
                let rank = 1 + next(3);
                let shape: Vec<usize> = (0..rank).map(|_| 1 + next(9)).collect();
                let n: usize = shape.iter().product();
                let sub = |next: &mut dyn FnMut(usize) -> usize| -> Vec<usize> {
                    shape
                        .iter()
                        .map(|&d| if next(3) == 0 { 1 } else { d })
                        .collect()
                };
                let k = 1 + next(4);
                let xs: Vec<f32> = (0..n)
                    .map(|i| [0.5, -1.0, f32::NAN, 2.0][(i * 7 + k) % 4])
                    .collect();
                let masks: Vec<(Vec<usize>, Vec<u8>)> = (0..k)
                    .map(|_| {
                        let s = sub(&mut next);
                        let m = s.iter().product();
                        (s, (0..m).map(|_| [0u8, 1, 7][next(3)]).collect())
                    })
                    .collect();
                let vals: Vec<(Vec<usize>, Vec<f32>)> = (0..k)
                    .map(|i| {
                        let s = sub(&mut next);
                        let m = s.iter().product();
                        (s, (0..m).map(|j| (i * 100 + j) as f32).collect())
                    })
                    .collect();
                let in_place = next(2) == 0;
                let reverse = next(2) == 0;
                // The output: row-major, or its last dimension reversed.
                let mut ost: Vec<isize> = vec![1; rank];
                for d in (0..rank - 1).rev() {
                    ost[d] = ost[d + 1] * shape[d + 1] as isize;
                }
                let mut ooff = 0;
                if reverse {
                    ost[rank - 1] = -1;
                    ooff = shape[rank - 1] - 1;
                }
                let run = |tile: Option<usize>| -> Vec<u32> {
                    let xv = TensorRef::new(&xs, &shape);
                    let mut conds: Vec<Cond<'_>> = masks
                        .iter()
                        .map(|(s, m)| Cond::mask(TensorRef::new(m, s)))
                        .collect();
                    conds[0] = if in_place {
                        Cond::isnan(Operand::in_place())
                    } else {
                        Cond::lt(xv, 0.0f32)
                    };
                    let vs: Vec<Choice<'_, u8>> = vals
                        .iter()
                        .map(|(s, v)| Choice::Tensor(TensorRef::new(bytemuck::cast_slice(v), s)))
                        .collect();
                    let mut out: Vec<f32> = xs.clone();
                    let dflt = if in_place {
                        Choice::Out
                    } else {
                        Choice::Tensor(TensorRef::new(bytemuck::cast_slice(&xs), &shape))
                    };
                    let ob: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
                    eng.select_n_tiled(
                        DType::F32,
                        &conds,
                        &vs,
                        dflt,
                        TensorMut::with_layout(ob, &shape, &ost, ooff),
                        Broadcast::Numpy,
                        tile,
                    )
                    .unwrap();
                    out.iter().map(|v| v.to_bits()).collect()
                };
                let whole = run(Some(usize::MAX));
                for tile in [1, 3, 7, 64] {
                    assert_eq!(
                        run(Some(tile)),
                        whole,
                        "{backend:?} shape {shape:?} tile {tile}"
                    );
                }
            }
        }
    }
}

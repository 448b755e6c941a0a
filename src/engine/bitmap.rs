//! Selects on bitmap conditions ([`Cond::bitmap`]): the bits (and'ed with their validity)
//! expanded into the byte masks every tier's kernels read — a block of [`BLOCK`] elements at a
//! time, in a stack buffer that stays in L1, when the call is flat (the output and every full
//! operand contiguous and of one shape, the rest single elements); the whole condition into a
//! scratch mask of its shape otherwise (broadcast, strided, other modes), which then broadcasts
//! as any mask does.

use super::Engine;
use super::config::Backend;
use super::exec::CondArg;
use super::validate::{Desc, Operand};
use crate::bits::{Bitmap, Column, NullRule, Validity, expand_words};
use crate::bitsel::{self, Isa, Side, ValidOut};
use crate::cond::{Cond, Repr};
use crate::dtype::DType;
use crate::error::{Error, Result, ShapeFmt};
use crate::shape::{Broadcast, check_shape, numel};
use crate::tensor::TensorRef;
use crate::tier::Tier;

/// Elements per expanded block: 4 KiB of mask, with each operand's block in L1 or L2.
pub(crate) const BLOCK: usize = 4096;

/// A bitmap condition's parts, checked against its shape: the bits, their validity and the
/// shape.
pub(crate) struct BitCond<'a> {
    pub bits: Bitmap<'a>,
    pub valid: Option<Bitmap<'a>>,
    pub shape: &'a [usize],
}

impl<'a> BitCond<'a> {
    /// The bitmap of `cond`, if it is one, checked: as many bits (and validity bits) as its
    /// shape has elements. `what` names the condition in errors.
    pub(crate) fn of(cond: &Cond<'a>, what: &'static str) -> Option<Result<BitCond<'a>>> {
        let Repr::Bits { bits, valid, shape } = cond.repr else {
            return None;
        };
        Some(check_shape(what, shape).and_then(|()| {
            let n = numel(shape);
            for (b, w) in [(Some(bits), "bits"), (valid, "validity bits")] {
                if let Some(b) = b
                    && b.len() != n
                {
                    return Err(Error::Layout {
                        what,
                        msg: format!(
                            "a bitmap of {} {w} for shape {} ({n} elements)",
                            b.len(),
                            ShapeFmt(shape)
                        ),
                    });
                }
            }
            Ok(BitCond { bits, valid, shape })
        }))
    }

    /// Elements `j..j + out.len()` as bytes 0 or 1 (a null is 0).
    pub(crate) fn expand(&self, j: usize, out: &mut [u8]) {
        match &self.valid {
            None => self.bits.expand(j, out),
            Some(v) => expand_words(out, |k| self.bits.word(j + k) & v.word(j + k)),
        }
    }

    /// The whole condition as a byte mask of its shape.
    pub(crate) fn to_mask(&self) -> Vec<u8> {
        let mut m = vec![0; numel(self.shape)];
        self.expand(0, &mut m);
        m
    }
}

/// How an operand of a flat call is read: `n` contiguous elements, or one.
fn flat_operand(o: &Operand<'_>, shape: &[usize], n: usize, w: usize, numpy: bool) -> Option<bool> {
    match o {
        Operand::Out => Some(true),
        Operand::Buf(b, d) if d.strides.is_none() && d.offset == 0 => {
            if d.shape == shape && b.len() / w >= n {
                Some(true)
            } else if numpy && d.shape.len() <= shape.len() && numel(d.shape) == 1 && b.len() >= w {
                Some(false)
            } else {
                None
            }
        }
        Operand::Buf(..) => None,
    }
}

/// Elements `j..j + sh[0]` of a flat operand (`full`), or its one element.
fn block<'x>(o: &Operand<'x>, full: bool, j: usize, sh: &'x [usize], w: usize) -> Operand<'x> {
    let m = sh[0];
    match o {
        Operand::Buf(b, _) if full => Operand::Buf(
            &b[j * w..(j + m) * w],
            Desc {
                len: m,
                shape: sh,
                strides: None,
                offset: 0,
            },
        ),
        Operand::Buf(b, _) => Operand::Buf(
            &b[..w],
            Desc {
                len: 1,
                shape: &[],
                strides: None,
                offset: 0,
            },
        ),
        Operand::Out => Operand::Out,
    }
}

impl Engine {
    /// Which kernels that read the bits themselves ([`bitsel`]) run this engine's flat selects
    /// on bitmaps: the AVX-512 ones (opmasks) for the static kernels and the tiers `Auto` and
    /// `Avx512` on hosts with AVX-512BW, the AVX2 ones (masks made in registers) for the tier
    /// `Avx2` and, on hosts without AVX-512BW, for the static kernels and `Auto`; none for the
    /// tier `Cranelift` (its kernels read expanded byte masks) and the interpreter.
    pub(super) fn reads_bits(&self) -> Option<Isa> {
        let best = || [Isa::Avx512, Isa::Avx2].into_iter().find(|i| i.available());
        match (self.config.backend, self.config.tier) {
            (Backend::Interp, _) | (Backend::Jit, Tier::Cranelift) => None,
            (Backend::Static, _) | (Backend::Jit, Tier::Auto) => best(),
            (Backend::Jit, Tier::Avx512) => Some(Isa::Avx512).filter(|i| i.available()),
            (Backend::Jit, Tier::Avx2) => Some(Isa::Avx2).filter(|i| i.available()),
        }
    }

    /// `out[i] = cond[i] && cond_valid[i] ? then[i] : else_[i]` over the `cond.len()` rows of
    /// `dtype`'s width, flat (row `i` of the output at bytes `i * w..`), and the output's
    /// validity in the same pass into `out_valid`, as [`crate::bits::select_validity`] writes
    /// it under `rule` (bit offset 0, the bits past the last row 0): one pass over the bits
    /// instead of a select and then a validity pass. Returns the number of null rows, or
    /// `None`, having written nothing, where this engine has no kernel that reads bits for
    /// the call (widths other than 1, 2, 4 and 8 bytes, no rows, a condition null in every row,
    /// the tier `Cranelift`, the interpreter, a host without AVX2): then
    /// [`Engine::select_bytes`] with [`Cond::bitmap`] and
    /// [`select_validity`](crate::bits::select_validity) compute the same.
    ///
    /// Errors ([`Error::Layout`], nothing written): a bitmap of another length than `cond`, a
    /// buffer too short for the rows (`out` `n * w` bytes, `out_valid` `n` bits, a
    /// [`Column::Rows`] `n` values, a [`Column::Scalar`] one).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::bits::{Bitmap, Column, NullRule, Validity};
    /// use selectjit::{DType, Engine};
    /// let engine = Engine::new();
    /// let cond = Bitmap::new(&[0b0101], 0, 4)?;
    /// let then = [1u32, 2, 3, 4].map(u32::to_le_bytes).concat();
    /// let then_valid = Bitmap::new(&[0b1110], 0, 4)?; // row 0 null
    /// let (mut out, mut valid) = ([0u8; 16], [0u8; 1]);
    /// if let Some(nulls) = engine.select_with_validity(
    ///     DType::U32,
    ///     cond,
    ///     Validity::AllValid,
    ///     Column::Rows(&then, Validity::Bits(then_valid)),
    ///     Column::Scalar(&9u32.to_le_bytes(), true),
    ///     NullRule::NullIsFalse,
    ///     &mut out,
    ///     &mut valid,
    /// )? {
    ///     assert_eq!(out, [1u32, 9, 3, 9].map(u32::to_le_bytes).concat()[..]);
    ///     assert_eq!((valid[0], nulls), (0b1110, 1));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn select_with_validity(
        &self,
        dtype: DType,
        cond: Bitmap<'_>,
        cond_valid: Validity<'_>,
        then: Column<'_>,
        else_: Column<'_>,
        rule: NullRule,
        out: &mut [u8],
        out_valid: &mut [u8],
    ) -> Result<Option<usize>> {
        let (w, n) = (dtype.width(), cond.len());
        let layout = |what: &'static str, msg: String| Err(Error::Layout { what, msg });
        // Each side as the kernel reads it (all its rows, or one value) and its validity.
        let mut sides = [(Side::Out, Validity::AllValid); 2];
        for (i, (what, c)) in [("then", then), ("else", else_)].into_iter().enumerate() {
            let (bytes, rows, v) = match c {
                Column::Rows(b, v) => (b, n, v),
                Column::Scalar(b, true) => (b, 1, Validity::AllValid),
                Column::Scalar(b, false) => (b, 1, Validity::AllNull),
            };
            if let Validity::Bits(b) = v
                && b.len() != n
            {
                let msg = format!("a validity bitmap of {} bits for {n} rows", b.len());
                return layout(what, msg);
            }
            let Some(b) = rows.checked_mul(w).and_then(|k| bytes.get(..k)) else {
                let msg = format!("{rows} values of {w} bytes, the buffer has {}", bytes.len());
                return layout(what, msg);
            };
            sides[i] = (
                match c {
                    Column::Rows(..) => Side::Full(b),
                    Column::Scalar(..) => Side::One(b),
                },
                v,
            );
        }
        if let Validity::Bits(b) = cond_valid
            && b.len() != n
        {
            let msg = format!("a validity bitmap of {} bits for {n} rows", b.len());
            return layout("cond validity", msg);
        }
        let Some(out) = n.checked_mul(w).and_then(|k| out.get_mut(..k)) else {
            let msg = format!("{n} values of {w} bytes, the buffer has {}", out.len());
            return layout("output", msg);
        };
        if out_valid.len() < n.div_ceil(8) {
            let msg = format!(
                "{n} bits need {} bytes, the buffer has {}",
                n.div_ceil(8),
                out_valid.len()
            );
            return layout("output validity", msg);
        }
        let valid = match cond_valid {
            Validity::AllValid => None,
            Validity::Bits(b) => Some(b),
            Validity::AllNull => return Ok(None),
        };
        let Some(isa) = self.reads_bits().filter(|_| n > 0) else {
            return Ok(None);
        };
        let [(t, tv), (e, ev)] = sides;
        let mut vo = ValidOut {
            then: tv,
            else_: ev,
            rule,
            out: out_valid,
            valid: 0,
        };
        if bitsel::select_flat(isa, w, cond, valid, t, e, out, Some(&mut vo)) {
            return Ok(Some(n - vo.valid));
        }
        Ok(None)
    }

    /// [`Engine::run_cond`]'s select of a bitmap condition (checked by [`BitCond::of`]);
    /// `not`: then and else trade places.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_bitmap(
        &self,
        dtype: DType,
        mode: Broadcast,
        cond: BitCond<'_>,
        not: bool,
        then: Operand<'_>,
        else_: Operand<'_>,
        out: &mut [u8],
        out_layout: (&[usize], Option<&[isize]>, usize),
    ) -> Result<()> {
        let w = dtype.width();
        let (oshape, ostrides, ooff) = out_layout;
        let n = numel(cond.shape);
        let numpy = mode == Broadcast::Numpy;
        let flat = self.config.backend != Backend::Interp
            && oshape == cond.shape
            && ostrides.is_none()
            && ooff == 0
            && oshape.len() <= crate::shape::MAX_RANK
            && n > 0
            && out.len() / w >= n;
        if flat
            && let (Some(tf), Some(ef)) = (
                flat_operand(&then, oshape, n, w, numpy),
                flat_operand(&else_, oshape, n, w, numpy),
            )
        {
            if let Some(isa) = self.reads_bits() {
                fn side<'x>(o: &Operand<'x>, full: bool) -> Side<'x> {
                    match *o {
                        Operand::Buf(b, _) if full => Side::Full(b),
                        Operand::Buf(b, _) => Side::One(b),
                        Operand::Out => Side::Out,
                    }
                }
                let (t, e) = (side(&then, tf), side(&else_, ef));
                let (t, e) = if not { (e, t) } else { (t, e) };
                let o = &mut out[..n * w];
                if bitsel::select_flat(isa, w, cond.bits, cond.valid, t, e, o, None) {
                    return Ok(());
                }
            }
            let mut buf = [0u8; BLOCK];
            let mut j = 0;
            while j < n {
                let m = (n - j).min(BLOCK);
                cond.expand(j, &mut buf[..m]);
                let sh = [m];
                self.run_bytes(
                    w,
                    Broadcast::Numpy,
                    CondArg::Mask(TensorRef::new(&buf[..m], &sh)),
                    not,
                    block(&then, tf, j, &sh, w),
                    block(&else_, ef, j, &sh, w),
                    &mut out[j * w..(j + m) * w],
                    (&sh, None, 0),
                )?;
                j += m;
            }
            return Ok(());
        }
        let mask = cond.to_mask();
        self.run_bytes(
            w,
            mode,
            CondArg::Mask(TensorRef::new(&mask, cond.shape)),
            not,
            then,
            else_,
            out,
            out_layout,
        )
    }
}

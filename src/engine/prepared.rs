//! Prepared calls: planned once for contiguous buffers of fixed shapes, their kernel bound.

use super::interp_backend::{CondBytes, interp_bytes};
use super::policy::Pick;
use super::validate::{Checked, Desc, Operand, PredSrc};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::kernel::abi::Ptrs;
use crate::plan::{OPS, Signature};
use crate::pred::Kind;
use crate::static_kernels;

/// A call planned once by [`crate::Engine::prepare`] (a mask) or
/// [`crate::Engine::prepare_cond`] (a predicate) for contiguous row-major buffers, with its
/// kernel bound. `Send + Sync`; it keeps its kernel alive even after the engine's cache evicts
/// it. A mask call runs with [`Prepared::run`], a predicate call with [`Prepared::run_cond`].
#[derive(Debug, Clone)]
pub struct Prepared {
    pub(super) dtype: DType,
    /// Elements of cond (0 for a predicate), then, else and out.
    pub(super) lens: [usize; 4],
    pub(super) out_shape: Vec<usize>,
    /// `None`: the output is empty.
    pub(super) sig: Option<Signature>,
    /// `None` with a signature: the static kernels run it. A tier trial (under `Auto`, while
    /// the class is measured) keeps deciding on the prepared call's own calls.
    pub(super) kernel: Option<Pick>,
    /// Strides over the output (cond or lhs, then, else, out, rhs), for an interpreter engine.
    pub(super) interp: Option<[Vec<isize>; OPS]>,
    /// `None`: the condition is a mask. Else the predicate's operands.
    pub(super) pred: Option<PredCall>,
}

/// The predicate of a prepared call: what [`Prepared::run_cond`] needs besides the plan.
#[derive(Debug, Clone)]
pub(super) struct PredCall {
    /// The canonical predicate (its dtype is the operands').
    pub(super) kind: Kind,
    /// `then` and `else` trade places (a negation, or a canonical form's): the plan, the
    /// kernel and the interpreter's strides have them traded already.
    pub(super) swap: bool,
    /// The kernel's lhs, and its rhs for a comparison.
    pub(super) lhs: PredArg,
    pub(super) rhs: Option<PredArg>,
    /// Each run-time buffer, in the order written (lhs, then rhs): its name and the elements it
    /// must hold.
    pub(super) inputs: Vec<(&'static str, usize)>,
}

/// Where a prepared predicate's operand comes from.
#[derive(Debug, Clone)]
pub(super) enum PredArg {
    /// The run-time buffer of this index in `run_cond`'s operands.
    Input(usize),
    /// A value fixed when the call was prepared (little-endian, its first `width` bytes).
    Value([u8; 16]),
}

impl Prepared {
    /// The element type the call was prepared for.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, DType, Engine};
    /// let prepared = Engine::new().prepare(DType::I16, &[4], &[4], &[4], Broadcast::Exact)?;
    /// assert_eq!(prepared.dtype(), DType::I16);
    /// let mut out = [0i32; 4]; // another element type is an error
    /// assert!(
    ///     prepared
    ///         .run(&[1; 4], &[1i32; 4], &[0i32; 4], &mut out)
    ///         .is_err()
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The output shape.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, DType, Engine};
    /// // pdpd: the output has then's shape; else [3] lands on dimension 1.
    /// let prepared = Engine::new().prepare(
    ///     DType::U8,
    ///     &[],
    ///     &[2, 3, 4],
    ///     &[3],
    ///     Broadcast::Pdpd { axis: 1 },
    /// )?;
    /// assert_eq!(prepared.out_shape(), &[2, 3, 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    /// Whether the call runs JIT code (otherwise the static kernels or the interpreter).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig};
    /// let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp))?;
    /// assert!(
    ///     !interp
    ///         .prepare(DType::F32, &[8], &[8], &[8], Broadcast::Exact)?
    ///         .is_jit()
    /// );
    /// let engine = Engine::new(); // a compiled kernel exactly when there is a code generator
    /// assert_eq!(
    ///     engine
    ///         .prepare(DType::F32, &[8], &[8], &[8], Broadcast::Exact)?
    ///         .is_jit(),
    ///     engine.tier().is_some()
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_jit(&self) -> bool {
        self.kernel.is_some()
    }

    /// Runs the prepared call on typed contiguous buffers. `T` must be the prepared dtype.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, DType, Engine};
    /// let prepared = Engine::new().prepare(DType::I32, &[3], &[3], &[], Broadcast::Numpy)?;
    /// let mut out = [0i32; 3];
    /// for (mask, expect) in [([1, 0, 1], [1, 0, 3]), ([0, 1, 0], [0, 2, 0])] {
    ///     prepared.run(&mask, &[1, 2, 3], &[0], &mut out)?;
    ///     assert_eq!(out, expect);
    /// }
    /// assert!(prepared.run(&[1, 0], &[1, 2, 3], &[0], &mut out).is_err()); // a cond too short
    /// # Ok(())
    /// # }
    /// ```
    pub fn run<T: Element>(
        &self,
        cond: &[u8],
        then: &[T],
        else_: &[T],
        out: &mut [T],
    ) -> Result<()> {
        self.check_dtype(T::DTYPE)?;
        self.run_bytes(
            cond,
            bytemuck::cast_slice(then),
            bytemuck::cast_slice(else_),
            bytemuck::cast_slice_mut(out),
        )
    }

    /// Runs the prepared call on raw little-endian element bytes.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, DType, Engine};
    /// let prepared = Engine::new().prepare(DType::U16, &[2], &[2], &[2], Broadcast::Exact)?;
    /// let mut out = [0u8; 4];
    /// prepared.run_bytes(&[0, 1], &[1, 0, 2, 0], &[7, 0, 8, 0], &mut out)?; // u16s, little-endian
    /// assert_eq!(out, [7, 0, 2, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_bytes(&self, cond: &[u8], then: &[u8], else_: &[u8], out: &mut [u8]) -> Result<()> {
        if self.pred.is_some() {
            return Err(Error::Invalid(
                "prepared for a predicate (Engine::prepare_cond): run it with run_cond or \
                 run_cond_bytes"
                    .to_string(),
            ));
        }
        if cond.len() < self.lens[0] {
            return Err(short("cond", cond.len(), self.lens[0]));
        }
        self.check_lens(then, else_, out)?;
        let Some(sig) = &self.sig else {
            return Ok(());
        };
        if self.interp.is_some() {
            self.interp(CondBytes::Mask(cond), then, else_, out);
            return Ok(());
        }
        let p = Ptrs {
            cond: cond.as_ptr(),
            then: then.as_ptr(),
            else_: else_.as_ptr(),
            out: out.as_mut_ptr(),
            rhs: std::ptr::null(),
        };
        // SAFETY: every buffer holds at least the elements of its contiguous shape (checked
        // above), which is what `sig` was planned from; `out` is a `&mut` borrow, so it
        // overlaps no input.
        unsafe { self.call(sig, p) };
        Ok(())
    }

    /// Runs a predicate call prepared by [`crate::Engine::prepare_cond`] on typed contiguous
    /// buffers: `operands` holds one buffer per [`crate::Operand::placeholder`] of the
    /// condition, in the order written (`lhs`, then `rhs`; none for an operand fixed as a
    /// value), each of the placeholder's dtype `C` (which may differ from the select's `T`) and
    /// holding at least its shape's elements. `T` must be the prepared dtype. On error (a dtype
    /// or a number of operands other than prepared, a buffer too short, a mask call) nothing is
    /// written.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, DType, Engine, Operand};
    /// // ReLU, prepared once: out = x > 0 ? x : 0 on 4 f32s.
    /// let x = Operand::placeholder(DType::F32, &[4]);
    /// let relu = Engine::new().prepare_cond(
    ///     DType::F32,
    ///     Cond::gt(x, 0.0f32),
    ///     &[4],
    ///     &[],
    ///     Broadcast::Numpy,
    /// )?;
    /// let mut out = [9.0f32; 4];
    /// for x in [[-1.0f32, 2.0, -0.0, 3.0], [5.0, -5.0, f32::NAN, 0.5]] {
    ///     relu.run_cond(&[&x], &x, &[0.0], &mut out)?; // x is the operand and `then`
    ///     let want = x.map(|v| if v > 0.0 { v } else { 0.0 });
    ///     assert_eq!(out.map(f32::to_bits), want.map(f32::to_bits));
    /// }
    /// // A buffer too short, or of another dtype, is an error, and nothing is written.
    /// let before = out;
    /// assert!(relu.run_cond(&[&[1.0f32; 3]], &[1.0; 4], &[0.0], &mut out).is_err());
    /// assert!(relu.run_cond(&[&[1i32; 4]], &[1.0; 4], &[0.0], &mut out).is_err());
    /// assert_eq!(out.map(f32::to_bits), before.map(f32::to_bits));
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_cond<C: Element, T: Element>(
        &self,
        operands: &[&[C]],
        then: &[T],
        else_: &[T],
        out: &mut [T],
    ) -> Result<()> {
        self.check_dtype(T::DTYPE)?;
        let pred = self.pred_call()?;
        if operands.len() != pred.inputs.len() {
            return Err(count_error(pred, operands.len()));
        }
        let d = pred.kind.dtype().unwrap_or(self.dtype);
        if !operands.is_empty() && C::DTYPE != d {
            return Err(Error::DType(format!(
                "the prepared predicate's operands are {d} but were given as {}",
                C::DTYPE
            )));
        }
        // At most two (checked above: as many as placeholders).
        let mut bytes: [&[u8]; 2] = [&[], &[]];
        for (b, o) in bytes.iter_mut().zip(operands) {
            *b = bytemuck::cast_slice(o);
        }
        self.run_cond_bytes(
            &bytes[..operands.len()],
            bytemuck::cast_slice(then),
            bytemuck::cast_slice(else_),
            bytemuck::cast_slice_mut(out),
        )
    }

    /// [`Prepared::run_cond`] on raw little-endian element bytes: each operand buffer holds
    /// elements of its placeholder's dtype, `then`, `else` and `out` elements of the prepared
    /// dtype; lengths are checked in elements.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, DType, Engine, Operand};
    /// // out = a < b ? 1 : 0 as u8, on two u16 operands of shape [2] given as bytes.
    /// let (a, b) = (
    ///     Operand::placeholder(DType::U16, &[2]),
    ///     Operand::placeholder(DType::U16, &[2]),
    /// );
    /// let p = Engine::new().prepare_cond(DType::U8, Cond::lt(a, b), &[], &[], Broadcast::Numpy)?;
    /// let mut out = [9u8; 2];
    /// // a = [1, 0x8000], b = [2, 1]: little-endian u16s.
    /// p.run_cond_bytes(&[&[1, 0, 0, 0x80], &[2, 0, 1, 0]], &[1], &[0], &mut out)?;
    /// assert_eq!(out, [1, 0]);
    /// let rhs_missing = p.run_cond_bytes(&[&[1, 0, 0, 0x80]], &[1], &[0], &mut out);
    /// assert!(rhs_missing.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_cond_bytes(
        &self,
        operands: &[&[u8]],
        then: &[u8],
        else_: &[u8],
        out: &mut [u8],
    ) -> Result<()> {
        let pred = self.pred_call()?;
        let d = pred.kind.dtype().unwrap_or(self.dtype);
        let cw = d.width();
        if operands.len() != pred.inputs.len() {
            return Err(count_error(pred, operands.len()));
        }
        for (&(what, need), b) in pred.inputs.iter().zip(operands) {
            if b.len() / cw < need {
                return Err(Error::Layout {
                    what,
                    msg: format!(
                        "buffer holds {} elements of {d}, the prepared call needs {need}",
                        b.len() / cw
                    ),
                });
            }
        }
        self.check_lens(then, else_, out)?;
        let Some(sig) = &self.sig else {
            return Ok(());
        };
        let (then, else_) = if pred.swap {
            (else_, then)
        } else {
            (then, else_)
        };
        fn bytes<'x>(a: &'x PredArg, operands: &[&'x [u8]], width: usize) -> &'x [u8] {
            match a {
                PredArg::Input(i) => operands[*i],
                PredArg::Value(v) => &v[..width],
            }
        }
        let l = bytes(&pred.lhs, operands, cw);
        let r = pred.rhs.as_ref().map(|a| bytes(a, operands, cw));
        if self.interp.is_some() {
            let src = |b| {
                PredSrc::Buf(
                    b,
                    Desc {
                        len: 0,
                        shape: &[],
                        strides: None,
                        offset: 0,
                    },
                )
            };
            self.interp(
                CondBytes::Pred(pred.kind, src(l), r.map(src)),
                then,
                else_,
                out,
            );
            return Ok(());
        }
        let p = Ptrs {
            cond: l.as_ptr(),
            then: then.as_ptr(),
            else_: else_.as_ptr(),
            out: out.as_mut_ptr(),
            rhs: r.map_or(std::ptr::null(), <[u8]>::as_ptr),
        };
        // SAFETY: every buffer holds at least the elements of its contiguous shape (checked
        // above: an operand buffer in elements of its dtype, a value one element), which is
        // what `sig` was planned from (then and else traded together with their buffers);
        // `out` is a `&mut` borrow, so it overlaps no input.
        unsafe { self.call(sig, p) };
        Ok(())
    }

    /// `dtype` is the prepared one.
    fn check_dtype(&self, dtype: DType) -> Result<()> {
        if dtype != self.dtype {
            return Err(Error::DType(format!(
                "prepared for {} but called with {dtype}",
                self.dtype
            )));
        }
        Ok(())
    }

    /// The predicate, or the error of a mask call run as a predicate call.
    fn pred_call(&self) -> Result<&PredCall> {
        self.pred.as_ref().ok_or_else(|| {
            Error::Invalid(
                "prepared for a mask (Engine::prepare): run it with run or run_bytes".to_string(),
            )
        })
    }

    /// Then, else and out hold the prepared elements.
    fn check_lens(&self, then: &[u8], else_: &[u8], out: &[u8]) -> Result<()> {
        let w = self.dtype.width();
        let have = [then.len() / w, else_.len() / w, out.len() / w];
        for (k, what) in ["then", "else", "output"].into_iter().enumerate() {
            if have[k] < self.lens[k + 1] {
                return Err(short(what, have[k], self.lens[k + 1]));
            }
        }
        Ok(())
    }

    /// Runs the interpreter on checked buffers (an interpreter engine's call).
    fn interp(&self, cond: CondBytes<'_>, then: &[u8], else_: &[u8], out: &mut [u8]) {
        let Some(st) = &self.interp else {
            return;
        };
        let w = self.dtype.width();
        let c = Checked {
            out: self.out_shape.iter().copied().collect(),
            st: std::array::from_fn(|k| st[k].iter().copied().collect()),
            off: [0; OPS],
        };
        let d = |len| Desc {
            len,
            shape: &[],
            strides: None,
            offset: 0,
        };
        interp_bytes(
            w,
            &c,
            cond,
            &Operand::Buf(then, d(then.len() / w)),
            &Operand::Buf(else_, d(else_.len() / w)),
            out,
        );
    }

    /// Runs the bound kernel (or the static kernels) over the whole call.
    ///
    /// # Safety
    /// Every pointer of `p` is the first element of a buffer holding at least the elements its
    /// contiguous shape needs, as `sig` was planned from, and `p.out` overlaps no input.
    unsafe fn call(&self, sig: &Signature, p: Ptrs) {
        match &self.kernel {
            // SAFETY: the function's contract.
            Some(Pick::Kernel(k)) => unsafe { k.run(sig, p, 0, sig.outer()) },
            Some(Pick::Trial(t)) => match t.winner() {
                // SAFETY: as above (once decided, the call is the chosen kernel's alone).
                Some(k) => unsafe { k.run(sig, p, 0, sig.outer()) },
                None => {
                    // SAFETY: as above. The engine takes the choice in at its next lookup.
                    t.call(&mut |k| unsafe { k.run(sig, p, 0, sig.outer()) });
                }
            },
            // SAFETY: the function's contract (the static kernels run a predicate in blocks).
            None => unsafe { static_kernels::run(sig, p, 0, sig.outer()) },
        }
    }
}

/// The error of a buffer that holds `have` elements where `need` are prepared.
fn short(what: &'static str, have: usize, need: usize) -> Error {
    Error::Layout {
        what,
        msg: format!("buffer holds {have} elements, the prepared call needs {need}"),
    }
}

/// The error of `given` operand buffers for a predicate that takes another number.
fn count_error(p: &PredCall, given: usize) -> Error {
    let names: Vec<&str> = p.inputs.iter().map(|&(n, _)| n).collect();
    Error::Invalid(format!(
        "the prepared predicate takes {} operand buffer(s), one per placeholder ({}); {given} \
         given",
        names.len(),
        if names.is_empty() {
            "none: its operands are values".to_string()
        } else {
            names.join(", ")
        }
    ))
}

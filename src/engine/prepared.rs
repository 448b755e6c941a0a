//! Prepared calls: planned once for contiguous buffers of fixed shapes, their kernel bound.

use super::interp::{CondBytes, interp_bytes};
use super::policy::Pick;
use super::validate::{Checked, Desc, Operand};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::kernel::abi::Ptrs;
use crate::kernels;
use crate::plan::Signature;

/// A call planned once by [`crate::Engine::prepare`] for contiguous row-major buffers, with its kernel
/// bound. `Send + Sync`; it keeps its kernel alive even after the engine's cache evicts it.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub(super) dtype: DType,
    /// Elements of cond, then, else and out.
    pub(super) lens: [usize; 4],
    pub(super) out_shape: Vec<usize>,
    /// `None`: the output is empty.
    pub(super) sig: Option<Signature>,
    /// `None` with a signature: the static kernels run it. A tier trial (under `Auto`, while
    /// the class is measured) keeps deciding on the prepared call's own calls.
    pub(super) kernel: Option<Pick>,
    /// Strides over the output, for an interpreter engine.
    pub(super) interp: Option<[Vec<isize>; 4]>,
}

impl Prepared {
    /// The element type the call was prepared for.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, DType, Engine};
    /// let prepared = Engine::new().prepare(DType::I16, &[4], &[4], &[4], Broadcast::None)?;
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
    ///         .prepare(DType::F32, &[8], &[8], &[8], Broadcast::None)?
    ///         .is_jit()
    /// );
    /// let engine = Engine::new(); // a compiled kernel exactly when there is a code generator
    /// assert_eq!(
    ///     engine
    ///         .prepare(DType::F32, &[8], &[8], &[8], Broadcast::None)?
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
        if T::DTYPE != self.dtype {
            return Err(Error::DType(format!(
                "prepared for {} but called with {}",
                self.dtype,
                T::DTYPE
            )));
        }
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
    /// let prepared = Engine::new().prepare(DType::U16, &[2], &[2], &[2], Broadcast::None)?;
    /// let mut out = [0u8; 4];
    /// prepared.run_bytes(&[0, 1], &[1, 0, 2, 0], &[7, 0, 8, 0], &mut out)?; // u16s, little-endian
    /// assert_eq!(out, [7, 0, 2, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_bytes(&self, cond: &[u8], then: &[u8], else_: &[u8], out: &mut [u8]) -> Result<()> {
        let w = self.dtype.width();
        let have = [cond.len(), then.len() / w, else_.len() / w, out.len() / w];
        for (k, what) in ["cond", "then", "else", "output"].into_iter().enumerate() {
            if have[k] < self.lens[k] {
                return Err(Error::Layout {
                    what,
                    msg: format!(
                        "buffer holds {} elements, the prepared call needs {}",
                        have[k], self.lens[k]
                    ),
                });
            }
        }
        let Some(sig) = &self.sig else {
            return Ok(());
        };
        if let Some(st) = &self.interp {
            let c = Checked {
                out: self.out_shape.iter().copied().collect(),
                st: std::array::from_fn(|k| match st.get(k) {
                    Some(s) => s.iter().copied().collect(),
                    None => smallvec::smallvec![0; self.out_shape.len()],
                }),
                off: [0; 5],
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
                CondBytes::Mask(cond),
                &Operand::Buf(then, d(have[1])),
                &Operand::Buf(else_, d(have[2])),
                out,
            );
            return Ok(());
        }
        let p = Ptrs {
            cond: cond.as_ptr(),
            then: then.as_ptr(),
            else_: else_.as_ptr(),
            out: out.as_mut_ptr(),
            rhs: std::ptr::null(),
        };
        match &self.kernel {
            // SAFETY: every buffer holds at least the elements of its contiguous shape (checked
            // above), which is what `sig` was planned from; `out` is a `&mut` borrow, so it
            // overlaps no input.
            Some(Pick::Kernel(k)) => unsafe { k.run(sig, p, 0, sig.outer()) },
            #[cfg(feature = "jit")]
            Some(Pick::Trial(t)) => match t.winner() {
                // SAFETY: as above (once decided, the call is the chosen kernel's alone).
                Some(k) => unsafe { k.run(sig, p, 0, sig.outer()) },
                None => {
                    // SAFETY: as above. The engine takes the choice in at its next lookup.
                    t.call(&mut |k| unsafe { k.run(sig, p, 0, sig.outer()) });
                }
            },
            // SAFETY: as above.
            None => unsafe { kernels::run(sig, p, 0, sig.outer()) },
        }
        Ok(())
    }
}

//! The compares of a fused predicate ([`super::pred`]): the emitter's helpers that load a
//! predicate's operands and set the flags from them.

use iced_x86::code_asm::AsmMemoryOperand;

use super::emitter::{EmitError, Emitter};
use super::pred::Pred;
use super::regs::Cc;
use crate::jit::x86::level::Level;
use crate::plan::{COND, RHS};

impl Emitter<'_> {
    /// The predicate (a bug to ask for one in a mask kernel).
    pub(super) fn p(&self) -> Result<Pred, EmitError> {
        self.pred
            .ok_or_else(|| super::emitter::bug("predicate code in a mask kernel"))
    }

    /// Address of element `r8 + off` of lhs (`COND`) or rhs (`RHS`) along a vector row: the
    /// operand's row start when it is constant along the row.
    pub(super) fn pelem(&self, op: usize, off: i64) -> Result<AsmMemoryOperand, EmitError> {
        use iced_x86::code_asm::*;
        let p = self.p()?;
        let (base, k) = if op == COND { (rdi, 0) } else { (r12, 1) };
        if p.bcast[k] {
            return Ok(ptr(base));
        }
        Ok(ptr(base + r8 * p.cw as u32 + off * p.cw as i64))
    }

    /// Sets the flags from the predicate on one element of lhs at `lhs` and of rhs at `rhs`
    /// (ignored by tests); returns the condition under which the element is else's. Uses
    /// xmm0-xmm3 (AVX2) or xmm16-xmm20 and k1-k3 (AVX-512), no general register.
    pub(super) fn pred_scalar(
        &mut self,
        lhs: AsmMemoryOperand,
        rhs: AsmMemoryOperand,
    ) -> Result<Cc, EmitError> {
        match self.level {
            Level::Avx2 => self.lanes_scalar(lhs, rhs),
            Level::Avx512 => self.k_scalar(lhs, rhs),
        }
    }

    /// The predicate's loop-invariant registers (constants, operands splatted once).
    pub(super) fn pred_invariants(&mut self) -> Result<(), EmitError> {
        match self.level {
            Level::Avx2 => self.lanes_invariants(),
            Level::Avx512 => self.k_invariants(),
        }
    }

    /// Splats of lhs and rhs for a row along which they are constant, when they change from
    /// row to row.
    pub(super) fn pred_row_splats(&mut self) -> Result<(), EmitError> {
        let Some(p) = self.pred else { return Ok(()) };
        for (k, op) in [(0, COND), (1, RHS)] {
            if (k == 0 || p.binary) && p.bcast[k] && !p.invariant[k] {
                self.pred_splat(op)?;
            }
        }
        Ok(())
    }

    /// Splats of lhs and rhs constant over the whole kernel.
    pub(super) fn pred_invariant_splats(&mut self) -> Result<(), EmitError> {
        let p = self.p()?;
        if !matches!(self.shape, crate::plan::RowShape::Select { .. }) {
            return Ok(());
        }
        for (k, op) in [(0, COND), (1, RHS)] {
            if (k == 0 || p.binary) && p.invariant[k] {
                self.pred_splat(op)?;
            }
        }
        Ok(())
    }

    fn pred_splat(&mut self, op: usize) -> Result<(), EmitError> {
        match self.level {
            Level::Avx2 => self.lanes_splat(op),
            Level::Avx512 => self.k_splat(op),
        }
    }
}

//! The compares of a fused predicate ([`super::pred`]): the emitter's helpers that address a
//! predicate's operands and splat them, over the ISA's compares ([`VecIsa::pred_scalar`],
//! [`VecIsa::pred_splat`]).

use iced_x86::code_asm::AsmMemoryOperand;

use super::emitter::{EmitError, Emitter};
use super::isa::VecIsa;
use super::pred::Pred;
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

    /// Splats of lhs and rhs for a row along which they are constant, when they change from
    /// row to row.
    pub(super) fn pred_row_splats<I: VecIsa>(&mut self) -> Result<(), EmitError> {
        let Some(p) = self.pred else { return Ok(()) };
        for (k, op) in [(0, COND), (1, RHS)] {
            if (k == 0 || p.binary) && p.bcast[k] && !p.invariant[k] {
                I::pred_splat(self, op)?;
            }
        }
        Ok(())
    }

    /// Splats of lhs and rhs constant over the whole kernel (the end of an ISA's
    /// [`VecIsa::pred_invariants`]).
    pub(super) fn pred_invariant_splats<I: VecIsa>(&mut self) -> Result<(), EmitError> {
        let p = self.p()?;
        if !matches!(self.shape, crate::plan::RowShape::Select { .. }) {
            return Ok(());
        }
        for (k, op) in [(0, COND), (1, RHS)] {
            if (k == 0 || p.binary) && p.invariant[k] {
                I::pred_splat(self, op)?;
            }
        }
        Ok(())
    }
}

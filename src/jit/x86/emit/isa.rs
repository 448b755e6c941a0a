//! What differs between the vector ISAs ([`VecIsa`]), and the block geometry they share.

use iced_x86::code_asm::*;

use super::emitter::{Bounds, EmitError, Emitter, Label, R};
use super::regs::Cc;
use crate::plan::THEN;

/// 32-byte vectors per main-loop block: two lines of output.
pub(super) const UNROLL: usize = 4;
/// Bytes per vector.
pub(super) const VBYTES: u64 = 32;
/// Bytes per cache line.
pub(super) const LINE: u64 = 64;
/// Four-way kernels ([`crate::Variant::four_way`]) walk this many parts of a non-temporal row
/// at once (see [`Emitter::parts_loop`]).
pub(super) const PARTS: u64 = 4;
/// Bytes of output per part at least: parts of two blocks gained nothing on a Zen 4 host.
pub(super) const PART_MIN: u64 = 1024;
/// Rows of at least this many bytes of output walk parts (a line more for the head).
pub(super) const PARTS_MIN_ROW: u64 = PARTS * PART_MIN + LINE;
/// The width-16 selector register.
pub(super) const SEL: usize = 12;

/// The register that holds the splat of then (ymm14) or else (ymm13).
pub(super) fn splat_reg(op: usize) -> usize {
    if op == THEN { 14 } else { 13 }
}

/// What differs between the vector ISAs. `r8` is the element (or byte) index in the row, `r9`
/// the row length in elements (`r10` in bytes for copies); `rax`, `r10`, `r11` are scratch.
///
/// The emitter's code is generic over it (`fn f<I: VecIsa>`), like oneDNN's `jit_uni_*`
/// kernels over their ISA; `super::on_isa` picks the ISA of a [`Level`] once, where a
/// kernel (or a question about one) enters the emitter.
///
/// [`Level`]: crate::jit::x86::level::Level
pub(super) trait VecIsa {
    /// The ISA's own loop-invariant registers.
    fn invariants(e: &mut Emitter) -> R;
    /// Whether the ISA reads masks of `w`-byte elements from packed cond bits.
    fn packs(w: usize) -> bool;
    /// `r10d` = the mask bits of the 32 cond bytes at `src` (bit `i` for byte `i`), set where
    /// a block's blend takes its memory (or second) operand.
    fn cond_bits(e: &mut Emitter, src: AsmMemoryOperand) -> R;
    /// Whether main-loop blocks of `w`-byte elements can run as zmm vectors
    /// ([`crate::Variant::wide`]).
    fn wide(w: usize) -> bool;
    /// Whether main-loop blocks test their cond bytes for all non-zero / all zero first (and
    /// then copy one input).
    fn uniform(w: usize) -> bool;
    /// `vecs` (1, 2 or 4) vectors of output from element `r8`: masks, blends and stores
    /// (non-temporal with `nt`). With `uniform`, first jumps to its labels when the block's
    /// cond bytes are all non-zero / all zero.
    fn block(e: &mut Emitter, vecs: usize, nt: bool, uniform: Option<(Label, Label)>) -> R;
    /// The rest of a row after its main loop (`r8` elements done: a multiple of the block, 0
    /// when the row is shorter than one), with ordinary stores; ends at `done`.
    fn tail(e: &mut Emitter, n: Bounds, done: Label) -> R;
    /// `rax` (1 ..= `max`, less than a line) elements from `r8` with ordinary stores; keeps
    /// `r8` and `r9`.
    fn short(e: &mut Emitter, max: u64) -> R;
    /// Row copies: the bytes from `r8` to `r10` after the block loop, ordinary stores; ends at
    /// `done`. `src`: the source row, or `None` to fill with the splat in `sr`.
    fn copy_tail(
        e: &mut Emitter,
        src: Option<AsmRegister64>,
        sr: usize,
        b: Bounds,
        done: Label,
    ) -> R;
    /// `rax` (1 ..= `max`, less than a line) bytes from `r8` with ordinary stores; keeps `r8`
    /// and `r10`.
    fn copy_short(e: &mut Emitter, src: Option<AsmRegister64>, sr: usize, max: u64) -> R;
    /// Sets the flags from the predicate on one element of lhs at `lhs` and of rhs at `rhs`
    /// (ignored by tests); returns the condition under which the element is else's. Uses
    /// xmm0-xmm3 (AVX2) or xmm16-xmm20 and k1-k3 (AVX-512), no general register.
    fn pred_scalar(
        e: &mut Emitter,
        lhs: AsmMemoryOperand,
        rhs: AsmMemoryOperand,
    ) -> Result<Cc, EmitError>;
    /// The predicate's loop-invariant registers (constants, operands splatted once: see
    /// [`Emitter::pred_invariant_splats`]).
    fn pred_invariants(e: &mut Emitter) -> R;
    /// Splats lhs (`COND`) or rhs (`RHS`) from its row start, in compare lanes.
    fn pred_splat(e: &mut Emitter, op: usize) -> R;
}

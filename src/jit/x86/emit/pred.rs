//! Fused predicates: kernels whose choice per element is a comparison (`lhs == rhs`,
//! `lhs < rhs`, `lhs <= rhs`) or a test (`isnan`, `isinf`, `isfinite`) computed in registers
//! from the operands, never stored as a mask. The planner hands every predicate over in that
//! canonical form (`>` and `>=` swapped to `<` and `<=`, negations by swapping then and else).
//!
//! What the rows do with a predicate (the lane masks of AVX2 are in `lanes.rs`, the opmasks of
//! AVX-512 in `kmask.rs`):
//!
//! * **vector rows**: each vector of output gets its mask from compares of the operands'
//!   elements (loaded from memory, or a splat when an operand is constant along the row: a
//!   scalar `rhs`, or `q` in a causal mask `k > q`), with the mask's polarity (set where the
//!   predicate holds, or where it does not) as the compare gives it; the blend takes then or
//!   else accordingly. When the compared dtype's width differs from the selected one, AVX2
//!   packs lane masks (`vpackssdw` / `vpacksswb` and one permute) or compares widened operands
//!   (`vpmovsx` / `vpmovzx`, `vcvtps2pd`), AVX-512 concatenates or slices opmask bits;
//! * **row copies** (both operands constant along the row): the predicate once, on the row's
//!   first elements, then a copy of the chosen input;
//! * **strided rows**: one element at a time, the predicate on a broadcast element, its result
//!   in the flags, the chosen input's address picked with `cmov` (see `nest.rs`).
//!
//! Semantics are numpy's (`crate::pred`): floats compare with the ordered quiet predicates
//! (`EQ_OQ`, `LT_OQ`, `LE_OQ`: false on a NaN, no invalid-operation flag for a quiet NaN; the
//! signalling ones give the same bits), so -0.0 == 0.0; f16 and bf16 compare as 16-bit integer
//! keys (the magnitude, negated where the sign is set: -0.0 and 0.0 both 0) with the elements
//! that are NaN taken out (AVX-512 always, AVX2 where the selected elements are at most 2 bytes
//! wide), else after an exact widening to f32 (`vcvtph2ps`, or a shift into the upper half of a
//! dword); unsigned integers
//! compare signed after flipping their sign bits (AVX2) or with `vpcmpu*` (AVX-512); bool
//! operands compare as "is non-zero"; isnan is an unordered self-compare (AVX2) or `vfpclass`
//! (AVX-512), isinf / isfinite compare the magnitude with infinity (AVX2) or classify it.
//! Integer and bool tests are constants: the mask is a constant register.
//!
//! In place: out may be then or else, and the compared operands may be that same buffer (an
//! in-place ReLU `where(x > 0, x, 0)` with `out = x`). Every element's operands are read before
//! its output is written. AVX2 rows finish with an overlapping last step that selects some
//! elements a second time, reading operands already overwritten; that gives the same bytes:
//! with out == then, an element the first pass took from then was not changed at all, so the
//! second pass sees the first pass's inputs and decides alike; one it took from else now holds
//! else's value, and the second pass writes either then's value (which is out's, that is
//! else's) or else's. With out == else the same holds with the roles swapped. (A kernel's
//! output never aliases an input that is neither then nor else: the engine's contract.)

//!
//! This file describes a kernel's predicate ([`Pred`]); `pred_emit.rs` emits its compares.

use super::regs::Cc;
use crate::dtype::DType;
use crate::plan::{COND, RHS, Signature};
use crate::pred::{Canon, Kind, TestOp};

/// How a compared dtype's values compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Num {
    /// Any non-zero byte is 1.
    Bool,
    /// Two's complement integers.
    Int {
        signed: bool,
    },
    F16,
    BF16,
    F32,
    F64,
}

/// The canonical predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum POp {
    Eq,
    Lt,
    Le,
    IsNan,
    IsInf,
    IsFinite,
}

/// Which input a set mask lane (or opmask bit) selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pol {
    /// Set where the predicate holds: then.
    Then,
    /// Set where it does not: else.
    Else,
}

impl Pol {
    pub(super) fn flip(self) -> Pol {
        match self {
            Pol::Then => Pol::Else,
            Pol::Else => Pol::Then,
        }
    }

    /// The condition "take else" after a test of a mask of this polarity (ZF: the mask is 0).
    pub(super) fn take_else(self) -> Cc {
        match self {
            Pol::Then => Cc::Z,
            Pol::Else => Cc::NZ,
        }
    }
}

/// A kernel's predicate.
#[derive(Clone, Copy, Debug)]
pub(in crate::jit::x86) struct Pred {
    pub op: POp,
    pub num: Num,
    /// Bytes per element of lhs and rhs in memory.
    pub cw: usize,
    /// Whether there is an rhs (a comparison).
    pub binary: bool,
    /// lhs, rhs: stride 0 along the row (the row splats it).
    pub bcast: [bool; 2],
    /// lhs, rhs: every stride 0 (splatted once per kernel).
    pub invariant: [bool; 2],
}

/// Whether the x86 tiers fuse predicates of `kind` (complex dtypes are left to the engine's
/// blocked path).
pub(in crate::jit::x86) fn supported(kind: Kind) -> bool {
    match kind.dtype() {
        None => true,
        Some(d) => !matches!(d, DType::Complex64 | DType::Complex128),
    }
}

impl Pred {
    /// The predicate of `sig`, `None` for a mask (or a dtype not covered).
    pub(super) fn of(sig: &Signature) -> Option<Pred> {
        let (op, d) = match sig.cond {
            Kind::Mask => return None,
            Kind::Cmp(c, d) => (
                match c {
                    Canon::Eq => POp::Eq,
                    Canon::Lt => POp::Lt,
                    Canon::Le => POp::Le,
                },
                d,
            ),
            Kind::Test(t, d) => (
                match t {
                    TestOp::IsNan => POp::IsNan,
                    TestOp::IsInf => POp::IsInf,
                    TestOp::IsFinite => POp::IsFinite,
                },
                d,
            ),
        };
        let num = match d {
            DType::Bool => Num::Bool,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => Num::Int { signed: true },
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => Num::Int { signed: false },
            DType::F16 => Num::F16,
            DType::BF16 => Num::BF16,
            DType::F32 => Num::F32,
            DType::F64 => Num::F64,
            DType::Complex64 | DType::Complex128 => return None,
        };
        let binary = sig.cond.binary();
        let ops = [COND, RHS];
        Some(Pred {
            op,
            num,
            cw: d.width(),
            binary,
            bcast: ops.map(|op| sig.inner_stride(op) == 0),
            invariant: ops.map(|op| sig.strides[op].iter().all(|&s| s == 0)),
        })
    }

    /// The lane width in bytes of a compare without widening: the dtype's, f32's for f16 and
    /// bf16.
    pub(super) fn base(&self) -> usize {
        match self.num {
            Num::F16 | Num::BF16 => 4,
            Num::Bool | Num::Int { .. } | Num::F32 | Num::F64 => self.cw,
        }
    }

    /// The bits of +infinity of a half-width float (f16, bf16), `None` for other dtypes. With
    /// the sign bit clear a half is NaN exactly when its bits exceed these.
    pub(super) fn half_inf(&self) -> Option<u16> {
        match self.num {
            Num::F16 => Some(0x7c00),
            Num::BF16 => Some(0x7f80),
            Num::Bool | Num::Int { .. } | Num::F32 | Num::F64 => None,
        }
    }

    /// Whether the values compare as floats (after widening).
    pub(super) fn float(&self) -> bool {
        matches!(self.num, Num::F16 | Num::BF16 | Num::F32 | Num::F64)
    }

    /// The value of a test that is constant for the dtype (integers and bool: isnan and isinf
    /// false, isfinite true).
    pub(super) fn constant(&self) -> Option<bool> {
        match self.op {
            POp::Eq | POp::Lt | POp::Le => None,
            POp::IsNan | POp::IsInf | POp::IsFinite if self.float() => None,
            POp::IsFinite => Some(true),
            POp::IsNan | POp::IsInf => Some(false),
        }
    }

    /// Whether unsigned integers compared at their own width need their sign bits flipped to
    /// compare signed (AVX2's ordered compares).
    pub(super) fn flips(&self) -> bool {
        self.num == (Num::Int { signed: false }) && matches!(self.op, POp::Lt | POp::Le)
    }
}

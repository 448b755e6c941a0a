//! Register tables, so that code can pick vector registers by number at every width, and the
//! condition codes of branches and conditional moves.

use iced_x86::code_asm::*;

/// `xmm0` .. `xmm31`.
pub(super) const XMM: [AsmRegisterXmm; 32] = [
    xmm0, xmm1, xmm2, xmm3, xmm4, xmm5, xmm6, xmm7, xmm8, xmm9, xmm10, xmm11, xmm12, xmm13, xmm14,
    xmm15, xmm16, xmm17, xmm18, xmm19, xmm20, xmm21, xmm22, xmm23, xmm24, xmm25, xmm26, xmm27,
    xmm28, xmm29, xmm30, xmm31,
];

/// `ymm0` .. `ymm31`.
pub(super) const YMM: [AsmRegisterYmm; 32] = [
    ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12, ymm13, ymm14,
    ymm15, ymm16, ymm17, ymm18, ymm19, ymm20, ymm21, ymm22, ymm23, ymm24, ymm25, ymm26, ymm27,
    ymm28, ymm29, ymm30, ymm31,
];

/// `zmm0` .. `zmm31`.
pub(super) const ZMM: [AsmRegisterZmm; 32] = [
    zmm0, zmm1, zmm2, zmm3, zmm4, zmm5, zmm6, zmm7, zmm8, zmm9, zmm10, zmm11, zmm12, zmm13, zmm14,
    zmm15, zmm16, zmm17, zmm18, zmm19, zmm20, zmm21, zmm22, zmm23, zmm24, zmm25, zmm26, zmm27,
    zmm28, zmm29, zmm30, zmm31,
];

/// `k0` .. `k7`.
pub(super) const K: [AsmRegisterK; 8] = [k0, k1, k2, k3, k4, k5, k6, k7];

/// A condition of `jcc` and `cmovcc` (its nibble in the opcode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Cc(pub u8);

impl Cc {
    /// ZF set (`e` / `z`).
    pub(super) const Z: Cc = Cc(0x4);
    /// ZF clear (`ne` / `nz`).
    pub(super) const NZ: Cc = Cc(0x5);
}

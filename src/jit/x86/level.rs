//! The instruction-set levels of the x86 tier.

use crate::tier::Tier;

/// Instruction-set level of the x86 tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// 256-bit ymm vectors (AVX2, with BMI2).
    Avx2,
    /// 512-bit zmm vectors and opmask registers (AVX-512 F, BW, VL, DQ, with BMI2).
    Avx512,
}

impl Level {
    /// The tier of this level.
    pub fn tier(self) -> Tier {
        match self {
            Level::Avx2 => Tier::Avx2,
            Level::Avx512 => Tier::Avx512,
        }
    }

    /// The CPU features kernels of this level use.
    pub fn required_features(self) -> &'static [&'static str] {
        self.tier().required_features()
    }

    /// Whether this CPU runs kernels of this level.
    pub fn available(self) -> bool {
        self.tier().available()
    }
}

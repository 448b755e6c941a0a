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
    ///
    /// ```
    /// use selectjit::Tier;
    /// use selectjit::codegen::x86::Level;
    /// assert_eq!(Level::Avx512.tier(), Tier::Avx512);
    /// assert_eq!(Level::Avx2.tier().required_features(), ["avx2", "bmi2"]);
    /// ```
    pub fn tier(self) -> Tier {
        match self {
            Level::Avx2 => Tier::Avx2,
            Level::Avx512 => Tier::Avx512,
        }
    }

    /// Whether this CPU runs kernels of this level.
    ///
    /// ```
    /// use selectjit::codegen::x86::Level;
    /// // AVX-512 hosts run AVX2 kernels too.
    /// if Level::Avx512.available() {
    ///     assert!(Level::Avx2.available());
    /// }
    /// assert_eq!(Level::Avx2.available(), selectjit::Tier::Avx2.available());
    /// ```
    pub fn available(self) -> bool {
        self.tier().available()
    }
}

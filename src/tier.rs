//! Code-generation tiers: which generator turns a signature into machine code.

use crate::error::{Error, Result};

/// A code generator. `Auto` lets the engine choose among the tiers the host runs (AVX-512 and
/// AVX2 on x86-64, machine code emitted directly; Cranelift on every architecture Cranelift
/// targets) by measuring them on real calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Tier {
    /// The best tier this host runs.
    #[default]
    Auto,
    /// Cranelift IR compiled by Cranelift's backend for the host (128-bit vectors on x86-64).
    Cranelift,
    /// x86-64 machine code with 256-bit AVX2 vectors.
    Avx2,
    /// x86-64 machine code with 512-bit AVX-512 vectors and opmask registers.
    Avx512,
}

impl Tier {
    /// Every tier, `Auto` first.
    pub const ALL: [Tier; 4] = [Tier::Auto, Tier::Cranelift, Tier::Avx2, Tier::Avx512];
    /// The concrete tiers (what `Auto` resolves to), from the most portable.
    pub const CONCRETE: [Tier; 3] = [Tier::Cranelift, Tier::Avx2, Tier::Avx512];

    /// The name used on the command line, in `SELECTJIT_TIER` and in messages.
    pub const fn name(self) -> &'static str {
        match self {
            Tier::Auto => "auto",
            Tier::Cranelift => "cranelift",
            Tier::Avx2 => "avx2",
            Tier::Avx512 => "avx512",
        }
    }

    /// The CPU features kernels of this tier use (x86 tiers; none for the others).
    pub fn required_features(self) -> &'static [&'static str] {
        match self {
            Tier::Avx2 => &["avx2", "bmi2"],
            Tier::Avx512 => &["avx512f", "avx512bw", "avx512vl", "avx512dq", "bmi2"],
            Tier::Auto | Tier::Cranelift => &[],
        }
    }

    /// Whether this host can run kernels of this tier (`Auto`: whether it runs any tier). A
    /// build without the `jit` feature runs none.
    pub fn available(self) -> bool {
        match self {
            Tier::Auto => Tier::CONCRETE.into_iter().any(Tier::available),
            Tier::Cranelift => cfg!(feature = "jit"),
            Tier::Avx2 | Tier::Avx512 => cfg!(feature = "jit") && self.host_has_features(),
        }
    }

    /// Whether the CPU has every feature in [`Tier::required_features`].
    fn host_has_features(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            self.required_features().iter().all(|&f| match f {
                "avx2" => has!("avx2"),
                "bmi2" => has!("bmi2"),
                "avx512f" => has!("avx512f"),
                "avx512bw" => has!("avx512bw"),
                "avx512vl" => has!("avx512vl"),
                "avx512dq" => has!("avx512dq"),
                _ => false,
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Why this host cannot run the tier, or `None` when it can.
    pub fn unavailable_reason(self) -> Option<String> {
        if self.available() {
            return None;
        }
        if !cfg!(feature = "jit") {
            return Some(format!(
                "tier {}: this build of selectjit generates no code (its `jit` feature is off)",
                self.name()
            ));
        }
        if !cfg!(target_arch = "x86_64") {
            return Some(format!("tier {} needs an x86-64 host", self.name()));
        }
        Some(format!(
            "tier {} needs the CPU features {}, which this host lacks",
            self.name(),
            self.required_features().join(" ")
        ))
    }

    /// The tiers this host runs, the most portable first.
    pub fn host_tiers() -> Vec<Tier> {
        Tier::CONCRETE
            .into_iter()
            .filter(|t| t.available())
            .collect()
    }

    /// The widest tier this host runs (`None` in a build without code generation). This is
    /// what `Auto` prefers before it has measured anything.
    pub fn best() -> Option<Tier> {
        Tier::host_tiers().pop()
    }

    /// The tier named by `SELECTJIT_TIER`, `Auto` when it is unset or empty. An unknown name is an
    /// error.
    pub fn from_env() -> Result<Tier> {
        crate::env::tier()
    }

    /// Whether kernels of this tier are x86-64 machine code emitted by the x86 generator.
    pub fn is_x86(self) -> bool {
        matches!(self, Tier::Avx2 | Tier::Avx512)
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Tier {
    type Err = Error;
    fn from_str(s: &str) -> Result<Tier> {
        Tier::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown tier '{s}' (expected auto, cranelift, avx2 or avx512)"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_auto_resolves_to_an_available_tier() {
        for t in Tier::ALL {
            assert_eq!(t.name().parse::<Tier>().unwrap(), t);
        }
        assert!("avx1024".parse::<Tier>().is_err());
        if cfg!(feature = "jit") {
            let best = Tier::best().expect("a jit build runs a tier");
            assert_ne!(best, Tier::Auto);
            assert!(best.available() && Tier::Auto.available());
            assert!(Tier::Cranelift.available());
        } else {
            assert_eq!(Tier::best(), None);
            assert!(
                Tier::unavailable_reason(Tier::Auto)
                    .unwrap()
                    .contains("`jit` feature")
            );
        }
        for t in Tier::CONCRETE {
            assert_eq!(t.available(), t.unavailable_reason().is_none(), "{t}");
        }
    }
}

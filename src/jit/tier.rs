//! Code-generation tiers: which generator turns a signature into machine code.

use crate::error::{Error, Result};

/// The environment variable that picks the tier of engines built with default settings.
pub const TIER_ENV: &str = "SELECTJIT_TIER";

/// A code generator. `Auto` picks the best one the host runs: AVX-512, then AVX2 (both x86-64
/// only, machine code emitted directly), then Cranelift (every architecture Cranelift targets).
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

    /// Whether this host can run kernels of this tier (`Auto` always can).
    pub fn available(self) -> bool {
        match self {
            Tier::Auto | Tier::Cranelift => true,
            #[cfg(target_arch = "x86_64")]
            Tier::Avx2 => super::x86::Level::Avx2.host_supports(),
            #[cfg(target_arch = "x86_64")]
            Tier::Avx512 => super::x86::Level::Avx512.host_supports(),
            #[cfg(not(target_arch = "x86_64"))]
            Tier::Avx2 | Tier::Avx512 => false,
        }
    }

    /// Why this host cannot run the tier, or `None` when it can.
    pub fn unavailable_reason(self) -> Option<String> {
        if self.available() {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        let need = match self {
            Tier::Avx2 => super::x86::Level::Avx2.required_features(),
            _ => super::x86::Level::Avx512.required_features(),
        };
        #[cfg(target_arch = "x86_64")]
        return Some(format!(
            "tier {} needs the CPU features {}, which this host lacks",
            self.name(),
            need.join(" ")
        ));
        #[cfg(not(target_arch = "x86_64"))]
        Some(format!("tier {} needs an x86-64 host", self.name()))
    }

    /// The best tier this host runs.
    pub fn best() -> Tier {
        [Tier::Avx512, Tier::Avx2]
            .into_iter()
            .find(|t| t.available())
            .unwrap_or(Tier::Cranelift)
    }

    /// `Auto` resolved to [`Tier::best`]; other tiers as they are.
    pub fn resolve(self) -> Tier {
        match self {
            Tier::Auto => Tier::best(),
            t => t,
        }
    }

    /// The tier named by `SELECTJIT_TIER`, `Auto` when it is unset or empty. An unknown name is an
    /// error.
    pub fn from_env() -> Result<Tier> {
        match std::env::var(TIER_ENV) {
            Ok(v) if !v.trim().is_empty() => v.trim().parse(),
            _ => Ok(Tier::Auto),
        }
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
        let best = Tier::Auto.resolve();
        assert_ne!(best, Tier::Auto);
        assert!(best.available());
        assert!(Tier::Cranelift.available());
        for t in Tier::CONCRETE {
            assert_eq!(t.available(), t.unavailable_reason().is_none(), "{t}");
        }
    }
}

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
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::Tier;
    /// assert_eq!(Tier::Avx512.name(), "avx512");
    /// assert_eq!("cranelift".parse::<Tier>()?, Tier::Cranelift);
    /// # Ok(())
    /// # }
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Tier::Auto => "auto",
            Tier::Cranelift => "cranelift",
            Tier::Avx2 => "avx2",
            Tier::Avx512 => "avx512",
        }
    }

    /// The CPU features kernels of this tier use (x86 tiers; none for the others).
    ///
    /// ```
    /// use selectjit::Tier;
    /// assert_eq!(Tier::Avx2.required_features(), ["avx2", "bmi2"]);
    /// assert!(Tier::Cranelift.required_features().is_empty());
    /// ```
    pub fn required_features(self) -> &'static [&'static str] {
        match self {
            Tier::Avx2 => &["avx2", "bmi2"],
            Tier::Avx512 => &["avx512f", "avx512bw", "avx512vl", "avx512dq", "bmi2"],
            Tier::Auto | Tier::Cranelift => &[],
        }
    }

    /// Whether this host can run kernels of this tier (`Auto`: whether it runs any tier). A
    /// build without the `jit` feature runs none.
    ///
    /// ```
    /// use selectjit::{Engine, EngineConfig, Tier};
    /// // A named tier builds an engine exactly when this host runs it.
    /// for tier in Tier::CONCRETE {
    ///     assert_eq!(
    ///         Engine::with_config(EngineConfig::new().tier(tier)).is_ok(),
    ///         tier.available()
    ///     );
    /// }
    /// assert_eq!(Tier::Auto.available(), !Tier::host_tiers().is_empty());
    /// ```
    pub fn available(self) -> bool {
        use crate::jit::host;
        match self {
            Tier::Auto => Tier::CONCRETE.into_iter().any(Tier::available),
            Tier::Cranelift => host::CRANELIFT,
            Tier::Avx2 | Tier::Avx512 => {
                host::X86_TIER && self.host_has_features() && !self.capped()
            }
        }
    }

    /// Whether `SELECTJIT_MAX_ISA` hides this tier.
    fn capped(self) -> bool {
        !self
            .required_features()
            .iter()
            .all(|f| crate::jit::host::isa_allows(f))
    }

    /// Whether the CPU has every feature in [`Tier::required_features`].
    fn host_has_features(self) -> bool {
        self.required_features()
            .iter()
            .all(|f| crate::jit::host::cpu_has(f))
    }

    /// Why this host cannot run the tier, or `None` when it can.
    ///
    /// ```
    /// use selectjit::Tier;
    /// for tier in Tier::ALL {
    ///     match tier.unavailable_reason() {
    ///         None => assert!(tier.available()),
    ///         Some(why) => assert!(!tier.available() && why.contains(tier.name())),
    ///     }
    /// }
    /// ```
    pub fn unavailable_reason(self) -> Option<String> {
        if self.available() {
            return None;
        }
        let name = self.name();
        use crate::jit::host;
        if !host::JIT {
            return Some(format!(
                "tier {name}: this build of selectjit generates no code (its `jit` feature is off)"
            ));
        }
        let x86 = host::X86_64;
        let arch = std::env::consts::ARCH;
        Some(match self {
            Tier::Cranelift => format!(
                "tier {name}: this build of selectjit has no Cranelift (its `cranelift` feature \
                 is off)"
            ),
            Tier::Avx2 | Tier::Avx512 if !x86 => format!("tier {name} needs an x86-64 host"),
            Tier::Avx2 | Tier::Avx512 if host::X86_TIER && self.capped() => format!(
                "tier {name} is hidden by {}={:?}",
                crate::env::MAX_ISA,
                std::env::var(crate::env::MAX_ISA).unwrap_or_default()
            ),
            Tier::Avx2 | Tier::Avx512 => format!(
                "tier {name} needs the CPU features {}, which this host lacks",
                self.required_features().join(" ")
            ),
            Tier::Auto if x86 && host::X86_TIER && Tier::Avx2.capped() => format!(
                "tier {name}: {}={:?} hides the x86 tiers and this build of selectjit has no \
                 Cranelift (its `cranelift` feature is off)",
                crate::env::MAX_ISA,
                std::env::var(crate::env::MAX_ISA).unwrap_or_default()
            ),
            Tier::Auto if x86 => format!(
                "tier {name}: this host lacks the x86 tier's CPU features ({}) and this build of \
                 selectjit has no Cranelift (its `cranelift` feature is off)",
                Tier::Avx2.required_features().join(" ")
            ),
            Tier::Auto => format!(
                "tier {name}: on {arch} the code generator is Cranelift, and this build of \
                 selectjit has none (enable its `cranelift` feature)"
            ),
        })
    }

    /// The tiers this host runs, the most portable first.
    ///
    /// ```
    /// use selectjit::Tier;
    /// let tiers = Tier::host_tiers();
    /// assert!(tiers.iter().all(|t| *t != Tier::Auto && t.available()));
    /// assert_eq!(tiers.last().copied(), Tier::best()); // the most portable first, the widest last
    /// ```
    pub fn host_tiers() -> Vec<Tier> {
        Tier::CONCRETE
            .into_iter()
            .filter(|t| t.available())
            .collect()
    }

    /// The widest tier this host runs (`None` in a build without code generation). This is
    /// what `Auto` prefers before it has measured anything.
    ///
    /// ```
    /// use selectjit::{Engine, Tier};
    /// match Tier::best() {
    ///     Some(tier) => assert!(tier.available() && Engine::new().tier() == Some(tier)),
    ///     None => assert!(Engine::new().tier().is_none()), // no code generation here
    /// }
    /// ```
    pub fn best() -> Option<Tier> {
        Tier::host_tiers().pop()
    }

    /// The tier named by `SELECTJIT_TIER`, `Auto` when it is unset or empty. An unknown name is an
    /// error.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Tier, env};
    /// let tier = Tier::from_env()?;
    /// match std::env::var(env::TIER) {
    ///     Ok(name) if !name.trim().is_empty() => assert_eq!(tier.name(), name.trim()),
    ///     _ => assert_eq!(tier, Tier::Auto),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_env() -> Result<Tier> {
        match std::env::var(crate::env::TIER) {
            Ok(v) if !v.trim().is_empty() => v.trim().parse(),
            _ => Ok(Tier::Auto),
        }
    }

    /// Whether kernels of this tier are x86-64 machine code emitted by the x86 generator.
    ///
    /// ```
    /// use selectjit::Tier;
    /// assert!(Tier::Avx2.is_x86() && Tier::Avx512.is_x86());
    /// assert!(!Tier::Cranelift.is_x86() && !Tier::Auto.is_x86());
    /// ```
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

/// One candidate of a measured choice, as its generator reports it: the tier, and the options
/// the generator compiled the kernel with. The engine, the cache and the trial store, time and
/// print variants without reading them, except the store kind (`nt`), which the trial weighs
/// by the output's size; what the other options do is the generator's business (today the x86
/// tier offers them; Cranelift's kernels have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Variant {
    /// The code generator.
    pub tier: Tier,
    /// Non-temporal stores for the output's whole cache lines.
    pub nt: bool,
    /// The generator's widest vectors in the main loop of vector-select rows (the x86 tier at
    /// the AVX-512 level: zmm, for element widths up to 8 bytes); its usual width otherwise.
    pub wide: bool,
    /// With `nt`: four streams per operand from memory instead of one (the x86 tiers:
    /// vector-select rows long enough walk four parts of the row at once, shorter rows are
    /// walked four at once, a quarter of their loop apart).
    pub four_way: bool,
    /// The main loop of vector-select rows with ordinary stores fetches the output's lines for
    /// writing ahead of its stores (the x86 tiers: `prefetchw` 1 KiB ahead), so that the stores
    /// find their lines already owned (the hardware prefetchers follow loads, not stores).
    pub prefetchw: bool,
}

impl Variant {
    /// The variant of `tier` with ordinary stores and none of the generator's options.
    ///
    /// ```
    /// use selectjit::{Tier, Variant};
    /// let v = Variant::of(Tier::Avx2);
    /// assert_eq!(v.tier, Tier::Avx2);
    /// assert!(!v.nt && !v.wide && !v.four_way && !v.prefetchw);
    /// assert_eq!(v, Variant { tier: Tier::Avx2, ..Variant::default() });
    /// ```
    pub fn of(tier: Tier) -> Variant {
        Variant {
            tier,
            ..Variant::default()
        }
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.tier.name())?;
        if self.wide {
            f.write_str("+zmm")?;
        }
        if self.nt {
            f.write_str("+nt")?;
        }
        if self.four_way {
            f.write_str("+4way")?;
        }
        if self.prefetchw {
            f.write_str("+pfw")?;
        }
        Ok(())
    }
}

/// Parses a variant's [`Display`](std::fmt::Display) form: a tier's name, then its options
/// each as `+zmm` (`wide`), `+nt`, `+4way` (`four_way`), `+pfw` (`prefetchw`), in any order,
/// none twice.
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::{Tier, Variant};
/// let v: Variant = "avx512+zmm+pfw".parse()?;
/// assert_eq!((v.tier, v.wide, v.prefetchw, v.nt), (Tier::Avx512, true, true, false));
/// assert_eq!(v.to_string().parse::<Variant>()?, v);
/// assert!("avx2+fast".parse::<Variant>().is_err());
/// assert!("avx2+nt+nt".parse::<Variant>().is_err());
/// # Ok(())
/// # }
/// ```
impl std::str::FromStr for Variant {
    type Err = Error;
    fn from_str(s: &str) -> Result<Variant> {
        let mut parts = s.split('+');
        let tier: Tier = parts.next().unwrap_or_default().parse()?;
        let mut v = Variant::of(tier);
        for opt in parts {
            let flag = match opt {
                "zmm" => &mut v.wide,
                "nt" => &mut v.nt,
                "4way" => &mut v.four_way,
                "pfw" => &mut v.prefetchw,
                _ => {
                    return Err(Error::Invalid(format!(
                        "unknown variant '{s}': option '{opt}' (expected zmm, nt, 4way or pfw)"
                    )));
                }
            };
            if std::mem::replace(flag, true) {
                return Err(Error::Invalid(format!(
                    "variant '{s}' names option '{opt}' twice"
                )));
            }
        }
        Ok(v)
    }
}

/// What a measured choice is made for: every signature of one pattern whose output falls in
/// one power-of-two size class. The AVX-512 / AVX2 and store-kind trade-offs turn with the
/// size (whether the traffic fits the caches) and the loop shape, not with exact dims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelClass {
    /// The loop pattern.
    pub pattern: crate::plan::Pattern,
    /// `floor(log2(output bytes))`.
    pub size_log2: u8,
}

impl KernelClass {
    /// The class of a signature.
    ///
    /// ```
    /// use selectjit::KernelClass;
    /// use selectjit::plan::{Pattern, plan_contiguous};
    /// // 2400 and 4000 bytes of output: one size class (2^11 up to 2^12), one measured choice.
    /// let a = KernelClass::of(&plan_contiguous(4, 600).unwrap());
    /// let b = KernelClass::of(&plan_contiguous(4, 1000).unwrap());
    /// assert_eq!(a, b);
    /// assert_eq!((a.pattern, a.size_log2), (Pattern::of(&plan_contiguous(4, 2).unwrap()), 11));
    /// assert_ne!(a, KernelClass::of(&plan_contiguous(4, 4096).unwrap()));
    /// ```
    pub fn of(sig: &crate::plan::Signature) -> KernelClass {
        let bytes = sig.out_bytes().max(1);
        KernelClass {
            pattern: crate::plan::Pattern::of(sig),
            size_log2: bytes.ilog2() as u8,
        }
    }
}

impl std::fmt::Display for KernelClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = |log2: u32| match log2 {
            0..10 => format!("{} B", 1u64 << log2),
            10..20 => format!("{} KiB", 1u64 << (log2 - 10)),
            20..30 => format!("{} MiB", 1u64 << (log2 - 20)),
            _ => format!("{} GiB", 1u64 << (log2 - 30).min(40)),
        };
        let lo = self.size_log2 as u32;
        let p = &self.pattern;
        write!(
            f,
            "w{} rank{} inner{:?} output {}..{}",
            p.width,
            p.rank,
            p.inner,
            b(lo),
            b(lo + 1)
        )
    }
}

/// A measured choice: the variant that runs a kernel class, and each candidate's fastest time
/// on the calls that decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierChoice {
    /// The class the choice holds for.
    pub class: KernelClass,
    /// The variant kept.
    pub chosen: Variant,
    /// Each candidate's fastest timed call, in nanoseconds.
    pub times_ns: Vec<(Variant, u64)>,
}

impl std::fmt::Display for TierChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} (", self.class, self.chosen)?;
        for (k, (v, ns)) in self.times_ns.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{v} {:.1} us", *ns as f64 / 1e3)?;
        }
        f.write_str(")")
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
        use crate::jit::host;
        assert_eq!(Tier::Cranelift.available(), host::CRANELIFT);
        if host::CRANELIFT || host::X86_TIER && Tier::Avx2.available() {
            let best = Tier::best().expect("a jit build runs a tier");
            assert_ne!(best, Tier::Auto);
            assert!(best.available() && Tier::Auto.available());
        } else if host::JIT {
            let why = Tier::Auto.unavailable_reason().unwrap();
            assert!(why.contains("`cranelift` feature"), "{why}");
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

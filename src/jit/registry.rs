//! The registry of code generators: which ones this build has and this host runs, built for an
//! engine's tier. With [`super::host`] the only place where `cfg(...)` chooses generators: a
//! new generator is added here (and as a folder of its own under `src/jit/`), and nothing
//! above changes.

use super::generator::{CodeGenOptions, Generator};
use crate::error::{Error, Result};
use crate::tier::Tier;

/// Proof that this build has code generators: a [`Generators`] holds one, and a `CodeGen` its
/// generators, so in a build without the `jit` feature (where it has no value) neither can
/// exist and the code that uses one is compiled out of the no-JIT build.
#[cfg(feature = "jit")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Live;
/// See the `jit` build's `Live`: no value, no generators.
#[cfg(not(feature = "jit"))]
#[derive(Debug, Clone, Copy)]
pub(crate) enum Live {}

/// The proof, or why this build has no generator.
fn live() -> Result<Live> {
    #[cfg(feature = "jit")]
    return Ok(Live);
    #[cfg(not(feature = "jit"))]
    Err(Error::Invalid(
        "this build of selectjit generates no code (its `jit` feature is off): calls run on \
         the static kernels and AOT tables"
            .to_string(),
    ))
}

/// The generators of one engine.
pub(crate) struct Generators {
    /// This build has generators.
    pub(crate) live: Live,
    /// The ones kernels are compiled with (and, under `Auto`, measured), the preferred last.
    pub(crate) gens: Vec<Box<dyn Generator>>,
    /// Compiles what none of `gens` covers.
    pub(crate) fallback: Option<Box<dyn Generator>>,
}

/// The generators for `tier`: that tier's, or for `Auto` the ones it measures on this host —
/// the x86 tiers the host runs where there are any (Cranelift then compiles only what they do
/// not cover), Cranelift otherwise. A tier the host cannot run is an error, unless
/// `opts.runner` is given to run an x86 tier's kernels.
pub(crate) fn generators(tier: Tier, opts: CodeGenOptions) -> Result<Generators> {
    let live = live()?;
    let auto = tier == Tier::Auto;
    let tiers = if auto {
        let host = Tier::host_tiers();
        let x: Vec<Tier> = host.iter().copied().filter(|t| t.is_x86()).collect();
        if x.is_empty() { host } else { x }
    } else {
        vec![tier]
    };
    let runner = if !auto && tier.is_x86() && !tier.available() {
        let Some(r) = opts.runner.clone() else {
            let why = tier.unavailable_reason().unwrap_or_default();
            return Err(Error::Invalid(why));
        };
        Some(r)
    } else {
        if let Some(why) = tier.unavailable_reason() {
            return Err(Error::Invalid(why));
        }
        None
    };
    if tiers.is_empty() {
        return Err(Error::Invalid(format!("tier {tier}: no code generator")));
    }
    let mut gens: Vec<Box<dyn Generator>> = tiers
        .iter()
        .filter_map(|&t| x86_tier(t, opts.nt_min_bytes, runner.clone()))
        .collect();
    let mut fallback = None;
    if let Some(jit) = cranelift(&opts)? {
        if tiers.contains(&Tier::Cranelift) {
            gens.push(jit);
        } else {
            fallback = Some(jit);
        }
    }
    if gens.len() != tiers.len() {
        return Err(Error::Invalid(format!(
            "tier {tier}: this build of selectjit has no generator for {tiers:?}"
        )));
    }
    Ok(Generators {
        live,
        gens,
        fallback,
    })
}

/// The generator of x86 `tier` (`None` for the others, and in builds without the x86 tier).
fn x86_tier(
    tier: Tier,
    nt_min_bytes: usize,
    runner: Option<std::sync::Arc<dyn crate::kernel::abi::CodeRunner>>,
) -> Option<Box<dyn Generator>> {
    #[cfg(x86_tier)]
    return super::x86::plugin::X86Tier::new(tier, nt_min_bytes, runner)
        .map(|g| Box::new(g) as Box<dyn Generator>);
    #[cfg(not(x86_tier))]
    {
        let _ = (tier, nt_min_bytes, runner);
        None
    }
}

/// The Cranelift generator for the host (`None` in builds without it).
fn cranelift(opts: &CodeGenOptions) -> Result<Option<Box<dyn Generator>>> {
    #[cfg(cranelift_tier)]
    {
        let mut jit = super::cranelift::Jit::host(opts.verify)?;
        if let Some(on) = opts.blendv {
            jit.set_blendv(on);
        }
        Ok(Some(Box::new(jit)))
    }
    #[cfg(not(cranelift_tier))]
    {
        let _ = opts;
        Ok(None)
    }
}

/// The host's CPU features as the build's code generators detect them (Cranelift's), for an
/// architecture [`super::host::cpu_flags`] does not know; none without Cranelift.
pub(crate) fn host_isa_flags() -> Vec<&'static str> {
    #[cfg(cranelift_tier)]
    if let Ok(isa) = super::cranelift::host_isa(false) {
        return isa
            .isa_flags()
            .iter()
            .filter(|v| v.name.starts_with("has_") && v.as_bool() == Some(true))
            .map(|v| v.name)
            .collect();
    }
    Vec::new()
}

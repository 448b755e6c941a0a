//! The environment variables the library reads, all in one place. The settings ones are read
//! whenever an [`crate::EngineConfig`] is built with default settings
//! ([`crate::EngineConfig::default`]); `SELECTJIT_VERBOSE` once per process. A value that is
//! not a number where one is expected is ignored (the default applies); an unknown tier name is
//! an error that [`crate::Engine::try_with_config`] reports.

use crate::error::Result;
use crate::tier::Tier;

/// Kernels kept in an engine's cache ([`crate::EngineConfig::cache_capacity`]).
pub const CACHE_CAPACITY: &str = "SELECTJIT_CACHE_CAPACITY";
/// Sightings of a signature before its exact kernel is compiled
/// ([`crate::EngineConfig::exact_after`]).
pub const EXACT_AFTER: &str = "SELECTJIT_EXACT_AFTER";
/// Output bytes from which a call may be split across threads
/// ([`crate::EngineConfig::parallel_min_bytes`]).
pub const PARALLEL_MIN_BYTES: &str = "SELECTJIT_PARALLEL_MIN_BYTES";
/// Output bytes from which x86-tier kernels store non-temporally
/// ([`crate::EngineConfig::nt_min_bytes`]).
pub const NT_MIN_BYTES: &str = "SELECTJIT_NT_MIN_BYTES";
/// The code-generation tier ([`crate::EngineConfig::tier`]): `auto`, `cranelift`, `avx2`,
/// `avx512`.
pub const TIER: &str = "SELECTJIT_TIER";
/// Non-empty and not `0`: one stderr line per compile, eviction and tier choice.
pub const VERBOSE: &str = "SELECTJIT_VERBOSE";

/// The variable `name` as a non-negative integer, if it is set to one.
pub(crate) fn usize_var(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// The tier named by [`TIER`]: `Auto` when unset or empty, an error for an unknown name.
pub(crate) fn tier() -> Result<Tier> {
    match std::env::var(TIER) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse(),
        _ => Ok(Tier::Auto),
    }
}

/// Whether [`VERBOSE`] asks for diagnostics (read once per process).
#[cfg(feature = "jit")]
pub(crate) fn verbose() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var(VERBOSE).is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Writes one diagnostic line to stderr when [`VERBOSE`] is on.
#[cfg(feature = "jit")]
pub(crate) fn log(line: impl FnOnce() -> String) {
    if verbose() {
        eprintln!("selectjit_verbose,{}", line());
    }
}

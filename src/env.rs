//! The environment variables of the library, all in one place. The settings ones are read only
//! by [`crate::EngineConfig::from_env`], when a program asks for them (a value that is not what
//! the variable takes is an error naming it); `SELECTJIT_MAX_ISA` and `SELECTJIT_VERBOSE` are
//! process-wide and read once per process.

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
/// A file where `Auto` keeps its measured choices across processes
/// ([`crate::EngineConfig::wisdom`]): a path; unset or empty: none.
pub const WISDOM: &str = "SELECTJIT_WISDOM";
/// The engine's pool of freed output buffers ([`crate::EngineConfig::output_pool`]): `0`,
/// `off` or `false` switches it off; `1`, `on` or `true` on (the default).
pub const OUTPUT_POOL: &str = "SELECTJIT_OUTPUT_POOL";
/// Non-empty and not `0`: one stderr line per compile, eviction and tier choice, and
/// per load or save of a wisdom file ([`WISDOM`]).
pub const VERBOSE: &str = "SELECTJIT_VERBOSE";
/// The widest x86 instruction set the library uses, whatever the CPU has (read once per
/// process; as oneDNN's `ONEDNN_MAX_CPU_ISA`): `avx2` hides AVX-512 from the tiers and the
/// static kernels (what an AVX2-only host runs), `baseline` hides AVX2 too; `all` or unset: no
/// cap. Another value is an error that [`crate::Engine::with_config`] reports (the cap then
/// does not apply).
pub const MAX_ISA: &str = "SELECTJIT_MAX_ISA";

/// A cap on the x86 instruction sets used ([`MAX_ISA`]), in increasing order (not a stable
/// API: for the command line's `info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum IsaCap {
    /// The build's baseline (SSE2 on x86-64): no AVX2 or AVX-512 tier or static kernels.
    Baseline,
    /// Up to AVX2.
    Avx2,
    /// No cap.
    All,
}

impl IsaCap {
    /// Parses a [`MAX_ISA`] value (case-insensitive; empty: no cap).
    pub(crate) fn parse(v: &str) -> std::result::Result<IsaCap, String> {
        match v.trim().to_ascii_lowercase().as_str() {
            "" | "all" | "avx512" => Ok(IsaCap::All),
            "avx2" => Ok(IsaCap::Avx2),
            "baseline" => Ok(IsaCap::Baseline),
            other => Err(format!(
                "{MAX_ISA}={other:?}: expected all, avx512, avx2 or baseline"
            )),
        }
    }
}

/// The cap [`MAX_ISA`] sets (read once per process), or why its value is not one (not a
/// stable API).
///
/// ```
/// use selectjit::env::{IsaCap, max_isa};
/// // Unset or `all` in a plain environment: no cap.
/// if std::env::var_os(selectjit::env::MAX_ISA).is_none() {
///     assert_eq!(max_isa(), Ok(IsaCap::All));
/// }
/// ```
pub fn max_isa() -> std::result::Result<IsaCap, String> {
    static CAP: std::sync::OnceLock<std::result::Result<IsaCap, String>> =
        std::sync::OnceLock::new();
    CAP.get_or_init(|| IsaCap::parse(&std::env::var(MAX_ISA).unwrap_or_default()))
        .clone()
}

/// The cap in force: [`max_isa`], or no cap when its value is not one.
pub(crate) fn isa_cap() -> IsaCap {
    max_isa().unwrap_or(IsaCap::All)
}

/// Whether [`VERBOSE`] asks for diagnostics (read once per process).
pub(crate) fn verbose() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var(VERBOSE).is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Writes one diagnostic line to stderr when [`VERBOSE`] is on.
pub(crate) fn log(line: impl FnOnce() -> String) {
    if verbose() {
        eprintln!("selectjit_verbose,{}", line());
    }
}

#[cfg(test)]
mod tests {
    use super::IsaCap;

    #[test]
    fn isa_caps_parse() {
        for (v, cap) in [
            ("", IsaCap::All),
            ("all", IsaCap::All),
            (" AVX512 ", IsaCap::All),
            ("avx2", IsaCap::Avx2),
            ("Baseline", IsaCap::Baseline),
        ] {
            assert_eq!(IsaCap::parse(v), Ok(cap), "{v:?}");
        }
        let err = IsaCap::parse("sse4").unwrap_err();
        assert!(
            err.contains("SELECTJIT_MAX_ISA") && err.contains("sse4"),
            "{err}"
        );
        assert!(IsaCap::Baseline < IsaCap::Avx2 && IsaCap::Avx2 < IsaCap::All);
    }
}

//! What an engine is asked to be: its backend and settings, with their defaults (and the
//! environment variables that change them, read in [`crate::env`]).

use crate::aot::AotTable;
use crate::cache::DEFAULT_CAPACITY;
use crate::env;
use crate::error::{Error, Result};
use crate::tier::Tier;
use crate::trial::CallTimer;

/// Which implementation runs the selects of an [`crate::Engine`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Backend {
    /// Kernels compiled per signature by the engine's code-generation [`Tier`], cached (falls
    /// back to `Static` if code generation fails or the build has none).
    #[default]
    Jit,
    /// Ahead-of-time Rust kernels with run-time CPU dispatch (and the kernels of an AOT table,
    /// if the engine has one).
    Static,
    /// The reference interpreter (one element at a time).
    Interp,
}

impl Backend {
    /// Every backend, for tests and benchmarks that compare them.
    pub const ALL: &'static [Backend] = &[Backend::Jit, Backend::Static, Backend::Interp];

    /// The name used on the command line (`jit`, `static`, `interp`).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Jit => "jit",
            Backend::Static => "static",
            Backend::Interp => "interp",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "jit" => Ok(Backend::Jit),
            "static" => Ok(Backend::Static),
            "interp" => Ok(Backend::Interp),
            _ => Err(Error::Invalid(format!(
                "unknown backend '{s}' (expected jit, static or interp)"
            ))),
        }
    }
}

/// Which input an in-place select overwrites with the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlace {
    /// The output buffer holds `then` on entry: `then = cond ? then : else`.
    Then,
    /// The output buffer holds `else` on entry: `else = cond ? then : else`.
    Else,
}

/// Settings of an [`crate::Engine`].
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Which implementation runs the selects.
    pub backend: Backend,
    /// Kernels kept in the LRU cache (default 1024, or `SELECTJIT_CACHE_CAPACITY`).
    pub cache_capacity: usize,
    /// Run the Cranelift verifier on every compiled kernel (default: in debug builds).
    pub verify: bool,
    /// How many times a signature is seen before its exact kernel is compiled; until then the
    /// shape-generic kernel of its pattern runs it (compiled once per pattern). 1 compiles the
    /// exact kernel on first sight. Default 2, or `SELECTJIT_EXACT_AFTER`.
    pub exact_after: u32,
    /// Threads a large call is split across (default: the available parallelism). Calls with
    /// fewer than `parallel_min_bytes` of output stay on the calling thread.
    pub threads: usize,
    /// Output size from which a call is split across `threads` (default
    /// [`PARALLEL_MIN_BYTES`], or `SELECTJIT_PARALLEL_MIN_BYTES`).
    pub parallel_min_bytes: usize,
    /// The code generator (default `Auto`, or `SELECTJIT_TIER`): `Auto` times the tiers the
    /// host runs on each kernel class's first calls and keeps the fastest; a named tier is
    /// used for every kernel (Cranelift for signatures an x86 tier does not cover).
    pub tier: Tier,
    /// x86 tiers: exact kernels whose output has at least this many bytes store it with
    /// non-temporal stores, bypassing the caches (default [`NT_MIN_BYTES`], or
    /// `SELECTJIT_NT_MIN_BYTES`; `usize::MAX` never).
    pub nt_min_bytes: usize,
    /// x86 tiers on a host that lacks their instructions: run the kernels through this runner
    /// (the emulator of the `selectjit-emu` crate) instead of refusing the tier. For verifying
    /// the generator, e.g. AVX-512 kernels on an AVX2 machine. Default: none.
    #[cfg(feature = "jit")]
    pub runner: Option<std::sync::Arc<dyn crate::kernel::abi::CodeRunner>>,
    /// What times the calls behind the engine's measured choices (default: wall-clock time).
    pub timer: Option<std::sync::Arc<dyn CallTimer>>,
    /// Kernels compiled ahead of time ([`crate::aot`]). A signature whose exact kernel the table
    /// has runs it, with no code generation. Other signatures: with the `Jit` backend, the
    /// engine's policy, taking the table's shape-generic kernel of the pattern instead of
    /// compiling one; with the `Static` backend (no code generation at all, for hosts that
    /// forbid it), the table's shape-generic kernel of the pattern, else the static kernels.
    /// The `Interp` backend ignores it. Default: none.
    pub aot: Option<AotTable>,
}

/// Default of [`EngineConfig::nt_min_bytes`]: outputs of at least a typical last-level cache
/// (32 MiB). Measured on a Zen 3 host with a 32 MiB L3: a 54 MB output (`bert_pad_mask_f32`)
/// ran 5-8% faster with non-temporal stores than without (three alternating runs each).
pub const NT_MIN_BYTES: usize = 32 << 20;

/// Default output size from which a call is split across the engine's threads.
pub const PARALLEL_MIN_BYTES: usize = 1 << 20;

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            backend: Backend::default(),
            cache_capacity: env::usize_var(env::CACHE_CAPACITY)
                .filter(|&n| n > 0)
                .unwrap_or(DEFAULT_CAPACITY),
            verify: cfg!(debug_assertions),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            parallel_min_bytes: env::usize_var(env::PARALLEL_MIN_BYTES)
                .unwrap_or(PARALLEL_MIN_BYTES),
            exact_after: env::usize_var(env::EXACT_AFTER)
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(2),
            // An unknown name in SELECTJIT_TIER is reported by `Engine::try_with_config` and
            // recorded by `Engine::with_config` (see `Engine::last_codegen_error`).
            tier: Tier::from_env().unwrap_or(Tier::Auto),
            nt_min_bytes: env::usize_var(env::NT_MIN_BYTES).unwrap_or(NT_MIN_BYTES),
            #[cfg(feature = "jit")]
            runner: None,
            timer: None,
            aot: None,
        }
    }
}

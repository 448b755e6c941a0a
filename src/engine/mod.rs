//! The public face: validate buffers, infer the shape, and run the chosen backend.
//!
//! The engine is split by job: [`config`](EngineConfig) (backends, settings, defaults),
//! `validate` (buffers and broadcast checked before anything runs), `api` (the entry points),
//! `exec` (planning, running and splitting a validated call), `policy` (which kernel runs a
//! signature), `memo` (the per-thread memo of the last kernel), `prepared` (prepared
//! calls) and `interp` (the interpreter on validated calls, and `select_generic`).

mod api;
pub(crate) mod config;
pub(crate) mod exec;
pub(crate) mod interp;
mod layouts;
mod memo;
mod policy;
pub(crate) mod prepared;
#[cfg(test)]
mod tests;
mod validate;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use config::{Backend, EngineConfig};

use crate::aot::AotTable;
use crate::cache::{CacheStats, KernelCache};
use crate::error::Result;
use crate::pool::Pool;
use crate::tier::Tier;

#[cfg(cranelift_tier)]
use crate::jit::Jit;
#[cfg(feature = "jit")]
use crate::jit::{CodeGen, CodeGenOptions};

/// Selects with a chosen backend. `Send + Sync`: share one engine between threads.
pub struct Engine {
    config: EngineConfig,
    /// The code generators, or why there are none (the engine then runs the static kernels).
    #[cfg(feature = "jit")]
    jit: std::result::Result<CodeGen, String>,
    cache: Mutex<KernelCache>,
    last_codegen_error: Mutex<Option<String>>,
    /// Worker threads for large calls, built on first use.
    pool: std::sync::OnceLock<Option<Pool>>,
    /// Identifies the engine in the per-thread memo.
    id: u64,
    /// Calls served by the per-thread memos (counted as cache hits; each thread adds its own
    /// in batches).
    memo_hits: Arc<AtomicU64>,
    /// Calls run by an exact kernel of the AOT table, by a shape-generic kernel of the table,
    /// and by the static kernels.
    runs: [AtomicU64; 3],
    /// Why the AOT table given to [`Engine::with_aot`] was rejected.
    aot_error: Option<String>,
    /// Times the calls behind measured choices.
    timer: Arc<dyn crate::trial::CallTimer>,
}

/// Indices of `Engine::runs`.
const AOT_EXACT_RUNS: usize = 0;
const AOT_GENERIC_RUNS: usize = 1;
const STATIC_RUNS: usize = 2;

static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(0);

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Default for Engine {
    fn default() -> Self {
        Engine::with_config(EngineConfig::default())
    }
}

/// Why an engine has no code generator, when its backend is `Jit`.
#[cfg(not(feature = "jit"))]
const NO_JIT: &str = "this build of selectjit generates no code (its `jit` feature is off): \
                      calls run on the static kernels and AOT tables";

impl Engine {
    /// An engine with the default settings (JIT backend).
    pub fn new() -> Engine {
        Engine::default()
    }

    /// An engine with the given backend and default settings otherwise.
    pub fn with_backend(backend: Backend) -> Engine {
        Engine::with_config(EngineConfig {
            backend,
            ..EngineConfig::default()
        })
    }

    /// An engine with the given settings. If the JIT backend cannot be set up as asked (e.g. a
    /// tier this host cannot run, or a build without the `jit` feature), the engine serves
    /// every call with the static kernels (and its AOT table) and
    /// [`Engine::last_codegen_error`] says why; [`Engine::try_with_config`] reports it instead.
    pub fn with_config(config: EngineConfig) -> Engine {
        let jit = Engine::codegen_for(&config).map_err(|e| e.to_string());
        Engine::assemble(config, jit)
    }

    /// An engine with the given settings, or the reason its JIT backend cannot be set up (an
    /// unknown `SELECTJIT_TIER`, a tier the host cannot run, no code generator for the host or
    /// in this build).
    pub fn try_with_config(config: EngineConfig) -> Result<Engine> {
        crate::env::max_isa().map_err(crate::error::Error::Invalid)?;
        let jit = Engine::codegen_for(&config);
        if config.backend == Backend::Jit {
            jit.as_ref().map_err(Clone::clone)?;
        }
        Ok(Engine::assemble(config, jit.map_err(|e| e.to_string())))
    }

    #[cfg(feature = "jit")]
    fn codegen_for(config: &EngineConfig) -> Result<CodeGen> {
        if config.backend != Backend::Jit {
            return Err(crate::error::Error::Invalid(
                "the engine's backend is not jit".to_string(),
            ));
        }
        // The default configuration falls back to `Auto` on an unknown SELECTJIT_TIER: say so.
        if config.tier == Tier::Auto {
            Tier::from_env()?;
        }
        CodeGen::new(
            config.tier,
            CodeGenOptions {
                verify: config.verify,
                nt_min_bytes: config.nt_min_bytes,
                runner: config.runner.clone(),
            },
        )
    }

    #[cfg(not(feature = "jit"))]
    fn codegen_for(config: &EngineConfig) -> Result<()> {
        if config.tier == Tier::Auto {
            Tier::from_env()?;
        }
        Err(crate::error::Error::Invalid(NO_JIT.to_string()))
    }

    /// An engine that runs kernels from the given Cranelift code generator (e.g. one configured
    /// with [`Jit::set_blendv`]); the backend is `Jit`, the tier Cranelift.
    #[cfg(cranelift_tier)]
    pub fn with_jit(config: EngineConfig, jit: Jit) -> Engine {
        let config = EngineConfig {
            backend: Backend::Jit,
            tier: Tier::Cranelift,
            ..config
        };
        Engine::assemble(config, Ok(CodeGen::from_cranelift(jit)))
    }

    /// An engine that serves calls from an AOT kernel table (see [`EngineConfig::aot`]), given
    /// as the result of its checked registration ([`AotTable::from_raw`]). A rejected table is
    /// not an error here: the engine serves every call without it (static kernels, or its code
    /// generator), and [`Engine::aot_error`] and [`CacheStats::aot_rejected`] say why.
    pub fn with_aot(config: EngineConfig, table: Result<AotTable>) -> Engine {
        match table {
            Ok(t) => Engine::with_config(EngineConfig {
                aot: Some(t),
                ..config
            }),
            Err(e) => {
                let mut eng = Engine::with_config(EngineConfig {
                    aot: None,
                    ..config
                });
                eng.aot_error = Some(e.to_string());
                eng
            }
        }
    }

    /// Why the AOT table given to [`Engine::with_aot`] was rejected.
    pub fn aot_error(&self) -> Option<&str> {
        self.aot_error.as_deref()
    }

    #[cfg(feature = "jit")]
    fn assemble(config: EngineConfig, jit: std::result::Result<CodeGen, String>) -> Engine {
        let last = jit.as_ref().err().cloned();
        let mut e = Engine::parts(config, last);
        e.jit = jit;
        e
    }

    #[cfg(not(feature = "jit"))]
    fn assemble(config: EngineConfig, jit: std::result::Result<(), String>) -> Engine {
        Engine::parts(config, jit.err())
    }

    /// The engine without a code generator; `why` it has none (recorded for a `Jit` backend).
    fn parts(config: EngineConfig, why: Option<String>) -> Engine {
        let last = why.filter(|_| config.backend == Backend::Jit);
        Engine {
            id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
            memo_hits: Arc::new(AtomicU64::new(0)),
            runs: Default::default(),
            aot_error: None,
            timer: config
                .timer
                .clone()
                .unwrap_or_else(crate::trial::wall_clock),
            pool: std::sync::OnceLock::new(),
            cache: Mutex::new(KernelCache::new(config.cache_capacity)),
            #[cfg(feature = "jit")]
            jit: Err(String::new()),
            last_codegen_error: Mutex::new(last),
            config,
        }
    }

    /// The worker pool, when the engine has more than one thread.
    fn pool(&self) -> Option<&Pool> {
        self.pool
            .get_or_init(|| Pool::new(self.config.threads))
            .as_ref()
    }

    /// The backend this engine runs.
    pub fn backend(&self) -> Backend {
        self.config.backend
    }

    /// The settings this engine was built with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The code generators, if this engine has them.
    #[cfg(feature = "jit")]
    pub fn codegen(&self) -> Option<&CodeGen> {
        self.jit.as_ref().ok()
    }

    /// The tier that compiles this engine's kernels, the preferred one under `Auto` (`None`
    /// without a code generator).
    pub fn tier(&self) -> Option<Tier> {
        #[cfg(feature = "jit")]
        return self.codegen().map(CodeGen::tier);
        #[cfg(not(feature = "jit"))]
        None
    }

    /// Cache counters: hits, misses, evictions, compilations and their time. Hits of a
    /// thread's memo of its last kernel are added 64 at a time: the calling thread's all, other
    /// threads' up to the last 63.
    pub fn stats(&self) -> CacheStats {
        self.flush_memo_hits();
        let mut s = self.lock_cache().stats();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        s.hits += load(&self.memo_hits);
        s.aot_exact_runs = load(&self.runs[AOT_EXACT_RUNS]);
        s.aot_generic_runs = load(&self.runs[AOT_GENERIC_RUNS]);
        s.static_runs = load(&self.runs[STATIC_RUNS]);
        if let Some(t) = &self.config.aot {
            (s.aot_exact_kernels, s.aot_generic_kernels) = (t.exact_len(), t.generic_len());
        }
        s.aot_rejected = self.aot_error.is_some();
        s
    }

    /// The choices `Auto` made by measuring: per kernel class, the variant kept (tier, store
    /// kind) and each candidate's fastest time. Empty for a named tier.
    pub fn tier_choices(&self) -> Vec<crate::tier::TierChoice> {
        self.lock_cache().choices()
    }

    /// Drops every cached kernel (each is freed once no caller holds it; another thread's memo
    /// of its last kernel keeps that one until the thread's next call on another signature).
    pub fn clear_cache(&self) {
        self.lock_cache().clear();
        self.forget_memo();
    }

    /// Why code generation last failed (the call was then served by the static kernels).
    pub fn last_codegen_error(&self) -> Option<String> {
        self.last_codegen_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, KernelCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    fn record_codegen_error(&self, e: String) {
        *self
            .last_codegen_error
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(e);
    }
}

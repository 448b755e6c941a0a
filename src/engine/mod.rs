//! The public face: validate buffers, infer the shape, and run the chosen backend.
//!
//! The engine is split by job: [`config`](EngineConfig) (backends, settings, defaults),
//! `validate` (buffers and broadcast checked before anything runs), `api` (the entry points),
//! `exec` (planning, running and splitting a validated call), `policy` (which kernel runs a
//! signature), `memo` (the per-thread memo of the last kernel), `prepared` (prepared
//! calls) and `interp_backend` (`Backend::Interp` and `select_generic`: the reference
//! interpreter, `crate::reference`, on validated calls).

mod api;
mod bitmap;
pub(crate) mod config;
pub(crate) mod exec;
pub(crate) mod interp_backend;
mod layouts;
mod memo;
pub(crate) mod nway;
mod nway_pass;
mod policy;
pub(crate) mod prepared;
#[cfg(test)]
mod tests;
mod validate;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use config::{Backend, EngineConfig};

use crate::cache::{CacheStats, KernelCache};
use crate::error::Result;
use crate::outpool::{Limits, OutputPool, OutputPoolStats, PooledBuf};
use crate::pool::Pool;
use crate::tier::Tier;
use crate::wisdom::{Wisdom, WisdomStatus};

use crate::jit::CodeGen;

/// Selects with a chosen backend. `Send + Sync`: share one engine between threads.
pub struct Engine {
    config: EngineConfig,
    /// The code generators, or why there are none (the engine then runs the static kernels).
    jit: Result<CodeGen>,
    cache: Mutex<KernelCache>,
    last_codegen_error: Mutex<Option<crate::error::Error>>,
    /// Worker threads for large calls, built on first use.
    pool: std::sync::OnceLock<Option<Pool>>,
    /// Identifies the engine in the per-thread memo.
    id: u64,
    /// Calls served by the per-thread memos (counted as cache hits; each thread adds its own
    /// in batches).
    memo_hits: Arc<AtomicU64>,
    /// Calls run by an exact kernel of the AOT table, by a shape-generic kernel of the table,
    /// by the static kernels, and of those by blocks of a predicate.
    runs: [AtomicU64; 6],
    /// Runs of single-pass n-way kernels (shared with the threads' counts, `nway_pass`).
    nway_runs: Arc<AtomicU64>,
    /// Times the calls behind measured choices.
    timer: Arc<dyn crate::trial::CallTimer>,
    /// The wisdom file, when the engine has one and measures (`Auto`).
    wisdom: Option<Mutex<Wisdom>>,
    /// What became of the wisdom file when the engine was built.
    wisdom_status: WisdomStatus,
    /// Freed output buffers kept for reuse (shared: buffers may outlive the engine).
    output_pool: Option<Arc<OutputPool>>,
    /// Single-pass n-way kernels by spec (`None`: no generator has one).
    nway: Mutex<NwayKernels>,
}

/// An engine's single-pass n-way kernels, by spec.
type NwayKernels = rustc_hash::FxHashMap<
    crate::kernel::nway::NwaySpec,
    Option<Arc<crate::kernel::nway::NwayKernel>>,
>;

impl Drop for Engine {
    /// Closes the output pool: its held buffers are released, and buffers still in use go
    /// straight back to the allocator when they are freed.
    fn drop(&mut self) {
        if let Some(p) = &self.output_pool {
            p.close();
        }
    }
}

/// Indices of `Engine::runs`.
const AOT_EXACT_RUNS: usize = 0;
const AOT_GENERIC_RUNS: usize = 1;
const STATIC_RUNS: usize = 2;
const BLOCKED_RUNS: usize = 3;
const NWAY_COMPILES: usize = 4;
const NWAY_COMPILE_US: usize = 5;

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
        Engine::new()
    }
}

/// Why an engine has no code generator, when its backend is `Jit`.
impl Engine {
    /// An engine with the default settings ([`EngineConfig::new`]): the JIT backend with the
    /// tier `Auto`. Where no code generator can run (a build without one, a host none targets)
    /// calls run on the static kernels and [`Engine::last_codegen_error`] says why.
    ///
    /// ```
    /// use selectjit::{Backend, Engine, Tier};
    /// let engine = Engine::new();
    /// assert_eq!(engine.backend(), Backend::Jit);
    /// // A code generator where the host (and the build) has one, the static kernels otherwise.
    /// assert_eq!(engine.tier().is_some(), Tier::Auto.available());
    /// ```
    pub fn new() -> Engine {
        let config = EngineConfig::new();
        let jit = Engine::codegen_for(&config);
        Engine::assemble(config, jit)
    }

    /// An engine with the given settings.
    ///
    /// # Errors
    /// A configuration that cannot be honoured: a named tier this host (or this build) cannot
    /// run, or an invalid `SELECTJIT_MAX_ISA` (the process-wide instruction-set cap). The tier
    /// `Auto` is never an error: without any code generator the engine runs the static kernels
    /// (and its AOT table), and [`Engine::last_codegen_error`] says why.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Backend, Engine, EngineConfig, Tier};
    /// let engine = Engine::with_config(EngineConfig::new().backend(Backend::Static).threads(1))?;
    /// assert_eq!((engine.backend(), engine.threads()), (Backend::Static, 1));
    /// // A named tier the host cannot run is an error, not a silent fallback.
    /// if let Some(tier) = Tier::CONCRETE.into_iter().find(|t| !t.available()) {
    ///     assert!(Engine::with_config(EngineConfig::new().tier(tier)).is_err());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_config(config: EngineConfig) -> Result<Engine> {
        crate::env::max_isa().map_err(crate::error::Error::Invalid)?;
        let jit = Engine::codegen_for(&config);
        if config.backend == Backend::Jit && config.tier != Tier::Auto {
            jit.as_ref().map_err(Clone::clone)?;
        }
        Ok(Engine::assemble(config, jit))
    }

    fn codegen_for(config: &EngineConfig) -> Result<CodeGen> {
        if config.backend != Backend::Jit {
            return Err(crate::error::Error::Invalid(
                "the engine's backend is not jit".to_string(),
            ));
        }
        let (tier, opts) = config.codegen_parts();
        CodeGen::new(tier, opts)
    }

    fn assemble(config: EngineConfig, jit: Result<CodeGen>) -> Engine {
        let last = jit.as_ref().err().cloned();
        let mut e = Engine::parts(config, last);
        e.jit = jit;
        e.load_wisdom();
        e
    }

    /// Loads the wisdom file, if the engine has one and measures: each class's kept variant
    /// seeds the cache's choices when this engine's code generator runs its tier.
    fn load_wisdom(&mut self) {
        let Some(path) = self.config.wisdom.clone() else {
            return;
        };
        if !crate::jit::host::WISDOM {
            // Constant: without the feature, what follows is compiled out.
            crate::env::log(|| format!("wisdom,unavailable,{}", path.display()));
            self.wisdom_status = WisdomStatus::Unavailable;
            return;
        }
        let Some(jit) = self.jit.as_ref().ok().filter(|j| j.is_auto()) else {
            crate::env::log(|| {
                format!("wisdom,off,{},the engine does not measure", path.display())
            });
            return;
        };
        let (w, mut status) = Wisdom::load(&path);
        if let WisdomStatus::Loaded { seeded, .. } = &mut status {
            let cache = self.cache.get_mut().unwrap_or_else(|p| p.into_inner());
            for c in w.choices() {
                if jit.tiers().contains(&c.chosen.tier) {
                    cache.seed(c);
                    *seeded += 1;
                }
            }
        }
        crate::env::log(|| format!("wisdom,load,{},{status}", path.display()));
        self.wisdom = Some(Mutex::new(w));
        self.wisdom_status = status;
    }

    /// Takes a trial's choice into the wisdom file, if the engine has one, and rewrites it
    /// (an I/O error is logged, not returned: the choice holds in this engine anyway).
    fn learn(&self, choice: &crate::tier::TierChoice) {
        let Some(mut w) = self.wisdom() else {
            return;
        };
        w.merge(choice);
        Self::save_wisdom(&w);
    }

    /// The wisdom file, locked, if the engine has one (and the build can keep one).
    fn wisdom(&self) -> Option<std::sync::MutexGuard<'_, Wisdom>> {
        let w = self.wisdom.as_ref().filter(|_| crate::jit::host::WISDOM)?;
        Some(w.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Rewrites the wisdom file; an I/O error is logged, not returned: the choice holds in
    /// this engine anyway.
    fn save_wisdom(w: &Wisdom) {
        match w.save() {
            Ok(()) => crate::env::log(|| format!("wisdom,save,{}", w.path().display())),
            Err(e) => crate::env::log(|| format!("wisdom,save,failed,{},{e}", w.path().display())),
        }
    }

    /// Whether calls of `sig`'s class split across this engine's threads, as the wisdom file
    /// keeps it (`None`: no file, or the class's split not measured at this thread count).
    pub(super) fn wisdom_splits(&self, sig: &crate::plan::Signature) -> Option<bool> {
        let w = self.wisdom()?;
        w.splits(&crate::tier::KernelClass::of(sig), self.config.threads)
    }

    /// Takes a split trial's times (`[split, single]`) of a kernel of `sig` into the wisdom
    /// file, if the engine has one, and rewrites it (an I/O error is logged, as in `learn`).
    pub(super) fn learn_split(&self, sig: &crate::plan::Signature, ns: [u64; 2]) {
        let Some(mut w) = self.wisdom() else {
            return;
        };
        let class = crate::tier::KernelClass::of(sig);
        let splits = w.merge_split(class, self.config.threads, ns);
        crate::env::log(|| {
            let way = if splits { "split" } else { "single" };
            format!(
                "split,{class},{},{way},{}ns,{}ns",
                self.config.threads, ns[0], ns[1]
            )
        });
        Self::save_wisdom(&w);
    }

    /// The engine without a code generator; `why` it has none (recorded for a `Jit` backend).
    fn parts(config: EngineConfig, why: Option<crate::error::Error>) -> Engine {
        let last = why.filter(|_| config.backend == Backend::Jit);
        Engine {
            id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
            memo_hits: Arc::new(AtomicU64::new(0)),
            runs: Default::default(),
            nway_runs: Arc::new(AtomicU64::new(0)),
            timer: config
                .timer
                .clone()
                .unwrap_or_else(crate::trial::wall_clock),
            pool: std::sync::OnceLock::new(),
            cache: Mutex::new(KernelCache::new(config.cache_capacity)),
            jit: Err(crate::error::Error::Invalid(String::new())),
            last_codegen_error: Mutex::new(last),
            wisdom: None,
            wisdom_status: WisdomStatus::Off,
            nway: Mutex::new(Default::default()),
            output_pool: config.output_pool.then(|| {
                Arc::new(OutputPool::with_limits(Limits {
                    cap: config.output_pool_cap,
                    max_age: config.output_pool_max_age,
                    ..Limits::default()
                }))
            }),
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
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Backend, Engine, EngineConfig};
    /// assert_eq!(Engine::new().backend(), Backend::Jit);
    /// let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp))?;
    /// assert_eq!(interp.backend(), Backend::Interp);
    /// # Ok(())
    /// # }
    /// ```
    pub fn backend(&self) -> Backend {
        self.config.backend
    }

    /// Threads a large call may be split across ([`EngineConfig::threads`]).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig};
    /// assert_eq!(
    ///     Engine::with_config(EngineConfig::new().threads(2))?.threads(),
    ///     2
    /// );
    /// assert!(Engine::new().threads() >= 1); // default: the available parallelism
    /// # Ok(())
    /// # }
    /// ```
    pub fn threads(&self) -> usize {
        self.config.threads
    }

    /// Output bytes from which a call may be split ([`EngineConfig::parallel_min_bytes`]).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig, PARALLEL_MIN_BYTES};
    /// assert_eq!(Engine::new().parallel_min_bytes(), PARALLEL_MIN_BYTES);
    /// let e = Engine::with_config(EngineConfig::new().parallel_min_bytes(4 << 20))?;
    /// assert_eq!(e.parallel_min_bytes(), 4 << 20);
    /// # Ok(())
    /// # }
    /// ```
    pub fn parallel_min_bytes(&self) -> usize {
        self.config.parallel_min_bytes
    }

    /// The engine's code generators ([`crate::codegen`]), if it has them: what tools that
    /// compile or inspect kernels the way the engine would use. `None` for the `Static` and
    /// `Interp` backends and where no generator runs ([`Engine::last_codegen_error`] says why).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Backend, Engine, EngineConfig};
    /// let engine = Engine::new();
    /// match engine.codegen() {
    ///     Some(cg) => assert_eq!(Some(cg.tier()), engine.tier()),
    ///     None => assert!(engine.last_codegen_error().is_some()),
    /// }
    /// let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp))?;
    /// assert!(interp.codegen().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn codegen(&self) -> Option<&CodeGen> {
        self.jit.as_ref().ok()
    }

    /// The tier that compiles this engine's kernels, the preferred one under `Auto` (`None`
    /// without a code generator).
    ///
    /// ```
    /// use selectjit::{Engine, Tier};
    /// let engine = Engine::new();
    /// match engine.tier() {
    ///     Some(tier) => assert_eq!(Some(tier), Tier::best()), // `Auto` prefers the widest tier
    ///     None => assert!(engine.last_codegen_error().is_some()), // no code generator: says why
    /// }
    /// ```
    pub fn tier(&self) -> Option<Tier> {
        self.codegen().map(CodeGen::tier)
    }

    /// Cache counters: hits, misses, evictions, compilations and their time. Hits of a
    /// thread's memo of its last kernel are added 64 at a time: the calling thread's all, other
    /// threads' up to the last 63.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Backend, Broadcast, Engine, EngineConfig, TensorMut, TensorRef};
    /// let engine = Engine::with_config(
    ///     EngineConfig::new()
    ///         .backend(Backend::Static)
    ///         .cache_capacity(8),
    /// )?;
    /// let mut out = [0u8; 2];
    /// engine.select(
    ///     TensorRef::new(&[1, 0], &[2]),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[2]),
    ///     Broadcast::Numpy,
    /// )?;
    /// let stats = engine.stats();
    /// assert_eq!(
    ///     (stats.capacity, stats.static_runs, stats.compiles),
    ///     (8, 1, 0)
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn stats(&self) -> CacheStats {
        self.flush_memo_hits();
        self.flush_nway_runs();
        let mut s = self.lock_cache().stats();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        s.hits += load(&self.memo_hits);
        s.aot_exact_runs = load(&self.runs[AOT_EXACT_RUNS]);
        s.aot_generic_runs = load(&self.runs[AOT_GENERIC_RUNS]);
        s.static_runs = load(&self.runs[STATIC_RUNS]);
        s.blocked_runs = load(&self.runs[BLOCKED_RUNS]);
        s.nway_pass_runs = load(&self.nway_runs);
        s.nway_compiles = load(&self.runs[NWAY_COMPILES]);
        s.nway_compile_us = load(&self.runs[NWAY_COMPILE_US]);
        if let Some(t) = &self.config.aot {
            (s.aot_exact_kernels, s.aot_generic_kernels) = (t.exact_len(), t.generic_len());
        }
        s
    }

    /// The choices `Auto` made by measuring: per kernel class, the variant kept (tier, store
    /// kind) and each candidate's fastest time; with a wisdom file
    /// ([`EngineConfig::wisdom`]), also the choices loaded from it (each candidate's time
    /// there the median of its samples). Empty for a named tier.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Engine, EngineConfig, TensorMut, TensorRef, Tier};
    /// let x = [1.0f32; 64];
    /// let mut out = [0.0f32; 64];
    /// let mut run = |engine: &Engine| -> selectjit::Result<()> {
    ///     for _ in 0..100 {
    ///         engine.select(
    ///             TensorRef::new(&[1u8; 64], &[64]),
    ///             TensorRef::new(&x, &[64]),
    ///             TensorRef::scalar(&[0.0]),
    ///             TensorMut::new(&mut out, &[64]),
    ///             Broadcast::Numpy,
    ///         )?;
    ///     }
    ///     Ok(())
    /// };
    /// let engine = Engine::new();
    /// run(&engine)?;
    /// let choices = engine.tier_choices();
    /// // One per kernel class measured (none where there was only one candidate variant; no
    /// // wisdom file here).
    /// assert_eq!(choices.len() as u64, engine.stats().tier_trials);
    /// // Each choice kept a variant of a tier this host runs, among the candidates it timed.
    /// for choice in &choices {
    ///     assert!(choice.chosen.tier.available());
    ///     assert!(choice.times_ns.iter().any(|&(v, _)| v == choice.chosen));
    /// }
    /// // A named tier is not measured.
    /// if let Some(best) = Tier::best() {
    ///     let named = Engine::with_config(EngineConfig::new().tier(best))?;
    ///     run(&named)?;
    ///     assert!(named.tier_choices().is_empty());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn tier_choices(&self) -> Vec<crate::tier::TierChoice> {
        self.lock_cache().choices()
    }

    /// What became of the engine's wisdom file ([`EngineConfig::wisdom`]) when the engine was
    /// built: none (`Off`), `Missing` (the first trial creates it), `Loaded`, or ignored
    /// whole, and why: `Stale` (another library version), `Foreign` (another CPU), `Corrupt`,
    /// `Unreadable`. An ignored file changes nothing but that trials run as without one.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use selectjit::{Engine, EngineConfig, WisdomStatus};
    /// let path = std::env::temp_dir().join(format!("selectjit-status-{}.txt", std::process::id()));
    /// std::fs::write(&path, "not a wisdom file\n")?;
    /// let engine = Engine::with_config(EngineConfig::new().wisdom(&path))?;
    /// if engine.codegen().is_some() {
    ///     let status = engine.wisdom_status();
    ///     assert!(matches!(status, WisdomStatus::Corrupt { line: 1, .. }), "{status}");
    ///     assert!(status.ignored());
    /// }
    /// # std::fs::remove_file(&path)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn wisdom_status(&self) -> WisdomStatus {
        self.wisdom_status.clone()
    }

    /// Drops every cached kernel (each is freed once no caller holds it; another thread's memo
    /// of its last kernel keeps that one until the thread's next call on another signature).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Engine, EngineConfig, TensorMut, TensorRef};
    /// let engine = Engine::with_config(EngineConfig::new().exact_after(1))?;
    /// let mut out = [0i32; 3];
    /// let call = |out: &mut [i32]| {
    ///     engine.select(
    ///         TensorRef::new(&[1, 0, 1], &[3]),
    ///         TensorRef::new(&[1, 2, 3], &[3]),
    ///         TensorRef::scalar(&[0]),
    ///         TensorMut::new(out, &[3]),
    ///         Broadcast::Numpy,
    ///     )
    /// };
    /// call(&mut out)?;
    /// assert_eq!(engine.stats().len, usize::from(engine.tier().is_some()));
    /// engine.clear_cache();
    /// assert_eq!(engine.stats().len, 0);
    /// call(&mut out)?; // compiled again (with a code generator)
    /// assert_eq!(out, [1, 0, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear_cache(&self) {
        self.lock_cache().clear();
        self.forget_memo();
    }

    /// Why code generation last failed (the call was then served by the static kernels).
    ///
    /// ```
    /// use selectjit::Engine;
    /// let engine = Engine::new();
    /// // `None` while the code generator has not failed; without one, why there is none.
    /// assert_eq!(
    ///     engine.last_codegen_error().is_some(),
    ///     engine.tier().is_none()
    /// );
    /// if let Some(e) = engine.last_codegen_error() {
    ///     assert!(!e.to_string().is_empty());
    /// }
    /// ```
    pub fn last_codegen_error(&self) -> Option<crate::error::Error> {
        self.last_codegen_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The engine's pool of freed output buffers ([`EngineConfig::output_pool`]), `None` when
    /// it has none: for bindings that hand its memory to another runtime (clone the `Arc` to
    /// keep the pool for buffers that may outlive the engine).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig};
    /// assert!(Engine::new().output_pool().is_some());
    /// let off = Engine::with_config(EngineConfig::new().output_pool(false))?;
    /// assert!(off.output_pool().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn output_pool(&self) -> Option<&Arc<OutputPool>> {
        self.output_pool.as_ref()
    }

    /// The figures of the engine's output pool (all zero without one): bytes and buffers held,
    /// hits and misses, bytes handed out and not freed yet.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// let engine = selectjit::Engine::new();
    /// drop(engine.output_buffer::<f32>(1 << 20)?); // 4 MiB: kept for the next one
    /// drop(engine.output_buffer::<f32>(1 << 20)?);
    /// let s = engine.output_pool_stats();
    /// assert_eq!((s.misses, s.hits, s.held_buffers, s.live_bytes), (1, 1, 1, 0));
    /// # Ok(())
    /// # }
    /// ```
    pub fn output_pool_stats(&self) -> OutputPoolStats {
        self.output_pool
            .as_ref()
            .map(|p| p.stats())
            .unwrap_or_default()
    }

    /// Releases every output buffer the engine's pool holds (buffers in use are not
    /// affected); the pool keeps working.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// let engine = selectjit::Engine::new();
    /// drop(engine.output_buffer::<u8>(8 << 20)?);
    /// assert!(engine.output_pool_stats().held_bytes >= 8 << 20);
    /// engine.trim_output_pool();
    /// assert_eq!(engine.output_pool_stats().held_bytes, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn trim_output_pool(&self) {
        if let Some(p) = &self.output_pool {
            p.trim();
        }
    }

    /// `len` zeroed elements for an output, from the engine's pool: dropped, the buffer goes
    /// back to it (a plain allocation when the engine has no pool). A recycled buffer of 1 MiB
    /// or more is cleared, which costs far less than the page faults of fresh memory.
    ///
    /// # Errors
    /// A size that overflows, or memory the allocator refuses.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Engine, TensorMut, TensorRef};
    /// let engine = Engine::new();
    /// let n = 1 << 20;
    /// let (mask, x) = (vec![1u8; n], vec![2.5f32; n]);
    /// for _ in 0..3 {
    ///     let mut out = engine.output_buffer::<f32>(n)?; // the same memory each time
    ///     engine.select(TensorRef::new(&mask, &[n]), TensorRef::new(&x, &[n]),
    ///                   TensorRef::scalar(&[0.0f32]), TensorMut::new(&mut out, &[n]),
    ///                   Broadcast::Numpy)?;
    ///     assert!(out.iter().all(|&v| v == 2.5));
    /// }
    /// assert_eq!(engine.output_pool_stats().hits, 2);
    /// assert!(engine.output_buffer::<u64>(usize::MAX).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn output_buffer<T: crate::dtype::Element>(&self, len: usize) -> Result<PooledBuf<T>> {
        PooledBuf::new(
            self.output_pool
                .as_ref()
                .unwrap_or_else(|| OutputPool::pass_through()),
            len,
        )
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, KernelCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record_codegen_error(&self, e: crate::error::Error) {
        *self
            .last_codegen_error
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(e);
    }
}

//! What an engine is asked to be: its backend and settings, with their defaults (and, when asked
//! for, the environment variables that change them, named in [`crate::env`]).

use crate::aot::AotTable;
use crate::cache::DEFAULT_CAPACITY;
use crate::env;
use crate::error::{Error, Result};
use crate::outpool::OutputPool;
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
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::Backend;
    /// assert_eq!(Backend::Static.name(), "static");
    /// assert_eq!("interp".parse::<Backend>()?, Backend::Interp);
    /// # Ok(())
    /// # }
    /// ```
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

/// Settings of an [`crate::Engine`]: a builder. [`EngineConfig::new`] (or `default()`) is the
/// defaults, independent of the process environment; [`EngineConfig::from_env`] starts from
/// the `SELECTJIT_*` variables ([`crate::env`]) when a program wants them to apply.
///
/// ```
/// use selectjit::{Backend, Engine, EngineConfig, Tier};
/// let config = EngineConfig::new().tier(Tier::Auto).threads(1).cache_capacity(256);
/// let engine = Engine::with_config(config)?;
/// assert_eq!(engine.backend(), Backend::Jit);
/// # Ok::<(), selectjit::Error>(())
/// ```
#[derive(Clone)]
pub struct EngineConfig {
    pub(crate) backend: Backend,
    pub(crate) cache_capacity: usize,
    pub(crate) verify: bool,
    pub(crate) exact_after: u32,
    pub(crate) threads: usize,
    pub(crate) parallel_min_bytes: usize,
    pub(crate) tier: Tier,
    pub(crate) nt_min_bytes: usize,
    pub(crate) runner: Option<std::sync::Arc<dyn crate::kernel::abi::CodeRunner>>,
    /// Cranelift's x86 `blendv` lane selects: `Some(false)` turns them off (the portable
    /// `bitselect` then runs, as on other architectures).
    pub(crate) blendv: Option<bool>,
    pub(crate) timer: Option<std::sync::Arc<dyn CallTimer>>,
    pub(crate) aot: Option<AotTable>,
    /// Where `Auto` keeps its measured choices across processes.
    pub(crate) wisdom: Option<std::path::PathBuf>,
    /// Whether the engine keeps a pool of freed output buffers, and its limits.
    pub(crate) output_pool: bool,
    pub(crate) output_pool_cap: usize,
    pub(crate) output_pool_max_age: std::time::Duration,
}

impl std::fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineConfig")
            .field("backend", &self.backend)
            .field("tier", &self.tier)
            .field("cache_capacity", &self.cache_capacity)
            .field("exact_after", &self.exact_after)
            .field("threads", &self.threads)
            .field("parallel_min_bytes", &self.parallel_min_bytes)
            .field("nt_min_bytes", &self.nt_min_bytes)
            .field("verify", &self.verify)
            .field("timer", &self.timer.is_some())
            .field("aot", &self.aot)
            .field("wisdom", &self.wisdom)
            .field("output_pool", &self.output_pool)
            .field("output_pool_cap", &self.output_pool_cap)
            .field("output_pool_max_age", &self.output_pool_max_age)
            .finish()
    }
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
            cache_capacity: DEFAULT_CAPACITY,
            verify: cfg!(debug_assertions),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            parallel_min_bytes: PARALLEL_MIN_BYTES,
            exact_after: 2,
            tier: Tier::Auto,
            nt_min_bytes: NT_MIN_BYTES,
            runner: None,
            blendv: None,
            timer: None,
            aot: None,
            wisdom: None,
            output_pool: true,
            output_pool_cap: OutputPool::DEFAULT_CAP,
            output_pool_max_age: OutputPool::DEFAULT_MAX_AGE,
        }
    }
}

/// A variable's value as a number, or an error naming it.
fn number<T: std::str::FromStr>(name: &str) -> Result<Option<T>> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().parse().map(Some).map_err(|_| {
                Error::Invalid(format!("{name}={v:?}: expected a non-negative integer"))
            })
        }
        _ => Ok(None),
    }
}

/// A switch's value: on or off, or an error naming the variable.
fn switch(name: &str) -> Result<Option<bool>> {
    match std::env::var(name) {
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" => Ok(None),
            "1" | "on" | "true" | "yes" => Ok(Some(true)),
            "0" | "off" | "false" | "no" => Ok(Some(false)),
            _ => Err(Error::Invalid(format!(
                "{name}={v:?}: expected 0, 1, off, on, false or true"
            ))),
        },
        Err(_) => Ok(None),
    }
}

impl EngineConfig {
    /// The defaults: the JIT backend, tier `Auto`, a cache of 1024 signatures, exact kernels
    /// from a signature's second sighting, every available core for calls of 1 MiB or more of
    /// output, non-temporal stores from 32 MiB, a pool of freed output buffers of up to 1 GiB.
    /// Reads no environment variable.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Backend, Engine, EngineConfig};
    /// let engine = Engine::with_config(EngineConfig::new())?;
    /// assert_eq!(engine.backend(), Backend::Jit);
    /// assert_eq!(engine.stats().capacity, 1024);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> EngineConfig {
        EngineConfig::default()
    }

    /// The defaults with the settings the environment gives: `SELECTJIT_CACHE_CAPACITY`,
    /// `SELECTJIT_EXACT_AFTER`, `SELECTJIT_PARALLEL_MIN_BYTES`, `SELECTJIT_NT_MIN_BYTES`
    /// (numbers), `SELECTJIT_TIER` (`auto`, `cranelift`, `avx2`, `avx512`),
    /// `SELECTJIT_WISDOM` (a path: [`EngineConfig::wisdom`]) and `SELECTJIT_OUTPUT_POOL` (`0`
    /// or `off`: no pool of output buffers, [`EngineConfig::output_pool`]); unset or empty
    /// variables keep the default.
    ///
    /// # Errors
    /// A variable that is set to something else than its kind of value (the error names it).
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig, env};
    /// let engine = Engine::with_config(EngineConfig::from_env()?)?;
    /// // SELECTJIT_CACHE_CAPACITY, if it is set, else the default.
    /// let capacity = match std::env::var(env::CACHE_CAPACITY) {
    ///     Ok(v) if !v.trim().is_empty() => v.trim().parse::<usize>().unwrap().max(1),
    ///     _ => 1024,
    /// };
    /// assert_eq!(engine.stats().capacity, capacity);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_env() -> Result<EngineConfig> {
        let mut c = EngineConfig::default();
        if let Some(n) = number::<usize>(env::CACHE_CAPACITY)? {
            c = c.cache_capacity(n);
        }
        if let Some(n) = number::<u32>(env::EXACT_AFTER)? {
            c = c.exact_after(n);
        }
        if let Some(n) = number::<usize>(env::PARALLEL_MIN_BYTES)? {
            c = c.parallel_min_bytes(n);
        }
        if let Some(n) = number::<usize>(env::NT_MIN_BYTES)? {
            c = c.nt_min_bytes(n);
        }
        if let Some(path) = std::env::var_os(env::WISDOM).filter(|p| !p.is_empty()) {
            c = c.wisdom(path);
        }
        if let Some(on) = switch(env::OUTPUT_POOL)? {
            c = c.output_pool(on);
        }
        Ok(c.tier(Tier::from_env()?))
    }

    /// A wisdom file: where the tier `Auto` keeps what it measured, per kernel class, across
    /// processes (default: none; `SELECTJIT_WISDOM` with [`EngineConfig::from_env`]). The
    /// engine loads each class's kept variant from it when it is built, so that signatures of
    /// classes it knows compile that variant without a trial, and rewrites it (atomically)
    /// after each trial, with the trial's times merged into the class's samples. A missing
    /// file is created; one of another library version or CPU, or a damaged one, is ignored
    /// whole ([`crate::Engine::wisdom_status`] says why) and replaced by the next trial. Only
    /// an engine of the `Jit` backend with the tier `Auto` uses it. Several engines or
    /// processes writing one file: the last write wins.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig, WisdomStatus};
    /// let path = std::env::temp_dir().join(format!("selectjit-wisdom-{}.txt", std::process::id()));
    /// let engine = Engine::with_config(EngineConfig::new().wisdom(&path))?;
    /// if engine.codegen().is_some() {
    ///     assert!(matches!(
    ///         engine.wisdom_status(),
    ///         WisdomStatus::Missing | WisdomStatus::Loaded { .. }
    ///     ));
    /// }
    /// # let _ = std::fs::remove_file(&path);
    /// # Ok(())
    /// # }
    /// ```
    pub fn wisdom(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.wisdom = Some(path.into());
        self
    }

    /// Which implementation runs the selects (default [`Backend::Jit`]).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Backend, Broadcast, Engine, EngineConfig, TensorMut, TensorRef};
    /// // The reference interpreter: no kernels, same results.
    /// let engine = Engine::with_config(EngineConfig::new().backend(Backend::Interp))?;
    /// let mut out = [0u8; 2];
    /// engine.select(
    ///     TensorRef::new(&[0, 1], &[2]),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[2u8]),
    ///     TensorMut::new(&mut out, &[2]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!((engine.backend(), out), (Backend::Interp, [2, 1]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// The code generator (default `Auto`: the tiers the host runs are timed on each kernel
    /// class's first calls and the fastest kept; a named tier is used for every kernel, with
    /// Cranelift for signatures an x86 tier does not cover).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig, Tier};
    /// // Only tiers this host runs can be named (`Tier::available`).
    /// for tier in Tier::host_tiers() {
    ///     let engine = Engine::with_config(EngineConfig::new().tier(tier))?;
    ///     assert_eq!(engine.tier(), Some(tier));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn tier(mut self, tier: Tier) -> Self {
        self.tier = tier;
        self
    }

    /// Kernels kept in the LRU cache (default 1024; at least 1).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig};
    /// assert_eq!(
    ///     Engine::with_config(EngineConfig::new().cache_capacity(16))?
    ///         .stats()
    ///         .capacity,
    ///     16
    /// );
    /// assert_eq!(
    ///     Engine::with_config(EngineConfig::new().cache_capacity(0))?
    ///         .stats()
    ///         .capacity,
    ///     1
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn cache_capacity(mut self, n: usize) -> Self {
        self.cache_capacity = n.max(1);
        self
    }

    /// How many times a signature is seen before its exact kernel is compiled; until then the
    /// shape-generic kernel of its pattern runs it (compiled once per pattern). 1 compiles the
    /// exact kernel on first sight; default 2.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Engine, EngineConfig, TensorMut, TensorRef};
    /// // Compile the exact kernel of a signature on its first call.
    /// let engine = Engine::with_config(EngineConfig::new().exact_after(1))?;
    /// let mut out = [0u8; 4];
    /// engine.select(
    ///     TensorRef::new(&[1, 0, 1, 0], &[4]),
    ///     TensorRef::scalar(&[1u8]),
    ///     TensorRef::scalar(&[0u8]),
    ///     TensorMut::new(&mut out, &[4]),
    ///     Broadcast::Numpy,
    /// )?;
    /// let stats = engine.stats();
    /// assert_eq!(stats.generic_runs, 0); // no shape-generic kernel ran
    /// assert_eq!(stats.compiles, u64::from(engine.tier().is_some()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn exact_after(mut self, n: u32) -> Self {
        self.exact_after = n;
        self
    }

    /// Threads a large call may be split across (default: the available parallelism; 1: calls
    /// stay on the calling thread).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig};
    /// assert_eq!(
    ///     Engine::with_config(EngineConfig::new().threads(4))?.threads(),
    ///     4
    /// );
    /// assert_eq!(
    ///     Engine::with_config(EngineConfig::new().threads(0))?.threads(),
    ///     1
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n.max(1);
        self
    }

    /// Output size in bytes from which a call may be split across the threads (default
    /// [`PARALLEL_MIN_BYTES`]); a kernel times its first such calls on one thread and on all,
    /// and keeps the faster way.
    ///
    /// ```
    /// use selectjit::{EngineConfig, PARALLEL_MIN_BYTES};
    /// let config = EngineConfig::new()
    ///     .threads(4)
    ///     .parallel_min_bytes(4 * PARALLEL_MIN_BYTES);
    /// assert!(
    ///     format!("{config:?}")
    ///         .contains(&format!("parallel_min_bytes: {}", 4 * PARALLEL_MIN_BYTES))
    /// );
    /// ```
    pub fn parallel_min_bytes(mut self, n: usize) -> Self {
        self.parallel_min_bytes = n;
        self
    }

    /// x86 tiers: exact kernels whose output has at least this many bytes store it
    /// non-temporally, bypassing the caches (default [`NT_MIN_BYTES`]; `usize::MAX`: never).
    /// `Auto` measures non-temporal stores against ordinary ones from a quarter of it.
    ///
    /// ```
    /// use selectjit::EngineConfig;
    /// let config = EngineConfig::new().nt_min_bytes(usize::MAX); // never non-temporal
    /// assert!(format!("{config:?}").contains(&format!("nt_min_bytes: {}", usize::MAX)));
    /// ```
    pub fn nt_min_bytes(mut self, n: usize) -> Self {
        self.nt_min_bytes = n;
        self
    }

    /// Run the Cranelift verifier on every Cranelift kernel (default: in debug builds).
    ///
    /// ```
    /// use selectjit::EngineConfig;
    /// assert!(format!("{:?}", EngineConfig::new().verify(true)).contains("verify: true"));
    /// assert!(format!("{:?}", EngineConfig::new().verify(false)).contains("verify: false"));
    /// ```
    pub fn verify(mut self, on: bool) -> Self {
        self.verify = on;
        self
    }

    /// What times the calls behind the engine's measured choices (default: wall-clock time).
    /// Tests give one that makes the choices deterministic.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{
    ///     Broadcast, CallTimer, Engine, EngineConfig, TensorMut, TensorRef, Variant,
    /// };
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// /// Counts the timed calls, and says each took 1 ns: ties, so choices are deterministic.
    /// #[derive(Debug, Default)]
    /// struct Counter(AtomicU64);
    /// impl CallTimer for Counter {
    ///     fn time(&self, _: Variant, _split: bool, call: &mut dyn FnMut()) -> u64 {
    ///         call();
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///         1
    ///     }
    /// }
    /// let timer = Arc::new(Counter::default());
    /// let engine = Engine::with_config(EngineConfig::new().timer(timer.clone()))?;
    /// let mut out = [0u8; 16];
    /// for _ in 0..40 {
    ///     engine.select(
    ///         TensorRef::new(&[1u8; 16], &[16]),
    ///         TensorRef::scalar(&[1u8]),
    ///         TensorRef::scalar(&[0u8]),
    ///         TensorMut::new(&mut out, &[16]),
    ///         Broadcast::Numpy,
    ///     )?;
    /// }
    /// assert_eq!(out, [1; 16]);
    /// assert_eq!(timer.0.load(Ordering::Relaxed), engine.stats().trial_calls);
    /// # Ok(())
    /// # }
    /// ```
    pub fn timer(mut self, timer: std::sync::Arc<dyn CallTimer>) -> Self {
        self.timer = Some(timer);
        self
    }

    /// Kernels compiled ahead of time ([`crate::aot`]). A signature whose exact kernel the
    /// table has runs it, with no code generation. Other signatures: with the `Jit` backend,
    /// the engine's policy, taking the table's shape-generic kernel of the pattern instead of
    /// compiling one; with the `Static` backend (no code generation at all, for hosts that
    /// forbid it), the table's shape-generic kernel of the pattern, else the static kernels.
    /// The `Interp` backend ignores it.
    ///
    /// ```
    /// # use selectjit::aot::{AotTable, SelectjitAotTable, AOT_MAGIC, AOT_VERSION};
    /// # fn empty_table() -> selectjit::Result<AotTable> {
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 0, keys_len: 0, reserved: 0,
    /// #         checksum: 0xcbf2_9ce4_8422_2325, triple, features: [0; 256],
    /// #         entries: std::ptr::null(), keys: std::ptr::null(),
    /// #     }));
    /// #     // SAFETY: a table without entries that lives for the rest of the program.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Backend, Engine, EngineConfig};
    /// // A linked table (see `selectjit::aot`); here one without kernels.
    /// let table = empty_table()?;
    /// let engine = Engine::with_config(
    ///     EngineConfig::new()
    ///         .backend(Backend::Static)
    ///         .aot(table.clone()),
    /// )?;
    /// let stats = engine.stats();
    /// assert_eq!(
    ///     (stats.aot_exact_kernels, stats.aot_generic_kernels),
    ///     (table.exact_len(), table.generic_len())
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn aot(mut self, table: AotTable) -> Self {
        self.aot = Some(table);
        self
    }

    /// x86 tiers on a host that lacks their instructions: run the kernels through this runner
    /// (the emulator of the workspace's `selectjit-emu` crate implements
    /// [`crate::codegen::CodeRunner`]) instead of refusing the tier. For verifying the
    /// generator: emulated kernels are slow. `None` removes a runner.
    ///
    /// ```
    /// use selectjit::EngineConfig;
    /// let config = EngineConfig::new().runner(None);
    /// assert!(!config.has_runner());
    /// ```
    pub fn runner(
        mut self,
        runner: impl Into<Option<std::sync::Arc<dyn crate::kernel::abi::CodeRunner>>>,
    ) -> Self {
        self.runner = runner.into();
        self
    }

    /// The tier and the code generator's options this configuration builds an engine's code
    /// generator with: what a tool that compiles kernels the way an engine would passes to
    /// [`crate::codegen::CodeGen::new`].
    ///
    /// ```
    /// use selectjit::{EngineConfig, Tier};
    /// let (tier, opts) = EngineConfig::new().tier(Tier::Auto).nt_min_bytes(1 << 20).codegen_parts();
    /// assert_eq!((tier, opts.nt_min_bytes), (Tier::Auto, 1 << 20));
    /// assert!(opts.runner.is_none());
    /// ```
    pub fn codegen_parts(&self) -> (Tier, crate::jit::CodeGenOptions) {
        let opts = crate::jit::CodeGenOptions {
            verify: self.verify,
            nt_min_bytes: self.nt_min_bytes,
            runner: self.runner.clone(),
            blendv: self.blendv,
        };
        (self.tier, opts)
    }

    /// Whether kernels of x86 tiers the host lacks run through a runner
    /// ([`EngineConfig::runner`]).
    ///
    /// ```
    /// assert!(!selectjit::EngineConfig::new().has_runner());
    /// ```
    pub fn has_runner(&self) -> bool {
        self.runner.is_some()
    }

    /// Whether Cranelift may use x86 `blendv` for lane selects (default: where the host has
    /// it); off, x86-64 runs the portable `bitselect` code other architectures run, which
    /// gives the same bytes (tests run both).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Engine, EngineConfig, TensorMut, TensorRef, Tier};
    /// if Tier::Cranelift.available() {
    ///     let config = EngineConfig::new().tier(Tier::Cranelift).cranelift_blendv(false);
    ///     let engine = Engine::with_config(config)?;
    ///     let mut out = [0f32; 3];
    ///     engine.select(TensorRef::new(&[1, 0, 1], &[3]), TensorRef::new(&[1f32, 2., 3.], &[3]),
    ///                   TensorRef::scalar(&[-0.0f32]), TensorMut::new(&mut out, &[3]),
    ///                   Broadcast::Numpy)?;
    ///     assert_eq!(out.map(f32::to_bits), [1f32, -0.0, 3.].map(f32::to_bits));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn cranelift_blendv(mut self, on: bool) -> Self {
        self.blendv = Some(on);
        self
    }

    /// Whether the engine keeps a pool of freed output buffers (default: on;
    /// `SELECTJIT_OUTPUT_POOL=0` with [`EngineConfig::from_env`] turns it off). Outputs the
    /// engine's clients allocate through it ([`crate::Engine::output_buffer`], the Python
    /// package's arrays) of 1 MiB or more are recycled instead of being faulted in afresh
    /// from the operating system on every call. Off, they are plain allocations.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig};
    /// let engine = Engine::with_config(EngineConfig::new().output_pool(false))?;
    /// assert!(engine.output_pool().is_none());
    /// let buf = engine.output_buffer::<f32>(1 << 20)?; // a plain allocation
    /// assert_eq!(buf.len(), 1 << 20);
    /// # Ok(())
    /// # }
    /// ```
    pub fn output_pool(mut self, on: bool) -> Self {
        self.output_pool = on;
        self
    }

    /// Bytes of freed output buffers the pool holds at most (default
    /// [`OutputPool::DEFAULT_CAP`], 1 GiB); the oldest are released to make room.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig};
    /// let engine = Engine::with_config(EngineConfig::new().output_pool_cap(64 << 20))?;
    /// assert_eq!(engine.output_pool_stats().cap_bytes, 64 << 20);
    /// # Ok(())
    /// # }
    /// ```
    pub fn output_pool_cap(mut self, bytes: usize) -> Self {
        self.output_pool_cap = bytes;
        self
    }

    /// How long a freed output buffer may stay unused in the pool (default
    /// [`OutputPool::DEFAULT_MAX_AGE`], 2 s): older ones are released at the pool's next
    /// operation (an allocation, a free, its statistics) or by
    /// [`crate::Engine::trim_output_pool`].
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Engine, EngineConfig};
    /// use std::time::Duration;
    /// let engine = Engine::with_config(
    ///     EngineConfig::new().output_pool_max_age(Duration::from_millis(1)),
    /// )?;
    /// drop(engine.output_buffer::<u8>(2 << 20)?); // held for reuse...
    /// std::thread::sleep(Duration::from_millis(20));
    /// assert_eq!(engine.output_pool_stats().held_bytes, 0); // ...until it aged out
    /// # Ok(())
    /// # }
    /// ```
    pub fn output_pool_max_age(mut self, age: std::time::Duration) -> Self {
        self.output_pool_max_age = age;
        self
    }
}

//! The public face: validate buffers, infer the shape, and run the chosen backend.

use std::sync::{Arc, Mutex};

use crate::aot::AotTable;
use crate::cache::{CacheStats, KernelCache, Lookup, capacity_from_env};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result, ShapeFmt};
use crate::interp::{self, Src};
use crate::jit::{CodeGen, CodeGenOptions, Jit, Kernel, Pattern, Tier};
use crate::kernels::{self, Ptrs};
use crate::plan::{COND, ELSE, OUT, Signature, THEN, plan, plan_contiguous, plan_layout};
use crate::pool::Pool;
use crate::shape::{Broadcast, Dims, Strides, broadcast_shapes, strides_over};
use crate::shape::{check_shape, contiguous_strides, numel};
use crate::split::Way;
use crate::tensor::{TensorMut, TensorRef, check_output_distinct, validate};

/// Which implementation runs the selects of an [`Engine`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Backend {
    /// Kernels compiled per signature by the engine's code-generation [`Tier`], cached (falls
    /// back to `Static` if code generation fails).
    #[default]
    Jit,
    /// Ahead-of-time Rust kernels with run-time CPU dispatch.
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

/// One operand's description in elements: buffer length, shape, optional strides, and the
/// index of its first element.
#[derive(Clone, Copy)]
struct Desc<'a> {
    len: usize,
    shape: &'a [usize],
    strides: Option<&'a [isize]>,
    offset: usize,
}

impl<'a, T> From<&TensorRef<'a, T>> for Desc<'a> {
    fn from(t: &TensorRef<'a, T>) -> Self {
        Desc {
            len: t.data().len(),
            shape: t.shape(),
            strides: t.strides(),
            offset: t.offset(),
        }
    }
}

/// A validated call: the output shape, the strides of cond, then, else and out over it, and the
/// index of each operand's element at output coordinate `[0, 0, ...]`.
pub(crate) struct Checked {
    pub out: Dims,
    pub st: [Strides; 4],
    pub off: [usize; 4],
}

/// Validates all four operands and infers the broadcast. Nothing is read before this passes.
fn check(mode: Broadcast, cond: Desc, then: Desc, else_: Desc, out: Desc) -> Result<Checked> {
    let v = |what, d: Desc| validate(what, d.len, d.shape, d.strides, d.offset);
    let (lc, lt, le) = (v("cond", cond)?, v("then", then)?, v("else", else_)?);
    let b = broadcast_shapes(mode, cond.shape, then.shape, else_.shape)?;
    if out.shape != b.out.as_slice() {
        return Err(Error::OutputShape {
            got: ShapeFmt(out.shape).to_string(),
            expected: ShapeFmt(&b.out).to_string(),
        });
    }
    let lo = v("output", out)?;
    check_output_distinct(out.shape, &lo.strides)?;
    Ok(Checked {
        st: [
            strides_over(cond.shape, &lc.strides, b.cond, &b.out),
            strides_over(then.shape, &lt.strides, b.then, &b.out),
            strides_over(else_.shape, &le.strides, b.else_, &b.out),
            lo.strides,
        ],
        off: [lc.offset, lt.offset, le.offset, lo.offset],
        out: b.out,
    })
}

/// Settings of an [`Engine`].
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
    /// The code generator (default `Auto`: AVX-512, else AVX2 on x86-64, else Cranelift; or
    /// `SELECTJIT_TIER`). Signatures the x86 tiers do not cover are compiled by Cranelift.
    pub tier: Tier,
    /// x86 tiers: exact kernels whose output has at least this many bytes store it with
    /// non-temporal stores, bypassing the caches (default [`NT_MIN_BYTES`], or
    /// `SELECTJIT_NT_MIN_BYTES`; `usize::MAX` never).
    pub nt_min_bytes: usize,
    /// x86 tiers on a host that lacks their instructions: run the kernels in the built-in
    /// emulator (every memory access checked; slow) instead of refusing the tier. For verifying
    /// the generator, e.g. AVX-512 kernels on an AVX2 machine.
    pub emulate: bool,
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

/// The environment variable that overrides [`NT_MIN_BYTES`].
pub const NT_MIN_BYTES_ENV: &str = "SELECTJIT_NT_MIN_BYTES";

/// Default output size from which a call is split across the engine's threads.
pub const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// The environment variable that overrides [`PARALLEL_MIN_BYTES`].
pub const PARALLEL_MIN_BYTES_ENV: &str = "SELECTJIT_PARALLEL_MIN_BYTES";

/// A kernel call's pointers, shared by the threads that run disjoint outer ranges.
#[derive(Clone, Copy)]
struct SharedPtrs(Ptrs);
// SAFETY: the pointers come from validated buffers that outlive the parallel section (it ends
// before `run_planned` returns); threads write disjoint outer ranges of an output whose
// elements are distinct (checked), and only read the inputs.
unsafe impl Send for SharedPtrs {}
// SAFETY: as for `Send`; the wrapper is only copied, never mutated.
unsafe impl Sync for SharedPtrs {}

/// A positive integer from the environment variable `name`, or `default`.
fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            backend: Backend::default(),
            cache_capacity: capacity_from_env(),
            verify: cfg!(debug_assertions),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            parallel_min_bytes: env_usize(PARALLEL_MIN_BYTES_ENV, PARALLEL_MIN_BYTES),
            exact_after: std::env::var("SELECTJIT_EXACT_AFTER")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(2),
            // An unknown name in SELECTJIT_TIER is reported by `Engine::try_with_config` and
            // recorded by `Engine::with_config` (see `Engine::last_codegen_error`).
            tier: Tier::from_env().unwrap_or(Tier::Auto),
            nt_min_bytes: env_usize(NT_MIN_BYTES_ENV, NT_MIN_BYTES),
            emulate: false,
            aot: None,
        }
    }
}

/// Writes one diagnostic line to stderr when `SELECTJIT_VERBOSE` is set to a non-empty value
/// other than `0` (read once per process).
fn verbose(line: impl FnOnce() -> String) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let on = *ON.get_or_init(|| {
        std::env::var("SELECTJIT_VERBOSE").is_ok_and(|v| !v.is_empty() && v != "0")
    });
    if on {
        eprintln!("selectjit_verbose,{}", line());
    }
}

/// A call planned once by [`Engine::prepare`] for contiguous row-major buffers, with its kernel
/// bound. `Send + Sync`; it keeps its kernel alive even after the engine's cache evicts it.
#[derive(Debug, Clone)]
pub struct Prepared {
    dtype: DType,
    /// Elements of cond, then, else and out.
    lens: [usize; 4],
    out_shape: Vec<usize>,
    /// `None`: the output is empty.
    sig: Option<Signature>,
    /// `None` with a signature: the static kernels run it.
    kernel: Option<Arc<Kernel>>,
    /// Strides over the output, for an interpreter engine.
    interp: Option<[Vec<isize>; 4]>,
}

impl Prepared {
    /// The element type the call was prepared for.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The output shape.
    pub fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    /// Whether the call runs JIT code (otherwise the static kernels or the interpreter).
    pub fn is_jit(&self) -> bool {
        self.kernel.is_some()
    }

    /// Runs the prepared call on typed contiguous buffers. `T` must be the prepared dtype.
    pub fn run<T: Element>(
        &self,
        cond: &[u8],
        then: &[T],
        else_: &[T],
        out: &mut [T],
    ) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(Error::DType(format!(
                "prepared for {} but called with {}",
                self.dtype,
                T::DTYPE
            )));
        }
        self.run_bytes(
            cond,
            bytemuck::cast_slice(then),
            bytemuck::cast_slice(else_),
            bytemuck::cast_slice_mut(out),
        )
    }

    /// Runs the prepared call on raw little-endian element bytes.
    pub fn run_bytes(&self, cond: &[u8], then: &[u8], else_: &[u8], out: &mut [u8]) -> Result<()> {
        let w = self.dtype.width();
        let have = [cond.len(), then.len() / w, else_.len() / w, out.len() / w];
        for (k, what) in ["cond", "then", "else", "output"].into_iter().enumerate() {
            if have[k] < self.lens[k] {
                return Err(Error::Layout {
                    what,
                    msg: format!(
                        "buffer holds {} elements, the prepared call needs {}",
                        have[k], self.lens[k]
                    ),
                });
            }
        }
        let Some(sig) = &self.sig else {
            return Ok(());
        };
        if let Some(st) = &self.interp {
            let c = Checked {
                out: self.out_shape.iter().copied().collect(),
                st: std::array::from_fn(|k| st[k].iter().copied().collect()),
                off: [0; 4],
            };
            let d = |len| Desc {
                len,
                shape: &[],
                strides: None,
                offset: 0,
            };
            interp_bytes(
                w,
                &c,
                cond,
                &Operand::Buf(then, d(have[1])),
                &Operand::Buf(else_, d(have[2])),
                out,
            );
            return Ok(());
        }
        let p = Ptrs {
            cond: cond.as_ptr(),
            then: then.as_ptr(),
            else_: else_.as_ptr(),
            out: out.as_mut_ptr(),
        };
        match &self.kernel {
            // SAFETY: every buffer holds at least the elements of its contiguous shape (checked
            // above), which is what `sig` was planned from; `out` is a `&mut` borrow, so it
            // overlaps no input.
            Some(k) => unsafe { k.run(sig, p, 0, sig.outer()) },
            // SAFETY: as above.
            None => unsafe { kernels::run(sig, p, 0, sig.outer()) },
        }
        Ok(())
    }
}

/// The common case checked cheaply: no explicit strides (so no offset either) and one shape for
/// all four operands (a valid call in every broadcast mode). Returns the element count when every buffer holds it and
/// the shape is within the limits; `None` sends the call down the general path, which reports
/// any error.
fn same_contiguous(ops: &[Desc; 4]) -> Option<usize> {
    let shape = ops[3].shape;
    if ops
        .iter()
        .any(|d| d.strides.is_some() || d.offset != 0 || d.shape != shape)
        || check_shape("output", shape).is_err()
    {
        return None;
    }
    let n: usize = shape.iter().product();
    ops.iter().all(|d| d.len >= n).then_some(n)
}

/// Selects with a chosen backend. `Send + Sync`: share one engine between threads.
pub struct Engine {
    config: EngineConfig,
    /// The code generators, or why there are none (the engine then runs the static kernels).
    jit: std::result::Result<CodeGen, String>,
    cache: Mutex<KernelCache>,
    last_codegen_error: Mutex<Option<String>>,
    /// Worker threads for large calls, built on first use.
    pool: std::sync::OnceLock<Option<Pool>>,
    /// Identifies the engine in the per-thread memo.
    id: u64,
    /// Calls served by the per-thread memo (counted as cache hits).
    memo_hits: std::sync::atomic::AtomicU64,
    /// Calls run by an exact kernel of the AOT table, by a shape-generic kernel of the table,
    /// and by the static kernels.
    runs: [std::sync::atomic::AtomicU64; 3],
    /// Why the AOT table given to [`Engine::with_aot`] was rejected.
    aot_error: Option<String>,
}

/// Indices of `Engine::runs`.
const AOT_EXACT_RUNS: usize = 0;
const AOT_GENERIC_RUNS: usize = 1;
const STATIC_RUNS: usize = 2;

/// The last exact kernel a thread got from an engine.
struct Memo {
    engine: u64,
    sig: Signature,
    kernel: Arc<Kernel>,
    /// `(width, n)` when `sig` is the plan of `n` contiguous elements of one shape for all four
    /// operands, so that such calls find the kernel without planning.
    contiguous: Option<(usize, usize)>,
}

thread_local! {
    /// The last exact kernel this thread got from an engine.
    static MEMO: std::cell::RefCell<Option<Memo>> = const { std::cell::RefCell::new(None) };
}

static NEXT_ENGINE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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
    /// tier this host cannot run), the engine serves every call with the static kernels and
    /// [`Engine::last_codegen_error`] says why; [`Engine::try_with_config`] reports it instead.
    pub fn with_config(config: EngineConfig) -> Engine {
        let jit = match config.backend {
            Backend::Jit => Engine::codegen_for(&config).map_err(|e| e.to_string()),
            _ => Err("the engine's backend is not jit".to_string()),
        };
        Engine::assemble(config, jit)
    }

    /// An engine with the given settings, or the reason its JIT backend cannot be set up (an
    /// unknown `SELECTJIT_TIER`, a tier the host cannot run, no code generator for the host).
    pub fn try_with_config(config: EngineConfig) -> Result<Engine> {
        let jit = match config.backend {
            Backend::Jit => Ok(Engine::codegen_for(&config)?),
            _ => Err("the engine's backend is not jit".to_string()),
        };
        Ok(Engine::assemble(config, jit))
    }

    fn codegen_for(config: &EngineConfig) -> Result<CodeGen> {
        // The default configuration falls back to `Auto` on an unknown SELECTJIT_TIER: say so.
        if config.tier == Tier::Auto {
            Tier::from_env()?;
        }
        CodeGen::new(
            config.tier,
            CodeGenOptions {
                verify: config.verify,
                nt_min_bytes: config.nt_min_bytes,
                emulate: config.emulate,
            },
        )
    }

    /// An engine that runs kernels from the given Cranelift code generator (e.g. one configured
    /// with [`Jit::set_blendv`]); the backend is `Jit`, the tier Cranelift.
    pub fn with_jit(config: EngineConfig, jit: Jit) -> Engine {
        Engine::assemble(
            EngineConfig {
                backend: Backend::Jit,
                tier: Tier::Cranelift,
                ..config
            },
            Ok(CodeGen::from_cranelift(jit)),
        )
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

    fn assemble(config: EngineConfig, jit: std::result::Result<CodeGen, String>) -> Engine {
        let last = jit
            .as_ref()
            .err()
            .filter(|_| config.backend == Backend::Jit)
            .cloned();
        Engine {
            id: NEXT_ENGINE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            memo_hits: std::sync::atomic::AtomicU64::new(0),
            runs: Default::default(),
            aot_error: None,
            pool: std::sync::OnceLock::new(),
            cache: Mutex::new(KernelCache::new(config.cache_capacity)),
            jit,
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
    pub fn codegen(&self) -> Option<&CodeGen> {
        self.jit.as_ref().ok()
    }

    /// The tier that compiles this engine's kernels (`None` without a code generator).
    pub fn tier(&self) -> Option<Tier> {
        self.codegen().map(CodeGen::tier)
    }

    /// Cache counters: hits, misses, evictions, compilations and their time.
    pub fn stats(&self) -> CacheStats {
        let mut s = self.cache.lock().unwrap_or_else(|p| p.into_inner()).stats();
        let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
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

    /// Drops every cached kernel (each is freed once no caller holds it; a thread's memo of its
    /// last kernel keeps that one until the thread's next call on another signature).
    pub fn clear_cache(&self) {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
        MEMO.with(|m| {
            let mut m = m.borrow_mut();
            if m.as_ref().is_some_and(|memo| memo.engine == self.id) {
                *m = None;
            }
        });
    }

    /// Why code generation last failed (the call was then served by the static kernels).
    pub fn last_codegen_error(&self) -> Option<String> {
        self.last_codegen_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The kernel for `sig` under the engine's policy: the exact kernel of the AOT table when it
    /// has one; else, with a code generator, its exact kernel when the signature is hot
    /// (compiled on the call that makes it so), otherwise the shape-generic kernel of its
    /// pattern (the AOT table's when it has one); without a code generator, the AOT table's
    /// shape-generic kernel. `None` when there is none or code generation failed (recorded),
    /// so the caller runs the static kernels.
    pub fn kernel(&self, sig: &Signature) -> Option<Arc<Kernel>> {
        self.kernel_with(sig, self.config.exact_after)
    }

    fn kernel_with(&self, sig: &Signature, exact_after: u32) -> Option<Arc<Kernel>> {
        if let Some(k) = self.aot_kernel(sig, false) {
            return Some(k);
        }
        let Some(jit) = self.jit.as_ref().ok() else {
            return self.aot_kernel(sig, true);
        };
        let k = self
            .kernel_locked(jit, sig, exact_after)
            .or_else(|| self.aot_kernel(sig, true))?;
        // Kernels of the AOT table are not memoised: their runs are counted as such.
        if !k.is_generic() && !k.is_linked() {
            let n = sig.numel();
            let contiguous =
                (plan_contiguous(sig.width, n).as_ref() == Some(sig)).then_some((sig.width, n));
            MEMO.with(|m| {
                *m.borrow_mut() = Some(Memo {
                    engine: self.id,
                    sig: sig.clone(),
                    kernel: k.clone(),
                    contiguous,
                })
            });
        }
        Some(k)
    }

    /// The AOT table's exact kernel of `sig`, or (`generic`) its shape-generic kernel of `sig`'s
    /// pattern; counts the run.
    fn aot_kernel(&self, sig: &Signature, generic: bool) -> Option<Arc<Kernel>> {
        let t = self.config.aot.as_ref()?;
        let (k, which) = if generic {
            (t.generic(&Pattern::of(sig))?, AOT_GENERIC_RUNS)
        } else {
            (t.exact(sig)?, AOT_EXACT_RUNS)
        };
        self.runs[which].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(k.clone())
    }

    /// Runs `sig` with this thread's last exact kernel of this engine, if it is `sig`'s:
    /// repeated calls skip the shared cache (no lock, no hashing, no reference counting).
    /// Returns false when there is no such kernel.
    fn run_memo(&self, sig: &Signature, p: Ptrs, outer: usize) -> bool {
        MEMO.with(|m| {
            let m = m.borrow();
            match &*m {
                Some(memo) if memo.engine == self.id && memo.sig == *sig => {
                    self.memo_hits
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    // SAFETY: as in `run_planned`, whose contract the caller upholds: the
                    // kernel is the exact kernel of `sig` and the range is the whole outer
                    // dimension.
                    unsafe { memo.kernel.run(sig, p, 0, outer) };
                    true
                }
                _ => false,
            }
        })
    }

    /// [`Engine::run_memo`] for `n` contiguous elements of one shape for all four operands,
    /// without planning: the memo knows whether its signature is that call's plan.
    fn run_memo_contiguous(&self, width: usize, n: usize, p: Ptrs, out_bytes: usize) -> bool {
        if self.splits(out_bytes, n) {
            return false;
        }
        MEMO.with(|m| {
            let m = m.borrow();
            match &*m {
                Some(memo) if memo.engine == self.id && memo.contiguous == Some((width, n)) => {
                    self.memo_hits
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    // SAFETY: the caller validated the four buffers for `n` contiguous
                    // elements, which is exactly the layout `memo.sig` was planned from
                    // (`plan_contiguous(width, n)`); the range is its whole outer dimension.
                    unsafe { memo.kernel.run(&memo.sig, p, 0, memo.sig.outer()) };
                    true
                }
                _ => false,
            }
        })
    }

    /// Whether a call with `out_bytes` of output and `outer` outer indices may be split across
    /// threads.
    fn splits(&self, out_bytes: usize, outer: usize) -> bool {
        out_bytes >= self.config.parallel_min_bytes && outer >= 2 && self.config.threads >= 2
    }

    fn kernel_locked(
        &self,
        jit: &CodeGen,
        sig: &Signature,
        exact_after: u32,
    ) -> Option<Arc<Kernel>> {
        let (what, evicted) = self.lock_cache().lookup(sig, exact_after);
        if let Some(old) = evicted {
            verbose(|| format!("evict,{old}"));
        }
        match what {
            Lookup::Exact(k) => Some(k),
            Lookup::Failed => None,
            Lookup::Generic => self.generic_kernel(jit, sig),
            Lookup::Compile => {
                // Compile outside the cache lock, so that hits of other threads are not held up.
                let t = std::time::Instant::now();
                let k = jit.compile(sig).map(Arc::new);
                let us = t.elapsed().as_micros() as u64;
                let k = match k {
                    Ok(k) => {
                        verbose(|| {
                            format!("compile,{},{sig},{us}us,{}B", k.tier(), k.code_bytes())
                        });
                        Some(k)
                    }
                    Err(e) => {
                        verbose(|| format!("compile,failed,{sig},{us}us,{e}"));
                        self.record_codegen_error(format!("{sig}: {e}"));
                        None
                    }
                };
                let (k, evicted) = self.lock_cache().insert(sig.clone(), k, us);
                if let Some(old) = evicted {
                    verbose(|| format!("evict,{old}"));
                }
                k
            }
        }
    }

    /// The shape-generic kernel for `sig`'s pattern, compiled on first use.
    fn generic_kernel(&self, jit: &CodeGen, sig: &Signature) -> Option<Arc<Kernel>> {
        if let Some(k) = self.aot_kernel(sig, true) {
            return Some(k);
        }
        let p = Pattern::of(sig);
        if let Some(k) = self.lock_cache().generic(&p) {
            return Some(k);
        }
        let t = std::time::Instant::now();
        match jit.compile_generic(&p) {
            Ok(k) => {
                let us = t.elapsed().as_micros() as u64;
                verbose(|| {
                    format!(
                        "compile,{}-generic,{p},{us}us,{}B",
                        k.tier(),
                        k.code_bytes()
                    )
                });
                Some(self.lock_cache().insert_generic(p, Arc::new(k), us))
            }
            Err(e) => {
                verbose(|| format!("compile,failed,{p},{e}"));
                self.record_codegen_error(format!("{p}: {e}"));
                None
            }
        }
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, KernelCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record_codegen_error(&self, e: String) {
        *self
            .last_codegen_error
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    /// Plans a call once for contiguous buffers of the given shapes, and binds its kernel: the
    /// returned [`Prepared`] runs it with only buffer-length checks (no shape inference, no
    /// hashing, no locking).
    pub fn prepare(
        &self,
        dtype: DType,
        cond: &[usize],
        then: &[usize],
        else_: &[usize],
        mode: Broadcast,
    ) -> Result<Prepared> {
        let b = broadcast_shapes(mode, cond, then, else_)?;
        let st = |s: &[usize], p| strides_over(s, &contiguous_strides(s), p, &b.out);
        let so = contiguous_strides(&b.out);
        let (sc, sth, se) = (st(cond, b.cond), st(then, b.then), st(else_, b.else_));
        let sig = plan(dtype.width(), &b.out, [&sc, &sth, &se, &so]);
        // A prepared call is meant to be run many times: its exact kernel, at once.
        let kernel = match (&sig, self.config.backend) {
            (Some(_), Backend::Interp) | (None, _) => None,
            (Some(s), _) => self.kernel_with(s, 1),
        };
        Ok(Prepared {
            dtype,
            lens: [numel(cond), numel(then), numel(else_), numel(&b.out)],
            out_shape: b.out.to_vec(),
            interp: (self.config.backend == Backend::Interp)
                .then(|| [sc.to_vec(), sth.to_vec(), se.to_vec(), so.to_vec()]),
            sig,
            kernel,
        })
    }

    /// `out = cond ? then : else` with broadcasting under `mode`. `cond` bytes: any non-zero byte
    /// is true. `out` must have the broadcast output shape. Views may have any strides,
    /// negative ones included (with the offset of their first element, see
    /// [`TensorRef::with_layout`]). Every buffer is checked against its shape, strides and
    /// offset before anything is read or written; on error `out` is untouched.
    pub fn select<T: Element>(
        &self,
        cond: TensorRef<'_, u8>,
        then: TensorRef<'_, T>,
        else_: TensorRef<'_, T>,
        out: TensorMut<'_, T>,
        mode: Broadcast,
    ) -> Result<()> {
        let (o, shape, strides, offset) = out.into_parts();
        let ob: &mut [u8] = bytemuck::cast_slice_mut(o);
        self.run_bytes(
            T::DTYPE.width(),
            mode,
            cond,
            Operand::Buf(bytemuck::cast_slice(then.data()), (&then).into()),
            Operand::Buf(bytemuck::cast_slice(else_.data()), (&else_).into()),
            ob,
            (shape, strides, offset),
        )
    }

    /// In place: `inout` holds `then` (or `else`, per `role`) on entry and the result on return.
    /// Its shape must be the broadcast output shape; it may have any non-overlapping layout,
    /// reversed included.
    pub fn select_in_place<T: Element>(
        &self,
        cond: TensorRef<'_, u8>,
        inout: TensorMut<'_, T>,
        role: InPlace,
        other: TensorRef<'_, T>,
        mode: Broadcast,
    ) -> Result<()> {
        let (o, shape, strides, offset) = inout.into_parts();
        let ob: &mut [u8] = bytemuck::cast_slice_mut(o);
        let other = Operand::Buf(bytemuck::cast_slice(other.data()), (&other).into());
        let (t, e) = match role {
            InPlace::Then => (Operand::Out, other),
            InPlace::Else => (other, Operand::Out),
        };
        let w = T::DTYPE.width();
        self.run_bytes(w, mode, cond, t, e, ob, (shape, strides, offset))
    }

    /// Byte-level [`Engine::select_in_place`] for a run-time `dtype`: `inout` holds raw
    /// elements of `dtype`; shapes, strides and offsets count elements.
    pub fn select_in_place_dyn(
        &self,
        dtype: DType,
        cond: TensorRef<'_, u8>,
        inout: TensorMut<'_, u8>,
        role: InPlace,
        other: TensorRef<'_, u8>,
        mode: Broadcast,
    ) -> Result<()> {
        let w = dtype.width();
        let (o, shape, strides, offset) = inout.into_parts();
        let other = Operand::Buf(
            other.data(),
            Desc {
                len: other.data().len() / w,
                ..Desc::from(&other)
            },
        );
        let (t, e) = match role {
            InPlace::Then => (Operand::Out, other),
            InPlace::Else => (other, Operand::Out),
        };
        self.run_bytes(w, mode, cond, t, e, o, (shape, strides, offset))
    }

    /// Byte-level select for a run-time `dtype`: each buffer holds raw little-endian elements of
    /// `dtype`; shapes, strides and offsets count elements. Used by the CLI and by the C ABI.
    pub fn select_dyn(
        &self,
        dtype: DType,
        cond: TensorRef<'_, u8>,
        then: TensorRef<'_, u8>,
        else_: TensorRef<'_, u8>,
        out: TensorMut<'_, u8>,
        mode: Broadcast,
    ) -> Result<()> {
        let w = dtype.width();
        fn elems<'a>(t: &TensorRef<'a, u8>, w: usize) -> Desc<'a> {
            Desc {
                len: t.data().len() / w,
                ..Desc::from(t)
            }
        }
        let (o, shape, strides, offset) = out.into_parts();
        self.run_bytes(
            w,
            mode,
            cond,
            Operand::Buf(then.data(), elems(&then, w)),
            Operand::Buf(else_.data(), elems(&else_, w)),
            o,
            (shape, strides, offset),
        )
    }

    /// `out_layout`: the output's shape, strides and offset (elements).
    #[allow(clippy::too_many_arguments)]
    fn run_bytes(
        &self,
        width: usize,
        mode: Broadcast,
        cond: TensorRef<'_, u8>,
        then: Operand<'_>,
        else_: Operand<'_>,
        out: &mut [u8],
        out_layout: (&[usize], Option<&[isize]>, usize),
    ) -> Result<()> {
        let od = Desc {
            len: out.len() / width,
            shape: out_layout.0,
            strides: out_layout.1,
            offset: out_layout.2,
        };
        if self.config.backend != Backend::Interp
            && let Some(n) = same_contiguous(&[(&cond).into(), then.desc(od), else_.desc(od), od])
        {
            if self.config.backend == Backend::Jit {
                let o = out.as_mut_ptr();
                let src = |x: &Operand<'_>| match x {
                    Operand::Buf(b, _) => b.as_ptr(),
                    Operand::Out => o as *const u8,
                };
                let p = Ptrs {
                    cond: cond.data().as_ptr(),
                    then: src(&then),
                    else_: src(&else_),
                    out: o,
                };
                if self.run_memo_contiguous(width, n, p, out.len()) {
                    return Ok(());
                }
            }
            let sig = plan_contiguous(width, n);
            self.run_planned(sig.as_ref(), [0; 4], cond.data(), &then, &else_, out);
            return Ok(());
        }
        let c = check(mode, (&cond).into(), then.desc(od), else_.desc(od), od)?;
        if self.config.backend == Backend::Interp {
            interp_bytes(width, &c, cond.data(), &then, &else_, out);
            return Ok(());
        }
        let Some(p) = plan_layout(width, &c.out, [&c.st[0], &c.st[1], &c.st[2], &c.st[3]]) else {
            return Ok(()); // empty output
        };
        // Each kernel base: the view's first element moved by the planner's flips, which is an
        // element the validated view addresses (so the sum is in 0..len).
        let base: [usize; 4] = std::array::from_fn(|op| (c.off[op] as isize + p.base[op]) as usize);
        self.run_planned(Some(&p.sig), base, cond.data(), &then, &else_, out);
        Ok(())
    }

    /// Runs a validated, planned call (`None`: empty output, nothing to do) on the JIT or the
    /// static kernels. `base`: per operand, the index (in elements) of the kernel's base
    /// element in its buffer.
    fn run_planned(
        &self,
        sig: Option<&Signature>,
        base: [usize; 4],
        cond: &[u8],
        then: &Operand<'_>,
        else_: &Operand<'_>,
        out: &mut [u8],
    ) {
        let Some(sig) = sig else {
            return;
        };
        let w = sig.width;
        // Safe indexing: each base is an element of a validated view, inside its buffer.
        let out_ptr = out[base[OUT] * w..].as_mut_ptr();
        let src = |o: &Operand<'_>, op: usize| match o {
            Operand::Buf(b, _) => b[base[op] * w..].as_ptr(),
            // In place: the source is the output, with the output's layout and base.
            Operand::Out => out_ptr as *const u8,
        };
        let p = Ptrs {
            cond: cond[base[COND]..].as_ptr(),
            then: src(then, THEN),
            else_: src(else_, ELSE),
            out: out_ptr,
        };
        let outer = sig.outer();
        let eligible = self.splits(out.len(), outer);
        if self.config.backend == Backend::Jit && !eligible && self.run_memo(sig, p, outer) {
            return;
        }
        let kernel = match self.config.backend {
            Backend::Interp => None,
            _ => self.kernel(sig),
        };
        if kernel.is_none() {
            self.runs[STATIC_RUNS].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        // SAFETY (for every call below): the caller validated every buffer against its shape,
        // strides and offset (`check`, or `same_contiguous` for identical contiguous shapes):
        // all addressed elements are in bounds, the output's elements are distinct, and the
        // only aliasing is the exact in-place case (the same layout and base as the output);
        // `sig` is the plan of exactly these layouts and the pointers are at the plan's base
        // elements, so every element `sig` addresses from them (strides of either sign) is one
        // the views address; each range lies within the outer dimension.
        let run = |p: Ptrs, a: usize, b: usize| match &kernel {
            // SAFETY: see above.
            Some(k) => unsafe { k.run(sig, p, a, b) },
            // SAFETY: see above.
            None => unsafe { kernels::run(sig, p, a, b) },
        };
        if !eligible {
            return run(p, 0, outer);
        }
        // An exact kernel learns whether splitting pays; otherwise large calls split.
        let (way, probe) = match &kernel {
            Some(k) if !k.is_generic() => k.split_choice().next(),
            _ => (Way::Split, false),
        };
        let t = probe.then(std::time::Instant::now);
        let mut ran = Way::Single;
        if way == Way::Split
            && let Some(pool) = self.pool()
        {
            let parts = pool.threads().min(outer);
            let shared = SharedPtrs(p);
            let part = |i: usize| {
                let sp = shared;
                run(sp.0, outer * i / parts, outer * (i + 1) / parts)
            };
            if pool.run(parts, &part) {
                ran = Way::Split;
            }
        }
        if ran == Way::Single {
            run(p, 0, outer);
        }
        if let (Some(t), Some(k)) = (t, &kernel) {
            k.split_choice().record(ran, t.elapsed().as_nanos() as u64);
        }
    }
}

/// A byte-level source operand: a buffer with its element description, or the output (in place).
enum Operand<'a> {
    Buf(&'a [u8], Desc<'a>),
    Out,
}

impl<'a> Operand<'a> {
    fn desc(&self, out: Desc<'a>) -> Desc<'a> {
        match self {
            Operand::Buf(_, d) => *d,
            Operand::Out => out,
        }
    }
}

/// Runs the interpreter on raw bytes, viewing them as `[u8; W]` elements.
fn interp_bytes(
    width: usize,
    c: &Checked,
    cond: &[u8],
    then: &Operand,
    else_: &Operand,
    out: &mut [u8],
) {
    fn src<'a, const W: usize>(o: &Operand<'a>, st: &'a [isize], off: usize) -> Src<'a, [u8; W]> {
        match *o {
            Operand::Buf(b, _) => {
                let n = b.len() / W * W;
                Src::Buf((bytemuck::cast_slice(&b[..n]), st, off))
            }
            Operand::Out => Src::Out,
        }
    }
    fn go<const W: usize>(
        c: &Checked,
        cond: &[u8],
        then: &Operand,
        else_: &Operand,
        out: &mut [u8],
    ) {
        let n = out.len() / W * W;
        let o: &mut [[u8; W]] = bytemuck::cast_slice_mut(&mut out[..n]);
        interp::run(
            &c.out,
            (cond, &c.st[0], c.off[0]),
            src::<W>(then, &c.st[1], c.off[1]),
            src::<W>(else_, &c.st[2], c.off[2]),
            (o, &c.st[3], c.off[3]),
        );
    }
    match width {
        1 => go::<1>(c, cond, then, else_, out),
        2 => go::<2>(c, cond, then, else_, out),
        4 => go::<4>(c, cond, then, else_, out),
        8 => go::<8>(c, cond, then, else_, out),
        16 => go::<16>(c, cond, then, else_, out),
        _ => unreachable!("element widths come from DType"),
    }
}

/// Select over any `Clone` element type (strings, ...) through the reference interpreter. Views
/// may have any strides and offsets, as in [`Engine::select`].
pub fn select_generic<T: Clone>(
    cond: TensorRef<'_, u8>,
    then: TensorRef<'_, T>,
    else_: TensorRef<'_, T>,
    out: TensorMut<'_, T>,
    mode: Broadcast,
) -> Result<()> {
    let (o, shape, strides, offset) = out.into_parts();
    let od = Desc {
        len: o.len(),
        shape,
        strides,
        offset,
    };
    let c = check(mode, (&cond).into(), (&then).into(), (&else_).into(), od)?;
    interp::run(
        &c.out,
        (cond.data(), &c.st[0], c.off[0]),
        Src::Buf((then.data(), &c.st[1], c.off[1])),
        Src::Buf((else_.data(), &c.st[2], c.off[2])),
        (o, &c.st[3], c.off[3]),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_buffers_without_writing() {
        let e = Engine::new();
        let mut out = [7.0f32; 4];
        let r = e.select(
            TensorRef::new(&[1, 0, 1], &[2, 2]),
            TensorRef::new(&[1.0f32; 4], &[2, 2]),
            TensorRef::new(&[2.0f32; 4], &[2, 2]),
            TensorMut::new(&mut out, &[2, 2]),
            Broadcast::Numpy,
        );
        assert!(
            matches!(r, Err(Error::Layout { what: "cond", .. })),
            "{r:?}"
        );
        assert_eq!(out, [7.0; 4]);
    }

    #[test]
    fn in_place_then() {
        let e = Engine::new();
        let mut t = [1u16, 2, 3, 4];
        e.select_in_place(
            TensorRef::new(&[0, 1], &[2]),
            TensorMut::new(&mut t, &[2, 2]),
            InPlace::Then,
            TensorRef::scalar(&[9u16]),
            Broadcast::Numpy,
        )
        .unwrap();
        assert_eq!(t, [9, 2, 9, 4]);
    }

    #[test]
    fn generic_strings() {
        let t: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let e = vec!["x".to_string()];
        let mut out = vec![String::new(); 2];
        select_generic(
            TensorRef::new(&[0, 3], &[2]),
            TensorRef::new(&t, &[2]),
            TensorRef::new(&e, &[]),
            TensorMut::new(&mut out, &[2]),
            Broadcast::Numpy,
        )
        .unwrap();
        assert_eq!(out, ["x", "b"]);
    }
}

#[cfg(test)]
mod jit_smoke {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn engine_is_send_sync() {
        assert_send_sync::<Engine>();
    }

    /// Every backend agrees with the interpreter on a few layouts of every width.
    #[test]
    fn backends_agree_on_basic_layouts() {
        let cases: &[(&[usize], &[usize], &[usize])] = &[
            (&[37], &[37], &[37]),
            (&[1024], &[1024], &[1024]),
            (&[5, 33], &[5, 33], &[]),
            (&[5, 1], &[5, 33], &[5, 33]),
            (&[1], &[70], &[70]),
            (&[3, 1, 19], &[19], &[3, 7, 1]),
            (&[], &[], &[]),
            (&[4, 0], &[4, 0], &[0]),
        ];
        for w in [1usize, 2, 4, 8, 16] {
            let dt = [
                DType::U8,
                DType::F16,
                DType::F32,
                DType::F64,
                DType::Complex128,
            ][w.trailing_zeros() as usize];
            for &(c, t, e) in cases {
                let out_shape = crate::output_shape(Broadcast::Numpy, c, t, e).unwrap();
                let n = |s: &[usize]| s.iter().product::<usize>();
                let cond: Vec<u8> = (0..n(c)).map(|i| [0u8, 1, 0x80, 0, 0xff][i % 5]).collect();
                let tv: Vec<u8> = (0..n(t) * w).map(|i| (i * 7 + 1) as u8).collect();
                let ev: Vec<u8> = (0..n(e) * w).map(|i| (i * 13 + 200) as u8).collect();
                let mut want = vec![0u8; n(&out_shape) * w];
                let mut got = want.clone();
                let run = |b: Backend, out: &mut [u8]| {
                    let eng = Engine::with_config(EngineConfig {
                        backend: b,
                        exact_after: 1,
                        verify: true,
                        ..EngineConfig::default()
                    });
                    eng.select_dyn(
                        dt,
                        TensorRef::new(&cond, c),
                        TensorRef::new(&tv, t),
                        TensorRef::new(&ev, e),
                        TensorMut::new(out, &out_shape),
                        Broadcast::Numpy,
                    )
                    .unwrap();
                    if b == Backend::Jit && !out.is_empty() {
                        assert_eq!(eng.last_codegen_error(), None);
                        assert_eq!(eng.stats().compiles, 1);
                    }
                };
                run(Backend::Interp, &mut want);
                for b in [Backend::Jit, Backend::Static] {
                    got.iter_mut().for_each(|x| *x = 0x5a);
                    run(b, &mut got);
                    assert_eq!(got, want, "{b:?} w{w} {c:?} {t:?} {e:?}");
                }
                // The shape-generic kernel of the pattern gives the same bytes.
                let eng = Engine::with_config(EngineConfig {
                    exact_after: u32::MAX,
                    verify: true,
                    ..EngineConfig::default()
                });
                for _ in 0..2 {
                    got.iter_mut().for_each(|x| *x = 0x5a);
                    eng.select_dyn(
                        dt,
                        TensorRef::new(&cond, c),
                        TensorRef::new(&tv, t),
                        TensorRef::new(&ev, e),
                        TensorMut::new(&mut got, &out_shape),
                        Broadcast::Numpy,
                    )
                    .unwrap();
                    assert_eq!(got, want, "generic jit w{w} {c:?} {t:?} {e:?}");
                }
                if !want.is_empty() {
                    let st = eng.stats();
                    assert_eq!(
                        (st.compiles, st.generic_compiles, st.generic_runs),
                        (0, 1, 2)
                    );
                }
                // The portable lane select (no x86 blendv) gives the same bytes.
                let mut jit = Jit::host(true).unwrap();
                jit.set_blendv(false);
                assert!(!jit.uses_blendv());
                let eng = Engine::with_jit(EngineConfig::default(), jit);
                got.iter_mut().for_each(|x| *x = 0x5a);
                eng.select_dyn(
                    dt,
                    TensorRef::new(&cond, c),
                    TensorRef::new(&tv, t),
                    TensorRef::new(&ev, e),
                    TensorMut::new(&mut got, &out_shape),
                    Broadcast::Numpy,
                )
                .unwrap();
                assert_eq!(got, want, "portable jit w{w} {c:?} {t:?} {e:?}");
                assert_eq!(eng.last_codegen_error(), None);
            }
        }
    }
}

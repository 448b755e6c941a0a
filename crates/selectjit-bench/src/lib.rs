//! Benchmark cases and measurements shared by `selectjit bench` and the criterion benches.
//!
//! A case (from `benches/cases.json`) names a dtype, three shapes broadcast with the numpy rule
//! and a cond fill. The yardstick is the copy roofline ([`crate::roofline`]) for half the case's
//! traffic (each input's own bytes plus the output's bytes), so that the copy's reads + writes
//! move as many bytes as the select does. Tiers, static kernels and peers are timed interleaved
//! in one run and compared as ratios; each copy is timed on its own right after them.
#![warn(clippy::undocumented_unsafe_blocks)]

use std::time::Instant;

use serde::{Deserialize, Serialize};

pub mod expr;
pub mod fused;
mod ndarray_peer;
pub mod nway;
pub mod roofline;

pub use fused::{
    BUILTIN_FUSED_CASES, FUSED_NOTES, FusedCase, FusedMeasurement, fused_header, fused_row,
    measure_fused, parse_fused_cases, run_fused_suite,
};
pub use ndarray_peer::{ZipLoop, ndarray_zip};
pub use nway::{
    BUILTIN_NWAY_CASES, NWAY_NOTES, NwayCase, NwayCompileLatency, NwayMeasurement, measure_nway,
    measure_nway_compile, nway_header, nway_row, parse_nway_cases, run_nway_suite,
};

use selectjit::codegen::CodeGen;
use selectjit::codegen::CodeGenOptions;
use selectjit::output_shape;
use selectjit::plan::plan;
use selectjit::plan::plan_contiguous;
use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, Error, Result, Tier};
use selectjit::{TensorMut, TensorRef};

use roofline::{CopyBuffers, CopyKind, copy_split, intrinsics_select_f32};

/// The built-in case list (the project's copy of the shared `cases.json`).
pub const BUILTIN_CASES: &str = include_str!("../../../benches/cases.json");

/// One benchmark case.
#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    /// Name of the case (`same_f32_1m`, ...).
    pub name: String,
    /// Element type name (`f32`, `bf16`, ...).
    pub dtype: String,
    /// Shape of cond.
    pub cond: Vec<usize>,
    /// Shape of then.
    pub then: Vec<usize>,
    #[serde(rename = "else")]
    /// Shape of else.
    pub else_: Vec<usize>,
    /// How cond is filled: `random` (seeded, p = 0.5), `causal` (lower-triangular over the last two dims) or `true`.
    pub cond_fill: String,
}

#[derive(Deserialize)]
struct CaseFile {
    cases: Vec<Case>,
}

/// Parses a case list in the `cases.json` format.
pub fn parse_cases(json: &str) -> Result<Vec<Case>> {
    let f: CaseFile =
        serde_json::from_str(json).map_err(|e| Error::Invalid(format!("case list: {e}")))?;
    for c in &f.cases {
        c.dtype.parse::<DType>()?;
        output_shape(Broadcast::Numpy, &c.cond, &c.then, &c.else_)?;
        if !["random", "causal", "true"].contains(&c.cond_fill.as_str()) {
            return Err(Error::Invalid(format!(
                "case {}: unknown cond_fill '{}'",
                c.name, c.cond_fill
            )));
        }
    }
    Ok(f.cases)
}

/// A byte buffer that starts on a 4 KiB page boundary.
///
/// Every buffer of a case (inputs, each contender's output, the copies') starts at the same
/// offset within a page, as large arrays from `malloc` (numpy's included) do: a select whose
/// output sits a little past an input in page offset aliases the input's loads with its own
/// recent stores (4K aliasing: out 48 bytes past then cost every tier ~25% on the attention
/// cases), and contenders with outputs at other offsets would not be timed alike.
pub struct PageBuf {
    buf: Vec<u8>,
    off: usize,
    len: usize,
}

impl PageBuf {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> PageBuf {
        let buf = vec![0u8; len + 4096];
        let off = (4096 - buf.as_ptr() as usize % 4096) % 4096;
        PageBuf { buf, off, len }
    }

    /// A copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> PageBuf {
        let mut b = PageBuf::zeroed(bytes.len());
        b.copy_from_slice(bytes);
        b
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.off..self.off + self.len]
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

/// The buffers of one case, filled deterministically.
pub struct Inputs {
    /// Element type of then, else and the output.
    pub dtype: DType,
    /// Shape of cond.
    pub cond_shape: Vec<usize>,
    /// Shape of then.
    pub then_shape: Vec<usize>,
    /// Shape of else.
    pub else_shape: Vec<usize>,
    /// Shape of the output (numpy broadcast of the three).
    pub out_shape: Vec<usize>,
    /// Cond bytes.
    pub cond: PageBuf,
    /// Then elements, as little-endian bytes.
    pub then: PageBuf,
    /// Else elements, as little-endian bytes.
    pub else_: PageBuf,
}

/// A small deterministic generator (xorshift), so that every run sees the same data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

impl Inputs {
    /// Builds the buffers of `case`.
    pub fn new(case: &Case) -> Result<Inputs> {
        let dtype: DType = case.dtype.parse()?;
        let out_shape =
            output_shape(Broadcast::Numpy, &case.cond, &case.then, &case.else_)?.to_vec();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let nc = numel(&case.cond);
        let cond: Vec<u8> = match case.cond_fill.as_str() {
            "true" => vec![1; nc],
            "causal" => {
                // Lower-triangular over the last two dims.
                let r = case.cond.len();
                let cols = if r >= 1 { case.cond[r - 1] } else { 1 };
                let rows = if r >= 2 { case.cond[r - 2] } else { 1 };
                (0..nc)
                    .map(|i| {
                        let (row, col) = ((i / cols.max(1)) % rows.max(1), i % cols.max(1));
                        u8::from(col <= row)
                    })
                    .collect()
            }
            _ => (0..nc).map(|_| (rng.next() >> 32) as u8 & 1).collect(),
        };
        let w = dtype.width();
        let mut fill =
            |n: usize| -> Vec<u8> { (0..n * w).map(|_| (rng.next() >> 24) as u8).collect() };
        Ok(Inputs {
            dtype,
            then: PageBuf::from_slice(&fill(numel(&case.then))),
            else_: PageBuf::from_slice(&fill(numel(&case.else_))),
            cond: PageBuf::from_slice(&cond),
            cond_shape: case.cond.clone(),
            then_shape: case.then.clone(),
            else_shape: case.else_.clone(),
            out_shape,
        })
    }

    /// Elements of the output.
    pub fn elements(&self) -> usize {
        numel(&self.out_shape)
    }

    /// Bytes moved: each input's own bytes plus the output's.
    pub fn traffic_bytes(&self) -> usize {
        self.cond.len() + self.then.len() + self.else_.len() + self.elements() * self.dtype.width()
    }

    /// Runs one select on `engine` into `out`.
    pub fn run(&self, engine: &Engine, out: &mut [u8]) -> Result<()> {
        engine.select_bytes(
            self.dtype,
            TensorRef::new(&self.cond[..], &self.cond_shape),
            TensorRef::new(&self.then[..], &self.then_shape),
            TensorRef::new(&self.else_[..], &self.else_shape),
            TensorMut::new(out, &self.out_shape),
            Broadcast::Numpy,
        )
    }
}

/// One code-generation tier's time on a case.
#[derive(Debug, Clone, Serialize)]
pub struct TierTime {
    /// The tier asked for (`cranelift`, `avx2`, `avx512`).
    pub tier: String,
    /// The tier that compiled the case's kernel (Cranelift where an x86 tier does not cover the
    /// signature).
    pub kernel_tier: String,
    /// Median time of a warm call, single-threaded.
    pub ns: f64,
    /// First call on a fresh engine: validation, planning, compilation and the run.
    pub first_call_us: f64,
}

/// What `selectjit bench` reports for one case. Times are medians of interleaved rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    /// Name of the case.
    pub case: String,
    /// Element type name.
    pub dtype: String,
    /// Output elements.
    pub elements: usize,
    /// Bytes moved: each input's own bytes plus the output's.
    pub traffic_bytes: usize,
    /// The variant `auto` chose for the case by measuring (`avx2`, `avx512+nt`, `avx512+zmm`, ...); `jit_ns`
    /// is its time.
    pub jit_tier: String,
    /// Median time of the `auto` tier, single-threaded.
    pub jit_ns: f64,
    /// Every tier this host runs, named (each with its fixed non-temporal threshold),
    /// single-threaded.
    pub tiers: Vec<TierTime>,
    /// `jit_ns` over the fastest named tier's time.
    pub auto_over_best_tier: f64,
    /// Median time of the static kernels, single-threaded.
    pub static_ns: f64,
    /// The C library's memcpy of half the traffic.
    pub memcpy_ns: f64,
    /// Vector copy of the same bytes with ordinary stores (x86-64 AVX2).
    pub copy_vector_ns: Option<f64>,
    /// Vector copy with non-temporal stores (x86-64 AVX2).
    pub copy_nt_ns: Option<f64>,
    /// The same walking four parts of the bytes at once (x86-64 AVX2).
    pub copy_nt4way_ns: Option<f64>,
    /// The copy roofline: the fastest of the copies above, and which one it was.
    pub roofline_ns: f64,
    /// Which copy was the fastest.
    pub roofline_kind: CopyKind,
    /// Reference interpreter, measured on small cases only.
    pub interp_ns: Option<f64>,
    /// The `auto` tier on `threads` threads (the engine splits only calls it expects to gain
    /// from it), and the roofline copy split over as many threads.
    pub jit_mt_ns: f64,
    /// The hand-written ndarray peer ([`ndarray_zip`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ndarray_ns: Option<f64>,
    /// The hand-written AVX2 intrinsics select of contiguous f32 (the faster of ordinary and
    /// non-temporal stores), on the f32 cases whose four operands share one shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intrinsics_ns: Option<f64>,
    /// Threads of the multi-threaded engine.
    pub threads: usize,
    /// The roofline copy split over `threads` threads.
    pub copy_mt_ns: Option<f64>,
    /// First call of the `auto` tier (see [`TierTime::first_call_us`]).
    pub compile_us: f64,
    /// Time ratios, below 1 when the JIT is faster: over the static kernels, over glibc's
    /// memcpy, over the copy roofline; and multi-threaded over single-threaded.
    pub jit_over_static: f64,
    /// jit_ns / memcpy_ns.
    pub jit_over_memcpy: f64,
    /// jit_ns / roofline_ns.
    pub jit_over_roofline: f64,
    /// jit_mt_ns / jit_ns.
    pub mt_over_jit: f64,
}

/// Measurement settings.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Interleaved rounds per case (the median is reported).
    pub rounds: usize,
    /// Minimum time of one timed batch, in nanoseconds.
    pub min_batch_ns: u64,
}

impl Options {
    /// 15 rounds of batches of at least 4 ms and 8 calls (the README's figures).
    pub fn full() -> Self {
        Options {
            rounds: 15,
            min_batch_ns: 4_000_000,
        }
    }
    /// 5 rounds of batches of at least 1 ms.
    pub fn quick() -> Self {
        Options {
            rounds: 5,
            min_batch_ns: 1_000_000,
        }
    }
}

/// Calls `f` `reps` times and returns the mean time per call in ns.
fn time_batch(reps: usize, f: &mut dyn FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_nanos() as f64 / reps as f64
}

/// The fewest calls in a batch. A batch of 4 ms held two calls of a 54 MiB select: its times
/// scattered by ±8% from batch to batch on the Zen 4 host (two sequences running the same
/// select came out 0.90-1.19x of each other from run to run); with eight calls, within ±1%.
const MIN_BATCH_CALLS: usize = 8;

/// How many calls make a batch of at least `min_ns` (and of at least [`MIN_BATCH_CALLS`]).
fn calibrate(min_ns: u64, f: &mut dyn FnMut()) -> usize {
    let mut reps = 1usize;
    loop {
        let t = time_batch(reps, f) * reps as f64;
        if (t >= min_ns as f64 && reps >= MIN_BATCH_CALLS) || reps >= 1 << 24 {
            return reps;
        }
        let grow = ((min_ns as f64 / t.max(1.0)) * 1.2).ceil() as usize;
        reps = (reps * grow.clamp(2, 100)).min(1 << 24);
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Times several contenders interleaved: each is calibrated to batches of at least
/// `opts.min_batch_ns`, then every round runs one batch of each, in an order of its own (a
/// seeded shuffle), each timed batch preceded by an untimed one of the same length. Returns the
/// median time per call of each, in the order given.
///
/// The shuffle matters where a contender leaves the machine in a state that outlasts the next
/// one's untimed batch: after a batch with non-temporal stores, kernels with ordinary stores
/// (8 MiB outputs) ran at up to 1.3x their time for tens of milliseconds on the Zen 4 host, and
/// a 54 MiB non-temporal select ran 7% slower after another than after the static kernels. In
/// a fixed order one contender would always pay for its predecessor; shuffled, each follows
/// every other about as often, and the median is each one's own time. (Where the state
/// outlasts several batches, shuffling does not help: the fused cases time their roofline's
/// non-temporal copies in rounds of their own.)
///
/// The untimed batch matters for working sets near the size of the last-level cache: after the
/// other contenders ran, a copy of 6.5 MB here needs about eight calls before its buffers are
/// back in the cache (its time falls from ~800 to ~270 µs), while a faster contender gets more
/// calls per batch and would be timed warmer. With it every contender is timed in its steady
/// state, as a runtime calling the same shapes again sees it.
fn interleaved(opts: Options, fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    let reps: Vec<usize> = fs
        .iter_mut()
        .map(|f| calibrate(opts.min_batch_ns, *f))
        .collect();
    let mut times = vec![Vec::new(); fs.len()];
    let mut order: Vec<usize> = (0..fs.len()).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..opts.rounds {
        for i in (1..order.len()).rev() {
            order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        for &k in &order {
            time_batch(reps[k], fs[k]);
            times[k].push(time_batch(reps[k], fs[k]));
        }
    }
    times.iter_mut().map(|t| median(t)).collect()
}

/// The tiers this host runs natively, `auto`'s choice among them.
pub fn host_tiers() -> Vec<Tier> {
    Tier::CONCRETE
        .into_iter()
        .filter(|t| t.available())
        .collect()
}

/// The configuration every benchmark engine starts from: the `SELECTJIT_*` environment
/// variables (cache capacity, thresholds), which the settings of each measurement override.
fn base() -> Result<EngineConfig> {
    EngineConfig::from_env()
}

/// A single-threaded engine that compiles the exact kernel on the first call.
fn single(backend: Backend, tier: Tier) -> Result<Engine> {
    Engine::with_config(
        base()?
            .backend(backend)
            .tier(tier)
            .threads(1)
            .exact_after(1),
    )
}

/// Measures one case: every tier (cache warm), the static kernels, the copies and the
/// multi-threaded JIT, interleaved.
pub fn measure(case: &Case, opts: Options) -> Result<Measurement> {
    let inp = Inputs::new(case)?;
    let out_bytes = inp.elements() * inp.dtype.width();
    let mut reference = PageBuf::zeroed(out_bytes);
    let interp = single(Backend::Interp, Tier::Auto)?;
    inp.run(&interp, &mut reference)?;
    let check = |what: &str, out: &[u8]| -> Result<()> {
        if out != &reference[..] {
            return Err(Error::Invalid(format!(
                "{}: {what} output differs from the interpreter",
                case.name
            )));
        }
        Ok(())
    };

    // First call of each tier (compiles), checked against the interpreter.
    let tiers = host_tiers();
    let mut engines = Vec::new();
    let mut outs = Vec::new();
    let mut first = Vec::new();
    let mut kernel_tiers = Vec::new();
    for &t in &tiers {
        let e = single(Backend::Jit, t)?;
        let mut out = PageBuf::zeroed(out_bytes);
        let t0 = Instant::now();
        inp.run(&e, &mut out)?;
        first.push(t0.elapsed().as_nanos() as f64 / 1e3);
        if let Some(err) = e.last_codegen_error() {
            return Err(err);
        }
        check(t.name(), &out)?;
        kernel_tiers.push(kernel_tier(&e, &inp).unwrap_or(t));
        engines.push(e);
        outs.push(out);
    }
    // `auto`: its first call compiles every candidate; the calls after it measure them (each
    // checked) until the choice is made, before anything is timed.
    let auto = single(Backend::Jit, Tier::Auto)?;
    let mut out_auto = PageBuf::zeroed(out_bytes);
    let t0 = Instant::now();
    inp.run(&auto, &mut out_auto)?;
    let auto_first_us = t0.elapsed().as_nanos() as f64 / 1e3;
    let auto_variant = settle(&auto, &inp, &mut out_auto, &check)?;
    let stat = single(Backend::Static, Tier::Auto)?;
    let mut out_static = PageBuf::zeroed(out_bytes);
    inp.run(&stat, &mut out_static)?;
    check("static", &out_static)?;
    let jit_mt = Engine::with_config(base()?.backend(Backend::Jit).exact_after(1))?;
    let threads = jit_mt.threads();
    let mut out_mt = PageBuf::zeroed(out_bytes);
    inp.run(&jit_mt, &mut out_mt)?;
    settle(&jit_mt, &inp, &mut out_mt, &check)?;

    let mut zip = Some(ndarray_peer::ndarray_peer(&inp, &reference)?);

    let copy_bytes = inp.traffic_bytes() / 2;
    let kinds: Vec<CopyKind> = CopyKind::ALL
        .into_iter()
        .filter(|k| k.available())
        .collect();
    let mut copies: Vec<CopyBuffers> = kinds.iter().map(|_| CopyBuffers::new(copy_bytes)).collect();

    let inp = &inp;
    let mut fs: Vec<Box<dyn FnMut() + '_>> = Vec::new();
    for (e, out) in engines.iter().zip(outs.iter_mut()) {
        fs.push(Box::new(move || inp.run(e, out).expect("validated above")));
    }
    fs.push(Box::new(|| {
        inp.run(&auto, &mut out_auto).expect("validated above")
    }));
    fs.push(Box::new(|| {
        inp.run(&stat, &mut out_static).expect("validated above")
    }));
    fs.push(Box::new(|| {
        inp.run(&jit_mt, &mut out_mt).expect("validated above")
    }));
    if let Some(z) = zip.as_mut() {
        fs.push(Box::new(|| z.run()));
    }
    let mut refs: Vec<&mut dyn FnMut()> = fs.iter_mut().map(|f| &mut **f as _).collect();
    let t = interleaved(opts, &mut refs);
    drop(refs);
    drop(fs);
    let nt = tiers.len();
    let jit_ns = t[nt];
    let static_ns = t[nt + 1];
    let jit_mt_ns = t[nt + 2];
    let ndarray_ns = zip.is_some().then(|| t[nt + 3]);
    // The copies, each timed on its own (back-to-back batches, no other working set between
    // them): the roofline is the best this machine does, not a copy disturbed by the select's
    // contenders.
    let copy_ns: Vec<f64> = kinds
        .iter()
        .zip(copies.iter_mut())
        .map(|(k, b)| {
            let mut f = || b.copy(*k).expect("available");
            interleaved(opts, &mut [&mut f])[0]
        })
        .collect();
    let (best_k, roofline_ns) = copy_ns
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(k, &v)| (kinds[k], v))
        .ok_or_else(|| Error::Invalid("no copy ran".into()))?;
    let copy_of = |k: CopyKind| kinds.iter().position(|&x| x == k).map(|i| copy_ns[i]);
    // The roofline copy split over the engine's threads, for the scaling the machine allows.
    let copy_mt_ns = match roofline::pool(threads) {
        Some(pool) if out_bytes >= jit_mt.parallel_min_bytes() => {
            let mut b = CopyBuffers::new(copy_bytes);
            let mut f = || copy_split(&mut b, best_k, &pool).expect("available");
            let t = interleaved(opts, &mut [&mut f]);
            Some(t[0])
        }
        _ => None,
    };

    // The bar for generated code on the cases it covers: the hand-written AVX2 select of
    // contiguous f32 (one shape for all four operands), ordinary or non-temporal stores, the
    // faster; its output checked like every other.
    let same_shape = [&inp.cond_shape, &inp.then_shape, &inp.else_shape]
        .iter()
        .all(|s| **s == inp.out_shape);
    let intrinsics_ns = if inp.dtype == DType::F32 && same_shape {
        let mut best: Option<f64> = None;
        for nt in [false, true] {
            let mut out = PageBuf::zeroed(out_bytes);
            if intrinsics_select_f32(&inp.cond, &inp.then, &inp.else_, &mut out, nt).is_none() {
                break;
            }
            check("intrinsics", &out)?;
            let mut f = || {
                intrinsics_select_f32(&inp.cond, &inp.then, &inp.else_, &mut out, nt)
                    .expect("ran above");
                std::hint::black_box(&mut out);
            };
            let t = interleaved(opts, &mut [&mut f])[0];
            best = Some(best.map_or(t, |b: f64| b.min(t)));
        }
        best
    } else {
        None
    };

    let interp_ns = if inp.elements() <= 1 << 16 {
        let mut buf = PageBuf::zeroed(out_bytes);
        let mut f = || inp.run(&interp, &mut buf).expect("validated above");
        let r = calibrate(opts.min_batch_ns / 4, &mut f);
        Some(time_batch(r, &mut f))
    } else {
        None
    };
    let best_tier_ns = t[..nt].iter().copied().fold(f64::INFINITY, f64::min);
    Ok(Measurement {
        case: case.name.clone(),
        dtype: case.dtype.clone(),
        elements: inp.elements(),
        traffic_bytes: inp.traffic_bytes(),
        jit_tier: auto_variant,
        jit_ns,
        auto_over_best_tier: jit_ns / best_tier_ns,
        tiers: tiers
            .iter()
            .enumerate()
            .map(|(k, tier)| TierTime {
                tier: tier.name().to_string(),
                kernel_tier: kernel_tiers[k].name().to_string(),
                ns: t[k],
                first_call_us: first[k],
            })
            .collect(),
        static_ns,
        memcpy_ns: copy_of(CopyKind::Memcpy).unwrap_or(f64::NAN),
        copy_vector_ns: copy_of(CopyKind::Vector),
        copy_nt_ns: copy_of(CopyKind::NonTemporal),
        copy_nt4way_ns: copy_of(CopyKind::NonTemporalFourWay),
        roofline_ns,
        roofline_kind: best_k,
        interp_ns,
        jit_mt_ns,
        ndarray_ns,
        intrinsics_ns,
        threads,
        copy_mt_ns,
        compile_us: auto_first_us,
        jit_over_static: jit_ns / static_ns,
        jit_over_memcpy: jit_ns / copy_of(CopyKind::Memcpy).unwrap_or(f64::NAN),
        jit_over_roofline: jit_ns / roofline_ns,
        mt_over_jit: jit_mt_ns / jit_ns,
    })
}

/// Calls `e` until its measured choice for the case is made (at most 256 calls: a trial takes
/// up to 96), then checks a call of the variant chosen on a zeroed output, and returns that
/// variant.
///
/// The calls the trial times run back to back, as a caller's loop would: nothing between them
/// touches memory. (Zeroing and checking the output between calls moved three times the
/// output's bytes through the caches, so every probe started cold, and variants with
/// non-temporal stores won trials of cache-sized outputs that they lose in a loop.) Every
/// candidate's output is checked by the tests (`tests/tier_choice.rs`).
pub(crate) fn settle_choice(
    e: &Engine,
    sig: &selectjit::plan::Signature,
    out: &mut [u8],
    run: &mut dyn FnMut(&mut [u8]) -> Result<()>,
    check: &dyn Fn(&[u8]) -> Result<()>,
) -> Result<()> {
    for _ in 0..256 {
        run(out)?;
        let st = e.stats();
        if e.tier_choices()
            .iter()
            .any(|c| c.class == selectjit::KernelClass::of(sig))
            || st.tier_trials == 0 && st.trial_compiles == 0
        {
            out.fill(0);
            run(out)?;
            return check(out);
        }
    }
    Err(Error::Invalid(
        "auto did not choose within 256 calls".into(),
    ))
}

/// [`settle_choice`] for a select case; returns the variant that runs it.
fn settle(
    e: &Engine,
    inp: &Inputs,
    out: &mut [u8],
    check: &dyn Fn(&str, &[u8]) -> Result<()>,
) -> Result<String> {
    let sig = signature(inp).ok_or_else(|| Error::Invalid("empty case".into()))?;
    settle_choice(e, &sig, out, &mut |o| inp.run(e, o), &|o| check("auto", o))?;
    Ok(e.kernel(&sig)
        .map_or("static".into(), |k| k.variant().to_string()))
}

/// The signature of `inp`'s call.
fn signature(inp: &Inputs) -> Option<selectjit::plan::Signature> {
    let b = selectjit::broadcast_shapes(
        Broadcast::Numpy,
        &inp.cond_shape,
        &inp.then_shape,
        &inp.else_shape,
    )
    .ok()?;
    let st = |s: &[usize], p: selectjit::Placement| {
        p.strides_over(s, &selectjit::contiguous_strides(s), &b.out)
    };
    let so = selectjit::contiguous_strides(&b.out);
    let (sc, sth, se) = (
        st(&inp.cond_shape, b.cond),
        st(&inp.then_shape, b.then),
        st(&inp.else_shape, b.else_),
    );
    plan(inp.dtype.width(), &b.out, [&sc, &sth, &se, &so])
}

/// The tier of the exact kernel `e` holds for `inp`'s signature.
fn kernel_tier(e: &Engine, inp: &Inputs) -> Option<Tier> {
    let sig = signature(inp)?;
    e.codegen().map(|c| c.tier_for(c.tier(), &sig))
}

/// Measures every case whose name contains `filter`, calling `progress` after each.
pub fn run_suite(
    cases: &[Case],
    filter: &str,
    opts: Options,
    mut progress: impl FnMut(&Measurement),
) -> Result<Vec<Measurement>> {
    let mut out = Vec::new();
    for c in cases.iter().filter(|c| c.name.contains(filter)) {
        let m = measure(c, opts)?;
        progress(&m);
        out.push(m);
    }
    Ok(out)
}

/// Column headers of [`table_row`] for the tiers `tiers` (see [`host_tiers`]).
pub fn table_header(tiers: &[Tier]) -> String {
    let mut h = format!("{:<22} {:>9} {:>7}", "case", "elements", "traffic");
    for t in tiers {
        h.push_str(&format!(" {:>10}", t.name()));
    }
    h.push_str(&format!(
        " {:>20} {:>9} {:>14} {:>8} {:>8} {:>9} {:>6} {:>8} {:>9}",
        "auto (chosen)",
        "static",
        "copy (best)",
        "jit/stat",
        "jit/copy",
        "jit-mt",
        "mt/1t",
        "copy-mt",
        "1st call"
    ));
    h.push_str(&format!(
        " {:>9} {:>8} {:>9} {:>8}",
        "ndarray", "jit/nd", "intrin", "jit/intr"
    ));
    h
}

/// One line of the `selectjit bench` table: times in µs, ratios of times.
pub fn table_row(m: &Measurement) -> String {
    let us = |ns: f64| ns / 1e3;
    let mut r = format!(
        "{:<22} {:>9} {:>7}",
        m.case,
        m.elements,
        human_bytes(m.traffic_bytes)
    );
    for t in &m.tiers {
        let mark = if t.kernel_tier == t.tier { " " } else { "*" };
        r.push_str(&format!(" {:>9.2}{mark}", us(t.ns)));
    }
    let copy_mt = m
        .copy_mt_ns
        .map(|c| format!("{:.2}", m.roofline_ns / c))
        .unwrap_or_else(|| "-".into());
    r.push_str(&format!(
        " {:>9.2} {:<10} {:>9.2} {:>8.2} {:<5} {:>8.3} {:>8.3} {:>9.2} {:>6.2} {:>8} {:>6.0} us",
        us(m.jit_ns),
        format!("({})", m.jit_tier),
        us(m.static_ns),
        us(m.roofline_ns),
        m.roofline_kind.name(),
        m.jit_over_static,
        m.jit_over_roofline,
        us(m.jit_mt_ns),
        m.mt_over_jit,
        copy_mt,
        m.compile_us
    ));
    match m.ndarray_ns {
        Some(nd) => r.push_str(&format!(" {:>9.2} {:>8.3}", us(nd), m.jit_ns / nd)),
        None => r.push_str(&format!(" {:>9} {:>8}", "-", "-")),
    }
    if let Some(i) = m.intrinsics_ns {
        r.push_str(&format!(" {:>9.2} {:>8.3}", us(i), m.jit_ns / i));
    }
    r
}

/// What the table's columns mean, printed under it.
pub const TABLE_NOTES: &str = "times in us per call (median of interleaved rounds), single-threaded unless -mt; \
tier columns = that tier named (non-temporal stores from 32 MiB of output); jit = auto, with the variant \
it chose by measuring (+zmm: AVX-512 main loops of 512-bit vectors, +nt: non-temporal stores, +4way: rows walked four ways at once, +pfw: the output's lines fetched for writing ahead); * = that tier does not cover the case and Cranelift compiled it; \
copy (best) = the fastest of memcpy / vector / non-temporal / four-way non-temporal (nt4way) copies of half the traffic; \
copy-mt = speed-up of that copy on the jit-mt threads (outputs large enough to split only); \
ndarray = the hand-written ndarray Zip loop, jit/nd = jit time over it; \
intrin = the hand-written AVX2 intrinsics select of contiguous f32 (cases of one shape), the bar for \
generated code, jit/intr = jit time over it";

fn human_bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1}M", n as f64 / (1 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1}K", n as f64 / 1024.0),
        n => format!("{n}B"),
    }
}

/// Geometric mean of `ratio` over the measurements.
pub fn geomean(ms: &[Measurement], ratio: impl Fn(&Measurement) -> f64) -> f64 {
    if ms.is_empty() {
        return f64::NAN;
    }
    (ms.iter().map(|m| ratio(m).ln()).sum::<f64>() / ms.len() as f64).exp()
}

/// Geometric mean of the static/jit time ratio (the JIT's speed-up over the static kernels).
pub fn geomean_speedup(ms: &[Measurement]) -> f64 {
    geomean(ms, |m| m.static_ns / m.jit_ns)
}

/// Compile latency of one tier.
#[derive(Debug, Clone, Serialize)]
pub struct CompileLatency {
    /// The tier.
    pub tier: String,
    /// Median / 90th percentile time to get the kernel of one new signature (code generation,
    /// making it executable, cache insertion), over many distinct signatures.
    pub median_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// Signatures compiled.
    pub compiled: usize,
    /// How many of them the tier compiled itself (the rest fell back to Cranelift).
    pub by_tier: usize,
}

/// Call overheads on a 16-element f32 select with the cache warm, and compile latencies.
#[derive(Debug, Clone, Serialize)]
pub struct Overheads {
    /// `Engine::select` on the `auto` tier: validation, shape inference, planning, cache
    /// lookup, run.
    pub hit_call_ns: f64,
    /// The same call on an engine with the static kernels.
    pub static_call_ns: f64,
    /// `Prepared::run`: buffer-length checks and the call.
    pub prepared_call_ns: f64,
    /// Compile latency of the `auto` tier (as in `compile`).
    pub compile_median_us: f64,
    /// 90th percentile of the `auto` tier's compile latency.
    pub compile_p90_us: f64,
    /// Signatures compiled per tier.
    pub compiled: usize,
    /// Compile latency of every tier this host runs.
    pub compile: Vec<CompileLatency>,
    /// Compile latency of new single-pass n-way patterns of 2 to 8 branches on the `auto`
    /// engine (empty when it has no single-pass kernels).
    pub nway_compile: Vec<NwayCompileLatency>,
}

/// Measures call overheads and the compile latency of every tier.
pub fn measure_overheads(opts: Options) -> Result<Overheads> {
    let e = single(Backend::Jit, Tier::Auto)?;
    let st = single(Backend::Static, Tier::Auto)?;
    let cond = [1u8, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0];
    let t = [1f32; 16];
    let el = [2f32; 16];
    let (mut o, mut o1, mut o2) = ([0f32; 16], [0f32; 16], [0f32; 16]);
    let call = |e: &Engine, o: &mut [f32; 16]| {
        e.select(
            TensorRef::new(&cond, &[16]),
            TensorRef::new(&t, &[16]),
            TensorRef::new(&el, &[16]),
            TensorMut::new(o, &[16]),
            Broadcast::Numpy,
        )
        .expect("valid call")
    };
    let mut f_hit = || call(&e, &mut o);
    f_hit();
    let mut f_static = || call(&st, &mut o1);
    let p = e.prepare(DType::F32, &[16], &[16], &[16], Broadcast::Numpy)?;
    let mut f_prep = || p.run(&cond, &t, &el, &mut o2).expect("valid call");
    let tm = interleaved(opts, &mut [&mut f_hit, &mut f_static, &mut f_prep]);

    // Compile latency: distinct signatures of a few common patterns.
    let n = if opts.rounds > 5 { 300 } else { 100 };
    let sigs = (0..n)
        .map(|i| {
            match i % 3 {
                0 => plan_contiguous(4, 1000 + i),
                1 => plan_contiguous(2, 5000 + i),
                _ => {
                    let m = 64 + i;
                    plan(
                        4,
                        &[8, m],
                        [&[0, 1], &[m as isize, 1], &[0, 0], &[m as isize, 1]],
                    )
                }
            }
            .ok_or_else(|| Error::Invalid("empty signature".into()))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut compile = Vec::new();
    for tier in host_tiers() {
        let cg = CodeGen::new(tier, CodeGenOptions::default())?;
        let mut us = Vec::new();
        let mut by_tier = 0;
        for sig in &sigs {
            let t0 = Instant::now();
            let k = cg
                .compile(sig)
                .map_err(|e| e.in_context(format!("compiling {sig}")))?;
            let k = std::sync::Arc::new(k);
            us.push(t0.elapsed().as_nanos() as f64 / 1e3);
            by_tier += usize::from(k.tier() == tier);
        }
        us.sort_by(|x, y| x.total_cmp(y));
        compile.push(CompileLatency {
            tier: tier.name().to_string(),
            median_us: us[us.len() / 2],
            p90_us: us[us.len() * 9 / 10],
            compiled: us.len(),
            by_tier,
        });
    }
    let auto = compile
        .iter()
        .find(|c| Some(c.tier.as_str()) == Tier::best().map(Tier::name))
        .cloned()
        .ok_or_else(|| Error::Invalid("no tier runs on this host".into()))?;
    Ok(Overheads {
        hit_call_ns: tm[0],
        static_call_ns: tm[1],
        prepared_call_ns: tm[2],
        compile_median_us: auto.median_us,
        compile_p90_us: auto.p90_us,
        compiled: auto.compiled,
        compile,
        nway_compile: measure_nway_compile(opts)?,
    })
}

// `skip(what, why)`: `SKIPPED: ...` on stderr, a failure under `SELECTJIT_REQUIRE_ALL_TIERS=1`
// (as `.ci/run` sets), shared with the workspace's other tests.
#[cfg(test)]
#[path = "../../../tests/common/skip.rs"]
mod skip;

/// Whether the copy `kind` runs on this host; if not, a skip (on x86-64 a failure under
/// `SELECTJIT_REQUIRE_ALL_TIERS=1`; elsewhere the vector copies are inherent skips).
#[cfg(test)]
fn copy_runs(kind: roofline::CopyKind) -> bool {
    if kind.available() {
        return true;
    }
    let what = format!("copy {} (tests of it)", kind.name());
    if cfg!(target_arch = "x86_64") {
        skip::skip(&what, "the host lacks AVX2");
    } else {
        skip::inherent(&what, "AVX2 copies are x86-64 only");
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_cases_parse_and_build() {
        let cases = parse_cases(BUILTIN_CASES).unwrap();
        assert!(cases.len() >= 20);
        let tiny = cases.iter().find(|c| c.name == "tiny_f32_3x4").unwrap();
        let inp = Inputs::new(tiny).unwrap();
        assert_eq!(inp.elements(), 12);
        assert_eq!(inp.traffic_bytes(), 12 + 48 * 3);
        let causal = Case {
            name: "c".into(),
            dtype: "f32".into(),
            cond: vec![3, 3],
            then: vec![3, 3],
            else_: vec![],
            cond_fill: "causal".into(),
        };
        assert_eq!(
            Inputs::new(&causal).unwrap().cond[..],
            [1, 0, 0, 1, 1, 0, 1, 1, 1]
        );
    }

    #[test]
    fn case_buffers_start_on_page_boundaries() {
        let cases = parse_cases(BUILTIN_CASES).unwrap();
        let case = cases.iter().find(|c| c.name == "three_way_f32").unwrap();
        let inp = Inputs::new(case).unwrap();
        let out = PageBuf::zeroed(inp.elements() * 4);
        for b in [&inp.cond, &inp.then, &inp.else_, &out] {
            assert_eq!(b.as_ptr() as usize % 4096, 0);
        }
        assert_eq!(inp.then.len(), 1024 * 4);
        assert!(out.iter().all(|&x| x == 0));
        let p = PageBuf::from_slice(&[1, 2, 3]);
        assert_eq!(p[..], [1, 2, 3]);
    }

    #[test]
    fn bad_case_lists_are_errors() {
        assert!(parse_cases("{").is_err());
        assert!(parse_cases(r#"{"cases":[{"name":"x","dtype":"f33","cond":[1],"then":[1],"else":[1],"cond_fill":"random"}]}"#).is_err());
        assert!(parse_cases(r#"{"cases":[{"name":"x","dtype":"f32","cond":[2],"then":[3],"else":[1],"cond_fill":"random"}]}"#).is_err());
    }
}

/// The dynamic-shape benchmark: an attention-mask select (cond `[1,1,S,S]`, then `[B,H,S,S]`,
/// scalar else, f32) whose sequence length `S` takes many values, as a serving runtime sees it.
#[derive(Debug, Clone, Serialize)]
pub struct DynamicReport {
    /// Distinct sequence lengths called (each once).
    pub lengths: usize,
    /// Exact kernels compiled for them with the default policy (on the second sighting).
    pub exact_compiles: u64,
    /// Shape-generic kernels compiled for them.
    pub generic_compiles: u64,
    /// Total time of the select calls (compiles included; input generation excluded).
    pub total_ms: f64,
    /// Per probed size: elements, generic-kernel time, exact-kernel time (ns, medians).
    pub probes: Vec<(usize, f64, f64)>,
}

fn attention_case(s: usize, heads: usize) -> Case {
    Case {
        name: format!("attn_s{s}"),
        dtype: "f32".into(),
        cond: vec![1, 1, s, s],
        then: vec![1, heads, s, s],
        else_: vec![],
        cond_fill: "causal".into(),
    }
}

/// Runs the dynamic-shape benchmark over `lengths` distinct sequence lengths.
pub fn measure_dynamic(lengths: usize, opts: Options) -> Result<DynamicReport> {
    let single = |exact_after| {
        Engine::with_config(
            base()?
                .backend(Backend::Jit)
                .exact_after(exact_after)
                .threads(1),
        )
    };
    let policy = single(2)?;
    let interp = Engine::with_config(base()?.backend(Backend::Interp))?;
    let heads = 4;
    let mut total_ns = 0u128;
    for k in 0..lengths {
        let s = 16 + k; // 16 .. 16 + lengths
        let inp = Inputs::new(&attention_case(s, heads))?;
        let mut out = vec![0u8; inp.elements() * 4];
        let t = Instant::now();
        inp.run(&policy, &mut out)?;
        total_ns += t.elapsed().as_nanos();
        if k % 97 == 0 {
            let mut want = vec![0u8; out.len()];
            inp.run(&interp, &mut want)?;
            if out != want {
                return Err(Error::Invalid(format!(
                    "dynamic S={s}: output differs from the interpreter"
                )));
            }
        }
    }
    let total_ms = total_ns as f64 / 1e6;
    let st = policy.stats();
    // Throughput of the generic kernel against the exact one, both warm, interleaved.
    let mut probes = Vec::new();
    for s in [128usize, 256, 512] {
        let inp = Inputs::new(&attention_case(s, heads))?;
        let generic = single(u32::MAX)?;
        let exact = single(1)?;
        let mut o1 = vec![0u8; inp.elements() * 4];
        let mut o2 = o1.clone();
        inp.run(&generic, &mut o1)?;
        inp.run(&exact, &mut o2)?;
        if o1 != o2 {
            return Err(Error::Invalid(format!(
                "dynamic S={s}: generic and exact kernels differ"
            )));
        }
        let mut fg = || inp.run(&generic, &mut o1).expect("validated above");
        let rg = calibrate(opts.min_batch_ns, &mut fg);
        let mut fe = || inp.run(&exact, &mut o2).expect("validated above");
        let re = calibrate(opts.min_batch_ns, &mut fe);
        let (mut tg, mut te) = (Vec::new(), Vec::new());
        for _ in 0..opts.rounds {
            tg.push(time_batch(rg, &mut fg));
            te.push(time_batch(re, &mut fe));
        }
        probes.push((inp.elements(), median(&mut tg), median(&mut te)));
    }
    Ok(DynamicReport {
        lengths,
        exact_compiles: st.compiles,
        generic_compiles: st.generic_compiles,
        total_ms,
        probes,
    })
}

/// Number of elements of a shape.
pub(crate) fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

//! Benchmark cases and measurements shared by `selectjit bench` and the criterion benches.
//!
//! A case (from `benches/cases.json`) names a dtype, three shapes broadcast with the numpy rule
//! and a cond fill. The yardstick is a plain memory copy of half the case's traffic (each input's
//! own bytes plus the output's bytes), so that copy reads + writes move as many bytes as the
//! select does. Backends and the copy are timed interleaved, in one run, and compared as ratios.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::dtype::DType;
use crate::engine::{Backend, Engine, EngineConfig};
use crate::error::{Error, Result};
use crate::jit::Jit;
use crate::plan::{plan, plan_contiguous};
use crate::shape::{Broadcast, numel, output_shape};
use crate::tensor::{TensorMut, TensorRef};

/// The built-in case list (a copy of the shared `cases.json`).
pub const BUILTIN_CASES: &str = include_str!("../benches/cases.json");

/// One benchmark case.
#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    pub name: String,
    pub dtype: String,
    pub cond: Vec<usize>,
    pub then: Vec<usize>,
    #[serde(rename = "else")]
    pub else_: Vec<usize>,
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

/// The buffers of one case, filled deterministically.
pub struct Inputs {
    pub dtype: DType,
    pub cond_shape: Vec<usize>,
    pub then_shape: Vec<usize>,
    pub else_shape: Vec<usize>,
    pub out_shape: Vec<usize>,
    pub cond: Vec<u8>,
    pub then: Vec<u8>,
    pub else_: Vec<u8>,
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
            then: fill(numel(&case.then)),
            else_: fill(numel(&case.else_)),
            cond,
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
        engine.select_dyn(
            self.dtype,
            TensorRef::new(&self.cond, &self.cond_shape),
            TensorRef::new(&self.then, &self.then_shape),
            TensorRef::new(&self.else_, &self.else_shape),
            TensorMut::new(out, &self.out_shape),
            Broadcast::Numpy,
        )
    }
}

/// What `selectjit bench` reports for one case. Times are medians of interleaved rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub case: String,
    pub dtype: String,
    pub elements: usize,
    pub traffic_bytes: usize,
    pub jit_ns: f64,
    pub static_ns: f64,
    pub memcpy_ns: f64,
    /// Reference interpreter, measured on small cases only.
    pub interp_ns: Option<f64>,
    /// The JIT on all available threads (same kernel, outer range split).
    pub jit_mt_ns: f64,
    /// The hand-written ndarray peer ([`ndarray_zip`]); measured with the `ndarray` feature only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ndarray_ns: Option<f64>,
    /// First call on a fresh engine: validation, planning, compilation and the run.
    pub compile_us: f64,
    /// jit_ns / static_ns and jit_ns / memcpy_ns (time ratios; below 1 means the JIT is faster).
    pub jit_over_static: f64,
    pub jit_over_memcpy: f64,
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
    pub fn full() -> Self {
        Options {
            rounds: 15,
            min_batch_ns: 4_000_000,
        }
    }
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

/// How many calls make a batch of at least `min_ns`.
fn calibrate(min_ns: u64, f: &mut dyn FnMut()) -> usize {
    let mut reps = 1usize;
    loop {
        let t = time_batch(reps, f) * reps as f64;
        if t >= min_ns as f64 || reps >= 1 << 24 {
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

/// A copy of `n` bytes, the yardstick.
pub struct MemCopy {
    src: Vec<u8>,
    dst: Vec<u8>,
}

impl MemCopy {
    pub fn new(n: usize) -> Self {
        MemCopy {
            src: (0..n).map(|i| i as u8).collect(),
            dst: vec![0; n],
        }
    }
    pub fn run(&mut self) {
        self.dst.copy_from_slice(&self.src);
        std::hint::black_box(&mut self.dst);
    }
}

/// Measures one case: JIT (cache warm), static kernels and the memory copy, interleaved.
pub fn measure(case: &Case, opts: Options) -> Result<Measurement> {
    let inp = Inputs::new(case)?;
    let out_bytes = inp.elements() * inp.dtype.width();
    let mut out = vec![0u8; out_bytes];
    let mut reference = vec![0u8; out_bytes];
    // Single-threaded engines; the exact kernel from the first call on.
    let engine_for = |b| {
        Engine::with_config(EngineConfig {
            backend: b,
            threads: 1,
            exact_after: 1,
            ..EngineConfig::default()
        })
    };
    let jit = engine_for(Backend::Jit);
    let stat = engine_for(Backend::Static);
    let jit_mt = Engine::with_config(EngineConfig {
        backend: Backend::Jit,
        exact_after: 1,
        ..EngineConfig::default()
    });

    // First call: compile. Then check that both backends give the reference interpreter's bytes.
    let t = Instant::now();
    inp.run(&jit, &mut out)?;
    let compile_us = t.elapsed().as_nanos() as f64 / 1e3;
    if let Some(e) = jit.last_codegen_error() {
        return Err(Error::Codegen(e));
    }
    let small = inp.elements() <= 1 << 16;
    let interp = engine_for(Backend::Interp);
    inp.run(&interp, &mut reference)?;
    if out != reference {
        return Err(Error::Invalid(format!(
            "{}: jit output differs from the interpreter",
            case.name
        )));
    }
    inp.run(&stat, &mut out)?;
    if out != reference {
        return Err(Error::Invalid(format!(
            "{}: static output differs from the interpreter",
            case.name
        )));
    }

    inp.run(&jit_mt, &mut out)?;
    if out != reference {
        return Err(Error::Invalid(format!(
            "{}: multi-threaded jit output differs",
            case.name
        )));
    }
    let mut out_mt = out.clone();
    let mut nd = NdarrayTimer::new(&inp, &reference, opts)?;
    let mut copy = MemCopy::new(inp.traffic_bytes() / 2);
    let mut f_jit = || inp.run(&jit, &mut out).expect("validated above");
    let r_jit = calibrate(opts.min_batch_ns, &mut f_jit);
    let mut f_static = || inp.run(&stat, &mut reference).expect("validated above");
    let r_static = calibrate(opts.min_batch_ns, &mut f_static);
    let mut f_copy = || copy.run();
    let r_copy = calibrate(opts.min_batch_ns, &mut f_copy);
    let mut f_mt = || inp.run(&jit_mt, &mut out_mt).expect("validated above");
    let r_mt = calibrate(opts.min_batch_ns, &mut f_mt);
    let (mut tj, mut ts, mut tc, mut tm) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..opts.rounds {
        tj.push(time_batch(r_jit, &mut f_jit));
        ts.push(time_batch(r_static, &mut f_static));
        tc.push(time_batch(r_copy, &mut f_copy));
        tm.push(time_batch(r_mt, &mut f_mt));
        nd.round();
    }
    let interp_ns = if small {
        let mut buf = vec![0u8; out_bytes];
        let mut f = || inp.run(&interp, &mut buf).expect("validated above");
        let r = calibrate(opts.min_batch_ns / 4, &mut f);
        Some(time_batch(r, &mut f))
    } else {
        None
    };
    let (jit_ns, static_ns, memcpy_ns) = (median(&mut tj), median(&mut ts), median(&mut tc));
    Ok(Measurement {
        case: case.name.clone(),
        dtype: case.dtype.clone(),
        elements: inp.elements(),
        traffic_bytes: inp.traffic_bytes(),
        jit_ns,
        static_ns,
        memcpy_ns,
        interp_ns,
        jit_mt_ns: median(&mut tm),
        ndarray_ns: nd.median(),
        compile_us,
        jit_over_static: jit_ns / static_ns,
        jit_over_memcpy: jit_ns / memcpy_ns,
    })
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

/// Column headers of [`table_row`].
#[cfg(not(feature = "ndarray"))]
pub const TABLE_HEADER: &str = "case                       elements   traffic  jit GB/s  static GB/s  copy GB/s  jit/static  jit/copy  jit-mt GB/s  first call";
/// Column headers of [`table_row`] (with the ndarray peer's column).
#[cfg(feature = "ndarray")]
pub const TABLE_HEADER: &str = "case                       elements   traffic  jit GB/s  static GB/s  copy GB/s  jit/static  jit/copy  jit-mt GB/s  first call  ndarray GB/s  jit/ndarray";

/// One line of the `selectjit bench` table.
pub fn table_row(m: &Measurement) -> String {
    let gbs = |ns: f64| m.traffic_bytes as f64 / ns;
    let mut row = format!(
        "{:<25} {:>10} {:>9} {:>9.2} {:>12.2} {:>10.2} {:>11.3} {:>9.3} {:>12.2} {:>8.0} us",
        m.case,
        m.elements,
        human_bytes(m.traffic_bytes),
        gbs(m.jit_ns),
        gbs(m.static_ns),
        gbs(m.memcpy_ns),
        m.jit_over_static,
        m.jit_over_memcpy,
        gbs(m.jit_mt_ns),
        m.compile_us
    );
    if let Some(nd) = m.ndarray_ns {
        row += &format!(" {:>13.2} {:>12.3}", gbs(nd), m.jit_ns / nd);
    }
    row
}

fn human_bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1}M", n as f64 / (1 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1}K", n as f64 / 1024.0),
        n => format!("{n}B"),
    }
}

/// Geometric mean of the static/jit time ratio (the JIT's speed-up over the static kernels).
pub fn geomean_speedup(ms: &[Measurement]) -> f64 {
    if ms.is_empty() {
        return f64::NAN;
    }
    (ms.iter()
        .map(|m| (m.static_ns / m.jit_ns).ln())
        .sum::<f64>()
        / ms.len() as f64)
        .exp()
}

/// Call overheads on a 16-element f32 select with the cache warm.
#[derive(Debug, Clone, Serialize)]
pub struct Overheads {
    /// `Engine::select`: validation, shape inference, planning, cache lookup, run.
    pub hit_call_ns: f64,
    /// `Prepared::run`: buffer-length checks and the call.
    pub prepared_call_ns: f64,
    /// Median / 90th percentile time to compile one new signature (IR, compile, finalize,
    /// insert), over many distinct signatures.
    pub compile_median_us: f64,
    pub compile_p90_us: f64,
    pub compiled: usize,
}

/// Measures call overheads and compile latency.
pub fn measure_overheads(opts: Options) -> Result<Overheads> {
    let e = Engine::with_config(EngineConfig {
        backend: Backend::Jit,
        threads: 1,
        exact_after: 1,
        ..EngineConfig::default()
    });
    let cond = [1u8, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0];
    let t = [1f32; 16];
    let el = [2f32; 16];
    let mut o = [0f32; 16];
    let mut f_hit = || {
        e.select(
            TensorRef::new(&cond, &[16]),
            TensorRef::new(&t, &[16]),
            TensorRef::new(&el, &[16]),
            TensorMut::new(&mut o, &[16]),
            Broadcast::Numpy,
        )
        .expect("valid call")
    };
    f_hit();
    let p = e.prepare(DType::F32, &[16], &[16], &[16], Broadcast::Numpy)?;
    let mut o2 = [0f32; 16];
    let mut f_prep = || p.run(&cond, &t, &el, &mut o2).expect("valid call");
    let r1 = calibrate(opts.min_batch_ns, &mut f_hit);
    let r2 = calibrate(opts.min_batch_ns, &mut f_prep);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..opts.rounds {
        a.push(time_batch(r1, &mut f_hit));
        b.push(time_batch(r2, &mut f_prep));
    }
    // Compile latency: distinct signatures of a few common patterns.
    let mut us = Vec::new();
    let n = if opts.rounds > 5 { 300 } else { 100 };
    for i in 0..n {
        let sig = match i % 3 {
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
        .ok_or_else(|| Error::Invalid("empty signature".into()))?;
        let e2 = Engine::with_jit(
            EngineConfig {
                exact_after: 1,
                ..EngineConfig::default()
            },
            Jit::host(false)?,
        );
        let t0 = Instant::now();
        let k = e2.kernel(&sig);
        us.push(t0.elapsed().as_nanos() as f64 / 1e3);
        if k.is_none() {
            return Err(Error::Codegen(format!("compiling {sig} failed")));
        }
    }
    us.sort_by(|x, y| x.total_cmp(y));
    Ok(Overheads {
        hit_call_ns: median(&mut a),
        prepared_call_ns: median(&mut b),
        compile_median_us: us[us.len() / 2],
        compile_p90_us: us[us.len() * 9 / 10],
        compiled: us.len(),
    })
}

/// The ndarray peer of a case: the loop a careful Rust user writes by hand instead of calling
/// this crate,
/// `Zip::from(&mut out).and_broadcast(&cond).and_broadcast(&then).and_broadcast(&else)` with a
/// branch-free closure, on owned row-major arrays of the case's shapes (elements as unsigned
/// integers of the dtype's width: the loop moves them, as the kernels do). Feature `ndarray`.
#[cfg(feature = "ndarray")]
pub trait ZipLoop {
    /// Runs the loop once.
    fn run(&mut self);
    /// The output's bytes, row-major.
    fn out_bytes(&self) -> Vec<u8>;
}

#[cfg(feature = "ndarray")]
struct Zipped<E> {
    cond: ::ndarray::ArrayD<u8>,
    then: ::ndarray::ArrayD<E>,
    else_: ::ndarray::ArrayD<E>,
    out: ::ndarray::ArrayD<E>,
}

#[cfg(feature = "ndarray")]
impl<E: bytemuck::Pod> ZipLoop for Zipped<E> {
    fn run(&mut self) {
        ::ndarray::Zip::from(&mut self.out)
            .and_broadcast(&self.cond)
            .and_broadcast(&self.then)
            .and_broadcast(&self.else_)
            .for_each(|o, &c, &t, &e| *o = if c != 0 { t } else { e });
        std::hint::black_box(&mut self.out);
    }
    fn out_bytes(&self) -> Vec<u8> {
        self.out
            .iter()
            .flat_map(|x| bytemuck::bytes_of(x).to_vec())
            .collect()
    }
}

/// Builds the ndarray peer of a case (see [`ZipLoop`]). Shapes that ndarray cannot broadcast
/// (none of the numpy-mode cases) are an error rather than a panic in `and_broadcast`.
#[cfg(feature = "ndarray")]
pub fn ndarray_zip(inp: &Inputs) -> Result<Box<dyn ZipLoop>> {
    use ::ndarray::{ArrayD, IxDyn};
    fn build<E: bytemuck::Pod>(inp: &Inputs) -> Result<Box<dyn ZipLoop>> {
        let arr = |shape: &[usize], bytes: &[u8]| -> Result<ArrayD<E>> {
            let elems = bytes.chunks_exact(size_of::<E>());
            ArrayD::from_shape_vec(
                IxDyn(shape),
                elems.map(bytemuck::pod_read_unaligned).collect(),
            )
            .map_err(|e| Error::Invalid(e.to_string()))
        };
        let z = Zipped {
            cond: arr_u8(&inp.cond_shape, &inp.cond)?,
            then: arr(&inp.then_shape, &inp.then)?,
            else_: arr(&inp.else_shape, &inp.else_)?,
            out: ArrayD::from_elem(IxDyn(&inp.out_shape), E::zeroed()),
        };
        // ndarray's rule: right-aligned, each dim equal to the output's or 1.
        let out = &inp.out_shape;
        for (what, s) in [
            ("cond", z.cond.shape()),
            ("then", z.then.shape()),
            ("else", z.else_.shape()),
        ] {
            let ok = s.len() <= out.len()
                && s.iter()
                    .zip(&out[out.len() - s.len()..])
                    .all(|(a, b)| a == b || *a == 1);
            if !ok {
                return Err(Error::Invalid(format!(
                    "ndarray cannot broadcast {what} {s:?} to {out:?}"
                )));
            }
        }
        Ok(Box::new(z))
    }
    fn arr_u8(shape: &[usize], bytes: &[u8]) -> Result<ArrayD<u8>> {
        ArrayD::from_shape_vec(IxDyn(shape), bytes.to_vec())
            .map_err(|e| Error::Invalid(e.to_string()))
    }
    match inp.dtype.width() {
        1 => build::<u8>(inp),
        2 => build::<u16>(inp),
        4 => build::<u32>(inp),
        8 => build::<u64>(inp),
        _ => build::<[u64; 2]>(inp),
    }
}

/// Times the ndarray peer of a case in the rounds of [`measure`] (nothing without the feature).
struct NdarrayTimer {
    #[cfg(feature = "ndarray")]
    zip: Box<dyn ZipLoop>,
    #[cfg(feature = "ndarray")]
    reps: usize,
    #[cfg(feature = "ndarray")]
    times: Vec<f64>,
}

impl NdarrayTimer {
    /// Builds the peer and checks its bytes against `reference` (the interpreter's).
    #[cfg(feature = "ndarray")]
    fn new(inp: &Inputs, reference: &[u8], opts: Options) -> Result<NdarrayTimer> {
        let mut zip = ndarray_zip(inp)?;
        zip.run();
        if zip.out_bytes() != reference {
            return Err(Error::Invalid("ndarray Zip output differs".into()));
        }
        let reps = calibrate(opts.min_batch_ns, &mut || zip.run());
        Ok(NdarrayTimer {
            zip,
            reps,
            times: Vec::new(),
        })
    }
    #[cfg(not(feature = "ndarray"))]
    fn new(_: &Inputs, _: &[u8], _: Options) -> Result<NdarrayTimer> {
        Ok(NdarrayTimer {})
    }
    fn round(&mut self) {
        #[cfg(feature = "ndarray")]
        self.times
            .push(time_batch(self.reps, &mut || self.zip.run()));
    }
    fn median(&mut self) -> Option<f64> {
        #[cfg(feature = "ndarray")]
        return Some(median(&mut self.times));
        #[cfg(not(feature = "ndarray"))]
        None
    }
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
            Inputs::new(&causal).unwrap().cond,
            vec![1, 0, 0, 1, 1, 0, 1, 1, 1]
        );
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
    /// Kernels compiled for them with the default policy (exact kernel on the second sighting).
    pub exact_compiles: u64,
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
        Engine::with_config(EngineConfig {
            backend: Backend::Jit,
            exact_after,
            threads: 1,
            ..EngineConfig::default()
        })
    };
    let policy = single(EngineConfig::default().exact_after.max(2));
    let interp = Engine::with_backend(Backend::Interp);
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
        let generic = single(u32::MAX);
        let exact = single(1);
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

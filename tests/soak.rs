//! Churn soak: a small cache and many distinct signatures, every result checked against the
//! interpreter; live kernels, code bytes and resident memory must stay bounded.
//!
//! `SELECTJIT_SOAK_N` sets the number of distinct signatures (default 20 000, at most 140 000;
//! the README's figures come from a run with 100 000). One test only: `live_kernels()` counts the process.

mod common;

use selectjit::Tier;
use selectjit::codegen::live_kernels;
use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, TensorMut, TensorRef};

const CAPACITY: usize = 64;

fn rss_kib() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4
}

/// Distinct signature number `i` (up to 140 000): pattern × element width × two dims, with
/// sizes bounded so that the working set stays the same over the run.
fn signature(i: usize) -> (DType, Vec<usize>, Vec<usize>, Vec<usize>) {
    let (p, r) = (i % 4, i / 4);
    let dt = [
        DType::U8,
        DType::F16,
        DType::F32,
        DType::F64,
        DType::Complex128,
    ][r % 5];
    let a = 2 + (r / 5) % 7;
    let b = 17 + (r / 35) % 1000;
    let (c, t, e) = match p {
        0 => {
            let n = b + 1000 * (a - 2);
            (vec![n], vec![n], vec![n])
        }
        1 => (vec![a, 1], vec![a, b], vec![]),
        2 => (vec![1, b], vec![a, b], vec![a, 1]),
        _ => (vec![a, 1, b], vec![b], vec![a, 3, 1]),
    };
    (dt, c, t, e)
}

/// Every tier in turn (one test: `live_kernels()` counts the whole process). Tiers run in the
/// emulator get a twentieth of the signatures.
#[test]
fn churn_keeps_memory_bounded() {
    let n: usize = std::env::var("SELECTJIT_SOAK_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
        .min(140_000);
    for (tier, emulate) in common::tiers() {
        soak(tier, emulate, if emulate { (n / 20).max(200) } else { n });
    }
}

fn soak(tier: Tier, emulate: bool, n: usize) {
    let jit = common::engine(
        &EngineConfig::new()
            .cache_capacity(CAPACITY)
            .exact_after(1)
            .threads(1),
        Backend::Jit,
        tier,
        emulate,
    );
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let mut rss = Vec::new();
    let (mut max_live, mut max_code) = (0usize, 0usize);
    for i in 0..n {
        let (dt, c, t, e) = signature(i);
        let w = dt.width();
        let out_shape = selectjit::output_shape(Broadcast::Numpy, &c, &t, &e)
            .unwrap()
            .to_vec();
        let len = |s: &[usize]| s.iter().product::<usize>();
        let cond: Vec<u8> = (0..len(&c)).map(|k| ((k * 7 + i) % 3) as u8).collect();
        let tv: Vec<u8> = (0..len(&t) * w).map(|k| (k + i) as u8).collect();
        let ev: Vec<u8> = (0..len(&e) * w).map(|k| !(k as u8)).collect();
        let mut got = vec![0u8; len(&out_shape) * w];
        let mut want = got.clone();
        for (eng, out) in [(&jit, &mut got), (&interp, &mut want)] {
            eng.select_bytes(
                dt,
                TensorRef::new(&cond, &c),
                TensorRef::new(&tv, &t),
                TensorRef::new(&ev, &e),
                TensorMut::new(out, &out_shape),
                Broadcast::Numpy,
            )
            .unwrap();
        }
        assert!(
            got == want,
            "{tier}: signature {i}: jit differs from the interpreter"
        );
        let (live, code) = live_kernels();
        max_live = max_live.max(live);
        max_code = max_code.max(code);
        if i % (n / 20).max(1) == 0 {
            rss.push(rss_kib());
        }
    }
    let s = jit.stats();
    let (live, code) = live_kernels();
    println!(
        "soak {tier} (emulated: {emulate}): {n} signatures, {} compiles, {} evictions, live kernels now {live} (max {max_live}), \
         code bytes now {code} (max {max_code}), RSS KiB at 5% steps {rss:?}",
        s.compiles, s.evictions
    );
    assert_eq!(s.compiles as usize, n, "every signature is new");
    assert!(s.evictions as usize >= n - CAPACITY);
    // Kernels alive: the cache's, plus at most one held by a call in flight and one by the
    // thread's memo of the previous tier's engine.
    assert!(
        max_live <= CAPACITY + 2,
        "{max_live} kernels were alive at once"
    );
    assert!(
        max_code <= (CAPACITY + 1) * 16 * 1024,
        "{max_code} bytes of code held"
    );
    // Resident memory plateaus: after the first quarter (allocator warm-up) it stays within
    // 4 MiB of its level then.
    let q = rss[rss.len() / 4];
    let peak = *rss[rss.len() / 4..].iter().max().unwrap();
    assert!(peak <= q + 4 * 1024, "RSS grew from {q} KiB to {peak} KiB");
}

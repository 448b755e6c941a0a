//! Criterion benches over every case of `benches/cases.json` (a copy of the shared case list):
//! JIT (cache warm), static kernels, the interpreter (small cases only) and a memory copy of
//! half the case's traffic (so that copy reads + writes move as many bytes as the select), and
//! with the `ndarray` feature the hand-written ndarray `Zip` loop of the case. Throughput is
//! reported in bytes of traffic. All single-threaded.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use selectjit::bench::{BUILTIN_CASES, Inputs, MemCopy, parse_cases};
use selectjit::{Backend, Engine, EngineConfig};

fn engine(backend: Backend) -> Engine {
    Engine::with_config(EngineConfig {
        backend,
        threads: 1,
        exact_after: 1,
        ..EngineConfig::default()
    })
}

fn cases(c: &mut Criterion) {
    let filter = std::env::var("SELECTJIT_BENCH_FILTER").unwrap_or_default();
    let jit = engine(Backend::Jit);
    let stat = engine(Backend::Static);
    let interp = engine(Backend::Interp);
    for case in parse_cases(BUILTIN_CASES).expect("built-in cases parse") {
        if !case.name.contains(&filter) {
            continue;
        }
        let inp = Inputs::new(&case).expect("built-in case");
        let mut out = vec![0u8; inp.elements() * inp.dtype.width()];
        let mut g = c.benchmark_group(&case.name);
        g.throughput(Throughput::Bytes(inp.traffic_bytes() as u64));
        g.bench_function("jit", |b| b.iter(|| inp.run(&jit, &mut out).unwrap()));
        g.bench_function("static", |b| b.iter(|| inp.run(&stat, &mut out).unwrap()));
        if inp.elements() <= 1 << 16 {
            g.bench_function("interp", |b| b.iter(|| inp.run(&interp, &mut out).unwrap()));
        }
        let mut copy = MemCopy::new(inp.traffic_bytes() / 2);
        g.bench_function("memcpy", |b| b.iter(|| copy.run()));
        #[cfg(feature = "ndarray")]
        {
            let mut zip = selectjit::bench::ndarray_zip(&inp).expect("numpy-mode case");
            g.bench_function("ndarray", |b| b.iter(|| zip.run()));
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_millis(800));
    targets = cases
}
criterion_main!(benches);

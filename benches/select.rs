//! Criterion benches over every case of `benches/cases.json` (a copy of the shared case list):
//! every code-generation tier this host runs (cache warm), the static kernels, the interpreter
//! (small cases only), the copies of half the case's traffic that make up the copy roofline
//! (memcpy, vector copies with ordinary stores, with non-temporal stores, and with
//! non-temporal stores walking four parts at once), and with the `ndarray`
//! feature the hand-written ndarray `Zip` loop of the case. Throughput is reported in bytes of
//! traffic. All single-threaded.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use selectjit::Tier;
use selectjit::{Backend, Engine, EngineConfig};
use selectjit_bench::roofline::{CopyBuffers, CopyKind};
use selectjit_bench::{BUILTIN_CASES, Inputs, host_tiers, parse_cases};

fn engine(backend: Backend, tier: Tier) -> Engine {
    Engine::with_config(
        EngineConfig::new()
            .backend(backend)
            .tier(tier)
            .threads(1)
            .exact_after(1),
    )
    .expect("engine")
}

fn cases(c: &mut Criterion) {
    let filter = std::env::var("SELECTJIT_BENCH_FILTER").unwrap_or_default();
    let tiers: Vec<(Tier, Engine)> = host_tiers()
        .into_iter()
        .map(|t| (t, engine(Backend::Jit, t)))
        .collect();
    let stat = engine(Backend::Static, Tier::Auto);
    let interp = engine(Backend::Interp, Tier::Auto);
    for case in parse_cases(BUILTIN_CASES).expect("built-in cases parse") {
        if !case.name.contains(&filter) {
            continue;
        }
        let inp = Inputs::new(&case).expect("built-in case");
        let mut out = vec![0u8; inp.elements() * inp.dtype.width()];
        let mut g = c.benchmark_group(&case.name);
        g.throughput(Throughput::Bytes(inp.traffic_bytes() as u64));
        for (t, e) in &tiers {
            g.bench_function(t.name(), |b| b.iter(|| inp.run(e, &mut out).unwrap()));
        }
        g.bench_function("static", |b| b.iter(|| inp.run(&stat, &mut out).unwrap()));
        if inp.elements() <= 1 << 16 {
            g.bench_function("interp", |b| b.iter(|| inp.run(&interp, &mut out).unwrap()));
        }
        let mut copy = CopyBuffers::new(inp.traffic_bytes() / 2);
        for k in CopyKind::ALL.into_iter().filter(|k| k.available()) {
            g.bench_function(format!("copy-{}", k.name()), |b| {
                b.iter(|| copy.copy(k).unwrap())
            });
        }
        {
            let mut zip = selectjit_bench::ndarray_zip(&inp).expect("numpy-mode case");
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

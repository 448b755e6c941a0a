//! Many threads on one engine with a tiny cache (constant eviction), every result checked.

mod common;

use std::sync::Arc;

use selectjit::Tier;
use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, TensorMut, TensorRef};

#[test]
fn threads_share_one_engine_under_eviction() {
    // Every tier; exact kernels compiled on every miss, and the generic-first policy.
    for (tier, emulate) in common::tiers() {
        for exact_after in [1, 2] {
            workload(tier, emulate, exact_after);
        }
    }
}

fn workload(tier: Tier, emulate: bool, exact_after: u32) {
    let engine = Arc::new(common::engine(
        &EngineConfig::new()
            .cache_capacity(8)
            .exact_after(exact_after)
            .threads(2),
        Backend::Jit,
        tier,
        emulate,
    ));
    let interp =
        Arc::new(Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap());
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (engine, interp) = (engine.clone(), interp.clone());
            std::thread::spawn(move || {
                let mut checked = 0;
                for i in 0..300usize {
                    let k = (i * 7 + t * 13) % 40;
                    let (c, th, e) = match k % 4 {
                        0 => (vec![k + 5], vec![k + 5], vec![k + 5]),
                        1 => (vec![3, 1], vec![3, k + 20], vec![]),
                        2 => (vec![1, k + 1], vec![2, k + 1], vec![2, 1]),
                        _ => (vec![2, 1, k + 3], vec![k + 3], vec![2, 2, 1]),
                    };
                    let dt = [
                        DType::U8,
                        DType::F16,
                        DType::F32,
                        DType::F64,
                        DType::Complex128,
                    ][i % 5];
                    let w = dt.width();
                    let out_shape = selectjit::output_shape(Broadcast::Numpy, &c, &th, &e)
                        .unwrap()
                        .to_vec();
                    let n = |s: &[usize]| s.iter().product::<usize>();
                    let cond: Vec<u8> = (0..n(&c)).map(|x| ((x + i) % 3) as u8).collect();
                    let tv: Vec<u8> = (0..n(&th) * w).map(|x| (x * 3 + t) as u8).collect();
                    let ev: Vec<u8> = (0..n(&e) * w).map(|x| (x * 5 + 1) as u8).collect();
                    let mut got = vec![0u8; n(&out_shape) * w];
                    let mut want = got.clone();
                    for (eng, out) in [(&*engine, &mut got), (&*interp, &mut want)] {
                        eng.select_bytes(
                            dt,
                            TensorRef::new(&cond, &c),
                            TensorRef::new(&tv, &th),
                            TensorRef::new(&ev, &e),
                            TensorMut::new(out, &out_shape),
                            Broadcast::Numpy,
                        )
                        .unwrap();
                    }
                    assert!(
                        got == want,
                        "{tier} thread {t} call {i}: {c:?} {th:?} {e:?} {dt}"
                    );
                    checked += 1;
                }
                checked
            })
        })
        .collect();
    // Each thread asserted every call against the interpreter; a panic in one fails here.
    let total: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let s = engine.stats();
    println!("concurrency {tier} (emulated: {emulate}): {total} calls checked, {s:?}");
    assert!(s.evictions > 0 && s.len <= 8, "{s:?}");
    if exact_after == 1 {
        assert!(s.compiles > 100, "{s:?}");
    } else {
        assert!(s.generic_compiles > 0 && s.generic_runs > 1000, "{s:?}");
    }
}

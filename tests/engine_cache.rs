//! Kernel cache behaviour and prepared kernels, checked against the interpreter.

use std::sync::Arc;

use selectjit::plan::plan_contiguous;
use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, TensorMut, TensorRef, Tier};

fn engine(capacity: usize) -> Engine {
    Engine::with_config(
        EngineConfig::new()
            .backend(Backend::Jit)
            .cache_capacity(capacity)
            .verify(true)
            .exact_after(1),
    )
    .expect("engine")
}

fn run_f32(e: &Engine, n: usize) -> Vec<f32> {
    let cond: Vec<u8> = (0..n).map(|i| (i % 3) as u8).collect();
    let t: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let el: Vec<f32> = (0..n).map(|i| -(i as f32)).collect();
    let mut out = vec![0f32; n];
    e.select(
        TensorRef::new(&cond, &[n]),
        TensorRef::new(&t, &[n]),
        TensorRef::new(&el, &[n]),
        TensorMut::new(&mut out, &[n]),
        Broadcast::Numpy,
    )
    .unwrap();
    let want: Vec<f32> = (0..n)
        .map(|i| if i % 3 != 0 { t[i] } else { el[i] })
        .collect();
    assert_eq!(
        out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    out
}

#[test]
fn hits_and_misses_are_counted() {
    let e = engine(16);
    for _ in 0..5 {
        run_f32(&e, 100);
    }
    let s = e.stats();
    assert_eq!((s.misses, s.hits, s.compiles, s.len), (1, 4, 1, 1));
    run_f32(&e, 101);
    run_f32(&e, 102);
    let s = e.stats();
    assert_eq!(
        (s.misses, s.hits, s.compiles, s.len, s.evictions),
        (3, 4, 3, 3, 0)
    );
    // Same work, different shapes: one kernel ([2,50] contiguous collapses to [100]).
    let cond = vec![1u8; 100];
    let v = vec![1f32; 100];
    let mut out = vec![0f32; 100];
    e.select(
        TensorRef::new(&cond, &[2, 50]),
        TensorRef::new(&v, &[2, 50]),
        TensorRef::new(&v, &[2, 50]),
        TensorMut::new(&mut out, &[2, 50]),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(e.stats().hits, 5);
}

/// Engines that take turns on one thread, each with its own kernel of one shape, across the
/// batches in which a thread adds its hits to an engine's count: every call right, every hit
/// counted for its engine, and an engine dropped mid-way leaves the other's calls right.
#[test]
fn engines_taking_turns_on_a_thread_count_their_own_hits() {
    let (a, b) = (engine(4), engine(4));
    for _ in 0..150 {
        run_f32(&a, 64);
        run_f32(&a, 64);
        run_f32(&b, 64);
    }
    let (sa, sb) = (a.stats(), b.stats());
    // a: one miss, then 299 hits; b: one miss, then 149 hits.
    assert_eq!((sa.misses, sa.hits), (1, 299));
    assert_eq!((sb.misses, sb.hits), (1, 149));
    // Runs of one engine longer than a batch, then the other.
    for _ in 0..130 {
        run_f32(&b, 64);
    }
    run_f32(&a, 64);
    assert_eq!(a.stats().hits, 300);
    assert_eq!(b.stats().hits, 279);
    drop(a);
    for _ in 0..3 {
        run_f32(&b, 64);
    }
    assert_eq!(b.stats().hits, 282);
}

#[test]
fn eviction_at_capacity_and_held_kernels_stay_valid() {
    eviction_frees_unheld_kernels(engine(2));
    // A single tier: no tier trial, so every kernel is memoised on its first call (the thread's
    // memo holds an evicted kernel no longer, and holds each signature once).
    eviction_frees_unheld_kernels(
        Engine::with_config(
            EngineConfig::new()
                .backend(Backend::Jit)
                .tier(Tier::Cranelift)
                .cache_capacity(2)
                .verify(true)
                .exact_after(1),
        )
        .expect("engine"),
    );
}

fn eviction_frees_unheld_kernels(e: Engine) {
    let held = e.kernel(&plan_contiguous(4, 200).unwrap()).unwrap();
    let weak = Arc::downgrade(&held);
    let prepared = e
        .prepare(DType::F32, &[200], &[200], &[200], Broadcast::Numpy)
        .unwrap();
    assert!(prepared.is_jit());
    for n in [201, 202, 203] {
        run_f32(&e, n);
    }
    let s = e.stats();
    assert_eq!(s.len, 2);
    assert_eq!(s.evictions, 2);
    // The evicted kernel still runs while held (by `held` and by the prepared call).
    let cond: Vec<u8> = (0..200).map(|i| (i % 2) as u8).collect();
    let t = vec![1f32; 200];
    let el = vec![2f32; 200];
    let mut out = vec![0f32; 200];
    prepared.run(&cond, &t, &el, &mut out).unwrap();
    assert!(
        out.iter()
            .enumerate()
            .all(|(i, &v)| v == if i % 2 == 1 { 1.0 } else { 2.0 })
    );
    // Once nobody holds it, the kernel (and its code memory, freed in its Drop) is gone.
    drop(held);
    drop(prepared);
    assert!(weak.upgrade().is_none());
}

#[test]
fn prepared_checks_buffers_and_dtype() {
    let e = engine(8);
    let p = e
        .prepare(DType::F32, &[1, 4], &[3, 4], &[], Broadcast::Numpy)
        .unwrap();
    assert_eq!(p.out_shape(), &[3, 4]);
    let cond = [1u8, 0, 2, 0];
    let t: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let mut out = vec![0f32; 12];
    p.run(&cond, &t, &[-1.0f32], &mut out).unwrap();
    for r in 0..3 {
        for c in 0..4 {
            let want = if cond[c] != 0 { t[r * 4 + c] } else { -1.0 };
            assert_eq!(out[r * 4 + c], want);
        }
    }
    let mut short = vec![0f32; 11];
    assert!(p.run(&cond, &t, &[-1.0f32], &mut short).is_err());
    assert!(p.run(&cond[..3], &t, &[-1.0f32], &mut out).is_err());
    let mut wrong = vec![0i32; 12];
    assert!(p.run(&cond, &[0i32; 12], &[0i32], &mut wrong).is_err());
    assert!(
        e.prepare(DType::F32, &[2], &[3], &[3], Broadcast::Numpy)
            .is_err()
    );
    // Every backend prepares the same call to the same bytes.
    for b in Backend::ALL {
        let eb = Engine::with_config(EngineConfig::new().backend(*b)).unwrap();
        let pb = eb
            .prepare(DType::F32, &[1, 4], &[3, 4], &[], Broadcast::Numpy)
            .unwrap();
        let mut o = vec![0f32; 12];
        pb.run(&cond, &t, &[-1.0f32], &mut o).unwrap();
        assert_eq!(o, out, "{b:?}");
    }
}

#[test]
fn generic_kernels_serve_new_shapes_until_they_are_hot() {
    let e = Engine::with_config(
        EngineConfig::new()
            .backend(Backend::Jit)
            .exact_after(3)
            .verify(true),
    )
    .expect("engine");
    // 40 different row lengths of one pattern: one generic kernel, no exact compile.
    for n in 100..140 {
        run_f32(&e, n);
    }
    let s = e.stats();
    assert_eq!(
        (s.generic_compiles, s.compiles, s.generic_runs, s.misses),
        (1, 0, 40, 40)
    );
    // The third sighting of a signature compiles its exact kernel; later calls hit it.
    for _ in 0..4 {
        run_f32(&e, 100);
    }
    let s = e.stats();
    assert_eq!((s.compiles, s.generic_runs, s.hits), (1, 41, 2));
    // A broadcast pattern of another rank gets its own generic kernel.
    let cond = vec![1u8, 0, 3];
    let t = vec![1f32; 12];
    let mut out = vec![0f32; 12];
    e.select(
        TensorRef::new(&cond, &[3]),
        TensorRef::new(&t, &[4, 3]),
        TensorRef::scalar(&[5f32]),
        TensorMut::new(&mut out, &[4, 3]),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(out, [1.0, 5.0, 1.0].repeat(4));
    assert_eq!(e.stats().generic_compiles, 2);
}

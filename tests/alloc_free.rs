//! A cache-hit call allocates nothing on the heap for ranks up to 8.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, TensorMut, TensorRef};

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialised thread-local
// `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(|c| c.get())
}

#[test]
fn cache_hit_does_not_allocate() {
    // (cond, then, else) shapes up to rank 8, broadcast and plain.
    let cases: Vec<(Vec<usize>, Vec<usize>, Vec<usize>)> = vec![
        (vec![16], vec![16], vec![16]),
        (vec![1, 1, 8, 8], vec![2, 3, 8, 8], vec![]),
        (
            vec![2, 1, 1, 1, 1, 1, 1, 3],
            vec![2, 2, 1, 2, 1, 2, 1, 3],
            vec![1],
        ),
        (vec![4, 1], vec![1, 5], vec![4, 5]),
    ];
    // (backend, exact_after): exact kernels found in the cache, and shape-generic kernels
    // serving a signature that is not hot yet.
    for (backend, exact_after) in [
        (Backend::Jit, 2),
        (Backend::Jit, u32::MAX),
        (Backend::Static, 2),
    ] {
        let e = Engine::with_config(
            EngineConfig::new()
                .backend(backend)
                .exact_after(exact_after),
        )
        .expect("engine");
        for (c, t, el) in &cases {
            let out_shape = selectjit::output_shape(Broadcast::Numpy, c, t, el)
                .unwrap()
                .to_vec();
            let n = |s: &[usize]| s.iter().product::<usize>();
            let cond = vec![1u8; n(c)];
            let tv = vec![1.5f32; n(t)];
            let ev = vec![2.5f32; n(el)];
            let mut out = vec![0f32; n(&out_shape)];
            let mut call = || {
                e.select(
                    TensorRef::new(&cond, c),
                    TensorRef::new(&tv, t),
                    TensorRef::new(&ev, el),
                    TensorMut::new(&mut out, &out_shape),
                    Broadcast::Numpy,
                )
                .unwrap()
            };
            // Warm up: the first sighting runs the generic kernel, the second compiles the exact
            // one (with exact_after = 2; under the `Auto` tier as every candidate variant, whose
            // trial the next calls decide); from then on every call is a hit.
            for _ in 0..40 {
                call();
            }
            let hits = e.stats().hits;
            let before = allocs();
            for _ in 0..10 {
                call();
            }
            assert_eq!(allocs() - before, 0, "{backend:?} {c:?} {t:?} {el:?}");
            if backend == Backend::Jit && exact_after == 2 {
                assert_eq!(e.stats().hits, hits + 10);
            } else if backend == Backend::Jit {
                assert_eq!(e.stats().compiles, 0);
            }
        }
    }
}

/// The fused path allocates nothing per call once warm: a predicate with a scalar operand, one
/// with a broadcast row of another dtype, an in-place ReLU, and a hoisted predicate (a 1 MiB
/// output), on one thread (a call split across the pool's threads hands it its parts).
#[test]
fn fused_predicate_calls_do_not_allocate() {
    use selectjit::{Cond, InPlace, Operand};
    for backend in [Backend::Jit, Backend::Static] {
        let e = Engine::with_config(
            EngineConfig::new()
                .backend(backend)
                .exact_after(2)
                .threads(1),
        )
        .expect("engine");
        let x: Vec<f32> = (0..4096).map(|i| (i % 7) as f32 - 3.0).collect();
        let pos: Vec<i64> = (0..64).collect();
        let mut out = vec![0f32; 4096];
        let mut io = x.clone();
        let big: Vec<f32> = (0..1 << 18).map(|i| (i % 5) as f32).collect();
        let mut big_out = vec![0f32; 1 << 18];
        let mut calls = || {
            e.select(
                Cond::gt(TensorRef::new(&x, &[64, 64]), 0.0f32),
                TensorRef::new(&x, &[64, 64]),
                TensorRef::scalar(&[0.0f32]),
                TensorMut::new(&mut out, &[64, 64]),
                Broadcast::Numpy,
            )
            .unwrap();
            e.select(
                Cond::lt(TensorRef::new(&pos, &[64]), Operand::from(32i64)),
                TensorRef::new(&x, &[64, 64]),
                TensorRef::scalar(&[f32::NEG_INFINITY]),
                TensorMut::new(&mut out, &[64, 64]),
                Broadcast::Numpy,
            )
            .unwrap();
            e.select_in_place(
                Cond::gt(Operand::in_place(), 0.0f32),
                TensorMut::new(&mut io, &[64, 64]),
                InPlace::Then,
                TensorRef::scalar(&[0.0f32]),
                Broadcast::Numpy,
            )
            .unwrap();
            // A predicate 256x smaller than the output: evaluated once into the thread's
            // mask scratch, then the mask's select.
            e.select(
                Cond::eq(TensorRef::new(&pos[..16], &[16]), Operand::from(0i64)),
                TensorRef::scalar(&[f32::NEG_INFINITY]),
                TensorRef::new(&big, &[1 << 14, 16]),
                TensorMut::new(&mut big_out, &[1 << 14, 16]),
                Broadcast::Numpy,
            )
            .unwrap();
        };
        let pos16 = TensorRef::new(&pos[..16], &[16]);
        assert_eq!(
            e.hoisted_pred_shape(
                DType::F32,
                Cond::eq(pos16, Operand::from(0i64)),
                &[1 << 14, 16]
            )
            .unwrap(),
            Some(vec![16])
        );
        for _ in 0..40 {
            calls();
        }
        let before = allocs();
        for _ in 0..10 {
            calls();
        }
        assert_eq!(allocs() - before, 0, "{backend:?}");
    }
}

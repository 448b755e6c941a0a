//! Embedding selectjit in an inference runtime: one engine shared by worker threads, prepared
//! kernels for the model's fixed shapes, dynamic sequence lengths on the shape-generic kernels,
//! and the engine's statistics at the end.
//!
//! The model step here is the attention-mask select of a transformer:
//! `scores = where(mask, scores, -inf)` with a causal mask `[1, 1, S, S]` broadcast over scores
//! `[B, H, S, S]`, and the padding select `where(pad, hidden, 0)` on `[B, S, D]`.
//!
//! ```sh
//! cargo run --release --example embed_runtime
//! ```

use std::time::Instant;

use selectjit::{Broadcast, DType, Engine, EngineConfig, Error, Prepared, TensorMut, TensorRef};

const B: usize = 2;
const H: usize = 4;
const D: usize = 64;

fn causal_mask(s: usize) -> Vec<u8> {
    (0..s * s).map(|i| u8::from(i % s <= i / s)).collect()
}

fn scores(s: usize, salt: f32) -> Vec<f32> {
    (0..B * H * s * s)
        .map(|i| (i % 97) as f32 * 0.01 + salt)
        .collect()
}

/// The expected masked scores, computed plainly.
fn reference(mask: &[u8], x: &[f32], s: usize) -> Vec<f32> {
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            if mask[i % (s * s)] != 0 {
                v
            } else {
                f32::NEG_INFINITY
            }
        })
        .collect()
}

fn main() -> Result<(), Error> {
    // One engine for the whole process: `Send + Sync`, its kernel cache shared by all threads.
    let engine = Engine::with_config(EngineConfig::new().cache_capacity(256)).expect("engine");
    println!("engine: tier {:?}", engine.tier());

    // 1. The model's fixed shapes, prepared once: the call that runs every step is planned and
    //    its kernel bound, so each run is only length checks and the kernel.
    let s_fixed = 128;
    let mask = causal_mask(s_fixed);
    let prepared: Prepared = engine.prepare(
        DType::F32,
        &[1, 1, s_fixed, s_fixed],
        &[B, H, s_fixed, s_fixed],
        &[],
        Broadcast::Numpy,
    )?;
    let pad_select = engine.prepare(
        DType::F32,
        &[B, s_fixed, 1],
        &[B, s_fixed, D],
        &[],
        Broadcast::Numpy,
    )?;

    // 2. Worker threads share the engine and the prepared calls: each runs its own requests.
    let t0 = Instant::now();
    std::thread::scope(|scope| {
        for worker in 0..4 {
            let (engine, prepared, pad_select, mask) = (&engine, &prepared, &pad_select, &mask);
            scope.spawn(move || -> Result<(), Error> {
                let x = scores(s_fixed, worker as f32);
                let mut out = vec![0f32; x.len()];
                for _ in 0..20 {
                    prepared.run(mask, &x, &[f32::NEG_INFINITY], &mut out)?;
                }
                assert_eq!(out, reference(mask, &x, s_fixed), "worker {worker}");
                // Padding: the last 8 positions of each sequence are padding.
                let pad: Vec<u8> = (0..B * s_fixed)
                    .map(|i| u8::from(i % s_fixed < s_fixed - 8))
                    .collect();
                let hidden: Vec<f32> = (0..B * s_fixed * D).map(|i| i as f32).collect();
                let mut h = vec![0f32; hidden.len()];
                pad_select.run(&pad, &hidden, &[0.0], &mut h)?;
                assert!(
                    h.iter()
                        .enumerate()
                        .all(|(i, &v)| v == if pad[i / D] != 0 { i as f32 } else { 0.0 })
                );
                // The same call through the engine's ordinary entry point hits the cache.
                engine.select(
                    TensorRef::new(mask, &[1, 1, s_fixed, s_fixed]),
                    TensorRef::new(&x, &[B, H, s_fixed, s_fixed]),
                    TensorRef::scalar(&[f32::NEG_INFINITY]),
                    TensorMut::new(&mut out, &[B, H, s_fixed, s_fixed]),
                    Broadcast::Numpy,
                )?;
                Ok(())
            });
        }
    });
    println!(
        "fixed shapes: 4 workers x 20 prepared calls of {} elements in {:.1} ms",
        B * H * s_fixed * s_fixed,
        t0.elapsed().as_secs_f64() * 1e3
    );

    // 3. Dynamic sequence lengths: every request has another S. A new signature first runs on
    //    the shape-generic kernel of its pattern (compiled once for all lengths); a length seen
    //    again gets its exact kernel.
    let t0 = Instant::now();
    let lengths: Vec<usize> = (17..117).chain([64, 64, 96, 96]).collect();
    for &s in &lengths {
        let mask = causal_mask(s);
        let x = scores(s, 0.5);
        let mut out = vec![0f32; x.len()];
        engine.select(
            TensorRef::new(&mask, &[1, 1, s, s]),
            TensorRef::new(&x, &[B, H, s, s]),
            TensorRef::scalar(&[f32::NEG_INFINITY]),
            TensorMut::new(&mut out, &[B, H, s, s]),
            Broadcast::Numpy,
        )?;
        assert_eq!(out, reference(&mask, &x, s), "S={s}");
    }
    println!(
        "dynamic shapes: {} calls over {} sequence lengths in {:.1} ms",
        lengths.len(),
        100,
        t0.elapsed().as_secs_f64() * 1e3
    );

    // 4. What the cache did.
    let st = engine.stats();
    println!(
        "stats: {} hits, {} misses, {} generic runs, {} exact compiles ({} us), {} generic compiles ({} us), {} evictions, {} signatures cached",
        st.hits,
        st.misses,
        st.generic_runs,
        st.compiles,
        st.compile_us,
        st.generic_compiles,
        st.generic_compile_us,
        st.evictions,
        st.len
    );
    if let Some(e) = engine.last_codegen_error() {
        println!("code generation failed once (served by the static kernels): {e}");
    }
    let (kernels, bytes) = selectjit::codegen::live_kernels();
    println!("live kernels: {kernels} ({bytes} bytes of machine code)");
    Ok(())
}

//! The public API's promises: `EngineConfig::new()` reads no environment variable (only
//! `from_env()` does, and it refuses malformed ones), and errors are typed values a caller can
//! match on and whose `source()` chain keeps the cause.
//!
//! One test binary of its own with one test that sets environment variables, so that no other
//! test runs beside it while they are set.

use std::error::Error as _;

use selectjit::{Broadcast, DType, Engine, EngineConfig, Error, MAX_RANK, TensorMut, TensorRef};

#[test]
fn environment_is_read_only_by_from_env_and_errors_are_typed() {
    // SAFETY: this binary has this one test, so no other thread reads or writes the
    // environment while it is changed.
    unsafe {
        std::env::set_var("SELECTJIT_CACHE_CAPACITY", "3");
        std::env::set_var("SELECTJIT_EXACT_AFTER", "1");
        std::env::set_var("SELECTJIT_OUTPUT_POOL", "0");
    }
    // `new()` ignores the variables: the default capacity, an output pool.
    let plain = Engine::with_config(EngineConfig::new()).unwrap();
    assert_eq!(plain.stats().capacity, 1024);
    assert!(plain.output_pool().is_some());
    assert_eq!(Engine::new().stats().capacity, 1024);
    // `from_env()` honours them.
    let env = Engine::with_config(EngineConfig::from_env().unwrap()).unwrap();
    assert_eq!(env.stats().capacity, 3);
    assert!(env.output_pool().is_none());
    // SAFETY: as above.
    unsafe { std::env::set_var("SELECTJIT_OUTPUT_POOL", "on") };
    let on = Engine::with_config(EngineConfig::from_env().unwrap()).unwrap();
    assert!(on.output_pool().is_some());
    // SAFETY: as above.
    unsafe { std::env::set_var("SELECTJIT_OUTPUT_POOL", "maybe") };
    match EngineConfig::from_env() {
        Err(Error::Invalid(m)) => assert!(m.contains("SELECTJIT_OUTPUT_POOL"), "{m}"),
        other => panic!("expected Error::Invalid, got {other:?}"),
    }
    // SAFETY: as above.
    unsafe { std::env::remove_var("SELECTJIT_OUTPUT_POOL") };
    // And refuses a malformed one, naming it.
    // SAFETY: as above.
    unsafe { std::env::set_var("SELECTJIT_EXACT_AFTER", "soon") };
    match EngineConfig::from_env() {
        Err(Error::Invalid(m)) => assert!(m.contains("SELECTJIT_EXACT_AFTER"), "{m}"),
        other => panic!("expected Error::Invalid, got {other:?}"),
    }
    // SAFETY: as above.
    unsafe {
        std::env::remove_var("SELECTJIT_CACHE_CAPACITY");
        std::env::remove_var("SELECTJIT_EXACT_AFTER");
    }

    errors_are_typed(&plain);
}

/// Each kind of bad call gives its own variant; nothing is written.
fn errors_are_typed(e: &Engine) {
    let mut out = [7f32; 4];
    let t = [1f32; 4];
    let run =
        |cond: &[u8], cs: &[usize], then: &[f32], ts: &[usize], out: &mut [f32], os: &[usize]| {
            e.select(
                TensorRef::new(cond, cs),
                TensorRef::new(then, ts),
                TensorRef::new(&t, &[4]),
                TensorMut::new(out, os),
                Broadcast::Numpy,
            )
        };
    // Shapes that do not broadcast.
    let r = run(&[1; 3], &[3], &t, &[4], &mut out, &[4]);
    assert!(matches!(r, Err(Error::Broadcast(_))), "{r:?}");
    // An output of the wrong shape.
    let r = run(&[1; 4], &[4], &t, &[4], &mut out[..2], &[2]);
    assert!(matches!(r, Err(Error::OutputShape { .. })), "{r:?}");
    // A buffer shorter than its shape.
    let r = run(&[1; 2], &[4], &t, &[4], &mut out, &[4]);
    assert!(
        matches!(r, Err(Error::Layout { what: "cond", .. })),
        "{r:?}"
    );
    // Too many dimensions.
    let big = vec![1usize; MAX_RANK + 1];
    let r = run(&[1], &big, &t, &[4], &mut out, &[4]);
    assert!(matches!(r, Err(Error::RankTooLarge { .. })), "{r:?}");
    assert_eq!(out, [7.0; 4], "nothing written on error");
    // A raw buffer that is not a whole number of elements of its dtype.
    let mut ob = [0u8; 8];
    let r = e.select_bytes(
        DType::F32,
        TensorRef::new(&[1u8; 2], &[2]),
        TensorRef::new(&[0u8; 7], &[2]),
        TensorRef::new(&[0u8; 8], &[2]),
        TensorMut::new(&mut ob, &[2]),
        Broadcast::Numpy,
    );
    assert!(r.is_err(), "{r:?}");
    assert_eq!(ob, [0; 8]);

    // The cause of an I/O error survives in the source() chain, with its kind.
    let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such table");
    let err = Error::io("kernels.sjt", io);
    assert!(matches!(&err, Error::Io { path, .. } if path == "kernels.sjt"));
    let src = err.source().expect("an I/O error has a source");
    let io = src
        .downcast_ref::<std::io::Error>()
        .expect("the source is the io::Error");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("no such table"), "{err}");
    // Errors are Send + Sync + 'static, so they travel through `Box<dyn Error>` and threads.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
    assert!(boxed.source().is_some());
}

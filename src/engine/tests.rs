//! Engine unit tests: buffers, in place, strings, and every backend on basic layouts.

mod basics {
    use crate::engine::*;
    use crate::{Broadcast, Error, InPlace, TensorMut, TensorRef, select_generic};

    #[test]
    fn rejects_bad_buffers_without_writing() {
        let e = Engine::new();
        let mut out = [7.0f32; 4];
        let r = e.select(
            TensorRef::new(&[1, 0, 1], &[2, 2]),
            TensorRef::new(&[1.0f32; 4], &[2, 2]),
            TensorRef::new(&[2.0f32; 4], &[2, 2]),
            TensorMut::new(&mut out, &[2, 2]),
            Broadcast::Numpy,
        );
        assert!(
            matches!(r, Err(Error::Layout { what: "cond", .. })),
            "{r:?}"
        );
        assert_eq!(out, [7.0; 4]);
    }

    #[test]
    fn in_place_then() {
        let e = Engine::new();
        let mut t = [1u16, 2, 3, 4];
        e.select_in_place(
            TensorRef::new(&[0, 1], &[2]),
            TensorMut::new(&mut t, &[2, 2]),
            InPlace::Then,
            TensorRef::scalar(&[9u16]),
            Broadcast::Numpy,
        )
        .unwrap();
        assert_eq!(t, [9, 2, 9, 4]);
    }

    #[test]
    fn generic_strings() {
        let t: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let e = vec!["x".to_string()];
        let mut out = vec![String::new(); 2];
        select_generic(
            TensorRef::new(&[0, 3], &[2]),
            TensorRef::new(&t, &[2]),
            TensorRef::new(&e, &[]),
            TensorMut::new(&mut out, &[2]),
            Broadcast::Numpy,
        )
        .unwrap();
        assert_eq!(out, ["x", "b"]);
    }

    /// The thread's memo of its last planned call tells predicate calls apart by everything
    /// their checks and plan depend on: kind, compared dtype, in place or not, mask or predicate
    /// on the same descriptions, and an error after a remembered call is still reported.
    #[test]
    fn planned_call_memo_tells_predicates_apart() {
        use crate::{Cond, Operand};
        for e in [
            Engine::new(),
            Engine::with_config(EngineConfig::new().backend(Backend::Static)).unwrap(),
        ] {
            let x = [-2i32, 5, 0, 7];
            let y = [1i32, 5, -3, 9];
            let xv = || TensorRef::new(&x, &[4]);
            let yv = || TensorRef::new(&y, &[4]);
            let run = |c: Cond<'_>| {
                let mut out = [0i32; 4];
                e.select(
                    c,
                    xv(),
                    yv(),
                    TensorMut::new(&mut out, &[4]),
                    Broadcast::Numpy,
                )
                .unwrap();
                out
            };
            // Each call twice in a row (the second a memo hit), alternating forms.
            for _ in 0..2 {
                assert_eq!(run(Cond::lt(xv(), yv())), [-2, 5, -3, 7]);
                assert_eq!(run(Cond::lt(xv(), yv())), [-2, 5, -3, 7]);
                assert_eq!(run(Cond::gt(xv(), yv())), [1, 5, 0, 9]);
                assert_eq!(run(Cond::gt(xv(), yv())), [1, 5, 0, 9]);
                assert_eq!(run(Cond::le(xv(), yv())), [-2, 5, -3, 7]);
                assert_eq!(run(Cond::ge(xv(), yv()).not()), [-2, 5, -3, 7]);
                let m = [1u8, 0, 0, 1];
                assert_eq!(run(Cond::mask(TensorRef::new(&m, &[4]))), [-2, 5, -3, 7]);
                // The same descriptions compared as u32: -2 is large.
                let xb = bytemuck::cast_slice::<i32, u8>(&x);
                let yb = bytemuck::cast_slice::<i32, u8>(&y);
                let xu = Operand::from_bytes(crate::DType::U32, TensorRef::new(xb, &[4]));
                let yu = Operand::from_bytes(crate::DType::U32, TensorRef::new(yb, &[4]));
                assert_eq!(run(Cond::lt(xu, yu)), [1, 5, 0, 7]);
                // In place, then the same predicate on a buffer of the output's description.
                let mut io = x;
                e.select_in_place(
                    Cond::gt(Operand::in_place(), 0i32),
                    TensorMut::new(&mut io, &[4]),
                    InPlace::Then,
                    TensorRef::scalar(&[0i32]),
                    Broadcast::Numpy,
                )
                .unwrap();
                assert_eq!(io, [0, 5, 0, 7]);
                assert_eq!(run(Cond::gt(yv(), 0i32)), [-2, 5, -3, 7]);
                // A remembered call, then one with a short output: still an error, untouched.
                let mut short = [9i32; 3];
                let r = e.select(
                    Cond::gt(yv(), 0i32),
                    xv(),
                    yv(),
                    TensorMut::new(&mut short, &[4]),
                    Broadcast::Numpy,
                );
                assert!(r.is_err(), "{r:?}");
                assert_eq!(short, [9; 3]);
            }
        }
    }
}

#[cfg(cranelift_tier)] // the Cranelift tier's own behaviour
mod jit_smoke {
    use crate::engine::*;
    use crate::tier::Tier;
    use crate::{Broadcast, DType, TensorMut, TensorRef};

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn engine_is_send_sync() {
        assert_send_sync::<Engine>();
    }

    /// Every backend agrees with the interpreter on a few layouts of every width.
    #[test]
    fn backends_agree_on_basic_layouts() {
        let cases: &[(&[usize], &[usize], &[usize])] = &[
            (&[37], &[37], &[37]),
            (&[1024], &[1024], &[1024]),
            (&[5, 33], &[5, 33], &[]),
            (&[5, 1], &[5, 33], &[5, 33]),
            (&[1], &[70], &[70]),
            (&[3, 1, 19], &[19], &[3, 7, 1]),
            (&[], &[], &[]),
            (&[4, 0], &[4, 0], &[0]),
        ];
        for w in [1usize, 2, 4, 8, 16] {
            let dt = [
                DType::U8,
                DType::F16,
                DType::F32,
                DType::F64,
                DType::Complex128,
            ][w.trailing_zeros() as usize];
            for &(c, t, e) in cases {
                let out_shape = crate::output_shape(Broadcast::Numpy, c, t, e).unwrap();
                let n = |s: &[usize]| s.iter().product::<usize>();
                let cond: Vec<u8> = (0..n(c)).map(|i| [0u8, 1, 0x80, 0, 0xff][i % 5]).collect();
                let tv: Vec<u8> = (0..n(t) * w).map(|i| (i * 7 + 1) as u8).collect();
                let ev: Vec<u8> = (0..n(e) * w).map(|i| (i * 13 + 200) as u8).collect();
                let mut want = vec![0u8; n(&out_shape) * w];
                let mut got = want.clone();
                // One call on `eng` into `out`, which first holds 0x5a bytes.
                let call = |eng: &Engine, out: &mut [u8]| {
                    out.iter_mut().for_each(|x| *x = 0x5a);
                    eng.select_bytes(
                        dt,
                        TensorRef::new(&cond, c),
                        TensorRef::new(&tv, t),
                        TensorRef::new(&ev, e),
                        TensorMut::new(out, &out_shape),
                        Broadcast::Numpy,
                    )
                    .unwrap();
                };
                let run = |b: Backend, out: &mut [u8]| {
                    let eng = Engine::with_config(
                        EngineConfig::new().backend(b).exact_after(1).verify(true),
                    )
                    .unwrap();
                    call(&eng, out);
                    if b == Backend::Jit && !out.is_empty() {
                        assert!(eng.last_codegen_error().is_none());
                        assert_eq!(eng.stats().compiles, 1);
                    }
                };
                run(Backend::Interp, &mut want);
                for b in [Backend::Jit, Backend::Static] {
                    run(b, &mut got);
                    assert_eq!(got, want, "{b:?} w{w} {c:?} {t:?} {e:?}");
                }
                // The shape-generic kernel of the pattern gives the same bytes.
                let eng =
                    Engine::with_config(EngineConfig::new().exact_after(u32::MAX).verify(true))
                        .unwrap();
                for _ in 0..2 {
                    call(&eng, &mut got);
                    assert_eq!(got, want, "generic jit w{w} {c:?} {t:?} {e:?}");
                }
                if !want.is_empty() {
                    let st = eng.stats();
                    assert_eq!(
                        (st.compiles, st.generic_compiles, st.generic_runs),
                        (0, 1, 2)
                    );
                }
                // The portable lane select (no x86 blendv) gives the same bytes.
                let eng = Engine::with_config(
                    EngineConfig::new()
                        .tier(Tier::Cranelift)
                        .verify(true)
                        .cranelift_blendv(false),
                )
                .unwrap();
                let sig = crate::plan::plan_contiguous(4, 64).unwrap();
                let ir = eng.codegen().unwrap().ir_text(&sig).unwrap();
                assert!(ir.contains("bitselect") && !ir.contains("blendv"), "{ir}");
                call(&eng, &mut got);
                assert_eq!(got, want, "portable jit w{w} {c:?} {t:?} {e:?}");
                assert!(eng.last_codegen_error().is_none());
            }
        }
    }
}

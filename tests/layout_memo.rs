//! The per-thread memo of the last strided call's plan: a call is served from it only when its
//! width, mode and every operand's length, shape, strides and offset equal the last planned
//! call's. Each call below is made twice in a row (the second one served by the memo) and then
//! followed by a call that differs from it in one of those alone, whose result or error must be
//! its own.

use selectjit::{Backend, Broadcast, Engine, EngineConfig, InPlace, TensorMut, TensorRef};

fn engines() -> Vec<(&'static str, Engine)> {
    [("jit", Backend::Jit), ("static", Backend::Static)]
        .into_iter()
        .map(|(name, backend)| {
            let cfg = EngineConfig::new()
                .backend(backend)
                .exact_after(1)
                .threads(1);
            (name, Engine::with_config(cfg).unwrap())
        })
        .collect()
}

fn interp() -> Engine {
    Engine::with_config(EngineConfig::new().backend(Backend::Interp)).expect("engine")
}

const COND: [u8; 16] = [1, 0, 0x80, 1, 0, 0, 1, 0, 0xff, 1, 1, 0, 0, 0, 1, 2];

/// `then` of 16 elements seen with `(strides, offset)`, else and out contiguous; the result of
/// `e` or its error, checked twice in a row against the interpreter.
fn run16<T: selectjit::Element + Default + Copy + PartialEq + std::fmt::Debug>(
    e: &Engine,
    then: &[T],
    layout: (&[isize], usize),
    else_: &[T],
) -> Result<Vec<T>, String> {
    let call = |e: &Engine| {
        let mut out = vec![T::default(); 16];
        e.select(
            TensorRef::new(&COND, &[16]),
            TensorRef::with_layout(then, &[16], layout.0, layout.1),
            TensorRef::new(else_, &[16]),
            TensorMut::new(&mut out, &[16]),
            Broadcast::Numpy,
        )
        .map(|()| out)
        .map_err(|err| err.to_string())
    };
    let want = call(&interp());
    for _ in 0..2 {
        assert_eq!(call(e), want);
    }
    want
}

#[test]
fn strides_offsets_lengths_and_widths_are_each_part_of_the_description() {
    let t32: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let e32: Vec<f32> = (0..16).map(|i| -(i as f32)).collect();
    let t64: Vec<f64> = (0..16).map(|i| i as f64 + 0.5).collect();
    let e64: Vec<f64> = (0..16).map(|i| -(i as f64) - 0.5).collect();
    for (name, e) in engines() {
        // Reversed, then forward from the same buffer: the strides and offset differ.
        let rev = run16(&e, &t32, (&[-1], 15), &e32).unwrap();
        assert_eq!(rev[0], 15.0, "{name}");
        let fwd = run16(&e, &t32, (&[1], 0), &e32).unwrap();
        assert_eq!(fwd[0], 0.0, "{name}");
        // Only the offset differs: every other element of a 32-element buffer, from 0 or 1.
        let wide: Vec<f32> = (0..32).map(|i| i as f32).collect();
        let even = run16(&e, &wide, (&[2], 0), &e32).unwrap();
        let odd = run16(&e, &wide, (&[2], 1), &e32).unwrap();
        assert_eq!((even[0], odd[0]), (0.0, 1.0), "{name}");
        // Only the stride differs.
        let dense = run16(&e, &wide, (&[1], 1), &e32).unwrap();
        assert_eq!(dense[15], 16.0, "{name}");
        assert_ne!(dense, odd, "{name}");
        // Only the buffer length differs: 15 elements cannot hold x[::-1] from element 15.
        run16(&e, &t32, (&[-1], 15), &e32).unwrap();
        let err = run16(&e, &t32[..15], (&[-1], 15), &e32[..]).unwrap_err();
        assert!(err.contains("then"), "{name}: {err}");
        // Only the width differs: the same description with 8-byte elements.
        run16(&e, &t32, (&[-1], 15), &e32).unwrap();
        let rev64 = run16(&e, &t64, (&[-1], 15), &e64).unwrap();
        assert_eq!(rev64[0], 15.5, "{name}");
        let rev32 = run16(&e, &t32, (&[-1], 15), &e32).unwrap();
        assert_eq!(rev32, rev, "{name}");
    }
}

/// A call valid in one mode and an error in another, with the same views.
#[test]
fn the_mode_is_part_of_the_description() {
    let cond = [1u8, 0];
    let then: Vec<i32> = (0..6).collect();
    let else_ = [70i32, 80];
    let call = |e: &Engine, mode| {
        let mut out = [0i32; 6];
        e.select(
            TensorRef::new(&cond, &[2]),
            TensorRef::with_strides(&then, &[2, 3], &[3, 1]),
            TensorRef::with_strides(&else_, &[2], &[1]),
            TensorMut::new(&mut out, &[2, 3]),
            mode,
        )
        .map(|()| out)
        .map_err(|err| err.to_string())
    };
    let pdpd = Broadcast::Pdpd { axis: 0 };
    for (name, e) in engines() {
        for _ in 0..2 {
            // pdpd at axis 0: cond and else go along the rows.
            assert_eq!(call(&e, pdpd), Ok([0, 1, 2, 80, 80, 80]), "{name}");
        }
        for _ in 0..2 {
            let err = call(&e, Broadcast::Numpy).unwrap_err();
            assert_eq!(
                err,
                call(&interp(), Broadcast::Numpy).unwrap_err(),
                "{name}"
            );
        }
        assert_eq!(call(&e, pdpd), Ok([0, 1, 2, 80, 80, 80]), "{name}");
    }
}

/// Broadcast rows and in place with a reversed output, each repeated.
#[test]
fn repeated_broadcast_and_in_place_calls() {
    for (name, e) in engines() {
        for _ in 0..3 {
            let row = [1u8, 0, 0x10, 0];
            let t: Vec<u16> = (0..16).collect();
            let mut out = [0u16; 16];
            let mut want = [0u16; 16];
            for (eng, o) in [(&e, &mut out), (&interp(), &mut want)] {
                eng.select(
                    TensorRef::new(&row, &[4]),
                    TensorRef::with_layout(&t, &[4, 4], &[-4, 1], 12),
                    TensorRef::scalar(&[7u16]),
                    TensorMut::new(o, &[4, 4]),
                    Broadcast::Numpy,
                )
                .unwrap();
            }
            assert_eq!(out, want, "{name}");
            assert_eq!(out[..4], [12, 7, 14, 7], "{name}");
        }
        for _ in 0..3 {
            let mut buf: Vec<i64> = (0..16).collect();
            let mut want = buf.clone();
            for (eng, b) in [(&e, &mut buf), (&interp(), &mut want)] {
                eng.select_in_place(
                    TensorRef::new(&COND, &[16]),
                    TensorMut::with_layout(b, &[16], &[-1], 15),
                    InPlace::Then,
                    TensorRef::scalar(&[-1i64]),
                    Broadcast::Numpy,
                )
                .unwrap();
            }
            assert_eq!(buf, want, "{name}");
        }
    }
}

/// Predicate calls: each made twice in a row (the second served by the memo), alternating the
/// predicate's kind, its operands' layouts (a view, a reversed view, a scalar, a broadcast row),
/// the compared dtype and in place, each checked against the interpreter.
#[test]
fn repeated_predicate_calls_are_told_apart() {
    use selectjit::{Cond, DType, Operand};
    let x: Vec<f32> = [-1.5f32, 0.0, -0.0, 2.0, f32::NAN, 7.0, -8.0, 1.0]
        .into_iter()
        .cycle()
        .take(16)
        .collect();
    let y: Vec<f32> = (0..16).map(|i| i as f32 - 6.0).collect();
    let xb: &[u8] = bytemuck::cast_slice(&x);
    let row = [0.5f32, -1.0, 3.0, f32::INFINITY];
    // Each predicate, selecting `p ? x : y` over [4, 4].
    let cases: Vec<(&str, Cond<'_>)> = vec![
        (
            "x > y",
            Cond::gt(TensorRef::new(&x, &[4, 4]), TensorRef::new(&y, &[4, 4])),
        ),
        (
            "x < y",
            Cond::lt(TensorRef::new(&x, &[4, 4]), TensorRef::new(&y, &[4, 4])),
        ),
        ("reversed x < y", {
            Cond::lt(
                TensorRef::with_layout(&x, &[4, 4], &[-4, -1], 15),
                TensorRef::new(&y, &[4, 4]),
            )
        }),
        ("x > 0", Cond::gt(TensorRef::new(&x, &[4, 4]), 0.0f32)),
        ("x >= 0", Cond::ge(TensorRef::new(&x, &[4, 4]), 0.0f32)),
        (
            "x > row",
            Cond::gt(TensorRef::new(&x, &[4, 4]), TensorRef::new(&row, &[4])),
        ),
        ("isnan(x)", Cond::isnan(TensorRef::new(&x, &[4, 4]))),
        (
            "not isnan(x)",
            Cond::isnan(TensorRef::new(&x, &[4, 4])).not(),
        ),
        ("x as i32 > 0", {
            Cond::gt(
                Operand::from_bytes(DType::I32, TensorRef::new(xb, &[4, 4])),
                0i32,
            )
        }),
    ];
    for (name, e) in engines() {
        for _ in 0..2 {
            for (what, cond) in &cases {
                let mut got = vec![];
                for eng in [&e, &e, &interp()] {
                    let mut out = [9.0f32; 16];
                    eng.select(
                        *cond,
                        TensorRef::new(&x, &[4, 4]),
                        TensorRef::new(&y, &[4, 4]),
                        TensorMut::new(&mut out, &[4, 4]),
                        Broadcast::Numpy,
                    )
                    .unwrap();
                    got.push(out.map(f32::to_bits));
                }
                assert_eq!(got[0], got[2], "{name}: {what}");
                assert_eq!(got[1], got[2], "{name}: {what} (again)");
            }
            // In place on x's description, then the same predicate on a buffer.
            let mut io = x.clone();
            let mut want = x.clone();
            for (eng, b) in [(&e, &mut io), (&interp(), &mut want)] {
                eng.select_in_place(
                    Cond::gt(Operand::in_place(), 0.0f32),
                    TensorMut::new(b, &[4, 4]),
                    InPlace::Then,
                    TensorRef::scalar(&[0.0f32]),
                    Broadcast::Numpy,
                )
                .unwrap();
            }
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&io), bits(&want), "{name}: in place");
        }
    }
}

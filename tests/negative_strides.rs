//! Views with negative strides: reversed and mixed-sign inputs and outputs on every backend,
//! reversed in-place views, and the errors of views that step outside their buffer.

use selectjit::{Backend, Broadcast, Engine, EngineConfig, Error, InPlace, TensorMut, TensorRef};

fn engines() -> Vec<(&'static str, Engine)> {
    let cfg = |backend, exact_after| {
        EngineConfig::new()
            .backend(backend)
            .exact_after(exact_after)
            .verify(true)
    };
    vec![
        ("jit", Engine::with_config(cfg(Backend::Jit, 1)).unwrap()),
        (
            "jit-generic",
            Engine::with_config(cfg(Backend::Jit, u32::MAX)).expect("engine"),
        ),
        (
            "jit-portable",
            Engine::with_config(
                cfg(Backend::Jit, 1)
                    .tier(selectjit::Tier::Cranelift)
                    .cranelift_blendv(false),
            )
            .unwrap(),
        ),
        (
            "static",
            Engine::with_config(cfg(Backend::Static, 1)).unwrap(),
        ),
        (
            "interp",
            Engine::with_config(cfg(Backend::Interp, 1)).unwrap(),
        ),
    ]
}

/// `x[::-1]` of then, and a reversed output: numpy's `np.where(c, t[::-1], e)` stored reversed.
#[test]
fn reversed_inputs_and_outputs_every_backend() {
    for n in [1usize, 7, 16, 33, 100] {
        let c: Vec<u8> = (0..n).map(|i| [0u8, 1, 0x80, 0][i % 4]).collect();
        let t: Vec<u32> = (0..n as u32).collect(); // read backwards: t[n-1-i]
        let e: Vec<u32> = (0..n as u32).map(|i| 1000 + i).collect();
        let want: Vec<u32> = (0..n)
            .map(|i| if c[i] != 0 { t[n - 1 - i] } else { e[i] })
            .collect();
        let last = n - 1;
        for (name, eng) in engines() {
            for _ in 0..2 {
                // Forward output.
                let mut out = vec![0u32; n];
                eng.select(
                    TensorRef::new(&c, &[n]),
                    TensorRef::with_layout(&t, &[n], &[-1], last),
                    TensorRef::new(&e, &[n]),
                    TensorMut::new(&mut out, &[n]),
                    Broadcast::Numpy,
                )
                .unwrap();
                assert_eq!(out, want, "{name} n={n}");
                // Reversed output: element i lands at n-1-i.
                let mut out = vec![0u32; n];
                eng.select(
                    TensorRef::new(&c, &[n]),
                    TensorRef::with_layout(&t, &[n], &[-1], last),
                    TensorRef::new(&e, &[n]),
                    TensorMut::with_layout(&mut out, &[n], &[-1], last),
                    Broadcast::Numpy,
                )
                .unwrap();
                let back: Vec<u32> = out.iter().rev().copied().collect();
                assert_eq!(back, want, "{name} n={n} reversed output");
            }
        }
    }
}

/// A [4, 6] f64 call with rows reversed in cond, columns reversed in the output, then sliced
/// with step -2 from a [4, 12] buffer, and else broadcast along the rows.
#[test]
fn mixed_signs_every_backend() {
    let (r, k) = (4usize, 6usize);
    let cb: Vec<u8> = (0..r * k).map(|i| (i % 3 == 0) as u8 * 7).collect();
    let tb: Vec<f64> = (0..r * 2 * k).map(|i| i as f64 + 0.5).collect();
    let eb: Vec<f64> = (0..k).map(|i| -(i as f64)).collect();
    // Logical views.
    let cond = |i: usize, j: usize| cb[(r - 1 - i) * k + j]; // rows reversed
    let then = |i: usize, j: usize| tb[i * 2 * k + (2 * k - 1) - 2 * j]; // t[:, ::-2]
    let want: Vec<f64> = (0..r * k)
        .map(|x| {
            let (i, j) = (x / k, x % k);
            if cond(i, j) != 0 { then(i, j) } else { eb[j] }
        })
        .collect();
    let kk = k as isize;
    for (name, eng) in engines() {
        for _ in 0..2 {
            let mut out = vec![0f64; r * k];
            eng.select(
                TensorRef::with_layout(&cb, &[r, k], &[-kk, 1], (r - 1) * k),
                TensorRef::with_layout(&tb, &[r, k], &[2 * kk, -2], 2 * k - 1),
                TensorRef::new(&eb, &[k]),
                TensorMut::with_layout(&mut out, &[r, k], &[kk, -1], k - 1),
                Broadcast::Numpy,
            )
            .unwrap();
            let got: Vec<u64> = (0..r * k)
                .map(|x| out[(x / k) * k + (k - 1 - x % k)].to_bits())
                .collect();
            let want: Vec<u64> = want.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{name}");
        }
    }
}

/// In place with a reversed view: the output is exactly `then` (same buffer, strides, offset).
#[test]
fn reversed_in_place() {
    let n = 37usize;
    let c: Vec<u8> = (0..n).map(|i| (i % 3) as u8).collect();
    let e: Vec<i16> = (0..n as i16).map(|i| -i).collect();
    for role in [InPlace::Then, InPlace::Else] {
        for (name, eng) in engines() {
            let mut io: Vec<i16> = (0..n as i16).map(|i| 100 + i).collect();
            let before = io.clone();
            // Logical element i of the in-out view is io[n-1-i]; `other` is forward.
            eng.select_in_place(
                TensorRef::new(&c, &[n]),
                TensorMut::with_layout(&mut io, &[n], &[-1], n - 1),
                role,
                TensorRef::new(&e, &[n]),
                Broadcast::Numpy,
            )
            .unwrap();
            for i in 0..n {
                let mine = before[n - 1 - i];
                let want = match (role, c[i] != 0) {
                    (InPlace::Then, true) | (InPlace::Else, false) => mine,
                    _ => e[i],
                };
                assert_eq!(io[n - 1 - i], want, "{name} {role:?} i={i}");
            }
        }
    }
}

/// Views that step outside their buffer are errors that name the operand and the dimension, on
/// every backend, and the output is untouched.
#[test]
fn out_of_buffer_views_are_errors() {
    let c = [1u8; 6];
    let t = [1.0f32; 6];
    let e = [2.0f32; 6];
    for (name, eng) in engines() {
        let mut out = [9.0f32; 6];
        // then reversed without an offset: steps before the buffer along dim 1.
        let r = eng.select(
            TensorRef::new(&c, &[2, 3]),
            TensorRef::with_strides(&t, &[2, 3], &[3, -1]),
            TensorRef::new(&e, &[2, 3]),
            TensorMut::new(&mut out, &[2, 3]),
            Broadcast::Numpy,
        );
        let msg = r.unwrap_err().to_string();
        assert!(
            msg.starts_with("then: ") && msg.contains("dim 1"),
            "{name}: {msg}"
        );
        // cond rows reversed with an offset one too small.
        let r = eng.select(
            TensorRef::with_layout(&c, &[2, 3], &[-3, 1], 2),
            TensorRef::new(&t, &[2, 3]),
            TensorRef::new(&e, &[2, 3]),
            TensorMut::new(&mut out, &[2, 3]),
            Broadcast::Numpy,
        );
        let msg = r.unwrap_err().to_string();
        assert!(
            msg.starts_with("cond: ") && msg.contains("dim 0"),
            "{name}: {msg}"
        );
        // Output reversed past the end of its buffer.
        let r = eng.select(
            TensorRef::new(&c, &[2, 3]),
            TensorRef::new(&t, &[2, 3]),
            TensorRef::new(&e, &[2, 3]),
            TensorMut::with_layout(&mut out, &[2, 3], &[-3, -1], 6),
            Broadcast::Numpy,
        );
        assert!(
            matches!(r, Err(Error::Layout { what: "output", .. })),
            "{name}: {r:?}"
        );
        // A reversed output whose elements overlap.
        let r = eng.select(
            TensorRef::new(&c, &[2, 3]),
            TensorRef::new(&t, &[2, 3]),
            TensorRef::new(&e, &[2, 3]),
            TensorMut::with_layout(&mut out, &[2, 3], &[-1, -1], 3),
            Broadcast::Numpy,
        );
        assert!(
            matches!(r, Err(Error::Layout { what: "output", .. })),
            "{name}: {r:?}"
        );
        // Strides whose span overflows.
        let r = eng.select(
            TensorRef::new(&c, &[2, 3]),
            TensorRef::with_layout(&t, &[3, 3], &[isize::MIN, 1], 0),
            TensorRef::new(&e, &[2, 3]),
            TensorMut::new(&mut out, &[2, 3]),
            Broadcast::Numpy,
        );
        assert!(r.is_err(), "{name}");
        assert_eq!(out, [9.0; 6], "{name} wrote on error");
    }
}

/// Zero-size dimensions with negative strides address nothing: a valid, empty call, whatever
/// the strides and offset, on every backend.
#[test]
fn zero_size_reversed_views() {
    for (name, eng) in engines() {
        let mut out: [f32; 0] = [];
        eng.select(
            TensorRef::with_layout(&[], &[0, 3], &[-3, -1], 5),
            TensorRef::with_layout(&[1.0f32], &[0, 3], &[-3, -1], 0),
            TensorRef::scalar(&[2.0f32]),
            TensorMut::with_layout(&mut out, &[0, 3], &[-3, -1], 9),
            Broadcast::Numpy,
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        // A zero-size reversed output with non-empty inputs elsewhere still checks shapes.
        let r = eng.select(
            TensorRef::new(&[1u8; 3], &[3]),
            TensorRef::with_layout(&[] as &[f32], &[0, 3], &[-3, 1], 0),
            TensorRef::scalar(&[2.0f32]),
            TensorMut::with_layout(&mut out, &[0, 4], &[-4, 1], 0),
            Broadcast::Numpy,
        );
        assert!(matches!(r, Err(Error::OutputShape { .. })), "{name}: {r:?}");
    }
}

/// The generic path (strings) takes reversed views too.
#[test]
fn generic_strings_reversed() {
    let t: Vec<String> = (0..4).map(|i| format!("t{i}")).collect();
    let e = vec!["e".to_string()];
    let mut out = vec![String::new(); 4];
    selectjit::select_generic(
        TensorRef::new(&[1, 0, 1, 1], &[4]),
        TensorRef::with_layout(&t, &[4], &[-1], 3),
        TensorRef::new(&e, &[]),
        TensorMut::with_layout(&mut out, &[2, 2], &[-2, 1], 2),
        Broadcast::Exact,
    )
    .unwrap_err(); // none: [4] vs [] vs [2,2] differ
    selectjit::select_generic(
        TensorRef::new(&[1, 0, 1, 1], &[4]),
        TensorRef::with_layout(&t, &[4], &[-1], 3),
        TensorRef::new(&e, &[]),
        TensorMut::with_layout(&mut out, &[4], &[-1], 3),
        Broadcast::Numpy,
    )
    .unwrap();
    // Logical [t3, e, t1, t0], stored reversed.
    assert_eq!(out, ["t0", "t1", "e", "t3"]);
}

//! The per-thread memo's flat path: a predicate call whose output and a predicate operand are
//! `n` contiguous elements of one shape, every other operand that too or a single element, runs
//! the memo's kernel without planning. Each form below (every comparison and test, negated or
//! not, each operand full or a scalar, a predicate dtype other than the select's) runs three
//! times in a row with new data, interleaved with the other forms, checked bit for bit against
//! the interpreter; calls that look flat but are not valid fail as they would without the memo,
//! writing nothing.

#[path = "common/skip.rs"]
mod skip;

use selectjit::{
    Backend, Broadcast, CmpOp, Cond, Engine, EngineConfig, Error, Operand, TensorMut, TensorRef,
    TestOp, Tier,
};

/// A JIT engine of `tier` that compiles exact kernels from the first call (a concrete tier
/// measures nothing, so its first kernel is memoised at once).
fn jit_of(tier: Tier) -> Engine {
    let cfg = EngineConfig::new()
        .backend(Backend::Jit)
        .tier(tier)
        .exact_after(1)
        .threads(1);
    Engine::with_config(cfg).unwrap()
}

/// An engine of every concrete tier this host runs, and `auto`.
fn jits() -> Vec<(Tier, Engine)> {
    let mut v = vec![];
    for t in Tier::CONCRETE {
        if t.available() {
            v.push((t, jit_of(t)));
        } else if cfg!(target_arch = "x86_64") || t == Tier::Cranelift {
            skip::skip(
                &format!("the flat memo on {t:?}"),
                "not available on this host",
            );
        } else {
            skip::inherent(&format!("the flat memo on {t:?}"), "an x86 tier");
        }
    }
    v.push((Tier::Auto, jit_of(Tier::Auto)));
    v
}

fn jit() -> Engine {
    jit_of(Tier::Auto)
}

fn interp() -> Engine {
    Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap()
}

/// f32 values with the cases predicates tell apart: NaN (two payloads), both zeros, infinities.
fn special(i: usize, salt: usize) -> f32 {
    const V: [f32; 8] = [
        0.0,
        -0.0,
        1.5,
        -2.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        3.0,
        -7.25,
    ];
    match (i * 7 + salt * 3) % 11 {
        9 => f32::NAN,
        10 => f32::from_bits(0xffc0_0001),
        k => V[k % 8],
    }
}

/// The predicate of form `f` over `l` (and `r` for comparisons), negated when `not`.
fn pred<'a>(f: usize, l: Operand<'a>, r: Operand<'a>, not: bool) -> Cond<'a> {
    let c = match f {
        0..6 => Cond::cmp(
            [
                CmpOp::Eq,
                CmpOp::Ne,
                CmpOp::Lt,
                CmpOp::Le,
                CmpOp::Gt,
                CmpOp::Ge,
            ][f],
            l,
            r,
        ),
        _ => Cond::test([TestOp::IsNan, TestOp::IsInf, TestOp::IsFinite][f - 6], l),
    };
    if not { c.not() } else { c }
}

/// One call of form `f` over `n` elements on `e`: `full` says which of lhs, rhs, then and else
/// are `n` elements (else a scalar; the rhs a value, the others rank-0 views); the select is
/// of i64 values.
fn call(e: &Engine, f: usize, not: bool, full: u8, n: usize, salt: usize) -> Vec<i64> {
    let shape = [n];
    let x: Vec<f32> = (0..n).map(|i| special(i, salt)).collect();
    let y: Vec<f32> = (0..n).map(|i| special(i + 3, salt + 1)).collect();
    let t: Vec<i64> = (0..n).map(|i| i as i64 + 100 * salt as i64).collect();
    let el: Vec<i64> = (0..n).map(|i| -(i as i64) - 1).collect();
    let s = [special(0, salt)];
    let (ts, es) = ([i64::MAX], [i64::MIN]);
    let l = if full & 1 != 0 {
        TensorRef::new(&x, &shape).into()
    } else {
        TensorRef::scalar(&s).into()
    };
    let r: Operand<'_> = if full & 2 != 0 {
        TensorRef::new(&y, &shape).into()
    } else {
        y[0].into()
    };
    let then = if full & 4 != 0 {
        TensorRef::new(&t, &shape)
    } else {
        TensorRef::scalar(&ts)
    };
    let else_ = if full & 8 != 0 {
        TensorRef::new(&el, &shape)
    } else {
        TensorRef::scalar(&es)
    };
    let mut out = vec![0i64; n];
    e.select(
        pred(f, l, r, not),
        then,
        else_,
        TensorMut::new(&mut out, &shape),
        Broadcast::Numpy,
    )
    .unwrap();
    out
}

#[test]
fn every_flat_form_against_the_interpreter() {
    let oracle = interp();
    for (tier, e) in jits() {
        for n in [2, 17, 64] {
            for full in 0..16u8 {
                // The predicate must span the output: a lhs or (comparisons) a rhs of n elements.
                for f in 0..9 {
                    let spans = full & 1 != 0 || (f < 6 && full & 2 != 0);
                    if !spans || (f >= 6 && full & 2 != 0) {
                        continue;
                    }
                    for not in [false, true] {
                        for salt in 0..3 {
                            let got = call(&e, f, not, full, n, salt);
                            let want = call(&oracle, f, not, full, n, salt);
                            assert_eq!(
                                got, want,
                                "{tier:?} n {n} form {f} not {not} full {full:04b}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn forms_alternating_on_one_thread() {
    // Two forms of one width and length take turns, so the memo is replaced on every call
    // and each call must run its own kernel.
    let oracle = interp();
    for (tier, e) in jits() {
        for salt in 0..6 {
            for (f, full) in [(4, 0b0101), (2, 0b1101), (6, 0b1111), (4, 0b0111)] {
                let got = call(&e, f, salt % 2 == 1, full, 32, salt);
                let want = call(&oracle, f, salt % 2 == 1, full, 32, salt);
                assert_eq!(got, want, "{tier:?} form {f} full {full:04b} salt {salt}");
            }
        }
    }
}

/// A warm memo for `x > 0 ? x : 0` over 8 f32, the form every call below resembles.
fn warm(e: &Engine) {
    let x = [1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0];
    for _ in 0..3 {
        let mut out = [9.0f32; 8];
        let xv = TensorRef::new(&x, &[8]);
        e.select(
            Cond::gt(xv, 0.0f32),
            xv,
            TensorRef::scalar(&[0.0f32]),
            TensorMut::new(&mut out, &[8]),
            Broadcast::Numpy,
        )
        .unwrap();
        assert_eq!(out, [1.0, 0.0, 3.0, 0.0, 5.0, 0.0, 7.0, 0.0]);
    }
}

#[test]
fn invalid_calls_that_look_flat_fail_as_without_the_memo() {
    static X: [f32; 8] = [1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0];
    static ZERO: [f32; 1] = [0.0];
    let (x, zero) = (&X, &ZERO);
    type Case = (
        &'static str,
        Box<dyn Fn(&Engine, &mut [f32]) -> selectjit::Result<()>>,
    );
    let cases: Vec<Case> = vec![
        (
            "the comparison's operands of two dtypes",
            Box::new(|e, out| {
                let xv = TensorRef::new(x, &[8]);
                e.select(
                    Cond::gt(xv, 0.0f64),
                    xv,
                    TensorRef::scalar(zero),
                    TensorMut::new(out, &[8]),
                    Broadcast::Numpy,
                )
            }),
        ),
        (
            "a then buffer one element short",
            Box::new(|e, out| {
                let xv = TensorRef::new(x, &[8]);
                e.select(
                    Cond::gt(xv, 0.0f32),
                    TensorRef::new(&x[..7], &[8]),
                    TensorRef::scalar(zero),
                    TensorMut::new(out, &[8]),
                    Broadcast::Numpy,
                )
            }),
        ),
        (
            "a predicate operand one element short",
            Box::new(|e, out| {
                e.select(
                    Cond::gt(TensorRef::new(&x[..7], &[8]), 0.0f32),
                    TensorRef::new(x, &[8]),
                    TensorRef::scalar(zero),
                    TensorMut::new(out, &[8]),
                    Broadcast::Numpy,
                )
            }),
        ),
        (
            "a scalar of higher rank than the output (it would widen it)",
            Box::new(|e, out| {
                let xv = TensorRef::new(x, &[8]);
                e.select(
                    Cond::gt(xv, 0.0f32),
                    xv,
                    TensorRef::new(zero, &[1, 1]),
                    TensorMut::new(out, &[8]),
                    Broadcast::Numpy,
                )
            }),
        ),
        (
            "an empty scalar buffer",
            Box::new(|e, out| {
                let xv = TensorRef::new(x, &[8]);
                e.select(
                    Cond::gt(xv, 0.0f32),
                    xv,
                    TensorRef::scalar(&zero[..0]),
                    TensorMut::new(out, &[8]),
                    Broadcast::Numpy,
                )
            }),
        ),
    ];
    for (what, run) in &cases {
        for tier in [Tier::Cranelift, Tier::Auto] {
            // The error without a memo (a fresh engine), then with a warm one.
            let mut untouched = [9.0f32; 8];
            let cold = run(&jit_of(tier), &mut untouched).expect_err(what);
            assert_eq!(untouched, [9.0; 8], "{what}: cold call wrote");
            let e = jit_of(tier);
            warm(&e);
            let mut out = [9.0f32; 8];
            let hot = run(&e, &mut out).expect_err(what);
            assert_eq!(out, [9.0; 8], "{what}: warm call wrote");
            assert_eq!(hot.to_string(), cold.to_string(), "{what}");
            assert!(
                matches!(
                    hot,
                    Error::DType(_) | Error::Layout { .. } | Error::OutputShape { .. }
                ),
                "{what}: {hot:?}"
            );
        }
    }
}

#[test]
fn other_modes_and_layouts_go_the_whole_way() {
    // Forms the flat path leaves alone: results as the interpreter's.
    let (e, oracle) = (jit(), interp());
    let x: Vec<f32> = (0..12).map(|i| special(i, 1)).collect();
    let t: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let strides = [1isize, 3];
    for eng in [&e, &oracle] {
        warm(eng);
    }
    let run = |eng: &Engine, mode: Broadcast, transposed: bool| {
        let mut out = vec![0f32; 12];
        let xv = if transposed {
            TensorRef::with_strides(&x, &[3, 4], &strides)
        } else {
            TensorRef::new(&x, &[3, 4])
        };
        eng.select(
            Cond::lt(xv, 1.0f32),
            TensorRef::new(&t, &[3, 4]),
            TensorRef::scalar(&[-1.0f32]),
            TensorMut::new(&mut out, &[3, 4]),
            mode,
        )
        .map(|()| out.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
        .map_err(|err| err.to_string())
    };
    for mode in [Broadcast::Numpy, Broadcast::TwoStep, Broadcast::Exact] {
        for transposed in [false, true] {
            assert_eq!(
                run(&e, mode, transposed),
                run(&oracle, mode, transposed),
                "{mode:?} transposed {transposed}"
            );
        }
    }
}

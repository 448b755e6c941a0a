//! Prepared calls whose condition is a predicate (`Engine::prepare_cond`, `Prepared::run_cond`).
//!
//! * Differential, with proptest (shrinking): every comparison and test, negated or not, over
//!   every compared dtype × every selected dtype (mixed ones included: an i64 mask compared
//!   for an f32 select, f16 / bf16, u64 above i64::MAX, complex, bool), edge values (NaN
//!   payloads, ±0, ±inf, subnormals, integer extremes), shapes broadcast in every mode (numpy,
//!   two-step, none, pdpd right-aligned and at an axis), operands given as placeholders, as
//!   typed values or as rank-0 views, empty outputs; each prepared call run twice with new
//!   data, bytewise against `Engine::select` with the same condition on the interpreter; on the
//!   default engine, the interpreter, the static kernels and the JIT on every tier, whose
//!   `is_jit` must say whether a kernel fuses the predicate.
//! * Typed calls: ReLU and a BERT-style masked fill (an i64 mask [8, 1, 1, 384]) against the
//!   prepared mask call; an engine without a code generator binds its AOT table's kernel of the
//!   predicate, and runs the static kernels without one.
//! * Errors: wrong dtypes, short buffers, the wrong number of operand buffers, a mask call run
//!   as a predicate call and the reverse, operands a prepared call cannot take; nothing is
//!   written.

#[path = "common/aot_host.rs"]
mod aot_host;
mod common;
#[path = "common/pred_cases.rs"]
mod pred_cases;
#[path = "common/rng.rs"]
mod rng;

use half::{bf16, f16};
use num_complex::Complex;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use rng::Rng;
use selectjit::{
    Backend, Broadcast, CmpOp, Cond, DType, Engine, EngineConfig, Error, InPlace, Operand,
    TensorMut, TensorRef, TestOp, output_shape,
};

/// How a predicate's operand is given.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Given {
    /// A buffer of its shape at every run.
    Placeholder,
    /// A typed value (`0.0f32`, ...; bool has none and is given as a rank-0 view).
    Value,
    /// A rank-0 view of raw bytes, read when the call is prepared.
    Scalar,
}

#[derive(Debug, Clone)]
struct Case {
    op: Option<CmpOp>,
    test: TestOp,
    not: bool,
    cmp_dtype: DType,
    sel_dtype: DType,
    /// 0 numpy, 1 two-step, 2 none, 3 pdpd right-aligned, 4 pdpd at an axis.
    mode: u8,
    /// The axis of mode 4 (at most the rank).
    axis: usize,
    /// The largest output shape the operands are cut from.
    out: Vec<usize>,
    /// Per operand (lhs, rhs, then, else): which dims it keeps (else 1), and how many leading
    /// dims it drops (right-aligned modes).
    keep: [Vec<bool>; 4],
    drop: [usize; 4],
    /// Pdpd at an axis: the ranks of the predicate's and else's windows.
    window: (usize, usize),
    given: [Given; 2],
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    let dim = prop_oneof![9 => 1usize..6, 1 => Just(0usize)];
    let dims = prop::collection::vec(dim, 0..5);
    let dtypes = prop::sample::select(DType::ALL.to_vec());
    let given = prop::sample::select(vec![
        Given::Placeholder,
        Given::Placeholder,
        Given::Value,
        Given::Scalar,
    ]);
    (
        (
            prop::option::weighted(0.7, prop::sample::select(CmpOp::ALL.to_vec())),
            prop::sample::select(TestOp::ALL.to_vec()),
            any::<bool>(),
            dtypes.clone(),
            dtypes,
        ),
        dims.prop_flat_map(|d| {
            let r = d.len();
            let keep = || prop::collection::vec(any::<bool>(), r);
            (Just(d), [keep(), keep(), keep(), keep()])
        }),
        (
            0u8..5,
            0usize..5,
            [0usize..3, 0usize..3, 0usize..3, 0usize..3],
            (0usize..5, 0usize..5),
            [given.clone(), given],
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (op, test, not, cmp_dtype, sel_dtype),
                (out, keep),
                (mode, axis, drop, window, given, seed),
            )| Case {
                // Under `none` the predicate's shape is the output's: lhs is a placeholder.
                given: if mode == 2 {
                    [Given::Placeholder, given[1]]
                } else {
                    given
                },
                op,
                test,
                not,
                cmp_dtype,
                sel_dtype,
                mode,
                axis,
                out,
                keep,
                drop,
                window,
                seed,
            },
        )
}

/// `base` right-aligned with its first `drop` dims dropped and the dims `keep` does not keep
/// set to 1 (`keep` aligned with `base`'s end).
fn sub(base: &[usize], keep: &[bool], drop: usize) -> Vec<usize> {
    let d = drop.min(base.len());
    let keep = &keep[keep.len() - base.len()..];
    base[d..]
        .iter()
        .zip(&keep[d..])
        .map(|(&x, &k)| if k { x } else { 1 })
        .collect()
}

/// The shapes of lhs, rhs, then and else, and the mode: a valid call of the case's mode.
fn shapes(c: &Case) -> ([Vec<usize>; 4], Broadcast) {
    let out = &c.out;
    let r = out.len();
    let s = |k: usize, base: &[usize]| sub(base, &c.keep[k][..r], c.drop[k]);
    let scalar = |k: usize, sh: Vec<usize>| {
        if c.given[k] == Given::Placeholder {
            sh
        } else {
            vec![]
        }
    };
    match c.mode {
        0 => (
            [
                scalar(0, s(0, out)),
                scalar(1, s(1, out)),
                s(2, out),
                s(3, out),
            ],
            Broadcast::Numpy,
        ),
        1 => (
            [
                scalar(0, s(0, out)),
                scalar(1, s(1, out)),
                out.clone(),
                s(3, out),
            ],
            Broadcast::TwoStep,
        ),
        // The predicate's shape must be the output's: lhs is (a placeholder of) it.
        2 => (
            [out.clone(), scalar(1, s(1, out)), out.clone(), out.clone()],
            Broadcast::Exact,
        ),
        3 => (
            [
                scalar(0, s(0, out)),
                scalar(1, s(1, out)),
                out.clone(),
                s(3, out),
            ],
            Broadcast::Pdpd { axis: -1 },
        ),
        _ => {
            let a = c.axis.min(r);
            let win = |k: usize, len: usize| -> Vec<usize> {
                let len = len.min(r - a);
                sub(&out[a..a + len], &c.keep[k][a..a + len], 0)
            };
            let pred = win(0, c.window.0);
            // Not right-aligned: rhs keeps the window's rank (lhs may be a value).
            let rhs = sub(&pred, &c.keep[1][..pred.len()], 0);
            (
                [
                    scalar(0, pred),
                    scalar(1, rhs),
                    out.clone(),
                    win(3, c.window.1),
                ],
                Broadcast::Pdpd { axis: a as i64 },
            )
        }
    }
}

/// A typed value of `d` from its little-endian bytes (bool has no element type).
fn typed(d: DType, b: &[u8]) -> Option<Operand<'static>> {
    fn v<T: selectjit::Element>(b: &[u8]) -> Operand<'static> {
        Operand::from(bytemuck::pod_read_unaligned::<T>(&b[..size_of::<T>()]))
    }
    Some(match d {
        DType::Bool => return None,
        DType::I8 => v::<i8>(b),
        DType::I16 => v::<i16>(b),
        DType::I32 => v::<i32>(b),
        DType::I64 => v::<i64>(b),
        DType::U8 => v::<u8>(b),
        DType::U16 => v::<u16>(b),
        DType::U32 => v::<u32>(b),
        DType::U64 => v::<u64>(b),
        DType::F16 => v::<f16>(b),
        DType::BF16 => v::<bf16>(b),
        DType::F32 => v::<f32>(b),
        DType::F64 => v::<f64>(b),
        DType::Complex64 => v::<Complex<f32>>(b),
        DType::Complex128 => v::<Complex<f64>>(b),
    })
}

/// One run's data: the compared operands' bytes, then, else and the output's initial bytes.
struct Data {
    ops: [Vec<u8>; 2],
    then: Vec<u8>,
    else_: Vec<u8>,
    out: Vec<u8>,
}

fn data(c: &Case, sh: &[Vec<usize>; 4], out_shape: &[usize], r: &mut Rng) -> Data {
    let n = |s: &[usize]| s.iter().product::<usize>();
    let pool = pred_cases::pool(c.cmp_dtype);
    let vals = |k: usize, r: &mut Rng| -> Vec<u8> {
        (0..k)
            .flat_map(|_| pred_cases::value(c.cmp_dtype, &pool, r))
            .collect()
    };
    let w = c.sel_dtype.width();
    Data {
        ops: [vals(n(&sh[0]), r), vals(n(&sh[1]), r)],
        then: r.bytes(n(&sh[2]) * w),
        else_: r.bytes(n(&sh[3]) * w),
        out: r.bytes(n(out_shape) * w),
    }
}

/// The case's condition on `d`'s operands: views (`prepared`: placeholders) for the operands
/// given at every run, values or rank-0 views for the others.
fn cond<'a>(c: &Case, sh: &'a [Vec<usize>; 4], d: &'a Data, prepared: bool) -> Cond<'a> {
    let operand = |k: usize| -> Operand<'a> {
        let cd = c.cmp_dtype;
        match c.given[k] {
            Given::Placeholder if prepared => Operand::placeholder(cd, &sh[k]),
            Given::Placeholder => Operand::from_bytes(cd, TensorRef::new(&d.ops[k], &sh[k])),
            Given::Value => typed(cd, &d.ops[k]).unwrap_or_else(|| {
                Operand::from_bytes(cd, TensorRef::scalar(&d.ops[k][..cd.width()]))
            }),
            Given::Scalar => Operand::from_bytes(cd, TensorRef::scalar(&d.ops[k][..cd.width()])),
        }
    };
    let cond = match c.op {
        Some(op) => Cond::cmp(op, operand(0), operand(1)),
        None => Cond::test(c.test, operand(0)),
    };
    if c.not { !cond } else { cond }
}

/// The operands given at every run, in the order written.
fn run_operands<'a>(c: &Case, d: &'a Data) -> Vec<&'a [u8]> {
    let n = if c.op.is_some() { 2 } else { 1 };
    (0..n)
        .filter(|&k| c.given[k] == Given::Placeholder)
        .map(|k| d.ops[k].as_slice())
        .collect()
}

fn engines() -> Vec<(String, Engine)> {
    let mut v = common::all_engines(&EngineConfig::new());
    v.push(("default".to_string(), Engine::new()));
    v
}

/// The case run as a select on the interpreter (the reference) and as a prepared call on every
/// engine, twice with new data.
fn check_case(interp: &Engine, engines: &[(String, Engine)], c: &Case) -> Result<(), String> {
    let (mut sh, mode) = shapes(c);
    if c.op.is_none() {
        sh[1] = vec![]; // a test has no rhs
    }
    let pshape = output_shape(Broadcast::Numpy, &sh[0], &sh[1], &[]).map_err(|e| e.to_string())?;
    let out_shape = output_shape(mode, &pshape, &sh[2], &sh[3])
        .map_err(|e| format!("the generator made an invalid call {sh:?}: {e}"))?;
    let sd = c.sel_dtype;
    let mut r = Rng(c.seed);
    let mut runs: Vec<Data> = (0..2).map(|_| data(c, &sh, &out_shape, &mut r)).collect();
    // Values are fixed when the call is prepared: the second run has new data elsewhere.
    for k in 0..2 {
        if c.given[k] != Given::Placeholder {
            runs[1].ops[k] = runs[0].ops[k].clone();
        }
    }
    // The reference: the select on the interpreter, with views of the same bytes.
    let want: Vec<Vec<u8>> = runs
        .iter()
        .map(|d| {
            let mut out = d.out.clone();
            interp
                .select_bytes(
                    sd,
                    cond(c, &sh, d, false),
                    TensorRef::new(&d.then, &sh[2]),
                    TensorRef::new(&d.else_, &sh[3]),
                    TensorMut::new(&mut out, &out_shape),
                    mode,
                )
                .map(|()| out)
                .map_err(|e| format!("the reference select failed on {sh:?}: {e}"))
        })
        .collect::<Result<_, _>>()?;
    for (name, eng) in engines {
        let p = eng
            .prepare_cond(sd, cond(c, &sh, &runs[0], true), &sh[2], &sh[3], mode)
            .map_err(|e| format!("{name}: prepare_cond: {e}"))?;
        if p.out_shape() != out_shape.as_slice() {
            return Err(format!("{name}: out_shape {:?}", p.out_shape()));
        }
        // `is_jit`: a kernel that fuses the predicate, as a select of the call would run.
        let fused = eng
            .plan_select_bytes(
                sd,
                cond(c, &sh, &runs[0], false),
                TensorRef::new(&runs[0].then, &sh[2]),
                TensorRef::new(&runs[0].else_, &sh[3]),
                &out_shape,
                mode,
            )
            .map_err(|e| e.to_string())?
            .is_some_and(|(_, one_pass)| one_pass);
        let jit = eng.backend() == Backend::Jit && fused;
        if p.is_jit() != jit {
            return Err(format!("{name}: is_jit {} but fused {fused}", p.is_jit()));
        }
        for (d, want) in runs.iter().zip(&want) {
            let mut out = d.out.clone();
            p.run_cond_bytes(&run_operands(c, d), &d.then, &d.else_, &mut out)
                .map_err(|e| format!("{name}: run_cond_bytes: {e}"))?;
            if &out != want {
                return Err(format!(
                    "{name}: differs from the interpreter's select ({} shapes {sh:?} -> \
                     {out_shape:?}, {mode:?}, jit {})",
                    sd,
                    p.is_jit()
                ));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300)
    ))]

    #[test]
    fn prepared_predicates_match_the_interpreters_select(c in case()) {
        thread_local! {
            static ENGINES: Vec<(String, Engine)> = engines();
        }
        ENGINES.with(|e| {
            let res = check_case(&e[0].1, e, &c);
            prop_assert!(res.is_ok(), "{}", res.unwrap_err());
            Ok(())
        })?;
    }
}

/// Every generated case is valid, and they reach every mode, scalar forms, empty outputs and
/// mixed dtypes (so the property test above compares real calls, not errors).
#[test]
fn the_cases_cover_the_modes() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut seen = [0usize; 5];
    let (mut empty, mut mixed, mut values) = (0, 0, 0);
    for _ in 0..2000 {
        let c = case().new_tree(&mut runner).unwrap().current();
        let (mut sh, mode) = shapes(&c);
        if c.op.is_none() {
            sh[1] = vec![];
        }
        let p = output_shape(Broadcast::Numpy, &sh[0], &sh[1], &[]).unwrap();
        let out =
            output_shape(mode, &p, &sh[2], &sh[3]).unwrap_or_else(|e| panic!("{c:?}: {sh:?}: {e}"));
        seen[c.mode as usize] += 1;
        empty += usize::from(out.contains(&0));
        mixed += usize::from(c.cmp_dtype != c.sel_dtype);
        values += usize::from(c.given.contains(&Given::Value));
    }
    assert!(seen.iter().all(|&n| n > 200), "{seen:?}");
    assert!(empty > 20 && mixed > 1000 && values > 200);
}

#[test]
fn relu_and_masked_fill_match_the_mask_path() {
    for (name, eng) in engines() {
        // ReLU: out = x > 0 ? x : 0, x given as the operand and as then.
        let mut r = Rng(11);
        let x: Vec<f32> = (0..1000)
            .map(|i| match i % 7 {
                0 => f32::from_bits(0x7fc0_0001),
                1 => -0.0,
                2 => f32::from_bits(1),
                _ => f32::from_bits(r.next() as u32),
            })
            .collect();
        let relu = eng
            .prepare_cond(
                DType::F32,
                Cond::gt(Operand::placeholder(DType::F32, &[1000]), 0.0f32),
                &[1000],
                &[],
                Broadcast::Numpy,
            )
            .unwrap();
        let mut out = vec![1.0f32; 1000];
        relu.run_cond(&[&x], &x, &[0.0], &mut out).unwrap();
        let want: Vec<u32> = x
            .iter()
            .map(|&v| if v > 0.0 { v } else { 0.0 }.to_bits())
            .collect();
        assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);

        // BERT's masked fill: out = mask == 0 ? -inf : scores, mask i64 [8, 1, 1, 384] over
        // scores [8, 2, 384, 384] (two heads), against the prepared mask call.
        let (ms, ss) = ([8usize, 1, 1, 384], [8usize, 2, 384, 384]);
        let mask: Vec<i64> = (0..8 * 384)
            .map(|i| if i % 384 < 300 + i / 384 * 10 { 1 } else { 0 })
            .collect();
        let scores: Vec<f32> = (0..ss.iter().product::<usize>())
            .map(|_| f32::from_bits(r.next() as u32))
            .collect();
        let fill = eng
            .prepare_cond(
                DType::F32,
                Cond::eq(Operand::placeholder(DType::I64, &ms), 0i64),
                &[],
                &ss,
                Broadcast::Numpy,
            )
            .unwrap();
        assert_eq!(fill.out_shape(), &ss);
        let mut out = vec![0.0f32; scores.len()];
        fill.run_cond(&[&mask], &[f32::NEG_INFINITY], &scores, &mut out)
            .unwrap();
        let bytes: Vec<u8> = mask.iter().map(|&m| u8::from(m == 0)).collect();
        let by_mask = eng
            .prepare(DType::F32, &ms, &[], &ss, Broadcast::Numpy)
            .unwrap();
        let mut want = vec![1.0f32; scores.len()];
        by_mask
            .run(&bytes, &[f32::NEG_INFINITY], &scores, &mut want)
            .unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(bits(&out) == bits(&want), "{name}: masked fill");
        // The same call negated (`!=`): then and else trade places.
        let keep = eng
            .prepare_cond(
                DType::F32,
                Cond::ne(Operand::placeholder(DType::I64, &ms), 0i64),
                &ss,
                &[],
                Broadcast::Numpy,
            )
            .unwrap();
        let mut out2 = vec![0.0f32; scores.len()];
        keep.run_cond(&[&mask], &scores, &[f32::NEG_INFINITY], &mut out2)
            .unwrap();
        assert!(bits(&out2) == bits(&want), "{name}: negated masked fill");
    }
}

#[test]
fn placeholders_in_written_order_and_u64_operands() {
    // a > b for u64 (values above i64::MAX), both given at run time: the canonical form
    // compares b < a, the buffers are still given as written.
    let a = [u64::MAX, 1, 1 << 63, 0];
    let b = [1u64, u64::MAX, (1 << 63) - 1, 0];
    for (name, eng) in engines() {
        let p = eng
            .prepare_cond(
                DType::U8,
                Cond::gt(
                    Operand::placeholder(DType::U64, &[4]),
                    Operand::placeholder(DType::U64, &[4]),
                ),
                &[],
                &[],
                Broadcast::Numpy,
            )
            .unwrap();
        let mut out = [9u8; 4];
        p.run_cond(&[&a, &b], &[1u8], &[0u8], &mut out).unwrap();
        assert_eq!(out, [1, 0, 1, 0], "{name}");
        p.run_cond(&[&b, &a], &[1u8], &[0u8], &mut out).unwrap();
        assert_eq!(out, [0, 1, 0, 0], "{name} swapped");
    }
}

#[test]
fn errors_write_nothing() {
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    for (name, eng) in [
        ("default".to_string(), Engine::new()),
        ("interp".into(), interp),
    ] {
        let x = Operand::placeholder(DType::I64, &[2, 3]);
        let p = eng
            .prepare_cond(
                DType::F32,
                Cond::lt(x, 0i64),
                &[2, 3],
                &[],
                Broadcast::Numpy,
            )
            .unwrap();
        let (xs, t) = ([1i64, -2, 3, -4, 5, -6], [1.0f32; 6]);
        let mut out = [7.0f32; 6];
        let check = |res: selectjit::Result<()>, out: &mut [f32; 6], needle: &str| {
            let err = res.expect_err(needle);
            let msg = err.to_string();
            assert!(
                msg.contains(needle),
                "{name}: expected '{needle}' in: {msg}"
            );
            assert_eq!(*out, [7.0; 6], "{name}: {needle}");
            err
        };
        // Selected elements of another dtype.
        let mut o64 = [7.0f64; 6];
        let e = p
            .run_cond(&[&xs], &[1.0f64; 6], &[0.0], &mut o64)
            .unwrap_err();
        assert!(matches!(e, Error::DType(_)), "{name}: {e}");
        assert_eq!(o64, [7.0; 6]);
        // Operands of another dtype (i32, not the prepared i64).
        let e = check(
            p.run_cond(&[&[1i32; 6]], &t, &[0.0], &mut out),
            &mut out,
            "operands are i64 but were given as i32",
        );
        assert!(matches!(e, Error::DType(_)));
        // A short operand buffer, counted in i64 elements (40 bytes are 5 of them).
        let e = check(
            p.run_cond_bytes(
                &[&[0u8; 40]],
                bytemuck::cast_slice(&t),
                &[0; 4],
                bytemuck::cast_slice_mut(&mut out),
            ),
            &mut out,
            "buffer holds 5 elements of i64, the prepared call needs 6",
        );
        assert!(matches!(e, Error::Layout { what: "lhs", .. }), "{e:?}");
        // Short then, else and output.
        for (then, else_, out_len, what) in [
            (&t[..5], &[0.0f32][..], 6, "then"),
            (&t[..], &[][..], 6, "else"),
            (&t[..], &[0.0][..], 5, "output"),
        ] {
            let res = p.run_cond(&[&xs], then, else_, &mut out[..out_len]);
            let e = res.expect_err(what);
            assert!(
                matches!(e, Error::Layout { what: w, .. } if w == what),
                "{e:?}"
            );
            assert_eq!(out, [7.0; 6]);
        }
        // Too many or too few operand buffers.
        check(
            p.run_cond(&[&xs, &xs], &t, &[0.0], &mut out),
            &mut out,
            "takes 1 operand buffer(s), one per placeholder (lhs); 2 given",
        );
        check(
            p.run_cond::<i64, f32>(&[], &t, &[0.0], &mut out),
            &mut out,
            "0 given",
        );
        // A predicate call run as a mask call, and a mask call run as a predicate call.
        check(
            p.run(&[1; 6], &t, &[0.0], &mut out),
            &mut out,
            "prepared for a predicate",
        );
        let m = eng
            .prepare(DType::F32, &[2, 3], &[2, 3], &[], Broadcast::Numpy)
            .unwrap();
        check(
            m.run_cond(&[&xs], &t, &[0.0], &mut out),
            &mut out,
            "prepared for a mask",
        );
        check(
            m.run_cond_bytes(
                &[],
                bytemuck::cast_slice(&t),
                &[0; 4],
                bytemuck::cast_slice_mut(&mut out),
            ),
            &mut out,
            "prepared for a mask",
        );
    }
}

#[test]
fn what_prepare_cond_refuses() {
    let eng = Engine::new();
    let x = [1.0f32, 2.0];
    let xv = TensorRef::new(&x, &[2]);
    let ph = Operand::placeholder(DType::F32, &[2]);
    let err = |c: Cond<'_>, then: &[usize]| {
        eng.prepare_cond(DType::F32, c, then, &[], Broadcast::Numpy)
            .expect_err("an error")
            .to_string()
    };
    // A mask, a view of rank 1, the in-place operand.
    assert!(err(Cond::mask(TensorRef::new(&[1u8], &[1])), &[1]).contains("Engine::prepare"));
    assert!(err(Cond::gt(xv, 0.0f32), &[2]).contains("lhs: a prepared call is given"));
    assert!(err(Cond::isnan(xv), &[2]).contains("operand: a prepared call is given"));
    assert!(err(Cond::gt(0.0f32, xv), &[2]).contains("rhs: a prepared call is given"));
    assert!(err(Cond::gt(Operand::in_place(), 0.0f32), &[2]).contains("in place"));
    // Operands of two dtypes; operands that do not broadcast, named as written.
    assert!(err(Cond::lt(ph, 0i32), &[2]).contains("lhs is f32, rhs is i32"));
    let p3 = Operand::placeholder(DType::F32, &[3]);
    assert!(err(Cond::gt(ph, p3), &[2]).contains("lhs dim 0 is 2 but rhs dim 0 is 3"));
    // The predicate against then and else; a rank-0 view past its buffer; a placeholder too
    // large.
    assert!(matches!(
        eng.prepare_cond(
            DType::F32,
            Cond::gt(ph, 0.0f32),
            &[3],
            &[],
            Broadcast::Numpy
        ),
        Err(Error::Broadcast(_))
    ));
    let one = TensorRef::scalar(&x[..1]).with_offset(1);
    assert!(err(Cond::gt(ph, one), &[2]).contains("rhs"));
    let huge = Operand::placeholder(DType::F32, &[usize::MAX, 2]);
    assert!(matches!(
        eng.prepare_cond(DType::F32, Cond::isnan(huge), &[], &[], Broadcast::Numpy),
        Err(Error::Overflow { .. })
    ));
    // A placeholder has no data: a select that runs at once refuses it, writing nothing.
    let mut out = [7.0f32; 2];
    let res = eng.select(
        Cond::gt(ph, 0.0f32),
        xv,
        TensorRef::scalar(&[0.0f32]),
        TensorMut::new(&mut out, &[2]),
        Broadcast::Numpy,
    );
    assert!(res.unwrap_err().to_string().contains("placeholder operand"));
    let res = eng.select_in_place(
        Cond::gt(ph, 0.0f32),
        TensorMut::new(&mut out, &[2]),
        InPlace::Then,
        TensorRef::scalar(&[0.0f32]),
        Broadcast::Numpy,
    );
    assert!(res.is_err());
    assert_eq!(out, [7.0; 2]);
}

#[test]
fn an_aot_kernel_of_the_predicate_is_bound() {
    // ReLU on 1000 f32s: the table holds the exact kernel of its signature (as a select plans
    // it), and an engine with no code generator binds it; without a table the static kernels
    // run it in blocks.
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| i as f32 - 500.5).collect();
    let xb: &[u8] = bytemuck::cast_slice(&x);
    let zero = 0.0f32.to_le_bytes();
    let shape = [n];
    let (sig, _) = Engine::new()
        .plan_select_bytes(
            DType::F32,
            Cond::gt(
                Operand::from_bytes(DType::F32, TensorRef::new(xb, &shape)),
                0.0f32,
            ),
            TensorRef::new(xb, &[n]),
            TensorRef::scalar(&zero),
            &[n],
            Broadcast::Numpy,
        )
        .unwrap()
        .unwrap();
    assert!(!sig.is_mask());
    let mut set = selectjit_aot::KernelSet::new();
    assert!(set.add_signature(sig));
    let table = aot_host::host_table(&set);
    let with_table = aot_host::aot_only_engine(EngineConfig::new(), table);
    let without = Engine::with_config(EngineConfig::new().backend(Backend::Static)).unwrap();
    let want: Vec<u32> = x
        .iter()
        .map(|&v| if v > 0.0 { v } else { 0.0 }.to_bits())
        .collect();
    for (eng, jit) in [(&with_table, true), (&without, false)] {
        let before = eng.stats();
        let p = eng
            .prepare_cond(
                DType::F32,
                Cond::gt(Operand::placeholder(DType::F32, &[n]), 0.0f32),
                &[n],
                &[],
                Broadcast::Numpy,
            )
            .unwrap();
        assert_eq!(p.is_jit(), jit);
        let after = eng.stats();
        assert_eq!(after.aot_exact_runs, before.aot_exact_runs + u64::from(jit));
        let mut out = vec![1.0f32; n];
        p.run_cond(&[&x], &x, &[0.0], &mut out).unwrap();
        assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);
        // A select of the same call counts one run of the table's kernel, not two.
        let before = eng.stats();
        eng.select(
            Cond::gt(TensorRef::new(&x, &[n]), 0.0f32),
            TensorRef::new(&x, &[n]),
            TensorRef::scalar(&[0.0f32]),
            TensorMut::new(&mut out, &[n]),
            Broadcast::Numpy,
        )
        .unwrap();
        let after = eng.stats();
        assert_eq!(after.aot_exact_runs, before.aot_exact_runs + u64::from(jit));
        assert_eq!(after.blocked_runs, before.blocked_runs + u64::from(!jit));
    }
}

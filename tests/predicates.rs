//! Selects whose condition is a predicate computed in the kernel (`Cond::gt(x, 0)`,
//! `Cond::isnan(x)`, ...), on every backend and tier.
//!
//! * Against an oracle written here with Rust's own operators (independent of the library's
//!   predicate code): every comparison and test, every numeric dtype, edge values (NaN payloads,
//!   ±0, ±inf, subnormals, integer extremes, u64 above i64::MAX), broadcast operands, negation.
//! * Differential, with proptest (shrinking): random shapes, broadcast modes, negative strides,
//!   compared dtypes other than the selected one, in place with the output as the compared
//!   operand; every engine bytewise against the interpreter. The same with a predicate at
//!   least 256 times smaller than the output, which the engine evaluates once at its own
//!   shape before the select (a padding mask broadcast over heads and queries).
//! * Errors: nothing is written.

mod common;
#[path = "common/rng.rs"]
mod rng;

use half::{bf16, f16};
use proptest::prelude::*;
use rng::Rng;
use selectjit::{
    Backend, Broadcast, CmpOp, Cond, DType, Element, Engine, EngineConfig, Error, InPlace, Operand,
    TensorMut, TensorRef, TestOp,
};

/// A numeric element with Rust's own semantics for the comparisons and tests (the oracle).
trait Num: Element + Copy + std::fmt::Debug {
    fn cmp(op: CmpOp, a: Self, b: Self) -> bool;
    fn test(op: TestOp, a: Self) -> bool;
    /// Values that stress the comparisons: extremes, ±0, NaNs, infinities, subnormals.
    fn edges() -> Vec<Self>;
    fn from_bits64(b: u64) -> Self;
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn cmp(op: CmpOp, a: Self, b: Self) -> bool { common::cmp_ord(op, a, b) }
            fn test(op: TestOp, _: Self) -> bool { op == TestOp::IsFinite }
            fn edges() -> Vec<Self> { vec![<$t>::MIN, <$t>::MAX, 0, 1, <$t>::MAX / 2 + 1] }
            fn from_bits64(b: u64) -> Self { b as $t }
        }
    )*};
}
int_num!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_num {
    ($t:ty, $bits:ty, $to:expr) => {
        impl Num for $t {
            fn cmp(op: CmpOp, a: Self, b: Self) -> bool {
                common::cmp_ord(op, $to(a), $to(b))
            }
            fn test(op: TestOp, a: Self) -> bool {
                let v = $to(a);
                match op {
                    TestOp::IsNan => v.is_nan(),
                    TestOp::IsInf => v.is_infinite(),
                    TestOp::IsFinite => v.is_finite(),
                }
            }
            fn edges() -> Vec<Self> {
                [
                    0 as $bits,
                    !(<$bits>::MAX >> 1), // -0.0
                    (<$bits>::MAX >> 1),  // a NaN with every payload bit
                    <$bits>::MAX,         // a negative NaN
                    1,                    // the smallest subnormal
                ]
                .into_iter()
                .map(|b| <$t>::from_bits(b))
                .chain([<$t>::INFINITY, <$t>::NEG_INFINITY, <$t>::MAX, <$t>::MIN])
                .collect()
            }
            fn from_bits64(b: u64) -> Self {
                <$t>::from_bits(b as $bits)
            }
        }
    };
}
float_num!(f32, u32, |v: f32| f64::from(v));
float_num!(f64, u64, |v: f64| v);
float_num!(f16, u16, |v: f16| f64::from(v.to_f32()));
float_num!(bf16, u16, |v: bf16| f64::from(v.to_f32()));

/// A value drawn near the interesting ones: an edge, a small integer (ties are frequent), or
/// random bits.
fn draw<T: Num>(r: &mut Rng) -> T {
    match r.below(4) {
        0 => r.pick(&T::edges()),
        1 => T::from_bits64(r.below(3) as u64),
        _ => T::from_bits64(r.next()),
    }
}

fn engines() -> Vec<(String, Engine)> {
    common::all_engines(&EngineConfig::new().exact_after(1))
}

/// `out[i] = pred(i) ? i : -(i + 1)` over `n` elements in the oracle and in every engine,
/// for the comparison `op` of `a` (shape `sa`) with `b` (shape `sb`), broadcast with numpy's
/// rule to `[rows, cols]`.
fn check_cmp<T: Num>(e: &[(String, Engine)], op: CmpOp, r: &mut Rng, rows: usize, cols: usize) {
    for (sa, sb) in [
        (vec![rows, cols], vec![rows, cols]),
        (vec![rows, cols], vec![]),
        (vec![], vec![rows, cols]),
        (vec![rows, cols], vec![cols]),
        (vec![rows, 1], vec![1, cols]),
    ] {
        let n = |s: &[usize]| s.iter().product::<usize>();
        let a: Vec<T> = (0..n(&sa)).map(|_| draw(r)).collect();
        let b: Vec<T> = (0..n(&sb)).map(|_| draw(r)).collect();
        let at = |s: &[usize], i: usize, j: usize| match s.len() {
            0 => 0,
            1 => j,
            _ => (if s[0] == 1 { 0 } else { i }) * s[1] + if s[1] == 1 { 0 } else { j },
        };
        let t: Vec<i32> = (0..(rows * cols) as i32).collect();
        let f: Vec<i32> = t.iter().map(|v| -v - 1).collect();
        for not in [false, true] {
            let want: Vec<i32> = (0..rows * cols)
                .map(|k| {
                    let (i, j) = (k / cols, k % cols);
                    let p = T::cmp(op, a[at(&sa, i, j)], b[at(&sb, i, j)]) ^ not;
                    if p { t[k] } else { f[k] }
                })
                .collect();
            for (name, eng) in e {
                let mut out = vec![7i32; rows * cols];
                let c = Cond::cmp(op, TensorRef::new(&a, &sa), TensorRef::new(&b, &sb));
                let c = if not { !c } else { c };
                eng.select(
                    c,
                    TensorRef::new(&t, &[rows, cols]),
                    TensorRef::new(&f, &[rows, cols]),
                    TensorMut::new(&mut out, &[rows, cols]),
                    Broadcast::Numpy,
                )
                .unwrap_or_else(|err| panic!("{name}: {err}"));
                assert_eq!(
                    out,
                    want,
                    "{name}: {:?} {} {sa:?} vs {sb:?} (not {not})",
                    T::DTYPE,
                    op.symbol()
                );
            }
        }
    }
}

fn check_tests<T: Num>(e: &[(String, Engine)], r: &mut Rng, n: usize) {
    let x: Vec<T> = (0..n).map(|_| draw(r)).collect();
    let t: Vec<u16> = (0..n as u16).collect();
    for op in TestOp::ALL {
        let want: Vec<u16> = x
            .iter()
            .zip(&t)
            .map(|(&v, &i)| if T::test(op, v) { i } else { 0xffff })
            .collect();
        for (name, eng) in e {
            let mut out = vec![1u16; n];
            eng.select(
                Cond::test(op, TensorRef::new(&x, &[n])),
                TensorRef::new(&t, &[n]),
                TensorRef::scalar(&[0xffffu16]),
                TensorMut::new(&mut out, &[n]),
                Broadcast::Numpy,
            )
            .unwrap();
            assert_eq!(out, want, "{name}: {}({:?})", op.name(), T::DTYPE);
        }
    }
}

#[test]
fn every_comparison_and_test_of_every_dtype_matches_rust() {
    let e = engines();
    let mut r = Rng(7);
    for op in CmpOp::ALL {
        for (rows, cols) in [(1, 1), (3, 37), (2, 300)] {
            check_cmp::<f32>(&e, op, &mut r, rows, cols);
            check_cmp::<f64>(&e, op, &mut r, rows, cols);
            check_cmp::<f16>(&e, op, &mut r, rows, cols);
            check_cmp::<bf16>(&e, op, &mut r, rows, cols);
            check_cmp::<i8>(&e, op, &mut r, rows, cols);
            check_cmp::<i16>(&e, op, &mut r, rows, cols);
            check_cmp::<i32>(&e, op, &mut r, rows, cols);
            check_cmp::<i64>(&e, op, &mut r, rows, cols);
            check_cmp::<u8>(&e, op, &mut r, rows, cols);
            check_cmp::<u16>(&e, op, &mut r, rows, cols);
            check_cmp::<u32>(&e, op, &mut r, rows, cols);
            check_cmp::<u64>(&e, op, &mut r, rows, cols);
        }
    }
    for n in [1, 9, 1000] {
        check_tests::<f32>(&e, &mut r, n);
        check_tests::<f64>(&e, &mut r, n);
        check_tests::<f16>(&e, &mut r, n);
        check_tests::<bf16>(&e, &mut r, n);
        check_tests::<i32>(&e, &mut r, n);
        check_tests::<u8>(&e, &mut r, n);
    }
}

/// Every edge value of `T` as a scalar on either side of every comparison (negated too)
/// against a row holding every edge value and random ones: the x86 tiers compare halves as
/// integer keys with a splat's NaN turned into a key no value compares with.
fn check_every_splat<T: Num>(e: &[(String, Engine)], r: &mut Rng) {
    let mut row = T::edges();
    row.extend((0..100 - row.len()).map(|_| draw::<T>(r)));
    let n = row.len();
    let t: Vec<u8> = (0..n).map(|_| 1).collect();
    let f = [0u8];
    for op in CmpOp::ALL {
        for &c in &T::edges() {
            for scalar_lhs in [false, true] {
                for not in [false, true] {
                    let want: Vec<u8> = row
                        .iter()
                        .map(|&x| {
                            let (a, b) = if scalar_lhs { (c, x) } else { (x, c) };
                            (T::cmp(op, a, b) ^ not) as u8
                        })
                        .collect();
                    let (shape, cs) = ([n], [c]);
                    let (x, s) = (TensorRef::new(&row, &shape), TensorRef::scalar(&cs));
                    for (name, eng) in e {
                        let cond = if scalar_lhs {
                            Cond::cmp(op, s, x)
                        } else {
                            Cond::cmp(op, x, s)
                        };
                        let cond = if not { !cond } else { cond };
                        let mut out = vec![7u8; n];
                        eng.select(
                            cond,
                            TensorRef::new(&t, &[n]),
                            TensorRef::scalar(&f),
                            TensorMut::new(&mut out, &[n]),
                            Broadcast::Numpy,
                        )
                        .unwrap_or_else(|err| panic!("{name}: {err}"));
                        assert_eq!(
                            out,
                            want,
                            "{name}: {:?} {} with the scalar {c:?} on the {} (not {not})",
                            T::DTYPE,
                            op.symbol(),
                            if scalar_lhs { "left" } else { "right" }
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn every_edge_value_as_a_scalar_operand() {
    let e = engines();
    let mut r = Rng(11);
    check_every_splat::<f16>(&e, &mut r);
    check_every_splat::<bf16>(&e, &mut r);
    check_every_splat::<f32>(&e, &mut r);
    check_every_splat::<f64>(&e, &mut r);
}

#[test]
fn bool_operands_compare_as_zero_and_one() {
    // Bytes other than 0/1 are true, as in a mask; true > false.
    let a = [0u8, 1, 2, 0x80, 0xff, 0];
    let b = [0u8, 0xfe, 1, 0, 3, 7];
    let t = [1u8, 2, 3, 4, 5, 6];
    for (name, eng) in engines() {
        for (op, want) in [
            (CmpOp::Eq, [1u8, 2, 3, 0, 5, 0]),
            (CmpOp::Gt, [0, 0, 0, 4, 0, 0]),
            (CmpOp::Lt, [0, 0, 0, 0, 0, 6]),
        ] {
            let mut out = [0u8; 6];
            eng.select_bytes(
                DType::U8,
                Cond::cmp(
                    op,
                    Operand::from_bytes(DType::Bool, TensorRef::new(&a, &[6])),
                    Operand::from_bytes(DType::Bool, TensorRef::new(&b, &[6])),
                ),
                TensorRef::new(&t, &[6]),
                TensorRef::scalar(&[0u8]),
                TensorMut::new(&mut out, &[6]),
                Broadcast::Numpy,
            )
            .unwrap();
            assert_eq!(out, want, "{name} {op:?}");
        }
    }
}

#[test]
fn in_place_relu_compares_the_output_itself() {
    // x = where(x > 0, x, 0) with x overwritten, reversed and strided too.
    let mut r = Rng(3);
    for (name, eng) in engines() {
        for n in [1usize, 31, 5000] {
            let x0: Vec<f32> = (0..n).map(|_| draw(&mut r)).collect();
            let want: Vec<u32> = x0
                .iter()
                .map(|&v| if v > 0.0 { v } else { 0.0 })
                .map(f32::to_bits)
                .collect();
            let mut x = x0.clone();
            eng.select_in_place(
                Cond::gt(Operand::in_place(), 0.0f32),
                TensorMut::new(&mut x, &[n]),
                InPlace::Then,
                TensorRef::scalar(&[0.0f32]),
                Broadcast::Numpy,
            )
            .unwrap();
            let got: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{name} n {n}");
            // The output is else and the compared operand: where(x < 0, 0, x) reversed.
            let mut x = x0.clone();
            let st = [-1isize];
            eng.select_in_place(
                Cond::lt(Operand::in_place(), 0.0f32).not().not(),
                TensorMut::with_layout(&mut x, &[n], &st, n - 1),
                InPlace::Else,
                TensorRef::scalar(&[0.0f32]),
                Broadcast::Numpy,
            )
            .unwrap();
            let want: Vec<u32> = x0
                .iter()
                .map(|&v| if v < 0.0 { 0.0 } else { v })
                .map(f32::to_bits)
                .collect();
            let got: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{name} reversed n {n}");
        }
    }
}

#[test]
fn negation_keeps_then_and_else_in_their_places() {
    // A negated condition (`!=`, `.not()`, a negated mask) trades then and else for the
    // kernels only: pdpd's output is still then's shape, and messages name them as given.
    let x = [1.0f32, -1.0, 2.0];
    let m = [1u8, 0, 1]; // x > 0
    let then: Vec<f32> = (1..=6).map(|v| v as f32 * 10.0).collect();
    let els = [0.5f32, 0.25, 0.125];
    let pdpd = Broadcast::Pdpd { axis: -1 };
    let want = [10.0f32, 0.25, 30.0, 40.0, 0.25, 60.0];
    let xv = TensorRef::new(&x, &[3]);
    for (name, eng) in engines() {
        let conds = [
            ("x > 0", Cond::gt(xv, 0.0f32)),
            ("!(x <= 0)", Cond::le(xv, 0.0f32).not()),
            ("x != -1", Cond::ne(xv, -1.0f32)),
            ("!!mask", Cond::mask(TensorRef::new(&m, &[3])).not().not()),
            (
                "!(not mask)",
                !Cond::mask(TensorRef::new(&[0u8, 1, 0], &[3])),
            ),
        ];
        for (what, c) in conds {
            // Twice, and with a strided then: the per-thread memo of the last layout too.
            for st in [None, Some([3isize, 1])] {
                let tv = match &st {
                    Some(s) => TensorRef::with_strides(&then, &[2, 3], s),
                    None => TensorRef::new(&then, &[2, 3]),
                };
                let mut out = [0.0f32; 6];
                eng.select(
                    c,
                    tv,
                    TensorRef::new(&els, &[3]),
                    TensorMut::new(&mut out, &[2, 3]),
                    pdpd,
                )
                .unwrap_or_else(|e| panic!("{name} {what}: {e}"));
                assert_eq!(out, want, "{name} {what}");
            }
        }
        // The negated mask right after the same layout un-negated: not the remembered plan.
        let mut out = [0.0f32; 6];
        eng.select(
            Cond::mask(TensorRef::new(&m, &[3])).not(),
            TensorRef::with_strides(&then, &[2, 3], &[3, 1]),
            TensorRef::new(&els, &[3]),
            TensorMut::new(&mut out, &[2, 3]),
            pdpd,
        )
        .unwrap();
        assert_eq!(out, [0.5, 20.0, 0.125, 0.5, 50.0, 0.125], "{name} not mask");
        // then [3], else [2, 3] is no pdpd call, negated or not.
        for c in [Cond::gt(xv, 0.0f32), Cond::ne(xv, -1.0f32)] {
            let mut out = [7.0f32; 6];
            let res = eng.select(
                c,
                TensorRef::new(&els, &[3]),
                TensorRef::new(&then, &[2, 3]),
                TensorMut::new(&mut out, &[2, 3]),
                pdpd,
            );
            assert!(matches!(res, Err(Error::Broadcast(_))), "{name}: {res:?}");
            assert_eq!(out, [7.0; 6]);
        }
        // A short then is named then.
        let mut out = [7.0f32; 3];
        let err = eng
            .select(
                Cond::ne(xv, 0.0f32),
                TensorRef::with_strides(&x, &[3], &[2]),
                xv,
                TensorMut::new(&mut out, &[3]),
                Broadcast::Numpy,
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("then"), "{name}: {err}");
        assert_eq!(out, [7.0; 3]);
    }
}

#[test]
fn errors_write_nothing() {
    let x = [1.0f32, 2.0, 3.0];
    let y = [1.0f64, 2.0, 3.0];
    let e = Engine::with_config(EngineConfig::new().backend(Backend::Jit)).unwrap();
    let mut out = [9.0f32; 3];
    let t = TensorRef::new(&x, &[3]);
    let check = |res: selectjit::Result<()>, out: &[f32; 3], needle: &str| {
        let err = res.expect_err(needle).to_string();
        assert!(err.contains(needle), "expected '{needle}' in: {err}");
        assert_eq!(out, &[9.0; 3]);
    };
    // Operands of two dtypes.
    let res = e.select(
        Cond::lt(t, TensorRef::new(&y, &[3])),
        t,
        t,
        TensorMut::new(&mut out, &[3]),
        Broadcast::Numpy,
    );
    check(res, &out, "lhs is f32, rhs is f64");
    // Operands that do not broadcast: named, with the dimension.
    let res = e.select(
        Cond::lt(t, TensorRef::new(&x[..2], &[2])),
        t,
        t,
        TensorMut::new(&mut out, &[3]),
        Broadcast::Numpy,
    );
    check(res, &out, "lhs dim 0 is 3 but rhs dim 0 is 2");
    // The same as `>`, which runs as `<` with its operands swapped: still named as written.
    let res = e.select(
        Cond::gt(t, TensorRef::new(&x[..2], &[2])),
        t,
        t,
        TensorMut::new(&mut out, &[3]),
        Broadcast::Numpy,
    );
    check(res, &out, "rhs dim 0 is 2 but lhs dim 0 is 3");
    let res = e.select(
        Cond::ge(TensorRef::new(&x[..2], &[3]), t),
        t,
        t,
        TensorMut::new(&mut out, &[3]),
        Broadcast::Numpy,
    );
    check(res, &out, "lhs:");
    // A predicate that would grow the output in the two-step mode.
    let z = [0.0f32; 6];
    let res = e.select(
        Cond::gt(TensorRef::new(&z, &[2, 3]), 0.0f32),
        t,
        t,
        TensorMut::new(&mut out, &[3]),
        Broadcast::TwoStep,
    );
    assert!(matches!(res, Err(Error::Broadcast(_))), "{res:?}");
    assert_eq!(out, [9.0; 3]);
    // An operand whose buffer is too short.
    let res = e.select(
        Cond::isnan(TensorRef::with_strides(&x, &[3], &[2])),
        t,
        t,
        TensorMut::new(&mut out, &[3]),
        Broadcast::Numpy,
    );
    check(res, &out, "operand");
    // The in-place operand outside an in-place select.
    let res = e.select(
        Cond::gt(Operand::in_place(), 0.0f32),
        t,
        t,
        TensorMut::new(&mut out, &[3]),
        Broadcast::Numpy,
    );
    check(res, &out, "only allowed in an in-place select");
}

/// One differential case: a predicate over operands of `cmp_dtype` (shapes broadcast to the
/// predicate's), then/else/out of `width` bytes, a broadcast mode, reversed dims.
#[derive(Debug, Clone)]
struct Case {
    op: Option<CmpOp>,
    test: TestOp,
    not: bool,
    cmp_dtype: DType,
    sel_dtype: DType,
    out_shape: Vec<usize>,
    /// Per operand (lhs, rhs, then, else): which output dims it has (else 1).
    has: [Vec<bool>; 4],
    /// Reverse the output's last dim, and lhs's.
    reverse: (bool, bool),
    mode_two_step: bool,
    in_place: Option<InPlace>,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    let dims = prop::collection::vec(1usize..6, 0..4);
    let dtypes = prop::sample::select(DType::ALL.to_vec());
    (
        (
            prop::option::of(prop::sample::select(CmpOp::ALL.to_vec())),
            prop::sample::select(TestOp::ALL.to_vec()),
            any::<bool>(),
            dtypes.clone(),
            dtypes,
        ),
        dims.prop_flat_map(|d| {
            let r = d.len();
            (
                Just(d),
                [
                    prop::collection::vec(any::<bool>(), r),
                    prop::collection::vec(any::<bool>(), r),
                    prop::collection::vec(any::<bool>(), r),
                    prop::collection::vec(any::<bool>(), r),
                ],
            )
        }),
        (any::<(bool, bool, bool)>(), 0u8..3, any::<u64>()),
    )
        .prop_map(
            |((op, test, not, cmp_dtype, sel_dtype), (out_shape, has), ((r0, r1, m), ip, seed))| {
                Case {
                    op,
                    test,
                    not,
                    cmp_dtype,
                    sel_dtype,
                    out_shape,
                    has,
                    reverse: (r0, r1),
                    mode_two_step: m,
                    in_place: [None, Some(InPlace::Then), Some(InPlace::Else)][ip as usize],
                    seed,
                }
            },
        )
}

/// Runs `c` on `eng`: the output bytes, or the error's text.
fn run_case(eng: &Engine, c: &Case) -> Result<Vec<u8>, String> {
    let mut r = Rng(c.seed);
    let shape_of = |has: &[bool]| -> Vec<usize> {
        c.out_shape
            .iter()
            .zip(has)
            .map(|(&d, &h)| if h { d } else { 1 })
            .collect()
    };
    let n = |s: &[usize]| s.iter().product::<usize>();
    let (cw, w) = (c.cmp_dtype.width(), c.sel_dtype.width());
    let [sl, sr, st, se] = [0, 1, 2, 3].map(|k| shape_of(&c.has[k]));
    // Compared values from a small set, so that ties and NaNs are frequent.
    let vals = |k: usize, r: &mut Rng| -> Vec<u8> {
        (0..k)
            .flat_map(|_| match r.below(3) {
                0 => vec![0u8; cw],
                1 => {
                    let mut v = vec![0u8; cw];
                    v[cw - 1] = 0x80 | (r.byte() & 0x7f);
                    v
                }
                _ => r.bytes(cw),
            })
            .collect()
    };
    let lb = vals(n(&sl), &mut r);
    let rb = vals(n(&sr), &mut r);
    let tb = r.bytes(n(&st) * w);
    let eb = r.bytes(n(&se) * w);
    let mut ob = r.bytes(n(&c.out_shape) * w);
    let rank = c.out_shape.len();
    // lhs reversed along its last dim (stride -1 from its last element).
    let ls: Vec<isize> = {
        let mut s = vec![0isize; rank];
        let mut acc = 1isize;
        for k in (0..rank).rev() {
            s[k] = acc;
            acc *= sl[k] as isize;
        }
        if c.reverse.1 && rank > 0 {
            s[rank - 1] = -s[rank - 1];
        }
        s
    };
    let l_off = if c.reverse.1 && rank > 0 {
        sl[rank - 1] - 1
    } else {
        0
    };
    let lhs = Operand::from_bytes(c.cmp_dtype, TensorRef::with_layout(&lb, &sl, &ls, l_off));
    let rhs = Operand::from_bytes(c.cmp_dtype, TensorRef::new(&rb, &sr));
    let cond = match c.op {
        Some(op) => Cond::cmp(op, lhs, rhs),
        None => Cond::test(c.test, lhs),
    };
    let cond = if c.not { !cond } else { cond };
    let mode = if c.mode_two_step {
        Broadcast::TwoStep
    } else {
        Broadcast::Numpy
    };
    let os: Vec<isize> = {
        let mut s = vec![0isize; rank];
        let mut acc = 1isize;
        for k in (0..rank).rev() {
            s[k] = acc;
            acc *= c.out_shape[k] as isize;
        }
        if c.reverse.0 && rank > 0 {
            s[rank - 1] = -s[rank - 1];
        }
        s
    };
    let o_off = if c.reverse.0 && rank > 0 {
        c.out_shape[rank - 1] - 1
    } else {
        0
    };
    let res = match c.in_place {
        None => eng.select_bytes(
            c.sel_dtype,
            cond,
            TensorRef::new(&tb, &st),
            TensorRef::new(&eb, &se),
            TensorMut::with_layout(&mut ob, &c.out_shape, &os, o_off),
            mode,
        ),
        Some(role) => {
            // The output holds then (or else), with the output's full shape.
            let other = if role == InPlace::Then { &eb } else { &tb };
            let oshape = if role == InPlace::Then { &se } else { &st };
            eng.select_in_place_bytes(
                c.sel_dtype,
                cond,
                TensorMut::with_layout(&mut ob, &c.out_shape, &os, o_off),
                role,
                TensorRef::new(other, oshape),
                mode,
            )
        }
    };
    res.map(|()| ob).map_err(|e| e.to_string())
}

/// A [`Case`] whose predicate the engine hoists: a dim that the predicate's operands do not
/// have, inserted into the output at `at` (then and else may have it), long enough for an
/// output of at least 2^18 elements (and at least 256 per predicate element).
fn hoisted_case() -> impl Strategy<Value = Case> {
    (
        case(),
        0usize..64,
        any::<prop::sample::Index>(),
        any::<(bool, bool)>(),
    )
        .prop_map(|(mut c, extra, at, (t, e))| {
            let rest: usize = c.out_shape.iter().product();
            let big = (1usize << 18).div_ceil(rest) + extra;
            let at = at.index(c.out_shape.len() + 1);
            c.out_shape.insert(at, big);
            for (k, has) in c.has.iter_mut().enumerate() {
                has.insert(at, [false, false, t, e][k]);
            }
            c
        })
}

/// Whether `eng` evaluates `c`'s predicate once at its own shape (operand shapes only).
fn hoists(eng: &Engine, c: &Case) -> bool {
    let shape = |k: usize| -> Vec<usize> {
        c.out_shape
            .iter()
            .zip(&c.has[k])
            .map(|(&d, &h)| if h { d } else { 1 })
            .collect()
    };
    let (sl, sr) = (shape(0), shape(1));
    let (lb, rb) = (
        vec![0u8; sl.iter().product::<usize>() * c.cmp_dtype.width()],
        vec![0u8; sr.iter().product::<usize>() * c.cmp_dtype.width()],
    );
    let lhs = Operand::from_bytes(c.cmp_dtype, TensorRef::new(&lb, &sl));
    let rhs = Operand::from_bytes(c.cmp_dtype, TensorRef::new(&rb, &sr));
    let cond = match c.op {
        Some(op) => Cond::cmp(op, lhs, rhs),
        None => Cond::test(c.test, lhs),
    };
    eng.hoisted_pred_shape(c.sel_dtype, cond, &c.out_shape)
        .is_ok_and(|s| s.is_some())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(32)
    ))]

    /// Predicates far smaller than the output: evaluated once, then the mask's select, on
    /// every engine (the interpreter evaluates them per element).
    #[test]
    fn hoisted_predicates_match_the_interpreter(c in hoisted_case()) {
        thread_local! {
            static ENGINES: Vec<(String, Engine)> = engines();
        }
        ENGINES.with(|e| {
            let want = run_case(&e[0].1, &c);
            // Calls the interpreter refuses (an order on complex operands, ...) are refused
            // alike below, hoisted or not.
            prop_assert!(want.is_err() || hoists(&e[1].1, &c), "not hoisted");
            for (name, eng) in &e[1..] {
                let got = run_case(eng, &c);
                prop_assert_eq!(&got, &want, "{} differs from the interpreter", name);
            }
            Ok(())
        })?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300)
    ))]

    #[test]
    fn every_engine_matches_the_interpreter(c in case()) {
        thread_local! {
            static ENGINES: Vec<(String, Engine)> = engines();
        }
        ENGINES.with(|e| {
            let want = run_case(&e[0].1, &c);
            for (name, eng) in &e[1..] {
                let got = run_case(eng, &c);
                prop_assert_eq!(&got, &want, "{} differs from the interpreter", name);
            }
            Ok(())
        })?;
    }
}

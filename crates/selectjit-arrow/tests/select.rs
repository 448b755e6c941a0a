//! `zip` equal to arrow-rs's `zip`, `if_else` and `case_when` equal to a row-by-row oracle
//! (arrow's `interleave` taking each row from the input the rule picks), over every supported
//! type, offsets 0..63, lengths up to 10^5, densities and null rates 0-100 %, arrays and
//! scalars (null ones included) in every combination; errors as arrow-rs's.

mod common;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Datum, Int32Array, Int64Array, Scalar, StringArray,
};
use arrow_schema::{ArrowError, DataType};
use common::{Input, Rng, array, input, mask, rows, true_at, types};
use selectjit_arrow::{CmpOp, When, case_when, if_else, zip};

const DENSITY: [usize; 7] = [0, 1, 10, 50, 90, 99, 100];
const NULLS: [usize; 5] = [0, 0, 10, 50, 100];

fn length(r: &Rng) -> usize {
    match r.below(40) {
        0 => 100_000 - r.below(100),
        1..=4 => 4096 + r.below(5000),
        5..=14 => 64 * r.below(4) + r.below(3),
        _ => r.below(300),
    }
}

/// What the fast paths promise beyond equality: no validity buffer without nulls; values
/// 64-byte aligned, but where they are one of the `sources`' own (shared, not copied).
fn check_layout(out: &ArrayRef, what: &str, sources: &[ArrayRef]) {
    let d = out.to_data();
    if common::width(out.data_type()).is_some() || out.data_type() == &DataType::Boolean {
        if out.null_count() == 0 {
            assert!(
                out.nulls().is_none(),
                "{what}: a validity buffer without nulls"
            );
        }
        if !out.is_empty() && !d.buffers()[0].is_empty() {
            let p = d.buffers()[0].as_ptr() as usize;
            let shared = sources.iter().any(|s| {
                let sd = s.to_data();
                let b = &sd.buffers()[0];
                (b.as_ptr() as usize..b.as_ptr() as usize + b.len()).contains(&p)
            });
            assert!(shared || p.is_multiple_of(64), "{what}: values not aligned");
        }
    }
}

#[test]
fn zip_and_if_else_equal_arrow_and_the_oracle() {
    let r = Rng::new(1);
    let mut cases = 0;
    for dt in types() {
        for _ in 0..120 {
            let len = length(&r);
            let m = mask(&r, len, r.pick(&DENSITY), r.pick(&NULLS));
            let t = input(&r, &dt, len, r.pick(&NULLS));
            let f = input(&r, &dt, len, r.pick(&NULLS));
            let what = format!(
                "{dt} len {len} scalars {}/{} mask nulls {}",
                t.is_scalar(),
                f.is_scalar(),
                m.null_count()
            );
            let want = arrow_select::zip::zip(&m, t.datum(), f.datum()).expect("arrow zip");
            let got = zip(&m, t.datum(), f.datum()).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got.as_ref(), want.as_ref(), "zip {what}");
            check_layout(&got, &what, &[t.source(), f.source()]);
            // The oracle: row by row.
            let (ts, fs) = (t.source(), f.source());
            let pick = |i: usize, null_cond_is_null: bool| {
                if null_cond_is_null && m.is_null(i) {
                    None
                } else if true_at(&m, i) {
                    Some((0, t.row(i)))
                } else {
                    Some((1, f.row(i)))
                }
            };
            let z: Vec<_> = (0..len).map(|i| pick(i, false)).collect();
            assert_eq!(
                rows(&dt, &[ts.clone(), fs.clone()], &z).as_ref(),
                got.as_ref(),
                "zip oracle {what}"
            );
            let e: Vec<_> = (0..len).map(|i| pick(i, true)).collect();
            let want = rows(&dt, &[ts, fs], &e);
            let got = if_else(&m, t.datum(), f.datum()).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got.as_ref(), want.as_ref(), "if_else {what}");
            assert_eq!(got.data_type(), &dt);
            check_layout(&got, &what, &[t.source(), f.source()]);
            cases += 1;
        }
    }
    assert!(cases > 3000);
}

/// Where an output's values are exactly one array's (every row from it, or an array against a
/// null scalar), the array's buffer is shared, not copied, sliced arrays included; the result
/// equals arrow's.
#[test]
fn values_taken_whole_share_the_arrays_buffer() {
    let a = Int64Array::from_iter((0..1000).map(|i| (i % 7 != 0).then_some(i * 3)));
    let b = Int64Array::from_iter_values(0..1000);
    let null = Scalar::new(Int64Array::new_null(1));
    let all_true = BooleanArray::from(vec![true; 1000]);
    let mixed = BooleanArray::from_iter((0..1000).map(|i| Some(i % 3 == 0)));
    let (a3, b3) = (a.slice(3, 900), b.slice(3, 900));
    let (all_true3, mixed3) = (all_true.slice(3, 900), mixed.slice(3, 900));
    let cases: [(&str, &BooleanArray, &dyn Datum, &dyn Datum, &Int64Array); 6] = [
        ("all true, array vs array", &all_true, &a, &b, &a),
        ("all true, array vs null", &all_true, &a, &null, &a),
        ("mixed, array vs null", &mixed, &a, &null, &a),
        (
            "sliced, all true, array vs array",
            &all_true3,
            &a3,
            &b3,
            &a3,
        ),
        (
            "sliced, all true, array vs null",
            &all_true3,
            &a3,
            &null,
            &a3,
        ),
        ("sliced, mixed, array vs null", &mixed3, &a3, &null, &a3),
    ];
    for (what, m, t, f, source) in cases {
        let got = zip(m, t, f).expect("zip");
        let want = arrow_select::zip::zip(m, t, f).expect("arrow zip");
        assert_eq!(got.as_ref(), want.as_ref(), "{what}");
        let values = got.to_data().buffers()[0].as_ptr();
        assert_eq!(
            values,
            source.values().inner().as_ptr(),
            "{what}: not shared"
        );
    }
}

/// The predicate of a `When::Cmp` as arrow's comparison kernels compute it.
fn arrow_cmp(op: CmpOp, l: &dyn Datum, r: &dyn Datum) -> BooleanArray {
    use arrow_ord::cmp;
    match op {
        CmpOp::Eq => cmp::eq(l, r),
        CmpOp::Ne => cmp::neq(l, r),
        CmpOp::Lt => cmp::lt(l, r),
        CmpOp::Le => cmp::lt_eq(l, r),
        CmpOp::Gt => cmp::gt(l, r),
        CmpOp::Ge => cmp::gt_eq(l, r),
    }
    .expect("arrow cmp")
}

const OPS: [CmpOp; 6] = [
    CmpOp::Eq,
    CmpOp::Ne,
    CmpOp::Lt,
    CmpOp::Le,
    CmpOp::Gt,
    CmpOp::Ge,
];

/// Types a `When::Cmp` compares: in the kernels, and through arrow's (decimals, strings).
fn cmp_types() -> Vec<DataType> {
    types()
        .into_iter()
        .filter(|t| {
            !matches!(
                t,
                DataType::Interval(_)
                    | DataType::FixedSizeBinary(_)
                    | DataType::Boolean
                    | DataType::Binary
            )
        })
        .collect()
}

/// A column for comparisons: few distinct values (so that equal ones occur), floats with NaNs,
/// signed zeros and infinities.
fn cmp_input(r: &Rng, dt: &DataType, len: usize) -> Input {
    let src = array(r, dt, len.max(1), r.pick(&NULLS));
    let special: ArrayRef = match dt {
        DataType::Float64 => std::sync::Arc::new(arrow_array::Float64Array::from(vec![
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            1.5,
            -1.5,
        ])),
        DataType::Float32 => std::sync::Arc::new(arrow_array::Float32Array::from(vec![
            0.0,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::NEG_INFINITY,
            1.5,
        ])),
        _ => src.slice(0, src.len().min(4)),
    };
    let (n, sn) = (len, special.len());
    let idx: Vec<(usize, usize)> = (0..n)
        .map(|i| {
            if src.is_null(i) {
                (0, i)
            } else {
                (1, r.below(sn))
            }
        })
        .collect();
    let col = arrow_select::interleave::interleave(&[src.as_ref(), special.as_ref()], &idx)
        .expect("interleave");
    if r.below(4) == 0 {
        let one = arrow_select::interleave::interleave(
            &[col.as_ref(), special.as_ref()],
            &[(1, r.below(sn))],
        )
        .expect("interleave");
        let s = if r.below(4) == 0 {
            arrow_array::new_null_array(dt, 1)
        } else {
            one
        };
        Input::Scalar(Scalar::new(s))
    } else {
        Input::Array(col)
    }
}

#[test]
fn cmp_conditions_equal_arrows_comparisons() {
    let r = Rng::new(2);
    let yes = Int32Array::new_scalar(1);
    let no = Int32Array::new_scalar(0);
    for dt in cmp_types() {
        for _ in 0..60 {
            let len = length(&r) % 5000;
            let op = r.pick(&OPS);
            let l = cmp_input(&r, &dt, len);
            let rt = cmp_input(&r, &dt, len);
            if l.is_scalar() && rt.is_scalar() {
                continue;
            }
            let p = arrow_cmp(op, l.datum(), rt.datum());
            let want: Int32Array = (0..len).map(|i| Some(true_at(&p, i) as i32)).collect();
            let got = case_when(&[When::Cmp(op, l.datum(), rt.datum())], &[&yes], Some(&no))
                .unwrap_or_else(|e| panic!("{dt} {op:?}: {e}"));
            assert_eq!(got.as_ref(), &want as &dyn Array, "{dt} {op:?} len {len}");
        }
    }
}

#[test]
fn case_when_equals_the_oracle() {
    let r = Rng::new(3);
    for dt in types() {
        for _ in 0..40 {
            let len = length(&r) % 20_000;
            let k = r.below(5);
            let mut masks = Vec::new();
            let mut cmps = Vec::new();
            for _ in 0..k {
                masks.push(mask(&r, len, r.pick(&DENSITY), r.pick(&NULLS)));
                let c = array(&r, &DataType::Int64, len, r.pick(&NULLS));
                cmps.push((r.pick(&OPS), c, Int64Array::new_scalar(r.next() as i64)));
            }
            let kinds: Vec<bool> = (0..k).map(|_| r.below(3) == 0).collect();
            let values: Vec<Input> = (0..k)
                .map(|_| input(&r, &dt, len, r.pick(&NULLS)))
                .collect();
            let default = (r.below(4) != 0).then(|| input(&r, &dt, len, r.pick(&NULLS)));
            let conds: Vec<When<'_>> = (0..k)
                .map(|i| match kinds[i] {
                    true => When::Cmp(cmps[i].0, &cmps[i].1, &cmps[i].2),
                    false => When::Mask(&masks[i]),
                })
                .collect();
            let preds: Vec<BooleanArray> = (0..k)
                .map(|i| match kinds[i] {
                    true => arrow_cmp(cmps[i].0, &cmps[i].1, &cmps[i].2),
                    false => masks[i].clone(),
                })
                .collect();
            let mut sources: Vec<ArrayRef> = values.iter().map(Input::source).collect();
            sources.extend(default.iter().map(Input::source));
            let picks: Vec<_> = (0..len)
                .map(|j| match (0..k).find(|&i| true_at(&preds[i], j)) {
                    Some(i) => Some((i, values[i].row(j))),
                    None => default.as_ref().map(|d| (k, d.row(j))),
                })
                .collect();
            let all_scalar = values.iter().chain(default.as_ref()).all(Input::is_scalar);
            if k == 0 && (all_scalar || default.is_none()) {
                // Without conditions nor arrays the length is 1, or there is no type.
                continue;
            }
            let want = rows(&dt, &sources, &picks);
            let vals: Vec<&dyn Datum> = values.iter().map(Input::datum).collect();
            let got = case_when(&conds, &vals, default.as_ref().map(Input::datum))
                .unwrap_or_else(|e| panic!("{dt} k {k} len {len}: {e}"));
            let what = format!(
                "{dt} k {k} len {len} kinds {kinds:?} scalars {:?} default {:?}",
                values.iter().map(Input::is_scalar).collect::<Vec<_>>(),
                default.as_ref().map(Input::is_scalar)
            );
            assert_eq!(got.as_ref(), want.as_ref(), "{what}");
            check_layout(&got, &what, &sources);
        }
    }
}

/// Comparisons of integers and temporal types without nulls, values and a default without
/// nulls: the select compares row by row (`Cond::cmp`, no bitmap); the same rows as arrow's
/// comparisons pick, for every value type (wide ones broadcast the condition along a row).
#[test]
fn direct_cmp_conditions_equal_the_oracle() {
    let r = Rng::new(4);
    let int_types: Vec<DataType> = cmp_types()
        .into_iter()
        .filter(|t| {
            t.is_integer()
                || matches!(
                    t,
                    DataType::Date32
                        | DataType::Date64
                        | DataType::Time32(_)
                        | DataType::Time64(_)
                        | DataType::Timestamp(_, _)
                        | DataType::Duration(_)
                )
        })
        .collect();
    assert!(int_types.len() >= 8, "{int_types:?}");
    for dt in types() {
        for _ in 0..12 {
            let len = 1 + length(&r) % 20_000;
            let k = 1 + r.below(3);
            // Few distinct values, so that equal rows occur: a column and a permutation of it
            // (or one of its values as a scalar).
            let ops: Vec<(CmpOp, ArrayRef, Input)> = (0..k)
                .map(|_| {
                    let ct = r.pick(&int_types);
                    let base = array(&r, &ct, 5, 0);
                    let idx = |n: usize| {
                        arrow_array::UInt32Array::from_iter_values(
                            (0..n).map(|_| r.below(5) as u32),
                        )
                    };
                    let l = arrow_select::take::take(base.as_ref(), &idx(len), None).expect("take");
                    let rhs = if r.below(3) == 0 {
                        Input::Scalar(Scalar::new(
                            arrow_select::take::take(base.as_ref(), &idx(1), None).expect("take"),
                        ))
                    } else {
                        Input::Array(
                            arrow_select::take::take(base.as_ref(), &idx(len), None).expect("take"),
                        )
                    };
                    (r.pick(&OPS), l, rhs)
                })
                .collect();
            let values: Vec<Input> = (0..k).map(|_| input(&r, &dt, len, 0)).collect();
            let default = input(&r, &dt, len, 0);
            let conds: Vec<When<'_>> = ops
                .iter()
                .map(|(op, l, rhs)| When::Cmp(*op, l, rhs.datum()))
                .collect();
            let preds: Vec<BooleanArray> = ops
                .iter()
                .map(|(op, l, rhs)| arrow_cmp(*op, l, rhs.datum()))
                .collect();
            let mut sources: Vec<ArrayRef> = values.iter().map(Input::source).collect();
            sources.push(default.source());
            let picks: Vec<_> = (0..len)
                .map(|j| match (0..k).find(|&i| true_at(&preds[i], j)) {
                    Some(i) => Some((i, values[i].row(j))),
                    None => Some((k, default.row(j))),
                })
                .collect();
            let want = rows(&dt, &sources, &picks);
            let vals: Vec<&dyn Datum> = values.iter().map(Input::datum).collect();
            let got = case_when(&conds, &vals, Some(default.datum()))
                .unwrap_or_else(|e| panic!("{dt} k {k} len {len}: {e}"));
            let what = format!("{dt} k {k} len {len}");
            assert_eq!(got.as_ref(), want.as_ref(), "{what}");
            check_layout(&got, &what, &sources);
        }
    }
}

/// A scalar of two elements: `Scalar::new` refuses it, a `Datum` need not.
#[derive(Debug)]
struct TwoElementScalar(ArrayRef);

impl Datum for TwoElementScalar {
    fn get(&self) -> (&dyn Array, bool) {
        (self.0.as_ref(), true)
    }
}

fn kind(e: &ArrowError) -> String {
    format!("{e}")
}

#[test]
fn errors_are_arrows_and_nothing_panics() {
    let m = BooleanArray::from(vec![true, false, true]);
    let a3 = Int32Array::from(vec![1, 2, 3]);
    let a2 = Int32Array::from(vec![1, 2]);
    let l3 = Int64Array::from(vec![1, 2, 3]);
    let s = Int32Array::new_scalar(7);
    let ls = Int64Array::new_scalar(7);
    let two = TwoElementScalar(std::sync::Arc::new(Int32Array::from(vec![1, 2])));
    let str3 = StringArray::from(vec!["a", "b", "c"]);
    let str2 = StringArray::from(vec!["a", "b"]);
    let cases: Vec<(&dyn Datum, &dyn Datum)> = vec![
        (&a3, &a2),
        (&a2, &a3),
        (&a2, &s),
        (&s, &a2),
        (&a3, &l3),
        (&s, &ls),
        (&a3, &ls),
        (&str3, &str2),
        (&str3, &a3),
        (&s, &str3),
        (&two, &a3),
        (&a3, &two),
        (&two, &s),
        (&s, &two),
    ];
    for (i, (t, f)) in cases.iter().enumerate() {
        let want = arrow_select::zip::zip(&m, *t, *f).expect_err("arrow refuses");
        let got = zip(&m, *t, *f).expect_err("refused");
        assert_eq!(kind(&got), kind(&want), "case {i}");
        let got = if_else(&m, *t, *f).expect_err("refused");
        assert_eq!(kind(&got), kind(&want), "case {i}");
    }
    // case_when: counts, types, lengths.
    let e = case_when(&[When::Mask(&m)], &[], None).expect_err("one value short");
    assert!(matches!(e, ArrowError::InvalidArgumentError(_)), "{e}");
    let e = case_when(&[When::Mask(&m)], &[&a3], Some(&l3)).expect_err("types");
    assert_eq!(
        kind(&e),
        "Invalid argument error: arguments need to have the same data type"
    );
    let e = case_when(&[When::Mask(&m)], &[&a2], None).expect_err("lengths");
    assert_eq!(
        kind(&e),
        "Invalid argument error: all arrays should have the same length"
    );
    let m2 = BooleanArray::from(vec![true, false]);
    let e =
        case_when(&[When::Mask(&m), When::Mask(&m2)], &[&a3, &s], None).expect_err("mask length");
    assert_eq!(
        kind(&e),
        "Invalid argument error: all arrays should have the same length"
    );
    let e = case_when(&[When::Cmp(CmpOp::Lt, &a3, &ls)], &[&s], None).expect_err("cmp types");
    assert!(matches!(e, ArrowError::InvalidArgumentError(_)), "{e}");
    let e = case_when(&[When::Cmp(CmpOp::Lt, &a2, &s)], &[&a3], None).expect_err("cmp length");
    assert!(matches!(e, ArrowError::InvalidArgumentError(_)), "{e}");
    let e = case_when(&[], &[], None).expect_err("nothing");
    assert!(matches!(e, ArrowError::InvalidArgumentError(_)), "{e}");
}

//! `zip` alone in a loop, for a profiler: `zip_loop [CASE] [ROWS] [ITERS] [arrow]` (`arrow`:
//! arrow-select's `zip` instead), with CASE one of
//! `aa` (array vs array, 10 % nulls each), `as` (array vs scalar), `ns` (null scalar vs
//! scalar); f64, mask 50 % true. `cw`: `CASE WHEN x < 0 THEN a WHEN x > 2^62 THEN b ELSE 1.5
//! END` with x an Int64 column, a and b f64, nothing null.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Datum, Float64Array, Int64Array, Scalar, new_null_array,
};
use arrow_schema::DataType;
use selectjit_arrow::{CmpOp, When, case_when};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let case = args.first().map_or("aa", String::as_str);
    let n: usize = args.get(1).map_or(1 << 20, |s| s.parse().expect("rows"));
    let iters: usize = args.get(2).map_or(2000, |s| s.parse().expect("iters"));
    let mut s = 42u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mask: BooleanArray = (0..n).map(|_| Some(next() % 2 == 0)).collect();
    let mut arr = || -> ArrayRef {
        Arc::new(Float64Array::from_iter(
            (0..n).map(|_| (next() % 10 != 0).then(|| next() as f64)),
        ))
    };
    let (a, b) = (arr(), arr());
    let sc = Scalar::new(Arc::new(Float64Array::from(vec![1.5])) as ArrayRef);
    let null = Scalar::new(new_null_array(&DataType::Float64, 1));
    let (t, f): (&dyn Datum, &dyn Datum) = match case {
        "as" => (&a, &sc),
        "ns" => (&null, &sc),
        _ => (&a, &b),
    };
    if case == "cw" {
        let x = Int64Array::from_iter_values((0..n).map(|_| next() as i64));
        let (a, b) = (
            Float64Array::from_iter_values((0..n).map(|_| next() as f64)),
            Float64Array::from_iter_values((0..n).map(|_| next() as f64)),
        );
        let (zero, big) = (Int64Array::new_scalar(0), Int64Array::new_scalar(1 << 62));
        let conds = [
            When::Cmp(CmpOp::Lt, &x, &zero),
            When::Cmp(CmpOp::Gt, &x, &big),
        ];
        let start = std::time::Instant::now();
        for _ in 0..iters {
            std::hint::black_box(case_when(&conds, &[&a, &b], Some(&sc)).expect("case_when"));
        }
        println!(
            "{:.2} us/call",
            start.elapsed().as_secs_f64() * 1e6 / iters as f64
        );
        return;
    }
    let arrow = args.get(3).is_some_and(|a| a == "arrow");
    let start = std::time::Instant::now();
    for _ in 0..iters {
        if arrow {
            std::hint::black_box(arrow_select::zip::zip(&mask, t, f).expect("zip"));
        } else {
            std::hint::black_box(selectjit_arrow::zip(&mask, t, f).expect("zip"));
        }
    }
    println!(
        "{:.2} us/call",
        start.elapsed().as_secs_f64() * 1e6 / iters as f64
    );
}

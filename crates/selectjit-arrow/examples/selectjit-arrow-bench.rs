//! `selectjit_arrow::zip` against arrow-select's `zip` on arrow-rs's own `zip_kernels` cases:
//! masks all true, 99/90/50/10/1 % true, all false, 50 % null; array vs array (10 % nulls),
//! array vs scalar, scalar vs array, scalar vs scalar, null scalars; i32, i64, f64 and strings;
//! 8192 and 1M rows. Each case compares the two outputs first (a difference is an error), then
//! times the median of each, and the copy roofline: the fastest copy (`selectjit_bench::roofline`)
//! of half the case's traffic (the inputs' values and validity read, the mask's bits, the
//! output's values and validity written), timed in the same rounds as the two selects (each
//! round runs selectjit, arrow, one copy), so that it finds the caches as they do: at 1M rows
//! every one of them starts from memory the other two pushed out of the last-level cache.
//! `roofline_warm_ns` is the copy alone, back to back (its 2 x 12 MiB stay in a 32 MiB L3):
//! the definition used before 2026-11-27, for comparison.
//!
//! `selectjit-arrow-bench [--quick] [--json FILE] [--only TEXT]` (`--only`: the cases whose
//! name, row count or dtype contains TEXT)

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Datum, Float64Array, Int32Array, Int64Array, Scalar,
    StringArray, new_null_array,
};
use arrow_schema::DataType;
use selectjit_bench::roofline::{CopyBuffers, CopyKind};

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn chance(&mut self, pct: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 100.0 < pct
    }
}

const MASKS: [(&str, f64, f64); 8] = [
    ("all_true", 100.0, 0.0),
    ("99pct_true", 99.0, 0.0),
    ("90pct_true", 90.0, 0.0),
    ("50pct_true", 50.0, 0.0),
    ("10pct_true", 10.0, 0.0),
    ("1pct_true", 1.0, 0.0),
    ("all_false", 0.0, 0.0),
    ("50pct_nulls", 50.0, 50.0),
];

fn mask(r: &mut Rng, n: usize, pct: f64, null_pct: f64) -> BooleanArray {
    (0..n)
        .map(|_| (!r.chance(null_pct)).then(|| r.chance(pct)))
        .collect()
}

fn array(r: &mut Rng, dtype: &str, n: usize, null_pct: f64) -> ArrayRef {
    match dtype {
        "i32" => Arc::new(Int32Array::from_iter(
            (0..n).map(|_| (!r.chance(null_pct)).then(|| r.next() as i32)),
        )),
        "i64" => Arc::new(Int64Array::from_iter(
            (0..n).map(|_| (!r.chance(null_pct)).then(|| r.next() as i64)),
        )),
        "f64" => {
            Arc::new(Float64Array::from_iter((0..n).map(|_| {
                (!r.chance(null_pct)).then(|| (r.next() >> 11) as f64 / 7.0)
            })))
        }
        _ => Arc::new(StringArray::from_iter((0..n).map(|_| {
            (!r.chance(null_pct)).then(|| {
                let len = 4 + (r.next() % 13) as usize;
                (0..len)
                    .map(|_| (b'a' + (r.next() % 26) as u8) as char)
                    .collect::<String>()
            })
        }))),
    }
}

enum Side {
    Array,
    Scalar,
    Null,
}

const SIDES: [(&str, Side, Side); 6] = [
    ("array_vs_array", Side::Array, Side::Array),
    ("array_vs_scalar", Side::Array, Side::Scalar),
    ("scalar_vs_array", Side::Scalar, Side::Array),
    ("scalar_vs_scalar", Side::Scalar, Side::Scalar),
    ("null_scalar_vs_scalar", Side::Null, Side::Scalar),
    ("array_vs_null_scalar", Side::Array, Side::Null),
];

enum Input {
    A(ArrayRef),
    S(Scalar<ArrayRef>),
}

impl Input {
    fn datum(&self) -> &dyn Datum {
        match self {
            Input::A(a) => a,
            Input::S(s) => s,
        }
    }
    /// Bytes a select reads of it.
    fn bytes(&self) -> usize {
        match self {
            Input::A(a) => data_bytes(a.as_ref()),
            Input::S(_) => 0,
        }
    }
}

/// The bytes of an array's buffers (its slots only) and validity.
fn data_bytes(a: &dyn Array) -> usize {
    let d = a.to_data();
    let values: usize = d.buffers().iter().map(|b| b.len()).sum();
    values + d.nulls().map_or(0, |n| n.len().div_ceil(8))
}

fn input(r: &mut Rng, side: &Side, dtype: &str, n: usize) -> Input {
    match side {
        Side::Array => Input::A(array(r, dtype, n, 10.0)),
        Side::Scalar => Input::S(Scalar::new(array(r, dtype, 1, 0.0))),
        Side::Null => {
            let dt = match dtype {
                "i32" => DataType::Int32,
                "i64" => DataType::Int64,
                "f64" => DataType::Float64,
                _ => DataType::Utf8,
            };
            Input::S(Scalar::new(new_null_array(&dt, 1)))
        }
    }
}

/// Median nanoseconds of `f` over `reps` runs (after one warm-up run).
fn median_ns(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_nanos() as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// Median nanoseconds of `a`, of `b` and of the fastest copy over rounds that run `a`, `b`,
/// then one copy of `bufs` (after two warm-up rounds): the allocator, the clock and the caches
/// see all three in the same state (each run after the other two touched their own memory).
/// The copy kinds take turns, one per round, `reps` rounds each; `a` and `b` run in every
/// round (`reps` times the number of copy kinds).
fn medians_ns(
    reps: usize,
    mut a: impl FnMut(),
    mut b: impl FnMut(),
    bufs: &mut CopyBuffers,
) -> (f64, f64, f64) {
    let time = |f: &mut dyn FnMut()| {
        let s = Instant::now();
        f();
        s.elapsed().as_nanos() as f64
    };
    let kinds: Vec<CopyKind> = CopyKind::ALL
        .iter()
        .copied()
        .filter(|k| k.available())
        .collect();
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    let mut tc: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for round in 0..reps * kinds.len() + 2 {
        let x = time(&mut a);
        let y = time(&mut b);
        let k = round % kinds.len();
        let z = time(&mut || bufs.copy(kinds[k]).expect("available copy"));
        if round >= 2 {
            ta.push(x);
            tb.push(y);
            tc[k].push(z);
        }
    }
    let median = |t: &mut Vec<f64>| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let copy = tc.iter_mut().map(median).fold(f64::INFINITY, f64::min);
    (median(&mut ta), median(&mut tb), copy)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let json = args.iter().position(|a| a == "--json").map(|i| {
        args.get(i + 1)
            .cloned()
            .unwrap_or_else(|| fail("--json needs a file"))
    });
    let only = args.iter().position(|a| a == "--only").map(|i| {
        args.get(i + 1)
            .cloned()
            .unwrap_or_else(|| fail("--only needs a text"))
    });
    let takes_value = |a: &str| a == "--json" || a == "--only";
    if let Some(a) = args.iter().enumerate().find(|(i, a)| {
        *a != "--quick" && !takes_value(a) && (*i == 0 || !takes_value(&args[i - 1]))
    }) {
        fail(&format!("unknown argument {}", a.1));
    }
    let mut rows_out = Vec::new();
    println!(
        "{:<36} {:>8} {:>5} {:>12} {:>12} {:>8} {:>12} {:>9} {:>12} {:>9}",
        "case",
        "rows",
        "dtype",
        "selectjit_us",
        "arrow_us",
        "speedup",
        "roofline_us",
        "sj/roof",
        "roof_warm_us",
        "sj/warm"
    );
    let mut r = Rng(42);
    // Warm-up: the engine compiles its kernels and settles its tier choices on the first calls.
    for dtype in ["i32", "i64", "f64"] {
        for n in [8192usize, 1 << 16, 1 << 20] {
            let m = mask(&mut r, n, 50.0, 10.0);
            let (a, b) = (array(&mut r, dtype, n, 10.0), array(&mut r, dtype, n, 10.0));
            for _ in 0..(1 << 24) / n {
                std::hint::black_box(selectjit_arrow::zip(&m, &a, &b).ok());
                std::hint::black_box(arrow_select::zip::zip(&m, &a, &b).ok());
            }
        }
    }
    for n in [8192usize, 1 << 20] {
        let reps = match (n, quick) {
            (8192, false) => 101,
            (8192, true) => 21,
            (_, false) => 15,
            (_, true) => 5,
        };
        let mut copies: Vec<(usize, CopyBuffers)> = Vec::new();
        for dtype in ["i32", "i64", "f64", "utf8"] {
            for (mname, pct, null_pct) in MASKS {
                let m = mask(&mut r, n, pct, null_pct);
                for (sname, ts, fs) in &SIDES {
                    let case = format!("{mname}/{sname}");
                    if let Some(o) = &only
                        && !format!("{case} {n} {dtype}").contains(o.as_str())
                    {
                        continue;
                    }
                    let (t, f) = (input(&mut r, ts, dtype, n), input(&mut r, fs, dtype, n));
                    let ours = selectjit_arrow::zip(&m, t.datum(), f.datum())
                        .unwrap_or_else(|e| fail(&format!("{case} {dtype}: {e}")));
                    let theirs = arrow_select::zip::zip(&m, t.datum(), f.datum())
                        .unwrap_or_else(|e| fail(&format!("{case} {dtype}: arrow: {e}")));
                    if ours.as_ref() != theirs.as_ref() {
                        fail(&format!(
                            "{case} {n} {dtype}: selectjit's output differs from arrow's"
                        ));
                    }
                    let traffic =
                        t.bytes() + f.bytes() + data_bytes(&m) + data_bytes(ours.as_ref());
                    let half = traffic.div_ceil(2).max(1);
                    let bufs = match copies.iter().position(|(h, _)| *h == half) {
                        Some(i) => &mut copies[i].1,
                        None => {
                            copies.push((half, CopyBuffers::new(half)));
                            &mut copies.last_mut().expect("pushed").1
                        }
                    };
                    let (sj, ar, roof) = medians_ns(
                        reps,
                        || {
                            std::hint::black_box(
                                selectjit_arrow::zip(&m, t.datum(), f.datum()).ok(),
                            );
                        },
                        || {
                            std::hint::black_box(
                                arrow_select::zip::zip(&m, t.datum(), f.datum()).ok(),
                            );
                        },
                        bufs,
                    );
                    // The copy alone, back to back (its buffers stay in cache between runs):
                    // the roofline as measured before 2026-11-27, kept for comparison.
                    let roof_warm = CopyKind::ALL
                        .iter()
                        .filter(|k| k.available())
                        .map(|&k| median_ns(reps, || bufs.copy(k).expect("available copy")))
                        .fold(f64::INFINITY, f64::min);
                    println!(
                        "{case:<36} {n:>8} {dtype:>5} {:>12.2} {:>12.2} {:>7.1}x {:>12.2} {:>8.2}x {:>12.2} {:>8.2}x",
                        sj / 1e3,
                        ar / 1e3,
                        ar / sj,
                        roof / 1e3,
                        sj / roof,
                        roof_warm / 1e3,
                        sj / roof_warm
                    );
                    rows_out.push(serde_json::json!({
                        "case": case,
                        "rows": n,
                        "dtype": dtype,
                        "selectjit_ns": sj,
                        "arrow_ns": ar,
                        "roofline_ns": roof,
                        "roofline_warm_ns": roof_warm,
                    }));
                }
            }
        }
    }
    if let Some(path) = json {
        let doc = serde_json::json!({ "arrow_cases": rows_out });
        let text = serde_json::to_string_pretty(&doc).expect("json");
        std::fs::write(&path, text).unwrap_or_else(|e| fail(&format!("{path}: {e}")));
        println!("wrote {path}");
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("selectjit-arrow-bench: {msg}");
    std::process::exit(1)
}

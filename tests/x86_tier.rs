//! The x86 tiers through the engine, compared byte for byte with the interpreter: every element
//! width, every row shape (vector select with each then/else broadcast combination, row copy
//! and fill, strided rows), row lengths around every vector and unroll boundary, in place,
//! exact and shape-generic kernels, outer ranges split across threads. AVX2 runs natively;
//! AVX-512 natively when the host has it, else in the emulator (with a printed line).

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;
#[path = "common/skip.rs"]
mod skip;

use selectjit::Tier;
use selectjit::broadcast_shapes;
use selectjit::codegen::x86::Level;
use selectjit::contiguous_strides;
use selectjit::plan::plan;
use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, InPlace, TensorMut, TensorRef};

/// The engines of one tier: exact kernels at once, and shape-generic kernels only.
struct Tiered {
    name: String,
    tier: Tier,
    exact: Engine,
    generic: Engine,
}

fn engines_of(tier: Tier, emulate: bool, threads: usize) -> Tiered {
    // The default backend is the JIT.
    let cfg = |exact_after| {
        EngineConfig::new()
            .tier(tier)
            .exact_after(exact_after)
            .runner(emulate.then(selectjit_emu::Emulator::runner))
            .threads(threads)
            .verify(true)
            .cache_capacity(64)
            // Non-temporal stores from 64 KiB of output, so that the tests reach them.
            .nt_min_bytes(64 << 10)
    };
    let make = |exact_after| {
        Engine::with_config(cfg(exact_after)).unwrap_or_else(|e| panic!("{tier}: {e}"))
    };
    Tiered {
        name: format!("{tier}{}", if emulate { " (emulated)" } else { "" }),
        tier,
        exact: make(1),
        generic: make(u32::MAX),
    }
}

/// The x86 tiers this host can run (natively or emulated); the others are skips
/// ([`skip::skip`]: failures under `SELECTJIT_REQUIRE_ALL_TIERS=1`).
fn tiers(threads: usize) -> Vec<Tiered> {
    let mut v = Vec::new();
    if Level::Avx2.available() {
        v.push(engines_of(Tier::Avx2, false, threads));
    } else {
        skip::skip("tier avx2", "the host lacks AVX2 or BMI2");
    }
    if Level::Avx512.available() {
        v.push(engines_of(Tier::Avx512, false, threads));
    } else {
        skip::skip(
            "tier avx512 natively",
            "the host lacks AVX-512; its kernels run in the emulator",
        );
        v.push(engines_of(Tier::Avx512, true, threads));
    }
    v
}

const DTYPES: [DType; 5] = [
    DType::U8,
    DType::F16,
    DType::F32,
    DType::F64,
    DType::Complex128,
];

/// A view's layout: shape, optional element strides (negative ones walk backwards), the index
/// of the element at coordinate `[0, 0, ...]`, and the buffer length in elements.
#[derive(Clone)]
struct In {
    shape: Vec<usize>,
    strides: Option<Vec<isize>>,
    offset: usize,
    len: usize,
}

fn dense(shape: &[usize]) -> In {
    In {
        shape: shape.to_vec(),
        strides: None,
        offset: 0,
        len: shape.iter().product(),
    }
}

/// `shape` with the given element strides (any signs), in the smallest buffer that holds it.
fn strided(shape: &[usize], strides: &[isize]) -> In {
    let (mut lo, mut hi) = (0isize, 0isize);
    for (&d, &s) in shape.iter().zip(strides) {
        let span = (d.max(1) as isize - 1) * s;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    let empty = shape.contains(&0);
    In {
        shape: shape.to_vec(),
        strides: Some(strides.to_vec()),
        offset: if empty { 0 } else { (-lo) as usize },
        len: if empty { 0 } else { (hi - lo + 1) as usize },
    }
}

/// A `[rows, cols]` view of a column-major buffer (transposed: strided rows).
fn transposed(rows: usize, cols: usize) -> In {
    strided(&[rows, cols], &[1, rows as isize])
}

/// Every other element of a buffer twice as long (strided rows).
fn sliced(n: usize) -> In {
    strided(&[n], &[2])
}

/// Row-major `shape` with the dims in `rev` walked backwards (`x[::-1]` on those dims).
fn reversed(shape: &[usize], rev: &[usize]) -> In {
    let mut st = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for k in (0..shape.len()).rev() {
        st[k] = if rev.contains(&k) { -acc } else { acc };
        acc *= shape[k].max(1) as isize;
    }
    strided(shape, &st)
}

fn view<'a>(data: &'a [u8], i: &'a In) -> TensorRef<'a, u8> {
    match &i.strides {
        Some(s) => TensorRef::with_layout(data, &i.shape, s, i.offset),
        None => TensorRef::new(data, &i.shape),
    }
}

fn view_mut<'a>(data: &'a mut [u8], i: &'a In) -> TensorMut<'a, u8> {
    match &i.strides {
        Some(s) => TensorMut::with_layout(data, &i.shape, s, i.offset),
        None => TensorMut::new(data, &i.shape),
    }
}

/// One call: cond, then, else, and the output's layout (in place: then's or else's buffer
/// holds the output, with the output's layout).
struct Call {
    ins: [In; 3],
    out: In,
}

/// Runs `cond ? then : else` on `engine` into a copy of `init` (the output buffer, or in
/// place the buffer of then or else), and returns that buffer.
fn run(
    engine: &Engine,
    dt: DType,
    bufs: &[Vec<u8>; 3],
    call: &Call,
    init: &[u8],
    place: Option<InPlace>,
) -> Vec<u8> {
    let mut io = init.to_vec();
    let c = view(&bufs[0], &call.ins[0]);
    let r = match place {
        None => engine.select_bytes(
            dt,
            c,
            view(&bufs[1], &call.ins[1]),
            view(&bufs[2], &call.ins[2]),
            view_mut(&mut io, &call.out),
            Broadcast::Numpy,
        ),
        Some(role) => {
            let other = match role {
                InPlace::Then => 2,
                InPlace::Else => 1,
            };
            engine.select_in_place_bytes(
                dt,
                c,
                view_mut(&mut io, &call.out),
                role,
                view(&bufs[other], &call.ins[other]),
                Broadcast::Numpy,
            )
        }
    };
    r.unwrap_or_else(|e| panic!("{dt} {:?}: {e}", call.out.shape));
    io
}

/// Checks one call on every tier (exact and generic) against the interpreter, own output and
/// in place (where then or else has the output's shape), and that the tier compiled it.
fn check(tiers: &[Tiered], interp: &Engine, dt: DType, ins: [In; 3], out: Option<In>, seed: u64) {
    let w = dt.width();
    let mut rng = Rng(seed);
    let bufs = [
        rng.cond(
            ins[0].len,
            seed / 7,
            &[0, 1, 0x80, 0, 0xff, 0, 3],
            &[1, 0x80, 0xff, 3],
        ),
        rng.bytes(ins[1].len * w),
        rng.bytes(ins[2].len * w),
    ];
    let b = broadcast_shapes(
        Broadcast::Numpy,
        &ins[0].shape,
        &ins[1].shape,
        &ins[2].shape,
    )
    .unwrap();
    let out_shape = b.out.to_vec();
    let out = out.unwrap_or_else(|| dense(&out_shape));
    assert_eq!(out.shape, out_shape);
    let init = rng.bytes(out.len * w);
    let mut places = vec![None];
    for (role, k) in [(InPlace::Then, 1), (InPlace::Else, 2)] {
        if ins[k].shape == out_shape {
            places.push(Some(role));
        }
    }
    let st = |x: &In, p: selectjit::Placement| {
        let s = x
            .strides
            .clone()
            .unwrap_or_else(|| contiguous_strides(&x.shape).to_vec());
        p.strides_over(&x.shape, &s, &b.out)
    };
    let so = out
        .strides
        .clone()
        .unwrap_or_else(|| contiguous_strides(&out_shape).to_vec());
    let sig = plan(
        w,
        &out_shape,
        [
            &st(&ins[0], b.cond),
            &st(&ins[1], b.then),
            &st(&ins[2], b.else_),
            &so,
        ],
    );
    let call = Call { ins, out };
    for place in places {
        let want = run(interp, dt, &bufs, &call, &init, place);
        for t in tiers {
            for (kind, e) in [("exact", &t.exact), ("generic", &t.generic)] {
                let got = run(e, dt, &bufs, &call, &init, place);
                if got != want {
                    let at = got.iter().zip(&want).position(|(a, b)| a != b);
                    panic!(
                        "{} {kind} {dt} cond {:?} then {:?} else {:?} out {:?} {place:?}: \
                         output differs from the interpreter at byte {at:?} (signature {:?})",
                        t.name,
                        call.ins[0].strides,
                        call.ins[1].strides,
                        call.ins[2].strides,
                        call.out.strides,
                        sig.as_ref().map(|s| s.to_string())
                    );
                }
                assert!(e.last_codegen_error().is_none(), "{}", t.name);
                if let Some(s) = &sig {
                    let k = e.kernel(s).expect("a kernel");
                    assert_eq!(k.tier(), t.tier, "{} {kind}: {s} fell back", t.name);
                }
            }
        }
    }
}

/// Every row shape at one row length `n`.
fn layouts(n: usize) -> Vec<[In; 3]> {
    let d = dense;
    vec![
        // Vector rows, each then/else broadcast combination.
        [d(&[n]), d(&[n]), d(&[n])],
        [d(&[n]), d(&[]), d(&[n])],
        [d(&[n]), d(&[n]), d(&[])],
        [d(&[n]), d(&[]), d(&[])],
        // Vector rows with a splat that changes per row; a reused cond row.
        [d(&[n]), d(&[3, n]), d(&[3, 1])],
        [d(&[n]), d(&[3, 1]), d(&[3, n])],
        // Row copies and fills (cond constant along the row).
        [d(&[3, 1]), d(&[3, n]), d(&[n])],
        [d(&[3, 1]), d(&[]), d(&[3, n])],
        [d(&[3, 1]), d(&[3, 1]), d(&[1])],
        // Strided rows.
        [d(&[3, n]), transposed(3, n), d(&[3, n])],
        [sliced(n), d(&[n]), sliced(n)],
        // Negative strides: reversed rows (strided), reversed outer dims (vector rows and row
        // copies walking backwards), a reversed broadcast cond.
        [reversed(&[n], &[0]), d(&[n]), reversed(&[n], &[0])],
        [d(&[3, n]), reversed(&[3, n], &[0]), reversed(&[3, n], &[0])],
        [reversed(&[3, 1], &[0]), reversed(&[3, n], &[0]), d(&[n])],
        [strided(&[3, n], &[-1, 3]), d(&[]), d(&[3, n])],
    ]
}

/// Layouts with a reversed or strided output (the planner flips the output's negative strides,
/// and with them every input's).
fn output_layouts(n: usize) -> Vec<([In; 3], In)> {
    let d = dense;
    vec![
        // Fully reversed output: every input walks backwards along the row.
        ([d(&[n]), d(&[n]), d(&[n])], reversed(&[n], &[0])),
        // Rows in reverse order, each forward: vector rows with negative outer strides.
        ([d(&[4, n]), d(&[4, n]), d(&[])], reversed(&[4, n], &[0])),
        ([d(&[4, 1]), d(&[4, n]), d(&[n])], reversed(&[4, n], &[0])),
        // A column-major output.
        (
            [d(&[3, n]), d(&[3, n]), d(&[3, 1])],
            strided(&[3, n], &[1, 3]),
        ),
    ]
}

/// Row lengths around every vector and unroll boundary of both tiers.
fn lengths() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=300).collect();
    v.extend([511, 512, 513, 1023, 1024, 1025, 4099, 70_000]);
    v
}

#[test]
fn every_width_row_shape_and_length_matches_the_interpreter() {
    let tiers = tiers(1);
    if tiers.is_empty() {
        return;
    }
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let mut seed = 1;
    for dt in DTYPES {
        for n in lengths() {
            for l in layouts(n) {
                check(&tiers, &interp, dt, l, None, seed);
                seed += 1;
            }
        }
    }
}

#[test]
fn reversed_and_strided_outputs() {
    let tiers = tiers(1);
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let mut seed = 30_000;
    for dt in DTYPES {
        for n in (1..=70).chain([127, 128, 129, 255, 256, 257, 1000]) {
            for (ins, out) in output_layouts(n) {
                check(&tiers, &interp, dt, ins, Some(out), seed);
                seed += 1;
            }
        }
    }
}

/// Outputs of at least a MiB are split over threads (outer ranges run separately), and long
/// rows reach the non-temporal stores.
#[test]
fn split_outer_ranges_and_long_rows() {
    let tiers = tiers(2);
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let mut seed = 10_000;
    for dt in DTYPES {
        let n = (1 << 20) / dt.width() / 3 + 37;
        for l in [
            [dense(&[3, n]), dense(&[3, n]), dense(&[3, n])],
            [dense(&[n]), dense(&[3, n]), dense(&[])],
            [dense(&[3, 1]), dense(&[3, n]), dense(&[n])],
            [dense(&[5, 1, 1]), dense(&[5, 4, n / 4]), dense(&[])],
            [dense(&[7, 1]), dense(&[7, n / 2]), dense(&[7, 1])],
        ] {
            check(&tiers, &interp, dt, l, None, seed);
            seed += 1;
        }
    }
}

/// Higher ranks (loops kept in the stack frame) and broadcast patterns in the middle.
#[test]
fn higher_ranks() {
    let tiers = tiers(1);
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let d = dense;
    let mut seed = 20_000;
    for dt in DTYPES {
        for l in [
            [
                d(&[2, 1, 3, 1, 5]),
                d(&[2, 3, 1, 4, 5]),
                d(&[1, 3, 1, 4, 1]),
            ],
            [d(&[2, 3, 4, 33]), d(&[1, 3, 1, 33]), d(&[2, 1, 4, 1])],
            [d(&[1, 1, 4, 70]), d(&[2, 3, 4, 70]), d(&[])],
            [
                d(&[2, 1, 2, 1, 2, 1]),
                d(&[2, 2, 2, 2, 2, 9]),
                d(&[1, 2, 1, 2, 1, 9]),
            ],
        ] {
            check(&tiers, &interp, dt, l, None, seed);
            seed += 1;
        }
    }
}

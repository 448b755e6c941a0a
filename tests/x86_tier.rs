//! The x86 tiers through the engine, compared byte for byte with the interpreter: every element
//! width, every row shape (vector select with each then/else broadcast combination, row copy
//! and fill, strided rows), row lengths around every vector and unroll boundary, in place,
//! exact and shape-generic kernels, outer ranges split across threads. AVX2 runs natively;
//! AVX-512 natively when the host has it, else in the emulator when it is built. A tier that
//! can run neither way is skipped with a printed line.

use selectjit::jit::Tier;
use selectjit::jit::x86::{Level, emu};
use selectjit::plan::plan;
use selectjit::shape::{broadcast_shapes, contiguous_strides, strides_over};
use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, InPlace, TensorMut, TensorRef};

/// Whether the real emulator is built (the placeholder refuses every call).
fn emulator_available() -> bool {
    let cfg = emu::EmuConfig {
        max_steps: 10,
        avx512: true,
    };
    // SAFETY: the code is a lone `ret`; no region is given, so nothing is accessed.
    unsafe { emu::call(&[0xc3], 0, &[], &[], &cfg) }.is_ok()
}

/// The engines of one tier: exact kernels at once, and shape-generic kernels only.
struct Tiered {
    name: String,
    tier: Tier,
    exact: Engine,
    generic: Engine,
}

fn engines_of(tier: Tier, emulate: bool, threads: usize) -> Tiered {
    // The default backend is the JIT.
    let cfg = |exact_after| EngineConfig {
        tier,
        exact_after,
        emulate,
        threads,
        verify: true,
        cache_capacity: 64,
        // Non-temporal stores from 64 KiB of output, so that the tests reach them.
        nt_min_bytes: 64 << 10,
        ..EngineConfig::default()
    };
    let make = |exact_after| {
        Engine::try_with_config(cfg(exact_after)).unwrap_or_else(|e| panic!("{tier}: {e}"))
    };
    Tiered {
        name: format!("{tier}{}", if emulate { " (emulated)" } else { "" }),
        tier,
        exact: make(1),
        generic: make(u32::MAX),
    }
}

/// The x86 tiers this host can run (natively or emulated); the others are reported.
fn tiers(threads: usize) -> Vec<Tiered> {
    let mut v = Vec::new();
    if Level::Avx2.host_supports() {
        v.push(engines_of(Tier::Avx2, false, threads));
    } else {
        println!("skipped: tier avx2 (the host lacks AVX2 or BMI2)");
    }
    if Level::Avx512.host_supports() {
        v.push(engines_of(Tier::Avx512, false, threads));
    } else if emulator_available() {
        v.push(engines_of(Tier::Avx512, true, threads));
    } else {
        println!("skipped: tier avx512 (the host lacks AVX-512 and the emulator is not built)");
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

/// A deterministic byte generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = self.0;
        (x ^ (x >> 33)).wrapping_mul(0xff51afd7ed558ccd) ^ (x >> 29)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 24) as u8).collect()
    }
    /// Cond bytes (zeros and non-zero bytes of every kind): at random, in runs of one kind
    /// (so that whole vectors are uniform), all non-zero or all zero, by `mode`.
    fn cond(&mut self, n: usize, mode: u64) -> Vec<u8> {
        let vals = [0u8, 1, 0x80, 0, 0xff, 0, 3];
        let truthy = [1u8, 0x80, 0xff, 3];
        let (mut left, mut on) = (0u64, false);
        (0..n)
            .map(|_| match mode % 4 {
                0 => vals[(self.next() % vals.len() as u64) as usize],
                1 => {
                    if left == 0 {
                        left = 1 + self.next() % 300;
                        on = self.next().is_multiple_of(2);
                    }
                    left -= 1;
                    if on {
                        truthy[(self.next() % 4) as usize]
                    } else {
                        0
                    }
                }
                2 => truthy[(self.next() % 4) as usize],
                _ => 0,
            })
            .collect()
    }
}

/// One input: shape and optional element strides (over a buffer of `len` elements).
#[derive(Clone)]
struct In {
    shape: Vec<usize>,
    strides: Option<Vec<isize>>,
    len: usize,
}

fn dense(shape: &[usize]) -> In {
    In {
        shape: shape.to_vec(),
        strides: None,
        len: shape.iter().product(),
    }
}

/// A `[rows, cols]` view of a column-major buffer (transposed: strided rows).
fn transposed(rows: usize, cols: usize) -> In {
    In {
        shape: vec![rows, cols],
        strides: Some(vec![1, rows as isize]),
        len: rows * cols,
    }
}

/// Every other element of a buffer twice as long (strided rows).
fn sliced(n: usize) -> In {
    In {
        shape: vec![n],
        strides: Some(vec![2]),
        len: 2 * n,
    }
}

fn view<'a>(data: &'a [u8], i: &'a In) -> TensorRef<'a, u8> {
    match &i.strides {
        Some(s) => TensorRef::with_strides(data, &i.shape, s),
        None => TensorRef::new(data, &i.shape),
    }
}

/// Runs `cond ? then : else` on `engine`, in place when `place` says so (then or else must
/// then be dense with the output's shape).
fn run(
    engine: &Engine,
    dt: DType,
    bufs: &[Vec<u8>; 3],
    ins: &[In; 3],
    out_shape: &[usize],
    place: Option<InPlace>,
) -> Vec<u8> {
    let w = dt.width();
    let n: usize = out_shape.iter().product();
    let c = view(&bufs[0], &ins[0]);
    match place {
        None => {
            let mut out = vec![0x5au8; n * w];
            engine
                .select_dyn(
                    dt,
                    c,
                    view(&bufs[1], &ins[1]),
                    view(&bufs[2], &ins[2]),
                    TensorMut::new(&mut out, out_shape),
                    Broadcast::Numpy,
                )
                .unwrap();
            out
        }
        Some(role) => {
            let (mine, other) = match role {
                InPlace::Then => (1, 2),
                InPlace::Else => (2, 1),
            };
            let mut io = bufs[mine].clone();
            engine
                .select_in_place_dyn(
                    dt,
                    c,
                    TensorMut::new(&mut io, out_shape),
                    role,
                    view(&bufs[other], &ins[other]),
                    Broadcast::Numpy,
                )
                .unwrap();
            io
        }
    }
}

/// Checks one call on every tier (exact and generic) against the interpreter, and that the
/// tier compiled it.
fn check(tiers: &[Tiered], interp: &Engine, dt: DType, ins: [In; 3], seed: u64) {
    let w = dt.width();
    let mut rng = Rng(seed);
    let bufs = [
        rng.cond(ins[0].len, seed / 7),
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
    let mut places = vec![None];
    for (role, k) in [(InPlace::Then, 1), (InPlace::Else, 2)] {
        if ins[k].strides.is_none() && ins[k].shape == out_shape {
            places.push(Some(role));
        }
    }
    let st = |k: usize| {
        let s = ins[k]
            .strides
            .clone()
            .unwrap_or_else(|| contiguous_strides(&ins[k].shape).to_vec());
        let p = [b.cond, b.then, b.else_][k];
        strides_over(&ins[k].shape, &s, p, &b.out)
    };
    let sig = plan(
        w,
        &out_shape,
        [&st(0), &st(1), &st(2), &contiguous_strides(&out_shape)],
    );
    for place in places {
        let want = run(interp, dt, &bufs, &ins, &out_shape, place);
        for t in tiers {
            for (kind, e) in [("exact", &t.exact), ("generic", &t.generic)] {
                let got = run(e, dt, &bufs, &ins, &out_shape, place);
                if got != want {
                    let at = got.iter().zip(&want).position(|(a, b)| a != b);
                    panic!(
                        "{} {kind} {dt} cond {:?} then {:?} else {:?} {place:?}: output \
                         differs from the interpreter at byte {at:?} (signature {:?})",
                        t.name,
                        ins[0].shape,
                        ins[1].shape,
                        ins[2].shape,
                        sig.as_ref().map(|s| s.to_string())
                    );
                }
                assert_eq!(e.last_codegen_error(), None, "{}", t.name);
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
    let interp = Engine::with_backend(Backend::Interp);
    let mut seed = 1;
    for dt in DTYPES {
        for n in lengths() {
            for l in layouts(n) {
                check(&tiers, &interp, dt, l, seed);
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
    let interp = Engine::with_backend(Backend::Interp);
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
            check(&tiers, &interp, dt, l, seed);
            seed += 1;
        }
    }
}

/// Higher ranks (loops kept in the stack frame) and broadcast patterns in the middle.
#[test]
fn higher_ranks() {
    let tiers = tiers(1);
    let interp = Engine::with_backend(Backend::Interp);
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
            check(&tiers, &interp, dt, l, seed);
            seed += 1;
        }
    }
}

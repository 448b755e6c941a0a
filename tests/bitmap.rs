//! Bitmap conditions (Arrow's bit-packed booleans, at any bit offset, with validity) on every
//! engine, byte for byte against an element-by-element oracle written here: flat calls (which
//! the engine expands a block at a time), broadcast and strided ones (expanded whole), in
//! place, negated, every broadcast mode, n-way selects; and their errors, nothing written.

mod common;
#[path = "common/rng.rs"]
mod rng;

use rng::Rng;
use selectjit::bits::Bitmap;
use selectjit::{
    Broadcast, Choice, Cond, DType, Engine, EngineConfig, InPlace, TensorMut, TensorRef,
};

fn bit(b: &[u8], i: usize) -> bool {
    (b[i / 8] >> (i % 8)) & 1 == 1
}

/// One operand side: `n` elements, one element (a scalar), or the output itself.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Side {
    Full,
    Scalar,
    InPlace,
}

#[derive(Debug)]
struct Case {
    dtype: DType,
    n: usize,
    offset: usize,
    bits: Vec<u8>,
    valid: Option<(usize, Vec<u8>)>,
    not: bool,
    sides: [Side; 2],
    then: Vec<u8>,
    else_: Vec<u8>,
    out0: Vec<u8>,
}

const DTYPES: [DType; 8] = [
    DType::U8,
    DType::I16,
    DType::F16,
    DType::F32,
    DType::I32,
    DType::F64,
    DType::U64,
    DType::Complex128,
];

fn gen_case(seed: u64) -> Case {
    let mut r = Rng(seed);
    let dtype = DTYPES[r.below(DTYPES.len())];
    let w = dtype.width();
    let n = match r.below(4) {
        0 => r.below(70),
        1 => 4096 * (1 + r.below(2)) + r.below(3),
        _ => r.below(12_000),
    };
    let offset = r.below(64);
    let density = r.below(5); // all false, 25 %, 50 %, 75 %, all true
    let spare = r.below(3);
    let mut bits = r.bytes((offset + n).div_ceil(8) + spare);
    for i in 0..bits.len() * 8 {
        let v = match density {
            0 => false,
            4 => true,
            d => r.below(4) < d,
        };
        if r.below(8) != 0 {
            bits[i / 8] = (bits[i / 8] & !(1 << (i % 8))) | ((v as u8) << (i % 8));
        }
    }
    let valid = (r.below(2) == 0).then(|| {
        let o = r.below(64);
        (o, r.bytes((o + n).div_ceil(8)))
    });
    let side = |r: &mut Rng| match r.below(3) {
        0 => Side::Scalar,
        _ => Side::Full,
    };
    let mut sides = [side(&mut r), side(&mut r)];
    if r.below(4) == 0 {
        sides[r.below(2)] = Side::InPlace;
    }
    let len = |s: Side| if s == Side::Scalar { w } else { n * w };
    Case {
        dtype,
        n,
        offset,
        bits,
        valid,
        not: r.below(3) == 0,
        then: r.bytes(len(sides[0])),
        else_: r.bytes(len(sides[1])),
        out0: r.bytes(n * w),
        sides,
    }
}

/// What the select must leave in the output, element by element.
fn oracle(c: &Case) -> Vec<u8> {
    let w = c.dtype.width();
    let mut out = c.out0.clone();
    for j in 0..c.n {
        let mut t = bit(&c.bits, c.offset + j);
        if let Some((o, v)) = &c.valid {
            t &= bit(v, o + j);
        }
        t ^= c.not;
        let (src, side) = if t {
            (&c.then, c.sides[0])
        } else {
            (&c.else_, c.sides[1])
        };
        let e = match side {
            Side::Full => src[j * w..(j + 1) * w].to_vec(),
            Side::Scalar => src[..w].to_vec(),
            Side::InPlace => c.out0[j * w..(j + 1) * w].to_vec(),
        };
        out[j * w..(j + 1) * w].copy_from_slice(&e);
    }
    out
}

fn run(e: &Engine, c: &Case) -> selectjit::Result<Vec<u8>> {
    let w = c.dtype.width();
    let shape = [c.n];
    let bits = Bitmap::new(&c.bits, c.offset, c.n)?;
    let mut cond = match &c.valid {
        Some((o, v)) => Cond::bitmap_with_validity(bits, Bitmap::new(v, *o, c.n)?, &shape),
        None => Cond::bitmap(bits, &shape),
    };
    if c.not {
        cond = !cond;
    }
    let sh: &[usize] = &shape;
    let tv = |b: &[u8], s: Side| -> (Vec<u8>, Vec<usize>) {
        match s {
            Side::Scalar => (b[..w].to_vec(), vec![]),
            _ => (b.to_vec(), sh.to_vec()),
        }
    };
    let mut out = c.out0.clone();
    match c.sides {
        [Side::InPlace, s] | [s, Side::InPlace] => {
            let role = if c.sides[0] == Side::InPlace {
                InPlace::Then
            } else {
                InPlace::Else
            };
            let other = if role == InPlace::Then {
                &c.else_
            } else {
                &c.then
            };
            let (ob, os) = tv(other, s);
            e.select_in_place_bytes(
                c.dtype,
                cond,
                TensorMut::new(&mut out, &shape),
                role,
                TensorRef::new(&ob, &os),
                Broadcast::Numpy,
            )?;
        }
        [a, b] => {
            let (tb, ts) = tv(&c.then, a);
            let (eb, es) = tv(&c.else_, b);
            e.select_bytes(
                c.dtype,
                cond,
                TensorRef::new(&tb, &ts),
                TensorRef::new(&eb, &es),
                TensorMut::new(&mut out, &shape),
                Broadcast::Numpy,
            )?;
        }
    }
    Ok(out)
}

#[test]
fn flat_bitmap_selects_equal_the_oracle_on_every_engine() {
    let engines = common::all_engines(&EngineConfig::new());
    let seeds = if cfg!(debug_assertions) { 60 } else { 400 };
    let mut long = 0;
    for seed in 0..seeds {
        let c = gen_case(seed);
        long += (c.n > 4096) as usize;
        let want = oracle(&c);
        for (name, e) in &engines {
            let got = run(e, &c).unwrap_or_else(|err| panic!("{name} seed {seed}: {err}"));
            assert!(
                got == want,
                "{name}: seed {seed}, {} n {} offset {} sides {:?} not {} valid {}",
                c.dtype,
                c.n,
                c.offset,
                c.sides,
                c.not,
                c.valid.is_some()
            );
        }
    }
    assert!(
        long > seeds as usize / 5,
        "{long} calls of more than one block"
    );
}

/// A bitmap over rows broadcast along columns, a strided then, every broadcast mode that
/// admits the shapes: expanded whole, then a mask of its shape.
#[test]
fn broadcast_bitmaps_select_as_their_masks_do() {
    let engines = common::all_engines(&EngineConfig::new());
    let (rows, cols) = (37usize, 21usize);
    let mut r = Rng(7);
    let bytes = r.bytes(16);
    let then: Vec<f32> = (0..rows * cols * 2).map(|i| i as f32).collect();
    let else_ = [-1.0f32];
    for offset in [0, 5, 64] {
        let bits = Bitmap::new(&bytes, offset, rows).unwrap();
        let mut want = vec![0f32; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                want[i * cols + j] = if bit(&bytes, offset + i) {
                    then[2 * (i * cols + j)]
                } else {
                    -1.0
                };
            }
        }
        for mode in [Broadcast::Numpy, Broadcast::TwoStep] {
            for (name, e) in &engines {
                let mut out = vec![0f32; rows * cols];
                let strides = [2 * cols as isize, 2];
                e.select(
                    Cond::bitmap(bits, &[rows, 1]),
                    TensorRef::with_strides(&then, &[rows, cols], &strides),
                    TensorRef::scalar(&else_),
                    TensorMut::new(&mut out, &[rows, cols]),
                    mode,
                )
                .unwrap_or_else(|err| panic!("{name} {mode:?} offset {offset}: {err}"));
                let (g, w): (&[u8], &[u8]) =
                    (bytemuck::cast_slice(&out), bytemuck::cast_slice(&want));
                assert_eq!(g, w, "{name} {mode:?} offset {offset}");
            }
        }
    }
}

#[test]
fn bitmap_errors_name_the_condition_and_write_nothing() {
    let e = Engine::new();
    let bytes = [0xffu8; 2];
    let mut out = [7i32; 12];
    let x = [1i32; 12];
    // 10 bits for 12 elements.
    let err = e
        .select(
            Cond::bitmap(Bitmap::new(&bytes, 0, 10).unwrap(), &[12]),
            TensorRef::new(&x, &[12]),
            TensorRef::scalar(&[0]),
            TensorMut::new(&mut out, &[12]),
            Broadcast::Numpy,
        )
        .unwrap_err();
    assert!(err.to_string().contains("10 bits for shape [12]"), "{err}");
    // Validity of another length.
    let err = e
        .select(
            Cond::bitmap_with_validity(
                Bitmap::new(&bytes, 0, 12).unwrap(),
                Bitmap::new(&bytes, 0, 11).unwrap(),
                &[12],
            ),
            TensorRef::new(&x, &[12]),
            TensorRef::scalar(&[0]),
            TensorMut::new(&mut out, &[12]),
            Broadcast::Numpy,
        )
        .unwrap_err();
    assert!(err.to_string().contains("validity bits"), "{err}");
    // Shapes that do not broadcast, in a flat-looking call: the mask's error.
    let err = e
        .select(
            Cond::bitmap(Bitmap::new(&bytes, 0, 12).unwrap(), &[12]),
            TensorRef::new(&x[..11], &[11]),
            TensorRef::scalar(&[0]),
            TensorMut::new(&mut out, &[12]),
            Broadcast::Numpy,
        )
        .unwrap_err();
    assert!(matches!(err, selectjit::Error::Broadcast(_)), "{err}");
    // The bytes end before the bits: refused when the bitmap is made.
    assert!(Bitmap::new(&bytes, 9, 8).is_err());
    // Prepared calls and plans take byte masks only.
    let err = e
        .plan_select_bytes(
            DType::I32,
            Cond::bitmap(Bitmap::new(&bytes, 0, 12).unwrap(), &[12]),
            TensorRef::new(bytemuck::cast_slice(&x), &[12]),
            TensorRef::scalar(&[0u8; 4]),
            &[12],
            Broadcast::Numpy,
        )
        .unwrap_err();
    assert!(err.to_string().contains("bitmap"), "{err}");
    assert_eq!(out, [7; 12]);
}

/// `CASE WHEN` on bitmaps with validity, mixed with byte masks and predicates: the first true
/// wins, a null condition is false.
#[test]
fn nway_selects_take_bitmaps() {
    let engines = common::all_engines(&EngineConfig::new());
    let mut r = Rng(99);
    for n in [0usize, 1, 63, 4097, 9000] {
        let (o1, o2) = (r.below(64), r.below(64));
        let b1 = r.bytes((o1 + n).div_ceil(8) + 1);
        let v1 = r.bytes((o1 + n).div_ceil(8) + 1);
        let b2 = r.bytes((o2 + n).div_ceil(8) + 1);
        let m3: Vec<u8> = (0..n).map(|_| r.byte() & 3).collect();
        let x: Vec<f64> = (0..n).map(|i| i as f64 - 100.0).collect();
        let a: Vec<f64> = (0..n).map(|i| 1e6 + i as f64).collect();
        let mut want = vec![0f64; n];
        for j in 0..n {
            want[j] = if bit(&b1, o1 + j) && bit(&v1, o1 + j) {
                a[j]
            } else if !bit(&b2, o2 + j) {
                2.0
            } else if m3[j] != 0 {
                3.0
            } else if x[j] > 0.0 {
                x[j]
            } else {
                -7.0
            };
        }
        let shape = [n];
        let conds = [
            Cond::bitmap_with_validity(
                Bitmap::new(&b1, o1, n).unwrap(),
                Bitmap::new(&v1, o1, n).unwrap(),
                &shape,
            ),
            !Cond::bitmap(Bitmap::new(&b2, o2, n).unwrap(), &shape),
            Cond::mask(TensorRef::new(&m3, &shape)),
            Cond::gt(TensorRef::new(&x, &shape), 0.0f64),
        ];
        for (name, e) in &engines {
            let mut out = vec![0f64; n];
            e.select_n(
                &conds,
                &[
                    Choice::Tensor(TensorRef::new(&a, &shape)),
                    TensorRef::scalar(&[2.0f64]).into(),
                    TensorRef::scalar(&[3.0f64]).into(),
                    TensorRef::new(&x, &shape).into(),
                ],
                TensorRef::scalar(&[-7.0f64]).into(),
                TensorMut::new(&mut out, &shape),
                Broadcast::Numpy,
            )
            .unwrap_or_else(|err| panic!("{name} n {n}: {err}"));
            let (g, w): (&[u8], &[u8]) = (bytemuck::cast_slice(&out), bytemuck::cast_slice(&want));
            assert_eq!(g, w, "{name} n {n}");
        }
    }
}

/// In place (a predicate reading the output, the default the output itself) over blocks, and
/// a bitmap of rows broadcast over columns (expanded whole).
#[test]
fn nway_bitmaps_in_place_and_broadcast() {
    let engines = common::all_engines(&EngineConfig::new());
    let mut r = Rng(5);
    let n: usize = 10_000;
    let off = 13;
    let b = r.bytes((off + n).div_ceil(8));
    let x0: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    let want: Vec<f32> = (0..n)
        .map(|j| {
            if bit(&b, off + j) {
                1.0
            } else if x0[j] > 0.0 {
                2.0
            } else {
                x0[j]
            }
        })
        .collect();
    let (rows, cols) = (33usize, 5usize);
    let want_b: Vec<f32> = (0..rows * cols)
        .map(|i| if bit(&b, off + i / cols) { 1.0 } else { -1.0 })
        .collect();
    for (name, e) in &engines {
        let mut x = x0.clone();
        e.select_n(
            &[
                Cond::bitmap(Bitmap::new(&b, off, n).unwrap(), &[n]),
                Cond::gt(selectjit::Operand::in_place(), 0.0f32),
            ],
            &[
                TensorRef::scalar(&[1.0f32]).into(),
                TensorRef::scalar(&[2.0f32]).into(),
            ],
            Choice::Out,
            TensorMut::new(&mut x, &[n]),
            Broadcast::Numpy,
        )
        .unwrap_or_else(|err| panic!("{name}: {err}"));
        let (g, w): (&[u8], &[u8]) = (bytemuck::cast_slice(&x), bytemuck::cast_slice(&want));
        assert_eq!(g, w, "{name} in place");
        let mut out = vec![0f32; rows * cols];
        e.select_n(
            &[Cond::bitmap(
                Bitmap::new(&b, off, rows).unwrap(),
                &[rows, 1],
            )],
            &[TensorRef::new(&[1.0f32; 5], &[cols]).into()],
            TensorRef::scalar(&[-1.0f32]).into(),
            TensorMut::new(&mut out, &[rows, cols]),
            Broadcast::Numpy,
        )
        .unwrap_or_else(|err| panic!("{name}: {err}"));
        let (g, w): (&[u8], &[u8]) = (bytemuck::cast_slice(&out), bytemuck::cast_slice(&want_b));
        assert_eq!(g, w, "{name} broadcast");
    }
}

//! Differential property tests: every backend against an independent formulation written here
//! from docs/semantics.md: infer the shape by its own rule, materialise each input broadcast to
//! the output by explicit index arithmetic, then select element by element. Bytes are compared.

#[path = "common/rng.rs"]
mod rng;
use rng::{Rng, Tape};

#[path = "common/aot_host.rs"]
mod aot_host;
#[path = "common/skip.rs"]
mod skip;

use proptest::prelude::*;
use selectjit::Tier;
use selectjit::codegen::x86::Level;
use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, InPlace, TensorMut, TensorRef};

/// Where input dim `j` lands in the output, or None when it is dropped (pdpd trailing 1s).
type Map = Vec<Option<usize>>;

/// The output shape and each input's dim map, by the rules of docs/semantics.md ("Broadcast
/// modes"); None for an error.
fn reference_shape(mode: Broadcast, s: [&[usize]; 3]) -> Option<(Vec<usize>, [Map; 3])> {
    let right =
        |x: &[usize], r: usize| -> Map { (0..x.len()).map(|j| Some(r - x.len() + j)).collect() };
    // Merge `x` right-aligned into `out` by the numpy rule (both ways).
    fn merge(out: &mut Vec<usize>, x: &[usize]) -> bool {
        while out.len() < x.len() {
            out.insert(0, 1);
        }
        let off = out.len() - x.len();
        for (j, &d) in x.iter().enumerate() {
            let o = &mut out[off + j];
            if d == *o || d == 1 {
                continue;
            }
            if *o == 1 {
                *o = d;
            } else {
                return false;
            }
        }
        true
    }
    match mode {
        Broadcast::Numpy => {
            let mut out = Vec::new();
            for x in s {
                if !merge(&mut out, x) {
                    return None;
                }
            }
            let r = out.len();
            Some((out, [right(s[0], r), right(s[1], r), right(s[2], r)]))
        }
        Broadcast::TwoStep => {
            let mut out = Vec::new();
            if !merge(&mut out, s[1]) || !merge(&mut out, s[2]) {
                return None;
            }
            // Step 2: cond goes in one way; it never changes the output shape.
            let off = out.len().checked_sub(s[0].len())?;
            if s[0]
                .iter()
                .enumerate()
                .any(|(j, &d)| d != 1 && d != out[off + j])
            {
                return None;
            }
            let r = out.len();
            Some((out, [right(s[0], r), right(s[1], r), right(s[2], r)]))
        }
        Broadcast::Exact => {
            if s[0] != s[1] || s[2] != s[1] {
                return None;
            }
            let m: Map = (0..s[1].len()).map(Some).collect();
            Some((s[1].to_vec(), [m.clone(), m.clone(), m]))
        }
        Broadcast::Pdpd { axis } => {
            let out = s[1].to_vec();
            let into = |x: &[usize]| -> Option<Map> {
                if x.len() > out.len() || axis < -1 {
                    return None;
                }
                if x.len() == out.len() {
                    let ok = x.iter().zip(&out).all(|(a, b)| a == b || *a == 1);
                    return ok.then(|| (0..x.len()).map(Some).collect());
                }
                let start = if axis == -1 {
                    out.len() - x.len()
                } else {
                    axis as usize
                };
                let mut len = x.len();
                while len > 0 && x[len - 1] == 1 {
                    len -= 1;
                }
                if len > 0 && start + len > out.len() {
                    return None;
                }
                let mut m = Map::new();
                for (j, &d) in x.iter().enumerate() {
                    if j < len {
                        if d != 1 && d != out[start + j] {
                            return None;
                        }
                        m.push(Some(start + j));
                    } else {
                        m.push(None);
                    }
                }
                Some(m)
            };
            let mt: Map = (0..out.len()).map(Some).collect();
            let me = into(s[2])?;
            let mc = into(s[0])?;
            Some((out, [mc, mt, me]))
        }
    }
}

/// An input laid out in memory: element bytes, shape, element strides (signed), and the index of
/// the element at coordinate `[0, 0, ...]`.
struct Laid {
    data: Vec<u8>,
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
}

/// A strided layout of `shape`: element strides (signed), the offset of the first element and
/// the buffer length in elements. Kinds: 0 contiguous, 1 transposed (column-major), 2 sliced
/// (every other element), 3 reversed (`x[::-1, ::-1, ...]`), 4 sliced with a negative step
/// (`x[::-2, ...]` on some dims), 5 mixed signs in a random axis order (some dims reversed,
/// some forward, some stepping 2).
fn layout(rng: &mut Tape, shape: &[usize], kind: usize) -> (Vec<isize>, usize, usize) {
    let r = shape.len();
    let mut order: Vec<usize> = if kind == 1 {
        (0..r).collect()
    } else {
        (0..r).rev().collect()
    };
    if kind == 5 {
        for k in (1..r).rev() {
            order.swap(k, rng.below(k + 1));
        }
    }
    let mut strides = vec![0isize; r];
    let mut acc = 1isize;
    for &k in &order {
        let (neg, step) = match kind {
            2 => (false, 2),
            3 => (true, 1),
            4 => (rng.below(2) == 0, 1 + rng.below(2) as isize),
            5 => (rng.below(2) == 0, if rng.below(4) == 0 { 2 } else { 1 }),
            _ => (false, 1),
        };
        let s = acc * step;
        strides[k] = if neg { -s } else { s };
        acc = s * shape[k].max(1) as isize;
    }
    if kind == 4 && !strides.iter().any(|&s| s < 0) && r > 0 {
        let k = rng.below(r);
        strides[k] = -strides[k]; // at least one negative step
    }
    let n: usize = shape.iter().product();
    let offset: isize = shape
        .iter()
        .zip(&strides)
        .map(|(&d, &s)| {
            if s < 0 {
                (d.max(1) as isize - 1) * -s
            } else {
                0
            }
        })
        .sum();
    let len = if n == 0 { 0 } else { acc as usize };
    (strides, if n == 0 { 0 } else { offset as usize }, len)
}

/// Element index of row-major element `i` of `shape` in a layout.
fn index_of(i: usize, shape: &[usize], strides: &[isize], offset: usize) -> usize {
    let mut rem = i;
    let mut off = offset as isize;
    for k in (0..shape.len()).rev() {
        off += (rem % shape[k]) as isize * strides[k];
        rem /= shape[k];
    }
    off as usize
}

/// Lays out `n` logical row-major elements (given by `elem(i)`) of `shape` in one of the
/// layouts of [`layout`], chosen at random.
fn lay_out(rng: &mut Tape, shape: &[usize], w: usize, elem: &dyn Fn(usize) -> Vec<u8>) -> Laid {
    let n: usize = shape.iter().product();
    let kind = rng.below(6);
    let (strides, offset, len) = layout(rng, shape, kind);
    let mut data = vec![0xeeu8; len * w];
    // Write logical element i at its strided position.
    for i in 0..n {
        let at = index_of(i, shape, &strides, offset);
        data[at * w..at * w + w].copy_from_slice(&elem(i));
    }
    Laid {
        data,
        shape: shape.to_vec(),
        strides,
        offset,
    }
}

impl Laid {
    fn view(&self) -> TensorRef<'_, u8> {
        TensorRef::with_layout(&self.data, &self.shape, &self.strides, self.offset)
    }
}

/// The expected output, materialised from the logical inputs.
fn expected(
    out: &[usize],
    maps: &[Map; 3],
    s: [&[usize]; 3],
    cond: &[u8],
    t: &[Vec<u8>],
    e: &[Vec<u8>],
) -> Vec<u8> {
    let n: usize = out.iter().product();
    let mut res = Vec::new();
    let mut coord = vec![0usize; out.len()];
    for i in 0..n {
        let mut rem = i;
        for k in (0..out.len()).rev() {
            coord[k] = rem % out[k];
            rem /= out[k];
        }
        // Row-major index of input `x` at this output coordinate.
        let at = |x: usize| -> usize {
            let mut idx = 0;
            for (j, &d) in s[x].iter().enumerate() {
                let c = match maps[x][j] {
                    Some(k) if d != 1 => coord[k],
                    _ => 0,
                };
                idx = idx * d + c;
            }
            idx
        };
        let pick = if cond[at(0)] != 0 {
            &t[at(1)]
        } else {
            &e[at(2)]
        };
        res.extend_from_slice(pick);
    }
    res
}

fn random_shapes(rng: &mut Tape) -> (Broadcast, [Vec<usize>; 3]) {
    let dims = [1usize, 2, 3, 5, 7, 15, 16, 17, 33, 65, 100];
    let r = rng.below(7);
    let mut out: Vec<usize> = (0..r)
        .map(|_| {
            if rng.below(30) == 0 {
                0
            } else {
                rng.pick(&dims)
            }
        })
        .collect();
    // At most ~100K output elements.
    while out.iter().product::<usize>() > 100_000 {
        let k = rng.below(r);
        out[k] = (out[k] / 3).max(1);
    }
    let mode = match rng.below(4) {
        0 => Broadcast::Numpy,
        1 => Broadcast::TwoStep,
        2 => Broadcast::Exact,
        _ => Broadcast::Pdpd {
            axis: rng.below(r + 2) as i64 - 1,
        },
    };
    let derive = |rng: &mut Tape| -> Vec<usize> {
        if rng.below(10) == 0 {
            // Sometimes an arbitrary shape (often incompatible).
            let rr = rng.below(4);
            return (0..rr).map(|_| rng.pick(&[0usize, 1, 2, 3, 5])).collect();
        }
        let drop = rng.below(r + 1);
        let mut s: Vec<usize> = out[drop..].to_vec();
        for d in s.iter_mut() {
            if rng.below(3) == 0 {
                *d = 1;
            }
        }
        if matches!(mode, Broadcast::Pdpd { .. }) && rng.below(2) == 0 {
            s.push(1); // trailing 1s are dropped by pdpd
        }
        s
    };
    let mut s = [derive(rng), out.clone(), derive(rng)];
    if rng.below(3) == 0 {
        s[1] = derive(rng);
    }
    if matches!(mode, Broadcast::TwoStep) && r > 0 && rng.below(3) == 0 {
        // cond keeps a full dimension where then and else have 1 (or lack it): two-step must
        // refuse to let cond grow the output, numpy would accept it.
        s[0] = out.clone();
        let k = rng.below(r);
        let drop = rng.below(2) == 0;
        for x in [1, 2] {
            let len = s[x].len();
            if len > r || k < r - len {
                continue;
            }
            let j = k - (r - len);
            s[x][j] = 1;
            if drop {
                // Or lacks it altogether (with the dims before it).
                s[x] = s[x][j + 1..].to_vec();
            }
        }
    }
    if matches!(mode, Broadcast::Exact) && rng.below(2) == 0 {
        s = [out.clone(), out.clone(), out.clone()];
    }
    (mode, s)
}

fn engines() -> Vec<(String, Engine)> {
    let cfg = |backend, exact_after| {
        EngineConfig::new()
            .backend(backend)
            .exact_after(exact_after)
            .verify(true)
            .cache_capacity(8)
    };
    let mut v: Vec<(String, Engine)> = Backend::ALL
        .iter()
        .map(|b| {
            (
                b.name().to_string(),
                Engine::with_config(cfg(*b, 1)).unwrap(),
            )
        })
        .collect();
    v.push((
        "jit-generic".into(),
        Engine::with_config(cfg(Backend::Jit, u32::MAX)).expect("engine"),
    ));
    v.push((
        "jit-portable".into(),
        Engine::with_config(
            cfg(Backend::Jit, 1)
                .tier(selectjit::Tier::Cranelift)
                .cranelift_blendv(false),
        )
        .unwrap(),
    ));
    // No code generator: a table of every rank-1 and rank-2 shape-generic kernel exported ahead
    // of time for this host, the static kernels for higher ranks.
    v.push((
        "aot".into(),
        aot_host::aot_only_engine(cfg(Backend::Static, 1), aot_host::generic_rank2_table()),
    ));
    // The x86 tiers, exact and shape-generic: natively where the host runs them, AVX-512 in the
    // emulator otherwise (each a skip: a failure under `SELECTJIT_REQUIRE_ALL_TIERS=1`).
    for (tier, level) in [(Tier::Avx2, Level::Avx2), (Tier::Avx512, Level::Avx512)] {
        let emulate = !level.available();
        if emulate && tier == Tier::Avx2 {
            skip::skip(&format!("tier {tier}"), "not runnable on this host");
            continue;
        }
        if emulate {
            skip::skip(
                &format!("tier {tier} natively"),
                "not runnable on this host; its kernels run in the emulator",
            );
        }
        for (kind, exact_after) in [("", 1), ("-generic", u32::MAX)] {
            let e = Engine::with_config(
                cfg(Backend::Jit, exact_after)
                    .tier(tier)
                    .runner(emulate.then(selectjit_emu::Emulator::runner)),
            )
            .unwrap();
            v.push((format!("jit-{tier}{kind}"), e));
        }
    }
    v
}

/// One random call drawn from `choices`, checked on every engine.
fn check_call(choices: Vec<u64>, engines: &[(String, Engine)]) -> Result<(), TestCaseError> {
    let mut rng = Tape::new(choices);
    let (mode, s) = random_shapes(&mut rng);
    let dt = rng.pick(&[
        DType::U8,
        DType::BF16,
        DType::F32,
        DType::I32,
        DType::F64,
        DType::Complex64,
        DType::Complex128,
    ]);
    let w = dt.width();
    let n = |x: &[usize]| x.iter().product::<usize>();
    let cond: Vec<u8> = (0..n(&s[0]))
        .map(|_| {
            if rng.below(2) == 0 {
                0
            } else {
                rng.pick(&[1u8, 2, 0x80, 0xff, 7])
            }
        })
        .collect();
    // Float-looking data with NaN payloads, signalling NaNs and -0.0 among it.
    let special: [[u8; 8]; 4] = [
        0x7ff8_0000_dead_beefu64.to_le_bytes(),
        0x7ff0_0000_0000_0001u64.to_le_bytes(),
        0x8000_0000_0000_0000u64.to_le_bytes(),
        0xffc0_0001_7fa0_0001u64.to_le_bytes(),
    ];
    let mut gen_vals = |len: usize, salt: u8| -> Vec<Vec<u8>> {
        (0..len)
            .map(|i| {
                (0..w)
                    .map(|b| {
                        if rng.below(8) == 0 {
                            special[i % 4][b % 8]
                        } else {
                            (i as u8).wrapping_mul(31) ^ salt ^ b as u8
                        }
                    })
                    .collect()
            })
            .collect()
    };
    let tv = gen_vals(n(&s[1]), 0x11);
    let ev = gen_vals(n(&s[2]), 0x77);
    let want = reference_shape(mode, [&s[0], &s[1], &s[2]]);
    let lc = lay_out(&mut rng, &s[0], 1, &|i| vec![cond[i]]);
    let lt = lay_out(&mut rng, &s[1], w, &|i| tv[i].clone());
    let le = lay_out(&mut rng, &s[2], w, &|i| ev[i].clone());
    let fortran_out = rng.below(3) == 0;
    let lib = selectjit::output_shape(mode, &s[0], &s[1], &s[2]);
    prop_assert_eq!(
        lib.is_ok(),
        want.is_some(),
        "error-ness differs for {:?} {:?}: {:?}",
        mode,
        s,
        lib
    );
    let Some((out_shape, maps)) = want else {
        // Refused by the mode: every engine refuses it too and leaves the output untouched,
        // also when the output has the shape numpy broadcasting would give.
        if let Ok(np) = selectjit::output_shape(Broadcast::Numpy, &s[0], &s[1], &s[2]) {
            for (name, eng) in engines {
                let mut out = vec![0x5au8; n(&np) * w];
                let r = eng.select_bytes(
                    dt,
                    lc.view(),
                    lt.view(),
                    le.view(),
                    TensorMut::new(&mut out, &np),
                    mode,
                );
                prop_assert!(r.is_err(), "{} accepted {:?} {:?}", name, mode, s);
                prop_assert!(out.iter().all(|&b| b == 0x5a), "{} wrote on error", name);
            }
        }
        return Ok(());
    };
    prop_assert_eq!(lib.unwrap().to_vec(), out_shape.clone());
    let exp = expected(&out_shape, &maps, [&s[0], &s[1], &s[2]], &cond, &tv, &ev);
    // Output layout: row-major, column-major, or (one call in three) reversed, sliced with a
    // negative step, or mixed-sign.
    let out_kind = if fortran_out {
        1
    } else {
        [0, 0, 0, 3, 4, 5][rng.below(6)]
    };
    let (ost, ooff, olen) = layout(&mut rng, &out_shape, out_kind);
    let total = n(&out_shape);
    let at: Vec<usize> = (0..total)
        .map(|i| index_of(i, &out_shape, &ost, ooff))
        .collect();
    for (name, eng) in engines {
        let mut out = vec![0x5au8; olen * w];
        eng.select_bytes(
            dt,
            lc.view(),
            lt.view(),
            le.view(),
            TensorMut::with_layout(&mut out, &out_shape, &ost, ooff),
            mode,
        )
        .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
        // Read the output back in row-major order; blank it, and every other byte (the gaps of
        // a sliced output) must still hold the fill.
        let mut got = Vec::with_capacity(total * w);
        for &o in &at {
            got.extend_from_slice(&out[o * w..o * w + w]);
            out[o * w..o * w + w].fill(0x5a);
        }
        prop_assert!(
            got == exp,
            "{} differs: {:?} {:?} {} out strides {:?} offset {}",
            name,
            mode,
            s,
            dt,
            ost,
            ooff
        );
        prop_assert!(
            out.iter().all(|&b| b == 0x5a),
            "{} wrote outside the view",
            name
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000)
    ))]

    #[test]
    fn every_backend_matches_the_reference(choices in prop::collection::vec(any::<u64>(), 0..512)) {
        thread_local! {
            static ENGINES: Vec<(String, Engine)> = engines();
        }
        ENGINES.with(|e| check_call(choices, e))?;
    }

    /// In place (output = then or else) gives the out-of-place bytes, on every backend.
    #[test]
    fn in_place_matches(seed in any::<u64>(), n in 1usize..300, rows in 1usize..4, role_then in any::<bool>()) {
        let mut rng = Rng(seed);
        let shape = [rows, n];
        let cond: Vec<u8> = (0..n).map(|_| rng.pick(&[0u8, 1, 0x80, 0])).collect();
        let t: Vec<f64> = (0..rows * n).map(|i| f64::from_bits(rng.next() ^ i as u64)).collect();
        let e: Vec<f64> = (0..rows * n).map(|_| f64::from_bits(rng.next())).collect();
        let want: Vec<u64> = (0..rows * n).map(|i| if cond[i % n] != 0 { t[i] } else { e[i] }.to_bits()).collect();
        for b in Backend::ALL {
            let eng = Engine::with_config(EngineConfig::new().backend(*b).exact_after(1)).expect("engine");
            let (mut io, other, role) = if role_then { (t.clone(), &e, InPlace::Then) } else { (e.clone(), &t, InPlace::Else) };
            eng.select_in_place(
                TensorRef::new(&cond, &[n]),
                TensorMut::new(&mut io, &shape),
                role,
                TensorRef::new(other, &shape),
                Broadcast::Numpy,
            ).unwrap();
            prop_assert_eq!(io.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.clone(), "{:?}", b);
        }
    }
}

#[test]
fn limits_are_errors_not_panics() {
    let e = Engine::new();
    let big = vec![1usize; 65];
    let mut out = [0u8; 1];
    assert!(selectjit::output_shape(Broadcast::Numpy, &big, &[], &[]).is_err());
    assert!(selectjit::output_shape(Broadcast::Numpy, &[usize::MAX, 2], &[], &[]).is_err());
    assert!(selectjit::output_shape(Broadcast::Numpy, &[1 << 40, 1 << 40], &[1], &[1]).is_err());
    // Buffers too short: an error, and the output untouched.
    let mut four = [9u8; 4];
    let r = e.select(
        TensorRef::new(&[1u8; 4], &[4]),
        TensorRef::new(&[1u8; 3], &[4]),
        TensorRef::new(&[1u8; 4], &[4]),
        TensorMut::new(&mut four, &[4]),
        Broadcast::Numpy,
    );
    assert!(r.is_err());
    assert_eq!(four, [9; 4]);
    let r = e.select(
        TensorRef::new(&[1u8], &[]),
        TensorRef::new(&[1u8], &[]),
        TensorRef::new(&[1u8], &[]),
        TensorMut::new(&mut out, &[2]),
        Broadcast::Numpy,
    );
    assert!(r.is_err());
    assert_eq!(out, [0]);
}

#[test]
fn generic_strings() {
    let t: Vec<String> = (0..6).map(|i| format!("t{i}")).collect();
    let e = vec!["else".to_string()];
    let mut out = vec![String::new(); 6];
    selectjit::select_generic(
        TensorRef::new(&[1, 0, 9], &[3]),
        TensorRef::new(&t, &[2, 3]),
        TensorRef::new(&e, &[]),
        TensorMut::new(&mut out, &[2, 3]),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(out, ["t0", "else", "t2", "t3", "else", "t5"]);
}

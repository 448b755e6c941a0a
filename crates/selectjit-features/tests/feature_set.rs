//! The library as a dependent builds it, in one feature set (this crate's `default-set`, `lean`,
//! or none), checked against a reference written here: every dtype width, broadcast patterns,
//! strides, in place, predicates, prepared calls, and what the build says about its tiers.

use selectjit::{
    Backend, Broadcast, Cond, DType, Engine, EngineConfig, InPlace, TensorMut, TensorRef, Tier,
};

/// The feature set this test binary was built with.
fn set() -> &'static str {
    if cfg!(feature = "default-set") {
        "default"
    } else if cfg!(feature = "lean") {
        "lean"
    } else {
        "nojit"
    }
}

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
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// numpy's broadcast of row-major shapes; `None` if they do not broadcast.
fn broadcast(shapes: &[&[usize]]) -> Option<Vec<usize>> {
    let r = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; r];
    for s in shapes {
        for (k, &d) in s.iter().enumerate() {
            let o = &mut out[r - s.len() + k];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

/// The row-major index into `s` (right-aligned, broadcast) of output position `idx`.
fn index(out: &[usize], s: &[usize], mut idx: usize) -> usize {
    let mut pos = vec![0usize; out.len()];
    for k in (0..out.len()).rev() {
        pos[k] = idx % out[k];
        idx /= out[k];
    }
    let off = out.len() - s.len();
    s.iter().enumerate().fold(0, |acc, (k, &d)| {
        acc * d + if d == 1 { 0 } else { pos[off + k] }
    })
}

fn engines() -> Vec<(String, Engine)> {
    let mut v = vec![("new".to_string(), Engine::new())];
    for b in [Backend::Interp, Backend::Static, Backend::Jit] {
        let e = Engine::with_config(EngineConfig::new().backend(b).exact_after(1).threads(1));
        v.push((format!("{b:?}"), e.expect("every backend builds")));
    }
    v
}

#[test]
fn selects_match_the_reference_on_every_backend() {
    let engines = engines();
    let mut rng = Rng(7);
    let widths = [
        DType::U8,
        DType::F16,
        DType::F32,
        DType::F64,
        DType::Complex128,
    ];
    let mut checked = 0;
    for case in 0..300 {
        let dt = widths[case % widths.len()];
        let w = dt.width();
        let r = rng.below(4);
        let out: Vec<usize> = (0..r).map(|_| [1, 2, 3, 7, 16, 33][rng.below(6)]).collect();
        let derive = |rng: &mut Rng| -> Vec<usize> {
            let drop = rng.below(r + 1);
            out[drop..]
                .iter()
                .map(|&d| if rng.below(3) == 0 { 1 } else { d })
                .collect()
        };
        let (cs, ts, es) = (derive(&mut rng), derive(&mut rng), derive(&mut rng));
        let Some(os) = broadcast(&[&cs, &ts, &es]) else {
            continue;
        };
        let n = |s: &[usize]| s.iter().product::<usize>();
        let cond: Vec<u8> = (0..n(&cs))
            .map(|_| [0u8, 1, 0x80, 0xff][rng.below(4)])
            .collect();
        let tv: Vec<u8> = (0..n(&ts) * w).map(|_| rng.next() as u8).collect();
        let ev: Vec<u8> = (0..n(&es) * w).map(|_| rng.next() as u8).collect();
        let mut want = vec![0u8; n(&os) * w];
        for i in 0..n(&os) {
            let src = if cond[index(&os, &cs, i)] != 0 {
                &tv[index(&os, &ts, i) * w..][..w]
            } else {
                &ev[index(&os, &es, i) * w..][..w]
            };
            want[i * w..][..w].copy_from_slice(src);
        }
        for (name, e) in &engines {
            let mut got = vec![0x5au8; want.len()];
            e.select_bytes(
                dt,
                TensorRef::new(&cond, &cs),
                TensorRef::new(&tv, &ts),
                TensorRef::new(&ev, &es),
                TensorMut::new(&mut got, &os),
                Broadcast::Numpy,
            )
            .unwrap();
            assert!(got == want, "{}: {name} {dt} {cs:?} {ts:?} {es:?}", set());
            checked += 1;
        }
    }
    assert!(checked > 600, "{checked}");
}

#[test]
fn predicates_in_place_and_prepared_calls() {
    for (name, e) in engines() {
        // In-place ReLU: the compared tensor is the output.
        let mut x: Vec<f32> = vec![-1.5, 0.0, -0.0, 2.0, f32::NAN, f32::INFINITY, -3.0, 7.25];
        let want: Vec<u32> = x
            .iter()
            .map(|&v| if v > 0.0 { v } else { 0.0 }.to_bits())
            .collect();
        e.select_in_place(
            Cond::gt(selectjit::Operand::in_place(), 0f32),
            TensorMut::new(&mut x, &[8]),
            InPlace::Then,
            TensorRef::new(&[0f32], &[]),
            Broadcast::Numpy,
        )
        .unwrap();
        let got: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "{}: {name}", set());
        // Masked fill from an i64 mask into f32 scores: where(mask == 0, -inf, scores).
        let mask = [1i64, 0, 1, 0];
        let scores = [1f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let mut out = [0f32; 8];
        e.select(
            Cond::eq(TensorRef::new(&mask, &[1, 4]), 0i64),
            TensorRef::new(&[f32::NEG_INFINITY], &[]),
            TensorRef::new(&scores, &[2, 4]),
            TensorMut::new(&mut out, &[2, 4]),
            Broadcast::Numpy,
        )
        .unwrap();
        let ninf = f32::NEG_INFINITY;
        assert_eq!(out, [1.0, ninf, 3.0, ninf, 5.0, ninf, 7.0, ninf], "{name}");
        // A prepared call.
        let p = e
            .prepare(DType::U16, &[3, 1], &[3, 4], &[4], Broadcast::Numpy)
            .unwrap();
        let t: Vec<u16> = (0..12).collect();
        let mut o = [0u16; 12];
        p.run(&[1, 0, 1], &t, &[90, 91, 92, 93], &mut o).unwrap();
        assert_eq!(o, [0, 1, 2, 3, 90, 91, 92, 93, 8, 9, 10, 11], "{name}");
    }
}

/// What each build can do, and that an engine says so: the default build has Cranelift (and
/// the x86 tier on x86-64), the lean build only the x86 tier, the no-JIT build no code
/// generator and still serves every call.
#[test]
fn the_build_has_the_tiers_of_its_feature_set() {
    let cranelift = Tier::Cranelift.available();
    match set() {
        "default" => assert!(cranelift, "{:?}", Tier::Cranelift.unavailable_reason()),
        "lean" => {
            assert!(!cranelift);
            assert!(Tier::Cranelift.unavailable_reason().is_some());
        }
        _ => {
            for t in [Tier::Cranelift, Tier::Avx2, Tier::Avx512] {
                assert!(!t.available(), "{t:?} in the no-JIT build");
            }
        }
    }
    let e = Engine::with_config(EngineConfig::new().exact_after(1)).unwrap();
    let mut out = [0f64; 64];
    for _ in 0..3 {
        e.select(
            TensorRef::new(&[1u8, 0], &[2, 1]),
            TensorRef::new(&[1f64; 64], &[2, 32]),
            TensorRef::new(&[2f64], &[]),
            TensorMut::new(&mut out, &[2, 32]),
            Broadcast::Numpy,
        )
        .unwrap();
    }
    assert_eq!(out[..32], [1.0; 32]);
    assert_eq!(out[32..], [2.0; 32]);
    let s = e.stats();
    let any_tier = [Tier::Cranelift, Tier::Avx2, Tier::Avx512]
        .iter()
        .any(|t| t.available());
    if any_tier {
        assert!(s.compiles > 0, "{}: {s:?}", set());
    } else {
        assert_eq!(s.compiles, 0, "{s:?}");
        assert!(s.static_runs > 0, "{s:?}");
    }
}

/// The wisdom file is the default build's (feature `wisdom`): the lean and no-JIT builds ignore
/// a configured file, say so, and never write one.
#[test]
fn the_wisdom_file_is_the_default_builds() {
    use selectjit::WisdomStatus;
    let dir = std::env::temp_dir().join(format!("selectjit-features-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("wisdom-{}.txt", set()));
    let _ = std::fs::remove_file(&path);
    let e = Engine::with_config(EngineConfig::new().wisdom(&path)).unwrap();
    let status = e.wisdom_status();
    match set() {
        // Created by the first trial where a generator measures.
        "default" => assert!(
            matches!(status, WisdomStatus::Missing | WisdomStatus::Off),
            "{status}"
        ),
        _ => assert_eq!(status, WisdomStatus::Unavailable, "{status}"),
    }
    // Enough calls of an output large enough for a trial, where one runs.
    let n = 1 << 20;
    let (x, mut out) = (vec![1f32; n], vec![0f32; n]);
    for _ in 0..64 {
        e.select(
            TensorRef::new(&vec![1u8; n], &[n]),
            TensorRef::new(&x, &[n]),
            TensorRef::scalar(&[0f32]),
            TensorMut::new(&mut out, &[n]),
            Broadcast::Numpy,
        )
        .unwrap();
    }
    assert!(out.iter().all(|&v| v == 1.0));
    if set() != "default" {
        assert!(!path.exists(), "{}: the build wrote a wisdom file", set());
    } else if e.stats().tier_trials > 0 {
        assert!(path.exists(), "a trial ran and no wisdom file was written");
    }
    let _ = std::fs::remove_file(&path);
}

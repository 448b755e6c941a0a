//! Large calls split across threads give the interpreter's bytes.

use selectjit::{Backend, Broadcast, Engine, EngineConfig, InPlace, TensorMut, TensorRef};
use selectjit_bench::{Case, Inputs};

fn engine(backend: Backend, threads: usize) -> Engine {
    Engine::with_config(EngineConfig::new().backend(backend).threads(threads)).expect("engine")
}

fn case(dtype: &str, c: &[usize], t: &[usize], e: &[usize]) -> Case {
    Case {
        name: format!("{dtype} {c:?} {t:?} {e:?}"),
        dtype: dtype.into(),
        cond: c.to_vec(),
        then: t.to_vec(),
        else_: e.to_vec(),
        cond_fill: "random".into(),
    }
}

#[test]
fn split_calls_match_the_interpreter() {
    let cases = [
        case("f32", &[300_017], &[300_017], &[300_017]),
        case("u8", &[1 << 21], &[1 << 21], &[]),
        case("f64", &[3, 1, 50_001], &[50_001], &[3, 2, 1]),
        case("f16", &[1, 4099], &[257, 4099], &[257, 1]),
        case("complex128", &[70_001], &[1], &[70_001]),
    ];
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    for c in &cases {
        let inp = Inputs::new(c).unwrap();
        let bytes = inp.elements() * inp.dtype.width();
        assert!(bytes >= selectjit::PARALLEL_MIN_BYTES, "{}", c.name);
        let mut want = vec![0u8; bytes];
        inp.run(&interp, &mut want).unwrap();
        for b in [Backend::Jit, Backend::Static] {
            for threads in [2, 3, 8] {
                let mut got = vec![0x55u8; bytes];
                inp.run(&engine(b, threads), &mut got).unwrap();
                assert!(got == want, "{b:?} threads={threads} {}", c.name);
            }
        }
    }
}

#[test]
fn split_in_place_matches() {
    let n = 1_000_003usize;
    let cond: Vec<u8> = (0..n).map(|i| (i * 7 % 5) as u8).collect();
    let t: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let e: Vec<f32> = (0..n).map(|i| -(i as f32) - 0.5).collect();
    let want: Vec<f32> = (0..n)
        .map(|i| if cond[i] != 0 { t[i] } else { e[i] })
        .collect();
    let eng = engine(Backend::Jit, 4);
    for (role, start, other) in [(InPlace::Then, &t, &e), (InPlace::Else, &e, &t)] {
        let mut inout = start.clone();
        eng.select_in_place(
            TensorRef::new(&cond, &[n]),
            TensorMut::new(&mut inout, &[n]),
            role,
            TensorRef::new(other, &[n]),
            Broadcast::Numpy,
        )
        .unwrap();
        let same = inout
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{role:?}");
    }
}

//! Calls on an engine checked against the interpreter, for the tests of measured choices
//! (`tier_choice.rs`, `wisdom.rs`), which include this file by path.

use selectjit::{Backend, Broadcast, Engine, EngineConfig, TensorMut, TensorRef};

/// Runs `calls` selects of `n` f32 elements on `e` (cond bytes varying per call), each
/// checked against the interpreter bit for bit.
pub fn run_checked(e: &Engine, n: usize, calls: usize) {
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let t: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let f: Vec<f32> = (0..n).map(|i| -(i as f32)).collect();
    for c in 0..calls {
        let cond: Vec<u8> = (0..n).map(|i| [0u8, 1, 0xff, 0, 7][(i + c) % 5]).collect();
        let mut got = vec![0f32; n];
        let mut want = vec![1f32; n];
        for (eng, out) in [(e, &mut got), (&interp, &mut want)] {
            eng.select(
                TensorRef::new(&cond, &[n]),
                TensorRef::new(&t, &[n]),
                TensorRef::new(&f, &[n]),
                TensorMut::new(out, &[n]),
                Broadcast::Numpy,
            )
            .unwrap();
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "call {c}");
    }
}

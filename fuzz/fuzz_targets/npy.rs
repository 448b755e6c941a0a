//! Arbitrary bytes as the three `.npy` inputs of the CLI's loading path: an error or a result,
//! never a panic, never an allocation sized by an unchecked header. When all three load, the
//! select runs as the CLI runs it, and the JIT must agree with the interpreter.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use selectjit_cli::npy::read_npy_bytes;
use selectjit::{Backend, DType, Engine, EngineConfig, TensorMut};

fn engines() -> &'static (Engine, Engine) {
    static E: OnceLock<(Engine, Engine)> = OnceLock::new();
    E.get_or_init(|| (Engine::with_config(EngineConfig::new().backend(Backend::Jit)).unwrap(), Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap()))
}

fuzz_target!(|data: &[u8]| {
    // Two little-endian u16 lengths split the input into three files.
    if data.len() < 4 {
        return;
    }
    let a = u16::from_le_bytes([data[0], data[1]]) as usize;
    let b = u16::from_le_bytes([data[2], data[3]]) as usize;
    let rest = &data[4..];
    let a = a.min(rest.len());
    let b = b.min(rest.len() - a);
    let files = [&rest[..a], &rest[a..a + b], &rest[a + b..]];
    let loaded: Vec<_> = files.iter().map(|f| read_npy_bytes(f)).collect();
    let [Ok(c), Ok(t), Ok(e)] = &loaded[..] else { return };
    if c.dtype != DType::Bool || t.dtype != e.dtype {
        return;
    }
    let Ok(shape) = selectjit::output_shape(selectjit::Broadcast::Numpy, &c.shape, &t.shape, &e.shape) else {
        return;
    };
    let n: usize = shape.iter().product();
    if n > 1 << 20 {
        return;
    }
    let (jit, interp) = engines();
    let mut o1 = vec![0u8; n * t.dtype.width()];
    let mut o2 = o1.clone();
    let r1 = jit.select_bytes(t.dtype, c.view(), t.view(), e.view(), TensorMut::new(&mut o1, &shape), selectjit::Broadcast::Numpy);
    let r2 = interp.select_bytes(t.dtype, c.view(), t.view(), e.view(), TensorMut::new(&mut o2, &shape), selectjit::Broadcast::Numpy);
    assert_eq!(r1.is_ok(), r2.is_ok());
    assert!(o1 == o2);
});

//! JIT (exact and shape-generic, every code-generation tier: x86 tiers the CPU lacks run in the
//! emulator), static kernels and the interpreter must agree byte for byte, and on whether a call
//! is an error, for arbitrary widths, modes, shapes, strides and data.
#![no_main]

use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use selectjit::jit::Tier;
use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, InPlace, TensorMut, TensorRef};

/// The interpreter first, then every other engine.
fn engines() -> &'static [Engine] {
    static E: OnceLock<Vec<Engine>> = OnceLock::new();
    E.get_or_init(|| {
        let cfg = |backend, tier, exact_after, emulate| EngineConfig {
            backend,
            tier,
            exact_after,
            emulate,
            cache_capacity: 4, // constant eviction
            verify: true,
            threads: 1,
            ..EngineConfig::default()
        };
        let mut v = vec![
            Engine::with_config(cfg(Backend::Interp, Tier::Auto, 1, false)),
            Engine::with_config(cfg(Backend::Static, Tier::Auto, 1, false)),
        ];
        for tier in [Tier::Cranelift, Tier::Avx2, Tier::Avx512] {
            let emulate = !tier.available();
            if emulate && !cfg!(target_arch = "x86_64") {
                continue;
            }
            for exact_after in [1, u32::MAX] {
                let e = Engine::try_with_config(cfg(Backend::Jit, tier, exact_after, emulate))
                    .expect("every tier runs here, natively or emulated");
                v.push(e);
            }
        }
        v
    })
}

struct Input {
    data: Vec<u8>,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

/// A shape and a layout for it: contiguous, column-major, sliced (step 2), or with some
/// dimensions broadcast by a 0 stride.
fn input(u: &mut Unstructured, w: usize) -> Result<Input> {
    let rank = u.int_in_range(0..=6)?;
    let mut shape = Vec::with_capacity(rank);
    for _ in 0..rank {
        shape.push(u.int_in_range(0..=5)?);
    }
    let r = rank;
    let kind = u.int_in_range(0..=3)?;
    let mut strides = vec![0isize; r];
    let mut acc: isize = 1;
    let order: Vec<usize> = if kind == 1 { (0..r).collect() } else { (0..r).rev().collect() };
    for &k in &order {
        let zero = kind == 3 && u.ratio(1, 3)?;
        strides[k] = if zero { 0 } else { acc * if kind == 2 { 2 } else { 1 } };
        if !zero {
            acc *= shape[k].max(1) as isize;
        }
    }
    let len = if shape.contains(&0) { 0 } else { (acc * if kind == 2 { 2 } else { 1 }) as usize };
    // Occasionally one element short, which must be an error everywhere.
    let len = if len > 0 && u.ratio(1, 16)? { len - 1 } else { len };
    let mut data = vec![0u8; len * w];
    u.fill_buffer(&mut data)?;
    Ok(Input { data, shape, strides })
}

fn run(data: &[u8]) -> Result<()> {
    let mut u = Unstructured::new(data);
    let dt = *u.choose(&[DType::U8, DType::F16, DType::F32, DType::F64, DType::Complex128])?;
    let w = dt.width();
    let mode = match u.int_in_range(0..=3)? {
        0 => Broadcast::Numpy,
        1 => Broadcast::TwoStep,
        2 => Broadcast::None,
        _ => Broadcast::Pdpd { axis: u.int_in_range(-2..=4)? },
    };
    let c = input(&mut u, 1)?;
    let t = input(&mut u, w)?;
    let e = input(&mut u, w)?;
    let Ok(out_shape) = selectjit::output_shape(mode, &c.shape, &t.shape, &e.shape) else {
        // Every engine reports the error.
        for eng in engines() {
            let mut out = vec![0u8; 16];
            let r = eng.select_dyn(
                dt,
                TensorRef::with_strides(&c.data, &c.shape, &c.strides),
                TensorRef::with_strides(&t.data, &t.shape, &t.strides),
                TensorRef::with_strides(&e.data, &e.shape, &e.strides),
                TensorMut::new(&mut out, &[]),
                mode,
            );
            assert!(r.is_err());
        }
        return Ok(());
    };
    let n: usize = out_shape.iter().product();
    if n > 1 << 16 {
        return Ok(());
    }
    let fortran = u.arbitrary::<bool>()?;
    let r = out_shape.len();
    let mut ost = vec![0isize; r];
    let mut acc = 1isize;
    let order: Vec<usize> = if fortran { (0..r).collect() } else { (0..r).rev().collect() };
    for &k in &order {
        ost[k] = acc;
        acc *= out_shape[k].max(1) as isize;
    }
    let mut results = Vec::new();
    for eng in engines() {
        let mut out = vec![0x5au8; n * w];
        let r = eng.select_dyn(
            dt,
            TensorRef::with_strides(&c.data, &c.shape, &c.strides),
            TensorRef::with_strides(&t.data, &t.shape, &t.strides),
            TensorRef::with_strides(&e.data, &e.shape, &e.strides),
            TensorMut::with_strides(&mut out, &out_shape, &ost),
            mode,
        );
        results.push(r.map(|_| out));
    }
    for (k, r) in results.iter().enumerate().skip(1) {
        match (&results[0], r) {
            (Ok(a), Ok(b)) => assert!(a == b, "engine {k} differs from the interpreter"),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("engine {k} disagrees on error-ness: {:?} vs {:?}", a.is_ok(), b.is_ok()),
        }
    }
    // In place, when then has the output's shape and a plain layout.
    if let Ok(want) = &results[0]
        && t.shape == out_shape.as_slice()
        && !fortran
        && t.data.len() == n * w
        && t.strides == selectjit::shape::contiguous_strides(&t.shape).as_slice()
    {
        for eng in &engines()[1..] {
            let mut io = t.data.clone();
            eng.select_in_place_dyn(
                dt,
                TensorRef::with_strides(&c.data, &c.shape, &c.strides),
                TensorMut::new(&mut io, &out_shape),
                InPlace::Then,
                TensorRef::with_strides(&e.data, &e.shape, &e.strides),
                mode,
            )
            .expect("valid in-place call");
            assert!(&io == want, "in-place result differs");
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});

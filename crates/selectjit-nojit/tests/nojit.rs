//! The no-JIT build: no code generator, every conformance case byte for byte on the
//! interpreter, the static kernels, an engine served by the linked AOT table (every call by
//! its exact kernel) and the default engine; and no code generator in the dependency tree.

use selectjit::output_shape;
use selectjit::plan::plan_layout;
use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, TensorMut, TensorRef, Tier};
#[path = "../../../tests/common/conformance_file.rs"]
mod conformance_file;

use conformance_file::{load, valid_cases};

/// The valid conformance cases: mode and the three shapes.
fn cases() -> Vec<(Broadcast, [Vec<usize>; 3])> {
    valid_cases(&load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/shapes.json"
    )))
}

#[test]
fn this_build_generates_no_code() {
    assert_eq!(
        Tier::best(),
        None,
        "selectjit was built with its `jit` feature: cargo unifies features across the packages \
         of one build, so test this crate on its own (`cargo test -p selectjit-nojit`), not with \
         `--workspace`"
    );
    for t in Tier::ALL {
        assert!(!t.available(), "{t}");
        let why = t.unavailable_reason().unwrap();
        assert!(why.contains("`jit` feature"), "{why}");
    }
    // Asking for code generation is an error that says why; the default engine serves calls
    // without it and records the reason.
    // A named tier is an error; `Auto` (the default) is not: it runs the static kernels.
    let e = Engine::with_config(EngineConfig::new().tier(Tier::Cranelift)).unwrap_err();
    assert!(e.to_string().contains("`jit` feature"), "{e}");
    for eng in [
        Engine::new(),
        Engine::with_config(EngineConfig::new()).unwrap(),
    ] {
        assert_eq!(eng.tier(), None);
        let why = eng.last_codegen_error().unwrap().to_string();
        assert!(why.contains("`jit` feature"), "{why}");
    }
    for b in [Backend::Static, Backend::Interp] {
        let eng = Engine::with_config(EngineConfig::new().backend(b)).unwrap();
        assert!(eng.last_codegen_error().is_none(), "{b:?}");
    }
}

#[test]
fn every_conformance_case_on_every_engine() {
    let table = selectjit_nojit::table().expect("the linked table is this host's");
    assert!(table.exact_len() > 0 && table.generic_len() > 0);
    let aot = selectjit_nojit::engine(table).expect("the linked table checks out");
    let engines = [
        (
            "static",
            Engine::with_config(EngineConfig::new().backend(Backend::Static)).unwrap(),
        ),
        ("default", Engine::new()),
        ("aot", aot),
    ];
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let (mut calls, mut checked) = (0u64, 0u64);
    for (mode, [c, t, e]) in cases() {
        let out_shape = output_shape(mode, &c, &t, &e).unwrap();
        let n = |s: &[usize]| s.iter().product::<usize>();
        for dt in [
            DType::U8,
            DType::F16,
            DType::F32,
            DType::F64,
            DType::Complex128,
        ] {
            let w = dt.width();
            let cond: Vec<u8> = (0..n(&c)).map(|i| [0u8, 1, 0x80, 0, 0xff][i % 5]).collect();
            let tv: Vec<u8> = (0..n(&t) * w).map(|i| (i * 7 + 1) as u8).collect();
            let ev: Vec<u8> = (0..n(&e) * w).map(|i| (i * 13 + 200) as u8).collect();
            let run = |eng: &Engine| {
                let mut out = vec![0x5au8; n(&out_shape) * w];
                eng.select_bytes(
                    dt,
                    TensorRef::new(&cond, &c),
                    TensorRef::new(&tv, &t),
                    TensorRef::new(&ev, &e),
                    TensorMut::new(&mut out, &out_shape),
                    mode,
                )
                .unwrap();
                out
            };
            let want = run(&interp);
            for (name, eng) in &engines {
                assert_eq!(run(eng), want, "{name} {dt} {mode:?} {c:?} {t:?} {e:?}");
                checked += 1;
            }
            let strides = |s: &[usize]| selectjit::contiguous_strides(s);
            let b = selectjit::broadcast_shapes(mode, &c, &t, &e).unwrap();
            let st = |s: &[usize], p: selectjit::Placement| p.strides_over(s, &strides(s), &b.out);
            let so = strides(&b.out);
            let planned = plan_layout(
                w,
                &b.out,
                [&st(&c, b.cond), &st(&t, b.then), &st(&e, b.else_), &so],
            );
            calls += u64::from(planned.is_some());
        }
    }
    let s = engines[2].1.stats();
    assert!(checked > 300, "{checked}");
    // Every non-empty call ran the table's exact kernel: nothing fell back to static kernels.
    assert_eq!(s.aot_exact_runs, calls, "{s:?}");
    assert_eq!(
        (s.aot_generic_runs, s.static_runs, s.compiles),
        (0, 0, 0),
        "{s:?}"
    );
    let st = engines[0].1.stats();
    assert_eq!((st.static_runs, st.compiles), (calls, 0), "{st:?}");
}

/// Without a table (a runtime whose table was rejected builds its engine without one), the
/// engine serves every call with the static kernels.
#[test]
fn without_a_table_the_static_kernels_serve() {
    let eng = Engine::with_config(EngineConfig::new().backend(Backend::Static)).unwrap();
    let mut out = [0u32; 3];
    eng.select(
        TensorRef::new(&[1, 0, 7], &[3]),
        TensorRef::new(&[1u32, 2, 3], &[3]),
        TensorRef::scalar(&[9u32]),
        TensorMut::new(&mut out, &[3]),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(out, [1, 9, 3]);
    assert_eq!(eng.stats().static_runs, 1);
    assert_eq!(eng.stats().aot_exact_kernels, 0);
}

/// The library this crate links pulls in no code generator: no Cranelift, no assembler.
#[test]
fn no_code_generator_in_the_dependency_tree() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            "selectjit-nojit",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("selectjit v"), "{tree}");
    for heavy in ["cranelift", "iced-x86", "memmap2", "regalloc2"] {
        assert!(
            !tree.contains(heavy),
            "{heavy} in the no-JIT build:\n{tree}"
        );
    }
}

/// Predicates (a comparison or a test computed in the kernel) from the linked table, format 3:
/// with no code generator, every call runs one of the table's predicate kernels in one pass —
/// nothing runs in blocks on the static kernels — with the interpreter's bytes, over edge
/// values (NaNs with payloads, ±0, ±inf, subnormals, integer extremes, u64 above i64::MAX).
#[test]
fn predicate_calls_run_the_tables_predicate_kernels() {
    use selectjit::{Cond, InPlace, Operand};
    let aot = selectjit_nojit::engine(selectjit_nojit::table().unwrap()).unwrap();
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let n = 1000usize;
    let f32_edges = [
        0.0f32,
        -0.0,
        1.5,
        -2.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xff80_0001),
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::MAX,
        f32::MIN,
    ];
    let x: Vec<f32> = (0..n).map(|i| f32_edges[(i * 7) % 12]).collect();
    let y: Vec<f32> = (0..n).map(|i| f32_edges[(i * 5 + 3) % 12]).collect();
    let m: Vec<i64> = (0..n)
        .map(|i| [0, 1, -1, i64::MIN, i64::MAX][i % 5])
        .collect();
    let u: Vec<u64> = (0..n)
        .map(|i| [0, 1, i64::MAX as u64, 1 << 63, u64::MAX][i % 5])
        .collect();
    let v: Vec<u64> = (0..n)
        .map(|i| [1 << 63, 0, u64::MAX, 1, i64::MAX as u64][(i / 5) % 5])
        .collect();
    // bf16 as little-endian bytes: ±0, ±1, ±inf, a NaN, ± the smallest subnormal.
    let bf: Vec<u8> = (0..n)
        .flat_map(|i| {
            let b: u16 = [
                0, 0x8000, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc1, 0x0001, 0x8001,
            ][i % 9];
            b.to_le_bytes()
        })
        .collect();
    let d: Vec<f64> = (0..n)
        .map(|i| {
            [
                0.0,
                -0.0,
                f64::from_bits(0x7ff0_0000_0000_0001),
                f64::from_bits(0xfff8_0000_dead_beef),
                f64::INFINITY,
                f64::from_bits(1),
                -3.25,
            ][i % 7]
        })
        .collect();
    let bytes: Vec<u8> = (0..n).map(|i| (i * 31 + 7) as u8).collect();
    let s = [n];
    let (xv, yv) = (TensorRef::new(&x, &s), TensorRef::new(&y, &s));
    let zero = TensorRef::scalar(&[0.0f32]);

    fn run<T: selectjit::Element + Default>(
        e: &Engine,
        cond: Cond<'_>,
        t: TensorRef<'_, T>,
        f: TensorRef<'_, T>,
        n: usize,
    ) -> Vec<T> {
        let mut out = vec![T::default(); n];
        e.select(cond, t, f, TensorMut::new(&mut out, &[n]), Broadcast::Numpy)
            .unwrap();
        out
    }
    let mut table_runs = 0u64;
    macro_rules! check {
        ($what:expr, $cond:expr, $t:expr, $f:expr) => {{
            let got = run(&aot, $cond, $t, $f, n);
            let want = run(&interp, $cond, $t, $f, n);
            assert_eq!(bytes_of(&got), bytes_of(&want), "{}", $what);
            let st = aot.stats();
            let ran = st.aot_exact_runs + st.aot_generic_runs;
            assert!(ran > table_runs, "{}: no table kernel ran: {st:?}", $what);
            assert_eq!(
                (st.static_runs, st.blocked_runs),
                (0, 0),
                "{}: {st:?}",
                $what
            );
            table_runs = ran;
        }};
    }
    check!("relu x > 0", Cond::gt(xv, 0.0f32), xv, zero);
    check!("x < y", Cond::lt(xv, yv), xv, yv);
    check!("x <= y negated", Cond::le(xv, yv).not(), yv, xv);
    check!(
        "mask == 0 selects -inf",
        Cond::eq(TensorRef::new(&m, &s), 0i64),
        TensorRef::scalar(&[f32::NEG_INFINITY]),
        yv
    );
    check!(
        "u64 <= u64, selecting bytes",
        Cond::le(TensorRef::new(&u, &s), TensorRef::new(&v, &s)),
        TensorRef::new(&bytes, &s),
        TensorRef::scalar(&[0xeeu8])
    );
    check!(
        "bf16 x > 0 selecting i16",
        Cond::gt(
            Operand::from_bytes(DType::BF16, TensorRef::new(&bf, &s)),
            Operand::from_bytes(DType::BF16, TensorRef::scalar(&[0u8, 0])),
        ),
        TensorRef::new(&vec![7i16; n], &s),
        TensorRef::scalar(&[-7i16])
    );
    check!(
        "nan to zero",
        Cond::isnan(TensorRef::new(&d, &s)),
        TensorRef::scalar(&[0.0f64]),
        TensorRef::new(&d, &s)
    );
    // In place: x = where(x > 0, x, 0).
    let mut a = x.clone();
    let mut b = x.clone();
    for (eng, buf) in [(&aot, &mut a), (&interp, &mut b)] {
        eng.select_in_place(
            Cond::gt(Operand::in_place(), 0.0f32),
            TensorMut::new(buf, &s),
            InPlace::Then,
            zero,
            Broadcast::Numpy,
        )
        .unwrap();
    }
    assert_eq!(bytes_of(&a), bytes_of(&b), "in place");
    assert!(a.iter().any(|v| v.to_bits() == 0) && a.iter().any(|&v| v > 0.0));
    let st = aot.stats();
    assert!(
        st.aot_exact_runs + st.aot_generic_runs > table_runs,
        "in place: {st:?}"
    );
    assert_eq!(
        (st.static_runs, st.blocked_runs),
        (0, 0),
        "in place: {st:?}"
    );
}

/// The bytes of a slice of elements (compared bytewise: NaN payloads and -0.0 count).
fn bytes_of<T: selectjit::Element>(v: &[T]) -> Vec<u8> {
    // SAFETY: `Element` types are plain old data (`bytemuck::Pod`: no padding, every byte
    // initialised); the bytes read are exactly the slice's.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        .to_vec()
}

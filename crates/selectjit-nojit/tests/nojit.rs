//! The no-JIT build: no code generator, every conformance case byte for byte on the
//! interpreter, the static kernels, an engine served by the linked AOT table (every call by
//! its exact kernel) and the default engine; and no code generator in the dependency tree.

use selectjit::output_shape;
use selectjit::unstable::plan_layout;
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
                eng.select_dyn(
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
            let strides = |s: &[usize]| selectjit::unstable::contiguous_strides(s);
            let b = selectjit::broadcast_shapes(mode, &c, &t, &e).unwrap();
            let st = |s: &[usize], p| selectjit::unstable::strides_over(s, &strides(s), p, &b.out);
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

//! Kernels exported ahead of time, served on the host: an engine with a table and no code
//! generator passes every conformance case byte for byte (exact kernels, shape-generic kernels,
//! static fallback, each counted), a JIT engine takes the table's kernels first, and tables that
//! are for another machine, of another version or corrupted are rejected with a clear error and
//! never used. Single-pass n-way kernels are exported by spec (the API and the shapes file),
//! registered and run by `select_n` on engines with and without a code generator.

#[path = "../../../tests/common/aot_host.rs"]
mod aot_host;
#[path = "../../../tests/common/conformance_file.rs"]
mod conformance_file;

use std::sync::OnceLock;

use selectjit::aot::{AOT_MAX_ENTRIES, AotTable, SelectjitAotEntry, SelectjitAotTable};
use selectjit::{Backend, Broadcast, DType, Engine, EngineConfig, InPlace, TensorMut, TensorRef};
use selectjit_aot::{ExportOptions, KernelSet, Kinds, parse_shapes};

const DTYPES: [DType; 5] = [
    DType::Bool,
    DType::BF16,
    DType::I32,
    DType::F64,
    DType::Complex128,
];

/// The conformance file's valid cases: mode and three shapes.
fn conformance() -> Vec<(Broadcast, [Vec<usize>; 3])> {
    conformance_file::valid_cases(&conformance_file::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/shapes.json"
    )))
}

fn conformance_text() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/shapes.json"
    ))
    .unwrap()
}

/// The table of every conformance case at every width (exact and generic kernels), built once.
fn conformance_table() -> &'static AotTable {
    static T: OnceLock<AotTable> = OnceLock::new();
    T.get_or_init(|| {
        let f = parse_shapes(&conformance_text(), &DTYPES).unwrap();
        assert!(f.cases >= 20, "{} cases", f.cases);
        aot_host::host_table(&f.set)
    })
}

fn cfg() -> EngineConfig {
    EngineConfig::new().threads(1).exact_after(1).verify(true)
}

/// Runs every conformance case at every width on `eng` and on the interpreter, with cond bytes
/// other than 0/1 and arbitrary data; asserts equal bytes. Returns the non-empty calls.
fn run_conformance(eng: &Engine) -> u64 {
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let mut calls = 0;
    let mut seed = 1u64;
    let mut byte = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 56) as u8
    };
    for (mode, s) in conformance() {
        let out_shape = selectjit::output_shape(mode, &s[0], &s[1], &s[2]).unwrap();
        let n = |x: &[usize]| x.iter().product::<usize>();
        for dt in DTYPES {
            let w = dt.width();
            let cond: Vec<u8> = (0..n(&s[0])).map(|_| byte() & 0x83).collect();
            let t: Vec<u8> = (0..n(&s[1]) * w).map(|_| byte()).collect();
            let e: Vec<u8> = (0..n(&s[2]) * w).map(|_| byte()).collect();
            let mut want = vec![0x5a; n(&out_shape) * w];
            let mut got = want.clone();
            for (engine, out) in [(&interp, &mut want), (eng, &mut got)] {
                engine
                    .select_bytes(
                        dt,
                        TensorRef::new(&cond, &s[0]),
                        TensorRef::new(&t, &s[1]),
                        TensorRef::new(&e, &s[2]),
                        TensorMut::new(out, &out_shape),
                        mode,
                    )
                    .unwrap();
            }
            assert_eq!(got, want, "{mode:?} {s:?} {dt}");
            calls += !want.is_empty() as u64;
        }
    }
    calls
}

#[test]
fn aot_only_engine_passes_the_conformance_cases_with_exact_kernels() {
    let eng = aot_host::aot_only_engine(cfg(), conformance_table().clone());
    assert!(eng.codegen().is_none());
    let calls = run_conformance(&eng);
    let st = eng.stats();
    assert!(calls >= 100, "{calls}");
    assert_eq!(
        (st.aot_exact_runs, st.aot_generic_runs, st.static_runs),
        (calls, 0, 0),
        "{st:?}"
    );
    assert_eq!((st.compiles, st.generic_compiles), (0, 0));
    assert!(st.aot_exact_kernels > 0 && st.aot_generic_kernels > 0);
}

#[test]
fn shape_generic_kernels_serve_other_shapes_and_the_rest_runs_statically() {
    // Only the generic kernels of the conformance patterns, at f32 width.
    let mut set = KernelSet::new();
    for (mode, s) in conformance() {
        set.add_call(DType::F32, &s[0], &s[1], &s[2], mode, Kinds::Generic)
            .unwrap();
    }
    // And the pattern of "row cond, matrix then, scalar else", from a small call.
    set.add_call(
        DType::F32,
        &[3],
        &[2, 3],
        &[],
        Broadcast::Numpy,
        Kinds::Generic,
    )
    .unwrap();
    assert!(set.signatures().is_empty() && !set.patterns().is_empty());
    let eng = aot_host::aot_only_engine(cfg(), aot_host::host_table(&set));
    let calls = run_conformance(&eng);
    let st = eng.stats();
    // Four of the five widths have no kernel in the table: static kernels.
    assert_eq!(st.aot_exact_runs, 0);
    assert_eq!(st.aot_generic_runs + st.static_runs, calls, "{st:?}");
    assert_eq!(st.aot_generic_runs, calls / 5, "{st:?}");

    // Other dims of the same pattern run on its generic kernel (run-time dims).
    let before = eng.stats().aot_generic_runs;
    let mut out = vec![0f32; 7 * 300];
    let t: Vec<f32> = (0..7 * 300).map(|i| i as f32).collect();
    let cond: Vec<u8> = (0..300).map(|i| (i % 3) as u8).collect();
    eng.select(
        TensorRef::new(&cond, &[300]),
        TensorRef::new(&t, &[7, 300]),
        TensorRef::scalar(&[-1.0f32]),
        TensorMut::new(&mut out, &[7, 300]),
        Broadcast::Numpy,
    )
    .unwrap();
    for (i, v) in out.iter().enumerate() {
        let want = if i % 300 % 3 != 0 { i as f32 } else { -1.0 };
        assert_eq!(v.to_bits(), want.to_bits(), "{i}");
    }
    assert_eq!(eng.stats().aot_generic_runs, before + 1);
}

#[test]
fn every_rank_two_pattern_runs_generically_in_place_and_split_over_threads() {
    let table = aot_host::host_table(&aot_host::generic_rank2_set());
    assert_eq!(table.generic_len(), 5 * (54 + 54 * 8));
    let eng = aot_host::aot_only_engine(cfg().threads(2), table);
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    // In place, both roles, a transposed input, and one call large enough to be split.
    for (rows, n, role) in [
        (3, 50, InPlace::Then),
        (4, 33, InPlace::Else),
        (64, 8192, InPlace::Then),
    ] {
        let cond: Vec<u8> = (0..n).map(|i| (i % 5 == 0) as u8 * 0x80).collect();
        let io: Vec<u32> = (0..rows * n).map(|i| i as u32).collect();
        let other: Vec<u32> = (0..rows * n).map(|i| !(i as u32)).collect();
        let mut results = vec![];
        for e in [&interp, &eng] {
            let mut x = io.clone();
            e.select_in_place(
                TensorRef::new(&cond, &[n]),
                TensorMut::new(&mut x, &[rows, n]),
                role,
                TensorRef::with_strides(&other, &[rows, n], &[1, rows as isize]),
                Broadcast::Numpy,
            )
            .unwrap();
            results.push(x);
        }
        assert_eq!(results[0], results[1], "{rows}x{n} {role:?}");
    }
    let st = eng.stats();
    assert_eq!((st.aot_generic_runs, st.static_runs), (3, 0), "{st:?}");
}

#[test]
fn jit_engine_takes_table_kernels_first_and_compiles_the_rest() {
    let eng =
        Engine::with_config(cfg().backend(Backend::Jit).aot(conformance_table().clone())).unwrap();
    let calls = run_conformance(&eng);
    let st = eng.stats();
    assert_eq!(st.aot_exact_runs, calls);
    assert_eq!(st.compiles, 0, "{st:?}");
    // A signature the table lacks is compiled.
    let mut out = [0u16; 1000];
    eng.select(
        TensorRef::new(&[1u8; 1000], &[1000]),
        TensorRef::new(&[7u16; 1000], &[1000]),
        TensorRef::new(&[9u16; 1000], &[1000]),
        TensorMut::new(&mut out, &[1000]),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(out, [7u16; 1000]);
    assert_eq!(eng.stats().compiles, 1);
    // Prepared calls bind the table's kernel (a conformance case at width 4).
    let before = eng.stats();
    let p = eng
        .prepare(
            DType::F32,
            &[4, 5],
            &[2, 3, 4, 5],
            &[2, 3, 4, 5],
            Broadcast::TwoStep,
        )
        .unwrap();
    assert!(p.is_jit());
    let after = eng.stats();
    assert_eq!(after.aot_exact_runs, before.aot_exact_runs + 1);
    assert_eq!(after.compiles, before.compiles);
}

/// A copy of the host table's header and entries in writable memory, to corrupt.
struct TableCopy {
    header: SelectjitAotTable,
    entries: Vec<SelectjitAotEntry>,
    keys: Vec<u8>,
}

/// A writable copy of the table at `p` (in a library that stays loaded).
fn copy_of(p: usize) -> TableCopy {
    // SAFETY: the table of a library that stays loaded.
    let t = unsafe { *(p as *const SelectjitAotTable) };
    // SAFETY: as above; its entries and keys cover its counts.
    let entries = unsafe { std::slice::from_raw_parts(t.entries, t.entry_count as usize) }.to_vec();
    // SAFETY: as above.
    let keys = unsafe { std::slice::from_raw_parts(t.keys, t.keys_len as usize) }.to_vec();
    TableCopy {
        header: t,
        entries,
        keys,
    }
}

fn copy_of_host_table() -> TableCopy {
    static LIB: OnceLock<usize> = OnceLock::new();
    let p = *LIB.get_or_init(|| {
        let mut set = KernelSet::new();
        set.add_call(DType::F32, &[4], &[4], &[4], Broadcast::Numpy, Kinds::Both)
            .unwrap();
        set.add_call(
            DType::F64,
            &[3, 1],
            &[3, 5],
            &[],
            Broadcast::Numpy,
            Kinds::Both,
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let lib = aot_host::build_library(&set, dir.path(), "selectjit_bad_input");
        aot_host::load_table(&lib, "selectjit_aot_table") as usize
    });
    copy_of(p)
}

impl TableCopy {
    /// The checked constructor on this copy.
    fn check(&mut self) -> Result<AotTable, selectjit::Error> {
        self.header.entries = self.entries.as_ptr();
        self.header.keys = self.keys.as_ptr();
        // SAFETY: the copy points at its own entries and keys (covering their counts unless a
        // test changed a count, which the checks bound), and the functions are the host
        // table's, loaded for good.
        unsafe { AotTable::from_raw(&self.header) }
    }
}

fn rejected(c: &mut TableCopy, needle: &str) {
    match c.check() {
        Ok(_) => panic!("a table with {needle} was accepted"),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with("kernel table rejected: "), "{msg}");
            assert!(msg.contains(needle), "expected '{needle}' in: {msg}");
        }
    }
}

/// A change to a table copy.
type Corruption = Box<dyn Fn(&mut TableCopy)>;

fn set_text(field: &mut [u8], s: &str) {
    field.fill(0);
    field[..s.len()].copy_from_slice(s.as_bytes());
}

#[test]
fn bad_tables_are_rejected_with_a_clear_error() {
    let mut c = copy_of_host_table();
    assert_eq!(c.entries.len(), 4);
    let t = c.check().expect("the intact copy is accepted");
    assert_eq!((t.exact_len(), t.generic_len()), (2, 2));
    // Version 2 and 3 tables (mask keys, which versions 3 and 4 kept) are read as they are.
    for v in [2, 3] {
        c.header.version = v;
        let t = c.check().expect("a version 2 or 3 table is accepted");
        assert_eq!((t.exact_len(), t.generic_len(), t.nway_len()), (2, 2, 0));
    }
    c.header.version = selectjit::aot::AOT_VERSION;
    // SAFETY: NULL is allowed and rejected.
    assert!(unsafe { AotTable::from_raw(std::ptr::null()) }.is_err());

    let other_arch = if cfg!(target_arch = "aarch64") {
        "x86_64-unknown-linux-gnu"
    } else {
        "aarch64-unknown-linux-gnu"
    };
    let cases: Vec<(&str, Corruption)> = vec![
        ("bad magic", Box::new(|c| c.header.magic[0] = b'X')),
        ("version 5", Box::new(|c| c.header.version = 5)),
        ("version 1", Box::new(|c| c.header.version = 1)),
        (
            "cannot run on this",
            Box::new(move |c| set_text(&mut c.header.triple, other_arch)),
        ),
        (
            "(s390x) cannot run",
            Box::new(|c| set_text(&mut c.header.triple, "s390x-unknown-linux-gnu")),
        ),
        (
            "target triple",
            Box::new(|c| set_text(&mut c.header.triple, "no-such-triple-at-all")),
        ),
        ("NUL-terminated", Box::new(|c| c.header.triple.fill(b'x'))),
        (
            "lacks: has_imaginary",
            Box::new(|c| set_text(&mut c.header.features, "has_imaginary")),
        ),
        (
            "entries, more than",
            Box::new(|c| c.header.entry_count = AOT_MAX_ENTRIES + 1),
        ),
        ("reserved", Box::new(|c| c.header.reserved = 1)),
        ("checksum", Box::new(|c| c.header.entry_count -= 1)),
        ("checksum", Box::new(|c| c.header.checksum ^= 1)),
        ("malformed kernel key", Box::new(|c| c.keys[0] = 3)),
        // Cond's stride in the first key becomes 3: a well-formed key, a corrupted table.
        ("checksum", Box::new(|c| c.keys[10] ^= 2)),
        (
            "outside the",
            Box::new(|c| c.entries[1].key_offset = 1 << 30),
        ),
        ("outside the", Box::new(|c| c.header.keys_len -= 1)),
        ("unknown kernel kind 7", Box::new(|c| c.entries[0].kind = 7)),
        ("no function", Box::new(|c| c.entries[3].func = None)),
        (
            "duplicate kernel",
            Box::new(|c| c.entries[1] = c.entries[0]),
        ),
    ];
    for (needle, corrupt) in &cases {
        let mut c = copy_of_host_table();
        corrupt(&mut c);
        rejected(&mut c, needle);
    }
}

#[test]
fn a_rejected_table_is_an_error_and_an_engine_without_it_serves_every_call() {
    let mut c = copy_of_host_table();
    c.header.version = 7;
    let err = c
        .check()
        .expect_err("version 7 is no format of this library");
    assert!(matches!(err, selectjit::Error::Aot(_)), "{err:?}");
    assert!(err.to_string().contains("version 7"), "{err}");
    let eng = Engine::with_config(cfg().backend(Backend::Static)).unwrap();
    let mut out = [0f32; 4];
    eng.select(
        TensorRef::new(&[1, 0, 0, 9], &[4]),
        TensorRef::new(&[1.0f32, 2.0, 3.0, 4.0], &[4]),
        TensorRef::new(&[-1.0f32; 4], &[4]),
        TensorMut::new(&mut out, &[4]),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(out, [1.0, -1.0, -1.0, 4.0]);
    let st = eng.stats();
    assert_eq!(
        (st.aot_exact_runs, st.static_runs, st.aot_exact_kernels),
        (0, 1, 0)
    );
}

#[test]
fn export_refuses_bad_options() {
    let set = KernelSet::new();
    let e = |target: &str, flags: Option<Vec<String>>, symbol: &str| {
        let opts = ExportOptions {
            target: target.into(),
            isa_flags: flags,
            symbol: symbol.into(),
            verify: true,
        };
        selectjit_aot::export(&opts, &set).unwrap_err().to_string()
    };
    assert!(e("i686-unknown-linux-gnu", None, "t").contains("64-bit"));
    assert!(e("wasm32-unknown-unknown", None, "t").contains("64-bit"));
    assert!(e("not a triple", None, "t").contains("triple"));
    assert!(
        e(
            "x86_64-unknown-linux-gnu",
            Some(vec!["has_warp_drive".into()]),
            "t"
        )
        .contains("has_warp_drive")
    );
    assert!(e("x86_64-unknown-linux-gnu", None, "1table").contains("C identifier"));
    // An empty set is a valid, empty table.
    let ex = selectjit_aot::export(&ExportOptions::new("aarch64-unknown-linux-gnu"), &set).unwrap();
    assert_eq!((ex.exact, ex.generic), (0, 0));
    assert!(
        ex.header
            .contains("extern const SelectjitAotTable selectjit_aot_table;")
    );
}

#[test]
fn truncated_or_corrupted_objects_are_clear_errors() {
    let mut set = KernelSet::new();
    set.add_call(
        DType::F32,
        &[3, 1],
        &[3, 40],
        &[40],
        Broadcast::Numpy,
        Kinds::Both,
    )
    .unwrap();
    set.add_call(DType::U8, &[17], &[17], &[], Broadcast::Numpy, Kinds::Both)
        .unwrap();
    for target in [
        "x86_64-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu",
        "s390x-unknown-linux-gnu",
        "riscv64gc-unknown-linux-gnu",
    ] {
        let ex = selectjit_aot::export(&ExportOptions::new(target), &set).unwrap();
        let s = selectjit_aot::check_object(&ex.object, "selectjit_aot_table").unwrap();
        assert_eq!((s.exact, s.generic, s.triple.as_str()), (2, 2, target));
        assert_eq!(s.code_bytes, ex.code_bytes);
        assert!(selectjit_aot::check_object(&ex.object, "other_name").is_err());
        // Every truncation is an error, never a panic.
        let n = ex.object.len();
        for len in (0..n).step_by(7).chain([n - 1]) {
            let r = selectjit_aot::check_object(&ex.object[..len], "selectjit_aot_table");
            let e = r.expect_err("a truncated object was accepted").to_string();
            assert!(e.starts_with("kernel table rejected: "), "{e}");
        }
        // Flipping any byte: an error or (bytes the table's kernels do not depend on, such as
        // code, recorded sizes or a triple's vendor) the same kernels; never a panic.
        let mut rejected = 0;
        for at in 0..n {
            let mut b = ex.object.clone();
            b[at] ^= 0x41;
            match selectjit_aot::check_object(&b, "selectjit_aot_table") {
                Err(_) => rejected += 1,
                Ok(t) => assert_eq!((t.exact, t.generic, t.triple.len()), (2, 2, target.len())),
            }
        }
        assert!(rejected > 0, "{target}");
    }
}

/// Predicate kernels (a comparison or a test computed in the kernel) are exported, registered
/// by their keys and run from the table, exact and shape-generic, against numpy's semantics
/// element by element.
#[test]
fn predicate_kernels_are_exported_registered_and_run() {
    use selectjit::codegen::Ptrs;
    use selectjit::plan::Canon;
    use selectjit::plan::CondKind;
    use selectjit::plan::Pattern;
    use selectjit::plan::Signature;
    use selectjit::plan::eval_cond;
    let n = 77usize;
    let kinds = [
        (CondKind::Cmp(Canon::Lt, DType::F32), 4usize),
        (CondKind::Cmp(Canon::Eq, DType::I64), 2),
        (CondKind::Cmp(Canon::Le, DType::U64), 8),
        (CondKind::Test(selectjit::TestOp::IsNan, DType::BF16), 1),
    ];
    let sig = |kind: CondKind, w: usize, rhs: isize| {
        let r: isize = if kind.binary() { rhs } else { 0 };
        Signature::with_cond(w, kind, &[n], [&[1], &[1], &[0], &[1], &[r]]).unwrap()
    };
    let mut set = KernelSet::new();
    for &(kind, w) in &kinds {
        set.add_signature(sig(kind, w, 1));
        set.add_pattern(Pattern::of(&sig(kind, w, 0)));
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = aot_host::build_library(&set, dir.path(), "selectjit_pred");
    // SAFETY: the table of a library loaded for good, exported by this crate.
    let t = unsafe { AotTable::from_raw(aot_host::load_table(&lib, "selectjit_aot_table")) }
        .expect("the table is accepted");
    assert_eq!((t.exact_len(), t.generic_len()), (4, 4));
    let mut bits = 0x1234_5678_9abc_def0u64;
    let mut byte = move || {
        bits ^= bits << 13;
        bits ^= bits >> 7;
        bits ^= bits << 17;
        // Mostly small values, so that equal ones and NaN bit patterns (bf16 0x7fxx) meet.
        [0u8, 1, 0x7f, 0x80, 0xc0, 0xff][(bits % 6) as usize]
    };
    let mut checked = 0;
    for &(kind, w) in &kinds {
        let cw = kind.dtype().unwrap().width();
        for (generic, rhs_stride) in [(false, 1isize), (true, 0)] {
            let s = sig(kind, w, rhs_stride);
            let k = if generic {
                t.generic(&Pattern::of(&s))
            } else {
                t.exact(&s)
            }
            .unwrap_or_else(|| panic!("no kernel for {s}"));
            let lhs: Vec<u8> = (0..n * cw).map(|_| byte()).collect();
            let rhs: Vec<u8> = (0..n * cw).map(|_| byte()).collect();
            let then: Vec<u8> = (0..n * w).map(|i| i as u8).collect();
            let else_: Vec<u8> = (0..w).map(|i| 0xe0 | i as u8).collect();
            let mut out = vec![0u8; n * w];
            let want: Vec<u8> = (0..n)
                .flat_map(|i| {
                    let r = &rhs[i * cw * rhs_stride as usize..][..cw];
                    if eval_cond(kind, &lhs[i * cw..][..cw], r) {
                        then[i * w..][..w].to_vec()
                    } else {
                        else_.clone()
                    }
                })
                .collect();
            let p = Ptrs {
                cond: lhs.as_ptr(),
                then: then.as_ptr(),
                else_: else_.as_ptr(),
                out: out.as_mut_ptr(),
                rhs: rhs.as_ptr(),
            };
            // SAFETY: every operand holds the n elements (or the one) its strides address.
            unsafe { k.run(&s, p, 0, n) };
            assert_eq!(out, want, "{s} generic {generic}");
            checked += 1;
        }
    }
    assert_eq!(checked, 8);
}

/// The n-way calls of the tests below: `out(f32) = isnan(a) ? 0 : a > b ? a : !mask ? 1 : d`
/// over `n` elements, and in place `x(i32) = x < 0 ? 0 : x`.
mod nway_calls {
    use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
    use selectjit::{Broadcast, Choice, CmpOp, Cond, DType, Engine, Operand};
    use selectjit::{TensorMut, TensorRef, TestOp};

    /// The shapes file of both calls' kernels (any length: one kernel per spec).
    pub const SHAPES: &str = r#"{"cases": [
      {"nway": {"shape": [1003], "default": [1003], "branches": [
         {"test": "isnan", "operand": [1003], "value": []},
         {"cmp": ">", "lhs": [1003], "rhs": [1003], "value": [1003]},
         {"mask": [1003], "value": [], "not": true}]}, "dtype": "f32"},
      {"nway": {"shape": [5, 7], "default": [5, 7], "branches": [
         {"cmp": "<", "lhs": [5, 7], "rhs": [], "value": []}]}, "dtype": "i32"}
    ]}"#;

    /// The first call's spec, from the API.
    pub fn spec(n: usize) -> NwayKernelSpec {
        let x: &[usize] = &[n];
        let b = [
            NwayBranch {
                cond: NwayCond::Test(TestOp::IsNan, DType::F32, x),
                not: false,
                value: &[],
            },
            NwayBranch {
                cond: NwayCond::Cmp(CmpOp::Gt, DType::F32, x, x),
                not: false,
                value: x,
            },
            NwayBranch {
                cond: NwayCond::Mask(x),
                not: true,
                value: &[],
            },
        ];
        NwayKernelSpec::for_call(DType::F32, x, &b, x).unwrap()
    }

    /// Deterministic bytes: f32 values with NaNs, ties and signed zeros.
    fn f32s(n: usize, seed: u32) -> Vec<u8> {
        let pool = [0.0f32, -0.0, 1.0, -1.0, 2.5, f32::NAN, f32::INFINITY, -7.0];
        (0..n)
            .flat_map(|i| {
                let v = pool[(i as u32).wrapping_mul(2654435761).wrapping_add(seed) as usize % 8];
                v.to_le_bytes()
            })
            .collect()
    }

    /// Runs both calls of `n` elements on `eng`; their outputs' bytes.
    pub fn run(eng: &Engine, n: usize) -> [Vec<u8>; 2] {
        let (a, b) = (f32s(n, 1), f32s(n, 5));
        let mask: Vec<u8> = (0..n).map(|i| [0u8, 1, 0x80, 0][i % 4]).collect();
        let d = f32s(n, 3);
        let (zero, one) = (0.0f32.to_le_bytes(), 1.0f32.to_le_bytes());
        let x: &[usize] = &[n];
        let av = Operand::from_bytes(DType::F32, TensorRef::new(&a, x));
        let bv = Operand::from_bytes(DType::F32, TensorRef::new(&b, x));
        let conds = [
            Cond::isnan(av),
            Cond::gt(av, bv),
            Cond::mask(TensorRef::new(&mask, x)).not(),
        ];
        let values = [
            Choice::Tensor(TensorRef::new(&zero, &[])),
            Choice::Tensor(TensorRef::new(&a, x)),
            Choice::Tensor(TensorRef::new(&one, &[])),
        ];
        let mut out = vec![0xa5u8; 4 * n];
        eng.select_n_bytes(
            DType::F32,
            &conds,
            &values,
            Choice::Tensor(TensorRef::new(&d, x)),
            TensorMut::new(&mut out, x),
            Broadcast::Numpy,
        )
        .unwrap();
        // In place over a [5, 7] i32 output (the second spec's shape: the same kernel).
        let mut io: Vec<u8> = (0..35i32)
            .flat_map(|i| (i * 37 % 23 - 11).to_le_bytes())
            .collect();
        let z = 0i32.to_le_bytes();
        eng.select_n_bytes(
            DType::I32,
            &[Cond::lt(Operand::in_place(), 0i32)],
            &[Choice::Tensor(TensorRef::new(&z, &[]))],
            Choice::Out,
            TensorMut::new(&mut io, &[5, 7]),
            Broadcast::Numpy,
        )
        .unwrap();
        [out, io]
    }
}

/// N-way kernels named by the shapes file and by the API are one kernel; exported for the host,
/// registered and run by `select_n` on an engine without a code generator (and on a JIT engine
/// that plans non-temporal stores, before it compiles one itself), byte for byte as the
/// interpreter; the exported object reads back with its n-way kernels for every target.
#[test]
fn nway_kernels_are_exported_registered_and_run() {
    let mut f = parse_shapes(nway_calls::SHAPES, &[DType::F32]).unwrap();
    assert_eq!((f.cases, f.set.nway().len()), (2, 2));
    assert!(
        !f.set.add_nway(nway_calls::spec(8)),
        "the API names the same kernel"
    );
    let table = aot_host::host_table(&f.set);
    assert_eq!(
        (table.exact_len(), table.generic_len(), table.nway_len()),
        (0, 0, 2)
    );
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let aot = aot_host::aot_only_engine(EngineConfig::new(), table.clone());
    let jit = Engine::with_config(EngineConfig::new().nt_min_bytes(0).aot(table)).unwrap();
    for n in [1usize, 3, 16, 17, 1003, 4099] {
        let want = nway_calls::run(&interp, n);
        for (name, eng) in [("aot", &aot), ("jit with the table", &jit)] {
            let before = eng.stats().nway_pass_runs;
            assert_eq!(nway_calls::run(eng, n), want, "{name}, {n} elements");
            assert_eq!(
                eng.stats().nway_pass_runs,
                before + 2,
                "{name}, {n} elements"
            );
        }
    }
    // The JIT engine compiled no n-way kernel: the table's (ordinary stores) served the calls it
    // planned with non-temporal ones; no kernel at all ran two-way.
    assert_eq!(jit.stats().nway_compiles, 0);
    let s = aot.stats();
    assert_eq!((s.static_runs, s.aot_generic_runs), (0, 0));

    for target in [
        "x86_64-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu",
        "s390x-unknown-linux-gnu",
        "riscv64gc-unknown-linux-gnu",
    ] {
        let ex = selectjit_aot::export(&ExportOptions::new(target), &f.set).unwrap();
        assert_eq!((ex.exact, ex.generic, ex.nway), (0, 0, 2));
        assert!(ex.header.contains("#define SELECTJIT_AOT_NWAY 2"));
        let back = selectjit_aot::check_object(&ex.object, "selectjit_aot_table").unwrap();
        assert_eq!((back.exact, back.generic, back.nway), (0, 0, 2), "{target}");
    }
}

/// Specs the Cranelift generator does not compile are export errors that name the spec, never
/// panics; so is a spec of more branches than a key holds.
#[test]
fn unsupported_nway_kernels_are_clear_export_errors() {
    use selectjit::aot::key::{nway_key, parse_nway_key};
    use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
    use selectjit::{CmpOp, TestOp};
    let x: &[usize] = &[40];
    let cmp = |d| NwayBranch {
        cond: NwayCond::Cmp(CmpOp::Le, d, x, &[]),
        not: false,
        value: x,
    };
    let f16 = NwayKernelSpec::for_call(DType::F32, x, &[cmp(DType::F16)], x).unwrap();
    let c128 = NwayKernelSpec::for_call(DType::Complex128, x, &[cmp(DType::I8)], x).unwrap();
    let mut rows_key = nway_key(&f16);
    rows_key[2] = 0b10; // a kernel of rows
    rows_key[6] = 3; // of i32 comparisons
    let rows = parse_nway_key(&rows_key).unwrap();
    let many_branches: Vec<NwayBranch<'_>> = (0..256)
        .map(|_| NwayBranch {
            cond: NwayCond::Test(TestOp::IsInf, DType::F64, x),
            not: false,
            value: &[],
        })
        .collect();
    let many = NwayKernelSpec::for_call(DType::I8, x, &many_branches, x).unwrap();
    for (spec, needle) in [
        (f16, "f16 <="),
        (c128, "width 16"),
        (rows, "width 4 rows"),
        (many, "more branches than a table key holds"),
    ] {
        let mut set = KernelSet::new();
        set.add_call(DType::F32, &[4], &[4], &[4], Broadcast::Numpy, Kinds::Both)
            .unwrap();
        set.add_nway(spec);
        for target in ["x86_64-unknown-linux-gnu", "s390x-unknown-linux-gnu"] {
            let e = selectjit_aot::export(&ExportOptions::new(target), &set)
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{target}: {e}");
        }
    }
}

/// Tables with n-way entries: a table of version 3 may not hold one, nor one of rows, nor the
/// same spec twice; an n-way key under another kind is malformed.
#[test]
fn bad_nway_entries_are_rejected() {
    static LIB: OnceLock<usize> = OnceLock::new();
    let p = *LIB.get_or_init(|| {
        let mut set = KernelSet::new();
        set.add_call(DType::F32, &[4], &[4], &[4], Broadcast::Numpy, Kinds::Exact)
            .unwrap();
        set.add_nway(nway_calls::spec(9));
        let dir = tempfile::tempdir().unwrap();
        let lib = aot_host::build_library(&set, dir.path(), "selectjit_bad_nway");
        aot_host::load_table(&lib, "selectjit_aot_table") as usize
    });
    let t = copy_of(p).check().expect("the intact copy is accepted");
    assert_eq!((t.exact_len(), t.nway_len()), (1, 1));
    let cases: Vec<(&str, Corruption)> = vec![
        (
            "n-way kernel in a table of version 3",
            Box::new(|c| c.header.version = 3),
        ),
        (
            "of rows",
            Box::new(|c| {
                let at = c.entries[1].key_offset as usize;
                c.keys[at + 2] |= 0b10;
            }),
        ),
        (
            "duplicate n-way kernel",
            Box::new(|c| c.entries[0] = c.entries[1]),
        ),
        ("malformed kernel key", Box::new(|c| c.entries[1].kind = 0)),
        ("malformed kernel key", Box::new(|c| c.entries[0].kind = 2)),
    ];
    for (needle, corrupt) in &cases {
        let mut c = copy_of(p);
        corrupt(&mut c);
        rejected(&mut c, needle);
    }
}

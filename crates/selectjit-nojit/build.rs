//! Exports, for the crate's target, the kernels of every valid conformance case (exact and
//! shape-generic, five element widths) and a few predicate kernels (table format 3), and links
//! them into the crate: the steps of the README's `build.rs` for a program that may not generate
//! code at run time.

use std::path::PathBuf;
use std::process::Command;

use selectjit::plan::Canon;
use selectjit::plan::CondKind;
use selectjit::plan::Pattern;
use selectjit::plan::Signature;
use selectjit::{DType, TestOp};
use selectjit_aot::{ExportOptions, export, parse_shapes};

/// The predicate kernels of `tests/nojit.rs` (a comparison or a test computed in the kernel,
/// table format 3): for each condition and selected width, the shape-generic kernels of every
/// one-dimensional call whose operands are views or scalars (each stride 1 or 0).
const PREDICATES: [(CondKind, usize); 6] = [
    (CondKind::Cmp(Canon::Lt, DType::F32), 4),
    (CondKind::Cmp(Canon::Le, DType::F32), 4),
    (CondKind::Cmp(Canon::Eq, DType::I64), 4),
    (CondKind::Cmp(Canon::Le, DType::U64), 1),
    (CondKind::Cmp(Canon::Lt, DType::BF16), 2),
    (CondKind::Test(TestOp::IsNan, DType::F64), 8),
];

fn main() {
    let shapes = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/shapes.json");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={shapes}");
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let text = std::fs::read_to_string(shapes).expect("the conformance file");
    // The conformance file is a shapes file as it is: every valid case, both kernel kinds.
    let widths = [
        DType::U8,
        DType::F16,
        DType::F32,
        DType::F64,
        DType::Complex128,
    ];
    let mut set = parse_shapes(&text, &widths)
        .expect("the conformance cases")
        .set;
    for (kind, w) in PREDICATES {
        for bits in 0..16isize {
            let s = |b: isize| (bits >> b) & 1;
            if !kind.binary() && s(3) == 1 {
                continue;
            }
            let sig =
                Signature::with_cond(w, kind, &[2], [&[s(0)], &[s(1)], &[s(2)], &[1], &[s(3)]])
                    .expect("a one-dimensional predicate signature");
            set.add_pattern(Pattern::of(&sig));
        }
    }
    // Build scripts run unoptimised: the verifier would double the export time.
    let opts = ExportOptions {
        verify: false,
        ..ExportOptions::new(&target)
    };
    let ex = export(&opts, &set).unwrap_or_else(|e| panic!("exporting kernels for {target}: {e}"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("conformance_kernels.o");
    std::fs::write(&obj, &ex.object).expect("writing the kernel object");
    // A library crate: archive the object so that it travels with the rlib.
    let ar = std::env::var("AR").unwrap_or_else(|_| "ar".into());
    let status = Command::new(&ar)
        .arg("crs")
        .arg(out.join("libconformance_kernels.a"))
        .arg(&obj)
        .status()
        .unwrap_or_else(|e| panic!("running {ar}: {e}"));
    assert!(status.success(), "{ar} failed");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=conformance_kernels");
}

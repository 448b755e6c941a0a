//! Exports, for the crate's target, the kernels of every valid conformance case (exact and
//! shape-generic, five element widths) and links them into the crate: the steps of the README's
//! `build.rs` for a program that may not generate code at run time.

use std::path::PathBuf;
use std::process::Command;

use selectjit::{Broadcast, DType};
use selectjit_aot::{ExportOptions, KernelSet, Kinds, export};

fn main() {
    let shapes = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/shapes.json");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={shapes}");
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let text = std::fs::read_to_string(shapes).expect("the conformance file");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let mut set = KernelSet::new();
    let shape = |x: &serde_json::Value| -> Vec<usize> {
        x.as_array()
            .expect("a shape")
            .iter()
            .map(|d| d.as_u64().expect("a size") as usize)
            .collect()
    };
    for case in v["cases"].as_array().expect("cases") {
        if case["expect"] == "error" {
            continue;
        }
        let mode = match case["mode"].as_str().expect("a mode") {
            "numpy" => Broadcast::Numpy,
            "two-step" => Broadcast::TwoStep,
            "none" => Broadcast::None,
            _ => Broadcast::Pdpd {
                axis: case["axis"].as_i64().unwrap_or(-1),
            },
        };
        let (c, t, e) = (
            shape(&case["cond"]),
            shape(&case["then"]),
            shape(&case["else"]),
        );
        for dt in [
            DType::U8,
            DType::F16,
            DType::F32,
            DType::F64,
            DType::Complex128,
        ] {
            set.add_call(dt, &c, &t, &e, mode, Kinds::Both)
                .expect("a valid conformance case");
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

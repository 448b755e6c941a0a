//! Exports kernels ahead of time for the fuzz target's own machine and links them into the fuzz
//! binaries: the `differential` target fuzzes an engine that serves calls from this table (key
//! matching, the shape-generic fallback, the static fallback) exactly as a program built this
//! way would. The same steps as the README's `build.rs` example.

use std::path::PathBuf;

use selectjit_aot::{ExportOptions, KernelSet, Kinds, export};
use selectjit::{Broadcast, DType};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let mut set = KernelSet::new();
    // Every shape-generic kernel of rank 1 and 2, at every width.
    set.add_patterns_up_to(2, &[1, 2, 4, 8, 16]);
    // Exact kernels for small contiguous calls and a few broadcasts the fuzzer reaches often.
    for dt in [DType::U8, DType::F16, DType::F32, DType::F64, DType::Complex128] {
        for n in 1..=25usize {
            set.add_call(dt, &[n], &[n], &[n], Broadcast::Numpy, Kinds::Exact).unwrap();
            set.add_call(dt, &[n], &[n], &[], Broadcast::Numpy, Kinds::Exact).unwrap();
            set.add_call(dt, &[], &[n], &[n], Broadcast::Numpy, Kinds::Exact).unwrap();
        }
    }
    // Build scripts run unoptimised: the verifier would double the export time.
    let opts = ExportOptions {
        verify: false,
        ..ExportOptions::new(&target)
    };
    let ex = export(&opts, &set)
        .unwrap_or_else(|e| panic!("exporting kernels for {target}: {e}"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("selectjit_kernels.o");
    std::fs::write(&obj, &ex.object).expect("writing the kernel object");
    println!("cargo:rustc-link-arg-bins={}", obj.display());
}

//! AOT kernel tables for this host, in-process: kernels are exported ahead of time for the host
//! (`selectjit::aot::export`, the same object `selectjit aot --target host` writes), linked into
//! a shared library with the system C compiler, loaded with `dlopen`, and the table symbol is
//! registered through the checked constructor. What a program does with `build.rs` and static
//! linking, without needing a build script in the test crate.
#![allow(dead_code)]

use std::ffi::{CString, c_char, c_int, c_void};
use std::path::Path;
use std::process::Command;

use selectjit::aot::{AotTable, SelectjitAotTable};
use selectjit::{Backend, Engine, EngineConfig};
use selectjit_aot::{ExportOptions, KernelSet, export};

unsafe extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *const c_char;
}
const RTLD_NOW: c_int = 2;
const RTLD_LOCAL: c_int = 0;

/// Exports `set` for the host into `dir` and links it into `dir/lib<name>.so`; returns its path.
pub fn build_library(set: &KernelSet, dir: &Path, name: &str) -> std::path::PathBuf {
    let ex = export(&ExportOptions::new("host"), set).expect("export for the host");
    let obj = dir.join(format!("{name}.o"));
    std::fs::write(&obj, &ex.object).unwrap();
    let lib = dir.join(format!("lib{name}.so"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg("-shared")
        .arg("-o")
        .arg(&lib)
        .arg(&obj)
        .output()
        .expect("a C compiler (cc) on PATH");
    assert!(
        out.status.success(),
        "linking the exported object failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// Loads a library for good (never unloaded, so its table lives as long as the process) and
/// returns the address of its table symbol.
pub fn load_table(lib: &Path, symbol: &str) -> *const SelectjitAotTable {
    let path = CString::new(lib.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; the library's constructors are the C runtime's only.
    let h = unsafe { dlopen(path.as_ptr(), RTLD_NOW | RTLD_LOCAL) };
    if h.is_null() {
        // SAFETY: dlerror returns a NUL-terminated message after a failed dlopen.
        let msg = unsafe { std::ffi::CStr::from_ptr(dlerror()) };
        panic!("dlopen {}: {msg:?}", lib.display());
    }
    let sym = CString::new(symbol).unwrap();
    // SAFETY: a live handle (never closed) and a NUL-terminated name.
    let p = unsafe { dlsym(h, sym.as_ptr()) };
    assert!(!p.is_null(), "no symbol {symbol} in {}", lib.display());
    p as *const SelectjitAotTable
}

/// A checked table of `set`'s kernels for this host.
pub fn host_table(set: &KernelSet) -> AotTable {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_library(set, dir.path(), "selectjit_test_kernels");
    // The loaded library stays mapped after its file and folder are removed.
    let t = load_table(&lib, selectjit::aot::DEFAULT_SYMBOL);
    drop(dir);
    // SAFETY: the table of an object just exported for this host, in a library that stays
    // loaded.
    unsafe { AotTable::from_raw(t) }.expect("the host's own table is accepted")
}

/// Every shape-generic kernel of rank 1 and 2, for every width (what a program that may not
/// generate code would ship to run any such call without the static kernels).
pub fn generic_rank2_set() -> KernelSet {
    let mut set = KernelSet::new();
    set.add_patterns_up_to(2, &[1, 2, 4, 8, 16]);
    set
}

/// The table of [`generic_rank2_set`], built once per process.
pub fn generic_rank2_table() -> AotTable {
    static T: std::sync::OnceLock<AotTable> = std::sync::OnceLock::new();
    T.get_or_init(|| host_table(&generic_rank2_set())).clone()
}

/// An engine with no code generator at all: the table's kernels, else the static kernels.
pub fn aot_only_engine(config: EngineConfig, table: AotTable) -> Engine {
    Engine::with_config(config.clone().backend(Backend::Static).aot(table)).expect("engine")
}

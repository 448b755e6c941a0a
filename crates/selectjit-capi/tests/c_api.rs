//! The C ABI from C: `tests/c/test_capi.c` (with an AOT kernel object exported for the host)
//! and the README's example `examples/c/select.c` are compiled with the system C compiler
//! against `include/selectjit.h` and the crate's shared library, then run.

use std::path::PathBuf;
use std::process::Command;

/// The folder holding this profile's `libselectjit.so` (`target/<profile>`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap(); // target/<profile>/deps/c_api-<hash>
    exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf()
}

/// Builds this profile's shared library: `cargo test` builds the crate's library only for
/// Rust (it is a cdylib and staticlib, which tests do not link). Cargo does not hold its build
/// lock while tests run; a build that is up to date costs a fraction of a second.
fn build_shared_library(lib: &std::path::Path) {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--lib", "-p", "selectjit-capi"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if lib.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    if let Some(target) = lib.parent() {
        cmd.arg("--target-dir").arg(target);
    }
    let out = cmd.output().expect("cargo");
    assert!(
        out.status.success(),
        "building the shared library failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compiles one C file of the crate against the header and the shared library, with the extra
/// objects `objects` (headers beside them are found too); returns the executable (in `dir`).
fn compile_c(source: &str, dir: &std::path::Path, objects: &[PathBuf]) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| build_shared_library(&lib));
    assert!(
        lib.join("libselectjit.so").exists(),
        "no libselectjit.so in {} (the [lib] crate-type includes cdylib)",
        lib.display()
    );
    let exe = dir.join(source.replace(['/', '.'], "_"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1"])
        .arg("-I")
        .arg(root.join("include"))
        .arg("-I")
        .arg(dir)
        .arg(root.join(source))
        .args(objects)
        .arg("-L")
        .arg(&lib)
        .arg("-lselectjit")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("a C compiler (cc) on PATH");
    assert!(
        out.status.success(),
        "cc {source} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The README's C example (`examples/c/select.c`) builds with warnings as errors and prints
/// the expected results, a reversed view included.
#[test]
fn readme_c_example_runs() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c("../../examples/c/select.c", dir.path(), &[]);
    let run = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("where:    1 8 3 4\n"), "{stdout}");
    assert!(stdout.contains("reversed: 4 8 2 1\n"), "{stdout}");
    assert!(
        stdout.contains("bad view: layout: then: ") && stdout.contains("dim 1"),
        "{stdout}"
    );
}

#[test]
fn c_program_exercises_the_abi() {
    let dir = tempfile::tempdir().unwrap();
    // The AOT kernel table the program registers: exported for this host, linked statically.
    let mut set = selectjit_aot::KernelSet::new();
    let np = selectjit_core::Broadcast::Numpy;
    let (both, generic) = (selectjit_aot::Kinds::Both, selectjit_aot::Kinds::Generic);
    set.add_call(
        selectjit_core::DType::I64,
        &[2, 2],
        &[2, 2],
        &[2, 2],
        np,
        both,
    )
    .unwrap();
    set.add_call(selectjit_core::DType::F32, &[3], &[2, 3], &[], np, generic)
        .unwrap();
    let ex = selectjit_aot::export(&selectjit_aot::ExportOptions::new("host"), &set).unwrap();
    assert_eq!((ex.exact, ex.generic), (1, 2));
    let obj = dir.path().join("kernels.o");
    std::fs::write(&obj, &ex.object).unwrap();
    std::fs::write(dir.path().join("kernels.h"), &ex.header).unwrap();
    let exe = compile_c("tests/c/test_capi.c", dir.path(), &[obj]);
    let run = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "C test failed:\n{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or("");
    assert!(last.ends_with(" passed, 0 failed"), "{stdout}");
    let passed: usize = last.split_whitespace().next().unwrap().parse().unwrap();
    assert!(passed >= 3990, "only {passed} checks ran");
}

/// The AOT table types in `include/selectjit.h` (from cbindgen.toml) are the text the library
/// writes into every exported header, so that both headers can be included together.
#[test]
fn header_has_the_aot_types_verbatim() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(root.join("include/selectjit.h")).unwrap();
    assert!(
        header.contains(selectjit_core::aot::C_TYPES),
        "include/selectjit.h lacks selectjit_core::aot::C_TYPES: regenerate it with cbindgen"
    );
}

/// The checked-in header is exactly what cbindgen generates from `src/lib.rs` (and the modules
/// its `mod` lines name, in that order) and `cbindgen.toml` (so C sees the Rust structs as they
/// are). With `SELECTJIT_WRITE_HEADER=1`
/// the test writes it first: that is how the header is regenerated.
#[test]
fn header_is_cbindgen_output() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).unwrap();
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/lib.rs"))
        .generate()
        .expect("cbindgen");
    let mut want = Vec::new();
    bindings.write(&mut want);
    let want = String::from_utf8(want).unwrap();
    let path = root.join("include/selectjit.h");
    if std::env::var_os("SELECTJIT_WRITE_HEADER").is_some_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap();
    assert!(
        have == want,
        "include/selectjit.h is not what cbindgen generates from src/lib.rs; regenerate it with \
         SELECTJIT_WRITE_HEADER=1 cargo test -p selectjit-capi --test c_api header_is_cbindgen_output"
    );
}

/// `SelectjitStats` in the header lists exactly the counters of `CacheStats::fields()`, by
/// name and in order, after `struct_size` and `reserved`, each a `uint64_t` (the library fills
/// them by index).
#[test]
fn header_stats_are_cache_stats_fields() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(root.join("include/selectjit.h")).unwrap();
    let body = header
        .split("typedef struct SelectjitStats {")
        .nth(1)
        .and_then(|b| b.split("} SelectjitStats;").next())
        .expect("typedef struct SelectjitStats { ... } SelectjitStats; in the header");
    let members: Vec<(String, String)> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with("/*"))
        .map(|l| {
            let l = l
                .strip_suffix(';')
                .unwrap_or_else(|| panic!("member line {l:?}"));
            let (ty, name) = l.rsplit_once(' ').unwrap();
            (ty.trim().to_string(), name.to_string())
        })
        .collect();
    let stats = selectjit_core::Engine::new().stats();
    let fields = stats.fields();
    let mut want = vec![
        ("uint32_t".to_string(), "struct_size".to_string()),
        ("uint32_t".to_string(), "reserved".to_string()),
    ];
    want.extend(
        fields
            .iter()
            .map(|(n, _)| ("uint64_t".to_string(), n.to_string())),
    );
    assert_eq!(members, want);
}

/// Every exported function of `src/` (one module per C object) is declared in the header (they
/// cannot drift).
#[test]
fn header_declares_every_exported_function() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    assert!(files.len() > 1, "{files:?}");
    let src: String = files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let header = std::fs::read_to_string(root.join("include/selectjit.h")).unwrap();
    let names: Vec<&str> = src
        .lines()
        .filter(|l| l.contains("extern \"C\" fn "))
        .filter_map(|l| l.split("fn ").nth(1))
        .filter_map(|l| l.split('(').next())
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    for n in names {
        assert!(
            header.contains(&format!("{n}(")),
            "{n} is missing from include/selectjit.h"
        );
    }
}

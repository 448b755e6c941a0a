//! The `selectjit` command on real `.npy` files.

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use selectjit::DType;
use selectjit_cli::npy::{npy_bytes, read_npy};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_selectjit"))
}

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().unwrap())
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
    fn write(&self, name: &str, dtype: DType, shape: &[usize], data: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, npy_bytes(dtype, shape, data).unwrap()).unwrap();
        p
    }
    fn raw(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}

/// Runs `selectjit run` and returns (status, stdout, stderr).
fn run(args: &[&Path], extra: &[&str]) -> (i32, String, String) {
    let o = bin()
        .arg("run")
        .arg("--cond")
        .arg(args[0])
        .arg("--then")
        .arg(args[1])
        .arg("--else")
        .arg(args[2])
        .arg("-o")
        .arg(args[3])
        .args(extra)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn onnx_example() {
    let d = Dir::new();
    let c = d.write("c.npy", DType::Bool, &[2, 2], &[1, 0, 1, 1]);
    let x = d.write("x.npy", DType::I64, &[2, 2], &i64s(&[1, 2, 3, 4]));
    let y = d.write("y.npy", DType::I64, &[2, 2], &i64s(&[9, 8, 7, 6]));
    let out = d.path("out.npy");
    for backend in ["jit", "static", "interp"] {
        let (code, _, err) = run(&[&c, &x, &y, &out], &["--backend", backend]);
        assert_eq!(code, 0, "{err}");
        let a = read_npy(&out).unwrap();
        assert_eq!((a.dtype, a.shape.clone()), (DType::I64, vec![2, 2]));
        assert_eq!(a.data, i64s(&[1, 8, 3, 4]), "{backend}");
    }
}

/// Every dtype, broadcast, nonzero cond bytes other than 1: the output is checked element by
/// element against a computation in the test.
#[test]
fn every_dtype_with_broadcast() {
    let d = Dir::new();
    let cond = [0u8, 1, 1, 0, 0, 1];
    let c = d.write("c.npy", DType::Bool, &[2, 3], &cond);
    for dt in DType::ALL {
        let w = dt.width();
        let t: Vec<u8> = (0..3 * w).map(|i| (i * 7 + 3) as u8).collect();
        let e: Vec<u8> = (0..w).map(|i| (i * 5 + 200) as u8).collect();
        let tp = d.write("t.npy", dt, &[3], &t);
        let ep = d.write("e.npy", dt, &[], &e);
        let out = d.path(&format!("o_{dt}.npy"));
        let (code, _, err) = run(&[&c, &tp, &ep, &out], &[]);
        assert_eq!(code, 0, "{dt}: {err}");
        let a = read_npy(&out).unwrap();
        assert_eq!((a.dtype, a.shape.clone()), (dt, vec![2, 3]));
        for i in 0..6 {
            let want = if cond[i] != 0 {
                &t[(i % 3) * w..(i % 3 + 1) * w]
            } else {
                &e[..]
            };
            assert_eq!(&a.data[i * w..(i + 1) * w], want, "{dt} element {i}");
        }
    }
}

fn header(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut h = dict.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(h.len() as u16).to_le_bytes());
    v.extend_from_slice(h.as_bytes());
    v.extend_from_slice(data);
    v
}

#[test]
fn fortran_order_and_bf16_inputs() {
    let d = Dir::new();
    // then [[1,2,3],[4,5,6]] stored column-major: 1,4,2,5,3,6 (f32).
    let vals = [1f32, 4.0, 2.0, 5.0, 3.0, 6.0];
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let t = d.raw(
        "t.npy",
        &header(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
            &bytes,
        ),
    );
    let e = d.write("e.npy", DType::F32, &[], &(-1f32).to_le_bytes());
    let c = d.write("c.npy", DType::Bool, &[3], &[1, 0, 1]);
    let out = d.path("o.npy");
    let (code, _, err) = run(&[&c, &t, &e, &out], &[]);
    assert_eq!(code, 0, "{err}");
    let a = read_npy(&out).unwrap();
    let got: Vec<f32> = a
        .data
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, [1.0, -1.0, 3.0, 4.0, -1.0, 6.0]);
    // bfloat16 as |V2 in, <V2 out, bytes kept.
    let t = d.raw(
        "b.npy",
        &header(
            "{'descr': '|V2', 'fortran_order': False, 'shape': (3,), }",
            &[1, 2, 3, 4, 5, 6],
        ),
    );
    let e = d.raw(
        "be.npy",
        &header(
            "{'descr': '<V2', 'fortran_order': False, 'shape': (), }",
            &[9, 9],
        ),
    );
    let (code, _, err) = run(&[&c, &t, &e, &out], &[]);
    assert_eq!(code, 0, "{err}");
    let raw = std::fs::read(&out).unwrap();
    assert!(String::from_utf8_lossy(&raw[..80]).contains("'<V2'"));
    assert_eq!(read_npy(&out).unwrap().data, [1, 2, 9, 9, 5, 6]);
}

#[test]
fn modes_and_axis() {
    let d = Dir::new();
    let c = d.write("c.npy", DType::Bool, &[3], &[1, 0, 1]);
    let t = d.write(
        "t.npy",
        DType::U8,
        &[2, 3, 4],
        &(0..24).collect::<Vec<u8>>(),
    );
    let e = d.write("e.npy", DType::U8, &[3, 4], &[100; 12]);
    let out = d.path("o.npy");
    // pdpd axis 1: cond [3] and else [3,4] land on dims 1.. of [2,3,4].
    let (code, _, err) = run(&[&c, &t, &e, &out], &["--broadcast", "pdpd", "--axis", "1"]);
    assert_eq!(code, 0, "{err}");
    let a = read_npy(&out).unwrap();
    for i in 0..24 {
        let row = (i / 4) % 3;
        assert_eq!(a.data[i], if row != 1 { i as u8 } else { 100 });
    }
    // pdpd axis -1 right-aligns cond [3] on the last dim (4): an error.
    let (code, _, err) = run(&[&c, &t, &e, &out], &["--broadcast", "pdpd"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("error: pdpd"), "{err}");
    // two-step rejects a cond that would extend the output; numpy accepts it.
    let c2 = d.write("c2.npy", DType::Bool, &[2, 3], &[1; 6]);
    let t2 = d.write("t2.npy", DType::U8, &[3], &[1, 2, 3]);
    let (code, _, _) = run(&[&c2, &t2, &t2, &out], &["--broadcast", "two-step"]);
    assert_eq!(code, 2);
    let (code, _, _) = run(&[&c2, &t2, &t2, &out], &["--broadcast", "numpy"]);
    assert_eq!(code, 0);
    let (code, _, _) = run(&[&c2, &t2, &t2, &out], &["--broadcast", "none"]);
    assert_eq!(code, 2);
}

/// two-step: cond goes into the then/else result one way. These four calls must fail on every
/// backend with one `error:` line, exit 2 and no output file (numpy mode accepts them).
#[test]
fn two_step_cond_may_not_grow_the_output() {
    let d = Dir::new();
    let rows: [(&[usize], &[usize], &[usize]); 4] = [
        (&[17], &[1], &[]),
        (&[17, 1, 3], &[1, 1, 1], &[]),
        (&[0, 16, 1], &[1, 1, 1], &[1, 1, 1]),
        (&[2, 1], &[1, 3], &[3]),
    ];
    for (k, (cs, ts, es)) in rows.iter().enumerate() {
        let n = |s: &[usize]| s.iter().product::<usize>();
        let c = d.write(&format!("c{k}.npy"), DType::Bool, cs, &vec![1; n(cs)]);
        let t = d.write(&format!("t{k}.npy"), DType::F32, ts, &vec![0; 4 * n(ts)]);
        let e = d.write(&format!("e{k}.npy"), DType::F32, es, &vec![0; 4 * n(es)]);
        for backend in ["jit", "static", "interp"] {
            let out = d.path(&format!("out{k}{backend}.npy"));
            let (code, _, err) = run(
                &[&c, &t, &e, &out],
                &["--broadcast", "two-step", "--backend", backend],
            );
            assert_eq!(code, 2, "row {k} {backend}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with("error: two-step broadcast of cond"),
                "{err}"
            );
            assert!(err.contains("cannot be broadcast into output"), "{err}");
            assert!(!out.exists(), "row {k} {backend}: output written");
            let (code, _, err) = run(&[&c, &t, &e, &out], &["--backend", backend]);
            assert_eq!(code, 0, "numpy row {k} {backend}: {err}");
        }
    }
}

/// `--backend jit` on every tier (`--tier`, emulated where the host lacks it), `static` and
/// `interp` write the same bytes on every conformance case.
#[test]
fn backends_agree_on_conformance_cases() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/shapes.json"
    ))
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let d = Dir::new();
    let tiers = common::tiers();
    let shape = |x: &serde_json::Value| -> Vec<usize> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap() as usize)
            .collect()
    };
    let mut ran = 0;
    for (k, case) in v["cases"].as_array().unwrap().iter().enumerate() {
        if case["expect"].is_string() {
            continue;
        }
        let (cs, ts, es) = (
            shape(&case["cond"]),
            shape(&case["then"]),
            shape(&case["else"]),
        );
        let n = |s: &[usize]| s.iter().product::<usize>();
        let cond: Vec<u8> = (0..n(&cs)).map(|i| [0u8, 1, 7][i % 3]).collect();
        let c = d.write("c.npy", DType::Bool, &cs, &cond);
        let t = d.write(
            "t.npy",
            DType::F16,
            &ts,
            &(0..n(&ts) * 2).map(|i| i as u8).collect::<Vec<_>>(),
        );
        let e = d.write(
            "e.npy",
            DType::F16,
            &es,
            &(0..n(&es) * 2).map(|i| !(i as u8)).collect::<Vec<_>>(),
        );
        let mut mode = vec!["--broadcast", case["mode"].as_str().unwrap()];
        let axis = case["axis"].as_i64().unwrap_or(-1).to_string();
        mode.extend(["--axis", axis.as_str()]);
        let mut outs = Vec::new();
        let mut runs: Vec<Vec<String>> = vec![
            vec!["--backend".into(), "interp".into()],
            vec!["--backend".into(), "static".into()],
        ];
        for (tier, emulate) in &tiers {
            let mut a = vec![
                "--backend".into(),
                "jit".into(),
                "--tier".into(),
                tier.name().into(),
            ];
            if *emulate {
                a.push("--emulate".into());
            }
            runs.push(a);
        }
        for (r, extra) in runs.iter().enumerate() {
            let out = d.path(&format!("o_{k}_{r}.npy"));
            let mut args = mode.clone();
            args.extend(extra.iter().map(String::as_str));
            let (code, _, err) = run(&[&c, &t, &e, &out], &args);
            assert_eq!(code, 0, "case {k} {extra:?}: {err}");
            let a = read_npy(&out).unwrap();
            assert_eq!(a.shape, shape(&case["expect"]), "case {k}");
            outs.push(std::fs::read(&out).unwrap());
        }
        for (r, extra) in runs.iter().enumerate().skip(1) {
            assert_eq!(outs[0], outs[r], "case {k}: {extra:?} differs from interp");
        }
        ran += 1;
    }
    assert!(ran >= 20, "only {ran} cases ran");
}

/// Each failure: exit 2, exactly one line on stderr starting `error:`, and no output file.
#[test]
fn errors_leave_no_output() {
    let d = Dir::new();
    let c = d.write("c.npy", DType::Bool, &[2], &[1, 0]);
    let t = d.write("t.npy", DType::F32, &[2], &[0; 8]);
    let t3 = d.write("t3.npy", DType::F32, &[3], &[0; 12]);
    let e64 = d.write("e64.npy", DType::F64, &[2], &[0; 16]);
    let ci = d.write("ci.npy", DType::U8, &[2], &[1, 0]);
    let full = npy_bytes(DType::F32, &[2], &[0; 8]).unwrap();
    let trunc = d.raw("trunc.npy", &full[..full.len() - 3]);
    let garbage = d.raw("garbage.npy", b"\x93NUMPY\x01\x00\xff\x00{'descr': 42");
    let huge = d.raw(
        "huge.npy",
        &header(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }",
            &[0; 16],
        ),
    );
    let missing = d.path("missing.npy");
    let cases: Vec<(&str, [&Path; 3], Vec<&str>)> = vec![
        ("bad shapes", [&c, &t3, &t], vec![]),
        ("dtype mismatch", [&c, &t, &e64], vec![]),
        ("non-bool cond", [&ci, &t, &t], vec![]),
        ("truncated", [&c, &trunc, &t], vec![]),
        ("corrupt", [&c, &garbage, &t], vec![]),
        ("huge header", [&c, &huge, &t], vec![]),
        ("missing file", [&c, &missing, &t], vec![]),
        ("unknown backend", [&c, &t, &t], vec!["--backend", "gpu"]),
        ("bad mode", [&c, &t, &t], vec!["--broadcast", "sideways"]),
    ];
    for (what, [a, b, e], extra) in cases {
        let out = d.path(&format!("{}.npy", what.replace(' ', "_")));
        let (code, stdout, err) = run(&[a, b, e, &out], &extra);
        assert_eq!(code, 2, "{what}: {err}");
        assert!(err.starts_with("error:"), "{what}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
        assert!(stdout.is_empty(), "{what}");
        assert!(!out.exists(), "{what}: output was created");
    }
    // A pre-existing output is left byte for byte as it was.
    let out = d.raw("keep.npy", b"precious");
    let (code, _, _) = run(&[&c, &t3, &t, &out], &[]);
    assert_eq!(code, 2);
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    // Nothing but the files written above is left in the folder (no temporary files).
    let names: Vec<String> = std::fs::read_dir(d.0.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| n.ends_with(".npy")), "{names:?}");
}

#[test]
fn info_explain_and_usage() {
    let o = bin().arg("info").output().unwrap();
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.starts_with(&format!("selectjit {}", env!("CARGO_PKG_VERSION"))),
        "{s}"
    );
    assert!(s.contains("host") && s.contains("profile"), "{s}");
    let o = bin()
        .args([
            "explain",
            "--dtype",
            "f32",
            "--cond",
            "1,1,128,128",
            "--then",
            "8,12,128,128",
            "--else",
            "",
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("collapsed dims [96, 16384]"), "{s}");
    // The Cranelift IR is shown when Cranelift compiles the kernel; the x86 tiers show their
    // machine code only.
    if s.contains("tier       cranelift") {
        assert!(s.contains("function"), "{s}");
    } else {
        assert!(
            s.contains("machine code of the exact kernel") && s.contains("ret"),
            "{s}"
        );
    }
    let o = bin()
        .args([
            "explain", "--dtype", "f33", "--cond", "", "--then", "", "--else", "",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = bin().arg("frobnicate").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error:") && err.trim_end().lines().count() == 1,
        "{err}"
    );
}

#[test]
fn bench_runs_a_filtered_quick_case_and_writes_json() {
    let d = Dir::new();
    let json = d.path("b.json");
    let o = bin()
        .args(["bench", "--quick", "--filter", "tiny_f32_16", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let c = &v["cases"][0];
    assert_eq!(c["case"], "tiny_f32_16");
    for k in ["jit_ns", "static_ns", "memcpy_ns", "compile_us"] {
        assert!(c[k].as_f64().unwrap() > 0.0, "{k}");
    }
    let o = bin()
        .args(["bench", "--quick", "--filter", "no-such-case"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// The fused cases run beside the select cases: a filter matching only a fused case runs it
/// alone, and its JSON carries the fused, unfused and roofline times and what ran it; a bad
/// fused case file is one `error:` line.
#[test]
fn bench_runs_a_fused_case_and_writes_json() {
    let d = Dir::new();
    let json = d.path("f.json");
    let o = bin()
        .args(["bench", "--quick", "--filter", "tiny_relu", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("tiny_relu_f32_16"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), 0);
    let c = &v["fused_cases"][0];
    assert_eq!(c["case"], "tiny_relu_f32_16");
    assert_eq!(c["elements"], 16);
    for k in ["fused_ns", "unfused_ns", "roofline_ns", "static_ns"] {
        assert!(c[k].as_f64().unwrap() > 0.0, "{k}");
    }
    let tier = c["fused_tier"].as_str().unwrap();
    assert!(
        tier == "blocked"
            || ["cranelift", "avx2", "avx512"]
                .iter()
                .any(|t| tier.starts_with(t)),
        "{tier}"
    );
    let bad = d.raw(
        "bad.json",
        br#"{"cases":[{"name":"b","expr":"where(x > , x, x)","vars":{"x":{"dtype":"f32","shape":[2],"fill":"normal"}}}]}"#,
    );
    let o = bin()
        .args(["bench", "--quick", "--fused-cases"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: invalid argument: fused case b: expression 'where(x > , x, x)'")
            && err.trim_end().lines().count() == 1,
        "{err}"
    );
}

/// The n-way cases run beside the others: a filter matching only an n-way case runs it alone,
/// with its table and JSON (n-way, chained and roofline times, branches, what ran it); a bad
/// n-way case file is one `error:` line.
#[test]
fn bench_runs_an_nway_case_and_writes_json() {
    let d = Dir::new();
    let json = d.path("n.json");
    let o = bin()
        .args(["bench", "--quick", "--filter", "tiny_nan_to_num", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("n-way case") && stdout.contains("tiny_nan_to_num_f32_16"),
        "{stdout}"
    );
    assert!(stdout.contains("of chained/nway time"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), 0);
    assert_eq!(v["fused_cases"].as_array().unwrap().len(), 0);
    let c = &v["nway_cases"][0];
    assert_eq!(c["case"], "tiny_nan_to_num_f32_16");
    assert_eq!(
        (c["elements"].as_u64(), c["branches"].as_u64()),
        (Some(16), Some(3))
    );
    for k in ["nway_ns", "chained_ns", "roofline_ns"] {
        assert!(c[k].as_f64().unwrap() > 0.0, "{k}");
    }
    assert!(!c["nway_tier"].as_str().unwrap().is_empty());
    let bad = d.raw(
        "bad.json",
        br#"{"cases":[{"name":"b","expr":"select([x > x], [x, x], x)","vars":{"x":{"dtype":"f32","shape":[2],"fill":"normal"}}}]}"#,
    );
    let o = bin()
        .args(["bench", "--quick", "--nway-cases"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: invalid argument: n-way case b: expression 'select([x > x], [x, x], x)': 1 conditions but 2 values")
            && err.trim_end().lines().count() == 1,
        "{err}"
    );
}

/// A tier the host cannot run, or an unknown one, is one `error:` line and exit 2 (and no
/// output); `--emulate` runs an x86 tier the host lacks in the emulator instead.
#[test]
fn tiers_on_the_command_line() {
    let d = Dir::new();
    let c = d.write("c.npy", DType::Bool, &[3], &[1, 0, 2]);
    let t = d.write("t.npy", DType::U8, &[3], &[1, 2, 3]);
    let out = d.path("out.npy");
    for (tier, emulate) in common::tiers() {
        let mut args = vec!["--tier", tier.name()];
        if emulate {
            let (code, _, err) = run(&[&c, &t, &t, &out], &args);
            assert_eq!(code, 2, "{tier}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains(&format!("tier {tier} needs")), "{err}");
            assert!(!out.exists());
            args.push("--emulate");
        }
        let (code, _, err) = run(&[&c, &t, &t, &out], &args);
        assert_eq!(code, 0, "{tier}: {err}");
        assert_eq!(read_npy(&out).unwrap().data, [1, 2, 3]);
        std::fs::remove_file(&out).unwrap();
    }
    let (code, _, err) = run(&[&c, &t, &t, &out], &["--tier", "avx1024"]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    assert!(!out.exists());
    let o = bin()
        .args(["run", "--cond"])
        .arg(&c)
        .arg("--then")
        .arg(&t)
        .arg("--else")
        .arg(&t)
        .arg("-o")
        .arg(&out)
        .env("SELECTJIT_TIER", "bogus")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: invalid argument: unknown tier 'bogus'"),
        "{err}"
    );
    assert!(!out.exists());
}

/// The tier names a verbose compile line may carry.
const TIERS: [&str; 3] = ["cranelift", "avx2", "avx512"];

/// `SELECTJIT_VERBOSE=1` prints one line per compile (with the tier that made the kernel) and
/// per eviction.
#[test]
fn verbose_logs_compiles_and_evictions() {
    let o = bin()
        .args([
            "bench",
            "--quick",
            "--filter",
            "tiny_f32_1",
            "--dynamic",
            "3",
        ])
        .env("SELECTJIT_VERBOSE", "1")
        .env("SELECTJIT_CACHE_CAPACITY", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines.iter().any(|l| TIERS
            .iter()
            .any(|t| l.starts_with(&format!("selectjit_verbose,compile,{t},w4")))),
        "{err}"
    );
    assert!(
        lines.iter().any(|l| TIERS
            .iter()
            .any(|t| l.starts_with(&format!("selectjit_verbose,compile,{t}-generic,")))),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("selectjit_verbose,evict,w4")),
        "{err}"
    );
    // Without the variable: silent.
    let o = bin()
        .args(["bench", "--quick", "--filter", "tiny_f32_1"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&o.stderr).contains("selectjit_verbose"));
}

/// `selectjit aot` writes ELF objects of the right machine and byte order for every target,
/// with the header asked for; bad options fail cleanly.
#[test]
fn cli_exports_objects_for_other_targets() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_selectjit");
    let shapes = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/shapes.json");
    // (ELF machine, byte order) of each target.
    for (target, machine, big) in [
        ("aarch64-unknown-linux-gnu", 183u16, false),
        ("s390x-unknown-linux-gnu", 22, true),
        ("riscv64gc-unknown-linux-gnu", 243, false),
        ("x86_64-unknown-linux-gnu", 62, false),
    ] {
        let o = dir.path().join(format!("{target}.o"));
        let h = dir.path().join(format!("{target}.h"));
        let out = std::process::Command::new(bin)
            .args([
                "aot", "--target", target, "--shapes", shapes, "--dtypes", "f32,u8",
            ])
            .arg("-o")
            .arg(&o)
            .arg("--header")
            .arg(&h)
            .args(["--symbol", "my_kernels"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{target}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(target) && stdout.contains("skipped as expected errors"),
            "{stdout}"
        );
        let obj = std::fs::read(&o).unwrap();
        assert_eq!(&obj[..4], b"\x7fELF");
        assert_eq!(obj[5], if big { 2 } else { 1 }, "{target} byte order");
        let m = if big {
            u16::from_be_bytes([obj[18], obj[19]])
        } else {
            u16::from_le_bytes([obj[18], obj[19]])
        };
        assert_eq!(m, machine, "{target} e_machine");
        let header = std::fs::read_to_string(&h).unwrap();
        assert!(header.contains("extern const SelectjitAotTable my_kernels;"));
        assert!(header.contains(selectjit::aot::C_TYPES));
    }
    // Errors: one line, exit status 2, no object written.
    let o = dir.path().join("none.o");
    for args in [
        &["--target", "mips-unknown-linux-gnu"][..],
        &[
            "--target",
            "aarch64-unknown-linux-gnu",
            "--isa-flags",
            "has_nothing",
        ],
        &[
            "--target",
            "aarch64-unknown-linux-gnu",
            "--symbol",
            "not valid",
        ],
        &["--target", "aarch64-unknown-linux-gnu", "--dtypes", "f128"],
    ] {
        let out = std::process::Command::new(bin)
            .arg("aot")
            .args(args)
            .args(["--shapes", shapes, "-o"])
            .arg(&o)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.lines().count() == 1,
            "{err}"
        );
        assert!(!o.exists());
    }
}

/// `SELECTJIT_MAX_ISA` hides wider instruction sets from the tiers, the static kernels and
/// Cranelift (what an AVX2-only or older host runs); results stay the same; a bad value is an
/// error naming the variable.
#[test]
fn max_isa_caps_what_the_library_uses() {
    let info = |cap: &str| {
        let o = bin()
            .arg("info")
            .env("SELECTJIT_MAX_ISA", cap)
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let line = |text: &str, head: &str| -> String {
        text.lines()
            .find(|l| l.starts_with(head))
            .unwrap_or_else(|| panic!("no {head} line in {text}"))
            .to_string()
    };
    let avx2 = info("avx2");
    assert!(line(&avx2, "tier       avx512").contains("hidden by SELECTJIT_MAX_ISA"));
    assert!(!line(&avx2, "static").contains("avx512"), "{avx2}");
    assert!(!line(&avx2, "cranelift ").contains("avx512"), "{avx2}");
    assert!(line(&avx2, "isa cap").contains("Avx2"), "{avx2}");
    let base = info("baseline");
    for t in ["tier       avx2", "tier       avx512"] {
        assert!(line(&base, t).contains("hidden by"), "{base}");
    }
    assert!(line(&base, "static").contains("portable"), "{base}");
    assert!(!line(&base, "cranelift ").contains("has_avx"), "{base}");
    assert!(line(&info("all"), "isa cap").ends_with("none"));

    let d = Dir::new();
    let c = d.write(
        "c.npy",
        DType::Bool,
        &[3, 5],
        &[1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 0, 0, 0, 1],
    );
    let x = d.write("x.npy", DType::I64, &[5], &i64s(&[1, 2, 3, 4, 5]));
    let y = d.write("y.npy", DType::I64, &[3, 1], &i64s(&[-1, -2, -3]));
    let out = d.path("out.npy");
    let want = i64s(&[1, -1, -1, 4, 5, -2, 2, -2, 4, 5, 1, -3, -3, -3, 5]);
    let run_capped = |cap: &str, backend: &str| {
        let o = bin()
            .args(["run", "--backend", backend, "--cond"])
            .arg(&c)
            .arg("--then")
            .arg(&x)
            .arg("--else")
            .arg(&y)
            .arg("-o")
            .arg(&out)
            .env("SELECTJIT_MAX_ISA", cap)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    for cap in ["all", "avx2", "baseline"] {
        for backend in ["jit", "static"] {
            let (code, err) = run_capped(cap, backend);
            assert_eq!(code, Some(0), "{cap} {backend}: {err}");
            assert_eq!(read_npy(&out).unwrap().data, want, "{cap} {backend}");
        }
    }
    std::fs::remove_file(&out).unwrap();
    let (code, err) = run_capped("avx3", "jit");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("SELECTJIT_MAX_ISA") && err.contains("avx3"),
        "{err}"
    );
    assert!(!out.exists());
}

/// Runs `selectjit` with `args` and returns (status, stdout, stderr).
fn cmd(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let o = bin().args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `run --cond-expr`: a comparison with a literal, a mask compared with 0 and broadcast, a NaN
/// test of `then`, a negated comparison of two inputs and a u8 threshold, on every backend; each
/// output compared bytewise with the result computed here with Rust's operators (NaN payloads
/// and -0.0 kept).
#[test]
// `!(a < b)` as written: true where either is NaN.
#[allow(clippy::neg_cmp_op_on_partial_ord)]
fn run_with_predicate_conditions() {
    let d = Dir::new();
    let nan = f32::from_bits(0x7fc0_1234);
    let xv = [-1.5f32, 2.0, nan, -0.0, 3.0, f32::INFINITY];
    let x = d.write("x.npy", DType::F32, &[6], &f32s(&xv));
    let zero = d.write("zero.npy", DType::F32, &[], &f32s(&[0.0]));
    let mask = d.write(
        "mask.npy",
        DType::I64,
        &[2, 1, 3],
        &i64s(&[1, 1, 0, 1, 0, 0]),
    );
    let sv: Vec<f32> = (0..12).map(|i| i as f32 - 5.5).collect();
    let scores = d.write("scores.npy", DType::F32, &[2, 2, 3], &f32s(&sv));
    let ninf = d.write("ninf.npy", DType::F32, &[], &f32s(&[f32::NEG_INFINITY]));
    let bv = [nan, -0.0, 1.0, 5.0, -2.0, 0.5];
    let b = d.write("b.npy", DType::F32, &[6], &f32s(&bv));
    let img = d.write("img.npy", DType::U8, &[2, 3], &[0, 127, 128, 200, 255, 1]);
    let white = d.write("white.npy", DType::U8, &[], &[255]);
    let black = d.write("black.npy", DType::U8, &[], &[0]);
    let out = d.path("out.npy");
    let os = |s: &str| std::ffi::OsString::from(s);
    let p = |p: &PathBuf| p.clone().into_os_string();
    let input = |n: &str, f: &PathBuf| {
        let mut s = os(n);
        s.push("=");
        s.push(f);
        s
    };
    let sel = |c: bool, a: f32, b: f32| if c { a } else { b };
    let cases: Vec<(Vec<std::ffi::OsString>, Vec<u8>, Vec<usize>)> = vec![
        (
            vec![
                os("--input"),
                input("x", &x),
                os("--cond-expr"),
                os("x > 0"),
                os("--then"),
                os("x"),
                os("--else"),
                p(&zero),
            ],
            f32s(&xv.map(|v| sel(v > 0.0, v, 0.0))),
            vec![6],
        ),
        (
            vec![
                os("--input"),
                input("mask", &mask),
                os("--cond-expr"),
                os("mask == 0"),
                os("--then"),
                p(&ninf),
                os("--else"),
                p(&scores),
            ],
            f32s(
                &(0..12)
                    .map(|i| {
                        let m = [1, 1, 0, 1, 0, 0][(i / 6) * 3 + i % 3];
                        sel(m == 0, f32::NEG_INFINITY, sv[i])
                    })
                    .collect::<Vec<_>>(),
            ),
            vec![2, 2, 3],
        ),
        (
            vec![
                os("--cond-expr"),
                os("isnan(then)"),
                os("--then"),
                p(&x),
                os("--else"),
                p(&zero),
            ],
            f32s(&xv.map(|v| sel(v.is_nan(), v, 0.0))),
            vec![6],
        ),
        (
            vec![
                os("--input"),
                input("a", &x),
                os("--input"),
                input("b", &b),
                os("--cond-expr"),
                os("!(a < b)"),
                os("--then"),
                os("a"),
                os("--else"),
                os("b"),
            ],
            f32s(
                &(0..6)
                    .map(|i| sel(!(xv[i] < bv[i]), xv[i], bv[i]))
                    .collect::<Vec<_>>(),
            ),
            vec![6],
        ),
    ];
    for backend in ["jit", "static", "interp"] {
        for (args, want, shape) in &cases {
            let mut a: Vec<std::ffi::OsString> = vec![os("run")];
            a.extend(args.iter().cloned());
            a.extend([os("-o"), p(&out), os("--backend"), os(backend)]);
            let refs: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
            let (code, _, err) = cmd(&refs);
            assert_eq!(code, 0, "{args:?}: {err}");
            let r = read_npy(&out).unwrap();
            assert_eq!((r.dtype, &r.shape), (DType::F32, shape), "{args:?}");
            assert_eq!(&r.data, want, "{backend} {args:?}");
        }
        let mut a = vec![
            os("run"),
            os("--input"),
            input("img", &img),
            os("--cond-expr"),
            os("img >= 128"),
        ];
        a.extend([
            os("--then"),
            p(&white),
            os("--else"),
            p(&black),
            os("-o"),
            p(&out),
            os("--backend"),
            os(backend),
        ]);
        let refs: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
        let (code, _, err) = cmd(&refs);
        assert_eq!(code, 0, "{err}");
        let r = read_npy(&out).unwrap();
        assert_eq!((r.dtype, r.shape.clone()), (DType::U8, vec![2, 3]));
        assert_eq!(r.data, [0, 0, 255, 255, 255, 0]);
    }
}

/// Bad predicate conditions: one `error:` line, exit 2, no output file.
#[test]
fn run_predicate_errors_leave_no_output() {
    let d = Dir::new();
    let x = d.write("x.npy", DType::F32, &[3], &f32s(&[1.0, -1.0, 2.0]));
    let y = d.write("y.npy", DType::F32, &[4], &f32s(&[1.0, -1.0, 2.0, 3.0]));
    let m = d.write("m.npy", DType::I64, &[3], &i64s(&[0, 1, 0]));
    let img = d.write("img.npy", DType::U8, &[3], &[1, 2, 3]);
    let c = d.write("c.npy", DType::Bool, &[3], &[1, 0, 1]);
    let out = d.path("out.npy");
    let xs = x.to_str().unwrap();
    let i = |n: &str, f: &PathBuf| format!("{n}={}", f.to_str().unwrap());
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--cond-expr".into(), "then >".into()],
            "expected a variable or a number, found the end",
        ),
        (
            vec!["--cond-expr".into(), "then >> 0".into()],
            "at character 7",
        ),
        (
            vec!["--cond-expr".into(), "y > 0".into()],
            "'y' names no array (known: then, else)",
        ),
        (
            vec![
                "--input".into(),
                i("m", &m),
                "--cond-expr".into(),
                "m > then".into(),
            ],
            "compares m (i64) with then (f32)",
        ),
        (
            vec![
                "--input".into(),
                i("m", &m),
                "--cond-expr".into(),
                "m == 0.5".into(),
            ],
            "'0.5' is not a i64 value",
        ),
        (
            vec![
                "--input".into(),
                i("img", &img),
                "--cond-expr".into(),
                "img >= 300".into(),
            ],
            "'300' is not a u8 value",
        ),
        (
            vec![
                "--input".into(),
                i("m", &m),
                "--cond-expr".into(),
                "then > 0".into(),
            ],
            "--input m is not used",
        ),
        (
            vec![
                "--input".into(),
                i("y", &y),
                "--cond-expr".into(),
                "y > 0".into(),
            ],
            "broadcast",
        ),
        (
            vec![
                "--input".into(),
                "m".into(),
                "--cond-expr".into(),
                "then > 0".into(),
            ],
            "expected NAME=VALUE",
        ),
        (
            vec![
                "--input".into(),
                i("then", &m),
                "--cond-expr".into(),
                "then > 0".into(),
            ],
            "names the --then array",
        ),
        (
            vec![
                "--input".into(),
                i("m", &m),
                "--input".into(),
                i("m", &m),
                "--cond-expr".into(),
                "m > 0".into(),
            ],
            "given twice",
        ),
        (
            vec![
                "--input".into(),
                i("m", &d.path("nope.npy")),
                "--cond-expr".into(),
                "m > 0".into(),
            ],
            "nope.npy",
        ),
        (
            vec![
                "--cond".into(),
                c.to_str().unwrap().into(),
                "--cond-expr".into(),
                "then > 0".into(),
            ],
            "cannot be used with",
        ),
        (vec!["--input".into(), i("m", &m)], "--cond-expr"),
        (
            vec!["--cond-expr".into(), "sqrt(then) > 0".into()],
            "unknown function 'sqrt'",
        ),
    ];
    for (extra, want) in cases {
        let mut a: Vec<String> = vec!["run".into()];
        a.extend(extra.iter().cloned());
        a.extend([
            "--then".into(),
            xs.into(),
            "--else".into(),
            xs.into(),
            "-o".into(),
        ]);
        a.push(out.to_str().unwrap().into());
        let refs: Vec<&std::ffi::OsStr> = a.iter().map(std::ffi::OsStr::new).collect();
        let (code, _, err) = cmd(&refs);
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(
            err.starts_with("error:") && err.trim_end().lines().count() == 1,
            "{err}"
        );
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(!out.exists(), "{extra:?}");
    }
}

/// `explain --cond-expr`: the predicate, its operands, the signature with the predicate, and
/// whether a kernel fuses it (by which variant, with its machine code), evaluates it once
/// (a predicate far smaller than the output) or it runs blocked.
#[test]
fn explain_shows_a_predicate_and_how_it_runs() {
    let d = Dir::new();
    let m = d.write("m.npy", DType::I64, &[2, 1, 3], &i64s(&[1, 1, 0, 1, 0, 0]));
    let mi = format!("mask={}", m.to_str().unwrap());
    for args in [
        vec![
            "--then",
            "64,64",
            "--else",
            "",
            "--cond-expr",
            "x > 0",
            "--var",
            "x=f32:64,64",
        ],
        vec![
            "--then",
            "2,4,3",
            "--else",
            "",
            "--cond-expr",
            "!(mask == 0)",
            "--input",
            mi.as_str(),
        ],
        vec![
            "--then",
            "16",
            "--else",
            "16",
            "--cond-expr",
            "isnan(then)",
            "--no-measure",
        ],
    ] {
        let o = bin()
            .args(["explain", "--dtype", "f32"])
            .args(&args)
            .output()
            .unwrap();
        let t = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(t.contains(&format!("predicate  {}", args[5])), "{t}");
        assert!(t.contains("signature  w4 "), "{t}");
        let fused = t.lines().find(|l| l.starts_with("fused ")).expect(&t);
        assert!(
            fused.starts_with("fused      yes, by ") && t.contains("machine code")
                || fused.starts_with("fused      no: runs blocked"),
            "{t}"
        );
    }
    // A padding mask 256x smaller than the scores it fills: hoisted, and the pass over the
    // output is the byte mask's select.
    let padding_mask = |scores: &str, extra: &[&str]| {
        bin()
            .args(["explain", "--dtype", "f32", "--then", "", "--else", scores])
            .args(["--cond-expr", "mask == 0", "--var", "mask=i64:2,1,1,128"])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = padding_mask("2,8,128,128", &[]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        t.contains(
            "hoisted    the predicate has 256 elements ([2,1,1,128]), at least 256x fewer than \
             the output: evaluated once into a byte mask of that shape, then that mask's select \
             over the output: w4 dims[2, 1024, 128] cond[128, 0, 1] "
        ),
        "{t}"
    );
    assert!(
        t.contains(
            "fused      hoisted: no mask of the output's size; the pass over the output by "
        ) && t.contains("machine code"),
        "{t}"
    );
    // An output under 2^18 elements: fused.
    let o = padding_mask("2,8,127,128", &["--no-measure"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(!t.contains("hoisted"), "{t}");
    assert!(t.contains("fused      yes, by "), "{t}");
    let o = bin()
        .args(["explain", "--dtype", "f32", "--then", "4", "--else", ""])
        .args(["--cond-expr", "x > 0", "--var", "x=i32:4"])
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    // x > 0 runs as 0 < x: the literal as lhs (a scalar), x as rhs.
    assert!(
        t.contains("signature  w4 dims[4] cond[0] then[1] else[0] out[1] where i32 < rhs[1]"),
        "{t}"
    );
    assert!(t.contains("operand  x: i32 [4]"), "{t}");
    for (args, want) in [
        (
            vec!["--cond-expr", "x > 0.5", "--var", "x=i32:4"],
            "'0.5' is not a i32 value",
        ),
        (
            vec!["--cond-expr", "x > 0", "--var", "x=i32:5"],
            "broadcast",
        ),
        (
            vec!["--cond-expr", "x > 0", "--var", "x=f32"],
            "expected NAME=DTYPE:SHAPE",
        ),
        (
            vec!["--cond-expr", "x > 0", "--var", "x=q8:4"],
            "unknown dtype 'q8'",
        ),
        (vec!["--cond-expr", "x > 0"], "'x' names no array"),
    ] {
        let o = bin()
            .args(["explain", "--dtype", "f32", "--then", "4", "--else", ""])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(want) && err.trim_end().lines().count() == 1,
            "{args:?}: {err}"
        );
    }
}

/// `run --when C --value V ... --else D`: numpy.nan_to_num as an n-way select (predicates over
/// an --input, a mask file as the third condition, values from files and inputs), compared
/// bytewise with the result computed here; mismatched counts and a non-bool mask are errors
/// that write no output.
#[test]
fn run_n_way_select() {
    let d = Dir::new();
    let nan = f32::from_bits(0x7fc0_1234);
    let xv = [1.5f32, nan, f32::INFINITY, -0.0, f32::NEG_INFINITY, 7.0];
    let x = d.write("x.npy", DType::F32, &[6], &f32s(&xv));
    let zero = d.write("zero.npy", DType::F32, &[], &f32s(&[0.0]));
    let big = d.write("big.npy", DType::F32, &[], &f32s(&[f32::MAX]));
    let m = d.write("m.npy", DType::Bool, &[6], &[0, 0, 0, 0, 1, 1]);
    let out = d.path("out.npy");
    let os = |s: &str| std::ffi::OsString::from(s);
    let mut input = os("x=");
    input.push(&x);
    let args = [
        os("run"),
        os("--input"),
        input.clone(),
        os("--when"),
        os("isnan(x)"),
        os("--value"),
        zero.clone().into_os_string(),
        os("--when"),
        os("x == inf"),
        os("--value"),
        big.clone().into_os_string(),
        os("--when"),
        m.clone().into_os_string(),
        os("--value"),
        zero.clone().into_os_string(),
        os("--else"),
        os("x"),
        os("-o"),
        out.clone().into_os_string(),
    ];
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let (code, _, err) = cmd(&refs);
    assert_eq!(code, 0, "{err}");
    let got = read_npy(&out).unwrap();
    let want: Vec<f32> = xv
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if v.is_nan() {
                0.0
            } else if v == f32::INFINITY {
                f32::MAX
            } else if i >= 4 {
                0.0
            } else {
                v
            }
        })
        .collect();
    assert_eq!(
        (got.dtype, got.shape.as_slice()),
        (DType::F32, &[6usize][..])
    );
    assert_eq!(got.data, f32s(&want));
    // Errors: one --value short; a mask that is not bool. No output is written.
    std::fs::remove_file(&out).unwrap();
    let (code, _, err) = cmd(&refs[..refs.len() - 6]
        .iter()
        .chain(&refs[refs.len() - 4..])
        .copied()
        .collect::<Vec<_>>());
    assert_ne!(code, 0);
    assert!(err.contains("3 --when but 2 --value"), "{err}");
    let bad = d.write("bad.npy", DType::U8, &[6], &[0; 6]);
    let mut a2: Vec<std::ffi::OsString> = args.to_vec();
    a2[12] = bad.into_os_string();
    let r2: Vec<&std::ffi::OsStr> = a2.iter().map(|a| a.as_os_str()).collect();
    let (code, _, err) = cmd(&r2);
    assert_ne!(code, 0);
    assert!(err.contains("must be a bool array"), "{err}");
    assert!(!out.exists());
}

/// `explain --when C --value S ... --else D`: the n-way call's output shape, how it runs, and
/// each branch's two-way call (the last over the default, the others in place).
#[test]
fn explain_n_way_select() {
    let os = std::ffi::OsStr::new;
    let (code, out, err) = cmd(&[
        os("explain"),
        os("--dtype"),
        os("f32"),
        os("--var"),
        os("x=f32:4,256"),
        os("--when"),
        os("isnan(x)"),
        os("--value"),
        os(""),
        os("--when"),
        os("x > 0"),
        os("--value"),
        os("256"),
        os("--else"),
        os("4,256"),
        os("--no-measure"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("n-way select of 2 branches"), "{out}");
    assert!(out.contains("output [4,256] f32"), "{out}");
    // The default engine (tier auto) runs it in one pass where the host runs AVX-512.
    if selectjit::Tier::Avx512.available() {
        assert!(
            out.contains("runs in one pass: a single-pass n-way kernel (avx512)"),
            "{out}"
        );
    }
    let b2 = out
        .find("== branch 2 of 2: x > 0 ? value [256] : the default")
        .expect(&out);
    let b1 = out
        .find("== branch 1 of 2: isnan(x) ? value [] : the output (in place)")
        .expect(&out);
    assert!(b2 < b1, "{out}");
    // One --value short: an error.
    let (code, _, err) = cmd(&[
        os("explain"),
        os("--dtype"),
        os("f32"),
        os("--var"),
        os("x=f32:4"),
        os("--when"),
        os("isnan(x)"),
        os("--else"),
        os("4"),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("1 --when but 0 --value"), "{err}");
}

//! The `selectjit-onnx` command: outputs, the report line, `--bench`, and clear errors (non-zero
//! exit, no panic, nothing written) on bad models and inputs.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use prost::Message;
use selectjit_tract::npy;
use tract_onnx::prelude::*;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_selectjit-onnx"))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A folder with the masked-fill model (symbolic B and S; output named with a slash) and
/// inputs for B=2, S=5.
struct Setup {
    dir: tempfile::TempDir,
    mask: Tensor,
    scores: Tensor,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let proto = model(
            vec![
                node("Equal", "eq", &["mask", "zero"], &["c"]),
                node("Where", "where", &["c", "ninf", "scores"], &["attn/masked"]),
            ],
            vec![
                init("zero", &tensor0(0i64)),
                init("ninf", &tensor0(f32::NEG_INFINITY)),
            ],
            vec![
                value(
                    "mask",
                    DatumType::I64,
                    &[D::P("B"), D::V(1), D::V(1), D::P("S")],
                ),
                value(
                    "scores",
                    DatumType::F32,
                    &[D::P("B"), D::V(3), D::P("S"), D::P("S")],
                ),
            ],
            vec![output("attn/masked")],
        );
        std::fs::write(dir.path().join("m.onnx"), proto.encode_to_vec()).unwrap();
        let mut rng = Rng(21);
        let mask: Vec<i64> = (0..10).map(|i| (i % 5 < 3) as i64).collect();
        let mask = Tensor::from_shape(&[2, 1, 1, 5], &mask).unwrap();
        let scores = random(DatumType::F32, &[2, 3, 5, 5], &mut rng);
        npy::write_npy(&dir.path().join("mask.npy"), &mask).unwrap();
        npy::write_npy(&dir.path().join("scores.npy"), &scores).unwrap();
        Setup { dir, mask, scores }
    }

    fn p(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn run(&self, extra: &[&str], out: &str) -> Output {
        let mut c = bin();
        c.arg(self.p("m.onnx"))
            .arg("--input")
            .arg(format!("mask={}", self.p("mask.npy").display()))
            .arg("--input")
            .arg(format!("scores={}", self.p("scores.npy").display()))
            .arg("--out")
            .arg(self.p(out))
            .args(extra);
        c.output().unwrap()
    }
}

fn files_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn runs_writes_outputs_and_reports() {
    let s = Setup::new();
    let fast = s.run(&[], "fast");
    assert!(fast.status.success(), "{}", stderr(&fast));
    let text = stdout(&fast);
    assert!(text.lines().any(|l| l == "replaced: 1 (0 fused)"), "{text}");
    assert!(text.contains("replaced where (F32)"), "{text}");
    assert!(
        text.contains("condition: eq = a == b (I64), fusable, not fused yet"),
        "{text}"
    );
    let plain = s.run(&["--no-selectjit"], "plain");
    assert!(plain.status.success(), "{}", stderr(&plain));
    assert!(stdout(&plain).lines().any(|l| l == "replaced: 0 (0 fused)"));
    // The output name has a slash: the file stays in the folder.
    let a = std::fs::read(s.p("fast/attn_masked.npy")).unwrap();
    let b = std::fs::read(s.p("plain/attn_masked.npy")).unwrap();
    assert_eq!(a, b, "selectjit and tract alone differ");
    let got = npy::read_npy(&s.p("fast/attn_masked.npy")).unwrap();
    let cond = s.mask.cast_to::<bool>().unwrap().into_owned();
    let cond = {
        // mask == 0
        let v: Vec<bool> = slice::<bool>(&cond).iter().map(|&b| !b).collect();
        Tensor::from_shape(s.mask.shape(), &v).unwrap()
    };
    let expected = reference_where(&cond, &tensor0(f32::NEG_INFINITY), &s.scores);
    // The reference broadcasts a rank-0 `then` the numpy way.
    assert!(same_bits(&got, &expected), "{got:?}\n{expected:?}");
}

#[test]
fn bench_prints_the_median_and_node_times() {
    let s = Setup::new();
    let o = s.run(&["--bench", "3"], "b");
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let median: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("median_us: "))
        .unwrap_or_else(|| panic!("{text}"))
        .parse()
        .unwrap();
    assert!(median > 0.0);
    let node = text
        .lines()
        .find(|l| l.starts_with("node_median_us: ") && l.ends_with(" where SelectjitIff"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(node.split(' ').nth(1).unwrap().parse::<f64>().unwrap() > 0.0);
    let o = s.run(&["--bench", "2", "--no-selectjit"], "b2");
    assert!(
        stdout(&o).lines().any(|l| l.ends_with(" where Iff")),
        "{}",
        stdout(&o)
    );
    // Inputs the caller keeps: the select allocates; the outputs are the same.
    let o = s.run(&["--bench", "2", "--warmup", "1", "--shared-inputs"], "b3");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("median_us: "));
    for d in ["b2", "b3"] {
        assert_eq!(
            std::fs::read(s.p("b/attn_masked.npy")).unwrap(),
            std::fs::read(s.p(&format!("{d}/attn_masked.npy"))).unwrap()
        );
    }
    let o = s.run(&["--shared-inputs"], "b4");
    assert_eq!(o.status.code(), Some(2), "--shared-inputs needs --bench");
}

/// Runs the command, expects a clear error mentioning `needle`, exit code 1, no panic, and
/// no output folder.
fn expect_error(mut c: Command, out: &Path, needle: &str) {
    let o = c.output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{needle}: {err}");
    assert!(err.starts_with("selectjit-onnx: error: "), "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(files_in(out), 0, "{needle}: something was written");
}

#[test]
fn bad_models_and_inputs_are_clear_errors() {
    let s = Setup::new();
    let out = s.p("never");
    let with = |model: &Path, inputs: &[String]| {
        let mut c = bin();
        c.arg(model);
        for i in inputs {
            c.arg("--input").arg(i);
        }
        c.arg("--out").arg(&out);
        c
    };
    let mask = format!("mask={}", s.p("mask.npy").display());
    let scores = format!("scores={}", s.p("scores.npy").display());
    let m = s.p("m.onnx");

    expect_error(
        with(&m, std::slice::from_ref(&mask)),
        &out,
        "missing input scores",
    );
    expect_error(
        with(
            &m,
            &[
                mask.clone(),
                scores.clone(),
                format!("nope={}", s.p("mask.npy").display()),
            ],
        ),
        &out,
        "the model has no input named nope",
    );
    expect_error(
        with(&m, &[mask.clone(), mask.clone()]),
        &out,
        "input mask given twice",
    );
    expect_error(with(&m, &["mask".into()]), &out, "expected NAME=FILE.npy");

    // Wrong element type, wrong rank, a fixed dim that differs, a symbol bound twice.
    let wrong = |name: &str, t: Tensor| {
        npy::write_npy(&s.p(name), &t).unwrap();
        format!("scores={}", s.p(name).display())
    };
    let f64_scores = wrong("f64.npy", Tensor::zero::<f64>(&[2, 3, 5, 5]).unwrap());
    expect_error(
        with(&m, &[mask.clone(), f64_scores]),
        &out,
        "the model expects F32",
    );
    let rank3 = wrong("rank3.npy", Tensor::zero::<f32>(&[2, 3, 5]).unwrap());
    expect_error(
        with(&m, &[mask.clone(), rank3]),
        &out,
        "input scores: the model expects shape",
    );
    let heads = wrong("heads.npy", Tensor::zero::<f32>(&[2, 4, 5, 5]).unwrap());
    expect_error(
        with(&m, &[mask.clone(), heads]),
        &out,
        "input scores: the model expects shape",
    );
    let seq = wrong("seq.npy", Tensor::zero::<f32>(&[2, 3, 6, 6]).unwrap());
    expect_error(
        with(&m, &[mask.clone(), seq]),
        &out,
        "dimension S is 6, but input mask makes it 5",
    );

    // Input files.
    expect_error(
        with(
            &m,
            &[
                mask.clone(),
                format!("scores={}", s.p("absent.npy").display()),
            ],
        ),
        &out,
        "absent.npy",
    );
    std::fs::write(s.p("garbage.npy"), b"not an npy file at all").unwrap();
    expect_error(
        with(
            &m,
            &[
                mask.clone(),
                format!("scores={}", s.p("garbage.npy").display()),
            ],
        ),
        &out,
        "not a .npy file",
    );

    // Models.
    expect_error(
        with(&s.p("absent.onnx"), &[mask.clone(), scores.clone()]),
        &out,
        "absent.onnx",
    );
    std::fs::write(
        s.p("garbage.onnx"),
        b"\x08\x07garbage, not a protobuf \xff\xff",
    )
    .unwrap();
    expect_error(
        with(&s.p("garbage.onnx"), &[mask.clone(), scores.clone()]),
        &out,
        "garbage.onnx",
    );
    let unknown_op = model(
        vec![node("NoSuchOp", "n", &["x"], &["y"])],
        vec![],
        vec![input("x", DatumType::F32, &[2])],
        vec![output("y")],
    );
    std::fs::write(s.p("unknown.onnx"), unknown_op.encode_to_vec()).unwrap();
    let x = wrong("x.npy", Tensor::zero::<f32>(&[2]).unwrap()).replace("scores=", "x=");
    expect_error(with(&s.p("unknown.onnx"), &[x]), &out, "unknown.onnx");
}

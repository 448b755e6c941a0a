//! Every case of the shared conformance file (`tests/data/shapes.json` is its copy).

use selectjit::{Broadcast, output_shape};
use serde_json::Value;

fn load(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap() as usize)
        .collect()
}

fn mode(case: &Value) -> Broadcast {
    match case["mode"].as_str().unwrap() {
        "numpy" => Broadcast::Numpy,
        "two-step" => Broadcast::TwoStep,
        "none" => Broadcast::None,
        "pdpd" => Broadcast::Pdpd {
            axis: case["axis"].as_i64().unwrap_or(-1),
        },
        m => panic!("unknown mode {m}"),
    }
}

fn fmt(s: &[usize]) -> String {
    format!(
        "[{}]",
        s.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

#[test]
fn every_case_gives_the_expected_shape_or_error() {
    let v = load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/shapes.json"
    ));
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() >= 30);
    let mut failures = Vec::new();
    for (k, c) in cases.iter().enumerate() {
        let (cs, ts, es) = (shape(&c["cond"]), shape(&c["then"]), shape(&c["else"]));
        let m = mode(c);
        let got = output_shape(m, &cs, &ts, &es);
        match (&c["expect"], got) {
            (Value::String(s), Err(e)) if s == "error" => {
                // The message names the mode and all three shapes.
                let msg = e.to_string();
                let ok = msg.starts_with(m.name())
                    && [&cs, &ts, &es].iter().all(|s| msg.contains(&fmt(s)));
                if !ok {
                    failures.push(format!(
                        "case {k}: message does not name mode and shapes: {msg}"
                    ));
                }
            }
            (Value::Array(_), Ok(out)) if out.as_slice() == shape(&c["expect"]).as_slice() => {}
            (want, got) => failures.push(format!("case {k} {c}: expected {want}, got {got:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The crate's copy equals the shared file whenever the shared file is beside the crate.
#[test]
fn copy_is_in_sync_with_the_shared_file() {
    let shared = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/conformance/shapes.json"
    );
    if std::path::Path::new(shared).exists() {
        let ours = load(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/shapes.json"
        ));
        assert_eq!(
            ours,
            load(shared),
            "tests/data/shapes.json differs from the shared copy"
        );
    }
    let bench = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/bench/cases.json");
    if std::path::Path::new(bench).exists() {
        let ours = load(concat!(env!("CARGO_MANIFEST_DIR"), "/benches/cases.json"));
        assert_eq!(
            ours,
            load(bench),
            "benches/cases.json differs from the shared copy"
        );
    }
}

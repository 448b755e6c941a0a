//! The conformance file (`tests/data/shapes.json`, a copy of the shared one) as the tests of
//! every crate read it.
#![allow(dead_code)]

use selectjit::Broadcast;
use serde_json::Value;

/// A JSON file.
pub fn load(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A case's shape (`[2, 3]`).
pub fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap() as usize)
        .collect()
}

/// A case's broadcast mode (with its axis for pdpd).
pub fn mode(case: &Value) -> Broadcast {
    match case["mode"].as_str().unwrap() {
        "numpy" => Broadcast::Numpy,
        "two-step" => Broadcast::TwoStep,
        "none" => Broadcast::Exact,
        "pdpd" => Broadcast::Pdpd {
            axis: case["axis"].as_i64().unwrap_or(-1),
        },
        m => panic!("unknown mode {m}"),
    }
}

/// The valid cases of a conformance file: mode and the three shapes.
pub fn valid_cases(v: &Value) -> Vec<(Broadcast, [Vec<usize>; 3])> {
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["expect"] != "error")
        .map(|c| {
            let s = |k: &str| shape(&c[k]);
            (mode(c), [s("cond"), s("then"), s("else")])
        })
        .collect()
}

//! Every case of the shared conformance file (`tests/data/shapes.json` is its copy): the shape
//! rule, and the values of every backend and tier against the interpreter.

mod common;
#[path = "common/conformance_file.rs"]
mod conformance_file;

use conformance_file::{load, mode, shape};

use selectjit::bits::Bitmap;
use selectjit::{
    Backend, Broadcast, Cond, DType, EngineConfig, TensorMut, TensorRef, output_shape,
};
use serde_json::Value;

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

/// Every backend and tier on every case: the interpreter's bytes where the case has a shape
/// (every width, cond bytes other than 0/1), an error and an untouched output where it has none.
#[test]
fn every_backend_and_tier_on_every_case() {
    let v = load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/shapes.json"
    ));
    let engines = common::all_engines(&EngineConfig::new().exact_after(1).verify(true));
    let mut checked = 0;
    for (k, c) in v["cases"].as_array().unwrap().iter().enumerate() {
        let (cs, ts, es) = (shape(&c["cond"]), shape(&c["then"]), shape(&c["else"]));
        let m = mode(c);
        let n = |s: &[usize]| s.iter().product::<usize>();
        for dt in [
            DType::U8,
            DType::F16,
            DType::F32,
            DType::F64,
            DType::Complex128,
        ] {
            let w = dt.width();
            let cond: Vec<u8> = (0..n(&cs))
                .map(|i| [0u8, 1, 0, 0x80, 0xff][i % 5])
                .collect();
            let tv: Vec<u8> = (0..n(&ts) * w).map(|i| (i * 7 + 1) as u8).collect();
            let ev: Vec<u8> = (0..n(&es) * w).map(|i| (i * 13 + 200) as u8).collect();
            // Where the mode refuses the case, an output of the numpy shape (if any) is offered.
            let out_shape = match &c["expect"] {
                Value::Array(_) => shape(&c["expect"]),
                _ => match output_shape(Broadcast::Numpy, &cs, &ts, &es) {
                    Ok(s) => s.to_vec(),
                    Err(_) => continue,
                },
            };
            let mut results: Vec<(String, Result<Vec<u8>, String>)> = Vec::new();
            for (name, e) in &engines {
                let mut out = vec![0x5au8; n(&out_shape) * w];
                let r = e.select_bytes(
                    dt,
                    TensorRef::new(&cond, &cs),
                    TensorRef::new(&tv, &ts),
                    TensorRef::new(&ev, &es),
                    TensorMut::new(&mut out, &out_shape),
                    m,
                );
                if r.is_err() {
                    assert!(
                        out.iter().all(|&b| b == 0x5a),
                        "case {k} {dt}: {name} wrote on error"
                    );
                }
                results.push((name.clone(), r.map(|_| out).map_err(|e| e.to_string())));
            }
            let want = &results[0].1;
            for (name, got) in &results {
                match (&c["expect"], got) {
                    (Value::Array(_), Ok(out)) => {
                        assert_eq!(Ok(out), want.as_ref(), "case {k} {c} {dt}: {name}")
                    }
                    (Value::String(_), Err(_)) => {}
                    (want, got) => panic!("case {k} {c} {dt}: {name} expected {want}, got {got:?}"),
                }
            }
            checked += 1;
        }
    }
    println!(
        "{checked} case/dtype pairs checked on {} engines",
        engines.len()
    );
    assert!(checked >= 100);
}

/// Every case with its condition given as a bitmap (at bit offset 3, with and without a
/// validity bitmap): on every backend and tier the bytes of the same case with the byte mask
/// the bits and validity mean (a null is false), or the same error and an untouched output.
#[test]
fn every_case_with_a_bitmap_condition() {
    let v = load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/shapes.json"
    ));
    let engines = common::all_engines(&EngineConfig::new().exact_after(1).verify(true));
    let reference = selectjit::Engine::with_config(EngineConfig::new().backend(Backend::Interp))
        .expect("the interpreter");
    let mut checked = 0;
    for (k, c) in v["cases"].as_array().unwrap().iter().enumerate() {
        let (cs, ts, es) = (shape(&c["cond"]), shape(&c["then"]), shape(&c["else"]));
        let m = mode(c);
        let n = |s: &[usize]| s.iter().product::<usize>();
        let out_shape = match &c["expect"] {
            Value::Array(_) => shape(&c["expect"]),
            _ => match output_shape(Broadcast::Numpy, &cs, &ts, &es) {
                Ok(s) => s.to_vec(),
                Err(_) => continue,
            },
        };
        let nc = n(&cs);
        let bit = |i: usize| (i * 7 + k) % 5 < 2;
        let valid_bit = |i: usize| !(i * 3 + k).is_multiple_of(7);
        let pack = |f: &dyn Fn(usize) -> bool| {
            let mut b = vec![0u8; (nc + 3).div_ceil(8) + 1];
            for i in (0..nc).filter(|&i| f(i)) {
                b[(i + 3) / 8] |= 1 << ((i + 3) % 8);
            }
            b
        };
        let (bits, valid) = (pack(&bit), pack(&valid_bit));
        for dt in [
            DType::U8,
            DType::I16,
            DType::F32,
            DType::F64,
            DType::Complex128,
        ] {
            let w = dt.width();
            let tv: Vec<u8> = (0..n(&ts) * w).map(|i| (i * 7 + 1) as u8).collect();
            let ev: Vec<u8> = (0..n(&es) * w).map(|i| (i * 13 + 200) as u8).collect();
            for with_validity in [false, true] {
                let mask: Vec<u8> = (0..nc)
                    .map(|i| (bit(i) && (!with_validity || valid_bit(i))) as u8)
                    .collect();
                let mut want = vec![0x5au8; n(&out_shape) * w];
                let want = reference
                    .select_bytes(
                        dt,
                        TensorRef::new(&mask, &cs),
                        TensorRef::new(&tv, &ts),
                        TensorRef::new(&ev, &es),
                        TensorMut::new(&mut want, &out_shape),
                        m,
                    )
                    .map(|_| want);
                let bm = Bitmap::new(&bits, 3, nc).unwrap();
                let vb = Bitmap::new(&valid, 3, nc).unwrap();
                for (name, e) in &engines {
                    let cond = if with_validity {
                        Cond::bitmap_with_validity(bm, vb, &cs)
                    } else {
                        Cond::bitmap(bm, &cs)
                    };
                    let mut out = vec![0x5au8; n(&out_shape) * w];
                    let r = e.select_bytes(
                        dt,
                        cond,
                        TensorRef::new(&tv, &ts),
                        TensorRef::new(&ev, &es),
                        TensorMut::new(&mut out, &out_shape),
                        m,
                    );
                    match (&want, r) {
                        (Ok(want), Ok(())) => {
                            assert_eq!(
                                &out, want,
                                "case {k} {c} {dt} validity {with_validity}: {name}"
                            )
                        }
                        (Err(_), Err(_)) => assert!(
                            out.iter().all(|&b| b == 0x5a),
                            "case {k} {dt}: {name} wrote on error"
                        ),
                        (want, got) => panic!(
                            "case {k} {c} {dt}: {name}: the byte mask gives {:?}, the bitmap {got:?}",
                            want.as_ref().map(|_| ())
                        ),
                    }
                }
                checked += 1;
            }
        }
    }
    println!(
        "{checked} case/dtype/validity triples checked on {} engines",
        engines.len()
    );
    assert!(checked >= 200);
}

/// The crate's copies equal the shared files whenever the shared files are beside the crate:
/// the conformance file and the benchmark case lists.
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
    // The benchmark case lists `selectjit bench` compiles in.
    for name in ["cases.json", "fused_cases.json", "nway_cases.json"] {
        let root = env!("CARGO_MANIFEST_DIR");
        let bench = format!("{root}/../shared/bench/{name}");
        if std::path::Path::new(&bench).exists() {
            let ours = load(&format!("{root}/benches/{name}"));
            assert_eq!(
                ours,
                load(&bench),
                "benches/{name} differs from the shared copy"
            );
        }
    }
}

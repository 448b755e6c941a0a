//! A masked self-attention block with a symbolic sequence length:
//! `MatMul(q, kᵀ) → × scale → Where(mask == 0, -inf, ·) → Softmax → MatMul(·, v)`.

mod common;

use std::sync::Arc;

use common::*;
use selectjit::Engine;
use selectjit_tract::Condition;
use tract_onnx::pb;
use tract_onnx::prelude::*;

const B: usize = 2;
const H: usize = 3;
const DH: usize = 4;

fn attention() -> pb::ModelProto {
    let mut kt = node("Transpose", "kt", &["k"], &["kt"]);
    kt.attribute = vec![ints_attr("perm", &[0, 1, 3, 2])];
    let mut softmax = node("Softmax", "softmax", &["masked"], &["p"]);
    softmax.attribute = vec![int_attr("axis", -1)];
    let qkv = |n| {
        value(
            n,
            DatumType::F32,
            &[D::V(B as i64), D::V(H as i64), D::P("S"), D::V(DH as i64)],
        )
    };
    model(
        vec![
            kt,
            node("MatMul", "qk", &["q", "kt"], &["scores"]),
            node("Mul", "scale", &["scores", "scale_c"], &["scaled"]),
            node("Equal", "eq", &["mask", "zero"], &["c"]),
            node(
                "Where",
                "masked_fill",
                &["c", "ninf", "scaled"],
                &["masked"],
            ),
            softmax,
            node("MatMul", "pv", &["p", "v"], &["out"]),
        ],
        vec![
            init("scale_c", &tensor0(0.5f32)),
            init("zero", &tensor0(0i64)),
            init("ninf", &tensor0(f32::NEG_INFINITY)),
        ],
        vec![
            qkv("q"),
            qkv("k"),
            qkv("v"),
            value(
                "mask",
                DatumType::I64,
                &[D::V(B as i64), D::V(1), D::V(1), D::P("S")],
            ),
        ],
        vec![output("out")],
    )
}

/// Inputs for sequence length `s`: finite q, k, v and a padding mask (1s, then a run of 0s,
/// never a whole row).
fn inputs(s: usize, rng: &mut Rng) -> Vec<Tensor> {
    let qkv = |rng: &mut Rng| {
        let v: Vec<f32> = (0..B * H * s * DH)
            .map(|_| (rng.below(2001) as f32 - 1000.0) / 250.0)
            .collect();
        Tensor::from_shape(&[B, H, s, DH], &v).unwrap()
    };
    let mask: Vec<i64> = (0..B)
        .flat_map(|_| {
            let pad = rng.below(s as u64) as usize;
            (0..s).map(move |j| (j < s - pad) as i64)
        })
        .collect();
    vec![
        qkv(rng),
        qkv(rng),
        qkv(rng),
        Tensor::from_shape(&[B, 1, 1, s], &mask).unwrap(),
    ]
}

#[test]
fn attention_block_with_a_symbolic_sequence_length() {
    let engine = Arc::new(Engine::new());
    let proto = attention();
    let mut rng = Rng(11);
    for s in [1, 2, 7, 16, 33] {
        let (report, out) = run_both(&format!("S={s}"), &proto, &inputs(s, &mut rng), &engine, 1);
        assert_eq!(report.summary(), "replaced: 1 (0 fused)");
        assert_eq!(report.replaced[0].node, "masked_fill");
        assert!(
            matches!(&report.replaced[0].condition, Condition::Fusable { node, .. } if node == "eq"),
            "{report}"
        );
        assert_eq!(out[0].shape(), &[B, H, s, DH]);
    }
    // The select's output keeps the symbol.
    let mut m = load(&proto).unwrap();
    selectjit_tract::accelerate_with(&mut m, engine).unwrap();
    let node = m.node_by_name("masked_fill").unwrap();
    let fact = m.outlet_fact(node.id.into()).unwrap();
    let s = m.symbols.sym("S");
    assert_eq!(fact.shape[2], TDim::Sym(s.clone()), "{fact:?}");
    assert_eq!(fact.shape[3], TDim::Sym(s), "{fact:?}");
}

#[test]
fn fifty_sequence_lengths_compile_a_handful_of_kernels() {
    let engine = Arc::new(Engine::new());
    let mut m = load(&attention()).unwrap();
    selectjit_tract::accelerate_with(&mut m, engine.clone()).unwrap();
    let plan = m.into_optimized().unwrap().into_runnable().unwrap();
    let reference = load(&attention())
        .unwrap()
        .into_optimized()
        .unwrap()
        .into_runnable()
        .unwrap();
    let mut rng = Rng(12);
    let lengths: Vec<usize> = (3..53).collect();
    assert_eq!(lengths.len(), 50);
    for &s in &lengths {
        let inp = inputs(s, &mut rng);
        let tv = |v: &[Tensor]| {
            v.iter()
                .map(|t| t.clone().into_tvalue())
                .collect::<TVec<_>>()
        };
        let a = plan.run(tv(&inp)).unwrap();
        let b = reference.run(tv(&inp)).unwrap();
        assert!(same_bits(&a[0], &b[0]), "S={s}");
    }
    let once = engine.stats();
    println!(
        "50 lengths, each run once: {} selects, {} exact compiles, {} shape-generic compiles \
         ({} us), {} generic runs",
        once.hits + once.misses,
        once.compiles,
        once.generic_compiles,
        once.generic_compile_us,
        once.generic_runs
    );
    assert_eq!(once.hits + once.misses, 50, "{once:?}");
    assert_eq!(once.compiles, 0, "{once:?}");
    assert!(once.generic_compiles <= 4, "{once:?}");
    assert_eq!(once.generic_runs, 50, "{once:?}");
    // Seen a second time, a length gets its exact kernel (the engine's `exact_after` policy).
    for &s in &lengths {
        let inp = inputs(s, &mut rng);
        plan.run(inp.into_iter().map(|t| t.into_tvalue()).collect())
            .unwrap();
    }
    let twice = engine.stats();
    println!(
        "each run a second time: {} exact compiles ({} us), {} shape-generic compiles in all",
        twice.compiles, twice.compile_us, twice.generic_compiles
    );
    assert_eq!(twice.generic_compiles, once.generic_compiles, "{twice:?}");
}

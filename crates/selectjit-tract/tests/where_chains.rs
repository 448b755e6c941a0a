//! Chains of ONNX `Where` nodes (built in Rust) merged into one n-way select: nan_to_num,
//! bucketing, clamps, chains nested on the `then` side, broadcast operands, nan_to_num as torch
//! exports it (a forward chain, each condition reading the previous result); and the chains that
//! must stay apart (an inner `Where` with another consumer, strings). Outputs are bitwise those
//! of tract alone, on random inputs with NaNs, both infinities and both zeros.

mod common;

use std::sync::Arc;

use common::*;
use prost::Message;
use selectjit::Engine;
use selectjit_tract::{Condition, Predicate, Report, SelectjitChain};
use tract_onnx::pb;
use tract_onnx::prelude::*;

/// Runs the graph with tract alone and with selectjit; asserts that every `Where` is replaced,
/// that the chains merged have `chains` nodes each (outermost first, in the report's order), that
/// the model holds one selectjit node per chain plus one per select left out of them, and that
/// the outputs are bitwise equal. Returns the report and the outputs.
fn run_chains(
    what: &str,
    proto: &pb::ModelProto,
    inputs: &[Tensor],
    engine: &Arc<Engine>,
    chains: &[usize],
) -> (Report, Vec<Tensor>) {
    let plain = load(proto).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let wheres = count_iff(&plain);
    let mut fast = plain.clone();
    let report = selectjit_tract::accelerate_with(&mut fast, engine.clone()).unwrap();
    assert_eq!(report.replaced.len(), wheres, "{what}: {report}");
    assert!(report.left_alone.is_empty(), "{what}: {report}");
    let lengths: Vec<usize> = report.chained.iter().map(|c| c.nodes.len()).collect();
    assert_eq!(lengths, chains, "{what}: {report}");
    let in_chains: usize = chains.iter().sum();
    assert_eq!(
        report.chains_summary(),
        format!("chained: {} ({in_chains} nodes)", chains.len())
    );
    assert_eq!(count_iff(&fast), 0, "{what}");
    assert_eq!(
        count_selectjit(&fast),
        wheres - in_chains + chains.len(),
        "{what}: {report}"
    );
    let merged = fast
        .nodes()
        .iter()
        .filter(|n| n.op_is::<SelectjitChain>())
        .count();
    assert_eq!(merged, chains.len(), "{what}");
    let a = run(plain, inputs).unwrap_or_else(|e| panic!("{what}: tract alone: {e:?}"));
    let b = run(fast, inputs).unwrap_or_else(|e| panic!("{what}: with selectjit: {e:?}"));
    assert_same_bits(what, &a, &b);
    (report, b)
}

/// A scalar initializer of datum type `dt` holding `v` (cast from f64).
fn scalar(name: &str, dt: DatumType, v: f64) -> pb::TensorProto {
    init(name, &tensor0(v).cast_to_dt(dt).unwrap())
}

/// Random floats with every special value present: NaNs, both infinities, both zeros.
fn floats(dt: DatumType, shape: &[usize], rng: &mut Rng) -> Tensor {
    let mut t = random(dt, shape, rng);
    let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, 1.0];
    for (i, v) in specials.iter().enumerate().take(t.len()) {
        let w = dt.size_of();
        let s = tensor0(*v).cast_to_dt(dt).unwrap().into_owned();
        t.as_bytes_mut()[i * w..(i + 1) * w].copy_from_slice(&s.as_bytes()[..w]);
    }
    t
}

/// `nan_to_num` as one chain over `x`:
/// `Where(isnan(x), 0, Where(x == inf, big, Where(x == -inf, small, x)))`.
fn nan_to_num(dt: DatumType, shape: &[usize]) -> pb::ModelProto {
    let (big, small) = match dt {
        DatumType::F16 => (f16::MAX.to_f64(), f16::MIN.to_f64()),
        DatumType::F32 => (f32::MAX as f64, f32::MIN as f64),
        _ => (f64::MAX, f64::MIN),
    };
    model(
        vec![
            node("IsNaN", "isnan", &["x"], &["c_nan"]),
            node("Equal", "is_pinf", &["x", "pinf"], &["c_pinf"]),
            node("Equal", "is_ninf", &["x", "ninf"], &["c_ninf"]),
            node("Where", "w_ninf", &["c_ninf", "small", "x"], &["r_ninf"]),
            node("Where", "w_pinf", &["c_pinf", "big", "r_ninf"], &["r_pinf"]),
            node("Where", "w_nan", &["c_nan", "zero", "r_pinf"], &["out"]),
        ],
        vec![
            scalar("zero", dt, 0.0),
            scalar("pinf", dt, f64::INFINITY),
            scalar("ninf", dt, f64::NEG_INFINITY),
            scalar("big", dt, big),
            scalar("small", dt, small),
        ],
        vec![input("x", dt, shape)],
        vec![output("out")],
    )
}

#[test]
fn nan_to_num_is_one_n_way_select() {
    let engine = engine();
    let mut rng = Rng(31);
    for dt in [DatumType::F16, DatumType::F32] {
        for shape in [&[4usize, 257][..], &[3], &[]] {
            let what = format!("nan_to_num {dt:?} {shape:?}");
            let x = floats(dt, shape, &mut rng);
            let (report, out) = run_chains(
                &what,
                &nan_to_num(dt, shape),
                std::slice::from_ref(&x),
                &engine,
                &[3],
            );
            assert_eq!(report.summary(), "replaced: 3 (3 fused)", "{what}");
            assert_eq!(report.chained[0].nodes, ["w_nan", "w_pinf", "w_ninf"]);
            assert_eq!(report.chained[0].dtype, format!("{dt:?}"));
            assert!(report.not_chained.is_empty(), "{what}: {report}");
            // No NaN nor infinity is left; every finite element (both zeros too) is kept.
            let o = out[0].cast_to::<f64>().unwrap();
            let xs = x.cast_to::<f64>().unwrap();
            for (a, b) in slice::<f64>(&o).iter().zip(slice::<f64>(&xs)) {
                assert!(a.is_finite(), "{what}");
                if b.is_finite() {
                    assert_eq!(a.to_bits(), b.to_bits(), "{what}");
                }
            }
        }
    }
}

/// In place: with `x` owned by the model the n-way select writes into `x` itself; with `x` also a
/// graph output, into a fresh tensor (and `x` is untouched).
#[test]
fn a_chain_writes_into_its_default_when_the_model_owns_it() {
    let engine = engine();
    for keep in [false, true] {
        let mut proto = nan_to_num(DatumType::F32, &[8, 1000]);
        if keep {
            let g = proto.graph.as_mut().unwrap();
            g.node.push(node("Identity", "keep_x", &["x"], &["x_out"]));
            g.output.push(output("x_out"));
        }
        let x = floats(DatumType::F32, &[8, 1000], &mut Rng(32));
        let what = format!("nan_to_num keep={keep}");
        let (_, out) = run_chains(&what, &proto, std::slice::from_ref(&x), &engine, &[3]);
        if keep {
            assert!(same_bits(&out[1], &x), "{what}: x was modified");
        }
        let mut fast = load(&proto).unwrap();
        selectjit_tract::accelerate_with(&mut fast, engine.clone()).unwrap();
        let plan = fast.into_optimized().unwrap().into_runnable().unwrap();
        let owned = x.deep_clone();
        let base = owned.as_bytes().as_ptr() as usize;
        let out = plan.run(tvec![owned.into_tvalue()]).unwrap();
        let at = out[0].as_bytes().as_ptr() as usize;
        assert_eq!(at == base, !keep, "{what}: in place");
    }
}

/// The bucketing chain: `Where(d < t1, 0, Where(d < t2, 1, Where(d < t3, 2, 3)))`, i32 `d`,
/// i64 buckets.
#[test]
fn bucketing_i32_into_i64() {
    let engine = engine();
    let mut rng = Rng(33);
    let proto = model(
        vec![
            node("Less", "lt1", &["d", "t1"], &["c1"]),
            node("Less", "lt2", &["d", "t2"], &["c2"]),
            node("Less", "lt3", &["d", "t3"], &["c3"]),
            node("Where", "w3", &["c3", "b2", "b3"], &["r3"]),
            node("Where", "w2", &["c2", "b1", "r3"], &["r2"]),
            node("Where", "w1", &["c1", "b0", "r2"], &["out"]),
        ],
        vec![
            init("t1", &tensor0(-1_000_000_000i32)),
            init("t2", &tensor0(0i32)),
            init("t3", &tensor0(1_000_000_000i32)),
            init("b0", &tensor0(0i64)),
            init("b1", &tensor0(1i64)),
            init("b2", &tensor0(2i64)),
            init("b3", &tensor0(3i64)),
        ],
        vec![input("d", DatumType::I32, &[5, 7])],
        vec![output("out")],
    );
    let mut d = random(DatumType::I32, &[5, 7], &mut rng);
    // The thresholds themselves and their neighbours.
    let edges = [
        -1_000_000_001i32,
        -1_000_000_000,
        -1,
        0,
        999_999_999,
        1_000_000_000,
        i32::MIN,
        i32::MAX,
    ];
    let mut v = slice::<i32>(&d).to_vec();
    v[..edges.len()].copy_from_slice(&edges);
    d = Tensor::from_shape(&[5, 7], &v).unwrap();
    let (report, out) = run_chains("bucketing", &proto, std::slice::from_ref(&d), &engine, &[3]);
    assert_eq!(report.summary(), "replaced: 3 (3 fused)");
    assert_eq!(report.chained[0].dtype, "I64");
    assert_eq!(out[0].datum_type(), DatumType::I64);
    let expected: Vec<i64> = slice::<i32>(&d)
        .iter()
        .map(|&v| {
            if v < -1_000_000_000 {
                0
            } else if v < 0 {
                1
            } else if v < 1_000_000_000 {
                2
            } else {
                3
            }
        })
        .collect();
    assert_eq!(slice::<i64>(&out[0]), &expected[..]);
    let buckets: std::collections::BTreeSet<i64> = expected.iter().copied().collect();
    assert_eq!(buckets.len(), 4, "every bucket taken");
}

/// The clamp `Where(x < lo, lo, Where(x > hi, hi, x))`: scalar bounds, and bounds broadcast
/// along an axis.
#[test]
fn clamp_chains() {
    let engine = engine();
    let mut rng = Rng(34);
    for dt in [
        DatumType::F32,
        DatumType::F64,
        DatumType::I16,
        DatumType::U8,
    ] {
        for bounds in [&[][..], &[1, 6]] {
            let what = format!("clamp {dt:?} bounds {bounds:?}");
            let (lo_v, hi_v) = match dt {
                DatumType::U8 => (40.0, 200.0),
                DatumType::I16 => (-1000.0, 1000.0),
                _ => (-1.5, 1.5),
            };
            let lo = tensor0(lo_v)
                .cast_to_dt(dt)
                .unwrap()
                .broadcast_to_shape(bounds)
                .unwrap()
                .into_tensor();
            let hi = tensor0(hi_v)
                .cast_to_dt(dt)
                .unwrap()
                .broadcast_to_shape(bounds)
                .unwrap()
                .into_tensor();
            let proto = model(
                vec![
                    node("Less", "lt", &["x", "lo"], &["c_lo"]),
                    node("Greater", "gt", &["x", "hi"], &["c_hi"]),
                    node("Where", "w_hi", &["c_hi", "hi", "x"], &["r"]),
                    node("Where", "w_lo", &["c_lo", "lo", "r"], &["out"]),
                ],
                vec![init("lo", &lo), init("hi", &hi)],
                vec![input("x", dt, &[4, 6])],
                vec![output("out")],
            );
            let x = if dt.is_float() {
                floats(dt, &[4, 6], &mut rng)
            } else {
                random(dt, &[4, 6], &mut rng)
            };
            let (report, _) = run_chains(&what, &proto, &[x], &engine, &[2]);
            assert_eq!(report.summary(), "replaced: 2 (2 fused)", "{what}");
            assert_eq!(report.chained[0].nodes, ["w_lo", "w_hi"], "{what}");
        }
    }
}

/// Chains nested on the `then` side (the outer condition negated), on both sides in turn, over
/// masks and predicates, with a `Not` folded in.
#[test]
fn chains_nested_on_the_then_side() {
    let engine = engine();
    let mut rng = Rng(35);
    let dt = DatumType::F32;
    let masks = ["c1", "c2", "c3"].map(|c| input(c, DatumType::Bool, &[3, 5]));
    let values = ["a", "b", "c", "d"].map(|v| input(v, dt, &[3, 5]));
    let mut inputs = vec![];
    for _ in 0..3 {
        inputs.push(random(DatumType::Bool, &[3, 5], &mut rng));
    }
    for _ in 0..4 {
        inputs.push(floats(dt, &[3, 5], &mut rng));
    }
    let graph_inputs: Vec<_> = masks.iter().chain(&values).cloned().collect();
    let graphs: [(&str, Vec<pb::NodeProto>); 4] = [
        // Where(c1, Where(c2, b, c), a)
        (
            "then side",
            vec![
                node("Where", "inner", &["c2", "b", "c"], &["r"]),
                node("Where", "outer", &["c1", "r", "a"], &["out"]),
            ],
        ),
        // Where(c1, Where(c2, Where(c3, c, d), b), a): then side twice.
        (
            "then side twice",
            vec![
                node("Where", "w3", &["c3", "c", "d"], &["r3"]),
                node("Where", "w2", &["c2", "r3", "b"], &["r2"]),
                node("Where", "w1", &["c1", "r2", "a"], &["out"]),
            ],
        ),
        // Where(c1, a, Where(c2, Where(c3, c, d), b)): else, then.
        (
            "else then then",
            vec![
                node("Where", "w3", &["c3", "c", "d"], &["r3"]),
                node("Where", "w2", &["c2", "r3", "b"], &["r2"]),
                node("Where", "w1", &["c1", "a", "r2"], &["out"]),
            ],
        ),
        // Where(Not(c1), Where(a > b, c, d), a): the Not folds (sides swap), then the chain.
        (
            "Not and a predicate",
            vec![
                node("Not", "not", &["c1"], &["n1"]),
                node("Greater", "gt", &["a", "b"], &["g"]),
                node("Where", "inner", &["g", "c", "d"], &["r"]),
                node("Where", "outer", &["n1", "r", "a"], &["out"]),
            ],
        ),
    ];
    for (what, nodes) in graphs {
        let n = nodes.iter().filter(|n| n.op_type == "Where").count();
        let proto = model(nodes, vec![], graph_inputs.clone(), vec![output("out")]);
        let (report, out) = run_chains(what, &proto, &inputs, &engine, &[n]);
        if what == "then side" {
            let (c1, c2) = (slice::<bool>(&inputs[0]), slice::<bool>(&inputs[1]));
            let [a, b, c] = [3, 4, 5].map(|i| slice::<f32>(&inputs[i]));
            let o = slice::<f32>(&out[0]);
            for i in 0..15 {
                let e = if c1[i] {
                    if c2[i] { b[i] } else { c[i] }
                } else {
                    a[i]
                };
                assert_eq!(o[i].to_bits(), e.to_bits(), "{what} at {i}");
            }
        }
        if what == "Not and a predicate" {
            assert_eq!(report.replaced[1].folded_not, ["not"], "{report}");
        }
    }
}

/// Operands of every shape that broadcasts: masks, predicate operands, values and the default
/// of different shapes (ONNX's right-aligned rule; tract adds the leading axes).
#[test]
fn chains_over_broadcast_operands() {
    let engine = engine();
    let mut rng = Rng(36);
    let dt = DatumType::F32;
    let proto = model(
        vec![
            node("Less", "lt", &["x", "y"], &["c2"]),
            node("IsNaN", "isnan", &["z"], &["c3"]),
            node("Where", "w3", &["c3", "k", "z"], &["r3"]),
            node("Where", "w2", &["c2", "y", "r3"], &["r2"]),
            node("Where", "w1", &["c1", "a", "r2"], &["out"]),
        ],
        vec![init("k", &tensor0(-7.0f32))],
        vec![
            input("c1", DatumType::Bool, &[2, 1, 5]),
            input("a", dt, &[3, 1]),
            input("x", dt, &[1, 3, 5]),
            input("y", dt, &[5]),
            input("z", dt, &[2, 1, 1]),
        ],
        vec![output("out")],
    );
    let inputs = [
        random(DatumType::Bool, &[2, 1, 5], &mut rng),
        floats(dt, &[3, 1], &mut rng),
        floats(dt, &[1, 3, 5], &mut rng),
        floats(dt, &[5], &mut rng),
        floats(dt, &[2, 1, 1], &mut rng),
    ];
    let (_, out) = run_chains("broadcast", &proto, &inputs, &engine, &[3]);
    assert_eq!(out[0].shape(), &[2, 3, 5]);
    // The default alone has the output's shape: the merged select writes into it in place.
    let proto = model(
        vec![
            node("Greater", "gt", &["x", "hi"], &["c2"]),
            node("Where", "w2", &["c2", "hi", "x"], &["r2"]),
            node("Where", "w1", &["c1", "a", "r2"], &["out"]),
        ],
        vec![],
        vec![
            input("c1", DatumType::Bool, &[1, 6]),
            input("a", dt, &[4, 1]),
            input("x", dt, &[4, 6]),
            input("hi", dt, &[6]),
        ],
        vec![output("out")],
    );
    let inputs = [
        random(DatumType::Bool, &[1, 6], &mut rng),
        floats(dt, &[4, 1], &mut rng),
        floats(dt, &[4, 6], &mut rng),
        floats(dt, &[6], &mut rng),
    ];
    run_chains(
        "broadcast, default in place",
        &proto,
        &inputs,
        &engine,
        &[2],
    );
}

/// An inner `Where` with another consumer (a graph output, another node) stays a select of its
/// own, and the report says why; the rest of the chain still merges.
#[test]
fn an_inner_where_with_another_consumer_is_not_merged() {
    let engine = engine();
    let mut rng = Rng(37);
    let dt = DatumType::F32;
    let graph_inputs = vec![
        input("c1", DatumType::Bool, &[6]),
        input("c2", DatumType::Bool, &[6]),
        input("c3", DatumType::Bool, &[6]),
        input("a", dt, &[6]),
        input("b", dt, &[6]),
        input("c", dt, &[6]),
        input("d", dt, &[6]),
    ];
    let mut inputs = vec![];
    for _ in 0..3 {
        inputs.push(random(DatumType::Bool, &[6], &mut rng));
    }
    for _ in 0..4 {
        inputs.push(floats(dt, &[6], &mut rng));
    }
    // The inner Where is also a graph output.
    let proto = model(
        vec![
            node("Where", "inner", &["c2", "b", "c"], &["r"]),
            node("Where", "outer", &["c1", "a", "r"], &["out"]),
        ],
        vec![],
        graph_inputs.clone(),
        vec![output("out"), output("r")],
    );
    let (report, _) = run_chains("exported inner", &proto, &inputs, &engine, &[]);
    assert_eq!(report.not_chained.len(), 1, "{report}");
    assert_eq!(report.not_chained[0].node, "inner");
    assert_eq!(
        report.not_chained[0].reason,
        "not chained into outer: inner is a model output"
    );
    assert!(
        format!("{report}").contains(
            "  left alone (not chained) inner: not chained into outer: inner is a model output"
        ),
        "{report}"
    );
    // The middle Where of three also feeds an Add: the outer one stays apart, the middle and
    // the inner ones merge.
    let proto = model(
        vec![
            node("Where", "w3", &["c3", "c", "d"], &["r3"]),
            node("Where", "w2", &["c2", "b", "r3"], &["r2"]),
            node("Where", "w1", &["c1", "a", "r2"], &["out"]),
            node("Add", "add", &["r2", "a"], &["sum"]),
        ],
        vec![],
        graph_inputs.clone(),
        vec![output("out"), output("sum")],
    );
    let (report, _) = run_chains("shared middle", &proto, &inputs, &engine, &[2]);
    assert_eq!(report.chained[0].nodes, ["w2", "w3"]);
    assert_eq!(
        report.not_chained[0].reason,
        "not chained into w1: w2 has other consumers"
    );
    // One select feeding both sides of the next: not a chain.
    let proto = model(
        vec![
            node("Where", "inner", &["c2", "b", "c"], &["r"]),
            node("Where", "outer", &["c1", "r", "r"], &["out"]),
        ],
        vec![],
        graph_inputs.clone(),
        vec![output("out")],
    );
    let plain = load(&proto).unwrap();
    if count_iff(&plain) == 2 {
        let (report, _) = run_chains("both sides", &proto, &inputs, &engine, &[]);
        assert!(
            report.not_chained[0]
                .reason
                .contains("feeds several inputs of outer"),
            "{report}"
        );
    }
    // Selects on both sides: the else side is chained, the then side says so.
    let proto = model(
        vec![
            node("Where", "left", &["c2", "b", "c"], &["l"]),
            node("Where", "right", &["c3", "c", "d"], &["r"]),
            node("Where", "outer", &["c1", "l", "r"], &["out"]),
        ],
        vec![],
        graph_inputs,
        vec![output("out")],
    );
    let (report, _) = run_chains("both sides selects", &proto, &inputs, &engine, &[2]);
    assert_eq!(report.chained[0].nodes, ["outer", "right"]);
    assert_eq!(
        report.not_chained[0].reason,
        "not chained into outer: both branches of outer are selects: its else side is chained"
    );
}

/// Strings are selected on the generic path, one select at a time.
#[test]
fn string_chains_stay_apart() {
    let engine = engine();
    let mut rng = Rng(38);
    let dt = DatumType::String;
    let proto = model(
        vec![
            node("Where", "inner", &["c2", "b", "c"], &["r"]),
            node("Where", "outer", &["c1", "a", "r"], &["out"]),
        ],
        vec![],
        vec![
            input("c1", DatumType::Bool, &[4]),
            input("c2", DatumType::Bool, &[4]),
            input("a", dt, &[4]),
            input("b", dt, &[4]),
            input("c", dt, &[4]),
        ],
        vec![output("out")],
    );
    let inputs = [
        random(DatumType::Bool, &[4], &mut rng),
        random(DatumType::Bool, &[4], &mut rng),
        random(dt, &[4], &mut rng),
        random(dt, &[4], &mut rng),
        random(dt, &[4], &mut rng),
    ];
    let (report, _) = run_chains("strings", &proto, &inputs, &engine, &[]);
    assert_eq!(
        report.not_chained[0].reason,
        "not chained into outer: outer selects strings: n-way selects move fixed-width elements"
    );
}

/// nan_to_num as torch's exporter writes it (`torch.onnx.export`, opset 11 and later, with
/// these replacement values): the `Where` for NaN is the innermost, and each outer condition
/// reads the previous `Where`'s output (`IsInf(r) And r > 0`, then `IsInf(r) And r < 0`).
fn torch_nan_to_num(nan: f32, posinf: f32, neginf: f32, shape: &[usize]) -> pb::ModelProto {
    let c = |v: f32| tensor1(&[v]);
    model(
        vec![
            node("IsNaN", "isnan", &["x"], &["c_nan"]),
            node("Where", "w_nan", &["c_nan", "k_nan", "x"], &["r1"]),
            node("IsInf", "isinf1", &["r1"], &["i1"]),
            node("Greater", "gt", &["r1", "zero"], &["g1"]),
            node("And", "and1", &["i1", "g1"], &["c_pinf"]),
            node("Where", "w_pinf", &["c_pinf", "k_pinf", "r1"], &["r2"]),
            node("IsInf", "isinf2", &["r2"], &["i2"]),
            node("Less", "lt", &["r2", "zero"], &["l2"]),
            node("And", "and2", &["i2", "l2"], &["c_ninf"]),
            node("Where", "w_ninf", &["c_ninf", "k_ninf", "r2"], &["out"]),
        ],
        vec![
            init("k_nan", &c(nan)),
            init("k_pinf", &c(posinf)),
            init("k_ninf", &c(neginf)),
            init("zero", &c(0.0)),
        ],
        vec![input("x", DatumType::F32, shape)],
        vec![output("out")],
    )
}

/// The inner `Where` nodes of torch's nan_to_num have other consumers (the outer conditions),
/// but every value is a constant: the chain is merged with its conditions computed from `x`,
/// each value the constant as the outer `Where` nodes map it (NaN replaced by +inf becomes the
/// +inf replacement, as tract computes it).
#[test]
fn torch_exported_nan_to_num_is_one_n_way_select() {
    let engine = engine();
    let max = f32::MAX;
    let cases = [
        (0.0, max, f32::MIN),
        (f32::INFINITY, max, f32::MIN),
        (f32::NEG_INFINITY, f32::INFINITY, -1.0),
        (f32::NAN, 7.0, f32::NEG_INFINITY),
    ];
    for (nan, posinf, neginf) in cases {
        for keep in [false, true] {
            let what = format!("torch nan_to_num({nan}, {posinf}, {neginf}) keep={keep}");
            let mut proto = torch_nan_to_num(nan, posinf, neginf, &[4, 33]);
            if keep {
                let g = proto.graph.as_mut().unwrap();
                g.node.push(node("Identity", "keep_x", &["x"], &["x_out"]));
                g.output.push(output("x_out"));
            }
            let x = floats(DatumType::F32, &[4, 33], &mut Rng(39));
            let (report, out) = run_chains(&what, &proto, std::slice::from_ref(&x), &engine, &[3]);
            assert_eq!(report.chained[0].nodes, ["w_ninf", "w_pinf", "w_nan"]);
            assert!(report.chained[0].from_input, "{what}");
            // `IsInf(r) And r > 0` is fused as `r == +inf`: every condition in the kernel.
            assert_eq!(report.summary(), "replaced: 3 (3 fused)", "{what}");
            assert_eq!(
                report.replaced[1].condition,
                Condition::Fused {
                    node: "and1".into(),
                    predicate: Predicate::InfOfSign {
                        positive: true,
                        dtype: "F32".into()
                    }
                },
                "{report}"
            );
            assert!(report.not_chained.is_empty(), "{what}: {report}");
            assert!(
                format!("{report}").contains(
                    "  chained w_ninf > w_pinf > w_nan (F32): one n-way select of 3 branches, \
                     conditions computed from the innermost input"
                ),
                "{report}"
            );
            if keep {
                assert!(same_bits(&out[1], &x), "{what}: x was modified");
            }
            if nan == 0.0 {
                assert!(slice::<f32>(&out[0]).iter().all(|v| v.is_finite()));
            }
        }
    }
    // Over an f32 scalar (the constants are of shape [1]): tract computes the first condition
    // before the unit axis it adds (an axis op, not elementwise), so the first Where stays apart
    // and the two outer ones merge over its result. With the nodes of one condition shared with
    // the graph's outputs: not merged (the condition feeds something else).
    let proto = torch_nan_to_num(0.0, max, f32::MIN, &[]);
    for v in [f32::NEG_INFINITY, f32::INFINITY, f32::NAN, -0.0] {
        let (report, _) = run_chains(
            "torch nan_to_num scalar",
            &proto,
            &[tensor0(v)],
            &engine,
            &[2],
        );
        assert_eq!(report.chained[0].nodes, ["w_ninf", "w_pinf"]);
    }
    let mut proto = torch_nan_to_num(0.0, max, f32::MIN, &[4, 33]);
    proto.graph.as_mut().unwrap().output.push(output("i1"));
    let x = floats(DatumType::F32, &[4, 33], &mut Rng(41));
    let (report, _) = run_chains("torch nan_to_num, i1 exported", &proto, &[x], &engine, &[]);
    assert_eq!(
        report.not_chained[0].reason, "not chained into w_pinf: w_nan has other consumers",
        "{report}"
    );
}

/// A comparison, its inputs, the `IsInf`'s `detect_positive` and `detect_negative`, the constant
/// `c`, and the expected fusion (as `+inf`, as `-inf`, or none).
type SignCase = (
    &'static str,
    [&'static str; 2],
    (i64, i64),
    f64,
    Option<bool>,
);

/// `IsInf(v) And v > c` feeding one `Where` is fused as `v == +inf` when `c` is a finite constant
/// and the `IsInf` detects that sign (either operand order, `>=` / `<=`, the negative sign);
/// otherwise the bool tensor is read. Tract's bytes either way.
#[test]
fn isinf_and_a_sign_test_is_fused_as_an_equality() {
    let engine = engine();
    let mut rng = Rng(43);
    for dt in [DatumType::F16, DatumType::F32] {
        let cases: [SignCase; 9] = [
            ("Greater", ["x", "c"], (1, 1), 0.0, Some(true)),
            ("Less", ["c", "x"], (1, 1), 2.5, Some(true)),
            ("GreaterOrEqual", ["x", "c"], (1, 0), -1.0, Some(true)),
            ("Less", ["x", "c"], (1, 1), 0.0, Some(false)),
            ("LessOrEqual", ["x", "c"], (0, 1), 7.0, Some(false)),
            ("Greater", ["c", "x"], (1, 1), 0.0, Some(false)),
            ("Greater", ["x", "c"], (0, 1), 0.0, None),
            ("Greater", ["x", "c"], (1, 1), f64::INFINITY, None),
            ("Less", ["x", "c"], (1, 1), f64::NAN, None),
        ];
        for (op, ins, (pos, neg), c, fused) in cases {
            let what = format!("{dt:?} IsInf({pos}, {neg}) And {op}({ins:?}) c={c}");
            let mut isinf = node("IsInf", "isinf", &["x"], &["i"]);
            isinf.attribute = vec![
                int_attr("detect_positive", pos),
                int_attr("detect_negative", neg),
            ];
            let proto = model(
                vec![
                    isinf,
                    node(op, "cmp", &ins, &["s"]),
                    node("And", "and", &["i", "s"], &["cond"]),
                    node("Where", "where", &["cond", "k", "x"], &["out"]),
                ],
                vec![scalar("c", dt, c), scalar("k", dt, 42.0)],
                vec![input("x", dt, &[5, 9])],
                vec![output("out")],
            );
            let x = floats(dt, &[5, 9], &mut rng);
            let (report, _) = run_chains(&what, &proto, &[x], &engine, &[]);
            let expected = match fused {
                Some(positive) => Condition::Fused {
                    node: "and".into(),
                    predicate: Predicate::InfOfSign {
                        positive,
                        dtype: format!("{dt:?}"),
                    },
                },
                None => Condition::Tensor { why: None },
            };
            assert_eq!(report.replaced[0].condition, expected, "{what}: {report}");
        }
    }
}

/// Forward chains of other shapes: the value on the `else` side, a fused predicate reading the
/// previous result, a condition reading a graph input besides it (not merged), a value that is
/// not a constant (not merged).
#[test]
fn other_forward_chains() {
    let engine = engine();
    let dt = DatumType::F32;
    let mut rng = Rng(42);
    let x = floats(dt, &[3, 7], &mut rng);
    let y = floats(dt, &[3, 7], &mut rng);
    let consts = vec![
        init("k1", &tensor0(5.0f32)),
        init("k2", &tensor0(-3.0f32)),
        init("one", &tensor0(1.0f32)),
    ];
    // r1 = Where(x > 1, x, k1) (value on the else side); out = Where(r1 < 1, k2, r1) (fused).
    let proto = model(
        vec![
            node("Greater", "gt", &["x", "one"], &["c1"]),
            node("Where", "w1", &["c1", "x", "k1"], &["r1"]),
            node("Less", "lt", &["r1", "one"], &["c2"]),
            node("Where", "w2", &["c2", "k2", "r1"], &["out"]),
        ],
        consts.clone(),
        vec![input("x", dt, &[3, 7])],
        vec![output("out")],
    );
    let (report, _) = run_chains(
        "else side, fused",
        &proto,
        std::slice::from_ref(&x),
        &engine,
        &[2],
    );
    assert!(report.chained[0].from_input, "{report}");
    // The outer condition also reads y: not merged (the constant k1 cannot be passed through
    // a condition that reads y; the nested-chain step sees r1 feed both the predicate and the
    // else side).
    let proto = model(
        vec![
            node("IsNaN", "isnan", &["x"], &["c1"]),
            node("Where", "w1", &["c1", "k1", "x"], &["r1"]),
            node("Less", "lt", &["r1", "y"], &["c2"]),
            node("Where", "w2", &["c2", "k2", "r1"], &["out"]),
        ],
        consts.clone(),
        vec![input("x", dt, &[3, 7]), input("y", dt, &[3, 7])],
        vec![output("out")],
    );
    let (report, _) = run_chains(
        "condition reads y",
        &proto,
        &[x.clone(), y.clone()],
        &engine,
        &[],
    );
    assert_eq!(
        report.not_chained[0].reason, "not chained into w2: w1 feeds several inputs of w2",
        "{report}"
    );
    // The outer value is not a constant.
    let proto = model(
        vec![
            node("IsNaN", "isnan", &["x"], &["c1"]),
            node("Where", "w1", &["c1", "k1", "x"], &["r1"]),
            node("Less", "lt", &["r1", "one"], &["c2"]),
            node("Where", "w2", &["c2", "y", "r1"], &["out"]),
        ],
        consts,
        vec![input("x", dt, &[3, 7]), input("y", dt, &[3, 7])],
        vec![output("out")],
    );
    run_chains("value not constant", &proto, &[x, y], &engine, &[]);
}

/// What `selectjit-onnx` prints for the nan_to_num chain.
#[test]
fn the_command_reports_the_chains() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nan_to_num.onnx");
    std::fs::write(&path, nan_to_num(DatumType::F32, &[2, 5]).encode_to_vec()).unwrap();
    let x = floats(DatumType::F32, &[2, 5], &mut Rng(40));
    let xp = dir.path().join("x.npy");
    selectjit_tract::npy::write_npy(&xp, &x).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_selectjit-onnx"))
        .arg(&path)
        .arg("--input")
        .arg(format!("x={}", xp.display()))
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    println!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "replaced: 3 (3 fused)", "{text}");
    assert_eq!(lines[1], "chained: 1 (3 nodes)", "{text}");
    assert!(
        text.contains("  chained w_nan > w_pinf > w_ninf (F32): one n-way select of 3 branches"),
        "{text}"
    );
}

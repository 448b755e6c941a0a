//! ONNX `Where` graphs (built in Rust) through tract alone and through tract + selectjit:
//! every ONNX element type tract loads, the broadcast patterns of the bench cases, the
//! predicates that feed `Where`, and what the transform reports and keeps of tract's model.

mod common;

use common::*;
use selectjit_tract::{Condition, Predicate};
use tract_onnx::pb;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::axes::AxesMapping;
use tract_onnx::tract_core::ops::logic::Iff;

/// `Where(c, t, e)` over graph inputs of these shapes; `extra_outputs` adds graph outputs
/// reading inputs (so the plan keeps them: no select may write into them).
fn where_graph(
    dt: DatumType,
    c: &[usize],
    t: &[usize],
    e: &[usize],
    keep_inputs: bool,
) -> pb::ModelProto {
    let mut nodes = vec![node("Where", "where", &["c", "t", "e"], &["out"])];
    let mut outputs = vec![output("out")];
    if keep_inputs {
        nodes.push(node("Identity", "keep_t", &["t"], &["t_out"]));
        nodes.push(node("Identity", "keep_e", &["e"], &["e_out"]));
        outputs.push(output("t_out"));
        outputs.push(output("e_out"));
    }
    model(
        nodes,
        vec![],
        vec![
            input("c", DatumType::Bool, c),
            input("t", dt, t),
            input("e", dt, e),
        ],
        outputs,
    )
}

#[test]
fn where_over_every_onnx_type_tract_loads() {
    let engine = engine();
    let mut rng = Rng(1);
    // Broadcast everywhere; the output shape in `then` (the select writes into it), in `else`;
    // the same with the inputs kept alive (a fresh output).
    let shapes: [(&[usize], &[usize], &[usize]); 3] = [
        (&[2, 1, 5], &[3, 5], &[2, 3, 1]),
        (&[4, 1], &[4, 6], &[]),
        (&[1, 6], &[1], &[4, 6]),
    ];
    let mut checked = 0;
    for dt in ONNX_DTYPES {
        for (c, t, e) in shapes {
            for keep in [false, true] {
                let what = format!("{dt:?} {c:?} {t:?} {e:?} keep={keep}");
                let proto = where_graph(dt, c, t, e, keep);
                let inputs = [
                    random(DatumType::Bool, c, &mut rng),
                    random(dt, t, &mut rng),
                    random(dt, e, &mut rng),
                ];
                let (report, out) = run_both(&what, &proto, &inputs, &engine, 1);
                assert_eq!(report.replaced[0].node, "where", "{what}");
                assert_eq!(report.replaced[0].dtype, format!("{dt:?}"), "{what}");
                let expected = reference_where(&inputs[0], &inputs[1], &inputs[2]);
                assert!(
                    same_bits(&out[0], &expected),
                    "{what}: {:?} vs {expected:?}",
                    out[0]
                );
                if keep {
                    assert!(same_bits(&out[1], &inputs[1]), "{what}: then was modified");
                    assert!(same_bits(&out[2], &inputs[2]), "{what}: else was modified");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, ONNX_DTYPES.len() * 6);
}

/// The element type ONNX graphs carry for a case's dtype: tract-onnx loads neither bfloat16
/// nor complex numbers, so those patterns run with an element of the same width or f64.
fn onnx_type_of_case(dtype: &str) -> DatumType {
    match dtype {
        "f32" => DatumType::F32,
        "f16" | "bf16" => DatumType::F16,
        "f64" | "complex128" => DatumType::F64,
        "i8" => DatumType::I8,
        "i64" => DatumType::I64,
        other => panic!("case dtype {other} not mapped"),
    }
}

#[test]
fn broadcast_patterns_of_the_bench_cases() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../benches/cases.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = json["cases"].as_array().unwrap();
    let shape = |v: &serde_json::Value| -> Vec<usize> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect()
    };
    // The patterns at small sizes: every distinct dimension other than 1 becomes a distinct
    // small one (so dims that broadcast together still do), 1 stays 1, ranks stay.
    let mut dims: Vec<usize> = cases
        .iter()
        .flat_map(|c| ["cond", "then", "else"].map(|k| shape(&c[k])))
        .flatten()
        .filter(|&d| d != 1)
        .collect();
    dims.sort();
    dims.dedup();
    let small = |d: usize| {
        if d == 1 {
            1
        } else {
            2 + dims.iter().position(|&x| x == d).unwrap()
        }
    };
    let engine = engine();
    let mut rng = Rng(2);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let dt = onnx_type_of_case(case["dtype"].as_str().unwrap());
        let [c, t, e] = ["cond", "then", "else"]
            .map(|k| shape(&case[k]).into_iter().map(small).collect::<Vec<_>>());
        let out_shape = broadcast(&[&c, &t, &e]);
        let mut cond = random(DatumType::Bool, &c, &mut rng);
        match case["cond_fill"].as_str().unwrap() {
            "random" => {}
            "true" => cond = Tensor::from_shape(&c, &vec![true; c.iter().product()]).unwrap(),
            "causal" => {
                let (r, k) = (c[c.len() - 2], c[c.len() - 1]);
                let v: Vec<bool> = (0..c.iter().product::<usize>())
                    .map(|i| (i % k) <= (i / k) % r)
                    .collect();
                cond = Tensor::from_shape(&c, &v).unwrap();
            }
            other => panic!("{name}: cond_fill {other}"),
        }
        let inputs = [cond, random(dt, &t, &mut rng), random(dt, &e, &mut rng)];
        let what = format!("{name}: {c:?} {t:?} {e:?} -> {out_shape:?} ({dt:?})");
        let (_, out) = run_both(
            &what,
            &where_graph(dt, &c, &t, &e, false),
            &inputs,
            &engine,
            1,
        );
        let expected = reference_where(&inputs[0], &inputs[1], &inputs[2]);
        assert!(same_bits(&out[0], &expected), "{what}");
    }
    assert!(cases.len() >= 20, "{} cases", cases.len());
}

/// A graph computing a predicate of `x` (and `y`) and selecting with it.
struct PredicateGraph {
    nodes: Vec<pb::NodeProto>,
    inits: Vec<pb::TensorProto>,
    inputs: Vec<pb::ValueInfoProto>,
    outputs: Vec<&'static str>,
}

impl PredicateGraph {
    fn proto(self) -> pb::ModelProto {
        let outputs = self.outputs.iter().map(|o| output(o)).collect();
        model(self.nodes, self.inits, self.inputs, outputs)
    }
}

fn compare_then_where(op: &str, dt: DatumType) -> PredicateGraph {
    PredicateGraph {
        nodes: vec![
            node(op, "cmp", &["x", "y"], &["c"]),
            node("Where", "where", &["c", "x", "y"], &["out"]),
        ],
        inits: vec![],
        inputs: vec![input("x", dt, &[3, 4]), input("y", dt, &[4])],
        outputs: vec!["out"],
    }
}

#[test]
fn comparisons_feeding_where_are_fused() {
    let engine = engine();
    let mut rng = Rng(3);
    let types = [
        DatumType::U8,
        DatumType::I8,
        DatumType::I16,
        DatumType::I32,
        DatumType::I64,
        DatumType::U16,
        DatumType::U32,
        DatumType::U64,
        DatumType::F16,
        DatumType::F32,
        DatumType::F64,
    ];
    let ops = [
        ("Greater", ">"),
        ("Less", "<"),
        ("Equal", "=="),
        ("GreaterOrEqual", ">="),
        ("LessOrEqual", "<="),
    ];
    for (op, sym) in ops {
        for dt in types {
            let what = format!("{op} {dt:?}");
            let mut inputs = [random(dt, &[3, 4], &mut rng), random(dt, &[4], &mut rng)];
            if op == "Equal" {
                // Equal elements, so that both branches are taken.
                let y = inputs[1].clone();
                inputs[0] = y.broadcast_to_shape(&[3, 4]).unwrap().into_tensor();
                inputs[0].as_bytes_mut()[..dt.size_of()]
                    .copy_from_slice(&random(dt, &[1], &mut rng).as_bytes()[..dt.size_of()]);
            }
            let proto = compare_then_where(op, dt).proto();
            let loaded = match load(&proto) {
                Ok(m) => m,
                // What tract does not load is not ours to replace; say which.
                Err(e) => {
                    println!("{what}: tract does not load it: {e}");
                    continue;
                }
            };
            drop(loaded);
            let (report, _) = run_both(&what, &proto, &inputs, &engine, 1);
            let r = &report.replaced[0];
            assert!(r.fused() && r.folded_not.is_empty(), "{what}");
            assert_eq!(
                r.condition,
                Condition::Fused {
                    node: "cmp".into(),
                    predicate: Predicate::Compare {
                        op: sym,
                        dtype: format!("{dt:?}")
                    }
                },
                "{what}: {report}"
            );
            assert_eq!(report.summary(), "replaced: 1 (1 fused)");
        }
    }
}

#[test]
fn isnan_and_isinf_feeding_where() {
    let engine = engine();
    let mut rng = Rng(4);
    for dt in [DatumType::F16, DatumType::F32, DatumType::F64] {
        for (op, attrs) in [
            ("IsNaN", vec![]),
            ("IsInf", vec![]),
            ("IsInf", vec![int_attr("detect_negative", 0)]),
        ] {
            let what = format!("{op} {attrs:?} {dt:?}");
            let mut pred = node(op, "pred", &["x"], &["c"]);
            pred.attribute = attrs.clone();
            let proto = model(
                vec![pred, node("Where", "where", &["c", "zero", "x"], &["out"])],
                vec![init("zero", &Tensor::zero_scalar_dt(dt).unwrap())],
                vec![input("x", dt, &[5, 7])],
                vec![output("out")],
            );
            if let Err(e) = load(&proto).and_then(|m| run(m, &[random(dt, &[5, 7], &mut Rng(0))])) {
                // tract's IsNaN has no f64 kernel, its IsInf none for f64 either.
                println!("{what}: tract does not run it: {e}");
                assert_eq!(dt, DatumType::F64, "{what}: {e:?}");
                continue;
            }
            let (report, _) = run_both(&what, &proto, &[random(dt, &[5, 7], &mut rng)], &engine, 1);
            let expected = match (op, attrs.is_empty()) {
                ("IsNaN", _) => Condition::Fused {
                    node: "pred".into(),
                    predicate: Predicate::IsNan {
                        dtype: format!("{dt:?}"),
                    },
                },
                ("IsInf", true) => Condition::Fused {
                    node: "pred".into(),
                    predicate: Predicate::IsInf {
                        dtype: format!("{dt:?}"),
                    },
                },
                _ => Condition::Tensor {
                    why: Some(
                        "pred detects one sign of infinity only: fused predicates test isinf"
                            .into(),
                    ),
                },
            };
            assert_eq!(report.replaced[0].condition, expected, "{what}: {report}");
        }
    }
}

#[test]
fn not_feeding_where_is_folded() {
    let engine = engine();
    let mut rng = Rng(5);
    // Where(Not(c), a, b) with c a graph input: the Not goes, a and b swap.
    let proto = model(
        vec![
            node("Not", "not", &["c"], &["nc"]),
            node("Where", "where", &["nc", "a", "b"], &["out"]),
        ],
        vec![],
        vec![
            input("c", DatumType::Bool, &[4, 1]),
            input("a", DatumType::F32, &[4, 5]),
            input("b", DatumType::F32, &[5]),
        ],
        vec![output("out")],
    );
    let inputs = [
        random(DatumType::Bool, &[4, 1], &mut rng),
        random(DatumType::F32, &[4, 5], &mut rng),
        random(DatumType::F32, &[5], &mut rng),
    ];
    let (report, _) = run_both("Not(input)", &proto, &inputs, &engine, 1);
    assert_eq!(report.summary(), "replaced: 1 (1 fused)");
    assert_eq!(report.replaced[0].folded_not, vec!["not".to_string()]);
    assert_eq!(
        report.replaced[0].condition,
        Condition::Tensor { why: None }
    );
    let mut m = load(&proto).unwrap();
    selectjit_tract::accelerate_with(&mut m, engine.clone()).unwrap();
    assert!(
        m.nodes().iter().all(|n| n.name != "not"),
        "the Not node is gone"
    );

    // Where(Not(Not(x < y)), x, y): both Nots go, the comparison is what remains.
    let proto = model(
        vec![
            node("Less", "lt", &["x", "y"], &["c"]),
            node("Not", "not1", &["c"], &["n1"]),
            node("Not", "not2", &["n1"], &["n2"]),
            node("Where", "where", &["n2", "x", "y"], &["out"]),
        ],
        vec![],
        vec![
            input("x", DatumType::I32, &[3, 4]),
            input("y", DatumType::I32, &[3, 4]),
        ],
        vec![output("out")],
    );
    let inputs = [
        random(DatumType::I32, &[3, 4], &mut rng),
        random(DatumType::I32, &[3, 4], &mut rng),
    ];
    let plain = load(&proto).unwrap();
    let nots_left = plain
        .nodes()
        .iter()
        .filter(|n| n.name.starts_with("not"))
        .count();
    let (report, _) = run_both("Not(Not(Less))", &proto, &inputs, &engine, 1);
    // tract's declutter may already cancel the double negation; what is left is folded.
    assert_eq!(report.replaced[0].folded_not.len(), nots_left, "{report}");
    assert!(
        matches!(&report.replaced[0].condition, Condition::Fused { node, .. } if node == "lt"),
        "{report}"
    );
}

#[test]
fn shared_or_exported_predicates_are_not_fused() {
    let engine = engine();
    let mut rng = Rng(6);
    // One comparison feeding two selects.
    let proto = model(
        vec![
            node("Greater", "gt", &["x", "y"], &["c"]),
            node("Where", "w1", &["c", "x", "y"], &["o1"]),
            node("Where", "w2", &["c", "y", "x"], &["o2"]),
        ],
        vec![],
        vec![
            input("x", DatumType::F32, &[6]),
            input("y", DatumType::F32, &[6]),
        ],
        vec![output("o1"), output("o2")],
    );
    let inputs = [
        random(DatumType::F32, &[6], &mut rng),
        random(DatumType::F32, &[6], &mut rng),
    ];
    let (report, _) = run_both("shared Greater", &proto, &inputs, &engine, 2);
    for r in &report.replaced {
        assert_eq!(
            r.condition,
            Condition::Tensor {
                why: Some("gt has other consumers".into())
            },
            "{report}"
        );
    }
    // A comparison that is also a graph output.
    let proto = model(
        vec![
            node("Greater", "gt", &["x", "y"], &["c"]),
            node("Where", "w", &["c", "x", "y"], &["o"]),
        ],
        vec![],
        vec![
            input("x", DatumType::F32, &[6]),
            input("y", DatumType::F32, &[6]),
        ],
        vec![output("o"), output("c")],
    );
    let (report, _) = run_both("exported Greater", &proto, &inputs, &engine, 1);
    assert_eq!(
        report.replaced[0].condition,
        Condition::Tensor {
            why: Some("gt is a model output".into())
        },
        "{report}"
    );
    assert_eq!(report.predicates_fused(), 0);
}

/// The BERT masked fill with symbolic batch and sequence: `Where(mask == 0, -inf, scores)`.
fn masked_fill() -> pb::ModelProto {
    model(
        vec![
            node("Equal", "eq", &["mask", "zero"], &["c"]),
            node("Where", "where", &["c", "ninf", "scores"], &["out"]),
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
                &[D::P("B"), D::V(12), D::P("S"), D::P("S")],
            ),
        ],
        vec![output("out")],
    )
}

#[test]
fn the_replacement_keeps_the_facts_and_axes_of_iff() {
    let plain = load(&masked_fill()).unwrap();
    let iff = plain.nodes().iter().find(|n| n.op_is::<Iff>()).unwrap();
    let iff_fact = plain.outlet_fact(iff.id.into()).unwrap().clone();
    let iff_axes = format!("{}", plain.node_axes_mapping(iff.id).unwrap());
    assert!(
        iff_fact.shape.iter().any(|d| d.to_i64().is_err()),
        "symbolic dims expected: {iff_fact:?}"
    );
    let mut fast = plain.clone();
    let report = selectjit_tract::accelerate(&mut fast).unwrap();
    // The comparison is folded in: the select reads the mask and the zero itself.
    assert_eq!(report.summary(), "replaced: 1 (1 fused)");
    let node = fast.node_by_name("where").unwrap();
    assert!(node.op_is::<selectjit_tract::SelectjitPredIff>());
    assert!(
        fast.node_by_name("eq").is_err(),
        "the comparison node is gone"
    );
    assert_eq!(fast.outlet_fact(node.id.into()).unwrap(), &iff_fact);
    // The natural mapping over its four inputs, as Iff's over its three.
    {
        let (ins, outs) = fast.node_facts(node.id).unwrap();
        let natural = AxesMapping::natural(&ins, &outs).unwrap();
        let mapping = fast.node_axes_mapping(node.id).unwrap();
        assert_eq!(format!("{mapping}"), format!("{natural}"));
        let (ins, outs) = plain.node_facts(iff.id).unwrap();
        let natural = AxesMapping::natural(&ins, &outs).unwrap();
        assert_eq!(iff_axes, format!("{natural}"));
    }
    fast.axes_mapping().unwrap();
    // Decluttering and optimising again keeps the op (and the model consistent).
    let opt = fast.into_optimized().unwrap();
    assert_eq!(count_selectjit(&opt), 1);
    assert_eq!(count_iff(&opt), 0);
}

#[test]
fn registered_as_a_tract_model_transform() {
    use tract_onnx::tract_core::transform::get_transform;
    let mut m = load(&masked_fill()).unwrap();
    let t = get_transform("selectjit")
        .unwrap()
        .expect("transform registered");
    assert_eq!(t.name(), "selectjit");
    t.transform(&mut m).unwrap();
    assert_eq!((count_iff(&m), count_selectjit(&m)), (0, 1));
}

#[test]
fn constant_conditions_are_folded_by_tract_before() {
    // tract's declutter folds a select on a constant condition: nothing is left to replace.
    let proto = model(
        vec![node("Where", "where", &["c", "x", "y"], &["out"])],
        vec![init("c", &tensor1(&[true, true, true]))],
        vec![
            input("x", DatumType::F32, &[2, 3]),
            input("y", DatumType::F32, &[2, 3]),
        ],
        vec![output("out")],
    );
    let mut m = load(&proto).unwrap();
    assert_eq!(count_iff(&m), 0);
    let report = selectjit_tract::accelerate(&mut m).unwrap();
    assert_eq!(report.summary(), "replaced: 0 (0 fused)");
    let x = random(DatumType::F32, &[2, 3], &mut Rng(7));
    let out = run(
        m,
        &[x.clone(), random(DatumType::F32, &[2, 3], &mut Rng(8))],
    )
    .unwrap();
    assert!(same_bits(&out[0], &x));
}

#[test]
fn symbolic_dim_selects_are_left_alone() {
    // A select on TDim values (shape arithmetic), built with tract's own model builder.
    let mut m = TypedModel::default();
    let s = m.symbols.sym("S");
    let c = m.add_source("c", bool::fact([2])).unwrap();
    let a = m
        .add_const("a", tensor1(&[TDim::Sym(s.clone()), TDim::Val(2)]))
        .unwrap();
    let b = m
        .add_const("b", tensor1(&[TDim::Val(3), TDim::Sym(s)]))
        .unwrap();
    let out = m.wire_node("iff", Iff, &[c, a, b]).unwrap();
    m.select_output_outlets(&out).unwrap();
    let report = selectjit_tract::accelerate(&mut m).unwrap();
    assert_eq!(report.summary(), "replaced: 0 (0 fused)");
    assert_eq!(report.left_alone.len(), 1);
    assert_eq!(report.left_alone[0].node, "iff");
    assert!(report.left_alone[0].reason.contains("TDim"), "{report}");
    assert_eq!(count_iff(&m), 1);
    assert!(format!("{report}").contains("left alone iff: TDim operands"));
}

/// ReLU-like graphs where the select's `then` or `else` is also the predicate's operand
/// (`Where(x > 0, x, 0)`, `Where(0 < x, 0, x)`, `Where(isnan(x), 0, x)`): the select writes
/// into `x` itself when the model owns it (the predicate's reference does not count), and
/// into a fresh output when `x` is also a graph output; tract's bytes either way.
#[test]
fn selects_over_their_own_predicate_operand_write_in_place() {
    let engine = engine();
    let zero = tract_ndarray::arr0(0f32).into_tensor();
    let graphs: [(&str, Vec<pb::NodeProto>); 3] = [
        (
            "where(x > 0, x, 0)",
            vec![
                node("Greater", "cmp", &["x", "zero"], &["c"]),
                node("Where", "where", &["c", "x", "zero"], &["out"]),
            ],
        ),
        (
            "where(0 < x, 0, x)",
            vec![
                node("Less", "cmp", &["zero", "x"], &["c"]),
                node("Where", "where", &["c", "zero", "x"], &["out"]),
            ],
        ),
        (
            "where(isnan(x), 0, x)",
            vec![
                node("IsNaN", "cmp", &["x"], &["c"]),
                node("Where", "where", &["c", "zero", "x"], &["out"]),
            ],
        ),
    ];
    for (what, nodes) in graphs {
        for keep in [false, true] {
            let mut nodes = nodes.clone();
            let mut outputs = vec![output("out")];
            if keep {
                nodes.push(node("Identity", "keep_x", &["x"], &["x_out"]));
                outputs.push(output("x_out"));
            }
            let proto = model(
                nodes,
                vec![init("zero", &zero)],
                vec![input("x", DatumType::F32, &[4, 257])],
                outputs,
            );
            let mut v: Vec<f32> =
                slice::<f32>(&random(DatumType::F32, &[4, 257], &mut Rng(11))).to_vec();
            v[3] = f32::NAN;
            v[5] = -0.0;
            let x = tract_ndarray::Array2::from_shape_vec((4, 257), v)
                .unwrap()
                .into_tensor();
            let what = format!("{what} keep={keep}");
            let (report, _) = run_both(&what, &proto, std::slice::from_ref(&x), &engine, 1);
            assert_eq!(report.summary(), "replaced: 1 (1 fused)", "{what}");
            // Owned by the model: the output is `x`'s own buffer, unless `x` is kept.
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
}

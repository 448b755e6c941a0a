//! ONNX graphs built in Rust (tract-onnx's protobuf types), random tensors, an independent
//! reference `Where`, and running a model with tract alone and with selectjit.
#![allow(dead_code)]

use std::sync::Arc;

use selectjit::Engine;
use selectjit_tract::Report;
use tract_onnx::pb;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::logic::Iff;

/// The elements of a plain tensor.
pub fn slice<T: Datum>(t: &Tensor) -> &[T] {
    t.try_as_plain_ram().unwrap().as_slice::<T>().unwrap()
}

/// A dimension of a graph input or output: fixed, or a named symbol (`dim_param`).
#[derive(Clone, Copy, Debug)]
pub enum D {
    V(i64),
    P(&'static str),
}

/// The ONNX element type of a tract datum type.
pub fn onnx_dt(dt: DatumType) -> i32 {
    use pb::tensor_proto::DataType as O;
    (match dt {
        DatumType::Bool => O::Bool,
        DatumType::U8 => O::Uint8,
        DatumType::U16 => O::Uint16,
        DatumType::U32 => O::Uint32,
        DatumType::U64 => O::Uint64,
        DatumType::I8 => O::Int8,
        DatumType::I16 => O::Int16,
        DatumType::I32 => O::Int32,
        DatumType::I64 => O::Int64,
        DatumType::F16 => O::Float16,
        DatumType::F32 => O::Float,
        DatumType::F64 => O::Double,
        DatumType::String => O::String,
        other => panic!("no ONNX type for {other:?}"),
    }) as i32
}

/// Every ONNX element type tract-onnx loads.
pub const ONNX_DTYPES: [DatumType; 13] = [
    DatumType::Bool,
    DatumType::U8,
    DatumType::U16,
    DatumType::U32,
    DatumType::U64,
    DatumType::I8,
    DatumType::I16,
    DatumType::I32,
    DatumType::I64,
    DatumType::F16,
    DatumType::F32,
    DatumType::F64,
    DatumType::String,
];

pub fn value(name: &str, dt: DatumType, dims: &[D]) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{Dimension, dimension::Value};
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                D::V(v) => Value::DimValue(*v),
                D::P(p) => Value::DimParam(p.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: onnx_dt(dt),
                shape: Some(pb::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A graph input of a fixed shape.
pub fn input(name: &str, dt: DatumType, shape: &[usize]) -> pb::ValueInfoProto {
    let dims: Vec<D> = shape.iter().map(|&d| D::V(d as i64)).collect();
    value(name, dt, &dims)
}

/// A graph output whose type and shape tract infers.
pub fn output(name: &str) -> pb::ValueInfoProto {
    pb::ValueInfoProto {
        name: name.into(),
        ..Default::default()
    }
}

pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> pb::NodeProto {
    pb::NodeProto {
        op_type: op.into(),
        name: name.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub fn int_attr(name: &str, v: i64) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}

pub fn ints_attr(name: &str, v: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Ints as i32,
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// An initializer holding `t`.
pub fn init(name: &str, t: &Tensor) -> pb::TensorProto {
    let mut p = pb::TensorProto {
        name: name.into(),
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: onnx_dt(t.datum_type()),
        ..Default::default()
    };
    if t.datum_type() == DatumType::String {
        p.string_data = slice::<String>(t)
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
    } else {
        p.raw_data = t.as_bytes().to_vec();
    }
    p
}

pub fn model(
    nodes: Vec<pb::NodeProto>,
    inits: Vec<pb::TensorProto>,
    inputs: Vec<pb::ValueInfoProto>,
    outputs: Vec<pb::ValueInfoProto>,
) -> pb::ModelProto {
    pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(pb::GraphProto {
            name: "g".into(),
            node: nodes,
            initializer: inits,
            input: inputs,
            output: outputs,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The typed, decluttered model of an ONNX graph.
pub fn load(proto: &pb::ModelProto) -> TractResult<TypedModel> {
    tract_onnx::onnx()
        .model_for_proto_model(proto)?
        .into_typed()?
        .into_decluttered()
}

pub fn count_iff(model: &TypedModel) -> usize {
    model.nodes().iter().filter(|n| n.op_is::<Iff>()).count()
}

pub fn count_selectjit(model: &TypedModel) -> usize {
    model
        .nodes()
        .iter()
        .filter(|n| {
            n.op_is::<selectjit_tract::SelectjitIff>()
                || n.op_is::<selectjit_tract::SelectjitPredIff>()
                || n.op_is::<selectjit_tract::SelectjitChain>()
        })
        .count()
}

/// Optimizes and runs a model.
pub fn run(model: TypedModel, inputs: &[Tensor]) -> TractResult<Vec<Tensor>> {
    let plan = model.into_optimized()?.into_runnable()?;
    let out = plan.run(inputs.iter().map(|t| t.clone().into_tvalue()).collect())?;
    Ok(out.into_iter().map(|v| v.into_tensor()).collect())
}

/// Same datum type, shape and bytes (strings: same strings).
pub fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    if a.datum_type() != b.datum_type() || a.shape() != b.shape() {
        return false;
    }
    if a.datum_type() == DatumType::String {
        slice::<String>(a) == slice::<String>(b)
    } else {
        let n = a.len() * a.datum_type().size_of();
        a.as_bytes()[..n] == b.as_bytes()[..n]
    }
}

pub fn assert_same_bits(what: &str, a: &[Tensor], b: &[Tensor]) {
    assert_eq!(a.len(), b.len(), "{what}: output counts");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(same_bits(x, y), "{what}: output {i} differs\n{x:?}\n{y:?}");
    }
}

/// Runs the graph with tract alone and with every `Iff` replaced (on `engine`); asserts that no
/// `Iff` is left, that the report names `expect_replaced` selects and leaves none alone, and that
/// the outputs are bitwise equal. Returns the report and the outputs.
pub fn run_both(
    what: &str,
    proto: &pb::ModelProto,
    inputs: &[Tensor],
    engine: &Arc<Engine>,
    expect_replaced: usize,
) -> (Report, Vec<Tensor>) {
    let plain = load(proto).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let iffs = count_iff(&plain);
    let mut fast = plain.clone();
    let report = selectjit_tract::accelerate_with(&mut fast, engine.clone()).unwrap();
    assert_eq!(report.replaced.len(), expect_replaced, "{what}: {report}");
    assert_eq!(
        iffs, expect_replaced,
        "{what}: Iff nodes before the transform"
    );
    assert!(report.left_alone.is_empty(), "{what}: {report}");
    assert_eq!(count_iff(&fast), 0, "{what}: Iff left after the transform");
    assert_eq!(count_selectjit(&fast), expect_replaced, "{what}");
    let a = run(plain, inputs).unwrap_or_else(|e| panic!("{what}: tract alone: {e:?}"));
    let b = run(fast, inputs).unwrap_or_else(|e| panic!("{what}: with selectjit: {e:?}"));
    assert_same_bits(what, &a, &b);
    (report, b)
}

/// A deterministic generator (SplitMix64).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random elements of `dt`; floats include NaNs with payloads, both zeros and infinities.
pub fn random(dt: DatumType, shape: &[usize], rng: &mut Rng) -> Tensor {
    let n: usize = shape.iter().product();
    macro_rules! ints {
        ($t:ty) => {{
            let v: Vec<$t> = (0..n).map(|_| rng.next() as $t).collect();
            Tensor::from_shape(shape, &v).unwrap()
        }};
    }
    match dt {
        DatumType::Bool => {
            let v: Vec<bool> = (0..n).map(|_| rng.next() & 1 == 1).collect();
            Tensor::from_shape(shape, &v).unwrap()
        }
        DatumType::U8 => ints!(u8),
        DatumType::U16 => ints!(u16),
        DatumType::U32 => ints!(u32),
        DatumType::U64 => ints!(u64),
        DatumType::I8 => ints!(i8),
        DatumType::I16 => ints!(i16),
        DatumType::I32 => ints!(i32),
        DatumType::I64 => ints!(i64),
        DatumType::F16 => {
            let special = [0x7e01u16, 0xfe55, 0x8000, 0x0000, 0x7c00, 0xfc00];
            let v: Vec<f16> = (0..n)
                .map(|_| {
                    let r = rng.next();
                    f16::from_bits(if r.is_multiple_of(4) {
                        special[(r >> 8) as usize % special.len()]
                    } else {
                        (r >> 16) as u16
                    })
                })
                .collect();
            Tensor::from_shape(shape, &v).unwrap()
        }
        DatumType::F32 => {
            let special = [
                0x7fc0_0123u32,
                0xffa0_0001,
                0x8000_0000,
                0,
                0x7f80_0000,
                0xff80_0000,
            ];
            let v: Vec<f32> = (0..n)
                .map(|_| {
                    let r = rng.next();
                    f32::from_bits(if r.is_multiple_of(4) {
                        special[(r >> 8) as usize % special.len()]
                    } else {
                        (r >> 32) as u32
                    })
                })
                .collect();
            Tensor::from_shape(shape, &v).unwrap()
        }
        DatumType::F64 => {
            let special = [
                0x7ff8_0000_0000_0042u64,
                0xfff4_0000_0000_0001,
                0x8000_0000_0000_0000,
                0,
                0x7ff0_0000_0000_0000,
                0xfff0_0000_0000_0000,
            ];
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    let r = rng.next();
                    f64::from_bits(if r.is_multiple_of(4) {
                        special[(r >> 8) as usize % special.len()]
                    } else {
                        rng.next()
                    })
                })
                .collect();
            Tensor::from_shape(shape, &v).unwrap()
        }
        DatumType::String => {
            let v: Vec<String> = (0..n).map(|_| format!("s{}", rng.below(1000))).collect();
            tract_ndarray::ArrayD::from_shape_vec(shape, v)
                .unwrap()
                .into()
        }
        other => panic!("no generator for {other:?}"),
    }
}

/// numpy's broadcast shape of several shapes (right-aligned).
pub fn broadcast(shapes: &[&[usize]]) -> Vec<usize> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..rank)
        .map(|i| {
            let dims: Vec<usize> = shapes
                .iter()
                .filter_map(|s| (i + s.len()).checked_sub(rank).map(|j| s[j]))
                .collect();
            let d = dims.iter().copied().find(|&d| d != 1).unwrap_or(1);
            assert!(dims.iter().all(|&x| x == 1 || x == d), "{shapes:?}");
            d
        })
        .collect()
}

/// The flat index in a tensor of shape `s` of the output coordinate `ix` (numpy broadcasting).
fn source_index(s: &[usize], ix: &[usize]) -> usize {
    let off = ix.len() - s.len();
    s.iter().enumerate().fold(0, |acc, (k, &d)| {
        acc * d + if d == 1 { 0 } else { ix[off + k] }
    })
}

/// `where(cond, then, else)` computed element by element, independently of tract and
/// selectjit.
pub fn reference_where(c: &Tensor, t: &Tensor, e: &Tensor) -> Tensor {
    let shape = broadcast(&[c.shape(), t.shape(), e.shape()]);
    let n: usize = shape.iter().product();
    let cond = slice::<bool>(c);
    let mut picks = Vec::with_capacity(n);
    let mut ix = vec![0usize; shape.len()];
    for _ in 0..n {
        let take_then = cond[source_index(c.shape(), &ix)];
        picks.push(if take_then {
            (true, source_index(t.shape(), &ix))
        } else {
            (false, source_index(e.shape(), &ix))
        });
        for k in (0..shape.len()).rev() {
            ix[k] += 1;
            if ix[k] < shape[k] {
                break;
            }
            ix[k] = 0;
        }
    }
    if t.datum_type() == DatumType::String {
        let (ts, es) = (slice::<String>(t), slice::<String>(e));
        let v: Vec<String> = picks
            .iter()
            .map(|&(th, i)| if th { ts[i].clone() } else { es[i].clone() })
            .collect();
        return tract_ndarray::ArrayD::from_shape_vec(shape, v)
            .unwrap()
            .into();
    }
    let w = t.datum_type().size_of();
    let (tb, eb) = (t.as_bytes(), e.as_bytes());
    let mut out = Tensor::zero_dt(t.datum_type(), &shape).unwrap();
    let ob = out.as_bytes_mut();
    for (o, &(th, i)) in picks.iter().enumerate() {
        let src = if th { tb } else { eb };
        ob[o * w..(o + 1) * w].copy_from_slice(&src[i * w..(i + 1) * w]);
    }
    out
}

/// An engine of its own (statistics per test), default settings.
pub fn engine() -> Arc<Engine> {
    Arc::new(Engine::new())
}

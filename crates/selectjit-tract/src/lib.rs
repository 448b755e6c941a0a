//! # selectjit-tract
//!
//! [tract](https://github.com/sonos/tract) runs ONNX `Where` as its `Iff` op. This crate
//! rewrites a decluttered tract model so that every `Iff` whose operands selectjit supports
//! runs on a selectjit [`Engine`] instead ([`SelectjitIff`]), keeping
//! tract's facts (shapes, symbolic dims, datum types), its axes mapping and its declutter
//! rules for `Iff`.
//!
//! ```no_run
//! use tract_onnx::prelude::*;
//!
//! # fn main() -> TractResult<()> {
//! let mut model = tract_onnx::onnx()
//!     .model_for_path("model.onnx")?
//!     .into_typed()?
//!     .into_decluttered()?; // tract's own rewrites of Iff first
//! let report = selectjit_tract::accelerate(&mut model)?;
//! println!("{report}"); // replaced: N (F fused), chained: K (N nodes), one line per node
//! let plan = model.into_optimized()?.into_runnable()?;
//! # Ok(())
//! # }
//! ```
//!
//! The transform runs in two steps:
//!
//! 1. **Replace** ([`SelectjitTransform::apply`]): each `Iff` becomes a [`SelectjitIff`] on the
//!    transform's engine, unless its elements are symbolic dims (`TDim`) or opaque (`Blob`);
//!    the [`Report`] says which nodes were replaced and why others were left alone.
//! 2. **Fuse** ([`fuse_conditions`]): a `Not` feeding only a replaced select is folded into it
//!    (its input becomes the condition, `then` and `else` swap), and the predicate computing
//!    the condition — a comparison, `IsNan`, `IsInf`, `IsInf(x) And x > 0` (as `x == +inf`) —
//!    is folded too when it feeds only the select: the select becomes a [`SelectjitPredIff`]
//!    that computes it inside selectjit's kernel, so the bool tensor is never built.
//! 3. **Chain** (the n-way step): a chain of replaced selects, each but the last feeding only
//!    the `then` or `else` of the one before — `Where(c1, a, Where(c2, b, c))`, or nested on
//!    the `then` side, `Where(c1, Where(c2, b, c), a)` = `Where(!c1, a, Where(c2, b, c))` —
//!    becomes one [`SelectjitChain`]: `out = c1 ? a : c2 ? b : c` in one n-way call
//!    ([`selectjit::Engine::select_n_bytes`]), its conditions masks or fused predicates, so
//!    the intermediate tensors are never built. The report counts the chains
//!    (`chained: K (N nodes)`) and says why a select feeding another one was not merged.
//!    Before it, a *forward* chain — `r1 = Where(p1(x), k1, x)`, `r2 = Where(p2(r1), k2, r1)`,
//!    ..., each value a constant, each condition computed from the previous result, as
//!    `torch.onnx.export` writes `torch.nan_to_num` — is merged with its conditions computed
//!    from `x` and each value its constant as the outer nodes map it.
//!
//! Apply it after tract's declutter (so that tract's rewrites of `Iff` — constant-condition
//! folding, uniform masks, scaled-masked-softmax detection — still see `Iff`) and before
//! `into_optimized` / `optimize`. [`SelectjitTransform`] is also a tract `ModelTransform`,
//! registered under the name `selectjit`.
#![warn(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod forward;
mod op;
mod report;

pub mod npy;

use std::sync::Arc;

use selectjit::{CmpOp, DType, Engine, MAX_RANK, TestOp};
use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::binary::TypedBinOp;
use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
use tract_onnx::tract_core::ops::logic::{
    CompEq, CompGT, CompGTE, CompLT, CompLTE, CompNE, Iff, Not,
};
use tract_onnx::tract_core::ops::math::{IsInf, IsNan};
use tract_onnx::tract_core::transform::ModelTransform;

pub use op::{
    Branch, BranchCond, Elements, EngineRef, FusedCond, SelectjitChain, SelectjitIff,
    SelectjitPredIff, elements_of,
};
pub use report::{Chained, Condition, LeftAlone, Predicate, Replaced, Report};

/// Replaces the `Iff` nodes of a decluttered model by selectjit ops on the process-wide
/// default engine (`selectjit::default_engine()`), then folds or examines their conditions.
pub fn accelerate(model: &mut TypedModel) -> TractResult<Report> {
    SelectjitTransform::default().apply(model)
}

/// [`accelerate`] on an engine the caller shares (between models, threads, or to read its
/// statistics).
pub fn accelerate_with(model: &mut TypedModel, engine: Arc<Engine>) -> TractResult<Report> {
    SelectjitTransform::with_engine(engine).apply(model)
}

/// The model transform: `Iff` → [`SelectjitIff`], then [`fuse_conditions`] (→
/// [`SelectjitPredIff`] where the predicate folds in), then chains of selects → one
/// [`SelectjitChain`] each.
#[derive(Debug, Clone, Default)]
pub struct SelectjitTransform {
    engine: EngineRef,
}

impl SelectjitTransform {
    /// The transform on the process default engine.
    pub fn new() -> Self {
        Self::default()
    }

    /// The transform on a shared engine.
    pub fn with_engine(engine: Arc<Engine>) -> Self {
        SelectjitTransform {
            engine: EngineRef::Shared(engine),
        }
    }

    /// Rewrites `model` and reports what it did.
    pub fn apply(&self, model: &mut TypedModel) -> TractResult<Report> {
        let mut report = Report::default();
        let mut replaced = vec![];
        for id in model.eval_order()? {
            let node = model.node(id);
            if !node.op_is::<Iff>() {
                continue;
            }
            match self.replacement(model, node)? {
                Ok(op) => {
                    let dtype = format!("{:?}", model.outlet_fact(node.inputs[1])?.datum_type);
                    let name = node.name.clone();
                    let patch = TypedModelPatch::replace_single_op(model, node, &node.inputs, op)?;
                    patch.apply(model)?;
                    replaced.push((name, dtype));
                }
                Err(reason) => report.left_alone.push(LeftAlone {
                    node: node.name.clone(),
                    reason,
                }),
            }
        }
        model.compact()?;
        for (name, dtype) in replaced {
            let (folded_not, condition) = fuse_conditions(model, &name)?;
            report.replaced.push(Replaced {
                node: name,
                dtype,
                folded_not,
                condition,
            });
        }
        model.compact()?;
        report.chained = forward::merge_forward_chains(model)?;
        let (chained, not_chained) = merge_chains(model)?;
        report.chained.extend(chained);
        report.not_chained = not_chained;
        Ok(report)
    }

    /// The op replacing `node`, or why there is none.
    fn replacement(
        &self,
        model: &TypedModel,
        node: &TypedNode,
    ) -> TractResult<Result<SelectjitIff, String>> {
        let facts = model.node_input_facts(node.id)?;
        if let Some(f) = facts.iter().find(|f| !f.is_plain()) {
            return Ok(Err(format!("operand with exotic storage ({f:?})")));
        }
        let rank = facts[1].rank();
        if rank > MAX_RANK {
            return Ok(Err(format!(
                "rank {rank}: selectjit takes at most {MAX_RANK}"
            )));
        }
        Ok(
            elements_of(facts[1].datum_type).map(|elements| SelectjitIff {
                engine: self.engine.clone(),
                elements,
            }),
        )
    }
}

impl ModelTransform for SelectjitTransform {
    fn name(&self) -> StaticName {
        "selectjit".into()
    }

    fn transform(&self, model: &mut TypedModel) -> TractResult<()> {
        let report = self.apply(model)?;
        log::info!("{report}");
        Ok(())
    }
}

register_simple_model_transform!("selectjit", SelectjitTransform::default());

/// The node producing outlet `o` when that outlet feeds only inlet `slot` of node `id` and is
/// not a model output: a node that can be folded into node `id`.
fn sole_producer(
    model: &TypedModel,
    o: OutletId,
    id: usize,
) -> TractResult<Result<&TypedNode, String>> {
    let node = model.node(o.node);
    if model.output_outlets()?.contains(&o) {
        return Ok(Err(format!("{} is a model output", node.name)));
    }
    if model.outlet_successors(o).iter().any(|i| i.node != id) || node.outputs.len() != 1 {
        return Ok(Err(format!("{} has other consumers", node.name)));
    }
    Ok(Ok(node))
}

/// The fusion step for the replaced select named `select`: folds the `Not` nodes feeding only
/// its condition (their input becomes the condition, `then` and `else` swap; returns their
/// names), then folds the predicate computing the condition, if it feeds only the select: a
/// comparison (`==`, `!=`, `<`, `<=`, `>`, `>=` over one integer or float datum type), an
/// `IsNan`, an `IsInf` detecting both signs, or `IsInf(x) And x > c` for a finite constant `c`
/// (computed as `x == +inf`; `<` for `-inf`). The select becomes a [`SelectjitPredIff`] over the
/// predicate's operands, computing it inside its kernel ([`Condition::Fused`]); otherwise the
/// select reads the bool tensor ([`Condition::Tensor`], with the reason when a predicate could
/// not be folded).
pub fn fuse_conditions(
    model: &mut TypedModel,
    select: &str,
) -> TractResult<(Vec<String>, Condition)> {
    let mut folded = vec![];
    loop {
        let node = model.node_by_name(select)?;
        ensure!(
            node.op_is::<SelectjitIff>(),
            "{select} is not a selectjit select"
        );
        let Ok(not) = sole_producer(model, node.inputs[0], node.id)? else {
            break;
        };
        let is_not = not
            .op_as::<ElementWiseOp>()
            .is_some_and(|e| e.0.is::<Not>() && e.1.is_none());
        if !is_not {
            break;
        }
        let inputs = [not.inputs[0], node.inputs[2], node.inputs[1]];
        folded.push(not.name.clone());
        let patch = TypedModelPatch::replace_single_op(model, node, &inputs, node.op.clone())?;
        patch.apply(model)?;
        model.compact()?;
    }
    let node = model.node_by_name(select)?;
    let p = match sole_producer(model, node.inputs[0], node.id)? {
        Ok(p) => p,
        Err(why) => {
            // Only a predicate op is worth a reason.
            let p = model.node(node.inputs[0].node);
            let condition = match predicate(model, p)? {
                Ok(Some(_)) | Err(_) => Condition::Tensor { why: Some(why) },
                Ok(None) => Condition::Tensor { why: None },
            };
            return Ok((folded, condition));
        }
    };
    // `IsInf(v) And v > c` is `v == +inf`: the operands are `v` and a new constant.
    let signed = signed_inf(model, p)?;
    let (predicate, cond) = match (&signed, predicate(model, p)?) {
        (Some(s), _) => (
            Predicate::InfOfSign {
                positive: s.positive,
                dtype: format!("{:?}", s.dt),
            },
            FusedCond::Compare(CmpOp::Eq, s.dtype),
        ),
        (None, Ok(Some(found))) => found,
        (None, Ok(None)) => return Ok((folded, Condition::Tensor { why: None })),
        (None, Err(why)) => return Ok((folded, Condition::Tensor { why: Some(why) })),
    };
    let iff = node
        .op_as::<SelectjitIff>()
        .expect("checked in the loop above");
    let Elements::Fixed(dtype) = iff.elements else {
        let why = format!("{}: strings are selected on the generic path", p.name);
        return Ok((folded, Condition::Tensor { why: Some(why) }));
    };
    let fact = model.outlet_fact(node.inputs[0])?;
    if fact.uniform.is_some() || fact.uniform_tdim.is_some() {
        let why = format!("{} is uniform: tract's own rules fold it", p.name);
        return Ok((folded, Condition::Tensor { why: Some(why) }));
    }
    let op = SelectjitPredIff {
        engine: iff.engine.clone(),
        dtype,
        cond,
    };
    let name = p.name.clone();
    let patch = match signed {
        None => {
            let inputs: TVec<OutletId> =
                p.inputs.iter().chain(&node.inputs[1..3]).copied().collect();
            TypedModelPatch::replace_single_op(model, node, &inputs, op)?
        }
        Some(s) => {
            let mut patch = TypedModelPatch::default();
            let rank = model.outlet_fact(s.v)?.rank();
            let inf = if s.positive {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            };
            let inf = tensor0(inf)
                .cast_to_dt(s.dt)?
                .into_owned()
                .broadcast_into_rank(rank)?;
            let mut inputs = tvec![patch.tap_model(model, s.v)?];
            inputs.push(patch.add_const(format!("{name}.inf"), inf)?);
            for &o in &node.inputs[1..3] {
                inputs.push(patch.tap_model(model, o)?);
            }
            let out = patch.wire_node(&node.name, op, &inputs)?[0];
            patch.shunt_outside(model, node.id.into(), out)?;
            patch.obliterate(node.id)?;
            patch
        }
    };
    patch.apply(model)?;
    model.compact()?;
    Ok((
        folded,
        Condition::Fused {
            node: name,
            predicate,
        },
    ))
}

/// A replaced select as a link of a chain: its condition and its inputs.
struct Link {
    /// The condition's inputs.
    cond_inputs: TVec<OutletId>,
    cond: BranchCond,
    then: OutletId,
    else_: OutletId,
    dtype: DType,
}

/// `node` as a link of a chain: `Ok(None)` when it is no replaced select, `Err(why)` when it is
/// one that cannot be chained.
fn link(model: &TypedModel, node: &TypedNode) -> TractResult<Result<Option<Link>, String>> {
    let (cond, dtype, n) = if let Some(iff) = node.op_as::<SelectjitIff>() {
        let Elements::Fixed(dtype) = iff.elements else {
            return Ok(Err(format!(
                "{} selects strings: n-way selects move fixed-width elements",
                node.name
            )));
        };
        let fact = model.outlet_fact(node.inputs[0])?;
        if fact.uniform.is_some() || fact.uniform_tdim.is_some() {
            return Ok(Err(format!(
                "the condition of {} is uniform: tract's own rules fold it",
                node.name
            )));
        }
        (BranchCond::Mask, dtype, 1)
    } else if let Some(p) = node.op_as::<SelectjitPredIff>() {
        (BranchCond::Fused(p.cond), p.dtype, p.cond.arity())
    } else {
        return Ok(Ok(None));
    };
    Ok(Ok(Some(Link {
        cond_inputs: node.inputs[..n].iter().copied().collect(),
        cond,
        then: node.inputs[n],
        else_: node.inputs[n + 1],
        dtype,
    })))
}

/// Which side of a select the next link of its chain feeds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Then,
    Else,
}

/// The select feeding node `id`'s `then` or `else` that continues its chain (the else side
/// first), if any: `Ok((producer, side))`. Each select met that cannot continue it comes with
/// the reason, in `why` (`(its name, the reason)`).
fn next_link(
    model: &TypedModel,
    id: usize,
    l: &Link,
    why: &mut Vec<LeftAlone>,
) -> TractResult<Option<(usize, Side)>> {
    let name = &model.node(id).name;
    let mut found = None;
    for (side, o) in [(Side::Else, l.else_), (Side::Then, l.then)] {
        let p = model.node(o.node);
        let inner = match link(model, p)? {
            Ok(None) => continue,
            Ok(Some(inner)) => inner,
            Err(reason) => {
                why.push(LeftAlone {
                    node: p.name.clone(),
                    reason: format!("not chained into {name}: {reason}"),
                });
                continue;
            }
        };
        let reason = if let Err(reason) = sole_producer(model, o, id)? {
            Some(reason)
        } else if model.outlet_successors(o).len() != 1 {
            Some(format!("{} feeds several inputs of {name}", p.name))
        } else if inner.dtype != l.dtype
            || model.outlet_fact(o)?.datum_type != model.outlet_fact(id.into())?.datum_type
        {
            Some(format!("{} selects another datum type", p.name))
        } else if found.is_some() {
            Some(format!(
                "both branches of {name} are selects: its else side is chained"
            ))
        } else {
            None
        };
        match reason {
            Some(reason) => why.push(LeftAlone {
                node: p.name.clone(),
                reason: format!("not chained into {name}: {reason}"),
            }),
            None => found = Some((o.node, side)),
        }
    }
    Ok(found)
}

/// The chain step: each chain of two or more replaced selects, each but the last feeding only
/// the `then` or `else` of the one before, becomes one [`SelectjitChain`] (a select nested on
/// the `then` side negates the outer condition: `Where(c, Where(..), a)` is
/// `Where(!c, a, Where(..))`). Returns the chains merged and the selects that feed another one
/// but could not be merged with it, with the reason.
fn merge_chains(model: &mut TypedModel) -> TractResult<(Vec<Chained>, Vec<LeftAlone>)> {
    let mut chained = vec![];
    let mut not_chained: Vec<LeftAlone> = vec![];
    loop {
        // Each select's next link, in evaluation order; a head is one that is no one's next.
        let mut why = vec![];
        let mut next: Vec<(usize, Option<(usize, Side)>)> = vec![];
        for id in model.eval_order()? {
            let node = model.node(id);
            match link(model, node)? {
                Ok(Some(l)) => next.push((id, next_link(model, id, &l, &mut why)?)),
                Ok(None) => {}
                // A select that cannot be chained: the selects feeding only it say why.
                Err(reason) => {
                    for &o in &node.inputs[1..3] {
                        let p = model.node(o.node);
                        let select = p.op_is::<SelectjitIff>() || p.op_is::<SelectjitPredIff>();
                        if select && sole_producer(model, o, id)?.is_ok() {
                            why.push(LeftAlone {
                                node: p.name.clone(),
                                reason: format!("not chained into {}: {reason}", node.name),
                            });
                        }
                    }
                }
            }
        }
        let inner: Vec<usize> = next.iter().filter_map(|(_, n)| n.map(|n| n.0)).collect();
        let head = next
            .iter()
            .rev()
            .find(|(id, n)| n.is_some() && !inner.contains(id))
            .map(|(id, _)| *id);
        // A merge leaves the other pairs as they were: each reason is met again.
        for w in why {
            if !not_chained.contains(&w) {
                not_chained.push(w);
            }
        }
        let Some(head) = head else {
            return Ok((chained, not_chained));
        };
        let mut branches = vec![];
        let mut inputs: TVec<OutletId> = tvec![];
        let mut names = vec![];
        let mut id = head;
        let default = loop {
            let node = model.node(id);
            let l = link(model, node)?
                .ok()
                .flatten()
                .context("a chain link is a replaced select")?;
            names.push(node.name.clone());
            let n = next.iter().find(|(i, _)| *i == id).and_then(|(_, n)| *n);
            inputs.extend(l.cond_inputs.iter().copied());
            match n {
                Some((p, Side::Else)) => {
                    branches.push(Branch {
                        cond: l.cond,
                        negated: false,
                    });
                    inputs.push(l.then);
                    id = p;
                }
                Some((p, Side::Then)) => {
                    branches.push(Branch {
                        cond: l.cond,
                        negated: true,
                    });
                    inputs.push(l.else_);
                    id = p;
                }
                None => {
                    branches.push(Branch {
                        cond: l.cond,
                        negated: false,
                    });
                    inputs.push(l.then);
                    break l.else_;
                }
            }
        };
        inputs.push(default);
        let node = model.node(head);
        let dtype = link(model, node)?
            .ok()
            .flatten()
            .context("a chain link is a replaced select")?
            .dtype;
        let engine = if let Some(iff) = node.op_as::<SelectjitIff>() {
            iff.engine.clone()
        } else if let Some(p) = node.op_as::<SelectjitPredIff>() {
            p.engine.clone()
        } else {
            bail!("{} is not a replaced select", node.name)
        };
        let op = SelectjitChain {
            engine,
            dtype,
            branches,
        };
        let dt = format!("{:?}", model.outlet_fact(head.into())?.datum_type);
        let patch = TypedModelPatch::replace_single_op(model, node, &inputs, op)?;
        patch.apply(model)?;
        model.compact()?;
        chained.push(Chained {
            nodes: names,
            dtype: dt,
            from_input: false,
        });
    }
}

/// `IsInf(v) And v > c` (or `>=`; `<`, `<=` for the negative sign), as `torch.onnx.export`
/// writes `torch.isposinf` / `isneginf` in nan_to_num: `v == +inf` (`-inf`) when `c` is a finite
/// constant of one element, the `IsInf` detects that sign, and both feed only the `And`.
struct SignedInf {
    /// The tested tensor.
    v: OutletId,
    positive: bool,
    /// Its datum type and the selectjit dtype it is compared as.
    dt: DatumType,
    dtype: DType,
}

/// `p` as a [`SignedInf`], if it is one.
fn signed_inf(model: &TypedModel, p: &TypedNode) -> TractResult<Option<SignedInf>> {
    let is_and = p
        .op_as::<TypedBinOp>()
        .is_some_and(|b| b.0.is::<tract_onnx::tract_core::ops::logic::And>());
    if !is_and || p.inputs.len() != 2 {
        return Ok(None);
    }
    for (a, b) in [(p.inputs[0], p.inputs[1]), (p.inputs[1], p.inputs[0])] {
        let (Ok(inf), Ok(cmp)) = (
            sole_producer(model, a, p.id)?,
            sole_producer(model, b, p.id)?,
        ) else {
            continue;
        };
        let Some(test) = inf
            .op_as::<ElementWiseOp>()
            .and_then(|e| e.0.downcast_ref::<IsInf>())
        else {
            continue;
        };
        let Some(bin) = cmp.op_as::<TypedBinOp>() else {
            continue;
        };
        let v = inf.inputs[0];
        // `v OP c`, or `c OP v` read the other way round.
        let (greater, c) = if cmp.inputs[0] == v {
            (bin.0.is::<CompGT>() || bin.0.is::<CompGTE>(), cmp.inputs[1])
        } else if cmp.inputs[1] == v {
            (bin.0.is::<CompLT>() || bin.0.is::<CompLTE>(), cmp.inputs[0])
        } else {
            continue;
        };
        let ordered = [
            bin.0.is::<CompGT>(),
            bin.0.is::<CompGTE>(),
            bin.0.is::<CompLT>(),
            bin.0.is::<CompLTE>(),
        ];
        if !ordered.contains(&true) {
            continue;
        }
        let positive = greater;
        if !(if positive {
            test.detect_positive
        } else {
            test.detect_negative
        }) {
            continue;
        }
        let dt = model.outlet_fact(v)?.datum_type;
        let Some(dtype) = compared_dtype(dt).filter(|_| dt.is_float()) else {
            continue;
        };
        let Some(k) = &model.outlet_fact(c)?.konst else {
            continue;
        };
        let finite = k.len() == 1
            && k.datum_type() == dt
            && k.cast_to_scalar::<f64>().is_ok_and(|c| c.is_finite());
        if finite {
            return Ok(Some(SignedInf {
                v,
                positive,
                dt,
                dtype,
            }));
        }
    }
    Ok(None)
}

/// The selectjit dtype a fused comparison or test reads `dt` as, if it has one.
fn compared_dtype(dt: DatumType) -> Option<DType> {
    use DatumType as D;
    Some(match dt {
        D::U8 => DType::U8,
        D::U16 => DType::U16,
        D::U32 => DType::U32,
        D::U64 => DType::U64,
        D::I8 => DType::I8,
        D::I16 => DType::I16,
        D::I32 => DType::I32,
        D::I64 => DType::I64,
        D::F16 => DType::F16,
        D::F32 => DType::F32,
        D::F64 => DType::F64,
        _ => return None,
    })
}

/// The predicate node `p` computes: `Ok(Some)` for one a fused kernel computes (as the report
/// names it, and as the kernel computes it), `Err(why)` for a predicate it does not, `Ok(None)`
/// for any other op.
fn predicate(
    model: &TypedModel,
    p: &TypedNode,
) -> TractResult<Result<Option<(Predicate, FusedCond)>, String>> {
    if let Some(bin) = p.op_as::<TypedBinOp>() {
        let m = &bin.0;
        let (op, sym) = if m.is::<CompEq>() {
            (CmpOp::Eq, "==")
        } else if m.is::<CompNE>() {
            (CmpOp::Ne, "!=")
        } else if m.is::<CompLT>() {
            (CmpOp::Lt, "<")
        } else if m.is::<CompLTE>() {
            (CmpOp::Le, "<=")
        } else if m.is::<CompGT>() {
            (CmpOp::Gt, ">")
        } else if m.is::<CompGTE>() {
            (CmpOp::Ge, ">=")
        } else {
            return Ok(Ok(None));
        };
        let (a, b) = (
            model.outlet_fact(p.inputs[0])?.datum_type,
            model.outlet_fact(p.inputs[1])?.datum_type,
        );
        let dtype = compared_dtype(a).filter(|_| a == b);
        let Some(dtype) = dtype else {
            return Ok(Err(format!(
                "{} compares {a:?} with {b:?}: fused predicates compare integers or floats \
                 of one type",
                p.name
            )));
        };
        let predicate = Predicate::Compare {
            op: sym,
            dtype: format!("{a:?}"),
        };
        return Ok(Ok(Some((predicate, FusedCond::Compare(op, dtype)))));
    }
    if let Some(ew) = p.op_as::<ElementWiseOp>() {
        let dt = model.outlet_fact(p.inputs[0])?.datum_type;
        let name = format!("{dt:?}");
        let test = if ew.0.is::<IsNan>() {
            (Predicate::IsNan { dtype: name }, TestOp::IsNan)
        } else if let Some(inf) = ew.0.downcast_ref::<IsInf>() {
            if !(inf.detect_positive && inf.detect_negative) {
                return Ok(Err(format!(
                    "{} detects one sign of infinity only: fused predicates test isinf",
                    p.name
                )));
            }
            (Predicate::IsInf { dtype: name }, TestOp::IsInf)
        } else if ew.0.is::<Not>() {
            return Ok(Err(format!("{} (Not) has other consumers", p.name)));
        } else {
            return Ok(Ok(None));
        };
        let Some(dtype) = compared_dtype(dt) else {
            return Ok(Err(format!("{}: no fused test of {dt:?}", p.name)));
        };
        return Ok(Ok(Some((test.0, FusedCond::Test(test.1, dtype)))));
    }
    Ok(Ok(None))
}

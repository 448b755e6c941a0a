//! Forward chains: each `Where` replaces a few elements of the previous one's result, its
//! condition computed from that result — `r1 = Where(p1(x), k1, x)`,
//! `r2 = Where(p2(r1), k2, r1)`, ... — as `torch.onnx.export` writes `torch.nan_to_num`
//! (`Where(IsInf(r) And r > 0, max, r)` over `r = Where(IsNaN(x), 0, x)`, then the same for
//! `-inf`). The inner results have other consumers (the outer conditions), so the nested-chain
//! step cannot merge them; this one does when every value `k` is a constant:
//!
//! `out = p1(x) ? F1(k1) : p2(x) ? F2(k2) : ... : pn(x) ? kn : x`,
//!
//! the first true condition winning, where `Fj(kj)` is `kj` passed through the outer `Where`
//! nodes (computed once, here, by tract on the constant). Where `p1(x)` ... `p(j-1)(x)` are false,
//! `r(j-1)` is `x`, so `pj(r(j-1))` is `pj(x)`: each outer condition is computed from `x` instead
//! of the previous result. A condition is computed by elementwise ops only (comparisons, logic,
//! tests, casts) from the previous result and constants, or is a predicate the fusion step
//! folded in; its nodes feed nothing else.

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::binary::TypedBinOp;
use tract_onnx::tract_core::ops::cast::Cast;
use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;

use crate::op::{Branch, SelectjitChain, SelectjitIff, SelectjitPredIff};
use crate::report::Chained;
use crate::{BranchCond, link};

/// The most nodes a condition's computation may hold.
const MAX_CONE: usize = 16;

/// One `Where` of a forward chain: `Where(p(prev), value, prev)` (or the value on the `else`
/// side: taken where `p` is false).
struct Stage {
    /// The select node.
    node: usize,
    /// The previous result, which the condition reads.
    prev: OutletId,
    /// The constant value.
    value: Arc<Tensor>,
    /// The value is on the `else` side.
    negated: bool,
    /// The nodes computing the condition from `prev` and constants, in evaluation order.
    cone: Vec<usize>,
    cond: BranchCond,
    cond_inputs: TVec<OutletId>,
}

/// `id` as a stage of a forward chain, if it is one. Node ids are in evaluation order (the
/// model is compacted).
fn stage(model: &TypedModel, id: usize) -> TractResult<Option<Stage>> {
    let node = model.node(id);
    let Ok(Some(l)) = link(model, node)? else {
        return Ok(None);
    };
    let konst = |o: OutletId| -> TractResult<Option<Arc<Tensor>>> {
        Ok(model.outlet_fact(o)?.konst.clone())
    };
    let (value, prev, negated) = match (konst(l.then)?, konst(l.else_)?) {
        (Some(k), None) => (k, l.else_, false),
        (None, Some(k)) => (k, l.then, true),
        _ => return Ok(None),
    };
    let mut cone: Vec<usize> = vec![];
    let mut reads_prev = false;
    let mut stack: Vec<OutletId> = l.cond_inputs.to_vec();
    while let Some(o) = stack.pop() {
        if o == prev {
            reads_prev = true;
            continue;
        }
        if konst(o)?.is_some() || cone.contains(&o.node) {
            continue;
        }
        let n = model.node(o.node);
        let elementwise =
            n.op_is::<TypedBinOp>() || n.op_is::<ElementWiseOp>() || n.op_is::<Cast>();
        if !elementwise || n.outputs.len() != 1 || cone.len() == MAX_CONE {
            return Ok(None);
        }
        cone.push(n.id);
        stack.extend(n.inputs.iter().copied());
    }
    if !reads_prev {
        return Ok(None);
    }
    // The condition's nodes feed nothing else.
    let outputs = model.output_outlets()?;
    for &c in &cone {
        let o = OutletId::new(c, 0);
        if outputs.contains(&o)
            || model
                .outlet_successors(o)
                .iter()
                .any(|i| i.node != id && !cone.contains(&i.node))
        {
            return Ok(None);
        }
    }
    cone.sort_unstable();
    Ok(Some(Stage {
        node: id,
        prev,
        value,
        negated,
        cone,
        cond: l.cond,
        cond_inputs: l.cond_inputs,
    }))
}

/// Whether stage `s` continues the stage of node `p`: its previous result is `p`'s output and
/// feeds nothing but `s` and its condition.
fn continues(model: &TypedModel, s: &Stage, p: usize) -> TractResult<bool> {
    if s.prev != OutletId::new(p, 0) || model.output_outlets()?.contains(&s.prev) {
        return Ok(false);
    }
    Ok(model
        .outlet_successors(s.prev)
        .iter()
        .all(|i| i.node == s.node || s.cone.contains(&i.node)))
}

/// Wires `stage`'s condition into `target` with its previous result read from `prev`: copies
/// of its nodes; constants through `konst`. Returns the condition's inputs there.
fn wire_condition(
    model: &TypedModel,
    stage: &Stage,
    prev: OutletId,
    target: &mut TypedModel,
    mut konst: impl FnMut(&mut TypedModel, OutletId) -> TractResult<OutletId>,
) -> TractResult<(TVec<OutletId>, HashMap<OutletId, OutletId>)> {
    let mut map: HashMap<OutletId, OutletId> = HashMap::new();
    map.insert(stage.prev, prev);
    let mut wire = |target: &mut TypedModel,
                    map: &HashMap<OutletId, OutletId>,
                    o: OutletId|
     -> TractResult<OutletId> {
        match map.get(&o) {
            Some(w) => Ok(*w),
            None => konst(target, o),
        }
    };
    for &c in &stage.cone {
        let n = model.node(c);
        let inputs = n
            .inputs
            .iter()
            .map(|&o| wire(target, &map, o))
            .collect::<TractResult<TVec<_>>>()?;
        let name = format!("{}.chain", n.name);
        let out = target.wire_node(name, n.op.clone(), &inputs)?[0];
        map.insert(OutletId::new(c, 0), out);
    }
    let inputs = stage
        .cond_inputs
        .iter()
        .map(|&o| wire(target, &map, o))
        .collect::<TractResult<TVec<_>>>()?;
    Ok((inputs, map))
}

/// `k` passed through `stages` (the outer `Where` nodes of a chain), computed by tract.
fn through(model: &TypedModel, stages: &[Stage], k: Arc<Tensor>) -> TractResult<Tensor> {
    let mut mini = TypedModel::default();
    let mut cur = mini.add_const("chain.k", k)?;
    let konst = |mini: &mut TypedModel, o: OutletId| -> TractResult<OutletId> {
        let k = model
            .outlet_fact(o)?
            .konst
            .clone()
            .with_context(|| format!("{o:?} is not a constant"))?;
        mini.add_const(format!("chain.const.{}.{}", o.node, o.slot), k)
    };
    for s in stages {
        let (_, map) = wire_condition(model, s, cur, &mut mini, konst)?;
        let node = model.node(s.node);
        let inputs = node
            .inputs
            .iter()
            .map(|&o| match map.get(&o) {
                Some(w) => Ok(*w),
                None => konst(&mut mini, o),
            })
            .collect::<TractResult<TVec<_>>>()?;
        cur = mini.wire_node(node.name.clone(), node.op.clone(), &inputs)?[0];
    }
    mini.select_output_outlets(&[cur])?;
    let out = mini.into_runnable()?.run(tvec![])?;
    Ok(out[0].clone().into_tensor())
}

/// The forward chains of the model, each merged into one [`SelectjitChain`] whose conditions
/// read the innermost input; returns them as the report lists them (outermost first).
pub(crate) fn merge_forward_chains(model: &mut TypedModel) -> TractResult<Vec<Chained>> {
    let mut chained = vec![];
    loop {
        model.compact()?;
        let mut stages: Vec<Stage> = vec![];
        for id in model.eval_order()? {
            if let Some(s) = stage(model, id)? {
                stages.push(s);
            }
        }
        // Each stage's predecessor (the stage whose result it reads), if it continues one.
        let mut prev_of: Vec<Option<usize>> = vec![None; stages.len()];
        for (i, s) in stages.iter().enumerate() {
            if let Some(p) = stages
                .iter()
                .position(|p| s.prev == OutletId::new(p.node, 0))
                && continues(model, s, stages[p].node)?
            {
                prev_of[i] = Some(p);
            }
        }
        let tail = (0..stages.len()).find(|&i| prev_of[i].is_some() && !prev_of.contains(&Some(i)));
        let Some(tail) = tail else {
            return Ok(chained);
        };
        let mut order = vec![tail];
        while let Some(p) = prev_of[*order.last().expect("not empty")] {
            order.push(p);
        }
        order.reverse();
        let mut chain: Vec<Stage> = vec![];
        // Take the stages out in chain order (innermost first).
        let mut slots: Vec<Option<Stage>> = stages.into_iter().map(Some).collect();
        for i in order {
            chain.push(slots[i].take().expect("a stage is in one chain"));
        }
        chained.push(merge(model, &chain)?);
    }
}

/// Replaces the forward chain `chain` (innermost first) by one [`SelectjitChain`].
fn merge(model: &mut TypedModel, chain: &[Stage]) -> TractResult<Chained> {
    let last = model.node(chain[chain.len() - 1].node);
    let (engine, dtype) = if let Some(iff) = last.op_as::<SelectjitIff>() {
        let crate::Elements::Fixed(dtype) = iff.elements else {
            bail!("{}: a chain selects fixed-width elements", last.name)
        };
        (iff.engine.clone(), dtype)
    } else if let Some(p) = last.op_as::<SelectjitPredIff>() {
        (p.engine.clone(), p.dtype)
    } else {
        bail!("{} is not a replaced select", last.name)
    };
    let mut patch = TypedModelPatch::default();
    let x = patch.tap_model(model, chain[0].prev)?;
    let mut inputs: TVec<OutletId> = tvec![];
    let mut branches = vec![];
    for (j, s) in chain.iter().enumerate() {
        let konst = |p: &mut TypedModel, o: OutletId| -> TractResult<OutletId> {
            // A constant of the model, tapped as any outlet.
            let k = model
                .outlet_fact(o)?
                .konst
                .clone()
                .with_context(|| format!("{o:?} is not a constant"))?;
            p.add_const(format!("{}.const", model.node(o.node).name), k)
        };
        let (cond_inputs, _) = wire_condition(model, s, x, &mut patch, konst)?;
        inputs.extend(cond_inputs);
        let value = through(model, &chain[j + 1..], s.value.clone())?;
        let name = format!("{}.value", model.node(s.node).name);
        inputs.push(patch.add_const(name, value)?);
        branches.push(Branch {
            cond: s.cond,
            negated: s.negated,
        });
    }
    inputs.push(x);
    let op = SelectjitChain {
        engine,
        dtype,
        branches,
    };
    let name = last.name.clone();
    let out = patch.wire_node(&name, op, &inputs)?[0];
    patch.shunt_outside(model, OutletId::new(last.id, 0), out)?;
    patch.obliterate(last.id)?;
    let dt = format!("{:?}", model.outlet_fact(last.id.into())?.datum_type);
    let nodes = chain
        .iter()
        .rev()
        .map(|s| model.node(s.node).name.clone())
        .collect();
    patch.apply(model)?;
    model.compact()?;
    Ok(Chained {
        nodes,
        dtype: dt,
        from_input: true,
    })
}

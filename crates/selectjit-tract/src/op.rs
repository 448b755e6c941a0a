//! The op that replaces tract's `Iff`: the same facts, axes and declutter rules, evaluated by
//! a selectjit [`Engine`].

use std::fmt;
use std::sync::Arc;

use selectjit::{
    Broadcast, Choice, CmpOp, Cond, DType, Engine, InPlace, Operand, TensorMut, TensorRef, TestOp,
};
use tract_onnx::tract_core::broadcast::multi_broadcast;
use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::logic::Iff;

/// The engine an op runs on: the process default (`selectjit::default_engine()`) or one the
/// caller shares between models.
#[derive(Clone, Default)]
pub enum EngineRef {
    /// The process-wide default engine.
    #[default]
    Default,
    /// An engine shared by the caller.
    Shared(Arc<Engine>),
}

impl EngineRef {
    /// The engine itself.
    pub fn get(&self) -> &Engine {
        match self {
            EngineRef::Default => selectjit::default_engine(),
            EngineRef::Shared(e) => e,
        }
    }
}

impl PartialEq for EngineRef {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (EngineRef::Default, EngineRef::Default) => true,
            (EngineRef::Shared(a), EngineRef::Shared(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}
impl Eq for EngineRef {}

impl fmt::Debug for EngineRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineRef::Default => f.write_str("default engine"),
            EngineRef::Shared(e) => write!(f, "shared engine {:p}", Arc::as_ptr(e)),
        }
    }
}

/// How the op moves elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elements {
    /// Fixed-width elements moved as raw bytes by the engine's kernels, as this selectjit dtype
    /// (kernels depend on the element width only).
    Fixed(DType),
    /// Strings, through `selectjit::select_generic` (the reference interpreter).
    Strings,
}

/// How the elements of a tract datum type are selected, or why they are not.
pub fn elements_of(dt: DatumType) -> Result<Elements, String> {
    use DatumType as D;
    // The last two arms are reachable when tract-data is built with its `complex` feature.
    #[allow(unreachable_patterns)]
    let fixed = match dt {
        D::Bool => DType::Bool,
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
        // Quantized types: their storage, the parameters stay in the output's datum type.
        D::QI8(_) => DType::I8,
        D::QU8(_) => DType::U8,
        D::QI32(_) => DType::I32,
        D::String => return Ok(Elements::Strings),
        D::TDim => {
            return Err("TDim operands: symbolic shape arithmetic stays with tract".into());
        }
        D::Blob => return Err("Blob operands: opaque data".into()),
        // Complex types (tract's `complex` feature): plain pairs of numbers, moved by width.
        other if other.is_copy() => match other.size_of() {
            4 => DType::U32,
            8 => DType::Complex64,
            16 => DType::Complex128,
            w => {
                return Err(format!(
                    "{other:?} operands: no kernel for {w}-byte elements"
                ));
            }
        },
        other => return Err(format!("{other:?} operands are not plain data")),
    };
    Ok(Elements::Fixed(fixed))
}

/// `Where` / `Iff` on selectjit: `out = cond ? then : else` with numpy broadcasting over inputs
/// of one rank (what tract's `Iff` takes). Output facts, axes mapping and declutter rules are
/// those of `Iff`; the shapes are the run-time ones, so a symbolic dimension is whatever the
/// run resolves it to, and a new length runs on the engine's shape-generic kernel of its
/// pattern without compiling.
///
/// When `then` (or `else`) has the output's shape and the op holds the only reference to it
/// (tract hands a node its inputs after dropping its own references once their last consumer
/// runs), the select writes into it in place instead of allocating.
#[derive(Clone, PartialEq, Eq)]
pub struct SelectjitIff {
    /// The engine the op runs on.
    pub engine: EngineRef,
    /// How the elements are moved.
    pub elements: Elements,
}

impl fmt::Debug for SelectjitIff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SelectjitIff({:?}, {:?})", self.elements, self.engine)
    }
}

impl SelectjitIff {
    fn select_fixed(
        &self,
        dtype: DType,
        cond: &Tensor,
        then: TValue,
        else_: TValue,
        shape: &[usize],
    ) -> TractResult<Tensor> {
        let cond_view = cond.try_as_plain_ram()?;
        let c = TensorRef::new(cond_view.as_bytes(), cond.shape());
        select_cond(self.engine.get(), dtype, c.into(), then, else_, shape)
    }

    fn select_strings(
        cond: &Tensor,
        then: &Tensor,
        else_: &Tensor,
        shape: &[usize],
    ) -> TractResult<Tensor> {
        let c = cond.try_as_plain_ram()?;
        let t = then.try_as_plain_ram()?;
        let e = else_.try_as_plain_ram()?;
        let n: usize = shape.iter().product();
        let mut out = vec![String::new(); n];
        selectjit::select_generic(
            TensorRef::new(c.as_bytes(), cond.shape()),
            TensorRef::new(t.as_slice::<String>()?, then.shape()),
            TensorRef::new(e.as_slice::<String>()?, else_.shape()),
            TensorMut::new(&mut out, shape),
            Broadcast::Numpy,
        )?;
        Ok(tract_ndarray::ArrayD::from_shape_vec(shape, out)?.into())
    }
}

/// `out = cond ? then : else` on `engine`, numpy broadcasting to `shape`: in place into `then`
/// or `else` when it has the output's shape and nobody else holds it (tract hands a node its
/// inputs after dropping its own references once their last consumer runs), else into a new
/// tensor.
fn select_cond(
    engine: &Engine,
    dtype: DType,
    cond: Cond<'_>,
    then: TValue,
    else_: TValue,
    shape: &[usize],
) -> TractResult<Tensor> {
    // In place into `then` or `else` when it is the output's shape and nobody else holds it.
    for role in [InPlace::Then, InPlace::Else] {
        let (inout, other) = match role {
            InPlace::Then => (&then, &else_),
            InPlace::Else => (&else_, &then),
        };
        if inout.is_exclusive() && inout.shape() == shape && inout.is_plain_ram() {
            let other = other.clone();
            let mut t = match role {
                InPlace::Then => then,
                InPlace::Else => else_,
            }
            .into_tensor();
            let other_view = other.try_as_plain_ram()?;
            let o = TensorRef::new(other_view.as_bytes(), other.shape());
            let mut view = t.try_as_plain_ram_mut()?;
            engine.select_in_place_bytes(
                dtype,
                cond,
                TensorMut::new(view.as_bytes_mut(), shape),
                role,
                o,
                Broadcast::Numpy,
            )?;
            return Ok(t);
        }
    }
    let then_view = then.try_as_plain_ram()?;
    let else_view = else_.try_as_plain_ram()?;
    // SAFETY: `elements_of` gave a fixed-width dtype, so the datum type is plain data
    // (`is_copy`: no drop glue, any byte pattern of it is dropped safely). The select
    // writes every element of `out` (one contiguous view of exactly the broadcast shape)
    // before anything reads it; if it fails, `out` is dropped unread.
    let mut out = unsafe { Tensor::uninitialized_dt(then.datum_type(), shape)? };
    let mut out_view = out.try_as_plain_ram_mut()?;
    // A fresh output: its first writes fault its pages in, 512 times fewer on huge pages.
    selectjit::OutputPool::advise_huge_pages(out_view.as_bytes_mut());
    engine.select_bytes(
        dtype,
        cond,
        TensorRef::new(then_view.as_bytes(), then.shape()),
        TensorRef::new(else_view.as_bytes(), else_.shape()),
        TensorMut::new(out_view.as_bytes_mut(), shape),
        Broadcast::Numpy,
    )?;
    Ok(out)
}

impl Op for SelectjitIff {
    fn name(&self) -> StaticName {
        "SelectjitIff".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        let what = match self.elements {
            Elements::Fixed(d) => format!("{}-byte elements ({d})", d.width()),
            Elements::Strings => "strings (generic path)".to_string(),
        };
        Ok(vec![format!("selectjit: {what}, {:?}", self.engine)])
    }

    op_as_typed_op!();
}

impl EvalOp for SelectjitIff {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let (cond, then, else_) = args_3!(inputs);
        ensure!(
            cond.datum_type() == bool::datum_type(),
            "SelectjitIff: condition is {:?}, not bool",
            cond.datum_type()
        );
        ensure!(
            then.datum_type() == else_.datum_type(),
            "SelectjitIff: then is {:?}, else is {:?}",
            then.datum_type(),
            else_.datum_type()
        );
        ensure!(
            cond.rank() == then.rank() && cond.rank() == else_.rank(),
            "SelectjitIff: inputs of ranks {}, {}, {}",
            cond.rank(),
            then.rank(),
            else_.rank()
        );
        let shape: TVec<usize> = multi_broadcast(&[cond.shape(), then.shape(), else_.shape()])?;
        let out = match self.elements {
            Elements::Fixed(dtype) => {
                ensure!(
                    then.datum_type().size_of() == dtype.width(),
                    "SelectjitIff built for {dtype} got {:?}",
                    then.datum_type()
                );
                self.select_fixed(dtype, &cond, then, else_, &shape)?
            }
            Elements::Strings => Self::select_strings(&cond, &then, &else_, &shape)?,
        };
        Ok(tvec!(out.into_tvalue()))
    }
}

impl TypedOp for SelectjitIff {
    as_op!();

    /// Exactly `Iff`'s facts (shapes, symbolic dims, datum type, uniform values).
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        Iff.output_facts(inputs)
    }

    /// Elementwise with broadcasting over inputs of one rank: axis k of every input is axis k
    /// of the output.
    fn axes_mapping(
        &self,
        inputs: &[&TypedFact],
        outputs: &[&TypedFact],
    ) -> TractResult<AxesMapping> {
        AxesMapping::natural(inputs, outputs)
    }

    /// Adding and moving an axis apply to every input and the output alike; removing one
    /// needs it to be 1 everywhere. Reshapes are refused (a broadcast input may not have the
    /// dims the reshape splits or merges).
    fn change_axes(
        &self,
        model: &TypedModel,
        node: &TypedNode,
        io: InOut,
        change: &AxisOp,
    ) -> TractResult<Option<AxisChangeConsequence>> {
        elementwise_change_axes(model, node, io, change)
    }

    /// `Iff`'s own rules: a constant condition folds to one branch.
    fn declutter(
        &self,
        model: &TypedModel,
        node: &TypedNode,
    ) -> TractResult<Option<TypedModelPatch>> {
        Iff.declutter(model, node)
    }

    /// `Iff`'s regions of interest.
    fn input_roi(
        &self,
        model: &TypedModel,
        node: &TypedNode,
    ) -> TractResult<Option<TVec<Option<TDim>>>> {
        Iff.input_roi(model, node)
    }
}

/// The predicate a [`SelectjitPredIff`] computes in its kernel, over operands of one datum type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FusedCond {
    /// `lhs OP rhs`: the op's inputs are `lhs, rhs, then, else`.
    Compare(CmpOp, DType),
    /// `isnan(v)`, `isinf(v)`, ...: the op's inputs are `v, then, else`.
    Test(TestOp, DType),
}

impl FusedCond {
    /// The predicate as the library takes it, over `operand(k)`, the op's k-th input.
    pub(crate) fn over<'a>(&self, operand: impl Fn(usize) -> Operand<'a>) -> Cond<'a> {
        match *self {
            FusedCond::Compare(op, _) => Cond::cmp(op, operand(0), operand(1)),
            FusedCond::Test(op, _) => Cond::test(op, operand(0)),
        }
    }

    /// How many of the op's inputs the predicate reads (they come first).
    pub fn arity(&self) -> usize {
        match self {
            FusedCond::Compare(..) => 2,
            FusedCond::Test(..) => 1,
        }
    }

    /// The compared datum type's selectjit dtype.
    pub fn dtype(&self) -> DType {
        match *self {
            FusedCond::Compare(_, d) | FusedCond::Test(_, d) => d,
        }
    }
}

/// `Where(pred(a, b), then, else)` in one selectjit call: the comparison (or test) is computed
/// inside the kernel, so the bool tensor tract's comparison node would build is never made. The
/// predicate's shape is the broadcast of its operands; it then broadcasts with `then` and
/// `else` as `Iff`'s condition does. Output facts and axes are `Iff`'s.
#[derive(Clone, PartialEq, Eq)]
pub struct SelectjitPredIff {
    /// The engine the op runs on.
    pub engine: EngineRef,
    /// The selected elements' dtype (fixed width).
    pub dtype: DType,
    /// The predicate.
    pub cond: FusedCond,
}

impl fmt::Debug for SelectjitPredIff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SelectjitPredIff({:?} selecting {}, {:?})",
            self.cond, self.dtype, self.engine
        )
    }
}

impl SelectjitPredIff {
    /// The condition's fact: bool, of the broadcast shape of the predicate's operands.
    fn cond_fact(&self, inputs: &[&TypedFact]) -> TractResult<TypedFact> {
        let n = self.cond.arity();
        ensure!(
            inputs.len() == n + 2,
            "SelectjitPredIff expects {} inputs, got {}",
            n + 2,
            inputs.len()
        );
        let shapes: Vec<TVec<TDim>> = inputs[..n].iter().map(|f| f.shape.to_tvec()).collect();
        Ok(bool::datum_type().fact(multi_broadcast(&shapes)?))
    }
}

impl Op for SelectjitPredIff {
    fn name(&self) -> StaticName {
        "SelectjitPredIff".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!(
            "selectjit: {:?} fused, selecting {}, {:?}",
            self.cond, self.dtype, self.engine
        )])
    }

    op_as_typed_op!();
}

impl SelectjitPredIff {
    /// A select whose `then` or `else` is also an operand of its predicate (ReLU:
    /// `where(x > 0, x, 0)`): the predicate's reference to that tensor would keep the select
    /// from writing into it, so it allocated a fresh output (page faults and all, 8x the
    /// kernel on 64 MiB). The predicate's references to it are dropped, and when nobody else
    /// holds the tensor the select runs in place, reading those operands from the in-place
    /// buffer (`Operand::in_place`: elementwise, so each is read before it is overwritten).
    /// `Err((then, else))` when no such select applies; `inputs` then holds what it held (a
    /// dropped reference comes back as a clone of the tensor it referred to).
    #[allow(clippy::type_complexity)]
    fn in_place_over_own_operand(
        &self,
        inputs: &mut TVec<TValue>,
        then: TValue,
        else_: TValue,
        shape: &[usize],
    ) -> TractResult<Result<Tensor, (TValue, TValue)>> {
        if self.cond.dtype() != self.dtype {
            return Ok(Err((then, else_)));
        }
        for role in [InPlace::Then, InPlace::Else] {
            let inout = match role {
                InPlace::Then => &then,
                InPlace::Else => &else_,
            };
            let aliased: Vec<bool> = inputs
                .iter()
                .map(|t| std::ptr::eq::<Tensor>(&**t, &**inout))
                .collect();
            if !aliased.contains(&true) || inout.shape() != shape || !inout.is_plain_ram() {
                continue;
            }
            let kept: Vec<Option<TValue>> = inputs
                .drain(..)
                .zip(&aliased)
                .map(|(t, &a)| (!a).then_some(t))
                .collect();
            if !inout.is_exclusive() {
                inputs.extend(kept.into_iter().map(|k| k.unwrap_or_else(|| inout.clone())));
                return Ok(Err((then, else_)));
            }
            let views = kept
                .iter()
                .map(|k| k.as_ref().map(|t| t.try_as_plain_ram()).transpose())
                .collect::<TractResult<Vec<_>>>()?;
            let cd = self.cond.dtype();
            let operand = |k: usize| match (&views[k], &kept[k]) {
                (Some(v), Some(t)) => {
                    Operand::from_bytes(cd, TensorRef::new(v.as_bytes(), t.shape()))
                }
                _ => Operand::in_place(),
            };
            let cond = self.cond.over(operand);
            // The only reference: moving the tensor out of it copies nothing.
            let (inout, other) = match role {
                InPlace::Then => (then, else_),
                InPlace::Else => (else_, then),
            };
            let mut t = inout.into_tensor();
            let other_view = other.try_as_plain_ram()?;
            let o = TensorRef::new(other_view.as_bytes(), other.shape());
            self.engine.get().select_in_place_bytes(
                self.dtype,
                cond,
                TensorMut::new(t.try_as_plain_ram_mut()?.as_bytes_mut(), shape),
                role,
                o,
                Broadcast::Numpy,
            )?;
            return Ok(Ok(t));
        }
        Ok(Err((then, else_)))
    }
}

impl EvalOp for SelectjitPredIff {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, mut inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let n = self.cond.arity();
        ensure!(
            inputs.len() == n + 2,
            "SelectjitPredIff expects {} inputs, got {}",
            n + 2,
            inputs.len()
        );
        let else_ = inputs.pop().unwrap();
        let then = inputs.pop().unwrap();
        let cd = self.cond.dtype();
        for (what, t) in [("then", &then), ("else", &else_)] {
            ensure!(
                t.datum_type().size_of() == self.dtype.width(),
                "SelectjitPredIff selecting {} got {what} of {:?}",
                self.dtype,
                t.datum_type()
            );
        }
        for t in &inputs {
            ensure!(
                t.datum_type().size_of() == cd.width() && t.is_plain_ram(),
                "SelectjitPredIff comparing {cd} got {:?}",
                t.datum_type()
            );
            ensure!(
                t.rank() == then.rank(),
                "SelectjitPredIff: operands of ranks {} and {}",
                t.rank(),
                then.rank()
            );
        }
        ensure!(
            then.datum_type() == else_.datum_type() && then.rank() == else_.rank(),
            "SelectjitPredIff: then is {:?}, else is {:?}",
            then.datum_type(),
            else_.datum_type()
        );
        let mut shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
        shapes.extend([then.shape(), else_.shape()]);
        let shape: TVec<usize> = multi_broadcast(&shapes)?;
        let (then, else_) =
            match self.in_place_over_own_operand(&mut inputs, then, else_, &shape)? {
                Ok(out) => return Ok(tvec!(out.into_tvalue())),
                Err(then_else) => then_else,
            };
        let views = inputs
            .iter()
            .map(|t| t.try_as_plain_ram())
            .collect::<TractResult<Vec<_>>>()?;
        let operand = |k: usize| {
            Operand::from_bytes(cd, TensorRef::new(views[k].as_bytes(), inputs[k].shape()))
        };
        let cond = self.cond.over(operand);
        let out = select_cond(self.engine.get(), self.dtype, cond, then, else_, &shape)?;
        Ok(tvec!(out.into_tvalue()))
    }
}

impl TypedOp for SelectjitPredIff {
    as_op!();

    /// `Iff`'s facts for a condition of the predicate operands' broadcast shape.
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let n = self.cond.arity();
        let cond = self.cond_fact(inputs)?;
        Iff.output_facts(&[&cond, inputs[n], inputs[n + 1]])
    }

    /// Elementwise with broadcasting over inputs of one rank.
    fn axes_mapping(
        &self,
        inputs: &[&TypedFact],
        outputs: &[&TypedFact],
    ) -> TractResult<AxesMapping> {
        AxesMapping::natural(inputs, outputs)
    }

    /// As [`SelectjitIff`]'s.
    fn change_axes(
        &self,
        model: &TypedModel,
        node: &TypedNode,
        io: InOut,
        change: &AxisOp,
    ) -> TractResult<Option<AxisChangeConsequence>> {
        elementwise_change_axes(model, node, io, change)
    }
}

/// Axis changes of an elementwise op over inputs of one rank: adding and moving an axis apply to
/// every input and the output alike; removing one needs it to be 1 everywhere. Reshapes are
/// refused (a broadcast input may not have the dims the reshape splits or merges).
fn elementwise_change_axes(
    model: &TypedModel,
    node: &TypedNode,
    _io: InOut,
    change: &AxisOp,
) -> TractResult<Option<AxisChangeConsequence>> {
    match change {
        AxisOp::Add(_) | AxisOp::Move(_, _) => {}
        AxisOp::Rm(rm) => {
            let (inputs, outputs) = model.node_facts(node.id)?;
            for f in inputs.iter().chain(outputs.iter()) {
                rule_if!(f.rank() > *rm && f.shape[*rm].is_one());
            }
        }
        AxisOp::Reshape(..) => return Ok(None),
    }
    Ok(Some(AxisChangeConsequence::new(model, node, None, change)))
}

/// The condition of one branch of a [`SelectjitChain`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchCond {
    /// A bool tensor: one input.
    Mask,
    /// A predicate computed in the kernel: [`FusedCond::arity`] inputs.
    Fused(FusedCond),
}

impl BranchCond {
    /// How many of the op's inputs the condition reads.
    pub fn arity(&self) -> usize {
        match self {
            BranchCond::Mask => 1,
            BranchCond::Fused(f) => f.arity(),
        }
    }
}

/// One branch of a [`SelectjitChain`]: its condition (negated or not), then its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Branch {
    /// The condition.
    pub cond: BranchCond,
    /// Whether the branch is taken where the condition is false (a `Where` nested on its
    /// `then` side: `Where(c, Where(..), a)` takes `a` where `c` is false).
    pub negated: bool,
}

/// A chain of `Where` nodes in one selectjit call ([`Engine::select_n_bytes`]):
/// `out = c1 ? v1 : c2 ? v2 : ... : default`, the first true condition wins. Its inputs are, for
/// each branch in order, the condition's inputs (a bool tensor, or a fused predicate's
/// operands) then the branch's value; the default comes last. Every input broadcasts with
/// numpy's rule (all of one rank, as `Iff`'s); the output's facts are those of the nested `Iff`
/// nodes it replaces: the datum type of the values, the broadcast shape of every input.
///
/// When the default has the output's shape and the op holds the only reference to it, the
/// select writes into it in place (the predicates reading it see it as it was).
#[derive(Clone, PartialEq, Eq)]
pub struct SelectjitChain {
    /// The engine the op runs on.
    pub engine: EngineRef,
    /// The selected elements' dtype (fixed width).
    pub dtype: DType,
    /// The branches, outermost `Where` first.
    pub branches: Vec<Branch>,
}

impl fmt::Debug for SelectjitChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SelectjitChain({:?} selecting {}, {:?})",
            self.branches, self.dtype, self.engine
        )
    }
}

/// Where an input of a [`SelectjitChain`] sits in its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A bool mask.
    Mask,
    /// An operand of a fused predicate comparing this dtype.
    Operand(DType),
    /// A branch's value or the default.
    Value,
}

impl SelectjitChain {
    /// How many inputs the op takes.
    pub fn input_count(&self) -> usize {
        self.branches
            .iter()
            .map(|b| b.cond.arity() + 1)
            .sum::<usize>()
            + 1
    }

    /// The role of each input, in order.
    fn roles(&self) -> Vec<Role> {
        let mut roles = Vec::with_capacity(self.input_count());
        for b in &self.branches {
            match b.cond {
                BranchCond::Mask => roles.push(Role::Mask),
                BranchCond::Fused(f) => {
                    roles.extend(std::iter::repeat_n(Role::Operand(f.dtype()), f.arity()))
                }
            }
            roles.push(Role::Value);
        }
        roles.push(Role::Value);
        roles
    }

    /// The conditions and values of the call over `views` (one per input, `None`: the output
    /// itself, read as it was on entry); the default is the last view.
    fn call<'a>(
        &self,
        views: &[Option<TensorRef<'a, u8>>],
    ) -> (Vec<Cond<'a>>, Vec<Choice<'a, u8>>) {
        let mut conds = Vec::with_capacity(self.branches.len());
        let mut values = Vec::with_capacity(self.branches.len());
        let mut k = 0;
        for b in &self.branches {
            let cond = match b.cond {
                BranchCond::Mask => Cond::mask(views[k].expect("a mask never reads the output")),
                BranchCond::Fused(f) => {
                    let cd = f.dtype();
                    f.over(|j| match views[k + j] {
                        Some(t) => Operand::from_bytes(cd, t),
                        None => Operand::in_place(),
                    })
                }
            };
            conds.push(if b.negated { cond.not() } else { cond });
            k += b.cond.arity();
            values.push(match views[k] {
                Some(t) => Choice::Tensor(t),
                None => Choice::Out,
            });
            k += 1;
        }
        (conds, values)
    }
}

impl Op for SelectjitChain {
    fn name(&self) -> StaticName {
        "SelectjitChain".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!(
            "selectjit: n-way select of {} branches ({:?}), selecting {}, {:?}",
            self.branches.len(),
            self.branches,
            self.dtype,
            self.engine
        )])
    }

    op_as_typed_op!();
}

impl EvalOp for SelectjitChain {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let roles = self.roles();
        ensure!(
            inputs.len() == roles.len(),
            "SelectjitChain expects {} inputs, got {}",
            roles.len(),
            inputs.len()
        );
        let default_dt = inputs[inputs.len() - 1].datum_type();
        let rank = inputs[0].rank();
        for (t, role) in inputs.iter().zip(&roles) {
            let ok = match role {
                Role::Mask => t.datum_type() == bool::datum_type(),
                Role::Operand(cd) => t.datum_type().size_of() == cd.width(),
                Role::Value => {
                    t.datum_type() == default_dt && t.datum_type().size_of() == self.dtype.width()
                }
            };
            ensure!(
                ok && t.is_plain_ram(),
                "SelectjitChain selecting {} got {:?} as {role:?}",
                self.dtype,
                t.datum_type()
            );
            ensure!(
                t.rank() == rank,
                "SelectjitChain: inputs of ranks {rank} and {}",
                t.rank()
            );
        }
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
        let shape: TVec<usize> = multi_broadcast(&shapes)?;
        let mut inputs: Vec<Option<TValue>> = inputs.into_iter().map(Some).collect();
        let last = inputs.len() - 1;

        // In place into the default when it has the output's shape and nobody else holds it:
        // the inputs that are the same tensor read the output as it was on entry (a mask
        // cannot, nor an operand compared as another dtype).
        let (aliased, fits) = {
            let d = inputs[last].as_ref().expect("every input is there");
            let aliased: Vec<usize> = (0..=last)
                .filter(|&i| {
                    let t = inputs[i].as_ref().expect("every input is there");
                    std::ptr::eq::<Tensor>(&**t, &**d)
                })
                .collect();
            let readable = aliased.iter().all(|&i| match roles[i] {
                Role::Mask => false,
                Role::Operand(cd) => cd == self.dtype,
                Role::Value => true,
            });
            let fits = readable && d.shape() == &*shape;
            (aliased, fits)
        };
        let in_place = if fits {
            let mut taken: Vec<TValue> = aliased
                .iter()
                .map(|&i| inputs[i].take().expect("every input is there"))
                .collect();
            let buf = taken.pop().expect("the default is aliased with itself");
            drop(taken);
            if buf.is_exclusive() {
                Some(buf.into_tensor())
            } else {
                for &i in &aliased {
                    inputs[i] = Some(buf.clone());
                }
                None
            }
        } else {
            None
        };
        let plain = inputs
            .iter()
            .map(|t| t.as_ref().map(|t| t.try_as_plain_ram()).transpose())
            .collect::<TractResult<Vec<_>>>()?;
        let views: Vec<Option<TensorRef<'_, u8>>> = plain
            .iter()
            .zip(&inputs)
            .map(|(v, t)| match (v, t) {
                (Some(v), Some(t)) => Some(TensorRef::new(v.as_bytes(), t.shape())),
                _ => None,
            })
            .collect();
        let (conds, values) = self.call(&views[..last]);
        let engine = self.engine.get();
        let out = match in_place {
            Some(mut t) => {
                let mut view = t.try_as_plain_ram_mut()?;
                engine.select_n_bytes(
                    self.dtype,
                    &conds,
                    &values,
                    Choice::Out,
                    TensorMut::new(view.as_bytes_mut(), &shape),
                    Broadcast::Numpy,
                )?;
                t
            }
            None => {
                let default = views[last].expect("not moved out");
                // SAFETY: the dtype is fixed-width (`elements_of`), so the datum type is plain
                // data (`is_copy`: no drop glue, any byte pattern of it is dropped safely). The
                // select writes every element of `out` (one contiguous view of exactly the
                // broadcast shape) before anything reads it; if it fails, `out` is dropped
                // unread.
                let mut out = unsafe { Tensor::uninitialized_dt(default_dt, &shape)? };
                let mut out_view = out.try_as_plain_ram_mut()?;
                selectjit::OutputPool::advise_huge_pages(out_view.as_bytes_mut());
                engine.select_n_bytes(
                    self.dtype,
                    &conds,
                    &values,
                    Choice::Tensor(default),
                    TensorMut::new(out_view.as_bytes_mut(), &shape),
                    Broadcast::Numpy,
                )?;
                out
            }
        };
        Ok(tvec!(out.into_tvalue()))
    }
}

impl TypedOp for SelectjitChain {
    as_op!();

    /// The nested `Iff` nodes' facts: the values' datum type, the broadcast shape of every
    /// input (inputs of one rank).
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let roles = self.roles();
        ensure!(
            inputs.len() == roles.len(),
            "SelectjitChain expects {} inputs, got {}",
            roles.len(),
            inputs.len()
        );
        let default = inputs[inputs.len() - 1];
        for (f, role) in inputs.iter().zip(&roles) {
            ensure!(
                f.rank() == default.rank(),
                "SelectjitChain: inputs of ranks {} and {}",
                f.rank(),
                default.rank()
            );
            match role {
                Role::Mask => ensure!(f.datum_type.is::<bool>()),
                Role::Value => ensure!(f.datum_type == default.datum_type),
                Role::Operand(_) => {}
            }
        }
        let shapes: Vec<TVec<TDim>> = inputs.iter().map(|f| f.shape.to_tvec()).collect();
        Ok(tvec!(default.datum_type.fact(multi_broadcast(&shapes)?)))
    }

    /// Elementwise with broadcasting over inputs of one rank.
    fn axes_mapping(
        &self,
        inputs: &[&TypedFact],
        outputs: &[&TypedFact],
    ) -> TractResult<AxesMapping> {
        AxesMapping::natural(inputs, outputs)
    }

    /// As [`SelectjitIff`]'s.
    fn change_axes(
        &self,
        model: &TypedModel,
        node: &TypedNode,
        io: InOut,
        change: &AxisOp,
    ) -> TractResult<Option<AxisChangeConsequence>> {
        elementwise_change_axes(model, node, io, change)
    }
}

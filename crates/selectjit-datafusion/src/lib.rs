//! DataFusion on selectjit: [`SelectjitCaseRule`], a physical optimizer rule that swaps
//! DataFusion's `CaseExpr` inside projections, filters and aggregate arguments for
//! [`SelectjitCaseExpr`], which runs the whole `CASE` as one n-way select on bitmap
//! conditions (`selectjit_arrow::case_when`): the first true `WHEN` wins, a null `WHEN` is
//! false, no `ELSE` gives null. `WHEN`s that compare an integer, date or time column with a
//! literal or another such column are computed inside the select's kernel.
//!
//! DataFusion evaluates each `THEN` (and each `WHEN` after the first) only on the rows that
//! reach it; the select evaluates them on every row. So a `CASE` is replaced only when every
//! such expression cannot fail on any row: columns, literals, comparisons, `IS [NOT] NULL`,
//! `NOT`, `AND`, `OR`, `LIKE`, `IN` lists, widening numeric casts, `+`, `-`, `*` of numbers
//! (DataFusion wraps integer overflow unless `fail_on_overflow` is set) and nested `CASE`s of
//! those. Anything else (`1 / x` behind `x <> 0`) stays DataFusion's, and the rule's
//! [`Report`] says why.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> datafusion::error::Result<()> {
//! use std::sync::Arc;
//! use datafusion::execution::SessionStateBuilder;
//! use datafusion::prelude::*;
//! use selectjit_datafusion::SelectjitCaseRule;
//!
//! let rule = Arc::new(SelectjitCaseRule::new());
//! let state = selectjit_datafusion::with_rule(
//!     SessionStateBuilder::new().with_default_features(),
//!     rule.clone(),
//! )
//! .build();
//! let ctx = SessionContext::new_with_state(state);
//! use datafusion::arrow::array::{Int32Array, RecordBatch};
//! let x = Int32Array::from(vec![1, 2, 3]);
//! ctx.register_batch("t", RecordBatch::try_from_iter([("x", Arc::new(x) as _)])?)?;
//! let df = ctx
//!     .sql("SELECT CASE WHEN x < 2 THEN 10 WHEN x < 3 THEN 20 ELSE 30 END AS b FROM t")
//!     .await?;
//! let batches = df.collect().await?;
//! assert_eq!(batches[0].num_rows(), 3);
//! assert_eq!(rule.report().replaced, 1);
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Datum, Scalar};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::expressions::{
    BinaryExpr, CaseExpr, CastExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr,
    Literal, NegativeExpr, NotExpr, TryCastExpr,
};
use datafusion::physical_expr::{PhysicalExpr, aggregate::AggregateFunctionExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use selectjit::CmpOp;
use selectjit_arrow::When;

mod strset;
use strset::StrSet;

/// `builder` with `rule` run first, before DataFusion's own physical optimizer rules: a
/// projection that DataFusion later pushes into a file scan (`DataSourceExec`) then carries
/// selectjit's expression with it. (`SessionStateBuilder::with_physical_optimizer_rule` runs a
/// rule last, when such a projection is no longer a `ProjectionExec`.)
///
/// ```
/// use std::sync::Arc;
/// use datafusion::execution::SessionStateBuilder;
/// use selectjit_datafusion::{SelectjitCaseRule, with_rule};
/// let rule = Arc::new(SelectjitCaseRule::new());
/// let state = with_rule(SessionStateBuilder::new().with_default_features(), rule).build();
/// assert_eq!(state.physical_optimizers()[0].name(), "selectjit_case");
/// ```
pub fn with_rule(
    builder: SessionStateBuilder,
    rule: Arc<SelectjitCaseRule>,
) -> SessionStateBuilder {
    let mut rules = PhysicalOptimizer::new().rules;
    rules.insert(0, rule);
    builder.with_physical_optimizer_rules(rules)
}

/// What the rule did: `CASE`s replaced, and each one left alone with its reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// `CASE` expressions now run by selectjit.
    pub replaced: usize,
    /// Each `CASE` left to DataFusion: its SQL and why.
    pub left_alone: Vec<(String, String)>,
}

/// The physical optimizer rule: register it with
/// `SessionStateBuilder::with_physical_optimizer_rule`. It keeps a [`Report`] of every plan it
/// optimized since it was made (or since [`SelectjitCaseRule::take_report`]).
#[derive(Debug, Default)]
pub struct SelectjitCaseRule {
    report: Mutex<Report>,
}

impl SelectjitCaseRule {
    /// A rule with an empty report.
    ///
    /// ```
    /// let rule = selectjit_datafusion::SelectjitCaseRule::new();
    /// assert_eq!(rule.report().replaced, 0);
    /// ```
    pub fn new() -> SelectjitCaseRule {
        SelectjitCaseRule::default()
    }

    /// The report so far.
    ///
    /// ```
    /// let rule = selectjit_datafusion::SelectjitCaseRule::new();
    /// assert!(rule.report().left_alone.is_empty());
    /// ```
    pub fn report(&self) -> Report {
        self.report.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The report so far, leaving an empty one.
    ///
    /// ```
    /// let rule = selectjit_datafusion::SelectjitCaseRule::new();
    /// assert_eq!(rule.take_report(), Default::default());
    /// ```
    pub fn take_report(&self) -> Report {
        self.report
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }

    fn rewrite_expr(
        &self,
        e: &Arc<dyn PhysicalExpr>,
        schema: &Schema,
    ) -> Result<Transformed<Arc<dyn PhysicalExpr>>> {
        Arc::clone(e).transform_up(|node| {
            let Some(case) = node.downcast_ref::<CaseExpr>() else {
                return Ok(Transformed::no(node));
            };
            match SelectjitCaseExpr::try_from_case(case, &node, schema) {
                Ok(ours) => {
                    if let Ok(mut r) = self.report.lock() {
                        r.replaced += 1;
                    }
                    Ok(Transformed::yes(Arc::new(ours) as Arc<dyn PhysicalExpr>))
                }
                Err(why) => {
                    if let Ok(mut r) = self.report.lock() {
                        r.left_alone.push((sql(&node), why));
                    }
                    Ok(Transformed::no(node))
                }
            }
        })
    }

    fn rewrite_plan(
        &self,
        plan: Arc<dyn ExecutionPlan>,
    ) -> Result<Transformed<Arc<dyn ExecutionPlan>>> {
        if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
            let schema = p.input().schema();
            let mut changed = false;
            let mut exprs = Vec::with_capacity(p.expr().len());
            for pe in p.expr() {
                let t = self.rewrite_expr(&pe.expr, &schema)?;
                changed |= t.transformed;
                exprs.push(ProjectionExpr {
                    expr: t.data,
                    alias: pe.alias.clone(),
                });
            }
            if changed {
                let new = ProjectionExec::try_new(exprs, Arc::clone(p.input()))?;
                return Ok(Transformed::yes(Arc::new(new)));
            }
        } else if let Some(f) = plan.downcast_ref::<FilterExec>() {
            let t = self.rewrite_expr(f.predicate(), &f.input().schema())?;
            if t.transformed {
                let new = FilterExecBuilder::from(f).with_predicate(t.data).build()?;
                return Ok(Transformed::yes(Arc::new(new)));
            }
        } else if let Some(a) = plan.downcast_ref::<AggregateExec>() {
            let schema = a.input_schema();
            let mut changed = false;
            let mut aggs: Vec<Arc<AggregateFunctionExpr>> = Vec::new();
            for agg in a.aggr_expr() {
                let mut args = Vec::new();
                let mut this = false;
                for e in agg.expressions() {
                    let t = self.rewrite_expr(&e, &schema)?;
                    this |= t.transformed;
                    args.push(t.data);
                }
                let order: Vec<_> = agg
                    .order_bys()
                    .iter()
                    .map(|s| Arc::clone(&s.expr))
                    .collect();
                match this
                    .then(|| agg.with_new_expressions(args, order))
                    .flatten()
                {
                    Some(new) => {
                        changed = true;
                        aggs.push(Arc::new(new));
                    }
                    None => aggs.push(Arc::clone(agg)),
                }
            }
            if changed {
                return Ok(Transformed::yes(Arc::new(a.with_new_aggr_exprs(aggs))));
            }
        }
        Ok(Transformed::no(plan))
    }
}

impl PhysicalOptimizerRule for SelectjitCaseRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(plan.transform_up(|p| self.rewrite_plan(p))?.data)
    }

    fn name(&self) -> &str {
        "selectjit_case"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

fn sql(e: &Arc<dyn PhysicalExpr>) -> String {
    datafusion::physical_expr_common::physical_expr::fmt_sql(e.as_ref()).to_string()
}

/// Why `e` may fail on some row, or `None` when it cannot.
fn may_fail(e: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<String> {
    let any: &dyn PhysicalExpr = e.as_ref();
    let children_ok = || e.children().into_iter().find_map(|c| may_fail(c, schema));
    if any.is::<Column>() || any.is::<Literal>() {
        return None;
    }
    if any.is::<IsNullExpr>()
        || any.is::<IsNotNullExpr>()
        || any.is::<NotExpr>()
        || any.is::<LikeExpr>()
        || any.is::<InListExpr>()
        || any.is::<CaseExpr>()
        || any.is::<SelectjitCaseExpr>()
        || any.is::<TryCastExpr>()
    {
        return children_ok();
    }
    if let Some(n) = any.downcast_ref::<NegativeExpr>() {
        // Integer negation wraps in arrow's `neg_wrapping`; floats never fail.
        let _ = n;
        return children_ok();
    }
    if let Some(c) = any.downcast_ref::<CastExpr>() {
        let from = c.expr().data_type(schema).ok()?;
        let to = c.cast_type();
        let widening = (from.is_integer()
            && (to.is_integer() || to.is_floating())
            && width(to) > width(&from))
            || (from.is_floating() && to.is_floating() && width(to) >= width(&from))
            || &from == to;
        return if widening {
            children_ok()
        } else {
            Some(format!("the cast from {from} to {to} may fail"))
        };
    }
    if let Some(b) = any.downcast_ref::<BinaryExpr>() {
        use Operator::*;
        let numeric = |x: &Arc<dyn PhysicalExpr>| {
            x.data_type(schema)
                .is_ok_and(|t| t.is_numeric() && !matches!(t, DataType::Decimal256(..)))
        };
        return match b.op() {
            Eq | NotEq | Lt | LtEq | Gt | GtEq | And | Or | IsDistinctFrom | IsNotDistinctFrom
            | LikeMatch | ILikeMatch | NotLikeMatch | NotILikeMatch => children_ok(),
            Plus | Minus | Multiply if numeric(b.left()) && numeric(b.right()) => children_ok(),
            op => Some(format!("`{op}` may fail on rows the CASE does not take")),
        };
    }
    Some(format!(
        "{} may fail on rows the CASE does not take",
        sql(e)
    ))
}

fn width(t: &DataType) -> usize {
    t.primitive_width().unwrap_or(0)
}

/// A `WHEN` as the select takes it.
#[derive(Debug, Clone)]
enum WhenExpr {
    /// A comparison computed in the select's kernel.
    Cmp(CmpOp, Arc<dyn PhysicalExpr>, Arc<dyn PhysicalExpr>),
    /// A boolean expression DataFusion evaluates.
    Bool(Arc<dyn PhysicalExpr>),
    /// A string column against literals, in one pass ([`strset`]).
    Str(StrSet),
}

/// The boolean `WHEN` `e`: a string test read here, or DataFusion's.
fn bool_when(e: Arc<dyn PhysicalExpr>) -> WhenExpr {
    match StrSet::of(&e) {
        Some(s) => WhenExpr::Str(s),
        None => WhenExpr::Bool(e),
    }
}

/// A `CASE` run as one n-way select ([`SelectjitCaseRule`] makes it from DataFusion's).
#[derive(Debug)]
pub struct SelectjitCaseExpr {
    whens: Vec<WhenExpr>,
    thens: Vec<Arc<dyn PhysicalExpr>>,
    else_: Option<Arc<dyn PhysicalExpr>>,
    /// DataFusion's `CaseExpr` it replaces: its type, nullability, children and SQL.
    original: Arc<dyn PhysicalExpr>,
}

impl SelectjitCaseExpr {
    /// Ours for DataFusion's `case` (the node `node`), or why not.
    fn try_from_case(
        case: &CaseExpr,
        node: &Arc<dyn PhysicalExpr>,
        schema: &Schema,
    ) -> std::result::Result<SelectjitCaseExpr, String> {
        let out_type = node.data_type(schema).map_err(|e| e.to_string())?;
        let fixed = out_type.primitive_width().is_some()
            || matches!(out_type, DataType::Boolean | DataType::FixedSizeBinary(_));
        if !fixed {
            return Err(format!(
                "the result type {out_type} is not of fixed width: DataFusion's own path"
            ));
        }
        let mut whens = Vec::new();
        let mut thens = Vec::new();
        for (i, (w, t)) in case.when_then_expr().iter().enumerate() {
            if let Some(why) = may_fail(t, schema) {
                return Err(format!("THEN {}: {why}", i + 1));
            }
            let when = match case.expr() {
                Some(base) => {
                    if let Some(why) = may_fail(base, schema).filter(|_| i > 0) {
                        return Err(format!("the CASE operand: {why}"));
                    }
                    cmp_when(CmpOp::Eq, base, w, schema)
                }
                None => {
                    if i > 0
                        && let Some(why) = may_fail(w, schema)
                    {
                        return Err(format!("WHEN {}: {why}", i + 1));
                    }
                    when_of(w, schema)
                }
            };
            whens.push(when);
            thens.push(Arc::clone(t));
        }
        if let Some(e) = case.else_expr()
            && let Some(why) = may_fail(e, schema)
        {
            return Err(format!("ELSE: {why}"));
        }
        Ok(SelectjitCaseExpr {
            whens,
            thens,
            else_: case.else_expr().cloned(),
            original: Arc::clone(node),
        })
    }

    /// The same conversion of a `CaseExpr` of the same shape (its children rewritten): each
    /// `WHEN` computed where it was before, read from the new children.
    fn rebuilt(&self, case: &CaseExpr, node: &Arc<dyn PhysicalExpr>) -> SelectjitCaseExpr {
        let whens = case
            .when_then_expr()
            .iter()
            .zip(&self.whens)
            .map(|((w, _), old)| match (old, case.expr()) {
                (WhenExpr::Cmp(op, ..), Some(base)) => {
                    WhenExpr::Cmp(*op, Arc::clone(base), Arc::clone(w))
                }
                (WhenExpr::Cmp(op, ..), None) => match w.downcast_ref::<BinaryExpr>() {
                    Some(b) => WhenExpr::Cmp(*op, Arc::clone(b.left()), Arc::clone(b.right())),
                    None => bool_when(Arc::clone(w)),
                },
                (WhenExpr::Bool(_) | WhenExpr::Str(_), Some(base)) => bool_when(Arc::new(
                    BinaryExpr::new(Arc::clone(base), Operator::Eq, Arc::clone(w)),
                )),
                (WhenExpr::Bool(_) | WhenExpr::Str(_), None) => bool_when(Arc::clone(w)),
            })
            .collect();
        SelectjitCaseExpr {
            whens,
            thens: case
                .when_then_expr()
                .iter()
                .map(|(_, t)| Arc::clone(t))
                .collect(),
            else_: case.else_expr().cloned(),
            original: Arc::clone(node),
        }
    }
}

/// `lhs op rhs` computed in the kernel where both sides are of one comparable type, else by
/// DataFusion.
fn cmp_when(
    op: CmpOp,
    lhs: &Arc<dyn PhysicalExpr>,
    rhs: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> WhenExpr {
    let (l, r) = (lhs.data_type(schema), rhs.data_type(schema));
    match (l, r) {
        (Ok(l), Ok(r)) if l == r && selectjit_arrow::cmp_in_kernel(&l) => {
            WhenExpr::Cmp(op, Arc::clone(lhs), Arc::clone(rhs))
        }
        _ => {
            let dop = match op {
                CmpOp::Eq => Operator::Eq,
                CmpOp::Ne => Operator::NotEq,
                CmpOp::Lt => Operator::Lt,
                CmpOp::Le => Operator::LtEq,
                CmpOp::Gt => Operator::Gt,
                CmpOp::Ge => Operator::GtEq,
            };
            bool_when(Arc::new(BinaryExpr::new(
                Arc::clone(lhs),
                dop,
                Arc::clone(rhs),
            )))
        }
    }
}

fn when_of(w: &Arc<dyn PhysicalExpr>, schema: &Schema) -> WhenExpr {
    if let Some(b) = w.downcast_ref::<BinaryExpr>() {
        let op = match b.op() {
            Operator::Eq => Some(CmpOp::Eq),
            Operator::NotEq => Some(CmpOp::Ne),
            Operator::Lt => Some(CmpOp::Lt),
            Operator::LtEq => Some(CmpOp::Le),
            Operator::Gt => Some(CmpOp::Gt),
            Operator::GtEq => Some(CmpOp::Ge),
            _ => None,
        };
        if let Some(op) = op
            && let WhenExpr::Cmp(..) = cmp_when(op, b.left(), b.right(), schema)
        {
            return WhenExpr::Cmp(op, Arc::clone(b.left()), Arc::clone(b.right()));
        }
    }
    bool_when(Arc::clone(w))
}

/// An evaluated operand: an array, or a scalar as a one-element array.
enum Val {
    Array(ArrayRef),
    Scalar(Scalar<ArrayRef>),
}

impl Val {
    fn of(v: ColumnarValue) -> Result<Val> {
        Ok(match v {
            ColumnarValue::Array(a) => Val::Array(a),
            ColumnarValue::Scalar(s) => Val::Scalar(s.to_scalar()?),
        })
    }
    fn datum(&self) -> &dyn Datum {
        match self {
            Val::Array(a) => a,
            Val::Scalar(s) => s,
        }
    }
}

impl fmt::Display for SelectjitCaseExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "selectjit({})", self.original)
    }
}

impl PartialEq for SelectjitCaseExpr {
    fn eq(&self, other: &Self) -> bool {
        self.original.as_ref() == other.original.as_ref()
    }
}

impl Eq for SelectjitCaseExpr {}

impl Hash for SelectjitCaseExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        "selectjit".hash(state);
        self.original.hash(state);
    }
}

impl PhysicalExpr for SelectjitCaseExpr {
    fn data_type(&self, input_schema: &Schema) -> Result<DataType> {
        self.original.data_type(input_schema)
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        self.original.nullable(input_schema)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let rows = batch.num_rows();
        // Every condition and value, evaluated on every row (each cannot fail: see the rule).
        let mut bools: Vec<BooleanArray> = Vec::new();
        let mut cmps: Vec<(CmpOp, Val, Val)> = Vec::new();
        let mut order: Vec<bool> = Vec::new(); // true: the next Cmp, false: the next Bool
        for w in &self.whens {
            match w {
                WhenExpr::Cmp(op, l, r) => {
                    let (l, r) = (l.evaluate(batch)?, r.evaluate(batch)?);
                    if matches!(
                        (&l, &r),
                        (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_))
                    ) {
                        // Two scalars: one value for every row, as an array.
                        let l = Val::Array(l.into_array(rows)?);
                        cmps.push((*op, l, Val::of(r)?));
                    } else {
                        cmps.push((*op, Val::of(l)?, Val::of(r)?));
                    }
                    order.push(true);
                }
                WhenExpr::Bool(e) => {
                    let a = e.evaluate(batch)?.into_array(rows)?;
                    let b = a
                        .as_any()
                        .downcast_ref::<BooleanArray>()
                        .ok_or_else(|| {
                            DataFusionError::Internal(format!(
                                "WHEN of type {} in {}",
                                a.data_type(),
                                self.original
                            ))
                        })?
                        .clone();
                    bools.push(b);
                    order.push(false);
                }
                WhenExpr::Str(s) => {
                    bools.push(s.evaluate(batch)?);
                    order.push(false);
                }
            }
        }
        let vals: Vec<Val> = self
            .thens
            .iter()
            .map(|t| Val::of(t.evaluate(batch)?))
            .collect::<Result<_>>()?;
        let default = self
            .else_
            .as_ref()
            .map(|e| Val::of(e.evaluate(batch)?))
            .transpose()?;
        let (mut ci, mut bi) = (cmps.iter(), bools.iter());
        let conds: Vec<When<'_>> = order
            .iter()
            .map(|&c| {
                if c {
                    let (op, l, r) = ci.next().expect("a comparison per Cmp");
                    When::Cmp(*op, l.datum(), r.datum())
                } else {
                    When::Mask(bi.next().expect("a mask per Bool"))
                }
            })
            .collect();
        let values: Vec<&dyn Datum> = vals.iter().map(Val::datum).collect();
        let out = selectjit_arrow::case_when(&conds, &values, default.as_ref().map(Val::datum))
            .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?;
        if out.len() != rows {
            return Err(DataFusionError::Internal(format!(
                "selectjit CASE gave {} rows for {rows}",
                out.len()
            )));
        }
        Ok(ColumnarValue::Array(out))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        // DataFusion's `CaseExpr`'s children: rewrites of them (column indices after a
        // projection moves) rebuild it, and this expression from it.
        self.original.children()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let new = Arc::clone(&self.original).with_new_children(children)?;
        let Some(case) = new.downcast_ref::<CaseExpr>() else {
            return Ok(new);
        };
        if case.when_then_expr().len() != self.whens.len() {
            return Ok(new);
        }
        Ok(Arc::new(self.rebuilt(case, &new)))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.original.fmt_sql(f)
    }
}

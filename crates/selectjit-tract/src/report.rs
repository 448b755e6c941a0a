//! What the transform did: the selects it replaced, the predicates it folded, the chains of
//! selects it merged, and the `Iff` nodes it left to tract, with the reason.

use std::fmt;

/// A condition computed by one node that feeds only a replaced select: what the fused kernel
/// computes itself instead of reading a bool tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Predicate {
    /// `a OP b` over two tensors of one numeric datum type (tract's `TypedBinOp` with a
    /// comparison).
    Compare {
        /// `==`, `!=`, `<`, `<=`, `>` or `>=`.
        op: &'static str,
        /// The operands' datum type, as tract names it (`F32`, `I64`, ...).
        dtype: String,
    },
    /// `isnan(x)`.
    IsNan {
        /// The operand's datum type.
        dtype: String,
    },
    /// `isinf(x)` (both signs).
    IsInf {
        /// The operand's datum type.
        dtype: String,
    },
    /// `IsInf(x) And x > c` (`c` a finite constant; `<` for the negative sign), computed as
    /// `x == +inf` (`-inf`): the `IsInf` and comparison nodes feeding only the `And` are gone
    /// too.
    InfOfSign {
        /// `+inf` rather than `-inf`.
        positive: bool,
        /// The operand's datum type.
        dtype: String,
    },
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Predicate::Compare { op, dtype } => write!(f, "a {op} b ({dtype})"),
            Predicate::IsNan { dtype } => write!(f, "isnan ({dtype})"),
            Predicate::IsInf { dtype } => write!(f, "isinf ({dtype})"),
            Predicate::InfOfSign { positive, dtype } => {
                let sign = if *positive { '+' } else { '-' };
                write!(f, "isinf and a comparison: a == {sign}inf ({dtype})")
            }
        }
    }
}

/// The condition of a replaced select, as the fusion step found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// A bool tensor the select reads (a model input, a constant, an op that is not a
    /// predicate, or a predicate that cannot be fused: `why`).
    Tensor {
        /// Why the node producing it cannot be folded, if it is a predicate at all.
        why: Option<String>,
    },
    /// The predicate node `node` computed (feeding only this select) was folded into it: the
    /// select's kernel computes it, `node` is gone from the model and its bool tensor is never
    /// built.
    Fused {
        /// The predicate node's name.
        node: String,
        /// What it computes.
        predicate: Predicate,
    },
}

/// One `Iff` replaced by a selectjit op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replaced {
    /// The node's name (the ONNX node name for a loaded model).
    pub node: String,
    /// The elements' datum type, as tract names it.
    pub dtype: String,
    /// `Not` nodes folded into the select (their input became the condition and `then` / `else`
    /// were swapped): the bool tensor they computed is no longer built.
    pub folded_not: Vec<String>,
    /// The condition the select reads now.
    pub condition: Condition,
}

impl Replaced {
    /// Whether any node computing the condition (a `Not`, a predicate) was folded into the
    /// select.
    pub fn fused(&self) -> bool {
        !self.folded_not.is_empty() || self.predicate_fused()
    }

    /// Whether the predicate computing the condition was folded in.
    pub fn predicate_fused(&self) -> bool {
        matches!(self.condition, Condition::Fused { .. })
    }
}

/// One `Iff` left to tract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftAlone {
    /// The node's name.
    pub node: String,
    /// Why it was not replaced.
    pub reason: String,
}

/// A chain of replaced selects merged into one n-way select ([`crate::SelectjitChain`]): each
/// `Where` but the innermost fed only the next one's `then` or `else`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chained {
    /// The `Where` nodes, outermost first; the merged node keeps the first one's name.
    pub nodes: Vec<String>,
    /// The elements' datum type, as tract names it.
    pub dtype: String,
    /// A forward chain (`Where(p(r), k, r)` over the previous result `r`, as `torch.onnx.export`
    /// writes nan_to_num): the conditions are computed from the innermost input instead, and
    /// each value is its constant as the outer `Where` nodes map it.
    pub from_input: bool,
}

/// The outcome of [`crate::accelerate`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The replaced selects, in evaluation order.
    pub replaced: Vec<Replaced>,
    /// The `Iff` nodes left alone.
    pub left_alone: Vec<LeftAlone>,
    /// The chains merged into one n-way select each (their nodes are also in `replaced`).
    pub chained: Vec<Chained>,
    /// Replaced selects feeding another one's `then` or `else` that were not merged into its
    /// chain, and why (they run as selects of their own).
    pub not_chained: Vec<LeftAlone>,
}

impl Report {
    /// Replaced selects whose condition node was folded in.
    pub fn fused(&self) -> usize {
        self.replaced.iter().filter(|r| r.fused()).count()
    }

    /// Replaced selects whose predicate is computed in their kernel.
    pub fn predicates_fused(&self) -> usize {
        self.replaced.iter().filter(|r| r.predicate_fused()).count()
    }

    /// The one-line summary: `replaced: N (F fused)`.
    pub fn summary(&self) -> String {
        format!("replaced: {} ({} fused)", self.replaced.len(), self.fused())
    }

    /// How many `Where` nodes the merged chains hold.
    pub fn chained_nodes(&self) -> usize {
        self.chained.iter().map(|c| c.nodes.len()).sum()
    }

    /// The chains line: `chained: K (N nodes)`, K chains holding N `Where` nodes.
    pub fn chains_summary(&self) -> String {
        format!(
            "chained: {} ({} nodes)",
            self.chained.len(),
            self.chained_nodes()
        )
    }
}

/// The summary line, the chains line, then one line per node and per chain.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.summary())?;
        writeln!(f, "{}", self.chains_summary())?;
        for r in &self.replaced {
            write!(f, "  replaced {} ({})", r.node, r.dtype)?;
            if !r.folded_not.is_empty() {
                write!(
                    f,
                    "; fused: Not {} (then/else swapped)",
                    r.folded_not.join(", ")
                )?;
            }
            match &r.condition {
                Condition::Tensor { why: None } => writeln!(f, "; condition: bool tensor")?,
                Condition::Tensor { why: Some(w) } => {
                    writeln!(f, "; condition: bool tensor ({w})")?
                }
                Condition::Fused { node, predicate } => {
                    writeln!(f, "; condition: {node} = {predicate}, fused")?
                }
            }
        }
        for c in &self.chained {
            writeln!(
                f,
                "  chained {} ({}): one n-way select of {} branches{}",
                c.nodes.join(" > "),
                c.dtype,
                c.nodes.len(),
                if c.from_input {
                    ", conditions computed from the innermost input"
                } else {
                    ""
                }
            )?;
        }
        for l in &self.left_alone {
            writeln!(f, "  left alone {}: {}", l.node, l.reason)?;
        }
        for l in &self.not_chained {
            writeln!(f, "  left alone (not chained) {}: {}", l.node, l.reason)?;
        }
        Ok(())
    }
}

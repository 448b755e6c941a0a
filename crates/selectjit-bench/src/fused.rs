//! The fused cases (`benches/fused_cases.json`): selects whose condition is a comparison or a
//! NaN / Inf test computed from other tensors (`where(x > zero, x, zero)`,
//! `where(mask == zero, neg_inf, scores)`, `where(isnan(x), zero, x)`, ...).
//!
//! Per case, interleaved and single-threaded: the fused call (`Engine::select_bytes` with a
//! [`Cond`] predicate, `auto` tier), the same call on the static kernels, and the unfused
//! sequence a careful Rust user writes instead: the mask (a tight loop over the operands that
//! the compiler vectorises, or the engine's own comparison into a `u8` mask, whichever is
//! faster) and then the select on that mask. The yardstick is the copy roofline of the fused
//! traffic (each variable's own bytes plus the output's, no mask): half those bytes copied from
//! the case's own variables into its own output, the copies with ordinary stores timed in the
//! calls' rounds, those with non-temporal stores in rounds of their own right after.
//! Every output is compared bytewise with the interpreter's before anything is timed.

use std::cell::RefCell;
use std::time::Instant;

use half::{bf16, f16};
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::numel;
use selectjit::plan::Signature;
use selectjit::{
    Backend, Broadcast, CmpOp, Cond, DType, Engine, Error, Operand, Result, TensorMut, TensorRef,
    TestOp, Tier, output_shape,
};

use crate::expr::{CondExpr, Term, WhereExpr, context, parse_where, scalar_bytes};
use crate::roofline::{CopyKind, copy_slice};
use crate::{Options, PageBuf, Rng, interleaved, single};

/// The built-in fused case list (the project's copy of the shared `fused_cases.json`).
pub const BUILTIN_FUSED_CASES: &str = include_str!("../../../benches/fused_cases.json");

/// How a variable is filled.
#[derive(Debug, Clone, PartialEq)]
pub enum Fill {
    /// One element (shape `[]`), this value as little-endian bytes.
    Value(Vec<u8>),
    /// Seeded standard normal.
    Normal,
    /// Seeded uniform in [0, 1).
    Uniform,
    /// Normal, then per element 10% NaN, 1% +inf, 1% -inf, 1% -0.0.
    Nan10,
    /// 1s, each row of the last dim ending in a seeded run of 0s (15% on average).
    Mask01,
    /// 0, 1, 2, ... in flat order.
    Iota,
    /// Seeded uniform bit patterns.
    Bytes,
    /// Normal, then per element 2% NaN, 1% +inf, 1% -inf, 1% -0.0 (`nan_inf`).
    NanInf,
    /// Seeded uniform integers in [lo, hi) (`int_range:LO:HI`).
    IntRange(i64, i64),
    /// Seeded bools, true (1) with probability p (`bool:P`).
    Bool(f64),
}

/// The largest magnitude of an `int_range` bound: its integers are exact as `f64`.
const INT_RANGE_MAX: i64 = 1 << 53;

/// The fill named `f` for a variable of `dtype`, or why not.
fn parse_fill(f: &str, dtype: DType) -> std::result::Result<Fill, String> {
    let float_only = |fill: Fill| {
        if is_float(dtype) {
            Ok(fill)
        } else {
            Err(format!("fill '{f}' needs a float dtype, not {dtype}"))
        }
    };
    if let Some(range) = f.strip_prefix("int_range:") {
        let usage = || format!("fill '{f}': expected int_range:LO:HI, integers LO < HI");
        let (lo, hi) = range.split_once(':').ok_or_else(usage)?;
        let (lo, hi): (i64, i64) = (
            lo.trim().parse().map_err(|_| usage())?,
            hi.trim().parse().map_err(|_| usage())?,
        );
        if lo >= hi {
            return Err(usage());
        }
        if lo < -INT_RANGE_MAX || hi > INT_RANGE_MAX {
            return Err(format!(
                "fill '{f}': bounds beyond +-2^53 are not supported"
            ));
        }
        for v in [lo, hi - 1] {
            scalar_bytes(dtype, &v.to_string()).map_err(|e| format!("fill '{f}': {e}"))?;
        }
        return Ok(Fill::IntRange(lo, hi));
    }
    if let Some(p) = f.strip_prefix("bool:") {
        return match p.trim().parse::<f64>() {
            Ok(p) if (0.0..=1.0).contains(&p) => Ok(Fill::Bool(p)),
            _ => Err(format!(
                "fill '{f}': expected bool:P, a probability P in [0, 1]"
            )),
        };
    }
    Ok(match f {
        "normal" => Fill::Normal,
        "uniform" => Fill::Uniform,
        "nan10" => float_only(Fill::Nan10)?,
        "nan_inf" => float_only(Fill::NanInf)?,
        "mask01" => Fill::Mask01,
        "iota" => Fill::Iota,
        "bytes" => Fill::Bytes,
        other => return Err(format!("unknown fill '{other}'")),
    })
}

/// One variable of a fused case.
#[derive(Debug, Clone)]
pub struct Var {
    /// Its name in the expression.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
    /// How it is filled.
    pub fill: Fill,
}

/// One fused case.
#[derive(Debug, Clone)]
pub struct FusedCase {
    /// Name of the case.
    pub name: String,
    /// The expression as written.
    pub expr_text: String,
    /// The expression.
    pub expr: WhereExpr,
    /// The variables, in file order (the order they draw from the case's generator).
    pub vars: Vec<Var>,
}

/// A variable as the case file writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVar {
    dtype: String,
    shape: Vec<usize>,
    #[serde(default)]
    fill: Option<String>,
    #[serde(default)]
    value: Option<serde_json::Value>,
}

/// A JSON object's entries in file order.
pub(crate) struct Ordered(Vec<(String, RawVar)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of variables")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<Ordered, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = m.next_entry::<String, RawVar>()? {
                    v.push((k, x));
                }
                Ok(Ordered(v))
            }
        }
        d.deserialize_map(V)
    }
}

/// A case as the case file writes it (other fields, such as `about`, are ignored).
#[derive(Deserialize)]
pub(crate) struct RawCase {
    pub(crate) name: String,
    pub(crate) expr: String,
    pub(crate) vars: Ordered,
}

/// A case file.
#[derive(Deserialize)]
pub(crate) struct RawFile {
    pub(crate) cases: Vec<RawCase>,
}

/// A scalar's value from the case file: a number, or `"inf"`, `"-inf"`, `"nan"`.
fn value_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn is_float(d: DType) -> bool {
    matches!(
        d,
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 | DType::Complex64 | DType::Complex128
    )
}

/// Parses a fused case list in the `fused_cases.json` format, checking every case: the
/// expression, every variable it names defined and every defined variable used, dtypes (a
/// comparison's operands alike, where()'s second and third arguments alike), fills and values,
/// and the shapes broadcast with the numpy rule.
pub fn parse_fused_cases(json: &str) -> Result<Vec<FusedCase>> {
    let f: RawFile =
        serde_json::from_str(json).map_err(|e| Error::Invalid(format!("fused case list: {e}")))?;
    let mut out: Vec<FusedCase> = Vec::new();
    for c in f.cases {
        let name = format!("fused case {}", c.name);
        let err = |m: String| Error::Invalid(format!("{name}: {m}"));
        if out.iter().any(|o| o.name == c.name) {
            return Err(err("a second case of this name".into()));
        }
        let expr = parse_where(&c.expr).map_err(|e| context(e, &name))?;
        let vars = parse_vars(&name, c.vars)?;
        let case = FusedCase {
            name: c.name.clone(),
            expr_text: c.expr.clone(),
            expr,
            vars,
        };
        case.check().map_err(|e| context(e, &name))?;
        out.push(case);
    }
    Ok(out)
}

/// A case's variables in file order, each checked (dtype, one fill or one value, a value's
/// shape `[]`, a name defined once); `case` (`fused case NAME`) begins the messages.
pub(crate) fn parse_vars(case: &str, raw: Ordered) -> Result<Vec<Var>> {
    let mut vars: Vec<Var> = Vec::new();
    for (name, v) in raw.0 {
        let vname = format!("{case}: variable {name}");
        let verr = |m: String| Error::Invalid(format!("{vname}: {m}"));
        let dtype: DType = v.dtype.parse().map_err(|e| context(e, &vname))?;
        let fill = match (&v.fill, &v.value) {
            (Some(_), Some(_)) => return Err(verr("has both a fill and a value".into())),
            (None, None) => return Err(verr("needs a fill or a value".into())),
            (None, Some(val)) => {
                if !v.shape.is_empty() {
                    return Err(verr(format!("a value needs shape [], not {:?}", v.shape)));
                }
                let t =
                    value_text(val).ok_or_else(|| verr(format!("value {val} is not a number")))?;
                Fill::Value(scalar_bytes(dtype, &t).map_err(|e| context(e, &vname))?)
            }
            (Some(f), None) => parse_fill(f, dtype).map_err(verr)?,
        };
        if vars.iter().any(|x| x.name == name) {
            return Err(verr("defined twice".into()));
        }
        if fill == Fill::Mask01 && v.shape.is_empty() {
            return Err(verr("fill 'mask01' needs at least one dimension".into()));
        }
        vars.push(Var {
            name,
            dtype,
            shape: v.shape,
            fill,
        });
    }
    Ok(vars)
}

/// Variable `name` of a case (`vars`, filled into `bufs` in order) as a condition operand.
pub(crate) fn bound_of<'a>(vars: &'a [Var], bufs: &'a [PageBuf], name: &str) -> Result<Bound<'a>> {
    let k = vars
        .iter()
        .position(|v| v.name == name)
        .ok_or_else(|| Error::Invalid(format!("no variable '{name}'")))?;
    let v = &vars[k];
    Ok(Bound {
        dtype: v.dtype,
        bytes: &bufs[k],
        shape: &v.shape,
        strides: None,
    })
}

/// Fills `vars` from one generator seeded by the CRC-32 of the case's name `case`, drawn by
/// the variables in order: the same bytes on every run and every host.
pub(crate) fn generate(case: &str, vars: &[Var]) -> Vec<PageBuf> {
    let seed = u64::from(crc32fast::hash(case.as_bytes()));
    let mut rng = Rng((seed << 32 | seed) ^ 0x9e37_79b9_7f4a_7c15);
    vars.iter().map(|v| generate_var(&mut rng, v)).collect()
}

/// One variable's bytes, drawn from `rng`.
fn generate_var(rng: &mut Rng, v: &Var) -> PageBuf {
    let n = numel(&v.shape);
    let w = v.dtype.width();
    let mut b = Vec::with_capacity(n * w);
    // Normal, then per element NaN, +inf, -inf and -0.0 below the cumulative thresholds `t`.
    let specials = |rng: &mut Rng, b: &mut Vec<u8>, t: [f64; 4]| {
        for _ in 0..n {
            let x = rng.normal();
            let u = rng.uniform();
            let x = match u {
                u if u < t[0] => f64::NAN,
                u if u < t[1] => f64::INFINITY,
                u if u < t[2] => f64::NEG_INFINITY,
                u if u < t[3] => -0.0,
                _ => x,
            };
            f64_bytes(v.dtype, x, b);
        }
    };
    match &v.fill {
        Fill::Value(x) => b.extend_from_slice(x),
        Fill::Normal => (0..n).for_each(|_| f64_bytes(v.dtype, rng.normal(), &mut b)),
        Fill::Uniform => (0..n).for_each(|_| f64_bytes(v.dtype, rng.uniform(), &mut b)),
        Fill::Iota => (0..n).for_each(|i| f64_bytes(v.dtype, i as f64, &mut b)),
        Fill::Nan10 => specials(rng, &mut b, [0.10, 0.11, 0.12, 0.13]),
        Fill::NanInf => specials(rng, &mut b, [0.02, 0.03, 0.04, 0.05]),
        Fill::Mask01 => {
            let cols = v.shape.last().copied().unwrap_or(1).max(1);
            for _ in 0..n / cols {
                let zeros = (rng.uniform() * 0.3 * cols as f64) as usize;
                for j in 0..cols {
                    f64_bytes(v.dtype, f64::from(u8::from(j < cols - zeros)), &mut b);
                }
            }
        }
        Fill::Bytes => {
            for _ in 0..n * w {
                let x = (rng.next() >> 24) as u8;
                b.push(if v.dtype == DType::Bool { x & 1 } else { x });
            }
        }
        Fill::IntRange(lo, hi) => {
            // Within +-2^53 (checked when parsed): exact in f64, the draw below `hi`.
            let span = (hi - lo) as f64;
            for _ in 0..n {
                let x = (*lo as f64 + (rng.uniform() * span).floor()).min((hi - 1) as f64);
                f64_bytes(v.dtype, x, &mut b);
            }
        }
        Fill::Bool(p) => {
            (0..n).for_each(|_| f64_bytes(v.dtype, f64::from(u8::from(rng.uniform() < *p)), &mut b))
        }
    }
    PageBuf::from_slice(&b)
}

impl FusedCase {
    fn var(&self, name: &str) -> Result<&Var> {
        self.vars
            .iter()
            .find(|v| v.name == name)
            .ok_or_else(|| Error::Invalid(format!("'{name}' is not one of the case's variables")))
    }

    fn term(&self, t: &Term) -> Result<&Var> {
        match t {
            Term::Var(n) => self.var(n),
            Term::Lit(l) => Err(Error::Invalid(format!("literal '{l}' in a case"))),
        }
    }

    /// The names the expression reads, in order of first appearance.
    fn used(&self) -> Vec<&str> {
        let mut v = self.expr.cond.vars();
        for t in [&self.expr.then, &self.expr.else_] {
            if let Term::Var(n) = t
                && !v.contains(&n.as_str())
            {
                v.push(n);
            }
        }
        v
    }

    fn check(&self) -> Result<()> {
        let used = self.used();
        for n in &used {
            self.var(n)?;
        }
        if let Some(v) = self.vars.iter().find(|v| !used.contains(&v.name.as_str())) {
            return Err(Error::Invalid(format!(
                "variable '{}' is not used by the expression",
                v.name
            )));
        }
        let (t, e) = (self.term(&self.expr.then)?, self.term(&self.expr.else_)?);
        if t.dtype != e.dtype {
            return Err(Error::DType(format!(
                "where()'s values differ in dtype: {} is {}, {} is {}",
                t.name, t.dtype, e.name, e.dtype
            )));
        }
        cond_dtypes(&self.expr.cond, &|n| self.var(n).map(|v| v.dtype))?;
        self.shapes().map(|_| ())
    }

    /// The shape of the predicate (its operands broadcast) and of the output.
    pub fn shapes(&self) -> Result<(Vec<usize>, Vec<usize>)> {
        let p = pred_shape(&self.expr.cond, &|n| {
            self.var(n).map(|v| v.shape.as_slice())
        })?;
        let t = self.term(&self.expr.then)?;
        let e = self.term(&self.expr.else_)?;
        let out = output_shape(Broadcast::Numpy, &p, &t.shape, &e.shape)?.to_vec();
        Ok((p, out))
    }

    /// The output's dtype.
    pub fn dtype(&self) -> DType {
        self.term(&self.expr.then)
            .map(|v| v.dtype)
            .unwrap_or(DType::U8)
    }
}

/// Checks a condition's dtypes: a comparison's operands alike (a literal takes the other
/// side's); returns nothing useful, errors name the operands.
pub fn cond_dtypes(c: &CondExpr, dtype_of: &dyn Fn(&str) -> Result<DType>) -> Result<()> {
    match c {
        CondExpr::Not(c) => cond_dtypes(c, dtype_of),
        CondExpr::Test(_, Term::Var(n)) => dtype_of(n).map(|_| ()),
        CondExpr::Test(_, Term::Lit(_)) => Ok(()),
        CondExpr::Cmp(op, l, r) => {
            let d = |t: &Term| match t {
                Term::Var(n) => dtype_of(n).map(Some),
                Term::Lit(_) => Ok(None),
            };
            match (d(l)?, d(r)?) {
                (Some(a), Some(b)) if a != b => Err(Error::DType(format!(
                    "'{l} {} {r}' compares {l} ({a}) with {r} ({b}): a comparison's operands must have one dtype",
                    crate::expr::cmp_symbol(*op)
                ))),
                (Some(d), None) => scalar_bytes(d, &r.to_string()).map(|_| ()),
                (None, Some(d)) => scalar_bytes(d, &l.to_string()).map(|_| ()),
                _ => Ok(()),
            }
        }
    }
}

/// The shape of a condition: its operands broadcast with numpy's rule (a literal is a scalar).
pub fn pred_shape<'a>(
    c: &CondExpr,
    shape_of: &dyn Fn(&str) -> Result<&'a [usize]>,
) -> Result<Vec<usize>> {
    let s = |t: &Term| -> Result<&'a [usize]> {
        match t {
            Term::Var(n) => shape_of(n),
            Term::Lit(_) => Ok(&[]),
        }
    };
    match c.strip_not().0 {
        CondExpr::Cmp(_, l, r) => Ok(output_shape(Broadcast::Numpy, s(l)?, s(r)?, &[])
            .map_err(|e| Error::Invalid(format!("the operands of '{c}': {e}")))?
            .to_vec()),
        CondExpr::Test(_, v) => Ok(s(v)?.to_vec()),
        CondExpr::Not(_) => unreachable!("negations were stripped"),
    }
}

/// A variable's element type, bytes and shape, as a [`Cond`] reads them.
#[derive(Clone, Copy)]
pub struct Bound<'a> {
    /// Element type.
    pub dtype: DType,
    /// Little-endian elements.
    pub bytes: &'a [u8],
    /// Shape.
    pub shape: &'a [usize],
    /// Strides in elements (`None`: contiguous, row-major).
    pub strides: Option<&'a [isize]>,
}

/// The literals of a condition as elements of the dtype of the other side of their comparison,
/// in the order [`build_cond`] takes them.
pub fn literal_bytes(
    c: &CondExpr,
    dtype_of: &dyn Fn(&str) -> Result<DType>,
) -> Result<Vec<Vec<u8>>> {
    cond_dtypes(c, dtype_of)?;
    let mut out = Vec::new();
    fn walk(
        c: &CondExpr,
        dtype_of: &dyn Fn(&str) -> Result<DType>,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        match c {
            CondExpr::Not(c) => walk(c, dtype_of, out),
            CondExpr::Test(..) => Ok(()),
            CondExpr::Cmp(_, l, r) => {
                for (t, other) in [(l, r), (r, l)] {
                    if let (Term::Lit(text), Term::Var(n)) = (t, other) {
                        out.push(scalar_bytes(dtype_of(n)?, text)?);
                    }
                }
                Ok(())
            }
        }
    }
    walk(c, dtype_of, &mut out)?;
    Ok(out)
}

/// The [`Cond`] of a condition over bound variables, with its literals from [`literal_bytes`].
pub fn build_cond<'a>(
    c: &CondExpr,
    lookup: &dyn Fn(&str) -> Result<Bound<'a>>,
    literals: &'a [Vec<u8>],
) -> Result<Cond<'a>> {
    let mut next = 0;
    fn go<'a>(
        c: &CondExpr,
        lookup: &dyn Fn(&str) -> Result<Bound<'a>>,
        literals: &'a [Vec<u8>],
        next: &mut usize,
    ) -> Result<Cond<'a>> {
        let var = |n: &str| -> Result<(DType, Operand<'a>)> {
            let b = lookup(n)?;
            let view = match b.strides {
                Some(st) => TensorRef::with_strides(b.bytes, b.shape, st),
                None => TensorRef::new(b.bytes, b.shape),
            };
            Ok((b.dtype, Operand::from_bytes(b.dtype, view)))
        };
        Ok(match c {
            CondExpr::Not(c) => go(c, lookup, literals, next)?.not(),
            CondExpr::Test(op, Term::Var(n)) => Cond::test(*op, var(n)?.1),
            CondExpr::Test(_, Term::Lit(l)) => {
                return Err(Error::Invalid(format!("a test of the literal '{l}'")));
            }
            CondExpr::Cmp(op, l, r) => {
                let mut operand = |t: &Term, other: &Term| -> Result<Operand<'a>> {
                    match t {
                        Term::Var(n) => Ok(var(n)?.1),
                        Term::Lit(text) => {
                            let Term::Var(o) = other else {
                                return Err(Error::Invalid(format!("'{c}' compares two literals")));
                            };
                            let d = lookup(o)?.dtype;
                            let b = literals.get(*next).ok_or_else(|| {
                                Error::Invalid(format!("literal '{text}' has no value"))
                            })?;
                            *next += 1;
                            Ok(Operand::from_bytes(d, TensorRef::new(b, &[])))
                        }
                    }
                };
                let lo = operand(l, r)?;
                let ro = operand(r, l)?;
                Cond::cmp(*op, lo, ro)
            }
        })
    }
    go(c, lookup, literals, &mut next)
}

/// The value `x` as one element of `dtype` (floats rounded, integers saturated, bool nonzero).
fn f64_bytes(dtype: DType, x: f64, out: &mut Vec<u8>) {
    match dtype {
        DType::Bool => out.push(u8::from(x != 0.0)),
        DType::I8 => out.extend((x as i8).to_le_bytes()),
        DType::I16 => out.extend((x as i16).to_le_bytes()),
        DType::I32 => out.extend((x as i32).to_le_bytes()),
        DType::I64 => out.extend((x as i64).to_le_bytes()),
        DType::U8 => out.extend((x as u8).to_le_bytes()),
        DType::U16 => out.extend((x as u16).to_le_bytes()),
        DType::U32 => out.extend((x as u32).to_le_bytes()),
        DType::U64 => out.extend((x as u64).to_le_bytes()),
        DType::F16 => out.extend(f16::from_f64(x).to_le_bytes()),
        DType::BF16 => out.extend(bf16::from_f64(x).to_le_bytes()),
        DType::F32 => out.extend((x as f32).to_le_bytes()),
        DType::F64 => out.extend(x.to_le_bytes()),
        DType::Complex64 => {
            out.extend((x as f32).to_le_bytes());
            out.extend(0f32.to_le_bytes());
        }
        DType::Complex128 => {
            out.extend(x.to_le_bytes());
            out.extend(0f64.to_le_bytes());
        }
    }
}

impl Rng {
    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u = 1.0 - self.uniform(); // (0, 1]
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// The buffers of a fused case, filled deterministically.
pub struct FusedInputs {
    /// The case.
    pub case: FusedCase,
    /// Each variable's bytes, in the case's order.
    pub bufs: Vec<PageBuf>,
    /// The predicate's shape (its operands broadcast).
    pub pred_shape: Vec<usize>,
    /// The output's shape.
    pub out_shape: Vec<usize>,
    /// The output's dtype.
    pub dtype: DType,
    literals: Vec<Vec<u8>>,
}

impl FusedInputs {
    /// Generates the variables of `case` (one generator per case, seeded by the CRC-32 of its
    /// name, drawn by the variables in file order).
    pub fn new(case: &FusedCase) -> Result<FusedInputs> {
        let (pred_shape, out_shape) = case.shapes()?;
        let bufs = generate(&case.name, &case.vars);
        let dtype_of = |n: &str| case.var(n).map(|v| v.dtype);
        let literals = literal_bytes(&case.expr.cond, &dtype_of)?;
        Ok(FusedInputs {
            dtype: case.dtype(),
            case: case.clone(),
            bufs,
            pred_shape,
            out_shape,
            literals,
        })
    }

    fn bound(&self, name: &str) -> Result<Bound<'_>> {
        bound_of(&self.case.vars, &self.bufs, name)
    }

    fn term(&self, t: &Term) -> Result<Bound<'_>> {
        match t {
            Term::Var(n) => self.bound(n),
            Term::Lit(l) => Err(Error::Invalid(format!("literal '{l}' as a value"))),
        }
    }

    /// The case's condition over its buffers.
    pub fn cond(&self) -> Result<Cond<'_>> {
        build_cond(&self.case.expr.cond, &|n| self.bound(n), &self.literals)
    }

    /// Elements of the output.
    pub fn elements(&self) -> usize {
        numel(&self.out_shape)
    }

    /// Bytes of the output.
    pub fn out_bytes(&self) -> usize {
        self.elements() * self.dtype.width()
    }

    /// Bytes a fused kernel moves: each variable's own bytes plus the output's.
    pub fn traffic_bytes(&self) -> usize {
        self.bufs.iter().map(|b| b.len()).sum::<usize>() + self.out_bytes()
    }

    /// The fused call on `engine` into `out`.
    pub fn run(&self, engine: &Engine, out: &mut [u8]) -> Result<()> {
        let (t, e) = (
            self.term(&self.case.expr.then)?,
            self.term(&self.case.expr.else_)?,
        );
        engine.select_bytes(
            self.dtype,
            self.cond()?,
            TensorRef::new(t.bytes, t.shape),
            TensorRef::new(e.bytes, e.shape),
            TensorMut::new(out, &self.out_shape),
            Broadcast::Numpy,
        )
    }

    /// The select on a precomputed mask of the predicate's shape.
    pub fn run_masked(&self, engine: &Engine, mask: &[u8], out: &mut [u8]) -> Result<()> {
        let (t, e) = (
            self.term(&self.case.expr.then)?,
            self.term(&self.case.expr.else_)?,
        );
        engine.select_bytes(
            self.dtype,
            TensorRef::new(mask, &self.pred_shape),
            TensorRef::new(t.bytes, t.shape),
            TensorRef::new(e.bytes, e.shape),
            TensorMut::new(out, &self.out_shape),
            Broadcast::Numpy,
        )
    }

    /// The mask by the engine: a `u8` select of 1 or 0 under the predicate.
    pub fn engine_mask(&self, engine: &Engine, mask: &mut [u8]) -> Result<()> {
        engine.select_bytes(
            DType::U8,
            self.cond()?,
            TensorRef::new(&[1u8], &[]),
            TensorRef::new(&[0u8], &[]),
            TensorMut::new(mask, &self.pred_shape),
            Broadcast::Numpy,
        )
    }

    /// The mask by a tight loop per dtype (vectorised by the compiler); `false` for dtypes it
    /// does not cover (complex).
    pub fn rust_mask(&self, mask: &mut [u8]) -> Result<bool> {
        let (c, neg) = self.case.expr.cond.strip_not();
        match c {
            CondExpr::Cmp(op, l, r) => {
                let (l, r) = (self.term(l)?, self.term(r)?);
                let sl = bcast_strides(l.shape, &self.pred_shape);
                let sr = bcast_strides(r.shape, &self.pred_shape);
                Ok(cmp_mask(*op, l, r, &sl, &sr, &self.pred_shape, neg, mask))
            }
            CondExpr::Test(op, v) => {
                let v = self.term(v)?;
                let sv = bcast_strides(v.shape, &self.pred_shape);
                Ok(test_mask(*op, v, &sv, &self.pred_shape, neg, mask))
            }
            CondExpr::Not(_) => unreachable!("negations were stripped"),
        }
    }
}

/// Contiguous strides (elements) of `shape` right-aligned into `out`, 0 where broadcast.
fn bcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let mut s = vec![0; out.len()];
    let mut acc = 1;
    for (k, &d) in shape.iter().enumerate().rev() {
        let at = out.len() - shape.len() + k;
        s[at] = if d == 1 { 0 } else { acc };
        acc *= d;
    }
    s
}

/// Calls `row(lhs_offset, rhs_offset, lhs_inner_stride, rhs_inner_stride, mask_row)` for every
/// row of the last dimension of `shape`.
fn rows(
    shape: &[usize],
    sl: &[usize],
    sr: &[usize],
    mask: &mut [u8],
    mut row: impl FnMut(usize, usize, &mut [u8]),
) {
    let r = shape.len();
    let n = if r == 0 { 1 } else { shape[r - 1] };
    if n == 0 || mask.is_empty() {
        return;
    }
    let outer = if r == 0 { &[][..] } else { &shape[..r - 1] };
    let mut idx = vec![0usize; outer.len()];
    for m in mask.chunks_exact_mut(n) {
        let lo: usize = idx.iter().zip(sl).map(|(i, s)| i * s).sum();
        let ro: usize = idx.iter().zip(sr).map(|(i, s)| i * s).sum();
        row(lo, ro, m);
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < outer[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// One row: `f(l[i], r[i])` over the row's elements, each side contiguous (1) or one element
/// (0); written so that the compiler vectorises each form.
#[inline(always)]
fn cmp_row<T: Copy>(
    l: &[T],
    r: &[T],
    (il, ir): (usize, usize),
    m: &mut [u8],
    f: impl Fn(T, T) -> bool,
) {
    let n = m.len();
    match (il, ir) {
        (0, 0) => m.fill(u8::from(f(l[0], r[0]))),
        (_, 0) => {
            let b = r[0];
            for (o, &a) in m.iter_mut().zip(&l[..n]) {
                *o = u8::from(f(a, b));
            }
        }
        (0, _) => {
            let a = l[0];
            for (o, &b) in m.iter_mut().zip(&r[..n]) {
                *o = u8::from(f(a, b));
            }
        }
        _ => {
            for ((o, &a), &b) in m.iter_mut().zip(&l[..n]).zip(&r[..n]) {
                *o = u8::from(f(a, b));
            }
        }
    }
}

fn bf16_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// One row of a test: `f(v[i])`, `v` contiguous (1) or one element (0).
#[inline(always)]
fn test_row<T: Copy>(v: &[T], inner: usize, m: &mut [u8], f: impl Fn(T) -> bool) {
    if inner == 0 {
        m.fill(u8::from(f(v[0])));
    } else {
        let n = m.len();
        for (o, &x) in m.iter_mut().zip(&v[..n]) {
            *o = u8::from(f(x));
        }
    }
}

/// The rows of a comparison, `conv` mapping elements to values compared.
#[allow(clippy::too_many_arguments)]
fn cmp_typed<T: Copy, U: PartialOrd>(
    op: CmpOp,
    a: &[T],
    b: &[T],
    conv: impl Fn(T) -> U + Copy,
    shape: &[usize],
    (ol, or, inner): (&[usize], &[usize], (usize, usize)),
    neg: bool,
    mask: &mut [u8],
) {
    #[inline(always)]
    fn go<T: Copy>(
        a: &[T],
        b: &[T],
        shape: &[usize],
        (ol, or, inner): (&[usize], &[usize], (usize, usize)),
        mask: &mut [u8],
        f: impl Fn(T, T) -> bool + Copy,
    ) {
        rows(shape, ol, or, mask, |lo, ro, m| {
            cmp_row(&a[lo..], &b[ro..], inner, m, f)
        })
    }
    let g = (ol, or, inner);
    match op {
        CmpOp::Eq => go(a, b, shape, g, mask, |x, y| (conv(x) == conv(y)) != neg),
        CmpOp::Ne => go(a, b, shape, g, mask, |x, y| (conv(x) != conv(y)) != neg),
        CmpOp::Lt => go(a, b, shape, g, mask, |x, y| (conv(x) < conv(y)) != neg),
        CmpOp::Le => go(a, b, shape, g, mask, |x, y| (conv(x) <= conv(y)) != neg),
        CmpOp::Gt => go(a, b, shape, g, mask, |x, y| (conv(x) > conv(y)) != neg),
        CmpOp::Ge => go(a, b, shape, g, mask, |x, y| (conv(x) >= conv(y)) != neg),
    }
}

#[allow(clippy::too_many_arguments)]
fn cmp_mask(
    op: CmpOp,
    l: Bound<'_>,
    r: Bound<'_>,
    sl: &[usize],
    sr: &[usize],
    shape: &[usize],
    neg: bool,
    mask: &mut [u8],
) -> bool {
    let last = |s: &[usize]| s.last().copied().unwrap_or(0);
    let inner = (last(sl), last(sr));
    let (ol, or) = (
        &sl[..sl.len().saturating_sub(1)],
        &sr[..sr.len().saturating_sub(1)],
    );
    let g = (ol, or, inner);
    macro_rules! go {
        ($t:ty, $conv:expr) => {{
            let a: &[$t] = bytemuck::cast_slice(l.bytes);
            let b: &[$t] = bytemuck::cast_slice(r.bytes);
            cmp_typed(op, a, b, $conv, shape, g, neg, mask);
            true
        }};
    }
    match l.dtype {
        DType::Bool => go!(u8, |x: u8| x != 0),
        DType::U8 => go!(u8, |x: u8| x),
        DType::I8 => go!(i8, |x: i8| x),
        DType::U16 => go!(u16, |x: u16| x),
        DType::I16 => go!(i16, |x: i16| x),
        DType::U32 => go!(u32, |x: u32| x),
        DType::I32 => go!(i32, |x: i32| x),
        DType::U64 => go!(u64, |x: u64| x),
        DType::I64 => go!(i64, |x: i64| x),
        DType::F32 => go!(f32, |x: f32| x),
        DType::F64 => go!(f64, |x: f64| x),
        DType::BF16 => go!(u16, bf16_f32),
        DType::F16 => go!(u16, |x: u16| f16::from_bits(x).to_f32()),
        DType::Complex64 | DType::Complex128 => false,
    }
}

fn test_mask(
    op: TestOp,
    v: Bound<'_>,
    sv: &[usize],
    shape: &[usize],
    neg: bool,
    mask: &mut [u8],
) -> bool {
    let inner = sv.last().copied().unwrap_or(0);
    let ov = &sv[..sv.len().saturating_sub(1)];
    let zeros = vec![0usize; ov.len()];
    /// The rows of a test, with the element's NaN, Inf and finite tests.
    #[allow(clippy::too_many_arguments)]
    fn typed<T: Copy>(
        op: TestOp,
        a: &[T],
        (shape, ov, zeros, inner): (&[usize], &[usize], &[usize], usize),
        neg: bool,
        mask: &mut [u8],
        nan: impl Fn(T) -> bool + Copy,
        inf: impl Fn(T) -> bool + Copy,
        fin: impl Fn(T) -> bool + Copy,
    ) {
        let mut go =
            |f: &dyn Fn(&[T], &mut [u8])| rows(shape, ov, zeros, mask, |lo, _, m| f(&a[lo..], m));
        match op {
            TestOp::IsNan => go(&|a, m| test_row(a, inner, m, |x| nan(x) != neg)),
            TestOp::IsInf => go(&|a, m| test_row(a, inner, m, |x| inf(x) != neg)),
            TestOp::IsFinite => go(&|a, m| test_row(a, inner, m, |x| fin(x) != neg)),
        }
    }
    let g = (shape, ov, &zeros[..], inner);
    match v.dtype {
        DType::F32 => typed(
            op,
            bytemuck::cast_slice::<u8, f32>(v.bytes),
            g,
            neg,
            mask,
            f32::is_nan,
            f32::is_infinite,
            f32::is_finite,
        ),
        DType::F64 => typed(
            op,
            bytemuck::cast_slice::<u8, f64>(v.bytes),
            g,
            neg,
            mask,
            f64::is_nan,
            f64::is_infinite,
            f64::is_finite,
        ),
        DType::BF16 => typed(
            op,
            bytemuck::cast_slice::<u8, u16>(v.bytes),
            g,
            neg,
            mask,
            |x| bf16_f32(x).is_nan(),
            |x| bf16_f32(x).is_infinite(),
            |x| bf16_f32(x).is_finite(),
        ),
        DType::F16 => typed(
            op,
            bytemuck::cast_slice::<u8, u16>(v.bytes),
            g,
            neg,
            mask,
            |x| f16::from_bits(x).is_nan(),
            |x| f16::from_bits(x).is_infinite(),
            |x| f16::from_bits(x).is_finite(),
        ),
        DType::Complex64 | DType::Complex128 => return false,
        _ => mask.fill(u8::from((op == TestOp::IsFinite) != neg)),
    }
    true
}

/// What `selectjit bench` reports for one fused case. Times are medians of interleaved rounds,
/// single-threaded.
#[derive(Debug, Clone, Serialize)]
pub struct FusedMeasurement {
    /// Name of the case.
    pub case: String,
    /// The case's expression.
    pub expr: String,
    /// The output's dtype.
    pub dtype: String,
    /// Output elements.
    pub elements: usize,
    /// Each variable's own bytes plus the output's (no mask).
    pub traffic_bytes: usize,
    /// The fused call (`Engine::select_bytes` with the predicate) on the `auto` engine.
    pub fused_ns: f64,
    /// What ran the fused call: the kernel variant that fuses it (`avx2`, `cranelift`, ...),
    /// or `blocked` when no tier fuses it and the static kernels ran it in blocks (a mask
    /// block, then its select); `hoisted <variant>` when the predicate is far smaller than the
    /// output: evaluated once at its own shape into a byte mask, then that mask's select.
    pub fused_tier: String,
    /// The signature of the fused call.
    pub signature: String,
    /// The same call on the static kernels (blocked).
    pub static_ns: f64,
    /// The unfused sequence: the faster mask (below), then the select on it (`auto` engine).
    pub unfused_ns: f64,
    /// Which mask the unfused sequence computes: `rust-loop` or `engine`, the faster alone.
    pub unfused_mask: String,
    /// The mask alone by the tight Rust loop (`None` for complex operands).
    pub mask_rust_ns: Option<f64>,
    /// The mask alone by the engine (a `u8` select under the predicate).
    pub mask_engine_ns: f64,
    /// The copy roofline of the fused traffic: the fastest copy of half of it, from the case's
    /// variables into its output (ordinary copies timed in the calls' rounds, non-temporal ones
    /// in rounds of their own right after).
    pub roofline_ns: f64,
    /// Which copy was the fastest.
    pub roofline_kind: CopyKind,
    /// First fused call on a fresh `auto` engine (validation, planning, compilation, run).
    pub first_call_us: f64,
    /// fused_ns / unfused_ns (below 1: fusing wins).
    pub fused_over_unfused: f64,
    /// fused_ns / roofline_ns.
    pub fused_over_roofline: f64,
}

/// [`crate::settle_choice`] for a fused case: calls back to back until `auto` has chosen,
/// then the chosen variant's call checked.
fn settle(
    e: &Engine,
    inp: &FusedInputs,
    sig: &Signature,
    out: &mut [u8],
    check: &dyn Fn(&str, &[u8]) -> Result<()>,
) -> Result<()> {
    crate::settle_choice(e, sig, out, &mut |o| inp.run(e, o), &|o| {
        check("fused (auto)", o)
    })
}

/// Measures one fused case.
pub fn measure_fused(case: &FusedCase, opts: Options) -> Result<FusedMeasurement> {
    let inp = FusedInputs::new(case)?;
    let ob = inp.out_bytes();
    let interp = single(Backend::Interp, Tier::Auto)?;
    let mut reference = PageBuf::zeroed(ob);
    inp.run(&interp, &mut reference)?;
    let check = |what: &str, out: &[u8]| -> Result<()> {
        if out != &reference[..] {
            return Err(Error::Invalid(format!(
                "{}: {what} output differs from the interpreter",
                case.name
            )));
        }
        Ok(())
    };

    // The fused call on `auto`: compiled, measured until chosen, each output checked.
    let auto = single(Backend::Jit, Tier::Auto)?;
    let (t, e) = (inp.term(&case.expr.then)?, inp.term(&case.expr.else_)?);
    let plan = auto.plan_select_bytes(
        inp.dtype,
        inp.cond()?,
        TensorRef::new(t.bytes, t.shape),
        TensorRef::new(e.bytes, e.shape),
        &inp.out_shape,
        Broadcast::Numpy,
    )?;
    let (sig, one_pass) =
        plan.ok_or_else(|| Error::Invalid(format!("{}: empty output", case.name)))?;
    // A predicate far smaller than the output is evaluated once at its own shape, then the
    // select runs on that byte mask: its kernel is the mask select's.
    let hoisted = auto.hoisted_pred_shape(inp.dtype, inp.cond()?, &inp.out_shape)?;
    let mask_zeros = vec![0u8; hoisted.as_deref().map_or(0, numel)];
    let sig = match &hoisted {
        None => sig,
        Some(ps) => {
            auto.plan_select_bytes(
                inp.dtype,
                Cond::mask(TensorRef::new(&mask_zeros, ps)),
                TensorRef::new(t.bytes, t.shape),
                TensorRef::new(e.bytes, e.shape),
                &inp.out_shape,
                Broadcast::Numpy,
            )?
            .ok_or_else(|| Error::Invalid(format!("{}: empty output", case.name)))?
            .0
        }
    };
    let mut out_fused = PageBuf::zeroed(ob);
    let t0 = Instant::now();
    inp.run(&auto, &mut out_fused)?;
    let first_call_us = t0.elapsed().as_nanos() as f64 / 1e3;
    check("fused (auto)", &out_fused)?;
    settle(&auto, &inp, &sig, &mut out_fused, &check)?;
    let blocked = auto.stats().blocked_runs > 0;
    if !one_pass && !blocked {
        return Err(Error::Invalid(format!(
            "{}: the engine said the call runs blocked but it ran fused",
            case.name
        )));
    }
    let fused_tier = match (one_pass, blocked) {
        (_, false) => {
            let v = auto
                .kernel(&sig)
                .map_or("static".into(), |k| k.variant().to_string());
            if hoisted.is_some() {
                format!("hoisted {v}")
            } else {
                v
            }
        }
        (false, true) => "blocked".to_string(),
        // A tier covers the signature but its kernel did not run it: say why.
        (true, true) => format!(
            "blocked ({})",
            auto.last_codegen_error()
                .map_or("no kernel".to_string(), |e| e.to_string())
        ),
    };

    let stat = single(Backend::Static, Tier::Auto)?;
    let mut out_static = PageBuf::zeroed(ob);
    inp.run(&stat, &mut out_static)?;
    check("fused (static kernels)", &out_static)?;

    // Unfused: the mask, then the select on it, on the fused call's engine: where the fused
    // call hoists its predicate the two run the same mask select, and one engine measures its
    // class once (two engines' trials of one class could each keep a different variant of
    // the same speed give or take a few percent, and make fusing look slower or faster than
    // it is).
    let masked = &auto;
    let np = numel(&inp.pred_shape);
    let mut mask_r = PageBuf::zeroed(np);
    let mut out_r = PageBuf::zeroed(ob);
    let rust_ok = inp.rust_mask(&mut mask_r)?;
    if rust_ok {
        inp.run_masked(masked, &mask_r, &mut out_r)?;
        check("unfused (Rust mask loop)", &out_r)?;
    }
    let mut mask_e = PageBuf::zeroed(np);
    let mut out_e = PageBuf::zeroed(ob);
    inp.engine_mask(masked, &mut mask_e)?;
    inp.run_masked(masked, &mask_e, &mut out_e)?;
    check("unfused (engine mask)", &out_e)?;
    // Let `auto` settle its choices for the mask and the masked select before timing: calls
    // back to back, as in `settle`, then one checked.
    for _ in 0..128 {
        inp.engine_mask(masked, &mut mask_e)?;
        inp.run_masked(masked, &mask_e, &mut out_e)?;
        if masked.stats().tier_trials == masked.tier_choices().len() as u64 {
            break;
        }
    }
    out_e.fill(0);
    inp.engine_mask(masked, &mut mask_e)?;
    inp.run_masked(masked, &mask_e, &mut out_e)?;
    check("unfused (engine mask)", &out_e)?;

    // The copy roofline of the fused traffic: every kind of copy on the call's own memory (its
    // variables read, its output written; see `own_copy`), those with ordinary stores timed in
    // the same rounds as the calls. On a shared host both the time an L3-sized working set
    // takes and the physical pages a buffer happens to get move these times by more than the
    // fused call and the copy differ (copies of nan_to_zero_f64_1m's 16 MiB: 142-160 µs from
    // one run to the next; minimum_f32_1m's kernel: 105-115 µs on four output buffers of one
    // process): a copy timed minutes apart, or the best of four copies each on buffers of its
    // own, measured the neighbours and the luckiest pages as much as the call. Each batch
    // still follows an untimed one of its own. The copies with non-temporal stores run in
    // rounds of their own right after, on the same memory (since 2026-11-27): in the calls'
    // rounds their stores slowed the ordinary stores of whatever ran after them for longer
    // than a batch, the calls' and the vector copy's but not glibc's `memcpy` (8 MiB NaN
    // cleaning, forced variants in shuffled rounds: 1.18-1.5x a `memcpy` with them in the
    // rounds, 1.01-1.14x without, the vector copy 1.06-1.21x and 1.00-1.01x), so the calls
    // paid for the yardstick.
    let kinds: Vec<CopyKind> = CopyKind::ALL
        .into_iter()
        .filter(|k| k.available())
        .collect();
    let (nt_kinds, kinds): (Vec<CopyKind>, Vec<CopyKind>) =
        kinds.into_iter().partition(|k| k.non_temporal());
    let copy_bytes = inp.traffic_bytes() / 2;
    let mut spill = PageBuf::zeroed(copy_bytes.saturating_sub(ob));
    let out_cell = RefCell::new(out_fused);

    // The unfused sequence computes the mask the faster way, timed alone first: the two
    // sequences differ only there, and the faster of two timed sequences would be the faster
    // of two noisy samples of one time where the masks cost next to nothing (a padding mask
    // of 3 072 bytes before a 54 MiB select), a bias against the fused call.
    let inp = &inp;
    let mask_t = {
        let mut e = || {
            inp.engine_mask(masked, &mut mask_e)
                .expect("validated above")
        };
        let mut r = || {
            inp.rust_mask(&mut mask_r).expect("validated above");
        };
        if rust_ok {
            interleaved(opts, &mut [&mut e, &mut r])
        } else {
            interleaved(opts, &mut [&mut e])
        }
    };
    let (mask_engine_ns, mask_rust_ns) = (mask_t[0], mask_t.get(1).copied());
    let rust_mask = mask_rust_ns.is_some_and(|r| r <= mask_engine_ns);
    let fs: Vec<Box<dyn FnMut() + '_>> = vec![
        Box::new(|| {
            inp.run(&auto, &mut out_cell.borrow_mut())
                .expect("validated above")
        }),
        Box::new(|| inp.run(&stat, &mut out_static).expect("validated above")),
        // Into the fused call's output, as the copies: the same pages for the same bytes (on
        // a shared host two output buffers of one process differ by more than a predicate
        // that hoists to a few thousand bytes costs: masked_fill_bert_f32, 54 MiB through
        // non-temporal stores, ran 1.03-1.06x slower into one buffer than into the other).
        if rust_mask {
            Box::new(|| {
                inp.rust_mask(&mut mask_r).expect("validated above");
                inp.run_masked(masked, &mask_r, &mut out_cell.borrow_mut())
                    .expect("validated above")
            })
        } else {
            Box::new(|| {
                inp.engine_mask(masked, &mut mask_e)
                    .expect("validated above");
                inp.run_masked(masked, &mask_e, &mut out_cell.borrow_mut())
                    .expect("validated above")
            })
        },
    ];
    let n_calls = fs.len();
    let spill = RefCell::new(&mut spill[..]);
    let copy = |k: CopyKind| -> Box<dyn FnMut() + '_> {
        let (out_cell, spill) = (&out_cell, &spill);
        Box::new(move || {
            own_copy(
                k,
                &inp.bufs,
                &mut out_cell.borrow_mut(),
                &mut spill.borrow_mut(),
                copy_bytes,
            )
            .expect("available")
        })
    };
    let (t, nt_t) = time_with_copies(opts, fs, &copy, &kinds, &nt_kinds);
    // The copies wrote over the output last: one more call of each, checked.
    let mut out_fused = out_cell.into_inner();
    out_fused.fill(0);
    if rust_mask {
        inp.run_masked(masked, &mask_r, &mut out_fused)?;
        check("unfused (Rust mask loop, timed)", &out_fused)?;
    } else {
        inp.run_masked(masked, &mask_e, &mut out_fused)?;
        check("unfused (engine mask, timed)", &out_fused)?;
    }
    out_fused.fill(0);
    inp.run(&auto, &mut out_fused)?;
    check("fused (auto, timed)", &out_fused)?;
    let (fused_ns, static_ns, unfused_ns) = (t[0], t[1], t[2]);
    let unfused_mask = if rust_mask { "rust-loop" } else { "engine" };
    let (roofline_kind, roofline_ns) = kinds
        .iter()
        .zip(&t[n_calls..])
        .chain(nt_kinds.iter().zip(&nt_t))
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(&k, &ns)| (k, ns))
        .ok_or_else(|| Error::Invalid("no copy ran".into()))?;
    Ok(FusedMeasurement {
        case: case.name.clone(),
        expr: case.expr_text.clone(),
        dtype: inp.dtype.to_string(),
        elements: inp.elements(),
        traffic_bytes: inp.traffic_bytes(),
        fused_ns,
        fused_tier,
        signature: sig.to_string(),
        static_ns,
        unfused_ns,
        unfused_mask: unfused_mask.into(),
        mask_rust_ns,
        mask_engine_ns,
        roofline_ns,
        roofline_kind,
        first_call_us,
        fused_over_unfused: fused_ns / unfused_ns,
        fused_over_roofline: fused_ns / roofline_ns,
    })
}

/// Times `fs` interleaved with the copies `copy` makes of `kinds`, then the copies of
/// `nt_kinds` (non-temporal: their own rounds, right after): the times in that order, of each
/// list.
pub(crate) fn time_with_copies<'a>(
    opts: Options,
    mut fs: Vec<Box<dyn FnMut() + 'a>>,
    copy: &dyn Fn(CopyKind) -> Box<dyn FnMut() + 'a>,
    kinds: &[CopyKind],
    nt_kinds: &[CopyKind],
) -> (Vec<f64>, Vec<f64>) {
    fs.extend(kinds.iter().map(|&k| copy(k)));
    let mut refs: Vec<&mut dyn FnMut()> = fs.iter_mut().map(|f| &mut **f as _).collect();
    let t = interleaved(opts, &mut refs);
    drop(refs);
    drop(fs);
    let mut nt_fs: Vec<Box<dyn FnMut() + 'a>> = nt_kinds.iter().map(|&k| copy(k)).collect();
    let mut refs: Vec<&mut dyn FnMut()> = nt_fs.iter_mut().map(|f| &mut **f as _).collect();
    let nt_t = if refs.is_empty() {
        Vec::new()
    } else {
        interleaved(opts, &mut refs)
    };
    (t, nt_t)
}

/// The copy of a fused case's roofline on the call's own memory: `n` bytes read from its
/// variables in order (from the first again, should they hold fewer), written to its output
/// and, past the output's end, to `spill`. The bytes a fused kernel moves, on the same pages.
pub(crate) fn own_copy(
    kind: CopyKind,
    vars: &[PageBuf],
    out: &mut [u8],
    spill: &mut [u8],
    n: usize,
) -> Result<()> {
    let held: usize = vars.iter().map(|v| v.len()).sum();
    if held == 0 || n > out.len() + spill.len() {
        return Err(Error::Invalid(format!(
            "a copy of {n} bytes from {held} bytes of variables into {} bytes",
            out.len() + spill.len()
        )));
    }
    // `at` bytes of variable `var` read, `done` bytes written.
    let (mut var, mut at, mut done) = (0, 0, 0);
    while done < n {
        let src = &vars[var][at..];
        let (dst, d_at) = if done < out.len() {
            (&mut *out, done)
        } else {
            (&mut *spill, done - out.len())
        };
        let len = src.len().min(dst.len() - d_at).min(n - done);
        copy_slice(kind, &src[..len], &mut dst[d_at..d_at + len])?;
        (at, done) = (at + len, done + len);
        if at == vars[var].len() {
            (var, at) = ((var + 1) % vars.len(), 0);
        }
    }
    std::hint::black_box(out);
    Ok(())
}

/// Measures every fused case whose name contains `filter`, calling `progress` after each.
pub fn run_fused_suite(
    cases: &[FusedCase],
    filter: &str,
    opts: Options,
    mut progress: impl FnMut(&FusedMeasurement),
) -> Result<Vec<FusedMeasurement>> {
    let mut out = Vec::new();
    for c in cases.iter().filter(|c| c.name.contains(filter)) {
        let m = measure_fused(c, opts)?;
        progress(&m);
        out.push(m);
    }
    Ok(out)
}

/// Column headers of [`fused_row`].
pub fn fused_header() -> String {
    format!(
        "{:<26} {:>9} {:>7} {:>10} {:<10} {:>10} {:>10} {:<10} {:>10} {:>9} {:>9}",
        "fused case",
        "elements",
        "traffic",
        "fused",
        "(tier)",
        "static",
        "unfused",
        "(mask)",
        "copy",
        "fus/unf",
        "fus/copy"
    )
}

/// One line of the fused table: times in µs, ratios of times.
pub fn fused_row(m: &FusedMeasurement) -> String {
    let us = |ns: f64| ns / 1e3;
    format!(
        "{:<26} {:>9} {:>7} {:>10.2} {:<10} {:>10.2} {:>10.2} {:<10} {:>10.2} {:>9.3} {:>9.3}",
        m.case,
        m.elements,
        crate::human_bytes(m.traffic_bytes),
        us(m.fused_ns),
        format!("({})", m.fused_tier),
        us(m.static_ns),
        us(m.unfused_ns),
        format!("({})", m.unfused_mask),
        us(m.roofline_ns),
        m.fused_over_unfused,
        m.fused_over_roofline
    )
}

/// What the fused table's columns mean.
pub const FUSED_NOTES: &str = "fused cases: times in us per call (median of interleaved rounds), single-threaded; \
fused = the select with its predicate on the auto engine, with what ran it (a kernel variant, or blocked: \
the static kernels, a mask block then its select, when no tier fuses the predicate; hoisted: a predicate at \
least 256x smaller than an output of at least 2^18 elements, evaluated once at its own shape into a byte mask, then that mask's select); static = the same call \
on the static kernels; unfused = the mask (a tight Rust loop, or the engine's own comparison into a u8 mask, \
the faster) then the select on it; copy = the copy roofline of the fused traffic (variables + output, no mask): the fastest copy of half of it from the case's variables into its output, ordinary copies timed in the same rounds, \
non-temporal ones in rounds of their own right after";

#[cfg(test)]
mod tests {
    use super::*;

    fn one(vars: &str, expr: &str) -> String {
        format!(r#"{{"cases":[{{"name":"c","expr":"{expr}","vars":{{{vars}}}}}]}}"#)
    }

    #[test]
    fn the_roofline_copy_reads_the_variables_and_writes_the_output_then_the_spill() {
        let vars = [
            PageBuf::from_slice(&(0..100u8).collect::<Vec<_>>()),
            PageBuf::zeroed(0),
            PageBuf::from_slice(&[200, 201, 202]),
        ];
        let mut want: Vec<u8> = (0..100u8).chain([200, 201, 202]).collect();
        want.extend_from_slice(&want.clone()[..20]);
        for kind in CopyKind::ALL.into_iter().filter(|&k| crate::copy_runs(k)) {
            // The output holds 70 bytes, the spill the rest: 123 bytes, the variables twice
            // over in part.
            let (mut out, mut spill) = (vec![0u8; 70], vec![0u8; 60]);
            own_copy(kind, &vars, &mut out, &mut spill, 123).unwrap();
            assert_eq!(out[..], want[..70], "{kind:?}");
            assert_eq!(spill[..53], want[70..], "{kind:?}");
            assert!(spill[53..].iter().all(|&b| b == 0), "{kind:?}");
            // More bytes than the output and the spill hold, or nothing to read: an error.
            assert!(own_copy(kind, &vars, &mut out, &mut spill, 131).is_err());
            assert!(own_copy(kind, &vars[1..2], &mut out, &mut spill, 10).is_err());
        }
    }

    #[test]
    fn builtin_fused_cases_parse() {
        let cases = parse_fused_cases(BUILTIN_FUSED_CASES).unwrap();
        assert!(cases.len() >= 10);
        let bert = cases
            .iter()
            .find(|c| c.name == "masked_fill_bert_f32")
            .unwrap();
        assert_eq!(
            bert.vars
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>(),
            ["mask", "zero", "neg_inf", "scores"]
        );
        assert_eq!(
            bert.vars[2].fill,
            Fill::Value(f32::NEG_INFINITY.to_le_bytes().to_vec())
        );
        let (p, o) = bert.shapes().unwrap();
        assert_eq!((p, o), (vec![8, 1, 1, 384], vec![8, 12, 384, 384]));
        assert_eq!(bert.dtype(), DType::F32);
        let causal = cases
            .iter()
            .find(|c| c.name == "causal_from_positions_f16")
            .unwrap();
        assert_eq!(causal.shapes().unwrap().0, [1, 1, 512, 512]);
    }

    #[test]
    fn bad_fused_case_files_are_clear_errors() {
        let x = r#""x":{"dtype":"f32","shape":[4],"fill":"normal"}"#;
        let z = r#""zero":{"dtype":"f32","shape":[],"value":0}"#;
        let bad: Vec<(String, &str)> = vec![
            ("{".into(), "fused case list"),
            (
                r#"{"cases":[{"name":"c","expr":"where(x>zero,x,zero)"}]}"#.into(),
                "missing field `vars`",
            ),
            (
                one(&format!("{x},{z}"), "where(x >> zero, x, zero)"),
                "fused case c: expression",
            ),
            (
                one(&format!("{x},{z}"), "where(x > 0, x, zero)"),
                "'0' is a literal",
            ),
            (
                one(&format!("{x},{z}"), "where(x > y, x, zero)"),
                "'y' is not one of the case's variables",
            ),
            (
                one(
                    &format!("{x},{z},\"w\":{{\"dtype\":\"f32\",\"shape\":[],\"value\":1}}"),
                    "where(x > zero, x, zero)",
                ),
                "'w' is not used",
            ),
            (
                one(
                    &format!("{x},\"zero\":{{\"dtype\":\"f64\",\"shape\":[],\"value\":0}}"),
                    "where(x > zero, x, x)",
                ),
                "compares x (f32) with zero (f64)",
            ),
            (
                one(
                    &format!("{x},{z},\"i\":{{\"dtype\":\"i32\",\"shape\":[],\"value\":0}}"),
                    "where(x > zero, x, i)",
                ),
                "where()'s values differ in dtype",
            ),
            (
                one(
                    r#""x":{"dtype":"f33","shape":[4],"fill":"normal"}"#,
                    "where(isnan(x), x, x)",
                ),
                "variable x: unknown dtype 'f33'",
            ),
            (
                one(
                    r#""x":{"dtype":"f32","shape":[4],"fill":"gauss"}"#,
                    "where(isnan(x), x, x)",
                ),
                "unknown fill 'gauss'",
            ),
            (
                one(
                    r#""x":{"dtype":"i32","shape":[4],"fill":"nan10"}"#,
                    "where(isnan(x), x, x)",
                ),
                "needs a float dtype",
            ),
            (
                one(
                    r#""x":{"dtype":"f32","shape":[4]}"#,
                    "where(isnan(x), x, x)",
                ),
                "needs a fill or a value",
            ),
            (
                one(
                    r#""x":{"dtype":"f32","shape":[4],"fill":"normal","value":1}"#,
                    "where(isnan(x), x, x)",
                ),
                "both a fill and a value",
            ),
            (
                one(
                    r#""x":{"dtype":"f32","shape":[4],"value":1}"#,
                    "where(isnan(x), x, x)",
                ),
                "a value needs shape []",
            ),
            (
                one(
                    r#""x":{"dtype":"u8","shape":[],"value":300}"#,
                    "where(isnan(x), x, x)",
                ),
                "'300' is not a u8 value",
            ),
            (
                one(
                    r#""x":{"dtype":"f32","shape":[],"value":[1]}"#,
                    "where(isnan(x), x, x)",
                ),
                "is not a number",
            ),
            (
                one(
                    r#""x":{"dtype":"f32","shape":[3],"fill":"normal"},"y":{"dtype":"f32","shape":[4],"fill":"normal"}"#,
                    "where(x < y, x, y)",
                ),
                "the operands of 'x < y'",
            ),
            (
                one(
                    r#""x":{"dtype":"f32","shape":[3],"fill":"normal"},"y":{"dtype":"f32","shape":[4],"fill":"normal"}"#,
                    "where(isnan(x), y, y)",
                ),
                "numpy broadcast of cond [3], then [4]",
            ),
            (
                one(
                    r#""x":{"dtype":"f32","shape":[],"fill":"mask01"}"#,
                    "where(isnan(x), x, x)",
                ),
                "needs at least one dimension",
            ),
            (
                one(
                    r#""x":{"dtype":"f32","shape":[4],"fill":"normal","extra":1}"#,
                    "where(isnan(x), x, x)",
                ),
                "unknown field `extra`",
            ),
        ];
        for (json, want) in &bad {
            let e = parse_fused_cases(json).unwrap_err().to_string();
            assert!(e.contains(want), "{json}\n -> {e}");
        }
        let two = format!(
            r#"{{"cases":[{0},{0}]}}"#,
            r#"{"name":"c","expr":"where(isnan(x), x, x)","vars":{"x":{"dtype":"f32","shape":[2],"fill":"normal"}}}"#
        );
        let e = parse_fused_cases(&two).unwrap_err().to_string();
        assert!(e.contains("a second case of this name"), "{e}");
    }

    #[test]
    fn fills_are_deterministic_and_as_described() {
        let cases = parse_fused_cases(BUILTIN_FUSED_CASES).unwrap();
        let c = cases
            .iter()
            .find(|c| c.name == "nan_to_zero_f64_1m")
            .unwrap();
        let (a, b) = (FusedInputs::new(c).unwrap(), FusedInputs::new(c).unwrap());
        assert_eq!(a.bufs[0][..], b.bufs[0][..]);
        let x: &[f64] = bytemuck::cast_slice(&a.bufs[0]);
        let nan = x.iter().filter(|v| v.is_nan()).count() as f64 / x.len() as f64;
        assert!((0.09..0.11).contains(&nan), "{nan}");
        assert!(x.contains(&f64::INFINITY) && x.iter().any(|v| v.to_bits() == (-0.0f64).to_bits()));
        let bert = cases
            .iter()
            .find(|c| c.name == "masked_fill_bert_f32")
            .unwrap();
        let i = FusedInputs::new(bert).unwrap();
        let m: &[i64] = bytemuck::cast_slice(&i.bufs[0]);
        assert_eq!(m.len(), 8 * 384);
        for row in m.chunks(384) {
            // 1s, then a run of 0s.
            let ones = row.iter().take_while(|v| **v == 1).count();
            assert!(row[ones..].iter().all(|v| *v == 0));
        }
        let zeros = m.iter().filter(|v| **v == 0).count() as f64 / m.len() as f64;
        assert!((0.05..0.25).contains(&zeros), "{zeros}");
        let causal = cases
            .iter()
            .find(|c| c.name == "causal_from_positions_f16")
            .unwrap();
        let i = FusedInputs::new(causal).unwrap();
        let k: &[i32] = bytemuck::cast_slice(&i.bufs[0]);
        assert_eq!(k[..4], [0, 1, 2, 3]);
        assert_eq!(
            i.traffic_bytes(),
            512 * 4 * 2 + 2 + 2 * 12 * 512 * 512 * 2 * 2
        );
    }

    fn var(name: &str, dtype: DType, n: usize, fill: Fill) -> Var {
        Var {
            name: name.into(),
            dtype,
            shape: vec![n],
            fill,
        }
    }

    #[test]
    fn the_nway_fills_parse_and_refuse_bad_forms() {
        assert_eq!(parse_fill("nan_inf", DType::F32), Ok(Fill::NanInf));
        assert_eq!(parse_fill("nan_inf", DType::BF16), Ok(Fill::NanInf));
        assert_eq!(
            parse_fill("int_range:0:2000", DType::I32),
            Ok(Fill::IntRange(0, 2000))
        );
        assert_eq!(
            parse_fill("int_range:-5:3", DType::F64),
            Ok(Fill::IntRange(-5, 3))
        );
        // HI is excluded: 256 is not a u8, but the largest draw is 255.
        assert_eq!(
            parse_fill("int_range:0:256", DType::U8),
            Ok(Fill::IntRange(0, 256))
        );
        assert_eq!(parse_fill("bool:0.15", DType::Bool), Ok(Fill::Bool(0.15)));
        assert_eq!(parse_fill("bool:1", DType::Bool), Ok(Fill::Bool(1.0)));
        for (f, d, want) in [
            (
                "nan_inf",
                DType::I32,
                "fill 'nan_inf' needs a float dtype, not i32",
            ),
            (
                "int_range:5:5",
                DType::I32,
                "expected int_range:LO:HI, integers LO < HI",
            ),
            ("int_range:9:2", DType::I32, "expected int_range:LO:HI"),
            ("int_range:0", DType::I32, "expected int_range:LO:HI"),
            ("int_range:a:b", DType::I32, "expected int_range:LO:HI"),
            ("int_range:0:1.5", DType::I32, "expected int_range:LO:HI"),
            ("int_range:0:257", DType::U8, "'256' is not a u8 value"),
            ("int_range:-1:3", DType::U16, "'-1' is not a u16 value"),
            ("int_range:0:9007199254740993", DType::I64, "beyond +-2^53"),
            ("bool:1.5", DType::Bool, "a probability P in [0, 1]"),
            ("bool:-0.1", DType::Bool, "a probability P in [0, 1]"),
            ("bool:x", DType::Bool, "a probability P in [0, 1]"),
            ("bool", DType::Bool, "unknown fill 'bool'"),
        ] {
            let e = parse_fill(f, d).unwrap_err();
            assert!(e.contains(want), "{f} ({d}): {e}");
        }
        // In a case file, the message names the case and the variable.
        let e = parse_fused_cases(&one(
            r#""x":{"dtype":"i32","shape":[4],"fill":"int_range:3:1"}"#,
            "where(x > x, x, x)",
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("fused case c: variable x: fill 'int_range:3:1'"),
            "{e}"
        );
    }

    #[test]
    fn the_nway_fills_are_deterministic_and_as_described() {
        let n = 200_000;
        let vars = [
            var("x", DType::F32, n, Fill::NanInf),
            var("d", DType::I32, n, Fill::IntRange(-3, 5)),
            var("m", DType::Bool, n, Fill::Bool(0.15)),
            var("f", DType::F64, 8, Fill::NanInf),
        ];
        let a = generate("case_a", &vars);
        let b = generate("case_a", &vars);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x[..], y[..]);
        }
        // Another name, another seed; the variables draw in order, so a variable in front
        // changes those after it.
        let c = generate("case_b", &vars);
        assert_ne!(a[0][..], c[0][..]);
        let d = generate("case_a", &vars[1..]);
        assert_ne!(a[1][..], d[0][..]);

        let x: &[f32] = bytemuck::cast_slice(&a[0]);
        let share = |f: &dyn Fn(f32) -> bool| x.iter().filter(|v| f(**v)).count() as f64 / n as f64;
        let nan = share(&|v| v.is_nan());
        let pinf = share(&|v| v == f32::INFINITY);
        let ninf = share(&|v| v == f32::NEG_INFINITY);
        let nzero = share(&|v| v.to_bits() == (-0.0f32).to_bits());
        assert!((0.017..0.023).contains(&nan), "NaN {nan}");
        for (what, p) in [("+inf", pinf), ("-inf", ninf), ("-0.0", nzero)] {
            assert!((0.008..0.012).contains(&p), "{what} {p}");
        }
        // The rest normal: about 68% within one standard deviation.
        let within = share(&|v| v.abs() < 1.0);
        assert!((0.62..0.67).contains(&within), "{within}");

        let ints: &[i32] = bytemuck::cast_slice(&a[1]);
        assert!(ints.iter().all(|v| (-3..5).contains(v)));
        for want in -3..5 {
            let p = ints.iter().filter(|v| **v == want).count() as f64 / n as f64;
            assert!((0.115..0.135).contains(&p), "{want}: {p}");
        }

        let m = &a[2][..];
        assert!(m.iter().all(|v| *v <= 1));
        let t = m.iter().filter(|v| **v == 1).count() as f64 / n as f64;
        assert!((0.14..0.16).contains(&t), "{t}");
        for (p, want) in [(0.0, 0u8), (1.0, 1)] {
            let b = generate("c", &[var("m", DType::Bool, 1000, Fill::Bool(p))]);
            assert!(b[0].iter().all(|v| *v == want), "bool:{p}");
        }
    }

    /// Every built-in case's Rust mask loop agrees with the engine's comparison and the
    /// interpreter, on small shapes of the same expressions (negated too).
    #[test]
    fn rust_masks_match_the_engine() {
        let cases = parse_fused_cases(BUILTIN_FUSED_CASES).unwrap();
        let interp = single(Backend::Interp, Tier::Auto).unwrap();
        for c in &cases {
            for neg in [false, true] {
                let mut c = c.clone();
                for v in &mut c.vars {
                    // Shrink each dimension, keeping broadcasting.
                    for d in &mut v.shape {
                        if *d > 1 {
                            *d = (*d % 7) + 3;
                        }
                    }
                }
                if c.shapes().is_err() {
                    continue;
                }
                if neg {
                    c.expr.cond = CondExpr::Not(Box::new(c.expr.cond.clone()));
                }
                let inp = FusedInputs::new(&c).unwrap();
                let np = numel(&inp.pred_shape);
                let (mut mr, mut me) = (vec![9u8; np], vec![9u8; np]);
                assert!(inp.rust_mask(&mut mr).unwrap(), "{}", c.name);
                inp.engine_mask(&interp, &mut me).unwrap();
                assert_eq!(mr, me, "{} negated {neg}", c.name);
            }
        }
    }

    #[test]
    fn a_tiny_case_measures() {
        let cases = parse_fused_cases(BUILTIN_FUSED_CASES).unwrap();
        let c = cases.iter().find(|c| c.name == "tiny_relu_f32_16").unwrap();
        let m = measure_fused(
            c,
            Options {
                rounds: 1,
                min_batch_ns: 10_000,
            },
        )
        .unwrap();
        assert_eq!((m.elements, m.traffic_bytes), (16, 64 + 4 + 64));
        assert!(m.fused_ns > 0.0 && m.unfused_ns > 0.0 && m.roofline_ns > 0.0);
        assert!(!m.fused_tier.is_empty());
        assert!(m.signature.contains("where"), "{}", m.signature);
        assert!(m.mask_rust_ns.is_some() && m.mask_engine_ns > 0.0);
    }
}

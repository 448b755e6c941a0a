//! The n-way cases (`benches/nway_cases.json`): selects where the first true of several
//! conditions wins, `select([C1, C2, ...], [V1, V2, ...], D)` (numpy.select, numpy.nan_to_num,
//! SQL `CASE WHEN`, a chain of ONNX `Where`), each condition a predicate of the fused grammar or
//! a bool mask.
//!
//! Per case, interleaved and single-threaded: one [`Engine::select_n_bytes`] call (`auto`
//! tier), and the same result from today's two-way calls chained in place (the last branch over
//! the default, then each earlier branch over the output, full-size calls), both into one
//! preallocated output. The yardstick is the copy roofline of the case's traffic (each
//! variable's own bytes plus the output's), measured as for the fused cases. Before anything is
//! timed the n-way output is compared bytewise with the chained one and with the interpreter's
//! n-way select.

use std::cell::RefCell;
use std::time::Instant;

use serde::Serialize;

use crate::expr::{BranchCond, SelectExpr, Term, context, parse_select};
use crate::fused::{
    Bound, RawFile, Var, bound_of, build_cond, cond_dtypes, generate, literal_bytes, own_copy,
    parse_vars, pred_shape,
};
use crate::roofline::CopyKind;
use crate::{Options, PageBuf, numel, single};
use selectjit::{
    Backend, Broadcast, Choice, Cond, DType, Engine, Error, InPlace, Result, TensorMut, TensorRef,
    Tier, output_shape,
};

/// The built-in n-way case list (the project's copy of the shared `nway_cases.json`).
pub const BUILTIN_NWAY_CASES: &str = include_str!("../../../benches/nway_cases.json");

/// One n-way case.
#[derive(Debug, Clone)]
pub struct NwayCase {
    /// Name of the case.
    pub name: String,
    /// The expression as written.
    pub expr_text: String,
    /// The expression.
    pub expr: SelectExpr,
    /// The variables, in file order (the order they draw from the case's generator).
    pub vars: Vec<Var>,
}

/// Parses an n-way case list in the `nway_cases.json` format, checking every case: the
/// expression, every variable it names defined and every defined variable used, dtypes (a
/// comparison's operands alike, a mask bool, the values and the default of one dtype), fills
/// and values, and every operand's shape broadcast together with the numpy rule.
pub fn parse_nway_cases(json: &str) -> Result<Vec<NwayCase>> {
    let f: RawFile =
        serde_json::from_str(json).map_err(|e| Error::Invalid(format!("n-way case list: {e}")))?;
    let mut out: Vec<NwayCase> = Vec::new();
    for c in f.cases {
        let name = format!("n-way case {}", c.name);
        if out.iter().any(|o| o.name == c.name) {
            return Err(Error::Invalid(format!(
                "{name}: a second case of this name"
            )));
        }
        let expr = parse_select(&c.expr).map_err(|e| context(e, &name))?;
        let vars = parse_vars(&name, c.vars)?;
        let case = NwayCase {
            name: c.name,
            expr_text: c.expr,
            expr,
            vars,
        };
        case.check().map_err(|e| context(e, &name))?;
        out.push(case);
    }
    Ok(out)
}

impl NwayCase {
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

    fn check(&self) -> Result<()> {
        let used = self.expr.vars();
        for n in &used {
            self.var(n)?;
        }
        if let Some(v) = self.vars.iter().find(|v| !used.contains(&v.name.as_str())) {
            return Err(Error::Invalid(format!(
                "variable '{}' is not used by the expression",
                v.name
            )));
        }
        let d = self.term(&self.expr.default)?;
        for t in &self.expr.values {
            let v = self.term(t)?;
            if v.dtype != d.dtype {
                return Err(Error::DType(format!(
                    "select()'s values and default differ in dtype: {} is {}, {} is {}",
                    v.name, v.dtype, d.name, d.dtype
                )));
            }
        }
        for (i, c) in self.expr.conds.iter().enumerate() {
            match c {
                BranchCond::Mask(n) => {
                    let v = self.var(n)?;
                    if v.dtype != DType::Bool {
                        return Err(Error::DType(format!(
                            "condition {}: the mask '{n}' is {}; a mask must be bool",
                            i + 1,
                            v.dtype
                        )));
                    }
                }
                BranchCond::Pred(p) => cond_dtypes(p, &|n| self.var(n).map(|v| v.dtype))
                    .map_err(|e| context(e, format!("condition {}", i + 1)))?,
            }
        }
        self.out_shape().map(|_| ())
    }

    /// The shape of condition `i`: a mask's own shape, a predicate's operands broadcast.
    fn cond_shape(&self, i: usize) -> Result<Vec<usize>> {
        match &self.expr.conds[i] {
            BranchCond::Mask(n) => Ok(self.var(n)?.shape.clone()),
            BranchCond::Pred(p) => pred_shape(p, &|n| self.var(n).map(|v| v.shape.as_slice())),
        }
    }

    /// The output's shape: every condition's, value's and the default's shape broadcast
    /// together (numpy's rule).
    pub fn out_shape(&self) -> Result<Vec<usize>> {
        let mut shapes: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, c) in self.expr.conds.iter().enumerate() {
            shapes.push((format!("condition {} ({c})", i + 1), self.cond_shape(i)?));
        }
        for t in self.expr.values.iter().chain([&self.expr.default]) {
            let v = self.term(t)?;
            shapes.push((format!("'{}'", v.name), v.shape.clone()));
        }
        broadcast_all(&shapes)
    }

    /// The output's dtype (the default's; the values share it).
    pub fn dtype(&self) -> DType {
        self.term(&self.expr.default)
            .map(|v| v.dtype)
            .unwrap_or(DType::U8)
    }

    /// Conditions (branches) of the select.
    pub fn branches(&self) -> usize {
        self.expr.conds.len()
    }
}

/// Labelled shapes broadcast together with numpy's rule; errors name the shape that does not
/// fit.
fn broadcast_all(shapes: &[(String, Vec<usize>)]) -> Result<Vec<usize>> {
    let mut acc: Vec<usize> = Vec::new();
    for (label, s) in shapes {
        acc = output_shape(Broadcast::Numpy, &acc, s, &[])
            .map_err(|_| {
                Error::Invalid(format!(
                    "{label} of shape {s:?} does not broadcast with {acc:?}, the shape of the operands before it"
                ))
            })?
            .to_vec();
    }
    Ok(acc)
}

/// The buffers of an n-way case, filled deterministically.
pub struct NwayInputs {
    /// The case.
    pub case: NwayCase,
    /// Each variable's bytes, in the case's order.
    pub bufs: Vec<PageBuf>,
    /// The output's shape.
    pub out_shape: Vec<usize>,
    /// The output's dtype.
    pub dtype: DType,
    /// Whether the last branch's condition, its value and the default span the output (the
    /// chained calls' first pass then writes all of it).
    pub spans: bool,
    /// Per condition, its literals (none in a case file, whose operands are variables).
    literals: Vec<Vec<Vec<u8>>>,
}

impl NwayInputs {
    /// Generates the variables of `case` as the fused cases do (one generator per case, seeded
    /// by the CRC-32 of its name, drawn by the variables in file order).
    pub fn new(case: &NwayCase) -> Result<NwayInputs> {
        let out_shape = case.out_shape()?;
        let k = case.branches();
        if k == 0 || case.expr.values.len() != k {
            return Err(Error::Invalid(format!(
                "n-way case {}: {k} conditions and {} values (at least one condition, one value each)",
                case.name,
                case.expr.values.len()
            )));
        }
        let mut last = vec![(String::from("the last condition"), case.cond_shape(k - 1)?)];
        for t in [&case.expr.values[k - 1], &case.expr.default] {
            last.push((t.to_string(), case.term(t)?.shape.clone()));
        }
        let spans = broadcast_all(&last)? == out_shape;
        let dtype_of = |n: &str| case.var(n).map(|v| v.dtype);
        let literals = case
            .expr
            .conds
            .iter()
            .map(|c| match c {
                BranchCond::Pred(p) => literal_bytes(p, &dtype_of),
                BranchCond::Mask(_) => Ok(Vec::new()),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(NwayInputs {
            bufs: generate(&case.name, &case.vars),
            dtype: case.dtype(),
            case: case.clone(),
            out_shape,
            spans,
            literals,
        })
    }

    fn bound(&self, name: &str) -> Result<Bound<'_>> {
        bound_of(&self.case.vars, &self.bufs, name)
    }

    fn value(&self, t: &Term) -> Result<TensorRef<'_, u8>> {
        match t {
            Term::Var(n) => {
                let b = self.bound(n)?;
                Ok(TensorRef::new(b.bytes, b.shape))
            }
            Term::Lit(l) => Err(Error::Invalid(format!("literal '{l}' as a value"))),
        }
    }

    /// Condition `i` over the case's buffers.
    pub fn cond(&self, i: usize) -> Result<Cond<'_>> {
        match &self.case.expr.conds[i] {
            BranchCond::Mask(n) => {
                let b = self.bound(n)?;
                Ok(Cond::mask(TensorRef::new(b.bytes, b.shape)))
            }
            BranchCond::Pred(p) => build_cond(p, &|n| self.bound(n), &self.literals[i]),
        }
    }

    /// The operands of the case's calls, built once (the timed calls build nothing).
    pub fn calls(&self) -> Result<NwayCalls<'_>> {
        let k = self.case.branches();
        let values: Vec<TensorRef<'_, u8>> = self
            .case
            .expr
            .values
            .iter()
            .map(|t| self.value(t))
            .collect::<Result<_>>()?;
        Ok(NwayCalls {
            inp: self,
            conds: (0..k).map(|i| self.cond(i)).collect::<Result<_>>()?,
            choices: values.iter().map(|&v| Choice::Tensor(v)).collect(),
            values,
            default: self.value(&self.case.expr.default)?,
        })
    }

    /// Elements of the output.
    pub fn elements(&self) -> usize {
        numel(&self.out_shape)
    }

    /// Bytes of the output.
    pub fn out_bytes(&self) -> usize {
        self.elements() * self.dtype.width()
    }

    /// Bytes an n-way kernel moves at the least: each variable's own bytes plus the output's.
    pub fn traffic_bytes(&self) -> usize {
        self.bufs.iter().map(|b| b.len()).sum::<usize>() + self.out_bytes()
    }
}

/// The operands of an n-way case's calls over its buffers.
pub struct NwayCalls<'a> {
    inp: &'a NwayInputs,
    conds: Vec<Cond<'a>>,
    values: Vec<TensorRef<'a, u8>>,
    /// The values as the n-way call takes them.
    choices: Vec<Choice<'a, u8>>,
    default: TensorRef<'a, u8>,
}

impl NwayCalls<'_> {
    /// One n-way call on `engine` into `out` ([`Engine::select_n_bytes`]).
    pub fn nway(&self, engine: &Engine, out: &mut [u8]) -> Result<()> {
        engine.select_n_bytes(
            self.inp.dtype,
            &self.conds,
            &self.choices,
            Choice::Tensor(self.default),
            TensorMut::new(out, &self.inp.out_shape),
            Broadcast::Numpy,
        )
    }

    /// The same result from the engine's two-way calls chained in place, full-size: `out = ck ?
    /// vk : D` (where those three do not span the output, `out = D` broadcast first, then `out
    /// = ck ? vk : out`), then `out = ci ? vi : out` for i = k-1 down to 1.
    pub fn chained(&self, engine: &Engine, out: &mut [u8]) -> Result<()> {
        let (dtype, shape, mode) = (self.inp.dtype, &self.inp.out_shape[..], Broadcast::Numpy);
        let k = self.conds.len();
        if self.inp.spans {
            engine.select_bytes(
                dtype,
                self.conds[k - 1],
                self.values[k - 1],
                self.default,
                TensorMut::new(out, shape),
                mode,
            )?;
        } else {
            // The default broadcast into the output: a select under an all-true scalar mask.
            engine.select_in_place_bytes(
                dtype,
                TensorRef::scalar(&[1u8][..]),
                TensorMut::new(out, shape),
                InPlace::Else,
                self.default,
                mode,
            )?;
            engine.select_in_place_bytes(
                dtype,
                self.conds[k - 1],
                TensorMut::new(out, shape),
                InPlace::Else,
                self.values[k - 1],
                mode,
            )?;
        }
        for i in (0..k - 1).rev() {
            engine.select_in_place_bytes(
                dtype,
                self.conds[i],
                TensorMut::new(out, shape),
                InPlace::Else,
                self.values[i],
                mode,
            )?;
        }
        Ok(())
    }
}

/// What `selectjit bench` reports for one n-way case. Times are medians of interleaved rounds,
/// single-threaded.
#[derive(Debug, Clone, Serialize)]
pub struct NwayMeasurement {
    /// Name of the case.
    pub case: String,
    /// The case's expression.
    pub expr: String,
    /// The output's dtype.
    pub dtype: String,
    /// Output elements.
    pub elements: usize,
    /// Conditions of the select.
    pub branches: usize,
    /// Each variable's own bytes plus the output's.
    pub traffic_bytes: usize,
    /// One `Engine::select_n_bytes` call on the `auto` engine.
    pub nway_ns: f64,
    /// What ran the n-way call (see [`ran`]): the variants `auto` chose for its tiles' two-way
    /// calls, `blocked` where no tier fused a predicate.
    pub nway_tier: String,
    /// The same result from the chained two-way calls in place (full-size calls), on an `auto`
    /// engine of their own.
    pub chained_ns: f64,
    /// What ran the chained calls, as `nway_tier`.
    pub chained_tier: String,
    /// The copy roofline of the traffic: the fastest copy of half of it, from the case's
    /// variables into its output (as for the fused cases).
    pub roofline_ns: f64,
    /// Which copy was the fastest.
    pub roofline_kind: CopyKind,
    /// First n-way call on a fresh `auto` engine (validation, compilation, run).
    pub first_call_us: f64,
    /// nway_ns / roofline_ns.
    pub nway_over_roofline: f64,
    /// chained_ns / nway_ns (above 1: the n-way call wins).
    pub chained_over_nway: f64,
}

/// Calls `run` back to back until `e`'s `auto` has decided every trial its calls started: a
/// trial compiles all of its candidate variants up front (all but the one kept count in
/// `trial_compiles`) and its choice lists each candidate's time, so none is under way when
/// those counts agree. Where they cannot (choices loaded from a wisdom file), until 160 calls
/// in a row decide nothing (a trial takes up to 96 calls of its class, and every call here
/// makes at least one call of each of its classes). At most 1024 calls.
fn settle(e: &Engine, run: &mut dyn FnMut() -> Result<()>) -> Result<()> {
    let (mut decided, mut quiet) = (e.stats().tier_trials, 0);
    for _ in 0..1024 {
        run()?;
        let st = e.stats();
        let choices = e.tier_choices();
        let compiled: u64 = choices
            .iter()
            .map(|c| c.times_ns.len().saturating_sub(1) as u64)
            .sum();
        if st.trial_compiles == compiled && st.tier_trials == choices.len() as u64 {
            return Ok(());
        }
        if st.tier_trials == decided {
            quiet += 1;
            if quiet >= 160 {
                return Ok(());
            }
        } else {
            (decided, quiet) = (st.tier_trials, 0);
        }
    }
    Ok(())
}

/// What ran the calls on `e`, an engine that ran nothing else (its choices settled): `1-pass`
/// where a single-pass n-way kernel ran an n-way call, the distinct variants `auto` chose by measuring for the two-way calls it made (for an n-way call,
/// its tiles' passes), joined by `/`, and `blocked` where the static kernels ran a predicate
/// no tier fuses. Where `auto` measured nothing (one candidate per call), the variant of the
/// kernel the engine holds for the case's first two-way pass as a full-size call (the last
/// branch over the default, `Engine::plan_select_bytes`): for an output of one tile, that
/// is the tile's call. `static` when no kernel runs it; `-` when the case has no such pass
/// (the last branch and the default do not span the output).
pub fn ran(e: &Engine, inp: &NwayInputs, calls: &NwayCalls<'_>) -> Result<String> {
    let mut v: Vec<String> = e
        .tier_choices()
        .iter()
        .map(|c| c.chosen.to_string())
        .collect();
    v.sort();
    v.dedup();
    if e.stats().blocked_runs > 0 {
        v.push("blocked".into());
    }
    if e.stats().nway_pass_runs > 0 {
        v.push("1-pass".into());
    }
    if !v.is_empty() {
        return Ok(v.join("/"));
    }
    if !inp.spans {
        return Ok("-".into());
    }
    let k = calls.conds.len();
    let plan = e.plan_select_bytes(
        inp.dtype,
        calls.conds[k - 1],
        calls.values[k - 1],
        calls.default,
        &inp.out_shape,
        Broadcast::Numpy,
    )?;
    Ok(match plan {
        Some((sig, _)) => e
            .kernel(&sig)
            .map_or("static".into(), |k| k.variant().to_string()),
        None => "-".into(),
    })
}

/// Measures one n-way case.
pub fn measure_nway(case: &NwayCase, opts: Options) -> Result<NwayMeasurement> {
    let inp = NwayInputs::new(case)?;
    let calls = inp.calls()?;
    let ob = inp.out_bytes();
    let interp = single(Backend::Interp, Tier::Auto)?;
    let mut reference = PageBuf::zeroed(ob);
    calls.nway(&interp, &mut reference)?;
    let check = |nway: &[u8], chained: &[u8], when: &str| -> Result<()> {
        if nway != chained {
            return Err(Error::Invalid(format!(
                "{}: the n-way output differs from the chained two-way calls' ({when})",
                case.name
            )));
        }
        if nway != &reference[..] {
            return Err(Error::Invalid(format!(
                "{}: the n-way output differs from the interpreter's ({when})",
                case.name
            )));
        }
        Ok(())
    };

    // Each on an `auto` engine of its own, so that each reports what ran it alone.
    let nw = single(Backend::Jit, Tier::Auto)?;
    let ch = single(Backend::Jit, Tier::Auto)?;
    let mut out = PageBuf::zeroed(ob);
    let mut out_chained = PageBuf::zeroed(ob);
    let t0 = Instant::now();
    calls.nway(&nw, &mut out)?;
    let first_call_us = t0.elapsed().as_nanos() as f64 / 1e3;
    calls.chained(&ch, &mut out_chained)?;
    check(&out, &out_chained, "first calls")?;
    settle(&nw, &mut || calls.nway(&nw, &mut out))?;
    settle(&ch, &mut || calls.chained(&ch, &mut out_chained))?;
    out.fill(0);
    out_chained.fill(0);
    calls.nway(&nw, &mut out)?;
    calls.chained(&ch, &mut out_chained)?;
    check(&out, &out_chained, "after auto's choices")?;
    let nway_tier = ran(&nw, &inp, &calls)?;
    let chained_tier = ran(&ch, &inp, &calls)?;

    // The calls and the roofline copies on the same memory, as for the fused cases: the copies
    // with ordinary stores in the calls' rounds, those with non-temporal stores in rounds of
    // their own right after (see `measure_fused`).
    let (nt_kinds, kinds): (Vec<CopyKind>, Vec<CopyKind>) = CopyKind::ALL
        .into_iter()
        .filter(|k| k.available())
        .partition(|k| k.non_temporal());
    let copy_bytes = inp.traffic_bytes() / 2;
    let mut spill = PageBuf::zeroed(copy_bytes.saturating_sub(ob));
    let out_cell = RefCell::new(out);
    let (inp, calls) = (&inp, &calls);
    let fs: Vec<Box<dyn FnMut() + '_>> = vec![
        Box::new(|| {
            calls
                .nway(&nw, &mut out_cell.borrow_mut())
                .expect("validated above")
        }),
        Box::new(|| {
            calls
                .chained(&ch, &mut out_cell.borrow_mut())
                .expect("validated above")
        }),
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
    let (t, nt_t) = crate::fused::time_with_copies(opts, fs, &copy, &kinds, &nt_kinds);
    // The copies wrote over the output last: one more call of each, checked.
    let mut out = out_cell.into_inner();
    out.fill(0);
    out_chained.fill(0);
    calls.nway(&nw, &mut out)?;
    calls.chained(&ch, &mut out_chained)?;
    check(&out, &out_chained, "after the timed calls")?;
    let (nway_ns, chained_ns) = (t[0], t[1]);
    let (roofline_kind, roofline_ns) = kinds
        .iter()
        .zip(&t[n_calls..])
        .chain(nt_kinds.iter().zip(&nt_t))
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(&k, &ns)| (k, ns))
        .ok_or_else(|| Error::Invalid("no copy ran".into()))?;
    Ok(NwayMeasurement {
        case: case.name.clone(),
        expr: case.expr_text.clone(),
        dtype: inp.dtype.to_string(),
        elements: inp.elements(),
        branches: case.branches(),
        traffic_bytes: inp.traffic_bytes(),
        nway_ns,
        nway_tier,
        chained_ns,
        chained_tier,
        roofline_ns,
        roofline_kind,
        first_call_us,
        nway_over_roofline: nway_ns / roofline_ns,
        chained_over_nway: chained_ns / nway_ns,
    })
}

/// Measures every n-way case whose name contains `filter`, calling `progress` after each.
pub fn run_nway_suite(
    cases: &[NwayCase],
    filter: &str,
    opts: Options,
    mut progress: impl FnMut(&NwayMeasurement),
) -> Result<Vec<NwayMeasurement>> {
    let mut out = Vec::new();
    for c in cases.iter().filter(|c| c.name.contains(filter)) {
        let m = measure_nway(c, opts)?;
        progress(&m);
        out.push(m);
    }
    Ok(out)
}

/// Column headers of [`nway_row`].
pub fn nway_header() -> String {
    format!(
        "{:<26} {:>9} {:>8} {:>10} {:>10} {:>10} {:>9} {:>9}  {}",
        "n-way case",
        "elements",
        "branches",
        "nway",
        "chained",
        "roofline",
        "nway/roof",
        "chn/nway",
        "(tier)"
    )
}

/// One line of the n-way table: times in µs, ratios of times.
pub fn nway_row(m: &NwayMeasurement) -> String {
    let us = |ns: f64| ns / 1e3;
    format!(
        "{:<26} {:>9} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>9.3} {:>9.3}  ({})",
        m.case,
        m.elements,
        m.branches,
        us(m.nway_ns),
        us(m.chained_ns),
        us(m.roofline_ns),
        m.nway_over_roofline,
        m.chained_over_nway,
        m.nway_tier
    )
}

/// What the n-way table's columns mean.
pub const NWAY_NOTES: &str = "n-way cases: times in us per call (median of interleaved rounds), single-threaded; \
nway = one select_n call on the auto engine (a single-pass n-way kernel where the engine has one for the call, else \
cache-sized tiles of two-way passes); chained = the same result from \
full-size two-way calls in place (the last branch over the default, then each earlier branch over the output), on an \
auto engine of their own; roofline = the copy roofline of the traffic (variables + output): the fastest copy of half of it \
from the case's variables into its output, ordinary copies timed in the same rounds, non-temporal ones in rounds of their \
own right after; chn/nway above 1: the n-way call is faster; tier = 1-pass where a single-pass n-way kernel ran the \
call, else the variants auto chose for the n-way call's tile passes (blocked: a predicate no tier fuses, run by the \
static kernels)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fused::Fill;

    fn one(vars: &str, expr: &str) -> String {
        format!(r#"{{"cases":[{{"name":"c","expr":"{expr}","vars":{{{vars}}}}}]}}"#)
    }

    /// The n-way call, the chained calls on the JIT and the interpreter's n-way select: one
    /// output.
    fn agree(inp: &NwayInputs) {
        let calls = inp.calls().unwrap();
        let interp = single(Backend::Interp, Tier::Auto).unwrap();
        let jit = single(Backend::Jit, Tier::Auto).unwrap();
        let ob = inp.out_bytes();
        let (mut a, mut b, mut c) = (vec![7u8; ob], vec![8u8; ob], vec![9u8; ob]);
        calls.nway(&interp, &mut a).unwrap();
        calls.nway(&jit, &mut b).unwrap();
        calls.chained(&jit, &mut c).unwrap();
        assert_eq!(a, b, "{}: n-way, JIT", inp.case.name);
        assert_eq!(a, c, "{}: chained, JIT", inp.case.name);
        let mut d = vec![6u8; ob];
        calls.chained(&interp, &mut d).unwrap();
        assert_eq!(a, d, "{}: chained, interpreter", inp.case.name);
    }

    #[test]
    fn builtin_nway_cases_parse_and_build() {
        let cases = parse_nway_cases(BUILTIN_NWAY_CASES).unwrap();
        assert!(cases.len() >= 8);
        for c in &cases {
            let inp = NwayInputs::new(c).unwrap();
            assert!(inp.calls().is_ok(), "{}", c.name);
            assert_eq!(inp.bufs.len(), c.vars.len());
            assert!(inp.elements() > 0 && inp.traffic_bytes() > inp.out_bytes());
            assert!(inp.spans, "{}", c.name);
        }
        let nan = cases
            .iter()
            .find(|c| c.name == "nan_to_num_f32_16m")
            .unwrap();
        assert_eq!(nan.branches(), 3);
        assert_eq!(nan.dtype(), DType::F32);
        assert_eq!(nan.out_shape().unwrap(), [16 << 20]);
        assert_eq!(
            nan.vars.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
            ["x", "pinf", "ninf", "zero", "big", "small"]
        );
        assert_eq!(nan.vars[0].fill, Fill::NanInf);
        assert_eq!(
            nan.vars[4].fill,
            Fill::Value(f32::MAX.to_le_bytes().to_vec())
        );
        let attn = cases
            .iter()
            .find(|c| c.name == "attn_two_masks_bf16")
            .unwrap();
        assert_eq!(
            attn.expr.conds,
            [
                BranchCond::Mask("pad".into()),
                BranchCond::Mask("causal".into())
            ]
        );
        assert_eq!(attn.out_shape().unwrap(), [4, 16, 512, 512]);
        assert_eq!(attn.vars[0].fill, Fill::Bool(0.15));
        let bucket = cases.iter().find(|c| c.name == "bucket_i32_4m").unwrap();
        assert_eq!(bucket.dtype(), DType::I64);
        assert_eq!(bucket.vars[0].fill, Fill::IntRange(0, 2000));
        let inp = NwayInputs::new(bucket).unwrap();
        assert_eq!(
            inp.traffic_bytes(),
            (4 << 20) * 4 + 3 * 4 + 4 * 8 + (4 << 20) * 8
        );
        let d: &[i32] = bytemuck::cast_slice(&inp.bufs[0]);
        assert!(d.iter().all(|v| (0..2000).contains(v)));
    }

    /// Every built-in case on small shapes of the same expressions: the n-way call, the
    /// chained calls and the interpreter agree.
    #[test]
    fn builtin_nway_cases_agree_on_small_shapes() {
        let cases = parse_nway_cases(BUILTIN_NWAY_CASES).unwrap();
        for c in &cases {
            let mut c = c.clone();
            for v in &mut c.vars {
                for d in &mut v.shape {
                    if *d > 1 {
                        *d = (*d % 7) + 3;
                    }
                }
            }
            if c.out_shape().is_err() {
                continue;
            }
            agree(&NwayInputs::new(&c).unwrap());
        }
        let tiny = cases
            .iter()
            .find(|c| c.name == "tiny_nan_to_num_f32_16")
            .unwrap();
        let inp = NwayInputs::new(tiny).unwrap();
        agree(&inp);
        // numpy.nan_to_num's result: no NaN or infinity left, -0.0 kept.
        let mut out = vec![0u8; inp.out_bytes()];
        let jit = single(Backend::Jit, Tier::Auto).unwrap();
        inp.calls().unwrap().nway(&jit, &mut out).unwrap();
        let x: &[f32] = bytemuck::cast_slice(&inp.bufs[0]);
        let y: &[f32] = bytemuck::cast_slice(&out);
        for (a, b) in x.iter().zip(y) {
            let want = match *a {
                a if a.is_nan() => 0.0,
                f32::INFINITY => f32::MAX,
                f32::NEG_INFINITY => f32::MIN,
                a => a,
            };
            assert_eq!(b.to_bits(), want.to_bits(), "{a}");
        }
    }

    /// Where the last branch and the default do not span the output, the chained calls fill
    /// it with the default first.
    #[test]
    fn chained_calls_fill_the_default_where_the_last_branch_does_not_span() {
        let json = one(
            r#""x":{"dtype":"f32","shape":[3,5],"fill":"nan_inf"},"m":{"dtype":"bool","shape":[5],"fill":"bool:0.5"},"a":{"dtype":"f32","shape":[3,1],"fill":"normal"},"b":{"dtype":"f32","shape":[],"value":2},"d":{"dtype":"f32","shape":[1,5],"fill":"iota"}"#,
            "select([x > a, m], [a, b], d)",
        );
        let cases = parse_nway_cases(&json).unwrap();
        let inp = NwayInputs::new(&cases[0]).unwrap();
        assert!(!inp.spans);
        assert_eq!(inp.out_shape, [3, 5]);
        agree(&inp);
    }

    #[test]
    fn a_case_without_branches_is_an_error() {
        let cases = parse_nway_cases(BUILTIN_NWAY_CASES).unwrap();
        let mut c = cases[0].clone();
        c.expr.values.pop();
        let e = NwayInputs::new(&c).err().unwrap().to_string();
        assert!(e.contains("3 conditions and 2 values"), "{e}");
        c.expr.conds.clear();
        c.expr.values.clear();
        assert!(NwayInputs::new(&c).is_err());
    }

    #[test]
    fn bad_nway_case_files_are_clear_errors() {
        let x = r#""x":{"dtype":"f32","shape":[4],"fill":"normal"}"#;
        let z = r#""zero":{"dtype":"f32","shape":[],"value":0}"#;
        let m = r#""m":{"dtype":"bool","shape":[4],"fill":"bool:0.5"}"#;
        let bad: Vec<(String, &str)> = vec![
            ("{".into(), "n-way case list"),
            (
                one(&format!("{x},{z}"), "select([x > zero], [x, zero], x)"),
                "n-way case c: expression 'select([x > zero], [x, zero], x)': 1 conditions but 2 values",
            ),
            (
                one(&format!("{x},{z}"), "where(x > zero, x, zero)"),
                "expected 'select([C1, ...], [V1, ...], D)'",
            ),
            (
                one(&format!("{x},{z}"), "select([x > y], [x], zero)"),
                "n-way case c: 'y' is not one of the case's variables",
            ),
            (
                one(&format!("{x},{z},{m}"), "select([x > zero], [x], zero)"),
                "variable 'm' is not used",
            ),
            (
                one(&format!("{x},{z}"), "select([x], [x], zero)"),
                "condition 1: the mask 'x' is f32; a mask must be bool",
            ),
            (
                one(
                    &format!("{x},{m},\"zero\":{{\"dtype\":\"f64\",\"shape\":[],\"value\":0}}"),
                    "select([m, x > zero], [x, x], x)",
                ),
                "condition 2: 'x > zero' compares x (f32) with zero (f64)",
            ),
            (
                one(
                    &format!("{x},{m},\"i\":{{\"dtype\":\"i32\",\"shape\":[],\"value\":0}}"),
                    "select([m], [i], x)",
                ),
                "select()'s values and default differ in dtype: i is i32, x is f32",
            ),
            (
                one(
                    &format!(
                        "{x},{z},\"m\":{{\"dtype\":\"bool\",\"shape\":[3],\"fill\":\"bool:0.5\"}}"
                    ),
                    "select([isnan(x), m], [zero, zero], x)",
                ),
                "condition 2 (m) of shape [3] does not broadcast with [4]",
            ),
            (
                one(
                    r#""x":{"dtype":"i32","shape":[4],"fill":"nan_inf"}"#,
                    "select([x > x], [x], x)",
                ),
                "n-way case c: variable x: fill 'nan_inf' needs a float dtype, not i32",
            ),
            (
                one(
                    r#""m":{"dtype":"bool","shape":[4],"fill":"bool:2"}"#,
                    "select([m], [m], m)",
                ),
                "n-way case c: variable m: fill 'bool:2'",
            ),
        ];
        for (json, want) in &bad {
            let e = parse_nway_cases(json).unwrap_err().to_string();
            assert!(e.contains(want), "{json}\n -> {e}");
        }
        let case = r#"{"name":"c","expr":"select([m], [m], m)","vars":{"m":{"dtype":"bool","shape":[2],"fill":"bool:0.5"}}}"#;
        let e = parse_nway_cases(&format!(r#"{{"cases":[{case},{case}]}}"#))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("n-way case c: a second case of this name"),
            "{e}"
        );
    }

    #[test]
    fn a_tiny_case_measures() {
        let cases = parse_nway_cases(BUILTIN_NWAY_CASES).unwrap();
        let c = cases
            .iter()
            .find(|c| c.name == "tiny_nan_to_num_f32_16")
            .unwrap();
        let m = measure_nway(
            c,
            Options {
                rounds: 1,
                min_batch_ns: 10_000,
            },
        )
        .unwrap();
        assert_eq!((m.elements, m.branches), (16, 3));
        assert_eq!(m.traffic_bytes, 64 + 5 * 4 + 64);
        assert!(m.nway_ns > 0.0 && m.chained_ns > 0.0 && m.roofline_ns > 0.0);
        assert!(!m.nway_tier.is_empty() && !m.chained_tier.is_empty());
        let row = nway_row(&m);
        assert!(row.starts_with("tiny_nan_to_num_f32_16"), "{row}");
        assert!(nway_header().contains("chained"));
        assert!((m.chained_over_nway - m.chained_ns / m.nway_ns).abs() < 1e-12);
    }
}

/// How long a new single-pass n-way pattern of `branches` branches takes to compile on the
/// `auto` engine (its own tiers: AVX-512 or AVX2 on x86-64, else Cranelift).
#[derive(Debug, Clone, Serialize)]
pub struct NwayCompileLatency {
    /// Branches of the patterns.
    pub branches: usize,
    /// Median / 90th percentile compile time (the engine's `nway_compile_us` per new kernel:
    /// code generation and making it executable), over `compiled` distinct patterns.
    pub median_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// Patterns compiled.
    pub compiled: usize,
}

/// Compile latencies of new n-way patterns of 2 to 8 branches (one branch is a two-way call)
/// over 256 f32 elements: per
/// branch a mask, a comparison with a scalar or with an array, or a NaN test, negated or not,
/// its value a scalar or an array (patterns that repeat one already compiled are not counted).
/// Empty when the engine has no single-pass kernels.
pub fn measure_nway_compile(opts: Options) -> Result<Vec<NwayCompileLatency>> {
    const N: usize = 256;
    let want = if opts.rounds > 5 { 24 } else { 8 };
    let shape = [N];
    let x: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let mask: Vec<u8> = (0..N).map(|i| (i % 3) as u8).collect();
    let arrays: Vec<Vec<f32>> = (0..8).map(|j| vec![j as f32; N]).collect();
    let scalars: Vec<[f32; 1]> = (0..8).map(|j| [j as f32]).collect();
    let mut out = vec![0f32; N];
    let mut lat = Vec::new();
    for k in 2..=8usize {
        let e = single(Backend::Jit, Tier::Auto)?;
        let mut us = Vec::new();
        for v in 0..2000usize {
            if us.len() == want {
                break;
            }
            let xv = TensorRef::new(&x, &shape);
            let mut conds = Vec::with_capacity(k);
            let mut values: Vec<Choice<'_, f32>> = Vec::with_capacity(k);
            for i in 0..k {
                let bits = (v >> (i % 6)) + i;
                let op = selectjit::CmpOp::ALL[(bits / 4) % 6];
                let c = match bits % 4 {
                    0 => Cond::mask(TensorRef::new(&mask, &shape)),
                    1 => Cond::cmp(op, xv, TensorRef::scalar(&scalars[i])),
                    2 => Cond::isnan(xv),
                    // (At most ten full operands: the kernels' registers.)
                    _ if i >= 2 => Cond::cmp(op, TensorRef::scalar(&scalars[i]), xv),
                    _ => Cond::cmp(op, xv, TensorRef::new(&arrays[i], &shape)),
                };
                conds.push(if (v / 64 + i) % 3 == 0 { c.not() } else { c });
                values.push(if (bits / 2) % 2 == 0 || i >= 2 {
                    TensorRef::scalar(&scalars[i]).into()
                } else {
                    TensorRef::new(&arrays[i], &shape).into()
                });
            }
            let before = e.stats();
            e.select_n(
                &conds,
                &values,
                xv.into(),
                TensorMut::new(&mut out, &shape),
                Broadcast::Numpy,
            )?;
            let after = e.stats();
            if after.nway_compiles == before.nway_compiles + 1 {
                us.push((after.nway_compile_us - before.nway_compile_us) as f64);
            }
        }
        if us.is_empty() {
            continue;
        }
        us.sort_by(|a, b| a.total_cmp(b));
        lat.push(NwayCompileLatency {
            branches: k,
            median_us: us[us.len() / 2],
            p90_us: us[us.len() * 9 / 10],
            compiled: us.len(),
        });
    }
    Ok(lat)
}

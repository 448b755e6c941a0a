//! `selectjit explain`.

use selectjit::{DType, Error, Result};

use crate::npy::read_npy;
use crate::pred::{Named, split_named};

use super::{CodegenArgs, Mode};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("computed").args(["cond_expr", "when"]).multiple(false)))]
pub struct Args {
    /// Element type (f32, bf16, i64, complex64, ...).
    #[arg(long)]
    dtype: String,
    /// Cond shape, comma separated ('' for a scalar).
    #[arg(
        long,
        allow_hyphen_values = true,
        required_unless_present_any = ["cond_expr", "when"],
        conflicts_with_all = ["cond_expr", "when"]
    )]
    cond: Option<String>,
    /// A predicate condition instead of a mask (`x > 0`, `mask == 0`, `isnan(x)`,
    /// `!(a < b)`, ...) over arrays given with --input or --var, or `then` / `else` (of --dtype
    /// and the --then / --else shapes); a number takes the dtype of the other side.
    #[arg(long, allow_hyphen_values = true, conflicts_with = "when")]
    cond_expr: Option<String>,
    /// An array the condition names: NAME=FILE.npy (its dtype and shape; repeatable).
    #[arg(long = "input", value_name = "NAME=FILE.npy", requires = "computed")]
    inputs: Vec<String>,
    /// An array the condition names by dtype and shape: NAME=DTYPE:SHAPE, e.g. `x=f32:8,1024`
    /// or `zero=f32:` for a scalar (repeatable).
    #[arg(long = "var", value_name = "NAME=DTYPE:SHAPE", requires = "computed")]
    vars: Vec<String>,
    /// Then shape.
    #[arg(
        long = "then",
        allow_hyphen_values = true,
        required_unless_present = "when",
        conflicts_with = "when"
    )]
    then: Option<String>,
    /// An n-way select instead: one branch's condition as for --cond-expr (repeatable, in
    /// order, one --value each); --else is the default's shape.
    #[arg(long = "when", allow_hyphen_values = true)]
    when: Vec<String>,
    /// The shape of each --when branch's value, in order.
    #[arg(long = "value", allow_hyphen_values = true, requires = "when")]
    values: Vec<String>,
    /// Else shape.
    #[arg(long = "else", allow_hyphen_values = true)]
    else_: String,
    #[arg(long, value_enum, default_value = "numpy")]
    broadcast: Mode,
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    axis: i64,
    #[command(flatten)]
    codegen: CodegenArgs,
    /// Under the auto tier, do not run the call to measure its candidates (shows the one that
    /// would run first).
    #[arg(long)]
    no_measure: bool,
}

/// Parses `2,3,4` (or `''` for a scalar).
pub fn parse_shape(s: &str) -> Result<Vec<usize>> {
    let t = s
        .trim()
        .trim_matches(|c| c == '[' || c == ']' || c == '(' || c == ')');
    if t.trim().is_empty() {
        return Ok(Vec::new());
    }
    t.split(',')
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| Error::Invalid(format!("shape '{s}': '{}' is not a size", d.trim())))
        })
        .collect()
}

pub fn run(a: Args) -> Result<()> {
    let dtype: DType = a.dtype.parse()?;
    let mut cfg = a.codegen.config(selectjit::Backend::Jit)?;
    // Kernels of a tier the host lacks are disassembled; with --emulate they also run.
    if !cfg.has_runner() {
        cfg = cfg.runner(selectjit_emu::Emulator::runner());
    }
    let mode = a.broadcast.with_axis(a.axis);
    if a.cond_expr.is_some() || !a.when.is_empty() {
        let mut named: Vec<Named> = Vec::new();
        let mut add = |n: Named| -> Result<()> {
            if matches!(n.name.as_str(), "then" | "else") {
                return Err(Error::Invalid(format!(
                    "'{}' names the --{} array",
                    n.name, n.name
                )));
            }
            if named.iter().any(|x| x.name == n.name) {
                return Err(Error::Invalid(format!("'{}' is given twice", n.name)));
            }
            named.push(n);
            Ok(())
        };
        for s in &a.inputs {
            let (name, file) = split_named("--input", s)?;
            let arr = read_npy(std::path::Path::new(file))?;
            add(Named {
                name: name.to_string(),
                dtype: arr.dtype,
                shape: arr.shape,
                strides: arr.strides,
                data: arr.data,
            })?;
        }
        for s in &a.vars {
            let (name, spec) = split_named("--var", s)?;
            let (dt, shape) = spec
                .split_once(':')
                .ok_or_else(|| Error::Invalid(format!("--var '{s}': expected NAME=DTYPE:SHAPE")))?;
            let dt: DType = dt.parse()?;
            add(Named::zeros(name, dt, &parse_shape(shape)?)?)?;
        }
        if !a.when.is_empty() {
            return explain_nway(&a, &cfg, dtype, &named, mode);
        }
        let expr = a.cond_expr.as_deref().unwrap_or_default();
        let then = a.then.as_deref().unwrap_or_default();
        let text = crate::explain::explain_cond(
            &cfg,
            dtype,
            expr,
            &named,
            &parse_shape(then)?,
            &parse_shape(&a.else_)?,
            mode,
            !a.no_measure,
        )?;
        print!("{text}");
        return Ok(());
    }
    let cond = a.cond.as_deref().unwrap_or_default();
    let then = a.then.as_deref().unwrap_or_default();
    let text = crate::explain::explain(
        &cfg,
        dtype,
        &parse_shape(cond)?,
        &parse_shape(then)?,
        &parse_shape(&a.else_)?,
        mode,
        !a.no_measure,
    )?;
    print!("{text}");
    Ok(())
}

/// `explain --when C1 --value S1 ... --else D`: the n-way select's output shape and how it runs,
/// then each branch's two-way call as the n-way select makes it (the last branch over the
/// default, each earlier one in place over the output), explained as `--cond-expr` is.
fn explain_nway(
    a: &Args,
    cfg: &selectjit::EngineConfig,
    dtype: DType,
    named: &[Named],
    mode: selectjit::Broadcast,
) -> Result<()> {
    if a.when.len() != a.values.len() {
        return Err(Error::Invalid(format!(
            "{} --when but {} --value: give one value shape per condition",
            a.when.len(),
            a.values.len()
        )));
    }
    let values = a
        .values
        .iter()
        .map(|v| parse_shape(v))
        .collect::<Result<Vec<_>>>()?;
    let default = parse_shape(&a.else_)?;
    let arrays: Vec<&Named> = named.iter().collect();
    let mut specs = Vec::with_capacity(a.when.len());
    for w in &a.when {
        specs.push(crate::pred::CondSpec::new(w, arrays.clone(), &[])?);
    }
    let mut shape: Vec<usize> = default.clone();
    for s in specs.iter().map(|s| &s.shape).chain(&values) {
        shape = selectjit::output_shape(selectjit::Broadcast::Numpy, &shape, s, &[])?.to_vec();
    }
    let k = specs.len();
    println!(
        "n-way select of {k} branches (the first true condition wins), output {} {dtype}",
        crate::ShapeFmt(&shape)
    );
    // How the engine runs it: one call on zeros of these shapes, and whether a single-pass
    // kernel ran it.
    let engine = selectjit::Engine::with_config(cfg.clone())?;
    let conds = specs.iter().map(|s| s.cond()).collect::<Result<Vec<_>>>()?;
    let zeros = |s: &[usize]| -> Result<Vec<u8>> {
        let n: usize = s.iter().product();
        let b = n
            .checked_mul(dtype.width())
            .ok_or_else(|| Error::Invalid("output too large".into()))?;
        Ok(vec![0u8; b])
    };
    let vz = values
        .iter()
        .map(|v| zeros(v))
        .collect::<Result<Vec<_>>>()?;
    let choices: Vec<selectjit::Choice<'_, u8>> = vz
        .iter()
        .zip(&values)
        .map(|(z, s)| selectjit::TensorRef::new(z, s).into())
        .collect();
    let dz = zeros(&default)?;
    let mut out = zeros(&shape)?;
    engine.select_n_bytes(
        dtype,
        &conds,
        &choices,
        selectjit::TensorRef::new(&dz, &default).into(),
        selectjit::TensorMut::new(&mut out, &shape),
        mode,
    )?;
    if engine.stats().nway_pass_runs > 0 {
        println!(
            "runs in one pass: a single-pass n-way kernel ({}) computes every condition in \
             registers and stores each output element once; where no generator has one, the \
             engine runs the two-way calls below in tiles of the output",
            engine.tier().map_or("-".to_string(), |t| t.to_string())
        );
    } else {
        println!(
            "runs in tiles of the output (at most 2 MiB of its and the operands' elements): \
             per tile the last branch over the default, then each earlier branch in place, \
             each a two-way call of its tier"
        );
    }
    for (i, (spec, v)) in specs.iter().zip(&values).enumerate().rev() {
        // The inputs this branch's condition reads, and the other side of its call.
        let used: Vec<Named> = named
            .iter()
            .filter(|n| spec.expr.vars().contains(&n.name.as_str()))
            .cloned()
            .collect();
        let other = if i == k - 1 { &default } else { &shape };
        println!(
            "\n== branch {} of {k}: {} ? value {} : {}",
            i + 1,
            spec.text,
            crate::ShapeFmt(v),
            if i == k - 1 {
                "the default"
            } else {
                "the output (in place)"
            }
        );
        let text = crate::explain::explain_cond(
            cfg,
            dtype,
            &spec.text,
            &used,
            v,
            other,
            mode,
            !a.no_measure,
        )?;
        print!("{text}");
    }
    Ok(())
}

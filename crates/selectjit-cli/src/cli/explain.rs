//! `selectjit explain`.

use selectjit::{DType, Error, Result};

use crate::npy::read_npy;
use crate::pred::{Named, split_named};

use super::{CodegenArgs, Mode};

#[derive(clap::Args)]
pub struct Args {
    /// Element type (f32, bf16, i64, complex64, ...).
    #[arg(long)]
    dtype: String,
    /// Cond shape, comma separated ('' for a scalar).
    #[arg(
        long,
        allow_hyphen_values = true,
        required_unless_present = "cond_expr",
        conflicts_with = "cond_expr"
    )]
    cond: Option<String>,
    /// A predicate condition instead of a mask (`x > 0`, `mask == 0`, `isnan(x)`,
    /// `!(a < b)`, ...) over arrays given with --input or --var, or `then` / `else` (of --dtype
    /// and the --then / --else shapes); a number takes the dtype of the other side.
    #[arg(long, allow_hyphen_values = true)]
    cond_expr: Option<String>,
    /// An array the condition names: NAME=FILE.npy (its dtype and shape; repeatable).
    #[arg(long = "input", value_name = "NAME=FILE.npy", requires = "cond_expr")]
    inputs: Vec<String>,
    /// An array the condition names by dtype and shape: NAME=DTYPE:SHAPE, e.g. `x=f32:8,1024`
    /// or `zero=f32:` for a scalar (repeatable).
    #[arg(long = "var", value_name = "NAME=DTYPE:SHAPE", requires = "cond_expr")]
    vars: Vec<String>,
    /// Then shape.
    #[arg(long = "then", allow_hyphen_values = true)]
    then: String,
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
    if let Some(expr) = &a.cond_expr {
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
        let text = crate::explain::explain_cond(
            &cfg,
            dtype,
            expr,
            &named,
            &parse_shape(&a.then)?,
            &parse_shape(&a.else_)?,
            mode,
            !a.no_measure,
        )?;
        print!("{text}");
        return Ok(());
    }
    let cond = a.cond.as_deref().unwrap_or_default();
    let text = crate::explain::explain(
        &cfg,
        dtype,
        &parse_shape(cond)?,
        &parse_shape(&a.then)?,
        &parse_shape(&a.else_)?,
        mode,
        !a.no_measure,
    )?;
    print!("{text}");
    Ok(())
}

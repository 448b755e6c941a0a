//! `selectjit explain`.

use selectjit::{DType, Error, Result};

use super::{CodegenArgs, Mode};

#[derive(clap::Args)]
pub struct Args {
    /// Element type (f32, bf16, i64, complex64, ...).
    #[arg(long)]
    dtype: String,
    /// Cond shape, comma separated ('' for a scalar).
    #[arg(long, allow_hyphen_values = true)]
    cond: String,
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
    let text = crate::explain::explain(
        &cfg,
        dtype,
        &parse_shape(&a.cond)?,
        &parse_shape(&a.then)?,
        &parse_shape(&a.else_)?,
        a.broadcast.with_axis(a.axis),
        !a.no_measure,
    )?;
    print!("{text}");
    Ok(())
}

//! `selectjit run`: select over `.npy` files.

use std::path::{Path, PathBuf};

use crate::npy::{NpyArray, read_npy, write_npy};
use crate::pred::{CondSpec, Named, split_named};
use selectjit::{DType, Error, Result, TensorMut, output_shape};

use super::{BackendArg, CodegenArgs, Mode};

#[derive(clap::Args)]
pub struct Args {
    /// Condition: a bool .npy array (any non-zero byte is true).
    #[arg(
        long,
        required_unless_present = "cond_expr",
        conflicts_with = "cond_expr"
    )]
    cond: Option<PathBuf>,
    /// Condition computed per element instead of a mask file: a comparison (`x > 0`,
    /// `mask == 0`, `a < b`; > >= < <= == !=), `isnan(x)` / `isinf(x)` / `isfinite(x)`, or a
    /// negation (`!(a < b)`, `logical_not(...)`). Names are --input arrays, or `then` / `else`
    /// for those arrays; a number takes the dtype of the other side of its comparison.
    #[arg(long, allow_hyphen_values = true)]
    cond_expr: Option<String>,
    /// An array the condition names: NAME=FILE.npy (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE.npy", requires = "cond_expr")]
    inputs: Vec<String>,
    /// Values where cond is true: a .npy file, or the NAME of an --input.
    #[arg(long = "then")]
    then: PathBuf,
    /// Values where cond is false (same dtype as --then): a .npy file, or the NAME of an
    /// --input.
    #[arg(long = "else")]
    else_: PathBuf,
    /// Output .npy file (written atomically; left alone on error).
    #[arg(short = 'o', long = "out")]
    out: PathBuf,
    /// Broadcast mode.
    #[arg(long, value_enum, default_value = "numpy")]
    broadcast: Mode,
    /// Axis for the pdpd mode (-1: right-aligned).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    axis: i64,
    /// Implementation.
    #[arg(long, value_enum, default_value = "jit")]
    backend: BackendArg,
    #[command(flatten)]
    codegen: CodegenArgs,
}

fn named(name: &str, a: NpyArray) -> Named {
    Named {
        name: name.to_string(),
        dtype: a.dtype,
        shape: a.shape,
        strides: a.strides,
        data: a.data,
    }
}

/// A value argument: an --input's array by name, else a file.
fn value(arg: &Path, role: &str, inputs: &[Named]) -> Result<Named> {
    match inputs
        .iter()
        .find(|n| Some(n.name.as_str()) == arg.to_str())
    {
        Some(n) => Ok(Named {
            name: role.to_string(),
            ..n.clone()
        }),
        None => Ok(named(role, read_npy(arg)?)),
    }
}

pub fn run(a: Args) -> Result<()> {
    let engine = a.codegen.engine(a.backend.into())?;
    let mut inputs: Vec<Named> = Vec::new();
    for s in &a.inputs {
        let (name, file) = split_named("--input", s)?;
        if matches!(name, "then" | "else") {
            return Err(Error::Invalid(format!(
                "--input '{s}': '{name}' names the --{name} array"
            )));
        }
        if inputs.iter().any(|n| n.name == name) {
            return Err(Error::Invalid(format!("--input {name} is given twice")));
        }
        inputs.push(named(name, read_npy(Path::new(file))?));
    }
    let then = value(&a.then, "then", &inputs)?;
    let else_ = value(&a.else_, "else", &inputs)?;
    if then.dtype != else_.dtype {
        return Err(Error::DType(format!(
            "then is {} but else is {}",
            then.dtype, else_.dtype
        )));
    }
    let mode = a.broadcast.with_axis(a.axis);
    match (&a.cond, &a.cond_expr) {
        (Some(path), _) => {
            let cond = read_npy(path)?;
            if cond.dtype != DType::Bool {
                return Err(Error::DType(format!(
                    "cond must be a bool array, {} is {}",
                    path.display(),
                    cond.dtype
                )));
            }
            let shape = output_shape(mode, &cond.shape, &then.shape, &else_.shape)?;
            let mut out = alloc(&shape, then.dtype)?;
            engine.select_bytes(
                then.dtype,
                cond.view(),
                then.view(),
                else_.view(),
                TensorMut::new(&mut out, &shape),
                mode,
            )?;
            write_npy(&a.out, then.dtype, &shape, &out)
        }
        (None, Some(text)) => {
            let mut arrays: Vec<&Named> = inputs.iter().collect();
            arrays.extend([&then, &else_]);
            let must: Vec<&str> = inputs.iter().map(|n| n.name.as_str()).collect();
            let spec = CondSpec::new(text, arrays, &must)?;
            let shape = output_shape(mode, &spec.shape, &then.shape, &else_.shape)?;
            let mut out = alloc(&shape, then.dtype)?;
            engine.select_bytes(
                then.dtype,
                spec.cond()?,
                then.view(),
                else_.view(),
                TensorMut::new(&mut out, &shape),
                mode,
            )?;
            write_npy(&a.out, then.dtype, &shape, &out)
        }
        (None, None) => Err(Error::Invalid(
            "give --cond FILE.npy or --cond-expr EXPR".into(),
        )),
    }
}

fn alloc(shape: &[usize], dtype: DType) -> Result<Vec<u8>> {
    let n: usize = shape.iter().product();
    let bytes = n
        .checked_mul(dtype.width())
        .ok_or_else(|| Error::Invalid("output too large".into()))?;
    Ok(vec![0u8; bytes])
}

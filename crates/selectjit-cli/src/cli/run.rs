//! `selectjit run`: select over `.npy` files.

use std::path::PathBuf;

use crate::npy::{read_npy, write_npy};
use selectjit::{DType, Error, Result, TensorMut, output_shape};

use super::{BackendArg, CodegenArgs, Mode};

#[derive(clap::Args)]
pub struct Args {
    /// Condition: a bool .npy array (any non-zero byte is true).
    #[arg(long)]
    cond: PathBuf,
    /// Values where cond is true.
    #[arg(long = "then")]
    then: PathBuf,
    /// Values where cond is false (same dtype as --then).
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

pub fn run(a: Args) -> Result<()> {
    let engine = a.codegen.engine(a.backend.into())?;
    let cond = read_npy(&a.cond)?;
    let then = read_npy(&a.then)?;
    let else_ = read_npy(&a.else_)?;
    if cond.dtype != DType::Bool {
        return Err(Error::DType(format!(
            "cond must be a bool array, {} is {}",
            a.cond.display(),
            cond.dtype
        )));
    }
    if then.dtype != else_.dtype {
        return Err(Error::DType(format!(
            "then is {} but else is {}",
            then.dtype, else_.dtype
        )));
    }
    let mode = a.broadcast.with_axis(a.axis);
    let shape = output_shape(mode, &cond.shape, &then.shape, &else_.shape)?;
    let n: usize = shape.iter().product();
    let bytes = n
        .checked_mul(then.dtype.width())
        .ok_or_else(|| Error::Invalid("output too large".into()))?;
    let mut out = vec![0u8; bytes];
    engine.select_dyn(
        then.dtype,
        cond.view(),
        then.view(),
        else_.view(),
        TensorMut::new(&mut out, &shape),
        mode,
    )?;
    write_npy(&a.out, then.dtype, &shape, &out)
}

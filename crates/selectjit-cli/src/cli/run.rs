//! `selectjit run`: select over `.npy` files.

use std::path::{Path, PathBuf};

use crate::npy::{NpyArray, read_npy, write_npy};
use crate::pred::{CondSpec, Named, split_named};
use selectjit::{DType, Error, Result, TensorMut, output_shape};

use super::{BackendArg, CodegenArgs, Mode};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("computed").args(["cond_expr", "when"]).multiple(false)))]
pub struct Args {
    /// Condition: a bool .npy array (any non-zero byte is true).
    #[arg(
        long,
        required_unless_present_any = ["cond_expr", "when"],
        conflicts_with_all = ["cond_expr", "when"]
    )]
    cond: Option<PathBuf>,
    /// Condition computed per element instead of a mask file: a comparison (`x > 0`,
    /// `mask == 0`, `a < b`; > >= < <= == !=), `isnan(x)` / `isinf(x)` / `isfinite(x)`, or a
    /// negation (`!(a < b)`, `logical_not(...)`). Names are --input arrays, or `then` / `else`
    /// for those arrays; a number takes the dtype of the other side of its comparison.
    #[arg(long, allow_hyphen_values = true, conflicts_with = "when")]
    cond_expr: Option<String>,
    /// An array the conditions or values name: NAME=FILE.npy (repeatable; with --cond-expr or
    /// --when).
    #[arg(long = "input", value_name = "NAME=FILE.npy", requires = "computed")]
    inputs: Vec<String>,
    /// Values where cond is true: a .npy file, or the NAME of an --input.
    #[arg(
        long = "then",
        required_unless_present = "when",
        conflicts_with = "when"
    )]
    then: Option<PathBuf>,
    /// An n-way select instead (numpy.select, CASE WHEN): the condition of one branch, in
    /// order (repeatable, one --value each): a bool .npy file (FILE.npy), or a condition as
    /// for --cond-expr. The first true condition wins; --else is the value where none is.
    #[arg(long = "when", allow_hyphen_values = true)]
    when: Vec<String>,
    /// The value of each --when branch, in order: a .npy file, or the NAME of an --input.
    #[arg(long = "value", requires = "when")]
    values: Vec<PathBuf>,
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
    if !a.when.is_empty() {
        return run_nway(&a, &engine, &inputs);
    }
    let then_path = a
        .then
        .as_deref()
        .ok_or_else(|| Error::Invalid("give --then".into()))?;
    let then = value(then_path, "then", &inputs)?;
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

/// `selectjit run --when C1 --value V1 ... --else D`: the n-way select.
fn run_nway(a: &Args, engine: &selectjit::Engine, inputs: &[Named]) -> Result<()> {
    if a.when.len() != a.values.len() {
        return Err(Error::Invalid(format!(
            "{} --when but {} --value: give one value per condition",
            a.when.len(),
            a.values.len()
        )));
    }
    let mode = a.broadcast.with_axis(a.axis);
    let values: Vec<Named> = a
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| value(v, &format!("value {}", i + 1), inputs))
        .collect::<Result<_>>()?;
    let default = value(&a.else_, "else", inputs)?;
    let dtype = default.dtype;
    if let Some(v) = values.iter().find(|v| v.dtype != dtype) {
        return Err(Error::DType(format!(
            "{} is {} but else is {dtype}",
            v.name, v.dtype
        )));
    }
    // Each condition: a mask file, or an expression over the inputs.
    enum When<'a> {
        Mask(NpyArray),
        Expr(CondSpec<'a>),
    }
    let arrays: Vec<&Named> = inputs.iter().collect();
    let mut whens = Vec::with_capacity(a.when.len());
    for w in &a.when {
        let path = Path::new(w);
        whens.push(if w.ends_with(".npy") && path.exists() {
            let m = read_npy(path)?;
            if m.dtype != DType::Bool {
                return Err(Error::DType(format!(
                    "--when {w} must be a bool array, not {}",
                    m.dtype
                )));
            }
            When::Mask(m)
        } else {
            When::Expr(CondSpec::new(w, arrays.clone(), &[])?)
        });
    }
    let mut shapes: Vec<&[usize]> = whens
        .iter()
        .map(|w| match w {
            When::Mask(m) => m.shape.as_slice(),
            When::Expr(s) => s.shape.as_slice(),
        })
        .collect();
    shapes.extend(values.iter().map(|v| v.shape.as_slice()));
    shapes.push(&default.shape);
    let mut shape: Vec<usize> = Vec::new();
    for s in shapes {
        shape = output_shape(selectjit::Broadcast::Numpy, &shape, s, &[])?.to_vec();
    }
    let conds = whens
        .iter()
        .map(|w| match w {
            When::Mask(m) => Ok(selectjit::Cond::mask(m.view())),
            When::Expr(s) => s.cond(),
        })
        .collect::<Result<Vec<_>>>()?;
    let choices: Vec<selectjit::Choice<'_, u8>> = values.iter().map(|v| v.view().into()).collect();
    let mut out = alloc(&shape, dtype)?;
    engine.select_n_bytes(
        dtype,
        &conds,
        &choices,
        default.view().into(),
        TensorMut::new(&mut out, &shape),
        mode,
    )?;
    write_npy(&a.out, dtype, &shape, &out)
}

fn alloc(shape: &[usize], dtype: DType) -> Result<Vec<u8>> {
    let n: usize = shape.iter().product();
    let bytes = n
        .checked_mul(dtype.width())
        .ok_or_else(|| Error::Invalid("output too large".into()))?;
    Ok(vec![0u8; bytes])
}

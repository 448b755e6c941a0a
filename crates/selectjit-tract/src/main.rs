//! `selectjit-onnx`: runs an ONNX model with tract, its `Where` nodes on selectjit.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::Parser;
use selectjit::{Engine, EngineConfig};
use selectjit_tract::npy;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::Factoid;

/// Runs an ONNX model with tract, its `Where` nodes (tract's `Iff`) replaced by selectjit
/// kernels, and writes every output as DIR/NAME.npy (NAME: the output's name).
///
/// Prints `replaced: N (F fused)` on a line of its own, then `chained: K (N nodes)` (K chains of
/// `Where` nodes merged into one n-way select each, N nodes in them), then one line per `Where`
/// node (replaced, or left to tract and why) and per chain. With `--bench N`, also `median_us: T`, the median time of N runs of
/// the whole model, and `node_median_us: T NAME OP` for each node of the plan (N more runs,
/// each node timed on its own).
#[derive(Parser, Debug)]
#[command(name = "selectjit-onnx", version)]
struct Args {
    /// The ONNX model.
    model: PathBuf,
    /// A model input: its name and a .npy file holding it (repeat for each input).
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// The folder the outputs are written to (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Run the model with tract alone: no selectjit transform.
    #[arg(long)]
    no_selectjit: bool,
    /// Time N runs of the whole model (median printed as `median_us`) and N runs timing each
    /// node. Inputs are copied before each timed run, outside the timing, so that the model owns
    /// them as it owns the tensors its nodes compute (a select may then write into one).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    bench: Option<u32>,
    /// With --bench: untimed runs first. selectjit's default engine times the variants of each
    /// new kernel over its first calls (about 20) before it keeps the fastest.
    #[arg(long, value_name = "W", default_value_t = 25, requires = "bench")]
    warmup: u32,
    /// With --bench: hand every run the same input tensors, still held by the caller, so that no
    /// node may write into them (a select then allocates its output, as tract's Iff always does).
    #[arg(long, requires = "bench")]
    shared_inputs: bool,
    /// Threads a large select may be split across (selectjit's engine; tract itself runs on
    /// one thread).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("selectjit-onnx: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `NAME=FILE` pairs, read.
fn read_inputs(specs: &[String]) -> TractResult<Vec<(String, Tensor)>> {
    let mut seen = HashSet::new();
    let mut out = vec![];
    for spec in specs {
        let Some((name, file)) = spec.split_once('=') else {
            bail!("--input {spec}: expected NAME=FILE.npy");
        };
        ensure!(!name.is_empty(), "--input {spec}: empty input name");
        ensure!(seen.insert(name.to_string()), "input {name} given twice");
        let t = npy::read_npy(Path::new(file)).with_context(|| format!("input {name}"))?;
        out.push((name.to_string(), t));
    }
    Ok(out)
}

/// The model's inputs in its order, from the files given by name.
fn order_inputs(
    model: &mut InferenceModel,
    mut given: Vec<(String, Tensor)>,
) -> TractResult<Vec<Tensor>> {
    let names: Vec<String> = model
        .input_outlets()?
        .iter()
        .map(|o| model.node(o.node).name.clone())
        .collect();
    for (name, _) in &given {
        ensure!(
            names.contains(name),
            "the model has no input named {name} (its inputs: {})",
            names.join(", ")
        );
    }
    let mut ordered = vec![];
    for (ix, name) in names.iter().enumerate() {
        let pos = given.iter().position(|(n, _)| n == name).with_context(|| {
            format!("missing input {name}: give it with --input {name}=FILE.npy")
        })?;
        let (_, t) = given.swap_remove(pos);
        // An input the model leaves (partly) undetermined takes the file's type and shape.
        let fact = model.input_fact(ix)?;
        let open = fact.datum_type.concretize().is_none()
            || fact.shape.is_open()
            || fact.shape.dims().any(|d| d.concretize().is_none());
        if open {
            model.set_input_fact(ix, InferenceFact::dt_shape_from_tensor(&t))?;
        }
        ordered.push(t);
    }
    Ok(ordered)
}

/// Checks the inputs against the typed model's facts, with messages naming the input.
fn check_inputs(model: &TypedModel, inputs: &[Tensor]) -> TractResult<()> {
    let mut bound: HashMap<String, (i64, String)> = HashMap::new();
    for (ix, t) in inputs.iter().enumerate() {
        let name = &model.node(model.input_outlets()?[ix].node).name;
        let fact = model.input_fact(ix)?;
        ensure!(
            fact.datum_type == t.datum_type(),
            "input {name}: the model expects {:?}, the file holds {:?}",
            fact.datum_type,
            t.datum_type()
        );
        ensure!(
            fact.rank() == t.rank(),
            "input {name}: the model expects shape {:?}, the file holds {:?}",
            fact.shape,
            t.shape()
        );
        for (d, &v) in fact.shape.iter().zip(t.shape()) {
            if let Ok(c) = d.to_i64() {
                ensure!(
                    c == v as i64,
                    "input {name}: the model expects shape {:?}, the file holds {:?}",
                    fact.shape,
                    t.shape()
                );
            } else if let TDim::Sym(s) = d {
                let prev = bound
                    .entry(format!("{s}"))
                    .or_insert((v as i64, name.clone()));
                ensure!(
                    prev.0 == v as i64,
                    "input {name}: dimension {s} is {v}, but input {} makes it {}",
                    prev.1,
                    prev.0
                );
            }
        }
    }
    Ok(())
}

/// The file name an output is written to: its name with every character other than ASCII
/// letters, digits, `.`, `_` and `-` replaced by `_`.
fn file_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        format!("output{s}")
    } else {
        s
    }
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    let n = v.len();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    if n % 2 == 1 {
        us(v[n / 2])
    } else {
        (us(v[n / 2 - 1]) + us(v[n / 2])) / 2.0
    }
}

/// Fresh copies of the inputs (outside any timing), so that the plan owns them.
fn fresh(inputs: &[Tensor]) -> TVec<TValue> {
    inputs
        .iter()
        .map(|t| t.deep_clone().into_tvalue())
        .collect()
}

/// `--bench`: `warmup` untimed runs, N runs of the whole model, then N runs timing each node. Inputs: fresh copies
/// for each run, or (`shared`) the same tensors, which the caller keeps.
fn bench(
    plan: &Arc<TypedSimplePlan>,
    inputs: &[Tensor],
    (n, warmup): (u32, u32),
    shared: bool,
) -> TractResult<()> {
    let mut state = plan.spawn()?;
    let held = fresh(inputs);
    let inputs_for_run = || if shared { held.clone() } else { fresh(inputs) };
    for _ in 0..warmup {
        state.run(inputs_for_run())?;
    }
    let mut whole = vec![];
    for _ in 0..n {
        let inp = inputs_for_run();
        let t0 = Instant::now();
        let out = state.run(inp)?;
        whole.push(t0.elapsed());
        drop(out);
    }
    println!("median_us: {:.1}", median(whole));
    let model = plan.model();
    let mut per_node: HashMap<usize, Vec<Duration>> = HashMap::new();
    for _ in 0..n {
        let inp = inputs_for_run();
        let out = state.run_plan_with_eval(inp, |ctx, op_state, node, node_inputs| {
            let t0 = Instant::now();
            let r = tract_onnx::tract_core::plan::eval(ctx, op_state, node, node_inputs);
            per_node.entry(node.id).or_default().push(t0.elapsed());
            r
        })?;
        drop(out);
    }
    let mut rows: Vec<(f64, usize)> = per_node
        .into_iter()
        .map(|(id, times)| (median(times), id))
        .collect();
    rows.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (us, id) in rows {
        let node = model.node(id);
        println!("node_median_us: {us:.1} {} {}", node.name, node.op.name());
    }
    Ok(())
}

fn run(args: &Args) -> TractResult<()> {
    let given = read_inputs(&args.inputs)?;
    let mut model = tract_onnx::onnx()
        .model_for_path(&args.model)
        .with_context(|| format!("loading {}", args.model.display()))?;
    let output_names: Vec<String> = model
        .output_outlets()?
        .iter()
        .map(|o| {
            model
                .outlet_label(*o)
                .map(str::to_string)
                .unwrap_or_else(|| model.node(o.node).name.clone())
        })
        .collect();
    let inputs = order_inputs(&mut model, given)?;
    let mut model = model
        .into_typed()
        .and_then(|m| m.into_decluttered())
        .with_context(|| format!("analysing {}", args.model.display()))?;
    check_inputs(&model, &inputs)?;

    if args.no_selectjit {
        println!("replaced: 0 (0 fused)");
        println!("chained: 0 (0 nodes)");
        println!("  (--no-selectjit: tract alone)");
    } else {
        let config = EngineConfig::from_env()?.threads(args.threads as usize);
        let engine = Arc::new(Engine::with_config(config)?);
        let report = selectjit_tract::accelerate_with(&mut model, engine)?;
        print!("{report}");
    }
    let plan = model
        .into_optimized()
        .and_then(|m| m.into_runnable())
        .with_context(|| format!("optimising {}", args.model.display()))?;

    let outputs = plan.run(fresh(&inputs))?;
    // Every file is encoded before any is written.
    let mut files = vec![];
    let mut taken = HashSet::new();
    for (name, value) in output_names.iter().zip(outputs.iter()) {
        let file = format!("{}.npy", file_name(name));
        ensure!(
            taken.insert(file.clone()),
            "outputs {name} and another one map to the same file {file}"
        );
        let bytes = npy::npy_bytes(value).with_context(|| format!("output {name}"))?;
        files.push((name, file, bytes));
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    for (name, file, bytes) in files {
        let path = args.out.join(&file);
        npy::write_bytes(&path, &bytes)?;
        println!("output {name}: {}", path.display());
    }
    if let Some(n) = args.bench {
        bench(&plan, &inputs, (n, args.warmup), args.shared_inputs)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_stay_in_the_folder() {
        assert_eq!(file_name("logits"), "logits");
        assert_eq!(file_name("/attn/Where_output_0"), "_attn_Where_output_0");
        assert_eq!(file_name("../x"), ".._x");
        assert_eq!(file_name(".."), "output..");
        assert_eq!(file_name(""), "output");
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        let us = Duration::from_micros;
        assert_eq!(median(vec![us(3), us(1), us(2)]), 2.0);
        assert_eq!(median(vec![us(4), us(1), us(2), us(3)]), 2.5);
    }
}

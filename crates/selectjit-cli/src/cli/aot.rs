//! `selectjit aot`: export kernels ahead of time for a target, as an object file and a C header.

use std::path::{Path, PathBuf};

use selectjit::{DType, Error, Result};
use selectjit_aot::{DEFAULT_SYMBOL, ExportOptions, check_object, export, parse_shapes};

#[derive(clap::Args)]
pub struct Args {
    /// Target triple (x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu,
    /// s390x-unknown-linux-gnu, riscv64gc-unknown-linux-gnu, ...) or `host`.
    #[arg(long, required_unless_present = "check")]
    target: Option<String>,
    /// The calls to export kernels for (JSON; see the README).
    #[arg(long, required_unless_present = "check")]
    shapes: Option<PathBuf>,
    /// The object file to write.
    #[arg(short = 'o', long = "out", required_unless_present = "check")]
    out: Option<PathBuf>,
    /// Instead of exporting: read an exported object back and check its table (a truncated or
    /// corrupted object is an error), and say what it holds.
    #[arg(long, value_name = "OBJECT", conflicts_with_all = ["target", "shapes", "out", "header"])]
    check: Option<PathBuf>,
    /// Also write a C header declaring the table.
    #[arg(long)]
    header: Option<PathBuf>,
    /// Symbol of the table (a C identifier).
    #[arg(long, default_value = DEFAULT_SYMBOL)]
    symbol: String,
    /// Cranelift ISA settings, comma-separated (e.g. `has_avx`, `sse42`, `has_v,zvl256b`);
    /// default: the target's (x86-64 sse41, riscv64 has_v,zvl128b, none otherwise).
    #[arg(long, value_delimiter = ',')]
    isa_flags: Option<Vec<String>>,
    /// Also export the shape-generic kernel of every pattern up to this rank, for the widths
    /// of --dtypes (54 * 8^(rank-1) kernels per width and rank).
    #[arg(long, value_name = "RANK")]
    generic_up_to_rank: Option<usize>,
    /// Dtypes of cases that name none, comma-separated (default f32; `all` for every dtype).
    #[arg(long, value_delimiter = ',', default_value = "f32")]
    dtypes: Vec<String>,
}

fn features(f: &[String]) -> String {
    if f.is_empty() {
        "baseline".to_string()
    } else {
        f.join(" ")
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|e| Error::io(path.display().to_string(), e))
}

pub fn run(a: Args) -> Result<()> {
    if let Some(obj) = &a.check {
        let bytes = std::fs::read(obj).map_err(|e| Error::io(obj.display().to_string(), e))?;
        let s = check_object(&bytes, &a.symbol)?;
        println!(
            "{}: table `{}` for {} ({}): {} exact + {} shape-generic + {} n-way kernels, {} bytes of code; ok",
            obj.display(),
            a.symbol,
            s.triple,
            features(&s.features),
            s.exact,
            s.generic,
            s.nway,
            s.code_bytes
        );
        return Ok(());
    }
    let (Some(target), Some(shapes), Some(out)) = (&a.target, &a.shapes, &a.out) else {
        return Err(Error::Invalid("aot needs --target, --shapes and -o".into()));
    };
    let text =
        std::fs::read_to_string(shapes).map_err(|e| Error::io(shapes.display().to_string(), e))?;
    let mut defaults = Vec::new();
    for d in &a.dtypes {
        if d == "all" {
            defaults.extend(DType::ALL);
        } else {
            defaults.push(d.parse()?);
        }
    }
    let mut file = parse_shapes(&text, &defaults)?;
    if let Some(r) = a.generic_up_to_rank {
        let mut widths: Vec<usize> = defaults.iter().map(|d| d.width()).collect();
        widths.dedup();
        file.set.add_patterns_up_to(r, &widths);
    }
    let opts = ExportOptions {
        target: target.clone(),
        isa_flags: a.isa_flags.clone(),
        symbol: a.symbol.clone(),
        verify: cfg!(debug_assertions),
    };
    let ex = export(&opts, &file.set)?;
    write(out, &ex.object)?;
    if let Some(h) = &a.header {
        write(h, ex.header.as_bytes())?;
    }
    println!(
        "{}: {} exact + {} shape-generic + {} n-way kernels for {} ({}), {} bytes of code, table `{}`",
        out.display(),
        ex.exact,
        ex.generic,
        ex.nway,
        ex.triple,
        features(&ex.features),
        ex.code_bytes,
        a.symbol
    );
    println!(
        "from {} cases of {} ({} skipped as expected errors, {} with an empty output){}",
        file.cases,
        shapes.display(),
        file.skipped,
        file.empty,
        a.header
            .as_ref()
            .map(|h| format!("; header {}", h.display()))
            .unwrap_or_default()
    );
    Ok(())
}

//! `selectjit-sql`: runs a SQL query on DataFusion, with selectjit's CASE rule (or without),
//! and says what the rule replaced.
//!
//! ```text
//! selectjit-sql --table NAME=FILE.parquet|.csv ... (--query SQL | --file Q.sql)
//!               [--no-selectjit] [--bench N] [--partitions P] [--out FILE.csv]
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser;
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::*;
use selectjit_datafusion::SelectjitCaseRule;

#[derive(Parser, Debug)]
#[command(
    name = "selectjit-sql",
    about = "Run SQL on DataFusion with selectjit's CASE WHEN rule"
)]
struct Args {
    /// A table: NAME=FILE.parquet or NAME=FILE.csv (a header row). Repeat for more.
    #[arg(long = "table", value_name = "NAME=FILE")]
    tables: Vec<String>,
    /// The query.
    #[arg(long, conflicts_with = "file")]
    query: Option<String>,
    /// A file holding the query.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Run on DataFusion alone (no rule).
    #[arg(long)]
    no_selectjit: bool,
    /// Load the tables into memory, then run the query N times and print the median.
    #[arg(long, value_name = "N")]
    bench: Option<usize>,
    /// DataFusion's target_partitions (default: DataFusion's, the number of cores).
    #[arg(long, value_name = "P")]
    partitions: Option<usize>,
    /// Write the result as CSV (DataFusion's writer) instead of printing it.
    #[arg(long, value_name = "FILE.csv")]
    out: Option<PathBuf>,
}

#[tokio::main]
async fn main() {
    if let Err(e) = run(Args::parse()).await {
        eprintln!("selectjit-sql: {e:#}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<()> {
    let sql = match (&args.query, &args.file) {
        (Some(q), None) => q.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        }
        _ => bail!("give the query with --query SQL or --file Q.sql"),
    };
    let rule = Arc::new(SelectjitCaseRule::new());
    let mut config = SessionConfig::new();
    if let Some(p) = args.partitions {
        if p == 0 {
            bail!("--partitions must be at least 1");
        }
        config = config.with_target_partitions(p);
    }
    let mut builder = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features();
    if !args.no_selectjit {
        builder = selectjit_datafusion::with_rule(builder, rule.clone());
    }
    let ctx = SessionContext::new_with_state(builder.build());
    for t in &args.tables {
        let Some((name, file)) = t.split_once('=') else {
            bail!("--table {t}: expected NAME=FILE");
        };
        if file.ends_with(".parquet") {
            ctx.register_parquet(name, file, ParquetReadOptions::default())
                .await
                .with_context(|| format!("table {name} from {file}"))?;
        } else if file.ends_with(".csv") {
            ctx.register_csv(name, file, CsvReadOptions::new())
                .await
                .with_context(|| format!("table {name} from {file}"))?;
        } else {
            bail!("--table {t}: the file must end in .parquet or .csv");
        }
        if args.bench.is_some() {
            // In memory first: the benchmark times the query, not the file reader.
            let df = ctx.table(name).await?;
            let schema = Arc::new(df.schema().as_arrow().clone());
            let partitions = df.collect_partitioned().await?;
            ctx.deregister_table(name)?;
            ctx.register_table(name, Arc::new(MemTable::try_new(schema, partitions)?))?;
        }
    }
    let df = ctx.sql(&sql).await.context("planning the query")?;
    // Plan once to report what the rule did.
    let plan = df.clone().create_physical_plan().await?;
    drop(plan);
    let report = rule.take_report();
    if !args.no_selectjit {
        println!("replaced: {}", report.replaced);
        for (case, why) in &report.left_alone {
            println!("left alone: {case}: {why}");
        }
    }
    if let Some(n) = args.bench {
        if n == 0 {
            bail!("--bench must be at least 1");
        }
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let batches = df.clone().collect().await?;
            std::hint::black_box(&batches);
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
        times.sort_by(f64::total_cmp);
        println!("median_us: {:.1}", times[n / 2]);
        return Ok(());
    }
    match &args.out {
        Some(path) => {
            let opts = DataFrameWriteOptions::new().with_single_file_output(true);
            df.write_csv(&path.to_string_lossy(), opts, None)
                .await
                .with_context(|| format!("writing {}", path.display()))?;
        }
        None => df.show().await?,
    }
    Ok(())
}

//! The CASE benchmark: a CASE-heavy projection and TPC-H Q12 / Q14-style aggregates over a
//! generated lineitem-like table in memory (8192-row batches), each query with and without
//! selectjit's rule, at `target_partitions = 1` and at DataFusion's default, in one run. Every
//! result is compared with and without the rule before anything is timed.
//!
//! ```text
//! selectjit-sql-bench [--rows N] [--reps R] [--json FILE] [--parquet FILE] [--only TEXT]
//! ```
//! `--parquet FILE` also writes the table, for another engine to run the same queries on
//! (`benches/sql_duckdb.py`).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Parser;
use datafusion::arrow::array::{ArrayRef, Float64Array, Int32Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::*;
use selectjit_datafusion::SelectjitCaseRule;

#[derive(Parser, Debug)]
#[command(
    name = "selectjit-sql-bench",
    about = "CASE WHEN on DataFusion, with and without selectjit"
)]
struct Args {
    /// Rows of the table.
    #[arg(long, default_value_t = 10_000_000)]
    rows: usize,
    /// Runs of each query (the median is reported).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Write the figures as JSON.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Write the table as Parquet too.
    #[arg(long)]
    parquet: Option<std::path::PathBuf>,
    /// Run only the queries whose name contains this text.
    #[arg(long)]
    only: Option<String>,
}

/// The queries: name and SQL.
pub const QUERIES: [(&str, &str); 3] = [
    (
        "case_projection",
        "SELECT CASE WHEN qty < 10 THEN a WHEN qty < 50 THEN b ELSE c END AS r FROM lineitem",
    ),
    (
        "q12_like",
        "SELECT shipmode, \
         SUM(CASE WHEN priority = '1-URGENT' OR priority = '2-HIGH' THEN 1 ELSE 0 END) AS high, \
         SUM(CASE WHEN priority <> '1-URGENT' AND priority <> '2-HIGH' THEN 1 ELSE 0 END) AS low \
         FROM lineitem GROUP BY shipmode ORDER BY shipmode",
    ),
    (
        "q14_like",
        "SELECT 100.0 * SUM(CASE WHEN ptype LIKE 'PROMO%' THEN price * (1 - discount) ELSE 0 END) \
         / SUM(price * (1 - discount)) AS promo_revenue FROM lineitem",
    ),
];

#[path = "../rng.rs"]
mod rng;
use rng::Rng;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("qty", DataType::Int32, false),
        Field::new("a", DataType::Float64, false),
        Field::new("b", DataType::Float64, false),
        Field::new("c", DataType::Float64, false),
        Field::new("price", DataType::Float64, false),
        Field::new("discount", DataType::Float64, false),
        Field::new("priority", DataType::Utf8, false),
        Field::new("shipmode", DataType::Utf8, false),
        Field::new("ptype", DataType::Utf8, false),
    ]))
}

fn table(rows: usize) -> Result<Vec<RecordBatch>> {
    let mut rng = Rng(12);
    let mut out = Vec::new();
    let prio = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"];
    let mode = ["MAIL", "SHIP", "AIR", "TRUCK", "RAIL", "FOB", "REG AIR"];
    let ptype = [
        "PROMO BRUSHED",
        "STANDARD PLATED",
        "PROMO ANODIZED",
        "ECONOMY",
        "LARGE",
    ];
    let mut left = rows;
    while left > 0 {
        let n = left.min(8192);
        left -= n;
        let qty: Int32Array = (0..n).map(|_| 1 + rng.below(50) as i32).collect();
        let mut f =
            |k: u64, d: f64| -> Float64Array { (0..n).map(|_| rng.below(k) as f64 / d).collect() };
        let (a, b, c) = (f(100_000, 100.0), f(100_000, 100.0), f(100_000, 100.0));
        let (price, discount) = (f(10_000_000, 100.0), f(11, 100.0));
        let mut s = |xs: &[&str]| -> StringArray {
            (0..n)
                .map(|_| Some(xs[rng.below(xs.len() as u64) as usize]))
                .collect()
        };
        let cols: Vec<ArrayRef> = vec![
            Arc::new(qty),
            Arc::new(a),
            Arc::new(b),
            Arc::new(c),
            Arc::new(price),
            Arc::new(discount),
            Arc::new(s(&prio)),
            Arc::new(s(&mode)),
            Arc::new(s(&ptype)),
        ];
        out.push(RecordBatch::try_new(schema(), cols)?);
    }
    Ok(out)
}

fn context(
    batches: &[RecordBatch],
    rule: bool,
    partitions: Option<usize>,
) -> Result<SessionContext> {
    let mut config = SessionConfig::new();
    if let Some(p) = partitions {
        config = config.with_target_partitions(p);
    }
    let parts = config.target_partitions();
    let mut b = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features();
    if rule {
        b = selectjit_datafusion::with_rule(b, Arc::new(SelectjitCaseRule::new()));
    }
    let ctx = SessionContext::new_with_state(b.build());
    // The batches dealt round-robin to as many partitions as the session runs.
    let mut p: Vec<Vec<RecordBatch>> = vec![Vec::new(); parts.max(1)];
    for (i, b) in batches.iter().enumerate() {
        p[i % parts.max(1)].push(b.clone());
    }
    ctx.register_table("lineitem", Arc::new(MemTable::try_new(schema(), p)?))?;
    Ok(ctx)
}

async fn time(ctx: &SessionContext, sql: &str, reps: usize) -> Result<(f64, Vec<RecordBatch>)> {
    let df = ctx.sql(sql).await?;
    let first = df.clone().collect().await?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        std::hint::black_box(df.clone().collect().await?);
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    t.sort_by(f64::total_cmp);
    Ok((t[reps / 2], first))
}

/// The first column's f64 values as sorted bit patterns (NULL as u64::MAX).
fn sorted_bits(b: &RecordBatch) -> Result<Vec<u64>> {
    use datafusion::arrow::array::Array;
    let c = b
        .column(0)
        .as_any()
        .downcast_ref::<Float64Array>()
        .ok_or_else(|| anyhow::anyhow!("a f64 column"))?;
    let mut v: Vec<u64> = (0..c.len())
        .map(|i| {
            if c.is_null(i) {
                u64::MAX
            } else {
                c.value(i).to_bits()
            }
        })
        .collect();
    v.sort_unstable();
    Ok(v)
}

fn concat(b: &[RecordBatch]) -> Result<RecordBatch> {
    let s = b.first().map(|b| b.schema()).unwrap_or_else(schema);
    Ok(datafusion::arrow::compute::concat_batches(&s, b)?)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    if let Some(o) = &args.only
        && !QUERIES.iter().any(|(name, _)| name.contains(o.as_str()))
    {
        let names: Vec<&str> = QUERIES.iter().map(|(n, _)| *n).collect();
        bail!(
            "--only {o:?} matches no query (the queries: {})",
            names.join(", ")
        );
    }
    let batches = table(args.rows)?;
    if let Some(p) = &args.parquet {
        let ctx = context(&batches, false, Some(1))?;
        ctx.table("lineitem")
            .await?
            .write_parquet(
                &p.to_string_lossy(),
                datafusion::dataframe::DataFrameWriteOptions::new().with_single_file_output(true),
                None,
            )
            .await?;
    }
    println!(
        "{} rows in 8192-row batches, {} runs each, median ms",
        args.rows, args.reps
    );
    println!(
        "{:<16} {:>10} {:>12} {:>12} {:>8}",
        "query", "partitions", "datafusion", "+selectjit", "speedup"
    );
    let mut rows = Vec::new();
    for (name, sql) in QUERIES {
        if args
            .only
            .as_ref()
            .is_some_and(|o| !name.contains(o.as_str()))
        {
            continue;
        }
        for partitions in [Some(1), None] {
            let alone = context(&batches, false, partitions)?;
            let ours = context(&batches, true, partitions)?;
            let (ta, ra) = time(&alone, sql, args.reps).await?;
            let (to, ro) = time(&ours, sql, args.reps).await?;
            // The same result: every column's validity and values. One partition gives one
            // order; several give the rows in the order the partitions finish (the projection
            // is compared as sorted bit patterns) and float sums in another order (the row
            // count only).
            let (ra, ro) = (concat(&ra)?, concat(&ro)?);
            let same = if partitions == Some(1) {
                ra.num_rows() == ro.num_rows()
                    && ra
                        .columns()
                        .iter()
                        .zip(ro.columns())
                        .all(|(x, y)| x.to_data() == y.to_data())
            } else if name == "case_projection" {
                sorted_bits(&ra)? == sorted_bits(&ro)?
            } else {
                ra.num_rows() == ro.num_rows()
            };
            if !same {
                bail!("{name}: the results with and without selectjit differ");
            }
            let label = partitions.map_or("default".to_string(), |p| p.to_string());
            println!(
                "{:<16} {:>10} {:>12.2} {:>12.2} {:>7.2}x",
                name,
                label,
                ta,
                to,
                ta / to
            );
            rows.push(format!(
                "{{\"query\":\"{name}\",\"partitions\":\"{label}\",\"datafusion_ms\":{ta:.3},\"selectjit_ms\":{to:.3}}}"
            ));
        }
    }
    if let Some(j) = &args.json {
        std::fs::write(
            j,
            format!(
                "{{\"rows\":{},\"sql_cases\":[{}]}}\n",
                args.rows,
                rows.join(",")
            ),
        )?;
    }
    Ok(())
}

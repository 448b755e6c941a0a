//! The SQL files of `tests/sql/` (CASE queries: searched and simple, nested, in WHERE, in
//! aggregates as TPC-H Q12 / Q14 have them, over dates, decimals, timestamps, strings,
//! booleans, floats, without ELSE) over a generated table with NULLs in every column: the
//! results with the rule equal DataFusion's alone (every column's validity and its values at
//! valid slots, by bits), and the rule replaces exactly the CASEs each file says (`--
//! replaced: N`), leaving the others with a reason. With `SELECTJIT_SQL_DUMP=DIR` the table
//! (`t.parquet`), each query and its result (`NAME.parquet`) are written there for an
//! independent engine to check (`tests/duckdb_check.py`).

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array,
    Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::*;
use selectjit_datafusion::SelectjitCaseRule;

#[path = "../src/rng.rs"]
mod rng;
use rng::Rng;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("qty", DataType::Int32, true),
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Int64, true),
        Field::new("c", DataType::Int64, true),
        Field::new("price", DataType::Float64, true),
        Field::new("discount", DataType::Float64, true),
        Field::new("d", DataType::Date32, true),
        Field::new("dec", DataType::Decimal128(15, 2), true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("priority", DataType::Utf8, true),
        Field::new("shipmode", DataType::Utf8, true),
        Field::new("ptype", DataType::Utf8, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
    ]))
}

fn batch(rng: &mut Rng, first: i64, n: usize) -> RecordBatch {
    let ids: Vec<i64> = (0..n as i64).map(|i| first + i).collect();
    let qty: Int32Array = (0..n)
        .map(|_| {
            let v = rng.below(100) as i32;
            rng.some(8, v)
        })
        .collect();
    let int = |rng: &mut Rng| -> Int64Array {
        (0..n)
            .map(|_| {
                let v = rng.below(2001) as i64 - 1000;
                rng.some(7, v)
            })
            .collect()
    };
    let (a, b, c) = (int(rng), int(rng), int(rng));
    let price: Float64Array = (0..n)
        .map(|_| {
            let v = match rng.below(20) {
                0 => 0.0,
                1 => -0.0,
                _ => rng.below(10_000) as f64 / 100.0,
            };
            rng.some(9, v)
        })
        .collect();
    let discount: Float64Array = (0..n)
        .map(|_| {
            let v = rng.below(11) as f64 / 100.0;
            rng.some(11, v)
        })
        .collect();
    let d: Date32Array = (0..n)
        .map(|_| {
            let v = 18000 + rng.below(1000) as i32;
            rng.some(6, v)
        })
        .collect();
    let dec = (0..n)
        .map(|_| {
            let v = rng.below(40_000) as i128 - 10_000;
            rng.some(5, v)
        })
        .collect::<Decimal128Array>()
        .with_precision_and_scale(15, 2)
        .expect("decimal(15, 2)");
    let flag: BooleanArray = (0..n)
        .map(|_| {
            let v = rng.below(2) == 1;
            rng.some(4, v)
        })
        .collect();
    let pick = |rng: &mut Rng, xs: &[&str], k: u64| -> StringArray {
        (0..n)
            .map(|_| {
                let v = xs[rng.below(xs.len() as u64) as usize];
                rng.some(k, v)
            })
            .collect()
    };
    let s = pick(rng, &["x", "yy", "", "zzz"], 5);
    let priority = pick(
        rng,
        &["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"],
        10,
    );
    let shipmode = pick(rng, &["MAIL", "SHIP", "AIR", "TRUCK"], 12);
    let ptype = pick(
        rng,
        &[
            "PROMO BRUSHED",
            "STANDARD PLATED",
            "PROMO ANODIZED",
            "ECONOMY",
        ],
        9,
    );
    let ts: TimestampMicrosecondArray = (0..n)
        .map(|_| {
            let v = 1_577_836_800_000_000 + rng.below(1 << 46) as i64;
            rng.some(6, v)
        })
        .collect();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids)),
        Arc::new(qty),
        Arc::new(a),
        Arc::new(b),
        Arc::new(c),
        Arc::new(price),
        Arc::new(discount),
        Arc::new(d),
        Arc::new(dec),
        Arc::new(flag),
        Arc::new(s),
        Arc::new(priority),
        Arc::new(shipmode),
        Arc::new(ptype),
        Arc::new(ts),
    ];
    RecordBatch::try_new(schema(), cols).expect("the table's batch")
}

/// The table: batches of several sizes (one of them sliced at an odd row), in two partitions.
fn table() -> Vec<Vec<RecordBatch>> {
    let mut rng = Rng(2026);
    let b1 = batch(&mut rng, 0, 3000);
    let b2 = batch(&mut rng, 3000, 8192);
    let b3 = batch(&mut rng, 11192, 1000).slice(3, 997);
    let b4 = batch(&mut rng, 20000, 77);
    vec![vec![b1, b2], vec![b3, b4]]
}

fn context(rule: Option<Arc<SelectjitCaseRule>>, partitions: usize) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(partitions);
    let mut b = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features();
    if let Some(r) = rule {
        b = selectjit_datafusion::with_rule(b, r);
    }
    let ctx = SessionContext::new_with_state(b.build());
    let t = MemTable::try_new(schema(), table()).expect("the table");
    ctx.register_table("t", Arc::new(t)).expect("register");
    ctx
}

async fn run(ctx: &SessionContext, sql: &str) -> RecordBatch {
    let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let schema = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    concat_batches(&schema, &batches).expect("concat")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_files_equal_datafusion_alone() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sql");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/sql")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    assert!(files.len() >= 12, "{} SQL files", files.len());
    let dump = std::env::var_os("SELECTJIT_SQL_DUMP").map(std::path::PathBuf::from);
    if let Some(d) = &dump {
        std::fs::create_dir_all(d).expect("dump dir");
        let ctx = context(None, 1);
        ctx.sql("SELECT * FROM t ORDER BY id")
            .await
            .expect("the table")
            .write_parquet(
                &d.join("t.parquet").to_string_lossy(),
                datafusion::dataframe::DataFrameWriteOptions::new().with_single_file_output(true),
                None,
            )
            .await
            .expect("t.parquet");
    }
    let mut replaced_total = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).expect("sql file");
        let want: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("-- replaced: "))
            .unwrap_or_else(|| panic!("{}: no `-- replaced: N` line", f.display()))
            .trim()
            .parse()
            .expect("a count");
        let sql: String = text
            .lines()
            .filter(|l| !l.starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        for partitions in [1, 4] {
            let rule = Arc::new(SelectjitCaseRule::new());
            let alone = run(&context(None, partitions), &sql).await;
            let ours = run(&context(Some(rule.clone()), partitions), &sql).await;
            let report = rule.take_report();
            let name = f.file_name().unwrap().to_string_lossy();
            // A CASE in an aggregate's argument may be counted once per aggregate node
            // (partial and final).
            if !(report.replaced >= want && (want > 0 || report.replaced == 0)) {
                let plan = run(&context(None, partitions), &format!("EXPLAIN {sql}")).await;
                let plan = datafusion::arrow::util::pretty::pretty_format_batches(&[plan])
                    .map(|p| p.to_string())
                    .unwrap_or_default();
                panic!(
                    "{name} ({partitions} partitions): replaced {} (want {want}); left alone: \
                     {:?}\n{plan}",
                    report.replaced, report.left_alone
                );
            }
            // `-- reason: TEXT`: a CASE left alone with a reason that says so.
            if let Some(why) = text.lines().find_map(|l| l.strip_prefix("-- reason: ")) {
                assert!(
                    report
                        .left_alone
                        .iter()
                        .any(|(_, r)| r.contains(why.trim())),
                    "{name}: no CASE left alone because of {why:?}: {:?}",
                    report.left_alone
                );
            }
            replaced_total += report.replaced;
            assert_eq!(alone.schema(), ours.schema(), "{name}: schema");
            assert_eq!(alone.num_rows(), ours.num_rows(), "{name}: rows");
            // Sums of floats over several partitions add in the order the partitions finish,
            // with or without the rule: those compare within 1e-12 (`-- float sums`).
            let approx = partitions > 1 && text.contains("-- float sums");
            for (i, (x, y)) in alone.columns().iter().zip(ours.columns()).enumerate() {
                let field = alone.schema().field(i).name().clone();
                if approx && x.data_type() == &DataType::Float64 {
                    let (x, y) = (
                        x.as_any().downcast_ref::<Float64Array>().expect("f64"),
                        y.as_any().downcast_ref::<Float64Array>().expect("f64"),
                    );
                    assert_eq!(x.nulls(), y.nulls(), "{name}: column {field} validity");
                    for (a, b) in x.values().iter().zip(y.values()) {
                        assert!(
                            (a - b).abs() <= 1e-12 * a.abs().max(b.abs()),
                            "{name} ({partitions} partitions): column {field}: {a} vs {b}"
                        );
                    }
                    continue;
                }
                assert_eq!(
                    x.to_data(),
                    y.to_data(),
                    "{name} ({partitions} partitions): column {i} ({field})"
                );
            }
            if partitions == 1
                && let Some(d) = &dump
            {
                let stem = f.file_stem().unwrap().to_string_lossy().to_string();
                std::fs::write(d.join(format!("{stem}.sql")), &sql).expect("query");
                let ctx = context(Some(Arc::new(SelectjitCaseRule::new())), 1);
                ctx.sql(&sql)
                    .await
                    .expect("query")
                    .write_parquet(
                        &d.join(format!("{stem}.parquet")).to_string_lossy(),
                        datafusion::dataframe::DataFrameWriteOptions::new()
                            .with_single_file_output(true),
                        None,
                    )
                    .await
                    .expect("result parquet");
            }
        }
    }
    assert!(replaced_total >= 20, "only {replaced_total} CASEs replaced");
}

/// A CASE whose THEN may fail where its WHEN is false stays DataFusion's, with the reason; and
/// DataFusion's answer (no division by zero) is what the query gives.
#[tokio::test]
async fn a_fallible_then_is_left_alone_with_its_reason() {
    let rule = Arc::new(SelectjitCaseRule::new());
    let ctx = context(Some(rule.clone()), 1);
    let r = run(
        &ctx,
        "SELECT CASE WHEN a <> 0 THEN 1000 / a ELSE 0 END AS r FROM t WHERE a IS NOT NULL",
    )
    .await;
    assert!(r.num_rows() > 10_000);
    let report = rule.take_report();
    assert_eq!(report.replaced, 0);
    assert!(
        report
            .left_alone
            .iter()
            .any(|(_, why)| why.contains("THEN 1")),
        "{report:?}"
    );
}

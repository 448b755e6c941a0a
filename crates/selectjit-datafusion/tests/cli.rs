//! `selectjit-sql` as a user runs it: a CSV table, a CASE query, the report, `--out` CSV equal
//! to the run without the rule, `--bench`, and errors.

use std::process::Command;

fn sql(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_selectjit-sql"))
        .args(args)
        .output()
        .expect("selectjit-sql runs");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn runs_a_case_query_and_reports_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = dir.path().join("t.csv");
    let mut csv = String::from("qty,a,b,c\n");
    for i in 0..1000 {
        let qty = if i % 13 == 0 {
            String::new()
        } else {
            (i % 100).to_string()
        };
        csv += &format!("{qty},{},{},{}\n", i, -i, i * 2);
    }
    std::fs::write(&table, csv).expect("table");
    let t = format!("t={}", table.display());
    let q = "SELECT qty, CASE WHEN qty < 10 THEN a WHEN qty < 50 THEN b ELSE c END AS r FROM t";
    let (ours, theirs) = (dir.path().join("ours.csv"), dir.path().join("theirs.csv"));
    let (ok, out, err) = sql(&[
        "--table",
        &t,
        "--query",
        q,
        "--out",
        &ours.to_string_lossy(),
        "--partitions",
        "1",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("replaced: 1"), "{out}");
    let (ok, out, err) = sql(&[
        "--table",
        &t,
        "--query",
        q,
        "--out",
        &theirs.to_string_lossy(),
        "--partitions",
        "1",
        "--no-selectjit",
    ]);
    assert!(ok, "{err}");
    assert!(!out.contains("replaced"), "{out}");
    let (a, b) = (
        std::fs::read_to_string(&ours).unwrap(),
        std::fs::read_to_string(&theirs).unwrap(),
    );
    assert_eq!(a.lines().count(), 1001);
    assert_eq!(a, b);
    // A CASE that may fail is left alone, with its reason.
    let (ok, out, _) = sql(&[
        "--table",
        &t,
        "--query",
        "SELECT CASE WHEN a <> 0 THEN b / a END FROM t",
        "--bench",
        "2",
    ]);
    assert!(ok);
    assert!(
        out.contains("replaced: 0") && out.contains("left alone:") && out.contains("median_us:"),
        "{out}"
    );
    // Errors: no query, a bad table, a missing file; nothing written.
    let (ok, _, err) = sql(&["--table", &t]);
    assert!(!ok && err.contains("--query"), "{err}");
    let (ok, _, err) = sql(&["--table", "t", "--query", "SELECT 1"]);
    assert!(!ok && err.contains("NAME=FILE"), "{err}");
    let missing = dir.path().join("none.parquet");
    let (ok, _, err) = sql(&[
        "--table",
        &format!("t={}", missing.display()),
        "--query",
        "SELECT 1",
    ]);
    assert!(!ok && err.contains("none.parquet"), "{err}");
}

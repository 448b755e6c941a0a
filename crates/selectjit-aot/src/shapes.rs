//! The shapes file of `selectjit aot`: which kernels to export, as JSON.
//!
//! ```json
//! {
//!   "dtypes": ["f32", "f16"],
//!   "cases": [
//!     {"mode": "numpy", "cond": [1, 1, 128, 128], "then": [8, 12, 128, 128], "else": []},
//!     {"mode": "pdpd", "axis": 1, "cond": [3], "then": [2, 3, 4], "else": [3, 4], "dtype": "i64"},
//!     {"mode": "numpy", "cond": [7], "then": [7], "else": [7], "kernels": "generic"},
//!     {"signature": {"width": 4, "dims": [3, 5],
//!                    "strides": {"cond": [1, 3], "then": [5, 1], "else": [0, 0], "out": [5, 1]}}},
//!     {"signature": {"width": 2, "dims": [4096], "predicate": {"op": "<", "dtype": "i64"},
//!                    "strides": {"cond": [1], "then": [1], "else": [0], "out": [1], "rhs": [0]}}},
//!     {"signature": {"width": 4, "dims": [1000], "predicate": {"test": "isnan", "dtype": "f32"},
//!                    "strides": {"cond": [1], "then": [0], "else": [1], "out": [1]}}}
//!   ]
//! }
//! ```
//!
//! A case is a call on contiguous inputs (the conformance file's format: `mode`, `axis` for
//! pdpd, default -1, and the three shapes) with `dtype` or `dtypes` (default: the file's
//! `dtypes`, else the caller's default), or a planned `signature` (element width, collapsed dims,
//! element strides per operand) for strided layouts. A signature whose condition is a predicate
//! names it in canonical form (`predicate`: `op` one of `==`, `<`, `<=` of `cond` (its lhs) and
//! `rhs`, whose strides it then gives, or `test` one of `isnan`, `isinf`, `isfinite` of `cond`;
//! `dtype` the compared dtype; cond's and rhs's strides are in elements of that dtype).
//! `kernels` says what a case adds: `both`
//! (default: its exact kernel and the shape-generic kernel of its pattern), `exact` or
//! `generic`. Cases whose `expect` is `"error"` are skipped; any other case the mode refuses is
//! an error. Other keys (`expect`, `source`, ...) are ignored.

use serde_json::Value;

use crate::export::{KernelSet, Kinds};
use selectjit::aot::key::{cond_code, dtype_code};
use selectjit::plan::Canon;
use selectjit::plan::CondKind;
use selectjit::plan::Pattern;
use selectjit::plan::Signature;
use selectjit::{Broadcast, DType, Error, MAX_RANK, Result, TestOp};

/// What a shapes file gave.
#[derive(Debug, Clone, Default)]
pub struct ShapesFile {
    /// The kernels it names.
    pub set: KernelSet,
    /// Cases taken.
    pub cases: usize,
    /// Cases skipped (expected errors).
    pub skipped: usize,
    /// Cases whose output is empty (no kernel).
    pub empty: usize,
}

fn bad(case: usize, msg: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("shapes file, case {case}: {msg}"))
}

fn shape(case: usize, v: &Value, what: &str) -> Result<Vec<usize>> {
    let a = v
        .get(what)
        .and_then(Value::as_array)
        .ok_or_else(|| bad(case, format!("'{what}' is missing or not a list")))?;
    if a.len() > MAX_RANK {
        return Err(bad(
            case,
            format!("'{what}' has rank {} > {MAX_RANK}", a.len()),
        ));
    }
    a.iter()
        .map(|d| {
            d.as_u64()
                .and_then(|d| usize::try_from(d).ok())
                .ok_or_else(|| bad(case, format!("'{what}' has a dim that is not a size: {d}")))
        })
        .collect()
}

fn dtypes(case: usize, v: &Value) -> Result<Option<Vec<DType>>> {
    let one = |s: &Value| -> Result<Vec<DType>> {
        match s.as_str() {
            Some("all") => Ok(DType::ALL.to_vec()),
            Some(name) => Ok(vec![name.parse().map_err(|e| bad(case, e))?]),
            None => Err(bad(case, format!("dtype {s} is not a string"))),
        }
    };
    if let Some(d) = v.get("dtype") {
        return one(d).map(Some);
    }
    match v.get("dtypes") {
        None => Ok(None),
        Some(Value::Array(a)) => {
            let mut out = Vec::new();
            for d in a {
                out.extend(one(d)?);
            }
            Ok(Some(out))
        }
        Some(d) => one(d).map(Some),
    }
}

fn mode(case: usize, v: &Value) -> Result<Broadcast> {
    let name = v.get("mode").map_or(Some("numpy"), Value::as_str);
    Ok(match name {
        Some("numpy") => Broadcast::Numpy,
        Some("two-step") => Broadcast::TwoStep,
        Some("none") => Broadcast::Exact,
        Some("pdpd") => Broadcast::Pdpd {
            axis: match v.get("axis") {
                None => -1,
                Some(a) => a
                    .as_i64()
                    .ok_or_else(|| bad(case, format!("axis {a} is not an integer")))?,
            },
        },
        _ => {
            return Err(bad(
                case,
                "mode must be numpy, two-step, none or pdpd".to_string(),
            ));
        }
    })
}

fn kinds(case: usize, v: &Value) -> Result<Kinds> {
    match v.get("kernels").map(|k| k.as_str()) {
        None | Some(Some("both")) => Ok(Kinds::Both),
        Some(Some("exact")) => Ok(Kinds::Exact),
        Some(Some("generic")) => Ok(Kinds::Generic),
        _ => Err(bad(case, "kernels must be both, exact or generic")),
    }
}

/// A planned signature from its JSON form, checked as a table key would be.
fn signature(case: usize, v: &Value) -> Result<Signature> {
    let width = v
        .get("width")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad(case, "signature width is missing"))?;
    let dims = shape(case, v, "dims")?;
    let st = v
        .get("strides")
        .ok_or_else(|| bad(case, "signature strides are missing"))?;
    // The key of the signature, which the key parser checks (widths, ranks, zero dims,
    // overflow): width, rank, dims, then each operand's strides.
    let mut key = vec![
        u8::try_from(width).unwrap_or(0),
        u8::try_from(dims.len()).unwrap_or(0),
    ];
    for &d in &dims {
        key.extend_from_slice(&(d as u64).to_le_bytes());
    }
    let pred = match v.get("predicate") {
        None => None,
        Some(p) => Some(predicate(case, p)?),
    };
    for name in ["cond", "then", "else", "out"] {
        let a = st
            .get(name)
            .and_then(Value::as_array)
            .ok_or_else(|| bad(case, format!("signature strides of {name} are missing")))?;
        if a.len() != dims.len() {
            return Err(bad(
                case,
                format!("{name} has {} strides for {} dims", a.len(), dims.len()),
            ));
        }
        for s in a {
            let s = s
                .as_i64()
                .ok_or_else(|| bad(case, format!("stride {s} of {name} is not an integer")))?;
            key.extend_from_slice(&s.to_le_bytes());
        }
    }
    if let Some((code, dtype, binary)) = pred {
        key.extend_from_slice(&[code, dtype]);
        let rhs = st.get("rhs");
        if binary != rhs.is_some() {
            return Err(bad(
                case,
                if binary {
                    "a comparison needs the strides of rhs"
                } else {
                    "a test has no rhs"
                },
            ));
        }
        match rhs {
            Some(r) => {
                let a = r
                    .as_array()
                    .filter(|a| a.len() == dims.len())
                    .ok_or_else(|| bad(case, "rhs needs one stride per dim"))?;
                for s in a {
                    let s = s
                        .as_i64()
                        .ok_or_else(|| bad(case, format!("stride {s} of rhs is not an integer")))?;
                    key.extend_from_slice(&s.to_le_bytes());
                }
            }
            None => key.resize(key.len() + 8 * dims.len(), 0),
        }
    }
    selectjit::aot::key::parse_signature_key(&key).map_err(|e| bad(case, e))
}

/// A signature's predicate: its key code, its dtype's key code, and whether it compares.
fn predicate(case: usize, p: &Value) -> Result<(u8, u8, bool)> {
    let dtype: DType = p
        .get("dtype")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(case, "a predicate needs a dtype"))?
        .parse()
        .map_err(|e| bad(case, e))?;
    let kind = match (
        p.get("op").and_then(Value::as_str),
        p.get("test").and_then(Value::as_str),
    ) {
        (Some("=="), None) => CondKind::Cmp(Canon::Eq, dtype),
        (Some("<"), None) => CondKind::Cmp(Canon::Lt, dtype),
        (Some("<="), None) => CondKind::Cmp(Canon::Le, dtype),
        (Some(op), None) => {
            return Err(bad(
                case,
                format!(
                    "predicate op '{op}': a signature's comparison is ==, < or <= \
                     (> and >= swap lhs and rhs, != swaps then and else)"
                ),
            ));
        }
        (None, Some(t)) => CondKind::Test(t.parse::<TestOp>().map_err(|e| bad(case, e))?, dtype),
        _ => return Err(bad(case, "a predicate has either an op or a test")),
    };
    Ok((cond_code(kind), dtype_code(dtype), kind.binary()))
}

/// Reads a shapes file. `default_dtypes` apply to cases that name none when the file has no
/// top-level `dtypes`.
pub fn parse_shapes(text: &str, default_dtypes: &[DType]) -> Result<ShapesFile> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| Error::Invalid(format!("shapes file is not JSON: {e}")))?;
    let file_dtypes = dtypes(0, &v)?;
    let cases = v
        .get("cases")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::Invalid("shapes file has no 'cases' list".into()))?;
    let mut out = ShapesFile::default();
    for (i, c) in cases.iter().enumerate() {
        let k = kinds(i, c)?;
        if let Some(s) = c.get("signature") {
            let sig = signature(i, s)?;
            if k != Kinds::Exact {
                out.set.add_pattern(Pattern::of(&sig));
            }
            if k != Kinds::Generic {
                out.set.add_signature(sig);
            }
            out.cases += 1;
            continue;
        }
        if c.get("expect").and_then(Value::as_str) == Some("error") {
            out.skipped += 1;
            continue;
        }
        let m = mode(i, c)?;
        let (cs, ts, es) = (
            shape(i, c, "cond")?,
            shape(i, c, "then")?,
            shape(i, c, "else")?,
        );
        let dts = match dtypes(i, c)? {
            Some(d) => d,
            None => file_dtypes
                .clone()
                .unwrap_or_else(|| default_dtypes.to_vec()),
        };
        if dts.is_empty() {
            return Err(bad(i, "no dtype"));
        }
        let mut empty = false;
        for dt in dts {
            let sig = out
                .set
                .add_call(dt, &cs, &ts, &es, m, k)
                .map_err(|e| bad(i, e))?;
            empty |= sig.is_none();
        }
        out.cases += 1;
        out.empty += empty as usize;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use selectjit::plan::RHS;

    #[test]
    fn the_documented_example_parses() {
        let text = r#"{
          "dtypes": ["f32", "f16"],
          "cases": [
            {"mode": "numpy", "cond": [1, 1, 128, 128], "then": [8, 12, 128, 128], "else": []},
            {"mode": "pdpd", "axis": 1, "cond": [3], "then": [2, 3, 4], "else": [3, 4], "dtype": "i64"},
            {"mode": "numpy", "cond": [7], "then": [7], "else": [7], "kernels": "generic"},
            {"mode": "two-step", "cond": [3, 5], "then": [2, 3, 4, 5], "else": [], "expect": "error"},
            {"cond": [0], "then": [0], "else": [0]},
            {"signature": {"width": 4, "dims": [3, 5],
                           "strides": {"cond": [1, 3], "then": [5, 1], "else": [0, 0], "out": [5, 1]}}},
            {"signature": {"width": 2, "dims": [4096], "predicate": {"op": "<", "dtype": "i64"},
                           "strides": {"cond": [1], "then": [1], "else": [0], "out": [1], "rhs": [0]}}},
            {"signature": {"width": 4, "dims": [1000], "predicate": {"test": "isnan", "dtype": "f32"},
                           "strides": {"cond": [1], "then": [0], "else": [1], "out": [1]}}}
          ]
        }"#;
        let f = parse_shapes(text, &[DType::F32]).unwrap();
        assert_eq!((f.cases, f.skipped, f.empty), (7, 1, 1));
        // Case 0: two widths, exact + generic each; case 1: i64; case 2: generic only (two
        // widths); cases 5 to 7: one signature and its pattern each.
        assert_eq!(f.set.signatures().len(), 2 + 1 + 3);
        assert_eq!(f.set.signatures()[0].dims(), &[96, 16384]);
        assert_eq!(f.set.patterns().len(), 2 + 1 + 2 + 3);
        let preds: Vec<String> = f.set.signatures()[4..]
            .iter()
            .map(|s| s.cond().to_string())
            .collect();
        assert_eq!(preds, ["i64 <", "isnan(f32)"]);
        assert_eq!(f.set.signatures()[4].strides(RHS), &[0]);
    }

    #[test]
    fn bad_files_are_errors_that_name_the_case() {
        let d = [DType::F32];
        for (text, needle) in [
            ("[]", "no 'cases'"),
            ("{", "not JSON"),
            (
                r#"{"cases": [{"cond": [2], "then": [3], "else": []}]}"#,
                "case 0",
            ),
            (r#"{"cases": [{"cond": [2], "then": [2]}]}"#, "'else'"),
            (
                r#"{"cases": [{"mode": "x", "cond": [], "then": [], "else": []}]}"#,
                "mode",
            ),
            (
                r#"{"cases": [{"cond": [], "then": [], "else": [], "dtype": "f128"}]}"#,
                "f128",
            ),
            (
                r#"{"cases": [{"cond": [-1], "then": [], "else": []}]}"#,
                "not a size",
            ),
            (
                r#"{"cases": [{"signature": {"width": 3, "dims": [2], "strides": {"cond": [1], "then": [1], "else": [1], "out": [1]}}}]}"#,
                "width",
            ),
            (
                r#"{"cases": [{"signature": {"width": 4, "dims": [2], "strides": {"cond": [1], "then": [1], "else": [1]}}}]}"#,
                "out",
            ),
            (
                r#"{"cases": [{"signature": {"width": 4, "dims": [2], "predicate": {"op": ">", "dtype": "f32"}, "strides": {"cond": [1], "then": [1], "else": [1], "out": [1], "rhs": [1]}}}]}"#,
                "swap lhs and rhs",
            ),
            (
                r#"{"cases": [{"signature": {"width": 4, "dims": [2], "predicate": {"op": "<", "dtype": "f32"}, "strides": {"cond": [1], "then": [1], "else": [1], "out": [1]}}}]}"#,
                "strides of rhs",
            ),
            (
                r#"{"cases": [{"signature": {"width": 4, "dims": [2], "predicate": {"test": "isodd", "dtype": "f32"}, "strides": {"cond": [1], "then": [1], "else": [1], "out": [1]}}}]}"#,
                "isodd",
            ),
            (
                r#"{"cases": [{"signature": {"width": 4, "dims": [2], "predicate": {"test": "isnan", "dtype": "f32"}, "strides": {"cond": [1], "then": [1], "else": [1], "out": [1], "rhs": [0]}}}]}"#,
                "has no rhs",
            ),
        ] {
            let e = parse_shapes(text, &d).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}

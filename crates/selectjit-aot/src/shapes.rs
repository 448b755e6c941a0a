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
//!                    "strides": {"cond": [1], "then": [0], "else": [1], "out": [1]}}},
//!     {"nway": {"shape": [4096], "default": [4096], "branches": [
//!        {"test": "isnan", "operand": [4096], "value": []},
//!        {"cmp": ">", "dtype": "i64", "lhs": [4096], "rhs": [], "value": [4096], "not": true},
//!        {"mask": [4096], "value": []}]}, "dtypes": ["f32", "f64"]}
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
//! An `nway` case names the single-pass n-way kernel of a call of `select_n` on contiguous
//! inputs (`selectjit::aot::nway::NwayKernelSpec::for_call`), once per dtype of the case (as
//! above): the output's `shape`, the `default`'s shape, and the `branches` in call order, each
//! with its `value`'s shape, an optional `not` (negated), and its condition: `mask` (its
//! shape), `cmp` (one of `==`, `!=`, `<`, `<=`, `>`, `>=`, with the shapes of `lhs` and `rhs`)
//! or `test` (`isnan`, `isinf` or `isfinite`, with the shape of its `operand`); a comparison or
//! test of `dtype` (default: the case's dtype). Every operand's shape is the output's or one
//! element (`[]`, or dims of 1): the calls a flat n-way kernel runs.
//! `kernels` says what a case adds: `both`
//! (default: its exact kernel and the shape-generic kernel of its pattern), `exact` or
//! `generic`. Cases whose `expect` is `"error"` are skipped; any other case the mode refuses is
//! an error. Other keys (`expect`, `source`, ...) are ignored.

use serde_json::Value;

use crate::export::{KernelSet, Kinds};
use selectjit::aot::key::{cond_code, dtype_code};
use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
use selectjit::plan::Canon;
use selectjit::plan::CondKind;
use selectjit::plan::Pattern;
use selectjit::plan::Signature;
use selectjit::{Broadcast, CmpOp, DType, Error, MAX_RANK, Result, TestOp};

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

/// Case `i`'s dtypes: its own, else the file's, else the caller's default; at least one.
fn case_dtypes(
    i: usize,
    c: &Value,
    file: Option<&[DType]>,
    default: &[DType],
) -> Result<Vec<DType>> {
    let dts = match dtypes(i, c)? {
        Some(d) => d,
        None => file.unwrap_or(default).to_vec(),
    };
    if dts.is_empty() {
        return Err(bad(i, "no dtype"));
    }
    Ok(dts)
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

/// A branch of an `nway` case, its shapes kept by the caller (`shapes`: the condition's
/// operands, then the value).
fn nway_branch(case: usize, i: usize, b: &Value, shapes: &mut Vec<Vec<usize>>) -> Result<Shaped> {
    let at = |msg: String| bad(case, format!("n-way branch {i}: {msg}"));
    let dtype = match b.get("dtype") {
        None => None,
        Some(d) => Some(
            d.as_str()
                .ok_or_else(|| at(format!("dtype {d} is not a string")))?
                .parse::<DType>()
                .map_err(|e| at(e.to_string()))?,
        ),
    };
    let not = match b.get("not") {
        None => false,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| at(format!("not {v} is not a bool")))?,
    };
    let mut take = |what: &str| -> Result<usize> {
        shapes.push(shape(case, b, what).map_err(|e| at(e.to_string()))?);
        Ok(shapes.len() - 1)
    };
    let cond = match (b.get("mask"), b.get("cmp"), b.get("test")) {
        (Some(_), None, None) => ShapedCond::Mask(take("mask")?),
        (None, Some(op), None) => {
            let op: CmpOp = op
                .as_str()
                .ok_or_else(|| at(format!("cmp {op} is not a string")))?
                .parse()
                .map_err(|e: Error| at(e.to_string()))?;
            ShapedCond::Cmp(op, dtype, take("lhs")?, take("rhs")?)
        }
        (None, None, Some(t)) => {
            let t: TestOp = t
                .as_str()
                .ok_or_else(|| at(format!("test {t} is not a string")))?
                .parse()
                .map_err(|e: Error| at(e.to_string()))?;
            ShapedCond::Test(t, dtype, take("operand")?)
        }
        _ => return Err(at("a branch has one of mask, cmp or test".into())),
    };
    Ok(Shaped {
        cond,
        not,
        value: take("value")?,
    })
}

/// A branch of an `nway` case with its shapes by index.
struct Shaped {
    cond: ShapedCond,
    not: bool,
    value: usize,
}

enum ShapedCond {
    Mask(usize),
    Cmp(CmpOp, Option<DType>, usize, usize),
    Test(TestOp, Option<DType>, usize),
}

/// The specs of an `nway` case, one per dtype.
fn nway_case(case: usize, v: &Value, dts: &[DType]) -> Result<Vec<NwayKernelSpec>> {
    let out = shape(case, v, "shape")?;
    let default = shape(case, v, "default")?;
    let list = v
        .get("branches")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(case, "an nway case needs a 'branches' list"))?;
    let mut shapes = Vec::new();
    let shaped: Vec<Shaped> = list
        .iter()
        .enumerate()
        .map(|(i, b)| nway_branch(case, i, b, &mut shapes))
        .collect::<Result<_>>()?;
    let mut specs = Vec::new();
    for &dt in dts {
        let branches: Vec<NwayBranch<'_>> = shaped
            .iter()
            .map(|b| NwayBranch {
                cond: match b.cond {
                    ShapedCond::Mask(m) => NwayCond::Mask(&shapes[m]),
                    ShapedCond::Cmp(op, d, l, r) => {
                        NwayCond::Cmp(op, d.unwrap_or(dt), &shapes[l], &shapes[r])
                    }
                    ShapedCond::Test(t, d, x) => NwayCond::Test(t, d.unwrap_or(dt), &shapes[x]),
                },
                not: b.not,
                value: &shapes[b.value],
            })
            .collect();
        specs.push(
            NwayKernelSpec::for_call(dt, &out, &branches, &default)
                .map_err(|e| bad(case, format!("{dt}: {e}")))?,
        );
    }
    Ok(specs)
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
        if let Some(nw) = c.get("nway") {
            let dts = case_dtypes(i, c, file_dtypes.as_deref(), default_dtypes)?;
            for spec in nway_case(i, nw, &dts)? {
                out.set.add_nway(spec);
            }
            out.cases += 1;
            continue;
        }
        let m = mode(i, c)?;
        let (cs, ts, es) = (
            shape(i, c, "cond")?,
            shape(i, c, "then")?,
            shape(i, c, "else")?,
        );
        let dts = case_dtypes(i, c, file_dtypes.as_deref(), default_dtypes)?;
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
                           "strides": {"cond": [1], "then": [0], "else": [1], "out": [1]}}},
            {"nway": {"shape": [4096], "default": [4096], "branches": [
               {"test": "isnan", "operand": [4096], "value": []},
               {"cmp": ">", "dtype": "i64", "lhs": [4096], "rhs": [], "value": [4096], "not": true},
               {"mask": [4096], "value": []}]}, "dtypes": ["f32", "f64"]}
          ]
        }"#;
        let f = parse_shapes(text, &[DType::F32]).unwrap();
        assert_eq!((f.cases, f.skipped, f.empty), (8, 1, 1));
        // The n-way case: one kernel per dtype, as the engine plans the call (`>` as a swapped
        // `<`; the tests of the case's dtype).
        let nway: Vec<String> = f.set.nway().iter().map(|s| s.to_string()).collect();
        assert_eq!(
            nway,
            [
                "width 4: isnan(f32) (full) ? one : !i64 < (one, full) ? full : mask (full) ? one : full",
                "width 8: isnan(f64) (full) ? one : !i64 < (one, full) ? full : mask (full) ? one : full",
            ]
        );
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
            (
                r#"{"cases": [{"nway": {"shape": [8], "default": [8], "branches": []}}]}"#,
                "at least one branch",
            ),
            (
                r#"{"cases": [{"nway": {"shape": [8], "default": [8]}}]}"#,
                "'branches'",
            ),
            (
                r#"{"cases": [{"nway": {"shape": [8], "default": [8], "branches": [{"value": [8]}]}}]}"#,
                "one of mask, cmp or test",
            ),
            (
                r#"{"cases": [{"nway": {"shape": [8], "default": [8], "branches": [{"cmp": "<>", "lhs": [8], "rhs": [8], "value": [8]}]}}]}"#,
                "<>",
            ),
            (
                r#"{"cases": [{"nway": {"shape": [8], "default": [8], "branches": [{"test": "isnan", "value": [8]}]}}]}"#,
                "'operand'",
            ),
            (
                r#"{"cases": [{"nway": {"shape": [2, 8], "default": [2, 8], "branches": [{"mask": [8], "value": [2, 8]}]}}]}"#,
                "branch 0's mask",
            ),
            (
                r#"{"cases": [{"nway": {"shape": [8], "default": [8], "branches": [{"mask": [8], "value": [8], "not": 1}]}}]}"#,
                "not a bool",
            ),
        ] {
            let e = parse_shapes(text, &d).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}

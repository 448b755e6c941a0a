//! Predicate conditions on the command line: `--cond-expr 'x > 0'` over named arrays
//! (`--input NAME=FILE.npy`, `then`, `else`), with literals typed by the other side of their
//! comparison. The expression language is the fused benchmark cases' ([`selectjit_bench::expr`]).

use selectjit::{Cond, DType, Error, Result};
use selectjit_bench::expr::{CondExpr, context, parse_cond};
use selectjit_bench::fused::{Bound, build_cond, literal_bytes, pred_shape};

/// One array a condition may name: its element type, shape, strides and bytes.
#[derive(Debug, Clone)]
pub struct Named {
    /// The name in the expression.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
    /// Strides in elements.
    pub strides: Vec<isize>,
    /// Little-endian elements in storage order.
    pub data: Vec<u8>,
}

impl Named {
    /// A strided view of the element bytes.
    pub fn view(&self) -> selectjit::TensorRef<'_, u8> {
        selectjit::TensorRef::with_strides(&self.data, &self.shape, &self.strides)
    }

    /// A zero-filled contiguous array.
    pub fn zeros(name: &str, dtype: DType, shape: &[usize]) -> Result<Named> {
        let n = shape
            .iter()
            .try_fold(dtype.width(), |a, &d| a.checked_mul(d))
            .filter(|&b| b <= 1 << 34)
            .ok_or_else(|| Error::Invalid(format!("{name}: too large")))?;
        let mut strides = vec![1isize; shape.len()];
        for k in (0..shape.len().saturating_sub(1)).rev() {
            strides[k] = strides[k + 1] * shape[k + 1].max(1) as isize;
        }
        Ok(Named {
            name: name.to_string(),
            dtype,
            shape: shape.to_vec(),
            strides,
            data: vec![0; n],
        })
    }
}

/// Splits `NAME=VALUE`, checking that NAME is a name the expression language can use.
pub fn split_named<'s>(flag: &str, s: &'s str) -> Result<(&'s str, &'s str)> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| Error::Invalid(format!("{flag} '{s}': expected NAME=VALUE")))?;
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(Error::Invalid(format!(
            "{flag} '{s}': '{name}' is not a name (letters, digits and _, not starting with a digit)"
        )));
    }
    if matches!(
        name,
        "inf" | "nan" | "true" | "false" | "isnan" | "isinf" | "isfinite" | "logical_not" | "where"
    ) {
        return Err(Error::Invalid(format!(
            "{flag} '{s}': '{name}' is a word of the expression language"
        )));
    }
    Ok((name, value))
}

/// A parsed condition over named arrays, ready to build its [`Cond`].
pub struct CondSpec<'a> {
    /// The expression as written.
    pub text: String,
    /// The condition.
    pub expr: CondExpr,
    /// The arrays it may name.
    pub arrays: Vec<&'a Named>,
    literals: Vec<Vec<u8>>,
    /// The condition's shape (its operands broadcast with numpy's rule).
    pub shape: Vec<usize>,
}

impl<'a> CondSpec<'a> {
    /// Parses `text` over `arrays`: every name it reads must be one of them; every array in
    /// `must_use` must be read; a comparison's operands must share a dtype (a literal takes the
    /// other side's and must be a value of it); the operands' shapes must broadcast.
    pub fn new(text: &str, arrays: Vec<&'a Named>, must_use: &[&str]) -> Result<CondSpec<'a>> {
        let ctx = format!("--cond-expr '{text}'");
        let expr = parse_cond(text, true)?;
        let known: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
        for n in expr.vars() {
            if !known.contains(&n) {
                return Err(Error::Invalid(format!(
                    "{ctx}: '{n}' names no array (known: {})",
                    known.join(", ")
                )));
            }
        }
        let find = |n: &str| -> Result<&'a Named> {
            arrays
                .iter()
                .copied()
                .find(|a| a.name == n)
                .ok_or_else(|| Error::Invalid(format!("{ctx}: '{n}' names no array")))
        };
        let literals =
            literal_bytes(&expr, &|n| find(n).map(|a| a.dtype)).map_err(|e| context(e, &ctx))?;
        let shape = pred_shape(&expr, &|n| find(n).map(|a| a.shape.as_slice()))
            .map_err(|e| context(e, &ctx))?;
        let read = expr.vars();
        if let Some(n) = must_use.iter().find(|n| !read.contains(n)) {
            return Err(Error::Invalid(format!("--input {n} is not used by {ctx}")));
        }
        Ok(CondSpec {
            text: text.to_string(),
            expr,
            arrays,
            literals,
            shape,
        })
    }

    /// The [`Cond`] over the arrays.
    pub fn cond(&self) -> Result<Cond<'_>> {
        let lookup = |n: &str| -> Result<Bound<'_>> {
            let a = self
                .arrays
                .iter()
                .find(|a| a.name == n)
                .ok_or_else(|| Error::Invalid(format!("'{n}' names no array")))?;
            Ok(Bound {
                dtype: a.dtype,
                bytes: &a.data,
                shape: &a.shape,
                strides: Some(&a.strides),
            })
        };
        build_cond(&self.expr, &lookup, &self.literals)
    }

    /// Each operand of the condition described: `x f32 [1024]`, `0 (f32)`.
    pub fn operands(&self) -> Vec<String> {
        let mut out = Vec::new();
        for n in self.expr.vars() {
            if let Some(a) = self.arrays.iter().find(|a| a.name == n) {
                out.push(format!("{n}: {} {}", a.dtype, crate::ShapeFmt(&a.shape)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_specs() {
        assert_eq!(
            split_named("--input", "x=a=b.npy").unwrap(),
            ("x", "a=b.npy")
        );
        for (s, want) in [
            ("x", "expected NAME=VALUE"),
            ("1x=f", "is not a name"),
            ("a-b=f", "is not a name"),
            ("nan=f", "a word of the expression language"),
        ] {
            let e = split_named("--input", s).unwrap_err().to_string();
            assert!(e.contains(want), "{s}: {e}");
        }
        let x = Named::zeros("x", DType::F32, &[2, 3]).unwrap();
        assert_eq!((x.strides.clone(), x.data.len()), (vec![3, 1], 24));
        let m = Named::zeros("m", DType::I64, &[3]).unwrap();
        let s = CondSpec::new("!(x > 0)", vec![&x, &m], &["x"]).unwrap();
        assert_eq!(s.shape, [2, 3]);
        assert!(s.cond().is_ok());
        for (t, want) in [
            ("y > 0", "'y' names no array (known: x, m)"),
            ("x > m", "compares x (f32) with m (i64)"),
            ("m > 0.5", "'0.5' is not a i64 value"),
            ("isnan(m)", "--input x is not used"),
        ] {
            let e = CondSpec::new(t, vec![&x, &m], &["x"])
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains(want), "{t}: {e}");
        }
    }
}

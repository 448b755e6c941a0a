//! Naming single-pass n-way kernels for ahead-of-time tables: an [`NwayKernelSpec`] is the key
//! of one ([`Engine::select_n`](crate::Engine::select_n) runs a flat call on it), and
//! [`NwayKernelSpec::for_call`] derives it from a description of a call the way the engine plans
//! one: the dtype, the output's shape, and per branch its condition's kind and its operands'
//! shapes. The spec itself stays opaque: its parts are the library's to change.

use smallvec::SmallVec;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernel::nway::{Form, NBranch, NCond, NwaySpec};
use crate::pred::{CmpOp, TestOp};

/// The key of one single-pass n-way kernel: the element width, each branch's condition kind
/// (mask, comparison or test, with the compared dtype), its negation, and whether each operand
/// is a full array or one element; not the length (one kernel runs every length). Made by
/// [`NwayKernelSpec::for_call`] or read from a table key
/// ([`parse_nway_key`](crate::aot::key::parse_nway_key)); exported with the `selectjit-aot`
/// crate's `KernelSet::add_nway`.
///
/// ```
/// use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
/// use selectjit::{CmpOp, DType};
/// // out = x < 0 ? 0 : x, over f32 (`x` and the default of the output's shape `n`).
/// let relu = |n| NwayBranch { cond: NwayCond::Cmp(CmpOp::Lt, DType::F32, n, &[]), not: false, value: &[] };
/// let n: &[usize] = &[1000];
/// let spec = NwayKernelSpec::for_call(DType::F32, n, &[relu(n)], n)?;
/// // One kernel for every length, and the same for i32 or u32 values (the width is the key).
/// assert_eq!(NwayKernelSpec::for_call(DType::U32, &[7], &[relu(&[7])], &[7])?, spec);
/// assert_eq!(spec.to_string(), "width 4: f32 < (full, one) ? one : full");
/// # Ok::<(), selectjit::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NwayKernelSpec(pub(crate) NwaySpec);

/// The condition of one branch of a described n-way call: a mask of this shape, a comparison
/// of two operands of this dtype and these shapes, or a test of one. An operand of the output's
/// shape is a full contiguous array (the output itself, read in place, is one; so is an operand
/// of as many elements that broadcasts into the output, its shape differing by dims of 1), an
/// operand all of whose dims are 1 (a scalar: `&[]`) one element; no other shape has a flat
/// single-pass kernel.
///
/// ```
/// use selectjit::aot::nway::NwayCond;
/// use selectjit::{CmpOp, DType, TestOp};
/// let shape: &[usize] = &[4, 250];
/// let _mask = NwayCond::Mask(shape);
/// let _gt_zero = NwayCond::Cmp(CmpOp::Gt, DType::I64, shape, &[]);
/// let _nan = NwayCond::Test(TestOp::IsNan, DType::F64, shape);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NwayCond<'a> {
    /// Mask bytes of this shape, any non-zero byte true.
    Mask(&'a [usize]),
    /// `lhs OP rhs`, both of the dtype; the shapes of lhs and rhs.
    Cmp(CmpOp, DType, &'a [usize], &'a [usize]),
    /// A test of one operand of the dtype, of this shape.
    Test(TestOp, DType, &'a [usize]),
}

/// One branch of a described n-way call: its condition, negated with `not`
/// ([`Cond::not`](crate::Cond::not)), and the shape of its value.
///
/// ```
/// use selectjit::aot::nway::{NwayBranch, NwayCond};
/// use selectjit::{DType, TestOp};
/// // nan_to_num's first branch: where x is NaN, a scalar 0.
/// let x: &[usize] = &[1 << 20];
/// let b = NwayBranch { cond: NwayCond::Test(TestOp::IsNan, DType::F32, x), not: false, value: &[] };
/// assert!(!b.not);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NwayBranch<'a> {
    /// The condition.
    pub cond: NwayCond<'a>,
    /// The branch is taken where the condition does not hold.
    pub not: bool,
    /// The shape of the value.
    pub value: &'a [usize],
}

impl NwayKernelSpec {
    /// The spec of the single-pass kernel [`Engine::select_n`](crate::Engine::select_n) runs a
    /// call of these shapes on (numpy broadcasting, every operand contiguous and row-major, the
    /// output too): `dtype` the select's, `out_shape` the output's, then the branches in call
    /// order and the default's shape. A comparison is planned as the engine's kernels compute
    /// it (`>` and `>=` with the operands swapped, `!=` as a negated `==`), so every spelling of
    /// one condition names one kernel. The spec has ordinary stores; a table's kernel serves
    /// calls that plan non-temporal ones too.
    ///
    /// A call whose operands all have the output's shape or one element runs on the kernel
    /// whatever its length; one whose operands differ from the output's shape by dims of 1
    /// runs on it where its output is at least 64 bytes (else in tiles of two-way kernels).
    ///
    /// An error when no flat single-pass kernel runs such a call: no branch, an empty output,
    /// or an operand neither of the output's elements nor of one element (the engine runs
    /// those in tiles of two-way kernels, or, where its code generator has them, on kernels of
    /// rows that tables do not hold).
    ///
    /// ```
    /// use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
    /// use selectjit::{CmpOp, DType, TestOp};
    /// let x: &[usize] = &[64, 64];
    /// // nan_to_num: NaN -> 0, +inf -> MAX, -inf -> MIN, else x (one pass, three branches).
    /// let branches = [
    ///     NwayBranch { cond: NwayCond::Test(TestOp::IsNan, DType::F64, x), not: false, value: &[] },
    ///     NwayBranch { cond: NwayCond::Cmp(CmpOp::Eq, DType::F64, x, &[]), not: false, value: &[] },
    ///     NwayBranch { cond: NwayCond::Cmp(CmpOp::Eq, DType::F64, x, &[]), not: false, value: &[] },
    /// ];
    /// let spec = NwayKernelSpec::for_call(DType::F64, x, &branches, x)?;
    /// assert!(spec.to_string().starts_with("width 8: isnan(f64) (full) ? one"));
    /// // != is a negated ==: the same kernel as `not` on ==.
    /// let ne = NwayBranch { cond: NwayCond::Cmp(CmpOp::Ne, DType::F64, x, &[]), ..branches[1] };
    /// let not_eq = NwayBranch { not: true, ..branches[1] };
    /// assert_eq!(
    ///     NwayKernelSpec::for_call(DType::F64, x, &[ne], x)?,
    ///     NwayKernelSpec::for_call(DType::F64, x, &[not_eq], x)?
    /// );
    /// // The output's elements in another shape of them: the same kernel.
    /// let x1: &[usize] = &[4096];
    /// let b1 = NwayBranch { cond: NwayCond::Test(TestOp::IsNan, DType::F64, x1), ..branches[0] };
    /// let flat = NwayKernelSpec::for_call(DType::F64, &[1, 4096], &[b1], x1)?;
    /// assert_eq!(NwayKernelSpec::for_call(DType::F64, x1, &[b1], x1)?, flat);
    /// // A row broadcast over the output: no flat kernel.
    /// let row = NwayBranch { value: &[64], ..branches[0] };
    /// let e = NwayKernelSpec::for_call(DType::F64, x, &[row], x).unwrap_err();
    /// assert!(e.to_string().contains("branch 0's value"));
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn for_call(
        dtype: DType,
        out_shape: &[usize],
        branches: &[NwayBranch<'_>],
        default: &[usize],
    ) -> Result<NwayKernelSpec> {
        let bad = |msg: String| Error::Invalid(format!("n-way kernel: {msg}"));
        if branches.is_empty() {
            return Err(bad("a call has at least one branch".into()));
        }
        let n = out_shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| bad(format!("output shape {out_shape:?} overflows")))?;
        if n == 0 {
            return Err(bad(format!(
                "output shape {out_shape:?} is empty: no kernel runs"
            )));
        }
        // As the engine plans: the output's shape is a full array, dims all 1 one element; a
        // shape that broadcasts into the output with all its elements is a full array too (the
        // dims of 1 collapse away).
        let broadcasts = |shape: &[usize]| {
            shape.len() <= out_shape.len()
                && shape
                    .iter()
                    .rev()
                    .zip(out_shape.iter().rev())
                    .all(|(&d, &o)| d == o || d == 1)
        };
        let form = |shape: &[usize], what: &dyn Fn() -> String| -> Result<Form> {
            if shape == out_shape {
                Ok(Form::Full)
            } else if shape.len() <= out_shape.len() && shape.iter().all(|&d| d == 1) {
                Ok(Form::Splat)
            } else if broadcasts(shape)
                && shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) == Some(n)
            {
                Ok(Form::Full)
            } else {
                Err(bad(format!(
                    "{} has shape {shape:?}, neither the output's {out_shape:?} elements nor \
                     one: the engine runs such a call in tiles of two-way kernels or on a \
                     kernel of rows, and tables hold flat n-way kernels only",
                    what()
                )))
            }
        };
        let mut out: SmallVec<[NBranch; 8]> = SmallVec::new();
        for (i, b) in branches.iter().enumerate() {
            let (cond, not) = match b.cond {
                NwayCond::Mask(s) => (
                    NCond::Mask(form(s, &|| format!("branch {i}'s mask"))?),
                    b.not,
                ),
                NwayCond::Cmp(op, d, l, r) => {
                    let (canon, swap, negate) = op.canonical();
                    let (l, r) = if swap { (r, l) } else { (l, r) };
                    let lf = form(l, &|| format!("branch {i}'s comparison operand"))?;
                    let rf = form(r, &|| format!("branch {i}'s comparison operand"))?;
                    (NCond::Cmp(canon, d, lf, rf), b.not ^ negate)
                }
                NwayCond::Test(op, d, s) => (
                    NCond::Test(op, d, form(s, &|| format!("branch {i}'s tested operand"))?),
                    b.not,
                ),
            };
            let value = form(b.value, &|| format!("branch {i}'s value"))?;
            out.push(NBranch { cond, not, value });
        }
        let default = form(default, &|| "the default".to_string())?;
        Ok(NwayKernelSpec(NwaySpec {
            width: dtype.width(),
            nt: false,
            rows: false,
            branches: out,
            default,
            // Which full operands share a buffer is left out: the exported kernels load each
            // operand on their own, which serves every call of the spec (see `AotTable::nway`).
            same: SmallVec::new(),
        }))
    }
}

impl std::fmt::Display for NwayKernelSpec {
    /// `width W: COND (FORMS) ? VALUE : ... : DEFAULT`, each form `full` or `one`; a negated
    /// condition is prefixed with `!`; `nt` and `rows` follow the width where set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.0;
        let form = |x: Form| match x {
            Form::Full => "full",
            Form::Splat => "one",
        };
        write!(f, "width {}", s.width)?;
        if s.nt {
            f.write_str(" nt")?;
        }
        if s.rows {
            f.write_str(" rows")?;
        }
        f.write_str(":")?;
        for b in &s.branches {
            let not = if b.not { "!" } else { "" };
            match b.cond {
                NCond::Mask(m) => write!(f, " {not}mask ({})", form(m))?,
                NCond::Cmp(op, d, l, r) => {
                    write!(f, " {not}{d} {} ({}, {})", op.symbol(), form(l), form(r))?
                }
                NCond::Test(op, d, v) => write!(f, " {not}{}({d}) ({})", op.name(), form(v))?,
            }
            write!(f, " ? {} :", form(b.value))?;
        }
        write!(f, " {}", form(s.default))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask<'a>(s: &'a [usize], v: &'a [usize]) -> NwayBranch<'a> {
        NwayBranch {
            cond: NwayCond::Mask(s),
            not: false,
            value: v,
        }
    }

    /// Calls without a flat kernel are errors that say why, never panics.
    #[test]
    fn calls_without_a_flat_kernel_are_errors() {
        let x: &[usize] = &[4, 5];
        let err = |out: &[usize], b: &[NwayBranch<'_>], d: &[usize]| {
            NwayKernelSpec::for_call(DType::F32, out, b, d)
                .unwrap_err()
                .to_string()
        };
        assert!(err(x, &[], x).contains("at least one branch"));
        assert!(err(&[4, 0], &[mask(&[4, 0], &[])], &[]).contains("empty"));
        assert!(err(&[usize::MAX, 3], &[mask(&[], &[])], &[]).contains("overflows"));
        for (m, v, d, needle) in [
            (&[5][..], &[][..], &[][..], "branch 0's mask"), // a row broadcast
            (&[4, 1][..], &[][..], &[][..], "branch 0's mask"), // a column
            (x, &[2, 4, 5][..], &[][..], "branch 0's value"), // more dims than the output
            (x, x, &[5, 4][..], "the default"),              // transposed
        ] {
            let e = err(x, &[mask(m, v)], d);
            assert!(e.contains(needle), "{e}");
        }
        // An operand with the output's elements and dims of 1 added or left out is full.
        let full = NwayKernelSpec::for_call(DType::F32, x, &[mask(x, x)], x).unwrap();
        let out: &[usize] = &[1, 4, 1, 5];
        let same = NwayKernelSpec::for_call(DType::F32, out, &[mask(&[4, 1, 5], out)], &[4, 1, 5]);
        assert_eq!(same.unwrap(), full);
    }

    /// Comparisons are planned in the kernels' canonical form: `>` / `>=` swap the operands,
    /// `!=` negates `==`.
    #[test]
    fn comparisons_are_canonical() {
        let x: &[usize] = &[9];
        let spec = |op, not| {
            let b = NwayBranch {
                cond: NwayCond::Cmp(op, DType::I64, x, &[]),
                not,
                value: x,
            };
            NwayKernelSpec::for_call(DType::I8, x, &[b], &[])
                .unwrap()
                .to_string()
        };
        assert_eq!(
            spec(CmpOp::Lt, false),
            "width 1: i64 < (full, one) ? full : one"
        );
        assert_eq!(
            spec(CmpOp::Gt, false),
            "width 1: i64 < (one, full) ? full : one"
        );
        assert_eq!(
            spec(CmpOp::Ge, true),
            "width 1: !i64 <= (one, full) ? full : one"
        );
        assert_eq!(spec(CmpOp::Ne, false), spec(CmpOp::Eq, true));
        assert_eq!(spec(CmpOp::Ne, true), spec(CmpOp::Eq, false));
    }
}

//! The selects of `selectjit.arrow` on arrow-select's `zip`: the signatures and results of the
//! `selectjit-arrow` crate's `zip`, `if_else` and `case_when`, correct but without its kernels.

use arrow_array::{Array, ArrayRef, BooleanArray, Datum, new_null_array};
use arrow_buffer::{BooleanBuffer, NullBuffer};
use arrow_schema::ArrowError;

pub use arrow_select::zip::zip;

/// A condition of `case_when`: a mask (null = false). Predicates over columns are the crate's.
pub enum When<'a> {
    Mask(&'a BooleanArray),
}

/// Arrow C++'s `if_else`: `zip`, except that a null condition gives a null output.
pub fn if_else(
    cond: &BooleanArray,
    left: &dyn Datum,
    right: &dyn Datum,
) -> Result<ArrayRef, ArrowError> {
    let out = zip(cond, left, right)?;
    match cond.nulls() {
        Some(n) if n.null_count() > 0 => {
            let data = out.to_data();
            let nulls = NullBuffer::union(data.nulls(), Some(n));
            Ok(arrow_array::make_array(
                data.into_builder().nulls(nulls).build()?,
            ))
        }
        _ => Ok(out),
    }
}

/// SQL `CASE WHEN`: the first true condition (null = false) picks its value, else `default`
/// (`None`: null).
pub fn case_when(
    conds: &[When<'_>],
    values: &[&dyn Datum],
    default: Option<&dyn Datum>,
) -> Result<ArrayRef, ArrowError> {
    if conds.len() != values.len() || conds.is_empty() {
        return Err(ArrowError::InvalidArgumentError(format!(
            "case_when: {} conditions and {} values",
            conds.len(),
            values.len()
        )));
    }
    let len = match conds[0] {
        When::Mask(m) => m.len(),
    };
    let dtype = values[0].get().0.data_type().clone();
    let mut acc: ArrayRef = match default {
        Some(d) => {
            let none = BooleanArray::new(BooleanBuffer::new_unset(len), None);
            zip(&none, d, d)?
        }
        None => new_null_array(&dtype, len),
    };
    for (c, v) in conds.iter().zip(values).rev() {
        let When::Mask(m) = c;
        acc = zip(m, *v, &acc)?;
    }
    Ok(acc)
}

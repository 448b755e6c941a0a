//! Arrow columns on selectjit: arrow-rs [`zip`], Arrow C++'s [`if_else`] and SQL's
//! [`case_when`] over Arrow's bit-packed conditions and validity bitmaps.
//!
//! Fixed-width types (integers, floats incl. f16, booleans, dates, times, timestamps,
//! durations, intervals, decimals, fixed-size binary) run on selectjit's kernels: the
//! condition bitmap is expanded into byte masks 4096 rows at a time and the output's validity
//! is computed 64 rows per step ([`selectjit::bits`]). Variable-width and nested types (strings,
//! binary, views, lists, dictionaries, structs, ...) take arrow-rs's own `zip`: correct, not
//! faster. The two null rules:
//!
//! - [`zip`] (arrow-rs, DataFusion, Polars): a null condition counts as false; an output slot
//!   is valid exactly when the side it takes is valid.
//! - [`if_else`] (Arrow C++, pyarrow): a null condition gives a null output; otherwise as
//!   [`zip`].
//!
//! [`case_when`] takes the first true condition (a null condition is false), its conditions
//! given as [`BooleanArray`]s or as comparisons of columns and scalars ([`When`]).
//!
//! ```
//! use arrow_array::{Array, BooleanArray, Int32Array};
//! let mask = BooleanArray::from(vec![Some(true), None, Some(false)]);
//! let a = Int32Array::from(vec![1, 2, 3]);
//! let b = Int32Array::new_scalar(0);
//! let z = selectjit_arrow::zip(&mask, &a, &b).unwrap();
//! assert_eq!(z.as_ref(), &Int32Array::from(vec![1, 0, 0]) as &dyn Array);
//! let e = selectjit_arrow::if_else(&mask, &a, &b).unwrap();
//! assert_eq!(e.as_ref(), &Int32Array::from(vec![Some(1), None, Some(0)]) as &dyn Array);
//! ```

mod cmp;
mod fixed;

use arrow_array::{ArrayRef, BooleanArray, Datum};
use arrow_schema::{ArrowError, DataType};
use selectjit::bits::NullRule;

pub use selectjit::CmpOp;

/// `mask ? truthy : falsy` row by row, arrow-rs's `arrow_select::zip::zip` with its signature
/// and exactly its result: a null mask slot counts as false; an output slot is valid iff the
/// side it takes is valid; a null scalar is a side whose every slot is null. `truthy` and
/// `falsy` are arrays of the mask's length or scalars (`Scalar<ArrayRef>`), of one data type;
/// the output has `truthy`'s data type (timezones, decimal precision and scale kept).
///
/// Errors as arrow-rs's (`ArrowError::InvalidArgumentError`): data types that differ, arrays
/// of another length, scalars of more than one element.
///
/// ```
/// use arrow_array::{Array, BooleanArray, Float64Array};
/// let mask = BooleanArray::from(vec![Some(true), Some(false), None]);
/// let x = Float64Array::from(vec![Some(1.0), None, Some(3.0)]);
/// let y = Float64Array::from(vec![10.0, 20.0, 30.0]);
/// let out = selectjit_arrow::zip(&mask, &x, &y).unwrap();
/// assert_eq!(out.as_ref(), &Float64Array::from(vec![1.0, 20.0, 30.0]) as &dyn Array);
/// ```
pub fn zip(
    mask: &BooleanArray,
    truthy: &dyn Datum,
    falsy: &dyn Datum,
) -> Result<ArrayRef, ArrowError> {
    fixed::select2(mask, truthy, falsy, NullRule::NullIsFalse)
}

/// `cond ? left : right` under Arrow C++'s rule (`pyarrow.compute.if_else`): a null condition
/// gives a null output; otherwise as [`zip`]. Arguments and errors as [`zip`]'s.
///
/// ```
/// use arrow_array::{Array, BooleanArray, Int64Array};
/// let cond = BooleanArray::from(vec![Some(true), Some(false), None]);
/// let l = Int64Array::from(vec![1, 2, 3]);
/// let r = Int64Array::new_scalar(-1);
/// let out = selectjit_arrow::if_else(&cond, &l, &r).unwrap();
/// assert_eq!(out.as_ref(), &Int64Array::from(vec![Some(1), Some(-1), None]) as &dyn Array);
/// ```
pub fn if_else(
    cond: &BooleanArray,
    left: &dyn Datum,
    right: &dyn Datum,
) -> Result<ArrayRef, ArrowError> {
    fixed::select2(cond, left, right, NullRule::NullPropagates)
}

/// SQL `CASE WHEN c1 THEN v1 WHEN c2 THEN v2 ... ELSE default END`: each row takes the value of
/// its first true condition (a null condition is false), else `default`; `default: None` is
/// SQL without `ELSE` (null where no condition is true). Values and the default are arrays of
/// the conditions' length or scalars, of one data type (the output's). The length is that of
/// the first array among the conditions, values and default (1 when every one is a scalar).
///
/// Fixed-width types run as one n-way select (the conditions' bitmaps expanded into byte
/// masks) plus the output's validity 64 rows per step; booleans select words of bits; other
/// types are a chain of arrow-rs `zip`s from the last branch backwards (correct, slower).
///
/// Errors (`ArrowError::InvalidArgumentError`, nothing computed): as many values as
/// conditions, data types that differ, arrays of another length, scalars of more than one
/// element, no value and no default; a [`When::Cmp`] as arrow's comparison kernels refuse it.
///
/// ```
/// use arrow_array::{Array, BooleanArray, Int32Array};
/// use selectjit_arrow::{case_when, CmpOp, When};
/// let qty = Int32Array::from(vec![Some(3), Some(50), None, Some(500)]);
/// let ten = Int32Array::new_scalar(10);
/// let hundred = Int32Array::new_scalar(100);
/// let small = Int32Array::new_scalar(1);
/// let medium = Int32Array::new_scalar(2);
/// // CASE WHEN qty < 10 THEN 1 WHEN qty < 100 THEN 2 END
/// let out = case_when(
///     &[When::Cmp(CmpOp::Lt, &qty, &ten), When::Cmp(CmpOp::Lt, &qty, &hundred)],
///     &[&small, &medium],
///     None,
/// )
/// .unwrap();
/// assert_eq!(out.as_ref(), &Int32Array::from(vec![Some(1), Some(2), None, None]) as &dyn Array);
/// ```
pub fn case_when(
    conds: &[When<'_>],
    values: &[&dyn Datum],
    default: Option<&dyn Datum>,
) -> Result<ArrayRef, ArrowError> {
    fixed::case_when(conds, values, default)
}

/// The engine every call of this crate runs on (`Send + Sync`; its kernels compiled once, its
/// output pool shared): the library's defaults with the environment's `SELECTJIT_*` settings
/// (`EngineConfig::from_env`), made on first use. Code in the same process that wants the
/// same settings (the Python package's default engine) takes this one rather than a second
/// cache of the same kernels. A malformed setting, or a tier this host cannot run, is the
/// error of every call that needs it.
///
/// ```
/// let engine = selectjit_arrow::shared_engine().expect("the default settings");
/// assert!(std::ptr::eq(engine, selectjit_arrow::shared_engine().unwrap()));
/// ```
pub fn shared_engine() -> Result<&'static selectjit::Engine, &'static selectjit::Error> {
    fixed::shared_engine()
}

/// Whether [`When::Cmp`] of two operands of type `dt` is computed by selectjit's kernel on the
/// values as they are: integers, and dates, times, timestamps and durations as their integers.
/// Floats are compared there too, after a pass that makes their total-order keys; other types
/// go through arrow's kernels.
///
/// ```
/// use arrow_schema::{DataType, TimeUnit};
/// use selectjit_arrow::cmp_in_kernel;
/// assert!(cmp_in_kernel(&DataType::Int32));
/// assert!(cmp_in_kernel(&DataType::Timestamp(TimeUnit::Microsecond, None)));
/// assert!(!cmp_in_kernel(&DataType::Float64));
/// assert!(!cmp_in_kernel(&DataType::Utf8));
/// ```
pub fn cmp_in_kernel(dt: &DataType) -> bool {
    cmp::kernel_dtype(dt).is_some_and(|(_, float)| !float)
}

/// One condition of [`case_when`].
///
/// ```
/// use arrow_array::{BooleanArray, Float64Array};
/// use selectjit_arrow::{CmpOp, When};
/// let m = BooleanArray::from(vec![true, false]);
/// let x = Float64Array::from(vec![0.5, 2.0]);
/// let one = Float64Array::new_scalar(1.0);
/// let conds = [When::Mask(&m), When::Cmp(CmpOp::Gt, &x, &one)];
/// assert_eq!(conds.len(), 2);
/// ```
#[derive(Clone, Copy)]
pub enum When<'a> {
    /// A boolean column; a null slot is false.
    Mask(&'a BooleanArray),
    /// `lhs OP rhs` of two columns, or of a column and a scalar, of one data type: arrow's
    /// comparison kernels' result (`arrow_ord::cmp`; floats in IEEE total order: `NaN` equals
    /// `NaN` and is greater than every number, `-0.0 < 0.0`), a null operand giving a null,
    /// hence false. Integers, floats, dates, times, timestamps and durations are compared in
    /// selectjit's kernels (floats through their total-order integer keys), then the slots with
    /// a null operand are cleared; other types through arrow's kernels.
    Cmp(CmpOp, &'a dyn Datum, &'a dyn Datum),
}

impl std::fmt::Debug for When<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            When::Mask(m) => f.debug_tuple("Mask").field(m).finish(),
            When::Cmp(op, l, r) => f
                .debug_tuple("Cmp")
                .field(op)
                .field(&l.get().0.data_type())
                .field(&r.get().0.data_type())
                .finish(),
        }
    }
}

fn invalid(msg: &str) -> ArrowError {
    ArrowError::InvalidArgumentError(msg.into())
}

/// A selectjit error where none can happen (the arguments were checked first).
fn compute(e: selectjit::Error) -> ArrowError {
    ArrowError::ComputeError(e.to_string())
}

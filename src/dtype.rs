//! Element types. Select moves elements without computing on them, so kernels depend only on the
//! element *width*; the dtype is kept for validation, file I/O and messages.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// Every element type of the contract (docs/semantics.md, "Element types"). Strings go through
/// [`crate::select_generic`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// One byte, 0 or 1 (numpy `bool`).
    Bool,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64`.
    U64,
    /// IEEE half precision ([`half::f16`]).
    F16,
    /// bfloat16 ([`half::bf16`]).
    BF16,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// Two `f32`s ([`num_complex::Complex<f32>`]).
    Complex64,
    /// Two `f64`s ([`num_complex::Complex<f64>`]).
    Complex128,
}

impl DType {
    /// All dtypes, in a fixed order.
    pub const ALL: [DType; 15] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::Complex64,
        DType::Complex128,
    ];

    /// Width of one element in bytes.
    ///
    /// ```
    /// use selectjit::DType;
    /// assert_eq!(DType::Bool.width(), 1);
    /// assert_eq!(DType::BF16.width(), 2);
    /// assert_eq!(DType::F32.width(), 4);
    /// assert_eq!(DType::Complex128.width(), 16);
    /// ```
    pub const fn width(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 | DType::Complex64 => 8,
            DType::Complex128 => 16,
        }
    }

    /// The name used on the command line and in messages (`f32`, `bf16`, `complex64`, ...).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::DType;
    /// assert_eq!(DType::BF16.name(), "bf16");
    /// assert_eq!(DType::Complex64.to_string(), "complex64");
    /// // Names (and numpy's aliases) parse back.
    /// assert_eq!("float32".parse::<DType>()?, DType::F32);
    /// # Ok(())
    /// # }
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Complex64 => "complex64",
            DType::Complex128 => "complex128",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let alias = match s {
            "float32" => "f32",
            "float64" => "f64",
            "float16" => "f16",
            "bfloat16" => "bf16",
            "c64" => "complex64",
            "c128" => "complex128",
            other => other,
        };
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == alias)
            .ok_or_else(|| Error::Invalid(format!("unknown dtype '{s}'")))
    }
}

/// A plain-old-data element that the kernels may move as raw bytes.
///
/// Implemented for the fixed-width types of the contract. `bool` is not here because a Rust `bool`
/// may only hold 0 or 1; boolean data goes through `u8` (as the cond does) or the byte-level API
/// with [`DType::Bool`].
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The dtype this Rust type stands for.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl Element for $t { const DTYPE: DType = DType::$d; })*
    };
}

element! {
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    half::f16 => F16, half::bf16 => BF16, f32 => F32, f64 => F64,
    num_complex::Complex<f32> => Complex64, num_complex::Complex<f64> => Complex128,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_match_rust_sizes() {
        assert_eq!(DType::F16.width(), size_of::<half::f16>());
        assert_eq!(DType::BF16.width(), size_of::<half::bf16>());
        assert_eq!(
            DType::Complex64.width(),
            size_of::<num_complex::Complex<f32>>()
        );
        assert_eq!(
            DType::Complex128.width(),
            size_of::<num_complex::Complex<f64>>()
        );
        assert_eq!(DType::Bool.width(), 1);
    }

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
        }
        assert_eq!("bfloat16".parse::<DType>().unwrap(), DType::BF16);
        assert!("f128".parse::<DType>().is_err());
    }
}

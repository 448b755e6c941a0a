//! The one error type of the crate. Every failure on user input is a value of [`Error`], never a panic.

use std::fmt;

/// Shapes as they appear in messages: `[2,3,4]`, `[]` for a scalar.
pub struct ShapeFmt<'a>(pub &'a [usize]);

impl fmt::Display for ShapeFmt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// Everything that can go wrong in a select call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The shapes cannot be broadcast under the chosen mode. The message names the mode, the three
    /// shapes and the first offending input and dimension.
    #[error("{0}")]
    Broadcast(String),
    /// A shape has more dimensions than the supported maximum.
    #[error("{what} has rank {rank}, more than the supported maximum of {max}")]
    RankTooLarge {
        /// The operand (`cond`, `then`, `else`, `output`).
        what: &'static str,
        /// Its rank.
        rank: usize,
        /// The largest rank accepted.
        max: usize,
    },
    /// A shape's element count (or a byte extent derived from it) does not fit in `usize`.
    #[error("{what} {shape}: element count or byte extent overflows usize")]
    Overflow {
        /// The operand.
        what: &'static str,
        /// Its shape, as in messages.
        shape: String,
    },
    /// A buffer, its shape, strides and offset do not fit together (an addressed element outside
    /// the buffer, overlapping output elements, a stride count that is not the rank).
    #[error("{what}: {msg}")]
    Layout {
        /// The operand (`cond`, `then`, `else`, `output`).
        what: &'static str,
        /// What is wrong, naming the dimension where one is at fault.
        msg: String,
    },
    /// The element types of the operands disagree, or a dtype is not allowed where it was given.
    #[error("dtype mismatch: {0}")]
    DType(String),
    /// The output is not the shape the broadcast rule produces.
    #[error("output has shape {got} but the inputs broadcast to {expected}")]
    OutputShape {
        /// The output's shape.
        got: String,
        /// The broadcast shape of the inputs.
        expected: String,
    },
    /// An argument outside the allowed range (e.g. a pdpd axis below -1).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// Code generation failed. The engine records this and serves the call with the static kernels.
    #[error("code generation failed: {0}")]
    Codegen(String),
    /// An ahead-of-time kernel table was rejected: for another machine, a format this library
    /// does not read, or corrupted. An engine given it serves every call without it.
    #[error("kernel table rejected: {0}")]
    Aot(String),
    /// Reading or writing a file (CLI only).
    #[error("{0}")]
    Io(String),
}

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, Error>;

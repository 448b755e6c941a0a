//! The one error type of the crate. Every failure on user input is a value of [`Error`], never a panic.

use std::fmt;

/// Shapes as they appear in messages: `[2,3,4]`, `[]` for a scalar.
pub(crate) struct ShapeFmt<'a>(pub(crate) &'a [usize]);

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

/// Everything that can go wrong. Each variant says what failed and where; the variants that
/// wrap another error (code generation, I/O) keep it as their [`std::error::Error::source`].
/// More variants may be added in later releases.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The shapes cannot be broadcast under the chosen mode. The message names the mode, the three
    /// shapes and the first offending input and dimension.
    Broadcast(String),
    /// A shape has more dimensions than the supported maximum.
    RankTooLarge {
        /// The operand (`cond`, `then`, `else`, `output`, `lhs`, `rhs`).
        what: &'static str,
        /// Its rank.
        rank: usize,
        /// The largest rank accepted.
        max: usize,
    },
    /// A shape's element count (or a byte extent derived from it) does not fit in `usize`.
    Overflow {
        /// The operand.
        what: &'static str,
        /// Its shape, as in messages.
        shape: String,
    },
    /// A buffer, its shape, strides and offset do not fit together (an addressed element outside
    /// the buffer, overlapping output elements, a stride count that is not the rank).
    Layout {
        /// The operand (`cond`, `then`, `else`, `output`, `lhs`, `rhs`).
        what: &'static str,
        /// What is wrong, naming the dimension where one is at fault.
        msg: String,
    },
    /// The element types of the operands disagree, or a dtype is not allowed where it was given.
    DType(String),
    /// The output is not the shape the broadcast rule produces.
    OutputShape {
        /// The output's shape.
        got: String,
        /// The broadcast shape of the inputs.
        expected: String,
    },
    /// An argument or setting outside the allowed range (a pdpd axis below -1, a tier this
    /// host cannot run, a malformed environment variable).
    Invalid(String),
    /// Code generation failed. The engine records this ([`crate::Engine::last_codegen_error`])
    /// and serves the call with the static kernels; the code generator's own error, when it
    /// gave one, is the source.
    Codegen {
        /// What was being generated, and what went wrong.
        what: String,
        /// The code generator's error (Cranelift's, the assembler's, the system's).
        source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
    },
    /// An ahead-of-time kernel table was rejected: for another machine, a format this library
    /// does not read, or corrupted.
    Aot(String),
    /// Reading or writing a file (the command line's `.npy` and kernel files).
    Io {
        /// The file (or what was being read or written).
        path: String,
        /// The system's error.
        source: std::sync::Arc<std::io::Error>,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Broadcast(m) => f.write_str(m),
            Error::RankTooLarge { what, rank, max } => write!(
                f,
                "{what} has rank {rank}, more than the supported maximum of {max}"
            ),
            Error::Overflow { what, shape } => write!(
                f,
                "{what} {shape}: element count or byte extent overflows usize"
            ),
            Error::Layout { what, msg } => write!(f, "{what}: {msg}"),
            Error::DType(m) => write!(f, "dtype mismatch: {m}"),
            Error::OutputShape { got, expected } => write!(
                f,
                "output has shape {got} but the inputs broadcast to {expected}"
            ),
            Error::Invalid(m) => write!(f, "invalid argument: {m}"),
            Error::Codegen { what, .. } => write!(f, "code generation failed: {what}"),
            Error::Aot(m) => write!(f, "kernel table rejected: {m}"),
            Error::Io { path, source } => write!(f, "{path}: {source}"),
        }
    }
}

/// The source of a code-generation or I/O error is the wrapped error itself (not the `Arc`
/// holding it), so `downcast_ref::<std::io::Error>()` on it works.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Codegen {
                source: Some(e), ..
            } => Some(&**e),
            Error::Io { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

impl Error {
    /// A code-generation error with no underlying error (for generators and exporters built
    /// on the library).
    ///
    /// ```
    /// let e = selectjit::Error::codegen("no target for this signature");
    /// assert!(matches!(e, selectjit::Error::Codegen { .. }));
    /// assert!(e.to_string().contains("no target for this signature"));
    /// ```
    pub fn codegen(what: impl Into<String>) -> Error {
        Error::Codegen {
            what: what.into(),
            source: None,
        }
    }

    /// A code-generation error caused by `source`, kept as its
    /// [`source`](std::error::Error::source).
    ///
    /// ```
    /// use std::error::Error as _;
    /// let io = std::io::Error::other("mmap refused");
    /// let e = selectjit::Error::codegen_from("executable memory", io);
    /// assert!(e.to_string().contains("executable memory"));
    /// assert_eq!(e.source().unwrap().to_string(), "mmap refused");
    /// ```
    pub fn codegen_from(
        what: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Codegen {
            what: what.into(),
            source: Some(std::sync::Arc::new(source)),
        }
    }

    /// This error with `ctx` (e.g. the signature being compiled) in front of a code-generation
    /// error's description; other errors are returned as they are.
    ///
    /// ```
    /// use selectjit::Error;
    /// let e = Error::codegen("unsupported width").in_context("w3 [7]");
    /// assert!(e.to_string().contains("w3 [7]: unsupported width"));
    /// let other = Error::Invalid("bad".into()).in_context("w3 [7]");
    /// assert_eq!(other.to_string(), Error::Invalid("bad".into()).to_string());
    /// ```
    pub fn in_context(self, ctx: impl std::fmt::Display) -> Error {
        match self {
            Error::Codegen { what, source } => Error::Codegen {
                what: format!("{ctx}: {what}"),
                source,
            },
            e => e,
        }
    }

    /// An I/O error on `path`.
    ///
    /// ```
    /// use std::error::Error as _;
    /// use std::io::{Error as IoError, ErrorKind};
    /// let e = selectjit::Error::io("weights.npy", IoError::from(ErrorKind::NotFound));
    /// assert!(e.to_string().starts_with("weights.npy: "));
    /// assert_eq!(
    ///     e.source().unwrap().to_string(),
    ///     IoError::from(ErrorKind::NotFound).to_string()
    /// );
    /// ```
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source: std::sync::Arc::new(source),
        }
    }
}

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, Error>;

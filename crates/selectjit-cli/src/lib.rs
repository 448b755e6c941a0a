//! The `selectjit` command (`run`, `bench`, `explain`, `info`, `aot`) and what it needs beside
//! the library: `.npy` I/O and the text of `explain`.
#![warn(missing_docs)]

mod cli;
pub mod explain;
pub mod npy;
pub mod pred;

pub use cli::main;

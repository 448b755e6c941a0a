//! The `selectjit` command (`run`, `bench`, `explain`, `info`, `aot`) and what it needs beside
//! the library: `.npy` I/O and the text of `explain`. Without the default feature `command`,
//! only the `.npy` I/O (`npy`).
#![warn(missing_docs)]

#[cfg(feature = "command")]
mod cli;
#[cfg(feature = "command")]
pub mod explain;
pub mod npy;
#[cfg(feature = "command")]
pub mod pred;
// `skip(what, why)`: `SKIPPED: ...` on stderr, a failure under `SELECTJIT_REQUIRE_ALL_TIERS=1`
// (as `.ci/run` sets), shared with the workspace's other tests.
#[cfg(test)]
#[path = "../../../tests/common/skip.rs"]
mod skip;

#[cfg(feature = "command")]
pub use cli::main;

/// Shapes as the library writes them in messages: `[2,3,4]`, `[]` for a scalar.
pub(crate) struct ShapeFmt<'a>(pub(crate) &'a [usize]);

impl std::fmt::Display for ShapeFmt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self.0.iter().map(|d| d.to_string()).collect();
        write!(f, "[{}]", dims.join(","))
    }
}

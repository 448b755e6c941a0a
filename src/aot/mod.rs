//! Ahead-of-time kernels, for hosts that forbid generating code at run time.
//!
//! The `selectjit-aot` crate (and `selectjit aot` on the command line) compiles kernels (exact
//! kernels by signature, shape-generic kernels by pattern) for any Cranelift target into one
//! relocatable object, with a table ([`SelectjitAotTable`], C layout) that maps each kernel's
//! key to its function, and a C header. This module is the side a program links: linked into
//! it, the table is registered with [`AotTable::from_raw`], which checks it against the host
//! (a table for another machine or format is an error), and given to an engine
//! ([`crate::EngineConfig::aot`]): the engine then runs the exact kernel of a signature when
//! the table has it, else the shape-generic kernel of its pattern, else the static kernels (or
//! its code generator, if it has one). A table may also hold single-pass n-way kernels (by
//! [`nway::NwayKernelSpec`]): an n-way select ([`crate::Engine::select_n`]) whose flat call
//! has one runs on it in one pass, before the engine's code generator is asked.
//!
//! ```no_run
//! use selectjit::aot::{AotTable, SelectjitAotTable};
//! use selectjit::{Backend, Engine, EngineConfig};
//!
//! unsafe extern "C" {
//!     // Defined by the object `selectjit aot` (or `aot::export` in a build script) wrote.
//!     static selectjit_aot_table: SelectjitAotTable;
//! }
//!
//! fn engine() -> selectjit::Result<Engine> {
//!     // SAFETY: the table comes from an object exported by this library and linked into the
//!     // program.
//!     let table = unsafe { AotTable::from_raw(&raw const selectjit_aot_table) }?;
//!     // No code generation at run time: the table's kernels, else the static kernels.
//!     Engine::with_config(EngineConfig::new().backend(Backend::Static).aot(table))
//! }
//! # fn main() {} // (this example is not linked with a table)
//! ```
//!
//! Nothing here needs Cranelift: the no-JIT build (`default-features = false`) registers and
//! serves tables too.

pub mod format;
mod host;
pub mod key;
pub mod nway;
mod table;

pub use format::{
    AOT_EXACT, AOT_GENERIC, AOT_MAGIC, AOT_MAX_ENTRIES, AOT_MAX_KEY_BYTES, AOT_MIN_VERSION,
    AOT_NWAY, AOT_VERSION, C_TYPES, SelectjitAotEntry, SelectjitAotTable, SelectjitKernelFn,
    SelectjitNwayFn,
};
pub use table::AotTable;

/// The symbol of a table unless its exporter was told otherwise.
pub const DEFAULT_SYMBOL: &str = "selectjit_aot_table";

/// The architecture of this host as tables name it (`x86_64`, `aarch64`, `s390x`, `riscv64`).
///
/// ```
/// // Tables name architectures as Rust does.
/// assert_eq!(selectjit::aot::host_arch(), std::env::consts::ARCH);
/// ```
pub fn host_arch() -> String {
    format::arch_name(target_lexicon::Triple::host().architecture)
}

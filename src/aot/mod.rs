//! Ahead-of-time kernels, for hosts that forbid generating code at run time.
//!
//! [`export`] compiles the kernels of a [`KernelSet`] (exact kernels by [`Signature`],
//! shape-generic kernels by [`Pattern`]) for any Cranelift target into one relocatable object,
//! with a table ([`SelectjitAotTable`], C layout) that maps each kernel's key ([`key`]) to its
//! function, and a C header. Linked into a program, the table is registered with
//! [`AotTable::from_raw`], which checks it against the host, and given to an engine
//! ([`crate::EngineConfig::aot`], [`crate::Engine::with_aot`]): the engine then runs the exact
//! kernel of a signature when the table has it, else the shape-generic kernel of its pattern,
//! else the static kernels (or its code generator, if it has one).
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
//! fn engine() -> Engine {
//!     // SAFETY: the table comes from an object exported by this library and linked into the
//!     // program.
//!     let table = unsafe { AotTable::from_raw(&raw const selectjit_aot_table) };
//!     let config = EngineConfig { backend: Backend::Static, ..EngineConfig::default() };
//!     Engine::with_aot(config, table) // no code generation at run time
//! }
//! # fn main() {} // (this example is not linked with a table)
//! ```
//!
//! [`Signature`]: crate::plan::Signature
//! [`Pattern`]: crate::jit::Pattern

mod export;
pub mod key;
mod object;
mod shapes;
mod table;

pub use export::{DEFAULT_SYMBOL, ExportOptions, Exported, KernelSet, Kinds, export};
pub use object::{ObjectSummary, check_object};
pub use shapes::{ShapesFile, parse_shapes};
pub use table::{
    AOT_EXACT, AOT_GENERIC, AOT_MAGIC, AOT_MAX_ENTRIES, AOT_MAX_KEY_BYTES, AOT_VERSION, AotTable,
    C_TYPES, SelectjitAotEntry, SelectjitAotTable, SelectjitKernelFn,
};

/// The architecture of this host as tables name it (`x86_64`, `aarch64`, `s390x`, `riscv64`).
pub fn host_arch() -> String {
    table::arch_name(target_lexicon::Triple::host().architecture)
}

//! The no-JIT build of selectjit, as a runtime on a host that forbids executable memory embeds
//! it: `selectjit = { default-features = false }`, and the kernels of its calls exported ahead
//! of time by `build.rs` and linked into the program.
#![warn(clippy::undocumented_unsafe_blocks)]

use selectjit::aot::{AotTable, SelectjitAotTable};
use selectjit::{Backend, Engine, EngineConfig};

unsafe extern "C" {
    /// The table of the object `build.rs` exported for this target (every valid conformance
    /// case, five element widths).
    static selectjit_aot_table: SelectjitAotTable;
}

/// The linked table, registered through the checked constructor.
pub fn table() -> selectjit::Result<AotTable> {
    // SAFETY: the table of the object build.rs exported for this target and linked into this
    // crate; it lives as long as the program.
    unsafe { AotTable::from_raw(&raw const selectjit_aot_table) }
}

/// An engine that generates no code: the table's kernels, else the static kernels.
///
/// # Errors
/// The table was rejected (built for another machine or format): the error says why; a
/// runtime may then build an engine without it.
pub fn engine(table: AotTable) -> selectjit::Result<Engine> {
    Engine::with_config(EngineConfig::new().backend(Backend::Static).aot(table))
}

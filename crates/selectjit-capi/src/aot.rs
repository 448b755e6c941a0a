//! Ahead-of-time kernel tables (`SelectjitAotTable`, the type `selectjit_core::aot` defines and
//! `cbindgen.toml` writes by hand): `selectjit_aot_table_check`. An engine takes its table in
//! `SelectjitOptions::aot_table`.

use std::ffi::c_int;

use selectjit_core::aot::{AotTable, SelectjitAotTable};

use crate::error::guard;

/// Checks an ahead-of-time kernel table linked into the program (the table an object written by
/// `selectjit aot` defines): `SELECTJIT_OK`, or `SELECTJIT_ERR_AOT` with the reason in
/// `selectjit_last_error` (a table for another architecture, missing CPU features, another
/// format version, corrupted keys, ...).
///
/// # Safety
/// `table` is NULL or points at a table from an object exported by selectjit and linked into
/// this program (or a library that stays loaded).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_aot_table_check(table: *const SelectjitAotTable) -> c_int {
    guard(|| {
        // SAFETY: `table` is NULL or a table linked into the program (the caller's contract);
        // `from_raw` checks NULL, alignment, version and keys before trusting it.
        unsafe { AotTable::from_raw(table) }?;
        Ok(())
    })
}

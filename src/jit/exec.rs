//! Executable memory for machine code emitted directly (the x86-64 tier).

use crate::error::{Error, Result};

/// A private mapping holding one kernel's machine code, readable and executable (never writable
/// and executable at once). Unmapped on drop.
pub(crate) struct ExecMem {
    map: memmap2::Mmap,
}

impl ExecMem {
    /// Maps `code` into fresh pages and makes them executable.
    pub(crate) fn new(code: &[u8]) -> Result<ExecMem> {
        let err = |e: std::io::Error| Error::Codegen(format!("executable memory: {e}"));
        let mut m = memmap2::MmapMut::map_anon(code.len().max(1)).map_err(err)?;
        m[..code.len()].copy_from_slice(code);
        Ok(ExecMem {
            map: m.make_exec().map_err(err)?,
        })
    }

    /// The first byte of the code.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.map.as_ptr()
    }

    /// The code bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }
}

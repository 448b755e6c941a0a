//! Placeholder of the x86-64 emulator (same API); every call reports that it is missing.

/// A memory range the emulated code may access.
pub struct Region {
    /// First byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Whether the code may write it.
    pub writable: bool,
}

/// Emulator settings.
pub struct EmuConfig {
    /// Instructions executed at most.
    pub max_steps: u64,
    /// Whether EVEX and opmask instructions are allowed.
    pub avx512: bool,
}

/// What an emulated call did.
pub struct EmuStats {
    /// Instructions executed.
    pub steps: u64,
}

/// Why an emulated call failed.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The emulator is not part of this build.
    #[error("the x86 emulator is not built")]
    Missing,
}

/// Calls the function at `code[entry..]` in the emulator.
///
/// # Safety
/// Every region is valid for reads (and writes when writable) for its length during the call.
pub unsafe fn call(
    _code: &[u8],
    _entry: usize,
    _args: &[u64],
    _regions: &[Region],
    _cfg: &EmuConfig,
) -> Result<EmuStats, EmuError> {
    Err(EmuError::Missing)
}

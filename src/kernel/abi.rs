//! The kernel ABI: the one function type every kernel has, whatever made it, the operand
//! pointers it is called with, and the hook that runs machine code this host cannot execute.

/// Raw operand base pointers (validated by the engine before any kernel runs).
#[derive(Clone, Copy, Debug)]
pub struct Ptrs {
    /// cond's base (the plan's base element).
    pub cond: *const u8,
    /// then's base.
    pub then: *const u8,
    /// else's base.
    pub else_: *const u8,
    /// The output's base.
    pub out: *mut u8,
    /// A comparison's second operand's base (null for masks and tests).
    pub rhs: *const u8,
}

/// The machine-code entry point of every kernel, whatever made it: runs outer indices
/// `[begin, end)` of its signature. `dims` and `byte_strides` are read by shape-generic kernels
/// only (`dims[k]`, `byte_strides[op * rank + k]` for op = cond, then, else, out, rhs); exact
/// kernels get NULL. `rhs` is a comparison's second operand (kernels of masks and tests ignore
/// it; it comes last so that their code needs no change). `cond` is the mask, or a predicate's
/// first operand. The type of [`crate::aot::SelectjitKernelFn`] too.
pub type KernelFn = unsafe extern "C" fn(
    cond: *const u8,
    then: *const u8,
    else_: *const u8,
    out: *mut u8,
    begin: usize,
    end: usize,
    dims: *const u64,
    byte_strides: *const i64,
    rhs: *const u8,
);

/// Arguments of a kernel call as [`CodeRunner::call`] receives them: cond, then, else, out,
/// begin, end, dims, byte_strides, rhs.
pub type KernelArgs = [u64; 9];

/// A memory range that code run by a [`CodeRunner`] may access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemRegion {
    /// Address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Whether the code may store to it (only the output).
    pub writable: bool,
}

/// Runs machine code that this host cannot execute itself — kernels of an x86 tier whose
/// instructions the CPU lacks — for verification: the emulator of the `selectjit-emu` crate
/// implements it. Given to an engine as [`crate::EngineConfig::runner`].
pub trait CodeRunner: Send + Sync + std::fmt::Debug {
    /// Calls the function at byte 0 of `code` with the System V integer arguments `args`
    /// (cond, then, else, out, begin, end, dims, byte_strides, rhs). `avx512`: the code may use
    /// AVX-512 (otherwise such instructions are an error). An error is a bug of the generated
    /// code (an access outside `regions`, an unsupported instruction).
    ///
    /// # Safety
    /// Every region is memory the caller may read (and, where `writable`, write) for the
    /// duration of the call, and nothing else accesses the writable ones meanwhile.
    unsafe fn call(
        &self,
        code: &[u8],
        avx512: bool,
        args: &KernelArgs,
        regions: &[MemRegion],
    ) -> std::result::Result<(), String>;
}

//! The trait every code generator implements, and what it reports: the candidates it offers
//! for measuring, the machine code it shows. Below every generator and the registry.

use std::sync::Arc;

use crate::error::Result;
use crate::kernel::Kernel;
use crate::kernel::abi::CodeRunner;
use crate::kernel::nway::{NwayKernel, NwaySpec};
use crate::plan::Signature;
use crate::tier::{Tier, Variant};

/// Settings of a `CodeGen`.
#[derive(Debug, Clone)]
pub struct CodeGenOptions {
    /// Run the Cranelift verifier on every Cranelift function.
    pub verify: bool,
    /// x86 tiers: exact kernels whose output is at least this many bytes write it with
    /// non-temporal stores (`usize::MAX`: never).
    pub nt_min_bytes: usize,
    /// x86 tiers the host lacks: run their kernels through this runner (an emulator) instead of
    /// refusing the tier (slow; for verifying the generator).
    pub runner: Option<Arc<dyn CodeRunner>>,
    /// Cranelift's x86 `blendv` lane selects (`None`: where the host has them).
    pub blendv: Option<bool>,
}

impl Default for CodeGenOptions {
    /// No verifier, no non-temporal stores, no runner, `blendv` where the host has it.
    fn default() -> Self {
        CodeGenOptions {
            verify: false,
            nt_min_bytes: usize::MAX,
            runner: None,
            blendv: None,
        }
    }
}

/// The candidates a generator offers for a signature's exact kernel under `Auto`, and the one
/// to keep unless another is faster than it by a margin.
#[derive(Debug, Clone, Default)]
pub(crate) struct Candidates {
    /// The variants, the generator's preferred one first.
    pub(crate) variants: Vec<Variant>,
    /// A variant of `variants` (with ordinary stores) kept unless another with ordinary
    /// stores is faster than it by the given fraction: what steady calls were measured to
    /// favour where a trial's few calls cannot tell.
    pub(crate) prefer: Option<(Variant, f64)>,
}

/// A code generator: one tier's way of turning a [`Signature`] into machine code. Implemented
/// by each generator of the registry; the engine reaches them through `CodeGen` only.
pub(crate) trait Generator: Send + Sync {
    /// The tier its kernels report.
    fn tier(&self) -> Tier;
    /// Whether it compiles `sig` (otherwise another generator does, or the engine runs the
    /// signature another way).
    fn covers(&self, sig: &Signature) -> bool;
    /// The variant of `sig`'s kernel when nothing is measured (a named tier, shape-generic
    /// kernels, a class's choice not made yet): with non-temporal stores from `nt_min_bytes`
    /// of output, where the generator has them and the kernel is exact.
    fn fixed(&self, sig: &Signature, generic: bool, nt_min_bytes: usize) -> Variant;
    /// The candidates for `sig`'s exact kernel that `Auto` measures; non-temporal ones are
    /// offered from a quarter of `nt_min_bytes` of output.
    fn candidates(&self, sig: &Signature, nt_min_bytes: usize) -> Candidates;
    /// Compiles `sig` (exact, or `generic`: the shape-generic kernel of its pattern) as `v`.
    fn compile(&self, v: Variant, sig: &Signature, generic: bool) -> Result<Kernel>;
    /// The machine code of `sig`'s exact kernel as `v`, for inspection.
    fn machine_code(&self, v: Variant, sig: &Signature) -> Result<MachineCode>;
    /// The generator's intermediate representation of `sig`'s exact kernel, where it has one.
    fn ir_text(&self, sig: &Signature) -> Option<String> {
        let _ = sig;
        None
    }
    /// The target as the generator sees it (its ISA flags), or `None` when it has nothing to
    /// add to its tier's name.
    fn describe(&self) -> Option<String> {
        None
    }
    /// Whether its kernels run through a [`CodeRunner`] instead of on the CPU.
    fn emulates(&self) -> bool {
        false
    }
    /// A single-pass n-way kernel of `spec`, where the generator has one (`None`: the engine
    /// runs such calls in tiles of two-way passes).
    fn compile_nway(&self, spec: &NwaySpec) -> Option<Result<NwayKernel>> {
        let _ = spec;
        None
    }
}

/// The machine code of a kernel, for inspection.
#[derive(Debug, Clone)]
pub enum MachineCode {
    /// x86-64 machine code (an x86 tier's), entered at its first byte.
    X86(Vec<u8>),
    /// Cranelift's own listing of the code it generated.
    Listing(String),
}

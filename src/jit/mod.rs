//! Code generation: turning a [`Signature`] into machine code.
//!
//! The plan and the [`Signature`] are shared; what turns a signature into machine code is a
//! **tier** ([`Tier`]), chosen once per engine:
//!
//! * [`cranelift`] — Cranelift IR compiled for the host by Cranelift (every architecture it
//!   targets; 128-bit vectors on x86-64);
//! * `x86` — on x86-64, AVX2 or AVX-512 machine code emitted directly, for every signature it
//!   covers (the others go to Cranelift).
//!
//! [`CodeGen`] is the one entry point the engine uses; a [`Kernel`] records its tier, and the
//! engine and the cache never learn how it was made.

pub mod cranelift;
mod exec;
mod kernel;
mod tier;
#[cfg(target_arch = "x86_64")]
pub mod x86;

use crate::error::{Error, Result};
use crate::plan::Signature;

pub use cranelift::Jit;
pub use kernel::{Kernel, live_kernels};
pub use tier::{TIER_ENV, Tier};

/// What a shape-generic kernel depends on: the element width, the collapsed rank, the class of
/// each operand's stride along the innermost dimension (0, 1, or any other value), which decides
/// the row shape, and which outer strides are 0. Dims and all other strides are arguments of the
/// kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pattern {
    /// Element width in bytes.
    pub width: usize,
    /// Rank of the collapsed loop nest.
    pub rank: usize,
    /// Per operand (cond, then, else, out): 0, 1, or 2 for any other stride.
    pub inner: [u8; 4],
    /// Per operand, bit `k` set when its stride along outer dim `k` is 0 (broadcast): such
    /// strides are constants of the kernel instead of arguments.
    pub outer_zero: [u64; 4],
}

impl Pattern {
    /// The pattern of a signature.
    pub fn of(sig: &Signature) -> Pattern {
        Pattern {
            width: sig.width,
            rank: sig.rank(),
            inner: std::array::from_fn(|op| match sig.inner_stride(op) {
                0 => 0,
                1 => 1,
                _ => 2,
            }),
            outer_zero: std::array::from_fn(|op| {
                let st = &sig.strides[op];
                (0..sig.rank() - 1)
                    .filter(|&k| st[k] == 0)
                    .fold(0u64, |m, k| m | (1 << k))
            }),
        }
    }

    /// A signature with this pattern (dims of 2, outer strides of 0 or 2), from which the
    /// emitter reads only the width, the rank, the inner-stride classes and the zero strides.
    pub(crate) fn representative(&self) -> Signature {
        let r = self.rank;
        Signature {
            width: self.width,
            dims: smallvec::smallvec![2; r],
            strides: std::array::from_fn(|op| {
                let mut st: crate::shape::Strides = (0..r)
                    .map(|k| {
                        if self.outer_zero[op] >> k & 1 == 1 {
                            0
                        } else {
                            2
                        }
                    })
                    .collect();
                st[r - 1] = self.inner[op] as isize;
                st
            }),
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "generic w{} rank{} inner{:?}",
            self.width, self.rank, self.inner
        )
    }
}

/// Settings of a [`CodeGen`].
#[derive(Debug, Clone, Copy)]
pub struct CodeGenOptions {
    /// Run the Cranelift verifier on every Cranelift function.
    pub verify: bool,
    /// x86 tier: exact kernels whose output is at least this many bytes write it with
    /// non-temporal stores (`usize::MAX`: never).
    pub nt_min_bytes: usize,
    /// x86 tier: when the host lacks the tier's instructions, run its kernels in the built-in
    /// emulator instead of refusing the tier (slow; for verifying the generator).
    pub emulate: bool,
}

/// The code generators of one engine: the chosen tier, and Cranelift for every signature the
/// chosen tier does not cover.
pub struct CodeGen {
    tier: Tier,
    cranelift: Jit,
    #[cfg(target_arch = "x86_64")]
    x86: Option<x86::X86Gen>,
    /// x86 kernels run in the emulator.
    emulate: bool,
}

impl std::fmt::Debug for CodeGen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CodeGen({}, {:?})", self.tier, self.cranelift)
    }
}

impl CodeGen {
    /// The generators of `tier` (`Auto`: the best the host runs). A tier the host cannot run is
    /// an error, unless `opts.emulate` asks for its kernels to run in the emulator.
    pub fn new(tier: Tier, opts: CodeGenOptions) -> Result<CodeGen> {
        let tier = tier.resolve();
        let cranelift = Jit::host(opts.verify)?;
        let emulate = tier.is_x86() && opts.emulate && !tier.available();
        if !emulate && let Some(why) = tier.unavailable_reason() {
            return Err(Error::Invalid(why));
        }
        #[cfg(target_arch = "x86_64")]
        let x86 = match tier {
            Tier::Avx2 => Some(x86::X86Gen::new(x86::Level::Avx2, opts.nt_min_bytes)),
            Tier::Avx512 => Some(x86::X86Gen::new(x86::Level::Avx512, opts.nt_min_bytes)),
            _ => None,
        };
        Ok(CodeGen {
            tier,
            cranelift,
            #[cfg(target_arch = "x86_64")]
            x86,
            emulate,
        })
    }

    /// Cranelift alone, as configured by the caller (e.g. with [`Jit::set_blendv`]).
    pub fn from_cranelift(jit: Jit) -> CodeGen {
        CodeGen {
            tier: Tier::Cranelift,
            cranelift: jit,
            #[cfg(target_arch = "x86_64")]
            x86: None,
            emulate: false,
        }
    }

    /// The tier (never `Auto`).
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// Whether x86 kernels run in the emulator.
    pub fn emulates(&self) -> bool {
        self.emulate
    }

    /// The Cranelift generator (the tier itself, or the fallback of the x86 tiers).
    pub fn cranelift(&self) -> &Jit {
        &self.cranelift
    }

    /// The x86 generator, when the tier is an x86 one.
    #[cfg(target_arch = "x86_64")]
    pub fn x86(&self) -> Option<&x86::X86Gen> {
        self.x86.as_ref()
    }

    /// The tier that compiles `sig`: the engine's, or Cranelift where the x86 generator does not
    /// cover the signature.
    pub fn tier_for(&self, sig: &Signature) -> Tier {
        #[cfg(target_arch = "x86_64")]
        if let Some(x) = &self.x86
            && x.covers(sig)
        {
            return self.tier;
        }
        let _ = sig;
        Tier::Cranelift
    }

    /// The host as this generator sees it: the tier, and Cranelift's target and ISA flags.
    pub fn describe(&self) -> String {
        let emu = if self.emulate { " (emulated)" } else { "" };
        format!(
            "tier {}{emu}; cranelift {}",
            self.tier,
            self.cranelift.describe()
        )
    }

    /// Compiles `sig` with its dims and strides baked in.
    pub fn compile(&self, sig: &Signature) -> Result<Kernel> {
        self.compile_as(sig, false)
    }

    /// Compiles the shape-generic kernel of `p`.
    pub fn compile_generic(&self, p: &Pattern) -> Result<Kernel> {
        self.compile_as(&p.representative(), true)
    }

    fn compile_as(&self, sig: &Signature, generic: bool) -> Result<Kernel> {
        #[cfg(target_arch = "x86_64")]
        if let Some(x) = &self.x86
            && x.covers(sig)
        {
            let code = x.emit(sig, generic)?;
            if self.emulate {
                return Ok(Kernel::emulated(sig.clone(), generic, self.tier, code));
            }
            // SAFETY: `emit` returns a complete kernel function for `sig` (or its pattern) in
            // the `KernelFn` convention, using the instructions of `self.tier`, which this
            // host runs (checked in `new`: otherwise `emulate` is set).
            return unsafe { Kernel::mapped(sig.clone(), generic, self.tier, &code) };
        }
        if generic {
            self.cranelift.compile_generic(&Pattern::of(sig))
        } else {
            self.cranelift.compile(sig)
        }
    }

    /// The machine code of `sig`'s exact kernel as text, and the tier that made it.
    pub fn disassembly(&self, sig: &Signature) -> Result<(Tier, String)> {
        #[cfg(target_arch = "x86_64")]
        if let Some(x) = &self.x86
            && x.covers(sig)
        {
            let code = x.emit(sig, false)?;
            return Ok((self.tier, x86::disassemble(&code)));
        }
        Ok((Tier::Cranelift, self.cranelift.disassembly(sig)?))
    }
}

//! Code generation: turning a [`Signature`] into machine code.
//!
//! Every code generator implements one trait, [`Generator`] (does it cover a signature, the
//! candidates it offers for measuring, compile, machine code for inspection, a description),
//! and [`registry`] is the one place that decides which generators exist in this build and on
//! this host ([`host`] holds the facts it decides from). [`CodeGen`] is what an engine holds:
//! the generators of its tier, the variants a measured choice compares, and the compile calls.
//! A [`Kernel`] records its [`Variant`]: the engine, the cache and the measured choice never
//! learn how it was made, and never name a tier. Today's generators:
//!
//! * `cranelift` — Cranelift IR compiled for the host by Cranelift (every architecture it
//!   targets; 128-bit vectors on x86-64);
//! * `x86` — on x86-64, AVX2 or AVX-512 machine code emitted directly.
//!
//! To add a generator: a folder under `src/jit/` with a type that implements [`Generator`],
//! its `mod` line below, and its construction in [`registry::generators`].

mod codegen;
#[cfg(cranelift_tier)]
pub(crate) mod cranelift;
pub(crate) mod generator;
pub(crate) mod host;
pub(crate) mod registry;
#[cfg(x86_tier)]
pub(crate) mod x86;

pub use codegen::CodeGen;

/// The generators of this build, for tools that drive one directly (re-exported by
/// [`crate::codegen`]).
pub(crate) mod generators {
    /// The instruction set the static kernels (the `Static` backend, and every fallback) run
    /// with on this host: `portable`, `avx2` or `avx512`.
    ///
    /// ```
    /// let level = selectjit::codegen::static_level();
    /// assert!(["portable", "avx2", "avx512"].contains(&level));
    /// ```
    pub fn static_level() -> &'static str {
        crate::static_kernels::level().name()
    }

    /// The Cranelift tier: Cranelift IR compiled for the host, or for another target by an
    /// ahead-of-time exporter.
    #[cfg(cranelift_tier)]
    pub mod cranelift {
        pub use crate::jit::cranelift::{Jit, shared_flags};
    }
    /// The x86-64 tier: AVX2 and AVX-512 machine code emitted directly.
    #[cfg(x86_tier)]
    pub mod x86 {
        pub use crate::jit::x86::{Level, X86Gen};
    }
}
pub use generator::{CodeGenOptions, MachineCode};

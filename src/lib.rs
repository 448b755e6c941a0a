//! # selectjit
//!
//! Tensor **Select / Where** — `out[i] = cond[i] ? then[i] : else[i]` — with the broadcast modes of
//! ONNX Where, OpenVINO Select-1 and oneDNN Graph Select, bit-exact for every element type, on
//! kernels compiled per loop shape at run time. The condition is a mask, or a predicate computed
//! inside the kernel (`x > 0`, `mask == 0`, `isnan(x)`): one pass, no bool temporary.
//!
//! ```
//! use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
//!
//! let engine = Engine::new(); // Send + Sync: share it
//!
//! // The ONNX Where example: cond [[1,0],[1,1]], x [[1,2],[3,4]], y [[9,8],[7,6]].
//! let mut out = [0i64; 4];
//! engine.select(
//!     TensorRef::new(&[1, 0, 1, 1], &[2, 2]),
//!     TensorRef::new(&[1i64, 2, 3, 4], &[2, 2]),
//!     TensorRef::new(&[9i64, 8, 7, 6], &[2, 2]),
//!     TensorMut::new(&mut out, &[2, 2]),
//!     Broadcast::Numpy,
//! )?;
//! assert_eq!(out, [1, 8, 3, 4]);
//!
//! // A predicate: where(x > 0, x, 0) in one pass; a scalar broadcasts.
//! let x = [-1.0f32, 2.0, -0.0, 4.0];
//! let mut relu = [0f32; 4];
//! let xv = TensorRef::new(&x, &[4]);
//! engine.select(Cond::gt(xv, 0.0f32), xv, TensorRef::scalar(&[0.0f32]),
//!               TensorMut::new(&mut relu, &[4]), Broadcast::Numpy)?;
//! assert_eq!(relu, [0.0, 2.0, 0.0, 4.0]);
//! # Ok::<(), selectjit::Error>(())
//! ```
//!
//! ## The API
//!
//! * [`Engine`] — [`Engine::new`], [`Engine::with_config`] ([`EngineConfig`]: [`Backend`],
//!   [`Tier`], cache, threads, [`aot`] tables); [`Engine::select`] and
//!   [`Engine::select_in_place`] on typed views, [`Engine::select_bytes`] and
//!   [`Engine::select_in_place_bytes`] on raw bytes of a run-time [`DType`];
//!   [`Engine::prepare`] → [`Prepared`] for fixed shapes; [`Engine::stats`] ([`CacheStats`]),
//!   [`Engine::tier_choices`] ([`TierChoice`], [`KernelClass`], [`Variant`]);
//!   [`Engine::output_buffer`] ([`PooledBuf`]) and [`Engine::output_pool`] ([`OutputPool`],
//!   [`OutputPoolStats`]): output buffers recycled instead of faulted in afresh.
//! * Views: [`TensorRef`], [`TensorMut`] (shape, element strides — 0 broadcasts, negative walk
//!   backwards — and the offset of the first element); elements: [`Element`], [`DType`].
//! * Conditions: a `u8` mask view (any non-zero byte is true), or a [`Cond`] predicate over
//!   [`Operand`]s: [`CmpOp`] comparisons, [`TestOp`] tests, negation.
//! * [`Broadcast`] modes (`Numpy`, `TwoStep`, `Exact`, `Pdpd { axis }`), [`output_shape`],
//!   [`broadcast_shapes`], [`MAX_RANK`]; [`InPlace`] for in-place selects.
//! * [`Error`] (typed, with sources), [`Result`]; [`CallTimer`] for deterministic measured
//!   choices in tests.
//! * [`select`] and [`select_generic`] (any `Clone` element, strings included) on the process's
//!   [`default_engine`]; the `ndarray` module (feature `ndarray`); [`env`](mod@crate::env)
//!   names the environment variables [`EngineConfig::from_env`] reads.
//!
//! ## How a call flows
//!
//! Views are validated (every buffer against its shape, strides and offset: on error the output
//! is untouched), the output shape inferred by the mode, and the loop nest canonicalised into a
//! *signature* (size-1 dims dropped, reversed dims flipped, dims contiguous for every operand
//! merged). An LRU cache maps signatures to compiled kernels: a new signature runs on the
//! shape-generic kernel of its pattern, and from its second sighting on its own exact kernel.
//! `Tier::Auto` times the code generators the host runs (AVX-512 / AVX2 machine code on
//! x86-64, Cranelift everywhere) on each kernel class's first calls and keeps the fastest. If
//! code generation fails the static kernels serve the call, and
//! [`Engine::last_codegen_error`] says why.
//!
//! ## Features
//!
//! * default — the JIT on every architecture: the Cranelift tier for the host (the code
//!   generator on aarch64, s390x and riscv64, and on x86-64 hosts without AVX2) and, on x86-64,
//!   the AVX2 / AVX-512 tier that `Auto` measures.
//! * `default-features = false, features = ["jit"]` — the lean x86 build: the x86 tier alone
//!   (no Cranelift crates; on other architectures it generates no code).
//! * `default-features = false` — the no-JIT build: the interpreter, the static kernels and
//!   ahead-of-time tables ([`aot`]), for hosts that forbid executable memory.
//! * `ndarray` — select on `ndarray` arrays and views of any dimensionality and strides.
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod aot;
pub mod bits;
mod bitsel;
mod cache;
mod cond;
mod dtype;
mod engine;
pub mod env;
mod error;
mod jit;
mod kernel;
mod measure;
#[cfg(feature = "ndarray")]
pub mod ndarray;
mod outpool;
pub mod plan;
mod pool;
mod pred;
mod reference;
mod shape;
mod static_kernels;
mod tensor;
mod tier;
mod trial;
mod wisdom;

pub use cache::CacheStats;
pub use cond::{Cond, Operand};
pub use dtype::{DType, Element};
pub use engine::Engine;
pub use engine::config::{Backend, EngineConfig, InPlace, NT_MIN_BYTES, PARALLEL_MIN_BYTES};
pub use engine::interp_backend::select_generic;
pub use engine::nway::Choice;
pub use engine::prepared::Prepared;
pub use error::{Error, Result};
pub use outpool::{OutputPool, OutputPoolStats, PooledBuf};
pub use pred::{CmpOp, TestOp};
pub use shape::{
    Broadcast, BroadcastShape, MAX_RANK, Placement, broadcast_shapes, contiguous_strides,
    output_shape,
};
pub use tensor::{TensorMut, TensorRef};
pub use tier::{KernelClass, Tier, TierChoice, Variant};
pub use trial::CallTimer;
pub use wisdom::WisdomStatus;

/// Compiled kernels and the code generators behind them, for tools built on the library:
/// ahead-of-time exporters, emulators, `explain`-style inspectors and the generators' own
/// tests. A runtime that only selects never needs this module.
///
/// An engine's generators are a [`CodeGen`](codegen::CodeGen) ([`Engine::codegen`]); what they
/// compile is a [`Kernel`](codegen::Kernel), one `extern "C"` [`KernelFn`](codegen::KernelFn)
/// over a range of a [`plan::Signature`]'s outer dimension. A
/// [`CodeRunner`](codegen::CodeRunner) runs machine code this host cannot (the emulator of the
/// workspace's `selectjit-emu` crate plugs in through [`EngineConfig::runner`]). The
/// generators of this build are reachable for tools that drive one directly: `cranelift`
/// (feature `cranelift`: [`Jit`](codegen::cranelift::Jit), which the AOT exporter compiles
/// other targets' kernels with) and `x86` (the lean or default build on x86-64:
/// [`X86Gen`](codegen::x86::X86Gen)).
///
/// ```
/// use selectjit::codegen::live_kernels;
/// use selectjit::{Engine, plan};
/// let engine = Engine::new();
/// let sig = plan::plan_contiguous(4, 1024).unwrap();
/// if let Some(cg) = engine.codegen() {
///     let before = live_kernels().0;
///     let kernel = cg.compile(&sig)?;
///     assert_eq!(kernel.signature(), &sig);
///     assert_eq!(live_kernels().0, before + 1);
///     drop(kernel); // its code is freed with it
///     assert_eq!(live_kernels().0, before);
/// }
/// # Ok::<(), selectjit::Error>(())
/// ```
pub mod codegen {
    pub use crate::jit::generators::*;
    pub use crate::jit::{CodeGen, CodeGenOptions, MachineCode};
    pub use crate::kernel::abi::{CodeRunner, KernelArgs, KernelFn, MemRegion, Ptrs};
    pub use crate::kernel::{Kernel, live_kernels};
}

/// The process-wide engine used by [`select`] (default settings, built on first use).
///
/// ```
/// use selectjit::{Backend, default_engine};
/// let engine = default_engine();
/// assert!(std::ptr::eq(engine, default_engine())); // one per process
/// assert_eq!(engine.backend(), Backend::Jit);
/// ```
pub fn default_engine() -> &'static Engine {
    static ENGINE: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    ENGINE.get_or_init(Engine::new)
}

/// `out = cond ? then : else` on the process-wide default engine; `cond` is a `u8` mask view
/// or a [`Cond`] predicate, as for [`Engine::select`].
///
/// # Errors
/// Shapes the mode refuses, buffers that do not hold what their views address, an output of
/// the wrong shape or with overlapping elements: the output is then untouched.
///
/// # Examples
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::{Broadcast, TensorMut, TensorRef};
/// let mut out = [0u16; 3];
/// selectjit::select(
///     TensorRef::new(&[1, 0, 1], &[3]),
///     TensorRef::new(&[1u16, 2, 3], &[3]),
///     TensorRef::scalar(&[0u16]),
///     TensorMut::new(&mut out, &[3]),
///     Broadcast::Numpy,
/// )?;
/// assert_eq!(out, [1, 0, 3]);
/// # Ok(())
/// # }
/// ```
///
/// A predicate computed in the kernel, here an i64 padding mask over f32 scores:
/// `where(mask == 0, -inf, scores)`, the mask broadcast over the rows.
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::{Broadcast, Cond, TensorMut, TensorRef};
/// let mask = [1i64, 0, 1];
/// let scores = [0.5f32, 1.0, 1.5, 2.0, 2.5, 3.0];
/// let mut out = [0f32; 6];
/// selectjit::select(
///     Cond::eq(TensorRef::new(&mask, &[3]), 0i64),
///     TensorRef::scalar(&[f32::NEG_INFINITY]),
///     TensorRef::new(&scores, &[2, 3]),
///     TensorMut::new(&mut out, &[2, 3]),
///     Broadcast::Numpy,
/// )?;
/// let ninf = f32::NEG_INFINITY;
/// assert_eq!(out, [0.5, ninf, 1.5, 2.0, ninf, 3.0]);
/// # Ok(())
/// # }
/// ```
pub fn select<'c, T: Element>(
    cond: impl Into<Cond<'c>>,
    then: TensorRef<'_, T>,
    else_: TensorRef<'_, T>,
    out: TensorMut<'_, T>,
    mode: Broadcast,
) -> Result<()> {
    default_engine().select(cond, then, else_, out, mode)
}

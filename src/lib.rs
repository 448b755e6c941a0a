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
//!   [`Engine::tier_choices`] ([`TierChoice`], [`KernelClass`], [`Variant`]).
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

pub mod aot;
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
mod plan;
mod pool;
mod pred;
mod reference;
mod shape;
mod static_kernels;
mod tensor;
mod tier;
mod trial;

pub use cache::CacheStats;
pub use cond::{Cond, Operand};
pub use dtype::{DType, Element};
pub use engine::Engine;
pub use engine::config::{Backend, EngineConfig, InPlace, NT_MIN_BYTES, PARALLEL_MIN_BYTES};
pub use engine::interp_backend::select_generic;
pub use engine::prepared::Prepared;
pub use error::{Error, Result};
pub use pred::{CmpOp, TestOp};
pub use shape::{Broadcast, MAX_RANK, broadcast_shapes, output_shape};
pub use tensor::{TensorMut, TensorRef};
pub use tier::{KernelClass, Tier, TierChoice, Variant};
pub use trial::CallTimer;

// The `unstable` module below names the static kernels by their former path (`crate::kernels`);
// this alias keeps it as it is until it is next edited to say `crate::static_kernels`.
use static_kernels as kernels;

/// What the workspace's own crates (command line, benchmarks, emulator, AOT exporter, C and
/// Python bindings) and tests reach inside the library. **Not a stable API**: anything here
/// may change in any release, and nothing here is needed to embed the library; a runtime uses
/// the items at the crate root.
#[doc(hidden)]
pub mod unstable {
    pub use crate::aot::format::{
        AOT_MAX_KEY_BYTES, ENTRIES_AT, ENTRY_SIZE, FUNC_AT, Fnv, KEYS_AT, Named, TABLE_SIZE,
        arch_name, check_entries, check_format,
    };
    pub use crate::aot::key::{parse_pattern_key, parse_signature_key, pattern_key, signature_key};
    pub use crate::error::ShapeFmt;
    #[cfg(cranelift_tier)]
    pub use crate::jit::cranelift::{Jit, shared_flags};
    #[cfg(x86_tier)]
    pub use crate::jit::x86::{Level as X86Level, X86Gen};
    pub use crate::jit::{CodeGen, CodeGenOptions, MachineCode};
    pub use crate::kernel::abi::{CodeRunner, KernelArgs, MemRegion};
    pub use crate::kernel::abi::{KernelFn, Ptrs};
    pub use crate::kernel::{Kernel, live_kernels};
    pub use crate::kernels::{Level as StaticLevel, level as static_level};
    pub use crate::plan::{
        COND, ELSE, OPS, OUT, Pattern, Plan, RHS, RowShape, Signature, THEN, plan, plan_contiguous,
        plan_layout,
    };
    pub use crate::pool::Pool;
    pub use crate::pred::{Canon, Kind as CondKind, eval as eval_cond};
    pub use crate::shape::{
        Dims, Placement, Strides, check_shape, contiguous_strides, numel, strides_over,
    };
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

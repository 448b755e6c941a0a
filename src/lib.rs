//! # selectjit
//!
//! Tensor **Select / Where** — `out[i] = cond[i] ? then[i] : else[i]` — with the broadcast modes of
//! ONNX Where, OpenVINO Select-1 and oneDNN Graph Select, bit-exact for every element type, on
//! kernels compiled per loop shape at run time.
//!
//! ```
//! use selectjit::{Broadcast, Engine, TensorMut, TensorRef};
//!
//! // The ONNX Where example: cond [[1,0],[1,1]], x [[1,2],[3,4]], y [[9,8],[7,6]].
//! let engine = Engine::new();
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
//! // Broadcasting: a scalar `else` and a row `cond`; any non-zero cond byte is true.
//! let mut out = [0f32; 6];
//! selectjit::select(
//!     TensorRef::new(&[0, 0xff, 2], &[3]),
//!     TensorRef::new(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]),
//!     TensorRef::scalar(&[-0.0f32]),
//!     TensorMut::new(&mut out, &[2, 3]),
//!     Broadcast::Numpy,
//! )?;
//! assert_eq!(out.map(f32::to_bits), [-0.0f32, 2.0, 3.0, -0.0, 5.0, 6.0].map(f32::to_bits));
//!
//! // Strided views, negative strides included: `then` reversed (numpy's `x[::-1]`) is
//! // stride -1 from its last element.
//! let x = [1u8, 2, 3, 4];
//! let mut out = [0u8; 4];
//! selectjit::select(
//!     TensorRef::new(&[1, 1, 0, 1], &[4]),
//!     TensorRef::with_layout(&x, &[4], &[-1], 3),
//!     TensorRef::scalar(&[0u8]),
//!     TensorMut::new(&mut out, &[4]),
//!     Broadcast::Numpy,
//! )?;
//! assert_eq!(out, [4, 3, 0, 1]);
//! # Ok::<(), selectjit::Error>(())
//! ```
//!
//! ## How a call flows
//!
//! ```text
//! views ─► shape (mode) ─► plan: canonical loop nest ─► Signature ─► cache ─► kernel(ptrs, outer range)
//!                                                                     │ miss
//!                                    seen fewer than `exact_after` times: shape-generic kernel of its pattern
//!                                    then:                                compile the exact kernel (tier) → insert
//! ```
//!
//! 1. **Views** ([`TensorRef`], [`TensorMut`]): a buffer, a shape, optional element strides (0
//!    broadcasts, negative walks backwards) and the offset of the first element. Every buffer is
//!    validated before anything is read; on error the output is untouched ([`Error`]).
//! 2. **Shape** (the `shape` module): the output shape and where each input lands in it, by the
//!    [`Broadcast`] mode: `Numpy` (ONNX Where, the default), `TwoStep` (OpenVINO Select-1 /
//!    oneDNN as documented), `None`, `Pdpd { axis }`.
//! 3. **Plan** (the `plan` module): size-1 dims dropped, dimensions along which the output runs backwards
//!    flipped for every operand (kernel base pointers moved accordingly), the output's unit
//!    stride innermost, dims contiguous for all four operands merged. The result, a
//!    [`plan::Signature`] (element width, dims, strides), is what machine code depends on:
//!    f32, i32 and u32 share kernels.
//! 4. **Cache** (the `cache` module): an LRU of signatures → compiled kernels. A signature seen for the
//!    first time runs on the shape-generic kernel of its *pattern* (compiled once per pattern;
//!    dims and strides are arguments); once seen `exact_after` times its exact kernel is compiled
//!    by the engine's **tier** and kept. Evicted kernels free their code when no caller holds
//!    them.
//! 5. **Kernel**: runs a `[begin, end)` range of the outer dimension, so large calls are split
//!    over threads. If code generation fails, the static kernels (the `kernels` module) serve the call and
//!    [`Engine::last_codegen_error`] says why. [`Backend::Interp`] runs the reference interpreter
//!    instead (the oracle every path is tested against); [`select_generic`] serves any `Clone`
//!    element (strings) through it.
//!
//! [`Engine::prepare`] plans a call once for contiguous buffers of fixed shapes and binds its
//! kernel ([`Prepared::run`]: length checks and the call). [`Engine::select_dyn`] takes raw
//! bytes with a run-time [`DType`] (the command line and the C ABI use it).
//!
//! ## Tiers, and how `Auto` chooses
//!
//! [`EngineConfig::tier`] picks the code generator ([`Tier`]): `Avx2` and `Avx512` (x86-64
//! machine code emitted directly; they cover every signature the planner produces) and
//! `Cranelift` (every architecture Cranelift targets; 128-bit vectors on x86-64). `Auto`, the
//! default, measures: the first exact kernel of each kernel class ([`KernelClass`]: a loop
//! pattern and an output size class) is compiled as every candidate [`Variant`] — each fast
//! tier the host runs, with ordinary stores and, for large outputs, non-temporal ones; AVX-512
//! also with 512-bit blocks for vector rows — and its
//! calls time them in turn until the fastest is known ([`Engine::tier_choices`] lists the
//! choices and the times that decided them; [`CacheStats`] counts their cost). The
//! environment variable `SELECTJIT_TIER` (`auto`, `cranelift`, `avx2`, `avx512`) sets the tier of
//! engines built with default settings.
//!
//! ## Knobs
//!
//! | [`EngineConfig`] field | default | environment variable |
//! |---|---|---|
//! | `backend` | [`Backend::Jit`] (`Static`, `Interp`) | |
//! | `cache_capacity` | 1024 signatures | `SELECTJIT_CACHE_CAPACITY` |
//! | `exact_after` | 2 sightings before the exact kernel is compiled (1: at once) | `SELECTJIT_EXACT_AFTER` |
//! | `threads` | available parallelism (1: never split) | |
//! | `parallel_min_bytes` | 1 MiB: from this much output a kernel times its first calls on one thread and on all, and keeps the faster way | `SELECTJIT_PARALLEL_MIN_BYTES` |
//! | `tier` | `Auto` | `SELECTJIT_TIER` |
//! | `nt_min_bytes` | 32 MiB: named x86 tiers store larger outputs non-temporally; `Auto` measures it against ordinary stores from a quarter of this | `SELECTJIT_NT_MIN_BYTES` |
//! | `verify` | on in debug builds: Cranelift verifier on every kernel | |
//! | `runner` | none: run x86-tier kernels the host cannot execute through this (the emulator of `selectjit-emu`) | |
//! | `timer` | wall-clock time: what times the calls behind measured choices | |
//! | `aot` | none: an ahead-of-time kernel table ([`aot`]) served before any code generation | |
//!
//! `SELECTJIT_VERBOSE=1` logs one stderr line per compile, eviction and measured choice
//! ([`mod@env`] lists every variable). [`Engine::stats`] gives hits, misses, generic runs,
//! evictions, compile times and the cost of measuring.
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
//! * `ndarray` — [the `ndarray` module](crate::ndarray): select on `ndarray` arrays and views of
//!   any dimensionality and strides (cond `bool` or `u8`), into a new array or a mutable view.
//!
//! ## Examples
//!
//! `examples/embed_runtime.rs` (one engine shared by threads, prepared kernels, dynamic sequence
//! lengths, statistics), `examples/ndarray.rs`, `examples/strings.rs` (the generic path) and
//! `examples/c/select.c` (the C ABI, crate `selectjit-capi`).
#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod aot;
mod cache;
mod cond;
mod dtype;
mod engine;
pub mod env;
mod error;
mod interp;
#[cfg(feature = "jit")]
mod jit;
mod kernel;
mod kernels;
mod measure;
#[cfg(feature = "ndarray")]
pub mod ndarray;
mod plan;
mod pool;
mod pred;
mod shape;
mod tensor;
mod tier;
mod trial;

pub use cache::CacheStats;
pub use cond::{Cond, Operand};
pub use dtype::{DType, Element};
pub use engine::Engine;
pub use engine::config::{Backend, EngineConfig, InPlace, NT_MIN_BYTES, PARALLEL_MIN_BYTES};
pub use engine::interp::select_generic;
pub use engine::prepared::Prepared;
pub use error::{Error, Result};
pub use pred::{CmpOp, TestOp};
pub use shape::{Broadcast, MAX_RANK, broadcast_shapes, output_shape};
pub use tensor::{TensorMut, TensorRef};
pub use tier::{KernelClass, Tier, TierChoice, Variant};
pub use trial::CallTimer;

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
    #[cfg(feature = "jit")]
    pub use crate::jit::{CodeGen, CodeGenOptions, MachineCode};
    #[cfg(feature = "jit")]
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
pub fn default_engine() -> &'static Engine {
    static ENGINE: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    ENGINE.get_or_init(Engine::new)
}

/// `out = cond ? then : else` on the process-wide default engine. See [`Engine::select`].
///
/// # Errors
/// Shapes the mode refuses, buffers that do not hold what their views address, an output of
/// the wrong shape or with overlapping elements: the output is then untouched.
pub fn select<T: Element>(
    cond: TensorRef<'_, u8>,
    then: TensorRef<'_, T>,
    else_: TensorRef<'_, T>,
    out: TensorMut<'_, T>,
    mode: Broadcast,
) -> Result<()> {
    default_engine().select(cond, then, else_, out, mode)
}

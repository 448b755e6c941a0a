//! Ahead-of-time export of selectjit kernels, for hosts that forbid generating code at run
//! time.
//!
//! [`export`] compiles the kernels of a [`KernelSet`] (exact kernels by signature,
//! shape-generic kernels by pattern) with the library's Cranelift code generator for any
//! Cranelift target (x86-64, aarch64, s390x, riscv64) into one relocatable object, with the
//! table that maps each kernel's key to its function (`selectjit::aot::format`) and a C
//! header. Linked into a program that depends on `selectjit` (its no-JIT build is enough), the
//! table is registered with `selectjit::aot::AotTable::from_raw` and given to an engine.
//! [`check_object`] reads an exported object back; [`parse_shapes`] reads the shapes file of
//! `selectjit aot`. Predicate kernels (a comparison or a test computed in the kernel in the
//! mask's place, for the no-JIT build) are exported like mask kernels, by signature or pattern
//! (`KernelSet::add_signature` / `add_pattern`, or the shapes file's `predicate` signatures),
//! under the keys of table format 3 (`selectjit::aot::key`). Single-pass n-way kernels (what
//! `Engine::select_n` runs a flat call on) are exported by spec (`KernelSet::add_nway`, with
//! `selectjit::aot::nway::NwayKernelSpec::for_call` deriving the spec of a described call, or
//! the shapes file's `nway` cases), as entries of their own kind (table format 4).
//!
//! This crate carries every Cranelift back end and an object writer and reader; a runtime that
//! links `selectjit` does not build any of it.
//!
//! ```no_run
//! use selectjit_aot::{ExportOptions, KernelSet, Kinds, export};
//! use selectjit::{Broadcast, DType};
//!
//! let mut set = KernelSet::new();
//! set.add_call(DType::F32, &[1, 1, 128, 128], &[8, 12, 128, 128], &[], Broadcast::Numpy, Kinds::Both)?;
//! let ex = export(&ExportOptions::new("aarch64-unknown-linux-gnu"), &set)?;
//! std::fs::write("kernels.o", &ex.object).unwrap();
//! std::fs::write("kernels.h", &ex.header).unwrap();
//! # Ok::<(), selectjit::Error>(())
//! ```
#![warn(missing_docs)]

mod export;
mod object;
mod shapes;

pub use export::{
    DEFAULT_SYMBOL, ExportOptions, Exported, KernelSet, Kinds, enabled_features, export, target_isa,
};
pub use object::{ObjectSummary, check_object};
pub use shapes::{ShapesFile, parse_shapes};

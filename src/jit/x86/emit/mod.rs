//! x86-64 machine code for one [`Signature`], emitted with `iced-x86`'s assembler.
//!
//! The kernel follows the System V ABI:
//! `fn(cond, then, else, out: *u8, begin, end: usize, dims: *u64, strides: *i64)` in rdi, rsi,
//! rdx, rcx, r8, r9 and on the stack. It runs outer indices `begin..end` of `sig.dims[0]`.
//!
//! Register roles, fixed for the whole kernel:
//!
//! | register | role |
//! |---|---|
//! | rdi, rsi, rdx, rcx | start of the current row of cond, then, else, out |
//! | r9 | length of the current row in elements (all rows have the same) |
//! | r8 | element (or byte) index inside a row |
//! | rax, r10, r11 | scratch of the row code |
//! | rbx | trip counter of the innermost outer loop (rank ≥ 2) |
//! | rbp, r12, r13 | moving pointer and temporaries of the strided row |
//! | r14, r15 | dims and byte-strides arguments of a shape-generic kernel |
//!
//! Outer loops above the innermost one keep their counter and pointers in a stack frame. Row
//! code never changes rdi..rcx and r9; the loop around it advances rdi..rcx by the byte strides
//! of its dimension. Constants (selector vectors, strides too large for an immediate) follow the
//! code and are addressed RIP-relative.
//!
//! Row shapes (the contract of the Cranelift tier, see `codegen.rs` there): a **vector select**
//! when out and cond have unit stride along the row and then/else unit or zero stride; a **row
//! copy** (or fill) when cond has stride 0 along the row; a branch-free **strided** loop
//! otherwise. The vector and copy rows of each level live in [`avx2`] and [`avx512`].
//!
//! The emitter is generic over the vector ISA ([`VecIsa`]); [`on_isa`] is the one place where
//! a [`Level`] picks its ISA.

/// `a.<m>(args)` with `m` the instruction for elements of `w` bytes among the four given (for
/// 1, 2, 4 and 8).
macro_rules! per_width {
    ($w:expr, $a:expr, [$m1:ident, $m2:ident, $m4:ident, $m8:ident], ($($arg:expr),*)) => {
        match $w {
            1 => $a.$m1($($arg),*),
            2 => $a.$m2($($arg),*),
            4 => $a.$m4($($arg),*),
            _ => $a.$m8($($arg),*),
        }
    };
}

/// `$body` with `$r` the register table (`XMM`, `YMM` or `ZMM` of `regs.rs`, in scope where
/// it is used) of `$bytes`-byte vectors (16, 32, or anything else for 64).
macro_rules! v3 {
    ($bytes:expr, $r:ident => $body:expr) => {
        match $bytes {
            16 => {
                let $r = &XMM;
                $body
            }
            32 => {
                let $r = &YMM;
                $body
            }
            _ => {
                let $r = &ZMM;
                $body
            }
        }
    };
}

mod avx2;
mod avx512;
mod emitter;
mod encode;
mod isa;
mod kmask;
mod lanes;
mod nest;
mod nway;
mod nway_avx2;
mod pred;
mod pred_emit;
mod regs;
mod vector;

use iced_x86::code_asm::*;
use iced_x86::{Encoder, Instruction};

use super::level::Level;
use crate::plan::{ELSE, RowShape, Signature, THEN};
use avx2::Avx2;
use avx512::Avx512;
use emitter::{Bounds, Emitter};
pub(super) use emitter::{EmitError, Kind};
use encode::{Encoded, Scratch};
use isa::VecIsa;
pub(super) use nway::{covers as covers_nway, emit as emit_nway};
pub(super) use nway_avx2::{covers as covers_nway_avx2, emit as emit_nway_avx2};
pub(super) use pred::supported as covers_cond;

/// Bytes of output per main-loop block of a vector row.
pub(super) const BLOCK_BYTES: usize = isa::UNROLL * isa::VBYTES as usize;

/// Code generic over the vector ISA, run by [`on_isa`] with a level's.
trait OnIsa {
    type Out;
    fn run<I: VecIsa>(self) -> Self::Out;
}

/// Runs `f` with the vector ISA of `level`: the one place a [`Level`] chooses between the
/// AVX2 and AVX-512 code, everything under it being generic over [`VecIsa`].
fn on_isa<F: OnIsa>(level: Level, f: F) -> F::Out {
    match level {
        Level::Avx2 => f.run::<Avx2>(),
        Level::Avx512 => f.run::<Avx512>(),
    }
}

/// What the code of an exact (or `generic`) kernel of `sig` knows about its row length.
fn row_bounds(sig: &Signature, generic: bool) -> Bounds {
    let rank = sig.rank();
    if generic {
        Bounds {
            min: 1,
            max: u64::MAX >> 8,
        }
    } else if rank == 1 {
        Bounds {
            min: 1,
            max: sig.dims[0] as u64,
        }
    } else {
        let d = sig.dims[rank - 1] as u64;
        Bounds { min: d, max: d }
    }
}

/// Whether [`Kind::four_way`] changes the non-temporal exact kernel of `sig` at `level`: it
/// [`walks_parts`] or [`walks_quarters`].
pub(super) fn runs_four_way(sig: &Signature, level: Level) -> bool {
    struct FourWay<'a>(&'a Signature);
    impl OnIsa for FourWay<'_> {
        type Out = bool;
        fn run<I: VecIsa>(self) -> bool {
            walks_parts::<I>(self.0, false) || walks_quarters::<I>(self.0, false)
        }
    }
    on_isa(level, FourWay(sig))
}

/// Whether the non-temporal kernel of `sig` of ISA `I` walks four parts of its rows at once
/// when asked to ([`Kind::four_way`]): an exact kernel of vector-select rows that can be long
/// enough, of elements up to 8 bytes (the loop keeps a part's length in `r11`, through which
/// width 16 addresses), whose masks are not read from packed bits (at `rax`, which the loop
/// uses too).
fn walks_parts<I: VecIsa>(sig: &Signature, generic: bool) -> bool {
    !generic
        && sig.width <= 8
        && matches!(sig.row_shape(), RowShape::Select { .. })
        && !vector::packs_cond::<I>(sig, generic)
        && row_bounds(sig, generic)
            .max
            .saturating_mul(sig.width as u64)
            >= isa::PARTS_MIN_ROW
}

/// Whether the non-temporal kernel of `sig` walks the rows of its innermost outer loop four
/// at once, a quarter of the loop apart, when asked to ([`Kind::four_way`]): an exact kernel of
/// vector-select rows too short for [`walks_parts`], with an outer loop of at least four rows
/// (the outermost one's count is the call's range, known at run time only).
fn walks_quarters<I: VecIsa>(sig: &Signature, generic: bool) -> bool {
    let rank = sig.rank();
    !generic
        && rank >= 2
        && matches!(sig.row_shape(), RowShape::Select { .. })
        && !walks_parts::<I>(sig, generic)
        && (rank == 2 || sig.dims[rank - 2] >= 4)
}

/// The machine code of `sig`'s kernel (or of its pattern's shape-generic kernel), and the
/// length of its instructions (constants follow them).
pub(super) fn emit_kernel(
    sig: &Signature,
    generic: bool,
    level: Level,
    kind: Kind,
) -> Result<(Vec<u8>, usize), EmitError> {
    struct Kernel<'a> {
        sig: &'a Signature,
        generic: bool,
        kind: Kind,
    }
    impl OnIsa for Kernel<'_> {
        type Out = Result<(Vec<u8>, usize), EmitError>;
        fn run<I: VecIsa>(self) -> Self::Out {
            emit_kernel_of::<I>(self.sig, self.generic, self.kind)
        }
    }
    on_isa(level, Kernel { sig, generic, kind })
}

/// [`emit_kernel`] with ISA `I`.
fn emit_kernel_of<I: VecIsa>(
    sig: &Signature,
    generic: bool,
    kind: Kind,
) -> Result<(Vec<u8>, usize), EmitError> {
    let mut s = Scratch::take()?;
    let mut e = Emitter::new::<I>(s.a, sig, generic, kind);
    let r = e.emit_all::<I>(&mut s.enc, &mut s.cache);
    s.a = e.a;
    s.put();
    r
}

impl<'s> Emitter<'s> {
    fn new<I: VecIsa>(a: CodeAssembler, sig: &'s Signature, generic: bool, kind: Kind) -> Self {
        let rank = sig.rank();
        let shape = sig.row_shape();
        let n = row_bounds(sig, generic);
        let nt = kind.nt && !generic;
        let invariant = [THEN, ELSE].map(|op| sig.strides[op].iter().all(|&s| s == 0));
        let mut e = Emitter {
            a,
            sig,
            generic,
            nt,
            wide: kind.wide && I::wide(sig.width),
            parts: nt && kind.four_way && walks_parts::<I>(sig, generic),
            prefetchw: kind.prefetchw,
            quarters: nt && kind.four_way && walks_quarters::<I>(sig, generic),
            quarter_at: 0,
            w: sig.width,
            shape,
            n,
            rank,
            flow: Default::default(),
            consts: Vec::new(),
            invariant,
            unaligned_end: false,
            packed: false,
            bits_at: 0,
            from_bits: false,
            saved: Vec::new(),
            frame: 0,
            pred: pred::Pred::of(sig),
        };
        e.packed = vector::packs_cond::<I>(sig, generic);
        e
    }

    fn emit_all<I: VecIsa>(
        &mut self,
        enc: &mut Encoder,
        cache: &mut rustc_hash::FxHashMap<Instruction, Encoded>,
    ) -> Result<(Vec<u8>, usize), EmitError> {
        self.prologue::<I>()?;
        self.body::<I>()?;
        self.epilogue()?;
        self.finish(enc, cache)
    }
}

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

mod avx2;
mod avx512;
mod encode;
mod nest;
mod regs;
mod vector;

use iced_x86::code_asm::*;
use iced_x86::{Encoder, IcedError, Instruction};

pub(super) use encode::Label;
/// Bytes of output per main-loop block of a vector row.
pub(super) const BLOCK_BYTES: usize = vector::UNROLL * vector::VBYTES as usize;
use encode::{Branch, Encoded, MAX_CACHED, SCRATCH, Scratch};

use super::Level;
use crate::plan::{COND, ELSE, RowShape, Signature, THEN};

/// Why emission failed: an encoding the assembler refused, or a bug of the emitter.
#[derive(Debug)]
pub(super) struct EmitError(pub String);

impl From<IcedError> for EmitError {
    fn from(e: IcedError) -> Self {
        EmitError(e.to_string())
    }
}

impl std::fmt::Display for EmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn bug(what: &str) -> EmitError {
    EmitError(what.to_string())
}

/// Result of one emitted construct.
pub(super) type R = Result<(), EmitError>;

/// Row start pointers of cond, then, else and out.
pub(super) const P: [AsmRegister64; 4] = [rdi, rsi, rdx, rcx];

/// A pointer increment in bytes.
#[derive(Clone, Copy)]
pub(super) enum Stride {
    Zero,
    Imm(i32),
    /// A constant too large for an immediate, or a run-time stride argument.
    Mem(AsmMemoryOperand),
}

/// What the code knows about a row length (`r9` holds it at run time).
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    pub min: u64,
    pub max: u64,
}

impl Bounds {
    /// The length when it is known.
    pub fn known(self) -> Option<u64> {
        (self.min == self.max).then_some(self.min)
    }
    /// Whether some possible length lies in `lo..hi`.
    pub fn meets(self, lo: u64, hi: u64) -> bool {
        self.min.max(lo) < self.max.saturating_add(1).min(hi)
    }
    /// The bounds of `len * k`.
    pub fn times(self, k: u64) -> Bounds {
        Bounds {
            min: self.min.saturating_mul(k),
            max: self.max.saturating_mul(k),
        }
    }
}

/// Emits one kernel; one small method per construct.
pub(super) struct Emitter<'s> {
    pub a: CodeAssembler,
    pub sig: &'s Signature,
    pub generic: bool,
    pub level: Level,
    /// Non-temporal stores for long rows.
    pub nt: bool,
    /// zmm vectors in the main-loop blocks of vector-select rows (AVX-512, widths up to 8).
    pub wide: bool,
    /// Non-temporal rows long enough walk four parts at once ([`walks_parts`]).
    pub parts: bool,
    /// The rows of the innermost outer loop are walked a quarter apart, four at once
    /// ([`walks_quarters`]).
    pub quarters: bool,
    /// Stack offset of the quarter walk's slots: each operand's pointer distance of a
    /// quarter, of three quarters, and the rows left after the quarters.
    pub quarter_at: i32,
    pub w: usize,
    pub shape: RowShape,
    /// What the code knows about the row length.
    pub n: Bounds,
    rank: usize,
    /// Instruction index of each label, `usize::MAX` until bound.
    labels: Vec<usize>,
    /// Constants placed after the code.
    consts: Vec<Vec<u8>>,
    branches: Vec<Branch>,
    /// then/else: every stride is 0, so the operand is splatted once per kernel.
    pub invariant: [bool; 2],
    /// The row's main loop may start past element 0 (after a head that aligns the output), so
    /// a tail cannot tell from the row length where the loop stopped.
    pub unaligned_end: bool,
    /// The cond row is the same for every row and long: the prologue packs it to one bit per
    /// element on the stack, and main-loop blocks read their masks there (see
    /// [`Self::packs_cond`]).
    pub packed: bool,
    /// Stack offset of the packed bits.
    pub bits_at: i32,
    /// While set, a block reads its masks from the packed bits at `rax`.
    pub from_bits: bool,
    saved: Vec<AsmRegister64>,
    frame: i32,
}

/// How a kernel stores and walks its rows (see [`crate::Variant`]).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Kind {
    pub nt: bool,
    pub wide: bool,
    pub four_way: bool,
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

/// Whether the non-temporal kernel of `sig` at `level` walks four parts of its rows at once
/// when asked to ([`Kind::four_way`]): an exact kernel of vector-select rows that can be long
/// enough, of elements up to 8 bytes (the loop keeps a part's length in `r11`, through which
/// width 16 addresses), whose masks are not read from packed bits (at `rax`, which the loop
/// uses too).
pub(super) fn walks_parts(sig: &Signature, generic: bool, level: Level) -> bool {
    !generic
        && sig.width <= 8
        && matches!(sig.row_shape(), RowShape::Select { .. })
        && !vector::packs_cond(sig, generic, level)
        && row_bounds(sig, generic)
            .max
            .saturating_mul(sig.width as u64)
            >= vector::PARTS_MIN_ROW
}

/// Whether the non-temporal kernel of `sig` walks the rows of its innermost outer loop four
/// at once, a quarter of the loop apart, when asked to ([`Kind::four_way`]): an exact kernel of
/// vector-select rows too short for [`walks_parts`], with an outer loop of at least four rows
/// (the outermost one's count is the call's range, known at run time only).
pub(super) fn walks_quarters(sig: &Signature, generic: bool, level: Level) -> bool {
    let rank = sig.rank();
    !generic
        && rank >= 2
        && matches!(sig.row_shape(), RowShape::Select { .. })
        && !walks_parts(sig, generic, level)
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
    let mut s = match SCRATCH.with(|s| s.borrow_mut().take()) {
        Some(s) => s,
        None => Scratch {
            a: CodeAssembler::new(64)?,
            enc: Encoder::new(64),
            cache: Default::default(),
        },
    };
    s.a.reset();
    if s.cache.len() > MAX_CACHED {
        s.cache.clear();
    }
    let mut e = Emitter::new(s.a, sig, generic, level, kind);
    let r = e.emit_all(&mut s.enc, &mut s.cache);
    s.a = e.a;
    SCRATCH.with(|x| *x.borrow_mut() = Some(s));
    r
}

impl<'s> Emitter<'s> {
    fn new(a: CodeAssembler, sig: &'s Signature, generic: bool, level: Level, kind: Kind) -> Self {
        let rank = sig.rank();
        let shape = sig.row_shape();
        let n = row_bounds(sig, generic);
        let nt = kind.nt && !generic;
        let invariant = [THEN, ELSE].map(|op| sig.strides[op].iter().all(|&s| s == 0));
        let mut e = Emitter {
            a,
            sig,
            generic,
            level,
            nt,
            wide: kind.wide && level == Level::Avx512 && sig.width <= 8,
            parts: nt && kind.four_way && walks_parts(sig, generic, level),
            quarters: nt && kind.four_way && walks_quarters(sig, generic, level),
            quarter_at: 0,
            w: sig.width,
            shape,
            n,
            rank,
            labels: Vec::new(),
            consts: Vec::new(),
            branches: Vec::new(),
            invariant,
            unaligned_end: false,
            packed: false,
            bits_at: 0,
            from_bits: false,
            saved: Vec::new(),
            frame: 0,
        };
        e.packed = vector::packs_cond(sig, generic, level);
        e
    }

    fn emit_all(
        &mut self,
        enc: &mut Encoder,
        cache: &mut rustc_hash::FxHashMap<Instruction, Encoded>,
    ) -> Result<(Vec<u8>, usize), EmitError> {
        self.prologue()?;
        self.body()?;
        self.epilogue()?;
        self.finish(enc, cache)
    }

    /// `reg = v` in the shortest encoding.
    pub fn mov_imm(&mut self, reg: AsmRegister64, v: u64) -> R {
        match u32::try_from(v) {
            Ok(v32) => self.a.mov(gpr32(reg)?, v32)?,
            Err(_) => self.a.mov(reg, v)?,
        }
        Ok(())
    }

    /// `reg += stride`.
    pub fn add_stride(&mut self, reg: AsmRegister64, s: Stride) -> R {
        match s {
            Stride::Zero => {}
            Stride::Imm(v) => self.a.add(reg, v)?,
            Stride::Mem(m) => self.a.add(reg, m)?,
        }
        Ok(())
    }

    /// Byte stride of operand `op` along collapsed dim `level`.
    pub fn stride(&mut self, level: usize, op: usize) -> Stride {
        let s = self.sig.strides[op][level];
        if s == 0 {
            return Stride::Zero;
        }
        if self.generic && !(level == self.rank - 1 && s == 1) {
            return Stride::Mem(qword_ptr(r15 + 8 * (op * self.rank + level) as i32));
        }
        let bytes = self.sig.byte_stride(op, level) as i64;
        match i32::try_from(bytes) {
            Ok(v) => Stride::Imm(v),
            Err(_) => Stride::Mem(qword_ptr(self.constant(&bytes.to_le_bytes()))),
        }
    }

    /// Whether operand `op` (then or else) has stride 0 along the row.
    pub fn row_bcast(&self, op: usize) -> bool {
        self.shape.bcast(op)
    }

    /// log2 of the element width.
    pub fn wlog(&self) -> u32 {
        self.w.trailing_zeros()
    }

    /// Address of element `r8 + off` of operand `op` along a vector or copy row (unit or zero
    /// stride). Width 16 addresses through `r11 = r8 * 16`, set by the caller.
    pub fn elem(&self, op: usize, off: i64) -> AsmMemoryOperand {
        let p = P[op];
        if op != COND && self.row_bcast(op) {
            return ptr(p);
        }
        let (w, off) = if op == COND {
            (1, off)
        } else {
            (self.w, off * self.w as i64)
        };
        match w {
            16 => ptr(p + r11 + off),
            w => ptr(p + r8 * w as u32 + off),
        }
    }
}

/// The 32-bit register of a 64-bit one.
pub(super) fn gpr32(r: AsmRegister64) -> Result<AsmRegister32, EmitError> {
    Ok(match r {
        x if x == rax => eax,
        x if x == rbx => ebx,
        x if x == r8 => r8d,
        x if x == r9 => r9d,
        x if x == r10 => r10d,
        x if x == r11 => r11d,
        x if x == r12 => r12d,
        x if x == r13 => r13d,
        _ => return Err(bug("no 32-bit name for this register")),
    })
}

pub(super) fn gpr16(r: AsmRegister64) -> Result<AsmRegister16, EmitError> {
    Ok(match r {
        x if x == rax => ax,
        x if x == r12 => r12w,
        _ => return Err(bug("no 16-bit name for this register")),
    })
}

pub(super) fn gpr8(r: AsmRegister64) -> Result<AsmRegister8, EmitError> {
    Ok(match r {
        x if x == rax => al,
        x if x == r12 => r12b,
        _ => return Err(bug("no 8-bit name for this register")),
    })
}

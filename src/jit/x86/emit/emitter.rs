//! The emitter's state and its small shared pieces: the [`Emitter`] of one kernel (one small
//! method per construct, spread over the files of `emit/`), what it knows about row lengths,
//! labels and branches, pointer strides, and the registers' narrower names.
//!
//! Pointers: rdi, rsi, rdx and rcx hold the row starts of cond (a predicate's `lhs`), then,
//! else and out ([`P`]); a comparison's `rhs` has a fifth, r12 ([`PTR`], [`Emitter::nops`]),
//! which the prologue loads from the kernel's ninth argument and which the loops move like
//! the others (outer loops kept in the stack frame save five pointers per level instead of
//! four). Kernels of masks and tests have four pointers and never touch r12 outside their
//! strided rows.

use iced_x86::IcedError;
use iced_x86::code_asm::*;

use super::pred::Pred;
use super::regs::Cc;
use crate::plan::{COND, RowShape, Signature};

/// Why emission failed: an encoding the assembler refused, or a bug of the emitter.
#[derive(Debug)]
pub(in crate::jit::x86) struct EmitError(pub String);

impl From<IcedError> for EmitError {
    fn from(e: IcedError) -> Self {
        EmitError(e.to_string())
    }
}

impl std::error::Error for EmitError {}

impl std::fmt::Display for EmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(super) fn bug(what: &str) -> EmitError {
    EmitError(what.to_string())
}

/// Result of one emitted construct.
pub(super) type R = Result<(), EmitError>;

/// Row start pointers of cond, then, else and out.
pub(super) const P: [AsmRegister64; 4] = [rdi, rsi, rdx, rcx];

/// Row start pointers of every operand: cond (or a predicate's lhs), then, else, out and a
/// comparison's rhs (the first [`Emitter::nops`] are in use).
pub(super) const PTR: [AsmRegister64; 5] = [rdi, rsi, rdx, rcx, r12];

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
    pub(super) fn known(self) -> Option<u64> {
        (self.min == self.max).then_some(self.min)
    }
    /// Whether some possible length lies in `lo..hi`.
    pub(super) fn meets(self, lo: u64, hi: u64) -> bool {
        self.min.max(lo) < self.max.saturating_add(1).min(hi)
    }
    /// The bounds of `len * k`.
    pub(super) fn times(self, k: u64) -> Bounds {
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
    /// Non-temporal stores for long rows.
    pub nt: bool,
    /// zmm vectors in the main-loop blocks of vector-select rows (AVX-512, widths up to 8).
    pub wide: bool,
    /// Non-temporal rows long enough walk four parts at once ([`super::walks_parts`]).
    pub parts: bool,
    /// The main loop with ordinary stores fetches the output's lines for writing ahead.
    pub prefetchw: bool,
    /// The rows of the innermost outer loop are walked a quarter apart, four at once
    /// ([`super::walks_quarters`]).
    pub quarters: bool,
    /// Stack offset of the quarter walk's slots: each operand's pointer distance of a
    /// quarter, of three quarters, and the rows left after the quarters.
    pub quarter_at: i32,
    pub w: usize,
    pub shape: RowShape,
    /// What the code knows about the row length.
    pub n: Bounds,
    pub(super) rank: usize,
    /// Labels and branches.
    pub(super) flow: Flow,
    /// Constants placed after the code.
    pub(super) consts: Vec<Vec<u8>>,
    /// then/else: every stride is 0, so the operand is splatted once per kernel.
    pub invariant: [bool; 2],
    /// The row's main loop may start past element 0 (after a head that aligns the output), so
    /// a tail cannot tell from the row length where the loop stopped.
    pub unaligned_end: bool,
    /// The cond row is the same for every row and long: the prologue packs it to one bit per
    /// element on the stack, and main-loop blocks read their masks there (see
    /// [`super::vector::packs_cond`]).
    pub packed: bool,
    /// Stack offset of the packed bits.
    pub bits_at: i32,
    /// While set, a block reads its masks from the packed bits at `rax`.
    pub from_bits: bool,
    pub(super) saved: Vec<AsmRegister64>,
    pub(super) frame: i32,
    /// The predicate deciding each element, or `None` for a mask.
    pub pred: Option<Pred>,
}

/// How a kernel stores and walks its rows (see [`crate::Variant`]).
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::jit::x86) struct Kind {
    pub nt: bool,
    pub wide: bool,
    pub four_way: bool,
    pub prefetchw: bool,
}

/// A jump target inside the kernel (bound with [`Emitter::bind`]).
#[derive(Clone, Copy, Debug)]
pub(in crate::jit::x86) struct Label(pub(super) usize);

/// A branch in the instruction stream (a `nop` placeholder until layout).
pub(super) struct Branch {
    /// Instruction index of the placeholder.
    pub at: usize,
    /// Condition nibble (`jcc`), or `None` for `jmp`.
    pub cc: Option<u8>,
    /// Label index.
    pub target: usize,
}

impl<'s> Emitter<'s> {
    /// `reg = v` in the shortest encoding.
    pub(super) fn mov_imm(&mut self, reg: AsmRegister64, v: u64) -> R {
        match u32::try_from(v) {
            Ok(v32) => self.a.mov(gpr32(reg)?, v32)?,
            Err(_) => self.a.mov(reg, v)?,
        }
        Ok(())
    }

    /// `dst = src` if `cc` holds (ZF set or clear).
    pub(super) fn cmov64(&mut self, cc: Cc, dst: AsmRegister64, src: AsmRegister64) -> R {
        match cc {
            Cc::Z => self.a.cmovz(dst, src)?,
            Cc::NZ => self.a.cmovnz(dst, src)?,
            _ => return Err(bug("cmov on a condition other than ZF")),
        }
        Ok(())
    }

    /// `reg += stride`.
    pub(super) fn add_stride(&mut self, reg: AsmRegister64, s: Stride) -> R {
        match s {
            Stride::Zero => {}
            Stride::Imm(v) => self.a.add(reg, v)?,
            Stride::Mem(m) => self.a.add(reg, m)?,
        }
        Ok(())
    }

    /// Byte stride of operand `op` along collapsed dim `level`.
    pub(super) fn stride(&mut self, level: usize, op: usize) -> Stride {
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
    pub(super) fn row_bcast(&self, op: usize) -> bool {
        self.shape.bcast(op)
    }

    /// Pointer operands: 5 with a comparison's rhs, else 4 (see [`PTR`]).
    pub(super) fn nops(&self) -> usize {
        match &self.pred {
            Some(p) if p.binary => 5,
            _ => 4,
        }
    }

    /// log2 of the element width.
    pub(super) fn wlog(&self) -> u32 {
        self.w.trailing_zeros()
    }

    /// Address of element `r8 + off` of operand `op` along a vector or copy row (unit or zero
    /// stride). Width 16 addresses through `r11 = r8 * 16`, set by the caller.
    pub(super) fn elem(&self, op: usize, off: i64) -> AsmMemoryOperand {
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
        x if x == r13 => r13w,
        _ => return Err(bug("no 16-bit name for this register")),
    })
}

pub(super) fn gpr8(r: AsmRegister64) -> Result<AsmRegister8, EmitError> {
    Ok(match r {
        x if x == rax => al,
        x if x == r12 => r12b,
        x if x == r13 => r13b,
        _ => return Err(bug("no 8-bit name for this register")),
    })
}

/// A kernel's labels (the instruction index each is bound to, `usize::MAX` until bound) and
/// branches (`nop` placeholders in the instruction stream, laid out by the encoder's `Parts::finish`).
#[derive(Default)]
pub(super) struct Flow {
    pub labels: Vec<usize>,
    pub branches: Vec<Branch>,
}

impl Flow {
    /// A new, unbound label.
    pub(super) fn label(&mut self) -> Label {
        self.labels.push(usize::MAX);
        Label(self.labels.len() - 1)
    }

    /// Binds `l` to the next instruction `a` emits.
    pub(super) fn bind(&mut self, a: &CodeAssembler, l: Label) {
        self.labels[l.0] = a.instructions().len();
    }

    /// A jump to `l` (when condition nibble `cc` holds, else always): a `nop` placeholder in
    /// `a`'s stream.
    pub(super) fn jump(&mut self, a: &mut CodeAssembler, cc: Option<u8>, l: Label) -> R {
        self.branches.push(Branch {
            at: a.instructions().len(),
            cc,
            target: l.0,
        });
        Ok(a.nop()?)
    }
}

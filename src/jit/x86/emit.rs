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

mod avx2;
mod avx512;
mod regs;

use iced_x86::code_asm::*;
use iced_x86::{Encoder, IcedError, Instruction, Register};

use super::Level;
use crate::plan::{COND, ELSE, OUT, Signature, THEN};

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

/// Stack bytes per outer loop kept in memory: the trip counter and four pointers.
const SLOT: i32 = 40;

/// Absolute addresses from here on mark constants in memory operands until they are made
/// RIP-relative.
const CONST_MARK: u64 = 0x7f00_0000;

/// A jump target inside the kernel (bound with [`Emitter::bind`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Label(usize);

/// A branch in the instruction stream (a `nop` placeholder until layout).
struct Branch {
    /// Instruction index of the placeholder.
    at: usize,
    /// Condition nibble (`jcc`), or `None` for `jmp`.
    cc: Option<u8>,
    /// Label index.
    target: usize,
}

/// A pointer increment in bytes.
#[derive(Clone, Copy)]
pub(super) enum Stride {
    Zero,
    Imm(i32),
    /// A constant too large for an immediate, or a run-time stride argument.
    Mem(AsmMemoryOperand),
}

/// A loop trip count.
#[derive(Clone, Copy)]
enum Count {
    Const(u64),
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

/// How the innermost dimension is run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum RowShape {
    Vector,
    Copy,
    Strided,
}

/// The row shape of `sig` (same rule as the Cranelift tier).
pub(super) fn row_shape(sig: &Signature) -> RowShape {
    let s = |op: usize| sig.inner_stride(op);
    let unit_or_bcast = |v: isize| v == 0 || v == 1;
    if s(OUT) == 1 && unit_or_bcast(s(THEN)) && unit_or_bcast(s(ELSE)) {
        match s(COND) {
            1 => return RowShape::Vector,
            0 => return RowShape::Copy,
            _ => {}
        }
    }
    RowShape::Strided
}

/// Emits one kernel; one small method per construct.
pub(super) struct Emitter<'s> {
    pub a: CodeAssembler,
    pub sig: &'s Signature,
    pub generic: bool,
    pub level: Level,
    /// Non-temporal stores for long rows.
    pub nt: bool,
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
    saved: Vec<AsmRegister64>,
    frame: i32,
}

/// The encoding of one instruction (at most 15 bytes).
#[derive(Clone, Copy)]
struct Encoded {
    len: u8,
    bytes: [u8; 15],
}

/// Encodings kept per thread: kernels repeat most of their instructions, and a lookup costs a
/// fraction of an encoding. Cleared when it grows past this many entries.
const MAX_CACHED: usize = 8192;

/// A thread's reusable emission state: the assembler and encoder (for their buffers) and the
/// encodings seen so far.
struct Scratch {
    a: CodeAssembler,
    enc: Encoder,
    cache: rustc_hash::FxHashMap<Instruction, Encoded>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Option<Scratch>> = const { std::cell::RefCell::new(None) };
}

/// The machine code of `sig`'s kernel (or of its pattern's shape-generic kernel), and the
/// length of its instructions (constants follow them).
pub(super) fn emit_kernel(
    sig: &Signature,
    generic: bool,
    level: Level,
    nt: bool,
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
    let mut e = Emitter::new(s.a, sig, generic, level, nt);
    let r = e.emit_all(&mut s.enc, &mut s.cache);
    s.a = e.a;
    SCRATCH.with(|x| *x.borrow_mut() = Some(s));
    r
}

impl<'s> Emitter<'s> {
    fn new(a: CodeAssembler, sig: &'s Signature, generic: bool, level: Level, nt: bool) -> Self {
        let rank = sig.rank();
        let shape = row_shape(sig);
        let n = if generic {
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
        };
        let invariant = [THEN, ELSE].map(|op| sig.strides[op].iter().all(|&s| s == 0));
        Emitter {
            a,
            sig,
            generic,
            level,
            nt: nt && !generic,
            w: sig.width,
            shape,
            n,
            rank,
            labels: Vec::new(),
            consts: Vec::new(),
            branches: Vec::new(),
            invariant,
            saved: Vec::new(),
            frame: 0,
        }
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

    // ---- labels and branches -----------------------------------------------------------

    /// A new, unbound label.
    pub fn label(&mut self) -> Label {
        self.labels.push(usize::MAX);
        Label(self.labels.len() - 1)
    }

    /// Binds `l` to the next instruction emitted.
    pub fn bind(&mut self, l: Label) {
        self.labels[l.0] = self.a.instructions().len();
    }

    /// A branch to `l`: a `nop` placeholder in the instruction stream, laid out by [`Self::finish`].
    fn branch(&mut self, cc: Option<u8>, l: Label) -> R {
        self.branches.push(Branch {
            at: self.a.instructions().len(),
            cc,
            target: l.0,
        });
        Ok(self.a.nop()?)
    }
    pub fn jmp(&mut self, l: Label) -> R {
        self.branch(None, l)
    }
    pub fn jb(&mut self, l: Label) -> R {
        self.branch(Some(0x2), l)
    }
    pub fn jae(&mut self, l: Label) -> R {
        self.branch(Some(0x3), l)
    }
    pub fn je(&mut self, l: Label) -> R {
        self.branch(Some(0x4), l)
    }
    pub fn jne(&mut self, l: Label) -> R {
        self.branch(Some(0x5), l)
    }
    /// `jc`: jump when the carry flag is set.
    pub fn branch_carry(&mut self, l: Label) -> R {
        self.jb(l)
    }
    pub fn jbe(&mut self, l: Label) -> R {
        self.branch(Some(0x6), l)
    }

    /// A RIP-relative operand of `bytes` placed after the code. It is emitted as an absolute
    /// address that marks the constant, and made RIP-relative by [`Self::finish`].
    pub fn constant(&mut self, bytes: &[u8]) -> AsmMemoryOperand {
        let k = match self.consts.iter().position(|b| b == bytes) {
            Some(k) => k,
            None => {
                self.consts.push(bytes.to_vec());
                self.consts.len() - 1
            }
        };
        ptr(CONST_MARK + k as u64)
    }

    /// Encodes everything: each instruction once, branches in their short form where the
    /// target is within reach and near otherwise, constants after the code (32-byte aligned),
    /// RIP-relative operands pointed at them. Returns the bytes and the length of the code.
    fn finish(
        &mut self,
        enc: &mut Encoder,
        cache: &mut rustc_hash::FxHashMap<Instruction, Encoded>,
    ) -> Result<(Vec<u8>, usize), EmitError> {
        let ins = self.a.instructions();
        let n = ins.len();
        // Encode every non-branch instruction once at address 0 (their bytes do not depend on
        // the address, except RIP-relative ones, encoded again below).
        let mut start = Vec::with_capacity(n + 1);
        let mut is_branch = vec![false; n];
        for b in &self.branches {
            is_branch[b.at] = true;
        }
        let mut rip_rel = Vec::new();
        let mut body: Vec<u8> = Vec::with_capacity(8 * n);
        for (i, x) in ins.iter().enumerate() {
            start.push(body.len());
            if is_branch[i] {
                continue;
            }
            if x.memory_base() == Register::None && x.memory_index() == Register::None {
                let d = x.memory_displacement64();
                if d >= CONST_MARK && d < CONST_MARK + self.consts.len() as u64 {
                    // Encoded for its length now, at its address below.
                    let mut x = *x;
                    x.set_memory_base(Register::RIP);
                    x.set_memory_displacement64(0);
                    let len = enc.encode(&x, 0)?;
                    body.resize(body.len() + len, 0);
                    rip_rel.push((i, x, (d - CONST_MARK) as usize));
                    continue;
                }
            }
            let e = match cache.get(x) {
                Some(e) => *e,
                None => {
                    let len = enc.encode(x, 0)?;
                    let buf = enc.take_buffer();
                    let mut e = Encoded {
                        len: len as u8,
                        bytes: [0; 15],
                    };
                    e.bytes[..len].copy_from_slice(&buf[buf.len() - len..]);
                    enc.set_buffer(recycle(buf));
                    cache.insert(*x, e);
                    e
                }
            };
            body.extend_from_slice(&e.bytes[..e.len as usize]);
        }
        start.push(body.len());
        let _ = enc.take_buffer();
        // Branch sizes: short until the displacement does not fit, then near (a fixpoint:
        // sizes only grow).
        let mut size: Vec<usize> = (0..n)
            .map(|i| {
                if is_branch[i] {
                    2
                } else {
                    start[i + 1] - start[i]
                }
            })
            .collect();
        let mut at = vec![0usize; n + 1];
        loop {
            for i in 0..n {
                at[i + 1] = at[i] + size[i];
            }
            let mut grew = false;
            for b in &self.branches {
                if size[b.at] != 2 {
                    continue;
                }
                let target = self.labels[b.target];
                if target == usize::MAX || target > n {
                    return Err(bug("branch to an unbound label"));
                }
                let d = at[target] as i64 - (at[b.at] + 2) as i64;
                if i8::try_from(d).is_err() {
                    size[b.at] = if b.cc.is_some() { 6 } else { 5 };
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        let code_len = at[n];
        let const_at = code_len.next_multiple_of(32);
        let mut out = Vec::with_capacity(const_at + 64 * self.consts.len());
        let mut bi = 0;
        for i in 0..n {
            if is_branch[i] {
                let b = &self.branches[bi];
                bi += 1;
                let target = at[self.labels[b.target]] as i64;
                let next = (at[i] + size[i]) as i64;
                let d = target - next;
                match (size[i], b.cc) {
                    (2, Some(cc)) => out.extend([0x70 | cc, d as i8 as u8]),
                    (2, None) => out.extend([0xeb, d as i8 as u8]),
                    (_, Some(cc)) => {
                        out.extend([0x0f, 0x80 | cc]);
                        out.extend((d as i32).to_le_bytes());
                    }
                    (_, None) => {
                        out.push(0xe9);
                        out.extend((d as i32).to_le_bytes());
                    }
                }
            } else {
                out.extend_from_slice(&body[start[i]..start[i + 1]]);
            }
        }
        out.resize(const_at, 0xcc);
        let mut const_off = Vec::with_capacity(self.consts.len());
        for c in &self.consts {
            const_off.push(out.len());
            out.extend_from_slice(c);
            out.resize(out.len().next_multiple_of(32), 0);
        }
        for (i, mut x, k) in rip_rel {
            x.set_memory_displacement64(const_off[k] as u64);
            if enc.encode(&x, at[i] as u64)? != size[i] {
                return Err(bug("RIP-relative instruction changed its length"));
            }
            let buf = enc.take_buffer();
            out[at[i]..at[i] + size[i]].copy_from_slice(&buf);
            enc.set_buffer(recycle(buf));
        }
        Ok((out, code_len))
    }

    // ---- small helpers -----------------------------------------------------------------

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
        let wop = if op == COND { 1 } else { self.w as i64 };
        if self.generic && !(level == self.rank - 1 && s == 1) {
            return Stride::Mem(qword_ptr(r15 + 8 * (op * self.rank + level) as i32));
        }
        let bytes = s as i64 * wop;
        match i32::try_from(bytes) {
            Ok(v) => Stride::Imm(v),
            Err(_) => Stride::Mem(qword_ptr(self.constant(&bytes.to_le_bytes()))),
        }
    }

    /// Whether operand `op` (then or else) has stride 0 along the row.
    pub fn row_bcast(&self, op: usize) -> bool {
        self.sig.inner_stride(op) == 0
    }

    /// log2 of the element width.
    pub fn wlog(&self) -> u32 {
        self.w.trailing_zeros()
    }

    // ---- prologue, loop nest, epilogue ---------------------------------------------------

    fn uses_vectors(&self) -> bool {
        self.shape != RowShape::Strided
    }

    fn prologue(&mut self) -> R {
        // Nothing to do for an empty range: return before touching any register.
        let start = self.label();
        self.a.cmp(r8, r9)?;
        self.jb(start)?;
        self.a.ret()?;
        self.bind(start);
        if self.rank >= 2 {
            self.saved.push(rbx);
        }
        if self.shape == RowShape::Strided {
            self.saved.extend([rbp, r12, r13]);
        }
        if self.generic {
            self.saved.extend([r14, r15]);
        }
        for r in self.saved.clone() {
            self.a.push(r)?;
        }
        if self.generic {
            let above = 8 * self.saved.len() as i32;
            self.a.mov(r14, qword_ptr(rsp + (above + 8)))?;
            self.a.mov(r15, qword_ptr(rsp + (above + 16)))?;
        }
        self.frame = SLOT * self.rank.saturating_sub(2) as i32;
        if self.frame > 0 {
            self.a.sub(rsp, self.frame)?;
        }
        // Pointers to outer index `begin`.
        for (op, p) in P.into_iter().enumerate() {
            match self.stride(0, op) {
                Stride::Zero => {}
                Stride::Imm(1) => self.a.add(p, r8)?,
                Stride::Imm(v @ (2 | 4 | 8)) => self.a.lea(p, ptr(p + r8 * v as u32))?,
                Stride::Imm(v) => {
                    self.a.imul_3(rax, r8, v)?;
                    self.a.add(p, rax)?;
                }
                Stride::Mem(m) => {
                    self.a.mov(rax, m)?;
                    self.a.imul_2(rax, r8)?;
                    self.a.add(p, rax)?;
                }
            }
        }
        self.a.sub(r9, r8)?;
        if self.uses_vectors() {
            match self.level {
                Level::Avx2 => self.avx2_invariants()?,
                Level::Avx512 => self.avx512_invariants()?,
            }
        }
        Ok(())
    }

    /// Whether the row code splats `op` (then or else), and the kernel can do it once.
    pub fn splat_once(&self, op: usize) -> bool {
        self.uses_vectors() && self.invariant[op - THEN]
    }

    fn body(&mut self) -> R {
        if self.rank == 1 {
            return self.row();
        }
        // r9 holds the outer trip count; it moves to the loop's counter, r9 to the row length.
        if self.rank == 2 {
            self.a.mov(rbx, r9)?;
        } else {
            self.a.mov(qword_ptr(rsp), r9)?;
        }
        let last = self.rank - 1;
        match self.count(last) {
            Count::Const(n) => self.mov_imm(r9, n)?,
            Count::Mem(m) => self.a.mov(r9, m)?,
        }
        self.outer(0)
    }

    /// Trip count of dim `level` (not the outermost).
    fn count(&self, level: usize) -> Count {
        if self.generic {
            Count::Mem(qword_ptr(r14 + 8 * level as i32))
        } else {
            Count::Const(self.sig.dims[level] as u64)
        }
    }

    /// The loop over dim `level` (its trip count already in place for level 0).
    fn outer(&mut self, level: usize) -> R {
        if level == self.rank - 1 {
            return self.row();
        }
        let steps: [Stride; 4] = std::array::from_fn(|op| self.stride(level, op));
        let top = self.label();
        if level == self.rank - 2 {
            if level > 0 {
                match self.count(level) {
                    Count::Const(n) => self.mov_imm(rbx, n)?,
                    Count::Mem(m) => self.a.mov(rbx, m)?,
                }
            }
            self.bind(top);
            self.outer(level + 1)?;
            for op in 0..4 {
                self.add_stride(P[op], steps[op])?;
            }
            self.a.dec(rbx)?;
            return self.jne(top);
        }
        let slot = SLOT * level as i32;
        if level > 0 {
            match self.count(level) {
                Count::Const(n) => match i32::try_from(n) {
                    Ok(v) => self.a.mov(qword_ptr(rsp + slot), v)?,
                    Err(_) => {
                        self.a.mov(rax, n)?;
                        self.a.mov(qword_ptr(rsp + slot), rax)?;
                    }
                },
                Count::Mem(m) => {
                    self.a.mov(rax, m)?;
                    self.a.mov(qword_ptr(rsp + slot), rax)?;
                }
            }
        }
        self.bind(top);
        for (op, p) in P.into_iter().enumerate() {
            self.a.mov(qword_ptr(rsp + (slot + 8 + 8 * op as i32)), p)?;
        }
        self.outer(level + 1)?;
        for (op, p) in P.into_iter().enumerate() {
            self.a.mov(p, qword_ptr(rsp + (slot + 8 + 8 * op as i32)))?;
            self.add_stride(p, steps[op])?;
        }
        self.a.dec(qword_ptr(rsp + slot))?;
        self.jne(top)
    }

    fn row(&mut self) -> R {
        match (self.shape, self.level) {
            (RowShape::Vector, Level::Avx2) => self.avx2_vector_row(),
            (RowShape::Vector, Level::Avx512) => self.avx512_vector_row(),
            (RowShape::Copy, _) => self.copy_row(),
            (RowShape::Strided, _) => self.strided_row(),
        }
    }

    fn epilogue(&mut self) -> R {
        if self.nt {
            self.a.sfence()?;
        }
        if self.uses_vectors() {
            self.a.vzeroupper()?;
        }
        if self.frame > 0 {
            self.a.add(rsp, self.frame)?;
        }
        for r in self.saved.clone().into_iter().rev() {
            self.a.pop(r)?;
        }
        Ok(self.a.ret()?)
    }

    // ---- row copy ------------------------------------------------------------------------

    /// cond constant along the row: one test, then a copy (or fill) of the chosen input. A
    /// copy of the output onto itself (in place) is skipped.
    fn copy_row(&mut self) -> R {
        let done = self.label();
        let take_else = self.label();
        self.a.cmp(byte_ptr(rdi), 0)?;
        self.je(take_else)?;
        self.copy_from(THEN, done)?;
        self.jmp(done)?;
        self.bind(take_else);
        self.copy_from(ELSE, done)?;
        self.bind(done);
        Ok(())
    }

    fn copy_from(&mut self, op: usize, done: Label) -> R {
        // r10 = bytes in the row.
        match self.wlog() {
            0 => self.a.mov(r10, r9)?,
            k @ 1..=3 => self.a.lea(r10, ptr(r9 * (1u32 << k)))?,
            k => {
                self.a.mov(r10, r9)?;
                self.a.shl(r10, k)?;
            }
        }
        let fill = self.row_bcast(op);
        if !fill {
            // In place: the chosen input is the output itself.
            self.a.cmp(P[op], rcx)?;
            self.je(done)?;
        }
        match self.level {
            Level::Avx2 => self.avx2_copy(op, fill, done),
            Level::Avx512 => self.avx512_copy(op, fill, done),
        }
    }

    // ---- strided rows --------------------------------------------------------------------

    /// Any strides: one element at a time, branch-free (`cmov`), pointers moved by the
    /// (signed) byte strides.
    fn strided_row(&mut self) -> R {
        let l = self.rank - 1;
        let steps: [Stride; 4] = std::array::from_fn(|op| self.stride(l, op));
        let moving = [r10, r11, rax, rbp];
        for op in 0..4 {
            self.a.mov(moving[op], P[op])?;
        }
        self.a.mov(r8, r9)?;
        let top = self.label();
        self.bind(top);
        self.a.cmp(byte_ptr(r10), 0)?;
        self.select_elem(ptr(r11), ptr(rax), ptr(rbp), r12, r13)?;
        for op in 0..4 {
            self.add_stride(moving[op], steps[op])?;
        }
        self.a.dec(r8)?;
        self.jne(top)
    }

    /// One element `out = ZF ? else : then` (ZF set by a compare of the cond byte with 0),
    /// through the temporaries `t` and `u`.
    pub fn select_elem(
        &mut self,
        then: AsmMemoryOperand,
        else_: AsmMemoryOperand,
        out: AsmMemoryOperand,
        t: AsmRegister64,
        u: AsmRegister64,
    ) -> R {
        let (t32, u32_) = (gpr32(t)?, gpr32(u)?);
        match self.w {
            1 => {
                self.a.movzx(t32, byte_ptr(then))?;
                self.a.movzx(u32_, byte_ptr(else_))?;
                self.a.cmovz(t32, u32_)?;
                Ok(self.a.mov(byte_ptr(out), gpr8(t)?)?)
            }
            2 => {
                self.a.movzx(t32, word_ptr(then))?;
                self.a.movzx(u32_, word_ptr(else_))?;
                self.a.cmovz(t32, u32_)?;
                Ok(self.a.mov(word_ptr(out), gpr16(t)?)?)
            }
            4 => {
                self.a.mov(t32, dword_ptr(then))?;
                self.a.cmovz(t32, dword_ptr(else_))?;
                Ok(self.a.mov(dword_ptr(out), t32)?)
            }
            8 => {
                self.a.mov(t, qword_ptr(then))?;
                self.a.cmovz(t, qword_ptr(else_))?;
                Ok(self.a.mov(qword_ptr(out), t)?)
            }
            _ => {
                for k in [0i32, 8] {
                    self.a.mov(t, qword_ptr(then + k))?;
                    self.a.cmovz(t, qword_ptr(else_ + k))?;
                    self.a.mov(qword_ptr(out + k), t)?;
                }
                Ok(())
            }
        }
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

/// An emptied buffer, to give back to the encoder (which appends to it).
fn recycle(mut buf: Vec<u8>) -> Vec<u8> {
    buf.clear();
    buf
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

fn gpr16(r: AsmRegister64) -> Result<AsmRegister16, EmitError> {
    Ok(match r {
        x if x == rax => ax,
        x if x == r12 => r12w,
        _ => return Err(bug("no 16-bit name for this register")),
    })
}

fn gpr8(r: AsmRegister64) -> Result<AsmRegister8, EmitError> {
    Ok(match r {
        x if x == rax => al,
        x if x == r12 => r12b,
        _ => return Err(bug("no 8-bit name for this register")),
    })
}

//! The kernel around its rows: prologue (registers saved, pointers moved to `begin`, the
//! loop-invariant registers), the loop nest over the outer dims, the epilogue, and the rows
//! that need no vector code of their own: the row copy's test and the strided row.
//!
//! Four-way kernels whose rows are too short to walk four parts of each
//! ([`super::walks_quarters`]) walk the innermost outer loop four rows at once, a quarter of
//! the loop apart: on a Zen 4 host an attention pad mask (rows of 1.5 KiB) from DRAM ran
//! 10-15% faster so, like long rows walked in four parts (see `vector.rs`).

use iced_x86::code_asm::*;

use super::emitter::{EmitError, Emitter, Label, P, PTR, R, Stride, gpr8, gpr16, gpr32};
use super::isa::VecIsa;
use super::regs::Cc;
use crate::plan::{ELSE, RowShape, THEN};

/// Red-zone slot where a strided predicate row keeps rhs's row start while it moves r12.
const RHS_SLOT: i32 = -8;
/// Bytes of a page, the step of a large stack frame's entry.
const PAGE: i32 = 4096;

/// A loop trip count.
#[derive(Clone, Copy)]
enum Count {
    Const(u64),
    Mem(AsmMemoryOperand),
}

impl Emitter<'_> {
    fn uses_vectors(&self) -> bool {
        self.shape != RowShape::Strided
    }

    /// Stack bytes per outer loop kept in memory: the trip counter and the pointers (40 with
    /// four pointers).
    fn slot(&self) -> i32 {
        8 + 8 * self.nops() as i32
    }

    /// Stack bytes of the quarter walk: a pointer distance of a quarter and one of three
    /// quarters per pointer, the rows left after the quarters (72 with four pointers).
    fn quarter_slots(&self) -> i32 {
        16 * self.nops() as i32 + 8
    }

    pub(super) fn prologue<I: VecIsa>(&mut self) -> R {
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
        let rhs = self.nops() == 5;
        if rhs && !self.saved.contains(&r12) {
            self.saved.push(r12);
        }
        for r in self.saved.clone() {
            self.a.push(r)?;
        }
        let above = 8 * self.saved.len() as i32;
        if self.generic {
            self.a.mov(r14, qword_ptr(rsp + (above + 8)))?;
            self.a.mov(r15, qword_ptr(rsp + (above + 16)))?;
        }
        if rhs {
            // The ninth argument.
            self.a.mov(r12, qword_ptr(rsp + (above + 24)))?;
        }
        self.frame = self.slot() * self.rank.saturating_sub(2) as i32;
        if self.packed {
            self.bits_at = self.frame;
            self.frame += self.bits_bytes();
        }
        if self.quarters {
            self.quarter_at = self.frame;
            self.frame += self.quarter_slots();
        }
        // A frame past a page is entered a page at a time, touching each, so that it never
        // steps over a stack guard page.
        let mut left = self.frame;
        while left > PAGE {
            self.a.sub(rsp, PAGE)?;
            self.a.or(qword_ptr(rsp), 0)?;
            left -= PAGE;
        }
        if left > 0 {
            self.a.sub(rsp, left)?;
        }
        // Pointers to outer index `begin`.
        for (op, p) in PTR.into_iter().enumerate().take(self.nops()) {
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
        if self.uses_vectors() || self.pred.is_some() {
            self.vector_invariants::<I>()?;
        }
        if self.packed {
            self.pack_cond::<I>()?;
        }
        Ok(())
    }

    /// Whether the row code splats `op` (then or else), and the kernel can do it once.
    pub(super) fn splat_once(&self, op: usize) -> bool {
        self.uses_vectors() && self.invariant[op - THEN]
    }

    pub(super) fn body<I: VecIsa>(&mut self) -> R {
        if self.rank == 1 {
            return self.row::<I>();
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
        self.outer::<I>(0)
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
    fn outer<I: VecIsa>(&mut self, level: usize) -> R {
        if level == self.rank - 1 {
            return self.row::<I>();
        }
        let nops = self.nops();
        let steps: Vec<Stride> = (0..nops).map(|op| self.stride(level, op)).collect();
        let top = self.label();
        if level == self.rank - 2 {
            if level > 0 {
                match self.count(level) {
                    Count::Const(n) => self.mov_imm(rbx, n)?,
                    Count::Mem(m) => self.a.mov(rbx, m)?,
                }
            }
            let done = if self.quarters {
                Some(self.quarter_rows::<I>(&steps, top)?)
            } else {
                None
            };
            self.bind(top);
            self.outer::<I>(level + 1)?;
            for op in 0..nops {
                self.add_stride(PTR[op], steps[op])?;
            }
            self.a.dec(rbx)?;
            self.jne(top)?;
            if let Some(done) = done {
                self.bind(done);
            }
            return Ok(());
        }
        let slot = self.slot() * level as i32;
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
        for (op, p) in PTR.into_iter().enumerate().take(nops) {
            self.a.mov(qword_ptr(rsp + (slot + 8 + 8 * op as i32)), p)?;
        }
        self.outer::<I>(level + 1)?;
        for (op, p) in PTR.into_iter().enumerate().take(nops) {
            self.a.mov(p, qword_ptr(rsp + (slot + 8 + 8 * op as i32)))?;
            self.add_stride(p, steps[op])?;
        }
        self.a.dec(qword_ptr(rsp + slot))?;
        self.jne(top)
    }

    /// The innermost outer loop (`rbx` rows, pointer steps `steps`) walked four rows at once, a
    /// quarter of the loop apart (each trip a row of every quarter); the rows left over (fewer
    /// than four) fall through to the one-row loop at `one_at_a_time`, which the caller emits
    /// next. Returns the label to bind after that loop, where no rows are left. Rows may
    /// clobber every scratch register, so the distances live in the stack frame.
    fn quarter_rows<I: VecIsa>(
        &mut self,
        steps: &[Stride],
        one_at_a_time: Label,
    ) -> Result<Label, EmitError> {
        let at = self.quarter_at;
        let n = steps.len() as i32;
        let (three, left) = (8 * n, 16 * n);
        let (top4, done) = (self.label(), self.label());
        let moving: Vec<usize> = (0..steps.len())
            .filter(|&op| !matches!(steps[op], Stride::Zero))
            .collect();
        // rax = rows per quarter; fewer than four rows go one at a time.
        self.a.mov(rax, rbx)?;
        self.a.shr(rax, 2)?;
        self.je(one_at_a_time)?;
        self.a.lea(r10, ptr(rax * 4))?;
        self.a.sub(rbx, r10)?;
        self.a.mov(qword_ptr(rsp + (at + left)), rbx)?;
        self.a.mov(rbx, rax)?;
        for &op in &moving {
            self.a.mov(r10, rax)?;
            match steps[op] {
                Stride::Imm(v) => self.a.imul_3(r10, r10, v)?,
                Stride::Mem(m) => self.a.imul_2(r10, m)?,
                Stride::Zero => {}
            }
            self.a.mov(qword_ptr(rsp + (at + 8 * op as i32)), r10)?;
            self.a.lea(r10, ptr(r10 + r10 * 2))?;
            self.a
                .mov(qword_ptr(rsp + (at + three + 8 * op as i32)), r10)?;
        }
        self.bind(top4);
        for q in 0..4 {
            if q > 0 {
                for &op in &moving {
                    self.a.add(PTR[op], qword_ptr(rsp + (at + 8 * op as i32)))?;
                }
            }
            self.row::<I>()?;
        }
        for &op in &moving {
            self.a
                .sub(PTR[op], qword_ptr(rsp + (at + three + 8 * op as i32)))?;
            self.add_stride(PTR[op], steps[op])?;
        }
        self.a.dec(rbx)?;
        self.jne(top4)?;
        // On from the first row of quarter 0 not walked to the first left over.
        for &op in &moving {
            self.a
                .add(PTR[op], qword_ptr(rsp + (at + three + 8 * op as i32)))?;
        }
        self.a.mov(rbx, qword_ptr(rsp + (at + left)))?;
        self.a.test(rbx, rbx)?;
        self.je(done)?;
        Ok(done)
    }

    fn row<I: VecIsa>(&mut self) -> R {
        match self.shape {
            RowShape::Select { .. } => self.vector_row::<I>(),
            RowShape::Copy { .. } => self.copy_row::<I>(),
            RowShape::Strided if self.pred.is_some() => self.pred_strided_row::<I>(),
            RowShape::Strided => self.strided_row(),
        }
    }

    pub(super) fn epilogue(&mut self) -> R {
        if self.nt {
            self.a.sfence()?;
        }
        if self.uses_vectors() || self.pred.is_some() {
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
    fn copy_row<I: VecIsa>(&mut self) -> R {
        let done = self.label();
        let take_else = self.label();
        if self.pred.is_some() {
            // A predicate constant along the row: its operands' first elements.
            let cc = I::pred_scalar(self, ptr(rdi), ptr(r12))?;
            self.jcc(cc, take_else)?;
        } else {
            self.a.cmp(byte_ptr(rdi), 0)?;
            self.je(take_else)?;
        }
        self.copy_from::<I>(THEN, done)?;
        self.jmp(done)?;
        self.bind(take_else);
        self.copy_from::<I>(ELSE, done)?;
        self.bind(done);
        Ok(())
    }

    fn copy_from<I: VecIsa>(&mut self, op: usize, done: Label) -> R {
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
        self.vector_copy::<I>(op, fill, done)
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
        self.select_elem(ptr(r11), ptr(rax), ptr(rbp), r12, r13, Cc::Z)?;
        for op in 0..4 {
            self.add_stride(moving[op], steps[op])?;
        }
        self.a.dec(r8)?;
        self.jne(top)
    }

    /// One element `out = cc ? else : then` (the flags set by a compare of the cond byte with
    /// 0, `cc` ZF, or by a predicate), through the temporaries `t` and `u`.
    pub(super) fn select_elem(
        &mut self,
        then: AsmMemoryOperand,
        else_: AsmMemoryOperand,
        out: AsmMemoryOperand,
        t: AsmRegister64,
        u: AsmRegister64,
        cc: Cc,
    ) -> R {
        let (t32, u32_) = (gpr32(t)?, gpr32(u)?);
        let nz = match cc {
            Cc::Z => false,
            Cc::NZ => true,
            _ => return Err(super::emitter::bug("select on a condition other than ZF")),
        };
        macro_rules! cmov {
            ($d:expr, $s:expr) => {
                if nz {
                    self.a.cmovnz($d, $s)?
                } else {
                    self.a.cmovz($d, $s)?
                }
            };
        }
        match self.w {
            1 => {
                self.a.movzx(t32, byte_ptr(then))?;
                self.a.movzx(u32_, byte_ptr(else_))?;
                cmov!(t32, u32_);
                Ok(self.a.mov(byte_ptr(out), gpr8(t)?)?)
            }
            2 => {
                self.a.movzx(t32, word_ptr(then))?;
                self.a.movzx(u32_, word_ptr(else_))?;
                cmov!(t32, u32_);
                Ok(self.a.mov(word_ptr(out), gpr16(t)?)?)
            }
            4 => {
                self.a.mov(t32, dword_ptr(then))?;
                cmov!(t32, dword_ptr(else_));
                Ok(self.a.mov(dword_ptr(out), t32)?)
            }
            8 => {
                self.a.mov(t, qword_ptr(then))?;
                cmov!(t, qword_ptr(else_));
                Ok(self.a.mov(qword_ptr(out), t)?)
            }
            _ => {
                for k in [0i32, 8] {
                    self.a.mov(t, qword_ptr(then + k))?;
                    cmov!(t, qword_ptr(else_ + k));
                    self.a.mov(qword_ptr(out + k), t)?;
                }
                Ok(())
            }
        }
    }

    // ---- strided predicate rows ----------------------------------------------------------

    /// Any strides, the choice made by a predicate: one element at a time, branch-free. The
    /// pointers move by their (signed) byte strides: lhs in r10, then in r11, else in rax, out
    /// in rbp and rhs in r12 itself (its row start kept in the red zone meanwhile); the
    /// predicate's flags pick then's or else's address (`cmov`) into r13, through which the
    /// element is copied.
    fn pred_strided_row<I: VecIsa>(&mut self) -> R {
        let l = self.rank - 1;
        let nops = self.nops();
        let steps: Vec<Stride> = (0..nops).map(|op| self.stride(l, op)).collect();
        let moving = [r10, r11, rax, rbp, r12];
        for op in 0..4 {
            self.a.mov(moving[op], P[op])?;
        }
        if nops == 5 {
            self.a.mov(qword_ptr(rsp + RHS_SLOT), r12)?;
        }
        self.a.mov(r8, r9)?;
        let top = self.label();
        self.bind(top);
        let cc = I::pred_scalar(self, ptr(r10), ptr(r12))?;
        self.a.mov(r13, r11)?;
        self.cmov64(cc, r13, rax)?;
        match self.w {
            1 => {
                self.a.movzx(r13d, byte_ptr(r13))?;
                self.a.mov(byte_ptr(rbp), r13b)?;
            }
            2 => {
                self.a.movzx(r13d, word_ptr(r13))?;
                self.a.mov(word_ptr(rbp), r13w)?;
            }
            4 => {
                self.a.mov(r13d, dword_ptr(r13))?;
                self.a.mov(dword_ptr(rbp), r13d)?;
            }
            8 => {
                self.a.mov(r13, qword_ptr(r13))?;
                self.a.mov(qword_ptr(rbp), r13)?;
            }
            _ => {
                self.a.vmovdqu(xmm0, xmmword_ptr(r13))?;
                self.a.vmovdqu(xmmword_ptr(rbp), xmm0)?;
            }
        }
        for op in 0..nops {
            self.add_stride(moving[op], steps[op])?;
        }
        self.a.dec(r8)?;
        self.jne(top)?;
        if nops == 5 {
            self.a.mov(r12, qword_ptr(rsp + RHS_SLOT))?;
        }
        Ok(())
    }
}

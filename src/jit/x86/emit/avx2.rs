//! AVX2 ([`VecIsa`] for VEX-encoded ymm): lane masks from `vpcmpeq*`, `vpblendvb` /
//! `vblendvps` / `vblendvpd` selects, overlapping last steps instead of scalar tails.
//!
//! Registers: ymm15 zero, ymm12 all ones for the uniform test (widths 2 and 4; width 16 keeps
//! its selector there). A block uses ymm0..ymm7 (mask and data per vector), the uniform test
//! ymm8..ymm11.
//!
//! Per 32 bytes of output the cond bytes of those elements are widened straight from memory
//! (`vpmovzxbw/bd/bq`; 32 bytes are compared as they are for width 1) and compared with zero,
//! giving a mask that is all ones where cond is 0; the blend takes `else` there and `then`
//! elsewhere. Width 16 broadcasts the two cond bytes of a vector to every word, keeps byte 0 in
//! the low two qwords and byte 1 in the high two (`vpand` with the selector), and compares
//! qwords with zero.

use iced_x86::code_asm::*;

use super::emitter::{Bounds, EmitError, Emitter, Label, P, R};
use super::isa::{SEL, UNROLL, VecIsa, splat_reg};
use super::pred::Pol;
use super::regs::Cc;
use super::regs::{XMM, YMM};
use crate::plan::{COND, ELSE, OUT, RHS, THEN};

/// The AVX2 vector ISA.
pub(crate) struct Avx2;

/// The zero register.
const ZERO: usize = 15;
/// All ones, for `vptest` in the uniform test.
const ONES: usize = 12;
/// The first of the bit selectors of rows that read packed cond bits (ymm8, and ymm9 for
/// width 8; those rows run no uniform test).
const BITS_SEL: usize = 8;
/// Red-zone slots of the registers a short sub-row saves.
const SAVE_LEN: i32 = -8;
const SAVE_AT: i32 = -16;

/// Expands `$body` once for xmm and once for ymm registers (`$r` is the register table).
macro_rules! xy {
    ($bytes:expr, $r:ident => $body:block) => {
        if $bytes == 16 {
            let $r = &XMM;
            $body
        } else {
            let $r = &YMM;
            $body
        }
    };
}

impl VecIsa for Avx2 {
    fn invariants(e: &mut Emitter) -> R {
        e.a.vpxor(XMM[ZERO], XMM[ZERO], XMM[ZERO])?;
        if Self::uniform(e.w) && e.pred.is_none() {
            e.a.vpcmpeqd(YMM[ONES], YMM[ONES], YMM[ONES])?;
        }
        if e.packed {
            // Bit selectors: lane i of a vector keeps bit i of its broadcast bits (width 8:
            // bit i of the low or the high nibble of a byte, for even and odd vectors).
            let lanes = e.lanes() as usize;
            let sels: &[usize] = if e.w == 8 { &[0, 4] } else { &[0] };
            for (j, &shift) in sels.iter().enumerate() {
                let mut c = [0u8; 32];
                for i in 0..lanes {
                    let bit = 1u64 << (shift + i);
                    c[i * e.w..(i + 1) * e.w].copy_from_slice(&bit.to_le_bytes()[..e.w]);
                }
                let m = e.constant(&c);
                e.a.vmovdqu(YMM[BITS_SEL + j], m)?;
            }
        }
        Ok(())
    }

    fn packs(w: usize) -> bool {
        // Width 1 compares its cond bytes straight from memory: bits would cost it more than
        // they save.
        matches!(w, 2 | 4 | 8)
    }

    fn wide(_w: usize) -> bool {
        false
    }

    fn cond_bits(e: &mut Emitter, src: AsmMemoryOperand) -> R {
        // Bits where cond is 0: the lanes the blend takes else in.
        e.a.vpcmpeqb(ymm0, YMM[ZERO], src)?;
        Ok(e.a.vpmovmskb(r10d, ymm0)?)
    }

    fn uniform(w: usize) -> bool {
        // Widths 2 and 4: their masks come from the same compare as the test.
        matches!(w, 2 | 4)
    }

    fn block(e: &mut Emitter, vecs: usize, nt: bool, uniform: Option<(Label, Label)>) -> R {
        if let Some((all_then, all_else)) = uniform {
            e.avx2_uniform_test(all_then, all_else)?;
        }
        e.avx2_body(32, vecs, nt, uniform.is_some())
    }

    fn tail(e: &mut Emitter, n: Bounds, done: Label) -> R {
        let blk = e.lanes() * UNROLL as u64;
        if n.max >= blk {
            let small = e.label();
            if n.min < blk {
                e.a.cmp(r9, blk as i32)?;
                e.jb(small)?;
            }
            if e.unaligned_end {
                // After an aligning head: aligned vectors, then the last few elements as a row
                // of their own (the block again over the row's end would split lines).
                let lanes = e.lanes();
                let (top, rest) = (e.label(), e.label());
                e.a.lea(r10, ptr(r9 - lanes as i32))?;
                e.bind(top);
                e.a.cmp(r8, r10)?;
                e.ja(rest)?;
                e.avx2_body(32, 1, false, false)?;
                e.a.add(r8, lanes as i32)?;
                e.jmp(top)?;
                e.bind(rest);
                e.a.mov(rax, r9)?;
                e.a.sub(rax, r8)?;
                e.je(done)?;
                Avx2::short(e, lanes - 1)?;
            } else if n.known().is_none_or(|n| n % blk != 0) {
                // After the main loop: the last block again, overlapping what is done.
                e.a.cmp(r8, r9)?;
                e.jae(done)?;
                e.a.lea(r8, ptr(r9 - blk as i32))?;
                e.avx2_body(32, UNROLL, false, false)?;
            }
            e.jmp(done)?;
            e.bind(small);
        }
        let short = Bounds {
            min: n.min,
            max: n.max.min(blk - 1),
        };
        e.avx2_small(short, done)
    }

    fn short(e: &mut Emitter, max: u64) -> R {
        // The elements as a row of their own, from r8 on.
        e.a.mov(qword_ptr(rsp + SAVE_LEN), r9)?;
        e.a.mov(qword_ptr(rsp + SAVE_AT), r8)?;
        e.avx2_shift_row(r8, false)?;
        e.a.mov(r9, rax)?;
        e.a.xor(r8d, r8d)?;
        let sub = e.label();
        e.avx2_small(Bounds { min: 1, max }, sub)?;
        e.bind(sub);
        e.a.mov(rax, qword_ptr(rsp + SAVE_AT))?;
        e.avx2_shift_row(rax, true)?;
        e.a.mov(r9, qword_ptr(rsp + SAVE_LEN))?;
        e.a.mov(r8, qword_ptr(rsp + SAVE_AT))?;
        Ok(())
    }

    fn copy_tail(
        e: &mut Emitter,
        src: Option<AsmRegister64>,
        sr: usize,
        b: Bounds,
        done: Label,
    ) -> R {
        let blk = 32 * UNROLL as u64;
        if b.max >= blk {
            let small = e.label();
            if b.min < blk {
                e.a.cmp(r10, blk as i32)?;
                e.jb(small)?;
            }
            if e.unaligned_end || b.known().is_none_or(|b| b % blk != 0) {
                e.a.cmp(r8, r10)?;
                e.jae(done)?;
                e.a.lea(r8, ptr(r10 - blk as i32))?;
                e.moves(src, sr, UNROLL, false)?;
            }
            e.jmp(done)?;
            e.bind(small);
        }
        let short = Bounds {
            min: b.min,
            max: b.max.min(blk - 1),
        };
        e.avx2_copy_small(src, sr, short, done)
    }

    fn copy_short(e: &mut Emitter, src: Option<AsmRegister64>, sr: usize, max: u64) -> R {
        e.a.mov(qword_ptr(rsp + SAVE_LEN), r10)?;
        e.a.mov(qword_ptr(rsp + SAVE_AT), r8)?;
        if let Some(s) = src {
            e.a.add(s, r8)?;
        }
        e.a.add(rcx, r8)?;
        e.a.mov(r10, rax)?;
        e.a.xor(r8d, r8d)?;
        let sub = e.label();
        e.avx2_copy_small(src, sr, Bounds { min: 1, max }, sub)?;
        e.bind(sub);
        e.a.mov(rax, qword_ptr(rsp + SAVE_AT))?;
        if let Some(s) = src {
            e.a.sub(s, rax)?;
        }
        e.a.sub(rcx, rax)?;
        e.a.mov(r10, qword_ptr(rsp + SAVE_LEN))?;
        e.a.mov(r8, rax)?;
        Ok(())
    }

    fn pred_scalar(
        e: &mut Emitter,
        lhs: AsmMemoryOperand,
        rhs: AsmMemoryOperand,
    ) -> Result<Cc, EmitError> {
        e.lanes_scalar(lhs, rhs)
    }

    fn pred_invariants(e: &mut Emitter) -> R {
        e.lanes_invariants()
    }

    fn pred_splat(e: &mut Emitter, op: usize) -> R {
        e.lanes_splat(op)
    }
}

impl Emitter<'_> {
    /// A row of `r9` elements within `n` (fewer than a block), index from `r8` = 0: vectors
    /// with an overlapping last step, two xmm steps, or one element at a time; on to `done`.
    fn avx2_small(&mut self, n: Bounds, done: Label) -> R {
        let lanes = self.lanes();
        if n.meets(lanes, u64::MAX) {
            // One vector at a time; the last step overlaps.
            let tiny = self.label();
            if n.min < lanes {
                self.a.cmp(r9, lanes as i32)?;
                self.jb(tiny)?;
            }
            self.a.lea(r10, ptr(r9 - lanes as i32))?;
            let top = self.label();
            self.bind(top);
            self.avx2_body(32, 1, false, false)?;
            self.a.add(r8, lanes as i32)?;
            self.a.cmp(r8, r10)?;
            self.jbe(top)?;
            self.a.cmp(r8, r9)?;
            self.jae(done)?;
            self.a.mov(r8, r10)?;
            self.avx2_body(32, 1, false, false)?;
            self.jmp(done)?;
            self.bind(tiny);
        }
        let half = lanes / 2;
        if half > 0 && n.meets(half, lanes) {
            // Rows shorter than a ymm: two xmm steps, the second over the last elements.
            let scalar = self.label();
            if n.min < half {
                self.a.cmp(r9, half as i32)?;
                self.jb(scalar)?;
            }
            self.avx2_body(16, 1, false, false)?;
            self.a.lea(r8, ptr(r9 - half as i32))?;
            self.avx2_body(16, 1, false, false)?;
            self.jmp(done)?;
            self.bind(scalar);
        }
        if n.meets(1, half.max(1)) {
            // Rows of fewer than 16 bytes: one element at a time.
            let top = self.label();
            self.bind(top);
            let cc = if self.pred.is_some() {
                let (l, r) = (self.pelem(COND, 0)?, self.pelem(RHS, 0)?);
                self.lanes_scalar(l, r)?
            } else {
                self.a.cmp(byte_ptr(rdi + r8), 0)?;
                Cc::Z
            };
            let (t, e_, o) = (self.elem(THEN, 0), self.elem(ELSE, 0), self.elem(OUT, 0));
            self.select_elem(t, e_, o, rax, r10, cc)?;
            self.a.inc(r8)?;
            self.a.cmp(r8, r9)?;
            self.jb(top)?;
        }
        Ok(())
    }

    /// Moves the row pointers (of operands that advance along the row) forward, or back, by
    /// `k` elements (`k` is clobbered when moving back).
    fn avx2_shift_row(&mut self, k: AsmRegister64, back: bool) -> R {
        if let Some(p) = self.pred {
            // lhs and rhs by k elements of the compared width (unless constant along the row).
            for (i, reg) in [(0, rdi), (1, r12)] {
                if p.bcast[i] || (i == 1 && !p.binary) {
                    continue;
                }
                let by = if p.cw == 1 {
                    k
                } else {
                    self.a.mov(r10, k)?;
                    self.a.shl(r10, p.cw.trailing_zeros())?;
                    r10
                };
                if back {
                    self.a.sub(reg, by)?;
                } else {
                    self.a.add(reg, by)?;
                }
            }
        } else if back {
            self.a.sub(rdi, k)?;
        } else {
            self.a.add(rdi, k)?;
        }
        let scaled = if self.w == 1 {
            k
        } else {
            self.a.mov(r11, k)?;
            self.a.shl(r11, self.wlog())?;
            r11
        };
        for op in [THEN, ELSE, OUT] {
            if op != OUT && self.row_bcast(op) {
                continue;
            }
            if back {
                self.a.sub(P[op], scaled)?;
            } else {
                self.a.add(P[op], scaled)?;
            }
        }
        Ok(())
    }

    /// Compares the cond bytes of one main-loop block with zero (ymm8, and ymm9 for width 2)
    /// and jumps to `all_then` / `all_else` when they are all non-zero / all zero (`vptest`
    /// against all ones: ZF when no byte compared equal, CF when all did).
    fn avx2_uniform_test(&mut self, all_then: Label, all_else: Label) -> R {
        let c0 = self.elem(COND, 0);
        self.a.vpcmpeqb(ymm8, YMM[ZERO], c0)?;
        if self.w == 2 {
            let c1 = self.elem(COND, 32);
            self.a.vpcmpeqb(ymm9, YMM[ZERO], c1)?;
            self.a.vpor(ymm10, ymm8, ymm9)?;
            self.a.vpand(ymm11, ymm8, ymm9)?;
            self.a.vptest(ymm10, ymm10)?;
            self.je(all_then)?;
            self.a.vptest(ymm11, YMM[ONES])?;
        } else {
            self.a.vptest(ymm8, YMM[ONES])?;
            self.je(all_then)?;
        }
        self.branch_carry(all_else)
    }

    /// `count` vectors of `bytes` (16 or 32) bytes of output from element `r8` on; `pre`: the
    /// cond bytes are already compared (ymm8, ymm9, by the uniform test).
    fn avx2_body(&mut self, bytes: usize, count: usize, nt: bool, pre: bool) -> R {
        let w = self.w;
        let per = (bytes / w).max(1) as i64;
        if w == 16 {
            self.a.mov(r11, r8)?;
            self.a.shl(r11, 4)?;
        }
        let wide_masks = pre && bytes == 32 && count == UNROLL;
        if wide_masks {
            // The compare of the cond bytes (ymm8, ymm9) widened to the lane masks.
            for g in 0..(if w == 2 { 2 } else { 1 }) {
                if g == 1 {
                    self.a.vmovdqa(ymm8, ymm9)?;
                }
                self.a.vextracti128(xmm10, ymm8, 1)?;
                if w == 4 {
                    self.a.vpshufd(xmm9, xmm8, 0xee)?;
                    self.a.vpshufd(xmm11, xmm10, 0xee)?;
                    self.a.vpmovsxbd(ymm0, xmm8)?;
                    self.a.vpmovsxbd(ymm2, xmm9)?;
                    self.a.vpmovsxbd(ymm4, xmm10)?;
                    self.a.vpmovsxbd(ymm6, xmm11)?;
                } else {
                    self.a.vpmovsxbw(YMM[4 * g], xmm8)?;
                    self.a.vpmovsxbw(YMM[4 * g + 2], xmm10)?;
                }
            }
        }
        xy!(bytes, r => {
            for v in 0..count {
                let off = v as i64 * per;
                let (mut m, d) = (r[2 * v], r[2 * v + 1]);
                // Where a set lane takes else (a mask's lanes: cond is 0), or then.
                let mut pol = Pol::Else;
                if self.pred.is_some() {
                    let (reg, p) = self.lanes_mask(bytes, v, off)?;
                    (m, pol) = (r[reg], p);
                }
                let c = self.elem(COND, off);
                match w {
                    _ if wide_masks || self.pred.is_some() => {}
                    _ if self.from_bits => self.avx2_bits_mask(YMM[2 * v], v)?,
                    1 => self.a.vpcmpeqb(m, r[ZERO], c)?,
                    2 => {
                        self.a.vpmovzxbw(m, c)?;
                        self.a.vpcmpeqw(m, m, r[ZERO])?;
                    }
                    4 => {
                        self.a.vpmovzxbd(m, c)?;
                        self.a.vpcmpeqd(m, m, r[ZERO])?;
                    }
                    8 => {
                        self.a.vpmovzxbq(m, c)?;
                        self.a.vpcmpeqq(m, m, r[ZERO])?;
                    }
                    _ => {
                        if bytes == 32 {
                            self.a.vpbroadcastw(m, c)?;
                            self.a.vpand(m, m, r[SEL])?;
                        } else {
                            self.a.vpbroadcastb(m, c)?;
                        }
                        self.a.vpcmpeqq(m, m, r[ZERO])?;
                    }
                }
                // d = m ? set : clear: set = else, clear = then for masks.
                let (clear, set) = match pol {
                    Pol::Else => (THEN, ELSE),
                    Pol::Then => (ELSE, THEN),
                };
                let (bc, bs) = (self.row_bcast(clear), self.row_bcast(set));
                let (splat_c, splat_s) = (splat_reg(clear), splat_reg(set));
                let t = if bc {
                    r[splat_c]
                } else {
                    self.a.vmovdqu(d, self.elem(clear, off))?;
                    d
                };
                if bs {
                    match w {
                        1 | 2 => self.a.vpblendvb(d, t, r[splat_s], m)?,
                        4 => self.a.vblendvps(d, t, r[splat_s], m)?,
                        _ => self.a.vblendvpd(d, t, r[splat_s], m)?,
                    }
                } else {
                    let e = self.elem(set, off);
                    match w {
                        1 | 2 => self.a.vpblendvb(d, t, e, m)?,
                        4 => self.a.vblendvps(d, t, e, m)?,
                        _ => self.a.vblendvpd(d, t, e, m)?,
                    }
                }
                let o = self.elem(OUT, off);
                if nt {
                    self.a.vmovntdq(o, d)?;
                } else {
                    self.a.vmovdqu(o, d)?;
                }
            }
        });
        Ok(())
    }

    /// `m` = the lane mask of vector `v` of a block from the packed bits at `rax` (where cond
    /// is 0): its bits broadcast to every lane, each lane's own kept by the selector, compared
    /// with it.
    fn avx2_bits_mask(&mut self, m: AsmRegisterYmm, v: usize) -> R {
        let v = v as i32;
        match self.w {
            2 => {
                let s = YMM[BITS_SEL];
                self.a.vpbroadcastw(m, word_ptr(rax + 2 * v))?;
                self.a.vpand(m, m, s)?;
                self.a.vpcmpeqw(m, m, s)?;
            }
            4 => {
                let s = YMM[BITS_SEL];
                self.a.vpbroadcastd(m, dword_ptr(rax + v))?;
                self.a.vpand(m, m, s)?;
                self.a.vpcmpeqd(m, m, s)?;
            }
            _ => {
                let s = YMM[BITS_SEL + (v % 2) as usize];
                self.a.vpbroadcastd(m, dword_ptr(rax + v / 2))?;
                self.a.vpand(m, m, s)?;
                self.a.vpcmpeqq(m, m, s)?;
            }
        }
        Ok(())
    }

    /// Copies (or fills) `r10` bytes within `b` (fewer than a block), index from `r8` = 0:
    /// 32-byte steps with an overlapping last one, two 16-byte steps, or two overlapping moves
    /// of the largest power of two that fits; on to `done`.
    fn avx2_copy_small(
        &mut self,
        src: Option<AsmRegister64>,
        sr: usize,
        b: Bounds,
        done: Label,
    ) -> R {
        if b.meets(32, u64::MAX) {
            let next = self.label();
            if b.min < 32 {
                self.a.cmp(r10, 32)?;
                self.jb(next)?;
            }
            self.a.lea(r11, ptr(r10 - 32))?;
            let top = self.label();
            self.bind(top);
            self.moves(src, sr, 1, false)?;
            self.a.add(r8, 32)?;
            self.a.cmp(r8, r11)?;
            self.jbe(top)?;
            self.a.cmp(r8, r10)?;
            self.jae(done)?;
            self.a.mov(r8, r11)?;
            self.moves(src, sr, 1, false)?;
            self.jmp(done)?;
            self.bind(next);
        }
        if b.meets(16, 32) {
            let next = self.label();
            if b.min < 16 {
                self.a.cmp(r10, 16)?;
                self.jb(next)?;
            }
            for at in [None, Some(r10)] {
                if let Some(end) = at {
                    self.a.lea(r8, ptr(end - 16))?;
                }
                let o = ptr(rcx + r8);
                match src {
                    Some(s) => {
                        self.a.vmovdqu(xmm0, ptr(s + r8))?;
                        self.a.vmovdqu(o, xmm0)?;
                    }
                    None => self.a.vmovdqu(o, XMM[sr])?,
                }
            }
            self.jmp(done)?;
            self.bind(next);
        }
        if b.meets(1, 16) {
            self.small_copy(src, sr, b, done)?;
        }
        Ok(())
    }

    /// Rows of 1 to 15 bytes: two overlapping moves of the largest power of two that fits.
    fn small_copy(&mut self, src: Option<AsmRegister64>, sr: usize, b: Bounds, done: Label) -> R {
        if src.is_none() {
            // The low 8 bytes of the splat hold whole elements (widths up to 8).
            self.a.vmovq(rax, XMM[sr])?;
        }
        for size in [8u64, 4, 2, 1] {
            if !b.meets(size, 2 * size) {
                continue;
            }
            let next = self.label();
            if b.min < size {
                self.a.cmp(r10, size as i32)?;
                self.jb(next)?;
            }
            let last = ptr(rcx + r10 - size as i32);
            match (size, src) {
                (8, Some(s)) => {
                    self.a.mov(rax, qword_ptr(s))?;
                    self.a.mov(r11, qword_ptr(s + r10 - 8))?;
                    self.a.mov(qword_ptr(rcx), rax)?;
                    self.a.mov(qword_ptr(last), r11)?;
                }
                (4, Some(s)) => {
                    self.a.mov(eax, dword_ptr(s))?;
                    self.a.mov(r11d, dword_ptr(s + r10 - 4))?;
                    self.a.mov(dword_ptr(rcx), eax)?;
                    self.a.mov(dword_ptr(last), r11d)?;
                }
                (2, Some(s)) => {
                    self.a.movzx(eax, word_ptr(s))?;
                    self.a.movzx(r11d, word_ptr(s + r10 - 2))?;
                    self.a.mov(word_ptr(rcx), ax)?;
                    self.a.mov(word_ptr(last), r11w)?;
                }
                (_, Some(s)) => {
                    self.a.movzx(eax, byte_ptr(s))?;
                    self.a.mov(byte_ptr(rcx), al)?;
                }
                (8, None) => {
                    self.a.mov(qword_ptr(rcx), rax)?;
                    self.a.mov(qword_ptr(last), rax)?;
                }
                (4, None) => {
                    self.a.mov(dword_ptr(rcx), eax)?;
                    self.a.mov(dword_ptr(last), eax)?;
                }
                (2, None) => {
                    self.a.mov(word_ptr(rcx), ax)?;
                    self.a.mov(word_ptr(last), ax)?;
                }
                (_, None) => self.a.mov(byte_ptr(rcx), al)?,
            }
            self.jmp(done)?;
            self.bind(next);
        }
        Ok(())
    }
}

//! AVX2 rows: 256-bit vectors, lane masks from `vpcmpeq*`, `vpblendvb` / `vblendvps` /
//! `vblendvpd` selects, overlapping last steps instead of scalar tails.
//!
//! Loop-invariant registers: ymm15 zero, ymm14 / ymm13 the splatted then / else, ymm12 the
//! width-16 selector. A body uses ymm0..ymm7 (mask and data per vector).
//!
//! Vector select, per 32 bytes of output: the cond bytes of those elements are widened straight
//! from memory (`vpmovzxbw/bd/bq`; 32 bytes are compared as they are for width 1) and compared
//! with zero, giving a mask that is all ones where cond is 0; the blend takes `else` there and
//! `then` elsewhere. Width 16 broadcasts the two cond bytes of a vector to every word, keeps
//! byte 0 in the low two qwords and byte 1 in the high two (`vpand` with a selector), and
//! compares qwords with zero.

use iced_x86::code_asm::*;

use super::regs::{XMM, YMM};
use super::{Bounds, Emitter, Label, R};
use crate::plan::{COND, ELSE, OUT, THEN};

/// Vectors per main-loop iteration.
const UNROLL: usize = 4;
/// Row copies: bytes per main-loop iteration.
const COPY_BLOCK: u64 = 128;
/// Rows of at least this many bytes are copied with non-temporal stores (when the kernel uses
/// them).
const NT_COPY_MIN: u64 = 512;

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

impl Emitter<'_> {
    /// ymm15 = 0; splats of then/else that are constant for the whole kernel; the width-16
    /// selector.
    pub(super) fn avx2_invariants(&mut self) -> R {
        self.a.vpxor(xmm15, xmm15, xmm15)?;
        for op in [THEN, ELSE] {
            if self.splat_once(op) {
                self.avx2_splat(op)?;
            }
        }
        if self.avx2_uniform() {
            self.a.vpcmpeqd(ymm12, ymm12, ymm12)?;
        }
        if self.w == 16 {
            // qwords 0, 1 keep cond byte 0, qwords 2, 3 cond byte 1.
            let mut sel = [0u8; 32];
            sel[0] = 0xff;
            sel[8] = 0xff;
            sel[17] = 0xff;
            sel[25] = 0xff;
            let c = self.constant(&sel);
            self.a.vmovdqu(ymm12, c)?;
        }
        Ok(())
    }

    /// The splat register of then (ymm14) or else (ymm13).
    fn avx2_splat_reg(op: usize) -> usize {
        if op == THEN { 14 } else { 13 }
    }

    /// Broadcasts the element at `P[op]` to every lane of its splat register.
    fn avx2_splat(&mut self, op: usize) -> R {
        let r = YMM[Self::avx2_splat_reg(op)];
        let m = ptr(super::P[op]);
        Ok(match self.w {
            1 => self.a.vpbroadcastb(r, m),
            2 => self.a.vpbroadcastw(r, m),
            4 => self.a.vpbroadcastd(r, m),
            8 => self.a.vpbroadcastq(r, m),
            _ => self.a.vbroadcasti128(r, m),
        }?)
    }

    /// Splats of broadcast inputs that change from row to row.
    fn avx2_row_splats(&mut self) -> R {
        for op in [THEN, ELSE] {
            if self.row_bcast(op) && !self.invariant[op - THEN] {
                self.avx2_splat(op)?;
            }
        }
        Ok(())
    }

    /// Elements per vector of `bytes` bytes.
    fn per(&self, bytes: usize) -> u64 {
        (bytes / self.w).max(1) as u64
    }

    pub(super) fn avx2_vector_row(&mut self) -> R {
        self.avx2_row_splats()?;
        let done = self.label();
        let lanes = self.per(32);
        let e = lanes * UNROLL as u64;
        // Non-temporal rows: a head up to the first cache line boundary, whole blocks, a tail.
        let nt_min = (2 * e + self.per(64)).max(self.per(512));
        if self.nt && self.n.max >= nt_min {
            let normal = self.label();
            if self.n.min < nt_min {
                self.a.cmp(r9, nt_min as i32)?;
                self.jb(normal)?;
            }
            if self.w > 1 {
                // Lines are reached by whole elements only from an element-aligned output.
                self.a.test(cl, self.w as i32 - 1)?;
                self.jne(normal)?;
            }
            self.avx2_nt_vector_row(e, done)?;
            self.bind(normal);
        }
        self.avx2_span(self.n, done)?;
        self.bind(done);
        Ok(())
    }

    /// A row of `r9` elements (within `n`) with ordinary stores, index from 0; on to `done`.
    fn avx2_span(&mut self, n: Bounds, done: Label) -> R {
        let lanes = self.per(32);
        let e = lanes * UNROLL as u64;
        self.a.xor(r8d, r8d)?;
        if n.max >= e {
            let small = self.label();
            if n.min < e {
                self.a.cmp(r9, e as i32)?;
                self.jb(small)?;
            }
            self.avx2_main_loop(e, n, done)?;
            self.bind(small);
        }
        if n.meets(lanes, e) {
            // One vector at a time; the last step overlaps.
            let tiny = self.label();
            if n.min < lanes {
                self.a.cmp(r9, lanes as i32)?;
                self.jb(tiny)?;
            }
            self.a.lea(r10, ptr(r9 - lanes as i32))?;
            let top = self.label();
            self.bind(top);
            self.avx2_body(32, 1, false)?;
            self.a.add(r8, lanes as i32)?;
            self.a.cmp(r8, r10)?;
            self.jbe(top)?;
            self.a.cmp(r8, r9)?;
            self.jae(done)?;
            self.a.mov(r8, r10)?;
            self.avx2_body(32, 1, false)?;
            self.jmp(done)?;
            self.bind(tiny);
        }
        let half = self.per(16);
        if n.meets(half, lanes) {
            // Rows shorter than a ymm: two xmm steps, the second over the last elements.
            let scalar = self.label();
            if n.min < half {
                self.a.cmp(r9, half as i32)?;
                self.jb(scalar)?;
            }
            self.avx2_body(16, 1, false)?;
            self.a.lea(r8, ptr(r9 - half as i32))?;
            self.avx2_body(16, 1, false)?;
            self.jmp(done)?;
            self.bind(scalar);
        }
        if n.meets(1, half) {
            // Rows of fewer than 16 bytes: one element at a time.
            let top = self.label();
            self.bind(top);
            self.a.cmp(byte_ptr(rdi + r8), 0)?;
            let (t, e_, o) = (self.elem(THEN, 0), self.elem(ELSE, 0), self.elem(OUT, 0));
            self.select_elem(t, e_, o, rax, r10)?;
            self.a.inc(r8)?;
            self.a.cmp(r8, r9)?;
            self.jb(top)?;
        }
        Ok(())
    }

    /// A row with non-temporal stores to whole cache lines only: the elements before the
    /// output's first 64-byte boundary and those after the last whole block go through
    /// [`Self::avx2_span`] on sub-rows (a store of each kind never shares a line with the
    /// other). Needs `r9 >= 2 * e + elements per line`; ends with a jump to `done`.
    fn avx2_nt_vector_row(&mut self, e: u64, done: Label) -> R {
        let per_line = self.per(64);
        let no_head = self.label();
        self.a.mov(rax, rcx)?;
        self.a.neg(rax)?;
        self.a.and(eax, 63)?;
        if self.w > 1 {
            self.a.shr(eax, self.wlog())?;
        }
        self.je(no_head)?;
        self.a.mov(qword_ptr(rsp - 8), r9)?;
        self.a.mov(r9, rax)?;
        let head_done = self.label();
        self.avx2_span(
            Bounds {
                min: 1,
                max: per_line - 1,
            },
            head_done,
        )?;
        self.bind(head_done);
        self.a.mov(rax, r9)?;
        self.a.mov(r9, qword_ptr(rsp - 8))?;
        self.bind(no_head);
        self.a.mov(r8, rax)?;
        self.a.lea(r10, ptr(r9 - e as i32))?;
        let top = self.label();
        self.bind(top);
        self.avx2_body(32, UNROLL, true)?;
        self.a.add(r8, e as i32)?;
        self.a.cmp(r8, r10)?;
        self.jbe(top)?;
        self.a.cmp(r8, r9)?;
        self.jae(done)?;
        // Tail: the row from r8 on, as a row of its own.
        self.a.mov(qword_ptr(rsp - 8), r9)?;
        self.a.mov(qword_ptr(rsp - 16), r8)?;
        self.avx2_shift_row(r8, false)?;
        self.a.sub(r9, r8)?;
        let tail_done = self.label();
        self.avx2_span(Bounds { min: 1, max: e - 1 }, tail_done)?;
        self.bind(tail_done);
        self.a.mov(r9, qword_ptr(rsp - 8))?;
        self.a.mov(rax, qword_ptr(rsp - 16))?;
        self.avx2_shift_row(rax, true)?;
        self.jmp(done)
    }

    /// Moves the row pointers (of operands that advance along the row) forward, or back, by
    /// `k` elements (`k` is clobbered when moving back).
    fn avx2_shift_row(&mut self, k: AsmRegister64, back: bool) -> R {
        if back {
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
                self.a.sub(super::P[op], scaled)?;
            } else {
                self.a.add(super::P[op], scaled)?;
            }
        }
        Ok(())
    }

    /// `while r8 + e <= n { body; r8 += e }` (entered with `n >= e`), then once more over the
    /// last `e` elements if any are left, and on to `done`.
    fn avx2_main_loop(&mut self, e: u64, n: Bounds, done: Label) -> R {
        self.a.lea(r10, ptr(r9 - e as i32))?;
        let top = self.label();
        let next = self.label();
        let uniform = self.avx2_uniform();
        let (all_then, all_else) = (self.label(), self.label());
        self.bind(top);
        if uniform {
            self.avx2_uniform_test(all_then, all_else)?;
        }
        self.avx2_body_pre(32, UNROLL, false, uniform)?;
        self.bind(next);
        self.a.add(r8, e as i32)?;
        self.a.cmp(r8, r10)?;
        self.jbe(top)?;
        if n.known().is_none_or(|n| n % e != 0) {
            self.a.cmp(r8, r9)?;
            self.jae(done)?;
            self.a.mov(r8, r10)?;
            self.avx2_body(32, UNROLL, false)?;
        }
        self.jmp(done)?;
        if uniform {
            for (l, op) in [(all_then, THEN), (all_else, ELSE)] {
                self.bind(l);
                self.avx2_take(op)?;
                self.jmp(next)?;
            }
        }
        Ok(())
    }

    /// Whether main-loop iterations test their cond bytes for being all non-zero or all zero
    /// and then copy one input (reading only that one): widths 2 and 4, whose masks come from
    /// the same compare.
    fn avx2_uniform(&self) -> bool {
        matches!(self.w, 2 | 4)
    }

    /// Compares the cond bytes of one main-loop iteration with zero (ymm8, and ymm9 for width
    /// 2) and jumps to `all_then` / `all_else` when they are all non-zero / all zero (`vptest`
    /// against all ones in ymm12: ZF when no byte compared equal, CF when all did).
    fn avx2_uniform_test(&mut self, all_then: Label, all_else: Label) -> R {
        let c0 = self.elem(COND, 0);
        self.a.vpcmpeqb(ymm8, ymm15, c0)?;
        if self.w == 2 {
            let c1 = self.elem(COND, 32);
            self.a.vpcmpeqb(ymm9, ymm15, c1)?;
            self.a.vpor(ymm10, ymm8, ymm9)?;
            self.a.vpand(ymm11, ymm8, ymm9)?;
            self.a.vptest(ymm10, ymm10)?;
            self.je(all_then)?;
            self.a.vptest(ymm11, ymm12)?;
        } else {
            self.a.vptest(ymm8, ymm12)?;
            self.je(all_then)?;
        }
        self.branch_carry(all_else)
    }

    /// One main-loop iteration's output taken from `op` alone (copy, or the splat).
    fn avx2_take(&mut self, op: usize) -> R {
        let bcast = self.row_bcast(op);
        for (v, &y) in YMM.iter().enumerate().take(UNROLL) {
            let off = v as i64 * self.per(32) as i64;
            let r = if bcast {
                YMM[Self::avx2_splat_reg(op)]
            } else {
                self.a.vmovdqu(y, self.elem(op, off))?;
                y
            };
            let o = self.elem(OUT, off);
            self.a.vmovdqu(o, r)?;
        }
        Ok(())
    }

    fn avx2_body(&mut self, bytes: usize, count: usize, nt: bool) -> R {
        self.avx2_body_pre(bytes, count, nt, false)
    }

    /// `count` vectors of `bytes` (16 or 32) bytes of output from element `r8` on; `pre`: the
    /// cond bytes are already compared (ymm8, ymm9).
    fn avx2_body_pre(&mut self, bytes: usize, count: usize, nt: bool, pre: bool) -> R {
        let w = self.w;
        let per = self.per(bytes) as i64;
        let bt = self.row_bcast(THEN);
        let be = self.row_bcast(ELSE);
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
                let (m, d) = (r[2 * v], r[2 * v + 1]);
                let c = self.elem(COND, off);
                match w {
                    _ if wide_masks => {}
                    1 => self.a.vpcmpeqb(m, r[15], c)?,
                    2 => {
                        self.a.vpmovzxbw(m, c)?;
                        self.a.vpcmpeqw(m, m, r[15])?;
                    }
                    4 => {
                        self.a.vpmovzxbd(m, c)?;
                        self.a.vpcmpeqd(m, m, r[15])?;
                    }
                    8 => {
                        self.a.vpmovzxbq(m, c)?;
                        self.a.vpcmpeqq(m, m, r[15])?;
                    }
                    _ => {
                        if bytes == 32 {
                            self.a.vpbroadcastw(m, c)?;
                            self.a.vpand(m, m, r[12])?;
                        } else {
                            self.a.vpbroadcastb(m, c)?;
                        }
                        self.a.vpcmpeqq(m, m, r[15])?;
                    }
                }
                // d = m ? else : then
                let t = if bt {
                    r[14]
                } else {
                    self.a.vmovdqu(d, self.elem(THEN, off))?;
                    d
                };
                if be {
                    match w {
                        1 | 2 => self.a.vpblendvb(d, t, r[13], m)?,
                        4 => self.a.vblendvps(d, t, r[13], m)?,
                        _ => self.a.vblendvpd(d, t, r[13], m)?,
                    }
                } else {
                    let e = self.elem(ELSE, off);
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

    // ---- row copy ------------------------------------------------------------------------

    /// Copies `r10` bytes from `P[op]` to the output row, or fills them with `op`'s splat.
    pub(super) fn avx2_copy(&mut self, op: usize, fill: bool, done: Label) -> R {
        if fill && !self.invariant[op - THEN] {
            self.avx2_splat(op)?;
        }
        let src = (!fill).then_some(super::P[op]);
        let sr = Self::avx2_splat_reg(op);
        let b = self.n.times(self.w as u64);
        if self.nt && b.max >= NT_COPY_MIN {
            let normal = self.label();
            if b.min < NT_COPY_MIN {
                self.a.cmp(r10, NT_COPY_MIN as i32)?;
                self.jb(normal)?;
            }
            if fill && self.w > 1 {
                // A fill keeps its pattern only from element boundaries.
                self.a.test(cl, self.w as i32 - 1)?;
                self.jne(normal)?;
            }
            self.avx2_nt_copy(src, sr, done)?;
            self.bind(normal);
        }
        self.avx2_copy_span(src, sr, b, done)
    }

    /// Copies (or fills) `r10` bytes (within `b`) with ordinary stores; on to `done` or falls
    /// through at the end.
    fn avx2_copy_span(
        &mut self,
        src: Option<AsmRegister64>,
        sr: usize,
        b: Bounds,
        done: Label,
    ) -> R {
        self.a.xor(r8d, r8d)?;
        if b.max >= COPY_BLOCK {
            let small = self.label();
            if b.min < COPY_BLOCK {
                self.a.cmp(r10, COPY_BLOCK as i32)?;
                self.jb(small)?;
            }
            self.avx2_copy_loop(src, sr, b, done)?;
            self.bind(small);
        }
        if b.meets(32, COPY_BLOCK) {
            let next = self.label();
            if b.min < 32 {
                self.a.cmp(r10, 32)?;
                self.jb(next)?;
            }
            self.a.lea(r11, ptr(r10 - 32))?;
            let top = self.label();
            self.bind(top);
            self.avx2_moves(src, sr, 32, 1, false)?;
            self.a.add(r8, 32)?;
            self.a.cmp(r8, r11)?;
            self.jbe(top)?;
            self.a.cmp(r8, r10)?;
            self.jae(done)?;
            self.a.mov(r8, r11)?;
            self.avx2_moves(src, sr, 32, 1, false)?;
            self.jmp(done)?;
            self.bind(next);
        }
        if b.meets(16, 32) {
            let next = self.label();
            if b.min < 16 {
                self.a.cmp(r10, 16)?;
                self.jb(next)?;
            }
            self.avx2_moves(src, sr, 16, 1, false)?;
            self.a.lea(r8, ptr(r10 - 16))?;
            self.avx2_moves(src, sr, 16, 1, false)?;
            self.jmp(done)?;
            self.bind(next);
        }
        if b.meets(1, 16) {
            self.small_copy(src, sr, b, done)?;
        }
        Ok(())
    }

    /// A copy with non-temporal stores to whole cache lines only (head and tail through
    /// [`Self::avx2_copy_span`] on sub-rows); needs `r10 >= NT_COPY_MIN`, ends with a jump to
    /// `done`.
    fn avx2_nt_copy(&mut self, src: Option<AsmRegister64>, sr: usize, done: Label) -> R {
        let no_head = self.label();
        self.a.mov(rax, rcx)?;
        self.a.neg(rax)?;
        self.a.and(eax, 63)?;
        self.je(no_head)?;
        self.a.mov(qword_ptr(rsp - 8), r10)?;
        self.a.mov(r10, rax)?;
        let head_done = self.label();
        self.avx2_copy_span(src, sr, Bounds { min: 1, max: 63 }, head_done)?;
        self.bind(head_done);
        self.a.mov(rax, r10)?;
        self.a.mov(r10, qword_ptr(rsp - 8))?;
        self.bind(no_head);
        self.a.mov(r8, rax)?;
        self.a.lea(r11, ptr(r10 - COPY_BLOCK as i32))?;
        let top = self.label();
        self.bind(top);
        self.avx2_moves(src, sr, 32, 4, true)?;
        self.a.add(r8, COPY_BLOCK as i32)?;
        self.a.cmp(r8, r11)?;
        self.jbe(top)?;
        self.a.cmp(r8, r10)?;
        self.jae(done)?;
        // Tail: the bytes from r8 on, as a row of their own.
        self.a.mov(qword_ptr(rsp - 8), r10)?;
        self.a.mov(qword_ptr(rsp - 16), r8)?;
        if let Some(s) = src {
            self.a.add(s, r8)?;
        }
        self.a.add(rcx, r8)?;
        self.a.sub(r10, r8)?;
        let tail_done = self.label();
        self.avx2_copy_span(
            src,
            sr,
            Bounds {
                min: 1,
                max: COPY_BLOCK - 1,
            },
            tail_done,
        )?;
        self.bind(tail_done);
        self.a.mov(r10, qword_ptr(rsp - 8))?;
        self.a.mov(rax, qword_ptr(rsp - 16))?;
        if let Some(s) = src {
            self.a.sub(s, rax)?;
        }
        self.a.sub(rcx, rax)?;
        self.jmp(done)
    }

    /// `while r8 + 128 <= r10 { move 128 bytes }`, then the last 128 bytes if any are left.
    fn avx2_copy_loop(
        &mut self,
        src: Option<AsmRegister64>,
        sr: usize,
        b: Bounds,
        done: Label,
    ) -> R {
        self.a.lea(r11, ptr(r10 - COPY_BLOCK as i32))?;
        let top = self.label();
        self.bind(top);
        self.avx2_moves(src, sr, 32, 4, false)?;
        self.a.add(r8, COPY_BLOCK as i32)?;
        self.a.cmp(r8, r11)?;
        self.jbe(top)?;
        if b.known().is_none_or(|b| b % COPY_BLOCK != 0) {
            self.a.cmp(r8, r10)?;
            self.jae(done)?;
            self.a.mov(r8, r11)?;
            self.avx2_moves(src, sr, 32, 4, false)?;
        }
        self.jmp(done)
    }

    /// `count` vectors of `bytes` bytes from `src + r8` (or the splat register `sr`) to
    /// `rcx + r8`.
    fn avx2_moves(
        &mut self,
        src: Option<AsmRegister64>,
        sr: usize,
        bytes: usize,
        count: usize,
        nt: bool,
    ) -> R {
        xy!(bytes, r => {
            if let Some(s) = src {
                for (j, &v) in r.iter().enumerate().take(count) {
                    self.a.vmovdqu(v, ptr(s + r8 + (bytes * j) as i32))?;
                }
            }
            for (j, &v) in r.iter().enumerate().take(count) {
                let v = if src.is_some() { v } else { r[sr] };
                let o = ptr(rcx + r8 + (bytes * j) as i32);
                if nt {
                    self.a.vmovntdq(o, v)?;
                } else {
                    self.a.vmovdqu(o, v)?;
                }
            }
        });
        Ok(())
    }

    /// Rows of 1 to 15 bytes: two overlapping moves of the largest power of two that fits.
    fn small_copy(
        &mut self,
        src: Option<AsmRegister64>,
        sr: usize,
        b: super::Bounds,
        done: Label,
    ) -> R {
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

//! AVX-512 rows: 512-bit vectors, cond tested into opmask registers, `vpblendm*` selects,
//! masked tails (a `bzhi`-built lane mask, masked loads and stores) instead of scalar tails.
//!
//! Loop-invariant registers: zmm31 all ones, zmm30 / zmm29 the splatted then / else, zmm28
//! the width-16 selector. Main bodies use zmm0..zmm3 and k1..k4, tails zmm0..zmm2, zmm8, zmm9
//! and k5 (lanes), k6 (cond), k7 (qword lanes for width 16).
//!
//! Vector select, per main-loop iteration (four zmm of output): `vptestmb` of the cond bytes
//! against all ones sets one mask bit per element (for 64, 128 or 256 elements at once), and
//! `kshiftr` gives each zmm its slice; width 16 broadcasts four cond bytes to every dword and
//! tests qwords against a selector that keeps byte `j / 2` in qword `j`. `vpblendm` then takes
//! the element from the memory operand where the bit is set: the test is `vptestnmb` (cond is 0)
//! when `else` is the operand read from memory and `then` a splat.

use iced_x86::code_asm::*;

use super::regs::ZMM;
use super::{Emitter, Label, R};
use crate::plan::{COND, ELSE, OUT, THEN};

/// zmm vectors per main-loop iteration.
const UNROLL: usize = 4;
/// Row copies: bytes per main-loop iteration.
const COPY_BLOCK: u64 = 256;
/// Rows of at least this many bytes are copied with non-temporal stores (when the kernel uses
/// them).
const NT_COPY_MIN: u64 = 512;
const K: [AsmRegisterK; 8] = [k0, k1, k2, k3, k4, k5, k6, k7];

/// `z{k<i>}`: `z` written under opmask `i` (1 ..= 7).
fn masked(z: AsmRegisterZmm, i: usize) -> AsmRegisterZmm {
    match i {
        1 => z.k1(),
        2 => z.k2(),
        3 => z.k3(),
        4 => z.k4(),
        5 => z.k5(),
        6 => z.k6(),
        _ => z.k7(),
    }
}

impl Emitter<'_> {
    /// zmm31 = all ones; kernel-constant splats; the width-16 selector.
    pub(super) fn avx512_invariants(&mut self) -> R {
        self.a.vpternlogd(zmm31, zmm31, zmm31, 0xff)?;
        for op in [THEN, ELSE] {
            if self.splat_once(op) {
                self.avx512_splat(op)?;
            }
        }
        if self.w == 16 {
            let mut sel = [0u8; 64];
            for j in 0..8 {
                sel[8 * j + j / 2] = 0xff;
            }
            let c = self.constant(&sel);
            self.a.vmovdqu64(zmm28, c)?;
        }
        Ok(())
    }

    fn avx512_splat_reg(op: usize) -> AsmRegisterZmm {
        if op == THEN { zmm30 } else { zmm29 }
    }

    fn avx512_splat(&mut self, op: usize) -> R {
        let r = Self::avx512_splat_reg(op);
        let m = ptr(super::P[op]);
        Ok(match self.w {
            1 => self.a.vpbroadcastb(r, m),
            2 => self.a.vpbroadcastw(r, m),
            4 => self.a.vpbroadcastd(r, m),
            8 => self.a.vpbroadcastq(r, m),
            _ => self.a.vbroadcasti32x4(r, m),
        }?)
    }

    fn avx512_row_splats(&mut self) -> R {
        for op in [THEN, ELSE] {
            if self.row_bcast(op) && !self.invariant[op - THEN] {
                self.avx512_splat(op)?;
            }
        }
        Ok(())
    }

    /// Elements per zmm.
    fn lanes512(&self) -> u64 {
        (64 / self.w).max(4) as u64
    }

    pub(super) fn avx512_vector_row(&mut self) -> R {
        self.avx512_row_splats()?;
        let lanes = self.lanes512();
        let e = lanes * UNROLL as u64;
        let n = self.n;
        let tail = self.label();
        let done = self.label();
        self.a.xor(r8d, r8d)?;
        if self.nt && n.max >= 2 * e {
            let normal = self.label();
            if n.min < 2 * e {
                self.a.cmp(r9, 2 * e as i32)?;
                self.jb(normal)?;
            }
            if self.w > 1 {
                self.a.test(cl, self.w as i32 - 1)?;
                self.jne(normal)?;
            }
            // Head: the elements before the first 64-byte boundary of the output, masked.
            let aligned = self.label();
            self.a.mov(rax, rcx)?;
            self.a.neg(rax)?;
            self.a.and(eax, 63)?;
            if self.w > 1 {
                self.a.shr(eax, self.wlog())?;
            }
            self.je(aligned)?;
            self.avx512_tail_masks_from(rax)?;
            self.avx512_masked_body(0)?;
            self.bind(aligned);
            self.a.mov(r8, rax)?;
            self.avx512_main_loop(e, true)?;
            self.jmp(tail)?;
            self.bind(normal);
        }
        if n.max >= e {
            if n.min < e {
                self.a.cmp(r9, e as i32)?;
                self.jb(tail)?;
            }
            self.avx512_main_loop(e, false)?;
        }
        self.bind(tail);
        // After the non-temporal loop the index is not a multiple of the step.
        let nt_path = self.nt && n.max >= 2 * e;
        match n.known().filter(|_| !nt_path) {
            Some(k) => {
                // Known length: the tail is straight-line code with immediate masks.
                let start = if k >= e { k / e * e } else { 0 };
                let rem = k - start;
                let mut off = 0;
                while off < rem {
                    let m = (rem - off).min(lanes);
                    self.avx512_tail_masks_imm(m)?;
                    self.avx512_masked_body(off as i64)?;
                    off += lanes;
                }
            }
            None => {
                let top = self.label();
                self.bind(top);
                self.a.mov(rax, r9)?;
                self.a.sub(rax, r8)?;
                self.jbe(done)?;
                self.avx512_tail_masks_from(rax)?;
                self.avx512_masked_body(0)?;
                self.a.add(r8, lanes as i32)?;
                self.jmp(top)?;
            }
        }
        self.bind(done);
        Ok(())
    }

    /// `while r8 + e <= n { body; r8 += e }`, entered with `r8 + e <= n`.
    fn avx512_main_loop(&mut self, e: u64, nt: bool) -> R {
        self.a.lea(r10, ptr(r9 - e as i32))?;
        let top = self.label();
        let next = self.label();
        let after = self.label();
        // Iterations whose cond bytes are all non-zero (or all zero) copy one input.
        let uniform = !nt && matches!(self.w, 2 | 4);
        let (all_then, all_else) = (self.label(), self.label());
        self.bind(top);
        // Four zmm of output from element r8 on.
        self.avx512_masks()?;
        if uniform {
            self.avx512_uniform_test(all_then, all_else)?;
        }
        self.avx512_blend_store(nt)?;
        self.bind(next);
        self.a.add(r8, e as i32)?;
        self.a.cmp(r8, r10)?;
        self.jbe(top)?;
        if uniform {
            self.jmp(after)?;
            for (l, op) in [(all_then, THEN), (all_else, ELSE)] {
                self.bind(l);
                self.avx512_take(op)?;
                self.jmp(next)?;
            }
        }
        self.bind(after);
        Ok(())
    }

    /// Jumps to `all_then` / `all_else` when the masks of one main-loop iteration (k1 with
    /// its 64 bits for width 4; k1 and k3 for width 2) say that every cond byte is non-zero /
    /// zero.
    fn avx512_uniform_test(&mut self, all_then: Label, all_else: Label) -> R {
        // The mask bits are "cond != 0", or "cond == 0" when else is read from memory.
        let (ones, zeros) = if self.avx512_zero_sel() {
            (all_else, all_then)
        } else {
            (all_then, all_else)
        };
        if self.w == 2 {
            self.a.korq(k5, k1, k3)?;
            self.a.kortestq(k5, k5)?;
            self.je(zeros)?;
            self.a.kandq(k5, k1, k3)?;
            self.a.kortestq(k5, k5)?;
        } else {
            self.a.kortestq(k1, k1)?;
            self.je(zeros)?;
        }
        self.branch_carry(ones)
    }

    /// Four zmm of output copied from `op` (or its splat).
    fn avx512_take(&mut self, op: usize) -> R {
        if self.w == 16 {
            self.a.mov(r11, r8)?;
            self.a.shl(r11, 4)?;
        }
        let per = self.lanes512() as i64;
        for (v, &z) in ZMM.iter().enumerate().take(UNROLL) {
            let off = v as i64 * per;
            let r = if self.row_bcast(op) {
                Self::avx512_splat_reg(op)
            } else {
                self.mov_elems(z, self.elem(op, off))?;
                z
            };
            self.store_elems(self.elem(OUT, off), r)?;
        }
        Ok(())
    }

    /// Whether the body's masks select else (cond == 0): then is a splat and else is read from
    /// memory, the blend's memory operand.
    fn avx512_zero_sel(&self) -> bool {
        self.row_bcast(THEN) && !self.row_bcast(ELSE)
    }

    /// Tail masks for `count` (in a register, 1 ..= 255) elements: k5 over cond bytes and
    /// element lanes, k7 over qwords for width 16.
    fn avx512_tail_masks_from(&mut self, count: AsmRegister64) -> R {
        self.a.mov(r10, -1i64)?;
        self.a.bzhi(r10, r10, count)?;
        self.a.kmovq(k5, r10)?;
        if self.w == 16 {
            self.a.lea(r11, ptr(count + count))?;
            self.a.mov(r10, -1i64)?;
            self.a.bzhi(r10, r10, r11)?;
            self.a.kmovq(k7, r10)?;
        }
        Ok(())
    }

    /// Tail masks for a known number of elements (at most one zmm).
    fn avx512_tail_masks_imm(&mut self, count: u64) -> R {
        let bits = |k: u64| if k >= 64 { u64::MAX } else { (1u64 << k) - 1 };
        self.mov_imm(r10, bits(count))?;
        self.a.kmovq(k5, r10)?;
        if self.w == 16 {
            self.mov_imm(r10, bits(2 * count))?;
            self.a.kmovq(k7, r10)?;
        }
        Ok(())
    }

    /// Move of one element-width vector register (masked or not).
    fn mov_elems(&mut self, dst: AsmRegisterZmm, src: AsmMemoryOperand) -> R {
        Ok(match self.w {
            1 => self.a.vmovdqu8(dst, src),
            2 => self.a.vmovdqu16(dst, src),
            4 => self.a.vmovdqu32(dst, src),
            _ => self.a.vmovdqu64(dst, src),
        }?)
    }

    fn store_elems(&mut self, dst: AsmMemoryOperand, src: AsmRegisterZmm) -> R {
        Ok(match self.w {
            1 => self.a.vmovdqu8(dst, src),
            2 => self.a.vmovdqu16(dst, src),
            4 => self.a.vmovdqu32(dst, src),
            _ => self.a.vmovdqu64(dst, src),
        }?)
    }

    fn blend_reg(&mut self, dst: AsmRegisterZmm, a: AsmRegisterZmm, b: AsmRegisterZmm) -> R {
        Ok(match self.w {
            1 => self.a.vpblendmb(dst, a, b),
            2 => self.a.vpblendmw(dst, a, b),
            4 => self.a.vpblendmd(dst, a, b),
            _ => self.a.vpblendmq(dst, a, b),
        }?)
    }

    fn blend_mem(&mut self, dst: AsmRegisterZmm, a: AsmRegisterZmm, b: AsmMemoryOperand) -> R {
        Ok(match self.w {
            1 => self.a.vpblendmb(dst, a, b),
            2 => self.a.vpblendmw(dst, a, b),
            4 => self.a.vpblendmd(dst, a, b),
            _ => self.a.vpblendmq(dst, a, b),
        }?)
    }

    /// Four zmm of output from element `r8` on, unmasked.
    /// Masks k1..k4 of the four zmm of a main-loop iteration; a bit is set where the blend
    /// takes its memory (or second) operand.
    fn avx512_masks(&mut self) -> R {
        let w = self.w;
        let zero_sel = self.avx512_zero_sel();
        match w {
            1 | 2 | 4 => {
                let groups = [4, 2, 1][w.trailing_zeros() as usize];
                let per_group = UNROLL / groups;
                for g in 0..groups {
                    let k = K[1 + g * per_group];
                    let c = self.elem(COND, 64 * g as i64);
                    if zero_sel {
                        self.a.vptestnmb(k, zmm31, c)?;
                    } else {
                        self.a.vptestmb(k, zmm31, c)?;
                    }
                    for s in 1..per_group {
                        self.a.kshiftrq(
                            K[1 + g * per_group + s],
                            k,
                            (s * 64 / per_group) as u32,
                        )?;
                    }
                }
            }
            8 => {
                let c = self.elem(COND, 0);
                if zero_sel {
                    self.a.vptestnmb(k1, ymm31, c)?;
                } else {
                    self.a.vptestmb(k1, ymm31, c)?;
                }
                for s in 1..UNROLL {
                    self.a.kshiftrd(K[1 + s], k1, (8 * s) as u32)?;
                }
            }
            _ => {
                for v in 0..UNROLL {
                    let t = ZMM[8 + v];
                    self.a.vpbroadcastd(t, self.elem(COND, 4 * v as i64))?;
                    if zero_sel {
                        self.a.vptestnmq(K[1 + v], t, zmm28)?;
                    } else {
                        self.a.vptestmq(K[1 + v], t, zmm28)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The blends and stores of a main-loop iteration, under the masks k1..k4.
    fn avx512_blend_store(&mut self, nt: bool) -> R {
        let bt = self.row_bcast(THEN);
        let be = self.row_bcast(ELSE);
        if self.w == 16 {
            self.a.mov(r11, r8)?;
            self.a.shl(r11, 4)?;
        }
        let per = self.lanes512() as i64;
        for (v, &d) in ZMM.iter().enumerate().take(UNROLL) {
            let off = v as i64 * per;
            let dk = masked(d, 1 + v);
            match (bt, be) {
                (false, false) => {
                    self.mov_elems(d, self.elem(ELSE, off))?;
                    self.blend_mem(dk, d, self.elem(THEN, off))?;
                }
                (true, false) => self.blend_mem(dk, zmm30, self.elem(ELSE, off))?,
                (false, true) => self.blend_mem(dk, zmm29, self.elem(THEN, off))?,
                (true, true) => self.blend_reg(dk, zmm29, zmm30)?,
            }
            let o = self.elem(OUT, off);
            if nt {
                self.a.vmovntdq(o, d)?;
            } else {
                self.store_elems(o, d)?;
            }
        }
        Ok(())
    }

    /// One zmm of output from element `r8 + off`, lanes masked by k5 (k7 for the data of
    /// width 16): masked loads never touch memory past the row.
    fn avx512_masked_body(&mut self, off: i64) -> R {
        let w = self.w;
        let c = self.elem(COND, off);
        // Cond bytes of one zmm: 64, 32, 16, 8 or 4.
        match w {
            1 => {
                self.a.vmovdqu8(zmm8.k5().z(), c)?;
                self.a.vptestmb(k6, zmm8, zmm8)?;
            }
            2 => {
                self.a.vmovdqu8(ymm8.k5().z(), c)?;
                self.a.vptestmb(k6, ymm8, ymm8)?;
            }
            4 | 8 => {
                self.a.vmovdqu8(xmm8.k5().z(), c)?;
                self.a.vptestmb(k6, xmm8, xmm8)?;
            }
            _ => {
                self.a.vmovdqu8(xmm8.k5().z(), c)?;
                self.a.vpbroadcastd(zmm9, xmm8)?;
                self.a.vptestmq(k6, zmm9, zmm28)?;
            }
        }
        if w == 16 {
            self.a.mov(r11, r8)?;
            self.a.shl(r11, 4)?;
        }
        let lanes_mask = |z: AsmRegisterZmm| if w == 16 { z.k7() } else { z.k5() };
        let t = if self.row_bcast(THEN) {
            zmm30
        } else {
            self.mov_elems(lanes_mask(zmm1).z(), self.elem(THEN, off))?;
            zmm1
        };
        let e = if self.row_bcast(ELSE) {
            zmm29
        } else {
            self.mov_elems(lanes_mask(zmm2).z(), self.elem(ELSE, off))?;
            zmm2
        };
        self.blend_reg(zmm0.k6(), e, t)?;
        let o = self.elem(OUT, off);
        let o = if w == 16 { o.k7() } else { o.k5() };
        self.store_elems(o, zmm0)
    }

    // ---- row copy ------------------------------------------------------------------------

    /// Copies `r10` bytes from `P[op]` to the output row (or fills them with `op`'s splat):
    /// four zmm per iteration, then masked zmm moves.
    pub(super) fn avx512_copy(&mut self, op: usize, fill: bool, done: Label) -> R {
        if fill && !self.invariant[op - THEN] {
            self.avx512_splat(op)?;
        }
        let src = (!fill).then_some(super::P[op]);
        let sr = Self::avx512_splat_reg(op);
        let b = self.n.times(self.w as u64);
        let tail = self.label();
        self.a.xor(r8d, r8d)?;
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
            let aligned = self.label();
            self.a.mov(rax, rcx)?;
            self.a.neg(rax)?;
            self.a.and(eax, 63)?;
            self.je(aligned)?;
            self.a.mov(r11, -1i64)?;
            self.a.bzhi(r11, r11, rax)?;
            self.a.kmovq(k5, r11)?;
            self.avx512_masked_move(src, sr, 0)?;
            self.bind(aligned);
            self.a.mov(r8, rax)?;
            self.avx512_copy_loop(src, sr, true)?;
            self.jmp(tail)?;
            self.bind(normal);
        }
        if b.max >= COPY_BLOCK {
            if b.min < COPY_BLOCK {
                self.a.cmp(r10, COPY_BLOCK as i32)?;
                self.jb(tail)?;
            }
            self.avx512_copy_loop(src, sr, false)?;
        }
        self.bind(tail);
        let nt_path = self.nt && b.max >= NT_COPY_MIN;
        match b.known().filter(|_| !nt_path) {
            Some(k) => {
                let start = if k >= COPY_BLOCK {
                    k / COPY_BLOCK * COPY_BLOCK
                } else {
                    0
                };
                let rem = k - start;
                let mut off = 0;
                while off < rem {
                    let m = (rem - off).min(64);
                    let bits = if m >= 64 { u64::MAX } else { (1u64 << m) - 1 };
                    self.mov_imm(r11, bits)?;
                    self.a.kmovq(k5, r11)?;
                    self.avx512_masked_move(src, sr, off as i32)?;
                    off += 64;
                }
            }
            None => {
                let top = self.label();
                self.bind(top);
                self.a.mov(rax, r10)?;
                self.a.sub(rax, r8)?;
                self.jbe(done)?;
                self.a.mov(r11, -1i64)?;
                self.a.bzhi(r11, r11, rax)?;
                self.a.kmovq(k5, r11)?;
                self.avx512_masked_move(src, sr, 0)?;
                self.a.add(r8, 64)?;
                self.jmp(top)?;
            }
        }
        Ok(())
    }

    /// `while r8 + 256 <= r10 { move 256 bytes }`, entered with `r8 + 256 <= r10`.
    fn avx512_copy_loop(&mut self, src: Option<AsmRegister64>, sr: AsmRegisterZmm, nt: bool) -> R {
        self.a.lea(r11, ptr(r10 - COPY_BLOCK as i32))?;
        let top = self.label();
        self.bind(top);
        if let Some(s) = src {
            for (j, &v) in ZMM.iter().enumerate().take(4) {
                self.a.vmovdqu64(v, ptr(s + r8 + 64 * j as i32))?;
            }
        }
        for (j, &v) in ZMM.iter().enumerate().take(4) {
            let v = if src.is_some() { v } else { sr };
            let o = ptr(rcx + r8 + 64 * j as i32);
            if nt {
                self.a.vmovntdq(o, v)?;
            } else {
                self.a.vmovdqu64(o, v)?;
            }
        }
        self.a.add(r8, COPY_BLOCK as i32)?;
        self.a.cmp(r8, r11)?;
        self.jbe(top)
    }

    /// Up to 64 bytes at `r8 + off` under the byte mask k5.
    fn avx512_masked_move(
        &mut self,
        src: Option<AsmRegister64>,
        sr: AsmRegisterZmm,
        off: i32,
    ) -> R {
        let o = ptr(rcx + r8 + off).k5();
        match src {
            Some(s) => {
                self.a.vmovdqu8(zmm0.k5().z(), ptr(s + r8 + off))?;
                self.a.vmovdqu8(o, zmm0)?;
            }
            None => self.a.vmovdqu8(o, sr)?,
        }
        Ok(())
    }
}

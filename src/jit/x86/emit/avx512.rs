//! AVX-512 ([`VecIsa`] for EVEX-encoded ymm, AVX-512 F/BW/VL/DQ): cond tested into opmask
//! registers, `vpblendm*` selects, masked tails (a `bzhi`-built lane mask, masked loads and
//! stores) instead of scalar tails.
//!
//! Registers: ymm31 all ones; a block uses ymm0..ymm3 (data), ymm8..ymm11 (width 16: the
//! broadcast cond bytes) and k1..k4; tails ymm0..ymm2, ymm8, ymm9 and k5 (lanes), k6 (cond),
//! k7 (qword lanes for width 16).
//!
//! Per block `vptestmb` of the cond bytes against all ones sets one mask bit per element (32
//! bytes at a time, or 16 / 8 for fewer) and `kshiftr` gives each vector its slice; width 16
//! broadcasts the two cond bytes of a vector to every word and tests qwords against the
//! selector. `vpblendm` then takes the element from its second operand (the one loaded from
//! memory, never a memory operand of the blend itself: see `avx512_blend_store`) where the bit
//! is set: the test is `vptestnmb` (cond is 0) when `else` is the operand read from memory and
//! `then` a splat.
//!
//! Wide kernels ([`crate::Variant::wide`], widths up to 8 bytes) run each main-loop block as
//! zmm vectors (a block's 128 bytes in two, each one cache line), the splats broadcast to zmm;
//! heads, tails and copies stay ymm. On a Zen 4 host a row of blends whose output goes to L2 or
//! L3 ran at a plain row copy's speed with zmm and ~15% slower with ymm (half the µops per
//! byte stored), while loads streamed from DRAM ran slower with zmm: hence a measured variant.

use iced_x86::code_asm::*;

use super::emitter::{Bounds, EmitError, Emitter, Label, R};
use super::isa::{SEL, UNROLL, VecIsa, splat_reg};
use super::pred::Pol;
use super::regs::Cc;
use super::regs::{K, XMM, YMM, ZMM};
use crate::plan::{COND, ELSE, OUT, THEN};

/// The AVX-512 vector ISA.
pub(crate) struct Avx512;

/// All ones, the operand `vptestmb` tests cond bytes against.
const ONES: usize = 31;
/// Red-zone slots of the registers a short run saves.
const SAVE_END: i32 = -8;
const SAVE_AT: i32 = -16;

/// A vector register of one size (ymm or zmm) and the element-wise moves and blends of
/// AVX-512 on it, for elements of `w` bytes.
trait VReg: Copy {
    /// Bytes per register.
    const BYTES: usize;
    /// The register written under opmask `i` (1 ..= 7).
    fn k(self, i: usize) -> Self;
    fn load(self, a: &mut CodeAssembler, w: usize, m: AsmMemoryOperand) -> Result<(), IcedError>;
    fn store(self, a: &mut CodeAssembler, w: usize, m: AsmMemoryOperand) -> Result<(), IcedError>;
    fn store_nt(self, a: &mut CodeAssembler, m: AsmMemoryOperand) -> Result<(), IcedError>;
    /// `self` = the mask's bits ? `y` : `x` (`self` carries the mask).
    fn blend_reg(self, a: &mut CodeAssembler, w: usize, x: Self, y: Self) -> Result<(), IcedError>;
}

macro_rules! vreg {
    ($t:ty, $bytes:expr) => {
        impl VReg for $t {
            const BYTES: usize = $bytes;
            fn k(self, i: usize) -> Self {
                match i {
                    1 => self.k1(),
                    2 => self.k2(),
                    3 => self.k3(),
                    4 => self.k4(),
                    5 => self.k5(),
                    6 => self.k6(),
                    _ => self.k7(),
                }
            }
            fn load(
                self,
                a: &mut CodeAssembler,
                w: usize,
                m: AsmMemoryOperand,
            ) -> Result<(), IcedError> {
                per_width!(w, a, [vmovdqu8, vmovdqu16, vmovdqu32, vmovdqu64], (self, m))
            }
            fn store(
                self,
                a: &mut CodeAssembler,
                w: usize,
                m: AsmMemoryOperand,
            ) -> Result<(), IcedError> {
                per_width!(w, a, [vmovdqu8, vmovdqu16, vmovdqu32, vmovdqu64], (m, self))
            }
            fn store_nt(self, a: &mut CodeAssembler, m: AsmMemoryOperand) -> Result<(), IcedError> {
                a.vmovntdq(m, self)
            }
            fn blend_reg(
                self,
                a: &mut CodeAssembler,
                w: usize,
                x: Self,
                y: Self,
            ) -> Result<(), IcedError> {
                per_width!(
                    w,
                    a,
                    [vpblendmb, vpblendmw, vpblendmd, vpblendmq],
                    (self, x, y)
                )
            }
        }
    };
}

vreg!(AsmRegisterYmm, 32);
vreg!(AsmRegisterZmm, 64);

impl VecIsa for Avx512 {
    fn invariants(e: &mut Emitter) -> R {
        if e.wide {
            e.a.vpternlogd(ZMM[ONES], ZMM[ONES], ZMM[ONES], 0xff)?;
        } else {
            e.a.vpternlogd(YMM[ONES], YMM[ONES], YMM[ONES], 0xff)?;
        }
        Ok(())
    }

    fn packs(w: usize) -> bool {
        // A block's masks are a `kmov` from the bits.
        w <= 8
    }

    fn wide(w: usize) -> bool {
        // Widths up to 8: blocks of width 16 stay ymm.
        w <= 8
    }

    fn cond_bits(e: &mut Emitter, src: AsmMemoryOperand) -> R {
        e.avx512_test_bytes(k1, 32, src)?;
        Ok(e.a.kmovd(r10d, k1)?)
    }

    fn uniform(w: usize) -> bool {
        // Widths 2 and 4: one or two 32-bit masks cover the whole block.
        matches!(w, 2 | 4)
    }

    fn block(e: &mut Emitter, vecs: usize, nt: bool, uniform: Option<(Label, Label)>) -> R {
        if e.wide && vecs.is_multiple_of(2) {
            // Two ymm vectors' elements per zmm.
            e.avx512_masks::<AsmRegisterZmm>(vecs / 2)?;
            if let Some((all_then, all_else)) = uniform {
                e.avx512_uniform_test(all_then, all_else, 64)?;
            }
            return e.avx512_blend_store(&ZMM, vecs / 2, nt);
        }
        e.avx512_masks::<AsmRegisterYmm>(vecs)?;
        if let Some((all_then, all_else)) = uniform {
            e.avx512_uniform_test(all_then, all_else, 32)?;
        }
        e.avx512_blend_store(&YMM, vecs, nt)
    }

    fn tail(e: &mut Emitter, n: Bounds, done: Label) -> R {
        let lanes = e.lanes();
        let blk = lanes * UNROLL as u64;
        match n.known().filter(|_| !e.unaligned_end) {
            Some(k) => {
                // Known length: straight-line code with immediate masks, from `r8`, which the
                // main loop left at the last whole block.
                let rest = k % blk;
                let mut off = 0;
                while off < rest {
                    e.avx512_tail_masks_imm((rest - off).min(lanes))?;
                    e.avx512_masked_body(off as i64)?;
                    off += lanes;
                }
                Ok(())
            }
            None => e.avx512_masked_loop(done),
        }
    }

    fn short(e: &mut Emitter, _max: u64) -> R {
        // The masked loop, from r8 to r8 + rax.
        e.a.mov(qword_ptr(rsp + SAVE_END), r9)?;
        e.a.mov(qword_ptr(rsp + SAVE_AT), r8)?;
        e.a.lea(r9, ptr(r8 + rax))?;
        let sub = e.label();
        e.avx512_masked_loop(sub)?;
        e.bind(sub);
        e.a.mov(r9, qword_ptr(rsp + SAVE_END))?;
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
        match b.known().filter(|_| !e.unaligned_end) {
            Some(k) => {
                // From `r8`, which the block loop left at the last whole block.
                let rest = k % blk;
                let mut off = 0;
                while off < rest {
                    let m = (rest - off).min(32);
                    e.mov_imm(r11, (1u64 << m) - 1)?;
                    e.a.kmovd(k5, r11d)?;
                    e.avx512_masked_move(src, sr, off as i32)?;
                    off += 32;
                }
                Ok(())
            }
            None => e.avx512_copy_loop(src, sr, done),
        }
    }

    fn copy_short(e: &mut Emitter, src: Option<AsmRegister64>, sr: usize, _max: u64) -> R {
        e.a.mov(qword_ptr(rsp + SAVE_END), r10)?;
        e.a.mov(qword_ptr(rsp + SAVE_AT), r8)?;
        e.a.lea(r10, ptr(r8 + rax))?;
        let sub = e.label();
        e.avx512_copy_loop(src, sr, sub)?;
        e.bind(sub);
        e.a.mov(r10, qword_ptr(rsp + SAVE_END))?;
        e.a.mov(r8, qword_ptr(rsp + SAVE_AT))?;
        Ok(())
    }

    fn pred_scalar(
        e: &mut Emitter,
        lhs: AsmMemoryOperand,
        rhs: AsmMemoryOperand,
    ) -> Result<Cc, EmitError> {
        e.k_scalar(lhs, rhs)
    }

    fn pred_invariants(e: &mut Emitter) -> R {
        e.k_invariants()
    }

    fn pred_splat(e: &mut Emitter, op: usize) -> R {
        e.k_splat(op)
    }
}

impl Emitter<'_> {
    /// Whether the masks select else (cond == 0): then is a splat and else is read from memory,
    /// the blend's memory operand.
    fn avx512_zero_sel(&self) -> bool {
        self.row_bcast(THEN) && !self.row_bcast(ELSE)
    }

    /// `vptestmb` (or `vptestnmb`) of `src` against all ones, or against itself.
    fn avx512_test_bytes(&mut self, k: AsmRegisterK, bytes: usize, src: AsmMemoryOperand) -> R {
        let zero_sel = self.avx512_zero_sel();
        match bytes {
            64 => {
                let ones = ZMM[ONES];
                if zero_sel {
                    self.a.vptestnmb(k, ones, src)?;
                } else {
                    self.a.vptestmb(k, ones, src)?;
                }
            }
            32 => {
                let ones = YMM[ONES];
                if zero_sel {
                    self.a.vptestnmb(k, ones, src)?;
                } else {
                    self.a.vptestmb(k, ones, src)?;
                }
            }
            16 => {
                let ones = XMM[ONES];
                if zero_sel {
                    self.a.vptestnmb(k, ones, src)?;
                } else {
                    self.a.vptestmb(k, ones, src)?;
                }
            }
            _ => {
                // Eight bytes: loaded exactly, never past the block.
                self.a.vmovq(xmm8, src)?;
                if zero_sel {
                    self.a.vptestnmb(k, xmm8, xmm8)?;
                } else {
                    self.a.vptestmb(k, xmm8, xmm8)?;
                }
            }
        }
        Ok(())
    }

    /// Masks k1..k`vecs` of `vecs` vectors of `V`'s size from element `r8` (from the packed
    /// bits at `rax` when [`Emitter::from_bits`]); a bit is set where the blend takes its
    /// memory (or second) operand.
    fn avx512_masks<V: VReg>(&mut self, vecs: usize) -> R {
        if self.pred.is_some() {
            let want = if self.avx512_zero_sel() {
                Pol::Else
            } else {
                Pol::Then
            };
            return self.k_block_masks(V::BYTES, vecs, want);
        }
        let lanes = V::BYTES / self.w;
        if self.w == 16 {
            for v in 0..vecs {
                let t = YMM[8 + v];
                self.a.vpbroadcastw(t, self.elem(COND, 2 * v as i64))?;
                if self.avx512_zero_sel() {
                    self.a.vptestnmq(K[1 + v], t, YMM[SEL])?;
                } else {
                    self.a.vptestmq(K[1 + v], t, YMM[SEL])?;
                }
            }
            return Ok(());
        }
        // Cond bytes of the block, tested a vector's bytes at a time (fewer when the block has
        // fewer).
        let total = vecs * lanes;
        let group = total.min(V::BYTES);
        let per_group = group / lanes;
        for g in 0..total / group {
            let first = 1 + g * per_group;
            if self.from_bits {
                // The packed bits of the group, at rax (reading a byte more for 8 lanes).
                let at = ptr(rax + (g * group / 8) as i32);
                match group {
                    64 => self.a.kmovq(K[first], qword_ptr(at))?,
                    32 => self.a.kmovd(K[first], dword_ptr(at))?,
                    _ => self.a.kmovw(K[first], word_ptr(at))?,
                }
            } else {
                let c = self.elem(COND, (g * group) as i64);
                self.avx512_test_bytes(K[first], group, c)?;
            }
            for s in 1..per_group {
                let (k, from) = (K[first + s], K[first]);
                let by = (s * lanes) as u32;
                match group {
                    64 => self.a.kshiftrq(k, from, by)?,
                    32 => self.a.kshiftrd(k, from, by)?,
                    _ => self.a.kshiftrw(k, from, by)?,
                }
            }
        }
        Ok(())
    }

    /// Jumps to `all_then` / `all_else` when the masks of one main-loop block of vectors of
    /// `vbytes` (k1 with its 32 bits for width 4; for width 2, k1 and k3, or with zmm k1 with
    /// its 64) say that every cond byte is non-zero / zero.
    fn avx512_uniform_test(&mut self, all_then: Label, all_else: Label, vbytes: usize) -> R {
        // The mask bits are "cond != 0", or "cond == 0" when else is read from memory.
        let (ones, zeros) = if self.avx512_zero_sel() {
            (all_else, all_then)
        } else {
            (all_then, all_else)
        };
        if self.w == 2 && vbytes == 64 {
            self.a.kortestq(k1, k1)?;
            self.je(zeros)?;
        } else if self.w == 2 {
            self.a.kord(k5, k1, k3)?;
            self.a.kortestd(k5, k5)?;
            self.je(zeros)?;
            self.a.kandd(k5, k1, k3)?;
            self.a.kortestd(k5, k5)?;
        } else {
            self.a.kortestd(k1, k1)?;
            self.je(zeros)?;
        }
        self.branch_carry(ones)
    }

    /// Move of one vector register of elements (masked or not).
    fn mov_elems<V: VReg>(&mut self, dst: V, src: AsmMemoryOperand) -> R {
        Ok(dst.load(&mut self.a, self.w, src)?)
    }

    fn store_elems<V: VReg>(&mut self, dst: AsmMemoryOperand, src: V) -> R {
        Ok(src.store(&mut self.a, self.w, dst)?)
    }

    fn blend_reg<V: VReg>(&mut self, dst: V, a: V, b: V) -> R {
        Ok(dst.blend_reg(&mut self.a, self.w, a, b)?)
    }

    /// The blends and stores of `vecs` vectors of `regs` under the masks k1..k`vecs`.
    fn avx512_blend_store<V: VReg>(&mut self, regs: &[V; 32], vecs: usize, nt: bool) -> R {
        let (bt, be) = (self.row_bcast(THEN), self.row_bcast(ELSE));
        let (st, se) = (regs[splat_reg(THEN)], regs[splat_reg(ELSE)]);
        if self.w == 16 {
            self.a.mov(r11, r8)?;
            self.a.shl(r11, 4)?;
        }
        let per = (V::BYTES / self.w) as i64;
        for (v, &d) in regs.iter().enumerate().take(vecs) {
            let off = v as i64 * per;
            let dk = d.k(1 + v);
            // Operands from memory are loaded with plain moves and blended in registers: on a
            // Zen 4 host, rows of `vpblendm` with a memory operand whose data came from L3 or
            // DRAM ran ~3x slower than the same rows loaded first (10.0 ms vs 3.0 ms for a
            // 54 MiB masked fill), and at a plain copy's speed from L1 and L2.
            match (bt, be) {
                (false, false) => {
                    let t = regs[4 + v];
                    self.mov_elems(d, self.elem(ELSE, off))?;
                    self.mov_elems(t, self.elem(THEN, off))?;
                    self.blend_reg(dk, d, t)?;
                }
                (true, false) => {
                    self.mov_elems(d, self.elem(ELSE, off))?;
                    self.blend_reg(dk, st, d)?;
                }
                (false, true) => {
                    self.mov_elems(d, self.elem(THEN, off))?;
                    self.blend_reg(dk, se, d)?;
                }
                (true, true) => self.blend_reg(dk, se, st)?,
            }
            let o = self.elem(OUT, off);
            if nt {
                d.store_nt(&mut self.a, o)?;
            } else {
                self.store_elems(o, d)?;
            }
        }
        Ok(())
    }

    /// Masked vectors from `r8` while elements remain before `r9`; on to `done`.
    fn avx512_masked_loop(&mut self, done: Label) -> R {
        let top = self.label();
        self.bind(top);
        self.a.mov(rax, r9)?;
        self.a.sub(rax, r8)?;
        self.jbe(done)?;
        self.avx512_tail_masks_from(rax)?;
        self.avx512_masked_body(0)?;
        self.a.add(r8, self.lanes() as i32)?;
        self.jmp(top)
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

    /// Tail masks for a known number of elements (at most one vector).
    fn avx512_tail_masks_imm(&mut self, count: u64) -> R {
        self.mov_imm(r10, (1u64 << count) - 1)?;
        self.a.kmovq(k5, r10)?;
        if self.w == 16 {
            self.mov_imm(r10, (1u64 << (2 * count)) - 1)?;
            self.a.kmovq(k7, r10)?;
        }
        Ok(())
    }

    /// One vector of output from element `r8 + off`, lanes masked by k5 (k7 for the data of
    /// width 16): masked loads never touch memory past the row.
    fn avx512_masked_body(&mut self, off: i64) -> R {
        let w = self.w;
        let c = self.elem(COND, off);
        // Cond bytes of one vector: 32, 16, 8, 4 or 2.
        match w {
            _ if self.pred.is_some() => self.k_tail_mask(off)?,
            1 => {
                self.a.vmovdqu8(ymm8.k5().z(), c)?;
                self.a.vptestmb(k6, ymm8, ymm8)?;
            }
            2 | 4 | 8 => {
                self.a.vmovdqu8(xmm8.k5().z(), c)?;
                self.a.vptestmb(k6, xmm8, xmm8)?;
            }
            _ => {
                self.a.vmovdqu8(xmm8.k5().z(), c)?;
                self.a.vpbroadcastw(ymm9, xmm8)?;
                self.a.vptestmq(k6, ymm9, YMM[SEL])?;
            }
        }
        if w == 16 {
            self.a.mov(r11, r8)?;
            self.a.shl(r11, 4)?;
        }
        let lanes_mask = |y: AsmRegisterYmm| if w == 16 { y.k7() } else { y.k5() };
        let t = if self.row_bcast(THEN) {
            YMM[splat_reg(THEN)]
        } else {
            self.mov_elems(lanes_mask(ymm1).z(), self.elem(THEN, off))?;
            ymm1
        };
        let e = if self.row_bcast(ELSE) {
            YMM[splat_reg(ELSE)]
        } else {
            self.mov_elems(lanes_mask(ymm2).z(), self.elem(ELSE, off))?;
            ymm2
        };
        self.blend_reg(ymm0.k6(), e, t)?;
        let o = self.elem(OUT, off);
        let o = if w == 16 { o.k7() } else { o.k5() };
        self.store_elems(o, ymm0)
    }

    /// Masked 32-byte moves from `r8` while bytes remain before `r10`; on to `done`.
    fn avx512_copy_loop(&mut self, src: Option<AsmRegister64>, sr: usize, done: Label) -> R {
        let top = self.label();
        self.bind(top);
        self.a.mov(rax, r10)?;
        self.a.sub(rax, r8)?;
        self.jbe(done)?;
        self.a.mov(r11, -1i64)?;
        self.a.bzhi(r11, r11, rax)?;
        self.a.kmovd(k5, r11d)?;
        self.avx512_masked_move(src, sr, 0)?;
        self.a.add(r8, 32)?;
        self.jmp(top)
    }

    /// Up to 32 bytes at `r8 + off` under the byte mask k5.
    fn avx512_masked_move(&mut self, src: Option<AsmRegister64>, sr: usize, off: i32) -> R {
        let o = ptr(rcx + r8 + off).k5();
        match src {
            Some(s) => {
                self.a.vmovdqu8(ymm0.k5().z(), ptr(s + r8 + off))?;
                self.a.vmovdqu8(o, ymm0)?;
            }
            None => self.a.vmovdqu8(o, YMM[sr])?,
        }
        Ok(())
    }
}

//! The vector rows, written once over the vector ISA ([`VecIsa`], implemented by
//! [`Avx2`](super::avx2::Avx2) and [`Avx512`](super::avx512::Avx512)), the way oneDNN's
//! `jit_uni_*` kernels are templated on theirs: the splats, the non-temporal gate, the line
//! head, the main loop of 128-byte blocks, the whole-line non-temporal stores and the row
//! copies are here; an ISA supplies how one block of vectors is selected (lane masks and
//! `vblendv*`, or opmasks and `vpblendm*`), and how the rest of a row that fills no block is
//! done (overlapping steps, or masked vectors).
//!
//! Both ISAs use 256-bit vectors; AVX-512 kernels can also run their main-loop blocks as zmm
//! ([`crate::Variant::wide`]), a variant the measured choice weighs. On an AMD Zen 4 host zmm
//! code lost 5-27% against ymm code on outputs from DRAM (a stream loaded once per 64-byte line
//! paces the prefetcher worse than two loads per line), while EVEX-encoded ymm with opmasks
//! matched AVX2 there and beat it by 25-30% in L1; zmm won (~15%) where the row's inputs stay
//! in L1 and its output goes to L2 or L3 (a broadcast row written many times).
//!
//! Non-temporal rows store every whole 64-byte line of the output non-temporally and only the
//! partial first and last lines with ordinary stores (a line is never written both ways);
//! a row that left whole lines to ordinary stores ran 1.35-1.5x slower on such a host.
//! Four-way kernels ([`crate::Variant::four_way`]) split the main loop of such a row in four
//! parts and store a block of each in turn: twelve read streams instead of three ran 12-17%
//! faster from DRAM on that host (eight parts lost 10%), and slower when the inputs stayed in
//! the last-level cache, hence a measured variant.
//!
//! A row whose cond row is the same for every outer index and long (an attention mask over
//! heads) would re-read those cond bytes from L2 on every row, the then/else and output
//! streams having pushed them out of L1. The prologue packs them instead to one bit per
//! element on the stack, from the element where every row's main loop starts, and the main
//! loop reads its masks from the bits (`rax` points at the block's), which stay in L1.
//!
//! Registers shared by both ISAs: ymm14 / ymm13 the splats of then / else, ymm12 the width-16
//! selector (qwords 0 and 1 keep cond byte 0, qwords 2 and 3 cond byte 1).

use iced_x86::code_asm::*;

use super::emitter::{Bounds, Emitter, Label, P, R};
use super::isa::*;
use super::regs::{YMM, ZMM};
use crate::plan::{COND, ELSE, OUT, RowShape, Signature, THEN};

/// Row copies: bytes per block.
const COPY_BLOCK: u64 = UNROLL as u64 * VBYTES;
/// Copy rows of at least this many bytes use non-temporal stores (when the kernel does).
const NT_COPY_MIN: u64 = 512;
/// How far ahead of its stores the main loop of a [`crate::Variant::prefetchw`] kernel fetches
/// the output's lines for writing. On a Zen 4 host a loop of 32-byte loads and stores copying
/// 4 MiB ran at 80-86 µs for seconds at a time while `rep movsb` on the same buffers ran at
/// 66-69; `prefetchw` of the destination 512 bytes to 4 KiB ahead brought the loop to 66-68 µs
/// (256 KiB: no change; 64 MiB: 3-7% slower). In the select kernels it helped some (a 4 MiB
/// i32 clamp: 1.00-1.03x the copy roofline in four runs, 1.02-1.25x without) and slowed
/// others (a 2 MiB bf16 ReLU, whose widening compares keep the core busy: 1.16-1.22x against
/// 1.08-1.10x), hence a measured variant.
const CLAIM_AHEAD: i64 = 1024;
/// Red-zone slot of the head count of a non-temporal row (the ISAs use the slots above it).
const HEAD_SLOT: i32 = -24;
/// Rows of this many elements or more pack a cond row shared by every row to bits (shorter
/// ones stay in L1 as bytes).
const PACK_MIN: u64 = 4096;
/// And at most this many (the bits live in the stack frame: 8 KiB).
const PACK_MAX: u64 = 65536;

/// Whether the kernel of `sig` (exact, or `generic`) of ISA `I` packs its cond row to bits: an
/// exact kernel of vector rows of `PACK_MIN..=PACK_MAX` elements whose cond row is the same for
/// every outer index, and whose output rows all start at the same offset within a cache line
/// (so that every row's main loop starts at the same element, that of the bits' first).
pub(super) fn packs_cond<I: VecIsa>(sig: &Signature, generic: bool) -> bool {
    let rank = sig.rank();
    I::packs(sig.width)
        && sig.is_mask()
        && !generic
        && rank >= 2
        && matches!(sig.row_shape(), RowShape::Select { .. })
        && (PACK_MIN..=PACK_MAX).contains(&(sig.dims[rank - 1] as u64))
        && sig.strides[COND][..rank - 1].iter().all(|&s| s == 0)
        && (0..rank - 1).all(|l| sig.byte_stride(OUT, l) % LINE as isize == 0)
}

impl Emitter<'_> {
    /// Loop-invariant registers: the ISA's, the splats of operands constant for the whole
    /// kernel, the width-16 selector.
    pub(super) fn vector_invariants<I: VecIsa>(&mut self) -> R {
        I::invariants(self)?;
        for op in [THEN, ELSE] {
            if self.splat_once(op) {
                self.splat(op)?;
            }
        }
        if self.w == 16 && self.pred.is_none() {
            let mut sel = [0u8; 32];
            for q in [0, 8, 17, 25] {
                sel[q] = 0xff;
            }
            let c = self.constant(&sel);
            self.a.vmovdqu(YMM[SEL], c)?;
        }
        if self.pred.is_some() {
            I::pred_invariants(self)?;
        }
        Ok(())
    }

    /// Stack bytes of the packed bits of a row: a bit per element, with slack for the dword
    /// reads of a block's last bits.
    pub(super) fn bits_bytes(&self) -> i32 {
        ((self.n.min / 8 + 8).next_multiple_of(16)) as i32
    }

    /// Packs the cond row (the same for every row) to bits from the element where the main
    /// loop of every row starts: that of the output's first line boundary when the output is
    /// element-aligned (see [`Self::vector_row`]), else 0. Keeps `r9`.
    pub(super) fn pack_cond<I: VecIsa>(&mut self) -> R {
        let n = self.n.min as i32;
        let start = self.label();
        self.a.mov(r11, rdi)?;
        if self.w > 1 {
            self.a.test(cl, self.w as i32 - 1)?;
            self.jne(start)?;
        }
        self.a.mov(rax, rcx)?;
        self.a.neg(rax)?;
        self.a.and(eax, LINE as i32 - 1)?;
        if self.wlog() > 0 {
            self.a.shr(eax, self.wlog())?;
        }
        self.a.add(r11, rax)?;
        self.bind(start);
        // r8 = cond bytes from r11 to the row's end (more than 32: n >= PACK_MIN).
        self.a.lea(r8, ptr(rdi + n))?;
        self.a.sub(r8, r11)?;
        self.a.lea(rax, ptr(rsp + self.bits_at))?;
        let top = self.label();
        self.bind(top);
        I::cond_bits(self, ptr(r11))?;
        self.a.mov(dword_ptr(rax), r10d)?;
        self.a.add(r11, 32)?;
        self.a.add(rax, 4)?;
        self.a.sub(r8, 32)?;
        self.a.cmp(r8, 32)?;
        self.jae(top)?;
        // The last r8 (< 32) bytes: the row's last 32, shifted down to them.
        let done = self.label();
        self.a.test(r8, r8)?;
        self.je(done)?;
        I::cond_bits(self, ptr(rdi + (n - 32)))?;
        self.a.mov(r11d, 32)?;
        self.a.sub(r11d, r8d)?;
        self.a.shrx(r10d, r10d, r11d)?;
        self.a.mov(dword_ptr(rax), r10d)?;
        self.bind(done);
        Ok(())
    }

    /// Broadcasts the element at `P[op]` to every lane of its splat register (zmm in a wide
    /// kernel).
    pub(super) fn splat(&mut self, op: usize) -> R {
        let (m, r, w) = (ptr(P[op]), splat_reg(op), self.w);
        Ok(if w == 16 {
            self.a.vbroadcasti128(YMM[r], m)
        } else if self.wide {
            let z = ZMM[r];
            per_width!(
                w,
                self.a,
                [vpbroadcastb, vpbroadcastw, vpbroadcastd, vpbroadcastq],
                (z, m)
            )
        } else {
            let y = YMM[r];
            per_width!(
                w,
                self.a,
                [vpbroadcastb, vpbroadcastw, vpbroadcastd, vpbroadcastq],
                (y, m)
            )
        }?)
    }

    /// Splats of operands broadcast along the row that change from row to row.
    fn row_splats<I: VecIsa>(&mut self) -> R {
        for op in [THEN, ELSE] {
            if self.row_bcast(op) && !self.invariant[op - THEN] {
                self.splat(op)?;
            }
        }
        self.pred_row_splats::<I>()
    }

    /// Whether operand `op` (then or else) is read from memory along the row and is not the
    /// same row for every outer index (which stays in the cache).
    fn streamed(&self, op: usize) -> bool {
        let st = &self.sig.strides[op];
        !self.row_bcast(op) && (st.len() == 1 || st[..st.len() - 1].iter().any(|&s| s != 0))
    }

    /// Elements per vector.
    pub(super) fn lanes(&self) -> u64 {
        VBYTES / self.w as u64
    }

    /// Elements per cache line.
    pub(super) fn per_line(&self) -> u64 {
        LINE / self.w as u64
    }

    /// Jumps to `normal` unless the row (`len` units within `b`) has at least `min` units and
    /// the output is aligned to `align` bytes.
    fn gate(&mut self, len: AsmRegister64, b: Bounds, min: u64, align: usize, normal: Label) -> R {
        if b.min < min {
            self.a.cmp(len, min as i32)?;
            self.jb(normal)?;
        }
        if align > 1 {
            self.a.test(cl, align as i32 - 1)?;
            self.jne(normal)?;
        }
        Ok(())
    }

    /// `r8` = the units (bytes shifted right by `shift`) before the output's first boundary of
    /// `align` bytes, done by `short` with ordinary stores.
    fn line_head(&mut self, align: u64, shift: u32, short: impl FnOnce(&mut Self) -> R) -> R {
        let aligned = self.label();
        self.a.mov(rax, rcx)?;
        self.a.neg(rax)?;
        self.a.and(eax, align as i32 - 1)?;
        if shift > 0 {
            self.a.shr(eax, shift)?;
        }
        self.je(aligned)?;
        self.a.mov(qword_ptr(rsp + HEAD_SLOT), rax)?;
        short(self)?;
        self.a.mov(r8, qword_ptr(rsp + HEAD_SLOT))?;
        self.bind(aligned);
        Ok(())
    }

    /// A vector-select row.
    pub(super) fn vector_row<I: VecIsa>(&mut self) -> R {
        self.row_splats::<I>()?;
        let done = self.label();
        let (line, n) = (self.per_line(), self.n);
        let e = self.lanes() * UNROLL as u64;
        self.a.xor(r8d, r8d)?;
        // Non-temporal rows: a head up to the first line boundary, whole blocks, one more whole
        // line if there is one, then the partial last line.
        let nt_min = (2 * e + line).max(512 / self.w as u64);
        if self.nt && n.max >= nt_min {
            let normal = self.label();
            self.gate(r9, n, nt_min, self.w, normal)?;
            let line_max = line - 1;
            self.line_head(LINE, self.wlog(), |s| I::short(s, line_max))?;
            self.bits_start()?;
            let (top, blocks_done) = (self.label(), self.label());
            if self.parts {
                self.parts_loop::<I>()?;
                self.a.lea(r10, ptr(r9 - e as i32))?;
                self.a.cmp(r8, r10)?;
                self.ja(blocks_done)?;
            } else {
                self.a.lea(r10, ptr(r9 - e as i32))?;
            }
            self.bind(top);
            self.bits_block::<I>(UNROLL, true, None)?;
            self.a.add(r8, e as i32)?;
            self.bits_next(e)?;
            self.a.cmp(r8, r10)?;
            self.jbe(top)?;
            self.bind(blocks_done);
            let rest = self.label();
            self.a.lea(r10, ptr(r9 - line as i32))?;
            self.a.cmp(r8, r10)?;
            self.ja(rest)?;
            self.bits_block::<I>(UNROLL / 2, true, None)?;
            self.a.add(r8, line as i32)?;
            self.bind(rest);
            self.a.mov(rax, r9)?;
            self.a.sub(rax, r8)?;
            self.je(done)?;
            I::short(self, line_max)?;
            self.jmp(done)?;
            self.bind(normal);
        }
        let tail = self.label();
        if n.max >= e {
            if n.min < e {
                self.a.cmp(r9, e as i32)?;
                self.jb(tail)?;
            }
            // Rows of two blocks or more first reach the output's next vector boundary, so that
            // no store of the main loop splits a cache line (a buffer from malloc is 16 bytes
            // past one, numpy's too): split stores cost their rows up to a quarter of their time
            // from the last-level cache. Rows of packed bits reach the next line boundary,
            // where the bits start.
            if n.max >= 2 * e {
                self.unaligned_end = true;
                let aligned = self.label();
                self.gate(r9, n, 2 * e, self.w, aligned)?;
                let to = if self.packed { LINE } else { VBYTES };
                let max = to / self.w as u64 - 1;
                self.line_head(to, self.wlog(), |s| I::short(s, max))?;
                self.bind(aligned);
            }
            // Blocks test for uniform cond bytes only where that lets them skip reading an
            // input streamed from memory; with inputs in L1 the test is pure overhead.
            let uniform = I::uniform(self.w)
                && self.pred.is_none()
                && !self.packed
                && (self.streamed(THEN) || self.streamed(ELSE));
            let (top, next) = (self.label(), self.label());
            let (all_then, all_else) = (self.label(), self.label());
            self.bits_start()?;
            self.a.lea(r10, ptr(r9 - e as i32))?;
            self.bind(top);
            if self.prefetchw {
                self.claim_ahead(e)?;
            }
            self.bits_block::<I>(UNROLL, false, uniform.then_some((all_then, all_else)))?;
            self.bind(next);
            self.a.add(r8, e as i32)?;
            self.bits_next(e)?;
            self.a.cmp(r8, r10)?;
            self.jbe(top)?;
            if uniform {
                self.jmp(tail)?;
                for (l, op) in [(all_then, THEN), (all_else, ELSE)] {
                    self.bind(l);
                    self.take(op)?;
                    self.jmp(next)?;
                }
            }
        }
        self.bind(tail);
        I::tail(self, n, done)?;
        self.bind(done);
        Ok(())
    }

    /// `prefetchw` of the output's lines [`CLAIM_AHEAD`] bytes past those of the block of `e`
    /// elements from `r8` (width 16, addressed through `r11`, which the block sets, claims none).
    fn claim_ahead(&mut self, e: u64) -> R {
        let w = self.w as i64;
        if w == 16 {
            return Ok(());
        }
        for j in 0..e as i64 * w / LINE as i64 {
            let m = self.elem(OUT, (CLAIM_AHEAD + j * LINE as i64) / w);
            self.a.prefetchw(m)?;
        }
        Ok(())
    }

    /// The non-temporal main loop over [`PARTS`] parts of the row at once: from `r8` (at a
    /// line boundary of the output), `r11` = a part, the rest of the row split in `PARTS` and
    /// rounded down to whole blocks (rows too short for parts of [`PART_MIN`] bytes skip the
    /// loop); each trip stores a block of every part. Leaves `r8` after the last part, where
    /// the one-part loop goes on.
    fn parts_loop<I: VecIsa>(&mut self) -> R {
        let e = self.lanes() * UNROLL as u64;
        let (top, skip) = (self.label(), self.label());
        self.a.mov(r11, r9)?;
        self.a.sub(r11, r8)?;
        self.a.shr(r11, PARTS.trailing_zeros())?;
        self.a.and(r11, -(e as i32))?;
        self.a.cmp(r11, (PART_MIN / self.w as u64) as i32)?;
        self.jb(skip)?;
        // r10: the end of the first part; rax: the distance from the last part to it.
        self.a.lea(r10, ptr(r8 + r11))?;
        self.a.imul_3(rax, r11, PARTS as i32 - 1)?;
        self.bind(top);
        for p in 0..PARTS {
            if p > 0 {
                self.a.add(r8, r11)?;
            }
            I::block(self, UNROLL, true, None)?;
        }
        self.a.sub(r8, rax)?;
        self.a.add(r8, e as i32)?;
        self.a.cmp(r8, r10)?;
        self.jb(top)?;
        self.a.add(r8, rax)?;
        self.bind(skip);
        Ok(())
    }

    /// Packed rows: `rax` = the bits of the main loop's first block.
    fn bits_start(&mut self) -> R {
        if self.packed {
            self.a.lea(rax, ptr(rsp + self.bits_at))?;
        }
        Ok(())
    }

    /// A main-loop block, its masks from the packed bits in a packed row.
    fn bits_block<I: VecIsa>(&mut self, vecs: usize, nt: bool, u: Option<(Label, Label)>) -> R {
        self.from_bits = self.packed;
        let r = I::block(self, vecs, nt, u);
        self.from_bits = false;
        r
    }

    /// Packed rows: `rax` past the bits of a block of `e` elements.
    fn bits_next(&mut self, e: u64) -> R {
        if self.packed {
            self.a.add(rax, (e / 8) as i32)?;
        }
        Ok(())
    }

    /// One main-loop block's output taken from `op` alone (a copy, or its splat).
    fn take(&mut self, op: usize) -> R {
        if self.w == 16 {
            self.a.mov(r11, r8)?;
            self.a.shl(r11, 4)?;
        }
        for (v, &y) in YMM.iter().enumerate().take(UNROLL) {
            let off = v as i64 * self.lanes() as i64;
            let r = if self.row_bcast(op) {
                YMM[splat_reg(op)]
            } else {
                self.a.vmovdqu(y, self.elem(op, off))?;
                y
            };
            let o = self.elem(OUT, off);
            self.a.vmovdqu(o, r)?;
        }
        Ok(())
    }

    /// Copies `r10` bytes from `P[op]` to the output row, or fills them with `op`'s splat.
    pub(super) fn vector_copy<I: VecIsa>(&mut self, op: usize, fill: bool, done: Label) -> R {
        if fill && !self.invariant[op - THEN] {
            self.splat(op)?;
        }
        let src = (!fill).then_some(P[op]);
        let sr = splat_reg(op);
        let b = self.n.times(self.w as u64);
        self.a.xor(r8d, r8d)?;
        if self.nt && b.max >= NT_COPY_MIN {
            let normal = self.label();
            // A fill keeps its pattern only from element boundaries.
            let align = if fill { self.w } else { 1 };
            self.gate(r10, b, NT_COPY_MIN, align, normal)?;
            self.line_head(LINE, 0, |s| I::copy_short(s, src, sr, LINE - 1))?;
            self.a.lea(r11, ptr(r10 - COPY_BLOCK as i32))?;
            let top = self.label();
            self.bind(top);
            self.moves(src, sr, UNROLL, true)?;
            self.a.add(r8, COPY_BLOCK as i32)?;
            self.a.cmp(r8, r11)?;
            self.jbe(top)?;
            let rest = self.label();
            self.a.lea(r11, ptr(r10 - LINE as i32))?;
            self.a.cmp(r8, r11)?;
            self.ja(rest)?;
            self.moves(src, sr, UNROLL / 2, true)?;
            self.a.add(r8, LINE as i32)?;
            self.bind(rest);
            self.a.mov(rax, r10)?;
            self.a.sub(rax, r8)?;
            self.je(done)?;
            I::copy_short(self, src, sr, LINE - 1)?;
            self.jmp(done)?;
            self.bind(normal);
        }
        let tail = self.label();
        if b.max >= COPY_BLOCK {
            if b.min < COPY_BLOCK {
                self.a.cmp(r10, COPY_BLOCK as i32)?;
                self.jb(tail)?;
            }
            // As for vector rows: long rows first reach the next vector boundary.
            if b.max >= 2 * COPY_BLOCK {
                self.unaligned_end = true;
                let aligned = self.label();
                let align = if src.is_none() { self.w } else { 1 };
                self.gate(r10, b, 2 * COPY_BLOCK, align, aligned)?;
                self.line_head(VBYTES, 0, |s| I::copy_short(s, src, sr, VBYTES - 1))?;
                self.bind(aligned);
            }
            self.a.lea(r11, ptr(r10 - COPY_BLOCK as i32))?;
            let top = self.label();
            self.bind(top);
            self.moves(src, sr, UNROLL, false)?;
            self.a.add(r8, COPY_BLOCK as i32)?;
            self.a.cmp(r8, r11)?;
            self.jbe(top)?;
        }
        self.bind(tail);
        I::copy_tail(self, src, sr, b, done)
    }

    /// `count` vectors from `src + r8` (or the splat register `sr`) to `rcx + r8`.
    pub(super) fn moves(
        &mut self,
        src: Option<AsmRegister64>,
        sr: usize,
        count: usize,
        nt: bool,
    ) -> R {
        let at = |j: usize| (VBYTES as usize * j) as i32;
        if let Some(s) = src {
            for (j, &y) in YMM.iter().enumerate().take(count) {
                self.a.vmovdqu(y, ptr(s + r8 + at(j)))?;
            }
        }
        for (j, &y) in YMM.iter().enumerate().take(count) {
            let v = if src.is_some() { y } else { YMM[sr] };
            let o = ptr(rcx + r8 + at(j));
            if nt {
                self.a.vmovntdq(o, v)?;
            } else {
                self.a.vmovdqu(o, v)?;
            }
        }
        Ok(())
    }
}

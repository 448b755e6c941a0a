//! Predicates as AVX2 lane masks (see `pred.rs`): each vector of output gets a mask of its own
//! lanes, all ones or all zeros, from compares in registers.
//!
//! A kernel compares in lanes of `L` bytes ([`Emitter::lanes_l`]): the compared dtype's width
//! (for f16 and bf16 their own 2 bytes as integer keys where the selected elements are at most
//! 2 bytes wide, else f32's), or the selected width when that is larger, up to 8. Narrower
//! operands are widened on their load, which reads exactly their bytes (`vpmovsx*` /
//! `vpmovzx*`, `vcvtps2pd`, `vcvtph2ps`, `vpmovzxwd` and a shift for bf16); a mask for elements
//! of 16 bytes is a qword mask with each qword doubled (`vpermq`). Where the compared width is
//! the larger, a vector of output takes `L / w` compares, packed (`vpackssdw` halves qword and
//! dword masks, `vpacksswb` word masks; ymm packs interleave the 128-bit lanes, which one
//! `vpermq`, `vpermd` or `vpermq` + `vpshufb` puts back in order).
//!
//! Compares: floats `vcmpps` / `vcmppd` with `EQ_OQ`, `LT_OQ`, `LE_OQ` (set where the predicate
//! holds); integers `vpcmpeq*` (==), `vpcmpgt*` with the operands swapped (<, set where it
//! holds) or not (<=, set where it does not), unsigned ones at their own width with their sign
//! bits flipped first; bool operands become "is zero" masks, compared with `vpxor` / `vpandn`;
//! isnan `vcmpps` `UNORD_Q` of a value with itself; isinf / isfinite the magnitude (`vandps`)
//! `EQ_OQ` / `LT_OQ` infinity. Halves in 16-bit lanes compare keys (`vpsignw` of the
//! magnitude by the value) with `vpcmpeqw` / `vpcmpgtw`, and clear (or set) the lanes where a
//! magnitude is above infinity's bits (NaN): ~25% fewer instructions per element than the
//! widening, so a 1M-element bf16 ReLU on AVX2 ran as fast as on AVX-512 (was 1.5x its time).
//! Integer tests are constant: the zero register as mask.
//!
//! Registers: ymm15 zero (the ISA's), ymm12 the lanes' sign bits (unsigned compares) or the
//! magnitude mask (isinf / isfinite), ymm11 lhs's splat, ymm10 rhs's splat (or infinity), ymm9
//! the permute of masks narrowed 4:1 or 8:1. The mask of vector `v` of a block is built in
//! ymm[2v] with temporaries from ymm0-ymm8 (the blend then uses ymm[2v + 1], as for masks);
//! one element (row copies, strided rows, rows shorter than 16 bytes) is compared in xmm0 and
//! xmm1 (halves: xmm2 and xmm3 too) with every lane equal, and `vptest` sets ZF where it is
//! false (or true). Halves as keys use ymm12 (0x7fff) and ymm9 (infinity's bits) as constants.

use iced_x86::code_asm::*;

use super::avx2::Avx2;
use super::emitter::{EmitError, Emitter, R, bug};
use super::pred::{Num, POp, Pol};
use super::regs::Cc;
use super::regs::{XMM, YMM};
use crate::plan::{COND, RHS, RowShape};

const ZERO: usize = 15;
const SIGN: usize = 12;
const ABS: usize = 12;
const LHS: usize = 11;
const RSPLAT: usize = 10;
const INF: usize = 10;
const PERM: usize = 9;
/// Halves compared as keys: 0x7fff and infinity's bits in every word (no flips, no f32
/// magnitudes, and at most two compares per vector, so neither `SIGN` / `ABS` nor `PERM` is
/// needed).
const MAG16: usize = 12;
const INF16: usize = 9;

/// A compare operand: a register, or memory read as it is.
#[derive(Clone, Copy)]
enum Opnd {
    Reg(usize),
    Mem(AsmMemoryOperand),
}

/// A step from an operand's bytes in memory to its compare lanes.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Sign or zero extension of integers.
    Ext {
        from: usize,
        to: usize,
        signed: bool,
    },
    /// f16 to f32.
    Ph2Ps,
    /// f32 to f64.
    Ps2Pd,
    /// bf16 to dwords, then [`Step::Shl16`]: the f32 of the same value.
    ZxWd,
    Shl16,
    /// Unsigned lanes to signed ones of the same order.
    Flip,
    /// bool: lanes set where the operand is zero.
    IsZero,
}

/// `$m dst, src`, a widening instruction: dst of `$os` bytes, src xmm or memory.
macro_rules! widen {
    ($e:ident, $m:ident, $os:expr, $d:expr, $src:expr) => {
        match ($os, $src) {
            (16, Opnd::Reg(x)) => $e.a.$m(XMM[$d], XMM[x])?,
            (16, Opnd::Mem(m)) => $e.a.$m(XMM[$d], m)?,
            (_, Opnd::Reg(x)) => $e.a.$m(YMM[$d], XMM[x])?,
            (_, Opnd::Mem(m)) => $e.a.$m(YMM[$d], m)?,
        }
    };
}

/// `$m dst, a, b` on `$bytes`-byte registers (b a register or memory; an immediate last).
macro_rules! op3 {
    ($e:ident, $m:ident, $bytes:expr, $d:expr, $a:expr, $b:expr $(, $imm:expr)?) => {
        match ($bytes, $b) {
            (16, Opnd::Reg(x)) => $e.a.$m(XMM[$d], XMM[$a], XMM[x] $(, $imm)?)?,
            (16, Opnd::Mem(m)) => $e.a.$m(XMM[$d], XMM[$a], m $(, $imm)?)?,
            (_, Opnd::Reg(x)) => $e.a.$m(YMM[$d], YMM[$a], YMM[x] $(, $imm)?)?,
            (_, Opnd::Mem(m)) => $e.a.$m(YMM[$d], YMM[$a], m $(, $imm)?)?,
        }
    };
}

impl Emitter<'_> {
    /// The lane width of the kernel's compares: the compared width (for f16 and bf16 2 bytes as
    /// keys, or f32's: see [`Self::half_keys`]), or the selected width when larger, up to 8.
    pub(super) fn lanes_l(&self) -> usize {
        let base = match self.pred {
            None => 1,
            Some(_) if self.half_keys() => 2,
            Some(p) => p.base(),
        };
        base.max(self.w.min(8))
    }

    /// Whether halves (f16, bf16) compare in their own 16-bit lanes as integer keys (see
    /// [`Self::lanes_cmp_half`]): when the selected elements are at most 2 bytes wide, so that
    /// no mask needs widening. Wider outputs compare halves widened to f32.
    fn half_keys(&self) -> bool {
        self.pred.is_some_and(|p| p.half_inf().is_some()) && self.w <= 2
    }

    /// The steps from an operand in memory to compare lanes of `l` bytes.
    fn lane_steps(&self, l: usize) -> Result<Vec<Step>, EmitError> {
        let p = self.p()?;
        let mut v = Vec::new();
        match p.num {
            Num::Bool => {
                if l > 1 {
                    v.push(Step::Ext {
                        from: 1,
                        to: l,
                        signed: false,
                    });
                }
                v.push(Step::IsZero);
            }
            Num::Int { signed } => {
                if p.cw < l {
                    v.push(Step::Ext {
                        from: p.cw,
                        to: l,
                        signed,
                    });
                } else if p.flips() {
                    v.push(Step::Flip);
                }
            }
            Num::F32 => {
                if l == 8 {
                    v.push(Step::Ps2Pd);
                }
            }
            Num::F64 => {}
            Num::F16 | Num::BF16 if l == 2 => {}
            Num::F16 => {
                v.push(Step::Ph2Ps);
                if l == 8 {
                    v.push(Step::Ps2Pd);
                }
            }
            Num::BF16 => {
                v.extend([Step::ZxWd, Step::Shl16]);
                if l == 8 {
                    v.push(Step::Ps2Pd);
                }
            }
        }
        Ok(v)
    }

    /// Loads `n` bytes at `m` into register `d` of `full` bytes: a broadcast (exactly `n`
    /// bytes read) or, for 16 and 32 bytes, a move.
    fn raw_load(&mut self, d: usize, n: usize, full: usize, m: AsmMemoryOperand) -> R {
        let y = full > 16;
        match n {
            1 if y => self.a.vpbroadcastb(YMM[d], m)?,
            1 => self.a.vpbroadcastb(XMM[d], m)?,
            2 if y => self.a.vpbroadcastw(YMM[d], m)?,
            2 => self.a.vpbroadcastw(XMM[d], m)?,
            4 if y => self.a.vpbroadcastd(YMM[d], m)?,
            4 => self.a.vpbroadcastd(XMM[d], m)?,
            8 if y => self.a.vpbroadcastq(YMM[d], m)?,
            8 => self.a.vpbroadcastq(XMM[d], m)?,
            16 => self.a.vmovdqu(XMM[d], m)?,
            32 => self.a.vmovdqu(YMM[d], m)?,
            _ => return Err(bug("raw operand load of an odd size")),
        }
        Ok(())
    }

    fn ext(&mut self, os: usize, d: usize, src: Opnd, from: usize, to: usize, signed: bool) -> R {
        match (from, to, signed) {
            (1, 2, true) => widen!(self, vpmovsxbw, os, d, src),
            (1, 2, false) => widen!(self, vpmovzxbw, os, d, src),
            (1, 4, true) => widen!(self, vpmovsxbd, os, d, src),
            (1, 4, false) => widen!(self, vpmovzxbd, os, d, src),
            (1, 8, true) => widen!(self, vpmovsxbq, os, d, src),
            (1, 8, false) => widen!(self, vpmovzxbq, os, d, src),
            (2, 4, true) => widen!(self, vpmovsxwd, os, d, src),
            (2, 4, false) => widen!(self, vpmovzxwd, os, d, src),
            (2, 8, true) => widen!(self, vpmovsxwq, os, d, src),
            (2, 8, false) => widen!(self, vpmovzxwq, os, d, src),
            (4, 8, true) => widen!(self, vpmovsxdq, os, d, src),
            (4, 8, false) => widen!(self, vpmovzxdq, os, d, src),
            _ => return Err(bug("integer extension of odd widths")),
        }
        Ok(())
    }

    /// `d = a == b` in lanes of `l` bytes.
    fn pcmpeq(&mut self, bytes: usize, l: usize, d: usize, a: usize, b: Opnd) -> R {
        match l {
            1 => op3!(self, vpcmpeqb, bytes, d, a, b),
            2 => op3!(self, vpcmpeqw, bytes, d, a, b),
            4 => op3!(self, vpcmpeqd, bytes, d, a, b),
            _ => op3!(self, vpcmpeqq, bytes, d, a, b),
        }
        Ok(())
    }

    /// `d = a > b` (signed) in lanes of `l` bytes.
    fn pcmpgt(&mut self, bytes: usize, l: usize, d: usize, a: usize, b: Opnd) -> R {
        match l {
            1 => op3!(self, vpcmpgtb, bytes, d, a, b),
            2 => op3!(self, vpcmpgtw, bytes, d, a, b),
            4 => op3!(self, vpcmpgtd, bytes, d, a, b),
            _ => op3!(self, vpcmpgtq, bytes, d, a, b),
        }
        Ok(())
    }

    fn step(&mut self, st: Step, os: usize, d: usize, src: Opnd, l: usize) -> R {
        match st {
            Step::Ext { from, to, signed } => self.ext(os, d, src, from, to, signed)?,
            Step::Ph2Ps => widen!(self, vcvtph2ps, os, d, src),
            Step::Ps2Pd => widen!(self, vcvtps2pd, os, d, src),
            Step::ZxWd => widen!(self, vpmovzxwd, os, d, src),
            Step::Shl16 if os == 16 => self.a.vpslld(XMM[d], XMM[d], 16)?,
            Step::Shl16 => self.a.vpslld(YMM[d], YMM[d], 16)?,
            Step::Flip => op3!(self, vpxor, os, d, SIGN, src),
            Step::IsZero => self.pcmpeq(os, l, d, ZERO, src)?,
        }
        Ok(())
    }

    /// Operand bytes the first step reads from memory for an output of `os` bytes.
    fn first_read(st: Step, os: usize) -> usize {
        match st {
            Step::Ext { from, to, .. } => os * from / to,
            Step::Ph2Ps | Step::Ps2Pd | Step::ZxWd => os / 2,
            Step::Flip | Step::IsZero => os,
            Step::Shl16 => usize::MAX,
        }
    }

    /// Operand elements at `m`, `n` of them (`cb / L`, or fewer, broadcast), in compare lanes
    /// in a vector of `cb` bytes: converted into register `d`, or memory as it is when it needs
    /// no conversion and `need_reg` is false. Reads exactly the `n` elements' bytes.
    fn lanes_prep(
        &mut self,
        m: AsmMemoryOperand,
        d: usize,
        cb: usize,
        n: usize,
        need_reg: bool,
    ) -> Result<Opnd, EmitError> {
        let p = self.p()?;
        let l = self.lanes_l();
        let steps = self.lane_steps(l)?;
        let raw = n * p.cw;
        if steps.is_empty() {
            if raw == cb && !need_reg {
                return Ok(Opnd::Mem(m));
            }
            self.raw_load(d, raw, cb, m)?;
            return Ok(Opnd::Reg(d));
        }
        let to_pd = matches!(steps.last(), Some(Step::Ps2Pd));
        let out = |i: usize| {
            if to_pd && i + 1 < steps.len() { 16 } else { cb }
        };
        let mut src = if Self::first_read(steps[0], out(0)) == raw {
            Opnd::Mem(m)
        } else {
            let full = match steps[0] {
                Step::Flip | Step::IsZero => out(0),
                _ => 16,
            };
            self.raw_load(d, raw, full, m)?;
            Opnd::Reg(d)
        };
        for (i, &st) in steps.iter().enumerate() {
            self.step(st, out(i), d, src, l)?;
            src = Opnd::Reg(d);
        }
        Ok(Opnd::Reg(d))
    }

    /// Whether the compare needs lhs and rhs in registers (else memory will do).
    fn lanes_need_reg(&self) -> Result<(bool, bool), EmitError> {
        let p = self.p()?;
        if self.half_keys() {
            return Ok((false, false));
        }
        Ok(match p.op {
            POp::Lt if !p.float() && p.num != Num::Bool => (false, true),
            POp::IsInf | POp::IsFinite => (false, false),
            POp::Eq | POp::Lt | POp::Le | POp::IsNan if p.num == Num::Bool => (true, true),
            POp::Eq | POp::Lt | POp::Le | POp::IsNan => (true, false),
        })
    }

    /// The predicate on prepared operands into `d` (`cb` bytes); returns the mask's polarity.
    /// `spare`: two temporaries (halves as keys).
    fn lanes_cmp(
        &mut self,
        d: usize,
        cb: usize,
        a: Opnd,
        b: Opnd,
        spare: [usize; 2],
    ) -> Result<Pol, EmitError> {
        let p = self.p()?;
        if self.half_keys() {
            return self.lanes_cmp_half(d, cb, a, b, spare);
        }
        let l = self.lanes_l();
        let reg = |o: Opnd| match o {
            Opnd::Reg(r) => Ok(r),
            Opnd::Mem(_) => Err(bug("compare operand left in memory")),
        };
        Ok(match p.op {
            POp::Eq | POp::Lt | POp::Le if p.float() => {
                let imm = match p.op {
                    POp::Eq => 0x00, // EQ_OQ
                    POp::Lt => 0x11, // LT_OQ
                    POp::Le => 0x12, // LE_OQ
                    POp::IsNan | POp::IsInf | POp::IsFinite => {
                        return Err(bug("a test in a float comparison"));
                    }
                };
                let a = reg(a)?;
                if l == 4 {
                    op3!(self, vcmpps, cb, d, a, b, imm);
                } else {
                    op3!(self, vcmppd, cb, d, a, b, imm);
                }
                Pol::Then
            }
            POp::Eq | POp::Lt | POp::Le if p.num == Num::Bool => {
                // a and b are "is zero" masks: za, zb.
                let (za, zb) = (reg(a)?, reg(b)?);
                match p.op {
                    POp::Eq => {
                        // Set where exactly one is zero: not equal.
                        op3!(self, vpxor, cb, d, za, Opnd::Reg(zb));
                        Pol::Else
                    }
                    POp::Lt => {
                        // !a && b: za & !zb.
                        op3!(self, vpandn, cb, d, zb, Opnd::Reg(za));
                        Pol::Then
                    }
                    POp::IsNan | POp::IsInf | POp::IsFinite => {
                        return Err(bug("a test in a bool comparison"));
                    }
                    POp::Le => {
                        // Not (!a || b): !za & zb.
                        op3!(self, vpandn, cb, d, za, Opnd::Reg(zb));
                        Pol::Else
                    }
                }
            }
            POp::Eq => {
                self.pcmpeq(cb, l, d, reg(a)?, b)?;
                Pol::Then
            }
            POp::Lt => {
                // a < b: b > a.
                self.pcmpgt(cb, l, d, reg(b)?, a)?;
                Pol::Then
            }
            POp::Le => {
                // Not a <= b: a > b.
                self.pcmpgt(cb, l, d, reg(a)?, b)?;
                Pol::Else
            }
            POp::IsNan => {
                let a = reg(a)?;
                if l == 4 {
                    op3!(self, vcmpps, cb, d, a, Opnd::Reg(a), 0x03); // UNORD_Q
                } else {
                    op3!(self, vcmppd, cb, d, a, Opnd::Reg(a), 0x03);
                }
                Pol::Then
            }
            POp::IsInf | POp::IsFinite => {
                let imm = if p.op == POp::IsInf { 0x00 } else { 0x11 }; // EQ_OQ, LT_OQ
                if l == 4 {
                    op3!(self, vandps, cb, d, ABS, a);
                    op3!(self, vcmpps, cb, d, d, Opnd::Reg(INF), imm);
                } else {
                    op3!(self, vandpd, cb, d, ABS, a);
                    op3!(self, vcmppd, cb, d, d, Opnd::Reg(INF), imm);
                }
                Pol::Then
            }
        })
    }

    /// [`Self::lanes_cmp`] of halves in 16-bit lanes: a test compares the magnitude's bits
    /// (`x & 0x7fff`) with infinity's; a comparison compares keys, `vpsignw` of the magnitude
    /// by the value (negated where the sign is set, 0 for ±0: an order-preserving map of every
    /// non-NaN value, within ±infinity's bits), with the lanes where an operand is NaN (its
    /// magnitude above infinity's bits) cleared, or set in else's polarity. Splats arrive as
    /// keys already, a NaN's outside that range (see [`Self::lanes_splat`]). `a` in `d` and
    /// `b` in `t` when in registers (or memory, or the splats); `spare` two more temporaries.
    fn lanes_cmp_half(
        &mut self,
        d: usize,
        cb: usize,
        a: Opnd,
        b: Opnd,
        spare: [usize; 2],
    ) -> Result<Pol, EmitError> {
        let p = self.p()?;
        let [x, y] = spare;
        if !matches!(p.op, POp::Eq | POp::Lt | POp::Le) {
            op3!(self, vpand, cb, d, MAG16, a);
            match p.op {
                POp::IsNan => self.pcmpgt(cb, 2, d, d, Opnd::Reg(INF16))?,
                POp::IsInf => self.pcmpeq(cb, 2, d, d, Opnd::Reg(INF16))?,
                POp::IsFinite => self.pcmpgt(cb, 2, d, INF16, Opnd::Reg(d))?,
                POp::Eq | POp::Lt | POp::Le => return Err(bug("a comparison in a half test")),
            }
            return Ok(Pol::Then);
        }
        let splat = |o: Opnd| matches!(o, Opnd::Reg(r) if r == LHS || r == RSPLAT);
        // The keys' registers, and whether `x` holds the NaN lanes.
        let (ka, kb, nan) = match (splat(a), splat(b)) {
            (false, false) => {
                op3!(self, vpand, cb, x, MAG16, a);
                op3!(self, vpand, cb, y, MAG16, b);
                op3!(self, vpsignw, cb, d, x, a);
                op3!(self, vpmaxuw, cb, x, x, Opnd::Reg(y));
                op3!(self, vpsignw, cb, y, y, b);
                self.pcmpgt(cb, 2, x, x, Opnd::Reg(INF16))?;
                (d, y, true)
            }
            (false, true) => {
                op3!(self, vpand, cb, x, MAG16, a);
                op3!(self, vpsignw, cb, d, x, a);
                self.pcmpgt(cb, 2, x, x, Opnd::Reg(INF16))?;
                (d, RSPLAT, true)
            }
            (true, false) => {
                op3!(self, vpand, cb, x, MAG16, b);
                op3!(self, vpsignw, cb, y, x, b);
                self.pcmpgt(cb, 2, x, x, Opnd::Reg(INF16))?;
                (LHS, y, true)
            }
            (true, true) => (LHS, RSPLAT, false),
        };
        let pol = match p.op {
            POp::Eq => {
                self.pcmpeq(cb, 2, d, ka, Opnd::Reg(kb))?;
                Pol::Then
            }
            POp::Lt => {
                self.pcmpgt(cb, 2, d, kb, Opnd::Reg(ka))?;
                Pol::Then
            }
            POp::IsNan | POp::IsInf | POp::IsFinite => {
                return Err(bug("a test in a half comparison"));
            }
            POp::Le => {
                // Not a <= b: a > b.
                self.pcmpgt(cb, 2, d, ka, Opnd::Reg(kb))?;
                Pol::Else
            }
        };
        if nan {
            match pol {
                Pol::Then => op3!(self, vpandn, cb, d, x, Opnd::Reg(d)),
                Pol::Else => op3!(self, vpor, cb, d, d, Opnd::Reg(x)),
            }
        }
        Ok(pol)
    }

    /// One compare of `n` elements from element `r8 + e0` into `d` (`cb` bytes; `t` and
    /// `spare` are temporaries).
    fn lanes_leaf(
        &mut self,
        d: usize,
        [t, spare @ ..]: [usize; 3],
        cb: usize,
        n: usize,
        e0: i64,
    ) -> Result<Pol, EmitError> {
        let p = self.p()?;
        let (need_a, need_b) = self.lanes_need_reg()?;
        let a = if p.bcast[0] {
            Opnd::Reg(LHS)
        } else {
            let m = self.pelem(COND, e0)?;
            self.lanes_prep(m, d, cb, n, need_a)?
        };
        let b = if !p.binary {
            Opnd::Reg(d)
        } else if p.bcast[1] {
            Opnd::Reg(RSPLAT)
        } else {
            let m = self.pelem(RHS, e0)?;
            self.lanes_prep(m, t, cb, n, need_b)?
        };
        self.lanes_cmp(d, cb, a, b, spare)
    }

    /// `2^k` compares of `cb` bytes from compare `first` on, packed into one register (the
    /// first taken from `pool`, whose last register is taken first).
    fn lanes_tree(
        &mut self,
        k: u32,
        first: usize,
        cb: usize,
        off: i64,
        pool: &mut Vec<usize>,
    ) -> Result<(usize, Pol), EmitError> {
        let l = self.lanes_l();
        let per = cb / l;
        if k == 0 {
            let short = || bug("out of mask registers");
            let d = pool.pop().ok_or_else(short)?;
            // The last three left: the first one taken next, then the spares.
            let t: [usize; 3] = match pool[..] {
                [.., s2, s1, t] => [t, s1, s2],
                _ => return Err(short()),
            };
            let pol = self.lanes_leaf(d, t, cb, per, off + (first * per) as i64)?;
            return Ok((d, pol));
        }
        let (a, pol) = self.lanes_tree(k - 1, first, cb, off, pool)?;
        let (b, _) = self.lanes_tree(k - 1, first + (1 << (k - 1)), cb, off, pool)?;
        // Lanes of the packed masks: each halves them.
        if l >> (k - 1) >= 4 {
            op3!(self, vpackssdw, cb, a, a, Opnd::Reg(b));
        } else {
            op3!(self, vpacksswb, cb, a, a, Opnd::Reg(b));
        }
        pool.push(b);
        Ok((a, pol))
    }

    /// The lane mask of vector `v` of a block (`vb` bytes of output from element `r8 + off`),
    /// and its polarity. In ymm[2v] (the zero register for a constant predicate); ymm[2v + 1]
    /// is left alone.
    pub(super) fn lanes_mask(
        &mut self,
        vb: usize,
        v: usize,
        off: i64,
    ) -> Result<(usize, Pol), EmitError> {
        let p = self.p()?;
        if let Some(c) = p.constant() {
            // No lane set: then where the test holds everywhere, else where it never does.
            return Ok((ZERO, if c { Pol::Else } else { Pol::Then }));
        }
        let (l, w) = (self.lanes_l(), self.w);
        let m = 2 * v;
        let mut pool: Vec<usize> = (0..=8).filter(|&r| r != m && r != m + 1).collect();
        pool.push(m);
        let t = [pool[0], pool[1], pool[2]];
        if l == w {
            let pol = self.lanes_leaf(m, t, vb, vb / l, off)?;
            return Ok((m, pol));
        }
        if l > w {
            let r = l / w;
            let (x, pol) = self.lanes_tree(r.trailing_zeros(), 0, vb, off, &mut pool)?;
            if x != m {
                return Err(bug("packed mask in the wrong register"));
            }
            if vb == 32 {
                // Put the packs' 128-bit lanes back in element order.
                let y = YMM[m];
                match r {
                    2 => self.a.vpermq(y, y, 0xd8)?,
                    4 => self.a.vpermd(y, YMM[PERM], y)?,
                    _ => {
                        self.a.vpermq(y, y, 0xd8)?;
                        self.a.vpshufb(y, y, YMM[PERM])?;
                    }
                }
            }
            return Ok((m, pol));
        }
        // Elements of 16 bytes: qword masks of one or two elements, each doubled.
        let pol = self.lanes_leaf(m, t, 16, vb / 16, off)?;
        if vb == 32 {
            self.a.vpermq(YMM[m], YMM[m], 0x50)?;
        } else {
            self.a.vpunpcklqdq(XMM[m], XMM[m], XMM[m])?;
        }
        Ok((m, pol))
    }

    /// The predicate on one element (see [`super::isa::VecIsa::pred_scalar`]).
    pub(super) fn lanes_scalar(
        &mut self,
        lhs: AsmMemoryOperand,
        rhs: AsmMemoryOperand,
    ) -> Result<Cc, EmitError> {
        let p = self.p()?;
        if let Some(c) = p.constant() {
            self.a.vptest(XMM[ZERO], XMM[ZERO])?;
            return Ok(if c { Cc::NZ } else { Cc::Z });
        }
        // Every lane holds the element (broadcast loads): the mask is all ones or all zeros.
        let a = self.lanes_prep(lhs, 0, 16, 1, true)?;
        let b = if p.binary {
            self.lanes_prep(rhs, 1, 16, 1, true)?
        } else {
            a
        };
        let pol = self.lanes_cmp(0, 16, a, b, [2, 3])?;
        self.a.vptest(XMM[0], XMM[0])?;
        Ok(pol.take_else())
    }

    /// Splats lhs (`COND`, ymm11) or rhs (`RHS`, ymm10) from its row start, in compare lanes.
    pub(super) fn lanes_splat(&mut self, op: usize) -> R {
        let (reg, base) = if op == COND {
            (LHS, rdi)
        } else {
            (RSPLAT, r12)
        };
        self.lanes_prep(ptr(base), reg, 32, 1, true)?;
        if self.half_keys() {
            // The key (see `lanes_cmp_half`); a NaN's is 0x7fff for lhs, 0x8000 for rhs: no
            // key equals either, none is above the first or below the second (nor is 0x7fff
            // below 0x8000), so every comparison with a NaN comes out false.
            let (r, t, u) = (YMM[reg], YMM[0], YMM[1]);
            self.a.vpand(t, YMM[MAG16], r)?;
            self.a.vpsignw(r, t, r)?;
            self.a.vpcmpgtw(t, t, YMM[INF16])?;
            let nan_key = if op == COND {
                YMM[MAG16]
            } else {
                self.a.vpcmpeqw(u, u, u)?;
                self.a.vpsllw(u, u, 15)?;
                u
            };
            self.a.vpblendvb(r, r, nan_key, t)?;
        }
        Ok(())
    }

    /// A constant of 32 bytes: `x` (its low `l` bytes) in every lane.
    fn lanes_const(&mut self, reg: usize, l: usize, x: u64) -> R {
        let mut c = [0u8; 32];
        for lane in c.chunks_mut(l) {
            lane.copy_from_slice(&x.to_le_bytes()[..l]);
        }
        let m = self.constant(&c);
        Ok(self.a.vmovdqu(YMM[reg], m)?)
    }

    /// The predicate's constants and the operands splatted once per kernel.
    pub(super) fn lanes_invariants(&mut self) -> R {
        let p = self.p()?;
        let l = self.lanes_l();
        if self.lane_steps(l)?.iter().any(|s| matches!(s, Step::Flip)) {
            self.lanes_const(SIGN, l, 1 << (8 * l - 1))?;
        }
        if self.half_keys() {
            let inf = p.half_inf().ok_or_else(|| bug("halves without infinity"))?;
            self.lanes_const(MAG16, 2, 0x7fff)?;
            self.lanes_const(INF16, 2, inf.into())?;
        } else if matches!(p.op, POp::IsInf | POp::IsFinite) && p.float() {
            let (abs, inf) = if l == 4 {
                (0x7fff_ffff, 0x7f80_0000)
            } else {
                (0x7fff_ffff_ffff_ffff, 0x7ff0_0000_0000_0000)
            };
            self.lanes_const(ABS, l, abs)?;
            self.lanes_const(INF, l, inf)?;
        }
        let r = l / self.w;
        if matches!(self.shape, RowShape::Select { .. }) && (r == 4 || r == 8) {
            let mut c = [0u8; 32];
            if r == 4 {
                for (i, &x) in [0u32, 4, 1, 5, 2, 6, 3, 7].iter().enumerate() {
                    c[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes());
                }
            } else {
                // Within each 128-bit lane, words 0 4 1 5 2 6 3 7.
                for half in 0..2 {
                    for (i, &wd) in [0u8, 4, 1, 5, 2, 6, 3, 7].iter().enumerate() {
                        c[16 * half + 2 * i] = 2 * wd;
                        c[16 * half + 2 * i + 1] = 2 * wd + 1;
                    }
                }
            }
            let m = self.constant(&c);
            self.a.vmovdqu(YMM[PERM], m)?;
        }
        self.pred_invariant_splats::<Avx2>()
    }
}

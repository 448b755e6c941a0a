//! Predicates as AVX-512 opmasks (see `pred.rs`): compares straight into opmask registers, one
//! bit per element whatever the element's width, so the selected width never changes the
//! compare: a compare of more elements than a vector of output holds is sliced (`kshiftr`),
//! one of fewer is concatenated with the next (`kshiftl`, `kor`).
//!
//! Compares: floats `vcmpps` / `vcmppd` with the ordered quiet predicates (`EQ_OQ`, `LT_OQ`,
//! `LE_OQ`) or their negations (`NEQ_UQ`, `NLT_UQ`, `NLE_UQ`), so that the bits come in the
//! polarity the blend wants; integers `vpcmp*` / `vpcmpu*` with the predicate immediate;
//! bool operands tested non-zero (`vptestmb`) and combined (`kxor`, `kandn`); isnan, isinf and
//! isfinite classified (`vfpclassps` / `vfpclasspd`). f16 and bf16 stay in 16-bit lanes (see
//! `k_cmp_half`): tests compare the magnitude's bits with infinity's (`vpcmpuw`), comparisons
//! compare signed integer keys (`vpcmpw`) under the opmask of the elements that are not NaN,
//! twice the elements per compare of a widening to f32 and no conversion: on a Zen 4 host a
//! 1M-element bf16 ReLU went from ~1.10x to ~0.91x the copy roofline's time. Integer tests are
//! constant: a cleared (or set) opmask.
//!
//! A block's compares read the operands with plain loads, or a broadcast of exactly their bytes
//! when the elements of a block fill less than an xmm; tails read them with masked loads under
//! the tail's lane mask (k5), sliced per compare. Registers: xmm16/ymm16/zmm16 and 17 the
//! operands, 24 and 25 lhs's and rhs's splats (zmm in a wide kernel); k1-k4 a block's masks,
//! k5-k7 temporaries; in tails k5 (lanes) and k7 (width 16) stay, k6 gets the mask, k1-k4 are
//! temporaries; one element is compared into k1 (k2, k3 temporaries) and `kortest` sets ZF.
//! Halves also use 19 and 20 (magnitudes, keys) and the constants 26-28.

use iced_x86::code_asm::*;

use super::avx512::Avx512;
use super::emitter::{EmitError, Emitter, R, bug};
use super::pred::{Num, POp, Pol};
use super::regs::Cc;
use super::regs::{K, XMM, YMM, ZMM};
use crate::plan::{COND, RHS};

/// All ones (the ISA's).
const ONES: usize = 31;
/// Operand registers.
const A: usize = 16;
const B: usize = 17;
/// Splats of lhs and rhs.
const LHS: usize = 24;
const RSPLAT: usize = 25;
/// Halves: temporaries (magnitudes, keys), and the constants 0x7fff (the magnitude's bits and
/// the key of lhs's NaN splat), +infinity's bits and zero in every word.
const HT: [usize; 2] = [19, 20];
const MAG: usize = 26;
const INF: usize = 27;
const ZERO: usize = 28;

/// A compare operand: a register, or memory read as it is.
#[derive(Clone, Copy)]
enum Opnd {
    Reg(usize),
    Mem(AsmMemoryOperand),
}

/// `$reg` written under opmask `k$i`, merging (or, for an opmask, ANDed with it).
macro_rules! kmerge {
    ($reg:expr, $i:expr) => {
        match $i {
            1 => $reg.k1(),
            2 => $reg.k2(),
            3 => $reg.k3(),
            4 => $reg.k4(),
            5 => $reg.k5(),
            6 => $reg.k6(),
            _ => $reg.k7(),
        }
    };
}

/// `$reg` written under opmask `k$i` with zeroing.
macro_rules! kz {
    ($reg:expr, $i:expr) => {
        kmerge!($reg, $i).z()
    };
}

/// `$m k, a, b, imm` on `$bytes`-byte registers, b a register or memory.
macro_rules! kcmp {
    ($e:ident, $m:ident, $bytes:expr, $k:expr, $a:expr, $b:expr, $imm:expr) => {
        v3!($bytes, r => match $b {
            Opnd::Reg(x) => $e.a.$m(K[$k], r[$a], r[x], $imm)?,
            Opnd::Mem(m) => $e.a.$m(K[$k], r[$a], m, $imm)?,
        })
    };
}

impl Emitter<'_> {
    /// Runs `f` with EVEX encodings preferred: the assembler picks VEX ones otherwise, which
    /// cannot name the registers from 16 on that the predicate code uses.
    fn evex<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, EmitError>,
    ) -> Result<T, EmitError> {
        self.a.set_prefer_vex(false);
        let r = f(self);
        self.a.set_prefer_vex(true);
        r
    }

    /// Loads `n` bytes (1, 2, 4 or 8) at `m` into every lane of xmm `d`.
    fn k_raw(&mut self, d: usize, n: usize, m: AsmMemoryOperand) -> R {
        let x = XMM[d];
        match n {
            1 => self.a.vpbroadcastb(x, m)?,
            2 => self.a.vpbroadcastw(x, m)?,
            4 => self.a.vpbroadcastd(x, m)?,
            8 => self.a.vpbroadcastq(x, m)?,
            _ => return Err(bug("raw operand load of an odd size")),
        }
        Ok(())
    }

    /// Operand elements at `m`, `n` of them, in compare lanes (f32 for f16 and bf16) of a
    /// `vb`-byte vector: with `lanes` (an opmask) a masked load of the elements whose bit is
    /// set; without, a plain load of `vb / L` elements, or a broadcast of exactly `n` when
    /// they fill less. Memory as it is when nothing converts it and `need_reg` is false.
    fn k_prep(
        &mut self,
        m: AsmMemoryOperand,
        d: usize,
        vb: usize,
        n: usize,
        lanes: Option<usize>,
        need_reg: bool,
    ) -> Result<Opnd, EmitError> {
        let p = self.p()?;
        let l = p.cw;
        let full = n * l == vb;
        // Halves compare as integer keys (`k_cmp_half`): always in a register.
        let need_reg = need_reg || p.half_inf().is_some();
        match lanes {
            Some(k) => v3!(vb, r => match l {
                1 => self.a.vmovdqu8(kz!(r[d], k), m)?,
                2 => self.a.vmovdqu16(kz!(r[d], k), m)?,
                4 => self.a.vmovdqu32(kz!(r[d], k), m)?,
                _ => self.a.vmovdqu64(kz!(r[d], k), m)?,
            }),
            None if full && !need_reg => return Ok(Opnd::Mem(m)),
            None if full => v3!(vb, r => self.a.vmovdqu64(r[d], m)?),
            None => self.k_raw(d, n * p.cw, m)?,
        }
        Ok(Opnd::Reg(d))
    }

    /// Inverts opmask `k` (its bits above the compared elements become set: only the blend,
    /// which reads the elements' bits, may use it then).
    fn k_not(&mut self, k: usize) -> R {
        Ok(self.a.knotq(K[k], K[k])?)
    }

    /// The predicate on prepared operands (`vb` bytes) into opmask `k`, in polarity `want` or,
    /// without, in the one the compare gives with no bit set above the compared elements.
    /// `tk`: two temporary opmasks (bool operands).
    fn k_cmp(
        &mut self,
        k: usize,
        vb: usize,
        a: Opnd,
        b: Opnd,
        want: Option<Pol>,
        tk: [usize; 2],
    ) -> Result<Pol, EmitError> {
        let p = self.p()?;
        let l = p.cw;
        let reg = |o: Opnd| match o {
            Opnd::Reg(r) => Ok(r),
            Opnd::Mem(_) => Err(bug("compare operand left in memory")),
        };
        if p.half_inf().is_some() {
            return self.k_cmp_half(k, vb, reg(a)?, reg(b)?, want, tk);
        }
        if let Some(c) = p.constant() {
            // Cleared: then everywhere if the test holds, else everywhere if not.
            self.a.kxorq(K[k], K[k], K[k])?;
            let pol = if c { Pol::Else } else { Pol::Then };
            if want == Some(pol.flip()) {
                self.a.kxnorq(K[k], K[k], K[k])?;
                return Ok(pol.flip());
            }
            return Ok(pol);
        }
        let natural = match p.op {
            POp::Eq | POp::Lt | POp::Le if p.num != Num::Bool => {
                let pol = want.unwrap_or(Pol::Then);
                let i = match p.op {
                    POp::Eq => 0,
                    POp::Lt => 1,
                    POp::Le => 2,
                    POp::IsNan | POp::IsInf | POp::IsFinite => {
                        return Err(bug("a test in a comparison"));
                    }
                };
                let a = reg(a)?;
                if p.float() {
                    // EQ_OQ, LT_OQ, LE_OQ; NEQ_UQ, NLT_UQ, NLE_UQ.
                    let imm =
                        [[0x00, 0x11, 0x12], [0x04, 0x15, 0x16]][(pol == Pol::Else) as usize][i];
                    if l == 4 {
                        kcmp!(self, vcmpps, vb, k, a, b, imm);
                    } else {
                        kcmp!(self, vcmppd, vb, k, a, b, imm);
                    }
                } else {
                    // eq, lt, le; neq, nlt, nle.
                    let imm = [[0, 1, 2], [4, 5, 6]][(pol == Pol::Else) as usize][i];
                    let signed = p.num == (Num::Int { signed: true });
                    match (l, signed) {
                        (1, true) => kcmp!(self, vpcmpb, vb, k, a, b, imm),
                        (1, false) => kcmp!(self, vpcmpub, vb, k, a, b, imm),
                        (2, true) => kcmp!(self, vpcmpw, vb, k, a, b, imm),
                        (2, false) => kcmp!(self, vpcmpuw, vb, k, a, b, imm),
                        (4, true) => kcmp!(self, vpcmpd, vb, k, a, b, imm),
                        (4, false) => kcmp!(self, vpcmpud, vb, k, a, b, imm),
                        (_, true) => kcmp!(self, vpcmpq, vb, k, a, b, imm),
                        (_, false) => kcmp!(self, vpcmpuq, vb, k, a, b, imm),
                    }
                }
                return Ok(pol);
            }
            POp::Eq | POp::Lt | POp::Le => {
                // bool: each operand's bits set where it is non-zero.
                let [ka, kb] = tk;
                for (kx, o) in [(ka, a), (kb, b)] {
                    v3!(vb, r => match o {
                        Opnd::Reg(x) => self.a.vptestmb(K[kx], r[x], r[x])?,
                        Opnd::Mem(m) => self.a.vptestmb(K[kx], r[ONES], m)?,
                    });
                }
                match p.op {
                    POp::Eq if want == Some(Pol::Then) => {
                        self.a.kxnorq(K[k], K[ka], K[kb])?;
                        return Ok(Pol::Then);
                    }
                    POp::Eq => {
                        self.a.kxorq(K[k], K[ka], K[kb])?;
                        Pol::Else
                    }
                    POp::Lt => {
                        // !a & b.
                        self.a.kandnq(K[k], K[ka], K[kb])?;
                        Pol::Then
                    }
                    POp::IsNan | POp::IsInf | POp::IsFinite => {
                        return Err(bug("a test in a bool comparison"));
                    }
                    POp::Le => {
                        // Not (!a | b): a & !b.
                        self.a.kandnq(K[k], K[kb], K[ka])?;
                        Pol::Else
                    }
                }
            }
            POp::IsNan | POp::IsInf | POp::IsFinite => {
                // Classes: QNaN 0x01, +inf 0x08, -inf 0x10, SNaN 0x80.
                let (imm, pol) = match p.op {
                    POp::IsNan => (0x81, Pol::Then),
                    POp::IsInf => (0x18, Pol::Then),
                    POp::IsFinite => (0x99, Pol::Else),
                    POp::Eq | POp::Lt | POp::Le => return Err(bug("a comparison in a test")),
                };
                let a = reg(a)?;
                v3!(vb, r => if l == 4 {
                    self.a.vfpclassps(K[k], r[a], imm)?
                } else {
                    self.a.vfpclasspd(K[k], r[a], imm)?
                });
                pol
            }
        };
        match want {
            Some(w) if w != natural => {
                self.k_not(k)?;
                Ok(w)
            }
            _ => Ok(natural),
        }
    }

    /// [`Self::k_cmp`] of halves (f16, bf16), in 16-bit lanes: a test classifies the magnitude
    /// (`x & 0x7fff` above, equal to or below infinity's bits); a comparison compares keys,
    /// `-(x & 0x7fff)` where the sign is set and `x` where not (an order-preserving map of
    /// every non-NaN value with -0.0 and 0.0 both 0, keys within ±infinity's bits), under the
    /// opmask of the elements of neither operand NaN. Splats arrive as keys already (see
    /// [`Self::k_splat`]): a NaN splat's key is outside that range on the side that makes every
    /// comparison false.
    fn k_cmp_half(
        &mut self,
        k: usize,
        vb: usize,
        a: usize,
        b: usize,
        want: Option<Pol>,
        tk: [usize; 2],
    ) -> Result<Pol, EmitError> {
        let p = self.p()?;
        let [ok, neg] = tk;
        if !matches!(p.op, POp::Eq | POp::Lt | POp::Le) {
            let pol = want.unwrap_or(Pol::Then);
            // isnan: above; isinf: equal; isfinite: below. Negated for else's polarity.
            let imm = match p.op {
                POp::IsNan => 6,
                POp::IsInf => 0,
                POp::IsFinite => 1,
                POp::Eq | POp::Lt | POp::Le => return Err(bug("a comparison in a half test")),
            } ^ if pol == Pol::Else { 4 } else { 0 };
            v3!(vb, r => {
                self.a.vpandd(r[HT[0]], r[a], r[MAG])?;
                self.a.vpcmpuw(K[k], r[HT[0]], r[INF], imm)?;
            });
            return Ok(pol);
        }
        let mut masked = false;
        let mut keys = [a, b];
        for (j, key) in keys.iter_mut().enumerate() {
            if *key != A && *key != B {
                continue;
            }
            let (x, t) = (*key, HT[j]);
            v3!(vb, r => {
                self.a.vpandd(r[t], r[x], r[MAG])?;
                // Not NaN: the magnitude at most infinity's.
                if masked {
                    self.a.vpcmpuw(kmerge!(K[ok], ok), r[t], r[INF], 2)?;
                } else {
                    self.a.vpcmpuw(K[ok], r[t], r[INF], 2)?;
                }
                self.a.vpmovw2m(K[neg], r[x])?;
                self.a.vpsubw(kmerge!(r[t], neg), r[ZERO], r[t])?;
            });
            masked = true;
            *key = t;
        }
        let imm = match p.op {
            POp::Eq => 0,
            POp::Lt => 1,
            POp::Le => 2,
            POp::IsNan | POp::IsInf | POp::IsFinite => return Err(bug("a test in a half compare")),
        };
        v3!(vb, r => if masked {
            self.a.vpcmpw(kmerge!(K[k], ok), r[keys[0]], r[keys[1]], imm)?
        } else {
            self.a.vpcmpw(K[k], r[keys[0]], r[keys[1]], imm)?
        });
        match want {
            Some(Pol::Else) => {
                self.k_not(k)?;
                Ok(Pol::Else)
            }
            _ => Ok(Pol::Then),
        }
    }

    /// One compare of `n` elements from element `r8 + off` into opmask `k` (see
    /// [`Self::k_prep`] and [`Self::k_cmp`]).
    #[allow(clippy::too_many_arguments)]
    fn k_unit(
        &mut self,
        k: usize,
        vb: usize,
        n: usize,
        off: i64,
        lanes: Option<usize>,
        want: Option<Pol>,
        tk: [usize; 2],
    ) -> Result<Pol, EmitError> {
        let p = self.p()?;
        if p.constant().is_some() {
            return self.k_cmp(k, vb, Opnd::Reg(A), Opnd::Reg(A), want, tk);
        }
        let need_a = p.num != Num::Bool;
        let a = if p.bcast[0] {
            Opnd::Reg(LHS)
        } else {
            let m = self.pelem(COND, off)?;
            self.k_prep(m, A, vb, n, lanes, need_a)?
        };
        let b = if !p.binary {
            a
        } else if p.bcast[1] {
            Opnd::Reg(RSPLAT)
        } else {
            let m = self.pelem(RHS, off)?;
            self.k_prep(m, B, vb, n, lanes, false)?
        };
        self.k_cmp(k, vb, a, b, want, tk)
    }

    /// Opmasks k1..k`vecs` of a block's vectors of `vbytes` (32, or 64 in a wide block) from
    /// element `r8`, in polarity `want`.
    pub(super) fn k_block_masks(&mut self, vbytes: usize, vecs: usize, want: Pol) -> R {
        self.evex(|e| e.k_block_masks_evex(vbytes, vecs, want))
    }

    fn k_block_masks_evex(&mut self, vbytes: usize, vecs: usize, want: Pol) -> R {
        self.k_block_bits(vbytes, vecs, want)?;
        if self.w == 16 {
            for v in 0..vecs {
                self.k_dup16(1 + v)?;
            }
        }
        Ok(())
    }

    /// Elements of 16 bytes blend as qword pairs: bit `i` of opmask `k` (of two elements)
    /// becomes bits `2i` and `2i + 1`.
    fn k_dup16(&mut self, k: usize) -> R {
        let t = YMM[18];
        self.a.vpmovm2q(t, K[k])?;
        self.a.vpermq(t, t, 0x50)?;
        Ok(self.a.vpmovq2m(K[k], t)?)
    }

    fn k_block_bits(&mut self, vbytes: usize, vecs: usize, want: Pol) -> R {
        let p = self.p()?;
        let l = p.cw;
        let n_el = vbytes / self.w;
        if n_el * l <= vbytes {
            // A compare covers one vector of output or more: sliced.
            let total = vecs * n_el;
            let g = total.min(vbytes / l);
            let per_group = g / n_el;
            let vb = (g * l).max(16);
            for grp in 0..total / g {
                let first = 1 + grp * per_group;
                self.k_unit(first, vb, g, (grp * g) as i64, None, Some(want), [5, 6])?;
                for s in 1..per_group {
                    self.a.kshiftrq(K[first + s], K[first], (s * n_el) as u32)?;
                }
            }
            return Ok(());
        }
        // A vector of output takes several compares: concatenated.
        let (q, u) = (n_el * l / vbytes, vbytes / l);
        for v in 0..vecs {
            let acc = 1 + v;
            let mut pol = want;
            for j in 0..q {
                let off = (v * n_el + j * u) as i64;
                let kd = if j == 0 { acc } else { 5 };
                pol = self.k_unit(kd, vbytes, u, off, None, None, [6, 7])?;
                if j > 0 {
                    self.a.kshiftlq(K[5], K[5], (j * u) as u32)?;
                    self.a.korq(K[acc], K[acc], K[5])?;
                }
            }
            if pol != want {
                self.k_not(acc)?;
            }
        }
        Ok(())
    }

    /// k6 = the predicate (set where it holds) on a tail's vector (32 bytes of output) from
    /// element `r8 + off`, its lanes in k5: masked loads never touch an element past them.
    pub(super) fn k_tail_mask(&mut self, off: i64) -> R {
        self.evex(|e| e.k_tail_mask_evex(off))
    }

    fn k_tail_mask_evex(&mut self, off: i64) -> R {
        let p = self.p()?;
        let l = p.cw;
        let n_el = 32 / self.w;
        if n_el * l <= 32 {
            let vb = (n_el * l).max(16);
            self.k_unit(6, vb, n_el, off, Some(5), Some(Pol::Then), [1, 2])?;
            if self.w == 16 {
                self.k_dup16(6)?;
            }
            return Ok(());
        }
        let (q, u) = (n_el * l / 32, 32 / l);
        let mut pol = Pol::Then;
        for j in 0..q {
            self.a.kshiftrq(k3, k5, (j * u) as u32)?;
            let kd = if j == 0 { 6 } else { 4 };
            pol = self.k_unit(kd, 32, u, off + (j * u) as i64, Some(3), None, [1, 2])?;
            if j > 0 {
                self.a.kshiftlq(k4, k4, (j * u) as u32)?;
                self.a.korq(k6, k6, k4)?;
            }
        }
        if pol != Pol::Then {
            self.k_not(6)?;
        }
        Ok(())
    }

    /// The predicate on one element (see [`super::isa::VecIsa::pred_scalar`]): every lane of
    /// an xmm holds it, the opmask is all set or all clear.
    pub(super) fn k_scalar(
        &mut self,
        lhs: AsmMemoryOperand,
        rhs: AsmMemoryOperand,
    ) -> Result<Cc, EmitError> {
        self.evex(|e| e.k_scalar_evex(lhs, rhs))
    }

    fn k_scalar_evex(
        &mut self,
        lhs: AsmMemoryOperand,
        rhs: AsmMemoryOperand,
    ) -> Result<Cc, EmitError> {
        let p = self.p()?;
        let (a, b) = if p.constant().is_some() {
            (Opnd::Reg(A), Opnd::Reg(A))
        } else {
            let a = self.k_prep(lhs, A, 16, 1, None, true)?;
            let b = if p.binary {
                self.k_prep(rhs, B, 16, 1, None, true)?
            } else {
                a
            };
            (a, b)
        };
        let pol = self.k_cmp(1, 16, a, b, None, [2, 3])?;
        self.a.kortestq(k1, k1)?;
        Ok(pol.take_else())
    }

    /// Splats lhs (`COND`) or rhs (`RHS`) from its row start, in compare lanes (zmm in a wide
    /// kernel).
    pub(super) fn k_splat(&mut self, op: usize) -> R {
        self.evex(|e| e.k_splat_evex(op))
    }

    fn k_splat_evex(&mut self, op: usize) -> R {
        let p = self.p()?;
        let (d, base) = if op == COND {
            (LHS, rdi)
        } else {
            (RSPLAT, r12)
        };
        let m = ptr(base);
        let vb = if self.wide { 64 } else { 32 };
        if p.half_inf().is_some() {
            // The key (see `k_cmp_half`) in every word; a NaN's is 0x7fff for lhs, 0x8000
            // for rhs: no key compares equal to either, none is above the first or below the
            // second (nor is 0x7fff below 0x8000), so every comparison with a NaN is false.
            let [t, s] = HT;
            v3!(vb, r => {
                self.a.vpbroadcastw(r[d], m)?;
                self.a.vpandd(r[t], r[d], r[MAG])?;
                // s = the sign in every bit; the key (mag ^ s) - s.
                self.a.vpsraw(r[s], r[d], 15)?;
                self.a.vpxord(r[d], r[t], r[s])?;
                self.a.vpsubw(r[d], r[d], r[s])?;
                // t = all ones where NaN: infinity's bits minus the magnitude is negative.
                self.a.vpsubw(r[t], r[INF], r[t])?;
                self.a.vpsraw(r[t], r[t], 15)?;
                if op == COND {
                    // d = t ? 0x7fff : d.
                    self.a.vpternlogd(r[d], r[t], r[MAG], 0xb8)?;
                } else {
                    self.a.vpsllw(r[s], r[ONES], 15)?;
                    self.a.vpternlogd(r[d], r[t], r[s], 0xb8)?;
                }
            });
            return Ok(());
        }
        v3!(vb, r => match p.cw {
            1 => self.a.vpbroadcastb(r[d], m)?,
            2 => self.a.vpbroadcastw(r[d], m)?,
            4 => self.a.vpbroadcastd(r[d], m)?,
            _ => self.a.vpbroadcastq(r[d], m)?,
        });
        Ok(())
    }

    /// The operands splatted once per kernel (the ISA's all-ones register serves bool tests).
    pub(super) fn k_invariants(&mut self) -> R {
        self.evex(|e| e.k_invariants_evex())
    }

    fn k_invariants_evex(&mut self) -> R {
        if let Some(inf) = self.p()?.half_inf() {
            // From all ones: 0x7fff; infinity's bits, 0xff80 or 0xfc00 masked; zero.
            let shift = inf.trailing_zeros();
            v3!(if self.wide { 64 } else { 32 }, r => {
                self.a.vpsrlw(r[MAG], r[ONES], 1)?;
                self.a.vpsllw(r[INF], r[ONES], shift)?;
                self.a.vpandd(r[INF], r[INF], r[MAG])?;
                self.a.vpxord(r[ZERO], r[ZERO], r[ZERO])?;
            });
        }
        self.pred_invariant_splats::<Avx512>()
    }
}

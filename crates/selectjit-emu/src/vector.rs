//! VEX and EVEX vector instructions and the opmask instructions.

use iced_x86::{Instruction, Mnemonic, OpKind, Register};

use super::exec::{CF, Flow, Machine, R, STATUS, Trap, ZF, mask, unsupported};
use super::gpr::sext;

/// A vector register's worth of bytes.
type V = [u8; 64];

/// Element `i` of `es` bytes, zero-extended.
#[inline(always)]
fn get(v: &V, es: usize, i: usize) -> u64 {
    let o = i * es;
    match es {
        1 => v[o] as u64,
        2 => u16::from_le_bytes([v[o], v[o + 1]]) as u64,
        4 => u32::from_le_bytes([v[o], v[o + 1], v[o + 2], v[o + 3]]) as u64,
        _ => u64::from_le_bytes(v[o..o + 8].try_into().unwrap_or_default()),
    }
}

/// Sets element `i` of `es` bytes to the low bytes of `x`.
#[inline(always)]
fn put(v: &mut V, es: usize, i: usize, x: u64) {
    let o = i * es;
    v[o..o + es].copy_from_slice(&x.to_le_bytes()[..es]);
}

/// Whether the top bit of element `i` is set.
#[inline(always)]
fn msb(v: &V, es: usize, i: usize) -> bool {
    v[i * es + es - 1] & 0x80 != 0
}

/// The low `n` bits set (n <= 64).
#[inline(always)]
fn ones(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// The width in bytes of a vector register.
#[inline(always)]
fn vl(r: Register) -> usize {
    r.size()
}

/// Element size in bytes of a vector instruction: what its opmask bits and lanes count.
fn elem_size(m: Mnemonic) -> usize {
    use Mnemonic::*;
    match m {
        Vmovdqu8 | Vpbroadcastb | Vpblendmb | Vpcmpeqb | Vpcmpgtb | Vpcmpb | Vpcmpub | Vptestmb
        | Vptestnmb | Vpmovm2b | Vpmovb2m | Vpshufb | Vpunpcklbw | Vpunpckhbw | Vpaddb | Vpsubb
        | Vpblendvb | Vpmovmskb | Vpsignb | Vpmaxub => 1,
        Vmovdqu16 | Vpbroadcastw | Vpblendmw | Vpcmpeqw | Vpcmpgtw | Vpcmpw | Vpcmpuw
        | Vpacksswb | Vptestmw | Vptestnmw | Vpmovm2w | Vpmovw2m | Vpunpcklwd | Vpunpckhwd
        | Vpaddw | Vpsubw | Vpsllw | Vpsrlw | Vpsraw | Vpmovzxbw | Vpmovsxbw | Vpsignw
        | Vpmaxuw => 2,
        Vmovdqu32 | Vmovdqa32 | Vmovups | Vmovaps | Vmovntps | Vpbroadcastd | Vbroadcastss
        | Vbroadcasti32x4 | Vbroadcastf32x4 | Vbroadcasti32x8 | Vbroadcastf32x8 | Vinserti32x4
        | Vinsertf32x4 | Vinserti32x8 | Vinsertf32x8 | Vextracti32x4 | Vextractf32x4
        | Vextracti32x8 | Vextractf32x8 | Vpxord | Vpandd | Vpandnd | Vpord | Vpternlogd
        | Vptestmd | Vptestnmd | Vpcmpeqd | Vpcmpgtd | Vpcmpd | Vpcmpud | Vpblendmd | Vblendmps
        | Vpmovzxbd | Vpmovzxwd | Vpmovsxbd | Vpmovsxwd | Vpmovm2d | Vpmovd2m | Vpermd
        | Vpermps | Vpshufd | Vpunpckldq | Vpunpckhdq | Vpaddd | Vpsubd | Vpslld | Vpsrld
        | Vpsrad | Vblendvps | Vmovmskps | Vpmaskmovd | Vmaskmovps | Vcmpps | Vandps | Vandnps
        | Vorps | Vxorps | Vfpclassps | Vpackssdw | Vpsignd | Vpmaxud => 4,
        _ => 8,
    }
}

/// `(chunk bytes)` of the 128/256-bit lane broadcasts, inserts and extracts.
fn chunk_of(m: Mnemonic) -> usize {
    use Mnemonic::*;
    match m {
        Vbroadcasti32x8 | Vbroadcastf32x8 | Vbroadcasti64x4 | Vbroadcastf64x4 | Vinserti32x8
        | Vinsertf32x8 | Vinserti64x4 | Vinsertf64x4 | Vextracti32x8 | Vextractf32x8
        | Vextracti64x4 | Vextractf64x4 => 32,
        _ => 16,
    }
}

/// `(source, destination)` element sizes of the zero/sign extensions.
fn ext_sizes(m: Mnemonic) -> (usize, usize) {
    use Mnemonic::*;
    match m {
        Vpmovzxbw | Vpmovsxbw => (1, 2),
        Vpmovzxbd | Vpmovsxbd => (1, 4),
        Vpmovzxbq | Vpmovsxbq => (1, 8),
        Vpmovzxwd | Vpmovsxwd => (2, 4),
        Vpmovzxwq | Vpmovsxwq => (2, 8),
        _ => (4, 8),
    }
}

/// The width in bits of an opmask instruction's operation.
fn k_width(m: Mnemonic) -> usize {
    use Mnemonic::*;
    match m {
        Kmovb | Kshiftlb | Kshiftrb | Kandb | Kandnb | Korb | Kxorb | Kxnorb | Knotb | Kortestb
        | Ktestb | Kaddb => 8,
        Kmovw | Kshiftlw | Kshiftrw | Kandw | Kandnw | Korw | Kxorw | Kxnorw | Knotw | Kortestw
        | Ktestw | Kaddw | Kunpckbw => 16,
        Kmovd | Kshiftld | Kshiftrd | Kandd | Kandnd | Kord | Kxord | Kxnord | Knotd | Kortestd
        | Ktestd | Kaddd | Kunpckwd => 32,
        _ => 64,
    }
}

/// The result of `vcmpps` / `vcmppd` with predicate `imm` (0-31) on IEEE values of `es` bytes:
/// the SDM's table of the 32 predicates. Bit 4 only chooses whether a quiet NaN signals (an
/// exception flag, which the emulator does not keep); the result depends on the low 4 bits.
/// No MXCSR: denormals compare as themselves (DAZ off, the default).
pub(crate) fn fp_compare(a: u64, b: u64, es: usize, imm: u8) -> bool {
    let (lt, eq, gt, un) = if es == 4 {
        let (x, y) = (f32::from_bits(a as u32), f32::from_bits(b as u32));
        (x < y, x == y, x > y, x.is_nan() || y.is_nan())
    } else {
        let (x, y) = (f64::from_bits(a), f64::from_bits(b));
        (x < y, x == y, x > y, x.is_nan() || y.is_nan())
    };
    match imm & 0xf {
        0x0 => eq,         // EQ_OQ
        0x1 => lt,         // LT_OS
        0x2 => lt || eq,   // LE_OS
        0x3 => un,         // UNORD_Q
        0x4 => !eq,        // NEQ_UQ
        0x5 => !lt,        // NLT_US
        0x6 => !lt && !eq, // NLE_US
        0x7 => !un,        // ORD_Q
        0x8 => eq || un,   // EQ_UQ
        0x9 => lt || un,   // NGE_US
        0xa => !gt,        // NGT_US
        0xb => false,      // FALSE_OQ
        0xc => lt || gt,   // NEQ_OQ
        0xd => gt || eq,   // GE_OS
        0xe => gt,         // GT_OS
        _ => true,         // TRUE_UQ
    }
}

/// `vfpclassps` / `vfpclasspd`: whether the value of `es` bytes is in a class of `imm` (bit 0
/// QNaN, 1 +0, 2 -0, 3 +inf, 4 -inf, 5 denormal, 6 negative finite non-zero, 7 SNaN).
pub(crate) fn fp_class(x: u64, es: usize, imm: u8) -> bool {
    let (mbits, ebits) = if es == 4 { (23, 8) } else { (52, 11) };
    let sign = x >> (mbits + ebits) & 1 == 1;
    let exp = x >> mbits & ((1 << ebits) - 1);
    let man = x & ((1 << mbits) - 1);
    let exp_ones = exp == (1 << ebits) - 1;
    let zero = exp == 0 && man == 0;
    let quiet = man >> (mbits - 1) & 1 == 1;
    let classes = [
        exp_ones && man != 0 && quiet,
        !sign && zero,
        sign && zero,
        !sign && exp_ones && man == 0,
        sign && exp_ones && man == 0,
        exp == 0 && man != 0,
        sign && !exp_ones && !zero,
        exp_ones && man != 0 && !quiet,
    ];
    (0..8).any(|i| imm >> i & 1 == 1 && classes[i])
}

/// f16 bits to the f32 bits of the same value (`vcvtph2ps`): exact; a signalling NaN comes out
/// quiet, its payload kept.
pub(crate) fn f16_to_f32(h: u64) -> u64 {
    let sign = (h as u32 >> 15 & 1) << 31;
    let exp = h as u32 >> 10 & 0x1f;
    let man = h as u32 & 0x3ff;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: m * 2^-24, normalised.
            let shift = man.leading_zeros() - 21;
            let m = (man << shift) & 0x3ff;
            sign | (127 - 15 + 1 - shift) << 23 | m << 13
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | man << 13,
        _ => sign | (exp + 127 - 15) << 23 | man << 13,
    };
    bits as u64
}

/// f32 bits to the f64 bits of the same value (`vcvtps2pd`): exact; a signalling NaN comes out
/// quiet, its payload kept.
pub(crate) fn f32_to_f64(x: u64) -> u64 {
    let f = f32::from_bits(x as u32);
    if f.is_nan() {
        let sign = (x >> 31 & 1) << 63;
        let man = x & 0x7f_ffff;
        sign | 0x7ff8_0000_0000_0000 | man << 29
    } else {
        (f as f64).to_bits()
    }
}

/// `x` (`from` bytes, signed) saturated to `to` bytes.
fn saturate(x: u64, from: usize, to: usize) -> u64 {
    let v = sext(x, from);
    let hi = (1i64 << (8 * to - 1)) - 1;
    v.clamp(-hi - 1, hi) as u64 & mask(to)
}

/// The result of `vpternlog` with truth table `imm` on 64 bits of each operand.
#[inline]
fn ternlog(a: u64, b: u64, c: u64, imm: u8) -> u64 {
    let mut r = 0;
    for t in 0..8 {
        if imm >> t & 1 != 0 {
            let x = if t & 4 != 0 { a } else { !a };
            let y = if t & 2 != 0 { b } else { !b };
            let z = if t & 1 != 0 { c } else { !c };
            r |= x & y & z;
        }
    }
    r
}

impl Machine<'_> {
    /// The enabled lanes of `n` elements: the write mask's bits, or all of them without one.
    #[inline]
    fn lanes(&self, ins: &Instruction, n: usize) -> u64 {
        match ins.op_mask() {
            Register::None => ones(n),
            k => self.k[k.number()] & ones(n),
        }
    }

    /// Vector register operand `i`.
    #[inline]
    fn vreg(&self, ins: &Instruction, i: u32) -> V {
        self.v[ins.op_register(i).number()]
    }

    /// Writes `n = vl(dst)` bytes of `val` to `dst` and zeroes the rest of the zmm register.
    #[inline]
    fn put_vec(&mut self, dst: Register, val: &V) {
        let n = vl(dst);
        let d = &mut self.v[dst.number()];
        d[..n].copy_from_slice(&val[..n]);
        d[n..].fill(0);
    }

    /// Writes a vector result to `dst` under the instruction's write mask (`es`-byte elements;
    /// merge or zero masking) and zeroes the bits above the destination's width.
    #[inline]
    fn wr_vec(&mut self, ins: &Instruction, dst: Register, val: &V, es: usize) {
        let k = ins.op_mask();
        if k == Register::None {
            return self.put_vec(dst, val);
        }
        let bits = self.k[k.number()];
        let zero = ins.zeroing_masking();
        let n = vl(dst);
        let d = &mut self.v[dst.number()];
        for i in 0..n / es {
            let o = i * es;
            if bits >> i & 1 != 0 {
                d[o..o + es].copy_from_slice(&val[o..o + es]);
            } else if zero {
                d[o..o + es].fill(0);
            }
        }
        d[n..].fill(0);
    }

    /// Loads `len` bytes at `addr` as elements of `es` bytes, only those whose bit in `need` is
    /// set (the others read as zero and are not checked).
    fn load_elems(&mut self, addr: u64, len: usize, es: usize, need: u64) -> R<V> {
        let mut out = [0u8; 64];
        let n = len / es;
        if need & ones(n) == ones(n) {
            self.read_raw(addr, &mut out[..len])?;
        } else if need & ones(n) != 0 {
            for i in (0..n).filter(|&i| need >> i & 1 != 0) {
                self.check(addr.wrapping_add((i * es) as u64), es as u64, false)?;
            }
            for i in (0..n).filter(|&i| need >> i & 1 != 0) {
                let o = i * es;
                self.read_raw(addr.wrapping_add(o as u64), &mut out[o..o + es])?;
            }
        } else {
            return Ok(out);
        }
        self.stats.loads += 1;
        Ok(out)
    }

    /// Stores the elements of `len` bytes of `val` whose bit in `lanes` is set. With
    /// `suppress`, the disabled ones are not checked either (fault suppression); without, the
    /// whole range must be writable.
    fn store_elems(
        &mut self,
        addr: u64,
        val: &V,
        len: usize,
        es: usize,
        lanes: u64,
        suppress: bool,
    ) -> R<()> {
        let n = len / es;
        if lanes & ones(n) == ones(n) {
            self.write_raw(addr, &val[..len])?;
        } else {
            if !suppress {
                self.check(addr, len as u64, true)?;
            }
            if lanes & ones(n) == 0 {
                return Ok(());
            }
            for i in (0..n).filter(|&i| lanes >> i & 1 != 0) {
                self.check(addr.wrapping_add((i * es) as u64), es as u64, true)?;
            }
            for i in (0..n).filter(|&i| lanes >> i & 1 != 0) {
                let o = i * es;
                self.write_raw(addr.wrapping_add(o as u64), &val[o..o + es])?;
            }
        }
        self.stats.stores += 1;
        Ok(())
    }

    /// Vector source operand `i` of `len` bytes in `es`-byte elements: a register, memory
    /// (loading only the elements set in `need`) or an embedded broadcast (loaded if any
    /// element is needed).
    fn src(&mut self, ins: &Instruction, i: u32, len: usize, es: usize, need: u64) -> R<V> {
        match ins.op_kind(i) {
            OpKind::Register => Ok(self.vreg(ins, i)),
            OpKind::Memory => {
                let addr = self.ea(ins);
                if ins.is_broadcast() {
                    let bes = ins.memory_size().element_size();
                    let mut out = [0u8; 64];
                    if need & ones(len / es) != 0 {
                        let x = self.load_u(addr, bes)?;
                        for j in 0..len / bes {
                            put(&mut out, bes, j, x);
                        }
                    }
                    Ok(out)
                } else {
                    self.load_elems(addr, len, es, need)
                }
            }
            _ => unsupported("operand kind"),
        }
    }

    /// Fails unless `addr` is a multiple of `align`.
    fn aligned(addr: u64, align: usize) -> R<()> {
        if addr.is_multiple_of(align as u64) {
            Ok(())
        } else {
            Err(Trap::Misaligned {
                addr,
                align: align as u64,
            })
        }
    }

    /// Executes a vector or opmask instruction; `None` if `ins` is not one.
    pub(super) fn exec_vec(&mut self, ins: &Instruction) -> R<Option<Flow>> {
        use Mnemonic::*;
        let m = ins.mnemonic();
        match m {
            Vmovdqu | Vmovups | Vmovupd | Vmovdqu8 | Vmovdqu16 | Vmovdqu32 | Vmovdqu64 => {
                self.vmov(ins, elem_size(m), false)?
            }
            Vmovdqa | Vmovaps | Vmovapd | Vmovdqa32 | Vmovdqa64 | Vmovntdq | Vmovntps
            | Vmovntpd | Vmovntdqa => self.vmov(ins, elem_size(m), true)?,
            Vmovd => self.vmovdq(ins, 4)?,
            Vmovq => self.vmovdq(ins, 8)?,
            Vpbroadcastb | Vpbroadcastw | Vpbroadcastd | Vpbroadcastq | Vbroadcastss
            | Vbroadcastsd => self.broadcast(ins, elem_size(m))?,
            Vbroadcasti128 | Vbroadcastf128 | Vbroadcasti32x4 | Vbroadcastf32x4
            | Vbroadcasti64x2 | Vbroadcastf64x2 | Vbroadcasti32x8 | Vbroadcastf32x8
            | Vbroadcasti64x4 | Vbroadcastf64x4 => self.broadcast_chunk(ins, elem_size(m))?,
            Vinserti128 | Vinsertf128 | Vinserti32x4 | Vinsertf32x4 | Vinserti64x2
            | Vinsertf64x2 | Vinserti32x8 | Vinsertf32x8 | Vinserti64x4 | Vinsertf64x4 => {
                self.insert(ins, elem_size(m))?
            }
            Vextracti128 | Vextractf128 | Vextracti32x4 | Vextractf32x4 | Vextracti64x2
            | Vextractf64x2 | Vextracti32x8 | Vextractf32x8 | Vextracti64x4 | Vextractf64x4 => {
                self.extract(ins, elem_size(m))?
            }
            Vpxor | Vpxord | Vpxorq | Vxorps | Vxorpd => {
                self.binop(ins, elem_size(m), |a, b, _| a ^ b)?
            }
            Vandps | Vandpd => self.binop(ins, elem_size(m), |a, b, _| a & b)?,
            Vandnps | Vandnpd => self.binop(ins, elem_size(m), |a, b, _| !a & b)?,
            Vorps | Vorpd => self.binop(ins, elem_size(m), |a, b, _| a | b)?,
            Vcmpps | Vcmppd => {
                let imm = ins.immediate8();
                let pred = move |a: u64, b: u64, es: usize| fp_compare(a, b, es, imm);
                if ins.op_register(0).is_k() {
                    self.cmp_k(ins, elem_size(m), pred)?
                } else {
                    self.binop(
                        ins,
                        elem_size(m),
                        move |a, b, es| {
                            if pred(a, b, es) { u64::MAX } else { 0 }
                        },
                    )?
                }
            }
            Vfpclassps | Vfpclasspd => {
                let es = elem_size(m);
                if ins.op_kind(1) != OpKind::Register && ins.is_broadcast() {
                    return unsupported("embedded broadcast");
                }
                let n = match ins.op_kind(1) {
                    OpKind::Register => vl(ins.op_register(1)),
                    _ => ins.memory_size().size(),
                };
                let lanes = self.lanes(ins, n / es);
                let a = self.src(ins, 1, n, es, lanes)?;
                let imm = ins.immediate8();
                let bits = (0..n / es).fold(0u64, |acc, i| {
                    acc | (fp_class(get(&a, es, i), es, imm) as u64) << i
                });
                self.k[ins.op_register(0).number()] = bits & lanes;
            }
            Vcvtph2ps | Vcvtps2pd => {
                let (ses, des, f): (usize, usize, fn(u64) -> u64) = if m == Vcvtph2ps {
                    (2, 4, f16_to_f32)
                } else {
                    (4, 8, f32_to_f64)
                };
                if ins.op_count() != 2 {
                    return unsupported("rounding or sae operand");
                }
                let dst = ins.op_register(0);
                let nel = vl(dst) / des;
                let lanes = self.lanes(ins, nel);
                let s = self.src(ins, 1, nel * ses, ses, lanes)?;
                let mut out = [0u8; 64];
                for i in 0..nel {
                    put(&mut out, des, i, f(get(&s, ses, i)));
                }
                self.wr_vec(ins, dst, &out, des);
            }
            Vpackssdw | Vpacksswb => {
                let (ses, des) = if m == Vpackssdw { (4, 2) } else { (2, 1) };
                let dst = ins.op_register(0);
                let n = vl(dst);
                let a = self.vreg(ins, 1);
                let b = self.src(ins, 2, n, ses, u64::MAX)?;
                let per = 16 / ses;
                let mut out = [0u8; 64];
                for lane in 0..n / 16 {
                    for j in 0..per {
                        let at = lane * 2 * per + j;
                        put(
                            &mut out,
                            des,
                            at,
                            saturate(get(&a, ses, lane * per + j), ses, des),
                        );
                        let x = get(&b, ses, lane * per + j);
                        put(&mut out, des, at + per, saturate(x, ses, des));
                    }
                }
                self.wr_vec(ins, dst, &out, des);
            }
            Vpand | Vpandd | Vpandq => self.binop(ins, elem_size(m), |a, b, _| a & b)?,
            Vpandn | Vpandnd | Vpandnq => self.binop(ins, elem_size(m), |a, b, _| !a & b)?,
            Vpor | Vpord | Vporq => self.binop(ins, elem_size(m), |a, b, _| a | b)?,
            Vpaddb | Vpaddw | Vpaddd | Vpaddq => {
                self.binop(ins, elem_size(m), |a, b, _| a.wrapping_add(b))?
            }
            Vpsubb | Vpsubw | Vpsubd | Vpsubq => {
                self.binop(ins, elem_size(m), |a, b, _| a.wrapping_sub(b))?
            }
            // a negated where b is negative, zeroed where b is zero.
            Vpsignb | Vpsignw | Vpsignd => {
                self.binop(ins, elem_size(m), |a, b, es| match sext(b, es).signum() {
                    -1 => a.wrapping_neg(),
                    0 => 0,
                    _ => a,
                })?
            }
            Vpmaxub | Vpmaxuw | Vpmaxud => self.binop(ins, elem_size(m), |a, b, _| a.max(b))?,
            Vpcmpeqb | Vpcmpeqw | Vpcmpeqd | Vpcmpeqq | Vpcmpgtb | Vpcmpgtw | Vpcmpgtd
            | Vpcmpgtq => {
                let eq = matches!(m, Vpcmpeqb | Vpcmpeqw | Vpcmpeqd | Vpcmpeqq);
                let pred = move |a: u64, b: u64, es: usize| {
                    if eq {
                        a == b
                    } else {
                        sext(a, es) > sext(b, es)
                    }
                };
                if ins.op_register(0).is_k() {
                    self.cmp_k(ins, elem_size(m), pred)?
                } else {
                    self.binop(
                        ins,
                        elem_size(m),
                        move |a, b, es| {
                            if pred(a, b, es) { u64::MAX } else { 0 }
                        },
                    )?
                }
            }
            Vpcmpb | Vpcmpw | Vpcmpd | Vpcmpq | Vpcmpub | Vpcmpuw | Vpcmpud | Vpcmpuq => {
                let signed = matches!(m, Vpcmpb | Vpcmpw | Vpcmpd | Vpcmpq);
                let p = ins.immediate8() & 7;
                self.cmp_k(ins, elem_size(m), move |a, b, es| {
                    let ord = if signed {
                        sext(a, es).cmp(&sext(b, es))
                    } else {
                        a.cmp(&b)
                    };
                    match p {
                        0 => ord.is_eq(),
                        1 => ord.is_lt(),
                        2 => ord.is_le(),
                        3 => false,
                        4 => ord.is_ne(),
                        5 => ord.is_ge(),
                        6 => ord.is_gt(),
                        _ => true,
                    }
                })?
            }
            Vptestmb | Vptestmw | Vptestmd | Vptestmq => {
                self.cmp_k(ins, elem_size(m), |a, b, _| a & b != 0)?
            }
            Vptestnmb | Vptestnmw | Vptestnmd | Vptestnmq => {
                self.cmp_k(ins, elem_size(m), |a, b, _| a & b == 0)?
            }
            Vpternlogd | Vpternlogq => {
                let dst = ins.op_register(0);
                let n = vl(dst);
                let es = elem_size(m);
                let need = self.lanes(ins, n / es);
                let a = self.v[dst.number()];
                let b = self.vreg(ins, 1);
                let c = self.src(ins, 2, n, es, need)?;
                let imm = ins.immediate8();
                let mut out = [0u8; 64];
                for i in 0..n / 8 {
                    put(
                        &mut out,
                        8,
                        i,
                        ternlog(get(&a, 8, i), get(&b, 8, i), get(&c, 8, i), imm),
                    );
                }
                self.wr_vec(ins, dst, &out, es);
            }
            Vpblendvb | Vblendvps | Vblendvpd => {
                let es = elem_size(m);
                let dst = ins.op_register(0);
                let n = vl(dst);
                let a = self.vreg(ins, 1);
                let b = self.src(ins, 2, n, es, u64::MAX)?;
                let sel = self.vreg(ins, 3);
                let mut out = a;
                for i in (0..n / es).filter(|&i| msb(&sel, es, i)) {
                    put(&mut out, es, i, get(&b, es, i));
                }
                self.put_vec(dst, &out);
            }
            Vpblendmb | Vpblendmw | Vpblendmd | Vpblendmq | Vblendmps | Vblendmpd => {
                let es = elem_size(m);
                let dst = ins.op_register(0);
                let n = vl(dst);
                let lanes = self.lanes(ins, n / es);
                let a = self.vreg(ins, 1);
                let b = self.src(ins, 2, n, es, lanes)?;
                let zero = ins.zeroing_masking();
                let mut out = [0u8; 64];
                for i in 0..n / es {
                    let x = if lanes >> i & 1 != 0 {
                        get(&b, es, i)
                    } else if zero {
                        0
                    } else {
                        get(&a, es, i)
                    };
                    put(&mut out, es, i, x);
                }
                self.put_vec(dst, &out);
            }
            Vpermq | Vpermpd | Vpermd | Vpermps => self.perm(ins, elem_size(m))?,
            Vperm2i128 | Vperm2f128 => {
                let dst = ins.op_register(0);
                let a = self.vreg(ins, 1);
                let b = self.src(ins, 2, 32, 8, u64::MAX)?;
                let imm = ins.immediate8();
                let mut out = [0u8; 64];
                for lane in 0..2 {
                    let ctl = imm >> (4 * lane);
                    if ctl & 8 == 0 {
                        let s = (ctl & 1) as usize * 16;
                        let from = if ctl & 2 == 0 { &a } else { &b };
                        out[lane * 16..lane * 16 + 16].copy_from_slice(&from[s..s + 16]);
                    }
                }
                self.put_vec(dst, &out);
            }
            Vpshufb => {
                let dst = ins.op_register(0);
                let n = vl(dst);
                let a = self.vreg(ins, 1);
                let b = self.src(ins, 2, n, 1, u64::MAX)?;
                let mut out = [0u8; 64];
                for i in 0..n {
                    if b[i] & 0x80 == 0 {
                        out[i] = a[(i & !15) + (b[i] & 15) as usize];
                    }
                }
                self.wr_vec(ins, dst, &out, 1);
            }
            Vpshufd => {
                let dst = ins.op_register(0);
                let n = vl(dst);
                let a = self.src(ins, 1, n, 4, u64::MAX)?;
                let imm = ins.immediate8() as usize;
                let mut out = [0u8; 64];
                for i in 0..n / 4 {
                    let j = (i & !3) + (imm >> (2 * (i & 3)) & 3);
                    put(&mut out, 4, i, get(&a, 4, j));
                }
                self.wr_vec(ins, dst, &out, 4);
            }
            Vpunpcklbw | Vpunpcklwd | Vpunpckldq | Vpunpcklqdq | Vpunpckhbw | Vpunpckhwd
            | Vpunpckhdq | Vpunpckhqdq => {
                let es = elem_size(m);
                let high = matches!(m, Vpunpckhbw | Vpunpckhwd | Vpunpckhdq | Vpunpckhqdq);
                let dst = ins.op_register(0);
                let n = vl(dst);
                let a = self.vreg(ins, 1);
                let b = self.src(ins, 2, n, es, u64::MAX)?;
                let per = 16 / es;
                let mut out = [0u8; 64];
                for lane in 0..n / 16 {
                    let base = lane * per + if high { per / 2 } else { 0 };
                    for j in 0..per / 2 {
                        put(&mut out, es, lane * per + 2 * j, get(&a, es, base + j));
                        put(&mut out, es, lane * per + 2 * j + 1, get(&b, es, base + j));
                    }
                }
                self.wr_vec(ins, dst, &out, es);
            }
            Vpmovzxbw | Vpmovzxbd | Vpmovzxbq | Vpmovzxwd | Vpmovzxwq | Vpmovzxdq | Vpmovsxbw
            | Vpmovsxbd | Vpmovsxbq | Vpmovsxwd | Vpmovsxwq | Vpmovsxdq => {
                let (ses, des) = ext_sizes(m);
                let signed = matches!(
                    m,
                    Vpmovsxbw | Vpmovsxbd | Vpmovsxbq | Vpmovsxwd | Vpmovsxwq | Vpmovsxdq
                );
                let dst = ins.op_register(0);
                let nel = vl(dst) / des;
                let lanes = self.lanes(ins, nel);
                let s = match ins.op_kind(1) {
                    OpKind::Register => self.vreg(ins, 1),
                    _ => {
                        let addr = self.ea(ins);
                        self.load_elems(addr, nel * ses, ses, lanes)?
                    }
                };
                let mut out = [0u8; 64];
                for i in 0..nel {
                    let x = get(&s, ses, i);
                    put(
                        &mut out,
                        des,
                        i,
                        if signed { sext(x, ses) as u64 } else { x },
                    );
                }
                self.wr_vec(ins, dst, &out, des);
            }
            Vpmovmskb | Vmovmskps | Vmovmskpd => {
                let es = match m {
                    Vpmovmskb => 1,
                    Vmovmskps => 4,
                    _ => 8,
                };
                let src = ins.op_register(1);
                let a = self.v[src.number()];
                let bits = (0..vl(src) / es).fold(0u64, |b, i| b | (msb(&a, es, i) as u64) << i);
                self.set_reg(ins.op_register(0), bits);
            }
            Vptest => {
                let n = vl(ins.op_register(0));
                let a = self.vreg(ins, 0);
                let b = self.src(ins, 1, n, 8, u64::MAX)?;
                let (mut and, mut andn) = (0u8, 0u8);
                for i in 0..n {
                    and |= a[i] & b[i];
                    andn |= !a[i] & b[i];
                }
                let f = if and == 0 { ZF } else { 0 } | if andn == 0 { CF } else { 0 };
                self.set_flags(STATUS, f);
            }
            Vpmaskmovd | Vpmaskmovq | Vmaskmovps | Vmaskmovpd => {
                let es = elem_size(m);
                if ins.op_kind(0) == OpKind::Register {
                    let dst = ins.op_register(0);
                    let n = vl(dst);
                    let sel = self.vreg(ins, 1);
                    let need = (0..n / es).fold(0u64, |b, i| b | (msb(&sel, es, i) as u64) << i);
                    let addr = self.ea(ins);
                    let val = self.load_elems(addr, n, es, need)?;
                    self.put_vec(dst, &val);
                } else {
                    let n = vl(ins.op_register(1));
                    let sel = self.vreg(ins, 1);
                    let val = self.vreg(ins, 2);
                    let lanes = (0..n / es).fold(0u64, |b, i| b | (msb(&sel, es, i) as u64) << i);
                    let addr = self.ea(ins);
                    self.store_elems(addr, &val, n, es, lanes, true)?;
                }
            }
            Vpmovm2b | Vpmovm2w | Vpmovm2d | Vpmovm2q => {
                let es = elem_size(m);
                let dst = ins.op_register(0);
                let k = self.k[ins.op_register(1).number()];
                let mut out = [0u8; 64];
                for i in (0..vl(dst) / es).filter(|&i| k >> i & 1 != 0) {
                    put(&mut out, es, i, u64::MAX);
                }
                self.put_vec(dst, &out);
            }
            Vpmovb2m | Vpmovw2m | Vpmovd2m | Vpmovq2m => {
                let es = elem_size(m);
                let src = ins.op_register(1);
                let a = self.v[src.number()];
                let bits = (0..vl(src) / es).fold(0u64, |b, i| b | (msb(&a, es, i) as u64) << i);
                self.k[ins.op_register(0).number()] = bits;
            }
            Vpsllw | Vpslld | Vpsllq | Vpsrlw | Vpsrld | Vpsrlq | Vpsraw | Vpsrad | Vpsraq => {
                self.vshift(ins, elem_size(m))?
            }
            Vzeroupper => {
                for r in &mut self.v[..16] {
                    r[16..].fill(0);
                }
            }
            Sfence | Lfence | Mfence | Prefetcht0 | Prefetcht1 | Prefetcht2 | Prefetchnta
            | Prefetchw => {}
            _ => return self.exec_k(ins),
        }
        Ok(Some(Flow::Next))
    }

    /// Moves between vector registers and memory, masked by element of `es` bytes.
    fn vmov(&mut self, ins: &Instruction, es: usize, align: bool) -> R<()> {
        if ins.op_kind(0) == OpKind::Register {
            let dst = ins.op_register(0);
            let n = vl(dst);
            if align && ins.op_kind(1) == OpKind::Memory {
                Self::aligned(self.ea(ins), n)?;
            }
            let need = self.lanes(ins, n / es);
            let val = self.src(ins, 1, n, es, need)?;
            self.wr_vec(ins, dst, &val, es);
        } else {
            let n = vl(ins.op_register(1));
            let addr = self.ea(ins);
            if align {
                Self::aligned(addr, n)?;
            }
            let lanes = self.lanes(ins, n / es);
            let val = self.vreg(ins, 1);
            self.store_elems(addr, &val, n, es, lanes, true)?;
        }
        Ok(())
    }

    /// vmovd / vmovq (`size` 4 or 8) between xmm, general registers and memory.
    fn vmovdq(&mut self, ins: &Instruction, size: usize) -> R<()> {
        match ins.op_kind(0) {
            OpKind::Register if ins.op_register(0).is_xmm() => {
                let x = match ins.op_kind(1) {
                    OpKind::Register if ins.op_register(1).is_xmm() => {
                        get(&self.vreg(ins, 1), 8, 0) & mask(size)
                    }
                    _ => self.read(ins, 1, size)?,
                };
                let mut out = [0u8; 64];
                put(&mut out, 8, 0, x);
                self.put_vec(ins.op_register(0), &out);
            }
            _ => {
                let x = get(&self.vreg(ins, 1), 8, 0) & mask(size);
                self.write(ins, 0, size, x)?;
            }
        }
        Ok(())
    }

    /// vpbroadcastb/w/d/q, vbroadcastss/sd: one element from xmm, a general register or
    /// memory to every element.
    fn broadcast(&mut self, ins: &Instruction, es: usize) -> R<()> {
        let dst = ins.op_register(0);
        let nel = vl(dst) / es;
        let lanes = self.lanes(ins, nel);
        let x = match ins.op_kind(1) {
            OpKind::Register if ins.op_register(1).is_vector_register() => {
                get(&self.vreg(ins, 1), es, 0)
            }
            OpKind::Register => self.reg(ins.op_register(1)) & mask(es),
            _ if lanes != 0 => self.load_u(self.ea(ins), es)?,
            _ => 0,
        };
        let mut out = [0u8; 64];
        for i in 0..nel {
            put(&mut out, es, i, x);
        }
        self.wr_vec(ins, dst, &out, es);
        Ok(())
    }

    /// vbroadcasti128 and vbroadcast[if](32x4|64x2|32x8|64x4): a 16- or 32-byte chunk of
    /// memory to every chunk of the destination.
    fn broadcast_chunk(&mut self, ins: &Instruction, es: usize) -> R<()> {
        if ins.op_kind(1) != OpKind::Memory {
            return unsupported("register source");
        }
        let dst = ins.op_register(0);
        let chunk = chunk_of(ins.mnemonic());
        let n = vl(dst);
        let per = chunk / es;
        let lanes = self.lanes(ins, n / es);
        // Element j of the chunk is needed if any destination element it goes to is enabled.
        let need = (0..n / es)
            .filter(|&i| lanes >> i & 1 != 0)
            .fold(0u64, |b, i| b | 1 << (i % per));
        let addr = self.ea(ins);
        let c = self.load_elems(addr, chunk, es, need)?;
        let mut out = [0u8; 64];
        for i in 0..n {
            out[i] = c[i % chunk];
        }
        self.wr_vec(ins, dst, &out, es);
        Ok(())
    }

    /// vinserti128 and vinsert[if](32x4|64x2|32x8|64x4) (no fault suppression).
    fn insert(&mut self, ins: &Instruction, es: usize) -> R<()> {
        let dst = ins.op_register(0);
        let chunk = chunk_of(ins.mnemonic());
        let n = vl(dst);
        let pos = (ins.immediate8() as usize) & (n / chunk - 1);
        let mut out = self.vreg(ins, 1);
        let c = self.src(ins, 2, chunk, es, u64::MAX)?;
        out[pos * chunk..(pos + 1) * chunk].copy_from_slice(&c[..chunk]);
        self.wr_vec(ins, dst, &out, es);
        Ok(())
    }

    /// vextracti128 and vextract[if](32x4|64x2|32x8|64x4) to a register or memory (masked
    /// stores write only enabled elements but check the whole range: no fault suppression).
    fn extract(&mut self, ins: &Instruction, es: usize) -> R<()> {
        let src = ins.op_register(1);
        let chunk = chunk_of(ins.mnemonic());
        let pos = (ins.immediate8() as usize) & (vl(src) / chunk - 1);
        let a = self.v[src.number()];
        let mut out = [0u8; 64];
        out[..chunk].copy_from_slice(&a[pos * chunk..(pos + 1) * chunk]);
        if ins.op_kind(0) == OpKind::Register {
            self.wr_vec(ins, ins.op_register(0), &out, es);
        } else {
            let lanes = self.lanes(ins, chunk / es);
            let addr = self.ea(ins);
            self.store_elems(addr, &out, chunk, es, lanes, false)?;
        }
        Ok(())
    }

    /// An element-wise operation `dst = f(src1, src2)` on `es`-byte elements.
    fn binop(&mut self, ins: &Instruction, es: usize, f: impl Fn(u64, u64, usize) -> u64) -> R<()> {
        let dst = ins.op_register(0);
        let n = vl(dst);
        let need = self.lanes(ins, n / es);
        let a = self.vreg(ins, 1);
        let b = self.src(ins, 2, n, es, need)?;
        let mut out = [0u8; 64];
        for i in 0..n / es {
            put(&mut out, es, i, f(get(&a, es, i), get(&b, es, i), es));
        }
        self.wr_vec(ins, dst, &out, es);
        Ok(())
    }

    /// An element-wise comparison into an opmask register, ANDed with the write mask.
    fn cmp_k(
        &mut self,
        ins: &Instruction,
        es: usize,
        pred: impl Fn(u64, u64, usize) -> bool,
    ) -> R<()> {
        let n = vl(ins.op_register(1));
        let lanes = self.lanes(ins, n / es);
        let a = self.vreg(ins, 1);
        let b = self.src(ins, 2, n, es, lanes)?;
        let bits = (0..n / es).fold(0u64, |acc, i| {
            acc | (pred(get(&a, es, i), get(&b, es, i), es) as u64) << i
        });
        self.k[ins.op_register(0).number()] = bits & lanes;
        Ok(())
    }

    /// vpermq/vpermpd (immediate or index vector), vpermd/vpermps (index vector).
    fn perm(&mut self, ins: &Instruction, es: usize) -> R<()> {
        let dst = ins.op_register(0);
        let n = vl(dst);
        let nel = n / es;
        let mut out = [0u8; 64];
        if ins.op_count() == 3 && ins.op_kind(2) == OpKind::Immediate8 {
            let a = self.src(ins, 1, n, es, u64::MAX)?;
            let imm = ins.immediate8() as usize;
            for i in 0..nel {
                put(
                    &mut out,
                    es,
                    i,
                    get(&a, es, (i & !3) + (imm >> (2 * (i & 3)) & 3)),
                );
            }
        } else {
            let idx = self.vreg(ins, 1);
            let tbl = self.src(ins, 2, n, es, u64::MAX)?;
            for i in 0..nel {
                let j = get(&idx, es, i) as usize & (nel - 1);
                put(&mut out, es, i, get(&tbl, es, j));
            }
        }
        self.wr_vec(ins, dst, &out, es);
        Ok(())
    }

    /// Shifts of each element by an immediate or by the low quadword of an xmm/m128.
    fn vshift(&mut self, ins: &Instruction, es: usize) -> R<()> {
        use Mnemonic::*;
        let dst = ins.op_register(0);
        let n = vl(dst);
        let lanes = self.lanes(ins, n / es);
        let (a, count) = if ins.op_kind(2) == OpKind::Immediate8 {
            (self.src(ins, 1, n, es, lanes)?, ins.immediate8() as u64)
        } else {
            let c = self.src(ins, 2, 16, 8, u64::MAX)?;
            (self.vreg(ins, 1), get(&c, 8, 0))
        };
        let bits = 8 * es as u64;
        let m = ins.mnemonic();
        let mut out = [0u8; 64];
        for i in 0..n / es {
            let x = get(&a, es, i);
            let r = match m {
                Vpsllw | Vpslld | Vpsllq if count < bits => x << count,
                Vpsrlw | Vpsrld | Vpsrlq if count < bits => x >> count,
                Vpsraw | Vpsrad | Vpsraq => (sext(x, es) >> count.min(bits - 1)) as u64,
                _ => 0,
            };
            put(&mut out, es, i, r);
        }
        self.wr_vec(ins, dst, &out, es);
        Ok(())
    }

    /// Opmask instructions; `None` if `ins` is not one.
    fn exec_k(&mut self, ins: &Instruction) -> R<Option<Flow>> {
        use Mnemonic::*;
        let m = ins.mnemonic();
        let w = k_width(m);
        let wm = ones(w);
        let kn = |i: u32| ins.op_register(i).number();
        match m {
            Kmovb | Kmovw | Kmovd | Kmovq => match ins.op_kind(0) {
                OpKind::Register if ins.op_register(0).is_k() => {
                    let x = match ins.op_kind(1) {
                        OpKind::Register if ins.op_register(1).is_k() => self.k[kn(1)],
                        OpKind::Register => self.reg(ins.op_register(1)),
                        _ => self.load_u(self.ea(ins), w / 8)?,
                    };
                    self.k[kn(0)] = x & wm;
                }
                OpKind::Register => self.set_reg(ins.op_register(0), self.k[kn(1)] & wm),
                _ => self.store_u(self.ea(ins), w / 8, self.k[kn(1)])?,
            },
            Kshiftlb | Kshiftlw | Kshiftld | Kshiftlq => {
                let c = ins.immediate8() as usize;
                self.k[kn(0)] = if c < w { (self.k[kn(1)] << c) & wm } else { 0 };
            }
            Kshiftrb | Kshiftrw | Kshiftrd | Kshiftrq => {
                let c = ins.immediate8() as usize;
                self.k[kn(0)] = if c < w { (self.k[kn(1)] & wm) >> c } else { 0 };
            }
            Kandb | Kandw | Kandd | Kandq | Kandnb | Kandnw | Kandnd | Kandnq | Korb | Korw
            | Kord | Korq | Kxorb | Kxorw | Kxord | Kxorq | Kxnorb | Kxnorw | Kxnord | Kxnorq
            | Kaddb | Kaddw | Kaddd | Kaddq => {
                let (a, b) = (self.k[kn(1)], self.k[kn(2)]);
                let r = match m {
                    Kandb | Kandw | Kandd | Kandq => a & b,
                    Kandnb | Kandnw | Kandnd | Kandnq => !a & b,
                    Korb | Korw | Kord | Korq => a | b,
                    Kxorb | Kxorw | Kxord | Kxorq => a ^ b,
                    Kxnorb | Kxnorw | Kxnord | Kxnorq => !(a ^ b),
                    _ => a.wrapping_add(b),
                };
                self.k[kn(0)] = r & wm;
            }
            Knotb | Knotw | Knotd | Knotq => self.k[kn(0)] = !self.k[kn(1)] & wm,
            Kortestb | Kortestw | Kortestd | Kortestq => {
                let t = (self.k[kn(0)] | self.k[kn(1)]) & wm;
                let f = if t == 0 { ZF } else { 0 } | if t == wm { CF } else { 0 };
                self.set_flags(STATUS, f);
            }
            Ktestb | Ktestw | Ktestd | Ktestq => {
                let (a, b) = (self.k[kn(0)], self.k[kn(1)]);
                let f =
                    if a & b & wm == 0 { ZF } else { 0 } | if !a & b & wm == 0 { CF } else { 0 };
                self.set_flags(STATUS, f);
            }
            Kunpckbw | Kunpckwd | Kunpckdq => {
                let h = w / 2;
                self.k[kn(0)] = (self.k[kn(1)] & ones(h)) << h | (self.k[kn(2)] & ones(h));
            }
            _ => return Ok(None),
        }
        Ok(Some(Flow::Next))
    }
}

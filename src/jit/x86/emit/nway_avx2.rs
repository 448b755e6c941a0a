//! AVX2 n-way kernels ([`NwaySpec`]): one loop over a flat output, each block of 32 bytes of
//! output built in ymm0 from the default, then blended with each branch's value under its lane
//! mask from the last branch to the first (so the first true condition wins), and stored once.
//!
//! The kernel is `fn(ptrs, out, begin, end)` (rdi, rsi, rdx, rcx): it runs elements
//! `begin..end`, two blocks per main-loop iteration. Registers: r8 the element index, r9 `end`, rsi the output, rax and r10
//! scratch; the full operands' bases in rdi, rcx, rdx, rbx, rbp and r11-r15 (ten at most);
//! ymm0 a block's output, ymm1 a branch's lane mask, ymm2-3 operands loaded, ymm4 zero when a
//! condition is a mask, the splats (loaded once per call) in the registers above, up to ymm15.
//!
//! Lane masks are whole elements of ones or zeros, blended with `vpblendvb` at every width. A
//! condition yields a mask that either holds where the branch is taken or where it is not
//! (negation swaps the blend's operands): masks are widened to the output's elements with
//! `vpmovzxb*` and compared with zero (true where the mask byte is zero); integer `Eq` is
//! `vpcmpeq*`, `Lt` `vpcmpgt*` with swapped operands, `Le` the complement of `vpcmpgt*`;
//! unsigned `Le` of 1 to 4 bytes is `vpmaxu*` equal to the rhs, `Lt` its complement of the lhs,
//! of 8 bytes on operands with their sign bits flipped (a splat's once per call); floats `vcmpps` / `vcmppd` with
//! `EQ_OQ`, `LT_OQ` and `LE_OQ` (false on NaN, and `-0.0 == 0.0`), isnan `UNORD_Q` of the
//! operand with itself, isinf the magnitude equal to infinity, isfinite the complement of the
//! magnitude (as an integer) above the largest finite value; tests of integers are constant.
//! A condition over elements narrower than the output's compares the fewer bytes a block of
//! output covers in an xmm register (16, 8 or 4 bytes, loaded with `vmovdqu`, `vmovq` or
//! `vmovd`), then sign-extends its lanes to the output's (`vpmovsx*`); wider ones are not
//! taken (the engine's tiles run them). Constants follow the code.
//!
//! Elements outside whole blocks (the tail, and with non-temporal stores the head until the
//! output is 32-byte aligned) run one at a time with the same code on xmm registers, loaded
//! and stored one element at a time, so that no byte outside `begin..end` is touched.

use iced_x86::code_asm::*;

use super::emitter::{EmitError, Flow, Label, bug};
use super::encode::{Scratch, constant};
use super::nway::{BASES, Loc, SAVED, compared, first_of, operand_locs};
use super::regs::{XMM, YMM};
use crate::dtype::DType;
use crate::kernel::nway::{Form, NCond, NwaySpec};
use crate::pred::{Canon, TestOp};

type R = Result<(), EmitError>;

/// The output, a lane mask, two operands.
const ACC: usize = 0;
const MASK: usize = 1;
const T0: usize = 2;
const T1: usize = 3;
/// Zero, when a condition is a mask.
const ZERO: usize = 4;
/// Vector registers without an AVX-512 encoding.
const VREGS: usize = 16;

/// Where a branch's lane mask (in [`MASK`]) says the branch is taken.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Taken {
    /// Where the mask is set.
    Set,
    /// Where the mask is clear.
    Clear,
    /// Everywhere (no mask).
    Always,
    /// Nowhere (no mask).
    Never,
}

impl Taken {
    fn negated(self, not: bool) -> Taken {
        match (self, not) {
            (t, false) => t,
            (Taken::Set, true) => Taken::Clear,
            (Taken::Clear, true) => Taken::Set,
            (Taken::Always, true) => Taken::Never,
            (Taken::Never, true) => Taken::Always,
        }
    }
}

/// A constant of 32 bytes the code reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Const {
    /// The sign bit of each element of this width.
    Sign(usize),
    /// All bits but the sign of each float of this width.
    Abs(usize),
    /// Infinity in each float of this width.
    Inf(usize),
    /// The largest finite float in each element of this width.
    MaxFinite(usize),
}

impl Const {
    fn bytes(self) -> [u8; 32] {
        let (w, v): (usize, u64) = match self {
            Const::Sign(w) => (w, 1u64 << (8 * w - 1)),
            Const::Abs(4) => (4, 0x7fff_ffff),
            Const::Abs(_) => (8, 0x7fff_ffff_ffff_ffff),
            Const::Inf(4) => (4, 0x7f80_0000),
            Const::Inf(_) => (8, 0x7ff0_0000_0000_0000),
            Const::MaxFinite(4) => (4, 0x7f7f_ffff),
            Const::MaxFinite(_) => (8, 0x7fef_ffff_ffff_ffff),
        };
        let mut b = [0u8; 32];
        for c in b.chunks_mut(w) {
            c.copy_from_slice(&v.to_le_bytes()[..w]);
        }
        b
    }
}

/// Whether `d` is an unsigned integer.
fn unsigned(d: DType) -> bool {
    matches!(d, DType::U8 | DType::U16 | DType::U32 | DType::U64)
}

/// Whether `d` is f32 or f64.
fn float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64)
}

/// The vector registers a spec's splats may use from.
fn splat0(spec: &NwaySpec) -> usize {
    let masks = spec
        .branches
        .iter()
        .any(|b| matches!(b.cond, NCond::Mask(_)));
    if masks { ZERO + 1 } else { ZERO }
}

/// Whether the AVX2 n-way emitter takes `spec`: flat ([`NwayFn`](crate::kernel::nway::NwayFn)
/// kernels, not rows); elements of 1 to 8 bytes; conditions of masks,
/// of integer and f32 / f64 dtypes no wider than the output's elements (tests of integers of
/// any), at most ten buffers of full operands (operands of one buffer share its base
/// register) and as many splats as vector registers remain.
pub(in crate::jit::x86) fn covers(spec: &NwaySpec) -> bool {
    let w = spec.width;
    let conds_ok = spec.branches.iter().all(|b| match b.cond {
        NCond::Mask(_) => true,
        NCond::Cmp(_, d, _, _) => compared(d) && d.width() <= w,
        NCond::Test(_, d, _) => compared(d) && (d.width() <= w || !float(d)),
    });
    let forms = spec.forms();
    let full = forms.iter().filter(|f| **f == Form::Full).count();
    // Operands that share a buffer share its base register.
    let bases = forms
        .iter()
        .enumerate()
        .filter(|&(j, f)| *f == Form::Full && first_of(spec, j) == j)
        .count();
    !spec.rows
        && [1, 2, 4, 8].contains(&w)
        && conds_ok
        && bases <= BASES.len()
        && forms.len() - full <= VREGS - splat0(spec)
}

struct Nway<'s> {
    a: CodeAssembler,
    spec: &'s NwaySpec,
    /// Each operand's location, in call order.
    locs: Vec<Loc>,
    /// Whether an operand is a splat with its sign bits flipped once per call (the operands of
    /// u64 `Lt` and `Le`).
    flipped: Vec<bool>,
    /// Output elements per block.
    n: usize,
    /// One element at a time on xmm registers (else a block on ymm).
    one: bool,
    /// A condition narrower than the output's elements: compared in xmm registers (the
    /// fewer bytes that a block covers), its lane mask widened after.
    narrow: bool,
    /// The block's first element after `r8` (the main loop runs two blocks an iteration).
    disp: i32,
    /// The constants read (placed after the code).
    consts: Vec<Vec<u8>>,
    /// Labels and branches: laid out and encoded as the two-way kernels' ([`Parts`]).
    flow: Flow,
}

/// The machine code of `spec`'s kernel.
pub(in crate::jit::x86) fn emit(spec: &NwaySpec) -> Result<Vec<u8>, EmitError> {
    if !covers(spec) {
        return Err(bug("an n-way spec the AVX2 emitter does not take"));
    }
    // The thread's assembler, encoder and encodings, as the two-way kernels use them.
    let mut sc = Scratch::take()?;
    let mut e = Nway {
        a: sc.a,
        spec,
        locs: Vec::new(),
        flipped: Vec::new(),
        n: 32 / spec.width,
        one: false,
        narrow: false,
        disp: 0,
        consts: Vec::new(),
        flow: Flow::default(),
    };
    let emitted = e.kernel();
    sc.a = e.a;
    sc.encode(&e.flow, &e.consts, emitted)
}

/// `$body` with `$t` the register table of the current vectors (xmm one element at a time,
/// else ymm).
macro_rules! v {
    ($s:expr, $t:ident => $body:expr) => {
        if $s.one || $s.narrow {
            let $t = &XMM;
            $body
        } else {
            let $t = &YMM;
            $body
        }
    };
}

impl Nway<'_> {
    fn kernel(&mut self) -> R {
        let w = self.spec.width;
        let early = self.flow.label();
        self.a.cmp(rdx, rcx)?;
        self.flow.jump(&mut self.a, Some(0x3), early)?;
        for r in SAVED {
            self.a.push(r)?;
        }
        self.a.mov(r8, rdx)?;
        self.a.mov(r9, rcx)?;
        self.a.mov(rax, rdi)?;
        // Splats first (r10 as the pointer), then the bases (which reuse rdi, rcx and rdx).
        self.locs = operand_locs(&mut self.a, self.spec, 32, splat0(self.spec), r10)?;
        if splat0(self.spec) > ZERO {
            self.a.vpxor(ymm4, ymm4, ymm4)?;
        }
        self.flipped = vec![false; self.locs.len()];
        let mut j = 0;
        for b in &self.spec.branches {
            if let NCond::Cmp(op, d, _, _) = b.cond
                && op != Canon::Eq
                && d == DType::U64
            {
                for k in [j, j + 1] {
                    if let Loc::Splat(s) = self.locs[k] {
                        let sign = self.constant(Const::Sign(d.width()));
                        self.a.vpxor(YMM[s], YMM[s], sign)?;
                        self.flipped[k] = true;
                    }
                }
            }
            j += b.cond.forms().len() + 1;
        }
        let tail = self.flow.label();
        let plain = self.flow.label();
        if self.spec.nt {
            // The head: elements until the output is 32-byte aligned (never, when its
            // elements are not aligned to their width: then no non-temporal store at all).
            let head = self.flow.label();
            let main = self.flow.label();
            self.a.lea(r10, ptr(rsi + r8 * w as u32))?;
            if w > 1 {
                self.a.test(r10, (w - 1) as i32)?;
                self.flow.jump(&mut self.a, Some(0x5), plain)?;
            }
            self.a.neg(r10)?;
            self.a.and(r10, 31)?;
            if w > 1 {
                self.a.shr(r10, w.trailing_zeros())?;
            }
            self.a.add(r10, r8)?;
            self.a.cmp(r10, r9)?;
            self.a.cmova(r10, r9)?;
            self.flow.bind(&self.a, head);
            self.a.cmp(r8, r10)?;
            self.flow.jump(&mut self.a, Some(0x3), main)?;
            self.element()?;
            self.a.inc(r8)?;
            self.flow.jump(&mut self.a, None, head)?;
            let nt_out = self.flow.label();
            self.blocks(true, main, nt_out)?;
            self.flow.bind(&self.a, nt_out);
            self.a.sfence()?;
            self.flow.jump(&mut self.a, None, tail)?;
        }
        self.blocks(false, plain, tail)?;
        self.flow.bind(&self.a, tail);
        let done = self.flow.label();
        self.a.cmp(r8, r9)?;
        self.flow.jump(&mut self.a, Some(0x3), done)?;
        self.element()?;
        self.a.inc(r8)?;
        self.flow.jump(&mut self.a, None, tail)?;
        self.flow.bind(&self.a, done);
        self.a.vzeroupper()?;
        for r in SAVED.into_iter().rev() {
            self.a.pop(r)?;
        }
        self.flow.bind(&self.a, early);
        self.a.ret()?;
        Ok(())
    }

    /// Whole blocks (non-temporal stores with `nt`), two an iteration, then one if one remains;
    /// the first instruction bound to `top`; it ends by jumping to `out`.
    fn blocks(&mut self, nt: bool, top: Label, out: Label) -> R {
        let n = self.n as i32;
        let one = self.flow.label();
        let two = self.flow.label();
        self.flow.bind(&self.a, top);
        // r10: the last index from which two blocks fit.
        self.a.mov(r10, r9)?;
        self.a.sub(r10, 2 * n)?;
        self.flow.jump(&mut self.a, Some(0x2), one)?;
        self.a.cmp(r8, r10)?;
        self.flow.jump(&mut self.a, Some(0x7), one)?;
        self.flow.bind(&self.a, two);
        for u in 0..2 {
            self.block(nt, u * n)?;
        }
        self.a.add(r8, 2 * n)?;
        self.a.cmp(r8, r10)?;
        self.flow.jump(&mut self.a, Some(0x6), two)?;
        self.flow.bind(&self.a, one);
        self.a.lea(r10, ptr(r8 + n))?;
        self.a.cmp(r10, r9)?;
        self.flow.jump(&mut self.a, Some(0x7), out)?;
        self.block(nt, 0)?;
        self.a.add(r8, n)?;
        self.flow.jump(&mut self.a, None, out)?;
        Ok(())
    }

    /// The block of elements from `r8 + disp`, stored (non-temporally with `nt`).
    fn block(&mut self, nt: bool, disp: i32) -> R {
        self.one = false;
        self.disp = disp;
        self.body()?;
        let o = self.at(rsi, self.spec.width);
        if nt {
            self.a.vmovntdq(o, ymm0)?;
        } else {
            self.a.vmovdqu(o, ymm0)?;
        }
        self.disp = 0;
        Ok(())
    }

    /// The element of `ow` bytes from `base` at the current block (or element).
    fn at(&self, base: AsmRegister64, ow: usize) -> AsmMemoryOperand {
        ptr(base + r8 * ow as u32 + self.disp * ow as i32)
    }

    /// Element `r8` on xmm registers, stored alone.
    fn element(&mut self) -> R {
        self.one = true;
        self.body()?;
        let o = ptr(rsi + r8 * self.spec.width as u32);
        match self.spec.width {
            1 => self.a.vpextrb(o, xmm0, 0)?,
            2 => self.a.vpextrw(o, xmm0, 0)?,
            4 => self.a.vmovd(o, xmm0)?,
            _ => self.a.vmovq(o, xmm0)?,
        }
        Ok(())
    }

    /// The output of a block (or element) from `r8` in [`ACC`]: the default, then every
    /// branch blended in from the last to the first.
    fn body(&mut self) -> R {
        let w = self.spec.width;
        let nb = self.spec.branches.len();
        let mut first = Vec::with_capacity(nb);
        let mut j = 0;
        for b in &self.spec.branches {
            first.push(j);
            j += b.cond.forms().len() + 1;
        }
        let d = self.load(j, w, ACC)?;
        if d != ACC {
            v!(self, t => self.a.vmovdqa(t[ACC], t[d])?);
        }
        for bi in (0..nb).rev() {
            let b = self.spec.branches[bi];
            let f = first[bi];
            let vj = f + b.cond.forms().len();
            match self.cond(b.cond, f)?.negated(b.not) {
                Taken::Never => {}
                Taken::Always => {
                    let x = self.load(vj, w, ACC)?;
                    if x != ACC {
                        v!(self, t => self.a.vmovdqa(t[ACC], t[x])?);
                    }
                }
                Taken::Set => match self.locs[vj] {
                    Loc::Base(r) if !self.one => {
                        self.a.vpblendvb(ymm0, ymm0, self.at(r, w), ymm1)?;
                    }
                    _ => {
                        let x = self.load(vj, w, T0)?;
                        v!(self, t => self.a.vpblendvb(t[ACC], t[ACC], t[x], t[MASK])?);
                    }
                },
                Taken::Clear => {
                    let x = self.load(vj, w, T0)?;
                    v!(self, t => self.a.vpblendvb(t[ACC], t[x], t[ACC], t[MASK])?);
                }
            }
        }
        Ok(())
    }

    /// The operand of constant `c`.
    fn constant(&mut self, c: Const) -> AsmMemoryOperand {
        constant(&mut self.consts, &c.bytes())
    }

    /// Operand `j` (elements of `ow` bytes) in a vector register: its splat's, or loaded into
    /// `d` (the elements of a block, or element `r8` alone, the other lanes zero).
    fn load(&mut self, j: usize, ow: usize, d: usize) -> Result<usize, EmitError> {
        let r = match self.locs[j] {
            Loc::Splat(s) => return Ok(s),
            Loc::Base(r) => r,
        };
        let m = self.at(r, ow);
        let bytes = if self.one { ow } else { self.n * ow };
        match bytes {
            32 => self.a.vmovdqu(YMM[d], m)?,
            16 => self.a.vmovdqu(XMM[d], m)?,
            1 => {
                self.a.movzx(eax, byte_ptr(r + r8))?;
                self.a.vmovd(XMM[d], eax)?;
            }
            2 => {
                self.a.movzx(eax, word_ptr(r + r8 * 2))?;
                self.a.vmovd(XMM[d], eax)?;
            }
            4 => self.a.vmovd(XMM[d], m)?,
            _ => self.a.vmovq(XMM[d], m)?,
        }
        Ok(d)
    }

    /// Mask operand `j` widened to the output's elements in a vector register: its splat's
    /// (the byte in every byte), or loaded into `d` (a non-zero byte a non-zero element).
    fn load_mask(&mut self, j: usize, d: usize) -> Result<usize, EmitError> {
        let r = match self.locs[j] {
            Loc::Splat(s) => return Ok(s),
            Loc::Base(r) => r,
        };
        if self.one {
            return self.load(j, 1, d);
        }
        let m = self.at(r, 1);
        let y = YMM[d];
        match self.spec.width {
            1 => self.a.vmovdqu(y, m)?,
            2 => self.a.vpmovzxbw(y, m)?,
            4 => self.a.vpmovzxbd(y, m)?,
            _ => self.a.vpmovzxbq(y, m)?,
        }
        Ok(d)
    }

    /// The lane mask of condition `c` (its operands from operand `f` on) in [`MASK`], and where
    /// it says the condition holds: a condition narrower than the output's elements compared
    /// in xmm registers, its lanes then sign-extended to the output's.
    fn cond(&mut self, c: NCond, f: usize) -> Result<Taken, EmitError> {
        let (w, pw) = (self.spec.width, c.width());
        if matches!(c, NCond::Mask(_)) || pw == w {
            return self.cond_at(c, f, w);
        }
        self.narrow = true;
        let taken = self.cond_at(c, f, pw);
        self.narrow = false;
        let taken = taken?;
        if matches!(taken, Taken::Set | Taken::Clear) {
            let x = XMM[MASK];
            macro_rules! widen {
                ($m:ident) => {
                    if self.one {
                        self.a.$m(x, x)?
                    } else {
                        self.a.$m(YMM[MASK], x)?
                    }
                };
            }
            match (pw, w) {
                (1, 2) => widen!(vpmovsxbw),
                (1, 4) => widen!(vpmovsxbd),
                (1, _) => widen!(vpmovsxbq),
                (2, 4) => widen!(vpmovsxwd),
                (2, _) => widen!(vpmovsxwq),
                _ => widen!(vpmovsxdq),
            }
        }
        Ok(taken)
    }

    /// [`Nway::cond`] with the condition's operands of `w` bytes.
    fn cond_at(&mut self, c: NCond, f: usize, w: usize) -> Result<Taken, EmitError> {
        Ok(match c {
            NCond::Mask(_) => {
                let x = self.load_mask(f, T0)?;
                v!(self, t => per_width!(
                    w,
                    self.a,
                    [vpcmpeqb, vpcmpeqw, vpcmpeqd, vpcmpeqq],
                    (t[MASK], t[x], t[ZERO])
                )?);
                Taken::Clear
            }
            NCond::Cmp(op, d, _, _) => {
                let mut x = self.load(f, w, T0)?;
                let mut y = self.load(f + 1, w, T1)?;
                if float(d) {
                    let imm = match op {
                        Canon::Eq => 0x00,
                        Canon::Lt => 0x11,
                        Canon::Le => 0x12,
                    };
                    v!(self, t => if d == DType::F32 {
                        self.a.vcmpps(t[MASK], t[x], t[y], imm)?
                    } else {
                        self.a.vcmppd(t[MASK], t[x], t[y], imm)?
                    });
                    return Ok(Taken::Set);
                }
                if unsigned(d) && op != Canon::Eq && w < 8 {
                    // `a <= b` where `max(a, b) == b`; `a < b` where not `max(a, b) == a`.
                    let (eq, taken) = if op == Canon::Le {
                        (y, Taken::Set)
                    } else {
                        (x, Taken::Clear)
                    };
                    v!(self, t => {
                        per_width!(
                            w,
                            self.a,
                            [vpmaxub, vpmaxuw, vpmaxud, vpmaxud],
                            (t[MASK], t[x], t[y])
                        )?;
                        per_width!(
                            w,
                            self.a,
                            [vpcmpeqb, vpcmpeqw, vpcmpeqd, vpcmpeqd],
                            (t[MASK], t[MASK], t[eq])
                        )?;
                    });
                    return Ok(taken);
                }
                if unsigned(d) && op != Canon::Eq {
                    let s = self.constant(Const::Sign(w));
                    if !self.flipped[f] {
                        v!(self, t => self.a.vpxor(t[T0], t[x], s)?);
                        x = T0;
                    }
                    if !self.flipped[f + 1] {
                        v!(self, t => self.a.vpxor(t[T1], t[y], s)?);
                        y = T1;
                    }
                }
                match op {
                    Canon::Eq => {
                        v!(self, t => per_width!(
                            w,
                            self.a,
                            [vpcmpeqb, vpcmpeqw, vpcmpeqd, vpcmpeqq],
                            (t[MASK], t[x], t[y])
                        )?);
                        Taken::Set
                    }
                    Canon::Lt => {
                        v!(self, t => per_width!(
                            w,
                            self.a,
                            [vpcmpgtb, vpcmpgtw, vpcmpgtd, vpcmpgtq],
                            (t[MASK], t[y], t[x])
                        )?);
                        Taken::Set
                    }
                    Canon::Le => {
                        v!(self, t => per_width!(
                            w,
                            self.a,
                            [vpcmpgtb, vpcmpgtw, vpcmpgtd, vpcmpgtq],
                            (t[MASK], t[x], t[y])
                        )?);
                        Taken::Clear
                    }
                }
            }
            NCond::Test(op, d, _) => {
                if !float(d) {
                    // Integers: isnan and isinf never hold, isfinite always.
                    return Ok(if op == TestOp::IsFinite {
                        Taken::Always
                    } else {
                        Taken::Never
                    });
                }
                let x = self.load(f, w, T0)?;
                let f32 = d == DType::F32;
                match op {
                    TestOp::IsNan => {
                        v!(self, t => if f32 {
                            self.a.vcmpps(t[MASK], t[x], t[x], 3)?
                        } else {
                            self.a.vcmppd(t[MASK], t[x], t[x], 3)?
                        });
                        Taken::Set
                    }
                    TestOp::IsInf => {
                        let (abs, inf) =
                            (self.constant(Const::Abs(w)), self.constant(Const::Inf(w)));
                        v!(self, t => {
                            self.a.vpand(t[MASK], t[x], abs)?;
                            if f32 {
                                self.a.vpcmpeqd(t[MASK], t[MASK], inf)?
                            } else {
                                self.a.vpcmpeqq(t[MASK], t[MASK], inf)?
                            }
                        });
                        Taken::Set
                    }
                    TestOp::IsFinite => {
                        let abs = self.constant(Const::Abs(w));
                        let max = self.constant(Const::MaxFinite(w));
                        v!(self, t => {
                            self.a.vpand(t[MASK], t[x], abs)?;
                            if f32 {
                                self.a.vpcmpgtd(t[MASK], t[MASK], max)?
                            } else {
                                self.a.vpcmpgtq(t[MASK], t[MASK], max)?
                            }
                        });
                        Taken::Clear
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::nway::NBranch;
    use iced_x86::{Decoder, DecoderOptions, EncodingKind};

    /// Specs of every output width with every kind of condition the emitter takes (each width
    /// up to the output's), negated or not, full and splat operands, with and without
    /// non-temporal stores.
    fn specs() -> Vec<NwaySpec> {
        let dtypes = [
            DType::I8,
            DType::U8,
            DType::I16,
            DType::U16,
            DType::I32,
            DType::U32,
            DType::F32,
            DType::I64,
            DType::U64,
            DType::F64,
        ];
        let mut v = Vec::new();
        for w in [1, 2, 4, 8] {
            for (i, &d) in dtypes.iter().filter(|d| d.width() <= w).enumerate() {
                let (f, g) = if i % 2 == 0 {
                    (Form::Full, Form::Splat)
                } else {
                    (Form::Splat, Form::Full)
                };
                let branches = [
                    NCond::Mask(f),
                    NCond::Cmp(Canon::Lt, d, f, g),
                    NCond::Cmp(Canon::Le, d, g, f),
                    NCond::Cmp(Canon::Eq, d, f, f),
                    NCond::Test(TestOp::IsNan, d, f),
                    NCond::Test(TestOp::IsInf, d, g),
                    NCond::Test(TestOp::IsFinite, d, f),
                ]
                .into_iter()
                .enumerate()
                .map(|(k, cond)| NBranch {
                    cond,
                    not: k % 2 == i % 2,
                    value: if k % 3 == 0 { g } else { f },
                })
                .collect::<Vec<_>>();
                // Three branches a spec, within the registers.
                for part in branches.chunks(3) {
                    let spec = NwaySpec {
                        width: w,
                        nt: i % 2 == 1,
                        rows: false,
                        same: smallvec::SmallVec::new(),
                        branches: part.iter().copied().collect(),
                        default: g,
                    };
                    assert!(covers(&spec), "{spec:?}");
                    v.push(spec);
                }
            }
        }
        v
    }

    #[test]
    fn code_is_avx2_only() {
        for spec in specs() {
            let code = emit(&spec).unwrap();
            let mut dec = Decoder::new(64, &code, DecoderOptions::NONE);
            // The instructions, up to the constants after the last `ret`.
            for ins in dec.iter() {
                assert_ne!(ins.encoding(), EncodingKind::EVEX, "{ins} in {spec:?}");
                if ins.mnemonic() == iced_x86::Mnemonic::Ret {
                    break;
                }
            }
        }
    }

    #[test]
    fn refuses_wider_conditions_and_too_many_operands() {
        let cmp = |d| NBranch {
            cond: NCond::Cmp(Canon::Eq, d, Form::Full, Form::Splat),
            not: false,
            value: Form::Splat,
        };
        let spec = |width, branches: Vec<NBranch>| NwaySpec {
            width,
            nt: false,
            rows: false,
            same: smallvec::SmallVec::new(),
            branches: branches.into_iter().collect(),
            default: Form::Full,
        };
        assert!(covers(&spec(4, vec![cmp(DType::F32)])));
        assert!(!covers(&spec(4, vec![cmp(DType::F64)])));
        assert!(!covers(&spec(2, vec![cmp(DType::F16)])));
        // Two splats a branch: six branches fit the registers above the temporaries, seven not.
        assert!(covers(&spec(4, vec![cmp(DType::I32); 6])));
        assert!(!covers(&spec(4, vec![cmp(DType::I32); 7])));
    }
}

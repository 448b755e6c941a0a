//! AVX-512 n-way kernels ([`NwaySpec`]): one loop over a flat output, each block of 64 bytes of
//! output built in a zmm register from the default, then overwritten under each branch's opmask
//! from the last branch to the first (so the first true condition wins), and stored once.
//!
//! The kernel is `fn(ptrs, out, begin, end)` (rdi, rsi, rdx, rcx): it runs elements
//! `begin..end`; a kernel of rows ([`NwaySpec::rows`]) is `fn(ptrs, out, begin, end, rows,
//! strides)` and runs them in each row, its loop state (rows left, the strides, `begin`) in a
//! stack frame, the bases and the output moved by the strides after each row. Registers: r8 the element index, r9 `end`, rsi the output, rax and r10
//! scratch; the full operands' bases in rdi, rcx, rdx, rbx, rbp and r11-r15 (ten at most); zmm0-3
//! a block's output (four blocks per main-loop iteration), zmm4-11 the condition operands
//! loaded, from zmm12 four registers per held buffer, then the splats (loaded once per call);
//! k1-k4 the blocks' opmasks, k7 the lane mask of a partial block (the head that aligns
//! non-temporal stores, and the tail).
//!
//! A buffer that is several operands ([`NwaySpec::same`]), one of them a condition's (numpy's
//! `nan_to_num`: `x` in three tests and the default), is held: loaded once per block into a
//! register of its own, from which its conditions compare and its values merge, where the
//! registers allow (four blocks' worth per buffer besides the splats). With `x` loaded four
//! times per block, nan_to_num over 4096 f32 in L1 ran slower than three two-way passes.
//!
//! One opmask bit per element whatever its width: a condition over elements of `pw` bytes
//! compares the `64 / w * pw` bytes of its operands that a block of `w`-byte output elements
//! covers (an xmm, ymm or zmm; 8 bytes are loaded with `vmovq`). Conditions wider than the
//! output (`pw > w`) are not taken (the engine's tiles run them). Compares: masks `vptestmb`,
//! floats `vcmpps` / `vcmppd` with `EQ_OQ`, `LT_OQ`, `LE_OQ` or, negated, `NEQ_UQ`, `NLT_UQ`,
//! `NLE_UQ`; integers `vpcmp*` / `vpcmpu*`; isnan `UNORD_Q` (negated `ORD_Q`), isinf and isfinite
//! `vfpclass`; tests of integers are constant. f16 and bf16 compare as 16-bit integer keys (the
//! magnitude, negated where the sign is set, so -0.0 == 0.0) signed, with the elements where
//! either side is NaN (a magnitude above infinity's bits) taken out; their tests compare the
//! magnitude with infinity's bits (a constant after the code). Partial blocks load under the lane mask with
//! zeroing and compare under it, so a masked-off element is never read nor written.

use iced_x86::code_asm::*;

use super::emitter::{EmitError, Flow, Label, bug};
use super::encode::{Scratch, constant};
use super::regs::{K, XMM, YMM, ZMM};
use crate::dtype::DType;
use crate::kernel::nway::{Form, NCond, NwaySpec};
use crate::pred::{Canon, TestOp};

type R = Result<(), EmitError>;

/// The callee-saved registers a kernel saves on entry (the AVX2 n-way kernels' too).
pub(super) const SAVED: [AsmRegister64; 6] = [rbx, rbp, r12, r13, r14, r15];
/// Registers of the full operands' bases (the AVX2 n-way kernels' too).
pub(super) const BASES: [AsmRegister64; 10] = [rdi, rcx, rdx, rbx, rbp, r11, r12, r13, r14, r15];
/// The first splat register, and how many there are.
const SPLAT0: usize = 12;
const SPLATS: usize = 20;
/// Stack bytes of a kernel of rows: the rows left, the strides' address, `begin`, padding.
const ROWS_FRAME: i32 = 32;
/// Blocks per main-loop iteration.
const UNROLL: usize = 4;
/// Kernels of this many branches or more run half as many blocks per iteration: their blocks
/// are long enough, and the kernel assembles in less time (five branches over f32, a Zen 4
/// host: 4096, 256K and 4M elements ran as fast; new patterns of four to eight branches
/// compiled in 14-24 µs, was 16-29).
const UNROLL_HALF_FROM: usize = 4;
/// The red-zone byte that says the partial block runs the non-temporal head (leaf code: the
/// 128 bytes below `rsp` are the kernel's).
const HEAD_FLAG: i32 = -8;
/// Bytes of output per block: a zmm. The emitter also writes ymm blocks (32): on the bench's
/// n-way cases (a Zen 4 host, 2026-11-27, two runs each way) they were no faster on any, and
/// slower on case_when_f64_1m (2.1-2.3x its copy roofline against 1.45) and clip_u8_image
/// (1.19-1.22x against 1.02-1.04). Neither a four-way walk of non-temporal calls (a block of
/// each quarter in turn, as the two-way kernels' `+4way`) nor `prefetchw` of the output 1 or
/// 2 KiB ahead of ordinary stores (the two-way `+pfw`) measured faster there.
const BLOCK_BYTES: usize = 64;

/// Where a kernel finds an operand (the AVX2 n-way kernels' too).
#[derive(Clone, Copy)]
pub(super) enum Loc {
    /// Elements from the base in this register.
    Base(AsmRegister64),
    /// The splat in this vector register.
    Splat(usize),
}

/// Whether the x86 n-way emitters compare conditions of dtype `d` (integers, f32 and f64; an
/// exhaustive match, so that a new dtype is decided here rather than taken by default). The
/// AVX-512 emitter also compares f16 and bf16 ([`half`]).
pub(super) fn compared(d: DType) -> bool {
    match d {
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => true,
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => true,
        DType::F32 | DType::F64 => true,
        DType::Bool | DType::F16 | DType::BF16 | DType::Complex64 | DType::Complex128 => false,
    }
}

/// The bits of +infinity of a half-width float dtype (f16, bf16), which the AVX-512 n-way
/// emitter compares as 16-bit integer keys; `None` for the others.
fn half(d: DType) -> Option<u16> {
    match d {
        DType::F16 => Some(0x7c00),
        DType::BF16 => Some(0x7f80),
        _ => None,
    }
}

/// Whether the AVX-512 n-way emitter takes `spec`: elements of 1 to 8 bytes, conditions of
/// masks and of integer and f32 / f64 dtypes no wider than the output's elements, at most ten
/// full operands and twenty splats.
pub(in crate::jit::x86) fn covers(spec: &NwaySpec) -> bool {
    let w = spec.width;
    let conds_ok = spec.branches.iter().all(|b| {
        let pw = b.cond.width();
        let dtype_ok = match b.cond {
            NCond::Mask(_) => true,
            NCond::Cmp(_, d, _, _) | NCond::Test(_, d, _) => compared(d) || half(d).is_some(),
        };
        dtype_ok && pw <= w
    });
    let forms = spec.forms();
    let full = forms.iter().filter(|f| **f == Form::Full).count();
    // Operands that share a buffer share its base register.
    let bases = forms
        .iter()
        .enumerate()
        .filter(|&(j, f)| *f == Form::Full && first_of(spec, j) == j)
        .count();
    [1, 2, 4, 8].contains(&w) && conds_ok && bases <= BASES.len() && forms.len() - full <= SPLATS
}

/// The location of the next full operand (operand `locs.len()`): its buffer's base register
/// (the next of [`BASES`], counted in `bases`, for the first operand of a buffer).
fn full_loc(spec: &NwaySpec, locs: &[Loc], bases: &mut usize) -> Loc {
    let j = locs.len();
    let first = first_of(spec, j);
    if first < j {
        locs[first]
    } else {
        *bases += 1;
        Loc::Base(BASES[*bases - 1])
    }
}

/// The prologue of an x86 n-way kernel, with the operands' pointers at `rax`: each splat
/// broadcast into a vector register of `vbytes` bytes, from `splat0` on (its pointer read into
/// `tmp`), then each buffer's base register loaded (the pointers' registers reused). Each
/// operand's location, in call order.
pub(super) fn operand_locs(
    a: &mut CodeAssembler,
    spec: &NwaySpec,
    vbytes: usize,
    splat0: usize,
    tmp: AsmRegister64,
) -> Result<Vec<Loc>, EmitError> {
    let mut locs = Vec::new();
    let (mut splats, mut bases) = (0, 0);
    for (j, (f, ow)) in spec.operands().into_iter().enumerate() {
        let l = match f {
            Form::Splat => {
                let s = splat0 + splats;
                splats += 1;
                a.mov(tmp, qword_ptr(rax + 8 * j as i32))?;
                v3!(vbytes, t => match ow {
                    1 => a.vpbroadcastb(t[s], byte_ptr(tmp))?,
                    2 => a.vpbroadcastw(t[s], word_ptr(tmp))?,
                    4 => a.vpbroadcastd(t[s], dword_ptr(tmp))?,
                    _ => a.vpbroadcastq(t[s], qword_ptr(tmp))?,
                });
                Loc::Splat(s)
            }
            Form::Full => full_loc(spec, &locs, &mut bases),
        };
        locs.push(l);
    }
    for (j, &l) in locs.iter().enumerate() {
        if let Loc::Base(r) = l
            && first_of(spec, j) == j
        {
            a.mov(r, qword_ptr(rax + 8 * j as i32))?;
        }
    }
    Ok(locs)
}

/// The first operand that operand `j` shares its buffer with ([`NwaySpec::same`]), `j` when
/// none.
pub(super) fn first_of(spec: &NwaySpec, j: usize) -> usize {
    spec.same.get(j).map_or(j, |&f| f as usize)
}

/// The operands [`Nway`] holds in registers: per operand its group, per group its first
/// operand and element width. Groups of [`NwaySpec::same`] with a condition's operand among
/// them, as many as leave room for four blocks' registers of each and the splats.
fn held_groups(spec: &NwaySpec) -> (Vec<Option<usize>>, Vec<(usize, usize)>) {
    let ops = spec.operands();
    let mut held = vec![None; ops.len()];
    let mut groups = Vec::new();
    if spec.same.len() != ops.len() {
        return (held, groups);
    }
    // Which operands are conditions'.
    let mut is_cond = Vec::with_capacity(ops.len());
    for b in &spec.branches {
        is_cond.extend(b.cond.forms().iter().map(|_| true));
        is_cond.push(false);
    }
    is_cond.push(false);
    let splats = ops.iter().filter(|(f, _)| *f == Form::Splat).count();
    for j in 0..ops.len() {
        let first = spec.same[j] as usize;
        let members = (0..ops.len()).filter(|&i| spec.same[i] as usize == first);
        let (count, cond) = members.fold((0, false), |(c, k), i| (c + 1, k || is_cond[i]));
        if first != j || count < 2 || !cond || ops[j].0 != Form::Full {
            continue;
        }
        if SPLAT0 + UNROLL * (groups.len() + 1) + splats > 32 {
            break;
        }
        groups.push((j, ops[j].1));
    }
    for (j, h) in held.iter_mut().enumerate() {
        *h = groups
            .iter()
            .position(|&(first, _)| first == spec.same[j] as usize);
    }
    (held, groups)
}

struct Nway<'s> {
    a: CodeAssembler,
    spec: &'s NwaySpec,
    /// Each operand's location, in call order.
    locs: Vec<Loc>,
    /// Output elements per block.
    n: usize,
    /// Bytes of output per block (a zmm or a ymm).
    vbytes: usize,
    /// Each operand's held group: a buffer several operands share, at least one of them a
    /// condition's, loaded once per block into a register of its own ([`Nway::held_reg`]).
    held: Vec<Option<usize>>,
    /// Each held group's first operand and its element width.
    groups: Vec<(usize, usize)>,
    /// Labels and branches: laid out and encoded as the two-way kernels' ([`Parts`]).
    flow: Flow,
    /// The constants read (placed after the code).
    consts: Vec<Vec<u8>>,
}

/// The machine code of `spec`'s kernel.
pub(in crate::jit::x86) fn emit(spec: &NwaySpec) -> Result<Vec<u8>, EmitError> {
    if !covers(spec) {
        return Err(bug("an n-way spec the AVX-512 emitter does not take"));
    }
    // The thread's assembler, encoder and encodings, as the two-way kernels use them: each
    // instruction encoded once per thread, branches laid out without iced's block encoder
    // (half of a new kernel's time).
    let mut sc = Scratch::take()?;
    sc.a.set_prefer_vex(false);
    let vbytes = BLOCK_BYTES;
    let (held, groups) = held_groups(spec);
    let mut e = Nway {
        a: sc.a,
        spec,
        locs: Vec::new(),
        n: vbytes / spec.width,
        vbytes,
        held,
        groups,
        flow: Flow::default(),
        consts: Vec::new(),
    };
    let emitted = e.kernel();
    sc.a = e.a;
    sc.encode(&e.flow, &e.consts, emitted)
}

impl Nway<'_> {
    /// The first splat register (after the held groups' registers).
    fn splat0(&self) -> usize {
        SPLAT0 + UNROLL * self.groups.len()
    }

    /// The register of held group `h` in block `u`.
    fn held_reg(h: usize, u: usize) -> usize {
        SPLAT0 + UNROLL * h + u
    }

    fn kernel(&mut self) -> R {
        let w = self.spec.width;
        let early = self.flow.label();
        let rows = self.spec.rows;
        self.a.cmp(rdx, rcx)?;
        self.flow.jump(&mut self.a, Some(0x3), early)?;
        if rows {
            self.a.test(r8, r8)?;
            self.flow.jump(&mut self.a, Some(0x4), early)?;
        }
        for r in SAVED {
            self.a.push(r)?;
        }
        if rows {
            // The frame: rows left, the strides, begin.
            self.a.sub(rsp, ROWS_FRAME)?;
            self.a.mov(qword_ptr(rsp), r8)?;
            self.a.mov(qword_ptr(rsp + 8), r9)?;
            self.a.mov(qword_ptr(rsp + 16), rdx)?;
        }
        self.a.mov(r8, rdx)?;
        self.a.mov(r9, rcx)?;
        self.a.mov(rax, rdi)?;
        // Splats first (rcx as the pointer), then the bases (which reuse rdi, rcx and rdx).
        let splat0 = self.splat0();
        self.locs = operand_locs(&mut self.a, self.spec, BLOCK_BYTES, splat0, rcx)?;
        // One partial block's code serves the non-temporal head, the whole blocks the main
        // loop leaves and the tail: each of them a block of `rax` elements, at most one
        // block's, under a lane mask; after the head (a flag in the red zone says so) the
        // non-temporal main loop follows. (Kernels half as long assemble in less time.)
        let rest = self.flow.label();
        let plain = self.flow.label();
        let row = self.flow.label();
        let part = self.flow.label();
        let nt = self.spec.nt;
        if rows {
            self.flow.bind(&self.a, row);
            self.a.mov(r8, qword_ptr(rsp + 16))?;
        }
        let main = self.flow.label();
        if nt {
            // The head: elements until the output is 64-byte aligned (never, when its
            // elements are not aligned to their width: then no non-temporal store at all).
            self.a.lea(r10, ptr(rsi + r8 * w as u32))?;
            if w > 1 {
                self.a.test(r10, (w - 1) as i32)?;
                self.flow.jump(&mut self.a, Some(0x5), plain)?;
            }
            self.a.mov(rax, r10)?;
            self.a.neg(rax)?;
            self.a.and(rax, 63)?;
            if w > 1 {
                self.a.shr(rax, w.trailing_zeros())?;
            }
            self.a.mov(r10, r9)?;
            self.a.sub(r10, r8)?;
            self.a.cmp(rax, r10)?;
            self.a.cmova(rax, r10)?;
            self.a.test(rax, rax)?;
            self.flow.jump(&mut self.a, Some(0x4), main)?;
            self.a.mov(byte_ptr(rsp + HEAD_FLAG), 1)?;
            self.flow.jump(&mut self.a, None, part)?;
            self.loops(true, main, rest)?;
        }
        self.loops(false, plain, rest)?;
        self.flow.bind(&self.a, rest);
        if nt {
            self.a.mov(byte_ptr(rsp + HEAD_FLAG), 0)?;
        }
        let more = self.flow.label();
        self.flow.bind(&self.a, more);
        let done = self.flow.label();
        self.a.mov(rax, r9)?;
        self.a.sub(rax, r8)?;
        self.flow.jump(&mut self.a, Some(0x4), done)?;
        self.a.mov(r10, self.n as i32 as i64)?;
        self.a.cmp(rax, r10)?;
        self.a.cmova(rax, r10)?;
        self.flow.bind(&self.a, part);
        self.partial()?;
        self.a.add(r8, rax)?;
        if nt {
            self.a.cmp(byte_ptr(rsp + HEAD_FLAG), 0)?;
            self.flow.jump(&mut self.a, Some(0x5), main)?;
        }
        self.flow.jump(&mut self.a, None, more)?;
        self.flow.bind(&self.a, done);
        if rows {
            // The next row: every full operand's base and the output move by their strides.
            let last = self.flow.label();
            self.a.dec(qword_ptr(rsp))?;
            self.flow.jump(&mut self.a, Some(0x4), last)?;
            self.a.mov(rax, qword_ptr(rsp + 8))?;
            for (j, l) in self.locs.clone().into_iter().enumerate() {
                if let Loc::Base(r) = l
                    && first_of(self.spec, j) == j
                {
                    self.a.add(r, qword_ptr(rax + 8 * j as i32))?;
                }
            }
            self.a
                .add(rsi, qword_ptr(rax + 8 * self.locs.len() as i32))?;
            self.flow.jump(&mut self.a, None, row)?;
            self.flow.bind(&self.a, last);
            self.a.add(rsp, ROWS_FRAME)?;
        }
        if self.spec.nt {
            // Once per call, not per row: on the attention-mask bench case (rows of 1 KiB) a
            // fence per row took the call from 1.33 to 4.25 ms.
            self.a.sfence()?;
        }
        self.a.vzeroupper()?;
        for r in SAVED.into_iter().rev() {
            self.a.pop(r)?;
        }
        self.flow.bind(&self.a, early);
        self.a.ret()?;
        Ok(())
    }

    /// The main loop of [`UNROLL`] blocks (non-temporal stores with `nt`), bound to `four`,
    /// while that many whole blocks remain; it ends by jumping to `out`.
    fn loops(&mut self, nt: bool, four: Label, out: Label) -> R {
        let n = self.n as i32;
        self.flow.bind(&self.a, four);
        let unroll = if self.spec.branches.len() >= UNROLL_HALF_FROM {
            UNROLL / 2
        } else {
            UNROLL
        };
        self.a.lea(rax, ptr(r8 + unroll as i32 * n))?;
        self.a.cmp(rax, r9)?;
        self.flow.jump(&mut self.a, Some(0x7), out)?;
        for u in 0..unroll {
            self.block(u, (u as i32) * n, false, nt)?;
        }
        self.a.add(r8, unroll as i32 * n)?;
        self.flow.jump(&mut self.a, None, four)?;
        Ok(())
    }

    /// `rax` (1 to a block) elements from `r8`, under the lane mask k7; keeps rax.
    fn partial(&mut self) -> R {
        self.a.mov(r10, -1i64)?;
        self.a.bzhi(r10, r10, rax)?;
        self.a.kmovq(k7, r10)?;
        self.block(0, 0, true, false)
    }

    /// The operand at `base` for element `r8 + disp`, of `ow`-byte elements.
    fn at(base: AsmRegister64, ow: usize, disp: i32) -> AsmMemoryOperand {
        ptr(base + r8 * ow as u32 + disp * ow as i32)
    }

    /// One block of output elements from `r8 + disp` into zmm`u`, stored (under k7 with
    /// `partial`, non-temporally with `nt`).
    fn block(&mut self, u: usize, disp: i32, partial: bool, nt: bool) -> R {
        let w = self.spec.width;
        let vbytes = self.vbytes;
        let nb = self.spec.branches.len();
        // Operand index of each branch's first operand, and of the default.
        let mut first = Vec::with_capacity(nb);
        let mut j = 0;
        for b in &self.spec.branches {
            first.push(j);
            j += b.cond.forms().len() + 1;
        }
        // The held groups' registers, each loaded once for the block.
        for h in 0..self.groups.len() {
            let (g, gw) = self.groups[h];
            self.fill(g, gw, self.n * gw, Self::held_reg(h, u), disp, partial)?;
        }
        if let Some(h) = self.held[j] {
            let r = Self::held_reg(h, u);
            v3!(vbytes, t => self.a.vmovdqa64(t[u], t[r])?);
        } else {
            match self.locs[j] {
                Loc::Base(r) => {
                    let m = Self::at(r, w, disp);
                    v3!(vbytes, t => if partial {
                        per_width!(
                            w,
                            self.a,
                            [vmovdqu8, vmovdqu16, vmovdqu32, vmovdqu64],
                            (t[u].k7().z(), m)
                        )?
                    } else {
                        self.a.vmovdqu64(t[u], m)?
                    })
                }
                Loc::Splat(s) => v3!(vbytes, t => self.a.vmovdqa64(t[u], t[s])?),
            }
        }
        for bi in (0..nb).rev() {
            let b = self.spec.branches[bi];
            let k = 1 + u;
            let f = first[bi];
            let Some(within) = self.cond(b.cond, b.not, f, k, u, disp, partial)? else {
                continue; // never taken
            };
            let vj = f + b.cond.forms().len();
            let vloc = match self.held[vj] {
                // Zeroed beyond the block: merged from, a masked-off lane is never read.
                Some(h) => Loc::Splat(Self::held_reg(h, u)),
                None => self.locs[vj],
            };
            if partial && !within && matches!(vloc, Loc::Base(_)) {
                self.a.kandq(K[k], K[k], k7)?;
            }
            v3!(vbytes, t => {
                let dst = match k {
                    1 => t[u].k1(),
                    2 => t[u].k2(),
                    3 => t[u].k3(),
                    _ => t[u].k4(),
                };
                match vloc {
                    Loc::Base(r) => per_width!(
                        w,
                        self.a,
                        [vmovdqu8, vmovdqu16, vmovdqu32, vmovdqu64],
                        (dst, Self::at(r, w, disp))
                    )?,
                    Loc::Splat(s) => per_width!(
                        w,
                        self.a,
                        [vmovdqu8, vmovdqu16, vmovdqu32, vmovdqu64],
                        (dst, t[s])
                    )?,
                }
            });
        }
        let o = Self::at(rsi, w, disp);
        v3!(vbytes, t => if partial {
            per_width!(
                w,
                self.a,
                [vmovdqu8, vmovdqu16, vmovdqu32, vmovdqu64],
                (o.k7(), t[u])
            )?;
        } else if nt {
            self.a.vmovntdq(o, t[u])?;
        } else {
            self.a.vmovdqu64(o, t[u])?;
        });
        Ok(())
    }

    /// Loads the condition operand `j` (of `pw`-byte elements, `vb` bytes per block) into
    /// vector register `d` at the block's size; a splat is used where it is.
    fn load(
        &mut self,
        j: usize,
        pw: usize,
        vb: usize,
        d: usize,
        disp: i32,
        partial: bool,
    ) -> Result<usize, EmitError> {
        if let Some(h) = self.held[j] {
            return Ok(Self::held_reg(h, self.block_of(d)));
        }
        if let Loc::Splat(s) = self.locs[j] {
            return Ok(s);
        }
        self.fill(j, pw, vb, d, disp, partial)?;
        Ok(d)
    }

    /// The block whose temporary register `d` is (`4 + u` or `8 + u`).
    fn block_of(&self, d: usize) -> usize {
        (d - 4) % UNROLL
    }

    /// Loads full operand `j` (of `pw`-byte elements, `vb` bytes per block) into vector
    /// register `d` at the block's size (under k7, zeroing, in a partial block).
    fn fill(&mut self, j: usize, pw: usize, vb: usize, d: usize, disp: i32, partial: bool) -> R {
        let Loc::Base(r) = self.locs[j] else {
            return Err(bug("a held n-way operand that is not a full one"));
        };
        let m = Self::at(r, pw, disp);
        if partial {
            v3!(vb.max(16), t => per_width!(
                pw,
                self.a,
                [vmovdqu8, vmovdqu16, vmovdqu32, vmovdqu64],
                (t[d].k7().z(), m)
            )?);
        } else if vb == 8 {
            self.a
                .vmovq(XMM[d], qword_ptr(r + r8 * pw as u32 + disp * pw as i32))?;
        } else if vb == 4 {
            self.a
                .vmovd(XMM[d], dword_ptr(r + r8 * pw as u32 + disp * pw as i32))?;
        } else {
            v3!(vb, t => self.a.vmovdqu64(t[d], m)?);
        }
        Ok(())
    }

    /// The 64 bytes of +infinity's bits `inf`, repeated: a constant after the code.
    fn inf_const(&mut self, inf: u16) -> AsmMemoryOperand {
        let bytes: Vec<u8> = std::iter::repeat_n(inf.to_le_bytes(), 32)
            .flatten()
            .collect();
        constant(&mut self.consts, &bytes)
    }

    /// The integer key of the half floats in vector `x` into `key` (`rb` bytes): the magnitude,
    /// negated where the sign is set (`z` holds zeros); the elements that are NaN (magnitude
    /// above `inf`) into k6, or added to it with `or`. Uses k5.
    fn half_key(&mut self, x: usize, key: usize, z: usize, rb: usize, inf: u16, or: bool) -> R {
        let c = self.inf_const(inf);
        v3!(rb, t => {
            self.a.vpsllw(t[key], t[x], 1)?;
            self.a.vpsrlw(t[key], t[key], 1)?;
            self.a.vpcmpuw(if or { k5 } else { k6 }, t[key], c, 6)?;
        });
        if or {
            self.a.korq(k6, k6, k5)?;
        }
        v3!(rb, t => {
            self.a.vpmovw2m(k5, t[x])?;
            self.a.vpsubw(t[key].k5(), t[z], t[key])?;
        });
        Ok(())
    }

    /// The opmask k`k` of branch condition `c` (negated with `not`) for the block at `disp`,
    /// its operands from operand `f` on. `Some(within)`: whether the mask is within k7 in a
    /// partial block; `None`: the condition never holds (nothing emitted).
    #[allow(clippy::too_many_arguments)]
    fn cond(
        &mut self,
        c: NCond,
        not: bool,
        f: usize,
        k: usize,
        u: usize,
        disp: i32,
        partial: bool,
    ) -> Result<Option<bool>, EmitError> {
        let pw = c.width();
        let vb = self.n * pw;
        let rb = vb.max(16);
        let kd = if partial { K[k].k7() } else { K[k] };
        let (ta, tb) = (4 + u, 8 + u);
        let mut within = partial;
        match c {
            NCond::Mask(_) => {
                let x = self.load(f, 1, vb, ta, disp, partial)?;
                v3!(rb, t => self.a.vptestmb(kd, t[x], t[x])?);
                if not {
                    self.a.knotq(K[k], K[k])?;
                    within = false;
                }
            }
            NCond::Cmp(op, d, _, _) if half(d).is_some() => {
                // Integer keys (the magnitude, negated where the sign is set: -0.0 and 0.0
                // alike) compared signed, the elements where either side is NaN taken out.
                let inf = half(d).unwrap_or(0);
                let x = self.load(f, pw, vb, ta, disp, partial)?;
                let y = self.load(f + 1, pw, vb, tb, disp, partial)?;
                let (kx, ky, z) = (4 + (u + 1) % 4, 8 + (u + 1) % 4, 4 + (u + 2) % 4);
                v3!(rb, t => self.a.vpxord(t[z], t[z], t[z])?);
                self.half_key(x, kx, z, rb, inf, false)?;
                self.half_key(y, ky, z, rb, inf, true)?;
                let imm = match op {
                    Canon::Eq => 0,
                    Canon::Lt => 1,
                    Canon::Le => 2,
                };
                v3!(rb, t => self.a.vpcmpw(kd, t[kx], t[ky], imm)?);
                self.a.kandnq(K[k], k6, K[k])?;
                if not {
                    self.a.knotq(K[k], K[k])?;
                    within = false;
                }
            }
            NCond::Test(op, d, _) if half(d).is_some() => {
                // The magnitude against the bits of +infinity: above (NaN), equal, below.
                let inf = half(d).unwrap_or(0);
                let x = self.load(f, pw, vb, ta, disp, partial)?;
                let m = 4 + (u + 1) % 4;
                v3!(rb, t => {
                    self.a.vpsllw(t[m], t[x], 1)?;
                    self.a.vpsrlw(t[m], t[m], 1)?;
                });
                let imm = match (op, not) {
                    (TestOp::IsNan, false) => 6,
                    (TestOp::IsNan, true) => 2,
                    (TestOp::IsInf, false) => 0,
                    (TestOp::IsInf, true) => 4,
                    (TestOp::IsFinite, false) => 1,
                    (TestOp::IsFinite, true) => 5,
                };
                let c = self.inf_const(inf);
                v3!(rb, t => self.a.vpcmpuw(kd, t[m], c, imm)?);
            }
            NCond::Cmp(op, d, _, _) => {
                let x = self.load(f, pw, vb, ta, disp, partial)?;
                let i = match op {
                    Canon::Eq => 0,
                    Canon::Lt => 1,
                    Canon::Le => 2,
                };
                // The rhs: a splat, memory in a whole block of at least 16 bytes, or loaded.
                enum B {
                    Reg(usize),
                    Mem(AsmMemoryOperand),
                }
                let rhs = match self.locs[f + 1] {
                    _ if self.held[f + 1].is_some() => {
                        B::Reg(self.load(f + 1, pw, vb, tb, disp, partial)?)
                    }
                    Loc::Splat(s) => B::Reg(s),
                    Loc::Base(r) if !partial && vb >= 16 => B::Mem(Self::at(r, pw, disp)),
                    Loc::Base(_) => B::Reg(self.load(f + 1, pw, vb, tb, disp, partial)?),
                };
                let float = matches!(d, DType::F32 | DType::F64);
                let imm = if float {
                    [[0x00, 0x11, 0x12], [0x04, 0x15, 0x16]][not as usize][i]
                } else {
                    [[0, 1, 2], [4, 5, 6]][not as usize][i]
                };
                macro_rules! cmp {
                    ($m:ident) => {
                        v3!(rb, t => match rhs {
                            B::Reg(y) => self.a.$m(kd, t[x], t[y], imm)?,
                            B::Mem(m) => self.a.$m(kd, t[x], m, imm)?,
                        })
                    };
                }
                let signed = matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64);
                match (d, pw, signed) {
                    (DType::F32, _, _) => cmp!(vcmpps),
                    (DType::F64, _, _) => cmp!(vcmppd),
                    (_, 1, true) => cmp!(vpcmpb),
                    (_, 1, false) => cmp!(vpcmpub),
                    (_, 2, true) => cmp!(vpcmpw),
                    (_, 2, false) => cmp!(vpcmpuw),
                    (_, 4, true) => cmp!(vpcmpd),
                    (_, 4, false) => cmp!(vpcmpud),
                    (_, _, true) => cmp!(vpcmpq),
                    (_, _, false) => cmp!(vpcmpuq),
                }
            }
            NCond::Test(op, d, _) => {
                if !matches!(d, DType::F32 | DType::F64) {
                    // Integers: isnan and isinf never hold, isfinite always.
                    let holds = (op == TestOp::IsFinite) != not;
                    if !holds {
                        return Ok(None);
                    }
                    self.a.kxnorq(K[k], K[k], K[k])?;
                    return Ok(Some(false));
                }
                let x = self.load(f, pw, vb, ta, disp, partial)?;
                let f32 = d == DType::F32;
                match op {
                    TestOp::IsNan => {
                        let imm = if not { 7 } else { 3 };
                        v3!(rb, t => if f32 {
                            self.a.vcmpps(kd, t[x], t[x], imm)?
                        } else {
                            self.a.vcmppd(kd, t[x], t[x], imm)?
                        });
                    }
                    TestOp::IsInf | TestOp::IsFinite => {
                        // +inf, -inf; isfinite: not (QNaN, +inf, -inf, SNaN).
                        let (imm, invert) = match op {
                            TestOp::IsInf => (0x18, not),
                            _ => (0x99, !not),
                        };
                        v3!(rb, t => if f32 {
                            self.a.vfpclassps(kd, t[x], imm)?
                        } else {
                            self.a.vfpclasspd(kd, t[x], imm)?
                        });
                        if invert {
                            self.a.knotq(K[k], K[k])?;
                            within = false;
                        }
                    }
                }
            }
        }
        Ok(Some(within))
    }
}

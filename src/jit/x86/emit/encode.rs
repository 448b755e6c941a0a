//! Labels, branches and constants, and the final encoding: each instruction encoded once
//! (encodings reused per thread), branches sized short or near, constants placed after the
//! code and addressed RIP-relative.

use iced_x86::code_asm::*;
use iced_x86::{Encoder, Instruction, Register};

use super::emitter::{EmitError, Emitter, Flow, Label, R, bug};

/// Absolute addresses from here on mark constants in memory operands until they are made
/// RIP-relative.
const CONST_MARK: u64 = 0x7f00_0000;

/// The encoding of one instruction (at most 15 bytes).
#[derive(Clone, Copy)]
pub(super) struct Encoded {
    len: u8,
    bytes: [u8; 15],
}

/// Encodings kept per thread: kernels repeat most of their instructions, and a lookup costs a
/// fraction of an encoding. Cleared when it grows past this many entries.
pub(super) const MAX_CACHED: usize = 8192;

/// A thread's reusable emission state: the assembler and encoder (for their buffers) and the
/// encodings seen so far.
pub(super) struct Scratch {
    pub a: CodeAssembler,
    pub enc: Encoder,
    pub cache: rustc_hash::FxHashMap<Instruction, Encoded>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Option<Scratch>> = const { std::cell::RefCell::new(None) };
}

impl Scratch {
    /// The thread's scratch (new for its first kernel), its assembler emptied, its encodings
    /// dropped when they passed [`MAX_CACHED`]. Give it back with [`Scratch::put`].
    pub(super) fn take() -> Result<Scratch, EmitError> {
        let mut s = match SCRATCH.with(|s| s.borrow_mut().take()) {
            Some(s) => s,
            None => Scratch {
                a: CodeAssembler::new(64)?,
                enc: Encoder::new(64),
                cache: Default::default(),
            },
        };
        s.a.reset();
        if s.cache.len() > MAX_CACHED {
            s.cache.clear();
        }
        Ok(s)
    }

    /// Keeps `self` for the thread's next kernel.
    pub(super) fn put(self) {
        SCRATCH.with(|x| *x.borrow_mut() = Some(self));
    }

    /// The code of a kernel emitted (`emitted`: whether it was) into this scratch's
    /// assembler, with its labels, branches and constants ([`Parts::finish`]); the assembler
    /// prefers VEX again (its default) and the scratch is kept for the thread's next kernel
    /// either way.
    pub(super) fn encode(
        mut self,
        flow: &Flow,
        consts: &[Vec<u8>],
        emitted: R,
    ) -> Result<Vec<u8>, EmitError> {
        let r = emitted.and_then(|()| {
            Parts {
                ins: self.a.instructions(),
                flow,
                consts,
            }
            .finish(&mut self.enc, &mut self.cache)
        });
        self.a.set_prefer_vex(true);
        self.put();
        Ok(r?.0)
    }
}

impl Emitter<'_> {
    /// A new, unbound label.
    pub(super) fn label(&mut self) -> Label {
        self.flow.label()
    }

    /// Binds `l` to the next instruction emitted.
    pub(super) fn bind(&mut self, l: Label) {
        self.flow.bind(&self.a, l);
    }

    /// A branch to `l`: a `nop` placeholder in the instruction stream, laid out by [`Self::finish`].
    fn branch(&mut self, cc: Option<u8>, l: Label) -> R {
        self.flow.jump(&mut self.a, cc, l)
    }
    /// A jump to `l` when `cc` holds.
    pub(super) fn jcc(&mut self, cc: super::regs::Cc, l: Label) -> R {
        self.branch(Some(cc.0), l)
    }
    pub(super) fn jmp(&mut self, l: Label) -> R {
        self.branch(None, l)
    }
    pub(super) fn jb(&mut self, l: Label) -> R {
        self.branch(Some(0x2), l)
    }
    pub(super) fn jae(&mut self, l: Label) -> R {
        self.branch(Some(0x3), l)
    }
    pub(super) fn je(&mut self, l: Label) -> R {
        self.branch(Some(0x4), l)
    }
    pub(super) fn jne(&mut self, l: Label) -> R {
        self.branch(Some(0x5), l)
    }
    /// `jc`: jump when the carry flag is set.
    pub(super) fn branch_carry(&mut self, l: Label) -> R {
        self.jb(l)
    }
    pub(super) fn ja(&mut self, l: Label) -> R {
        self.branch(Some(0x7), l)
    }
    pub(super) fn jbe(&mut self, l: Label) -> R {
        self.branch(Some(0x6), l)
    }

    /// A RIP-relative operand of `bytes` placed after the code. It is emitted as an absolute
    /// address that marks the constant, and made RIP-relative by [`Self::finish`].
    pub(super) fn constant(&mut self, bytes: &[u8]) -> AsmMemoryOperand {
        constant(&mut self.consts, bytes)
    }

    /// Encodes everything ([`Parts::finish`]). Returns the bytes and the length of the code.
    pub(super) fn finish(
        &mut self,
        enc: &mut Encoder,
        cache: &mut rustc_hash::FxHashMap<Instruction, Encoded>,
    ) -> Result<(Vec<u8>, usize), EmitError> {
        Parts {
            ins: self.a.instructions(),
            flow: &self.flow,
            consts: &self.consts,
        }
        .finish(enc, cache)
    }
}

/// A kernel's instructions as emitted (branches as `nop` placeholders, constants as marked
/// absolute addresses), with its labels (the instruction index each is bound to), branches and
/// constants: what [`Parts::finish`] lays out and encodes. The n-way emitters use it too.
pub(super) struct Parts<'p> {
    pub ins: &'p [Instruction],
    pub flow: &'p Flow,
    pub consts: &'p [Vec<u8>],
}

impl Parts<'_> {
    /// Encodes everything: each instruction once, branches in their short form where the
    /// target is within reach and near otherwise, constants after the code (32-byte aligned),
    /// RIP-relative operands pointed at them. Returns the bytes and the length of the code.
    pub(super) fn finish(
        &self,
        enc: &mut Encoder,
        cache: &mut rustc_hash::FxHashMap<Instruction, Encoded>,
    ) -> Result<(Vec<u8>, usize), EmitError> {
        let is_branch = self.branch_flags();
        let body = self.encode_body(enc, cache, &is_branch)?;
        let layout = self.size_branches(&is_branch, &body.start)?;
        let code_len = layout.code_len();
        let mut out = self.lay_out(&body, &is_branch, &layout);
        let const_off = self.place_consts(&mut out);
        patch_rip_rel(enc, &mut out, &body.rip_rel, &const_off, &layout)?;
        Ok((out, code_len))
    }

    /// Whether each instruction is a branch placeholder.
    fn branch_flags(&self) -> Vec<bool> {
        let mut is_branch = vec![false; self.ins.len()];
        for b in &self.flow.branches {
            is_branch[b.at] = true;
        }
        is_branch
    }

    /// Encodes every non-branch instruction once at address 0 (their bytes do not depend on the
    /// address, except RIP-relative ones: zeros of their length here, encoded again by
    /// [`patch_rip_rel`]). Leaves `enc` with an empty buffer.
    fn encode_body(
        &self,
        enc: &mut Encoder,
        cache: &mut rustc_hash::FxHashMap<Instruction, Encoded>,
        is_branch: &[bool],
    ) -> Result<Body, EmitError> {
        let ins = self.ins;
        let n = ins.len();
        let mut start = Vec::with_capacity(n + 1);
        let mut rip_rel = Vec::new();
        let mut bytes: Vec<u8> = Vec::with_capacity(8 * n);
        for (i, x) in ins.iter().enumerate() {
            start.push(bytes.len());
            if is_branch[i] {
                continue;
            }
            if x.memory_base() == Register::None && x.memory_index() == Register::None {
                let d = x.memory_displacement64();
                if d >= CONST_MARK && d < CONST_MARK + self.consts.len() as u64 {
                    // Encoded for its length now, at its address below.
                    let mut x = *x;
                    x.set_memory_base(Register::RIP);
                    x.set_memory_displacement64(0);
                    let len = enc.encode(&x, 0)?;
                    bytes.resize(bytes.len() + len, 0);
                    rip_rel.push((i, x, (d - CONST_MARK) as usize));
                    continue;
                }
            }
            let e = match cache.get(x) {
                Some(e) => *e,
                None => {
                    let len = enc.encode(x, 0)?;
                    let buf = enc.take_buffer();
                    let mut e = Encoded {
                        len: len as u8,
                        bytes: [0; 15],
                    };
                    e.bytes[..len].copy_from_slice(&buf[buf.len() - len..]);
                    enc.set_buffer(recycle(buf));
                    cache.insert(*x, e);
                    e
                }
            };
            bytes.extend_from_slice(&e.bytes[..e.len as usize]);
        }
        start.push(bytes.len());
        let _ = enc.take_buffer();
        Ok(Body {
            bytes,
            start,
            rip_rel,
        })
    }

    /// Branch sizes: short until the displacement does not fit, then near (a fixpoint: sizes
    /// only grow). `start`: each instruction's offset in the encoded body, and its end.
    fn size_branches(&self, is_branch: &[bool], start: &[usize]) -> Result<Layout, EmitError> {
        let n = is_branch.len();
        let mut size: Vec<usize> = (0..n)
            .map(|i| {
                if is_branch[i] {
                    2
                } else {
                    start[i + 1] - start[i]
                }
            })
            .collect();
        let mut at = vec![0usize; n + 1];
        loop {
            for i in 0..n {
                at[i + 1] = at[i] + size[i];
            }
            let mut grew = false;
            for b in &self.flow.branches {
                if size[b.at] != 2 {
                    continue;
                }
                let target = self.flow.labels[b.target];
                if target == usize::MAX || target > n {
                    return Err(bug("branch to an unbound label"));
                }
                let d = at[target] as i64 - (at[b.at] + 2) as i64;
                if i8::try_from(d).is_err() {
                    size[b.at] = if b.cc.is_some() { 6 } else { 5 };
                    grew = true;
                }
            }
            if !grew {
                return Ok(Layout { size, at });
            }
        }
    }

    /// The code: the body's instructions at their places in `layout`, the branches encoded
    /// between them, then `int3` padding up to the constants' 32-byte boundary.
    fn lay_out(&self, body: &Body, is_branch: &[bool], layout: &Layout) -> Vec<u8> {
        let Layout { size, at } = layout;
        let code_len = layout.code_len();
        let const_at = code_len.next_multiple_of(32);
        let mut out = Vec::with_capacity(const_at + 64 * self.consts.len());
        let mut bi = 0;
        for (i, &branch) in is_branch.iter().enumerate() {
            if branch {
                let b = &self.flow.branches[bi];
                bi += 1;
                let target = at[self.flow.labels[b.target]] as i64;
                let next = (at[i] + size[i]) as i64;
                let d = target - next;
                match (size[i], b.cc) {
                    (2, Some(cc)) => out.extend([0x70 | cc, d as i8 as u8]),
                    (2, None) => out.extend([0xeb, d as i8 as u8]),
                    (_, Some(cc)) => {
                        out.extend([0x0f, 0x80 | cc]);
                        out.extend((d as i32).to_le_bytes());
                    }
                    (_, None) => {
                        out.push(0xe9);
                        out.extend((d as i32).to_le_bytes());
                    }
                }
            } else {
                out.extend_from_slice(&body.bytes[body.start[i]..body.start[i + 1]]);
            }
        }
        out.resize(const_at, 0xcc);
        out
    }

    /// Appends the constants to `out`, each padded to 32 bytes; returns their offsets.
    fn place_consts(&self, out: &mut Vec<u8>) -> Vec<usize> {
        let mut const_off = Vec::with_capacity(self.consts.len());
        for c in self.consts {
            const_off.push(out.len());
            out.extend_from_slice(c);
            out.resize(out.len().next_multiple_of(32), 0);
        }
        const_off
    }
}

/// The operand of constant `bytes` among `consts` (added when new): an absolute address that
/// marks it, made RIP-relative by [`Parts::finish`].
pub(super) fn constant(consts: &mut Vec<Vec<u8>>, bytes: &[u8]) -> AsmMemoryOperand {
    let k = match consts.iter().position(|b| b == bytes) {
        Some(k) => k,
        None => {
            consts.push(bytes.to_vec());
            consts.len() - 1
        }
    };
    ptr(CONST_MARK + k as u64)
}

/// The instructions encoded at address 0, without the branches ([`Emitter::encode_body`]).
struct Body {
    bytes: Vec<u8>,
    /// Offset of each instruction in `bytes` (a branch's is that of the next), and the end.
    start: Vec<usize>,
    /// The instructions that read a constant: index, the instruction made RIP-relative (to
    /// displacement 0), and the constant's index.
    rip_rel: Vec<(usize, Instruction, usize)>,
}

/// Where the instructions go in the code ([`Emitter::size_branches`]).
struct Layout {
    /// Bytes of each instruction.
    size: Vec<usize>,
    /// Offset of each instruction, and the end of the code.
    at: Vec<usize>,
}

impl Layout {
    /// The length of the code (constants after).
    fn code_len(&self) -> usize {
        self.at[self.at.len() - 1]
    }
}

/// Encodes each instruction that reads a constant at its address in `out`, pointed at the
/// constant (at `const_off` by the constant's index); its length must not change.
fn patch_rip_rel(
    enc: &mut Encoder,
    out: &mut [u8],
    rip_rel: &[(usize, Instruction, usize)],
    const_off: &[usize],
    layout: &Layout,
) -> R {
    let Layout { size, at } = layout;
    for &(i, mut x, k) in rip_rel {
        x.set_memory_displacement64(const_off[k] as u64);
        if enc.encode(&x, at[i] as u64)? != size[i] {
            return Err(bug("RIP-relative instruction changed its length"));
        }
        let buf = enc.take_buffer();
        out[at[i]..at[i] + size[i]].copy_from_slice(&buf);
        enc.set_buffer(recycle(buf));
    }
    Ok(())
}

/// An emptied buffer, to give back to the encoder (which appends to it).
fn recycle(mut buf: Vec<u8>) -> Vec<u8> {
    buf.clear();
    buf
}

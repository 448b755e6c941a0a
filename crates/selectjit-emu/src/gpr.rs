//! General-purpose instructions and their flags.

use iced_x86::{Instruction, Mnemonic, OpKind};

use super::exec::{AF, CF, Flow, Machine, OF, PF, R, SF, STATUS, ZF, mask, unsupported};

/// The sign bit of a `size`-byte value.
#[inline]
fn sign(size: usize) -> u64 {
    1u64 << (size * 8 - 1)
}

/// `x` (of `size` bytes) sign-extended to 64 bits.
#[inline]
pub(super) fn sext(x: u64, size: usize) -> i64 {
    let sh = 64 - 8 * size as u32;
    ((x << sh) as i64) >> sh
}

/// ZF, SF and PF of a `size`-byte result.
#[inline]
fn szp(r: u64, size: usize) -> u64 {
    let mut f = 0;
    if r == 0 {
        f |= ZF;
    }
    if r & sign(size) != 0 {
        f |= SF;
    }
    if (r as u8).count_ones().is_multiple_of(2) {
        f |= PF;
    }
    f
}

/// `a + b + c` and its flags.
#[inline]
fn add(a: u64, b: u64, c: u64, size: usize) -> (u64, u64) {
    let m = mask(size);
    let full = a as u128 + b as u128 + c as u128;
    let r = full as u64 & m;
    let mut f = szp(r, size);
    if full > m as u128 {
        f |= CF;
    }
    if (a ^ r) & (b ^ r) & sign(size) != 0 {
        f |= OF;
    }
    if (a ^ b ^ r) & 0x10 != 0 {
        f |= AF;
    }
    (r, f)
}

/// `a - b` and its flags.
#[inline]
fn sub(a: u64, b: u64, size: usize) -> (u64, u64) {
    let r = a.wrapping_sub(b) & mask(size);
    let mut f = szp(r, size);
    if a < b {
        f |= CF;
    }
    if (a ^ b) & (a ^ r) & sign(size) != 0 {
        f |= OF;
    }
    if (a ^ b ^ r) & 0x10 != 0 {
        f |= AF;
    }
    (r, f)
}

impl Machine<'_> {
    /// Executes a general-purpose instruction; `None` if `ins` is not one.
    pub(super) fn exec_gpr(&mut self, ins: &Instruction) -> R<Option<Flow>> {
        use Mnemonic::*;
        match ins.mnemonic() {
            Mov => {
                let sz = self.opsize(ins, 0);
                let v = self.read(ins, 1, sz)?;
                self.write(ins, 0, sz, v)?;
            }
            Movzx => {
                let v = self.read(ins, 1, self.opsize(ins, 1))?;
                self.write(ins, 0, self.opsize(ins, 0), v)?;
            }
            Movsx | Movsxd => {
                let ssz = self.opsize(ins, 1);
                let dsz = self.opsize(ins, 0);
                let v = sext(self.read(ins, 1, ssz)?, ssz) as u64 & mask(dsz);
                self.write(ins, 0, dsz, v)?;
            }
            Lea => {
                let sz = self.opsize(ins, 0);
                self.write(ins, 0, sz, self.ea(ins) & mask(sz))?;
            }
            Add | Sub | And | Or | Xor | Cmp | Test => self.alu(ins)?,
            Inc | Dec | Neg | Not => self.unary(ins)?,
            Imul => self.imul(ins)?,
            Shl | Sal | Shr | Sar => self.shift(ins)?,
            Cmovo | Cmovno | Cmovb | Cmovae | Cmove | Cmovne | Cmovbe | Cmova | Cmovs | Cmovns
            | Cmovp | Cmovnp | Cmovl | Cmovge | Cmovle | Cmovg => {
                let sz = self.opsize(ins, 0);
                // The source is read (and may fault) whatever the condition; a 32-bit
                // destination is written (its upper half zeroed) either way.
                let v = self.read(ins, 1, sz)?;
                let old = self.read(ins, 0, sz)?;
                let c = self.cond(ins.condition_code());
                self.write(ins, 0, sz, if c { v } else { old })?;
            }
            Seto | Setno | Setb | Setae | Sete | Setne | Setbe | Seta | Sets | Setns | Setp
            | Setnp | Setl | Setge | Setle | Setg => {
                let c = self.cond(ins.condition_code());
                self.write(ins, 0, 1, c as u64)?;
            }
            Jo | Jno | Jb | Jae | Je | Jne | Jbe | Ja | Js | Jns | Jp | Jnp | Jl | Jge | Jle
            | Jg => {
                if self.cond(ins.condition_code()) {
                    self.jump(ins.near_branch_target())?;
                }
            }
            Jmp => {
                let target = match ins.op_kind(0) {
                    OpKind::NearBranch64 => ins.near_branch_target(),
                    OpKind::Register | OpKind::Memory if self.opsize(ins, 0) == 8 => {
                        self.read(ins, 0, 8)?
                    }
                    _ => return unsupported("far or 16/32-bit jump"),
                };
                self.jump(target)?;
            }
            Ret => {
                if ins.op_count() != 0 && ins.immediate16() != 0 {
                    return unsupported("ret with an immediate");
                }
                return self.ret().map(Some);
            }
            Push => {
                if self.push_size(ins) != 8 {
                    return unsupported("16-bit push");
                }
                let v = self.read(ins, 0, 8)?;
                self.push(v)?;
            }
            Pop => {
                if self.opsize(ins, 0) != 8 {
                    return unsupported("16-bit pop");
                }
                let v = self.pop()?;
                self.write(ins, 0, 8, v)?;
            }
            Pushfq => self.push(self.flags | 0x202)?,
            Popfq => {
                let v = self.pop()?;
                self.flags = v & STATUS;
            }
            Nop | Endbr64 | Pause => {}
            Bzhi => {
                let sz = self.opsize(ins, 0);
                let src = self.read(ins, 1, sz)?;
                let n = self.read(ins, 2, sz)? & 0xff;
                let bits = 8 * sz as u64;
                let r = if n < bits {
                    src & ((1u64 << n) - 1)
                } else {
                    src
                };
                let f = szp(r, sz) & !PF | if n > bits - 1 { CF } else { 0 };
                self.set_flags(STATUS, f);
                self.write(ins, 0, sz, r)?;
            }
            Shlx | Shrx | Sarx => {
                let sz = self.opsize(ins, 0);
                let src = self.read(ins, 1, sz)?;
                let n = self.read(ins, 2, sz)? & (8 * sz as u64 - 1);
                let r = match ins.mnemonic() {
                    Shlx => src << n,
                    Shrx => src >> n,
                    _ => (sext(src, sz) >> n) as u64,
                } & mask(sz);
                self.write(ins, 0, sz, r)?;
            }
            Andn => {
                let sz = self.opsize(ins, 0);
                let a = self.read(ins, 1, sz)?;
                let b = self.read(ins, 2, sz)?;
                let r = !a & b & mask(sz);
                self.set_flags(STATUS, szp(r, sz) & !PF);
                self.write(ins, 0, sz, r)?;
            }
            Popcnt => {
                let sz = self.opsize(ins, 0);
                let src = self.read(ins, 1, sz)?;
                self.set_flags(STATUS, if src == 0 { ZF } else { 0 });
                self.write(ins, 0, sz, src.count_ones() as u64)?;
            }
            Tzcnt | Lzcnt => {
                let sz = self.opsize(ins, 0);
                let src = self.read(ins, 1, sz)?;
                let bits = 8 * sz as u32;
                let r = if src == 0 {
                    bits
                } else if ins.mnemonic() == Tzcnt {
                    src.trailing_zeros()
                } else {
                    src.leading_zeros() - (64 - bits)
                } as u64;
                let f = if src == 0 { CF } else { 0 } | if r == 0 { ZF } else { 0 };
                self.set_flags(STATUS, f);
                self.write(ins, 0, sz, r)?;
            }
            _ => return Ok(None),
        }
        Ok(Some(Flow::Next))
    }

    /// The size of the value `push` stores.
    fn push_size(&self, ins: &Instruction) -> usize {
        match ins.op_kind(0) {
            OpKind::Register | OpKind::Memory => self.opsize(ins, 0),
            OpKind::Immediate8to16 | OpKind::Immediate16 => 2,
            _ => 8,
        }
    }

    /// add, sub, and, or, xor, cmp, test.
    fn alu(&mut self, ins: &Instruction) -> R<()> {
        use Mnemonic::*;
        let sz = self.opsize(ins, 0);
        let a = self.read(ins, 0, sz)?;
        let b = self.read(ins, 1, sz)?;
        let m = ins.mnemonic();
        let (r, f) = match m {
            Add => add(a, b, 0, sz),
            Sub | Cmp => sub(a, b, sz),
            And | Test => (a & b, szp(a & b, sz)),
            Or => (a | b, szp(a | b, sz)),
            _ => (a ^ b, szp(a ^ b, sz)),
        };
        if !matches!(m, Cmp | Test) {
            self.write(ins, 0, sz, r)?;
        }
        self.set_flags(STATUS, f);
        Ok(())
    }

    /// inc, dec, neg, not.
    fn unary(&mut self, ins: &Instruction) -> R<()> {
        use Mnemonic::*;
        let sz = self.opsize(ins, 0);
        let a = self.read(ins, 0, sz)?;
        let (r, affected, f) = match ins.mnemonic() {
            Inc => {
                let (r, f) = add(a, 1, 0, sz);
                (r, STATUS & !CF, f)
            }
            Dec => {
                let (r, f) = sub(a, 1, sz);
                (r, STATUS & !CF, f)
            }
            Neg => {
                let (r, f) = sub(0, a, sz);
                (r, STATUS, f)
            }
            _ => (!a & mask(sz), 0, 0),
        };
        self.write(ins, 0, sz, r)?;
        self.set_flags(affected, f);
        Ok(())
    }

    /// imul with two or three operands: CF = OF = the signed product does not fit.
    fn imul(&mut self, ins: &Instruction) -> R<()> {
        if ins.op_count() < 2 {
            return unsupported("one-operand imul");
        }
        let sz = self.opsize(ins, 0);
        let (a, b) = if ins.op_count() == 3 {
            (self.read(ins, 1, sz)?, self.read(ins, 2, sz)?)
        } else {
            (self.read(ins, 0, sz)?, self.read(ins, 1, sz)?)
        };
        let p = sext(a, sz) as i128 * sext(b, sz) as i128;
        let r = p as u64 & mask(sz);
        let mut f = szp(r, sz);
        if sext(r, sz) as i128 != p {
            f |= CF | OF;
        }
        self.write(ins, 0, sz, r)?;
        self.set_flags(STATUS, f);
        Ok(())
    }

    /// shl, sal, shr, sar by 1, an immediate or cl.
    fn shift(&mut self, ins: &Instruction) -> R<()> {
        use Mnemonic::*;
        let sz = self.opsize(ins, 0);
        let bits = 8 * sz as u64;
        let a = self.read(ins, 0, sz)?;
        let n = self.read(ins, 1, 1)? & if sz == 8 { 63 } else { 31 };
        if n == 0 {
            // Flags unchanged; the destination is still written (a 32-bit register is
            // zero-extended).
            return self.write(ins, 0, sz, a);
        }
        let (r, cf, of) = match ins.mnemonic() {
            Shl | Sal => {
                let r = (a << n) & mask(sz);
                let cf = if n <= bits { (a >> (bits - n)) & 1 } else { 0 };
                (r, cf, ((r >> (bits - 1)) & 1) ^ cf)
            }
            Shr => (a >> n, (a >> (n - 1)) & 1, (a >> (bits - 1)) & 1),
            _ => {
                let s = sext(a, sz);
                let r = (s >> n.min(63)) as u64 & mask(sz);
                (r, ((s >> (n - 1).min(63)) & 1) as u64, 0)
            }
        };
        let mut f = szp(r, sz);
        if cf != 0 {
            f |= CF;
        }
        if of != 0 {
            f |= OF;
        }
        self.write(ins, 0, sz, r)?;
        self.set_flags(STATUS, f);
        Ok(())
    }
}

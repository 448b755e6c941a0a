//! The emulated machine: registers, memory checks, the decode cache and the step loop.

use iced_x86::{
    ConditionCode, Decoder, DecoderOptions, EncodingKind, Instruction, Mnemonic, OpKind, Register,
};

use super::{EmuConfig, EmuError, EmuStats, Region, insn_text};

/// Carry flag.
pub(super) const CF: u64 = 1;
/// Parity flag.
pub(super) const PF: u64 = 1 << 2;
/// Auxiliary carry flag.
pub(super) const AF: u64 = 1 << 4;
/// Zero flag.
pub(super) const ZF: u64 = 1 << 6;
/// Sign flag.
pub(super) const SF: u64 = 1 << 7;
/// Overflow flag.
pub(super) const OF: u64 = 1 << 11;
/// The status flags the emulator keeps.
pub(super) const STATUS: u64 = CF | PF | AF | ZF | SF | OF;

/// Bytes of emulated stack below the entry `rsp`.
const STACK_BYTES: usize = 256 * 1024;
/// The System V red zone: bytes below `rsp` a function may use without moving it.
const RED_ZONE: u64 = 128;
/// The return address of the emulated call: not canonical, so never an address of code.
pub(super) const SENTINEL: u64 = 0xdead_5e1e_c700_0000;

/// The callee-saved registers of the System V ABI, by number.
const CALLEE_SAVED: [(usize, &str); 6] = [
    (3, "rbx"),
    (5, "rbp"),
    (12, "r12"),
    (13, "r13"),
    (14, "r14"),
    (15, "r15"),
];

/// Why an instruction stopped the emulation (made into an [`EmuError`] with the instruction).
#[derive(Debug)]
pub(super) enum Trap {
    Unsupported(String),
    OutOfBounds {
        addr: u64,
        len: u64,
        write: bool,
    },
    ReadOnly {
        addr: u64,
        len: u64,
    },
    Misaligned {
        addr: u64,
        align: u64,
    },
    JumpOutside(u64),
    StackImbalance(i64),
    BadReturn(u64),
    CalleeSaved {
        reg: &'static str,
        expected: u64,
        found: u64,
    },
}

impl Trap {
    fn into_error(self, ins: &Instruction) -> EmuError {
        let rip = ins.ip();
        let insn = insn_text(ins);
        match self {
            Trap::Unsupported(why) => EmuError::Unsupported {
                rip,
                insn,
                mnemonic: format!("{:?}", ins.mnemonic()).to_lowercase(),
                why,
            },
            Trap::OutOfBounds { addr, len, write } => EmuError::OutOfBounds {
                rip,
                insn,
                addr,
                len,
                write,
            },
            Trap::ReadOnly { addr, len } => EmuError::ReadOnly {
                rip,
                insn,
                addr,
                len,
            },
            Trap::Misaligned { addr, align } => EmuError::Misaligned {
                rip,
                insn,
                addr,
                align,
            },
            Trap::JumpOutside(target) => EmuError::JumpOutside { rip, insn, target },
            Trap::StackImbalance(delta) => EmuError::StackImbalance { rip, insn, delta },
            Trap::BadReturn(target) => EmuError::BadReturn { rip, insn, target },
            Trap::CalleeSaved {
                reg,
                expected,
                found,
            } => EmuError::CalleeSaved {
                rip,
                insn,
                reg,
                expected,
                found,
            },
        }
    }
}

/// The result of an instruction's execution.
pub(super) type R<T> = Result<T, Trap>;

/// A shorthand for an unsupported form of a supported mnemonic.
pub(super) fn unsupported<T>(why: &str) -> R<T> {
    Err(Trap::Unsupported(why.to_string()))
}

/// What comes after an instruction.
pub(super) enum Flow {
    /// The next instruction (at `rip`).
    Next,
    /// The function returned to the emulator.
    Return,
}

/// A memory area the code may access, resolved for one access.
struct Hit {
    ptr: *mut u8,
    writable: bool,
}

/// The emulated CPU and the memory it may touch. Only [`super::call`] makes one: its memory
/// accesses rely on the safety contract of that function.
pub(super) struct Machine<'a> {
    /// rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8–r15.
    pub gpr: [u64; 16],
    /// The status flags (the bits of [`STATUS`]).
    pub flags: u64,
    /// The address of the next instruction.
    pub rip: u64,
    /// zmm0–zmm31, little-endian bytes.
    pub v: [[u8; 64]; 32],
    /// k0–k7.
    pub k: [u64; 8],
    /// Counters.
    pub stats: EmuStats,
    code: &'a [u8],
    code_base: u64,
    regions: &'a [Region],
    cfg: &'a EmuConfig,
    /// The emulated stack; only accessed through `stack_ptr` once created.
    _stack: Vec<u64>,
    stack_ptr: *mut u8,
    stack_base: u64,
    stack_end: u64,
    entry_rsp: u64,
    saved: [u64; 16],
    /// Per byte offset of `code`: 0, or 1 + the index in `insns` of the instruction there.
    cache: Vec<u32>,
    insns: Vec<Instruction>,
}

impl<'a> Machine<'a> {
    /// A machine about to call a function with `args`.
    pub(super) fn new(
        code: &'a [u8],
        regions: &'a [Region],
        cfg: &'a EmuConfig,
        args: &[u64],
    ) -> Machine<'a> {
        let extra = args.len().saturating_sub(6);
        let bytes = STACK_BYTES + 8 * extra + 128;
        let mut stack = vec![0u64; bytes / 8];
        let stack_ptr = stack.as_mut_ptr().cast::<u8>();
        let stack_base = stack_ptr as u64;
        let stack_end = stack_base + (stack.len() * 8) as u64;
        // Stack arguments above the return address; `rsp + 8` a multiple of 64 at entry.
        let top = (stack_end - 8 * extra as u64) & !63;
        let entry_rsp = top - 8;
        let mut m = Machine {
            gpr: [0; 16],
            flags: 0,
            rip: 0,
            v: [[0; 64]; 32],
            k: [0; 8],
            stats: EmuStats::default(),
            code,
            code_base: code.as_ptr() as u64,
            regions,
            cfg,
            _stack: stack,
            stack_ptr,
            stack_base,
            stack_end,
            entry_rsp,
            saved: [0; 16],
            cache: vec![0; code.len()],
            insns: Vec::new(),
        };
        m.poke_stack(entry_rsp, SENTINEL);
        for (i, &a) in args.iter().skip(6).enumerate() {
            m.poke_stack(top + 8 * i as u64, a);
        }
        for (reg, &a) in [7, 6, 2, 1, 8, 9].iter().zip(args) {
            m.gpr[*reg] = a;
        }
        m.gpr[4] = entry_rsp;
        m.saved = m.gpr;
        m
    }

    /// Writes a u64 to the emulator's own stack (set-up only).
    fn poke_stack(&mut self, addr: u64, value: u64) {
        let off = (addr - self.stack_base) as usize;
        debug_assert!(off + 8 <= (self.stack_end - self.stack_base) as usize);
        // SAFETY: `addr` is 8-aligned inside the stack allocation (the callers compute it from
        // `stack_end` and the allocation's size includes every argument), and the stack is
        // only ever accessed through `stack_ptr`.
        unsafe { self.stack_ptr.add(off).cast::<u64>().write_unaligned(value) }
    }

    /// Runs from `code[entry]` until the function returns.
    pub(super) fn run(&mut self, entry: usize) -> Result<(), EmuError> {
        self.rip = self.code_base.wrapping_add(entry as u64);
        let mut prev_rip = self.rip;
        loop {
            let off = self.rip.wrapping_sub(self.code_base) as usize;
            if off >= self.code.len() {
                // Only falling through the last instruction (or a bad entry) gets here: jumps
                // check their targets.
                let prev = self.decode_at(prev_rip).unwrap_or_default();
                return Err(EmuError::JumpOutside {
                    rip: prev_rip,
                    insn: if prev_rip == self.rip {
                        String::new()
                    } else {
                        insn_text(&prev)
                    },
                    target: self.rip,
                });
            }
            let slot = self.cache[off];
            let ins = if slot != 0 {
                self.insns[slot as usize - 1]
            } else {
                self.decode_new(off)?
            };
            if self.stats.steps >= self.cfg.max_steps {
                return Err(EmuError::StepLimit {
                    rip: self.rip,
                    insn: insn_text(&ins),
                    limit: self.cfg.max_steps,
                });
            }
            self.stats.steps += 1;
            prev_rip = self.rip;
            self.rip = ins.next_ip();
            match self.step(&ins) {
                Ok(Flow::Next) => {}
                Ok(Flow::Return) => return Ok(()),
                Err(t) => return Err(t.into_error(&ins)),
            }
        }
    }

    /// Decodes the instruction at `rip` (inside the code), if valid.
    fn decode_at(&self, rip: u64) -> Option<Instruction> {
        let off = rip.wrapping_sub(self.code_base) as usize;
        let bytes = self.code.get(off..)?;
        let ins = Decoder::with_ip(64, bytes, rip, DecoderOptions::NONE).decode();
        (ins.mnemonic() != Mnemonic::INVALID).then_some(ins)
    }

    /// Decodes, checks and caches the instruction at `code[off]`.
    fn decode_new(&mut self, off: usize) -> Result<Instruction, EmuError> {
        let rip = self.rip;
        let Some(ins) = self.decode_at(rip) else {
            let end = (off + 15).min(self.code.len());
            let hex: Vec<String> = self.code[off..end]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            return Err(EmuError::Undecodable {
                rip,
                insn: hex.join(" "),
            });
        };
        if let Err(t) = self.admit(&ins) {
            return Err(t.into_error(&ins));
        }
        self.insns.push(ins);
        self.cache[off] = self.insns.len() as u32;
        Ok(ins)
    }

    /// Rejects, once at decode time, the forms no instruction handler supports.
    fn admit(&self, ins: &Instruction) -> R<()> {
        match ins.encoding() {
            EncodingKind::Legacy | EncodingKind::VEX | EncodingKind::EVEX => {}
            _ => return unsupported("only legacy, VEX and EVEX encodings are emulated"),
        }
        let ops = 0..ins.op_count();
        let odd_register = ops.clone().any(|i| {
            ins.op_kind(i) == OpKind::Register && {
                let r = ins.op_register(i);
                !(r.is_gpr() || r.is_vector_register() || r.is_k())
            }
        });
        if odd_register {
            return unsupported("segment, control, debug, x87 or MMX register operand");
        }
        let uses_memory = ops.clone().any(|i| ins.op_kind(i) == OpKind::Memory);
        if uses_memory {
            if matches!(ins.memory_segment(), Register::FS | Register::GS) {
                return unsupported("fs/gs segment override");
            }
            let idx = ins.memory_index();
            if idx != Register::None && !idx.is_gpr() {
                return unsupported("vector-indexed (gather/scatter) addressing");
            }
        }
        if ops.clone().any(|i| is_string_op(ins.op_kind(i))) {
            return unsupported("string operands");
        }
        if !self.cfg.avx512 {
            let k_or_wide = ops.clone().any(|i| {
                ins.op_kind(i) == OpKind::Register && {
                    let r = ins.op_register(i);
                    r.is_k() || r.is_zmm() || (r.is_vector_register() && r.number() >= 16)
                }
            });
            if ins.encoding() == EncodingKind::EVEX || ins.op_mask() != Register::None || k_or_wide
            {
                return unsupported("AVX-512 is disabled");
            }
        }
        Ok(())
    }

    /// Executes one instruction (`rip` already points to the next one).
    fn step(&mut self, ins: &Instruction) -> R<Flow> {
        if let Some(flow) = self.exec_gpr(ins)? {
            return Ok(flow);
        }
        if let Some(flow) = self.exec_vec(ins)? {
            return Ok(flow);
        }
        unsupported("not in the emulated subset")
    }

    // ---- control flow ------------------------------------------------------------------------

    /// Continues at `target`, which must lie in the code.
    pub(super) fn jump(&mut self, target: u64) -> R<()> {
        if target.wrapping_sub(self.code_base) < self.code.len() as u64 {
            self.rip = target;
            Ok(())
        } else {
            Err(Trap::JumpOutside(target))
        }
    }

    /// `ret`: checks the stack, the return address and the callee-saved registers.
    pub(super) fn ret(&mut self) -> R<Flow> {
        let rsp = self.gpr[4];
        if rsp != self.entry_rsp {
            return Err(Trap::StackImbalance(rsp.wrapping_sub(self.entry_rsp) as i64));
        }
        let target = self.load_u(rsp, 8)?;
        if target != SENTINEL {
            return Err(Trap::BadReturn(target));
        }
        for (r, name) in CALLEE_SAVED {
            if self.gpr[r] != self.saved[r] {
                return Err(Trap::CalleeSaved {
                    reg: name,
                    expected: self.saved[r],
                    found: self.gpr[r],
                });
            }
        }
        self.gpr[4] = rsp + 8;
        Ok(Flow::Return)
    }

    /// Whether condition `cc` holds for the current flags.
    pub(super) fn cond(&self, cc: ConditionCode) -> bool {
        let f = self.flags;
        let cf = f & CF != 0;
        let zf = f & ZF != 0;
        let sf = f & SF != 0;
        let of = f & OF != 0;
        let pf = f & PF != 0;
        match cc {
            ConditionCode::o => of,
            ConditionCode::no => !of,
            ConditionCode::b => cf,
            ConditionCode::ae => !cf,
            ConditionCode::e => zf,
            ConditionCode::ne => !zf,
            ConditionCode::be => cf || zf,
            ConditionCode::a => !cf && !zf,
            ConditionCode::s => sf,
            ConditionCode::ns => !sf,
            ConditionCode::p => pf,
            ConditionCode::np => !pf,
            ConditionCode::l => sf != of,
            ConditionCode::ge => sf == of,
            ConditionCode::le => zf || sf != of,
            ConditionCode::g => !zf && sf == of,
            ConditionCode::None => true,
        }
    }

    /// Sets the flags in `affected` to their bits in `values`.
    #[inline]
    pub(super) fn set_flags(&mut self, affected: u64, values: u64) {
        self.flags = (self.flags & !affected) | (values & affected);
    }

    // ---- registers and operands --------------------------------------------------------------

    /// The value of a general-purpose register of any size, zero-extended.
    #[inline]
    pub(super) fn reg(&self, r: Register) -> u64 {
        let n = r.full_register().number();
        let v = self.gpr[n];
        match r.size() {
            8 => v,
            4 => v & 0xffff_ffff,
            2 => v & 0xffff,
            _ if is_high8(r) => (v >> 8) & 0xff,
            _ => v & 0xff,
        }
    }

    /// Writes a general-purpose register: 32-bit writes zero the upper half, 8- and 16-bit
    /// writes keep the other bits.
    #[inline]
    pub(super) fn set_reg(&mut self, r: Register, value: u64) {
        let n = r.full_register().number();
        let old = self.gpr[n];
        self.gpr[n] = match r.size() {
            8 => value,
            4 => value & 0xffff_ffff,
            2 => (old & !0xffff) | (value & 0xffff),
            _ if is_high8(r) => (old & !0xff00) | ((value & 0xff) << 8),
            _ => (old & !0xff) | (value & 0xff),
        };
    }

    /// The effective address of the instruction's memory operand.
    #[inline]
    pub(super) fn ea(&self, ins: &Instruction) -> u64 {
        let mut a = ins.memory_displacement64();
        let base = ins.memory_base();
        let idx = ins.memory_index();
        let addr32 = base.size() == 4 || idx.size() == 4;
        if base != Register::None && base != Register::RIP && base != Register::EIP {
            a = a.wrapping_add(self.reg(base));
        }
        if idx != Register::None {
            a = a.wrapping_add(self.reg(idx).wrapping_mul(ins.memory_index_scale() as u64));
        }
        if addr32 { a & 0xffff_ffff } else { a }
    }

    /// The size in bytes of general-purpose operand `i`.
    #[inline]
    pub(super) fn opsize(&self, ins: &Instruction, i: u32) -> usize {
        match ins.op_kind(i) {
            OpKind::Register => ins.op_register(i).size(),
            OpKind::Memory => ins.memory_size().size(),
            OpKind::Immediate8 | OpKind::Immediate8_2nd => 1,
            OpKind::Immediate16 | OpKind::Immediate8to16 => 2,
            OpKind::Immediate32 | OpKind::Immediate8to32 => 4,
            _ => 8,
        }
    }

    /// Reads general-purpose operand `i` (register, memory or immediate) as `size` bytes,
    /// zero-extended.
    #[inline]
    pub(super) fn read(&mut self, ins: &Instruction, i: u32, size: usize) -> R<u64> {
        match ins.op_kind(i) {
            OpKind::Register => Ok(self.reg(ins.op_register(i)) & mask(size)),
            OpKind::Memory => self.load_u(self.ea(ins), size),
            OpKind::Immediate8
            | OpKind::Immediate8_2nd
            | OpKind::Immediate16
            | OpKind::Immediate32
            | OpKind::Immediate64
            | OpKind::Immediate8to16
            | OpKind::Immediate8to32
            | OpKind::Immediate8to64
            | OpKind::Immediate32to64 => Ok(ins.immediate(i) & mask(size)),
            _ => unsupported("operand kind"),
        }
    }

    /// Writes general-purpose operand `i` (register or memory) with `size` bytes.
    #[inline]
    pub(super) fn write(&mut self, ins: &Instruction, i: u32, size: usize, value: u64) -> R<()> {
        match ins.op_kind(i) {
            OpKind::Register => {
                self.set_reg(ins.op_register(i), value);
                Ok(())
            }
            OpKind::Memory => self.store_u(self.ea(ins), size, value),
            _ => unsupported("operand kind"),
        }
    }

    // ---- memory ------------------------------------------------------------------------------

    /// The area holding all of `[addr, addr + len)`, if one does.
    #[inline]
    fn area(&self, addr: u64, len: u64) -> Option<Hit> {
        for r in self.regions {
            if r.contains(addr, len) {
                return Some(Hit {
                    ptr: std::ptr::with_exposed_provenance_mut::<u8>(addr as usize),
                    writable: r.writable,
                });
            }
        }
        let stack_lo = self.gpr[4]
            .wrapping_sub(RED_ZONE)
            .clamp(self.stack_base, self.stack_end);
        let end = addr.checked_add(len)?;
        if addr >= stack_lo && end <= self.stack_end {
            return Some(Hit {
                ptr: self
                    .stack_ptr
                    .wrapping_add((addr - self.stack_base) as usize),
                writable: true,
            });
        }
        let code_end = self.code_base + self.code.len() as u64;
        if addr >= self.code_base && end <= code_end {
            return Some(Hit {
                ptr: self
                    .code
                    .as_ptr()
                    .wrapping_add((addr - self.code_base) as usize)
                    .cast_mut(),
                writable: false,
            });
        }
        None
    }

    /// Checks that every byte of `[addr, addr + len)` may be read (or written).
    pub(super) fn check(&self, addr: u64, len: u64, write: bool) -> R<()> {
        if len == 0 {
            return Ok(());
        }
        if let Some(h) = self.area(addr, len) {
            return if !write || h.writable {
                Ok(())
            } else {
                Err(Trap::ReadOnly { addr, len })
            };
        }
        // Split over adjacent areas: byte by byte.
        let mut read_only = false;
        for i in 0..len {
            match self.area(addr.wrapping_add(i), 1) {
                Some(h) => read_only |= !h.writable,
                None => return Err(Trap::OutOfBounds { addr, len, write }),
            }
        }
        if write && read_only {
            Err(Trap::ReadOnly { addr, len })
        } else {
            Ok(())
        }
    }

    /// Copies `out.len()` bytes from `addr`, checked, without counting a load.
    pub(super) fn read_raw(&self, addr: u64, out: &mut [u8]) -> R<()> {
        let len = out.len() as u64;
        if let Some(h) = self.area(addr, len) {
            // SAFETY: `area` found `[addr, addr + len)` inside the code, the emulator's stack or
            // a region, all valid for reads for their whole length (the contract of `call`).
            unsafe { std::ptr::copy_nonoverlapping(h.ptr, out.as_mut_ptr(), out.len()) };
            return Ok(());
        }
        self.check(addr, len, false)?;
        for (i, b) in out.iter_mut().enumerate() {
            let a = addr.wrapping_add(i as u64);
            let h = self.area(a, 1).ok_or(Trap::OutOfBounds {
                addr,
                len,
                write: false,
            })?;
            // SAFETY: `area` found this byte inside readable memory, as above.
            *b = unsafe { h.ptr.read() };
        }
        Ok(())
    }

    /// Copies `data` to `addr`, checked, without counting a store.
    pub(super) fn write_raw(&mut self, addr: u64, data: &[u8]) -> R<()> {
        let len = data.len() as u64;
        if let Some(h) = self.area(addr, len)
            && h.writable
        {
            // SAFETY: `area` found `[addr, addr + len)` inside the emulator's stack or a
            // writable region, valid for writes for its whole length (the contract of `call`).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), h.ptr, data.len()) };
            return Ok(());
        }
        self.check(addr, len, true)?;
        for (i, &b) in data.iter().enumerate() {
            let a = addr.wrapping_add(i as u64);
            let h = self
                .area(a, 1)
                .filter(|h| h.writable)
                .ok_or(Trap::ReadOnly { addr, len })?;
            // SAFETY: `area` found this byte inside writable memory, as above.
            unsafe { h.ptr.write(b) };
        }
        Ok(())
    }

    /// Loads `size` (1, 2, 4 or 8) bytes, zero-extended.
    #[inline]
    pub(super) fn load_u(&mut self, addr: u64, size: usize) -> R<u64> {
        let mut b = [0u8; 8];
        self.read_raw(addr, &mut b[..size])?;
        self.stats.loads += 1;
        Ok(u64::from_le_bytes(b))
    }

    /// Stores the low `size` (1, 2, 4 or 8) bytes of `value`.
    #[inline]
    pub(super) fn store_u(&mut self, addr: u64, size: usize, value: u64) -> R<()> {
        self.write_raw(addr, &value.to_le_bytes()[..size])?;
        self.stats.stores += 1;
        Ok(())
    }

    /// Pushes a u64.
    pub(super) fn push(&mut self, value: u64) -> R<()> {
        let rsp = self.gpr[4].wrapping_sub(8);
        self.store_u(rsp, 8, value)?;
        self.gpr[4] = rsp;
        Ok(())
    }

    /// Pops a u64.
    pub(super) fn pop(&mut self) -> R<u64> {
        let v = self.load_u(self.gpr[4], 8)?;
        self.gpr[4] = self.gpr[4].wrapping_add(8);
        Ok(v)
    }
}

/// Whether an operand kind is one of the implicit string-instruction memory operands.
fn is_string_op(k: OpKind) -> bool {
    matches!(
        k,
        OpKind::MemorySegSI
            | OpKind::MemorySegESI
            | OpKind::MemorySegRSI
            | OpKind::MemorySegDI
            | OpKind::MemorySegEDI
            | OpKind::MemorySegRDI
            | OpKind::MemoryESDI
            | OpKind::MemoryESEDI
            | OpKind::MemoryESRDI
    )
}

/// Whether `r` is one of ah, ch, dh, bh.
#[inline]
fn is_high8(r: Register) -> bool {
    matches!(r, Register::AH | Register::CH | Register::DH | Register::BH)
}

/// The low `size` bytes set.
#[inline]
pub(super) fn mask(size: usize) -> u64 {
    if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (size * 8)) - 1
    }
}

//! An x86-64 emulator for the instruction subset that generated Select kernels use.
//!
//! [`call`] runs a function of machine code with the System V AMD64 calling convention on an
//! emulated CPU with AVX-512 (F, BW, DQ, VL) and AVX2, so that tests can execute AVX-512 kernels
//! on hosts without AVX-512, compare their output with a reference, and catch every memory access
//! outside the buffers a kernel was given. Registers, flags and the stack are emulated; loads and
//! stores go to the real host memory of the [`Region`]s after a bounds check of every byte.
//!
//! What it checks (each an [`EmuError`], never a panic):
//! - every byte of every load and store lies in the code (read only), the emulated stack (from
//!   128 bytes below `rsp`, the red zone, up to the arguments) or a region (stores only to
//!   writable ones). Lanes disabled by an AVX-512 opmask are neither accessed nor checked, as the
//!   hardware suppresses their faults, and likewise the lanes of `vpmaskmovd/q` and
//!   `vmaskmovps/pd` whose mask bit is clear. Instructions without fault suppression (permutes,
//!   shuffles, unpacks, 128/256-bit inserts and extracts) check their whole memory operand;
//! - aligned moves (`vmovdqa*`, `vmovaps`, `vmovapd`, non-temporal moves) on misaligned
//!   addresses;
//! - undecodable bytes, instructions outside the subset (the error names the mnemonic), EVEX
//!   instructions and opmask registers when [`EmuConfig::avx512`] is off, jumps and fall-through
//!   outside the code, and the step limit;
//! - at `ret`: `rsp` back where it was at entry, the return address untouched, and the
//!   callee-saved registers `rbx`, `rbp`, `r12`–`r15` restored.
//!
//! # Instruction subset
//! General purpose (8-, 16-, 32- and 64-bit forms, register, memory and immediate operands):
//! `mov`, `movzx`, `movsx`, `movsxd`, `lea`, `add`, `sub`, `and`, `or`, `xor`, `cmp`, `test`,
//! `imul` (two and three operands), `shl`/`sal`, `shr`, `sar` (by 1, an immediate or `cl`),
//! `neg`, `not`, `inc`, `dec`, `cmovcc`, `setcc`, `jcc`, `jmp` (direct and indirect), `ret`,
//! `push`, `pop`, `pushfq`, `popfq`, `nop` (every form), `endbr64`, `pause`, `bzhi`, `shlx`,
//! `shrx`, `sarx`, `andn`, `popcnt`, `tzcnt`, `lzcnt`. Flags CF, PF, AF, ZF, SF and OF as the
//! Intel SDM defines them (where it leaves one undefined, the emulator picks a value).
//!
//! VEX (xmm, ymm) and EVEX (xmm, ymm, zmm, with `{k}` merge and `{k}{z}` zero masking and
//! embedded broadcast `{1toN}`):
//! - moves: `vmovdqu`, `vmovdqa`, `vmovdqu8/16/32/64`, `vmovdqa32/64`, `vmovups`, `vmovaps`,
//!   `vmovupd`, `vmovapd`, `vmovntdq`, `vmovntps`, `vmovntpd`, `vmovntdqa`, `vmovd`, `vmovq`;
//! - broadcasts: `vpbroadcastb/w/d/q` (from xmm, memory, and in EVEX from a general register),
//!   `vbroadcastss`, `vbroadcastsd`, `vbroadcasti128`, `vbroadcastf128`,
//!   `vbroadcasti32x4/i64x2/i32x8/i64x4` and their `f` forms;
//! - lanes: `vinserti128`, `vextracti128`, `vinserti32x4/i64x2/i32x8/i64x4`,
//!   `vextracti32x4/i64x2/i32x8/i64x4` (and the `f` forms), `vperm2i128`, `vpermq`, `vpermd`
//!   (and `vpermpd`, `vpermps`), `vpshufb`, `vpshufd`, `vpunpckl/h bw/wd/dq/qdq`;
//! - bitwise: `vpxor`, `vpand`, `vpandn`, `vpor`, `vpxord/q`, `vpandd/q`, `vpandnd/q`,
//!   `vpord/q`, `vpternlogd/q`;
//! - integer: `vpaddb/w/d/q`, `vpsubb/w/d/q`, `vpsllw/d/q`, `vpsrlw/d/q`, `vpsraw/d/q` (by an
//!   immediate or by xmm), `vpcmpeqb/w/d/q`, `vpcmpgtb/w/d/q` (into a vector with VEX, into an
//!   opmask with EVEX), `vpcmpb/ub/w/uw/d/ud/q/uq` (predicate immediate), `vptestmb/w/d/q`,
//!   `vptestnmb/w/d/q`, `vpmovzx*`, `vpmovsx*`;
//! - selects and masks: `vpblendvb`, `vblendvps`, `vblendvpd`, `vpblendmb/w/d/q`,
//!   `vblendmps/pd`, `vpmaskmovd/q`, `vmaskmovps/pd`, `vpmovmskb`, `vmovmskps`, `vmovmskpd`,
//!   `vptest`, `vpmovm2b/w/d/q`, `vpmovb2m/w2m/d2m/q2m`;
//! - `vzeroupper`, `sfence`, `lfence`, `mfence`, `prefetcht0/t1/t2/nta/w` (no-ops, their address
//!   is never checked).
//!
//! VEX.128 writes zero bits 128–511 of the destination and VEX.256 writes bits 256–511, as do the
//! EVEX forms of the same widths.
//!
//! Opmask: `kmovb/w/d/q` (k←r, r←k, k←k, k←m, m←k), `kshiftl/kshiftr b/w/d/q`,
//! `kand/kandn/kor/kxor/kxnor/knot b/w/d/q`, `kortest b/w/d/q`, `ktest b/w/d/q`,
//! `kadd b/w/d/q`, `kunpckbw/wd/dq`. `k0` as a write mask means no mask.
//!
//! Beyond the core of the subset, these are emulated because masked tails, mask expansion and
//! index arithmetic commonly need them: `andn`, `pushfq`/`popfq`, `endbr64`, `pause`,
//! `vpaddb/w/d/q`, `vpsubb/w/d/q`, the vector shifts, the `pd`/`ps`/`f` twins of the integer
//! moves, broadcasts, inserts, extracts and permutes, `vblendmps/pd`, `vmaskmovps/pd`,
//! `vmovmskpd`, `vmovntdqa`, `vmovntpd`, `lfence`, `prefetchw`, and embedded broadcasts.
//!
//! Not emulated (an [`EmuError::Unsupported`]): `call`, string instructions, division, legacy
//! SSE encodings, gathers and scatters, segment overrides, and anything else not listed.
#![warn(clippy::undocumented_unsafe_blocks)]

mod exec;
mod gpr;
mod vector;

#[cfg(test)]
mod tests;

use iced_x86::{Formatter, Instruction, IntelFormatter};

/// A memory range the emulated code may access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// The host address of the first byte.
    pub addr: u64,
    /// The length in bytes.
    pub len: u64,
    /// Whether the code may store to it.
    pub writable: bool,
}

impl Region {
    /// A read-only region covering `data`.
    pub fn read_only<T>(data: &[T]) -> Region {
        Region {
            addr: data.as_ptr() as u64,
            len: std::mem::size_of_val(data) as u64,
            writable: false,
        }
    }

    /// A writable region covering `data`.
    pub fn writable<T>(data: &mut [T]) -> Region {
        Region {
            addr: data.as_mut_ptr() as u64,
            len: std::mem::size_of_val(data) as u64,
            writable: true,
        }
    }

    /// Whether `[addr, addr + len)` lies inside the region.
    #[inline]
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr.saturating_add(self.len))
    }
}

/// What an emulation may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmuConfig {
    /// The number of instructions after which the emulation stops with
    /// [`EmuError::StepLimit`].
    pub max_steps: u64,
    /// Whether EVEX-encoded instructions and opmask registers are allowed; without, they are an
    /// [`EmuError::Unsupported`] error (an AVX2-only machine).
    pub avx512: bool,
}

impl Default for EmuConfig {
    /// A hundred million steps, AVX-512 on.
    fn default() -> Self {
        EmuConfig {
            max_steps: 100_000_000,
            avx512: true,
        }
    }
}

/// What an emulation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmuStats {
    /// Instructions executed, the final `ret` included.
    pub steps: u64,
    /// Instructions that read memory, `pop` and `ret` included (a masked load whose lanes are
    /// all disabled does not count).
    pub loads: u64,
    /// Instructions that wrote memory, `push` included (likewise).
    pub stores: u64,
    /// `rax` at the return: the function's integer result, if it has one.
    pub rax: u64,
}

/// Why an emulation stopped before the function returned normally. Each variant carries the
/// address of the instruction (`rip`) and its text in Intel syntax (`insn`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmuError {
    /// The bytes at `rip` are not a valid instruction (or run past the end of the code); `insn`
    /// holds them in hex.
    #[error("{rip:#x}: undecodable bytes {insn}")]
    Undecodable {
        /// Address of the bytes.
        rip: u64,
        /// The bytes, in hex.
        insn: String,
    },
    /// The instruction is outside the emulated subset, or uses a form of it that is not.
    #[error("{rip:#x}: `{insn}`: {mnemonic} is not supported ({why})")]
    Unsupported {
        /// Address of the instruction.
        rip: u64,
        /// The instruction.
        insn: String,
        /// Its mnemonic.
        mnemonic: String,
        /// What is missing.
        why: String,
    },
    /// A load or store touches bytes outside the code, the stack and every region.
    #[error(
        "{rip:#x}: `{insn}`: {} of {len} bytes at {addr:#x} is out of bounds",
        if *write { "store" } else { "load" }
    )]
    OutOfBounds {
        /// Address of the instruction.
        rip: u64,
        /// The instruction.
        insn: String,
        /// First byte of the access (or of the lane that is outside).
        addr: u64,
        /// Its length in bytes.
        len: u64,
        /// Whether it is a store.
        write: bool,
    },
    /// A store to the code or to a region that is not writable.
    #[error("{rip:#x}: `{insn}`: store of {len} bytes at {addr:#x} to read-only memory")]
    ReadOnly {
        /// Address of the instruction.
        rip: u64,
        /// The instruction.
        insn: String,
        /// First byte of the store.
        addr: u64,
        /// Its length in bytes.
        len: u64,
    },
    /// An aligned move on an address that is not a multiple of its size (the hardware raises #GP).
    #[error("{rip:#x}: `{insn}`: address {addr:#x} is not aligned to {align} bytes")]
    Misaligned {
        /// Address of the instruction.
        rip: u64,
        /// The instruction.
        insn: String,
        /// The address.
        addr: u64,
        /// The alignment the instruction needs.
        align: u64,
    },
    /// A jump, or falling through the last instruction, leaves the code.
    #[error("{rip:#x}: `{insn}`: jump to {target:#x} outside the code")]
    JumpOutside {
        /// Address of the instruction.
        rip: u64,
        /// The instruction.
        insn: String,
        /// Where it went.
        target: u64,
    },
    /// The step limit ([`EmuConfig::max_steps`]) was reached.
    #[error("{rip:#x}: `{insn}`: step limit of {limit} instructions reached")]
    StepLimit {
        /// Address of the next instruction.
        rip: u64,
        /// The instruction.
        insn: String,
        /// The limit.
        limit: u64,
    },
    /// `ret` with `rsp` not where it was at entry.
    #[error("{rip:#x}: `{insn}`: returns with rsp off by {delta} bytes")]
    StackImbalance {
        /// Address of the `ret`.
        rip: u64,
        /// The instruction.
        insn: String,
        /// `rsp` at the `ret` minus `rsp` at entry.
        delta: i64,
    },
    /// `ret` with the return address overwritten.
    #[error("{rip:#x}: `{insn}`: the return address was overwritten with {target:#x}")]
    BadReturn {
        /// Address of the `ret`.
        rip: u64,
        /// The instruction.
        insn: String,
        /// The address it would return to.
        target: u64,
    },
    /// A callee-saved register differs at `ret` from its value at entry.
    #[error(
        "{rip:#x}: `{insn}`: callee-saved {reg} not restored ({expected:#x} at entry, {found:#x} at return)"
    )]
    CalleeSaved {
        /// Address of the `ret`.
        rip: u64,
        /// The instruction.
        insn: String,
        /// The register's name.
        reg: &'static str,
        /// Its value at entry.
        expected: u64,
        /// Its value at return.
        found: u64,
    },
}

impl EmuError {
    /// The address of the instruction the error is about.
    pub fn rip(&self) -> u64 {
        match self {
            EmuError::Undecodable { rip, .. }
            | EmuError::Unsupported { rip, .. }
            | EmuError::OutOfBounds { rip, .. }
            | EmuError::ReadOnly { rip, .. }
            | EmuError::Misaligned { rip, .. }
            | EmuError::JumpOutside { rip, .. }
            | EmuError::StepLimit { rip, .. }
            | EmuError::StackImbalance { rip, .. }
            | EmuError::BadReturn { rip, .. }
            | EmuError::CalleeSaved { rip, .. } => *rip,
        }
    }

    /// The text of the instruction the error is about.
    pub fn insn(&self) -> &str {
        match self {
            EmuError::Undecodable { insn, .. }
            | EmuError::Unsupported { insn, .. }
            | EmuError::OutOfBounds { insn, .. }
            | EmuError::ReadOnly { insn, .. }
            | EmuError::Misaligned { insn, .. }
            | EmuError::JumpOutside { insn, .. }
            | EmuError::StepLimit { insn, .. }
            | EmuError::StackImbalance { insn, .. }
            | EmuError::BadReturn { insn, .. }
            | EmuError::CalleeSaved { insn, .. } => insn,
        }
    }
}

/// The Intel-syntax text of an instruction.
pub(crate) fn insn_text(ins: &Instruction) -> String {
    let mut out = String::new();
    IntelFormatter::new().format(ins, &mut out);
    out
}

/// Calls the function at `code[entry..]` with the System V AMD64 convention, integer args in
/// rdi, rsi, rdx, rcx, r8, r9 and the rest on the stack, on an emulated stack of its own.
/// `code` is treated as located at its own address (so RIP-relative constants inside it resolve),
/// readable but not writable. Returns when the function returns to the emulator's sentinel.
///
/// All other registers start at zero, the flags clear, and `rsp + 8` is a multiple of 64 at
/// entry (so at least the 16 bytes the ABI asks).
///
/// # Safety
/// Each region must be valid for reads (and for writes if `writable`) for its whole length
/// during the call, and must not be accessed otherwise meanwhile; a writable region must not
/// overlap `code`. Memory outside the regions, `code` and the emulator's own stack is never
/// touched.
pub unsafe fn call(
    code: &[u8],
    entry: usize,
    args: &[u64],
    regions: &[Region],
    cfg: &EmuConfig,
) -> Result<EmuStats, EmuError> {
    let mut m = exec::Machine::new(code, regions, cfg, args);
    m.run(entry)?;
    Ok(EmuStats {
        rax: m.gpr[0],
        ..m.stats
    })
}

/// The emulator as an engine's runner of kernels this host cannot execute
/// (`selectjit::EngineConfig::runner`): an x86 tier the CPU lacks is then still compiled, and
/// its kernels run here with every memory access checked against the call's buffers. An
/// emulation error is a bug of the generated code; the engine panics with its message.
#[derive(Debug, Clone, Copy, Default)]
pub struct Emulator;

impl Emulator {
    /// The emulator, shared, as `EngineConfig::runner` takes it.
    pub fn runner() -> std::sync::Arc<dyn selectjit::codegen::CodeRunner> {
        std::sync::Arc::new(Emulator)
    }
}

impl selectjit::codegen::CodeRunner for Emulator {
    unsafe fn call(
        &self,
        code: &[u8],
        avx512: bool,
        args: &selectjit::codegen::KernelArgs,
        regions: &[selectjit::codegen::MemRegion],
    ) -> Result<(), String> {
        let regions: Vec<Region> = regions
            .iter()
            .map(|r| Region {
                addr: r.addr,
                len: r.len,
                writable: r.writable,
            })
            .collect();
        let cfg = EmuConfig {
            max_steps: 1 << 36,
            avx512,
        };
        // SAFETY: the caller's contract (`CodeRunner::call`): every region is memory it may
        // access as described for the duration of the call; the code is a separate buffer.
        unsafe { call(code, 0, args, &regions, &cfg) }
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// Intel-syntax listing of x86-64 machine code, one instruction per line with its offset.
pub fn disassemble(code: &[u8]) -> String {
    use iced_x86::{Decoder, DecoderOptions};
    let mut d = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
    let mut f = IntelFormatter::new();
    let mut out = String::new();
    let mut text = String::new();
    for ins in &mut d {
        text.clear();
        f.format(&ins, &mut text);
        out.push_str(&format!("{:6x}  {text}\n", ins.ip()));
    }
    out
}

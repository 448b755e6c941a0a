//! Tests of the emulator: against the host CPU, against the SDM's definitions of the AVX-512
//! instructions, its error paths, and whole kernels.
//!
//! The harness wraps a snippet of code in a function that loads every register (general,
//! vector, opmask) and the flags from a [`State`], runs the snippet and stores them back; the
//! same bytes run natively and in the emulator, and the two states are compared.

// The models index elements like the SDM's pseudo-code does.
#![allow(clippy::needless_range_loop)]

mod avx512;
mod errors;
mod hw;
mod kernels;
// `skip(what, why)`: `SKIPPED: ...` on stderr, a failure under `SELECTJIT_REQUIRE_ALL_TIERS=1`
// (as `.ci/run` sets), shared with the workspace's other tests.
#[path = "../../../../tests/common/skip.rs"]
mod skip;

use std::mem::offset_of;
use std::sync::Once;

use iced_x86::IcedError;
use iced_x86::code_asm::*;
use memmap2::{Mmap, MmapMut};

use super::{EmuConfig, EmuError, EmuStats, Region, call};

/// Bytes of scratch memory in a [`State`].
pub(super) const MEM: usize = 512;

/// Status flags.
pub(super) const CF: u64 = 1;
pub(super) const PF: u64 = 1 << 2;
pub(super) const AF: u64 = 1 << 4;
pub(super) const ZF: u64 = 1 << 6;
pub(super) const SF: u64 = 1 << 7;
pub(super) const OF: u64 = 1 << 11;
pub(super) const ALL: u64 = CF | PF | AF | ZF | SF | OF;

/// Values of general registers tagged as pointers into the state: the harness replaces them
/// with the real address before a run and puts the tag back after, so that the native and the
/// emulated runs (on two copies of the state) compare equal.
const TAG: u64 = 0x7e57_0000_0000;

/// Everything a snippet sees and changes.
#[repr(C, align(64))]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct State {
    /// rax, rcx, rdx, rbx, rsp (unused), rbp, rsi, rdi, r8–r15.
    pub gpr: [u64; 16],
    pub flags: u64,
    pad: [u64; 7],
    pub v: [[u8; 64]; 32],
    pub k: [u64; 8],
    pub mem: [u8; MEM],
}

impl Default for State {
    fn default() -> Self {
        State {
            gpr: [0; 16],
            flags: 0,
            pad: [0; 7],
            v: [[0; 64]; 32],
            k: [0; 8],
            mem: [0; MEM],
        }
    }
}

/// A tagged pointer to `mem[off]` (see [`TAG`]).
pub(super) fn mem_ptr(off: usize) -> u64 {
    TAG + (offset_of!(State, mem) + off) as u64
}

pub(super) const GPR: [AsmRegister64; 16] = [
    rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8, r9, r10, r11, r12, r13, r14, r15,
];
pub(super) const YMM: [AsmRegisterYmm; 16] = [
    ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12, ymm13, ymm14,
    ymm15,
];
pub(super) const ZMM: [AsmRegisterZmm; 32] = [
    zmm0, zmm1, zmm2, zmm3, zmm4, zmm5, zmm6, zmm7, zmm8, zmm9, zmm10, zmm11, zmm12, zmm13, zmm14,
    zmm15, zmm16, zmm17, zmm18, zmm19, zmm20, zmm21, zmm22, zmm23, zmm24, zmm25, zmm26, zmm27,
    zmm28, zmm29, zmm30, zmm31,
];
pub(super) const KREG: [AsmRegisterK; 8] = [k0, k1, k2, k3, k4, k5, k6, k7];

/// Which registers the harness loads and stores.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Isa {
    /// ymm0–ymm15.
    Avx2,
    /// zmm0–zmm31 and k0–k7.
    Avx512,
}

/// A snippet body.
pub(super) type Body<'a> = &'a dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>;

/// Assembles `body` inside the load/store wrapper: `fn(state: *mut State)`.
pub(super) fn wrap(isa: Isa, body: Body) -> Vec<u8> {
    let build = || -> Result<Vec<u8>, IcedError> {
        let mut a = CodeAssembler::new(64)?;
        let v = offset_of!(State, v) as i32;
        let kof = offset_of!(State, k) as i32;
        let fl = offset_of!(State, flags) as i32;
        for r in [rbx, rbp, r12, r13, r14, r15] {
            a.push(r)?;
        }
        a.push(rdi)?;
        match isa {
            Isa::Avx2 => {
                for (i, &y) in YMM.iter().enumerate() {
                    a.vmovdqu(y, ymmword_ptr(rdi + v + 64 * i as i32))?;
                }
            }
            Isa::Avx512 => {
                for (i, &z) in ZMM.iter().enumerate() {
                    a.vmovdqu64(z, zmmword_ptr(rdi + v + 64 * i as i32))?;
                }
                for (i, &k) in KREG.iter().enumerate() {
                    a.kmovq(k, qword_ptr(rdi + kof + 8 * i as i32))?;
                }
            }
        }
        a.mov(rax, qword_ptr(rdi + fl))?;
        a.push(rax)?;
        a.popfq()?;
        for (i, &r) in GPR.iter().enumerate() {
            if i != 4 && i != 7 {
                a.mov(r, qword_ptr(rdi + 8 * i as i32))?;
            }
        }
        a.mov(rdi, qword_ptr(rdi + 56))?;
        // AVX-512 snippets get EVEX encodings even where a VEX one exists.
        a.set_prefer_vex(isa == Isa::Avx2);
        body(&mut a)?;
        a.set_prefer_vex(true);
        a.pushfq()?;
        a.push(rdi)?;
        a.mov(rdi, qword_ptr(rsp + 16))?;
        for (i, &r) in GPR.iter().enumerate() {
            if i != 4 && i != 7 {
                a.mov(qword_ptr(rdi + 8 * i as i32), r)?;
            }
        }
        a.pop(rax)?;
        a.mov(qword_ptr(rdi + 56), rax)?;
        a.pop(rax)?;
        a.mov(qword_ptr(rdi + fl), rax)?;
        match isa {
            Isa::Avx2 => {
                for (i, &y) in YMM.iter().enumerate() {
                    a.vmovdqu(ymmword_ptr(rdi + v + 64 * i as i32), y)?;
                }
            }
            Isa::Avx512 => {
                for (i, &z) in ZMM.iter().enumerate() {
                    a.vmovdqu64(zmmword_ptr(rdi + v + 64 * i as i32), z)?;
                }
                for (i, &k) in KREG.iter().enumerate() {
                    a.kmovq(qword_ptr(rdi + kof + 8 * i as i32), k)?;
                }
            }
        }
        a.add(rsp, 8)?;
        for r in [r15, r14, r13, r12, rbp, rbx] {
            a.pop(r)?;
        }
        a.vzeroupper()?;
        a.ret()?;
        a.assemble(0)
    };
    build().expect("assemble")
}

/// Assembles a plain function.
pub(super) fn asm(body: Body) -> Vec<u8> {
    let mut a = CodeAssembler::new(64).expect("assembler");
    body(&mut a).expect("assemble");
    a.assemble(0).expect("assemble")
}

/// Code in executable memory, runnable natively and in the emulator at the same address.
pub(super) struct Exec {
    map: Mmap,
}

impl Exec {
    pub(super) fn new(code: &[u8]) -> Exec {
        let mut m = MmapMut::map_anon(code.len().max(1)).expect("mmap");
        m[..code.len()].copy_from_slice(code);
        Exec {
            map: m.make_exec().expect("make_exec"),
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Calls the code natively as `fn(*mut State)`.
    ///
    /// # Safety
    /// The code must be a function of that type that only uses instructions the host has.
    pub(super) unsafe fn native(&self, st: &mut State) {
        // SAFETY: the mapping is executable and holds a whole function (the caller's contract).
        let f: unsafe extern "sysv64" fn(*mut State) =
            unsafe { std::mem::transmute(self.map.as_ptr()) };
        // SAFETY: as above; `st` is a valid exclusive pointer for the call.
        unsafe { f(st) }
    }

    /// Calls the code in the emulator as `fn(*mut State)`, with `st` as its only region.
    pub(super) fn emu(&self, st: &mut State, avx512: bool) -> Result<EmuStats, EmuError> {
        let cfg = EmuConfig {
            max_steps: 1_000_000,
            avx512,
        };
        let p = st as *mut State as u64;
        let region = Region::writable(std::slice::from_mut(st));
        // SAFETY: the region is `st`, exclusively borrowed for the call.
        unsafe { call(self.bytes(), 0, &[p], &[region], &cfg) }
    }
}

/// Replaces tagged values by addresses in `st` (before a run).
fn untag(st: &mut State) {
    let base = st as *const State as u64;
    let size = std::mem::size_of::<State>() as u64;
    for g in st.gpr.iter_mut() {
        if g.wrapping_sub(TAG) <= size {
            *g = *g - TAG + base;
        }
    }
}

/// Replaces addresses in `st` by tagged values (after a run).
fn retag(st: &mut State) {
    let base = st as *const State as u64;
    let size = std::mem::size_of::<State>() as u64;
    for g in st.gpr.iter_mut() {
        if g.wrapping_sub(base) <= size {
            *g = *g - base + TAG;
        }
    }
}

/// Runs the wrapped snippet in the emulator.
pub(super) fn run_emu(x: &Exec, input: &State, isa: Isa) -> Result<State, EmuError> {
    let mut st = Box::new(*input);
    untag(&mut st);
    x.emu(&mut st, isa == Isa::Avx512)?;
    retag(&mut st);
    Ok(*st)
}

/// Runs the wrapped snippet natively.
///
/// # Safety
/// The host must have every instruction of the snippet.
pub(super) unsafe fn run_native(x: &Exec, input: &State) -> State {
    let mut st = Box::new(*input);
    untag(&mut st);
    // SAFETY: the caller checked the host's features; the wrapper is a `fn(*mut State)`.
    unsafe { x.native(&mut st) };
    retag(&mut st);
    *st
}

/// Whether the host runs AVX-512 F, BW, DQ and VL code.
pub(super) fn host_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512dq")
}

/// Says once per test process that AVX-512 snippets run in the emulator only (a skip of the
/// comparison with the hardware: under `SELECTJIT_REQUIRE_ALL_TIERS=1`, a failure of every test
/// that calls this).
pub(super) fn note_no_avx512() {
    const WHAT: &str = "emu: AVX-512 snippets natively";
    const WHY: &str = "the host lacks AVX-512 (F/BW/DQ/VL); they run in the emulator only";
    if skip::required() {
        skip::skip(WHAT, WHY);
    }
    static ONCE: Once = Once::new();
    ONCE.call_once(|| skip::skip(WHAT, WHY));
}

/// The differences between two states, as text (empty if none). `flags` masks the flags
/// compared.
pub(super) fn diff(isa: Isa, a: &State, b: &State, flags: u64) -> String {
    let mut out = String::new();
    let names = [
        "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15",
    ];
    for i in (0..16).filter(|&i| i != 4) {
        if a.gpr[i] != b.gpr[i] {
            out += &format!("  {}: {:#x} vs {:#x}\n", names[i], a.gpr[i], b.gpr[i]);
        }
    }
    if (a.flags ^ b.flags) & flags != 0 {
        out += &format!(
            "  flags: {:#x} vs {:#x} (compared {:#x})\n",
            a.flags & flags,
            b.flags & flags,
            flags
        );
    }
    let (nv, width) = match isa {
        Isa::Avx2 => (16, 32),
        Isa::Avx512 => (32, 64),
    };
    for i in 0..nv {
        if a.v[i][..width] != b.v[i][..width] {
            out += &format!(
                "  v{i}: {:02x?}\n   vs {:02x?}\n",
                &a.v[i][..width],
                &b.v[i][..width]
            );
        }
    }
    if isa == Isa::Avx512 {
        for i in 0..8 {
            if a.k[i] != b.k[i] {
                out += &format!("  k{i}: {:#x} vs {:#x}\n", a.k[i], b.k[i]);
            }
        }
    }
    if a.mem != b.mem {
        for i in (0..MEM).filter(|&i| a.mem[i] != b.mem[i]) {
            out += &format!("  mem[{i}]: {:#04x} vs {:#04x}\n", a.mem[i], b.mem[i]);
        }
    }
    out
}

/// A small deterministic generator of test inputs.
pub(super) struct Rng(u64);

/// Values at the edges of 8-, 16-, 32- and 64-bit arithmetic.
const EDGES: [u64; 26] = [
    0,
    1,
    2,
    3,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0xffff_ffff_8000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
    u64::MAX - 1,
    31,
    32,
    63,
    64,
    0x0f0f_0f0f_f0f0_f0f0,
];

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// An edge value, a small number of either sign, or random bits.
    pub(super) fn edge(&mut self) -> u64 {
        match self.below(4) {
            0 => EDGES[self.below(EDGES.len() as u64) as usize],
            1 => (self.below(33) as i64 - 16) as u64,
            2 => {
                let e = EDGES[self.below(EDGES.len() as u64) as usize];
                e ^ (1 << self.below(64))
            }
            _ => self.next(),
        }
    }

    /// 64 bytes for a vector register: random bytes, or elements of a random size from a small
    /// set (so that comparisons find equal elements), or all zero / all ones.
    pub(super) fn vector(&mut self) -> [u8; 64] {
        let mut v = [0u8; 64];
        match self.below(6) {
            0 | 1 => v.iter_mut().for_each(|b| *b = self.next() as u8),
            2 => v.fill(if self.below(2) == 0 { 0 } else { 0xff }),
            _ => {
                let w = 1 << self.below(4);
                let set = [0u64, 1, u64::MAX, 0x80, 0x7f, 0x8000_0000, 0x7fff_ffff];
                for i in 0..64 / w {
                    let x = set[self.below(set.len() as u64) as usize];
                    v[i * w..(i + 1) * w].copy_from_slice(&x.to_le_bytes()[..w]);
                }
            }
        }
        v
    }

    /// A random state: edge values in the general registers, random flags, vectors, opmasks
    /// and memory.
    pub(super) fn state(&mut self) -> State {
        let mut st = State::default();
        for g in st.gpr.iter_mut() {
            *g = self.edge();
        }
        st.gpr[4] = 0;
        st.flags = (self.next() & ALL) | 2;
        for v in st.v.iter_mut() {
            *v = self.vector();
        }
        for k in st.k.iter_mut() {
            *k = match self.below(4) {
                0 => 0,
                1 => u64::MAX,
                _ => self.next(),
            };
        }
        for b in st.mem.iter_mut() {
            *b = self.next() as u8;
        }
        st
    }
}

/// Runs `body` in the wrapper on `iters` random states (adjusted by `setup`) natively and in
/// the emulator and compares the states; `flags(input)` gives the flags to compare. AVX-512
/// snippets run natively only on hosts with AVX-512.
pub(super) fn compare(
    name: &str,
    isa: Isa,
    iters: usize,
    flags: &dyn Fn(&State) -> u64,
    setup: &dyn Fn(&mut State, &mut Rng),
    body: Body,
) {
    let native = isa == Isa::Avx2 || host_avx512();
    if !native {
        note_no_avx512();
    }
    let x = Exec::new(&wrap(isa, body));
    let mut rng = Rng::new(name.len() as u64 * 7919 + name.bytes().map(u64::from).sum::<u64>());
    for it in 0..iters {
        let mut input = rng.state();
        setup(&mut input, &mut rng);
        let emu = run_emu(&x, &input, isa)
            .unwrap_or_else(|e| panic!("{name}: emulator failed on iteration {it}: {e}"));
        if native {
            // SAFETY: AVX2 (and BMI1/2, LZCNT, POPCNT) snippets only run on hosts with them:
            // the tests that use them check first; AVX-512 ones only where detected above.
            let hw = unsafe { run_native(&x, &input) };
            let d = diff(isa, &hw, &emu, flags(&input));
            assert!(
                d.is_empty(),
                "{name}: iteration {it}: hardware vs emulator differ:\n{d}input gpr {:x?} flags {:#x}",
                input.gpr,
                input.flags
            );
        }
    }
}

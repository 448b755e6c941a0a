//! The emulator against the host CPU, on random and edge-value states: general-purpose, BMI
//! and AVX2 instructions always; AVX-512 ones where the host has AVX-512 (elsewhere they run in
//! the emulator only, which still checks that it accepts them).

use super::*;

/// Random states per snippet.
const N: usize = 150;

/// Whether the host runs the non-AVX-512 snippets; if not, a skip (a failure under
/// `SELECTJIT_REQUIRE_ALL_TIERS=1`).
fn host_ok() -> bool {
    let ok = std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("lzcnt")
        && std::arch::is_x86_feature_detected!("popcnt");
    if !ok {
        skip::skip(
            "emu: hardware comparison",
            "the host lacks AVX2/BMI/LZCNT/POPCNT",
        );
    }
    ok
}

fn no_setup(_: &mut State, _: &mut Rng) {}

/// rsi points into the scratch memory (at a random offset below 256).
fn rsi_mem(st: &mut State, rng: &mut Rng) {
    st.gpr[6] = mem_ptr(rng.below(256) as usize);
}

/// rsi points to a 64-byte aligned place in the scratch memory.
fn rsi_aligned(st: &mut State, rng: &mut Rng) {
    st.gpr[6] = mem_ptr(64 * rng.below(4) as usize);
}

macro_rules! hw {
    ($isa:expr, $name:expr, $flags:expr, $setup:expr, |$a:ident| $body:expr) => {
        compare(
            $name,
            $isa,
            N,
            &$flags,
            &$setup,
            &|$a: &mut CodeAssembler| -> Result<(), IcedError> {
                $body?;
                Ok(())
            },
        )
    };
}

/// Compares a general-purpose snippet.
macro_rules! g {
    ($name:expr, $flags:expr, |$a:ident| $body:expr) => {
        hw!(Isa::Avx2, $name, |_: &State| $flags, no_setup, |$a| $body)
    };
    ($name:expr, $flags:expr, $setup:expr, |$a:ident| $body:expr) => {
        hw!(Isa::Avx2, $name, |_: &State| $flags, $setup, |$a| $body)
    };
}

#[test]
fn alu_matches_hardware() {
    if !host_ok() {
        return;
    }
    let logic = ALL & !AF;
    g!("add r64", ALL, |a| a.add(rax, rbx));
    g!("add r32", ALL, |a| a.add(eax, ebx));
    g!("add r16", ALL, |a| a.add(ax, bx));
    g!("add r8", ALL, |a| a.add(al, bl));
    g!("add r8h", ALL, |a| a.add(ah, bh));
    g!("add r64 imm8", ALL, |a| a.add(rcx, -5));
    g!("add r32 imm32", ALL, |a| a.add(edx, 0x1234_5678));
    g!("add r64 imm32", ALL, |a| a.add(r9, -0x1234_5678));
    g!("add r8 imm", ALL, |a| a.add(r10b, 0x7f));
    g!("add m32 r32", ALL, rsi_mem, |a| a
        .add(dword_ptr(rsi + 4), eax));
    g!("add r64 m64", ALL, rsi_mem, |a| a
        .add(rax, qword_ptr(rsi + 8)));
    g!("add m8 imm", ALL, rsi_mem, |a| a
        .add(byte_ptr(rsi), 0x81u32 as i32));
    g!("add m16 imm", ALL, rsi_mem, |a| a
        .add(word_ptr(rsi + 2), 0x1234));
    g!("sub r64", ALL, |a| a.sub(rax, rbx));
    g!("sub r32", ALL, |a| a.sub(r8d, r12d));
    g!("sub r16", ALL, |a| a.sub(cx, dx));
    g!("sub r8", ALL, |a| a.sub(sil, dil));
    g!("sub r64 imm8", ALL, |a| a.sub(r15, 8));
    g!("sub m64 r64", ALL, rsi_mem, |a| a.sub(qword_ptr(rsi), rcx));
    g!("sub r32 m32", ALL, rsi_mem, |a| a
        .sub(ecx, dword_ptr(rsi + 12)));
    g!("cmp r64", ALL, |a| a.cmp(rax, rbx));
    g!("cmp r32", ALL, |a| a.cmp(eax, ebx));
    g!("cmp r16", ALL, |a| a.cmp(ax, bx));
    g!("cmp r8", ALL, |a| a.cmp(al, bl));
    g!("cmp r64 imm8", ALL, |a| a.cmp(rdx, 7));
    g!("cmp r32 imm32", ALL, |a| a.cmp(r11d, -0x7000_0000));
    g!("cmp m32 imm", ALL, rsi_mem, |a| a.cmp(dword_ptr(rsi), 1));
    g!("cmp m8 r8", ALL, rsi_mem, |a| a.cmp(byte_ptr(rsi + 3), cl));
    g!("and r64", logic, |a| a.and(rax, rbx));
    g!("and r32", logic, |a| a.and(eax, ebx));
    g!("and r8", logic, |a| a.and(al, bl));
    g!("and r64 imm8", logic, |a| a.and(rax, -16));
    g!("and m32 imm", logic, rsi_mem, |a| a
        .and(dword_ptr(rsi), 0xff00));
    g!("or r64", logic, |a| a.or(rax, rbx));
    g!("or r16", logic, |a| a.or(ax, bx));
    g!("or r32 m32", logic, rsi_mem, |a| a
        .or(r13d, dword_ptr(rsi + 16)));
    g!("xor r64", logic, |a| a.xor(rax, rbx));
    g!("xor r32 self", logic, |a| a.xor(eax, eax));
    g!("xor r8", logic, |a| a.xor(ch, dl));
    g!("xor m64 r64", logic, rsi_mem, |a| a
        .xor(qword_ptr(rsi), rbx));
    g!("test r64", logic, |a| a.test(rax, rbx));
    g!("test r32 imm", logic, |a| a
        .test(eax, 0x8000_0001u32 as i32));
    g!("test r8", logic, |a| a.test(al, al));
    g!("test m8 imm", logic, rsi_mem, |a| a
        .test(byte_ptr(rsi), 0x80));
    g!("inc r64", ALL, |a| a.inc(rax));
    g!("inc r32", ALL, |a| a.inc(ecx));
    g!("inc r8", ALL, |a| a.inc(dl));
    g!("inc m32", ALL, rsi_mem, |a| a.inc(dword_ptr(rsi)));
    g!("dec r64", ALL, |a| a.dec(rax));
    g!("dec r16", ALL, |a| a.dec(bx));
    g!("dec m64", ALL, rsi_mem, |a| a.dec(qword_ptr(rsi + 8)));
    g!("neg r64", ALL, |a| a.neg(rax));
    g!("neg r32", ALL, |a| a.neg(esi));
    g!("neg r8", ALL, |a| a.neg(bl));
    g!("neg m16", ALL, rsi_mem, |a| a.neg(word_ptr(rsi)));
    g!("not r64", ALL, |a| a.not(rax));
    g!("not r32", ALL, |a| a.not(r14d));
    g!("not m8", ALL, rsi_mem, |a| a.not(byte_ptr(rsi)));
    let mul = CF | OF;
    g!("imul r64", mul, |a| a.imul_2(rax, rbx));
    g!("imul r32", mul, |a| a.imul_2(eax, ebx));
    g!("imul r16", mul, |a| a.imul_2(ax, bx));
    g!("imul r64 m64", mul, rsi_mem, |a| a
        .imul_2(rcx, qword_ptr(rsi)));
    g!("imul r32 r32 imm8", mul, |a| a.imul_3(eax, ebx, -3));
    g!("imul r64 r64 imm32", mul, |a| a.imul_3(
        rdx,
        r8,
        0x0123_4567
    ));
    g!("imul r32 m32 imm32", mul, rsi_mem, |a| a.imul_3(
        r9d,
        dword_ptr(rsi + 4),
        100_000
    ));
}

/// The flags a shift defines for `count` on a `bits`-bit operand (for `shl` and `shr`, CF is
/// undefined when the count reaches the width).
fn shift_flags(bits: u64, count: u64, arith: bool) -> u64 {
    let c = count & if bits == 64 { 63 } else { 31 };
    match c {
        0 => ALL,
        1 => ALL & !AF,
        _ if c >= bits && !arith => ZF | SF | PF,
        _ => CF | ZF | SF | PF,
    }
}

#[test]
fn shifts_match_hardware() {
    if !host_ok() {
        return;
    }
    let small_cl = |st: &mut State, rng: &mut Rng| {
        if rng.below(2) == 0 {
            st.gpr[1] = rng.below(70) | (rng.next() & !0xff);
        }
    };
    let by_cl = |bits: u64, arith: bool| move |st: &State| shift_flags(bits, st.gpr[1], arith);
    hw!(Isa::Avx2, "shl r64 cl", by_cl(64, false), small_cl, |a| a
        .shl(rax, cl));
    hw!(Isa::Avx2, "shl r32 cl", by_cl(32, false), small_cl, |a| a
        .shl(ebx, cl));
    hw!(Isa::Avx2, "shl r16 cl", by_cl(16, false), small_cl, |a| a
        .shl(dx, cl));
    hw!(Isa::Avx2, "shl r8 cl", by_cl(8, false), small_cl, |a| a
        .shl(al, cl));
    hw!(Isa::Avx2, "shr r64 cl", by_cl(64, false), small_cl, |a| a
        .shr(rax, cl));
    hw!(Isa::Avx2, "shr r32 cl", by_cl(32, false), small_cl, |a| a
        .shr(r8d, cl));
    hw!(Isa::Avx2, "shr r8 cl", by_cl(8, false), small_cl, |a| a
        .shr(bl, cl));
    hw!(Isa::Avx2, "sar r64 cl", by_cl(64, true), small_cl, |a| a
        .sar(rax, cl));
    hw!(Isa::Avx2, "sar r32 cl", by_cl(32, true), small_cl, |a| a
        .sar(esi, cl));
    hw!(Isa::Avx2, "sar r16 cl", by_cl(16, true), small_cl, |a| a
        .sar(di, cl));
    hw!(
        Isa::Avx2,
        "shl m32 cl",
        by_cl(32, false),
        |st: &mut State, rng: &mut Rng| {
            rsi_mem(st, rng);
            small_cl(st, rng);
        },
        |a| a.shl(dword_ptr(rsi), cl)
    );
    for n in [1u32, 2, 7, 31, 63] {
        let f = move |bits: u64, arith: bool| move |_: &State| shift_flags(bits, n as u64, arith);
        let k = n as i32;
        hw!(
            Isa::Avx2,
            &format!("shl r64 {n}"),
            f(64, false),
            no_setup,
            |a| a.shl(rax, k)
        );
        hw!(
            Isa::Avx2,
            &format!("shl r32 {n}"),
            f(32, false),
            no_setup,
            |a| a.shl(ecx, k)
        );
        hw!(
            Isa::Avx2,
            &format!("shr r64 {n}"),
            f(64, false),
            no_setup,
            |a| a.shr(rdx, k)
        );
        hw!(
            Isa::Avx2,
            &format!("shr r16 {n}"),
            f(16, false),
            no_setup,
            |a| a.shr(bx, k)
        );
        hw!(
            Isa::Avx2,
            &format!("sar r64 {n}"),
            f(64, true),
            no_setup,
            |a| a.sar(r9, k)
        );
        hw!(
            Isa::Avx2,
            &format!("sar r8 {n}"),
            f(8, true),
            no_setup,
            |a| a.sar(r10b, k)
        );
        hw!(
            Isa::Avx2,
            &format!("sal r32 {n}"),
            f(32, false),
            no_setup,
            |a| a.sal(r11d, k)
        );
    }
    g!("shlx r64", ALL, |a| a.shlx(rax, rbx, rcx));
    g!("shlx r32", ALL, |a| a.shlx(eax, ebx, ecx));
    g!("shrx r64", ALL, |a| a.shrx(rdx, r8, r9));
    g!("shrx r32 m32", ALL, rsi_mem, |a| a.shrx(
        edx,
        dword_ptr(rsi),
        r9d
    ));
    g!("sarx r64", ALL, |a| a.sarx(r10, r11, r12));
    g!("sarx r32", ALL, |a| a.sarx(r10d, r11d, r12d));
}

#[test]
fn moves_and_conditions_match_hardware() {
    if !host_ok() {
        return;
    }
    g!("mov r64", ALL, |a| a.mov(rax, rbx));
    g!("mov r32", ALL, |a| a.mov(eax, ebx));
    g!("mov r16", ALL, |a| a.mov(ax, bx));
    g!("mov r8h", ALL, |a| a.mov(ah, dl));
    g!("mov r8", ALL, |a| a.mov(sil, dil));
    g!("mov r64 imm64", ALL, |a| a
        .mov(rcx, 0x1234_5678_9abc_def0u64));
    g!("mov r64 imm32", ALL, |a| a.mov(rcx, -2i64));
    g!("mov r32 imm", ALL, |a| a.mov(r12d, 0xdead_beefu32));
    g!("mov r8 imm", ALL, |a| a.mov(r12b, 0x5a));
    g!("mov m64 r64", ALL, rsi_mem, |a| a
        .mov(qword_ptr(rsi + 8), rax));
    g!("mov m16 r16", ALL, rsi_mem, |a| a
        .mov(word_ptr(rsi + 1), ax));
    g!("mov m8 imm", ALL, rsi_mem, |a| a
        .mov(byte_ptr(rsi + 3), 0x99u32 as i32));
    g!("mov m32 imm", ALL, rsi_mem, |a| a.mov(dword_ptr(rsi), -7));
    g!("mov m64 imm", ALL, rsi_mem, |a| a.mov(qword_ptr(rsi), -7));
    g!("mov r32 m32", ALL, rsi_mem, |a| a
        .mov(ebx, dword_ptr(rsi + 20)));
    g!(
        "mov r64 m64 sib",
        ALL,
        |st: &mut State, rng: &mut Rng| {
            rsi_mem(st, rng);
            st.gpr[1] = rng.below(16);
        },
        |a| a.mov(rbx, qword_ptr(rsi + rcx * 8 + 16))
    );
    g!("movzx r32 r8", ALL, |a| a.movzx(eax, bl));
    g!("movzx r64 r16", ALL, |a| a.movzx(rax, bx));
    g!("movzx r32 r8h", ALL, |a| a.movzx(ecx, ah));
    g!("movzx r32 m8", ALL, rsi_mem, |a| a
        .movzx(edx, byte_ptr(rsi)));
    g!("movzx r64 m16", ALL, rsi_mem, |a| a
        .movzx(rdx, word_ptr(rsi)));
    g!("movsx r64 r8", ALL, |a| a.movsx(rax, bl));
    g!("movsx r32 r16", ALL, |a| a.movsx(eax, bx));
    g!("movsx r16 r8", ALL, |a| a.movsx(ax, cl));
    g!("movsx r64 m16", ALL, rsi_mem, |a| a
        .movsx(r8, word_ptr(rsi + 6)));
    g!("movsxd r64 r32", ALL, |a| a.movsxd(rax, ebx));
    g!("movsxd r64 m32", ALL, rsi_mem, |a| a
        .movsxd(r15, dword_ptr(rsi)));
    g!("lea r64", ALL, |a| a.lea(rax, ptr(rbx + rcx * 4 + 8)));
    g!("lea r32", ALL, |a| a.lea(eax, ptr(rbx + rcx * 8 - 1)));
    g!("lea r64 no base", ALL, |a| a.lea(rdx, ptr(rcx * 2 + 0x100)));
    g!("lea r64 rip", ALL, |a| {
        let mut l = a.create_label();
        a.lea(rdx, ptr(l))?;
        a.set_label(&mut l)?;
        a.nop()
    });
    g!("cmovs", ALL, |a| {
        a.cmovo(rax, rbx)?;
        a.cmovno(rcx, rdx)?;
        a.cmovb(ebp, esi)?;
        a.cmovae(r8d, r9d)?;
        a.cmove(r10, r11)?;
        a.cmovne(r12w, r13w)?;
        a.cmovbe(r14, r15)?;
        a.cmova(eax, ecx)?;
        a.cmovs(rbx, rsi)?;
        a.cmovns(edx, ebp)?;
        a.cmovp(r8, r15)?;
        a.cmovnp(r9d, r14d)?;
        a.cmovl(r10, rax)?;
        a.cmovge(r11d, ebx)?;
        a.cmovle(r12, rcx)?;
        a.cmovg(r13d, edx)
    });
    g!("cmov m", ALL, rsi_mem, |a| {
        a.cmove(rax, qword_ptr(rsi))?;
        a.cmovl(ebx, dword_ptr(rsi + 8))
    });
    g!("setcc", ALL, rsi_mem, |a| {
        a.seto(al)?;
        a.setno(ah)?;
        a.setb(bl)?;
        a.setae(bh)?;
        a.sete(cl)?;
        a.setne(ch)?;
        a.setbe(dl)?;
        a.seta(dh)?;
        a.sets(r8b)?;
        a.setns(r9b)?;
        a.setp(r10b)?;
        a.setnp(r11b)?;
        a.setl(r12b)?;
        a.setge(r13b)?;
        a.setle(byte_ptr(rsi))?;
        a.setg(byte_ptr(rsi + 1))
    });
    // Each jcc skips an increment (lea keeps the flags) of its own register when taken.
    g!("jcc", ALL, |a| {
        macro_rules! j {
            ($j:ident, $r:expr) => {{
                let mut l = a.create_label();
                a.$j(l)?;
                a.lea($r, ptr($r + 1))?;
                a.set_label(&mut l)?;
                a.nop()?;
            }};
        }
        j!(jo, rax);
        j!(jno, rcx);
        j!(jb, rdx);
        j!(jae, rbx);
        j!(je, rbp);
        j!(jne, rsi);
        j!(jbe, rdi);
        j!(ja, r8);
        j!(js, r9);
        j!(jns, r10);
        j!(jp, r11);
        j!(jnp, r12);
        j!(jl, r13);
        j!(jge, r14);
        j!(jle, r15);
        j!(jg, rax);
        let mut back = a.create_label();
        let mut fwd = a.create_label();
        a.jmp(fwd)?;
        a.set_label(&mut back)?;
        a.lea(rcx, ptr(rcx + 100))?;
        let mut end = a.create_label();
        a.jmp(end)?;
        a.set_label(&mut fwd)?;
        a.jmp(back)?;
        a.set_label(&mut end)?;
        a.nop()
    });
    g!("jmp indirect", ALL, |a| {
        let mut l = a.create_label();
        a.lea(rax, ptr(l))?;
        a.jmp(rax)?;
        a.lea(rbx, ptr(rbx + 1))?;
        a.set_label(&mut l)?;
        a.nop()
    });
    g!("push pop", ALL, rsi_mem, |a| {
        a.push(rax)?;
        a.push(0x7fff_ffff)?;
        a.push(-3)?;
        a.push(qword_ptr(rsi))?;
        a.pop(rbx)?;
        a.pop(qword_ptr(rsi + 8))?;
        a.pop(rcx)?;
        a.pop(r12)?;
        a.pushfq()?;
        a.pop(rdx)?;
        a.and(rdx, 0x8d5)
    });
    g!("nops", ALL, |a| {
        a.nop()?;
        a.db(&[0x66, 0x90])?;
        a.db(&[0x0f, 0x1f, 0x00])?;
        a.db(&[0x0f, 0x1f, 0x44, 0x00, 0x00])?;
        a.db(&[0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00])?;
        a.db(&[0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00])?;
        a.pause()
    });
}

#[test]
fn bit_instructions_match_hardware() {
    if !host_ok() {
        return;
    }
    let idx = |st: &mut State, rng: &mut Rng| {
        if rng.below(2) == 0 {
            st.gpr[1] = rng.below(80) | (rng.next() & !0xff);
        }
    };
    hw!(
        Isa::Avx2,
        "bzhi r64",
        |_: &State| CF | ZF | SF | OF,
        idx,
        |a| a.bzhi(rax, rbx, rcx)
    );
    hw!(
        Isa::Avx2,
        "bzhi r32",
        |_: &State| CF | ZF | SF | OF,
        idx,
        |a| a.bzhi(eax, ebx, ecx)
    );
    hw!(
        Isa::Avx2,
        "bzhi r32 m32",
        |_: &State| CF | ZF | SF | OF,
        |st: &mut State, rng: &mut Rng| {
            idx(st, rng);
            rsi_mem(st, rng);
        },
        |a| a.bzhi(r8d, dword_ptr(rsi), ecx)
    );
    g!("andn r64", CF | ZF | SF | OF, |a| a.andn(rax, rbx, rcx));
    g!("andn r32", CF | ZF | SF | OF, |a| a.andn(eax, ebx, ecx));
    g!("popcnt r64", ALL, |a| a.popcnt(rax, rbx));
    g!("popcnt r32", ALL, |a| a.popcnt(eax, ebx));
    g!("popcnt r16", ALL, |a| a.popcnt(ax, bx));
    g!("popcnt r64 m64", ALL, rsi_mem, |a| a
        .popcnt(rax, qword_ptr(rsi)));
    g!("tzcnt r64", CF | ZF, |a| a.tzcnt(rax, rbx));
    g!("tzcnt r32", CF | ZF, |a| a.tzcnt(eax, ebx));
    g!("tzcnt r16", CF | ZF, |a| a.tzcnt(ax, bx));
    g!("tzcnt r32 m32", CF | ZF, rsi_mem, |a| a
        .tzcnt(ecx, dword_ptr(rsi)));
    g!("lzcnt r64", CF | ZF, |a| a.lzcnt(rax, rbx));
    g!("lzcnt r32", CF | ZF, |a| a.lzcnt(eax, ebx));
    g!("lzcnt r16", CF | ZF, |a| a.lzcnt(ax, bx));
}

/// Compares an AVX2 snippet (vector state, no flags).
macro_rules! v {
    ($name:expr, |$a:ident| $body:expr) => {
        hw!(Isa::Avx2, $name, |_: &State| 0, rsi_mem, |$a| $body)
    };
    ($name:expr, $setup:expr, |$a:ident| $body:expr) => {
        hw!(Isa::Avx2, $name, |_: &State| 0, $setup, |$a| $body)
    };
}

#[test]
fn avx2_moves_match_hardware() {
    if !host_ok() {
        return;
    }
    v!("vmovdqu ymm m", |a| a.vmovdqu(ymm0, ymmword_ptr(rsi + 3)));
    v!("vmovdqu m ymm", |a| a.vmovdqu(ymmword_ptr(rsi + 5), ymm7));
    v!("vmovdqu xmm m", |a| a.vmovdqu(xmm3, xmmword_ptr(rsi)));
    v!("vmovdqu m xmm", |a| a.vmovdqu(xmmword_ptr(rsi), xmm12));
    v!("vmovdqu ymm ymm", |a| a.vmovdqu(ymm1, ymm14));
    v!("vmovdqu xmm xmm", |a| a.vmovdqu(xmm1, xmm14));
    v!("vmovdqa ymm m", rsi_aligned, |a| a
        .vmovdqa(ymm2, ymmword_ptr(rsi)));
    v!("vmovdqa m ymm", rsi_aligned, |a| a
        .vmovdqa(ymmword_ptr(rsi + 32), ymm2));
    v!("vmovdqa xmm xmm", |a| a.vmovdqa(xmm9, xmm2));
    v!("vmovups", |a| {
        a.vmovups(ymm4, ymmword_ptr(rsi + 1))?;
        a.vmovups(xmmword_ptr(rsi + 40), xmm5)
    });
    v!("vmovaps", rsi_aligned, |a| {
        a.vmovaps(ymm4, ymmword_ptr(rsi))?;
        a.vmovaps(xmm6, xmm4)?;
        a.vmovaps(ymmword_ptr(rsi + 64), ymm8)
    });
    v!("vmovd", |a| {
        a.vmovd(xmm0, eax)?;
        a.vmovd(xmm1, dword_ptr(rsi))?;
        a.vmovd(ebx, xmm2)?;
        a.vmovd(dword_ptr(rsi + 8), xmm3)
    });
    v!("vmovq", |a| {
        a.vmovq(xmm0, rax)?;
        a.vmovq(xmm1, qword_ptr(rsi))?;
        a.vmovq(rbx, xmm2)?;
        a.vmovq(qword_ptr(rsi + 8), xmm3)?;
        a.vmovq(xmm4, xmm5)
    });
    v!("vmovntdq vmovntps", rsi_aligned, |a| {
        a.vmovntdq(ymmword_ptr(rsi), ymm3)?;
        a.vmovntps(xmmword_ptr(rsi + 64), xmm9)?;
        a.vmovntdqa(ymm10, ymmword_ptr(rsi + 128))?;
        a.sfence()?;
        a.mfence()?;
        a.lfence()
    });
    v!("prefetch", |a| {
        a.prefetcht0(byte_ptr(rsi + 0x10000))?;
        a.prefetcht1(byte_ptr(rax))?;
        a.prefetcht2(byte_ptr(rbx))?;
        a.prefetchnta(byte_ptr(rcx))
    });
    v!("vzeroupper", |a| a.vzeroupper());
    v!("vpbroadcast", |a| {
        a.vpbroadcastb(ymm0, xmm1)?;
        a.vpbroadcastw(xmm2, xmm3)?;
        a.vpbroadcastd(ymm4, xmm5)?;
        a.vpbroadcastq(xmm6, xmm7)?;
        a.vpbroadcastb(xmm8, byte_ptr(rsi))?;
        a.vpbroadcastw(ymm9, word_ptr(rsi + 1))?;
        a.vpbroadcastd(ymm10, dword_ptr(rsi + 2))?;
        a.vpbroadcastq(ymm11, qword_ptr(rsi + 3))
    });
    v!("vbroadcast", |a| {
        a.vbroadcastss(ymm0, xmm1)?;
        a.vbroadcastss(xmm2, dword_ptr(rsi))?;
        a.vbroadcastsd(ymm3, xmm4)?;
        a.vbroadcastsd(ymm5, qword_ptr(rsi + 8))?;
        a.vbroadcasti128(ymm6, xmmword_ptr(rsi + 16))
    });
    for imm in [0, 1, 2, 3] {
        v!(&format!("vinserti128 {imm}"), |a| {
            a.vinserti128(ymm0, ymm1, xmm2, imm)?;
            a.vinserti128(ymm3, ymm4, xmmword_ptr(rsi), imm)?;
            a.vextracti128(xmm5, ymm6, imm)?;
            a.vextracti128(xmmword_ptr(rsi + 32), ymm7, imm)
        });
    }
}

#[test]
fn avx2_integer_ops_match_hardware() {
    if !host_ok() {
        return;
    }
    v!("logic", |a| {
        a.vpxor(ymm0, ymm1, ymm2)?;
        a.vpand(ymm3, ymm4, ymmword_ptr(rsi))?;
        a.vpandn(xmm5, xmm6, xmm7)?;
        a.vpor(ymm8, ymm9, ymm10)?;
        a.vpandn(ymm11, ymm12, ymmword_ptr(rsi + 32))
    });
    v!("vpcmpeq", |a| {
        a.vpcmpeqb(ymm0, ymm1, ymm2)?;
        a.vpcmpeqw(ymm3, ymm4, ymm5)?;
        a.vpcmpeqd(xmm6, xmm7, xmm8)?;
        a.vpcmpeqq(ymm9, ymm10, ymmword_ptr(rsi))?;
        a.vpcmpeqd(ymm11, ymm11, ymm12)
    });
    v!("vpcmpgt", |a| {
        a.vpcmpgtb(ymm0, ymm1, ymm2)?;
        a.vpcmpgtw(ymm3, ymm4, ymm5)?;
        a.vpcmpgtd(xmm6, xmm7, xmm8)?;
        a.vpcmpgtq(ymm9, ymm10, ymmword_ptr(rsi))?;
        a.vpcmpgtq(xmm11, xmm13, xmm12)
    });
    v!("vpsign vpmaxu", |a| {
        a.vpsignb(ymm0, ymm1, ymm2)?;
        a.vpsignw(ymm3, ymm4, ymm5)?;
        a.vpsignd(xmm6, xmm7, xmm8)?;
        a.vpsignw(xmm9, xmm10, xmmword_ptr(rsi))?;
        a.vpmaxub(ymm11, ymm12, ymm13)?;
        a.vpmaxuw(ymm14, ymm15, ymmword_ptr(rsi))?;
        a.vpmaxud(xmm0, xmm1, xmm2)?;
        a.vpsignw(ymm3, ymm3, ymm3)
    });
    v!("vpadd vpsub", |a| {
        a.vpaddb(ymm0, ymm1, ymm2)?;
        a.vpaddw(ymm3, ymm4, ymm5)?;
        a.vpaddd(xmm6, xmm7, xmm8)?;
        a.vpaddq(ymm9, ymm10, ymmword_ptr(rsi))?;
        a.vpsubb(ymm11, ymm12, ymm13)?;
        a.vpsubw(xmm14, xmm15, xmm0)?;
        a.vpsubd(ymm1, ymm2, ymm3)?;
        a.vpsubq(ymm4, ymm5, ymm6)
    });
    for n in [0, 1, 7, 15, 16, 31, 32, 63, 64, 200] {
        v!(&format!("shifts {n}"), |a| {
            a.vpsllw(ymm0, ymm1, n)?;
            a.vpslld(ymm2, ymm3, n)?;
            a.vpsllq(xmm4, xmm5, n)?;
            a.vpsrlw(ymm6, ymm7, n)?;
            a.vpsrld(xmm8, xmm9, n)?;
            a.vpsrlq(ymm10, ymm11, n)?;
            a.vpsraw(ymm12, ymm13, n)?;
            a.vpsrad(ymm14, ymm15, n)
        });
    }
    v!("shifts by xmm", |a| {
        a.vpsllw(ymm0, ymm1, xmm2)?;
        a.vpslld(ymm3, ymm4, xmm5)?;
        a.vpsrlq(ymm6, ymm7, xmm8)?;
        a.vpsrad(ymm9, ymm10, xmmword_ptr(rsi))
    });
    let ext = |st: &mut State, rng: &mut Rng| {
        rsi_mem(st, rng);
        // Small shift counts in the low quadword of xmm2/5/8 most of the time.
        for r in [2, 5, 8] {
            if rng.below(3) != 0 {
                st.v[r][..8].copy_from_slice(&rng.below(70).to_le_bytes());
            }
        }
    };
    v!("shifts by small xmm", ext, |a| {
        a.vpsllw(ymm0, ymm1, xmm2)?;
        a.vpslld(ymm3, ymm4, xmm5)?;
        a.vpsrlq(ymm6, ymm7, xmm8)?;
        a.vpsraw(ymm9, ymm10, xmm2)?;
        a.vpsrad(ymm11, ymm12, xmm5)
    });
    v!("vpmovzx", |a| {
        a.vpmovzxbw(ymm0, xmm1)?;
        a.vpmovzxbd(ymm2, xmm3)?;
        a.vpmovzxbq(ymm4, xmm5)?;
        a.vpmovzxwd(xmm6, xmm7)?;
        a.vpmovzxwq(ymm8, xmm9)?;
        a.vpmovzxdq(ymm10, xmm11)?;
        a.vpmovzxbd(ymm12, qword_ptr(rsi))?;
        a.vpmovzxwd(ymm13, xmmword_ptr(rsi + 8))
    });
    v!("vpmovsx", |a| {
        a.vpmovsxbw(ymm0, xmm1)?;
        a.vpmovsxbd(xmm2, xmm3)?;
        a.vpmovsxbq(ymm4, xmm5)?;
        a.vpmovsxwd(ymm6, xmm7)?;
        a.vpmovsxwq(ymm8, xmm9)?;
        a.vpmovsxdq(xmm10, xmm11)?;
        a.vpmovsxbq(ymm12, dword_ptr(rsi))?;
        a.vpmovsxdq(ymm13, xmmword_ptr(rsi + 8))
    });
}

#[test]
fn avx2_lane_ops_match_hardware() {
    if !host_ok() {
        return;
    }
    v!("blendv", |a| {
        a.vpblendvb(ymm0, ymm1, ymm2, ymm3)?;
        a.vblendvps(ymm4, ymm5, ymm6, ymm7)?;
        a.vblendvpd(xmm8, xmm9, xmm10, xmm11)?;
        a.vpblendvb(xmm12, xmm13, xmmword_ptr(rsi), xmm14)?;
        a.vblendvps(ymm15, ymm0, ymmword_ptr(rsi + 32), ymm1)
    });
    for imm in [0x00, 0x1b, 0x4e, 0xb1, 0xe4, 0xff, 0x39] {
        v!(&format!("imm shuffles {imm:#x}"), |a| {
            a.vpermq(ymm0, ymm1, imm)?;
            a.vpermq(ymm2, ymmword_ptr(rsi), imm)?;
            a.vpshufd(ymm3, ymm4, imm)?;
            a.vpshufd(xmm5, xmmword_ptr(rsi), imm)?;
            a.vpermpd(ymm6, ymm7, imm)
        });
    }
    for imm in [0x00, 0x01, 0x20, 0x31, 0x13, 0x08, 0x80, 0x88, 0x02, 0x32] {
        v!(&format!("vperm2i128 {imm:#x}"), |a| {
            a.vperm2i128(ymm0, ymm1, ymm2, imm)?;
            a.vperm2i128(ymm3, ymm4, ymmword_ptr(rsi), imm)
        });
    }
    v!("vpermd vpshufb", |a| {
        a.vpermd(ymm0, ymm1, ymm2)?;
        a.vpermd(ymm3, ymm4, ymmword_ptr(rsi))?;
        a.vpermps(ymm5, ymm6, ymm7)?;
        a.vpshufb(ymm8, ymm9, ymm10)?;
        a.vpshufb(xmm11, xmm12, xmmword_ptr(rsi))
    });
    v!("unpacks", |a| {
        a.vpunpcklbw(ymm0, ymm1, ymm2)?;
        a.vpunpckhbw(ymm3, ymm4, ymm5)?;
        a.vpunpcklwd(xmm6, xmm7, xmm8)?;
        a.vpunpckhwd(ymm9, ymm10, ymm11)?;
        a.vpunpckldq(ymm12, ymm13, ymm14)?;
        a.vpunpckhdq(ymm15, ymm0, ymmword_ptr(rsi))?;
        a.vpunpcklqdq(ymm1, ymm2, ymm3)?;
        a.vpunpckhqdq(xmm4, xmm5, xmm6)
    });
    v!("movmsk", |a| {
        a.vpmovmskb(eax, ymm0)?;
        a.vpmovmskb(ebx, xmm1)?;
        a.vmovmskps(ecx, ymm2)?;
        a.vmovmskps(edx, xmm3)?;
        a.vmovmskpd(r8d, ymm4)?;
        a.vmovmskpd(r9d, xmm5)
    });
    hw!(Isa::Avx2, "vptest ymm", |_: &State| ALL, no_setup, |a| a
        .vptest(ymm0, ymm1));
    hw!(Isa::Avx2, "vptest xmm", |_: &State| ALL, no_setup, |a| a
        .vptest(xmm2, xmm3));
    hw!(Isa::Avx2, "vptest self", |_: &State| ALL, no_setup, |a| a
        .vptest(ymm4, ymm4));
    hw!(Isa::Avx2, "vptest m", |_: &State| ALL, rsi_mem, |a| a
        .vptest(ymm5, ymmword_ptr(rsi)));
    v!("vpmaskmov", |a| {
        a.vpmaskmovd(ymm0, ymm1, ymmword_ptr(rsi))?;
        a.vpmaskmovq(xmm2, xmm3, xmmword_ptr(rsi + 8))?;
        a.vpmaskmovd(ymmword_ptr(rsi + 64), ymm4, ymm5)?;
        a.vpmaskmovq(ymmword_ptr(rsi + 100), ymm6, ymm7)?;
        a.vmaskmovps(ymm8, ymm9, ymmword_ptr(rsi + 4))?;
        a.vmaskmovpd(xmmword_ptr(rsi + 200), xmm10, xmm11)
    });
}

/// Compares an AVX-512 snippet (natively only on AVX-512 hosts).
macro_rules! z {
    ($name:expr, |$a:ident| $body:expr) => {
        hw!(Isa::Avx512, $name, |_: &State| 0, rsi_mem, |$a| $body)
    };
    ($name:expr, $setup:expr, |$a:ident| $body:expr) => {
        hw!(Isa::Avx512, $name, |_: &State| 0, $setup, |$a| $body)
    };
}

#[test]
fn avx512_matches_hardware_where_present() {
    z!("evex moves", |a| {
        a.vmovdqu8(zmm0.k1().z(), zmmword_ptr(rsi))?;
        a.vmovdqu16(zmm1.k2(), zmm17)?;
        a.vmovdqu32(ymm18.k3().z(), ymmword_ptr(rsi + 4))?;
        a.vmovdqu64(xmm19.k4(), xmm20)?;
        a.vmovdqu8(zmmword_ptr(rsi + 64).k5(), zmm21)?;
        a.vmovdqu32(ymmword_ptr(rsi + 3).k6(), ymm22)?;
        a.vmovups(zmm23.k7().z(), zmmword_ptr(rsi + 128))?;
        a.vmovups(zmmword_ptr(rsi + 190).k1(), zmm24)
    });
    z!("evex aligned moves", rsi_aligned, |a| {
        a.vmovdqa32(zmm0.k1(), zmmword_ptr(rsi))?;
        a.vmovdqa64(zmmword_ptr(rsi + 64).k2(), zmm1)?;
        a.vmovaps(ymm25.k3().z(), ymmword_ptr(rsi + 128))?;
        a.vmovntdq(zmmword_ptr(rsi + 192), zmm30)
    });
    z!("evex vex-width ops", |a| {
        a.vpxord(xmm16, xmm17, xmm18)?;
        a.vpaddd(ymm19, ymm20, ymm21)?;
        a.vpshufb(xmm22, xmm23, xmm24)?;
        a.vmovdqu64(xmm25, xmmword_ptr(rsi))
    });
    z!("evex broadcasts", |a| {
        a.vpbroadcastb(zmm0.k1(), xmm1)?;
        a.vpbroadcastw(zmm2.k2().z(), word_ptr(rsi))?;
        a.vpbroadcastd(zmm3, eax)?;
        a.vpbroadcastq(ymm20.k3(), rbx)?;
        a.vpbroadcastb(xmm21, ecx)?;
        a.vpbroadcastd(zmm4.k4(), dword_ptr(rsi + 4))?;
        a.vbroadcasti32x4(zmm5.k5(), xmmword_ptr(rsi + 8))?;
        a.vbroadcasti64x2(zmm6.k6().z(), xmmword_ptr(rsi + 24))?;
        a.vbroadcasti32x8(zmm7.k7(), ymmword_ptr(rsi + 40))?;
        a.vbroadcasti64x4(zmm8, ymmword_ptr(rsi + 72))?;
        a.vbroadcastss(zmm9.k1(), xmm10)?;
        a.vbroadcastsd(zmm11, qword_ptr(rsi))
    });
    for imm in [0, 1, 2, 3] {
        z!(&format!("evex insert extract {imm}"), |a| {
            a.vinserti32x4(zmm0.k1(), zmm1, xmm2, imm)?;
            a.vinserti64x2(zmm3.k2().z(), zmm4, xmmword_ptr(rsi), imm)?;
            a.vinserti32x8(zmm5, zmm6, ymm7, imm)?;
            a.vinserti64x4(zmm8.k3(), zmm9, ymmword_ptr(rsi + 8), imm)?;
            a.vinserti32x4(ymm20, ymm21, xmm22, imm)?;
            a.vextracti32x4(xmm10.k4(), zmm11, imm)?;
            a.vextracti64x2(xmmword_ptr(rsi + 100).k5(), zmm12, imm)?;
            a.vextracti32x8(ymm13.k6().z(), zmm14, imm)?;
            a.vextracti64x4(ymmword_ptr(rsi + 140), zmm15, imm)?;
            a.vextracti32x4(xmm23, ymm24, imm)
        });
    }
    z!("evex logic", |a| {
        a.vpxord(zmm0.k1(), zmm1, zmm2)?;
        a.vpxorq(zmm3.k2().z(), zmm4, zmmword_ptr(rsi))?;
        a.vpandd(ymm5.k3(), ymm6, ymm7)?;
        a.vpandq(zmm8, zmm9, qword_bcst(rsi))?;
        a.vpandnd(zmm10.k4(), zmm11, dword_bcst(rsi + 4))?;
        a.vpandnq(zmm12, zmm13, zmm14)?;
        a.vpord(xmm15.k5().z(), xmm16, xmm17)?;
        a.vporq(zmm18, zmm19, zmm20)
    });
    for imm in [0x00, 0xff, 0xca, 0xe8, 0x96, 0x3c, 0x01, 0x80] {
        z!(&format!("vpternlog {imm:#x}"), |a| {
            a.vpternlogd(zmm0.k1(), zmm1, zmm2, imm)?;
            a.vpternlogq(zmm3.k2().z(), zmm4, zmmword_ptr(rsi), imm)?;
            a.vpternlogd(ymm5, ymm6, ymm7, imm)?;
            a.vpternlogq(xmm8.k3(), xmm9, qword_bcst(rsi + 8), imm)
        });
    }
    z!("evex compares", |a| {
        a.vpcmpeqb(k1.k2(), zmm0, zmm1)?;
        a.vpcmpeqw(k2, zmm2, zmmword_ptr(rsi))?;
        a.vpcmpeqd(k3.k1(), ymm3, ymm4)?;
        a.vpcmpeqq(k4, xmm5, xmm6)?;
        a.vpcmpgtb(k5, zmm7, zmm8)?;
        a.vpcmpgtw(k6.k3(), zmm9, zmm10)?;
        a.vpcmpgtd(k7, zmm11, dword_bcst(rsi))?;
        a.vpcmpgtq(k1, zmm12, zmm13)
    });
    for p in 0..8 {
        z!(&format!("vpcmp {p}"), |a| {
            a.vpcmpb(k1.k2(), zmm0, zmm1, p)?;
            a.vpcmpub(k2, zmm2, zmm3, p)?;
            a.vpcmpw(k3, zmm4, zmmword_ptr(rsi), p)?;
            a.vpcmpuw(k4.k5(), ymm5, ymm6, p)?;
            a.vpcmpd(k5, zmm7, zmm8, p)?;
            a.vpcmpud(k6, xmm9, xmm10, p)?;
            a.vpcmpq(k7.k1(), zmm11, zmm12, p)?;
            a.vpcmpuq(k1, zmm13, zmm14, p)
        });
    }
    z!("vptestm", |a| {
        a.vptestmb(k1.k2(), zmm0, zmm1)?;
        a.vptestmw(k2, zmm2, zmm3)?;
        a.vptestmd(k3, ymm4, ymm5)?;
        a.vptestmq(k4, zmm6, zmmword_ptr(rsi))?;
        a.vptestnmb(k5, zmm7, zmm8)?;
        a.vptestnmw(k6.k1(), xmm9, xmm10)?;
        a.vptestnmd(k7, zmm11, zmm12)?;
        a.vptestnmq(k1, zmm13, zmm13)
    });
    z!("vpblendm", |a| {
        a.vpblendmb(zmm0.k1(), zmm1, zmm2)?;
        a.vpblendmw(zmm3.k2().z(), zmm4, zmm5)?;
        a.vpblendmd(ymm6.k3(), ymm7, ymmword_ptr(rsi))?;
        a.vpblendmq(zmm8, zmm9, zmm10)?;
        a.vblendmps(zmm11.k4(), zmm12, zmm13)?;
        a.vblendmpd(zmm14.k5().z(), zmm15, zmm16)
    });
    z!("evex extends", |a| {
        a.vpmovzxbw(zmm0.k1(), ymm1)?;
        a.vpmovzxbd(zmm2.k2().z(), xmm3)?;
        a.vpmovzxbq(zmm4, xmmword_ptr(rsi))?;
        a.vpmovzxwd(zmm5.k3(), ymmword_ptr(rsi + 2))?;
        a.vpmovzxwq(zmm6, xmm7)?;
        a.vpmovzxdq(zmm8.k4(), ymm9)?;
        a.vpmovsxbw(zmm10, ymm11)?;
        a.vpmovsxbd(zmm12.k5(), xmmword_ptr(rsi))?;
        a.vpmovsxbq(zmm13, xmm14)?;
        a.vpmovsxwd(zmm15.k6().z(), ymm16)?;
        a.vpmovsxwq(zmm17, xmm18)?;
        a.vpmovsxdq(zmm19, ymmword_ptr(rsi + 4))
    });
    z!("mask vectors", |a| {
        a.vpmovm2b(zmm0, k1)?;
        a.vpmovm2w(zmm1, k2)?;
        a.vpmovm2d(ymm2, k3)?;
        a.vpmovm2q(zmm3, k4)?;
        a.vpmovb2m(k5, zmm4)?;
        a.vpmovw2m(k6, zmm5)?;
        a.vpmovd2m(k7, xmm6)?;
        a.vpmovq2m(k1, zmm7)
    });
    for imm in [0x00, 0x1b, 0x4e, 0xe4, 0x93] {
        z!(&format!("evex permutes {imm:#x}"), |a| {
            a.vpermq(zmm0.k1(), zmm1, imm)?;
            a.vpermq(zmm2, zmm3, zmm4)?;
            a.vpermd(zmm5.k2().z(), zmm6, zmmword_ptr(rsi))?;
            a.vpermd(ymm20, ymm21, ymm22)?;
            a.vpshufb(zmm7.k3(), zmm8, zmm9)?;
            a.vpshufd(zmm10.k4(), zmm11, imm)?;
            a.vpunpcklbw(zmm12, zmm13, zmm14)?;
            a.vpunpckhqdq(zmm15.k5(), zmm16, zmm17)
        });
    }
    z!("evex arithmetic", |a| {
        a.vpaddb(zmm0.k1(), zmm1, zmm2)?;
        a.vpsubq(zmm3, zmm4, qword_bcst(rsi))?;
        a.vpslld(zmm5.k2(), zmm6, 3)?;
        a.vpsraq(zmm7, zmm8, 63)?;
        a.vpsraq(ymm9, ymm10, 5)?;
        a.vpsrlw(zmm11, zmm12, xmm13)
    });
    z!("opmask", |a| {
        a.kmovw(k1, eax)?;
        a.kmovb(k2, ebx)?;
        a.kmovd(k3, ecx)?;
        a.kmovq(k4, rdx)?;
        a.kmovq(r8, k5)?;
        a.kmovd(r9d, k6)?;
        a.kmovw(r10d, k7)?;
        a.kmovb(r11d, k1)?;
        a.kmovw(k5, word_ptr(rsi))?;
        a.kmovq(qword_ptr(rsi + 8), k6)?;
        a.kmovb(byte_ptr(rsi + 20), k7)?;
        a.kmovq(k7, k2)
    });
    for imm in [0, 1, 7, 8, 15, 16, 31, 32, 63, 64, 200] {
        z!(&format!("kshift {imm}"), |a| {
            a.kshiftlb(k1, k2, imm)?;
            a.kshiftlw(k3, k4, imm)?;
            a.kshiftld(k5, k6, imm)?;
            a.kshiftlq(k7, k1, imm)?;
            a.kshiftrb(k2, k3, imm)?;
            a.kshiftrw(k4, k5, imm)?;
            a.kshiftrd(k6, k7, imm)?;
            a.kshiftrq(k0, k2, imm)
        });
    }
    z!("k logic", |a| {
        a.kandb(k1, k2, k3)?;
        a.kandnw(k2, k3, k4)?;
        a.kord(k3, k4, k5)?;
        a.kxorq(k4, k5, k6)?;
        a.kxnorw(k5, k6, k7)?;
        a.knotb(k6, k7)?;
        a.kaddd(k7, k1, k2)?;
        a.kaddq(k0, k3, k4)?;
        a.kunpckbw(k1, k5, k6)?;
        a.kunpckwd(k2, k6, k7)?;
        a.kunpckdq(k3, k7, k0)
    });
    for (i, w) in ["b", "w", "d", "q"].iter().enumerate() {
        hw!(
            Isa::Avx512,
            &format!("kortest{w}"),
            |_: &State| ALL,
            no_setup,
            |a| match i {
                0 => a.kortestb(k1, k2),
                1 => a.kortestw(k1, k2),
                2 => a.kortestd(k1, k2),
                _ => a.kortestq(k1, k2),
            }
        );
        hw!(
            Isa::Avx512,
            &format!("ktest{w}"),
            |_: &State| ALL,
            no_setup,
            |a| match i {
                0 => a.ktestb(k3, k4),
                1 => a.ktestw(k3, k4),
                2 => a.ktestd(k3, k4),
                _ => a.ktestq(k3, k4),
            }
        );
    }
}

/// Float edge values of `ew` bytes (2: f16, 4: f32, 8: f64): NaNs quiet and signalling with
/// payloads of both signs, ±0, ±inf, subnormals, extremes, small numbers.
pub(super) fn float_edge(rng: &mut Rng, ew: usize) -> u64 {
    const F16: [u64; 14] = [
        0x7e00, 0xfe01, 0x7c01, 0xfd23, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x0001, 0x83ff, 0x7bff,
        0x0400, 0x3c00, 0xbc00,
    ];
    const F32: [u64; 15] = [
        0x7fc0_0000,
        0xffc0_0001,
        0x7f80_0001,
        0xff81_2345,
        0,
        0x8000_0000,
        0x7f80_0000,
        0xff80_0000,
        1,
        0x807f_ffff,
        0x7f7f_ffff,
        0x0080_0000,
        0x3f80_0000,
        0xbf80_0000,
        0x3f80_0001,
    ];
    const F64: [u64; 14] = [
        0x7ff8_0000_0000_0000,
        0xfff8_0000_0000_0001,
        0x7ff0_0000_0000_0001,
        0xfff4_5678_9abc_def0,
        0,
        0x8000_0000_0000_0000,
        0x7ff0_0000_0000_0000,
        0xfff0_0000_0000_0000,
        1,
        0x800f_ffff_ffff_ffff,
        0x7fef_ffff_ffff_ffff,
        0x0010_0000_0000_0000,
        0x3ff0_0000_0000_0000,
        0xbff0_0000_0000_0000,
    ];
    let set: &[u64] = match ew {
        2 => &F16,
        4 => &F32,
        _ => &F64,
    };
    if rng.below(5) == 0 {
        rng.next()
            & if ew == 8 {
                u64::MAX
            } else {
                (1 << (8 * ew)) - 1
            }
    } else {
        set[rng.below(set.len() as u64) as usize]
    }
}

/// Vector registers and memory of float lanes of `ew` bytes (edge values; the registers often
/// share lanes, so that compares find equal values).
pub(super) fn float_state(ew: usize) -> impl Fn(&mut State, &mut Rng) {
    move |st: &mut State, rng: &mut Rng| {
        rsi_mem(st, rng);
        for v in st.v.iter_mut() {
            for i in 0..64 / ew {
                v[i * ew..(i + 1) * ew].copy_from_slice(&float_edge(rng, ew).to_le_bytes()[..ew]);
            }
        }
        for r in 1..32 {
            if rng.below(3) == 0 {
                let from = st.v[rng.below(r as u64) as usize];
                for i in 0..64 / ew {
                    if rng.below(2) == 0 {
                        st.v[r][i * ew..(i + 1) * ew].copy_from_slice(&from[i * ew..(i + 1) * ew]);
                    }
                }
            }
        }
        for i in 0..MEM / ew {
            st.mem[i * ew..(i + 1) * ew].copy_from_slice(&float_edge(rng, ew).to_le_bytes()[..ew]);
        }
    }
}

#[test]
fn avx2_float_compares_match_hardware() {
    if !host_ok() {
        return;
    }
    for imm in 0..32 {
        v!(&format!("vcmpps {imm}"), float_state(4), |a| {
            a.vcmpps(ymm0, ymm1, ymm2, imm)?;
            a.vcmpps(xmm3, xmm4, xmm5, imm)?;
            a.vcmpps(ymm6, ymm6, ymmword_ptr(rsi), imm)?;
            a.vcmpps(xmm7, xmm8, xmm8, imm)
        });
        v!(&format!("vcmppd {imm}"), float_state(8), |a| {
            a.vcmppd(ymm0, ymm1, ymm2, imm)?;
            a.vcmppd(xmm3, xmm4, xmm5, imm)?;
            a.vcmppd(ymm6, ymm6, ymmword_ptr(rsi), imm)?;
            a.vcmppd(xmm7, xmm8, xmm8, imm)
        });
    }
    v!("vandps vandpd", float_state(4), |a| {
        a.vandps(ymm0, ymm1, ymm2)?;
        a.vandps(xmm3, xmm4, xmmword_ptr(rsi))?;
        a.vandpd(ymm5, ymm6, ymmword_ptr(rsi + 8))?;
        a.vandpd(xmm7, xmm8, xmm9)
    });
}

#[test]
fn avx2_conversions_match_hardware() {
    if !host_ok() {
        return;
    }
    if !std::arch::is_x86_feature_detected!("f16c") {
        skip::skip(
            "emu: vcvtph2ps compared with hardware",
            "the host lacks F16C",
        );
    } else {
        v!("vcvtph2ps", float_state(2), |a| {
            a.vcvtph2ps(ymm0, xmm1)?;
            a.vcvtph2ps(xmm2, xmm3)?;
            a.vcvtph2ps(ymm4, xmmword_ptr(rsi))?;
            a.vcvtph2ps(xmm5, qword_ptr(rsi + 2))
        });
    }
    v!("vcvtps2pd", float_state(4), |a| {
        a.vcvtps2pd(ymm0, xmm1)?;
        a.vcvtps2pd(xmm2, xmm3)?;
        a.vcvtps2pd(ymm4, xmmword_ptr(rsi))?;
        a.vcvtps2pd(xmm5, qword_ptr(rsi + 4))
    });
}

#[test]
fn avx2_packs_match_hardware() {
    if !host_ok() {
        return;
    }
    v!("vpackss", |a| {
        a.vpackssdw(ymm0, ymm1, ymm2)?;
        a.vpackssdw(xmm3, xmm4, xmmword_ptr(rsi))?;
        a.vpacksswb(ymm5, ymm6, ymmword_ptr(rsi + 4))?;
        a.vpacksswb(xmm7, xmm8, xmm9)?;
        a.vpackssdw(ymm10, ymm10, ymm11)
    });
}

//! Every check of the emulator ends in its error, never in a panic.

use super::*;

macro_rules! func {
    (|$a:ident| $body:block) => {
        Exec::new(&asm(&|$a: &mut CodeAssembler| -> Result<(), IcedError> {
            $body
            Ok(())
        }))
    };
}

fn run_cfg(
    x: &Exec,
    args: &[u64],
    regions: &[Region],
    cfg: &EmuConfig,
) -> Result<EmuStats, EmuError> {
    // SAFETY: every region covers a live buffer of the calling test, not otherwise used during
    // the call.
    unsafe { call(x.bytes(), 0, args, regions, cfg) }
}

fn run(x: &Exec, args: &[u64], regions: &[Region]) -> Result<EmuStats, EmuError> {
    run_cfg(x, args, regions, &EmuConfig::default())
}

#[test]
fn loads_and_stores_out_of_bounds() {
    let mut buf = [0u32; 16];
    let load = func!(|a| {
        a.mov(eax, dword_ptr(rdi + rsi))?;
        a.ret()?;
    });
    let store = func!(|a| {
        a.mov(dword_ptr(rdi + rsi), eax)?;
        a.ret()?;
    });
    // The region is the first 40 bytes of the buffer.
    let r = Region::writable(&mut buf[..10]);
    for x in [&load, &store] {
        assert!(run(x, &[r.addr, 36], &[r]).is_ok());
        assert!(run(x, &[r.addr, 0], &[r]).is_ok());
        for off in [37u64, 40, 1000, (-1i64) as u64, (-4i64) as u64] {
            match run(x, &[r.addr, off], &[r]) {
                Err(EmuError::OutOfBounds { addr, len: 4, .. }) => {
                    assert_eq!(addr, r.addr.wrapping_add(off))
                }
                res => panic!("offset {off}: {res:?}"),
            }
        }
    }
    let e = run(&store, &[r.addr, 37], &[r]).unwrap_err();
    assert!(matches!(e, EmuError::OutOfBounds { write: true, .. }));
    assert!(e.insn().starts_with("mov"), "{e}");
    assert!(e.to_string().contains("out of bounds"), "{e}");
    // Adjacent regions: an access straddling both is in bounds.
    let (lo, hi) = buf.split_at_mut(8);
    let (rl, rh) = (Region::writable(lo), Region::writable(&mut hi[..1]));
    assert!(run(&load, &[rl.addr, 30], &[rl, rh]).is_ok());
    assert!(run(&store, &[rl.addr, 30], &[rl, rh]).is_ok());
    assert!(run(&load, &[rl.addr, 33], &[rl, rh]).is_err());
    // Vector loads: one byte past the end.
    let vload = func!(|a| {
        a.vmovdqu(ymm0, ymmword_ptr(rdi + rsi))?;
        a.vzeroupper()?;
        a.ret()?;
    });
    let r = Region::read_only(&buf);
    assert!(run(&vload, &[r.addr, 32], &[r]).is_ok());
    assert!(matches!(
        run(&vload, &[r.addr, 33], &[r]),
        Err(EmuError::OutOfBounds { len: 32, .. })
    ));
}

#[test]
fn stores_to_read_only_memory() {
    let buf = [0u64; 4];
    let r = Region::read_only(&buf);
    let x = func!(|a| {
        a.mov(qword_ptr(rdi), rax)?;
        a.ret()?;
    });
    assert!(matches!(
        run(&x, &[r.addr], &[r]),
        Err(EmuError::ReadOnly { len: 8, .. })
    ));
    // The code can be read (RIP-relative constants) but not written.
    let x = func!(|a| {
        let mut c = a.create_label();
        a.mov(rax, qword_ptr(c))?;
        a.lea(rcx, ptr(c))?;
        a.mov(qword_ptr(rcx), rax)?;
        a.ret()?;
        a.set_label(&mut c)?;
        a.dq(&[0x1234])?;
    });
    let e = run(&x, &[], &[]).unwrap_err();
    assert!(matches!(e, EmuError::ReadOnly { .. }), "{e}");
    let x = func!(|a| {
        let mut c = a.create_label();
        a.vpbroadcastd(ymm0, dword_ptr(c))?;
        a.vmovd(eax, xmm0)?;
        a.ret()?;
        a.set_label(&mut c)?;
        a.dd(&[77])?;
    });
    assert_eq!(run(&x, &[], &[]).unwrap().rax, 77);
}

#[test]
fn the_stack_is_checked() {
    // Arguments past the sixth come on the stack.
    let x = func!(|a| {
        a.mov(rax, qword_ptr(rsp + 8))?;
        a.add(rax, qword_ptr(rsp + 16))?;
        a.add(rax, r9)?;
        a.ret()?;
    });
    assert_eq!(run(&x, &[1, 2, 3, 4, 5, 6, 70, 800], &[]).unwrap().rax, 876);
    let x = func!(|a| {
        a.push(rax)?;
        a.ret()?;
    });
    assert!(matches!(
        run(&x, &[], &[]),
        Err(EmuError::StackImbalance { delta: -8, .. })
    ));
    let x = func!(|a| {
        a.add(rsp, 16)?;
        a.ret()?;
    });
    assert!(matches!(
        run(&x, &[], &[]),
        Err(EmuError::StackImbalance { delta: 16, .. })
    ));
    let x = func!(|a| {
        a.mov(qword_ptr(rsp), 0)?;
        a.ret()?;
    });
    assert!(matches!(
        run(&x, &[], &[]),
        Err(EmuError::BadReturn { target: 0, .. })
    ));
    // The red zone (128 bytes below rsp) is usable, below it is not.
    let x = func!(|a| {
        a.neg(rdi)?;
        a.mov(qword_ptr(rsp + rdi), rax)?;
        a.ret()?;
    });
    assert!(run(&x, &[128], &[]).is_ok());
    assert!(matches!(
        run(&x, &[136], &[]),
        Err(EmuError::OutOfBounds { write: true, .. })
    ));
    // Unbounded recursion of pushes overflows the stack into an error.
    let x = func!(|a| {
        let mut l = a.create_label();
        a.set_label(&mut l)?;
        a.push(rax)?;
        a.jmp(l)?;
    });
    assert!(matches!(
        run(&x, &[], &[]),
        Err(EmuError::OutOfBounds { write: true, .. })
    ));
}

#[test]
fn callee_saved_registers_must_be_restored() {
    let x = func!(|a| {
        a.mov(rbx, 1i64)?;
        a.ret()?;
    });
    match run(&x, &[], &[]) {
        Err(EmuError::CalleeSaved {
            reg: "rbx",
            expected: 0,
            found: 1,
            ..
        }) => {}
        r => panic!("{r:?}"),
    }
    let x = func!(|a| {
        a.xor(r15d, r15d)?;
        a.not(r15)?;
        a.ret()?;
    });
    assert!(matches!(
        run(&x, &[], &[]),
        Err(EmuError::CalleeSaved { reg: "r15", .. })
    ));
    // Saved and restored: fine.
    let x = func!(|a| {
        for r in [rbx, rbp, r12, r13, r14, r15] {
            a.push(r)?;
            a.mov(r, -1i64)?;
        }
        for r in [r15, r14, r13, r12, rbp, rbx] {
            a.pop(r)?;
        }
        a.ret()?;
    });
    assert!(run(&x, &[], &[]).is_ok());
}

#[test]
fn unsupported_and_undecodable_code() {
    let x = func!(|a| {
        a.cpuid()?;
        a.ret()?;
    });
    match run(&x, &[], &[]) {
        Err(EmuError::Unsupported { mnemonic, rip, .. }) => {
            assert_eq!(mnemonic, "cpuid");
            assert_eq!(rip, x.bytes().as_ptr() as u64);
        }
        r => panic!("{r:?}"),
    }
    let x = func!(|a| {
        a.div(rcx)?;
        a.ret()?;
    });
    assert!(
        matches!(run(&x, &[], &[]), Err(EmuError::Unsupported { mnemonic, .. }) if mnemonic == "div")
    );
    // Without AVX-512, EVEX and opmask instructions are errors.
    let no512 = EmuConfig {
        avx512: false,
        ..EmuConfig::default()
    };
    let x = func!(|a| {
        a.kmovw(k1, eax)?;
        a.ret()?;
    });
    assert!(run(&x, &[], &[]).is_ok());
    match run_cfg(&x, &[], &[], &no512) {
        Err(EmuError::Unsupported { why, .. }) => assert!(why.contains("AVX-512")),
        r => panic!("{r:?}"),
    }
    let x = func!(|a| {
        a.vpxord(xmm1, xmm2, xmm3)?;
        a.ret()?;
    });
    assert!(matches!(
        run_cfg(&x, &[], &[], &no512),
        Err(EmuError::Unsupported { .. })
    ));
    // Bytes that are no instruction, or an instruction cut off by the end of the code.
    for bytes in [&[0x06u8][..], &[0x48], &[0x0f, 0xff]] {
        let x = Exec::new(bytes);
        match run(&x, &[], &[]) {
            Err(EmuError::Undecodable { insn, .. }) => assert!(!insn.is_empty()),
            r => panic!("{bytes:x?}: {r:?}"),
        }
    }
    // Segment registers, segment overrides and gathers are not in the subset.
    let x = func!(|a| {
        a.mov(ds, ax)?;
        a.ret()?;
    });
    assert!(matches!(
        run(&x, &[], &[]),
        Err(EmuError::Unsupported { .. })
    ));
    let x = func!(|a| {
        a.kxnorw(k1, k1, k1)?;
        a.vpgatherdd(zmm0.k1(), ptr(rdi + zmm1 * 4))?;
        a.ret()?;
    });
    assert!(matches!(
        run(&x, &[], &[]),
        Err(EmuError::Unsupported { .. })
    ));
    let x = func!(|a| {
        a.mov(rax, qword_ptr(0).fs())?;
        a.ret()?;
    });
    assert!(matches!(
        run(&x, &[], &[]),
        Err(EmuError::Unsupported { .. })
    ));
}

#[test]
fn step_limit_and_jumps_outside() {
    let x = func!(|a| {
        let mut l = a.create_label();
        a.set_label(&mut l)?;
        a.jmp(l)?;
    });
    let cfg = EmuConfig {
        max_steps: 1000,
        avx512: true,
    };
    assert!(matches!(
        run_cfg(&x, &[], &[], &cfg),
        Err(EmuError::StepLimit { limit: 1000, .. })
    ));
    let x = func!(|a| {
        a.jmp(rdi)?;
    });
    assert!(matches!(
        run(&x, &[0x1234], &[]),
        Err(EmuError::JumpOutside { target: 0x1234, .. })
    ));
    // Falling through the last instruction.
    let x = func!(|a| {
        a.nop()?;
    });
    match run(&x, &[], &[]) {
        Err(EmuError::JumpOutside { insn, target, .. }) => {
            assert_eq!(insn, "nop");
            assert_eq!(target, x.bytes().as_ptr() as u64 + 1);
        }
        r => panic!("{r:?}"),
    }
    // A conditional jump out of the code.
    let x = Exec::new(&[0x74, 0x10, 0xc3]);
    assert!(run(&x, &[], &[]).is_ok());
    let x = Exec::new(&[0x75, 0x10, 0xc3]);
    assert!(matches!(
        run(&x, &[], &[]),
        Err(EmuError::JumpOutside { .. })
    ));
    // An entry outside the code.
    let x = Exec::new(&[0xc3]);
    // SAFETY: no regions.
    let r = unsafe { call(x.bytes(), 5, &[], &[], &EmuConfig::default()) };
    assert!(matches!(r, Err(EmuError::JumpOutside { .. })));
}

#[test]
fn misaligned_aligned_moves() {
    #[repr(align(64))]
    struct Buf([u8; 128]);
    let buf = Buf([0; 128]);
    let r = Region::read_only(&buf.0);
    let x = func!(|a| {
        a.vmovdqa(ymm0, ymmword_ptr(rdi))?;
        a.vzeroupper()?;
        a.ret()?;
    });
    assert!(run(&x, &[r.addr + 32], &[r]).is_ok());
    assert!(matches!(
        run(&x, &[r.addr + 16], &[r]),
        Err(EmuError::Misaligned { align: 32, .. })
    ));
    let x = func!(|a| {
        a.kxorw(k1, k1, k1)?;
        a.vmovdqa32(zmm0.k1().z(), zmmword_ptr(rdi))?;
        a.ret()?;
    });
    assert!(matches!(
        run(&x, &[r.addr + 32], &[r]),
        Err(EmuError::Misaligned { align: 64, .. })
    ));
}

//! Whole select kernels, written here with the assembler, on real buffers in the emulator
//! against a plain loop (and natively for AVX2), with the emulation speed.

use std::time::Instant;

use super::*;

/// `out[i] = cond[i] != 0 ? then[i] : else[i]` for 32-bit elements: 8 per AVX2 iteration, then a
/// scalar tail. Arguments: cond (u32), then, else, out, n.
fn avx2_select_f32(a: &mut CodeAssembler) -> Result<(), IcedError> {
    let mut lp = a.create_label();
    let mut tail = a.create_label();
    let mut done = a.create_label();
    a.vpxor(ymm15, ymm15, ymm15)?;
    a.xor(eax, eax)?;
    a.set_label(&mut lp)?;
    a.lea(r9, ptr(rax + 8))?;
    a.cmp(r9, r8)?;
    a.ja(tail)?;
    a.vmovdqu(ymm0, ymmword_ptr(rdi + rax * 4))?;
    a.vpcmpeqd(ymm0, ymm0, ymm15)?;
    a.vmovups(ymm1, ymmword_ptr(rsi + rax * 4))?;
    a.vblendvps(ymm1, ymm1, ymmword_ptr(rdx + rax * 4), ymm0)?;
    a.vmovups(ymmword_ptr(rcx + rax * 4), ymm1)?;
    a.mov(rax, r9)?;
    a.jmp(lp)?;
    a.set_label(&mut tail)?;
    a.cmp(rax, r8)?;
    a.jae(done)?;
    a.mov(r10d, dword_ptr(rsi + rax * 4))?;
    a.cmp(dword_ptr(rdi + rax * 4), 0)?;
    a.cmove(r10d, dword_ptr(rdx + rax * 4))?;
    a.mov(dword_ptr(rcx + rax * 4), r10d)?;
    a.inc(rax)?;
    a.jmp(tail)?;
    a.set_label(&mut done)?;
    a.vzeroupper()?;
    a.ret()
}

/// The same with byte conditions and AVX-512: 16 elements per iteration selected through an
/// opmask, and a tail under a `bzhi`-made mask instead of a scalar loop. With `bug`, the tail
/// loads `then` without its mask (reading past the end of the buffer).
fn avx512_select_f32(a: &mut CodeAssembler, bug: bool) -> Result<(), IcedError> {
    let mut lp = a.create_label();
    let mut tail = a.create_label();
    let mut done = a.create_label();
    a.xor(eax, eax)?;
    a.mov(r9, r8)?;
    a.and(r9, -16)?;
    a.set_label(&mut lp)?;
    a.cmp(rax, r9)?;
    a.jae(tail)?;
    a.vmovdqu8(xmm0, xmmword_ptr(rdi + rax))?;
    a.vptestmb(k1, xmm0, xmm0)?;
    a.vmovups(zmm1, zmmword_ptr(rdx + rax * 4))?;
    a.vmovups(zmm1.k1(), zmmword_ptr(rsi + rax * 4))?;
    a.vmovups(zmmword_ptr(rcx + rax * 4), zmm1)?;
    a.add(rax, 16)?;
    a.jmp(lp)?;
    a.set_label(&mut tail)?;
    a.mov(r10, r8)?;
    a.sub(r10, rax)?;
    a.jz(done)?;
    a.mov(r11, -1i64)?;
    a.bzhi(r11, r11, r10)?;
    a.kmovw(k2, r11d)?;
    a.vmovdqu8(xmm0.k2().z(), xmmword_ptr(rdi + rax))?;
    a.vptestmb(k1.k2(), xmm0, xmm0)?;
    a.vmovups(zmm1.k2().z(), zmmword_ptr(rdx + rax * 4))?;
    if bug {
        a.vmovups(zmm2, zmmword_ptr(rsi + rax * 4))?;
        a.vmovups(zmm1.k1(), zmm2)?;
    } else {
        a.vmovups(zmm1.k1(), zmmword_ptr(rsi + rax * 4))?;
    }
    a.vmovups(zmmword_ptr(rcx + rax * 4).k2(), zmm1)?;
    a.set_label(&mut done)?;
    a.vzeroupper()?;
    a.ret()
}

/// Random conditions (with `zero_frac` of zeros) and f32 bit patterns (NaNs included).
fn data(n: usize, seed: u64) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let mut rng = Rng::new(seed);
    let cond = (0..n)
        .map(|_| match rng.below(3) {
            0 => 0,
            1 => 1 << rng.below(32),
            _ => rng.next() as u32,
        })
        .collect();
    let then = (0..n).map(|_| rng.next() as u32).collect();
    let els = (0..n).map(|_| rng.next() as u32).collect();
    (cond, then, els)
}

fn reference<C: Copy + Into<u64>>(cond: &[C], then: &[u32], els: &[u32]) -> Vec<u32> {
    (0..cond.len())
        .map(|i| if cond[i].into() != 0 { then[i] } else { els[i] })
        .collect()
}

/// Runs a select kernel in the emulator on exactly-sized buffers.
fn emulate<C>(
    x: &Exec,
    cond: &[C],
    then: &[u32],
    els: &[u32],
    out: &mut [u32],
    avx512: bool,
) -> Result<EmuStats, EmuError> {
    let regions = [
        Region::read_only(cond),
        Region::read_only(then),
        Region::read_only(els),
        Region::writable(out),
    ];
    let args: Vec<u64> = regions
        .iter()
        .map(|r| r.addr)
        .chain([cond.len() as u64])
        .collect();
    let cfg = EmuConfig {
        max_steps: 100_000_000,
        avx512,
    };
    // SAFETY: the regions are the four slices, borrowed for the whole call (`out` exclusively).
    unsafe { call(x.bytes(), 0, &args, &regions, &cfg) }
}

const SIZES: [usize; 12] = [0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 1000];

#[test]
fn avx2_select_kernel() {
    let x = Exec::new(&asm(&avx2_select_f32));
    let native = std::arch::is_x86_feature_detected!("avx2");
    if !native {
        skip::skip(
            "emu: the AVX2 select kernel natively",
            "the host lacks AVX2",
        );
    }
    for (s, &n) in SIZES.iter().enumerate() {
        let (cond, then, els) = data(n, s as u64);
        let want = reference(&cond, &then, &els);
        let mut out = vec![0u32; n];
        let st = emulate(&x, &cond, &then, &els, &mut out, false)
            .unwrap_or_else(|e| panic!("n = {n}: {e}"));
        assert_eq!(out, want, "emulated, n = {n}");
        assert_eq!(st.stores as usize, n / 8 + n % 8);
        if native {
            let mut out = vec![0u32; n];
            // SAFETY: the host has AVX2 (checked); the kernel reads n elements of each input
            // and writes n of `out`, all of which exist.
            unsafe {
                let f: unsafe extern "sysv64" fn(
                    *const u32,
                    *const u32,
                    *const u32,
                    *mut u32,
                    u64,
                ) = std::mem::transmute(x.bytes().as_ptr());
                f(
                    cond.as_ptr(),
                    then.as_ptr(),
                    els.as_ptr(),
                    out.as_mut_ptr(),
                    n as u64,
                );
            }
            assert_eq!(out, want, "native, n = {n}");
        }
    }
}

#[test]
fn avx512_select_kernel_with_masked_tail() {
    let x = Exec::new(&asm(&|a| avx512_select_f32(a, false)));
    let buggy = Exec::new(&asm(&|a| avx512_select_f32(a, true)));
    for (s, &n) in SIZES.iter().enumerate() {
        let (c, then, els) = data(n, 100 + s as u64);
        let cond: Vec<u8> = c.iter().map(|&c| (c as u8) & 1).collect();
        let want = reference(&cond, &then, &els);
        let mut out = vec![0u32; n];
        emulate(&x, &cond, &then, &els, &mut out, true).unwrap_or_else(|e| panic!("n = {n}: {e}"));
        assert_eq!(out, want, "n = {n}");
        // Without AVX-512 the kernel is refused (once it reaches an AVX-512 instruction).
        if n > 0 {
            assert!(matches!(
                emulate(&x, &cond, &then, &els, &mut out, false),
                Err(EmuError::Unsupported { .. })
            ));
        }
        // The unmasked tail load reads past `then` whenever n is not a multiple of 16.
        let r = emulate(&buggy, &cond, &then, &els, &mut out, true);
        if n % 16 == 0 {
            assert!(r.is_ok(), "n = {n}: {r:?}");
        } else {
            match r {
                Err(EmuError::OutOfBounds {
                    write: false,
                    len: 64,
                    insn,
                    ..
                }) => assert!(insn.starts_with("vmovups zmm2"), "{insn}"),
                r => panic!("n = {n}: {r:?}"),
            }
        }
    }
}

/// Measures the emulation speed on 100 000 elements (printed; see `--nocapture`).
#[test]
fn emulation_speed() {
    let n = 100_000;
    let (c, then, els) = data(n, 7);
    let want = reference(&c, &then, &els);
    let mut out = vec![0u32; n];
    let rate = |what: &str, t: Instant, st: EmuStats| {
        let s = t.elapsed().as_secs_f64();
        println!(
            "emu: {what} of {n} f32: {} instructions in {:.1} ms, {:.1} M instructions/s",
            st.steps,
            s * 1e3,
            st.steps as f64 / s / 1e6
        );
    };
    let x = Exec::new(&asm(&avx2_select_f32));
    let t = Instant::now();
    let st = emulate(&x, &c, &then, &els, &mut out, false).expect("avx2");
    rate("AVX2 select", t, st);
    assert_eq!(out, want);

    let cond: Vec<u8> = c.iter().map(|&c| (c != 0) as u8).collect();
    let x = Exec::new(&asm(&|a| avx512_select_f32(a, false)));
    let t = Instant::now();
    let st = emulate(&x, &cond, &then, &els, &mut out, true).expect("avx512");
    rate("AVX-512 select", t, st);
    assert_eq!(out, want);

    // A scalar kernel: the tail loop alone.
    let x = Exec::new(&asm(&|a| {
        let mut lp = a.create_label();
        let mut done = a.create_label();
        a.xor(eax, eax)?;
        a.set_label(&mut lp)?;
        a.cmp(rax, r8)?;
        a.jae(done)?;
        a.mov(r10d, dword_ptr(rsi + rax * 4))?;
        a.cmp(dword_ptr(rdi + rax * 4), 0)?;
        a.cmove(r10d, dword_ptr(rdx + rax * 4))?;
        a.mov(dword_ptr(rcx + rax * 4), r10d)?;
        a.inc(rax)?;
        a.jmp(lp)?;
        a.set_label(&mut done)?;
        a.ret()
    }));
    let t = Instant::now();
    let st = emulate(&x, &c, &then, &els, &mut out, false).expect("scalar");
    rate("scalar select", t, st);
    assert_eq!(out, want);
}

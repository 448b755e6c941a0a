//! Kernels of both x86 levels run directly on signatures (any strides, negative ones included),
//! compared byte for byte with a reference loop, with guard bytes around every buffer. AVX2 runs
//! natively; AVX-512 natively when the host has it, else in the emulator (with a printed line).

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;
#[path = "common/skip.rs"]
mod skip;

use selectjit::Variant;
use selectjit::codegen::CodeGen;
use selectjit::codegen::CodeGenOptions;
use selectjit::codegen::Kernel;
use selectjit::codegen::Ptrs;
use selectjit::codegen::x86::Level;
use selectjit::codegen::x86::X86Gen;
use selectjit::plan::COND;
use selectjit::plan::ELSE;
use selectjit::plan::OUT;
use selectjit::plan::Pattern;
use selectjit::plan::RowShape;
use selectjit::plan::Signature;
use selectjit::plan::THEN;
use selectjit_emu::{Emulator, disassemble};

/// Bytes of guard before and after every buffer.
const GUARD: usize = 64;

/// How kernels of a level are executed here.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Exec {
    Native,
    Emulated,
}

/// How `level` runs on this host: natively, else in the emulator (a [`skip::skip`] of the
/// native run: a failure under `SELECTJIT_REQUIRE_ALL_TIERS=1`).
fn exec_for(level: Level) -> Exec {
    if level.available() {
        return Exec::Native;
    }
    skip::skip(
        &format!("{level:?} kernels natively"),
        "the host lacks the instructions; they run in the emulator",
    );
    Exec::Emulated
}

/// Which kernel of a signature: exact or shape-generic, and what its variant asks for beyond
/// the stores the generator's threshold decides.
#[derive(Clone, Copy, Debug, Default)]
struct How {
    generic: bool,
    /// zmm blocks (AVX-512 only).
    wide: bool,
    /// Non-temporal rows walked four parts at once.
    four_way: bool,
    /// The output's lines fetched for writing ahead of the main loop's ordinary stores.
    prefetchw: bool,
}

const EXACT: How = How {
    generic: false,
    wide: false,
    four_way: false,
    prefetchw: false,
};
const GENERIC: How = How {
    generic: true,
    ..EXACT
};
const WIDE: How = How {
    wide: true,
    ..EXACT
};
const FOUR_WAY: How = How {
    four_way: true,
    ..EXACT
};
const PREFETCHW: How = How {
    prefetchw: true,
    ..EXACT
};

/// The variant `xg` compiles `sig` as: its non-temporal threshold decides the stores.
fn variant(xg: &X86Gen, sig: &Signature, how: How) -> Variant {
    Variant {
        tier: xg.tier(),
        nt: !how.generic && xg.uses_nt(sig),
        wide: how.wide,
        four_way: how.four_way,
        prefetchw: how.prefetchw,
    }
}

/// The code of `xg` for `sig` (or its pattern) as variant `variant(xg, sig, how)`.
fn code(xg: &X86Gen, sig: &Signature, how: How) -> Vec<u8> {
    xg.emit_with(sig, how.generic, variant(xg, sig, how))
        .unwrap_or_else(|e| panic!("{sig}: {e}"))
        .0
}

/// The kernel of `xg` for `sig` (or its pattern), run natively or in the emulator.
fn kernel(xg: &X86Gen, exec: Exec, sig: &Signature, how: How) -> Kernel {
    let generic = how.generic;
    let code = code(xg, sig, how);
    let v = variant(xg, sig, how);
    match exec {
        Exec::Emulated => Kernel::with_runner(sig.clone(), generic, v, code, Emulator::runner()),
        Exec::Native => {
            // The host runs this level (checked by `exec_for`): the engine's code generator
            // with the same non-temporal threshold compiles the same code natively.
            let cg = CodeGen::new(
                xg.tier(),
                CodeGenOptions {
                    nt_min_bytes: xg.nt_min_bytes(),
                    ..CodeGenOptions::default()
                },
            )
            .unwrap();
            let k = if generic {
                cg.compile_with(xg.tier(), sig, true)
            } else {
                cg.compile_variant(v, sig)
            }
            .unwrap();
            assert_eq!(k.x86_code(), Some(&code[..]), "{sig}: the same code");
            assert_eq!(k.variant(), v, "{sig}");
            k
        }
    }
}

/// One operand's buffer: `GUARD` bytes, the addressed span, `GUARD` bytes; `base` is the
/// offset of the element at index 0 (the span may extend below it with negative strides).
struct Buf {
    data: Vec<u8>,
    base: usize,
}

fn layout(sig: &Signature, op: usize, misalign: usize) -> Buf {
    let w = if op == COND { 1 } else { sig.width() as i64 };
    let (mut lo, mut hi) = (0i64, 0i64);
    for (k, &d) in sig.dims().iter().enumerate() {
        let span = (d as i64 - 1) * sig.strides(op)[k] as i64 * w;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    let len = (hi - lo + w) as usize + 2 * GUARD + misalign;
    Buf {
        data: vec![0; len],
        base: GUARD + misalign + (-lo) as usize,
    }
}

/// Byte offset of element `idx` of `op` from its base.
fn offset(sig: &Signature, op: usize, idx: &[usize]) -> isize {
    let w = if op == COND { 1 } else { sig.width() as isize };
    idx.iter()
        .enumerate()
        .map(|(k, &i)| i as isize * sig.strides(op)[k] * w)
        .sum()
}

/// Every index vector of `sig` whose outer index lies in `begin..end`.
fn for_each_index(sig: &Signature, begin: usize, end: usize, mut f: impl FnMut(&[usize])) {
    let r = sig.rank();
    if begin >= end || sig.dims().contains(&0) {
        return;
    }
    let mut idx = vec![0usize; r];
    idx[0] = begin;
    loop {
        f(&idx);
        let mut k = r - 1;
        loop {
            idx[k] += 1;
            let lim = if k == 0 { end } else { sig.dims()[k] };
            if idx[k] < lim {
                break;
            }
            if k == 0 {
                return;
            }
            idx[k] = 0;
            k -= 1;
        }
    }
}

/// Where the output lives: its own buffer, or then's / else's (in place).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    Own,
    Then,
    Else,
}

/// Runs `sig` with the kernel `how` of `xg` over the outer ranges `splits`, and compares every
/// byte of every buffer with the reference.
fn check(xg: &X86Gen, exec: Exec, sig: &Signature, how: How, place: Place, seed: u64) {
    let mut rng = Rng(seed);
    let w = sig.width();
    let misalign = (seed % 67) as usize;
    let mut bufs: Vec<Buf> = (0..4)
        .map(|op| layout(sig, op, misalign * (op == OUT) as usize))
        .collect();
    // cond: zeros and every kind of non-zero byte; at random, in runs (whole vectors of one
    // kind), all non-zero or all zero.
    let conds = [0u8, 1, 0x80, 0, 0xff, 0, 2, 0x7f, 0];
    let truthy = [1u8, 0x80, 0xff, 2, 0x7f];
    let n = bufs[COND].data.len();
    bufs[COND].data = rng.cond(n, (seed / 3) % 4, &conds, &truthy);
    for op in [THEN, ELSE, OUT] {
        let n = bufs[op].data.len();
        bufs[op].data = rng.bytes(n);
    }
    let in_place = match place {
        Place::Own => None,
        Place::Then => Some(THEN),
        Place::Else => Some(ELSE),
    };
    if let Some(src) = in_place {
        assert_eq!(
            sig.strides(src),
            sig.strides(OUT),
            "in place needs equal strides"
        );
        bufs[OUT] = Buf {
            data: bufs[src].data.clone(),
            base: bufs[src].base,
        };
    }
    let outer = sig.outer();
    let splits: Vec<(usize, usize)> = match outer {
        0 | 1 => vec![(0, outer)],
        _ => {
            let k = 1 + (seed as usize % (outer - 1));
            vec![(0, k), (k, k), (k, outer)]
        }
    };
    // Reference.
    let mut want = bufs[OUT].data.clone();
    for &(b, e) in &splits {
        for_each_index(sig, b, e, |idx| {
            let at = |op: usize| (bufs[op].base as isize + offset(sig, op, idx)) as usize;
            let src = if bufs[COND].data[at(COND)] != 0 {
                THEN
            } else {
                ELSE
            };
            let s = at(src);
            let o = at(OUT);
            want[o..o + w].copy_from_slice(&bufs[src].data[s..s + w]);
        });
    }
    let kernel = kernel(xg, exec, sig, how);
    let mut out = std::mem::take(&mut bufs[OUT].data);
    let out_base = bufs[OUT].base;
    let ptr_of = |op: usize, bufs: &[Buf], out: &mut [u8]| -> *mut u8 {
        let is_out = op == OUT || in_place == Some(op);
        let base = if is_out { out_base } else { bufs[op].base };
        if is_out {
            out.as_mut_ptr().wrapping_add(base)
        } else {
            bufs[op].data.as_ptr().wrapping_add(base) as *mut u8
        }
    };
    for &(b, e) in &splits {
        let p = Ptrs {
            cond: ptr_of(COND, &bufs, &mut out) as *const u8,
            then: ptr_of(THEN, &bufs, &mut out) as *const u8,
            else_: ptr_of(ELSE, &bufs, &mut out) as *const u8,
            out: ptr_of(OUT, &bufs, &mut out),
            rhs: std::ptr::null(),
        };
        // SAFETY: every buffer holds the bytes `sig` addresses from its base (see `layout`),
        // the output overlaps an input only in place with equal strides, and `b..e` lies in
        // the outer dimension.
        unsafe { kernel.run(sig, p, b, e) };
    }
    if out != want {
        let first = out.iter().zip(&want).position(|(a, b)| a != b).unwrap();
        panic!(
            "{:?} {exec:?} {} kernel{}, {place:?}, seed {seed}: output differs at byte {} \
             (base {out_base}): got {:02x?}, want {:02x?}\nsignature {sig}\n{}",
            xg.level(),
            if how.generic { "generic" } else { "exact" },
            match (how.wide, how.four_way, how.prefetchw) {
                (true, _, true) => " (zmm blocks, prefetchw)",
                (true, _, _) => " (zmm blocks)",
                (_, true, _) => " (four-way)",
                (_, _, true) => " (prefetchw)",
                _ => "",
            },
            first,
            &out[first..(first + 16).min(out.len())],
            &want[first..(first + 16).min(want.len())],
            disassemble(&code(xg, sig, how))
        );
    }
}

fn sig(width: usize, dims: &[usize], strides: [&[isize]; 4]) -> Signature {
    Signature::new(width, dims, strides).expect("a valid signature")
}

/// Runs `sig` exact and generic, with ordinary and non-temporal stores, own output and (where
/// the layout allows) in place; AVX-512 exact kernels also with zmm blocks, non-temporal ones
/// also four-way where they walk so, ordinary ones also with `prefetchw` (zmm blocks on
/// AVX-512).
fn check_all(level: Level, exec: Exec, s: &Signature, seed: u64) {
    let xgs = [X86Gen::new(level, usize::MAX), X86Gen::new(level, 0)];
    let mut places = vec![Place::Own];
    if s.strides(THEN) == s.strides(OUT) {
        places.push(Place::Then);
    }
    if s.strides(ELSE) == s.strides(OUT) {
        places.push(Place::Else);
    }
    for (g, xg) in xgs.iter().enumerate() {
        for &place in &places {
            check(xg, exec, s, EXACT, place, seed + g as u64);
            if g == 0 {
                check(xg, exec, s, GENERIC, place, seed + 7);
            }
            if level == Level::Avx512 {
                check(xg, exec, s, WIDE, place, seed + 11 + g as u64);
            }
            if g == 0 && X86Gen::runs_prefetchw(s) {
                // zmm blocks on AVX-512 (the claim is the same code before either block).
                let wide = level == Level::Avx512;
                check(xg, exec, s, How { wide, ..PREFETCHW }, place, seed + 17);
            }
            if g == 1 && xg.runs_four_way(s) {
                check(xg, exec, s, FOUR_WAY, place, seed + 13);
            }
        }
    }
}

const WIDTHS: [usize; 5] = [1, 2, 4, 8, 16];

/// Row lengths around every vector and unroll boundary of both levels.
fn lengths() -> Vec<usize> {
    let mut v: Vec<usize> = (1..=300).collect();
    v.extend([511, 512, 513, 1000, 1023, 1024, 1025, 4099]);
    v
}

fn sweep_rows(level: Level, exec: Exec) {
    let mut seed = 1;
    for w in WIDTHS {
        for n in lengths() {
            // Vector rows, every then/else broadcast combination.
            for (t, e) in [(1, 1), (0, 1), (1, 0), (0, 0)] {
                let s = sig(w, &[n], [&[1], &[t], &[e], &[1]]);
                check_all(level, exec, &s, seed);
                seed += 1;
            }
            // Row copies and fills: cond constant along the row, different per row.
            for (t, e) in [(1, 1), (0, 1), (1, 0), (0, 0)] {
                let s = sig(
                    w,
                    &[3, n],
                    [&[-1, 0], &[n as isize * t, t], &[e, e], &[n as isize, 1]],
                );
                check_all(level, exec, &s, seed);
                seed += 1;
            }
        }
    }
}

#[test]
fn avx2_rows_every_length() {
    sweep_rows(Level::Avx2, exec_for(Level::Avx2));
}

#[test]
fn avx512_rows_every_length() {
    sweep_rows(Level::Avx512, exec_for(Level::Avx512));
}

/// AVX2 kernels once through the emulator too: it checks every memory access against the
/// operands' extents (a vector load past a row's end would not fault natively).
#[test]
fn avx2_rows_in_the_emulator() {
    sweep_rows(Level::Avx2, Exec::Emulated);
    sweep_layouts(Level::Avx2, Exec::Emulated);
}

/// AVX-512 kernels through the emulator even on a host that runs them natively: hosts without
/// AVX-512 test them only there, so it must accept every instruction they use; and it checks
/// every masked access against the operands' extents.
#[test]
fn avx512_rows_in_the_emulator() {
    if Level::Avx512.available() {
        sweep_rows(Level::Avx512, Exec::Emulated);
        sweep_layouts(Level::Avx512, Exec::Emulated);
    } else {
        println!("avx512_rows_in_the_emulator: avx512_rows_every_length emulates them already");
    }
}

/// Outer loops, strided rows and negative strides on every operand but the output.
fn layouts(w: usize) -> Vec<Signature> {
    vec![
        // Reversed inputs (strided rows).
        sig(w, &[37], [&[-1], &[-1], &[-1], &[1]]),
        sig(w, &[37], [&[1], &[-2], &[3], &[1]]),
        sig(w, &[37], [&[-3], &[1], &[0], &[2]]),
        // Strided output.
        sig(w, &[5, 9], [&[9, 1], &[9, 1], &[9, 1], &[1, 5]]),
        // Transposed then.
        sig(w, &[6, 40], [&[40, 1], &[1, 6], &[0, 1], &[40, 1]]),
        // Vector rows under negative outer strides, per-row splats.
        sig(w, &[4, 70], [&[-70, 1], &[-1, 0], &[70, 1], &[70, 1]]),
        sig(w, &[4, 70], [&[70, 1], &[70, 1], &[-1, 0], &[70, 1]]),
        sig(w, &[4, 70], [&[0, 1], &[0, 0], &[1, 0], &[70, 1]]),
        // Rank 3 to 5: loops kept in the stack frame.
        sig(
            w,
            &[2, 3, 33],
            [&[0, 33, 1], &[-99, 33, 1], &[3, 1, 0], &[99, 33, 1]],
        ),
        sig(
            w,
            &[2, 3, 2, 17],
            [
                &[0, -1, 0, 1],
                &[102, 34, 17, 1],
                &[-2, 0, 1, 0],
                &[102, 34, 17, 1],
            ],
        ),
        sig(
            w,
            &[2, 2, 2, 2, 5],
            [
                &[1, 0, -1, 0, 0],
                &[40, 20, 10, 5, 1],
                &[-5, 5, 0, 1, 0],
                &[40, 20, 10, 5, 1],
            ],
        ),
        // Copy rows under negative strides.
        sig(w, &[5, 50], [&[-1, 0], &[-50, 1], &[1, 0], &[50, 1]]),
        // One element.
        sig(w, &[1], [&[0], &[0], &[0], &[0]]),
        // Long rows: main loops and non-temporal stores.
        sig(w, &[2, 3000], [&[3000, 1], &[3000, 1], &[0, 0], &[3000, 1]]),
        sig(w, &[3, 2000], [&[-1, 0], &[2000, 1], &[0, 0], &[2000, 1]]),
    ]
}

fn sweep_layouts(level: Level, exec: Exec) {
    let mut seed = 1000;
    for w in WIDTHS {
        for s in layouts(w) {
            check_all(level, exec, &s, seed);
            seed += 1;
        }
    }
}

#[test]
fn avx2_layouts_and_negative_strides() {
    sweep_layouts(Level::Avx2, exec_for(Level::Avx2));
}

#[test]
fn avx512_layouts_and_negative_strides() {
    sweep_layouts(Level::Avx512, exec_for(Level::Avx512));
}

/// Every kernel shape of both levels decodes back to valid instructions of the right families,
/// on any host.
#[test]
fn every_kernel_decodes() {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};
    for level in [Level::Avx2, Level::Avx512] {
        for w in WIDTHS {
            let mut sigs = layouts(w);
            for n in [1, 7, 64, 100, 1000] {
                for (t, e) in [(1, 1), (0, 1), (1, 0), (0, 0)] {
                    sigs.push(sig(w, &[n], [&[1], &[t], &[e], &[1]]));
                    sigs.push(sig(
                        w,
                        &[3, n],
                        [&[1, 0], &[t, t], &[e, e], &[n as isize, 1]],
                    ));
                }
            }
            for s in &sigs {
                for (nt, generic) in [(usize::MAX, false), (0, false), (usize::MAX, true)] {
                    let xg = X86Gen::new(level, nt);
                    let sg = if generic {
                        Pattern::of(s).representative()
                    } else {
                        s.clone()
                    };
                    let code = xg.emit(&sg, generic).unwrap();
                    let mut d = Decoder::with_ip(64, &code, 0, DecoderOptions::NONE);
                    let mut mnemonics = Vec::new();
                    let mut end = 0;
                    for ins in &mut d {
                        assert!(
                            !ins.is_invalid(),
                            "{level:?} {s}: invalid at {:#x}",
                            ins.ip()
                        );
                        mnemonics.push(ins.mnemonic());
                        end = ins.next_ip() as usize;
                        if ins.mnemonic() == Mnemonic::Ret && ins.ip() > 8 {
                            break; // constants follow the final ret
                        }
                    }
                    assert!(end <= code.len());
                    let has = |m: Mnemonic| mnemonics.contains(&m);
                    assert!(has(Mnemonic::Ret));
                    let shape = sg.row_shape();
                    let vec_family: &[Mnemonic] = match level {
                        Level::Avx2 => &[
                            Mnemonic::Vpblendvb,
                            Mnemonic::Vblendvps,
                            Mnemonic::Vblendvpd,
                        ],
                        Level::Avx512 => &[
                            Mnemonic::Vpblendmb,
                            Mnemonic::Vpblendmw,
                            Mnemonic::Vpblendmd,
                            Mnemonic::Vpblendmq,
                        ],
                    };
                    match shape {
                        RowShape::Select { .. } if generic || s.inner() >= 64 => {
                            assert!(vec_family.iter().any(|&m| has(m)), "{level:?} {s}");
                            if level == Level::Avx512 {
                                assert!(has(Mnemonic::Bzhi) || s.dims().len() > 1 || !generic);
                                assert!(
                                    has(Mnemonic::Vptestmb)
                                        || has(Mnemonic::Vptestnmb)
                                        || has(Mnemonic::Vptestmq)
                                );
                            }
                        }
                        RowShape::Select { .. } => {}
                        RowShape::Copy { .. } => assert!(
                            has(Mnemonic::Vmovdqu) || has(Mnemonic::Vmovdqu8) || has(Mnemonic::Mov)
                        ),
                        RowShape::Strided => assert!(has(Mnemonic::Cmove)),
                    }
                    if nt == 0 && !generic && shape != RowShape::Strided {
                        assert!(has(Mnemonic::Sfence), "{level:?} {s}");
                    }
                    if generic || nt != 0 {
                        assert!(!has(Mnemonic::Vmovntdq) && !has(Mnemonic::Sfence));
                    }
                }
            }
        }
    }
}

/// The instruction part of every kernel decodes to exactly its length; constants follow it.
#[test]
fn decoded_length_matches() {
    use iced_x86::{Decoder, DecoderOptions};
    for level in [Level::Avx2, Level::Avx512] {
        for w in WIDTHS {
            for s in layouts(w) {
                for generic in [false, true] {
                    let xg = X86Gen::new(level, 0);
                    let sg = if generic {
                        Pattern::of(&s).representative()
                    } else {
                        s.clone()
                    };
                    let (code, len) = xg.emit_parts(&sg, generic).unwrap();
                    assert!(len <= code.len());
                    let mut d = Decoder::with_ip(64, &code[..len], 0, DecoderOptions::NONE);
                    let mut total = 0;
                    for ins in &mut d {
                        assert!(
                            !ins.is_invalid(),
                            "{level:?} {s}: invalid at {:#x}",
                            ins.ip()
                        );
                        total += ins.len();
                    }
                    assert_eq!(total, len, "{level:?} {s}");
                }
            }
        }
    }
}

/// Non-temporal stores on both sides of the threshold: an output one element short of
/// `nt_min_bytes` is stored with ordinary stores only, one of exactly `nt_min_bytes` with
/// non-temporal stores and an `sfence`; shape-generic kernels (whose size is not known when
/// they are emitted) never use them.
#[test]
fn non_temporal_stores_from_the_threshold() {
    const T: usize = 1 << 20;
    for level in [Level::Avx2, Level::Avx512] {
        for width in WIDTHS {
            let xg = X86Gen::new(level, T);
            let n = T / width;
            let at = |n: usize| sig(width, &[n], [&[1], &[1], &[1], &[1]]);
            let text =
                |s: &Signature, generic: bool| disassemble(&xg.emit(s, generic).expect("emits"));
            let (below, at_t) = (at(n - 1), at(n));
            assert!(
                !xg.uses_nt(&below) && xg.uses_nt(&at_t),
                "{level:?} w{width}"
            );
            let below = text(&below, false);
            assert!(
                !below.contains("vmovnt") && !below.contains("sfence"),
                "{level:?} w{width}: non-temporal stores below the threshold:\n{below}"
            );
            let above = text(&at_t, false);
            assert!(
                above.contains("vmovnt") && above.contains("sfence"),
                "{level:?} w{width}: no non-temporal stores at the threshold:\n{above}"
            );
            let generic = text(&at(n), true);
            assert!(
                !generic.contains("vmovnt"),
                "{level:?} w{width}: generic kernel"
            );
        }
    }
}

/// Rows whose cond row is the same for every outer index and long (attention masks): their
/// kernels pack it to bits in the prologue; every output alignment, non-temporal or not,
/// rank 2 and 3, rows up to the largest packed length.
fn packed_layouts(w: usize) -> Vec<Signature> {
    let padded = |n: usize| n.next_multiple_of(64) as isize;
    let (p1, p2) = (padded(4097), padded(5000));
    vec![
        sig(w, &[3, 4096], [&[0, 1], &[4096, 1], &[0, 0], &[4096, 1]]),
        sig(
            w,
            &[2, 3, 4097],
            [&[0, 0, 1], &[3 * p1, p1, 1], &[0, 0, 1], &[3 * p1, p1, 1]],
        ),
        sig(w, &[2, 5000], [&[0, 1], &[0, 0], &[p2, 1], &[p2, 1]]),
        sig(
            w,
            &[2, 65536],
            [&[0, 1], &[65536, 1], &[65536, 1], &[65536, 1]],
        ),
    ]
}

fn sweep_packed(level: Level, exec: Exec) {
    for w in WIDTHS {
        for (k, s) in packed_layouts(w).iter().enumerate() {
            // Output misalignments (seed % 67): element-aligned at every line offset, and not.
            for seed in [0, 1, 3, 8, 16, 24, 32, 40, 48, 56, 60, 66] {
                check_all(level, exec, s, seed + 67 * (k as u64 + 1));
            }
        }
    }
}

/// Runs `sweep` on both levels: in the emulator with `emulated`, else natively where the host
/// runs the level (see [`exec_for`]). A level the host lacks runs in the emulator either way, so
/// the emulated pass leaves it to the other one rather than run the same sweep twice.
fn both_levels(sweep: fn(Level, Exec), emulated: bool) {
    for level in [Level::Avx2, Level::Avx512] {
        if !emulated {
            sweep(level, exec_for(level));
        } else if level.available() {
            sweep(level, Exec::Emulated);
        } else {
            println!("{level:?}: the native pass runs this sweep in the emulator already");
        }
    }
}

#[test]
fn packed_cond_rows() {
    both_levels(sweep_packed, false);
}

/// Packed rows in the emulator, which checks that the packing reads no cond byte past the row
/// and stays in the stack frame.
#[test]
fn packed_cond_rows_in_the_emulator() {
    both_levels(sweep_packed, true);
}

/// Which kernels pack: widths 2 to 8 on both levels and width 1 with AVX-512, exact kernels
/// only, rows of 4096 to 65536 elements, output rows at one offset within a line.
#[test]
fn packing_applies_where_it_should() {
    let packs = |level: Level, s: &Signature, generic: bool| {
        let xg = X86Gen::new(level, usize::MAX);
        let text = disassemble(&xg.emit(s, generic).expect("emits"));
        match level {
            Level::Avx2 => text.contains("vpmovmskb"),
            Level::Avx512 => text.contains("kmovd r10d,k1"),
        }
    };
    let attn =
        |w: usize, n: usize, out: isize| sig(w, &[4, n], [&[0, 1], &[out, 1], &[0, 0], &[out, 1]]);
    for level in [Level::Avx2, Level::Avx512] {
        for w in WIDTHS {
            let expect = match level {
                Level::Avx2 => matches!(w, 2 | 4 | 8),
                Level::Avx512 => w <= 8,
            };
            let s = attn(w, 4096, 4096);
            assert_eq!(packs(level, &s, false), expect, "{level:?} {s}");
            assert!(!packs(level, &s, true), "{level:?} {s}: generic");
            for n in [4095, 65537] {
                let s = attn(w, n, n.next_multiple_of(64) as isize);
                assert!(!packs(level, &s, false), "{level:?} {s}");
            }
            // Output rows at different offsets within a line.
            let s = attn(w, 4096, 4100);
            assert!(!packs(level, &s, false), "{level:?} {s}");
            // cond changes with the outer index.
            let s = sig(w, &[4, 4096], [&[4096, 1], &[4096, 1], &[0, 0], &[4096, 1]]);
            assert!(!packs(level, &s, false), "{level:?} {s}");
        }
    }
}

/// Wide AVX-512 kernels blend zmm vectors in the main loop of vector-select rows long enough
/// for a block (what `X86Gen::runs_wide` offers the measured choice), and decode; other kernels
/// never touch a zmm register, and AVX2 ignores the request.
#[test]
fn wide_kernels_blend_zmm_blocks() {
    let avx512 = X86Gen::new(Level::Avx512, usize::MAX);
    let avx2 = X86Gen::new(Level::Avx2, usize::MAX);
    for w in WIDTHS {
        for n in [1, 7, 31, 32, 33, 63, 64, 100, 127, 128, 1000] {
            for (t, e) in [(1, 1), (0, 1), (1, 0), (0, 0)] {
                let row = sig(w, &[n], [&[1], &[t], &[e], &[1]]);
                let copy = sig(w, &[3, n], [&[1, 0], &[t, t], &[e, e], &[n as isize, 1]]);
                for s in [row, copy] {
                    let wide = disassemble(&code(&avx512, &s, WIDE));
                    let zmm_blend = wide
                        .lines()
                        .any(|l| l.contains("vpblendm") && l.contains("zmm"));
                    assert_eq!(zmm_blend, X86Gen::runs_wide(&s), "{s}:\n{wide}");
                    assert_eq!(
                        X86Gen::runs_wide(&s),
                        w <= 8 && matches!(s.row_shape(), RowShape::Select { .. }) && n * w >= 128,
                        "{s}"
                    );
                    for text in [
                        disassemble(&code(&avx512, &s, EXACT)),
                        disassemble(&code(&avx2, &s, WIDE)),
                    ] {
                        assert!(!text.contains("zmm"), "{s}:\n{text}");
                    }
                }
            }
        }
    }
}

/// `prefetchw` kernels fetch the output's lines ahead in the main loop of vector-select rows
/// long enough for a block, elements narrower than 16 bytes (what `X86Gen::runs_prefetchw`
/// offers the measured choice); other kernels never prefetch.
#[test]
fn prefetchw_kernels_claim_the_output_ahead() {
    for level in [Level::Avx2, Level::Avx512] {
        let xg = X86Gen::new(level, usize::MAX);
        for w in WIDTHS {
            for n in [1, 31, 32, 33, 64, 127, 128, 1000] {
                let row = sig(w, &[n], [&[1], &[1], &[0], &[1]]);
                let copy = sig(w, &[3, n], [&[1, 0], &[1, 1], &[0, 0], &[n as isize, 1]]);
                for s in [row, copy] {
                    let runs = X86Gen::runs_prefetchw(&s);
                    assert_eq!(
                        runs,
                        w < 16 && matches!(s.row_shape(), RowShape::Select { .. }) && n * w >= 128,
                        "{s}"
                    );
                    let text = disassemble(&code(&xg, &s, PREFETCHW));
                    assert_eq!(text.contains("prefetchw"), runs, "{level:?} {s}:\n{text}");
                    let plain = disassemble(&code(&xg, &s, EXACT));
                    assert!(!plain.contains("prefetch"), "{level:?} {s}:\n{plain}");
                }
            }
        }
    }
}

/// Bytes of output a row needs for a four-way walk of its parts: four parts of 1 KiB and a
/// line for the head.
const FOUR_WAY_ROW: usize = 4 * 1024 + 64;

/// Four-way kernels: rows around the parts threshold of width `w` and past it (rank 1, run on
/// outer sub-ranges too, some too short for parts; rank 2 with rows at different line
/// offsets), and shorter rows walked a quarter of their loop apart (rank 2, whose row count is
/// the call's range; rank 3 with 4 to 9 rows in the inner loop, an attention pad mask).
fn four_way_layouts(w: usize) -> Vec<Signature> {
    let min = FOUR_WAY_ROW.div_ceil(w);
    let block = 128 / w;
    let mut v = Vec::new();
    for n in [
        min - 1,
        min,
        min + 1,
        min + block - 1,
        min + 4 * block + 3,
        2 * min + 17,
        3 * min + 29,
    ] {
        for (t, e) in [(1, 1), (0, 1), (1, 0), (0, 0)] {
            v.push(sig(w, &[n], [&[1], &[t], &[e], &[1]]));
        }
        let row = n as isize + 3;
        v.push(sig(w, &[3, n], [&[row, 1], &[row, 1], &[0, 1], &[row, 1]]));
    }
    for n in [1, 7, 33, 100, 384] {
        let row = n as isize + 5;
        v.push(sig(
            w,
            &[13, n],
            [&[row, 1], &[row, 1], &[row, 1], &[row, 1]],
        ));
        for rows in [4, 5, 6, 7, 9] {
            let plane = rows * row;
            v.push(sig(
                w,
                &[3, rows as usize, n],
                [&[row, 0, 1], &[plane, row, 1], &[0, 0, 0], &[plane, row, 1]],
            ));
        }
    }
    v
}

fn sweep_four_way(level: Level, exec: Exec) {
    let xg = X86Gen::new(level, 0);
    for w in WIDTHS {
        for (k, s) in four_way_layouts(w).iter().enumerate() {
            // Output misalignments (seed % 67): element-aligned at several line offsets, and
            // not aligned (no non-temporal path then).
            for seed in [0, 8, 16, 24, 40, 56, 3] {
                let seed = seed + 67 * (k as u64 + 1);
                check(&xg, exec, s, FOUR_WAY, Place::Own, seed);
                if s.strides(THEN) == s.strides(OUT) {
                    check(&xg, exec, s, FOUR_WAY, Place::Then, seed + 1);
                }
            }
        }
    }
}

#[test]
fn four_way_rows() {
    both_levels(sweep_four_way, false);
}

/// Four-way rows in the emulator, which checks that no part or quarter reads or writes past
/// its operand.
#[test]
fn four_way_rows_in_the_emulator() {
    both_levels(sweep_four_way, true);
}

/// Four-way kernels walk four parts of each row (the loop's `imul rax,r11,3`: the distance
/// from the last part back to the first) where rows reach the threshold, elements are up to 8
/// bytes and masks are not packed; else, with an outer loop of at least four rows (or the
/// call's range), four rows a quarter of the loop apart (`lea r10,[rax*4]`: the rows the
/// quarters take); exactly where `X86Gen::runs_four_way` says, for non-temporal exact kernels
/// of vector-select rows. Elsewhere asking for it changes no byte of the code.
#[test]
fn four_way_applies_where_it_should() {
    const PARTS: &str = "imul rax,r11,3";
    const QUARTERS: &str = "lea r10,[rax*4]";
    for level in [Level::Avx2, Level::Avx512] {
        let nt = X86Gen::new(level, 0);
        let ordinary = X86Gen::new(level, usize::MAX);
        for w in WIDTHS {
            let min = FOUR_WAY_ROW.div_ceil(w);
            let parts = w <= 8;
            let packs = match level {
                Level::Avx2 => matches!(w, 2 | 4 | 8),
                Level::Avx512 => w <= 8,
            };
            let m = min as isize;
            let p = min.max(4096) as isize;
            let unit: [&[isize]; 4] = [&[1], &[1], &[1], &[1]];
            // (signature, walks parts, walks quarters)
            let cases = [
                (sig(w, &[min], unit), parts, false),
                (sig(w, &[min - 1], unit), false, false),
                (
                    sig(w, &[4, min], [&[m, 1], &[m, 1], &[0, 0], &[m, 1]]),
                    parts,
                    !parts,
                ),
                (
                    sig(w, &[5, 100], [&[100, 1], &[100, 1], &[100, 1], &[100, 1]]),
                    false,
                    true,
                ),
                (
                    sig(
                        w,
                        &[2, 4, 100],
                        [&[100, 0, 1], &[400, 100, 1], &[0, 0, 0], &[400, 100, 1]],
                    ),
                    false,
                    true,
                ),
                (
                    sig(
                        w,
                        &[2, 3, 100],
                        [&[100, 0, 1], &[300, 100, 1], &[0, 0, 0], &[300, 100, 1]],
                    ),
                    false,
                    false,
                ),
                // cond shared by every row: packed to bits, which parts do not read.
                (
                    sig(w, &[4, p as usize], [&[0, 1], &[p, 1], &[0, 0], &[p, 1]]),
                    parts && !packs,
                    !parts || packs,
                ),
                // Row copies and strided rows.
                (
                    sig(w, &[3, min], [&[1, 0], &[m, 1], &[m, 1], &[m, 1]]),
                    false,
                    false,
                ),
                (sig(w, &[min], [&[1], &[2], &[1], &[1]]), false, false),
            ];
            for (s, walks_parts, walks_quarters) in cases {
                let four_way = walks_parts || walks_quarters;
                assert_eq!(nt.runs_four_way(&s), four_way, "{level:?} {s}");
                let four = disassemble(&code(&nt, &s, FOUR_WAY));
                let one = disassemble(&code(&nt, &s, EXACT));
                assert_eq!(four.contains(PARTS), walks_parts, "{level:?} {s}:\n{four}");
                assert_eq!(
                    four.contains(QUARTERS),
                    walks_quarters,
                    "{level:?} {s}:\n{four}"
                );
                assert_eq!(four != one, four_way, "{level:?} {s}");
                assert!(
                    !one.contains(PARTS) && !one.contains(QUARTERS),
                    "{level:?} {s}"
                );
                let generic_four = How {
                    generic: true,
                    four_way: true,
                    ..EXACT
                };
                assert_eq!(code(&nt, &s, generic_four), code(&nt, &s, GENERIC), "{s}");
                assert_eq!(
                    code(&ordinary, &s, FOUR_WAY),
                    code(&ordinary, &s, EXACT),
                    "{level:?} {s}: ordinary stores"
                );
            }
        }
    }
}

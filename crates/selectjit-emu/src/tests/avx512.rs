//! AVX-512 and opmask semantics without AVX-512 hardware: each snippet runs in the emulator on
//! random states, and the whole resulting state must equal the input changed only as the
//! Intel SDM's pseudo-code for the instructions says (written out here, independently of the
//! emulator). On AVX-512 hosts the snippets also run natively and must agree.

use super::*;

/// Random states per snippet.
const N: usize = 40;

/// Element `i` of `w` bytes.
fn el(v: &[u8], w: usize, i: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..w].copy_from_slice(&v[i * w..i * w + w]);
    u64::from_le_bytes(b)
}

/// Sets element `i` of `w` bytes.
fn set(v: &mut [u8], w: usize, i: usize, x: u64) {
    v[i * w..i * w + w].copy_from_slice(&x.to_le_bytes()[..w]);
}

/// Sign-extends a `w`-byte value.
fn sx(x: u64, w: usize) -> i64 {
    let s = 64 - 8 * w as u32;
    ((x << s) as i64) >> s
}

/// The SDM's write-masking of one destination register: `dest[j] = k[j] ? result[j] : (z ? 0 :
/// dest[j])` for `vl` bytes in `w`-byte elements, no mask when `k` is `None`, and zeroes above
/// `vl`.
fn masked(dest: &mut [u8; 64], result: &[u8], vl: usize, w: usize, k: Option<u64>, z: bool) {
    for j in 0..vl / w {
        let on = k.is_none_or(|k| k >> j & 1 == 1);
        if on {
            set(dest, w, j, el(result, w, j));
        } else if z {
            set(dest, w, j, 0);
        }
    }
    dest[vl..].fill(0);
}

/// The address of `mem[off]` for a tagged pointer.
fn mem_off(p: u64) -> usize {
    (p - mem_ptr(0)) as usize
}

/// Runs `body` (EVEX encodings preferred) on random states and checks the result against
/// `model(input, expected)`, which changes a copy of the input; `flags` are compared.
fn check(
    name: &str,
    flags: u64,
    setup: &dyn Fn(&mut State, &mut Rng),
    body: Body,
    model: &dyn Fn(&State, &mut State),
) {
    let x = Exec::new(&wrap(Isa::Avx512, body));
    let native = host_avx512();
    if !native {
        note_no_avx512();
    }
    let mut rng = Rng::new(name.bytes().map(u64::from).sum::<u64>() + 17);
    for it in 0..N {
        let mut input = rng.state();
        setup(&mut input, &mut rng);
        let got = run_emu(&x, &input, Isa::Avx512)
            .unwrap_or_else(|e| panic!("{name}: emulator failed on iteration {it}: {e}"));
        let mut want = input;
        model(&input, &mut want);
        let d = diff(Isa::Avx512, &want, &got, flags);
        assert!(
            d.is_empty(),
            "{name}: iteration {it}: SDM vs emulator:\n{d}"
        );
        if native {
            // SAFETY: the host has AVX-512 F/BW/DQ/VL (checked above).
            let hw = unsafe { run_native(&x, &input) };
            let d = diff(Isa::Avx512, &hw, &got, flags);
            assert!(
                d.is_empty(),
                "{name}: iteration {it}: hardware vs emulator:\n{d}"
            );
        }
    }
}

fn rsi_mem(st: &mut State, rng: &mut Rng) {
    st.gpr[6] = mem_ptr(rng.below(192) as usize);
}

macro_rules! body {
    (|$a:ident| $body:block) => {
        &|$a: &mut CodeAssembler| -> Result<(), IcedError> {
            $body
            Ok(())
        }
    };
}

#[test]
fn masked_moves_loads_and_stores() {
    check(
        "masked moves",
        ALL,
        &rsi_mem,
        body!(|a| {
            a.vmovdqu32(zmm0.k1(), zmm1)?;
            a.vmovdqu32(zmm2.k1().z(), zmm3)?;
            a.vmovdqu8(zmm4.k2().z(), zmmword_ptr(rsi))?;
            a.vmovdqu16(ymm5.k3(), ymmword_ptr(rsi + 64))?;
            a.vmovdqu64(zmmword_ptr(rsi + 128).k4(), zmm6)?;
            a.vmovdqu8(ymmword_ptr(rsi + 200).k5(), ymm7)?;
            a.vmovups(xmm8.k6(), xmm9)?;
        }),
        &|i, o| {
            let k = &i.k;
            let m = mem_off(i.gpr[6]);
            masked(&mut o.v[0], &i.v[1], 64, 4, Some(k[1]), false);
            masked(&mut o.v[2], &i.v[3], 64, 4, Some(k[1]), true);
            masked(&mut o.v[4], &i.mem[m..m + 64], 64, 1, Some(k[2]), true);
            masked(
                &mut o.v[5],
                &i.mem[m + 64..m + 96],
                32,
                2,
                Some(k[3]),
                false,
            );
            for j in 0..8 {
                if k[4] >> j & 1 == 1 {
                    set(&mut o.mem[m + 128..], 8, j, el(&i.v[6], 8, j));
                }
            }
            for j in 0..32 {
                if k[5] >> j & 1 == 1 {
                    o.mem[m + 200 + j] = i.v[7][j];
                }
            }
            masked(&mut o.v[8], &i.v[9], 16, 4, Some(k[6]), false);
        },
    );
}

/// `vpternlog`: bit `(a << 2) | (b << 1) | c` of the immediate, bit by bit.
fn ternlog_model(a: &[u8; 64], b: &[u8; 64], c: &[u8; 64], imm: u8) -> [u8; 64] {
    let mut r = [0u8; 64];
    for bit in 0..512 {
        let (byte, sh) = (bit / 8, bit % 8);
        let idx = ((a[byte] >> sh & 1) << 2) | ((b[byte] >> sh & 1) << 1) | (c[byte] >> sh & 1);
        r[byte] |= (imm >> idx & 1) << sh;
    }
    r
}

#[test]
fn ternlog() {
    for imm in [0x00u8, 0xff, 0xca, 0xe8, 0x96, 0x6a, 0x11] {
        check(
            &format!("vpternlog {imm:#x}"),
            ALL,
            &rsi_mem,
            body!(|a| {
                a.vpternlogd(zmm0.k1(), zmm1, zmm2, imm as i32)?;
                a.vpternlogq(zmm3.k2().z(), zmm4, zmm5, imm as i32)?;
                a.vpternlogd(ymm6, ymm7, ymmword_ptr(rsi), imm as i32)?;
                a.vpternlogq(zmm8, zmm9, qword_bcst(rsi + 8), imm as i32)?;
            }),
            &|i, o| {
                let m = mem_off(i.gpr[6]);
                let r = ternlog_model(&i.v[0], &i.v[1], &i.v[2], imm);
                masked(&mut o.v[0], &r, 64, 4, Some(i.k[1]), false);
                let r = ternlog_model(&i.v[3], &i.v[4], &i.v[5], imm);
                masked(&mut o.v[3], &r, 64, 8, Some(i.k[2]), true);
                let mut c = [0u8; 64];
                c[..32].copy_from_slice(&i.mem[m..m + 32]);
                let r = ternlog_model(&i.v[6], &i.v[7], &c, imm);
                masked(&mut o.v[6], &r, 32, 4, None, false);
                let mut c = [0u8; 64];
                for j in 0..8 {
                    c[8 * j..8 * j + 8].copy_from_slice(&i.mem[m + 8..m + 16]);
                }
                let r = ternlog_model(&i.v[8], &i.v[9], &c, imm);
                masked(&mut o.v[8], &r, 64, 8, None, false);
            },
        );
    }
}

/// The SDM's `vpcmp` predicates on signed or unsigned elements.
fn pred(p: u8, a: u64, b: u64, w: usize, signed: bool) -> bool {
    let (lt, eq) = if signed {
        (sx(a, w) < sx(b, w), a == b)
    } else {
        (a < b, a == b)
    };
    match p {
        0 => eq,
        1 => lt,
        2 => lt || eq,
        3 => false,
        4 => !eq,
        5 => !lt,
        6 => !lt && !eq,
        _ => true,
    }
}

/// An opmask from a per-element predicate over `n` elements, ANDed with `k`.
fn kbits(n: usize, k: Option<u64>, f: impl Fn(usize) -> bool) -> u64 {
    (0..n).filter(|&j| f(j)).fold(0, |m, j| m | 1 << j) & k.unwrap_or(u64::MAX)
}

#[test]
fn compares_into_opmasks() {
    for p in 0..8u8 {
        check(
            &format!("vpcmp {p}"),
            ALL,
            &rsi_mem,
            body!(|a| {
                a.vpcmpd(k1.k2(), zmm0, zmm1, p as i32)?;
                a.vpcmpub(k3, zmm2, zmm3, p as i32)?;
                a.vpcmpw(k4.k6(), ymm4, ymmword_ptr(rsi), p as i32)?;
                a.vpcmpuq(k5, xmm5, xmm6, p as i32)?;
            }),
            &|i, o| {
                let m = mem_off(i.gpr[6]);
                let (v, k) = (&i.v, &i.k);
                o.k[1] = kbits(16, Some(k[2]), |j| {
                    pred(p, el(&v[0], 4, j), el(&v[1], 4, j), 4, true)
                });
                o.k[3] = kbits(64, None, |j| {
                    pred(p, el(&v[2], 1, j), el(&v[3], 1, j), 1, false)
                });
                o.k[4] = kbits(16, Some(k[6]), |j| {
                    pred(p, el(&v[4], 2, j), el(&i.mem[m..], 2, j), 2, true)
                });
                o.k[5] = kbits(2, None, |j| {
                    pred(p, el(&v[5], 8, j), el(&v[6], 8, j), 8, false)
                });
            },
        );
    }
    check(
        "vpcmpeq vpcmpgt vptestm",
        ALL,
        &rsi_mem,
        body!(|a| {
            a.vpcmpeqq(k1, zmm0, zmm1)?;
            a.vpcmpgtw(k3.k2(), zmm2, zmm3)?;
            a.vpcmpeqb(k4, ymm4, ymm5)?;
            a.vptestmb(k5, zmm6, zmm7)?;
            a.vptestnmd(k6.k7(), zmm8, zmm9)?;
            a.vptestmq(k0, xmm10, xmm11)?;
            a.vptestnmw(k7, zmm12, zmmword_ptr(rsi))?;
        }),
        &|i, o| {
            let m = mem_off(i.gpr[6]);
            let (v, k) = (&i.v, &i.k);
            o.k[1] = kbits(8, None, |j| el(&v[0], 8, j) == el(&v[1], 8, j));
            o.k[3] = kbits(32, Some(k[2]), |j| {
                sx(el(&v[2], 2, j), 2) > sx(el(&v[3], 2, j), 2)
            });
            o.k[4] = kbits(32, None, |j| v[4][j] == v[5][j]);
            o.k[5] = kbits(64, None, |j| v[6][j] & v[7][j] != 0);
            o.k[6] = kbits(16, Some(k[7]), |j| el(&v[8], 4, j) & el(&v[9], 4, j) == 0);
            o.k[0] = kbits(2, None, |j| el(&v[10], 8, j) & el(&v[11], 8, j) != 0);
            o.k[7] = kbits(32, None, |j| el(&v[12], 2, j) & el(&i.mem[m..], 2, j) == 0);
        },
    );
}

#[test]
fn blends_and_broadcasts() {
    check(
        "blends broadcasts",
        ALL,
        &rsi_mem,
        body!(|a| {
            a.vpblendmd(zmm0.k1(), zmm1, zmm2)?;
            a.vpblendmb(zmm3.k2().z(), zmm4, zmm5)?;
            a.vpblendmq(zmm6, zmm7, zmm8)?;
            a.vpbroadcastd(zmm9.k3(), eax)?;
            a.vpbroadcastb(zmm10.k4().z(), xmm11)?;
            a.vpbroadcastq(zmm12, qword_ptr(rsi))?;
            a.vbroadcasti32x4(zmm13.k5(), xmmword_ptr(rsi + 16))?;
            a.vbroadcasti64x4(zmm14.k6().z(), ymmword_ptr(rsi + 32))?;
            a.vpbroadcastw(ymm15.k7(), word_ptr(rsi + 2))?;
        }),
        &|i, o| {
            let m = mem_off(i.gpr[6]);
            let (v, k) = (&i.v, &i.k);
            // VPBLENDM: k[j] ? src2 : (zeroing ? 0 : src1); without a mask, src2.
            for (d, s1, s2, w, kk, z) in [
                (0, 1, 2, 4, Some(k[1]), false),
                (3, 4, 5, 1, Some(k[2]), true),
                (6, 7, 8, 8, None, false),
            ] {
                let mut r = [0u8; 64];
                for j in 0..64 / w {
                    let x = match kk {
                        Some(kk) if kk >> j & 1 == 0 => {
                            if z {
                                0
                            } else {
                                el(&v[s1], w, j)
                            }
                        }
                        _ => el(&v[s2], w, j),
                    };
                    set(&mut r, w, j, x);
                }
                o.v[d] = r;
            }
            let fill = |x: u64, w: usize| {
                let mut r = [0u8; 64];
                for j in 0..64 / w {
                    set(&mut r, w, j, x);
                }
                r
            };
            masked(
                &mut o.v[9],
                &fill(i.gpr[0] & 0xffff_ffff, 4),
                64,
                4,
                Some(k[3]),
                false,
            );
            masked(
                &mut o.v[10],
                &fill(v[11][0] as u64, 1),
                64,
                1,
                Some(k[4]),
                true,
            );
            masked(
                &mut o.v[12],
                &fill(el(&i.mem[m..], 8, 0), 8),
                64,
                8,
                None,
                false,
            );
            let mut r = [0u8; 64];
            for j in 0..64 {
                r[j] = i.mem[m + 16 + j % 16];
            }
            masked(&mut o.v[13], &r, 64, 4, Some(k[5]), false);
            for j in 0..64 {
                r[j] = i.mem[m + 32 + j % 32];
            }
            masked(&mut o.v[14], &r, 64, 8, Some(k[6]), true);
            masked(
                &mut o.v[15],
                &fill(el(&i.mem[m + 2..], 2, 0), 2),
                32,
                2,
                Some(k[7]),
                false,
            );
        },
    );
}

#[test]
fn inserts_and_extracts() {
    check(
        "inserts extracts",
        ALL,
        &rsi_mem,
        body!(|a| {
            a.vinserti32x4(zmm0.k1(), zmm1, xmm2, 2)?;
            a.vinserti64x4(zmm3.k2().z(), zmm4, ymmword_ptr(rsi), 1)?;
            a.vextracti32x4(xmm5.k3().z(), zmm6, 3)?;
            a.vextracti64x4(ymm7.k4(), zmm8, 1)?;
            a.vextracti32x4(xmmword_ptr(rsi + 64).k5(), zmm9, 1)?;
            a.vinserti64x2(ymm10, ymm11, xmm12, 1)?;
        }),
        &|i, o| {
            let m = mem_off(i.gpr[6]);
            let (v, k) = (&i.v, &i.k);
            let mut r = v[1];
            r[32..48].copy_from_slice(&v[2][..16]);
            masked(&mut o.v[0], &r, 64, 4, Some(k[1]), false);
            let mut r = v[4];
            r[32..64].copy_from_slice(&i.mem[m..m + 32]);
            masked(&mut o.v[3], &r, 64, 8, Some(k[2]), true);
            masked(&mut o.v[5], &v[6][48..64], 16, 4, Some(k[3]), true);
            masked(&mut o.v[7], &v[8][32..64], 32, 8, Some(k[4]), false);
            for j in 0..4 {
                if k[5] >> j & 1 == 1 {
                    set(&mut o.mem[m + 64..], 4, j, el(&v[9][16..], 4, j));
                }
            }
            let mut r = v[11];
            r[16..32].copy_from_slice(&v[12][..16]);
            masked(&mut o.v[10], &r, 32, 8, None, false);
        },
    );
}

#[test]
fn extensions_and_mask_vectors() {
    check(
        "extensions mask vectors",
        ALL,
        &rsi_mem,
        body!(|a| {
            a.vpmovzxbd(zmm0.k1().z(), xmm1)?;
            a.vpmovsxwq(zmm2.k2(), xmm3)?;
            a.vpmovzxbw(zmm4, ymmword_ptr(rsi))?;
            a.vpmovm2d(zmm5, k3)?;
            a.vpmovm2b(ymm6, k4)?;
            a.vpmovb2m(k5, zmm7)?;
            a.vpmovq2m(k6, zmm8)?;
            a.vpmovsxbd(xmm9.k7(), dword_ptr(rsi + 40))?;
        }),
        &|i, o| {
            let m = mem_off(i.gpr[6]);
            let (v, k) = (&i.v, &i.k);
            let ext = |src: &[u8], sw: usize, dw: usize, n: usize, signed: bool| {
                let mut r = [0u8; 64];
                for j in 0..n {
                    let x = el(src, sw, j);
                    set(&mut r, dw, j, if signed { sx(x, sw) as u64 } else { x });
                }
                r
            };
            masked(
                &mut o.v[0],
                &ext(&v[1], 1, 4, 16, false),
                64,
                4,
                Some(k[1]),
                true,
            );
            masked(
                &mut o.v[2],
                &ext(&v[3], 2, 8, 8, true),
                64,
                8,
                Some(k[2]),
                false,
            );
            masked(
                &mut o.v[4],
                &ext(&i.mem[m..], 1, 2, 32, false),
                64,
                2,
                None,
                false,
            );
            let mut r = [0u8; 64];
            for j in 0..16 {
                set(
                    &mut r,
                    4,
                    j,
                    if k[3] >> j & 1 == 1 { 0xffff_ffff } else { 0 },
                );
            }
            o.v[5] = r;
            let mut r = [0u8; 64];
            for (j, b) in r.iter_mut().enumerate().take(32) {
                *b = if k[4] >> j & 1 == 1 { 0xff } else { 0 };
            }
            o.v[6] = r;
            o.k[5] = kbits(64, None, |j| v[7][j] >= 0x80);
            o.k[6] = kbits(8, None, |j| v[8][8 * j + 7] >= 0x80);
            masked(
                &mut o.v[9],
                &ext(&i.mem[m + 40..], 1, 4, 4, true),
                16,
                4,
                Some(k[7]),
                false,
            );
        },
    );
}

#[test]
fn permutes_and_shuffles() {
    check(
        "permutes",
        ALL,
        &rsi_mem,
        body!(|a| {
            a.vpermd(zmm0.k1(), zmm1, zmm2)?;
            a.vpermq(zmm3, zmm4, 0x4e)?;
            a.vpermq(zmm5.k2().z(), zmm6, zmm7)?;
            a.vpshufb(zmm8.k3(), zmm9, zmm10)?;
            a.vpshufd(zmm11, zmm12, 0x1b)?;
            a.vpunpckldq(zmm13, zmm14, zmm15)?;
            a.vpunpckhbw(ymm16, ymm17, ymm18)?;
            a.vpermq(ymm19, ymm20, 0x93)?;
        }),
        &|i, o| {
            let (v, k) = (&i.v, &i.k);
            let mut r = [0u8; 64];
            for j in 0..16 {
                set(&mut r, 4, j, el(&v[2], 4, (el(&v[1], 4, j) & 15) as usize));
            }
            masked(&mut o.v[0], &r, 64, 4, Some(k[1]), false);
            // VPERMQ imm on zmm: each 256-bit half permuted by the same 2-bit selectors.
            for j in 0..8 {
                let s = (j / 4) * 4 + ((0x4e >> (2 * (j % 4))) & 3);
                set(&mut r, 8, j, el(&v[4], 8, s));
            }
            o.v[3] = r;
            for j in 0..8 {
                set(&mut r, 8, j, el(&v[7], 8, (el(&v[6], 8, j) & 7) as usize));
            }
            masked(&mut o.v[5], &r, 64, 8, Some(k[2]), true);
            for j in 0..64 {
                let c = v[10][j];
                r[j] = if c & 0x80 != 0 {
                    0
                } else {
                    v[9][(j / 16) * 16 + (c & 15) as usize]
                };
            }
            masked(&mut o.v[8], &r, 64, 1, Some(k[3]), false);
            for j in 0..16 {
                let s = (j / 4) * 4 + ((0x1b >> (2 * (j % 4))) & 3);
                set(&mut r, 4, j, el(&v[12], 4, s));
            }
            o.v[11] = r;
            // VPUNPCKLDQ: per 128-bit lane, a0 b0 a1 b1.
            for lane in 0..4 {
                for j in 0..2 {
                    set(&mut r, 4, lane * 4 + 2 * j, el(&v[14], 4, lane * 4 + j));
                    set(&mut r, 4, lane * 4 + 2 * j + 1, el(&v[15], 4, lane * 4 + j));
                }
            }
            o.v[13] = r;
            let mut r = [0u8; 64];
            for lane in 0..2 {
                for j in 0..8 {
                    r[lane * 16 + 2 * j] = v[17][lane * 16 + 8 + j];
                    r[lane * 16 + 2 * j + 1] = v[18][lane * 16 + 8 + j];
                }
            }
            o.v[16] = r;
            let mut r = [0u8; 64];
            for j in 0..4 {
                set(&mut r, 8, j, el(&v[20], 8, (0x93 >> (2 * j)) & 3));
            }
            o.v[19] = r;
        },
    );
}

#[test]
fn widths_zero_the_upper_bits() {
    check(
        "widths",
        ALL,
        &rsi_mem,
        body!(|a| {
            a.vpxord(xmm16, xmm17, xmm18)?;
            a.vpandq(ymm19.k1(), ymm20, ymm21)?;
            a.vpor(xmm1, xmm2, xmm3)?;
            a.vpand(ymm4, ymm5, ymm6)?;
            a.vpxord(zmm7.k2(), zmm8, dword_bcst(rsi))?;
            a.vmovd(xmm22, ecx)?;
            a.vmovq(rdx, xmm23)?;
            a.vpaddq(zmm9.k3().z(), zmm10, zmm11)?;
            a.vpsubb(xmm24, xmm25, xmm26)?;
        }),
        &|i, o| {
            let m = mem_off(i.gpr[6]);
            let (v, k) = (&i.v, &i.k);
            let op = |x: &[u8; 64], y: &[u8; 64], f: fn(u8, u8) -> u8| {
                let mut r = [0u8; 64];
                for j in 0..64 {
                    r[j] = f(x[j], y[j]);
                }
                r
            };
            masked(
                &mut o.v[16],
                &op(&v[17], &v[18], |a, b| a ^ b),
                16,
                4,
                None,
                false,
            );
            masked(
                &mut o.v[19],
                &op(&v[20], &v[21], |a, b| a & b),
                32,
                8,
                Some(k[1]),
                false,
            );
            masked(
                &mut o.v[1],
                &op(&v[2], &v[3], |a, b| a | b),
                16,
                4,
                None,
                false,
            );
            masked(
                &mut o.v[4],
                &op(&v[5], &v[6], |a, b| a & b),
                32,
                4,
                None,
                false,
            );
            let mut b = [0u8; 64];
            for j in 0..16 {
                b[4 * j..4 * j + 4].copy_from_slice(&i.mem[m..m + 4]);
            }
            masked(
                &mut o.v[7],
                &op(&v[8], &b, |a, b| a ^ b),
                64,
                4,
                Some(k[2]),
                false,
            );
            let mut r = [0u8; 64];
            r[..4].copy_from_slice(&i.gpr[1].to_le_bytes()[..4]);
            o.v[22] = r;
            o.gpr[2] = el(&v[23], 8, 0);
            let mut r = [0u8; 64];
            for j in 0..8 {
                set(
                    &mut r,
                    8,
                    j,
                    el(&v[10], 8, j).wrapping_add(el(&v[11], 8, j)),
                );
            }
            masked(&mut o.v[9], &r, 64, 8, Some(k[3]), true);
            let r = op(&v[25], &v[26], |a, b| a.wrapping_sub(b));
            masked(&mut o.v[24], &r, 16, 1, None, false);
        },
    );
}

#[test]
fn opmask_instructions() {
    check(
        "opmask",
        ALL,
        &rsi_mem,
        body!(|a| {
            a.kmovw(k1, eax)?;
            a.kmovd(ebx, k2)?;
            a.kshiftlw(k3, k4, 5)?;
            a.kshiftrq(k5, k6, 40)?;
            a.kandnb(k7, k1, k2)?;
            a.knotw(k0, k3)?;
            a.kunpckbw(k2, k4, k6)?;
            a.kaddd(k4, k5, k6)?;
            a.kxnorq(k6, k1, k7)?;
            a.kmovb(byte_ptr(rsi), k0)?;
            a.kmovq(k1, qword_ptr(rsi + 8))?;
            a.kshiftlb(k5, k5, 9)?;
        }),
        &|i, o| {
            let m = mem_off(i.gpr[6]);
            let k = &mut o.k;
            k[1] = i.gpr[0] & 0xffff;
            o.gpr[3] = k[2] & 0xffff_ffff;
            k[3] = (k[4] << 5) & 0xffff;
            k[5] = k[6] >> 40;
            k[7] = !k[1] & k[2] & 0xff;
            k[0] = !k[3] & 0xffff;
            k[2] = (k[4] & 0xff) << 8 | (k[6] & 0xff);
            k[4] = (k[5] & 0xffff_ffff).wrapping_add(k[6] & 0xffff_ffff) & 0xffff_ffff;
            k[6] = !(k[1] ^ k[7]);
            o.mem[m] = k[0] as u8;
            k[1] = u64::from_le_bytes(o.mem[m + 8..m + 16].try_into().unwrap());
            k[5] = 0;
        },
    );
    for (w, bits) in [("b", 8), ("w", 16), ("d", 32), ("q", 64)] {
        let all = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let setup = move |st: &mut State, rng: &mut Rng| {
            // Often all ones or disjoint, so that both flags get set.
            match rng.below(4) {
                0 => {
                    st.k[1] = all;
                    st.k[2] = rng.next();
                }
                1 => {
                    st.k[2] = !st.k[1];
                }
                _ => {}
            }
        };
        check(
            &format!("kortest{w}"),
            ALL,
            &setup,
            body!(|a| {
                match bits {
                    8 => a.kortestb(k1, k2)?,
                    16 => a.kortestw(k1, k2)?,
                    32 => a.kortestd(k1, k2)?,
                    _ => a.kortestq(k1, k2)?,
                }
            }),
            &|i, o| {
                let t = (i.k[1] | i.k[2]) & all;
                o.flags = if t == 0 { ZF } else { 0 } | if t == all { CF } else { 0 };
            },
        );
        check(
            &format!("ktest{w}"),
            ALL,
            &setup,
            body!(|a| {
                match bits {
                    8 => a.ktestb(k1, k2)?,
                    16 => a.ktestw(k1, k2)?,
                    32 => a.ktestd(k1, k2)?,
                    _ => a.ktestq(k1, k2)?,
                }
            }),
            &|i, o| {
                let (x, y) = (i.k[1] & all, i.k[2] & all);
                o.flags = if x & y == 0 { ZF } else { 0 } | if !x & y & all == 0 { CF } else { 0 };
            },
        );
    }
}

/// Assembles `body` as a plain function.
fn func(body: Body) -> Exec {
    Exec::new(&asm(body))
}

/// Calls `x` in the emulator with AVX-512.
fn run(x: &Exec, args: &[u64], regions: &[Region]) -> Result<EmuStats, EmuError> {
    // SAFETY: every region covers live buffers of the calling test, not otherwise used during
    // the call.
    unsafe { call(x.bytes(), 0, args, regions, &EmuConfig::default()) }
}

#[test]
fn masked_loads_suppress_faults_of_disabled_lanes() {
    // rdi: source, rsi: mask, rdx: 64-byte output.
    let x = func(body!(|a| {
        a.kmovq(k1, rsi)?;
        a.vmovdqu8(zmm0.k1().z(), zmmword_ptr(rdi))?;
        a.vmovdqu64(zmmword_ptr(rdx), zmm0)?;
        a.ret()?;
    }));
    let src: Vec<u8> = (0..128u8).collect();
    let region = Region::read_only(&src[..40]);
    let mut out = vec![0xaau8; 64];
    let base = src.as_ptr() as u64;
    // The first 40 bytes are inside the region: lanes 0..40 enabled succeed.
    let ok = [
        (base, (1u64 << 40) - 1),
        (base, 0x5555_5555),
        (base - 8, 0xff << 8),
    ];
    for (addr, k) in ok {
        let o = Region::writable(&mut out);
        let st = run(&x, &[addr, k, o.addr], &[region, o]).expect("lanes in bounds");
        assert_eq!(st.loads, 2, "the masked load and the return address");
        for j in 0..64 {
            let want = if k >> j & 1 == 1 {
                src[(addr - base) as usize + j]
            } else {
                0
            };
            assert_eq!(out[j], want, "byte {j} of mask {k:#x}");
        }
    }
    // No lane enabled: no access at all, wherever the address.
    let o = Region::writable(&mut out);
    let st = run(&x, &[0x10, 0, o.addr], &[region, o]).expect("all lanes disabled");
    assert_eq!(st.loads, 1, "only the return address");
    assert!(out.iter().all(|&b| b == 0));
    // One enabled lane outside: an out-of-bounds load naming that lane.
    for (addr, k, lane) in [
        (base, 1u64 << 40, 40),
        (base - 8, 0x80, 7),
        (base, u64::MAX, 0),
    ] {
        let o = Region::writable(&mut out);
        match run(&x, &[addr, k, o.addr], &[region, o]) {
            Err(EmuError::OutOfBounds {
                addr: a,
                write: false,
                insn,
                ..
            }) => {
                assert!(insn.contains("vmovdqu8"), "{insn}");
                if k != u64::MAX {
                    assert_eq!(a, addr + lane);
                }
            }
            r => panic!("mask {k:#x} at {addr:#x}: {r:?}"),
        }
    }
}

#[test]
fn masked_stores_leave_disabled_lanes_untouched() {
    // rdi: destination, rsi: mask.
    let x = func(body!(|a| {
        a.kmovw(k1, esi)?;
        a.mov(eax, 0x1122_3344)?;
        a.vpbroadcastd(zmm0, eax)?;
        a.vmovdqu32(zmmword_ptr(rdi).k1(), zmm0)?;
        a.ret()?;
    }));
    let mut buf = [0u32; 16];
    for k in [0x3ffu64, 0x2aa, 0x0, 0x200] {
        buf.iter_mut().for_each(|b| *b = 0xdead_beef);
        // Only the first 10 dwords are writable; the rest of `buf` is outside every region.
        let r = Region::writable(&mut buf[..10]);
        let st = run(&x, &[r.addr, k], &[r]).expect("masked store in bounds");
        assert_eq!(st.stores, (k != 0) as u64);
        for (j, &b) in buf.iter().enumerate() {
            let want = if k >> j & 1 == 1 {
                0x1122_3344
            } else {
                0xdead_beef
            };
            assert_eq!(b, want, "dword {j} of mask {k:#x}");
        }
    }
    buf.iter_mut().for_each(|b| *b = 0xdead_beef);
    let r = Region::writable(&mut buf[..10]);
    match run(&x, &[r.addr, 0x7ff], &[r]) {
        Err(EmuError::OutOfBounds {
            addr, write: true, ..
        }) => assert_eq!(addr, r.addr + 40),
        res => panic!("{res:?}"),
    }
    assert!(
        buf.iter().all(|&b| b == 0xdead_beef),
        "a faulting store writes nothing"
    );
}

#[test]
fn fault_suppression_of_other_instructions() {
    let src = [7u8; 10];
    let region = Region::read_only(&src);
    let base = src.as_ptr() as u64;
    // vpmovzxbd: one source byte per enabled dword lane.
    let x = func(body!(|a| {
        a.kmovw(k1, esi)?;
        a.vpmovzxbd(zmm0.k1().z(), xmmword_ptr(rdi))?;
        a.ret()?;
    }));
    assert!(run(&x, &[base, 0x3ff], &[region]).is_ok());
    assert!(matches!(
        run(&x, &[base, 0x7ff], &[region]),
        Err(EmuError::OutOfBounds { addr, .. }) if addr == base + 10
    ));
    // Broadcasts load nothing when no lane is enabled.
    let x = func(body!(|a| {
        a.kmovw(k1, esi)?;
        a.vpbroadcastd(zmm0.k1().z(), dword_ptr(rdi))?;
        a.vbroadcasti32x4(zmm1.k1(), xmmword_ptr(rdi))?;
        a.ret()?;
    }));
    assert!(run(&x, &[0x40, 0], &[region]).is_ok());
    assert!(run(&x, &[0x40, 1], &[region]).is_err());
    // Element-wise ops with a memory operand: only enabled lanes are read.
    let x = func(body!(|a| {
        a.kmovw(k1, esi)?;
        a.vpaddd(zmm0.k1(), zmm1, zmmword_ptr(rdi))?;
        a.vpcmpeqd(k2.k1(), zmm1, zmmword_ptr(rdi))?;
        a.vpternlogd(zmm2.k1().z(), zmm3, zmmword_ptr(rdi), 0x96)?;
        a.ret()?;
    }));
    assert!(run(&x, &[base - 4, 0b0110], &[region]).is_ok());
    assert!(run(&x, &[base - 4, 0b1110], &[region]).is_err());
    // Permutes read their whole table (no fault suppression), masked or not.
    let x = func(body!(|a| {
        a.kmovw(k1, esi)?;
        a.vpermd(zmm0.k1().z(), zmm1, zmmword_ptr(rdi))?;
        a.ret()?;
    }));
    assert!(matches!(
        run(&x, &[base, 1], &[region]),
        Err(EmuError::OutOfBounds { .. })
    ));
    // vpmaskmovd (AVX2): only lanes whose mask sign bit is set.
    let x = func(body!(|a| {
        a.vmovdqu(ymm1, ymmword_ptr(rsi))?;
        a.vpmaskmovd(ymm0, ymm1, ymmword_ptr(rdi))?;
        a.vpmaskmovd(ymmword_ptr(rdx), ymm1, ymm0)?;
        a.ret()?;
    }));
    let mut out = [0u32; 3];
    let mask: [u32; 8] = [!0, 0x8000_0000, 0, 0, 0, 0, 0, 0];
    let mr = Region::read_only(&mask);
    let or = Region::writable(&mut out[..2]);
    assert!(run(&x, &[base, mr.addr, or.addr], &[region, mr, or]).is_ok());
    assert_eq!(out, [0x0707_0707, 0x0707_0707, 0]);
    let mask: [u32; 8] = [!0, !0, !0, 0, 0, 0, 0, 0];
    let mr = Region::read_only(&mask);
    let or = Region::writable(&mut out[..2]);
    assert!(matches!(
        run(&x, &[base, mr.addr, or.addr], &[region, mr, or]),
        Err(EmuError::OutOfBounds { addr, .. }) if addr == base + 8
    ));
}

/// The SDM's table of the 32 `vcmpps` predicates, by their low four bits: whether each of
/// less, equal, greater and unordered makes the predicate true (bit 4 only decides signalling).
const FP_TABLE: [[bool; 4]; 16] = [
    [false, true, false, false],  // EQ_OQ
    [true, false, false, false],  // LT_OS
    [true, true, false, false],   // LE_OS
    [false, false, false, true],  // UNORD_Q
    [true, false, true, true],    // NEQ_UQ
    [false, true, true, true],    // NLT_US
    [false, false, true, true],   // NLE_US
    [true, true, true, false],    // ORD_Q
    [false, true, false, true],   // EQ_UQ
    [true, false, false, true],   // NGE_US
    [true, true, false, true],    // NGT_US
    [false, false, false, false], // FALSE_OQ
    [true, false, true, false],   // NEQ_OQ
    [false, true, true, false],   // GE_OS
    [false, false, true, false],  // GT_OS
    [true, true, true, true],     // TRUE_UQ
];

fn fp_model(a: u64, b: u64, w: usize, imm: u8) -> bool {
    let (x, y) = if w == 4 {
        (
            f32::from_bits(a as u32) as f64,
            f32::from_bits(b as u32) as f64,
        )
    } else {
        (f64::from_bits(a), f64::from_bits(b))
    };
    let outcome = if x.is_nan() || y.is_nan() {
        3
    } else if x < y {
        0
    } else if x == y {
        1
    } else {
        2
    };
    FP_TABLE[(imm & 15) as usize][outcome]
}

#[test]
fn float_compares_into_opmasks() {
    for imm in 0..32u8 {
        for (w, name) in [(4, "ps"), (8, "pd")] {
            check(
                &format!("vcmp{name} {imm}"),
                ALL,
                &super::hw::float_state(w),
                body!(|a| {
                    if w == 4 {
                        a.vcmpps(k1.k2(), zmm0, zmm1, imm as i32)?;
                        a.vcmpps(k3, ymm2, ymmword_ptr(rsi), imm as i32)?;
                        a.vcmpps(k4.k5(), xmm20, xmm21, imm as i32)?;
                        a.vcmpps(k6, zmm3, dword_bcst(rsi + 4), imm as i32)?;
                    } else {
                        a.vcmppd(k1.k2(), zmm0, zmm1, imm as i32)?;
                        a.vcmppd(k3, ymm2, ymmword_ptr(rsi), imm as i32)?;
                        a.vcmppd(k4.k5(), xmm20, xmm21, imm as i32)?;
                        a.vcmppd(k6, zmm3, qword_bcst(rsi + 8), imm as i32)?;
                    }
                }),
                &|i, o| {
                    let m = mem_off(i.gpr[6]);
                    let (v, k) = (&i.v, &i.k);
                    let f = |a, b| fp_model(a, b, w, imm);
                    o.k[1] = kbits(64 / w, Some(k[2]), |j| f(el(&v[0], w, j), el(&v[1], w, j)));
                    o.k[3] = kbits(32 / w, None, |j| f(el(&v[2], w, j), el(&i.mem[m..], w, j)));
                    o.k[4] = kbits(16 / w, Some(k[5]), |j| {
                        f(el(&v[20], w, j), el(&v[21], w, j))
                    });
                    let bc = el(&i.mem[m + w..], w, 0);
                    o.k[6] = kbits(64 / w, None, |j| f(el(&v[3], w, j), bc));
                },
            );
        }
    }
}

/// The classes of `vfpclass`, from the value's properties.
fn class_model(x: u64, w: usize, imm: u8) -> bool {
    let (nan, quiet, neg, inf, zero, sub) = if w == 4 {
        let f = f32::from_bits(x as u32);
        (
            f.is_nan(),
            x >> 22 & 1 == 1,
            f.is_sign_negative(),
            f.is_infinite(),
            f == 0.0,
            f.is_subnormal(),
        )
    } else {
        let f = f64::from_bits(x);
        (
            f.is_nan(),
            x >> 51 & 1 == 1,
            f.is_sign_negative(),
            f.is_infinite(),
            f == 0.0,
            f.is_subnormal(),
        )
    };
    let class = [
        nan && quiet,
        zero && !neg,
        zero && neg,
        inf && !neg,
        inf && neg,
        sub,
        neg && !nan && !inf && !zero,
        nan && !quiet,
    ];
    (0..8).any(|b| imm >> b & 1 == 1 && class[b])
}

#[test]
fn float_classes_into_opmasks() {
    for imm in [
        0x01u8, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x81, 0x18, 0x99, 0x66, 0xff,
    ] {
        for w in [4, 8] {
            check(
                &format!("vfpclass {w} {imm:#x}"),
                ALL,
                &super::hw::float_state(w),
                body!(|a| {
                    if w == 4 {
                        a.vfpclassps(k1.k2(), zmm0, imm as i32)?;
                        a.vfpclassps(k3, ymm1, imm as i32)?;
                        a.vfpclassps(k4, xmmword_ptr(rsi), imm as i32)?;
                    } else {
                        a.vfpclasspd(k1.k2(), zmm0, imm as i32)?;
                        a.vfpclasspd(k3, ymm1, imm as i32)?;
                        a.vfpclasspd(k4, xmmword_ptr(rsi), imm as i32)?;
                    }
                }),
                &|i, o| {
                    let m = mem_off(i.gpr[6]);
                    let (v, k) = (&i.v, &i.k);
                    o.k[1] = kbits(64 / w, Some(k[2]), |j| class_model(el(&v[0], w, j), w, imm));
                    o.k[3] = kbits(32 / w, None, |j| class_model(el(&v[1], w, j), w, imm));
                    o.k[4] = kbits(16 / w, None, |j| class_model(el(&i.mem[m..], w, j), w, imm));
                },
            );
        }
    }
}

/// An f16 value as f32 bits, computed from its value (NaNs: quiet, payload kept).
fn f16_model(h: u64) -> u64 {
    let (s, e, m) = (h >> 15 & 1, h >> 10 & 31, h & 1023);
    let sign = if s == 1 { -1.0f64 } else { 1.0 };
    if e == 31 && m != 0 {
        return s << 31 | 0x7fc0_0000 | m << 13;
    }
    if e == 31 {
        return ((sign * f64::INFINITY) as f32).to_bits() as u64;
    }
    let v = if e == 0 {
        m as f64 * 2f64.powi(-24)
    } else {
        (1024 + m) as f64 * 2f64.powi(e as i32 - 25)
    };
    ((sign * v) as f32).to_bits() as u64
}

/// An f32 value as f64 bits (NaNs: quiet, payload kept).
fn f32_model(x: u64) -> u64 {
    let f = f32::from_bits(x as u32);
    if f.is_nan() {
        (x >> 31) << 63 | 0x7ff8_0000_0000_0000 | (x & 0x7f_ffff) << 29
    } else {
        (f as f64).to_bits()
    }
}

#[test]
fn float_conversions_masked() {
    check(
        "vcvtph2ps",
        ALL,
        &super::hw::float_state(2),
        body!(|a| {
            a.vcvtph2ps(zmm0.k1().z(), ymm1)?;
            a.vcvtph2ps(ymm2.k2(), xmmword_ptr(rsi))?;
            a.vcvtph2ps(xmm20, xmm21)?;
        }),
        &|i, o| {
            let m = mem_off(i.gpr[6]);
            let (v, k) = (&i.v, &i.k);
            let conv = |src: &[u8], n: usize| {
                let mut r = [0u8; 64];
                for j in 0..n {
                    set(&mut r, 4, j, f16_model(el(src, 2, j)));
                }
                r
            };
            masked(&mut o.v[0], &conv(&v[1], 16), 64, 4, Some(k[1]), true);
            masked(
                &mut o.v[2],
                &conv(&i.mem[m..m + 16], 8),
                32,
                4,
                Some(k[2]),
                false,
            );
            masked(&mut o.v[20], &conv(&v[21], 4), 16, 4, None, false);
        },
    );
    check(
        "vcvtps2pd",
        ALL,
        &super::hw::float_state(4),
        body!(|a| {
            a.vcvtps2pd(zmm0.k1(), ymm1)?;
            a.vcvtps2pd(ymm2.k2().z(), xmmword_ptr(rsi))?;
            a.vcvtps2pd(xmm20, xmm21)?;
        }),
        &|i, o| {
            let m = mem_off(i.gpr[6]);
            let (v, k) = (&i.v, &i.k);
            let conv = |src: &[u8], n: usize| {
                let mut r = [0u8; 64];
                for j in 0..n {
                    set(&mut r, 8, j, f32_model(el(src, 4, j)));
                }
                r
            };
            masked(&mut o.v[0], &conv(&v[1], 8), 64, 8, Some(k[1]), false);
            masked(
                &mut o.v[2],
                &conv(&i.mem[m..m + 16], 4),
                32,
                8,
                Some(k[2]),
                true,
            );
            masked(&mut o.v[20], &conv(&v[21], 2), 16, 8, None, false);
        },
    );
}

#[test]
fn signed_saturating_packs() {
    check(
        "vpackss",
        ALL,
        &rsi_mem,
        body!(|a| {
            a.vpackssdw(zmm0.k1(), zmm1, zmm2)?;
            a.vpacksswb(ymm3, ymm4, ymmword_ptr(rsi))?;
            a.vpackssdw(xmm20.k2().z(), xmm21, xmm22)?;
        }),
        &|i, o| {
            let m = mem_off(i.gpr[6]);
            let (v, k) = (&i.v, &i.k);
            // Per 128-bit lane: a's elements saturated, then b's.
            let pack = |a: &[u8], b: &[u8], bytes: usize, from: usize| {
                let to = from / 2;
                let (lo, hi) = (-(1i64 << (8 * to - 1)), (1i64 << (8 * to - 1)) - 1);
                let per = 16 / from;
                let mut r = [0u8; 64];
                for lane in 0..bytes / 16 {
                    for j in 0..per {
                        for (h, src) in [a, b].iter().enumerate() {
                            let x = sx(el(src, from, lane * per + j), from).clamp(lo, hi);
                            set(
                                &mut r,
                                to,
                                lane * 2 * per + h * per + j,
                                x as u64 & ((1 << (8 * to)) - 1),
                            );
                        }
                    }
                }
                r
            };
            masked(
                &mut o.v[0],
                &pack(&v[1], &v[2], 64, 4),
                64,
                2,
                Some(k[1]),
                false,
            );
            masked(
                &mut o.v[3],
                &pack(&v[4], &i.mem[m..m + 32], 32, 2),
                32,
                1,
                None,
                false,
            );
            masked(
                &mut o.v[20],
                &pack(&v[21], &v[22], 16, 4),
                16,
                2,
                Some(k[2]),
                true,
            );
        },
    );
}

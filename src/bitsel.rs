//! A select whose condition is a bitmap, read straight into AVX-512 opmask registers: each
//! group of 64 rows loads its condition bits (and'ed with their validity) as one word, and
//! every vector of 8, 16, 32 or 64 rows (elements of 8, 4, 2 or 1 bytes) blends its two sides
//! under that word's bits. No byte mask is expanded and no block is planned: on 1M rows against
//! a scalar this took the call from the expanded blocks' time to the copy roofline's.
//!
//! Used for flat calls (the output and every full operand contiguous over the condition's
//! elements, the rest single elements) on hosts with AVX-512BW; other calls, and hosts without
//! it, expand the bits into byte masks for the kernels of every tier.

use crate::bits::Bitmap;

/// One side of a flat select.
#[derive(Clone, Copy)]
pub(crate) enum Side<'a> {
    /// One element per row.
    Full(&'a [u8]),
    /// One element for every row.
    One(&'a [u8]),
    /// The output itself (in place).
    Out,
}

/// Whether [`select_flat`] runs on this host (AVX-512BW).
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::bits::avx512bw();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `out[i] = bits[i] && valid[i] ? then[i] : else_[i]` for the `bits.len()` rows of `w`-byte
/// elements. Returns `false`, having written nothing, when the host lacks AVX-512BW, `w` is
/// not 1, 2, 4 or 8, or a buffer is shorter than the rows need (the engine's checks make
/// every buffer long enough; this one keeps the kernel sound on its own).
pub(crate) fn select_flat(
    w: usize,
    bits: Bitmap<'_>,
    valid: Option<Bitmap<'_>>,
    then: Side<'_>,
    else_: Side<'_>,
    out: &mut [u8],
) -> bool {
    let n = bits.len();
    let long_enough = |s: &Side<'_>| match s {
        Side::Full(b) => b.len() / w >= n,
        Side::One(b) => b.len() >= w,
        Side::Out => true,
    };
    if !matches!(w, 1 | 2 | 4 | 8)
        || valid.is_some_and(|v| v.len() != n)
        || out.len() / w < n
        || !long_enough(&then)
        || !long_enough(&else_)
    {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if available() {
        let o = out.as_mut_ptr();
        let src = |s: Side<'_>| match s {
            Side::Full(b) => Src::Rows(b.as_ptr()),
            Side::One(b) => Src::One(b.as_ptr()),
            Side::Out => Src::Rows(o.cast_const()),
        };
        let (t, e) = (src(then), src(else_));
        // SAFETY: the host has AVX-512BW (checked just above). Every `Rows` pointer covers
        // `n * w` readable bytes and `out` `n * w` writable ones, every `One` pointer `w` bytes
        // (checked at the top); the kernels touch rows `0..n` only (the last vector's loads
        // and stores are masked to the rows left). A side that is the output reads each vector
        // before the same vector is stored, through the pointer `out` gives.
        unsafe {
            match w {
                1 => select_w1(n, &bits, valid.as_ref(), t, e, o),
                2 => select_w2(n, &bits, valid.as_ref(), t, e, o),
                4 => select_w4(n, &bits, valid.as_ref(), t, e, o),
                _ => select_w8(n, &bits, valid.as_ref(), t, e, o),
            }
        }
        return true;
    }
    let _ = (then, else_, valid);
    false
}

/// A bitmap condition of an n-way select: its bits, their validity (a null is false), and
/// whether it is negated (after the validity: a negated null is true).
#[derive(Clone, Copy)]
pub(crate) struct NCond<'a> {
    pub bits: Bitmap<'a>,
    pub valid: Option<Bitmap<'a>>,
    pub not: bool,
}

impl NCond<'_> {
    #[inline]
    fn word(&self, g: usize) -> u64 {
        let w = self.bits.word(g) & self.valid.map_or(!0, |v| v.word(g));
        if self.not { !w } else { w }
    }
}

/// `out[i] = values[j][i]` for the first `j` whose condition holds on row `i`, else
/// `default[i]`, over the rows of the conditions (all of one length), `w`-byte elements.
/// Returns `false`, having written nothing, when [`select_flat`] would (no AVX-512BW, another
/// width, a buffer too short), when there is no condition or their lengths differ, or when
/// `values` and `conds` differ in number.
pub(crate) fn select_n_flat(
    w: usize,
    conds: &[NCond<'_>],
    values: &[Side<'_>],
    default: Side<'_>,
    out: &mut [u8],
) -> bool {
    let Some(n) = conds.first().map(|c| c.bits.len()) else {
        return false;
    };
    let long_enough = |s: &Side<'_>| match s {
        Side::Full(b) => b.len() / w >= n,
        Side::One(b) => b.len() >= w,
        Side::Out => true,
    };
    if !matches!(w, 1 | 2 | 4 | 8)
        || conds.len() != values.len()
        || conds
            .iter()
            .any(|c| c.bits.len() != n || c.valid.is_some_and(|v| v.len() != n))
        || out.len() / w < n
        || !values.iter().chain([&default]).all(long_enough)
    {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if available() {
        let o = out.as_mut_ptr();
        let src = |s: &Side<'_>| match *s {
            Side::Full(b) => Src::Rows(b.as_ptr()),
            Side::One(b) => Src::One(b.as_ptr()),
            Side::Out => Src::Rows(o.cast_const()),
        };
        let vals: smallvec::SmallVec<[Src; 8]> = values.iter().map(src).collect();
        let d = src(&default);
        // SAFETY: as in `select_flat`: the host has AVX-512BW, every `Rows` pointer and `out`
        // cover `n * w` bytes and every `One` pointer `w` (checked above), the kernels touch
        // rows `0..n` only, and a side that is the output is read before the same vector is
        // stored.
        unsafe {
            match w {
                1 => select_n_w1(n, conds, &vals, d, o),
                2 => select_n_w2(n, conds, &vals, d, o),
                4 => select_n_w4(n, conds, &vals, d, o),
                _ => select_n_w8(n, conds, &vals, d, o),
            }
        }
        return true;
    }
    false
}

/// A side as the kernels read it.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Src {
    Rows(*const u8),
    One(*const u8),
}

/// The kernel for `$w`-byte elements, `$lanes` to a vector: whole groups of 64 rows with
/// unmasked loads and stores and the side kinds fixed per loop (`$group`, one copy per
/// combination of a row side and a splat side), the last group's rows masked.
#[cfg(target_arch = "x86_64")]
macro_rules! kernel {
    ($name:ident, $group:ident, $w:expr, $lanes:expr, $mask:ty, $elem:ty, $blend:ident,
     $loadz:ident, $store:ident, $set1:ident) => {
        /// Rows `g..g + 64` (all inside the sides and `out`) under the condition word `k64`;
        /// a side is its pointer (`ROWS_T` / `ROWS_E`) or its splat vector.
        ///
        /// # Safety
        ///
        /// The host has AVX-512F and AVX-512BW; a row side's pointer and `out` cover rows
        /// `g..g + 64`.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw")]
        unsafe fn $group<const ROWS_T: bool, const ROWS_E: bool>(
            g: usize,
            k64: u64,
            t: (*const u8, std::arch::x86_64::__m512i),
            e: (*const u8, std::arch::x86_64::__m512i),
            out: *mut u8,
        ) {
            use std::arch::x86_64::*;
            for i in 0..64 / $lanes {
                let r = g + i * $lanes;
                // SAFETY: rows `r..r + $lanes` lie inside `g..g + 64` (the caller's contract).
                unsafe {
                    let tv = if ROWS_T {
                        _mm512_loadu_si512(t.0.add(r * $w).cast())
                    } else {
                        t.1
                    };
                    let ev = if ROWS_E {
                        _mm512_loadu_si512(e.0.add(r * $w).cast())
                    } else {
                        e.1
                    };
                    let k = (k64 >> (i * $lanes)) as $mask;
                    _mm512_storeu_si512(out.add(r * $w).cast(), $blend(k, ev, tv));
                }
            }
        }

        /// # Safety
        ///
        /// The host has AVX-512F and AVX-512BW; `Rows` sides and `out` cover `n` elements,
        /// `One` sides one.
        #[target_feature(enable = "avx512f,avx512bw")]
        unsafe fn $name(
            n: usize,
            bits: &Bitmap<'_>,
            valid: Option<&Bitmap<'_>>,
            t: Src,
            e: Src,
            out: *mut u8,
        ) {
            use std::arch::x86_64::*;
            let word = |g: usize| bits.word(g) & valid.map_or(!0, |v| v.word(g));
            let parts = |s: Src| match s {
                // SAFETY: a `One` side holds one element (the caller's contract).
                Src::One(p) => (p, $set1(unsafe { p.cast::<$elem>().read_unaligned() })),
                Src::Rows(p) => (p, _mm512_setzero_si512()),
            };
            let (tp, ep) = (parts(t), parts(e));
            let full = n / 64 * 64;
            macro_rules! groups {
                ($rt:expr, $re:expr) => {
                    for g in (0..full).step_by(64) {
                        // SAFETY: rows `g..g + 64` lie inside the `n` rows.
                        unsafe { $group::<$rt, $re>(g, word(g), tp, ep, out) };
                    }
                };
            }
            match (t, e) {
                (Src::Rows(_), Src::Rows(_)) => groups!(true, true),
                (Src::Rows(_), Src::One(_)) => groups!(true, false),
                (Src::One(_), Src::Rows(_)) => groups!(false, true),
                (Src::One(_), Src::One(_)) => groups!(false, false),
            }
            // The last rows, fewer than 64: loads and stores masked to them.
            let k64 = word(full);
            let mut r = full;
            while r < n {
                let left = n - r;
                let lm: $mask = if left >= $lanes {
                    !0
                } else {
                    ((1u64 << left) - 1) as $mask
                };
                let side = |s: Src, (_, splat): (*const u8, __m512i)| match s {
                    // SAFETY: rows masked by `lm` lie inside the side's `n` elements (`lm`
                    // has a bit only for rows below `n`).
                    Src::Rows(p) => unsafe { $loadz(lm, p.add(r * $w).cast()) },
                    Src::One(_) => splat,
                };
                let k = (k64 >> (r - full)) as $mask;
                let v = $blend(k, side(e, ep), side(t, tp));
                // SAFETY: as for the loads: rows masked by `lm` lie inside `out`.
                unsafe { $store(out.add(r * $w).cast(), lm, v) };
                r += $lanes;
            }
        }
    };
}

/// The n-way kernel for `$w`-byte elements, `$lanes` to a vector: per vector the default,
/// then each value from the last condition to the first blended in under its condition's bits
/// (the first true condition is blended last and wins).
#[cfg(target_arch = "x86_64")]
macro_rules! kernel_n {
    ($name:ident, $w:expr, $lanes:expr, $mask:ty, $elem:ty, $blend:ident, $loadz:ident,
     $store:ident, $set1:ident) => {
        /// # Safety
        ///
        /// The host has AVX-512F and AVX-512BW; `Rows` sides and `out` cover `n` elements,
        /// `One` sides one; every condition has `n` rows.
        #[target_feature(enable = "avx512f,avx512bw")]
        unsafe fn $name(n: usize, conds: &[NCond<'_>], vals: &[Src], def: Src, out: *mut u8) {
            use std::arch::x86_64::*;
            let splat = |s: &Src| match *s {
                // SAFETY: a `One` side holds one element (the caller's contract).
                Src::One(p) => $set1(unsafe { p.cast::<$elem>().read_unaligned() }),
                Src::Rows(_) => _mm512_setzero_si512(),
            };
            let splats: smallvec::SmallVec<[__m512i; 8]> = vals.iter().map(splat).collect();
            let dsplat = splat(&def);
            let mut words: smallvec::SmallVec<[u64; 8]> = smallvec::smallvec![0; conds.len()];
            let mut g = 0;
            while g < n {
                for (w, c) in words.iter_mut().zip(conds) {
                    *w = c.word(g);
                }
                let mut r = g;
                while r < (g + 64).min(n) {
                    let left = n - r;
                    let whole = left >= $lanes;
                    let lm: $mask = if whole {
                        !0
                    } else {
                        ((1u64 << left) - 1) as $mask
                    };
                    let load = |s: Src, sp: __m512i| match s {
                        // SAFETY: the vector's rows (all of them when `whole`, those masked by
                        // `lm` otherwise) lie inside the side's `n` elements.
                        Src::Rows(p) if whole => unsafe {
                            _mm512_loadu_si512(p.add(r * $w).cast())
                        },
                        // SAFETY: as above.
                        Src::Rows(p) => unsafe { $loadz(lm, p.add(r * $w).cast()) },
                        Src::One(_) => sp,
                    };
                    let mut v = load(def, dsplat);
                    for i in (0..conds.len()).rev() {
                        let k = (words[i] >> (r - g)) as $mask;
                        let mut x = load(vals[i], splats[i]);
                        // Left to itself LLVM folds this load and the blend into one
                        // merge-masked load, which made a 3-branch case_when of 1M f64 rows
                        // 2.7x slower on Zen 4 (1400 us against 517 us): the vector goes
                        // through a register first.
                        // SAFETY: an empty asm statement (a comment naming the register):
                        // it reads and writes nothing but `x`, which it leaves as it is.
                        unsafe {
                            std::arch::asm!(
                                "/* {0} */",
                                inout(zmm_reg) x,
                                options(pure, nomem, nostack, preserves_flags)
                            )
                        };
                        v = $blend(k, v, x);
                    }
                    if whole {
                        // SAFETY: as for the loads: the vector's rows lie inside `out`.
                        unsafe { _mm512_storeu_si512(out.add(r * $w).cast(), v) };
                    } else {
                        // SAFETY: as for the loads: rows masked by `lm` lie inside `out`.
                        unsafe { $store(out.add(r * $w).cast(), lm, v) };
                    }
                    r += $lanes;
                }
                g += 64;
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
kernel!(
    select_w1,
    group_w1,
    1,
    64,
    u64,
    i8,
    _mm512_mask_blend_epi8,
    _mm512_maskz_loadu_epi8,
    _mm512_mask_storeu_epi8,
    _mm512_set1_epi8
);
#[cfg(target_arch = "x86_64")]
kernel!(
    select_w2,
    group_w2,
    2,
    32,
    u32,
    i16,
    _mm512_mask_blend_epi16,
    _mm512_maskz_loadu_epi16,
    _mm512_mask_storeu_epi16,
    _mm512_set1_epi16
);
#[cfg(target_arch = "x86_64")]
kernel!(
    select_w4,
    group_w4,
    4,
    16,
    u16,
    i32,
    _mm512_mask_blend_epi32,
    _mm512_maskz_loadu_epi32,
    _mm512_mask_storeu_epi32,
    _mm512_set1_epi32
);
#[cfg(target_arch = "x86_64")]
kernel!(
    select_w8,
    group_w8,
    8,
    8,
    u8,
    i64,
    _mm512_mask_blend_epi64,
    _mm512_maskz_loadu_epi64,
    _mm512_mask_storeu_epi64,
    _mm512_set1_epi64
);

#[cfg(target_arch = "x86_64")]
kernel_n!(
    select_n_w1,
    1,
    64,
    u64,
    i8,
    _mm512_mask_blend_epi8,
    _mm512_maskz_loadu_epi8,
    _mm512_mask_storeu_epi8,
    _mm512_set1_epi8
);
#[cfg(target_arch = "x86_64")]
kernel_n!(
    select_n_w2,
    2,
    32,
    u32,
    i16,
    _mm512_mask_blend_epi16,
    _mm512_maskz_loadu_epi16,
    _mm512_mask_storeu_epi16,
    _mm512_set1_epi16
);
#[cfg(target_arch = "x86_64")]
kernel_n!(
    select_n_w4,
    4,
    16,
    u16,
    i32,
    _mm512_mask_blend_epi32,
    _mm512_maskz_loadu_epi32,
    _mm512_mask_storeu_epi32,
    _mm512_set1_epi32
);
#[cfg(target_arch = "x86_64")]
kernel_n!(
    select_n_w8,
    8,
    8,
    u8,
    i64,
    _mm512_mask_blend_epi64,
    _mm512_maskz_loadu_epi64,
    _mm512_mask_storeu_epi64,
    _mm512_set1_epi64
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every width, offset, length around the vectors and groups, side kind and validity,
    /// against the rows one at a time (the engine's tests check it against the interpreter).
    #[test]
    fn equals_the_rows_one_at_a_time() {
        let bytes: Vec<u8> = (0..64u32)
            .map(|i| (i.wrapping_mul(0x9e) ^ 0x5a) as u8)
            .collect();
        let vbytes: Vec<u8> = (0..64u32)
            .map(|i| (i.wrapping_mul(0x3b) | 0x11) as u8)
            .collect();
        for w in [1usize, 2, 4, 8] {
            for offset in [0usize, 3, 8, 13] {
                for n in [0usize, 1, 7, 15, 16, 17, 63, 64, 65, 130, 200] {
                    let bits = Bitmap::new(&bytes, offset, n).unwrap();
                    let vb = Bitmap::new(&vbytes, offset + 1, n).unwrap();
                    let t: Vec<u8> = (0..n * w).map(|i| i as u8 | 0x80).collect();
                    let e: Vec<u8> = (0..n * w).map(|i| (i as u8) & 0x7f).collect();
                    let one = [0xeeu8; 8];
                    for valid in [None, Some(vb)] {
                        for (ts, es) in [
                            (Side::Full(&t), Side::Full(&e)),
                            (Side::One(&one[..w]), Side::Full(&e)),
                            (Side::Full(&t), Side::One(&one[..w])),
                            (Side::Out, Side::Full(&e)),
                        ] {
                            let mut out: Vec<u8> = (0..n * w).map(|i| (i * 7) as u8).collect();
                            let before = out.clone();
                            if !select_flat(w, bits, valid, ts, es, &mut out) {
                                assert!(!available(), "declined on an AVX-512BW host");
                                continue;
                            }
                            for i in 0..n {
                                let c =
                                    bits.get(i).unwrap() && valid.is_none_or(|v| v.get(i).unwrap());
                                let side = if c { ts } else { es };
                                let want = match side {
                                    Side::Full(b) => &b[i * w..(i + 1) * w],
                                    Side::One(b) => &b[..w],
                                    Side::Out => &before[i * w..(i + 1) * w],
                                };
                                assert_eq!(&out[i * w..(i + 1) * w], want, "w {w} n {n} row {i}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// The n-way kernel: one to three conditions (offsets, validity, negation), values and
    /// default of every kind, lengths around the vectors and groups, against the rows one at a
    /// time: the first true condition's value, else the default.
    #[test]
    fn n_way_equals_the_rows_one_at_a_time() {
        let bytes: Vec<Vec<u8>> = (0..7u32)
            .map(|s| {
                (0..64u32)
                    .map(|i| (i.wrapping_mul(0x9e + s) ^ (0x5a + s)) as u8)
                    .collect()
            })
            .collect();
        let one = [0xeeu8; 8];
        for w in [1usize, 2, 4, 8] {
            for n in [1usize, 15, 16, 17, 64, 65, 200] {
                let vals: Vec<Vec<u8>> = (0..4)
                    .map(|s| {
                        (0..n * w)
                            .map(|i| (i as u8).wrapping_mul(3) ^ (s * 0x40))
                            .collect()
                    })
                    .collect();
                for k in 1..=3usize {
                    for variant in 0..4usize {
                        let conds: Vec<NCond<'_>> = (0..k)
                            .map(|i| NCond {
                                bits: Bitmap::new(&bytes[i], 3 * i + variant, n).unwrap(),
                                valid: ((variant + i) % 2 == 1)
                                    .then(|| Bitmap::new(&bytes[i + 3], i, n).unwrap()),
                                not: (variant + i) % 3 == 2,
                            })
                            .collect();
                        // Value kinds rotate with the variant: rows, one element, in place.
                        let values: Vec<Side<'_>> = (0..k)
                            .map(|i| match (variant + i) % 3 {
                                0 => Side::Full(&vals[i]),
                                1 => Side::One(&one[..w]),
                                _ => Side::Out,
                            })
                            .collect();
                        let default = if variant % 2 == 0 {
                            Side::Full(&vals[3])
                        } else {
                            Side::One(&one[..w])
                        };
                        let mut out: Vec<u8> = (0..n * w).map(|i| (i * 7) as u8).collect();
                        let before = out.clone();
                        if !select_n_flat(w, &conds, &values, default, &mut out) {
                            assert!(!available(), "declined on an AVX-512BW host");
                            continue;
                        }
                        for r in 0..n {
                            let holds = |c: &NCond<'_>| {
                                let v = c.bits.get(r).unwrap()
                                    && c.valid.is_none_or(|v| v.get(r).unwrap());
                                v != c.not
                            };
                            let side = conds.iter().position(holds).map_or(default, |i| values[i]);
                            let want = match side {
                                Side::Full(b) => &b[r * w..(r + 1) * w],
                                Side::One(b) => &b[..w],
                                Side::Out => &before[r * w..(r + 1) * w],
                            };
                            assert_eq!(&out[r * w..(r + 1) * w], want, "w {w} n {n} k {k} row {r}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn short_buffers_are_declined() {
        let bits = Bitmap::new(&[0xff; 4], 0, 32).unwrap();
        let mut out = [0u8; 4 * 31];
        let t = [1u8; 4 * 32];
        assert!(!select_flat(
            4,
            bits,
            None,
            Side::Full(&t),
            Side::Full(&t),
            &mut out
        ));
        let mut out = [0u8; 4 * 32];
        assert!(!select_flat(
            4,
            bits,
            None,
            Side::Full(&t[..8]),
            Side::Full(&t),
            &mut out
        ));
        assert!(!select_flat(
            3,
            bits,
            None,
            Side::Full(&t),
            Side::Full(&t),
            &mut out
        ));
        assert_eq!(out, [0u8; 4 * 32], "nothing written");
    }
}

//! Selects whose condition is a bitmap, the bits read by the kernel itself: each group of 64
//! rows loads its condition bits (and'ed with their validity) as one word. With AVX-512BW the
//! word is the opmask under which every vector of 8, 16, 32 or 64 rows (elements of 8, 4, 2
//! or 1 bytes) blends its sides; with AVX2 each vector's lane masks are made from its bits in
//! registers (for 4- and 8-byte elements a broadcast and a variable shift of each lane's bit
//! into its sign bit, which `blendv_ps` / `blendv_pd` read; for 1 and 2 bytes a broadcast, an
//! `and` with each lane's bit and a compare) for 256-bit blends. Both
//! select two ways and n ways. No byte mask is expanded and no block is planned: on 1M i32 rows
//! against a scalar 74 µs (AVX-512) and 83 µs (AVX2) where the expanded blocks took 111 µs.
//!
//! Used for flat calls (the output and every full operand contiguous over the condition's
//! elements, the rest single elements); other calls, and the tiers whose kernels read byte
//! masks only (Cranelift), expand the bits into byte masks.

use crate::bits::{Bitmap, NullRule, Validity};

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

/// The output validity a two-way select writes in the same pass as its values (per group of
/// 64 rows, from the condition word it selects by): a row is valid when the side it takes is
/// valid (`then` and `else_`: each side's validity, a scalar's a constant) and, under
/// [`NullRule::NullPropagates`], its condition is valid. The rules of
/// [`crate::bits::select_validity`], whose output this matches bit for bit: `out` at bit offset
/// 0, the bits past the last row of its last byte 0.
pub(crate) struct ValidOut<'a, 'o> {
    pub then: Validity<'a>,
    pub else_: Validity<'a>,
    pub rule: NullRule,
    pub out: &'o mut [u8],
    /// Valid rows written so far (the kernel adds each group's).
    pub valid: usize,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl ValidOut<'_, '_> {
    /// Whether it fits `n` rows: side bitmaps of `n` bits, `out` of `n` bits at least.
    fn fits(&self, n: usize) -> bool {
        let len_ok = |v: &Validity<'_>| !matches!(v, Validity::Bits(b) if b.len() != n);
        len_ok(&self.then) && len_ok(&self.else_) && self.out.len() >= n.div_ceil(8)
    }

    /// The validity of rows `g..min(g + 64, n)` under the condition word `k` (bits and'ed with
    /// their validity) and the condition's validity word `cv`, written and counted.
    #[inline(always)]
    fn put(&mut self, g: usize, k: u64, cv: u64, n: usize) {
        let mut v = (k & self.then.word(g)) | (!k & self.else_.word(g));
        if self.rule == NullRule::NullPropagates {
            v &= cv;
        }
        let rows = (n - g).min(64);
        if rows < 64 {
            v &= (1u64 << rows) - 1;
        }
        self.valid += v.count_ones() as usize;
        let at = g / 8;
        if rows == 64 {
            // A whole word (a copy of fixed size: no call per group).
            self.out[at..at + 8].copy_from_slice(&v.to_le_bytes());
        } else {
            let bytes = rows.div_ceil(8);
            self.out[at..at + bytes].copy_from_slice(&v.to_le_bytes()[..bytes]);
        }
    }
}

/// The condition word of rows `g..` of `n` (its bits and'ed with their validity), the
/// output's validity of those rows written first when `vo` asks for it. Inlined into each
/// kernel (as a closure it was not, once it wrote the validity: a call per group of 64 rows,
/// twice the time of a 1M-row i32 select against a scalar), where POPCNT counts the bits.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
fn cond_word(
    bits: &Bitmap<'_>,
    valid: Option<&Bitmap<'_>>,
    vo: Option<&mut ValidOut<'_, '_>>,
    g: usize,
    n: usize,
) -> u64 {
    let cv = valid.map_or(!0, |v| v.word(g));
    let k = bits.word(g) & cv;
    if let Some(vo) = vo {
        vo.put(g, k, cv, n);
    }
    k
}

/// The instruction set a kernel here is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512BW: the bits as opmasks, 512-bit blends.
    Avx512,
    /// AVX2: each vector's bits spread into lanes in registers ([`group_mask_avx2`]), 256-bit
    /// blends.
    Avx2,
}

impl Isa {
    /// Whether this host runs it, under the cap of `SELECTJIT_MAX_ISA` (as every other
    /// kernel of the library).
    pub(crate) fn available(self) -> bool {
        use crate::env::{IsaCap, isa_cap};
        let cpu = crate::bits::cpu();
        match self {
            Isa::Avx512 => cpu.avx512bw() && cpu.popcnt && isa_cap() == IsaCap::All,
            Isa::Avx2 => cpu.avx2 && cpu.popcnt && isa_cap() >= IsaCap::Avx2,
        }
    }
}

/// `out[i] = bits[i] && valid[i] ? then[i] : else_[i]` for the `bits.len()` rows of `w`-byte
/// elements, by the kernel for `isa`, and with `vout` the output's validity in the same pass
/// ([`ValidOut`]). Returns `false`, having written nothing, when the host lacks `isa`, `w` is
/// not 1, 2, 4 or 8, or a buffer (or a bitmap of `vout`) does not fit the rows (the callers'
/// checks make every one fit; this one keeps the kernel sound on its own).
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
pub(crate) fn select_flat(
    isa: Isa,
    w: usize,
    bits: Bitmap<'_>,
    valid: Option<Bitmap<'_>>,
    then: Side<'_>,
    else_: Side<'_>,
    out: &mut [u8],
    mut vout: Option<&mut ValidOut<'_, '_>>,
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
        || vout.as_ref().is_some_and(|v| !v.fits(n))
    {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.available() {
        let o = out.as_mut_ptr();
        let src = |s: Side<'_>| match s {
            Side::Full(b) => Src::Rows(b.as_ptr()),
            Side::One(b) => Src::One(b.as_ptr()),
            Side::Out => Src::Rows(o.cast_const()),
        };
        let (t, e) = (src(then), src(else_));
        let (b, v, vo) = (&bits, valid.as_ref(), vout.as_deref_mut());
        // SAFETY: the host has `isa` (checked just above). Every `Rows` pointer covers `n * w`
        // readable bytes and `out` `n * w` writable ones, every `One` pointer `w` bytes
        // (checked at the top); the kernels touch rows `0..n` only (the last rows' loads and
        // stores are masked to them, or made one row at a time). A side that is the output
        // reads each vector (or row) before the same one is stored, through the pointer `out`
        // gives.
        unsafe {
            match (isa, w) {
                (Isa::Avx512, 1) => select_w1(n, b, v, t, e, o, vo),
                (Isa::Avx512, 2) => select_w2(n, b, v, t, e, o, vo),
                (Isa::Avx512, 4) => select_w4(n, b, v, t, e, o, vo),
                (Isa::Avx512, _) => select_w8(n, b, v, t, e, o, vo),
                (Isa::Avx2, 1) => select_avx2::<1>(n, b, v, t, e, o, vo),
                (Isa::Avx2, 2) => select_avx2::<2>(n, b, v, t, e, o, vo),
                (Isa::Avx2, 4) => select_avx2::<4>(n, b, v, t, e, o, vo),
                (Isa::Avx2, _) => select_avx2::<8>(n, b, v, t, e, o, vo),
            }
        }
        return true;
    }
    let _ = (isa, then, else_, valid, vout);
    false
}

/// A bitmap condition of an n-way select: its bits, their validity (a null is false), and
/// whether it is negated (after the validity: a negated null is true).
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct NCond<'a> {
    pub bits: Bitmap<'a>,
    pub valid: Option<Bitmap<'a>>,
    pub not: bool,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl NCond<'_> {
    #[inline]
    fn word(&self, g: usize) -> u64 {
        let w = self.bits.word(g) & self.valid.map_or(!0, |v| v.word(g));
        if self.not { !w } else { w }
    }
}

/// `out[i] = values[j][i]` for the first `j` whose condition holds on row `i`, else
/// `default[i]`, over the rows of the conditions (all of one length), `w`-byte elements.
/// Returns `false`, having written nothing, when [`select_flat`] would (the host lacks `isa`, another
/// width, a buffer too short), when there is no condition or their lengths differ, or when
/// `values` and `conds` differ in number.
pub(crate) fn select_n_flat(
    isa: Isa,
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
    if isa.available() {
        let o = out.as_mut_ptr();
        let src = |s: &Side<'_>| match *s {
            Side::Full(b) => Src::Rows(b.as_ptr()),
            Side::One(b) => Src::One(b.as_ptr()),
            Side::Out => Src::Rows(o.cast_const()),
        };
        let vals: smallvec::SmallVec<[Src; 8]> = values.iter().map(src).collect();
        let d = src(&default);
        // SAFETY: as in `select_flat`: the host has `isa`, every `Rows` pointer and `out`
        // cover `n * w` bytes and every `One` pointer `w` (checked above), the kernels touch
        // rows `0..n` only, and a side that is the output is read before the same vector (or
        // row) is stored.
        unsafe {
            match (isa, w) {
                (Isa::Avx512, 1) => select_n_w1(n, conds, &vals, d, o),
                (Isa::Avx512, 2) => select_n_w2(n, conds, &vals, d, o),
                (Isa::Avx512, 4) => select_n_w4(n, conds, &vals, d, o),
                (Isa::Avx512, _) => select_n_w8(n, conds, &vals, d, o),
                (Isa::Avx2, 1) => select_n_avx2::<1>(n, conds, &vals, d, o),
                (Isa::Avx2, 2) => select_n_avx2::<2>(n, conds, &vals, d, o),
                (Isa::Avx2, 4) => select_n_avx2::<4>(n, conds, &vals, d, o),
                (Isa::Avx2, _) => select_n_avx2::<8>(n, conds, &vals, d, o),
            }
        }
        return true;
    }
    let _ = isa;
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
                    // A loaded side goes through a register (an empty asm statement naming
                    // it): left to itself LLVM folds the load into the blend, a masked load
                    // that skips the lines whose rows the mask leaves out, so the prefetchers
                    // lose the stream and the rows that are taken miss to memory. On 1M i32
                    // rows against a scalar at 1 % true (Zen 4) 300-550 us, 2-3.5x the rows
                    // taken in turn.
                    let (tv, ev) = (in_register(tv), in_register(ev));
                    let k = (k64 >> (i * $lanes)) as $mask;
                    _mm512_storeu_si512(out.add(r * $w).cast(), $blend(k, ev, tv));
                }
            }
        }

        /// With `vo`, the output's validity group by group as the values ([`ValidOut::put`]).
        ///
        /// # Safety
        ///
        /// The host has AVX-512F, AVX-512BW and POPCNT; `Rows` sides and `out` cover `n`
        /// elements, `One` sides one; `vo` fits `n` rows ([`ValidOut::fits`]).
        #[target_feature(enable = "avx512f,avx512bw,popcnt")]
        unsafe fn $name(
            n: usize,
            bits: &Bitmap<'_>,
            valid: Option<&Bitmap<'_>>,
            t: Src,
            e: Src,
            out: *mut u8,
            mut vo: Option<&mut ValidOut<'_, '_>>,
        ) {
            use std::arch::x86_64::*;
            let mut word = |g: usize| cond_word(bits, valid, vo.as_deref_mut(), g, n);
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
            if full == n {
                return;
            }
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

/// `x`, through a register: an empty asm statement that LLVM cannot fold a load into (nor a
/// blend after it into a masked load).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn in_register(mut x: std::arch::x86_64::__m512i) -> std::arch::x86_64::__m512i {
    // SAFETY: an empty asm statement (a comment naming the register): it reads and writes
    // nothing but `x`, which it leaves as it is.
    unsafe {
        std::arch::asm!(
            "/* {0} */",
            inout(zmm_reg) x,
            options(pure, nomem, nostack, preserves_flags)
        )
    };
    x
}

/// The two-way and the n-way kernel of one width: their names, the width, lanes per vector,
/// the opmask type, the element type and the intrinsics for that element size.
#[cfg(target_arch = "x86_64")]
macro_rules! kernels {
    ($two:ident, $group:ident, $n:ident, $($rest:tt)*) => {
        kernel!($two, $group, $($rest)*);
        kernel_n!($n, $($rest)*);
    };
}

#[cfg(target_arch = "x86_64")]
kernels!(
    select_w1,
    group_w1,
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
kernels!(
    select_w2,
    group_w2,
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
kernels!(
    select_w4,
    group_w4,
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
kernels!(
    select_w8,
    group_w8,
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

/// A `One` side's element in every lane, for `W`-byte elements (zero for a `Rows` side).
///
/// # Safety
///
/// A `One` side's pointer holds one element.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn splat_avx2<const W: usize>(s: Src) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    match s {
        // SAFETY: a `One` side holds one element (the caller's contract).
        Src::One(p) => unsafe {
            match W {
                1 => _mm256_set1_epi8(p.cast::<i8>().read()),
                2 => _mm256_set1_epi16(p.cast::<i16>().read_unaligned()),
                4 => _mm256_set1_epi32(p.cast::<i32>().read_unaligned()),
                _ => _mm256_set1_epi64x(p.cast::<i64>().read_unaligned()),
            }
        },
        Src::Rows(_) => _mm256_setzero_si256(),
    }
}

/// The lane mask (all ones where the row's bit is set) of the `32 / W` rows whose bits are the
/// low bits of `x`: the bits broadcast (for bytes, each lane the byte holding its bit), each
/// lane's bit kept, compared with it.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
fn lane_mask_avx2<const W: usize>(x: u64) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let lane_bit = match W {
        1 => _mm256_setr_epi8(
            1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64,
            -128, 1, 2, 4, 8, 16, 32, 64, -128,
        ),
        2 => _mm256_setr_epi16(
            1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, -32768,
        ),
        4 => _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128),
        _ => _mm256_setr_epi64x(1, 2, 4, 8),
    };
    let b = match W {
        1 => {
            let byte_of_lane = _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                3, 3, 3, 3,
            );
            _mm256_shuffle_epi8(_mm256_set1_epi32(x as u32 as i32), byte_of_lane)
        }
        2 => _mm256_set1_epi16(x as u16 as i16),
        4 => _mm256_set1_epi32(x as u8 as i32),
        _ => _mm256_set1_epi64x((x & 0xf) as i64),
    };
    let b = _mm256_and_si256(b, lane_bit);
    match W {
        1 => _mm256_cmpeq_epi8(b, lane_bit),
        2 => _mm256_cmpeq_epi16(b, lane_bit),
        4 => _mm256_cmpeq_epi32(b, lane_bit),
        _ => _mm256_cmpeq_epi64(b, lane_bit),
    }
}

/// The lane mask of vector `i` of a group of 64 rows whose condition word is `k64`, for
/// [`blend_avx2`]: for 4- and 8-byte elements each lane's bit shifted into its sign bit (the bit
/// `blendv_ps` / `blendv_pd` read: a broadcast of the word and one variable shift, where the
/// compare form takes an `and` and a compare more), else [`lane_mask_avx2`]'s whole-lane masks.
/// `i` is a constant of an unrolled loop, so the broadcast and the shift counts are hoisted.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
fn group_mask_avx2<const W: usize>(k64: u64, i: usize) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    match W {
        4 => {
            let half = _mm256_set1_epi32((k64 >> (32 * (i / 4))) as u32 as i32);
            let s = 31 - 8 * (i % 4) as i32;
            _mm256_sllv_epi32(
                half,
                _mm256_setr_epi32(s, s - 1, s - 2, s - 3, s - 4, s - 5, s - 6, s - 7),
            )
        }
        8 => {
            let s = 63 - 4 * i as i64;
            _mm256_sllv_epi64(
                _mm256_set1_epi64x(k64 as i64),
                _mm256_setr_epi64x(s, s - 1, s - 2, s - 3),
            )
        }
        _ => lane_mask_avx2::<W>(k64 >> (i * (32 / W))),
    }
}

/// `t` where the mask `m` of [`group_mask_avx2`] selects, else `e`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
fn blend_avx2<const W: usize>(
    e: std::arch::x86_64::__m256i,
    t: std::arch::x86_64::__m256i,
    m: std::arch::x86_64::__m256i,
) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    match W {
        4 => _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(e),
            _mm256_castsi256_ps(t),
            _mm256_castsi256_ps(m),
        )),
        8 => _mm256_castpd_si256(_mm256_blendv_pd(
            _mm256_castsi256_pd(e),
            _mm256_castsi256_pd(t),
            _mm256_castsi256_pd(m),
        )),
        _ => _mm256_blendv_epi8(e, t, m),
    }
}

/// Row `r` of a side (a `Rows` side's row, a `One` side's element) copied into row `r` of
/// `out`.
///
/// # Safety
///
/// Row `r` lies inside the side's and `out`'s elements.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn copy_row<const W: usize>(s: Src, r: usize, out: *mut u8) {
    let src = match s {
        // SAFETY: row `r` lies inside the side's elements (the caller's contract).
        Src::Rows(p) => unsafe { p.add(r * W) },
        Src::One(p) => p,
    };
    // SAFETY: `W` bytes from `src` into row `r` of `out` (inside it: the caller's contract);
    // they may be the same bytes (a side that is the output), hence `copy`.
    unsafe { std::ptr::copy(src, out.add(r * W), W) };
}

/// Rows `g..g + 64` (all inside the sides and `out`) of `W`-byte elements under the condition
/// word `k64`, each vector's lane masks made from its bits; a side is its pointer (`ROWS_T` /
/// `ROWS_E`) or its splat vector.
///
/// # Safety
///
/// The host has AVX2; a row side's pointer and `out` cover rows `g..g + 64`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn group_avx2<const W: usize, const ROWS_T: bool, const ROWS_E: bool>(
    g: usize,
    k64: u64,
    t: (*const u8, std::arch::x86_64::__m256i),
    e: (*const u8, std::arch::x86_64::__m256i),
    out: *mut u8,
) {
    use std::arch::x86_64::*;
    let lanes = 32 / W;
    for i in 0..64 / lanes {
        let r = g + i * lanes;
        // SAFETY: rows `r..r + lanes` lie inside `g..g + 64` (the caller's contract).
        unsafe {
            let ev = if ROWS_E {
                _mm256_loadu_si256(e.0.add(r * W).cast())
            } else {
                e.1
            };
            let tv = if ROWS_T {
                _mm256_loadu_si256(t.0.add(r * W).cast())
            } else {
                t.1
            };
            let m = group_mask_avx2::<W>(k64, i);
            _mm256_storeu_si256(out.add(r * W).cast(), blend_avx2::<W>(ev, tv, m));
        }
    }
}

/// The AVX2 kernel for `W`-byte elements (`32 / W` to a vector): whole groups of 64 rows with
/// the side kinds fixed per loop ([`group_avx2`], one copy per combination of a row side and a
/// splat side), each vector's lane masks made from its bits in registers; the last rows (fewer
/// than 64) one at a time.
///
/// With `vo`, the output's validity group by group as the values ([`ValidOut::put`]).
///
/// # Safety
///
/// The host has AVX2 and POPCNT; `Rows` sides and `out` cover `n` elements, `One` sides one;
/// `vo` fits `n` rows ([`ValidOut::fits`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn select_avx2<const W: usize>(
    n: usize,
    bits: &Bitmap<'_>,
    valid: Option<&Bitmap<'_>>,
    t: Src,
    e: Src,
    out: *mut u8,
    mut vo: Option<&mut ValidOut<'_, '_>>,
) {
    // SAFETY: `One` sides hold one element (the caller's contract).
    let (ts, es) = unsafe { (splat_avx2::<W>(t), splat_avx2::<W>(e)) };
    let ptr = |s: Src| match s {
        Src::Rows(p) | Src::One(p) => p,
    };
    let (tp, ep) = ((ptr(t), ts), (ptr(e), es));
    let mut word = |g: usize| cond_word(bits, valid, vo.as_deref_mut(), g, n);
    let full = n / 64 * 64;
    macro_rules! groups {
        ($rt:expr, $re:expr) => {
            for g in (0..full).step_by(64) {
                // SAFETY: the host has AVX2 (this function's contract); rows `g..g + 64` lie
                // inside the `n` rows (`g + 64 <= full <= n`), which a `Rows` side (the only
                // kind `$rt` / `$re` mark as rows) and `out` cover.
                unsafe { group_avx2::<W, $rt, $re>(g, word(g), tp, ep, out) };
            }
        };
    }
    match (t, e) {
        (Src::Rows(_), Src::Rows(_)) => groups!(true, true),
        (Src::Rows(_), Src::One(_)) => groups!(true, false),
        (Src::One(_), Src::Rows(_)) => groups!(false, true),
        (Src::One(_), Src::One(_)) => groups!(false, false),
    }
    if full == n {
        return;
    }
    let k64 = word(full);
    for r in full..n {
        let side = if (k64 >> (r - full)) & 1 == 1 { t } else { e };
        // SAFETY: row `r < n` lies inside the side's and `out`'s elements.
        unsafe { copy_row::<W>(side, r, out) };
    }
}

/// The AVX2 n-way kernel for `W`-byte elements: per vector the default, then each value
/// blended in under its condition's lane masks from the last condition to the first; the last
/// rows (fewer than 64) one at a time.
///
/// # Safety
///
/// The host has AVX2; `Rows` sides and `out` cover `n` elements, `One` sides one; every
/// condition has `n` rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn select_n_avx2<const W: usize>(
    n: usize,
    conds: &[NCond<'_>],
    vals: &[Src],
    def: Src,
    out: *mut u8,
) {
    use std::arch::x86_64::*;
    let lanes = 32 / W;
    // SAFETY: `One` sides hold one element (the caller's contract).
    let splats: smallvec::SmallVec<[__m256i; 8]> = vals
        .iter()
        .map(|&s| unsafe { splat_avx2::<W>(s) })
        .collect();
    // SAFETY: as above.
    let dsplat = unsafe { splat_avx2::<W>(def) };
    let load = |s: Src, splat: __m256i, r: usize| match s {
        // SAFETY: rows `r..r + lanes` lie inside the side's `n` elements (whole groups only).
        Src::Rows(p) => unsafe { _mm256_loadu_si256(p.add(r * W).cast()) },
        Src::One(_) => splat,
    };
    let mut words: smallvec::SmallVec<[u64; 8]> = smallvec::smallvec![0; conds.len()];
    let full = n / 64 * 64;
    for g in (0..full).step_by(64) {
        for (w, c) in words.iter_mut().zip(conds) {
            *w = c.word(g);
        }
        for i in 0..64 / lanes {
            let r = g + i * lanes;
            let mut v = load(def, dsplat, r);
            for j in (0..conds.len()).rev() {
                let m = group_mask_avx2::<W>(words[j], i);
                v = blend_avx2::<W>(v, load(vals[j], splats[j], r), m);
            }
            // SAFETY: rows `r..r + lanes` lie inside `out` (whole groups only).
            unsafe { _mm256_storeu_si256(out.add(r * W).cast(), v) };
        }
    }
    for (w, c) in words.iter_mut().zip(conds) {
        *w = c.word(full);
    }
    for r in full..n {
        let j = words.iter().position(|w| (w >> (r - full)) & 1 == 1);
        let side = j.map_or(def, |j| vals[j]);
        // SAFETY: row `r < n` lies inside the side's and `out`'s elements.
        unsafe { copy_row::<W>(side, r, out) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row `r` of `w`-byte elements that `side` holds (`before`: the output before the call).
    fn row<'a>(side: Side<'a>, before: &'a [u8], r: usize, w: usize) -> &'a [u8] {
        match side {
            Side::Full(b) => &b[r * w..(r + 1) * w],
            Side::One(b) => &b[..w],
            Side::Out => &before[r * w..(r + 1) * w],
        }
    }

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
        for (isa, w) in [Isa::Avx512, Isa::Avx2]
            .into_iter()
            .flat_map(|isa| [1usize, 2, 4, 8].map(|w| (isa, w)))
        {
            for offset in [0usize, 3, 8, 13] {
                for n in [0usize, 1, 7, 15, 16, 17, 63, 64, 65, 130, 200] {
                    let bits = Bitmap::new(&bytes, offset, n).unwrap();
                    let vb = Bitmap::new(&vbytes, offset + 1, n).unwrap();
                    let t: Vec<u8> = (0..n * w).map(|i| i as u8 | 0x80).collect();
                    let e: Vec<u8> = (0..n * w).map(|i| (i as u8) & 0x7f).collect();
                    let (one, other) = ([0xeeu8; 8], [0x33u8; 8]);
                    for valid in [None, Some(vb)] {
                        // Every combination of a row side and a splat side (each has its own
                        // loop), and the output in place on either side.
                        for (ts, es) in [
                            (Side::Full(&t), Side::Full(&e)),
                            (Side::One(&one[..w]), Side::Full(&e)),
                            (Side::Full(&t), Side::One(&one[..w])),
                            (Side::One(&one[..w]), Side::One(&other[..w])),
                            (Side::Out, Side::Full(&e)),
                            (Side::Full(&t), Side::Out),
                        ] {
                            let mut out: Vec<u8> = (0..n * w).map(|i| (i * 7) as u8).collect();
                            let before = out.clone();
                            if !select_flat(isa, w, bits, valid, ts, es, &mut out, None) {
                                assert!(!isa.available(), "{isa:?} declined on its host");
                                continue;
                            }
                            for i in 0..n {
                                let c =
                                    bits.get(i).unwrap() && valid.is_none_or(|v| v.get(i).unwrap());
                                let side = if c { ts } else { es };
                                assert_eq!(
                                    &out[i * w..(i + 1) * w],
                                    row(side, &before, i, w),
                                    "{isa:?} w {w} n {n} row {i}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// The output's validity written in the same pass ([`ValidOut`]): every width, offset,
    /// length around the vectors and groups, side kind (rows, one element, in place), each
    /// side's validity (a bitmap at an offset of its own, all valid, all null), the
    /// condition's validity, both null rules, against `select_validity` (bytes and count)
    /// and the values against the call without it.
    #[test]
    fn validity_in_the_same_pass_equals_select_validity() {
        use crate::bits::select_validity;
        let bytes: Vec<u8> = (0..80u32)
            .map(|i| (i.wrapping_mul(0x9e) ^ 0x5a) as u8)
            .collect();
        let cvb: Vec<u8> = (0..80u32)
            .map(|i| (i.wrapping_mul(0x3b) | 0x11) as u8)
            .collect();
        let tvb: Vec<u8> = (0..80u32)
            .map(|i| (i.wrapping_mul(0x65) ^ 0xc3) as u8)
            .collect();
        let evb: Vec<u8> = (0..80u32)
            .map(|i| (i.wrapping_mul(0x2d) ^ 0x96) as u8)
            .collect();
        for (isa, w) in [Isa::Avx512, Isa::Avx2]
            .into_iter()
            .flat_map(|isa| [1usize, 2, 4, 8].map(|w| (isa, w)))
        {
            for offset in [0usize, 3, 8, 13] {
                for n in [1usize, 7, 15, 16, 17, 63, 64, 65, 127, 128, 130, 200, 513] {
                    let bits = Bitmap::new(&bytes, offset, n).unwrap();
                    let cv = Bitmap::new(&cvb, offset + 1, n).unwrap();
                    let tv = Bitmap::new(&tvb, 5, n).unwrap();
                    let ev = Bitmap::new(&evb, offset, n).unwrap();
                    let t: Vec<u8> = (0..n * w).map(|i| i as u8 | 0x80).collect();
                    let e: Vec<u8> = (0..n * w).map(|i| (i as u8) & 0x7f).collect();
                    let one = [0xeeu8; 8];
                    for (ts, es) in [
                        (Side::Full(&t), Side::Full(&e)),
                        (Side::One(&one[..w]), Side::Full(&e)),
                        (Side::Full(&t), Side::One(&one[..w])),
                        (Side::One(&one[..w]), Side::One(&one[..w])),
                        (Side::Out, Side::Full(&e)),
                        (Side::Full(&t), Side::Out),
                    ] {
                        for (tvv, evv) in [
                            (Validity::Bits(tv), Validity::AllValid),
                            (Validity::AllValid, Validity::Bits(ev)),
                            (Validity::Bits(tv), Validity::Bits(ev)),
                            (Validity::AllNull, Validity::Bits(ev)),
                            (Validity::Bits(tv), Validity::AllNull),
                            (Validity::AllValid, Validity::AllValid),
                        ] {
                            for valid in [None, Some(cv)] {
                                for rule in [NullRule::NullIsFalse, NullRule::NullPropagates] {
                                    let init: Vec<u8> = (0..n * w).map(|i| (i * 7) as u8).collect();
                                    let (mut plain, mut fused) = (init.clone(), init);
                                    // Bytes past the rows' own: 0xaa, to see they are kept
                                    // (the last byte's bits past the rows are 0).
                                    let mut vb = vec![0xaau8; n.div_ceil(8) + 2];
                                    let mut vo = ValidOut {
                                        then: tvv,
                                        else_: evv,
                                        rule,
                                        out: &mut vb,
                                        valid: 0,
                                    };
                                    if !select_flat(
                                        isa,
                                        w,
                                        bits,
                                        valid,
                                        ts,
                                        es,
                                        &mut fused,
                                        Some(&mut vo),
                                    ) {
                                        assert!(!isa.available(), "{isa:?} declined on its host");
                                        continue;
                                    }
                                    let nulls = n - vo.valid;
                                    assert!(select_flat(
                                        isa, w, bits, valid, ts, es, &mut plain, None
                                    ));
                                    assert_eq!(fused, plain, "{isa:?} w {w} n {n} values");
                                    let mut want = vec![0xaau8; n.div_ceil(8) + 2];
                                    let cvv = valid.map_or(Validity::AllValid, Validity::Bits);
                                    let want_nulls =
                                        select_validity(bits, cvv, tvv, evv, rule, &mut want)
                                            .unwrap();
                                    assert_eq!(
                                        (vb, nulls),
                                        (want, want_nulls),
                                        "{isa:?} w {w} offset {offset} n {n} {rule:?} {tvv:?} {evv:?}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// A validity output that does not fit the rows is declined, nothing written.
    #[test]
    fn validity_that_does_not_fit_is_declined() {
        let bits = Bitmap::new(&[0x5a; 8], 0, 64).unwrap();
        let t = [1u8; 4 * 64];
        let short = Bitmap::new(&[0xff; 8], 0, 63).unwrap();
        for isa in [Isa::Avx512, Isa::Avx2] {
            for (then, len) in [(Validity::AllValid, 7), (Validity::Bits(short), 8)] {
                let mut vb = vec![0u8; len];
                let mut vo = ValidOut {
                    then,
                    else_: Validity::AllValid,
                    rule: NullRule::NullIsFalse,
                    out: &mut vb,
                    valid: 0,
                };
                let mut out = [0u8; 4 * 64];
                let full = Side::Full(&t);
                assert!(!select_flat(
                    isa,
                    4,
                    bits,
                    None,
                    full,
                    full,
                    &mut out,
                    Some(&mut vo)
                ));
                assert_eq!(out, [0u8; 4 * 64], "nothing written");
                assert!(vb.iter().all(|&b| b == 0), "nothing written");
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
        for (isa, w) in [Isa::Avx512, Isa::Avx2]
            .into_iter()
            .flat_map(|isa| [1usize, 2, 4, 8].map(|w| (isa, w)))
        {
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
                        if !select_n_flat(isa, w, &conds, &values, default, &mut out) {
                            assert!(!isa.available(), "{isa:?} declined on its host");
                            continue;
                        }
                        for r in 0..n {
                            let holds = |c: &NCond<'_>| {
                                let v = c.bits.get(r).unwrap()
                                    && c.valid.is_none_or(|v| v.get(r).unwrap());
                                v != c.not
                            };
                            let side = conds.iter().position(holds).map_or(default, |i| values[i]);
                            assert_eq!(
                                &out[r * w..(r + 1) * w],
                                row(side, &before, r, w),
                                "{isa:?} w {w} n {n} k {k} row {r}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn short_buffers_are_declined() {
        let bits = Bitmap::new(&[0xff; 4], 0, 32).unwrap();
        let t = [1u8; 4 * 32];
        for isa in [Isa::Avx512, Isa::Avx2] {
            let full = Side::Full(&t);
            let mut out = [0u8; 4 * 31];
            assert!(!select_flat(isa, 4, bits, None, full, full, &mut out, None));
            let mut out = [0u8; 4 * 32];
            let short = Side::Full(&t[..8]);
            assert!(!select_flat(
                isa, 4, bits, None, short, full, &mut out, None
            ));
            assert!(!select_flat(isa, 3, bits, None, full, full, &mut out, None));
            assert_eq!(out, [0u8; 4 * 32], "nothing written");
        }
    }
}

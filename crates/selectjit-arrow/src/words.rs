//! The output validity of a two-way select, 64 rows per step: `selectjit::bits::select_validity`'s
//! result (a unit test holds them equal), faster: each bitmap is realigned 64 words at a time
//! into a small array (whole 8-byte loads and a shift, which vectorise), the words are combined
//! and counted over those arrays, and on x86-64 the loop is compiled a second time with POPCNT
//! and AVX2 for hosts that have them (the baseline target has no `popcnt`: `count_ones` is a
//! dozen instructions). On 1M rows at bit offset 3 this is several times the core's speed
//! (`timing::against_the_core`).

use selectjit::bits::{Bitmap, NullRule, Validity};

/// A bitmap's bytes and bit offset, or a constant word.
#[derive(Clone, Copy)]
enum Src<'a> {
    Bits { bytes: &'a [u8], offset: usize },
    Const(u64),
}

/// Words per step: the sources' realigned words stay in the first-level cache (2 KiB).
const STEP: usize = 64;

impl<'a> Src<'a> {
    fn of_bits(b: &Bitmap<'a>) -> Src<'a> {
        let (bytes, offset) = b.parts();
        Src::Bits { bytes, offset }
    }

    fn of(v: &Validity<'a>) -> Src<'a> {
        match v {
            Validity::AllValid => Src::Const(!0),
            Validity::AllNull => Src::Const(0),
            Validity::Bits(b) => Src::of_bits(b),
        }
    }

    /// Words `k0..k0 + out.len()` (bits `64 k0..`) into `out`; every one of them lies inside
    /// the bitmap (the caller's `k0 + out.len()` is at most `len / 64`).
    #[inline(always)]
    fn words(&self, k0: usize, out: &mut [u64]) {
        match *self {
            Src::Const(c) => out.fill(c),
            Src::Bits { bytes, offset } => {
                let n = out.len();
                let bit = offset + 64 * k0;
                let (at, shift) = (bit / 8, (bit % 8) as u32);
                if shift == 0 {
                    let b = &bytes[at..at + 8 * n];
                    for (o, c) in out.iter_mut().zip(b.chunks_exact(8)) {
                        *o = u64::from_le_bytes(c.try_into().expect("8 bytes"));
                    }
                } else if let Some(b) = bytes.get(at..at + 8 * n + 8) {
                    // n + 1 whole words: word i is the top of word i and the bottom of i + 1.
                    let mut lo = [0u64; STEP + 1];
                    for (o, c) in lo.iter_mut().zip(b.chunks_exact(8)) {
                        *o = u64::from_le_bytes(c.try_into().expect("8 bytes"));
                    }
                    for (i, o) in out.iter_mut().enumerate() {
                        *o = (lo[i] >> shift) | (lo[i + 1] << (64 - shift));
                    }
                } else {
                    // The last word's top bits are in byte `at + 8n`, inside the bitmap's
                    // bytes (they hold its bit `64 (k0 + n) - 1 + offset`, checked by
                    // `Bitmap::new`).
                    let b = &bytes[at..at + 8 * n + 1];
                    for (i, o) in out.iter_mut().enumerate() {
                        let lo = u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8"));
                        *o = (lo >> shift) | ((b[8 * i + 8] as u64) << (64 - shift));
                    }
                }
            }
        }
    }

    /// Bits `j..j + n` one at a time (the last word).
    fn slow(&self, j: usize, n: usize) -> u64 {
        match *self {
            Src::Const(c) => c & ((1u64 << n) - 1),
            Src::Bits { bytes, offset } => (0..n).fold(0u64, |w, k| {
                let b = offset + j + k;
                w | ((((bytes[b / 8] >> (b % 8)) & 1) as u64) << k)
            }),
        }
    }
}

/// The number of set bits of `b` (`BooleanBuffer::count_set_bits` without POPCNT takes a
/// dozen instructions a word).
pub(crate) fn count_ones(b: Bitmap<'_>) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") && std::arch::is_x86_feature_detected!("avx2")
    {
        // SAFETY: the host has POPCNT and AVX2 (checked just above).
        return unsafe { count_ones_avx2(b) };
    }
    count_ones_words(b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,avx2")]
fn count_ones_avx2(b: Bitmap<'_>) -> usize {
    count_ones_words(b)
}

#[inline(always)]
fn count_ones_words(b: Bitmap<'_>) -> usize {
    let (s, len) = (Src::of_bits(&b), b.len());
    let full = len / 64;
    let mut w = [0u64; STEP];
    let mut ones = 0usize;
    for k0 in (0..full).step_by(STEP) {
        let n = STEP.min(full - k0);
        s.words(k0, &mut w[..n]);
        ones += w[..n]
            .iter()
            .map(|x| x.count_ones() as usize)
            .sum::<usize>();
    }
    if len > 64 * full {
        ones += s.slow(64 * full, len - 64 * full).count_ones() as usize;
    }
    ones
}

#[inline(always)]
fn combine(c: u64, cv: u64, t: u64, e: u64, rule: NullRule) -> u64 {
    let c = c & cv;
    let v = (c & t) | (!c & e);
    match rule {
        NullRule::NullIsFalse => v,
        NullRule::NullPropagates => v & cv,
    }
}

/// `select_validity(cond, cond_valid, then, else_, rule, out)` for bitmaps of `cond.len()` bits
/// (the caller checked the lengths) into `out` of `cond.len().div_ceil(8)` bytes; returns the
/// number of nulls.
pub(crate) fn select_validity(
    cond: Bitmap<'_>,
    cond_valid: Validity<'_>,
    then: Validity<'_>,
    else_: Validity<'_>,
    rule: NullRule,
    out: &mut [u8],
) -> usize {
    let s = [
        Src::of_bits(&cond),
        Src::of(&cond_valid),
        Src::of(&then),
        Src::of(&else_),
    ];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") && std::arch::is_x86_feature_detected!("avx2")
    {
        // SAFETY: the host has POPCNT and AVX2 (checked just above).
        return unsafe { select_validity_avx2(cond.len(), s, rule, out) };
    }
    select_validity_words(cond.len(), s, rule, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,avx2")]
fn select_validity_avx2(len: usize, s: [Src<'_>; 4], rule: NullRule, out: &mut [u8]) -> usize {
    select_validity_words(len, s, rule, out)
}

#[inline(always)]
fn select_validity_words(len: usize, s: [Src<'_>; 4], rule: NullRule, out: &mut [u8]) -> usize {
    let full = len / 64;
    let (body, tail) = out[..len.div_ceil(8)].split_at_mut(8 * full);
    let mut w = [[0u64; STEP]; 4];
    let mut valid = 0usize;
    for (step, chunk) in body.chunks_mut(8 * STEP).enumerate() {
        let (k0, n) = (step * STEP, chunk.len() / 8);
        for (src, words) in s.iter().zip(w.iter_mut()) {
            src.words(k0, &mut words[..n]);
        }
        let [c, cv, t, e] = &w;
        for (i, o) in chunk.chunks_exact_mut(8).enumerate() {
            let v = combine(c[i], cv[i], t[i], e[i], rule);
            valid += v.count_ones() as usize;
            o.copy_from_slice(&v.to_le_bytes());
        }
    }
    if !tail.is_empty() {
        let (j, n) = (64 * full, len - 64 * full);
        let v = combine(
            s[0].slow(j, n),
            s[1].slow(j, n),
            s[2].slow(j, n),
            s[3].slow(j, n),
            rule,
        );
        valid += v.count_ones() as usize;
        let m = tail.len();
        tail.copy_from_slice(&v.to_le_bytes()[..m]);
    }
    len - valid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_the_cores_select_validity() {
        let mut s = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for round in 0..3000 {
            // Every tenth length spans several steps of `STEP` words.
            let len = (next() % if round % 10 == 0 { 20_000 } else { 700 }) as usize;
            let mut bytes = |len: usize| -> (Vec<u8>, usize) {
                let off = (next() % 64) as usize;
                let extra = (next() % 3) as usize;
                let b: Vec<u8> = (0..(off + len).div_ceil(8) + extra)
                    .map(|_| next() as u8)
                    .collect();
                (b, off)
            };
            let (c, co) = bytes(len);
            let (cv, cvo) = bytes(len);
            let (t, to) = bytes(len);
            let (e, eo) = bytes(len);
            fn bm(b: &[u8], o: usize, len: usize) -> Bitmap<'_> {
                Bitmap::new(b, o, len).expect("bitmap")
            }
            fn pick(x: u64, b: Bitmap<'_>) -> Validity<'_> {
                match x % 3 {
                    0 => Validity::AllValid,
                    1 => Validity::AllNull,
                    _ => Validity::Bits(b),
                }
            }
            let cvv = pick(next(), bm(&cv, cvo, len));
            let tv = pick(next(), bm(&t, to, len));
            let ev = pick(next(), bm(&e, eo, len));
            for rule in [NullRule::NullIsFalse, NullRule::NullPropagates] {
                let mut want = vec![0xa5u8; len.div_ceil(8)];
                let mut got = vec![0x5au8; len.div_ceil(8)];
                let wn =
                    selectjit::bits::select_validity(bm(&c, co, len), cvv, tv, ev, rule, &mut want)
                        .expect("core");
                let gn = select_validity(bm(&c, co, len), cvv, tv, ev, rule, &mut got);
                assert_eq!((got, gn), (want, wn), "len {len} {rule:?}");
            }
        }
    }
}

#[cfg(test)]
mod timing {
    use super::*;

    /// `cargo test --release -p selectjit-arrow words::timing -- --ignored --nocapture`: this
    /// loop against the core's `select_validity` on 1M rows, every bitmap at bit offset 3.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn against_the_core() {
        let len: usize = 1 << 20;
        let bytes: Vec<Vec<u8>> = (0..4u64)
            .map(|s| {
                (0..(len + 3).div_ceil(8) as u64)
                    .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ s) as u8)
                    .collect()
            })
            .collect();
        let bm = |i: usize| Bitmap::new(&bytes[i], 3, len).expect("bitmap");
        let mut out = vec![0u8; len.div_ceil(8)];
        let time = |f: &mut dyn FnMut() -> usize| {
            let mut t: Vec<f64> = (0..201)
                .map(|_| {
                    let s = std::time::Instant::now();
                    std::hint::black_box(f());
                    s.elapsed().as_nanos() as f64 / 1e3
                })
                .collect();
            t.sort_by(f64::total_cmp);
            t[100]
        };
        for rule in [NullRule::NullIsFalse, NullRule::NullPropagates] {
            let args = (
                bm(0),
                Validity::Bits(bm(1)),
                Validity::Bits(bm(2)),
                Validity::Bits(bm(3)),
            );
            // Both functions on all four bitmaps, then with one bitmap side and the rest
            // constant.
            let mut t = [0.0f64; 4];
            for (i, (cv, e)) in [(args.1, args.3), (Validity::AllValid, Validity::AllValid)]
                .into_iter()
                .enumerate()
            {
                t[2 * i] = time(&mut || select_validity(args.0, cv, args.2, e, rule, &mut out));
                t[2 * i + 1] = time(&mut || {
                    selectjit::bits::select_validity(args.0, cv, args.2, e, rule, &mut out)
                        .expect("core")
                });
            }
            let [ours, core, ours_scalar_else, scalar_else] = t;
            println!(
                "{rule:?}: words.rs {ours:.1} us, core {core:.1} us; one bitmap side: words.rs {ours_scalar_else:.1} us, core {scalar_else:.1} us"
            );
        }
    }
}

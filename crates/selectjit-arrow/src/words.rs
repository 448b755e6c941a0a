//! The output validity of a two-way select, 64 rows per step: `selectjit::bits::select_validity`'s
//! result (a unit test holds them equal), with each bitmap word read as one unaligned load
//! where the bytes allow. (`select_validity` assembles each word through a byte copy; on
//! 1M-row columns this loop is several times faster.)

use selectjit::bits::{Bitmap, NullRule, Validity};

/// A bitmap's bytes and bit offset, or a constant as the bits of a static buffer read with
/// step 0: every word is read the same way, without a branch on the kind.
#[derive(Clone, Copy)]
struct Src<'a> {
    bytes: &'a [u8],
    offset: usize,
    step: usize,
}

static ONES: [u8; 16] = [0xff; 16];
static ZEROS: [u8; 16] = [0; 16];

impl<'a> Src<'a> {
    fn of_bits(b: &Bitmap<'a>) -> Src<'a> {
        let (bytes, offset) = b.parts();
        Src {
            bytes,
            offset,
            step: 1,
        }
    }

    fn of(v: &Validity<'a>) -> Src<'a> {
        let konst = |bytes: &'a [u8]| Src {
            bytes,
            offset: 0,
            step: 0,
        };
        match v {
            Validity::AllValid => konst(&ONES),
            Validity::AllNull => konst(&ZEROS),
            Validity::Bits(b) => Src::of_bits(b),
        }
    }

    /// Bits `j..j + 64` as one unaligned load, `None` when the 9 bytes they may span run past
    /// the buffer.
    #[inline(always)]
    fn fast(&self, j: usize) -> Option<u64> {
        let i = self.offset + self.step * j;
        let (at, shift) = (i / 8, i % 8);
        let c = self.bytes.get(at..at + 9)?;
        let lo = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        Some(if shift == 0 {
            lo
        } else {
            (lo >> shift) | ((c[8] as u64) << (64 - shift))
        })
    }

    /// Bits `j..j + n` one at a time (the last bytes of a buffer).
    fn slow(&self, j: usize, n: usize) -> u64 {
        (0..n).fold(0u64, |w, k| {
            let b = self.offset + self.step * (j + k);
            w | ((((self.bytes[b / 8] >> (b % 8)) & 1) as u64) << k)
        })
    }
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
    let len = cond.len();
    let s = [
        Src::of_bits(&cond),
        Src::of(&cond_valid),
        Src::of(&then),
        Src::of(&else_),
    ];
    let slow = |j: usize, n: usize| {
        combine(
            s[0].slow(j, n),
            s[1].slow(j, n),
            s[2].slow(j, n),
            s[3].slow(j, n),
            rule,
        )
    };
    let full = len / 64;
    let (body, tail) = out[..len.div_ceil(8)].split_at_mut(8 * full);
    let mut valid = 0usize;
    for (k, chunk) in body.chunks_exact_mut(8).enumerate() {
        let j = 64 * k;
        let v = match (s[0].fast(j), s[1].fast(j), s[2].fast(j), s[3].fast(j)) {
            (Some(c), Some(cv), Some(t), Some(e)) => combine(c, cv, t, e, rule),
            _ => slow(j, 64),
        };
        valid += v.count_ones() as usize;
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    if !tail.is_empty() {
        let j = 64 * full;
        let v = slow(j, len - j);
        valid += v.count_ones() as usize;
        let n = tail.len();
        tail.copy_from_slice(&v.to_le_bytes()[..n]);
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
        for _ in 0..3000 {
            let len = (next() % 700) as usize;
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

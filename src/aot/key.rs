//! The stable byte keys of ahead-of-time kernels.
//!
//! An exported table maps each kernel's key to its function. Keys are plain bytes, the same on
//! every target (integers little-endian), so a table can be checked on any machine:
//!
//! * **exact kernel** ([`Signature`]), `2 + 40 * rank` bytes: `width` (u8: 1, 2, 4, 8 or 16),
//!   `rank` (u8: 1 to 64), then `rank` dims (u64 each, outermost first), then the strides in
//!   elements of cond, then, else and out (`rank` i64 each, in that operand order);
//!
//! Keys name mask kernels: predicate kernels are compiled at run time (or served by the
//! blocked path), never exported.
//!
//! * **shape-generic kernel** ([`Pattern`]), 38 bytes: `width` (u8), `rank` (u8), the inner-stride
//!   class of cond, then, else and out (u8 each: 0 for stride 0, 1 for stride 1, 2 for any other),
//!   then per operand in the same order the mask of outer dims whose stride is 0 (u64 each, bit
//!   `k` for dim `k`; only bits below `rank - 1`).

use crate::error::{Error, Result};
use crate::plan::{OPS, Pattern, RHS, Signature};
use crate::pred::Kind;
use crate::shape::{MAX_RANK, Strides};

/// Length of a pattern key.
pub const PATTERN_KEY_LEN: usize = 38;

/// Element widths a kernel may have.
const WIDTHS: [usize; 5] = [1, 2, 4, 8, 16];

/// The key of `sig`'s exact kernel (a mask kernel's: see the module docs).
pub fn signature_key(sig: &Signature) -> Vec<u8> {
    debug_assert!(sig.is_mask(), "keys name mask kernels");
    let r = sig.rank();
    let mut k = Vec::with_capacity(2 + 40 * r);
    k.push(sig.width as u8);
    k.push(r as u8);
    for &d in &sig.dims {
        k.extend_from_slice(&(d as u64).to_le_bytes());
    }
    for st in &sig.strides[..RHS] {
        for &s in st {
            k.extend_from_slice(&(s as i64).to_le_bytes());
        }
    }
    k
}

/// The key of the shape-generic kernel of `p`.
pub fn pattern_key(p: &Pattern) -> Vec<u8> {
    let mut k = Vec::with_capacity(PATTERN_KEY_LEN);
    k.push(p.width as u8);
    k.push(p.rank as u8);
    k.extend_from_slice(&p.inner[..RHS]);
    for &m in &p.outer_zero[..RHS] {
        k.extend_from_slice(&m.to_le_bytes());
    }
    k
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Invalid(format!("malformed kernel key: {}", msg.into()))
}

/// Width and rank, the first two bytes of every key.
fn head(key: &[u8]) -> Result<(usize, usize)> {
    let [w, r, ..] = *key else {
        return Err(bad(format!("{} bytes, fewer than 2", key.len())));
    };
    let (w, r) = (w as usize, r as usize);
    if !WIDTHS.contains(&w) {
        return Err(bad(format!("element width {w}")));
    }
    if r == 0 || r > MAX_RANK {
        return Err(bad(format!("rank {r}")));
    }
    Ok((w, r))
}

fn u64_at(key: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&key[at..at + 8]);
    u64::from_le_bytes(b)
}

/// The signature a key names. Rejects wrong lengths, widths and ranks, zero dims, and dims or
/// strides whose byte extent overflows.
pub fn parse_signature_key(key: &[u8]) -> Result<Signature> {
    let (w, r) = head(key)?;
    if key.len() != 2 + 40 * r {
        return Err(bad(format!(
            "exact key of rank {r} has {} bytes, expected {}",
            key.len(),
            2 + 40 * r
        )));
    }
    let mut dims = crate::shape::Dims::new();
    let mut numel: usize = 1;
    for k in 0..r {
        let d = usize::try_from(u64_at(key, 2 + 8 * k))
            .ok()
            .filter(|&d| d > 0)
            .ok_or_else(|| bad(format!("dim {k} is 0 or too large")))?;
        numel = numel
            .checked_mul(d)
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| bad("element count overflows"))?;
        dims.push(d);
    }
    let mut strides: [Strides; OPS] = Default::default();
    strides[RHS] = std::iter::repeat_n(0, r).collect();
    for (op, st) in strides.iter_mut().enumerate().take(RHS) {
        let elem = if op == crate::plan::COND { 1 } else { w as i64 };
        for k in 0..r {
            let s = u64_at(key, 2 + 8 * r + 8 * (op * r + k)) as i64;
            // The byte span of this dim must fit: |s| * (d - 1) * width.
            s.checked_abs()
                .and_then(|a| a.checked_mul(dims[k] as i64 - 1))
                .and_then(|a| a.checked_mul(elem))
                .filter(|&a| a <= isize::MAX as i64)
                .ok_or_else(|| bad(format!("stride {s} of operand {op} dim {k} overflows")))?;
            st.push(s as isize);
        }
    }
    Ok(Signature {
        width: w,
        cond: Kind::Mask,
        dims,
        strides,
    })
}

/// The pattern a key names. Rejects wrong lengths, widths, ranks and stride classes, and zero
/// masks with bits at or above `rank - 1`.
pub fn parse_pattern_key(key: &[u8]) -> Result<Pattern> {
    let (w, r) = head(key)?;
    if key.len() != PATTERN_KEY_LEN {
        return Err(bad(format!(
            "generic key has {} bytes, expected {PATTERN_KEY_LEN}",
            key.len()
        )));
    }
    let inner: [u8; OPS] = [key[2], key[3], key[4], key[5], 0];
    if let Some(c) = inner.iter().find(|&&c| c > 2) {
        return Err(bad(format!("inner-stride class {c}")));
    }
    let outer_zero: [u64; OPS] = std::array::from_fn(|op| {
        // The absent rhs has stride 0 everywhere, as `Pattern::of` records it.
        if op == RHS {
            (1u64 << (r - 1)) - 1
        } else {
            u64_at(key, 6 + 8 * op)
        }
    });
    // r <= 64 (checked by `head`), so the shift is in range.
    let allowed = (1u64 << (r - 1)) - 1;
    if let Some(m) = outer_zero.iter().find(|&&m| m & !allowed != 0) {
        return Err(bad(format!("zero-stride mask {m:#x} for rank {r}")));
    }
    Ok(Pattern {
        width: w,
        cond: Kind::Mask,
        rank: r,
        inner,
        outer_zero,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig() -> Signature {
        Signature::new(
            4,
            &[96, 16384],
            [&[0, 1], &[16384, 1], &[0, 0], &[16384, 1]],
        )
        .unwrap()
    }

    #[test]
    fn keys_round_trip_and_are_little_endian() {
        let s = sig();
        let k = signature_key(&s);
        assert_eq!(k.len(), 2 + 40 * 2);
        assert_eq!(&k[..4], &[4, 2, 96, 0]);
        assert_eq!(parse_signature_key(&k).unwrap(), s);
        let p = Pattern::of(&s);
        let pk = pattern_key(&p);
        assert_eq!(pk.len(), PATTERN_KEY_LEN);
        assert_eq!(&pk[..6], &[4, 2, 1, 1, 0, 1]);
        assert_eq!(parse_pattern_key(&pk).unwrap(), p);
        // Rank 64 with every outer stride 0.
        let p = Pattern::of_mask(16, 64, [0, 1, 2, 1], [(1 << 63) - 1, 0, 5, 0]);
        assert_eq!(parse_pattern_key(&pattern_key(&p)).unwrap(), p);
    }

    #[test]
    fn malformed_keys_are_errors() {
        let k = signature_key(&sig());
        assert!(parse_signature_key(&k[..k.len() - 1]).is_err());
        assert!(parse_signature_key(&[]).is_err());
        for (at, v) in [(0, 3u8), (0, 0), (1, 0), (1, 65), (1, 3), (2, 0)] {
            let mut b = k.clone();
            b[at] = v;
            if at == 2 {
                b[2..10].fill(0); // dim 0 of 0
            }
            assert!(parse_signature_key(&b).is_err(), "byte {at} = {v}");
        }
        // A stride whose byte span overflows.
        let mut b = k.clone();
        b[2 + 16 + 8..2 + 16 + 16].copy_from_slice(&i64::MAX.to_le_bytes());
        assert!(parse_signature_key(&b).is_err());
        let pk = pattern_key(&Pattern::of(&sig()));
        assert!(parse_pattern_key(&pk[..37]).is_err());
        let mut b = pk.clone();
        b[3] = 3;
        assert!(parse_pattern_key(&b).is_err());
        let mut b = pk.clone();
        b[6] = 2; // bit 1 of cond's mask: rank 2 has one outer dim only
        assert!(parse_pattern_key(&b).is_err());
        // An exact key is not a pattern key and the other way round.
        assert!(parse_pattern_key(&k).is_err());
        assert!(parse_signature_key(&pk).is_err());
    }
}

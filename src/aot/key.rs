//! The stable byte keys of ahead-of-time kernels.
//!
//! An exported table maps each kernel's key to its function. Keys are plain bytes, the same on
//! every target (integers little-endian), so a table can be checked on any machine:
//!
//! * **exact kernel** ([`Signature`]), `2 + 40 * rank` bytes: `width` (u8: 1, 2, 4, 8 or 16),
//!   `rank` (u8: 1 to 64), then `rank` dims (u64 each, outermost first), then the strides in
//!   elements of cond, then, else and out (`rank` i64 each, in that operand order);
//! * **shape-generic kernel** ([`Pattern`]), 38 bytes: `width` (u8), `rank` (u8), the inner-stride
//!   class of cond, then, else and out (u8 each: 0 for stride 0, 1 for stride 1, 2 for any other),
//!   then per operand in the same order the mask of outer dims whose stride is 0 (u64 each, bit
//!   `k` for dim `k`; only bits below `rank - 1`).
//!
//! Those are the keys of mask kernels (unchanged since version 2 of the table format). The
//! kernel of a **predicate** (a condition computed from `lhs`, in cond's place, and `rhs`) has
//! the key of its mask form followed by a suffix (format version 3), so that its length tells
//! the two apart (`2 + 40 * rank` and `4 + 48 * rank` are never equal):
//!
//! * exact, `4 + 48 * rank` bytes: the mask key (cond's strides being lhs's, in elements of the
//!   compared dtype), then the condition (two u8: its [code](cond_code) and the compared
//!   dtype's [code](dtype_code)), then rhs's strides (`rank` i64, all 0 for a test);
//! * generic, [`PRED_PATTERN_KEY_LEN`] bytes: the mask key, then the condition (two u8), rhs's
//!   inner-stride class (u8) and its mask of zero outer strides (u64).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::plan::{OPS, Pattern, RHS, Signature};
use crate::pred::{Canon, Kind, TestOp};
use crate::shape::{MAX_RANK, Strides};

/// Length of a pattern key.
pub const PATTERN_KEY_LEN: usize = 38;
/// Length of a predicate kernel's pattern key.
pub const PRED_PATTERN_KEY_LEN: usize = PATTERN_KEY_LEN + 2 + 1 + 8;

/// The code of a compared dtype in keys: 0 bool, 1 to 4 i8 to i64, 5 to 8 u8 to u64, 9 f16,
/// 10 bf16, 11 f32, 12 f64, 13 complex64, 14 complex128. Stable: tables exported by one
/// release are read by the next.
///
/// ```
/// use selectjit::DType;
/// use selectjit::aot::key::dtype_code;
/// assert_eq!(dtype_code(DType::Bool), 0);
/// assert_eq!(dtype_code(DType::F32), 11);
/// ```
pub fn dtype_code(d: DType) -> u8 {
    match d {
        DType::Bool => 0,
        DType::I8 => 1,
        DType::I16 => 2,
        DType::I32 => 3,
        DType::I64 => 4,
        DType::U8 => 5,
        DType::U16 => 6,
        DType::U32 => 7,
        DType::U64 => 8,
        DType::F16 => 9,
        DType::BF16 => 10,
        DType::F32 => 11,
        DType::F64 => 12,
        DType::Complex64 => 13,
        DType::Complex128 => 14,
    }
}

/// The dtype of a key's dtype code, if it is one.
fn dtype_of_code(code: u8) -> Option<DType> {
    DType::ALL.into_iter().find(|&d| dtype_code(d) == code)
}

/// The code of a predicate in keys: 1 `==`, 2 `<`, 3 `<=`, 4 `isnan`, 5 `isinf`, 6 `isfinite`
/// (0 is a mask, which has no suffix).
///
/// ```
/// use selectjit::aot::key::cond_code;
/// use selectjit::plan::{Canon, CondKind};
/// use selectjit::{DType, TestOp};
/// assert_eq!(cond_code(CondKind::Mask), 0);
/// assert_eq!(cond_code(CondKind::Cmp(Canon::Le, DType::I8)), 3);
/// assert_eq!(cond_code(CondKind::Test(TestOp::IsFinite, DType::F64)), 6);
/// ```
pub fn cond_code(k: Kind) -> u8 {
    match k {
        Kind::Mask => 0,
        Kind::Cmp(Canon::Eq, _) => 1,
        Kind::Cmp(Canon::Lt, _) => 2,
        Kind::Cmp(Canon::Le, _) => 3,
        Kind::Test(TestOp::IsNan, _) => 4,
        Kind::Test(TestOp::IsInf, _) => 5,
        Kind::Test(TestOp::IsFinite, _) => 6,
    }
}

/// The condition of a key's two condition bytes.
fn parse_cond(code: u8, dtype: u8) -> Result<Kind> {
    let d = dtype_of_code(dtype).ok_or_else(|| bad(format!("dtype code {dtype}")))?;
    Ok(match code {
        1 => Kind::Cmp(Canon::Eq, d),
        2 => Kind::Cmp(Canon::Lt, d),
        3 => Kind::Cmp(Canon::Le, d),
        4 => Kind::Test(TestOp::IsNan, d),
        5 => Kind::Test(TestOp::IsInf, d),
        6 => Kind::Test(TestOp::IsFinite, d),
        c => return Err(bad(format!("condition code {c}"))),
    })
}

/// Element widths a kernel may have.
const WIDTHS: [usize; 5] = [1, 2, 4, 8, 16];

/// The key of `sig`'s exact kernel (see the module docs).
///
/// ```
/// use selectjit::aot::key::{parse_signature_key, signature_key};
/// use selectjit::plan::plan;
/// let sig = plan(4, &[2, 3], [&[0, 1], &[3, 1], &[0, 0], &[3, 1]]).unwrap();
/// let key = signature_key(&sig);
/// assert_eq!(key.len(), 2 + 40 * 2); // a mask kernel of rank 2
/// assert_eq!(&key[..2], &[4, 2]); // width, rank
/// assert_eq!(parse_signature_key(&key)?, sig);
/// # Ok::<(), selectjit::Error>(())
/// ```
pub fn signature_key(sig: &Signature) -> Vec<u8> {
    let r = sig.rank();
    let mut k = Vec::with_capacity(4 + 48 * r);
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
    if let Some(d) = sig.cond.dtype() {
        k.extend_from_slice(&[cond_code(sig.cond), dtype_code(d)]);
        for &s in &sig.strides[RHS] {
            k.extend_from_slice(&(s as i64).to_le_bytes());
        }
    }
    k
}

/// The key of the shape-generic kernel of `p`.
///
/// ```
/// use selectjit::aot::key::{PATTERN_KEY_LEN, parse_pattern_key, pattern_key};
/// use selectjit::plan::{Pattern, plan_contiguous};
/// let p = Pattern::of(&plan_contiguous(8, 100).unwrap());
/// let key = pattern_key(&p);
/// assert_eq!(key.len(), PATTERN_KEY_LEN);
/// assert_eq!(parse_pattern_key(&key)?, p);
/// # Ok::<(), selectjit::Error>(())
/// ```
pub fn pattern_key(p: &Pattern) -> Vec<u8> {
    let mut k = Vec::with_capacity(PRED_PATTERN_KEY_LEN);
    k.push(p.width as u8);
    k.push(p.rank as u8);
    k.extend_from_slice(&p.inner[..RHS]);
    for &m in &p.outer_zero[..RHS] {
        k.extend_from_slice(&m.to_le_bytes());
    }
    if let Some(d) = p.cond.dtype() {
        k.extend_from_slice(&[cond_code(p.cond), dtype_code(d), p.inner[RHS]]);
        k.extend_from_slice(&p.outer_zero[RHS].to_le_bytes());
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
///
/// ```
/// use selectjit::aot::key::{parse_signature_key, signature_key};
/// use selectjit::plan::{Canon, CondKind, Signature};
/// let lt = CondKind::Cmp(Canon::Lt, selectjit::DType::F16);
/// let sig = Signature::with_cond(2, lt, &[64], [&[1], &[1], &[0], &[1], &[0]])?;
/// let key = signature_key(&sig);
/// assert_eq!(parse_signature_key(&key)?, sig);
/// assert!(parse_signature_key(&key[..key.len() - 1]).is_err()); // truncated
/// # Ok::<(), selectjit::Error>(())
/// ```
pub fn parse_signature_key(key: &[u8]) -> Result<Signature> {
    let (w, r) = head(key)?;
    let cond = if key.len() == 2 + 40 * r {
        Kind::Mask
    } else if key.len() == 4 + 48 * r {
        parse_cond(key[2 + 40 * r], key[3 + 40 * r])?
    } else {
        return Err(bad(format!(
            "exact key of rank {r} has {} bytes, expected {} (mask) or {} (predicate)",
            key.len(),
            2 + 40 * r,
            4 + 48 * r
        )));
    };
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
    for (op, st) in strides.iter_mut().enumerate() {
        let elem = if op == crate::plan::COND || op == RHS {
            cond.operand_width() as i64
        } else {
            w as i64
        };
        // rhs's strides follow the condition bytes; a mask has none (all 0).
        let at = |k: usize| {
            if op < RHS {
                Some(2 + 8 * r + 8 * (op * r + k))
            } else {
                (cond != Kind::Mask).then_some(4 + 40 * r + 8 * k)
            }
        };
        for k in 0..r {
            let s = at(k).map_or(0, |a| u64_at(key, a) as i64);
            if op == RHS && s != 0 && !cond.binary() {
                return Err(bad(format!("stride {s} of rhs for a {cond} test")));
            }
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
        cond,
        dims,
        strides,
    })
}

/// The pattern a key names. Rejects wrong lengths, widths, ranks and stride classes, and zero
/// masks with bits at or above `rank - 1`.
///
/// ```
/// use selectjit::aot::key::{parse_pattern_key, pattern_key};
/// use selectjit::plan::{Pattern, plan};
/// let sig = plan(1, &[5, 7], [&[0, 1], &[7, 1], &[0, 0], &[7, 1]]).unwrap();
/// let key = pattern_key(&Pattern::of(&sig));
/// assert_eq!(parse_pattern_key(&key)?, Pattern::of(&sig));
/// let mut bad = key.clone();
/// bad[0] = 3; // no 3-byte elements
/// assert!(parse_pattern_key(&bad).is_err());
/// # Ok::<(), selectjit::Error>(())
/// ```
pub fn parse_pattern_key(key: &[u8]) -> Result<Pattern> {
    let (w, r) = head(key)?;
    let (cond, rhs_inner, rhs_zero) = match key.len() {
        // The absent rhs has stride 0 everywhere, as `Pattern::of` records it.
        PATTERN_KEY_LEN => (Kind::Mask, 0, (1u64 << (r - 1)) - 1),
        PRED_PATTERN_KEY_LEN => {
            let at = PATTERN_KEY_LEN;
            let cond = parse_cond(key[at], key[at + 1])?;
            let (inner, zero) = (key[at + 2], u64_at(key, at + 3));
            if !cond.binary() && (inner != 0 || zero != (1u64 << (r - 1)) - 1) {
                return Err(bad(format!("rhs strides for a {cond} test")));
            }
            (cond, inner, zero)
        }
        n => {
            return Err(bad(format!(
                "generic key has {n} bytes, expected {PATTERN_KEY_LEN} (mask) or \
                 {PRED_PATTERN_KEY_LEN} (predicate)"
            )));
        }
    };
    let inner: [u8; OPS] = [key[2], key[3], key[4], key[5], rhs_inner];
    if let Some(c) = inner.iter().find(|&&c| c > 2) {
        return Err(bad(format!("inner-stride class {c}")));
    }
    let outer_zero: [u64; OPS] = std::array::from_fn(|op| {
        if op == RHS {
            rhs_zero
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
        cond,
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

    /// Predicate kernels' keys: the mask key and a suffix; every condition and dtype round
    /// trips, mask keys stay as they were, and bad suffixes are errors.
    #[test]
    fn predicate_keys() {
        let mut seen = std::collections::HashSet::new();
        let codes: Vec<u8> = DType::ALL.into_iter().map(dtype_code).collect();
        assert_eq!(
            codes,
            (0..15).collect::<Vec<u8>>(),
            "stable, distinct codes"
        );
        for d in DType::ALL {
            assert_eq!(dtype_of_code(dtype_code(d)), Some(d));
            let kinds = [
                Kind::Cmp(Canon::Eq, d),
                Kind::Cmp(Canon::Lt, d),
                Kind::Cmp(Canon::Le, d),
                Kind::Test(TestOp::IsNan, d),
                Kind::Test(TestOp::IsInf, d),
                Kind::Test(TestOp::IsFinite, d),
            ];
            for kind in kinds {
                let rhs: &[isize] = if kind.binary() { &[-16384, 1] } else { &[0, 0] };
                let s = Signature::with_cond(
                    8,
                    kind,
                    &[96, 16384],
                    [&[0, 1], &[16384, 1], &[0, 0], &[16384, 1], rhs],
                )
                .unwrap();
                let k = signature_key(&s);
                assert_eq!(k.len(), 4 + 48 * 2);
                assert_eq!(&k[..2 + 80], signature_key(&sig_w(8)).as_slice());
                assert_eq!(parse_signature_key(&k).unwrap(), s, "{kind}");
                let p = Pattern::of(&s);
                let pk = pattern_key(&p);
                assert_eq!(pk.len(), PRED_PATTERN_KEY_LEN);
                assert_eq!(parse_pattern_key(&pk).unwrap(), p, "{kind}");
                assert!(seen.insert(pk));
            }
        }
        assert_eq!(seen.len(), 15 * 6);
        let s = Signature::with_cond(
            4,
            Kind::Cmp(Canon::Lt, DType::U64),
            &[7],
            [&[1], &[1], &[1], &[1], &[0]],
        )
        .unwrap();
        let k = signature_key(&s);
        let pk = pattern_key(&Pattern::of(&s));
        for (at, v) in [(42, 0u8), (42, 7), (43, 15)] {
            let mut b = k.clone();
            b[at] = v;
            assert!(parse_signature_key(&b).is_err(), "byte {at} = {v}");
            let mut b = pk.clone();
            b[at - 42 + PATTERN_KEY_LEN] = v;
            assert!(parse_pattern_key(&b).is_err(), "pattern byte {at} = {v}");
        }
        // A test with rhs strides, a truncated suffix.
        let mut b = k.clone();
        b[42] = 4;
        b[44] = 1;
        assert!(parse_signature_key(&b).is_err());
        assert!(parse_signature_key(&k[..k.len() - 8]).is_err());
        let mut b = pk.clone();
        b[PATTERN_KEY_LEN] = 5;
        b[PATTERN_KEY_LEN + 2] = 1;
        assert!(parse_pattern_key(&b).is_err());
        let mut b = pk.clone();
        b[PATTERN_KEY_LEN + 2] = 3;
        assert!(parse_pattern_key(&b).is_err());
        assert!(parse_pattern_key(&pk[..PRED_PATTERN_KEY_LEN - 1]).is_err());
    }

    fn sig_w(w: usize) -> Signature {
        Signature::new(
            w,
            &[96, 16384],
            [&[0, 1], &[16384, 1], &[0, 0], &[16384, 1]],
        )
        .unwrap()
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

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
//!
//! A **single-pass n-way kernel** ([`NwayKernelSpec`], format version 4; its entries have a
//! kind of their own, so its key needs no length of its own) has a key of `5 + 4 * k` bytes,
//! every field one byte (so the same on every target):
//!
//! * the n-way key format, [`NWAY_KEY_FORMAT`] (1);
//! * `width` (1, 2, 4, 8 or 16), then flags (bit 0 non-temporal stores, bit 1 a kernel of rows;
//!   the other bits 0), then `k`, the branch count (1 to 255), then the default's form (0 a full
//!   array, 1 one element);
//! * per branch, in call order: its condition's [code](cond_code) (0 a mask) and compared
//!   dtype's [code](dtype_code) (0 for a mask), its flags (bit 0 the first operand is one
//!   element, bit 1 the second (a comparison's rhs) is, bit 2 the condition is negated; the
//!   other bits 0), and its value's form (0 or 1).

use super::nway::NwayKernelSpec;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernel::nway::{Form, NBranch, NCond, NwaySpec};
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

/// The first byte of every n-way key: the layout of the bytes after it.
pub const NWAY_KEY_FORMAT: u8 = 1;

/// The key of a single-pass n-way kernel (see the module docs).
///
/// ```
/// use selectjit::aot::key::{NWAY_KEY_FORMAT, nway_key, parse_nway_key};
/// use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
/// use selectjit::DType;
/// let x: &[usize] = &[100];
/// let mask = NwayBranch { cond: NwayCond::Mask(x), not: true, value: &[] };
/// let spec = NwayKernelSpec::for_call(DType::I16, x, &[mask], x)?;
/// let key = nway_key(&spec);
/// // Format, width 2, no flags, one branch, a full default; a mask (0, 0), negated, of a scalar.
/// assert_eq!(key, [NWAY_KEY_FORMAT, 2, 0, 1, 0, 0, 0, 0b100, 1]);
/// assert_eq!(parse_nway_key(&key)?, spec);
/// # Ok::<(), selectjit::Error>(())
/// ```
pub fn nway_key(spec: &NwayKernelSpec) -> Vec<u8> {
    let s = &spec.0;
    let splat = |f: Form| u8::from(f == Form::Splat);
    let mut k = Vec::with_capacity(5 + 4 * s.branches.len());
    k.extend_from_slice(&[
        NWAY_KEY_FORMAT,
        s.width as u8,
        u8::from(s.nt) | (u8::from(s.rows) << 1),
        // More branches than a key holds cannot be exported: `parse_nway_key` refuses 0.
        u8::try_from(s.branches.len()).unwrap_or(0),
        splat(s.default),
    ]);
    for b in &s.branches {
        let (code, dtype, forms) = match b.cond {
            NCond::Mask(f) => (0, 0, splat(f)),
            NCond::Cmp(op, d, l, r) => (
                cond_code(Kind::Cmp(op, d)),
                dtype_code(d),
                splat(l) | (splat(r) << 1),
            ),
            NCond::Test(op, d, f) => (cond_code(Kind::Test(op, d)), dtype_code(d), splat(f)),
        };
        k.extend_from_slice(&[code, dtype, forms | (u8::from(b.not) << 2), splat(b.value)]);
    }
    k
}

/// The n-way kernel a key names. Rejects other key formats, wrong lengths, widths, branch
/// counts, forms, condition and dtype codes, and flag bits that mean nothing.
///
/// ```
/// use selectjit::aot::key::{nway_key, parse_nway_key};
/// use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
/// use selectjit::{CmpOp, DType};
/// let x: &[usize] = &[8];
/// let lt = NwayBranch { cond: NwayCond::Cmp(CmpOp::Lt, DType::U8, x, x), not: false, value: x };
/// let key = nway_key(&NwayKernelSpec::for_call(DType::U8, x, &[lt, lt], &[])?);
/// assert_eq!(key.len(), 5 + 4 * 2);
/// assert!(parse_nway_key(&key[..key.len() - 1]).is_err()); // truncated
/// let mut bad = key.clone();
/// bad[5 + 4] = 9; // no condition code 9
/// assert!(parse_nway_key(&bad).is_err());
/// # Ok::<(), selectjit::Error>(())
/// ```
pub fn parse_nway_key(key: &[u8]) -> Result<NwayKernelSpec> {
    let [fmt, w, flags, k, dflt, ref rest @ ..] = *key else {
        return Err(bad(format!(
            "n-way key of {} bytes, fewer than 5",
            key.len()
        )));
    };
    if fmt != NWAY_KEY_FORMAT {
        return Err(bad(format!(
            "n-way key format {fmt} (this library reads format {NWAY_KEY_FORMAT})"
        )));
    }
    if !WIDTHS.contains(&(w as usize)) {
        return Err(bad(format!("element width {w}")));
    }
    if flags & !0b11 != 0 {
        return Err(bad(format!("n-way flags {flags:#x}")));
    }
    if k == 0 {
        return Err(bad("an n-way key without branches"));
    }
    if rest.len() != 4 * k as usize {
        return Err(bad(format!(
            "n-way key of {k} branches has {} bytes, expected {}",
            key.len(),
            5 + 4 * k as usize
        )));
    }
    let form = |b: u8, what: &str| match b {
        0 => Ok(Form::Full),
        1 => Ok(Form::Splat),
        _ => Err(bad(format!("form {b} of {what}"))),
    };
    let bit = |b: u8, i: u8| {
        if (b >> i) & 1 == 1 {
            Form::Splat
        } else {
            Form::Full
        }
    };
    let mut branches = smallvec::SmallVec::new();
    for (i, b) in rest.chunks_exact(4).enumerate() {
        let [code, dtype, f, value] = [b[0], b[1], b[2], b[3]];
        let (cond, used) = match code {
            0 if dtype == 0 => (NCond::Mask(bit(f, 0)), 0b1),
            0 => return Err(bad(format!("branch {i}: a mask with dtype code {dtype}"))),
            _ => match parse_cond(code, dtype).map_err(|e| bad(format!("branch {i}: {e}")))? {
                Kind::Cmp(op, d) => (NCond::Cmp(op, d, bit(f, 0), bit(f, 1)), 0b11),
                Kind::Test(op, d) => (NCond::Test(op, d, bit(f, 0)), 0b1),
                Kind::Mask => return Err(bad(format!("branch {i}: condition code {code}"))),
            },
        };
        if f & !(used | 0b100) != 0 {
            return Err(bad(format!("branch {i}: flags {f:#x}")));
        }
        branches.push(NBranch {
            cond,
            not: f & 0b100 != 0,
            value: form(value, &format!("branch {i}'s value"))?,
        });
    }
    Ok(NwayKernelSpec(NwaySpec {
        width: w as usize,
        nt: flags & 1 != 0,
        rows: flags & 2 != 0,
        branches,
        default: form(dflt, "the default")?,
        same: smallvec::SmallVec::new(),
    }))
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

    /// Every n-way spec shape round trips: each condition kind of every dtype, each form,
    /// negation, the store kinds, up to 255 branches; the key is the same bytes everywhere.
    #[test]
    fn nway_keys_round_trip() {
        use crate::kernel::nway::{Form, NBranch, NCond, NwaySpec};
        let forms = [Form::Full, Form::Splat];
        let mut conds = vec![NCond::Mask(Form::Full), NCond::Mask(Form::Splat)];
        for d in DType::ALL {
            for op in [Canon::Eq, Canon::Lt, Canon::Le] {
                for (l, r) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    conds.push(NCond::Cmp(op, d, forms[l], forms[r]));
                }
            }
            for t in TestOp::ALL {
                conds.push(NCond::Test(t, d, Form::Splat));
            }
        }
        let mut keys = std::collections::HashSet::new();
        for (i, &cond) in conds.iter().enumerate() {
            for w in WIDTHS {
                let spec = NwayKernelSpec(NwaySpec {
                    width: w,
                    nt: i % 2 == 0,
                    rows: i % 3 == 0,
                    branches: smallvec::smallvec![
                        NBranch {
                            cond,
                            not: i % 5 == 0,
                            value: forms[i % 2],
                        },
                        NBranch {
                            cond: conds[(i * 7) % conds.len()],
                            not: true,
                            value: Form::Full,
                        },
                    ],
                    default: forms[(i / 2) % 2],
                    same: smallvec::SmallVec::new(),
                });
                let k = nway_key(&spec);
                assert_eq!(k.len(), 5 + 4 * 2);
                assert_eq!(parse_nway_key(&k).unwrap(), spec, "{spec}");
                assert!(keys.insert(k), "{spec}: two specs, one key");
            }
        }
        // 255 branches, the most a key holds.
        let many = NwayKernelSpec(NwaySpec {
            width: 8,
            nt: false,
            rows: false,
            branches: (0..255)
                .map(|i| NBranch {
                    cond: conds[i % conds.len()],
                    not: false,
                    value: Form::Splat,
                })
                .collect(),
            default: Form::Full,
            same: smallvec::SmallVec::new(),
        });
        assert_eq!(parse_nway_key(&nway_key(&many)).unwrap(), many);
    }

    #[test]
    fn malformed_nway_keys_are_errors() {
        use super::super::nway::{NwayBranch, NwayCond};
        use crate::pred::CmpOp;
        let x: &[usize] = &[9];
        let b = [
            NwayBranch {
                cond: NwayCond::Cmp(CmpOp::Le, DType::F32, x, &[]),
                not: false,
                value: x,
            },
            NwayBranch {
                cond: NwayCond::Test(TestOp::IsInf, DType::F64, x),
                not: true,
                value: &[],
            },
            NwayBranch {
                cond: NwayCond::Mask(&[1]),
                not: false,
                value: x,
            },
        ];
        let spec = NwayKernelSpec::for_call(DType::I16, x, &b, &[]).unwrap();
        let k = nway_key(&spec);
        assert_eq!(
            k,
            [1, 2, 0, 3, 1, 3, 11, 0b10, 0, 5, 12, 0b100, 1, 0, 0, 1, 0],
            "a stable layout"
        );
        assert_eq!(parse_nway_key(&k).unwrap(), spec);
        let reject = |b: &[u8], needle: &str| {
            let e = parse_nway_key(b).unwrap_err().to_string();
            assert!(
                e.contains("malformed kernel key") && e.contains(needle),
                "{b:?}: {e}"
            );
        };
        reject(&[], "fewer than 5");
        reject(&k[..k.len() - 1], "expected 17");
        reject(&[&k[..], &[0]].concat(), "expected 17");
        for (at, v, needle) in [
            (0, 2, "format 2"),
            (1, 3, "width 3"),
            (2, 4, "flags"),
            (3, 0, "without branches"),
            (3, 2, "expected 13"),
            (4, 2, "form 2 of the default"),
            (5, 7, "condition code 7"),
            (6, 15, "dtype code 15"),
            (7, 0b1000, "flags"),
            (11, 0b10, "flags"),   // a test has no second operand
            (13, 0, "flags"),      // a mask's flags: the mask's form only
            (14, 0, "dtype code"), // a mask with a dtype code
            (16, 2, "form 2 of branch 2's value"),
        ] {
            let mut b = k.clone();
            b[at] = v;
            if at == 13 {
                b[15] = 0b10;
            }
            if at == 14 {
                b[14] = 3;
            }
            reject(&b, needle);
        }
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

//! Bit-packed data as Arrow lays it out: conditions one bit per element and validity bitmaps
//! (1 = valid, 0 = null), least significant bit first, at any bit offset.
//!
//! A bitmap is a condition of a select through [`crate::Cond::bitmap`] (the engine expands it a
//! block at a time into the byte masks its kernels read). The functions here compute what the
//! byte kernels do not: the output's validity under either null rule ([`select_validity`],
//! [`case_when_validity`]) and selects of bit-packed values (Arrow's booleans:
//! [`select_bits`]), 64 rows per step.
//!
//! ```
//! # fn main() -> selectjit::Result<()> {
//! use selectjit::bits::{Bitmap, NullRule, Validity, select_validity};
//! // cond = [1, 0, 1, 1] with row 3 null; then has row 0 null; else is all valid.
//! let cond = Bitmap::new(&[0b1101], 0, 4)?;
//! let cond_valid = Validity::Bits(Bitmap::new(&[0b0111], 0, 4)?);
//! let then = Validity::Bits(Bitmap::new(&[0b1110], 0, 4)?);
//! let mut out = [0u8; 1];
//! // arrow-rs `zip`: a null condition is false (row 3 takes else, valid).
//! let nulls = select_validity(cond, cond_valid, then, Validity::AllValid, NullRule::NullIsFalse, &mut out)?;
//! assert_eq!((out[0] & 0xf, nulls), (0b1110, 1));
//! // Arrow C++ `if_else`: a null condition gives null.
//! let nulls = select_validity(cond, cond_valid, then, Validity::AllValid, NullRule::NullPropagates, &mut out)?;
//! assert_eq!((out[0] & 0xf, nulls), (0b0110, 2));
//! # Ok(())
//! # }
//! ```

use crate::error::{Error, Result};

/// `len` bits of `bytes` from bit `offset` on: bit `j` is
/// `(bytes[(offset + j) / 8] >> ((offset + j) % 8)) & 1`. Checked when made: the bytes hold
/// every bit.
#[derive(Clone, Copy, Debug)]
pub struct Bitmap<'a> {
    bytes: &'a [u8],
    offset: usize,
    len: usize,
}

impl<'a> Bitmap<'a> {
    /// `len` bits of `bytes` from bit `offset`; an error ([`Error::Layout`]) when the bytes
    /// end before bit `offset + len`.
    ///
    /// ```
    /// use selectjit::bits::Bitmap;
    /// let b = Bitmap::new(&[0b1000_0001, 0b1], 7, 2).unwrap();
    /// assert_eq!((b.get(0), b.get(1)), (Some(true), Some(true)));
    /// assert!(Bitmap::new(&[0], 4, 5).is_err());
    /// ```
    pub fn new(bytes: &'a [u8], offset: usize, len: usize) -> Result<Bitmap<'a>> {
        let end = offset.checked_add(len).and_then(|e| e.checked_add(7));
        match end {
            Some(e) if e / 8 <= bytes.len() => Ok(Bitmap { bytes, offset, len }),
            _ => Err(Error::Layout {
                what: "bitmap",
                msg: format!(
                    "{len} bits from bit offset {offset} need {} bytes, the buffer has {}",
                    offset.saturating_add(len).saturating_add(7) / 8,
                    bytes.len()
                ),
            }),
        }
    }

    /// The number of bits.
    ///
    /// ```
    /// use selectjit::bits::Bitmap;
    /// assert_eq!(Bitmap::new(&[0; 2], 3, 10).unwrap().len(), 10);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bits.
    ///
    /// ```
    /// use selectjit::bits::Bitmap;
    /// assert!(Bitmap::new(&[], 0, 0).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes and the bit offset of bit 0 in them.
    ///
    /// ```
    /// use selectjit::bits::Bitmap;
    /// let bytes = [0xffu8; 2];
    /// assert_eq!(Bitmap::new(&bytes, 9, 4).unwrap().parts(), (&bytes[..], 9));
    /// ```
    pub fn parts(&self) -> (&'a [u8], usize) {
        (self.bytes, self.offset)
    }

    /// Bit `j`, `None` past the end.
    ///
    /// ```
    /// use selectjit::bits::Bitmap;
    /// let b = Bitmap::new(&[0b0100], 1, 3).unwrap(); // bits 1, 2, 3 of the byte
    /// assert_eq!([b.get(0), b.get(1), b.get(3)], [Some(false), Some(true), None]);
    /// ```
    pub fn get(&self, j: usize) -> Option<bool> {
        (j < self.len).then(|| {
            let i = self.offset + j;
            (self.bytes[i / 8] >> (i % 8)) & 1 == 1
        })
    }

    /// The number of set bits (with POPCNT where the host has it).
    ///
    /// ```
    /// use selectjit::bits::Bitmap;
    /// let b = Bitmap::new(&[0b1011_0110, 0b1], 1, 8).unwrap();
    /// assert_eq!(b.count_ones(), 6); // bits 1-7 of the first byte, bit 0 of the second
    /// ```
    pub fn count_ones(&self) -> usize {
        #[cfg(target_arch = "x86_64")]
        if cpu().popcnt_avx2() {
            // SAFETY: the host has POPCNT and AVX2 (checked by `Cpu::popcnt_avx2`).
            return unsafe { words::count_ones_avx2(self) };
        }
        words::count_ones(self)
    }

    /// Bits `j..j + 64` (fewer at the end: the missing ones are 0) as one word, bit 0 first.
    #[inline]
    pub(crate) fn word(&self, j: usize) -> u64 {
        let i = self.offset + j;
        let (byte, shift) = (i / 8, i % 8);
        // Whole words inside the buffer: two loads, no copy.
        if j + 64 <= self.len
            && let Some(b) = self.bytes.get(byte..byte + 9)
        {
            let lo = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
            return if shift == 0 {
                lo
            } else {
                (lo >> shift) | ((b[8] as u64) << (64 - shift))
            };
        }
        let n = self.len.saturating_sub(j).min(64);
        if n == 0 {
            return 0;
        }
        // Up to 9 bytes hold the 64 bits from `shift` on; the buffer holds every byte of the
        // `n` bits (checked in `new`).
        let need = (shift + n).div_ceil(8);
        let mut buf = [0u8; 16];
        buf[..need].copy_from_slice(&self.bytes[byte..byte + need]);
        let lo = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
        let hi = buf[8] as u64;
        let w = if shift == 0 {
            lo
        } else {
            (lo >> shift) | (hi << (64 - shift))
        };
        if n == 64 { w } else { w & ((1u64 << n) - 1) }
    }

    /// Bits `j..j + out.len()` as one byte each (0 or 1): the byte mask the kernels read.
    pub(crate) fn expand(&self, j: usize, out: &mut [u8]) {
        expand_words(out, |k| self.word(j + k))
    }
}

/// Bytes 0 or 1, eight at a time, from a byte of bits.
const SPREAD: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut v = 0u64;
        let mut k = 0;
        while k < 8 {
            v |= (((b >> k) & 1) as u64) << (8 * k);
            k += 1;
        }
        t[b] = v;
        b += 1;
    }
    t
};

/// Fills `out` with one byte (0 or 1) per bit of the words `word(0)`, `word(64)`, ...: 64
/// bytes per instruction where the host has AVX-512BW, eight per table lookup elsewhere.
#[inline]
pub(crate) fn expand_words(out: &mut [u8], word: impl Fn(usize) -> u64) {
    #[cfg(target_arch = "x86_64")]
    if cpu().avx512bw() {
        // SAFETY: the host has AVX-512F and AVX-512BW (checked by `Cpu::avx512bw`).
        unsafe { expand_avx512(out, word) };
        return;
    }
    expand_table(out, word)
}

/// The x86 features that the crate's hand-written kernels check at run time: the bit loops
/// here, [`crate::bitsel`]'s kernels and the static kernels' level. Detected once per process
/// ([`cpu`]): what the CPU has, whatever `SELECTJIT_MAX_ISA` says (the static kernels apply the
/// cap to it; the bit kernels, as before, do not). All false on other architectures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cpu {
    pub(crate) popcnt: bool,
    pub(crate) avx2: bool,
    pub(crate) avx512f: bool,
    pub(crate) avx512bw: bool,
    pub(crate) avx512vl: bool,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl Cpu {
    /// POPCNT and AVX2: the second build of the realigned-word loops ([`words`]).
    pub(crate) fn popcnt_avx2(self) -> bool {
        self.popcnt && self.avx2
    }

    /// AVX-512F and AVX-512BW: 64-byte expansion under an opmask ([`expand_words`]) and
    /// [`crate::bitsel`]'s AVX-512 kernels (both built with `avx512f,avx512bw`).
    pub(crate) fn avx512bw(self) -> bool {
        self.avx512f && self.avx512bw
    }
}

/// This CPU's [`Cpu`] features, detected on the first call.
pub(crate) fn cpu() -> Cpu {
    static CPU: std::sync::OnceLock<Cpu> = std::sync::OnceLock::new();
    *CPU.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            Cpu {
                popcnt: has!("popcnt"),
                avx2: has!("avx2"),
                avx512f: has!("avx512f"),
                avx512bw: has!("avx512bw"),
                avx512vl: has!("avx512vl"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Cpu::default()
    })
}

/// [`expand_words`] with AVX-512BW: each word a k-mask, its bytes 1 where set.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn expand_avx512(out: &mut [u8], word: impl Fn(usize) -> u64) {
    use std::arch::x86_64::{_mm512_maskz_set1_epi8, _mm512_storeu_si512};
    let mut chunks = out.chunks_exact_mut(64);
    let mut k = 0;
    for chunk in chunks.by_ref() {
        let v = _mm512_maskz_set1_epi8(word(k), 1);
        // SAFETY: `chunk` is 64 writable bytes; the store is unaligned.
        unsafe { _mm512_storeu_si512(chunk.as_mut_ptr().cast(), v) };
        k += 64;
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let w = word(k);
        for (i, b) in rest.iter_mut().enumerate() {
            *b = ((w >> i) & 1) as u8;
        }
    }
}

/// [`expand_words`] by a table of eight bytes per byte of bits.
fn expand_table(out: &mut [u8], word: impl Fn(usize) -> u64) {
    for (k, chunk) in out.chunks_mut(64).enumerate() {
        let w = word(64 * k);
        if chunk.len() == 64 {
            for (i, b) in chunk.chunks_exact_mut(8).enumerate() {
                let v = SPREAD[((w >> (8 * i)) & 0xff) as usize];
                b.copy_from_slice(&v.to_le_bytes());
            }
        } else {
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = ((w >> i) & 1) as u8;
            }
        }
    }
}

/// The validity of one side (or of the condition): a bitmap, or every slot valid, or every
/// slot null (a null scalar).
#[derive(Clone, Copy, Debug)]
pub enum Validity<'a> {
    /// Every slot is valid (no validity buffer).
    AllValid,
    /// Every slot is null (a null scalar).
    AllNull,
    /// One bit per slot, 1 = valid.
    Bits(Bitmap<'a>),
}

impl Validity<'_> {
    #[inline]
    pub(crate) fn word(&self, j: usize) -> u64 {
        match self {
            Validity::AllValid => !0,
            Validity::AllNull => 0,
            Validity::Bits(b) => b.word(j),
        }
    }
    fn check(&self, what: &'static str, len: usize) -> Result<()> {
        match self {
            Validity::Bits(b) if b.len() != len => Err(Error::Layout {
                what,
                msg: format!("a validity bitmap of {} bits for {len} rows", b.len()),
            }),
            _ => Ok(()),
        }
    }
}

/// One side of [`crate::Engine::select_with_validity`]: values of one width (`w` bytes each)
/// and their validity.
///
/// ```
/// use selectjit::bits::{Bitmap, Column, Validity};
/// let values = [1u8, 2, 3, 4];
/// let valid = Bitmap::new(&[0b1011], 0, 4).unwrap(); // row 2 null
/// let rows = Column::Rows(&values, Validity::Bits(valid));
/// let scalar = Column::Scalar(&[9], true);
/// assert!(matches!((rows, scalar), (Column::Rows(..), Column::Scalar(_, true))));
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Column<'a> {
    /// One value per row (row `i`: bytes `i * w..(i + 1) * w`) and the rows' validity.
    Rows(&'a [u8], Validity<'a>),
    /// One value (its first `w` bytes) for every row; `false`: every row null (a null scalar).
    Scalar(&'a [u8], bool),
}

/// What a null condition does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NullRule {
    /// A null condition counts as false (arrow-rs `zip`, DataFusion, Polars, pyarrow's
    /// `case_when` children).
    NullIsFalse,
    /// A null condition gives a null output (Arrow C++ / pyarrow `if_else`).
    NullPropagates,
}

fn out_bytes(len: usize, out: &[u8]) -> Result<()> {
    if out.len() < len.div_ceil(8) {
        return Err(Error::Layout {
            what: "output",
            msg: format!(
                "{len} bits need {} bytes, the buffer has {}",
                len.div_ceil(8),
                out.len()
            ),
        });
    }
    Ok(())
}

/// Writes word `k` (rows `64k..`) of an output bitmap at bit offset 0; bits past `len` of the
/// last byte are left 0. Returns the number of 0 bits among the `len`.
fn write_words(len: usize, out: &mut [u8], word: impl Fn(usize) -> u64) -> usize {
    let mut zeros = 0;
    for (k, chunk) in out[..len.div_ceil(8)].chunks_mut(8).enumerate() {
        let n = (len - 64 * k).min(64);
        let mut w = word(64 * k);
        if n < 64 {
            w &= (1u64 << n) - 1;
        }
        zeros += n - w.count_ones() as usize;
        chunk.copy_from_slice(&w.to_le_bytes()[..chunk.len()]);
    }
    zeros
}

/// The validity of `cond ? then : else` over `cond.len()` rows into `out` (bit offset 0; bits
/// past the last row of its last byte are 0), under `rule`: a row is valid when the side it
/// takes is valid, and, under [`NullRule::NullPropagates`], its condition is valid. Under
/// [`NullRule::NullIsFalse`] a null condition takes `else`. Returns the number of null rows.
///
/// Errors ([`Error::Layout`], nothing written): a bitmap of another length, an output of too
/// few bytes.
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::bits::{Bitmap, NullRule, Validity, select_validity};
/// // A null scalar on the else side: every row that takes it is null.
/// let cond = Bitmap::new(&[0b0011], 0, 4)?;
/// let mut out = [0u8];
/// let nulls = select_validity(cond, Validity::AllValid, Validity::AllValid,
///                             Validity::AllNull, NullRule::NullIsFalse, &mut out)?;
/// assert_eq!((out[0], nulls), (0b0011, 2));
/// # Ok(())
/// # }
/// ```
pub fn select_validity(
    cond: Bitmap<'_>,
    cond_valid: Validity<'_>,
    then: Validity<'_>,
    else_: Validity<'_>,
    rule: NullRule,
    out: &mut [u8],
) -> Result<usize> {
    let len = cond.len();
    for (what, v) in [
        ("cond validity", &cond_valid),
        ("then", &then),
        ("else", &else_),
    ] {
        v.check(what, len)?;
    }
    out_bytes(len, out)?;
    let s = [
        words::Src::of_bits(&cond),
        words::Src::of(&cond_valid),
        words::Src::of(&then),
        words::Src::of(&else_),
    ];
    #[cfg(target_arch = "x86_64")]
    if cpu().popcnt_avx2() {
        // SAFETY: the host has POPCNT and AVX2 (checked by `Cpu::popcnt_avx2`).
        return Ok(unsafe { words::select_validity_avx2(len, s, rule, out) });
    }
    Ok(words::select_validity(len, s, rule, out))
}

/// The validity of an n-way select (`CASE WHEN`: the first true condition wins, a null
/// condition is false) over `len` rows: a row is valid when the value it takes (`values[i]`
/// for the first true `conds[i]`, else `default`) is valid. `conds[i]` is a condition's bits
/// and its validity. Returns the number of null rows.
///
/// Errors ([`Error::Layout`] / [`Error::Invalid`], nothing written): as [`select_validity`],
/// and as many values as conditions.
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::bits::{Bitmap, Validity, case_when_validity};
/// // CASE WHEN c1 THEN a ELSE NULL END, c1 null on row 1.
/// let c1 = (Bitmap::new(&[0b0111], 0, 3)?, Validity::Bits(Bitmap::new(&[0b0101], 0, 3)?));
/// let mut out = [0u8];
/// let nulls = case_when_validity(3, &[c1], &[Validity::AllValid], Validity::AllNull, &mut out)?;
/// assert_eq!((out[0], nulls), (0b0101, 1));
/// # Ok(())
/// # }
/// ```
pub fn case_when_validity(
    len: usize,
    conds: &[(Bitmap<'_>, Validity<'_>)],
    values: &[Validity<'_>],
    default: Validity<'_>,
    out: &mut [u8],
) -> Result<usize> {
    if conds.len() != values.len() {
        return Err(Error::Invalid(format!(
            "{} conditions and {} values",
            conds.len(),
            values.len()
        )));
    }
    for (c, v) in conds.iter().zip(values) {
        Validity::Bits(c.0).check("condition", len)?;
        c.1.check("condition validity", len)?;
        v.check("value", len)?;
    }
    default.check("default", len)?;
    out_bytes(len, out)?;
    let mut s: Vec<words::Src<'_>> = Vec::with_capacity(3 * conds.len() + 1);
    for ((c, cv), v) in conds.iter().zip(values) {
        s.extend([
            words::Src::of_bits(c),
            words::Src::of(cv),
            words::Src::of(v),
        ]);
    }
    s.push(words::Src::of(&default));
    #[cfg(target_arch = "x86_64")]
    if cpu().popcnt_avx2() {
        // SAFETY: the host has POPCNT and AVX2 (checked by `Cpu::popcnt_avx2`).
        return Ok(unsafe { words::case_when_validity_avx2(len, &s, out) });
    }
    Ok(words::case_when_validity(len, &s, out))
}

/// One side of a select of bit-packed values: a bitmap, or one value for every row.
#[derive(Clone, Copy, Debug)]
pub enum Bits<'a> {
    /// One bit per row.
    Map(Bitmap<'a>),
    /// The same bit in every row.
    Splat(bool),
}

impl Bits<'_> {
    #[inline]
    fn word(&self, j: usize) -> u64 {
        match self {
            Bits::Map(b) => b.word(j),
            Bits::Splat(v) => 0u64.wrapping_sub(*v as u64),
        }
    }
}

/// `cond ? then : else` of bit-packed values (Arrow's booleans) over `cond.len()` rows into
/// `out` (bit offset 0; bits past the last row of its last byte are 0); a row whose
/// `cond_valid` bit is 0 takes `else` (pass [`Validity::AllValid`] for none).
///
/// Errors ([`Error::Layout`], nothing written): a bitmap of another length, an output of too
/// few bytes.
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::bits::{Bitmap, Bits, Validity, select_bits};
/// let cond = Bitmap::new(&[0b0101], 0, 4)?;
/// let then = Bits::Map(Bitmap::new(&[0b0011], 0, 4)?);
/// let mut out = [0u8];
/// select_bits(cond, Validity::AllValid, then, Bits::Splat(true), &mut out)?;
/// assert_eq!(out[0], 0b1011);
/// # Ok(())
/// # }
/// ```
pub fn select_bits(
    cond: Bitmap<'_>,
    cond_valid: Validity<'_>,
    then: Bits<'_>,
    else_: Bits<'_>,
    out: &mut [u8],
) -> Result<()> {
    let len = cond.len();
    cond_valid.check("cond validity", len)?;
    for (what, b) in [("then", &then), ("else", &else_)] {
        if let Bits::Map(m) = b {
            Validity::Bits(*m).check(what, len)?;
        }
    }
    out_bytes(len, out)?;
    write_words(len, out, |j| {
        let c = cond.word(j) & cond_valid.word(j);
        (c & then.word(j)) | (!c & else_.word(j))
    });
    Ok(())
}

/// The validity loop of [`select_validity`] and the count of [`Bitmap::count_ones`]: each
/// bitmap is realigned 64 words at a time into a small array (whole 8-byte loads and a shift,
/// which vectorise), the words are combined and counted over those arrays, and on x86-64 the
/// loop is compiled a second time with POPCNT and AVX2 for hosts that have them (the baseline
/// target has no `popcnt`: `count_ones` is a dozen instructions). On 1M rows at bit offset 3
/// this was several times the speed of a word at a time through `Bitmap::word`
/// (`tests::timing`).
mod words {
    use super::{Bitmap, NullRule, Validity};

    /// A bitmap's bytes and bit offset, or a constant word.
    #[derive(Clone, Copy)]
    pub(super) enum Src<'a> {
        Bits { bytes: &'a [u8], offset: usize },
        Const(u64),
    }

    /// Words per step: the sources' realigned words stay in the first-level cache (2 KiB).
    const STEP: usize = 64;

    impl<'a> Src<'a> {
        pub(super) fn of_bits(b: &Bitmap<'a>) -> Src<'a> {
            let (bytes, offset) = b.parts();
            Src::Bits { bytes, offset }
        }

        pub(super) fn of(v: &Validity<'a>) -> Src<'a> {
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

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,avx2")]
    pub(super) fn count_ones_avx2(b: &Bitmap<'_>) -> usize {
        count_ones(b)
    }

    /// The number of set bits of `b`, its words realigned `STEP` at a time.
    #[inline(always)]
    pub(super) fn count_ones(b: &Bitmap<'_>) -> usize {
        let (s, len) = (Src::of_bits(b), b.len());
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

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,avx2")]
    pub(super) fn select_validity_avx2(
        len: usize,
        s: [Src<'_>; 4],
        rule: NullRule,
        out: &mut [u8],
    ) -> usize {
        select_validity(len, s, rule, out)
    }

    /// [`super::select_validity`] of the sources `[cond, cond_valid, then, else]` over `len`
    /// rows into `out` (checked by the caller); returns the number of nulls.
    #[inline(always)]
    pub(super) fn select_validity(
        len: usize,
        s: [Src<'_>; 4],
        rule: NullRule,
        out: &mut [u8],
    ) -> usize {
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

    /// The row's validity word of a `CASE WHEN` of `k` branches from the words `get(i)` of
    /// the sources `[c0, cv0, v0, c1, cv1, v1, ..., default]`.
    #[inline(always)]
    fn first_true(k: usize, get: impl Fn(usize) -> u64) -> u64 {
        let (mut left, mut v) = (!0u64, 0u64);
        for i in 0..k {
            let take = left & get(3 * i) & get(3 * i + 1);
            v |= take & get(3 * i + 2);
            left &= !take;
        }
        v | (left & get(3 * k))
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,avx2")]
    pub(super) fn case_when_validity_avx2(len: usize, s: &[Src<'_>], out: &mut [u8]) -> usize {
        case_when_validity(len, s, out)
    }

    /// Realigned words kept for the next [`case_when_validity`] up to this many sources (five
    /// branches and the default: 8 KiB); a call with more frees its own when done.
    const KEEP: usize = 16;

    thread_local! {
        /// This thread's realigned words of [`case_when_validity`] (taken for the call, so
        /// that a nested one would find none and make its own), grown to the widest call seen
        /// up to [`KEEP`] sources.
        static SCRATCH: std::cell::Cell<Vec<[u64; STEP]>> =
            const { std::cell::Cell::new(Vec::new()) };
    }

    /// [`super::case_when_validity`] of the sources `[c0, cv0, v0, c1, cv1, v1, ...,
    /// default]` over `len` rows into `out` (checked by the caller), realigned as
    /// [`select_validity`]'s; returns the number of nulls.
    #[inline(always)]
    pub(super) fn case_when_validity(len: usize, s: &[Src<'_>], out: &mut [u8]) -> usize {
        let k = (s.len() - 1) / 3;
        let full = len / 64;
        let (body, tail) = out[..len.div_ceil(8)].split_at_mut(8 * full);
        // A step writes each source's words before it reads them: what the scratch held
        // before does not matter.
        let mut scratch = SCRATCH.take();
        if scratch.len() < s.len() {
            scratch.resize(s.len(), [0u64; STEP]);
        }
        let w = &mut scratch[..s.len()];
        let mut valid = 0usize;
        for (step, chunk) in body.chunks_mut(8 * STEP).enumerate() {
            let (k0, n) = (step * STEP, chunk.len() / 8);
            for (src, words) in s.iter().zip(w.iter_mut()) {
                src.words(k0, &mut words[..n]);
            }
            for (i, o) in chunk.chunks_exact_mut(8).enumerate() {
                let v = first_true(k, |j| w[j][i]);
                valid += v.count_ones() as usize;
                o.copy_from_slice(&v.to_le_bytes());
            }
        }
        if scratch.len() <= KEEP {
            SCRATCH.set(scratch);
        }
        if !tail.is_empty() {
            let (j, n) = (64 * full, len - 64 * full);
            let v = first_true(k, |i| s[i].slow(j, n));
            valid += v.count_ones() as usize;
            let m = tail.len();
            tail.copy_from_slice(&v.to_le_bytes()[..m]);
        }
        len - valid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bit(b: &[u8], i: usize) -> bool {
        (b[i / 8] >> (i % 8)) & 1 == 1
    }

    /// The one detection: each field is its feature's (a field read from another's
    /// detection would go unnoticed on a host that has both), all false off x86-64.
    #[test]
    fn cpu_features_are_the_hosts() {
        let c = cpu();
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            assert_eq!(
                [c.popcnt, c.avx2, c.avx512f, c.avx512bw, c.avx512vl],
                [
                    has!("popcnt"),
                    has!("avx2"),
                    has!("avx512f"),
                    has!("avx512bw"),
                    has!("avx512vl")
                ]
            );
            assert_eq!(c.popcnt_avx2(), has!("popcnt") && has!("avx2"));
            assert_eq!(c.avx512bw(), has!("avx512f") && has!("avx512bw"));
        }
        #[cfg(not(target_arch = "x86_64"))]
        assert_eq!(c, Cpu::default());
        assert_eq!(c, cpu());
    }

    #[test]
    fn both_expansions_agree() {
        let bytes: Vec<u8> = (0..40u32).map(|i| (i * 91 + 5) as u8).collect();
        let b = Bitmap::new(&bytes, 5, 300).unwrap();
        for len in [0, 1, 63, 64, 65, 200, 300] {
            let (mut t, mut e) = (vec![9u8; len], vec![7u8; len]);
            expand_table(&mut t, |k| b.word(k));
            expand_words(&mut e, |k| b.word(k));
            assert_eq!(t, e, "{len}");
        }
    }

    #[test]
    fn words_and_expansion_read_every_offset() {
        let bytes: Vec<u8> = (0..40u32).map(|i| (i * 37 + 11) as u8).collect();
        for offset in 0..64 {
            for len in [0, 1, 7, 8, 63, 64, 65, 130, 250] {
                let b = Bitmap::new(&bytes, offset, len).unwrap();
                let mut m = vec![9u8; len];
                b.expand(0, &mut m);
                for (j, &v) in m.iter().enumerate() {
                    assert_eq!(v == 1, bit(&bytes, offset + j), "offset {offset} bit {j}");
                    assert!(v <= 1);
                    assert_eq!(b.get(j), Some(bit(&bytes, offset + j)));
                }
                assert_eq!(b.get(len), None);
            }
        }
        assert!(Bitmap::new(&bytes, 300, 21).is_err());
        assert!(Bitmap::new(&bytes, usize::MAX, 2).is_err());
    }

    #[test]
    fn validity_follows_both_rules_row_by_row() {
        let g = |s: u32| -> Vec<u8> {
            (0..20u32)
                .map(|i| (((i + s) * 2654435761u32) >> 13) as u8)
                .collect()
        };
        let (c, cv, t) = (g(1), g(2), g(3));
        for off in [0, 3, 8, 61] {
            let len: usize = 150 - off;
            fn bm(b: &[u8], off: usize, len: usize) -> Bitmap<'_> {
                Bitmap::new(b, off, len).unwrap()
            }
            for rule in [NullRule::NullIsFalse, NullRule::NullPropagates] {
                let mut out = vec![0xffu8; len.div_ceil(8)];
                let nulls = select_validity(
                    bm(&c, off, len),
                    Validity::Bits(bm(&cv, off, len)),
                    Validity::Bits(bm(&t, off, len)),
                    Validity::AllNull,
                    rule,
                    &mut out,
                )
                .unwrap();
                let mut want_nulls = 0;
                for j in 0..len {
                    let (cb, cvb, tb) = (bit(&c, off + j), bit(&cv, off + j), bit(&t, off + j));
                    let v = match rule {
                        NullRule::NullIsFalse => cb && cvb && tb,
                        NullRule::NullPropagates => cvb && cb && tb,
                    };
                    want_nulls += !v as usize;
                    assert_eq!(bit(&out, j), v, "{rule:?} row {j}");
                }
                for j in len..out.len() * 8 {
                    assert!(!bit(&out, j), "padding bit {j}");
                }
                assert_eq!(nulls, want_nulls);
            }
        }
    }

    #[test]
    fn bad_lengths_are_errors_and_write_nothing() {
        let c = Bitmap::new(&[0xff; 4], 0, 20).unwrap();
        let short = Bitmap::new(&[0xff; 4], 0, 19).unwrap();
        let mut out = [7u8; 3];
        let r = select_validity(
            c,
            Validity::Bits(short),
            Validity::AllValid,
            Validity::AllValid,
            NullRule::NullIsFalse,
            &mut out,
        );
        assert!(r.is_err());
        let mut small = [7u8; 2];
        assert!(
            select_bits(
                c,
                Validity::AllValid,
                Bits::Splat(true),
                Bits::Splat(false),
                &mut small
            )
            .is_err()
        );
        assert_eq!((out, small), ([7; 3], [7; 2]));
    }

    #[test]
    fn case_when_takes_the_first_valid_true_condition() {
        let c1 = [0b0000_0011u8];
        let c1v = [0b0000_0110u8];
        let c2 = [0b0000_1111u8];
        let v1 = [0b1111_1111u8];
        let v2 = [0b0000_0101u8];
        let mut out = [0u8];
        let conds = [
            (
                Bitmap::new(&c1, 0, 4).unwrap(),
                Validity::Bits(Bitmap::new(&c1v, 0, 4).unwrap()),
            ),
            (Bitmap::new(&c2, 0, 4).unwrap(), Validity::AllValid),
        ];
        let vals = [
            Validity::Bits(Bitmap::new(&v1, 0, 4).unwrap()),
            Validity::Bits(Bitmap::new(&v2, 0, 4).unwrap()),
        ];
        let nulls = case_when_validity(4, &conds, &vals, Validity::AllNull, &mut out).unwrap();
        // Row 0: c1 null -> c2 true -> v2 valid. Row 1: c1 true -> v1 valid. Rows 2, 3: c2 ->
        // v2: valid, null.
        assert_eq!((out[0], nulls), (0b0111, 1));
    }

    /// [`select_validity`]'s rows a word at a time through `Bitmap::word`: what the realigned
    /// loop must equal.
    fn select_validity_by_words(
        cond: Bitmap<'_>,
        cond_valid: Validity<'_>,
        then: Validity<'_>,
        else_: Validity<'_>,
        rule: NullRule,
        out: &mut [u8],
    ) -> usize {
        write_words(cond.len(), out, |j| {
            let cv = cond_valid.word(j);
            let c = cond.word(j) & cv;
            let v = (c & then.word(j)) | (!c & else_.word(j));
            match rule {
                NullRule::NullIsFalse => v,
                NullRule::NullPropagates => v & cv,
            }
        })
    }

    /// [`case_when_validity`]'s rows a word at a time through `Bitmap::word`.
    fn case_when_validity_by_words(
        len: usize,
        conds: &[(Bitmap<'_>, Validity<'_>)],
        values: &[Validity<'_>],
        default: Validity<'_>,
        out: &mut [u8],
    ) -> usize {
        write_words(len, out, |j| {
            let (mut left, mut v) = (!0u64, 0u64);
            for ((c, cv), val) in conds.iter().zip(values) {
                let take = left & c.word(j) & cv.word(j);
                v |= take & val.word(j);
                left &= !take;
            }
            v | (left & default.word(j))
        })
    }

    fn xorshift(mut s: u64) -> impl FnMut() -> u64 {
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    #[test]
    fn realigned_words_equal_a_word_at_a_time() {
        let mut next = xorshift(0x1234_5678_9abc_def0);
        for round in 0..3000 {
            // Every tenth length spans several steps of the realigned words.
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
            let cb = bm(&c, co, len);
            for rule in [NullRule::NullIsFalse, NullRule::NullPropagates] {
                let mut want = vec![0xa5u8; len.div_ceil(8)];
                let mut got = vec![0x5au8; len.div_ceil(8)];
                let wn = select_validity_by_words(cb, cvv, tv, ev, rule, &mut want);
                let gn = select_validity(cb, cvv, tv, ev, rule, &mut got).expect("select");
                assert_eq!((&got, gn), (&want, wn), "len {len} {rule:?}");
            }
            let ones = (0..len).filter(|&i| cb.get(i) == Some(true)).count();
            assert_eq!(cb.count_ones(), ones, "len {len} offset {co}");
            assert_eq!(words::count_ones(&cb), ones, "without POPCNT");
        }
    }

    #[test]
    fn case_when_realigned_equals_a_word_at_a_time() {
        let mut next = xorshift(0x0fed_cba9_8765_4321);
        for round in 0..1500 {
            let len = (next() % if round % 10 == 0 { 20_000 } else { 700 }) as usize;
            let k = (next() % 5) as usize;
            // Per branch: condition bits, their validity, the value's validity; then the
            // default's.
            let bufs: Vec<(Vec<u8>, usize, u64)> = (0..3 * k + 1)
                .map(|_| {
                    let off = (next() % 64) as usize;
                    let extra = (next() % 3) as usize;
                    let b = (0..(off + len).div_ceil(8) + extra)
                        .map(|_| next() as u8)
                        .collect();
                    (b, off, next())
                })
                .collect();
            let bm = |i: usize| Bitmap::new(&bufs[i].0, bufs[i].1, len).expect("bitmap");
            let val = |i: usize| match bufs[i].2 % 3 {
                0 => Validity::AllValid,
                1 => Validity::AllNull,
                _ => Validity::Bits(bm(i)),
            };
            let conds: Vec<_> = (0..k).map(|i| (bm(3 * i), val(3 * i + 1))).collect();
            let values: Vec<_> = (0..k).map(|i| val(3 * i + 2)).collect();
            let mut want = vec![0xa5u8; len.div_ceil(8)];
            let mut got = vec![0x5au8; len.div_ceil(8)];
            let wn = case_when_validity_by_words(len, &conds, &values, val(3 * k), &mut want);
            let gn = case_when_validity(len, &conds, &values, val(3 * k), &mut got).expect("cw");
            assert_eq!((&got, gn), (&want, wn), "len {len} k {k}");
        }
    }

    /// The realigned words are this thread's scratch, kept between calls up to
    /// `words::KEEP` sources: calls of growing and shrinking widths, past it and back, each
    /// equal a word at a time (a wider call's stale words never leak into a narrower one).
    #[test]
    fn case_when_scratch_serves_calls_of_every_width() {
        let mut next = xorshift(0x05ee_d0f5_c7a7_c4e1);
        for k in [6usize, 1, 6, 0, 3, 7, 2, 5, 9, 4] {
            let len = 64 * 130 + (next() % 64) as usize;
            let bufs: Vec<(Vec<u8>, usize)> = (0..3 * k + 1)
                .map(|_| {
                    let off = (next() % 64) as usize;
                    let b = (0..(off + len).div_ceil(8)).map(|_| next() as u8).collect();
                    (b, off)
                })
                .collect();
            let bm = |i: usize| Bitmap::new(&bufs[i].0, bufs[i].1, len).expect("bitmap");
            let conds: Vec<_> = (0..k)
                .map(|i| (bm(3 * i), Validity::Bits(bm(3 * i + 1))))
                .collect();
            let values: Vec<_> = (0..k).map(|i| Validity::Bits(bm(3 * i + 2))).collect();
            let default = Validity::Bits(bm(3 * k));
            let mut want = vec![0xa5u8; len.div_ceil(8)];
            let mut got = vec![0x5au8; len.div_ceil(8)];
            let wn = case_when_validity_by_words(len, &conds, &values, default, &mut want);
            let gn = case_when_validity(len, &conds, &values, default, &mut got).expect("cw");
            assert_eq!((&got, gn), (&want, wn), "len {len} k {k}");
        }
    }

    /// `cargo test --release --lib bits::tests::against_a_word_at_a_time -- --ignored
    /// --nocapture`: the realigned loop against a word at a time on 1M rows, every bitmap at
    /// bit offset 3.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn against_a_word_at_a_time() {
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
            let (c, cv, t, e) = (
                bm(0),
                Validity::Bits(bm(1)),
                Validity::Bits(bm(2)),
                Validity::Bits(bm(3)),
            );
            let fast = time(&mut || select_validity(c, cv, t, e, rule, &mut out).expect("select"));
            let slow = time(&mut || select_validity_by_words(c, cv, t, e, rule, &mut out));
            println!("{rule:?}: realigned {fast:.1} us, a word at a time {slow:.1} us");
        }
    }
}

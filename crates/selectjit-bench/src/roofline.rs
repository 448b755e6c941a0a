//! The copy roofline: the fastest way this machine moves a given number of bytes, the yardstick
//! of the benchmarks.
//!
//! glibc's `memcpy` alone is not it: for copies around the size of the last-level cache it
//! switches to non-temporal stores, which on some machines run several times slower than a copy
//! with ordinary stores. So four copies of the same bytes are timed — `memcpy`, a vector loop
//! with ordinary stores, one with non-temporal stores, and one with non-temporal stores that
//! walks four parts of the bytes at once — and the fastest counts. The last is there because
//! the select's four-way kernels ([`selectjit::Variant::four_way`]) walk their rows that way:
//! on a Zen 4 host, copies from DRAM ran 6-12% faster so, and a yardstick that moves bytes
//! more slowly than the machine can would flatter the select.

use selectjit::{Error, Result};

/// One way to copy bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyKind {
    /// `copy_from_slice` (the C library's `memcpy`).
    Memcpy,
    /// Unrolled 256-bit (or 512-bit) vector loads and ordinary stores.
    Vector,
    /// Unrolled vector loads and non-temporal stores (bypassing the caches), then `sfence`.
    NonTemporal,
    /// As `NonTemporal`, the bytes walked as four parts at once (a block of 128 bytes of each
    /// in turn): four streams from memory instead of one.
    NonTemporalFourWay,
}

impl CopyKind {
    /// Every kind, in a fixed order.
    pub const ALL: [CopyKind; 4] = [
        CopyKind::Memcpy,
        CopyKind::Vector,
        CopyKind::NonTemporal,
        CopyKind::NonTemporalFourWay,
    ];

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            CopyKind::Memcpy => "memcpy",
            CopyKind::Vector => "vector",
            CopyKind::NonTemporal => "nt",
            CopyKind::NonTemporalFourWay => "nt4way",
        }
    }

    /// Whether the copy stores non-temporally.
    pub fn non_temporal(self) -> bool {
        matches!(self, CopyKind::NonTemporal | CopyKind::NonTemporalFourWay)
    }

    /// Whether this host has the instructions the copy needs.
    pub fn available(self) -> bool {
        match self {
            CopyKind::Memcpy => true,
            #[cfg(target_arch = "x86_64")]
            _ => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// A source and a destination of `n` bytes, the destination at the source's offset within a
/// page (see [`CopyBuffers::new`]).
pub struct CopyBuffers {
    src: Vec<u8>,
    dst: Vec<u8>,
    /// Offset of the aligned destination in `dst`.
    off: usize,
    n: usize,
}

impl CopyBuffers {
    /// Buffers for copies of `n` bytes, the source filled with a pattern.
    pub fn new(n: usize) -> CopyBuffers {
        let src: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
        // The destination at the source's offset within a 4 KiB page: a forward copy whose
        // destination sits a little past its source aliases loads with recent stores
        // (4K aliasing; 48 bytes apart it ran 1.13-1.24x glibc's memcpy, which copies
        // backwards then). The select's buffers share their page offsets too.
        let dst = vec![0u8; n + 4096];
        let page = |p: *const u8| p as usize % 4096;
        let off = (page(src.as_ptr()) + 4096 - page(dst.as_ptr())) % 4096;
        CopyBuffers { src, dst, off, n }
    }

    /// Bytes per copy.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the copies are empty.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The destination after a copy.
    pub fn dst(&self) -> &[u8] {
        &self.dst[self.off..self.off + self.n]
    }

    /// The source.
    pub fn src(&self) -> &[u8] {
        &self.src
    }

    /// Copies the source to the destination with `kind`; an error if the host lacks it.
    pub fn copy(&mut self, kind: CopyKind) -> Result<()> {
        let off = self.off;
        copy_slice(kind, &self.src, &mut self.dst[off..off + self.n])?;
        std::hint::black_box(&mut self.dst);
        Ok(())
    }

    /// The byte range of part `part` of `parts` in a split copy: 64-byte aligned shares.
    fn split(&self, parts: usize, part: usize) -> (usize, usize) {
        let chunk = self.n.div_ceil(parts.max(1)).next_multiple_of(64);
        ((part * chunk).min(self.n), ((part + 1) * chunk).min(self.n))
    }
}

/// Copies `src` to `dst` (as many bytes as the shorter holds) with `kind`; an error if the host
/// lacks it.
pub fn copy_slice(kind: CopyKind, src: &[u8], dst: &mut [u8]) -> Result<()> {
    if !kind.available() {
        return Err(Error::Invalid(format!(
            "copy '{}' needs AVX2, which this host lacks",
            kind.name()
        )));
    }
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    match kind {
        CopyKind::Memcpy => dst.copy_from_slice(src),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `available()` checked AVX2; `src` and `dst` are distinct slices of the same
        // length.
        CopyKind::Vector => unsafe { x86::copy_avx2(src, dst, false) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        CopyKind::NonTemporal => unsafe { x86::copy_avx2(src, dst, true) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        CopyKind::NonTemporalFourWay => unsafe { x86::copy_avx2_four_way(src, dst) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("not available off x86-64"),
    }
    Ok(())
}

/// A pool of `threads` threads kept between calls (`None` for fewer than two): what the
/// multi-threaded copy runs on, as an engine's calls run on its own pool.
pub(crate) fn pool(threads: usize) -> Option<rayon::ThreadPool> {
    if threads < 2 {
        return None;
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .ok()
}

/// A copy split across the threads of a pool: the multi-threaded yardstick.
pub(crate) fn copy_split(
    bufs: &mut CopyBuffers,
    kind: CopyKind,
    pool: &rayon::ThreadPool,
) -> Result<()> {
    if !kind.available() {
        return Err(Error::Invalid(format!(
            "copy '{}' is not available on this host",
            kind.name()
        )));
    }
    let parts = pool.current_num_threads();
    let ranges: Vec<(usize, usize)> = (0..parts).map(|i| bufs.split(parts, i)).collect();
    let off = bufs.off;
    let src = bufs.src.as_ptr() as usize;
    let dst = bufs.dst.as_mut_ptr() as usize;
    let f = |i: usize| {
        let (a, b) = ranges[i];
        if a >= b {
            return;
        }
        // SAFETY: the ranges are disjoint parts of `0..n` for the buffers' `n`, inside both
        // buffers (`src` holds `n` bytes, `dst` `off + n`); the buffers outlive `pool.broadcast`, which returns only after
        // every part is done.
        let (s, d) = unsafe {
            (
                std::slice::from_raw_parts((src as *const u8).add(a), b - a),
                std::slice::from_raw_parts_mut((dst as *mut u8).add(off + a), b - a),
            )
        };
        copy_slice(kind, s, d).expect("availability checked above");
    };
    pool.broadcast(|ctx| f(ctx.index()));
    std::hint::black_box(&mut bufs.dst);
    Ok(())
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Copies `src` to `dst` (equal lengths) with 256-bit vectors, 128 bytes per iteration;
    /// with `nt`, the stores of the 32-byte aligned part are non-temporal, followed by `sfence`.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy_avx2(src: &[u8], dst: &mut [u8], nt: bool) {
        let n = src.len().min(dst.len());
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        // Head up to 32-byte alignment of the destination, with ordinary stores.
        let head = d.align_offset(32).min(n);
        dst[..head].copy_from_slice(&src[..head]);
        let mut i = head;
        // SAFETY: for all pointer accesses below, `i + 128 <= n` (or `i + 32 <= n`) bounds
        // every access inside both slices (`n` is the shorter length); the aligned stores at
        // `d + i` are 32-byte aligned after the head; AVX2 is the caller's contract.
        unsafe {
            while i + 128 <= n {
                let v0 = _mm256_loadu_si256(s.add(i) as *const __m256i);
                let v1 = _mm256_loadu_si256(s.add(i + 32) as *const __m256i);
                let v2 = _mm256_loadu_si256(s.add(i + 64) as *const __m256i);
                let v3 = _mm256_loadu_si256(s.add(i + 96) as *const __m256i);
                let p = d.add(i) as *mut __m256i;
                if nt {
                    _mm256_stream_si256(p, v0);
                    _mm256_stream_si256(p.add(1), v1);
                    _mm256_stream_si256(p.add(2), v2);
                    _mm256_stream_si256(p.add(3), v3);
                } else {
                    _mm256_store_si256(p, v0);
                    _mm256_store_si256(p.add(1), v1);
                    _mm256_store_si256(p.add(2), v2);
                    _mm256_store_si256(p.add(3), v3);
                }
                i += 128;
            }
            while i + 32 <= n {
                let v = _mm256_loadu_si256(s.add(i) as *const __m256i);
                _mm256_storeu_si256(d.add(i) as *mut __m256i, v);
                i += 32;
            }
            if nt {
                _mm_sfence();
            }
        }
        dst[i..n].copy_from_slice(&src[i..n]);
    }

    /// Copies `src` to `dst` (equal lengths) with non-temporal stores as [`copy_avx2`] does,
    /// the 32-byte aligned bulk split in four parts of whole 128-byte blocks walked at once: a
    /// block of each part in turn. The rest after the parts is copied as [`copy_avx2`] does.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy_avx2_four_way(src: &[u8], dst: &mut [u8]) {
        let n = src.len().min(dst.len());
        let head = dst.as_ptr().align_offset(32).min(n);
        dst[..head].copy_from_slice(&src[..head]);
        let part = (n - head) / 4 / 128 * 128;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        // SAFETY: every block starts at `head + p * part + i` with `p < 4` and `i + 128 <= part`,
        // so it ends by `head + 4 * part <= n`, inside both slices; `head` and `part` keep the
        // stores 32-byte aligned.
        unsafe {
            let mut i = 0;
            while i < part {
                for p in 0..4 {
                    let k = head + p * part + i;
                    let v0 = _mm256_loadu_si256(s.add(k) as *const __m256i);
                    let v1 = _mm256_loadu_si256(s.add(k + 32) as *const __m256i);
                    let v2 = _mm256_loadu_si256(s.add(k + 64) as *const __m256i);
                    let v3 = _mm256_loadu_si256(s.add(k + 96) as *const __m256i);
                    let q = d.add(k) as *mut __m256i;
                    _mm256_stream_si256(q, v0);
                    _mm256_stream_si256(q.add(1), v1);
                    _mm256_stream_si256(q.add(2), v2);
                    _mm256_stream_si256(q.add(3), v3);
                }
                i += 128;
            }
            _mm_sfence();
        }
        let done = head + 4 * part;
        // SAFETY: the caller's guarantee (AVX2).
        unsafe { copy_avx2(&src[done..n], &mut dst[done..n], true) };
    }

    /// `out[i] = cond[i] != 0 ? then[i] : else[i]` over `cond.len()` f32 elements, their bytes
    /// as stored: scalar up to the output's 32-byte boundary, then 4 vectors of 8 elements per
    /// iteration (cond bytes widened and compared with zero, `vblendvps`), then scalar.
    ///
    /// # Safety
    /// The CPU has AVX2; `then`, `else_` and `out` hold `4 * cond.len()` bytes.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn select_f32_avx2(
        cond: &[u8],
        then: &[u8],
        else_: &[u8],
        out: &mut [u8],
        nt: bool,
    ) {
        let n = cond.len();
        let scalar = |out: &mut [u8], i: usize| {
            let src = if cond[i] != 0 { then } else { else_ };
            out[4 * i..4 * i + 4].copy_from_slice(&src[4 * i..4 * i + 4]);
        };
        let mut i = 0;
        while i < n && !(out.as_ptr() as usize + 4 * i).is_multiple_of(32) {
            scalar(out, i);
            i += 1;
        }
        let (c, t, e, o) = (
            cond.as_ptr(),
            then.as_ptr() as *const f32,
            else_.as_ptr() as *const f32,
            out.as_mut_ptr() as *mut f32,
        );
        let zero = _mm256_setzero_si256();
        // SAFETY: `i + 32 <= n` keeps every access inside the buffers (`n` elements each);
        // `o + i` is 32-byte aligned from here on (8 elements of 4 bytes per step).
        unsafe {
            while i + 32 <= n {
                for v in 0..4 {
                    let k = i + 8 * v;
                    let cb = _mm_loadl_epi64(c.add(k) as *const __m128i);
                    let m = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(cb), zero);
                    let tv = _mm256_loadu_ps(t.add(k));
                    let ev = _mm256_loadu_ps(e.add(k));
                    let r = _mm256_blendv_ps(tv, ev, _mm256_castsi256_ps(m));
                    if nt {
                        _mm256_stream_ps(o.add(k), r);
                    } else {
                        _mm256_store_ps(o.add(k), r);
                    }
                }
                i += 32;
            }
            if nt {
                _mm_sfence();
            }
        }
        while i < n {
            scalar(out, i);
            i += 1;
        }
    }
}

/// The bar for generated code: a hand-written AVX2 select of contiguous f32 (`out[i] =
/// cond[i] != 0 ? then[i] : else[i]`, the bytes of the elements as stored), 32 elements per
/// iteration, stores aligned to the output's 32-byte boundaries, non-temporal with `nt` (then
/// an `sfence`). `None` when the host lacks AVX2, or the buffers do not hold the same number
/// of elements.
pub fn intrinsics_select_f32(
    cond: &[u8],
    then: &[u8],
    else_: &[u8],
    out: &mut [u8],
    nt: bool,
) -> Option<()> {
    let n = cond.len();
    if !CopyKind::Vector.available() || [then.len(), else_.len(), out.len()] != [4 * n; 3] {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX2 checked above; every buffer holds `n` elements.
    unsafe {
        x86::select_f32_avx2(cond, then, else_, out, nt)
    };
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_intrinsics_select_selects_every_element() {
        let vector = crate::copy_runs(CopyKind::Vector);
        for n in [0usize, 1, 7, 8, 9, 31, 32, 33, 100, 1000, 4099] {
            let cond: Vec<u8> = (0..n).map(|i| [0u8, 1, 0x80, 0, 0xff][i % 5]).collect();
            let then: Vec<u8> = (0..4 * n).map(|i| (i * 7 + 1) as u8).collect();
            let else_: Vec<u8> = (0..4 * n).map(|i| (i * 13 + 5) as u8).collect();
            let want: Vec<u8> = (0..4 * n)
                .map(|b| if cond[b / 4] != 0 { then[b] } else { else_[b] })
                .collect();
            for nt in [false, true] {
                // Every output alignment.
                for skew in [0usize, 4, 12, 16] {
                    let mut buf = vec![0u8; 4 * n + skew];
                    let out = &mut buf[skew..];
                    match intrinsics_select_f32(&cond, &then, &else_, out, nt) {
                        Some(()) => assert_eq!(out, &want[..], "n {n} nt {nt} skew {skew}"),
                        None => assert!(!vector),
                    }
                }
            }
        }
        let mut short = vec![0u8; 4];
        assert!(intrinsics_select_f32(&[1, 0], &[0; 8], &[0; 8], &mut short, false).is_none());
    }

    #[test]
    fn every_copy_copies_every_byte() {
        for n in [
            0usize,
            1,
            31,
            32,
            33,
            127,
            128,
            129,
            511,
            512,
            513,
            1000,
            4096 + 17,
        ] {
            for kind in CopyKind::ALL {
                let mut b = CopyBuffers::new(n);
                if !crate::copy_runs(kind) {
                    assert!(b.copy(kind).is_err());
                    continue;
                }
                b.copy(kind).unwrap();
                assert_eq!(b.dst(), b.src(), "{kind:?} {n}");
                if let Some(pool) = pool(3) {
                    let mut b = CopyBuffers::new(n);
                    copy_split(&mut b, kind, &pool).unwrap();
                    assert_eq!(b.dst(), b.src(), "split {kind:?} {n}");
                }
            }
        }
    }
}

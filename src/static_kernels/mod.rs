//! Static ahead-of-time kernels: the baseline the JIT is measured against, and the fallback when
//! code generation fails.
//!
//! They are driven by the same [`Signature`] as the JIT and specialised the way a careful author
//! would: per element width (elements are moved as `[u8; W]`, bit for bit), per row shape
//! (contiguous select with either input broadcast, in place, cond constant along the row, which
//! becomes a `memcpy` or a fill, and a strided fallback), with branch-free loops over
//! non-aliasing slices that LLVM vectorises, and a run-time choice (made once per process) of an
//! AVX2 or AVX-512 build of the same code where the CPU has it.

use crate::kernel::abi::Ptrs;
use crate::plan::RHS;
use crate::plan::{COND, ELSE, OUT, RowShape, Signature, THEN};
use crate::pred::eval_run;
use crate::shape::MAX_RANK;

/// Instruction-set level of the static kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// The build's baseline target (SSE2 on x86-64).
    Portable,
    /// Compiled with AVX2 enabled (256-bit vectors).
    Avx2,
    /// Compiled with AVX-512 F/BW/VL enabled (512-bit vectors, opmask registers).
    Avx512,
}

impl Level {
    /// The best level this CPU runs: its features as the bit kernels see them
    /// ([`crate::bits::cpu`], detected once), under the cap of `SELECTJIT_MAX_ISA`.
    pub(crate) fn detect() -> Level {
        use crate::jit::host::isa_allows;
        let cpu = crate::bits::cpu();
        let has = |on: bool, f: &str| on && isa_allows(f);
        if has(cpu.avx512f, "avx512f")
            && has(cpu.avx512bw, "avx512bw")
            && has(cpu.avx512vl, "avx512vl")
        {
            return Level::Avx512;
        }
        if has(cpu.avx2, "avx2") {
            return Level::Avx2;
        }
        Level::Portable
    }

    /// Every level, from the most portable.
    #[cfg(test)]
    pub(crate) const ALL: [Level; 3] = [Level::Portable, Level::Avx2, Level::Avx512];

    /// Whether this CPU can run kernels of this level (the name [`crate::Tier::available`]
    /// uses for a tier).
    #[cfg(test)]
    pub(crate) fn available(self) -> bool {
        match self {
            Level::Portable => true,
            Level::Avx2 => Level::detect() != Level::Portable,
            Level::Avx512 => Level::detect() == Level::Avx512,
        }
    }

    /// The level's name (`portable`, `avx2`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Level::Portable => "portable",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }
}

/// The level chosen for this process.
pub(crate) fn level() -> Level {
    static L: std::sync::OnceLock<Level> = std::sync::OnceLock::new();
    *L.get_or_init(Level::detect)
}

/// Runs `sig` over outer indices `begin..end` of `sig.dims[0]`.
///
/// # Safety
/// Every element addressed by `sig` (dims and strides times the width) from each base pointer
/// for outer indices in `begin..end` lies inside its buffer; `out` overlaps no input except that
/// `then` or `else` may be exactly `out` with identical strides (in place); `end <= sig.dims[0]`.
pub(crate) unsafe fn run(sig: &Signature, p: Ptrs, begin: usize, end: usize) {
    // SAFETY: the caller's contract; `level()` is supported by this CPU.
    unsafe { run_with(level(), sig, p, begin, end) }
}

/// [`run`] at a given level (for tests and benchmarks of each variant).
///
/// # Safety
/// As for [`run`], and `level.available()`.
pub(crate) unsafe fn run_with(level: Level, sig: &Signature, p: Ptrs, begin: usize, end: usize) {
    match level {
        // SAFETY: the caller's contract.
        Level::Portable => unsafe { run_portable(sig, p, begin, end) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller checked `Level::Avx2.available()`, i.e. the CPU has AVX2.
        Level::Avx2 => unsafe { run_avx2(sig, p, begin, end) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller checked `Level::Avx512.available()`.
        Level::Avx512 => unsafe { run_avx512(sig, p, begin, end) },
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: the caller's contract.
        Level::Avx2 | Level::Avx512 => unsafe { run_portable(sig, p, begin, end) },
    }
}

/// # Safety
/// See [`run`].
unsafe fn run_portable(sig: &Signature, p: Ptrs, begin: usize, end: usize) {
    // SAFETY: see `run`.
    unsafe { walk(sig, p, begin, end) }
}

/// # Safety
/// See [`run`]; the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_avx2(sig: &Signature, p: Ptrs, begin: usize, end: usize) {
    // SAFETY: see `run`. Everything below is inlined, so it is compiled with AVX2 here.
    unsafe { walk(sig, p, begin, end) }
}

/// # Safety
/// See [`run`]; the CPU has AVX-512 F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn run_avx512(sig: &Signature, p: Ptrs, begin: usize, end: usize) {
    // SAFETY: see `run`. Everything below is inlined, so it is compiled with AVX-512 here.
    unsafe { walk(sig, p, begin, end) }
}

/// Walks the outer dimensions and runs each row.
///
/// # Safety
/// See [`run`].
#[inline(always)]
unsafe fn walk(sig: &Signature, p: Ptrs, begin: usize, end: usize) {
    match sig.width {
        // SAFETY: `run`'s contract is the caller's; this arm matched `sig.width == 1`, the
        // `W == sig.width` that `walk_w` requires. The same for each arm below.
        1 => unsafe { walk_w::<1>(sig, p, begin, end) },
        // SAFETY: the caller's contract; `sig.width == 2` (this arm).
        2 => unsafe { walk_w::<2>(sig, p, begin, end) },
        // SAFETY: the caller's contract; `sig.width == 4` (this arm).
        4 => unsafe { walk_w::<4>(sig, p, begin, end) },
        // SAFETY: the caller's contract; `sig.width == 8` (this arm).
        8 => unsafe { walk_w::<8>(sig, p, begin, end) },
        // SAFETY: the caller's contract; `sig.width == 16` (this arm).
        16 => unsafe { walk_w::<16>(sig, p, begin, end) },
        _ => {}
    }
}

/// # Safety
/// See [`run`]; `W == sig.width`.
#[inline(always)]
unsafe fn walk_w<const W: usize>(sig: &Signature, p: Ptrs, begin: usize, end: usize) {
    let rank = sig.rank();
    let l = rank - 1;
    let kind = sig.row_shape();
    let ipt = std::ptr::eq(p.then, p.out);
    let ipe = std::ptr::eq(p.else_, p.out);
    let bytes = |op: usize, k: usize| sig.byte_stride(op, k);
    // Pointers advanced by `off[op]` bytes.
    let at = |off: [isize; 4]| -> Ptrs {
        // SAFETY: callers only pass offsets of elements inside the buffers (see `run`).
        unsafe {
            Ptrs {
                cond: p.cond.offset(off[COND]),
                then: p.then.offset(off[THEN]),
                else_: p.else_.offset(off[ELSE]),
                out: p.out.offset(off[OUT]),
                rhs: p.rhs,
            }
        }
    };
    let row_strides = [COND, THEN, ELSE, OUT].map(|op| bytes(op, l));
    // A row: the mask's own, or a predicate's in blocks (see `pred_row`).
    let run_row = |rp: Ptrs, n: usize| {
        if sig.is_mask() {
            // SAFETY: this row's elements are inside the buffers (see `run`).
            unsafe { row::<W>(kind, row_strides, rp, n, ipt, ipe) }
        } else {
            // SAFETY: as above.
            unsafe { pred_row::<W>(sig, rp, n, ipt, ipe) }
        }
    };
    if rank == 1 {
        // The only dimension is the split one: the row is `begin..end` itself.
        let mut rp = at(std::array::from_fn(|op| begin as isize * bytes(op, 0)));
        rp.rhs = p.rhs.wrapping_offset(begin as isize * bytes(RHS, 0));
        run_row(rp, end - begin);
        return;
    }
    let n = sig.dims[l];
    // Odometer over dims 1..l; dim 0 runs `begin..end`, dim l is the row.
    let mut idx = [0usize; MAX_RANK];
    for i0 in begin..end {
        idx[0] = i0;
        loop {
            let off: [isize; 5] =
                std::array::from_fn(|op| (0..l).map(|k| idx[k] as isize * bytes(op, k)).sum());
            let mut rp = at([off[0], off[1], off[2], off[3]]);
            rp.rhs = p.rhs.wrapping_offset(off[RHS]);
            run_row(rp, n);
            // Next row: advance the middle dims, last fastest; done when all wrap around.
            let mut done = true;
            for k in (1..l).rev() {
                idx[k] += 1;
                if idx[k] < sig.dims[k] {
                    done = false;
                    break;
                }
                idx[k] = 0;
            }
            if done {
                break;
            }
        }
    }
}

/// Elements per block of a predicate row: the block's mask (one byte each) stays in L1.
const PRED_BLOCK: usize = 2048;

/// A row whose condition is a predicate, in blocks: each block's mask is computed into a buffer
/// on the stack (from the operands, which the block's select has not written yet: in place, a
/// compared operand that is the output is read before it is overwritten), then the block is
/// selected by that mask as a mask row is.
///
/// # Safety
/// As for [`row`]: the row's `n` elements of every operand (lhs, rhs for comparisons, then,
/// else, out) lie inside their buffers.
#[inline(always)]
unsafe fn pred_row<const W: usize>(sig: &Signature, p: Ptrs, n: usize, ipt: bool, ipe: bool) {
    let l = sig.rank() - 1;
    let (ls, rs) = (sig.byte_stride(COND, l), sig.byte_stride(RHS, l));
    let [st, se, so] = [THEN, ELSE, OUT].map(|op| sig.byte_stride(op, l));
    let w = W as isize;
    let unit = |s: isize| s == 0 || s == w;
    let kind = if so == w && unit(st) && unit(se) {
        RowShape::Select {
            then_bcast: st == 0,
            else_bcast: se == 0,
        }
    } else {
        RowShape::Strided
    };
    let mut mask = [0u8; PRED_BLOCK];
    let mut s = 0;
    while s < n {
        let len = PRED_BLOCK.min(n - s);
        let at = |ptr: *const u8, stride: isize| ptr.wrapping_offset(s as isize * stride);
        // SAFETY: elements `s..s + len` of the row are inside the buffers (caller); the rhs
        // of a test is never read.
        unsafe {
            eval_run(
                sig.cond,
                at(p.cond, ls),
                ls,
                at(p.rhs, rs),
                rs,
                &mut mask[..len],
            )
        };
        let q = Ptrs {
            cond: mask.as_ptr(),
            then: at(p.then, st),
            else_: at(p.else_, se),
            out: at(p.out, so).cast_mut(),
            rhs: std::ptr::null(),
        };
        // SAFETY: as above; the mask holds `len` bytes, read at stride 1.
        unsafe { row::<W>(kind, [1, st, se, so], q, len, ipt, ipe) };
        s += len;
    }
}

/// A read-only source along a row: a slice, or one broadcast value.
trait Src<const W: usize> {
    fn at(&self, i: usize) -> [u8; W];
}

impl<const W: usize> Src<W> for &[[u8; W]] {
    #[inline(always)]
    fn at(&self, i: usize) -> [u8; W] {
        self[i]
    }
}

struct Splat<const W: usize>([u8; W]);

impl<const W: usize> Src<W> for Splat<W> {
    #[inline(always)]
    fn at(&self, _: usize) -> [u8; W] {
        self.0
    }
}

/// `out[i] = cond[i] != 0 ? t[i] : e[i]`, branch-free.
#[inline(always)]
fn select<const W: usize>(c: &[u8], t: impl Src<W>, e: impl Src<W>, o: &mut [[u8; W]]) {
    let n = o.len().min(c.len());
    let (c, o) = (&c[..n], &mut o[..n]);
    for i in 0..n {
        let (a, b) = (t.at(i), e.at(i));
        o[i] = if c[i] != 0 { a } else { b };
    }
}

/// In place: `o[i] = cond[i] != 0 ? o[i] : e[i]` (then is the output) or
/// `o[i] = cond[i] != 0 ? t[i] : o[i]` (else is the output).
#[inline(always)]
fn select_in_place<const W: usize>(
    c: &[u8],
    other: impl Src<W>,
    o: &mut [[u8; W]],
    keep_when_true: bool,
) {
    let n = o.len().min(c.len());
    let (c, o) = (&c[..n], &mut o[..n]);
    for i in 0..n {
        let x = other.at(i);
        let keep = (c[i] != 0) == keep_when_true;
        o[i] = if keep { o[i] } else { x };
    }
}

/// One row of `n` elements.
///
/// # Safety
/// The row's elements, by its strides from `p`, lie inside the buffers; aliasing as in [`run`].
#[inline(always)]
unsafe fn row<const W: usize>(
    kind: RowShape,
    strides: [isize; 4],
    p: Ptrs,
    n: usize,
    ipt: bool,
    ipe: bool,
) {
    if n == 0 {
        return;
    }
    // SAFETY: for every `from_raw_parts` below: the row's `n` elements are inside the buffers
    // (caller), `[u8; W]` has alignment 1, and a slice is only made of an input when it is not
    // the output, so no `&` overlaps the `&mut` output slice.
    unsafe {
        let elems = |ptr: *const u8| std::slice::from_raw_parts(ptr as *const [u8; W], n);
        let one = |ptr: *const u8| Splat((ptr as *const [u8; W]).read_unaligned());
        match kind {
            RowShape::Select {
                then_bcast: t_bcast,
                else_bcast: e_bcast,
            } => {
                let c = std::slice::from_raw_parts(p.cond, n);
                let o = std::slice::from_raw_parts_mut(p.out as *mut [u8; W], n);
                match (ipt, ipe, t_bcast, e_bcast) {
                    (true, _, _, false) => select_in_place(c, elems(p.else_), o, true),
                    (true, _, _, true) => select_in_place(c, one(p.else_), o, true),
                    (false, true, false, _) => select_in_place(c, elems(p.then), o, false),
                    (false, true, true, _) => select_in_place(c, one(p.then), o, false),
                    (false, false, false, false) => select(c, elems(p.then), elems(p.else_), o),
                    (false, false, true, false) => select(c, one(p.then), elems(p.else_), o),
                    (false, false, false, true) => select(c, elems(p.then), one(p.else_), o),
                    (false, false, true, true) => select(c, one(p.then), one(p.else_), o),
                }
            }
            RowShape::Copy {
                then_bcast: t_bcast,
                else_bcast: e_bcast,
            } => {
                let take_then = *p.cond != 0;
                let (src, bcast) = if take_then {
                    (p.then, t_bcast)
                } else {
                    (p.else_, e_bcast)
                };
                if std::ptr::eq(src, p.out) {
                    return; // in place: the output already holds the chosen input
                }
                let o = std::slice::from_raw_parts_mut(p.out as *mut [u8; W], n);
                if bcast {
                    o.fill(one(src).0);
                } else {
                    o.copy_from_slice(elems(src));
                }
            }
            RowShape::Strided => strided::<W>(strides, p, n),
        }
    }
}

/// Any strides along the row (bytes per element of cond, then, else, out), one element at a
/// time (branch-free select of the source).
///
/// # Safety
/// As for [`row`].
#[inline(always)]
unsafe fn strided<const W: usize>(strides: [isize; 4], p: Ptrs, n: usize) {
    let [sc, st, se, so] = strides;
    for i in 0..n as isize {
        // SAFETY: element `i` of the row is inside each buffer (caller); reads happen before
        // the write, so the exact in-place case reads the old value.
        unsafe {
            let t = (p.then.offset(i * st) as *const [u8; W]).read_unaligned();
            let e = (p.else_.offset(i * se) as *const [u8; W]).read_unaligned();
            let v = if *p.cond.offset(i * sc) != 0 { t } else { e };
            (p.out.offset(i * so) as *mut [u8; W]).write_unaligned(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan;
    use crate::reference;
    use crate::shape::{Broadcast, dense_strides as contiguous_strides, infer, strides_over};

    /// Whether `level` runs here; if not, says so (`SKIPPED: ...` on stderr), or fails under
    /// `SELECTJIT_REQUIRE_ALL_TIERS=1` (as `.ci/run` sets on an AVX-512 host, and as `tests/common/skip.rs` does
    /// for the other tests). On other architectures the x86 levels are inherent skips.
    fn runs(level: Level) -> bool {
        if level.available() {
            return true;
        }
        let what = format!("static kernels of level {}", level.name());
        let required = std::env::var("SELECTJIT_REQUIRE_ALL_TIERS").as_deref() == Ok("1");
        if required && cfg!(target_arch = "x86_64") {
            panic!("{what} were not run (this CPU lacks it) and SELECTJIT_REQUIRE_ALL_TIERS=1");
        }
        eprintln!("SKIPPED: {what} (this CPU lacks it)");
        false
    }

    /// Runs a call with explicit strides per input through the plan and a kernel level, and
    /// through the interpreter; compares the bytes.
    fn check<const W: usize>(
        level: Level,
        c: &[usize],
        t: &[usize],
        e: &[usize],
        t_strides: Option<Vec<isize>>,
        split: bool,
    ) {
        let b = infer(Broadcast::Numpy, c, t, e).unwrap();
        let n = |s: &[usize]| s.iter().product::<usize>();
        let tst = t_strides.unwrap_or_else(|| contiguous_strides(t).to_vec());
        // Signed strides: the buffer spans the lowest to the highest addressed element, and the
        // first element sits `t_off` elements in.
        let spans = t
            .iter()
            .zip(&tst)
            .map(|(d, s)| (*d.max(&1) as isize - 1) * s);
        let lo: isize = spans.clone().filter(|&x| x < 0).sum();
        let hi: isize = spans.filter(|&x| x > 0).sum();
        let (t_len, t_off) = ((hi - lo + 1) as usize, (-lo) as usize);
        let cond: Vec<u8> = (0..n(c))
            .map(|i| [0u8, 1, 0x80, 0, 0xff, 2, 0][i % 7])
            .collect();
        let tv: Vec<[u8; W]> = (0..t_len).map(|i| [(i * 7 + 1) as u8; W]).collect();
        let ev: Vec<[u8; W]> = (0..n(e)).map(|i| [(i * 3 + 100) as u8; W]).collect();
        let sc = strides_over(c, &contiguous_strides(c), b.cond, &b.out);
        let st = strides_over(t, &tst, b.then, &b.out);
        let se = strides_over(e, &contiguous_strides(e), b.else_, &b.out);
        let so = contiguous_strides(&b.out);
        let mut want = vec![[0u8; W]; n(&b.out)];
        reference::run(
            &b.out,
            reference::mask((&cond, &sc, 0)),
            reference::Src::Buf((&tv, &st, t_off)),
            reference::Src::Buf((&ev, &se, 0)),
            (&mut want, &so, 0),
        );
        let Some(sig) = plan(W, &b.out, [&sc, &st, &se, &so]) else {
            return;
        };
        let mut got = vec![[0x5au8; W]; n(&b.out)];
        let p = Ptrs {
            cond: cond.as_ptr(),
            then: tv[t_off..].as_ptr() as *const u8,
            else_: ev.as_ptr() as *const u8,
            out: got.as_mut_ptr() as *mut u8,
            rhs: std::ptr::null(),
        };
        let outer = sig.outer();
        // SAFETY: the buffers were sized from the same shapes and strides the plan came from.
        unsafe {
            if split && outer > 2 {
                run_with(level, &sig, p, 0, outer / 3);
                run_with(level, &sig, p, outer / 3, outer);
            } else {
                run_with(level, &sig, p, 0, outer);
            }
        }
        assert!(got == want, "{level:?} w{W} {c:?} {t:?} {e:?} {sig}");
    }

    fn all_layouts<const W: usize>(level: Level) {
        for n in [1usize, 15, 16, 17, 63, 64, 65, 1023, 4097] {
            check::<W>(level, &[n], &[n], &[n], None, true);
            check::<W>(level, &[n], &[], &[n], None, false);
            check::<W>(level, &[n], &[n], &[1], None, true);
            check::<W>(level, &[3, 1], &[3, n], &[n], None, true);
            check::<W>(level, &[1, n], &[3, n], &[], None, true);
        }
        // Transposed then: a [5, 7] view of a column-major buffer.
        check::<W>(level, &[5, 7], &[5, 7], &[7], Some(vec![1, 5]), true);
        // Sliced then: every other element.
        check::<W>(level, &[4, 9], &[4, 9], &[], Some(vec![18, 2]), false);
        // Reversed then (both dims), rows reversed, and reversed with step -2 into a forward
        // output: negative input strides reach the kernels as they are.
        for n in [1usize, 15, 16, 17, 65] {
            let ni = n as isize;
            check::<W>(level, &[3, n], &[3, n], &[n], Some(vec![-ni, -1]), true);
            check::<W>(level, &[1, n], &[3, n], &[], Some(vec![-ni, 1]), true);
            check::<W>(level, &[n], &[3, n], &[1], Some(vec![2 * ni, -2]), true);
        }
        check::<W>(level, &[2, 1, 19], &[19], &[2, 3, 1], None, true);
    }

    #[test]
    fn every_level_and_width_matches_the_interpreter() {
        for level in Level::ALL {
            if !runs(level) {
                continue;
            }
            all_layouts::<1>(level);
            all_layouts::<2>(level);
            all_layouts::<4>(level);
            all_layouts::<8>(level);
            all_layouts::<16>(level);
        }
    }

    #[test]
    fn in_place_rows() {
        for level in Level::ALL {
            if !runs(level) {
                continue;
            }
            let n = 37;
            let c: Vec<u8> = (0..n).map(|i| (i % 3) as u8).collect();
            let t: Vec<u32> = (0..n as u32).collect();
            let e: Vec<u32> = (0..n as u32).map(|i| 1000 + i).collect();
            let want: Vec<u32> = (0..n)
                .map(|i| if c[i] != 0 { t[i] } else { e[i] })
                .collect();
            let sig = crate::plan::plan_contiguous(4, n).unwrap();
            for then_is_out in [true, false] {
                let mut io = if then_is_out { t.clone() } else { e.clone() };
                let other = if then_is_out { &e } else { &t };
                let o = io.as_mut_ptr() as *mut u8;
                let p = Ptrs {
                    cond: c.as_ptr(),
                    then: if then_is_out {
                        o
                    } else {
                        other.as_ptr() as *const u8
                    },
                    else_: if then_is_out {
                        other.as_ptr() as *const u8
                    } else {
                        o
                    },
                    out: o,
                    rhs: std::ptr::null(),
                };
                // SAFETY: all buffers hold `n` elements; the output is exactly one input.
                unsafe { run_with(level, &sig, p, 0, n) };
                assert_eq!(io, want, "{level:?} then_is_out={then_is_out}");
            }
        }
    }
}

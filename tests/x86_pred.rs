//! Fused predicates in kernels of both x86 levels, run directly on signatures: every canonical
//! comparison (==, <, <=) and test (isnan, isinf, isfinite) of every non-complex dtype, selecting
//! elements of 1, 2, 4, 8 and 16 bytes, over vector rows (operands unit-stride or constant along
//! the row), row copies, strided rows with negative strides, outer loops and in place (the
//! compared tensor the output too), compared byte for byte with a reference built from the
//! per-element semantics (`eval_cond`), with guard bytes around every buffer. Values are edge
//! values of each dtype (NaN payloads quiet and signalling of both signs, ±0, ±inf, subnormals,
//! integer extremes, u64 above i64::MAX, bool bytes other than 0 and 1) or random bits. AVX2
//! runs natively and in the emulator; AVX-512 natively where the host has it, else in the
//! emulator.

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;
#[path = "common/skip.rs"]
mod skip;

use selectjit::codegen::CodeGen;
use selectjit::codegen::CodeGenOptions;
use selectjit::codegen::Kernel;
use selectjit::codegen::Ptrs;
use selectjit::codegen::x86::Level;
use selectjit::codegen::x86::X86Gen;
use selectjit::plan::COND;
use selectjit::plan::Canon;
use selectjit::plan::CondKind;
use selectjit::plan::ELSE;
use selectjit::plan::OUT;
use selectjit::plan::RHS;
use selectjit::plan::RowShape;
use selectjit::plan::Signature;
use selectjit::plan::THEN;
use selectjit::plan::eval_cond;
use selectjit::{DType, TestOp, Variant};
use selectjit_emu::{Emulator, disassemble};

/// Bytes of guard before and after every buffer.
const GUARD: usize = 64;

/// How kernels of a level are executed here.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Exec {
    Native,
    Emulated,
}

/// How `level` runs on this host: natively, else in the emulator (a [`skip::skip`] of the
/// native run: a failure under `SELECTJIT_REQUIRE_ALL_TIERS=1`).
fn exec_for(level: Level) -> Exec {
    if level.available() {
        return Exec::Native;
    }
    skip::skip(
        &format!("{level:?} kernels natively"),
        "the host lacks the instructions; they run in the emulator",
    );
    Exec::Emulated
}

/// Which kernel of a signature.
#[derive(Clone, Copy, Debug, Default)]
struct How {
    generic: bool,
    wide: bool,
    four_way: bool,
    prefetchw: bool,
}

const EXACT: How = How {
    generic: false,
    wide: false,
    four_way: false,
    prefetchw: false,
};
const GENERIC: How = How {
    generic: true,
    ..EXACT
};
const WIDE: How = How {
    wide: true,
    ..EXACT
};
const FOUR_WAY: How = How {
    four_way: true,
    ..EXACT
};
const PREFETCHW: How = How {
    prefetchw: true,
    ..EXACT
};

fn variant(xg: &X86Gen, sig: &Signature, how: How) -> Variant {
    Variant {
        tier: xg.tier(),
        nt: !how.generic && xg.uses_nt(sig),
        wide: how.wide,
        four_way: how.four_way,
        prefetchw: how.prefetchw,
    }
}

fn code(xg: &X86Gen, sig: &Signature, how: How) -> Vec<u8> {
    xg.emit_with(sig, how.generic, variant(xg, sig, how))
        .unwrap_or_else(|e| panic!("{sig}: {e}"))
        .0
}

/// The kernel of `xg` for `sig` (or its pattern), run natively (compiled by the engine's code
/// generator, which must give the same code) or in the emulator.
fn kernel(xg: &X86Gen, exec: Exec, sig: &Signature, how: How) -> Kernel {
    let code = code(xg, sig, how);
    let v = variant(xg, sig, how);
    match exec {
        Exec::Emulated => {
            Kernel::with_runner(sig.clone(), how.generic, v, code, Emulator::runner())
        }
        Exec::Native => {
            let cg = CodeGen::new(
                xg.tier(),
                CodeGenOptions {
                    nt_min_bytes: xg.nt_min_bytes(),
                    ..CodeGenOptions::default()
                },
            )
            .unwrap();
            let k = if how.generic {
                cg.compile_with(xg.tier(), sig, true)
            } else {
                cg.compile_variant(v, sig)
            }
            .unwrap();
            assert_eq!(k.x86_code(), Some(&code[..]), "{sig}: the same code");
            k
        }
    }
}

/// One operand's buffer: guard, the addressed span, guard; `base` is the offset of element 0.
struct Buf {
    data: Vec<u8>,
    base: usize,
}

fn layout(sig: &Signature, op: usize, misalign: usize) -> Buf {
    let w = sig.op_width(op) as i64;
    let (mut lo, mut hi) = (0i64, 0i64);
    for (k, &d) in sig.dims().iter().enumerate() {
        let span = (d as i64 - 1) * sig.strides(op)[k] as i64 * w;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    let len = (hi - lo + w) as usize + 2 * GUARD + misalign;
    Buf {
        data: vec![0; len],
        base: GUARD + misalign + (-lo) as usize,
    }
}

fn offset(sig: &Signature, op: usize, idx: &[usize]) -> isize {
    let w = sig.op_width(op) as isize;
    idx.iter()
        .enumerate()
        .map(|(k, &i)| i as isize * sig.strides(op)[k] * w)
        .sum()
}

fn for_each_index(sig: &Signature, begin: usize, end: usize, mut f: impl FnMut(&[usize])) {
    let r = sig.rank();
    if begin >= end {
        return;
    }
    let mut idx = vec![0usize; r];
    idx[0] = begin;
    loop {
        f(&idx);
        let mut k = r - 1;
        loop {
            idx[k] += 1;
            let lim = if k == 0 { end } else { sig.dims()[k] };
            if idx[k] < lim {
                break;
            }
            if k == 0 {
                return;
            }
            idx[k] = 0;
            k -= 1;
        }
    }
}

/// Edge values of a dtype, little-endian.
fn edges(d: DType) -> Vec<Vec<u8>> {
    let le = |v: u64, n: usize| v.to_le_bytes()[..n].to_vec();
    match d {
        DType::Bool => [0u64, 1, 2, 0x80, 0xff, 0, 1]
            .iter()
            .map(|&v| le(v, 1))
            .collect(),
        DType::F16 => [
            0x7e00u64, 0xfe01, 0x7c01, 0xfd23, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x0001, 0x83ff,
            0x7bff, 0xfbff, 0x0400, 0x3c00, 0xbc00, 0x4000, 0x3800,
        ]
        .iter()
        .map(|&v| le(v, 2))
        .collect(),
        DType::BF16 => [
            0x7fc0u64, 0xffc1, 0x7f81, 0xffa0, 0x0000, 0x8000, 0x7f80, 0xff80, 0x0001, 0x807f,
            0x7f7f, 0xff7f, 0x0080, 0x3f80, 0xbf80, 0x4000, 0x3f00,
        ]
        .iter()
        .map(|&v| le(v, 2))
        .collect(),
        DType::F32 => [
            0x7fc0_0000u64,
            0xffc0_0001,
            0x7f80_0001,
            0xff81_2345,
            0x0000_0000,
            0x8000_0000,
            0x7f80_0000,
            0xff80_0000,
            0x0000_0001,
            0x807f_ffff,
            0x7f7f_ffff,
            0xff7f_ffff,
            0x0080_0000,
            0x3f80_0000,
            0xbf80_0000,
            0x4000_0000,
            0x3f80_0001,
        ]
        .iter()
        .map(|&v| le(v, 4))
        .collect(),
        DType::F64 => [
            0x7ff8_0000_0000_0000u64,
            0xfff8_0000_0000_0001,
            0x7ff0_0000_0000_0001,
            0xfff4_5678_9abc_def0,
            0,
            0x8000_0000_0000_0000,
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            1,
            0x800f_ffff_ffff_ffff,
            0x7fef_ffff_ffff_ffff,
            0x0010_0000_0000_0000,
            0x3ff0_0000_0000_0000,
            0xbff0_0000_0000_0000,
            0x4000_0000_0000_0000,
            0x3ff0_0000_0000_0001,
            // The f32 NaN and subnormal edges widened would be different values: these are
            // f64's own.
            0x3690_0000_0000_0000,
        ]
        .iter()
        .map(|&v| le(v, 8))
        .collect(),
        _ => {
            let n = d.width();
            let bits = 8 * n as u32;
            let top = 1u64 << (bits - 1);
            let all = if n == 8 { u64::MAX } else { (1u64 << bits) - 1 };
            [
                0,
                1,
                2,
                all,
                all - 1,
                top,
                top - 1,
                top + 1,
                all >> 1,
                0x55 & all,
                all ^ 0x55,
            ]
            .iter()
            .map(|&v| le(v, n))
            .collect()
        }
    }
}

/// `n` elements of `d` (`w` bytes each): mostly edge values, some random bits.
fn values(rng: &mut Rng, d: DType, n: usize) -> Vec<u8> {
    let e = edges(d);
    let w = d.width();
    let mut out = Vec::with_capacity(n * w);
    for _ in 0..n {
        if rng.below(4) == 0 {
            out.extend(rng.bytes(w));
        } else {
            out.extend(&e[rng.below(e.len())]);
        }
    }
    out
}

/// Where the output lives.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    Own,
    Then,
    Else,
    /// out == then == lhs (an in-place ReLU).
    LhsThen,
    /// out == else == lhs.
    LhsElse,
}

/// The dtype of the operands of a condition's kind.
fn dtype(kind: CondKind) -> DType {
    match kind {
        CondKind::Cmp(_, d) | CondKind::Test(_, d) => d,
        CondKind::Mask => DType::U8,
    }
}

/// Runs `sig` with the kernel `how` of `xg` on outer sub-ranges and compares every byte of
/// every buffer with the reference.
fn check(xg: &X86Gen, exec: Exec, sig: &Signature, how: How, place: Place, seed: u64) {
    let mut rng = Rng(seed);
    let w = sig.width();
    let kind = sig.cond();
    let d = dtype(kind);
    // f16 compares need F16C (which the AVX2 tier does not require of the host): without it
    // they run in the emulator, a skip of the native run (said once per process).
    let exec = if exec == Exec::Native
        && d == DType::F16
        && !std::arch::is_x86_feature_detected!("f16c")
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            skip::skip(
                "f16 compares natively",
                "the host lacks F16C; they run in the emulator",
            )
        });
        Exec::Emulated
    } else {
        exec
    };
    let misalign = (seed % 67) as usize;
    let mut bufs: Vec<Buf> = (0..5)
        .map(|op| layout(sig, op, misalign * (op == OUT) as usize))
        .collect();
    for op in [COND, RHS] {
        let n = bufs[op].data.len();
        bufs[op].data = values(&mut rng, d, n.div_ceil(d.width()));
        bufs[op].data.truncate(n);
    }
    for op in [THEN, ELSE, OUT] {
        let n = bufs[op].data.len();
        bufs[op].data = if w == d.width() {
            // Values of the compared dtype: in place, elements whose predicate flips once
            // they are overwritten.
            let mut v = values(&mut rng, d, n.div_ceil(w));
            v.truncate(n);
            v
        } else {
            rng.bytes(n)
        };
    }
    // In place: the output is then's or else's buffer (and lhs's too).
    let (alias, lhs_too) = match place {
        Place::Own => (None, false),
        Place::Then => (Some(THEN), false),
        Place::Else => (Some(ELSE), false),
        Place::LhsThen => (Some(THEN), true),
        Place::LhsElse => (Some(ELSE), true),
    };
    if let Some(src) = alias {
        assert_eq!(
            sig.strides(src),
            sig.strides(OUT),
            "in place needs equal strides"
        );
        bufs[OUT] = Buf {
            data: bufs[src].data.clone(),
            base: bufs[src].base,
        };
        if lhs_too {
            assert_eq!(sig.strides(COND), sig.strides(OUT), "{sig}");
            assert_eq!(d.width(), w, "{sig}");
            bufs[COND] = Buf {
                data: bufs[src].data.clone(),
                base: bufs[src].base,
            };
        }
    }
    let outer = sig.outer();
    let splits: Vec<(usize, usize)> = match outer {
        0 | 1 => vec![(0, outer)],
        _ => {
            let k = 1 + (seed as usize % (outer - 1));
            vec![(0, k), (k, k), (k, outer)]
        }
    };
    // Reference: elementwise, from the inputs as they are before the call.
    let cw = d.width();
    let mut want = bufs[OUT].data.clone();
    for &(b, e) in &splits {
        for_each_index(sig, b, e, |idx| {
            let at = |op: usize| (bufs[op].base as isize + offset(sig, op, idx)) as usize;
            let l = &bufs[COND].data[at(COND)..at(COND) + cw];
            let r: &[u8] = if kind.binary() {
                &bufs[RHS].data[at(RHS)..at(RHS) + cw]
            } else {
                &[]
            };
            let src = if eval_cond(kind, l, r) { THEN } else { ELSE };
            let s = at(src);
            let o = at(OUT);
            want[o..o + w].copy_from_slice(&bufs[src].data[s..s + w]);
        });
    }
    let kernel = kernel(xg, exec, sig, how);
    let mut out = std::mem::take(&mut bufs[OUT].data);
    let out_base = bufs[OUT].base;
    let ptr_of = |op: usize, bufs: &[Buf], out: &mut [u8]| -> *mut u8 {
        let is_out = op == OUT || alias == Some(op) || (lhs_too && op == COND);
        if is_out {
            out.as_mut_ptr().wrapping_add(out_base)
        } else {
            bufs[op].data.as_ptr().wrapping_add(bufs[op].base) as *mut u8
        }
    };
    for &(b, e) in &splits {
        let p = Ptrs {
            cond: ptr_of(COND, &bufs, &mut out) as *const u8,
            then: ptr_of(THEN, &bufs, &mut out) as *const u8,
            else_: ptr_of(ELSE, &bufs, &mut out) as *const u8,
            out: ptr_of(OUT, &bufs, &mut out),
            rhs: if kind.binary() {
                ptr_of(RHS, &bufs, &mut out) as *const u8
            } else {
                std::ptr::null()
            },
        };
        // SAFETY: every buffer holds the bytes `sig` addresses from its base (see `layout`),
        // the output overlaps inputs only in place with equal strides, and `b..e` lies in the
        // outer dimension.
        unsafe { kernel.run(sig, p, b, e) };
    }
    if out != want {
        let first = out.iter().zip(&want).position(|(a, b)| a != b).unwrap();
        panic!(
            "{:?} {exec:?} {} kernel{}, {place:?}, seed {seed}: output differs at byte {} \
             (base {out_base}): got {:02x?}, want {:02x?}\nsignature {sig}\n{}",
            xg.level(),
            if how.generic { "generic" } else { "exact" },
            match (how.wide, how.four_way, how.prefetchw) {
                (true, _, true) => " (zmm blocks, prefetchw)",
                (true, _, _) => " (zmm blocks)",
                (_, true, _) => " (four-way)",
                (_, _, true) => " (prefetchw)",
                _ => "",
            },
            first,
            &out[first..(first + 16).min(out.len())],
            &want[first..(first + 16).min(want.len())],
            disassemble(&code(xg, sig, how))
        );
    }
}

/// Every condition kind the x86 tiers fuse: the three comparisons and the three tests of every
/// non-complex dtype.
fn kinds() -> Vec<CondKind> {
    let dtypes = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];
    let mut v = Vec::new();
    for d in dtypes {
        for c in [Canon::Eq, Canon::Lt, Canon::Le] {
            v.push(CondKind::Cmp(c, d));
        }
        for t in TestOp::ALL {
            v.push(CondKind::Test(t, d));
        }
    }
    v
}

const WIDTHS: [usize; 5] = [1, 2, 4, 8, 16];

fn psig(w: usize, kind: CondKind, dims: &[usize], st: [&[isize]; 5]) -> Signature {
    let zero = vec![0isize; dims.len()];
    let rhs: &[isize] = if kind.binary() { st[4] } else { &zero };
    Signature::with_cond(w, kind, dims, [st[0], st[1], st[2], st[3], rhs])
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Layouts of `n`-element rows: vector rows with both operands along the row, a scalar rhs
/// (`x > 0`), a scalar lhs, a causal mask (`k > q`: rhs constant along each row, different per
/// row), an attention mask shared by every row; row copies; strided rows with negative
/// strides; outer loops of rank 3 and 4.
fn layouts(w: usize, kind: CondKind, n: usize) -> Vec<Signature> {
    let m = n as isize;
    vec![
        psig(w, kind, &[n], [&[1], &[1], &[1], &[1], &[1]]),
        psig(w, kind, &[n], [&[1], &[1], &[0], &[1], &[0]]),
        psig(w, kind, &[n], [&[0], &[0], &[1], &[1], &[1]]),
        psig(
            w,
            kind,
            &[3, n],
            [&[0, 1], &[m, 1], &[0, 0], &[m, 1], &[1, 0]],
        ),
        psig(
            w,
            kind,
            &[3, n],
            [&[-m, 1], &[0, 0], &[m, 1], &[m, 1], &[0, 0]],
        ),
        psig(
            w,
            kind,
            &[3, n],
            [&[1, 0], &[m, 1], &[0, 1], &[m, 1], &[-1, 0]],
        ),
        psig(w, kind, &[n], [&[-1], &[2], &[-3], &[1], &[2]]),
        psig(
            w,
            kind,
            &[2, n],
            [&[1, 2], &[-m, -1], &[0, 0], &[1, 2], &[0, -1]],
        ),
        psig(
            w,
            kind,
            &[2, 3, n],
            [
                &[3 * m, m, 1],
                &[0, m, 1],
                &[1, 0, 0],
                &[3 * m, m, 1],
                &[0, -1, 0],
            ],
        ),
        psig(
            w,
            kind,
            &[2, 2, 2, n],
            [
                &[-4 * m, 2 * m, m, 1],
                &[4 * m, 2 * m, m, 1],
                &[0, 1, 0, 0],
                &[4 * m, 2 * m, m, 1],
                &[0, 0, 3, -1],
            ],
        ),
    ]
}

/// The places `sig` can be run in: own output; then's or else's buffer where the strides
/// allow; those also as lhs's where lhs has out's layout and dtype width.
fn places(sig: &Signature) -> Vec<Place> {
    let mut v = vec![Place::Own];
    let same = |op: usize| sig.strides(op) == sig.strides(OUT);
    let lhs = same(COND) && sig.cond().operand_width() == sig.width();
    if same(THEN) {
        v.push(Place::Then);
        if lhs {
            v.push(Place::LhsThen);
        }
    }
    if same(ELSE) {
        v.push(Place::Else);
        if lhs {
            v.push(Place::LhsElse);
        }
    }
    v
}

/// Runs `s` exact (ordinary and non-temporal stores) and generic, in every place; AVX-512 also
/// with zmm blocks; four-way where it walks so; `prefetchw` where it claims lines (zmm blocks
/// on AVX-512).
fn check_all(level: Level, exec: Exec, s: &Signature, seed: u64) {
    let xgs = [X86Gen::new(level, usize::MAX), X86Gen::new(level, 0)];
    for (g, xg) in xgs.iter().enumerate() {
        for place in places(s) {
            check(xg, exec, s, EXACT, place, seed + g as u64);
            if g == 0 {
                check(xg, exec, s, GENERIC, place, seed + 7);
            }
            if level == Level::Avx512 && X86Gen::runs_wide(s) {
                check(xg, exec, s, WIDE, place, seed + 11 + g as u64);
            }
            if g == 1 && xg.runs_four_way(s) {
                check(xg, exec, s, FOUR_WAY, place, seed + 13);
            }
            if g == 0 && X86Gen::runs_prefetchw(s) {
                let wide = level == Level::Avx512 && X86Gen::runs_wide(s);
                check(xg, exec, s, How { wide, ..PREFETCHW }, place, seed + 17);
            }
        }
    }
}

/// Every kind × width × layout, rows of a few lengths around the vector boundaries.
fn sweep_kinds(level: Level, exec: Exec, lengths: &[usize]) {
    let mut seed = 1;
    for kind in kinds() {
        for w in WIDTHS {
            for &n in lengths {
                for s in layouts(w, kind, n) {
                    check_all(level, exec, &s, seed);
                    seed += 1;
                }
            }
        }
    }
}

#[test]
fn avx2_every_kind_width_and_layout() {
    sweep_kinds(Level::Avx2, exec_for(Level::Avx2), &[1, 7, 33, 130]);
}

#[test]
fn avx512_every_kind_width_and_layout() {
    let exec = exec_for(Level::Avx512);
    let lengths: &[usize] = if exec == Exec::Native {
        &[1, 7, 33, 130]
    } else {
        &[7, 130]
    };
    sweep_kinds(Level::Avx512, exec, lengths);
}

/// AVX2 kernels in the emulator too: it checks every load against the operands' extents (an
/// overlapping vector read past a row's end would not fault natively).
#[test]
fn avx2_every_kind_in_the_emulator() {
    sweep_kinds(Level::Avx2, Exec::Emulated, &[7, 130]);
}

/// One kind of each class of compare (floats of every width, signed and unsigned integers at
/// and below the selected width, bool, the tests), rows of every length up to 300 and a few
/// long ones: every head, main loop, tail and short-row path of both levels.
fn sweep_lengths(level: Level, exec: Exec) {
    let kinds = [
        CondKind::Cmp(Canon::Lt, DType::F32),
        CondKind::Cmp(Canon::Le, DType::U8),
        CondKind::Cmp(Canon::Eq, DType::I64),
        CondKind::Cmp(Canon::Lt, DType::F16),
        CondKind::Cmp(Canon::Le, DType::BF16),
        CondKind::Cmp(Canon::Eq, DType::Bool),
        CondKind::Cmp(Canon::Lt, DType::U64),
        CondKind::Cmp(Canon::Le, DType::I16),
        CondKind::Test(TestOp::IsNan, DType::F64),
        CondKind::Test(TestOp::IsFinite, DType::F32),
    ];
    let mut lengths: Vec<usize> = (1..=300).collect();
    lengths.extend([511, 512, 513, 1000, 4099]);
    let mut seed = 50_000;
    for kind in kinds {
        for w in WIDTHS {
            for &n in &lengths {
                // Vector rows: rhs along the row and a scalar; then/else splats.
                for (t, e, r) in [(1, 1, 1), (1, 0, 0), (0, 1, 1), (0, 0, 0)] {
                    let s = psig(w, kind, &[n], [&[1], &[t], &[e], &[1], &[r]]);
                    check_all(level, exec, &s, seed);
                    seed += 1;
                }
            }
        }
    }
}

#[test]
fn avx2_rows_every_length() {
    sweep_lengths(Level::Avx2, exec_for(Level::Avx2));
}

#[test]
fn avx512_rows_every_length() {
    sweep_lengths(Level::Avx512, exec_for(Level::Avx512));
}

/// Long rows (non-temporal stores, four-way walks) and many short rows (the quarter walk,
/// which moves rhs's pointer too), for a few kinds.
fn sweep_long(level: Level, exec: Exec) {
    let kinds = [
        CondKind::Cmp(Canon::Lt, DType::F32),
        CondKind::Cmp(Canon::Eq, DType::I64),
        CondKind::Cmp(Canon::Lt, DType::I32),
        CondKind::Test(TestOp::IsNan, DType::F64),
    ];
    let mut seed = 90_000;
    for kind in kinds {
        for w in WIDTHS {
            let n = (4 * 1024 + 64) / w + 37;
            let m = n as isize;
            let sigs = [
                psig(w, kind, &[n], [&[1], &[1], &[0], &[1], &[0]]),
                psig(
                    w,
                    kind,
                    &[2, n],
                    [&[m, 1], &[m, 1], &[m, 1], &[m, 1], &[m, 1]],
                ),
                psig(
                    w,
                    kind,
                    &[9, 100],
                    [&[0, 1], &[100, 1], &[0, 0], &[100, 1], &[1, 0]],
                ),
                psig(
                    w,
                    kind,
                    &[2, 5, 40],
                    [
                        &[200, 40, 1],
                        &[0, 40, 1],
                        &[0, 0, 0],
                        &[200, 40, 1],
                        &[-1, 0, 0],
                    ],
                ),
            ];
            for s in sigs {
                check_all(level, exec, &s, seed);
                seed += 1;
            }
        }
    }
}

#[test]
fn long_rows_and_walks() {
    for level in [Level::Avx2, Level::Avx512] {
        sweep_long(level, exec_for(level));
    }
    sweep_long(Level::Avx2, Exec::Emulated);
}

/// The kernels of predicates are what their row shapes say: vector rows compare in registers
/// (no cond byte is read: there is none) and store no mask; copy rows test once; the decoded
/// instructions are the families of each level.
#[test]
fn predicate_kernels_compare_in_registers() {
    for level in [Level::Avx2, Level::Avx512] {
        let xg = X86Gen::new(level, usize::MAX);
        for kind in kinds() {
            for w in WIDTHS {
                for s in layouts(w, kind, 200) {
                    let text = disassemble(&code(&xg, &s, EXACT));
                    let d = dtype(kind);
                    let half = matches!(d, DType::F16 | DType::BF16);
                    // Halves compare as 16-bit integer keys, never widened: on AVX-512 under a
                    // not-NaN opmask (magnitudes classified against infinity's bits), on AVX2
                    // where the selected elements are at most 2 bytes wide (`vpsignw` keys,
                    // word compares, the NaN lanes from the magnitudes).
                    let half_keys = half && (level == Level::Avx512 || w <= 2);
                    let float_cmp = matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
                        && kind.binary()
                        && !half_keys;
                    if s.row_shape() != RowShape::Strided && float_cmp {
                        assert!(text.contains("vcmp"), "{level:?} {s}:\n{text}");
                    }
                    if level == Level::Avx512 && matches!(s.row_shape(), RowShape::Select { .. }) {
                        assert!(text.contains("vpblendm"), "{level:?} {s}");
                    }
                    if half_keys && level == Level::Avx512 {
                        // An unsigned word compare into an opmask (`vpcmp*uw k`): the
                        // magnitudes against infinity's bits.
                        assert!(text.contains("uw k"), "{level:?} {s}:\n{text}");
                        if kind.binary() {
                            // Keys: the signs into an opmask, a signed word compare.
                            assert!(text.contains("vpmovw2m"), "{level:?} {s}:\n{text}");
                            assert!(
                                ["vpcmpeqw k", "vpcmpltw k", "vpcmplew k"]
                                    .iter()
                                    .any(|c| text.contains(c)),
                                "{level:?} {s}:\n{text}"
                            );
                        }
                    }
                    if half_keys && level == Level::Avx2 {
                        assert!(
                            text.contains("vpcmpgtw") || text.contains("vpcmpeqw"),
                            "{level:?} {s}:\n{text}"
                        );
                        if kind.binary() {
                            assert!(text.contains("vpsignw"), "{level:?} {s}:\n{text}");
                        }
                    }
                    if half_keys {
                        for widening in ["vcvtph2ps", "vpmovzxwd", "vcmp", "vfpclass"] {
                            assert!(!text.contains(widening), "{level:?} {s}:\n{text}");
                        }
                    } else if d == DType::F16 && kind.binary() {
                        assert!(text.contains("vcvtph2ps"), "{level:?} {s}");
                    }
                    // Masks are never stored: every store goes to the output (rcx and what
                    // moves with it) or the stack.
                    assert!(!text.contains("kmovq qword ptr"), "{level:?} {s}");
                }
            }
        }
    }
}

/// What the x86 tiers cover: every predicate but those of complex dtypes (and f16 at the AVX2
/// level on a host without F16C).
#[test]
fn covers_every_predicate_but_complex() {
    let f16c = std::arch::is_x86_feature_detected!("f16c");
    for level in [Level::Avx2, Level::Avx512] {
        let xg = X86Gen::new(level, usize::MAX);
        for kind in kinds() {
            let s = psig(4, kind, &[8], [&[1], &[1], &[1], &[1], &[1]]);
            let want = f16c || level == Level::Avx512 || dtype(kind) != DType::F16;
            assert_eq!(xg.covers(&s), want, "{level:?} {s}");
        }
    }
    let xg = X86Gen::new(Level::Avx2, usize::MAX);
    for d in [DType::Complex64, DType::Complex128] {
        for kind in [
            CondKind::Cmp(Canon::Lt, d),
            CondKind::Test(TestOp::IsNan, d),
        ] {
            let s = psig(8, kind, &[8], [&[1], &[1], &[1], &[1], &[1]]);
            assert!(!xg.covers(&s), "{s}");
            assert!(xg.emit(&s, false).is_err(), "{s}");
        }
    }
}

//! Fused predicates in the Cranelift tier: kernels whose condition is a comparison or a test
//! computed in registers, compiled directly with [`Jit`] and run on buffers laid out from the
//! signature's strides, against a reference built element by element from `eval_cond`
//! (numpy's semantics), byte for byte — the whole output buffer, gaps and guard bytes included.
//!
//! Covered: every canonical comparison (`==`, `<`, `<=`) and test (`isnan`, `isinf`,
//! `isfinite`) × every dtype × selected widths 1, 2, 4, 8, 16 × row shapes (vector rows with
//! both operands in memory, a scalar rhs, a splatted lhs, rows broadcast over outer dims; copy
//! rows; strided and reversed rows) × exact and shape-generic kernels (split over the outer
//! range) × `blendv` and portable `bitselect` lane selects × in place (the output is the
//! compared operand and `then`, as in an in-place ReLU; `else`; or the compared operand only),
//! with edge values: NaNs with payloads and signs, ±0, ±inf, subnormals, integer min / max, u64
//! above i64::MAX, bool bytes other than 0 and 1.

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;
#[path = "common/pred_cases.rs"]
mod pred_cases;
use pred_cases::{
    Bufs, GUARD, Layout, kinds, layouts, make_bufs, pool, reference, signature, value,
};

use selectjit::codegen::Kernel;
use selectjit::codegen::Ptrs;
use selectjit::codegen::cranelift::Jit;
use selectjit::plan::Canon;
use selectjit::plan::CondKind;
use selectjit::plan::ELSE;
use selectjit::plan::OUT;
use selectjit::plan::Pattern;
use selectjit::plan::RHS;
use selectjit::plan::RowShape;
use selectjit::plan::Signature;
use selectjit::plan::THEN;
use selectjit::plan::eval_cond;
use selectjit::{DType, TestOp};

/// Runs `kernel` on the buffers (in two calls over the outer range when it has 3 or more).
fn run(kernel: &Kernel, sig: &Signature, l: &Layout, b: &mut Bufs) {
    let out_base = b.base[OUT];
    let out_ptr = b.data[OUT].as_mut_ptr();
    let ptr = |op: usize| -> *const u8 {
        if l.alias[op] {
            // SAFETY: `base` is within the buffer.
            unsafe { out_ptr.add(out_base) as *const u8 }
        } else {
            // SAFETY: as above.
            unsafe { b.data[op].as_ptr().add(b.base[op]) }
        }
    };
    let p = Ptrs {
        cond: ptr(0),
        then: ptr(THEN),
        else_: ptr(ELSE),
        // SAFETY: as above.
        out: unsafe { out_ptr.add(out_base) },
        rhs: if sig.cond().binary() {
            ptr(RHS)
        } else {
            std::ptr::null()
        },
    };
    let outer = sig.outer();
    let cuts: Vec<usize> = if outer >= 3 {
        vec![0, 1, outer]
    } else {
        vec![0, outer]
    };
    for c in cuts.windows(2) {
        // SAFETY: every buffer spans every element its strides address over `dims` from its
        // base (see `make_bufs`), the output's elements are distinct, and inputs other than
        // the aliased ones (which are the output exactly) do not overlap it.
        unsafe { kernel.run(sig, p, c[0], c[1]) };
    }
}

fn check(jit: &Jit, kind: CondKind, w: usize, l: &Layout, generic: bool, rng: &mut Rng) -> usize {
    let sig = signature(kind, w, l);
    let kernel = if generic {
        jit.compile_generic(&Pattern::of(&sig))
    } else {
        jit.compile(&sig)
    }
    .unwrap_or_else(|e| panic!("{kind} w{w} {}: {e}", l.name));
    let mut b = make_bufs(kind, w, l, rng, false);
    let want = reference(kind, w, l, &b, false);
    run(&kernel, &sig, l, &mut b);
    if b.data[OUT] != want {
        let at = b.data[OUT]
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap();
        panic!(
            "{kind} w{w} {} ({:?}, {}, blendv {}): first wrong output byte {} of {} (got {:#04x}, want {:#04x}); signature {sig}",
            l.name,
            sig.row_shape(),
            if generic { "generic" } else { "exact" },
            jit.uses_blendv(),
            at as isize - b.base[OUT] as isize,
            want.len() - 2 * GUARD,
            b.data[OUT][at],
            want[at]
        );
    }
    1
}

fn jits() -> [Jit; 2] {
    let fast = Jit::host(true).unwrap();
    let mut portable = Jit::host(true).unwrap();
    portable.set_blendv(false);
    [fast, portable]
}

/// Every kind × every selected width × every layout, on rows long enough for the wide steps,
/// the 16-element steps and a scalar tail; exact and generic, lane selects alternating.
#[test]
fn every_kind_width_and_layout() {
    let jits = jits();
    let mut rng = Rng(0x9e37_79b9);
    let mut runs = 0;
    let mut shapes = std::collections::HashSet::new();
    for (ki, kind) in kinds().into_iter().enumerate() {
        let cw = kind.dtype().unwrap().width();
        for (wi, w) in [1usize, 2, 4, 8, 16].into_iter().enumerate() {
            // Row lengths cycle through the loop structure's cases.
            let n = [100usize, 75, 131, 37][(ki + wi) % 4];
            for (li, l) in layouts(n, kind.binary(), cw == w).iter().enumerate() {
                let generic = (ki + wi + li) % 2 == 1;
                let jit = &jits[(ki / 2 + li) % 2];
                runs += check(jit, kind, w, l, generic, &mut rng);
                shapes.insert(std::mem::discriminant(&signature(kind, w, l).row_shape()));
            }
        }
    }
    // Every row shape was exercised.
    assert_eq!(shapes.len(), 3);
    assert!(runs > 3000, "{runs} runs");
}

/// Short rows (below one vector step), rows of exactly one and two steps, and long rows with
/// every remainder, for one kind per class of dtype.
#[test]
fn row_lengths() {
    let jits = jits();
    let mut rng = Rng(7);
    let kinds = [
        CondKind::Cmp(Canon::Lt, DType::F32),
        CondKind::Cmp(Canon::Le, DType::BF16),
        CondKind::Cmp(Canon::Eq, DType::U64),
        CondKind::Cmp(Canon::Lt, DType::Bool),
        CondKind::Cmp(Canon::Lt, DType::Complex64),
        CondKind::Test(TestOp::IsInf, DType::F16),
        CondKind::Test(TestOp::IsNan, DType::Complex128),
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        for w in [1usize, 2, 4, 8, 16] {
            for n in [
                1usize, 2, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
            ] {
                let l = &layouts(n, kind.binary(), false)[0];
                check(&jits[i % 2], kind, w, l, n % 2 == 0, &mut rng);
            }
        }
    }
}

/// The in-place ReLU of the issue: `x = where(x > 0, x, 0)`, i.e. `where(0 < x, x, 0)` with
/// the output being the rhs and `then`, for f32, f16, bf16, i8 and f64.
#[test]
fn in_place_relu() {
    for jit in jits() {
        for (d, zero) in [
            (DType::F32, vec![0u8; 4]),
            (DType::F16, vec![0u8; 2]),
            (DType::BF16, vec![0u8; 2]),
            (DType::I8, vec![0u8; 1]),
            (DType::F64, vec![0u8; 8]),
        ] {
            let w = d.width();
            let kind = CondKind::Cmp(Canon::Lt, d);
            let n = 1000usize;
            let sig = Signature::with_cond(w, kind, &[n], [&[0], &[1], &[0], &[1], &[1]]).unwrap();
            let k = jit.compile(&sig).unwrap();
            let mut rng = Rng(d.width() as u64);
            let vals = pool(d);
            let mut x: Vec<u8> = (0..n).flat_map(|_| value(d, &vals, &mut rng)).collect();
            let want: Vec<u8> = x
                .chunks(w)
                .flat_map(|v| {
                    if eval_cond(kind, &zero, v) {
                        v.to_vec()
                    } else {
                        zero.clone()
                    }
                })
                .collect();
            let p = Ptrs {
                cond: zero.as_ptr(),
                then: x.as_ptr(),
                else_: zero.as_ptr(),
                out: x.as_mut_ptr(),
                rhs: x.as_ptr(),
            };
            // SAFETY: n elements of x (the output, then and rhs exactly), the scalar zero.
            unsafe { k.run(&sig, p, 0, n) };
            let bad = x.iter().zip(&want).position(|(a, b)| a != b);
            assert_eq!(
                bad,
                None,
                "{d:?} blendv {}: first wrong byte",
                jit.uses_blendv()
            );
            assert!(x.chunks(w).any(|v| v != zero.as_slice()) && x.contains(&0));
        }
    }
}

/// The predicate kernels' row shapes are the planner's: a vector select where lhs and rhs are
/// unit stride or broadcast along the row, a copy where both are broadcast.
#[test]
fn row_shapes_of_predicates() {
    let k = CondKind::Cmp(Canon::Eq, DType::I64);
    let sig = |l: isize, r: isize| {
        Signature::with_cond(4, k, &[9], [&[l], &[1], &[1], &[1], &[r]])
            .unwrap()
            .row_shape()
    };
    assert!(matches!(sig(1, 0), RowShape::Select { .. }));
    assert!(matches!(sig(0, 1), RowShape::Select { .. }));
    assert!(matches!(sig(0, 0), RowShape::Copy { .. }));
    assert!(matches!(sig(2, 1), RowShape::Strided));
}

//! Predicate cases shared by the tests of predicate kernels (the Cranelift tier on this host,
//! and exported kernels on other architectures): every condition, edge values of every dtype,
//! layouts that reach every row shape and in-place form, buffers laid out from strides, and
//! the expected output built element by element from `eval_cond` (numpy's semantics).
#![allow(dead_code)]

use super::rng::Rng;
use selectjit::plan::Canon;
use selectjit::plan::CondKind;
use selectjit::plan::ELSE;
use selectjit::plan::OPS;
use selectjit::plan::OUT;
use selectjit::plan::RHS;
use selectjit::plan::Signature;
use selectjit::plan::THEN;
use selectjit::plan::eval_cond;
use selectjit::{DType, TestOp};

pub const GUARD: usize = 64;

/// Every condition the kernels implement, for every dtype.
pub fn kinds() -> Vec<CondKind> {
    let mut v = Vec::new();
    for d in DType::ALL {
        for c in [Canon::Eq, Canon::Lt, Canon::Le] {
            v.push(CondKind::Cmp(c, d));
        }
        for t in TestOp::ALL {
            v.push(CondKind::Test(t, d));
        }
    }
    v
}

/// Edge values of a dtype (little-endian bytes).
pub fn pool(d: DType) -> Vec<Vec<u8>> {
    let f32s = || -> Vec<u32> {
        vec![
            0,
            0x8000_0000,
            1.0f32.to_bits(),
            (-1.0f32).to_bits(),
            2.5f32.to_bits(),
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0000,
            0x7f80_0001,
            0xffc0_1234,
            1,
            0x8000_0001,
            f32::MAX.to_bits(),
            f32::MIN.to_bits(),
        ]
    };
    let f64s = || -> Vec<u64> {
        vec![
            0,
            0x8000_0000_0000_0000,
            1.0f64.to_bits(),
            (-1.0f64).to_bits(),
            2.5f64.to_bits(),
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            0x7ff8_0000_0000_0000,
            0x7ff0_0000_0000_0001,
            0xfff8_0000_dead_beef,
            1,
            0x8000_0000_0000_0001,
            f64::MAX.to_bits(),
            f64::MIN.to_bits(),
        ]
    };
    let le = |v: u64, w: usize| v.to_le_bytes()[..w].to_vec();
    match d {
        DType::Bool => [0u64, 1, 2, 0x80, 0xff].map(|v| le(v, 1)).to_vec(),
        DType::I8 | DType::U8 => [0u64, 1, 2, 0x7f, 0x80, 0x81, 0xfe, 0xff]
            .map(|v| le(v, 1))
            .to_vec(),
        DType::I16 | DType::U16 => [0u64, 1, 2, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff]
            .map(|v| le(v, 2))
            .to_vec(),
        DType::I32 | DType::U32 => [
            0u64,
            1,
            2,
            0x7fff_ffff,
            0x8000_0000,
            0x8000_0001,
            0xffff_fffe,
            0xffff_ffff,
        ]
        .map(|v| le(v, 4))
        .to_vec(),
        DType::I64 | DType::U64 => [
            0u64,
            1,
            2,
            i64::MAX as u64,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
            0xffff_ffff,
            0x1_0000_0000,
        ]
        .map(|v| le(v, 8))
        .to_vec(),
        DType::F16 => [
            0u64, 0x8000, 0x3c00, 0xbc00, 0x4100, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x0001,
            0x8001, 0x7bff, 0xfbff,
        ]
        .map(|v| le(v, 2))
        .to_vec(),
        DType::BF16 => [
            0u64, 0x8000, 0x3f80, 0xbf80, 0x4020, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xff81, 0x0001,
            0x8001, 0x7f7f, 0xff7f,
        ]
        .map(|v| le(v, 2))
        .to_vec(),
        DType::F32 => f32s().into_iter().map(|v| le(v as u64, 4)).collect(),
        DType::F64 => f64s().into_iter().map(|v| le(v, 8)).collect(),
        DType::Complex64 => {
            let p = f32s();
            let mut v = Vec::new();
            for (i, &re) in p.iter().enumerate() {
                for &im in &[p[0], p[2], p[7], p[5], p[(i * 5) % p.len()]] {
                    v.push([le(re as u64, 4), le(im as u64, 4)].concat());
                }
            }
            v
        }
        DType::Complex128 => {
            let p = f64s();
            let mut v = Vec::new();
            for (i, &re) in p.iter().enumerate() {
                for &im in &[p[0], p[2], p[7], p[5], p[(i * 5) % p.len()]] {
                    v.push([le(re, 8), le(im, 8)].concat());
                }
            }
            v
        }
    }
}

/// One operand value: mostly an edge value (so that equal values and NaNs meet often),
/// sometimes random bits.
pub fn value(d: DType, pool: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
    if rng.below(5) == 0 {
        rng.bytes(d.width())
    } else {
        pool[rng.below(pool.len())].clone()
    }
}

/// A loop nest to run: dims and element strides per operand (cond = lhs, then, else, out, rhs).
#[derive(Clone)]
pub struct Layout {
    pub name: &'static str,
    pub dims: Vec<usize>,
    pub strides: [Vec<isize>; OPS],
    /// Which inputs are the output's buffer: lhs, then, else, rhs.
    pub alias: [bool; OPS],
}

/// Element offsets an operand spans: (lowest, highest).
pub fn span(dims: &[usize], st: &[isize]) -> (isize, isize) {
    let mut lo = 0;
    let mut hi = 0;
    for (&d, &s) in dims.iter().zip(st) {
        let e = (d as isize - 1) * s;
        if e < 0 {
            lo += e;
        } else {
            hi += e;
        }
    }
    (lo, hi)
}

/// Visits every index of `dims`, in row-major order.
pub fn for_each_index(dims: &[usize], mut f: impl FnMut(&[usize])) {
    let mut idx = vec![0usize; dims.len()];
    loop {
        f(&idx);
        let mut k = dims.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

pub fn offset(idx: &[usize], st: &[isize]) -> isize {
    idx.iter().zip(st).map(|(&i, &s)| i as isize * s).sum()
}

/// The layouts of a run with lhs / rhs rows of `n` elements, for a comparison (`binary`) or
/// a test, where the compared width equals the selected one (`same`: in place is possible).
pub fn layouts(n: usize, binary: bool, same: bool) -> Vec<Layout> {
    let z = |r: usize| vec![0isize; r];
    let mut v = Vec::new();
    let mut add = |name, dims: Vec<usize>, st: [Vec<isize>; OPS], alias| {
        let mut st = st;
        if !binary {
            st[RHS] = z(dims.len());
        }
        v.push(Layout {
            name,
            dims,
            strides: st,
            alias,
        })
    };
    let one = || vec![1isize];
    let no = [false; OPS];
    add(
        "contiguous",
        vec![n],
        [one(), one(), one(), one(), one()],
        no,
    );
    add(
        "scalar rhs, broadcast else",
        vec![n],
        [one(), one(), z(1), one(), z(1)],
        no,
    );
    if binary {
        add(
            "splatted lhs, broadcast then",
            vec![n],
            [z(1), z(1), one(), one(), one()],
            no,
        );
    }
    // Rows broadcast over an outer dim (rhs a row vector, lhs a column), outer stride of out.
    let r = 3usize;
    let ni = n as isize;
    add(
        "rows: lhs per row, rhs broadcast over rows",
        vec![r, n],
        [
            vec![ni, 1],
            vec![ni, 1],
            vec![0, 1],
            vec![ni + 2, 1],
            vec![0, 1],
        ],
        no,
    );
    // Copy rows: the condition constant along the row.
    add(
        "copy rows",
        vec![5, n],
        [
            vec![1, 0],
            vec![ni, 1],
            vec![0, 1],
            vec![ni, 1],
            vec![-1, 0],
        ],
        no,
    );
    add(
        "copy rows, filled",
        vec![4, n],
        [vec![1, 0], vec![1, 0], vec![0, 1], vec![ni, 1], vec![0, 0]],
        no,
    );
    // Strided: every other element, reversed lhs, transposed then, a strided output.
    add(
        "strided, reversed lhs",
        vec![2, n],
        [
            vec![ni, -1],
            vec![1, 2],
            vec![2 * ni, 2],
            vec![ni, 1],
            vec![-ni, 1],
        ],
        no,
    );
    add(
        "strided output",
        vec![n],
        [one(), one(), one(), vec![3], vec![2]],
        no,
    );
    if same {
        // In place: the output is the compared operand and then (in-place ReLU), or else and
        // the rhs, or the compared operand only.
        add(
            "in place: out = lhs = then",
            vec![2, n],
            [
                vec![ni, 1],
                vec![ni, 1],
                vec![0, 1],
                vec![ni, 1],
                vec![0, 0],
            ],
            [true, true, false, false, false],
        );
        if binary {
            add(
                "in place: out = rhs = else",
                vec![n],
                [z(1), one(), one(), one(), one()],
                [false, false, true, false, true],
            );
        }
        add(
            "in place: out = lhs only",
            vec![n],
            [one(), one(), one(), one(), z(1)],
            [true, false, false, false, false],
        );
    }
    v
}

/// Buffers of one run: per operand the bytes and its base element's byte offset.
pub struct Bufs {
    pub data: [Vec<u8>; OPS],
    pub base: [usize; OPS],
}

/// An element of `d` in a machine's byte order from its little-endian bytes, or back: the bytes
/// of each part (the element, or each half of a complex one) reversed on big-endian machines.
pub fn swap_order(d: DType, bytes: &[u8], big: bool) -> Vec<u8> {
    let part = match d {
        DType::Complex64 | DType::Complex128 => d.width() / 2,
        _ => d.width(),
    };
    if !big {
        return bytes.to_vec();
    }
    bytes
        .chunks(part)
        .flat_map(|c| c.iter().rev().copied())
        .collect()
}

/// The buffers of a run, the compared operands' values in the byte order of the machine that
/// runs it (`big`: big-endian).
pub fn make_bufs(kind: CondKind, w: usize, l: &Layout, rng: &mut Rng, big: bool) -> Bufs {
    let d = kind.dtype().unwrap();
    let cw = d.width();
    let vals = pool(d);
    let mut data: [Vec<u8>; OPS] = Default::default();
    let mut base = [0usize; OPS];
    for op in 0..OPS {
        let width = if op == 0 || op == RHS { cw } else { w };
        let (lo, hi) = span(&l.dims, &l.strides[op]);
        let len = (hi - lo + 1) as usize * width;
        let guard = if op == OUT { GUARD } else { 0 };
        base[op] = guard + (-lo) as usize * width;
        let mut b = rng.bytes(len + 2 * guard);
        if op == 0 || op == RHS {
            for e in 0..len / cw {
                let v = swap_order(d, &value(d, &vals, rng), big);
                b[guard + e * cw..guard + (e + 1) * cw].copy_from_slice(&v);
            }
        }
        data[op] = b;
    }
    // Aliased inputs are the output's buffer; their values must also be of the compared dtype
    // where the compared operand is the output.
    if l.alias[0] || l.alias[RHS] {
        let (lo, hi) = span(&l.dims, &l.strides[OUT]);
        for e in 0..=(hi - lo) as usize {
            let v = swap_order(d, &value(d, &vals, rng), big);
            let at = base[OUT] + e * w;
            data[OUT][at..at + w].copy_from_slice(&v);
        }
    }
    Bufs { data, base }
}

/// The expected output buffer (`big`: the compared values are stored big-endian).
pub fn reference(kind: CondKind, w: usize, l: &Layout, b: &Bufs, big: bool) -> Vec<u8> {
    let d = kind.dtype().unwrap();
    let cw = d.width();
    let src = |op: usize| if l.alias[op] { OUT } else { op };
    let mut out = b.data[OUT].clone();
    let at = |op: usize, idx: &[usize], width: usize| -> usize {
        (b.base[src(op)] as isize + offset(idx, &l.strides[op]) * width as isize) as usize
    };
    for_each_index(&l.dims, |idx| {
        let lo = at(0, idx, cw);
        let lhs = swap_order(d, &b.data[src(0)][lo..lo + cw], big);
        let rhs = if kind.binary() {
            let r = at(RHS, idx, cw);
            swap_order(d, &b.data[src(RHS)][r..r + cw], big)
        } else {
            vec![]
        };
        let pick = if eval_cond(kind, &lhs, &rhs) {
            THEN
        } else {
            ELSE
        };
        let s = at(pick, idx, w);
        let o = at(OUT, idx, w);
        out[o..o + w].copy_from_slice(&b.data[src(pick)][s..s + w]);
    });
    out
}

pub fn signature(kind: CondKind, w: usize, l: &Layout) -> Signature {
    let s = &l.strides;
    Signature::with_cond(w, kind, &l.dims, [&s[0], &s[1], &s[2], &s[3], &s[4]])
        .unwrap_or_else(|e| panic!("{kind} {}: {e}", l.name))
}

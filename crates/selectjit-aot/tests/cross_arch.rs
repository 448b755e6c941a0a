//! The Cranelift code generator on other architectures: kernels for a few hundred signatures are
//! exported ahead of time for each target, a C driver (`tests/cross/driver.c`) is cross-compiled
//! against the object and run under qemu-user (natively on the host's own architecture), and
//! every output byte is compared with the reference interpreter's. Predicate kernels (a
//! comparison or a test computed in the kernel) of every condition and dtype, with edge values,
//! over a spread of selected widths and layouts (in place too), are compared with the
//! expected outputs built element by element from numpy's semantics (`eval_cond`); their
//! compared operands are stored in the target's byte order. Single-pass n-way kernels (k = 1 to
//! 8 branches of masks, comparisons and tests of every dtype the Cranelift generator compares,
//! negated or not, over full operands and one-element ones, values and the default read in
//! place too, lengths that are not multiples of a vector, runs split in two) are compared with
//! the interpreter's n-way select on the host; on a big-endian target every compared operand,
//! value and the output hold their elements in its byte order (the expected output too).
//!
//! Needs `<arch>-linux-gnu-gcc` and `qemu-<arch>` (Debian: `gcc-<arch>-linux-gnu`,
//! `libc6-dev-<arch>-cross`, `qemu-user`). When they are missing, the test installs them with
//! apt-get if `SELECTJIT_CROSS_INSTALL=1` (as `.ci/run` sets), and otherwise prints why it
//! skips; `SELECTJIT_CROSS_REQUIRE=1` turns a skip into a failure.

#[path = "../../../tests/common/rng.rs"]
mod rng;
use rng::Rng;
#[path = "../../../tests/common/pred_cases.rs"]
mod pred_cases;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

use selectjit::aot::key;
use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
use selectjit::plan::OPS;
use selectjit::plan::OUT;
use selectjit::plan::Pattern;
use selectjit::plan::Signature;
use selectjit::plan::plan;
use selectjit::{Backend, DType, Engine, EngineConfig, InPlace, TensorMut, TensorRef};
use selectjit::{Broadcast, broadcast_shapes};
use selectjit::{Choice, CmpOp, Cond, Operand, TestOp};
use selectjit_aot::{ExportOptions, KernelSet};

/// One architecture: target triple, C compiler, emulator and its options, Debian packages.
struct Arch {
    name: &'static str,
    triple: &'static str,
    /// Cranelift ISA settings (`None`: the target's defaults).
    isa_flags: Option<&'static [&'static str]>,
    cc: &'static str,
    qemu: Option<(&'static str, &'static [&'static str])>,
    packages: &'static [&'static str],
    /// Big-endian: compared operands are stored in this byte order.
    big: bool,
}

const X86_64: Arch = Arch {
    name: "x86_64",
    triple: "x86_64-unknown-linux-gnu",
    isa_flags: None,
    cc: "cc",
    qemu: None,
    packages: &[],
    big: false,
};
/// x86-64 without SSE4.1: the portable `bitselect` lane select instead of `pblendvb`.
const X86_64_BASELINE: Arch = Arch {
    name: "x86_64 (baseline, no SSE4.1)",
    triple: "x86_64-unknown-linux-gnu",
    isa_flags: Some(&[]),
    cc: "cc",
    qemu: None,
    packages: &[],
    big: false,
};
const AARCH64: Arch = Arch {
    name: "aarch64",
    triple: "aarch64-unknown-linux-gnu",
    isa_flags: None,
    cc: "aarch64-linux-gnu-gcc",
    qemu: Some(("qemu-aarch64", &[])),
    packages: &[
        "gcc-aarch64-linux-gnu",
        "libc6-dev-arm64-cross",
        "qemu-user",
    ],
    big: false,
};
const S390X: Arch = Arch {
    name: "s390x",
    triple: "s390x-unknown-linux-gnu",
    isa_flags: None,
    cc: "s390x-linux-gnu-gcc",
    qemu: Some(("qemu-s390x", &["-cpu", "max"])),
    packages: &["gcc-s390x-linux-gnu", "libc6-dev-s390x-cross", "qemu-user"],
    big: true,
};
const RISCV64: Arch = Arch {
    name: "riscv64",
    triple: "riscv64gc-unknown-linux-gnu",
    isa_flags: None,
    cc: "riscv64-linux-gnu-gcc",
    qemu: Some(("qemu-riscv64", &["-cpu", "rv64,v=true,vlen=128,elen=64"])),
    packages: &[
        "gcc-riscv64-linux-gnu",
        "libc6-dev-riscv64-cross",
        "qemu-user",
    ],
    big: false,
};

/// A line on the test's real stderr (not captured by the test harness), so that results and
/// skips show in every run.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The tools of `arch`, installed if allowed; `Err(why)` when they are not there.
fn tools(arch: &Arch) -> Result<(), String> {
    static INSTALL: Mutex<()> = Mutex::new(());
    let missing = |a: &Arch| -> Vec<&str> {
        let mut m = vec![];
        if !have(a.cc) {
            m.push(a.cc);
        }
        if let Some((q, _)) = a.qemu
            && !have(q)
        {
            m.push(q);
        }
        m
    };
    if missing(arch).is_empty() {
        return Ok(());
    }
    if std::env::var("SELECTJIT_CROSS_INSTALL").as_deref() != Ok("1") {
        return Err(format!(
            "{} not found (install {} or set SELECTJIT_CROSS_INSTALL=1 to let the test run apt-get)",
            missing(arch).join(", "),
            arch.packages.join(" ")
        ));
    }
    let _g = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if missing(arch).is_empty() {
        return Ok(());
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    let _ = apt(&["update", "-q"]);
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    args.extend_from_slice(arch.packages);
    match apt(&args) {
        Ok(o) if o.status.success() && missing(arch).is_empty() => Ok(()),
        Ok(o) => Err(format!(
            "apt-get install {} failed: {}",
            arch.packages.join(" "),
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )),
        Err(e) => Err(format!("apt-get cannot run: {e}")),
    }
}

/// How an operand is laid out in memory.
#[derive(Clone, Copy, PartialEq)]
enum Lay {
    Contiguous,
    /// Column-major.
    Transposed,
    /// Every other element of a buffer twice as large.
    Sliced,
}

/// An operand: bytes, shape, element strides.
struct Op {
    data: Vec<u8>,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

fn layout(shape: &[usize], lay: Lay, w: usize, rng: &mut Rng, cond: bool) -> Op {
    let r = shape.len();
    let order: Vec<usize> = if lay == Lay::Transposed {
        (0..r).collect()
    } else {
        (0..r).rev().collect()
    };
    let step: isize = if lay == Lay::Sliced { 2 } else { 1 };
    let mut strides = vec![0isize; r];
    let mut acc = 1isize;
    for &k in &order {
        strides[k] = acc * step;
        acc *= shape[k].max(1) as isize;
    }
    let n: usize = shape.iter().product();
    let len = if n == 0 { 0 } else { (acc * step) as usize * w };
    let data = (0..len)
        .map(|_| {
            if cond {
                // Zero half the time; true as 1, 0x80, 0xff or anything else.
                match rng.next() % 8 {
                    0..=3 => 0,
                    4 => 1,
                    5 => 0x80,
                    6 => 0xff,
                    _ => rng.byte() | 1,
                }
            } else {
                rng.byte()
            }
        })
        .collect();
    Op {
        data,
        shape: shape.to_vec(),
        strides,
    }
}

/// One kernel run of the case file.
struct Case {
    kind: u32,
    key: Vec<u8>,
    sig: Signature,
    /// Which inputs are the output: bit 0 then, bit 1 else, bit 2 cond (lhs), bit 3 rhs.
    in_place: u32,
    splits: Vec<u64>,
    /// cond, then, else, the initial output, rhs (empty for masks and tests).
    bufs: [Vec<u8>; OPS],
    /// Byte offset of each operand's base element in its buffer.
    base: [u64; OPS],
    want: Vec<u8>,
}

/// A call: dtype width, mode, three operands and the output's layout, maybe in place.
struct Call {
    w: usize,
    mode: Broadcast,
    ops: [(Vec<usize>, Lay); 3],
    out_lay: Lay,
    in_place: Option<InPlace>,
}

fn calls() -> Vec<Call> {
    use Lay::*;
    let mut v = Vec::new();
    for w in [1usize, 2, 4, 8, 16] {
        let mut add = |mode, c: &[usize], t: &[usize], e: &[usize], lays: [Lay; 4], ip| {
            v.push(Call {
                w,
                mode,
                ops: [
                    (c.to_vec(), lays[0]),
                    (t.to_vec(), lays[1]),
                    (e.to_vec(), lays[2]),
                ],
                out_lay: lays[3],
                in_place: ip,
            })
        };
        let np = Broadcast::Numpy;
        let cont = [Contiguous; 4];
        // Vector rows of every length class: short, exactly 16, an overlapping last step,
        // several wide steps.
        for n in [
            1usize, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129, 1000,
        ] {
            add(np, &[n], &[n], &[n], cont, None);
        }
        // Broadcast inputs splatted along the row; cond broadcast over rows.
        add(np, &[37], &[5, 37], &[], cont, None);
        add(np, &[4, 19], &[], &[4, 19], cont, None);
        add(np, &[2, 300], &[1, 300], &[300], cont, None);
        add(np, &[1, 300], &[2, 300], &[2, 300], cont, None);
        // Row copies: cond constant along the row (copy, or fill from a broadcast source).
        add(np, &[6, 1], &[6, 70], &[6, 70], cont, None);
        add(np, &[6, 1], &[70], &[], cont, None);
        add(np, &[3, 1, 1], &[3, 4, 33], &[4, 33], cont, None);
        add(np, &[5, 1], &[5, 3], &[5, 3], cont, None);
        // Strided: transposed, sliced, a column-major output.
        add(
            np,
            &[7, 9],
            &[7, 9],
            &[7, 9],
            [Contiguous, Transposed, Contiguous, Contiguous],
            None,
        );
        add(
            np,
            &[5, 18],
            &[5, 18],
            &[5, 18],
            [Sliced, Contiguous, Sliced, Contiguous],
            None,
        );
        add(
            np,
            &[6, 20],
            &[6, 20],
            &[20],
            [Contiguous, Contiguous, Contiguous, Transposed],
            None,
        );
        add(np, &[33, 3], &[33, 3], &[33, 3], [Transposed; 4], None);
        add(
            np,
            &[40],
            &[40],
            &[40],
            [Contiguous, Contiguous, Contiguous, Sliced],
            None,
        );
        // Rank 3 and 5 with mixed broadcasting.
        add(np, &[4, 1, 5], &[3, 5], &[4, 3, 1], cont, None);
        add(np, &[2, 1, 3, 1, 17], &[2, 2, 3, 2, 17], &[1], cont, None);
        add(
            np,
            &[2, 1, 3, 1, 17],
            &[2, 2, 3, 2, 17],
            &[3, 2, 17],
            [Contiguous, Contiguous, Transposed, Contiguous],
            None,
        );
        // The other modes.
        add(
            Broadcast::Pdpd { axis: 1 },
            &[3, 4],
            &[2, 3, 4],
            &[3],
            cont,
            None,
        );
        add(
            Broadcast::TwoStep,
            &[4, 5],
            &[2, 3, 4, 5],
            &[2, 3, 4, 5],
            cont,
            None,
        );
        // In place.
        add(np, &[50], &[3, 50], &[], cont, Some(InPlace::Then));
        add(np, &[70], &[70], &[70], cont, Some(InPlace::Else));
        add(np, &[9, 1], &[9, 40], &[40], cont, Some(InPlace::Then));
        add(np, &[1], &[], &[], cont, None);
    }
    v
}

fn view(o: &Op) -> TensorRef<'_, u8> {
    TensorRef::with_strides(&o.data, &o.shape, &o.strides)
}

/// Strides of a `lay` output of `shape`.
fn out_strides(shape: &[usize], lay: Lay) -> (Vec<isize>, usize) {
    let o = layout(shape, lay, 1, &mut Rng(0), false);
    (o.strides, o.data.len())
}

/// The case file's cases and the kernels they need.
fn build_cases() -> (KernelSet, Vec<Case>) {
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let mut rng = Rng(0x5e1ec7);
    let mut set = KernelSet::new();
    let mut cases = Vec::new();
    for call in calls() {
        let dt = [
            DType::U8,
            DType::F16,
            DType::F32,
            DType::F64,
            DType::Complex128,
        ][call.w.trailing_zeros() as usize];
        let w = call.w;
        let shapes: Vec<&[usize]> = call.ops.iter().map(|o| o.0.as_slice()).collect();
        let b = broadcast_shapes(call.mode, shapes[0], shapes[1], shapes[2]).unwrap();
        let out_shape = b.out.to_vec();
        let (ost, olen) = out_strides(&out_shape, call.out_lay);
        let mut ops: Vec<Op> = call
            .ops
            .iter()
            .enumerate()
            .map(|(k, (s, lay))| layout(s, *lay, if k == 0 { 1 } else { w }, &mut rng, k == 0))
            .collect();
        // In place: the aliased input has the output's shape and layout.
        if let Some(ip) = call.in_place {
            let k = if ip == InPlace::Then { 1 } else { 2 };
            assert_eq!(ops[k].shape, out_shape);
            ops[k] = layout(&out_shape, call.out_lay, w, &mut rng, false);
        }
        let init: Vec<u8> = (0..olen * w).map(|_| rng.byte()).collect();
        let mut want = init.clone();
        let mut bufs = [
            ops[0].data.clone(),
            ops[1].data.clone(),
            ops[2].data.clone(),
            init.clone(),
            vec![],
        ];
        match call.in_place {
            None => interp
                .select_bytes(
                    dt,
                    view(&ops[0]),
                    view(&ops[1]),
                    view(&ops[2]),
                    TensorMut::with_strides(&mut want, &out_shape, &ost),
                    call.mode,
                )
                .unwrap(),
            Some(ip) => {
                let (k, other) = if ip == InPlace::Then { (1, 2) } else { (2, 1) };
                want = ops[k].data.clone();
                bufs[3] = want.clone();
                interp
                    .select_in_place_bytes(
                        dt,
                        view(&ops[0]),
                        TensorMut::with_strides(&mut want, &out_shape, &ost),
                        ip,
                        view(&ops[other]),
                        call.mode,
                    )
                    .unwrap();
            }
        }
        // The plan the engine makes of this call.
        let st = |k: usize, p: selectjit::Placement| {
            p.strides_over(&ops[k].shape, &ops[k].strides, &b.out)
        };
        let (sc, sth, se) = (st(0, b.cond), st(1, b.then), st(2, b.else_));
        let Some(sig) = plan(w, &out_shape, [&sc, &sth, &se, &ost]) else {
            continue;
        };
        set.add_signature(sig.clone());
        let p = Pattern::of(&sig);
        set.add_pattern(p);
        let outer = sig.outer() as u64;
        let splits = if outer >= 3 {
            vec![1, outer / 2 + 1]
        } else {
            vec![]
        };
        let in_place = match call.in_place {
            None => 0,
            Some(InPlace::Then) => 1,
            Some(InPlace::Else) => 2,
        };
        for (kind, key, splits) in [
            (0, key::signature_key(&sig), vec![]),
            (1, key::pattern_key(&p), splits),
        ] {
            cases.push(Case {
                kind,
                key,
                sig: sig.clone(),
                in_place,
                splits,
                bufs: bufs.clone(),
                base: [0; OPS],
                want: want.clone(),
            });
        }
    }
    (set, cases)
}

/// Predicate cases: every condition of every dtype, three runs each (two widths and layouts in
/// rotation, and one at the compared width, in place when the layouts allow), each as an exact
/// and a shape-generic kernel. `big`: the target is big-endian.
fn pred_cases(big: bool, set: &mut KernelSet, cases: &mut Vec<Case>) {
    use pred_cases::{GUARD, kinds, layouts, make_bufs, reference, signature};
    let mut rng = Rng(0x0dd_5eed);
    for (ki, kind) in kinds().into_iter().enumerate() {
        let cw = kind.dtype().unwrap().width();
        for c in 0..3 {
            let n = [37usize, 100, 19, 64][(ki + c) % 4];
            let (w, l) = if c < 2 {
                let w = [1usize, 2, 4, 8, 16][(ki + 3 * c) % 5];
                let ls = layouts(n, kind.binary(), cw == w);
                let l = ls[(2 * ki + c) % ls.len()].clone();
                (w, l)
            } else {
                let ls = layouts(n, kind.binary(), true);
                let in_place: Vec<_> = ls.into_iter().filter(|l| l.alias.contains(&true)).collect();
                (cw, in_place[ki % in_place.len()].clone())
            };
            let sig = signature(kind, w, &l);
            let b = make_bufs(kind, w, &l, &mut rng, big);
            let mut want = reference(kind, w, &l, &b, big);
            // The driver keeps guard bytes of its own around the output.
            want = want[GUARD..want.len() - GUARD].to_vec();
            let mut bufs = b.data.clone();
            bufs[OUT] = bufs[OUT][GUARD..bufs[OUT].len() - GUARD].to_vec();
            let mut base = b.base.map(|x| x as u64);
            base[OUT] -= GUARD as u64;
            // cond (lhs), then, else, out, rhs in the order of the case file.
            let in_place = [(1, 1u32), (2, 2), (0, 4), (4, 8)]
                .iter()
                .filter(|(op, _)| l.alias[*op])
                .map(|x| x.1)
                .sum();
            if !kind.binary() {
                bufs[4].clear();
            }
            set.add_signature(sig.clone());
            let p = Pattern::of(&sig);
            set.add_pattern(p);
            let outer = sig.outer() as u64;
            let splits = if outer >= 3 { vec![1] } else { vec![] };
            for (kind, key, splits) in [
                (0, key::signature_key(&sig), vec![]),
                (1, key::pattern_key(&p), splits),
            ] {
                cases.push(Case {
                    kind,
                    key,
                    sig: sig.clone(),
                    in_place,
                    splits,
                    bufs: bufs.clone(),
                    base,
                    want: want.clone(),
                });
            }
        }
    }
}

/// One n-way kernel run of the case file: its key, the output's length and element width, each
/// operand's bytes in the spec's order (`None`: the output itself, read in place), where the
/// run is split, the output's initial and expected bytes.
struct NwayCase {
    key: Vec<u8>,
    n: usize,
    w: usize,
    ops: Vec<Option<Vec<u8>>>,
    splits: Vec<u64>,
    init: Vec<u8>,
    want: Vec<u8>,
}

/// The dtypes the Cranelift n-way kernels compare.
const NWAY_COND_DTYPES: [DType; 10] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::F32,
    DType::F64,
];

/// `n` elements of `dt` (little-endian) from a small pool with NaN payloads, infinities and
/// signed zeros for floats, extremes for integers: ties and specials are frequent.
fn nway_elems(rng: &mut Rng, dt: DType, n: usize) -> Vec<u8> {
    let specials: Vec<u128> = match dt {
        DType::F32 => vec![
            0x7fc0_0001,
            0xff80_0000,
            0x7f80_0000,
            0x8000_0000,
            0,
            0x3f80_0000,
        ],
        DType::F64 => vec![
            0x7ff8_0000_0000_0001,
            0xfff0_0000_0000_0000,
            0x7ff0_0000_0000_0000,
            0x8000_0000_0000_0000,
            0,
            0x3ff0_0000_0000_0000,
        ],
        _ => vec![0, 1, u128::MAX, 1 << (dt.width() * 8 - 1)],
    };
    let mut pool: Vec<Vec<u8>> = specials
        .iter()
        .map(|x| x.to_le_bytes()[..dt.width()].to_vec())
        .collect();
    for _ in 0..3 {
        pool.push(rng.bytes(dt.width()));
    }
    (0..n)
        .flat_map(|_| pool[rng.below(pool.len())].clone())
        .collect()
}

/// Each element of `b` (of `w` bytes) reversed: little-endian elements in big-endian order.
fn swapped(b: &[u8], w: usize) -> Vec<u8> {
    b.chunks(w).flat_map(|c| c.iter().rev().copied()).collect()
}

/// An operand of a generated n-way call: its bytes (little-endian; shape `[n]` or `[]`), or
/// the output; the element width it is stored with in the target's order (1: as it is).
#[derive(Clone)]
enum NOp {
    Full(Vec<u8>),
    One(Vec<u8>),
    Out,
}

/// A generated branch's condition: its kind (0 mask, 1 comparison, 2 test), the comparison or
/// test, the compared dtype, its operands in call order, and whether it is negated.
type NCondCase = (u8, Option<CmpOp>, Option<TestOp>, DType, Vec<NOp>, bool);

/// N-way cases: `count` calls, `k = 1 + i % 8` branches each, and the kernels they need.
/// `big`: the target is big-endian.
fn nway_cases(big: bool, set: &mut KernelSet, count: usize) -> Vec<NwayCase> {
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let mut rng = Rng(0x4e_7a7e);
    let lens = [
        1usize, 2, 3, 7, 15, 16, 17, 31, 33, 63, 65, 100, 129, 255, 1000, 1023,
    ];
    let value_dtypes = [
        DType::U8,
        DType::I16,
        DType::F32,
        DType::F64,
        DType::U64,
        DType::I32,
    ];
    let mut out = Vec::new();
    for i in 0..count {
        let dt = value_dtypes[i % value_dtypes.len()];
        let w = dt.width();
        let n = lens[(i * 7 + i / 16) % lens.len()];
        let k = 1 + i % 8;
        let full_or_one = |rng: &mut Rng, d: DType, out_ok: bool| -> NOp {
            match rng.below(6) {
                0..=2 => NOp::Full(nway_elems(rng, d, n)),
                3 | 4 => NOp::One(nway_elems(rng, d, 1)),
                _ if out_ok && d == dt => NOp::Out,
                _ => NOp::Full(nway_elems(rng, d, n)),
            }
        };
        // Per branch: the condition (kind, dtype, operands in call order), negation, value.
        let mut conds: Vec<NCondCase> = vec![];
        let mut values = Vec::new();
        for _ in 0..k {
            let not = rng.below(4) == 0;
            match rng.below(3) {
                0 => {
                    let m = if rng.below(5) == 0 {
                        NOp::One(vec![rng.pick(&[0u8, 1, 0x80])])
                    } else {
                        NOp::Full(rng.cond(n, rng.0, &[0, 0, 1, 2, 0x80, 0xff], &[1, 0x80, 0xff]))
                    };
                    conds.push((0, None, None, DType::U8, vec![m], not));
                }
                1 => {
                    let d = if rng.below(3) == 0 {
                        dt
                    } else {
                        rng.pick(&NWAY_COND_DTYPES)
                    };
                    let op = rng.pick(&CmpOp::ALL);
                    let l = full_or_one(&mut rng, d, true);
                    let r = full_or_one(&mut rng, d, true);
                    conds.push((1, Some(op), None, d, vec![l, r], not));
                }
                _ => {
                    let d = if rng.below(3) == 0 {
                        dt
                    } else {
                        rng.pick(&NWAY_COND_DTYPES)
                    };
                    let op = rng.pick(&TestOp::ALL);
                    let x = match full_or_one(&mut rng, d, true) {
                        NOp::One(_) => NOp::Full(nway_elems(&mut rng, d, n)),
                        x => x,
                    };
                    conds.push((2, None, Some(op), d, vec![x], not));
                }
            }
            values.push(full_or_one(&mut rng, dt, true));
        }
        let default = full_or_one(&mut rng, dt, true);
        let init = nway_elems(&mut rng, dt, n);

        // The spec, from the call's shapes.
        let x: &[usize] = &[n];
        let shape = |o| nshape(o, x);
        let branches: Vec<NwayBranch<'_>> = conds
            .iter()
            .zip(&values)
            .map(|((kind, cop, top, d, ops, not), v)| NwayBranch {
                cond: match kind {
                    0 => NwayCond::Mask(shape(&ops[0])),
                    1 => NwayCond::Cmp(cop.unwrap(), *d, shape(&ops[0]), shape(&ops[1])),
                    _ => NwayCond::Test(top.unwrap(), *d, shape(&ops[0])),
                },
                not: *not,
                value: shape(v),
            })
            .collect();
        let spec = NwayKernelSpec::for_call(dt, x, &branches, shape(&default)).unwrap();

        // The expected output: the interpreter's n-way select on the host.
        let view = |o, d| nview(o, d, x);
        let choice = |o| nchoice(o, x);
        let cs: Vec<Cond<'_>> = conds
            .iter()
            .map(|(kind, cop, top, d, ops, not)| {
                let c = match (kind, &ops[0]) {
                    (0, NOp::Full(m) | NOp::One(m)) => {
                        Cond::mask(TensorRef::new(m, shape(&ops[0])))
                    }
                    (1, _) => Cond::cmp(cop.unwrap(), view(&ops[0], *d), view(&ops[1], *d)),
                    _ => Cond::test(top.unwrap(), view(&ops[0], *d)),
                };
                if *not { c.not() } else { c }
            })
            .collect();
        let vs: Vec<Choice<'_, u8>> = values.iter().map(choice).collect();
        let mut want = init.clone();
        interp
            .select_n_bytes(
                dt,
                &cs,
                &vs,
                choice(&default),
                TensorMut::new(&mut want, x),
                Broadcast::Numpy,
            )
            .unwrap();

        // The operands in the spec's order (a comparison's `>` and `>=` swap theirs), each in
        // the target's byte order.
        let store = |o: &NOp, ow: usize| -> Option<Vec<u8>> {
            match o {
                NOp::Full(b) | NOp::One(b) if big => Some(swapped(b, ow)),
                NOp::Full(b) | NOp::One(b) => Some(b.clone()),
                NOp::Out => None,
            }
        };
        let mut ops = Vec::new();
        for ((kind, cop, _, d, o, _), v) in conds.iter().zip(&values) {
            match kind {
                0 => ops.push(store(&o[0], 1)),
                1 if matches!(cop, Some(CmpOp::Gt | CmpOp::Ge)) => {
                    ops.push(store(&o[1], d.width()));
                    ops.push(store(&o[0], d.width()));
                }
                _ => {
                    for x in o {
                        ops.push(store(x, d.width()));
                    }
                }
            }
            ops.push(store(v, w));
        }
        ops.push(store(&default, w));
        let (init, want) = if big {
            (swapped(&init, w), swapped(&want, w))
        } else {
            (init, want)
        };
        out.push(NwayCase {
            key: key::nway_key(&spec),
            n,
            w,
            ops,
            splits: if n >= 3 { vec![(n / 3) as u64] } else { vec![] },
            init,
            want,
        });
        set.add_nway(spec);
    }
    out
}

/// The shape of a generated operand in a call of `x`.
fn nshape<'a>(o: &NOp, x: &'a [usize]) -> &'a [usize] {
    match o {
        NOp::One(_) => &[],
        _ => x,
    }
}

/// A generated operand as a predicate's operand of `d`.
fn nview<'a>(o: &'a NOp, d: DType, x: &'a [usize]) -> Operand<'a> {
    match o {
        NOp::Full(b) | NOp::One(b) => Operand::from_bytes(d, TensorRef::new(b, nshape(o, x))),
        NOp::Out => Operand::in_place(),
    }
}

/// A generated operand as a value.
fn nchoice<'a>(o: &'a NOp, x: &'a [usize]) -> Choice<'a, u8> {
    match o {
        NOp::Full(b) | NOp::One(b) => Choice::Tensor(TensorRef::new(b, nshape(o, x))),
        NOp::Out => Choice::Out,
    }
}

fn write_nway_cases(f: &mut Vec<u8>, cases: &[NwayCase]) {
    f.extend_from_slice(b"SJXNWAY1");
    f.extend_from_slice(&(cases.len() as u32).to_le_bytes());
    for c in cases {
        f.extend_from_slice(&(c.key.len() as u32).to_le_bytes());
        f.extend_from_slice(&c.key);
        f.extend_from_slice(&(c.n as u64).to_le_bytes());
        f.extend_from_slice(&(c.w as u32).to_le_bytes());
        f.extend_from_slice(&(c.ops.len() as u32).to_le_bytes());
        for o in &c.ops {
            let (len, in_place) = o.as_ref().map_or((0, 1u32), |b| (b.len(), 0));
            f.extend_from_slice(&(len as u64).to_le_bytes());
            f.extend_from_slice(&in_place.to_le_bytes());
        }
        f.extend_from_slice(&(c.splits.len() as u32).to_le_bytes());
        for &x in &c.splits {
            f.extend_from_slice(&x.to_le_bytes());
        }
        for b in c.ops.iter().flatten() {
            f.extend_from_slice(b);
        }
        f.extend_from_slice(&c.init);
        f.extend_from_slice(&c.want);
    }
}

fn write_cases(path: &Path, cases: &[Case], nway: &[NwayCase]) {
    let mut f = Vec::new();
    f.extend_from_slice(b"SJXCASE2");
    f.extend_from_slice(&(cases.len() as u32).to_le_bytes());
    for c in cases {
        let s = &c.sig;
        f.extend_from_slice(&c.kind.to_le_bytes());
        f.extend_from_slice(&(c.key.len() as u32).to_le_bytes());
        f.extend_from_slice(&c.key);
        f.extend_from_slice(&(s.rank() as u32).to_le_bytes());
        for &d in s.dims() {
            f.extend_from_slice(&(d as u64).to_le_bytes());
        }
        for op in 0..OPS {
            for k in 0..s.rank() {
                f.extend_from_slice(&(s.byte_stride(op, k) as i64).to_le_bytes());
            }
        }
        f.extend_from_slice(&c.in_place.to_le_bytes());
        f.extend_from_slice(&(c.splits.len() as u32).to_le_bytes());
        for &x in &c.splits {
            f.extend_from_slice(&x.to_le_bytes());
        }
        for b in &c.bufs {
            f.extend_from_slice(&(b.len() as u64).to_le_bytes());
        }
        for x in c.base {
            f.extend_from_slice(&x.to_le_bytes());
        }
        for b in &c.bufs {
            f.extend_from_slice(b);
        }
        f.extend_from_slice(&c.want);
    }
    write_nway_cases(&mut f, nway);
    std::fs::write(path, f).unwrap();
}

fn driver_source() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cross/driver.c")
}

/// Exports, compiles, runs and checks one architecture; returns the summary line, or why the
/// architecture was skipped.
fn verify(arch: &Arch) -> Result<String, String> {
    tools(arch)?;
    let t0 = Instant::now();
    let (mut set, mut cases) = build_cases();
    assert!(set.len() >= 200, "only {} kernels", set.len());
    let masks = cases.len();
    pred_cases(arch.big, &mut set, &mut cases);
    let preds = cases.len() - masks;
    assert!(preds >= 500, "only {preds} predicate cases");
    let before = set.len();
    let nway = nway_cases(arch.big, &mut set, 400);
    let nway_kernels = set.len() - before;
    assert!(nway_kernels >= 200, "only {nway_kernels} n-way kernels");
    let dir = tempfile::tempdir().unwrap();
    let ex = export_for(arch, &set);
    let t_export = t0.elapsed();

    std::fs::write(dir.path().join("kernels.o"), &ex.object).unwrap();
    std::fs::write(dir.path().join("kernels.h"), &ex.header).unwrap();
    let cases_file = dir.path().join("cases.bin");
    write_cases(&cases_file, &cases, &nway);
    let exe = dir.path().join("driver");
    let mut cc = Command::new(arch.cc);
    cc.args(["-std=c99", "-O1", "-Wall", "-Wextra", "-Werror"]);
    if arch.qemu.is_some() {
        cc.arg("-static");
    }
    let out = cc
        .arg("-I")
        .arg(dir.path())
        .arg(driver_source())
        .arg(dir.path().join("kernels.o"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        arch.cc,
        String::from_utf8_lossy(&out.stderr)
    );
    // SELECTJIT_CROSS_KEEP=1 keeps the object, header, driver and case file for a look (also
    // when the run fails).
    if std::env::var("SELECTJIT_CROSS_KEEP").as_deref() == Ok("1") {
        say(&format!(
            "cross {}: files kept in {}",
            arch.name,
            dir.keep().display()
        ));
    }
    let t1 = Instant::now();
    let mut run = match arch.qemu {
        Some((q, args)) => {
            let mut c = Command::new(q);
            c.args(args).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    let out = run.arg(&cases_file).output().unwrap();
    let t_run = t1.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} kernels failed ({}):\n{stdout}\n{stderr}",
        arch.name,
        out.status
    );
    let last = stdout.lines().last().unwrap_or("");
    assert_eq!(
        last,
        format!("{} passed, 0 failed", cases.len() + nway.len()),
        "{stdout}{stderr}"
    );
    let runner = match arch.qemu {
        Some((q, args)) => format!("{q} {}", args.join(" ")).trim().to_string(),
        None => "natively".to_string(),
    };
    Ok(format!(
        "cross {}: {} kernels ({} exact, {} generic, {} n-way, {} KiB of code) exported in {:.2} s; {masks} mask cases byte-identical to the interpreter, {preds} predicate cases to numpy's semantics and {} n-way cases to the interpreter's n-way select, run {runner} in {:.2} s",
        arch.name,
        ex.exact + ex.generic + ex.nway,
        ex.exact,
        ex.generic,
        ex.nway,
        ex.code_bytes / 1024,
        t_export.as_secs_f64(),
        nway.len(),
        t_run.as_secs_f64()
    ))
}

fn check(arch: &Arch) {
    match verify(arch) {
        Ok(line) => say(&line),
        Err(why) => {
            if std::env::var("SELECTJIT_CROSS_REQUIRE").as_deref() == Ok("1") {
                panic!("cross {}: {why}", arch.name);
            }
            say(&format!("cross {}: SKIPPED: {why}", arch.name));
        }
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn x86_64_natively() {
    check(&X86_64);
}

#[test]
#[cfg(target_arch = "x86_64")]
fn x86_64_baseline_natively() {
    check(&X86_64_BASELINE);
}

#[test]
fn aarch64_under_qemu() {
    check(&AARCH64);
}

#[test]
fn s390x_under_qemu() {
    check(&S390X);
}

#[test]
fn riscv64_under_qemu() {
    check(&RISCV64);
}

/// Every predicate kernel compiles for every target (no tools needed: compiled, not run):
/// every condition of every dtype at every selected width, in a vector row with both operands
/// in memory, in one with a splatted rhs, and in a strided row — every mask conversion and
/// comparison lowering each back end must have.
#[test]
fn every_predicate_kernel_compiles_for_every_target() {
    let mut set = KernelSet::new();
    for kind in pred_cases::kinds() {
        for w in [1usize, 2, 4, 8, 16] {
            let ls = pred_cases::layouts(40, kind.binary(), false);
            for name in ["contiguous", "scalar rhs, broadcast else", "strided output"] {
                let l = ls.iter().find(|l| l.name == name).unwrap();
                set.add_signature(pred_cases::signature(kind, w, l));
            }
        }
    }
    assert_eq!(set.len(), 90 * 5 * 3);
    for arch in [&X86_64, &X86_64_BASELINE, &AARCH64, &S390X, &RISCV64] {
        let t0 = Instant::now();
        let ex = export_for(arch, &set);
        assert_eq!(ex.exact, set.len());
        say(&format!(
            "cross {}: all {} predicate kernels compile ({} KiB) in {:.2} s",
            arch.name,
            ex.exact,
            ex.code_bytes / 1024,
            t0.elapsed().as_secs_f64()
        ));
    }
}

/// `set` exported for `arch` with its ISA settings.
fn export_for(arch: &Arch, set: &KernelSet) -> selectjit_aot::Exported {
    let opts = ExportOptions {
        isa_flags: arch
            .isa_flags
            .map(|f| f.iter().map(|s| s.to_string()).collect()),
        ..ExportOptions::new(arch.triple)
    };
    selectjit_aot::export(&opts, set).unwrap_or_else(|e| panic!("export for {}: {e}", arch.name))
}

/// Every n-way kernel of the cross cases compiles for every target (no tools needed: compiled,
/// not run): every condition kind of every dtype the generator compares, full and one-element
/// operands, one to eight branches, at every output width.
#[test]
fn every_nway_kernel_compiles_for_every_target() {
    let mut set = KernelSet::new();
    nway_cases(false, &mut set, 400);
    assert!(set.nway().len() >= 200, "only {} n-way kernels", set.len());
    for arch in [&X86_64, &X86_64_BASELINE, &AARCH64, &S390X, &RISCV64] {
        let t0 = Instant::now();
        let ex = export_for(arch, &set);
        assert_eq!(ex.nway, set.nway().len());
        say(&format!(
            "cross {}: all {} n-way kernels compile ({} KiB) in {:.2} s",
            arch.name,
            ex.nway,
            ex.code_bytes / 1024,
            t0.elapsed().as_secs_f64()
        ));
    }
}

//! N-way select (`Engine::select_n`): the first true condition wins, on every backend and tier.
//!
//! * Differential: random calls (k = 1..8 branches; masks with any non-zero byte as true;
//!   predicates of every comparison and test over every real dtype, with NaN payloads, ±0 and
//!   ±inf among the compared values; negation; broadcast operands and scalars; values and the
//!   default read from the output in place, predicates over the output; outputs spanning
//!   several tiles) on every engine (an engine on an ahead-of-time table too, whose table holds
//!   the single-pass n-way kernels of the cases' flat calls), bytewise against an oracle written
//!   here: each condition
//!   computed alone by the interpreter as a 0/1 mask, each value broadcast alone by the
//!   interpreter, then the first true condition picked element by element.
//! * Errors: nothing is written.

#[path = "common/aot_host.rs"]
mod aot_host;
mod common;
#[path = "common/rng.rs"]
mod rng;

use std::collections::HashSet;
use std::sync::OnceLock;

use rng::Rng;
use selectjit::aot::AotTable;
use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
use selectjit::{
    Backend, Broadcast, Choice, CmpOp, Cond, DType, Engine, EngineConfig, Operand, TensorMut,
    TensorRef, TestOp,
};

/// One operand of a generated call: a contiguous buffer of `shape` (dtype as the role says).
/// Clones share the bytes: a case may pass one buffer as several operands.
#[derive(Clone, Debug)]
struct Buf {
    shape: Vec<usize>,
    bytes: std::sync::Arc<[u8]>,
}

/// A predicate's operand: a buffer of the compared dtype, a scalar, or the output on entry.
#[derive(Clone, Debug)]
enum POp {
    Buf(Buf),
    Scalar([u8; 16]),
    Out,
}

#[derive(Clone, Debug)]
enum CondSpec {
    Mask(Buf),
    Cmp(CmpOp, DType, POp, POp),
    Test(TestOp, DType, POp),
}

#[derive(Clone, Debug)]
enum ValSpec {
    Buf(Buf),
    Out,
}

#[derive(Clone, Debug)]
struct Case {
    dtype: DType,
    out_shape: Vec<usize>,
    conds: Vec<(CondSpec, bool)>,
    values: Vec<ValSpec>,
    default: ValSpec,
    /// The output's contents on entry.
    init: Vec<u8>,
}

/// Bit patterns that stress comparisons and tests, per dtype (NaN payloads, ±inf, ±0).
fn specials(dt: DType) -> Vec<Vec<u8>> {
    let v: Vec<u128> = match dt {
        DType::F32 => vec![
            0x7fc0_0001,
            0xffc0_1234,
            0x7f80_0000,
            0xff80_0000,
            0x8000_0000,
            0,
        ],
        DType::F64 => vec![
            0x7ff8_0000_0000_0001,
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            0x8000_0000_0000_0000,
            0,
        ],
        DType::F16 => vec![0x7e01, 0xfe00, 0x7c00, 0xfc00, 0x8000, 0],
        DType::BF16 => vec![0x7fc1, 0xffc0, 0x7f80, 0xff80, 0x8000, 0],
        _ => vec![0, 1, u128::MAX, 1 << (dt.width() * 8 - 1)],
    };
    v.iter()
        .map(|x| x.to_le_bytes()[..dt.width()].to_vec())
        .collect()
}

/// `n` elements of `dt` drawn from a small pool (so that ties and specials are frequent).
fn elems(r: &mut Rng, dt: DType, n: usize) -> Vec<u8> {
    let mut pool = specials(dt);
    for _ in 0..4 {
        pool.push(r.bytes(dt.width()));
    }
    (0..n)
        .flat_map(|_| pool[r.below(pool.len())].clone())
        .collect()
}

thread_local! {
    /// Whether this thread's cases are flat: every operand of the output's shape or a scalar
    /// (the calls whose branches run on the operands as given, when of one tile).
    static FLAT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether this thread's cases are nests of rows: every operand of the output's innermost
    /// dimension (its outer ones each the output's or 1) or a scalar, the rows long (the calls
    /// a single-pass kernel of rows runs).
    static ROWS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A shape that broadcasts into `out`: a suffix of it, some dims set to 1 (flat cases: `out`
/// itself or a scalar).
fn sub_shape(r: &mut Rng, out: &[usize]) -> Vec<usize> {
    if FLAT.with(|f| f.get()) {
        return if r.below(3) == 0 {
            Vec::new()
        } else {
            out.to_vec()
        };
    }
    if ROWS.with(|f| f.get()) {
        if r.below(5) == 0 {
            return Vec::new();
        }
        let drop = r.below(out.len());
        let last = out.len() - 1;
        return out[drop..]
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if drop + i < last && r.below(2) == 0 {
                    1
                } else {
                    d
                }
            })
            .collect();
    }
    let drop = r.below(out.len() + 1);
    out[drop..]
        .iter()
        .map(|&d| if r.below(3) == 0 { 1 } else { d })
        .collect()
}

fn buf(r: &mut Rng, dt: DType, out: &[usize]) -> Buf {
    let shape = sub_shape(r, out);
    let n = shape.iter().product();
    Buf {
        bytes: elems(r, dt, n).into(),
        shape,
    }
}

const REAL: [DType; 10] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

fn gen_case(seed: u64, big: bool) -> Case {
    let mut r = Rng(seed);
    let dtype = r.pick(&DType::ALL);
    let rank = r.below(4) + usize::from(big);
    let mut out_shape: Vec<usize> = (0..rank).map(|_| 1 + r.below(5)).collect();
    if ROWS.with(|f| f.get()) {
        // Rows of 64 to 640 bytes (some not a whole number of blocks).
        out_shape.push((64 + r.below(577)) / dtype.width());
    }
    if big {
        // Several tiles of the default size (2 MiB of output and operands).
        let elems = (1024 * 1024 / dtype.width()) * (1 + r.below(2)) + r.below(700);
        let rest: usize = out_shape[..rank - 1].iter().product();
        out_shape[rank - 1] = (elems / rest).max(1);
    }
    let n: usize = out_shape.iter().product();
    let k = 1 + r.below(8);
    let mut conds = Vec::new();
    let mut values = Vec::new();
    let pop = |r: &mut Rng, cdt: DType, out: &[usize], same: bool| -> POp {
        match r.below(5) {
            0 | 1 => POp::Buf(buf(r, cdt, out)),
            2 | 3 => {
                let mut s = [0u8; 16];
                s[..cdt.width()].copy_from_slice(&elems(r, cdt, 1));
                POp::Scalar(s)
            }
            // The output as a compared operand: only of the select's dtype.
            _ if same => POp::Out,
            _ => POp::Buf(buf(r, cdt, out)),
        }
    };
    for _ in 0..k {
        let c = match r.below(3) {
            0 => {
                let shape = sub_shape(&mut r, &out_shape);
                let m = shape.iter().product();
                let mode = r.next();
                CondSpec::Mask(Buf {
                    bytes: r
                        .cond(m, mode, &[0, 1, 2, 0x80, 0xff], &[1, 2, 0x80, 0xff])
                        .into(),
                    shape,
                })
            }
            1 => {
                let same = REAL.contains(&dtype) && r.below(2) == 0;
                let cdt = if same { dtype } else { r.pick(&REAL) };
                let op = r.pick(&CmpOp::ALL);
                let l = pop(&mut r, cdt, &out_shape, same);
                let rr = pop(&mut r, cdt, &out_shape, same);
                CondSpec::Cmp(op, cdt, l, rr)
            }
            _ => {
                let same = REAL.contains(&dtype) && r.below(2) == 0;
                let cdt = if same { dtype } else { r.pick(&REAL) };
                let v = match pop(&mut r, cdt, &out_shape, same) {
                    POp::Scalar(_) => POp::Buf(buf(&mut r, cdt, &out_shape)),
                    p => p,
                };
                CondSpec::Test(r.pick(&TestOp::ALL), cdt, v)
            }
        };
        conds.push((c, r.below(4) == 0));
        values.push(if r.below(6) == 0 {
            ValSpec::Out
        } else {
            ValSpec::Buf(buf(&mut r, dtype, &out_shape))
        });
    }
    let default = if r.below(3) == 0 {
        ValSpec::Out
    } else {
        ValSpec::Buf(buf(&mut r, dtype, &out_shape))
    };
    // At least one operand spans the output, so that the broadcast gives its shape.
    values[0] = ValSpec::Buf(Buf {
        bytes: elems(&mut r, dtype, n).into(),
        shape: out_shape.clone(),
    });
    let mut c = Case {
        init: elems(&mut r, dtype, n),
        dtype,
        out_shape,
        conds,
        values,
        default,
    };
    share(&mut r, &mut c);
    c
}

/// Makes some of `c`'s buffers one: each (but the first value, which spans the output) with a
/// chance of a quarter becomes an earlier buffer of its element width and shape, so that one
/// buffer is several operands of the call (a kernel may load it once for all).
fn share(r: &mut Rng, c: &mut Case) {
    let dw = c.dtype.width();
    let mut bufs: Vec<(usize, &mut Buf)> = Vec::new();
    for (i, ((cs, _), v)) in c.conds.iter_mut().zip(c.values.iter_mut()).enumerate() {
        match cs {
            CondSpec::Mask(b) => bufs.push((1, b)),
            CondSpec::Cmp(_, dt, l, rr) => {
                for p in [l, rr] {
                    if let POp::Buf(b) = p {
                        bufs.push((dt.width(), b));
                    }
                }
            }
            CondSpec::Test(_, dt, POp::Buf(b)) => bufs.push((dt.width(), b)),
            CondSpec::Test(..) => {}
        }
        if let ValSpec::Buf(b) = v
            && i > 0
        {
            bufs.push((dw, b));
        }
    }
    if let ValSpec::Buf(b) = &mut c.default {
        bufs.push((dw, b));
    }
    for j in 1..bufs.len() {
        if r.below(4) != 0 {
            continue;
        }
        let w = bufs[j].0;
        // Of the same width and shape: the call's broadcast stays as it was.
        if let Some(i) = (0..j).find(|&i| bufs[i].0 == w && bufs[i].1.shape == bufs[j].1.shape) {
            let b = bufs[i].1.clone();
            *bufs[j].1 = b;
        }
    }
}

fn operand<'a>(p: &'a POp, dt: DType) -> Operand<'a> {
    match p {
        POp::Buf(b) => Operand::from_bytes(dt, TensorRef::new(&b.bytes, &b.shape)),
        POp::Scalar(s) => scalar_operand(dt, s),
        POp::Out => Operand::in_place(),
    }
}

/// A scalar operand of `dt` from its bytes.
fn scalar_operand(dt: DType, s: &[u8; 16]) -> Operand<'static> {
    // A scalar is a one-element view whose bytes are leaked for the test's lifetime (tiny).
    let b: &'static [u8] = Box::leak(s[..dt.width()].to_vec().into_boxed_slice());
    Operand::from_bytes(dt, TensorRef::new(b, &[]))
}

/// `c` with every in-place operand replaced by a view of `orig` (the oracle's conditions).
fn cond<'a>(c: &'a CondSpec, not: bool, orig: Option<(&'a [u8], &'a [usize])>) -> Cond<'a> {
    let op = |p: &'a POp, dt: DType| match (p, orig) {
        (POp::Out, Some((b, s))) => Operand::from_bytes(dt, TensorRef::new(b, s)),
        _ => operand(p, dt),
    };
    let c = match c {
        CondSpec::Mask(b) => Cond::mask(TensorRef::new(&b.bytes, &b.shape)),
        CondSpec::Cmp(o, dt, l, r) => Cond::cmp(*o, op(l, *dt), op(r, *dt)),
        CondSpec::Test(o, dt, v) => Cond::test(*o, op(v, *dt)),
    };
    if not { c.not() } else { c }
}

fn choice<'a>(v: &'a ValSpec) -> Choice<'a, u8> {
    match v {
        ValSpec::Buf(b) => Choice::Tensor(TensorRef::new(&b.bytes, &b.shape)),
        ValSpec::Out => Choice::Out,
    }
}

/// The engine's result: the output bytes, or the error's text.
fn run(eng: &Engine, c: &Case) -> Result<Vec<u8>, String> {
    let conds: Vec<Cond<'_>> = c.conds.iter().map(|(s, n)| cond(s, *n, None)).collect();
    let values: Vec<Choice<'_, u8>> = c.values.iter().map(choice).collect();
    let mut out = c.init.clone();
    eng.select_n_bytes(
        c.dtype,
        &conds,
        &values,
        choice(&c.default),
        TensorMut::new(&mut out, &c.out_shape),
        Broadcast::Numpy,
    )
    .map_err(|e| e.to_string())?;
    Ok(out)
}

/// The oracle: each condition alone as a 0/1 mask over the output, each value alone broadcast
/// over it (both by the interpreter's two-way select), then the first true condition per element.
fn oracle(c: &Case) -> Result<Vec<u8>, String> {
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let n: usize = c.out_shape.iter().product();
    let w = c.dtype.width();
    let orig = (&c.init[..], &c.out_shape[..]);
    let one = [1u8];
    let zeros = vec![0u8; n];
    let mut masks = Vec::new();
    for (s, not) in &c.conds {
        let mut m = vec![0u8; n];
        let cd = cond(s, *not, Some(orig));
        interp
            .select_bytes(
                DType::U8,
                cd,
                TensorRef::scalar(&one),
                TensorRef::new(&zeros, &c.out_shape),
                TensorMut::new(&mut m, &c.out_shape),
                Broadcast::Numpy,
            )
            .map_err(|e| e.to_string())?;
        masks.push(m);
    }
    let spread = |v: &ValSpec| -> Result<Vec<u8>, String> {
        let (b, s) = match v {
            ValSpec::Buf(b) => (&b.bytes[..], &b.shape[..]),
            ValSpec::Out => orig,
        };
        let mut o = vec![0u8; n * w];
        let z = vec![0u8; n * w];
        interp
            .select_bytes(
                c.dtype,
                TensorRef::scalar(&one),
                TensorRef::new(b, s),
                TensorRef::new(&z, &c.out_shape),
                TensorMut::new(&mut o, &c.out_shape),
                Broadcast::Numpy,
            )
            .map_err(|e| e.to_string())?;
        Ok(o)
    };
    let vals: Vec<Vec<u8>> = c.values.iter().map(spread).collect::<Result<_, _>>()?;
    let mut out = spread(&c.default)?;
    for j in 0..n {
        if let Some(i) = masks.iter().position(|m| m[j] != 0) {
            out[j * w..(j + 1) * w].copy_from_slice(&vals[i][j * w..(j + 1) * w]);
        }
    }
    Ok(out)
}

/// The spec of the single-pass n-way kernel of `c`'s call, as `NwayKernelSpec::for_call` plans
/// it from the call's shapes (`None`: no flat kernel runs it).
fn case_spec(c: &Case) -> Option<NwayKernelSpec> {
    let out = &c.out_shape[..];
    let pop = |p: &'_ POp| -> Vec<usize> {
        match p {
            POp::Buf(b) => b.shape.clone(),
            POp::Scalar(_) => Vec::new(),
            POp::Out => out.to_vec(),
        }
    };
    let val = |v: &ValSpec| match v {
        ValSpec::Buf(b) => b.shape.clone(),
        ValSpec::Out => out.to_vec(),
    };
    // Every shape first, then the borrowed descriptions.
    let shapes: Vec<[Vec<usize>; 3]> = c
        .conds
        .iter()
        .zip(&c.values)
        .map(|((cs, _), v)| match cs {
            CondSpec::Mask(b) => [b.shape.clone(), vec![], val(v)],
            CondSpec::Cmp(_, _, l, r) => [pop(l), pop(r), val(v)],
            CondSpec::Test(_, _, x) => [pop(x), vec![], val(v)],
        })
        .collect();
    let branches: Vec<NwayBranch<'_>> = c
        .conds
        .iter()
        .zip(&shapes)
        .map(|((cs, not), [a, b, v])| NwayBranch {
            cond: match cs {
                CondSpec::Mask(_) => NwayCond::Mask(a),
                CondSpec::Cmp(op, d, _, _) => NwayCond::Cmp(*op, *d, a, b),
                CondSpec::Test(op, d, _) => NwayCond::Test(*op, *d, a),
            },
            not: *not,
            value: v,
        })
        .collect();
    NwayKernelSpec::for_call(c.dtype, out, &branches, &val(&c.default)).ok()
}

/// Whether every operand of `c` has the output's shape or one element (a scalar, dims all 1).
fn exact_shapes(c: &Case) -> bool {
    let out = &c.out_shape;
    let ok = |s: &[usize]| s == &out[..] || s.len() <= out.len() && s.iter().all(|&d| d == 1);
    let pop = |p: &POp| match p {
        POp::Buf(b) => ok(&b.shape),
        _ => true,
    };
    let val = |v: &ValSpec| match v {
        ValSpec::Buf(b) => ok(&b.shape),
        ValSpec::Out => true,
    };
    val(&c.default)
        && c.values.iter().all(val)
        && c.conds.iter().all(|(cs, _)| match cs {
            CondSpec::Mask(b) => ok(&b.shape),
            CondSpec::Cmp(_, _, l, r) => pop(l) && pop(r),
            CondSpec::Test(_, _, x) => pop(x),
        })
}

/// Whether the Cranelift generator compiles the n-way kernel of `c` (see
/// `src/jit/cranelift/nway.rs`): elements of up to 8 bytes, conditions of masks, integers,
/// f32 and f64.
fn cranelift_covers(c: &Case) -> bool {
    let ok = |d: &DType| {
        !matches!(
            d,
            DType::Bool | DType::F16 | DType::BF16 | DType::Complex64 | DType::Complex128
        )
    };
    c.dtype.width() <= 8
        && c.conds.iter().all(|(cs, _)| match cs {
            CondSpec::Mask(_) => true,
            CondSpec::Cmp(_, d, _, _) | CondSpec::Test(_, d, _) => ok(d),
        })
}

/// `gen_case(seed, big)` as a thread of the given mode (flat, rows) makes it.
fn case_in_mode(seed: u64, big: bool, flat: bool, rows: bool) -> Case {
    let (f0, r0) = (
        FLAT.with(|f| f.replace(flat)),
        ROWS.with(|r| r.replace(rows)),
    );
    let c = gen_case(seed, big);
    FLAT.with(|f| f.set(f0));
    ROWS.with(|r| r.set(r0));
    c
}

/// The ahead-of-time table of the "aot" engine, built once: every shape-generic kernel of rank
/// 1 and 2 (the two-way calls of n-way selects run on them), and the single-pass n-way kernel
/// of every flat call of the seeds the tests below run, where Cranelift compiles it; with the
/// set of those specs.
fn nway_table() -> &'static (AotTable, HashSet<NwayKernelSpec>) {
    static T: OnceLock<(AotTable, HashSet<NwayKernelSpec>)> = OnceLock::new();
    T.get_or_init(|| {
        let mut set = aot_host::generic_rank2_set();
        let modes = [
            (0..400, false, false, false),
            (2000..2400, false, true, false),
            (3000..3016, true, true, false),
            (5000..5300, false, false, true),
            (1000..1016, true, false, false),
        ];
        let mut specs = HashSet::new();
        for (seeds, big, flat, rows) in modes {
            for seed in seeds {
                let c = case_in_mode(seed, big, flat, rows);
                if let Some(spec) = case_spec(&c).filter(|_| cranelift_covers(&c)) {
                    set.add_nway(spec.clone());
                    specs.insert(spec);
                }
            }
        }
        assert!(specs.len() > 100, "only {} n-way kernels", specs.len());
        (aot_host::host_table(&set), specs)
    })
}

/// Runs the cases of `seeds` on every engine; the engines' n-way calls run by a single-pass
/// kernel, by engine name.
fn check_cases(seeds: std::ops::Range<u64>, big: bool) -> Vec<(String, u64)> {
    let mut engines = common::all_engines(&EngineConfig::new());
    // Non-temporal stores from the first byte: the single-pass kernels' aligned head and
    // non-temporal loop.
    for (name, eng) in common::all_engines(&EngineConfig::new().nt_min_bytes(0)) {
        if name.starts_with("jit") {
            engines.push((format!("{name}-nt"), eng));
        }
    }
    // Every call split across two threads where it can be (the single-pass kernels' parts).
    let mt = EngineConfig::new().threads(2).parallel_min_bytes(0);
    for (name, eng) in common::all_engines(&mt) {
        if name.starts_with("jit") {
            engines.push((format!("{name}-mt"), eng));
        }
    }
    // No code generator: a flat call on the ahead-of-time table's single-pass kernel of its
    // spec where the table has it, else the two-way calls of an n-way select on its
    // shape-generic kernels of rank 1 and 2 (else the static kernels).
    let (table, specs) = nway_table();
    assert_eq!(table.nway_len(), specs.len());
    engines.push((
        "aot".to_string(),
        aot_host::aot_only_engine(EngineConfig::new(), table.clone()),
    ));
    let mut checked = 0;
    for seed in seeds {
        let c = gen_case(seed, big);
        let want = oracle(&c);
        let want = match want {
            Ok(w) => Ok(w),
            Err(e) => {
                eprintln!("seed {seed}: oracle refuses: {e}");
                Err(e)
            }
        };
        let Ok(want) = want else {
            // The oracle's two-way calls refuse it (a predicate the dtype has no test for):
            // every engine refuses the n-way call too, and writes nothing.
            for (name, eng) in &engines {
                assert!(run(eng, &c).is_err(), "{name}: seed {seed} should fail");
            }
            continue;
        };
        // The table's single-pass kernel runs the call exactly when the table has the spec
        // `for_call` derives from the call's shapes (the engine plans as it does), if every
        // operand has the output's shape or one element; else (shapes that differ from the
        // output's by dims of 1) it may run, where the rows are long enough, never another.
        let aot = &engines.last().expect("engines").1;
        let before = aot.stats().nway_pass_runs;
        let in_table = case_spec(&c).is_some_and(|s| specs.contains(&s));
        let exact_shapes = exact_shapes(&c);
        for (name, eng) in &engines {
            let got = run(eng, &c).unwrap_or_else(|e| panic!("{name} seed {seed}: {e}\n{c:?}"));
            assert!(
                got == want,
                "{name}: seed {seed}, dtype {}, shape {:?}, k {}",
                c.dtype,
                c.out_shape,
                c.conds.len()
            );
        }
        let ran = aot.stats().nway_pass_runs - before;
        assert!(
            ran == u64::from(in_table) || !exact_shapes && ran == 0,
            "seed {seed}: the table's n-way kernel {} (spec {:?})",
            if in_table { "did not run" } else { "ran" },
            case_spec(&c).map(|s| s.to_string())
        );
        checked += 1;
    }
    eprintln!("{checked} cases checked on {} engines", engines.len());
    let aot = &engines.last().expect("engines").1;
    let s = aot.stats();
    assert!(
        s.aot_generic_runs + s.nway_pass_runs > 0,
        "the table ran no call"
    );
    // The table holds every flat kernel Cranelift compiles for these calls: the engine without
    // a code generator ran exactly the calls the Cranelift engine ran in one pass.
    let cranelift = &engines
        .iter()
        .find(|(n, _)| n == "jit-cranelift")
        .expect("cranelift")
        .1;
    assert_eq!(s.nway_pass_runs, cranelift.stats().nway_pass_runs);
    assert!(checked > 0, "every case was refused");
    engines
        .iter()
        .map(|(name, e)| (name.clone(), e.stats().nway_pass_runs))
        .collect()
}

/// Whether the host runs the AVX2 tier natively (its generator has single-pass n-way kernels).
fn avx2_host() -> bool {
    selectjit::Tier::Avx2.available()
}

#[test]
fn small_calls_match_the_oracle_on_every_engine() {
    check_cases(0..400, false);
}

#[test]
fn flat_calls_match_the_oracle_on_every_engine() {
    FLAT.with(|f| f.set(true));
    let mut passes = check_cases(2000..2400, false);
    passes.extend(check_cases(3000..3016, true));
    // The single-pass kernels ran, and only on the engines whose generator has them.
    eprintln!("single-pass runs: {passes:?}");
    check_single_pass(&passes);
}

/// The engines whose generator has single-pass n-way kernels (AVX-512, natively or emulated;
/// AVX2 natively and Cranelift, of flat calls only: the cases of rows include flat ones), and
/// the engine on an ahead-of-time table with them, ran calls on them, and the others none.
fn check_single_pass(passes: &[(String, u64)]) {
    for (name, runs) in passes {
        if name.starts_with("jit-avx512")
            || name.starts_with("jit-cranelift")
            || name == "aot"
            || avx2_host() && name.starts_with("jit-avx2")
        {
            assert!(*runs > 0, "{name}: no call ran on a single-pass kernel");
        } else {
            assert_eq!(
                *runs, 0,
                "{name}: a single-pass kernel without a generator for it"
            );
        }
    }
}

/// Broadcast calls whose operands are contiguous along long rows: on a single-pass kernel of
/// rows where the engine has one.
#[test]
fn nests_of_rows_match_the_oracle_on_every_engine() {
    ROWS.with(|f| f.set(true));
    let passes = check_cases(5000..5300, false);
    eprintln!("single-pass runs: {passes:?}");
    check_single_pass(&passes);
}

#[test]
fn calls_of_several_tiles_match_the_oracle_on_every_engine() {
    check_cases(1000..1016, true);
}

#[test]
fn errors_write_nothing() {
    let eng = Engine::new();
    let x = [1.0f32, f32::NAN, 3.0];
    let xv = TensorRef::new(&x, &[3]);
    let zero = [0.0f32];
    let z = TensorRef::scalar(&zero);
    let mut out = [7.0f32; 3];
    let mut call = |conds: &[Cond<'_>], values: &[Choice<'_, f32>], mode: Broadcast| {
        let r = eng.select_n(
            conds,
            values,
            xv.into(),
            TensorMut::new(&mut out, &[3]),
            mode,
        );
        (r.map_err(|e| e.to_string()), out)
    };
    // No condition; values and conditions of different counts; a mode n-way does not take.
    let (e, o) = call(&[], &[], Broadcast::Numpy);
    assert!(e.unwrap_err().contains("at least one condition"));
    assert_eq!(o, [7.0; 3]);
    let (e, o) = call(&[Cond::isnan(xv)], &[z.into(), z.into()], Broadcast::Numpy);
    assert!(e.unwrap_err().contains("2 values"));
    assert_eq!(o, [7.0; 3]);
    let (e, o) = call(&[Cond::isnan(xv)], &[z.into()], Broadcast::TwoStep);
    assert!(e.unwrap_err().contains("numpy or none"));
    assert_eq!(o, [7.0; 3]);
    // A scalar under `none`.
    let (e, o) = call(&[Cond::isnan(xv)], &[z.into()], Broadcast::Exact);
    assert!(e.unwrap_err().contains("value 1"), "{o:?}");
    assert_eq!(o, [7.0; 3]);
    // The last branch's buffer is short: found before the first branch writes anything.
    let short = [1u8, 0];
    let (e, o) = call(
        &[Cond::isnan(xv), TensorRef::new(&short, &[3]).into()],
        &[z.into(), z.into()],
        Broadcast::Numpy,
    );
    assert!(e.unwrap_err().contains("condition 2"));
    assert_eq!(o, [7.0; 3]);
    // Shapes that do not broadcast, and an output of another shape.
    let four = [0.0f32; 4];
    let (e, o) = call(
        &[Cond::isnan(xv), Cond::gt(xv, 0.0f32)],
        &[z.into(), TensorRef::new(&four, &[4]).into()],
        Broadcast::Numpy,
    );
    assert!(e.unwrap_err().contains("value 2 [4]"));
    assert_eq!(o, [7.0; 3]);
    let rows = [0.0f32; 6];
    let (e, o) = call(
        &[Cond::isnan(xv)],
        &[TensorRef::new(&rows, &[2, 3]).into()],
        Broadcast::Numpy,
    );
    assert!(e.unwrap_err().contains("[2,3]"));
    assert_eq!(o, [7.0; 3]);
    // A comparison of two dtypes.
    let ints = [1i32, 2, 3];
    let (e, o) = call(
        &[
            Cond::isnan(xv),
            Cond::lt(TensorRef::new(&ints, &[3]), 2.0f32),
        ],
        &[z.into(), z.into()],
        Broadcast::Numpy,
    );
    assert!(e.unwrap_err().contains("condition 2"));
    assert_eq!(o, [7.0; 3]);
}

#[test]
fn nan_to_num_in_place_and_exact_mode() {
    // numpy.nan_to_num(x, copy=False) on f64: conditions and the default read x itself.
    let x = vec![
        1.0f64,
        f64::NAN,
        f64::INFINITY,
        -0.0,
        f64::NEG_INFINITY,
        -2.5,
    ];
    let n = x.len();
    let s = [0.0f64, f64::MAX, f64::MIN];
    for eng in common::all_engines(&EngineConfig::new()) {
        let mut y = x.clone();
        eng.1
            .select_n(
                &[
                    Cond::isnan(Operand::in_place()),
                    Cond::eq(Operand::in_place(), f64::INFINITY),
                    Cond::eq(Operand::in_place(), f64::NEG_INFINITY),
                ],
                &[
                    TensorRef::scalar(&s[0..1]).into(),
                    TensorRef::scalar(&s[1..2]).into(),
                    TensorRef::scalar(&s[2..3]).into(),
                ],
                Choice::Out,
                TensorMut::new(&mut y, &[n]),
                Broadcast::Numpy,
            )
            .unwrap();
        let bits: Vec<u64> = y.iter().map(|v| v.to_bits()).collect();
        let want: Vec<u64> = [1.0, 0.0, f64::MAX, -0.0, f64::MIN, -2.5]
            .iter()
            .map(|v: &f64| v.to_bits())
            .collect();
        assert_eq!(bits, want, "{}", eng.0);
    }
    // `none`: every shape equal.
    let m = [0u8, 3, 0, 0, 1, 0];
    let eng = Engine::new();
    let mut y = [0.0f64; 6];
    let xv = TensorRef::new(&x, &[6]);
    eng.select_n(
        &[TensorRef::new(&m, &[6]).into()],
        &[xv.into()],
        TensorRef::new(&s[..], &[3]).into(),
        TensorMut::new(&mut y, &[6]),
        Broadcast::Exact,
    )
    .unwrap_err();
    let d = [9.0f64; 6];
    eng.select_n(
        &[TensorRef::new(&m, &[6]).into()],
        &[xv.into()],
        TensorRef::new(&d, &[6]).into(),
        TensorMut::new(&mut y, &[6]),
        Broadcast::Exact,
    )
    .unwrap();
    assert_eq!(y[1].to_bits(), f64::NAN.to_bits());
    assert_eq!(y[4], f64::NEG_INFINITY);
    assert_eq!([y[0], y[2], y[3], y[5]], [9.0; 4]);
}

/// The dtypes of the AVX2 single-pass kernels' outputs and conditions, by width.
const AVX2_DTYPES: [&[DType]; 4] = [
    &[DType::I8, DType::U8],
    &[DType::I16, DType::U16],
    &[DType::I32, DType::U32, DType::F32],
    &[DType::I64, DType::U64, DType::F64],
];

/// `n` elements of `dt` from a small pool: [`specials`], the largest signed integer, and four
/// random elements.
fn avx2_elems(r: &mut Rng, dt: DType, n: usize) -> Vec<u8> {
    let mut pool = specials(dt);
    pool.push((u128::MAX >> (129 - dt.width() * 8)).to_le_bytes()[..dt.width()].to_vec());
    for _ in 0..4 {
        pool.push(r.bytes(dt.width()));
    }
    (0..n)
        .flat_map(|_| pool[r.below(pool.len())].clone())
        .collect()
}

/// A flat call of `n` elements that the AVX2 single-pass kernels take: one to three branches
/// (at most ten operands, within the kernel's registers), conditions that are masks or of a
/// dtype no wider than the output's, full and splat operands, the output read in place.
fn avx2_case(seed: u64, n: usize) -> Case {
    let mut r = Rng(seed);
    let wi = r.below(4);
    let dtype = r.pick(AVX2_DTYPES[wi]);
    let narrower: Vec<DType> = AVX2_DTYPES[..=wi].concat();
    let out_shape = vec![n];
    let full = |r: &mut Rng, dt: DType| Buf {
        bytes: avx2_elems(r, dt, n).into(),
        shape: vec![n],
    };
    let pop = |r: &mut Rng, cdt: DType| -> POp {
        match r.below(5) {
            0 | 1 => POp::Buf(full(r, cdt)),
            2 | 3 => {
                let mut s = [0u8; 16];
                s[..cdt.width()].copy_from_slice(&avx2_elems(r, cdt, 1));
                POp::Scalar(s)
            }
            _ if cdt == dtype => POp::Out,
            _ => POp::Buf(full(r, cdt)),
        }
    };
    let k = 1 + r.below(3);
    let mut conds = Vec::new();
    let mut values = Vec::new();
    for _ in 0..k {
        // Of the output's width half of the time, else of any width up to it.
        let cdt = if r.below(2) == 0 {
            r.pick(AVX2_DTYPES[wi])
        } else {
            r.pick(&narrower)
        };
        let c = match r.below(3) {
            0 => {
                let m = if r.below(4) == 0 { 1 } else { n };
                let mode = r.next();
                CondSpec::Mask(Buf {
                    bytes: r
                        .cond(m, mode, &[0, 1, 0x80, 0xff], &[1, 0x80, 0xff])
                        .into(),
                    shape: if m == 1 { Vec::new() } else { vec![n] },
                })
            }
            1 => {
                let op = r.pick(&CmpOp::ALL);
                let l = pop(&mut r, cdt);
                CondSpec::Cmp(op, cdt, l, pop(&mut r, cdt))
            }
            _ => CondSpec::Test(r.pick(&TestOp::ALL), cdt, pop(&mut r, cdt)),
        };
        conds.push((c, r.below(3) == 0));
        values.push(match r.below(4) {
            0 => ValSpec::Out,
            1 => ValSpec::Buf(Buf {
                bytes: avx2_elems(&mut r, dtype, 1).into(),
                shape: Vec::new(),
            }),
            _ => ValSpec::Buf(full(&mut r, dtype)),
        });
    }
    let default = match r.below(3) {
        0 => ValSpec::Out,
        1 => ValSpec::Buf(Buf {
            bytes: avx2_elems(&mut r, dtype, 1).into(),
            shape: Vec::new(),
        }),
        _ => ValSpec::Buf(full(&mut r, dtype)),
    };
    // At least one operand spans the output, so that the broadcast gives its shape.
    let spans = |b: &Buf| b.shape == out_shape;
    let pop_spans = |p: &POp| matches!(p, POp::Buf(b) if spans(b));
    let val_spans = |v: &ValSpec| matches!(v, ValSpec::Buf(b) if spans(b));
    let any = conds.iter().any(|(c, _)| match c {
        CondSpec::Mask(b) => spans(b),
        CondSpec::Cmp(_, _, l, r) => pop_spans(l) || pop_spans(r),
        CondSpec::Test(_, _, v) => pop_spans(v),
    }) || values.iter().any(val_spans)
        || val_spans(&default);
    if !any {
        values[0] = ValSpec::Buf(full(&mut r, dtype));
    }
    let mut c = Case {
        init: avx2_elems(&mut r, dtype, n),
        dtype,
        out_shape,
        conds,
        values,
        default,
    };
    // Some buffers made one (operands that share a base register).
    share(&mut r, &mut c);
    c
}

/// [`run`] with the output `off` bytes into a buffer (its alignment varies); checks that no byte
/// of the buffer around it is written.
fn run_at(eng: &Engine, c: &Case, off: usize) -> Result<Vec<u8>, String> {
    let conds: Vec<Cond<'_>> = c.conds.iter().map(|(s, n)| cond(s, *n, None)).collect();
    let values: Vec<Choice<'_, u8>> = c.values.iter().map(choice).collect();
    let len = c.init.len();
    let mut buf = vec![0u8; off + len + 64];
    buf[off..off + len].copy_from_slice(&c.init);
    eng.select_n_bytes(
        c.dtype,
        &conds,
        &values,
        choice(&c.default),
        TensorMut::new(&mut buf[off..off + len], &c.out_shape),
        Broadcast::Numpy,
    )
    .map_err(|e| e.to_string())?;
    let mut outside = buf[..off].iter().chain(&buf[off + len..]);
    assert!(
        outside.all(|&b| b == 0),
        "a byte written outside the output"
    );
    Ok(buf[off..off + len].to_vec())
}

#[test]
fn avx2_single_pass_covers_its_specs() {
    if !avx2_host() {
        eprintln!("this host has no AVX2: its single-pass n-way kernels not run");
        return;
    }
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let avx2 = |cfg: EngineConfig| {
        Engine::with_config(cfg.backend(Backend::Jit).tier(selectjit::Tier::Avx2)).unwrap()
    };
    let engines = [
        ("jit-avx2", avx2(EngineConfig::new())),
        ("jit-avx2-nt", avx2(EngineConfig::new().nt_min_bytes(0))),
    ];
    let lengths: Vec<usize> = (0..300)
        .chain([9_999, 10_000, 10_001, 10_013, 10_240])
        .collect();
    let mut flat = 0;
    for (i, &n) in lengths.iter().enumerate() {
        for rep in 0..3 {
            let seed = 7_000 + 3 * i as u64 + rep;
            let c = avx2_case(seed, n);
            let off = (seed as usize * 7) % 64;
            let want =
                run_at(&interp, &c, off).unwrap_or_else(|e| panic!("interp seed {seed}: {e}"));
            for (name, eng) in &engines {
                let got =
                    run_at(eng, &c, off).unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
                assert!(
                    got == want,
                    "{name}: seed {seed}, dtype {}, n {n}, offset {off}\n{c:?}",
                    c.dtype
                );
            }
            flat += usize::from(n > 0);
        }
    }
    for (name, eng) in &engines {
        let s = eng.stats();
        assert_eq!(
            s.nway_pass_runs, flat as u64,
            "{name}: a call the AVX2 kernels take ran in tiles"
        );
        assert!(s.nway_compiles > 0, "{name}");
    }
    eprintln!("{flat} flat calls on the AVX2 single-pass kernels");
}

/// Every run of a single-pass kernel is in the engine's stats: those of the asking thread, and
/// those of a thread that has ended (threads add theirs to the count in batches), and the
/// results stay right when a thread's last kernel is another engine's or another spec's.
#[test]
fn single_pass_runs_are_counted_and_right_across_engines() {
    let x: Vec<f32> = (0..100)
        .map(|i| match i % 4 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            _ => i as f32,
        })
        .collect();
    let want: Vec<u32> = x
        .iter()
        .map(|v| {
            let r = if v.is_nan() {
                0.0
            } else if *v == f32::INFINITY {
                7.0
            } else {
                *v
            };
            r.to_bits()
        })
        .collect();
    let (zero, seven) = ([0.0f32], [7.0f32]);
    let call = |eng: &Engine, n: usize| {
        let shape = [n];
        let xv = TensorRef::new(&x[..n], &shape);
        let mut y = vec![1.0f32; n];
        eng.select_n(
            &[Cond::isnan(xv), Cond::eq(xv, f32::INFINITY)],
            &[
                TensorRef::scalar(&zero).into(),
                TensorRef::scalar(&seven).into(),
            ],
            xv.into(),
            TensorMut::new(&mut y, &[n]),
            Broadcast::Numpy,
        )
        .unwrap();
        let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, want[..n]);
    };
    let (a, b) = (Engine::new(), Engine::new());
    call(&a, 100);
    if a.stats().nway_pass_runs == 0 {
        eprintln!("skipped: no single-pass n-way kernel on this host's default engine");
        return;
    }
    // Alternating engines and lengths (one kernel serves every length of a spec).
    for i in 0..149 {
        call(&a, 100 - i % 7);
        call(&b, 50 + i % 3);
    }
    // In a row: counted in batches on this thread and on one that ends.
    for _ in 0..130 {
        call(&a, 100);
    }
    std::thread::scope(|s| {
        // Joined explicitly: the end of a scope does not wait for its threads' thread-local
        // destructors, `join` does (the thread adds its pending runs in one).
        s.spawn(|| {
            for _ in 0..70 {
                call(&a, 100);
            }
        })
        .join()
        .expect("the thread's calls");
    });
    assert_eq!(a.stats().nway_pass_runs, 1 + 149 + 130 + 70);
    assert_eq!(b.stats().nway_pass_runs, 149);
}

/// Eight branches over one array (a bucketing chain: `x < t1 ? v1 : x < t2 ? v2 : ... : x`):
/// eleven full operands, three buffers. The AVX-512 kernel gives the operands of one buffer one
/// base register, so it takes the call in one pass; every engine gives the bytes of the
/// chain written out here.
#[test]
fn many_operands_of_one_buffer_run_in_one_pass() {
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| ((i * 37) % 101) as f32 - 3.0).collect();
    let (a0, a1): (Vec<f32>, Vec<f32>) = ((0..n).map(|i| i as f32).collect(), vec![-1.5; n]);
    let t: Vec<[f32; 1]> = (1..=8).map(|j| [(j * 12) as f32]).collect();
    let v: Vec<[f32; 1]> = (0..8).map(|j| [100.0 + j as f32]).collect();
    let want: Vec<u32> = (0..n)
        .map(|i| {
            let b = (0..8).find(|&j| x[i] < t[j][0]);
            match b {
                Some(0) => a0[i],
                Some(1) => a1[i],
                Some(j) => v[j][0],
                None => x[i],
            }
            .to_bits()
        })
        .collect();
    let shape = [n];
    let xv = TensorRef::new(&x, &shape);
    let conds: Vec<Cond<'_>> = (0..8)
        .map(|j| Cond::lt(xv, TensorRef::scalar(&t[j])))
        .collect();
    let mut values: Vec<Choice<'_, f32>> = vec![
        TensorRef::new(&a0, &shape).into(),
        TensorRef::new(&a1, &shape).into(),
    ];
    values.extend((2..8).map(|j| Choice::from(TensorRef::scalar(&v[j]))));
    for (name, eng) in common::all_engines(&EngineConfig::new()) {
        let mut y = vec![0.0f32; n];
        eng.select_n(
            &conds,
            &values,
            xv.into(),
            TensorMut::new(&mut y, &shape),
            Broadcast::Numpy,
        )
        .unwrap();
        let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "{name}");
        if name == "jit-avx512" {
            assert_eq!(eng.stats().nway_pass_runs, 1, "{name}: not in one pass");
        }
    }
}

/// numpy.nan_to_num of f16 and bf16 (NaN payloads of both signs, ±inf, ±0, the largest finite
/// values): one pass on the AVX-512 kernel, which compares half floats as integer keys; the
/// bytes of the replacement written out here on every engine.
#[test]
fn nan_to_num_of_half_floats() {
    // (dtype, NaNs, +inf, -inf, others, max, min)
    type Half = (DType, [u16; 4], u16, u16, [u16; 6], u16, u16);
    let cases: [Half; 2] = [
        (
            DType::F16,
            [0x7e00, 0xfe00, 0x7c01, 0xfd55],
            0x7c00,
            0xfc00,
            [0x0000, 0x8000, 0x3c00, 0xbc00, 0x7bff, 0x0001],
            0x7bff,
            0xfbff,
        ),
        (
            DType::BF16,
            [0x7fc0, 0xffc0, 0x7f81, 0xffaa],
            0x7f80,
            0xff80,
            [0x0000, 0x8000, 0x3f80, 0xbf80, 0x7f7f, 0x0001],
            0x7f7f,
            0xff7f,
        ),
    ];
    for (dt, nans, pinf, ninf, others, max, min) in cases {
        // 203 elements: whole blocks and a partial one.
        let x: Vec<u16> = (0..203)
            .map(|i| match i % 7 {
                0 => nans[i / 7 % 4],
                1 => pinf,
                2 => ninf,
                k => others[(i + k) % 6],
            })
            .collect();
        let want: Vec<u16> = x
            .iter()
            .map(|&v| {
                if nans.contains(&v) {
                    0
                } else if v == pinf {
                    max
                } else if v == ninf {
                    min
                } else {
                    v
                }
            })
            .collect();
        let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let shape = [x.len()];
        let xv = TensorRef::new(&xb, &shape);
        let s = |v: u16| {
            Operand::from_bytes(
                dt,
                TensorRef::new(Box::leak(Box::new(v.to_le_bytes())), &[]),
            )
        };
        let conds = [
            Cond::isnan(Operand::from_bytes(dt, xv)),
            Cond::eq(Operand::from_bytes(dt, xv), s(pinf)),
            Cond::eq(Operand::from_bytes(dt, xv), s(ninf)),
        ];
        let (z, mx, mn) = ([0u8; 2], max.to_le_bytes(), min.to_le_bytes());
        let values: [Choice<'_, u8>; 3] = [
            TensorRef::new(&z, &[]).into(),
            TensorRef::new(&mx, &[]).into(),
            TensorRef::new(&mn, &[]).into(),
        ];
        for (name, eng) in common::all_engines(&EngineConfig::new()) {
            let mut out = vec![0u8; xb.len()];
            eng.select_n_bytes(
                dt,
                &conds,
                &values,
                xv.into(),
                TensorMut::new(&mut out, &shape),
                Broadcast::Numpy,
            )
            .unwrap();
            let got: Vec<u16> = out
                .chunks(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            assert_eq!(got, want, "{name} {dt}");
            if name == "jit-avx512" {
                assert_eq!(
                    eng.stats().nway_pass_runs,
                    1,
                    "{name} {dt}: not in one pass"
                );
            }
        }
    }
}

//! JIT (exact and shape-generic, every code-generation tier: x86 tiers the CPU lacks run in the
//! emulator), static kernels, kernels exported ahead of time (an engine with only a table, and a
//! JIT engine with one; build.rs links the table in) and the interpreter must agree byte for
//! byte, and on whether a call is an error, for arbitrary widths, modes, shapes, strides and
//! data, with a mask or a predicate (a comparison or a test of operands of any dtype, negated or
//! not) as the condition, and for n-way selects (up to 8 such conditions, values and the
//! default read from the output in place). Some inputs instead corrupt a copy of the table, which the checked constructor must
//! reject (or, when the edits touch nothing the table's meaning depends on, accept unchanged).
#![no_main]

use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use selectjit::aot::{AotTable, SelectjitAotEntry, SelectjitAotTable};
use selectjit::Tier;
use selectjit::{
    Backend, Broadcast, Choice, CmpOp, Cond, DType, Engine, EngineConfig, InPlace, Operand,
    TensorMut, TensorRef, TestOp,
};

unsafe extern "C" {
    /// Linked in by build.rs: kernels exported ahead of time for this machine.
    static selectjit_aot_table: SelectjitAotTable;
}

fn table() -> AotTable {
    static T: OnceLock<AotTable> = OnceLock::new();
    T.get_or_init(|| {
        // SAFETY: the table of the object build.rs exported for this target and linked in.
        unsafe { AotTable::from_raw(&raw const selectjit_aot_table) }.expect("table accepted")
    })
    .clone()
}

/// The interpreter first, then every other engine.
fn engines() -> &'static [Engine] {
    static E: OnceLock<Vec<Engine>> = OnceLock::new();
    E.get_or_init(|| {
        let cfg = |backend, tier, exact_after, emulate: bool| {
            EngineConfig::new()
                .backend(backend)
                .tier(tier)
                .exact_after(exact_after)
                .runner(emulate.then(selectjit_emu::Emulator::runner))
                .cache_capacity(4) // constant eviction
                .verify(true)
                .threads(1)
        };
        let mut v = vec![
            Engine::with_config(cfg(Backend::Interp, Tier::Auto, 1, false)).expect("engine"),
            Engine::with_config(cfg(Backend::Static, Tier::Auto, 1, false)).expect("engine"),
        ];
        for tier in [Tier::Cranelift, Tier::Avx2, Tier::Avx512] {
            let emulate = !tier.available();
            if emulate && !cfg!(target_arch = "x86_64") {
                continue;
            }
            for exact_after in [1, u32::MAX] {
                let e = Engine::with_config(cfg(Backend::Jit, tier, exact_after, emulate))
                    .expect("every tier runs here, natively or emulated");
                v.push(e);
            }
        }
        // No code generator: the table's exact or shape-generic kernel, else static.
        let aot = cfg(Backend::Static, Tier::Auto, 1, false).aot(table());
        v.push(Engine::with_config(aot).expect("a static engine"));
        // The table's exact kernels, and its generic kernels instead of compiled ones.
        let jit = cfg(Backend::Jit, Tier::Cranelift, u32::MAX, false);
        v.push(Engine::with_config(jit.aot(table())).expect("a Cranelift engine"));
        v
    })
}

/// Corrupts a copy of the table with up to four (offset, xor) edits of the header (not its
/// pointers), the entries (not the functions) and the keys, and checks it: rejected, or — when
/// the edits missed everything the table's meaning depends on — the same kernels.
fn corrupt_table(u: &mut Unstructured) -> Result<()> {
    // SAFETY: the linked table, alive for the whole program.
    let t: SelectjitAotTable = unsafe { *(&raw const selectjit_aot_table) };
    // SAFETY: the linked table's entries and keys cover its counts.
    let mut entries: Vec<SelectjitAotEntry> =
        unsafe { std::slice::from_raw_parts(t.entries, t.entry_count as usize) }.to_vec();
    // SAFETY: as above.
    let mut keys: Vec<u8> =
        unsafe { std::slice::from_raw_parts(t.keys, t.keys_len as usize) }.to_vec();
    let mut h = t;
    for _ in 0..u.int_in_range(1..=4)? {
        let x: u8 = u.int_in_range(1..=255)?;
        match u.int_in_range(0..=5)? {
            0 => h.magic[u.int_in_range(0..=7)?] ^= x,
            1 => h.version ^= x as u32,
            2 => h.checksum ^= (x as u64) << (8 * u.int_in_range(0..=7)?),
            3 => {
                h.triple[u.int_in_range(0..=63)?] ^= x;
                h.features[u.int_in_range(0..=255)?] ^= x;
            }
            4 => {
                let e = &mut entries[u.choose_index(t.entry_count as usize)?];
                match u.int_in_range(0..=3)? {
                    0 => e.key_offset ^= x as u32,
                    1 => e.key_len ^= x as u32,
                    2 => e.kind ^= x as u32,
                    _ => e.code_bytes ^= x as u32, // not checked: the table stays valid
                }
            }
            _ => {
                let i = u.choose_index(keys.len())?;
                keys[i] ^= x;
            }
        }
    }
    // Counts may only shrink: the copy must cover what its header says.
    if u.arbitrary::<bool>()? {
        h.entry_count = u.int_in_range(0..=t.entry_count)?;
    }
    h.entries = entries.as_ptr();
    h.keys = keys.as_ptr();
    // SAFETY: the copy points at its own entries and keys, covering its (never grown) counts;
    // the functions are the linked table's.
    match unsafe { AotTable::from_raw(&h) } {
        Err(e) => assert!(e.to_string().starts_with("kernel table rejected: ")),
        Ok(c) => {
            let orig = table();
            assert_eq!(c.exact_len(), orig.exact_len(), "corrupted table accepted");
            assert_eq!(c.generic_len(), orig.generic_len(), "corrupted table accepted");
            assert!(orig.signatures().all(|s| c.exact(s).is_some()));
            assert!(orig.patterns().all(|p| c.generic(p).is_some()));
        }
    }
    Ok(())
}

struct Input {
    data: Vec<u8>,
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
}

impl Input {
    fn view(&self) -> TensorRef<'_, u8> {
        TensorRef::with_layout(&self.data, &self.shape, &self.strides, self.offset)
    }
}

/// Strides for `shape` in one of several layouts — 0 contiguous, 1 column-major, 2 sliced (step
/// 2), 3 some dims broadcast (stride 0), 4 reversed (every stride negative), 5 mixed signs (each
/// dim forward or backwards, step 1 or 2) — and the offset of the first element that keeps the
/// lowest addressed element at 0, and the buffer length.
fn layout(u: &mut Unstructured, shape: &[usize], kind: u8) -> Result<(Vec<isize>, usize, usize)> {
    let r = shape.len();
    let mut strides = vec![0isize; r];
    let mut acc: isize = 1;
    let order: Vec<usize> = if kind == 1 { (0..r).collect() } else { (0..r).rev().collect() };
    for &k in &order {
        let zero = kind == 3 && u.ratio(1, 3)?;
        let (neg, step) = match kind {
            2 => (false, 2),
            4 => (true, 1),
            5 => (u.arbitrary::<bool>()?, if u.ratio(1, 4)? { 2 } else { 1 }),
            _ => (false, 1),
        };
        if zero {
            continue;
        }
        strides[k] = if neg { -acc * step } else { acc * step };
        acc *= step * shape[k].max(1) as isize;
    }
    let empty = shape.contains(&0);
    let offset: isize = shape
        .iter()
        .zip(&strides)
        .map(|(&d, &s)| if s < 0 { (d as isize - 1) * -s } else { 0 })
        .sum();
    let len = if empty { 0 } else { acc as usize };
    Ok((strides, if empty { 0 } else { offset as usize }, len))
}

/// A shape and a layout for it (see [`layout`]).
fn input(u: &mut Unstructured, w: usize) -> Result<Input> {
    let rank = u.int_in_range(0..=6)?;
    let mut shape = Vec::with_capacity(rank);
    for _ in 0..rank {
        shape.push(u.int_in_range(0..=5)?);
    }
    let kind = u.int_in_range(0..=5)?;
    let (strides, offset, len) = layout(u, &shape, kind)?;
    // Occasionally one element short, which must be an error everywhere (a negative-stride
    // view then also steps one element before the start when its offset is lowered instead).
    let (len, offset) = match (len > 0, u.int_in_range(0..=31)?) {
        (true, 0) => (len - 1, offset),
        (true, 1) if offset > 0 => (len, offset - 1),
        _ => (len, offset),
    };
    let mut data = vec![0u8; len * w];
    u.fill_buffer(&mut data)?;
    Ok(Input { data, shape, strides, offset })
}

/// A predicate condition: `op(lhs, rhs)` (a comparison) or `op(lhs)` (a test) over elements
/// of `dt`, maybe negated.
struct Pred {
    op: std::result::Result<CmpOp, TestOp>,
    dt: DType,
    lhs: Input,
    rhs: Input,
    not: bool,
}

impl Pred {
    fn arbitrary(u: &mut Unstructured) -> Result<Pred> {
        let dt = *u.choose(&[
            DType::Bool,
            DType::U8,
            DType::I8,
            DType::I16,
            DType::U32,
            DType::I64,
            DType::U64,
            DType::F16,
            DType::BF16,
            DType::F32,
            DType::F64,
        ])?;
        let op = match u.int_in_range(0..=8)? {
            0 => Ok(CmpOp::Eq),
            1 => Ok(CmpOp::Ne),
            2 => Ok(CmpOp::Lt),
            3 => Ok(CmpOp::Le),
            4 => Ok(CmpOp::Gt),
            5 => Ok(CmpOp::Ge),
            6 => Err(TestOp::IsNan),
            7 => Err(TestOp::IsInf),
            _ => Err(TestOp::IsFinite),
        };
        let lhs = input(u, dt.width())?;
        let rhs = input(u, dt.width())?;
        Ok(Pred { op, dt, lhs, rhs, not: u.arbitrary()? })
    }

    /// The predicate's own shape (its operands' numpy broadcast), if they broadcast.
    fn shape(&self) -> Option<Vec<usize>> {
        let rhs: &[usize] = if self.op.is_ok() { &self.rhs.shape } else { &[] };
        selectjit::output_shape(Broadcast::Numpy, &self.lhs.shape, rhs, &[])
            .ok()
            .map(|s| s.to_vec())
    }

    fn cond(&self) -> Cond<'_> {
        let l = Operand::from_bytes(self.dt, self.lhs.view());
        let c = match self.op {
            Ok(op) => Cond::cmp(op, l, Operand::from_bytes(self.dt, self.rhs.view())),
            Err(op) => Cond::test(op, l),
        };
        if self.not { c.not() } else { c }
    }
}

/// An n-way select (`Engine::select_n_bytes`, k = 1..=8 conditions, each a mask or a
/// predicate; values and the default of any layout, or the output itself): every engine agrees
/// with the interpreter byte for byte, and on whether the call is an error (then nothing is
/// written).
fn nway(u: &mut Unstructured) -> Result<()> {
    let dt = *u.choose(&[DType::U8, DType::I16, DType::F32, DType::F64, DType::Complex128])?;
    let w = dt.width();
    let mode = if u.ratio(1, 8)? { Broadcast::Exact } else { Broadcast::Numpy };
    let k = u.int_in_range(1..=8)?;
    let mut preds: Vec<Option<Pred>> = Vec::with_capacity(k);
    let mut masks = Vec::with_capacity(k);
    let mut values = Vec::with_capacity(k);
    let mut out_value = Vec::with_capacity(k);
    for _ in 0..k {
        preds.push(if u.ratio(1, 2)? { Some(Pred::arbitrary(u)?) } else { None });
        masks.push(input(u, 1)?);
        values.push(input(u, w)?);
        out_value.push(u.ratio(1, 8)?);
    }
    let default = input(u, w)?;
    let default_out = u.ratio(1, 4)?;
    // The output's shape: every operand's shape broadcast (numpy), when they broadcast.
    let mut shapes: Vec<Vec<usize>> = Vec::new();
    for i in 0..k {
        match &preds[i] {
            Some(p) => shapes.push(p.shape().unwrap_or_else(|| vec![2, 3, 5, 7])),
            None => shapes.push(masks[i].shape.clone()),
        }
        if !out_value[i] {
            shapes.push(values[i].shape.clone());
        }
    }
    if !default_out {
        shapes.push(default.shape.clone());
    }
    let out_shape = shapes.iter().try_fold(Vec::new(), |acc, s| {
        selectjit::output_shape(Broadcast::Numpy, &acc, s, &[]).ok().map(|o| o.to_vec())
    });
    let out_shape = out_shape.unwrap_or_default();
    let n: usize = out_shape.iter().product();
    if n > 1 << 14 {
        return Ok(());
    }
    let mut init = vec![0u8; n * w];
    u.fill_buffer(&mut init)?;
    let conds: Vec<Cond<'_>> = (0..k)
        .map(|i| match &preds[i] {
            Some(p) => p.cond(),
            None => Cond::mask(masks[i].view()),
        })
        .collect();
    let choices: Vec<Choice<'_, u8>> = (0..k)
        .map(|i| if out_value[i] { Choice::Out } else { Choice::Tensor(values[i].view()) })
        .collect();
    let d = if default_out { Choice::Out } else { Choice::Tensor(default.view()) };
    let mut results = Vec::new();
    for eng in engines() {
        let mut out = init.clone();
        let r = eng.select_n_bytes(dt, &conds, &choices, d, TensorMut::new(&mut out, &out_shape), mode);
        if r.is_err() {
            assert!(out == init, "n-way: written on error");
        }
        results.push(r.map(|_| out));
    }
    for (i, r) in results.iter().enumerate().skip(1) {
        match (&results[0], r) {
            (Ok(a), Ok(b)) => assert!(a == b, "n-way: engine {i} differs from the interpreter"),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("n-way: engine {i} disagrees on error-ness: {:?} vs {:?}", a.is_ok(), b.is_ok()),
        }
    }
    Ok(())
}

fn run(data: &[u8]) -> Result<()> {
    let mut u = Unstructured::new(data);
    if u.ratio(1, 16)? {
        return corrupt_table(&mut u);
    }
    if u.ratio(1, 4)? {
        return nway(&mut u);
    }
    let dt = *u.choose(&[DType::U8, DType::F16, DType::F32, DType::F64, DType::Complex128])?;
    let w = dt.width();
    let mode = match u.int_in_range(0..=3)? {
        0 => Broadcast::Numpy,
        1 => Broadcast::TwoStep,
        2 => Broadcast::Exact,
        _ => Broadcast::Pdpd { axis: u.int_in_range(-2..=4)? },
    };
    let pred = if u.ratio(1, 3)? { Some(Pred::arbitrary(&mut u)?) } else { None };
    let c = input(&mut u, 1)?;
    let cond = || match &pred {
        Some(p) => p.cond(),
        None => Cond::mask(c.view()),
    };
    let t = input(&mut u, w)?;
    let e = input(&mut u, w)?;
    let cond_shape = match &pred {
        Some(p) => p.shape(),
        None => Some(c.shape.clone()),
    };
    let out_shape = cond_shape
        .and_then(|cs| selectjit::output_shape(mode, &cs, &t.shape, &e.shape).ok());
    let Some(out_shape) = out_shape else {
        // Every engine reports the error.
        for eng in engines() {
            let mut out = vec![0x5au8; 16];
            let r = eng.select_bytes(dt, cond(), t.view(), e.view(), TensorMut::new(&mut out, &[]), mode);
            assert!(r.is_err());
            assert!(out.iter().all(|&b| b == 0x5a), "written on error");
        }
        return Ok(());
    };
    let n: usize = out_shape.iter().product();
    if n > 1 << 16 {
        return Ok(());
    }
    // Output: row-major, column-major, sliced, reversed or mixed signs (no broadcast).
    let out_kind = *u.choose(&[0u8, 1, 2, 4, 5])?;
    let fortran = out_kind != 0;
    let (ost, ooff, olen) = layout(&mut u, &out_shape, out_kind)?;
    let mut results = Vec::new();
    for eng in engines() {
        let mut out = vec![0x5au8; olen * w];
        let r = eng.select_bytes(
            dt,
            cond(),
            t.view(),
            e.view(),
            TensorMut::with_layout(&mut out, &out_shape, &ost, ooff),
            mode,
        );
        results.push(r.map(|_| out));
    }
    for (k, r) in results.iter().enumerate().skip(1) {
        match (&results[0], r) {
            (Ok(a), Ok(b)) => assert!(a == b, "engine {k} differs from the interpreter"),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("engine {k} disagrees on error-ness: {:?} vs {:?}", a.is_ok(), b.is_ok()),
        }
    }
    // In place, when then has the output's shape and a plain layout.
    if let Ok(want) = &results[0]
        && t.shape == out_shape.as_slice()
        && !fortran
        && t.data.len() == n * w
        && t.strides == selectjit::contiguous_strides(&t.shape).as_slice()
    {
        for eng in &engines()[1..] {
            let mut io = t.data.clone();
            eng.select_in_place_bytes(
                dt,
                cond(),
                TensorMut::new(&mut io, &out_shape),
                InPlace::Then,
                e.view(),
                mode,
            )
            .expect("valid in-place call");
            assert!(&io == want, "in-place result differs");
        }
    }
    // In place on a reversed then (output exactly then: same buffer, strides and offset): the
    // interpreter's in-place result is the reference.
    if results[0].is_ok() && t.shape == out_shape.as_slice() && t.strides.iter().all(|&s| s < 0) {
        let mut want = t.data.clone();
        let run_in_place = |eng: &Engine, io: &mut Vec<u8>| {
            eng.select_in_place_bytes(
                dt,
                cond(),
                TensorMut::with_layout(io, &t.shape, &t.strides, t.offset),
                InPlace::Then,
                e.view(),
                mode,
            )
            .expect("valid reversed in-place call");
        };
        run_in_place(&engines()[0], &mut want);
        for eng in &engines()[1..] {
            let mut io = t.data.clone();
            run_in_place(eng, &mut io);
            assert!(io == want, "reversed in-place result differs");
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});

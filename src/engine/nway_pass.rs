//! N-way selects in one pass: a flat call (the output contiguous and row-major; every
//! condition operand, value and the default either of the output's shape and contiguous, or one
//! element; in place only on the output itself) runs on one single-pass n-way kernel
//! ([`crate::kernel::nway`]) where the engine's generator has one for its spec. Everything else
//! (broadcasts of other shapes, strided views, a generator without n-way kernels, conditions
//! the kernel does not take) runs in tiles of two-way passes (`nway.rs`).
//!
//! The types of a call both paths read (its values, a validated call's operands) live here,
//! below `nway.rs`.

use std::sync::Arc;

use smallvec::SmallVec;

use super::api::resolve;
use super::exec::CondArg;
use super::validate::PredSrc;
use super::{Engine, NWAY_COMPILE_US, NWAY_COMPILES};
use crate::cond::{Cond, Operand, Repr, Src as OpSrc};
use crate::dtype::DType;
use crate::kernel::nway::{Form, NBranch, NCond, NwayKernel, NwaySpec};
use crate::pred::Kind;
use crate::shape::Dims;
use crate::tensor::{TensorMut, TensorRef};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::shape::Strides;

/// One value of an n-way select ([`Engine::select_n`]): a tensor of the output's dtype, or the
/// output's own contents on entry (an in-place call: `x = select([...], [...], x)`).
#[derive(Clone, Copy, Debug)]
pub enum Choice<'a, T> {
    /// A tensor, broadcast into the output.
    Tensor(TensorRef<'a, T>),
    /// The output's elements as they were before the call.
    Out,
}

impl<'a, T> From<TensorRef<'a, T>> for Choice<'a, T> {
    fn from(t: TensorRef<'a, T>) -> Self {
        Choice::Tensor(t)
    }
}

/// An operand validated and placed in the output's index space: its shape and element strides
/// padded on the left to the output's rank, its first element, its bytes and element width.
pub(super) struct Placed<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) width: usize,
    pub(super) shape: Dims,
    pub(super) strides: Strides,
    pub(super) offset: usize,
}

/// Where a branch's value (or the default) comes from in a tile.
#[derive(Clone, Copy)]
pub(super) enum Val {
    /// `placed[i]`.
    Placed(usize),
    /// The output on entry: the scratch copy of the tile, or the tile itself when it is the
    /// default and nothing else reads the output.
    Out,
}

/// A condition operand's source: `placed[i]`, a scalar (kept as it is), or the output on entry.
#[derive(Clone, Copy)]
pub(super) enum Slot {
    Placed(usize),
    Scalar,
    Out,
}

/// A validated n-way call, run tile by tile.
pub(super) struct Run<'r, 'a> {
    pub(super) engine: &'r Engine,
    pub(super) dtype: DType,
    pub(super) conds: &'r [Cond<'a>],
    pub(super) slots: &'r [[Option<Slot>; 2]],
    pub(super) vals: &'r [Val],
    pub(super) dflt: Val,
    pub(super) placed: &'r [Placed<'a>],
    pub(super) out: &'r Placed<'a>,
    /// Whether a condition or a value (other than the default) reads the output: the tile is
    /// copied to a scratch tile first.
    pub(super) scratch: bool,
    /// Whether the last branch's condition, its value and the default span the output.
    pub(super) spans: bool,
}

/// A call's pointers, shared by the threads that run disjoint parts of it.
struct Shared<'p> {
    ptrs: &'p [*const u8],
    out: *mut u8,
}
// SAFETY: the pointers come from validated buffers that outlive the parallel section (it ends
// before the call returns); threads write disjoint parts of the output and only read the
// operands.
unsafe impl Send for Shared<'_> {}
// SAFETY: as for `Send`; the wrapper is only read.
unsafe impl Sync for Shared<'_> {}

/// The n-way kernel a thread ran last, with its engine's id and its spec: calls that repeat
/// one pattern skip the engine's lock and the spec's hash. It also counts the thread's runs of
/// single-pass kernels of that engine, added to the engine's count [`RUNS_BATCH`] at a time
/// (an atomic add per call was 7% of a 16-element call), when it is replaced or its thread
/// ends, and when the thread asks for stats.
struct Last {
    engine: u64,
    spec: NwaySpec,
    kernel: Arc<NwayKernel>,
    /// The engine's count of runs ([`Engine::nway_runs`]).
    counter: Arc<AtomicU64>,
    pending: std::cell::Cell<u64>,
}

/// Runs a thread counts before adding them to its engine's count.
const RUNS_BATCH: u64 = 64;

impl Last {
    /// Counts one run, added to the engine's count with the thread's pending ones every
    /// [`RUNS_BATCH`].
    fn count(&self) {
        let n = self.pending.get() + 1;
        if n == RUNS_BATCH {
            self.counter.fetch_add(n, Ordering::Relaxed);
            self.pending.set(0);
        } else {
            self.pending.set(n);
        }
    }
}

impl Drop for Last {
    fn drop(&mut self) {
        self.counter
            .fetch_add(self.pending.replace(0), Ordering::Relaxed);
    }
}

thread_local! {
    static LAST: std::cell::RefCell<Option<Last>> = const { std::cell::RefCell::new(None) };
}

/// Kernels (or the absence of one) kept per engine, by spec; cleared when full.
pub(super) const NWAY_CACHE: usize = 256;

/// Where an operand's elements start: an address in its own buffer, or null for the output's
/// first element (an operand read in place; a buffer's address is never null).
type Ptr = *const u8;

/// A flat call, planned: its kernel's spec, each operand's pointer in the spec's order, and the
/// output's length in elements and first byte.
pub(super) struct Flat {
    spec: NwaySpec,
    ptrs: SmallVec<[Ptr; 16]>,
    n: usize,
    out_at: usize,
}

impl Flat {
    /// An empty plan, for [`plan`] to fill.
    pub(super) fn new() -> Flat {
        Flat {
            spec: NwaySpec {
                width: 1,
                nt: false,
                rows: false,
                branches: SmallVec::new(),
                default: Form::Full,
                same: SmallVec::new(),
            },
            ptrs: SmallVec::new(),
            n: 0,
            out_at: 0,
        }
    }
}

/// Whether `shape` with `strides` (elements; `None`: row-major) is row-major contiguous.
pub(super) fn contiguous(shape: &[usize], strides: Option<&[isize]>) -> bool {
    let Some(st) = strides else {
        return true;
    };
    if st.len() != shape.len() {
        return false;
    }
    let mut expect = 1isize;
    for (&d, &s) in shape.iter().zip(st).rev() {
        if d > 1 {
            if s != expect {
                return false;
            }
            expect = expect.saturating_mul(d as isize);
        }
    }
    true
}

/// An operand of `len` elements of `width` bytes at `bytes`, viewed with `shape`, `strides` and
/// `offset`, read by a flat call of `n` elements of shape `oshape`: its form and first element.
fn operand(
    bytes: &[u8],
    width: usize,
    (shape, strides, offset): (&[usize], Option<&[isize]>, usize),
    oshape: &[usize],
    n: usize,
) -> Option<(Form, Ptr)> {
    let len = bytes.len() / width;
    // (Compared element by element: a call of `memcmp` costs more than these few dims.)
    let same = shape.len() == oshape.len() && shape.iter().zip(oshape).all(|(a, b)| a == b);
    if same && contiguous(shape, strides) && offset.checked_add(n)? <= len {
        Some((Form::Full, bytes[offset * width..].as_ptr()))
    } else if shape.len() <= oshape.len() && shape.iter().all(|&d| d == 1) && offset < len {
        Some((Form::Splat, bytes[offset * width..].as_ptr()))
    } else {
        None
    }
}

/// [`NwaySpec::same`] of a flat call's operands at `ptrs` (null: the output on entry), each
/// full of `full[j]`-byte elements or (0) a splat: full operands of one width at one address
/// share a buffer.
fn same(ptrs: &[Ptr], full: &[u8]) -> SmallVec<[u8; 16]> {
    let mut same: SmallVec<[u8; 16]> = SmallVec::new();
    for j in 1..ptrs.len() {
        if full[j] == 0 {
            continue;
        }
        if let Some(i) = (0..j).find(|&i| full[i] == full[j] && ptrs[i] == ptrs[j]) {
            if same.is_empty() {
                same.extend((0..ptrs.len()).map(|k| k as u8));
            }
            same[j] = same[i];
        }
    }
    same
}

/// `call`'s flat plan, when it has one: the output contiguous, every operand full or one
/// element, every condition valid for `dtype` and of a kind a single-pass kernel may take.
/// `None`: the tiles run the call (and make its errors).
pub(super) fn plan(
    flat: &mut Flat,
    dtype: DType,
    conds: &[Cond<'_>],
    values: &[Choice<'_, u8>],
    default: Choice<'_, u8>,
    out: &TensorMut<'_, u8>,
) -> Option<()> {
    let k = conds.len();
    let w = dtype.width();
    if k == 0 || values.len() != k || !contiguous(out.shape(), out.strides()) {
        return None;
    }
    let oshape = out.shape();
    let n = oshape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    let out_len = out.data().len() / w;
    if n == 0 || out.offset().checked_add(n)? > out_len {
        return None;
    }
    // Filled in place: a call this small moves little else.
    let ptrs = &mut flat.ptrs;
    ptrs.clear();
    // Per operand, its element width when full, 0 for a splat (for `same`).
    let mut full: SmallVec<[u8; 16]> = SmallVec::new();
    let fw = |f: Form, w: usize| if f == Form::Full { w as u8 } else { 0 };
    let branches = &mut flat.spec.branches;
    branches.clear();
    let value = |v: &Choice<'_, u8>| -> Option<(Form, Ptr)> {
        match v {
            Choice::Tensor(t) => {
                operand(t.data(), w, (t.shape(), t.strides(), t.offset()), oshape, n)
            }
            Choice::Out => Some((Form::Full, std::ptr::null())),
        }
    };
    for (c, v) in conds.iter().zip(values) {
        // The condition as its kernel reads it (what `api::resolve` makes of it, read here
        // without its intermediate values: a flat call's planning is most of a small call).
        let (cond, not) = match &c.repr {
            Repr::Mask(m) => {
                let (f, p) = operand(m.data(), 1, (m.shape(), m.strides(), m.offset()), oshape, n)?;
                ptrs.push(p);
                full.push(fw(f, 1));
                (NCond::Mask(f), c.not)
            }
            Repr::Bits { .. } => return None,
            Repr::Cmp(_, l, r) | Repr::Test(_, l @ r) => {
                let (kind, swap, not) = c.canonical(dtype)?;
                let dt = |o: &Operand<'_>| o.dtype().unwrap_or(dtype);
                if dt(l) != dt(r) {
                    return None; // (the tiles make the error)
                }
                let pw = kind.operand_width();
                let mut src = |o: &Operand<'_>| -> Option<Form> {
                    let (f, ptr) = match &o.src {
                        OpSrc::View {
                            bytes,
                            shape,
                            strides,
                            offset,
                            ..
                        } => operand(bytes, pw, (shape, *strides, *offset), oshape, n)?,
                        OpSrc::Scalar { bytes, .. } => (Form::Splat, bytes.as_ptr()),
                        OpSrc::InPlace if pw == w => (Form::Full, std::ptr::null()),
                        OpSrc::InPlace | OpSrc::Placeholder { .. } => return None,
                    };
                    ptrs.push(ptr);
                    full.push(fw(f, pw));
                    Some(f)
                };
                let cond = match kind {
                    Kind::Cmp(op, d) => {
                        let (l, r) = if swap { (r, l) } else { (l, r) };
                        let l = src(l)?;
                        NCond::Cmp(op, d, l, src(r)?)
                    }
                    Kind::Test(op, d) => NCond::Test(op, d, src(l)?),
                    Kind::Mask => return None,
                };
                (cond, not)
            }
        };
        let (vf, vp) = value(v)?;
        ptrs.push(vp);
        full.push(fw(vf, w));
        branches.push(NBranch {
            cond,
            not,
            value: vf,
        });
    }
    let (df, dp) = value(&default)?;
    ptrs.push(dp);
    full.push(fw(df, w));
    flat.spec.width = w;
    flat.spec.nt = false;
    flat.spec.rows = false;
    flat.spec.default = df;
    flat.spec.same = same(&flat.ptrs, &full);
    flat.n = n;
    flat.out_at = out.offset() * w;
    Some(())
}

impl Engine {
    /// The single-pass kernel of `spec`: the AOT table's, where the engine has a table with
    /// it (of either store kind: see `AotTable::nway`), else from this engine's generators,
    /// compiled once (`None`: no generator has one; a compile error is kept as
    /// [`Engine::last_codegen_error`]). The table comes first, as for two-way calls, and
    /// serves engines without a code generator too.
    pub(super) fn nway_kernel(&self, spec: &NwaySpec) -> Option<Arc<NwayKernel>> {
        if let Some(k) = self.config.aot.as_ref().and_then(|t| t.nway(spec)) {
            return Some(k.clone());
        }
        let cg = self.codegen()?;
        let hit = LAST.with(|l| match &*l.borrow() {
            Some(last) if last.engine == self.id && last.spec == *spec => Some(last.kernel.clone()),
            _ => None,
        });
        if hit.is_some() {
            return hit;
        }
        let mut m = self.nway.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = m.get(spec) {
            if let Some(k) = k {
                let last = Last {
                    engine: self.id,
                    spec: spec.clone(),
                    kernel: k.clone(),
                    counter: self.nway_runs.clone(),
                    pending: std::cell::Cell::new(0),
                };
                // The one replaced adds its pending runs to its engine's count when dropped,
                // after the borrow.
                let old = LAST.with(|l| l.borrow_mut().replace(last));
                drop(old);
            }
            return k.clone();
        }
        let t0 = std::time::Instant::now();
        let k = match cg.compile_nway(spec)? {
            Ok(k) => {
                self.runs[NWAY_COMPILES].fetch_add(1, Ordering::Relaxed);
                let us = t0.elapsed().as_micros() as u64;
                self.runs[NWAY_COMPILE_US].fetch_add(us, Ordering::Relaxed);
                Some(Arc::new(k))
            }
            Err(e) => {
                *self
                    .last_codegen_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(e);
                None
            }
        };
        if m.len() >= NWAY_CACHE {
            m.clear();
        }
        m.insert(spec.clone(), k.clone());
        k
    }

    /// Counts a run of a single-pass kernel: on the thread's [`Last`] when it is this engine's.
    fn count_nway_run(&self) {
        let counted = LAST.with(|l| match &*l.borrow() {
            Some(last) if last.engine == self.id => {
                last.count();
                true
            }
            _ => false,
        });
        if !counted {
            self.nway_runs.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Adds this thread's pending runs of single-pass kernels of this engine to its count.
    pub(super) fn flush_nway_runs(&self) {
        LAST.with(|l| {
            if let Some(last) = &*l.borrow()
                && last.engine == self.id
            {
                last.counter
                    .fetch_add(last.pending.replace(0), Ordering::Relaxed);
            }
        });
    }

    /// Runs `flat` on its single-pass kernel, if the engine has one (else gives the output
    /// back for the tiles).
    pub(super) fn run_nway_pass<'o>(
        &self,
        flat: &mut Flat,
        out: TensorMut<'o, u8>,
    ) -> Option<TensorMut<'o, u8>> {
        let nt_min = self.codegen().map_or(usize::MAX, |c| c.nt_min_bytes());
        // Non-temporal stores where the call's traffic (not only its output, as for a two-way
        // call) reaches the threshold: the output would leave the cache before the call ends
        // anyway. case_when_f64_1m (36 MiB of traffic, 8 MiB of output) ran in 650-700 µs so,
        // 745-820 µs with ordinary stores. (A call whose output is below 1/256 of the
        // threshold never reaches it: at most 25 operands of at most the output's width.)
        flat.spec.nt = flat.n.saturating_mul(flat.spec.width) >= nt_min / 256
            && flat.n.saturating_mul(flat.spec.bytes_per_element()) >= nt_min;
        // SAFETY (every kernel call below): `plan` checked every pointer: a full operand's
        // buffer holds `n` elements of its width from its pointer, a splat's one, the output
        // `n` from `op` (all in the spec's operand order); the operands are shared borrows, so
        // none overlaps the exclusively borrowed output, except those read in place, which
        // are the output itself (`op`); parts write disjoint ranges `a..b` of `0..n`; the
        // kernel is `flat.spec`'s.
        let mut out = out;
        let op = out.data_mut()[flat.out_at..].as_mut_ptr();
        for p in flat.ptrs.iter_mut().filter(|p| p.is_null()) {
            *p = op.cast_const();
        }
        let ptrs = &flat.ptrs[..];
        let bytes = flat.n * flat.spec.width;
        // A call on one thread of the kernel the thread ran last runs it where the thread keeps
        // it (no reference counting: two atomic operations were 8% of a 16-element call).
        if !self.splits(bytes, flat.n / 64) {
            let ran = LAST.with(|l| match &*l.borrow() {
                Some(last) if last.engine == self.id && last.spec == flat.spec => {
                    // SAFETY: see above (the thread's last kernel is of this spec).
                    unsafe { last.kernel.run(ptrs, op, 0, flat.n) };
                    last.count();
                    true
                }
                _ => false,
            });
            if ran {
                return None;
            }
        }
        let Some(kernel) = self.nway_kernel(&flat.spec) else {
            return Some(out);
        };
        let shared = Shared { ptrs, out: op };
        self.in_parts(flat.n, 64, bytes, &|a, b| {
            let sh = &shared;
            // SAFETY: see above.
            unsafe { kernel.run(sh.ptrs, sh.out, a, b) };
        });
        self.count_nway_run();
        None
    }

    /// Runs `f(a, b)` on parts `a..b` of `0..n` (boundaries at multiples of `align`, a power
    /// of two) on the engine's threads where a call of `bytes` of output is split, else
    /// `f(0, n)`.
    fn in_parts(&self, n: usize, align: usize, bytes: usize, f: &(dyn Fn(usize, usize) + Sync)) {
        if self.splits(bytes, n / align)
            && let Some(pool) = self.pool()
        {
            let parts = pool.threads().min(n / align);
            let cut = |i: usize| {
                if i == parts {
                    n
                } else {
                    (n * i / parts) & !(align - 1)
                }
            };
            if pool.run(parts, &|i| f(cut(i), cut(i + 1))) {
                return;
            }
        }
        f(0, n);
    }
}

/// An operand of a validated call, as a kernel of rows reads it.
#[derive(Clone, Copy)]
enum Src {
    /// `placed[i]`.
    Placed(usize),
    /// The output on entry.
    Out,
    /// One element at this address.
    Scalar(*const u8),
}

impl Run<'_, '_> {
    /// Runs the validated call on a single-pass kernel where it has that form: the output
    /// row-major and contiguous; over the loop nest collapsed for every operand at once, each
    /// operand contiguous along the innermost dimension or one element for the whole call,
    /// and rows of at least a block (64 bytes of output). The innermost dimension is the
    /// kernel's rows, the next one its row count (with each operand's stride), the others
    /// loops here. Whether it ran (else the tiles run the call; nothing was written).
    pub(super) fn one_pass(&self, out: &mut [u8], oshape: &[usize]) -> bool {
        self.try_one_pass(out, oshape).is_some()
    }

    fn try_one_pass(&self, out: &mut [u8], oshape: &[usize]) -> Option<()> {
        let (dtype, w) = (self.dtype, self.dtype.width());
        let rank = oshape.len();
        if rank == 0 || !contiguous(oshape, Some(&self.out.strides)) {
            return None;
        }
        // Every operand in the spec's order with its element width.
        let mut srcs: SmallVec<[(Src, usize); 24]> = SmallVec::new();
        let mut conds: SmallVec<[(NCond, bool); 8]> = SmallVec::new();
        let placed_or_out = |s: Option<Slot>| match s {
            Some(Slot::Placed(i)) => Some(Src::Placed(i)),
            Some(Slot::Out) => Some(Src::Out),
            _ => None,
        };
        let val = |v: Val| match v {
            Val::Placed(i) => Src::Placed(i),
            Val::Out => Src::Out,
        };
        for (i, c) in self.conds.iter().enumerate() {
            let (arg, not) = resolve(c, dtype).ok()?;
            let [a, b] = self.slots[i];
            match arg {
                CondArg::Mask(_) => {
                    srcs.push((placed_or_out(a)?, 1));
                    conds.push((NCond::Mask(Form::Full), not));
                }
                CondArg::Pred(p) => {
                    let pw = p.kind.operand_width();
                    // The slots in the canonical order of the predicate's operands.
                    let (l, r) = if p.swapped { (b, a) } else { (a, b) };
                    let src = |slot: Option<Slot>, ps: PredSrc<'_>| -> Option<Src> {
                        match (slot, ps) {
                            (Some(Slot::Scalar), PredSrc::Buf(bytes, _)) => {
                                Some(Src::Scalar(bytes.as_ptr()))
                            }
                            (s, _) => placed_or_out(s),
                        }
                    };
                    let k = match p.kind {
                        Kind::Cmp(op, d) => {
                            srcs.push((src(l, p.lhs)?, pw));
                            srcs.push((src(r, p.rhs?)?, pw));
                            NCond::Cmp(op, d, Form::Full, Form::Full)
                        }
                        Kind::Test(op, d) => {
                            srcs.push((src(l, p.lhs)?, pw));
                            NCond::Test(op, d, Form::Full)
                        }
                        Kind::Mask => return None,
                    };
                    conds.push((k, not));
                }
            }
            srcs.push((val(self.vals[i]), w));
        }
        srcs.push((val(self.dflt), w));
        // The output's and each operand's element strides over the output's dimensions
        // (0 where broadcast), and each operand's first element.
        let mut st: SmallVec<[Strides; 25]> = SmallVec::new();
        let mut base: SmallVec<[*const u8; 24]> = SmallVec::new();
        let out_base = out[self.out.offset * w..].as_mut_ptr();
        for &(s, _) in &srcs {
            let (strides, at) = match s {
                Src::Placed(i) => {
                    let p = &self.placed[i];
                    let eff = p
                        .shape
                        .iter()
                        .zip(&p.strides)
                        .map(|(&n, &s)| if n == 1 { 0 } else { s })
                        .collect();
                    (eff, p.bytes[p.offset * p.width..].as_ptr())
                }
                Src::Out => (self.out.strides.clone(), out_base.cast_const()),
                Src::Scalar(p) => (smallvec::smallvec![0; rank], p),
            };
            st.push(strides);
            base.push(at);
        }
        st.push(self.out.strides.clone());
        // The nest collapsed for every operand at once, innermost first: (size, strides).
        let mut nest: Vec<(usize, SmallVec<[isize; 25]>)> = Vec::new();
        for d in (0..rank).rev() {
            let n = oshape[d];
            if n == 1 {
                continue;
            }
            let here: SmallVec<[isize; 25]> = st.iter().map(|s| s[d]).collect();
            if let Some((size, inner)) = nest.last_mut()
                && here
                    .iter()
                    .zip(inner.iter())
                    .all(|(&o, &i)| o == i * *size as isize)
            {
                *size *= n;
                continue;
            }
            nest.push((n, here));
        }
        let (len, inner) = nest.first()?;
        let len = *len;
        if len * w < 64 || inner[srcs.len()] != 1 {
            return None;
        }
        // Each operand contiguous along the rows, or one element for the whole call.
        let mut forms: SmallVec<[Form; 24]> = SmallVec::new();
        for (j, &s) in inner[..srcs.len()].iter().enumerate() {
            forms.push(match s {
                1 => Form::Full,
                0 if nest.iter().all(|(_, t)| t[j] == 0) => Form::Splat,
                _ => return None,
            });
        }
        // The forms into the spec.
        let mut f = forms.iter().copied();
        let mut branches: SmallVec<[NBranch; 8]> = SmallVec::new();
        for &(c, not) in &conds {
            let cond = match c {
                NCond::Mask(_) => NCond::Mask(f.next()?),
                NCond::Cmp(op, d, _, _) => NCond::Cmp(op, d, f.next()?, f.next()?),
                NCond::Test(op, d, _) => NCond::Test(op, d, f.next()?),
            };
            let value = f.next()?;
            branches.push(NBranch { cond, not, value });
        }
        let default = f.next()?;
        let rows = nest.len() >= 2;
        let mut spec = NwaySpec {
            width: w,
            nt: false,
            rows,
            branches,
            default,
            same: SmallVec::new(),
        };
        // Bytes moved: the output's, and each full operand's own elements (counted once
        // however often broadcast).
        let total: usize = oshape.iter().product();
        let mut traffic = total * w;
        for (j, &(_, ow)) in srcs.iter().enumerate() {
            if forms[j] == Form::Full {
                let own: usize = nest
                    .iter()
                    .filter(|(_, t)| t[j] != 0)
                    .map(|(n, _)| *n)
                    .product();
                traffic += own * ow;
            }
        }
        let nt_min = self
            .engine
            .codegen()
            .map_or(usize::MAX, |c| c.nt_min_bytes());
        spec.nt = traffic >= nt_min;
        let kernel = self.engine.nway_kernel(&spec)?;
        let ops = srcs.len();
        // Bytes per step of the row dimension and of each outer one, per operand and the output.
        let bytes_of = |t: &SmallVec<[isize; 25]>| -> SmallVec<[isize; 25]> {
            t.iter()
                .enumerate()
                .map(|(j, &s)| s * if j < ops { srcs[j].1 } else { w } as isize)
                .collect()
        };
        let (row_count, row_strides) = match nest.get(1) {
            Some((n, t)) => (*n, bytes_of(t)),
            None => (1, smallvec::smallvec![0; ops + 1]),
        };
        let outer: Vec<(usize, SmallVec<[isize; 25]>)> = nest[2.min(nest.len())..]
            .iter()
            .map(|(n, t)| (*n, bytes_of(t)))
            .collect();
        let mut idx = vec![0usize; outer.len()];
        let mut ptrs: SmallVec<[*const u8; 24]> = SmallVec::new();
        loop {
            ptrs.clear();
            let mut o = out_base;
            for j in 0..=ops {
                let off: isize = outer
                    .iter()
                    .zip(&idx)
                    .map(|((_, t), &i)| t[j] * i as isize)
                    .sum();
                if j < ops {
                    ptrs.push(base[j].wrapping_offset(off));
                } else {
                    o = o.wrapping_offset(off);
                }
            }
            // Sound because every operand was validated for its shape and strides
            // (`Views::add`) and broadcast into the output's shape, and the output is
            // contiguous: each row the kernel reads (a full operand's `len` elements from its
            // row start, a splat's one element) and writes (the output's `len` elements) lies
            // inside its buffer. The operands are shared borrows apart from those read in
            // place, which are the output itself at the same element (`out_base` with the
            // output's strides).
            let shared = Shared {
                ptrs: &ptrs,
                out: o,
            };
            if rows {
                // Parts of the rows.
                let rs = &row_strides;
                self.engine
                    .in_parts(row_count, 1, row_count * len * w, &|a, b| {
                        let sh = &shared;
                        let p: SmallVec<[*const u8; 24]> = sh
                            .ptrs
                            .iter()
                            .zip(rs.iter())
                            .map(|(q, s)| q.wrapping_offset(s * a as isize))
                            .collect();
                        let o = sh.out.wrapping_offset(rs[ops] * a as isize);
                        // SAFETY: see below; parts run disjoint rows `a..b`.
                        unsafe { kernel.run_rows(&p, o, (0, len), b - a, rs) };
                    });
            } else {
                self.engine.in_parts(len, 64, len * w, &|a, b| {
                    let sh = &shared;
                    // SAFETY: see below; parts write disjoint ranges `a..b` of the row.
                    unsafe { kernel.run(sh.ptrs, sh.out, a, b) };
                });
            }
            // The next index of the outer dimensions.
            let mut d = 0;
            loop {
                if d == outer.len() {
                    self.engine.count_nway_run();
                    return Some(());
                }
                idx[d] += 1;
                if idx[d] < outer[d].0 {
                    break;
                }
                idx[d] = 0;
                d += 1;
            }
        }
    }
}

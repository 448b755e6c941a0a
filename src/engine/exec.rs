//! Running a validated call: the same-shape contiguous fast path, planning, the kernel (or
//! the static kernels, or the interpreter), and the split across threads.

use super::interp_backend::{CondBytes, interp_bytes};
use super::layouts::{self, Form};
use super::memo::FlatKey;
use super::policy::Pick;
use super::validate::{Desc, Operand, Pred, PredSrc, check, check_pred, same_contiguous};
use super::{BLOCKED_RUNS, Backend, Engine, STATIC_RUNS};
use crate::error::Result;
use crate::kernel::abi::Ptrs;
use crate::measure::Way;
use crate::plan::{
    COND, ELSE, OPS, OUT, RHS, Signature, THEN, plan_cond, plan_contiguous, plan_layout,
};
use crate::shape::Broadcast;
use crate::static_kernels;
use crate::tensor::TensorRef;

/// A call's condition as the engine runs it: a mask view, or a predicate (canonical, then and
/// else already swapped for a negation).
pub(crate) enum CondArg<'a> {
    Mask(TensorRef<'a, u8>),
    Pred(Pred<'a>),
}

/// The condition's bytes of a planned call: the mask's buffer, or the buffers of a
/// predicate's operands (`None`: the in-place output).
#[derive(Clone, Copy)]
enum CondBufs<'a> {
    Mask(&'a [u8]),
    Pred(Option<&'a [u8]>, Option<&'a [u8]>),
}

/// A kernel call's pointers, shared by the threads that run disjoint outer ranges.
#[derive(Clone, Copy)]
struct SharedPtrs(Ptrs);
// SAFETY: the pointers come from validated buffers that outlive the parallel section (it ends
// before `run_planned` returns); threads write disjoint outer ranges of an output whose
// elements are distinct (checked), and only read the inputs.
unsafe impl Send for SharedPtrs {}
// SAFETY: as for `Send`; the wrapper is only copied, never mutated.
unsafe impl Sync for SharedPtrs {}

/// A mask call's four kernel bases, with the absent rhs's.
fn base5(b: [usize; 4]) -> [usize; OPS] {
    [b[0], b[1], b[2], b[3], 0]
}

/// Validates a call and plans it: its signature (`None`: an empty output) and each operand's
/// kernel base element. `d` in the caller's order; the plan with then and else traded when
/// `swap` says so (see [`super::validate::Checked::traded`]).
pub(super) fn plan_checked(
    width: usize,
    mode: Broadcast,
    d: &[Desc<'_>; 4],
    swap: bool,
) -> Result<layouts::Planned> {
    let c = check(mode, d[0], d[1], d[2], d[3])?.traded(swap);
    let Some(p) = plan_layout(width, &c.out, [&c.st[0], &c.st[1], &c.st[2], &c.st[3]]) else {
        return Ok((None, [0; OPS])); // empty output
    };
    // Each kernel base: the view's first element moved by the planner's flips, which is an
    // element the validated view addresses (so the sum is in 0..len).
    let base: [usize; 4] = std::array::from_fn(|op| (c.off[op] as isize + p.base[op]) as usize);
    Ok((Some(p.sig), base5(base)))
}

/// [`plan_checked`] for a predicate: the signature (`None`: an empty output) and each of the
/// five operands' kernel base element.
pub(super) fn plan_pred(
    width: usize,
    mode: Broadcast,
    pred: &Pred<'_>,
    d: [Desc<'_>; 3],
    in_place: bool,
    swap: bool,
) -> Result<(Option<Signature>, [usize; OPS])> {
    let c = check_pred(mode, pred, d[0], d[1], d[2], in_place)?.traded(swap);
    let st: [&[isize]; OPS] = std::array::from_fn(|op| c.st[op].as_slice());
    let Some(p) = plan_cond(width, pred.kind, &c.out, st) else {
        return Ok((None, [0; OPS])); // empty output
    };
    // As in `plan_checked`: each base is an element the validated view addresses.
    let base: [usize; OPS] = std::array::from_fn(|op| (c.off[op] as isize + p.base[op]) as usize);
    Ok((Some(p.sig), base))
}

/// Predicates of at most this many elements may be hoisted (a mask that stays in L1).
pub(crate) const HOIST_MAX: usize = 16 * 1024;
/// ... when the output has at least this many elements per predicate element,
pub(crate) const HOIST_RATIO: usize = 256;
/// ... and at least this many elements: a hoisted call plans two calls (~1 µs), which only
/// outputs of this size (tens of µs of work) make negligible.
pub(crate) const HOIST_MIN_OUTPUT: usize = 1 << 18;

/// The shape at which a call evaluates its predicate once, before the select, instead of per
/// output element in the kernel: a predicate of no more than [`HOIST_MAX`] elements broadcast
/// over an output of at least [`HOIST_RATIO`] times as many, and of at least
/// [`HOIST_MIN_OUTPUT`] elements (an attention padding mask
/// `[batch, 1, 1, keys]` compared to 0 and broadcast over heads and queries). The kernel that
/// fuses it would compare every mask element once per output row, reading the mask's dtype
/// (i64: twice the output's bytes of f32) from L1 or L2 per row; a byte mask of the same shape
/// costs a quarter of that and nothing per row but its bytes. `None` for every other call, and
/// for predicates on the in-place output. Malformed shapes give `None`: the fused path reports
/// them.
pub(crate) fn hoisted_shape(pred: &Pred<'_>, out_shape: &[usize]) -> Option<crate::shape::Dims> {
    fn shape<'d>(s: PredSrc<'d>) -> Option<&'d [usize]> {
        match s {
            PredSrc::Buf(_, d) => Some(d.shape),
            PredSrc::Out => None,
        }
    }
    // The output's size first: every small call (the per-call path of tiny predicates) stops
    // here, before any shape is broadcast.
    let total = crate::shape::numel(out_shape);
    if total < HOIST_MIN_OUTPUT {
        return None;
    }
    let l = shape(pred.lhs)?;
    let pshape: crate::shape::Dims = match pred.rhs {
        Some(r) => crate::shape::broadcast_pair(["lhs", "rhs"], l, shape(r)?).ok()?,
        None => l.into(),
    };
    let n = crate::shape::numel(&pshape);
    (n > 0 && n <= HOIST_MAX && n.checked_mul(HOIST_RATIO)? <= total).then_some(pshape)
}

impl Engine {
    /// Whether a call with `out_bytes` of output and `outer` outer indices may be split across
    /// threads.
    pub(super) fn splits(&self, out_bytes: usize, outer: usize) -> bool {
        out_bytes >= self.config.parallel_min_bytes && outer >= 2 && self.config.threads >= 2
    }
    /// `out_layout`: the output's shape, strides and offset (elements). `then` and `else_` as
    /// the caller gave them; `swap`: they trade places once checked (a negated condition, or a
    /// canonical form's).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_bytes(
        &self,
        width: usize,
        mode: Broadcast,
        cond: CondArg<'_>,
        swap: bool,
        then: Operand<'_>,
        else_: Operand<'_>,
        out: &mut [u8],
        out_layout: (&[usize], Option<&[isize]>, usize),
    ) -> Result<()> {
        let od = Desc {
            len: out.len() / width,
            shape: out_layout.0,
            strides: out_layout.1,
            offset: out_layout.2,
        };
        let cond = match cond {
            CondArg::Mask(m) => m,
            CondArg::Pred(p) => {
                return self.run_pred(width, mode, &p, swap, [then, else_], out, od);
            }
        };
        // The descriptions as given (what the checks and the memo key see), the sources as the
        // kernels read them.
        let descs = [(&cond).into(), then.desc(od), else_.desc(od), od];
        let (then, else_) = if swap { (else_, then) } else { (then, else_) };
        if self.config.backend != Backend::Interp
            && let Some(n) = same_contiguous(&descs)
        {
            if self.config.backend == Backend::Jit {
                let o = out.as_mut_ptr();
                let src = |x: &Operand<'_>| match x {
                    Operand::Buf(b, _) => b.as_ptr(),
                    Operand::Out => o as *const u8,
                };
                let p = Ptrs {
                    cond: cond.data().as_ptr(),
                    then: src(&then),
                    else_: src(&else_),
                    out: o,
                    rhs: std::ptr::null(),
                };
                if self.run_memo_flat(FlatKey::contiguous_mask(width, n), p, out.len()) {
                    return Ok(());
                }
            }
            let sig = plan_contiguous(width, n);
            let c = CondBufs::Mask(cond.data());
            self.run_planned(sig.as_ref(), base5([0; 4]), c, &then, &else_, out);
            return Ok(());
        }
        if self.config.backend == Backend::Interp {
            let c = check(mode, descs[0], descs[1], descs[2], descs[3])?.traded(swap);
            interp_bytes(width, &c, CondBytes::Mask(cond.data()), &then, &else_, out);
            return Ok(());
        }
        let c = CondBufs::Mask(cond.data());
        // The same description as this thread's last planned call: the same checks passed and
        // the same plan (see `layouts`).
        let form = Form::Mask { swap };
        let ran = layouts::with_last(width, mode, form, &descs, |(sig, base)| {
            self.run_planned(sig.as_ref(), *base, c, &then, &else_, out);
        });
        if !ran {
            let (sig, base) = plan_checked(width, mode, &descs, swap)?;
            self.run_planned(sig.as_ref(), base, c, &then, &else_, out);
            layouts::remember(width, mode, form, &descs, (sig, base));
        }
        Ok(())
    }

    /// [`Engine::run_bytes`] of a call whose condition is a predicate: validated, planned with
    /// the predicate's operands, run by a kernel that fuses it (a tier that compiles it) or in
    /// blocks by the static kernels (a mask per block, then its select), or by the interpreter.
    /// `then_else` as the caller gave them, traded once checked where `swap` says so.
    #[allow(clippy::too_many_arguments)]
    fn run_pred(
        &self,
        width: usize,
        mode: Broadcast,
        pred: &Pred<'_>,
        swap: bool,
        then_else: [Operand<'_>; 2],
        out: &mut [u8],
        od: Desc<'_>,
    ) -> Result<()> {
        let [then, else_] = then_else;
        let in_place = matches!(then, Operand::Out) || matches!(else_, Operand::Out);
        let (dt, de) = (then.desc(od), else_.desc(od));
        if self.config.backend != Backend::Interp
            && let Some(pshape) = hoisted_shape(pred, od.shape)
        {
            // Validated as the fused call would be: the same errors, nothing written.
            check_pred(mode, pred, dt, de, od, in_place)?;
            return self.run_hoisted(width, mode, pred, &pshape, swap, [then, else_], out, od);
        }
        let (then, else_) = if swap { (else_, then) } else { (then, else_) };
        if self.config.backend == Backend::Interp {
            let c = check_pred(mode, pred, dt, de, od, in_place)?.traded(swap);
            let cb = CondBytes::Pred(pred.kind, pred.lhs, pred.rhs);
            interp_bytes(width, &c, cb, &then, &else_, out);
            return Ok(());
        }
        fn buf(s: Option<PredSrc<'_>>) -> Option<&[u8]> {
            match s {
                Some(PredSrc::Buf(b, _)) => Some(b),
                _ => None,
            }
        }
        let c = CondBufs::Pred(buf(Some(pred.lhs)), buf(pred.rhs));
        // The same predicate on the same descriptions as this thread's last planned call: the
        // same checks passed and the same plan (see `layouts`).
        fn desc<'d>(s: PredSrc<'d>) -> Desc<'d> {
            match s {
                PredSrc::Buf(_, d) => d,
                PredSrc::Out => layouts::IN_PLACE,
            }
        }
        let mut descs: smallvec::SmallVec<[Desc<'_>; OPS]> = smallvec::smallvec![desc(pred.lhs)];
        descs.extend(pred.rhs.map(desc));
        descs.extend([dt, de, od]);
        let form = Form::Pred {
            kind: pred.kind,
            in_place,
            swap,
        };
        let ran = layouts::with_last(width, mode, form, &descs, |(sig, base)| {
            self.run_planned(sig.as_ref(), *base, c, &then, &else_, out);
        });
        if !ran {
            let (sig, base) = plan_pred(width, mode, pred, [dt, de, od], in_place, swap)?;
            self.run_planned(sig.as_ref(), base, c, &then, &else_, out);
            layouts::remember(width, mode, form, &descs, (sig, base));
        }
        Ok(())
    }

    /// A validated predicate call whose predicate is far smaller than its output (see
    /// [`hoisted_shape`]): the predicate once at its own shape `pshape` into this thread's mask
    /// scratch (a select of 1 and 0, by the kernel that fuses it), then the select on that mask.
    /// `then_else` as the caller gave them.
    #[allow(clippy::too_many_arguments)]
    fn run_hoisted(
        &self,
        width: usize,
        mode: Broadcast,
        pred: &Pred<'_>,
        pshape: &[usize],
        swap: bool,
        then_else: [Operand<'_>; 2],
        out: &mut [u8],
        od: Desc<'_>,
    ) -> Result<()> {
        thread_local! {
            static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
        }
        let n = crate::shape::numel(pshape);
        let mut mask = SCRATCH.take();
        mask.clear();
        mask.resize(n, 0);
        let scalar = |b: &'static [u8]| {
            Operand::Buf(
                b,
                Desc {
                    len: 1,
                    shape: &[],
                    strides: None,
                    offset: 0,
                },
            )
        };
        let md = Desc {
            len: n,
            shape: pshape,
            strides: None,
            offset: 0,
        };
        let r = self
            .run_pred(
                1,
                Broadcast::Numpy,
                pred,
                false,
                [scalar(&[1]), scalar(&[0])],
                &mut mask,
                md,
            )
            .and_then(|()| {
                let [then, else_] = then_else;
                let m = TensorRef::new(&mask[..], pshape);
                let layout = (od.shape, od.strides, od.offset);
                self.run_bytes(
                    width,
                    mode,
                    CondArg::Mask(m),
                    swap,
                    then,
                    else_,
                    out,
                    layout,
                )
            });
        SCRATCH.set(mask);
        r
    }

    /// Runs a validated, planned call (`None`: empty output, nothing to do) on the JIT or the
    /// static kernels. `base`: per operand, the index (in elements) of the kernel's base
    /// element in its buffer.
    fn run_planned(
        &self,
        sig: Option<&Signature>,
        base: [usize; OPS],
        cond: CondBufs<'_>,
        then: &Operand<'_>,
        else_: &Operand<'_>,
        out: &mut [u8],
    ) {
        let Some(sig) = sig else {
            return;
        };
        let w = sig.width;
        // Safe indexing: each base is an element of a validated view, inside its buffer.
        let out_ptr = out[base[OUT] * w..].as_mut_ptr();
        let src = |o: &Operand<'_>, op: usize| match o {
            Operand::Buf(b, _) => b[base[op] * w..].as_ptr(),
            // In place: the source is the output, with the output's layout and base.
            Operand::Out => out_ptr as *const u8,
        };
        let cw = sig.op_width(COND);
        // A predicate's operand: its buffer at its base, or the in-place output (whose base is
        // the output's, as its layout is).
        let operand = |b: Option<&[u8]>, op: usize| match b {
            Some(b) => b[base[op] * cw..].as_ptr(),
            None => out_ptr as *const u8,
        };
        let (cp, rp) = match cond {
            CondBufs::Mask(m) => (m[base[COND]..].as_ptr(), std::ptr::null()),
            CondBufs::Pred(l, r) => (
                operand(l, COND),
                if sig.cond.binary() {
                    operand(r, RHS)
                } else {
                    std::ptr::null()
                },
            ),
        };
        let p = Ptrs {
            cond: cp,
            then: src(then, THEN),
            else_: src(else_, ELSE),
            out: out_ptr,
            rhs: rp,
        };
        let outer = sig.outer();
        let eligible = self.splits(out.len(), outer);
        if self.config.backend == Backend::Jit && !eligible && self.run_memo(sig, p, outer) {
            return;
        }
        // A predicate no tier fuses runs in blocks on the static kernels.
        let pick = match self.config.backend {
            Backend::Interp => None,
            _ if !sig.is_mask() && !self.fuses(sig) => None,
            _ => self.pick(sig, self.config.exact_after),
        };
        if let Some(Pick::Trial(t)) = &pick {
            // A call of a class being measured: on this thread, with the next candidate (timed)
            // or the one chosen. SAFETY: as for every kernel call below.
            if t.call(&mut |k| unsafe { k.run(sig, p, 0, outer) }) {
                self.commit(sig, t);
            }
            return;
        }
        let kernel = pick.map(|p| p.kernel().clone());
        if kernel.is_none() {
            self.runs[STATIC_RUNS].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if !sig.is_mask() {
                self.runs[BLOCKED_RUNS].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        // SAFETY (for every call below): the caller validated every buffer against its shape,
        // strides and offset (`check`, or `same_contiguous` for identical contiguous shapes):
        // all addressed elements are in bounds, the output's elements are distinct, and the
        // only aliasing is the exact in-place case (the same layout and base as the output);
        // `sig` is the plan of exactly these layouts and the pointers are at the plan's base
        // elements, so every element `sig` addresses from them (strides of either sign) is one
        // the views address; each range lies within the outer dimension.
        let run = |p: Ptrs, a: usize, b: usize| match &kernel {
            // SAFETY: see above.
            Some(k) => unsafe { k.run(sig, p, a, b) },
            // SAFETY: see above.
            None => unsafe { static_kernels::run(sig, p, a, b) },
        };
        if !eligible {
            return run(p, 0, outer);
        }
        // An exact kernel learns whether splitting pays (or runs the way the wisdom file kept
        // for its class); otherwise large calls split.
        let (way, probe) = match &kernel {
            Some(k) if !k.is_generic() => {
                let c = k.split_choice();
                if c.first_look()
                    && let Some(splits) = self.wisdom_splits(sig)
                {
                    c.fix(if splits { Way::Split } else { Way::Single });
                }
                c.next()
            }
            _ => (Way::Split, false),
        };
        let mut ran = Way::Single;
        let mut call = || {
            if way == Way::Split
                && let Some(pool) = self.pool()
            {
                let parts = pool.threads().min(outer);
                let shared = SharedPtrs(p);
                let part = |i: usize| {
                    let sp = shared;
                    run(sp.0, outer * i / parts, outer * (i + 1) / parts)
                };
                if pool.run(parts, &part) {
                    ran = Way::Split;
                    return;
                }
            }
            run(p, 0, outer);
        };
        match &kernel {
            Some(k) if probe => {
                let ns = self.timer.time(k.variant(), way == Way::Split, &mut call);
                if let Some(times) = k.split_choice().record(ran, ns) {
                    self.learn_split(sig, times);
                }
            }
            _ => call(),
        }
    }
}

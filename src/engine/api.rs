//! The entry points: typed and byte-level selects, in place, and prepared calls.

use super::Engine;
use super::config::{Backend, InPlace};
use super::exec::{CondArg, plan_checked, plan_pred};
use super::memo::FlatKey;
use super::policy::Pick;
use super::prepared::{PredArg, PredCall, Prepared};
use super::validate::{Checked, Desc, Operand, Pred, PredSrc, check_pred, contiguous_elements};
use crate::cond::{Cond, Repr, Src};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::kernel::abi::Ptrs;
use crate::plan::{OPS, Signature, plan, plan_cond};
use crate::pred::Kind;
use crate::shape::{Broadcast, dense_strides, infer, numel, strides_over};
use crate::tensor::{TensorMut, TensorRef};

/// The elements of a call whose four views are contiguous from their first element and of one
/// shape, when every buffer holds them (and there are some): what a cache hit of the memo
/// needs ([`super::validate::same_contiguous`] of the views themselves).
#[inline(always)]
fn hit_elements<T>(
    c: &TensorRef<'_, u8>,
    t: &TensorRef<'_, T>,
    e: &TensorRef<'_, T>,
    o: &TensorMut<'_, T>,
) -> Option<usize> {
    let plain = |strides: Option<&[isize]>, offset: usize| strides.is_none() & (offset == 0);
    contiguous_elements(
        [c.shape(), t.shape(), e.shape(), o.shape()],
        plain(c.strides(), c.offset())
            & plain(t.strides(), t.offset())
            & plain(e.strides(), e.offset())
            & plain(o.strides(), o.offset()),
        [c.data().len(), t.data().len(), e.data().len(), o.len()],
    )
}

/// A predicate operand's bytes as the engine reads them. A placeholder has none: it is an
/// error in a select that runs at once.
fn pred_src<'a>(o: &'a crate::cond::Operand<'_>, dtype: DType) -> Result<PredSrc<'a>> {
    Ok(match &o.src {
        Src::View {
            bytes,
            shape,
            strides,
            offset,
            ..
        } => PredSrc::Buf(
            bytes,
            Desc {
                len: bytes.len() / dtype.width(),
                shape,
                strides: *strides,
                offset: *offset,
            },
        ),
        Src::Scalar { bytes, .. } => PredSrc::Buf(&bytes[..dtype.width()], SCALAR),
        Src::InPlace => PredSrc::Out,
        Src::Placeholder { .. } => {
            return Err(Error::Invalid(
                "a placeholder operand (Operand::placeholder) has no data: it stands for a \
                 buffer of a prepared call (Engine::prepare_cond)"
                    .to_string(),
            ));
        }
    })
}

/// The description of a scalar operand: one element of shape `[]`.
const SCALAR: Desc<'static> = Desc {
    len: 1,
    shape: &[],
    strides: None,
    offset: 0,
};

/// A predicate as its kernels see it: the canonical kind, its operands in the kernel's order
/// (`lhs`, and `rhs` for comparisons), each with its place as written (0: the condition's lhs
/// or tested operand, 1: its rhs), and whether then and else trade places.
pub(super) struct Canonical<'c, 'a> {
    pub(super) kind: Kind,
    pub(super) lhs: (&'c crate::cond::Operand<'a>, usize),
    pub(super) rhs: Option<(&'c crate::cond::Operand<'a>, usize)>,
    pub(super) swap: bool,
}

/// `cond`'s predicate in canonical form for a select of `dtype` (`None`: a mask): the one
/// place where a canonical form's operand swap and a negation are turned into operand order
/// and a then / else swap, for calls run at once and prepared calls alike.
pub(super) fn canonical<'c, 'a>(
    cond: &'c Cond<'a>,
    dtype: DType,
) -> Result<Option<Canonical<'c, 'a>>> {
    let Some((kind, swap, not)) = cond.canonical(dtype) else {
        return Ok(None);
    };
    Ok(Some(match &cond.repr {
        Repr::Cmp(_, l, r) => {
            let dt = |o: &crate::cond::Operand<'_>| o.dtype().unwrap_or(dtype);
            if dt(l) != dt(r) {
                return Err(Error::DType(format!(
                    "a comparison's operands must have one dtype: lhs is {}, rhs is {}",
                    dt(l),
                    dt(r)
                )));
            }
            let (l, r) = if swap {
                ((r, 1), (l, 0))
            } else {
                ((l, 0), (r, 1))
            };
            Canonical {
                kind,
                lhs: l,
                rhs: Some(r),
                swap: not,
            }
        }
        Repr::Test(_, v) => Canonical {
            kind,
            lhs: (v, 0),
            rhs: None,
            swap: not,
        },
        Repr::Mask(_) | Repr::Bits { .. } => unreachable!("masks have no canonical form"),
    }))
}

/// An operand of a prepared predicate (`what`: its name; `input`: its index among the
/// run-time buffers, for a placeholder): its description for the checks, and where a run finds
/// its bytes.
fn prepared_arg<'c>(
    o: &'c crate::cond::Operand<'_>,
    what: &'static str,
    input: usize,
    width: usize,
) -> Result<(PredSrc<'c>, PredArg)> {
    match &o.src {
        Src::Placeholder { shape, .. } => Ok((
            PredSrc::Buf(
                &[],
                Desc {
                    len: numel(shape),
                    shape,
                    strides: None,
                    offset: 0,
                },
            ),
            PredArg::Input(input),
        )),
        Src::Scalar { bytes, .. } => Ok((
            PredSrc::Buf(&bytes[..width], SCALAR),
            PredArg::Value(*bytes),
        )),
        // A rank-0 view is a value: its element, read now.
        Src::View {
            bytes,
            shape: [],
            strides,
            offset,
            ..
        } => {
            let l = crate::tensor::validate(what, bytes.len() / width, &[], *strides, *offset)?;
            let mut v = [0u8; 16];
            v[..width].copy_from_slice(&bytes[l.offset * width..(l.offset + 1) * width]);
            Ok((PredSrc::Buf(&[], SCALAR), PredArg::Value(v)))
        }
        Src::View { .. } => Err(Error::Invalid(format!(
            "{what}: a prepared call is given its operands' buffers when it runs: describe the \
             operand with Operand::placeholder, or give a value (a rank-0 view is read now)"
        ))),
        Src::InPlace => Err(Error::Invalid(format!(
            "{what}: prepared calls do not run in place (Engine::select_in_place does)"
        ))),
    }
}

/// The operands of a prepared predicate as written: their names, their order, and which are
/// the run-time buffers (placeholders) [`Prepared::run_cond`] is given.
struct PreparedOperands<'c, 'a> {
    /// The names at each place as written: `lhs` and `rhs`, or `operand` for a test.
    names: [&'static str; 2],
    /// The operands in the order written, each with its place.
    written: Vec<(&'c crate::cond::Operand<'a>, usize)>,
    /// Each run-time buffer, in the order written: its name and the elements it must hold.
    inputs: Vec<(&'static str, usize)>,
    /// The index among `inputs` of the placeholder at each place (`usize::MAX`: a value).
    input_of: [usize; 2],
}

impl<'c, 'a> PreparedOperands<'c, 'a> {
    /// `c`'s operands, each placeholder's shape checked (in the order written).
    fn new(c: &Canonical<'c, 'a>) -> Result<Self> {
        let names = if c.kind.binary() {
            ["lhs", "rhs"]
        } else {
            ["operand", "rhs"]
        };
        let mut written = vec![c.lhs];
        written.extend(c.rhs);
        written.sort_by_key(|&(_, pos)| pos);
        let mut inputs = Vec::new();
        let mut input_of = [usize::MAX; 2];
        for &(o, pos) in &written {
            if let Src::Placeholder { shape, .. } = o.src {
                crate::shape::check_shape(names[pos], shape)?;
                input_of[pos] = inputs.len();
                inputs.push((names[pos], numel(shape)));
            }
        }
        Ok(PreparedOperands {
            names,
            written,
            inputs,
            input_of,
        })
    }

    /// The predicate as the checks see it (operands in the kernel's order, of `width`-byte
    /// elements), and where a run finds the kernel's lhs and rhs.
    fn pred(
        &self,
        c: &Canonical<'c, 'a>,
        width: usize,
    ) -> Result<(Pred<'c>, PredArg, Option<PredArg>)> {
        let arg = |(o, pos): (&'c crate::cond::Operand<'a>, usize)| {
            prepared_arg(o, self.names[pos], self.input_of[pos], width)
        };
        let (sl, al) = arg(c.lhs)?;
        let (sr, ar) = match c.rhs {
            Some(r) => {
                let (s, a) = arg(r)?;
                (Some(s), Some(a))
            }
            None => (None, None),
        };
        let pred = Pred {
            kind: c.kind,
            lhs: sl,
            rhs: sr,
            swapped: c.lhs.1 == 1,
        };
        Ok((pred, al, ar))
    }

    /// The predicate's shape: its operands broadcast with numpy's rule, named as written.
    fn shape(&self) -> Result<crate::shape::Dims> {
        fn shape_of<'s>(o: &crate::cond::Operand<'s>) -> &'s [usize] {
            match o.src {
                Src::Placeholder { shape, .. } => shape,
                Src::Scalar { .. } => &[], // a value
                // Refused by `pred` before the shape is asked for.
                Src::View { .. } | Src::InPlace => &[],
            }
        }
        match self.written[..] {
            [(l, _), (r, _)] => crate::shape::broadcast_pair(self.names, shape_of(l), shape_of(r)),
            _ => Ok(shape_of(self.written[0].0).into()),
        }
    }
}

/// A prepared predicate call of output shape `out`, checked as a select runs it (then and else
/// as given, then traded for the kernels where the canonical form says so, `swap`:
/// [`Prepared::run_cond`] trades their buffers alike), and its plan for contiguous row-major
/// buffers (`None`: no signature).
fn plan_prepared_cond(
    dtype: DType,
    mode: Broadcast,
    pred: &Pred<'_>,
    swap: bool,
    then: &[usize],
    else_: &[usize],
    out: &[usize],
) -> Result<(Checked, Option<Signature>)> {
    let desc = |s| Desc {
        len: numel(s),
        shape: s,
        strides: None,
        offset: 0,
    };
    let checked = check_pred(mode, pred, desc(then), desc(else_), desc(out), false)?.traded(swap);
    let st: [&[isize]; OPS] = std::array::from_fn(|op| checked.st[op].as_slice());
    let sig = plan_cond(dtype.width(), pred.kind, &checked.out, st).map(|p| {
        debug_assert_eq!(p.base, [0; OPS], "contiguous buffers flip no dimension");
        p.sig
    });
    Ok((checked, sig))
}

/// `cond` as the engine runs it for a select of `dtype`, and whether `then` and `else` trade
/// places (a negation, or a canonical form's).
pub(super) fn resolve<'a>(cond: &'a Cond<'_>, dtype: DType) -> Result<(CondArg<'a>, bool)> {
    let Some(c) = canonical(cond, dtype)? else {
        let Repr::Mask(m) = cond.repr else {
            return Err(Error::Invalid(
                "a bitmap condition runs in Engine::select and select_n (and their byte \
                 forms), not in plans or prepared calls: expand it into a byte mask"
                    .into(),
            ));
        };
        return Ok((CondArg::Mask(m), cond.not));
    };
    let d = c.kind.dtype().unwrap_or(dtype);
    let pred = Pred {
        kind: c.kind,
        lhs: pred_src(c.lhs.0, d)?,
        rhs: c.rhs.map(|(r, _)| pred_src(r, d)).transpose()?,
        swapped: c.lhs.1 == 1,
    };
    Ok((CondArg::Pred(pred), c.swap))
}

impl Engine {
    /// How [`Engine::select_bytes`] would run a call with contiguous then, else and output of
    /// these views and shape, without running it: the call validated and planned, its signature
    /// (`None`: an empty output), and whether one kernel runs it in a single pass (always for a
    /// mask; for a predicate, when a tier or the AOT table fuses it — else the static kernels
    /// run it in blocks, a mask block then its select). What `selectjit explain` and the
    /// benchmarks describe a call with.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, DType, Engine, TensorRef};
    /// let engine = Engine::new();
    /// let (x, zero) = ([0u8; 4 * 64], [0u8; 4]);
    /// let then = TensorRef::new(&x, &[64, 1]); // f32 bytes: 64 rows of 1
    /// let else_ = TensorRef::new(&zero, &[]);
    /// // A per-row mask broadcast over [64, 32]: one collapsed loop nest.
    /// let mask = [1u8; 64];
    /// let (sig, one_pass) = engine
    ///     .plan_select_bytes(DType::F32, TensorRef::new(&mask, &[64, 1]),
    ///                        TensorRef::new(&x, &[64, 1]), else_, &[64, 1], Broadcast::Numpy)?
    ///     .expect("a non-empty output");
    /// assert!(one_pass && sig.width() == 4 && sig.numel() == 64);
    /// // A ReLU's predicate: fused where a generator fuses it.
    /// let xs = TensorRef::new(&x, &[64, 1]);
    /// let pred = Cond::gt(selectjit::Operand::from_bytes(DType::F32, xs), 0.0f32);
    /// let planned = engine.plan_select_bytes(DType::F32, pred, then, else_, &[64, 1],
    ///                                        Broadcast::Numpy)?;
    /// assert!(planned.is_some_and(|(s, _)| !s.is_mask()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn plan_select_bytes<'c>(
        &self,
        dtype: DType,
        cond: impl Into<Cond<'c>>,
        then: TensorRef<'_, u8>,
        else_: TensorRef<'_, u8>,
        out_shape: &[usize],
        mode: Broadcast,
    ) -> Result<Option<(Signature, bool)>> {
        let w = dtype.width();
        let cond = cond.into();
        let (c, swap) = resolve(&cond, dtype)?;
        fn elems<'a>(t: &TensorRef<'a, u8>, w: usize) -> Desc<'a> {
            Desc {
                len: t.data().len() / w,
                ..Desc::from(t)
            }
        }
        let (t, e) = (elems(&then, w), elems(&else_, w));
        let od = Desc {
            len: numel(out_shape),
            shape: out_shape,
            strides: None,
            offset: 0,
        };
        let sig = match c {
            CondArg::Mask(m) => plan_checked(w, mode, &[(&m).into(), t, e, od], swap)?.0,
            CondArg::Pred(p) => plan_pred(w, mode, &p, [t, e, od], false, swap)?.0,
        };
        Ok(sig.map(|s| {
            let one_pass = s.is_mask() || self.fuses(&s);
            (s, one_pass)
        }))
    }

    /// The shape at which [`Engine::select_bytes`] evaluates this call's predicate once, before
    /// the select, when it does (a predicate far smaller than its output: a mask of that shape,
    /// then the mask's select); `None` for a mask and every other predicate.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Cond, DType, Engine, TensorRef};
    /// let engine = Engine::new();
    /// // A [batch, 1, 1, keys] padding mask compared with 0 over [2, 8, 128, 128] scores.
    /// let pad = [0i64; 2 * 128];
    /// let cond = Cond::eq(TensorRef::new(&pad, &[2, 1, 1, 128]), 0i64);
    /// let at = engine.hoisted_pred_shape(DType::F32, cond, &[2, 8, 128, 128])?;
    /// assert_eq!(at.as_deref(), Some(&[2, 1, 1, 128][..]));
    /// // As large as its output: fused, not hoisted.
    /// let x = [0f32; 64];
    /// let relu = Cond::gt(TensorRef::new(&x, &[64]), 0.0f32);
    /// assert_eq!(engine.hoisted_pred_shape(DType::F32, relu, &[64])?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn hoisted_pred_shape<'c>(
        &self,
        dtype: DType,
        cond: impl Into<Cond<'c>>,
        out_shape: &[usize],
    ) -> Result<Option<Vec<usize>>> {
        let cond = cond.into();
        Ok(match resolve(&cond, dtype)?.0 {
            CondArg::Mask(_) => None,
            CondArg::Pred(p) if self.config.backend != Backend::Interp => {
                super::exec::hoisted_shape(&p, out_shape).map(|s| s.to_vec())
            }
            CondArg::Pred(_) => None,
        })
    }

    /// Plans a call once for contiguous buffers of the given shapes, and binds its kernel: the
    /// returned [`Prepared`] runs it with only buffer-length checks (no shape inference, no
    /// hashing, no locking).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, DType, Engine};
    /// let engine = Engine::new();
    /// // cond [2, 1], then [2, 3], else a scalar: planned once, run many times.
    /// let prepared = engine.prepare(DType::F32, &[2, 1], &[2, 3], &[], Broadcast::Numpy)?;
    /// assert_eq!(prepared.out_shape(), &[2, 3]);
    /// let mut out = [0.0f32; 6];
    /// prepared.run(&[1, 0], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[-1.0], &mut out)?;
    /// assert_eq!(out, [1.0, 2.0, 3.0, -1.0, -1.0, -1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn prepare(
        &self,
        dtype: DType,
        cond: &[usize],
        then: &[usize],
        else_: &[usize],
        mode: Broadcast,
    ) -> Result<Prepared> {
        let b = infer(mode, cond, then, else_)?;
        let st = |s: &[usize], p| strides_over(s, &dense_strides(s), p, &b.out);
        let so = dense_strides(&b.out);
        let (sc, sth, se) = (st(cond, b.cond), st(then, b.then), st(else_, b.else_));
        let sig = plan(dtype.width(), &b.out, [&sc, &sth, &se, &so]);
        // A prepared call is meant to be run many times: its exact kernel, at once.
        let kernel = match (&sig, self.config.backend) {
            (Some(_), Backend::Interp) | (None, _) => None,
            (Some(s), _) => self.pick(s, 1),
        };
        Ok(Prepared {
            dtype,
            lens: [numel(cond), numel(then), numel(else_), numel(&b.out)],
            out_shape: b.out.to_vec(),
            interp: (self.config.backend == Backend::Interp).then(|| {
                let rhs = vec![0; b.out.len()];
                [sc.to_vec(), sth.to_vec(), se.to_vec(), so.to_vec(), rhs]
            }),
            sig,
            kernel,
            pred: None,
        })
    }

    /// [`Engine::prepare`] for a call whose condition is a predicate: planned once for
    /// contiguous row-major buffers of fixed shapes, its kernel bound, run by
    /// [`Prepared::run_cond`] with only buffer-length and dtype checks (no shape inference, no
    /// hashing, no locking).
    ///
    /// Each operand of `cond` is a [placeholder](crate::Operand::placeholder) (a buffer of that
    /// dtype and shape, given at every run) or a value fixed now: `0.0f32`, `0i64`, ... (the `0`
    /// of `x > 0`), or a rank-0 view, whose element is read now (how a value of a run-time dtype
    /// is given: [`from_bytes`](crate::Operand::from_bytes) of [`TensorRef::scalar`]). A view
    /// of rank 1 or more, or the [in-place operand](crate::Operand::in_place), is an error
    /// (prepared calls do not run in place: [`Engine::select_in_place`] does). The operands'
    /// dtype may differ from `dtype`, the dtype of then, else and out. Everything else is as for
    /// [`Engine::select`] with the same condition: the operands broadcast against each other
    /// with numpy's rule and the result takes cond's place in `mode`; the values are bit for bit
    /// those of the select. The call runs on a kernel that fuses the predicate when a tier (or
    /// the AOT table) has one, else on the static kernels (a mask per block, then its select),
    /// or on the interpreter of an interpreter engine ([`Prepared::is_jit`] says which).
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Cond, DType, Engine, Operand};
    /// // out = isnan(x) ? 0 : x on rows of 3 f64s, planned once.
    /// let engine = Engine::new();
    /// let x = Operand::placeholder(DType::F64, &[2, 3]);
    /// let p = engine.prepare_cond(DType::F64, Cond::isnan(x), &[], &[2, 3], Broadcast::Numpy)?;
    /// assert_eq!(p.out_shape(), &[2, 3]);
    /// let x = [1.0, f64::NAN, -0.0, f64::INFINITY, f64::NAN, 2.0];
    /// let mut out = [9.0f64; 6];
    /// p.run_cond(&[&x], &[0.0], &x, &mut out)?; // x is the operand and `else`
    /// let want = [1.0, 0.0, -0.0, f64::INFINITY, 0.0, 2.0];
    /// assert_eq!(out.map(f64::to_bits), want.map(f64::to_bits));
    /// // A view is not an operand of a prepared call: its data would not be used.
    /// let view = selectjit::TensorRef::new(&x, &[6]);
    /// let isnan = Cond::isnan(view);
    /// assert!(engine.prepare_cond(DType::F64, isnan, &[], &[6], Broadcast::Numpy).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn prepare_cond(
        &self,
        dtype: DType,
        cond: Cond<'_>,
        then: &[usize],
        else_: &[usize],
        mode: Broadcast,
    ) -> Result<Prepared> {
        let Some(c) = canonical(&cond, dtype)? else {
            return Err(Error::Invalid(
                "prepare_cond takes a predicate: prepare a call with a mask with Engine::prepare"
                    .to_string(),
            ));
        };
        let ops = PreparedOperands::new(&c)?;
        let (pred, lhs, rhs) = ops.pred(&c, c.kind.dtype().unwrap_or(dtype).width())?;
        let pshape = ops.shape()?;
        crate::shape::check_shape("then", then)?;
        crate::shape::check_shape("else", else_)?;
        let out = infer(mode, &pshape, then, else_)?.out;
        let (checked, sig) = plan_prepared_cond(dtype, mode, &pred, c.swap, then, else_, &out)?;
        let kernel = self.prepared_cond_kernel(sig.as_ref());
        Ok(Prepared {
            dtype,
            lens: [0, numel(then), numel(else_), numel(&out)],
            out_shape: out.to_vec(),
            interp: (self.config.backend == Backend::Interp)
                .then(|| std::array::from_fn(|op| checked.st[op].to_vec())),
            sig,
            kernel,
            pred: Some(PredCall {
                kind: c.kind,
                swap: c.swap,
                lhs,
                rhs,
                inputs: ops.inputs,
            }),
        })
    }

    /// The kernel a prepared predicate call binds: its exact kernel, at once (a prepared call
    /// is meant to be run many times). None on an interpreter engine, without a signature, or
    /// when no tier (nor the AOT table) fuses the predicate: the static kernels then run it, in
    /// blocks.
    fn prepared_cond_kernel(&self, sig: Option<&Signature>) -> Option<Pick> {
        match (sig, self.config.backend) {
            (Some(_), Backend::Interp) | (None, _) => None,
            (Some(s), _) if !self.fuses(s) => None,
            (Some(s), _) => self.pick(s, 1),
        }
    }

    /// `out = cond ? then : else` with broadcasting under `mode`. `cond` is a mask view (any
    /// non-zero byte is true) or a predicate computed in the kernel ([`Cond`]: `x > 0`,
    /// `isnan(x)`, ...). `out` must have the broadcast output shape. Views may have any
    /// strides, negative ones included (with the offset of their first element, see
    /// [`TensorRef::with_layout`]). Every buffer is checked against its shape, strides and
    /// offset before anything is read or written; on error `out` is untouched.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Engine, TensorMut, TensorRef};
    /// let engine = Engine::new();
    /// // cond [3] broadcast over the rows of then [2, 3]; else a scalar.
    /// let mut out = [0i32; 6];
    /// engine.select(
    ///     TensorRef::new(&[1, 0, 1], &[3]),
    ///     TensorRef::new(&[1, 2, 3, 4, 5, 6], &[2, 3]),
    ///     TensorRef::scalar(&[0]),
    ///     TensorMut::new(&mut out, &[2, 3]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [1, 0, 3, 4, 0, 6]);
    /// // An output of the wrong shape is an error, and the output is untouched.
    /// let mut small = [9i32; 3];
    /// assert!(
    ///     engine
    ///         .select(
    ///             TensorRef::new(&[1, 0, 1], &[3]),
    ///             TensorRef::new(&[1, 2, 3, 4, 5, 6], &[2, 3]),
    ///             TensorRef::scalar(&[0]),
    ///             TensorMut::new(&mut small, &[3]),
    ///             Broadcast::Numpy
    ///         )
    ///         .is_err()
    /// );
    /// assert_eq!(small, [9, 9, 9]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn select<'c, T: Element>(
        &self,
        cond: impl Into<Cond<'c>>,
        then: TensorRef<'_, T>,
        else_: TensorRef<'_, T>,
        mut out: TensorMut<'_, T>,
        mode: Broadcast,
    ) -> Result<()> {
        let cond = cond.into();
        // A cache hit of one contiguous shape: straight to this thread's memo of its kernel.
        // Only the checks that call needs, in line; everything else out of line. The mask is
        // looked at where it lies (moving the condition out of its enum would copy it through
        // the stack, which costs as much as the rest of the hit).
        if let Repr::Mask(m) = &cond.repr
            && !cond.not
            && self.config.backend == Backend::Jit
            && let Some(n) = hit_elements(m, &then, &else_, &out)
        {
            let p = Ptrs {
                cond: m.data().as_ptr(),
                then: then.data().as_ptr().cast(),
                else_: else_.data().as_ptr().cast(),
                out: out.data_ptr().cast(),
                rhs: std::ptr::null(),
            };
            let w = T::DTYPE.width();
            if self.run_memo_flat(FlatKey::contiguous_mask(w, n), p, n * w) {
                return Ok(());
            }
        }
        self.select_general(cond, then, else_, out, mode)
    }

    /// [`Engine::select`] past its cache-hit test.
    #[inline(never)]
    fn select_general<T: Element>(
        &self,
        cond: Cond<'_>,
        then: TensorRef<'_, T>,
        else_: TensorRef<'_, T>,
        out: TensorMut<'_, T>,
        mode: Broadcast,
    ) -> Result<()> {
        let (o, shape, strides, offset) = out.into_parts();
        let ob: &mut [u8] = bytemuck::cast_slice_mut(o);
        let t = Operand::Buf(bytemuck::cast_slice(then.data()), (&then).into());
        let e = Operand::Buf(bytemuck::cast_slice(else_.data()), (&else_).into());
        self.run_cond(T::DTYPE, mode, &cond, t, e, ob, (shape, strides, offset))
    }

    /// Runs a call: `cond` resolved for `dtype`, then and else traded where it says so (once
    /// checked: the broadcast rules and the messages see them as given).
    #[allow(clippy::too_many_arguments)]
    fn run_cond(
        &self,
        dtype: DType,
        mode: Broadcast,
        cond: &Cond<'_>,
        then: Operand<'_>,
        else_: Operand<'_>,
        out: &mut [u8],
        out_layout: (&[usize], Option<&[isize]>, usize),
    ) -> Result<()> {
        if self.config.backend == Backend::Jit
            && mode == Broadcast::Numpy
            && self.run_flat_pred(dtype.width(), cond, &then, &else_, out, out_layout)
        {
            return Ok(());
        }
        if let Some(b) = super::bitmap::BitCond::of(cond, "cond") {
            return self.run_bitmap(dtype, mode, b?, cond.not, then, else_, out, out_layout);
        }
        let (c, swap) = resolve(cond, dtype)?;
        self.run_bytes(dtype.width(), mode, c, swap, then, else_, out, out_layout)
    }

    /// A cache hit of a predicate call on one flat shape, straight to this thread's memo: the
    /// output and an operand of the predicate `n >= 2` contiguous elements of one shape, every
    /// other operand either that too or one element (a scalar), under numpy's rule. Such a call
    /// is valid when every buffer holds its elements and the comparison's operands share a
    /// dtype (checked here), and it plans to the one signature of its [`FlatKey`]. False when
    /// the call is not of that form or the memo holds another kernel: the caller goes the whole
    /// way, with its checks and errors.
    #[inline]
    fn run_flat_pred(
        &self,
        width: usize,
        cond: &Cond<'_>,
        then: &Operand<'_>,
        else_: &Operand<'_>,
        out: &mut [u8],
        (shape, strides, offset): (&[usize], Option<&[isize]>, usize),
    ) -> bool {
        let Some((kind, swap_operands, swap)) = cond.canonical(DType::Bool) else {
            return false;
        };
        if strides.is_some() || offset != 0 {
            return false;
        }
        let Some(n) = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) else {
            return false;
        };
        if n < 2 || n.checked_mul(width).is_none_or(|b| out.len() < b) {
            return false;
        }
        // One element, or `n` of one shape with the output: (base, contiguous), where the
        // buffer holds them.
        let rank = shape.len();
        let place = |bytes: &[u8], w: usize, s: &[usize], st: Option<&[isize]>, off: usize| {
            if st.is_some() || off != 0 {
                None
            } else if s == shape {
                (bytes.len() / w >= n).then_some((bytes.as_ptr(), true))
            } else if s.len() <= rank && s.iter().all(|&d| d == 1) {
                (bytes.len() >= w).then_some((bytes.as_ptr(), false))
            } else {
                None
            }
        };
        let pred_operand = |o: &crate::cond::Operand<'_>| match &o.src {
            Src::View {
                dtype,
                bytes,
                shape: s,
                strides: st,
                offset: off,
            } => Some((*dtype, place(bytes, dtype.width(), s, *st, *off)?)),
            Src::Scalar { dtype, bytes } => Some((*dtype, (bytes.as_ptr(), false))),
            Src::InPlace | Src::Placeholder { .. } => None,
        };
        // The in-place side is the output itself: `n` contiguous elements, read where they are
        // written (an element-wise kernel reads each before it writes it).
        let out_ptr = out.as_ptr();
        let value = |o: &Operand<'_>| match o {
            Operand::Buf(b, d) => place(b, width, d.shape, d.strides, d.offset),
            Operand::Out => Some((out_ptr, true)),
        };
        let (lhs, rhs) = match &cond.repr {
            Repr::Cmp(_, l, r) => {
                let (Some((dl, l)), Some((dr, r))) = (pred_operand(l), pred_operand(r)) else {
                    return false;
                };
                if dl != dr {
                    return false;
                }
                if swap_operands {
                    (r, Some(l))
                } else {
                    (l, Some(r))
                }
            }
            Repr::Test(_, v) => match pred_operand(v) {
                Some((_, v)) => (v, None),
                None => return false,
            },
            Repr::Mask(_) | Repr::Bits { .. } => return false,
        };
        let (Some(t), Some(e)) = (value(then), value(else_)) else {
            return false;
        };
        // The predicate spans the output (one of a single element may be hoisted).
        if !(lhs.1 || rhs.is_some_and(|r| r.1)) {
            return false;
        }
        let (t, e) = if swap { (e, t) } else { (t, e) };
        let r = rhs.unwrap_or((std::ptr::null(), false));
        let bit = |(_, full): (*const u8, bool), op: usize| u8::from(full) << op;
        let key = FlatKey {
            width,
            n,
            kind,
            full: bit(lhs, crate::plan::COND)
                | bit(t, crate::plan::THEN)
                | bit(e, crate::plan::ELSE)
                | 1 << crate::plan::OUT
                | bit(r, crate::plan::RHS),
        };
        let p = Ptrs {
            cond: lhs.0,
            then: t.0,
            else_: e.0,
            out: out.as_mut_ptr(),
            rhs: r.0,
        };
        self.run_memo_flat(key, p, n * width)
    }

    /// In place: `inout` holds `then` (or `else`, per `role`) on entry and the result on return.
    /// Its shape must be the broadcast output shape; it may have any non-overlapping layout,
    /// reversed included.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, Engine, InPlace, TensorMut, TensorRef};
    /// // x = mask ? x : -1, overwriting x.
    /// let mut x = [1i64, 2, 3];
    /// Engine::new().select_in_place(
    ///     TensorRef::new(&[1, 0, 1], &[3]),
    ///     TensorMut::new(&mut x, &[3]),
    ///     InPlace::Then,
    ///     TensorRef::scalar(&[-1]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(x, [1, -1, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn select_in_place<'c, T: Element>(
        &self,
        cond: impl Into<Cond<'c>>,
        inout: TensorMut<'_, T>,
        role: InPlace,
        other: TensorRef<'_, T>,
        mode: Broadcast,
    ) -> Result<()> {
        let (o, shape, strides, offset) = inout.into_parts();
        let ob: &mut [u8] = bytemuck::cast_slice_mut(o);
        let other = Operand::Buf(bytemuck::cast_slice(other.data()), (&other).into());
        let (t, e) = match role {
            InPlace::Then => (Operand::Out, other),
            InPlace::Else => (other, Operand::Out),
        };
        let cond = cond.into();
        self.run_cond(T::DTYPE, mode, &cond, t, e, ob, (shape, strides, offset))
    }

    /// Byte-level [`Engine::select_in_place`] for a run-time `dtype`: `inout` holds raw
    /// elements of `dtype`; shapes, strides and offsets count elements.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, DType, Engine, InPlace, TensorMut, TensorRef};
    /// // y = mask ? 1 : y on two u16 elements held as bytes (little-endian); y is `else`.
    /// let mut y: Vec<u8> = [10u16, 20].iter().flat_map(|v| v.to_le_bytes()).collect();
    /// Engine::new().select_in_place_bytes(
    ///     DType::U16,
    ///     TensorRef::new(&[0u8, 1], &[2]),
    ///     TensorMut::new(&mut y, &[2]),
    ///     InPlace::Else,
    ///     TensorRef::scalar(&1u16.to_le_bytes()),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(y, [10, 0, 1, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn select_in_place_bytes<'c>(
        &self,
        dtype: DType,
        cond: impl Into<Cond<'c>>,
        inout: TensorMut<'_, u8>,
        role: InPlace,
        other: TensorRef<'_, u8>,
        mode: Broadcast,
    ) -> Result<()> {
        let w = dtype.width();
        let (o, shape, strides, offset) = inout.into_parts();
        let other = Operand::Buf(
            other.data(),
            Desc {
                len: other.data().len() / w,
                ..Desc::from(&other)
            },
        );
        let (t, e) = match role {
            InPlace::Then => (Operand::Out, other),
            InPlace::Else => (other, Operand::Out),
        };
        let cond = cond.into();
        self.run_cond(dtype, mode, &cond, t, e, o, (shape, strides, offset))
    }

    /// Byte-level select for a run-time `dtype`: each buffer holds raw little-endian elements of
    /// `dtype`; shapes, strides and offsets count elements. Used by the CLI and by the C ABI.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, DType, Engine, TensorMut, TensorRef};
    /// // Two u16 elements as little-endian bytes: shapes count u16s, not bytes.
    /// let then: Vec<u8> = [1u16, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    /// let mut out = [0u8; 4];
    /// Engine::new().select_bytes(
    ///     DType::U16,
    ///     TensorRef::new(&[0u8, 1], &[2]),
    ///     TensorRef::new(&then, &[2]),
    ///     TensorRef::scalar(&9u16.to_le_bytes()),
    ///     TensorMut::new(&mut out, &[2]),
    ///     Broadcast::Numpy,
    /// )?;
    /// assert_eq!(out, [9, 0, 2, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn select_bytes<'c>(
        &self,
        dtype: DType,
        cond: impl Into<Cond<'c>>,
        then: TensorRef<'_, u8>,
        else_: TensorRef<'_, u8>,
        out: TensorMut<'_, u8>,
        mode: Broadcast,
    ) -> Result<()> {
        let w = dtype.width();
        fn elems<'a>(t: &TensorRef<'a, u8>, w: usize) -> Desc<'a> {
            Desc {
                len: t.data().len() / w,
                ..Desc::from(t)
            }
        }
        let (o, shape, strides, offset) = out.into_parts();
        let cond = cond.into();
        self.run_cond(
            dtype,
            mode,
            &cond,
            Operand::Buf(then.data(), elems(&then, w)),
            Operand::Buf(else_.data(), elems(&else_, w)),
            o,
            (shape, strides, offset),
        )
    }
}

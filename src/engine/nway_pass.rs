//! N-way selects in one pass: a flat call (the output contiguous and row-major; every
//! condition operand, value and the default either of the output's shape and contiguous, or one
//! element; in place only on the output itself) runs on one single-pass n-way kernel
//! ([`crate::kernel::nway`]) where the engine's generator has one for its spec. Everything else
//! (broadcasts of other shapes, strided views, a generator without n-way kernels, conditions
//! the kernel does not take) runs in tiles of two-way passes (`nway.rs`).

use std::sync::Arc;

use smallvec::SmallVec;

use super::api::resolve;
use super::exec::CondArg;
use super::validate::PredSrc;
use super::{Engine, NWAY_COMPILE_US, NWAY_COMPILES, NWAY_PASS_RUNS};
use crate::cond::Cond;
use crate::dtype::DType;
use crate::kernel::nway::{Form, NBranch, NCond, NwayKernel, NwaySpec};
use crate::pred::Kind;
use crate::tensor::TensorMut;
use std::sync::atomic::Ordering;

use super::nway::Choice;

/// Kernels (or the absence of one) kept per engine, by spec; cleared when full.
pub(super) const NWAY_CACHE: usize = 256;

/// Where an operand's elements start: at a byte offset of its own buffer, or of the output.
#[derive(Clone, Copy)]
enum Ptr {
    At(*const u8),
    Out,
}

/// A flat call, planned: its kernel's spec, each operand's pointer in the spec's order, and the
/// output's length in elements and first byte.
pub(super) struct Flat {
    spec: NwaySpec,
    ptrs: SmallVec<[Ptr; 24]>,
    n: usize,
    out_at: usize,
}

/// Whether `shape` with `strides` (elements; `None`: row-major) is row-major contiguous.
fn contiguous(shape: &[usize], strides: Option<&[isize]>) -> bool {
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
    if shape == oshape && contiguous(shape, strides) && offset.checked_add(n)? <= len {
        Some((Form::Full, Ptr::At(bytes[offset * width..].as_ptr())))
    } else if shape.len() <= oshape.len() && shape.iter().all(|&d| d == 1) && offset < len {
        Some((Form::Splat, Ptr::At(bytes[offset * width..].as_ptr())))
    } else {
        None
    }
}

/// `call`'s flat plan, when it has one: the output contiguous, every operand full or one
/// element, every condition valid for `dtype` and of a kind a single-pass kernel may take.
/// `None`: the tiles run the call (and make its errors).
pub(super) fn plan(
    dtype: DType,
    conds: &[Cond<'_>],
    values: &[Choice<'_, u8>],
    default: Choice<'_, u8>,
    out: &TensorMut<'_, u8>,
) -> Option<Flat> {
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
    let mut ptrs: SmallVec<[Ptr; 24]> = SmallVec::new();
    let mut branches: SmallVec<[NBranch; 8]> = SmallVec::new();
    let value = |v: &Choice<'_, u8>| -> Option<(Form, Ptr)> {
        match v {
            Choice::Tensor(t) => {
                operand(t.data(), w, (t.shape(), t.strides(), t.offset()), oshape, n)
            }
            Choice::Out => Some((Form::Full, Ptr::Out)),
        }
    };
    for (c, v) in conds.iter().zip(values) {
        let (arg, not) = resolve(c, dtype).ok()?;
        let cond = match arg {
            CondArg::Mask(m) => {
                let (f, p) = operand(m.data(), 1, (m.shape(), m.strides(), m.offset()), oshape, n)?;
                ptrs.push(p);
                NCond::Mask(f)
            }
            CondArg::Pred(p) => {
                let pw = p.kind.operand_width();
                let mut src = |s: PredSrc<'_>| -> Option<Form> {
                    let (f, ptr) = match s {
                        PredSrc::Buf(bytes, d) => {
                            operand(bytes, pw, (d.shape, d.strides, d.offset), oshape, n)?
                        }
                        PredSrc::Out if pw == w => (Form::Full, Ptr::Out),
                        PredSrc::Out => return None,
                    };
                    ptrs.push(ptr);
                    Some(f)
                };
                match p.kind {
                    Kind::Cmp(op, d) => {
                        let l = src(p.lhs)?;
                        let r = src(p.rhs?)?;
                        NCond::Cmp(op, d, l, r)
                    }
                    Kind::Test(op, d) => NCond::Test(op, d, src(p.lhs)?),
                    Kind::Mask => return None,
                }
            }
        };
        let (vf, vp) = value(v)?;
        ptrs.push(vp);
        branches.push(NBranch {
            cond,
            not,
            value: vf,
        });
    }
    let (df, dp) = value(&default)?;
    ptrs.push(dp);
    Some(Flat {
        spec: NwaySpec {
            width: w,
            nt: false,
            branches,
            default: df,
        },
        ptrs,
        n,
        out_at: out.offset() * w,
    })
}

impl Engine {
    /// The single-pass kernel of `spec` from this engine's generators, compiled once (`None`:
    /// no generator has one; a compile error is kept as [`Engine::last_codegen_error`]).
    fn nway_kernel(&self, spec: &NwaySpec) -> Option<Arc<NwayKernel>> {
        let cg = self.codegen()?;
        let mut m = self.nway.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = m.get(spec) {
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

    /// Runs `flat` on its single-pass kernel, if the engine has one (else gives the output
    /// back for the tiles).
    pub(super) fn run_nway_pass<'o>(
        &self,
        mut flat: Flat,
        out: TensorMut<'o, u8>,
    ) -> Option<TensorMut<'o, u8>> {
        let nt_min = self.codegen().map_or(usize::MAX, |c| c.nt_min_bytes());
        // Non-temporal stores where the call's traffic (not only its output, as for a two-way
        // call) reaches the threshold: the output would leave the cache before the call ends
        // anyway. case_when_f64_1m (36 MiB of traffic, 8 MiB of output) ran in 650-700 µs so,
        // 745-820 µs with ordinary stores.
        let traffic = flat.n.saturating_mul(flat.spec.bytes_per_element());
        flat.spec.nt = traffic >= nt_min;
        let Some(kernel) = self.nway_kernel(&flat.spec) else {
            return Some(out);
        };
        let (ob, _, _, _) = out.into_parts();
        let op = ob[flat.out_at..].as_mut_ptr();
        let ptrs: SmallVec<[*const u8; 24]> = flat
            .ptrs
            .iter()
            .map(|p| match p {
                Ptr::At(p) => *p,
                Ptr::Out => op.cast_const(),
            })
            .collect();
        // SAFETY: `plan` checked every pointer: a full operand's buffer holds `n` elements of its
        // width from its pointer, a splat's one, the output `n` from `op` (all in the spec's
        // operand order); the operands are shared borrows, so none overlaps the exclusively
        // borrowed output, except those read in place, which are the output itself (`op`).
        unsafe { kernel.run(&ptrs, op, 0, flat.n) };
        self.runs[NWAY_PASS_RUNS].fetch_add(1, Ordering::Relaxed);
        None
    }
}

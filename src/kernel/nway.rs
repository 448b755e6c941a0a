//! Single-pass n-way kernels: `out = c1 ? v1 : c2 ? v2 : ... : default` over a flat output in
//! one loop, every condition computed in registers, one store per element. The engine runs a
//! flat call (the output contiguous, every operand either of the output's shape and contiguous
//! or one element) on such a kernel where its generator has one, and every other call in tiles
//! of two-way passes.
//!
//! An [`NwaySpec`] is the key: the element width, the store kind, and per branch its
//! condition's kind and the form of each operand (a full array or a splat of one element). The
//! length is not part of it: one kernel serves every length of its pattern.

use smallvec::SmallVec;

use std::sync::Arc;

use super::CodeOwner;
use super::abi::{CodeRunner, KernelArgs, MemRegion};
use crate::dtype::DType;
use crate::pred::{Canon, TestOp};
use crate::tier::Tier;

/// How a kernel reads an operand: a full array of the output's length, or one element splatted
/// once per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Form {
    Full,
    Splat,
}

/// One branch's condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NCond {
    /// Mask bytes, any non-zero byte true.
    Mask(Form),
    /// `lhs OP rhs` (the canonical operator), both of the dtype.
    Cmp(Canon, DType, Form, Form),
    /// A test of one operand of the dtype.
    Test(TestOp, DType, Form),
}

#[cfg_attr(not(feature = "jit"), allow(dead_code))] // used by the generators
impl NCond {
    /// The forms of its operands, in call order.
    pub(crate) fn forms(&self) -> SmallVec<[Form; 2]> {
        match *self {
            NCond::Mask(f) | NCond::Test(_, _, f) => smallvec::smallvec![f],
            NCond::Cmp(_, _, l, r) => smallvec::smallvec![l, r],
        }
    }

    /// Bytes per element of its operands.
    pub(crate) fn width(&self) -> usize {
        match *self {
            NCond::Mask(_) => 1,
            NCond::Cmp(_, d, _, _) | NCond::Test(_, d, _) => d.width(),
        }
    }
}

/// One branch: its condition (negated with `not`: the branch is taken where it does not hold)
/// and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NBranch {
    pub(crate) cond: NCond,
    pub(crate) not: bool,
    pub(crate) value: Form,
}

/// What an n-way kernel's code depends on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NwaySpec {
    /// Bytes per element of the values and the output.
    pub(crate) width: usize,
    /// Non-temporal stores (from an aligned element of the output on).
    pub(crate) nt: bool,
    /// The kernel walks rows ([`NwayRowsFn`]); otherwise one flat range ([`NwayFn`]).
    pub(crate) rows: bool,
    /// The branches, the first true one wins.
    pub(crate) branches: SmallVec<[NBranch; 8]>,
    pub(crate) default: Form,
    /// Full operands that are one buffer (the same first element, width and layout): `same[j]`
    /// is the first operand (in call order) operand `j` shares its buffer with, `j` itself when
    /// none; empty when no two share one. A kernel may load such operands once per block
    /// (`nan_to_num`'s `x` is three conditions' operand and the default); one that loads each
    /// on its own is as right.
    pub(crate) same: SmallVec<[u8; 16]>,
}

#[cfg_attr(not(feature = "jit"), allow(dead_code))] // used by the generators
impl NwaySpec {
    /// The forms of its operands in call order: each branch's condition operands, then its
    /// value; the default last. A kernel's pointer array holds one pointer per operand.
    pub(crate) fn forms(&self) -> SmallVec<[Form; 24]> {
        let mut f = SmallVec::new();
        for b in &self.branches {
            f.extend(b.cond.forms());
            f.push(b.value);
        }
        f.push(self.default);
        f
    }

    /// Each operand's form and element width, in call order.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // used by the x86 emitters
    pub(crate) fn operands(&self) -> SmallVec<[(Form, usize); 24]> {
        let mut v = SmallVec::new();
        for b in &self.branches {
            v.extend(b.cond.forms().into_iter().map(|f| (f, b.cond.width())));
            v.push((b.value, self.width));
        }
        v.push((self.default, self.width));
        v
    }

    /// Bytes a call moves per output element: the output's and every full operand's.
    pub(crate) fn bytes_per_element(&self) -> usize {
        let mut b = self.width;
        for br in &self.branches {
            let full = br.cond.forms().iter().filter(|f| **f == Form::Full).count();
            b += full * br.cond.width();
            b += usize::from(br.value == Form::Full) * self.width;
        }
        b + usize::from(self.default == Form::Full) * self.width
    }
}

/// The entry point of an n-way kernel: elements `begin..end` of the output at `out`, the
/// operands at `ptrs` in [`NwaySpec::forms`] order (a full operand's first element, a splat's
/// element).
pub(crate) type NwayFn =
    unsafe extern "C" fn(ptrs: *const *const u8, out: *mut u8, begin: usize, end: usize);

/// The entry point of an n-way kernel of rows ([`NwaySpec::rows`]): elements `begin..end` of
/// each of `rows` rows; row `r` of operand `j` starts `r * strides[j]` bytes after `ptrs[j]`
/// (a splat's stride is not read), the output's row `r * strides[n]` bytes after `out` (`n`
/// operands). With `rows == 1` the strides are not read.
pub(crate) type NwayRowsFn = unsafe extern "C" fn(
    ptrs: *const *const u8,
    out: *mut u8,
    begin: usize,
    end: usize,
    rows: usize,
    strides: *const isize,
);

/// A kernel's entry point, by its spec's kind, or the code a runner executes.
// No-JIT builds compile none; hosts other than x86-64 compile flat kernels only.
#[cfg_attr(
    any(not(feature = "jit"), not(target_arch = "x86_64")),
    allow(dead_code)
)]
pub(crate) enum Entry {
    Flat(NwayFn),
    Rows(NwayRowsFn),
    Emulated(Box<Emulated>),
}

/// x86 code of an n-way kernel this host cannot run, executed by a [`CodeRunner`]
/// (verification only), with what its calls' memory regions are computed from.
pub(crate) struct Emulated {
    pub(crate) code: Vec<u8>,
    pub(crate) runner: Arc<dyn CodeRunner>,
    pub(crate) rows: bool,
    /// Each operand's form and element width, in call order.
    pub(crate) ops: SmallVec<[(Form, usize); 24]>,
    /// The output's element width.
    pub(crate) width: usize,
}

impl Emulated {
    /// Runs the code on `ptrs` and `out` (rows of [`NwayKernel::run_rows`]), with every
    /// operand's and the output's rows as the memory it may touch.
    ///
    /// # Safety
    /// As [`NwayKernel::run_rows`].
    unsafe fn call(
        &self,
        ptrs: &[*const u8],
        out: *mut u8,
        (begin, end): (usize, usize),
        rows: usize,
        strides: &[isize],
    ) {
        if begin >= end || rows == 0 {
            return;
        }
        // The bytes `begin..end` of every row of an operand of `width`-byte elements at `p`.
        let span = |p: u64, stride: isize, width: usize| -> (u64, u64) {
            let last = if rows > 1 {
                stride * (rows as isize - 1)
            } else {
                0
            };
            let lo = p.wrapping_add_signed(last.min(0) as i64) + (begin * width) as u64;
            let hi = p.wrapping_add_signed(last.max(0) as i64) + (end * width) as u64;
            (lo, hi - lo)
        };
        let n = ptrs.len();
        let stride = |j: usize| if rows > 1 { strides[j] } else { 0 };
        // The output first: an operand read in place is the same memory, and a runner takes the
        // first region that holds an address.
        let (oa, ol) = span(out as u64, stride(n), self.width);
        let mut regions = vec![MemRegion {
            addr: oa,
            len: ol,
            writable: true,
        }];
        for (j, (&p, &(form, w))) in ptrs.iter().zip(&self.ops).enumerate() {
            let (addr, len) = match form {
                Form::Full => span(p as u64, stride(j), w),
                Form::Splat => (p as u64, w as u64),
            };
            regions.push(MemRegion {
                addr,
                len,
                writable: false,
            });
        }
        regions.push(MemRegion {
            addr: ptrs.as_ptr() as u64,
            len: 8 * n as u64,
            writable: false,
        });
        if rows > 1 {
            regions.push(MemRegion {
                addr: strides.as_ptr() as u64,
                len: 8 * (n as u64 + 1),
                writable: false,
            });
        }
        let a: KernelArgs = [
            ptrs.as_ptr() as u64,
            out as u64,
            begin as u64,
            end as u64,
            if self.rows { rows as u64 } else { 0 },
            if self.rows {
                strides.as_ptr() as u64
            } else {
                0
            },
            0,
            0,
            0,
        ];
        // SAFETY: the regions are the bytes the call may touch (the caller's contract); only
        // the output is written; the pointer and stride arrays are the caller's for the call.
        if let Err(e) = unsafe { self.runner.call(&self.code, true, &a, &regions) } {
            panic!("emulated x86 n-way kernel failed: {e}");
        }
    }
}

/// A compiled n-way kernel, owning its code.
pub(crate) struct NwayKernel {
    tier: Tier,
    entry: Entry,
    code_bytes: usize,
    _owner: Box<dyn CodeOwner>,
}

impl std::fmt::Debug for NwayKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NwayKernel({}, {} bytes)", self.tier, self.code_bytes)
    }
}

impl NwayKernel {
    /// A kernel of `tier` entered at `entry`, whose code `owner` frees.
    ///
    /// # Safety
    /// `entry` is a function with the [`NwayFn`] (or, for a spec of rows, [`NwayRowsFn`])
    /// contract for one [`NwaySpec`], using only instructions this host executes, callable
    /// until `owner` is dropped.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))] // no-JIT builds compile none
    pub(crate) unsafe fn owned(
        tier: Tier,
        entry: Entry,
        code_bytes: usize,
        owner: Box<dyn CodeOwner>,
    ) -> NwayKernel {
        NwayKernel {
            tier,
            entry,
            code_bytes,
            _owner: owner,
        }
    }

    /// A flat kernel linked into the program ahead of time (an exported table's): nothing to
    /// free.
    ///
    /// # Safety
    /// `entry` is a function with the [`NwayFn`] contract for one flat [`NwaySpec`], compiled
    /// for this host, that stays in the program for good.
    pub(crate) unsafe fn linked(entry: NwayFn, code_bytes: usize) -> NwayKernel {
        /// Linked code: part of the program.
        struct Linked;
        impl CodeOwner for Linked {}
        NwayKernel {
            tier: Tier::Cranelift,
            entry: Entry::Flat(entry),
            code_bytes,
            _owner: Box::new(Linked),
        }
    }

    /// Runs elements `begin..end`.
    ///
    /// # Safety
    /// `ptrs` holds one pointer per operand of the kernel's spec, in its order: a full
    /// operand's points at `end` readable elements of its width, a splat's at one; `out` at
    /// `end` writable elements that no operand overlaps unless it is the same array read in
    /// place (same first element); `begin <= end`.
    pub(crate) unsafe fn run(&self, ptrs: &[*const u8], out: *mut u8, begin: usize, end: usize) {
        // SAFETY: the caller's contract is the kernel's (see `owned`); a kernel of rows runs
        // one row without reading its strides.
        unsafe {
            match &self.entry {
                Entry::Flat(f) => f(ptrs.as_ptr(), out, begin, end),
                Entry::Rows(f) => f(ptrs.as_ptr(), out, begin, end, 1, std::ptr::null()),
                Entry::Emulated(e) => e.call(ptrs, out, (begin, end), 1, &[]),
            }
        }
    }

    /// Runs elements `begin..end` of `rows` rows, `strides` apart (bytes; one per operand,
    /// then the output's). A flat kernel runs one row at a time.
    ///
    /// # Safety
    /// As [`NwayKernel::run`] for every row: row `r` of a full operand starts
    /// `r * strides[j]` bytes after `ptrs[j]`, the output's `r * strides[n]` after `out`, and
    /// the output's rows are disjoint.
    pub(crate) unsafe fn run_rows(
        &self,
        ptrs: &[*const u8],
        out: *mut u8,
        (begin, end): (usize, usize),
        rows: usize,
        strides: &[isize],
    ) {
        match &self.entry {
            // SAFETY: the caller's contract is the kernel's (see `owned`).
            Entry::Rows(f) => unsafe { f(ptrs.as_ptr(), out, begin, end, rows, strides.as_ptr()) },
            // SAFETY: as above.
            Entry::Emulated(e) if e.rows => unsafe {
                e.call(ptrs, out, (begin, end), rows, strides)
            },
            _ => {
                let mut p: SmallVec<[*const u8; 24]> = ptrs.into();
                let mut o = out;
                for _ in 0..rows {
                    // SAFETY: as above, row by row.
                    unsafe { self.run(&p, o, begin, end) };
                    for (q, s) in p.iter_mut().zip(strides) {
                        *q = q.wrapping_offset(*s);
                    }
                    o = o.wrapping_offset(strides[ptrs.len()]);
                }
            }
        }
    }
}

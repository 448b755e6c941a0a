//! Kernels: machine code for one signature (or one pattern), shared as `Arc<Kernel>`, with the
//! ownership of that code. JIT code (a Cranelift module, or a mapping of the x86 tier) is freed
//! when the last holder drops the kernel; code linked into the program (an ahead-of-time table)
//! is never freed.

pub(crate) mod abi;
pub(crate) mod nway;

use crate::plan::Signature;
use crate::plan::{OPS, OUT, RHS};
use crate::shape::MAX_RANK;
use crate::tier::{Tier, Variant};
use abi::{CodeRunner, KernelArgs, MemRegion};
use abi::{KernelFn, Ptrs};

/// The owner of a kernel's machine code, as a code generator hands it over (a Cranelift JIT
/// module, a mapping of the x86 tier): dropped with the kernel, it frees the code. The kernel
/// does not know which generator made it.
pub(crate) trait CodeOwner: Send + Sync {
    /// The machine code, where the owner keeps it as bytes the library emitted (for
    /// inspection; `None` where only the generator's own listing exists).
    fn bytes(&self) -> Option<&[u8]> {
        None
    }
}

/// Where a kernel's machine code lives, and what frees it.
#[cfg_attr(not(feature = "jit"), allow(dead_code))] // no-JIT builds only link code
enum Code {
    /// Code owned by the generator's owner object, freed when the kernel is dropped.
    Owned(Box<dyn CodeOwner>),
    /// Code this host cannot run, executed by a [`CodeRunner`] (verification only); whether
    /// it may use AVX-512.
    Runner(Vec<u8>, std::sync::Arc<dyn CodeRunner>, bool),
    /// Code linked into the program ahead of time (an exported kernel table): nothing to free.
    Linked,
}

/// A compiled kernel for one [`Signature`]. Shared as `Arc<Kernel>`; its code memory is returned
/// to the system when the last `Arc` is dropped (e.g. after cache eviction, once no caller still
/// runs it).
pub struct Kernel {
    sig: Signature,
    /// Shape-generic: `sig` gives only the rank, width and inner-stride classes; dims and
    /// strides are passed on every call.
    generic: bool,
    /// The tier whose generator made the code, its store kind and vector width.
    variant: Variant,
    /// Entry point; `None` for code run by a [`CodeRunner`].
    entry: Option<KernelFn>,
    code_bytes: usize,
    code: Code,
    /// Whether calls of this kernel gain from being split across threads.
    split: crate::measure::SplitChoice,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Kernel({}, {}, {} bytes of code)",
            self.sig, self.variant, self.code_bytes
        )
    }
}

impl Kernel {
    fn counted(
        sig: Signature,
        generic: bool,
        v: Variant,
        entry: Option<KernelFn>,
        code_bytes: usize,
        code: Code,
    ) -> Self {
        LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        LIVE_CODE.fetch_add(code_bytes, std::sync::atomic::Ordering::Relaxed);
        Kernel {
            sig,
            generic,
            variant: v,
            entry,
            code_bytes,
            code,
            split: Default::default(),
        }
    }

    /// The learnt choice between one thread and several for this kernel's calls.
    pub(crate) fn split_choice(&self) -> &crate::measure::SplitChoice {
        &self.split
    }

    /// A kernel of code a generator made and `owner` frees, entered at `entry`, of variant
    /// `v`, for `sig` (exact) or `sig`'s pattern (`generic`).
    ///
    /// # Safety
    /// `entry` is a function with the [`KernelFn`] contract for `sig` (exact) or `sig`'s
    /// pattern (generic), using only instructions this host executes, that stays callable
    /// until `owner` is dropped.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))] // no-JIT builds only link code
    pub(crate) unsafe fn owned(
        sig: Signature,
        generic: bool,
        v: Variant,
        entry: KernelFn,
        code_bytes: usize,
        owner: Box<dyn CodeOwner>,
    ) -> Self {
        Kernel::counted(sig, generic, v, Some(entry), code_bytes, Code::Owned(owner))
    }

    /// A kernel of variant `v` linked into the program ahead of time (from an exported table).
    /// It owns no memory and is not counted by [`live_kernels`].
    ///
    /// # Safety
    /// `entry` is a function with the [`KernelFn`] contract for `sig` (exact) or `sig`'s pattern
    /// (generic), compiled for this host, that stays in the program for good.
    pub(crate) unsafe fn linked(
        sig: Signature,
        generic: bool,
        v: Variant,
        entry: KernelFn,
        code_bytes: u32,
    ) -> Self {
        Kernel {
            sig,
            generic,
            variant: v,
            entry: Some(entry),
            code_bytes: code_bytes as usize,
            code: Code::Linked,
            split: Default::default(),
        }
    }

    /// Whether the kernel's code was linked into the program ahead of time.
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     // Compiled at run time: the kernel owns its code (an AOT table's kernels are linked).
    ///     let kernel = cg.compile(&plan_contiguous(4, 100).unwrap())?;
    ///     assert!(!kernel.is_linked());
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn is_linked(&self) -> bool {
        matches!(self.code, Code::Linked)
    }

    /// A kernel whose x86 machine `code` (of variant `v`, for `sig` or, `generic`, its
    /// pattern) runs through `runner` instead of on the CPU: how tests execute kernels of a
    /// tier the host lacks. The runner lets the code use AVX-512 where `v`'s tier requires it.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use selectjit::codegen::{CodeRunner, Kernel, KernelArgs, MemRegion, Ptrs};
    /// use selectjit::plan::plan_contiguous;
    /// use selectjit::{Tier, Variant};
    ///
    /// /// Records the outer range of each call instead of executing the code.
    /// #[derive(Debug, Default)]
    /// struct Recorder(Mutex<Vec<(u64, u64)>>);
    /// impl CodeRunner for Recorder {
    ///     unsafe fn call(
    ///         &self,
    ///         _code: &[u8],
    ///         _avx512: bool,
    ///         args: &KernelArgs,
    ///         regions: &[MemRegion],
    ///     ) -> Result<(), String> {
    ///         assert_eq!(regions.iter().filter(|r| r.writable).count(), 1); // the output
    ///         self.0.lock().unwrap().push((args[4], args[5]));
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sig = plan_contiguous(4, 8).unwrap();
    /// let runner = Arc::new(Recorder::default());
    /// let v = Variant::of(Tier::Avx512);
    /// let kernel = Kernel::with_runner(sig.clone(), false, v, vec![0xc3], runner.clone()); // `ret`
    /// assert!(kernel.is_emulated());
    /// assert_eq!(kernel.x86_code(), Some(&[0xc3][..]));
    ///
    /// let (cond, data) = ([1u8; 8], [0u32; 8]);
    /// let mut out = [0u32; 8];
    /// let p = Ptrs {
    ///     cond: cond.as_ptr(),
    ///     then: data.as_ptr().cast(),
    ///     else_: data.as_ptr().cast(),
    ///     out: out.as_mut_ptr().cast(),
    ///     rhs: std::ptr::null(),
    /// };
    /// // SAFETY: every buffer holds the 8 elements `sig` addresses; the output overlaps no input.
    /// unsafe { kernel.run(&sig, p, 2, 6) };
    /// assert_eq!(*runner.0.lock().unwrap(), [(2, 6)]);
    /// ```
    pub fn with_runner(
        sig: Signature,
        generic: bool,
        v: Variant,
        code: Vec<u8>,
        runner: std::sync::Arc<dyn CodeRunner>,
    ) -> Self {
        let n = code.len();
        let avx512 = v.tier.required_features().contains(&"avx512f");
        let code = Code::Runner(code, runner, avx512);
        Kernel::counted(sig, generic, v, None, n, code)
    }

    /// The tier whose generator made this kernel.
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     for &t in cg.tiers() {
    ///         let kernel = cg.compile_with(t, &plan_contiguous(4, 100).unwrap(), false)?;
    ///         assert_eq!(kernel.tier(), t);
    ///     }
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn tier(&self) -> Tier {
        self.variant.tier
    }

    /// The variant: the tier, whether the kernel stores non-temporally, its vector width.
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let sig = plan_contiguous(4, 100).unwrap();
    ///     let kernel = cg.compile(&sig)?;
    ///     assert_eq!(kernel.variant().tier, kernel.tier());
    ///     assert!(!kernel.variant().nt); // 400 bytes of output: ordinary stores
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// Whether the kernel runs through a [`CodeRunner`] rather than on the CPU.
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     // An engine without a runner compiles code its CPU runs.
    ///     let kernel = cg.compile(&plan_contiguous(4, 100).unwrap())?;
    ///     assert!(!kernel.is_emulated());
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn is_emulated(&self) -> bool {
        self.entry.is_none()
    }

    /// The machine code of an x86-tier kernel (`None` for Cranelift and linked kernels).
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let kernel = cg.compile(&plan_contiguous(4, 100).unwrap())?;
    ///     match kernel.x86_code() {
    ///         Some(code) => {
    ///             assert!(kernel.tier().is_x86());
    ///             assert_eq!(code.len(), kernel.code_bytes());
    ///         }
    ///         None => assert!(!kernel.tier().is_x86()),
    ///     }
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn x86_code(&self) -> Option<&[u8]> {
        match &self.code {
            Code::Owned(o) => o.bytes(),
            Code::Runner(v, _, _) => Some(v),
            Code::Linked => None,
        }
    }

    /// The signature this kernel was compiled for.
    ///
    /// ```
    /// use selectjit::plan::{Pattern, plan_contiguous};
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let sig = plan_contiguous(2, 100).unwrap();
    ///     assert_eq!(cg.compile(&sig)?.signature(), &sig);
    ///     // A shape-generic kernel holds a representative of its pattern.
    ///     let generic = cg.compile_generic(&Pattern::of(&sig))?;
    ///     assert_eq!(Pattern::of(generic.signature()), Pattern::of(&sig));
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn signature(&self) -> &Signature {
        &self.sig
    }

    /// Size of the generated machine code in bytes.
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let kernel = cg.compile(&plan_contiguous(4, 100).unwrap())?;
    ///     assert!(kernel.code_bytes() > 0);
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn code_bytes(&self) -> usize {
        self.code_bytes
    }

    /// The entry point of an exact kernel the host runs itself (not a shape-generic one, nor
    /// code run by a [`CodeRunner`]): [`Kernel::run`] calls it with null dims and strides.
    pub(crate) fn exact_entry(&self) -> Option<KernelFn> {
        self.entry.filter(|_| !self.generic)
    }

    /// Whether this is a shape-generic kernel (it runs every signature of its pattern).
    ///
    /// ```
    /// use selectjit::codegen::Ptrs;
    /// use selectjit::plan::{Pattern, plan_contiguous};
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     // One shape-generic kernel for every contiguous call of 4-byte elements.
    ///     let generic = cg.compile_generic(&Pattern::of(&plan_contiguous(4, 100).unwrap()))?;
    ///     assert!(generic.is_generic());
    ///     let sig = plan_contiguous(4, 5).unwrap();
    ///     let (cond, a, b) = ([1u8, 0, 0, 1, 1], [1f32; 5], [2f32; 5]);
    ///     let mut out = [0f32; 5];
    ///     let p = Ptrs {
    ///         cond: cond.as_ptr(),
    ///         then: a.as_ptr().cast(),
    ///         else_: b.as_ptr().cast(),
    ///         out: out.as_mut_ptr().cast(),
    ///         rhs: std::ptr::null(),
    ///     };
    ///     // SAFETY: every buffer holds the 5 elements `sig` addresses; the output overlaps no input.
    ///     unsafe { generic.run(&sig, p, 0, sig.outer()) };
    ///     assert_eq!(out, [1.0, 2.0, 2.0, 1.0, 1.0]);
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn is_generic(&self) -> bool {
        self.generic
    }

    /// Runs outer indices `begin..end` of `sig`, which for an exact kernel must be the signature
    /// it was compiled for, and for a shape-generic kernel one of the same pattern.
    ///
    /// # Safety
    /// The pointers and range satisfy the contract of `static_kernels::run` for `sig`: every
    /// element `sig` addresses from them in `begin..end` lies inside its buffer, the output
    /// overlaps no input except exactly (in place). The engine establishes it by validating
    /// every buffer against its shape and strides before planning.
    ///
    /// ```
    /// use selectjit::codegen::Ptrs;
    /// use selectjit::plan::plan;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     // out [2, 3] = where(cond [3], x [2, 3], -1)
    ///     let sig = plan(8, &[2, 3], [&[0, 1], &[3, 1], &[0, 0], &[3, 1]]).unwrap();
    ///     let kernel = cg.compile(&sig)?;
    ///     let (cond, x, minus1) = ([1u8, 0, 1], [1i64, 2, 3, 4, 5, 6], [-1i64]);
    ///     let mut out = [0i64; 6];
    ///     let p = Ptrs {
    ///         cond: cond.as_ptr(),
    ///         then: x.as_ptr().cast(),
    ///         else_: minus1.as_ptr().cast(),
    ///         out: out.as_mut_ptr().cast(),
    ///         rhs: std::ptr::null(),
    ///     };
    ///     // SAFETY: each buffer holds every element `sig` addresses from its pointer (cond 3, x 6,
    ///     // else 1, out 6); the output overlaps no input.
    ///     unsafe { kernel.run(&sig, p, 1, 2) }; // the second row only
    ///     assert_eq!(out, [0, 0, 0, 4, -1, 6]);
    ///     // SAFETY: as above.
    ///     unsafe { kernel.run(&sig, p, 0, 1) };
    ///     assert_eq!(out, [1, -1, 3, 4, -1, 6]);
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    #[inline]
    pub unsafe fn run(&self, sig: &Signature, p: Ptrs, begin: usize, end: usize) {
        if !self.generic
            && let Some(entry) = self.entry
        {
            let (dims, strides) = (std::ptr::null(), std::ptr::null());
            // SAFETY: `entry` points at finalized code owned by `self.code` (or linked into the
            // program), alive while `self` is; the caller guarantees the memory contract for
            // `sig`, this exact kernel's signature; exact kernels read no dims or strides.
            return unsafe {
                entry(
                    p.cond, p.then, p.else_, p.out, begin, end, dims, strides, p.rhs,
                )
            };
        }
        // SAFETY: the caller's contract.
        unsafe { self.run_slow(sig, p, begin, end) }
    }

    /// [`Kernel::run`] for shape-generic kernels and kernels run by a [`CodeRunner`].
    ///
    /// # Safety
    /// As for [`Kernel::run`].
    #[inline(never)]
    unsafe fn run_slow(&self, sig: &Signature, p: Ptrs, begin: usize, end: usize) {
        // A shape-generic kernel reads its dims and byte strides from two arrays; exact kernels
        // get null pointers (and no arrays to fill on their hot path).
        let args;
        let (dims, strides) = if self.generic {
            args = generic_args(sig);
            (args.0.as_ptr(), args.1.as_ptr())
        } else {
            (std::ptr::null(), std::ptr::null())
        };
        let Some(entry) = self.entry else {
            if let Code::Runner(code, runner, avx512) = &self.code {
                let (c, t, e, o) = (p.cond as u64, p.then as u64, p.else_ as u64, p.out as u64);
                let a: KernelArgs = [
                    c,
                    t,
                    e,
                    o,
                    begin as u64,
                    end as u64,
                    dims as u64,
                    strides as u64,
                    p.rhs as u64,
                ];
                // SAFETY: the caller's contract: every element `sig` addresses in `begin..end`
                // lies inside its buffer, which is what the regions describe; the dims and
                // strides arrays live on this frame for the call.
                return unsafe { run_external(code, &**runner, *avx512, sig, a) };
            }
            return;
        };
        // SAFETY: `entry` points at finalized code owned by `self.code` (or linked into the
        // program), alive while `self` is; the caller guarantees the memory contract for
        // `sig`, which is this kernel's signature (exact) or has its pattern (generic); a
        // generic kernel reads `rank` dims and `OPS * rank` strides, within the arrays since
        // collapsed ranks never exceed `MAX_RANK`.
        unsafe {
            entry(
                p.cond, p.then, p.else_, p.out, begin, end, dims, strides, p.rhs,
            )
        }
    }
}

/// The dims and byte strides a shape-generic kernel reads: `dims[k]` and
/// `strides[op * rank + k]`.
fn generic_args(sig: &Signature) -> ([u64; MAX_RANK], [i64; OPS * MAX_RANK]) {
    let mut dims = [0u64; MAX_RANK];
    let mut strides = [0i64; OPS * MAX_RANK];
    let rank = sig.rank();
    for k in 0..rank {
        dims[k] = sig.dims[k] as u64;
        for op in 0..OPS {
            strides[op * rank + k] = sig.byte_stride(op, k) as i64;
        }
    }
    (dims, strides)
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // Linked code is part of the program, never counted; an owner frees its code when
        // dropped with the kernel (the last `Arc`: no caller runs the code any more).
        if !matches!(self.code, Code::Linked) {
            LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            LIVE_CODE.fetch_sub(self.code_bytes, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The index in a kernel's arguments of operand `op`'s pointer.
fn arg_of(op: usize) -> usize {
    if op == RHS { 8 } else { op }
}

/// The memory a kernel call on `sig` with arguments `a` may touch, per operand (cond, then,
/// else, out, rhs): from the lowest to one past the highest addressed byte (nothing for the
/// rhs of a mask or a test).
fn operand_regions(sig: &Signature, a: &KernelArgs) -> [(u64, u64); OPS] {
    let (begin, end) = (a[4] as usize, a[5] as usize);
    std::array::from_fn(|op| {
        let w = sig.op_width(op) as i64;
        let p = a[arg_of(op)];
        if begin >= end || (op == RHS && !sig.cond.binary()) {
            return (p, 0);
        }
        let first = begin as i64 * sig.byte_stride(op, 0) as i64;
        let (mut lo, mut hi) = (first, first);
        for (k, &d) in sig.dims.iter().enumerate() {
            let n = if k == 0 { end - begin } else { d } as i64;
            let span = (n - 1) * sig.byte_stride(op, k) as i64;
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        (p.wrapping_add_signed(lo), (hi - lo + w) as u64)
    })
}

/// Runs a kernel through `runner`; an error (a bug of the generator) panics with its message,
/// as this path exists only to test generated code.
///
/// # Safety
/// As for [`Kernel::run`]; `a` holds its pointers, range and generic arrays.
unsafe fn run_external(
    code: &[u8],
    runner: &dyn CodeRunner,
    avx512: bool,
    sig: &Signature,
    a: KernelArgs,
) {
    let r = operand_regions(sig, &a);
    // The output first: in place it is the same memory as then or else, and a runner takes the
    // first region that holds an address.
    let mut regions: Vec<MemRegion> = std::iter::once(OUT)
        .chain((0..OPS).filter(|&op| op != OUT))
        .map(|op| MemRegion {
            addr: r[op].0,
            len: r[op].1,
            writable: op == OUT,
        })
        .collect();
    if a[6] != 0 {
        let rank = sig.rank() as u64;
        regions.push(MemRegion {
            addr: a[6],
            len: 8 * rank,
            writable: false,
        });
        regions.push(MemRegion {
            addr: a[7],
            len: 8 * OPS as u64 * rank,
            writable: false,
        });
    }
    // SAFETY: the regions are the bytes `sig` addresses from validated pointers (the caller's
    // contract), the dims/strides arrays live on the caller's stack for this call; only `out`
    // is written.
    if let Err(e) = unsafe { runner.call(code, avx512, &a, &regions) } {
        panic!("emulated x86 kernel for {sig} failed: {e}");
    }
}

static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static LIVE_CODE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Kernels alive in this process (in caches or held by callers), and their bytes of machine code.
///
/// ```
/// use selectjit::codegen::live_kernels;
/// use selectjit::plan::plan_contiguous;
/// if let Some(cg) = selectjit::Engine::new().codegen() {
///     let (kernels, bytes) = live_kernels();
///     let kernel = cg.compile(&plan_contiguous(4, 100).unwrap())?;
///     assert_eq!(live_kernels(), (kernels + 1, bytes + kernel.code_bytes()));
///     drop(kernel); // its code is freed with it
///     assert_eq!(live_kernels(), (kernels, bytes));
/// }
/// # Ok::<(), selectjit::Error>(())
/// ```
pub fn live_kernels() -> (usize, usize) {
    (
        LIVE.load(std::sync::atomic::Ordering::Relaxed),
        LIVE_CODE.load(std::sync::atomic::Ordering::Relaxed),
    )
}

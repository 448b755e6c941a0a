//! Ownership of generated code: one JIT module (Cranelift) or one mapping (x86 tier) per kernel,
//! freed when the last holder drops it.

use std::sync::Mutex;

use cranelift_jit::JITModule;

use super::Tier;
use super::exec::ExecMem;
use crate::kernels::Ptrs;
use crate::plan::Signature;
use crate::shape::MAX_RANK;

/// The machine-code entry point: `(cond, then, else, out, begin, end, dims, byte_strides)`;
/// the last two are read only by shape-generic kernels.
pub(crate) type KernelFn = unsafe extern "C" fn(
    *const u8,
    *const u8,
    *const u8,
    *mut u8,
    usize,
    usize,
    *const u64,
    *const i64,
);

/// Where a kernel's machine code lives, and what frees it.
enum Code {
    /// A Cranelift JIT module, freed on drop. The mutex makes the module (which holds a
    /// `RefCell`) shareable; it is touched only on drop.
    Cranelift(Mutex<Option<Box<JITModule>>>),
    /// Code emitted by the x86 tier in a mapping of its own.
    Mapped(ExecMem),
    /// x86 code this host cannot run, executed by the built-in emulator (verification only).
    #[cfg(target_arch = "x86_64")]
    Emulated(Vec<u8>),
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
    /// The tier whose generator made the code.
    tier: Tier,
    /// Entry point; `None` for emulated code.
    entry: Option<KernelFn>,
    code_bytes: usize,
    code: Code,
    /// Whether calls of this kernel gain from being split across threads.
    split: crate::split::SplitChoice,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Kernel({}, {}, {} bytes of code)",
            self.sig, self.tier, self.code_bytes
        )
    }
}

impl Kernel {
    fn new(
        sig: Signature,
        generic: bool,
        tier: Tier,
        entry: Option<KernelFn>,
        code_bytes: usize,
        code: Code,
    ) -> Self {
        LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        LIVE_CODE.fetch_add(code_bytes, std::sync::atomic::Ordering::Relaxed);
        Kernel {
            sig,
            generic,
            tier,
            entry,
            code_bytes,
            code,
            split: Default::default(),
        }
    }

    /// The learnt choice between one thread and several for this kernel's calls.
    pub(crate) fn split_choice(&self) -> &crate::split::SplitChoice {
        &self.split
    }

    /// A kernel compiled by Cranelift into `module`, entered at `entry`.
    pub(crate) fn cranelift(
        sig: Signature,
        generic: bool,
        entry: KernelFn,
        code_bytes: usize,
        module: JITModule,
    ) -> Self {
        let code = Code::Cranelift(Mutex::new(Some(Box::new(module))));
        Kernel::new(sig, generic, Tier::Cranelift, Some(entry), code_bytes, code)
    }

    /// A kernel linked into the program ahead of time (from an exported table). It owns no
    /// memory and is not counted by [`live_kernels`].
    ///
    /// # Safety
    /// `entry` is a function with the [`KernelFn`] contract for `sig` (exact) or `sig`'s pattern
    /// (generic), compiled for this host, that stays in the program for good.
    pub(crate) unsafe fn linked(
        sig: Signature,
        generic: bool,
        entry: KernelFn,
        code_bytes: u32,
    ) -> Self {
        Kernel {
            sig,
            generic,
            tier: Tier::Cranelift,
            entry: Some(entry),
            code_bytes: code_bytes as usize,
            code: Code::Linked,
            split: Default::default(),
        }
    }

    /// Whether the kernel's code was linked into the program ahead of time.
    pub fn is_linked(&self) -> bool {
        matches!(self.code, Code::Linked)
    }

    /// A kernel of the x86 tier: `code` (entry at its first byte) mapped executable.
    ///
    /// # Safety
    /// `code` is a complete function with the [`KernelFn`] signature and contract for `sig`
    /// (exact) or `sig`'s pattern (generic), using only instructions this host executes.
    pub(crate) unsafe fn mapped(
        sig: Signature,
        generic: bool,
        tier: Tier,
        code: &[u8],
    ) -> crate::Result<Self> {
        let mem = ExecMem::new(code)?;
        // SAFETY: the mapping holds exactly `code`, which the caller guarantees is a function
        // of this type; it stays mapped while the kernel (owner of `mem`) lives.
        let entry: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(mem.as_ptr()) };
        let n = code.len();
        Ok(Kernel::new(
            sig,
            generic,
            tier,
            Some(entry),
            n,
            Code::Mapped(mem),
        ))
    }

    /// A kernel of the x86 tier run by the built-in emulator, for hosts that lack its
    /// instructions (tests of the generator; every memory access is checked, slow).
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn emulated(sig: Signature, generic: bool, tier: Tier, code: Vec<u8>) -> Self {
        let n = code.len();
        Kernel::new(sig, generic, tier, None, n, Code::Emulated(code))
    }

    /// The tier whose generator made this kernel.
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// Whether the kernel runs in the emulator rather than on the CPU.
    pub fn is_emulated(&self) -> bool {
        self.entry.is_none()
    }

    /// The machine code of an x86-tier kernel (`None` for Cranelift kernels).
    pub fn x86_code(&self) -> Option<&[u8]> {
        match &self.code {
            Code::Cranelift(_) | Code::Linked => None,
            Code::Mapped(m) => Some(m.bytes()),
            #[cfg(target_arch = "x86_64")]
            Code::Emulated(v) => Some(v),
        }
    }

    /// The signature this kernel was compiled for.
    pub fn signature(&self) -> &Signature {
        &self.sig
    }

    /// Size of the generated machine code in bytes.
    pub fn code_bytes(&self) -> usize {
        self.code_bytes
    }

    /// Whether this is a shape-generic kernel (see [`crate::jit::Jit::compile_generic`]).
    pub fn is_generic(&self) -> bool {
        self.generic
    }

    /// Runs outer indices `begin..end` of `sig`, which for an exact kernel must be the signature
    /// it was compiled for, and for a shape-generic kernel one of the same pattern.
    ///
    /// # Safety
    /// The pointers and range satisfy the contract of [`crate::kernels::run`] for `sig`: the
    /// engine establishes it by validating every buffer against its shape and strides before
    /// planning, and `sig` is the plan of exactly those layouts.
    pub(crate) unsafe fn run(&self, sig: &Signature, p: Ptrs, begin: usize, end: usize) {
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
            #[cfg(target_arch = "x86_64")]
            if let Code::Emulated(code) = &self.code {
                // SAFETY: the caller's contract: every element `sig` addresses in `begin..end`
                // lies inside its buffer, which is what the regions describe.
                return unsafe { emulate(code, self.tier, sig, p, begin, end, dims, strides) };
            }
            return;
        };
        // SAFETY: `entry` points at finalized code owned by `self.code`, alive while `self`
        // is; the caller guarantees the memory contract for `sig`, which is this kernel's
        // signature (exact) or has its pattern (generic, checked by the caller through
        // `Pattern::of`); a generic kernel reads `rank` dims and `4 * rank` strides, within the
        // arrays since collapsed ranks never exceed `MAX_RANK`.
        unsafe { entry(p.cond, p.then, p.else_, p.out, begin, end, dims, strides) }
    }
}

/// The dims and byte strides a shape-generic kernel reads: `dims[k]` and
/// `strides[op * rank + k]`.
fn generic_args(sig: &Signature) -> ([u64; MAX_RANK], [i64; 4 * MAX_RANK]) {
    let mut dims = [0u64; MAX_RANK];
    let mut strides = [0i64; 4 * MAX_RANK];
    let rank = sig.rank();
    for k in 0..rank {
        dims[k] = sig.dims[k] as u64;
        for op in 0..4 {
            let w = if op == crate::plan::COND {
                1
            } else {
                sig.width as i64
            };
            strides[op * rank + k] = sig.strides[op][k] as i64 * w;
        }
    }
    (dims, strides)
}

impl Drop for Kernel {
    fn drop(&mut self) {
        if let Code::Linked = self.code {
            return; // part of the program, never counted
        }
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        LIVE_CODE.fetch_sub(self.code_bytes, std::sync::atomic::Ordering::Relaxed);
        let Code::Cranelift(module) = &mut self.code else {
            return; // a mapping unmaps itself when dropped
        };
        let module = match module.get_mut() {
            Ok(m) => m.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(m) = module {
            // SAFETY: we are the last owner of this kernel (drop of the last Arc), so no caller
            // is executing its code and `entry` is never called again.
            unsafe { m.free_memory() };
        }
    }
}

/// The memory a kernel call on `sig` over outer indices `begin..end` may touch, per operand
/// (cond, then, else, out): from the lowest to one past the highest addressed byte.
fn operand_regions(sig: &Signature, p: Ptrs, begin: usize, end: usize) -> [(u64, u64); 4] {
    let bases = [p.cond as u64, p.then as u64, p.else_ as u64, p.out as u64];
    std::array::from_fn(|op| {
        let w = if op == crate::plan::COND {
            1
        } else {
            sig.width as i64
        };
        if begin >= end {
            return (bases[op], 0);
        }
        let st = &sig.strides[op];
        let first = begin as i64 * st[0] as i64 * w;
        let (mut lo, mut hi) = (first, first);
        for (k, &d) in sig.dims.iter().enumerate() {
            let n = if k == 0 { end - begin } else { d } as i64;
            let span = (n - 1) * st[k] as i64 * w;
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        (bases[op].wrapping_add_signed(lo), (hi - lo + w) as u64)
    })
}

/// Runs an emulated kernel; an emulator error (a bug of the generator) panics with its
/// message, as this path exists only to test generated code.
///
/// # Safety
/// As for [`Kernel::run`].
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn emulate(
    code: &[u8],
    tier: Tier,
    sig: &Signature,
    p: Ptrs,
    begin: usize,
    end: usize,
    dims: *const u64,
    strides: *const i64,
) {
    use super::x86::emu;
    let r = operand_regions(sig, p, begin, end);
    // The output first: in place it is the same memory as then or else, and the emulator
    // takes the first region that holds an address.
    let out = crate::plan::OUT;
    let mut regions: Vec<emu::Region> = std::iter::once(out)
        .chain((0..4).filter(|&op| op != out))
        .map(|op| emu::Region {
            addr: r[op].0,
            len: r[op].1,
            writable: op == out,
        })
        .collect();
    if !dims.is_null() {
        let rank = sig.rank() as u64;
        regions.push(emu::Region {
            addr: dims as u64,
            len: 8 * rank,
            writable: false,
        });
        regions.push(emu::Region {
            addr: strides as u64,
            len: 32 * rank,
            writable: false,
        });
    }
    let args = [
        p.cond as u64,
        p.then as u64,
        p.else_ as u64,
        p.out as u64,
        begin as u64,
        end as u64,
        dims as u64,
        strides as u64,
    ];
    let cfg = emu::EmuConfig {
        max_steps: 1 << 36,
        // AVX2 kernels must not use EVEX encodings or opmasks.
        avx512: tier == Tier::Avx512,
    };
    // SAFETY: the regions are the bytes `sig` addresses from validated pointers (the caller's
    // contract), the dims/strides arrays live on the caller's stack for this call; only `out`
    // is written.
    if let Err(e) = unsafe { emu::call(code, 0, &args, &regions, &cfg) } {
        panic!("emulated x86 kernel for {sig} failed: {e}");
    }
}

static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static LIVE_CODE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Kernels alive in this process (in caches or held by callers), and their bytes of machine code.
pub fn live_kernels() -> (usize, usize) {
    (
        LIVE.load(std::sync::atomic::Ordering::Relaxed),
        LIVE_CODE.load(std::sync::atomic::Ordering::Relaxed),
    )
}

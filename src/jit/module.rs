//! Ownership of generated code: one JIT module per kernel, freed when the last holder drops it.

use std::sync::Mutex;

use cranelift_jit::JITModule;

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

/// A compiled kernel for one [`Signature`]. Shared as `Arc<Kernel>`; its code memory is returned
/// to the system when the last `Arc` is dropped (e.g. after cache eviction, once no caller still
/// runs it).
pub struct Kernel {
    sig: Signature,
    /// Shape-generic: `sig` gives only the rank, width and inner-stride classes; dims and
    /// strides are passed on every call.
    generic: bool,
    entry: KernelFn,
    code_bytes: usize,
    /// Touched only on drop. The mutex makes the module (which holds a `RefCell`) shareable.
    module: Mutex<Option<JITModule>>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernel({}, {} bytes of code)", self.sig, self.code_bytes)
    }
}

impl Kernel {
    pub(crate) fn new(
        sig: Signature,
        generic: bool,
        entry: KernelFn,
        code_bytes: usize,
        module: JITModule,
    ) -> Self {
        LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        LIVE_CODE.fetch_add(code_bytes, std::sync::atomic::Ordering::Relaxed);
        Kernel {
            sig,
            generic,
            entry,
            code_bytes,
            module: Mutex::new(Some(module)),
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
        // SAFETY: `entry` points at finalized code owned by `self.module`, alive while `self`
        // is; the caller guarantees the memory contract for `sig`, which is this kernel's
        // signature (exact) or has its pattern (generic, checked by the caller through
        // `Pattern::of`); a generic kernel reads `rank` dims and `4 * rank` strides, within the
        // arrays since collapsed ranks never exceed `MAX_RANK`.
        unsafe { (self.entry)(p.cond, p.then, p.else_, p.out, begin, end, dims, strides) }
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
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        LIVE_CODE.fetch_sub(self.code_bytes, std::sync::atomic::Ordering::Relaxed);
        let module = match self.module.get_mut() {
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

static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static LIVE_CODE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Kernels alive in this process (in caches or held by callers), and their bytes of machine code.
pub fn live_kernels() -> (usize, usize) {
    (
        LIVE.load(std::sync::atomic::Ordering::Relaxed),
        LIVE_CODE.load(std::sync::atomic::Ordering::Relaxed),
    )
}

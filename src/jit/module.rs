//! Ownership of generated code: one JIT module per kernel, freed when the last holder drops it.

use std::sync::Mutex;

use cranelift_jit::JITModule;

use crate::kernels::Ptrs;
use crate::plan::Signature;

/// The machine-code entry point: `(cond, then, else, out, begin, end)`.
pub(crate) type KernelFn =
    unsafe extern "C" fn(*const u8, *const u8, *const u8, *mut u8, usize, usize);

/// A compiled kernel for one [`Signature`]. Shared as `Arc<Kernel>`; its code memory is returned
/// to the system when the last `Arc` is dropped (e.g. after cache eviction, once no caller still
/// runs it).
pub struct Kernel {
    sig: Signature,
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
        entry: KernelFn,
        code_bytes: usize,
        module: JITModule,
    ) -> Self {
        LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        LIVE_CODE.fetch_add(code_bytes, std::sync::atomic::Ordering::Relaxed);
        Kernel {
            sig,
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

    /// Runs outer indices `begin..end`.
    ///
    /// # Safety
    /// The pointers and range satisfy the contract of [`crate::kernels::run`] for this kernel's
    /// signature: the engine establishes it by validating every buffer against its shape and
    /// strides before planning, and the signature is the plan of exactly those layouts.
    pub(crate) unsafe fn run(&self, p: Ptrs, begin: usize, end: usize) {
        // SAFETY: `entry` points at finalized code owned by `self.module`, alive while `self`
        // is; the caller guarantees the memory contract above.
        unsafe { (self.entry)(p.cond, p.then, p.else_, p.out, begin, end) }
    }
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

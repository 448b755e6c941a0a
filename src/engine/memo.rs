//! The per-thread memo: the last exact kernel a thread got from an engine, so that repeated
//! calls of one signature skip the shared cache (no lock, no hashing, no reference counting),
//! and repeated contiguous calls skip planning too.

use std::sync::Arc;

use super::Engine;
use crate::kernel::Kernel;
use crate::kernels::Ptrs;
use crate::plan::Signature;

/// The last exact kernel a thread got from an engine.
struct Memo {
    engine: u64,
    sig: Signature,
    kernel: Arc<Kernel>,
    /// `(width, n)` when `sig` is the plan of `n` contiguous elements of one shape for all four
    /// operands, so that such calls find the kernel without planning.
    contiguous: Option<(usize, usize)>,
}

thread_local! {
    /// The last exact kernel this thread got from an engine.
    static MEMO: std::cell::RefCell<Option<Memo>> = const { std::cell::RefCell::new(None) };
}

impl Engine {
    /// Remembers `k`, the exact kernel of `sig`, as this thread's last kernel of this engine.
    #[cfg(feature = "jit")]
    pub(super) fn memoise(&self, sig: &Signature, k: &Arc<Kernel>) {
        let n = sig.numel();
        let contiguous = (crate::plan::plan_contiguous(sig.width, n).as_ref() == Some(sig))
            .then_some((sig.width, n));
        MEMO.with(|m| {
            *m.borrow_mut() = Some(Memo {
                engine: self.id,
                sig: sig.clone(),
                kernel: k.clone(),
                contiguous,
            })
        });
    }

    /// Forgets this thread's memo of this engine.
    pub(super) fn forget_memo(&self) {
        MEMO.with(|m| {
            let mut m = m.borrow_mut();
            if m.as_ref().is_some_and(|memo| memo.engine == self.id) {
                *m = None;
            }
        });
    }

    /// Runs `sig` with this thread's last exact kernel of this engine, if it is `sig`'s.
    /// Returns false when there is no such kernel.
    pub(super) fn run_memo(&self, sig: &Signature, p: Ptrs, outer: usize) -> bool {
        MEMO.with(|m| {
            let m = m.borrow();
            match &*m {
                Some(memo) if memo.engine == self.id && memo.sig == *sig => {
                    self.count_memo_hit();
                    // SAFETY: as in `run_planned`, whose contract the caller upholds: the
                    // kernel is the exact kernel of `sig` and the range is the whole outer
                    // dimension.
                    unsafe { memo.kernel.run(sig, p, 0, outer) };
                    true
                }
                _ => false,
            }
        })
    }

    /// [`Engine::run_memo`] for `n` contiguous elements of one shape for all four operands,
    /// without planning: the memo knows whether its signature is that call's plan.
    pub(super) fn run_memo_contiguous(
        &self,
        width: usize,
        n: usize,
        p: Ptrs,
        out_bytes: usize,
    ) -> bool {
        if self.splits(out_bytes, n) {
            return false;
        }
        MEMO.with(|m| {
            let m = m.borrow();
            match &*m {
                Some(memo) if memo.engine == self.id && memo.contiguous == Some((width, n)) => {
                    self.count_memo_hit();
                    // SAFETY: the caller validated the four buffers for `n` contiguous
                    // elements, which is exactly the layout `memo.sig` was planned from
                    // (`plan_contiguous(width, n)`); the range is its whole outer dimension.
                    unsafe { memo.kernel.run(&memo.sig, p, 0, memo.sig.outer()) };
                    true
                }
                _ => false,
            }
        })
    }
}

//! The per-thread memo: the last [`KEEP`] exact kernels a thread got from an engine, so that
//! repeated calls of a few signatures (one call in a loop, a model's select nodes taking turns,
//! the branches of an n-way select) skip the shared cache (no lock, no hashing, no reference
//! counting), and repeated contiguous calls skip planning too. Its hits are counted on the thread and
//! added to the engine's count 64 at a time (an atomic add on every call would cost more than
//! the rest of a cache hit), when the memo is replaced, and when the thread asks for stats.
//!
//! The contiguous case is copied out of the memo into [`FAST`], plain data in a thread-local
//! without a destructor: a cache hit reads it without a borrow flag, the check that a
//! thread-local's destructor is registered, or a pointer chase to the kernel.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Engine;
use crate::kernel::Kernel;
use crate::kernel::abi::KernelFn;
use crate::kernel::abi::Ptrs;
use crate::plan::{OPS, OUT, Signature};
use crate::pred::Kind;

/// A call the memo runs without planning: `n` elements in one dimension, each operand (in
/// the signature's order: cond, then, else, out, rhs) either `n` contiguous elements (its bit
/// set in `full`) or one element broadcast (bit clear; an operand a condition does not read
/// too). Such a call plans to the one signature with that key, so the key stands for it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct FlatKey {
    pub(super) width: usize,
    pub(super) n: usize,
    pub(super) kind: Kind,
    pub(super) full: u8,
}

/// `full` of a mask select of four contiguous operands of one shape.
pub(super) const FULL_MASK_CALL: u8 = 0b01111;

impl FlatKey {
    /// A mask select of `n` contiguous elements of one shape for all four operands.
    #[inline(always)]
    pub(super) fn contiguous_mask(width: usize, n: usize) -> FlatKey {
        FlatKey {
            width,
            n,
            kind: Kind::Mask,
            full: FULL_MASK_CALL,
        }
    }

    /// `sig`'s key, when it is the plan of such a call.
    fn of(sig: &Signature) -> Option<FlatKey> {
        let n = sig.numel();
        if crate::plan::plan_contiguous(sig.width, n).as_ref() == Some(sig) {
            return Some(FlatKey::contiguous_mask(sig.width, n));
        }
        // Two elements or more: a dimension of one has strides of 0 whatever the layout.
        if sig.dims.len() != 1 || n < 2 || sig.strides[OUT][0] != 1 {
            return None;
        }
        let mut full = 0;
        for op in 0..OPS {
            match sig.strides[op][0] {
                0 => {}
                1 => full |= 1 << op,
                _ => return None,
            }
        }
        Some(FlatKey {
            width: sig.width,
            n,
            kind: sig.cond,
            full,
        })
    }
}

/// Kernels remembered per thread (of one engine), most recent first.
const KEEP: usize = 4;

/// An exact kernel a thread got from an engine.
struct Memo {
    engine: u64,
    sig: Signature,
    kernel: Arc<Kernel>,
    /// `sig`'s key when it is the plan of a flat call ([`FlatKey`]), so that such calls find
    /// the kernel without planning.
    flat: Option<FlatKey>,
    /// The engine's count of memo hits.
    counter: Arc<AtomicU64>,
}

/// Hits a thread counts before adding them to its engine's count.
const BATCH: u64 = 64;

/// A contiguous memo's cache-hit data.
#[derive(Clone, Copy)]
struct Hit {
    /// The memo's engine; `u64::MAX` (no engine's id) when there is none.
    engine: u64,
    key: FlatKey,
    /// The memo kernel's entry, when the memo is flat and its kernel exact code this host
    /// runs. The memo's `Arc` keeps that code alive: `Hit` is cleared before the memo drops it.
    entry: Option<KernelFn>,
}

const NO_HIT: Hit = Hit {
    engine: u64::MAX,
    key: FlatKey {
        width: 0,
        n: 0,
        kind: Kind::Mask,
        full: 0,
    },
    entry: None,
};

/// The thread's cache-hit data and memo hit count (no destructor: always accessible).
struct Fast {
    hit: Cell<Hit>,
    /// Hits of the memo's engine not yet added to its count.
    pending: Cell<u64>,
}

thread_local! {
    /// The last exact kernels this thread got from an engine, most recent first (all of one
    /// engine: the thread's pending hit count is that engine's).
    static MEMO: std::cell::RefCell<Vec<Memo>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The memo's cache-hit data and its pending hits.
    static FAST: Fast = const {
        Fast {
            hit: Cell::new(NO_HIT),
            pending: Cell::new(0),
        }
    };
}

impl Memo {
    #[inline]
    fn hit(&self) {
        FAST.with(|f| count_hit(f, &self.counter));
    }

    fn flush(&self) {
        let n = FAST.with(|f| f.pending.replace(0));
        self.counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// One memo hit, added to `counter` with the thread's pending ones every `BATCH`.
#[inline]
fn count_hit(f: &Fast, counter: &AtomicU64) {
    let n = f.pending.get() + 1;
    if n == BATCH {
        counter.fetch_add(BATCH, Ordering::Relaxed);
        f.pending.set(0);
    } else {
        f.pending.set(n);
    }
}

impl Drop for Memo {
    fn drop(&mut self) {
        // Before the kernel goes: nothing may call its entry from `FAST` any more.
        FAST.with(|f| f.hit.set(NO_HIT));
        self.flush();
    }
}

impl Engine {
    /// Remembers `k`, the exact kernel of `sig`, as this thread's most recent kernel of this
    /// engine (forgetting another engine's, and the oldest beyond [`KEEP`]).
    pub(super) fn memoise(&self, sig: &Signature, k: &Arc<Kernel>) {
        let flat = FlatKey::of(sig);
        let memo = Memo {
            engine: self.id,
            sig: sig.clone(),
            kernel: k.clone(),
            flat,
            counter: self.memo_hits.clone(),
        };
        // The dropped entries (another engine's, or the oldest) are dropped after the borrow
        // ends; their drop clears `FAST`.
        let dropped: Vec<Memo> = MEMO.with(|m| {
            let mut m = m.borrow_mut();
            let mut out = Vec::new();
            if m.first().is_some_and(|x| x.engine != self.id) {
                out.extend(m.drain(..));
            }
            // One entry per signature (`Engine::kernel` and `prepare` memoise without looking
            // first): a second would keep the kernel alive after `forget_memo_of`.
            if let Some(i) = m.iter().position(|x| x.sig == *sig) {
                out.push(m.remove(i));
            }
            if m.len() >= KEEP {
                out.extend(m.drain(KEEP - 1..));
            }
            m.insert(0, memo);
            out
        });
        drop(dropped);
        // After the dropped entries cleared it.
        if let Some(key) = flat {
            let hit = Hit {
                engine: self.id,
                key,
                entry: k.exact_entry(),
            };
            FAST.with(|f| f.hit.set(hit));
        }
    }

    /// Adds this thread's pending memo hits of this engine to its count.
    pub(super) fn flush_memo_hits(&self) {
        MEMO.with(|m| {
            if let Some(memo) = m.borrow().first()
                && memo.engine == self.id
            {
                memo.flush();
            }
        });
    }

    /// Forgets this thread's memo of this engine.
    pub(super) fn forget_memo(&self) {
        let dropped: Vec<Memo> = MEMO.with(|m| {
            let mut m = m.borrow_mut();
            if m.first().is_some_and(|memo| memo.engine == self.id) {
                m.drain(..).collect()
            } else {
                Vec::new()
            }
        });
        drop(dropped);
    }

    /// Forgets this thread's memo of `sig` of this engine (the cache just evicted it): the
    /// evicting thread holds no evicted kernel. Other threads' memos still hold theirs, at most
    /// [`KEEP`] each, until they replace them.
    pub(super) fn forget_memo_of(&self, sig: &Signature) {
        let dropped: Option<Memo> = MEMO.with(|m| {
            let mut m = m.borrow_mut();
            let i = m
                .iter()
                .position(|x| x.engine == self.id && x.sig == *sig)?;
            Some(m.remove(i))
        });
        // After the borrow ends; its drop clears `FAST`.
        drop(dropped);
    }

    /// Runs `sig` with this thread's remembered exact kernel of `sig` of this engine, if there
    /// is one. Returns false when there is no such kernel.
    pub(super) fn run_memo(&self, sig: &Signature, p: Ptrs, outer: usize) -> bool {
        MEMO.with(|m| {
            let m = m.borrow();
            match m.iter().find(|x| x.engine == self.id && x.sig == *sig) {
                Some(memo) => {
                    memo.hit();
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

    /// [`Engine::run_memo`] for a flat call of `key`, without planning: the memo knows whether
    /// its signature is that call's plan. The caller validated each operand's buffer for its
    /// part of `key`: `n` contiguous elements, or one.
    #[inline]
    pub(super) fn run_memo_flat(&self, key: FlatKey, p: Ptrs, out_bytes: usize) -> bool {
        let n = key.n;
        if self.splits(out_bytes, n) {
            return false;
        }
        let fast = FAST.with(|f| {
            let h = f.hit.get();
            match h.entry {
                Some(entry) if h.engine == self.id && h.key == key => {
                    count_hit(f, &self.memo_hits);
                    // SAFETY: `entry` is the exact kernel of the signature of `key` that this
                    // thread's memo holds (set with it, cleared before the memo drops it), so
                    // its code is alive; the caller validated each buffer for its part of
                    // `key` (n contiguous elements, or one), the layout that signature was
                    // planned from; the range is its whole (only) dimension; exact kernels read
                    // no dims or strides.
                    unsafe {
                        entry(
                            p.cond,
                            p.then,
                            p.else_,
                            p.out,
                            0,
                            n,
                            std::ptr::null(),
                            std::ptr::null(),
                            p.rhs,
                        )
                    };
                    true
                }
                _ => false,
            }
        });
        if fast {
            return true;
        }
        MEMO.with(|m| {
            let m = m.borrow();
            match m
                .iter()
                .find(|x| x.engine == self.id && x.flat == Some(key))
            {
                Some(memo) => {
                    memo.hit();
                    // SAFETY: the caller validated each buffer for its part of `key`, which is
                    // exactly the layout `memo.sig` was planned from (one dim of `n`); the range
                    // is that whole dimension.
                    unsafe { memo.kernel.run(&memo.sig, p, 0, n) };
                    // The next call of this key takes the fast path: the entry's `Arc` keeps
                    // the code alive, and dropping any entry clears `FAST` first.
                    let hit = Hit {
                        engine: self.id,
                        key,
                        entry: memo.kernel.exact_entry(),
                    };
                    FAST.with(|f| f.hit.set(hit));
                    true
                }
                None => false,
            }
        })
    }
}

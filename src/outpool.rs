//! A bounded pool of freed output buffers, so that a program allocating a large output per call
//! gets memory whose pages are already mapped instead of fresh pages the kernel must fault in
//! and zero (the C allocator hands large blocks back to the kernel when they are freed).
//!
//! Buffers of at least [`OutputPool::MIN_POOLED_BYTES`] are rounded up to a size class (at most
//! 12.5% larger than asked) and, when freed, kept for the next allocation of their class. The
//! pool holds at most its cap in bytes (oldest buffers are released first to make room) and
//! releases buffers unused for longer than its maximum age at its next operation. Smaller
//! buffers go straight to the allocator, which reuses small blocks by itself.
//!
//! Every buffer starts [`HEADER`] bytes into its block: the header records the block's size,
//! so that a buffer is always released with the layout it was allocated with, whatever size
//! the caller passes back. Buffers are [`OutputPool::ALIGN`]-byte aligned.
//!
//! The pool is shared through an `Arc`: a buffer outliving its engine keeps the pool alive and
//! is freed correctly from any thread. Once the engine is dropped the pool is closed: it holds
//! nothing and every allocation and free goes straight to the allocator.

use std::alloc::Layout;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Bytes before each buffer, holding its block's size (a multiple of the alignment, so that the
/// buffer stays aligned).
const HEADER: usize = 64;
/// Marks a header written by this pool (a debug check against foreign pointers).
const MAGIC: u64 = 0x5345_4c4a_4954_4f50; // "SELJITOP"

/// The pool's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Bytes held at most.
    pub(crate) cap: usize,
    /// Buffers unused for longer are released.
    pub(crate) max_age: Duration,
    /// Smaller buffers are not pooled.
    pub(crate) min_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cap: OutputPool::DEFAULT_CAP,
            max_age: OutputPool::DEFAULT_MAX_AGE,
            min_bytes: OutputPool::MIN_POOLED_BYTES,
        }
    }
}

/// A freed buffer the pool keeps: its block (header included) and when it was freed.
struct Block {
    base: NonNull<u8>,
    /// Bytes of the buffer (the header excluded): its size class.
    size: usize,
    since: Instant,
}

// SAFETY: a held block is memory the pool owns exclusively (its buffer was freed into the
// pool); it is only touched under the pool's lock, from whichever thread holds it.
unsafe impl Send for Block {}

#[derive(Default)]
struct State {
    /// Held buffers, oldest first.
    held: VecDeque<Block>,
    held_bytes: usize,
    live_bytes: usize,
    live_buffers: usize,
    hits: u64,
    misses: u64,
    direct: u64,
    released: u64,
    /// Set when the engine is dropped: nothing is held from then on.
    closed: bool,
}

/// Figures of an [`OutputPool`] ([`crate::Engine::output_pool_stats`]). More may be added;
/// [`OutputPoolStats::fields`] lists every one by name.
///
/// ```
/// let stats = selectjit::Engine::new().output_pool_stats();
/// assert_eq!((stats.held_bytes, stats.live_buffers), (0, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputPoolStats {
    /// Bytes the pool keeps at most (0 for an engine without a pool, or once it is closed).
    pub cap_bytes: usize,
    /// Bytes of freed buffers held for reuse now (at most `cap_bytes`).
    pub held_bytes: usize,
    /// Freed buffers held for reuse now.
    pub held_buffers: usize,
    /// Bytes handed out and not freed yet (each buffer counted at its size class).
    pub live_bytes: usize,
    /// Buffers handed out and not freed yet.
    pub live_buffers: usize,
    /// Allocations served by a held buffer.
    pub hits: u64,
    /// Allocations of a pooled size that found no held buffer of their class.
    pub misses: u64,
    /// Allocations that went straight to the allocator: below the pooled size, or after the
    /// pool was closed.
    pub direct: u64,
    /// Held buffers given back to the allocator: aged out, pushed out by the cap, or trimmed.
    pub released: u64,
}

impl OutputPoolStats {
    /// Every figure by name, in a fixed order (new ones are appended): what the bindings
    /// report.
    ///
    /// ```
    /// let stats = selectjit::Engine::new().output_pool_stats();
    /// assert!(stats.fields().contains(&("held_bytes", 0)));
    /// ```
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        let s = self;
        vec![
            ("cap_bytes", s.cap_bytes as u64),
            ("held_bytes", s.held_bytes as u64),
            ("held_buffers", s.held_buffers as u64),
            ("live_bytes", s.live_bytes as u64),
            ("live_buffers", s.live_buffers as u64),
            ("hits", s.hits),
            ("misses", s.misses),
            ("direct", s.direct),
            ("released", s.released),
        ]
    }
}

/// A bounded pool of freed output buffers, owned by an engine ([`crate::Engine::output_pool`])
/// and shared through an `Arc`. Thread-safe: a buffer may be freed on any thread, also after
/// the engine is gone (it then goes straight back to the allocator).
///
/// Most programs use it through [`crate::Engine::output_buffer`]; bindings that hand memory to
/// another runtime's allocator hooks use [`OutputPool::alloc`] and [`OutputPool::free`].
///
/// ```
/// use selectjit::{Engine, OutputPool};
/// let engine = Engine::new();
/// if let Some(pool) = engine.output_pool() {
///     let n = 4 << 20;
///     let p = pool.alloc(n).expect("memory");
///     assert_eq!(p.as_ptr() as usize % OutputPool::ALIGN, 0);
///     // SAFETY: `p` came from `pool.alloc(n)` and is freed once.
///     unsafe { pool.free(p, n) };
///     assert_eq!(pool.stats().held_buffers, 1); // kept for the next output of its size
///     let q = pool.alloc(n).expect("memory");
///     assert_eq!((q, pool.stats().hits), (p, 1));
///     // SAFETY: as above.
///     unsafe { pool.free(q, n) };
/// }
/// ```
pub struct OutputPool {
    limits: Limits,
    state: Mutex<State>,
}

impl std::fmt::Debug for OutputPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputPool")
            .field("limits", &self.limits)
            .field("stats", &self.stats())
            .finish()
    }
}

/// The size class of a pooled buffer of `size` bytes: `size` rounded up to the next multiple
/// of an eighth of the largest power of two not above it (at most 12.5% more).
fn size_class(size: usize) -> Option<usize> {
    if size <= 8 {
        return Some(size.max(1));
    }
    let top = 1usize << (usize::BITS - 1 - size.leading_zeros());
    size.checked_next_multiple_of(top / 8)
}

/// Asks Linux to back the whole 2 MiB extents of a new block with transparent huge pages
/// (`madvise(MADV_HUGEPAGE)`, as numpy does for its own large buffers): where the system's
/// setting is `madvise`, a block without it gets 4 KiB pages, and the kernels writing it miss
/// the TLB far more often than into numpy's own arrays. Advice only: a failure is ignored.
fn huge_pages(base: NonNull<u8>, len: usize) {
    #[cfg(all(
        target_os = "linux",
        any(
            target_arch = "x86_64",
            target_arch = "aarch64",
            target_arch = "riscv64",
            target_arch = "s390x"
        ),
        not(miri)
    ))]
    {
        const MADV_HUGEPAGE: std::ffi::c_int = 14;
        const PAGE: usize = 4096;
        /// Blocks from this size on (numpy's threshold for its own buffers).
        const HUGE_PAGES_MIN: usize = 4 << 20;
        unsafe extern "C" {
            fn madvise(
                addr: *mut std::ffi::c_void,
                len: usize,
                advice: std::ffi::c_int,
            ) -> std::ffi::c_int;
        }
        if len < HUGE_PAGES_MIN {
            return;
        }
        let start = (base.as_ptr() as usize).next_multiple_of(PAGE);
        let end = (base.as_ptr() as usize + len) & !(PAGE - 1);
        if end > start {
            // SAFETY: `[start, end)` is the page-aligned interior of memory the caller holds
            // exclusively (a block the pool just allocated, or `advise_huge_pages`'s
            // `&mut [u8]`); MADV_HUGEPAGE changes how the pages are backed, never their
            // contents or mapping, and a failure (an old kernel, no THP) only leaves it as it is.
            unsafe {
                madvise(
                    base.as_ptr().add(start - base.as_ptr() as usize).cast(),
                    end - start,
                    MADV_HUGEPAGE,
                )
            };
        }
    }
    // Elsewhere (and under Miri) there is nothing to ask.
    let _ = (base, len);
}

/// The layout of a block whose buffer has `size` bytes.
fn block_layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, OutputPool::ALIGN).ok()
}

impl OutputPool {
    /// Alignment of every buffer, in bytes (Arrow's recommendation: a cache line, and a whole
    /// AVX-512 register).
    pub const ALIGN: usize = 64;
    /// Default cap on the bytes a pool holds: 1 GiB ([`crate::EngineConfig::output_pool_cap`]).
    pub const DEFAULT_CAP: usize = 1 << 30;
    /// Default age after which an unused buffer is released: 2 s
    /// ([`crate::EngineConfig::output_pool_max_age`]).
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(2);
    /// Buffers smaller than this (1 MiB) are not pooled: the allocator reuses small blocks
    /// by itself.
    pub const MIN_POOLED_BYTES: usize = 1 << 20;

    /// A pool with these limits.
    pub(crate) fn with_limits(limits: Limits) -> OutputPool {
        OutputPool {
            limits,
            state: Mutex::new(State::default()),
        }
    }

    /// A closed pool: every allocation goes straight to the allocator (what
    /// [`crate::Engine::output_buffer`] uses on an engine without a pool).
    pub(crate) fn pass_through() -> &'static Arc<OutputPool> {
        static P: OnceLock<Arc<OutputPool>> = OnceLock::new();
        P.get_or_init(|| {
            let p = OutputPool::with_limits(Limits {
                cap: 0,
                ..Limits::default()
            });
            p.lock().closed = true;
            Arc::new(p)
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer of at least `size` bytes (uninitialised), [`OutputPool::ALIGN`]-aligned: a
    /// held buffer of its size class if there is one, else new memory. `None` if the
    /// allocator fails or the size is too large for a layout.
    ///
    /// ```
    /// use selectjit::Engine;
    /// let engine = Engine::new();
    /// let pool = engine.output_pool().expect("pools are on by default");
    /// let p = pool.alloc(100).expect("memory");
    /// assert_eq!(pool.stats().live_bytes, 100);
    /// // SAFETY: `p` came from `pool.alloc(100)`, is freed once and not used afterwards.
    /// unsafe { pool.free(p, 100) };
    /// assert_eq!(pool.stats().live_bytes, 0);
    /// assert!(pool.alloc(usize::MAX).is_none());
    /// ```
    pub fn alloc(&self, size: usize) -> Option<NonNull<u8>> {
        self.alloc_impl(size, false)
    }

    /// As [`OutputPool::alloc`], with the buffer's first `size` bytes zeroed (a held buffer is
    /// cleared; new memory comes zeroed from the allocator).
    ///
    /// ```
    /// use selectjit::Engine;
    /// let engine = Engine::new();
    /// let pool = engine.output_pool().expect("pools are on by default");
    /// let p = pool.alloc_zeroed(64).expect("memory");
    /// // SAFETY: the 64 bytes were allocated and zeroed just above.
    /// assert!(unsafe { std::slice::from_raw_parts(p.as_ptr(), 64) }.iter().all(|&b| b == 0));
    /// // SAFETY: `p` came from this pool's `alloc_zeroed(64)` and is freed once.
    /// unsafe { pool.free(p, 64) };
    /// ```
    pub fn alloc_zeroed(&self, size: usize) -> Option<NonNull<u8>> {
        self.alloc_impl(size, true)
    }

    fn alloc_impl(&self, size: usize, zeroed: bool) -> Option<NonNull<u8>> {
        let mut st = self.lock();
        let aged = self.take_aged(&mut st, Instant::now());
        let pooled = size >= self.limits.min_bytes && !st.closed;
        let sized = if pooled {
            size_class(size)
        } else {
            Some(size.max(1))
        };
        let Some((block_size, layout)) = sized.and_then(|b| Some((b, block_layout(b)?))) else {
            drop(st);
            Self::release_all(aged);
            return None; // too large for a layout
        };
        if pooled
            && let Some(i) = st.held.iter().rposition(|b| b.size == block_size)
            && let Some(b) = st.held.remove(i)
        {
            st.held_bytes -= b.size;
            st.hits += 1;
            st.live_bytes += b.size;
            st.live_buffers += 1;
            drop(st);
            Self::release_all(aged);
            // SAFETY: `b.base` is a block of `HEADER + b.size` bytes that the pool owned (just
            // taken out of `held`); the buffer starts `HEADER` bytes in, and `size <= b.size`.
            let buf = unsafe { b.base.add(HEADER) };
            if zeroed {
                // SAFETY: `buf` is valid for `b.size >= size` bytes (see above), owned by us.
                unsafe { buf.write_bytes(0, size) };
            }
            return Some(buf);
        }
        if pooled {
            st.misses += 1;
        } else {
            st.direct += 1;
        }
        st.live_bytes += block_size;
        st.live_buffers += 1;
        drop(st);
        Self::release_all(aged);
        // SAFETY: `layout` has a non-zero size (`HEADER` bytes at least).
        let base = NonNull::new(unsafe {
            if zeroed {
                std::alloc::alloc_zeroed(layout)
            } else {
                std::alloc::alloc(layout)
            }
        });
        let Some(base) = base else {
            let mut st = self.lock();
            st.live_bytes -= block_size;
            st.live_buffers -= 1;
            return None;
        };
        if pooled {
            huge_pages(base, layout.size());
        }
        // SAFETY: the block is `HEADER + block_size` bytes, aligned to `ALIGN` (>= 8), so the
        // two words of the header and the buffer `HEADER` bytes in are inside it.
        unsafe {
            base.cast::<u64>().write(MAGIC);
            base.cast::<usize>().add(1).write(block_size);
            Some(base.add(HEADER))
        }
    }

    /// Gives a buffer back: held for reuse if it is of a pooled size and fits under the cap
    /// (older held buffers are released to make room), released to the allocator otherwise.
    /// `size` is what was asked for; the buffer's header holds its real size.
    ///
    /// # Safety
    /// `ptr` must have been returned by [`OutputPool::alloc`] or [`OutputPool::alloc_zeroed`]
    /// of this pool (or of any pool: the header says how to release it), not freed since, and
    /// not be used afterwards.
    ///
    /// # Examples
    ///
    /// ```
    /// use selectjit::Engine;
    /// let engine = Engine::new();
    /// let pool = engine.output_pool().expect("pools are on by default").clone();
    /// let p = pool.alloc(8 << 20).expect("memory");
    /// drop(engine); // the pool is closed: the buffer is released, not held
    /// // SAFETY: `p` came from `pool.alloc` and is freed once.
    /// unsafe { pool.free(p, 8 << 20) };
    /// assert_eq!((pool.stats().held_bytes, pool.stats().live_bytes), (0, 0));
    /// ```
    pub unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: by the caller's contract `ptr` is `HEADER` bytes into a block this module
        // allocated, whose header it wrote.
        let (base, magic, block_size) = unsafe {
            let base = ptr.sub(HEADER);
            (
                base,
                base.cast::<u64>().read(),
                base.cast::<usize>().add(1).read(),
            )
        };
        debug_assert_eq!(magic, MAGIC, "a pointer this pool did not allocate");
        debug_assert!(
            size <= block_size,
            "freed with a larger size than allocated"
        );
        if magic != MAGIC {
            return; // not ours: leaked rather than released with a wrong layout
        }
        let mut st = self.lock();
        let now = Instant::now();
        let mut gone = self.take_aged(&mut st, now);
        st.live_bytes = st.live_bytes.saturating_sub(block_size);
        st.live_buffers = st.live_buffers.saturating_sub(1);
        let keep = !st.closed
            && block_size >= self.limits.min_bytes
            && block_size <= self.limits.cap
            && size_class(block_size) == Some(block_size);
        if keep {
            while st.held_bytes + block_size > self.limits.cap {
                let Some(old) = st.held.pop_front() else {
                    break;
                };
                st.held_bytes -= old.size;
                st.released += 1;
                gone.push(old);
            }
            st.held_bytes += block_size;
            st.held.push_back(Block {
                base,
                size: block_size,
                since: now,
            });
        } else {
            gone.push(Block {
                base,
                size: block_size,
                since: now,
            });
        }
        drop(st);
        Self::release_all(gone);
    }

    /// A buffer of `new_size` bytes holding the first bytes of `ptr`'s buffer (as many as both
    /// have), as C's `realloc`: a new buffer from the pool, the copy, and the old one freed.
    /// `None` if no memory could be had: `ptr` is then untouched and still the caller's.
    ///
    /// # Safety
    /// As for [`OutputPool::free`]: `ptr` came from a pool's `alloc`, is not freed yet, and is
    /// not used afterwards unless `None` is returned.
    ///
    /// # Examples
    ///
    /// ```
    /// use selectjit::Engine;
    /// let engine = Engine::new();
    /// let pool = engine.output_pool().expect("pools are on by default");
    /// let p = pool.alloc(3).expect("memory");
    /// // SAFETY: `p` holds 3 bytes; it is reallocated once and not used afterwards.
    /// let q = unsafe {
    ///     p.as_ptr().copy_from([1u8, 2, 3].as_ptr(), 3);
    ///     pool.realloc(p, 5 << 20).expect("memory")
    /// };
    /// // SAFETY: the first 3 bytes were copied from `p`.
    /// assert_eq!(unsafe { std::slice::from_raw_parts(q.as_ptr(), 3) }, [1, 2, 3]);
    /// // SAFETY: `q` came from `pool.realloc` and is freed once.
    /// unsafe { pool.free(q, 5 << 20) };
    /// ```
    pub unsafe fn realloc(&self, ptr: NonNull<u8>, new_size: usize) -> Option<NonNull<u8>> {
        // SAFETY: by the caller's contract `ptr` is `HEADER` bytes into a block this module
        // allocated, whose header holds the buffer's size.
        let old_size = unsafe { ptr.sub(HEADER).cast::<usize>().add(1).read() };
        let new = self.alloc(new_size)?;
        // SAFETY: both buffers are live, distinct (`new` was just allocated) and hold at least
        // `min(old_size, new_size)` bytes; the bytes are copied as they are, initialised or not.
        unsafe { new.copy_from_nonoverlapping(ptr, old_size.min(new_size)) };
        // SAFETY: the caller's contract on `ptr`, which is not used after this.
        unsafe { self.free(ptr, old_size) };
        Some(new)
    }

    /// Returns a block to the allocator.
    fn release(base: NonNull<u8>, size: usize) {
        let Some(layout) = block_layout(size) else {
            return; // unreachable: the block was allocated with this layout
        };
        // SAFETY: `base` was allocated by `alloc_impl` with `block_layout(size)` (the size read
        // from its header, or the size of a held block, which came from the header too), and
        // the pool no longer refers to it.
        unsafe { std::alloc::dealloc(base.as_ptr(), layout) };
    }

    /// Takes the held buffers freed more than the maximum age before `now` out of the pool,
    /// to be released once the lock is dropped (returning memory to the OS takes a while).
    fn take_aged(&self, st: &mut State, now: Instant) -> Vec<Block> {
        let mut aged = Vec::new();
        while let Some(b) = st.held.front() {
            if now.saturating_duration_since(b.since) <= self.limits.max_age {
                break;
            }
            let Some(b) = st.held.pop_front() else {
                break;
            };
            st.held_bytes -= b.size;
            st.released += 1;
            aged.push(b);
        }
        aged
    }

    /// Returns blocks the pool no longer refers to to the allocator.
    fn release_all(blocks: impl IntoIterator<Item = Block>) {
        for b in blocks {
            Self::release(b.base, b.size);
        }
    }

    /// Asks the OS to back the whole 2 MiB extents of `buf` with transparent huge pages, as
    /// the pool does for its own blocks of 4 MiB or more (Linux, where the system's setting is
    /// `madvise`; elsewhere, and for smaller buffers, nothing). For an output allocated
    /// elsewhere and not yet written (a runtime's fresh tensor): its first writes then fault in
    /// one page per 2 MiB instead of 512. Advice only: the contents stay as they are, and a
    /// refusal is ignored.
    ///
    /// ```
    /// use selectjit::OutputPool;
    /// let mut out = vec![0u8; 8 << 20];
    /// OutputPool::advise_huge_pages(&mut out);
    /// assert!(out.iter().all(|&b| b == 0));
    /// ```
    pub fn advise_huge_pages(buf: &mut [u8]) {
        if let Some(base) = NonNull::new(buf.as_mut_ptr()) {
            huge_pages(base, buf.len());
        }
    }

    /// Releases every held buffer to the allocator (buffers in use are not affected).
    ///
    /// ```
    /// use selectjit::Engine;
    /// let engine = Engine::new();
    /// let pool = engine.output_pool().expect("pools are on by default");
    /// let p = pool.alloc(4 << 20).expect("memory");
    /// // SAFETY: `p` came from `pool.alloc` and is freed once.
    /// unsafe { pool.free(p, 4 << 20) };
    /// assert!(pool.stats().held_bytes >= 4 << 20);
    /// pool.trim();
    /// assert_eq!(pool.stats().held_bytes, 0);
    /// ```
    pub fn trim(&self) {
        let mut st = self.lock();
        let held = std::mem::take(&mut st.held);
        st.held_bytes = 0;
        st.released += held.len() as u64;
        drop(st);
        Self::release_all(held);
    }

    /// Trims the pool and closes it: from now on every buffer goes straight to and from the
    /// allocator (called when the engine is dropped).
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.trim();
    }

    /// The pool's figures now (buffers past the maximum age are released first).
    ///
    /// ```
    /// let engine = selectjit::Engine::new();
    /// let pool = engine.output_pool().expect("pools are on by default");
    /// assert_eq!(pool.stats().cap_bytes, selectjit::OutputPool::DEFAULT_CAP);
    /// ```
    pub fn stats(&self) -> OutputPoolStats {
        let mut st = self.lock();
        let aged = self.take_aged(&mut st, Instant::now());
        let stats = OutputPoolStats {
            cap_bytes: if st.closed { 0 } else { self.limits.cap },
            held_bytes: st.held_bytes,
            held_buffers: st.held.len(),
            live_bytes: st.live_bytes,
            live_buffers: st.live_buffers,
            hits: st.hits,
            misses: st.misses,
            direct: st.direct,
            released: st.released,
        };
        drop(st);
        Self::release_all(aged);
        stats
    }
}

impl Drop for OutputPool {
    fn drop(&mut self) {
        self.trim();
    }
}

/// A zeroed output buffer of `len` elements from an engine's [`OutputPool`]
/// ([`crate::Engine::output_buffer`]): a slice of `T` that goes back to the pool when dropped
/// (on any thread, also after the engine is gone).
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::{Broadcast, Cond, Engine, TensorMut, TensorRef};
/// let engine = Engine::new();
/// let x = vec![-1.0f32, 2.0, -3.0, 4.0];
/// let mut out = engine.output_buffer::<f32>(x.len())?;
/// let xv = TensorRef::new(&x, &[4]);
/// engine.select(Cond::gt(xv, 0.0f32), xv, TensorRef::scalar(&[0.0f32]),
///               TensorMut::new(&mut out, &[4]), Broadcast::Numpy)?;
/// assert_eq!(&out[..], [0.0, 2.0, 0.0, 4.0]);
/// # Ok(())
/// # }
/// ```
pub struct PooledBuf<T: crate::dtype::Element> {
    ptr: NonNull<T>,
    len: usize,
    pool: Arc<OutputPool>,
    _owns: PhantomData<T>,
}

// SAFETY: the buffer is owned memory of `Send + Sync` elements (`Element` requires both), and
// the pool it returns to is `Sync`: moving or sharing the handle is as for a `Vec<T>`.
unsafe impl<T: crate::dtype::Element> Send for PooledBuf<T> {}
// SAFETY: as above: `&PooledBuf` only gives `&[T]`.
unsafe impl<T: crate::dtype::Element> Sync for PooledBuf<T> {}

impl<T: crate::dtype::Element> PooledBuf<T> {
    /// `len` zeroed elements from `pool`.
    pub(crate) fn new(pool: &Arc<OutputPool>, len: usize) -> crate::error::Result<PooledBuf<T>> {
        let too_large = || {
            crate::error::Error::Invalid(format!(
                "an output buffer of {len} elements of {} bytes could not be allocated",
                size_of::<T>()
            ))
        };
        let bytes = len.checked_mul(size_of::<T>()).ok_or_else(too_large)?;
        let ptr = pool.alloc_zeroed(bytes).ok_or_else(too_large)?;
        Ok(PooledBuf {
            ptr: ptr.cast(),
            len,
            pool: pool.clone(),
            _owns: PhantomData,
        })
    }

    /// The buffer's size in bytes.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// let buf = selectjit::Engine::new().output_buffer::<u16>(5)?;
    /// assert_eq!((buf.len(), buf.byte_len()), (5, 10));
    /// # Ok(())
    /// # }
    /// ```
    pub fn byte_len(&self) -> usize {
        self.len * size_of::<T>()
    }
}

impl<T: crate::dtype::Element> std::ops::Deref for PooledBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` is an `ALIGN`-aligned (so `T`-aligned: no element type is wider)
        // buffer of `len * size_of::<T>()` bytes, zeroed when it was allocated (a valid `T`:
        // `Element` is `Pod`) and owned by this handle until it drops.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: crate::dtype::Element> std::ops::DerefMut for PooledBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`; `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: crate::dtype::Element> std::fmt::Debug for PooledBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledBuf")
            .field("len", &self.len)
            .field("elem_bytes", &size_of::<T>())
            .finish()
    }
}

impl<T: crate::dtype::Element> Drop for PooledBuf<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `self.pool.alloc_zeroed(self.byte_len())` and is freed only
        // here, once; no slice of it outlives `self`.
        unsafe { self.pool.free(self.ptr.cast(), self.byte_len()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(cap: usize, max_age: Duration, min_bytes: usize) -> OutputPool {
        OutputPool::with_limits(Limits {
            cap,
            max_age,
            min_bytes,
        })
    }

    /// Writes `n` bytes of a pattern into a buffer and reads them back.
    fn touch(p: NonNull<u8>, n: usize, seed: u8) {
        // SAFETY: the callers pass a live buffer of at least `n` bytes that only they use.
        let s = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), n) };
        for (i, b) in s.iter_mut().enumerate() {
            *b = seed.wrapping_add(i as u8);
        }
        assert!(
            s.iter()
                .enumerate()
                .all(|(i, &b)| b == seed.wrapping_add(i as u8))
        );
    }

    #[test]
    fn size_classes_waste_at_most_an_eighth() {
        let mut last = 0;
        for size in (1..5000).chain([1 << 20, (1 << 20) + 1, 3 << 20, 16 << 20, 56 << 20]) {
            let c = size_class(size).unwrap();
            assert!(c >= size && (c - size) * 8 <= size, "{size} -> {c}");
            assert!(c >= last, "classes grow with sizes");
            assert_eq!(size_class(c), Some(c), "a class is its own class");
            last = c;
        }
        assert_eq!(size_class(0), Some(1));
        assert_eq!(size_class(usize::MAX), None);
    }

    #[test]
    fn reuses_buffers_of_a_class_and_stays_under_the_cap() {
        let cap = 4096;
        let p = pool(cap, Duration::from_secs(3600), 64);
        let mut live = Vec::new();
        for (i, size) in [64usize, 100, 300, 700, 1000, 2000, 5000, 90, 64, 3000]
            .into_iter()
            .cycle()
            .take(60)
            .enumerate()
        {
            let b = p.alloc(size).unwrap();
            assert_eq!(b.as_ptr() as usize % OutputPool::ALIGN, 0);
            touch(b, size, i as u8);
            live.push((b, size));
            if i % 3 != 0 {
                let (b, size) = live.remove(i % live.len());
                // SAFETY: `b` came from `p.alloc(size)` and is freed once.
                unsafe { p.free(b, size) };
            }
            let s = p.stats();
            assert!(s.held_bytes <= cap, "{s:?}");
            assert_eq!(s.live_buffers, live.len());
        }
        for (b, size) in live.drain(..) {
            // SAFETY: as above.
            unsafe { p.free(b, size) };
        }
        let s = p.stats();
        assert!(s.hits > 0 && s.misses > 0 && s.held_bytes <= cap, "{s:?}");
        assert_eq!((s.live_buffers, s.live_bytes), (0, 0));
        // A buffer of a held class is the held one.
        let a = p.alloc(1000).unwrap();
        // SAFETY: as above.
        unsafe { p.free(a, 1000) };
        let hits = p.stats().hits;
        let b = p.alloc(1000).unwrap();
        assert_eq!((a, p.stats().hits), (b, hits + 1));
        // SAFETY: as above.
        unsafe { p.free(b, 1000) };
        p.trim();
        assert_eq!((p.stats().held_bytes, p.stats().held_buffers), (0, 0));
    }

    #[test]
    fn buffers_larger_than_the_cap_or_small_are_not_held() {
        let p = pool(1024, Duration::from_secs(3600), 256);
        for size in [8, 255, 2048] {
            let b = p.alloc(size).unwrap();
            // SAFETY: `b` came from `p.alloc(size)` and is freed once.
            unsafe { p.free(b, size) };
        }
        let s = p.stats();
        assert_eq!((s.held_buffers, s.direct, s.misses), (0, 2, 1), "{s:?}");
    }

    #[test]
    fn zeroed_buffers_are_zero_also_when_reused() {
        let p = pool(1 << 16, Duration::from_secs(3600), 64);
        let a = p.alloc(500).unwrap();
        touch(a, 500, 7);
        // SAFETY: `a` came from `p.alloc(500)` and is freed once.
        unsafe { p.free(a, 500) };
        let b = p.alloc_zeroed(500).unwrap();
        assert_eq!(p.stats().hits, 1);
        // SAFETY: 500 bytes were allocated and zeroed.
        let zeroed = unsafe { std::slice::from_raw_parts(b.as_ptr(), 500) };
        assert!(zeroed.iter().all(|&x| x == 0));
        // SAFETY: `b` came from `p.alloc_zeroed(500)` and is freed once.
        unsafe { p.free(b, 500) };
    }

    #[test]
    fn aged_buffers_are_released() {
        let p = pool(1 << 16, Duration::from_millis(200), 64);
        let a = p.alloc(1000).unwrap();
        // SAFETY: `a` came from `p.alloc(1000)` and is freed once.
        unsafe { p.free(a, 1000) };
        assert_eq!(p.stats().held_buffers, 1);
        std::thread::sleep(Duration::from_millis(400));
        let s = p.stats();
        assert_eq!(
            (s.held_buffers, s.held_bytes, s.released),
            (0, 0, 1),
            "{s:?}"
        );
    }

    #[test]
    fn closed_pools_hold_nothing_and_buffers_outlive_them_across_threads() {
        let p = Arc::new(pool(1 << 16, Duration::from_secs(3600), 64));
        let bufs: Vec<_> = (0..4)
            .map(|i| (p.alloc(256 * (i + 1)).unwrap(), 256 * (i + 1)))
            .collect();
        let held = p.alloc(512).unwrap();
        // SAFETY: `held` came from `p.alloc(512)` and is freed once.
        unsafe { p.free(held, 512) };
        p.close();
        assert_eq!(p.stats().held_bytes, 0);
        /// A buffer handed to another thread.
        struct Owned(NonNull<u8>, usize);
        // SAFETY: each buffer is used by one thread at a time: moved, not shared.
        unsafe impl Send for Owned {}
        let owned: Vec<Owned> = bufs.into_iter().map(|(b, n)| Owned(b, n)).collect();
        let q = p.clone();
        std::thread::spawn(move || {
            for (i, Owned(b, n)) in owned.into_iter().enumerate() {
                touch(b, n, i as u8);
                // SAFETY: each buffer came from `q.alloc(n)`, was not freed, and is freed once.
                unsafe { q.free(b, n) };
            }
        })
        .join()
        .unwrap();
        let s = p.stats();
        assert_eq!(
            (s.held_buffers, s.live_buffers, s.live_bytes),
            (0, 0, 0),
            "{s:?}"
        );
        // After closing, allocations are direct.
        let c = p.alloc(4096).unwrap();
        // SAFETY: as above.
        unsafe { p.free(c, 4096) };
        assert_eq!((p.stats().held_buffers, p.stats().direct), (0, 1));
    }

    #[test]
    fn realloc_keeps_the_bytes_both_sizes_have() {
        let p = pool(1 << 16, Duration::from_secs(3600), 64);
        let a = p.alloc(100).unwrap();
        touch(a, 100, 3);
        // SAFETY: `a` came from `p.alloc(100)` and is not used after the realloc.
        let b = unsafe { p.realloc(a, 1000) }.unwrap();
        // SAFETY: `b` holds 1000 bytes, the first 100 copied from `a`.
        let grown = unsafe { std::slice::from_raw_parts(b.as_ptr(), 100) };
        assert!(
            grown
                .iter()
                .enumerate()
                .all(|(i, &v)| v == 3u8.wrapping_add(i as u8))
        );
        // SAFETY: as above for `b`.
        let c = unsafe { p.realloc(b, 10) }.unwrap();
        // SAFETY: `c` holds 10 bytes copied from `b`.
        let shrunk = unsafe { std::slice::from_raw_parts(c.as_ptr(), 10) };
        assert!(
            shrunk
                .iter()
                .enumerate()
                .all(|(i, &v)| v == 3u8.wrapping_add(i as u8))
        );
        // SAFETY: `c` came from `p.realloc` and is freed once.
        unsafe { p.free(c, 10) };
        assert_eq!((p.stats().live_buffers, p.stats().live_bytes), (0, 0));
    }
}

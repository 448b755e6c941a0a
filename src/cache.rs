//! LRU cache of compiled kernels keyed on [`Signature`].
//!
//! Values are `Arc<Kernel>`: eviction drops the cache's reference, and the kernel's code memory is
//! freed once no caller holds it any more. A signature whose compilation failed is remembered as
//! such, so that it is not compiled again on every call (the engine serves it with the static
//! kernels).

use std::num::NonZeroUsize;
use std::sync::Arc;

use lru::LruCache;
use rustc_hash::FxBuildHasher;

use crate::jit::Kernel;
use crate::plan::Signature;

/// Default number of kernels kept.
pub const DEFAULT_CAPACITY: usize = 1024;

/// The environment variable that overrides the default capacity.
pub const CAPACITY_ENV: &str = "SELECTJIT_CACHE_CAPACITY";

/// Capacity from `SELECTJIT_CACHE_CAPACITY`, or the default when unset or not a positive integer.
pub fn capacity_from_env() -> usize {
    std::env::var(CAPACITY_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_CAPACITY)
}

/// Counters of a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub capacity: usize,
    /// Entries held now.
    pub len: usize,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    /// Successful compilations and their total time.
    pub compiles: u64,
    pub compile_us: u64,
    /// Compilations that failed (served by the static kernels).
    pub compile_failures: u64,
}

/// A cached outcome: a kernel, or `None` when code generation failed for that signature.
pub(crate) type Slot = Option<Arc<Kernel>>;

pub(crate) struct KernelCache {
    lru: LruCache<Signature, Slot, FxBuildHasher>,
    stats: CacheStats,
}

impl KernelCache {
    pub(crate) fn new(capacity: usize) -> Self {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        KernelCache {
            lru: LruCache::with_hasher(cap, FxBuildHasher),
            stats: CacheStats {
                capacity: cap.get(),
                ..CacheStats::default()
            },
        }
    }

    /// Looks `sig` up, counting a hit or a miss. Does not allocate.
    pub(crate) fn get(&mut self, sig: &Signature) -> Option<Slot> {
        match self.lru.get(sig) {
            Some(s) => {
                self.stats.hits += 1;
                Some(s.clone())
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Inserts a compilation outcome. If another thread inserted the same signature meanwhile,
    /// its entry is kept and returned, so all callers share one kernel.
    /// Also returns the signature this insertion evicted, if any.
    pub(crate) fn insert(
        &mut self,
        sig: Signature,
        slot: Slot,
        compile_us: u64,
    ) -> (Slot, Option<Signature>) {
        match &slot {
            Some(_) => {
                self.stats.compiles += 1;
                self.stats.compile_us += compile_us;
            }
            None => self.stats.compile_failures += 1,
        }
        if let Some(existing) = self.lru.peek(&sig) {
            return (existing.clone(), None);
        }
        // `push` returns the evicted entry (a replaced equal key cannot happen: peeked above).
        let evicted = self.lru.push(sig, slot.clone()).map(|(old, _)| old);
        if evicted.is_some() {
            self.stats.evictions += 1;
        }
        (slot, evicted)
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            len: self.lru.len(),
            ..self.stats
        }
    }

    pub(crate) fn clear(&mut self) {
        self.lru.clear();
    }
}

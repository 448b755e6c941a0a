//! LRU cache of compiled kernels keyed on [`Signature`].
//!
//! Values are `Arc<Kernel>`: eviction drops the cache's reference, and the kernel's code memory is
//! freed once no caller holds it any more. A signature whose compilation failed is remembered as
//! such, so that it is not compiled again on every call (the engine serves it with the static
//! kernels). A signature seen fewer times than the engine's `exact_after` is remembered with its
//! count and served by the shape-generic kernel of its pattern, kept in a second, small LRU.
//! Under the `Auto` tier a signature whose kernel class has not been measured yet holds a
//! tier trial (its kernel compiled as every candidate variant) until the trial commits to one;
//! the cache keeps every class's choice, so that later signatures of the class compile only it.
//!
//! A build without the `jit` feature compiles nothing, so its engines' caches stay empty: only
//! their counters are read.
use std::num::NonZeroUsize;
use std::sync::Arc;

use lru::LruCache;
use rustc_hash::FxBuildHasher;

use crate::kernel::Kernel;
use crate::plan::{Pattern, Signature};
use crate::tier::{KernelClass, TierChoice, Variant};
use crate::trial::TierTrial;

/// Default number of kernels kept.
pub(crate) const DEFAULT_CAPACITY: usize = 1024;

/// An engine's counters ([`crate::Engine::stats`]). More may be added in later releases; the
/// C and Python bindings list every one by [`CacheStats::fields`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Signatures the cache keeps at most.
    pub capacity: usize,
    /// Signatures held now (with an exact kernel, or still counted towards one).
    pub len: usize,
    /// Calls that found their exact kernel (or a recorded compile failure).
    pub hits: u64,
    /// Calls whose signature was not in the cache.
    pub misses: u64,
    /// Calls served by a shape-generic kernel while their signature was not yet hot.
    pub generic_runs: u64,
    /// Signatures evicted (least recently used first).
    pub evictions: u64,
    /// Exact-kernel compilations.
    pub compiles: u64,
    /// Total time of the exact-kernel compilations, in microseconds.
    pub compile_us: u64,
    /// Shape-generic kernel compilations (one per pattern).
    pub generic_compiles: u64,
    /// Total time of the shape-generic compilations, in microseconds.
    pub generic_compile_us: u64,
    /// Compilations that failed (served by the static kernels).
    pub compile_failures: u64,
    /// Shape-generic kernels held now.
    pub generic_len: usize,
    /// Calls run by an exact kernel of the engine's AOT table ([`crate::aot`]).
    pub aot_exact_runs: u64,
    /// Calls run by a shape-generic kernel of the engine's AOT table.
    pub aot_generic_runs: u64,
    /// Calls run by the static kernels (no kernel for them, or code generation failed).
    pub static_runs: u64,
    /// Calls whose predicate no kernel fuses, run in blocks by the static kernels (a mask per
    /// block, then its select); counted in `static_runs` too.
    pub blocked_runs: u64,
    /// Exact kernels in the engine's AOT table (0 without one).
    pub aot_exact_kernels: usize,
    /// Shape-generic kernels in the engine's AOT table (0 without one).
    pub aot_generic_kernels: usize,
    /// Kernel classes whose variant (tier, store kind) `Auto` chose by measuring
    /// ([`crate::Engine::tier_choices`]).
    pub tier_trials: u64,
    /// Calls timed for those choices (three runs of four per candidate variant and class).
    pub trial_calls: u64,
    /// What measuring cost: the time those calls took beyond what the chosen variant would
    /// have taken, in nanoseconds.
    pub trial_excess_ns: u64,
    /// Compilations of candidate variants beyond the one kept, and their time in
    /// microseconds.
    pub trial_compiles: u64,
    /// See [`CacheStats::trial_compiles`].
    pub trial_compile_us: u64,
    /// N-way calls run by a single-pass n-way kernel ([`crate::Engine::select_n`]); the
    /// others ran in tiles of two-way calls. A thread adds its runs to the count 64 at a time,
    /// and when it ends or asks for stats: another thread's latest runs may not be in it yet.
    pub nway_pass_runs: u64,
    /// Single-pass n-way kernels compiled, and their time in microseconds.
    pub nway_compiles: u64,
    /// See [`CacheStats::nway_compiles`].
    pub nway_compile_us: u64,
}

impl CacheStats {
    /// Every counter by name, in a fixed order (new counters are appended): what the C and
    /// Python bindings report, so that they cannot drift from this struct.
    ///
    /// ```
    /// let stats = selectjit::Engine::new().stats();
    /// let fields = stats.fields();
    /// assert_eq!(fields[0], ("capacity", 1024));
    /// assert!(fields.iter().any(|&(name, _)| name == "compiles"));
    /// ```
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        let s = self;
        vec![
            ("capacity", s.capacity as u64),
            ("len", s.len as u64),
            ("hits", s.hits),
            ("misses", s.misses),
            ("generic_runs", s.generic_runs),
            ("evictions", s.evictions),
            ("compiles", s.compiles),
            ("compile_us", s.compile_us),
            ("generic_compiles", s.generic_compiles),
            ("generic_compile_us", s.generic_compile_us),
            ("compile_failures", s.compile_failures),
            ("generic_len", s.generic_len as u64),
            ("aot_exact_runs", s.aot_exact_runs),
            ("aot_generic_runs", s.aot_generic_runs),
            ("static_runs", s.static_runs),
            ("aot_exact_kernels", s.aot_exact_kernels as u64),
            ("aot_generic_kernels", s.aot_generic_kernels as u64),
            ("tier_trials", s.tier_trials),
            ("trial_calls", s.trial_calls),
            ("trial_excess_ns", s.trial_excess_ns),
            ("trial_compiles", s.trial_compiles),
            ("trial_compile_us", s.trial_compile_us),
            ("blocked_runs", s.blocked_runs),
            ("nway_pass_runs", s.nway_pass_runs),
            ("nway_compiles", s.nway_compiles),
            ("nway_compile_us", s.nway_compile_us),
        ]
    }
}

/// What the cache holds for a signature.
#[derive(Clone)]
pub(crate) enum Entry {
    /// The exact kernel.
    Kernel(Arc<Kernel>),
    /// The exact kernel of every candidate variant, being measured.
    Trial(Arc<TierTrial>),
    /// Code generation failed for it: the static kernels serve it.
    Failed,
    /// Seen this many times, run by the generic kernel of its pattern so far.
    Seen(u32),
}

/// What a lookup tells the engine to do.
pub(crate) enum Lookup {
    Exact(Arc<Kernel>),
    Trial(Arc<TierTrial>),
    Failed,
    /// Compile the exact kernel now.
    Compile,
    /// Run the shape-generic kernel of the signature's pattern.
    Generic,
}

pub(crate) struct KernelCache {
    lru: LruCache<Signature, Entry, FxBuildHasher>,
    generic: LruCache<Pattern, Arc<Kernel>, FxBuildHasher>,
    /// The measured choice of each kernel class.
    choices: LruCache<KernelClass, TierChoice, FxBuildHasher>,
    /// Classes whose choice came from a wisdom file, not from a trial of this engine.
    loaded: rustc_hash::FxHashSet<KernelClass>,
    stats: CacheStats,
}

/// Kernel classes whose choice is kept (a class is a pattern and a size; few are in use).
const CHOICE_CAPACITY: usize = 1024;

/// Generic kernels kept (one per pattern; patterns are few).
const GENERIC_CAPACITY: usize = 64;

impl KernelCache {
    pub(crate) fn new(capacity: usize) -> Self {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        let gcap = NonZeroUsize::new(GENERIC_CAPACITY).unwrap_or(NonZeroUsize::MIN);
        let ccap = NonZeroUsize::new(CHOICE_CAPACITY).unwrap_or(NonZeroUsize::MIN);
        KernelCache {
            lru: LruCache::with_hasher(cap, FxBuildHasher),
            generic: LruCache::with_hasher(gcap, FxBuildHasher),
            choices: LruCache::with_hasher(ccap, FxBuildHasher),
            loaded: Default::default(),
            stats: CacheStats {
                capacity: cap.get(),
                ..CacheStats::default()
            },
        }
    }

    /// Looks `sig` up and counts the call. The exact kernel is compiled once the signature has
    /// been seen `exact_after` times (at once when `exact_after <= 1`); before that the generic
    /// kernel runs. Does not allocate when the signature is present.
    pub(crate) fn lookup(
        &mut self,
        sig: &Signature,
        exact_after: u32,
    ) -> (Lookup, Option<Signature>) {
        match self.lru.get_mut(sig) {
            Some(Entry::Kernel(k)) => {
                self.stats.hits += 1;
                (Lookup::Exact(k.clone()), None)
            }
            Some(Entry::Trial(t)) => {
                self.stats.hits += 1;
                (Lookup::Trial(t.clone()), None)
            }
            Some(Entry::Failed) => {
                self.stats.hits += 1;
                (Lookup::Failed, None)
            }
            Some(Entry::Seen(n)) => {
                *n += 1;
                if *n >= exact_after {
                    (Lookup::Compile, None)
                } else {
                    self.stats.generic_runs += 1;
                    (Lookup::Generic, None)
                }
            }
            None => {
                self.stats.misses += 1;
                if exact_after <= 1 {
                    return (Lookup::Compile, None);
                }
                self.stats.generic_runs += 1;
                let evicted = self.push(sig.clone(), Entry::Seen(1));
                (Lookup::Generic, evicted)
            }
        }
    }

    fn push(&mut self, sig: Signature, e: Entry) -> Option<Signature> {
        let evicted = match self.lru.push(sig, e) {
            // `push` returns the old entry of an equal key too: that is a replacement.
            Some((old, _)) if !self.lru.contains(&old) => Some(old),
            _ => None,
        };
        if evicted.is_some() {
            self.stats.evictions += 1;
        }
        evicted
    }

    /// Stores a compilation outcome (a kernel, a trial, or `None`: failed). If another thread
    /// stored a kernel or a trial for the same signature meanwhile, that one is kept and
    /// returned, so all callers share it. Also returns the signature this insertion evicted.
    pub(crate) fn insert(
        &mut self,
        sig: Signature,
        outcome: Option<Entry>,
        compile_us: u64,
    ) -> (Option<Entry>, Option<Signature>) {
        match &outcome {
            Some(_) => {
                self.stats.compiles += 1;
                self.stats.compile_us += compile_us;
            }
            None => self.stats.compile_failures += 1,
        }
        match self.lru.peek(&sig) {
            Some(e @ Entry::Kernel(_)) => return (Some(e.clone()), None),
            Some(e @ Entry::Trial(_)) => return (Some(e.clone()), None),
            _ => {}
        }
        let e = outcome.clone().unwrap_or(Entry::Failed);
        (outcome, self.push(sig, e))
    }

    /// Counts the compilations of the candidates a trial will not keep.
    pub(crate) fn count_trial_compiles(&mut self, n: u64, us: u64) {
        self.stats.trial_compiles += n;
        self.stats.trial_compile_us += us;
    }

    /// Commits a decided trial: `sig`'s entry becomes the winning kernel (unless it was evicted
    /// or replaced meanwhile) and the class's choice is kept. Returns the winner, and the
    /// choice when this call is the one that took it in (once per trial).
    pub(crate) fn commit(
        &mut self,
        sig: &Signature,
        t: &Arc<TierTrial>,
    ) -> Option<(Arc<Kernel>, Option<TierChoice>)> {
        let (winner, choice) = (t.winner()?.clone(), t.choice()?);
        if let Some(Entry::Trial(cur)) = self.lru.peek(sig)
            && Arc::ptr_eq(cur, t)
        {
            self.lru.put(sig.clone(), Entry::Kernel(winner.clone()));
        }
        if t.take_commit() {
            let (calls, excess) = t.cost();
            self.stats.tier_trials += 1;
            self.stats.trial_calls += calls;
            self.stats.trial_excess_ns += excess;
            self.loaded.remove(&choice.class);
            self.choices.put(choice.class, choice.clone());
            return Some((winner, Some(choice)));
        }
        Some((winner, None))
    }

    /// Keeps a choice loaded from a wisdom file (a trial of this engine replaces it).
    pub(crate) fn seed(&mut self, choice: TierChoice) {
        self.loaded.insert(choice.class);
        self.choices.put(choice.class, choice);
    }

    /// The variant chosen for `class`, if it was measured, and whether it was loaded from a
    /// wisdom file rather than measured by this engine.
    pub(crate) fn choice(&mut self, class: &KernelClass) -> Option<(Variant, bool)> {
        let v = self.choices.get(class).map(|c| c.chosen)?;
        Some((v, self.loaded.contains(class)))
    }

    /// Every measured choice kept, the most recently used first.
    pub(crate) fn choices(&self) -> Vec<TierChoice> {
        self.choices.iter().map(|(_, c)| c.clone()).collect()
    }

    /// The generic kernel of `p`, if compiled.
    pub(crate) fn generic(&mut self, p: &Pattern) -> Option<Arc<Kernel>> {
        self.generic.get(p).cloned()
    }

    /// Stores the generic kernel of `p` (keeping one stored meanwhile by another thread).
    pub(crate) fn insert_generic(
        &mut self,
        p: Pattern,
        k: Arc<Kernel>,
        compile_us: u64,
    ) -> Arc<Kernel> {
        self.stats.generic_compiles += 1;
        self.stats.generic_compile_us += compile_us;
        if let Some(existing) = self.generic.peek(&p) {
            return existing.clone();
        }
        self.generic.push(p, k.clone());
        k
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            len: self.lru.len(),
            generic_len: self.generic.len(),
            ..self.stats
        }
    }

    pub(crate) fn clear(&mut self) {
        self.lru.clear();
        self.generic.clear();
        self.choices.clear();
        self.loaded.clear();
    }
}

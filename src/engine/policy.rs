//! Which kernel runs a signature: the AOT table's exact kernel, else (with a code generator)
//! the cache's exact kernel of a hot signature — compiled on the call that makes it hot — or
//! the shape-generic kernel of its pattern; without a code generator, the AOT table's
//! shape-generic kernel; `None` leaves the call to the static kernels.
//!
//! Under the `Auto` tier the exact kernel of a signature whose kernel class has not been
//! measured is compiled as every candidate variant (AVX-512 and AVX2; ordinary and, for large
//! outputs, non-temporal stores, one-way and four-way; AVX-512 with zmm blocks for vector rows;
//! each in ~10 µs) and held as a tier trial: its calls run the candidates in turn, timed, until
//! the fastest is known; then the signature's entry becomes that kernel and the class
//! remembers the choice, so later signatures of the class compile only it and later calls pay
//! nothing for the choice.

use std::sync::Arc;

use super::{AOT_EXACT_RUNS, AOT_GENERIC_RUNS, Engine};
use crate::kernel::Kernel;
use crate::plan::{Pattern, Signature};

use crate::{
    cache::{Entry, Lookup},
    env,
    jit::CodeGen,
    tier::KernelClass,
    trial::TierTrial,
};

/// What runs a call of a signature.
#[derive(Debug, Clone)]
pub(crate) enum Pick {
    /// This kernel.
    Kernel(Arc<Kernel>),
    /// A tier trial: the next candidate, timed (or the one chosen).
    Trial(Arc<TierTrial>),
}

impl Pick {
    /// The kernel that runs calls now (a trial's chosen or fastest-so-far candidate).
    pub(crate) fn kernel(&self) -> &Arc<Kernel> {
        match self {
            Pick::Kernel(k) => k,
            Pick::Trial(t) => t.current(),
        }
    }
}

impl Engine {
    /// The kernel for `sig` under the engine's policy: the exact kernel of the AOT table when it
    /// has one; else, with a code generator, its exact kernel when the signature is hot
    /// (compiled on the call that makes it so), otherwise the shape-generic kernel of its
    /// pattern (the AOT table's when it has one); without a code generator, the AOT table's
    /// shape-generic kernel. `None` when there is none or code generation failed (recorded),
    /// so the caller runs the static kernels.
    /// Under `Auto`, while the signature's class is being measured, the candidate that runs
    /// its calls now. Counts as a sighting of `sig`, as a call would.
    ///
    /// ```
    /// use selectjit::{Engine, plan};
    /// let engine = Engine::new();
    /// let sig = plan::plan_contiguous(4, 4096).unwrap();
    /// if engine.codegen().is_some() {
    ///     let first = engine.kernel(&sig).unwrap();
    ///     assert!(first.is_generic()); // a new signature runs on its pattern's kernel
    ///     let hot = engine.kernel(&sig).unwrap(); // the second sighting compiles it
    ///     assert!(!hot.is_generic() && hot.signature() == &sig);
    /// }
    /// ```
    pub fn kernel(&self, sig: &Signature) -> Option<Arc<Kernel>> {
        self.pick(sig, self.config.exact_after)
            .map(|p| p.kernel().clone())
    }

    /// Whether some kernel runs `sig` in one pass: the code generator compiles it, or the AOT
    /// table has it (for predicates: otherwise the static kernels run them in blocks).
    pub(super) fn fuses(&self, sig: &Signature) -> bool {
        if let Ok(jit) = &self.jit
            && jit.covers(sig)
        {
            return true;
        }
        // A look, not a run: nothing counted.
        self.config
            .aot
            .as_ref()
            .is_some_and(|t| t.exact(sig).is_some() || t.generic(&Pattern::of(sig)).is_some())
    }

    pub(super) fn pick(&self, sig: &Signature, exact_after: u32) -> Option<Pick> {
        if let Some(k) = self.aot_kernel(sig, false) {
            return Some(Pick::Kernel(k));
        }
        if let Ok(jit) = &self.jit {
            let p = self
                .kernel_locked(jit, sig, exact_after)
                .or_else(|| self.aot_kernel(sig, true).map(Pick::Kernel))?;
            // Kernels of the AOT table are not memoised: their runs are counted as such.
            if let Pick::Kernel(k) = &p
                && !k.is_generic()
                && !k.is_linked()
            {
                self.memoise(sig, k);
            }
            return Some(p);
        }
        let _ = exact_after;
        self.aot_kernel(sig, true).map(Pick::Kernel)
    }

    /// The AOT table's exact kernel of `sig`, or (`generic`) its shape-generic kernel of `sig`'s
    /// pattern; counts the run.
    fn aot_kernel(&self, sig: &Signature, generic: bool) -> Option<Arc<Kernel>> {
        let t = self.config.aot.as_ref()?;
        let (k, which) = if generic {
            (t.generic(&Pattern::of(sig))?, AOT_GENERIC_RUNS)
        } else {
            (t.exact(sig)?, AOT_EXACT_RUNS)
        };
        self.runs[which].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(k.clone())
    }

    fn kernel_locked(&self, jit: &CodeGen, sig: &Signature, exact_after: u32) -> Option<Pick> {
        let (what, evicted) = self.lock_cache().lookup(sig, exact_after);
        if let Some(old) = evicted {
            env::log(|| format!("evict,{old}"));
            self.forget_memo_of(&old);
        }
        match what {
            Lookup::Exact(k) => Some(Pick::Kernel(k)),
            Lookup::Trial(t) => Some(self.settle(sig, t)),
            Lookup::Failed => None,
            Lookup::Generic => self.generic_kernel(jit, sig).map(Pick::Kernel),
            Lookup::Compile => self.compile_exact(jit, sig),
        }
    }

    /// Compiles `sig`'s exact kernel as each candidate variant (only the class's choice when
    /// it was measured) outside the cache lock, so that hits of other threads are not held up;
    /// one candidate becomes the kernel, several a trial.
    fn compile_exact(&self, jit: &CodeGen, sig: &Signature) -> Option<Pick> {
        let class = KernelClass::of(sig);
        let chosen = jit
            .is_auto()
            .then(|| self.lock_cache().choice(&class))
            .flatten();
        let (variants, prefer) = match chosen {
            Some((v, false)) => (vec![v], None),
            // A choice from the wisdom file is taken when it is one of this signature's
            // candidates (the file may have been written with other settings); otherwise the
            // signature is measured.
            Some((v, true)) => {
                let c = jit.candidates(sig);
                if c.variants.contains(&v) {
                    (vec![v], None)
                } else {
                    env::log(|| format!("wisdom,not-a-candidate,{v},{sig}"));
                    (c.variants, c.prefer)
                }
            }
            None => {
                let c = jit.candidates(sig);
                (c.variants, c.prefer)
            }
        };
        let t = std::time::Instant::now();
        let mut kernels = Vec::with_capacity(variants.len());
        for v in variants {
            match jit.compile_variant(v, sig) {
                Ok(k) => kernels.push((v, Arc::new(k))),
                Err(e) => {
                    env::log(|| format!("compile,failed,{v},{sig},{e}"));
                    self.record_codegen_error(e.in_context(sig));
                }
            }
        }
        let us = t.elapsed().as_micros() as u64;
        for (v, k) in &kernels {
            env::log(|| format!("compile,{v},{sig},{}B", k.code_bytes()));
        }
        let n = kernels.len() as u64;
        let outcome = match kernels.len() {
            0 => None,
            1 => kernels.pop().map(|(_, k)| Entry::Kernel(k)),
            _ => {
                let trial =
                    TierTrial::new(class, kernels, prefer, self.timer.clone(), sig.out_bytes());
                Some(Entry::Trial(Arc::new(trial)))
            }
        };
        let mut cache = self.lock_cache();
        if n > 1 {
            cache.count_trial_compiles(n - 1, us * (n - 1) / n);
        }
        let (e, evicted) = cache.insert(sig.clone(), outcome, us / n.max(1));
        drop(cache);
        if let Some(old) = evicted {
            env::log(|| format!("evict,{old}"));
            self.forget_memo_of(&old);
        }
        match e? {
            Entry::Kernel(k) => Some(Pick::Kernel(k)),
            Entry::Trial(t) => Some(self.settle(sig, t)),
            Entry::Failed | Entry::Seen(_) => None,
        }
    }

    /// A trial as it stands: its kernel once decided (committed to the cache), else the trial.
    fn settle(&self, sig: &Signature, t: Arc<TierTrial>) -> Pick {
        if t.winner().is_some()
            && let Some(k) = self.commit(sig, &t)
        {
            return Pick::Kernel(k);
        }
        Pick::Trial(t)
    }

    /// Takes a decided trial in: the signature's entry becomes the chosen kernel, its class
    /// keeps the choice (logged once, and merged into the wisdom file once).
    pub(super) fn commit(&self, sig: &Signature, t: &Arc<TierTrial>) -> Option<Arc<Kernel>> {
        let (k, taken) = self.lock_cache().commit(sig, t)?;
        if let Some(c) = taken {
            env::log(|| format!("choose,{c}"));
            self.learn(&c);
        }
        Some(k)
    }

    /// The shape-generic kernel for `sig`'s pattern, compiled on first use.
    fn generic_kernel(&self, jit: &CodeGen, sig: &Signature) -> Option<Arc<Kernel>> {
        if let Some(k) = self.aot_kernel(sig, true) {
            return Some(k);
        }
        let p = Pattern::of(sig);
        if let Some(k) = self.lock_cache().generic(&p) {
            return Some(k);
        }
        let t = std::time::Instant::now();
        match jit.compile_generic(&p) {
            Ok(k) => {
                let us = t.elapsed().as_micros() as u64;
                env::log(|| {
                    format!(
                        "compile,{}-generic,{p},{us}us,{}B",
                        k.tier(),
                        k.code_bytes()
                    )
                });
                Some(self.lock_cache().insert_generic(p, Arc::new(k), us))
            }
            Err(e) => {
                env::log(|| format!("compile,failed,{p},{e}"));
                self.record_codegen_error(e.in_context(p));
                None
            }
        }
    }
}

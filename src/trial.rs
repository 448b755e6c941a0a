//! A kernel class's measured choice of code ([`TierTrial`]): one signature compiled as every
//! candidate variant, its calls timed in turn by the engine's [`CallTimer`] (the learner is
//! [`crate::measure::Trial`]), the fastest kept.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::kernel::Kernel;
use crate::measure::{MAX_OPTIONS, Runs, Trial};
use crate::tier::Variant;
use crate::tier::{KernelClass, TierChoice};

/// Times one call of a kernel for the engine's measured choices (which variant — tier, store
/// kind — runs a kernel class, whether a kernel's calls are split across threads). The default
/// measures wall-clock time; tests inject one that makes the choices deterministic.
pub trait CallTimer: Send + Sync + std::fmt::Debug {
    /// Runs `call` — a call of a kernel of `variant`, split across threads or not — and
    /// returns the nanoseconds it counts for.
    fn time(&self, variant: Variant, split: bool, call: &mut dyn FnMut()) -> u64;
}

/// The default timer: wall-clock time.
pub(crate) fn wall_clock() -> Arc<dyn CallTimer> {
    Arc::new(WallClock)
}

/// How a tier trial probes each variant: three runs of four calls in a row, a run's time the
/// mean of its last two. The first calls of a variant run in the state the previous one left
/// the caches in: on a Zen 4 host, with 8 MiB of traffic in the L3, the first call of a kernel
/// with 256-bit stores after one with 512-bit stores ran at the latter's speed (66 µs) and
/// every call after it at its own (75-85 µs), while the 512-bit kernel took one to three calls
/// to recover from the other (80 µs, then 65 µs); and the 256-bit kernel's own calls spread
/// from 65 to 85 µs where the other's held at 65 µs. Pairs, the faster call counting, kept
/// the kernel that a caller's loop runs 1.15-1.3x slower than the best.
const TIER_RUNS: Runs = Runs {
    runs: 3,
    calls: 4,
    warm: 2,
    mean: true,
};

/// How much faster than the fastest variant with ordinary stores a variant with
/// non-temporal stores must be to be chosen, below [`NT_PREFER_MIN_BYTES`] of output: an
/// output stored non-temporally is no longer in the caches, a cost to whatever reads it next
/// that the select's own time does not show, and on a shared host the trial's times of an
/// output the size of the caches differ by more than the two store kinds do. From
/// [`NT_PREFER_MIN_BYTES`] the other way round: a variant with ordinary stores must be this
/// much faster than the fastest non-temporal one.
const NT_MARGIN: f64 = 0.05;

/// From this much output the non-temporal candidate is preferred. causal_from_positions_f16
/// (12 MiB out, 12 MiB in) ran at 1.02-1.10x its copy roofline in every bench run that kept a
/// non-temporal kernel and at 1.08-1.27x in every run that kept an ordinary one, which its
/// trials had ranked within 5% of the non-temporal one. Not at 8 MiB of output, where
/// non-temporal candidates start by default (a quarter of a 32 MiB L3): nan_to_zero_f64_1m
/// (8 MiB out, 8 MiB in) ran 1.39-1.54x a memcpy of its traffic with non-temporal stores in
/// every process, 1.00-1.07x with whole-line ordinary ones, and a trial in whose calls the
/// latter ran slow kept the former (1.43x its roofline); the 8 MiB selects of 25 MiB of
/// traffic (same_f64_1m, same_i64_1m) keep theirs on speed, 15-20% ahead in their trials.
const NT_PREFER_MIN_BYTES: usize = 12 << 20;

/// A kernel class's measured choice in progress: one signature compiled as every candidate
/// variant (the preferred one first), its calls timed in turn until the fastest is known.
pub(crate) struct TierTrial {
    class: KernelClass,
    kernels: Vec<(Variant, Arc<Kernel>)>,
    trial: Trial,
    /// The candidate kept unless another with ordinary stores beats it by the fraction.
    prefer: Option<(usize, f64)>,
    /// The size of the signature's output.
    out_bytes: usize,
    winner: OnceLock<usize>,
    timer: Arc<dyn CallTimer>,
    /// Total time of the probes.
    probe_ns: AtomicU64,
    /// Whether the engine has taken the choice in (its stats and its class table).
    committed: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for TierTrial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: Vec<Variant> = self.kernels.iter().map(|k| k.0).collect();
        write!(
            f,
            "TierTrial({}, {v:?}, {:?})",
            self.class,
            self.winner.get()
        )
    }
}

impl TierTrial {
    /// `kernels`: the candidates, the preferred one first. Those with ordinary stores are
    /// probed before those with non-temporal stores (see [`Trial::grouped`]), each group in
    /// the order given. `prefer`: a candidate with ordinary stores kept unless another is
    /// faster than it by the fraction given (what its generator reports). `out_bytes`: the
    /// size of the signature's output.
    pub(crate) fn new(
        class: KernelClass,
        mut kernels: Vec<(Variant, Arc<Kernel>)>,
        prefer: Option<(Variant, f64)>,
        timer: Arc<dyn CallTimer>,
        out_bytes: usize,
    ) -> TierTrial {
        assert!(
            kernels.len() <= MAX_OPTIONS,
            "{} candidate variants: more than a trial compares",
            kernels.len()
        );
        kernels.sort_by_key(|(v, _)| v.nt);
        let ordinary = kernels.iter().filter(|(v, _)| !v.nt).count();
        let prefer = prefer.and_then(|(p, margin)| {
            let at = kernels.iter().position(|(v, _)| *v == p && !v.nt)?;
            Some((at, margin))
        });
        TierTrial {
            class,
            prefer,
            trial: Trial::grouped(kernels.len(), ordinary, TIER_RUNS),
            kernels,
            out_bytes,
            winner: OnceLock::new(),
            timer,
            probe_ns: AtomicU64::new(0),
            committed: Default::default(),
        }
    }

    /// True the first time it is called after the trial was decided, false otherwise: the
    /// engine takes a choice in once.
    pub(crate) fn take_commit(&self) -> bool {
        self.winner.get().is_some() && !self.committed.swap(true, Ordering::Relaxed)
    }

    /// The kernel chosen, once the trial is over.
    pub(crate) fn winner(&self) -> Option<&Arc<Kernel>> {
        self.winner.get().map(|&w| &self.kernels[w].1)
    }

    /// The kernel that runs calls now: the one chosen, else the fastest so far.
    pub(crate) fn current(&self) -> &Arc<Kernel> {
        match self.winner() {
            Some(k) => k,
            None => &self.kernels[self.decided()].1,
        }
    }

    /// Runs one call (`run` performs it with the kernel given): while probing, with the next
    /// variant, timed and recorded; afterwards with the kernel chosen. Returns true when this
    /// call's probe decided the trial.
    pub(crate) fn call(&self, run: &mut dyn FnMut(&Kernel)) -> bool {
        if self.winner.get().is_none()
            && let Some(i) = self.trial.next()
        {
            let (v, k) = &self.kernels[i];
            let ns = self.timer.time(*v, false, &mut || run(k));
            self.probe_ns.fetch_add(ns, Ordering::Relaxed);
            if self.trial.record(i, ns) {
                return self.winner.set(self.decided()).is_ok();
            }
            return false;
        }
        run(self.current());
        false
    }

    /// The choice from what was recorded: the fastest variant with ordinary stores, or the
    /// preferred one its generator reported unless another is faster than it by its margin;
    /// the fastest with non-temporal stores when faster than that by [`NT_MARGIN`], or (from
    /// [`NT_PREFER_MIN_BYTES`]) unless slower than it by that much.
    fn decided(&self) -> usize {
        self.trial.decided_first_group(
            self.prefer,
            NT_MARGIN,
            self.out_bytes >= NT_PREFER_MIN_BYTES,
        )
    }

    /// The choice and the times that decided it, once decided.
    pub(crate) fn choice(&self) -> Option<TierChoice> {
        let w = *self.winner.get()?;
        let t = self.trial.times();
        Some(TierChoice {
            class: self.class,
            chosen: self.kernels[w].0,
            times_ns: self.kernels.iter().map(|k| k.0).zip(t).collect(),
        })
    }

    /// Timed calls made, and the nanoseconds they took beyond what the chosen variant would
    /// have taken (its fastest time each): the price of measuring.
    pub(crate) fn cost(&self) -> (u64, u64) {
        let probes = self.trial.probes() as u64;
        let total = self.probe_ns.load(Ordering::Relaxed);
        let best = self
            .winner
            .get()
            .map_or(0, |&w| self.trial.times()[w].min(total));
        (probes, total.saturating_sub(probes.saturating_mul(best)))
    }
}

/// Wall-clock time of a call: the default [`CallTimer`].
#[derive(Debug, Default)]
struct WallClock;

impl CallTimer for WallClock {
    fn time(&self, _: Variant, _: bool, call: &mut dyn FnMut()) -> u64 {
        let t = std::time::Instant::now();
        call();
        t.elapsed().as_nanos() as u64
    }
}

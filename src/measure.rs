//! Measure, then commit. Choices that depend on the machine as much as on the call are not
//! guessed: whether a kernel's calls are split across threads (memory channels per core, a
//! busy neighbour on a shared host), and which code runs a kernel class — the AVX-512 or the
//! AVX2 tier, ordinary or non-temporal stores (the same AVX-512 code is faster on one CPU and
//! slower on the next, and CPUID cannot tell). A [`Trial`] hands its options out to the first
//! calls, a few calls in a row each way in turn ([`Runs`]), each timed, and from then on the
//! fastest is used (each option's median run, so that neither a cold first call nor one lucky
//! call decides).
//!
//! Probing in runs matters: after a call on one thread the pool's workers have parked, so the
//! first split call of a pair pays their wake-up while the second, like back-to-back split
//! calls in steady state, finds them spinning (alternating single calls made every split probe
//! a wake-up and kept 4 MiB calls that split twice as fast on one thread); likewise the first
//! call of a kernel touches its code and its constants, and the first calls of a kernel find
//! the caches as the previous one left them.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

/// Most options a trial compares: at least the most candidate variants a class has (eight:
/// AVX-512 ordinary, non-temporal, zmm and the two with `prefetchw`, AVX2 ordinary,
/// non-temporal and with `prefetchw`; from 32 MiB of output seven, with four-way walks
/// instead of `prefetchw`).
pub(crate) const MAX_OPTIONS: usize = 8;

/// Most runs of probes per option.
const MAX_RUNS: usize = 4;

/// How a trial probes each option: `runs` runs of `calls` calls in a row, of which the first
/// `warm` settle the state the previous option left (they are timed, not counted); a run's
/// time is the fastest of its other calls, or (`mean`) their mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Runs {
    pub(crate) runs: u32,
    pub(crate) calls: u32,
    pub(crate) warm: u32,
    pub(crate) mean: bool,
}

impl Runs {
    /// `runs` pairs, the faster call of each counting.
    pub(crate) const fn pairs(runs: u32) -> Runs {
        Runs {
            runs,
            calls: 2,
            warm: 0,
            mean: false,
        }
    }
}

/// The learnt choice among a few options (indices `0..options`), each probed in runs of calls
/// in a row ([`Runs`]); an option's time is the median of its runs' times, so that neither a
/// cold first call nor one lucky call decides.
#[derive(Debug)]
pub(crate) struct Trial {
    options: u32,
    /// Options `0..first` are probed (round robin, every run) before options `first..`.
    first: u32,
    runs: Runs,
    /// Probes before the choice: `runs.runs * runs.calls` per option.
    probes: u32,
    /// Probes handed out.
    handed: AtomicU32,
    /// Probes recorded, and per option.
    recorded: AtomicU32,
    per_option: [AtomicU32; MAX_OPTIONS],
    /// Per option and run: the fastest counted call, or (`mean` runs) the sum of the counted
    /// calls; and how many were counted.
    run_ns: [[AtomicU64; MAX_RUNS]; MAX_OPTIONS],
    run_n: [[AtomicU32; MAX_RUNS]; MAX_OPTIONS],
}

impl Trial {
    /// A trial of `options` (1 ..= [`MAX_OPTIONS`]) options, each probed in `pairs` (1 ..= 4)
    /// pairs.
    pub(crate) fn new(options: usize, pairs: u32) -> Trial {
        Trial::grouped(options, options, Runs::pairs(pairs))
    }

    /// A trial whose options `0..first` are all probed, round robin, before any of the others
    /// (which then take their turns the same way): options that leave the machine in a state
    /// that slows the next calls down go last. Non-temporal stores do: on a Zen 4 host, the
    /// two calls after an 8 MiB non-temporal call of another variant ran 1.2-1.6x their
    /// steady time (a run's first calls alone would not matter: they can be left uncounted).
    /// `runs`: 1 ..= 4 runs of at least one counted call each.
    pub(crate) fn grouped(options: usize, first: usize, runs: Runs) -> Trial {
        let options = options.clamp(1, MAX_OPTIONS) as u32;
        let first = (first as u32).clamp(1, options);
        let calls = runs.calls.max(1);
        let runs = Runs {
            runs: runs.runs.clamp(1, MAX_RUNS as u32),
            calls,
            warm: runs.warm.min(calls - 1),
            mean: runs.mean,
        };
        let empty = if runs.mean { 0 } else { u64::MAX };
        Trial {
            options,
            first,
            runs,
            probes: runs.runs * runs.calls * options,
            handed: AtomicU32::new(0),
            recorded: AtomicU32::new(0),
            per_option: Default::default(),
            run_ns: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(empty))),
            run_n: Default::default(),
        }
    }

    /// Probes before the choice.
    pub(crate) fn probes(&self) -> u32 {
        self.probes
    }

    /// The option the next call should run and time, or `None` once every probe is handed out.
    pub(crate) fn next(&self) -> Option<usize> {
        let n = self.handed.load(Ordering::Relaxed);
        if n >= self.probes {
            return None;
        }
        self.handed.fetch_add(1, Ordering::Relaxed);
        let per_run = self.runs.calls;
        let head = self.runs.runs * per_run * self.first;
        Some(if n < head {
            (n / per_run) % self.first
        } else {
            self.first + ((n - head) / per_run) % (self.options - self.first)
        } as usize)
    }

    /// Records a probe: option `i` ran in `ns`. Returns true when this was the last probe.
    pub(crate) fn record(&self, i: usize, ns: u64) -> bool {
        let n = self.per_option[i].fetch_add(1, Ordering::Relaxed);
        let (k, pos) = ((n / self.runs.calls) as usize, n % self.runs.calls);
        if k < self.runs.runs as usize && pos >= self.runs.warm {
            if self.runs.mean {
                self.run_ns[i][k].fetch_add(ns, Ordering::Relaxed);
            } else {
                self.run_ns[i][k].fetch_min(ns, Ordering::Relaxed);
            }
            self.run_n[i][k].fetch_add(1, Ordering::Relaxed);
        }
        self.recorded.fetch_add(1, Ordering::Relaxed) + 1 == self.probes
    }

    /// Whether every probe has been recorded.
    #[cfg(test)]
    pub(crate) fn done(&self) -> bool {
        self.recorded.load(Ordering::Relaxed) >= self.probes
    }

    /// Each option's time: the median of its recorded runs' times (the faster of the two
    /// middle ones for an even count; `u64::MAX` when none was recorded).
    pub(crate) fn times(&self) -> Vec<u64> {
        (0..self.options as usize)
            .map(|i| {
                let runs = self.runs.runs as usize;
                let mut v: Vec<u64> = (0..runs)
                    .filter_map(|k| {
                        let n = self.run_n[i][k].load(Ordering::Relaxed) as u64;
                        let ns = self.run_ns[i][k].load(Ordering::Relaxed);
                        match (n, self.runs.mean) {
                            (0, _) => None,
                            (n, true) => Some(ns / n),
                            (_, false) => Some(ns),
                        }
                    })
                    .collect();
                v.sort_unstable();
                match v.len() {
                    0 => u64::MAX,
                    n => v[(n - 1) / 2],
                }
            })
            .collect()
    }

    /// The choice from what was recorded between the two groups of a grouped trial: the
    /// fastest option of the first group (or `prefer.0` of it, unless the fastest was faster
    /// than it by more than the fraction `prefer.1`), unless the fastest of the others was
    /// faster than that by more than the fraction `margin` (then that one). With
    /// `second_preferred` the other way round: the fastest of the others unless the first
    /// group's choice was faster by more than `margin`.
    pub(crate) fn decided_first_group(
        &self,
        prefer: Option<(usize, f64)>,
        margin: f64,
        second_preferred: bool,
    ) -> usize {
        let t = self.times();
        let first = self.first as usize;
        let best = |r: std::ops::Range<usize>| r.min_by_key(|&i| t[i]);
        let faster = |b: usize, a: usize, m: f64| (t[b] as f64) < (1.0 - m) * t[a] as f64;
        let mut a = best(0..first).expect("at least one option");
        if let Some((p, m)) = prefer
            && p < first
            && t[p] != u64::MAX
            && !faster(a, p, m)
        {
            a = p;
        }
        match best(first..t.len()) {
            Some(b) if t[b] != u64::MAX && second_preferred && !faster(a, b, margin) => b,
            Some(b) if t[b] != u64::MAX && faster(b, a, margin) => b,
            _ => a,
        }
    }

    /// The choice from what was recorded: `prefer` unless another option was faster by more
    /// than the fraction `margin` (the fastest of those, then).
    pub(crate) fn decided(&self, prefer: usize, margin: f64) -> usize {
        let t = self.times();
        let (fastest, &ft) = t
            .iter()
            .enumerate()
            .min_by_key(|&(_, &v)| v)
            .expect("at least one option");
        if ft == u64::MAX || (ft as f64) >= (1.0 - margin) * t[prefer] as f64 {
            prefer
        } else {
            fastest
        }
    }
}

/// How a call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// Split across the engine's threads (option 0 of a kernel's split trial).
    Split,
    /// On the calling thread (option 1).
    Single,
}

impl Way {
    /// The option index of this way in a split trial.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// How much faster split calls must be than single ones, by the medians of their runs, for a
/// kernel to split: the trial prefers one thread (no wake-ups, no second core kept busy).
pub(crate) const SPLIT_MARGIN: f64 = 0.05;

/// The split trial of a kernel: three pairs each way, split only when at least
/// [`SPLIT_MARGIN`] faster; or a way fixed without probes (what a wisdom file kept for the
/// kernel's class).
#[derive(Debug)]
pub(crate) struct SplitChoice {
    trial: Trial,
    /// 0: none fixed; else 1 + the fixed way's index.
    fixed: AtomicU8,
    /// Whether the engine has looked for a way to fix ([`SplitChoice::first_look`]).
    looked: AtomicBool,
}

impl Default for SplitChoice {
    fn default() -> Self {
        SplitChoice {
            trial: Trial::new(2, 3),
            fixed: AtomicU8::new(0),
            looked: AtomicBool::new(false),
        }
    }
}

impl SplitChoice {
    /// The way the next call should run, and whether it is a probe to be timed and
    /// [`SplitChoice::record`]ed.
    pub(crate) fn next(&self) -> (Way, bool) {
        match self.fixed.load(Ordering::Relaxed) {
            1 => return (Way::Split, false),
            2 => return (Way::Single, false),
            _ => {}
        }
        match self.trial.next() {
            Some(0) => (Way::Split, true),
            Some(_) => (Way::Single, true),
            None => (self.decided(), false),
        }
    }

    /// Runs every later call `way`, without probes.
    pub(crate) fn fix(&self, way: Way) {
        self.fixed.store(1 + way.index() as u8, Ordering::Relaxed);
    }

    /// True for the first caller only: the one that looks for a way to [`fix`](Self::fix).
    pub(crate) fn first_look(&self) -> bool {
        !self.looked.load(Ordering::Relaxed) && !self.looked.swap(true, Ordering::Relaxed)
    }

    /// Records a probe: the call ran `way` in `ns`. On the last probe, the trial's time of
    /// each way (the median of its runs): `[split, single]`.
    pub(crate) fn record(&self, way: Way, ns: u64) -> Option<[u64; 2]> {
        if !self.trial.record(way.index(), ns) {
            return None;
        }
        let t = self.trial.times();
        Some([t[Way::Split.index()], t[Way::Single.index()]])
    }

    fn decided(&self) -> Way {
        match self.trial.decided(Way::Single.index(), SPLIT_MARGIN) {
            0 => Way::Split,
            _ => Way::Single,
        }
    }

    /// The choice made, if the probes are done.
    #[cfg(test)]
    fn choice(&self) -> Option<Way> {
        self.trial.done().then(|| self.decided())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grouped trial of one pair per option, every probe of option `i` taking `cost[i]`.
    fn probed(first: usize, cost: &[u64]) -> Trial {
        let t = Trial::grouped(cost.len(), first, Runs::pairs(1));
        while let Some(i) = t.next() {
            t.record(i, cost[i]);
        }
        t
    }

    #[test]
    fn probes_alternate_in_pairs_then_the_faster_way_wins() {
        for (single, split, want) in [
            (100, 60, Way::Split),
            (100, 97, Way::Single),
            (100, 300, Way::Single),
        ] {
            let c = SplitChoice::default();
            let mut ways = Vec::new();
            while let (w, true) = c.next() {
                ways.push(w);
                // The first probe of each way is slow (cold caches, parked workers): the
                // minimum decides.
                let cold = if ways.len() == 1 || ways.len() == 3 {
                    1000
                } else {
                    0
                };
                c.record(w, cold + if w == Way::Single { single } else { split });
            }
            assert_eq!(ways.len(), 12);
            let pairs = [Way::Split, Way::Split, Way::Single, Way::Single];
            assert!(ways.iter().zip(pairs.iter().cycle()).all(|(a, b)| a == b));
            assert_eq!(c.choice(), Some(want));
            assert_eq!(c.next(), (want, false));
        }
    }

    #[test]
    fn a_fixed_way_runs_without_probes_and_the_last_probe_reports_the_times() {
        let c = SplitChoice::default();
        assert!(c.first_look());
        assert!(!c.first_look(), "one caller looks");
        c.fix(Way::Single);
        assert_eq!(c.next(), (Way::Single, false));
        c.fix(Way::Split);
        assert_eq!(c.next(), (Way::Split, false));

        let c = SplitChoice::default();
        let mut last = None;
        while let (w, true) = c.next() {
            assert_eq!(last, None, "a report before the last probe");
            last = c.record(w, if w == Way::Split { 40 } else { 100 });
        }
        assert_eq!(last, Some([40, 100]));
        assert_eq!(c.next(), (Way::Split, false));
    }

    #[test]
    fn options_in_pairs_round_robin_and_the_fastest_wins() {
        let t = Trial::new(3, 3);
        let mut order = Vec::new();
        let cost = [300u64, 100, 200];
        while let Some(i) = t.next() {
            order.push(i);
            // The first round is cold; one call of option 0 is lucky: the median ignores both.
            let extra = if order.len() <= 6 { 500 } else { 0 };
            let lucky = if order.len() == 13 { 250 } else { 0 };
            let last = t.record(i, cost[i] + extra - lucky);
            assert_eq!(last, order.len() == 18);
        }
        let round = [0, 0, 1, 1, 2, 2];
        assert_eq!(order, [round, round, round].concat());
        assert!(t.done());
        assert_eq!(t.times(), [300, 100, 200]);
        assert_eq!(t.decided(0, 0.0), 1);
        // A preferred option keeps its place unless another beats it by the margin.
        let close = probed(2, &[100, 97]);
        assert_eq!(close.decided(0, 0.05), 0);
        assert_eq!(close.decided(0, 0.01), 1);
        // Nothing recorded: the preferred option.
        assert_eq!(Trial::new(2, 1).decided(1, 0.0), 1);
    }

    #[test]
    fn runs_count_their_calls_after_the_warm_ones_by_their_mean() {
        let runs = Runs {
            runs: 2,
            calls: 4,
            warm: 2,
            mean: true,
        };
        let t = Trial::grouped(2, 2, runs);
        let mut order = Vec::new();
        // Each run's first two calls are slow (the state another option left), then option 0
        // takes 100 and 120, option 1 90 and 150: means 110 and 120.
        while let Some(i) = t.next() {
            let pos = order.iter().filter(|&&o| o == i).count() % 4;
            order.push(i);
            let ns = match pos {
                0 | 1 => 1000,
                2 => [100, 90][i],
                _ => [120, 150][i],
            };
            assert_eq!(t.record(i, ns), order.len() == 16);
        }
        let run = |i| [i; 4];
        assert_eq!(order, [run(0), run(1), run(0), run(1)].concat());
        assert_eq!(t.times(), [110, 120]);
        assert_eq!(t.decided_first_group(None, 0.0, false), 0);
        // The fastest counted call instead: option 1.
        let fastest = Trial::grouped(
            2,
            2,
            Runs {
                mean: false,
                ..runs
            },
        );
        while let Some(i) = fastest.next() {
            let pos = fastest.per_option[i].load(Ordering::Relaxed) % 4;
            fastest.record(i, [1000, 1000, [100, 90][i], [120, 150][i]][pos as usize]);
        }
        assert_eq!(fastest.times(), [100, 90]);
    }

    #[test]
    fn a_preferred_option_is_kept_unless_beaten_by_its_margin() {
        let t = probed(3, &[100, 104, 120, 80]);
        // Option 1 preferred within 5%: kept over option 0; not within 3%.
        assert_eq!(t.decided_first_group(Some((1, 0.05)), 0.5, false), 1);
        assert_eq!(t.decided_first_group(Some((1, 0.03)), 0.5, false), 0);
        // The second group still wins by its own margin, over the preferred one too.
        assert_eq!(t.decided_first_group(Some((1, 0.05)), 0.2, false), 3);
        // A preference outside the first group does not count.
        assert_eq!(t.decided_first_group(Some((3, 0.5)), 0.5, false), 0);
    }

    #[test]
    fn a_grouped_trial_probes_its_first_group_through_before_the_rest() {
        // Options 0 and 1 first (every pair), then 2, 3 and 4 round robin.
        let t = Trial::grouped(5, 2, Runs::pairs(2));
        let mut order = Vec::new();
        // Each option's second pair is its fastest; option 3 wins.
        let cost = [300u64, 250, 200, 100, 400];
        while let Some(i) = t.next() {
            order.push(i);
            let pair = order.iter().filter(|&&o| o == i).count().div_ceil(2);
            let last = t.record(i, cost[i] + if pair == 1 { 50 } else { 0 });
            assert_eq!(last, order.len() == 20);
        }
        let head = [0, 0, 1, 1];
        let tail = [2, 2, 3, 3, 4, 4];
        assert_eq!(order, [&head[..], &head, &tail, &tail].concat());
        assert_eq!(t.times(), [300, 250, 200, 100, 400]);
        assert_eq!(t.decided(0, 0.0), 3);
        // Between the groups: the second group's fastest only when faster by the margin.
        assert_eq!(t.decided_first_group(None, 0.05, false), 3);
        assert_eq!(t.decided_first_group(None, 0.70, false), 1);
        let close = probed(2, &[100, 90, 87]);
        assert_eq!(close.decided_first_group(None, 0.05, false), 1);
        assert_eq!(close.decided_first_group(None, 0.0, false), 2);
        // The second group preferred: its fastest unless the first's beats it by the margin.
        assert_eq!(close.decided_first_group(None, 0.05, true), 2);
        let far = probed(2, &[100, 90, 97]);
        // 97 against 90: within 10%, not within 5%.
        assert_eq!(far.decided_first_group(None, 0.10, true), 2);
        assert_eq!(far.decided_first_group(None, 0.05, true), 1);
        assert_eq!(far.decided_first_group(None, 0.10, false), 1);
        // A first group of every option (or none) is the plain round robin.
        for first in [0, 3, 9] {
            let g = Trial::grouped(3, first, Runs::pairs(1));
            let order: Vec<usize> = std::iter::from_fn(|| g.next()).collect();
            assert_eq!(order, [0, 0, 1, 1, 2, 2], "first {first}");
        }
    }
}

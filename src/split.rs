//! Whether splitting a call across threads pays, learnt from the calls themselves.
//!
//! Whether two threads beat one depends on the machine (memory channels per core, shared or
//! private caches, a busy neighbour on a shared host) as much as on the call, so a kernel does
//! not guess: its first calls alternate between one thread and all of them, two calls each way
//! in turn, each timed, and from then on it runs the way that was faster (the minimum of each
//! way's probes, so a cold first call does not decide), splitting only if that is clearly
//! faster. Probing in pairs matters: after a call on one thread the pool's workers have parked,
//! so the first split call of a pair pays their wake-up while the second, like back-to-back
//! split calls in steady state, finds them spinning. Alternating single calls made every split
//! probe a wake-up and kept 4 MiB calls that split twice as fast on one thread.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Probes (timed calls, alternating) before the choice is made.
const PROBES: u32 = 12;

/// How a call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// On the calling thread.
    Single,
    /// Split across the engine's threads.
    Split,
}

/// The learnt choice of one kernel.
#[derive(Debug)]
pub(crate) struct SplitChoice {
    probes: AtomicU32,
    single_ns: AtomicU64,
    split_ns: AtomicU64,
}

impl Default for SplitChoice {
    fn default() -> Self {
        SplitChoice {
            probes: AtomicU32::new(0),
            single_ns: AtomicU64::new(u64::MAX),
            split_ns: AtomicU64::new(u64::MAX),
        }
    }
}

impl SplitChoice {
    /// The way the next call should run, and whether it is a probe to be timed and
    /// [`SplitChoice::record`]ed.
    pub(crate) fn next(&self) -> (Way, bool) {
        let n = self.probes.load(Ordering::Relaxed);
        if n >= PROBES {
            return (self.decided(), false);
        }
        let way = if (n / 2).is_multiple_of(2) {
            Way::Split
        } else {
            Way::Single
        };
        (way, true)
    }

    /// Records a probe: the call ran `way` in `ns`.
    pub(crate) fn record(&self, way: Way, ns: u64) {
        let slot = match way {
            Way::Single => &self.single_ns,
            Way::Split => &self.split_ns,
        };
        slot.fetch_min(ns, Ordering::Relaxed);
        self.probes.fetch_add(1, Ordering::Relaxed);
    }

    /// The choice once probed: split only when it was at least 5% faster.
    fn decided(&self) -> Way {
        let single = self.single_ns.load(Ordering::Relaxed);
        let split = self.split_ns.load(Ordering::Relaxed);
        if split != u64::MAX && (split as f64) < 0.95 * single as f64 {
            Way::Split
        } else {
            Way::Single
        }
    }

    /// The choice made, if the probes are done.
    #[cfg(test)]
    fn choice(&self) -> Option<Way> {
        (self.probes.load(Ordering::Relaxed) >= PROBES).then(|| self.decided())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(ways.len(), PROBES as usize);
            let pairs = [Way::Split, Way::Split, Way::Single, Way::Single];
            assert!(ways.iter().zip(pairs.iter().cycle()).all(|(a, b)| a == b));
            assert_eq!(c.choice(), Some(want));
            assert_eq!(c.next(), (want, false));
        }
    }
}

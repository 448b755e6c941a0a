//! The deterministic generator of the generated tables (the tests' and the benchmark's).
#![allow(dead_code)]

/// An LCG step, then a mix.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = self.0;
        (x ^ (x >> 29)).wrapping_mul(0xbf58476d1ce4e5b9) >> 11
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// `v`, or `None` one time in `k`.
    pub(crate) fn some<T>(&mut self, k: u64, v: T) -> Option<T> {
        (self.below(k) != 0).then_some(v)
    }
}

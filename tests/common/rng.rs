//! The deterministic generator the tests share (no test depends on a random crate's stream).
#![allow(dead_code)]

/// A small deterministic generator (an LCG step, then a mix).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = self.0;
        (x ^ (x >> 33)).wrapping_mul(0xff51afd7ed558ccd) ^ (x >> 29)
    }
    pub fn byte(&mut self) -> u8 {
        self.next() as u8
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 24) as u8).collect()
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
    /// `n` cond bytes by `mode % 4`: drawn from `vals`; in runs of 1–300 bytes that are all
    /// zero or all drawn from `truthy` (so that whole vectors are uniform); all from `truthy`;
    /// all zero.
    pub fn cond(&mut self, n: usize, mode: u64, vals: &[u8], truthy: &[u8]) -> Vec<u8> {
        let (mut left, mut on) = (0u64, false);
        (0..n)
            .map(|_| match mode % 4 {
                0 => self.pick(vals),
                1 => {
                    if left == 0 {
                        left = 1 + self.next() % 300;
                        on = self.next().is_multiple_of(2);
                    }
                    left -= 1;
                    if on { self.pick(truthy) } else { 0 }
                }
                2 => self.pick(truthy),
                _ => 0,
            })
            .collect()
    }
}

/// A generator that draws from a tape of choices proptest made, then (past its end) from a
/// fixed [`Rng`]. proptest shrinks the tape — fewer choices, each toward 0 — so a failing case
/// shrinks with it: `below(n)` of a shrunk choice is 0 (rank 0, the first dimension size, the
/// first dtype, the plainest layout).
pub struct Tape {
    choices: Vec<u64>,
    at: usize,
    rest: Rng,
}

impl Tape {
    pub fn new(choices: Vec<u64>) -> Tape {
        Tape {
            choices,
            at: 0,
            rest: Rng(0x5e1ec7),
        }
    }
    pub fn next(&mut self) -> u64 {
        match self.choices.get(self.at) {
            Some(&c) => {
                self.at += 1;
                c
            }
            None => self.rest.next(),
        }
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
}

//! Skips that say so, and that fail when every tier is required: a test that cannot run part of
//! its work on this host (an x86 level the CPU lacks, so its kernels are not run natively, or a
//! single tier-choice candidate) calls [`skip`], which prints `SKIPPED: <what> (<why>)` to
//! stderr, or panics when `SELECTJIT_REQUIRE_ALL_TIERS=1` (as `.ci/run` sets on a host with
//! AVX-512, so that such a host cannot go green without running every x86 test natively; on a
//! host with AVX2 only the AVX-512 kernels run in the emulator and the skips print).
//! As `SELECTJIT_CROSS_REQUIRE=1` does for the cross-architecture test
//! (`crates/selectjit-aot/tests/cross_arch.rs`).
//!
//! [`inherent`] is for what no host of this architecture runs (x86 tiers on another
//! architecture): it only prints, even under the variable.
//!
//! Shared by the workspace's tests through `#[path]` (the root tests, the emulator's, the
//! benchmarks' and the command line's); the variable is test-only, not one of the library's
//! (`selectjit::env`).
#![allow(dead_code)]

/// The variable under which a [`skip`] fails.
pub const REQUIRE_ALL_TIERS: &str = "SELECTJIT_REQUIRE_ALL_TIERS";

/// Whether `SELECTJIT_REQUIRE_ALL_TIERS=1`.
pub fn required() -> bool {
    std::env::var(REQUIRE_ALL_TIERS).as_deref() == Ok("1")
}

/// Reports that `what` was not run on this host because of `why`; panics instead under
/// `SELECTJIT_REQUIRE_ALL_TIERS=1`.
#[track_caller]
pub fn skip(what: &str, why: &str) {
    if required() {
        panic!("{what} was not run ({why}) and {REQUIRE_ALL_TIERS}=1 requires it");
    }
    eprintln!("SKIPPED: {what} ({why})");
}

/// Reports that `what` was not run because no host of this architecture runs it (`why`); never
/// fails, not even under `SELECTJIT_REQUIRE_ALL_TIERS=1`.
pub fn inherent(what: &str, why: &str) {
    eprintln!(
        "SKIPPED: {what} ({why}; inherent to this architecture, {REQUIRE_ALL_TIERS} does not fail it)"
    );
}

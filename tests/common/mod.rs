//! Helpers shared by the integration tests: the engines every backend and tier test runs.
#![allow(dead_code)]

use selectjit::{Backend, CmpOp, Engine, EngineConfig, Tier};

pub mod skip;

/// The oracle of the predicate tests: `op` with Rust's own operators (IEEE for floats).
pub fn cmp_ord<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

/// The code-generation tiers to test on this host, each with whether its kernels run in the
/// built-in emulator (x86 tiers the CPU lacks). An x86 tier not run natively is a
/// [`skip::skip`] (a failure under `SELECTJIT_REQUIRE_ALL_TIERS=1`), on another architecture
/// an [`skip::inherent`] one.
pub fn tiers() -> Vec<(Tier, bool)> {
    let mut v = vec![(Tier::Cranelift, false)];
    for t in [Tier::Avx2, Tier::Avx512] {
        if t.available() {
            v.push((t, false));
        } else if cfg!(target_arch = "x86_64") {
            let why = t.unavailable_reason().unwrap_or_default();
            skip::skip(
                &format!("tier {t} natively"),
                &format!("{why}; its kernels run in the emulator"),
            );
            v.push((t, true));
        } else {
            skip::inherent(
                &format!("tier {t}"),
                &t.unavailable_reason().unwrap_or_default(),
            );
        }
    }
    v
}

/// An engine for `backend` (and `tier`, emulated or not) with `base`'s other settings.
pub fn engine(base: &EngineConfig, backend: Backend, tier: Tier, emulate: bool) -> Engine {
    Engine::with_config(
        base.clone()
            .backend(backend)
            .tier(tier)
            .runner(emulate.then(selectjit_emu::Emulator::runner)),
    )
    .unwrap_or_else(|e| panic!("engine {backend:?} {tier}: {e}"))
}

/// Named engines: the interpreter, the static kernels, and the JIT on every tier.
pub fn all_engines(base: &EngineConfig) -> Vec<(String, Engine)> {
    let mut v = vec![
        (
            "interp".to_string(),
            engine(base, Backend::Interp, Tier::Auto, false),
        ),
        (
            "static".to_string(),
            engine(base, Backend::Static, Tier::Auto, false),
        ),
    ];
    for (t, emu) in tiers() {
        let name = if emu {
            format!("jit-{t}-emulated")
        } else {
            format!("jit-{t}")
        };
        v.push((name, engine(base, Backend::Jit, t, emu)));
    }
    v
}

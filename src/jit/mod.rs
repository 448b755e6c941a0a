//! Code generation at run time (feature `jit`): turning a [`Signature`] into machine code.
//!
//! The plan and the [`Signature`] are shared; what turns a signature into machine code is a
//! **tier** ([`Tier`]):
//!
//! * [`cranelift`] — Cranelift IR compiled for the host by Cranelift (every architecture it
//!   targets; 128-bit vectors on x86-64);
//! * `x86` — on x86-64, AVX2 or AVX-512 machine code emitted directly.
//!
//! [`CodeGen`] is the one entry point the engine uses: it holds a generator for each tier the
//! engine may use and compiles a signature with the one it is asked for. A [`Kernel`] records
//! its tier, and the engine and the cache never learn how it was made.

#[cfg(cranelift_tier)]
pub(crate) mod cranelift;
#[cfg(x86_tier)]
pub(crate) mod x86;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::kernel::abi::CodeRunner;
use crate::plan::{Pattern, Signature};
use crate::tier::{Tier, Variant};

#[cfg(cranelift_tier)]
pub(crate) use cranelift::Jit;

/// Outputs of at least this many bytes (past a typical L2) are offered [`Variant::prefetchw`]
/// candidates, up to `nt_min_bytes`.
#[cfg(x86_tier)]
const PREFETCHW_MIN_BYTES: usize = 1 << 20;

/// Settings of a [`CodeGen`].
#[derive(Debug, Clone)]
pub struct CodeGenOptions {
    /// Run the Cranelift verifier on every Cranelift function.
    pub verify: bool,
    /// x86 tiers: exact kernels whose output is at least this many bytes write it with
    /// non-temporal stores (`usize::MAX`: never).
    pub nt_min_bytes: usize,
    /// x86 tiers the host lacks: run their kernels through this runner (an emulator) instead of
    /// refusing the tier (slow; for verifying the generator).
    pub runner: Option<Arc<dyn CodeRunner>>,
    /// Cranelift's x86 `blendv` lane selects (`None`: where the host has them).
    pub blendv: Option<bool>,
}

impl Default for CodeGenOptions {
    /// No verifier, no non-temporal stores, no runner, `blendv` where the host has it.
    fn default() -> Self {
        CodeGenOptions {
            verify: false,
            nt_min_bytes: usize::MAX,
            runner: None,
            blendv: None,
        }
    }
}

/// The code generators of one engine: the tiers it may compile with (one, or for `Auto` every
/// fast tier the host runs, among which the engine chooses by measuring), and Cranelift for
/// every signature an x86 tier does not cover.
pub struct CodeGen {
    /// The tiers kernels may be compiled with, the preferred one (the widest) last.
    tiers: Vec<Tier>,
    /// Whether the engine's tier was `Auto`.
    auto: bool,
    #[cfg(cranelift_tier)]
    cranelift: Jit,
    #[cfg(x86_tier)]
    x86: Vec<x86::X86Gen>,
    /// x86 kernels run through this instead of on the CPU.
    runner: Option<Arc<dyn CodeRunner>>,
    /// Named x86 tiers store outputs of at least this many bytes non-temporally; `Auto`
    /// measures non-temporal stores against ordinary ones from a quarter of it.
    nt_min_bytes: usize,
}

impl std::fmt::Debug for CodeGen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CodeGen({:?})", self.tiers)
    }
}

impl CodeGen {
    /// The generators of `tier`: a concrete tier, or for `Auto` the x86 tiers the host runs
    /// (Cranelift where it runs none). A tier the host cannot run is an error, unless
    /// `opts.runner` is given to run its kernels.
    pub fn new(tier: Tier, opts: CodeGenOptions) -> Result<CodeGen> {
        #[cfg(cranelift_tier)]
        let mut cranelift = Jit::host(opts.verify)?;
        #[cfg(cranelift_tier)]
        if let Some(on) = opts.blendv {
            cranelift.set_blendv(on);
        }
        let auto = tier == Tier::Auto;
        let tiers = if auto {
            let host = Tier::host_tiers();
            let x: Vec<Tier> = host.iter().copied().filter(|t| t.is_x86()).collect();
            if x.is_empty() { host } else { x }
        } else {
            vec![tier]
        };
        let runner = if !auto && tier.is_x86() && !tier.available() {
            let Some(r) = opts.runner else {
                let why = tier.unavailable_reason().unwrap_or_default();
                return Err(Error::Invalid(why));
            };
            Some(r)
        } else {
            if let Some(why) = tier.unavailable_reason() {
                return Err(Error::Invalid(why));
            }
            None
        };
        #[cfg(x86_tier)]
        let x86 = tiers
            .iter()
            .filter_map(|&t| x86::X86Gen::for_tier(t, opts.nt_min_bytes))
            .collect();
        let _ = opts.verify;
        Ok(CodeGen {
            tiers,
            auto,
            #[cfg(cranelift_tier)]
            cranelift,
            #[cfg(x86_tier)]
            x86,
            runner,
            nt_min_bytes: opts.nt_min_bytes,
        })
    }

    /// The preferred tier: the one asked for, or for `Auto` the widest the host runs (what
    /// kernels are compiled with before anything was measured).
    pub fn tier(&self) -> Tier {
        *self.tiers.last().expect("at least one tier")
    }

    /// The tiers this generator compiles with (more than one: the engine measures them).
    pub fn tiers(&self) -> &[Tier] {
        &self.tiers
    }

    /// Whether the engine's tier was `Auto` (chosen by measuring).
    pub fn is_auto(&self) -> bool {
        self.auto
    }

    /// Whether x86 kernels run through a [`CodeRunner`] (an emulator).
    pub fn emulates(&self) -> bool {
        self.runner.is_some()
    }

    /// The Cranelift generator (the tier itself, or the fallback of the x86 tiers).
    #[cfg(cranelift_tier)]
    pub fn cranelift(&self) -> &Jit {
        &self.cranelift
    }

    /// The x86 generator of `tier`, if this generator has one.
    #[cfg(x86_tier)]
    pub fn x86(&self, tier: Tier) -> Option<&x86::X86Gen> {
        self.x86.iter().find(|g| g.tier() == tier)
    }

    /// Whether some tier of this generator compiles `sig` (otherwise the engine runs it another
    /// way: predicates no tier fuses yet take the blocked path).
    pub fn covers(&self, sig: &Signature) -> bool {
        #[cfg(x86_tier)]
        if self.x86.iter().any(|x| x.covers(sig)) {
            return true;
        }
        #[cfg(cranelift_tier)]
        if self.cranelift.covers(sig) {
            return true;
        }
        let _ = sig;
        false
    }

    /// The tier that compiles `sig` when asked for `tier`: `tier`, or Cranelift where the x86
    /// generator does not cover the signature.
    pub fn tier_for(&self, tier: Tier, sig: &Signature) -> Tier {
        #[cfg(x86_tier)]
        if self.x86(tier).is_some_and(|x| x.covers(sig)) {
            return tier;
        }
        let _ = (tier, sig);
        Tier::Cranelift
    }

    /// The host as this generator sees it: the tiers, and Cranelift's target and ISA flags.
    pub fn describe(&self) -> String {
        let emu = if self.emulates() { " (emulated)" } else { "" };
        let names: Vec<&str> = self.tiers.iter().map(|t| t.name()).collect();
        let how = if self.auto {
            "auto, measured among "
        } else {
            ""
        };
        #[cfg(cranelift_tier)]
        let cl = format!("; cranelift {}", self.cranelift.describe());
        #[cfg(not(cranelift_tier))]
        let cl = "";
        format!("tier {how}{}{emu}{cl}", names.join(", "))
    }

    /// Compiles `sig` with its dims and strides baked in, with the preferred tier.
    pub fn compile(&self, sig: &Signature) -> Result<Kernel> {
        self.compile_with(self.tier(), sig, false)
    }

    /// Compiles the shape-generic kernel of `p` with the preferred tier.
    pub fn compile_generic(&self, p: &Pattern) -> Result<Kernel> {
        self.compile_with(self.tier(), &p.representative(), true)
    }

    /// The candidates for `sig`'s exact kernel, the preferred one first: the engine's tier
    /// alone (with non-temporal stores from `nt_min_bytes` of output on); under `Auto` every
    /// fast tier, each with ordinary stores and, for vector and copy rows from a quarter of
    /// `nt_min_bytes` of output on (8 MiB by default: the call's traffic then fills a typical
    /// last-level cache), with non-temporal ones. Smaller outputs are not offered non-temporal
    /// stores: left in the cache they serve whatever reads them next, which a select's own
    /// time does not show. AVX-512 is also offered with zmm blocks (ordinary stores) for
    /// vector-select rows long enough to run one: a 64-byte vector per line halves the µops
    /// per byte stored, which wins where stores, not the loads from DRAM, pace the row. x86
    /// tiers offer non-temporal kernels of vector-select rows of `nt_min_bytes` of output or
    /// more also as four-way walks (four parts of each long row, or four rows a quarter of the
    /// loop apart, at once): faster where the inputs come from DRAM, slower where they stay in
    /// the last-level cache, so not offered below (every candidate more is one more chance
    /// for a noisy trial to keep a slower one). Outputs from 1 MiB up to `nt_min_bytes` — past
    /// L2, short of DRAM — are also offered the x86 tiers' ordinary-store candidates as
    /// [`Variant::prefetchw`] kernels (at most eight candidates in all).
    pub fn variants(&self, sig: &Signature) -> Vec<Variant> {
        let out_bytes = sig.out_bytes();
        if !self.auto {
            let tier = self.tier_for(self.tier(), sig);
            let nt = tier.is_x86() && out_bytes >= self.nt_min_bytes;
            return vec![Variant {
                nt,
                ..Variant::of(tier)
            }];
        }
        let probe_nt = self.nt_min_bytes != usize::MAX
            && out_bytes >= self.nt_min_bytes / 4
            && sig.row_shape() != crate::plan::RowShape::Strided;
        let mut v = Vec::new();
        for &t in self.tiers.iter().rev() {
            let tier = self.tier_for(t, sig);
            for nt in [false, true] {
                let cand = Variant {
                    nt: nt && tier.is_x86(),
                    ..Variant::of(tier)
                };
                if (!nt || (probe_nt && tier.is_x86())) && !v.contains(&cand) {
                    v.push(cand);
                }
            }
            #[cfg(x86_tier)]
            if probe_nt
                && out_bytes >= self.nt_min_bytes
                && self.x86(tier).is_some_and(|x| x.runs_four_way(sig))
            {
                v.push(Variant {
                    nt: true,
                    four_way: true,
                    ..Variant::of(tier)
                });
            }
            #[cfg(x86_tier)]
            if tier == Tier::Avx512 && x86::X86Gen::runs_wide(sig) {
                v.push(Variant {
                    wide: true,
                    ..Variant::of(tier)
                });
            }
            #[cfg(x86_tier)]
            if tier.is_x86()
                && (PREFETCHW_MIN_BYTES..self.nt_min_bytes).contains(&out_bytes)
                && x86::X86Gen::runs_prefetchw(sig)
            {
                let ordinary: Vec<Variant> = v
                    .iter()
                    .filter(|c| c.tier == tier && !c.nt)
                    .copied()
                    .collect();
                v.extend(ordinary.into_iter().map(|c| Variant {
                    prefetchw: true,
                    ..c
                }));
            }
        }
        v
    }

    /// Compiles `sig`'s exact kernel as variant `v` (one of [`CodeGen::variants`]).
    pub fn compile_variant(&self, v: Variant, sig: &Signature) -> Result<Kernel> {
        self.compile_as(v, sig, false)
    }

    /// Compiles `sig` (exact, or `generic`: the shape-generic kernel of its pattern) with
    /// `tier`, one of [`CodeGen::tiers`] (Cranelift where the x86 generator does not cover it);
    /// exact x86 kernels store non-temporally from `nt_min_bytes` of output on.
    pub fn compile_with(&self, tier: Tier, sig: &Signature, generic: bool) -> Result<Kernel> {
        let nt = sig.out_bytes() >= self.nt_min_bytes;
        let v = Variant {
            nt: nt && !generic,
            ..Variant::of(tier)
        };
        self.compile_as(v, sig, generic)
    }

    fn compile_as(&self, v: Variant, sig: &Signature, generic: bool) -> Result<Kernel> {
        #[cfg(x86_tier)]
        if let Some(x) = self.x86(v.tier).filter(|x| x.covers(sig)) {
            let (code, _) = x.emit_with(sig, generic, v)?;
            if let Some(r) = &self.runner {
                return Ok(Kernel::with_runner(
                    sig.clone(),
                    generic,
                    v,
                    code,
                    r.clone(),
                ));
            }
            // SAFETY: `emit_with` returns a complete kernel function for `sig` (or its pattern)
            // in the `KernelFn` convention, using the instructions of `tier`, which this host
            // runs (checked in `new`: otherwise a runner is set).
            return unsafe { Kernel::mapped(sig.clone(), generic, v, &code) };
        }
        let _ = v;
        #[cfg(cranelift_tier)]
        return if generic {
            self.cranelift.compile_generic(&Pattern::of(sig))
        } else {
            self.cranelift.compile(sig)
        };
        #[cfg(not(cranelift_tier))]
        Err(Error::codegen(format!(
            "no tier of this build compiles {sig} (generic: {generic})"
        )))
    }

    /// The machine code of `sig`'s exact kernel as variant `v` (bytes of x86 code, or
    /// Cranelift's listing), and the tier that made it.
    pub fn machine_code(&self, v: Variant, sig: &Signature) -> Result<(Tier, MachineCode)> {
        #[cfg(x86_tier)]
        if let Some(x) = self.x86(v.tier).filter(|x| x.covers(sig)) {
            return Ok((v.tier, MachineCode::X86(x.emit_with(sig, false, v)?.0)));
        }
        let _ = v;
        #[cfg(cranelift_tier)]
        return Ok((
            Tier::Cranelift,
            MachineCode::Listing(self.cranelift.disassembly(sig)?),
        ));
        #[cfg(not(cranelift_tier))]
        Err(Error::codegen(format!(
            "no tier of this build compiles {sig}"
        )))
    }
}

/// The machine code of a kernel, for inspection.
#[derive(Debug, Clone)]
pub enum MachineCode {
    /// x86-64 machine code (an x86 tier's), entered at its first byte.
    X86(Vec<u8>),
    /// Cranelift's own listing of the code it generated.
    Listing(String),
}

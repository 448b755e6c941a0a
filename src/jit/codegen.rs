//! What an engine holds: the generators of its tier, the variants a measured choice compares,
//! and the compile calls.

use super::generator::{Candidates, CodeGenOptions, Generator, MachineCode};
use super::registry;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::kernel::nway::{NwayKernel, NwaySpec};
use crate::plan::{Pattern, Signature};
use crate::tier::{Tier, Variant};

/// The code generators of one engine: the ones it may compile with (one, or for `Auto` every
/// generator the registry has `Auto` measure, among which the engine chooses by measuring),
/// and a fallback for every signature those do not cover.
pub struct CodeGen {
    /// The build has generators (none can be built otherwise: see `registry::Live`).
    _live: registry::Live,
    /// The generators kernels may be compiled with, the preferred one (the widest) last.
    gens: Vec<Box<dyn Generator>>,
    /// Compiles what none of `gens` covers (Cranelift beside the x86 tiers).
    fallback: Option<Box<dyn Generator>>,
    /// Their tiers, in the same order.
    tiers: Vec<Tier>,
    /// Whether the engine's tier was `Auto`.
    auto: bool,
    /// Kernels store outputs of at least this many bytes non-temporally where their
    /// generator can; `Auto` measures non-temporal stores against ordinary ones from a quarter
    /// of it.
    nt_min_bytes: usize,
}

impl std::fmt::Debug for CodeGen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CodeGen({:?})", self.tiers)
    }
}

impl CodeGen {
    /// The generators of `tier`: a concrete tier, or for `Auto` the ones the registry has it
    /// measure on this host. A tier the host cannot run is an error, unless `opts.runner` is
    /// given to run its kernels.
    ///
    /// ```
    /// use selectjit::Tier;
    /// use selectjit::codegen::{CodeGen, CodeGenOptions};
    /// // `Auto`: the generators this host runs (an error in the no-JIT build only).
    /// if let Ok(cg) = CodeGen::new(Tier::Auto, CodeGenOptions::default()) {
    ///     assert!(cg.is_auto());
    /// }
    /// // One tier the host runs, and nothing else.
    /// if let Some(&t) = Tier::host_tiers().first() {
    ///     let cg = CodeGen::new(t, CodeGenOptions::default())?;
    ///     assert_eq!(cg.tiers(), [t]);
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn new(tier: Tier, opts: CodeGenOptions) -> Result<CodeGen> {
        let nt_min_bytes = opts.nt_min_bytes;
        let set = registry::generators(tier, opts)?;
        let tiers = set.gens.iter().map(|g| g.tier()).collect();
        Ok(CodeGen {
            _live: set.live,
            gens: set.gens,
            fallback: set.fallback,
            tiers,
            auto: tier == Tier::Auto,
            nt_min_bytes,
        })
    }

    /// The preferred tier: the one asked for, or for `Auto` the widest the host runs (what
    /// kernels are compiled with before anything was measured).
    ///
    /// ```
    /// let engine = selectjit::Engine::new();
    /// if let Some(cg) = engine.codegen() {
    ///     assert_eq!(Some(cg.tier()), engine.tier());
    ///     assert_eq!(cg.tiers().last(), Some(&cg.tier())); // the preferred one comes last
    /// }
    /// ```
    pub fn tier(&self) -> Tier {
        *self.tiers.last().expect("at least one tier")
    }

    /// The tiers this generator compiles with (more than one: the engine measures them).
    ///
    /// ```
    /// use selectjit::{Engine, Tier};
    /// if let Some(cg) = Engine::new().codegen() {
    ///     // `Auto` measures among the tiers this host runs.
    ///     assert!(!cg.tiers().is_empty());
    ///     assert!(cg.tiers().iter().all(|t| Tier::host_tiers().contains(t)));
    /// }
    /// ```
    pub fn tiers(&self) -> &[Tier] {
        &self.tiers
    }

    /// Whether the engine's tier was `Auto` (chosen by measuring).
    ///
    /// ```
    /// use selectjit::{Engine, EngineConfig, Tier};
    /// if let Some(cg) = Engine::new().codegen() {
    ///     assert!(cg.is_auto()); // the default tier
    /// }
    /// if let Some(&t) = Tier::host_tiers().first() {
    ///     let engine = Engine::with_config(EngineConfig::default().tier(t))?;
    ///     assert!(!engine.codegen().unwrap().is_auto());
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn is_auto(&self) -> bool {
        self.auto
    }

    /// A single-pass n-way kernel of `spec` from the preferred generator of the engine's tier
    /// that has one (`None`: none has, and the engine runs such calls in tiles of two-way
    /// passes). Not from the fallback: it compiles the two-way signatures the tier does not
    /// cover, and an n-way call of such a tier runs in tiles of its own passes.
    pub(crate) fn compile_nway(&self, spec: &NwaySpec) -> Option<Result<NwayKernel>> {
        self.gens.iter().rev().find_map(|g| g.compile_nway(spec))
    }

    /// Outputs of at least this many bytes are stored non-temporally where a kernel can.
    pub(crate) fn nt_min_bytes(&self) -> usize {
        self.nt_min_bytes
    }

    /// Whether kernels run through a [`CodeRunner`](crate::codegen::CodeRunner) (an emulator).
    ///
    /// ```
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     // Without a runner, every kernel runs on this CPU.
    ///     assert!(!cg.emulates());
    ///     assert!(!cg.describe().contains("(emulated)"));
    /// }
    /// ```
    pub fn emulates(&self) -> bool {
        self.gens.iter().any(|g| g.emulates())
    }

    /// Whether some generator compiles `sig` (otherwise the engine runs it another way:
    /// predicates no generator fuses take the blocked path).
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     // Every generator compiles every mask signature.
    ///     assert!(cg.covers(&plan_contiguous(4, 1000).unwrap()));
    /// }
    /// ```
    pub fn covers(&self, sig: &Signature) -> bool {
        self.all().any(|g| g.covers(sig))
    }

    /// Every generator, the fallback last.
    fn all(&self) -> impl Iterator<Item = &dyn Generator> {
        self.gens.iter().chain(&self.fallback).map(|g| &**g)
    }

    /// The generator that compiles `sig` when asked for `tier`: `tier`'s, or the fallback
    /// where that one does not cover the signature.
    fn gen_for(&self, tier: Tier, sig: &Signature) -> Result<&dyn Generator> {
        self.gens
            .iter()
            .find(|g| g.tier() == tier && g.covers(sig))
            .or_else(|| self.fallback.as_ref().filter(|g| g.covers(sig)))
            .map(|g| &**g)
            .ok_or_else(|| {
                Error::codegen(format!("no tier of this build compiles {sig} (as {tier})"))
            })
    }

    /// The tier that compiles `sig` when asked for `tier`: `tier`, or the fallback's where
    /// `tier`'s generator does not cover the signature.
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     // Each tier compiles a mask signature itself: no fallback.
    ///     let sig = plan_contiguous(2, 1000).unwrap();
    ///     for &t in cg.tiers() {
    ///         assert_eq!(cg.tier_for(t, &sig), t);
    ///     }
    /// }
    /// ```
    pub fn tier_for(&self, tier: Tier, sig: &Signature) -> Tier {
        self.gen_for(tier, sig).map_or(tier, |g| g.tier())
    }

    /// The host as this generator sees it: the tiers, and the generators' own descriptions
    /// (Cranelift's target and ISA flags).
    ///
    /// ```
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let d = cg.describe(); // e.g. "tier auto, measured among avx512, avx2; cranelift x86_64-..."
    ///     assert!(d.starts_with("tier auto"));
    ///     assert!(d.contains(cg.tier().name()));
    /// }
    /// ```
    pub fn describe(&self) -> String {
        let emu = if self.emulates() { " (emulated)" } else { "" };
        let names: Vec<&str> = self.tiers.iter().map(|t| t.name()).collect();
        let how = if self.auto {
            "auto, measured among "
        } else {
            ""
        };
        let mut s = format!("tier {how}{}{emu}", names.join(", "));
        for g in self.all() {
            if let Some(d) = g.describe() {
                s += &format!("; {} {d}", g.tier().name());
            }
        }
        s
    }

    /// Compiles `sig` with its dims and strides baked in, with the preferred tier.
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let sig = plan_contiguous(4, 1000).unwrap();
    ///     let kernel = cg.compile(&sig)?;
    ///     assert_eq!(kernel.signature(), &sig);
    ///     assert!(!kernel.is_generic());
    ///     assert_eq!(kernel.tier(), cg.tier());
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn compile(&self, sig: &Signature) -> Result<Kernel> {
        self.compile_with(self.tier(), sig, false)
    }

    /// Compiles the shape-generic kernel of `p` with the preferred tier.
    ///
    /// ```
    /// use selectjit::plan::{Pattern, plan_contiguous};
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let p = Pattern::of(&plan_contiguous(4, 1000).unwrap());
    ///     let kernel = cg.compile_generic(&p)?; // runs every contiguous 4-byte call
    ///     assert!(kernel.is_generic());
    ///     assert_eq!(Pattern::of(kernel.signature()), p);
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn compile_generic(&self, p: &Pattern) -> Result<Kernel> {
        self.compile_with(self.tier(), &p.representative(), true)
    }

    /// The candidates for `sig`'s exact kernel, the preferred one first: the engine's tier
    /// alone (with non-temporal stores from `nt_min_bytes` of output where its generator has
    /// them); under `Auto` the variants each generator offers for measuring (store kinds,
    /// vector widths and walks: see [`Variant`]), the widest tier's first.
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let sig = plan_contiguous(4, 1 << 20).unwrap();
    ///     let variants = cg.variants(&sig);
    ///     assert!(!variants.is_empty());
    ///     assert_eq!(variants[0].tier, cg.tier()); // the widest tier's first
    ///     assert!(variants.iter().all(|v| cg.tiers().contains(&v.tier)));
    /// }
    /// ```
    pub fn variants(&self, sig: &Signature) -> Vec<Variant> {
        self.candidates(sig).variants
    }

    /// [`CodeGen::variants`] with the variant to keep unless beaten by a margin.
    pub(crate) fn candidates(&self, sig: &Signature) -> Candidates {
        if !self.auto {
            let v = self
                .gen_for(self.tier(), sig)
                .map(|g| g.fixed(sig, false, self.nt_min_bytes))
                .unwrap_or_else(|_| Variant::of(self.tier()));
            return Candidates {
                variants: vec![v],
                prefer: None,
            };
        }
        let mut all = Candidates::default();
        for &t in self.tiers.iter().rev() {
            let Ok(g) = self.gen_for(t, sig) else {
                continue;
            };
            let c = g.candidates(sig, self.nt_min_bytes);
            for v in c.variants {
                if !all.variants.contains(&v) {
                    all.variants.push(v);
                }
            }
            all.prefer = all.prefer.or(c.prefer);
        }
        all
    }

    /// Compiles `sig`'s exact kernel as variant `v` (one of [`CodeGen::variants`]).
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let sig = plan_contiguous(4, 1 << 20).unwrap();
    ///     for v in cg.variants(&sig) {
    ///         let kernel = cg.compile_variant(v, &sig)?;
    ///         assert_eq!(kernel.variant(), v);
    ///     }
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn compile_variant(&self, v: Variant, sig: &Signature) -> Result<Kernel> {
        self.gen_for(v.tier, sig)?.compile(v, sig, false)
    }

    /// Compiles `sig` (exact, or `generic`: the shape-generic kernel of its pattern) with
    /// `tier`, one of [`CodeGen::tiers`] (the fallback where `tier`'s generator does not cover
    /// it), as the variant its generator uses when nothing is measured.
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let sig = plan_contiguous(8, 1000).unwrap();
    ///     for &t in cg.tiers() {
    ///         let exact = cg.compile_with(t, &sig, false)?;
    ///         let generic = cg.compile_with(t, &sig, true)?;
    ///         assert_eq!((exact.tier(), generic.tier()), (t, t));
    ///         assert!(!exact.is_generic() && generic.is_generic());
    ///     }
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn compile_with(&self, tier: Tier, sig: &Signature, generic: bool) -> Result<Kernel> {
        let g = self.gen_for(tier, sig)?;
        g.compile(g.fixed(sig, generic, self.nt_min_bytes), sig, generic)
    }

    /// The machine code of `sig`'s exact kernel as variant `v` (bytes of x86 code, or
    /// Cranelift's listing), and the tier that made it.
    ///
    /// ```
    /// use selectjit::codegen::MachineCode;
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     let sig = plan_contiguous(4, 1000).unwrap();
    ///     let v = cg.variants(&sig)[0];
    ///     let (tier, code) = cg.machine_code(v, &sig)?;
    ///     assert_eq!(tier, v.tier);
    ///     match code {
    ///         MachineCode::X86(bytes) => assert!(tier.is_x86() && !bytes.is_empty()),
    ///         MachineCode::Listing(text) => assert!(!tier.is_x86() && !text.is_empty()),
    ///     }
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn machine_code(&self, v: Variant, sig: &Signature) -> Result<(Tier, MachineCode)> {
        let g = self.gen_for(v.tier, sig)?;
        Ok((g.tier(), g.machine_code(v, sig)?))
    }

    /// The intermediate representation of `sig`'s exact kernel from the first generator that
    /// has one (Cranelift IR), if any.
    ///
    /// ```
    /// use selectjit::plan::plan_contiguous;
    /// if let Some(cg) = selectjit::Engine::new().codegen() {
    ///     // Cranelift IR where this build has the Cranelift tier (the x86 tiers have none).
    ///     if let Some(ir) = cg.ir_text(&plan_contiguous(4, 1000).unwrap()) {
    ///         assert!(ir.starts_with("function"));
    ///     }
    /// }
    /// ```
    pub fn ir_text(&self, sig: &Signature) -> Option<String> {
        self.all().find_map(|g| g.ir_text(sig))
    }
}

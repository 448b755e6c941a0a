//! The x86-64 tier: AVX2 and AVX-512 machine code emitted directly with `iced-x86`.
//!
//! The generator covers every signature (element widths 1, 2, 4, 8 and 16, every rank up to
//! the planner's limit, any strides, exact and shape-generic kernels), with the row shapes of the
//! Cranelift tier: a vector select (AVX2: `vpcmpeq*` lane masks and `vpblendvb` / `vblendvps` /
//! `vblendvpd`; AVX-512: `vptestmb` opmasks, `kshiftr`, `vpblendm*` and masked tails), a row copy
//! or fill when cond is constant along the row, and a branch-free strided loop for everything
//! else. Exact kernels whose output reaches [`X86Gen::nt_min_bytes`] write long rows with
//! non-temporal stores (aligned, then `sfence`). See `emit.rs` for the register plan and the
//! loop nest, and `emit/avx2.rs` / `emit/avx512.rs` for the rows. Nothing is left to Cranelift:
//! [`X86Gen::covers`] refuses only what no tier compiles (widths other than 1, 2, 4, 8, 16,
//! empty or over-long dim lists).

mod emit;
mod exec;
pub(crate) mod level;
pub(crate) mod plugin;

pub use level::Level;

use crate::error::{Error, Result};
use crate::plan::Signature;
use crate::tier::{Tier, Variant};

/// The x86 code generator of one level.
#[derive(Debug, Clone)]
pub struct X86Gen {
    level: Level,
    nt_min_bytes: usize,
}

impl X86Gen {
    /// A generator for `level`; exact kernels with at least `nt_min_bytes` of output use
    /// non-temporal stores.
    ///
    /// ```
    /// use selectjit::codegen::x86::{Level, X86Gen};
    /// use selectjit::plan::plan_contiguous;
    /// let xg = X86Gen::new(Level::Avx2, 1 << 20);
    /// assert_eq!(xg.nt_min_bytes(), 1 << 20);
    /// // Emitting needs no AVX2 on this host; running the code does.
    /// let code = xg.emit(&plan_contiguous(4, 1000).unwrap(), false)?;
    /// assert!(!code.is_empty());
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn new(level: Level, nt_min_bytes: usize) -> X86Gen {
        X86Gen {
            level,
            nt_min_bytes,
        }
    }

    /// The generator of an x86 `tier` (`None` for the others).
    pub(crate) fn for_tier(tier: Tier, nt_min_bytes: usize) -> Option<X86Gen> {
        let level = match tier {
            Tier::Avx2 => Level::Avx2,
            Tier::Avx512 => Level::Avx512,
            _ => return None,
        };
        Some(X86Gen::new(level, nt_min_bytes))
    }

    /// The instruction-set level.
    ///
    /// ```
    /// use selectjit::codegen::x86::{Level, X86Gen};
    /// assert_eq!(X86Gen::new(Level::Avx512, usize::MAX).level(), Level::Avx512);
    /// ```
    pub fn level(&self) -> Level {
        self.level
    }

    /// The tier of its kernels.
    ///
    /// ```
    /// use selectjit::Tier;
    /// use selectjit::codegen::x86::{Level, X86Gen};
    /// assert_eq!(X86Gen::new(Level::Avx2, usize::MAX).tier(), Tier::Avx2);
    /// ```
    pub fn tier(&self) -> Tier {
        self.level.tier()
    }

    /// The output size from which exact kernels use non-temporal stores.
    ///
    /// ```
    /// use selectjit::codegen::x86::{Level, X86Gen};
    /// assert_eq!(X86Gen::new(Level::Avx2, 8 << 20).nt_min_bytes(), 8 << 20);
    /// ```
    pub fn nt_min_bytes(&self) -> usize {
        self.nt_min_bytes
    }

    /// Whether this generator emits code for `sig` (otherwise Cranelift compiles it).
    ///
    /// ```
    /// use selectjit::DType;
    /// use selectjit::codegen::x86::{Level, X86Gen};
    /// use selectjit::plan::{Canon, CondKind, Signature, plan_contiguous};
    /// let xg = X86Gen::new(Level::Avx512, usize::MAX);
    /// assert!(xg.covers(&plan_contiguous(16, 100).unwrap()));
    /// let lt = CondKind::Cmp(Canon::Lt, DType::F32);
    /// assert!(xg.covers(&Signature::with_cond(4, lt, &[8], [&[1], &[1], &[1], &[1], &[1]])?));
    /// // Predicates of complex dtypes are left to the engine's blocked path.
    /// let eq = CondKind::Cmp(Canon::Eq, DType::Complex64);
    /// assert!(!xg.covers(&Signature::with_cond(4, eq, &[8], [&[1], &[1], &[1], &[1], &[1]])?));
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn covers(&self, sig: &Signature) -> bool {
        // Predicates of complex dtypes are left to the engine's blocked path, and so are
        // those of f16 at the AVX2 level on a host without F16C (`vcvtph2ps`), which the AVX2
        // tier does not otherwise require.
        emit::covers_cond(sig.cond)
            && (self.level != Level::Avx2
                || sig.cond.dtype() != Some(crate::dtype::DType::F16)
                || host_f16c())
            && [1, 2, 4, 8, 16].contains(&sig.width)
            && !sig.dims.is_empty()
            && sig.rank() <= crate::shape::MAX_RANK
            && sig.strides.iter().all(|s| s.len() == sig.rank())
    }

    /// Whether the exact kernel of `sig` stores its output with non-temporal stores.
    ///
    /// ```
    /// use selectjit::codegen::x86::{Level, X86Gen};
    /// use selectjit::plan::plan_contiguous;
    /// let xg = X86Gen::new(Level::Avx2, 1 << 20);
    /// assert!(!xg.uses_nt(&plan_contiguous(4, 1000).unwrap()));
    /// assert!(xg.uses_nt(&plan_contiguous(4, 1 << 18).unwrap())); // 1 MiB of output
    /// ```
    pub fn uses_nt(&self, sig: &Signature) -> bool {
        sig.out_bytes() >= self.nt_min_bytes
    }

    /// The machine code of `sig`'s kernel (exact, or shape-generic for its pattern), entered at
    /// its first byte: position-independent, constants included.
    ///
    /// ```
    /// use selectjit::Tier;
    /// use selectjit::codegen::x86::{Level, X86Gen};
    /// use selectjit::codegen::{CodeGen, CodeGenOptions};
    /// use selectjit::plan::plan_contiguous;
    /// let xg = X86Gen::new(Level::Avx2, usize::MAX);
    /// let sig = plan_contiguous(4, 1000).unwrap();
    /// let exact = xg.emit(&sig, false)?;
    /// assert_ne!(exact, xg.emit(&sig, true)?); // the shape-generic kernel reads its dims
    /// // The AVX2 tier's kernels run exactly this code.
    /// if Level::Avx2.available() {
    ///     let cg = CodeGen::new(Tier::Avx2, CodeGenOptions::default())?;
    ///     assert_eq!(cg.compile(&sig)?.x86_code(), Some(&exact[..]));
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn emit(&self, sig: &Signature, generic: bool) -> Result<Vec<u8>> {
        self.emit_parts(sig, generic).map(|(code, _)| code)
    }

    /// Like [`X86Gen::emit`], with the length of the instruction part: the constants the code
    /// reads (RIP-relative) follow it.
    ///
    /// ```
    /// use selectjit::codegen::x86::{Level, X86Gen};
    /// use selectjit::plan::plan_contiguous;
    /// let xg = X86Gen::new(Level::Avx512, usize::MAX);
    /// let sig = plan_contiguous(2, 1000).unwrap();
    /// let (code, len) = xg.emit_parts(&sig, false)?;
    /// assert!(len > 0 && len <= code.len()); // instructions, then constants
    /// assert_eq!(code, xg.emit(&sig, false)?);
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn emit_parts(&self, sig: &Signature, generic: bool) -> Result<(Vec<u8>, usize)> {
        let v = Variant {
            nt: !generic && self.uses_nt(sig),
            ..Variant::of(self.tier())
        };
        self.emit_with(sig, generic, v)
    }

    /// Whether `sig`'s exact kernel has vector-select rows long enough for a main-loop block,
    /// which [`Variant::wide`] makes of zmm vectors (element widths up to 8 bytes).
    ///
    /// ```
    /// use selectjit::codegen::x86::X86Gen;
    /// use selectjit::plan::plan_contiguous;
    /// assert!(X86Gen::runs_wide(&plan_contiguous(4, 1000).unwrap()));
    /// assert!(!X86Gen::runs_wide(&plan_contiguous(4, 4).unwrap())); // too short for a block
    /// assert!(!X86Gen::runs_wide(&plan_contiguous(16, 1000).unwrap())); // 16-byte elements
    /// ```
    pub fn runs_wide(sig: &Signature) -> bool {
        block_rows(sig)
    }

    /// Whether [`Variant::prefetchw`] changes `sig`'s exact kernel: the same rows as
    /// [`X86Gen::runs_wide`] (width 16 addresses its output in a register the claim cannot use).
    ///
    /// ```
    /// use selectjit::codegen::x86::X86Gen;
    /// use selectjit::plan::{plan, plan_contiguous};
    /// assert!(X86Gen::runs_prefetchw(&plan_contiguous(4, 1 << 20).unwrap()));
    /// // then read down a column: a strided row, no block to claim lines for.
    /// let strided = plan(4, &[1000, 2], [&[2, 1], &[1, 1000], &[2, 1], &[2, 1]]).unwrap();
    /// assert!(!X86Gen::runs_prefetchw(&strided));
    /// ```
    pub fn runs_prefetchw(sig: &Signature) -> bool {
        block_rows(sig)
    }

    /// Whether [`Variant::four_way`] changes `sig`'s exact kernel with non-temporal stores:
    /// vector-select rows long enough to walk four parts of each at once, or an outer loop of
    /// rows to walk four rows at once.
    ///
    /// ```
    /// use selectjit::codegen::x86::{Level, X86Gen};
    /// use selectjit::plan::{plan, plan_contiguous};
    /// let xg = X86Gen::new(Level::Avx2, 0);
    /// assert!(xg.runs_four_way(&plan_contiguous(4, 1 << 20).unwrap()));
    /// let strided = plan(4, &[1000, 2], [&[2, 1], &[1, 1000], &[2, 1], &[2, 1]]).unwrap();
    /// assert!(!xg.runs_four_way(&strided));
    /// ```
    pub fn runs_four_way(&self, sig: &Signature) -> bool {
        emit::runs_four_way(sig, self.level)
    }

    /// Like [`X86Gen::emit_parts`], with the store kind, vector width and walk of `v` (its
    /// tier is this generator's): non-temporal stores for exact kernels only (shape-generic
    /// kernels never use them), zmm blocks on the AVX-512 level only, four-part walks of
    /// non-temporal rows only.
    ///
    /// ```
    /// use selectjit::codegen::x86::{Level, X86Gen};
    /// use selectjit::plan::plan_contiguous;
    /// use selectjit::{Tier, Variant};
    /// let xg = X86Gen::new(Level::Avx512, usize::MAX);
    /// let sig = plan_contiguous(4, 1 << 16).unwrap();
    /// let plain = xg.emit_with(&sig, false, Variant::of(Tier::Avx512))?;
    /// assert_eq!(plain, xg.emit_parts(&sig, false)?); // the variant `emit` uses
    /// let wide = Variant { wide: true, ..Variant::of(Tier::Avx512) };
    /// assert_ne!(xg.emit_with(&sig, false, wide)?.0, plain.0); // zmm blocks
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn emit_with(
        &self,
        sig: &Signature,
        generic: bool,
        v: Variant,
    ) -> Result<(Vec<u8>, usize)> {
        if !self.covers(sig) {
            return Err(Error::codegen(format!("x86 tier does not cover {sig}")));
        }
        // The emitter drops what does not apply (zmm below AVX-512, walks without
        // non-temporal stores, both in generic kernels).
        let kind = emit::Kind {
            nt: v.nt,
            wide: v.wide,
            four_way: v.four_way,
            prefetchw: v.prefetchw,
        };
        emit::emit_kernel(sig, generic, self.level, kind)
            .map_err(|e| Error::codegen_from(format!("x86 {:?} code for {sig}", self.level), e))
    }
}

impl X86Gen {
    /// The machine code of an n-way kernel of `spec` (`None` where this level has no n-way
    /// kernel for it).
    pub(crate) fn emit_nway(
        &self,
        spec: &crate::kernel::nway::NwaySpec,
    ) -> Option<Result<Vec<u8>>> {
        let code = match self.level {
            Level::Avx2 if emit::covers_nway_avx2(spec) => emit::emit_nway_avx2(spec),
            Level::Avx512 if emit::covers_nway(spec) => emit::emit_nway(spec),
            _ => return None,
        };
        Some(code.map_err(|e| Error::codegen_from(format!("x86 {:?} n-way code", self.level), e)))
    }
}

/// Vector-select rows of elements up to 8 bytes long enough for a main-loop block.
fn block_rows(sig: &Signature) -> bool {
    sig.width <= 8
        && matches!(sig.row_shape(), crate::plan::RowShape::Select { .. })
        && sig
            .dims
            .last()
            .is_some_and(|&n| n * sig.width >= emit::BLOCK_BYTES)
}

/// Whether the host converts f16 to f32 in vectors (F16C; AVX-512 hosts always do).
fn host_f16c() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

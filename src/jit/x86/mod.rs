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
    pub fn new(level: Level, nt_min_bytes: usize) -> X86Gen {
        X86Gen {
            level,
            nt_min_bytes,
        }
    }

    /// The generator of an x86 `tier` (`None` for the others).
    pub fn for_tier(tier: Tier, nt_min_bytes: usize) -> Option<X86Gen> {
        let level = match tier {
            Tier::Avx2 => Level::Avx2,
            Tier::Avx512 => Level::Avx512,
            _ => return None,
        };
        Some(X86Gen::new(level, nt_min_bytes))
    }

    /// The instruction-set level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The tier of its kernels.
    pub fn tier(&self) -> Tier {
        self.level.tier()
    }

    /// The output size from which exact kernels use non-temporal stores.
    pub fn nt_min_bytes(&self) -> usize {
        self.nt_min_bytes
    }

    /// Whether this generator emits code for `sig` (otherwise Cranelift compiles it).
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
    pub fn uses_nt(&self, sig: &Signature) -> bool {
        sig.out_bytes() >= self.nt_min_bytes
    }

    /// The machine code of `sig`'s kernel (exact, or shape-generic for its pattern), entered at
    /// its first byte: position-independent, constants included.
    pub fn emit(&self, sig: &Signature, generic: bool) -> Result<Vec<u8>> {
        self.emit_parts(sig, generic).map(|(code, _)| code)
    }

    /// Like [`X86Gen::emit`], with the length of the instruction part: the constants the code
    /// reads (RIP-relative) follow it.
    pub fn emit_parts(&self, sig: &Signature, generic: bool) -> Result<(Vec<u8>, usize)> {
        let v = Variant {
            nt: !generic && self.uses_nt(sig),
            ..Variant::of(self.tier())
        };
        self.emit_with(sig, generic, v)
    }

    /// Whether `sig`'s exact kernel has vector-select rows long enough for a main-loop block,
    /// which [`Variant::wide`] makes of zmm vectors (element widths up to 8 bytes).
    pub fn runs_wide(sig: &Signature) -> bool {
        block_rows(sig)
    }

    /// Whether [`Variant::prefetchw`] changes `sig`'s exact kernel: the same rows as
    /// [`X86Gen::runs_wide`] (width 16 addresses its output in a register the claim cannot use).
    pub fn runs_prefetchw(sig: &Signature) -> bool {
        block_rows(sig)
    }

    /// Whether [`Variant::four_way`] changes `sig`'s exact kernel with non-temporal stores:
    /// vector-select rows long enough to walk four parts of each at once, or an outer loop of
    /// rows to walk four rows at once.
    pub fn runs_four_way(&self, sig: &Signature) -> bool {
        emit::runs_four_way(sig, self.level)
    }

    /// Like [`X86Gen::emit_parts`], with the store kind, vector width and walk of `v` (its
    /// tier is this generator's): non-temporal stores for exact kernels only (shape-generic
    /// kernels never use them), zmm blocks on the AVX-512 level only, four-part walks of
    /// non-temporal rows only.
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

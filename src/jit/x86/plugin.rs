//! The x86 tier as a [`Generator`]: which variants it offers for measuring, and its kernels in
//! executable memory of their own (or run by a [`CodeRunner`] where the host lacks the level).

use std::sync::Arc;

use super::X86Gen;
use super::exec::ExecMem;
use super::level::Level;
use crate::error::Result;
use crate::jit::generator::{Candidates, Generator, MachineCode};
use crate::kernel::abi::{CodeRunner, KernelFn};
use crate::kernel::nway::{Emulated, Entry, NwayFn, NwayKernel, NwayRowsFn, NwaySpec};
use crate::kernel::{CodeOwner, Kernel};
use crate::plan::{RowShape, Signature};
use crate::tier::{Tier, Variant};

/// Outputs of at least this many bytes (past a typical L2) are offered [`Variant::prefetchw`]
/// candidates, up to `nt_min_bytes`.
const PREFETCHW_MIN_BYTES: usize = 1 << 20;

/// Up to this much output, how much faster than the variant with whole-line (zmm) stores and
/// `prefetchw` another variant with ordinary stores must be to be chosen. In interleaved
/// rounds on a shared Zen 4 host (an L3 of 32 MiB), outputs of 2-4 MiB (traffic 4-12 MiB)
/// ran 0.90-1.08x their copy roofline with it, in every bench run, and 1.08-1.4x with
/// another variant in about half the runs, which the trial's calls ranked within a few
/// percent of it; from 6 MiB of output it ran 1.05-1.11x, no better than the others.
const WHOLE_MAX_BYTES: usize = 4 << 20;
/// See [`WHOLE_MAX_BYTES`] and [`WIDE_MAX_BYTES`].
const WHOLE_MARGIN: f64 = 0.08;

/// Above [`WHOLE_MAX_BYTES`] and up to this much output, the variant with whole-line (zmm)
/// stores and no `prefetchw` is the one kept unless another variant with ordinary stores is
/// faster than it by [`WHOLE_MARGIN`]. nan_to_zero_f64_1m (8 MiB out, 8 MiB in), in
/// interleaved rounds on a shared Zen 4 host: 1.00-1.07x a memcpy of its traffic with it in
/// ten processes of ten, 1.00-1.34x with 256-bit stores, 1.09-1.43x with `prefetchw`; of 37
/// earlier full bench runs, the 7 that kept it ran 1.01-1.11x its roofline (above 1.10x once),
/// the 30 whose trial had ranked another first 1.02-1.41x (above 1.10x 20 times).
const WIDE_MAX_BYTES: usize = 16 << 20;

/// One level of the x86 tier as a generator of the registry.
pub(crate) struct X86Tier {
    x86: X86Gen,
    /// Runs the kernels where the host lacks the level (an emulator), else `None`.
    runner: Option<Arc<dyn CodeRunner>>,
}

impl X86Tier {
    /// The generator of x86 `tier` (`None` for the others), its kernels run by `runner` when
    /// one is given.
    pub(crate) fn new(
        tier: Tier,
        nt_min_bytes: usize,
        runner: Option<Arc<dyn CodeRunner>>,
    ) -> Option<X86Tier> {
        X86Gen::for_tier(tier, nt_min_bytes).map(|x86| X86Tier { x86, runner })
    }
}

/// A kernel's executable mapping, unmapped when the kernel is dropped.
struct Mapped(ExecMem);

/// The owner of an emulated kernel's code: none (the code is in the kernel).
struct NoCode;

impl CodeOwner for NoCode {}

impl CodeOwner for Mapped {
    fn bytes(&self) -> Option<&[u8]> {
        Some(self.0.bytes())
    }
}

impl Generator for X86Tier {
    fn tier(&self) -> Tier {
        self.x86.tier()
    }

    fn covers(&self, sig: &Signature) -> bool {
        self.x86.covers(sig)
    }

    fn fixed(&self, sig: &Signature, generic: bool, nt_min_bytes: usize) -> Variant {
        Variant {
            nt: !generic && sig.out_bytes() >= nt_min_bytes,
            ..Variant::of(self.tier())
        }
    }

    /// Ordinary stores; from a quarter of `nt_min_bytes` of output on (8 MiB by default: the
    /// call's traffic then fills a typical last-level cache), for vector and copy rows,
    /// non-temporal ones too. Smaller outputs are not offered non-temporal stores: left in the
    /// cache they serve whatever reads them next, which a select's own time does not show.
    /// AVX-512 is also offered with zmm blocks (ordinary stores) for vector-select rows long
    /// enough to run one: a 64-byte vector per line halves the µops per byte stored, which
    /// wins where stores, not the loads from DRAM, pace the row. Non-temporal kernels of
    /// vector-select rows of `nt_min_bytes` of output or more are also offered as four-way
    /// walks (four parts of each long row, or four rows a quarter of the loop apart, at
    /// once): faster where the inputs come from DRAM, slower where they stay in the last-level
    /// cache, so not offered below (every candidate more is one more chance for a noisy trial
    /// to keep a slower one). Outputs from 1 MiB up to `nt_min_bytes` — past L2, short of
    /// DRAM — are also offered the ordinary-store candidates as [`Variant::prefetchw`]
    /// kernels. Up to [`WIDE_MAX_BYTES`] of output the zmm variant (with `prefetchw` up to
    /// [`WHOLE_MAX_BYTES`]) is preferred.
    fn candidates(&self, sig: &Signature, nt_min_bytes: usize) -> Candidates {
        let tier = self.tier();
        let out_bytes = sig.out_bytes();
        let probe_nt = nt_min_bytes != usize::MAX
            && out_bytes >= nt_min_bytes / 4
            && sig.row_shape() != RowShape::Strided;
        let mut v = vec![Variant::of(tier)];
        if probe_nt {
            v.push(Variant {
                nt: true,
                ..Variant::of(tier)
            });
        }
        if probe_nt && out_bytes >= nt_min_bytes && self.x86.runs_four_way(sig) {
            v.push(Variant {
                nt: true,
                four_way: true,
                ..Variant::of(tier)
            });
        }
        if self.x86.level() == Level::Avx512 && X86Gen::runs_wide(sig) {
            v.push(Variant {
                wide: true,
                ..Variant::of(tier)
            });
        }
        if (PREFETCHW_MIN_BYTES..nt_min_bytes).contains(&out_bytes) && X86Gen::runs_prefetchw(sig) {
            let ordinary: Vec<Variant> = v.iter().filter(|c| !c.nt).copied().collect();
            v.extend(ordinary.into_iter().map(|c| Variant {
                prefetchw: true,
                ..c
            }));
        }
        let whole = |prefetchw: bool| {
            v.iter()
                .copied()
                .find(|c| c.wide && c.prefetchw == prefetchw && !c.nt)
        };
        let prefer = match out_bytes {
            b if b <= WHOLE_MAX_BYTES => whole(true),
            b if b <= WIDE_MAX_BYTES => whole(false),
            _ => None,
        };
        Candidates {
            prefer: prefer.map(|p| (p, WHOLE_MARGIN)),
            variants: v,
        }
    }

    fn compile(&self, v: Variant, sig: &Signature, generic: bool) -> Result<Kernel> {
        let (code, _) = self.x86.emit_with(sig, generic, v)?;
        if let Some(r) = &self.runner {
            return Ok(Kernel::with_runner(
                sig.clone(),
                generic,
                v,
                code,
                r.clone(),
            ));
        }
        let mem = ExecMem::new(&code)?;
        // SAFETY: the mapping holds exactly `code`, the complete kernel function `emit_with`
        // returns for `sig` (or its pattern) in the `KernelFn` convention; it stays mapped
        // while the kernel (owner of `mem`) lives.
        let entry: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(mem.as_ptr()) };
        let owner = Box::new(Mapped(mem));
        // SAFETY: `entry` is that function; it uses only the instructions of this generator's
        // level, which this host runs (the registry builds it without a runner only then), and
        // stays callable until `owner` unmaps it.
        Ok(unsafe { Kernel::owned(sig.clone(), generic, v, entry, code.len(), owner) })
    }

    fn machine_code(&self, v: Variant, sig: &Signature) -> Result<MachineCode> {
        Ok(MachineCode::X86(self.x86.emit_with(sig, false, v)?.0))
    }

    fn emulates(&self) -> bool {
        self.runner.is_some()
    }

    /// AVX-512 (on a host without it, run by the runner) and AVX2 (on a host that runs it:
    /// emulated, its n-way calls run in tiles).
    fn compile_nway(&self, spec: &NwaySpec) -> Option<Result<NwayKernel>> {
        if self.runner.is_some() && self.x86.level() != Level::Avx512 {
            return None;
        }
        let code = match self.x86.emit_nway(spec)? {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        if let Some(r) = &self.runner {
            let e = Emulated {
                code,
                runner: r.clone(),
                rows: spec.rows,
                ops: spec.operands(),
                width: spec.width,
            };
            let len = e.code.len();
            // SAFETY: emulated code is not executed by the CPU; the runner checks every access.
            return Some(Ok(unsafe {
                NwayKernel::owned(
                    self.tier(),
                    Entry::Emulated(Box::new(e)),
                    len,
                    Box::new(NoCode),
                )
            }));
        }
        Some(ExecMem::new(&code).map(|mem| {
            let p = mem.as_ptr();
            let entry = if spec.rows {
                // SAFETY: the memory holds exactly `code`, the complete n-way function
                // `emit_nway` returns for a spec of rows, in the `NwayRowsFn` convention; it
                // stays mapped while the kernel (owner of `mem`) lives.
                Entry::Rows(unsafe { std::mem::transmute::<*const u8, NwayRowsFn>(p) })
            } else {
                // SAFETY: as above, a flat spec's function in the `NwayFn` convention.
                Entry::Flat(unsafe { std::mem::transmute::<*const u8, NwayFn>(p) })
            };
            // SAFETY: `entry` is that function; it uses instructions of this generator's level
            // only, which this host runs (the registry builds it without a runner only then).
            unsafe { NwayKernel::owned(self.tier(), entry, code.len(), Box::new(Mapped(mem))) }
        }))
    }
}

//! Which kernel runs a signature: the AOT table's exact kernel, else (with a code generator)
//! the cache's exact kernel of a hot signature — compiled on the call that makes it hot — or
//! the shape-generic kernel of its pattern; without a code generator, the AOT table's
//! shape-generic kernel; `None` leaves the call to the static kernels.

use std::sync::Arc;

use super::{AOT_EXACT_RUNS, AOT_GENERIC_RUNS, Engine};
use crate::kernel::Kernel;
use crate::plan::{Pattern, Signature};

#[cfg(feature = "jit")]
use crate::{cache::Lookup, env, jit::CodeGen};

impl Engine {
    /// The kernel for `sig` under the engine's policy: the exact kernel of the AOT table when it
    /// has one; else, with a code generator, its exact kernel when the signature is hot
    /// (compiled on the call that makes it so), otherwise the shape-generic kernel of its
    /// pattern (the AOT table's when it has one); without a code generator, the AOT table's
    /// shape-generic kernel. `None` when there is none or code generation failed (recorded),
    /// so the caller runs the static kernels.
    pub fn kernel(&self, sig: &Signature) -> Option<Arc<Kernel>> {
        self.kernel_with(sig, self.config.exact_after)
    }

    pub(super) fn kernel_with(&self, sig: &Signature, exact_after: u32) -> Option<Arc<Kernel>> {
        if let Some(k) = self.aot_kernel(sig, false) {
            return Some(k);
        }
        #[cfg(feature = "jit")]
        if let Ok(jit) = &self.jit {
            let k = self
                .kernel_locked(jit, sig, exact_after)
                .or_else(|| self.aot_kernel(sig, true))?;
            // Kernels of the AOT table are not memoised: their runs are counted as such.
            if !k.is_generic() && !k.is_linked() {
                self.memoise(sig, &k);
            }
            return Some(k);
        }
        let _ = exact_after;
        self.aot_kernel(sig, true)
    }

    /// The AOT table's exact kernel of `sig`, or (`generic`) its shape-generic kernel of `sig`'s
    /// pattern; counts the run.
    fn aot_kernel(&self, sig: &Signature, generic: bool) -> Option<Arc<Kernel>> {
        let t = self.config.aot.as_ref()?;
        let (k, which) = if generic {
            (t.generic(&Pattern::of(sig))?, AOT_GENERIC_RUNS)
        } else {
            (t.exact(sig)?, AOT_EXACT_RUNS)
        };
        self.runs[which].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(k.clone())
    }

    #[cfg(feature = "jit")]
    fn kernel_locked(
        &self,
        jit: &CodeGen,
        sig: &Signature,
        exact_after: u32,
    ) -> Option<Arc<Kernel>> {
        let (what, evicted) = self.lock_cache().lookup(sig, exact_after);
        if let Some(old) = evicted {
            env::log(|| format!("evict,{old}"));
        }
        match what {
            Lookup::Exact(k) => Some(k),
            Lookup::Failed => None,
            Lookup::Generic => self.generic_kernel(jit, sig),
            Lookup::Compile => {
                // Compile outside the cache lock, so that hits of other threads are not held up.
                let t = std::time::Instant::now();
                let k = jit.compile(sig).map(Arc::new);
                let us = t.elapsed().as_micros() as u64;
                let k = match k {
                    Ok(k) => {
                        env::log(|| {
                            format!("compile,{},{sig},{us}us,{}B", k.tier(), k.code_bytes())
                        });
                        Some(k)
                    }
                    Err(e) => {
                        env::log(|| format!("compile,failed,{sig},{us}us,{e}"));
                        self.record_codegen_error(format!("{sig}: {e}"));
                        None
                    }
                };
                let (k, evicted) = self.lock_cache().insert(sig.clone(), k, us);
                if let Some(old) = evicted {
                    env::log(|| format!("evict,{old}"));
                }
                k
            }
        }
    }

    /// The shape-generic kernel for `sig`'s pattern, compiled on first use.
    #[cfg(feature = "jit")]
    fn generic_kernel(&self, jit: &CodeGen, sig: &Signature) -> Option<Arc<Kernel>> {
        if let Some(k) = self.aot_kernel(sig, true) {
            return Some(k);
        }
        let p = Pattern::of(sig);
        if let Some(k) = self.lock_cache().generic(&p) {
            return Some(k);
        }
        let t = std::time::Instant::now();
        match jit.compile_generic(&p) {
            Ok(k) => {
                let us = t.elapsed().as_micros() as u64;
                env::log(|| {
                    format!(
                        "compile,{}-generic,{p},{us}us,{}B",
                        k.tier(),
                        k.code_bytes()
                    )
                });
                Some(self.lock_cache().insert_generic(p, Arc::new(k), us))
            }
            Err(e) => {
                env::log(|| format!("compile,failed,{p},{e}"));
                self.record_codegen_error(format!("{p}: {e}"));
                None
            }
        }
    }
}

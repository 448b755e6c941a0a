//! Cranelift code generation for [`Signature`]s.
//!
//! One [`Jit`] holds the host ISA (detected once with `cranelift-native`) and reusable compilation
//! contexts; [`Jit::compile`] turns a signature into a [`Kernel`] with its own JIT module, so that
//! dropping the kernel returns its code memory.

mod codegen;
mod module;
#[cfg(target_arch = "x86_64")]
pub mod x86;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use cranelift_codegen::Context;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

use crate::error::{Error, Result};
use crate::plan::Signature;

use module::KernelFn;
pub use module::{Kernel, live_kernels};

/// What a shape-generic kernel depends on: the element width, the collapsed rank, the class of
/// each operand's stride along the innermost dimension (0, 1, or any other value), which decides
/// the row shape, and which outer strides are 0. Dims and all other strides are arguments of the
/// kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pattern {
    pub width: usize,
    pub rank: usize,
    /// Per operand (cond, then, else, out): 0, 1, or 2 for any other stride.
    pub inner: [u8; 4],
    /// Per operand, bit `k` set when its stride along outer dim `k` is 0 (broadcast): such
    /// strides are constants of the kernel instead of arguments.
    pub outer_zero: [u64; 4],
}

impl Pattern {
    /// The pattern of a signature.
    pub fn of(sig: &Signature) -> Pattern {
        Pattern {
            width: sig.width,
            rank: sig.rank(),
            inner: std::array::from_fn(|op| match sig.inner_stride(op) {
                0 => 0,
                1 => 1,
                _ => 2,
            }),
            outer_zero: std::array::from_fn(|op| {
                let st = &sig.strides[op];
                (0..sig.rank() - 1)
                    .filter(|&k| st[k] == 0)
                    .fold(0u64, |m, k| m | (1 << k))
            }),
        }
    }

    /// A signature with this pattern (dims of 2, outer strides of 0 or 2), from which the
    /// emitter reads only the width, the rank, the inner-stride classes and the zero strides.
    fn representative(&self) -> Signature {
        let r = self.rank;
        Signature {
            width: self.width,
            dims: smallvec::smallvec![2; r],
            strides: std::array::from_fn(|op| {
                let mut st: crate::shape::Strides = (0..r)
                    .map(|k| {
                        if self.outer_zero[op] >> k & 1 == 1 {
                            0
                        } else {
                            2
                        }
                    })
                    .collect();
                st[r - 1] = self.inner[op] as isize;
                st
            }),
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "generic w{} rank{} inner{:?}",
            self.width, self.rank, self.inner
        )
    }
}

/// Reusable per-compilation state.
struct Scratch {
    ctx: Context,
    fbc: FunctionBuilderContext,
}

/// The code generator for the host machine.
pub struct Jit {
    isa: OwnedTargetIsa,
    verify: bool,
    /// x86-64 with SSE4.1: lane selects use `blendv`.
    blendv: bool,
    scratch: Mutex<Scratch>,
}

impl std::fmt::Debug for Jit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Jit({})", self.isa.triple())
    }
}

fn codegen_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Codegen(format!("{what}: {e}"))
}

impl Jit {
    /// A code generator for the host ISA. `verify` runs the Cranelift IR verifier on every
    /// function (on in debug builds and in tests).
    pub fn host(verify: bool) -> Result<Jit> {
        let mut flags = settings::builder();
        let set = |f: &mut settings::Builder, k: &str, v: &str| {
            f.set(k, v).map_err(|e| codegen_err("setting", e))
        };
        // The emitted IR is already minimal (no redundant loads, loop-invariant splats hoisted
        // by construction), so the e-graph optimiser adds compile time without speeding up the
        // kernels: measured on the benchmark cases, `none` is as fast at run time and compiles
        // ~40% fewer instructions than `speed`. The backtracking register allocator stays:
        // `single_pass` compiles faster but made L2-resident cases up to 1.6x slower.
        set(&mut flags, "opt_level", "none")?;
        set(&mut flags, "regalloc_algorithm", "backtracking")?;
        set(
            &mut flags,
            "enable_verifier",
            if verify { "true" } else { "false" },
        )?;
        set(&mut flags, "is_pic", "false")?;
        let isa = cranelift_native::builder()
            .map_err(|e| codegen_err("host ISA", e))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| codegen_err("host ISA", e))?;
        let mut jit = Jit {
            blendv: false,
            isa,
            verify,
            scratch: Mutex::new(Scratch {
                ctx: Context::new(),
                fbc: FunctionBuilderContext::new(),
            }),
        };
        jit.set_blendv(true);
        Ok(jit)
    }

    /// The target triple and the ISA flags the generated code may use.
    pub fn describe(&self) -> String {
        let enabled: Vec<String> = self
            .isa
            .isa_flags()
            .iter()
            .filter(|v| v.as_bool() == Some(true))
            .map(|v| v.name.to_string())
            .collect();
        format!("{} [{}]", self.isa.triple(), enabled.join(" "))
    }

    /// Turns the x86 `blendv` lane select off (portable `bitselect` code) or back on where the
    /// host has it. Kernels compiled either way give the same bytes; both are tested.
    pub fn set_blendv(&mut self, on: bool) {
        self.blendv = on && self.host_has_blendv();
    }

    fn host_has_blendv(&self) -> bool {
        self.isa.triple().architecture == target_lexicon::Architecture::X86_64
            && self
                .isa
                .isa_flags()
                .iter()
                .any(|f| f.name == "has_sse41" && f.as_bool() == Some(true))
    }

    /// Whether lane selects use x86 `blendv`.
    pub fn uses_blendv(&self) -> bool {
        self.blendv
    }

    /// Whether the verifier runs on every compiled function.
    pub fn verifies(&self) -> bool {
        self.verify
    }

    /// Builds the IR of `sig` (exact, or shape-generic for its pattern) into `ctx.func`.
    fn build_ir(&self, sig: &Signature, generic: bool, s: &mut Scratch) {
        s.ctx.clear();
        s.ctx.func.signature.call_conv = self.isa.default_call_conv();
        codegen::declare_params(&mut s.ctx.func);
        let mut b = FunctionBuilder::new(&mut s.ctx.func, &mut s.fbc);
        codegen::KernelEmitter::new(&mut b, sig, generic, self.blendv).emit();
        b.finalize(self.isa.frontend_config());
    }

    /// Compiles `sig` to machine code with its dims and strides baked in.
    pub fn compile(&self, sig: &Signature) -> Result<Kernel> {
        self.compile_as(sig, false)
    }

    /// Compiles the shape-generic kernel of `pattern`'s [`Pattern`]: it runs every signature of
    /// that pattern, reading dims and strides at run time.
    pub fn compile_generic(&self, pattern: &Pattern) -> Result<Kernel> {
        self.compile_as(&pattern.representative(), true)
    }

    fn compile_as(&self, sig: &Signature, generic: bool) -> Result<Kernel> {
        if ![1, 2, 4, 8, 16].contains(&sig.width)
            || sig.dims.is_empty()
            || sig.rank() > crate::shape::MAX_RANK
        {
            return Err(Error::Codegen(format!("unsupported signature {sig}")));
        }
        let mut guard = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let s = &mut *guard;
        self.build_ir(sig, generic, s);
        let mut module = JITModule::new(JITBuilder::with_isa(
            self.isa.clone(),
            default_libcall_names(),
        ));
        let id = module
            .declare_function("select_kernel", Linkage::Local, &s.ctx.func.signature)
            .map_err(|e| codegen_err("declare", e))?;
        module
            .define_function(id, &mut s.ctx)
            .map_err(|e| codegen_err("compile", format!("{e:?}")))?;
        let code_bytes = s
            .ctx
            .compiled_code()
            .map(|c| c.code_buffer().len())
            .unwrap_or(0);
        module.clear_context(&mut s.ctx);
        module
            .finalize_definitions()
            .map_err(|e| codegen_err("finalize", e))?;
        let ptr = module.get_finalized_function(id);
        // SAFETY: `ptr` is the finalized entry of the function just defined with the signature
        // built by `codegen::declare_params` (eight i64 parameters, no return) in the ISA's default
        // calling convention, which on this host is the C calling convention of `KernelFn`.
        let entry: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(ptr) };
        Ok(Kernel::new(sig.clone(), generic, entry, code_bytes, module))
    }

    /// Compiles `sig` and reports how long it took in microseconds.
    pub fn compile_timed(&self, sig: &Signature) -> (Result<Arc<Kernel>>, u64) {
        let t = Instant::now();
        let k = self.compile(sig).map(Arc::new);
        (k, t.elapsed().as_micros() as u64)
    }

    /// The Cranelift IR of `sig`, as text.
    pub fn ir_text(&self, sig: &Signature) -> String {
        let mut guard = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        self.build_ir(sig, false, &mut guard);
        guard.ctx.func.display().to_string()
    }

    /// The machine code of `sig`, disassembled by Cranelift's own printer.
    pub fn disassembly(&self, sig: &Signature) -> Result<String> {
        self.disassemble(sig, false)
    }

    /// The machine code of the shape-generic kernel of `p`.
    pub fn disassembly_generic(&self, p: &Pattern) -> Result<String> {
        self.disassemble(&p.representative(), true)
    }

    fn disassemble(&self, sig: &Signature, generic: bool) -> Result<String> {
        let mut guard = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let s = &mut *guard;
        self.build_ir(sig, generic, s);
        s.ctx.set_disasm(true);
        let mut ctrl = cranelift_codegen::control::ControlPlane::default();
        let r = s
            .ctx
            .compile(&*self.isa, &mut ctrl)
            .map_err(|e| codegen_err("compile", format!("{:?}", e.inner)));
        let text = r.map(|c| c.vcode.clone().unwrap_or_default());
        s.ctx.set_disasm(false);
        text
    }
}

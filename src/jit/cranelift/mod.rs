//! The Cranelift tier: portable code generation for [`Signature`]s on every architecture
//! Cranelift targets.
//!
//! One [`Jit`] holds the host ISA (detected once with `cranelift-native`) and reusable compilation
//! contexts; [`Jit::compile`] turns a signature into a [`Kernel`] with its own JIT module, so that
//! dropping the kernel returns its code memory. Single-pass n-way kernels ([`NwaySpec`]) are
//! built by `nway.rs` and owned the same way.

pub(crate) mod codegen;
mod nway;

use std::sync::Mutex;

use cranelift_codegen::Context;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, default_libcall_names};

use crate::aot::nway::NwayKernelSpec;
use crate::error::{Error, Result};
use crate::kernel::abi::KernelFn;
use crate::kernel::nway::{Entry, NwayFn, NwayKernel, NwaySpec};
use crate::kernel::{CodeOwner, Kernel};
use crate::plan::{Pattern, Signature};
use crate::tier::{Tier, Variant};

/// A kernel's JIT module, freed when the kernel is dropped. The mutex makes the module (which
/// holds a `RefCell`) shareable; it is touched only on drop.
struct ModuleOwner(Mutex<Option<Box<JITModule>>>);

impl CodeOwner for ModuleOwner {}

impl Drop for ModuleOwner {
    fn drop(&mut self) {
        let module = match self.0.get_mut() {
            Ok(m) => m.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(m) = module {
            // SAFETY: the owner is dropped with the last owner of its kernel (the drop of the
            // last `Arc<Kernel>`), so no caller is executing the code and its entry is never
            // called again.
            unsafe { m.free_memory() };
        }
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

fn codegen_err(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::codegen_from(what, e)
}

/// Defines the function built in `s.ctx` in `module` as `name`; returns its id and its size in
/// bytes of machine code.
fn define_built<M: Module>(
    module: &mut M,
    name: &str,
    linkage: Linkage,
    s: &mut Scratch,
) -> Result<(FuncId, usize)> {
    let id = module
        .declare_function(name, linkage, &s.ctx.func.signature)
        .map_err(|e| codegen_err("declare", e))?;
    let r = module
        .define_function(id, &mut s.ctx)
        .map_err(|e| Error::codegen_from(format!("compile: {e:?}"), e));
    let code_bytes = s
        .ctx
        .compiled_code()
        .map(|c| c.code_buffer().len())
        .unwrap_or(0);
    module.clear_context(&mut s.ctx);
    r?;
    Ok((id, code_bytes))
}

/// The Cranelift settings every kernel is compiled with, here and by ahead-of-time exporters.
/// `pic`: position-independent code (for objects linked into executables or shared libraries).
///
/// ```
/// use cranelift_codegen::settings::{Flags, OptLevel};
/// use selectjit::codegen::cranelift::shared_flags;
/// let flags = Flags::new(shared_flags(true, true)?);
/// assert!(flags.enable_verifier() && flags.is_pic());
/// assert_eq!(flags.opt_level(), OptLevel::None); // the IR is minimal already
/// # Ok::<(), selectjit::Error>(())
/// ```
pub fn shared_flags(verify: bool, pic: bool) -> Result<settings::Builder> {
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v).map_err(|e| codegen_err("setting", e))
    };
    // The emitted IR is already minimal (no redundant loads, loop-invariant splats hoisted by
    // construction), so the e-graph optimiser adds compile time without speeding up the
    // kernels: measured on the benchmark cases, `none` is as fast at run time and compiles ~40%
    // fewer instructions than `speed`. The backtracking register allocator stays: `single_pass`
    // compiles faster but made L2-resident cases up to 1.6x slower.
    set(&mut flags, "opt_level", "none")?;
    set(&mut flags, "regalloc_algorithm", "backtracking")?;
    set(
        &mut flags,
        "enable_verifier",
        if verify { "true" } else { "false" },
    )?;
    set(&mut flags, "is_pic", if pic { "true" } else { "false" })?;
    Ok(flags)
}

/// The host's ISA with the CPU features it has, as Cranelift detects them, and the kernels'
/// settings.
pub(crate) fn host_isa(verify: bool) -> Result<OwnedTargetIsa> {
    let mut b =
        cranelift_native::builder().map_err(|e| Error::codegen(format!("host ISA: {e}")))?;
    // SELECTJIT_MAX_ISA: the flags of hidden instruction sets off (a name this Cranelift does
    // not know is skipped).
    if b.triple().architecture == target_lexicon::Architecture::X86_64 {
        const AVX512: [&str; 6] = [
            "has_avx512bitalg",
            "has_avx512dq",
            "has_avx512vl",
            "has_avx512vbmi",
            "has_avx512f",
            "has_avx512vnni",
        ];
        let flags = AVX512.iter().chain(&crate::jit::host::AVX_FLAGS);
        for name in flags.filter(|n| crate::jit::host::hides_flag(n)) {
            let _ = b.set(name, "false");
        }
    }
    b.finish(settings::Flags::new(shared_flags(verify, false)?))
        .map_err(|e| codegen_err("host ISA", e))
}

impl Jit {
    /// Whether this tier compiles `sig`: every mask signature, and every predicate (each
    /// comparison and test of every dtype, computed in registers: see `codegen/pred.rs`).
    ///
    /// ```
    /// use selectjit::codegen::cranelift::Jit;
    /// use selectjit::plan::{Canon, CondKind, Signature, plan_contiguous};
    /// let jit = Jit::host(false)?;
    /// assert!(jit.covers(&plan_contiguous(16, 100).unwrap()));
    /// let lt = CondKind::Cmp(Canon::Lt, selectjit::DType::Complex128);
    /// assert!(jit.covers(&Signature::with_cond(2, lt, &[9], [&[1], &[1], &[1], &[1], &[1]])?));
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn covers(&self, _sig: &Signature) -> bool {
        true
    }

    /// A code generator for the host ISA. `verify` runs the Cranelift IR verifier on every
    /// function (on in debug builds and in tests).
    ///
    /// ```
    /// use selectjit::Tier;
    /// use selectjit::codegen::cranelift::Jit;
    /// use selectjit::plan::plan_contiguous;
    /// let jit = Jit::host(false)?;
    /// assert!(jit.describe().contains(std::env::consts::ARCH));
    /// let kernel = jit.compile(&plan_contiguous(4, 100).unwrap())?;
    /// assert_eq!(kernel.tier(), Tier::Cranelift);
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn host(verify: bool) -> Result<Jit> {
        Ok(Jit::for_isa(host_isa(verify)?, verify))
    }

    /// A code generator for `isa` (the host's, or another target's for ahead-of-time export).
    /// Lane selects use x86 `blendv` where `isa` is x86-64 with SSE4.1, the portable
    /// `bitselect` otherwise.
    ///
    /// ```
    /// use cranelift_codegen::settings::Flags;
    /// use selectjit::codegen::cranelift::{Jit, shared_flags};
    /// // The host's ISA with position-independent code, as an ahead-of-time exporter builds it.
    /// let flags = Flags::new(shared_flags(false, true)?);
    /// let isa = cranelift_native::builder().unwrap().finish(flags).unwrap();
    /// let jit = Jit::for_isa(isa, false);
    /// assert!(jit.describe().contains(std::env::consts::ARCH));
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn for_isa(isa: OwnedTargetIsa, verify: bool) -> Jit {
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
        jit
    }

    /// The target triple and the ISA flags the generated code may use.
    ///
    /// ```
    /// use selectjit::codegen::cranelift::Jit;
    /// let d = Jit::host(false)?.describe(); // e.g. "x86_64-unknown-linux-gnu [has_sse3 ...]"
    /// let (triple, flags) = d.split_once(' ').unwrap();
    /// assert!(triple.starts_with(std::env::consts::ARCH));
    /// assert!(flags.starts_with('[') && flags.ends_with(']'));
    /// # Ok::<(), selectjit::Error>(())
    /// ```
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
    ///
    /// ```
    /// use selectjit::codegen::cranelift::Jit;
    /// let mut jit = Jit::host(false)?;
    /// jit.set_blendv(false);
    /// assert!(!jit.uses_blendv());
    /// jit.set_blendv(true); // back on where the host has SSE4.1
    /// assert_eq!(jit.uses_blendv(), jit.describe().contains("has_sse41"));
    /// # Ok::<(), selectjit::Error>(())
    /// ```
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
    ///
    /// ```
    /// use selectjit::codegen::cranelift::Jit;
    /// let jit = Jit::host(false)?;
    /// // On by default on x86-64 hosts with SSE4.1; never on other architectures.
    /// assert_eq!(jit.uses_blendv(), jit.describe().contains("has_sse41"));
    /// if !cfg!(target_arch = "x86_64") {
    ///     assert!(!jit.uses_blendv());
    /// }
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn uses_blendv(&self) -> bool {
        self.blendv
    }

    /// Whether the verifier runs on every compiled function.
    ///
    /// ```
    /// use selectjit::codegen::cranelift::Jit;
    /// assert!(Jit::host(true)?.verifies());
    /// assert!(!Jit::host(false)?.verifies());
    /// # Ok::<(), selectjit::Error>(())
    /// ```
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
    ///
    /// ```
    /// use selectjit::codegen::cranelift::Jit;
    /// use selectjit::plan::plan_contiguous;
    /// let jit = Jit::host(false)?;
    /// let sig = plan_contiguous(8, 1000).unwrap();
    /// let kernel = jit.compile(&sig)?;
    /// assert_eq!(kernel.signature(), &sig);
    /// assert!(!kernel.is_generic() && kernel.code_bytes() > 0);
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn compile(&self, sig: &Signature) -> Result<Kernel> {
        self.compile_as(sig, false)
    }

    /// Compiles the shape-generic kernel of `pattern`'s [`Pattern`]: it runs every signature of
    /// that pattern, reading dims and strides at run time.
    ///
    /// ```
    /// use selectjit::codegen::cranelift::Jit;
    /// use selectjit::plan::{Pattern, plan_contiguous};
    /// let p = Pattern::of(&plan_contiguous(8, 1000).unwrap());
    /// let kernel = Jit::host(false)?.compile_generic(&p)?;
    /// assert!(kernel.is_generic());
    /// assert_eq!(Pattern::of(kernel.signature()), p);
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn compile_generic(&self, pattern: &Pattern) -> Result<Kernel> {
        self.compile_as(&pattern.representative(), true)
    }

    fn compile_as(&self, sig: &Signature, generic: bool) -> Result<Kernel> {
        let mut module = self.jit_module();
        let (id, code_bytes) =
            self.define_in(&mut module, "select_kernel", Linkage::Local, sig, generic)?;
        module
            .finalize_definitions()
            .map_err(|e| codegen_err("finalize", e))?;
        let ptr = module.get_finalized_function(id);
        // SAFETY: `ptr` is the finalized entry of the function just defined with the signature
        // built by `codegen::declare_params` (eight i64 parameters, no return) in the ISA's default
        // calling convention, which on this host is the C calling convention of `KernelFn`.
        let entry: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(ptr) };
        let owner = Box::new(ModuleOwner(Mutex::new(Some(Box::new(module)))));
        let v = Variant::of(Tier::Cranelift);
        // SAFETY: `entry` is that function, compiled for `sig` (or its pattern, `generic`) for
        // the host's ISA; its code lives in `module`, which `owner` frees only when dropped.
        Ok(unsafe { Kernel::owned(sig.clone(), generic, v, entry, code_bytes, owner) })
    }

    /// Builds the kernel of `sig` (exact, or shape-generic for its pattern) and defines it in
    /// `module` (a JIT module, or an object module for ahead-of-time export) as function
    /// `name`; returns its id and its size in bytes of machine code.
    ///
    /// ```
    /// use cranelift_codegen::settings::Flags;
    /// use cranelift_jit::{JITBuilder, JITModule};
    /// use cranelift_module::{FuncOrDataId, Linkage, Module, default_libcall_names};
    /// use selectjit::codegen::cranelift::{Jit, shared_flags};
    /// use selectjit::plan::plan_contiguous;
    /// let flags = Flags::new(shared_flags(false, false)?);
    /// let isa = cranelift_native::builder().unwrap().finish(flags).unwrap();
    /// let jit = Jit::for_isa(isa.clone(), false);
    /// // Two kernels in one module (an exporter's object module works the same way).
    /// let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    /// let sig = plan_contiguous(4, 100).unwrap();
    /// let (exact, n) = jit.define_in(&mut module, "exact", Linkage::Export, &sig, false)?;
    /// let (generic, m) = jit.define_in(&mut module, "generic", Linkage::Export, &sig, true)?;
    /// assert_eq!(module.get_name("exact"), Some(FuncOrDataId::Func(exact)));
    /// assert_eq!(module.get_name("generic"), Some(FuncOrDataId::Func(generic)));
    /// assert!(n > 0 && m > 0);
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn define_in<M: Module>(
        &self,
        module: &mut M,
        name: &str,
        linkage: Linkage,
        sig: &Signature,
        generic: bool,
    ) -> Result<(FuncId, usize)> {
        if !self.covers(sig)
            || ![1, 2, 4, 8, 16].contains(&sig.width)
            || sig.dims.is_empty()
            || sig.rank() > crate::shape::MAX_RANK
        {
            return Err(Error::codegen(format!("unsupported signature {sig}")));
        }
        let mut guard = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let s = &mut *guard;
        self.build_ir(sig, generic, s);
        define_built(module, name, linkage, s)
    }

    /// A JIT module of its own for one kernel, for the host's ISA.
    fn jit_module(&self) -> JITModule {
        JITModule::new(JITBuilder::with_isa(
            self.isa.clone(),
            default_libcall_names(),
        ))
    }

    /// Builds the single-pass n-way kernel of `spec` (one [`nway::covers`] takes) and defines
    /// it in `module` as `name`.
    fn define_nway<M: Module>(
        &self,
        module: &mut M,
        name: &str,
        linkage: Linkage,
        spec: &NwaySpec,
    ) -> Result<(FuncId, usize)> {
        let mut guard = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let s = &mut *guard;
        s.ctx.clear();
        s.ctx.func.signature.call_conv = self.isa.default_call_conv();
        nway::declare_params(&mut s.ctx.func);
        let mut b = FunctionBuilder::new(&mut s.ctx.func, &mut s.fbc);
        nway::emit(&mut b, spec);
        b.finalize(self.isa.frontend_config());
        define_built(module, name, linkage, s)
    }

    /// Builds the single-pass n-way kernel of `spec` and defines it in `module` (an object
    /// module for ahead-of-time export, or a JIT module) as function `name`, with the
    /// [`SelectjitNwayFn`](crate::aot::SelectjitNwayFn) contract; returns its id and its size
    /// in bytes of machine code. An error for a spec this generator does not compile: kernels
    /// of rows, elements of 16 bytes, conditions of bool, f16, bf16 or complex dtypes, or a
    /// target whose pointers are not 64-bit.
    ///
    /// ```
    /// use cranelift_codegen::settings::Flags;
    /// use cranelift_jit::{JITBuilder, JITModule};
    /// use cranelift_module::{Linkage, Module, default_libcall_names};
    /// use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
    /// use selectjit::codegen::cranelift::{Jit, shared_flags};
    /// use selectjit::{CmpOp, DType};
    /// let flags = Flags::new(shared_flags(false, false)?);
    /// let isa = cranelift_native::builder().unwrap().finish(flags).unwrap();
    /// let jit = Jit::for_isa(isa.clone(), false);
    /// let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    /// let x: &[usize] = &[100];
    /// let gt = |d| NwayBranch { cond: NwayCond::Cmp(CmpOp::Gt, d, x, &[]), not: false, value: x };
    /// let spec = NwayKernelSpec::for_call(DType::F32, x, &[gt(DType::F32)], &[])?;
    /// let (_, n) = jit.define_nway_in(&mut module, "relu", Linkage::Export, &spec)?;
    /// assert!(n > 0);
    /// // f16 comparisons are not among this generator's n-way kernels.
    /// let f16 = NwayKernelSpec::for_call(DType::F16, x, &[gt(DType::F16)], &[])?;
    /// let e = jit.define_nway_in(&mut module, "f16", Linkage::Export, &f16).unwrap_err();
    /// assert!(e.to_string().contains("f16"));
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn define_nway_in<M: Module>(
        &self,
        module: &mut M,
        name: &str,
        linkage: Linkage,
        spec: &NwayKernelSpec,
    ) -> Result<(FuncId, usize)> {
        let s = &spec.0;
        if self.isa.pointer_type() != cranelift_codegen::ir::types::I64 || !nway::covers(s) {
            return Err(Error::codegen(format!(
                "unsupported n-way kernel ({spec}): Cranelift compiles flat n-way kernels (not \
                 of rows) of 1- to 8-byte elements whose conditions are masks or of integer, f32 \
                 or f64 dtypes, for 64-bit targets"
            )));
        }
        self.define_nway(module, name, linkage, s)
    }

    /// Compiles the single-pass n-way kernel of `spec` (one [`nway::covers`] takes).
    fn compile_nway_kernel(&self, spec: &NwaySpec) -> Result<NwayKernel> {
        let mut module = self.jit_module();
        let (id, code_bytes) =
            self.define_nway(&mut module, "nway_kernel", Linkage::Local, spec)?;
        module
            .finalize_definitions()
            .map_err(|e| codegen_err("finalize", e))?;
        let ptr = module.get_finalized_function(id);
        // SAFETY: `ptr` is the finalized entry of the function just defined with the signature
        // built by `nway::declare_params` (four i64 parameters, no return) in the ISA's default
        // calling convention, which on this host is the C calling convention of `NwayFn`.
        let entry: NwayFn = unsafe { std::mem::transmute::<*const u8, NwayFn>(ptr) };
        let owner = Box::new(ModuleOwner(Mutex::new(Some(Box::new(module)))));
        // SAFETY: `entry` is that function, built by `nway::emit` for `spec` with the `NwayFn`
        // contract, compiled for the host's ISA; its code lives in `module`, which `owner` frees
        // only when dropped.
        Ok(unsafe { NwayKernel::owned(Tier::Cranelift, Entry::Flat(entry), code_bytes, owner) })
    }

    /// The Cranelift IR of `sig`, as text.
    ///
    /// ```
    /// use selectjit::codegen::cranelift::Jit;
    /// use selectjit::plan::plan_contiguous;
    /// let ir = Jit::host(false)?.ir_text(&plan_contiguous(4, 100).unwrap());
    /// assert!(ir.starts_with("function"));
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn ir_text(&self, sig: &Signature) -> String {
        let mut guard = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        self.build_ir(sig, false, &mut guard);
        guard.ctx.func.display().to_string()
    }

    /// The machine code of `sig`, disassembled by Cranelift's own printer.
    ///
    /// ```
    /// use selectjit::codegen::cranelift::Jit;
    /// use selectjit::plan::plan_contiguous;
    /// let listing = Jit::host(false)?.disassembly(&plan_contiguous(4, 100).unwrap())?;
    /// assert!(listing.lines().count() > 1);
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn disassembly(&self, sig: &Signature) -> Result<String> {
        self.disassemble(sig, false)
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
            .map_err(|e| Error::codegen_from(format!("compile: {:?}", e.inner), e.inner));
        let text = r.map(|c| c.vcode.clone().unwrap_or_default());
        s.ctx.set_disasm(false);
        text
    }
}

impl crate::jit::generator::Generator for Jit {
    fn tier(&self) -> Tier {
        Tier::Cranelift
    }

    fn covers(&self, sig: &Signature) -> bool {
        Jit::covers(self, sig)
    }

    fn fixed(&self, _: &Signature, _: bool, _: usize) -> Variant {
        Variant::of(Tier::Cranelift)
    }

    fn candidates(&self, _: &Signature, _: usize) -> crate::jit::generator::Candidates {
        crate::jit::generator::Candidates {
            variants: vec![Variant::of(Tier::Cranelift)],
            prefer: None,
        }
    }

    fn compile(&self, _: Variant, sig: &Signature, generic: bool) -> Result<Kernel> {
        self.compile_as(sig, generic)
    }

    fn machine_code(
        &self,
        _: Variant,
        sig: &Signature,
    ) -> Result<crate::jit::generator::MachineCode> {
        Ok(crate::jit::generator::MachineCode::Listing(
            self.disassembly(sig)?,
        ))
    }

    fn ir_text(&self, sig: &Signature) -> Option<String> {
        Some(Jit::ir_text(self, sig))
    }

    fn describe(&self) -> Option<String> {
        Some(Jit::describe(self))
    }
    /// Elements of 1 to 8 bytes, conditions of masks and of integer and f32 / f64 dtypes (see
    /// `nway.rs`), on 64-bit targets.
    fn compile_nway(&self, spec: &NwaySpec) -> Option<Result<NwayKernel>> {
        let ok = self.isa.pointer_type() == cranelift_codegen::ir::types::I64 && nway::covers(spec);
        ok.then(|| self.compile_nway_kernel(spec))
    }
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    /// The features the library detects itself are exactly the ones Cranelift's own host
    /// detection enables.
    #[test]
    fn host_flags_agree_with_cranelift_native() {
        let isa = super::host_isa(false).unwrap();
        let mut theirs: Vec<&str> = isa
            .isa_flags()
            .iter()
            .filter(|v| v.name.starts_with("has_") && v.as_bool() == Some(true))
            .map(|v| v.name)
            .collect();
        let mut ours = crate::jit::host::cpu_flags().unwrap();
        theirs.sort_unstable();
        ours.sort_unstable();
        assert_eq!(ours, theirs);
    }
}

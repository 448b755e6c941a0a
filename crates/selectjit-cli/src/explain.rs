//! What happens to one call, step by step: the text behind `selectjit explain`.

use std::fmt::Write as _;

use selectjit::broadcast_shapes;
use selectjit::codegen::CodeGen;
use selectjit::codegen::CodeGenOptions;
use selectjit::codegen::MachineCode;
use selectjit::contiguous_strides;
use selectjit::plan::Pattern;
use selectjit::plan::plan;
use selectjit::{Broadcast, DType, Engine, EngineConfig, KernelClass, Result, Tier};
use selectjit::{Cond, TensorMut, TensorRef};

use crate::ShapeFmt;

use crate::pred::{CondSpec, Named};

/// Describes a call on contiguous inputs of the given shapes: inferred shape, each input's
/// strides over it, the collapsed plan and its signature, the pattern of its shape-generic
/// kernel, the variant that runs it under `config` — under `auto`, measured on calls with
/// inputs of these shapes when `measure` (and the output is at most 1 GiB) — and the machine
/// code of that exact kernel (with the Cranelift IR when Cranelift compiles it).
pub fn explain(
    config: &EngineConfig,
    dtype: DType,
    cond: &[usize],
    then: &[usize],
    else_: &[usize],
    mode: Broadcast,
    measure: bool,
) -> Result<String> {
    let (tier, opts) = config.codegen_parts();
    let codegen = CodeGen::new(
        tier,
        CodeGenOptions {
            verify: true,
            ..opts
        },
    )?;
    let mut s = String::new();
    let b = broadcast_shapes(mode, cond, then, else_)?;
    let st =
        |sh: &[usize], p: selectjit::Placement| p.strides_over(sh, &contiguous_strides(sh), &b.out);
    let so = contiguous_strides(&b.out);
    let (sc, sth, se) = (st(cond, b.cond), st(then, b.then), st(else_, b.else_));
    let _ = writeln!(
        s,
        "dtype      {dtype} ({} bytes per element)",
        dtype.width()
    );
    let _ = writeln!(
        s,
        "broadcast  {} : cond {} then {} else {} -> output {}",
        mode.name(),
        ShapeFmt(cond),
        ShapeFmt(then),
        ShapeFmt(else_),
        ShapeFmt(&b.out)
    );
    let _ = writeln!(s, "strides over the output (elements):");
    for (name, v) in [("cond", &sc), ("then", &sth), ("else", &se), ("out", &so)] {
        let _ = writeln!(s, "  {name:<5} {:?}", v.as_slice());
    }
    let Some(sig) = plan(dtype.width(), &b.out, [&sc, &sth, &se, &so]) else {
        let _ = writeln!(s, "plan       empty output: no kernel runs");
        return Ok(s);
    };
    let _ = writeln!(
        s,
        "plan       collapsed dims {:?} ({} elements)",
        sig.dims(),
        sig.numel()
    );
    let _ = writeln!(s, "signature  {sig}");
    let _ = writeln!(s, "generic    {}", Pattern::of(&sig));
    let _ = writeln!(s, "codegen    {}", codegen.describe());
    let candidates = codegen.variants(&sig);
    let mut variant = candidates[0];
    if codegen.is_auto() && candidates.len() > 1 {
        let class = KernelClass::of(&sig);
        let names: Vec<String> = candidates.iter().map(|v| v.to_string()).collect();
        let _ = writeln!(s, "class      {class}: candidates {}", names.join(", "));
        match measured(
            config,
            dtype,
            [cond, then, else_],
            &b.out,
            mode,
            &class,
            measure,
        )? {
            Some(c) => {
                let _ = writeln!(s, "measured   {c}");
                variant = c.chosen;
            }
            None => {
                let _ = writeln!(s, "measured   not measured: {} would run first", variant);
            }
        }
    }
    let (tier, code) = codegen.machine_code(variant, &sig)?;
    let asm = match code {
        MachineCode::X86(bytes) => selectjit_emu::disassemble(&bytes),
        MachineCode::Listing(text) => text,
    };
    let why = if tier == variant.tier {
        String::new()
    } else {
        format!(" (the {} tier does not cover this signature)", variant.tier)
    };
    let _ = writeln!(s, "variant    {variant}{why}");
    if tier == Tier::Cranelift
        && let Some(ir) = codegen.ir_text(&sig)
    {
        let _ = writeln!(s, "\n;; Cranelift IR of the exact kernel\n{ir}");
    }
    let _ = writeln!(s, ";; {tier} machine code of the exact kernel\n{asm}");
    Ok(s)
}

/// Describes a call whose condition is a predicate over named arrays (see [`crate::pred`]):
/// the predicate and its operands, the broadcast, the signature, and whether a kernel fuses the
/// predicate — which variant, measured under `auto` when `measure` (the output at most
/// 1 GiB), with its machine code — or that the static kernels run it in blocks, and why.
#[allow(clippy::too_many_arguments)]
pub fn explain_cond(
    config: &EngineConfig,
    dtype: DType,
    cond: &str,
    inputs: &[Named],
    then: &[usize],
    else_: &[usize],
    mode: Broadcast,
    measure: bool,
) -> Result<String> {
    let engine = Engine::with_config(config.clone().threads(1).exact_after(1))?;
    let t = Named::zeros("then", dtype, then)?;
    let e = Named::zeros("else", dtype, else_)?;
    let mut arrays: Vec<&Named> = inputs.iter().collect();
    arrays.extend([&t, &e]);
    let must: Vec<&str> = inputs.iter().map(|n| n.name.as_str()).collect();
    let spec = CondSpec::new(cond, arrays, &must)?;
    let b = broadcast_shapes(mode, &spec.shape, then, else_)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "dtype      {dtype} ({} bytes per element)",
        dtype.width()
    );
    let (inner, neg) = spec.expr.strip_not();
    let _ = writeln!(
        s,
        "predicate  {}{}",
        spec.expr,
        if neg {
            format!(" (then and else trade places under {inner})")
        } else {
            String::new()
        }
    );
    for o in spec.operands() {
        let _ = writeln!(s, "  operand  {o}");
    }
    let _ = writeln!(
        s,
        "broadcast  {} : cond (the predicate's operands broadcast) {} then {} else {} -> output {}",
        mode.name(),
        ShapeFmt(&spec.shape),
        ShapeFmt(then),
        ShapeFmt(else_),
        ShapeFmt(&b.out)
    );
    let planned =
        engine.plan_select_bytes(dtype, spec.cond()?, t.view(), e.view(), &b.out, mode)?;
    let Some((sig, one_pass)) = planned else {
        let _ = writeln!(s, "plan       empty output: no kernel runs");
        return Ok(s);
    };
    let _ = writeln!(
        s,
        "plan       collapsed dims {:?} ({} elements)",
        sig.dims(),
        sig.numel()
    );
    let _ = writeln!(s, "signature  {sig}");
    // A predicate far smaller than the output: evaluated once at its own shape into a byte
    // mask, then the pass over the output is that mask's select.
    let hoisted = engine.hoisted_pred_shape(dtype, spec.cond()?, &b.out)?;
    let zeros = vec![0u8; hoisted.as_deref().map_or(0, |s| s.iter().product())];
    let (sig, one_pass) = match &hoisted {
        None => (sig, one_pass),
        Some(ps) => {
            let mask = Cond::mask(TensorRef::new(&zeros, ps));
            let Some((msig, _)) =
                engine.plan_select_bytes(dtype, mask, t.view(), e.view(), &b.out, mode)?
            else {
                return Ok(s);
            };
            let _ = writeln!(
                s,
                "hoisted    the predicate has {} elements ({}), at least 256x fewer than the \
                 output: evaluated once into a byte mask of that shape, then that mask's select \
                 over the output: {msig}",
                ps.iter().product::<usize>(),
                ShapeFmt(ps)
            );
            (msig, true)
        }
    };
    let codegen = engine.codegen();
    match codegen {
        Some(c) => {
            let _ = writeln!(s, "codegen    {}", c.describe());
        }
        None => {
            let why = engine
                .last_codegen_error()
                .map_or("none".to_string(), |e| e.to_string());
            let _ = writeln!(s, "codegen    none: {why}");
        }
    }
    let (Some(codegen), true) = (codegen, one_pass) else {
        let _ = writeln!(
            s,
            "fused      no: runs blocked — the static kernels compute the predicate into a mask \
             block (2048 elements), then select that block; {}",
            if codegen.is_some() {
                "no tier of this engine compiles this predicate, and no AOT table has it"
            } else {
                "this engine has no code generator"
            }
        );
        return Ok(s);
    };
    // Fused: under auto, the call measured on these shapes (zeros for --var operands).
    let out_bytes = sig.numel().saturating_mul(dtype.width());
    let mut variant = codegen.variants(&sig)[0];
    if codegen.is_auto() && measure && out_bytes <= 1 << 30 {
        let mut out = vec![0u8; out_bytes];
        let class = KernelClass::of(&sig);
        for _ in 0..128 {
            engine.select_bytes(
                dtype,
                spec.cond()?,
                t.view(),
                e.view(),
                TensorMut::new(&mut out, &b.out),
                mode,
            )?;
            if let Some(c) = engine.tier_choices().into_iter().find(|c| c.class == class) {
                let _ = writeln!(s, "measured   {c}");
                break;
            }
        }
        if engine.stats().blocked_runs > 0 {
            let _ = writeln!(
                s,
                "fused      no: the engine ran the call blocked (the static kernels) although a \
                 tier covers its signature{}",
                engine
                    .last_codegen_error()
                    .map_or(String::new(), |e| format!(": {e}"))
            );
            return Ok(s);
        }
        if let Some(k) = engine.kernel(&sig) {
            variant = k.variant();
        }
    }
    if hoisted.is_some() {
        let _ = writeln!(
            s,
            "fused      hoisted: no mask of the output's size; the pass over the output by {variant}"
        );
    } else {
        let _ = writeln!(s, "fused      yes, by {variant}");
    }
    match codegen.machine_code(variant, &sig) {
        Ok((tier, code)) => {
            let asm = match code {
                MachineCode::X86(bytes) => selectjit_emu::disassemble(&bytes),
                MachineCode::Listing(text) => text,
            };
            let _ = writeln!(s, ";; {tier} machine code of the exact kernel\n{asm}");
        }
        Err(e) => {
            let _ = writeln!(s, "machine code unavailable: {e}");
        }
    }
    Ok(s)
}

/// `auto`'s choice for `class`, measured on calls of these shapes (inputs of a repeating cond
/// pattern), or `None` when not measuring.
fn measured(
    config: &EngineConfig,
    dtype: DType,
    shapes: [&[usize]; 3],
    out_shape: &[usize],
    mode: Broadcast,
    class: &KernelClass,
    measure: bool,
) -> Result<Option<selectjit::TierChoice>> {
    let n = |sh: &[usize]| sh.iter().product::<usize>();
    let w = dtype.width();
    if !measure || n(out_shape).saturating_mul(w) > 1 << 30 {
        return Ok(None);
    }
    let engine = Engine::with_config(config.clone().tier(Tier::Auto).threads(1).exact_after(1))?;
    let cond: Vec<u8> = (0..n(shapes[0])).map(|i| (i * 7 % 3) as u8).collect();
    let then = vec![0x11u8; n(shapes[1]) * w];
    let else_ = vec![0x22u8; n(shapes[2]) * w];
    let mut out = vec![0u8; n(out_shape) * w];
    for _ in 0..128 {
        engine.select_bytes(
            dtype,
            TensorRef::new(&cond, shapes[0]),
            TensorRef::new(&then, shapes[1]),
            TensorRef::new(&else_, shapes[2]),
            TensorMut::new(&mut out, out_shape),
            mode,
        )?;
        if let Some(c) = engine
            .tier_choices()
            .into_iter()
            .find(|c| c.class == *class)
        {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(tier: Tier) -> EngineConfig {
        EngineConfig::new().tier(tier)
    }

    #[test]
    fn explains_the_attention_mask() {
        let cfg = config(Tier::Cranelift);
        let mask = [&[1, 1, 128, 128][..], &[8, 12, 128, 128], &[]];
        let t = explain(
            &cfg,
            DType::F32,
            mask[0],
            mask[1],
            mask[2],
            Broadcast::Numpy,
            true,
        )
        .unwrap();
        assert!(t.contains("output [8,12,128,128]"), "{t}");
        assert!(t.contains("collapsed dims [96, 16384]"), "{t}");
        assert!(t.contains("variant    cranelift"), "{t}");
        assert!(t.contains("function"), "{t}");
        assert!(t.contains("ret"), "{t}");
        assert!(explain(&cfg, DType::F32, &[3], &[4], &[], Broadcast::Numpy, true).is_err());
        assert!(
            explain(&cfg, DType::F32, &[0], &[0], &[], Broadcast::Numpy, true)
                .unwrap()
                .contains("empty output")
        );
    }

    /// Under `auto`, explain measures the call and shows the variant it chose and the times.
    #[test]
    fn explains_the_measured_choice() {
        let cfg = config(Tier::Auto);
        let t = explain(
            &cfg,
            DType::F32,
            &[4096],
            &[4096],
            &[4096],
            Broadcast::Numpy,
            true,
        )
        .unwrap();
        let x86: Vec<Tier> = Tier::host_tiers()
            .into_iter()
            .filter(|t| t.is_x86())
            .collect();
        if x86.len() > 1 {
            assert!(t.contains("candidates avx512, avx512+zmm, avx2"), "{t}");
            assert!(t.contains("measured   w4 rank1"), "{t}");
            assert!(t.contains(" us"), "{t}");
        } else if cfg!(target_arch = "x86_64") {
            crate::skip::skip(
                "explains_the_measured_choice: the measured x86 candidates",
                &format!("this host runs x86 tiers {x86:?}, not both"),
            );
        } else {
            crate::skip::inherent(
                "explains_the_measured_choice: the measured x86 candidates",
                "no x86 tier",
            );
        }
        let quiet = explain(
            &cfg,
            DType::F32,
            &[4096],
            &[4096],
            &[],
            Broadcast::Numpy,
            false,
        )
        .unwrap();
        if x86.len() > 1 {
            assert!(quiet.contains("not measured"), "{quiet}");
        }
    }
}

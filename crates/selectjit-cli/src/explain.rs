//! What happens to one call, step by step: the text behind `selectjit explain`.

use std::fmt::Write as _;

use selectjit::broadcast_shapes;
use selectjit::unstable::ShapeFmt;
use selectjit::unstable::{CodeGen, CodeGenOptions, MachineCode};
use selectjit::unstable::{Pattern, plan};
use selectjit::unstable::{contiguous_strides, strides_over};
use selectjit::{Broadcast, DType, Engine, EngineConfig, KernelClass, Result, Tier};
use selectjit::{TensorMut, TensorRef};

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
    let st = |sh: &[usize], p| strides_over(sh, &contiguous_strides(sh), p, &b.out);
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
    if tier == Tier::Cranelift {
        let _ = writeln!(
            s,
            "\n;; Cranelift IR of the exact kernel\n{}",
            codegen.cranelift().ir_text(&sig)
        );
    }
    let _ = writeln!(s, ";; {tier} machine code of the exact kernel\n{asm}");
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
    for _ in 0..64 {
        engine.select_dyn(
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

//! What happens to one call, step by step: the text behind `selectjit explain`.

use std::fmt::Write as _;

use selectjit::error::ShapeFmt;
use selectjit::jit::{CodeGen, MachineCode};
use selectjit::plan::{Pattern, plan};
use selectjit::shape::{broadcast_shapes, contiguous_strides, strides_over};
use selectjit::{Broadcast, DType, Result, Tier};

/// Describes a call on contiguous inputs of the given shapes: inferred shape, each input's
/// strides over it, the collapsed plan and its signature, the pattern of its shape-generic
/// kernel, the tier that compiles it under `codegen`, and the machine code of its exact kernel
/// (with the Cranelift IR when Cranelift compiles it).
pub fn explain(
    codegen: &CodeGen,
    dtype: DType,
    cond: &[usize],
    then: &[usize],
    else_: &[usize],
    mode: Broadcast,
) -> Result<String> {
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
        sig.dims.as_slice(),
        sig.numel()
    );
    let _ = writeln!(s, "signature  {sig}");
    let _ = writeln!(s, "generic    {}", Pattern::of(&sig));
    let _ = writeln!(s, "codegen    {}", codegen.describe());
    let (tier, code) = codegen.machine_code(codegen.tier(), &sig)?;
    let asm = match code {
        MachineCode::X86(bytes) => selectjit_emu::disassemble(&bytes),
        MachineCode::Listing(text) => text,
    };
    let why = if tier == codegen.tier() {
        String::new()
    } else {
        format!(
            " (the {} tier does not cover this signature)",
            codegen.tier()
        )
    };
    let _ = writeln!(s, "tier       {tier}{why}");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explains_the_attention_mask() {
        let cg = CodeGen::from_cranelift(selectjit::jit::Jit::host(true).unwrap());
        let t = explain(
            &cg,
            DType::F32,
            &[1, 1, 128, 128],
            &[8, 12, 128, 128],
            &[],
            Broadcast::Numpy,
        )
        .unwrap();
        assert!(t.contains("output [8,12,128,128]"), "{t}");
        assert!(t.contains("collapsed dims [96, 16384]"), "{t}");
        assert!(t.contains("tier       cranelift"), "{t}");
        assert!(t.contains("function"), "{t}");
        assert!(t.contains("ret"), "{t}");
        assert!(explain(&cg, DType::F32, &[3], &[4], &[], Broadcast::Numpy).is_err());
        assert!(
            explain(&cg, DType::F32, &[0], &[0], &[], Broadcast::Numpy)
                .unwrap()
                .contains("empty output")
        );
    }
}

//! `selectjit info`.

use std::io::Write;

use selectjit::codegen::cranelift::Jit;
use selectjit::env::{CACHE_CAPACITY, MAX_ISA, TIER, WISDOM};
use selectjit::{Result, Tier};

pub fn run(w: &mut dyn Write) -> Result<()> {
    let io = |e: std::io::Error| selectjit::Error::io("standard output", e);
    writeln!(w, "selectjit {}", env!("CARGO_PKG_VERSION")).map_err(io)?;
    writeln!(w, "host       {}", target_lexicon::Triple::host()).map_err(io)?;
    #[cfg(target_arch = "x86_64")]
    {
        let f = [
            ("sse4.1", std::arch::is_x86_feature_detected!("sse4.1")),
            ("avx", std::arch::is_x86_feature_detected!("avx")),
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
            ("avx512bw", std::arch::is_x86_feature_detected!("avx512bw")),
            ("avx512vl", std::arch::is_x86_feature_detected!("avx512vl")),
        ];
        let on: Vec<&str> = f.iter().filter(|x| x.1).map(|x| x.0).collect();
        writeln!(w, "cpu        {}", on.join(" ")).map_err(io)?;
    }
    let cap = match selectjit::env::max_isa() {
        Ok(selectjit::env::IsaCap::All) => "none".to_string(),
        Ok(c) => format!("{c:?} ({MAX_ISA}): wider instruction sets are not used"),
        Err(e) => format!("none: {e}"),
    };
    writeln!(w, "isa cap    {cap}").map_err(io)?;
    match Jit::host(false) {
        Ok(j) => {
            writeln!(w, "cranelift  {}", j.describe()).map_err(io)?;
            writeln!(
                w,
                "cranelift select {}",
                if j.uses_blendv() {
                    "blendv (pblendvb)"
                } else {
                    "bitselect"
                }
            )
            .map_err(io)?
        }
        Err(e) => writeln!(
            w,
            "cranelift  unavailable: {e} (static kernels serve every call)"
        )
        .map_err(io)?,
    }
    for t in Tier::CONCRETE {
        let state = match t.unavailable_reason() {
            None => "available".to_string(),
            Some(why) => format!("unavailable: {why}"),
        };
        writeln!(w, "tier       {:<10} {state}", t.name()).map_err(io)?;
    }
    let auto = || {
        let tiers: Vec<&str> = Tier::host_tiers()
            .into_iter()
            .filter(|t| t.is_x86())
            .map(Tier::name)
            .collect();
        match tiers.len() {
            0 => "auto -> cranelift".to_string(),
            1 => format!("auto -> {}", tiers[0]),
            _ => format!("auto: measured per kernel class among {}", tiers.join(", ")),
        }
    };
    let chosen = match Tier::from_env() {
        Ok(Tier::Auto) => auto(),
        Ok(t) => format!("{t} ({TIER})"),
        Err(e) => format!("{e} ({TIER}); {}", auto()),
    };
    writeln!(w, "tier used  {chosen}").map_err(io)?;
    writeln!(
        w,
        "static     {} (kernels compiled ahead of time, chosen at run time)",
        selectjit::codegen::static_level()
    )
    .map_err(io)?;
    writeln!(
        w,
        "profile    {}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    )
    .map_err(io)?;
    writeln!(
        w,
        "cache      {} kernels ({CACHE_CAPACITY})",
        selectjit::Engine::new().stats().capacity
    )
    .map_err(io)?;
    // The wisdom file an engine of the environment's settings would use, and what it holds.
    let wisdom = match std::env::var_os(WISDOM).filter(|p| !p.is_empty()) {
        None => format!("none ({WISDOM})"),
        Some(path) => {
            let config = selectjit::EngineConfig::new().wisdom(&path);
            let status = match selectjit::Engine::with_config(config) {
                Ok(e) => e.wisdom_status().to_string(),
                Err(e) => e.to_string(),
            };
            let path = std::path::Path::new(&path).display().to_string();
            format!("{path} ({WISDOM}): {status}")
        }
    };
    writeln!(w, "wisdom     {wisdom}").map_err(io)?;
    writeln!(
        w,
        "aot        export for x86_64, aarch64, s390x, riscv64 (selectjit aot); tables run on {}",
        selectjit::aot::host_arch()
    )
    .map_err(io)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    writeln!(w, "threads    {threads}").map_err(io)?;
    Ok(())
}

//! `selectjit info`.

use std::io::Write;

use selectjit::Result;
use selectjit::cache::{CAPACITY_ENV, capacity_from_env};
use selectjit::jit::{Jit, TIER_ENV, Tier};

pub fn run(w: &mut dyn Write) -> Result<()> {
    let io = |e: std::io::Error| selectjit::Error::Io(e.to_string());
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
    let chosen = match Tier::from_env() {
        Ok(Tier::Auto) => format!("auto -> {}", Tier::best()),
        Ok(t) => format!("{t} ({TIER_ENV})"),
        Err(e) => format!("{e} ({TIER_ENV}); auto -> {}", Tier::best()),
    };
    writeln!(w, "tier used  {chosen}").map_err(io)?;
    writeln!(
        w,
        "static     {} (kernels compiled ahead of time, chosen at run time)",
        selectjit::kernels::level().name()
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
        "cache      {} kernels ({CAPACITY_ENV})",
        capacity_from_env()
    )
    .map_err(io)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    writeln!(w, "threads    {threads}").map_err(io)?;
    Ok(())
}

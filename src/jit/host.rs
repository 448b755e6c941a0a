//! What this host and this build offer: which code generators the build compiles, and which
//! CPU features the host has (after `SELECTJIT_MAX_ISA`). With [`super::registry`] the one
//! place where `cfg(target_arch)` and `cfg(feature)` decide anything about code generation;
//! everything above asks here. Nothing in this file names a generator's type, so the lowest
//! layers (the tiers, the static kernels, the AOT table's feature check) may ask too.

use crate::env::{IsaCap, isa_cap};

/// The build compiles the x86 tier (feature `jit` on x86-64).
pub(crate) const X86_TIER: bool = cfg!(x86_tier);
/// The build compiles the Cranelift tier (feature `cranelift`).
pub(crate) const CRANELIFT: bool = cfg!(cranelift_tier);
/// The build generates code at all (feature `jit`).
pub(crate) const JIT: bool = cfg!(feature = "jit");
/// The build keeps `auto`'s measured choices in a wisdom file when asked to (feature `wisdom`).
pub(crate) const WISDOM: bool = cfg!(feature = "wisdom");
/// The build targets x86-64.
pub(crate) const X86_64: bool = cfg!(target_arch = "x86_64");

/// The x86 AVX flags (Cranelift's names, as AOT tables list them) that are not AVX-512.
pub(crate) const AVX_FLAGS: [&str; 4] = ["has_avx", "has_avx2", "has_fma", "has_avx_vnni"];

/// Whether the cap in force hides the x86 CPU feature of this Cranelift flag name.
pub(crate) fn hides_flag(name: &str) -> bool {
    let cap = isa_cap();
    (cap < IsaCap::All && name.starts_with("has_avx512"))
        || (cap < IsaCap::Avx2 && AVX_FLAGS.contains(&name))
}

/// Whether the CPU has the x86 feature `name` (`std::arch`'s names: `avx2`, `avx512bw`,
/// `f16c`, ...; false for a name not listed here and on other architectures). The cap of
/// `SELECTJIT_MAX_ISA` is not applied: see [`isa_allows`].
pub(crate) fn cpu_has(name: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        match name {
            "avx2" => has!("avx2"),
            "bmi2" => has!("bmi2"),
            "f16c" => has!("f16c"),
            "avx512f" => has!("avx512f"),
            "avx512bw" => has!("avx512bw"),
            "avx512vl" => has!("avx512vl"),
            "avx512dq" => has!("avx512dq"),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = name;
        false
    }
}

/// Whether `SELECTJIT_MAX_ISA` lets code use x86 feature `name` (AVX-512 features under a cap
/// of `avx2`; AVX2-era ones under `baseline`).
pub(crate) fn isa_allows(name: &str) -> bool {
    let cap = isa_cap();
    if name.starts_with("avx512") {
        cap >= IsaCap::All
    } else if matches!(name, "avx2" | "bmi2" | "fma" | "f16c") {
        cap >= IsaCap::Avx2
    } else {
        true
    }
}

/// The CPU features of this host a kernel table may require, under Cranelift's ISA flag names
/// (`has_sse41`, `has_avx2`, `has_lse`, ...), detected without Cranelift so that the no-JIT
/// build can check tables too; what `SELECTJIT_MAX_ISA` hides is left out. `None` on an
/// architecture this list does not know (the caller asks Cranelift where it can).
pub(crate) fn cpu_flags() -> Option<Vec<&'static str>> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let all = [
            ("has_cmpxchg16b", has!("cmpxchg16b")),
            ("has_sse3", has!("sse3")),
            ("has_ssse3", has!("ssse3")),
            ("has_sse41", has!("sse4.1")),
            ("has_sse42", has!("sse4.2")),
            ("has_popcnt", has!("popcnt")),
            ("has_avx", has!("avx")),
            ("has_avx2", has!("avx2")),
            ("has_fma", has!("fma")),
            ("has_avx_vnni", has!("avxvnni")),
            ("has_avx512vnni", has!("avx512vnni")),
            ("has_bmi1", has!("bmi1")),
            ("has_bmi2", has!("bmi2")),
            ("has_avx512bitalg", has!("avx512bitalg")),
            ("has_avx512dq", has!("avx512dq")),
            ("has_avx512f", has!("avx512f")),
            ("has_avx512vl", has!("avx512vl")),
            ("has_avx512vbmi", has!("avx512vbmi")),
            ("has_lzcnt", has!("lzcnt")),
        ];
        // What SELECTJIT_MAX_ISA hides is not the host's to offer (as for the tiers).
        Some(
            all.into_iter()
                .filter(|f| f.1 && !hides_flag(f.0))
                .map(|f| f.0)
                .collect(),
        )
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        let all = [
            ("has_lse", has!("lse")),
            ("has_pauth", has!("paca")),
            ("has_fp16", has!("fp16")),
            ("has_dotprod", has!("dotprod")),
            ("has_i8mm", has!("i8mm")),
        ];
        Some(all.into_iter().filter(|f| f.1).map(|f| f.0).collect())
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    None
}

/// This CPU as a file of measured choices names it (`crate::wisdom`): the architecture, the
/// model (on x86-64 the CPUID brand string, else `/proc/cpuinfo`'s model line where there is
/// one) and which of the x86 tiers' CPU features it has (whatever `SELECTJIT_MAX_ISA` hides:
/// the cap narrows the candidates, not the machine). Whitespace collapsed, one line.
pub(crate) fn cpu_identity() -> String {
    let mut features: Vec<&str> = Vec::new();
    for f in [
        "avx2", "bmi2", "avx512f", "avx512bw", "avx512vl", "avx512dq",
    ] {
        if cpu_has(f) {
            features.push(f);
        }
    }
    let model = cpu_model().unwrap_or_else(|| "unknown".to_string());
    let line = format!(
        "{}; {model}; {}",
        std::env::consts::ARCH,
        if features.is_empty() {
            "-".to_string()
        } else {
            features.join(" ")
        }
    );
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The CPU's model name: the CPUID brand string on x86-64 (its vendor string when it has
/// none).
#[cfg(target_arch = "x86_64")]
fn cpu_model() -> Option<String> {
    use std::arch::x86_64::__cpuid;
    let text = |regs: &[u32]| -> String {
        let bytes: Vec<u8> = regs.iter().flat_map(|r| r.to_le_bytes()).collect();
        String::from_utf8_lossy(&bytes)
            .trim_matches(|c: char| c == '\0' || c.is_whitespace())
            .to_string()
    };
    let brand = if __cpuid(0x8000_0000).eax >= 0x8000_0004 {
        let regs: Vec<u32> = (0x8000_0002..=0x8000_0004u32)
            .flat_map(|leaf| {
                let r = __cpuid(leaf);
                [r.eax, r.ebx, r.ecx, r.edx]
            })
            .collect();
        text(&regs)
    } else {
        String::new()
    };
    if !brand.is_empty() {
        return Some(brand);
    }
    let v = __cpuid(0);
    Some(text(&[v.ebx, v.edx, v.ecx])).filter(|s| !s.is_empty())
}

/// The CPU's model name: `/proc/cpuinfo`'s first model line, where the system has one.
#[cfg(not(target_arch = "x86_64"))]
fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let keys = [
        "model name",
        "Model",
        "cpu model",
        "uarch",
        "CPU part",
        "machine",
    ];
    keys.iter().find_map(|k| {
        info.lines().find_map(|l| {
            let (name, value) = l.split_once(':')?;
            (name.trim() == *k && !value.trim().is_empty()).then(|| value.trim().to_string())
        })
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cap_hides_what_it_names() {
        // Whatever the cap in force, the baseline is never hidden.
        assert!(super::isa_allows("sse4.1"));
        assert!(!super::isa_allows("avx512f") || super::isa_allows("avx2"));
        if super::X86_64 {
            assert!(super::cpu_flags().is_some());
        }
        assert!(!super::cpu_has("no-such-feature"));
    }

    #[test]
    fn the_cpu_identity_is_one_stable_line() {
        let id = super::cpu_identity();
        assert!(id.starts_with(std::env::consts::ARCH), "{id}");
        assert!(!id.contains('\n') && !id.contains("  "), "{id:?}");
        assert_eq!(id, super::cpu_identity());
    }
}

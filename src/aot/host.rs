//! The CPU features of this host under the names tables use (Cranelift's ISA flag names,
//! `has_sse41`, `has_avx2`, `has_lse`, ...), detected without Cranelift so that the no-JIT
//! build can check tables too. The names are those `cranelift-native` enables for the host;
//! a test of the `jit` build checks that both agree.

/// The CPU features of this host a table may require, detected once.
pub(crate) fn host_features() -> &'static [&'static str] {
    static F: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    F.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Vec<&'static str> {
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
    all.into_iter()
        .filter(|f| f.1 && !crate::env::hides_flag(f.0))
        .map(|f| f.0)
        .collect()
}

#[cfg(target_arch = "aarch64")]
fn detect() -> Vec<&'static str> {
    use std::arch::is_aarch64_feature_detected as has;
    let all = [
        ("has_lse", has!("lse")),
        ("has_pauth", has!("paca")),
        ("has_fp16", has!("fp16")),
        ("has_dotprod", has!("dotprod")),
        ("has_i8mm", has!("i8mm")),
    ];
    all.into_iter().filter(|f| f.1).map(|f| f.0).collect()
}

/// Other architectures: the features `cranelift-native` detects where the build has it; none
/// without (a table that needs any is then refused, naming them).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn detect() -> Vec<&'static str> {
    #[cfg(cranelift_tier)]
    if let Ok(isa) = crate::jit::cranelift::host_isa(false) {
        return isa
            .isa_flags()
            .iter()
            .filter(|v| v.name.starts_with("has_") && v.as_bool() == Some(true))
            .map(|v| v.name)
            .collect();
    }
    Vec::new()
}

#[cfg(all(
    test,
    cranelift_tier,
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod tests {
    /// The features detected here are exactly the ones Cranelift's own host detection enables.
    #[test]
    fn agrees_with_cranelift_native() {
        let isa = crate::jit::cranelift::host_isa(false).unwrap();
        let mut theirs: Vec<&str> = isa
            .isa_flags()
            .iter()
            .filter(|v| v.name.starts_with("has_") && v.as_bool() == Some(true))
            .map(|v| v.name)
            .collect();
        let mut ours = super::host_features().to_vec();
        theirs.sort_unstable();
        ours.sort_unstable();
        assert_eq!(ours, theirs);
    }
}

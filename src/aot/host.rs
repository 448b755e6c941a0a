//! The CPU features of this host under the names tables use (Cranelift's ISA flag names,
//! `has_sse41`, `has_avx2`, `has_lse`, ...), detected without Cranelift where the library
//! knows the architecture ([`crate::jit::host::cpu_flags`]), so that the no-JIT build can check
//! tables too; elsewhere as the code generators of the build see them. The names are those
//! `cranelift-native` enables for the host; a test of the Cranelift tier checks that both agree.

/// The CPU features of this host a table may require, detected once.
pub(crate) fn host_features() -> &'static [&'static str] {
    static F: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    F.get_or_init(|| {
        crate::jit::host::cpu_flags().unwrap_or_else(crate::jit::registry::host_isa_flags)
    })
}

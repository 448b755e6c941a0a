//! Which code generators this build compiles, as two cfgs for the code (see the features in
//! Cargo.toml): `x86_tier`, the AVX2 / AVX-512 tier (feature `jit` on x86-64), and
//! `cranelift_tier`, the Cranelift tier (feature `cranelift`).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(x86_tier)");
    println!("cargo::rustc-check-cfg=cfg(cranelift_tier)");
    let feature = |f: &str| std::env::var_os(format!("CARGO_FEATURE_{f}")).is_some();
    let x86_64 = std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "x86_64");
    if feature("JIT") && x86_64 {
        println!("cargo::rustc-cfg=x86_tier");
    }
    if feature("CRANELIFT") {
        println!("cargo::rustc-cfg=cranelift_tier");
    }
}

//! x86-64 machine code: the test emulator that runs AVX2 and AVX-512 kernels on any x86-64 host.

#[doc(hidden)]
pub mod emu;

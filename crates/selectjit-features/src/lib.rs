//! Nothing here: the tests in `tests/` exercise the `selectjit` library in the feature set this
//! crate is built with (`default-set`, `lean`, or none: the no-JIT build).

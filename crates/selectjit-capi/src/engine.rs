//! `SelectjitEngine`: built from `SelectjitOptions` (backend and tier codes) by
//! `selectjit_engine_new`, inspected by `selectjit_engine_aot_status` and
//! `selectjit_engine_stats` (`SelectjitStats`), destroyed by `selectjit_engine_free`.

use std::ffi::c_int;

use selectjit_core::aot::{AotTable, SelectjitAotTable};
use selectjit_core::{Backend, Engine, EngineConfig, Tier};

use crate::error::{
    Fail, SELECTJIT_ERR_AOT, SELECTJIT_ERR_INVALID, SELECTJIT_ERR_NULL_POINTER, fail, free_box,
    guard,
};
use crate::struct_size::{check_size, input_size, read_fields};

/// Backend: JIT-compiled kernels, cached.
pub const SELECTJIT_BACKEND_JIT: c_int = 0;
/// Backend: ahead-of-time static kernels.
pub const SELECTJIT_BACKEND_STATIC: c_int = 1;
/// Backend: the reference interpreter.
pub const SELECTJIT_BACKEND_INTERP: c_int = 2;

/// Tier (`SelectjitOptions::tier`): the default (the environment's `SELECTJIT_TIER` when the
/// options read it, else `auto`).
pub const SELECTJIT_TIER_DEFAULT: i32 = 0;
/// Tier: the best tier this host runs, chosen per kernel class by measuring.
pub const SELECTJIT_TIER_AUTO: i32 = 1;
/// Tier: Cranelift.
pub const SELECTJIT_TIER_CRANELIFT: i32 = 2;
/// Tier: x86-64 AVX2 code.
pub const SELECTJIT_TIER_AVX2: i32 = 3;
/// Tier: x86-64 AVX-512 code.
pub const SELECTJIT_TIER_AVX512: i32 = 4;

/// The first version's `sizeof(SelectjitOptions)`: `struct_size`, `backend`, `cache_capacity`
/// and `threads`. Smaller structs are refused.
pub const SELECTJIT_OPTIONS_SIZE_V1: u32 = 24;
/// The first version's `sizeof(SelectjitStats)`: `struct_size`, `reserved` and 23 counters
/// (`capacity` to `blocked_runs`). Smaller structs are refused.
pub const SELECTJIT_STATS_SIZE_V1: u32 = 192;

/// How to build an engine (`selectjit_engine_new`). Zero-initialise it, set `struct_size` to
/// `sizeof(SelectjitOptions)`, then the fields wanted: every field's 0 is its default.
/// Fields are only ever appended; a struct from an older header (its `struct_size` at least
/// `SELECTJIT_OPTIONS_SIZE_V1`) gets the defaults for the fields it lacks.
#[repr(C)]
pub struct SelectjitOptions {
    /// `sizeof(SelectjitOptions)` as the caller's header declares it.
    pub struct_size: u32,
    /// `SELECTJIT_BACKEND_*` (0: JIT).
    pub backend: i32,
    /// Kernels the cache keeps (0: the default, 1024, or `SELECTJIT_CACHE_CAPACITY`).
    pub cache_capacity: u64,
    /// Threads a large call may be split across (0: every available core; 1: the caller's).
    pub threads: u64,
    /// `SELECTJIT_TIER_*` (0: the default).
    pub tier: i32,
    /// Sightings of a signature before its exact kernel is compiled (0: the default, 2, or
    /// `SELECTJIT_EXACT_AFTER`).
    pub exact_after: u32,
    /// Non-zero: the `SELECTJIT_*` environment variables give the defaults of the fields left 0
    /// (a malformed variable is then an error). 0: the environment is not read.
    pub read_env: u32,
    /// With `aot_table`: 0, a rejected table fails `selectjit_engine_new`; non-zero, the engine
    /// is built without it (`selectjit_engine_aot_status` then says why).
    pub aot_fallback: u32,
    /// An ahead-of-time kernel table linked into the program (`selectjit aot`), or NULL.
    pub aot_table: *const SelectjitAotTable,
}

/// An engine's counters (`selectjit_engine_stats`): the caller sets `struct_size`, the library
/// fills every counter that fits. The counters are those of the Rust `CacheStats::fields()`,
/// by the same names and in the same order (a test holds them to it); new ones are appended.
#[repr(C)]
#[derive(Default)]
pub struct SelectjitStats {
    /// `sizeof(SelectjitStats)` as the caller's header declares it (set by the caller).
    pub struct_size: u32,
    /// Not written by the library.
    pub reserved: u32,
    /// Signatures the cache keeps at most.
    pub capacity: u64,
    /// Signatures held now.
    pub len: u64,
    /// Calls that found their exact kernel.
    pub hits: u64,
    /// Calls whose signature was not in the cache.
    pub misses: u64,
    /// Calls served by a shape-generic kernel while their signature was not yet hot.
    pub generic_runs: u64,
    /// Signatures evicted.
    pub evictions: u64,
    /// Exact-kernel compilations.
    pub compiles: u64,
    /// Time of the exact-kernel compilations, in microseconds.
    pub compile_us: u64,
    /// Shape-generic kernel compilations.
    pub generic_compiles: u64,
    /// Time of the shape-generic compilations, in microseconds.
    pub generic_compile_us: u64,
    /// Compilations that failed (served by the static kernels).
    pub compile_failures: u64,
    /// Shape-generic kernels held now.
    pub generic_len: u64,
    /// Calls run by an exact kernel of the engine's AOT table.
    pub aot_exact_runs: u64,
    /// Calls run by a shape-generic kernel of the engine's AOT table.
    pub aot_generic_runs: u64,
    /// Calls run by the static kernels.
    pub static_runs: u64,
    /// Exact kernels in the engine's AOT table.
    pub aot_exact_kernels: u64,
    /// Shape-generic kernels in the engine's AOT table.
    pub aot_generic_kernels: u64,
    /// Kernel classes whose variant was chosen by measuring.
    pub tier_trials: u64,
    /// Calls timed for those choices.
    pub trial_calls: u64,
    /// Time those calls took beyond the chosen variant's, in nanoseconds.
    pub trial_excess_ns: u64,
    /// Compilations of candidate variants beyond the one kept.
    pub trial_compiles: u64,
    /// Their time in microseconds.
    pub trial_compile_us: u64,
    /// Calls whose predicate no kernel fuses, run in blocks by the static kernels.
    pub blocked_runs: u64,
    /// N-way calls (`selectjit_select_n`) run by a single-pass n-way kernel.
    pub nway_pass_runs: u64,
    /// Single-pass n-way kernels compiled.
    pub nway_compiles: u64,
    /// Their time in microseconds.
    pub nway_compile_us: u64,
}

/// Where `SelectjitStats`' counters start: after `struct_size` and `reserved`.
const STATS_HEADER: usize = 8;

/// An engine (opaque).
pub struct SelectjitEngine {
    pub(crate) engine: Engine,
    /// Why the AOT table given in the options was rejected (with `aot_fallback`).
    aot_rejected: Option<String>,
}

impl SelectjitOptions {
    /// Every field at its default (0, NULL).
    pub(crate) fn zeroed() -> SelectjitOptions {
        SelectjitOptions {
            struct_size: 0,
            backend: 0,
            cache_capacity: 0,
            threads: 0,
            tier: 0,
            exact_after: 0,
            read_env: 0,
            aot_fallback: 0,
            aot_table: std::ptr::null(),
        }
    }

    /// The caller's options, the fields its struct lacks at their defaults.
    ///
    /// # Safety
    /// As for `input_size`.
    unsafe fn read(p: *const SelectjitOptions) -> Result<SelectjitOptions, Fail> {
        // SAFETY: `p` is NULL or covers `struct_size` readable bytes (the function's contract);
        // `input_size` checks NULL and the size.
        let size = unsafe { input_size("options", p, SELECTJIT_OPTIONS_SIZE_V1) }?;
        let mut o = SelectjitOptions::zeroed();
        read_fields!(
            SelectjitOptions,
            p,
            size,
            o,
            [
                struct_size,
                backend,
                cache_capacity,
                threads,
                tier,
                exact_after,
                read_env,
                aot_fallback,
                aot_table,
            ]
        );
        Ok(o)
    }
}

const _: () = assert!(
    std::mem::offset_of!(SelectjitOptions, tier) == SELECTJIT_OPTIONS_SIZE_V1 as usize,
    "the first version of SelectjitOptions ends where `tier` starts"
);
const _: () = assert!(
    std::mem::offset_of!(SelectjitStats, blocked_runs) + 8 == SELECTJIT_STATS_SIZE_V1 as usize,
    "the first version of SelectjitStats ends with `blocked_runs`"
);

/// The configuration the options describe.
fn engine_config(o: &SelectjitOptions) -> Result<EngineConfig, Fail> {
    let backend = match o.backend {
        SELECTJIT_BACKEND_JIT => Backend::Jit,
        SELECTJIT_BACKEND_STATIC => Backend::Static,
        SELECTJIT_BACKEND_INTERP => Backend::Interp,
        b => return Err(fail(SELECTJIT_ERR_INVALID, format!("unknown backend {b}"))),
    };
    let tier = match o.tier {
        SELECTJIT_TIER_DEFAULT => None,
        t => Some(
            usize::try_from(t - 1)
                .ok()
                .and_then(|i| Tier::ALL.get(i).copied())
                .ok_or_else(|| fail(SELECTJIT_ERR_INVALID, format!("unknown tier {t}")))?,
        ),
    };
    let size = |what: &str, n: u64| {
        usize::try_from(n).map_err(|_| {
            fail(
                SELECTJIT_ERR_INVALID,
                format!("{what} {n} does not fit this machine's size_t"),
            )
        })
    };
    let mut c = if o.read_env != 0 {
        EngineConfig::from_env()?
    } else {
        EngineConfig::new()
    }
    .backend(backend);
    if let Some(t) = tier {
        c = c.tier(t);
    }
    if o.cache_capacity != 0 {
        c = c.cache_capacity(size("cache_capacity", o.cache_capacity)?);
    }
    if o.threads != 0 {
        c = c.threads(size("threads", o.threads)?);
    }
    if o.exact_after != 0 {
        c = c.exact_after(o.exact_after);
    }
    Ok(c)
}

/// Creates an engine into `*out` from `opts` (NULL: every default, with the `SELECTJIT_*`
/// environment variables applied, as `read_env` does). Returns a status code; on error `*out`
/// is left as it was and `selectjit_last_error` says why: an unknown backend or tier, a bad
/// `struct_size`, a malformed environment variable, a tier this host cannot run, or an AOT
/// table that fails the checks of `selectjit_aot_table_check` (unless `aot_fallback` is set:
/// the engine is then built without it, see `selectjit_engine_aot_status`).
///
/// An `aot_table` with backend `SELECTJIT_BACKEND_STATIC` generates no code at all: the table's
/// exact kernel of a call, else its shape-generic kernel of the call's pattern, else the static
/// kernels. With the JIT backend the table's kernels come first and the others are generated;
/// the interpreter ignores the table.
///
/// # Safety
/// `opts` is NULL or points at `opts->struct_size` readable bytes of a `SelectjitOptions`;
/// its `aot_table` as for `selectjit_aot_table_check`; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_engine_new(
    opts: *const SelectjitOptions,
    out: *mut *mut SelectjitEngine,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(SELECTJIT_ERR_NULL_POINTER, "out is NULL"));
        }
        let o = if opts.is_null() {
            SelectjitOptions {
                read_env: 1,
                ..SelectjitOptions::zeroed()
            }
        } else {
            // SAFETY: `opts` is non-NULL (checked above) and covers `struct_size` readable
            // bytes (the caller's contract); `read` checks the size.
            unsafe { SelectjitOptions::read(opts) }?
        };
        let mut cfg = engine_config(&o)?;
        let mut aot_rejected = None;
        if !o.aot_table.is_null() {
            // SAFETY: `aot_table` is non-NULL (checked above) and a table linked into the
            // program (the caller's contract); `from_raw` checks alignment, version and keys.
            match unsafe { AotTable::from_raw(o.aot_table) } {
                Ok(t) => cfg = cfg.aot(t),
                Err(e) if o.aot_fallback != 0 => aot_rejected = Some(e.to_string()),
                Err(e) => return Err(e.into()),
            }
        }
        let engine = Engine::with_config(cfg)?;
        let e = Box::new(SelectjitEngine {
            engine,
            aot_rejected,
        });
        // SAFETY: `out` is non-NULL (checked first) and writable (the caller's contract).
        unsafe { out.write(Box::into_raw(e)) };
        Ok(())
    })
}

/// Whether the engine uses the AOT table its options gave: `SELECTJIT_OK` (or no table was
/// given), or `SELECTJIT_ERR_AOT` when it was rejected and the engine built without it
/// (`aot_fallback`), with the reason in `selectjit_last_error`.
///
/// # Safety
/// `engine` is NULL or comes from `selectjit_engine_new`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_engine_aot_status(engine: *const SelectjitEngine) -> c_int {
    guard(|| {
        // SAFETY: `engine` is NULL or a live engine from `selectjit_engine_new` (the caller's
        // contract); `engine_ref` checks NULL.
        let e = unsafe { engine_ref(engine) }?;
        match &e.aot_rejected {
            Some(why) => Err(fail(SELECTJIT_ERR_AOT, why.clone())),
            None => Ok(()),
        }
    })
}

/// The engine behind a handle.
///
/// # Safety
/// `engine` is NULL or comes from `selectjit_engine_new` and was not freed.
pub(crate) unsafe fn engine_ref<'a>(
    engine: *const SelectjitEngine,
) -> Result<&'a SelectjitEngine, Fail> {
    if engine.is_null() {
        return Err(fail(SELECTJIT_ERR_NULL_POINTER, "engine is NULL"));
    }
    // SAFETY: non-NULL, from `selectjit_engine_new` (the caller's contract).
    Ok(unsafe { &*engine })
}

/// Destroys an engine made by `selectjit_engine_new` (NULL is ignored).
///
/// # Safety
/// `e` is NULL or a pointer returned by `selectjit_engine_new`, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_engine_free(e: *mut SelectjitEngine) {
    // SAFETY: `e` is NULL or from `selectjit_engine_new`, not freed before (the caller's
    // contract); `free_box` ignores NULL.
    unsafe { free_box(e) }
}

/// Fills `*out` with the engine's counters. The caller sets `out->struct_size` (at least the
/// first version's size, at most `SELECTJIT_STRUCT_SIZE_MAX`); the library writes each counter
/// that fits in it, zero past its own struct (counters of a newer header this library lacks),
/// and neither `struct_size` nor `reserved`. On error nothing is written.
///
/// # Safety
/// `engine` comes from `selectjit_engine_new`; `out` is NULL or points at `out->struct_size`
/// writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn selectjit_engine_stats(
    engine: *const SelectjitEngine,
    out: *mut SelectjitStats,
) -> c_int {
    guard(|| {
        // SAFETY: `engine` is NULL or a live engine from `selectjit_engine_new` (the caller's
        // contract); `engine_ref` checks NULL.
        let eng = &unsafe { engine_ref(engine) }?.engine;
        if out.is_null() {
            return Err(fail(SELECTJIT_ERR_NULL_POINTER, "stats is NULL"));
        }
        // SAFETY: `out` is non-NULL (checked above); the struct starts with its
        // `uint32_t struct_size`.
        let size = unsafe { out.cast::<u32>().read_unaligned() };
        check_size("stats", size, SELECTJIT_STATS_SIZE_V1)?;
        let fields = eng.stats().fields();
        let base = out.cast::<u8>();
        let mut end = STATS_HEADER;
        for (_, v) in &fields {
            if end + 8 > size as usize {
                break;
            }
            // SAFETY: `end + 8 <= struct_size` (checked above): inside the writable bytes the
            // caller vouches for.
            unsafe { base.add(end).cast::<u64>().write_unaligned(*v) };
            end += 8;
        }
        if end < size as usize {
            // SAFETY: `end < struct_size` (checked above): inside the writable bytes the caller
            // vouches for; counters this library does not have read 0.
            unsafe { base.add(end).write_bytes(0, size as usize - end) };
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_codes_follow_the_rust_order() {
        let tiers = [
            (SELECTJIT_TIER_AUTO, Tier::Auto),
            (SELECTJIT_TIER_CRANELIFT, Tier::Cranelift),
            (SELECTJIT_TIER_AVX2, Tier::Avx2),
            (SELECTJIT_TIER_AVX512, Tier::Avx512),
        ];
        for (c, t) in tiers {
            assert_eq!(Tier::ALL[(c - 1) as usize], t);
        }
    }

    /// The stats struct is `struct_size`, `reserved` and one `uint64_t` per entry of
    /// `CacheStats::fields()` (its names against the header: `tests/c_api.rs`), filled by index.
    #[test]
    fn stats_struct_has_one_u64_per_field() {
        let n = Engine::new().stats().fields().len();
        assert_eq!(std::mem::size_of::<SelectjitStats>(), STATS_HEADER + 8 * n);
        assert_eq!(std::mem::offset_of!(SelectjitStats, capacity), STATS_HEADER);
        assert_eq!(
            std::mem::offset_of!(SelectjitStats, nway_compile_us),
            STATS_HEADER + 8 * (n - 1)
        );
    }
}

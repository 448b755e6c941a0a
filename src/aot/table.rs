//! The exported table (C layout) and its checked registration.

use std::collections::HashMap;
use std::sync::Arc;

use cranelift_codegen::isa::CallConv;
use rustc_hash::FxBuildHasher;
use target_lexicon::{Architecture, Triple};

use super::key::{parse_pattern_key, parse_signature_key};
use crate::error::{Error, Result};
use crate::jit::{Kernel, Pattern};
use crate::plan::Signature;

/// The first bytes of every table.
pub const AOT_MAGIC: [u8; 8] = *b"SJITAOT\0";
/// The table format this library writes and reads. It changes whenever the layout, the key
/// format or the kernels' calling contract changes.
pub const AOT_VERSION: u32 = 1;
/// [`SelectjitAotEntry::kind`] of an exact kernel.
pub const AOT_EXACT: u32 = 0;
/// [`SelectjitAotEntry::kind`] of a shape-generic kernel.
pub const AOT_GENERIC: u32 = 1;
/// Most entries a table may have.
pub const AOT_MAX_ENTRIES: u32 = 1 << 20;
/// Most key bytes a table may have.
pub const AOT_MAX_KEY_BYTES: u32 = 1 << 28;

/// A kernel's entry point: runs outer indices `begin..end` of its signature; `dims` and
/// `byte_strides` are read by shape-generic kernels only (`dims[k]`, `byte_strides[op * rank +
/// k]` for op = cond, then, else, out), exact kernels get NULL.
pub type SelectjitKernelFn = unsafe extern "C" fn(
    cond: *const u8,
    then: *const u8,
    else_: *const u8,
    out: *mut u8,
    begin: usize,
    end: usize,
    dims: *const u64,
    byte_strides: *const i64,
);

/// One kernel of a table: its key (`key_len` bytes at `keys + key_offset`), its kind
/// ([`AOT_EXACT`] or [`AOT_GENERIC`]), its size in bytes of machine code, and its function.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SelectjitAotEntry {
    /// Where the key starts in the table's key bytes.
    pub key_offset: u32,
    /// The key's length in bytes.
    pub key_len: u32,
    /// [`AOT_EXACT`] or [`AOT_GENERIC`].
    pub kind: u32,
    /// Bytes of machine code of the kernel.
    pub code_bytes: u32,
    /// The kernel.
    pub func: Option<SelectjitKernelFn>,
}

/// The table an exported object defines (symbol `selectjit_aot_table` unless renamed): a
/// header that says what the kernels need, and the entries. Fields are in the target's byte
/// order; the keys are the same bytes on every target (see [`super::key`]).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SelectjitAotTable {
    /// [`AOT_MAGIC`].
    pub magic: [u8; 8],
    /// [`AOT_VERSION`].
    pub version: u32,
    /// Entries at `entries`.
    pub entry_count: u32,
    /// Bytes at `keys`.
    pub keys_len: u32,
    /// 0.
    pub reserved: u32,
    /// FNV-1a (64-bit) over every entry's kind and key length (u32 little-endian each) and key
    /// bytes, in entry order.
    pub checksum: u64,
    /// The target triple, NUL-terminated.
    pub triple: [u8; 64],
    /// The CPU features the code needs (Cranelift's names, space-separated), NUL-terminated.
    pub features: [u8; 256],
    /// The entries, `entry_count` of them.
    pub entries: *const SelectjitAotEntry,
    /// The key bytes, `keys_len` of them.
    pub keys: *const u8,
}

/// The C declarations of the table (the same text is in `include/selectjit.h` and in every
/// header `selectjit aot` writes; guarded so that both can be included).
pub const C_TYPES: &str = r#"#ifndef SELECTJIT_AOT_TYPES
#define SELECTJIT_AOT_TYPES
/* Ahead-of-time kernel tables (selectjit aot). A kernel runs outer indices [begin, end) of its
 * signature; dims and byte_strides are read by shape-generic kernels only
 * (dims[k], byte_strides[op * rank + k] for op = cond, then, else, out); exact kernels get NULL. */
typedef void (*SelectjitKernelFn)(const uint8_t *cond, const uint8_t *then_, const uint8_t *else_,
                                  uint8_t *out, size_t begin, size_t end, const uint64_t *dims,
                                  const int64_t *byte_strides);
#define SELECTJIT_AOT_VERSION 1
#define SELECTJIT_AOT_EXACT 0
#define SELECTJIT_AOT_GENERIC 1
typedef struct SelectjitAotEntry {
    uint32_t key_offset; /* the key is key_len bytes at keys + key_offset */
    uint32_t key_len;
    uint32_t kind;       /* SELECTJIT_AOT_EXACT or SELECTJIT_AOT_GENERIC */
    uint32_t code_bytes;
    SelectjitKernelFn func;
} SelectjitAotEntry;
typedef struct SelectjitAotTable {
    uint8_t magic[8];    /* "SJITAOT\0" */
    uint32_t version;    /* SELECTJIT_AOT_VERSION */
    uint32_t entry_count;
    uint32_t keys_len;
    uint32_t reserved;
    uint64_t checksum;   /* FNV-1a 64 over each entry's kind, key_len (u32 LE) and key bytes */
    char triple[64];     /* target triple */
    char features[256];  /* CPU features the code needs, space-separated */
    const SelectjitAotEntry *entries;
    const uint8_t *keys;
} SelectjitAotTable;
#endif /* SELECTJIT_AOT_TYPES */
"#;

/// FNV-1a, 64-bit.
pub(crate) struct Fnv(pub u64);

impl Fnv {
    pub(crate) fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    /// Adds one entry: kind, key length, key.
    pub(crate) fn entry(&mut self, kind: u32, key: &[u8]) {
        self.write(&kind.to_le_bytes());
        self.write(&(key.len() as u32).to_le_bytes());
        self.write(key);
    }
}

/// The architecture family of a triple, as named in messages.
pub(crate) fn arch_name(a: Architecture) -> String {
    match a {
        Architecture::X86_64 => "x86_64".into(),
        Architecture::Aarch64(_) => "aarch64".into(),
        Architecture::S390x => "s390x".into(),
        Architecture::Riscv64(_) => "riscv64".into(),
        other => other.to_string(),
    }
}

/// The CPU features (Cranelift flag names) this host has, detected once.
fn host_features() -> Result<&'static [String]> {
    static F: std::sync::OnceLock<std::result::Result<Vec<String>, String>> =
        std::sync::OnceLock::new();
    let r = F.get_or_init(|| {
        let flags = crate::jit::cranelift::shared_flags(false, false).map_err(|e| e.to_string())?;
        let isa = cranelift_native::builder()
            .map_err(|e| format!("cannot detect this host's CPU features: {e}"))?
            .finish(cranelift_codegen::settings::Flags::new(flags))
            .map_err(|e| format!("cannot detect this host's CPU features: {e}"))?;
        Ok(enabled_features(&*isa))
    });
    r.as_deref().map_err(|e| Error::Aot(e.clone()))
}

/// The CPU-feature flags (`has_*`) enabled in `isa`.
pub(crate) fn enabled_features(isa: &dyn cranelift_codegen::isa::TargetIsa) -> Vec<String> {
    isa.isa_flags()
        .iter()
        .filter(|v| v.name.starts_with("has_") && v.as_bool() == Some(true))
        .map(|v| v.name.to_string())
        .collect()
}

/// A NUL-terminated UTF-8 string in a fixed array.
fn c_string<'a>(what: &str, bytes: &'a [u8]) -> Result<&'a str> {
    let end = bytes
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| Error::Aot(format!("{what} is not NUL-terminated")))?;
    std::str::from_utf8(&bytes[..end]).map_err(|_| Error::Aot(format!("{what} is not UTF-8")))
}

/// A validated table: the kernels of a linked object, by signature and by pattern.
/// Cheap to clone (shared).
#[derive(Clone)]
pub struct AotTable {
    inner: Arc<Inner>,
}

struct Inner {
    triple: String,
    features: Vec<String>,
    exact: HashMap<Signature, Arc<Kernel>, FxBuildHasher>,
    generic: HashMap<Pattern, Arc<Kernel>, FxBuildHasher>,
    code_bytes: usize,
}

impl std::fmt::Debug for AotTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AotTable({}, {} exact + {} generic kernels)",
            self.inner.triple,
            self.inner.exact.len(),
            self.inner.generic.len()
        )
    }
}

/// What the header of a table says.
pub(crate) struct Header<'a> {
    pub triple: &'a str,
    pub features: Vec<String>,
}

/// Checks the header fields that need neither the entries nor the host: magic, version,
/// counts, reserved field, the triple and the feature list.
pub(crate) fn check_format(t: &SelectjitAotTable) -> Result<Header<'_>> {
    if t.magic != AOT_MAGIC {
        return Err(Error::Aot(format!(
            "bad magic {:02x?} (not a selectjit kernel table)",
            t.magic
        )));
    }
    if t.version != AOT_VERSION {
        return Err(Error::Aot(format!(
            "table version {} (this library reads version {AOT_VERSION}; export it again)",
            t.version
        )));
    }
    if t.entry_count > AOT_MAX_ENTRIES {
        return Err(Error::Aot(format!(
            "{} entries, more than {AOT_MAX_ENTRIES}",
            t.entry_count
        )));
    }
    if t.keys_len > AOT_MAX_KEY_BYTES {
        return Err(Error::Aot(format!(
            "{} key bytes, more than {AOT_MAX_KEY_BYTES}",
            t.keys_len
        )));
    }
    if t.reserved != 0 {
        return Err(Error::Aot(format!("reserved field is {}", t.reserved)));
    }
    let triple = c_string("target triple", &t.triple)?;
    triple
        .parse::<Triple>()
        .map_err(|e| Error::Aot(format!("target triple '{triple}': {e}")))?;
    let features: Vec<String> = c_string("feature list", &t.features)?
        .split_whitespace()
        .map(str::to_string)
        .collect();
    Ok(Header { triple, features })
}

/// Checks that this host runs the code of a table with this header: its architecture, byte
/// order and calling convention, and every CPU feature the code needs.
fn check_host(header: &Header<'_>) -> Result<()> {
    let triple = header.triple;
    let parsed: Triple = triple
        .parse()
        .map_err(|e| Error::Aot(format!("target triple '{triple}': {e}")))?;
    let h = Triple::host();
    if arch_name(parsed.architecture) != arch_name(h.architecture)
        || parsed.endianness().ok() != h.endianness().ok()
    {
        return Err(Error::Aot(format!(
            "kernels for {triple} ({}) cannot run on this {} host",
            arch_name(parsed.architecture),
            arch_name(h.architecture)
        )));
    }
    if CallConv::triple_default(&parsed) != CallConv::triple_default(&h) {
        return Err(Error::Aot(format!(
            "kernels for {triple} use the {} calling convention, this host {}",
            CallConv::triple_default(&parsed),
            CallConv::triple_default(&h)
        )));
    }
    let have = host_features()?;
    let missing: Vec<&str> = header
        .features
        .iter()
        .filter(|f| !have.contains(f))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(Error::Aot(format!(
            "kernels for {triple} need CPU features this host lacks: {}",
            missing.join(" ")
        )));
    }
    Ok(())
}

/// One entry's key and kind, checked: the kernel it names.
pub(crate) enum Named {
    Exact(Box<Signature>),
    Generic(Pattern),
}

/// Checks every entry against the key bytes: kinds, key bounds and syntax, duplicates, and the
/// checksum. `func_ok(i)` says whether entry `i` has a function.
pub(crate) fn check_entries(
    checksum: u64,
    entries: &[SelectjitAotEntry],
    keys: &[u8],
    func_ok: impl Fn(usize) -> bool,
) -> Result<Vec<Named>> {
    let mut sum = Fnv::new();
    let mut out = Vec::with_capacity(entries.len());
    let mut seen_exact = std::collections::HashSet::new();
    let mut seen_generic = std::collections::HashSet::new();
    for (i, e) in entries.iter().enumerate() {
        let key = (e.key_offset as usize)
            .checked_add(e.key_len as usize)
            .and_then(|end| keys.get(e.key_offset as usize..end))
            .ok_or_else(|| {
                Error::Aot(format!(
                    "entry {i}: key at {}..+{} lies outside the {} key bytes",
                    e.key_offset,
                    e.key_len,
                    keys.len()
                ))
            })?;
        sum.entry(e.kind, key);
        let named = match e.kind {
            AOT_EXACT => {
                let s =
                    parse_signature_key(key).map_err(|x| Error::Aot(format!("entry {i}: {x}")))?;
                if !seen_exact.insert(s.clone()) {
                    return Err(Error::Aot(format!("entry {i}: duplicate kernel {s}")));
                }
                Named::Exact(Box::new(s))
            }
            AOT_GENERIC => {
                let p =
                    parse_pattern_key(key).map_err(|x| Error::Aot(format!("entry {i}: {x}")))?;
                if !seen_generic.insert(p) {
                    return Err(Error::Aot(format!("entry {i}: duplicate kernel {p}")));
                }
                Named::Generic(p)
            }
            k => return Err(Error::Aot(format!("entry {i}: unknown kernel kind {k}"))),
        };
        if !func_ok(i) {
            return Err(Error::Aot(format!("entry {i}: no function")));
        }
        out.push(named);
    }
    if sum.0 != checksum {
        return Err(Error::Aot(format!(
            "checksum {:#018x} does not match the entries ({:#018x}): the table is corrupted",
            checksum, sum.0
        )));
    }
    Ok(out)
}

impl AotTable {
    /// Checks a table linked into this program and takes its kernels: the magic and version,
    /// the target (its architecture and calling convention must be this host's, and the host
    /// must have every CPU feature the code needs), the counts, every key, no duplicates, the
    /// checksum over kinds and keys, and a function for every entry. Any failure is an
    /// [`Error::Aot`] that says what is wrong; nothing of the table is used then.
    ///
    /// # Safety
    /// `table` is NULL or points at a table that lives for the rest of the program, written by
    /// [`super::export`] into an object that is linked into this program (or into a library that
    /// stays loaded): its `entries` and `keys` cover `entry_count` entries and `keys_len` bytes,
    /// and each function pointer is the kernel its key names. The checks above catch tables
    /// for another machine or format and corrupted keys, not pointers that lie.
    pub unsafe fn from_raw(table: *const SelectjitAotTable) -> Result<AotTable> {
        if table.is_null() {
            return Err(Error::Aot("the table pointer is NULL".into()));
        }
        if !table.is_aligned() {
            return Err(Error::Aot("the table pointer is misaligned".into()));
        }
        // SAFETY: non-NULL and aligned; the caller guarantees a live table.
        let t = unsafe { &*table };
        let h = check_format(t)?;
        check_host(&h)?;
        let n = t.entry_count as usize;
        if (n > 0 && (t.entries.is_null() || !t.entries.is_aligned()))
            || (t.keys_len > 0 && t.keys.is_null())
        {
            return Err(Error::Aot(
                "entries or keys pointer is NULL or misaligned".into(),
            ));
        }
        let entries: &[SelectjitAotEntry] = if n == 0 {
            &[]
        } else {
            // SAFETY: non-NULL, aligned, and `entry_count` (bounded above) entries per the
            // caller's contract.
            unsafe { std::slice::from_raw_parts(t.entries, n) }
        };
        let keys: &[u8] = if t.keys_len == 0 {
            &[]
        } else {
            // SAFETY: non-NULL and `keys_len` (bounded above) bytes per the caller's contract.
            unsafe { std::slice::from_raw_parts(t.keys, t.keys_len as usize) }
        };
        let named = check_entries(t.checksum, entries, keys, |i| entries[i].func.is_some())?;
        let mut exact = HashMap::with_hasher(FxBuildHasher);
        let mut generic = HashMap::with_hasher(FxBuildHasher);
        let mut code_bytes = 0;
        for (e, nm) in entries.iter().zip(named) {
            let Some(f) = e.func else { continue }; // checked above
            code_bytes += e.code_bytes as usize;
            match nm {
                Named::Exact(sig) => {
                    let sig = *sig;
                    // SAFETY: the caller's contract: `f` is the exact kernel of `sig`, linked
                    // into the program for good; its target and features were checked above.
                    let k = unsafe { Kernel::linked(sig.clone(), false, f, e.code_bytes) };
                    exact.insert(sig, Arc::new(k));
                }
                Named::Generic(p) => {
                    // SAFETY: as above, for the shape-generic kernel of `p`.
                    let k = unsafe { Kernel::linked(p.representative(), true, f, e.code_bytes) };
                    generic.insert(p, Arc::new(k));
                }
            }
        }
        Ok(AotTable {
            inner: Arc::new(Inner {
                triple: h.triple.to_string(),
                features: h.features,
                exact,
                generic,
                code_bytes,
            }),
        })
    }

    /// The target triple the kernels were exported for.
    pub fn triple(&self) -> &str {
        &self.inner.triple
    }

    /// The CPU features the kernels need (Cranelift's flag names).
    pub fn features(&self) -> &[String] {
        &self.inner.features
    }

    /// Number of exact kernels.
    pub fn exact_len(&self) -> usize {
        self.inner.exact.len()
    }

    /// Number of shape-generic kernels.
    pub fn generic_len(&self) -> usize {
        self.inner.generic.len()
    }

    /// Bytes of machine code of all kernels.
    pub fn code_bytes(&self) -> usize {
        self.inner.code_bytes
    }

    /// The exact kernel of `sig`, if the table has it.
    pub fn exact(&self, sig: &Signature) -> Option<&Arc<Kernel>> {
        self.inner.exact.get(sig)
    }

    /// The shape-generic kernel of pattern `p`, if the table has it.
    pub fn generic(&self, p: &Pattern) -> Option<&Arc<Kernel>> {
        self.inner.generic.get(p)
    }

    /// The signatures with an exact kernel, in no particular order.
    pub fn signatures(&self) -> impl Iterator<Item = &Signature> {
        self.inner.exact.keys()
    }

    /// The patterns with a shape-generic kernel, in no particular order.
    pub fn patterns(&self) -> impl Iterator<Item = &Pattern> {
        self.inner.generic.keys()
    }
}

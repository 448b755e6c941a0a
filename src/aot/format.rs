//! The table format: what an exported object defines and what registration reads. It sits
//! below both the loader ([`super::AotTable`]) and exporters (the `selectjit-aot` crate), which
//! write these bytes for any target and read them back from object files.

use target_lexicon::{Architecture, Triple};

use super::key::{parse_nway_key, parse_pattern_key, parse_signature_key};
use super::nway::NwayKernelSpec;
use crate::error::{Error, Result};
use crate::kernel::abi::KernelFn;
use crate::plan::{Pattern, Signature};

/// The first bytes of every table.
pub const AOT_MAGIC: [u8; 8] = *b"SJITAOT\0";
/// The table format this library writes. It changes whenever the layout, the key format or the
/// kernels' calling contract changes. Version 3 added the keys of predicate kernels (see
/// [`super::key`]); mask keys are those of version 2, so version 2 tables are read too
/// ([`AOT_MIN_VERSION`]). Version 4 added single-pass n-way kernels ([`AOT_NWAY`] entries);
/// the other entries are those of version 3, so versions 2 and 3 are read too (an n-way entry
/// in a table of an older version is an error).
pub const AOT_VERSION: u32 = 4;
/// The oldest table format this library reads.
pub const AOT_MIN_VERSION: u32 = 2;
/// [`SelectjitAotEntry::kind`] of an exact kernel.
pub const AOT_EXACT: u32 = 0;
/// [`SelectjitAotEntry::kind`] of a shape-generic kernel.
pub const AOT_GENERIC: u32 = 1;
/// [`SelectjitAotEntry::kind`] of a single-pass n-way kernel (format version 4 on): its key is
/// an n-way key ([`super::key::nway_key`]) and its `func` a [`SelectjitNwayFn`], stored in the
/// entry's function field (cast to [`SelectjitKernelFn`]; call it as what it is).
pub const AOT_NWAY: u32 = 2;
/// The first format version with [`AOT_NWAY`] entries.
pub const AOT_NWAY_MIN_VERSION: u32 = 4;
/// Most entries a table may have.
pub const AOT_MAX_ENTRIES: u32 = 1 << 20;
/// Most key bytes a table may have.
pub const AOT_MAX_KEY_BYTES: u32 = 1 << 28;

/// A kernel's entry point (the one kernel function type of the library, [`KernelFn`]): runs
/// outer indices `begin..end` of its signature; `dims` and `byte_strides` are read by
/// shape-generic kernels only, exact kernels get NULL; `rhs` is a comparison's second operand
/// (kernels of masks and tests ignore it). Version 2 of the format added `rhs`.
pub type SelectjitKernelFn = KernelFn;

/// A single-pass n-way kernel's entry point (an [`AOT_NWAY`] entry's function): elements
/// `begin..end` of the output at `out`; `ptrs` holds one pointer per operand of its spec, in
/// call order (each branch's condition operands, a comparison's lhs then rhs, then its value;
/// the default last), each at the operand's first element: a full operand has the output's
/// length, a one-element operand is read once. An operand may be the output itself (the same
/// first element: read in place); no other operand overlaps the output.
pub type SelectjitNwayFn =
    unsafe extern "C" fn(ptrs: *const *const u8, out: *mut u8, begin: usize, end: usize);

/// One kernel of a table: its key (`key_len` bytes at `keys + key_offset`), its kind
/// ([`AOT_EXACT`], [`AOT_GENERIC`] or [`AOT_NWAY`]), its size in bytes of machine code, and its
/// function (for an [`AOT_NWAY`] entry a [`SelectjitNwayFn`] in this field's type).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SelectjitAotEntry {
    /// Where the key starts in the table's key bytes.
    pub key_offset: u32,
    /// The key's length in bytes.
    pub key_len: u32,
    /// [`AOT_EXACT`], [`AOT_GENERIC`] or [`AOT_NWAY`].
    pub kind: u32,
    /// Bytes of machine code of the kernel.
    pub code_bytes: u32,
    /// The kernel (of an [`AOT_NWAY`] entry: a [`SelectjitNwayFn`], cast).
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
 * (dims[k], byte_strides[op * rank + k] for op = cond, then, else, out, rhs); exact kernels get
 * NULL. cond is the mask, or a predicate's first operand; rhs a comparison's second operand
 * (ignored by the kernels of masks and tests). */
typedef void (*SelectjitKernelFn)(const uint8_t *cond, const uint8_t *then_, const uint8_t *else_,
                                  uint8_t *out, size_t begin, size_t end, const uint64_t *dims,
                                  const int64_t *byte_strides, const uint8_t *rhs);
/* A single-pass n-way kernel (entries of kind SELECTJIT_AOT_NWAY, format version 4 on; the
 * entry's func holds it: cast it back, e.g. (SelectjitNwayFn)(void (*)(void))e->func). It runs
 * output elements [begin, end); ptrs holds one pointer per operand in call order (each branch's
 * condition operands, a comparison's lhs then rhs, then its value; the default last), each at
 * the operand's first element: a full operand has the output's length, a one-element operand
 * is read once. An operand may be the output itself (read in place). */
typedef void (*SelectjitNwayFn)(const uint8_t *const *ptrs, uint8_t *out, size_t begin,
                                size_t end);
#define SELECTJIT_AOT_VERSION 4
#define SELECTJIT_AOT_EXACT 0
#define SELECTJIT_AOT_GENERIC 1
#define SELECTJIT_AOT_NWAY 2
typedef struct SelectjitAotEntry {
    uint32_t key_offset; /* the key is key_len bytes at keys + key_offset */
    uint32_t key_len;
    uint32_t kind;       /* SELECTJIT_AOT_EXACT, SELECTJIT_AOT_GENERIC or SELECTJIT_AOT_NWAY */
    uint32_t code_bytes;
    SelectjitKernelFn func; /* a SelectjitNwayFn for SELECTJIT_AOT_NWAY */
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

/// FNV-1a, 64-bit: the table's checksum. The state is the field.
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv::new()
    }
}

impl Fnv {
    /// The initial state.
    ///
    /// ```
    /// use selectjit::aot::format::Fnv;
    /// assert_eq!(Fnv::new().0, 0xcbf2_9ce4_8422_2325); // FNV-1a's offset basis: no entries
    /// ```
    pub const fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    /// Adds bytes.
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    /// Adds one entry: kind, key length, key.
    ///
    /// ```
    /// use selectjit::aot::format::Fnv;
    /// use selectjit::aot::key::signature_key;
    /// use selectjit::aot::{AOT_EXACT, AOT_GENERIC};
    /// use selectjit::plan::plan_contiguous;
    /// // A table's checksum, entry by entry, as an exporter computes it.
    /// let key = signature_key(&plan_contiguous(4, 100).unwrap());
    /// let (mut a, mut b) = (Fnv::new(), Fnv::new());
    /// a.entry(AOT_EXACT, &key);
    /// b.entry(AOT_GENERIC, &key);
    /// assert_ne!(a.0, b.0); // the kind counts, not only the key
    /// ```
    pub fn entry(&mut self, kind: u32, key: &[u8]) {
        self.write(&kind.to_le_bytes());
        self.write(&(key.len() as u32).to_le_bytes());
        self.write(key);
    }
}

/// The architecture family of a triple, as named in messages and tables.
///
/// ```
/// use selectjit::aot::format::arch_name;
/// use target_lexicon::{Aarch64Architecture, Architecture};
/// assert_eq!(arch_name(Architecture::X86_64), "x86_64");
/// // arm64, aarch64_be: one family.
/// assert_eq!(arch_name(Architecture::Aarch64(Aarch64Architecture::Aarch64be)), "aarch64");
/// ```
pub fn arch_name(a: Architecture) -> String {
    match a {
        Architecture::X86_64 => "x86_64".into(),
        Architecture::Aarch64(_) => "aarch64".into(),
        Architecture::S390x => "s390x".into(),
        Architecture::Riscv64(_) => "riscv64".into(),
        other => other.to_string(),
    }
}

/// Size of the table header in bytes (on every supported target: all are 64-bit).
pub const TABLE_SIZE: usize = 368;
/// Size of one entry in bytes.
pub const ENTRY_SIZE: usize = 24;
/// Offset of the entries pointer in the header.
pub const ENTRIES_AT: usize = 352;
/// Offset of the keys pointer in the header.
pub const KEYS_AT: usize = 360;
/// Offset of the function pointer in an entry.
pub const FUNC_AT: usize = 16;

const _: () = {
    // The C layout exporters write is the layout of the Rust declarations, on 64-bit hosts.
    if cfg!(target_pointer_width = "64") {
        assert!(std::mem::size_of::<SelectjitAotTable>() == TABLE_SIZE);
        assert!(std::mem::size_of::<SelectjitAotEntry>() == ENTRY_SIZE);
        assert!(std::mem::offset_of!(SelectjitAotTable, entries) == ENTRIES_AT);
        assert!(std::mem::offset_of!(SelectjitAotTable, keys) == KEYS_AT);
        assert!(std::mem::offset_of!(SelectjitAotEntry, func) == FUNC_AT);
    }
};

/// A NUL-terminated UTF-8 string in a fixed array.
fn c_string<'a>(what: &str, bytes: &'a [u8]) -> Result<&'a str> {
    let end = bytes
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| Error::Aot(format!("{what} is not NUL-terminated")))?;
    std::str::from_utf8(&bytes[..end]).map_err(|_| Error::Aot(format!("{what} is not UTF-8")))
}

/// What the header of a table says.
pub struct Header<'a> {
    /// The target triple.
    pub triple: &'a str,
    /// The CPU features the code needs.
    pub features: Vec<String>,
}

/// Checks the header fields that need neither the entries nor the host: magic, version,
/// counts, reserved field, the triple and the feature list.
///
/// ```
/// use selectjit::aot::format::check_format;
/// use selectjit::aot::{AOT_MAGIC, AOT_VERSION, SelectjitAotTable};
/// let (mut triple, mut features) = ([0u8; 64], [0u8; 256]);
/// triple[..24].copy_from_slice(b"x86_64-unknown-linux-gnu");
/// features[..18].copy_from_slice(b"has_avx2 has_bmi2\0");
/// let mut t = SelectjitAotTable {
///     magic: AOT_MAGIC,
///     version: AOT_VERSION,
///     entry_count: 0,
///     keys_len: 0,
///     reserved: 0,
///     checksum: 0,
///     triple,
///     features,
///     entries: std::ptr::null(),
///     keys: std::ptr::null(),
/// };
/// let header = check_format(&t)?; // on any host: the target is checked elsewhere
/// assert_eq!(header.triple, "x86_64-unknown-linux-gnu");
/// assert_eq!(header.features, ["has_avx2", "has_bmi2"]);
/// t.version = AOT_VERSION + 1;
/// assert!(check_format(&t).is_err());
/// # Ok::<(), selectjit::Error>(())
/// ```
pub fn check_format(t: &SelectjitAotTable) -> Result<Header<'_>> {
    if t.magic != AOT_MAGIC {
        return Err(Error::Aot(format!(
            "bad magic {:02x?} (not a selectjit kernel table)",
            t.magic
        )));
    }
    if !(AOT_MIN_VERSION..=AOT_VERSION).contains(&t.version) {
        return Err(Error::Aot(format!(
            "table version {} (this library reads versions {AOT_MIN_VERSION} to {AOT_VERSION}; \
             export it again)",
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

/// One entry's key and kind, checked: the kernel it names.
pub enum Named {
    /// An exact kernel of this signature.
    Exact(Box<Signature>),
    /// The shape-generic kernel of this pattern.
    Generic(Pattern),
    /// The single-pass n-way kernel of this spec.
    Nway(NwayKernelSpec),
}

/// Checks every entry of a table of format `version` against the key bytes: kinds (n-way
/// entries from version [`AOT_NWAY_MIN_VERSION`] on, and flat ones only), key bounds and
/// syntax, duplicates, and the checksum. `func_ok(i)` says whether entry `i` has a function.
///
/// ```
/// use selectjit::aot::format::{Fnv, Named, check_entries};
/// use selectjit::aot::key::{pattern_key, signature_key};
/// use selectjit::aot::{AOT_EXACT, AOT_GENERIC, AOT_VERSION, SelectjitAotEntry};
/// use selectjit::plan::{Pattern, plan_contiguous};
/// let sig = plan_contiguous(4, 100).unwrap();
/// let (sk, pk) = (signature_key(&sig), pattern_key(&Pattern::of(&sig)));
/// let keys = [&sk[..], &pk[..]].concat();
/// let entry = |kind: u32, key_offset: usize, key_len: usize| SelectjitAotEntry {
///     key_offset: key_offset as u32,
///     key_len: key_len as u32,
///     kind,
///     code_bytes: 0,
///     func: None,
/// };
/// let entries = [entry(AOT_EXACT, 0, sk.len()), entry(AOT_GENERIC, sk.len(), pk.len())];
/// let mut sum = Fnv::new();
/// sum.entry(AOT_EXACT, &sk);
/// sum.entry(AOT_GENERIC, &pk);
/// let named = check_entries(AOT_VERSION, sum.0, &entries, &keys, |_| true)?;
/// assert!(matches!(&named[0], Named::Exact(s) if **s == sig));
/// assert!(matches!(named[1], Named::Generic(p) if p == Pattern::of(&sig)));
/// // A wrong checksum, or an entry without a function, is refused.
/// assert!(check_entries(AOT_VERSION, sum.0 ^ 1, &entries, &keys, |_| true).is_err());
/// assert!(check_entries(AOT_VERSION, sum.0, &entries, &keys, |i| i == 0).is_err());
/// # Ok::<(), selectjit::Error>(())
/// ```
pub fn check_entries(
    version: u32,
    checksum: u64,
    entries: &[SelectjitAotEntry],
    keys: &[u8],
    func_ok: impl Fn(usize) -> bool,
) -> Result<Vec<Named>> {
    let mut sum = Fnv::new();
    let mut out = Vec::with_capacity(entries.len());
    let mut seen_exact = std::collections::HashSet::new();
    let mut seen_generic = std::collections::HashSet::new();
    let mut seen_nway = std::collections::HashSet::new();
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
            AOT_NWAY if version < AOT_NWAY_MIN_VERSION => {
                return Err(Error::Aot(format!(
                    "entry {i}: an n-way kernel in a table of version {version} (n-way kernels \
                     came with version {AOT_NWAY_MIN_VERSION})"
                )));
            }
            AOT_NWAY => {
                let s = parse_nway_key(key).map_err(|x| Error::Aot(format!("entry {i}: {x}")))?;
                if s.0.rows {
                    return Err(Error::Aot(format!(
                        "entry {i}: n-way kernel {s} of rows (tables hold flat n-way kernels)"
                    )));
                }
                if !seen_nway.insert(s.clone()) {
                    return Err(Error::Aot(format!("entry {i}: duplicate n-way kernel {s}")));
                }
                Named::Nway(s)
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

//! Registration: a table linked into this program, checked against the host, becomes the
//! kernels an engine serves.

use std::collections::HashMap;
use std::sync::Arc;

use rustc_hash::FxBuildHasher;
use target_lexicon::Triple;

use super::format::{Header, Named, SelectjitAotEntry, SelectjitAotTable, arch_name};
use super::format::{check_entries, check_format};
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::kernel::nway::{NwayFn, NwayKernel, NwaySpec};
use crate::plan::{Pattern, Signature};

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
    /// Single-pass n-way kernels (flat) by spec, as exported (ordinary or non-temporal stores).
    nway: HashMap<NwaySpec, Arc<NwayKernel>, FxBuildHasher>,
    code_bytes: usize,
}

impl std::fmt::Debug for AotTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AotTable({}, {} exact + {} generic + {} n-way kernels)",
            self.inner.triple,
            self.inner.exact.len(),
            self.inner.generic.len(),
            self.inner.nway.len()
        )
    }
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
    let (theirs, ours) = (
        parsed.default_calling_convention(),
        h.default_calling_convention(),
    );
    if theirs != ours {
        let name = |c: std::result::Result<target_lexicon::CallingConvention, ()>| match c {
            Ok(c) => format!("{c:?}"),
            Err(()) => "unknown".to_string(),
        };
        return Err(Error::Aot(format!(
            "kernels for {triple} use the {} calling convention, this host {}",
            name(theirs),
            name(ours)
        )));
    }
    let have = super::host::host_features();
    let missing: Vec<&str> = header
        .features
        .iter()
        .filter(|f| !have.contains(&f.as_str()))
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

impl AotTable {
    /// Checks a table linked into this program and takes its kernels: the magic and version,
    /// the target (its architecture and calling convention must be this host's, and the host
    /// must have every CPU feature the code needs), the counts, every key, no duplicates, the
    /// checksum over kinds and keys, and a function for every entry. Any failure is an
    /// [`Error::Aot`] that says what is wrong; nothing of the table is used then.
    ///
    /// # Safety
    /// `table` is NULL or points at a table that lives for the rest of the program, written by
    /// an exporter (`selectjit-aot`) into an object that is linked into this program (or into a library that
    /// stays loaded): its `entries` and `keys` cover `entry_count` entries and `keys_len` bytes,
    /// and each function pointer is the kernel its key names. The checks above catch tables
    /// for another machine or format and corrupted keys, not pointers that lie.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::aot::{AOT_MAGIC, AOT_VERSION, AotTable, SelectjitAotTable};
    /// // Tables come from objects `selectjit aot` exports and the program links (see the module
    /// // docs); here a header without entries, for this host, built by hand.
    /// let host = format!(
    ///     "{}-unknown-{}",
    ///     std::env::consts::ARCH,
    ///     std::env::consts::OS
    /// );
    /// let mut triple = [0u8; 64];
    /// triple[..host.len()].copy_from_slice(host.as_bytes());
    /// let raw: &'static SelectjitAotTable = Box::leak(Box::new(SelectjitAotTable {
    ///     magic: AOT_MAGIC,
    ///     version: AOT_VERSION,
    ///     entry_count: 0,
    ///     keys_len: 0,
    ///     reserved: 0,
    ///     checksum: 0xcbf2_9ce4_8422_2325, // FNV-1a of no entries
    ///     triple,
    ///     features: [0; 256],
    ///     entries: std::ptr::null(),
    ///     keys: std::ptr::null(),
    /// }));
    /// // SAFETY: a table without entries that lives for the rest of the program.
    /// let table = unsafe { AotTable::from_raw(raw) }?;
    /// assert_eq!((table.exact_len(), table.generic_len()), (0, 0));
    /// // Another format version is refused.
    /// let old: &'static SelectjitAotTable =
    ///     Box::leak(Box::new(SelectjitAotTable { version: 1, ..*raw }));
    /// // SAFETY: as above.
    /// assert!(unsafe { AotTable::from_raw(old) }.is_err());
    /// # Ok(())
    /// # }
    /// ```
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
        let named = check_entries(t.version, t.checksum, entries, keys, |i| {
            entries[i].func.is_some()
        })?;
        let mut exact = HashMap::with_hasher(FxBuildHasher);
        let mut generic = HashMap::with_hasher(FxBuildHasher);
        let mut nway = HashMap::with_hasher(FxBuildHasher);
        let mut code_bytes = 0;
        // Tables are exported by the Cranelift tier (`selectjit-aot`).
        let made_by = crate::tier::Variant::of(crate::tier::Tier::Cranelift);
        for (e, nm) in entries.iter().zip(named) {
            let Some(f) = e.func else { continue }; // checked above
            code_bytes += e.code_bytes as usize;
            match nm {
                Named::Exact(sig) => {
                    let sig = *sig;
                    // SAFETY: the caller's contract: `f` is the exact kernel of `sig`, linked
                    // into the program for good; its target and features were checked above.
                    let k = unsafe { Kernel::linked(sig.clone(), false, made_by, f, e.code_bytes) };
                    exact.insert(sig, Arc::new(k));
                }
                Named::Generic(p) => {
                    // SAFETY: as above, for the shape-generic kernel of `p`.
                    let k = unsafe {
                        Kernel::linked(p.representative(), true, made_by, f, e.code_bytes)
                    };
                    generic.insert(p, Arc::new(k));
                }
                Named::Nway(spec) => {
                    // SAFETY: the entry is of kind AOT_NWAY (`check_entries` named it so), whose
                    // function field holds an `NwayFn` by the table format and the caller's
                    // contract; both are `extern "C"` function pointers of one size.
                    let f =
                        unsafe { std::mem::transmute::<crate::kernel::abi::KernelFn, NwayFn>(f) };
                    // SAFETY: as above: `f` is the flat n-way kernel of `spec` (checked not of
                    // rows), linked into the program for good, for this host.
                    let k = unsafe { NwayKernel::linked(f, e.code_bytes as usize) };
                    nway.insert(spec.0, Arc::new(k));
                }
            }
        }
        Ok(AotTable {
            inner: Arc::new(Inner {
                triple: h.triple.to_string(),
                features: h.features,
                exact,
                generic,
                nway,
                code_bytes,
            }),
        })
    }

    /// The target triple the kernels were exported for.
    ///
    /// ```
    /// # use selectjit::aot::{AotTable, SelectjitAotTable, AOT_MAGIC, AOT_VERSION};
    /// # fn empty_table() -> selectjit::Result<AotTable> {
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 0, keys_len: 0, reserved: 0,
    /// #         checksum: 0xcbf2_9ce4_8422_2325, triple, features: [0; 256],
    /// #         entries: std::ptr::null(), keys: std::ptr::null(),
    /// #     }));
    /// #     // SAFETY: a table without entries that lives for the rest of the program.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// let table = empty_table()?; // a table exported for this host (see `AotTable::from_raw`)
    /// let arch = table.triple().split('-').next().unwrap();
    /// assert_eq!(arch, selectjit::aot::host_arch());
    /// # Ok(())
    /// # }
    /// ```
    pub fn triple(&self) -> &str {
        &self.inner.triple
    }

    /// The CPU features the kernels need (Cranelift's flag names).
    ///
    /// ```
    /// # use selectjit::aot::{AotTable, SelectjitAotTable, AOT_MAGIC, AOT_VERSION};
    /// # fn empty_table() -> selectjit::Result<AotTable> {
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 0, keys_len: 0, reserved: 0,
    /// #         checksum: 0xcbf2_9ce4_8422_2325, triple, features: [0; 256],
    /// #         entries: std::ptr::null(), keys: std::ptr::null(),
    /// #     }));
    /// #     // SAFETY: a table without entries that lives for the rest of the program.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// let table = empty_table()?; // needs no CPU feature (see `AotTable::from_raw`)
    /// assert!(table.features().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn features(&self) -> &[String] {
        &self.inner.features
    }

    /// Number of exact kernels.
    ///
    /// ```
    /// # use selectjit::aot::{AotTable, SelectjitAotTable, AOT_MAGIC, AOT_VERSION};
    /// # fn empty_table() -> selectjit::Result<AotTable> {
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 0, keys_len: 0, reserved: 0,
    /// #         checksum: 0xcbf2_9ce4_8422_2325, triple, features: [0; 256],
    /// #         entries: std::ptr::null(), keys: std::ptr::null(),
    /// #     }));
    /// #     // SAFETY: a table without entries that lives for the rest of the program.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// let table = empty_table()?; // a table without kernels (see `AotTable::from_raw`)
    /// assert_eq!(table.exact_len(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn exact_len(&self) -> usize {
        self.inner.exact.len()
    }

    /// Number of shape-generic kernels.
    ///
    /// ```
    /// # use selectjit::aot::{AotTable, SelectjitAotTable, AOT_MAGIC, AOT_VERSION};
    /// # fn empty_table() -> selectjit::Result<AotTable> {
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 0, keys_len: 0, reserved: 0,
    /// #         checksum: 0xcbf2_9ce4_8422_2325, triple, features: [0; 256],
    /// #         entries: std::ptr::null(), keys: std::ptr::null(),
    /// #     }));
    /// #     // SAFETY: a table without entries that lives for the rest of the program.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// let table = empty_table()?; // a table without kernels (see `AotTable::from_raw`)
    /// assert_eq!(table.generic_len(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn generic_len(&self) -> usize {
        self.inner.generic.len()
    }

    /// Number of single-pass n-way kernels.
    ///
    /// ```
    /// # use selectjit::aot::{AotTable, SelectjitAotTable, AOT_MAGIC, AOT_VERSION};
    /// # fn empty_table() -> selectjit::Result<AotTable> {
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 0, keys_len: 0, reserved: 0,
    /// #         checksum: 0xcbf2_9ce4_8422_2325, triple, features: [0; 256],
    /// #         entries: std::ptr::null(), keys: std::ptr::null(),
    /// #     }));
    /// #     // SAFETY: a table without entries that lives for the rest of the program.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// let table = empty_table()?; // a table without kernels (see `AotTable::from_raw`)
    /// assert_eq!(table.nway_len(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn nway_len(&self) -> usize {
        self.inner.nway.len()
    }

    /// The single-pass n-way kernel of `spec`, if the table has it. Tables hold specs without
    /// shared operands ([`NwaySpec::same`] empty: the exported kernels load every operand on
    /// its own, which is right whichever operands share a buffer), so the lookup is of `spec`
    /// without them: the kernel exported for it, else the one of the other store kind
    /// (non-temporal or ordinary: the same bytes result, so a table need not hold both). Flat
    /// specs only.
    pub(crate) fn nway(&self, spec: &NwaySpec) -> Option<&Arc<NwayKernel>> {
        let m = &self.inner.nway;
        if m.is_empty() || spec.rows {
            return None;
        }
        if spec.same.is_empty()
            && let Some(k) = m.get(spec)
        {
            return Some(k);
        }
        let mut other = spec.clone();
        other.same.clear();
        m.get(&other).or_else(|| {
            other.nt = !other.nt;
            m.get(&other)
        })
    }

    /// Bytes of machine code of all kernels.
    ///
    /// ```
    /// # use selectjit::aot::{AotTable, SelectjitAotTable, AOT_MAGIC, AOT_VERSION};
    /// # fn empty_table() -> selectjit::Result<AotTable> {
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 0, keys_len: 0, reserved: 0,
    /// #         checksum: 0xcbf2_9ce4_8422_2325, triple, features: [0; 256],
    /// #         entries: std::ptr::null(), keys: std::ptr::null(),
    /// #     }));
    /// #     // SAFETY: a table without entries that lives for the rest of the program.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// let table = empty_table()?; // a table without kernels (see `AotTable::from_raw`)
    /// assert_eq!(table.code_bytes(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn code_bytes(&self) -> usize {
        self.inner.code_bytes
    }

    /// The exact kernel of `sig`, if the table has it.
    ///
    /// ```
    /// # use selectjit::aot::format::Fnv;
    /// # use selectjit::aot::key::{pattern_key, signature_key};
    /// # use selectjit::aot::{AOT_EXACT, AOT_GENERIC, AOT_MAGIC, AOT_VERSION};
    /// # use selectjit::aot::{AotTable, SelectjitAotEntry, SelectjitAotTable};
    /// # use selectjit::plan::{Pattern, plan_contiguous};
    /// # /// A kernel of contiguous 4-byte elements, exact or shape-generic (neither reads dims).
    /// # unsafe extern "C" fn select_u32(
    /// #     c: *const u8, t: *const u8, e: *const u8, o: *mut u8, begin: usize, end: usize,
    /// #     _: *const u64, _: *const i64, _: *const u8,
    /// # ) {
    /// #     for i in begin..end {
    /// #         // SAFETY: the kernel contract: every element in `begin..end` lies in its buffer.
    /// #         unsafe {
    /// #             let src = if *c.add(i) != 0 { t } else { e };
    /// #             *o.cast::<u32>().add(i) = *src.cast::<u32>().add(i);
    /// #         }
    /// #     }
    /// # }
    /// # /// A table for this host: the exact kernel of 8 contiguous 4-byte elements, and the
    /// # /// shape-generic kernel of its pattern.
    /// # fn table() -> selectjit::Result<AotTable> {
    /// #     let sig = plan_contiguous(4, 8).unwrap();
    /// #     let (sk, pk) = (signature_key(&sig), pattern_key(&Pattern::of(&sig)));
    /// #     let keys: &'static [u8] = [&sk[..], &pk[..]].concat().leak();
    /// #     let mut sum = Fnv::new();
    /// #     sum.entry(AOT_EXACT, &sk);
    /// #     sum.entry(AOT_GENERIC, &pk);
    /// #     let entry = |kind: u32, key_offset: usize, key_len: usize| SelectjitAotEntry {
    /// #         key_offset: key_offset as u32, key_len: key_len as u32, kind, code_bytes: 0,
    /// #         func: Some(select_u32),
    /// #     };
    /// #     let entries: &'static [SelectjitAotEntry] =
    /// #         vec![entry(AOT_EXACT, 0, sk.len()), entry(AOT_GENERIC, sk.len(), pk.len())].leak();
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 2,
    /// #         keys_len: keys.len() as u32, reserved: 0, checksum: sum.0, triple,
    /// #         features: [0; 256], entries: entries.as_ptr(), keys: keys.as_ptr(),
    /// #     }));
    /// #     // SAFETY: the table, its entries and keys live for the rest of the program, and each
    /// #     // function is the kernel its key names, for this host.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// let table = table()?; // one exact and one shape-generic kernel, linked into this program
    /// let kernel = table.exact(&plan_contiguous(4, 8).unwrap()).expect("exported");
    /// assert!(kernel.is_linked() && !kernel.is_generic());
    /// // Other dims of the pattern have no exact kernel: the generic one runs them.
    /// assert!(table.exact(&plan_contiguous(4, 9).unwrap()).is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn exact(&self, sig: &Signature) -> Option<&Arc<Kernel>> {
        self.inner.exact.get(sig)
    }

    /// The shape-generic kernel of pattern `p`, if the table has it.
    ///
    /// ```
    /// # use selectjit::aot::format::Fnv;
    /// # use selectjit::aot::key::{pattern_key, signature_key};
    /// # use selectjit::aot::{AOT_EXACT, AOT_GENERIC, AOT_MAGIC, AOT_VERSION};
    /// # use selectjit::aot::{AotTable, SelectjitAotEntry, SelectjitAotTable};
    /// # use selectjit::plan::{Pattern, plan_contiguous};
    /// # /// A kernel of contiguous 4-byte elements, exact or shape-generic (neither reads dims).
    /// # unsafe extern "C" fn select_u32(
    /// #     c: *const u8, t: *const u8, e: *const u8, o: *mut u8, begin: usize, end: usize,
    /// #     _: *const u64, _: *const i64, _: *const u8,
    /// # ) {
    /// #     for i in begin..end {
    /// #         // SAFETY: the kernel contract: every element in `begin..end` lies in its buffer.
    /// #         unsafe {
    /// #             let src = if *c.add(i) != 0 { t } else { e };
    /// #             *o.cast::<u32>().add(i) = *src.cast::<u32>().add(i);
    /// #         }
    /// #     }
    /// # }
    /// # /// A table for this host: the exact kernel of 8 contiguous 4-byte elements, and the
    /// # /// shape-generic kernel of its pattern.
    /// # fn table() -> selectjit::Result<AotTable> {
    /// #     let sig = plan_contiguous(4, 8).unwrap();
    /// #     let (sk, pk) = (signature_key(&sig), pattern_key(&Pattern::of(&sig)));
    /// #     let keys: &'static [u8] = [&sk[..], &pk[..]].concat().leak();
    /// #     let mut sum = Fnv::new();
    /// #     sum.entry(AOT_EXACT, &sk);
    /// #     sum.entry(AOT_GENERIC, &pk);
    /// #     let entry = |kind: u32, key_offset: usize, key_len: usize| SelectjitAotEntry {
    /// #         key_offset: key_offset as u32, key_len: key_len as u32, kind, code_bytes: 0,
    /// #         func: Some(select_u32),
    /// #     };
    /// #     let entries: &'static [SelectjitAotEntry] =
    /// #         vec![entry(AOT_EXACT, 0, sk.len()), entry(AOT_GENERIC, sk.len(), pk.len())].leak();
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 2,
    /// #         keys_len: keys.len() as u32, reserved: 0, checksum: sum.0, triple,
    /// #         features: [0; 256], entries: entries.as_ptr(), keys: keys.as_ptr(),
    /// #     }));
    /// #     // SAFETY: the table, its entries and keys live for the rest of the program, and each
    /// #     // function is the kernel its key names, for this host.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::codegen::Ptrs;
    /// let table = table()?; // one exact and one shape-generic kernel, linked into this program
    /// // Every contiguous call of 4-byte elements has the pattern of the exported one.
    /// let sig = plan_contiguous(4, 3).unwrap();
    /// let kernel = table.generic(&Pattern::of(&sig)).expect("exported");
    /// assert!(kernel.is_generic());
    /// let (cond, a, b) = ([0u8, 1, 0], [1u32; 3], [2u32; 3]);
    /// let mut out = [0u32; 3];
    /// let p = Ptrs {
    ///     cond: cond.as_ptr(),
    ///     then: a.as_ptr().cast(),
    ///     else_: b.as_ptr().cast(),
    ///     out: out.as_mut_ptr().cast(),
    ///     rhs: std::ptr::null(),
    /// };
    /// // SAFETY: every buffer holds the 3 elements `sig` addresses; the output overlaps no input.
    /// unsafe { kernel.run(&sig, p, 0, sig.outer()) };
    /// assert_eq!(out, [2, 1, 2]);
    /// assert!(table.generic(&Pattern::of(&plan_contiguous(8, 3).unwrap())).is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn generic(&self, p: &Pattern) -> Option<&Arc<Kernel>> {
        self.inner.generic.get(p)
    }

    /// The signatures with an exact kernel, in no particular order.
    ///
    /// ```
    /// # use selectjit::aot::format::Fnv;
    /// # use selectjit::aot::key::{pattern_key, signature_key};
    /// # use selectjit::aot::{AOT_EXACT, AOT_GENERIC, AOT_MAGIC, AOT_VERSION};
    /// # use selectjit::aot::{AotTable, SelectjitAotEntry, SelectjitAotTable};
    /// # use selectjit::plan::{Pattern, plan_contiguous};
    /// # /// A kernel of contiguous 4-byte elements, exact or shape-generic (neither reads dims).
    /// # unsafe extern "C" fn select_u32(
    /// #     c: *const u8, t: *const u8, e: *const u8, o: *mut u8, begin: usize, end: usize,
    /// #     _: *const u64, _: *const i64, _: *const u8,
    /// # ) {
    /// #     for i in begin..end {
    /// #         // SAFETY: the kernel contract: every element in `begin..end` lies in its buffer.
    /// #         unsafe {
    /// #             let src = if *c.add(i) != 0 { t } else { e };
    /// #             *o.cast::<u32>().add(i) = *src.cast::<u32>().add(i);
    /// #         }
    /// #     }
    /// # }
    /// # /// A table for this host: the exact kernel of 8 contiguous 4-byte elements, and the
    /// # /// shape-generic kernel of its pattern.
    /// # fn table() -> selectjit::Result<AotTable> {
    /// #     let sig = plan_contiguous(4, 8).unwrap();
    /// #     let (sk, pk) = (signature_key(&sig), pattern_key(&Pattern::of(&sig)));
    /// #     let keys: &'static [u8] = [&sk[..], &pk[..]].concat().leak();
    /// #     let mut sum = Fnv::new();
    /// #     sum.entry(AOT_EXACT, &sk);
    /// #     sum.entry(AOT_GENERIC, &pk);
    /// #     let entry = |kind: u32, key_offset: usize, key_len: usize| SelectjitAotEntry {
    /// #         key_offset: key_offset as u32, key_len: key_len as u32, kind, code_bytes: 0,
    /// #         func: Some(select_u32),
    /// #     };
    /// #     let entries: &'static [SelectjitAotEntry] =
    /// #         vec![entry(AOT_EXACT, 0, sk.len()), entry(AOT_GENERIC, sk.len(), pk.len())].leak();
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 2,
    /// #         keys_len: keys.len() as u32, reserved: 0, checksum: sum.0, triple,
    /// #         features: [0; 256], entries: entries.as_ptr(), keys: keys.as_ptr(),
    /// #     }));
    /// #     // SAFETY: the table, its entries and keys live for the rest of the program, and each
    /// #     // function is the kernel its key names, for this host.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// let table = table()?; // one exact and one shape-generic kernel, linked into this program
    /// let sigs: Vec<_> = table.signatures().cloned().collect();
    /// assert_eq!(sigs, [plan_contiguous(4, 8).unwrap()]);
    /// assert_eq!(sigs.len(), table.exact_len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn signatures(&self) -> impl Iterator<Item = &Signature> {
        self.inner.exact.keys()
    }

    /// The patterns with a shape-generic kernel, in no particular order.
    ///
    /// ```
    /// # use selectjit::aot::format::Fnv;
    /// # use selectjit::aot::key::{pattern_key, signature_key};
    /// # use selectjit::aot::{AOT_EXACT, AOT_GENERIC, AOT_MAGIC, AOT_VERSION};
    /// # use selectjit::aot::{AotTable, SelectjitAotEntry, SelectjitAotTable};
    /// # use selectjit::plan::{Pattern, plan_contiguous};
    /// # /// A kernel of contiguous 4-byte elements, exact or shape-generic (neither reads dims).
    /// # unsafe extern "C" fn select_u32(
    /// #     c: *const u8, t: *const u8, e: *const u8, o: *mut u8, begin: usize, end: usize,
    /// #     _: *const u64, _: *const i64, _: *const u8,
    /// # ) {
    /// #     for i in begin..end {
    /// #         // SAFETY: the kernel contract: every element in `begin..end` lies in its buffer.
    /// #         unsafe {
    /// #             let src = if *c.add(i) != 0 { t } else { e };
    /// #             *o.cast::<u32>().add(i) = *src.cast::<u32>().add(i);
    /// #         }
    /// #     }
    /// # }
    /// # /// A table for this host: the exact kernel of 8 contiguous 4-byte elements, and the
    /// # /// shape-generic kernel of its pattern.
    /// # fn table() -> selectjit::Result<AotTable> {
    /// #     let sig = plan_contiguous(4, 8).unwrap();
    /// #     let (sk, pk) = (signature_key(&sig), pattern_key(&Pattern::of(&sig)));
    /// #     let keys: &'static [u8] = [&sk[..], &pk[..]].concat().leak();
    /// #     let mut sum = Fnv::new();
    /// #     sum.entry(AOT_EXACT, &sk);
    /// #     sum.entry(AOT_GENERIC, &pk);
    /// #     let entry = |kind: u32, key_offset: usize, key_len: usize| SelectjitAotEntry {
    /// #         key_offset: key_offset as u32, key_len: key_len as u32, kind, code_bytes: 0,
    /// #         func: Some(select_u32),
    /// #     };
    /// #     let entries: &'static [SelectjitAotEntry] =
    /// #         vec![entry(AOT_EXACT, 0, sk.len()), entry(AOT_GENERIC, sk.len(), pk.len())].leak();
    /// #     let host = format!("{}-unknown-{}", std::env::consts::ARCH, std::env::consts::OS);
    /// #     let mut triple = [0u8; 64];
    /// #     triple[..host.len()].copy_from_slice(host.as_bytes());
    /// #     let raw = Box::leak(Box::new(SelectjitAotTable {
    /// #         magic: AOT_MAGIC, version: AOT_VERSION, entry_count: 2,
    /// #         keys_len: keys.len() as u32, reserved: 0, checksum: sum.0, triple,
    /// #         features: [0; 256], entries: entries.as_ptr(), keys: keys.as_ptr(),
    /// #     }));
    /// #     // SAFETY: the table, its entries and keys live for the rest of the program, and each
    /// #     // function is the kernel its key names, for this host.
    /// #     unsafe { AotTable::from_raw(raw) }
    /// # }
    /// # fn main() -> selectjit::Result<()> {
    /// let table = table()?; // one exact and one shape-generic kernel, linked into this program
    /// let patterns: Vec<_> = table.patterns().copied().collect();
    /// assert_eq!(patterns, [Pattern::of(&plan_contiguous(4, 8).unwrap())]);
    /// assert_eq!(patterns.len(), table.generic_len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn patterns(&self) -> impl Iterator<Item = &Pattern> {
        self.inner.generic.keys()
    }
}

//! Checking an exported object file before it is linked: a truncated or corrupted object is a
//! clear error here rather than a link failure or a table rejected at run time.

use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SectionIndex, SymbolKind};

use selectjit::aot::format::ENTRIES_AT;
use selectjit::aot::format::ENTRY_SIZE;
use selectjit::aot::format::FUNC_AT;
use selectjit::aot::format::KEYS_AT;
use selectjit::aot::format::Named;
use selectjit::aot::format::TABLE_SIZE;
use selectjit::aot::format::check_entries;
use selectjit::aot::format::check_format;
use selectjit::aot::{SelectjitAotEntry, SelectjitAotTable};
use selectjit::{Error, Result};

/// What an exported object holds, as read back from its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSummary {
    /// The target triple in the table.
    pub triple: String,
    /// The CPU features the code needs.
    pub features: Vec<String>,
    /// Exact kernels in the table.
    pub exact: usize,
    /// Shape-generic kernels in the table.
    pub generic: usize,
    /// Single-pass n-way kernels in the table.
    pub nway: usize,
    /// Bytes of machine code, as the table records them.
    pub code_bytes: usize,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Aot(msg.into())
}

/// `len` bytes at `at` of `data`, or an error naming `what`.
fn bytes<'a>(data: &'a [u8], at: u64, len: usize, what: &str) -> Result<&'a [u8]> {
    usize::try_from(at)
        .ok()
        .and_then(|a| data.get(a..a.checked_add(len)?))
        .ok_or_else(|| {
            bad(format!(
                "{what} lies outside its section: the object is truncated or corrupted"
            ))
        })
}

/// Reads the object's bytes as the target's integers.
struct Reader {
    big: bool,
}

impl Reader {
    fn u32(&self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }
    fn u64(&self, b: &[u8]) -> u64 {
        let a = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        }
    }
}

/// Reads back the table `symbol` of an object written by [`crate::export`] and checks it as
/// registration would, except against the host (the object may be for another machine): the
/// file parses, the symbol and its data are there, the header's magic, version, counts, triple
/// and features, the entries and keys the table points at, every key, kind and duplicate, the
/// checksum, and a relocation to a function for every entry.
pub fn check_object(bytes_: &[u8], symbol: &str) -> Result<ObjectSummary> {
    let file =
        object::File::parse(bytes_).map_err(|e| bad(format!("not a readable object file: {e}")))?;
    let sym = file
        .symbol_by_name(symbol)
        .or_else(|| file.symbol_by_name(&format!("_{symbol}")))
        .ok_or_else(|| bad(format!("the object has no table symbol {symbol}")))?;
    let r = Reader {
        big: file.endianness() == object::Endianness::Big,
    };
    // Where a symbol or section target of a relocation lies: (section, offset in it).
    let located = |target: RelocationTarget, addend: i64| -> Result<(SectionIndex, u64)> {
        let (idx, off) = match target {
            RelocationTarget::Symbol(i) => {
                let s = file
                    .symbol_by_index(i)
                    .map_err(|e| bad(format!("relocation symbol: {e}")))?;
                let sec = s
                    .section_index()
                    .ok_or_else(|| bad("a table pointer refers to an undefined symbol"))?;
                let base = file
                    .section_by_index(sec)
                    .map_err(|e| bad(format!("relocation section: {e}")))?
                    .address();
                (sec, s.address().wrapping_sub(base))
            }
            RelocationTarget::Section(sec) => (sec, 0),
            _ => {
                return Err(bad(
                    "a table pointer has no relocation to the object's data",
                ));
            }
        };
        Ok((idx, off.wrapping_add_signed(addend)))
    };
    // The relocation at `at` in `sec`, with its addend (implicit addends are read in place).
    let reloc_at =
        |sec: &object::Section<'_, '_>, data: &[u8], at: u64| -> Option<(RelocationTarget, i64)> {
            sec.relocations().find(|(o, _)| *o == at).map(|(_, rel)| {
                let addend = if rel.has_implicit_addend() {
                    bytes(data, at, 8, "addend").map_or(0, |b| r.u64(b) as i64)
                } else {
                    rel.addend()
                };
                (rel.target(), addend)
            })
        };

    let sec_idx = sym
        .section_index()
        .ok_or_else(|| bad(format!("the table symbol {symbol} is not defined")))?;
    let sec = file
        .section_by_index(sec_idx)
        .map_err(|e| bad(format!("table section: {e}")))?;
    let data = sec
        .data()
        .map_err(|e| bad(format!("table section: {e} (truncated object?)")))?;
    let at = sym.address().wrapping_sub(sec.address());
    let h = bytes(data, at, TABLE_SIZE, "the table")?;
    let mut t = SelectjitAotTable {
        magic: [0; 8],
        version: r.u32(&h[8..]),
        entry_count: r.u32(&h[12..]),
        keys_len: r.u32(&h[16..]),
        reserved: r.u32(&h[20..]),
        checksum: r.u64(&h[24..]),
        triple: [0; 64],
        features: [0; 256],
        entries: std::ptr::null(),
        keys: std::ptr::null(),
    };
    t.magic.copy_from_slice(&h[..8]);
    t.triple.copy_from_slice(&h[32..96]);
    t.features.copy_from_slice(&h[96..352]);
    let header = check_format(&t)?;

    // The entries and keys the two pointers of the header lead to.
    let target_data =
        |field: usize, len: usize, what: &str| -> Result<(SectionIndex, u64, &[u8])> {
            let (target, addend) = reloc_at(&sec, data, at + field as u64)
                .ok_or_else(|| bad(format!("the table has no relocation for its {what}")))?;
            let (idx, off) = located(target, addend)?;
            let s = file
                .section_by_index(idx)
                .map_err(|e| bad(format!("{what}: {e}")))?;
            let d = s
                .data()
                .map_err(|e| bad(format!("{what}: {e} (truncated object?)")))?;
            bytes(d, off, len, what)?;
            Ok((idx, off, d))
        };
    let n = t.entry_count as usize;
    let mut entries = Vec::with_capacity(n);
    let mut has_func = Vec::with_capacity(n);
    let mut keys: &[u8] = &[];
    if n > 0 {
        let (eidx, eoff, edata) = target_data(ENTRIES_AT, n * ENTRY_SIZE, "entries")?;
        let esec = file
            .section_by_index(eidx)
            .map_err(|e| bad(format!("entries: {e}")))?;
        for i in 0..n {
            let at = eoff + (i * ENTRY_SIZE) as u64;
            let e = bytes(edata, at, ENTRY_SIZE, "an entry")?;
            entries.push(SelectjitAotEntry {
                key_offset: r.u32(&e[0..]),
                key_len: r.u32(&e[4..]),
                kind: r.u32(&e[8..]),
                code_bytes: r.u32(&e[12..]),
                func: None,
            });
            // A relocation to a function defined in the object.
            let f =
                reloc_at(&esec, edata, at + FUNC_AT as u64).and_then(|(target, _)| match target {
                    RelocationTarget::Symbol(s) => file.symbol_by_index(s).ok(),
                    _ => None,
                });
            has_func.push(
                f.is_some_and(|s| s.kind() == SymbolKind::Text && s.section_index().is_some()),
            );
        }
        if t.keys_len > 0 {
            let len = t.keys_len as usize;
            let (_, koff, kdata) = target_data(KEYS_AT, len, "keys")?;
            keys = bytes(kdata, koff, len, "keys")?;
        }
    }
    let named = check_entries(t.version, t.checksum, &entries, keys, |i| has_func[i])?;
    let count = |f: fn(&Named) -> bool| named.iter().filter(|n| f(n)).count();
    Ok(ObjectSummary {
        triple: header.triple.to_string(),
        features: header.features,
        exact: count(|n| matches!(n, Named::Exact(_))),
        generic: count(|n| matches!(n, Named::Generic(_))),
        nway: count(|n| matches!(n, Named::Nway(_))),
        code_bytes: entries.iter().map(|e| e.code_bytes as usize).sum(),
    })
}

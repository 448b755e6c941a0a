//! Ahead-of-time export: kernels for any Cranelift target in one relocatable object, with the
//! table that maps each kernel's key to its function, and a C header for it.

use std::collections::HashSet;

use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_module::{DataDescription, Linkage, Module, default_libcall_names};
use cranelift_object::{ObjectBuilder, ObjectModule};
use target_lexicon::{Architecture, Endianness, PointerWidth, Triple};

use selectjit::aot::AOT_NWAY;
use selectjit::aot::format::AOT_MAX_KEY_BYTES;
use selectjit::aot::format::ENTRIES_AT;
use selectjit::aot::format::ENTRY_SIZE;
use selectjit::aot::format::FUNC_AT;
use selectjit::aot::format::Fnv;
use selectjit::aot::format::KEYS_AT;
use selectjit::aot::format::TABLE_SIZE;
use selectjit::aot::format::arch_name;
use selectjit::aot::key::nway_key;
use selectjit::aot::key::pattern_key;
use selectjit::aot::key::signature_key;
use selectjit::aot::nway::NwayKernelSpec;
use selectjit::aot::{AOT_EXACT, AOT_GENERIC, AOT_MAGIC, AOT_MAX_ENTRIES, AOT_VERSION, C_TYPES};
use selectjit::codegen::cranelift::Jit;
use selectjit::codegen::cranelift::shared_flags;
use selectjit::contiguous_strides;
use selectjit::plan::Pattern;
use selectjit::plan::Signature;
use selectjit::plan::plan;
use selectjit::{Broadcast, broadcast_shapes};
use selectjit::{DType, Error, Result};

pub use selectjit::aot::DEFAULT_SYMBOL;

/// What to export for.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// A target triple (`aarch64-unknown-linux-gnu`, ...) or `host` (this machine, with the CPU
    /// features it has). 64-bit x86-64, aarch64, s390x and riscv64 targets are supported.
    pub target: String,
    /// Cranelift ISA settings for the target (`has_avx`, `has_v`, presets such as `sse41` or
    /// `zvl128b`, or `name=value`). `None`: the defaults below; ignored for `host`.
    ///
    /// Defaults: x86-64 `sse41` (the `pblendvb`/`pshufb` lane select), riscv64 `has_v` and
    /// `zvl128b` (Cranelift's vector code needs the V extension with 128-bit registers), none
    /// for aarch64 (NEON is baseline) and s390x (z14 vector facilities are Cranelift's baseline).
    pub isa_flags: Option<Vec<String>>,
    /// The table's symbol (a C identifier).
    pub symbol: String,
    /// Run the Cranelift verifier on every kernel.
    pub verify: bool,
}

impl ExportOptions {
    /// Options for `target` with its default ISA settings and the default symbol.
    pub fn new(target: &str) -> ExportOptions {
        ExportOptions {
            target: target.to_string(),
            isa_flags: None,
            symbol: DEFAULT_SYMBOL.to_string(),
            verify: true,
        }
    }
}

/// Which kernels a call shape adds to a [`KernelSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kinds {
    /// Its exact kernel and the shape-generic kernel of its pattern.
    #[default]
    Both,
    /// Its exact kernel only.
    Exact,
    /// The shape-generic kernel of its pattern only.
    Generic,
}

/// The kernels to export: exact kernels by signature, shape-generic kernels by pattern,
/// single-pass n-way kernels by spec. Kept in insertion order, without duplicates.
#[derive(Debug, Clone, Default)]
pub struct KernelSet {
    exact: Vec<Signature>,
    generic: Vec<Pattern>,
    nway: Vec<NwayKernelSpec>,
    seen_exact: HashSet<Signature>,
    seen_generic: HashSet<Pattern>,
    seen_nway: HashSet<NwayKernelSpec>,
}

impl KernelSet {
    /// An empty set.
    pub fn new() -> KernelSet {
        KernelSet::default()
    }

    /// Adds the exact kernel of `sig`; false when it is already in the set.
    pub fn add_signature(&mut self, sig: Signature) -> bool {
        if self.seen_exact.insert(sig.clone()) {
            self.exact.push(sig);
            true
        } else {
            false
        }
    }

    /// Adds the shape-generic kernel of `p`; false when it is already in the set.
    pub fn add_pattern(&mut self, p: Pattern) -> bool {
        if self.seen_generic.insert(p) {
            self.generic.push(p);
            true
        } else {
            false
        }
    }

    /// Adds the single-pass n-way kernel of `spec` (from
    /// [`NwayKernelSpec::for_call`](selectjit::aot::nway::NwayKernelSpec::for_call)); false
    /// when it is already in the set. Whether the Cranelift generator compiles it is checked by
    /// [`export`], which fails with an error naming the spec if not.
    ///
    /// ```
    /// use selectjit::aot::nway::{NwayBranch, NwayCond, NwayKernelSpec};
    /// use selectjit::{DType, TestOp};
    /// use selectjit_aot::KernelSet;
    /// // x = isnan(x) ? 0 : x, in place over f32 (the output is the tested operand and default).
    /// let nan = |x| NwayBranch { cond: NwayCond::Test(TestOp::IsNan, DType::F32, x), not: false, value: &[] };
    /// let x: &[usize] = &[4096];
    /// let mut set = KernelSet::new();
    /// assert!(set.add_nway(NwayKernelSpec::for_call(DType::F32, x, &[nan(x)], x)?));
    /// // Every length (and every 4-byte dtype) is the same kernel.
    /// assert!(!set.add_nway(NwayKernelSpec::for_call(DType::I32, &[3], &[nan(&[3])], &[3])?));
    /// assert_eq!((set.nway().len(), set.len()), (1, 1));
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn add_nway(&mut self, spec: NwayKernelSpec) -> bool {
        if self.seen_nway.insert(spec.clone()) {
            self.nway.push(spec);
            true
        } else {
            false
        }
    }

    /// Adds the kernels of a call on contiguous row-major inputs of these shapes (what
    /// [`selectjit::Engine::select`] plans for it). Returns its signature, `None` when the output is
    /// empty (no kernel runs); an error when the shapes do not broadcast under `mode`.
    pub fn add_call(
        &mut self,
        dtype: DType,
        cond: &[usize],
        then: &[usize],
        else_: &[usize],
        mode: Broadcast,
        kinds: Kinds,
    ) -> Result<Option<Signature>> {
        let b = broadcast_shapes(mode, cond, then, else_)?;
        let st = |s: &[usize], p: selectjit::Placement| {
            p.strides_over(s, &contiguous_strides(s), &b.out)
        };
        let so = contiguous_strides(&b.out);
        let (sc, sth, se) = (st(cond, b.cond), st(then, b.then), st(else_, b.else_));
        let Some(sig) = plan(dtype.width(), &b.out, [&sc, &sth, &se, &so]) else {
            return Ok(None);
        };
        if kinds != Kinds::Exact {
            self.add_pattern(Pattern::of(&sig));
        }
        if kinds != Kinds::Generic {
            self.add_signature(sig.clone());
        }
        Ok(Some(sig))
    }

    /// Adds the shape-generic kernel of every pattern of rank 1 to `max_rank` for each element
    /// width in `widths` (1, 2, 4, 8 or 16; others are ignored): inner-stride class 0, 1 or other
    /// for cond, then and else, 1 or other for the output (never 0: output elements are
    /// distinct), and every combination of zero outer strides of cond, then and else (the
    /// output's never are); `54 * 8^(rank - 1)` patterns per width and rank. A table with them
    /// runs every call of such a rank without the static kernels. Returns how many were new.
    pub fn add_patterns_up_to(&mut self, max_rank: usize, widths: &[usize]) -> usize {
        let mut added = 0;
        for &width in widths.iter().filter(|w| [1, 2, 4, 8, 16].contains(*w)) {
            for rank in 1..=max_rank.min(selectjit::MAX_RANK) {
                let outer = rank - 1;
                // Zero masks of cond, then and else over the outer dims; 3 * outer bits.
                let masks: u64 = if 3 * outer >= 64 { 0 } else { 1 << (3 * outer) };
                for inner in 0..54u8 {
                    let classes = [inner % 3, inner / 3 % 3, inner / 9 % 3, 1 + inner / 27];
                    for m in 0..masks {
                        let part = |op: u64| (m >> (op * outer as u64)) & ((1u64 << outer) - 1);
                        let p =
                            Pattern::of_mask(width, rank, classes, [part(0), part(1), part(2), 0]);
                        added += self.add_pattern(p) as usize;
                    }
                }
            }
        }
        added
    }

    /// The signatures of the exact kernels.
    pub fn signatures(&self) -> &[Signature] {
        &self.exact
    }

    /// The patterns of the shape-generic kernels.
    pub fn patterns(&self) -> &[Pattern] {
        &self.generic
    }

    /// The specs of the single-pass n-way kernels.
    pub fn nway(&self) -> &[NwayKernelSpec] {
        &self.nway
    }

    /// Number of kernels.
    pub fn len(&self) -> usize {
        self.exact.len() + self.generic.len() + self.nway.len()
    }

    /// Whether the set has no kernel.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An exported object and what it holds.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The relocatable object file (ELF, Mach-O or COFF, as the target's).
    pub object: Vec<u8>,
    /// A C header declaring the table (and its types).
    pub header: String,
    /// The target triple.
    pub triple: String,
    /// The CPU features the code needs (Cranelift's names), as written into the table.
    pub features: Vec<String>,
    /// Exact kernels in the table.
    pub exact: usize,
    /// Shape-generic kernels in the table.
    pub generic: usize,
    /// Single-pass n-way kernels in the table.
    pub nway: usize,
    /// Bytes of machine code.
    pub code_bytes: usize,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::Invalid(msg.into())
}

/// The target ISA an export compiles for.
pub fn target_isa(opts: &ExportOptions) -> Result<OwnedTargetIsa> {
    let flags = settings::Flags::new(shared_flags(opts.verify, true)?);
    if opts.target == "host" {
        return cranelift_native::builder()
            .map_err(|e| invalid(format!("host target: {e}")))?
            .finish(flags)
            .map_err(|e| invalid(format!("host target: {e}")));
    }
    let triple: Triple = opts
        .target
        .parse()
        .map_err(|e| invalid(format!("target triple '{}': {e}", opts.target)))?;
    let supported = matches!(
        triple.architecture,
        Architecture::X86_64
            | Architecture::Aarch64(_)
            | Architecture::S390x
            | Architecture::Riscv64(_)
    );
    if !supported || triple.pointer_width() != Ok(PointerWidth::U64) {
        return Err(invalid(format!(
            "target {}: ahead-of-time export supports 64-bit x86_64, aarch64, s390x and riscv64",
            opts.target
        )));
    }
    let mut b = cranelift_codegen::isa::lookup(triple.clone())
        .map_err(|e| invalid(format!("target {}: {e}", opts.target)))?;
    let defaults: &[&str] = match triple.architecture {
        Architecture::X86_64 => &["sse41"],
        Architecture::Riscv64(_) => &["has_v", "zvl128b"],
        _ => &[],
    };
    let chosen: Vec<String> = match &opts.isa_flags {
        Some(f) => f.clone(),
        None => defaults.iter().map(|s| s.to_string()).collect(),
    };
    for f in chosen.iter().map(|f| f.trim()).filter(|f| !f.is_empty()) {
        let r = match f.split_once('=') {
            Some((k, v)) => b.set(k.trim(), v.trim()),
            None => b.enable(f),
        };
        r.map_err(|e| invalid(format!("ISA setting '{f}' for {}: {e}", opts.target)))?;
    }
    b.finish(flags)
        .map_err(|e| invalid(format!("target {}: {e}", opts.target)))
}

/// The CPU-feature flags (`has_*`) enabled in `isa`: what a table's code needs.
pub fn enabled_features(isa: &dyn cranelift_codegen::isa::TargetIsa) -> Vec<String> {
    isa.isa_flags()
        .iter()
        .filter(|v| v.name.starts_with("has_") && v.as_bool() == Some(true))
        .map(|v| v.name.to_string())
        .collect()
}

/// Whether `s` is a C identifier.
fn is_c_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Integers in the target's byte order.
struct Bytes {
    v: Vec<u8>,
    big: bool,
}

impl Bytes {
    fn u32(&mut self, x: u32) {
        let b = if self.big {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        };
        self.v.extend_from_slice(&b);
    }
    fn u64(&mut self, x: u64) {
        let b = if self.big {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        };
        self.v.extend_from_slice(&b);
    }
    /// `s` NUL-padded to `n` bytes (at least one NUL).
    fn text(&mut self, what: &str, s: &str, n: usize) -> Result<()> {
        if s.len() >= n {
            return Err(invalid(format!("{what} '{s}' is longer than {}", n - 1)));
        }
        self.v.extend_from_slice(s.as_bytes());
        self.v.resize(self.v.len() + n - s.len(), 0);
        Ok(())
    }
}

/// What an entry's function is built from.
enum What<'a> {
    /// A two-way kernel: its signature (a pattern's representative), shape-generic or not.
    Select(Box<Signature>, bool),
    /// A single-pass n-way kernel.
    Nway(&'a NwayKernelSpec),
}

fn module_err(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::codegen(format!("{what}: {e:?}"))
}

/// Compiles every kernel of `set` for `opts.target` into one relocatable object: one function
/// per kernel (local symbols) and the table (exported as `opts.symbol`, read-only data) that
/// maps each kernel's key to its function; plus a C header for it. An n-way kernel the
/// Cranelift generator does not compile (see `Jit::define_nway_in`) is an error that names it.
pub fn export(opts: &ExportOptions, set: &KernelSet) -> Result<Exported> {
    if !is_c_identifier(&opts.symbol) {
        return Err(invalid(format!(
            "table symbol '{}' is not a C identifier",
            opts.symbol
        )));
    }
    let isa = target_isa(opts)?;
    let triple = isa.triple().clone();
    let big = triple.endianness() == Ok(Endianness::Big);
    let features = enabled_features(&*isa);
    let jit = Jit::for_isa(isa.clone(), opts.verify);
    let builder = ObjectBuilder::new(isa, "selectjit_aot", default_libcall_names())
        .map_err(|e| module_err("object", e))?;
    let mut module = ObjectModule::new(builder);

    // Kernels, exact first, then shape-generic, then n-way.
    let kernels: Vec<(u32, Vec<u8>, What<'_>)> = set
        .exact
        .iter()
        .map(|s| {
            (
                AOT_EXACT,
                signature_key(s),
                What::Select(Box::new(s.clone()), false),
            )
        })
        .chain(set.generic.iter().map(|p| {
            (
                AOT_GENERIC,
                pattern_key(p),
                What::Select(Box::new(p.representative()), true),
            )
        }))
        .chain(
            set.nway
                .iter()
                .map(|n| (AOT_NWAY, nway_key(n), What::Nway(n))),
        )
        .collect();
    if let Some((_, _, What::Nway(n))) = kernels
        .iter()
        .find(|(kind, key, _)| *kind == AOT_NWAY && key[3] == 0)
    {
        return Err(invalid(format!(
            "n-way kernel ({n}) has more branches than a table key holds (255)"
        )));
    }
    if kernels.len() > AOT_MAX_ENTRIES as usize {
        return Err(invalid(format!(
            "{} kernels, more than a table holds ({})",
            kernels.len(),
            AOT_MAX_ENTRIES
        )));
    }
    let mut funcs = Vec::with_capacity(kernels.len());
    let mut code_bytes = 0usize;
    for (i, (_, _, what)) in kernels.iter().enumerate() {
        let name = format!("{}_k{i}", opts.symbol);
        let (id, n) = match what {
            What::Select(sig, generic) => jit
                .define_in(&mut module, &name, Linkage::Local, sig, *generic)
                .map_err(|e| e.in_context(sig))?,
            What::Nway(spec) => jit.define_nway_in(&mut module, &name, Linkage::Local, spec)?,
        };
        code_bytes += n;
        funcs.push((id, n));
    }

    // Keys, and the checksum over kinds and keys.
    let mut keys = Vec::new();
    let mut sum = Fnv::new();
    let mut spans = Vec::with_capacity(kernels.len());
    for (kind, key, _) in &kernels {
        sum.entry(*kind, key);
        spans.push((keys.len() as u32, key.len() as u32));
        keys.extend_from_slice(key);
    }
    if keys.len() > AOT_MAX_KEY_BYTES as usize {
        return Err(invalid(format!(
            "{} key bytes: too many kernels",
            keys.len()
        )));
    }
    let data_err = |e| module_err("table", e);
    let keys_id = module
        .declare_anonymous_data(false, false)
        .map_err(data_err)?;
    let mut d = DataDescription::new();
    d.define(keys.clone().into_boxed_slice());
    d.set_align(8);
    module.define_data(keys_id, &d).map_err(data_err)?;

    // Entries: offsets, lengths, kinds, code sizes, and a relocation per function.
    let entries_id = module
        .declare_anonymous_data(false, false)
        .map_err(data_err)?;
    let mut e = Bytes { v: Vec::new(), big };
    for ((kind, _, _), ((off, len), (_, n))) in kernels.iter().zip(spans.iter().zip(&funcs)) {
        e.u32(*off);
        e.u32(*len);
        e.u32(*kind);
        e.u32(u32::try_from(*n).unwrap_or(u32::MAX));
        e.u64(0); // the function, by relocation
    }
    let mut d = DataDescription::new();
    d.define(e.v.into_boxed_slice());
    d.set_align(8);
    for (i, (id, _)) in funcs.iter().enumerate() {
        let f = module.declare_func_in_data(*id, &mut d);
        d.write_function_addr((i * ENTRY_SIZE + FUNC_AT) as u32, f);
    }
    module.define_data(entries_id, &d).map_err(data_err)?;

    // The header.
    let table_id = module
        .declare_data(&opts.symbol, Linkage::Export, false, false)
        .map_err(data_err)?;
    let mut h = Bytes { v: Vec::new(), big };
    h.v.extend_from_slice(&AOT_MAGIC);
    h.u32(AOT_VERSION);
    h.u32(kernels.len() as u32);
    h.u32(keys.len() as u32);
    h.u32(0);
    h.u64(sum.0);
    let triple_text = triple.to_string();
    h.text("target triple", &triple_text, 64)?;
    h.text("feature list", &features.join(" "), 256)?;
    h.u64(0); // entries
    h.u64(0); // keys
    debug_assert_eq!(h.v.len(), TABLE_SIZE);
    let mut d = DataDescription::new();
    d.define(h.v.into_boxed_slice());
    d.set_align(8);
    if !kernels.is_empty() {
        let ge = module.declare_data_in_data(entries_id, &mut d);
        d.write_data_addr(ENTRIES_AT as u32, ge, 0);
        let gk = module.declare_data_in_data(keys_id, &mut d);
        d.write_data_addr(KEYS_AT as u32, gk, 0);
    }
    module.define_data(table_id, &d).map_err(data_err)?;

    let object = module
        .finish()
        .emit()
        .map_err(|e| module_err("object", e))?;
    let (exact, generic, nway) = (set.exact.len(), set.generic.len(), set.nway.len());
    // Read the object back as whoever links it would: its table must check out.
    let back = crate::object::check_object(&object, &opts.symbol)
        .map_err(|e| Error::codegen(format!("the exported object fails its own check: {e}")))?;
    if (back.exact, back.generic, back.nway) != (exact, generic, nway) {
        return Err(Error::codegen(format!(
            "the exported object holds {} + {} + {} kernels, not {exact} + {generic} + {nway}",
            back.exact, back.generic, back.nway
        )));
    }
    Ok(Exported {
        header: c_header(
            &opts.symbol,
            &triple_text,
            &features,
            [exact, generic, nway],
        ),
        object,
        triple: triple_text,
        features,
        exact,
        generic,
        nway,
        code_bytes,
    })
}

/// The C header of an exported table.
fn c_header(symbol: &str, triple: &str, features: &[String], counts: [usize; 3]) -> String {
    let [exact, generic, nway] = counts;
    let guard = format!("{}_H", symbol.to_ascii_uppercase());
    let arch = triple
        .parse::<Triple>()
        .map(|t| arch_name(t.architecture))
        .unwrap_or_default();
    format!(
        "/* Generated by selectjit aot: {exact} exact, {generic} shape-generic and {nway} n-way kernels\n \
         * for {triple}\n \
         * ({arch}; CPU features: {}). Link the object written with it; register the table with\n \
         * the aot_table field of SelectjitOptions (selectjit_engine_new() in selectjit.h), or look\n \
         * kernels up by key yourself. */\n\
         #ifndef {guard}\n#define {guard}\n\n#include <stddef.h>\n#include <stdint.h>\n\n{C_TYPES}\n\
         #ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n\
         /* The kernel table of this object. */\n\
         extern const SelectjitAotTable {symbol};\n\n\
         #ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */\n",
        if features.is_empty() {
            "baseline".to_string()
        } else {
            features.join(" ")
        }
    )
}

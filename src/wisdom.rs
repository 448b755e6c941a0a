//! Measured choices that hold: the wisdom file (as FFTW keeps its wisdom). Under the tier
//! `Auto` an engine with a file ([`crate::EngineConfig::wisdom`], `SELECTJIT_WISDOM`) loads
//! each kernel class's measured choice from it at start, so that its signatures compile the
//! kept variant without a trial, and after each trial it merges the trial's times into the
//! class's samples, decides the class again from all of them, and rewrites the file.
//!
//! The file is text, one record a line, written for this CPU and this library version only:
//!
//! ```text
//! selectjit-wisdom 1
//! library 0.1.0
//! cpu x86_64; AMD EPYC 9B14 96-Core Processor; avx2 bmi2 avx512f avx512bw avx512vl avx512dq
//! class 0401010100000000000000000000000000000000000000000000000000000000000000 13 avx512+zmm avx2=812,790 avx512=640,655 avx512+zmm=601,598
//! split 0401010100000000000000000000000000000000000000000000000000000000000000 23 2 split split=2410,2388 single=4790,4802
//! end 2
//! ```
//!
//! A `class` line is the class's loop pattern (its AOT pattern key, [`crate::aot::key`], in
//! hex), its output's size class (`floor(log2(bytes))`), the variant kept, then per candidate
//! variant its times in nanoseconds, oldest first (at most [`SAMPLES_MAX`]: one per trial, the
//! time the trial ranked it by). A `split` line is a class's split trials at one thread count
//! (an engine's `threads`): the class, the thread count, the way kept (`split` across the
//! threads or `single`), then each way's times, oldest first, one per trial; an engine with as
//! many threads runs that way from the first call, and its next split trial of the class (if
//! any) adds its times. The way kept is what the samples say: split when the median of the
//! split times is [`SPLIT_MARGIN`] below the single one's. `end` closes the file with the number
//! of `class` and `split` lines, so that a truncated file is told from a complete one. Anything else is a corrupt file; a file of
//! another format or library version is stale, one of another CPU foreign: the engine then
//! ignores the whole file ([`WisdomStatus`] says why) and measures as without one, and the
//! next trial writes the file anew.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use crate::aot::key::{parse_pattern_key, pattern_key};
use crate::measure::SPLIT_MARGIN;
use crate::tier::{KernelClass, Tier, TierChoice, Variant};

/// The file's first line: its format and version.
const HEADER: &str = "selectjit-wisdom 2";

/// The times kept per variant and class (the newest; older ones are dropped).
pub(crate) const SAMPLES_MAX: usize = 16;

/// How much faster than the variant the latest trial kept another must be, by the medians of
/// their samples, for the file to keep the other instead: the largest margin a trial gives
/// its preferred variants (so that the file never keeps a variant the trial's own rules would
/// not have kept on those times).
const REDECIDE_MARGIN: f64 = 0.08;

/// What became of an engine's wisdom file when the engine was built
/// ([`crate::Engine::wisdom_status`]).
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::{Engine, EngineConfig, WisdomStatus};
/// let dir = std::env::temp_dir().join(format!("selectjit-doc-{}", std::process::id()));
/// let engine = Engine::with_config(EngineConfig::new().wisdom(dir.join("absent.txt")))?;
/// match engine.wisdom_status() {
///     // Created by the first trial (with a code generator that measures).
///     WisdomStatus::Missing => assert!(engine.codegen().is_some()),
///     WisdomStatus::Off => assert!(engine.codegen().is_none()),
///     other => panic!("{other}"),
/// }
/// assert_eq!(Engine::new().wisdom_status(), WisdomStatus::Off); // no file
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WisdomStatus {
    /// No file: none was configured, or the engine does not measure (a backend other than
    /// `Jit`, a named tier, or no code generator).
    Off,
    /// A file was configured, but this build of selectjit keeps no wisdom (its `wisdom`
    /// feature is off): ignored, the engine measures as without one.
    Unavailable,
    /// The file does not exist yet: the first trial creates it.
    Missing,
    /// The file was read.
    Loaded {
        /// Kernel classes it holds.
        classes: usize,
        /// Of those, the classes whose kept variant this engine runs (its tiers are among the
        /// engine's): their signatures run it without a trial.
        seeded: usize,
    },
    /// Written by another library version (or another format): ignored.
    Stale {
        /// The version (or format) the file names.
        found: String,
    },
    /// Written on another CPU (model or features): ignored.
    Foreign {
        /// The CPU the file names.
        found: String,
    },
    /// Not a wisdom file, or a damaged one: ignored.
    Corrupt {
        /// The first line found wrong (1-based).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The file exists but could not be read (permissions, not a file, ...): ignored.
    Unreadable {
        /// The I/O error.
        reason: String,
    },
}

impl WisdomStatus {
    /// Whether a file was there and ignored (stale, foreign, corrupt or unreadable).
    ///
    /// ```
    /// use selectjit::WisdomStatus;
    /// assert!(WisdomStatus::Foreign { found: "x86_64; other".into() }.ignored());
    /// assert!(!WisdomStatus::Missing.ignored());
    /// assert!(!WisdomStatus::Loaded { classes: 2, seeded: 2 }.ignored());
    /// ```
    pub fn ignored(&self) -> bool {
        matches!(
            self,
            WisdomStatus::Stale { .. }
                | WisdomStatus::Foreign { .. }
                | WisdomStatus::Corrupt { .. }
                | WisdomStatus::Unreadable { .. }
        )
    }
}

impl std::fmt::Display for WisdomStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WisdomStatus::Off => f.write_str("off"),
            WisdomStatus::Unavailable => f.write_str(
                "unavailable: this build of selectjit keeps no wisdom (its `wisdom` feature is \
                 off); ignored",
            ),
            WisdomStatus::Missing => f.write_str("missing (created by the first trial)"),
            WisdomStatus::Loaded { classes, seeded } => {
                write!(f, "loaded {classes} classes, {seeded} run without a trial")
            }
            WisdomStatus::Stale { found } => write!(
                f,
                "stale: written by {found}, this is library {} (format {HEADER:?}); ignored",
                env!("CARGO_PKG_VERSION")
            ),
            WisdomStatus::Foreign { found } => write!(
                f,
                "foreign: written on cpu {found:?}, this is {:?}; ignored",
                crate::jit::host::cpu_identity()
            ),
            WisdomStatus::Corrupt { line, reason } => {
                write!(f, "corrupt: line {line}: {reason}; ignored")
            }
            WisdomStatus::Unreadable { reason } => write!(f, "unreadable: {reason}; ignored"),
        }
    }
}

/// One kernel class's record: the variant kept, and each variant's times, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    chosen: Variant,
    samples: Vec<(Variant, VecDeque<u64>)>,
}

impl Record {
    /// The median of each variant's samples (the lower of the two middle ones).
    fn medians(&self) -> Vec<(Variant, u64)> {
        self.samples
            .iter()
            .filter_map(|(v, t)| Some((*v, median(t)?)))
            .collect()
    }

    /// Decides again from every sample: the variant with the lowest median, unless
    /// `incumbent` (the one the latest trial kept) is within [`REDECIDE_MARGIN`] of it.
    fn redecide(&mut self, incumbent: Variant) {
        let m = self.medians();
        let Some(&(best, best_ns)) = m.iter().min_by_key(|(_, ns)| *ns) else {
            return;
        };
        self.chosen = match m.iter().find(|(v, _)| *v == incumbent) {
            Some(&(_, ns)) if (best_ns as f64) >= (1.0 - REDECIDE_MARGIN) * ns as f64 => incumbent,
            _ => best,
        };
    }
}

/// The median of `t` (the lower of the two middle ones), `None` when it is empty.
fn median(t: &VecDeque<u64>) -> Option<u64> {
    let mut t: Vec<u64> = t.iter().copied().collect();
    t.sort_unstable();
    t.get(t.len().checked_sub(1)? / 2).copied()
}

/// One kernel class's split trials at one thread count: each way's times, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct SplitRecord {
    split: VecDeque<u64>,
    single: VecDeque<u64>,
}

impl SplitRecord {
    /// Whether calls split across the threads: when the median of the split times is
    /// [`SPLIT_MARGIN`] below that of the single ones (as a trial decides).
    fn splits(&self) -> bool {
        match (median(&self.split), median(&self.single)) {
            (Some(s), Some(o)) => (s as f64) < (1.0 - SPLIT_MARGIN) * o as f64,
            _ => false,
        }
    }
}

/// A class's split record is per thread count: what splitting gains depends on it.
type SplitKey = (KernelClass, usize);

/// An engine's wisdom file: where it lives and what it holds.
#[derive(Debug)]
pub(crate) struct Wisdom {
    path: PathBuf,
    records: FxHashMap<KernelClass, Record>,
    splits: FxHashMap<SplitKey, SplitRecord>,
}

impl Wisdom {
    /// Reads the file at `path`: its records when it is one of this CPU and library version,
    /// none otherwise (missing, unreadable, stale, foreign or corrupt), and what was found.
    pub(crate) fn load(path: &Path) -> (Wisdom, WisdomStatus) {
        let mut w = Wisdom {
            path: path.to_path_buf(),
            records: FxHashMap::default(),
            splits: FxHashMap::default(),
        };
        let status = match std::fs::read(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => WisdomStatus::Missing,
            Err(e) => WisdomStatus::Unreadable {
                reason: e.to_string(),
            },
            Ok(bytes) => match parse(
                &bytes,
                env!("CARGO_PKG_VERSION"),
                &crate::jit::host::cpu_identity(),
            ) {
                Ok((records, splits)) => {
                    w.records = records;
                    w.splits = splits;
                    WisdomStatus::Loaded {
                        classes: w.records.len(),
                        seeded: 0,
                    }
                }
                Err(status) => status,
            },
        };
        (w, status)
    }

    /// Each class's kept variant, and each variant's median time (by the pattern key, then
    /// the size).
    pub(crate) fn choices(&self) -> Vec<TierChoice> {
        let mut c: Vec<TierChoice> = self
            .records
            .iter()
            .map(|(class, r)| TierChoice {
                class: *class,
                chosen: r.chosen,
                times_ns: r.medians(),
            })
            .collect();
        c.sort_by_cached_key(|c| (pattern_key(&c.class.pattern), c.class.size_log2));
        c
    }

    /// Takes a trial's times in: each variant's time becomes one more sample of it (the
    /// newest [`SAMPLES_MAX`] kept), and the class is decided again from all of them.
    pub(crate) fn merge(&mut self, choice: &TierChoice) {
        let r = self.records.entry(choice.class).or_insert_with(|| Record {
            chosen: choice.chosen,
            samples: Vec::new(),
        });
        for &(v, ns) in &choice.times_ns {
            if ns == u64::MAX {
                continue; // not timed
            }
            let at = match r.samples.iter().position(|(s, _)| *s == v) {
                Some(at) => at,
                None => {
                    r.samples.push((v, VecDeque::new()));
                    r.samples.len() - 1
                }
            };
            let t = &mut r.samples[at].1;
            t.push_back(ns);
            while t.len() > SAMPLES_MAX {
                t.pop_front();
            }
        }
        r.redecide(choice.chosen);
    }

    /// Whether calls of `class` split across `threads` threads, if the file has measured it.
    pub(crate) fn splits(&self, class: &KernelClass, threads: usize) -> Option<bool> {
        self.splits.get(&(*class, threads)).map(SplitRecord::splits)
    }

    /// Takes a split trial's times in (`[split, single]`, the trial's time of each way): one
    /// more sample of each (the newest [`SAMPLES_MAX`] kept). Returns the way now kept.
    pub(crate) fn merge_split(&mut self, class: KernelClass, threads: usize, ns: [u64; 2]) -> bool {
        if ns.contains(&u64::MAX) {
            // A way not timed (the pool could not split): no sample of either.
            return self.splits(&class, threads).unwrap_or(false);
        }
        let r = self.splits.entry((class, threads)).or_default();
        for (t, ns) in [(&mut r.split, ns[0]), (&mut r.single, ns[1])] {
            t.push_back(ns);
            while t.len() > SAMPLES_MAX {
                t.pop_front();
            }
        }
        r.splits()
    }

    /// The file's text.
    pub(crate) fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = format!(
            "{HEADER}\nlibrary {}\ncpu {}\n",
            env!("CARGO_PKG_VERSION"),
            crate::jit::host::cpu_identity()
        );
        let mut classes: Vec<(&KernelClass, &Record)> = self.records.iter().collect();
        classes.sort_by_cached_key(|(c, _)| (pattern_key(&c.pattern), c.size_log2));
        for (class, r) in &classes {
            let key = hex_key(class);
            let _ = write!(s, "class {key} {} {}", class.size_log2, r.chosen);
            for (v, t) in &r.samples {
                let times: Vec<String> = t.iter().map(u64::to_string).collect();
                let _ = write!(s, " {v}={}", times.join(","));
            }
            s.push('\n');
        }
        let mut splits: Vec<(&SplitKey, &SplitRecord)> = self.splits.iter().collect();
        splits.sort_by_cached_key(|((c, t), _)| (pattern_key(&c.pattern), c.size_log2, *t));
        for ((class, threads), r) in &splits {
            let way = if r.splits() { "split" } else { "single" };
            let times = |t: &VecDeque<u64>| t.iter().map(u64::to_string).collect::<Vec<_>>();
            let _ = writeln!(
                s,
                "split {} {} {threads} {way} split={} single={}",
                hex_key(class),
                class.size_log2,
                times(&r.split).join(","),
                times(&r.single).join(",")
            );
        }
        let _ = writeln!(s, "end {}", classes.len() + splits.len());
        s
    }

    /// Writes the file atomically: a temporary file in its directory, renamed over it. Not
    /// synced to disk (this runs on the call that decided a trial): after a system crash the
    /// file may be empty or cut short, which the next engine reads as corrupt and ignores.
    pub(crate) fn save(&self) -> std::io::Result<()> {
        use std::io::Write;
        static SAVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let name = self.path.file_name().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
        })?;
        let n = SAVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.{n}.tmp", std::process::id()));
        let tmp = self.path.with_file_name(tmp_name);
        let written = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(self.render().as_bytes())?;
            std::fs::rename(&tmp, &self.path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// The records of a file's `bytes`, if it is a wisdom file of this format, `library` version
/// and `cpu`; otherwise why not.
/// A class's pattern key in hex, as the file writes it.
fn hex_key(class: &KernelClass) -> String {
    pattern_key(&class.pattern)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a file holds: its class records and its split records.
type Parsed = (
    FxHashMap<KernelClass, Record>,
    FxHashMap<SplitKey, SplitRecord>,
);

fn parse(bytes: &[u8], library: &str, cpu: &str) -> Result<Parsed, WisdomStatus> {
    let corrupt = |line: usize, reason: String| WisdomStatus::Corrupt { line, reason };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        corrupt(line, "not UTF-8 text".to_string())
    })?;
    let Some(body) = text.strip_suffix('\n') else {
        let line = text.lines().count().max(1);
        return Err(corrupt(line, "the last line is cut short".to_string()));
    };
    let mut lines = body.split('\n').enumerate().map(|(k, l)| (k + 1, l));
    let mut field = |name: &str| -> Result<(usize, &str), WisdomStatus> {
        let (n, l) = lines
            .next()
            .ok_or_else(|| corrupt(1, format!("no `{name}` line")))?;
        l.strip_prefix(name)
            .and_then(|v| v.strip_prefix(' '))
            .map(|v| (n, v))
            .ok_or_else(|| corrupt(n, format!("expected `{name} ...`, found {l:?}")))
    };
    let (_, format) = field("selectjit-wisdom")?;
    if Some(format) != HEADER.strip_prefix("selectjit-wisdom ") {
        return Err(WisdomStatus::Stale {
            found: format!("file format {format:?}"),
        });
    }
    let (_, lib) = field("library")?;
    if lib != library {
        return Err(WisdomStatus::Stale {
            found: format!("library {lib}"),
        });
    }
    let (_, file_cpu) = field("cpu")?;
    if file_cpu != cpu {
        return Err(WisdomStatus::Foreign {
            found: file_cpu.to_string(),
        });
    }
    let mut records = FxHashMap::default();
    let mut splits = FxHashMap::default();
    let mut end = None;
    for (n, l) in lines {
        if end.is_some() {
            return Err(corrupt(n, "a line after `end`".to_string()));
        }
        if let Some(count) = l.strip_prefix("end ") {
            let lines = records.len() + splits.len();
            match count.parse::<usize>() {
                Ok(c) if c == lines => end = Some(n),
                _ => {
                    return Err(corrupt(
                        n,
                        format!("`end {count}` after {lines} class and split lines"),
                    ));
                }
            }
            continue;
        }
        if l.starts_with("split ") {
            let (key, record) = split_line(l).map_err(|why| corrupt(n, why))?;
            if splits.insert(key, record).is_some() {
                let (class, threads) = key;
                let why = format!("split of class {class} at {threads} threads a second time");
                return Err(corrupt(n, why));
            }
            continue;
        }
        let (class, record) = class_line(l).map_err(|why| corrupt(n, why))?;
        if records.insert(class, record).is_some() {
            return Err(corrupt(n, format!("class {class} a second time")));
        }
    }
    if end.is_none() {
        let n = body.split('\n').count();
        return Err(corrupt(
            n,
            "no `end` line: the file is cut short".to_string(),
        ));
    }
    Ok((records, splits))
}

/// A line's class: its pattern key and size class, the next two words.
fn class_words<'a>(
    next: &mut impl FnMut(&str) -> Result<&'a str, String>,
) -> Result<KernelClass, String> {
    let key = hex(next("pattern key")?)?;
    let pattern = parse_pattern_key(&key).map_err(|e| e.to_string())?;
    let size = next("size class")?;
    let size_log2 = size
        .parse::<u8>()
        .ok()
        .filter(|&s| s < 64)
        .ok_or_else(|| format!("size class {size:?}"))?;
    Ok(KernelClass { pattern, size_log2 })
}

/// Times `ns,ns,...` of `what` (the newest [`SAMPLES_MAX`] kept).
fn times(s: &str, what: &str) -> Result<VecDeque<u64>, String> {
    let mut t = s
        .split(',')
        .map(|ns| {
            ns.parse::<u64>()
                .map_err(|_| format!("time {ns:?} of {what}"))
        })
        .collect::<Result<VecDeque<u64>, String>>()?;
    while t.len() > SAMPLES_MAX {
        t.pop_front();
    }
    Ok(t)
}

/// One `split` line's class, thread count and record.
fn split_line(l: &str) -> Result<(SplitKey, SplitRecord), String> {
    let mut words = l.split(' ').skip(1);
    let mut next = |what: &str| words.next().ok_or_else(|| format!("no {what}: cut short"));
    let class = class_words(&mut next)?;
    let th = next("thread count")?;
    let threads = th
        .parse::<usize>()
        .ok()
        .filter(|&t| t >= 2)
        .ok_or_else(|| format!("thread count {th:?}"))?;
    let way = next("way kept")?;
    let mut side = |name: &str| -> Result<VecDeque<u64>, String> {
        let w = next(name)?;
        let t = w
            .strip_prefix(name)
            .and_then(|w| w.strip_prefix('='))
            .ok_or_else(|| format!("expected {name}=ns,..., found {w:?}"))?;
        times(t, name)
    };
    let r = SplitRecord {
        split: side("split")?,
        single: side("single")?,
    };
    if let Some(w) = words.next() {
        return Err(format!("{w:?} after the single times"));
    }
    let kept = if r.splits() { "split" } else { "single" };
    if way != kept {
        return Err(format!("way {way:?}, where its times say {kept:?}"));
    }
    Ok(((class, threads), r))
}

/// One `class` line's class and record.
fn class_line(l: &str) -> Result<(KernelClass, Record), String> {
    let mut words = l.split(' ');
    if words.next() != Some("class") {
        return Err(format!(
            "expected `class ...`, `split ...` or `end ...`, found {l:?}"
        ));
    }
    let mut next = |what: &str| words.next().ok_or_else(|| format!("no {what}: cut short"));
    let class = class_words(&mut next)?;
    let chosen = variant(next("chosen variant")?)?;
    let mut samples: Vec<(Variant, VecDeque<u64>)> = Vec::new();
    for w in words {
        let (v, times_text) = w
            .split_once('=')
            .ok_or_else(|| format!("samples {w:?}: expected variant=ns,ns,..."))?;
        let v = variant(v)?;
        if samples.iter().any(|(s, _)| *s == v) {
            return Err(format!("variant {v} sampled twice"));
        }
        samples.push((v, times(times_text, &v.to_string())?));
    }
    if !samples.iter().any(|(v, _)| *v == chosen) {
        return Err(format!("the chosen variant {chosen} has no samples"));
    }
    Ok((class, Record { chosen, samples }))
}

/// A variant of a concrete tier.
fn variant(s: &str) -> Result<Variant, String> {
    match s.parse::<Variant>() {
        Ok(v) if v.tier != Tier::Auto => Ok(v),
        Ok(_) => Err(format!("variant {s:?}: not a concrete tier")),
        Err(e) => Err(e.to_string()),
    }
}

/// Bytes from lowercase or uppercase hex digits.
fn hex(s: &str) -> Result<Vec<u8>, String> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    if s.is_empty() || !s.len().is_multiple_of(2) {
        return Err(format!(
            "pattern key {s:?}: not an even number of hex digits"
        ));
    }
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| format!("pattern key {s:?}: not hex"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Pattern, plan_contiguous};

    fn class(n: usize) -> KernelClass {
        KernelClass::of(&plan_contiguous(4, n).unwrap())
    }

    fn v(s: &str) -> Variant {
        s.parse().unwrap()
    }

    fn wisdom() -> Wisdom {
        Wisdom {
            path: PathBuf::from("unused"),
            records: FxHashMap::default(),
            splits: FxHashMap::default(),
        }
    }

    #[test]
    fn records_round_trip_through_the_text() {
        let mut w = wisdom();
        w.merge(&TierChoice {
            class: class(1000),
            chosen: v("avx512+zmm"),
            times_ns: vec![
                (v("avx2"), 300),
                (v("avx512+zmm"), 100),
                (v("avx512"), u64::MAX),
            ],
        });
        w.merge(&TierChoice {
            class: class(1 << 20),
            chosen: v("cranelift"),
            times_ns: vec![(v("cranelift"), 7)],
        });
        assert!(w.merge_split(class(1 << 20), 2, [40, 100]));
        assert!(!w.merge_split(class(1 << 20), 4, [99, 100]));
        assert!(
            !w.merge_split(class(1000), 2, [u64::MAX, 100]),
            "not timed: no record"
        );
        let text = w.render();
        let cpu = crate::jit::host::cpu_identity();
        let back = parse(text.as_bytes(), env!("CARGO_PKG_VERSION"), &cpu).unwrap();
        assert_eq!(back, (w.records.clone(), w.splits.clone()), "{text}");
        assert!(text.ends_with("end 4\n"), "{text}");
        assert_eq!(w.splits(&class(1 << 20), 2), Some(true));
        assert_eq!(w.splits(&class(1 << 20), 4), Some(false));
        assert_eq!(w.splits(&class(1000), 2), None);
        assert_eq!(w.splits(&class(1 << 20), 3), None);
        // Every strict prefix is refused: a truncated file is never read as a shorter one.
        for cut in 0..text.len() {
            let r = parse(&text.as_bytes()[..cut], env!("CARGO_PKG_VERSION"), &cpu);
            assert!(
                matches!(r, Err(WisdomStatus::Corrupt { .. })),
                "{cut}: {r:?}"
            );
        }
        let r = parse(text.as_bytes(), "0.0.0-other", &cpu);
        assert!(matches!(r, Err(WisdomStatus::Stale { .. })), "{r:?}");
        let r = parse(text.as_bytes(), env!("CARGO_PKG_VERSION"), "elsewhere");
        assert!(matches!(r, Err(WisdomStatus::Foreign { .. })), "{r:?}");
    }

    #[test]
    fn the_choice_follows_the_medians_past_the_margin() {
        let mut w = wisdom();
        let c = class(4096);
        let trial = |chosen: &str, a: u64, b: u64| TierChoice {
            class: c,
            chosen: v(chosen),
            times_ns: vec![(v("avx2"), a), (v("avx512"), b)],
        };
        w.merge(&trial("avx2", 100, 97)); // within the margin: the trial's choice holds
        assert_eq!(w.records[&c].chosen, v("avx2"));
        w.merge(&trial("avx2", 100, 50));
        w.merge(&trial("avx2", 100, 50)); // medians 100 and 50: past the margin
        assert_eq!(w.records[&c].chosen, v("avx512"));
        for _ in 0..40 {
            w.merge(&trial("avx2", 10, 50));
        }
        assert_eq!(w.records[&c].chosen, v("avx2"));
        assert!(
            w.records[&c]
                .samples
                .iter()
                .all(|s| s.1.len() == SAMPLES_MAX)
        );
        let choice = &w.choices()[0];
        assert_eq!(choice.times_ns, vec![(v("avx2"), 10), (v("avx512"), 50)]);
    }

    #[test]
    fn the_split_follows_the_medians_past_the_margin() {
        let mut w = wisdom();
        let c = class(1 << 22);
        assert!(
            !w.merge_split(c, 2, [96, 100]),
            "within the margin: one thread"
        );
        assert!(!w.merge_split(c, 2, [97, 100]), "medians 96 and 100");
        assert!(!w.merge_split(c, 2, [50, 100]), "medians 96 and 100");
        assert!(w.merge_split(c, 2, [50, 100]), "medians 50 and 100");
        for _ in 0..40 {
            w.merge_split(c, 2, [200, 100]);
        }
        assert_eq!(w.splits(&c, 2), Some(false));
        let r = &w.splits[&(c, 2)];
        assert_eq!((r.split.len(), r.single.len()), (SAMPLES_MAX, SAMPLES_MAX));
    }

    #[test]
    fn damaged_lines_are_corrupt() {
        let cpu = crate::jit::host::cpu_identity();
        let key: String = pattern_key(&Pattern::of(&plan_contiguous(4, 8).unwrap()))
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let head = format!(
            "{HEADER}\nlibrary {}\ncpu {cpu}\n",
            env!("CARGO_PKG_VERSION")
        );
        let ok = format!("{head}class {key} 5 avx2 avx2=3\nend 1\n");
        assert!(parse(ok.as_bytes(), env!("CARGO_PKG_VERSION"), &cpu).is_ok());
        let split = format!("split {key} 5 2 split split=3,4 single=9");
        let ok = format!("{head}{split}\nend 1\n");
        assert!(parse(ok.as_bytes(), env!("CARGO_PKG_VERSION"), &cpu).is_ok());
        for bad in [
            format!("{head}{split}\nend 2\n"),
            format!("{head}{split}\n{split}\nend 2\n"),
            format!("{head}split {key} 5 2 single split=3,4 single=9\nend 1\n"),
            format!("{head}split {key} 5 1 split split=3,4 single=9\nend 1\n"),
            format!("{head}split {key} 5 2 split split=3,4\nend 1\n"),
            format!("{head}split {key} 5 2 split single=9 split=3,4\nend 1\n"),
            format!("{head}split {key} 5 2 split split=3,x single=9\nend 1\n"),
            format!("{head}{split} more\nend 1\n"),
            format!("{head}split {key} 5\nend 1\n"),
            format!("{head}class {key} 5 avx3 avx2=3\nend 1\n"),
            format!("{head}class {key} 5 avx2+fast avx2=3\nend 1\n"),
            format!("{head}class {key} 5 auto auto=3\nend 1\n"),
            format!("{head}class {key} 5 avx2 avx512=3\nend 1\n"),
            format!("{head}class {key} 5 avx2 avx2=3,x\nend 1\n"),
            format!("{head}class {key} 64 avx2 avx2=3\nend 1\n"),
            format!("{head}class {} 5 avx2 avx2=3\nend 1\n", &key[2..]),
            format!("{head}class zz{} 5 avx2 avx2=3\nend 1\n", &key[2..]),
            format!("{head}class {key} 5 avx2 avx2=3\nend 2\n"),
            format!("{head}class {key} 5 avx2 avx2=3\nclass {key} 5 avx2 avx2=3\nend 2\n"),
            format!("{head}class {key} 5 avx2 avx2=3\nend 1\n\n"),
            format!("{head}\u{0}\nend 0\n"),
        ] {
            let r = parse(bad.as_bytes(), env!("CARGO_PKG_VERSION"), &cpu);
            assert!(
                matches!(r, Err(WisdomStatus::Corrupt { .. })),
                "{bad}: {r:?}"
            );
        }
        let r = parse(&[0xff, 0xfe, b'\n'], "x", "y");
        assert!(
            matches!(r, Err(WisdomStatus::Corrupt { line: 1, .. })),
            "{r:?}"
        );
    }
}

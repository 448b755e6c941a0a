//! The wisdom file (`EngineConfig::wisdom`): what `Auto` measured holds across engines. A
//! class measured by one engine is run by the next with the same variant and no trial; a
//! missing file is created; a stale (other library version), foreign (other CPU) or corrupt
//! (garbage, a truncated line, an unknown variant) file is ignored whole, the status says why,
//! the engine measures as without one and the next trial writes the file anew. Results are
//! the interpreter's, byte for byte, whatever the file says.
//!
//! Whether a class's calls split across an engine's threads holds the same way, per thread count.
//!
//! Trials are made deterministic by a timer that reports a fixed cost per variant (see
//! tests/tier_choice.rs): the variant it favours is the one kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use selectjit::plan::plan_contiguous;
use selectjit::{Backend, CallTimer, Engine, EngineConfig, Tier, Variant, WisdomStatus};

#[path = "common/checked.rs"]
mod checked;
#[path = "common/skip.rs"]
mod skip;
use checked::run_checked;

/// f32 elements per call: 64 KiB of output, which has non-temporal candidates with
/// [`NT_MIN_BYTES`] (from a quarter of it) besides the tiers' ordinary ones.
const N: usize = 16 << 10;
/// A second size class.
const N2: usize = 4 * N;
/// Non-temporal stores from 128 KiB of output: measured against ordinary ones from 32 KiB.
const NT_MIN_BYTES: usize = 128 << 10;
/// Calls that finish any trial (12 timed calls per candidate, at most 16 candidates).
const CALLS: usize = 200;

/// A timer under which `favoured` takes 50 ns a call and every other variant 100 ns.
#[derive(Debug)]
struct Favour(Variant);

impl CallTimer for Favour {
    fn time(&self, v: Variant, _split: bool, call: &mut dyn FnMut()) -> u64 {
        call();
        if v == self.0 { 50 } else { 100 }
    }
}

fn config(favoured: Variant) -> EngineConfig {
    EngineConfig::new()
        .tier(Tier::Auto)
        .threads(1)
        .exact_after(1)
        .nt_min_bytes(NT_MIN_BYTES)
        .timer(Arc::new(Favour(favoured)))
}

fn engine(path: &Path, favoured: Variant) -> Engine {
    Engine::with_config(config(favoured).wisdom(path)).unwrap()
}

/// The candidates for `n` contiguous f32 elements, when this host has more than one (else the
/// test is skipped, saying so).
fn candidates(test: &str, n: usize) -> Option<Vec<Variant>> {
    let e = Engine::with_config(config(Variant::default())).unwrap();
    let cands = match e.codegen() {
        Some(cg) => cg.variants(&plan_contiguous(4, n).unwrap()),
        None => Vec::new(),
    };
    if cands.len() < 2 {
        let why = format!(
            "this host has {} candidate(s) ({cands:?}): no trial",
            cands.len()
        );
        if cfg!(target_arch = "x86_64") || cands.is_empty() {
            skip::skip(test, &why);
        } else {
            skip::inherent(test, &why);
        }
        return None;
    }
    Some(cands)
}

/// The variant a file-less engine favouring `favoured` keeps: `favoured` itself.
fn measured(path: &Path, favoured: Variant) -> Engine {
    let e = engine(path, favoured);
    run_checked(&e, N, CALLS);
    let stats = e.stats();
    assert_eq!(stats.tier_trials, 1, "{stats:?}");
    let choices = e.tier_choices();
    assert_eq!(choices.len(), 1);
    assert_eq!(choices[0].chosen, favoured, "{}", choices[0]);
    e
}

/// A valid file's text with one class measured (`favoured` kept), written at `path`.
fn valid_file(path: &Path, favoured: Variant) -> String {
    let _ = std::fs::remove_file(path);
    measured(path, favoured);
    std::fs::read_to_string(path).unwrap()
}

/// `text` with `from` replaced by `to` in its class lines only: the header's `cpu` line lists
/// the host's features, and one of them (`avx2`) is a variant's name too.
fn in_classes(text: &str, from: &str, to: &str) -> String {
    text.split_inclusive('\n')
        .map(|l| {
            if l.starts_with("class ") {
                l.replace(from, to)
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// Checks that the file at `path` is a valid one holding `classes` classes, `favoured` kept
/// for the class of [`N`].
fn assert_valid(path: &Path, classes: usize, favoured: Variant) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.starts_with("selectjit-wisdom 2\nlibrary "), "{text}");
    assert!(text.ends_with(&format!("\nend {classes}\n")), "{text}");
    // The file a next engine loads: the class of N runs `favoured`, without a trial, even
    // under a timer that favours another variant.
    let other = Variant::of(Tier::Cranelift);
    let e = engine(path, other);
    assert_eq!(
        e.wisdom_status(),
        WisdomStatus::Loaded {
            classes,
            seeded: classes
        }
    );
    run_checked(&e, N, 3);
    assert_eq!(e.stats().tier_trials, 0, "{:?}", e.stats());
    let choice = e
        .tier_choices()
        .into_iter()
        .find(|c| c.class == selectjit::KernelClass::of(&plan_contiguous(4, N).unwrap()));
    assert_eq!(choice.map(|c| c.chosen), Some(favoured), "{text}");
}

fn temp_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wisdom.txt");
    (dir, path)
}

#[test]
fn a_measured_class_is_not_measured_again() {
    let Some(cands) = candidates("a_measured_class_is_not_measured_again", N) else {
        return;
    };
    // Not the preferred (first) candidate: the file, not the default, decides.
    let favoured = *cands.last().unwrap();
    let (_dir, path) = temp_file();
    let first = engine(&path, favoured);
    assert_eq!(first.wisdom_status(), WisdomStatus::Missing);
    drop(first);
    measured(&path, favoured);
    let text = std::fs::read_to_string(&path).unwrap();
    // One class, every candidate sampled once, the favoured one kept.
    let class: Vec<&str> = text.lines().filter(|l| l.starts_with("class ")).collect();
    assert_eq!(class.len(), 1, "{text}");
    let words: Vec<&str> = class[0].split(' ').collect();
    assert_eq!(words[3], favoured.to_string(), "{text}");
    assert_eq!(words.len(), 4 + cands.len(), "{text}");
    assert!(
        words[4..]
            .iter()
            .all(|w| w.ends_with("=50") || w.ends_with("=100"))
    );
    assert_valid(&path, 1, favoured);

    // A second size class: measured by the next engine and added to the file, the first kept.
    if let Some(cands2) = candidates("a_measured_class_is_not_measured_again (2)", N2) {
        let favoured2 = cands2[0];
        let e = engine(&path, favoured2);
        run_checked(&e, N2, CALLS);
        run_checked(&e, N, 3);
        assert_eq!(e.stats().tier_trials, 1);
        assert_valid(&path, 2, favoured);
    }
}

/// A timer as [`Favour`] for single calls, under which a split call takes `.1` ns.
#[derive(Debug)]
struct FavourSplit(Variant, u64);

impl CallTimer for FavourSplit {
    fn time(&self, v: Variant, split: bool, call: &mut dyn FnMut()) -> u64 {
        call();
        match (split, v == self.0) {
            (true, _) => self.1,
            (false, true) => 50,
            (false, false) => 100,
        }
    }
}

/// An engine of `threads` threads that may split every call, with the file at `path`.
fn split_engine(path: &Path, threads: usize, favoured: Variant, split_ns: u64) -> Engine {
    let config = config(favoured)
        .threads(threads)
        .parallel_min_bytes(0)
        .timer(Arc::new(FavourSplit(favoured, split_ns)));
    Engine::with_config(config.wisdom(path)).unwrap()
}

/// Runs [`CALLS`] checked calls on a [`split_engine`] and returns the file it leaves.
fn split_run(path: &Path, threads: usize, favoured: Variant, split_ns: u64) -> String {
    let e = split_engine(path, threads, favoured, split_ns);
    run_checked(&e, N, CALLS);
    drop(e);
    std::fs::read_to_string(path).unwrap()
}

/// The words after the class of each `split` line of `text`.
fn split_lines(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .filter(|l| l.starts_with("split "))
        .map(|l| l.split(' ').skip(3).collect())
        .collect()
}

#[test]
fn a_measured_split_holds_in_the_next_engine() {
    let Some(cands) = candidates("a_measured_split_holds_in_the_next_engine", N) else {
        return;
    };
    let favoured = cands[0];
    let (_dir, path) = temp_file();
    // Split calls at 20 ns against 50 on one thread: the trial splits, and the file keeps it.
    let text = split_run(&path, 2, favoured, 20);
    assert_eq!(
        split_lines(&text),
        [["2", "split", "split=20", "single=50"]],
        "{text}"
    );
    assert!(text.ends_with("\nend 2\n"), "{text}");

    // The next engine of two threads splits from its first call, as the file says, though a
    // trial under its timer (split calls at 500 ns) would not: no trial, the file unchanged.
    let e = split_engine(&path, 2, Variant::of(Tier::Cranelift), 500);
    run_checked(&e, N, CALLS);
    assert_eq!(e.stats().tier_trials, 0, "{:?}", e.stats());
    drop(e);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);

    // Three threads are measured on their own: this trial keeps one thread.
    let text = split_run(&path, 3, favoured, 500);
    assert_eq!(
        split_lines(&text),
        [
            ["2", "split", "split=20", "single=50"],
            ["3", "single", "split=500", "single=50"]
        ],
        "{text}"
    );
    assert!(text.ends_with("\nend 3\n"), "{text}");

    // A split line whose way its times contradict is a corrupt file.
    let bad = text.replace(" 2 split split=20", " 2 single split=20");
    std::fs::write(&path, &bad).unwrap();
    let e = split_engine(&path, 2, favoured, 20);
    assert!(
        matches!(e.wisdom_status(), WisdomStatus::Corrupt { .. }),
        "{}",
        e.wisdom_status()
    );
}

#[test]
fn a_missing_file_is_created_and_an_unwritable_one_only_logged() {
    let Some(cands) = candidates("a_missing_file_is_created", N) else {
        return;
    };
    let (dir, path) = temp_file();
    assert!(!path.exists());
    measured(&path, cands[0]);
    assert_valid(&path, 1, cands[0]);
    // A directory that does not exist: nothing is written, nothing fails.
    let nowhere = dir.path().join("no-such-dir").join("wisdom.txt");
    let e = measured(&nowhere, cands[0]);
    assert_eq!(e.wisdom_status(), WisdomStatus::Missing);
    assert!(!nowhere.exists());
    // A path that is a directory: unreadable, ignored; saving fails, logged only.
    let e = measured(dir.path(), cands[0]);
    assert!(
        matches!(e.wisdom_status(), WisdomStatus::Unreadable { .. }),
        "{:?}",
        e.wisdom_status()
    );
    assert!(e.wisdom_status().ignored());
    // No temporary file left behind next to the file.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

/// Writes `text` as the file, checks that an engine ignores it with a status `is_status`
/// accepts, measures as without a file, and rewrites the file validly.
fn ignored(path: &Path, text: &[u8], favoured: Variant, is_status: fn(&WisdomStatus) -> bool) {
    std::fs::write(path, text).unwrap();
    let e = engine(path, favoured);
    let status = e.wisdom_status();
    assert!(is_status(&status), "{status:?}");
    assert!(status.ignored(), "{status}");
    assert!(e.tier_choices().is_empty());
    run_checked(&e, N, CALLS);
    assert_eq!(e.stats().tier_trials, 1);
    assert_valid(path, 1, favoured);
}

#[test]
fn a_corrupt_file_is_ignored_and_rewritten() {
    let Some(cands) = candidates("a_corrupt_file_is_ignored_and_rewritten", N) else {
        return;
    };
    let (a, b) = (cands[0], *cands.last().unwrap());
    let (_dir, path) = temp_file();
    let corrupt = |s: &WisdomStatus| matches!(s, WisdomStatus::Corrupt { .. });
    // Garbage bytes.
    ignored(
        &path,
        &[0x7f, b'E', b'L', b'F', 0, 0xff, 3, b'\n'],
        a,
        corrupt,
    );
    ignored(&path, b"", a, corrupt);
    // A truncated class line (no `end` either).
    let text = valid_file(&path, a);
    let at = text.find("class ").unwrap() + 40;
    ignored(&path, &text.as_bytes()[..at], b, corrupt);
    // A file cut after its last class line.
    let text = valid_file(&path, a);
    let at = text.find("end ").unwrap();
    ignored(&path, &text.as_bytes()[..at], b, corrupt);
    // An unknown variant, kept or sampled.
    let text = valid_file(&path, a);
    let bad = in_classes(&text, &format!(" {a} "), " avx512+turbo ");
    assert_ne!(bad, text);
    ignored(
        &path,
        bad.as_bytes(),
        b,
        |s| matches!(s, WisdomStatus::Corrupt { line: 4, reason } if reason.contains("turbo")),
    );
    let text = valid_file(&path, a);
    let bad = in_classes(&text, &format!(" {b}="), " avx1024=");
    assert_ne!(bad, text);
    ignored(&path, bad.as_bytes(), b, corrupt);
    // A pattern key that is not one.
    let text = valid_file(&path, a);
    let bad = text.replacen("class 04", "class 03", 1);
    assert_ne!(bad, text);
    ignored(&path, bad.as_bytes(), b, corrupt);
}

#[test]
fn a_stale_file_is_ignored_and_rewritten() {
    let Some(cands) = candidates("a_stale_file_is_ignored_and_rewritten", N) else {
        return;
    };
    let (a, b) = (cands[0], *cands.last().unwrap());
    let (_dir, path) = temp_file();
    let text = valid_file(&path, a);
    let version = format!("library {}\n", env!("CARGO_PKG_VERSION"));
    assert!(text.contains(&version), "{text}");
    let stale = text.replace(&version, "library 0.0.1-older\n");
    ignored(&path, stale.as_bytes(), b, |s| {
        *s == WisdomStatus::Stale {
            found: "library 0.0.1-older".into(),
        }
    });
    // The format before split lines, and a later one.
    for format in ["1", "3"] {
        let text = valid_file(&path, a);
        let other = text.replace(
            "selectjit-wisdom 2\n",
            &format!("selectjit-wisdom {format}\n"),
        );
        std::fs::write(&path, &other).unwrap();
        let found = format!("file format {format:?}");
        assert_eq!(
            engine(&path, b).wisdom_status(),
            WisdomStatus::Stale { found }
        );
        ignored(
            &path,
            other.as_bytes(),
            b,
            |s| matches!(s, WisdomStatus::Stale { found } if found.starts_with("file format")),
        );
    }
}

#[test]
fn a_foreign_file_is_ignored_and_rewritten() {
    let Some(cands) = candidates("a_foreign_file_is_ignored_and_rewritten", N) else {
        return;
    };
    let (a, b) = (cands[0], *cands.last().unwrap());
    let (_dir, path) = temp_file();
    let text = valid_file(&path, a);
    let cpu = text.lines().nth(2).unwrap().to_string();
    assert!(
        cpu.starts_with(&format!("cpu {}; ", std::env::consts::ARCH)),
        "{cpu}"
    );
    let foreign = text.replace(&cpu, "cpu x86_64; Some Other CPU; avx2 bmi2");
    ignored(&path, foreign.as_bytes(), b, |s| {
        *s == WisdomStatus::Foreign {
            found: "x86_64; Some Other CPU; avx2 bmi2".into(),
        }
    });
}

/// A kept variant that is not a candidate of the signature (the file was written with other
/// settings, or edited): loaded, but the signature is measured rather than compiled as it.
#[test]
fn a_kept_variant_that_is_no_candidate_is_measured() {
    let Some(cands) = candidates("a_kept_variant_that_is_no_candidate_is_measured", N) else {
        return;
    };
    let (a, b) = (cands[0], *cands.last().unwrap());
    let odd = Variant {
        four_way: true,
        prefetchw: true,
        ..Variant::of(a.tier)
    };
    assert!(!cands.contains(&odd));
    let (_dir, path) = temp_file();
    let text = valid_file(&path, a);
    let edited = in_classes(&text, &format!(" {a} "), &format!(" {odd} "));
    let edited = in_classes(&edited, &format!(" {a}="), &format!(" {odd}="));
    std::fs::write(&path, edited).unwrap();
    let e = engine(&path, b);
    assert_eq!(
        e.wisdom_status(),
        WisdomStatus::Loaded {
            classes: 1,
            seeded: 1
        }
    );
    run_checked(&e, N, CALLS);
    assert_eq!(e.stats().tier_trials, 1);
    let choices = e.tier_choices();
    assert_eq!(choices[0].chosen, b);
}

/// Engines that do not measure neither read nor write the file.
#[test]
fn engines_that_do_not_measure_leave_the_file_alone() {
    let (_dir, path) = temp_file();
    std::fs::write(&path, "untouched\n").unwrap();
    let mut configs = vec![
        EngineConfig::new().backend(Backend::Interp),
        EngineConfig::new().backend(Backend::Static),
    ];
    configs.extend(
        Tier::host_tiers()
            .into_iter()
            .map(|t| config(Variant::of(t)).tier(t)),
    );
    for c in configs {
        let e = Engine::with_config(c.wisdom(&path)).unwrap();
        assert_eq!(e.wisdom_status(), WisdomStatus::Off);
        run_checked(&e, N, 30);
        assert!(e.tier_choices().is_empty());
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "untouched\n");
}

//! `Auto` chooses among the variants this host runs (AVX-512 and AVX2; ordinary and, for large
//! outputs, non-temporal stores, those also walking four parts of long rows at once; AVX-512
//! also with zmm blocks) by timing them on real calls. With an injected timer the
//! choice is deterministic: the slower variant is never kept. The choice never changes a
//! result, is made once per kernel class, its cost is counted, prepared calls take part, and
//! named tiers never measure.

use std::sync::Arc;

use selectjit::codegen::CodeGen;
use selectjit::plan::plan_contiguous;
use selectjit::{Broadcast, CallTimer, Engine, EngineConfig, TensorMut, TensorRef};
use selectjit::{Tier, Variant};

#[path = "common/checked.rs"]
mod checked;
#[path = "common/skip.rs"]
mod skip;
use checked::run_checked;

/// A fixed cost per variant.
type Cost = fn(Variant) -> u64;

/// Timed calls per candidate in a trial: three runs of four calls in a row.
const PROBES: usize = 12;

/// A timer that runs the call and reports a fixed cost per variant.
#[derive(Debug)]
struct Rigged(Cost);

impl CallTimer for Rigged {
    fn time(&self, v: Variant, _split: bool, call: &mut dyn FnMut()) -> u64 {
        call();
        (self.0)(v)
    }
}

/// An `Auto` engine whose choices `cost` times; non-temporal stores from 8 MiB of output (so
/// that 2 MiB outputs have non-temporal candidates, and 8 MiB ones four-way walks too).
fn auto(cost: Cost) -> Engine {
    Engine::with_config(
        EngineConfig::new()
            .tier(Tier::Auto)
            .threads(1)
            .exact_after(1)
            .nt_min_bytes(8 << 20)
            .timer(Arc::new(Rigged(cost))),
    )
    .unwrap()
}

/// The candidates `Auto` has for `n` contiguous f32 elements.
fn candidates(e: &Engine, n: usize) -> Vec<Variant> {
    let cg: &CodeGen = e.codegen().unwrap();
    cg.variants(&plan_contiguous(4, n).unwrap())
}

/// Each ranking of the variants: the slower ones are never kept, every candidate was timed
/// with its own cost, and the calls' results never change. Where a ranking orders variants
/// of one store kind, the faster is faster by more than the margin within which an 8 MiB
/// output keeps its whole-line variant (8%).
#[test]
fn the_slower_variant_is_never_kept() {
    let rankings: [(&str, Cost); 6] = [
        (
            "avx2 fastest",
            |v| if v.tier == Tier::Avx2 { 100 } else { 300 } + 10 * v.nt as u64,
        ),
        (
            "avx512 fastest",
            |v| if v.tier == Tier::Avx512 { 100 } else { 300 } + 10 * v.nt as u64,
        ),
        (
            "nt fastest",
            |v| if v.nt { 150 } else { 250 } + (v.tier == Tier::Avx2) as u64,
        ),
        (
            "ordinary fastest",
            |v| if v.nt { 250 } else { 150 } + 20 * (v.tier == Tier::Avx512) as u64,
        ),
        (
            "zmm fastest",
            |v| if v.wide { 100 } else { 200 } + v.nt as u64,
        ),
        (
            "four-way fastest",
            |v| if v.four_way { 100 } else { 200 } + (v.tier == Tier::Avx512) as u64,
        ),
    ];
    // 2M f32: an 8 MiB output, where non-temporal stores and four-way walks are candidates too.
    let n = 2 << 20;
    for (name, cost) in rankings {
        let e = auto(cost);
        let cands = candidates(&e, n);
        // zmm blocks: offered with AVX-512, with ordinary stores only.
        let avx512 = cands.iter().any(|v| v.tier == Tier::Avx512);
        assert_eq!(
            cands.iter().filter(|v| v.wide).count(),
            avx512 as usize,
            "{cands:?}"
        );
        assert!(
            cands
                .iter()
                .all(|v| !v.wide || (v.tier == Tier::Avx512 && !v.nt))
        );
        // Four-way walks: offered with non-temporal stores, next to each x86 tier's one-way
        // non-temporal kernel (2M contiguous elements: rows long enough).
        for v in &cands {
            let one_way = Variant {
                four_way: false,
                ..*v
            };
            assert!(
                !v.four_way || (v.nt && !v.wide && cands.contains(&one_way)),
                "{cands:?}"
            );
        }
        let x86_nt = cands
            .iter()
            .filter(|v| v.nt && !v.four_way && v.tier != Tier::Cranelift)
            .count();
        assert_eq!(cands.iter().filter(|v| v.four_way).count(), x86_nt);
        // Below `nt_min_bytes` of output: non-temporal stores, one way only.
        let smaller = candidates(&e, n / 2);
        assert_eq!(
            smaller.iter().filter(|v| v.nt).count(),
            x86_nt,
            "{smaller:?}"
        );
        assert!(!smaller.iter().any(|v| v.four_way), "{smaller:?}");
        // prefetchw: from 1 MiB of output up to `nt_min_bytes`, a twin of each x86 candidate
        // with ordinary stores; never more than eight candidates.
        assert!(!cands.iter().any(|v| v.prefetchw), "{cands:?}");
        let ordinary_x86 = |c: &[Variant]| {
            c.iter()
                .filter(|v| !v.nt && !v.prefetchw && v.tier != Tier::Cranelift)
                .count()
        };
        for v in smaller.iter().filter(|v| v.prefetchw) {
            let plain = Variant {
                prefetchw: false,
                ..*v
            };
            assert!(!v.nt && smaller.contains(&plain), "{smaller:?}");
        }
        assert_eq!(
            smaller.iter().filter(|v| v.prefetchw).count(),
            ordinary_x86(&smaller),
            "{smaller:?}"
        );
        let small = candidates(&e, (1 << 18) - 16);
        assert!(!small.iter().any(|v| v.prefetchw), "{small:?}");
        assert!(cands.len() <= 8 && smaller.len() <= 8);
        if cands.len() < 2 {
            skip::skip(
                &format!("the_slower_variant_is_never_kept: {name}"),
                &format!("this host has one candidate ({cands:?}), nothing to choose"),
            );
            run_checked(&e, n, 3);
            assert_eq!(e.stats().tier_trials, 0);
            continue;
        }
        // Three runs of four timed calls per candidate, then the choice.
        let probes = PROBES * cands.len();
        run_checked(&e, n, probes + 2);
        let s = e.stats();
        assert_eq!(s.tier_trials, 1, "{name}: {s:?}");
        let choices = e.tier_choices();
        assert_eq!(choices.len(), 1);
        let c = &choices[0];
        let best = cands.iter().map(|&v| cost(v)).min().unwrap();
        assert_eq!(
            cost(c.chosen),
            best,
            "{name}: kept {} of {cands:?}",
            c.chosen
        );
        // Every candidate timed, the preferred first: those with ordinary stores, then those
        // with non-temporal stores (whose calls slow down the calls after them), each group
        // in the order offered.
        let (mut ordered, nt): (Vec<Variant>, Vec<Variant>) = cands.iter().partition(|v| !v.nt);
        ordered.extend(nt);
        assert_eq!(
            ordered[0], cands[0],
            "{name}: the preferred has ordinary stores"
        );
        assert_eq!(
            c.times_ns.iter().map(|t| t.0).collect::<Vec<_>>(),
            ordered,
            "{name}: every candidate timed, ordinary stores first"
        );
        for &(v, ns) in &c.times_ns {
            assert_eq!(ns, cost(v), "{name}: {v}");
        }
        // The cost of measuring, as counted: every probe, and what each cost over the winner.
        assert_eq!(s.trial_calls, probes as u64);
        let excess: u64 = cands
            .iter()
            .map(|&v| PROBES as u64 * (cost(v) - best))
            .sum();
        assert_eq!(s.trial_excess_ns, excess, "{name}");
        assert_eq!(s.trial_compiles, cands.len() as u64 - 1);
        // Later calls run the chosen kernel, without timing.
        let k = e.kernel(&plan_contiguous(4, n).unwrap()).unwrap();
        assert_eq!(k.variant(), c.chosen);
        println!("{name}: {c}");
    }
}

/// A class is measured once: another signature of the same pattern and output size class
/// compiles only the chosen variant; a signature of another size class is measured anew.
#[test]
fn a_class_is_measured_once() {
    let e = auto(|v| {
        if v.tier == Tier::Avx2 && !v.nt {
            10
        } else {
            20
        }
    });
    let n = 1 << 20;
    if candidates(&e, n).len() < 2 {
        skip::skip(
            "a_class_is_measured_once",
            "one candidate on this host: nothing to measure",
        );
        return;
    }
    run_checked(&e, n, PROBES * 8 + 2);
    let s = e.stats();
    assert_eq!(s.tier_trials, 1);
    // Same class (4 to 8 MiB of output, contiguous f32): no new trial, one compile.
    run_checked(&e, n + 1000, 3);
    let s2 = e.stats();
    assert_eq!(s2.tier_trials, 1);
    assert_eq!(s2.trial_compiles, s.trial_compiles);
    assert_eq!(s2.compiles, s.compiles + 1);
    let k = e.kernel(&plan_contiguous(4, n + 1000).unwrap()).unwrap();
    assert_eq!(k.variant(), e.tier_choices()[0].chosen);
    // Another size class is measured on its own.
    run_checked(&e, 4 * n, PROBES * 8 + 2);
    assert_eq!(e.stats().tier_trials, 2);
    assert_eq!(e.tier_choices().len(), 2);
}

/// A prepared call takes part in the trial on its own calls; the engine takes the choice in at
/// its next lookup.
#[test]
fn prepared_calls_measure_too() {
    let e = auto(|v| if v.nt { 5 } else { 50 });
    let n = 2 << 20;
    let cands = candidates(&e, n);
    if cands.len() < 2 {
        skip::skip(
            "prepared_calls_measure_too",
            "one candidate on this host: nothing to measure",
        );
        return;
    }
    let p = e
        .prepare(selectjit::DType::F32, &[n], &[n], &[], Broadcast::Numpy)
        .unwrap();
    let t: Vec<f32> = (0..n).map(|i| i as f32).collect();
    for c in 0..PROBES * cands.len() + 3 {
        let cond: Vec<u8> = (0..n).map(|i| ((i * 7 + c) % 3) as u8).collect();
        let mut out = vec![0f32; n];
        p.run(&cond, &t, &[-1.0], &mut out).unwrap();
        for i in (0..n).step_by(997) {
            let want = if cond[i] != 0 { t[i] } else { -1.0 };
            assert_eq!(out[i].to_bits(), want.to_bits(), "call {c}, element {i}");
        }
    }
    // The engine's next call of the signature takes the choice in.
    assert_eq!(e.stats().tier_trials, 0);
    let mut out = vec![0f32; n];
    let cond = vec![1u8; n];
    e.select(
        TensorRef::new(&cond, &[n]),
        TensorRef::new(&t, &[n]),
        TensorRef::scalar(&[-1.0f32]),
        TensorMut::new(&mut out, &[n]),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(out, t);
    assert_eq!(e.stats().tier_trials, 1);
    assert!(e.tier_choices()[0].chosen.nt);
}

/// A named tier compiles one kernel and never measures.
#[test]
fn named_tiers_never_measure() {
    for tier in Tier::host_tiers() {
        let e = Engine::with_config(
            EngineConfig::new()
                .tier(tier)
                .threads(1)
                .exact_after(1)
                .timer(Arc::new(Rigged(|_| panic!("a named tier timed a call")))),
        )
        .unwrap();
        run_checked(&e, 1 << 20, 3);
        let s = e.stats();
        assert_eq!(
            (s.tier_trials, s.trial_calls, s.compiles),
            (0, 0, 1),
            "{tier}"
        );
        assert!(e.tier_choices().is_empty());
    }
}

/// Every probe of a candidate with ordinary stores comes before the first probe of one with
/// non-temporal stores (whose calls slow down the calls after them), and the choice still
/// goes to the fastest.
#[test]
fn ordinary_stores_are_probed_before_non_temporal_ones() {
    #[derive(Debug, Default)]
    struct Logged(std::sync::Mutex<Vec<Variant>>);
    impl CallTimer for Logged {
        fn time(&self, v: Variant, _split: bool, call: &mut dyn FnMut()) -> u64 {
            call();
            self.0.lock().unwrap().push(v);
            // Non-temporal four-way AVX2 fastest, everything else slower.
            if v.nt && v.four_way && v.tier == Tier::Avx2 {
                100
            } else {
                200
            }
        }
    }
    let log = Arc::new(Logged::default());
    let e = Engine::with_config(
        EngineConfig::new()
            .tier(Tier::Auto)
            .threads(1)
            .exact_after(1)
            .nt_min_bytes(8 << 20)
            .timer(log.clone()),
    )
    .unwrap();
    let n = 2 << 20;
    let cands = candidates(&e, n);
    if !cands.iter().any(|v| v.nt) || !cands.iter().any(|v| !v.nt) {
        skip::skip(
            "ordinary_stores_are_probed_before_non_temporal_ones",
            &format!("this host offers one store kind ({cands:?}): nothing to order"),
        );
        return;
    }
    run_checked(&e, n, PROBES * cands.len() + 2);
    let probes = log.0.lock().unwrap().clone();
    assert_eq!(probes.len(), PROBES * cands.len(), "{probes:?}");
    let first_nt = probes.iter().position(|v| v.nt).unwrap();
    assert!(probes[first_nt..].iter().all(|v| v.nt), "{probes:?}");
    assert_eq!(first_nt, PROBES * cands.iter().filter(|v| !v.nt).count());
    // Each candidate in runs of four calls, round robin within its group.
    for run in probes.chunks(4) {
        assert!(run.iter().all(|v| *v == run[0]), "{probes:?}");
    }
    let chosen = e.tier_choices()[0].chosen;
    let want = Variant {
        tier: Tier::Avx2,
        nt: true,
        wide: false,
        four_way: true,
        prefetchw: false,
    };
    if cands.contains(&want) {
        assert_eq!(chosen, want);
    }
}

/// Below 12 MiB of output a variant with non-temporal stores is kept only when it beats every
/// variant with ordinary stores by 5%: 3% faster, an ordinary-store variant is kept; 10%
/// faster, it is chosen. From 12 MiB the other way round: 3% slower, it is kept; 10% slower,
/// not.
#[test]
fn the_store_kinds_must_win_by_a_margin() {
    fn nt_97(v: Variant) -> u64 {
        if v.nt { 97 } else { 100 + v.wide as u64 }
    }
    fn nt_90(v: Variant) -> u64 {
        if v.nt { 90 } else { 100 + v.wide as u64 }
    }
    fn nt_103(v: Variant) -> u64 {
        if v.nt { 103 } else { 100 + v.wide as u64 }
    }
    fn nt_110(v: Variant) -> u64 {
        if v.nt { 110 } else { 100 + v.wide as u64 }
    }
    // 4 MiB (non-temporal candidates from 2 MiB here), 12 MiB less one line and 12 MiB of
    // output (f32).
    for (n, cost, nt_wins) in [
        (1 << 20, nt_97 as Cost, false),
        (1 << 20, nt_90 as Cost, true),
        ((3 << 20) - 16, nt_97 as Cost, false),
        ((3 << 20) - 16, nt_103 as Cost, false),
        (3 << 20, nt_103 as Cost, true),
        (3 << 20, nt_110 as Cost, false),
        (3 << 20, nt_97 as Cost, true),
    ] {
        let e = auto(cost);
        let cands = candidates(&e, n);
        if !cands.iter().any(|v| v.nt) || !cands.iter().any(|v| !v.nt) {
            skip::skip(
                "the_store_kinds_must_win_by_a_margin",
                &format!("this host offers one store kind ({cands:?}): no margin to apply"),
            );
            return;
        }
        run_checked(&e, n, PROBES * cands.len() + 2);
        let c = &e.tier_choices()[0];
        assert_eq!(c.chosen.nt, nt_wins, "{n}: {c}");
    }
}

/// A variant with whole-line (zmm) stores and ordinary ones, with `prefetchw` or without.
fn is_whole(v: Variant, prefetchw: bool) -> bool {
    v.wide && v.prefetchw == prefetchw && !v.nt
}

/// Up to 4 MiB of output the variant with whole-line stores and `prefetchw` is kept unless
/// another beats it by 8%, up to 16 MiB the one with whole-line stores and no `prefetchw`;
/// above, the fastest is kept.
#[test]
fn whole_line_stores_are_kept_up_to_16_mib_unless_beaten_by_8_percent() {
    fn close(v: Variant) -> u64 {
        match v {
            v if v.nt => 500,
            v if v.wide => 104,
            v if v.tier == Tier::Avx2 && !v.prefetchw => 100,
            _ => 120,
        }
    }
    fn far(v: Variant) -> u64 {
        if v.tier == Tier::Avx2 && !v.prefetchw && !v.nt {
            90
        } else {
            close(v)
        }
    }
    // f32 outputs of 2 MiB, 6 MiB, 16 MiB and 16 MiB + one line; `Some(prefetchw)`: the
    // whole-line variant kept, `None`: the fastest.
    for (n, cost, whole_kept) in [
        (1 << 19, close as Cost, Some(true)),
        (1 << 19, far as Cost, None),
        (3 << 19, close as Cost, Some(false)),
        (3 << 19, far as Cost, None),
        (4 << 20, close as Cost, Some(false)),
        ((4 << 20) + 16, close as Cost, None),
    ] {
        let e = auto(cost);
        let cands = candidates(&e, n);
        if !cands.iter().any(|&v| v.wide && !v.nt) || cands.len() < 2 {
            skip::skip(
                "whole_line_stores_are_kept_up_to_16_mib_unless_beaten_by_8_percent",
                &format!("no whole-line candidate on this host ({cands:?})"),
            );
            return;
        }
        run_checked(&e, n, PROBES * cands.len() + 2);
        let c = &e.tier_choices()[0];
        match whole_kept {
            Some(pfw) if cands.iter().any(|&v| is_whole(v, pfw)) => {
                assert!(is_whole(c.chosen, pfw), "{n}: {c}")
            }
            Some(_) => skip::skip(
                &format!("whole_line_stores_are_kept_up_to_16_mib_unless_beaten_by_8_percent: {n}"),
                &format!("no such whole-line candidate here ({cands:?})"),
            ),
            None => {
                let best = cands.iter().map(|&v| cost(v)).min().unwrap();
                assert_eq!(cost(c.chosen), best, "{n}: {c}");
            }
        }
    }
}

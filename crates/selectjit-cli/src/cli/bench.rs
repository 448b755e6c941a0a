//! `selectjit bench`.

use std::path::PathBuf;

use selectjit::{Error, Result};
use selectjit_bench::{
    BUILTIN_CASES, BUILTIN_FUSED_CASES, BUILTIN_NWAY_CASES, FUSED_NOTES, Measurement, NWAY_NOTES,
    Options, TABLE_NOTES, fused_header, fused_row, geomean, host_tiers, measure_dynamic,
    measure_overheads, nway_header, nway_row, parse_cases, parse_fused_cases, parse_nway_cases,
    run_fused_suite, run_nway_suite, run_suite, table_header, table_row,
};

#[derive(clap::Args)]
pub struct Args {
    /// Case list in the cases.json format (default: the built-in copy).
    #[arg(long)]
    cases: Option<PathBuf>,
    /// Fused case list in the fused_cases.json format (default: the built-in copy).
    #[arg(long)]
    fused_cases: Option<PathBuf>,
    /// N-way case list in the nway_cases.json format (default: the built-in copy).
    #[arg(long)]
    nway_cases: Option<PathBuf>,
    /// Only cases (select, fused and n-way) whose name contains this.
    #[arg(long, default_value = "")]
    filter: String,
    /// Fewer rounds and shorter batches.
    #[arg(long)]
    quick: bool,
    /// Also write the measurements as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also run the dynamic-shape benchmark over this many sequence lengths.
    #[arg(long, default_value_t = 0)]
    dynamic: usize,
}

pub fn run(a: Args) -> Result<()> {
    let text = match &a.cases {
        Some(p) => std::fs::read_to_string(p).map_err(|e| Error::io(p.display().to_string(), e))?,
        None => BUILTIN_CASES.to_string(),
    };
    let cases = parse_cases(&text)?;
    let fused_text = match &a.fused_cases {
        Some(p) => std::fs::read_to_string(p).map_err(|e| Error::io(p.display().to_string(), e))?,
        None => BUILTIN_FUSED_CASES.to_string(),
    };
    let fused_cases = parse_fused_cases(&fused_text)?;
    let nway_text = match &a.nway_cases {
        Some(p) => std::fs::read_to_string(p).map_err(|e| Error::io(p.display().to_string(), e))?,
        None => BUILTIN_NWAY_CASES.to_string(),
    };
    let nway_cases = parse_nway_cases(&nway_text)?;
    let any = |name: &str| name.contains(a.filter.as_str());
    if !cases.iter().any(|c| any(&c.name))
        && !fused_cases.iter().any(|c| any(&c.name))
        && !nway_cases.iter().any(|c| any(&c.name))
    {
        return Err(Error::Invalid(format!("no case matches '{}'", a.filter)));
    }
    let opts = if a.quick {
        Options::quick()
    } else {
        Options::full()
    };
    let tiers = host_tiers();
    let ms = if cases.iter().any(|c| any(&c.name)) {
        println!("{}", table_header(&tiers));
        run_suite(&cases, &a.filter, opts, |m| println!("{}", table_row(m)))?
    } else {
        Vec::new()
    };
    if !ms.is_empty() {
        summarise(&ms, &tiers);
    }
    let fused = if fused_cases.iter().any(|c| any(&c.name)) {
        println!("{}", fused_header());
        let f = run_fused_suite(&fused_cases, &a.filter, opts, |m| {
            println!("{}", fused_row(m))
        })?;
        println!("{FUSED_NOTES}");
        println!(
            "geometric mean of fused/unfused time: {:.3} ({} of {} cases fused faster); of fused/copy roofline: {:.3}",
            geomean_of(&f, |m| m.fused_over_unfused),
            f.iter().filter(|m| m.fused_ns < m.unfused_ns).count(),
            f.len(),
            geomean_of(&f, |m| m.fused_over_roofline)
        );
        f
    } else {
        Vec::new()
    };
    let nway = if nway_cases.iter().any(|c| any(&c.name)) {
        println!("{}", nway_header());
        let n = run_nway_suite(&nway_cases, &a.filter, opts, |m| {
            println!("{}", nway_row(m))
        })?;
        println!("{NWAY_NOTES}");
        println!(
            "geometric mean of nway/copy roofline time: {:.3}; of chained/nway time: {:.3} ({} of {} cases n-way faster)",
            geomean_of(&n, |m| m.nway_over_roofline),
            geomean_of(&n, |m| m.chained_over_nway),
            n.iter().filter(|m| m.nway_ns < m.chained_ns).count(),
            n.len()
        );
        n
    } else {
        Vec::new()
    };
    let o = measure_overheads(opts)?;
    println!(
        "cache-hit call (16 f32): {:.0} ns (static kernels: {:.0} ns); prepared call: {:.0} ns",
        o.hit_call_ns, o.static_call_ns, o.prepared_call_ns
    );
    for c in &o.compile {
        println!(
            "compile of a new signature, {}: median {:.1} us, p90 {:.1} us ({} signatures, {} by the tier itself)",
            c.tier, c.median_us, c.p90_us, c.compiled, c.by_tier
        );
    }
    if !o.nway_compile.is_empty() {
        let per_k: Vec<String> = o
            .nway_compile
            .iter()
            .map(|c| format!("{} {:.0}", c.branches, c.median_us))
            .collect();
        println!(
            "compile of a new n-way pattern, auto, median us by branches: {} ({} patterns each at most)",
            per_k.join(", "),
            o.nway_compile.iter().map(|c| c.compiled).max().unwrap_or(0)
        );
    }
    let dynamic = if a.dynamic > 0 {
        let d = measure_dynamic(a.dynamic, opts)?;
        println!(
            "dynamic shapes: {} sequence lengths -> {} generic + {} exact kernels compiled, {:.1} ms of calls",
            d.lengths, d.generic_compiles, d.exact_compiles, d.total_ms
        );
        for (n, g, e) in &d.probes {
            println!(
                "  {n:>8} elements: generic {:.0} ns, exact {:.0} ns, generic/exact {:.3}",
                g,
                e,
                g / e
            );
        }
        Some(d)
    } else {
        None
    };
    if let Some(p) = &a.json {
        let v = serde_json::json!({
            "cases": ms,
            "fused_cases": fused,
            "nway_cases": nway,
            "overheads": o,
            "dynamic": dynamic
        });
        let s = serde_json::to_string_pretty(&v)
            .map_err(|e| Error::Invalid(format!("the report as JSON: {e}")))?;
        let dir = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| ".".into());
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| Error::io(p.display().to_string(), e))?;
        std::io::Write::write_all(&mut tmp, s.as_bytes())
            .map_err(|e| Error::io(tmp.path().display().to_string(), e))?;
        tmp.persist(p)
            .map_err(|e| Error::io(p.display().to_string(), e.error))?;
    }
    Ok(())
}

/// Geometric mean of `ratio` over the fused measurements.
fn geomean_of<T>(ms: &[T], ratio: impl Fn(&T) -> f64) -> f64 {
    if ms.is_empty() {
        return f64::NAN;
    }
    (ms.iter().map(|m| ratio(m).ln()).sum::<f64>() / ms.len() as f64).exp()
}

/// The lines under the select table.
fn summarise(ms: &[Measurement], tiers: &[selectjit::Tier]) {
    println!("{TABLE_NOTES}");
    for (k, t) in tiers.iter().enumerate() {
        println!(
            "geometric mean of {t}/static time: {:.3} ({} of {} cases faster than static)",
            geomean(ms, |m| m.tiers[k].ns / m.static_ns),
            ms.iter().filter(|m| m.tiers[k].ns < m.static_ns).count(),
            ms.len()
        );
    }
    println!(
        "geometric mean of auto/static time: {:.3} ({} of {} cases faster than static)",
        geomean(ms, |m| m.jit_ns / m.static_ns),
        ms.iter().filter(|m| m.jit_ns < m.static_ns).count(),
        ms.len()
    );
    if let Some(w) = ms
        .iter()
        .filter(|m| m.elements >= 1 << 16)
        .max_by(|x, y| x.auto_over_best_tier.total_cmp(&y.auto_over_best_tier))
    {
        println!(
            "worst auto/fastest named tier on cases of >= 64K elements: {:.3} ({}, auto chose {})",
            w.auto_over_best_tier, w.case, w.jit_tier
        );
    }
    let worst = |big: bool| {
        ms.iter()
            .filter(|m| (m.elements >= 1 << 16) == big)
            .max_by(|x, y| x.jit_over_roofline.total_cmp(&y.jit_over_roofline))
    };
    for (big, label) in [(true, ">= 64K"), (false, "< 64K")] {
        if let Some(w) = worst(big) {
            println!(
                "worst jit/copy roofline on cases of {label} elements: {:.3} ({})",
                w.jit_over_roofline, w.case
            );
        }
    }
    if let Some((m, r)) = ms
        .iter()
        .filter_map(|m| m.intrinsics_ns.map(|i| (m, m.jit_ns / i)))
        .max_by(|x, y| x.1.total_cmp(&y.1))
    {
        println!(
            "worst jit/intrinsics AVX2 select (the bar, contiguous f32 cases): {r:.3} ({})",
            m.case
        );
    }
    let worst_mt: Option<&Measurement> = ms
        .iter()
        .max_by(|x, y| x.mt_over_jit.total_cmp(&y.mt_over_jit));
    if let Some(w) = worst_mt {
        println!(
            "worst jit-mt/jit ({} threads): {:.3} ({})",
            w.threads, w.mt_over_jit, w.case
        );
    }
}

//! Shape inference never panics or overflows on any shapes (huge dims, rank up to 70, zeros),
//! and agrees with a small independent rule written here from docs/semantics.md.
#![no_main]

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use selectjit::{Broadcast, MAX_RANK};

fn dims(u: &mut Unstructured) -> Result<Vec<usize>> {
    let rank = u.int_in_range(0..=70)?;
    let mut v = Vec::with_capacity(rank);
    for _ in 0..rank {
        v.push(match u.int_in_range(0..=9)? {
            0 => 0,
            1..=4 => 1,
            5..=7 => u.int_in_range(2..=4)?,
            8 => u.arbitrary::<u32>()? as usize,
            _ => u.arbitrary::<usize>()?,
        });
    }
    Ok(v)
}

/// numpy merge of `x` into `out`, right-aligned.
fn merge(out: &mut Vec<usize>, x: &[usize]) -> bool {
    while out.len() < x.len() {
        out.insert(0, 1);
    }
    let off = out.len() - x.len();
    x.iter().enumerate().all(|(j, &d)| {
        let o = &mut out[off + j];
        if d == *o || d == 1 {
            true
        } else if *o == 1 {
            *o = d;
            true
        } else {
            false
        }
    })
}

/// One-way pdpd placement of `x` into `out`.
fn pdpd(x: &[usize], out: &[usize], axis: i64) -> bool {
    if x.len() > out.len() || axis < -1 {
        return false;
    }
    if x.len() == out.len() {
        return x.iter().zip(out).all(|(a, b)| a == b || *a == 1);
    }
    let start = if axis == -1 { out.len() - x.len() } else { axis as usize };
    let mut len = x.len();
    while len > 0 && x[len - 1] == 1 {
        len -= 1;
    }
    len == 0 || (start.checked_add(len).is_some_and(|e| e <= out.len())
        && (0..len).all(|j| x[j] == 1 || x[j] == out[start + j]))
}

/// The element-count limit: the product of max(d, 1) fits in isize.
fn fits(s: &[usize]) -> bool {
    s.len() <= MAX_RANK
        && s.iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d.max(1)).filter(|&v| v <= isize::MAX as usize))
            .is_some()
}

fn reference(mode: Broadcast, c: &[usize], t: &[usize], e: &[usize]) -> Option<Vec<usize>> {
    if !fits(c) || !fits(t) || !fits(e) {
        return None;
    }
    let out = match mode {
        Broadcast::Numpy => {
            let mut out = Vec::new();
            (merge(&mut out, c) && merge(&mut out, t) && merge(&mut out, e)).then_some(out)?
        }
        Broadcast::TwoStep => {
            let mut out = Vec::new();
            // cond goes in one way: right-aligned, each dim equal to the output's or 1.
            let ok = merge(&mut out, t)
                && merge(&mut out, e)
                && c.len() <= out.len()
                && c.iter().zip(&out[out.len() - c.len()..]).all(|(a, b)| a == b || *a == 1);
            ok.then_some(out)?
        }
        Broadcast::Exact => (c == t && e == t).then(|| t.to_vec())?,
        Broadcast::Pdpd { axis } => (pdpd(e, t, axis) && pdpd(c, t, axis)).then(|| t.to_vec())?,
    };
    fits(&out).then_some(out)
}

fn run(data: &[u8]) -> Result<()> {
    let mut u = Unstructured::new(data);
    let mode = match u.int_in_range(0..=3)? {
        0 => Broadcast::Numpy,
        1 => Broadcast::TwoStep,
        2 => Broadcast::Exact,
        _ => Broadcast::Pdpd { axis: u.arbitrary::<i8>()? as i64 },
    };
    let (c, t, e) = (dims(&mut u)?, dims(&mut u)?, dims(&mut u)?);
    let got = selectjit::output_shape(mode, &c, &t, &e).ok().map(|d| d.to_vec());
    let want = reference(mode, &c, &t, &e);
    assert_eq!(got, want, "{mode:?} cond {c:?} then {t:?} else {e:?}");
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});

//! The reference interpreter: walks the output coordinates one at a time in row-major order and
//! computes each operand's offset from its strides over the output.
//!
//! It is deliberately simple and independent of the loop-collapsing planner (`plan.rs`), because
//! it is the oracle every fast path is tested against. It also serves any `Clone` element type
//! (strings), for which there is no machine-code path.

/// A source operand: its buffer, or the output itself (in-place operation, where the source has
/// exactly the output's layout), with its strides over the output's dimensions.
pub(crate) enum Src<'a, T> {
    Buf(&'a [T], &'a [isize]),
    Out,
}

/// `out[i] = cond[i] != 0 ? then[i] : else[i]` over `shape`.
///
/// All offsets were validated against the buffers by the caller; an offset out of range would be
/// a bug in that validation and panics on the slice index rather than touching memory.
pub(crate) fn run<T: Clone>(
    shape: &[usize],
    cond: (&[u8], &[isize]),
    then: Src<'_, T>,
    else_: Src<'_, T>,
    out: (&mut [T], &[isize]),
) {
    if shape.contains(&0) {
        return;
    }
    let (out_buf, out_st) = out;
    let rank = shape.len();
    let mut idx = vec![0usize; rank];
    loop {
        let off = |st: &[isize]| -> usize {
            idx.iter()
                .zip(st)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>() as usize
        };
        let o = off(out_st);
        let pick = if cond.0[off(cond.1)] != 0 {
            &then
        } else {
            &else_
        };
        let v = match pick {
            Src::Buf(b, st) => b[off(st)].clone(),
            Src::Out => out_buf[o].clone(),
        };
        out_buf[o] = v;
        // Odometer increment, last dimension fastest.
        let mut k = rank;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onnx_example() {
        let cond = [1u8, 0, 1, 1];
        let x = [1i64, 2, 3, 4];
        let y = [9i64, 8, 7, 6];
        let mut out = [0i64; 4];
        let st = [2isize, 1];
        run(
            &[2, 2],
            (&cond, &st),
            Src::Buf(&x, &st),
            Src::Buf(&y, &st),
            (&mut out, &st),
        );
        assert_eq!(out, [1, 8, 3, 4]);
    }

    #[test]
    fn scalar_and_nonzero_bytes() {
        let cond = [0x80u8];
        let mut out = [String::new()];
        run(
            &[],
            (&cond, &[]),
            Src::Buf(&["a".to_string()], &[]),
            Src::Buf(&["b".to_string()], &[]),
            (&mut out, &[]),
        );
        assert_eq!(out[0], "a");
    }
}

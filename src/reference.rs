//! The reference interpreter: walks the output coordinates one at a time in row-major order and
//! computes each operand's element index from its offset and its (signed) strides over the
//! output.
//!
//! It is deliberately simple and independent of the loop-collapsing planner (`plan.rs`), because
//! it is the oracle every fast path is tested against. It also serves any `Clone` element type
//! (strings), for which there is no machine-code path.

/// An operand's buffer, its strides over the output's dimensions (signed), and the index of the
/// element at output coordinate `[0, 0, ...]`.
pub(crate) type View<'a, T> = (&'a [T], &'a [isize], usize);

/// A source operand: its buffer with strides and offset, or the output itself (in-place
/// operation, where the source has exactly the output's layout).
pub(crate) enum Src<'a, T> {
    Buf(View<'a, T>),
    Out,
}

/// The index of the element at output coordinate `idx` of an operand with strides `st` over
/// the output, whose element at coordinate `[0, 0, ...]` is `first`.
pub(crate) fn index(idx: &[usize], st: &[isize], first: usize) -> usize {
    let rel: isize = idx.iter().zip(st).map(|(&i, &s)| i as isize * s).sum();
    (first as isize + rel) as usize
}

/// The condition of a mask: any non-zero byte is true.
pub(crate) fn mask<'a, T>(cond: View<'a, u8>) -> impl Fn(&[usize], &[T]) -> bool + 'a {
    move |idx, _| cond.0[index(idx, cond.1, cond.2)] != 0
}

/// `out[i] = cond(i) ? then[i] : else[i]` over `shape`, where `cond` decides an output
/// coordinate from the operands and the output as it is before that element is written (a
/// predicate whose operand is the in-place output reads it there).
///
/// All offsets were validated against the buffers by the caller; an offset out of range would be
/// a bug in that validation and panics on the slice index rather than touching memory.
pub(crate) fn run<T: Clone>(
    shape: &[usize],
    cond: impl Fn(&[usize], &[T]) -> bool,
    then: Src<'_, T>,
    else_: Src<'_, T>,
    out: (&mut [T], &[isize], usize),
) {
    if shape.contains(&0) {
        return;
    }
    let (out_buf, out_st, out_off) = out;
    let rank = shape.len();
    let mut idx = vec![0usize; rank];
    loop {
        let o = index(&idx, out_st, out_off);
        let pick = if cond(&idx, out_buf) { &then } else { &else_ };
        let v = match pick {
            Src::Buf((b, st, first)) => b[index(&idx, st, *first)].clone(),
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
            mask((&cond, &st, 0)),
            Src::Buf((&x, &st, 0)),
            Src::Buf((&y, &st, 0)),
            (&mut out, &st, 0),
        );
        assert_eq!(out, [1, 8, 3, 4]);
    }

    #[test]
    fn negative_strides_and_offsets() {
        // then reversed (x[::-1]), else columns reversed, out rows reversed.
        let cond = [1u8, 0, 1, 1];
        let x = [4i64, 3, 2, 1];
        let y = [8i64, 9, 6, 7];
        let mut out = [0i64; 4];
        run(
            &[2, 2],
            mask((&cond, &[2, 1], 0)),
            Src::Buf((&x, &[-2, -1], 3)),
            Src::Buf((&y, &[2, -1], 1)),
            (&mut out, &[-2, 1], 2),
        );
        // Logical result [[1, 8], [3, 4]], stored with the rows swapped.
        assert_eq!(out, [3, 4, 1, 8]);
    }

    #[test]
    fn scalar_and_nonzero_bytes() {
        let cond = [0x80u8];
        let mut out = [String::new()];
        run(
            &[],
            mask((&cond, &[], 0)),
            Src::Buf((&["a".to_string()], &[], 0)),
            Src::Buf((&["b".to_string()], &[], 0)),
            (&mut out, &[], 0),
        );
        assert_eq!(out[0], "a");
    }
}

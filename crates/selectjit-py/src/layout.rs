//! Array layouts in pure Rust: the byte range a numpy view addresses, its element strides and
//! first-element offset as the library takes them, and the memory order numpy's `where` gives
//! its output.

use smallvec::{SmallVec, smallvec};

/// Per-dimension values, inline up to 8 dimensions.
pub type Dims<T> = SmallVec<[T; 8]>;

/// Where a strided view lives in memory, in bytes relative to its data pointer: the lowest and
/// one past the highest byte any of its elements occupies. `None` for a view with a zero
/// dimension (it addresses nothing).
pub fn byte_range(shape: &[usize], strides: &[isize], itemsize: usize) -> Option<(isize, isize)> {
    if shape.contains(&0) {
        return None;
    }
    let (mut lo, mut hi) = (0isize, 0isize);
    for (&d, &s) in shape.iter().zip(strides) {
        let span = (d as isize - 1).checked_mul(s)?;
        if span < 0 {
            lo = lo.checked_add(span)?;
        } else {
            hi = hi.checked_add(span)?;
        }
    }
    Some((lo, hi.checked_add(itemsize as isize)?))
}

/// A view as the library takes it: element strides (0 on dimensions of size 1, where the
/// stride is never used) and the index of the first element in a buffer that starts at the
/// lowest addressed element and holds `len` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElemView {
    /// Byte offset from the array's data pointer to the start of the buffer (`<= 0`).
    pub start: isize,
    /// Buffer length in bytes (0 for a view that addresses nothing).
    pub len: usize,
    /// Strides in elements.
    pub strides: Dims<isize>,
    /// Whether the view is row-major contiguous from the start of the buffer (the library then
    /// takes it without strides, on its fast path for same-shape contiguous calls).
    pub contiguous: bool,
    /// Index of the element at coordinate `[0, 0, ...]` in the buffer, in elements.
    pub offset: usize,
}

/// The library's view of a numpy view with byte `strides` and elements of `itemsize` bytes, or
/// `None` when a byte stride (of a dimension longer than 1) is not a multiple of the itemsize or
/// the extent overflows: such a view has to be copied first.
pub fn elem_view(shape: &[usize], strides: &[isize], itemsize: usize) -> Option<ElemView> {
    let w = itemsize as isize;
    if w == 0 {
        return None;
    }
    let mut es = Dims::with_capacity(shape.len());
    for (&d, &s) in shape.iter().zip(strides) {
        if d <= 1 {
            es.push(0);
        } else if s % w != 0 {
            return None;
        } else {
            es.push(s / w);
        }
    }
    let Some((lo, hi)) = byte_range(shape, strides, itemsize) else {
        // Nothing addressed (a zero dimension), or an extent that overflows.
        return shape.contains(&0).then(|| ElemView {
            start: 0,
            len: 0,
            strides: smallvec![0; shape.len()],
            contiguous: false,
            offset: 0,
        });
    };
    // Row-major contiguous: each stride (of a dimension longer than 1) is the product of the
    // later dimensions.
    let mut expect = 1isize;
    let mut contiguous = true;
    for (&d, &s) in shape.iter().zip(es.iter()).rev() {
        if d > 1 && s != expect {
            contiguous = false;
            break;
        }
        expect = expect.wrapping_mul(d as isize);
    }
    Some(ElemView {
        start: lo,
        len: (hi - lo) as usize,
        strides: es,
        contiguous,
        offset: (-lo / w) as usize,
    })
}

/// numpy's broadcast of three shapes (right-aligned, each dimension equal or 1): the output
/// shape, or `None` when they do not broadcast.
pub fn numpy_broadcast(shapes: [&[usize]; 3]) -> Option<Dims<usize>> {
    let nd = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out: Dims<usize> = smallvec![1; nd];
    for s in shapes {
        for (j, &d) in s.iter().enumerate() {
            let o = &mut out[nd - s.len() + j];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

/// The view of a row-major contiguous array (numpy's C-contiguous flag) of `shape`, or `None`
/// when it addresses nothing or its size overflows.
pub fn contiguous_view(shape: &[usize], itemsize: usize) -> Option<ElemView> {
    let mut n = itemsize;
    for &d in shape {
        n = n.checked_mul(d)?;
    }
    (n != 0 && n <= isize::MAX as usize).then(|| ElemView {
        start: 0,
        len: n,
        strides: Dims::new(),
        contiguous: true,
        offset: 0,
    })
}

/// Element strides of `view` over `shape`: its own, or those of row-major order for a
/// [`contiguous_view`] (which has none); 0 on dimensions of size 1 either way.
fn elem_strides(shape: &[usize], view: &ElemView) -> Dims<isize> {
    if view.strides.len() == shape.len() {
        return view.strides.clone();
    }
    let mut st: Dims<isize> = smallvec![0isize; shape.len()];
    let mut step = 1isize;
    for (k, &d) in shape.iter().enumerate().rev() {
        if d > 1 {
            st[k] = step;
        }
        step = step.wrapping_mul(d as isize);
    }
    st
}

/// Whether two views of `shape` with elements of one size, over buffers of the same start
/// and length, address each element at the same place: the same first-element offset and the
/// same element strides, whichever of [`elem_view`] or [`contiguous_view`] made them.
pub fn same_elements(shape: &[usize], a: &ElemView, b: &ElemView) -> bool {
    a.len == b.len
        && a.len != 0
        && a.offset == b.offset
        && elem_strides(shape, a) == elem_strides(shape, b)
}

/// Whether two byte ranges `[a0, a1)` and `[b0, b1)` (absolute addresses) intersect.
pub fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Strides of an input over the output: per output dimension, the input's byte stride where
/// the input has that dimension with more than one element, else 0 (as numpy's iterator sees a
/// broadcast operand). `start` is the output dimension the input's dimension 0 lands on and
/// `len` how many of its dimensions land (the rest are size-1 dimensions dropped by the mode).
pub fn strides_over_output(
    out_shape: &[usize],
    shape: &[usize],
    strides: &[isize],
    start: usize,
    len: usize,
) -> Dims<isize> {
    let mut st: Dims<isize> = smallvec![0isize; out_shape.len()];
    for j in 0..len.min(shape.len()) {
        let k = start + j;
        if k < out_shape.len() && out_shape[k] != 1 && shape[j] != 1 {
            st[k] = strides[j];
        }
    }
    st
}

/// The byte strides of the array numpy's `where` allocates for its result: numpy's iterator in
/// `K` order sorts the axes by the operands' strides (a stable insertion sort from the fastest
/// axis, where any operand that keeps C order between two axes wins over those that would swap
/// them, and zero strides say nothing), then lays the output out contiguously in that order with
/// positive strides. `ops` are the inputs' strides over the output (see
/// [`strides_over_output`]).
pub fn numpy_out_strides(out_shape: &[usize], ops: &[&[isize]], itemsize: usize) -> Dims<isize> {
    let nd = out_shape.len();
    // Axis-data index `a` is output dimension `nd - 1 - a` (numpy reverses C order).
    let stride_of = |a: usize, op: &[isize]| op[nd - 1 - a];
    let mut perm: Dims<usize> = (0..nd).collect();
    for i0 in 1..nd {
        let j0 = perm[i0];
        let mut ipos = i0;
        for i1 in (0..i0).rev() {
            let j1 = perm[i1];
            let (mut ambig, mut swap) = (true, false);
            for op in ops {
                let (s0, s1) = (stride_of(j0, op), stride_of(j1, op));
                if s0 != 0 && s1 != 0 {
                    if s1.unsigned_abs() <= s0.unsigned_abs() {
                        swap = false;
                    } else if ambig {
                        swap = true;
                    }
                    ambig = false;
                }
            }
            if !ambig {
                if swap {
                    ipos = i1;
                } else {
                    break;
                }
            }
        }
        if ipos != i0 {
            perm.copy_within(ipos..i0, ipos + 1);
            perm[ipos] = j0;
        }
    }
    let mut out: Dims<isize> = smallvec![0isize; nd];
    let mut stride = itemsize as isize;
    for &a in &perm {
        let k = nd - 1 - a;
        out[k] = stride;
        stride = stride.wrapping_mul(out_shape[k] as isize);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_views() {
        // x[::-1] of 5 f32: stride -4 from the last element.
        assert_eq!(byte_range(&[5], &[-4], 4), Some((-16, 4)));
        let v = elem_view(&[5], &[-4], 4).unwrap();
        assert_eq!(
            (v.start, v.len, &v.strides[..], v.offset),
            (-16, 20, &[-1][..], 4)
        );
        assert!(!v.contiguous);
        // Rows reversed, columns every other one: [2, 3] out of a [2, 6] f64 buffer.
        let v = elem_view(&[2, 3], &[-48, 16], 8).unwrap();
        assert_eq!(
            (v.start, v.len, &v.strides[..], v.offset),
            (-48, 88, &[-6, 2][..], 6)
        );
        // Contiguous whatever the strides of size-1 dims; the fast constructor agrees.
        assert!(elem_view(&[2, 1, 3], &[12, 99, 4], 4).unwrap().contiguous);
        assert_eq!(contiguous_view(&[2, 1, 3], 4).map(|v| v.len), Some(24));
        assert!(contiguous_view(&[2, 0], 4).is_none());
        // A stride that is not a multiple of the itemsize needs a copy; size-1 dims do not care.
        assert!(elem_view(&[3], &[6], 4).is_none());
        assert_eq!(
            &elem_view(&[1, 3], &[6, 4], 4).unwrap().strides[..],
            &[0, 1]
        );
        // Empty views address nothing.
        let v = elem_view(&[0, 3], &[-12, 4], 4).unwrap();
        assert_eq!((v.len, v.offset), (0, 0));
        assert!(overlaps((0, 10), (9, 12)) && !overlaps((0, 10), (10, 12)));
    }

    #[test]
    fn same_elements_whichever_constructor() {
        let shape = [2, 1, 3];
        let c = contiguous_view(&shape, 4).unwrap();
        let e = elem_view(&shape, &[12, 99, 4], 4).unwrap();
        assert!(same_elements(&shape, &c, &e) && same_elements(&shape, &e, &c));
        // The transpose's layout over the same bytes: other strides.
        let t = elem_view(&shape, &[4, 99, 8], 4).unwrap();
        assert_eq!((t.start, t.len, t.offset), (e.start, e.len, e.offset));
        assert!(!same_elements(&shape, &c, &t));
        // Reversed over the same bytes: another first element.
        let r = elem_view(&[6], &[-4], 4).unwrap();
        let f = contiguous_view(&[6], 4).unwrap();
        assert_eq!(r.len, f.len);
        assert!(!same_elements(&[6], &f, &r));
        assert!(same_elements(&[6], &r, &elem_view(&[6], &[-4], 4).unwrap()));
        // Views of nothing are never the same elements.
        let z = elem_view(&[0, 3], &[12, 4], 4).unwrap();
        assert!(!same_elements(&[0, 3], &z, &z));
    }

    #[test]
    fn broadcast_like_numpy() {
        let b = |a: &[usize], b: &[usize], c: &[usize]| numpy_broadcast([a, b, c]);
        assert_eq!(&b(&[3], &[2, 3], &[]).unwrap()[..], &[2, 3]);
        assert_eq!(&b(&[2, 1], &[1, 3], &[3]).unwrap()[..], &[2, 3]);
        assert_eq!(&b(&[0], &[1], &[4, 1]).unwrap()[..], &[4, 0]);
        assert!(b(&[3], &[2, 3], &[4]).is_none());
        assert!(b(&[], &[], &[]).unwrap().is_empty());
    }

    #[test]
    fn output_order_follows_numpy() {
        // All C-contiguous: C order.
        let c: [isize; 2] = [24, 8];
        assert_eq!(&numpy_out_strides(&[2, 3], &[&c], 8)[..], &[24, 8]);
        // All Fortran: Fortran order.
        let f: [isize; 2] = [8, 16];
        assert_eq!(&numpy_out_strides(&[2, 3], &[&f, &f], 8)[..], &[8, 16]);
        // C and F disagree: C wins.
        assert_eq!(&numpy_out_strides(&[2, 3], &[&f, &c], 8)[..], &[24, 8]);
        // Reversed C: positive C strides.
        let r: [isize; 2] = [-24, -8];
        assert_eq!(&numpy_out_strides(&[2, 3], &[&r], 4)[..], &[12, 4]);
        // Broadcast operands say nothing; a zero-size dim zeroes the strides after it.
        let z: [isize; 2] = [0, 0];
        assert_eq!(&numpy_out_strides(&[3, 0], &[&z], 8)[..], &[0, 8]);
        assert!(numpy_out_strides(&[], &[], 8).is_empty());
    }
}

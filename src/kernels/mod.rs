//! Static ahead-of-time kernels.

use crate::plan::{COND, ELSE, OUT, Signature, THEN};

/// Raw operand base pointers (validated by the engine before any kernel runs).
#[derive(Clone, Copy, Debug)]
pub struct Ptrs {
    pub cond: *const u8,
    pub then: *const u8,
    pub else_: *const u8,
    pub out: *mut u8,
}

/// Runs `sig` over outer indices `begin..end` of `sig.dims[0]`, one element at a time.
///
/// # Safety
/// Every element addressed by `sig` from each base pointer for outer indices in `begin..end` lies
/// inside its buffer; `out` overlaps no input except exactly (in place); `end <= sig.dims[0]`.
pub unsafe fn run(sig: &Signature, p: Ptrs, begin: usize, end: usize) {
    let w = sig.width;
    let rank = sig.rank();
    let mut idx = vec![0usize; rank];
    for i0 in begin..end {
        idx.iter_mut().for_each(|v| *v = 0);
        idx[0] = i0;
        loop {
            let off = |op: usize| -> isize {
                let s = &sig.strides[op];
                idx.iter()
                    .zip(s)
                    .map(|(&i, &st)| i as isize * st)
                    .sum::<isize>()
            };
            // SAFETY: the offsets address elements inside the buffers by the caller's contract.
            unsafe {
                let c = *p.cond.offset(off(COND));
                let src = if c != 0 {
                    p.then.offset(off(THEN) * w as isize)
                } else {
                    p.else_.offset(off(ELSE) * w as isize)
                };
                std::ptr::copy(src, p.out.offset(off(OUT) * w as isize), w);
            }
            let mut k = rank;
            loop {
                if k == 1 {
                    break;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < sig.dims[k] {
                    break;
                }
                idx[k] = 0;
            }
            if k == 1 && (rank == 1 || idx[1] == 0) {
                break;
            }
        }
    }
}

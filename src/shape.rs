//! Broadcast rules for the four modes of docs/semantics.md ("Broadcast modes"), as pure
//! functions.
//!
//! [`infer`] returns the output shape and, for each input, where its dimensions land in the
//! output ([`Placement`]); [`strides_over`] turns an input's own strides into strides over the
//! output's dimensions (0 where the input is broadcast). [`broadcast_shapes`],
//! [`output_shape`], [`contiguous_strides`] and [`Placement::strides_over`] are their public
//! forms, with standard types.

use smallvec::SmallVec;

use crate::error::{Error, Result, ShapeFmt};

/// A shape: inline up to rank 8, so the common call path does not allocate.
pub(crate) type Dims = SmallVec<[usize; 8]>;
/// Strides in elements, one per dimension.
pub(crate) type Strides = SmallVec<[isize; 8]>;

/// The largest rank accepted (numpy's limit).
pub const MAX_RANK: usize = 64;

/// How `cond`, `then` and `else` are broadcast to the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Broadcast {
    /// Full multidirectional numpy broadcast of all three inputs (ONNX Where; the default).
    #[default]
    Numpy,
    /// `then` and `else` broadcast to each other, then `cond` one way into the result
    /// (the OpenVINO Select-1 / oneDNN Graph Select documents).
    TwoStep,
    /// All three shapes must be identical (no broadcasting). Its name is `"none"`
    /// ([`Broadcast::name`]), as on the command line, in the C ABI and in Python.
    Exact,
    /// PaddlePaddle style: the output is `then`'s shape; `else` and `cond` go one way into it,
    /// starting at dimension `axis` (-1: right-aligned).
    Pdpd {
        /// First output dimension an input lands on; -1 means right alignment.
        axis: i64,
    },
}

impl Broadcast {
    /// The mode's name as used on the command line and in messages.
    ///
    /// ```
    /// use selectjit::Broadcast;
    /// assert_eq!(Broadcast::Numpy.name(), "numpy");
    /// assert_eq!(Broadcast::TwoStep.name(), "two-step");
    /// assert_eq!(Broadcast::Exact.name(), "none"); // no broadcasting
    /// assert_eq!(Broadcast::Pdpd { axis: -1 }.name(), "pdpd");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Broadcast::Numpy => "numpy",
            Broadcast::TwoStep => "two-step",
            Broadcast::Exact => "none",
            Broadcast::Pdpd { .. } => "pdpd",
        }
    }
}

/// Where an input's dimensions land in the output: input dim `j < len` is output dim `start + j`.
/// Input dims at `len..` (trailing 1s dropped by the pdpd rule) map to no output dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The output dimension that input dimension 0 lands on.
    pub start: usize,
    /// How many of the input's dimensions land on output dimensions.
    pub len: usize,
}

impl Placement {
    /// The strides over the output's dimensions of an input of `shape` and `strides` (in
    /// elements) placed here in an output of shape `out`: its own stride where its dimension
    /// lands on an output dimension of the same size, 0 where it is broadcast (its size is 1)
    /// or absent. What a kernel reads each operand with.
    ///
    /// ```
    /// # fn main() -> selectjit::Result<()> {
    /// use selectjit::{Broadcast, broadcast_shapes, contiguous_strides};
    /// // cond [3, 1] against then [4]: the output is [3, 4], cond walks down the rows only.
    /// let b = broadcast_shapes(Broadcast::Numpy, &[3, 1], &[4], &[])?;
    /// let cond = b.cond.strides_over(&[3, 1], &contiguous_strides(&[3, 1]), &b.out);
    /// assert_eq!(cond, [1, 0]);
    /// let then = b.then.strides_over(&[4], &[1], &b.out);
    /// assert_eq!(then, [0, 1]);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Panics
    /// If `shape` or `strides` has fewer than `self.len` dimensions, or `out` fewer than
    /// `self.start + self.len`: a placement applies to the shapes it was inferred for.
    pub fn strides_over(self, shape: &[usize], strides: &[isize], out: &[usize]) -> Vec<isize> {
        strides_over(shape, strides, self, out).to_vec()
    }
}

/// The output shape and where each input lands in it ([`broadcast_shapes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BroadcastShape {
    /// The output shape.
    pub out: Vec<usize>,
    /// Where `cond`'s dimensions land.
    pub cond: Placement,
    /// Where `then`'s dimensions land.
    pub then: Placement,
    /// Where `else`'s dimensions land.
    pub else_: Placement,
}

/// [`BroadcastShape`] with the output shape inline (the engine's calls do not allocate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inferred {
    /// The output shape.
    pub(crate) out: Dims,
    /// Where `cond`'s dimensions land.
    pub(crate) cond: Placement,
    /// Where `then`'s dimensions land.
    pub(crate) then: Placement,
    /// Where `else`'s dimensions land.
    pub(crate) else_: Placement,
}

/// Names of the three inputs, in argument order.
const NAMES: [&str; 3] = ["cond", "then", "else"];

struct Ctx<'a> {
    mode: Broadcast,
    shapes: [&'a [usize]; 3],
}

impl Ctx<'_> {
    fn err(&self, detail: String) -> Error {
        let axis = match self.mode {
            Broadcast::Pdpd { axis } => format!(" (axis {axis})"),
            _ => String::new(),
        };
        Error::Broadcast(format!(
            "{}{} broadcast of cond {}, then {}, else {}: {}",
            self.mode.name(),
            axis,
            ShapeFmt(self.shapes[0]),
            ShapeFmt(self.shapes[1]),
            ShapeFmt(self.shapes[2]),
            detail
        ))
    }

    /// Numpy rule over the inputs with the given indices, right-aligned.
    fn numpy(&self, which: &[usize]) -> Result<Dims> {
        let rank = which
            .iter()
            .map(|&i| self.shapes[i].len())
            .max()
            .unwrap_or(0);
        let mut out: Dims = SmallVec::from_elem(1, rank);
        // For each output dim, the input that set it (to report the pair that disagrees).
        let mut setter: SmallVec<[Option<usize>; 8]> = SmallVec::from_elem(None, rank);
        for &i in which {
            let s = self.shapes[i];
            let off = rank - s.len();
            for (j, &d) in s.iter().enumerate() {
                let k = off + j;
                if d == 1 {
                    continue;
                }
                match setter[k] {
                    None => {
                        out[k] = d;
                        setter[k] = Some(i);
                    }
                    Some(_) if out[k] == d => {}
                    Some(p) => {
                        let pj = k - (rank - self.shapes[p].len());
                        return Err(self.err(format!(
                            "{} dim {pj} is {} but {} dim {j} is {d} (output dim {k})",
                            NAMES[p], out[k], NAMES[i]
                        )));
                    }
                }
            }
        }
        Ok(out)
    }

    /// One-way broadcast of input `i` into `out`, right-aligned (two-step step 2).
    fn one_way_right(&self, i: usize, out: &[usize]) -> Result<Placement> {
        let s = self.shapes[i];
        if s.len() > out.len() {
            return Err(self.err(format!(
                "{} {} cannot be broadcast into output {} ({} has rank {}, output rank {})",
                NAMES[i],
                ShapeFmt(s),
                ShapeFmt(out),
                NAMES[i],
                s.len(),
                out.len()
            )));
        }
        let start = out.len() - s.len();
        self.check_into(i, s, out, start)?;
        Ok(Placement {
            start,
            len: s.len(),
        })
    }

    /// Checks that `s[j]` equals `out[start + j]` or is 1, for every `j < s.len()`.
    fn check_into(&self, i: usize, s: &[usize], out: &[usize], start: usize) -> Result<()> {
        for (j, &d) in s.iter().enumerate() {
            let k = start + j;
            if d != 1 && d != out[k] {
                return Err(self.err(format!(
                    "{} {} cannot be broadcast into output {} ({} dim {j} is {d}, output dim {k} is {})",
                    NAMES[i],
                    ShapeFmt(self.shapes[i]),
                    ShapeFmt(out),
                    NAMES[i],
                    out[k]
                )));
            }
        }
        Ok(())
    }

    /// The pdpd rule for input `i` into `out` with `axis`.
    fn pdpd_into(&self, i: usize, out: &[usize], axis: i64) -> Result<Placement> {
        let s = self.shapes[i];
        let (rs, rd) = (s.len(), out.len());
        if rs > rd {
            return Err(self.err(format!(
                "{} {} cannot be broadcast into output {} ({} has rank {rs}, output rank {rd})",
                NAMES[i],
                ShapeFmt(s),
                ShapeFmt(out),
                NAMES[i]
            )));
        }
        if rs == rd {
            self.check_into(i, s, out, 0)?;
            return Ok(Placement { start: 0, len: rs });
        }
        let start = if axis == -1 {
            rd - rs
        } else {
            // axis >= 0 was checked by the caller.
            usize::try_from(axis).unwrap_or(usize::MAX)
        };
        let mut len = rs;
        while len > 0 && s[len - 1] == 1 {
            len -= 1;
        }
        if len == 0 {
            return Ok(Placement { start: 0, len: 0 });
        }
        if start.checked_add(len).is_none_or(|e| e > rd) {
            return Err(self.err(format!(
                "{} {} does not fit into output {} at axis {start} ({len} dims after dropping trailing 1s)",
                NAMES[i],
                ShapeFmt(s),
                ShapeFmt(out)
            )));
        }
        self.check_into(i, &s[..len], out, start)?;
        Ok(Placement { start, len })
    }
}

/// Checks rank and element-count limits of one shape.
pub(crate) fn check_shape(what: &'static str, shape: &[usize]) -> Result<()> {
    if shape.len() > MAX_RANK {
        return Err(Error::RankTooLarge {
            what,
            rank: shape.len(),
            max: MAX_RANK,
        });
    }
    // The product of max(d, 1) must fit in isize, so that contiguous strides and offsets never
    // overflow, even for shapes with a zero dimension.
    let mut n: usize = 1;
    for &d in shape {
        n = n
            .checked_mul(d.max(1))
            .filter(|&v| v <= isize::MAX as usize)
            .ok_or_else(|| Error::Overflow {
                what,
                shape: ShapeFmt(shape).to_string(),
            })?;
    }
    Ok(())
}

/// Number of elements of a shape (whose rank and size limits the caller has checked, e.g. by
/// [`infer`]).
pub(crate) fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The output shape and each input's placement under `mode`, the output shape inline.
pub(crate) fn infer(
    mode: Broadcast,
    cond: &[usize],
    then: &[usize],
    else_: &[usize],
) -> Result<Inferred> {
    check_shape("cond", cond)?;
    check_shape("then", then)?;
    check_shape("else", else_)?;
    let cx = Ctx {
        mode,
        shapes: [cond, then, else_],
    };
    let right = |s: &[usize], out: &[usize]| Placement {
        start: out.len() - s.len(),
        len: s.len(),
    };
    let r = match mode {
        Broadcast::Numpy => {
            let out = cx.numpy(&[0, 1, 2])?;
            Inferred {
                cond: right(cond, &out),
                then: right(then, &out),
                else_: right(else_, &out),
                out,
            }
        }
        Broadcast::TwoStep => {
            // Step 1 fixes the output; step 2 puts cond into it one way (it never grows it).
            let out = cx.numpy(&[1, 2])?;
            let c = cx.one_way_right(0, &out)?;
            Inferred {
                cond: c,
                then: right(then, &out),
                else_: right(else_, &out),
                out,
            }
        }
        Broadcast::Exact => {
            for (i, s) in [(0, cond), (2, else_)] {
                if s != then {
                    return Err(cx.err(format!(
                        "shapes must be identical ({} {} differs from then {})",
                        NAMES[i],
                        ShapeFmt(s),
                        ShapeFmt(then)
                    )));
                }
            }
            let p = Placement {
                start: 0,
                len: then.len(),
            };
            Inferred {
                out: then.into(),
                cond: p,
                then: p,
                else_: p,
            }
        }
        Broadcast::Pdpd { axis } => {
            if axis < -1 {
                return Err(cx.err(format!(
                    "axis {axis} is invalid (only -1 or a non-negative axis is allowed)"
                )));
            }
            let out: Dims = then.into();
            let e = cx.pdpd_into(2, &out, axis)?;
            let c = cx.pdpd_into(0, &out, axis)?;
            Inferred {
                then: Placement {
                    start: 0,
                    len: then.len(),
                },
                else_: e,
                cond: c,
                out,
            }
        }
    };
    check_shape("output", &r.out)?;
    Ok(r)
}

/// The numpy broadcast of two shapes (a predicate's operands, named `names` in messages).
pub(crate) fn broadcast_pair(names: [&'static str; 2], a: &[usize], b: &[usize]) -> Result<Dims> {
    check_shape(names[0], a)?;
    check_shape(names[1], b)?;
    let rank = a.len().max(b.len());
    let mut out: Dims = SmallVec::from_elem(1, rank);
    for k in 0..rank {
        let dim = |s: &[usize]| (k + s.len()).checked_sub(rank).map(|j| (j, s[j]));
        match (dim(a), dim(b)) {
            (Some((_, x)), None) | (None, Some((_, x))) => out[k] = x,
            (Some((_, x)), Some((_, y))) if x == y || y == 1 => out[k] = x,
            (Some((_, 1)), Some((_, y))) => out[k] = y,
            (Some((i, x)), Some((j, y))) => {
                return Err(Error::Broadcast(format!(
                    "predicate broadcast of {} {} and {} {}: {} dim {i} is {x} but {} dim {j} \
                     is {y} (predicate dim {k})",
                    names[0],
                    ShapeFmt(a),
                    names[1],
                    ShapeFmt(b),
                    names[0],
                    names[1]
                )));
            }
            (None, None) => unreachable!("k < rank"),
        }
    }
    check_shape("predicate", &out)?;
    Ok(out)
}

/// The output shape of `cond`, `then` and `else` under `mode`, and where each input's
/// dimensions land in it.
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::{Broadcast, broadcast_shapes};
/// // two-step: then [2, 3] and else [3] broadcast to [2, 3], then cond [2, 1] into it.
/// let b = broadcast_shapes(Broadcast::TwoStep, &[2, 1], &[2, 3], &[3])?;
/// assert_eq!(&b.out[..], &[2, 3]);
/// // cond may not grow the output there, as it may under numpy.
/// assert!(broadcast_shapes(Broadcast::TwoStep, &[4, 2, 3], &[2, 3], &[3]).is_err());
/// assert_eq!(
///     &broadcast_shapes(Broadcast::Numpy, &[4, 2, 3], &[2, 3], &[3])?.out[..],
///     &[4, 2, 3]
/// );
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// Shapes the mode refuses, a rank above [`MAX_RANK`], or a shape whose element count
/// overflows: [`Error::Broadcast`], [`Error::RankTooLarge`], [`Error::Overflow`].
pub fn broadcast_shapes(
    mode: Broadcast,
    cond: &[usize],
    then: &[usize],
    else_: &[usize],
) -> Result<BroadcastShape> {
    let r = infer(mode, cond, then, else_)?;
    Ok(BroadcastShape {
        out: r.out.to_vec(),
        cond: r.cond,
        then: r.then,
        else_: r.else_,
    })
}

/// The output shape only.
///
/// ```
/// # fn main() -> selectjit::Result<()> {
/// use selectjit::{Broadcast, output_shape};
/// // numpy: cond [3, 1], then [4], else a scalar broadcast to [3, 4].
/// let out = output_shape(Broadcast::Numpy, &[3, 1], &[4], &[])?;
/// assert_eq!(&out[..], &[3, 4]);
/// // Mode `Exact` ("none") wants three identical shapes.
/// assert!(output_shape(Broadcast::Exact, &[3, 1], &[4], &[]).is_err());
/// # Ok(())
/// # }
/// ```
pub fn output_shape(
    mode: Broadcast,
    cond: &[usize],
    then: &[usize],
    else_: &[usize],
) -> Result<Vec<usize>> {
    infer(mode, cond, then, else_).map(|b| b.out.to_vec())
}

/// Row-major contiguous strides (in elements) for `shape`: what a view of `shape` without
/// strides of its own walks with.
///
/// ```
/// assert_eq!(selectjit::contiguous_strides(&[2, 3, 4]), [12, 4, 1]);
/// assert_eq!(selectjit::contiguous_strides(&[]), [0isize; 0]);
/// ```
pub fn contiguous_strides(shape: &[usize]) -> Vec<isize> {
    dense_strides(shape).to_vec()
}

/// [`contiguous_strides`], inline (whose size limits the caller has checked, e.g. by
/// [`infer`]).
pub(crate) fn dense_strides(shape: &[usize]) -> Strides {
    let mut st: Strides = SmallVec::from_elem(0, shape.len());
    let mut acc: isize = 1;
    for k in (0..shape.len()).rev() {
        st[k] = acc;
        acc = acc.wrapping_mul(shape[k].max(1) as isize);
    }
    st
}

/// An input's strides over the output's dimensions: its own stride where its dimension lands on an
/// output dimension of the same size, 0 where it is broadcast (its size is 1) or absent.
pub(crate) fn strides_over(
    shape: &[usize],
    strides: &[isize],
    p: Placement,
    out: &[usize],
) -> Strides {
    let mut st: Strides = SmallVec::from_elem(0, out.len());
    for j in 0..p.len {
        if shape[j] != 1 {
            st[p.start + j] = strides[j];
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(mode: Broadcast, c: &[usize], t: &[usize], e: &[usize]) -> Result<Vec<usize>> {
        output_shape(mode, c, t, e).map(|d| d.to_vec())
    }

    #[test]
    fn numpy_merges_all_three() {
        assert_eq!(
            out(Broadcast::Numpy, &[2, 3], &[3], &[3]).unwrap(),
            vec![2, 3]
        );
        assert_eq!(
            out(Broadcast::Numpy, &[4, 1, 1024], &[1024], &[4, 256, 1]).unwrap(),
            vec![4, 256, 1024]
        );
        assert_eq!(
            out(Broadcast::Numpy, &[], &[], &[]).unwrap(),
            Vec::<usize>::new()
        );
        assert_eq!(
            out(Broadcast::Numpy, &[0, 3], &[1, 3], &[0, 3]).unwrap(),
            vec![0, 3]
        );
        assert!(out(Broadcast::Numpy, &[0, 3], &[2, 3], &[0, 3]).is_err());
    }

    #[test]
    fn two_step_error_names_everything() {
        let e = out(Broadcast::TwoStep, &[3, 5], &[2, 3, 4, 5], &[2, 3, 4, 5]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "two-step broadcast of cond [3,5], then [2,3,4,5], else [2,3,4,5]: cond [3,5] cannot be \
             broadcast into output [2,3,4,5] (cond dim 0 is 3, output dim 2 is 4)"
        );
    }

    #[test]
    fn two_step_cond_goes_in_one_way() {
        let t = Broadcast::TwoStep;
        // cond may not grow a then/else dimension of 1, nor add one.
        for (c, th, e) in [
            (&[2usize, 1][..], &[1usize, 3][..], &[3usize][..]),
            (&[17], &[1], &[]),
            (&[17, 1, 3], &[1, 1, 1], &[]),
            (&[0, 16, 1], &[1, 1, 1], &[1, 1, 1]),
        ] {
            let err = out(t, c, th, e).unwrap_err().to_string();
            assert!(err.starts_with("two-step broadcast of cond"), "{err}");
            assert!(err.contains("cannot be broadcast into output"), "{err}");
            assert!(out(Broadcast::Numpy, c, th, e).is_ok(), "{c:?}");
        }
        assert_eq!(
            out(t, &[2, 1], &[1, 3], &[3]).unwrap_err().to_string(),
            "two-step broadcast of cond [2,1], then [1,3], else [3]: cond [2,1] cannot be \
             broadcast into output [1,3] (cond dim 0 is 2, output dim 0 is 1)"
        );
        assert_eq!(out(t, &[1, 3], &[2, 3], &[3]).unwrap(), vec![2, 3]);
        assert_eq!(out(t, &[0, 3], &[0, 3], &[3]).unwrap(), vec![0, 3]);
        assert!(out(t, &[2, 3], &[3], &[3]).is_err());
        assert!(out(t, &[3, 5], &[2, 3, 4, 5], &[2, 3, 4, 5]).is_err());
        assert_eq!(
            out(t, &[3, 1, 5], &[2, 3, 4, 5], &[2, 3, 4, 5]).unwrap(),
            vec![2, 3, 4, 5]
        );
    }

    #[test]
    fn pdpd_axis_rules() {
        let p = |a| Broadcast::Pdpd { axis: a };
        assert_eq!(out(p(1), &[3], &[2, 3, 4], &[3, 4]).unwrap(), vec![2, 3, 4]);
        assert!(out(p(-1), &[2, 3, 4, 5], &[2, 3, 4, 5], &[3, 4]).is_err());
        assert_eq!(
            out(p(-1), &[3, 1], &[2, 3, 4], &[2, 3, 4]).unwrap(),
            vec![2, 3, 4]
        );
        assert!(out(p(-2), &[], &[2], &[2]).is_err());
        assert!(out(p(2), &[3, 4], &[2, 3, 4], &[2, 3, 4]).is_err());
    }

    #[test]
    fn limits_are_errors() {
        let big = vec![1usize; MAX_RANK + 1];
        assert!(matches!(
            out(Broadcast::Numpy, &big, &[], &[]),
            Err(Error::RankTooLarge { .. })
        ));
        let huge = [usize::MAX / 2, 4];
        assert!(matches!(
            out(Broadcast::Numpy, &huge, &[], &[]),
            Err(Error::Overflow { .. })
        ));
    }

    #[test]
    fn strides_over_output() {
        let b =
            broadcast_shapes(Broadcast::Numpy, &[1, 128, 128], &[8, 12, 128, 128], &[]).unwrap();
        let st = strides_over(
            &[1, 128, 128],
            &contiguous_strides(&[1, 128, 128]),
            b.cond,
            &b.out,
        );
        assert_eq!(st.as_slice(), &[0, 0, 128, 1]);
    }
}

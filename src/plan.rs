//! Loop-nest canonicalisation: equal work gets equal keys. For tools that compile, export or
//! inspect kernels (the AOT exporter, `selectjit explain`); a runtime that only selects never
//! needs this module.
//!
//! From the output shape and the four operands' strides over it (cond, then, else, out; in
//! elements, signed) the planner
//!
//! 1. drops size-1 dimensions;
//! 2. **flips** every dimension along which the output's stride is negative, for all four
//!    operands at once (as numpy's iterator does): the stride changes sign and each operand's
//!    base moves to the element at the far end of that dimension ([`Plan::base`]). The output
//!    then walks memory forwards; an input may keep a negative stride (e.g. `then` reversed
//!    into a forward output), which the kernels handle like any other stride;
//! 3. orders the dimensions so that the output's smallest stride is innermost;
//! 4. merges adjacent dimensions that are contiguous for all four operands at once (numpy's
//!    nditer coalescing; broadcast strides of 0 merge too, and so do reversed runs: a reversed
//!    contiguous `[4, 5]` input is one dimension of 20 with stride -1).
//!
//! The result is a [`Signature`]: the element width, the collapsed dims and each operand's
//! strides. The element *width* is the key, not the dtype, so f32, i32 and u32 share one kernel.
//!
//! The signature also describes, once for every back end, how its loop nest runs: the outer
//! dims are plain loops that advance each operand by [`Signature::byte_stride`], and the
//! innermost dim, the *row*, has one [`RowShape`] ([`Signature::row_shape`]). A shape-generic
//! kernel serves every signature of one [`Pattern`].

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::pred::Kind;
pub use crate::pred::{Canon, Kind as CondKind, eval as eval_cond};
use crate::shape::{Dims, MAX_RANK, Strides};

/// Index of `cond` in the operand order used everywhere in plans and kernels: the mask, or the
/// first operand (`lhs`) of a predicate.
pub const COND: usize = 0;
/// Index of `then` in the operand order.
pub const THEN: usize = 1;
/// Index of `else` in the operand order.
pub const ELSE: usize = 2;
/// Index of the output in the operand order.
pub const OUT: usize = 3;
/// Index of a comparison's second operand (`rhs`); its strides are all 0 for masks and tests.
pub const RHS: usize = 4;
/// Operands of a loop nest.
pub const OPS: usize = 5;

/// Strides of 0 for a mask's or a test's absent second operand.
static NO_RHS: [isize; MAX_RANK] = [0; MAX_RANK];

/// A canonical loop nest: what the machine code depends on, and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Signature {
    /// Element width in bytes (1, 2, 4, 8 or 16).
    pub(crate) width: usize,
    /// What decides each element: the mask, or a predicate over `cond` (its `lhs`) and `rhs`.
    pub(crate) cond: Kind,
    /// Collapsed dimensions, outermost first. Never empty; a single-element call is `[1]`.
    pub(crate) dims: Dims,
    /// Strides in elements of cond, then, else, out and rhs (see [`COND`] ...), one per dim.
    pub(crate) strides: [Strides; OPS],
}

impl Signature {
    /// A mask signature from its parts, checked: a width of 1, 2, 4, 8 or 16 bytes, 1 to
    /// [`MAX_RANK`] dims none of them 0, one stride per dim for each of cond, then, else and out,
    /// and an output whose elements are distinct (non-negative strides, the planner's form).
    /// What the planner makes for real calls; this is for tests and tools that describe loop
    /// nests directly.
    ///
    /// ```
    /// use selectjit::plan::{COND, Signature};
    /// // A [3, 4] output whose mask is one row broadcast down the columns.
    /// let sig = Signature::new(4, &[3, 4], [&[0, 1], &[4, 1], &[4, 1], &[4, 1]])?;
    /// assert_eq!(sig.dims(), &[3, 4]);
    /// assert_eq!(sig.strides(COND), &[0, 1]);
    /// // Checked: no 3-byte elements, and no output written backwards.
    /// assert!(Signature::new(3, &[4], [&[1], &[1], &[1], &[1]]).is_err());
    /// assert!(Signature::new(4, &[4], [&[1], &[1], &[1], &[-1]]).is_err());
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn new(width: usize, dims: &[usize], strides: [&[isize]; 4]) -> Result<Signature> {
        let bad = |why: String| Err(Error::Invalid(format!("signature: {why}")));
        if ![1, 2, 4, 8, 16].contains(&width) {
            return bad(format!("element width {width} is not 1, 2, 4, 8 or 16"));
        }
        if dims.is_empty() || dims.len() > MAX_RANK || dims.contains(&0) {
            return bad(format!("dims {dims:?}: 1 to {MAX_RANK} dims, none 0"));
        }
        if let Some(op) = (0..4).find(|&op| strides[op].len() != dims.len()) {
            return bad(format!(
                "operand {op} has {} strides for {} dims",
                strides[op].len(),
                dims.len()
            ));
        }
        if strides[OUT].iter().any(|&s| s < 0) {
            return bad("the output's strides must not be negative".into());
        }
        let mut st: [Strides; OPS] = Default::default();
        for (op, s) in st.iter_mut().enumerate() {
            *s = if op == RHS {
                NO_RHS[..dims.len()].into()
            } else {
                strides[op].into()
            };
        }
        crate::tensor::check_output_distinct(dims, &st[OUT])?;
        Ok(Signature {
            width,
            cond: Kind::Mask,
            dims: dims.into(),
            strides: st,
        })
    }
    /// A signature whose condition is `cond` (a mask or a predicate), from its parts, checked
    /// as [`Signature::new`] checks; `strides` in the operand order cond (a predicate's
    /// `lhs`), then, else, out, rhs. An absent rhs (masks, tests) must have strides of 0.
    ///
    /// ```
    /// use selectjit::plan::{Canon, CondKind, RHS, Signature};
    /// use selectjit::{DType, TestOp};
    /// // where(x < y, a, b) over 16 f32 elements, y a scalar.
    /// let lt = CondKind::Cmp(Canon::Lt, DType::F32);
    /// let sig = Signature::with_cond(4, lt, &[16], [&[1], &[1], &[1], &[1], &[0]])?;
    /// assert_eq!(sig.cond(), lt);
    /// assert_eq!(sig.strides(RHS), &[0]);
    /// // A test reads no rhs: its rhs strides must be 0.
    /// let nan = CondKind::Test(TestOp::IsNan, DType::F32);
    /// assert!(Signature::with_cond(4, nan, &[16], [&[1], &[1], &[1], &[1], &[1]]).is_err());
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn with_cond(
        width: usize,
        cond: Kind,
        dims: &[usize],
        strides: [&[isize]; OPS],
    ) -> Result<Signature> {
        let [c, t, e, o, r] = strides;
        let mut sig = Signature::new(width, dims, [c, t, e, o])?;
        if r.len() != dims.len() || (!cond.binary() && r.iter().any(|&s| s != 0)) {
            return Err(Error::Invalid(format!(
                "signature: rhs strides {r:?} for {} dims of a {cond} condition",
                dims.len()
            )));
        }
        sig.cond = cond;
        sig.strides[RHS] = r.into();
        Ok(sig)
    }
    /// What decides each element: the mask, or a predicate.
    ///
    /// ```
    /// use selectjit::plan::{CondKind, plan_contiguous};
    /// let sig = plan_contiguous(4, 100).unwrap();
    /// assert_eq!(sig.cond(), CondKind::Mask);
    /// ```
    pub fn cond(&self) -> Kind {
        self.cond
    }
    /// Element width in bytes.
    ///
    /// ```
    /// // The width is the key, not the dtype: f32, i32 and u32 calls share a signature.
    /// let sig = selectjit::plan::plan_contiguous(4, 100).unwrap();
    /// assert_eq!(sig.width(), 4);
    /// ```
    pub fn width(&self) -> usize {
        self.width
    }
    /// The collapsed dims, outermost first.
    ///
    /// ```
    /// use selectjit::plan::plan;
    /// // Size-1 dims are dropped and contiguous ones merged.
    /// let st: &[isize] = &[12, 12, 4, 1];
    /// let sig = plan(2, &[2, 1, 3, 4], [st; 4]).unwrap();
    /// assert_eq!(sig.dims(), &[24]);
    /// ```
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }
    /// Operand `op`'s strides in elements, one per dim.
    ///
    /// ```
    /// use selectjit::plan::{COND, ELSE, OUT, THEN, plan};
    /// // out [2, 3] = where(cond [3], x [2, 3], y scalar)
    /// let sig = plan(4, &[2, 3], [&[0, 1], &[3, 1], &[0, 0], &[3, 1]]).unwrap();
    /// assert_eq!(sig.strides(COND), &[0, 1]);
    /// assert_eq!(sig.strides(THEN), &[3, 1]);
    /// assert_eq!(sig.strides(ELSE), &[0, 0]);
    /// assert_eq!(sig.strides(OUT), &[3, 1]);
    /// ```
    pub fn strides(&self, op: usize) -> &[isize] {
        &self.strides[op]
    }
    /// Bytes per element of operand `op`: the mask's 1 (or the compared dtype's width) for cond
    /// and rhs, the element width for the others.
    ///
    /// ```
    /// use selectjit::plan::{COND, CondKind, OUT, RHS, Signature, plan_contiguous};
    /// use selectjit::{DType, TestOp};
    /// // A mask is one byte per element.
    /// assert_eq!(plan_contiguous(8, 10).unwrap().op_width(COND), 1);
    /// // Select 2-byte elements where an f64 tensor is NaN: cond reads 8-byte elements.
    /// let nan = CondKind::Test(TestOp::IsNan, DType::F64);
    /// let sig = Signature::with_cond(2, nan, &[10], [&[1], &[1], &[1], &[1], &[0]])?;
    /// assert_eq!((sig.op_width(COND), sig.op_width(RHS), sig.op_width(OUT)), (8, 8, 2));
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn op_width(&self, op: usize) -> usize {
        if op == COND || op == RHS {
            self.cond.operand_width()
        } else {
            self.width
        }
    }
    /// Rank of the collapsed nest.
    ///
    /// ```
    /// use selectjit::plan::plan;
    /// let sig = plan(4, &[2, 3], [&[0, 1], &[3, 1], &[0, 0], &[3, 1]]).unwrap();
    /// assert_eq!(sig.rank(), 2);
    /// ```
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    /// Size of the outermost dimension: the range a kernel call may be split over.
    ///
    /// ```
    /// use selectjit::plan::plan;
    /// let sig = plan(4, &[5, 3], [&[0, 1], &[3, 1], &[0, 0], &[3, 1]]).unwrap();
    /// assert_eq!(sig.outer(), 5); // kernels run ranges of 0..5
    /// ```
    pub fn outer(&self) -> usize {
        self.dims[0]
    }
    /// Total number of elements.
    ///
    /// ```
    /// use selectjit::plan::plan;
    /// let sig = plan(4, &[5, 3], [&[0, 1], &[3, 1], &[0, 0], &[3, 1]]).unwrap();
    /// assert_eq!(sig.numel(), 15);
    /// ```
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }
    /// Bytes of the output (saturating): what the store-kind and variant choices are sized by.
    pub(crate) fn out_bytes(&self) -> usize {
        self.numel().saturating_mul(self.width)
    }
    /// Inner-dimension stride of operand `op`.
    ///
    /// ```
    /// use selectjit::plan::{COND, ELSE, THEN, plan};
    /// // then walks a [3, 5] buffer down a column: stride 5 along the row.
    /// let sig = plan(4, &[5, 3], [&[3, 1], &[1, 5], &[0, 0], &[3, 1]]).unwrap();
    /// assert_eq!(sig.inner_stride(COND), 1);
    /// assert_eq!(sig.inner_stride(THEN), 5);
    /// assert_eq!(sig.inner_stride(ELSE), 0);
    /// ```
    pub fn inner_stride(&self, op: usize) -> isize {
        self.strides[op][self.rank() - 1]
    }
    /// Inner-dimension size.
    ///
    /// ```
    /// use selectjit::plan::plan;
    /// let sig = plan(4, &[5, 3], [&[0, 1], &[3, 1], &[0, 0], &[3, 1]]).unwrap();
    /// assert_eq!(sig.inner(), 3);
    /// ```
    pub fn inner(&self) -> usize {
        self.dims[self.rank() - 1]
    }
    /// Bytes operand `op` moves per step along dim `k`: its stride times its element size
    /// ([`Signature::op_width`]).
    ///
    /// ```
    /// use selectjit::plan::{COND, OUT, plan};
    /// // 8-byte elements, a [4, 3] output with a mask broadcast along the columns.
    /// let sig = plan(8, &[4, 3], [&[1, 0], &[3, 1], &[3, 1], &[3, 1]]).unwrap();
    /// assert_eq!(sig.byte_stride(OUT, 0), 24); // 3 elements of 8 bytes
    /// assert_eq!(sig.byte_stride(COND, 0), 1); // one mask byte
    /// assert_eq!(sig.byte_stride(COND, 1), 0);
    /// ```
    pub fn byte_stride(&self, op: usize, k: usize) -> isize {
        self.strides[op][k] * self.op_width(op) as isize
    }
    /// Whether each element's choice comes from a mask (not from a predicate).
    ///
    /// ```
    /// use selectjit::plan::{Canon, CondKind, Signature, plan_contiguous};
    /// assert!(plan_contiguous(4, 8).unwrap().is_mask());
    /// let eq = CondKind::Cmp(Canon::Eq, selectjit::DType::I32);
    /// let sig = Signature::with_cond(4, eq, &[8], [&[1], &[1], &[1], &[1], &[1]])?;
    /// assert!(!sig.is_mask());
    /// # Ok::<(), selectjit::Error>(())
    /// ```
    pub fn is_mask(&self) -> bool {
        self.cond == Kind::Mask
    }
    /// How the row (the innermost dim) runs. For a predicate, the condition's operands play
    /// cond's part: unit or zero strides (not both zero) along the row make a vector select,
    /// both zero a copy.
    ///
    /// ```
    /// use selectjit::plan::{RowShape, plan};
    /// // Everything contiguous: a vector select.
    /// let st: &[isize] = &[3, 1];
    /// let sel = plan(4, &[2, 3], [st; 4]).unwrap();
    /// assert_eq!(sel.row_shape(), RowShape::Select { then_bcast: false, else_bcast: false });
    /// // One mask byte per row, else a scalar: a test per row, then a copy or a fill.
    /// let copy = plan(4, &[2, 3], [&[1, 0], &[3, 1], &[0, 0], &[3, 1]]).unwrap();
    /// assert_eq!(copy.row_shape(), RowShape::Copy { then_bcast: false, else_bcast: true });
    /// // then read down a column: one element at a time.
    /// let strided = plan(4, &[2, 3], [&[3, 1], &[1, 2], &[3, 1], &[3, 1]]).unwrap();
    /// assert_eq!(strided.row_shape(), RowShape::Strided);
    /// ```
    pub fn row_shape(&self) -> RowShape {
        let s = |op| self.inner_stride(op);
        let unit_or_bcast = |v: isize| v == 0 || v == 1;
        let cond = match self.cond {
            Kind::Mask => s(COND),
            Kind::Test(..) if unit_or_bcast(s(COND)) => s(COND),
            Kind::Cmp(..) if unit_or_bcast(s(COND)) && unit_or_bcast(s(RHS)) => s(COND).max(s(RHS)),
            Kind::Test(..) | Kind::Cmp(..) => -1,
        };
        if s(OUT) == 1 && unit_or_bcast(s(THEN)) && unit_or_bcast(s(ELSE)) {
            let (then_bcast, else_bcast) = (s(THEN) == 0, s(ELSE) == 0);
            match cond {
                1 => {
                    return RowShape::Select {
                        then_bcast,
                        else_bcast,
                    };
                }
                0 => {
                    return RowShape::Copy {
                        then_bcast,
                        else_bcast,
                    };
                }
                _ => {}
            }
        }
        RowShape::Strided
    }
}

/// How the innermost dimension of a loop nest runs: the rule every back end (the static
/// kernels, the Cranelift tier, the x86 tiers) follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowShape {
    /// A vector select: cond and out have unit stride along the row, then and else unit stride
    /// or stride 0 (`*_bcast`: one element broadcast along the row, splatted once).
    Select {
        /// then has stride 0 along the row.
        then_bcast: bool,
        /// else has stride 0 along the row.
        else_bcast: bool,
    },
    /// cond is constant along the row (stride 0), out has unit stride and then / else unit or
    /// zero stride: one test, then a copy (or a fill) of the chosen input.
    Copy {
        /// then has stride 0 along the row.
        then_bcast: bool,
        /// else has stride 0 along the row.
        else_bcast: bool,
    },
    /// Any other strides: one element at a time.
    Strided,
}

impl RowShape {
    /// Whether operand `op` (then or else) is one element broadcast along the row.
    #[cfg_attr(not(x86_tier), allow(dead_code))] // the x86 emitter's question
    pub(crate) fn bcast(self, op: usize) -> bool {
        match self {
            RowShape::Select {
                then_bcast,
                else_bcast,
            }
            | RowShape::Copy {
                then_bcast,
                else_bcast,
            } => {
                if op == THEN {
                    then_bcast
                } else {
                    op == ELSE && else_bcast
                }
            }
            RowShape::Strided => false,
        }
    }
}

/// What a shape-generic kernel depends on: the element width, the collapsed rank, the class of
/// each operand's stride along the innermost dimension (0, 1, or any other value), which decides
/// the row shape, and which outer strides are 0. Dims and all other strides are arguments of the
/// kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pattern {
    /// Element width in bytes.
    pub width: usize,
    /// Rank of the collapsed loop nest.
    pub rank: usize,
    /// What decides each element (the mask, or a predicate).
    pub(crate) cond: Kind,
    /// Per operand (cond, then, else, out, rhs): 0, 1, or 2 for any other stride.
    pub inner: [u8; OPS],
    /// Per operand, bit `k` set when its stride along outer dim `k` is 0 (broadcast): such
    /// strides are constants of the kernel instead of arguments.
    pub outer_zero: [u64; OPS],
}

impl Pattern {
    /// A mask kernel's pattern from its parts (cond, then, else, out): what AOT tools
    /// enumerate. The parts are checked where it matters, by the key parser and by the code
    /// generators that refuse what they do not cover.
    ///
    /// ```
    /// use selectjit::plan::{Pattern, plan_contiguous};
    /// // Rank 1, unit stride along the row for cond, then, else and out: every contiguous call.
    /// let p = Pattern::of_mask(4, 1, [1, 1, 1, 1], [0; 4]);
    /// assert_eq!(p, Pattern::of(&plan_contiguous(4, 1000).unwrap()));
    /// ```
    pub fn of_mask(width: usize, rank: usize, inner: [u8; 4], outer_zero: [u64; 4]) -> Pattern {
        let all_outer = if rank >= 65 {
            u64::MAX
        } else {
            (1u64 << (rank.max(1) - 1)) - 1
        };
        Pattern {
            width,
            cond: Kind::Mask,
            rank,
            inner: [inner[0], inner[1], inner[2], inner[3], 0],
            outer_zero: [
                outer_zero[0],
                outer_zero[1],
                outer_zero[2],
                outer_zero[3],
                all_outer,
            ],
        }
    }

    /// The pattern of a signature.
    ///
    /// ```
    /// use selectjit::plan::{Pattern, plan};
    /// // Different dims, the same shape-generic kernel.
    /// let a = plan(4, &[2, 3], [&[0, 1], &[3, 1], &[0, 0], &[3, 1]]).unwrap();
    /// let b = plan(4, &[7, 9], [&[0, 1], &[9, 1], &[0, 0], &[9, 1]]).unwrap();
    /// assert_ne!(a, b);
    /// assert_eq!(Pattern::of(&a), Pattern::of(&b));
    /// assert_eq!(Pattern::of(&a).inner, [1, 1, 0, 1, 0]); // cond, then, else, out, rhs
    /// ```
    pub fn of(sig: &Signature) -> Pattern {
        Pattern {
            width: sig.width,
            cond: sig.cond,
            rank: sig.rank(),
            inner: std::array::from_fn(|op| match sig.inner_stride(op) {
                0 => 0,
                1 => 1,
                _ => 2,
            }),
            outer_zero: std::array::from_fn(|op| {
                let st = &sig.strides[op];
                (0..sig.rank() - 1)
                    .filter(|&k| st[k] == 0)
                    .fold(0u64, |m, k| m | (1 << k))
            }),
        }
    }

    /// A signature with this pattern (dims of 2, outer strides of 0 or 2), from which code
    /// generators read only the width, the rank, the inner-stride classes and the zero strides.
    ///
    /// ```
    /// use selectjit::plan::{Pattern, plan};
    /// let sig = plan(4, &[7, 9], [&[0, 1], &[9, 1], &[0, 0], &[9, 1]]).unwrap();
    /// let p = Pattern::of(&sig);
    /// let r = p.representative();
    /// assert_eq!(r.dims(), &[2, 2]);
    /// assert_eq!(Pattern::of(&r), p);
    /// ```
    pub fn representative(&self) -> Signature {
        let r = self.rank;
        Signature {
            width: self.width,
            cond: self.cond,
            dims: smallvec::smallvec![2; r],
            strides: std::array::from_fn(|op| {
                let mut st: Strides = (0..r)
                    .map(|k| {
                        if self.outer_zero[op] >> k & 1 == 1 {
                            0
                        } else {
                            2
                        }
                    })
                    .collect();
                st[r - 1] = self.inner[op] as isize;
                st
            }),
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "generic w{} rank{} inner{:?}",
            self.width, self.rank, self.inner
        )?;
        match self.cond {
            Kind::Mask => Ok(()),
            k => write!(f, " where {k}"),
        }
    }
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "w{} dims{:?} cond{:?} then{:?} else{:?} out{:?}",
            self.width,
            self.dims.as_slice(),
            self.strides[COND].as_slice(),
            self.strides[THEN].as_slice(),
            self.strides[ELSE].as_slice(),
            self.strides[OUT].as_slice()
        )?;
        match self.cond {
            Kind::Mask => Ok(()),
            k @ Kind::Test(..) => write!(f, " where {k}"),
            k @ Kind::Cmp(..) => write!(f, " where {k} rhs{:?}", self.strides[RHS].as_slice()),
        }
    }
}

/// The plan of a call whose four operands are contiguous with one and the same shape of `n`
/// elements, built directly: exactly what [`plan`] returns for such a call, at a fraction of the
/// cost. `None` when `n` is 0.
///
/// ```
/// use selectjit::plan::{plan, plan_contiguous};
/// let st: &[isize] = &[12, 4, 1];
/// assert_eq!(plan_contiguous(2, 24), plan(2, &[2, 3, 4], [st; 4]));
/// assert_eq!(plan_contiguous(2, 24).unwrap().dims(), &[24]);
/// assert_eq!(plan_contiguous(2, 0), None);
/// ```
pub fn plan_contiguous(width: usize, n: usize) -> Option<Signature> {
    if n == 0 {
        return None;
    }
    let s: isize = if n == 1 { 0 } else { 1 };
    // Built in place: cloning inline small vectors costs more than the rest of a tiny call.
    let one = |v: isize| -> Strides { Strides::from_buf_and_len([v; 8], 1) };
    Some(Signature {
        width,
        cond: Kind::Mask,
        dims: crate::shape::Dims::from_buf_and_len([n; 8], 1),
        strides: [one(s), one(s), one(s), one(s), one(0)],
    })
}

/// A planned call: its [`Signature`], and where each operand's kernel base pointer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The canonical loop nest (the output's strides are all non-negative).
    pub sig: Signature,
    /// Per operand (cond, then, else, out, rhs), in elements: the kernel's base element relative to
    /// the view's element at coordinate `[0, 0, ...]`. Non-zero only for operands with a stride
    /// along a flipped dimension (one where the output's stride was negative): the base moves to
    /// the far end of it. Adding it to a validated view's offset gives an index of an element
    /// the view addresses, so it stays inside the buffer.
    pub base: [isize; OPS],
}

/// Canonicalises one call. Returns `None` when the output is empty (a zero dimension): there is
/// no work and no kernel to look up.
///
/// Only for calls whose output strides are all non-negative, where every base adjustment is 0
/// (the common case, kept for callers that build contiguous outputs). With a negative output
/// stride use [`plan_layout`], whose [`Plan::base`] the kernels' pointers must include.
///
/// ```
/// use selectjit::plan::{COND, ELSE, plan};
/// // The attention-mask case: cond [1, 1, 4, 4] over then [2, 3, 4, 4], else a scalar.
/// let sig = plan(
///     4,
///     &[2, 3, 4, 4],
///     [&[0, 0, 4, 1], &[48, 16, 4, 1], &[0, 0, 0, 0], &[48, 16, 4, 1]],
/// )
/// .unwrap();
/// assert_eq!(sig.dims(), &[6, 16]); // batch dims merged, rows merged
/// assert_eq!(sig.strides(COND), &[0, 1]);
/// assert_eq!(sig.strides(ELSE), &[0, 0]);
/// assert!(plan(4, &[3, 0], [&[0, 1], &[0, 1], &[0, 1], &[0, 1]]).is_none()); // no work
/// ```
pub fn plan(width: usize, shape: &[usize], strides: [&[isize]; 4]) -> Option<Signature> {
    plan_layout(width, shape, strides).map(|p| p.sig)
}

/// Canonicalises one call with any signed strides: flips the dimensions whose output stride is
/// negative (see the module docs) and returns the signature with the base adjustments. `None`
/// when the output is empty.
///
/// ```
/// use selectjit::plan::{OUT, THEN, plan_contiguous, plan_layout};
/// // out = reversed(then) over 4 elements: the output is flipped to walk forwards.
/// let p = plan_layout(4, &[4], [&[0], &[1], &[0], &[-1]]).unwrap();
/// assert_eq!(p.sig.strides(OUT), &[1]);
/// assert_eq!(p.sig.strides(THEN), &[-1]);
/// assert_eq!(p.base, [0, 3, 0, -3, 0]); // then starts at its last element, out at its first
/// // Reversed everywhere is the forward kernel.
/// let p = plan_layout(4, &[4], [&[-1], &[-1], &[-1], &[-1]]).unwrap();
/// assert_eq!(Some(p.sig), plan_contiguous(4, 4));
/// assert_eq!(p.base, [-3, -3, -3, -3, 0]);
/// ```
pub fn plan_layout(width: usize, shape: &[usize], strides: [&[isize]; 4]) -> Option<Plan> {
    let [c, t, e, o] = strides;
    plan_cond(
        width,
        Kind::Mask,
        shape,
        [c, t, e, o, &NO_RHS[..shape.len()]],
    )
}

/// [`plan_layout`] of a call whose condition is `cond` (a mask, or a predicate whose operands'
/// strides are those of cond and rhs).
pub(crate) fn plan_cond(
    width: usize,
    cond: Kind,
    shape: &[usize],
    strides: [&[isize]; OPS],
) -> Option<Plan> {
    if shape.contains(&0) {
        return None;
    }
    let mut base = [0isize; OPS];
    // Dimensions that do work, as (size, [strides]); flipped where the output runs backwards.
    let mut dims: SmallVec<[(usize, [isize; OPS]); 8]> = SmallVec::new();
    for (k, &d) in shape.iter().enumerate().filter(|(_, d)| **d > 1) {
        let mut s: [isize; OPS] = std::array::from_fn(|op| strides[op][k]);
        if s[OUT] < 0 {
            for op in 0..OPS {
                // Validated views: the span lies inside the buffer, so it fits in isize.
                base[op] += (d as isize - 1) * s[op];
                s[op] = -s[op];
            }
        }
        dims.push((d, s));
    }
    // Output's smallest stride innermost (stable: row-major order is kept as it is).
    dims.sort_by_key(|&(_, s)| std::cmp::Reverse(s[OUT]));

    let mut out: SmallVec<[(usize, [isize; OPS]); 8]> = SmallVec::new();
    for (d, s) in dims {
        if let Some(last) = out.last_mut() {
            let mergeable = (0..OPS).all(|op| last.1[op] == s[op] * d as isize);
            if mergeable {
                last.0 *= d;
                last.1 = s;
                continue;
            }
        }
        out.push((d, s));
    }
    if out.is_empty() {
        out.push((1, [0; OPS]));
    }
    let mut sig = Signature {
        width,
        cond,
        dims: out.iter().map(|x| x.0).collect(),
        strides: Default::default(),
    };
    for (op, st) in sig.strides.iter_mut().enumerate() {
        *st = out.iter().map(|x| x.1[op]).collect::<Strides>();
    }
    Some(Plan { sig, base })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::{Broadcast, broadcast_shapes, contiguous_strides, strides_over};

    fn sig_for(width: usize, c: &[usize], t: &[usize], e: &[usize]) -> Signature {
        let b = broadcast_shapes(Broadcast::Numpy, c, t, e).unwrap();
        let sc = strides_over(c, &contiguous_strides(c), b.cond, &b.out);
        let st = strides_over(t, &contiguous_strides(t), b.then, &b.out);
        let se = strides_over(e, &contiguous_strides(e), b.else_, &b.out);
        let so = contiguous_strides(&b.out);
        plan(width, &b.out, [&sc, &st, &se, &so]).unwrap()
    }

    #[test]
    fn attention_mask_collapses() {
        let a = sig_for(4, &[1, 1, 128, 128], &[8, 12, 128, 128], &[]);
        let b = sig_for(4, &[1, 16384], &[96, 16384], &[]);
        assert_eq!(a, b);
        assert_eq!(a.dims.as_slice(), &[96, 16384]);
        assert_eq!(a.strides[COND].as_slice(), &[0, 1]);
        assert_eq!(a.strides[ELSE].as_slice(), &[0, 0]);
    }

    #[test]
    fn contiguous_is_one_dim_and_width_is_the_key() {
        let a = sig_for(4, &[2, 3, 4], &[2, 3, 4], &[2, 3, 4]);
        assert_eq!(a.dims.as_slice(), &[24]);
        assert_eq!(a, sig_for(4, &[24], &[24], &[24]));
        assert_ne!(a, sig_for(2, &[24], &[24], &[24]));
    }

    #[test]
    fn contiguous_shortcut_equals_the_planner() {
        for shape in [
            &[7usize][..],
            &[1],
            &[2, 3, 4],
            &[1, 1],
            &[5, 1, 3],
            &[],
            &[0, 3],
        ] {
            let n: usize = shape.iter().product();
            let st = contiguous_strides(shape);
            assert_eq!(
                plan_contiguous(4, n),
                plan(4, shape, [&st, &st, &st, &st]),
                "{shape:?}"
            );
        }
    }

    #[test]
    fn scalar_and_empty() {
        let s = sig_for(8, &[], &[1, 1], &[1]);
        assert_eq!(s.dims.as_slice(), &[1]);
        assert!(plan(4, &[3, 0], [&[0, 0], &[0, 0], &[0, 0], &[0, 1]]).is_none());
    }

    #[test]
    fn reversed_output_is_flipped_for_every_operand() {
        // out = x[::-1] of a [4, 5] buffer (both dims reversed), then and cond forward, else
        // broadcast: the output walks forwards after the flip, then backwards, as one dim.
        let out: [isize; 2] = [-5, -1];
        let fwd: [isize; 2] = [5, 1];
        let p = plan_layout(4, &[4, 5], [&fwd, &fwd, &[0, 0], &out]).unwrap();
        assert_eq!(p.sig.dims.as_slice(), &[20]);
        assert_eq!(p.sig.strides[OUT].as_slice(), &[1]);
        assert_eq!(p.sig.strides[THEN].as_slice(), &[-1]);
        assert_eq!(p.sig.strides[ELSE].as_slice(), &[0]);
        // Bases move to the far corner: 19 elements along then/cond, -19 along the output.
        assert_eq!(p.base, [19, 19, 0, -19, 0]);
        // Reversed everywhere is the same kernel as forward everywhere.
        let q = plan_layout(2, &[4, 5], [&out, &out, &out, &out]).unwrap();
        assert_eq!(q.sig, plan_contiguous(2, 20).unwrap());
        assert_eq!(q.base, [-19, -19, -19, -19, 0]);
    }

    #[test]
    fn mixed_signs_keep_input_strides_negative() {
        // Output rows reversed, columns forward; then columns reversed: only the row dim flips.
        let p = plan_layout(8, &[3, 7], [&[7, 1], &[7, -1], &[0, 1], &[-7, 1]]).unwrap();
        assert_eq!(p.sig.strides[OUT].as_slice(), &[7, 1]);
        assert_eq!(p.sig.strides[THEN].as_slice(), &[-7, -1]);
        assert_eq!(p.sig.strides[COND].as_slice(), &[-7, 1]);
        assert_eq!(p.sig.strides[ELSE].as_slice(), &[0, 1]);
        assert_eq!(p.base, [14, 14, 0, -14, 0]);
        assert!(p.sig.strides[OUT].iter().all(|&s| s >= 0));
        // Size-1 dims are dropped, never flipped.
        let p = plan_layout(4, &[1, 6], [&[-9, 1], &[-9, 1], &[0, 0], &[-9, 1]]).unwrap();
        assert_eq!(p.base, [0; OPS]);
        // Forward outputs: no adjustment, and `plan` gives the same signature.
        let p = plan_layout(4, &[3, 7], [&[7, -1], &[0, 1], &[-7, 1], &[7, 1]]).unwrap();
        assert_eq!(p.base, [0; OPS]);
        assert_eq!(
            Some(p.sig),
            plan(4, &[3, 7], [&[7, -1], &[0, 1], &[-7, 1], &[7, 1]])
        );
    }

    #[test]
    fn fortran_output_puts_unit_stride_inner() {
        // A [3,4] output stored column-major, all inputs the same layout: one dim of 12.
        let st: [isize; 2] = [1, 3];
        let s = plan(4, &[3, 4], [&st, &st, &st, &st]).unwrap();
        assert_eq!(s.dims.as_slice(), &[12]);
        assert_eq!(s.strides[OUT].as_slice(), &[1]);
    }
}

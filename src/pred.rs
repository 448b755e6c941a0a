//! Predicates: a select's condition computed per element from other tensors instead of read
//! from a mask — `lhs OP rhs` for the six comparisons, `isnan` / `isinf` / `isfinite` of one
//! tensor — with numpy's semantics bit for bit:
//!
//! * floats (f16, bf16, f32, f64) compare as IEEE values: every comparison with a NaN is false
//!   except `!=`; `-0.0 == 0.0`; f16 and bf16 by value (widened to f32, which is exact);
//! * signed integers compare signed, unsigned unsigned; bool as 0/1 (any non-zero byte is 1);
//! * complex: `==` / `!=` on both parts; ordered comparisons lexicographic as numpy's
//!   (`(ar < br && !isnan(ai) && !isnan(bi)) || (ar == br && ai < bi)` for `<`);
//! * `isnan` / `isinf` / `isfinite`: integers and bool give false / false / true; complex: a
//!   part NaN / a part infinite / both parts finite.
//!
//! Kernels see a canonical form ([`Kind`]): `>` and `>=` become `<` and `<=` with the operands
//! swapped (exact for IEEE values and numpy's complex order), `!=` becomes `==` negated, and
//! a negation is carried out by swapping `then` and `else`. So a code generator implements
//! `==`, `<`, `<=` and the three tests per dtype, and nothing else.

use crate::dtype::DType;

/// A comparison of two tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    /// Every comparison.
    pub const ALL: [CmpOp; 6] = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ];

    /// The operator as written in expressions: `==`, `!=`, `<`, `<=`, `>`, `>=`.
    ///
    /// ```
    /// use selectjit::CmpOp;
    /// assert_eq!(CmpOp::Le.symbol(), "<=");
    /// let all: Vec<&str> = CmpOp::ALL.iter().map(|op| op.symbol()).collect();
    /// assert_eq!(all, ["==", "!=", "<", "<=", ">", ">="]);
    /// ```
    pub const fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    /// numpy's name of the comparison ufunc: `equal`, `not_equal`, `less`, `less_equal`,
    /// `greater`, `greater_equal`.
    ///
    /// ```
    /// use selectjit::CmpOp;
    /// assert_eq!(CmpOp::Ne.numpy_name(), "not_equal");
    /// assert_eq!(CmpOp::Ge.numpy_name(), "greater_equal");
    /// ```
    pub const fn numpy_name(self) -> &'static str {
        match self {
            CmpOp::Eq => "equal",
            CmpOp::Ne => "not_equal",
            CmpOp::Lt => "less",
            CmpOp::Le => "less_equal",
            CmpOp::Gt => "greater",
            CmpOp::Ge => "greater_equal",
        }
    }

    /// The canonical comparison a kernel evaluates, whether the operands are swapped for it,
    /// and whether its result is negated.
    pub(crate) const fn canonical(self) -> (Canon, bool, bool) {
        match self {
            CmpOp::Eq => (Canon::Eq, false, false),
            CmpOp::Ne => (Canon::Eq, false, true),
            CmpOp::Lt => (Canon::Lt, false, false),
            CmpOp::Le => (Canon::Le, false, false),
            CmpOp::Gt => (Canon::Lt, true, false),
            CmpOp::Ge => (Canon::Le, true, false),
        }
    }
}

impl std::str::FromStr for CmpOp {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> crate::error::Result<Self> {
        CmpOp::ALL
            .into_iter()
            .find(|o| o.symbol() == s || o.numpy_name() == s)
            .ok_or_else(|| {
                crate::error::Error::Invalid(format!(
                    "unknown comparison '{s}' (expected one of == != < <= > >=)"
                ))
            })
    }
}

/// A test of one tensor's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TestOp {
    /// `isnan`: NaN (complex: a part NaN). False for integers and bool.
    IsNan,
    /// `isinf`: ±infinity (complex: a part infinite). False for integers and bool.
    IsInf,
    /// `isfinite`: neither NaN nor infinite (complex: both parts). True for integers and bool.
    IsFinite,
}

impl TestOp {
    /// Every test.
    pub const ALL: [TestOp; 3] = [TestOp::IsNan, TestOp::IsInf, TestOp::IsFinite];

    /// numpy's name: `isnan`, `isinf`, `isfinite`.
    ///
    /// ```
    /// use selectjit::TestOp;
    /// let names: Vec<&str> = TestOp::ALL.iter().map(|t| t.name()).collect();
    /// assert_eq!(names, ["isnan", "isinf", "isfinite"]);
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            TestOp::IsNan => "isnan",
            TestOp::IsInf => "isinf",
            TestOp::IsFinite => "isfinite",
        }
    }
}

impl std::str::FromStr for TestOp {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> crate::error::Result<Self> {
        TestOp::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| {
                crate::error::Error::Invalid(format!(
                    "unknown test '{s}' (expected isnan, isinf or isfinite)"
                ))
            })
    }
}

/// The comparisons a kernel evaluates: the canonical form of every [`CmpOp`]. `>` and `>=`
/// become `<` and `<=` with the operands swapped (exact for IEEE values and numpy's complex
/// order), `!=` becomes `==` with `then` and `else` swapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Canon {
    /// `lhs == rhs`
    Eq,
    /// `lhs < rhs`
    Lt,
    /// `lhs <= rhs`
    Le,
}

impl Canon {
    /// The operator as written: `==`, `<`, `<=`.
    ///
    /// ```
    /// use selectjit::plan::Canon;
    /// assert_eq!(Canon::Le.symbol(), "<=");
    /// ```
    pub const fn symbol(self) -> &'static str {
        match self {
            Canon::Eq => "==",
            Canon::Lt => "<",
            Canon::Le => "<=",
        }
    }
}

/// What decides a kernel's choice per element: the mask bytes, a canonical comparison of two
/// tensors of one dtype, or a test of one tensor. Part of the signature: equal work, equal
/// kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Kind {
    /// One byte per element, any non-zero byte true.
    #[default]
    Mask,
    /// `lhs OP rhs`, both of the dtype.
    Cmp(Canon, DType),
    /// A test of `lhs`, of the dtype.
    Test(TestOp, DType),
}

impl Kind {
    /// Bytes per element of the condition's operands (the mask's 1 for masks).
    ///
    /// ```
    /// use selectjit::DType;
    /// use selectjit::plan::{Canon, CondKind};
    /// assert_eq!(CondKind::Mask.operand_width(), 1);
    /// assert_eq!(CondKind::Cmp(Canon::Lt, DType::F64).operand_width(), 8);
    /// ```
    pub fn operand_width(self) -> usize {
        match self {
            Kind::Mask => 1,
            Kind::Cmp(_, d) | Kind::Test(_, d) => d.width(),
        }
    }

    /// Whether the condition reads a second operand.
    ///
    /// ```
    /// use selectjit::plan::{Canon, CondKind};
    /// use selectjit::{DType, TestOp};
    /// assert!(CondKind::Cmp(Canon::Eq, DType::I32).binary());
    /// assert!(!CondKind::Test(TestOp::IsNan, DType::F32).binary());
    /// assert!(!CondKind::Mask.binary());
    /// ```
    pub fn binary(self) -> bool {
        matches!(self, Kind::Cmp(..))
    }

    /// The dtype compared or tested (`None` for masks).
    ///
    /// ```
    /// use selectjit::plan::{Canon, CondKind};
    /// use selectjit::DType;
    /// assert_eq!(CondKind::Cmp(Canon::Lt, DType::BF16).dtype(), Some(DType::BF16));
    /// assert_eq!(CondKind::Mask.dtype(), None);
    /// ```
    pub fn dtype(self) -> Option<DType> {
        match self {
            Kind::Mask => None,
            Kind::Cmp(_, d) | Kind::Test(_, d) => Some(d),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kind::Mask => f.write_str("mask"),
            Kind::Cmp(op, d) => write!(f, "{} {}", d.name(), op.symbol()),
            Kind::Test(t, d) => write!(f, "{}({})", t.name(), d.name()),
        }
    }
}

/// The per-element semantics of one dtype (see the module docs).
trait Value: Copy {
    fn read(b: &[u8]) -> Self;
    fn eq(self, o: Self) -> bool;
    fn lt(self, o: Self) -> bool;
    fn le(self, o: Self) -> bool;
    fn isnan(self) -> bool {
        false
    }
    fn isinf(self) -> bool {
        false
    }
    fn isfinite(self) -> bool {
        !self.isnan() && !self.isinf()
    }
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            #[inline(always)]
            fn read(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b[..size_of::<$t>()].try_into().unwrap())
            }
            #[inline(always)]
            fn eq(self, o: Self) -> bool { self == o }
            #[inline(always)]
            fn lt(self, o: Self) -> bool { self < o }
            #[inline(always)]
            fn le(self, o: Self) -> bool { self <= o }
        }
    )*};
}
int_value!(i8, i16, i32, i64, u8, u16, u32, u64);

/// A bool element: any non-zero byte is 1.
#[derive(Clone, Copy)]
struct Bool(bool);

impl Value for Bool {
    #[inline(always)]
    fn read(b: &[u8]) -> Self {
        Bool(b[0] != 0)
    }
    #[inline(always)]
    fn eq(self, o: Self) -> bool {
        self.0 == o.0
    }
    #[inline(always)]
    fn lt(self, o: Self) -> bool {
        !self.0 & o.0
    }
    #[inline(always)]
    fn le(self, o: Self) -> bool {
        !self.0 | o.0
    }
}

macro_rules! float_value {
    ($t:ty, $read:expr) => {
        impl Value for $t {
            #[inline(always)]
            fn read(b: &[u8]) -> Self {
                $read(b)
            }
            #[inline(always)]
            fn eq(self, o: Self) -> bool {
                self == o
            }
            #[inline(always)]
            fn lt(self, o: Self) -> bool {
                self < o
            }
            #[inline(always)]
            fn le(self, o: Self) -> bool {
                self <= o
            }
            #[inline(always)]
            fn isnan(self) -> bool {
                self.is_nan()
            }
            #[inline(always)]
            fn isinf(self) -> bool {
                self.is_infinite()
            }
            #[inline(always)]
            fn isfinite(self) -> bool {
                self.is_finite()
            }
        }
    };
}
float_value!(f32, |b: &[u8]| f32::from_le_bytes(
    b[..4].try_into().unwrap()
));
float_value!(f64, |b: &[u8]| f64::from_le_bytes(
    b[..8].try_into().unwrap()
));

/// f16 and bf16 compare by value: widened to f32, which represents each exactly.
#[derive(Clone, Copy)]
struct Widened(f32);

impl Widened {
    fn f16(b: &[u8]) -> Self {
        Widened(half::f16::from_le_bytes([b[0], b[1]]).to_f32())
    }
    fn bf16(b: &[u8]) -> Self {
        Widened(half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
    }
}

/// The [`Value`] of f16 or bf16 elements (which read differently, compare alike).
macro_rules! half_value {
    ($name:ident, $read:path) => {
        #[derive(Clone, Copy)]
        struct $name(Widened);
        impl Value for $name {
            #[inline(always)]
            fn read(b: &[u8]) -> Self {
                $name($read(b))
            }
            #[inline(always)]
            fn eq(self, o: Self) -> bool {
                self.0.0 == o.0.0
            }
            #[inline(always)]
            fn lt(self, o: Self) -> bool {
                self.0.0 < o.0.0
            }
            #[inline(always)]
            fn le(self, o: Self) -> bool {
                self.0.0 <= o.0.0
            }
            #[inline(always)]
            fn isnan(self) -> bool {
                self.0.0.is_nan()
            }
            #[inline(always)]
            fn isinf(self) -> bool {
                self.0.0.is_infinite()
            }
        }
    };
}
half_value!(F16, Widened::f16);
half_value!(BF16, Widened::bf16);

/// A complex element with numpy's comparisons.
#[derive(Clone, Copy)]
struct Complex<F>(F, F);

macro_rules! complex_value {
    ($f:ty, $w:expr) => {
        impl Value for Complex<$f> {
            #[inline(always)]
            fn read(b: &[u8]) -> Self {
                Complex(<$f>::read(&b[..$w]), <$f>::read(&b[$w..2 * $w]))
            }
            #[inline(always)]
            fn eq(self, o: Self) -> bool {
                self.0 == o.0 && self.1 == o.1
            }
            #[inline(always)]
            fn lt(self, o: Self) -> bool {
                (self.0 < o.0 && !self.1.is_nan() && !o.1.is_nan())
                    || (self.0 == o.0 && self.1 < o.1)
            }
            #[inline(always)]
            fn le(self, o: Self) -> bool {
                (self.0 < o.0 && !self.1.is_nan() && !o.1.is_nan())
                    || (self.0 == o.0 && self.1 <= o.1)
            }
            #[inline(always)]
            fn isnan(self) -> bool {
                self.0.is_nan() || self.1.is_nan()
            }
            #[inline(always)]
            fn isinf(self) -> bool {
                self.0.is_infinite() || self.1.is_infinite()
            }
            #[inline(always)]
            fn isfinite(self) -> bool {
                self.0.is_finite() && self.1.is_finite()
            }
        }
    };
}
complex_value!(f32, 4);
complex_value!(f64, 8);

#[inline(always)]
fn decide<V: Value>(kind: Kind, l: &[u8], r: &[u8]) -> bool {
    let a = V::read(l);
    match kind {
        Kind::Cmp(Canon::Eq, _) => a.eq(V::read(r)),
        Kind::Cmp(Canon::Lt, _) => a.lt(V::read(r)),
        Kind::Cmp(Canon::Le, _) => a.le(V::read(r)),
        Kind::Test(TestOp::IsNan, _) => a.isnan(),
        Kind::Test(TestOp::IsInf, _) => a.isinf(),
        Kind::Test(TestOp::IsFinite, _) => a.isfinite(),
        Kind::Mask => l[0] != 0,
    }
}

/// The condition of one element: `l` holds the element of the mask or of `lhs`, `r` that of
/// `rhs` (ignored unless the kind compares). Little-endian bytes of at least the operand width.
///
/// ```
/// use selectjit::plan::{Canon, CondKind, eval_cond};
/// use selectjit::{DType, TestOp};
/// let lt = CondKind::Cmp(Canon::Lt, DType::F32);
/// assert!(eval_cond(lt, &1.0f32.to_le_bytes(), &2.0f32.to_le_bytes()));
/// assert!(!eval_cond(lt, &f32::NAN.to_le_bytes(), &2.0f32.to_le_bytes())); // NaN compares false
/// let nan = CondKind::Test(TestOp::IsNan, DType::F16);
/// assert!(eval_cond(nan, &0x7e00u16.to_le_bytes(), &[]));
/// assert!(eval_cond(CondKind::Mask, &[7], &[])); // any non-zero mask byte
/// ```
pub fn eval(kind: Kind, l: &[u8], r: &[u8]) -> bool {
    let Some(d) = kind.dtype() else {
        return l[0] != 0;
    };
    match d {
        DType::Bool => decide::<Bool>(kind, l, r),
        DType::I8 => decide::<i8>(kind, l, r),
        DType::I16 => decide::<i16>(kind, l, r),
        DType::I32 => decide::<i32>(kind, l, r),
        DType::I64 => decide::<i64>(kind, l, r),
        DType::U8 => decide::<u8>(kind, l, r),
        DType::U16 => decide::<u16>(kind, l, r),
        DType::U32 => decide::<u32>(kind, l, r),
        DType::U64 => decide::<u64>(kind, l, r),
        DType::F16 => decide::<F16>(kind, l, r),
        DType::BF16 => decide::<BF16>(kind, l, r),
        DType::F32 => decide::<f32>(kind, l, r),
        DType::F64 => decide::<f64>(kind, l, r),
        DType::Complex64 => decide::<Complex<f32>>(kind, l, r),
        DType::Complex128 => decide::<Complex<f64>>(kind, l, r),
    }
}

/// A run of conditions: `out[i]` (0 or 1) for element `i` of `lhs` at byte stride `ls` and of
/// `rhs` at byte stride `rs`, one monomorphic loop per dtype and kind.
///
/// # Safety
/// For every `i < out.len()`, the operand width's bytes at `lhs + i * ls` (and, for a
/// comparison, at `rhs + i * rs`) are readable.
pub(crate) unsafe fn eval_run(
    kind: Kind,
    lhs: *const u8,
    ls: isize,
    rhs: *const u8,
    rs: isize,
    out: &mut [u8],
) {
    #[inline(always)]
    unsafe fn go<V: Value>(
        kind: Kind,
        lhs: *const u8,
        ls: isize,
        rhs: *const u8,
        rs: isize,
        out: &mut [u8],
    ) {
        let w = kind.operand_width();
        macro_rules! run {
            ($f:expr) => {
                for (i, o) in out.iter_mut().enumerate() {
                    // SAFETY: the caller's contract: `w` bytes at each address are readable.
                    let l = unsafe { std::slice::from_raw_parts(lhs.offset(i as isize * ls), w) };
                    *o = $f(l, i) as u8;
                }
            };
        }
        let r = |i: usize| -> &[u8] {
            // SAFETY: as above, for comparisons (the only kinds that call it).
            unsafe { std::slice::from_raw_parts(rhs.offset(i as isize * rs), w) }
        };
        match kind {
            Kind::Cmp(Canon::Eq, _) => run!(|l, i| V::read(l).eq(V::read(r(i)))),
            Kind::Cmp(Canon::Lt, _) => run!(|l, i| V::read(l).lt(V::read(r(i)))),
            Kind::Cmp(Canon::Le, _) => run!(|l, i| V::read(l).le(V::read(r(i)))),
            Kind::Test(TestOp::IsNan, _) => run!(|l, _| V::read(l).isnan()),
            Kind::Test(TestOp::IsInf, _) => run!(|l, _| V::read(l).isinf()),
            Kind::Test(TestOp::IsFinite, _) => run!(|l, _| V::read(l).isfinite()),
            Kind::Mask => run!(|l: &[u8], _| l[0] != 0),
        }
    }
    let Some(d) = kind.dtype() else {
        // SAFETY: the caller's contract.
        return unsafe { go::<Bool>(kind, lhs, ls, rhs, rs, out) };
    };
    // SAFETY: every arm calls `go` with `V` the type of `d`, `kind`'s operand dtype, so the
    // reads are of `kind.operand_width()` bytes at the addresses the caller's contract makes
    // readable (`lhs + i * ls`, and `rhs + i * rs` for a comparison, for `i < out.len()`).
    unsafe {
        match d {
            DType::Bool => go::<Bool>(kind, lhs, ls, rhs, rs, out),
            DType::I8 => go::<i8>(kind, lhs, ls, rhs, rs, out),
            DType::I16 => go::<i16>(kind, lhs, ls, rhs, rs, out),
            DType::I32 => go::<i32>(kind, lhs, ls, rhs, rs, out),
            DType::I64 => go::<i64>(kind, lhs, ls, rhs, rs, out),
            DType::U8 => go::<u8>(kind, lhs, ls, rhs, rs, out),
            DType::U16 => go::<u16>(kind, lhs, ls, rhs, rs, out),
            DType::U32 => go::<u32>(kind, lhs, ls, rhs, rs, out),
            DType::U64 => go::<u64>(kind, lhs, ls, rhs, rs, out),
            DType::F16 => go::<F16>(kind, lhs, ls, rhs, rs, out),
            DType::BF16 => go::<BF16>(kind, lhs, ls, rhs, rs, out),
            DType::F32 => go::<f32>(kind, lhs, ls, rhs, rs, out),
            DType::F64 => go::<f64>(kind, lhs, ls, rhs, rs, out),
            DType::Complex64 => go::<Complex<f32>>(kind, lhs, ls, rhs, rs, out),
            DType::Complex128 => go::<Complex<f64>>(kind, lhs, ls, rhs, rs, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(op: CmpOp, d: DType, a: &[u8], b: &[u8]) -> bool {
        let (c, swap, not) = op.canonical();
        let (l, r) = if swap { (b, a) } else { (a, b) };
        eval(Kind::Cmp(c, d), l, r) ^ not
    }

    fn f32b(v: f32) -> [u8; 4] {
        v.to_le_bytes()
    }

    #[test]
    fn floats_compare_as_ieee_values() {
        let nan = f32::from_bits(0x7fc0_0001);
        let cases: &[(f32, f32)] = &[
            (1.0, 2.0),
            (2.0, 1.0),
            (1.0, 1.0),
            (-0.0, 0.0),
            (nan, 1.0),
            (1.0, nan),
            (nan, nan),
            (f32::INFINITY, f32::MAX),
            (f32::NEG_INFINITY, f32::MIN),
            (f32::from_bits(1), 0.0),
        ];
        for &(a, b) in cases {
            let want = [a == b, a != b, a < b, a <= b, a > b, a >= b];
            for (op, w) in CmpOp::ALL.into_iter().zip(want) {
                assert_eq!(cmp(op, DType::F32, &f32b(a), &f32b(b)), w, "{a} {op:?} {b}");
                let (a64, b64) = (f64::from(a).to_le_bytes(), f64::from(b).to_le_bytes());
                assert_eq!(cmp(op, DType::F64, &a64, &b64), w, "f64 {a} {op:?} {b}");
            }
        }
    }

    #[test]
    fn halves_compare_by_value_not_bits() {
        // -0.0 and 0.0 have other bits but are equal; a NaN equals nothing; bf16 and f16
        // order negative values by value (their bits order them backwards).
        let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
        let bf16 = |v: f32| half::bf16::from_f32(v).to_le_bytes();
        for (a, b) in [
            (-0.0f32, 0.0f32),
            (-2.0, -1.0),
            (1.0, f32::NAN),
            (65504.0, 1.0),
        ] {
            let want = [a == b, a != b, a < b, a <= b, a > b, a >= b];
            for (op, w) in CmpOp::ALL.into_iter().zip(want) {
                assert_eq!(
                    cmp(op, DType::F16, &f16(a), &f16(b)),
                    w,
                    "f16 {a} {op:?} {b}"
                );
                assert_eq!(
                    cmp(op, DType::BF16, &bf16(a), &bf16(b)),
                    w,
                    "bf16 {a} {op:?} {b}"
                );
            }
        }
    }

    #[test]
    fn integers_compare_by_their_signedness() {
        // u64 above i64::MAX, i64::MIN, and bytes that are negative as i8 but not as u8.
        let big = u64::MAX - 1;
        assert!(cmp(
            CmpOp::Gt,
            DType::U64,
            &big.to_le_bytes(),
            &1u64.to_le_bytes()
        ));
        assert!(cmp(
            CmpOp::Lt,
            DType::I64,
            &(-1i64).to_le_bytes(),
            &1i64.to_le_bytes()
        ));
        assert!(cmp(
            CmpOp::Lt,
            DType::I64,
            &i64::MIN.to_le_bytes(),
            &i64::MAX.to_le_bytes()
        ));
        assert!(cmp(CmpOp::Gt, DType::U8, &[0x80], &[0x7f]));
        assert!(cmp(CmpOp::Lt, DType::I8, &[0x80], &[0x7f]));
        assert!(cmp(CmpOp::Ge, DType::U16, &[0, 0x80], &[0xff, 0x7f]));
        assert!(cmp(
            CmpOp::Le,
            DType::I32,
            &i32::MIN.to_le_bytes(),
            &i32::MIN.to_le_bytes()
        ));
        assert!(!cmp(
            CmpOp::Ne,
            DType::U32,
            &7u32.to_le_bytes(),
            &7u32.to_le_bytes()
        ));
        // bool: any non-zero byte is 1.
        assert!(cmp(CmpOp::Eq, DType::Bool, &[2], &[1]));
        assert!(cmp(CmpOp::Lt, DType::Bool, &[0], &[0xff]));
        assert!(!cmp(CmpOp::Gt, DType::Bool, &[3], &[1]));
    }

    #[test]
    fn complex_follows_numpy() {
        let c = |re: f64, im: f64| [re.to_le_bytes(), im.to_le_bytes()].concat();
        let n = f64::NAN;
        // (a, b, [==, !=, <, <=, >, >=]) as numpy 2 gives them.
        let cases = [
            (
                c(1.0, 2.0),
                c(1.0, 3.0),
                [false, true, true, true, false, false],
            ),
            (
                c(1.0, 5.0),
                c(2.0, 0.0),
                [false, true, true, true, false, false],
            ),
            (
                c(1.0, n),
                c(2.0, 0.0),
                [false, true, false, false, false, false],
            ),
            (
                c(n, 0.0),
                c(1.0, 0.0),
                [false, true, false, false, false, false],
            ),
            (
                c(1.0, 0.0),
                c(1.0, 0.0),
                [true, false, false, true, false, true],
            ),
            (
                c(-0.0, 0.0),
                c(0.0, -0.0),
                [true, false, false, true, false, true],
            ),
        ];
        for (a, b, want) in cases {
            for (op, w) in CmpOp::ALL.into_iter().zip(want) {
                assert_eq!(cmp(op, DType::Complex128, &a, &b), w, "{op:?}");
                let a32: Vec<u8> = a
                    .chunks(8)
                    .flat_map(|p| (f64::from_le_bytes(p.try_into().unwrap()) as f32).to_le_bytes())
                    .collect();
                let b32: Vec<u8> = b
                    .chunks(8)
                    .flat_map(|p| (f64::from_le_bytes(p.try_into().unwrap()) as f32).to_le_bytes())
                    .collect();
                assert_eq!(cmp(op, DType::Complex64, &a32, &b32), w, "c64 {op:?}");
            }
        }
    }

    #[test]
    fn tests_of_values() {
        let t = |op, d, b: &[u8]| eval(Kind::Test(op, d), b, &[]);
        let nan = f32::from_bits(0xffc0_1234);
        for (v, want) in [
            (nan, [true, false, false]),
            (f32::INFINITY, [false, true, false]),
            (f32::NEG_INFINITY, [false, true, false]),
            (-0.0, [false, false, true]),
            (f32::from_bits(1), [false, false, true]),
        ] {
            for (op, w) in TestOp::ALL.into_iter().zip(want) {
                assert_eq!(t(op, DType::F32, &v.to_le_bytes()), w, "{op:?} {v}");
                assert_eq!(t(op, DType::F64, &f64::from(v).to_le_bytes()), w);
                assert_eq!(t(op, DType::F16, &half::f16::from_f32(v).to_le_bytes()), w);
                assert_eq!(
                    t(op, DType::BF16, &half::bf16::from_f32(v).to_le_bytes()),
                    w
                );
            }
        }
        for d in [DType::I32, DType::U8, DType::Bool, DType::I64] {
            let b = [0xffu8; 8];
            assert_eq!(TestOp::ALL.map(|op| t(op, d, &b)), [false, false, true]);
        }
        let c = |re: f32, im: f32| [re.to_le_bytes(), im.to_le_bytes()].concat();
        assert_eq!(
            TestOp::ALL.map(|op| t(op, DType::Complex64, &c(f32::INFINITY, f32::NAN))),
            [true, true, false]
        );
        assert_eq!(
            TestOp::ALL.map(|op| t(op, DType::Complex64, &c(1.0, f32::NEG_INFINITY))),
            [false, true, false]
        );
    }

    #[test]
    fn runs_agree_with_elements() {
        // Strided, reversed and broadcast operands through the run loop, every kind.
        let xs: Vec<f32> = vec![1.0, -0.0, f32::NAN, 3.0, f32::INFINITY, -2.0];
        let bytes: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
        let zero = 0.0f32.to_le_bytes();
        let kinds = [
            Kind::Cmp(Canon::Eq, DType::F32),
            Kind::Cmp(Canon::Lt, DType::F32),
            Kind::Cmp(Canon::Le, DType::F32),
            Kind::Test(TestOp::IsNan, DType::F32),
            Kind::Test(TestOp::IsInf, DType::F32),
            Kind::Test(TestOp::IsFinite, DType::F32),
        ];
        for kind in kinds {
            let mut out = [9u8; 6];
            // SAFETY: six f32 read forwards from `bytes`, the scalar `zero` at stride 0.
            unsafe { eval_run(kind, bytes.as_ptr(), 4, zero.as_ptr(), 0, &mut out) };
            let want: Vec<u8> = (0..6)
                .map(|i| eval(kind, &bytes[4 * i..], &zero) as u8)
                .collect();
            assert_eq!(out.as_slice(), want.as_slice(), "{kind}");
            let mut rev = [9u8; 6];
            // SAFETY: the same six elements, backwards from the last.
            unsafe { eval_run(kind, bytes.as_ptr().add(20), -4, zero.as_ptr(), 0, &mut rev) };
            let want_rev: Vec<u8> = want.iter().rev().copied().collect();
            assert_eq!(rev.as_slice(), want_rev.as_slice(), "reversed {kind}");
        }
    }
}

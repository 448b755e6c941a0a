//! The `ndarray` feature: select on arrays and views of every element type, fixed and dynamic
//! dimensionality, any strides (reversed, sliced, transposed, broadcast), into new arrays and
//! into mutable views; errors leave the output untouched. Checked against a reference built with
//! ndarray's own broadcasting and iteration, bytes compared.
//!
//! Predicates (`select_cond`, `Cond`): every comparison and test, negated or not, on several
//! operand dtypes (f32, f64, f16, i64 with an f32 select, u8) with their edge values, on every
//! engine, every broadcast mode and view kind, each result compared bytewise with two
//! references: the mask form fed a mask computed here with Rust's own operators, and
//! `Engine::select` with the equivalent `selectjit::Cond` over plain contiguous slices.
#![cfg(feature = "ndarray")]

mod common;

use half::{bf16, f16};
use ndarray::{
    Array, Array1, Array2, Array3, Array4, ArrayD, ArrayRef, ArrayViewD, Axis, Dimension, IxDyn,
    ShapeBuilder, arr0, array, s,
};
use num_complex::Complex;
use selectjit::ndarray::{
    Cond, CondElement, Operand, select, select_cond, select_cond_into, select_into,
};
use selectjit::{
    Backend, Broadcast, CmpOp, Element, Engine, EngineConfig, Error, TensorMut, TensorRef, TestOp,
};

/// An element of type `T` from a bit pattern (every pattern is valid for these types).
fn val<T: Element>(i: usize, salt: u8) -> T {
    let bytes: Vec<u8> = (0..size_of::<T>())
        .map(|b| (i as u8).wrapping_mul(29) ^ salt ^ (b as u8).wrapping_mul(101))
        .collect();
    bytemuck::pod_read_unaligned(&bytes)
}

fn bytes<T: Element, D: Dimension>(a: &ArrayRef<T, D>) -> Vec<u8> {
    a.iter()
        .flat_map(|x| bytemuck::bytes_of(x).to_vec())
        .collect()
}

/// The numpy-mode result by ndarray's broadcasting (same rule for numpy-compatible shapes).
fn reference<C: CondElement + Into<u8>, T: Element, D1: Dimension, D2: Dimension, D3: Dimension>(
    c: &ArrayRef<C, D1>,
    t: &ArrayRef<T, D2>,
    e: &ArrayRef<T, D3>,
) -> ArrayD<T> {
    let shape = selectjit::output_shape(Broadcast::Numpy, c.shape(), t.shape(), e.shape()).unwrap();
    let sh = IxDyn(&shape);
    let (cb, tb, eb) = (
        c.broadcast(sh.clone()).unwrap(),
        t.broadcast(sh.clone()).unwrap(),
        e.broadcast(sh.clone()).unwrap(),
    );
    let mut out = ArrayD::from_elem(sh, T::zeroed());
    ndarray::Zip::from(&mut out)
        .and(&cb)
        .and(&tb)
        .and(&eb)
        .for_each(|o, &c, &t, &e| *o = if c.into() != 0 { t } else { e });
    out
}

/// One dtype through fixed and dynamic dimensionalities and every view kind.
fn every_view_kind<T: Element>() {
    let engines = [
        Engine::with_config(EngineConfig::new().exact_after(1).verify(true)).expect("engine"),
        Engine::with_config(EngineConfig::new().backend(Backend::Static)).unwrap(),
        Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap(),
    ];
    let base3 = Array3::from_shape_fn((4, 5, 6), |(i, j, k)| val::<T>(i * 30 + j * 6 + k, 0x3c));
    let else3 = Array3::from_shape_fn((4, 5, 6), |(i, j, k)| val::<T>(i * 30 + j * 6 + k, 0xa5));
    let cond_u8 = Array3::from_shape_fn((4, 5, 6), |(i, j, k)| {
        [0u8, 1, 0x80, 0, 3][(i + 2 * j + k) % 5]
    });
    let cond_b = cond_u8.mapv(|x| x != 0);
    for eng in &engines {
        // Ix3: reversed then, sliced with a negative step else, transposed cond.
        let t = base3.slice(s![..;-1, .., ..;-1]);
        let e = else3.slice(s![.., ..;-1, ..]);
        let c = cond_b.view();
        let got = eng.select_array(&c, &t, &e, Broadcast::Numpy).unwrap();
        assert_eq!(
            bytes(&got),
            bytes(&reference(&c, &t, &e)),
            "{} reversed",
            T::DTYPE
        );
        // Sliced with steps (views with gaps), u8 cond transposed.
        let t = base3.slice(s![..;2, 1..;-2, ..]);
        let e = else3.slice(s![1..;2, ..2, ..]);
        let c = cond_u8.slice(s![..2, 3.., ..;-1]);
        let got = eng.select_array(&c, &t, &e, Broadcast::Numpy).unwrap();
        assert_eq!(
            bytes(&got),
            bytes(&reference(&c, &t, &e)),
            "{} sliced",
            T::DTYPE
        );
        // Transposed (permuted axes) inputs of the same logical shape.
        let t = base3.view().permuted_axes([2, 1, 0]);
        let e = else3.view().permuted_axes([2, 1, 0]);
        let mut c = cond_u8.view().permuted_axes([2, 1, 0]);
        c.invert_axis(Axis(1));
        let got = eng.select_array(&c, &t, &e, Broadcast::Numpy).unwrap();
        assert_eq!(
            bytes(&got),
            bytes(&reference(&c, &t, &e)),
            "{} transposed",
            T::DTYPE
        );
        // Broadcast: cond a row [6], then [5, 6] reversed, else a scalar (Ix0), out [5, 6].
        let c1: Array1<bool> = (0..6).map(|i| i % 2 == 0).collect();
        let t2 = base3.index_axis(Axis(0), 1);
        let t2 = t2.slice(s![..;-1, ..]);
        let e0 = ndarray::arr0(val::<T>(7, 1));
        let got = eng.select_array(&c1, &t2, &e0, Broadcast::Numpy).unwrap();
        assert_eq!(got.shape(), &[5, 6]);
        assert_eq!(
            bytes(&got),
            bytes(&reference(&c1, &t2, &e0)),
            "{} broadcast",
            T::DTYPE
        );
        // ndarray-broadcast views (stride 0) as inputs.
        let cb = c1.broadcast((5, 6)).unwrap();
        let got2 = eng.select_array(&cb, &t2, &e0, Broadcast::Numpy).unwrap();
        assert_eq!(bytes(&got2), bytes(&got), "{} stride-0 cond", T::DTYPE);
        // Ix1, Ix2, Ix4 and IxDyn.
        let a1 = base3.slice(s![1, 2, ..;-1]);
        let got = eng
            .select_array(
                &cond_b.slice(s![0, 0, ..]),
                &a1,
                &else3.slice(s![3, 4, ..]),
                Broadcast::Exact,
            )
            .unwrap();
        let want = reference(&cond_b.slice(s![0, 0, ..]), &a1, &else3.slice(s![3, 4, ..]));
        assert_eq!(bytes(&got), bytes(&want), "{} Ix1", T::DTYPE);
        let a4: Array4<T> = Array4::from_shape_fn((2, 3, 1, 4).f(), |(a, b, c, d)| {
            val::<T>(a * 12 + b * 4 + c + d, 9)
        });
        let c4 = Array2::from_shape_fn((3, 4), |(i, j)| ((i + j) % 3) as u8);
        let got = eng
            .select_array(&c4, &a4.slice(s![..;-1, .., .., ..]), &e0, Broadcast::Numpy)
            .unwrap();
        let want = reference(&c4, &a4.slice(s![..;-1, .., .., ..]), &e0);
        assert_eq!(bytes(&got), bytes(&want), "{} Ix4", T::DTYPE);
        let ad: ArrayD<T> = base3.clone().into_dyn();
        let cd: ArrayD<bool> = cond_b.clone().into_dyn();
        let got = eng
            .select_array(
                &cd,
                &ad.slice(s![.., ..;-1, ..]),
                &else3,
                Broadcast::TwoStep,
            )
            .unwrap();
        let want = reference(&cd, &ad.slice(s![.., ..;-1, ..]), &else3);
        assert_eq!(bytes(&got), bytes(&want), "{} IxDyn", T::DTYPE);
    }
}

#[test]
fn every_dtype_and_view_kind() {
    every_view_kind::<i8>();
    every_view_kind::<u8>();
    every_view_kind::<i16>();
    every_view_kind::<u16>();
    every_view_kind::<i32>();
    every_view_kind::<u32>();
    every_view_kind::<i64>();
    every_view_kind::<u64>();
    every_view_kind::<f16>();
    every_view_kind::<bf16>();
    every_view_kind::<f32>();
    every_view_kind::<f64>();
    every_view_kind::<Complex<f32>>();
    every_view_kind::<Complex<f64>>();
}

/// Into arrays and mutable views: reversed (dense), sliced with gaps, Fortran order, fixed and
/// dynamic dimensionality; elements outside a sliced view are left alone.
#[test]
fn into_mutable_views() {
    let t = Array2::from_shape_fn((3, 4), |(i, j)| (10 * i + j) as f32);
    let e = array![-1.0f32, -2.0, -3.0, -4.0];
    let c = array![[true], [false], [true]]; // [3, 1]
    let want = reference(&c, &t, &e)
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();

    // Reversed both ways: a dense view with negative strides.
    let mut out = Array2::<f32>::zeros((3, 4));
    select_into(
        &c,
        &t,
        &e,
        &mut out.slice_mut(s![..;-1, ..;-1]),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(out.slice(s![..;-1, ..;-1]), want);

    // Every other column of a wider array, reversed: the gaps keep their values.
    let mut wide = Array2::<f32>::from_elem((3, 8), 7.5);
    select_into(
        &c,
        &t,
        &e,
        &mut wide.slice_mut(s![.., ..;-2]),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(wide.slice(s![.., ..;-2]), want);
    for j in (0..8).step_by(2) {
        assert!(
            wide.column(j).iter().all(|&x| x == 7.5),
            "gap column {j} written"
        );
    }

    // Fortran-order arrays and IxDyn views.
    let mut f = Array2::<f32>::zeros((3, 4).f());
    select_into(&c, &t, &e, &mut f, Broadcast::Numpy).unwrap();
    assert_eq!(f, want);
    let mut d = ArrayD::<f32>::zeros(IxDyn(&[3, 4]));
    select_into(
        &c,
        &t.view().into_dyn(),
        &e,
        &mut d.view_mut(),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(d, want.clone().into_dyn());

    // A mutable view reversed along its middle axis, Ix3, u8 cond.
    let t3 = Array3::from_shape_fn((2, 3, 5), |(a, b, k)| (a * 100 + b * 10 + k) as i64);
    let c3 = Array3::from_shape_fn((2, 1, 5), |(a, _, k)| ((a + k) % 2) as u8);
    let mut o3 = Array3::<i64>::zeros((2, 3, 5));
    select_into(
        &c3,
        &t3,
        &ndarray::arr0(-1i64),
        &mut o3.slice_mut(s![.., ..;-1, ..]),
        Broadcast::Numpy,
    )
    .unwrap();
    let want3 = reference(&c3, &t3, &ndarray::arr0(-1i64))
        .into_dimensionality::<ndarray::Ix3>()
        .unwrap();
    assert_eq!(o3.slice(s![.., ..;-1, ..]), want3);
}

/// Zero-size arrays, reversed ones included.
#[test]
fn zero_size() {
    let t = Array2::<f64>::zeros((0, 3));
    let c = Array1::from(vec![true, false, true]);
    let got = select(
        &c,
        &t.slice(s![..;-1, ..;-1]),
        &ndarray::arr0(1.0f64),
        Broadcast::Numpy,
    )
    .unwrap();
    assert_eq!(got.shape(), &[0, 3]);
    let mut out = Array2::<f64>::zeros((0, 3));
    select_into(
        &c,
        &t,
        &ndarray::arr0(1.0),
        &mut out.slice_mut(s![..;-1, ..]),
        Broadcast::Numpy,
    )
    .unwrap();
}

/// Shapes the mode refuses, wrong output shapes and ranks: errors that name the operand and the
/// dimension; the output is untouched.
#[test]
fn errors_leave_the_output_alone() {
    let t = Array2::from_shape_fn((2, 3), |(i, j)| (i * 3 + j) as u16);
    let e = Array1::from(vec![9u16; 3]);
    // two-step: cond may not grow the output; here it has more dims than then/else.
    let c3 = Array3::<bool>::from_elem((3, 1, 3), true);
    let r = select(&c3, &t, &e, Broadcast::TwoStep);
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("cond") && msg.contains("rank 3"), "{msg}");
    // none: identical shapes only, the message names the dims.
    let r = select(&Array2::<u8>::ones((2, 3)), &t, &e, Broadcast::Exact);
    assert!(matches!(r, Err(Error::Broadcast(_))), "{r:?}");
    // numpy: 2 against 3.
    let c = Array1::from(vec![true, false]);
    let r = select(&c, &t, &e, Broadcast::Numpy);
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("dim"), "{msg}");
    // Output of the wrong shape or rank, reversed: untouched.
    let c = Array1::from(vec![true, false, true]);
    let mut out = Array2::<u16>::from_elem((3, 2), 5);
    let r = select_into(
        &c,
        &t,
        &e,
        &mut out.slice_mut(s![..;-1, ..]),
        Broadcast::Numpy,
    );
    assert!(matches!(r, Err(Error::OutputShape { .. })), "{r:?}");
    assert!(out.iter().all(|&x| x == 5));
    let mut out3 = Array3::<u16>::from_elem((1, 2, 3), 5);
    let r = select_into(&c, &t, &e, &mut out3, Broadcast::Numpy);
    assert!(matches!(r, Err(Error::OutputShape { .. })), "{r:?}");
    assert!(out3.iter().all(|&x| x == 5));
    // With gaps (goes through a temporary): still untouched on error.
    let mut wide = Array2::<u16>::from_elem((2, 6), 5);
    let r = select_into(
        &c,
        &t,
        &e,
        &mut wide.slice_mut(s![.., ..;2]),
        Broadcast::Exact,
    );
    assert!(r.is_err());
    assert!(wide.iter().all(|&x| x == 5));
}

/// Results are `Array<T, IxDyn>`; a fixed dimensionality comes back with `into_dimensionality`.
#[test]
fn dynamic_result_converts_back() {
    let t: Array<f32, _> = Array2::from_elem((2, 2), 1.0f32);
    let out = select(
        &Array1::from(vec![true, false]),
        &t,
        &ndarray::arr0(0.0f32),
        Broadcast::Numpy,
    )
    .unwrap()
    .into_dimensionality::<ndarray::Ix2>()
    .unwrap();
    assert_eq!(out, array![[1.0, 0.0], [1.0, 0.0]]);
}

// Predicates.

/// An operand dtype of a predicate with Rust's own semantics for the comparisons and tests (the
/// oracle, independent of the library's predicate code), and its edge values.
trait Num: Element + std::fmt::Debug {
    fn cmp(op: CmpOp, a: Self, b: Self) -> bool;
    fn test(op: TestOp, a: Self) -> bool;
    /// ±0, ±1, 2.5, ±inf, NaNs (quiet, signalling, negative with a payload), a subnormal, the
    /// largest finite value; integer extremes.
    fn edges() -> Vec<Self>;
}

macro_rules! float_num {
    ($t:ty, $to:expr, [$($bits:expr),* $(,)?]) => {
        impl Num for $t {
            fn cmp(op: CmpOp, a: Self, b: Self) -> bool {
                common::cmp_ord(op, $to(a), $to(b))
            }
            fn test(op: TestOp, a: Self) -> bool {
                let v: f64 = $to(a);
                match op {
                    TestOp::IsNan => v.is_nan(),
                    TestOp::IsInf => v.is_infinite(),
                    TestOp::IsFinite => v.is_finite(),
                }
            }
            fn edges() -> Vec<Self> {
                vec![$(<$t>::from_bits($bits)),*]
            }
        }
    };
}
float_num!(
    f32,
    f64::from,
    [
        0,
        0x8000_0000,
        0x3f80_0000,
        0xbf80_0000,
        0x4020_0000,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
        0x7f80_0001,
        0xffc0_1234,
        1,
        0x7f7f_ffff,
    ]
);
float_num!(
    f64,
    |v: f64| v,
    [
        0,
        0x8000_0000_0000_0000,
        0x3ff0_0000_0000_0000,
        0xbff0_0000_0000_0000,
        0x4004_0000_0000_0000,
        0x7ff0_0000_0000_0000,
        0xfff0_0000_0000_0000,
        0x7ff8_0000_0000_0000,
        0x7ff0_0000_0000_0001,
        0xfff8_0000_dead_beef,
        1,
        0x7fef_ffff_ffff_ffff,
    ]
);
float_num!(
    f16,
    |v: f16| f64::from(v.to_f32()),
    [
        0, 0x8000, 0x3c00, 0xbc00, 0x4100, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe12, 1, 0x7bff,
    ]
);

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn cmp(op: CmpOp, a: Self, b: Self) -> bool {
                common::cmp_ord(op, a, b)
            }
            fn test(op: TestOp, _: Self) -> bool {
                op == TestOp::IsFinite
            }
            fn edges() -> Vec<Self> {
                vec![<$t>::MIN, <$t>::MAX, 0, 1, 2, <$t>::MAX / 2 + 1]
            }
        }
    )*};
}
int_num!(i64, u8);

/// An array of edge values (frequent ties between two such arrays).
fn fill<U: Num>(shape: &[usize], salt: u64) -> ArrayD<U> {
    let e = U::edges();
    let mut i = 0u64;
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        i += 1;
        let h = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt).wrapping_mul(0xff51_afd7_ed55_8ccd);
        e[(h >> 40) as usize % e.len()]
    })
}

/// An array of arbitrary bit patterns (NaN payloads included): then / else.
fn pattern<T: Element>(shape: &[usize], salt: u8) -> ArrayD<T> {
    let mut i = 0;
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        i += 1;
        val::<T>(i, salt)
    })
}

/// A predicate operand as a test case holds it.
#[derive(Clone)]
enum Side<'a, U> {
    View(ArrayViewD<'a, U>),
    Scalar(U),
}

impl<'a, U: Num> Side<'a, U> {
    fn operand(&self) -> Operand<'_, U> {
        match self {
            Side::View(v) => v.into(),
            Side::Scalar(x) => (*x).into(),
        }
    }
    /// The values in a standard-layout array (rank 0 for a scalar).
    fn compact(&self) -> ArrayD<U> {
        match self {
            Side::View(v) => v.as_standard_layout().into_owned(),
            Side::Scalar(x) => arr0(*x).into_dyn(),
        }
    }
}

fn view<'a, U, D: Dimension>(v: ndarray::ArrayView<'a, U, D>) -> Side<'a, U> {
    Side::View(v.into_dyn())
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Cmp(CmpOp),
    Test(TestOp),
}

/// The predicate, built with the named constructors, or `cmp` / `test` and a negation.
fn make_pred<'a, U: Num>(
    op: Op,
    l: &'a Side<'_, U>,
    r: Option<&'a Side<'_, U>>,
    not: bool,
) -> Cond<'a, U> {
    let l = l.operand();
    match (op, r.map(Side::operand)) {
        (Op::Cmp(c), Some(r)) if not => Cond::cmp(c, l, r).not(),
        (Op::Test(t), None) if not => !Cond::test(t, l),
        (Op::Cmp(c), Some(r)) => match c {
            CmpOp::Eq => Cond::eq(l, r),
            CmpOp::Ne => Cond::ne(l, r),
            CmpOp::Lt => Cond::lt(l, r),
            CmpOp::Le => Cond::le(l, r),
            CmpOp::Gt => Cond::gt(l, r),
            CmpOp::Ge => Cond::ge(l, r),
        },
        (Op::Test(t), None) => match t {
            TestOp::IsNan => Cond::isnan(l),
            TestOp::IsInf => Cond::isinf(l),
            TestOp::IsFinite => Cond::isfinite(l),
        },
        _ => unreachable!("a comparison has two operands, a test one"),
    }
}

/// numpy's broadcast of two shapes (compatible ones).
fn np_broadcast(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    let at = |s: &[usize], k: usize| (k + s.len()).checked_sub(rank).map_or(1, |j| s[j]);
    (0..rank).map(|k| at(a, k).max(at(b, k))).collect()
}

/// Every comparison of `lhs` and `rhs` (or every test of `lhs` when `rhs` is `None`), negated
/// and not, on every engine: `select_array_cond` and `select_array_cond_into` (into a reversed
/// view, and into a view with gaps whose gaps keep their values), bytes compared with the mask
/// form fed a mask computed with Rust's operators, and with `Engine::select` of the equivalent
/// `selectjit::Cond` over plain contiguous slices.
#[allow(clippy::too_many_arguments)]
fn check_pred<'a, U: Num, T: Element>(
    engines: &[(String, Engine)],
    what: &str,
    lhs: Side<'a, U>,
    rhs: Option<Side<'a, U>>,
    then: ArrayViewD<'_, T>,
    else_: ArrayViewD<'_, T>,
    mode: Broadcast,
) {
    let interp = Engine::with_config(EngineConfig::new().backend(Backend::Interp)).unwrap();
    let (la, ra) = (lhs.compact(), rhs.as_ref().map(Side::compact));
    let pshape = match &ra {
        Some(r) => np_broadcast(la.shape(), r.shape()),
        None => la.shape().to_vec(),
    };
    let lb = la.broadcast(IxDyn(&pshape)).unwrap();
    let rb = ra.as_ref().map(|r| r.broadcast(IxDyn(&pshape)).unwrap());
    let ops: Vec<Op> = match rhs {
        Some(_) => CmpOp::ALL.map(Op::Cmp).to_vec(),
        None => TestOp::ALL.map(Op::Test).to_vec(),
    };
    let (tc, ec) = (then.as_standard_layout(), else_.as_standard_layout());
    for op in ops {
        for not in [false, true] {
            let label = format!(
                "{what}: {op:?} (not {not}) of {} selecting {}, {mode:?}",
                U::DTYPE,
                T::DTYPE
            );
            // Reference 1: the mask form, the mask computed here.
            let mask: ArrayD<u8> = match (op, &rb) {
                (Op::Cmp(c), Some(rb)) => ndarray::Zip::from(&lb)
                    .and(rb)
                    .map_collect(|&a, &b| u8::from(U::cmp(c, a, b) ^ not)),
                (Op::Test(t), None) => lb.map(|&a| u8::from(U::test(t, a) ^ not)),
                _ => unreachable!(),
            };
            let want = interp
                .select_array(&mask, &then, &else_, mode)
                .unwrap_or_else(|e| panic!("{label}: the mask form: {e}"));
            // Reference 2: `Engine::select` with the equivalent `selectjit::Cond` over plain slices.
            let lt = TensorRef::new(la.as_slice().unwrap(), la.shape());
            let cond = match (op, &ra) {
                (Op::Cmp(c), Some(ra)) => {
                    selectjit::Cond::cmp(c, lt, TensorRef::new(ra.as_slice().unwrap(), ra.shape()))
                }
                (Op::Test(t), None) => selectjit::Cond::test(t, lt),
                _ => unreachable!(),
            };
            let mut plain = vec![T::zeroed(); want.len()];
            let r = interp.select(
                if not { !cond } else { cond },
                TensorRef::new(tc.as_slice().unwrap(), tc.shape()),
                TensorRef::new(ec.as_slice().unwrap(), ec.shape()),
                TensorMut::new(&mut plain, want.shape()),
                mode,
            );
            match r {
                Ok(()) => assert_eq!(
                    bytemuck::cast_slice::<T, u8>(&plain),
                    bytes(&want),
                    "{label}: the references differ"
                ),
                Err(e) => panic!("{label}: Engine::select: {e}"),
            }
            let shape = want.shape().to_vec();
            for (name, eng) in engines {
                let pred = || make_pred(op, &lhs, rhs.as_ref(), not);
                let got = eng
                    .select_array_cond(pred(), &then, &else_, mode)
                    .unwrap_or_else(|e| panic!("{name}, {label}: {e}"));
                assert_eq!(got.shape(), &shape[..], "{name}, {label}");
                assert_eq!(bytes(&got), bytes(&want), "{name}, {label}");
                // Into a view reversed along every axis.
                let mut dst = ArrayD::<T>::from_elem(IxDyn(&shape), val(1, 0x77));
                let mut rev = dst.view_mut();
                for k in 0..rev.ndim() {
                    rev.invert_axis(Axis(k));
                }
                eng.select_array_cond_into(pred(), &then, &else_, &mut rev, mode)
                    .unwrap_or_else(|e| panic!("{name}, {label}, into reversed: {e}"));
                assert_eq!(bytes(&rev), bytes(&want), "{name}, {label}, into reversed");
                // Into every other element along the last axis of a wider array, backwards.
                if let Some(&last) = shape.last() {
                    let mut wshape = shape.clone();
                    *wshape.last_mut().unwrap() = 2 * last;
                    let orig = pattern::<T>(&wshape, 0x99);
                    let mut wide = orig.clone();
                    let n = wshape.len();
                    let gaps = |k: usize| {
                        if k + 1 == n {
                            ndarray::Slice::new(0, None, -2)
                        } else {
                            ndarray::Slice::from(..)
                        }
                    };
                    eng.select_array_cond_into(
                        pred(),
                        &then,
                        &else_,
                        &mut wide.slice_each_axis_mut(|ax| gaps(ax.axis.index())),
                        mode,
                    )
                    .unwrap_or_else(|e| panic!("{name}, {label}, into gaps: {e}"));
                    let mut expect = orig.clone();
                    expect
                        .slice_each_axis_mut(|ax| gaps(ax.axis.index()))
                        .assign(&want);
                    assert_eq!(bytes(&wide), bytes(&expect), "{name}, {label}, into gaps");
                }
            }
        }
    }
}

/// The cases of one operand dtype `U` and selected dtype `T`: every view kind (contiguous,
/// reversed, transposed, sliced with gaps forwards and backwards, ndarray-broadcast stride-0
/// views, scalars on either side, fixed and dynamic dimensionality) and every broadcast mode.
fn pred_cases<U: Num, T: Element>(engines: &[(String, Engine)], salt: u64) {
    let a = fill::<U>(&[6, 5], salt)
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();
    let big = fill::<U>(&[12, 11], salt ^ 1)
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();
    let bt = fill::<U>(&[5, 6], salt ^ 2)
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();
    let row = fill::<U>(&[5], salt ^ 3);
    let col = fill::<U>(&[6, 1], salt ^ 4);
    let a3 = fill::<U>(&[2, 6, 5], salt ^ 5);
    let long = fill::<U>(&[3, 70], salt ^ 6)
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();
    let long2 = fill::<U>(&[3, 70], salt ^ 7);
    let x = U::edges()[salt as usize % U::edges().len()];
    let t = pattern::<T>(&[6, 5], 0x3c)
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();
    let e = pattern::<T>(&[6, 5], 0xa5);
    let e_f = Array2::from_shape_vec(
        (6, 5).f(),
        pattern::<T>(&[30], 0xc3).into_raw_vec_and_offset().0,
    )
    .unwrap();
    let e_row = pattern::<T>(&[5], 0x5a);
    let e_col = pattern::<T>(&[6, 1], 0x6b);
    let e6 = pattern::<T>(&[6], 0x7e);
    let sc = pattern::<T>(&[], 0x11);
    let tl = pattern::<T>(&[3, 70], 0x21);
    let el = pattern::<T>(&[70], 0x12);
    let gaps_rev = big.slice(s![1..;-2, 1..;-2]); // [6, 5], negative steps with gaps
    let gaps_fwd = big.slice(s![..;2, 1..;2]); // [6, 5]
    fn v<U>(x: &ArrayD<U>) -> Side<'_, U> {
        view(x.view())
    }
    let en = engines;
    let numpy = Broadcast::Numpy;
    let (t2, e2) = (t.view().into_dyn(), e_f.view().into_dyn());
    check_pred(
        en,
        "contiguous vs scalar",
        view(a.view()),
        Some(Side::Scalar(x)),
        t2.clone(),
        sc.view(),
        numpy,
    );
    check_pred(
        en,
        "scalar vs reversed",
        Side::Scalar(x),
        Some(view(a.slice(s![..;-1, ..;-1]))),
        sc.view(),
        e.view(),
        numpy,
    );
    check_pred(
        en,
        "reversed vs row",
        view(a.slice(s![..;-1, ..;-1])),
        Some(v(&row)),
        t.slice(s![..;-1, ..]).into_dyn(),
        e_row.view(),
        numpy,
    );
    check_pred(
        en,
        "transposed vs gaps",
        view(bt.t()),
        Some(view(gaps_fwd.view())),
        t2.clone(),
        e2.clone(),
        numpy,
    );
    check_pred(
        en,
        "gaps backwards vs transposed",
        view(gaps_rev.view()),
        Some(view(bt.t())),
        e2.clone(),
        t.slice(s![.., ..;-1]).into_dyn(),
        numpy,
    );
    check_pred(
        en,
        "column vs row",
        v(&col),
        Some(v(&row)),
        sc.view(),
        e.view(),
        numpy,
    );
    check_pred(
        en,
        "stride-0 view vs 3-d",
        view(row.broadcast(IxDyn(&[6, 5])).unwrap()),
        Some(v(&a3)),
        t2.clone(),
        sc.view(),
        numpy,
    );
    check_pred(
        en,
        "long rows",
        view(long.slice(s![.., ..;-1])),
        Some(v(&long2)),
        tl.view(),
        el.view(),
        numpy,
    );
    check_pred(
        en,
        "test, contiguous",
        view(a.view()),
        None,
        t2.clone(),
        e.view(),
        numpy,
    );
    check_pred(
        en,
        "test, gaps backwards",
        view(gaps_rev.view()),
        None,
        sc.view(),
        e2.clone(),
        numpy,
    );
    check_pred(
        en,
        "test, stride-0 view",
        view(row.broadcast(IxDyn(&[6, 5])).unwrap()),
        None,
        t2.clone(),
        e.view(),
        numpy,
    );
    check_pred(
        en,
        "test, scalar",
        Side::Scalar(x),
        None,
        t2.clone(),
        e.view(),
        numpy,
    );
    check_pred(
        en,
        "test, long rows",
        view(long.t()),
        None,
        el.view().insert_axis(Axis(1)),
        tl.t().into_dyn(),
        numpy,
    );
    // two-step: the predicate goes into the output one way.
    check_pred(
        en,
        "two-step",
        v(&col),
        Some(Side::Scalar(x)),
        t2.clone(),
        e_row.view(),
        Broadcast::TwoStep,
    );
    check_pred(
        en,
        "two-step, test",
        view(a.slice(s![..;-1, ..])),
        None,
        t2.clone(),
        e_row.view(),
        Broadcast::TwoStep,
    );
    // none: identical shapes.
    check_pred(
        en,
        "none",
        view(bt.t()),
        Some(view(gaps_fwd.view())),
        t.slice(s![..;-1, ..]).into_dyn(),
        e.view(),
        Broadcast::Exact,
    );
    // pdpd: the output is then's shape; the predicate and else go into it.
    check_pred(
        en,
        "pdpd axis 0",
        view(a.column(1)),
        Some(Side::Scalar(x)),
        t2.clone(),
        e6.view(),
        Broadcast::Pdpd { axis: 0 },
    );
    check_pred(
        en,
        "pdpd axis -1",
        v(&row),
        Some(view(a.row(2))),
        t2,
        e_col.view(),
        Broadcast::Pdpd { axis: -1 },
    );
}

fn pred_engines() -> Vec<(String, Engine)> {
    common::all_engines(&EngineConfig::new())
}

#[test]
fn predicates_f32_and_f64() {
    let e = pred_engines();
    pred_cases::<f32, f32>(&e, 1);
    pred_cases::<f64, f64>(&e, 2);
}

#[test]
fn predicates_other_dtypes_than_the_selected() {
    let e = pred_engines();
    // An i64 mask compared, f32 selected; f32 compared, u16 selected.
    pred_cases::<i64, f32>(&e, 3);
    pred_cases::<f32, u16>(&e, 4);
}

#[test]
fn predicates_f16_and_u8() {
    let e = pred_engines();
    pred_cases::<f16, f16>(&e, 5);
    pred_cases::<u8, u8>(&e, 6);
}

/// The forms the predicates are for, each against a plain loop, bit for bit, with the operands
/// as `&Array`, `&view`, `&ArrayRef` and untyped literals:
/// `where(x > 0, x, 0)`, `where(mask == 0, -inf, scores)`, `where(isnan(x), 0, x)`,
/// `where(a < b, a, b)`.
#[test]
fn the_common_forms_match_plain_loops() {
    let edges = f32::edges();
    let x = Array2::from_shape_fn((3, 7), |(i, j)| edges[(i * 7 + j) % edges.len()]);
    let numpy = Broadcast::Numpy;

    // ReLU of a reversed view.
    let xr = x.slice(s![..;-1, ..]);
    let relu = select_cond(Cond::gt(&xr, 0.0), &xr, &arr0(0.0), numpy).unwrap();
    let want = xr.map(|&v| if v > 0.0 { v } else { 0.0 });
    assert_eq!(bytes(&relu), bytes(&want), "relu");

    // An i64 mask per batch and key, broadcast over the heads, over f32 scores.
    let mask = Array3::from_shape_fn((2, 1, 5), |(b, _, k)| ((b + k) % 3) as i64 - 1);
    let scores = Array3::from_shape_fn((2, 3, 5), |(b, h, k)| edges[(b * 15 + h * 5 + k) % 12]);
    let ninf = arr0(f32::NEG_INFINITY);
    let got = select_cond(Cond::eq(&mask, 0), &ninf, &scores, numpy).unwrap();
    let want = Array3::from_shape_fn((2, 3, 5), |(b, h, k)| {
        if mask[[b, 0, k]] == 0 {
            f32::NEG_INFINITY
        } else {
            scores[[b, h, k]]
        }
    });
    assert_eq!(bytes(&got), bytes(&want), "attention mask");

    // isnan through a function on `&ArrayRef`, the input transposed.
    fn nan_to_zero(x: &ArrayRef<f64, ndarray::Ix2>) -> ArrayD<f64> {
        select_cond(Cond::isnan(x), &arr0(0.0), x, Broadcast::Numpy).unwrap()
    }
    let y = Array2::from_shape_fn((4, 3), |(i, j)| f64::edges()[(i * 3 + j) % 12]);
    let got = nan_to_zero(&y.t());
    let want = y.t().map(|&v| if v.is_nan() { 0.0 } else { v });
    assert_eq!(bytes(&got), bytes(&want), "nan to zero");

    // The element-wise minimum of an array and a reversed view, into a reversed output.
    let a = Array2::from_shape_fn((3, 7), |(i, j)| edges[(i * 5 + j * 3) % 12]);
    let xv = x.slice(s![.., ..;-1]);
    let mut out = Array2::<f32>::zeros((3, 7));
    select_cond_into(
        Cond::lt(&a, &xv),
        &a,
        &xv,
        &mut out.slice_mut(s![..;-1, ..]),
        numpy,
    )
    .unwrap();
    let want = ndarray::Zip::from(&a)
        .and(&xv)
        .map_collect(|&p, &q| if p < q { p } else { q });
    assert_eq!(bytes(&out.slice(s![..;-1, ..])), bytes(&want), "minimum");

    // A predicate is a value: kept, cloned, negated with `!`.
    let positive = Cond::gt(&x, 0.0);
    let a1 = select_cond(positive.clone(), &arr0(1u8), &arr0(0u8), numpy).unwrap();
    let a0 = select_cond(!positive, &arr0(1u8), &arr0(0u8), numpy).unwrap();
    assert!(a1.iter().zip(&a0).all(|(p, q)| p + q == 1));
    assert_eq!(a1, x.map(|&v| u8::from(v > 0.0)).into_dyn());
}

/// Predicate errors: operands that do not broadcast (named as written, for every comparison,
/// `>` and `>=` included), a predicate shape the mode refuses (named as `cond`, whose place it
/// takes), outputs of the wrong shape; the output is untouched, dense or with gaps.
#[test]
fn predicate_errors_leave_the_output_alone() {
    let numpy = Broadcast::Numpy;
    let a = array![1.0f32, 2.0];
    let b = array![1.0f32, 2.0, 3.0];
    let t = Array2::<f32>::zeros((2, 3));
    let zero = arr0(0.0f32);
    for op in CmpOp::ALL {
        let msg = select_cond(Cond::cmp(op, &a, &b), &t, &zero, numpy)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("lhs dim 0 is 2") && msg.contains("rhs dim 0 is 3"),
            "{op:?}: {msg}"
        );
        let mut out = Array2::<f32>::from_elem((2, 3), 5.0);
        let r = select_cond_into(Cond::cmp(op, &a, &b), &t, &zero, &mut out, numpy);
        assert!(matches!(r, Err(Error::Broadcast(_))), "{op:?}: {r:?}");
        let mut wide = Array2::<f32>::from_elem((2, 6), 5.0);
        let r = Engine::new().select_array_cond_into(
            Cond::cmp(op, &a, &b),
            &t,
            &zero,
            &mut wide.slice_mut(s![.., ..;-2]),
            numpy,
        );
        assert!(matches!(r, Err(Error::Broadcast(_))), "{op:?}: {r:?}");
        assert!(
            out.iter().chain(&wide).all(|&v| v == 5.0),
            "{op:?}: written"
        );
    }
    // none: identical shapes; the predicate [2] is cond there.
    let x = Array2::from_elem((2, 3), 1.0f32);
    let msg = select_cond(Cond::gt(&a.slice(s![..;-1]), 0.0), &x, &x, Broadcast::Exact)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("cond [2]"), "{msg}");
    // two-step: a predicate of rank 3 would grow the output.
    let big = Array3::<f32>::zeros((3, 2, 3));
    let msg = Engine::new()
        .select_array_cond(Cond::isnan(&big), &x, &x, Broadcast::TwoStep)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("cond") && msg.contains("rank 3"), "{msg}");
    // Outputs of the wrong shape, reversed or with gaps.
    let mut out = Array2::<f32>::from_elem((3, 2), 5.0);
    let r = select_cond_into(
        Cond::gt(&x, 0.0),
        &x,
        &x,
        &mut out.slice_mut(s![..;-1, ..]),
        numpy,
    );
    assert!(matches!(r, Err(Error::OutputShape { .. })), "{r:?}");
    let mut wide = Array2::<f32>::from_elem((3, 4), 5.0);
    let r = select_cond_into(
        Cond::isinf(&x),
        &x,
        &x,
        &mut wide.slice_mut(s![.., ..;2]),
        numpy,
    );
    assert!(matches!(r, Err(Error::OutputShape { .. })), "{r:?}");
    let mut o3 = Array3::<f32>::from_elem((1, 2, 3), 5.0);
    let r = select_cond_into(Cond::isfinite(&x), &x, &x, &mut o3, numpy);
    assert!(matches!(r, Err(Error::OutputShape { .. })), "{r:?}");
    assert!(
        out.iter().chain(&wide).chain(&o3).all(|&v| v == 5.0),
        "written"
    );
    // Empty outputs still check shapes.
    let e0 = Array2::<f32>::zeros((0, 3));
    let got = select_cond(Cond::lt(&e0, 1.0), &e0, &zero, numpy).unwrap();
    assert_eq!(got.shape(), &[0, 3]);
    let mut o0 = Array2::<f32>::zeros((0, 2));
    let r = select_cond_into(Cond::lt(&e0, 1.0), &e0, &zero, &mut o0, numpy);
    assert!(matches!(r, Err(Error::OutputShape { .. })), "{r:?}");
}

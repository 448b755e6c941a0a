//! The `ndarray` feature: select on arrays and views of every element type, fixed and dynamic
//! dimensionality, any strides (reversed, sliced, transposed, broadcast), into new arrays and
//! into mutable views; errors leave the output untouched. Checked against a reference built with
//! ndarray's own broadcasting and iteration, bytes compared.
#![cfg(feature = "ndarray")]

use half::{bf16, f16};
use ndarray::{
    Array, Array1, Array2, Array3, Array4, ArrayD, ArrayRef, Axis, Dimension, IxDyn, ShapeBuilder,
    array, s,
};
use num_complex::Complex;
use selectjit::ndarray::{CondElement, select, select_into};
use selectjit::{Backend, Broadcast, Element, Engine, EngineConfig, Error};

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
                Broadcast::None,
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
    let r = select(&Array2::<u8>::ones((2, 3)), &t, &e, Broadcast::None);
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
        Broadcast::None,
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

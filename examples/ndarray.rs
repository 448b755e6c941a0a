//! Select on `ndarray` arrays and views (feature `ndarray`): any dimensionality, memory order
//! and strides — reversed and sliced views included — into a new array or a mutable view, with a
//! mask or a predicate computed in the kernel as the condition.
//!
//! ```sh
//! cargo run --release --features ndarray --example ndarray
//! ```

use ndarray::{Array2, Array3, Axis, arr0, array, s};
use selectjit::ndarray::{Cond, select_cond};
use selectjit::{Broadcast, Engine, Error};

fn main() -> Result<(), Error> {
    // ReLU-style masking of a [2, 3, 4] activation with a per-channel bool cond [3, 1].
    let x = Array3::from_shape_fn((2, 3, 4), |(b, c, k)| (b * 12 + c * 4 + k) as f32 - 10.0);
    let keep = array![[true], [false], [true]];
    let y = selectjit::ndarray::select(&keep, &x, &ndarray::arr0(0.0f32), Broadcast::Numpy)?;
    println!("masked channels:\n{y}");
    assert_eq!(y.shape(), &[2, 3, 4]);

    // A predicate instead of a mask, computed per element in the kernel (no bool array in
    // between): ReLU, where(x > 0, x, 0), in one line.
    let relu = select_cond(Cond::gt(&x, 0.0), &x, &arr0(0.0), Broadcast::Numpy)?;
    assert!(relu.iter().zip(&x).all(|(&r, &v)| r == v.max(0.0)));

    // An i64 padding mask per batch and key over f32 attention scores [batch, heads, keys]:
    // where(pad == 0, -inf, scores), the mask broadcast over the heads.
    let pad = array![[1i64, 1, 1, 0], [1, 1, 0, 0]];
    let scores = Array3::from_shape_fn((2, 3, 4), |(b, h, k)| (b + h + k) as f32 * 0.5);
    let masked = select_cond(
        Cond::eq(&pad.view().insert_axis(Axis(1)), 0),
        &arr0(f32::NEG_INFINITY),
        &scores,
        Broadcast::Numpy,
    )?;
    println!("masked scores:\n{masked}");
    assert_eq!(masked[[1, 2, 2]], f32::NEG_INFINITY);
    assert_eq!(masked[[1, 2, 1]], scores[[1, 2, 1]]);

    // Views as they come: `then` reversed along the last axis (negative stride), `else` the
    // transpose of another array, cond as u8 bytes sliced with a step.
    let a = Array2::from_shape_fn((4, 6), |(i, j)| (10 * i + j) as i32);
    let b = Array2::from_shape_fn((6, 4), |(i, j)| -((10 * j + i) as i32));
    let bytes = Array2::from_shape_fn((4, 12), |(i, j)| ((i + j) % 3) as u8);
    let c = bytes.slice(s![.., ..;2]);
    let out = selectjit::ndarray::select(&c, &a.slice(s![.., ..;-1]), &b.t(), Broadcast::Exact)?;
    println!("mixed views:\n{out}");
    let want = ndarray::Zip::from(&c)
        .and(&a.slice(s![.., ..;-1]))
        .and(&b.t())
        .map_collect(|&c, &t, &e| if c != 0 { t } else { e });
    assert_eq!(out, want.into_dyn());

    // Into an existing array through a reversed mutable view, on an engine of our own.
    let engine = Engine::new();
    let mut dst = Array2::<i32>::zeros((4, 6));
    let mut rev = dst.slice_mut(s![..;-1, ..]);
    engine.select_array_into(&c, &a, &b.t(), &mut rev, Broadcast::Numpy)?;
    let mut back = dst.clone();
    back.invert_axis(Axis(0));
    println!("written through a reversed view:\n{dst}");
    assert_eq!(back.row(0), want_row0(&a, &b, &c));

    // Errors are values, named by operand and dimension; the output is untouched.
    let err = engine
        .select_array_into(&c, &a, &b, &mut dst, Broadcast::Numpy)
        .unwrap_err();
    println!("error: {err}");
    Ok(())
}

fn want_row0(
    a: &Array2<i32>,
    b: &Array2<i32>,
    c: &ndarray::ArrayView2<u8>,
) -> ndarray::Array1<i32> {
    (0..6)
        .map(|j| if c[[0, j]] != 0 { a[[0, j]] } else { b[[j, 0]] })
        .collect()
}

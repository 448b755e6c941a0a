//! The generic path: `select_generic` serves any `Clone` element — here `String`s, as ONNX
//! Where allows — through the reference interpreter, with the same broadcast modes, strides
//! (negative ones included) and checks as the machine-code path.
//!
//! ```sh
//! cargo run --release --example strings
//! ```

use selectjit::{Broadcast, Error, TensorMut, TensorRef, select_generic};

fn main() -> Result<(), Error> {
    // Labels [2, 3]; a per-column cond [3] (any non-zero byte is true); a scalar fallback.
    let labels: Vec<String> = ["cat", "dog", "owl", "ant", "bee", "elk"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let unknown = vec!["<unk>".to_string()];
    let keep = [1u8, 0, 0x80];
    let mut out = vec![String::new(); 6];
    select_generic(
        TensorRef::new(&keep, &[3]),
        TensorRef::new(&labels, &[2, 3]),
        TensorRef::scalar(&unknown),
        TensorMut::new(&mut out, &[2, 3]),
        Broadcast::Numpy,
    )?;
    println!("{out:?}");
    assert_eq!(out, ["cat", "<unk>", "owl", "ant", "<unk>", "elk"]);

    // The rows reversed (labels[::-1]): stride -3 from the first element of the last row.
    select_generic(
        TensorRef::new(&keep, &[3]),
        TensorRef::with_layout(&labels, &[2, 3], &[-3, 1], 3),
        TensorRef::scalar(&unknown),
        TensorMut::new(&mut out, &[2, 3]),
        Broadcast::Numpy,
    )?;
    println!("{out:?}");
    assert_eq!(out, ["ant", "<unk>", "elk", "cat", "<unk>", "owl"]);

    // Errors are values: two-step refuses a cond that would grow the output.
    let err = select_generic(
        TensorRef::new(&[1u8, 0], &[2, 1]),
        TensorRef::new(&labels[..3], &[3]),
        TensorRef::scalar(&unknown),
        TensorMut::new(&mut out[..3], &[3]),
        Broadcast::TwoStep,
    )
    .unwrap_err();
    println!("error: {err}");
    Ok(())
}

//! The ndarray peer: the `Zip` loop a careful Rust user writes instead of calling the library.

use selectjit::{Error, Result};

use crate::Inputs;

/// The ndarray peer of a case: the loop a careful Rust user writes by hand instead of calling
/// this crate,
/// `Zip::from(&mut out).and_broadcast(&cond).and_broadcast(&then).and_broadcast(&else)` with a
/// branch-free closure, on owned row-major arrays of the case's shapes (elements as unsigned
/// integers of the dtype's width: the loop moves them, as the kernels do).
pub trait ZipLoop {
    /// Runs the loop once.
    fn run(&mut self);
    /// The output's bytes, row-major.
    fn out_bytes(&self) -> Vec<u8>;
}

struct Zipped<E> {
    cond: ::ndarray::ArrayD<u8>,
    then: ::ndarray::ArrayD<E>,
    else_: ::ndarray::ArrayD<E>,
    out: ::ndarray::ArrayD<E>,
}

impl<E: bytemuck::Pod> ZipLoop for Zipped<E> {
    fn run(&mut self) {
        ::ndarray::Zip::from(&mut self.out)
            .and_broadcast(&self.cond)
            .and_broadcast(&self.then)
            .and_broadcast(&self.else_)
            .for_each(|o, &c, &t, &e| *o = if c != 0 { t } else { e });
        std::hint::black_box(&mut self.out);
    }
    fn out_bytes(&self) -> Vec<u8> {
        self.out
            .iter()
            .flat_map(|x| bytemuck::bytes_of(x).to_vec())
            .collect()
    }
}

/// Builds the ndarray peer of a case (see [`ZipLoop`]). Shapes that ndarray cannot broadcast
/// (none of the numpy-mode cases) are an error rather than a panic in `and_broadcast`.
pub fn ndarray_zip(inp: &Inputs) -> Result<Box<dyn ZipLoop>> {
    use ::ndarray::{ArrayD, IxDyn};
    fn build<E: bytemuck::Pod>(inp: &Inputs) -> Result<Box<dyn ZipLoop>> {
        let arr = |shape: &[usize], bytes: &[u8]| -> Result<ArrayD<E>> {
            let elems = bytes.chunks_exact(size_of::<E>());
            ArrayD::from_shape_vec(
                IxDyn(shape),
                elems.map(bytemuck::pod_read_unaligned).collect(),
            )
            .map_err(|e| Error::Invalid(e.to_string()))
        };
        let z = Zipped {
            cond: arr_u8(&inp.cond_shape, &inp.cond)?,
            then: arr(&inp.then_shape, &inp.then)?,
            else_: arr(&inp.else_shape, &inp.else_)?,
            out: ArrayD::from_elem(IxDyn(&inp.out_shape), E::zeroed()),
        };
        // ndarray's rule: right-aligned, each dim equal to the output's or 1.
        let out = &inp.out_shape;
        for (what, s) in [
            ("cond", z.cond.shape()),
            ("then", z.then.shape()),
            ("else", z.else_.shape()),
        ] {
            let ok = s.len() <= out.len()
                && s.iter()
                    .zip(&out[out.len() - s.len()..])
                    .all(|(a, b)| a == b || *a == 1);
            if !ok {
                return Err(Error::Invalid(format!(
                    "ndarray cannot broadcast {what} {s:?} to {out:?}"
                )));
            }
        }
        Ok(Box::new(z))
    }
    fn arr_u8(shape: &[usize], bytes: &[u8]) -> Result<ArrayD<u8>> {
        ArrayD::from_shape_vec(IxDyn(shape), bytes.to_vec())
            .map_err(|e| Error::Invalid(e.to_string()))
    }
    match inp.dtype.width() {
        1 => build::<u8>(inp),
        2 => build::<u16>(inp),
        4 => build::<u32>(inp),
        8 => build::<u64>(inp),
        _ => build::<[u64; 2]>(inp),
    }
}

/// The ndarray peer of a case, run once and checked against `reference` (the interpreter's
/// bytes).
pub(crate) fn ndarray_peer(inp: &Inputs, reference: &[u8]) -> Result<Box<dyn ZipLoop>> {
    let mut zip = ndarray_zip(inp)?;
    zip.run();
    if zip.out_bytes() != reference {
        return Err(Error::Invalid("ndarray Zip output differs".into()));
    }
    Ok(zip)
}

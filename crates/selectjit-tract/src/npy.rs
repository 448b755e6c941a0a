//! `.npy` files as tract tensors, through `npyz`: every numeric numpy dtype tract has (bool,
//! integers, f16, f32, f64), either byte order, C or Fortran order.
//!
//! Reading is bounded by the file: the element count the header claims is checked against the
//! bytes present before anything is allocated for the data. Writing is atomic: a temporary
//! file in the same folder, renamed over the target once complete.

use std::io::Write;
use std::path::Path;

use npyz::{NpyFile, NpyHeader, Order, TypeChar, WriterBuilder};
use tract_onnx::tract_core::internal::*;

/// The tract datum type of a numpy type string's kind and size.
fn datum_type_of(descr: &npyz::TypeStr) -> TractResult<DatumType> {
    let size = descr.num_bytes().unwrap_or(0);
    Ok(match (descr.type_char(), size) {
        (TypeChar::Bool, 1) => DatumType::Bool,
        (TypeChar::Int, 1) => DatumType::I8,
        (TypeChar::Int, 2) => DatumType::I16,
        (TypeChar::Int, 4) => DatumType::I32,
        (TypeChar::Int, 8) => DatumType::I64,
        (TypeChar::Uint, 1) => DatumType::U8,
        (TypeChar::Uint, 2) => DatumType::U16,
        (TypeChar::Uint, 4) => DatumType::U32,
        (TypeChar::Uint, 8) => DatumType::U64,
        (TypeChar::Float, 2) => DatumType::F16,
        (TypeChar::Float, 4) => DatumType::F32,
        (TypeChar::Float, 8) => DatumType::F64,
        _ => bail!("unsupported element type '{descr}' (bool, integers, f16, f32, f64 are)"),
    })
}

fn tensor_of<T: Datum + Copy + npyz::Deserialize>(
    file: NpyFile<&[u8]>,
    shape: &[usize],
) -> TractResult<Tensor> {
    let fortran = file.order() == Order::Fortran;
    let data: Vec<T> = file.into_vec()?;
    if fortran && shape.len() > 1 {
        // Column-major: the data is the C-order array of the reversed shape, transposed.
        let rev: Vec<usize> = shape.iter().rev().copied().collect();
        let axes: Vec<usize> = (0..shape.len()).rev().collect();
        Tensor::from_shape(&rev, &data)?.permute_axes(&axes)
    } else {
        Tensor::from_shape(shape, &data)
    }
}

/// What npyz trusts, checked against the file first: the header's length, and the shape's
/// element count (npyz multiplies the dims unchecked, which overflows on a hostile header).
/// Returns the number of elements.
fn check_header(bytes: &[u8]) -> TractResult<u64> {
    ensure!(
        bytes.len() >= 10 && bytes.starts_with(b"\x93NUMPY"),
        "not a .npy file (no magic string)"
    );
    let (len, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        2 | 3 => bail!("truncated header"),
        v => bail!("unsupported .npy format version {v}"),
    };
    let text = bytes
        .get(start..start.saturating_add(len))
        .context("truncated header")?;
    let text = std::str::from_utf8(text).context("header is not UTF-8")?;
    let header: py_literal::Value = text
        .trim_end()
        .parse()
        .map_err(|e| format_err!("header is not a Python literal: {e}"))?;
    let dims = header
        .as_dict()
        .and_then(|d| {
            d.iter()
                .find(|(k, _)| k.as_string().is_some_and(|k| k == "shape"))
        })
        .and_then(|(_, v)| v.as_tuple().or(v.as_list()))
        .context("header has no shape tuple")?;
    dims.iter().try_fold(1u64, |acc, d| {
        let d = d.as_integer().context("shape entry is not an integer")?;
        let d: u64 = d.to_string().parse().context("shape entry is not a size")?;
        acc.checked_mul(d).context("shape is too large")
    })
}

/// Parses a whole `.npy` file held in memory.
pub fn tensor_from_npy_bytes(bytes: &[u8]) -> TractResult<Tensor> {
    check_header(bytes)?;
    let mut data = bytes;
    let header = NpyHeader::from_reader(&mut data).context("not a readable .npy file")?;
    let file = NpyFile::with_header(header, data);
    let npyz::DType::Plain(descr) = file.dtype() else {
        bail!("structured or array element types are not supported");
    };
    let dt = datum_type_of(&descr)?;
    let shape = file
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<usize>, _>>()
        .context("shape does not fit in memory")?;
    let need = shape
        .iter()
        .try_fold(dt.size_of(), |acc, &d| acc.checked_mul(d))
        .context("shape is too large")?;
    ensure!(
        need <= data.len(),
        "truncated data: shape {shape:?} of {dt:?} needs {need} bytes, the file has {}",
        data.len()
    );
    match dt {
        DatumType::Bool => tensor_of::<bool>(file, &shape),
        DatumType::I8 => tensor_of::<i8>(file, &shape),
        DatumType::I16 => tensor_of::<i16>(file, &shape),
        DatumType::I32 => tensor_of::<i32>(file, &shape),
        DatumType::I64 => tensor_of::<i64>(file, &shape),
        DatumType::U8 => tensor_of::<u8>(file, &shape),
        DatumType::U16 => tensor_of::<u16>(file, &shape),
        DatumType::U32 => tensor_of::<u32>(file, &shape),
        DatumType::U64 => tensor_of::<u64>(file, &shape),
        DatumType::F16 => tensor_of::<f16>(file, &shape),
        DatumType::F32 => tensor_of::<f32>(file, &shape),
        DatumType::F64 => tensor_of::<f64>(file, &shape),
        _ => unreachable!("datum_type_of returns the types above"),
    }
}

/// Reads a `.npy` file into a tensor.
pub fn read_npy(path: &Path) -> TractResult<Tensor> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    tensor_from_npy_bytes(&bytes).with_context(|| format!("reading {}", path.display()))
}

fn write_t<T: Datum + npyz::AutoSerialize>(tensor: &Tensor, out: &mut Vec<u8>) -> TractResult<()> {
    let shape: Vec<u64> = tensor.shape().iter().map(|&d| d as u64).collect();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&shape)
        .writer(out)
        .begin_nd()?;
    w.extend(tensor.try_as_plain_ram()?.as_slice::<T>()?.iter())?;
    w.finish()?;
    Ok(())
}

/// The bytes of a C-order `.npy` file holding `tensor`.
pub fn npy_bytes(tensor: &Tensor) -> TractResult<Vec<u8>> {
    let mut out = vec![];
    match tensor.datum_type() {
        DatumType::Bool => write_t::<bool>(tensor, &mut out)?,
        DatumType::I8 => write_t::<i8>(tensor, &mut out)?,
        DatumType::I16 => write_t::<i16>(tensor, &mut out)?,
        DatumType::I32 => write_t::<i32>(tensor, &mut out)?,
        DatumType::I64 => write_t::<i64>(tensor, &mut out)?,
        DatumType::U8 => write_t::<u8>(tensor, &mut out)?,
        DatumType::U16 => write_t::<u16>(tensor, &mut out)?,
        DatumType::U32 => write_t::<u32>(tensor, &mut out)?,
        DatumType::U64 => write_t::<u64>(tensor, &mut out)?,
        DatumType::F16 => write_t::<f16>(tensor, &mut out)?,
        DatumType::F32 => write_t::<f32>(tensor, &mut out)?,
        DatumType::F64 => write_t::<f64>(tensor, &mut out)?,
        other => bail!("cannot write {other:?} tensors as .npy"),
    }
    Ok(out)
}

/// Writes `tensor` as a C-order `.npy` file, atomically: on error `path` is neither created
/// nor modified.
pub fn write_npy(path: &Path, tensor: &Tensor) -> TractResult<()> {
    write_bytes(path, &npy_bytes(tensor)?)
}

/// Writes `bytes` to `path` atomically: on error `path` is neither created nor modified.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> TractResult<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let ctx = || format!("writing {}", path.display());
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).with_context(ctx)?;
    tmp.write_all(bytes).with_context(ctx)?;
    tmp.persist(path).map_err(|e| e.error).with_context(ctx)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_type() -> TractResult<()> {
        let tensors = [
            tensor2(&[[true, false, true], [false, false, true]]),
            tensor1(&[i8::MIN, -1, 0, i8::MAX]),
            tensor1(&[i16::MIN, 7]),
            tensor1(&[i32::MIN, 7]),
            tensor1(&[i64::MIN, 7]),
            tensor1(&[u8::MAX, 7]),
            tensor1(&[u16::MAX, 7]),
            tensor1(&[u32::MAX, 7]),
            tensor1(&[u64::MAX, 7]),
            tensor1(&[f16::from_bits(0x7e01), f16::from_bits(0x8000)]),
            tensor2(&[[f32::from_bits(0x7fc0_0123), -0.0], [f32::INFINITY, 1.5]]),
            tensor1(&[f64::from_bits(0xfff8_0000_0000_0042), -0.0]),
            tensor0(3.5f32),
            Tensor::zero::<f32>(&[2, 0, 3])?,
        ];
        for t in tensors {
            let back = tensor_from_npy_bytes(&npy_bytes(&t)?)?;
            assert_eq!(back.datum_type(), t.datum_type());
            assert_eq!(back.shape(), t.shape());
            assert_eq!(back.as_bytes(), t.as_bytes(), "{t:?}");
        }
        Ok(())
    }

    /// A version 1.0 file with this header dict and these data bytes.
    fn file(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut h = dict.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
        bytes.extend_from_slice(h.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn fortran_order_is_transposed_to_c_order() -> TractResult<()> {
        // 2x3 i16 [[1,2,3],[4,5,6]] stored column-major, big-endian.
        let data: Vec<u8> = [1i16, 4, 2, 5, 3, 6]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let bytes = file(
            "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3), }",
            &data,
        );
        let t = tensor_from_npy_bytes(&bytes)?;
        assert_eq!(t, tensor2(&[[1i16, 2, 3], [4, 5, 6]]));
        Ok(())
    }

    #[test]
    fn bad_files_are_errors() -> TractResult<()> {
        let ok = npy_bytes(&tensor1(&[1.0f32, 2.0]))?;
        for n in 0..ok.len() - 1 {
            assert!(tensor_from_npy_bytes(&ok[..n]).is_err(), "truncated to {n}");
        }
        let good = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            &[0; 8],
        );
        assert_eq!(tensor_from_npy_bytes(&good)?, tensor1(&[0f32, 0.0]));
        for dict in [
            // 10^12 elements claimed in a small file: an error, not an allocation.
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }",
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
            "{'descr': '<U1', 'fortran_order': False, 'shape': (2,), }",
            "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
            "{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }",
            "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
        ] {
            assert!(
                tensor_from_npy_bytes(&file(dict, &[0; 8])).is_err(),
                "{dict}"
            );
        }
        assert!(tensor_from_npy_bytes(b"garbage garbage garbage").is_err());
        Ok(())
    }
}

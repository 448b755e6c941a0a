//! Reading and writing `.npy` files for every dtype of the crate.
//!
//! The reader is strict and bounded: the header's length, shape and element count are checked
//! against the bytes actually present before anything is allocated, so a header that claims
//! 10^12 elements in a small file is an error, and no input makes it panic. Element type strings
//! are parsed with `npyz`. `<V2` / `|V2` arrays are bfloat16 (the ml_dtypes convention) and are
//! written back as `<V2`. Big-endian arrays are converted to little-endian. Fortran-order arrays
//! are kept as they are stored and described by column-major strides.

use std::io::Write;
use std::path::Path;

use npyz::{TypeChar, TypeStr};

use selectjit::{DType, Error, MAX_RANK, Result, TensorRef};

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Largest header accepted (numpy itself writes a few hundred bytes).
const MAX_HEADER: usize = 1 << 16;

/// A loaded array: raw little-endian element bytes with shape and strides in elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyArray {
    /// The element type.
    pub dtype: DType,
    /// The shape.
    pub shape: Vec<usize>,
    /// Row-major for C order, column-major for Fortran order.
    pub strides: Vec<isize>,
    /// Whether the file stores the array in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The elements' little-endian bytes, in storage order.
    pub data: Vec<u8>,
}

impl NpyArray {
    /// A strided view of the element bytes.
    pub fn view(&self) -> TensorRef<'_, u8> {
        TensorRef::with_strides(&self.data, &self.shape, &self.strides)
    }
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Invalid(format!("invalid .npy: {}", msg.into()))
}

/// The dtype a numpy type string stands for.
fn dtype_of(descr: &str) -> Result<(DType, bool)> {
    let ts: TypeStr = descr
        .parse()
        .map_err(|e| bad(format!("type string '{descr}': {e}")))?;
    let size = ts.num_bytes().unwrap_or(0);
    let dt = match (ts.type_char(), size) {
        (TypeChar::Bool, 1) => DType::Bool,
        (TypeChar::Int, 1) => DType::I8,
        (TypeChar::Int, 2) => DType::I16,
        (TypeChar::Int, 4) => DType::I32,
        (TypeChar::Int, 8) => DType::I64,
        (TypeChar::Uint, 1) => DType::U8,
        (TypeChar::Uint, 2) => DType::U16,
        (TypeChar::Uint, 4) => DType::U32,
        (TypeChar::Uint, 8) => DType::U64,
        (TypeChar::Float, 2) => DType::F16,
        (TypeChar::Float, 4) => DType::F32,
        (TypeChar::Float, 8) => DType::F64,
        (TypeChar::Complex, 8) => DType::Complex64,
        (TypeChar::Complex, 16) => DType::Complex128,
        (TypeChar::RawData, 2) => DType::BF16,
        _ => {
            return Err(Error::DType(format!(
                "unsupported .npy element type '{descr}'"
            )));
        }
    };
    let big = ts.endianness() == npyz::Endianness::Big;
    Ok((dt, big))
}

/// The type string written for a dtype.
fn descr_of(d: DType) -> &'static str {
    match d {
        DType::Bool => "|b1",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::F16 => "<f2",
        DType::BF16 => "<V2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::Complex64 => "<c8",
        DType::Complex128 => "<c16",
    }
}

/// A tiny parser for the header's Python dict literal.
struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
}

#[derive(Debug)]
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
    Other,
}

impl<'a> Lexer<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> Result<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(bad(format!(
                "header: expected '{}' at byte {}",
                c as char, self.i
            )))
        }
    }
    fn string(&mut self) -> Result<String> {
        let q = self.peek().ok_or_else(|| bad("header ends early"))?;
        if q != b'\'' && q != b'"' {
            return Err(bad(format!("header: expected a string at byte {}", self.i)));
        }
        self.i += 1;
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i] != q {
            self.i += 1;
        }
        if self.i >= self.s.len() {
            return Err(bad("header: unterminated string"));
        }
        let v = std::str::from_utf8(&self.s[start..self.i])
            .map_err(|_| bad("header: string is not UTF-8"))?
            .to_string();
        self.i += 1;
        Ok(v)
    }
    fn word(&mut self) -> &'a [u8] {
        self.ws();
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
        {
            self.i += 1;
        }
        &self.s[start..self.i]
    }
    fn value(&mut self) -> Result<Value> {
        match self.peek() {
            Some(b'\'') | Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b'(') => {
                self.i += 1;
                let mut dims = Vec::new();
                loop {
                    if self.peek() == Some(b')') {
                        self.i += 1;
                        break;
                    }
                    let w = self.word();
                    let w = w.strip_suffix(b"L").unwrap_or(w);
                    let d = std::str::from_utf8(w)
                        .ok()
                        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                        .and_then(|t| t.parse::<usize>().ok())
                        .ok_or_else(|| bad("header: shape has an entry that is not a size"))?;
                    dims.push(d);
                    if dims.len() > MAX_RANK {
                        return Err(Error::RankTooLarge {
                            what: "array",
                            rank: dims.len(),
                            max: MAX_RANK,
                        });
                    }
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b')') => {}
                        _ => return Err(bad("header: malformed shape")),
                    }
                }
                Ok(Value::Tuple(dims))
            }
            Some(b'[') | Some(b'{') => Ok(Value::Other),
            _ => match self.word() {
                b"True" => Ok(Value::Bool(true)),
                b"False" => Ok(Value::Bool(false)),
                _ => Err(bad(format!("header: unexpected value at byte {}", self.i))),
            },
        }
    }
}

/// Parses the header dict into (descr, fortran_order, shape).
fn parse_dict(text: &[u8]) -> Result<(String, bool, Vec<usize>)> {
    let mut lx = Lexer { s: text, i: 0 };
    lx.eat(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        if lx.peek() == Some(b'}') {
            break;
        }
        let key = lx.string()?;
        lx.eat(b':')?;
        let v = lx.value()?;
        match (key.as_str(), v) {
            ("descr", Value::Str(s)) => descr = Some(s),
            ("descr", _) => {
                return Err(Error::DType(
                    "structured .npy arrays are not supported".into(),
                ));
            }
            ("fortran_order", Value::Bool(b)) => fortran = Some(b),
            ("shape", Value::Tuple(t)) => shape = Some(t),
            ("fortran_order" | "shape", _) => {
                return Err(bad(format!("header: '{key}' has the wrong kind of value")));
            }
            _ => return Err(bad(format!("header: unknown key '{key}'"))),
        }
        match lx.peek() {
            Some(b',') => lx.i += 1,
            Some(b'}') => {}
            _ => return Err(bad("header: malformed dict")),
        }
    }
    Ok((
        descr.ok_or_else(|| bad("header has no 'descr'"))?,
        fortran.ok_or_else(|| bad("header has no 'fortran_order'"))?,
        shape.ok_or_else(|| bad("header has no 'shape'"))?,
    ))
}

/// Parses a whole `.npy` file held in memory.
pub fn read_npy_bytes(bytes: &[u8]) -> Result<NpyArray> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("not a .npy file (bad magic)"));
    }
    let major = bytes[6];
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(bad("truncated header"));
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => return Err(bad(format!("unsupported format version {v}"))),
    };
    if hlen > MAX_HEADER {
        return Err(bad(format!(
            "header of {hlen} bytes is larger than {MAX_HEADER}"
        )));
    }
    let end = start + hlen;
    if end > bytes.len() {
        return Err(bad("truncated header"));
    }
    let (descr, fortran_order, shape) = parse_dict(&bytes[start..end])?;
    let (dtype, big) = dtype_of(&descr)?;
    check_shape(&shape).map_err(|_| bad(format!("shape {shape:?} is too large")))?;
    let n: usize = shape.iter().product();
    let w = dtype.width();
    let body = &bytes[end..];
    let need = n
        .checked_mul(w)
        .ok_or_else(|| bad(format!("shape {shape:?} is too large")))?;
    if body.len() < need {
        return Err(bad(format!(
            "truncated data: shape {shape:?} of {descr} needs {need} bytes, the file has {}",
            body.len()
        )));
    }
    let mut data = body[..need].to_vec();
    if big && w > 1 {
        // Complex numbers swap each of their two parts.
        let part = if matches!(dtype, DType::Complex64 | DType::Complex128) {
            w / 2
        } else {
            w
        };
        data.chunks_exact_mut(part).for_each(|c| c.reverse());
    }
    let strides = if fortran_order {
        let mut st = Vec::with_capacity(shape.len());
        let mut acc: isize = 1;
        for &d in &shape {
            st.push(acc);
            acc = acc.saturating_mul(d.max(1) as isize);
        }
        st
    } else {
        selectjit::contiguous_strides(&shape).to_vec()
    };
    Ok(NpyArray {
        dtype,
        shape,
        strides,
        fortran_order,
        data,
    })
}

/// Reads a `.npy` file. The file's size bounds what is allocated.
pub fn read_npy(path: &Path) -> Result<NpyArray> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    read_npy_bytes(&bytes).map_err(|e| match e {
        Error::Invalid(m) => Error::Invalid(format!("{}: {m}", path.display())),
        Error::DType(m) => Error::DType(format!("{}: {m}", path.display())),
        other => other,
    })
}

/// The bytes of a C-order `.npy` file holding `data` (raw little-endian elements of `dtype`).
pub fn npy_bytes(dtype: DType, shape: &[usize], data: &[u8]) -> Result<Vec<u8>> {
    check_shape(shape)?;
    let n: usize = shape.iter().product();
    if data.len() != n * dtype.width() {
        return Err(Error::Layout {
            what: "array",
            msg: format!("{} bytes for {n} elements of {dtype}", data.len()),
        });
    }
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_txt = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_txt}, }}",
        descr_of(dtype)
    );
    let (major, pre) = if dict.len() + 11 < 65535 {
        (1u8, 10)
    } else {
        (2u8, 12)
    };
    // Pad with spaces so that the data starts at a multiple of 64, ending the header with \n.
    while !(pre + dict.len() + 1).is_multiple_of(64) {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = Vec::with_capacity(pre + dict.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[major, 0]);
    if major == 1 {
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.extend_from_slice(data);
    Ok(out)
}

/// Writes a C-order `.npy` file atomically: the bytes go to a temporary file in the same folder,
/// which is renamed over `path` only once complete. On error `path` is neither created nor
/// modified.
pub fn write_npy(path: &Path, dtype: DType, shape: &[usize], data: &[u8]) -> Result<()> {
    let bytes = npy_bytes(dtype, shape, data)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let io = |e: std::io::Error| Error::io(path.display().to_string(), e);
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(io)?;
    tmp.write_all(&bytes).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Checks an array's rank and element count against the library's limits: at most
/// [`MAX_RANK`] dimensions, and a product of the dimensions (zeros counted as ones) that fits
/// in `isize`, so that strides and offsets never overflow.
fn check_shape(shape: &[usize]) -> Result<()> {
    if shape.len() > MAX_RANK {
        return Err(Error::RankTooLarge {
            what: "array",
            rank: shape.len(),
            max: MAX_RANK,
        });
    }
    let fits = shape.iter().try_fold(1usize, |n, &d| {
        n.checked_mul(d.max(1))
            .filter(|&v| v <= isize::MAX as usize)
    });
    match fits {
        Some(_) => Ok(()),
        None => Err(Error::Overflow {
            what: "array",
            shape: crate::ShapeFmt(shape).to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips() {
        for d in DType::ALL {
            let shape = [2usize, 3];
            let data: Vec<u8> = (0..6 * d.width()).map(|i| (i * 37 + 11) as u8).collect();
            let bytes = npy_bytes(d, &shape, &data).unwrap();
            assert_eq!((bytes.len() - data.len()) % 64, 0);
            let a = read_npy_bytes(&bytes).unwrap();
            assert_eq!(
                (a.dtype, a.shape.as_slice(), a.data.as_slice()),
                (d, &shape[..], &data[..])
            );
            assert_eq!(a.strides, vec![3, 1]);
        }
    }

    fn header(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut h = dict.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 0]);
        v.extend_from_slice(&(h.len() as u16).to_le_bytes());
        v.extend_from_slice(h.as_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn fortran_big_endian_and_bf16() {
        let a = read_npy_bytes(&header(
            "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3), }",
            &[0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6],
        ))
        .unwrap();
        assert_eq!(a.strides, vec![1, 2]);
        assert_eq!(a.data, vec![1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0]);
        for d in ["<V2", "|V2"] {
            let a = read_npy_bytes(&header(
                &format!("{{'shape': (1,), 'descr': '{d}', 'fortran_order': False}}"),
                &[1, 2],
            ))
            .unwrap();
            assert_eq!(a.dtype, DType::BF16);
        }
    }

    #[test]
    fn bad_files_are_errors() {
        let ok = header(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            &[0; 8],
        );
        for n in 0..ok.len() - 1 {
            assert!(read_npy_bytes(&ok[..n]).is_err(), "truncated to {n}");
        }
        // 10^12 elements claimed in a tiny file: an error, not an allocation.
        let huge = header(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }",
            &[0; 8],
        );
        assert!(read_npy_bytes(&huge).is_err());
        let over = header(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
            &[],
        );
        assert!(read_npy_bytes(&over).is_err());
        for dict in [
            "{'descr': '<U5', 'fortran_order': False, 'shape': (2,), }",
            "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
            "{'descr': '<f4', 'shape': (2,), }",
            "{'descr': '<f4', 'fortran_order': 1, 'shape': (2,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,-1), }",
            "['descr']",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
        ] {
            assert!(read_npy_bytes(&header(dict, &[0; 64])).is_err(), "{dict}");
        }
        assert!(read_npy_bytes(b"garbage garbage garbage").is_err());
    }
}

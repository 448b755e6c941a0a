//! Arrow columns: the kernel calls of `selectjit.arrow.if_else` and `case_when` (Python side:
//! `selectjit/arrow.py`).
//!
//! Arguments come through the Arrow PyCapsule interface: an array's `__arrow_c_array__` (a
//! schema and an array capsule, the C data interface), a chunked array's
//! `__arrow_c_stream__` (the C stream interface), or a scalar given as an array of length 1
//! (the Python layer makes it; Python `bool`, `int` and `float` are taken here too). Nothing
//! is copied on the way in: the buffers stay the producer's, released when the last array
//! that uses them is dropped.
//!
//! The functions do the common case and refuse the rest: the condition(s) boolean, the values
//! all of one fixed-width type, the columns of one length, no null `cond` struct slot. A refusal
//! is returned, not raised — `(exception class name, message)` — and the Python layer then
//! calls `pyarrow.compute` (whose promotions, casts and errors are the reference) or, without
//! pyarrow, raises it. Chunked inputs are cut at the union of their chunk boundaries; each
//! piece is one call, one output chunk.
//!
//! Results leave as [`ArrowArrayOut`] (`__arrow_c_array__`) or [`ArrowChunkedOut`]
//! (`__arrow_c_stream__`), which pyarrow imports without copying.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema, from_ffi_and_data_type, to_ffi};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{
    Array, ArrayRef, BooleanArray, Datum, Float64Array, Int64Array, Scalar, StructArray, make_array,
};
use arrow_buffer::{BooleanBuffer, NullBuffer};
use arrow_schema::{ArrowError, DataType, Field};
use pyo3::exceptions::{PyNotImplementedError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyCapsule, PyFloat, PyInt, PyTuple};

use selectjit_arrow as kernels;

const SCHEMA: &CStr = c"arrow_schema";
const ARRAY: &CStr = c"arrow_array";
const STREAM: &CStr = c"arrow_array_stream";

/// How the Python layer passes an argument (the first item of its `(kind, object)` pair).
const KIND_SCALAR: u8 = 0;
const KIND_ARRAY: u8 = 1;
const KIND_STREAM: u8 = 2;
/// An object exporting both: an array when `__arrow_c_array__` succeeds, else (an object of
/// several chunks, e.g. nanoarrow's) a chunked array.
const KIND_ARRAY_OR_STREAM: u8 = 3;

/// Why a call is not done here: the exception class pyarrow (or, without it, the package)
/// raises and a message. The Python layer hands the call to `pyarrow.compute` instead.
struct Refusal(&'static str, String);

type Refused<T> = Result<T, Refusal>;

fn refuse<T>(class: &'static str, msg: impl Into<String>) -> Refused<T> {
    Err(Refusal(class, msg.into()))
}

/// An arrow error raised as the Python exception closest to its kind.
fn arrow_err(e: ArrowError) -> PyErr {
    match e {
        ArrowError::NotYetImplemented(m) => PyNotImplementedError::new_err(m),
        ArrowError::CastError(m) | ArrowError::SchemaError(m) => PyTypeError::new_err(m),
        ArrowError::InvalidArgumentError(m) | ArrowError::CDataInterface(m) => {
            PyValueError::new_err(m)
        }
        e => PyRuntimeError::new_err(e.to_string()),
    }
}

/// One imported argument.
enum In {
    /// A scalar: an array of length 1, broadcast to every row.
    Scalar(ArrayRef),
    /// A column: its chunks (one for an array) and whether it came as a chunked array.
    Col {
        chunks: Vec<ArrayRef>,
        dtype: DataType,
        chunked: bool,
    },
}

impl In {
    fn dtype(&self) -> &DataType {
        match self {
            In::Scalar(a) => a.data_type(),
            In::Col { dtype, .. } => dtype,
        }
    }

    fn len(&self) -> Option<usize> {
        match self {
            In::Scalar(_) => None,
            In::Col { chunks, .. } => Some(chunks.iter().map(|c| c.len()).sum()),
        }
    }

    /// Rows `start..end` (within one chunk: the segments cut at every chunk boundary).
    fn piece(&self, start: usize, end: usize) -> Piece {
        match self {
            In::Scalar(a) => Piece::Scalar(Scalar::new(a.clone())),
            In::Col { chunks, .. } => {
                let mut at = 0;
                for c in chunks {
                    if start < at + c.len() || (c.is_empty() && start == at && end == at) {
                        return Piece::Array(c.slice(start - at, end - start));
                    }
                    at += c.len();
                }
                // Only the empty segment of an input with no chunk gets here.
                Piece::Array(arrow_array::new_empty_array(self.dtype()))
            }
        }
    }
}

/// One argument over one segment.
enum Piece {
    Scalar(Scalar<ArrayRef>),
    Array(ArrayRef),
}

impl Piece {
    fn datum(&self) -> &dyn Datum {
        match self {
            Piece::Scalar(s) => s,
            Piece::Array(a) => a,
        }
    }
}

/// A boolean condition over `len` rows: a column's piece, or a scalar broadcast.
fn cond_piece(piece: &Piece, len: usize) -> BooleanArray {
    match piece {
        Piece::Array(a) => a.as_boolean().clone(),
        Piece::Scalar(s) => {
            let (a, _) = s.get();
            let b = a.as_boolean();
            if b.is_null(0) {
                BooleanArray::new(
                    BooleanBuffer::new_unset(len),
                    Some(NullBuffer::new_null(len)),
                )
            } else if b.value(0) {
                BooleanArray::new(BooleanBuffer::new_set(len), None)
            } else {
                BooleanArray::new(BooleanBuffer::new_unset(len), None)
            }
        }
    }
}

/// Whether a field is of an extension type (its metadata names one): its storage type is
/// not the type pyarrow computes with, so such calls are pyarrow's.
fn is_extension(field: &Field) -> bool {
    field.metadata().contains_key("ARROW:extension:name")
}

/// `__arrow_c_array__()` of `obj`, imported without copying its buffers; `None` for an
/// array of an extension type.
fn import_array(obj: &Bound<'_, PyAny>) -> PyResult<Option<ArrayRef>> {
    let py = obj.py();
    let pair = obj.call_method0(pyo3::intern!(py, "__arrow_c_array__"))?;
    let (schema, array): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) = pair.extract()?;
    let schema = schema
        .pointer_checked(Some(SCHEMA))?
        .cast::<FFI_ArrowSchema>();
    let array = array.pointer_checked(Some(ARRAY))?.cast::<FFI_ArrowArray>();
    // SAFETY: a capsule named "arrow_schema" holds an ArrowSchema (the PyCapsule protocol),
    // read while the capsule lives.
    let field = Field::try_from(unsafe { schema.as_ref() }).map_err(arrow_err)?;
    if is_extension(&field) {
        return Ok(None);
    }
    // SAFETY: a capsule named "arrow_array" holds an ArrowArray of the C data interface of the
    // schema's type (the PyCapsule protocol). It is moved out (its capsule keeps a released
    // struct).
    let data = unsafe {
        let array = FFI_ArrowArray::from_raw(array.as_ptr());
        from_ffi_and_data_type(array, field.data_type().clone())
    }
    .map_err(arrow_err)?;
    data.validate().map_err(arrow_err)?;
    Ok(Some(make_array(data)))
}

/// The message of a stream's last error.
///
/// # Safety
/// `stream` is a live stream of the C stream interface.
unsafe fn stream_error(stream: &mut FFI_ArrowArrayStream, code: c_int) -> PyErr {
    let msg = match stream.get_last_error {
        // SAFETY: the stream is live (caller); the message, if any, is a C string that stays
        // valid until the next call on the stream.
        Some(f) => unsafe {
            let p = f(stream);
            (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
        },
        None => None,
    };
    PyValueError::new_err(msg.unwrap_or_else(|| format!("Arrow stream error {code}")))
}

/// `__arrow_c_stream__()` of `obj`: its chunks (imported without copying) and their type;
/// `None` for a stream of an extension type.
fn import_stream(obj: &Bound<'_, PyAny>) -> PyResult<Option<(Vec<ArrayRef>, DataType)>> {
    let py = obj.py();
    let capsule = obj.call_method0(pyo3::intern!(py, "__arrow_c_stream__"))?;
    let capsule = capsule.cast_into::<PyCapsule>()?;
    let p = capsule
        .pointer_checked(Some(STREAM))?
        .cast::<FFI_ArrowArrayStream>();
    // SAFETY: a capsule named "arrow_array_stream" holds an ArrowArrayStream (the PyCapsule
    // protocol); it is moved out here, and released when `stream` is dropped.
    let mut stream = unsafe { FFI_ArrowArrayStream::from_raw(p.as_ptr()) };
    let (Some(get_schema), Some(get_next)) = (stream.get_schema, stream.get_next) else {
        return Err(PyValueError::new_err("the Arrow stream is released"));
    };
    let mut schema = FFI_ArrowSchema::empty();
    // SAFETY: the stream is live; `schema` is a released struct the callback fills.
    let rc = unsafe { get_schema(&mut stream, &mut schema) };
    if rc != 0 {
        // SAFETY: the stream is live.
        return Err(unsafe { stream_error(&mut stream, rc) });
    }
    let field = Field::try_from(&schema).map_err(arrow_err)?;
    if is_extension(&field) {
        return Ok(None);
    }
    let dtype = field.data_type().clone();
    let mut chunks = Vec::new();
    loop {
        let mut array = FFI_ArrowArray::empty();
        // SAFETY: the stream is live; `array` is a released struct the callback fills.
        let rc = unsafe { get_next(&mut stream, &mut array) };
        if rc != 0 {
            // SAFETY: the stream is live.
            return Err(unsafe { stream_error(&mut stream, rc) });
        }
        if array.is_released() {
            break;
        }
        // SAFETY: the stream gives arrays of its schema's type (the C stream interface).
        let data = unsafe { from_ffi_and_data_type(array, dtype.clone()) }.map_err(arrow_err)?;
        data.validate().map_err(arrow_err)?;
        chunks.push(make_array(data));
    }
    Ok(Some((chunks, dtype)))
}

/// A Python `bool`, `int` or `float` as an array of length 1 (pyarrow's types for them:
/// bool, int64, double); `None` when it is none of these.
fn python_scalar(obj: &Bound<'_, PyAny>) -> PyResult<Option<ArrayRef>> {
    if obj.is_instance_of::<PyBool>() {
        return Ok(Some(Arc::new(BooleanArray::from(vec![
            obj.extract::<bool>()?,
        ]))));
    }
    if obj.is_instance_of::<PyInt>() {
        let v: i64 = obj.extract().map_err(|_| {
            PyTypeError::new_err("selectjit.arrow: a Python int outside int64 needs pyarrow")
        })?;
        return Ok(Some(Arc::new(Int64Array::from(vec![v]))));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Some(Arc::new(Float64Array::from(vec![
            obj.extract::<f64>()?,
        ]))));
    }
    Ok(None)
}

fn extension<T>() -> Refused<T> {
    refuse("NotImplementedError", "an argument of an extension type")
}

/// A chunked argument.
fn import_chunked(obj: &Bound<'_, PyAny>) -> PyResult<Refused<In>> {
    let Some((chunks, dtype)) = import_stream(obj)? else {
        return Ok(extension());
    };
    Ok(Ok(In::Col {
        chunks,
        dtype,
        chunked: true,
    }))
}

/// One `(kind, object)` argument of the Python layer.
fn import_arg(arg: &Bound<'_, PyAny>) -> PyResult<Refused<In>> {
    let (kind, obj): (u8, Bound<'_, PyAny>) = arg.extract()?;
    Ok(Ok(match kind {
        KIND_SCALAR => {
            let a = match python_scalar(&obj)? {
                Some(a) => a,
                None => match import_array(&obj)? {
                    Some(a) => a,
                    None => return Ok(extension()),
                },
            };
            if a.len() != 1 {
                return Ok(refuse("ValueError", "a scalar must be one value"));
            }
            In::Scalar(a)
        }
        KIND_ARRAY | KIND_ARRAY_OR_STREAM => {
            let a = match import_array(&obj) {
                Ok(a) => a,
                Err(_) if kind == KIND_ARRAY_OR_STREAM => return import_chunked(&obj),
                Err(e) => return Err(e),
            };
            let Some(a) = a else {
                return Ok(extension());
            };
            let dtype = a.data_type().clone();
            In::Col {
                chunks: vec![a],
                dtype,
                chunked: false,
            }
        }
        KIND_STREAM => return import_chunked(&obj),
        _ => return Err(PyValueError::new_err("argument kind")),
    }))
}

/// The types whose selects run here: every fixed-width type (the rest goes to pyarrow).
fn fixed_width(dt: &DataType) -> bool {
    use DataType::*;
    matches!(
        dt,
        Boolean
            | Int8
            | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Float16
            | Float32
            | Float64
            | Date32
            | Date64
            | Time32(_)
            | Time64(_)
            | Timestamp(_, _)
            | Duration(_)
            | Interval(_)
            | Decimal32(_, _)
            | Decimal64(_, _)
            | Decimal128(_, _)
            | Decimal256(_, _)
            | FixedSizeBinary(_)
    )
}

/// The values' common type, when they all have one fixed-width type.
fn value_type(values: &[&In]) -> Refused<DataType> {
    let dt = values[0].dtype();
    if values.iter().any(|v| v.dtype() != dt) {
        return refuse("TypeError", "the values have different types");
    }
    if !fixed_width(dt) {
        return refuse("NotImplementedError", format!("values of type {dt}"));
    }
    Ok(dt.clone())
}

/// The segments of the rows: the union of every column's chunk boundaries. Also whether the
/// output is chunked (a chunked input).
fn segments(args: &[&In]) -> Refused<(Vec<(usize, usize)>, bool)> {
    let mut len = None;
    let mut cuts = vec![0];
    let mut chunked = false;
    for a in args {
        if let In::Col {
            chunks, chunked: c, ..
        } = a
        {
            chunked |= c;
            let n = a.len().unwrap_or(0);
            if len.is_some_and(|l| l != n) {
                return refuse("ValueError", "Array arguments must all be the same length");
            }
            len = Some(n);
            let mut at = 0;
            for c in chunks {
                at += c.len();
                cuts.push(at);
            }
        }
    }
    // All scalars: one row.
    let len = len.unwrap_or(1);
    cuts.push(len);
    cuts.sort_unstable();
    cuts.dedup();
    let mut segs: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
    if segs.is_empty() && !chunked {
        segs.push((0, 0));
    }
    Ok((segs, chunked))
}

/// What a call returns to the Python layer: the result, or why it was not computed here.
fn output(py: Python<'_>, res: Refused<(Vec<ArrayRef>, DataType, bool)>) -> PyResult<Py<PyAny>> {
    match res {
        Err(Refusal(class, msg)) => Ok(PyTuple::new(py, [class.to_string(), msg])?
            .into_any()
            .unbind()),
        Ok((mut chunks, dtype, chunked)) => {
            if !chunked && chunks.len() == 1 {
                let array = chunks.pop().expect("one chunk");
                Ok(Py::new(py, ArrowArrayOut { array })?.into_any())
            } else {
                Ok(Py::new(py, ArrowChunkedOut { chunks, dtype })?.into_any())
            }
        }
    }
}

fn imports(args: &Bound<'_, PyAny>) -> PyResult<Refused<Vec<In>>> {
    let mut out = Vec::new();
    for a in args.try_iter()? {
        match import_arg(&a?)? {
            Ok(i) => out.push(i),
            Err(r) => return Ok(Err(r)),
        }
    }
    Ok(Ok(out))
}

/// `_arrow_if_else(cond, left, right)`, each a `(kind, object)` pair: the result, or a
/// refusal `(exception class name, message)`.
#[pyfunction]
pub fn _arrow_if_else(
    py: Python<'_>,
    cond: &Bound<'_, PyAny>,
    left: &Bound<'_, PyAny>,
    right: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let args = PyTuple::new(py, [cond, left, right])?;
    let ins = match imports(args.as_any())? {
        Ok(i) => i,
        Err(r) => return output(py, Err(r)),
    };
    let res = py
        .detach(|| if_else(&ins[0], &ins[1], &ins[2]))
        .map_err(arrow_err)?;
    output(py, res)
}

/// A kernel error (a bug: the arguments were checked) or a result.
type Computed = Result<Refused<(Vec<ArrayRef>, DataType, bool)>, ArrowError>;

fn if_else(cond: &In, left: &In, right: &In) -> Computed {
    if cond.dtype() != &DataType::Boolean {
        return Ok(refuse(
            "NotImplementedError",
            format!("if_else: a condition of type {}", cond.dtype()),
        ));
    }
    let dtype = match value_type(&[left, right]) {
        Ok(d) => d,
        Err(r) => return Ok(Err(r)),
    };
    let (segs, chunked) = match segments(&[cond, left, right]) {
        Ok(s) => s,
        Err(r) => return Ok(Err(r)),
    };
    let mut out = Vec::with_capacity(segs.len());
    for (s, e) in segs {
        let c = cond_piece(&cond.piece(s, e), e - s);
        let (l, r) = (left.piece(s, e), right.piece(s, e));
        out.push(kernels::if_else(&c, l.datum(), r.datum())?);
    }
    Ok(Ok((out, dtype, chunked)))
}

/// `_arrow_case_when(cond, values)`: `cond` a `(kind, object)` pair of a struct of booleans,
/// `values` a list of them (one per field, and optionally a last one, the ELSE).
#[pyfunction]
pub fn _arrow_case_when(
    py: Python<'_>,
    cond: &Bound<'_, PyAny>,
    values: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let cond = match import_arg(cond)? {
        Ok(c) => c,
        Err(r) => return output(py, Err(r)),
    };
    let values = match imports(values)? {
        Ok(v) => v,
        Err(r) => return output(py, Err(r)),
    };
    let res = py.detach(|| case_when(&cond, &values)).map_err(arrow_err)?;
    output(py, res)
}

fn case_when(cond: &In, values: &[In]) -> Computed {
    let k = match cond.dtype() {
        DataType::Struct(fields)
            if !fields.is_empty() && fields.iter().all(|f| f.data_type() == &DataType::Boolean) =>
        {
            fields.len()
        }
        dt => {
            return Ok(refuse(
                "TypeError",
                format!("case_when: a condition of type {dt}"),
            ));
        }
    };
    if values.len() != k && values.len() != k + 1 {
        return Ok(refuse(
            "ValueError",
            format!(
                "case_when: number of struct fields must be equal to or one less than count of remaining arguments ({}), got: {k}",
                values.len()
            ),
        ));
    }
    let has_nulls = match cond {
        In::Scalar(a) => a.null_count() > 0,
        In::Col { chunks, .. } => chunks.iter().any(|c| c.null_count() > 0),
    };
    if has_nulls {
        return Ok(refuse(
            "ValueError",
            "cond struct must not be a null scalar or have top-level nulls",
        ));
    }
    let vrefs: Vec<&In> = values.iter().collect();
    let dtype = match value_type(&vrefs) {
        Ok(d) => d,
        Err(r) => return Ok(Err(r)),
    };
    let mut all: Vec<&In> = vec![cond];
    all.extend(values.iter());
    let (segs, chunked) = match segments(&all) {
        Ok(s) => s,
        Err(r) => return Ok(Err(r)),
    };
    let mut out = Vec::with_capacity(segs.len());
    for (s, e) in segs {
        let c = cond.piece(s, e);
        let masks: Vec<BooleanArray> = match &c {
            Piece::Array(a) => {
                let st: &StructArray = a.as_struct();
                st.columns()
                    .iter()
                    .map(|col| col.as_boolean().clone())
                    .collect()
            }
            Piece::Scalar(sc) => {
                let st: &StructArray = sc.get().0.as_struct();
                st.columns()
                    .iter()
                    .map(|col| cond_piece(&Piece::Scalar(Scalar::new(col.clone())), e - s))
                    .collect()
            }
        };
        let whens: Vec<kernels::When<'_>> = masks.iter().map(kernels::When::Mask).collect();
        let pieces: Vec<Piece> = values.iter().map(|v| v.piece(s, e)).collect();
        let datums: Vec<&dyn Datum> = pieces.iter().map(Piece::datum).collect();
        let default = (datums.len() > k).then(|| datums[k]);
        out.push(kernels::case_when(&whens, &datums[..k], default)?);
    }
    Ok(Ok((out, dtype, chunked)))
}

/// A result array: exports itself through `__arrow_c_array__` (what `pyarrow.array(...)`
/// and every PyCapsule consumer import without copying).
#[pyclass(name = "ArrowArray", module = "selectjit.arrow", frozen)]
pub struct ArrowArrayOut {
    array: ArrayRef,
}

#[pymethods]
impl ArrowArrayOut {
    /// The Arrow PyCapsule interface: `(schema capsule, array capsule)`. A requested schema
    /// other than the array's own is not honoured (the protocol lets a producer ignore it).
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema;
        let (array, schema) = to_ffi(&self.array.to_data()).map_err(arrow_err)?;
        Ok((
            PyCapsule::new_with_value(py, schema, SCHEMA)?,
            PyCapsule::new_with_value(py, array, ARRAY)?,
        ))
    }

    /// The array's type as an Arrow schema capsule.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.array.data_type()).map_err(arrow_err)?;
        PyCapsule::new_with_value(py, schema, SCHEMA)
    }

    fn __len__(&self) -> usize {
        self.array.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "<selectjit.arrow.ArrowArray {} of {} rows, {} null>",
            self.array.data_type(),
            self.array.len(),
            self.array.null_count()
        )
    }
}

/// A chunked result: exports itself through `__arrow_c_stream__` (what
/// `pyarrow.chunked_array(...)` imports without copying).
#[pyclass(name = "ArrowChunkedArray", module = "selectjit.arrow", frozen)]
pub struct ArrowChunkedOut {
    chunks: Vec<ArrayRef>,
    dtype: DataType,
}

#[pymethods]
impl ArrowChunkedOut {
    /// The Arrow PyCapsule interface: a stream of the chunks. A requested schema other than
    /// the chunks' own is not honoured.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        // The type must be exportable (checked here, where an error can be raised).
        FFI_ArrowSchema::try_from(&self.dtype).map_err(arrow_err)?;
        let stream = export_stream(self.chunks.clone(), self.dtype.clone());
        PyCapsule::new_with_value(py, stream, STREAM)
    }

    /// The chunks' type as an Arrow schema capsule.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(&self.dtype).map_err(arrow_err)?;
        PyCapsule::new_with_value(py, schema, SCHEMA)
    }

    fn __len__(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum()
    }

    fn __repr__(&self) -> String {
        format!(
            "<selectjit.arrow.ArrowChunkedArray {} of {} rows in {} chunks>",
            self.dtype,
            self.__len__(),
            self.chunks.len()
        )
    }
}

/// The private data of an exported stream.
struct StreamData {
    chunks: std::vec::IntoIter<ArrayRef>,
    dtype: DataType,
    error: Option<CString>,
}

/// A C stream of `chunks` (arrow-rs exports streams of record batches only).
fn export_stream(chunks: Vec<ArrayRef>, dtype: DataType) -> FFI_ArrowArrayStream {
    let data = Box::new(StreamData {
        chunks: chunks.into_iter(),
        dtype,
        error: None,
    });
    FFI_ArrowArrayStream {
        get_schema: Some(stream_get_schema),
        get_next: Some(stream_get_next),
        get_last_error: Some(stream_get_last_error),
        release: Some(stream_release),
        private_data: Box::into_raw(data) as *mut c_void,
    }
}

/// The stream's private data.
///
/// # Safety
/// `stream` is a live stream made by [`export_stream`].
unsafe fn stream_data<'a>(stream: *mut FFI_ArrowArrayStream) -> &'a mut StreamData {
    // SAFETY: (caller) private_data is the StreamData box of a live stream.
    unsafe { &mut *((*stream).private_data as *mut StreamData) }
}

unsafe extern "C" fn stream_get_schema(
    stream: *mut FFI_ArrowArrayStream,
    out: *mut FFI_ArrowSchema,
) -> c_int {
    // SAFETY: the consumer calls this on the live stream (the C stream interface).
    let data = unsafe { stream_data(stream) };
    match FFI_ArrowSchema::try_from(Field::new("", data.dtype.clone(), true)) {
        Ok(s) => {
            // SAFETY: `out` points to a struct the consumer owns, released or uninitialised.
            unsafe { std::ptr::write(out, s) };
            0
        }
        Err(e) => {
            data.error = CString::new(e.to_string()).ok();
            22 // EINVAL
        }
    }
}

unsafe extern "C" fn stream_get_next(
    stream: *mut FFI_ArrowArrayStream,
    out: *mut FFI_ArrowArray,
) -> c_int {
    // SAFETY: the consumer calls this on the live stream (the C stream interface).
    let data = unsafe { stream_data(stream) };
    let next = match data.chunks.next() {
        Some(a) => FFI_ArrowArray::new(&a.to_data()),
        None => FFI_ArrowArray::empty(),
    };
    // SAFETY: `out` points to a struct the consumer owns, released or uninitialised.
    unsafe { std::ptr::write(out, next) };
    0
}

unsafe extern "C" fn stream_get_last_error(stream: *mut FFI_ArrowArrayStream) -> *const c_char {
    // SAFETY: the consumer calls this on the live stream (the C stream interface).
    let data = unsafe { stream_data(stream) };
    data.error.as_ref().map_or(std::ptr::null(), |e| e.as_ptr())
}

unsafe extern "C" fn stream_release(stream: *mut FFI_ArrowArrayStream) {
    if stream.is_null() {
        return;
    }
    // SAFETY: the stream is live: its private data is the box made by `export_stream`,
    // dropped once (the release callback is cleared).
    unsafe {
        let s = &mut *stream;
        if !s.private_data.is_null() {
            drop(Box::from_raw(s.private_data as *mut StreamData));
        }
        s.private_data = std::ptr::null_mut();
        s.get_schema = None;
        s.get_next = None;
        s.get_last_error = None;
        s.release = None;
    }
}

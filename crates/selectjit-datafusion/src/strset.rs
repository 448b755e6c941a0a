//! `WHEN`s that test a string column against literals (`s = 'A'`, `s <> 'A'`, `s IN ('A',
//! 'B')`, `NOT IN`, and `OR`s of equalities or `AND`s of inequalities of one column), computed
//! in one pass over the column: each row's length first, then its bytes against the few
//! literals of that length. DataFusion makes a `BooleanArray` per comparison and one more per
//! `OR` / `AND`.
//!
//! A `WHEN` is only true or not: a null is false. So the result here is `valid && (row in
//! set) != negated`, with no validity of its own; it equals DataFusion's boolean at every row
//! where that one is true, and is false wherever that one is false or null (`NOT`, `OR` and
//! `AND` over one column keep a null row null).
//!
//! Columns of type `Utf8`, `LargeUtf8`, `Utf8View`, `Binary`, `LargeBinary` and `BinaryView`
//! are read here; any other (a dictionary, a scalar) runs the original expression.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, GenericByteArray, GenericByteViewArray,
};
use datafusion::arrow::buffer::{BooleanBuffer, Buffer};
use datafusion::arrow::datatypes::{ArrowNativeType, ByteArrayType, ByteViewType, DataType};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, InListExpr, Literal, NotExpr};

/// Past this many literals a hash set finds a row's; below, a scan of those of its length.
const SCAN_MAX: usize = 16;

/// `col IN set` (or `NOT IN` when `negated`), null rows false.
#[derive(Debug, Clone)]
pub(crate) struct StrSet {
    /// The column (any expression that is not a literal).
    col: Arc<dyn PhysicalExpr>,
    /// The literals, each once.
    set: Set,
    negated: bool,
    /// The `WHEN` as DataFusion has it: run when the column is of another type.
    src: Arc<dyn PhysicalExpr>,
}

/// The literals of a [`StrSet`], each with its forms for a quick test.
#[derive(Debug, Clone)]
struct Set {
    lits: Vec<Lit>,
    /// With more than [`SCAN_MAX`] literals.
    hash: Option<HashSet<Box<[u8]>>>,
}

#[derive(Debug, Clone)]
struct Lit {
    bytes: Box<[u8]>,
    /// The first (up to) 8 bytes, little-endian, zero above the length.
    word: u64,
    /// The bits of a word of 8 bytes that hold the literal's (up to 8).
    word_mask: u64,
    /// The literal as a byte view's 128 bits: the length, then the bytes inline (at most 12)
    /// or their first four (longer).
    view: u128,
    /// The bits of a view that hold the length and the bytes `view` has. A row's view and'ed
    /// with it equals `view` exactly when the row has the literal's length and those bytes.
    view_mask: u128,
}

impl Lit {
    fn new(bytes: &[u8]) -> Lit {
        let mut w = [0u8; 8];
        let k = bytes.len().min(8);
        w[..k].copy_from_slice(&bytes[..k]);
        let word_mask = if k == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * k)) - 1
        };
        let mut v = [0u8; 16];
        v[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
        let k = if bytes.len() <= 12 { bytes.len() } else { 4 };
        v[4..4 + k].copy_from_slice(&bytes[..k]);
        Lit {
            bytes: bytes.into(),
            word: u64::from_le_bytes(w),
            word_mask,
            view: u128::from_le_bytes(v),
            view_mask: u128::MAX >> (96 - 8 * k),
        }
    }

    /// Inline in a view: its view alone decides.
    fn inline(&self) -> bool {
        self.bytes.len() <= 12
    }
}

impl Set {
    fn new(mut lits: Vec<Box<[u8]>>) -> Set {
        lits.sort();
        lits.dedup();
        let hash = (lits.len() > SCAN_MAX).then(|| lits.iter().cloned().collect());
        Set {
            lits: lits.iter().map(|b| Lit::new(b)).collect(),
            hash,
        }
    }

    /// Whether `b` is one of the literals.
    fn has(&self, b: &[u8]) -> bool {
        match &self.hash {
            Some(h) => h.contains(b),
            None => self.lits.iter().any(|l| *l.bytes == *b),
        }
    }
}

impl Lit {
    /// Whether a row of length `w.0` whose first 8 bytes are `w.1` is this literal (of at
    /// most 8 bytes).
    #[inline(always)]
    fn word_is(&self, w: (usize, u64)) -> bool {
        (w.0 == self.bytes.len()) & (w.1 & self.word_mask == self.word)
    }

    /// Whether a row's byte view `v` has this literal's length and the bytes the view holds
    /// (all of them for a literal of at most 12 bytes).
    #[inline(always)]
    fn view_is(&self, v: u128) -> bool {
        v & self.view_mask == self.view
    }
}

/// `n` bits, 64 at a time, bit `i` from `f(i, &item_i)`.
#[inline(always)]
fn pack<T>(items: &[T], mut f: impl FnMut(usize, &T) -> bool) -> BooleanBuffer {
    let n = items.len();
    let mut words = Vec::with_capacity(n.div_ceil(64));
    for (c, chunk) in items.chunks(64).enumerate() {
        let mut w = 0u64;
        for (j, x) in chunk.iter().enumerate() {
            w |= (f(c * 64 + j, x) as u64) << j;
        }
        words.push(w);
    }
    BooleanBuffer::new(Buffer::from_vec(words), 0, n)
}

/// A string (or binary) literal's bytes; `None` for null or another type.
fn lit_bytes(e: &Arc<dyn PhysicalExpr>) -> Option<Box<[u8]>> {
    let l = e.downcast_ref::<Literal>()?;
    match l.value() {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some(s.as_bytes().into()),
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b)) => Some(b.as_slice().into()),
        _ => None,
    }
}

fn is_lit(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.downcast_ref::<Literal>().is_some()
}

/// A test's column, its literals and whether it is negated.
type Parts = (Arc<dyn PhysicalExpr>, Vec<Box<[u8]>>, bool);

/// The [`Parts`] of `e`, when it has one of the forms of this module.
fn parts(e: &Arc<dyn PhysicalExpr>) -> Option<Parts> {
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        let (l, r) = (b.left(), b.right());
        return match b.op() {
            Operator::Eq | Operator::NotEq => {
                let negated = *b.op() == Operator::NotEq;
                let (col, lit) = match (lit_bytes(l), lit_bytes(r)) {
                    (None, Some(lit)) if !is_lit(l) => (l, lit),
                    (Some(lit), None) if !is_lit(r) => (r, lit),
                    _ => return None,
                };
                Some((Arc::clone(col), vec![lit], negated))
            }
            // `a = x OR a = y`: a in {x, y}; `a <> x AND a <> y`: a not in {x, y}. A null `a`
            // makes both sides null, so the whole is null.
            Operator::Or | Operator::And => {
                let (lc, mut ls, ln) = parts(l)?;
                let (rc, rs, rn) = parts(r)?;
                let negated = *b.op() == Operator::And;
                if ln != negated || rn != negated || lc.as_ref() != rc.as_ref() {
                    return None;
                }
                ls.extend(rs);
                Some((lc, ls, negated))
            }
            _ => None,
        };
    }
    if let Some(i) = e.downcast_ref::<InListExpr>() {
        if is_lit(i.expr()) || i.list().is_empty() {
            return None;
        }
        // A null in the list makes every row that is not in it null (`NOT IN`: every row):
        // left to DataFusion.
        let lits = i.list().iter().map(lit_bytes).collect::<Option<Vec<_>>>()?;
        return Some((Arc::clone(i.expr()), lits, i.negated()));
    }
    if let Some(n) = e.downcast_ref::<NotExpr>() {
        let (c, s, neg) = parts(n.arg())?;
        return Some((c, s, !neg));
    }
    None
}

impl StrSet {
    /// The `WHEN` `e` as a [`StrSet`], when it has one of this module's forms.
    pub(crate) fn of(e: &Arc<dyn PhysicalExpr>) -> Option<StrSet> {
        let (col, lits, negated) = parts(e)?;
        Some(StrSet {
            col,
            set: Set::new(lits),
            negated,
            src: Arc::clone(e),
        })
    }

    /// The `WHEN`'s value on `batch`: true where it is true, false where false or null.
    pub(crate) fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let rows = batch.num_rows();
        if let ColumnarValue::Array(a) = self.col.evaluate(batch)?
            && let Some(b) = self.on(&a)
        {
            return Ok(b);
        }
        let a = self.src.evaluate(batch)?.into_array(rows)?;
        Ok(a.as_boolean_opt()
            .ok_or_else(|| {
                datafusion::common::DataFusionError::Internal(format!(
                    "WHEN of type {} in a string test",
                    a.data_type()
                ))
            })?
            .clone())
    }

    /// The test on the column `a`, when of a type read here.
    pub(crate) fn on(&self, a: &ArrayRef) -> Option<BooleanArray> {
        let hits = match a.data_type() {
            DataType::Utf8 => self.offsets(a.as_string::<i32>()),
            DataType::LargeUtf8 => self.offsets(a.as_string::<i64>()),
            DataType::Binary => self.offsets(a.as_binary::<i32>()),
            DataType::LargeBinary => self.offsets(a.as_binary::<i64>()),
            DataType::Utf8View => self.views(a.as_string_view()),
            DataType::BinaryView => self.views(a.as_binary_view()),
            _ => return None,
        };
        let hits = if self.negated { !&hits } else { hits };
        let bits = match a.logical_nulls() {
            Some(n) => &hits & n.inner(),
            None => hits,
        };
        Some(BooleanArray::new(bits, None))
    }

    fn offsets<T: ByteArrayType>(&self, a: &GenericByteArray<T>) -> BooleanBuffer {
        let (offsets, values) = (a.value_offsets(), a.value_data());
        let n = a.len();
        let ends = &offsets[1..=n];
        let bytes = |i: usize, s: &T::Offset| &values[s.as_usize()..ends[i].as_usize()];
        if let Some(h) = &self.set.hash {
            return pack(&offsets[..n], |i, s| h.contains(bytes(i, s)));
        }
        let lits = &self.set.lits;
        if lits.iter().all(|l| l.bytes.len() <= 8) {
            // Every literal in one word: a row's length and its first 8 bytes decide (the
            // rows that start less than 8 bytes before the end of the buffer, bytewise).
            let word = |i: usize, s: &T::Offset| {
                let s = s.as_usize();
                let len = ends[i].as_usize() - s;
                values
                    .get(s..s + 8)
                    .map(|w| (len, u64::from_le_bytes(w.try_into().expect("8 bytes"))))
            };
            return match lits.as_slice() {
                [a] => pack(&offsets[..n], |i, s| match word(i, s) {
                    Some(w) => a.word_is(w),
                    None => self.set.has(bytes(i, s)),
                }),
                [a, b] => pack(&offsets[..n], |i, s| match word(i, s) {
                    Some(w) => a.word_is(w) | b.word_is(w),
                    None => self.set.has(bytes(i, s)),
                }),
                [a, b, c] => pack(&offsets[..n], |i, s| match word(i, s) {
                    Some(w) => a.word_is(w) | b.word_is(w) | c.word_is(w),
                    None => self.set.has(bytes(i, s)),
                }),
                _ => pack(&offsets[..n], |i, s| match word(i, s) {
                    Some(w) => lits.iter().fold(false, |h, l| h | l.word_is(w)),
                    None => self.set.has(bytes(i, s)),
                }),
            };
        }
        pack(&offsets[..n], |i, s| self.set.has(bytes(i, s)))
    }

    fn views<T: ByteViewType + ?Sized>(&self, a: &GenericByteViewArray<T>) -> BooleanBuffer {
        let views = a.views();
        let bytes = |i: usize| -> &[u8] { a.value(i).as_ref() };
        if let Some(h) = &self.set.hash {
            return pack(views, |i, _| h.contains(bytes(i)));
        }
        let lits = &self.set.lits;
        if lits.iter().all(Lit::inline) {
            // Every literal inline: the views alone decide.
            return match lits.as_slice() {
                [a] => pack(views, |_, &v| a.view_is(v)),
                [a, b] => pack(views, |_, &v| a.view_is(v) | b.view_is(v)),
                [a, b, c] => pack(views, |_, &v| a.view_is(v) | b.view_is(v) | c.view_is(v)),
                _ => pack(views, |_, &v| {
                    lits.iter().fold(false, |h, l| h | l.view_is(v))
                }),
            };
        }
        pack(views, |i, &v| {
            lits.iter()
                .any(|l| l.view_is(v) && (l.inline() || *bytes(i) == *l.bytes))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::StringArray;
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::physical_expr::expressions::{col, lit};

    fn words() -> Vec<&'static str> {
        vec![
            "",
            "A",
            "AB",
            "1-URGENT",
            "2-HIGH",
            "3-MEDIUM",
            "4-NOT SPECIFIED",
            "5-LOW",
            "exactly12chr",
            "exactly12chs",
            "thirteen char",
            "thirteen chas",
            "1-URGENT ",
            "1-URGEN",
            "été",
            "a much longer string than any view holds inline",
        ]
    }

    /// A column of `rows` words (some null), sliced at `off`, as each string type.
    fn columns(rows: usize, off: usize, seed: u64) -> Vec<ArrayRef> {
        let w = words();
        let mut x = seed;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let base: StringArray = (0..rows + off)
            .map(|_| {
                let r = next();
                (r % 7 != 0).then(|| w[(r >> 8) as usize % w.len()])
            })
            .collect();
        let base: ArrayRef = Arc::new(base);
        [
            DataType::Utf8,
            DataType::LargeUtf8,
            DataType::Utf8View,
            DataType::Binary,
            DataType::LargeBinary,
            DataType::BinaryView,
        ]
        .iter()
        .map(|t| cast(&base, t).expect("cast").slice(off, rows))
        .collect()
    }

    fn lit_of(t: &DataType, s: &str) -> Arc<dyn PhysicalExpr> {
        let v = ScalarValue::Utf8(Some(s.to_string()));
        lit(v.cast_to(t).expect("cast literal"))
    }

    /// Every form against DataFusion's own evaluation of the same expression (null = false).
    #[test]
    fn equals_datafusion() {
        let w = words();
        for (rows, off) in [(0, 0), (1, 0), (63, 3), (64, 0), (1000, 5), (8192, 61)] {
            for a in columns(rows, off, 1 + rows as u64 + off as u64) {
                let t = a.data_type().clone();
                let schema = Arc::new(Schema::new(vec![Field::new("s", t.clone(), true)]));
                let batch =
                    RecordBatch::try_new(Arc::clone(&schema), vec![Arc::clone(&a)]).expect("batch");
                let c = col("s", &schema).expect("col");
                let bin = |l: Arc<dyn PhysicalExpr>, op, r: Arc<dyn PhysicalExpr>| {
                    Arc::new(BinaryExpr::new(l, op, r)) as Arc<dyn PhysicalExpr>
                };
                let eq = |s: &str| bin(Arc::clone(&c), Operator::Eq, lit_of(&t, s));
                let ne = |s: &str| bin(Arc::clone(&c), Operator::NotEq, lit_of(&t, s));
                let inl = |xs: &[&str], neg: bool| {
                    let list = xs.iter().map(|s| lit_of(&t, s)).collect();
                    Arc::new(InListExpr::try_new(Arc::clone(&c), list, neg, &schema).expect("in"))
                        as Arc<dyn PhysicalExpr>
                };
                let many: Vec<String> = (0..40).map(|i| format!("x{i}")).collect();
                let mut big: Vec<&str> = many.iter().map(String::as_str).collect();
                big.extend(["1-URGENT", "été", "thirteen char", ""]);
                let mut exprs = vec![
                    bin(eq("1-URGENT"), Operator::Or, eq("2-HIGH")),
                    bin(ne("1-URGENT"), Operator::And, ne("2-HIGH")),
                    bin(lit_of(&t, "A"), Operator::Eq, Arc::clone(&c)),
                    bin(bin(eq("A"), Operator::Or, eq("AB")), Operator::Or, eq("")),
                    inl(&w[..8], false),
                    inl(&w[6..], true),
                    inl(&big, false),
                    inl(&big, true),
                    Arc::new(NotExpr::new(eq("thirteen char"))),
                    bin(
                        eq("1-URGENT"),
                        Operator::Or,
                        inl(&["exactly12chr", "1-URGENT"], false),
                    ),
                ];
                for s in &w {
                    exprs.push(eq(s));
                    exprs.push(ne(s));
                }
                for e in &exprs {
                    let s = StrSet::of(e).unwrap_or_else(|| panic!("not a string test: {e}"));
                    let ours = s.on(&a).expect("a string type");
                    assert_eq!(ours.null_count(), 0);
                    let theirs = e
                        .evaluate(&batch)
                        .expect("eval")
                        .into_array(rows)
                        .expect("arr");
                    let theirs = theirs.as_boolean();
                    for i in 0..rows {
                        let want = theirs.is_valid(i) && theirs.value(i);
                        assert_eq!(ours.value(i), want, "{t} {e} row {i} of {rows}+{off}");
                    }
                    // The whole path agrees too.
                    let via = s.evaluate(&batch).expect("evaluate");
                    assert_eq!(via, ours);
                }
            }
        }
    }

    /// Forms that are not a test of one column against literals stay DataFusion's.
    #[test]
    fn other_forms_are_left() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("u", DataType::Utf8, true),
        ]));
        let s = col("s", &schema).expect("s");
        let u = col("u", &schema).expect("u");
        let l = |x: &str| lit(x);
        let bin = |a: Arc<dyn PhysicalExpr>, op, b: Arc<dyn PhysicalExpr>| {
            Arc::new(BinaryExpr::new(a, op, b)) as Arc<dyn PhysicalExpr>
        };
        let null = lit(ScalarValue::Utf8(None));
        for e in [
            bin(Arc::clone(&s), Operator::Eq, Arc::clone(&u)),
            bin(Arc::clone(&s), Operator::Lt, l("A")),
            bin(l("A"), Operator::Eq, l("A")),
            bin(Arc::clone(&s), Operator::Eq, Arc::clone(&null)),
            // Two columns, or the wrong connective.
            bin(
                bin(Arc::clone(&s), Operator::Eq, l("A")),
                Operator::Or,
                bin(Arc::clone(&u), Operator::Eq, l("B")),
            ),
            bin(
                bin(Arc::clone(&s), Operator::Eq, l("A")),
                Operator::And,
                bin(Arc::clone(&s), Operator::Eq, l("B")),
            ),
            bin(
                bin(Arc::clone(&s), Operator::NotEq, l("A")),
                Operator::Or,
                bin(Arc::clone(&s), Operator::NotEq, l("B")),
            ),
            Arc::new(
                InListExpr::try_new(Arc::clone(&s), vec![l("A"), null], true, &schema).expect("in"),
            ),
            bin(Arc::clone(&s), Operator::Eq, lit(1i32)),
        ] {
            assert!(StrSet::of(&e).is_none(), "{e}");
        }
    }

    /// A column of another type runs the original expression.
    #[test]
    fn other_types_run_the_original() {
        let a: ArrayRef = Arc::new(
            cast(
                &(Arc::new(StringArray::from(vec![Some("A"), None, Some("B")])) as ArrayRef),
                &DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            )
            .expect("dict"),
        );
        let schema = Arc::new(Schema::new(vec![Field::new(
            "s",
            a.data_type().clone(),
            true,
        )]));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::clone(&a)]).expect("b");
        let e: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
            col("s", &schema).expect("s"),
            Operator::Eq,
            lit(ScalarValue::Dictionary(
                Box::new(DataType::Int32),
                Box::new(ScalarValue::Utf8(Some("A".into()))),
            )),
        ));
        // The dictionary literal is not read here, so the whole WHEN is DataFusion's.
        assert!(StrSet::of(&e).is_none());
        let e: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
            col("s", &schema).expect("s"),
            Operator::Eq,
            lit("A"),
        ));
        let s = StrSet::of(&e).expect("a string test");
        assert!(s.on(&a).is_none());
        let got = s.evaluate(&batch);
        // DataFusion may or may not compare a dictionary with a string; either way the
        // answer is its own.
        match (got, e.evaluate(&batch)) {
            (Ok(g), Ok(w)) => assert_eq!(&g, w.into_array(3).expect("a").as_boolean()),
            (Err(_), Err(_)) => {}
            (g, w) => panic!("{g:?} vs {w:?}"),
        }
    }

    /// Timing against DataFusion's own evaluation: `cargo test --release -p
    /// selectjit-datafusion --lib strset -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn timing() {
        let prio = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"];
        let base: StringArray = (0..8192u64)
            .map(|i| Some(prio[((i * 2654435761) >> 7) as usize % 5]))
            .collect();
        let base: ArrayRef = Arc::new(base);
        for t in [DataType::Utf8, DataType::Utf8View] {
            let a = cast(&base, &t).expect("cast");
            let schema = Arc::new(Schema::new(vec![Field::new("s", t.clone(), false)]));
            let batch = RecordBatch::try_new(Arc::clone(&schema), vec![a]).expect("b");
            let c = col("s", &schema).expect("s");
            let eq = |s: &str| {
                Arc::new(BinaryExpr::new(Arc::clone(&c), Operator::Eq, lit_of(&t, s)))
                    as Arc<dyn PhysicalExpr>
            };
            let ne = |s: &str| {
                Arc::new(BinaryExpr::new(
                    Arc::clone(&c),
                    Operator::NotEq,
                    lit_of(&t, s),
                )) as Arc<dyn PhysicalExpr>
            };
            let time = |f: &dyn Fn()| {
                let mut best = f64::MAX;
                for _ in 0..50 {
                    let t0 = std::time::Instant::now();
                    for _ in 0..20 {
                        f();
                    }
                    best = best.min(t0.elapsed().as_secs_f64() / 20.0);
                }
                best * 1e6
            };
            for (what, e) in [
                (
                    "= OR =",
                    Arc::new(BinaryExpr::new(eq("1-URGENT"), Operator::Or, eq("2-HIGH")))
                        as Arc<dyn PhysicalExpr>,
                ),
                (
                    "<> AND <>",
                    Arc::new(BinaryExpr::new(ne("1-URGENT"), Operator::And, ne("2-HIGH"))),
                ),
            ] {
                let s = StrSet::of(&e).expect("set");
                let ours = time(&|| {
                    std::hint::black_box(s.evaluate(&batch).expect("ours"));
                });
                let theirs = time(&|| {
                    std::hint::black_box(e.evaluate(&batch).expect("theirs"));
                });
                println!(
                    "{t} {what}: selectjit {ours:.2} us, DataFusion {theirs:.2} us per 8192 rows"
                );
            }
        }
    }
}

//! The expression language of the fused cases (`benches/fused_cases.json`) and of
//! `selectjit run --cond-expr`: a condition is a comparison `L OP R` (`OP` one of `>` `>=` `<`
//! `<=` `==` `!=`), a test `isnan(V)` / `isinf(V)` / `isfinite(V)`, or a negation
//! `logical_not(C)` / `!C`, with parentheses; a case's expression is `where(COND, A, B)`, or,
//! for the n-way cases (`benches/nway_cases.json`), `select([C1, C2, ...], [V1, V2, ...], D)`
//! where each condition may also be a bare variable (a bool mask).
//! Operands are variable names (letters, digits, `_`, not starting with a digit) or, where the
//! caller allows them, numeric literals (`0`, `-1.5`, `1e-3`, `inf`, `-inf`, `nan`, `true`,
//! `false`), which take the dtype of the other side of their comparison.
//!
//! Values of literals and of scalar variables become elements of a dtype with
//! [`scalar_bytes`]: an integer must be an integer in the dtype's range, a float is rounded to
//! the nearest value of the float dtype (as numpy does).

use half::{bf16, f16};
use selectjit::{CmpOp, DType, Error, Result, TestOp};

/// An operand of a condition: a variable, or a literal (its text as written).
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// A variable name.
    Var(String),
    /// A numeric literal, kept as written until its dtype is known.
    Lit(String),
}

impl std::fmt::Display for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Term::Var(s) | Term::Lit(s) => f.write_str(s),
        }
    }
}

/// A condition.
#[derive(Debug, Clone, PartialEq)]
pub enum CondExpr {
    /// `lhs OP rhs`.
    Cmp(CmpOp, Term, Term),
    /// `isnan(v)`, `isinf(v)`, `isfinite(v)`.
    Test(TestOp, Term),
    /// `logical_not(c)` / `!c`.
    Not(Box<CondExpr>),
}

/// `where(cond, then, else)`.
#[derive(Debug, Clone, PartialEq)]
pub struct WhereExpr {
    /// The condition.
    pub cond: CondExpr,
    /// Taken where the condition holds.
    pub then: Term,
    /// Taken elsewhere.
    pub else_: Term,
}

/// One condition of an n-way select: a condition of the fused grammar, or a bool variable
/// read as a mask.
#[derive(Debug, Clone, PartialEq)]
pub enum BranchCond {
    /// A comparison or a test (possibly negated).
    Pred(CondExpr),
    /// A bool variable, read as a mask (nonzero bytes are true).
    Mask(String),
}

impl BranchCond {
    /// The variables the condition reads, in order of first appearance.
    pub fn vars(&self) -> Vec<&str> {
        match self {
            BranchCond::Pred(c) => c.vars(),
            BranchCond::Mask(n) => vec![n.as_str()],
        }
    }
}

impl std::fmt::Display for BranchCond {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BranchCond::Pred(c) => c.fmt(f),
            BranchCond::Mask(n) => f.write_str(n),
        }
    }
}

/// `select([C1, C2, ...], [V1, V2, ...], D)`: the first true condition's value, else `D`
/// (numpy.select).
#[derive(Debug, Clone, PartialEq)]
pub struct SelectExpr {
    /// The conditions, in order (the first true one wins).
    pub conds: Vec<BranchCond>,
    /// One value per condition.
    pub values: Vec<Term>,
    /// Taken where no condition holds.
    pub default: Term,
}

impl SelectExpr {
    /// The variables the expression reads, in order of first appearance.
    pub fn vars(&self) -> Vec<&str> {
        let terms = self.values.iter().chain([&self.default]);
        let names = self
            .conds
            .iter()
            .flat_map(BranchCond::vars)
            .chain(terms.filter_map(|t| match t {
                Term::Var(n) => Some(n.as_str()),
                Term::Lit(_) => None,
            }));
        let mut v: Vec<&str> = Vec::new();
        for n in names {
            if !v.contains(&n) {
                v.push(n);
            }
        }
        v
    }
}

/// numpy's name of a comparison's ufunc, and its operator.
pub fn cmp_symbol(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "==",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    }
}

/// The function name of a test.
pub fn test_name(op: TestOp) -> &'static str {
    match op {
        TestOp::IsNan => "isnan",
        TestOp::IsInf => "isinf",
        TestOp::IsFinite => "isfinite",
    }
}

impl std::fmt::Display for CondExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CondExpr::Cmp(op, l, r) => write!(f, "{l} {} {r}", cmp_symbol(*op)),
            CondExpr::Test(op, v) => write!(f, "{}({v})", test_name(*op)),
            CondExpr::Not(c) => write!(f, "!({c})"),
        }
    }
}

impl CondExpr {
    /// The variables the condition reads, in order of first appearance.
    pub fn vars(&self) -> Vec<&str> {
        let mut v = Vec::new();
        self.collect(&mut v);
        v
    }

    fn collect<'a>(&'a self, v: &mut Vec<&'a str>) {
        let mut add = |t: &'a Term| {
            if let Term::Var(n) = t
                && !v.contains(&n.as_str())
            {
                v.push(n);
            }
        };
        match self {
            CondExpr::Cmp(_, l, r) => {
                add(l);
                add(r);
            }
            CondExpr::Test(_, t) => add(t),
            CondExpr::Not(c) => c.collect(v),
        }
    }

    /// The condition without its negations, and whether there was an odd number of them.
    pub fn strip_not(&self) -> (&CondExpr, bool) {
        match self {
            CondExpr::Not(c) => {
                let (inner, n) = c.strip_not();
                (inner, !n)
            }
            c => (c, false),
        }
    }
}

/// `e` with `ctx` in front of its message (one prefix: an invalid-argument or dtype error keeps
/// its kind).
pub fn context(e: Error, ctx: impl std::fmt::Display) -> Error {
    match e {
        Error::Invalid(m) => Error::Invalid(format!("{ctx}: {m}")),
        Error::DType(m) => Error::DType(format!("{ctx}: {m}")),
        e => Error::Invalid(format!("{ctx}: {e}")),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Num(String),
    Op(CmpOp),
    Bang,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
}

fn describe(t: Option<&(usize, Tok)>) -> String {
    match t {
        None => "the end".into(),
        Some((_, Tok::Name(n))) => format!("'{n}'"),
        Some((_, Tok::Num(n))) => format!("'{n}'"),
        Some((_, Tok::Op(op))) => format!("'{}'", cmp_symbol(*op)),
        Some((_, Tok::Bang)) => "'!'".into(),
        Some((_, Tok::LParen)) => "'('".into(),
        Some((_, Tok::RParen)) => "')'".into(),
        Some((_, Tok::LBracket)) => "'['".into(),
        Some((_, Tok::RBracket)) => "']'".into(),
        Some((_, Tok::Comma)) => "','".into(),
    }
}

fn lex(src: &str) -> Result<Vec<(usize, Tok)>> {
    let err = |at: usize, what: String| {
        Error::Invalid(format!(
            "expression '{src}': at character {}: {what}",
            at + 1
        ))
    };
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'(' => {
                out.push((i, Tok::LParen));
                i += 1
            }
            b')' => {
                out.push((i, Tok::RParen));
                i += 1
            }
            b',' => {
                out.push((i, Tok::Comma));
                i += 1
            }
            b'[' => {
                out.push((i, Tok::LBracket));
                i += 1
            }
            b']' => {
                out.push((i, Tok::RBracket));
                i += 1
            }
            b'<' | b'>' | b'=' | b'!' => {
                let two = b.get(i + 1) == Some(&b'=');
                let tok = match (c, two) {
                    (b'<', false) => Tok::Op(CmpOp::Lt),
                    (b'<', true) => Tok::Op(CmpOp::Le),
                    (b'>', false) => Tok::Op(CmpOp::Gt),
                    (b'>', true) => Tok::Op(CmpOp::Ge),
                    (b'=', true) => Tok::Op(CmpOp::Eq),
                    (b'!', true) => Tok::Op(CmpOp::Ne),
                    (b'!', false) => Tok::Bang,
                    _ => return Err(err(i, "'=' alone is not an operator (use '==')".into())),
                };
                out.push((i, tok));
                i += if two { 2 } else { 1 };
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push((start, Tok::Name(src[start..i].to_string())));
            }
            c if c.is_ascii_digit() || c == b'.' || c == b'-' || c == b'+' => {
                // A number: sign, digits, fraction, exponent (or a signed inf / nan).
                i += 1;
                while i < b.len() {
                    let d = b[i];
                    let exp_sign = (d == b'-' || d == b'+') && matches!(b[i - 1], b'e' | b'E');
                    if d.is_ascii_alphanumeric() || d == b'.' || d == b'_' || exp_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
                let text = &src[start..i];
                if text == "-" || text == "+" {
                    return Err(err(start, format!("'{text}' is not followed by a number")));
                }
                out.push((start, Tok::Num(text.to_string())));
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(err(i, format!("unexpected character '{ch}'")));
            }
        }
    }
    Ok(out)
}

/// Literal names that are numbers, not variables.
fn is_literal_name(n: &str) -> bool {
    matches!(n, "inf" | "nan" | "true" | "false")
}

struct Parser<'s> {
    src: &'s str,
    toks: Vec<(usize, Tok)>,
    pos: usize,
    literals: bool,
}

impl Parser<'_> {
    fn err(&self, what: String) -> Error {
        let at = match self.toks.get(self.pos) {
            Some((at, _)) => format!("at character {}", at + 1),
            None => "at the end".into(),
        };
        Error::Invalid(format!("expression '{}': {at}: {what}", self.src))
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.1)
    }

    fn expect(&mut self, t: Tok, what: &str) -> Result<()> {
        if self.peek() == Some(&t) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(format!(
                "expected {what}, found {}",
                describe(self.toks.get(self.pos))
            )))
        }
    }

    fn term(&mut self) -> Result<Term> {
        let t = match self.peek().cloned() {
            Some(Tok::Name(n)) if is_literal_name(&n) => Term::Lit(n),
            Some(Tok::Name(n)) => Term::Var(n),
            Some(Tok::Num(n)) => Term::Lit(n),
            _ => {
                return Err(self.err(format!(
                    "expected a variable{}, found {}",
                    if self.literals { " or a number" } else { "" },
                    describe(self.toks.get(self.pos))
                )));
            }
        };
        if let Term::Lit(n) = &t
            && !self.literals
        {
            return Err(self.err(format!(
                "'{n}' is a literal; every operand here must be a variable (scalars are variables of shape [])"
            )));
        }
        self.pos += 1;
        Ok(t)
    }

    fn cond(&mut self) -> Result<CondExpr> {
        match self.peek().cloned() {
            Some(Tok::Bang) => {
                self.pos += 1;
                Ok(CondExpr::Not(Box::new(self.cond()?)))
            }
            Some(Tok::LParen) => {
                self.pos += 1;
                let c = self.cond()?;
                self.expect(Tok::RParen, "')'")?;
                Ok(c)
            }
            Some(Tok::Name(n))
                if self.toks.get(self.pos + 1).map(|t| &t.1) == Some(&Tok::LParen) =>
            {
                let test = match n.as_str() {
                    "isnan" => Some(TestOp::IsNan),
                    "isinf" => Some(TestOp::IsInf),
                    "isfinite" => Some(TestOp::IsFinite),
                    "logical_not" => None,
                    _ => {
                        return Err(self.err(format!(
                            "unknown function '{n}' (isnan, isinf, isfinite, logical_not)"
                        )));
                    }
                };
                self.pos += 2;
                let c = match test {
                    Some(op) => {
                        let v = self.term()?;
                        if let Term::Lit(l) = &v {
                            return Err(Error::Invalid(format!(
                                "expression '{}': {n}({l}) tests a literal; it needs a variable",
                                self.src
                            )));
                        }
                        CondExpr::Test(op, v)
                    }
                    None => CondExpr::Not(Box::new(self.cond()?)),
                };
                self.expect(Tok::RParen, "')'")?;
                Ok(c)
            }
            _ => {
                let l = self.term()?;
                let op = match self.peek() {
                    Some(Tok::Op(op)) => *op,
                    _ => {
                        return Err(self.err(format!(
                            "expected a comparison (> >= < <= == !=) after '{l}', found {}",
                            describe(self.toks.get(self.pos))
                        )));
                    }
                };
                self.pos += 1;
                let r = self.term()?;
                if let (Term::Lit(a), Term::Lit(b)) = (&l, &r) {
                    return Err(Error::Invalid(format!(
                        "expression '{}': '{a} {} {b}' compares two literals; one side must be a variable",
                        self.src,
                        cmp_symbol(op)
                    )));
                }
                Ok(CondExpr::Cmp(op, l, r))
            }
        }
    }

    /// A condition of an n-way select's list: a bare variable followed by `,` or `]` is a
    /// mask, anything else a condition.
    fn branch_cond(&mut self) -> Result<BranchCond> {
        if let Some(Tok::Name(n)) = self.peek()
            && !is_literal_name(n)
            && matches!(
                self.toks.get(self.pos + 1).map(|t| &t.1),
                Some(Tok::Comma | Tok::RBracket)
            )
        {
            let n = n.clone();
            self.pos += 1;
            return Ok(BranchCond::Mask(n));
        }
        self.cond().map(BranchCond::Pred)
    }

    /// `[ITEM, ITEM, ...]` (at least one item), `what` naming the list in messages.
    fn list<T>(&mut self, what: &str, item: fn(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        self.expect(Tok::LBracket, &format!("'[' opening the list of {what}"))?;
        if self.peek() == Some(&Tok::RBracket) {
            return Err(self.err(format!("the list of {what} is empty")));
        }
        let mut v = vec![item(self)?];
        loop {
            match self.peek() {
                Some(Tok::Comma) => {
                    self.pos += 1;
                    v.push(item(self)?);
                }
                Some(Tok::RBracket) => {
                    self.pos += 1;
                    return Ok(v);
                }
                _ => {
                    return Err(self.err(format!(
                        "expected ',' or ']' in the list of {what}, found {}",
                        describe(self.toks.get(self.pos))
                    )));
                }
            }
        }
    }

    fn end(&self) -> Result<()> {
        if self.pos < self.toks.len() {
            return Err(self.err(format!(
                "unexpected {} after the end of the expression",
                describe(self.toks.get(self.pos))
            )));
        }
        Ok(())
    }
}

fn parser(src: &str, literals: bool) -> Result<Parser<'_>> {
    let toks = lex(src)?;
    if toks.is_empty() {
        return Err(Error::Invalid("the expression is empty".into()));
    }
    Ok(Parser {
        src,
        toks,
        pos: 0,
        literals,
    })
}

/// Parses a condition (`x > 0`, `!(a < b)`, `isnan(x)`, ...). `literals`: whether numbers may
/// stand for an operand (else every operand is a variable).
pub fn parse_cond(src: &str, literals: bool) -> Result<CondExpr> {
    let mut p = parser(src, literals)?;
    let c = p.cond()?;
    p.end()?;
    Ok(c)
}

/// Parses `where(COND, A, B)`, every operand a variable (the fused cases' form).
pub fn parse_where(src: &str) -> Result<WhereExpr> {
    let mut p = parser(src, false)?;
    match p.peek() {
        Some(Tok::Name(n)) if n == "where" => p.pos += 1,
        _ => return Err(p.err("expected 'where(COND, A, B)'".into())),
    }
    p.expect(Tok::LParen, "'(' after 'where'")?;
    let cond = p.cond()?;
    p.expect(Tok::Comma, "',' after the condition")?;
    let then = p.term()?;
    p.expect(Tok::Comma, "',' after the second argument")?;
    let else_ = p.term()?;
    p.expect(Tok::RParen, "')' closing where(")?;
    p.end()?;
    Ok(WhereExpr { cond, then, else_ })
}

/// Parses `select([C1, C2, ...], [V1, V2, ...], D)`, every operand a variable (the n-way
/// cases' form): each condition a condition of [`parse_where`]'s grammar or a bare bool
/// variable (a mask), one value per condition, at least one condition.
pub fn parse_select(src: &str) -> Result<SelectExpr> {
    let mut p = parser(src, false)?;
    match p.peek() {
        Some(Tok::Name(n)) if n == "select" => p.pos += 1,
        _ => return Err(p.err("expected 'select([C1, ...], [V1, ...], D)'".into())),
    }
    p.expect(Tok::LParen, "'(' after 'select'")?;
    let conds = p.list("conditions", Parser::branch_cond)?;
    p.expect(Tok::Comma, "',' after the list of conditions")?;
    let values = p.list("values", Parser::term)?;
    p.expect(Tok::Comma, "',' after the list of values")?;
    let default = p.term()?;
    p.expect(Tok::RParen, "')' closing select(")?;
    p.end()?;
    if conds.len() != values.len() {
        return Err(Error::Invalid(format!(
            "expression '{src}': {} conditions but {} values (one value per condition)",
            conds.len(),
            values.len()
        )));
    }
    Ok(SelectExpr {
        conds,
        values,
        default,
    })
}

/// One element of `dtype` with the value `text` (a literal, or a case's scalar `value`), as
/// little-endian bytes: integers must be integers in the dtype's range; floats round to the
/// nearest value of the dtype (`inf`, `-inf`, `nan` allowed); bool takes `true` / `false` /
/// `0` / `1`; complex dtypes take a real value.
pub fn scalar_bytes(dtype: DType, text: &str) -> Result<Vec<u8>> {
    let t = text.trim();
    let bad = |why: &str| Error::DType(format!("'{text}' is not a {dtype} value{why}"));
    let float = || -> Result<f64> {
        match t {
            "inf" | "+inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            "nan" => Ok(f64::NAN),
            "true" | "false" => Err(bad("")),
            _ => t.parse::<f64>().map_err(|_| bad("")),
        }
    };
    let int = |min: i128, max: i128| -> Result<i128> {
        let v: i128 = t.parse().map_err(|_| bad(" (integers only)"))?;
        if v < min || v > max {
            return Err(bad(&format!(" (out of range {min}..={max})")));
        }
        Ok(v)
    };
    Ok(match dtype {
        DType::Bool => match t {
            "true" | "1" => vec![1],
            "false" | "0" => vec![0],
            _ => return Err(bad(" (true, false, 0 or 1)")),
        },
        DType::U8 => vec![int(0, u8::MAX.into())? as u8],
        DType::I8 => (int(i8::MIN.into(), i8::MAX.into())? as i8)
            .to_le_bytes()
            .to_vec(),
        DType::U16 => (int(0, u16::MAX.into())? as u16).to_le_bytes().to_vec(),
        DType::I16 => (int(i16::MIN.into(), i16::MAX.into())? as i16)
            .to_le_bytes()
            .to_vec(),
        DType::U32 => (int(0, u32::MAX.into())? as u32).to_le_bytes().to_vec(),
        DType::I32 => (int(i32::MIN.into(), i32::MAX.into())? as i32)
            .to_le_bytes()
            .to_vec(),
        DType::U64 => (int(0, u64::MAX.into())? as u64).to_le_bytes().to_vec(),
        DType::I64 => (int(i64::MIN.into(), i64::MAX.into())? as i64)
            .to_le_bytes()
            .to_vec(),
        DType::F16 => f16::from_f64(float()?).to_le_bytes().to_vec(),
        DType::BF16 => bf16::from_f64(float()?).to_le_bytes().to_vec(),
        DType::F32 => (float()? as f32).to_le_bytes().to_vec(),
        DType::F64 => float()?.to_le_bytes().to_vec(),
        DType::Complex64 => {
            let mut v = (float()? as f32).to_le_bytes().to_vec();
            v.extend(0f32.to_le_bytes());
            v
        }
        DType::Complex128 => {
            let mut v = float()?.to_le_bytes().to_vec();
            v.extend(0f64.to_le_bytes());
            v
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(s: &str) -> Term {
        Term::Var(s.into())
    }

    #[test]
    fn parses_every_form() {
        let w = parse_where("where(x > zero, x, zero)").unwrap();
        assert_eq!(w.cond, CondExpr::Cmp(CmpOp::Gt, var("x"), var("zero")));
        assert_eq!((w.then, w.else_), (var("x"), var("zero")));
        for (s, op) in [
            (">=", CmpOp::Ge),
            ("<", CmpOp::Lt),
            ("<=", CmpOp::Le),
            ("==", CmpOp::Eq),
            ("!=", CmpOp::Ne),
        ] {
            let c = parse_cond(&format!("a{s}b"), false).unwrap();
            assert_eq!(c, CondExpr::Cmp(op, var("a"), var("b")));
        }
        let w = parse_where("where(logical_not(isnan(x)), x, y)").unwrap();
        assert_eq!(
            w.cond,
            CondExpr::Not(Box::new(CondExpr::Test(TestOp::IsNan, var("x"))))
        );
        assert_eq!(
            parse_cond("isinf(v_1)", false).unwrap(),
            CondExpr::Test(TestOp::IsInf, var("v_1"))
        );
        let c = parse_cond("!(!(a < b))", false).unwrap();
        assert_eq!(
            c.strip_not(),
            (&CondExpr::Cmp(CmpOp::Lt, var("a"), var("b")), false)
        );
        let c = parse_cond(" ! ( isfinite ( x ) ) ", false).unwrap();
        assert!(c.strip_not().1);
        assert_eq!(c.to_string(), "!(isfinite(x))");
        assert_eq!(c.vars(), ["x"]);
        // Literals where allowed.
        let c = parse_cond("x > -1.5e-3", true).unwrap();
        assert_eq!(
            c,
            CondExpr::Cmp(CmpOp::Gt, var("x"), Term::Lit("-1.5e-3".into()))
        );
        let c = parse_cond("0 == mask", true).unwrap();
        assert_eq!(
            c,
            CondExpr::Cmp(CmpOp::Eq, Term::Lit("0".into()), var("mask"))
        );
        assert_eq!(
            parse_cond("x != -inf", true).unwrap(),
            CondExpr::Cmp(CmpOp::Ne, var("x"), Term::Lit("-inf".into()))
        );
        assert_eq!(parse_cond("a < b", true).unwrap().vars(), ["a", "b"]);
    }

    #[test]
    fn bad_expressions_are_clear_errors() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("x >", "expected a variable or a number, found the end"),
            (
                "x > > 0",
                "at character 5: expected a variable or a number, found '>'",
            ),
            ("x = 0", "'=' alone is not an operator"),
            ("x", "expected a comparison"),
            ("x > 0 y", "unexpected 'y' after the end"),
            ("isnan(x", "expected ')'"),
            ("isnan(1.0)", "tests a literal"),
            ("sqrt(x) > 0", "unknown function 'sqrt'"),
            ("1 < 2", "compares two literals"),
            ("x > 0 # c", "unexpected character '#'"),
            ("x > -", "'-' is not followed by a number"),
            ("(x > 0", "expected ')'"),
        ];
        for (src, want) in cases {
            let e = parse_cond(src, true).unwrap_err().to_string();
            assert!(e.contains(want), "{src}: {e}");
        }
        let e = parse_cond("x > 0", false).unwrap_err().to_string();
        assert!(e.contains("'0' is a literal"), "{e}");
        for (src, want) in [
            ("x > 0", "expected 'where(COND, A, B)'"),
            ("where(x > y, x)", "expected ',' after the second argument"),
            ("where(x > y; x, y)", "unexpected character ';'"),
            ("where(x > y, x, y) z", "after the end"),
            ("where(x > y x, y)", "expected ',' after the condition"),
        ] {
            let e = parse_where(src).unwrap_err().to_string();
            assert!(e.contains(want), "{src}: {e}");
        }
    }

    #[test]
    fn parses_select() {
        let s = parse_select("select([isnan(x), x == pinf, mask], [zero, big, small], x)").unwrap();
        assert_eq!(
            s.conds,
            [
                BranchCond::Pred(CondExpr::Test(TestOp::IsNan, var("x"))),
                BranchCond::Pred(CondExpr::Cmp(CmpOp::Eq, var("x"), var("pinf"))),
                BranchCond::Mask("mask".into()),
            ]
        );
        assert_eq!(s.values, [var("zero"), var("big"), var("small")]);
        assert_eq!(s.default, var("x"));
        assert_eq!(s.vars(), ["x", "pinf", "mask", "zero", "big", "small"]);
        assert_eq!(s.conds[2].to_string(), "mask");
        // One branch, a negated condition, a mask last, no spaces.
        let s = parse_select("select([!(a<b)],[a],b)").unwrap();
        assert_eq!(
            s.conds,
            [BranchCond::Pred(CondExpr::Not(Box::new(CondExpr::Cmp(
                CmpOp::Lt,
                var("a"),
                var("b")
            ))))]
        );
        let s = parse_select("select([ pad , logical_not(causal == one) ], [v, v], d)").unwrap();
        assert_eq!(s.conds[0], BranchCond::Mask("pad".into()));
        assert!(matches!(&s.conds[1], BranchCond::Pred(CondExpr::Not(_))));
        assert_eq!(s.vars(), ["pad", "causal", "one", "v", "d"]);
    }

    #[test]
    fn bad_selects_are_clear_errors() {
        for (src, want) in [
            ("", "empty"),
            (
                "where(x > y, x, y)",
                "expected 'select([C1, ...], [V1, ...], D)'",
            ),
            ("select[x], [y], z)", "expected '(' after 'select'"),
            (
                "select(x, [y], z)",
                "expected '[' opening the list of conditions",
            ),
            ("select([], [], z)", "the list of conditions is empty"),
            ("select([a], [], z)", "the list of values is empty"),
            (
                "select([a b], [y], z)",
                "expected a comparison (> >= < <= == !=) after 'a'",
            ),
            ("select([a > b; c], [y], z)", "unexpected character ';'"),
            (
                "select([a > b) c], [y], z)",
                "expected ',' or ']' in the list of conditions, found ')'",
            ),
            ("select([a, b], [y], z)", "2 conditions but 1 values"),
            ("select([a], [y, w], z)", "1 conditions but 2 values"),
            (
                "select([a], y, z)",
                "expected '[' opening the list of values",
            ),
            (
                "select([a] [y], z)",
                "expected ',' after the list of conditions",
            ),
            (
                "select([a], [y] z)",
                "expected ',' after the list of values",
            ),
            ("select([a], [y], z", "expected ')' closing select("),
            ("select([a], [y], z) w", "unexpected 'w' after the end"),
            ("select([a], [0], z)", "'0' is a literal"),
            ("select([a > 0], [y], z)", "'0' is a literal"),
            ("select([a], [y], [z])", "expected a variable, found '['"),
            ("select([a], [y,], z)", "expected a variable, found ']'"),
            ("select([inf], [y], z)", "'inf' is a literal"),
        ] {
            let e = parse_select(src).unwrap_err().to_string();
            assert!(e.contains(want), "{src}: {e}");
        }
    }

    #[test]
    fn scalars_in_every_dtype() {
        assert_eq!(
            scalar_bytes(DType::F32, "-inf").unwrap(),
            f32::NEG_INFINITY.to_le_bytes()
        );
        assert_eq!(
            scalar_bytes(DType::F32, "-0.0").unwrap(),
            (-0.0f32).to_le_bytes()
        );
        assert_eq!(
            scalar_bytes(DType::F64, "0.1").unwrap(),
            0.1f64.to_le_bytes()
        );
        assert_eq!(
            scalar_bytes(DType::BF16, "1").unwrap(),
            bf16::from_f32(1.0).to_le_bytes()
        );
        assert_eq!(
            scalar_bytes(DType::F16, "65504").unwrap(),
            f16::MAX.to_le_bytes()
        );
        assert_eq!(scalar_bytes(DType::U8, "255").unwrap(), [255]);
        assert_eq!(
            scalar_bytes(DType::I64, "-2").unwrap(),
            (-2i64).to_le_bytes()
        );
        assert_eq!(
            scalar_bytes(DType::U64, "18446744073709551615").unwrap(),
            u64::MAX.to_le_bytes()
        );
        assert_eq!(scalar_bytes(DType::Bool, "true").unwrap(), [1]);
        assert_eq!(scalar_bytes(DType::Complex64, "2").unwrap().len(), 8);
        for (d, t) in [
            (DType::U8, "256"),
            (DType::U8, "-1"),
            (DType::I32, "1.5"),
            (DType::I8, "nan"),
            (DType::F32, "zero"),
            (DType::Bool, "2"),
        ] {
            let e = scalar_bytes(d, t).unwrap_err().to_string();
            assert!(e.contains(&format!("'{t}' is not a {d} value")), "{e}");
        }
    }
}

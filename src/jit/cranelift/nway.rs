//! Cranelift n-way kernels ([`NwaySpec`]): one loop over a flat output, branch-free. Each
//! element starts as the default, then each branch from the last to the first replaces it where
//! its condition holds (or, negated, does not), so that the first true condition wins; the
//! result is stored once, after every operand of the element was read (in place, the output may
//! be an operand).
//!
//! The kernel is `fn(ptrs, out, begin, end)` ([`NwayFn`](crate::kernel::nway::NwayFn)): it
//! runs elements `begin..end`. Every operand's pointer is read from `ptrs` once per call; a
//! splat's element is loaded (and splatted) once too, before the loops, and a condition of
//! splats alone is computed there. Where every condition computed per element has elements of
//! the output's width, a vector loop runs 16 bytes of output per iteration (lane masks from
//! vector compares, one `bitselect` per branch: x86 `blendv` where the host has it), and the
//! scalar loop (one `select` per branch) runs the rest; otherwise the scalar loop runs them all.
//!
//! Conditions per dtype, as the two-way kernels' (see `codegen/pred.rs`): masks any non-zero
//! byte; integers `icmp` with the dtype's signed or unsigned condition code; f32 / f64 `fcmp`
//! with the ordered codes (false when either side is NaN, `-0.0 == 0.0`), isnan
//! `fcmp uno x, x`, isinf / isfinite `fabs(x)` compared with infinity (`eq` / ordered `lt`);
//! tests of integers are constant (isfinite true, isnan and isinf false), and a branch whose
//! condition is constant is either taken outright or left out. Conditions of bool, f16, bf16 and
//! complex dtypes, elements of 16 bytes, and specs of rows ([`NwaySpec::rows`]) are not taken
//! (the engine runs those calls another way).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F64, I8, I16, I32, I64};
use cranelift_codegen::ir::{AbiParam, Function, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::codegen::pred::{float_cc, int_cc};
use crate::dtype::DType;
use crate::kernel::nway::{Form, NCond, NwaySpec};
use crate::pred::TestOp;

/// How the elements of a condition's dtype compare.
#[derive(Clone, Copy)]
enum Scalar {
    /// Integers of this type, signed or not.
    Int(Type, bool),
    /// f32 or f64.
    Float(Type),
}

impl Scalar {
    /// The class of `d`, where these kernels compare it (not bool, f16, bf16 nor complex).
    fn of(d: DType) -> Option<Scalar> {
        Some(match d {
            DType::I8 => Scalar::Int(I8, true),
            DType::I16 => Scalar::Int(I16, true),
            DType::I32 => Scalar::Int(I32, true),
            DType::I64 => Scalar::Int(I64, true),
            DType::U8 => Scalar::Int(I8, false),
            DType::U16 => Scalar::Int(I16, false),
            DType::U32 => Scalar::Int(I32, false),
            DType::U64 => Scalar::Int(I64, false),
            DType::F32 => Scalar::Float(F32),
            DType::F64 => Scalar::Float(F64),
            DType::Bool | DType::F16 | DType::BF16 | DType::Complex64 | DType::Complex128 => {
                return None;
            }
        })
    }

    fn ty(self) -> Type {
        match self {
            Scalar::Int(t, _) | Scalar::Float(t) => t,
        }
    }
}

/// Whether these kernels take `spec`: flat ones (not of rows), elements of 1, 2, 4 or 8 bytes,
/// conditions of masks and of integer and f32 / f64 dtypes.
pub(super) fn covers(spec: &NwaySpec) -> bool {
    !spec.rows
        && [1, 2, 4, 8].contains(&spec.width)
        && spec.branches.iter().all(|b| match b.cond {
            NCond::Mask(_) => true,
            NCond::Cmp(_, d, _, _) | NCond::Test(_, d, _) => Scalar::of(d).is_some(),
        })
}

/// The integer type of `w`-byte elements.
fn int_type(w: usize) -> Type {
    match w {
        1 => I8,
        2 => I16,
        4 => I32,
        _ => I64,
    }
}

/// Adds the kernel's parameters to `func`'s signature: `ptrs`, `out`, `begin`, `end`.
pub(super) fn declare_params(func: &mut Function) {
    for _ in 0..4 {
        func.signature.params.push(AbiParam::new(I64));
    }
}

/// Where the loops find an operand.
#[derive(Clone, Copy)]
enum Opnd {
    /// Elements of this many bytes from this base.
    Full(Value, usize),
    /// This element, loaded before the loops, and the vector of it (the element itself when
    /// there is no vector loop).
    Splat(Value, Value),
}

/// A branch's condition: computed per element, known before the loops (operands all splats),
/// or constant.
#[derive(Clone, Copy)]
enum Holds {
    PerElem,
    Once(Value),
    Always(bool),
}

/// Emits one n-way kernel function.
struct NwayEmitter<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    spec: &'a NwaySpec,
    flags: MemFlagsData,
    /// The vector loop's constants: zero bytes (masks compare with them), +infinity in f32 and
    /// f64 lanes (tests compare with them).
    zeros: Option<Value>,
    inf: [Option<Value>; 2],
}

/// Builds the body of `spec`'s kernel with `b` (a function of [`declare_params`]' signature).
pub(super) fn emit(b: &mut FunctionBuilder<'_>, spec: &NwaySpec) {
    NwayEmitter {
        b,
        spec,
        // Operands are only guaranteed to be byte-aligned, and every access was validated.
        flags: MemFlagsData::new().with_notrap(),
        zeros: None,
        inf: [None; 2],
    }
    .emit();
}

/// The value of a condition that is constant for its dtype (tests of integers: isfinite true,
/// isnan and isinf false).
fn constant(c: NCond) -> Option<bool> {
    match c {
        NCond::Test(op, d, _) if matches!(Scalar::of(d), Some(Scalar::Int(..))) => {
            Some(op == TestOp::IsFinite)
        }
        _ => None,
    }
}

/// Whether the operands of `c`, from the first of `forms`, are all splats.
fn splats_only(c: NCond, forms: &[Form]) -> bool {
    forms[..c.forms().len()].iter().all(|f| *f == Form::Splat)
}

/// The 128-bit vector of `t` lanes.
fn vector(t: Type) -> Type {
    t.by(16 / t.bytes()).expect("a 128-bit vector type")
}

impl NwayEmitter<'_, '_> {
    /// Whether the kernel has a vector loop: every condition computed per element is of the
    /// output's width (so its lane masks are the values' lanes).
    fn vectorizes(&self) -> bool {
        let forms = self.spec.forms();
        self.spec
            .branches
            .iter()
            .zip(self.cond_at())
            .all(|(br, at)| {
                constant(br.cond).is_some()
                    || splats_only(br.cond, &forms[at..])
                    || br.cond.width() == self.spec.width
            })
    }

    fn emit(mut self) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let p = self.b.block_params(entry).to_vec();
        let (ptrs, out, begin, end) = (p[0], p[1], p[2], p[3]);
        let work = self.b.create_block();
        let exit = self.b.create_block();
        let empty = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, begin, end);
        self.b.ins().brif(empty, exit, &[], work, &[]);

        // Before the loops: the operands' pointers, the splats, the conditions of splats.
        self.b.switch_to_block(work);
        let vec = self.vectorizes();
        let ops = self.operands(ptrs, vec);
        let holds: Vec<Holds> = self
            .spec
            .branches
            .iter()
            .zip(self.cond_at())
            .map(|(br, at)| {
                let cops = &ops[at..at + br.cond.forms().len()];
                if let Some(c) = constant(br.cond) {
                    Holds::Always(c)
                } else if cops.iter().all(|o| matches!(o, Opnd::Splat(..))) {
                    Holds::Once(self.cond(br.cond, cops, begin, false))
                } else {
                    Holds::PerElem
                }
            })
            .collect();
        let w = self.spec.width;
        let shead = self.b.create_block();
        let si = self.b.append_block_param(shead, I64);
        if vec {
            let z = self.b.ins().iconst(I8, 0);
            self.zeros = Some(self.b.ins().splat(vector(I8), z));
            let f = self.b.ins().f32const(f32::INFINITY);
            self.inf[0] = Some(self.b.ins().splat(vector(F32), f));
            let f = self.b.ins().f64const(f64::INFINITY);
            self.inf[1] = Some(self.b.ins().splat(vector(F64), f));
            // 16 bytes of output per iteration while a whole vector is left.
            let lanes = (16 / w) as i64;
            let vhead = self.b.create_block();
            let vi = self.b.append_block_param(vhead, I64);
            let vbody = self.b.create_block();
            self.b.ins().jump(vhead, &[begin.into()]);
            self.b.switch_to_block(vhead);
            let left = self.b.ins().isub(end, vi);
            let whole = self
                .b
                .ins()
                .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, left, lanes);
            self.b.ins().brif(whole, vbody, &[], shead, &[vi.into()]);
            self.b.switch_to_block(vbody);
            let acc = self.element(&ops, &holds, vi, true);
            let dst = self.addr(out, w, vi);
            self.b.ins().store(self.flags, acc, dst, 0);
            let next = self.b.ins().iadd_imm_s(vi, lanes);
            self.b.ins().jump(vhead, &[next.into()]);
        } else {
            self.b.ins().jump(shead, &[begin.into()]);
        }

        // One element per iteration (the vector loop's remainder).
        self.b.switch_to_block(shead);
        let sbody = self.b.create_block();
        let i = self.b.append_block_param(sbody, I64);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, si, end);
        self.b.ins().brif(more, sbody, &[si.into()], exit, &[]);
        self.b.switch_to_block(sbody);
        let acc = self.element(&ops, &holds, i, false);
        let dst = self.addr(out, w, i);
        self.b.ins().store(self.flags, acc, dst, 0);
        let next = self.b.ins().iadd_imm_s(i, 1);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, next, end);
        self.b.ins().brif(more, sbody, &[next.into()], exit, &[]);

        self.b.switch_to_block(exit);
        self.b.ins().return_(&[]);
        self.b.seal_all_blocks();
    }

    /// Where each branch's condition operands start in the operands.
    fn cond_at(&self) -> Vec<usize> {
        let mut at = 0;
        self.spec
            .branches
            .iter()
            .map(|br| {
                let a = at;
                at += br.cond.forms().len() + 1;
                a
            })
            .collect()
    }

    /// The output element `i` (or the vector of elements from `i`): the default, then each
    /// branch from the last to the first where its condition holds (or, `not`, does not).
    fn element(&mut self, ops: &[Opnd], holds: &[Holds], i: Value, vec: bool) -> Value {
        let ty = int_type(self.spec.width);
        let mut acc = self.fetch(*ops.last().expect("the default"), ty, i, vec);
        let at = self.cond_at();
        for ((br, h), at) in self.spec.branches.iter().zip(holds).zip(at).rev() {
            let n = br.cond.forms().len();
            let vop = ops[at + n];
            match *h {
                Holds::Always(c) => {
                    if c != br.not {
                        acc = self.fetch(vop, ty, i, vec);
                    }
                }
                Holds::Once(c) => {
                    let v = self.fetch(vop, ty, i, vec);
                    let (t, f) = if br.not { (acc, v) } else { (v, acc) };
                    acc = self.b.ins().select(c, t, f);
                }
                Holds::PerElem => {
                    let c = self.cond(br.cond, &ops[at..at + n], i, vec);
                    let v = self.fetch(vop, ty, i, vec);
                    let (t, f) = if br.not { (acc, v) } else { (v, acc) };
                    acc = if vec {
                        self.b.ins().bitselect(c, t, f)
                    } else {
                        self.b.ins().select(c, t, f)
                    };
                }
            }
        }
        acc
    }

    /// Every operand in call order, read from `ptrs`: a full one's base, a splat's element
    /// (loaded as its role's type: a mask byte, a condition's dtype, a value of the output's)
    /// and, with a vector loop (`vec`), its vector.
    fn operands(&mut self, ptrs: Value, vec: bool) -> Vec<Opnd> {
        let vty = int_type(self.spec.width);
        let mut tys: Vec<Type> = Vec::new();
        for br in &self.spec.branches {
            match br.cond {
                NCond::Mask(_) => tys.push(I8),
                NCond::Cmp(_, d, _, _) => {
                    let t = Scalar::of(d).expect("covered").ty();
                    tys.extend([t, t]);
                }
                NCond::Test(_, d, _) => tys.push(Scalar::of(d).expect("covered").ty()),
            }
            tys.push(vty);
        }
        tys.push(vty);
        let forms = self.spec.forms();
        let f = MemFlagsData::new().with_notrap();
        forms
            .iter()
            .zip(tys)
            .enumerate()
            .map(|(j, (form, ty))| {
                let p = self.b.ins().load(I64, f, ptrs, 8 * j as i32);
                match form {
                    Form::Full => Opnd::Full(p, ty.bytes() as usize),
                    Form::Splat => {
                        let x = self.b.ins().load(ty, self.flags, p, 0);
                        let v = if vec {
                            self.b.ins().splat(vector(ty), x)
                        } else {
                            x
                        };
                        Opnd::Splat(x, v)
                    }
                }
            })
            .collect()
    }

    /// The address of element `i` of `w`-byte elements from `base`.
    fn addr(&mut self, base: Value, w: usize, i: Value) -> Value {
        let off = match w {
            1 => i,
            _ => self.b.ins().ishl_imm_u(i, w.trailing_zeros() as i64),
        };
        self.b.ins().iadd(base, off)
    }

    /// Element `i` of operand `o` as `ty` (with `vec`, the vector of `ty` from element `i`).
    fn fetch(&mut self, o: Opnd, ty: Type, i: Value, vec: bool) -> Value {
        match o {
            Opnd::Splat(x, v) => {
                if vec {
                    v
                } else {
                    x
                }
            }
            Opnd::Full(base, w) => {
                let a = self.addr(base, w, i);
                if vec && ty.is_float() {
                    // Loaded as integer lanes and reinterpreted (no instruction), so that the
                    // load is not folded into the comparison: Cranelift 0.135 folds it into
                    // x86 SSE `cmpps` / `cmppd`, whose memory operand must be 16-byte aligned
                    // (the AVX forms need not be), and operands are only element-aligned (as
                    // in `codegen/pred.rs`).
                    let v = self.b.ins().load(vector(ty.as_int()), self.flags, a, 0);
                    return self.b.ins().bitcast(vector(ty), MemFlagsData::new(), v);
                }
                let ty = if vec { vector(ty) } else { ty };
                self.b.ins().load(ty, self.flags, a, 0)
            }
        }
    }

    /// Whether `cond` holds for element `i` of its operands `ops` (non-zero: it does); with
    /// `vec`, for the vector from element `i`, as lane masks of the operands' width.
    fn cond(&mut self, cond: NCond, ops: &[Opnd], i: Value, vec: bool) -> Value {
        match cond {
            NCond::Mask(_) => {
                let m = self.fetch(ops[0], I8, i, vec);
                match self.zeros.filter(|_| vec) {
                    Some(z) => self.b.ins().icmp(IntCC::NotEqual, m, z),
                    None => m,
                }
            }
            NCond::Cmp(op, d, _, _) => match Scalar::of(d).expect("covered") {
                Scalar::Int(t, signed) => {
                    let a = self.fetch(ops[0], t, i, vec);
                    let b = self.fetch(ops[1], t, i, vec);
                    self.b.ins().icmp(int_cc(op, signed), a, b)
                }
                Scalar::Float(t) => {
                    let a = self.fetch(ops[0], t, i, vec);
                    let b = self.fetch(ops[1], t, i, vec);
                    self.b.ins().fcmp(float_cc(op), a, b)
                }
            },
            NCond::Test(test, d, _) => match Scalar::of(d).expect("covered") {
                Scalar::Int(..) => unreachable!("a constant condition"),
                Scalar::Float(t) => {
                    let x = self.fetch(ops[0], t, i, vec);
                    if test == TestOp::IsNan {
                        return self.b.ins().fcmp(FloatCC::Unordered, x, x);
                    }
                    let inf = match (vec, t == F32) {
                        (true, f32) => self.inf[usize::from(!f32)].expect("made with the loop"),
                        (false, true) => self.b.ins().f32const(f32::INFINITY),
                        (false, false) => self.b.ins().f64const(f64::INFINITY),
                    };
                    let a = self.b.ins().fabs(x);
                    let cc = if test == TestOp::IsInf {
                        FloatCC::Equal
                    } else {
                        FloatCC::LessThan
                    };
                    self.b.ins().fcmp(cc, a, inf)
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use smallvec::smallvec;

    use super::Scalar;
    use crate::dtype::DType;
    use crate::jit::cranelift::Jit;
    use crate::jit::generator::Generator;
    use crate::kernel::nway::{Form, NBranch, NCond, NwaySpec};
    use crate::pred::{Canon, TestOp};

    /// A spec of `width`-byte elements: `cond` (and its negation) over full values, then a
    /// mask of a splat, the default full.
    fn spec(width: usize, cond: NCond) -> NwaySpec {
        let b = |cond, not| NBranch {
            cond,
            not,
            value: Form::Full,
        };
        NwaySpec {
            width,
            nt: false,
            rows: false,
            same: smallvec::SmallVec::new(),
            branches: smallvec![
                b(cond, false),
                b(cond, true),
                b(NCond::Mask(Form::Splat), false)
            ],
            default: Form::Full,
        }
    }

    /// Every condition kind of every dtype, in every form and at every width, compiles with the
    /// verifier on (the scalar loop alone, or with the vector loop); the dtypes and widths these
    /// kernels do not take get no kernel.
    #[test]
    fn every_condition_verifies() {
        let jit = Jit::host(true).unwrap();
        let forms = [Form::Full, Form::Splat];
        let mut n = 0;
        for d in DType::ALL {
            let mut conds = vec![NCond::Mask(Form::Full)];
            for op in [Canon::Eq, Canon::Lt, Canon::Le] {
                for l in forms {
                    for r in forms {
                        conds.push(NCond::Cmp(op, d, l, r));
                    }
                }
            }
            for t in [TestOp::IsNan, TestOp::IsInf, TestOp::IsFinite] {
                for f in forms {
                    conds.push(NCond::Test(t, d, f));
                }
            }
            for width in [1, 2, 4, 8, 16] {
                for &c in &conds {
                    let s = spec(width, c);
                    let takes = width <= 8 && (Scalar::of(d).is_some() || c == conds[0]);
                    match jit.compile_nway(&s) {
                        Some(k) => {
                            assert!(takes, "{s:?}");
                            k.unwrap_or_else(|e| panic!("{s:?}: {e}"));
                            n += 1;
                        }
                        None => assert!(!takes, "{s:?}"),
                    }
                }
            }
        }
        // Per width: the mask of each dtype, 18 conditions of each of the ten dtypes taken.
        assert_eq!(n, 4 * (15 + 10 * 18), "kernels compiled");
    }
}

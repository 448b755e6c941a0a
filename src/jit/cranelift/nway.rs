//! Cranelift n-way kernels ([`NwaySpec`]): one loop over a flat output, one element per
//! iteration, branch-free. Each element starts as the default, then each branch from the last to
//! the first replaces it where its condition holds (or, negated, does not), with one `select`,
//! so that the first true condition wins; the result is stored once, after every operand of the
//! element was read (in place, the output may be an operand).
//!
//! The kernel is `fn(ptrs, out, begin, end)` ([`NwayFn`](crate::kernel::nway::NwayFn)): it
//! runs elements `begin..end`. Every operand's pointer is read from `ptrs` once per call; a
//! splat's element is loaded once too, before the loop, and a condition of splats alone is
//! computed there. Conditions per dtype, as the two-way kernels' (see `codegen/pred.rs`): masks
//! any non-zero byte; integers `icmp` with the dtype's signed or unsigned condition code;
//! f32 / f64 `fcmp` with the ordered codes (false when either side is NaN, `-0.0 == 0.0`),
//! isnan `fcmp uno x, x`, isinf / isfinite `fabs(x)` compared with infinity (`eq` / ordered
//! `lt`); tests of integers are constant (isfinite true, isnan and isinf false), and a branch
//! whose condition is constant is either taken outright or left out.

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

/// Where the loop finds an operand.
#[derive(Clone, Copy)]
enum Opnd {
    /// Elements of this many bytes from this base.
    Full(Value, usize),
    /// This element, loaded before the loop.
    Splat(Value),
}

/// A branch's condition: computed per element, known before the loop (operands all splats), or
/// constant.
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
}

/// Builds the body of `spec`'s kernel with `b` (a function of [`declare_params`]' signature).
pub(super) fn emit(b: &mut FunctionBuilder<'_>, spec: &NwaySpec) {
    NwayEmitter {
        b,
        spec,
        // Operands are only guaranteed to be byte-aligned, and every access was validated.
        flags: MemFlagsData::new().with_notrap(),
    }
    .emit();
}

impl NwayEmitter<'_, '_> {
    fn emit(mut self) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let p = self.b.block_params(entry).to_vec();
        let (ptrs, out, begin, end) = (p[0], p[1], p[2], p[3]);
        let work = self.b.create_block();
        let body = self.b.create_block();
        let i = self.b.append_block_param(body, I64);
        let exit = self.b.create_block();
        let empty = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, begin, end);
        self.b.ins().brif(empty, exit, &[], work, &[]);

        // Before the loop: the operands' pointers, the splats, the conditions of splats.
        self.b.switch_to_block(work);
        let ops = self.operands(ptrs);
        let mut at = 0;
        let mut holds = Vec::with_capacity(self.spec.branches.len());
        for br in &self.spec.branches {
            let n = br.cond.forms().len();
            let cops = &ops[at..at + n];
            at += n + 1;
            let h = match br.cond {
                NCond::Test(op, d, _) if matches!(Scalar::of(d), Some(Scalar::Int(..))) => {
                    Holds::Always(op == TestOp::IsFinite)
                }
                _ if cops.iter().all(|o| matches!(o, Opnd::Splat(_))) => {
                    Holds::Once(self.cond(br.cond, cops, i))
                }
                _ => Holds::PerElem,
            };
            holds.push(h);
        }
        self.b.ins().jump(body, &[begin.into()]);

        // One element per iteration.
        self.b.switch_to_block(body);
        let w = self.spec.width;
        let ty = int_type(w);
        let mut acc = self.fetch(*ops.last().expect("the default"), ty, i);
        let mut at = ops.len() - 1;
        for (br, h) in self.spec.branches.iter().zip(&holds).rev() {
            let n = br.cond.forms().len();
            at -= n + 1;
            let vop = ops[at + n];
            let c = match *h {
                Holds::Always(c) if c != br.not => {
                    acc = self.fetch(vop, ty, i);
                    continue;
                }
                Holds::Always(_) => continue,
                Holds::Once(c) => c,
                Holds::PerElem => self.cond(br.cond, &ops[at..at + n], i),
            };
            let v = self.fetch(vop, ty, i);
            acc = if br.not {
                self.b.ins().select(c, acc, v)
            } else {
                self.b.ins().select(c, v, acc)
            };
        }
        let dst = self.addr(out, w, i);
        self.b.ins().store(self.flags, acc, dst, 0);
        let next = self.b.ins().iadd_imm_s(i, 1);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, next, end);
        self.b.ins().brif(more, body, &[next.into()], exit, &[]);

        self.b.switch_to_block(exit);
        self.b.ins().return_(&[]);
        self.b.seal_all_blocks();
    }

    /// Every operand in call order, read from `ptrs`: a full one's base, a splat's element
    /// (loaded as its role's type: a mask byte, a condition's dtype, a value of the output's).
    fn operands(&mut self, ptrs: Value) -> Vec<Opnd> {
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
                    Form::Splat => Opnd::Splat(self.b.ins().load(ty, self.flags, p, 0)),
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

    /// Element `i` of operand `o`, as `ty`.
    fn fetch(&mut self, o: Opnd, ty: Type, i: Value) -> Value {
        match o {
            Opnd::Splat(v) => v,
            Opnd::Full(base, w) => {
                let a = self.addr(base, w, i);
                self.b.ins().load(ty, self.flags, a, 0)
            }
        }
    }

    /// Whether `cond` holds for element `i` of its operands `ops` (non-zero: it does).
    fn cond(&mut self, cond: NCond, ops: &[Opnd], i: Value) -> Value {
        match cond {
            NCond::Mask(_) => self.fetch(ops[0], I8, i),
            NCond::Cmp(op, d, _, _) => match Scalar::of(d).expect("covered") {
                Scalar::Int(t, signed) => {
                    let a = self.fetch(ops[0], t, i);
                    let b = self.fetch(ops[1], t, i);
                    self.b.ins().icmp(int_cc(op, signed), a, b)
                }
                Scalar::Float(t) => {
                    let a = self.fetch(ops[0], t, i);
                    let b = self.fetch(ops[1], t, i);
                    self.b.ins().fcmp(float_cc(op), a, b)
                }
            },
            NCond::Test(test, d, _) => match Scalar::of(d).expect("covered") {
                Scalar::Int(..) => self.b.ins().iconst(I8, (test == TestOp::IsFinite) as i64),
                Scalar::Float(t) => {
                    let x = self.fetch(ops[0], t, i);
                    if test == TestOp::IsNan {
                        return self.b.ins().fcmp(FloatCC::Unordered, x, x);
                    }
                    let inf = if t == F32 {
                        self.b.ins().f32const(f32::INFINITY)
                    } else {
                        self.b.ins().f64const(f64::INFINITY)
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

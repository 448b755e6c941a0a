//! Predicates computed in registers: the condition of each element from `lhs` (and `rhs`),
//! never stored as a mask.
//!
//! Per dtype, with numpy's semantics (see [`crate::pred`]):
//!
//! * integers: `icmp` with the signed or unsigned condition code of the dtype;
//! * bool: both operands normalised to 0/1 (any non-zero byte is 1) before comparing;
//! * f32, f64: `fcmp` with the ordered codes `eq`, `lt`, `le` (false when either side is NaN;
//!   `-0.0 == 0.0`); `isnan` is `fcmp uno x, x`, `isinf` / `isfinite` compare `fabs(x)` with
//!   infinity (`eq` / ordered `lt`);
//! * f16, bf16: compared by value in 16-bit lanes without widening, through an order-preserving
//!   integer key of the sign-magnitude bits (`key = sign ? -magnitude : magnitude`, so that
//!   `-0` and `+0` are both 0) and a NaN test on the magnitude (above the exponent mask); the
//!   comparison of the keys is cleared where either side is NaN. Exact for every value, as
//!   widening to f32 would be, in half the lane width;
//! * complex: both parts (deinterleaved from pairs of vectors into a real and an imaginary
//!   vector), `==` on both parts, `<` / `<=` lexicographic as numpy's.
//!
//! A vector step computes the predicate of 16 elements as lane masks of the compared width
//! (half of it for complex) and converts them to the selected width in registers: `swiden_low`
//! / `swiden_high` to widen, `snarrow` to narrow (64-bit masks through their 32-bit halves,
//! which are equal), then selects with `bitselect` (or x86 `blendv`).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F64, I8, I8X16, I16, I16X8, I32, I32X4, I64};
use cranelift_codegen::ir::{ConstantData, Endianness, InstBuilder, MemFlagsData, Type, Value};

use super::{Count, KernelEmitter, VecConsts};
use crate::dtype::DType;
use crate::plan::{COND, ELSE, OPS, RHS, THEN};
use crate::pred::{Canon, Kind, TestOp};

/// How the values of a compared dtype compare.
#[derive(Clone, Copy)]
enum Class {
    /// Integers of this (scalar) type, signed or not.
    Int(Type, bool),
    /// bool bytes: any non-zero byte is 1.
    Bool,
    /// f16 or bf16: 16-bit sign-magnitude values whose magnitude bits above this one (the bits
    /// of infinity) are NaNs.
    Half(i64),
    /// f32 or f64.
    Float(Type),
    /// Complex: two parts of this float type.
    Complex(Type),
}

fn class(d: DType) -> Class {
    match d {
        DType::Bool => Class::Bool,
        DType::I8 => Class::Int(I8, true),
        DType::I16 => Class::Int(I16, true),
        DType::I32 => Class::Int(I32, true),
        DType::I64 => Class::Int(I64, true),
        DType::U8 => Class::Int(I8, false),
        DType::U16 => Class::Int(I16, false),
        DType::U32 => Class::Int(I32, false),
        DType::U64 => Class::Int(I64, false),
        DType::F16 => Class::Half(0x7c00),
        DType::BF16 => Class::Half(0x7f80),
        DType::F32 => Class::Float(F32),
        DType::F64 => Class::Float(F64),
        DType::Complex64 => Class::Complex(F32),
        DType::Complex128 => Class::Complex(F64),
    }
}

impl Class {
    /// The scalar type of one lane (of one part, for complex).
    fn lane(self) -> Type {
        match self {
            Class::Int(t, _) | Class::Float(t) | Class::Complex(t) => t,
            Class::Bool => I8,
            Class::Half(_) => I16,
        }
    }

    /// The 128-bit vector of lanes.
    fn vector(self) -> Type {
        let l = self.lane();
        l.by(16 / l.bytes()).expect("a 128-bit vector type")
    }
}

/// The condition code of `op` on integers, signed or not.
pub(in crate::jit::cranelift) fn int_cc(op: Canon, signed: bool) -> IntCC {
    match (op, signed) {
        (Canon::Eq, _) => IntCC::Equal,
        (Canon::Lt, true) => IntCC::SignedLessThan,
        (Canon::Le, true) => IntCC::SignedLessThanOrEqual,
        (Canon::Lt, false) => IntCC::UnsignedLessThan,
        (Canon::Le, false) => IntCC::UnsignedLessThanOrEqual,
    }
}

/// The ordered condition codes: false when either side is NaN.
pub(in crate::jit::cranelift) fn float_cc(op: Canon) -> FloatCC {
    match op {
        Canon::Eq => FloatCC::Equal,
        Canon::Lt => FloatCC::LessThan,
        Canon::Le => FloatCC::LessThanOrEqual,
    }
}

/// A predicate operand of a vector step: in memory (one vector per 16 bytes from the row
/// pointer), or one element broadcast along the row, splatted and prepared for the comparison
/// once per row (see [`KernelEmitter::prepare`]).
#[derive(Clone, Copy)]
pub(super) enum Src {
    Mem(Value),
    Splat([Value; 2]),
}

impl KernelEmitter<'_, '_> {
    fn le_bitcast(&mut self, ty: Type, v: Value) -> Value {
        if self.b.func.dfg.value_type(v) == ty {
            return v;
        }
        let le = MemFlagsData::new().with_endianness(Endianness::Little);
        self.b.ins().bitcast(ty, le, v)
    }

    fn splat_const(&mut self, ty: Type, v: i64) -> Value {
        let x = self.b.ins().iconst(ty.lane_type(), v);
        self.b.ins().splat(ty, x)
    }

    /// Makes the vector constants the predicate's vector steps use (in the current block,
    /// which dominates every loop of the kernel).
    pub(super) fn make_vec_consts(&mut self) {
        let mut k = VecConsts::default();
        let (d, test) = match self.sig.cond {
            Kind::Mask => return,
            Kind::Cmp(_, d) => (d, None),
            Kind::Test(t, d) => (d, Some(t)),
        };
        match (class(d), test) {
            (Class::Bool, None) => k.zero = Some(self.vector_const(&[0; 16])),
            (Class::Int(..) | Class::Bool, Some(t)) => {
                let b = if t == TestOp::IsFinite { 0xff } else { 0 };
                k.fixed = Some(self.vector_const(&[b; 16]));
            }
            (Class::Half(e), _) => {
                k.magnitude = Some(self.splat_const(I16X8, 0x7fff));
                k.exponent = Some(self.splat_const(I16X8, e));
            }
            (Class::Float(t) | Class::Complex(t), Some(_)) => {
                let inf = if t == F32 {
                    self.b.ins().f32const(f32::INFINITY)
                } else {
                    self.b.ins().f64const(f64::INFINITY)
                };
                let vt = class(d).vector();
                k.inf = Some(self.b.ins().splat(vt, inf));
            }
            // Comparisons of ints and floats read their operands only.
            (Class::Int(..) | Class::Float(_) | Class::Complex(_), None) => {}
        }
        self.vk = k;
    }

    // ---- one element -------------------------------------------------------------------

    /// The predicate of the element at `lhs` (and `rhs`), 0 or 1.
    pub(super) fn scalar_pred(&mut self, kind: Kind, lhs: Value, rhs: Value) -> Value {
        let f = self.flags;
        match kind {
            Kind::Mask => self.b.ins().uload8(I64, f, lhs, 0),
            Kind::Cmp(op, d) => match class(d) {
                Class::Int(t, signed) => {
                    let a = self.b.ins().load(t, f, lhs, 0);
                    let b = self.b.ins().load(t, f, rhs, 0);
                    self.b.ins().icmp(int_cc(op, signed), a, b)
                }
                Class::Bool => {
                    // 0 or 1 each; then false < true.
                    let [a, b] = [lhs, rhs].map(|p| {
                        let x = self.b.ins().load(I8, f, p, 0);
                        self.b.ins().icmp_imm_u(IntCC::NotEqual, x, 0)
                    });
                    self.b.ins().icmp(int_cc(op, false), a, b)
                }
                Class::Half(e) => {
                    let [(ka, na), (kb, nb)] = [lhs, rhs].map(|p| {
                        let x = self.b.ins().load(I16, f, p, 0);
                        let mag = self.b.ins().band_imm_u(x, 0x7fff);
                        let nan = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, mag, e);
                        (self.half_key(x, mag), nan)
                    });
                    let c = self.b.ins().icmp(int_cc(op, true), ka, kb);
                    let nan = self.b.ins().bor(na, nb);
                    self.b.ins().band_not(c, nan)
                }
                Class::Float(t) => {
                    let a = self.b.ins().load(t, f, lhs, 0);
                    let b = self.b.ins().load(t, f, rhs, 0);
                    self.b.ins().fcmp(float_cc(op), a, b)
                }
                Class::Complex(t) => {
                    let p = t.bytes() as i32;
                    let [ar, ai, br, bi] = [(lhs, 0), (lhs, p), (rhs, 0), (rhs, p)]
                        .map(|(x, o)| self.b.ins().load(t, f, x, o));
                    self.complex_cmp(op, [ar, ai], [br, bi])
                }
            },
            Kind::Test(test, d) => match class(d) {
                Class::Int(..) | Class::Bool => {
                    self.b.ins().iconst(I8, (test == TestOp::IsFinite) as i64)
                }
                Class::Half(e) => {
                    let x = self.b.ins().load(I16, f, lhs, 0);
                    let mag = self.b.ins().band_imm_u(x, 0x7fff);
                    let cc = match test {
                        TestOp::IsNan => IntCC::SignedGreaterThan,
                        TestOp::IsInf => IntCC::Equal,
                        TestOp::IsFinite => IntCC::SignedLessThan,
                    };
                    self.b.ins().icmp_imm_s(cc, mag, e)
                }
                Class::Float(t) => {
                    let x = self.b.ins().load(t, f, lhs, 0);
                    let inf = self.scalar_inf(t);
                    self.float_test(test, x, None, inf)
                }
                Class::Complex(t) => {
                    let re = self.b.ins().load(t, f, lhs, 0);
                    let im = self.b.ins().load(t, f, lhs, t.bytes() as i32);
                    let inf = self.scalar_inf(t);
                    self.float_test(test, re, Some(im), inf)
                }
            },
        }
    }

    fn scalar_inf(&mut self, t: Type) -> Value {
        if t == F32 {
            self.b.ins().f32const(f32::INFINITY)
        } else {
            self.b.ins().f64const(f64::INFINITY)
        }
    }

    /// The order-preserving key of 16-bit sign-magnitude values `x` (scalars or lanes) with
    /// magnitude `mag`: `-mag` for negative values, `mag` otherwise.
    fn half_key(&mut self, x: Value, mag: Value) -> Value {
        let s = self.b.ins().sshr_imm_u(x, 15);
        let flipped = self.b.ins().bxor(mag, s);
        self.b.ins().isub(flipped, s)
    }

    /// numpy's complex comparisons of `a = [re, im]` and `b` (scalars or lanes): `==` on both
    /// parts; `<` (`<=`) is `(ar < br && neither imaginary part NaN) || (ar == br && ai < bi)`
    /// (`ai <= bi`).
    fn complex_cmp(&mut self, op: Canon, a: [Value; 2], b: [Value; 2]) -> Value {
        let re_eq = self.b.ins().fcmp(FloatCC::Equal, a[0], b[0]);
        let im = self.b.ins().fcmp(float_cc(op), a[1], b[1]);
        if op == Canon::Eq {
            return self.b.ins().band(re_eq, im);
        }
        let re_lt = self.b.ins().fcmp(FloatCC::LessThan, a[0], b[0]);
        let ordered = self.b.ins().fcmp(FloatCC::Ordered, a[1], b[1]);
        let first = self.b.ins().band(re_lt, ordered);
        let second = self.b.ins().band(re_eq, im);
        self.b.ins().bor(first, second)
    }

    /// isnan / isinf / isfinite of a float `re` (and, for complex, `im`; any part NaN, any part
    /// infinite, both finite), scalars or lanes; `inf` is infinity of the same shape.
    fn float_test(&mut self, test: TestOp, re: Value, im: Option<Value>, inf: Value) -> Value {
        if test == TestOp::IsNan {
            // Unordered: either side NaN.
            return self.b.ins().fcmp(FloatCC::Unordered, re, im.unwrap_or(re));
        }
        let (cc, join) = match test {
            TestOp::IsInf => (FloatCC::Equal, false),
            TestOp::IsFinite | TestOp::IsNan => (FloatCC::LessThan, true),
        };
        let one = |em: &mut Self, x: Value| {
            let a = em.b.ins().fabs(x);
            em.b.ins().fcmp(cc, a, inf)
        };
        let r = one(self, re);
        match im {
            None => r,
            Some(im) => {
                let i = one(self, im);
                if join {
                    self.b.ins().band(r, i)
                } else {
                    self.b.ins().bor(r, i)
                }
            }
        }
    }

    // ---- 16 elements ---------------------------------------------------------------------

    /// A comparison's operand broadcast along the row, splatted and prepared. (A test's operand
    /// is never broadcast along a vector row: its row is then a copy.)
    fn pred_splat(&mut self, ptr: Value) -> Src {
        let d = self.sig.cond.dtype().expect("a predicate");
        let c = class(d);
        let (lane, vt) = (c.lane(), c.vector());
        let re = self.b.ins().load(lane, self.flags, ptr, 0);
        let re = self.b.ins().splat(vt, re);
        let im = matches!(c, Class::Complex(_)).then(|| {
            let x = self
                .b
                .ins()
                .load(lane, self.flags, ptr, lane.bytes() as i32);
            self.b.ins().splat(vt, x)
        });
        Src::Splat(self.prepare(c, re, im))
    }

    /// An operand's lanes as the comparisons use them: f16 / bf16 as their order-preserving key
    /// and NaN mask, bool as all-ones or zero lanes, complex as real and imaginary parts, the
    /// others as they are (twice).
    fn prepare(&mut self, c: Class, v: Value, im: Option<Value>) -> [Value; 2] {
        match c {
            Class::Half(_) => {
                let m = self.vk.magnitude.expect("made with the kernel");
                let e = self.vk.exponent.expect("made with the kernel");
                let mag = self.b.ins().band(v, m);
                let nan = self.b.ins().icmp(IntCC::SignedGreaterThan, mag, e);
                [self.half_key(v, mag), nan]
            }
            Class::Bool => {
                let z = self.vk.zero.expect("made with the kernel");
                let n = self.b.ins().icmp(IntCC::NotEqual, v, z);
                [n, n]
            }
            Class::Complex(_) => [v, im.expect("complex operands have two parts")],
            Class::Int(..) | Class::Float(_) => [v, v],
        }
    }

    /// Splits two vectors of complex elements (parts of `part` bytes) into their real parts
    /// and their imaginary parts, in element order.
    fn deinterleave(&mut self, x: Value, y: Value, part: usize) -> (Value, Value) {
        let ty = self.b.func.dfg.value_type(x);
        let (xb, yb) = (self.le_bitcast(I8X16, x), self.le_bitcast(I8X16, y));
        let idx = |imag: usize| -> Vec<u8> {
            (0..16)
                .map(|j| {
                    let (elem, byte) = (j / part, j % part);
                    (2 * part * elem + imag * part + byte) as u8
                })
                .collect()
        };
        let [re, im] = [0, 1].map(|k| {
            let imm = self.b.func.dfg.immediates.push(ConstantData::from(idx(k)));
            let v = self.b.ins().shuffle(xb, yb, imm);
            self.le_bitcast(ty, v)
        });
        (re, im)
    }

    /// Vector `k` of 16 elements' operand at element `first`, as lanes of the compared type
    /// (complex: vector `k` of real parts and of imaginary parts).
    fn pred_operand(&mut self, p: Value, first: i64, k: i64) -> (Value, Option<Value>) {
        let d = self.sig.cond.dtype().expect("a predicate");
        let c = class(d);
        let vt = c.vector();
        let cw = d.width() as i64;
        match c {
            Class::Complex(_) => {
                let off = (first * cw + 32 * k) as i32;
                let x = self.b.ins().load(vt, self.flags, p, off);
                let y = self.b.ins().load(vt, self.flags, p, off + 16);
                let (re, im) = self.deinterleave(x, y, cw as usize / 2);
                (re, Some(im))
            }
            Class::Float(t) => {
                // Loaded as integer lanes and reinterpreted (no instruction), so that the load
                // is not folded into the comparison: Cranelift 0.135 folds it into x86 SSE
                // `cmpps` / `cmppd`, whose memory operand must be 16-byte aligned (the AVX
                // forms need not be), and the operands here are only element-aligned.
                let off = (first * cw + 16 * k) as i32;
                let it = t
                    .as_int()
                    .by(16 / cw as u32)
                    .expect("a 128-bit vector type");
                let v = self.b.ins().load(it, self.flags, p, off);
                (self.b.ins().bitcast(vt, MemFlagsData::new(), v), None)
            }
            Class::Int(..) | Class::Bool | Class::Half(_) => {
                let off = (first * cw + 16 * k) as i32;
                (self.b.ins().load(vt, self.flags, p, off), None)
            }
        }
    }

    /// The predicate of 16 elements from element `first` of `lhs` (and `rhs`): masks of the
    /// selected width, one per data vector, in element order (lanes all ones where it holds).
    fn pred_masks(&mut self, lhs: Src, rhs: Src, first: i64) -> Vec<Value> {
        let (d, op, test) = match self.sig.cond {
            Kind::Cmp(op, d) => (d, Some(op), None),
            Kind::Test(t, d) => (d, None, Some(t)),
            Kind::Mask => unreachable!("masks are not predicates"),
        };
        let c = class(d);
        if let (Some(_), Some(m)) = (test, self.vk.fixed) {
            return vec![m; self.w];
        }
        // Lane width of the masks computed, and how many vectors of them 16 elements take.
        let lane = c.lane().bytes() as usize;
        let mut masks = Vec::with_capacity(lane);
        for k in 0..lane as i64 {
            let m = match (op, test) {
                (Some(op), _) => {
                    let [a, b] = [lhs, rhs].map(|src| match src {
                        Src::Splat(v) => v,
                        Src::Mem(p) => {
                            let (x, im) = self.pred_operand(p, first, k);
                            self.prepare(c, x, im)
                        }
                    });
                    self.vec_cmp(op, c, a, b)
                }
                (None, Some(t)) => {
                    let Src::Mem(p) = lhs else {
                        unreachable!("a test's operand is not splatted in a vector row")
                    };
                    let (x, im) = self.pred_operand(p, first, k);
                    self.vec_test(t, c, x, im)
                }
                (None, None) => unreachable!(),
            };
            masks.push(m);
        }
        self.convert_masks(masks, lane)
    }

    /// Lane masks of `a OP b`, prepared operands ([`Self::prepare`]).
    fn vec_cmp(&mut self, op: Canon, c: Class, a: [Value; 2], b: [Value; 2]) -> Value {
        let (a, b, ai, bi) = (a[0], b[0], a[1], b[1]);
        match c {
            Class::Int(_, signed) => self.b.ins().icmp(int_cc(op, signed), a, b),
            Class::Bool => {
                // All ones for true, zero for false: as signed lanes true (-1) < false (0).
                let cc = match op {
                    Canon::Eq => IntCC::Equal,
                    Canon::Lt => IntCC::SignedGreaterThan,
                    Canon::Le => IntCC::SignedGreaterThanOrEqual,
                };
                self.b.ins().icmp(cc, a, b)
            }
            Class::Half(_) => {
                // Keys compared, cleared where either side is NaN.
                let c = self.b.ins().icmp(int_cc(op, true), a, b);
                let nan = self.b.ins().bor(ai, bi);
                self.b.ins().band_not(c, nan)
            }
            Class::Float(_) => self.b.ins().fcmp(float_cc(op), a, b),
            Class::Complex(_) => self.complex_cmp(op, [a, ai], [b, bi]),
        }
    }

    /// Lane masks of a test of `x` (complex: real parts `x`, imaginary parts `im`).
    fn vec_test(&mut self, t: TestOp, c: Class, x: Value, im: Option<Value>) -> Value {
        match c {
            Class::Half(_) => {
                let m = self.vk.magnitude.expect("made with the kernel");
                let e = self.vk.exponent.expect("made with the kernel");
                let mag = self.b.ins().band(x, m);
                let cc = match t {
                    TestOp::IsNan => IntCC::SignedGreaterThan,
                    TestOp::IsInf => IntCC::Equal,
                    TestOp::IsFinite => IntCC::SignedLessThan,
                };
                self.b.ins().icmp(cc, mag, e)
            }
            Class::Float(_) | Class::Complex(_) => {
                let inf = self.vk.inf.expect("made with the kernel");
                self.float_test(t, x, im, inf)
            }
            Class::Int(..) | Class::Bool => unreachable!("constant tests use the fixed mask"),
        }
    }

    /// Converts lane masks of `from` bytes per lane (in element order) to masks of the selected
    /// width, one per data vector: each widening step splits a vector into its low and high
    /// halves sign-extended, each narrowing step packs two vectors with signed saturation
    /// (all ones stay all ones). 64-bit masks are handled as pairs of equal 32-bit lanes; a
    /// 16-byte element's mask is an `i64x2` with both lanes equal.
    fn convert_masks(&mut self, mut masks: Vec<Value>, mut from: usize) -> Vec<Value> {
        while from < self.w {
            masks = masks
                .into_iter()
                .flat_map(|v| {
                    let v = if from == 8 {
                        self.le_bitcast(I32X4, v)
                    } else {
                        v
                    };
                    let lo = self.b.ins().swiden_low(v);
                    let hi = self.b.ins().swiden_high(v);
                    [lo, hi]
                })
                .collect();
            from *= 2;
        }
        while from > self.w {
            masks = masks
                .chunks(2)
                .map(|p| {
                    if from == 8 {
                        let a = self.le_bitcast(I32X4, p[0]);
                        let b = self.le_bitcast(I32X4, p[1]);
                        let n = self.b.ins().snarrow(a, b);
                        self.le_bitcast(I32X4, n)
                    } else {
                        self.b.ins().snarrow(p[0], p[1])
                    }
                })
                .collect();
            from /= 2;
        }
        masks
    }

    // ---- the row -------------------------------------------------------------------------

    /// `groups` × 16 elements of a predicate row from `ptrs`.
    fn emit_pred_chunk(
        &mut self,
        ptrs: [Value; OPS],
        groups: u64,
        splat: [Option<Value>; 2],
        srcs: [Option<Src>; 2],
    ) {
        let w = self.w as i64;
        let lhs = srcs[0].unwrap_or(Src::Mem(ptrs[COND]));
        let rhs = srcs[1].unwrap_or(Src::Mem(ptrs[RHS]));
        for g in 0..groups as i64 {
            let first = 16 * g;
            // Every operand of the 16 elements is read before any of them is stored: in place,
            // the output may be the compared operand.
            let masks = self.pred_masks(lhs, rhs, first);
            let ty = self.data_type();
            for (k, m) in masks.into_iter().enumerate() {
                let off = (first * w + 16 * k as i64) as i32;
                let t = match splat[0] {
                    Some(v) => v,
                    None => self.b.ins().load(ty, self.flags, ptrs[THEN], off),
                };
                let e = match splat[1] {
                    Some(v) => v,
                    None => self.b.ins().load(ty, self.flags, ptrs[ELSE], off),
                };
                let r = self.select_lanes(m, t, e);
                self.b.ins().store(self.flags, r, ptrs[super::OUT], off);
            }
        }
    }

    /// A vector-select row whose condition is a predicate: lhs and rhs unit stride or
    /// broadcast along the row (splatted once). Wide steps, then 16 elements at a time, then
    /// the last elements one at a time: never a step over elements already stored, since the
    /// output may be the compared operand.
    pub(super) fn emit_pred_row(&mut self, ptrs: [Value; OPS], n: Count) {
        let l = self.sig.rank() - 1;
        let splat = self.splat_sources(ptrs);
        let srcs: [Option<Src>; 2] = [COND, RHS].map(|op| {
            (op < self.nops && self.sig.strides[op][l] == 0).then(|| self.pred_splat(ptrs[op]))
        });
        let g = self.groups_per_iter();
        let (nv, known) = self.count_value(n);
        let mut start = self.iconst(0);
        if g > 1 && known.is_none_or(|n| n >= 16 * g) {
            start = self.index_loop(nv, start, 16 * g, |em, i| {
                let p = em.row_at(ptrs, i);
                em.emit_pred_chunk(p, g, splat, srcs);
            });
        }
        if known.is_none_or(|n| if g > 1 { n % (16 * g) >= 16 } else { n >= 16 }) {
            start = self.index_loop(nv, start, 16, |em, i| {
                let p = em.row_at(ptrs, i);
                em.emit_pred_chunk(p, 1, splat, srcs);
            });
        }
        if known.is_none_or(|n| n % 16 != 0) {
            self.index_loop(nv, start, 1, |em, i| {
                let p = em.row_at(ptrs, i);
                em.emit_scalar_elem(p);
            });
        }
    }
}

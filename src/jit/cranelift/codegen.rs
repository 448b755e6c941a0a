//! Cranelift IR emission for one [`Signature`].
//!
//! The kernel has the signature `fn(cond, then, else, out: *u8, begin, end: usize, dims,
//! byte_strides, rhs)` and runs the outer indices `begin..end` of `sig.dims[0]`. Outer loops have
//! their trip counts baked in; the innermost dimension is emitted as one of three row shapes:
//!
//! * **vector select** — cond, out unit stride; then/else unit stride or broadcast (splatted once
//!   per row): 16 cond bytes are loaded, compared with zero and widened (`swiden_low/high`) to lane
//!   masks, and `bitselect` picks each lane. Rows of 16 or more elements end with one more vector
//!   step placed over the last 16 elements (idempotent, also in place), shorter rows go scalar.
//! * **row copy** — cond constant along the row (stride 0): one branch per row, then a straight
//!   vector copy (or fill, for a broadcast source) of the chosen input.
//! * **scalar** — anything else (strided, transposed): one element at a time, branch-free.
//!
//! A predicate (`sig.cond`: a comparison of `cond` as lhs with the fifth operand `rhs`, or a test
//! of `cond`) is computed in registers wherever a mask byte would be read ([`pred`]): its lhs and
//! rhs play cond's part in the row shapes (unit stride or splatted in vector rows, both constant
//! in copy rows), and the loops carry the rhs pointer too. Mask kernels are emitted exactly as
//! before (the loops carry four pointers for them).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I8X16, I16, I32, I64};
use cranelift_codegen::ir::{AbiParam, Function, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

use crate::plan::{COND, ELSE, OPS, OUT, RHS, RowShape, Signature, THEN};
use crate::pred::Kind;

pub(super) mod pred;
mod vector;

/// How many elements a row or loop runs: known when the kernel is built, or only at run time
/// (the outermost dimension, whose range the caller chooses).
#[derive(Clone, Copy)]
enum Count {
    Const(u64),
    Dyn(Value),
}

/// A pointer increment in bytes: known when the kernel is built, or read at run time from the
/// byte-stride argument of a shape-generic kernel (at this byte offset), where it is used, so
/// that run-time strides do not occupy registers across inner loops.
#[derive(Clone, Copy)]
enum Step {
    C(i64),
    Load(i32),
}

/// The dims and byte-strides arguments of a shape-generic kernel.
struct Runtime {
    dims: Value,
    strides: Value,
}

/// Vector constants of a predicate kernel (see `pred.rs`), made once before its loops.
#[derive(Default)]
struct VecConsts {
    /// Zero bytes (bool operands are compared with it).
    zero: Option<Value>,
    /// `0x7fff` in 16-bit lanes: the magnitude bits of f16 / bf16.
    magnitude: Option<Value>,
    /// The bits of +infinity of f16 / bf16 in 16-bit lanes.
    exponent: Option<Value>,
    /// +infinity in float lanes.
    inf: Option<Value>,
    /// The mask of a test that is constant for the dtype (isnan / isinf / isfinite of integers).
    fixed: Option<Value>,
}

/// Emits one kernel function; one small method per IR construct.
pub(crate) struct KernelEmitter<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    sig: &'a Signature,
    /// Shape-generic kernel: dims and strides are arguments (all but the inner-stride classes
    /// of `sig`, which pick the row shape).
    generic: bool,
    rt: Option<Runtime>,
    w: usize,
    flags: MemFlagsData,
    /// Use x86 `blendv` (one `pblendvb`) instead of the three-instruction `bitselect`.
    blendv: bool,
    /// Operands the loops carry: cond, then, else, out, and a comparison's rhs.
    nops: usize,
    /// A predicate's vector constants (made before the loops).
    vk: VecConsts,
}

/// Adds the kernel's parameters to `func`'s signature (nine pointer-sized integers: the four
/// operands, the outer range, for shape-generic kernels the dims and byte strides, and a
/// comparison's second operand).
pub(crate) fn declare_params(func: &mut Function) {
    for _ in 0..9 {
        func.signature.params.push(AbiParam::new(I64));
    }
}

impl<'a, 'b> KernelEmitter<'a, 'b> {
    pub(crate) fn new(
        b: &'a mut FunctionBuilder<'b>,
        sig: &'a Signature,
        generic: bool,
        blendv: bool,
    ) -> Self {
        KernelEmitter {
            b,
            sig,
            generic,
            rt: None,
            w: sig.width,
            // Inputs are only guaranteed to be byte-aligned, and every access was validated.
            flags: MemFlagsData::new().with_notrap(),
            blendv,
            nops: if sig.cond.binary() { OPS } else { RHS },
            vk: VecConsts::default(),
        }
    }

    /// Emits the whole function body.
    pub(crate) fn emit(mut self) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let p = self.b.block_params(entry).to_vec();
        let (begin, end) = (p[4], p[5]);
        let work = self.b.create_block();
        let exit = self.b.create_block();
        let empty = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, begin, end);
        self.b.ins().brif(empty, exit, &[], work, &[]);

        self.b.switch_to_block(work);
        if self.generic {
            self.load_runtime(p[6], p[7]);
        }
        if !self.sig.is_mask() && matches!(self.sig.row_shape(), RowShape::Select { .. }) {
            self.make_vec_consts();
        }
        let count = self.b.ins().isub(end, begin);
        let mut ptrs = [p[0], p[1], p[2], p[3], p[8]];
        for (op, ptr) in ptrs.iter_mut().enumerate().take(self.nops) {
            if let Some(off) = self.scaled_step(self.step(0, op), Some(begin)) {
                *ptr = self.b.ins().iadd(*ptr, off);
            }
        }
        self.emit_level(0, ptrs, Count::Dyn(count));
        self.b.ins().jump(exit, &[]);

        self.b.switch_to_block(exit);
        self.b.ins().return_(&[]);
        self.b.seal_all_blocks();
    }

    /// Keeps the dims and byte-strides arguments of a shape-generic kernel: `dims[rank]` (u64)
    /// and `strides[op * rank + level]` (i64, bytes).
    fn load_runtime(&mut self, dims: Value, strides: Value) {
        self.rt = Some(Runtime { dims, strides });
    }

    /// Trip count of collapsed dim `level` (read from the arguments in a generic kernel).
    fn dim(&mut self, level: usize) -> Count {
        match &self.rt {
            Some(rt) => {
                let d = rt.dims;
                let f = MemFlagsData::new().with_notrap();
                Count::Dyn(self.b.ins().load(I64, f, d, (8 * level) as i32))
            }
            None => Count::Const(self.sig.dims[level] as u64),
        }
    }

    /// Byte step of operand `op` along `level`. In a generic kernel, strides that the pattern
    /// does not fix to 0 are read at run time.
    fn step(&self, level: usize, op: usize) -> Step {
        match &self.rt {
            Some(_) if self.sig.strides[op][level] != 0 => {
                Step::Load((8 * (op * self.sig.rank() + level)) as i32)
            }
            _ => Step::C(self.stride_bytes(level, op)),
        }
    }

    /// `ptr + step * times` (`times` of 1 when `None`), or `None` when the step is 0.
    fn scaled_step(&mut self, step: Step, times: Option<Value>) -> Option<Value> {
        let v = match step {
            Step::C(0) => return None,
            Step::C(c) => match times {
                Some(t) if c == 1 => t,
                Some(t) if c > 0 && (c as u64).is_power_of_two() => {
                    self.b.ins().ishl_imm_u(t, c.trailing_zeros() as i64)
                }
                Some(t) => self.b.ins().imul_imm_s(t, c),
                None => self.b.ins().iconst(I64, c),
            },
            Step::Load(off) => {
                let base = self.rt.as_ref().map(|r| r.strides)?;
                let f = MemFlagsData::new().with_notrap();
                let st = self.b.ins().load(I64, f, base, off);
                match times {
                    Some(t) => self.b.ins().imul(t, st),
                    None => st,
                }
            }
        };
        Some(v)
    }

    /// Constant stride in bytes of operand `op` along collapsed dim `level`. Along the row of a
    /// vector or copy row this is known in shape-generic kernels too (their class is 0 or 1).
    fn stride_bytes(&self, level: usize, op: usize) -> i64 {
        self.sig.byte_stride(op, level) as i64
    }

    fn iconst(&mut self, v: i64) -> Value {
        self.b.ins().iconst(I64, v)
    }

    /// Loop nest: `level` runs `count` iterations; the innermost level is a row.
    fn emit_level(&mut self, level: usize, ptrs: [Value; OPS], count: Count) {
        let last = self.sig.rank() - 1;
        if level == last {
            self.emit_row(ptrs, count);
            return;
        }
        let steps = self.steps(level);
        self.counted_loop(count, ptrs, steps, |em, p| {
            let inner = em.dim(level + 1);
            em.emit_level(level + 1, p, inner)
        });
    }

    /// Steps of the operands the loops carry along `level` (0 for the others).
    fn steps(&self, level: usize) -> [Step; OPS] {
        std::array::from_fn(|op| {
            if op < self.nops {
                self.step(level, op)
            } else {
                Step::C(0)
            }
        })
    }

    /// `for _ in 0..count { body(ptrs); ptrs += steps }` (for the operands the loops carry).
    fn counted_loop(
        &mut self,
        count: Count,
        ptrs: [Value; OPS],
        steps: [Step; OPS],
        mut body: impl FnMut(&mut Self, [Value; OPS]),
    ) {
        if let Count::Const(0) = count {
            return;
        }
        if let Count::Const(1) = count {
            body(self, ptrs);
            return;
        }
        let n = self.nops;
        let vars: Vec<Variable> = (0..n).map(|_| self.b.declare_var(I64)).collect();
        for (v, p) in vars.iter().zip(ptrs) {
            self.b.def_var(*v, p);
        }
        let i = self.b.declare_var(I64);
        let zero = self.iconst(0);
        self.b.def_var(i, zero);
        let header = self.b.create_block();
        let body_blk = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(header);
        let iv = self.b.use_var(i);
        let more = match count {
            Count::Const(n) => self
                .b
                .ins()
                .icmp_imm_u(IntCC::UnsignedLessThan, iv, n as i64),
            Count::Dyn(n) => self.b.ins().icmp(IntCC::UnsignedLessThan, iv, n),
        };
        self.b.ins().brif(more, body_blk, &[], exit, &[]);

        self.b.switch_to_block(body_blk);
        let cur: [Value; OPS] = std::array::from_fn(|k| {
            if k < n {
                self.b.use_var(vars[k])
            } else {
                ptrs[k]
            }
        });
        body(self, cur);
        for k in 0..n {
            let Some(inc) = self.scaled_step(steps[k], None) else {
                continue;
            };
            let v = self.b.use_var(vars[k]);
            let nv = self.b.ins().iadd(v, inc);
            self.b.def_var(vars[k], nv);
        }
        let iv = self.b.use_var(i);
        let next = self.b.ins().iadd_imm_s(iv, 1);
        self.b.def_var(i, next);
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(exit);
    }

    /// The innermost dimension.
    fn emit_row(&mut self, ptrs: [Value; OPS], n: Count) {
        match self.sig.row_shape() {
            RowShape::Select { .. } => self.emit_vector_row(ptrs, n),
            RowShape::Copy { .. } => self.emit_copy_row(ptrs, n),
            RowShape::Strided => self.emit_scalar_loop(ptrs, n),
        }
    }

    // ---- loops over a row ----------------------------------------------------------------

    /// The count as a value, and as a number when it is known.
    fn count_value(&mut self, n: Count) -> (Value, Option<u64>) {
        match n {
            Count::Const(c) => (self.iconst(c as i64), Some(c)),
            Count::Dyn(v) => (v, None),
        }
    }

    /// `for i in (start..).step_by(step) while i + step <= n { body(i) }`; returns the index
    /// reached.
    fn index_loop(
        &mut self,
        n: Value,
        start: Value,
        step: u64,
        body: impl FnOnce(&mut Self, Value),
    ) -> Value {
        self.stepped_loop(n, start, step, false, body)
    }

    /// Like [`Self::index_loop`], but when fewer than `step` elements are left (and the row has
    /// at least `step`), the body runs once more over the last `step` elements. Re-doing a few
    /// elements is harmless: the result depends only on the inputs, also in place, where the
    /// output already holds `cond ? then : else` for them.
    fn overlap_loop(
        &mut self,
        n: Value,
        start: Value,
        step: u64,
        body: impl FnOnce(&mut Self, Value),
    ) {
        self.stepped_loop(n, start, step, true, body);
    }

    /// The loop behind [`Self::index_loop`] and [`Self::overlap_loop`]; returns the header's
    /// index (the index reached, when `overlap` is false).
    fn stepped_loop(
        &mut self,
        n: Value,
        start: Value,
        step: u64,
        overlap: bool,
        body: impl FnOnce(&mut Self, Value),
    ) -> Value {
        let header = self.b.create_block();
        let i = self.b.append_block_param(header, I64);
        let body_blk = self.b.create_block();
        let j = self.b.append_block_param(body_blk, I64);
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[start.into()]);
        self.b.switch_to_block(header);
        let left = self.b.ins().isub(n, i);
        let more = self
            .b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, left, step as i64);
        if overlap {
            // Fewer than `step` left: if any, and the row is long enough, step back over the end.
            let tail = self.b.create_block();
            self.b.ins().brif(more, body_blk, &[i.into()], tail, &[]);
            self.b.switch_to_block(tail);
            let some = self.b.ins().icmp_imm_u(IntCC::NotEqual, left, 0);
            let long = self
                .b
                .ins()
                .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, n, step as i64);
            let again = self.b.ins().band(some, long);
            let last = self.b.ins().iadd_imm_s(n, -(step as i64));
            self.b
                .ins()
                .brif(again, body_blk, &[last.into()], exit, &[]);
        } else {
            self.b.ins().brif(more, body_blk, &[i.into()], exit, &[]);
        }
        self.b.switch_to_block(body_blk);
        body(self, j);
        let next = self.b.ins().iadd_imm_s(j, step as i64);
        self.b.ins().jump(header, &[next.into()]);
        self.b.switch_to_block(exit);
        i
    }

    /// Runs `body(count)` for rows shorter than `min` elements (decided at run time when the
    /// count is not known).
    fn short_row(
        &mut self,
        n: Value,
        known: Option<u64>,
        min: u64,
        body: impl FnOnce(&mut Self, Count),
    ) {
        match known {
            Some(c) => body(self, Count::Const(c)),
            None => {
                let short = self.b.create_block();
                let join = self.b.create_block();
                let is_short = self
                    .b
                    .ins()
                    .icmp_imm_u(IntCC::UnsignedLessThan, n, min as i64);
                self.b.ins().brif(is_short, short, &[], join, &[]);
                self.b.switch_to_block(short);
                body(self, Count::Dyn(n));
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(join);
            }
        }
    }

    /// Row pointers advanced by `i` elements (unit or broadcast strides along the row).
    fn row_at(&mut self, ptrs: [Value; OPS], i: Value) -> [Value; OPS] {
        let steps = self.row_steps();
        let wide = (self.w > 1).then(|| self.b.ins().ishl_imm_u(i, self.w.trailing_zeros() as i64));
        // A predicate's operands step by the compared dtype's width, which may be another.
        let cw = self.sig.cond.operand_width() as i64;
        let cond_wide = (self.sig.cond.dtype().is_some() && cw > 1 && cw != self.w as i64)
            .then(|| self.b.ins().ishl_imm_u(i, cw.trailing_zeros() as i64));
        std::array::from_fn(|op| match steps[op] {
            _ if op >= self.nops => ptrs[op],
            0 => ptrs[op],
            1 => self.b.ins().iadd(ptrs[op], i),
            s if s == self.w as i64 => self.b.ins().iadd(ptrs[op], wide.unwrap_or(i)),
            _ => self.b.ins().iadd(ptrs[op], cond_wide.unwrap_or(i)),
        })
    }

    /// Byte steps of one element along the row, per operand.
    fn row_steps(&self) -> [i64; OPS] {
        let l = self.sig.rank() - 1;
        std::array::from_fn(|op| self.stride_bytes(l, op))
    }

    // ---- row copy (cond constant along the row) ------------------------------------------

    fn emit_copy_row(&mut self, ptrs: [Value; OPS], n: Count) {
        let c = self.elem_cond(ptrs);
        let take_then = self.b.create_block();
        let take_else = self.b.create_block();
        let join = self.b.create_block();
        self.b.ins().brif(c, take_then, &[], take_else, &[]);
        for (blk, src) in [(take_then, THEN), (take_else, ELSE)] {
            self.b.switch_to_block(blk);
            self.emit_copy(ptrs[src], ptrs[OUT], src, n);
            self.b.ins().jump(join, &[]);
        }
        self.b.switch_to_block(join);
    }

    /// Copies (or, for a broadcast source, fills) `n` elements from `src` to `dst`, as bytes:
    /// 64 at a time, then 16 at a time with the last step over the final 16 bytes, and rows of
    /// fewer than 16 bytes element by element.
    fn emit_copy(&mut self, src: Value, dst: Value, op: usize, n: Count) {
        let l = self.sig.rank() - 1;
        let fill = self.sig.strides[op][l] == 0;
        let value = fill.then(|| self.splat_operand(src));
        let w = self.w as i64;
        let (bytes, known) = match n {
            Count::Const(c) => {
                let b = c * w as u64;
                (self.iconst(b as i64), Some(b))
            }
            Count::Dyn(v) => (self.b.ins().imul_imm_s(v, w), None),
        };
        let moves = |em: &mut Self, i: Value, k: i64| {
            let s = if fill { src } else { em.b.ins().iadd(src, i) };
            let d = em.b.ins().iadd(dst, i);
            for j in 0..k {
                let v = match value {
                    Some(v) => v,
                    None => em.b.ins().load(I8X16, em.flags, s, (16 * j) as i32),
                };
                em.b.ins().store(em.flags, v, d, (16 * j) as i32);
            }
        };
        let mut start = self.iconst(0);
        if known.is_none_or(|b| b >= 64) {
            start = self.index_loop(bytes, start, 64, |em, i| moves(em, i, 4));
        }
        if known.is_none_or(|b| b >= 16) {
            self.overlap_loop(bytes, start, 16, |em, i| moves(em, i, 1));
        }
        if known.is_none_or(|b| b < 16) {
            self.short_row(bytes, known, 16, |em, _| {
                let steps = [if fill { 0 } else { w }, 0, 0, w, 0].map(Step::C);
                em.counted_loop(n, [src, src, src, dst, src], steps, |em, p| {
                    em.emit_elem_copy(p[0], p[3], 0, 0)
                });
            });
        }
    }

    /// Copies one element from `src + so` to `dst + d_off`.
    fn emit_elem_copy(&mut self, src: Value, dst: Value, so: i64, d_off: i64) {
        for (ty, k) in self.elem_parts() {
            let v = self.b.ins().load(ty, self.flags, src, (so + k) as i32);
            self.b.ins().store(self.flags, v, dst, (d_off + k) as i32);
        }
    }

    // ---- scalar ---------------------------------------------------------------------------

    /// Scalar pieces of one element: (type, byte offset).
    fn elem_parts(&self) -> Vec<(Type, i64)> {
        match self.w {
            1 => vec![(I8, 0)],
            2 => vec![(I16, 0)],
            4 => vec![(I32, 0)],
            8 => vec![(I64, 0)],
            _ => vec![(I64, 0), (I64, 8)],
        }
    }

    fn emit_scalar_loop(&mut self, ptrs: [Value; OPS], n: Count) {
        let l = self.sig.rank() - 1;
        let steps = self.steps(l);
        self.counted_loop(n, ptrs, steps, |em, p| em.emit_scalar_elem(p));
    }

    /// The condition of the element at `p`: the mask byte (zero-extended), or the predicate
    /// computed from lhs (and rhs) as 0 or 1.
    fn elem_cond(&mut self, p: [Value; OPS]) -> Value {
        match self.sig.cond {
            Kind::Mask => self.b.ins().uload8(I64, self.flags, p[COND], 0),
            kind => self.scalar_pred(kind, p[COND], p[RHS]),
        }
    }

    /// One element, branch-free: `out = cond ? then : else`. The condition is computed before
    /// anything is stored (in place, the output may be the compared operand).
    fn emit_scalar_elem(&mut self, p: [Value; OPS]) {
        let c = self.elem_cond(p);
        for (ty, k) in self.elem_parts() {
            let k = k as i32;
            let t = self.b.ins().load(ty, self.flags, p[THEN], k);
            let e = self.b.ins().load(ty, self.flags, p[ELSE], k);
            let v = self.b.ins().select(c, t, e);
            self.b.ins().store(self.flags, v, p[OUT], k);
        }
    }
}

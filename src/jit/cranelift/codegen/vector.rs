//! The vector-select row: 16 cond bytes at a time compared with zero and turned into lane
//! masks (`pshufb` on x86-64, `swiden` elsewhere), one `blendv` or `bitselect` per vector.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I8X16, I16, I16X8, I32, I32X4, I64, I64X2};
use cranelift_codegen::ir::{Endianness, InstBuilder, MemFlagsData, Type, Value};

use super::{Count, KernelEmitter};
use crate::plan::{COND, ELSE, OPS, OUT, THEN};

impl KernelEmitter<'_, '_> {
    /// Lane type of a 128-bit data vector for this element width.
    fn vec_type(&self) -> Type {
        match self.w {
            1 => I8X16,
            2 => I16X8,
            4 => I32X4,
            _ => I64X2,
        }
    }

    /// Cond vectors (16 elements each) handled per main-loop iteration.
    pub(super) fn groups_per_iter(&self) -> u64 {
        match self.w {
            1 => 4,
            2 => 2,
            _ => 1,
        }
    }

    /// A broadcast (stride-0) input loaded once and splatted to a full vector.
    pub(super) fn splat_operand(&mut self, ptr: Value) -> Value {
        match self.w {
            16 => self.b.ins().load(I64X2, self.flags, ptr, 0),
            w => {
                let lane = [I8, I16, I32, I64][w.trailing_zeros() as usize];
                let x = self.b.ins().load(lane, self.flags, ptr, 0);
                let ty = self.vec_type();
                self.b.ins().splat(ty, x)
            }
        }
    }

    /// Reinterprets a 128-bit vector as bytes (no instruction).
    fn as_bytes(&mut self, v: Value) -> Value {
        if self.b.func.dfg.value_type(v) == I8X16 {
            return v;
        }
        let le = MemFlagsData::new().with_endianness(Endianness::Little);
        self.b.ins().bitcast(I8X16, le, v)
    }

    /// Lane-wise `mask ? a : b` for a mask whose lanes are all ones or all zeros.
    pub(super) fn select_lanes(&mut self, mask: Value, a: Value, b: Value) -> Value {
        if self.blendv {
            // pblendvb reads the top bit of every byte, which is set in every byte of a
            // sign-extended lane mask.
            let m = self.as_bytes(mask);
            self.b.ins().blendv(m, a, b)
        } else {
            let ty = self.b.func.dfg.value_type(a);
            let m = if self.b.func.dfg.value_type(mask) == ty {
                mask
            } else {
                let le = MemFlagsData::new().with_endianness(Endianness::Little);
                self.b.ins().bitcast(ty, le, mask)
            };
            self.b.ins().bitselect(m, a, b)
        }
    }

    /// Data vector type: bytes when blending byte-wise, lanes of the element width otherwise.
    pub(super) fn data_type(&self) -> Type {
        if self.blendv { I8X16 } else { self.vec_type() }
    }

    /// then and else where they are broadcast along the row: splatted once per row.
    pub(super) fn splat_sources(&mut self, ptrs: [Value; OPS]) -> [Option<Value>; 2] {
        let l = self.sig.rank() - 1;
        [THEN, ELSE].map(|op| {
            (self.sig.strides[op][l] == 0).then(|| {
                let v = self.splat_operand(ptrs[op]);
                if self.blendv { self.as_bytes(v) } else { v }
            })
        })
    }

    pub(super) fn emit_vector_row(&mut self, ptrs: [Value; OPS], n: Count) {
        if !self.sig.is_mask() {
            return self.emit_pred_row(ptrs, n);
        }
        let splat = self.splat_sources(ptrs);
        let g = self.groups_per_iter();
        let (nv, known) = self.count_value(n);
        let mut start = self.iconst(0);
        // Wide steps first (several cond vectors per iteration for narrow elements).
        if g > 1 && known.is_none_or(|n| n >= 16 * g) {
            start = self.index_loop(nv, start, 16 * g, |em, i| {
                let p = em.row_at(ptrs, i);
                em.emit_chunk(p, g, splat);
            });
        }
        // Then 16 elements at a time; the last step is placed over the final 16 elements.
        if known.is_none_or(|n| n >= 16) {
            self.overlap_loop(nv, start, 16, |em, i| {
                let p = em.row_at(ptrs, i);
                em.emit_chunk(p, 1, splat);
            });
        }
        // Rows shorter than 16 elements: one element at a time.
        if known.is_none_or(|n| n < 16) {
            self.short_row(nv, known, 16, |em, _| {
                let zero = em.iconst(0);
                em.index_loop(nv, zero, 1, |em, i| {
                    let p = em.row_at(ptrs, i);
                    em.emit_scalar_elem(p);
                });
            });
        }
    }

    /// `groups` × 16 elements from `ptrs`.
    fn emit_chunk(&mut self, ptrs: [Value; OPS], groups: u64, splat: [Option<Value>; 2]) {
        let w = self.w as i64;
        for g in 0..groups as i64 {
            let first = 16 * g;
            if self.w == 16 && !self.blendv {
                self.emit_wide_group(ptrs, first, splat);
                continue;
            }
            let c = self
                .b
                .ins()
                .load(I8X16, self.flags, ptrs[COND], first as i32);
            let zeros = self.vector_const(&[0; 16]);
            // Lanes where cond == 0 take `else`: the mask selects else, its complement then.
            let is_zero = self.b.ins().icmp(IntCC::Equal, c, zeros);
            let masks = if self.blendv {
                self.shuffle_masks(is_zero)
            } else {
                self.widen_masks(is_zero)
            };
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
                let r = self.select_lanes(m, e, t);
                self.b.ins().store(self.flags, r, ptrs[OUT], off);
            }
        }
    }

    /// A 128-bit constant.
    pub(super) fn vector_const(&mut self, bytes: &[u8; 16]) -> Value {
        let c = self.b.func.dfg.constants.insert(bytes.to_vec().into());
        self.b.ins().vconst(I8X16, c)
    }

    /// Expands a 16-byte mask (one byte per element) to `width` byte masks, one per data vector
    /// in element order, with one x86 `pshufb` each: byte `j` of mask `k` is element
    /// `k * 16 / width + j / width`.
    fn shuffle_masks(&mut self, m: Value) -> Vec<Value> {
        if self.w == 1 {
            return vec![m];
        }
        let per = 16 / self.w;
        (0..self.w)
            .map(|k| {
                let idx: [u8; 16] = std::array::from_fn(|j| (k * per + j / self.w) as u8);
                let sel = self.vector_const(&idx);
                self.b.ins().x86_pshufb(m, sel)
            })
            .collect()
    }

    /// Widens a 16-lane byte mask to `width` masks of `16 / width` lanes each, in element order.
    fn widen_masks(&mut self, m: Value) -> Vec<Value> {
        let mut masks = vec![m];
        let mut w = 1;
        while w < self.w {
            masks = masks
                .into_iter()
                .flat_map(|v| {
                    let lo = self.b.ins().swiden_low(v);
                    let hi = self.b.ins().swiden_high(v);
                    [lo, hi]
                })
                .collect();
            w *= 2;
        }
        masks
    }

    /// 16 elements of 16 bytes: each element is one vector; its mask is the cond byte widened to
    /// all ones or all zeros.
    fn emit_wide_group(&mut self, ptrs: [Value; OPS], first: i64, splat: [Option<Value>; 2]) {
        for j in first..first + 16 {
            let c = self.b.ins().uload8(I64, self.flags, ptrs[COND], j as i32);
            let m = self.b.ins().bmask(I64, c);
            let mv = self.b.ins().splat(I64X2, m);
            let off = (j * 16) as i32;
            let ty = self.data_type();
            let t = match splat[0] {
                Some(v) => v,
                None => self.b.ins().load(ty, self.flags, ptrs[THEN], off),
            };
            let e = match splat[1] {
                Some(v) => v,
                None => self.b.ins().load(ty, self.flags, ptrs[ELSE], off),
            };
            let r = self.select_lanes(mv, t, e);
            self.b.ins().store(self.flags, r, ptrs[OUT], off);
        }
    }
}

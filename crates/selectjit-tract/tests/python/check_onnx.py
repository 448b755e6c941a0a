#!/usr/bin/env python3
"""ONNX graphs built with onnx.helper, run by `selectjit-onnx` (tract + selectjit) and with
`--no-selectjit` (tract alone), checked against each other, against numpy and against ONNX
Runtime, bit for bit; plus ONNX's own node test cases for Where and for the comparisons that feed
it (onnx.backend.test.case.node.collect_testcases) against their expected outputs.

Suites: every element type of Where that the command reads, the broadcast patterns of
benches/cases.json (at small sizes), Greater / Less / Equal / GreaterOrEqual / LessOrEqual /
IsNaN / IsInf / Not feeding Where, the fused-predicate bench expressions at small sizes, chains
of Where merged into one n-way select (nan_to_num, bucketing, clamps, chains nested on the then
side, broadcast operands, and those that must stay apart), a masked self-attention block with a
symbolic sequence length, and the ONNX node cases. Every Where of a graph must be replaced (the
`replaced: N (F fused)` line says so); for the chains, the `chained: K (N nodes)` line too.

Usage: check_onnx.py --bin PATH/selectjit-onnx --cases PATH/benches/cases.json
Exits 1 if any check fails; prints what was skipped and why.
"""

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ort.set_default_logger_severity(3)
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
ONNX_TYPE = {
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
}
DTYPES = list(ONNX_TYPE)
FLOATS = [np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)]
SPECIAL_BITS = {
    # NaNs with payloads (quiet and signalling), both zeros, both infinities.
    2: [0x7E01, 0xFE55, 0x7C01, 0x8000, 0x0000, 0x7C00, 0xFC00],
    4: [0x7FC00123, 0xFFA00001, 0x7F800001, 0x80000000, 0, 0x7F800000, 0xFF800000],
    8: [0x7FF8000000000042, 0xFFF4000000000001, 0x8000000000000000, 0, 0x7FF0000000000000,
        0xFFF0000000000000],
}
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def random(dt, shape, rng, specials=True):
    """Random elements; floats are random bit patterns with the special values sprinkled in."""
    dt = np.dtype(dt)
    n = int(np.prod(shape, dtype=np.int64))
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        return rng.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8).view(dt).reshape(shape)
    bits = rng.integers(0, 2**63, size=n, dtype=np.uint64).astype(UINT[dt.itemsize])
    if specials:
        sp = np.array(SPECIAL_BITS[dt.itemsize], dtype=UINT[dt.itemsize])
        pick = rng.random(n) < 0.25
        bits[pick] = sp[rng.integers(0, len(sp), size=int(pick.sum()))]
    return bits.view(dt).reshape(shape)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def file_name(name):
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return s if s and set(s) != {"."} else "output" + s


class Checker:
    def __init__(self, binary, work):
        self.bin = binary
        self.work = Path(work)
        self.n = 0
        self.passed = 0
        self.failures = []
        self.skipped = []
        self.ort_checked = 0
        self.ort_no_kernel = []
        self.ort_negative_zeros = 0
        self.ort_f16_nans = 0
        self.notes = []

    def fail(self, what, msg):
        self.failures.append(f"{what}: {msg}")
        print(f"FAIL {what}: {msg}", flush=True)

    def cli(self, model_path, inputs, out, extra=()):
        args = [self.bin, str(model_path), "--out", str(out), *extra]
        for name, arr in inputs.items():
            p = self.work / f"in_{file_name(name)}.npy"
            np.save(p, arr)
            args += ["--input", f"{name}={p}"]
        return subprocess.run(args, capture_output=True, text=True)

    def outputs(self, model, out):
        return {o.name: np.load(out / f"{file_name(o.name)}.npy") for o in model.graph.output}

    def run_ort(self, model_path, inputs, what):
        try:
            sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
            return sess.run(None, inputs)
        except Exception as e:  # ORT without a kernel for this type: say so, compare to the rest.
            msg = str(e).splitlines()[0][:160]
            if "NOT_IMPLEMENTED" in msg or "Could not find an implementation" in msg:
                self.ort_no_kernel.append(what)
                return None
            self.fail(what, f"ONNX Runtime: {msg}")
            return None

    def same_as_ort(self, ours, theirs):
        """Bitwise, except where ONNX Runtime is not exact: its float Where turns a selected
        -0.0 into +0.0, and its float16 Where does not keep NaN payloads (it quiets signalling
        NaNs and, on broadcast paths, returns its own NaN). Such elements are counted; any other
        difference fails."""
        if same_bits(ours, theirs):
            return True
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        if ours.dtype != theirs.dtype or ours.shape != theirs.shape or ours.dtype.kind != "f":
            return False
        u = UINT[ours.dtype.itemsize]
        a, b = ours.view(u).ravel(), theirs.view(u).ravel()
        diff = a != b
        sign = u(1) << u(8 * ours.dtype.itemsize - 1)
        zeros = (a[diff] == sign) & (b[diff] == 0)
        nans = np.zeros_like(zeros)
        if ours.dtype == np.float16:
            nans = np.isnan(ours.ravel()[diff]) & np.isnan(theirs.ravel()[diff])
        if not np.all(zeros | nans):
            return False
        self.ort_negative_zeros += int(zeros.sum())
        self.ort_f16_nans += int(nans.sum())
        return True

    def check(self, what, model, inputs, expected=None, fused=0, ort_exact=True, ort_tol=None,
              tract_error=None, chained=None):
        """Runs `model` through tract + selectjit and tract alone; every Where must be replaced
        (`fused` of them with a folded Not or predicate; None: any number), and with `chained`
        (K, N) the report must say `chained: K (N nodes)`; outputs bitwise equal to each other,
        to `expected`
        (a list, if given) and to ONNX Runtime (bitwise if `ort_exact`, else within `ort_tol`).
        With `tract_error`, tract is expected to refuse the model with that message fragment,
        cleanly."""
        self.n += 1
        wheres = sum(1 for nd in model.graph.node if nd.op_type == "Where")
        ident = f"m{self.n}"
        path = self.work / f"{ident}.onnx"
        onnx.save(model, path)
        fast, plain = self.work / f"{ident}_fast", self.work / f"{ident}_plain"
        r = self.cli(path, inputs, fast)
        if tract_error is not None:
            ok = r.returncode == 1 and tract_error in r.stderr and "panicked" not in r.stderr
            if not ok:
                self.fail(what, f"expected a clean tract error '{tract_error}', got "
                                f"rc={r.returncode} {r.stderr.strip()[:300]}")
                return
            self.skipped.append(f"{what}: tract refuses it ({tract_error})")
            self.passed += 1
            return
        if r.returncode != 0:
            self.fail(what, f"selectjit-onnx failed: {r.stderr.strip()[:400]}")
            return
        n_fused = "[0-9]+" if fused is None else str(fused)
        line = re.compile(rf"replaced: {wheres} \({n_fused} fused\)")
        if not any(line.fullmatch(ln) for ln in r.stdout.splitlines()):
            self.fail(what, f"expected '{line.pattern}' in:\n{r.stdout}")
            return
        if chained is not None and f"chained: {chained[0]} ({chained[1]} nodes)" not in \
                r.stdout.splitlines():
            self.fail(what, f"expected 'chained: {chained[0]} ({chained[1]} nodes)' in:\n{r.stdout}")
            return
        r2 = self.cli(path, inputs, plain, ["--no-selectjit"])
        if r2.returncode != 0:
            self.fail(what, f"tract alone failed: {r2.stderr.strip()[:400]}")
            return
        got, ref = self.outputs(model, fast), self.outputs(model, plain)
        names = [o.name for o in model.graph.output]
        for nm in names:
            if not same_bits(got[nm], ref[nm]):
                self.fail(what, f"output {nm}: tract + selectjit differs from tract alone")
                return
        if expected is not None:
            for nm, e in zip(names, expected):
                if not same_bits(got[nm], e):
                    self.fail(what, f"output {nm} differs from the expected output:\n"
                                    f"{got[nm]!r}\n{np.asarray(e)!r}")
                    return
        o = self.run_ort(path, inputs, what)
        if o is not None:
            self.ort_checked += 1
            for nm, x in zip(names, o):
                if ort_exact and not self.same_as_ort(got[nm], x):
                    self.fail(what, f"output {nm} differs from ONNX Runtime:\n{got[nm]!r}\n{x!r}")
                    return
                if not ort_exact:
                    err = float(np.max(np.abs(got[nm].astype(np.float64) - x)))
                    rtol, atol = ort_tol
                    if not np.allclose(got[nm], x, rtol=rtol, atol=atol, equal_nan=True):
                        self.fail(what, f"output {nm}: max |diff| to ONNX Runtime {err}")
                        return
                    self.notes.append(f"{what}: max |diff| to ONNX Runtime {err:.3g}")
        self.passed += 1


def vi(name, dt, shape):
    return helper.make_tensor_value_info(name, ONNX_TYPE[np.dtype(dt)], shape)


def out(name):
    return helper.make_empty_tensor_value_info(name)


def graph_model(nodes, inputs, outputs, inits=(), opset=OPSET):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def where_model(dt, cs, ts, es):
    return graph_model([helper.make_node("Where", ["c", "t", "e"], ["out"], name="where")],
                       [vi("c", np.bool_, cs), vi("t", dt, ts), vi("e", dt, es)],
                       [vi("out", dt, None)])


def suite_dtypes(ck, rng):
    for dt in DTYPES:
        for cs, ts, es in [((2, 1, 5), (3, 5), (2, 3, 1)), ((4, 1), (4, 6), ()),
                           ((1, 6), (1,), (4, 6))]:
            c, t, e = random(np.bool_, cs, rng), random(dt, ts, rng), random(dt, es, rng)
            ck.check(f"Where {dt} {cs} {ts} {es}", where_model(dt, cs, ts, es),
                     {"c": c, "t": t, "e": e}, expected=[np.where(c, t, e)])


def suite_bench_patterns(ck, rng, cases_path):
    import json
    cases = json.loads(Path(cases_path).read_text())["cases"]
    dims = sorted({d for c in cases for k in ("cond", "then", "else") for d in c[k] if d != 1})
    small = {d: 2 + i for i, d in enumerate(dims)}
    types = {"f32": np.float32, "f16": np.float16, "bf16": np.float16, "f64": np.float64,
             "complex128": np.float64, "i8": np.int8, "i64": np.int64}
    for case in cases:
        cs, ts, es = ([small.get(d, 1) for d in case[k]] for k in ("cond", "then", "else"))
        dt = np.dtype(types[case["dtype"]])
        fill = case["cond_fill"]
        if fill == "true":
            c = np.ones(cs, dtype=bool)
        elif fill == "causal":
            r, k = cs[-2], cs[-1]
            c = np.broadcast_to(np.tril(np.ones((r, k), dtype=bool)), cs).copy()
        else:
            c = random(np.bool_, cs, rng)
        t, e = random(dt, ts, rng), random(dt, es, rng)
        ck.check(f"bench pattern {case['name']} {cs} {ts} {es} ({dt})", where_model(dt, cs, ts, es),
                 {"c": c, "t": t, "e": e}, expected=[np.where(c, t, e)])


COMPARE = {"Greater": np.greater, "Less": np.less, "Equal": np.equal,
           "GreaterOrEqual": np.greater_equal, "LessOrEqual": np.less_equal}


def suite_predicates(ck, rng):
    for op, fn in COMPARE.items():
        for dt in [np.uint8, np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint32,
                   np.uint64, np.float16, np.float32, np.float64]:
            x, y = random(dt, (3, 4), rng), random(dt, (4,), rng)
            if op == "Equal":
                x = np.broadcast_to(y, (3, 4)).copy()
                x[0, 0] = random(dt, (1,), rng)[0]
            m = graph_model([helper.make_node(op, ["x", "y"], ["c"], name="cmp"),
                             helper.make_node("Where", ["c", "x", "y"], ["out"], name="where")],
                            [vi("x", dt, (3, 4)), vi("y", dt, (4,))], [vi("out", dt, None)])
            with np.errstate(invalid="ignore"):
                exp = np.where(fn(x, y), x, y)
            ck.check(f"{op} {np.dtype(dt)} -> Where", m, {"x": x, "y": y}, expected=[exp],
                     fused=1)
    for dt in FLOATS:
        for op, attrs, fn in [("IsNaN", {}, np.isnan), ("IsInf", {}, np.isinf),
                              ("IsInf", {"detect_negative": 0}, lambda v: v == np.inf)]:
            x = random(dt, (5, 7), rng)
            zero = numpy_helper.from_array(np.zeros((), dtype=dt), "zero")
            m = graph_model([helper.make_node(op, ["x"], ["c"], name="pred", **attrs),
                             helper.make_node("Where", ["c", "zero", "x"], ["out"], name="where")],
                            [vi("x", dt, (5, 7))], [vi("out", dt, None)], [zero], opset=20)
            what = f"{op}{attrs or ''} {dt} -> Where"
            # tract has no f64 kernel for IsNaN / IsInf: it refuses such graphs when analysing.
            err = "analysing" if dt == np.float64 else None
            ck.check(what, m, {"x": x}, expected=[np.where(fn(x), np.zeros((), dt), x)],
                     tract_error=err, fused=0 if attrs else 1)
    # Not folded into the select: Where(Not(c), a, b), and Where(Not(x > y), x, y).
    c, a, b = random(np.bool_, (4, 1), rng), random(np.float32, (4, 5), rng), \
        random(np.float32, (5,), rng)
    m = graph_model([helper.make_node("Not", ["c"], ["nc"], name="not"),
                     helper.make_node("Where", ["nc", "a", "b"], ["out"], name="where")],
                    [vi("c", np.bool_, (4, 1)), vi("a", np.float32, (4, 5)),
                     vi("b", np.float32, (5,))], [vi("out", np.float32, None)])
    ck.check("Not(c) -> Where", m, {"c": c, "a": a, "b": b}, fused=1,
             expected=[np.where(~c, a, b)])
    x, y = random(np.int32, (3, 4), rng), random(np.int32, (3, 4), rng)
    m = graph_model([helper.make_node("Greater", ["x", "y"], ["c"], name="gt"),
                     helper.make_node("Not", ["c"], ["nc"], name="not"),
                     helper.make_node("Where", ["nc", "x", "y"], ["out"], name="where")],
                    [vi("x", np.int32, (3, 4)), vi("y", np.int32, (3, 4))],
                    [vi("out", np.int32, None)])
    ck.check("Not(x > y) -> Where", m, {"x": x, "y": y}, fused=1,
             expected=[np.where(~(x > y), x, y)])


def suite_fused_expressions(ck, rng):
    """The expressions of the fused-predicate bench cases at small sizes, as ONNX graphs:
    `Where(cmp(l, r), then, else)` with the scalars as initializers."""
    mask = np.ones((2, 1, 1, 9), dtype=np.int64)
    mask[0, ..., 6:] = 0
    mask[1, ..., 8:] = 0
    f16, f32 = np.float16, np.float32
    exprs = [
        # name, op, (l, r), (then, else), graph inputs, initializers
        ("relu", "Greater", ("x", "zero"), ("x", "zero"),
         {"x": random(f32, (64,), rng)}, {"zero": np.array(0, f32)}),
        ("masked_fill_bert", "Equal", ("mask", "zero"), ("ninf", "scores"),
         {"mask": mask, "scores": random(f32, (2, 3, 9, 9), rng)},
         {"zero": np.array(0, np.int64), "ninf": np.array(-np.inf, f32)}),
        ("causal_from_positions", "Greater", ("k", "q"), ("ninf", "scores"),
         {"k": np.arange(11, dtype=np.int32).reshape(1, 1, 1, 11),
          "q": np.arange(11, dtype=np.int32).reshape(1, 1, 11, 1),
          "scores": random(f16, (2, 3, 11, 11), rng)},
         {"ninf": np.array(-np.inf, f16)}),
        ("clamp_high", "Greater", ("x", "hi"), ("hi", "x"),
         {"x": random(np.int32, (16, 16), rng)}, {"hi": np.array(1000000, np.int32)}),
        ("threshold_u8_image", "GreaterOrEqual", ("img", "t"), ("white", "black"),
         {"img": random(np.uint8, (6, 8, 3), rng)},
         {"t": np.array(128, np.uint8), "white": np.array(255, np.uint8),
          "black": np.array(0, np.uint8)}),
        ("minimum", "Less", ("a", "b"), ("a", "b"),
         {"a": random(f32, (64,), rng), "b": random(f32, (64,), rng)}, {}),
    ]
    for name, op, (l, r), (then, els), inputs, consts in exprs:
        vals = {**inputs, **consts}
        with np.errstate(invalid="ignore"):
            exp = np.where(COMPARE[op](vals[l], vals[r]), vals[then], vals[els])
        m = graph_model([helper.make_node(op, [l, r], ["c"], name="cmp"),
                         helper.make_node("Where", ["c", then, els], ["out"], name="where")],
                        [vi(n, v.dtype, v.shape) for n, v in inputs.items()],
                        [vi("out", exp.dtype, None)],
                        [numpy_helper.from_array(v, n) for n, v in consts.items()])
        ck.check(f"fused bench expression {name}", m, inputs, expected=[exp], fused=1)


def suite_chains(ck, rng):
    """Chains of Where merged into one n-way select, and chains that must stay apart."""
    for dt in [np.float16, np.float32, np.float64]:
        # nan_to_num over x: Where(isnan(x), 0, Where(x == inf, max, Where(x == -inf, min, x))).
        fi = np.finfo(dt)
        consts = {"zero": np.array(0, dt), "pinf": np.array(np.inf, dt),
                  "ninf": np.array(-np.inf, dt), "big": np.array(fi.max, dt),
                  "small": np.array(fi.min, dt)}
        nodes = [helper.make_node("IsNaN", ["x"], ["c_nan"], name="isnan"),
                 helper.make_node("Equal", ["x", "pinf"], ["c_pinf"], name="is_pinf"),
                 helper.make_node("Equal", ["x", "ninf"], ["c_ninf"], name="is_ninf"),
                 helper.make_node("Where", ["c_ninf", "small", "x"], ["r_ninf"], name="w_ninf"),
                 helper.make_node("Where", ["c_pinf", "big", "r_ninf"], ["r_pinf"], name="w_pinf"),
                 helper.make_node("Where", ["c_nan", "zero", "r_pinf"], ["out"], name="w_nan")]
        m = graph_model(nodes, [vi("x", dt, (6, 9))], [vi("out", dt, None)],
                        [numpy_helper.from_array(v, n) for n, v in consts.items()], opset=20)
        x = random(dt, (6, 9), rng)
        # tract has no f64 kernel for IsNaN: it refuses such graphs when analysing.
        err = "analysing" if dt == np.float64 else None
        ck.check(f"nan_to_num chain {np.dtype(dt)}", m, {"x": x}, expected=[np.nan_to_num(x)],
                 fused=3, chained=(1, 3), tract_error=err)
    # nan_to_num as torch.onnx.export writes it: the NaN Where innermost, each outer condition
    # reading the inner result (IsInf(r) And r > 0): merged with its conditions computed from x,
    # each value its constant as the outer Where nodes map it (NaN -> +inf -> the +inf value).
    f32 = np.float32
    big, small = np.finfo(f32).max, np.finfo(f32).min
    for nan, posinf, neginf in [(0, big, small), (np.inf, big, small), (-np.inf, np.inf, -1)]:
        consts = {"k_nan": np.array([nan], f32), "k_pinf": np.array([posinf], f32),
                  "k_ninf": np.array([neginf], f32), "zero": np.array([0], f32)}
        m = graph_model([
            helper.make_node("IsNaN", ["x"], ["c_nan"], name="isnan"),
            helper.make_node("Where", ["c_nan", "k_nan", "x"], ["r1"], name="w_nan"),
            helper.make_node("IsInf", ["r1"], ["i1"], name="isinf1"),
            helper.make_node("Greater", ["r1", "zero"], ["g1"], name="gt"),
            helper.make_node("And", ["i1", "g1"], ["c_pinf"], name="and1"),
            helper.make_node("Where", ["c_pinf", "k_pinf", "r1"], ["r2"], name="w_pinf"),
            helper.make_node("IsInf", ["r2"], ["i2"], name="isinf2"),
            helper.make_node("Less", ["r2", "zero"], ["l2"], name="lt"),
            helper.make_node("And", ["i2", "l2"], ["c_ninf"], name="and2"),
            helper.make_node("Where", ["c_ninf", "k_ninf", "r2"], ["out"], name="w_ninf"),
        ], [vi("x", f32, (6, 9))], [vi("out", f32, None)],
            [numpy_helper.from_array(v, n) for n, v in consts.items()])
        x = random(f32, (6, 9), rng)
        r1 = np.where(np.isnan(x), consts["k_nan"], x)
        r2 = np.where(np.isinf(r1) & (r1 > 0), consts["k_pinf"], r1)
        exp = np.where(np.isinf(r2) & (r2 < 0), consts["k_ninf"], r2)
        ck.check(f"nan_to_num({nan}, {posinf}, {neginf}) as torch exports it", m, {"x": x},
                 expected=[exp], fused=3, chained=(1, 3))
    # Bucketing: i32 d into i64 buckets.
    d = random(np.int32, (5, 7), rng)
    d.ravel()[:6] = [-1000001, -1000000, -1, 0, 999999, 1000000]
    consts = {"t1": np.array(-1000000, np.int32), "t2": np.array(0, np.int32),
              "t3": np.array(1000000, np.int32), **{f"b{i}": np.array(i, np.int64)
                                                     for i in range(4)}}
    m = graph_model([
        helper.make_node("Less", ["d", "t1"], ["c1"], name="lt1"),
        helper.make_node("Less", ["d", "t2"], ["c2"], name="lt2"),
        helper.make_node("Less", ["d", "t3"], ["c3"], name="lt3"),
        helper.make_node("Where", ["c3", "b2", "b3"], ["r3"], name="w3"),
        helper.make_node("Where", ["c2", "b1", "r3"], ["r2"], name="w2"),
        helper.make_node("Where", ["c1", "b0", "r2"], ["out"], name="w1"),
    ], [vi("d", np.int32, (5, 7))], [vi("out", np.int64, None)],
        [numpy_helper.from_array(v, n) for n, v in consts.items()])
    exp = np.select([d < -1000000, d < 0, d < 1000000], [0, 1, 2], 3).astype(np.int64)
    ck.check("bucketing chain i32 -> i64", m, {"d": d}, expected=[exp], fused=3, chained=(1, 3))
    # Clamps: scalar bounds, bounds broadcast along an axis.
    for dt in [np.float32, np.int16, np.uint8]:
        for bshape in [(), (1, 6)]:
            lo_v, hi_v = (40, 200) if dt == np.uint8 else (-1000, 1000) if dt == np.int16 \
                else (-1.5, 1.5)
            lo, hi = np.full(bshape, lo_v, dt), np.full(bshape, hi_v, dt)
            x = random(dt, (4, 6), rng)
            m = graph_model([
                helper.make_node("Less", ["x", "lo"], ["c_lo"], name="lt"),
                helper.make_node("Greater", ["x", "hi"], ["c_hi"], name="gt"),
                helper.make_node("Where", ["c_hi", "hi", "x"], ["r"], name="w_hi"),
                helper.make_node("Where", ["c_lo", "lo", "r"], ["out"], name="w_lo"),
            ], [vi("x", dt, (4, 6))], [vi("out", dt, None)],
                [numpy_helper.from_array(lo, "lo"), numpy_helper.from_array(hi, "hi")])
            with np.errstate(invalid="ignore"):
                exp = np.where(x < lo, lo, np.where(x > hi, hi, x))
            ck.check(f"clamp chain {np.dtype(dt)} bounds {bshape}", m, {"x": x}, expected=[exp],
                     fused=2, chained=(1, 2))
    # Masks and values of several shapes: nested on the then side, on the else side then the
    # then side; an inner Where that is also an output (not merged).
    shapes = {"c1": (2, 1, 5), "c2": (1, 3, 1), "c3": (5,), "a": (3, 1), "b": (), "c": (2, 3, 5),
              "d": (1, 5)}
    vals = {n: random(np.bool_ if n[0] == "c" and len(n) == 2 else f32, s, rng)
            for n, s in shapes.items()}
    graph_inputs = [vi(n, v.dtype, v.shape) for n, v in vals.items()]
    c1, c2, c3, a, b, c, d = (vals[n] for n in shapes)
    graphs = [
        ("then side", [("w2", ["c2", "b", "c"], "r2"), ("w1", ["c1", "r2", "a"], "out")],
         np.where(c1, np.where(c2, b, c), a), (1, 2), ["out"]),
        ("else then", [("w3", ["c3", "c", "d"], "r3"), ("w2", ["c2", "r3", "b"], "r2"),
                       ("w1", ["c1", "a", "r2"], "out")],
         np.where(c1, a, np.where(c2, np.where(c3, c, d), b)), (1, 3), ["out"]),
        ("inner exported", [("w2", ["c2", "b", "c"], "r2"), ("w1", ["c1", "a", "r2"], "out")],
         None, (0, 0), ["out", "r2"]),
    ]
    for name, ws, exp, chain, outs in graphs:
        m = graph_model([helper.make_node("Where", i, [o], name=n) for n, i, o in ws],
                        graph_inputs, [vi(o, f32, None) for o in outs])
        ck.check(f"chain {name} (broadcast)", m, dict(vals),
                 expected=None if exp is None else [exp], chained=chain)


def suite_attention(ck, rng):
    b, h, d = 2, 3, 4
    qkv = lambda n: vi(n, np.float32, [b, h, "S", d])
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf")]
    m = graph_model([
        helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        helper.make_node("Mul", ["scores", "scale"], ["scaled"], name="scale_mul"),
        helper.make_node("Equal", ["mask", "zero"], ["c"], name="eq"),
        helper.make_node("Where", ["c", "ninf", "scaled"], ["masked"], name="masked_fill"),
        helper.make_node("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["out"], name="pv"),
    ], [qkv("q"), qkv("k"), qkv("v"), vi("mask", np.int64, [b, 1, 1, "S"])],
        [vi("out", np.float32, None)], inits)
    for s in [1, 5, 16, 33]:
        mask = np.ones((b, 1, 1, s), np.int64)
        for i in range(b):
            mask[i, ..., s - int(rng.integers(0, s)):] = 0
        mask[:, ..., 0] = 1
        inputs = {n: rng.standard_normal((b, h, s, d)).astype(np.float32) for n in "qkv"}
        inputs["mask"] = mask
        # Softmax and MatMul round differently in ONNX Runtime: compared within a tolerance.
        ck.check(f"attention block S={s}", m, inputs, ort_exact=False, ort_tol=(1e-5, 1e-6),
                 fused=1)


def suite_node_cases(ck):
    """ONNX's node test cases: Where's as they are; each comparison / IsNaN / IsInf / Not case as
    it is and with its output feeding a Where (expected: numpy's where of the case's expected
    output)."""
    from onnx.backend.test.case.node import collect_testcases
    pattern = re.compile(r"test_(where|equal|greater|less|not|isnan|isinf)")
    cases = [c for c in collect_testcases(None) if pattern.match(c.name)]
    assert any(c.name.startswith("test_where") for c in cases), "no Where case collected"
    for case in cases:
        model = case.model
        for k, (ins, outs) in enumerate(case.data_sets):
            names = [i.name for i in model.graph.input]
            inputs = dict(zip(names, ins))
            what = f"ONNX node case {case.name}[{k}]"
            if any(np.asarray(v).dtype == object for v in ins):
                ck.skipped.append(f"{what}: string tensors (the command reads numeric .npy)")
                continue
            ck.check(what, model, inputs, expected=list(outs))
            if case.name.startswith("test_where"):
                continue
            # The predicate's output selecting between its (first) input and a constant.
            g = model.graph
            x = np.asarray(ins[0])
            cond_name = g.output[0].name
            fill = numpy_helper.from_array(np.zeros((), x.dtype) if x.dtype != np.bool_
                                           else np.array(True), "sj_fill")
            nodes = list(g.node) + [helper.make_node("Where", [cond_name, names[0], "sj_fill"],
                                                     ["sj_out"], name="sj_where")]
            # Where needs opset 9 at least (Not's cases are opset 1); the ops did not change.
            opsets = [helper.make_opsetid(o.domain, max(o.version, OPSET) if o.domain in ("", "ai.onnx")
                                          else o.version) for o in model.opset_import]
            derived = helper.make_model(
                helper.make_graph(nodes, "g", list(g.input),
                                  [helper.make_empty_tensor_value_info("sj_out")],
                                  initializer=list(g.initializer) + [fill]),
                opset_imports=opsets)
            exp = np.where(np.asarray(outs[0]), x, numpy_helper.to_array(fill))
            # Folded where the predicate is one selectjit computes (a Not always is).
            ck.check(f"{what} -> Where", derived, inputs, expected=[exp],
                     fused=1 if case.name.startswith("test_not") else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--cases", required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(24)
    with tempfile.TemporaryDirectory() as work:
        ck = Checker(args.bin, work)
        for suite in [lambda: suite_dtypes(ck, rng),
                      lambda: suite_bench_patterns(ck, rng, args.cases),
                      lambda: suite_predicates(ck, rng),
                      lambda: suite_fused_expressions(ck, rng),
                      lambda: suite_chains(ck, rng),
                      lambda: suite_attention(ck, rng),
                      lambda: suite_node_cases(ck)]:
            suite()
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}")
    print(f"{ck.passed}/{ck.n} graphs passed; {ck.ort_checked} also checked against ONNX Runtime")
    print(f"  where ONNX Runtime is not exact: it turned {ck.ort_negative_zeros} selected -0.0 into "
          f"+0.0 and changed the payload of {ck.ort_f16_nans} float16 NaNs; every other element "
          "is bitwise equal")
    if ck.ort_no_kernel:
        print(f"  ONNX Runtime has no kernel for {len(ck.ort_no_kernel)} graphs (compared to tract "
              f"and numpy only): {', '.join(ck.ort_no_kernel)}")
    for s in ck.skipped:
        print(f"  skipped: {s}")
    for s in ck.notes:
        print(f"  note: {s}")
    if ck.failures:
        print(f"{len(ck.failures)} FAILED:")
        for f in ck.failures:
            print(f"  {f}")
        return 1
    if ck.n < 100:
        print(f"only {ck.n} graphs checked")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""selectjit against the Where/Select of numpy, ONNX Runtime and OpenVINO (CPU).

One thread for every contender (default), or with `--threads default` each at its default:
ONNX Runtime and OpenVINO with their own thread pools, numpy (single-threaded anyway), and
selectjit's engine on every core (`jit-mt` of `selectjit bench`, which splits only calls that
measured faster split).

For every case of cases.json: runs `selectjit bench` on that case alone, then times the peers
(interleaved rounds, median, like src/bench.rs) and checks their output bytes against a bytewise
reference. Then probes every dtype with cond bytes other than 0/1 and with values that do not
survive a round trip through a narrower type, on the peers and on `selectjit run`.

Then the fused cases (fused_cases.json: `where(x > zero, x, zero)`, `where(mask == zero, ...)`,
`where(isnan(x), ...)`, ...): `selectjit bench` on each case alone (the fused call, what ran it,
the unfused mask + select, the copy roofline) against numpy (a ufunc for the mask, then
np.where), numexpr (the expression as written, one thread and its default threads), ONNX Runtime
and OpenVINO graphs (Greater / Less / Equal / IsNaN / IsInf / Not + Where / Select) and, where
the Python package has lazy predicates (`selectjit.greater`, ...), selectjit's Python `where`
(allocating, and with `out=`), and the Python libraries as users call them against it: polars
(`when/then/otherwise`), JAX (`jax.jit` of `jnp.where`), numba (a `@vectorize` ufunc) and
pyarrow (`pc.if_else`); every peer's output checked bytewise against numpy's ufuncs and a
bytewise where.

Needs numpy; every peer is optional (n/a where its package is missing):
`pip install -r benches/requirements-peers.txt` and `pip install crates/selectjit-py`; and
`cargo build --release -p selectjit-cli`.
"""

import argparse
import datetime
import gc
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

PIP = "pip install -r benches/requirements-peers.txt"
if importlib.util.find_spec("numpy") is None:
    sys.exit(f"peers.py needs numpy (and its peers, each optional); install with:\n  {PIP}")

import numpy as np  # noqa: E402


def optional_import(module):
    """A peer's module, or None if it is not installed (its peers are then n/a)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


# Optional: without ml_dtypes the bf16 cases are left out; without onnx + onnxruntime or
# openvino their peers are n/a. (The peers of the fused cases only, polars, JAX, numba,
# pyarrow, numexpr and selectjit's package, are imported when first used.)
ml_dtypes = optional_import("ml_dtypes")
onnx = optional_import("onnx")
ort = optional_import("onnxruntime")
ov = optional_import("openvino")
ov_ops = optional_import("openvino.opset13") if ov else None
TensorProto = onnx.TensorProto if onnx else None
helper = onnx.helper if onnx else None

ROOT = Path(__file__).resolve().parent.parent
# dtype name: (numpy dtype or None without ml_dtypes, onnx.TensorProto name,
# openvino.Type name or None)
DTYPES = {
    "bool": (np.bool_, "BOOL", "boolean"),
    "i8": (np.int8, "INT8", "i8"),
    "i16": (np.int16, "INT16", "i16"),
    "i32": (np.int32, "INT32", "i32"),
    "i64": (np.int64, "INT64", "i64"),
    "u8": (np.uint8, "UINT8", "u8"),
    "u16": (np.uint16, "UINT16", "u16"),
    "u32": (np.uint32, "UINT32", "u32"),
    "u64": (np.uint64, "UINT64", "u64"),
    "f16": (np.float16, "FLOAT16", "f16"),
    "bf16": (ml_dtypes.bfloat16 if ml_dtypes else None, "BFLOAT16", "bf16"),
    "f32": (np.float32, "FLOAT", "f32"),
    "f64": (np.float64, "DOUBLE", "f64"),
    "complex64": (np.complex64, "COMPLEX64", None),
    "complex128": (np.complex128, "COMPLEX128", None),
}
HAVE_DTYPES = [k for k, v in DTYPES.items() if v[0] is not None]
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
PEERS = ["numpy", "ort", "openvino"]
TITLES = {"numpy": "numpy.where", "ort": "ONNX Runtime", "openvino": "OpenVINO",
          "selectjit": "selectjit"}


class NotAvailable(Exception):
    """The peer does not run this dtype (the message says why)."""


# ---------------------------------------------------------------- inputs and reference

def onnx_type(a):
    """The ONNX element type of an array; NotAvailable without onnx + onnxruntime."""
    if onnx is None or ort is None:
        raise NotAvailable("onnx / onnxruntime are not installed")
    return getattr(TensorProto, DTYPES[dtype_name(a)][1])


def ov_type(a):
    """The OpenVINO element type of an array; NotAvailable without openvino or for complex."""
    if ov is None:
        raise NotAvailable("openvino is not installed")
    name = DTYPES[dtype_name(a)][2]
    if name is None:
        raise NotAvailable("openvino.Type has no complex element type")
    return getattr(ov.Type, name)


def make_inputs(case, rng):
    """cond (uint8), then, else for a case: cond as src/bench.rs fills it, values random bytes."""
    dt = np.dtype(DTYPES[case["dtype"]][0])
    shape = tuple(case["cond"])
    if case["cond_fill"] == "true":
        cond = np.ones(shape, np.uint8)
    elif case["cond_fill"] == "causal":  # lower-triangular over the last two dims
        rows = shape[-2] if len(shape) >= 2 else 1
        cols = shape[-1] if len(shape) >= 1 else 1
        tri = (np.arange(cols)[None, :] <= np.arange(rows)[:, None]).astype(np.uint8)
        cond = np.broadcast_to(tri.reshape(shape[-2:]), shape).copy()
    else:
        cond = rng.integers(0, 2, shape, np.uint8)

    def fill(s):
        raw = rng.integers(0, 256, math.prod(s) * dt.itemsize, np.uint8)
        if dt == np.bool_:
            raw &= 1
        return raw.view(dt).reshape(s)
    return cond, fill(tuple(case["then"])), fill(tuple(case["else"]))


def as_bytes(a):
    """The elements of `a` as a uint8 array with one trailing axis of the element's bytes."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).reshape(a.shape + (a.itemsize,))


def reference(cond, then, else_):
    """out = cond ? then : else, byte by byte (any non-zero cond byte is true)."""
    return np.where((cond != 0)[..., None], as_bytes(then), as_bytes(else_))


# ---------------------------------------------------------------- peers
# Each takes (cond as uint8, then, else) and returns (call, output): `call()` runs one select,
# `output()` gives the last result as an array. Setup (models, sessions, buffers) is not timed.

def numpy_peer(cond, then, else_):
    c, box = cond.view(np.bool_), [None]

    def call():
        box[0] = np.where(c, then, else_)  # allocates its output, as users call it
    return call, lambda: box[0]


# "1": one thread for every contender; "default": each at its default thread count.
THREADS = "1"


def ort_peer(cond, then, else_):
    elem = onnx_type(then)
    out = np.empty(np.broadcast_shapes(cond.shape, then.shape, else_.shape), then.dtype)
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Where", ["c", "t", "e"], ["y"])], "where",
        [info("c", TensorProto.BOOL, cond.shape), info("t", elem, then.shape),
         info("e", elem, else_.shape)], [info("y", elem, out.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    so = ort.SessionOptions()
    if THREADS == "1":
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:  # no kernel or no type support: ORT's own words
        raise NotAvailable(str(e).split(" : ")[-1].strip().splitlines()[0][:120]) from e
    io = sess.io_binding()  # inputs and output wrap the numpy buffers: no copies per call

    def value(a, t):
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            np.ascontiguousarray(a).view(UINT[a.itemsize]), t)
    values = [value(cond, TensorProto.BOOL), value(then, elem), value(else_, elem)]
    for name, v in zip("cte", values):
        io.bind_ortvalue_input(name, v)
    io.bind_ortvalue_output("y", value(out, elem))

    def call():
        sess.run_with_iobinding(io)
    call.keep = values  # the bound values live as long as the call
    return call, lambda: out


OV_CORE = None


def openvino_peer(cond, then, else_):
    global OV_CORE
    typ = ov_type(then)
    OV_CORE = OV_CORE or ov.Core()
    out = np.empty(np.broadcast_shapes(cond.shape, then.shape, else_.shape), then.dtype)
    params = [ov_ops.parameter(list(a.shape), t)
              for a, t in [(cond, ov.Type.boolean), (then, typ), (else_, typ)]]
    model = ov.Model([ov_ops.select(*params, auto_broadcast="numpy")], params)
    config = {"INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1} if THREADS == "1" else {}
    compiled = OV_CORE.compile_model(model, "CPU", config)
    req = compiled.create_infer_request()

    # An ov.Tensor shares the numpy buffer without keeping it alive: every array a tensor views
    # is kept with the call (np.ascontiguousarray gives a scalar a new array).
    views = []

    def tensor(a, t):
        views.append(np.ascontiguousarray(a).reshape(-1).view(UINT[a.itemsize]))
        return ov.Tensor(views[-1], list(a.shape), t)
    tensors = [tensor(cond, ov.Type.boolean), tensor(then, typ), tensor(else_, typ)]
    for k, t in enumerate(tensors):
        req.set_input_tensor(k, t)
    tensors.append(tensor(out, typ))  # the result lands in `out`
    req.set_output_tensor(tensors[-1])

    def call():
        req.infer()
    call.keep = (tensors, views)
    return call, lambda: out


PEER_FNS = {"numpy": numpy_peer, "ort": ort_peer, "openvino": openvino_peer}


def dtype_name(a):
    return next(k for k, v in DTYPES.items() if v[0] is not None and np.dtype(v[0]) == a.dtype)


# ---------------------------------------------------------------- fused cases

def parse_expr(src):
    """`where(COND, A, B)` of fused_cases.json as a tree: ("where", cond, a, b), conditions
    ("cmp", op, l, r), ("test", fn, v), ("not", c); variables as ("var", name)."""
    import re
    toks = re.findall(r"\s*(>=|<=|==|!=|>|<|!|\(|\)|,|[A-Za-z_][A-Za-z0-9_]*)", src)
    if "".join(toks).replace(" ", "") != src.replace(" ", ""):
        raise ValueError(f"expression {src!r}: unexpected characters")
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take(want=None):
        t = peek()
        if t is None or (want is not None and t != want):
            raise ValueError(f"expression {src!r}: expected {want or 'more'}, found {t}")
        pos[0] += 1
        return t

    def term():
        t = take()
        if not (t[0].isalpha() or t[0] == "_"):
            raise ValueError(f"expression {src!r}: expected a variable, found {t}")
        return ("var", t)

    def cond():
        t = peek()
        if t == "!":
            take()
            return ("not", cond())
        if t == "(":
            take()
            c = cond()
            take(")")
            return c
        if t in ("isnan", "isinf", "isfinite", "logical_not"):
            take()
            take("(")
            c = ("not", cond()) if t == "logical_not" else ("test", t, term())
            take(")")
            return c
        lhs = term()
        op = take()
        if op not in CMP:
            raise ValueError(f"expression {src!r}: expected a comparison, found {op}")
        return ("cmp", op, lhs, term())

    take("where")
    take("(")
    c = cond()
    take(",")
    a = term()
    take(",")
    b = term()
    take(")")
    if peek() is not None:
        raise ValueError(f"expression {src!r}: unexpected {peek()}")
    return ("where", c, a, b)


CMP = {">": "greater", ">=": "greater_equal", "<": "less", "<=": "less_equal",
       "==": "equal", "!=": "not_equal"}


def make_fused_inputs(case):
    """The case's variables as fused_cases.json (and nway_cases.json, with its fills nan_inf,
    int_range:LO:HI and bool:P) describes them: one generator seeded by the
    CRC-32 of the case's name, drawn by the variables in file order. (selectjit bench draws the
    same distributions from its own generator: equal in kind, not bit for bit.)"""
    rng = np.random.default_rng(zlib.crc32(case["name"].encode()))
    out = {}
    for name, v in case["vars"].items():
        dt = np.dtype(DTYPES[v["dtype"]][0])
        shape = tuple(v["shape"])
        n = math.prod(shape)
        if "value" in v:
            out[name] = np.array(float(v["value"]), np.float64).astype(dt).reshape(shape)
            continue
        fill = v["fill"]
        if fill == "normal":
            a = rng.standard_normal(shape)
        elif fill == "uniform":
            a = rng.random(shape)
        elif fill == "nan10":
            a = rng.standard_normal(shape)
            u = rng.random(shape)
            a[u < 0.13] = -0.0
            a[u < 0.12] = -np.inf
            a[u < 0.11] = np.inf
            a[u < 0.10] = np.nan
        elif fill == "nan_inf":  # nway_cases.json: 2% NaN, 1% +inf, 1% -inf, 1% -0.0
            a = rng.standard_normal(shape)
            u = rng.random(shape)
            a[u < 0.05] = -0.0
            a[u < 0.04] = -np.inf
            a[u < 0.03] = np.inf
            a[u < 0.02] = np.nan
        elif fill.startswith("int_range:"):  # nway_cases.json: uniform integers in [LO, HI)
            lo, hi = (int(t) for t in fill.split(":")[1:])
            a = rng.integers(lo, hi, shape)
        elif fill.startswith("bool:"):  # nway_cases.json: true with probability P
            a = rng.random(shape) < float(fill.split(":")[1])
        elif fill == "mask01":
            cols = shape[-1]
            zeros = (rng.random(n // cols) * 0.3 * cols).astype(np.int64)
            a = (np.arange(cols)[None, :] < (cols - zeros)[:, None]).reshape(shape)
        elif fill == "iota":
            a = np.arange(n).reshape(shape)
        elif fill == "bytes":
            raw = rng.integers(0, 256, n * dt.itemsize, np.uint8)
            if dt == np.bool_:
                raw &= 1
            out[name] = raw.view(dt).reshape(shape)
            continue
        else:
            raise ValueError(f"case {case['name']}: unknown fill {fill!r}")
        out[name] = np.asarray(a).astype(dt)
    return out


def np_cond(c, vs):
    """The condition with numpy's ufuncs (the semantics every peer must match)."""
    if c[0] == "not":
        return np.logical_not(np_cond(c[1], vs))
    if c[0] == "test":
        return getattr(np, c[1])(vs[c[2][1]])
    return getattr(np, CMP[c[1]])(vs[c[2][1]], vs[c[3][1]])


def fused_numpy_peer(tree, vs):
    _, c, a, b = tree
    box = [None]

    def call():  # the mask (one ufunc per operator), then where: as numpy code reads
        box[0] = np.where(np_cond(c, vs), vs[a[1]], vs[b[1]])
    return call, lambda: box[0]


def ne_text(c):
    """The condition in numexpr's syntax (no isnan / isinf / isfinite there: as comparisons)."""
    if c[0] == "not":
        return f"~({ne_text(c[1])})"
    if c[0] == "test":
        v = c[2][1]
        return {"isnan": f"({v} != {v})", "isinf": f"(abs({v}) == inf)",
                "isfinite": f"(abs({v}) < inf)"}[c[1]]
    return f"({c[2][1]} {c[1]} {c[3][1]})"


NE_THREADS = [None]  # numexpr's thread count as last set


def numexpr_peer(threads):
    def peer(tree, vs):
        try:
            import numexpr as ne
        except ImportError as e:
            raise NotAvailable("numexpr is not installed") from e
        _, c, a, b = tree
        text = f"where({ne_text(c)}, {a[1]}, {b[1]})"
        local = dict(vs, inf=np.float64(np.inf))
        default = ne.detect_number_of_cores()
        box = [None]

        want = 1 if threads == "1" else default

        def call():
            if NE_THREADS[0] != want:  # only on a change: the pool restarts when set
                ne.set_num_threads(want)
                NE_THREADS[0] = want
            box[0] = ne.evaluate(text, local_dict=local)
        try:
            call()
        except Exception as e:  # a dtype numexpr does not run: its own words
            raise NotAvailable(str(e).splitlines()[0][:100]) from e
        return call, lambda: box[0]
    return peer


def onnx_nodes(c, vs, nodes, counter):
    """ONNX nodes computing condition `c` into a tensor name; returns the name."""
    counter[0] += 1
    name = f"c{counter[0]}"
    if c[0] == "not":
        nodes.append(helper.make_node("Not", [onnx_nodes(c[1], vs, nodes, counter)], [name]))
    elif c[0] == "test":
        v = c[2][1]
        if c[1] == "isnan":
            nodes.append(helper.make_node("IsNaN", [v], [name]))
        elif c[1] == "isinf":
            nodes.append(helper.make_node("IsInf", [v], [name]))
        else:
            nodes += [helper.make_node("IsNaN", [v], [name + "n"]),
                      helper.make_node("IsInf", [v], [name + "i"]),
                      helper.make_node("Or", [name + "n", name + "i"], [name + "o"]),
                      helper.make_node("Not", [name + "o"], [name])]
    else:
        op, l, r = c[1], c[2][1], c[3][1]
        onnx_op = {">": "Greater", ">=": "GreaterOrEqual", "<": "Less", "<=": "LessOrEqual",
                   "==": "Equal", "!=": "Equal"}[op]
        if op == "!=":
            nodes += [helper.make_node("Equal", [l, r], [name + "e"]),
                      helper.make_node("Not", [name + "e"], [name])]
        else:
            nodes.append(helper.make_node(onnx_op, [l, r], [name]))
    return name


def fused_ort_peer(tree, vs):
    onnx_type(vs[tree[2][1]])  # NotAvailable without onnx + onnxruntime
    _, c, a, b = tree
    nodes = []
    cname = onnx_nodes(c, vs, nodes, [0])
    nodes.append(helper.make_node("Where", [cname, a[1], b[1]], ["y"]))
    out = np.empty(np.broadcast_shapes(np_cond(c, vs).shape, vs[a[1]].shape, vs[b[1]].shape),
                   vs[a[1]].dtype)
    info = helper.make_tensor_value_info
    elem = {k: onnx_type(v) for k, v in vs.items()}
    graph = helper.make_graph(nodes, "fused",
                              [info(k, elem[k], v.shape) for k, v in vs.items()],
                              [info("y", elem[a[1]], out.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    so = ort.SessionOptions()
    if THREADS == "1":
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:
        raise NotAvailable(str(e).split(" : ")[-1].strip().splitlines()[0][:120]) from e
    io = sess.io_binding()

    def value(arr, t):  # 0-d arrays stay 0-d (np.ascontiguousarray would make them 1-d)
        arr = arr if arr.flags.c_contiguous else arr.copy()
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(arr.view(UINT[arr.itemsize]), t)
    values = [value(v, elem[k]) for k, v in vs.items()]
    for k, v in zip(vs, values):
        io.bind_ortvalue_input(k, v)
    io.bind_ortvalue_output("y", value(out, elem[a[1]]))

    def call():
        sess.run_with_iobinding(io)
    try:
        call()
    except Exception as e:
        raise NotAvailable(str(e).split(" : ")[-1].strip().splitlines()[0][:120]) from e
    call.keep = values
    return call, lambda: out


def ov_cond(c, params):
    if c[0] == "not":
        return ov_ops.logical_not(ov_cond(c[1], params))
    if c[0] == "test":
        return getattr(ov_ops, {"isnan": "is_nan", "isinf": "is_inf",
                                "isfinite": "is_finite"}[c[1]])(params[c[2][1]])
    return getattr(ov_ops, CMP[c[1]])(params[c[2][1]], params[c[3][1]])


def fused_openvino_peer(tree, vs):
    global OV_CORE
    _, c, a, b = tree
    types = {k: ov_type(v) for k, v in vs.items()}
    OV_CORE = OV_CORE or ov.Core()
    out = np.empty(np.broadcast_shapes(np_cond(c, vs).shape, vs[a[1]].shape, vs[b[1]].shape),
                   vs[a[1]].dtype)
    params = {k: ov_ops.parameter(list(v.shape), types[k]) for k, v in vs.items()}
    try:
        sel = ov_ops.select(ov_cond(c, params), params[a[1]], params[b[1]],
                            auto_broadcast="numpy")
        model = ov.Model([sel], list(params.values()))
        config = {"INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1} if THREADS == "1" else {}
        req = OV_CORE.compile_model(model, "CPU", config).create_infer_request()
    except Exception as e:
        raise NotAvailable(str(e).strip().splitlines()[0][:120]) from e

    # An ov.Tensor over a numpy array shares its memory without keeping it alive: every array
    # a tensor views is kept with the call (np.ascontiguousarray gives a scalar a new array).
    views = []

    def tensor(arr, t):
        views.append(np.ascontiguousarray(arr).reshape(-1).view(UINT[arr.itemsize]))
        return ov.Tensor(views[-1], list(arr.shape), t)
    tensors = [tensor(v, types[k]) for k, v in vs.items()]
    for k, t in enumerate(tensors):
        req.set_input_tensor(k, t)
    tensors.append(tensor(out, types[a[1]]))
    req.set_output_tensor(tensors[-1])

    def call():
        req.infer()
    call.keep = (tensors, views)
    return call, lambda: out


def out_shape(vs):
    """The output's shape: every variable appears in the expression, so all of them broadcast."""
    return np.broadcast_shapes(*(v.shape for v in vs.values()))


def selectjit_py_peer(out_param):
    """selectjit's Python package with lazy predicates (`selectjit.greater(x, y)`, ...), where
    it has them: `where` allocating its output, or (out_param) writing into a preallocated
    `out=`. The predicates are made in every call, as user code makes them."""
    def peer(tree, vs):
        try:
            import selectjit as sjp
        except ImportError as e:
            raise NotAvailable("the selectjit Python package is not installed") from e
        names = {"isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite"} | CMP
        if not all(hasattr(sjp, n) for n in list(names.values()) + ["logical_not"]):
            raise NotAvailable("this selectjit Python package has no lazy predicates")

        def cond(c):
            if c[0] == "not":
                return sjp.logical_not(cond(c[1]))
            if c[0] == "test":
                return getattr(sjp, c[1])(vs[c[2][1]])
            return getattr(sjp, CMP[c[1]])(vs[c[2][1]], vs[c[3][1]])
        _, c, a, b = tree
        eng = sjp.Engine(threads=1) if THREADS == "1" and hasattr(sjp, "Engine") else None
        where = eng.where if eng is not None else sjp.where
        box = [None]
        if out_param:
            out = box[0] = np.empty(out_shape(vs), vs[a[1]].dtype)

            def call():
                where(cond(c), vs[a[1]], vs[b[1]], out=out)
        else:
            def call():
                box[0] = where(cond(c), vs[a[1]], vs[b[1]])
        try:
            call()
        except Exception as e:
            raise NotAvailable(str(e).splitlines()[0][:120]) from e
        return call, lambda: box[0]
    return peer


def flat_operands(vs, lib):
    """For the libraries of 1-D columns (polars, pyarrow): the output's shape, when every
    operand is a scalar or has the output's whole shape (then the case runs on the flattened
    arrays, element for element the same); otherwise the case is not expressible."""
    shape = out_shape(vs)
    if not shape:
        raise NotAvailable(f"{lib} needs an array operand")
    odd = [f"{k} {list(v.shape)}" for k, v in vs.items() if v.ndim and v.shape != shape]
    if odd:
        raise NotAvailable(f"{lib} columns do not broadcast ({', '.join(odd)} against "
                           f"{list(shape)})")
    return shape


def import_peer(module, pip_name):
    """A peer's module, imported when first used; NotAvailable if it is not installed."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise NotAvailable(f"{pip_name} is not installed") from e


def polars_peer(tree, vs):
    """polars: `df.select(pl.when(PRED).then(A).otherwise(B))` on a DataFrame of the array
    operands (flattened), scalars as typed literals; the result is a new column."""
    pl = import_peer("polars", "polars")
    shape = flat_operands(vs, "polars")
    try:
        df = pl.DataFrame({k: pl.Series(k, v.reshape(-1)) for k, v in vs.items() if v.ndim})
        types = {k: pl.Series(k, v.reshape(-1)[:1]).dtype for k, v in vs.items()}
    except Exception as e:  # a dtype polars has no type for
        raise NotAvailable(str(e).strip().splitlines()[0][:120]) from e
    odd = sorted({str(vs[k].dtype) for k, t in types.items() if t == pl.Object})
    if odd:
        raise NotAvailable(f"polars has no {', '.join(odd)} (an Object column)")
    ops = {">": "gt", ">=": "ge", "<": "lt", "<=": "le", "==": "eq", "!=": "ne"}
    tests = {"isnan": "is_nan", "isinf": "is_infinite", "isfinite": "is_finite"}

    def term(name):
        v = vs[name]
        return pl.col(name) if v.ndim else pl.lit(v.item(), dtype=types[name])

    def cond(c):
        if c[0] == "not":
            return cond(c[1]).not_()
        if c[0] == "test":
            return getattr(term(c[2][1]), tests[c[1]])()
        return getattr(term(c[2][1]), ops[c[1]])(term(c[3][1]))
    _, c, a, b = tree
    box = [None]

    def call():
        box[0] = df.select(pl.when(cond(c)).then(term(a[1])).otherwise(term(b[1])))
    try:
        call()
    except Exception as e:
        raise NotAvailable(str(e).strip().splitlines()[0][:120]) from e
    return call, lambda: box[0].to_series().to_numpy().reshape(shape)


def pyarrow_peer(tree, vs):
    """pyarrow: `pc.if_else(pc.greater(x, zero), x, zero)` on Arrow arrays of the array
    operands (flattened), scalars as typed `pa.scalar`s; the result is a new array."""
    pa = import_peer("pyarrow", "pyarrow")
    pc = import_peer("pyarrow.compute", "pyarrow")
    if THREADS == "1":
        pa.set_cpu_count(1)
    shape = flat_operands(vs, "pyarrow")
    try:
        vals = {k: pa.array(v.reshape(-1)) if v.ndim else
                pa.scalar(v.item(), type=pa.from_numpy_dtype(v.dtype)) for k, v in vs.items()}
    except Exception as e:  # a dtype Arrow has no type for
        odd = sorted({str(v.dtype) for v in vs.values() if v.dtype.kind not in "biuf"})
        raise NotAvailable(f"no Arrow type for {', '.join(odd) or 'a dtype'} "
                           f"({str(e).strip().splitlines()[0][:80]})") from e
    tests = {"isnan": pc.is_nan, "isinf": pc.is_inf, "isfinite": pc.is_finite}

    def cond(c):
        if c[0] == "not":
            return pc.invert(cond(c[1]))
        if c[0] == "test":
            return tests[c[1]](vals[c[2][1]])
        return getattr(pc, CMP[c[1]])(vals[c[2][1]], vals[c[3][1]])
    _, c, a, b = tree
    box = [None]

    def call():
        box[0] = pc.if_else(cond(c), vals[a[1]], vals[b[1]])
    try:
        call()
    except Exception as e:  # a kernel Arrow lacks (e.g. comparisons of halffloat): its words
        raise NotAvailable(str(e).strip().splitlines()[0][:120]) from e
    return call, lambda: box[0].to_numpy(zero_copy_only=False).reshape(shape)


def import_jax():
    """jax with x64 enabled, its CPU client made on first use. With one thread XLA_FLAGS alone
    does not do it (jaxlib 0.10 still runs an elementwise jit on 4-5 threads of its pool): the
    client is made while this thread may run on one CPU only, so the pool it starts has one
    thread, pinned there (threads inherit the mask); this thread's mask is restored after."""
    first = "jax" not in sys.modules
    mask = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    pin = first and THREADS == "1" and mask is not None and len(mask) > 1
    if pin:
        os.sched_setaffinity(0, {min(mask)})
    try:
        jax = import_peer("jax", "jax[cpu]")
        jax.config.update("jax_enable_x64", True)
        jax.devices()  # the client and its thread pools
    finally:
        if pin:
            os.sched_setaffinity(0, mask)
    return jax


def jax_fn(vs, body):
    """`jax.jit(body)` on the CPU over the array variables of `vs` (put on the device first),
    scalars as constants of their dtype (literals in user code); `body` takes the variables by
    name. Returns (call, result): each call waits for its result (`block_until_ready`)."""
    jax = import_jax()
    names = [k for k, v in vs.items() if v.ndim]
    consts = {k: v for k, v in vs.items() if not v.ndim}

    def fn(*args):
        return body(dict(consts, **dict(zip(names, args))))
    try:
        jfn = jax.jit(fn)
        args = [jax.device_put(vs[k]) for k in names]
        for a in args:
            a.block_until_ready()
    except Exception as e:
        raise NotAvailable(str(e).strip().splitlines()[0][:120]) from e
    box = [None]

    def call():
        box[0] = jfn(*args).block_until_ready()
    try:
        call()
    except Exception as e:
        raise NotAvailable(str(e).strip().splitlines()[0][:120]) from e
    call.keep = args
    return call, lambda: np.asarray(box[0])


def jax_peer(tree, vs):
    """JAX: `jax.jit(lambda x: jnp.where(x > zero, x, zero))` on the CPU, array operands put on
    the device beforehand, scalars as constants of their dtype (as literals in user code),
    x64 enabled (f64 / i64 stay 64-bit); each call waits for its result
    (`block_until_ready`)."""
    import_jax()
    jnp = import_peer("jax.numpy", "jax[cpu]")

    def cond(c, env):
        if c[0] == "not":
            return jnp.logical_not(cond(c[1], env))
        if c[0] == "test":
            return getattr(jnp, c[1])(env[c[2][1]])
        return getattr(jnp, CMP[c[1]])(env[c[2][1]], env[c[3][1]])
    _, c, a, b = tree
    return jax_fn(vs, lambda env: jnp.where(cond(c, env), env[a[1]], env[b[1]]))


def numba_peer(tree, vs):
    """numba: a `@vectorize` ufunc of the scalar expression (`x if x > zero else zero`),
    called on the variables as they are (numpy broadcasting, a new output); with default
    threads `target="parallel"` on an explicit signature, with one thread the ordinary
    (lazily typed) ufunc."""
    numba = import_peer("numba", "numba")
    names = list(vs)
    arg = {k: f"v{i}" for i, k in enumerate(names)}

    def text(c):
        if c[0] == "not":
            return f"(not {text(c[1])})"
        if c[0] == "test":
            return f"math.{c[1]}({arg[c[2][1]]})"
        return f"({arg[c[2][1]]} {c[1]} {arg[c[3][1]]})"
    _, c, a, b = tree
    src = (f"def kernel({', '.join(arg.values())}):\n"
           f"    return {arg[a[1]]} if {text(c)} else {arg[b[1]]}\n")
    scope = {"math": math}
    exec(src, scope)
    try:
        if THREADS == "1":
            fn = numba.vectorize(scope["kernel"])
        else:
            ty = numba.from_dtype
            sig = ty(vs[a[1]].dtype)(*(ty(vs[k].dtype) for k in names))
            fn = numba.vectorize([sig], target="parallel")(scope["kernel"])
    except Exception as e:  # a dtype numba has no type for
        raise NotAvailable(f"{type(e).__name__}: " + " ".join(str(e).split())[:100]) from e
    args = [vs[k] for k in names]
    box = [None]
    # A NaN compared in the kernel raises the invalid flag, which numpy reports for a ufunc
    # (its own comparisons do not): a warning only, the outputs are checked anyway.
    import warnings
    warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)

    def call():
        box[0] = fn(*args)
    try:
        call()
    except Exception as e:  # typing errors: the first line of numba's message
        raise NotAvailable(f"{type(e).__name__}: " + " ".join(str(e).split())[:100]) from e
    return call, lambda: box[0]


FUSED_PEERS = ["numpy", "numexpr1", "numexpr", "ort", "openvino", "selectjit-py",
               "selectjit-py-out", "polars", "jax", "numba", "pyarrow"]
FUSED_PEER_FNS = {"numpy": fused_numpy_peer, "numexpr1": numexpr_peer("1"),
                  "numexpr": numexpr_peer("default"), "ort": fused_ort_peer,
                  "openvino": fused_openvino_peer, "selectjit-py": selectjit_py_peer(False),
                  "selectjit-py-out": selectjit_py_peer(True), "polars": polars_peer,
                  "jax": jax_peer, "numba": numba_peer, "pyarrow": pyarrow_peer}
FUSED_TITLES = {"numpy": "numpy", "numexpr1": "numexpr 1t", "numexpr": "numexpr",
                "ort": "ONNX Runtime", "openvino": "OpenVINO",
                "selectjit-py": "selectjit (Python, allocating)",
                "selectjit-py-out": "selectjit (Python, out=)", "polars": "polars",
                "jax": "JAX jit", "numba": "numba", "pyarrow": "pyarrow"}
# Ratios: the peers measured before the Python ones against `selectjit bench`'s fused call;
# out= as allocating / out= time; the Python libraries against selectjit's allocating `where`.
PY_PEERS = ["polars", "jax", "numba", "pyarrow"]


def selectjit_fused_bench(exe, case, quick):
    """`selectjit bench` on this one fused case; its JSON measurement."""
    with tempfile.TemporaryDirectory() as d:
        cases, out = Path(d, "fused.json"), Path(d, "out.json")
        cases.write_text(json.dumps({"cases": [case]}))
        empty = Path(d, "none.json")
        empty.write_text(json.dumps({"cases": []}))
        cmd = [exe, "bench", "--cases", empty, "--fused-cases", cases, "--json", out] + (
            ["--quick"] if quick else [])
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"selectjit bench failed on {case['name']}:\n{r.stdout}{r.stderr}")
        return json.loads(out.read_text())["fused_cases"][0]


def run_fused_cases(cases, exe, opts):
    rows = []
    for case in cases:
        sj = selectjit_fused_bench(exe, case, opts.quick)
        tree = parse_expr(case["expr"])
        vs = make_fused_inputs(case)
        _, c, a, b = tree
        want_dtype = vs[a[1]].dtype
        want = reference(np_cond(c, vs).astype(np.uint8), vs[a[1]], vs[b[1]])
        row = {"case": case["name"], "expr": case["expr"], "elements": sj["elements"],
               "selectjit": sj, "peers": {}}
        runners = {}
        for p in FUSED_PEERS:
            try:
                call, output = FUSED_PEER_FNS[p](tree, vs)
                call()
            except NotAvailable as e:
                row["peers"][p] = {"status": "n/a", "reason": str(e)}
                continue
            got = np.asarray(output())
            if got.dtype != want_dtype:
                nbad, what = 1, f"output dtype {got.dtype}, expected {want_dtype}"
            else:
                nbad, what = differences(got, want, vs[a[1]])
            row["peers"][p] = {"status": "wrong" if nbad else "ok", "wrong": what}
            runners[p] = call
        times = dict(zip(runners, timeit(list(runners.values()), opts.rounds,
                                         opts.min_batch_ns)))
        alloc = times.get("selectjit-py")
        for p, t in times.items():
            if p == "selectjit-py-out":
                ratio = alloc / t if alloc else None
            elif p in PY_PEERS:
                ratio = t / alloc if alloc else None
            else:
                ratio = t / sj["fused_ns"]
            row["peers"][p].update(ns=t, ratio=ratio)
        del runners
        rows.append(row)
        print(fused_table_line(fused_cells(row)), flush=True)
    return rows


FUSED_HEADER = ["case", "elements", "fused", "tier", "unfused", "roofline",
                "numpy", "np/sj", "numexpr 1t", "ne1/sj", "numexpr", "ne/sj",
                "ORT", "ORT/sj", "OpenVINO", "OV/sj", "sj-py", "py/sj", "sj-py out=", "al/out",
                "polars", "pl/py", "JAX", "jax/py", "numba", "nb/py", "pyarrow", "pa/py"]
FUSED_WIDTHS = [26, 9, 10, 8, 10, 9, 10, 6, 10, 6, 10, 6, 10, 6, 10, 6, 10, 6, 10, 6,
                10, 6, 10, 6, 10, 6, 10, 6]


def fused_cells(row):
    sj = row["selectjit"]
    out = [row["case"], str(row["elements"]), f"{sj['fused_ns'] / 1e3:.2f}", sj["fused_tier"],
           f"{sj['unfused_ns'] / 1e3:.2f}", f"{sj['roofline_ns'] / 1e3:.2f}"]
    for p in FUSED_PEERS:
        out += cell(row, p)
    return out


def fused_table_line(cells):
    return " ".join(c.ljust(w) if k == 0 else c.rjust(w)
                    for k, (c, w) in enumerate(zip(cells, FUSED_WIDTHS)))


def fused_summaries(rows):
    out = {}
    for p in FUSED_PEERS:
        ran = [r for r in rows if r["peers"][p]["status"] != "n/a"]
        ratios = [r["peers"][p]["ratio"] for r in ran if r["peers"][p]["ratio"] is not None]
        gm = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
        wrong = [f"{r['case']}: {r['peers'][p]['wrong']}" for r in ran
                 if r["peers"][p]["status"] == "wrong"]
        na = sorted({f"{r['case']} ({r['peers'][p]['reason']})" for r in rows
                     if r["peers"][p]["status"] == "n/a"})
        if p == "selectjit-py-out":
            what = (f"the allocating call slower than out= on {sum(x > 1 for x in ratios)} of "
                    f"{len(ratios)} cases; geometric mean allocating/out= time {gm:.2f}")
        elif p in PY_PEERS:
            what = (f"selectjit's Python where (allocating) faster on "
                    f"{sum(x > 1 for x in ratios)} of {len(ratios)} cases both run; geometric "
                    f"mean {p}/selectjit-py time {gm:.2f}")
        else:
            what = (f"selectjit's fused call faster on {sum(x > 1 for x in ratios)} of "
                    f"{len(ran)} cases it runs; geometric mean {p}/selectjit time {gm:.2f}")
        out[p] = {"ran": len(ran), "geomean_ratio": gm, "wrong_on_cases": wrong, "n/a": na,
                  "line": (f"{FUSED_TITLES[p]}: {what}; wrong output on {len(wrong)} case(s); "
                           f"n/a on {len(rows) - len(ran)}")}
    return out


def fused_markdown(rows, summ):
    md = ["## Fused predicates", "",
          "Each case of `benches/fused_cases.json`: a select whose condition is computed from "
          "other tensors. selectjit = `selectjit bench` on the case: fused = the call with its "
          "predicate (`Cond`) on the `auto` engine, tier = what ran it (a kernel variant that "
          "fuses the predicate, or `blocked`: the static kernels, a mask block then its select, "
          "where no tier fuses it yet), unfused = the fastest Rust mask then the select on it, "
          "roofline = the fastest copy of the fused traffic (variables + output). Ratios "
          "up to py/sj are peer time / selectjit fused time; al/out = selectjit-py allocating "
          "/ out= time; the Python libraries after it (polars, JAX, numba, pyarrow) are "
          "peer time / selectjit-py allocating time, the same kind of call from Python.", "",
          "| " + " | ".join(["case", "elements", "fused µs", "tier", "unfused µs",
                             "roofline µs", "numpy µs", "np/sj", "numexpr 1t µs", "ne1/sj",
                             "numexpr µs", "ne/sj", "ORT µs", "ORT/sj", "OpenVINO µs",
                             "OV/sj", "selectjit-py µs", "py/sj", "sj-py out= µs", "alloc/out",
                             "polars µs", "pl/py", "JAX µs", "jax/py", "numba µs", "nb/py",
                             "pyarrow µs", "pa/py"]) + " |",
          "|---|" + "---:|" * 2 + "---|" + "---:|" * 24]
    md += ["| " + " | ".join(fused_cells(r)) + " |" for r in rows]
    md += ["", "- numpy = a ufunc per operator of the condition (`np.greater`, `np.isnan`, "
           "`np.logical_not`, ...), then `np.where` (both allocate, as numpy code does). "
           "numexpr = `numexpr.evaluate` of the expression (isnan / isinf / isfinite as "
           "comparisons, which numexpr lacks), with one thread and with its default threads. "
           "ORT / OpenVINO = a graph of the comparison or test nodes and Where / Select, "
           "inputs and output bound to preallocated buffers. selectjit-py = the Python "
           "package's lazy predicates where it has them (`y = selectjit.where("
           "selectjit.greater(x, zero), x, zero)`, allocating), and the same call with `out=` "
           "into a preallocated array. polars = `df.select(pl.when(PRED).then(A)"
           ".otherwise(B))` on a DataFrame of the array operands, scalars as typed literals; "
           "pyarrow = `pc.if_else(pc.greater(x, zero), x, zero)` on Arrow arrays (both run "
           "the flattened arrays where every operand is a scalar or of the output's shape, "
           "and are n/a where non-scalars broadcast). JAX = `jax.jit` of `jnp.where(PRED, A, "
           "B)` on the CPU (x64 enabled, inputs on the device, `block_until_ready`). numba = "
           "a `@vectorize` ufunc of the scalar expression (`target='parallel'` with default "
           "threads). All of them allocate their output. With one thread: OMP_NUM_THREADS, "
           "POLARS_MAX_THREADS, NUMBA_NUM_THREADS = 1, XLA_FLAGS without Eigen's thread pool "
           "and one intra-op thread, JAX's CPU client made while the process may run on one "
           "CPU (its pool then has one thread, pinned; the flags alone leave an elementwise jit "
           "on 4-5 threads), `pa.set_cpu_count(1)`. The peers' inputs are drawn like "
           "the Rust harness's (same distributions, numpy's generator).", "", "### Summary",
           ""]
    for p, s in summ.items():
        md.append(f"- {s['line']}.")
        md += [f"  - n/a: {x}" for x in s["n/a"]]
        md += [f"  - wrong: {x}" for x in s["wrong_on_cases"]]
    return "\n".join(md) + "\n"


# ---------------------------------------------------------------- selectjit

def selectjit_bench(exe, case, quick):
    """`selectjit bench` on this one case; its JSON measurement."""
    with tempfile.TemporaryDirectory() as d:
        cases, out = Path(d, "case.json"), Path(d, "out.json")
        cases.write_text(json.dumps({"cases": [case]}))
        cmd = [exe, "bench", "--cases", cases, "--json", out] + (["--quick"] if quick else [])
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"selectjit bench failed on {case['name']}:\n{r.stdout}{r.stderr}")
        return json.loads(out.read_text())["cases"][0]


def selectjit_peer(exe, tmp):
    """`selectjit run` on .npy files, as a peer of the probe (not timed)."""
    def peer(cond, then, else_):
        files = [Path(tmp, n) for n in ("c.npy", "t.npy", "e.npy", "o.npy")]
        for f, a in zip(files, [cond.view(np.bool_), then, else_]):
            np.save(f, a)
        args = [exe, "run", "--cond", files[0], "--then", files[1], "--else", files[2],
                "-o", files[3]]
        r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
        if r.returncode != 0:
            raise NotAvailable(r.stderr.strip()[:120])
        return (lambda: None), lambda: np.load(files[3]).view(then.dtype)
    return peer


# ---------------------------------------------------------------- timing

def timeit(fns, rounds, min_batch_ns):
    """Median ns per call of each function: each is calibrated to batches of at least
    `min_batch_ns`, then every round runs one batch of each in turn (as src/bench.rs)."""
    return [med for _, med in timeit_stats(fns, rounds, min_batch_ns)]


def timeit_stats(fns, rounds, min_batch_ns):
    """(best, median) ns per call of each function, batches and rounds as `timeit`'s."""
    def batch(f, reps):
        t = time.perf_counter_ns()
        for _ in range(reps):
            f()
        return (time.perf_counter_ns() - t) / reps

    reps = []
    for f in fns:
        r = 1
        while (t := batch(f, r) * r) < min_batch_ns and r < 1 << 24:
            r = min(r * min(max(math.ceil(min_batch_ns / max(t, 1) * 1.2), 2), 100), 1 << 24)
        reps.append(r)
    times = [[] for _ in fns]
    gc.disable()
    for _ in range(rounds):
        for k, f in enumerate(fns):
            times[k].append(batch(f, reps[k]))
    gc.enable()
    return [(min(t), sorted(t)[len(t) // 2]) for t in times]


# ---------------------------------------------------------------- correctness

def differences(got, want, then):
    """Indices of output elements whose bytes differ, and a description of the first."""
    g, w = as_bytes(np.asarray(got).astype(then.dtype, copy=False)), want
    if g.shape != w.shape:
        return 1, f"output shape {g.shape[:-1]}, expected {w.shape[:-1]}"
    bad = np.flatnonzero((g != w).any(axis=-1).reshape(-1))
    if len(bad) == 0:
        return 0, ""
    i = bad[0]
    return len(bad), (f"{len(bad)} of {w[..., 0].size} elements differ, e.g. "
                      f"{show(w.reshape(-1, w.shape[-1])[i], then.dtype)} -> "
                      f"{show(g.reshape(-1, g.shape[-1])[i], then.dtype)}")


def show(b, dt):
    """An element given by its bytes: value and bit pattern."""
    v = np.frombuffer(b.tobytes(), dt)[0]
    return f"{v!r}".replace("np.", "") + f" (0x{b.tobytes()[::-1].hex()})"


COND_BYTES = [1, 2, 0x7F, 0x80, 0xFE, 0xFF, 0x10, 0]
# Values that are exact in their type but change through f32 / i32 (or another narrowing),
# signalling NaNs and NaN payloads (bit patterns for the float types), extremes.
SPECIALS = {
    "bool": [0, 1],
    "i8": [-128, 127, -1], "u8": [255, 128, 1],
    "i16": [-32768, 32767, 257], "u16": [65535, 32768, 257],
    "i32": [-2**31, 2**31 - 1, 2**24 + 1], "u32": [2**32 - 1, 2**31, 2**24 + 1],
    "i64": [2**40 + 1, -2**63, 2**63 - 1, 2**31, -2**31 - 1],
    "u64": [2**64 - 1, 2**63, 2**40 + 1],
    "f16": [0x7C01, 0x7E01, 0xFE55, 0x0001, 0x8000, 0x7BFF],
    "bf16": [0x7F81, 0xFFC1, 0x0001, 0x8000, 0x7F7F, 0x3F81],
    "f32": [0x7F800001, 0x7FC00123, 0x00000001, 0x80000000, 0x4B800001, 0x7F7FFFFF],
    "f64": [0x7E37E43C8800759C, 0x4270000000001000, 0x7FF0000000000001, 0x7FF8000000000123,
            0x0000000000000001, 0x8000000000000000, 0x3FD5555555555555, 0x7FF0000000000000],
    "complex64": [0x7F800001, 0x4B800001, 0x00000001, 0x7F7FFFFF],
    "complex128": [0x7E37E43C8800759C, 0x4270000000001000, 0x7FF0000000000001,
                   0x0000000000000001],
}


def specials(name):
    dt = np.dtype(DTYPES[name][0])
    if dt.kind in "fcV":  # bit patterns of the (component) float type
        width = dt.itemsize // (2 if dt.kind == "c" else 1)
        return np.array(SPECIALS[name], UINT[width]).view(dt)
    return np.array(SPECIALS[name], dt)


def probe(peer, name):
    """Findings of one peer on one dtype: cond bytes other than 0/1, then special values."""
    dt = np.dtype(DTYPES[name][0])
    found = []
    cond = np.array(COND_BYTES, np.uint8)
    n = len(cond)
    then = (np.ones(n) if name == "bool" else np.arange(1, n + 1)).astype(dt)
    else_ = (np.zeros(n) if name == "bool" else np.arange(11, n + 11)).astype(dt)
    call, output = peer(cond, then, else_)
    call()
    got = as_bytes(np.asarray(output()).astype(dt, copy=False)).reshape(n, -1)
    tb, eb, kinds = as_bytes(then), as_bytes(else_), {}
    for i, b in enumerate(COND_BYTES):
        is_then, is_else = (got[i] == tb[i]).all(), (got[i] == eb[i]).all()
        if is_then if b else is_else:
            continue
        kind = ("treated as false" if is_else else "treated as true" if is_then else
                f"gives neither then nor else ({show(got[i], dt)})")
        kinds.setdefault(kind, []).append(f"0x{b:02x}")
    found += [f"cond byte {' '.join(bs)} {k}" for k, bs in kinds.items()]

    vals = specials(name)
    k = len(vals)
    zero = np.zeros(k, dt)
    cond = np.array([1] * k + [0] * k, np.uint8)
    call, output = peer(cond, np.concatenate([vals, zero]), np.concatenate([zero, vals]))
    call()
    got = as_bytes(np.asarray(output()).astype(dt, copy=False)).reshape(2 * k, -1)
    want = as_bytes(np.concatenate([vals, vals]))
    changed = [f"{show(want[i], dt)} -> {show(got[i], dt)}" for i in range(2 * k)
               if (got[i] != want[i]).any()]
    return found + list(dict.fromkeys(changed))  # from then and from else: once if alike


# ---------------------------------------------------------------- run and report

def run_cases(cases, exe, opts):
    rows = []
    for case in cases:
        sj = selectjit_bench(exe, case, opts.quick)
        cond, then, else_ = make_inputs(case, np.random.default_rng(0x9E3779B9))
        want = reference(cond, then, else_)
        row = {"case": case["name"], "dtype": case["dtype"], "elements": sj["elements"],
               "selectjit": sj, "peers": {}}
        runners = {}
        for p in PEERS:
            try:
                call, output = PEER_FNS[p](cond, then, else_)
            except NotAvailable as e:
                row["peers"][p] = {"status": "n/a", "reason": str(e)}
                continue
            call()
            nbad, what = differences(output(), want, then)
            row["peers"][p] = {"status": "wrong" if nbad else "ok", "wrong": what}
            runners[p] = call
        times = timeit(list(runners.values()), opts.rounds, opts.min_batch_ns)
        for p, t in zip(runners, times):
            row["peers"][p].update(ns=t, ratio=t / sj_ns(sj))
        del runners
        rows.append(row)
        print(table_line(row), flush=True)
    return rows


def sj_ns(sj):
    """selectjit's time in this mode: one thread, or its engine on every core."""
    return sj["jit_ns"] if THREADS == "1" else sj["jit_mt_ns"]


def cell(row, p):
    r = row["peers"][p]
    if r["status"] == "n/a":
        return ["n/a", ""]
    mark = "!" if r["status"] == "wrong" else ""
    return [f"{r['ns'] / 1e3:.2f}{mark}", "" if r["ratio"] is None else f"{r['ratio']:.2f}"]


def table_cells(row):
    sj = row["selectjit"]
    kt = next((t["kernel_tier"] for t in sj["tiers"] if t["tier"] == sj["jit_tier"]),
              sj["jit_tier"])
    tier = sj["jit_tier"] + ("" if kt == sj["jit_tier"] else f"->{kt}")
    out = [row["case"], row["dtype"], str(row["elements"]), f"{sj_ns(sj) / 1e3:.2f}", tier,
           f"{sj['static_ns'] / 1e3:.2f}", f"{sj['roofline_ns'] / 1e3:.2f}"]
    for p in PEERS:
        out += cell(row, p)
    return out


HEADER = ["case", "dtype", "elements", "selectjit", "tier", "static", "roofline",
          "numpy", "np/sj", "ORT", "ORT/sj", "OpenVINO", "OV/sj"]
WIDTHS = [22, 10, 9, 10, 6, 9, 9, 10, 6, 10, 7, 10, 6]


def table_line(cells_or_row):
    cells = cells_or_row if isinstance(cells_or_row, list) else table_cells(cells_or_row)
    return " ".join(c.ljust(w) if k < 2 else c.rjust(w)
                    for k, (c, w) in enumerate(zip(cells, WIDTHS)))


def summaries(rows):
    """One line per peer: cases where selectjit is faster, geometric mean ratio, wrong results,
    and dtypes it does not run."""
    out = {}
    for p in PEERS:
        ran = [r for r in rows if r["peers"][p]["status"] != "n/a"]
        ratios = [r["peers"][p]["ratio"] for r in ran]
        faster = sum(x > 1 for x in ratios)
        gm = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
        wrong = [f"{r['case']}: {r['peers'][p]['wrong']}" for r in ran
                 if r["peers"][p]["status"] == "wrong"]
        na = sorted({f"{r['dtype']} ({r['peers'][p]['reason']})" for r in rows
                     if r["peers"][p]["status"] == "n/a"})
        out[p] = {"cases": len(rows), "ran": len(ran), "selectjit_faster": faster,
                  "geomean_ratio": gm, "wrong_on_cases": wrong, "n/a": na,
                  "line": (f"{TITLES[p]}: selectjit faster on {faster} of {len(ran)} cases it "
                           f"runs; geometric mean {p}/selectjit time {gm:.2f}; "
                           f"wrong output on {len(wrong)} case(s); n/a on {len(rows) - len(ran)}")}
    return out


def run_probes(exe, dtypes):
    """Probe findings per peer, each finding with the dtypes that showed it."""
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        peers = dict(PEER_FNS, selectjit=selectjit_peer(exe, tmp))
        for p, fn in peers.items():
            res[p] = {"findings": {}, "n/a": {}}
            for name in dtypes:
                try:
                    for f in probe(fn, name):
                        res[p]["findings"].setdefault(f, []).append(name)
                except NotAvailable as e:
                    res[p]["n/a"][name] = str(e)
    return res


def probe_lines(probes):
    lines = []
    for p, r in probes.items():
        tested = [d for d in HAVE_DTYPES if d not in r["n/a"]]
        lines.append(f"{TITLES[p]} (probed: {' '.join(tested)}):")
        by_dtypes = {}
        for f, ds in r["findings"].items():
            by_dtypes.setdefault(" ".join(ds), []).append(f)
        for ds, fs in by_dtypes.items():
            lines += [f"  {ds}: {f}" for f in fs]
        if not tested:
            lines.append(f"  not run ({next(iter(r['n/a'].values()), 'no dtype')})")
        elif not r["findings"]:
            lines.append("  every probe bit-exact")
    return lines


def environment(exe, opts):
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), platform.processor())
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout
    return {"date": datetime.date.today().isoformat(), "cpu": cpu, "vcpus": os.cpu_count(),
            "python": platform.python_version(), "selectjit": version.strip(),
            "numpy": np.__version__,
            "ml_dtypes": ml_dtypes.__version__ if ml_dtypes else "(not installed)",
            "onnx": onnx.__version__ if onnx else "(not installed)",
            "onnxruntime": ort.__version__ if ort else "(not installed)",
            "openvino": ov.__version__.split("-")[0] if ov else "(not installed)",
            "python_peers": package_versions(["numexpr", "selectjit", "polars", "pyarrow",
                                              "jax", "jaxlib", "numba"]),
            "mode": "quick" if opts.quick else "full", "filter": opts.filter,
            "threads": "one thread" if THREADS == "1" else "default threads",
            "rounds": opts.rounds, "min_batch_ms": opts.min_batch_ns / 1e6}


def notes():
    threads = ("single-threaded" if THREADS == "1" else
               "each contender at its default thread count (selectjit: its engine on every core)")
    return [
        f"Times in µs per call, medians of interleaved rounds, {threads}; ratios are peer "
        "time / selectjit time (above 1: selectjit is faster), all from this one run.",
        "selectjit = the `auto` tier with the variant it chose by measuring (`+zmm`: AVX-512 "
        "main loops of 512-bit vectors, `+nt`: non-temporal stores, `+pfw`: output lines fetched for writing ahead, `+4way`: rows walked four "
        "ways at once); static = the crate's precompiled kernels; roofline = the fastest copy of the "
        "same traffic (a bound, not a select).",
        "numpy = `np.where(cond, then, else)`, which allocates its output (included). ORT = a "
        "one-node `Where` model, I/O bound to preallocated buffers, `run_with_iobinding`. "
        "OpenVINO = `opset13.select(auto_broadcast='numpy')` compiled for CPU, one reused infer "
        "request writing into a preallocated output tensor.",
        "Peer times include the Python call (about a microsecond), which dominates tiny cases; "
        "selectjit's are Rust calls. `!` = the peer's output differs from the reference bytes.",
    ]


def markdown(env, rows, summ, probes, note):
    md = ["# selectjit and its peers", "",
          f"Measured {env['date']} on {env['cpu']}, {env['vcpus']} vCPU, {env['threads']}, "
          f"{env['mode']} run "
          f"({env['rounds']} rounds, batches of at least {env['min_batch_ms']:g} ms). "
          f"{env['selectjit']}; numpy {env['numpy']}, ml_dtypes {env['ml_dtypes']}, "
          f"onnxruntime {env['onnxruntime']}, openvino {env['openvino']}, "
          + "".join(f"{k} {v}, " for k, v in env["python_peers"].items())
          + f"Python {env['python']}.", ""]
    if note:
        md += [note, ""]
    md += ["Generated by `python3 benches/peers.py " + " ".join(sys.argv[1:]) + "`; see "
           "benches/README.md.", "",
           "| " + " | ".join(HEADER[:3] + ["selectjit µs", "tier", "static µs", "roofline µs",
                                            "numpy µs", "numpy/sj", "ORT µs", "ORT/sj",
                                            "OpenVINO µs", "OV/sj"]) + " |",
           "|" + "---|" * 2 + "---:|" * (len(HEADER) - 2)]
    md += ["| " + " | ".join(table_cells(r)) + " |" for r in rows]
    md += [""] + [f"- {n}" for n in notes()] + ["", "## Summary", ""]
    for p, s in summ.items():
        md.append(f"- {s['line']}.")
        md += [f"  - n/a: {x}" for x in s["n/a"]]
        md += [f"  - wrong: {x}" for x in s["wrong_on_cases"]]
    md += ["", "## Correctness probe", "",
           f"cond bytes `{' '.join(f'0x{b:02x}' for b in COND_BYTES)}` in a bool tensor "
           "(then 1..8, else 11..18), then each dtype's special values (below) selected from "
           "then and from else with a 0/1 cond; compared bytewise. Values are shown as "
           "`value (bits)`.", "", "```"] + probe_lines(probes) + ["```", ""]
    return "\n".join(md)


def limit_threads(threads):
    """The thread counts of the peers that read them from the environment once, when they are
    imported (polars, numba, JAX's XLA, OpenMP): set before any of them is (the Python peers
    are imported when first used). With default threads nothing is set. JAX runs on the CPU
    in both modes."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if threads != "1":
        return
    late = [m for m in ("polars", "numba", "jax", "pyarrow") if m in sys.modules]
    if late:
        sys.exit(f"peers.py: {', '.join(late)} imported before the thread limits were set")
    for var in ("OMP_NUM_THREADS", "POLARS_MAX_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = "1"
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false "
                               "intra_op_parallelism_threads=1").strip()


def package_versions(names):
    """Installed versions of the Python peers, without importing them."""
    from importlib import metadata
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 rounds of 1 ms batches")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--cases", default=ROOT / "benches" / "cases.json", type=Path)
    ap.add_argument("--fused-cases", default=ROOT / "benches" / "fused_cases.json", type=Path)
    ap.add_argument("--fused-only", action="store_true",
                    help="only the fused cases (no select cases, no probe)")
    ap.add_argument("--no-fused", action="store_true", help="skip the fused cases")
    ap.add_argument("--selectjit", default=ROOT / "target" / "release" / "selectjit",
                    type=Path, help="the selectjit binary (cargo build --release)")
    ap.add_argument("--json", type=Path, help="write the combined results here")
    ap.add_argument("--markdown", type=Path, help="write the table and findings here")
    ap.add_argument("--note", default="", help="a line for the markdown (e.g. machine load)")
    ap.add_argument("--threads", choices=["1", "default"], default="1",
                    help="one thread for every contender, or each at its default")
    opts = ap.parse_args()
    global THREADS
    THREADS = opts.threads
    limit_threads(THREADS)
    opts.rounds, opts.min_batch_ns = (5, 1e6) if opts.quick else (15, 4e6)
    if not opts.selectjit.is_file():
        sys.exit(f"no selectjit binary at {opts.selectjit}: run `cargo build --release` first "
                 "(or pass --selectjit)")
    cases = [] if opts.fused_only else [c for c in json.loads(opts.cases.read_text())["cases"]
                                        if opts.filter in c["name"]]
    fused = [] if opts.no_fused else [c for c in
                                      json.loads(opts.fused_cases.read_text())["cases"]
                                      if opts.filter in c["name"]]
    if not cases and not fused:
        sys.exit(f"no case matches '{opts.filter}'")
    skip = [c["name"] for c in cases if c["dtype"] not in HAVE_DTYPES] + [
        c["name"] for c in fused if any(v["dtype"] not in HAVE_DTYPES for v in c["vars"].values())]
    if skip:
        print(f"left out (no numpy dtype without ml_dtypes): {', '.join(skip)}")
        cases = [c for c in cases if c["name"] not in skip]
        fused = [c for c in fused if c["name"] not in skip]

    env = environment(opts.selectjit, opts)
    rows, summ, probes = [], {}, {}
    if cases:
        print(table_line(HEADER))
        rows = run_cases(cases, opts.selectjit, opts)
        print("\n".join(notes()))
        summ = summaries(rows)
        for s in summ.values():
            print(s["line"])
            for x in s["n/a"]:
                print(f"  n/a: {x}")
            for x in s["wrong_on_cases"]:
                print(f"  wrong: {x}")
        probes = run_probes(opts.selectjit, HAVE_DTYPES)
        print("correctness probe (cond bytes other than 0/1; values that change through "
              "narrower types):")
        print("\n".join(probe_lines(probes)))
    fused_rows, fused_summ = [], {}
    if fused:
        print(fused_table_line(FUSED_HEADER))
        fused_rows = run_fused_cases(fused, opts.selectjit, opts)
        fused_summ = fused_summaries(fused_rows)
        for s in fused_summ.values():
            print(s["line"])
            for x in s["n/a"]:
                print(f"  n/a: {x}")
            for x in s["wrong_on_cases"]:
                print(f"  wrong: {x}")
    if opts.json:
        opts.json.write_text(json.dumps({"environment": env, "cases": rows, "summary": summ,
                                         "probe": probes, "fused_cases": fused_rows,
                                         "fused_summary": fused_summ}, indent=1, default=str))
    if opts.markdown:
        md = markdown(env, rows, summ, probes, opts.note) if cases else "\n".join(
            ["# selectjit and its peers: fused predicates", "",
             f"Measured {env['date']} on {env['cpu']}, {env['vcpus']} vCPU, {env['threads']}, "
             f"{env['mode']} run. {env['selectjit']}; numpy {env['numpy']}, onnxruntime "
             f"{env['onnxruntime']}, openvino {env['openvino']}, "
             + "".join(f"{k} {v}, " for k, v in env["python_peers"].items())
             + f"Python {env['python']}.", "",
             "Generated by `python3 benches/peers.py " + " ".join(sys.argv[1:]) + "`.", ""]
            + ([opts.note, ""] if opts.note else []))
        if fused_rows:
            md += "\n" + fused_markdown(fused_rows, fused_summ)
        opts.markdown.write_text(md)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""selectjit's n-way select from Python against numpy.select and its peers, as users call them.

For every case of nway_cases.json (`select([C1, C2, ...], [V1, V2, ...], D)`: the first true
condition wins): numpy as written (`np.select` of the conditions computed by numpy's ufuncs),
selectjit's `select` with lazy predicates (`selectjit.select([selectjit.isnan(x), ...], ...)`,
allocating, and with `out=`), and the peers that run the case exactly: JAX (`jax.jit` of
`jnp.select`), numexpr (nested `where(c1, v1, where(c2, v2, d))`), polars
(`pl.when(c1).then(v1).when(c2).then(v2).otherwise(d)`), pyarrow (`pc.case_when` over
`pc.make_struct` of the conditions), and ONNX Runtime / OpenVINO graphs (a chain of Where /
Select nodes). Cases that are numpy.nan_to_num (`select([isnan(x), x == inf, x == -inf],
[0, max, min], x)`) get a second row: `np.nan_to_num(x)`, `selectjit.nan_to_num(x)`,
`jax.jit(jnp.nan_to_num)`.

Every output is checked bytewise against numpy's (np.select, np.nan_to_num) before it is timed;
a peer whose bytes differ, or that does not run the case, has an empty cell and a footnote.
Times are the best of N interleaved rounds (batches of at least a few ms), one thread for every
contender; the inputs are drawn as peers.py draws the fused cases' (one generator per case,
seeded with the CRC-32 of its name, variables in file order). Shares peers.py's harness.

Needs numpy and the selectjit package (`pip install crates/selectjit-py`); every peer is
optional (`pip install -r benches/requirements-peers.txt`).
"""

import argparse
import json
import math
import os
import re
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True  # no __pycache__ of peers.py left in the checkout
import peers as P  # noqa: E402  (the shared harness: inputs, timing, checks, peers' setup)

np = P.np
ROOT = P.ROOT
NotAvailable = P.NotAvailable
CMP = P.CMP


# ---------------------------------------------------------------- the cases

def parse_select(src):
    """`select([C1, ...], [V1, ...], D)` of nway_cases.json as ("select", conds, values, d):
    conditions as peers.parse_expr makes them (("cmp", op, l, r), ("test", fn, v),
    ("not", c)) plus ("mask", name) for a bool variable; values and d are variable names."""
    toks = re.findall(r"\s*(>=|<=|==|!=|>|<|\(|\)|\[|\]|,|[A-Za-z_][A-Za-z0-9_]*)", src)
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

    def name():
        t = take()
        if not (t[0].isalpha() or t[0] == "_"):
            raise ValueError(f"expression {src!r}: expected a variable, found {t}")
        return t

    def cond():
        t = peek()
        if t == "(":
            take()
            c = cond()
            take(")")
            return c
        if t in ("isnan", "isinf", "isfinite", "logical_not"):
            take()
            take("(")
            c = ("not", cond()) if t == "logical_not" else ("test", t, ("var", name()))
            take(")")
            return c
        lhs = name()
        if peek() in CMP:
            return ("cmp", take(), ("var", lhs), ("var", name()))
        return ("mask", lhs)

    def listof(item):
        take("[")
        out = [item()]
        while peek() == ",":
            take()
            out.append(item())
        take("]")
        return out

    take("select")
    take("(")
    conds = listof(cond)
    take(",")
    values = listof(name)
    take(",")
    d = name()
    take(")")
    if peek() is not None:
        raise ValueError(f"expression {src!r}: unexpected {peek()}")
    if len(conds) != len(values):
        raise ValueError(f"expression {src!r}: one value per condition")
    return ("select", conds, values, d)


def nan_to_num_of(tree, vs):
    """The variable x if the case is numpy.nan_to_num(x) with its defaults
    (`select([isnan(x), x == inf, x == -inf], [0, max, min], x)`), else None."""
    _, conds, values, d = tree
    if len(conds) != 3 or conds[0] != ("test", "isnan", ("var", d)):
        return None
    x = vs[d]
    if x.dtype.kind != "f" or x.dtype.itemsize < 2:
        return None
    fi = np.finfo(x.dtype)
    want_scalars = [(np.inf, fi.max), (-np.inf, fi.min)]
    for c, v, (bound, repl) in zip(conds[1:], values[1:], want_scalars):
        if c[0] != "cmp" or c[1] != "==" or c[2] != ("var", d):
            return None
        s = vs[c[3][1]]
        if s.ndim or s.item() != bound or vs[v].ndim or vs[v].item() != repl:
            return None
    z = vs[values[0]]
    if z.ndim or z.item() != 0 or np.signbit(z):
        return None
    return d


def np_cond(c, vs):
    """A condition with numpy's ufuncs."""
    if c[0] == "mask":
        return vs[c[1]]
    if c[0] == "not":
        return np.logical_not(np_cond(c[1], vs))
    if c[0] == "test":
        return getattr(np, c[1])(vs[c[2][1]])
    return getattr(np, CMP[c[1]])(vs[c[2][1]], vs[c[3][1]])


def out_dtype(tree, vs):
    return vs[tree[3]].dtype


# ---------------------------------------------------------------- contenders
# Each takes (tree, vs) and returns (call, output); setup is not timed. The rows of a
# nan_to_num case use the *_ntn variants.

def numpy_select(tree, vs):
    _, conds, values, d = tree
    box = [None]

    def call():  # every condition by its ufuncs, then np.select: as numpy code reads
        box[0] = np.select([np_cond(c, vs) for c in conds], [vs[v] for v in values], vs[d])
    return call, lambda: box[0]


def numpy_ntn(tree, vs):
    x = vs[nan_to_num_of(tree, vs)]
    box = [None]

    def call():
        box[0] = np.nan_to_num(x)
    return call, lambda: box[0]


def import_selectjit(what):
    sjp = P.import_peer("selectjit", "the selectjit Python package")
    if not hasattr(sjp, what):
        raise NotAvailable(f"this selectjit Python package has no {what}")
    return sjp


def selectjit_select(out_param):
    """`selectjit.select` with lazy predicates made in every call (as user code makes them):
    allocating, or (out_param) into a preallocated `out=`."""
    def peer(tree, vs):
        sjp = import_selectjit("select")
        _, conds, values, d = tree

        def cond(c):
            if c[0] == "mask":
                return vs[c[1]]
            if c[0] == "not":
                return sjp.logical_not(cond(c[1]))
            if c[0] == "test":
                return getattr(sjp, c[1])(vs[c[2][1]])
            return getattr(sjp, CMP[c[1]])(vs[c[2][1]], vs[c[3][1]])
        vals, dflt = [vs[v] for v in values], vs[d]
        box = [None]
        if out_param:
            out = box[0] = np.empty(P.out_shape(vs), out_dtype(tree, vs))

            def call():
                sjp.select([cond(c) for c in conds], vals, dflt, out=out)
        else:
            def call():
                box[0] = sjp.select([cond(c) for c in conds], vals, dflt)
        try:
            call()
        except Exception as e:
            raise NotAvailable(str(e).splitlines()[0][:120]) from e
        return call, lambda: box[0]
    return peer


def selectjit_ntn(tree, vs):
    sjp = import_selectjit("nan_to_num")
    x = vs[nan_to_num_of(tree, vs)]
    box = [None]

    def call():
        box[0] = sjp.nan_to_num(x)
    return call, lambda: box[0]


def jax_select(tree, vs):
    P.import_jax()
    jnp = P.import_peer("jax.numpy", "jax[cpu]")
    _, conds, values, d = tree

    def cond(c, env):
        if c[0] == "mask":
            return env[c[1]]
        if c[0] == "not":
            return jnp.logical_not(cond(c[1], env))
        if c[0] == "test":
            return getattr(jnp, c[1])(env[c[2][1]])
        return getattr(jnp, CMP[c[1]])(env[c[2][1]], env[c[3][1]])
    return P.jax_fn(vs, lambda env: jnp.select([cond(c, env) for c in conds],
                                              [env[v] for v in values], env[d]))


def jax_ntn(tree, vs):
    P.import_jax()
    jnp = P.import_peer("jax.numpy", "jax[cpu]")
    x = nan_to_num_of(tree, vs)
    return P.jax_fn({x: vs[x]}, lambda env: jnp.nan_to_num(env[x]))


def numexpr_select(tree, vs):
    """numexpr, one thread: nested `where(c1, v1, where(c2, v2, d))` (isnan etc. as
    comparisons, which numexpr lacks)."""
    ne = P.import_peer("numexpr", "numexpr")
    _, conds, values, d = tree

    def text(c):
        return c[1] if c[0] == "mask" else P.ne_text(c)
    expr = d
    for c, v in reversed(list(zip(conds, values))):
        expr = f"where({text(c)}, {v}, {expr})"
    local = dict(vs, inf=np.float64(np.inf))
    ne.set_num_threads(1)
    box = [None]

    def call():
        box[0] = ne.evaluate(expr, local_dict=local)
    try:
        call()
    except Exception as e:  # a dtype numexpr does not run: its own words
        raise NotAvailable(str(e).splitlines()[0][:100]) from e
    return call, lambda: box[0]


def polars_select(tree, vs):
    """polars: `df.select(pl.when(C1).then(V1).when(C2).then(V2).otherwise(D))` on a
    DataFrame of the array variables (flattened), scalars as typed literals."""
    pl = P.import_peer("polars", "polars")
    shape = P.flat_operands(vs, "polars")
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
        if c[0] == "mask":
            return term(c[1])
        if c[0] == "not":
            return cond(c[1]).not_()
        if c[0] == "test":
            return getattr(term(c[2][1]), tests[c[1]])()
        return getattr(term(c[2][1]), ops[c[1]])(term(c[3][1]))
    _, conds, values, d = tree

    def expr():
        e = pl.when(cond(conds[0])).then(term(values[0]))
        for c, v in zip(conds[1:], values[1:]):
            e = e.when(cond(c)).then(term(v))
        return e.otherwise(term(d))
    box = [None]

    def call():
        box[0] = df.select(expr())
    try:
        call()
    except Exception as e:
        raise NotAvailable(str(e).strip().splitlines()[0][:120]) from e
    return call, lambda: box[0].to_series().to_numpy().reshape(shape)


def pyarrow_select(tree, vs):
    """pyarrow: `pc.case_when(pc.make_struct(C1, C2, ...), V1, V2, ..., D)` on Arrow arrays
    of the array variables (flattened), scalars as typed `pa.scalar`s."""
    pa = P.import_peer("pyarrow", "pyarrow")
    pc = P.import_peer("pyarrow.compute", "pyarrow")
    pa.set_cpu_count(1)
    shape = P.flat_operands(vs, "pyarrow")
    try:
        vals = {k: pa.array(v.reshape(-1)) if v.ndim else
                pa.scalar(v.item(), type=pa.from_numpy_dtype(v.dtype)) for k, v in vs.items()}
    except Exception as e:  # a dtype Arrow has no type for
        odd = sorted({str(v.dtype) for v in vs.values() if v.dtype.kind not in "biuf"})
        raise NotAvailable(f"no Arrow type for {', '.join(odd) or 'a dtype'} "
                           f"({str(e).strip().splitlines()[0][:80]})") from e
    tests = {"isnan": pc.is_nan, "isinf": pc.is_inf, "isfinite": pc.is_finite}

    def cond(c):
        if c[0] == "mask":
            return vals[c[1]]
        if c[0] == "not":
            return pc.invert(cond(c[1]))
        if c[0] == "test":
            return tests[c[1]](vals[c[2][1]])
        return getattr(pc, CMP[c[1]])(vals[c[2][1]], vals[c[3][1]])
    _, conds, values, d = tree
    box = [None]

    def call():
        box[0] = pc.case_when(pc.make_struct(*[cond(c) for c in conds]),
                              *[vals[v] for v in values], vals[d])
    try:
        call()
    except Exception as e:  # a kernel Arrow lacks: its words
        raise NotAvailable(str(e).strip().splitlines()[0][:120]) from e
    return call, lambda: box[0].to_numpy(zero_copy_only=False).reshape(shape)


def ort_select(tree, vs):
    """ONNX Runtime: the conditions' nodes and a chain of Where nodes (the last branch over
    the default first), inputs and output bound to preallocated buffers, one thread."""
    P.onnx_type(vs[tree[3]])  # NotAvailable without onnx + onnxruntime
    helper, TensorProto, ort = P.helper, P.TensorProto, P.ort
    _, conds, values, d = tree
    nodes, counter = [], [0]
    names = [c[1] if c[0] == "mask" else P.onnx_nodes(c, vs, nodes, counter) for c in conds]
    cur = d
    for k in reversed(range(len(conds))):
        y = "y" if k == 0 else f"w{k}"
        nodes.append(helper.make_node("Where", [names[k], values[k], cur], [y]))
        cur = y
    out = np.empty(P.out_shape(vs), out_dtype(tree, vs))
    info = helper.make_tensor_value_info
    elem = {k: P.onnx_type(v) for k, v in vs.items()}
    graph = helper.make_graph(nodes, "nway", [info(k, elem[k], v.shape) for k, v in vs.items()],
                              [info("y", elem[d], out.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:
        raise NotAvailable(str(e).split(" : ")[-1].strip().splitlines()[0][:120]) from e
    io = sess.io_binding()

    def value(arr, t):  # 0-d arrays stay 0-d
        arr = arr if arr.flags.c_contiguous else arr.copy()
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(arr.view(P.UINT[arr.itemsize]), t)
    vals = [value(v, elem[k]) for k, v in vs.items()]
    for k, v in zip(vs, vals):
        io.bind_ortvalue_input(k, v)
    io.bind_ortvalue_output("y", value(out, elem[d]))

    def call():
        sess.run_with_iobinding(io)
    try:
        call()
    except Exception as e:
        raise NotAvailable(str(e).split(" : ")[-1].strip().splitlines()[0][:120]) from e
    call.keep = vals
    return call, lambda: out


def openvino_select(tree, vs):
    """OpenVINO: the conditions' ops and a chain of Select ops (numpy broadcasting), compiled
    for the CPU with one inference thread, writing into a preallocated output tensor."""
    ov, ov_ops = P.ov, P.ov_ops
    _, conds, values, d = tree
    types = {k: P.ov_type(v) for k, v in vs.items()}
    P.OV_CORE = P.OV_CORE or ov.Core()
    out = np.empty(P.out_shape(vs), out_dtype(tree, vs))
    params = {k: ov_ops.parameter(list(v.shape), types[k]) for k, v in vs.items()}
    try:
        cur = params[d]
        for c, v in reversed(list(zip(conds, values))):
            cn = params[c[1]] if c[0] == "mask" else P.ov_cond(c, params)
            cur = ov_ops.select(cn, params[v], cur, auto_broadcast="numpy")
        model = P.ov.Model([cur], list(params.values()))
        req = P.OV_CORE.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 1,
                                                     "NUM_STREAMS": 1}).create_infer_request()
    except Exception as e:
        raise NotAvailable(str(e).strip().splitlines()[0][:120]) from e
    views = []  # an ov.Tensor shares a numpy buffer without keeping it alive

    def tensor(arr, t):
        views.append(np.ascontiguousarray(arr).reshape(-1).view(P.UINT[arr.itemsize]))
        return ov.Tensor(views[-1], list(arr.shape), t)
    tensors = [tensor(v, types[k]) for k, v in vs.items()]
    for k, t in enumerate(tensors):
        req.set_input_tensor(k, t)
    tensors.append(tensor(out, types[d]))
    req.set_output_tensor(tensors[-1])

    def call():
        req.infer()
    try:
        call()
    except Exception as e:
        raise NotAvailable(str(e).strip().splitlines()[0][:120]) from e
    call.keep = (tensors, views)
    return call, lambda: out


# (key, title, select row, nan_to_num row)
CONTENDERS = [
    ("numpy", "numpy", numpy_select, numpy_ntn),
    ("sj", "selectjit", selectjit_select(False), selectjit_ntn),
    ("sj-out", "selectjit out=", selectjit_select(True), None),
    ("jax", "JAX jit", jax_select, jax_ntn),
    ("numexpr", "numexpr 1t", numexpr_select, None),
    ("polars", "polars", polars_select, None),
    ("pyarrow", "pyarrow", pyarrow_select, None),
    ("ort", "ONNX Runtime", ort_select, None),
    ("openvino", "OpenVINO", openvino_select, None),
]
TITLES = {k: t for k, t, _, _ in CONTENDERS}
PEERS = ["jax", "numexpr", "polars", "pyarrow", "ort", "openvino"]


# ---------------------------------------------------------------- run

def rust_bench(exe, case, quick):
    """`selectjit bench` on this one n-way case (its JSON measurement: the Rust `select_n`
    call and the copy roofline of the traffic), or None without the binary."""
    if exe is None or not exe.is_file():
        return None
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        cases, empty, out = Path(d, "nway.json"), Path(d, "none.json"), Path(d, "out.json")
        cases.write_text(json.dumps({"cases": [case]}))
        empty.write_text(json.dumps({"cases": []}))
        cmd = [exe, "bench", "--cases", empty, "--fused-cases", empty, "--nway-cases", cases,
               "--json", out] + (["--quick"] if quick else [])
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"selectjit bench failed on {case['name']}:\n{r.stdout}{r.stderr}")
        return json.loads(out.read_text())["nway_cases"][0]


def run_case(case, opts):
    rust = rust_bench(opts.selectjit, case, opts.quick)
    tree = parse_select(case["expr"])
    vs = P.make_fused_inputs(case)
    rows = [("select", {k: sel for k, _, sel, _ in CONTENDERS},
             lambda: np.select([np_cond(c, vs) for c in tree[1]],
                               [vs[v] for v in tree[2]], vs[tree[3]]))]
    x = nan_to_num_of(tree, vs)
    if x is not None:
        rows.append(("nan_to_num", {k: ntn for k, _, _, ntn in CONTENDERS if ntn},
                     lambda: np.nan_to_num(vs[x])))
    out = []
    for form, fns, reference in rows:
        want_arr = reference()
        want = P.as_bytes(want_arr)
        row = {"case": case["name"], "form": form, "expr": case["expr"],
               "elements": int(want_arr.size), "dtype": P.dtype_name(want_arr), "peers": {},
               "rust": rust}
        runners = {}
        for k, _, _, _ in CONTENDERS:
            if k not in fns:
                continue
            try:
                call, output = fns[k](tree, vs)
                call()
            except NotAvailable as e:
                row["peers"][k] = {"status": "n/a", "reason": str(e)}
                continue
            got = np.asarray(output())
            if got.dtype != want_arr.dtype:
                nbad, what = 1, f"output dtype {got.dtype}, expected {want_arr.dtype}"
            elif got.shape != want_arr.shape:
                nbad, what = 1, f"output shape {got.shape}, expected {want_arr.shape}"
            else:
                nbad, what = P.differences(got, want, want_arr)
            if nbad:  # not exact: reported, not timed
                row["peers"][k] = {"status": "wrong", "reason": what}
                continue
            row["peers"][k] = {"status": "ok"}
            runners[k] = call
        stats = P.timeit_stats(list(runners.values()), opts.rounds, opts.min_batch_ns)
        for k, (best, med) in zip(runners, stats):
            row["peers"][k].update(ns=best, median_ns=med)
        del runners
        out.append(row)
        print(line(cells(row)), flush=True)
    return out


def ns(row, k):
    r = row["peers"].get(k)
    return r["ns"] if r and r["status"] == "ok" else None


def cells(row):
    """case, form, dtype, elements, the Rust call and the roofline, then per contender: µs and
    the ratio to selectjit's allocating call (peer / selectjit; for selectjit itself: its time
    / the Rust call's; for out=: allocating / out=)."""
    sj, npy = ns(row, "sj"), ns(row, "numpy")
    out = [row["case"], row["form"], row["dtype"], str(row["elements"])]
    rust = row.get("rust")
    out += ([f"{rust['nway_ns'] / 1e3:.2f}", f"{rust['roofline_ns'] / 1e3:.2f}"]
            if rust and row["form"] == "select" else ["", ""])
    for k, _, _, _ in CONTENDERS:
        t = ns(row, k)
        if t is None:
            mark = {"n/a": "n/a", "wrong": "inexact"}.get(
                row["peers"].get(k, {}).get("status"), "")
            out += [mark, ""]
            continue
        if k == "sj":
            ratio = t / rust["nway_ns"] if rust else None
        elif k == "sj-out":
            ratio = sj / t if sj else None
        else:
            ratio = t / sj if sj else None
        out += [f"{t / 1e3:.2f}", "" if ratio is None else f"{ratio:.2f}"]
    return out


HEADER = ["case", "form", "dtype", "elements", "Rust µs", "roofline µs", "numpy µs", "np/sj",
          "selectjit µs", "py/Rust", "sj out= µs", "alloc/out", "JAX µs", "jax/sj",
          "numexpr 1t µs", "ne/sj",
          "polars µs", "pl/sj", "pyarrow µs", "pa/sj", "ORT µs", "ORT/sj", "OpenVINO µs",
          "OV/sj"]
WIDTHS = [24, 10, 5, 9, 10, 11] + [11, 6] * 9


def line(cs):
    return " ".join(c.ljust(w) if k < 3 else c.rjust(w)
                    for k, (c, w) in enumerate(zip(cs, WIDTHS)))


def speedups(row):
    """numpy time / each contender's time (above 1: faster than numpy as written)."""
    npy = ns(row, "numpy")
    out = [row["case"], row["form"]]
    for k, _, _, _ in CONTENDERS[1:]:
        t = ns(row, k)
        out.append(f"{npy / t:.2f}" if t and npy else "")
    return out


def summaries(rows):
    out = {}
    for k in PEERS:
        ran = [r for r in rows if ns(r, k) is not None and ns(r, "sj") is not None]
        ratios = [ns(r, k) / ns(r, "sj") for r in ran]
        gm = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
        behind = [f"{r['case']} ({r['form']}): {TITLES[k]} {ns(r, k) / 1e3:.2f} µs, selectjit "
                  f"{ns(r, 'sj') / 1e3:.2f} µs" for r in ran if ns(r, k) < ns(r, "sj")]
        other = [f"{r['case']} ({r['form']}): "
                 f"{'n/a' if r['peers'][k]['status'] == 'n/a' else 'not exact'}, "
                 f"{r['peers'][k]['reason']}" for r in rows
                 if k in r["peers"] and r["peers"][k]["status"] != "ok"]
        out[k] = {"ran": len(ran), "geomean_ratio": gm, "selectjit_behind": behind,
                  "not_run": other,
                  "line": (f"{TITLES[k]}: selectjit faster on {len(ran) - len(behind)} of "
                           f"{len(ran)} rows it runs exactly; geometric mean "
                           f"{TITLES[k]}/selectjit time {gm:.2f}")}
    return out


def markdown(env, rows, summ, opts):
    md = ["# selectjit's n-way select and its peers, from Python", "",
          f"Measured {env['date']} on {env['cpu']}, {env['vcpus']} vCPU shared with other "
          f"work, single-threaded (every contender on one thread), {env['mode']} run "
          f"({opts.rounds} interleaved rounds, batches of at least {opts.min_batch_ns / 1e6:g} "
          f"ms, the best round). selectjit {env['selectjit']}; numpy {env['numpy']}, "
          f"onnxruntime {env['onnxruntime']}, openvino {env['openvino']}, "
          + "".join(f"{k} {v}, " for k, v in env["python_peers"].items())
          + f"Python {env['python']}.", ""]
    if opts.note:
        md += [opts.note, ""]
    args = []  # the command line as run, without where its JSON went
    for a in sys.argv[1:]:
        if args[-1:] == ["--json"]:
            args.pop()
        else:
            args.append(a)
    md += ["Generated by `" + shlex.join(["python3", "benches/peers_nway.py"] + args) + "`: every "
           "case of `benches/nway_cases.json`, `select([C1, C2, ...], [V1, V2, ...], D)`, "
           "the first true condition wins.", "",
           "| " + " | ".join(HEADER) + " |",
           "|---|---|---|" + "---:|" * (len(HEADER) - 3)]
    md += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    md += ["", "Times in µs per call, the best of the interleaved rounds; the median is in the "
           "JSON (`--json`). np/sj = numpy / selectjit; py/Rust = selectjit from Python / the Rust "
           "call (what the Python call adds: checks, conversions, allocation); alloc/out = "
           "selectjit allocating / "
           "`out=`; Rust = `selectjit bench` on the case (one `select_n` call from Rust on "
           "its own inputs, no allocation, the median of its rounds) and roofline = the "
           "fastest copy of the case's traffic (variables + output), a bound for any "
           "contender; every other ratio = peer / selectjit (allocating): above 1, selectjit is "
           "faster. n/a = the peer does not run the case; inexact = it runs it, but its "
           "output's bytes differ from numpy's (not timed); both with the reason below. "
           "Rows `select`: the case as `np.select`; rows `nan_to_num`: the same case as "
           "`np.nan_to_num(x)` (selectjit.nan_to_num, jnp.nan_to_num; the other peers have "
           "no nan_to_num and run it in the `select` row).", "",
           "### Speed-up over numpy as written (numpy time / contender time)", "",
           "| case | form | " + " | ".join(t for _, t, _, _ in CONTENDERS[1:]) + " |",
           "|---|---|" + "---:|" * (len(CONTENDERS) - 1)]
    md += ["| " + " | ".join(speedups(r)) + " |" for r in rows]
    md += ["", "### How each is called", "",
           "- numpy: `np.select([np.isnan(x), x == pinf, x == ninf], [zero, big, small], x)` "
           "(each condition by numpy's ufuncs, then np.select; both allocate), and "
           "`np.nan_to_num(x)`. The reference: every output is compared with numpy's bytes "
           "before it is timed.",
           "- selectjit: `selectjit.select([selectjit.isnan(x), selectjit.equal(x, pinf), "
           "...], [zero, big, small], x)` with the lazy predicates made in every call (bool "
           "masks passed as arrays), allocating its output, and the same with `out=` into a "
           "preallocated array; `selectjit.nan_to_num(x)`. The process engine, with "
           "`SELECTJIT_PARALLEL_MIN_BYTES` set above every case so that no call is split "
           "across threads.",
           "- JAX: `jax.jit` of `jnp.select(conds, values, default)` / `jnp.nan_to_num(x)` "
           "on the CPU, x64 enabled, array operands on the device beforehand, scalars as "
           "constants, `block_until_ready`; one thread (its CPU client made while the process "
           "may run on one CPU, XLA_FLAGS without Eigen's pool).",
           "- numexpr: `ne.evaluate('where(c1, v1, where(c2, v2, d))')`, one thread (isnan(x) "
           "as `x != x`: numexpr has no isnan).",
           "- polars: `df.select(pl.when(c1).then(v1).when(c2).then(v2).otherwise(d))` on a "
           "DataFrame of the array operands (flattened where every operand is a scalar or of "
           "the output's shape), scalars as typed literals; POLARS_MAX_THREADS=1.",
           "- pyarrow: `pc.case_when(pc.make_struct(c1, c2, ...), v1, v2, ..., d)` on Arrow "
           "arrays (flattened likewise), conditions by `pc.is_nan` / `pc.equal` / ..., "
           "scalars as typed `pa.scalar`s; `pa.set_cpu_count(1)`.",
           "- ONNX Runtime / OpenVINO: a graph of the condition nodes (IsNaN, Equal, Less, "
           "...) and a chain of Where / Select nodes, the last branch over the default first "
           "(torch's ONNX export of nan_to_num is such a chain), one intra-op / inference "
           "thread, inputs and output bound to preallocated buffers (so they do not allocate "
           "their output, unlike every other column).", "", "## Summary", ""]
    sj_rows = [r for r in rows if ns(r, "sj") and ns(r, "numpy")]
    for r in sj_rows:
        md.append(f"- {r['case']} ({r['form']}): selectjit {ns(r, 'sj') / 1e3:.2f} µs, numpy "
                  f"{ns(r, 'numpy') / 1e3:.2f} µs: {ns(r, 'numpy') / ns(r, 'sj'):.2f}x.")
    md.append("")
    for s in summ.values():
        md.append(f"- {s['line']}.")
        md += [f"  - selectjit behind: {x}" for x in s["selectjit_behind"]]
        md += [f"  - {x}" for x in s["not_run"]]
    return "\n".join(md) + "\n"


def environment(opts):
    import datetime
    import platform
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), platform.processor())
    versions = P.package_versions(["selectjit", "numexpr", "polars", "pyarrow", "jax",
                                   "jaxlib"])
    return {"date": datetime.date.today().isoformat(), "cpu": cpu, "vcpus": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__,
            "selectjit": versions.pop("selectjit", "(not installed)"),
            "onnxruntime": P.ort.__version__ if P.ort else "(not installed)",
            "openvino": P.ov.__version__.split("-")[0] if P.ov else "(not installed)",
            "python_peers": versions, "mode": "quick" if opts.quick else "full"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 rounds of 1 ms batches")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--cases", default=ROOT / "benches" / "nway_cases.json", type=Path)
    ap.add_argument("--selectjit", default=ROOT / "target" / "release" / "selectjit",
                    type=Path, help="the selectjit binary for the Rust columns (cargo build "
                    "--release; without it they are empty)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--markdown", type=Path, help="write the tables here")
    ap.add_argument("--note", default="", help="a line for the markdown (e.g. machine load)")
    opts = ap.parse_args()
    P.THREADS = "1"
    P.limit_threads("1")
    # selectjit's process engine splits no call of fewer bytes than this across threads.
    os.environ["SELECTJIT_PARALLEL_MIN_BYTES"] = str(1 << 50)
    opts.rounds, opts.min_batch_ns = (5, 1e6) if opts.quick else (15, 4e6)
    cases = [c for c in json.loads(opts.cases.read_text())["cases"] if opts.filter in c["name"]]
    skip = [c["name"] for c in cases
            if any(v["dtype"] not in P.HAVE_DTYPES for v in c["vars"].values())]
    if skip:
        print(f"left out (no numpy dtype without ml_dtypes): {', '.join(skip)}")
        cases = [c for c in cases if c["name"] not in skip]
    if not cases:
        sys.exit(f"no case matches '{opts.filter}'")
    env = environment(opts)
    print(line(HEADER))
    rows = []
    for case in cases:
        rows += run_case(case, opts)
    summ = summaries(rows)
    for s in summ.values():
        print(s["line"])
        for x in s["selectjit_behind"]:
            print(f"  selectjit behind: {x}")
        for x in s["not_run"]:
            print(f"  {x}")
    if opts.json:
        opts.json.write_text(json.dumps({"environment": env, "rows": rows, "summary": summ},
                                        indent=1, default=str))
    if opts.markdown:
        opts.markdown.write_text(markdown(env, rows, summ, opts))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""tract alone against tract + selectjit, one thread, with `selectjit-onnx --bench`: the time of
the select node (tract's `Iff` / `SelectjitIff`), of the comparison node feeding it, and of the
whole model, on the attention-mask cases of benches/cases.json, the masked-fill, causal and relu
cases of the fused-predicate bench cases (whose comparison stays a tract node today), and a
masked self-attention block.

    python bench/bench_tract.py [--bin target/release/selectjit-onnx] [--runs 20] [--rounds 3]
                                [--warmup 25]
                                [--cases benches/cases.json] [--fused-cases FILE] [--quick]

Needs numpy and onnx (ci.sh's venv has them). Both runs of a case are checked to give bitwise
equal outputs before their times count. Rounds alternate tract alone and tract + selectjit;
each round is one `--bench RUNS` invocation per mode: tract alone, tract + selectjit with inputs
the model owns (a select may write into its `then` / `else`, as into a tensor a previous node
computed), and tract + selectjit with inputs the caller keeps (`--shared-inputs`: the select
allocates its output, as tract's `Iff` always does). The table gives the median over rounds of
each invocation's medians, and ratios of those medians. Prints a Markdown table.
"""

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[3]
ONNX_TYPE = {np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.float32): TensorProto.FLOAT,
             np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.int64): TensorProto.INT64,
             np.dtype(np.int32): TensorProto.INT32}
DTYPES = {"f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32}
# The fused-predicate bench cases this bench runs (shapes and fills as in the shared
# fused_cases.json; --fused-cases reads them from that file instead).
FUSED = {
    "masked_fill_bert_f32": {
        "expr": "where(mask == zero, neg_inf, scores)",
        "vars": {"mask": {"dtype": "i64", "shape": [8, 1, 1, 384], "fill": "mask01"},
                 "zero": {"dtype": "i64", "shape": [], "value": 0},
                 "neg_inf": {"dtype": "f32", "shape": [], "value": "-inf"},
                 "scores": {"dtype": "f32", "shape": [8, 12, 384, 384], "fill": "normal"}}},
    "causal_from_positions_f16": {
        "expr": "where(k > q, neg_inf, scores)",
        "vars": {"k": {"dtype": "i32", "shape": [1, 1, 1, 512], "fill": "iota"},
                 "q": {"dtype": "i32", "shape": [1, 1, 512, 1], "fill": "iota"},
                 "neg_inf": {"dtype": "f16", "shape": [], "value": "-inf"},
                 "scores": {"dtype": "f16", "shape": [2, 12, 512, 512], "fill": "normal"}}},
    "relu_f32_16m": {
        "expr": "where(x > zero, x, zero)",
        "vars": {"x": {"dtype": "f32", "shape": [16777216], "fill": "normal"},
                 "zero": {"dtype": "f32", "shape": [], "value": 0.0}}},
}
OPS = {">": "Greater", "<": "Less", "==": "Equal", ">=": "GreaterOrEqual", "<=": "LessOrEqual"}


def vi(name, dt, shape):
    return helper.make_tensor_value_info(name, ONNX_TYPE[np.dtype(dt)], shape)


def save(path, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def where_case(case, work, rng):
    """A case of cases.json: Where over graph inputs, cond random or causal."""
    dt = DTYPES[case["dtype"]]
    cs, ts, es = (tuple(case[k]) for k in ("cond", "then", "else"))
    if case["cond_fill"] == "causal":
        c = np.ascontiguousarray(np.broadcast_to(np.tril(np.ones(cs[-2:], bool)), cs))
    else:
        c = rng.random(cs) < 0.5
    inputs = {"c": c, "t": rng.standard_normal(ts).astype(dt),
              "e": rng.standard_normal(es).astype(dt)}
    path = work / f"{case['name']}.onnx"
    save(path, [helper.make_node("Where", ["c", "t", "e"], ["out"], name="where")],
         [vi(n, v.dtype, v.shape) for n, v in inputs.items()], [vi("out", dt, None)])
    return path, inputs


def fill(var, rng):
    dt = DTYPES[var["dtype"]]
    shape = tuple(var["shape"])
    if "value" in var:
        return np.array(float(var["value"]) if dt in (np.float16, np.float32) else var["value"],
                        dtype=dt)
    kind = var["fill"]
    if kind == "normal":
        return rng.standard_normal(shape).astype(dt)
    if kind == "iota":
        return np.arange(int(np.prod(shape)), dtype=dt).reshape(shape)
    if kind == "mask01":
        v = np.ones(shape, dtype=dt).reshape(-1, shape[-1])
        for row in v:
            row[shape[-1] - int(rng.integers(0, shape[-1] * 0.3)):] = 0
        return v.reshape(shape)
    raise ValueError(kind)


def fused_case(name, case, work, rng):
    """A fused-predicate case: Compare -> Where; scalars are initializers."""
    m = re.fullmatch(r"where\((\w+) (\S+) (\w+), (\w+), (\w+)\)", case["expr"])
    lhs, op, rhs, then, els = m.groups()
    vals = {n: fill(v, rng) for n, v in case["vars"].items()}
    inputs = {n: v for n, v in vals.items() if v.ndim > 0}
    inits = [numpy_helper.from_array(v, n) for n, v in vals.items() if v.ndim == 0]
    out_dt = vals[then].dtype
    path = work / f"{name}.onnx"
    save(path, [helper.make_node(OPS[op], [lhs, rhs], ["c"], name="cmp"),
                helper.make_node("Where", ["c", then, els], ["out"], name="where")],
         [vi(n, v.dtype, v.shape) for n, v in inputs.items()], [vi("out", out_dt, None)], inits)
    return path, inputs


def attention_case(b, h, s, d, work, rng):
    """MatMul -> scale -> Where(mask == 0, -inf, .) -> Softmax -> MatMul, sequence length S
    symbolic in the graph."""
    inits = [numpy_helper.from_array(np.array(d ** -0.5, np.float32), "scale"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf")]
    path = work / f"attention_{b}x{h}x{s}x{d}.onnx"
    qkv = lambda n: vi(n, np.float32, [b, h, "S", d])
    save(path, [
        helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        helper.make_node("Mul", ["scores", "scale"], ["scaled"], name="scale_mul"),
        helper.make_node("Equal", ["mask", "zero"], ["c"], name="cmp"),
        helper.make_node("Where", ["c", "ninf", "scaled"], ["masked"], name="where"),
        helper.make_node("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["out"], name="pv"),
    ], [qkv("q"), qkv("k"), qkv("v"), vi("mask", np.int64, [b, 1, 1, "S"])],
        [vi("out", np.float32, None)], inits)
    inputs = {n: rng.standard_normal((b, h, s, d)).astype(np.float32) for n in "qkv"}
    inputs["mask"] = fill({"dtype": "i64", "shape": [b, 1, 1, s], "fill": "mask01"}, rng)
    return path, inputs


# glibc keeping freed memory for the next allocation instead of unmapping it: no page faults on
# the outputs of later runs.
REUSE = {"MALLOC_MMAP_THRESHOLD_": str(2**32), "MALLOC_TRIM_THRESHOLD_": str(2**32)}
MODES = {
    "tract": (["--no-selectjit"], {}),
    "selectjit": ([], {}),
    "allocating": (["--shared-inputs"], {}),
    "tract reuse": (["--no-selectjit", "--shared-inputs"], REUSE),
    "allocating reuse": (["--shared-inputs"], REUSE),
    "selectjit reuse": ([], REUSE),
}


def run(binary, model, inputs, work, runs, warmup, mode):
    out = work / mode.replace(" ", "_")
    flags, env = MODES[mode]
    args = [binary, str(model), "--out", str(out), "--bench", str(runs), "--threads", "1",
            "--warmup", str(warmup), *flags]
    for n in inputs:
        args += ["--input", f"{n}={work / (n + '.npy')}"]
    r = subprocess.run(args, capture_output=True, text=True, check=True,
                       env={**os.environ, **env})
    whole = float(re.search(r"^median_us: (\S+)$", r.stdout, re.M).group(1))
    nodes = {}
    for m in re.finditer(r"^node_median_us: (\S+) (\S+) (\S+)$", r.stdout, re.M):
        nodes[m.group(2)] = float(m.group(1))
    replaced = re.search(r"^replaced: .*$", r.stdout, re.M).group(0)
    return whole, nodes, replaced, {p.name: p.read_bytes() for p in out.glob("*.npy")}


def bench(binary, name, model, inputs, work, runs, warmup, rounds):
    for n, v in inputs.items():
        np.save(work / f"{n}.npy", v)
    rows = {m: [] for m in MODES}
    outs = {}
    for _ in range(rounds):
        for mode in MODES:
            whole, nodes, replaced, files = run(binary, model, inputs, work, runs, warmup, mode)
            rows[mode].append((whole, nodes.get("where"), nodes.get("cmp")))
            outs[mode] = files
            if mode == "selectjit":
                rep = replaced
    assert all(o == outs["tract"] for o in outs.values()), f"{name}: outputs differ"

    def med(mode, i):
        return statistics.median(r[i] for r in rows[mode]) if rows[mode][0][i] else None

    return {k: {m: med(m, i) for m in MODES} for i, k in enumerate(["whole", "where", "cmp"])}, rep


def fmt(us):
    return "–" if us is None else (f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "selectjit-onnx"))
    ap.add_argument("--cases", default=str(ROOT / "benches" / "cases.json"))
    ap.add_argument("--fused-cases", help="the fused-predicate cases file (default: built in)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=25, help="untimed runs first (see --bench)")
    ap.add_argument("--quick", action="store_true", help="2 runs, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.rounds, args.warmup = 2, 1, 2
    cases = {c["name"]: c for c in json.loads(Path(args.cases).read_text())["cases"]}
    fused = FUSED
    if args.fused_cases:
        all_fused = {c["name"]: c for c in json.loads(Path(args.fused_cases).read_text())["cases"]}
        fused = {n: all_fused[n] for n in FUSED}
    rng = np.random.default_rng(24)
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    print(f"{cpu}; one thread; {args.warmup} untimed and {args.runs} timed runs per "
          f"invocation, {args.rounds} rounds; median over rounds of each invocation's median\n")
    nodes, wholes = [], []
    todo = [(n, lambda n=n, w=None: where_case(cases[n], w, rng))
            for n in ["bert_pad_mask_f32", "attn_causal_mask_f32", "attn_causal_mask_f16"]]
    todo += [(n, lambda n=n, w=None: fused_case(n, fused[n], w, rng)) for n in fused]
    todo += [(f"attention block 8x12x{s}x64",
              lambda s=s, w=None: attention_case(8, 12, s, 64, w, rng)) for s in (128, 384)]
    for name, make in todo:
        with tempfile.TemporaryDirectory() as w:
            w = Path(w)
            model, inputs = make(w=w)
            t, rep = bench(args.bin, name, model, inputs, w, args.runs, args.warmup, args.rounds)
            w, h = t["where"], t["whole"]
            x = lambda a, b: f"{a / b:.1f}"
            nodes.append(
                f"| {name} | {fmt(w['tract'])} | {fmt(w['selectjit'])} | "
                f"{x(w['tract'], w['selectjit'])} | {fmt(w['allocating'])} | "
                f"{x(w['tract'], w['allocating'])} | {fmt(w['tract reuse'])} | "
                f"{fmt(w['allocating reuse'])} | {x(w['tract reuse'], w['allocating reuse'])} | "
                f"{fmt(t['cmp']['selectjit'])} |")
            wholes.append(f"| {name} | {rep} | {fmt(h['tract'])} | {fmt(h['selectjit'])} | "
                          f"{x(h['tract'], h['selectjit'])} | {fmt(h['tract reuse'])} | "
                          f"{fmt(h['selectjit reuse'])} | "
                          f"{x(h['tract reuse'], h['selectjit reuse'])} |")
            print(nodes[-1], "\n" + wholes[-1], file=sys.stderr, flush=True)
    print("\nThe select node: tract's `Iff` against `SelectjitIff` writing into the `then` / `else` "
          "it owns (in place), allocating its output, and both allocating with glibc keeping "
          "freed memory (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`: no page faults on "
          "fresh outputs); the comparison node feeding it (a tract node in both).\n")
    print("| case | `Iff` | in place | × | allocating | × | `Iff`, memory reused | allocating, "
          "memory reused | × | compare node |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(nodes))
    print("\nThe whole model (`median_us`), inputs owned by the model; then both with glibc "
          "keeping freed memory.\n")
    print("| case | report | tract | + selectjit | × | tract, memory reused | + selectjit, "
          "memory reused | × |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(wholes))


if __name__ == "__main__":
    main()

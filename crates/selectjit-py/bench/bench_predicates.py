"""A fused predicate against numpy and numexpr: ReLU, `selectjit.where(selectjit.greater(x, 0),
x, 0)`, on float32 arrays (1M elements by default), against `numpy.where(x > 0, x, 0)` and
numexpr's `where(x > 0, x, 0)` (one thread, then numexpr's default threads), plus selectjit
with `out=` (a preallocated output) and in place (`out=x`, numpy's `np.maximum(x, 0, out=x)`
beside it for reference, though it differs from `where` on NaN and -0.0).

    python bench/bench_predicates.py [--n 1048576] [--rounds 7] [--threads 1]
    python bench/bench_predicates.py --cases [FUSED_CASES.json] [--case NAME ...] [--rounds 7]

With `--cases`: the project's shared fused-predicate cases (default `benches/fused_cases.json`
of the repository): per case numpy evaluating the expression with its ufuncs, selectjit with
the predicate fused, selectjit on numpy's mask, and numexpr on one thread where it keeps the
dtypes, each checked bytewise against numpy first.

Every output is checked bytewise against numpy's before anything is timed. Each round times
every contender one after the other (interleaved, so a noisy neighbour hits all alike); the
table gives the median of the rounds, and the ratios the median and range of the per-round
ratios against selectjit. One run: the figures are those of this run only.
"""

import argparse
import json
import os
import pathlib
import platform
import re
import statistics
import timeit
import zlib

import numpy as np

import selectjit

try:
    import numexpr
except ImportError:  # optional
    numexpr = None


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def best_of(f, number):
    return min(timeit.repeat(f, number=number, repeat=3)) / number


ROOT = pathlib.Path(__file__).resolve().parents[3]
DEFAULT_CASES = ROOT / "benches" / "fused_cases.json"
OPS = {">": "greater", ">=": "greater_equal", "<": "less", "<=": "less_equal", "==": "equal",
       "!=": "not_equal"}
NUMEXPR_DTYPES = {"f32", "f64", "i32", "i64", "bool"}


def case_dtype(name):
    if name == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"f16": "f2", "f32": "f4", "f64": "f8", "i8": "i1", "i16": "i2",
                     "i32": "i4", "i64": "i8", "u8": "u1", "u16": "u2", "u32": "u4",
                     "u64": "u8", "bool": "?", "c64": "c8", "c128": "c16"}[name])


def case_vars(case):
    """The case's variables, drawn in file order from one generator seeded with the CRC-32 of
    its name (the fills of the case file's `about`)."""
    rng = np.random.default_rng(zlib.crc32(case["name"].encode()))
    out = {}
    for name, v in case["vars"].items():
        dt = case_dtype(v["dtype"])
        shape = tuple(v["shape"])
        if "value" in v:
            out[name] = np.array(float(v["value"]) if isinstance(v["value"], str) else v["value"]
                                 ).astype(dt)
            continue
        fill = v["fill"]
        if fill == "normal":
            a = rng.standard_normal(shape)
        elif fill == "uniform":
            a = rng.random(shape)
        elif fill == "nan10":
            a = rng.standard_normal(shape)
            u = rng.random(shape)
            a[u < 0.10] = np.nan
            a[(u >= 0.10) & (u < 0.11)] = np.inf
            a[(u >= 0.11) & (u < 0.12)] = -np.inf
            a[(u >= 0.12) & (u < 0.13)] = -0.0
        elif fill == "mask01":
            a = np.ones(shape)
            last = shape[-1]
            rows = a.reshape(-1, last)
            pads = rng.integers(0, int(0.3 * last) + 1, rows.shape[0])
            for r, p in zip(rows, pads):
                if p:
                    r[last - p:] = 0
        elif fill == "iota":
            a = np.arange(int(np.prod(shape))).reshape(shape)
        elif fill == "bytes":
            out[name] = rng.integers(0, 256, int(np.prod(shape)) * dt.itemsize,
                                     dtype=np.uint8).view(dt).reshape(shape)
            continue
        else:
            raise ValueError(f"unknown fill {fill!r}")
        out[name] = a.astype(dt)
    return out


def parse(expr):
    """`where(COND, A, B)` as (cond, a, b); COND as ("cmp", op, l, r), ("test", fn, v) or
    ("not", COND)."""
    expr = expr.replace(" ", "")

    def split_args(s):
        depth, parts, cur = 0, [], ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "("
            depth -= ch == ")"
            cur += ch
        return parts + [cur]

    def cond(s):
        m = re.fullmatch(r"(isnan|isinf|isfinite|logical_not)\((.*)\)", s)
        if m and m.group(1) == "logical_not":
            return ("not", cond(m.group(2)))
        if m:
            return ("test", m.group(1), m.group(2))
        m = re.fullmatch(r"(\w+)(>=|<=|==|!=|>|<)(\w+)", s)
        if not m:
            raise ValueError(f"cannot parse condition {s!r}")
        return ("cmp", OPS[m.group(2)], m.group(1), m.group(3))

    m = re.fullmatch(r"where\((.*)\)", expr)
    c, a, b = split_args(m.group(1))
    return cond(c), a, b


def build_cond(c, env, ns):
    """The condition with the functions of namespace `ns` (numpy or selectjit)."""
    if c[0] == "cmp":
        return getattr(ns, c[1])(env[c[2]], env[c[3]])
    if c[0] == "test":
        return getattr(ns, c[1])(env[c[2]])
    return ns.logical_not(build_cond(c[1], env, ns))


def run_cases(args):
    path = pathlib.Path(args.cases)
    cases = json.loads(path.read_text())["cases"]
    if args.case:
        cases = [c for c in cases if c["name"] in args.case]
    engine = selectjit.Engine(threads=args.threads)
    if numexpr is not None:
        numexpr.set_num_threads(1)
    print(f"{path.name}: {len(cases)} cases; {args.rounds} interleaved rounds; selectjit tier "
          f"{engine.tier}, threads {engine.threads}; numexpr 1 thread")
    print(f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); numpy {np.__version__}"
          + (f", numexpr {numexpr.__version__}" if numexpr else ", numexpr not installed"))
    print()
    print("| case | elements | numpy µs | selectjit fused µs | selectjit on numpy's mask µs "
          "| numexpr µs | numpy / fused | mask path / fused |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for case in cases:
        env = case_vars(case)
        c, a, b = parse(case["expr"])
        xa, xb = env[a], env[b]
        want = np.where(build_cond(c, env, np), xa, xb)
        got = engine.where(build_cond(c, env, selectjit), xa, xb)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), case["name"]
        contenders = {
            "numpy": lambda: np.where(build_cond(c, env, np), xa, xb),
            "fused": lambda: engine.where(build_cond(c, env, selectjit), xa, xb),
            "mask": lambda: engine.where(build_cond(c, env, np), xa, xb),
        }
        ne_ok = numexpr is not None and all(v["dtype"] in NUMEXPR_DTYPES
                                            for v in case["vars"].values())
        if ne_ok:
            ne_env = {k: (v[()] if v.ndim == 0 else v) for k, v in env.items()}
            r = numexpr.evaluate(case["expr"], local_dict=ne_env)
            if r.dtype == want.dtype and r.tobytes() == want.tobytes():
                contenders["numexpr"] = lambda: numexpr.evaluate(case["expr"], local_dict=ne_env)
        number = max(1, int(0.05 / max(best_of(contenders["numpy"], 1), 1e-7)))
        times = {k: [] for k in contenders}
        for _ in range(args.rounds):
            for k, f in contenders.items():
                times[k].append(best_of(f, number))
        med = {k: statistics.median(t) * 1e6 for k, t in times.items()}
        r_np = statistics.median(a / b for a, b in zip(times["numpy"], times["fused"]))
        r_mask = statistics.median(a / b for a, b in zip(times["mask"], times["fused"]))
        ratios.append(r_np)
        ne = f"{med['numexpr']:.1f}" if "numexpr" in med else "n/a"
        print(f"| {case['name']} | {want.size} | {med['numpy']:.1f} | {med['fused']:.1f} | "
              f"{med['mask']:.1f} | {ne} | {r_np:.2f} | {r_mask:.2f} |")
    gm = float(np.exp(np.mean(np.log(ratios))))
    print()
    print(f"geometric mean of numpy / fused selectjit: {gm:.2f} over {len(ratios)} cases")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of selectjit's engine (default 1, as numpy)")
    ap.add_argument("--cases", nargs="?", const=str(DEFAULT_CASES), default=None,
                    help="run the fused-predicate case file instead of the ReLU")
    ap.add_argument("--case", action="append", help="only these cases (repeatable)")
    args = ap.parse_args()
    if args.cases is not None:
        return run_cases(args)

    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.n).astype(np.float32)
    x[::97] = np.nan
    x[1::89] = -0.0
    engine = selectjit.Engine(threads=args.threads)
    out = np.empty_like(x)
    scratch = x.copy()

    want = np.where(x > 0, x, 0)
    checks = {"selectjit": engine.where(selectjit.greater(x, 0), x, 0),
              "selectjit out=": engine.where(selectjit.greater(x, 0), x, 0, out=out)}
    y = x.copy()
    engine.where(selectjit.greater(y, 0), y, 0, out=y)
    checks["selectjit in place"] = y
    contenders = {
        "numpy.where(x > 0, x, 0)": lambda: np.where(x > 0, x, 0),
        "selectjit": lambda: engine.where(selectjit.greater(x, 0), x, 0),
        "selectjit out=": lambda: engine.where(selectjit.greater(x, 0), x, 0, out=out),
        # In place on a scratch copy (its values stay the ReLU of x after the first call, so
        # every call does the same work).
        "selectjit in place": lambda: engine.where(selectjit.greater(scratch, 0), scratch, 0,
                                                   out=scratch),
        "selectjit.where(x > 0, x, 0)": lambda: engine.where(x > 0, x, 0),
    }
    if numexpr is not None:
        checks["numexpr"] = numexpr.evaluate("where(x > 0, x, 0)", local_dict={"x": x})
        default_threads = numexpr.get_num_threads()

        def ne(threads):
            def run():
                numexpr.set_num_threads(threads)
                return numexpr.evaluate("where(x > 0, x, 0)", local_dict={"x": x})
            return run

        contenders["numexpr, 1 thread"] = ne(1)
        contenders[f"numexpr, {default_threads} threads (default)"] = ne(default_threads)
    for name, got in checks.items():
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name

    number = max(1, int(0.05 / max(best_of(contenders["numpy.where(x > 0, x, 0)"], 3), 1e-7)))
    times = {k: [] for k in contenders}
    for _ in range(args.rounds):
        for k, f in contenders.items():
            times[k].append(best_of(f, number))
    base = times["selectjit"]

    print(f"ReLU on {args.n} float32 elements; {args.rounds} interleaved rounds; "
          f"selectjit engine tier {engine.tier}, threads {engine.threads}")
    print(f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); numpy {np.__version__}"
          + (f", numexpr {numexpr.__version__}" if numexpr else ", numexpr not installed"))
    print()
    print("| contender | median µs | time / selectjit's (median, range) |")
    print("|---|---:|---:|")
    for k, t in times.items():
        r = [a / b for a, b in zip(t, base)]
        print(f"| {k} | {statistics.median(t) * 1e6:.1f} | "
              f"{statistics.median(r):.2f} ({min(r):.2f}–{max(r):.2f}) |")
    r = [a / b for a, b in zip(times["numpy.where(x > 0, x, 0)"], base)]
    print()
    print(f"numpy.where(x > 0, x, 0) / selectjit.where(greater(x, 0), x, 0): "
          f"{statistics.median(r):.2f}x (target >= 5x)")


if __name__ == "__main__":
    main()

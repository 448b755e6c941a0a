#!/usr/bin/env python3
"""Lists the public API of the `selectjit` library from rustdoc's JSON output, one item per
line (kind, path, and for functions their signature), sorted: what a dependent can name.

Items marked #[doc(hidden)] (the `unstable` module of the workspace's own crates) are left out,
as are trait implementations of standard traits (Debug, Clone, ...): their presence is visible
in the type's derive list in the docs, and they are not part of what this listing reviews.

Usage: public_api.py TARGET/doc/selectjit.json [--check LISTING] [--write LISTING]
           [--missing-examples]
"""
import argparse
import json
import sys


def render_type(t):
    """A compact rendering of a rustdoc JSON type."""
    if t is None:
        return "()"
    if not isinstance(t, dict):
        return str(t)
    (kind, v), = t.items()
    if kind == "primitive":
        return v
    if kind == "generic":
        return v
    if kind == "resolved_path":
        name = v.get("path") or v.get("name", "?")
        args = render_args(v.get("args"))
        return f"{name}{args}"
    if kind == "borrowed_ref":
        lt = v.get("lifetime")
        mut = "mut " if v.get("is_mutable") or v.get("mutable") else ""
        lts = f"{lt} " if lt else ""
        return f"&{lts}{mut}{render_type(v.get('type'))}"
    if kind == "raw_pointer":
        mut = "mut" if v.get("is_mutable") or v.get("mutable") else "const"
        return f"*{mut} {render_type(v.get('type'))}"
    if kind == "slice":
        return f"[{render_type(v)}]"
    if kind == "array":
        return f"[{render_type(v.get('type'))}; {v.get('len')}]"
    if kind == "tuple":
        return "(" + ", ".join(render_type(x) for x in v) + ")"
    if kind == "impl_trait":
        return "impl " + " + ".join(render_bound(b) for b in v)
    if kind == "dyn_trait":
        traits = [render_path(p.get("trait")) for p in v.get("traits", [])]
        return "dyn " + " + ".join(traits)
    if kind == "qualified_path":
        return f"<{render_type(v.get('self_type'))}>::{v.get('name')}"
    if kind == "function_pointer":
        return "fn(..)"
    return kind


def render_path(p):
    if not p:
        return "?"
    return (p.get("path") or p.get("name", "?")) + render_args(p.get("args"))


def render_args(a):
    if not a or "angle_bracketed" not in a:
        return ""
    ab = a["angle_bracketed"]
    parts = []
    for g in ab.get("args", []):
        if "type" in g:
            parts.append(render_type(g["type"]))
        elif "lifetime" in g:
            parts.append(g["lifetime"])
        elif "const" in g:
            parts.append(str(g["const"].get("expr", "_")))
    for c in ab.get("constraints", ab.get("bindings", [])):
        binding = c.get("binding", {})
        if "equality" in binding:
            eq = binding["equality"]
            parts.append(f"{c.get('name')} = {render_type(eq.get('type', eq))}")
    return "<" + ", ".join(parts) + ">" if parts else ""


def render_bound(b):
    if "trait_bound" in b:
        return render_path(b["trait_bound"].get("trait"))
    if "outlives" in b:
        return b["outlives"]
    return "?"


def signature(item):
    f = item["inner"]["function"]
    sig = f.get("sig") or f.get("decl")
    header = f.get("header", {})
    prefix = ""
    if header.get("is_unsafe") or header.get("unsafe"):
        prefix += "unsafe "
    if header.get("is_const") or header.get("const"):
        prefix += "const "
    params = []
    generics = f.get("generics", {}).get("params", [])
    gen = [g["name"] for g in generics if "type" in g.get("kind", {}) and
           not g["kind"]["type"].get("is_synthetic", g["kind"]["type"].get("synthetic", False))]
    for name, ty in sig.get("inputs", []):
        if name == "self":
            # `self`, `&self`, `&mut self`
            params.append(render_type(ty).replace("Self", "self") if ty != {"generic": "Self"}
                          else "self")
        else:
            params.append(f"{name}: {render_type(ty)}")
    out = sig.get("output")
    ret = f" -> {render_type(out)}" if out is not None else ""
    g = f"<{', '.join(gen)}>" if gen else ""
    return f"{prefix}fn{g}({', '.join(params)}){ret}"


def is_hidden(item):
    attrs = item.get("attrs", [])
    for a in attrs:
        text = a if isinstance(a, str) else json.dumps(a)
        if "hidden" in text and "doc" in text:
            return True
    return False


def walk(krate):
    index = krate["index"]
    root = index[str(krate["root"])]
    lines = []
    missing = []

    def visit(item_id, path, seen):
        item = index.get(str(item_id))
        if item is None or item_id in seen:
            return
        seen = seen | {item_id}
        if is_hidden(item) or item.get("visibility") not in ("public", "default"):
            return
        inner = item["inner"]
        (kind, body), = inner.items()
        name = item.get("name")
        if kind == "use":
            target = body.get("id")
            if target is None:
                return
            tgt = index.get(str(target))
            if tgt is None:
                return
            alias = body.get("name") or tgt.get("name")
            if body.get("is_glob") or body.get("glob"):
                (tk, tb), = tgt["inner"].items()
                for c in tb.get("items", []):
                    visit(c, path, seen)
                return
            visit_named(target, path + [alias], seen)
            return
        visit_named(item_id, path + ([name] if name else []), seen)

    def visit_named(item_id, path, seen):
        item = index.get(str(item_id))
        if item is None or is_hidden(item):
            return
        (kind, body), = item["inner"].items()
        p = "::".join(path)
        if kind == "module":
            lines.append(f"mod {p}")
            for c in body.get("items", []):
                visit(c, path, seen | {item_id})
        elif kind in ("struct", "enum", "union", "trait", "type_alias", "constant", "static",
                      "macro"):
            lines.append(f"{kind} {p}")
            if kind == "enum":
                for v in body.get("variants", []):
                    vi = index.get(str(v))
                    if vi:
                        lines.append(f"variant {p}::{vi['name']}")
            if kind == "struct":
                fields = body.get("kind", {}).get("plain", {}).get("fields", [])
                for fid in fields:
                    fi = index.get(str(fid))
                    if fi and fi.get("visibility") == "public" and not is_hidden(fi):
                        ty = render_type(fi["inner"]["struct_field"])
                        lines.append(f"field {p}::{fi['name']}: {ty}")
            if kind == "trait":
                for m in body.get("items", []):
                    mi = index.get(str(m))
                    if mi and "function" in mi["inner"]:
                        lines.append(f"trait-fn {p}::{mi['name']} {signature(mi)}")
            for impl_id in body.get("impls", []):
                impl = index.get(str(impl_id))
                if impl is None:
                    continue
                ib = impl["inner"]["impl"]
                if ib.get("trait") is not None or ib.get("is_synthetic") or ib.get("synthetic"):
                    continue
                for m in ib.get("items", []):
                    mi = index.get(str(m))
                    if mi is None or is_hidden(mi) or mi.get("visibility") != "public":
                        continue
                    if "function" in mi["inner"]:
                        lines.append(f"fn {p}::{mi['name']} {signature(mi)}")
                        if "```" not in (mi.get("docs") or ""):
                            missing.append(f"{p}::{mi['name']}")
                    elif "assoc_const" in mi["inner"] or "constant" in mi["inner"]:
                        lines.append(f"const {p}::{mi['name']}")
        elif kind == "function":
            lines.append(f"fn {p} {signature(item)}")
            if "```" not in (item.get("docs") or ""):
                missing.append(p)
        else:
            lines.append(f"{kind} {p}")

    for c in root["inner"]["module"]["items"]:
        visit(c, ["selectjit"], frozenset())
    return sorted(set(lines)), sorted(set(missing))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--check")
    ap.add_argument("--write")
    ap.add_argument("--missing-examples", action="store_true")
    a = ap.parse_args()
    with open(a.json) as f:
        krate = json.load(f)
    lines, missing = walk(krate)
    text = "".join(line + "\n" for line in lines)
    if a.missing_examples:
        for m in missing:
            print(f"no example: {m}")
        return 1 if missing else 0
    if a.write:
        with open(a.write, "w") as f:
            f.write(text)
        print(f"{len(lines)} items written to {a.write}")
        return 0
    if a.check:
        with open(a.check) as f:
            old = f.read()
        if old == text:
            print(f"public API unchanged ({len(lines)} items)")
            return 0
        import difflib
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                   a.check, "this build"))
        print(f"\nThe public API changed: review the diff, then run .ci/public-api.sh --write "
              f"to record it in {a.check}.")
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

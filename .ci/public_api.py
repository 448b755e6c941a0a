#!/usr/bin/env python3
"""Lists the public API of the `selectjit` library from rustdoc's JSON output, one item per
line (kind, path, and for functions their signature), sorted: what a dependent can name.

Items marked #[doc(hidden)] (the `unstable` module of the workspace's own crates, and hidden
items elsewhere) are listed too, each line prefixed with `#[doc(hidden)] ` (as is everything
inside a hidden item): a dependent can name them, so the listing shows them grow. rustdoc puts
them in its JSON only with `--document-hidden-items` (as .ci/public-api.sh passes). They need
no example (`--missing-examples` skips them). Trait implementations of standard traits (Debug,
Clone, ...) are left out: their presence is visible in the type's derive list in the docs, and
they are not part of what this listing reviews.

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


HIDDEN = "#[doc(hidden)] "


def walk(krate):
    index = krate["index"]
    root = index[str(krate["root"])]
    lines = []
    missing = []

    def visit(item_id, path, seen, hidden):
        item = index.get(str(item_id))
        if item is None or item_id in seen:
            return
        seen = seen | {item_id}
        if item.get("visibility") not in ("public", "default"):
            return
        hidden = hidden or is_hidden(item)
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
                    visit(c, path, seen, hidden)
                return
            visit_named(target, path + [alias], seen, hidden)
            return
        visit_named(item_id, path + ([name] if name else []), seen, hidden)

    def visit_named(item_id, path, seen, hidden):
        item = index.get(str(item_id))
        if item is None:
            return
        hidden = hidden or is_hidden(item)
        (kind, body), = item["inner"].items()
        p = "::".join(path)

        def add(line, hidden_too=False):
            lines.append((HIDDEN if hidden or hidden_too else "") + line)

        def no_example(name, doc_item, hidden_too=False):
            # Hidden items need no example.
            if not (hidden or hidden_too) and "```" not in (doc_item.get("docs") or ""):
                missing.append(name)

        if kind == "module":
            add(f"mod {p}")
            for c in body.get("items", []):
                visit(c, path, seen | {item_id}, hidden)
        elif kind in ("struct", "enum", "union", "trait", "type_alias", "constant", "static",
                      "macro"):
            add(f"{kind} {p}")
            if kind == "enum":
                for v in body.get("variants", []):
                    vi = index.get(str(v))
                    if vi:
                        add(f"variant {p}::{vi['name']}", is_hidden(vi))
            if kind == "struct":
                fields = body.get("kind", {}).get("plain", {}).get("fields", [])
                for fid in fields:
                    fi = index.get(str(fid))
                    if fi and fi.get("visibility") == "public":
                        ty = render_type(fi["inner"]["struct_field"])
                        add(f"field {p}::{fi['name']}: {ty}", is_hidden(fi))
            if kind == "trait":
                for m in body.get("items", []):
                    mi = index.get(str(m))
                    if mi and "function" in mi["inner"]:
                        add(f"trait-fn {p}::{mi['name']} {signature(mi)}", is_hidden(mi))
            for impl_id in body.get("impls", []):
                impl = index.get(str(impl_id))
                if impl is None:
                    continue
                ib = impl["inner"]["impl"]
                if ib.get("trait") is not None or ib.get("is_synthetic") or ib.get("synthetic"):
                    continue
                for m in ib.get("items", []):
                    mi = index.get(str(m))
                    if mi is None or mi.get("visibility") != "public":
                        continue
                    mh = is_hidden(mi)
                    if "function" in mi["inner"]:
                        add(f"fn {p}::{mi['name']} {signature(mi)}", mh)
                        no_example(f"{p}::{mi['name']}", mi, mh)
                    elif "assoc_const" in mi["inner"] or "constant" in mi["inner"]:
                        add(f"const {p}::{mi['name']}", mh)
        elif kind == "function":
            add(f"fn {p} {signature(item)}")
            no_example(p, item)
        else:
            add(f"{kind} {p}")

    for c in root["inner"]["module"]["items"]:
        visit(c, ["selectjit"], frozenset(), False)
    # Sorted by the item, so that a hidden item sits among its neighbours.
    return (sorted(set(lines), key=lambda line: (line.removeprefix(HIDDEN), line)),
            sorted(set(missing)))


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

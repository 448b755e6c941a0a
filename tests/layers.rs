//! The library's modules form layers that import only downward: no two files of `src/` import
//! each other, directly or through others.
//!
//! The graph is read from the code itself (parsed with `syn`): an edge runs from a file to the
//! file of every module it names — in `use` trees and in paths (`crate::…`, `super::…`,
//! `self::…`, or a child module's name) — outside `#[cfg(test)]` items. Declaring a child module
//! (`mod x;`) is ownership, not an import. The test fails on any cycle, naming the files and
//! the names that tie them; it also derives each file's layer (one above the highest file it
//! imports) and checks that `docs/architecture.md` shows that layering as it is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module: its path from the crate root (`["jit", "x86"]`), the file it lives in, and the
/// modules declared inside it.
#[derive(Debug, Default)]
struct Modules {
    /// Module path → file (relative to the package root).
    file_of: BTreeMap<Vec<String>, PathBuf>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| matches!(&m, syn::Meta::Path(p) if p.is_ident("test")))
    })
}

/// The `#[path = "…"]` of a module declaration, if any.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

fn parse(root: &Path, file: &Path) -> syn::File {
    let text = std::fs::read_to_string(root.join(file))
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// Records the modules declared by `items` (of module `path`, in `file`, whose child files
/// live in `dir`), recursing into files and inline modules.
fn collect(
    root: &Path,
    mods: &mut Modules,
    path: &[String],
    file: &Path,
    dir: &Path,
    items: &[syn::Item],
) {
    mods.file_of.insert(path.to_vec(), file.to_path_buf());
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if is_cfg_test(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        let mut child = path.to_vec();
        child.push(name.clone());
        match &m.content {
            Some((_, inner)) => collect(root, mods, &child, file, &dir.join(&name), inner),
            None => {
                let f = match path_attr(&m.attrs) {
                    Some(p) => dir.join(p),
                    None if root.join(dir).join(format!("{name}.rs")).exists() => {
                        dir.join(format!("{name}.rs"))
                    }
                    None => dir.join(&name).join("mod.rs"),
                };
                let parsed = parse(root, &f);
                collect(root, mods, &child, &f, &dir.join(&name), &parsed.items);
            }
        }
    }
}

/// Collects the module paths a file's code names, resolved from the module `here`.
struct Names<'a> {
    mods: &'a Modules,
    /// The module whose items are being visited.
    here: Vec<String>,
    /// Each imported module with the first name seen importing it.
    found: BTreeMap<Vec<String>, String>,
}

impl Names<'_> {
    /// Resolves a path's segments and records the deepest module it names.
    fn resolve(&mut self, segs: &[String]) {
        let Some(first) = segs.first() else { return };
        let mut abs: Vec<String> = match first.as_str() {
            "crate" => vec![],
            "self" => self.here.clone(),
            "super" => {
                let mut p = self.here.clone();
                let mut rest = segs;
                while rest.first().is_some_and(|s| s == "super") {
                    p.pop();
                    rest = &rest[1..];
                }
                return self.record(p, rest, segs);
            }
            _ => {
                let mut child = self.here.clone();
                child.push(first.clone());
                if !self.mods.file_of.contains_key(&child) {
                    return; // an external crate, a prelude name or a local item
                }
                self.here.clone()
            }
        };
        let rest = if first == "crate" || first == "self" {
            &segs[1..]
        } else {
            segs
        };
        self.record(std::mem::take(&mut abs), rest, segs)
    }

    fn record(&mut self, mut base: Vec<String>, rest: &[String], whole: &[String]) {
        // The deepest module named: walk down while the next segment is a module.
        for s in rest {
            let mut next = base.clone();
            next.push(s.clone());
            if self.mods.file_of.contains_key(&next) {
                base = next;
            } else {
                break;
            }
        }
        self.found.entry(base).or_insert_with(|| whole.join("::"));
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut v = prefix.clone();
                if n.ident != "self" {
                    v.push(n.ident.to_string());
                }
                self.resolve(&v);
            }
            syn::UseTree::Rename(r) => {
                let mut v = prefix.clone();
                v.push(r.ident.to_string());
                self.resolve(&v);
            }
            syn::UseTree::Glob(_) => self.resolve(prefix),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Names<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match i {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(m) => &m.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Trait(t) => &t.attrs,
            _ => &[],
        };
        if is_cfg_test(attrs) {
            return;
        }
        if let syn::Item::Mod(m) = i {
            // A module in another file is visited on its own; an inline one here, from its path.
            if let Some((_, items)) = &m.content {
                self.here.push(m.ident.to_string());
                for it in items {
                    self.visit_item(it);
                }
                self.here.pop();
            }
            return;
        }
        syn::visit::visit_item(self, i);
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(in crate::a)` restricts who sees an item; it imports nothing.
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            if segs.len() > 1 {
                self.resolve(&segs);
            }
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Paths inside macro bodies (format strings aside) are plain token streams: read the
        // `a::b::c` runs among them.
        let mut run: Vec<String> = Vec::new();
        let mut last_colon = false;
        let flush = |run: &mut Vec<String>, me: &mut Self| {
            if run.len() > 1 {
                me.resolve(run);
            }
            run.clear();
        };
        let mut tokens: Vec<proc_macro2::TokenTree> = m.tokens.clone().into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                proc_macro2::TokenTree::Ident(id) => {
                    if !last_colon {
                        flush(&mut run, self);
                    }
                    run.push(id.to_string());
                    last_colon = false;
                }
                proc_macro2::TokenTree::Punct(p) if p.as_char() == ':' => {
                    last_colon = true;
                }
                proc_macro2::TokenTree::Group(g) => {
                    flush(&mut run, self);
                    let inner: Vec<_> = g.stream().into_iter().collect();
                    tokens.splice(i + 1..i + 1, inner);
                    last_colon = false;
                }
                _ => {
                    flush(&mut run, self);
                    last_colon = false;
                }
            }
            i += 1;
        }
        flush(&mut run, self);
        syn::visit::visit_macro(self, m);
    }
}

/// Every file's imports: file → (file → the first name seen tying them).
fn graph(root: &Path) -> BTreeMap<PathBuf, BTreeMap<PathBuf, String>> {
    let lib = PathBuf::from("src/lib.rs");
    let mut mods = Modules::default();
    let parsed = parse(root, &lib);
    collect(root, &mut mods, &[], &lib, Path::new("src"), &parsed.items);
    let mut g: BTreeMap<PathBuf, BTreeMap<PathBuf, String>> = BTreeMap::new();
    // Each file once, from its outermost module (inline modules share their file).
    let mut outer: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for (m, f) in &mods.file_of {
        let e = outer.entry(f.clone()).or_insert_with(|| m.clone());
        if m.len() < e.len() {
            *e = m.clone();
        }
    }
    for (file, module) in &outer {
        let parsed = parse(root, file);
        let mut v = Names {
            mods: &mods,
            here: module.clone(),
            found: BTreeMap::new(),
        };
        for it in &parsed.items {
            v.visit_item(it);
        }
        let edges = g.entry(file.clone()).or_default();
        for (m, name) in v.found {
            let to = mods.file_of[&m].clone();
            if &to != file {
                edges.entry(to).or_insert(name);
            }
        }
    }
    g
}

/// Strongly connected components of more than one file (Tarjan).
fn cycles(g: &BTreeMap<PathBuf, BTreeMap<PathBuf, String>>) -> Vec<Vec<PathBuf>> {
    struct St<'a> {
        g: &'a BTreeMap<PathBuf, BTreeMap<PathBuf, String>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut St<'a>, v: &'a PathBuf) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.g.get(v).into_iter().flat_map(|e| e.keys()) {
            if !s.index.contains_key(w) {
                visit(s, w);
                let l = s.low[w].min(s.low[v]);
                s.low.insert(v, l);
            } else if s.on.contains(w) {
                let l = s.index[w].min(s.low[v]);
                s.low.insert(v, l);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = St {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Each file's layer: 0 for a file that imports no other, else one above its highest import.
fn layers(g: &BTreeMap<PathBuf, BTreeMap<PathBuf, String>>) -> BTreeMap<PathBuf, usize> {
    fn layer(
        g: &BTreeMap<PathBuf, BTreeMap<PathBuf, String>>,
        f: &PathBuf,
        memo: &mut BTreeMap<PathBuf, usize>,
    ) -> usize {
        if let Some(&l) = memo.get(f) {
            return l;
        }
        let l = g
            .get(f)
            .into_iter()
            .flat_map(|e| e.keys())
            .map(|t| layer(g, t, memo) + 1)
            .max()
            .unwrap_or(0);
        memo.insert(f.clone(), l);
        l
    }
    let mut memo = BTreeMap::new();
    for f in g.keys() {
        layer(g, f, &mut memo);
    }
    memo
}

/// The layering as the architecture page shows it: one line per layer, top first.
fn diagram(layers: &BTreeMap<PathBuf, usize>) -> String {
    let top = layers.values().copied().max().unwrap_or(0);
    let mut s = String::new();
    for l in (0..=top).rev() {
        let files: Vec<String> = layers
            .iter()
            .filter(|&(_, &v)| v == l)
            .map(|(f, _)| f.strip_prefix("src").unwrap_or(f).display().to_string())
            .collect();
        s += &format!("{l:>2}  {}\n", files.join("  "));
    }
    s
}

#[test]
fn src_imports_only_downward() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let g = graph(root);
    assert!(g.len() > 20, "the module tree was not read: {:?}", g.keys());
    let found = cycles(&g);
    let mut msg = String::new();
    for c in &found {
        msg += &format!("cycle of {} files:\n", c.len());
        for a in c {
            for (b, name) in &g[a] {
                if c.contains(b) {
                    msg += &format!("  {} -> {}: {name}\n", a.display(), b.display());
                }
            }
        }
    }
    assert!(found.is_empty(), "src/ imports in circles:\n{msg}");

    // The architecture page shows the layering the code has.
    let want = diagram(&layers(&g));
    let page = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap_or_default();
    let (begin, end) = (
        "<!-- layers:begin -->\n```text\n",
        "```\n<!-- layers:end -->",
    );
    let shown = page
        .split_once(begin)
        .and_then(|(_, rest)| rest.split_once(end))
        .map(|(d, _)| d.to_string());
    assert_eq!(
        shown.as_deref(),
        Some(want.as_str()),
        "docs/architecture.md must show the layers as the code has them, between \
         `{begin}` and `{end}`:\n{want}"
    );
}

/// The checker itself: a cycle between two files is found, and an import of a child module by
/// name or of an item in the parent by `super` counts.
#[test]
fn the_checker_finds_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\npub use a::X;\n").unwrap();
    std::fs::write(
        src.join("a/mod.rs"),
        "mod c;\npub struct X;\nfn f() { c::g() }\n",
    )
    .unwrap();
    std::fs::write(src.join("a/c.rs"), "pub fn g() { let _ = super::X; }\n").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::a::X;\n").unwrap();
    let g = graph(dir.path());
    let a = PathBuf::from("src/a/mod.rs");
    let c = PathBuf::from("src/a/c.rs");
    assert_eq!(cycles(&g), vec![vec![c.clone(), a.clone()]]);
    assert_eq!(
        g[&PathBuf::from("src/b.rs")].keys().collect::<Vec<_>>(),
        [&a]
    );
    // Without the child's import of its parent, no cycle; layers run c, a, then lib and b.
    std::fs::write(src.join("a/c.rs"), "pub fn g() {}\n").unwrap();
    let g = graph(dir.path());
    assert!(cycles(&g).is_empty());
    let l = layers(&g);
    assert_eq!((l[&c], l[&a], l[&PathBuf::from("src/lib.rs")]), (0, 1, 2));
}

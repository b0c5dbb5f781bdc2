#!/usr/bin/env python3
"""Fails when a Rust crate's modules import each other in a loop.

The graph is file -> file: an arrow for every path a file names through `use crate::…`,
`use super::…` and inline `crate::…`/`super::…` paths in code, resolved to the file that
defines the module the path ends in (following `use` re-exports, so `crate::Error` that the
root re-exports from `error.rs` is an arrow to `error.rs`). A module and its own descendants
may use each other (a parent's private helpers are its children's to use); any other loop is a
cycle. Loops between modules are cycles too: every arrow also counts as an arrow between the
two sibling modules it runs between (the children of the deepest module holding both ends),
so `meta.rs` using `master/tenure.rs` while `master.rs` uses `meta.rs` is a loop of `meta`
and `master` although no two files form one. Code under `#[cfg(test)]` is left out: tests
may reach anywhere.

Every crate root of every package under the given directories is read: `src/lib.rs`,
`src/main.rs`, `src/bin/*`, the `[lib]`/`[[bin]]` paths of Cargo.toml, and `tests/*.rs`.

  scripts/check-module-cycles.py                 # the workspace and fuzz/
  scripts/check-module-cycles.py crates/server   # one package
  scripts/check-module-cycles.py --graph crates/client   # print every arrow

Exit status: 0 with no cycle, 1 with one (each printed with the names that make its arrows),
2 on bad arguments. `cargo modules dependencies --acyclic` is no substitute: it checks items,
and every type with a method in another file is a "cycle" to it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ITEM_RE = re.compile(
    r"\b(?:fn|struct|enum|union|trait|type|const|static|mod|macro_rules!)\s+(" + IDENT + ")"
)
INLINE_PATH_RE = re.compile(r"(?<![A-Za-z0-9_])(crate|super|self)((?:\s*::\s*" + IDENT + r")+)")


def strip_code(src: str) -> str:
    """The source with comments, string and char literals blanked (newlines kept), so a path
    in a doc comment or a message draws no arrow."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
            continue
        m = re.compile(r'b?r(#*)"').match(src, i)
        if m and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = src.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(' ""' + re.sub(r"[^\n]", " ", src[i + 3 : j]))
            i = j
            continue
        if c == '"' or (c == "b" and src.startswith('b"', i)):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            out.append('""' + re.sub(r"[^\n]", " ", src[i + 2 : j]))
            i = j
            continue
        if c == "'":
            m = re.compile(r"'(?:\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'\n])'").match(src, i)
            if m:
                out.append("' '")
                i = m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_use_tree(text: str, prefix: list[str]) -> list[tuple[list[str], str | None]]:
    """`a::{b, c::d as e, f::*}` -> [(path, bound name or '*' or None for `self`)]."""
    text = text.strip()
    out: list[tuple[list[str], str | None]] = []
    if not text:
        return out
    brace = text.find("{")
    if brace >= 0 and (text.find(" as ") < 0 or text.find(" as ") > brace):
        head = [s.strip() for s in text[:brace].split("::") if s.strip()]
        body = text[brace + 1 : text.rindex("}")]
        depth, start = 0, 0
        parts = []
        for k, ch in enumerate(body):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(body[start:k])
                start = k + 1
        parts.append(body[start:])
        for p in parts:
            out.extend(parse_use_tree(p, prefix + head))
        return out
    alias = None
    if " as " in text:
        text, alias = [s.strip() for s in text.split(" as ", 1)]
    segs = [s.strip() for s in text.split("::") if s.strip()]
    if not segs:
        return out
    path = prefix + segs
    if segs[-1] == "*":
        return [(path[:-1], "*")]
    if segs[-1] == "self":
        path = path[:-1]
        return [(path, alias or (path[-1] if path else None))]
    return [(path, alias or segs[-1])]


@dataclass
class Module:
    path: tuple[str, ...]
    file: str
    items: set[str] = field(default_factory=set)
    uses: dict[str, list[str]] = field(default_factory=dict)  # bound name -> absolute path
    globs: list[list[str]] = field(default_factory=list)  # absolute paths of `use x::*`
    # (absolute path, source file) of every path the module's code names.
    refs: list[list[str]] = field(default_factory=list)


class Crate:
    def __init__(self, root_file: str):
        self.root = root_file
        self.modules: dict[tuple[str, ...], Module] = {}
        self.load(root_file, (), is_root=True)

    # --- reading -------------------------------------------------------------------------
    def load(self, file: str, mpath: tuple[str, ...], is_root: bool) -> None:
        try:
            with open(file, encoding="utf-8") as f:
                code = strip_code(f.read())
        except OSError:
            return
        base = os.path.dirname(file)
        stem = os.path.splitext(os.path.basename(file))[0]
        # Children of `a.rs` live in `a/`; of `lib.rs`, `main.rs`, `mod.rs` beside them.
        child_dir = base if (is_root or stem == "mod") else os.path.join(base, stem)
        self.read_block(code, file, mpath, child_dir)

    def read_block(self, code: str, file: str, mpath: tuple[str, ...], child_dir: str) -> None:
        mod = self.modules.setdefault(mpath, Module(mpath, file))
        code = self.cut_test_and_inline_modules(code, file, mpath, child_dir)
        for m in ITEM_RE.finditer(code):
            mod.items.add(m.group(1))
        for m in re.finditer(r"\buse\s+([^;]*);", code):
            for path, bound in parse_use_tree(m.group(1), []):
                abs_path = self.absolute(path, mpath)
                if abs_path is None:
                    continue
                if bound == "*":
                    mod.globs.append(abs_path)
                elif bound:
                    mod.uses[bound] = abs_path
                mod.refs.append(abs_path)
        for m in INLINE_PATH_RE.finditer(re.sub(r"\buse\s+[^;]*;", " ", code)):
            segs = [m.group(1)] + [s.strip() for s in m.group(2).split("::") if s.strip()]
            abs_path = self.absolute(segs, mpath)
            if abs_path is not None:
                mod.refs.append(abs_path)

    def cut_test_and_inline_modules(self, code, file, mpath, child_dir) -> str:
        """Reads `mod x;` and `mod x { … }` (recursing), and returns the code without inline
        module bodies and without anything gated by `#[cfg(test)]`."""
        out, i = [], 0
        decl = re.compile(
            r"((?:#\s*\[[^\]]*\]\s*)*)(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])"
        )
        gated = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
        while True:
            m = decl.search(code, i)
            if not m:
                out.append(code[i:])
                break
            out.append(code[i : m.start()])
            attrs, name, kind = m.group(1), m.group(2), m.group(3)
            test_only = bool(gated.search(attrs))
            path_attr = re.search(r'#\s*\[\s*path\s*=\s*""', attrs)
            if kind == ";":
                i = m.end()
                if test_only:
                    continue
                child = None
                if path_attr:
                    raw = re.search(r'#\s*\[\s*path\s*=\s*"([^"]*)"', self.raw_attrs(file, name))
                    if raw:
                        child = os.path.normpath(os.path.join(os.path.dirname(file), raw.group(1)))
                if child is None:
                    a = os.path.join(child_dir, name + ".rs")
                    b = os.path.join(child_dir, name, "mod.rs")
                    child = a if os.path.exists(a) else b
                self.load(child, mpath + (name,), is_root=False)
                continue
            end = matching_brace(code, m.end() - 1)
            if not test_only:
                self.modules.setdefault(mpath, Module(mpath, file)).items.add(name)
                self.read_block(code[m.end() : end], file, mpath + (name,), os.path.join(child_dir, name))
            out.append("\n" * code.count("\n", m.start(), end + 1))
            i = end + 1
        # Other items gated by #[cfg(test)] (a test-only fn or impl): cut their bodies too.
        text = "".join(out)
        res, i = [], 0
        for m in gated.finditer(text):
            if m.start() < i:
                continue
            res.append(text[i : m.start()])
            semi = text.find(";", m.end())
            brace = text.find("{", m.end())
            if brace >= 0 and (semi < 0 or brace < semi):
                i = matching_brace(text, brace) + 1
            else:
                i = (semi + 1) if semi >= 0 else len(text)
        res.append(text[i:])
        return "".join(res)

    def raw_attrs(self, file: str, name: str) -> str:
        with open(file, encoding="utf-8") as f:
            src = f.read()
        m = re.search(r"((?:#\s*\[[^\]]*\]\s*)*)(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+" + name + r"\s*;", src)
        return m.group(1) if m else ""

    def absolute(self, segs: list[str], here: tuple[str, ...]) -> list[str] | None:
        if not segs:
            return None
        head = segs[0]
        if head in ("crate", "$crate"):
            return segs[1:]
        if head in ("super", "self"):
            cur = list(here)
            k = 0
            while k < len(segs) and segs[k] in ("super", "self"):
                if segs[k] == "super":
                    if not cur:
                        return None
                    cur.pop()
                k += 1
            return cur + segs[k:]
        if here + (head,) in self.modules:
            return list(here) + segs  # `use child::Name`: a path from this module's child
        return None  # an external crate or a name in scope: not a module path of ours

    # --- resolving -----------------------------------------------------------------------
    def resolve(self, path: list[str], depth: int = 0, strict: bool = False) -> str | None:
        """The file defining what `path` (absolute, in this crate) names: the module it ends
        in, or the module defining (or importing from elsewhere) its first non-module name.
        `strict`: None unless the name is found (a glob import's candidates)."""
        cur: tuple[str, ...] = ()
        for k, seg in enumerate(path):
            child = cur + (seg,)
            if child in self.modules:
                cur = child
                continue
            mod = self.modules.get(cur)
            if mod is None:
                return None
            if seg in mod.items:
                return mod.file
            if depth < 8 and seg in mod.uses:
                return self.resolve(mod.uses[seg] + path[k + 1 :], depth + 1) or mod.file
            if depth < 8:
                for g in mod.globs:
                    found = self.resolve(g + path[k:], depth + 1, strict=True)
                    if found is not None:
                        return found
            if strict:
                return None
            break
        return self.modules[cur].file if cur in self.modules else None

    def module_arrows(self) -> dict[str, dict[str, set[str]]]:
        """Module -> module between siblings: each file arrow lifted to the two children of
        the deepest module that holds both of its ends (named by module path)."""
        owner = self.owners()
        out: dict[str, dict[str, set[str]]] = {}
        for src, dsts in self.arrows().items():
            for dst in dsts:
                a, b = owner[src], owner[dst]
                common = 0
                while common < min(len(a), len(b)) and a[common] == b[common]:
                    common += 1
                top_a, top_b = a[: common + 1], b[: common + 1]
                if top_a == top_b or len(top_a) <= common or len(top_b) <= common:
                    continue
                name_a = "crate::" + "::".join(top_a) if top_a else "crate"
                name_b = "crate::" + "::".join(top_b) if top_b else "crate"
                out.setdefault(name_a, {}).setdefault(name_b, set()).add(f"{src} -> {dst}")
        return out

    def owners(self) -> dict[str, tuple[str, ...]]:
        owner: dict[str, tuple[str, ...]] = {}
        for m in self.modules.values():
            if m.file not in owner or len(m.path) < len(owner[m.file]):
                owner[m.file] = m.path
        return owner

    def arrows(self) -> dict[str, dict[str, set[str]]]:
        """file -> file -> the names through which the first reaches the second."""
        owner = self.owners()
        out: dict[str, dict[str, set[str]]] = {}
        for m in self.modules.values():
            src = m.file
            for ref in m.refs:
                dst = self.resolve(ref)
                if dst is None or dst == src:
                    continue
                a, b = owner[src], owner[dst]
                if a[: len(b)] == b or b[: len(a)] == a:
                    continue  # an ancestor and its descendant
                out.setdefault(src, {}).setdefault(dst, set()).add(ref[-1] if ref else "crate")
        return out


def matching_brace(code: str, open_at: int) -> int:
    depth = 0
    for k in range(open_at, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def crate_roots(package: str) -> list[str]:
    roots = []
    manifest = os.path.join(package, "Cargo.toml")
    # `path = "…"` lines of the manifest: [lib] and [[bin]] roots (Python 3.10 has no tomllib).
    declared = []
    if os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as f:
            declared = re.findall(r'(?m)^\s*path\s*=\s*"([^"]+\.rs)"', f.read())
    for rel in ["src/lib.rs", "src/main.rs"] + declared:
        if rel and os.path.exists(os.path.join(package, rel)):
            roots.append(os.path.join(package, rel))
    for d in ("src/bin", "tests", "benches"):
        full = os.path.join(package, d)
        if os.path.isdir(full):
            for e in sorted(os.listdir(full)):
                p = os.path.join(full, e)
                if e.endswith(".rs"):
                    roots.append(p)
                elif os.path.exists(os.path.join(p, "main.rs")):
                    roots.append(os.path.join(p, "main.rs"))
    return sorted(set(os.path.normpath(r) for r in roots))


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {d for v in graph.values() for d in v})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, {})))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def packages(dirs: list[str]) -> list[str]:
    found = []
    for d in dirs:
        if os.path.exists(os.path.join(d, "Cargo.toml")):
            found.append(d)
        for sub in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            p = os.path.join(d, sub)
            if sub in ("target", ".git") or not os.path.isdir(p):
                continue
            if os.path.exists(os.path.join(p, "Cargo.toml")):
                found.append(p)
    return sorted(set(os.path.normpath(p) for p in found))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", help="packages, or folders of packages (default: crates fuzz)")
    ap.add_argument("--root", default=".", help="the checkout (default: .)")
    ap.add_argument("--graph", action="store_true", help="print every arrow, not only cycles")
    args = ap.parse_args(argv)
    os.chdir(args.root)
    dirs = args.dirs or ["crates", "fuzz"]
    for d in dirs:
        if not os.path.isdir(d):
            print(f"check-module-cycles: {d}: no such directory", file=sys.stderr)
            return 2
    found = 0
    roots = [r for p in packages(dirs) for r in crate_roots(p)]
    for root in roots:
        crate = Crate(root)
        graph = crate.arrows()
        if args.graph:
            for src in sorted(graph):
                for dst in sorted(graph[src]):
                    print(f"{src} -> {dst}: {', '.join(sorted(graph[src][dst]))}")
        for comp in cycles(graph):
            found += 1
            members = set(comp)
            print(f"cycle {found} ({root}): {len(comp)} files: {', '.join(comp)}")
            for src in comp:
                for dst in sorted(graph.get(src, {})):
                    if dst in members:
                        print(f"  {src} -> {dst}: {', '.join(sorted(graph[src][dst]))}")
        modules = crate.module_arrows()
        for comp in cycles(modules):
            found += 1
            members = set(comp)
            print(f"cycle {found} ({root}): {len(comp)} modules: {', '.join(comp)}")
            for src in comp:
                for dst in sorted(modules.get(src, {})):
                    if dst in members:
                        for via in sorted(modules[src][dst]):
                            print(f"  {src} -> {dst}: {via}")
    if found:
        print(f"check-module-cycles: {found} cycle(s) in {len(roots)} crate roots")
        return 1
    print(f"check-module-cycles: no cycles in {len(roots)} crate roots")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

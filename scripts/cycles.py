#!/usr/bin/env python3
"""Finds import cycles: among the workspace's crates (every dependency kind, dev-dependencies
too) and among the modules (files) of each crate's targets. Exits 1 when there is one, printing
each cycle with the names that tie it, file -> file.

A module imports another when it names an item that the other *defines*: through `use` (a
re-export counts: it is an import), or through a path in the code (`crate::a::b`, `super::x`,
`module::item` after `use crate::module`). Re-exports are followed to the defining file, so a
facade module (`mod.rs` that only declares and re-exports) ties nothing to its children's users.
Declaring a child module (`mod x;`) is not an import. It reads rustfmt-formatted source as text:
top-level items start at column 0.

Usage: python3 scripts/cycles.py [--graph CRATE]   (--graph prints that crate's module graph)
"""
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

ITEM = re.compile(
    r"^(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|unsafe|const|extern\s+\"C\")\s+)*"
    r"(fn|struct|enum|trait|type|const|static|union|mod)\s+(r#)?(\w+)"
)
MACRO = re.compile(r"^(?:#\[macro_export\]\s*)?macro_rules!\s+(\w+)")
INLINE = re.compile(r"^(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*\{\s*$")
MODDECL = re.compile(r"^(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
PATHATTR = re.compile(r'^#\[path\s*=\s*"([^"]+)"\]')
USE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M | re.S)
QUALIFIED = re.compile(r"(?<![\w:])((?:crate|super|self|\w+)(?:::\w+)+)")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
STRING = re.compile(r'r#*"(?:.|\n)*?"#*|"(?:\\.|[^"\\])*"')


def strip(src):
    src = STRING.sub('""', src)
    return COMMENT.sub("", src)


class Module:
    def __init__(self, path, file, text):
        self.path = path  # tuple of segments from the crate root
        self.file = file
        self.text = text
        self.children = {}  # name -> Module
        self.defs = set()
        self.reexports = {}  # name -> absolute path (tuple)
        self.globs = []  # absolute module paths re-exported with *
        self.uses = []  # (absolute path tuple, alias, is_glob)


def split_tree(tree):
    """`a::{b, c::{d as e}, f::*}` -> [(['a','b'], 'b'), (['a','c','d'], 'e'), (['a','f','*'], '*')]"""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+", "@", tree))
    out = []

    def walk(prefix, s):
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:i])
                start = i + 1
        parts.append(s[start:])
        for part in filter(None, parts):
            if "{" in part:
                head, rest = part.split("{", 1)
                walk(prefix + [p for p in head.split("::") if p], rest[:-1])
                continue
            alias = None
            if "@" in part:
                part, alias = part.split("@", 1)
            segs = prefix + [p for p in part.split("::") if p]
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            if segs:
                out.append((segs, alias or segs[-1]))

    walk([], tree)
    return out


class Crate:
    def __init__(self, name, root):
        self.name = name
        self.modules = {}
        self.root = self.load((), root)

    def load(self, path, file, text=None):
        if text is None:
            with open(file, encoding="utf-8") as f:
                text = strip(f.read())
        # Inline modules (`mod tests { ... }`): children in the same file, read apart.
        lines, inline, i = text.split("\n"), {}, 0
        kept = []
        while i < len(lines):
            head = INLINE.match(lines[i])
            if not head:
                kept.append(lines[i])
                i += 1
                continue
            j = i + 1
            while j < len(lines) and lines[j] != "}":
                j += 1
            inline[head.group(1)] = "\n".join(l[4:] for l in lines[i + 1:j])
            i = j + 1
        text = "\n".join(kept)
        m = Module(path, file, text)
        self.modules[path] = m
        for name, body in inline.items():
            m.defs.add(name)
            m.children[name] = self.load(path + (name,), file, body)
        lines = kept
        base = os.path.dirname(file)
        stem = os.path.basename(file)[:-3]
        own_dir = base if stem in ("lib", "main", "mod") or not path else os.path.join(base, stem)
        for i, line in enumerate(lines):
            it = ITEM.match(line)
            if it:
                m.defs.add(it.group(3))
            mac = MACRO.match(line)
            if mac:
                m.defs.add(mac.group(1))
            decl = MODDECL.match(line)
            if not decl:
                continue
            name = decl.group(1)
            attr = next((PATHATTR.match(lines[j].strip()) for j in range(max(0, i - 3), i)
                         if PATHATTR.match(lines[j].strip())), None)
            if attr:
                child = os.path.normpath(os.path.join(base, attr.group(1)))
            else:
                child = os.path.join(own_dir, name + ".rs")
                if not os.path.exists(child):
                    child = os.path.join(own_dir, name, "mod.rs")
            if os.path.exists(child):
                m.children[name] = self.load(path + (name,), child)
        for mu in USE.finditer(text):
            public = bool(mu.group(1))
            for segs, alias in split_tree(mu.group(2)):
                absolute = self.absolute(m, segs)
                if absolute is None:
                    continue
                glob = absolute[-1] == "*"
                m.uses.append((absolute[:-1] if glob else absolute, alias, glob))
                if public and glob:
                    m.globs.append(absolute[:-1])
                elif public:
                    m.reexports[alias] = absolute
        return m

    def absolute(self, m, segs):
        """A `use` path as a path from the crate root, or None when it leaves the crate."""
        first = segs[0]
        if first == "crate":
            return tuple(segs[1:])
        if first in ("super", "self"):
            path = list(m.path)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    path = path[:-1]
                segs = segs[1:]
            return tuple(path + segs)
        if first in m.children or (m.path == () and first in self.root_children()):
            return m.path + tuple(segs)
        return None

    def root_children(self):
        return self.modules[()].children if () in self.modules else {}

    def module(self, path):
        return self.modules.get(tuple(path))

    def resolve(self, path, seen=None):
        """The file defining the item at `path` (or the module's own file), or None."""
        seen = seen or set()
        if path in seen:
            return None
        seen.add(path)
        mod = self.module(path)
        if mod is not None:
            return mod.file
        parent = self.module(path[:-1])
        if parent is None:
            # A path into an item (an enum's variant, a type's associated item).
            return self.resolve(path[:-1], seen) if len(path) > 1 else None
        name = path[-1]
        if name in parent.defs:
            return parent.file
        if name in parent.reexports:
            return self.resolve(parent.reexports[name], seen)
        for g in parent.globs:
            got = self.resolve(tuple(g) + (name,), seen)
            if got:
                return got
        return None

    def edges(self):
        """{(from_file, to_file): set(names)}"""
        out = defaultdict(set)
        for m in self.modules.values():
            aliases = {}
            for absolute, alias, glob in m.uses:
                target = self.module(absolute)
                if glob:
                    if target is None:
                        continue
                    for name in target.defs | set(target.reexports):
                        if re.search(r"(?<![\w:])" + name + r"\b", m.text) and name not in m.defs:
                            to = self.resolve(tuple(absolute) + (name,))
                            if to and to != m.file:
                                out[(m.file, to)].add(name)
                    continue
                if target is not None:
                    aliases[alias] = absolute  # a module: its paths are read below
                    continue
                to = self.resolve(tuple(absolute))
                if to and to != m.file:
                    out[(m.file, to)].add(absolute[-1])
            for q in QUALIFIED.finditer(m.text):
                segs = q.group(1).split("::")
                if segs[0] in aliases:
                    absolute = tuple(aliases[segs[0]]) + tuple(segs[1:])
                else:
                    absolute = self.absolute(m, segs)
                    if absolute is None:
                        continue
                # The longest prefix that names something.
                for n in range(len(absolute), 0, -1):
                    to = self.resolve(absolute[:n])
                    if to:
                        if to != m.file and self.module(absolute[:n]) is None:
                            out[(m.file, to)].add(absolute[n - 1])
                        break
        return out


def sccs(nodes, succ):
    index, low, stack, on, result, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                result.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return result


def main():
    args = sys.argv[1:]
    if args and not (len(args) == 2 and args[0] == "--graph"):
        print(f"usage: {sys.argv[0]} [--graph CRATE] (got: {' '.join(args)})", file=sys.stderr)
        return 2
    graph_of = args[1] if args else None
    try:
        meta = json.loads(subprocess.check_output(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"]))
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"cannot read the workspace with `cargo metadata`: {e}", file=sys.stderr)
        return 2
    top = meta["workspace_root"]
    names = {p["name"] for p in meta["packages"]}
    if graph_of is not None and graph_of not in names:
        print(f"--graph: no crate {graph_of!r} in the workspace (crates: {', '.join(sorted(names))})",
              file=sys.stderr)
        return 2
    found = 0
    # Crates: every dependency kind.
    succ = {p["name"]: {d["name"] for d in p["dependencies"] if d["name"] in names}
            for p in meta["packages"]}
    for comp in sccs(names, succ):
        found += 1
        print("crate cycle: " + " -> ".join(comp))
    files_read = 0
    for p in sorted(meta["packages"], key=lambda p: p["name"]):
        roots = sorted({t["src_path"] for t in p["targets"]})
        for root in roots:
            crate = Crate(p["name"], root)
            files_read += len(crate.modules)
            edges = crate.edges()
            succ = defaultdict(set)
            for a, b in edges:
                succ[a].add(b)
            rel = lambda f: os.path.relpath(f, top)
            if graph_of == p["name"] and root.endswith("lib.rs"):
                for (a, b), ns in sorted(edges.items()):
                    print(f"{rel(a)} -> {rel(b)}: {', '.join(sorted(ns))}")
            for comp in sccs({m.file for m in crate.modules.values()}, succ):
                found += 1
                print(f"module cycle in {p['name']} ({rel(root)}): {len(comp)} files")
                for a in comp:
                    for b in sorted(succ[a]):
                        if b in comp:
                            print(f"  {rel(a)} -> {rel(b)}: {', '.join(sorted(edges[(a, b)]))}")
    crates = len(meta["packages"])
    if found:
        print(f"{found} cycle(s) among {crates} crates and {files_read} module files")
        return 1
    print(f"no cycle among {crates} crates (all dependency kinds) and {files_read} module files")
    return 0


if __name__ == "__main__":
    sys.exit(main())

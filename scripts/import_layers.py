#!/usr/bin/env python3
"""The import check of ARCHITECTURE.md: no module circle anywhere in the workspace, and no
import from a lower layer to a higher one.

Every folder of every crate (crates/*/src) is a node graph: its children (files and subfolders)
are the nodes, and child A -> child B when non-test code anywhere inside A names an item inside
B (`use crate::…`, `super::…`, `flscale::…` paths in use trees and in expressions; a `pub use`
re-export in a mod.rs is followed to the file that defines the item). Each of these graphs must be
acyclic. Where ARCHITECTURE.md's ```layers block lists a folder's children bottom to top, an edge
must also point to the same or a lower layer, and every child must be listed.

Test code is left out: `#[cfg(test)]` modules, whether inline (from the attribute to the end of
the file) or declared as `#[cfg(test)] mod tests;`.

Usage: python3 scripts/import_layers.py [--graph FOLDER] [--root DIR]
Exit 0 when the rules hold; 1 naming file, line and import for every violation.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
CRATE_NAMES = {'flscale': 'flscale', 'flscale-cli': 'flscale_cli', 'flscale-py': 'flscale_py'}


def strip_comments(src):
    """Blank out comments and string literals (keeping line numbers) so paths inside them
    are not read as imports."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            i = j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * src[i:j].count('\n'))
            i = j
        elif c == 'r' and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == '_')):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + '\n' * src[i:j].count('\n'))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == '\\' else 1
            out.append('""' + '\n' * src[i:j].count('\n'))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", src[i:i + 4])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def non_test_part(src):
    """The source up to its first `#[cfg(test)]` item that is an inline module (test modules
    sit at the end of a file by the project's convention; a `#[cfg(test)] mod x;` declaration is
    skipped by the tree walk instead)."""
    for m in re.finditer(r'#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{', src):
        return src[:m.start()]
    return src


class Crate:
    def __init__(self, name, src_dir):
        self.name = name
        self.src = src_dir
        self.files = {}      # module path tuple -> file path
        self.test_mods = set()
        self.reexports = {}  # module tuple -> {name: full path tuple}
        self.walk((), os.path.join(src_dir, 'lib.rs') if os.path.exists(os.path.join(src_dir, 'lib.rs'))
                  else os.path.join(src_dir, 'main.rs'))

    def walk(self, mod, path):
        self.files[mod] = path
        text = strip_comments(open(path, encoding='utf-8').read())
        base = os.path.dirname(path) if (mod == () or path.endswith('mod.rs')) else path[:-3]
        for m in re.finditer(r'(#\[[^\]]*\]\s*)*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;', text):
            attrs, child = m.group(0), m.group(4)
            if '#[cfg(test)]' in attrs.replace(' ', ''):
                self.test_mods.add(mod + (child,))
                continue
            for cand in (os.path.join(base, child + '.rs'), os.path.join(base, child, 'mod.rs')):
                if os.path.exists(cand):
                    self.walk(mod + (child,), cand)
                    break

    def resolve(self, parts, depth=0):
        """The module (file) that defines what `parts` names: the longest known prefix, then
        through `pub use` re-exports of that module."""
        for k in range(len(parts), -1, -1):
            pre = tuple(parts[:k])
            if pre in self.files:
                if k < len(parts) and depth < 8:
                    target = self.reexports.get(pre, {}).get(parts[k])
                    if target is not None:
                        return self.resolve(list(target) + list(parts[k + 1:]), depth + 1)
                return pre
        return None


def use_paths(tree):
    """Expand a use tree (`a::{b, c::{d as e}}`) into full paths with their local names."""
    tree = tree.strip()
    depth = 0
    for i, ch in enumerate(tree):
        if ch == '{':
            if depth == 0:
                prefix = tree[:i].rstrip(':').strip()
                inner = tree[i + 1:tree.rfind('}')]
                parts, d, cur = [], 0, ''
                for c in inner:
                    if c == ',' and d == 0:
                        parts.append(cur)
                        cur = ''
                        continue
                    d += c == '{'
                    d -= c == '}'
                    cur += c
                parts.append(cur)
                out = []
                for p in parts:
                    if not p.strip():
                        continue
                    for path, alias in use_paths(p):
                        full = (prefix + '::' + path) if prefix else path
                        out.append((full, alias))
                return out
            depth += 1
    m = re.match(r'(.*?)\s+as\s+(\w+)$', tree)
    if m:
        return [(m.group(1).strip(), m.group(2))]
    return [(tree, tree.split('::')[-1])]


def absolute(crate, mod, is_mod_rs, path):
    """A path as written in module `mod` made absolute within its crate (a list of segments),
    or None when it leaves the crate (std, other crates)."""
    segs = [s.strip() for s in path.split('::') if s.strip()]
    if not segs:
        return None
    here = list(mod)
    if segs[0] == 'crate':
        return segs[1:]
    if segs[0] == CRATE_NAMES.get('flscale') and crate.name != 'flscale':
        return ('EXTERN', segs[1:])
    if segs[0] in ('self', 'super'):
        cur = here
        while segs and segs[0] in ('self', 'super'):
            if segs[0] == 'super':
                cur = cur[:-1]
            segs = segs[1:]
        return cur + segs
    return None


def collect(crates):
    """Edges (file module -> target module) with the line of the import."""
    for crate in crates.values():
        for mod, path in crate.files.items():
            if not path.endswith('mod.rs') and mod != ():
                continue
            text = non_test_part(strip_comments(open(path, encoding='utf-8').read()))
            table = crate.reexports.setdefault(mod, {})
            for m in re.finditer(r'\bpub(\([^)]*\))?\s+use\s+([^;]+);', text):
                for p, alias in use_paths(m.group(2)):
                    a = absolute(crate, mod, True, p)
                    if isinstance(a, list) and alias not in ('self', '*'):
                        table[alias] = tuple(a)
    edges = []
    for crate in crates.values():
        for mod, path in crate.files.items():
            if any(mod[:k] in crate.test_mods for k in range(1, len(mod) + 1)):
                continue
            raw = strip_comments(open(path, encoding='utf-8').read())
            text = non_test_part(raw)
            found = []
            for m in re.finditer(r'\buse\s+([^;]+);', text):
                for p, _ in use_paths(m.group(1)):
                    found.append((p, m.start()))
            for m in re.finditer(r'(?<![\w:])((?:crate|super|self|flscale)(?:::\w+)+)', text):
                found.append((m.group(1), m.start()))
            seen = set()
            for p, pos in found:
                line = text.count('\n', 0, pos) + 1
                if (p, line) in seen:
                    continue
                seen.add((p, line))
                a = absolute(crate, mod, path.endswith('mod.rs'), p.replace('::*', ''))
                if a is None:
                    continue
                if isinstance(a, tuple):
                    target_crate, segs = crates['flscale'], a[1]
                    target = target_crate.resolve(segs)
                    if target is not None:
                        edges.append((crate, mod, target_crate, target, path, line, p))
                    continue
                target = crate.resolve(a)
                if target is not None and target != mod:
                    edges.append((crate, mod, crate, target, path, line, p))
    return edges


def read_layers(arch):
    """The ```layers block of ARCHITECTURE.md: `folder: a b | c | d e` lists the folder's
    children bottom to top, `|` between layers."""
    text = open(arch, encoding='utf-8').read()
    m = re.search(r'```layers\n(.*?)```', text, re.S)
    if not m:
        sys.exit(f'{arch}: no ```layers block')
    layers = {}
    for raw in m.group(1).splitlines():
        line = raw.split('#')[0].strip()
        if not line:
            continue
        folder, rest = line.split(':', 1)
        rank = {}
        for i, group in enumerate(rest.split('|')):
            for name in group.split():
                rank[name] = i
        layers[folder.strip()] = rank
    return layers


def folder_name(crate, mod):
    return '/'.join((crate.name,) + mod)


def main():
    args = sys.argv[1:]
    root = ROOT
    if '--root' in args:
        root = args[args.index('--root') + 1]
    graph_of = args[args.index('--graph') + 1] if '--graph' in args else None
    crates = {}
    for dirname, name in CRATE_NAMES.items():
        src = os.path.join(root, 'crates', dirname, 'src')
        if os.path.isdir(src):
            crates[dirname] = Crate(dirname, src)
    edges = collect(crates)
    layers = read_layers(os.path.join(root, 'ARCHITECTURE.md'))
    # sibling graphs: per (crate, folder), child -> child with the evidence
    graphs = {}
    cross = {}
    for crate, mod, tcrate, target, path, line, p in edges:
        if tcrate is not crate:
            cross.setdefault((crate.name, tcrate.name), []).append((path, line, p))
            continue
        k = 0
        while k < min(len(mod), len(target)) and mod[k] == target[k]:
            k += 1
        if k >= len(target) or k >= len(mod):
            continue  # into an ancestor (its mod.rs declares the module) or a descendant
        folder = mod[:k]
        graphs.setdefault((crate.name, folder), {}).setdefault((mod[k], target[k]), []).append(
            (os.path.relpath(path, root), line, p))
    problems = []
    for (cname, folder), g in sorted(graphs.items()):
        label = '/'.join((cname,) + folder)
        if graph_of == label:
            for (a, b), ev in sorted(g.items()):
                print(f'{a} -> {b}    ({ev[0][0]}:{ev[0][1]} {ev[0][2]})')
        adj = {}
        for a, b in g:
            adj.setdefault(a, set()).add(b)
        for members, cycle in cycles(adj):
            steps = []
            for a, b in zip(cycle, cycle[1:]):
                f, line, p = g[(a, b)][0]
                steps.append(f'{a} -> {b} ({f}:{line} `{p}`)')
            problems.append(f'circle in {label} among {len(members)} modules ({", ".join(members)}), '
                            'for one: ' + ', '.join(steps))
        rank = layers.get(label)
        if rank is None:
            continue
        children = {m[len(folder)] for m in crates[cname].files if len(m) > len(folder) and m[:len(folder)] == folder
                    and m[:len(folder) + 1] not in crates[cname].test_mods}
        for c in sorted(children - set(rank)):
            problems.append(f'{label}/{c} is not in the layer list of {label} in ARCHITECTURE.md')
        for c in sorted(set(rank) - children):
            problems.append(f'{label}: the layer list names {c}, which is not a module there')
        for (a, b), ev in sorted(g.items()):
            if a in rank and b in rank and rank[a] < rank[b]:
                for f, line, p in ev:
                    problems.append(f'upward import in {label}: {f}:{line} `{p}` ({a}, layer {rank[a]}, '
                                    f'imports {b}, layer {rank[b]})')
    if cross.get(('flscale', 'flscale-cli')) or cross.get(('flscale', 'flscale-py')):
        problems.append('the library imports a front end')
    n_edges = sum(len(g) for g in graphs.values())
    print(f'{sum(len(c.files) for c in crates.values())} modules, {n_edges} sibling edges in '
          f'{len(graphs)} folders, {len(layers)} folders with layer lists')
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


def cycles(adj):
    """One cycle per strongly connected component with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj.get(v, ()):
            if w not in index:
                strong(w)
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
                out.append((sorted(comp), shortest_cycle(adj, set(comp))))

    nodes = set(adj) | {w for ws in adj.values() for w in ws}
    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def shortest_cycle(adj, comp):
    """A shortest cycle through the component's first node (breadth-first), for the message."""
    start = sorted(comp)[0]
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(adj.get(v, ())):
            if w not in comp:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return [start, start]


if __name__ == '__main__':
    sys.setrecursionlimit(10000)
    main()

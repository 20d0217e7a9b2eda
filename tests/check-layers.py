#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The layer map of lib/ (tests/layers.txt), checked against the objects and the includes.

tests/layers.txt is written by hand from the design (DESIGN.md, "Layers"): one
line per layer, bottom up, naming the layers it may call.  Each layer is a
folder of lib/.  A library file breaks the map when

  - its object references a symbol that an object of another layer defines,
    and that layer is not one it may call (nm: every call, every variable);
  - it includes a private header of such a layer (inline functions and
    macros are invisible to nm).

A symbol of an "only" line may be referenced only by the folders and files
it names (netlink sockets of their own: dmt_nl_open).

A program outside lib/ that links the library's objects (a "program" line:
devmemtcp-broker) may include only the private headers its line names, and
may reference only the public API (devmemtcp_*, lib/devmemtcp.map) and
what the objects of those headers' folders define.

A folder of an "includes" line (bench) may include, with #include "...",
only its own files and those of the folders its line names (the public
header and the test toolkit): never a private header of lib/ or a test's.

No library file may have more lines than the "lines" line says.

Call circles: files that call functions defined in each other, directly or
round a loop.  Each must lie inside one folder, and there may be at most as
many as the "circles" line says.

Every violation names the file, the symbol or header, and the rule.  Exit 0
when the map holds, 1 when it does not (each violation on a line), 77 when
the build has no objects to read.

usage: check-layers.py SRCDIR BUILDDIR [--circles] [--report]
  --circles    list the call circles with the symbols that make them
  --report     list every violation, grouped by the pair of layers, and
               exit 0 (for measuring a tree that does not hold yet)
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys

LIB_TARGET = 'libdevmemtcp-internal.a.p'
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_EXTS = ('.c', '.h', '.cu')


def fail_usage(msg):
    sys.stderr.write('check-layers.py: %s\n' % msg)
    sys.stderr.write(__doc__.split('usage:')[1].join(['usage:', '']))
    sys.exit(2)


class Map:
    """tests/layers.txt: the layers bottom up, what each may call, the
    programs, the number of circles allowed."""

    def __init__(self, path):
        self.path = path
        self.order = []
        self.may = {}
        self.programs = {}
        self.only = {}
        self.includes = {}
        self.circles = 0
        self.max_lines = 0	# 0: no limit
        with open(path) as f:
            for n, raw in enumerate(f, 1):
                line = raw.split('#', 1)[0].strip()
                if not line:
                    continue
                key, sep, rest = line.partition(':')
                if not sep:
                    raise SystemExit('%s:%d: "NAME: ..." expected' % (path, n))
                words = rest.split()
                key = key.split()
                if key[0] == 'circles' and len(key) == 1:
                    self.circles = int(words[0])
                elif key[0] == 'lines' and len(key) == 1:
                    self.max_lines = int(words[0])
                elif key[0] == 'program' and len(key) == 2:
                    self.programs[key[1]] = words
                elif key[0] == 'only' and len(key) == 2:
                    self.only[key[1]] = words
                elif key[0] == 'includes' and len(key) == 2:
                    self.includes[key[1]] = words
                elif len(key) == 1:
                    for w in words:
                        if w not in self.may:
                            raise SystemExit('%s:%d: %s may call %s, which is not a layer below it'
                                             % (path, n, key[0], w))
                    self.order.append(key[0])
                    self.may[key[0]] = set(words)
                else:
                    raise SystemExit('%s:%d: cannot read "%s"' % (path, n, line))

    def allowed(self, frm, to):
        return frm == to or to in self.may.get(frm, ())

    def rule(self, frm):
        may = sorted(self.may.get(frm, ()), key=self.order.index)
        return '%s may call %s' % (frm, ', '.join(may) if may else 'no other layer')


class Tree:
    """Where each library file is: its layer (its folder under lib/)."""

    def __init__(self, src):
        self.src = src

    def layer(self, rel):
        """The layer of lib/FILE (a path relative to the source root)."""
        parts = rel.split('/')
        if parts[0] != 'lib':
            return None
        if len(parts) == 2:	# lib/config.h and friends: core
            return 'core'
        return parts[1]

    def sources(self):
        for top in ('lib',):
            for dirpath, dirnames, filenames in os.walk(os.path.join(self.src, top)):
                dirnames.sort()
                for name in sorted(filenames):
                    if name.endswith(SOURCE_EXTS):
                        yield os.path.relpath(os.path.join(dirpath, name), self.src)

    def resolve(self, rel, inc, build):
        """The file #include "inc" in rel names, relative to the source root
        (or 'build:' + the generated file), or None (a system header)."""
        here = os.path.dirname(rel)
        # the including file's folder, lib/, the public header, then every
        # folder of lib/ (the include path of the programs and the tests)
        folders = sorted(d for d in os.listdir(os.path.join(self.src, 'lib'))
                         if os.path.isdir(os.path.join(self.src, 'lib', d)))
        for d in [here, 'lib', 'include'] + ['lib/' + f for f in folders]:
            cand = os.path.normpath(os.path.join(d, inc))
            if os.path.exists(os.path.join(self.src, cand)):
                return cand
        for d in ('lib',):
            cand = os.path.normpath(os.path.join(d, inc))
            if build and os.path.exists(os.path.join(build, cand)):
                return 'build:' + cand
        return None


def read_objects(build):
    """{object path: source path} of the library and the programs, from the
    build's compile_commands.json."""
    with open(os.path.join(build, 'compile_commands.json')) as f:
        cmds = json.load(f)
    objs = {}
    for e in cmds:
        out = os.path.join(e['directory'], e['output'])
        src = e['file']
        if not os.path.isabs(src):
            src = os.path.normpath(os.path.join(e['directory'], src))
        objs[out] = src
    return objs


def nm(paths):
    """{object: (defined globals, undefined)} with nm -P."""
    defs = collections.defaultdict(set)
    undef = collections.defaultdict(set)
    paths = [p for p in paths if os.path.exists(p)]
    for i in range(0, len(paths), 200):
        chunk = paths[i:i + 200]
        out = subprocess.run(['nm', '-P', '-A'] + chunk, capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            head, _, rest = line.partition(': ')
            words = rest.split()
            if len(words) < 2:
                continue
            name, kind = words[0], words[1]
            if kind == 'U':
                undef[head].add(name)
            elif kind in 'TDRBVWGSCu' and kind.isupper() or kind == 'u':
                defs[head].add(name)
    return defs, undef


def exported(src):
    """The names of lib/devmemtcp.map (the public API)."""
    names = set()
    with open(os.path.join(src, 'lib', 'devmemtcp.map')) as f:
        for m in re.finditer(r'\b(devmemtcp_[a-z0-9_]+)\s*;', f.read()):
            names.add(m.group(1))
    return names


def circles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv):
    args = [a for a in argv if not a.startswith('--')]
    opts = [a for a in argv if a.startswith('--')]
    if len(args) != 2 or set(opts) - {'--circles', '--report'}:
        fail_usage('SRCDIR and BUILDDIR expected')
    src, build = (os.path.abspath(a) for a in args)
    report = '--report' in opts
    lmap = Map(os.path.join(src, 'tests', 'layers.txt'))
    tree = Tree(src)
    if not shutil.which('nm'):
        print('SKIP: no nm (binutils) here')
        return 77

    objs = read_objects(build)
    lib_objs = {o: s for o, s in objs.items() if os.sep + LIB_TARGET + os.sep in o}
    if not lib_objs or not all(os.path.exists(o) for o in lib_objs):
        print('SKIP: the library objects are not built in %s' % build)
        return 77

    def rel_of(path):
        if path.startswith(src + os.sep):
            return os.path.relpath(path, src)
        if path.startswith(build + os.sep):	# generated: lib/gpu/gather_fatbin.c
            return os.path.relpath(path, build)
        return path

    # per program: its objects
    prog_objs = collections.defaultdict(dict)
    for o, s in objs.items():
        for p in lmap.programs:
            if (os.sep + p + '.p' + os.sep) in o:
                prog_objs[p][o] = s

    all_objs = list(lib_objs) + [o for p in prog_objs.values() for o in p]
    defs, undef = nm(all_objs)
    where = {}		# symbol -> source file (relative) of the library
    for o, s in lib_objs.items():
        for name in defs[o]:
            where[name] = rel_of(s)

    violations = []	# (key for grouping, text)
    graph = collections.defaultdict(set)
    edge_syms = collections.defaultdict(set)

    layer_of = tree.layer

    # calls, by the objects
    for o, s in sorted(lib_objs.items()):
        rel = rel_of(s)
        frm = layer_of(rel)
        for name in sorted(undef[o]):
            if name not in where:
                continue
            target = where[name]
            graph[rel].add(target)
            edge_syms[(rel, target)].add(name)
            to = layer_of(target)
            if frm is None or to is None or lmap.allowed(frm, to):
                continue
            violations.append(((frm, to), '%s: calls %s (%s, layer %s): %s'
                               % (rel, name, target, to, lmap.rule(frm))))

    # symbols only some places may reference
    for name, places in sorted(lmap.only.items()):
        for o, src_path in sorted(list(lib_objs.items()) +
                                  [i for p in prog_objs.values() for i in p.items()]):
            if name not in undef[o]:
                continue
            rel = rel_of(src_path)
            inside = rel[len('lib/'):] if rel.startswith('lib/') else rel
            if any(inside == p or inside.startswith(p + '/') for p in places):
                continue
            violations.append((('only', name), '%s: calls %s, which only %s may call (%s)'
                               % (rel, name, ', '.join(places), os.path.relpath(lmap.path, src))))

    # the size of the library's files
    for rel in tree.sources() if lmap.max_lines else ():
        with open(os.path.join(src, rel), errors='replace') as f:
            n = sum(1 for _ in f)
        if n > lmap.max_lines:
            violations.append((('lines', rel), '%s: %d lines, more than the %d a library file may have (%s): split it along its sections'
                               % (rel, n, lmap.max_lines, os.path.relpath(lmap.path, src))))

    # includes of the library's files
    for rel in tree.sources():
        frm = layer_of(rel)
        if frm is None:
            continue
        with open(os.path.join(src, rel), errors='replace') as f:
            text = f.read()
        for m in INCLUDE_RE.finditer(text):
            target = tree.resolve(rel, m.group(1), build)
            if not target or target.startswith('build:') or not target.startswith('lib/'):
                continue
            to = layer_of(target)
            if to is None or lmap.allowed(frm, to):
                continue
            line = text.count('\n', 0, m.start()) + 1
            violations.append(((frm, to), '%s:%d: includes %s (layer %s): %s'
                               % (rel, line, target, to, lmap.rule(frm))))

    # the programs
    public = exported(src)
    for prog, headers in sorted(lmap.programs.items()):
        allowed_dirs = {h.split('/')[0] for h in headers}
        for o, s in sorted(prog_objs[prog].items()):
            rel = rel_of(s)
            for name in sorted(undef[o]):
                if name not in where or name in public:
                    continue
                to = layer_of(where[name])
                if to in allowed_dirs:
                    continue
                violations.append(((prog, to), '%s: calls %s (%s, layer %s): %s may call the public API and %s'
                                   % (rel, name, where[name], to, prog, ', '.join(headers))))
        dirs = sorted({os.path.dirname(rel_of(s)) for s in prog_objs[prog].values()})
        for d in dirs:
            for name in sorted(os.listdir(os.path.join(src, d))):
                if not name.endswith(SOURCE_EXTS):
                    continue
                rel = os.path.join(d, name)
                with open(os.path.join(src, rel), errors='replace') as f:
                    text = f.read()
                for m in INCLUDE_RE.finditer(text):
                    inc = m.group(1)
                    if os.path.exists(os.path.join(src, d, inc)):
                        continue	# its own
                    target = tree.resolve(rel, inc, build)
                    if not target or not target.startswith('lib/'):
                        continue
                    if target[len('lib/'):] in headers:
                        continue
                    line = text.count('\n', 0, m.start()) + 1
                    violations.append(((prog, layer_of(target)), '%s:%d: includes %s: %s may include devmemtcp.h and %s'
                                       % (rel, line, target, prog, ', '.join(headers))))

    # folders that may include only some others (bench: the public header
    # and the toolkit)
    for folder, allowed in sorted(lmap.includes.items()):
        for dirpath, dirnames, filenames in os.walk(os.path.join(src, folder)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SOURCE_EXTS):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), src)
                with open(os.path.join(src, rel), errors='replace') as f:
                    text = f.read()
                for m in INCLUDE_RE.finditer(text):
                    inc = m.group(1)
                    if os.path.exists(os.path.join(dirpath, inc)):
                        continue	# its own
                    ok = [d for d in allowed if os.path.exists(os.path.join(src, d, inc))]
                    if ok:
                        continue
                    target = tree.resolve(rel, inc, build)
                    for d in ('tests/unit', 'tests/harness', 'tests/lib'):
                        if not target and os.path.exists(os.path.join(src, d, inc)):
                            target = os.path.join(d, inc)
                    line = text.count('\n', 0, m.start()) + 1
                    violations.append(((folder, 'includes'), '%s:%d: includes %s (%s): %s may include only %s'
                                       % (rel, line, inc, target or 'not found', folder,
                                          ', '.join(allowed))))

    # circles
    found = circles(graph)
    for comp in found:
        folders = sorted({layer_of(f) for f in comp})
        if len(folders) > 1:
            violations.append((('circle', '+'.join(folders)),
                               'call circle across folders %s: %s' % (', '.join(folders), ' '.join(comp))))
    if len(found) > lmap.circles:
        violations.append((('circle', 'count'), '%d call circles in lib/: at most %d (%s)'
                           % (len(found), lmap.circles, lmap.path)))

    if '--circles' in opts:
        print('%d call circles' % len(found))
        for comp in found:
            print('circle: ' + ' '.join(comp))
            inside = set(comp)
            for a in comp:
                for b in sorted(graph[a] & inside):
                    print('  %s -> %s: %s' % (a, b, ' '.join(sorted(edge_syms[(a, b)]))))

    if report:
        groups = collections.defaultdict(list)
        for key, text in violations:
            groups[key].append(text)
        print('%d violations of %s' % (len(violations), os.path.relpath(lmap.path, src)))
        for key in sorted(groups):
            print('== %s -> %s: %d' % (key[0], key[1], len(groups[key])))
            for text in groups[key]:
                print('  ' + text)
        return 0
    for _, text in violations:
        print(text)
    if violations:
        print('%d violations of the layer map (%s)' % (len(violations),
                                                       os.path.relpath(lmap.path, src)))
        return 1
    print('layers hold: %d library objects, %d layers, %d call circles'
          % (len(lib_objs), len(lmap.order), len(found)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

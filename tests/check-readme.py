#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The code blocks of README.md and python/README.md marked c or python are
taken from the files themselves (no second copy to drift) and compiled: C
with -Wall -Wextra -Werror against the public header and linked with the
built library; Python compiled, and every name it takes from the devmemtcp
module (`dm.Name`, `from devmemtcp import Name`) checked to exist in the
module this build made, when it made one.

usage: check-readme.py SRCDIR BUILDDIR [--extract PATH]
  --extract PATH: write the block named by PATH's last part, FILE-LANG-N.EXT
  (readme-c-1.c: README.md's first C block; readme-python-1.py,
  python-readme-python-1.py), to PATH: the vm suite runs it.
"""
import ast
import os
import re
import subprocess
import sys
import tempfile

FILES = ("README.md", "python/README.md")
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)


def blocks(src):
    """[(file, line, language, code)] of the c and python blocks."""
    out = []
    for f in FILES:
        text = open(os.path.join(src, f)).read()
        for m in FENCE.finditer(text):
            lang = m.group(1).lower()
            if lang in ("c", "python"):
                line = text.count("\n", 0, m.start()) + 2
                out.append((f, line, lang, m.group(2)))
    return out


def module_names(build):
    """The devmemtcp module's names, from this build's package, or None."""
    pkg = os.path.join(build, "python", "src")
    if not os.path.isdir(os.path.join(pkg, "devmemtcp")):
        return None
    r = subprocess.run([sys.executable, "-c", "import devmemtcp; print('\\n'.join(dir(devmemtcp)))"],
                       env=dict(os.environ, PYTHONPATH=pkg, LD_LIBRARY_PATH=os.path.join(build, "lib")),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return set(r.stdout.split()) if r.returncode == 0 else None


def check_python(where, code, names):
    try:
        tree = ast.parse(code, where)
        compile(tree, where, "exec")
    except SyntaxError as e:
        return ["%s: %s" % (where, e)]
    if names is None:
        return []
    aliases = set()
    used = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == "devmemtcp"}
        elif isinstance(node, ast.ImportFrom) and node.module == "devmemtcp":
            used += [(a.name, node.lineno) for a in node.names]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
           node.value.id in aliases:
            used.append((node.attr, node.lineno))
    return ["%s+%d: devmemtcp has no %s" % (where, n - 1, name)
            for name, n in used if name not in names]


def main(argv):
    extract = None
    if len(argv) == 5 and argv[3] == "--extract":
        extract = argv[4]
    elif len(argv) != 3:
        print(__doc__)
        return 2
    src, build = argv[1], argv[2]
    found = blocks(src)
    if extract:
        # FILE-LANG-N.EXT: readme-c-1.c is README.md's first C block
        seen = {}
        for f, line, lang, code in found:
            stem = f.replace("/", "-").replace(".md", "").lower()
            seen[stem, lang] = seen.get((stem, lang), 0) + 1
            name = "%s-%s-%d.%s" % (stem, lang, seen[stem, lang], "c" if lang == "c" else "py")
            if name == os.path.basename(extract):
                with open(extract, "w") as out:
                    out.write(code)
                return 0
        print("readme: no block %s in %s" % (os.path.basename(extract), " or ".join(FILES)))
        return 1
    langs = {lang for _, _, lang, _ in found}
    if langs != {"c", "python"}:
        print("readme: want C and Python examples in %s, found %s" % (" and ".join(FILES), sorted(langs)))
        return 1
    bad = []
    names = module_names(build)
    cc = os.environ.get("CC", "cc")
    lib = os.path.join(build, "lib")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (f, line, lang, code) in enumerate(found):
            where = "%s:%d" % (f, line)
            if lang == "python":
                bad += check_python(where, code, names)
                continue
            c = os.path.join(tmp, "block%d.c" % i)
            with open(c, "w") as out:
                out.write(code)
            san = []
            if subprocess.run("ldd %s/libdevmemtcp.so | grep -q libasan" % lib, shell=True).returncode == 0:
                san = ["-fsanitize=address,undefined"]
            r = subprocess.run([cc, "-std=gnu11", "-Wall", "-Wextra", "-Werror"] + san +
                               ["-I", os.path.join(src, "include"), "-o", c[:-2], c,
                                "-L", lib, "-ldevmemtcp"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode:
                bad.append("%s: the C block does not build:\n%s" % (where, r.stdout))
    for b in bad:
        print("readme: " + b)
    if bad:
        return 1
    print("readme: %d blocks (%s) build%s" % (
        len(found), ", ".join("%s:%d %s" % (f, line, lang) for f, line, lang, _ in found),
        "" if names is not None else "; the Python names are not checked: no Python package in this build"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

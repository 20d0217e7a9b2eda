#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Every source file names its licence with an SPDX identifier in its first
lines, and it is the one COPYING says: GPL-2.0-only for the kernel module
(sim/module/), LGPL-2.1-or-later OR MIT for everything else.

usage: check-spdx.py SRCDIR

Source files: code (C, CUDA, C++, Python, shell), build files (meson.build,
meson_options.txt, Makefile, Kbuild, native files, pyproject.toml, linker
maps), configuration (systemd units, the broker's policy, suppressions),
man pages and every script with a #! line.  Not data: recorded netlink
replies, fuzz corpora, benchmark results, the ABI baseline, Markdown, and
debian/ (debian/copyright states its files' licence in Debian's format).
The files are git's tracked ones, or in an unpacked release tarball (no
.git) every file but build trees.
"""
import os
import re
import subprocess
import sys

LIB = "LGPL-2.1-or-later OR MIT"
KERNEL = "GPL-2.0-only"
SOURCE_EXT = {".c", ".h", ".cu", ".cpp", ".py", ".pyi", ".sh", ".build", ".map",
              ".ini", ".toml", ".in", ".service", ".socket", ".conf", ".supp"}
SOURCE_NAMES = {"meson_options.txt", "Makefile", "Kbuild"}
# not source: data, documents, and what debian/copyright covers
SKIP = re.compile(r"^(tests/unit/data/|tests/fuzz/corpus/|bench/results/|LICENSES/|debian/)")
KNOWN_MISSING = set()
# caches and patches of an unpacked tarball (build trees are found by
# their meson-private directory, whatever their name)
SKIP_DIRS = re.compile(r"^(\.git|\.device-build|\.pc|(.*/)?__pycache__|"
                       r".*/\.gpu-deps|(python/)?\.mesonpy-[^/]*)$")


def files(src):
    if os.path.exists(os.path.join(src, ".git")):
        out = subprocess.run(["git", "-C", src, "ls-files", "-z"], check=True,
                             stdout=subprocess.PIPE).stdout.decode()
        return [f for f in out.split("\0") if f]
    found = []
    for root, dirs, names in os.walk(src):
        rel = os.path.relpath(root, src)
        rel = "" if rel == "." else rel + "/"
        dirs[:] = [d for d in dirs if not SKIP_DIRS.match(rel + d) and
                   not os.path.isdir(os.path.join(root, d, "meson-private"))]
        found += [rel + n for n in names]
    return found


def is_source(src, f):
    path = os.path.join(src, f)
    if SKIP.match(f) or os.path.islink(path) or not os.path.isfile(path):
        return False
    name = os.path.basename(f)
    if os.path.splitext(name)[1] in SOURCE_EXT or name in SOURCE_NAMES:
        return True
    if f.startswith("man/") and re.search(r"\.[1-8]$", name):
        return True
    with open(path, "rb") as fh:
        return fh.read(2) == b"#!"


def identifier(path):
    with open(path, errors="replace") as fh:
        head = [next(fh, "") for _ in range(5)]
    for line in head:
        m = re.search(r"SPDX-License-Identifier: (.*?)\s*(\*/|-->)?\s*$", line)
        if m:
            return m.group(1)
    return None


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    src = argv[1]
    bad = []
    checked = 0
    for f in sorted(files(src)):
        if not is_source(src, f):
            continue
        checked += 1
        want = KERNEL if f.startswith("sim/module/") else LIB
        have = identifier(os.path.join(src, f))
        if have is None and f in KNOWN_MISSING:
            continue
        if have is None:
            bad.append("%s: no SPDX-License-Identifier in its first 5 lines (want %s)" % (f, want))
        elif have != want:
            bad.append("%s: SPDX-License-Identifier: %s, want %s (COPYING)" % (f, have, want))
    for b in bad:
        print("spdx: " + b)
    if bad:
        print("spdx: %d of %d source files without the licence COPYING gives them" %
              (len(bad), checked))
        return 1
    print("spdx: %d source files, each with its SPDX identifier" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

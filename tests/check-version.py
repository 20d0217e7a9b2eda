#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The version is written once, on meson.build's project() line, and
everything else reads it: the shared library's file name, pkg-config's
devmemtcp.pc, the installed man pages' .TH lines, the Python package's
__version__, `devmemtcp --version`, and the header's DEVMEMTCP_VERSION_*
macros and debian/changelog's latest entry, which must say the same.  No
other tracked file may write it (examples in prose, NEWS and results aside).

usage: check-version.py SRCDIR BUILDDIR DEVMEMTCP-PROGRAM
"""
import glob
import json
import os
import re
import subprocess
import sys

# files that may carry the version string as text: the history, examples
# of what devmemtcp_version() returns (its page, the Python docstring), a
# test's note on what callers of the first release lack, benchmark results
MAY_SAY_IT = re.compile(r"^(meson\.build|NEWS|debian/changelog|debian/libdevmemtcp0\.symbols|man/man3/devmemtcp_version\.3|"
                        r"python/src/ext/module\.c|tests/unit/test-drm\.c|"
                        r"bench/results/.*|tests/abi/libdevmemtcp\.abi)$")


def main(argv):
    if len(argv) != 4:
        print(__doc__)
        return 2
    src, build, tool = argv[1:]
    version = json.load(open(os.path.join(build, "meson-info", "intro-projectinfo.json")))["version"]
    major, minor, micro = version.split(".")
    bad = []

    def want(what, have):
        if have != version:
            bad.append("%s says %r, meson.build %r" % (what, have, version))

    # the header's macros
    h = open(os.path.join(src, "include", "devmemtcp.h")).read()
    macros = [re.search(r"#define DEVMEMTCP_VERSION_%s (\d+)" % k, h) for k in ("MAJOR", "MINOR", "MICRO")]
    want("include/devmemtcp.h's DEVMEMTCP_VERSION_*",
         ".".join(m.group(1) if m else "?" for m in macros))
    # the shared library's file: libdevmemtcp.so.SOVERSION.MINOR.MICRO
    libs = [p for p in glob.glob(os.path.join(build, "lib", "libdevmemtcp.so.*.*.*")) if os.path.isfile(p)]
    if len(libs) != 1:
        bad.append("no single lib/libdevmemtcp.so.X.Y.Z in %s: %s" % (build, libs))
    elif not libs[0].endswith(".%s.%s" % (minor, micro)):
        bad.append("%s does not end in the version's .%s.%s" % (libs[0], minor, micro))
    # pkg-config (builds that install have a .pc)
    pc = os.path.join(build, "meson-private", "devmemtcp.pc")
    if os.path.exists(pc):
        m = re.search(r"^Version: (\S+)$", open(pc).read(), re.M)
        want("devmemtcp.pc", m.group(1) if m else None)
    # the man pages as installed
    pages = glob.glob(os.path.join(build, "man", "*.[1-8]"))
    if not pages:
        bad.append("no man page built in %s/man" % build)
    for p in pages:
        m = re.search(r'^\.TH \S+ \S+ \S+ "libdevmemtcp ([^"]*)"', open(p).read(), re.M)
        want("man page " + os.path.basename(p), m.group(1) if m else None)
    # the Python package, where it is built
    pyv = os.path.join(build, "python", "src", "devmemtcp", "_version.py")
    if os.path.exists(pyv):
        m = re.search(r'^__version__ = "([^"]*)"$', open(pyv).read(), re.M)
        want("devmemtcp.__version__", m.group(1) if m else None)
    # the program
    out = subprocess.run([tool, "--version"], stdout=subprocess.PIPE, text=True).stdout
    if out != "devmemtcp %s (libdevmemtcp %s)\n" % (version, version):
        bad.append("devmemtcp --version says %r, meson.build %r" % (out, version))
    # Debian's changelog: its latest entry (without a Debian revision, a
    # native package, or with one)
    cl = os.path.join(src, "debian", "changelog")
    if os.path.exists(cl):
        m = re.match(r"\S+ \(([^)-]+)(-[^)]*)?\)", open(cl).readline())
        want("debian/changelog", m.group(1) if m else None)
    # no other copy
    if os.path.exists(os.path.join(src, ".git")):
        tracked = subprocess.run(["git", "-C", src, "ls-files", "-z"], stdout=subprocess.PIPE,
                                 check=True).stdout.decode().split("\0")
        token = re.compile(r"(?<![\w.])%s(?![\w.]*\d)" % re.escape(version))
        for f in tracked:
            path = os.path.join(src, f)
            if not f or MAY_SAY_IT.match(f) or os.path.islink(path) or not os.path.isfile(path):
                continue
            try:
                text = open(path, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if token.search(line):
                    bad.append("%s:%d writes the version itself (read it from meson.build): %s" %
                               (f, n, line.strip()))
    for b in bad:
        print("version: " + b)
    if bad:
        return 1
    print("version: %s everywhere (library, pkg-config, man pages, Python, the program, "
          "the header, debian/changelog)" % version)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

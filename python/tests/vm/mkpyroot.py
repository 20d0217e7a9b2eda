# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Make a small Python tree for the QEMU guest of the vm suite from this
interpreter (Debian's /usr/bin/python3):

  OUT/bin/python3                 the interpreter's binary
  OUT/lib/python3X.zip            its standard library and pytest (with the
                                  modules it imports), compiled, in one file
  OUT/lib/python3.X/os.py         the landmark by which Python finds its home
  OUT/lib/python3.X/lib-dynload/  the extension modules, without those that
                                  pull in large libraries (ssl, sqlite, ...)

Tests, GUI, build and packaging tools are left out.  Python finds its
standard library relative to its binary, so the guest runs OUT/bin/python3
where the vm runner copies OUT (the same absolute path), with every shared
library the ELF files need.  Few files: the runner's per-file copying stays
cheap.  Rebuilt only when the interpreter or pytest changed (OUT/.stamp).

usage: python3 mkpyroot.py OUT
"""

import os
import shutil
import sys
import sysconfig
import zipfile

import pytest

SKIP_DIRS = {"test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip",
             "lib2to3", "pydoc_data", "distutils", "dist-packages",
             "site-packages", "venv"}
SKIP_EXT = ("_ssl", "_hashlib", "_sqlite3", "_tkinter", "_dbm", "_gdbm",
            "readline", "_curses", "_curses_panel")


def skipped(name):
    return name in SKIP_DIRS or name.startswith("config-") or name == "__phello__"


def add_tree(z, top):
    """Every module and package of directory top (not itself a package)."""
    for n in sorted(os.listdir(top)):
        p = os.path.join(top, n)
        if skipped(n) or n == "__pycache__":
            continue
        if n.endswith(".py") or os.path.isfile(os.path.join(p, "__init__.py")):
            z.writepy(p)


def pytest_modules():
    """Top-level modules of dist-packages that importing pytest loads."""
    import _pytest.pytester  # noqa: F401  (lazily imported parts)
    root = os.path.dirname(os.path.dirname(pytest.__file__))
    tops = set()
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None) or ""
        if f.startswith(root + os.sep):
            tops.add(f[len(root) + 1:].split(os.sep)[0])
    tops.discard("_distutils_hack")
    return root, sorted(tops)


def main():
    out = sys.argv[1]
    ver = "python%d.%d" % sys.version_info[:2]
    stamp = "%s %s %s\n" % (sys.executable, sys.version.replace("\n", " "), pytest.__version__)
    try:
        if open(os.path.join(out, ".stamp")).read() == stamp:
            return 0
    except OSError:
        pass
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "bin"))
    shutil.copy2(os.path.realpath(sys.executable), os.path.join(out, "bin", "python3"))
    stdlib = sysconfig.get_paths()["stdlib"]
    lib = os.path.join(out, "lib", ver)
    os.makedirs(os.path.join(lib, "lib-dynload"))
    shutil.copy2(os.path.join(stdlib, "os.py"), lib)
    dyn = os.path.join(stdlib, "lib-dynload")
    for n in os.listdir(dyn):
        if n.split(".")[0] not in SKIP_EXT:
            shutil.copy2(os.path.join(dyn, n), os.path.join(lib, "lib-dynload"))
    root, tops = pytest_modules()
    zpath = os.path.join(out, "lib", "python%d%d.zip" % sys.version_info[:2])
    with zipfile.PyZipFile(zpath, "w", optimize=0) as z:
        add_tree(z, stdlib)
        for t in tops:
            z.writepy(os.path.join(root, t))
    with open(os.path.join(out, ".stamp"), "w") as f:
        f.write(stamp)
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(out) for n in ns)
    print("mkpyroot: %s: %.1f MiB (stdlib of %s, %s)" % (out, size / 2**20, ver, " ".join(tops)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

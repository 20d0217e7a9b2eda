#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Run on the build machine (Debian, with libmnl-dev and python3-pytest
# installed by scripts/deps.sh): copy what python/tests/gpu-run.sh needs on
# the GPU machine, which has neither, into python/.gpu-deps (ignored by git;
# carry it there).  Downloads nothing: the files come from the installed
# Debian packages.
#   libmnl/      libmnl.h, libmnl.so.0 and a pkg-config file (libmnl0, libmnl-dev)
#   python/      pytest and the pure-Python modules it imports (python3-pytest)
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/python/.gpu-deps
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
rm -rf "$out"
mkdir -p "$out/libmnl/include/libmnl" "$out/libmnl/lib/pkgconfig" "$out/python"
cp /usr/include/libmnl/libmnl.h "$out/libmnl/include/libmnl/"
so=$(readlink -f "/usr/lib/$arch/libmnl.so.0")
cp "$so" "$out/libmnl/lib/"
ln -s "$(basename "$so")" "$out/libmnl/lib/libmnl.so.0"
ln -s libmnl.so.0 "$out/libmnl/lib/libmnl.so"
ver=$(dpkg-query -W -f='${Version}' libmnl-dev | sed 's/-.*//')
# prefix is rewritten by gpu-run.sh with the path on the GPU machine
cat >"$out/libmnl/lib/pkgconfig/libmnl.pc" <<PC
prefix=@PREFIX@
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: libmnl
Description: Minimalistic Netlink communication library (Debian $ver, copied)
Version: $ver
Libs: -L\${libdir} -lmnl
Cflags: -I\${includedir}
PC
# pytest with what it imports from Debian's dist-packages (pure Python)
/usr/bin/python3 - "$out/python" <<'PY'
import os, shutil, sys
import pytest, _pytest.pytester  # noqa: F401  (pull in the lazily imported parts)
dst = sys.argv[1]
root = "/usr/lib/python3/dist-packages"
tops = set()
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None) or ""
    if f.startswith(root + "/"):
        tops.add(f[len(root) + 1:].split("/")[0])
tops.discard("_distutils_hack")
for t in sorted(tops):
    src = os.path.join(root, t)
    if os.path.isdir(src):
        shutil.copytree(src, os.path.join(dst, t), ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy(src, dst)
print("python:", " ".join(sorted(tops)))
PY
du -sh "$out"

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The Python package as an index would get it, offline, with Debian
# bookworm's meson-python 0.12 and pip 23: the sdist (meson dist's tarball of
# the committed tree, with the library's source), a wheel built from that
# sdist alone, its file list (the package, its dist-info and the licence
# texts, nothing else), and an import in a fresh virtual environment with
# nothing but the wheel.  Writes the sdist and the wheel to OUTDIR (default a
# temporary directory, removed).  -Dcuda=disabled keeps nvcc out of it: the
# gather kernels are the library's, tested elsewhere.
# usage: scripts/check-wheel.sh [OUTDIR]     exit 0, 1 failed, 77 skipped
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/need-tool.sh"
py=/usr/bin/python3
need_tool "$py" python3
"$py" -c 'import mesonpy' 2>/dev/null || need_tool mesonpy-module-of-$py python3-mesonpy
"$py" -m pip --version >/dev/null 2>&1 || need_tool pip-module-of-$py python3-pip
"$py" -c 'import ensurepip' 2>/dev/null || need_tool venv-module-of-$py python3-venv
need_tool git git
tmp=$(mktemp -d "${TMPDIR:-/tmp}/devmemtcp-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out=${1:-$tmp/out}
mkdir -p "$out"
t0=$(date +%s)
fail() { echo "check-wheel: $*"; exit 1; }

if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
	echo "check-wheel: note: the tree has uncommitted changes; the sdist holds what is committed"
fi
# the sdist, through meson-python's PEP 517 hook (what "python -m build
# --sdist" calls)
(cd "$src" && "$py" -c '
import sys, mesonpy
print(mesonpy.build_sdist(sys.argv[1], {"setup-args": ["-Dcuda=disabled"]}))
' "$out") >"$tmp/sdist.log" 2>&1 || { cat "$tmp/sdist.log"; fail "the sdist could not be built"; }
sdist=$(ls "$out"/devmemtcp-*.tar.gz)
t1=$(date +%s)
echo "check-wheel: sdist $(basename "$sdist") ($(($(stat -c %s "$sdist") / 1024)) KiB, $((t1 - t0)) s)"
for f in meson.build pyproject.toml PKG-INFO COPYING LICENSES/LGPL-2.1-or-later.txt LICENSES/MIT.txt \
	include/devmemtcp.h lib/devmemtcp.map python/src/devmemtcp/__init__.py; do
	tar -tzf "$sdist" | grep -qx "devmemtcp-[0-9.]*/$f" || fail "the sdist has no $f"
done

# a wheel from the sdist alone: no index, no build isolation (the system's
# meson-python), the options as pip 23 passes them
"$py" -m pip wheel --no-index --no-deps --no-build-isolation \
	--config-settings=setup-args=-Dcuda=disabled -w "$out" "$sdist" >"$tmp/wheel.log" 2>&1 ||
	{ cat "$tmp/wheel.log"; fail "no wheel from the sdist"; }
wheel=$(ls "$out"/devmemtcp-*.whl)
t2=$(date +%s)
echo "check-wheel: wheel $(basename "$wheel") ($(($(stat -c %s "$wheel") / 1024)) KiB, $((t2 - t1)) s)"
"$py" - "$wheel" <<'PY' || fail "the wheel holds more or less than the package"
import re, sys, zipfile
names = sorted(zipfile.ZipFile(sys.argv[1]).namelist())
for n in names:
    print("  " + n)
want = [(r"devmemtcp-[\d.]+\.dist-info/(METADATA|WHEEL|RECORD|COPYING)", 4),
        (r"devmemtcp/(__init__\.py|_version\.py|_devmemtcp\.pyi|py\.typed|torch\.py)", 5),
        (r"devmemtcp/_devmemtcp\.cpython-[^/]*\.so", 1),
        (r"devmemtcp/LICENSES/(LGPL-2\.1-or-later|MIT)\.txt", 2)]
extra = [n for n in names if not any(re.fullmatch(w, n) for w, _ in want)]
missing = [w for w, k in want if sum(1 for n in names if re.fullmatch(w, n)) != k]
for n in extra:
    print("check-wheel: not part of the package: " + n)
for w in missing:
    print("check-wheel: missing or doubled: " + w)
sys.exit(1 if extra or missing else 0)
PY

# a fresh virtual environment with nothing but the wheel
"$py" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --no-index --no-deps --quiet "$wheel" || fail "pip cannot install the wheel"
(cd "$tmp" && "$tmp/venv/bin/python" -c '
import os, sys, devmemtcp as dm
assert os.path.dirname(dm.__file__).startswith(sys.prefix), dm.__file__
assert dm.__version__ == dm.version(), (dm.__version__, dm.version())
with dm.Context() as ctx:
    pass
print("check-wheel: imported devmemtcp %s from the venv; library %s" % (dm.__version__, dm.version()))
') || fail "the wheel's package does not import in a fresh venv"
# nothing of the C project beside the package
stray=$(cd "$tmp/venv" && find . \( -name 'devmemtcp*' -o -name 'libdevmemtcp*' -o -name 'libnccl*' \
	-o -name '*.pc' -o -name 'devmemtcp.h' \) -not -path './lib/python3*/site-packages/devmemtcp*')
[ -z "$stray" ] || fail "the wheel installed more than the package: $stray"
echo "check-wheel: OK in $(($(date +%s) - t0)) s"

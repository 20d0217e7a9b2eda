#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The binding's GPU tests on the GPU machine (Ubuntu 24.04, CUDA, Python with
# PyTorch and CuPy in /opt/torch/.venv; no meson-python, no libmnl, no
# cmocka, no package index).  From the repository root:
#
#   sh python/tests/gpu-run.sh [PYTHON]      (default /opt/torch/.venv/bin/python)
#
# .gpu-deps must have been made on the build machine with
# scripts/gpu-deps.sh and carried along (libmnl, and pytest if the
# interpreter lacks it); scripts/gpu-env.sh unpacks it.  Builds python/ with Meson directly (the library as
# a subproject, tests disabled, the fake kernel on), then runs the GPU tests,
# the host tests and the benchmark with that interpreter.  Exit status: the
# tests'.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${1:-/opt/torch/.venv/bin/python}
build=${DEVMEMTCP_PY_BUILD:-$repo/.device-build/python}
if [ ! -d "$repo/.gpu-deps" ] && ! pkg-config --exists libmnl 2>/dev/null; then
	echo "gpu-run: no libmnl here and no .gpu-deps: run scripts/gpu-deps.sh on the build machine and carry .gpu-deps" >&2
	exit 1
fi
echo "== $("$py" -c 'import sys; print(sys.version.split()[0])') at $py; $(uname -r); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1 || echo 'no nvidia-smi')"
mkdir -p "$build"
. "$repo/scripts/gpu-env.sh"
gpu_deps "$repo" "$build/deps" || exit 1
printf "[binaries]\npython = '%s'\n" "$py" >"$build/native.ini"
if [ -f "$build/build/build.ninja" ]; then
	meson setup --reconfigure "$build/build" "$repo/python" --native-file "$build/native.ini" -Dtest_hooks=true >"$build/setup.log" 2>&1 ||
		{ cat "$build/setup.log"; exit 1; }
else
	meson setup "$build/build" "$repo/python" --native-file "$build/native.ini" -Dtest_hooks=true >"$build/setup.log" 2>&1 ||
		{ cat "$build/setup.log"; exit 1; }
fi
sed -n '/Features/,$p' "$build/setup.log" | grep -v '^$' || true
ninja -C "$build/build" >"$build/ninja.log" 2>&1 || { tail -50 "$build/ninja.log"; exit 1; }
grep -E 'warning' "$build/ninja.log" || true

export LD_PRELOAD="$build/build/tests/libdevmemtcp-emu.so"
export PYTHONPATH="$build/build/src"
export PYTHONDONTWRITEBYTECODE=1 DEVMEMTCP_LOG=none
if ! "$py" -c 'import pytest' 2>/dev/null && [ -n "$GPU_DEPS_PYTHONPATH" ]; then
	PYTHONPATH="$PYTHONPATH:$GPU_DEPS_PYTHONPATH"
	echo "== pytest from .gpu-deps (Debian's, pure Python)"
fi
"$py" -c 'import devmemtcp, torch; print("== devmemtcp", devmemtcp.version(), "releases from any thread:", devmemtcp.RELEASE_ANY_THREAD, "| torch", torch.__version__, "CUDA", torch.version.cuda)' || true
"$py" -c 'import cupy; print("== cupy", cupy.__version__)' 2>/dev/null || echo "== no cupy"
"$py" -c 'import jax; print("== jax", jax.__version__, jax.devices())' 2>/dev/null || echo "== no jax"
rc=0
"$py" -m pytest -v -rs -p no:cacheprovider -p no:warnings "$repo/python/tests/gpu" "$repo/python/tests/host" || rc=$?
echo "== benchmark"
"$py" "$repo/bench/python-rx.py" || rc=$?
exit $rc

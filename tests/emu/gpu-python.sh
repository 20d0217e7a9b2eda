#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# devmemtcp.torch and the Python pipeline on the GPU machine, with the
# builds tests/emu/gpu-run.sh made (run that first, same BUILD):
#   1. python/tests/emu on CUDA tensors over the emulated NIC
#      (DEVMEMTCP_TEST_DEVICE=cuda): DataLoader(num_workers=4) with fork
#      and spawn, the threaded reader on four flows, real senders, every
#      sample compared; then every token back and the NIC as it was;
#   2. bench/python-pipeline.py on CUDA (the fake kernel's receives,
#      gathered into a torch tensor): Python against C in one run, the
#      report in OUTDIR/python-pipeline-h200.md, ending with
#        SUMMARY pypipe size=1MiB c_gbps=X py_gbps=Y ratio=Y/X
#      (and size=256KiB).
# usage (from anywhere, as root): tests/emu/gpu-python.sh [OUTDIR]
#   OUTDIR default $OUT, else ./emu-gpu-out
# Env: BUILD (default .device-build/emu), PYTHON (default
#   /opt/torch/.venv/bin/python).  Exit: 0 both passed, 1 otherwise.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-$PWD/emu-gpu-out}}
build=${BUILD:-$src/.device-build/emu}
pybuild=$build-python
py=${PYTHON:-/opt/torch/.venv/bin/python}
mkdir -p "$out"
if [ ! -f "$build/tests/emu/libdevmemtcp-emu.so" ] || [ ! -f "$pybuild/tests/libdevmemtcp-emu.so" ]; then
	echo "gpu-python: no builds in $build and $pybuild: run tests/emu/gpu-run.sh first" >&2
	exit 1
fi
# the Debian packages gpu-run.sh unpacked (iproute2, libmnl): on PATH and
# the library path as there
. "$src/scripts/gpu-env.sh"
gpu_deps "$src" "$(dirname "$build")/emu-gpu-deps" || { echo "gpu-python: unpacking .gpu-deps failed" >&2; exit 2; }
export DEVMEMTCP_LOG=none
rc=0
echo "== python-emu on CUDA"
env EMU_BUILD="$build" EMU_PYTHONPATH="$pybuild/src" DEVMEMTCP_TEST_DEVICE=cuda \
	DEVMEMTCP_LIBCUDA="$build/tests/emu/libdevmemtcp-emucuda.so" \
	timeout -k 10 300 sh "$src/tests/emu/emu-python.sh" "$py" -v || rc=1
echo "== python-pipeline on CUDA"
env LD_PRELOAD="$pybuild/tests/libdevmemtcp-emu.so" PYTHONPATH="$pybuild/src" \
	PYTHONDONTWRITEBYTECODE=1 \
	timeout -k 10 300 "$py" "$src/bench/python-pipeline.py" --out "$out/python-pipeline-h200.md" || rc=1
grep '^SUMMARY' "$out/python-pipeline-h200.md" 2>/dev/null || rc=1
echo "== exit $rc"
exit $rc

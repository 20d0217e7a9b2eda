#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The NCCL plugin's devmem paths on the GPU machine (one NVIDIA GPU, no
# devmem NIC): nccl/tests/emu-nccl.sh with the machine's driver, two ranks
# of the harness that plays NCCL (test-nccl-net) over the emulated devmem
# NIC, into and out of GPU memory: devmem RX into host memory, then into a
# CUDA buffer gathered by the plugin, then with NCCL's device unpack (the
# harness copies each receive's queue entries on the GPU and hands it back
# with irecvConsumed).  Every byte checked, every byte through devmem RX
# and TX, no binding, token or page left, both NICs as found.
# Builds what it needs first (with the libraries of .gpu-deps,
# scripts/gpu-deps.sh).  Needs root (network namespaces).
#
# usage: nccl/tests/gpu-emu-nccl.sh [BYTES]
#   BYTES   per rank and direction (default 256M)
# Env: BUILD (default .device-build/emu, shared with tests/emu/gpu-run.sh);
#      OUT (the device runner's): the logs are copied there.
# Exit: 0 passed, 1 a check failed, 2 the build failed, 3 no GPU.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$src/.device-build/emu}
bytes=${1:-256M}
log() { echo "[gpu-emu-nccl] $*" >&2; }

nvidia-smi -L >/dev/null 2>&1 || { log "no NVIDIA GPU visible"; exit 3; }
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader | head -n1
echo "tree: ${DEVMEMTCP_TREE:-$(git -C "$src" describe --always --dirty 2>/dev/null || echo unknown)}"
. "$src/scripts/gpu-env.sh"
gpu_deps "$src" "$(dirname "$build")/emu-gpu-deps" || { log "unpacking .gpu-deps failed"; exit 2; }
export PATH=$PATH:/usr/local/cuda/bin
opts=(-Dtest_hooks=true -Dvm_tests=false -Dpython=disabled -Dbuildtype=release -Dcuda=enabled)
if [ -f "$build/build.ninja" ]; then
	meson setup --reconfigure "$build" "$src" "${opts[@]}" >"$build.setup.log" 2>&1
else
	mkdir -p "$(dirname "$build")"
	meson setup "$build" "$src" "${opts[@]}" >"$build.setup.log" 2>&1
fi || { cat "$build.setup.log"; log "meson setup failed"; exit 2; }
ninja -C "$build" tests/emu/libdevmemtcp-emu.so tests/emu/libdevmemtcp-emucuda.so \
	tests/emu/emuctl tests/lib/fakecuda/libfakecuda.so nccl/libnccl-net-devmemtcp.so \
	nccl/tests/test-nccl-net || { log "the build failed"; exit 2; }
rc=0
EMU_BUILD=$build sh "$src/nccl/tests/emu-nccl.sh" --driver system --bytes "$bytes" 2>&1 |
	tee "${OUT:-/tmp}/gpu-emu-nccl.log" || rc=1
log "exit $rc"
exit $rc

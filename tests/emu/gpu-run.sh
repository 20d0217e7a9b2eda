#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The emulated devmem NIC on the GPU machine (a machine with an NVIDIA GPU
# but no devmem NIC), in one run: real bytes from a TCP peer, through the
# emulated NIC over a veth pair, into CUDA memory.
#   1. examples/dataloader.c's receiver and sender, for each RX buffer
#      layout of the simulated NIC (one NIC page per buffer, 2 KiB buffers,
#      packed payloads of mixed sizes, 16 KiB NIC pages): SAMPLES samples
#      (2048, about 1 GiB) gathered into GPU sample buffers, every byte
#      read back and checked against the sender's pattern, every token
#      back and the NIC as found afterwards;
#   2. examples/python/torch_loader.py on CUDA (samples compared on the
#      GPU) and single fragments viewed with torch.from_dlpack and compared
#      on the GPU (tests/emu/views.py);
#   3. the random-fault run on CUDA memory (tests/emu/emu-faults.sh --gpu);
#   4. bench/emu-nic per layout: GB/s into GPU memory and the CPU cost of
#      each stage of a receive, the emulation's own apart, the copies it
#      issued and their bytes; again with each other way the emulator can
#      copy (DEVMEMTCP_EMU_COPY=runs, batch; scatter is the default), and
#      the bound: the same sender through a plain socket into pinned memory
#      and one host-to-device copy per receive (bench/emu-nic --plain).
# Builds what it needs first (with the libraries of .gpu-deps,
# scripts/gpu-deps.sh), and writes OUTDIR/emulated-nic-h200.md (also
# copied to bench/results/ of this tree), ending with one line per layout
#   SUMMARY emu layout=<mode> bytes=<n> bad=<n> tokens_outstanding=<n> gbps=<x>
# and every log, in OUTDIR/emu-gpu-run.tar.gz.  Needs root (network
# namespaces).
#
# usage (from anywhere): tests/emu/gpu-run.sh [OUTDIR]
#   OUTDIR   default $OUT (the device runner's), else ./emu-gpu-out
# Env: TIME_BUDGET (seconds, default 540), BUILD (default .device-build/emu),
#   PYTHON (default /opt/torch/.venv/bin/python; GPU_RUN_FAKE=1 without it:
#   a python3 with PyTorch and numpy, else python3: the Python steps skip),
#   SAMPLES (2048),
#   (a second run reuses both builds: a few seconds instead of minutes)
#   BENCH_BYTES (1G), GPU_RUN_FAKE=1: check this script on a machine without
#   a GPU (tests/lib/fakecuda in place of the driver; numbers meaningless)
# Exit: 0 all passed, 1 a check failed, 2 the build failed, 3 no GPU.
set -uo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-$PWD/emu-gpu-out}}
build=${BUILD:-$src/.device-build/emu}
pybuild=$build-python
py=${PYTHON:-/opt/torch/.venv/bin/python}
samples=${SAMPLES:-2048}
bench_bytes=${BENCH_BYTES:-1G}
budget=${TIME_BUDGET:-540}
fake=${GPU_RUN_FAKE:-0}
# the check of the script without the venv: the machine's first python3
# with PyTorch (Debian's, CPU), else its first python3
if [ "$fake" = 1 ] && [ -z "${PYTHON:-}" ] && [ ! -x "$py" ]; then
	py=$(command -v python3)
	for p in /usr/bin/python3 "$py"; do
		if "$p" -c 'import torch, numpy' 2>/dev/null; then
			py=$p
			break
		fi
	done
fi
start=$(date +%s)
deadline=$((start + budget))
work=$(mktemp -d "${TMPDIR:-/tmp}/emu-gpu-run.XXXXXX")
stage=$work/emu-gpu-run
mkdir -p "$out" "$stage/logs"
report=$stage/emulated-nic-h200.md
steps=$work/steps.md
results=$stage/logs/results.txt
: >"$steps"
: >"$results"
failed=0
child=

log() { echo "[emu-gpu-run +$(($(date +%s) - start))s] $*" >&2; }

# step NAME LIMIT CMD...: CMD with a time limit, its output in logs/NAME.log
step() {
	local name=$1 limit=$2 rc t0 left status
	shift 2
	left=$((deadline - $(date +%s) - 10))
	if [ "$left" -lt 20 ]; then
		log "$name: skipped, ${left}s left of the budget"
		echo "| $name | skipped (time budget) | - |" >>"$steps"
		failed=1
		return 1
	fi
	[ "$limit" -gt "$left" ] && limit=$left
	log "$name (limit ${limit}s)"
	t0=$(date +%s)
	timeout -k 10 "$limit" "$@" >"$stage/logs/$name.log" 2>&1 </dev/null &
	child=$!
	wait "$child"
	rc=$?
	child=
	case $rc in
	0) status=ok ;;
	124 | 137) status="TIMED OUT after ${limit}s" ;;
	*) status="FAILED (exit $rc)" ;;
	esac
	if [ $rc != 0 ]; then
		failed=1
		tail -n 25 "$stage/logs/$name.log" | sed "s/^/  [$name] /" >&2
	fi
	log "$name: $status in $(($(date +%s) - t0))s"
	echo "| $name | $status | $(($(date +%s) - t0)) |" >>"$steps"
	return $rc
}

write_report() {
	{
		echo "# The emulated devmem NIC on a GPU machine ($(date -u +%Y-%m-%d))"
		echo
		echo "Real TCP payload from a peer in another network namespace, through the"
		echo "emulated devmem NIC (tests/emu, a test tool) over a veth pair, into CUDA"
		echo "memory; produced by tests/emu/gpu-run.sh."
		echo
		cat "$work/machine.md"
		echo
		echo "| step | result | s |"
		echo "|---|---|---:|"
		cat "$steps"
		echo
		echo "## 1, 4. Data loader and receive benchmark per RX buffer layout"
		echo
		echo "| layout | loader bytes (checked) | bad (loader + benchmark) | tokens outstanding after | NIC as found | loader s | benchmark GB/s into GPU memory | us/receive: emulation (placing + copies + socket) | copies issued per receive (transfers x bytes) | library receive | gather | release |"
		echo "|---|---:|---:|---:|---|---:|---:|---|---|---:|---:|---:|"
		grep '^RESULT layout=' "$results" | while read -r line; do
			v() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
			echo "| $(v layout) | $(v bytes) | $(v bad) | $(v tokens_outstanding) | $(v nic_as_found) | $(v loader_s) | $(v gbps) | $(v bench_us_emu) + $(v bench_us_copy) + $(v bench_us_sys) | $(v bench_calls) ($(v bench_xfers) x $(v bench_xfer_bytes)) | $(v bench_us_lib) | $(v bench_us_gather) | $(v bench_us_release) |"
		done
		for l in default buf2k mixed page16k; do
			f=$stage/logs/bench-$l.log
			[ -f "$f" ] || continue
			echo
			sed -n '/^## /,/^EMU-NIC/p' "$f" | grep -v '^EMU-NIC'
		done
		echo
		echo "## 4b. How the emulator copies into GPU memory, and the bound"
		echo
		echo "bench/emu-nic per layout and DEVMEMTCP_EMU_COPY (scatter, the default: one"
		echo "host-to-device copy and one scatter kernel per receive; runs: a copy per run of"
		echo "back-to-back buffers; batch: 2D copies and cuMemcpyBatchAsync, the way before"
		echo "scatter), then the same sender through a plain TCP socket into pinned memory with"
		echo "one host-to-device copy per receive and no emulation: what a NIC emulated by"
		echo "copies cannot pass on this machine."
		echo
		echo "| layout | copy | GB/s into GPU memory | us/receive copying | calls per receive | transfers per receive | bytes per transfer | us/receive: emulation's placing + socket | used |"
		echo "|---|---|---:|---:|---:|---:|---:|---|---|"
		grep '^RESULT copy ' "$results" | while read -r line; do
			v() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
			echo "| $(v layout) | $(v way) | $(v gbps) | $(v us_copy) | $(v calls) | $(v xfers) | $(v xfer_bytes) | $(v us_emu) + $(v us_sys) | $(v copy)$([ "$(v ok)" = 1 ] || echo ", FAILED") |"
		done
		grep '^RESULT plain ' "$results" | while read -r line; do
			v() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
			echo
			echo "Plain TCP socket, no emulation: $(v gbps) GB/s into GPU memory (per 256 KiB receive: socket $(v us_sock) us, host-to-device copy and sync $(v us_copy) us)$([ "$(v ok)" = 1 ] || echo "; FAILED: see logs/bench-plain.log")."
		done
		echo
		echo "## 2. Python: torch_loader.py and DLPack views"
		echo
		echo '```'
		grep -E '^RESULT (torch|views)' "$results" || echo "(not run)"
		echo '```'
		echo
		echo "## 3. Random-fault run"
		echo
		echo '```'
		grep -E '^emu-faults|^=== ' "$stage/logs/faults.log" 2>/dev/null || echo "(not run)"
		echo '```'
		echo
		echo "## What the emulation cannot show"
		echo
		echo "The NIC's own DMA, PCIe peer-to-peer and IOMMU, line rate, interrupt and NAPI"
		echo "timing, header-split parsing of real frames, and the kernel's devmem code"
		echo "(page pool, tokens, socket): these are modelled in user space at the libc"
		echo "boundary (tests/emu/README.md); the vm suite runs the kernel's own code."
		echo
		grep '^RESULT layout=' "$results" | while read -r line; do
			v() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
			echo "SUMMARY emu layout=$(v layout) bytes=$(v bytes) bad=$(v bad) tokens_outstanding=$(v tokens_outstanding) gbps=$(v gbps)"
		done
	} >"$report"
}

finish() {
	local rc=$1
	if [ -n "$child" ]; then
		kill "$child" 2>/dev/null
		wait "$child" 2>/dev/null
		echo "| (interrupted step) | killed | - |" >>"$steps"
	fi
	write_report
	cp "$report" "$out/"
	[ "$fake" = 1 ] || cp "$report" "$src/bench/results/" 2>/dev/null ||
		log "could not copy the report into $src/bench/results"
	tar -C "$work" -czf "$out/emu-gpu-run.tar.gz" emu-gpu-run || log "writing the tarball failed"
	echo "==== emulated NIC GPU run (exit $rc) ===="
	cat "$work/machine.md" "$steps"
	grep -E '^RESULT' "$results" | cut -c1-300
	grep '^SUMMARY' "$report"
	echo "report: $out/emulated-nic-h200.md; logs: $out/emu-gpu-run.tar.gz"
	rm -rf "$work"
	exit "$rc"
}
trap 'log "interrupted"; finish 1' INT TERM

# ---- the machine ----------------------------------------------------------------
{
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); tree: ${DEVMEMTCP_TREE:-$(git -C "$src" describe --always --dirty 2>/dev/null || cat "$src/.tree-id" 2>/dev/null || echo unknown)}"
	echo "- kernel: $(uname -r); CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //') ($(nproc) cores)"
	command -v nvidia-smi >/dev/null &&
		echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader 2>&1 | head -n1)"
	echo "- Python: $("$py" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -n1)"
} >"$work/machine.md"
cat "$work/machine.md" >&2
if [ "$(id -u)" != 0 ]; then
	log "needs root (network namespaces, veth)"
	finish 1
fi
if [ "$fake" = 1 ]; then
	log "GPU_RUN_FAKE=1: the fake CUDA driver (tests/lib/fakecuda) in place of the driver (a check of this script, not of a GPU)"
	echo "- GPU_RUN_FAKE=1: the fake CUDA driver (tests/lib/fakecuda) in place of a GPU; numbers meaningless" >>"$work/machine.md"
elif ! nvidia-smi -L >/dev/null 2>&1; then
	log "no NVIDIA GPU visible: exit 3"
	echo "- no NVIDIA GPU visible" >>"$work/machine.md"
	finish 3
fi

# ---- build ---------------------------------------------------------------------
# ip may come from .gpu-deps (scripts/gpu-deps.sh)
. "$src/scripts/gpu-env.sh"
gpu_deps "$src" "$(dirname "$build")/emu-gpu-deps" || { log "unpacking .gpu-deps failed"; finish 2; }
# the emulated NIC sits over a veth pair in network namespaces
for tool in ip unshare timeout; do
	command -v $tool >/dev/null || { log "no $tool on this machine (iproute2, util-linux)"; finish 1; }
done
if ! unshare -n ip link add emu-probe0 type veth peer name emu-probe1 2>"$work/veth.err"; then
	log "this kernel cannot make a veth pair ($(cat "$work/veth.err")): the emulated NIC needs one"
	finish 1
fi
export PATH=$PATH:/usr/local/cuda/bin
opts=(-Dtest_hooks=true -Dvm_tests=false -Dpython=disabled -Dbuildtype=release)
[ "$fake" = 1 ] || opts+=(-Dcuda=enabled)
if [ -f "$build/build.ninja" ]; then
	step setup 120 meson setup --reconfigure "$build" "$src" "${opts[@]}"
else
	step setup 120 meson setup "$build" "$src" "${opts[@]}"
fi
step build 240 ninja -C "$build" tests/emu/libdevmemtcp-emu.so tests/emu/libdevmemtcp-emucuda.so \
	tests/emu/emuctl tests/gpu/dataloader bench/emu-nic tools/devmemtcp tests/vm/test-e2e \
	tests/lib/fakecuda/libfakecuda.so
# the binding for PYTHON (meson directly, as python/tests/gpu-run.sh)
# (the native file stays beside the build: a reconfigure reads it again)
native=$pybuild.native.ini
mkdir -p "$(dirname "$pybuild")"
printf "[binaries]\npython = '%s'\n" "$py" >"$native"
if [ -f "$pybuild/build.ninja" ]; then
	step py-setup 120 meson setup --reconfigure "$pybuild" "$src/python" --native-file "$native" -Dtest_hooks=true
else
	step py-setup 120 meson setup "$pybuild" "$src/python" --native-file "$native" -Dtest_hooks=true
fi
step py-build 240 ninja -C "$pybuild"
if [ ! -x "$build/tests/gpu/dataloader" ] || [ ! -x "$build/bench/emu-nic" ]; then
	log "the build failed: see logs/build.log"
	tail -n 30 "$stage/logs/setup.log" "$stage/logs/build.log" 2>/dev/null >&2
	finish 2
fi
grep -E 'CUDA kernels' "$stage/logs/setup.log" | sed 's/^ */- build: /' >>"$work/machine.md"

# ---- 1, 2, 4: loaders and benchmark; 3: faults ------------------------------------
export DEVMEMTCP_LOG=none
step emulated-nic 300 env EMU_BUILD="$build" EMU_PYTHONPATH="$pybuild/src" EMU_RESULTS="$results" \
	EMU_LOGS="$stage/logs" sh "$src/tests/emu/gpu-steps.sh" "$py" "$samples" "$bench_bytes" \
	"$([ "$fake" = 1 ] && echo fake)"
grep -q 'ok=0' "$results" && failed=1
if [ "$fake" = 1 ]; then
	# no CUDA PyTorch here: the fault run on host memory
	step faults 120 env EMU_BUILD="$build" EMU_PYTHONPATH="$pybuild/src" sh "$src/tests/emu/emu-faults.sh" auto "$py"
else
	step faults 100 env EMU_BUILD="$build" EMU_PYTHONPATH="$pybuild/src" \
		DEVMEMTCP_LIBCUDA="$build/tests/emu/libdevmemtcp-emucuda.so" \
		sh "$src/tests/emu/emu-faults.sh" --gpu auto "$py"
fi
log "done: exit $failed"
finish "$failed"

#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The GPU layer on a machine with an NVIDIA GPU, in one run: build the
# library with the gather kernels (-Dcuda=enabled -Dtest_hooks=true), run
# the contract's GPU checks (tests/gpu/contract-gpu.sh: the gpu and unit
# suites, the static link on the real driver), the GPU test with a second
# seed, the data-loader example, compute-sanitizer's memcheck over the GPU
# test, then the gather and pipeline benchmarks.  Every step runs in the
# environment of the unpacked libraries below.  Everything (the Markdown
# report, every log) goes into one tarball, OUTDIR/gpu-run.tar.gz, beside a
# copy of the report; a summary ends the standard output.
#
# usage (from anywhere): bench/gather/gpu-run.sh [OUTDIR]
#   OUTDIR   default $OUT (the device runner's), else ./gpu-run-out
# Env:
#   TIME_BUDGET  seconds the whole run may take (default 470); each step
#                gets at most its own limit and what is left, and steps are
#                skipped (and reported so) when too little is left
#   BUILD        build directory (default .device-build/gather, reused)
#   SECTIONS     benchmark sections in order (default
#                latency,fence,cpu,sweep,pipeline,graph,micro,dist,tune,tune-large,rxpipe;
#                pipeline is bench-pipeline, rxpipe bench-rxpipe (the receive
#                pipeline with coalesced gathers against today's default,
#                ending with its SUMMARY lines: put it last), the others
#                bench-gather's -t)
#   GATHER_MIB   fragments per measurement of the dist section (default 256)
#   SKIP_TESTS=1 benchmarks only (a second run for numbers)
#   BENCH_NO_PERSIST=1  benchmarks without the persistent kernel (set by
#                the script itself when the GPU test timed out)
#   GPU_RUN_FAKE=1  a check of this script on a machine without a GPU:
#                every GPU step runs on tests/lib/fakecuda (numbers
#                meaningless; the static link on the real driver fails)
# What the GPU machine lacks (libmnl, cmocka, libnl-genl-3 and their -dev
# packages) comes from Debian's .deb files in .gpu-deps/, unpacked here by
# scripts/gpu-env.sh; scripts/gpu-deps.sh puts them there on the build
# machine, which then carries .gpu-deps along.
# Exit: 0 when the build and every test passed (benchmark numbers are
# reported, never judged), 1 when a test or a benchmark's byte check
# failed, 2 when the build failed, 3 when no NVIDIA GPU was visible (the
# build and the CPU-side tests ran, nothing that needs the GPU did).
set -uo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-$PWD/gpu-run-out}}
build=${BUILD:-$src/.device-build/gather}
budget=${TIME_BUDGET:-470}
sections=${SECTIONS:-latency,fence,cpu,sweep,pipeline,graph,micro,dist,tune,tune-large,rxpipe}
gather_mib=${GATHER_MIB:-256}
arch=x86_64-linux-gnu
start=$(date +%s)
deadline=$((start + budget))
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-run.XXXXXX")
stage=$work/gpu-run	# what the tarball holds
mkdir -p "$out" "$stage/logs"
report=$stage/gather-gpu-run.md
steps=$work/steps.md
summary=$work/summary.txt
: >"$steps"
: >"$work/machine.md"
failed=0
gpu=1
fake=${GPU_RUN_FAKE:-0}
child=
bench_logs=()

log() { echo "[gpu-run +$(($(date +%s) - start))s] $*" >&2; }

# step NAME LIMIT KIND CMD...: run CMD with a time limit, its output in
# logs/NAME.log.  KIND test: a failure or time-out fails the run; check:
# a failure does, a time-out is reported; bench: reported, unless a byte
# check says MISMATCH.
step() {
	local name=$1 limit=$2 kind=$3 rc t0 left status
	shift 3
	left=$((deadline - $(date +%s) - 5))
	if [ "$left" -lt 15 ]; then
		log "$name: skipped, ${left}s left of the budget"
		echo "| $name | skipped (time budget) | - |" >>"$steps"
		[ "$kind" = test ] && failed=1
		return 0
	fi
	[ "$limit" -gt "$left" ] && limit=$left
	[ "$kind" = bench ] && bench_logs+=("$stage/logs/$name.log")
	log "$name (limit ${limit}s): $*"
	t0=$(date +%s)
	# in the background so that a signal to this script is handled now,
	# not when the step ends
	timeout -k 10 "$limit" "$@" >"$stage/logs/$name.log" 2>&1 </dev/null &
	child=$!
	wait "$child"
	rc=$?
	child=
	case $rc in
	0) status=ok ;;
	77) status="skipped (exit 77)" ;;
	124 | 137) status="TIMED OUT after ${limit}s" ;;
	*) status="FAILED (exit $rc)" ;;
	esac
	if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
		case $kind in
		test) failed=1 ;;
		check) [ "$rc" != 124 ] && [ "$rc" != 137 ] && failed=1 ;;
		bench) grep -q MISMATCH "$stage/logs/$name.log" && failed=1 ;;
		esac
		tail -n 25 "$stage/logs/$name.log" | sed "s/^/  [$name] /" >&2
	fi
	log "$name: $status in $(($(date +%s) - t0))s"
	echo "| $name | $status | $(($(date +%s) - t0)) |" >>"$steps"
	return 0
}

# The report from what ran so far (also when the run ends early).
write_report() {
	{
		echo "# GPU gather run ($(date -u +%Y-%m-%d))"
		echo
		cat "$work/machine.md"
		echo
		echo "| step | result | s |"
		echo "|---|---|---:|"
		cat "$steps"
		if [ -f "$stage/logs/contract.log" ]; then
			echo
			echo '```'
			grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):' "$stage/logs/contract.log"
			echo '```'
		fi
		[ -f "$stage/logs/dataloader.log" ] && { echo; echo '```'; tail -n 5 "$stage/logs/dataloader.log"; echo '```'; }
		[ -f "$stage/logs/memcheck.log" ] && { echo; echo '```'; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$stage/logs/memcheck.log" | tail -n 5; echo '```'; }
		for f in "${bench_logs[@]}"; do
			[ -f "$f" ] || continue
			echo
			# each program prints its own title and machine lines:
			# keep its sections only, under a comment naming the log
			echo "<!-- $(basename "$f") -->"
			sed -n '/^## /,$p' "$f"
		done
	} >"$report"
}

# TITLE, then the rows of bench LOG (a file under logs/) whose text
# matches ERE under the table's header; nothing when the log is missing.
rows() {
	local f=$stage/logs/$2
	[ -f "$f" ] || return 0
	echo "-- $1"
	grep -m1 -A1 -E '^\| (variant|fragments|bytes|receive|wait|call|distribution) ' "$f"
	grep -E "$3" "$f"
}

# The standard output's end: the steps, failures and the numbers the
# targets are about (the rest is in the tarball).
write_summary() {
	{
		echo "==== GPU run summary (exit $1) ===="
		cat "$work/machine.md"
		echo "| step | result | s |"
		cat "$steps"
		[ -f "$stage/logs/contract.log" ] &&
			grep -E '^(Ok|Fail|Skipped|Timeout):|^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT)' "$stage/logs/contract.log"
		[ -f "$stage/logs/memcheck.log" ] && grep -m1 'ERROR SUMMARY' "$stage/logs/memcheck.log"
		grep -l MISMATCH "$stage"/logs/*.log 2>/dev/null | sed 's/^/MISMATCH in /'
		rows "latency (call -> bytes in place, idle GPU)" bench-latency.log \
			'^\| 1024 KiB|^Persistent|^Target'
		rows "fence latency" bench-fence.log '^\| (the|devmem|cu)'
		rows "CPU per call" bench-cpu.log '^\| .*\| (64|256|1024) \|'
		rows "sweep at receive sizes (4 KiB fragments)" bench-sweep.log \
			'^\| 4 KiB \| (64|256|1024|4096) KiB'
		rows pipeline pipeline.log '^\| 256 KiB'
		rows "receive pipeline (coalesced gathers)" rxpipe.log \
			'^\| (256 KiB|1448 B)|^- (latency|fake kernel)|^SUMMARY'
		rows "CUDA graph against inline launches" bench-graph.log '^\| [0-9]+ KiB'
		rows "large batches" bench-dist.log '^\| [0-9m]'
		echo "tarball: $out/gpu-run.tar.gz (gpu-run/gather-gpu-run.md, gpu-run/logs/)"
	} | head -c 11000
}

finish() {
	local rc=$1
	if [ -n "$child" ]; then
		kill "$child" 2>/dev/null
		wait "$child" 2>/dev/null
		echo "| (interrupted step) | killed | - |" >>"$steps"
	fi
	write_report
	cp "$report" "$out/" 2>/dev/null
	tar -C "$work" -czf "$out/gpu-run.tar.gz" gpu-run ||
		log "writing $out/gpu-run.tar.gz failed"
	write_summary "$rc"
	rm -rf "$work"
	exit "$rc"
}
trap 'log "interrupted"; finish 1' INT TERM

# ---- the machine ------------------------------------------------------------------
{
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); tree: ${DEVMEMTCP_TREE:-$(git -C "$src" describe --always --dirty 2>/dev/null || cat "$src/.tree-id" 2>/dev/null || echo unknown)}"
	echo "- kernel: $(uname -r); CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //') ($(nproc) cores)"
	if command -v nvidia-smi >/dev/null; then
		echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | head -n1)"
	fi
	nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
	[ -x "$nvcc" ] && echo "- nvcc: $("$nvcc" --version | tail -n1)"
} >"$work/machine.md"
cat "$work/machine.md" >&2
if [ "$fake" = 1 ]; then
	log "GPU_RUN_FAKE=1: the GPU steps run on the fake CUDA driver, tests/lib/fakecuda (a check of this script, not of a GPU)"
	echo "- GPU_RUN_FAKE=1: the fake CUDA driver (tests/lib/fakecuda) in place of a GPU" >>"$work/machine.md"
elif ! nvidia-smi -L >/dev/null 2>&1 || ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
	gpu=0
	log "no NVIDIA GPU visible (nvidia-smi -L fails or no /dev/nvidiaN): building and running the CPU-side tests only; exit 3"
	echo "- no NVIDIA GPU visible: nothing that needs one ran" >>"$work/machine.md"
fi

# ---- libraries the machine lacks --------------------------------------------------
# Debian's .deb files from .gpu-deps (scripts/gpu-deps.sh on the build
# machine), unpacked beside the build directory (a reused build keeps the
# paths meson found)
. "$src/scripts/gpu-env.sh"
gpu_deps "$src" "$(dirname "$build")/gpu-deps" || { log "unpacking .gpu-deps failed"; finish 2; }
export PATH=$PATH:/usr/local/cuda/bin

# ---- build ------------------------------------------------------------------------------
if [ -f "$build/build.ninja" ]; then
	setup=(meson setup --reconfigure "$build" "$src" -Dtest_hooks=true -Dcuda=enabled -Dvm_tests=false -Dbuildtype=release)
else
	setup=(meson setup "$build" "$src" -Dtest_hooks=true -Dcuda=enabled -Dvm_tests=false -Dbuildtype=release)
fi
step setup 120 test "${setup[@]}"
step build 240 test ninja -C "$build"
if [ ! -x "$build/bench/gather/bench-gather" ] || [ ! -x "$build/tests/gpu/test-gpu" ]; then
	log "the build failed: see logs/setup.log and logs/build.log in the tarball"
	tail -n 30 "$stage/logs/setup.log" "$stage/logs/build.log" 2>/dev/null >&2
	finish 2
fi
grep -E 'CUDA kernels|tests \(' "$stage/logs/setup.log" | sed 's/^ */- build: /' >>"$work/machine.md"

# ---- tests --------------------------------------------------------------------------------
export DEVMEMTCP_LOG=none
if [ "$fake" = 1 ]; then
	export DEVMEMTCP_LIBCUDA=$build/tests/lib/fakecuda/libfakecuda.so DEVMEMTCP_TEST_FAKE_GPU=1
fi
if [ "${SKIP_TESTS:-0}" != 1 ]; then
	# the contract's GPU checks: the gpu and unit suites (the GPU test,
	# its fake-driver twin, the CPU side of gathers) and the static link
	# on the real driver, here where the libraries above are found
	step contract 240 test bash -c 'cd "$1" && exec sh tests/gpu/contract-gpu.sh "$2"' \
		contract "$src" "$build"
	if [ "$gpu" = 1 ] && grep -q '/ gpu  *SKIP' "$stage/logs/contract.log"; then
		log "the GPU test skipped although a GPU is visible: see logs/contract.log"
		failed=1
	fi
	if grep -q 'Timeout: *[1-9]\|TIMEOUT\|Alarm clock\|signal 14' "$stage/logs/contract.log" ||
	   grep -q 'contract | TIMED OUT' "$steps"; then
		# a gather never finished: keep the benchmarks off the kernel
		# most likely to have lost it, and spend no more time on tests
		export BENCH_NO_PERSIST=1
		log "the GPU test timed out: benchmarks without the persistent kernel"
	elif [ "$gpu" = 1 ]; then
		step gpu-seed2 120 test env DEVMEMTCP_TEST_SEED=0x5eed "$build/tests/gpu/test-gpu"
		# the example looks for a real GPU itself
		[ "$fake" = 1 ] ||
			step dataloader 60 test "$build/tests/gpu/dataloader" --synthetic -n 300
		if command -v compute-sanitizer >/dev/null; then
			# the launch variants (the persistent kernel's polling is
			# too slow under the tool); a time-out is reported only
			step memcheck 90 check env DEVMEMTCP_TEST_ONLY=test_gather_receive_sizes \
				DEVMEMTCP_TEST_VARIANTS=4 DEVMEMTCP_TEST_WATCHDOG=0 \
				compute-sanitizer --tool memcheck --error-exitcode 3 \
				"$build/tests/gpu/test-gpu"
		else
			echo "| memcheck | no compute-sanitizer | - |" >>"$steps"
		fi
	fi
fi

# ---- benchmarks -------------------------------------------------------------------------
bg=$build/bench/gather/bench-gather
IFS=, read -r -a secs <<<"$sections"
for s in "${secs[@]}"; do
	[ "$gpu" = 1 ] || break
	case $s in
	pipeline) step pipeline 60 bench "$build/bench/gather/bench-pipeline" -T 0.5 ;;
	rxpipe) step rxpipe 60 bench "$build/bench/gather/bench-rxpipe" -T 1 ;;
	dist) step bench-dist 90 bench "$bg" -s "$gather_mib" -r 5 -t dist ;;
	tune-large) step bench-tune-large 90 bench "$bg" -s 512 -r 3 -t tune-large ;;
	*) step "bench-$s" 60 bench "$bg" -s 256 -r 5 -t "$s" ;;
	esac
done

[ "$gpu" = 1 ] || failed=3
log "done: exit $failed"
finish "$failed"

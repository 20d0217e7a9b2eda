#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The GPU layer on a machine with an NVIDIA GPU, in one run: build the
# library with the gather kernels (-Dcuda=enabled -Dtest_hooks=true), run
# the gpu suite (the real GPU, the CPU stand-in, the CPU side of gathers),
# the data-loader example and a compute-sanitizer pass, then the gather and
# pipeline benchmarks; write a Markdown report and every log.
#
# usage (from anywhere): bench/gather/gpu-run.sh [OUTDIR]
#   OUTDIR   default $OUT (the device runner's), else ./gpu-run-out
# Env:
#   TIME_BUDGET  seconds the whole run may take (default 560); each step
#                gets at most its own limit and what is left, and steps are
#                skipped (and reported so) when too little is left
#   BUILD        build directory (default .device-build/gather, reused)
#   SECTIONS     bench-gather sections in order (default
#                micro,latency,cpu,sweep,tune,dist,tune-large)
#   GATHER_MIB   fragments per call of the dist section (default 1024)
#   SKIP_TESTS=1 benchmarks only (a second run for numbers)
#   BENCH_NO_PERSIST=1  benchmarks without the persistent kernel (set by
#                the script itself when the GPU test timed out)
# What the GPU machine lacks (libmnl, cmocka, libnl-genl-3 and their -dev
# packages) comes from Debian's .deb files in bench/.gpu-deps/, unpacked
# here; they were fetched on the build machine with
#   apt-get download libmnl0 libmnl-dev libcmocka0 libcmocka-dev \
#     libnl-3-200 libnl-3-dev libnl-genl-3-200 libnl-genl-3-dev
# Exit: 0 when the build and every test passed (benchmark numbers are
# reported, never judged), 1 when a test or a benchmark's byte check
# failed, 2 when the build failed.
set -uo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-$PWD/gpu-run-out}}
build=${BUILD:-$src/.device-build/gather}
budget=${TIME_BUDGET:-560}
sections=${SECTIONS:-micro,latency,cpu,sweep,tune,dist,tune-large}
gather_mib=${GATHER_MIB:-1024}
arch=x86_64-linux-gnu
start=$(date +%s)
deadline=$((start + budget))
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-run.XXXXXX")
mkdir -p "$out/logs"
report=$out/gather-gpu-run.md
steps=$work/steps.md
: >"$steps"
failed=0
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
	[ "$kind" = bench ] && bench_logs+=("$out/logs/$name.log")
	log "$name (limit ${limit}s): $*"
	t0=$(date +%s)
	timeout -k 10 "$limit" "$@" >"$out/logs/$name.log" 2>&1
	rc=$?
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
		bench) [ "$rc" = 1 ] && grep -q MISMATCH "$out/logs/$name.log" && failed=1 ;;
		esac
		tail -n 25 "$out/logs/$name.log" | sed "s/^/  [$name] /" >&2
	fi
	log "$name: $status in $(($(date +%s) - t0))s"
	echo "| $name | $status | $(($(date +%s) - t0)) |" >>"$steps"
	return 0
}

# ---- the machine ------------------------------------------------------------------
{
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); tree: $(git -C "$src" describe --always --dirty 2>/dev/null || echo unknown)"
	echo "- kernel: $(uname -r); CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //') ($(nproc) cores)"
	if command -v nvidia-smi >/dev/null; then
		echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>/dev/null | head -n1)"
	fi
	nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
	[ -x "$nvcc" ] && echo "- nvcc: $("$nvcc" --version | tail -n1)"
} >"$work/machine.md"
cat "$work/machine.md" >&2

# ---- libraries the machine lacks --------------------------------------------------
# Every .deb in bench/.gpu-deps unpacked into one root whose pkg-config
# files point at it, beside the build directory (a reused build keeps the
# paths meson found); a pkg-config stand-in when the machine has none.
deps_from_debs() {
	local root pc debs=("$src"/bench/.gpu-deps/*.deb)

	root=$(dirname "$build")/gpu-deps
	rm -rf "$root"
	mkdir -p "$root"

	[ -e "${debs[0]}" ] || { log "no .deb files in bench/.gpu-deps: using the machine's libraries"; return 0; }
	for d in "${debs[@]}"; do dpkg-deb -x "$d" "$root" || return 1; done
	mkdir -p "$root/usr/lib/$arch"
	[ -d "$root/lib/$arch" ] && cp -a "$root/lib/$arch/." "$root/usr/lib/$arch/"
	for pc in "$root/usr/lib/$arch/pkgconfig"/*.pc; do
		sed -i "s|/usr|$root/usr|g" "$pc"
	done
	export PKG_CONFIG_PATH=$root/usr/lib/$arch/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
	export LD_LIBRARY_PATH=$root/usr/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	log "libraries from $(basename -a "${debs[@]}" | tr '\n' ' ')"
}

pkgconfig_shim() {
	mkdir -p "$work/bin"
	cat >"$work/bin/pkg-config" <<-'PY'
		#!/usr/bin/env python3
		# The part of pkg-config that meson asks for, over PKG_CONFIG_PATH.
		import os, re, sys
		def load(name, seen):
		    for d in os.environ.get("PKG_CONFIG_PATH", "").split(":"):
		        p = os.path.join(d, name + ".pc")
		        if d and os.path.exists(p):
		            v, f = {}, {}
		            for line in open(p):
		                line = line.strip()
		                m = re.match(r"^([A-Za-z0-9_.]+)\s*=\s*(.*)$", line)
		                k = re.match(r"^([A-Za-z.]+):\s*(.*)$", line)
		                sub = lambda s: re.sub(r"\$\{(\w+)\}", lambda x: v.get(x.group(1), ""), s)
		                if m: v[m.group(1)] = sub(m.group(2))
		                elif k: f[k.group(1)] = sub(k.group(2))
		            return v, f
		    return None
		args = [a for a in sys.argv[1:]]
		if "--version" in args: print("0.29.2"); sys.exit(0)
		opts = [a for a in args if a.startswith("--")]
		pkgs = [a for a in args if not a.startswith("--") and not re.match(r"^[<>=]", a) and not re.match(r"^[0-9]", a)]
		out = []
		def walk(name, acc, seen):
		    if name in seen: return True
		    seen.add(name)
		    r = load(name, seen)
		    if not r: return False
		    acc.append(r)
		    for q in re.split(r"[,\s]+", r[1].get("Requires", "")):
		        if q and not re.match(r"^[<>=0-9]", q) and not walk(q, acc, seen): return False
		    return True
		for p in pkgs:
		    acc = []
		    if not walk(p, acc, set()):
		        if "--print-errors" in opts or "--exists" not in opts:
		            sys.stderr.write("Package %s was not found\n" % p)
		        sys.exit(1)
		    for o in opts:
		        if o == "--modversion": out.append(acc[0][1].get("Version", ""))
		        elif o == "--cflags": out += [r[1].get("Cflags", "") for r in acc]
		        elif o == "--libs": out += [r[1].get("Libs", "") for r in acc]
		        elif o.startswith("--variable="): out.append(acc[0][0].get(o.split("=", 1)[1], ""))
		print(" ".join(s for s in out if s))
	PY
	chmod +x "$work/bin/pkg-config"
	export PATH=$work/bin:$PATH
	log "no pkg-config on this machine: a stand-in over PKG_CONFIG_PATH"
}

command -v pkg-config >/dev/null || pkgconfig_shim
deps_from_debs || { log "unpacking bench/.gpu-deps failed"; exit 2; }
export PATH=$PATH:/usr/local/cuda/bin

# ---- build ------------------------------------------------------------------------------
if [ -f "$build/build.ninja" ]; then
	setup=(meson setup --reconfigure "$build" "$src" -Dtest_hooks=true -Dcuda=enabled -Dvm_tests=false -Dbuildtype=release)
else
	setup=(meson setup "$build" "$src" -Dtest_hooks=true -Dcuda=enabled -Dvm_tests=false -Dbuildtype=release)
fi
step setup 120 test "${setup[@]}"
step build 300 test ninja -C "$build"
if [ ! -x "$build/bench/gather/bench-gather" ] || [ ! -x "$build/tests/gpu/test-gpu" ]; then
	log "the build failed: see $out/logs/setup.log and build.log"
	{ echo "# GPU run: build failed"; echo; cat "$work/machine.md"; echo
	  echo "| step | result | s |"; echo "|---|---|---:|"; cat "$steps"; } >"$report"
	exit 2
fi
grep -E 'CUDA kernels|tests \(' "$out/logs/setup.log" | sed 's/^ */- build: /' >>"$work/machine.md"

# ---- tests --------------------------------------------------------------------------------
export DEVMEMTCP_LOG=none
if [ "${SKIP_TESTS:-0}" != 1 ]; then
	# the GPU test alone (the CPU-only ones of the suite ran where the
	# tree was built: gather-cpu, gpu-nocuda, gpu-fake)
	step gpu-suite 240 test meson test -C "$build" --suite gpu --no-suite unit \
		--print-errorlogs
	if grep -q 'Timeout: *[1-9]\|TIMEOUT\|Alarm clock\|signal 14' "$out/logs/gpu-suite.log" ||
	   grep -q 'gpu-suite | TIMED OUT' "$steps"; then
		# a gather never finished: keep the benchmarks off the kernel
		# most likely to have lost it, and spend no more time on tests
		export BENCH_NO_PERSIST=1
		log "the GPU test timed out: benchmarks without the persistent kernel"
	else
		step gpu-seed2 150 test env DEVMEMTCP_TEST_SEED=0x5eed "$build/tests/gpu/test-gpu"
		step dataloader 90 test "$build/tests/gpu/dataloader" --synthetic -n 300
		if command -v compute-sanitizer >/dev/null; then
			# the launch variants (the persistent kernel's polling is
			# too slow under the tool); a time-out is reported only
			step memcheck 150 check env DEVMEMTCP_TEST_ONLY=test_gather_receive_sizes \
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
	case $s in
	pipeline) step pipeline 150 bench "$build/bench/gather/bench-pipeline" -T 1 ;;
	dist) step bench-dist 150 bench "$bg" -s "$gather_mib" -r 10 -t dist ;;
	tune-large) step bench-tune-large 150 bench "$bg" -s 512 -r 5 -t tune-large ;;
	*) step "bench-$s" 120 bench "$bg" -s 256 -r 10 -t "$s" ;;
	esac
	# the pipeline right after the first sections: it is the point
	if [ "$s" = cpu ] && [[ ",$sections," != *,pipeline,* ]]; then
		step pipeline 150 bench "$build/bench/gather/bench-pipeline" -T 1
	fi
done

# ---- the report ------------------------------------------------------------------------------
{
	echo "# GPU gather run ($(date -u +%Y-%m-%d))"
	echo
	cat "$work/machine.md"
	echo
	echo "| step | result | s |"
	echo "|---|---|---:|"
	cat "$steps"
	if [ -f "$out/logs/gpu-suite.log" ]; then
		echo
		echo '```'
		grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):' "$out/logs/gpu-suite.log"
		echo '```'
	fi
	[ -f "$out/logs/dataloader.log" ] && { echo; echo '```'; tail -n 5 "$out/logs/dataloader.log"; echo '```'; }
	[ -f "$out/logs/memcheck.log" ] && { echo; echo '```'; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/logs/memcheck.log" | tail -n 5; echo '```'; }
	for f in "${bench_logs[@]}"; do
		[ -f "$f" ] || continue
		echo
		# each program prints its own title and machine lines: keep its
		# sections only, under a heading naming the log
		echo "<!-- $(basename "$f") -->"
		sed -n '/^## /,$p' "$f"
	done
} >"$report"
log "report: $report; logs: $out/logs"
rm -rf "$work"
exit $failed

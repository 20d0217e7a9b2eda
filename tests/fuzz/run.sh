#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Run one libFuzzer harness for a budget: run.sh HARNESS CORPUS RUNS SECONDS
# [WORKDIR].  Stops after RUNS executions or SECONDS seconds, whichever
# comes first (RUNS -1: no limit).  New inputs go to WORKDIR (a temporary
# directory unless given), never into the committed CORPUS; a crash is
# saved as artifacts/<harness>-crash-* next to the harness.  Prints one
# line: harness, executions, seconds, executions/s, edges (cov), features
# (ft), corpus size, result.
set -u
bin=$1 corpus=$2 runs=$3 secs=$4
name=$(basename "$bin")
tmp=
if [ $# -ge 5 ]; then
	work=$5
	mkdir -p "$work"
else
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX") || exit 1
	work=$tmp
fi
art=$(dirname "$bin")/artifacts
mkdir -p "$art"
log=$(mktemp "${TMPDIR:-/tmp}/$name.log.XXXXXX") || exit 1
trap 'rm -rf "$tmp" "$log"' EXIT
# leaks are reported per input; a check that fails aborts (FZ_CHECK)
: "${ASAN_OPTIONS:=detect_leaks=1:abort_on_error=1}"
: "${UBSAN_OPTIONS:=print_stacktrace=1:halt_on_error=1}"
export ASAN_OPTIONS UBSAN_OPTIONS DEVMEMTCP_LOG=none
start=$(date +%s.%N)
"$bin" -runs="$runs" -max_total_time="$secs" -timeout=10 \
	-rss_limit_mb=2048 -malloc_limit_mb=128 -print_final_stats=1 \
	-artifact_prefix="$art/$name-" "$work" "$corpus" >"$log" 2>&1
rc=$?
end=$(date +%s.%N)
# libFuzzer's exit status for a crash is 77, which meson counts as a skip
[ $rc -eq 77 ] && rc=1
if [ $rc -ne 0 ]; then
	# the report: what failed, where, and the reproducer
	sed -n '/check failed\|ERROR\|runtime error\|ALARM\|out-of-memory/,$p' \
		"$log" | grep -v '^#[0-9]\|in fuzzer::\|^    #[0-9]* 0x.* in _start\|libc_start' | head -60
	grep 'Test unit written' "$log"
fi
awk -v name="$name" -v rc="$rc" -v t0="$start" -v t1="$end" '
	/^#[0-9]+/ { for (i = 1; i <= NF; i++) {
		if ($i == "cov:") cov = $(i + 1)
		if ($i == "ft:") ft = $(i + 1)
		if ($i == "corp:") corp = $(i + 1) } }
	/^stat::number_of_executed_units:/ { execs = $2 }
	END {
		s = t1 - t0; if (s <= 0) s = 1
		printf "%-16s %9d execs %6.1f s %8.0f/s  cov %5s  ft %6s  corpus %s  %s\n",
			name, execs, s, execs / s, cov, ft, corp,
			rc == 0 ? "ok" : "FAILED (see above)"
	}' "$log"
exit $rc

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# A long fuzzing campaign: every harness of a -Dfuzzing=true build for
# SECONDS each (default 600), JOBS at a time (default 2), at low priority.
#   tests/fuzz/campaign.sh build-fuzz [SECONDS] [JOBS]
# Each harness keeps its working corpus in BUILD/fuzz-campaign/<harness>/
# (starting from the committed one, growing over campaigns); crashes land
# in BUILD/tests/fuzz/artifacts/.  The summary (executions, exec/s, edges,
# features, result per harness) is printed and kept in
# BUILD/fuzz-campaign/summary.txt.  To fold what a campaign found back
# into the committed corpus (smallest inputs with the same coverage):
#   BUILD/tests/fuzz/fuzz-NAME -merge=1 tests/fuzz/corpus/NAME BUILD/fuzz-campaign/NAME
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: campaign.sh BUILD [SECONDS] [JOBS]}" && pwd)
secs=${2:-600}
jobs=${3:-2}
out=$build/fuzz-campaign
mkdir -p "$out"
: >"$out/summary.txt.new"
start=$(date +%s)
find "$build/tests/fuzz" -maxdepth 1 -type f -perm -u+x -name 'fuzz-*' | sort |
	xargs -P "$jobs" -I{} sh -c '
		name=$(basename "$1" | sed "s/^fuzz-//")
		nice -n 10 "$2/tests/fuzz/run.sh" "$1" "$2/tests/fuzz/corpus/$name" \
			-1 "$3" "$4/$name" >"$4/$name.log" 2>&1
		tail -1 "$4/$name.log" >>"$4/summary.txt.new"
	' sh {} "$top" "$secs" "$out"
end=$(date +%s)
{
	echo "campaign: $secs s per harness, $jobs at a time, $((end - start)) s in all ($(date -u +%F))"
	sort "$out/summary.txt.new"
} >"$out/summary.txt"
rm -f "$out/summary.txt.new"
cat "$out/summary.txt"
! grep -q FAILED "$out/summary.txt"

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Receive hot path: wall-clock ratios against the two baselines, then the
# library's instructions per fragment from valgrind (callgrind counts
# instructions, so the figure does not depend on machine load): the
# difference between two runs of different length, per extra fragment.
set -eu
bin=${1:-build-test/bench/rx-hotpath}
"$bin"
"$bin" --no-syscall
if command -v valgrind >/dev/null; then
	ir() {
		valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" \
			--no-syscall --mode "$1" --frags "$2" 2>&1 |
			sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
	}
	for mode in library ncdevmem kperf; do
		a=$(ir $mode 65536)
		b=$(ir $mode 327680)
		echo "$mode: $(( (b - a) / (327680 - 65536) )) instructions per fragment (user space, valgrind)"
	done
else
	echo "valgrind not installed: no instruction counts"
fi

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The harness's own checks: a byte changed in rank 0's message 3 is reported
# by rank 1 as a data mismatch, and rank 0 stops too instead of waiting for
# a peer that gave up (the run ends at once, not at a timeout).
# usage: check-mismatch.sh test-nccl-net libnccl-net-devmemtcp.so
set -u
# the ranks stop where they fail and leave their comms open
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
out=$("$1" "$2" --quiet --version 8 --corrupt 3 2>&1)
rc=$?
fail() {
	echo "FAIL: $*"
	echo "$out"
	exit 1
}
[ $rc = 1 ] || fail "exit status $rc, expected 1"
# message 3 has 4093 bytes at stream offset 4; byte 2046 is 2050 % 251 = 42
echo "$out" | grep -q 'FAIL rank 1 v8 check_recv:.*message 3 (4093 bytes) byte 2046 (stream offset 2050) is 112, expected 42$' ||
	fail "rank 1 did not report the changed byte"
echo "$out" | grep -q 'FAIL rank 0 v8 .*the peer stopped' ||
	fail "rank 0 did not stop when its peer did"
echo "PASS: the changed byte was reported and both ranks stopped"

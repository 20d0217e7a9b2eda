#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# vm: 'devmemtcp send' end to end in the guest, over the vm topology: dsim0
# (netns dmtA, 10.77.0.1) sends to dsim1 (netns dmtB, 10.77.0.2):
#  1. the pattern, in 4097-byte pieces, to 'devmemtcp recv --setup -v'
#     (devmem RX, every byte checked);
#  2. a file (this build's devmemtcp binary) through a 4-slot ring to a plain
#     'nc -l', compared with cmp.
# On kernels without devmem TX the test is the clear error: exit 1 and
# "needs Linux 6.16".  Usage: test-tx-tool.sh [PATH/TO/devmemtcp]
set -u
here=$(cd "$(dirname "$0")" && pwd)
tool=${1:-$here/../../tools/devmemtcp}
harness=$here/vm-harness
[ -x "$tool" ] || { echo "test-tx-tool: SKIP: no devmemtcp program at $tool"; exit 77; }
fail() { echo "test-tx-tool: FAIL: $*"; exit 1; }
built=$("$harness" up) || fail "namespace setup"
# undo what this test built (the namespaces give the devices back)
[ "$built" = built ] && trap '"$harness" down' EXIT
tx() { ip netns exec dmtA "$tool" send -i dsim0 -c 10.77.0.2 "$@"; }

if ! "$harness" kernel-at-least 6.16; then
	rel=$(uname -r)
	out=$(tx -p 5401 -n 1M 2>&1); rc=$?
	echo "$out"
	[ $rc = 1 ] || fail "kernel $rel: expected exit 1, got $rc"
	echo "$out" | grep -q "needs Linux 6.16" || fail "kernel $rel: no \"needs Linux 6.16\" in the error"
	echo "test-tx-tool: PASS (kernel $rel without devmem TX: clear error)"
	exit 0
fi

# 1. pattern, small pieces, validated by devmem RX
ip netns exec dmtB "$tool" recv -i dsim1 -p 5401 -l 10.77.0.2 -s -v -e 33554432 >/tmp/tx-tool-recv.log 2>&1 &
rpid=$!
ip netns exec dmtB "$harness" wait-listen 5401 || fail "no receiver on port 5401"
tx -p 5401 -n 32M -z 4097 || fail "devmemtcp send (pattern)"
wait $rpid; rc=$?
cat /tmp/tx-tool-recv.log
[ $rc = 0 ] || fail "devmemtcp recv -v exited $rc"

# 2. a file through a 64 KiB ring (4 slots, reused) to a plain receiver
ip netns exec dmtB nc -l -p 5402 >/tmp/tx-tool-got &
npid=$!
ip netns exec dmtB "$harness" wait-listen 5402 || fail "no receiver on port 5402"
tx -p 5402 -f "$tool" -b 64K -C 16K || fail "devmemtcp send -f"
wait $npid
cmp "$tool" /tmp/tx-tool-got || fail "the file arrived changed"
echo "test-tx-tool: PASS: pattern 32 MiB validated by devmem RX; $(wc -c <"$tool") byte file intact"
exit 0

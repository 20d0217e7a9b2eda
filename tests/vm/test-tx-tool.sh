#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# vm: 'devmemtcp send' end to end in the guest.  dsim0 (netns dmt-tx,
# 10.0.0.1) sends to dsim1 (netns dmt-rx, 10.0.0.2):
#  1. the pattern, in 4097-byte pieces, to 'devmemtcp recv --setup -v'
#     (devmem RX, every byte checked);
#  2. a file (this build's devmemtcp binary) through a 4-slot ring to a plain
#     'nc -l', compared with cmp.
# On kernels without devmem TX the test is the clear error: exit 1 and
# "needs Linux 6.16".  Usage: test-tx-tool.sh [PATH/TO/devmemtcp]
set -u
here=$(cd "$(dirname "$0")" && pwd)
tool=${1:-$here/../../tools/devmemtcp}
[ -x "$tool" ] || { echo "test-tx-tool: SKIP: no devmemtcp program at $tool"; exit 77; }
fail() { echo "test-tx-tool: FAIL: $*"; exit 1; }
cleanup() { ip netns del dmt-tx 2>/dev/null; ip netns del dmt-rx 2>/dev/null; true; }
trap cleanup EXIT
ip netns add dmt-tx && ip netns add dmt-rx &&
	ip link set dsim0 netns dmt-tx && ip link set dsim1 netns dmt-rx &&
	ip -n dmt-tx addr add 10.0.0.1/24 dev dsim0 && ip -n dmt-rx addr add 10.0.0.2/24 dev dsim1 &&
	ip -n dmt-tx link set lo up && ip -n dmt-rx link set lo up &&
	ip -n dmt-tx link set dsim0 up && ip -n dmt-rx link set dsim1 up ||
	fail "namespace setup"
tx() { ip netns exec dmt-tx "$tool" send -i dsim0 -c 10.0.0.2 "$@"; }

rel=$(uname -r)
maj=${rel%%.*}; min=${rel#*.}; min=${min%%.*}
if [ "$maj" -lt 6 ] || { [ "$maj" = 6 ] && [ "$min" -lt 16 ]; }; then
	out=$(tx -p 5401 -n 1M 2>&1); rc=$?
	echo "$out"
	[ $rc = 1 ] || fail "kernel $rel: expected exit 1, got $rc"
	echo "$out" | grep -q "needs Linux 6.16" || fail "kernel $rel: no \"needs Linux 6.16\" in the error"
	echo "test-tx-tool: PASS (kernel $rel without devmem TX: clear error)"
	exit 0
fi

# 1. pattern, small pieces, validated by devmem RX
ip netns exec dmt-rx "$tool" recv -i dsim1 -p 5401 -l 10.0.0.2 -s -v -e 33554432 >/tmp/tx-tool-recv.log 2>&1 &
rpid=$!
sleep 1
tx -p 5401 -n 32M -z 4097 || fail "devmemtcp send (pattern)"
wait $rpid; rc=$?
cat /tmp/tx-tool-recv.log
[ $rc = 0 ] || fail "devmemtcp recv -v exited $rc"

# 2. a file through a 64 KiB ring (4 slots, reused) to a plain receiver
ip netns exec dmt-rx nc -l -p 5402 >/tmp/tx-tool-got &
npid=$!
sleep 1
tx -p 5402 -f "$tool" -b 64K -C 16K || fail "devmemtcp send -f"
wait $npid
cmp "$tool" /tmp/tx-tool-got || fail "the file arrived changed"
echo "test-tx-tool: PASS: pattern 32 MiB validated by devmem RX; $(wc -c <"$tool") byte file intact"
exit 0

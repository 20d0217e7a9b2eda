# SPDX-License-Identifier: GPL-2.0-only
# Guest side of the devmemsim TX smoke test (devmem TX: Linux 6.16+; see
# lib.sh for how it runs).  dsim0 (netns a, 10.0.0.1) sends from a bound
# udmabuf with MSG_ZEROCOPY; dsim1 (10.0.0.2) receives once with devmem RX
# (queue 3) and once plainly.
BYTES=${BYTES:-16M}
. "$(dirname "$0")/lib.sh"
if ! "${VM_HARNESS:?}" kernel-at-least 6.16; then
	echo "SKIP: devmem TX needs Linux 6.16; this is $(uname -r)"
	exit 77
fi
set -x
pair_up
ethtool -G dsim1 tcp-data-split on
$S rings dsim1 -1 0 || true
ethtool -X dsim1 equal 2
ethtool -N dsim1 flow-type tcp4 dst-port 5201 action 3
rc=0

# devmem TX -> plain RX (RSS queues 0/1)
$S rx dsim1 0 5300 $BYTES nobind > /tmp/rx1.log 2>&1 &
P=$!
sleep 0.3
ip netns exec a $S txdm dsim0 10.0.0.2 5300 $BYTES || rc=1
wait $P || rc=1
cat /tmp/rx1.log

# devmem TX -> devmem RX
$S rx dsim1 3 5201 $BYTES > /tmp/rx2.log 2>&1 &
P=$!
wait_listen /tmp/rx2.log
ip netns exec a $S txdm dsim0 10.0.0.2 5201 $BYTES || rc=1
wait $P || rc=1
cat /tmp/rx2.log
ip -n a -s link show dsim0
kernel_trouble
[ $rc = 0 ]
ip netns del a
sleep 1
rmmod devmemsim
echo TX-SMOKE-OK

# SPDX-License-Identifier: GPL-2.0-only
# Guest side of the devmemsim RX smoke test (see lib.sh for how it runs).
# dsim0 in netns "a" (10.0.0.1) sends, dsim1 in the init netns (10.0.0.2)
# receives on queue 3 with a udmabuf bound.
BYTES=${BYTES:-64M}
. "$(dirname "$0")/lib.sh"
set -x
pair_up

ethtool -i dsim1
ethtool -g dsim1
ethtool -l dsim1

# header split off: bind must fail
$S bindfail dsim1 3

ethtool -G dsim1 tcp-data-split on
$S rings dsim1 -1 0 || echo "(no hds-thresh on this kernel)"
ethtool -g dsim1
ethtool -X dsim1 equal 2
ethtool -x dsim1 | head -5
ethtool -N dsim1 flow-type tcp4 dst-ip 10.0.0.2 dst-port 5201 action 3
ethtool -n dsim1

# plain transfer first (queue 3, header split, no binding)
$S rx dsim1 3 5200 4M nobind &
sleep 0.3
ip netns exec a $S tx 10.0.0.2 5200 4M
wait $! || exit 1

$S rx dsim1 3 5201 $BYTES > /tmp/rx.log 2>&1 &
RXPID=$!
wait_listen /tmp/rx.log
cat /tmp/rx.log
ip netns exec a $S tx 10.0.0.2 5201 $BYTES || echo "TX FAILED"
rc=0
wait $RXPID || rc=$?
cat /tmp/rx.log
kernel_trouble
ip -s link show dsim1
ethtool -G dsim1 tcp-data-split off || true
cat /sys/kernel/debug/devmemsim/dsim1/payload_bytes
[ $rc = 0 ]
rmmod devmemsim || { ip netns del a; sleep 1; rmmod devmemsim; }
echo RX-SMOKE-OK

# SPDX-License-Identifier: GPL-2.0-only
# Guest side of the devmemsim TX smoke test (7.x kernels: devmem TX).
# dsim0 (netns a, 10.0.0.1) sends from a bound udmabuf with MSG_ZEROCOPY;
# dsim1 (10.0.0.2) receives once with devmem RX (queue 3) and once plainly.
BYTES=${BYTES:-16M}
ip() { /usr/bin/ip "$@"; }
ethtool() { /usr/sbin/ethtool "$@"; }
set -x
insmod /devmemsim.ko
ip netns add a
ip link set dsim0 netns a
ip -n a addr add 10.0.0.1/24 dev dsim0
ip -n a link set lo up
ip -n a link set dsim0 up
ip addr add 10.0.0.2/24 dev dsim1
ip link set dsim1 up
ethtool -G dsim1 tcp-data-split on
/devmem_smoke rings dsim1 -1 0 || true
ethtool -X dsim1 equal 2
ethtool -N dsim1 flow-type tcp4 dst-port 5201 action 3
rc=0

# devmem TX -> plain RX (RSS queues 0/1)
/devmem_smoke rx dsim1 0 5300 $BYTES nobind > /tmp/rx1.log 2>&1 &
P=$!
sleep 0.3
ip netns exec a /devmem_smoke txdm dsim0 10.0.0.2 5300 $BYTES || rc=1
wait $P || rc=1
cat /tmp/rx1.log

# devmem TX -> devmem RX
/devmem_smoke rx dsim1 3 5201 $BYTES > /tmp/rx2.log 2>&1 &
P=$!
i=0; while [ $i -lt 200 ] && ! grep -q "listening\|failed" /tmp/rx*.log 2>/dev/null; do sleep 0.1; i=$((i+1)); done
ip netns exec a /devmem_smoke txdm dsim0 10.0.0.2 5201 $BYTES || rc=1
wait $P || rc=1
cat /tmp/rx2.log
ip -n a -s link show dsim0
dmesg | grep -A40 -E "WARNING|BUG|Oops" | head -80
[ $rc = 0 ]
ip netns del a
sleep 1
rmmod devmemsim
echo TX-SMOKE-OK

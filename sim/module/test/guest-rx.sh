# SPDX-License-Identifier: GPL-2.0-only
# Guest side of the devmemsim RX smoke test (run by qemu-smoke.sh).
# dsim0 in netns "a" (10.0.0.1) sends, dsim1 in the init netns (10.0.0.2)
# receives on queue 3 with a udmabuf bound.
BYTES=${BYTES:-64M}
# busybox sh may prefer its own applets: use full paths
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

ethtool -i dsim1
ethtool -g dsim1
ethtool -l dsim1

# header split off: bind must fail
/devmem_smoke bindfail dsim1 3

ethtool -G dsim1 tcp-data-split on
/devmem_smoke rings dsim1 -1 0 || echo "(no hds-thresh on this kernel)"
ethtool -g dsim1
ethtool -X dsim1 equal 2
ethtool -x dsim1 | head -5
ethtool -N dsim1 flow-type tcp4 dst-ip 10.0.0.2 dst-port 5201 action 3
ethtool -n dsim1

# plain transfer first (queue 3, header split, no binding)
/devmem_smoke rx dsim1 3 5200 4M nobind &
sleep 0.3
ip netns exec a /devmem_smoke tx 10.0.0.2 5200 4M
wait $! || exit 1

/devmem_smoke rx dsim1 3 5201 $BYTES > /tmp/rx.log 2>&1 &
RXPID=$!
i=0; while [ $i -lt 200 ] && ! grep -q "listening\|failed" /tmp/rx*.log 2>/dev/null; do sleep 0.1; i=$((i+1)); done
cat /tmp/rx.log
ip netns exec a /devmem_smoke tx 10.0.0.2 5201 $BYTES || echo "TX FAILED"
rc=0
wait $RXPID || rc=$?
cat /tmp/rx.log
dmesg | grep -A40 -E "WARNING|BUG|Oops" | head -80
ip -s link show dsim1
ethtool -G dsim1 tcp-data-split off || true
cat /sys/kernel/debug/devmemsim/dsim1/payload_bytes
[ $rc = 0 ]
rmmod devmemsim || { ip netns del a; sleep 1; rmmod devmemsim; }
echo RX-SMOKE-OK

# SPDX-License-Identifier: GPL-2.0-only
# Guest side: 8 concurrent flows over two bound queues (2 and 3), several
# rounds, after a single-flow 64 MiB transfer (the order the vm suite uses).
# See lib.sh for how it runs.
set +e
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/lib.sh"
pair_up b
B="ip netns exec b"
$B ethtool -G dsim1 tcp-data-split on
$B $S rings dsim1 -1 0 > /dev/null
$B ethtool -X dsim1 equal 2
fail=0

$B ethtool -N dsim1 flow-type tcp4 dst-port 6001 action 3
$B $S rx dsim1 3 6001 64M > /tmp/r.log 2>&1 &
P=$!
wait_listen /tmp/r.log
ip netns exec a $S tx 10.0.0.2 6001 64M > /dev/null || fail=1
wait $P || fail=1
cat /tmp/r.log
for r in $($B ethtool -n dsim1 | awk '/^Filter:/ {print $2}'); do $B ethtool -N dsim1 delete $r; done

$B ethtool -X dsim1 context new start 2 equal 2
for round in $(seq 1 $ROUNDS); do
	echo "=== round $round [$(cut -d' ' -f1 /proc/uptime)]"
	# all flows go to one port: an RSS context over queues 2,3 spreads them
	$B ethtool -N dsim1 flow-type tcp4 dst-port 6100 context 1 > /dev/null
	b2=$($B ethtool -S dsim1 | awk '$1 == "rx2_packets:" {print $2}')
	b3=$($B ethtool -S dsim1 | awk '$1 == "rx3_packets:" {print $2}')
	FLOWS=8 $B $S rx dsim1 2,3 6100 4M > /tmp/r.log 2>&1 &
	P=$!
	wait_listen /tmp/r.log
	for i in 0 1 2 3 4 5 6 7; do
		ip netns exec a $S tx 10.0.0.2 6100 4M > /dev/null &
	done
	wait $P || fail=1
	wait
	cat /tmp/r.log
	a2=$($B ethtool -S dsim1 | awk '$1 == "rx2_packets:" {print $2}')
	a3=$($B ethtool -S dsim1 | awk '$1 == "rx3_packets:" {print $2}')
	echo "queue 2: +$((a2 - b2)) frames, queue 3: +$((a3 - b3)) frames"
	for r in $($B ethtool -n dsim1 | awk '/^Filter:/ {print $2}'); do $B ethtool -N dsim1 delete $r; done
done
$B ethtool -S dsim1 | grep -v ": 0$"
kernel_trouble
echo "[$(cut -d' ' -f1 /proc/uptime)] done"
exit $fail

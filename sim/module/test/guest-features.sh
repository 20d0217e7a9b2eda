# SPDX-License-Identifier: GPL-2.0-only
# Guest side of the devmemsim feature test: steering (ntuple, RSS, RSS
# contexts, IPv6), channels vs. bindings, unbind, socket close with
# outstanding tokens, and every fault-injection knob.
# See lib.sh for how it runs.
set +e
. "$(dirname "$0")/lib.sh"
D=/sys/kernel/debug/devmemsim/dsim1
fail=0
check() { # description, command...
	echo "[$(cut -d" " -f1 /proc/uptime)] $1"
	local what=$1; shift
	if "$@"; then echo "PASS: $what"; else echo "FAIL: $what"; fail=1; fi
}
qpk() { ethtool -S dsim1 | awk -v k="rx$1_packets:" '$1 == k {print $2}'; }
# xfer PORT QUEUE BYTES RXOPT DSTIP -> output of the receiver in /tmp/x.log
xfer() {
	: > /tmp/x.log	# wait_listen must not see the previous run's line
	$S rx dsim1 $2 $1 $3 $4 > /tmp/x.log 2>&1 &
	local p=$!
	wait_listen /tmp/x.log
	ip netns exec a $S tx $5 $1 $3 > /tmp/t.log 2>&1
	wait $p
	local r=$?
	cat /tmp/x.log
	return $r
}

V6=1 pair_up
sleep 0.5

check "default hds off" sh -c 'ethtool -g dsim1 | grep -q "TCP data split:.*off"'
ethtool -G dsim1 tcp-data-split on
$S rings dsim1 -1 0 >/dev/null 2>&1
ethtool -X dsim1 equal 2

# --- ntuple: explicit location, any location, list, delete
ethtool -N dsim1 flow-type tcp4 dst-ip 10.0.0.2 dst-port 5201 action 3 loc 5
check "rule at loc 5" sh -c 'ethtool -n dsim1 | grep -q "Filter: 5"'
ethtool -N dsim1 flow-type tcp6 dst-ip fd00::2 dst-port 5206 action 2
check "two rules" sh -c 'ethtool -n dsim1 | grep -q "Total 2 rules"'
ethtool -n dsim1
ethtool -N dsim1 flow-type udp4 dst-port 9999 action 1
ethtool -N dsim1 delete 0
check "delete" sh -c 'ethtool -n dsim1 | grep -q "Total 2 rules"'
ethtool -N dsim1 flow-type tcp6 dst-ip fd00::2 dst-port 5206 action 2

# --- IPv6 flow steered by tcp6 rule to queue 2 (plain)
b=$(qpk 2)
check "ipv6 xfer" xfer 5206 2 2M nobind fd00::2
a=$(qpk 2)
check "ipv6 frames on queue 2 ($b -> $a)" [ $((a - b)) -gt 1000 ]

# --- RSS: flows not matching rules stay on queues 0,1
b3=$(qpk 3); b2=$(qpk 2)
check "rss xfer" xfer 5300 0 2M nobind 10.0.0.2
check "rss avoided queues 2,3" [ "$(qpk 3)" = "$b3" -a "$(qpk 2)" = "$b2" ]

# --- RSS context over queues 2..3, rule with context
ethtool -X dsim1 context new start 2 equal 2
check "context 1 exists" sh -c 'ethtool -x dsim1 context 1 | grep -q "   0:"'
ethtool -N dsim1 flow-type tcp4 dst-port 5400 context 1
ethtool -n dsim1
b0=$(qpk 0); b1=$(qpk 1); b2=$(qpk 2); b3=$(qpk 3)
check "ctx xfer" xfer 5400 0 2M nobind 10.0.0.2
echo "queue deltas: $(( $(qpk 0)-b0 )) $(( $(qpk 1)-b1 )) $(( $(qpk 2)-b2 )) $(( $(qpk 3)-b3 ))"
check "context steered to 2/3" [ $(( $(qpk 2)-b2 + $(qpk 3)-b3 )) -gt 1000 ]
check "context delete refused while used" sh -c '! ethtool -X dsim1 context 1 delete'

# --- devmem RX on queue 3 + channels shrink refused while bound
: > /tmp/x.log
$S rx dsim1 3 5201 8M > /tmp/x.log 2>&1 &
P=$!
wait_listen /tmp/x.log
check "shrink channels refused while bound" sh -c '! ethtool -L dsim1 combined 2'
check "hds off refused while bound" sh -c '! ethtool -G dsim1 tcp-data-split off'
ip netns exec a $S tx 10.0.0.2 5201 8M >/dev/null
wait $P; r=$?; cat /tmp/x.log
check "devmem rx 8M" [ $r = 0 ]

# --- after unbind (socket closed) the queue is normal again
check "unbound queue 3 plain" xfer 5201 3 2M nobind 10.0.0.2

# --- socket closed with outstanding tokens
check "keep tokens" xfer 5201 3 4M keep 10.0.0.2

# --- fault: corrupt_offset
echo 1000000 > $D/corrupt_offset
xfer 5201 3 4M "" 10.0.0.2
check "corruption reported at 999999" grep -q "bad 1 first bad offset 999999" /tmp/x.log
check "corrupt knob reset" [ "$(cat $D/corrupt_offset)" = 0 ]

# --- fault: drop_every
echo 50 > $D/drop_every
check "drop_every 50: data still valid" xfer 5201 3 4M "" 10.0.0.2
echo 0 > $D/drop_every
ethtool -S dsim1 | grep drops

# --- fault: fail_alloc
echo 3 > $D/fail_alloc
check "fail_alloc 3: data still valid" xfer 5201 3 4M "" 10.0.0.2
check "alloc_fail counted" [ "$(ethtool -S dsim1 | awk '$1=="rx3_alloc_fail:" {print $2}')" -ge 3 ]

# --- fault: fail_restart
echo 1 > $D/fail_restart
$S rx dsim1 3 5201 1M > /tmp/x.log 2>&1
cat /tmp/x.log
check "fail_restart: bind fails" grep -q "bind-rx failed" /tmp/x.log
check "after fail_restart: bind works" xfer 5201 3 2M "" 10.0.0.2

# --- channels
for r in $(ethtool -n dsim1 | awk '/^Filter:/ {print $2}'); do
	ethtool -N dsim1 delete $r
done
check "no rules left" sh -c 'ethtool -n dsim1 | grep -q "Total 0 rules"'
check "context delete" ethtool -X dsim1 context 1 delete
ethtool -X dsim1 default
check "shrink channels to 2" ethtool -L dsim1 combined 2
check "2 channels" sh -c 'ethtool -l dsim1 | tail -2 | grep -q "Combined:.*2"'
check "xfer on 2 channels" xfer 5500 0 2M nobind 10.0.0.2
check "grow channels to 4" ethtool -L dsim1 combined 4

# --- rx-ntuple-filter off flushes rules and refuses new ones
ethtool -N dsim1 flow-type tcp4 dst-port 7000 action 1
check "ntuple off" ethtool -K dsim1 ntuple off
check "rules flushed" sh -c 'ethtool -n dsim1 2>&1 | grep -q "Total 0 rules"'
check "insert refused while off" sh -c '! ethtool -N dsim1 flow-type tcp4 dst-port 7000 action 1 2>/dev/null'
check "ntuple on" ethtool -K dsim1 ntuple on

# --- MTU 9000 with devmem
ip link set dsim1 mtu 9000; ip -n a link set dsim0 mtu 9000
ethtool -N dsim1 flow-type tcp4 dst-port 5201 action 3
check "mtu 9000 devmem" xfer 5201 3 8M "" 10.0.0.2
ip link set dsim1 down; ip link set dsim1 up; sleep 0.3
check "after down/up devmem" xfer 5201 3 2M "" 10.0.0.2

# --- bind while the device is down, then up; unbind while down
ip link set dsim1 down
$S rx dsim1 3 5201 2M > /tmp/x.log 2>&1 &
P=$!
wait_listen /tmp/x.log
ip link set dsim1 up
sleep 1
ip netns exec a $S tx 10.0.0.2 5201 2M > /dev/null
wait $P; r=$?; cat /tmp/x.log
check "bind while down, receive after up" [ $r = 0 ]
$S rx dsim1 3 5201 1G > /tmp/x.log 2>&1 &
P=$!
wait_listen /tmp/x.log
ip link set dsim1 down
kill $P; wait $P
sleep 0.5
ip link set dsim1 up
sleep 1
check "unbind while down, plain after up" xfer 5201 3 2M nobind 10.0.0.2

kernel_trouble
ip netns del a
sleep 1
check "rmmod" rmmod devmemsim
[ $fail = 0 ] && echo FEATURES-OK
exit $fail

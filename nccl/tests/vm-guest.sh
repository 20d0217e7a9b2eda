#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Inside the vm runner's guest (root, simulated NIC loaded):
#   1. several NICs: dsim0 and dsim1 in one namespace are two devices, each
#      with its PCI path (PCI=yes: the sim's PCI parents behind QEMU's
#      IOMMU) or none (PCI=no: the platform parent), set up for devmem by
#      a listen on each;
#   2. two ranks, a process each, rank 0 on dsim0 in namespace dmtA
#      (10.77.0.1) and rank 1 on dsim1 in dmtB (10.77.0.2): without devmem
#      (plain TCP, table v8), then with devmem enabled (table v11), 64 MiB
#      each way received through devmem RX into host memory (udmabuf) and
#      sent from a udmabuf registered with regMrDmaBuf (devmem TX from
#      Linux 6.16, plain TCP before);
#   3. the same with rank 1 unprivileged (uid 1001, no capability): the
#      library sets its NIC up through devmemtcp-broker, started in dmtB
#      with a policy for that uid, dsim1, its data ports
#      (NCCL_DEVMEMTCP_PORT_RANGE) and a udmabuf.
# Afterwards both NICs must be as found: no journal, no rule.
# usage: vm-guest.sh HARNESS PLUGIN BROKER PCI(yes|no)
set -eu
harness=$1 plugin=$2 broker=$3 pci=$4
run_dir=/run/devmemtcp
t0=$(date +%s)
say() { echo "[vm-nccl +$(($(date +%s) - t0))s] $*"; }

# 1. several NICs, in this namespace
if [ ! -e /var/run/netns/dmtB ]; then
	ip addr add 10.77.8.1/24 dev dsim0
	ip addr add 10.77.9.1/24 dev dsim1
	ip link set dsim0 up
	ip link set dsim1 up
	rc=0
	NCCL_DEVMEMTCP_IFNAME=dsim NCCL_DEVMEMTCP_ENABLE=1 NCCL_DEVMEMTCP_MEM=host \
		NCCL_DEVMEMTCP_BUFFER_SIZE=8M "$harness" "$plugin" --devices 2 --pci "$pci" \
		>/tmp/devices.log 2>&1 || rc=$?
	grep -v ' INFO ' /tmp/devices.log
	[ $rc = 0 ] || { cat /tmp/devices.log; exit $rc; }
	say "several NICs: passed"
	ip addr flush dev dsim0
	ip addr flush dev dsim1

	mkdir -p /var/run/netns
	ip netns add dmtA
	ip netns add dmtB
	ip link set dsim0 netns dmtA
	ip link set dsim1 netns dmtB
	ip -n dmtA link set lo up
	ip -n dmtB link set lo up
	ip -n dmtA addr add 10.77.0.1/24 dev dsim0
	ip -n dmtB addr add 10.77.0.2/24 dev dsim1
	ip -n dmtA link set dsim0 up
	ip -n dmtB link set dsim1 up
fi

rules() { # ns dev -> number of ntuple rules
	ip netns exec "$1" ethtool -n "$2" | sed -n 's/^Total \([0-9]*\) rules.*/\1/p'
}
before0=$(rules dmtA dsim0) before1=$(rules dmtB dsim1)
split0=$(ip netns exec dmtA ethtool -g dsim0 | grep -i 'split' || true)
split1=$(ip netns exec dmtB ethtool -g dsim1 | grep -i 'split' || true)

# 2. two ranks
ranks="--fork --ns0 dmtA --if0 dsim0 --ns1 dmtB --if1 dsim1"
# devmem not enabled: plain TCP over the same NICs, which stay untouched
"$harness" "$plugin" $ranks --version 8 --bytes 16M
say "plain TCP: passed"
# devmem RX and TX
NCCL_DEVMEMTCP_ENABLE=1 NCCL_DEVMEMTCP_MEM=host NCCL_DEVMEMTCP_BUFFER_SIZE=32M \
	"$harness" "$plugin" $ranks --devmem --dmabuf-tx --version 11
say "devmem: passed"

# 3. rank 1 without CAP_NET_ADMIN, through devmemtcp-broker
bdir=/run/dmt-nccl-broker
mkdir -p "$bdir"
chmod 755 "$bdir"
unprivileged_ranks() {
	DEVMEMTCP_BROKER_SOCKET=$bdir/broker.sock NCCL_DEVMEMTCP_PORT_RANGE=47000-47099 \
		NCCL_DEVMEMTCP_ENABLE=1 NCCL_DEVMEMTCP_MEM=host NCCL_DEVMEMTCP_BUFFER_SIZE=32M \
		"$harness" "$plugin" $ranks --devmem --dmabuf-tx --version 11 --bytes 16M \
		--uid1 1001
}
# devmemtcp-broker in dmtB with the one rule $1 for uid 1001, then the two
# ranks with rank 1 as uid 1001 through it (their output into the file $2,
# if given); rc: the harness's exit status
through_broker() {
	echo "allow uid 1001 interface dsim1 $1 ports 47000-47099 udmabuf 64M udmabuf-total 128M tx" >"$bdir/broker.conf"
	chmod 644 "$bdir/broker.conf"
	rm -f "$bdir/broker.sock"
	ip netns exec dmtB "$broker" --config "$bdir/broker.conf" --socket "$bdir/broker.sock" \
		--idle-exit 120 --verbose 2>"$bdir/broker.log" &
	bpid=$!
	i=0
	until [ -S "$bdir/broker.sock" ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || { cat "$bdir/broker.log"; echo "FAIL: the broker did not start"; exit 1; }
		sleep 0.1
	done
	rc=0
	if [ -n "${2:-}" ]; then
		unprivileged_ranks >"$2" 2>&1 || rc=$?
	else
		unprivileged_ranks || rc=$?
	fi
	kill "$bpid"
	wait "$bpid" || true
}
through_broker "queues 1"
if [ $rc != 0 ]; then
	sed 's/^/  broker: /' "$bdir/broker.log"
	exit $rc
fi
say "unprivileged rank through devmemtcp-broker: passed"

# 4. the same under a rule that names queue ids: the plugin asks for the
# highest one the rule names (6), not the last queue of the interface
through_broker "queues 2,5-6" "$bdir/ids.log"
if [ $rc != 0 ] || ! grep -q "dsim1: devmem RX set up: 1 queue from 6," "$bdir/ids.log"; then
	sed 's/^/  harness: /' "$bdir/ids.log"
	sed 's/^/  broker: /' "$bdir/broker.log"
	echo "FAIL: under 'queues 2,5-6' rank 1 did not set up RX queue 6 through the broker (exit $rc)"
	exit 1
fi
say "unprivileged rank under a rule naming queue ids: queue 6, passed"

fail=0
for f in "$run_dir"/*.owner.* "$run_dir"/*.base; do
	[ -e "$f" ] || continue
	echo "FAIL: $f left behind"
	fail=1
done
[ "$(rules dmtA dsim0)" = "$before0" ] || { echo "FAIL: dsim0 ntuple rules $(rules dmtA dsim0), were $before0"; fail=1; }
[ "$(rules dmtB dsim1)" = "$before1" ] || { echo "FAIL: dsim1 ntuple rules $(rules dmtB dsim1), were $before1"; fail=1; }
[ "$(ip netns exec dmtA ethtool -g dsim0 | grep -i 'split' || true)" = "$split0" ] || { echo "FAIL: dsim0 header split changed"; fail=1; }
[ "$(ip netns exec dmtB ethtool -g dsim1 | grep -i 'split' || true)" = "$split1" ] || { echo "FAIL: dsim1 header split changed"; fail=1; }
[ $fail = 0 ] && echo "both NICs as found: no journal, $before0/$before1 rules, header split unchanged ($split0 / $split1)"
exit $fail

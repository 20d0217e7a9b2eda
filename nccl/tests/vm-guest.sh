#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Inside the vm runner's guest (root, simulated NIC loaded): two ranks, a
# process each, rank 0 on dsim0 in namespace dmtA (10.77.0.1) and rank 1
# on dsim1 in dmtB (10.77.0.2): first without devmem (plain TCP, table v8),
# then with devmem enabled (table v11).  Each receives 64 MiB
# through devmem RX into host memory (udmabuf) and sends 64 MiB from a
# udmabuf registered with regMrDmaBuf (devmem TX from Linux 6.16, plain
# TCP before).  Afterwards both NICs must be as found: no journal, no rule.
# usage: vm-guest.sh HARNESS PLUGIN
set -eu
harness=$1 plugin=$2
run_dir=/run/devmemtcp

if [ ! -e /var/run/netns/dmtB ]; then
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

ranks="--fork --ns0 dmtA --if0 dsim0 --ns1 dmtB --if1 dsim1"
# devmem not enabled: plain TCP over the same NICs, which stay untouched
"$harness" "$plugin" $ranks --version 8 --bytes 16M
# devmem RX and TX
NCCL_DEVMEMTCP_ENABLE=1 NCCL_DEVMEMTCP_MEM=host NCCL_DEVMEMTCP_BUFFER_SIZE=32M \
	"$harness" "$plugin" $ranks --devmem --dmabuf-tx --version 11

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

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The data-loader example end to end over the simulated NIC, with a udmabuf
# and CPU copies in place of the GPU.  Runs inside the vm runner's guest
# (the vm suite's vm-dataloader-* tests, through tests/vm/run-vm.sh):
#   VM_HARNESS=B/tests/vm/vm-harness sh tests/gpu/dataloader-vm.sh B/tests/gpu/dataloader [SAMPLES [RECEIVER-OPTION]...]
# Sender in namespace dmtA (dsim0, 10.77.0.1), receiver in dmtB (dsim1): the
# vm topology, which vm-harness builds.
set -eu
ex=$1
n=${2:-40}
shift $(($# < 2 ? $# : 2))
port=5301
log=/tmp/dataloader-rx.log

"$VM_HARNESS" up >/dev/null

ip netns exec dmtB "$ex" -l $port -i dsim1 --cpu "$@" >$log 2>&1 &
rx=$!
i=0
until grep -q binding $log 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 $rx 2>/dev/null; then
		cat $log
		exit 1
	fi
	sleep 0.1
done
ip netns exec dmtA "$ex" -s 10.77.0.2 -p $port -n "$n"
rc=0
wait $rx || rc=$?
cat $log
grep -q "received (CPU copies): $n samples, .* 0 bad" $log || rc=1
exit $rc

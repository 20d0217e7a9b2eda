#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# emu suite: two processes share the emulated NIC, as two data loaders (or
# two NCCL ranks) share a real one: both receive at once, each on a queue
# of its own with its own binding, which the other process sees in the
# NIC's state; the library's owners reconcile the shared settings, and
# once both are gone the NIC is as found, no binding or page left.
#   EMU_BUILD=BUILDDIR sh tests/emu/emu-two.sh [SAMPLES]
set -eu
n=${1:-60}
. "$(dirname "$0")/emu-env.sh"
B=$EMU_BUILD
before=$(nic_state)
for p in 5601 5611; do
	rx_bg "$B/tests/gpu/dataloader" -l $p -i dsim1 --cpu >"$EMU_DIR/rx$p.log" 2>&1 &
	eval "pid$p=\$!"
	wait_for "$EMU_DIR/rx$p.log" binding
done
# both bound at once, on two queues
nic_state | grep '^queue' | tee "$EMU_DIR/queues"
[ "$(wc -l <"$EMU_DIR/queues")" = 2 ]
for p in 5601 5611; do
	tx_bg "$B/tests/gpu/dataloader" -s 10.77.0.2 -p $p -n "$n" &
	eval "spid$p=\$!"
done
rc=0
for p in 5601 5611; do
	eval "wait \$spid$p" || rc=1
	eval "wait \$pid$p" || rc=1
	cat "$EMU_DIR/rx$p.log"
	grep -q "received (CPU copies): $n samples, .* 0 bad" "$EMU_DIR/rx$p.log" || rc=1
done
[ $rc = 0 ]
[ "$(nic_state)" = "$before" ] || { echo "emu: the NIC was not restored"; nic_state; exit 1; }
echo "emu: two loaders at once on queues $(cut -d' ' -f2 "$EMU_DIR/queues" | tr '\n' ' ')- NIC restored"
emu_done

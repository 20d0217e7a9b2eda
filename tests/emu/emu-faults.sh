#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# emu suite: a random-fault run on the emulated NIC, the faults in an order
# and at moments drawn from SEED (printed, to repeat a run):
#   reset  the peer resets the data connection mid-sample: the data loader
#          reports the reset and undoes its NIC setup;
#   kill   the data loader is killed (SIGKILL) mid-transfer: the emulator
#          gives back its tokens and unbinds its buffer (as the kernel does
#          for a dead process), and `devmemtcp restore` puts the NIC back;
#   stall  the consumer stalls with every token held (tests/emu/stall.py):
#          the NIC starves and counts it, then every byte arrives intact.
# After each: no binding or page left, nothing unmodelled, the NIC as
# found.  With --gpu the loader gathers into CUDA memory and the stalled
# consumer checks on the GPU (the GPU machine, tests/emu/gpu-run.sh).
#
#   EMU_BUILD=BUILDDIR [EMU_PYTHONPATH=DIR] sh tests/emu/emu-faults.sh [--gpu] [SEED|auto [PYTHON]]
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
# first: it runs this script again in a mount namespace of its own, with
# the arguments as given
. "$src/tests/emu/emu-env.sh"
gpu=
[ "${1:-}" = --gpu ] && { gpu=1; shift; }
seed=${1:-auto}
[ "$seed" = auto ] && seed=$(date +%s)
py=${2:-python3}
B=$EMU_BUILD
cpu=--cpu
[ -n "$gpu" ] && cpu=
echo "emu-faults: seed $seed"

# R: the next number below $1 from the seed
rnd() {
	seed=$(((seed * 1103515245 + 12345) % 2147483648))
	R=$((seed / 65536 % $1))
}

before=$(nic_state)
same_nic() {
	if [ "$(nic_state)" != "$before" ]; then
		echo "emu-faults: $1: the NIC is not as found:"
		nic_state
		return 1
	fi
}

fault_reset() {
	rnd 6
	n=$((1 + R))
	log=$EMU_DIR/reset.log
	rx_bg "$B/tests/gpu/dataloader" -l 5501 -i dsim1 $cpu >"$log" 2>&1 &
	pid=$!
	wait_for "$log" binding
	tx "$py" "$src/tests/emu/fault-sender.py" 10.77.0.2 5501 $n
	if wait $pid; then
		cat "$log"
		echo "emu-faults: reset: the loader did not see the reset"
		return 1
	fi
	cat "$log"
	grep -q "Connection reset by peer" "$log"
	grep -q "received (.*): [0-9]* samples, .* 0 bad" "$log"
	same_nic reset
	emu_done
	echo "emu-faults: reset after $n samples and a half (those the reset did not discard arrived intact): reported, NIC undone, nothing leaked"
}

fault_kill() {
	rnd 600
	ms=$((200 + R))
	log=$EMU_DIR/kill.log
	rx_bg "$B/tests/gpu/dataloader" -l 5502 -i dsim1 $cpu >"$log" 2>&1 &
	pid=$!
	wait_for "$log" binding
	tx_bg "$B/tests/gpu/dataloader" -s 10.77.0.2 -p 5502 -n 2000 >/dev/null 2>&1 &
	spid=$!
	sleep "$(printf '0.%03d' $ms)"
	kill -9 $pid
	wait $pid || true
	wait $spid || true
	reaped=$(emu_stat reaped_bindings)
	emu_done
	[ "$reaped" -ge 1 ] || [ "$(emu_stat reaped_bindings)" -ge 1 ]
	# the dead owner's journal: the next restore undoes its NIC changes
	rx "$B/tools/devmemtcp" restore dsim1
	same_nic kill
	echo "emu-faults: loader killed after ${ms} ms: tokens given back, binding gone ($(emu_stat reaped_tokens) tokens reaped), NIC restored"
}

fault_stall() {
	rnd 15
	s=$((10 + R))
	log=$EMU_DIR/stall.log
	starv=$(emu_stat starvations)
	if [ -z "${EMU_PYTHONPATH:-}" ]; then
		# without the Python binding: test-e2e's starving receiver
		emu "$B/tests/vm/test-e2e" starve
	else
		PYTHONPATH=$EMU_PYTHONPATH rx_bg "$py" "$src/tests/emu/stall.py" -l 5503 -i dsim1 \
			--bytes 8388608 --buf 2097152 --stall "$((s / 10)).$((s % 10))" \
			${gpu:+--cuda} >"$log" 2>&1 &
		pid=$!
		wait_for "$log" binding
		tx "$py" "$src/examples/python/sender.py" stream 10.77.0.2 5503 8M
		rc=0
		wait $pid || rc=$?
		cat "$log"
		[ $rc = 0 ]
	fi
	[ "$(emu_stat starvations)" -gt "$starv" ] || {
		echo "emu-faults: stall: the NIC never starved"
		return 1
	}
	same_nic stall
	emu_done
	echo "emu-faults: consumer stalled $((s / 10)).$((s % 10)) s: starvation counted ($(emu_stat starvations) times, $(emu_stat alloc_fail) allocation failures), every byte intact"
}

# every fault once, in an order drawn from the seed
order="reset kill stall"
rnd 6
case $R in
1) order="reset stall kill" ;;
2) order="kill reset stall" ;;
3) order="kill stall reset" ;;
4) order="stall reset kill" ;;
5) order="stall kill reset" ;;
esac
for f in $order; do
	echo "=== $f"
	"fault_$f"
done
echo "emu-faults: $order: passed"

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# emu suite: the Python loader (examples/python/torch_loader.py, PyTorch,
# CPU tensors) on the emulated NIC, fed by examples/python/sender.py: every
# sample compared with the sender's bytes by the loader itself; then single
# fragments viewed in place through DLPack (tests/emu/views.py, numpy) and
# compared; then every token back, no binding left, the NIC as it was.
#   EMU_BUILD=BUILDDIR EMU_PYTHONPATH=DIR sh tests/emu/emu-torch.sh PYTHON [SAMPLES]
set -eu
py=$1
n=${2:-40}
src=$(cd "$(dirname "$0")/../.." && pwd)
if ! "$py" -c 'import torch' 2>/dev/null; then
	echo "emu: $py has no torch (Debian: python3-torch): skipped"
	exit 77
fi
. "$src/tests/emu/emu-env.sh"
export PYTHONPATH=$EMU_PYTHONPATH PYTHONDONTWRITEBYTECODE=1
before=$(nic_state)
log=$EMU_DIR/torch.log
rx_bg "$py" "$src/examples/python/torch_loader.py" -l 5401 -i dsim1 --cpu -n "$n" >"$log" 2>&1 &
pid=$!
wait_for "$log" binding || { kill $pid; exit 1; }
tx "$py" "$src/examples/python/sender.py" samples 10.77.0.2 5401 -n "$n"
rc=0
wait $pid || rc=$?
cat "$log"
[ $rc = 0 ]
grep -q "received (CPU): $n samples, .* 0 bad" "$log"
vlog=$EMU_DIR/views.log
rx_bg "$py" "$src/tests/emu/views.py" -l 5411 -i dsim1 --bytes 4194304 >"$vlog" 2>&1 &
pid=$!
wait_for "$vlog" binding || { kill $pid; exit 1; }
tx "$py" "$src/examples/python/sender.py" stream 10.77.0.2 5411 4M
rc=0
wait $pid || rc=$?
cat "$vlog"
[ $rc = 0 ]
[ "$(nic_state)" = "$before" ] || { echo "emu: the NIC was not restored"; exit 1; }
echo "emu: NIC restored"
emu_done

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# emu suite: tests/vm/test-e2e's every test on the emulated NIC (the vm
# suite runs them over the simulated NIC): the refusals with the kernel's
# errno and text (header split off, queue busy), steering misses, unbind,
# tokens left at close, page starvation, a corrupted byte found; then
# devmem TX into devmem RX (tests/vm/test-tx-devmem --quick: every byte
# checked, no range reported free before the peer's ACK); then no binding
# or page left, nothing unmodelled, the NIC as found.
#   EMU_BUILD=BUILDDIR sh tests/emu/emu-e2e.sh [test-e2e tests...]
set -eu
. "$(dirname "$0")/emu-env.sh"
before=$(nic_state)
emu "$EMU_BUILD/tests/vm/test-e2e" --bytes 16M "$@"
emu "$EMU_BUILD/tests/vm/test-tx-devmem" --setup --quick --bytes 8M
[ "$(nic_state)" = "$before" ] || { echo "emu: the NIC was not restored"; nic_state; exit 1; }
echo "emu: NIC restored"
emu_done

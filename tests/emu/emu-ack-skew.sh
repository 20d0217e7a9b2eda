#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# emu suite: the emulated NIC's devmem TX completions when its reading of
# where a send starts in the stream (bytes ACKed plus the send queue, two
# calls) is off, as when an ACK lands between them on a many-core machine
# (the test hook DEVMEMTCP_EMU_TEST_ACK_SKEW makes the first reading of
# each socket 1 GiB long): every send still completes once the peer ACKed
# it -- devmem TX into devmem RX, every byte checked, within 60 s (a send
# whose completion waits for bytes never sent hangs the sender).
#   EMU_BUILD=BUILDDIR sh tests/emu/emu-ack-skew.sh
set -eu
. "$(dirname "$0")/emu-env.sh"
export DEVMEMTCP_EMU_TEST_ACK_SKEW=1073741824
# its own process group (sender and receiver), killed whole at 60 s
LD_PRELOAD=$emu_pre setsid "$EMU_BUILD/tests/vm/test-tx-devmem" --setup --quick --bytes 8M &
pid=$!
(sleep 60 && kill -KILL -- -"$pid") >/dev/null 2>&1 &
watch=$!
rc=0
wait "$pid" || rc=$?
kill "$watch" 2>/dev/null || true
if [ "$rc" != 0 ]; then
	echo "emu: devmem TX with a skewed first reading of the send queue: exit $rc (137: killed at 60 s)"
	exit 1
fi
emu_done

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# python-emu: the binding's tests that need a devmem NIC (python/tests/emu:
# devmemtcp.torch's DataLoader workers and threaded reader, PyTorch) on the
# emulated NIC, the test process in dsim1's namespace, senders in dsim0's;
# then every token back, no binding left, the NIC as it was.
#   EMU_BUILD=BUILDDIR EMU_PYTHONPATH=DIR sh tests/emu/emu-python.sh PYTHON [PYTEST ARGS...]
# DEVMEMTCP_TEST_DEVICE=cuda: CUDA tensors (the GPU machine).
set -eu
py=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
if ! "$py" -c 'import torch' 2>/dev/null; then
	echo "emu: $py has no torch (Debian: python3-torch)"
	[ "${CI:-}" = true ] && exit 1
	exit 77
fi
. "$src/tests/emu/emu-env.sh"
shift
export PYTHONPATH=$EMU_PYTHONPATH${EMU_EXTRA_PYTHONPATH:+:$EMU_EXTRA_PYTHONPATH} PYTHONDONTWRITEBYTECODE=1
export EMU_TX="ip netns exec dmtA" EMU_IFNAME=dsim1 EMU_PEER=10.77.0.2
before=$(nic_state)
rc=0
rx "$py" "$src/python/tests/pytest-run.py" -q -rs -s -p no:cacheprovider "$@" \
	"$src/python/tests/emu" || rc=$?
[ $rc = 0 ] || exit $rc
[ "$(nic_state)" = "$before" ] || { echo "emu: the NIC was not restored"; nic_state; exit 1; }
echo "emu: NIC restored"
emu_done

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The library end to end in one buffer layout of the simulated NIC, which
# the vm runner loaded with that layout's module parameters (the vm suite's
# vm-layout-* tests, through tests/vm/run-vm.sh):
#   VM_HARNESS=B/tests/vm/vm-harness sh tests/vm/layout-vm.sh [--tx] \
#       B/tests/vm/test-e2e tests/gpu/dataloader-vm.sh B/tests/gpu/dataloader [--rx-page-size N]
# The transfer (16 MiB through an 8 MiB buffer, with its fragment layout
# report and check) and the multi-flow test, then the data loader, and with
# --tx devmem TX into devmem RX (kernels with devmem TX): they validate
# every byte and return every token themselves.  Here: the
# receiving NIC's configuration is as it was before, no "DMA" of the
# simulated NICs missed a mapping (and with an IOMMU, they went through
# it), and devmemsim unloads (no binding or page left behind).
set -eu
tx=0
[ "$1" = --tx ] && { tx=1; shift; }
e2e=$1 loader_sh=$2 loader=$3
shift 3
tool=$(dirname "$e2e")/../../tools/devmemtcp
dbg=/sys/kernel/debug/devmemsim

nic_state() {
	ip netns exec dmtB sh -c "ethtool -g dsim1; ethtool -l dsim1;
		ethtool -k dsim1 | grep -E '^(ntuple-filters|receive-hashing):';
		ethtool -x dsim1; ethtool -n dsim1 2>&1;
		$tool probe dsim1 --json | grep -o '\"hds_thresh\":[0-9a-z]*'"
}

"$VM_HARNESS" up >/dev/null
before=$(nic_state)
head -n2 $dbg/dsim1/state
"$e2e" --bytes 16M --buf 8M --flow-bytes 1M "$@" transfer multiflow
VM_HARNESS=$VM_HARNESS sh "$loader_sh" "$loader" 8 "$@"
if [ $tx = 1 ] && "$VM_HARNESS" kernel-at-least 6.16; then
	"$(dirname "$e2e")/test-tx-devmem" --setup --quick --bytes 8M
fi
after=$(nic_state)
if [ "$before" != "$after" ]; then
	echo "the NIC was not restored:"
	printf '%s\n' "$before" >/tmp/nic-before
	printf '%s\n' "$after" >/tmp/nic-after
	diff /tmp/nic-before /tmp/nic-after || true
	exit 1
fi
echo "NIC restored"
faults=$(($(cat $dbg/dsim0/dma_faults) + $(cat $dbg/dsim1/dma_faults)))
remapped=$(cat $dbg/dsim1/dma_remapped)
echo "DMA faults $faults; pages received through the IOMMU at remapped addresses: $remapped"
[ "$faults" = 0 ]
if grep -q "dma iommu" $dbg/dsim1/state; then
	[ "$remapped" -gt 0 ]
fi
rmmod devmemsim
echo "devmemsim unloaded: no binding or page leaked"

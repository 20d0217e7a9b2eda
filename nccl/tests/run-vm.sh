#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# vm suite: the NCCL plugin's devmem RX and TX paths over the simulated NIC
# in the QEMU guest of kernel lts|newest (see vm-guest.sh).
# usage: run-vm.sh lts|newest BUILDDIR HARNESS PLUGIN BROKER [--iommu]
#   --iommu: QEMU's IOMMU, and the simulated NICs on PCI parents (edu)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
kernel=$1 build=$(cd "$2" && pwd) harness=$3 plugin=$4 broker=$5
iommu=${6:-}
"$src/sim/vm/prepare.sh" >&2
"$src/sim/vm/build-module.sh" "$build" >&2
pci=no
[ "$iommu" = --iommu ] && pci=yes
# shellcheck disable=SC2086
exec "$src/sim/vm/run.sh" --kernel "$kernel" --builddir "$build" $iommu \
	--payload "$harness" --payload "$plugin" --payload "$broker" \
	--payload "$src/nccl/tests/vm-guest.sh" \
	--timeout "${DEVMEMTCP_VM_TIMEOUT:-800}" -- \
	"sh $src/nccl/tests/vm-guest.sh $harness $plugin $broker $pci"

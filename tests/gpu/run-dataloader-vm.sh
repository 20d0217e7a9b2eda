#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# vm suite: the data-loader example over the simulated NIC (udmabuf, CPU
# copies) in the QEMU guest of kernel lts|newest.
# usage: run-dataloader-vm.sh lts|newest BUILDDIR DATALOADER [SAMPLES]
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
kernel=$1 build=$(cd "$2" && pwd) exe=$3 n=${4:-40}
"$src/sim/vm/prepare.sh" >&2
"$src/sim/vm/build-module.sh" "$build" >&2
exec "$src/sim/vm/run.sh" --kernel "$kernel" --builddir "$build" \
	--payload "$exe" --payload "$src/tests/gpu/dataloader-vm.sh" \
	--timeout "${DEVMEMTCP_VM_TIMEOUT:-800}" -- \
	"sh $src/tests/gpu/dataloader-vm.sh $exe $n"

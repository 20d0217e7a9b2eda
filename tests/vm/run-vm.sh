#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Run COMMAND inside the QEMU guest with kernel lts|newest|generic and the
# simulated NIC, after making sure the cached VM pieces and the module
# exist.  The build directory's vm test programs and the devmemtcp tool
# travel along, and each --payload PATH too; --sim-args, --hugepages,
# --iommu and --module go to sim/vm/run.sh.
# usage: run-vm.sh KERNEL BUILDDIR [--payload PATH | --sim-args ARGS |
#                  --hugepages N | --iommu | --module NAME]... COMMAND...
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
kernel=$1 build=$(cd "$2" && pwd)
shift 2
args=(--payload "$build/tests/vm" --payload "$build/tools/devmemtcp")
while :; do
	case ${1:-} in
	--payload|--sim-args|--hugepages|--module) args+=("$1" "$2"); shift 2 ;;
	--iommu) args+=("$1"); shift ;;
	*) break ;;
	esac
done
"$src/sim/vm/prepare.sh" >&2
"$src/sim/vm/build-module.sh" "$build" >&2
exec "$src/sim/vm/run.sh" --kernel "$kernel" --builddir "$build" "${args[@]}" \
	--timeout "${DEVMEMTCP_VM_TIMEOUT:-800}" -- "$*"

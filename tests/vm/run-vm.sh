#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The one entry point for running something of a build in the VM: COMMAND
# inside the QEMU guest with kernel lts|newest|generic and the simulated
# NIC, after making sure the cached VM pieces and the module exist
# (sim/vm/all.sh).  The build directory's vm test programs and the
# devmemtcp tool travel along, and each --payload PATH too; --sim-args,
# --hugepages, --iommu and --module go to sim/vm/run.sh, the runner this
# wraps.  The vm and sim suites, the Python vm tests
# (python/tests/vm/run-vm-python.sh), tests/emu/fidelity.sh and
# scripts/main-job.sh come through here.
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
"$src/sim/vm/all.sh" "$build" >&2
exec "$src/sim/vm/run.sh" --kernel "$kernel" --builddir "$build" "${args[@]}" \
	--timeout "${DEVMEMTCP_VM_TIMEOUT:-800}" -- "$*"

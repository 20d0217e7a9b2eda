#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Run COMMAND inside the QEMU guest with kernel lts|newest and the simulated
# NIC, after making sure the cached VM pieces and the module exist.  The
# build directory's vm test programs and the devmemtcp tool travel along,
# and each --payload PATH too.
# usage: run-vm.sh lts|newest BUILDDIR [--payload PATH]... COMMAND...
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
kernel=$1 build=$(cd "$2" && pwd)
shift 2
payloads=(--payload "$build/tests/vm" --payload "$build/tools/devmemtcp")
while [ "${1:-}" = --payload ]; do
	payloads+=(--payload "$2")
	shift 2
done
"$src/sim/vm/prepare.sh" >&2
"$src/sim/vm/build-module.sh" "$build" >&2
exec "$src/sim/vm/run.sh" --kernel "$kernel" --builddir "$build" "${payloads[@]}" \
	--timeout "${DEVMEMTCP_VM_TIMEOUT:-800}" -- "$*"

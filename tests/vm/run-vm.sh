#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Run COMMAND inside the QEMU guest with kernel lts|newest and the simulated
# NIC, after making sure the cached VM pieces and the module exist.  The
# build directory's test programs and the devmemtcp tool travel along.
# usage: run-vm.sh lts|newest BUILDDIR COMMAND...
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
kernel=$1 build=$(cd "$2" && pwd)
shift 2
"$src/sim/vm/prepare.sh" >&2
"$src/sim/vm/build-module.sh" "$build" >&2
exec "$src/sim/vm/run.sh" --kernel "$kernel" --builddir "$build" \
	--payload "$build/tests/vm" --payload "$build/tools/devmemtcp" \
	--timeout "${DEVMEMTCP_VM_TIMEOUT:-800}" -- "$*"

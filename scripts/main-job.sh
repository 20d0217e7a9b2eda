#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The main job: a real devmem TCP transfer, end to end.  Installs what is
# missing, builds, prepares the VM pieces (cached), boots Debian's newest
# backports kernel (KERNEL=lts for 6.12) under QEMU with the simulated
# devmem NIC, receives 64 MiB into a udmabuf through the kernel's devmem
# path, validates every byte and prints a report.  Run as root.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
sh scripts/deps.sh
B=${BUILD:-build-test}
[ -d "$B" ] || meson setup "$B" -Dtest_hooks=true >/dev/null
ninja -C "$B" >/dev/null
exec tests/vm/run-vm.sh "${KERNEL:-newest}" "$B" "$(cd "$B" && pwd)/tests/vm/main-job-guest.sh"

#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Build the simulated NIC module (sim/module) for every kernel in kernels.txt,
# inside the trixie tree with that release's gcc-14, against each kernel's
# headers:  <builddir>/sim/<uname-r>/*.ko   (devmemsim.ko)
# Usage: build-module.sh [builddir]      (default: <repo>/build)
# Env:   DEVMEMTCP_SIM_SRC   module source directory (default <repo>/sim/module)
#        DEVMEMTCP_VM_CACHE  cache (default /var/cache/devmemtcp-vm)
# Skips a kernel when the source tree is unchanged since its last build.
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/lib.sh"

case ${1:-} in -h|--help) vm_usage "$0" 0 ;; esac
builddir=${1:-$repo/build}
mkdir -p "$builddir"
builddir=$(cd "$builddir" && pwd)
src=${DEVMEMTCP_SIM_SRC:-$repo/sim/module}
[ -d "$src" ] || vm_die "no module source at $src"
[ -f "$src/Kbuild" ] || [ -f "$src/Makefile" ] || vm_die "no Kbuild/Makefile in $src"
[ -s "$VM_KERNELS_TXT" ] || vm_die "$VM_KERNELS_TXT missing: run sim/vm/prepare.sh"

# content hash of the sources (build products excluded)
srchash=$( (cd "$src" && find . -type f ! -name '*.o' ! -name '*.ko' ! -name '*.mod' ! -name '*.mod.c' \
	! -name '*.cmd' ! -name 'modules.order' ! -name 'Module.symvers' ! -name '.*.d' -print0 |
	LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1)
pahole_arg=CONFIG_DEBUG_INFO_BTF_MODULES=
[ -x "$VM_ROOT/usr/bin/pahole" ] && pahole_arg=

vm_lock
rc=0
while read -r label rel; do
	[ -n "$rel" ] || continue
	out=$builddir/sim/$rel
	if [ "$(cat "$out/.srchash" 2>/dev/null)" = "$srchash" ] && ls "$out"/*.ko >/dev/null 2>&1; then
		vm_log "module for $rel ($label) up to date"
		continue
	fi
	t0=$(date +%s)
	work=/var/tmp/devmemsim-build/$rel
	rm -rf "$VM_ROOT$work"
	mkdir -p "$VM_ROOT$work"
	cp -a "$src/." "$VM_ROOT$work/"
	(cd "$VM_ROOT$work" && rm -f ./*.o ./*.ko ./*.mod ./*.mod.c ./.*.cmd modules.order Module.symvers)
	log=$builddir/sim/build-$rel.log
	mkdir -p "$builddir/sim"
	if vm_chroot make -C "/usr/src/linux-headers-$rel" M="$work" CC=gcc-14 HOSTCC=gcc-14 \
		$pahole_arg -j"$(nproc)" modules >"$log" 2>&1; then
		rm -rf "$out"
		mkdir -p "$out"
		find "$VM_ROOT$work" -name '*.ko' -exec cp {} "$out/" \;
		echo "$srchash" >"$out/.srchash"
		grep -iE 'warning|error' "$log" | grep -v 'pahole version differs' >&2 || true
		vm_log "module for $rel ($label) built in $(($(date +%s) - t0)) s: $(cd "$out" && echo *.ko)"
	else
		tail -n 40 "$log" >&2
		vm_log "module build for $rel ($label) FAILED (log: $log)"
		rc=1
	fi
	rm -rf "$VM_ROOT$work"
done <"$VM_KERNELS_TXT"
exit $rc

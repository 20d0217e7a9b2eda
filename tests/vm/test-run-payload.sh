#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The VM runner refuses a payload that cannot run in the guest, naming
# what it lacks, before booting: here a program linked against a shared
# library that no longer exists (ldd: "libdmtmissing.so.1 => not found").
# usage: test-run-payload.sh RUN-VM.SH BUILDDIR
set -u
run_vm=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
echo 'int dmt_missing(void) { return 0; }' >"$tmp/lib.c"
echo 'int dmt_missing(void); int main(void) { return dmt_missing(); }' >"$tmp/prog.c"
$cc -shared -fPIC -Wl,-soname,libdmtmissing.so.1 -o "$tmp/libdmtmissing.so.1" "$tmp/lib.c" &&
	$cc -o "$tmp/prog" "$tmp/prog.c" "$tmp/libdmtmissing.so.1" || exit 1
rm "$tmp/libdmtmissing.so.1"
DEVMEMTCP_VM_TIMEOUT=120 "$run_vm" lts "$build" --payload "$tmp/prog" true >"$tmp/out" 2>&1
status=$?
want="[devmemtcp-vm] error: payload $tmp/prog cannot run in the guest: libdmtmissing.so.1 => not found: build it against this machine's libraries, or give the missing ones as payloads"
if [ $status = 0 ] || ! grep -qxF "$want" "$tmp/out"; then
	echo "FAIL: run-vm.sh with a payload missing a library: exit $status, output:"
	sed 's/^/  /' "$tmp/out" | tail -20
	echo "want the line: $want"
	exit 1
fi
echo "PASS: $want"

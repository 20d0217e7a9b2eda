#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# A production build (no -Dtest_hooks) must carry none of the test hooks:
# no fault injection a hostile environment could trigger in a program with
# file capabilities, no test-only knob, and no plain getenv() at all (every
# variable the library reads goes through secure_getenv).
# usage: check-production.sh BUILDDIR
set -u
b=$1
so=$b/lib/libdevmemtcp.so
a=$b/lib/libdevmemtcp.a
fail=0
for f in "$so" "$a"; do
	[ -f "$f" ] || { echo "check-production: $f is missing"; exit 1; }
done
if nm -D --undefined-only "$so" | awk '{ print $NF }' | grep -qx 'getenv\(@.*\)\{0,1\}'; then
	echo "check-production: $so imports getenv(): every variable must be read with secure_getenv()"
	fail=1
fi
for s in DEVMEMTCP_NIC_FAIL_STEP DEVMEMTCP_NIC_CRASH_STEP DEVMEMTCP_UDMABUF_DEV \
	DEVMEMTCP_LIBCUDA DEVMEMTCP_GATHER_ DEVMEMTCP_TEST_; do
	if grep -aq "$s" "$so" "$a"; then
		echo "check-production: the production library still reads $s (a test hook)"
		fail=1
	fi
done
if nm "$a" 2>/dev/null | grep -Eq ' [TDB] (dmt_hook_|dmt_test_|dmt_nic_fail_step|dmt_nic_crash_step)'; then
	echo "check-production: test-hook symbols in $a:"
	nm "$a" | grep -E ' [TDB] (dmt_hook_|dmt_test_|dmt_nic_fail_step|dmt_nic_crash_step)'
	fail=1
fi
# the NCCL plugin, when it was built, has no test hook either
nccl=$b/nccl/libnccl-net-devmemtcp.so
if [ -f "$nccl" ] && grep -aq DEVMEMTCP_TEST_ "$nccl"; then
	echo "check-production: $nccl still reads DEVMEMTCP_TEST_* (a test hook)"
	fail=1
fi
# the Python extension, when it was built, follows the same rules
for ext in "$b"/python/src/devmemtcp/_devmemtcp*.so; do
	[ -f "$ext" ] || continue
	if nm -D --undefined-only "$ext" | awk '{ print $NF }' | grep -qx 'getenv\(@.*\)\{0,1\}'; then
		echo "check-production: $ext imports getenv(): use secure_getenv()"
		fail=1
	fi
	if grep -aq DEVMEMTCP_LIBCUDA "$ext"; then
		echo "check-production: $ext takes the CUDA driver's path from the environment (a test hook)"
		fail=1
	fi
done
# the emulated devmem NIC is a test tool: never built without the test hooks
for f in tests/emu/libdevmemtcp-emu.so tests/emu/libdevmemtcp-emucuda.so tests/emu/emuctl; do
	if [ -e "$b/$f" ]; then
		echo "check-production: $b/$f exists: the emulated NIC is built only with -Dtest_hooks=true"
		fail=1
	fi
done
if nm -D "$so" | grep -q ' devmemtcp_emu_'; then
	echo "check-production: $so exports the emulated NIC's functions"
	fail=1
fi
[ $fail = 0 ] && echo "check-production: $b has no test hooks and reads the environment only with secure_getenv"
exit $fail

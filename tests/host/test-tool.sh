#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The devmemtcp program's contract on this machine: each error printed
# once, whatever DEVMEMTCP_LOG says.  No command here gets as far as
# touching an interface: they fail before (a udmabuf device that does not
# exist, through the test builds' DEVMEMTCP_UDMABUF_DEV).
# usage: test-tool.sh PATH-TO-devmemtcp
set -u
tool=$1
fail=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# run EXPECTED-STATUS EXPECTED-STDERR ARGS...: the exit status and the
# whole of stderr must be as given.
run() {
	want_status=$1 want_err=$2
	shift 2
	"$tool" "$@" >"$out" 2>"$err"
	status=$?
	if [ "$status" != "$want_status" ]; then
		echo "FAIL: devmemtcp $*: exit status $status, want $want_status"
		sed 's/^/  stderr: /' "$err"
		fail=1
	fi
	if [ "$(cat "$err")" != "$want_err" ]; then
		echo "FAIL: devmemtcp $*: stderr differs"
		sed 's/^/  got:  /' "$err"
		printf '%s\n' "$want_err" | sed 's/^/  want: /'
		fail=1
	fi
}

nodev="udmabuf: /nonexistent/udmabuf does not exist: load the module with 'modprobe udmabuf' (kernel option CONFIG_UDMABUF)"
export DEVMEMTCP_UDMABUF_DEV=/nonexistent/udmabuf
for log in unset err warn; do
	if [ $log = unset ]; then unset DEVMEMTCP_LOG; else export DEVMEMTCP_LOG=$log; fi
	run 1 "devmemtcp recv: $nodev" recv -i lo -q 0
	run 1 "devmemtcp send: $nodev" send -i lo -c 127.0.0.1
done
unset DEVMEMTCP_LOG

[ $fail = 0 ] && echo "PASS: the devmemtcp program's errors and usage"
exit $fail

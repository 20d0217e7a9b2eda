#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The devmemtcp program's contract on this machine: each error printed
# once, whatever DEVMEMTCP_LOG says; usage errors name the bad option or
# argument and exit 2; numbers are checked for range and junk.  No command
# here gets as far as touching an interface: they fail before (a udmabuf
# device that does not exist, through the test builds'
# DEVMEMTCP_UDMABUF_DEV).
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

# usage errors: exit 2, one line naming what is wrong
R="devmemtcp recv" S="devmemtcp send"
help="(see 'devmemtcp recv --help')" shelp="(see 'devmemtcp send --help')"
run 2 "$R: --port: \"70000\" is not a port number (1-65535)" recv -i lo -p 70000
run 2 "$R: --port: \"abc\" is not a port number (1-65535)" recv -i lo -p abc
run 2 "$R: --port: \"0\" is not a port number (1-65535)" recv -i lo --port=0
run 2 "$R: --queues: \"3,abc\" is not a list of queue numbers (0-4095, e.g. 3 or 2,3)" recv -i lo -q 3,abc
run 2 "$R: --queues: \"99999999999\" is not a list of queue numbers (0-4095, e.g. 3 or 2,3)" recv -i lo -q 99999999999
run 2 "$R: --queues: \"1,\" is not a list of queue numbers (0-4095, e.g. 3 or 2,3)" recv -i lo -q 1,
run 2 "$R: --buf-size: \"9999999999G\" is not a size (bytes with K, M or G, at most 8E)" recv -i lo -b 9999999999G
run 2 "$R: --buf-size: \"0\" is not a size (bytes with K, M or G, at least 1)" recv -i lo -b 0
run 2 "$R: --expect: \"1.5M\" is not a byte count (bytes with K, M or G)" recv -i lo -e 1.5M
run 2 "$R: --validate: \"1\" is not a pattern period (2-256)" recv -i lo --validate=1
run 2 "$R: --validate: \"25x\" is not a pattern period (2-256)" recv -i lo -v25x
run 2 "$R: unexpected argument \"7\": an optional value goes with the option (--validate=7 or -v7) $help" recv -i lo -v 7
run 2 "$R: unexpected argument \"extra\" $help" recv -i lo extra
run 2 "$R: --iface is required $help" recv -p 5201
run 2 "$R: unknown option \"--bogus\" $help" recv -i lo --bogus
run 2 "$R: unknown option \"-Z\" $help" recv -i lo -Z
run 2 "$R: --port needs a value $help" recv -i lo -p
run 2 "$S: --port: \"70000\" is not a port number (1-65535)" send -i lo -c 127.0.0.1 -p 70000
run 2 "$S: --pattern: \"300\" is not a pattern period (2-256)" send -i lo -c 127.0.0.1 -P 300
run 2 "$S: --pattern: \"abc\" is not a pattern period (2-256)" send -i lo -c 127.0.0.1 -P abc
run 2 "$S: --bytes: \"1.5M\" is not a size (bytes with K, M or G)" send -i lo -c 127.0.0.1 -n 1.5M
run 2 "$S: --chunk: \"2M\" must be at most half of --buf-size (1M): the ring needs two slots" send -i lo -c 127.0.0.1 -b 1M -C 2M
run 2 "$S: unexpected argument \"extra\" $shelp" send -i lo -c 127.0.0.1 extra
run 2 "$S: --connect is required $shelp" send -i lo
run 2 "$S: --iface is required $shelp" send -c 127.0.0.1
# valid numbers still get through to the first real step
export DEVMEMTCP_UDMABUF_DEV=/nonexistent/udmabuf
run 1 "$R: $nodev" recv -i lo -q 0,1 -p 65535 -b 64K -e 1G --validate=7
run 1 "$S: $nodev" send -i lo -c 127.0.0.1 -p 1 -n 0 -P 2 -b 2M -C 1M -z 4096

[ $fail = 0 ] && echo "PASS: the devmemtcp program's errors and usage"
exit $fail

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The devmemtcp program's contract on this machine: each error printed
# once, whatever DEVMEMTCP_LOG says; usage errors name the bad option or
# argument and exit 2; numbers and addresses are checked for range and junk
# before anything is made; probe --json's types; fixes said the program's
# way.  No command
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
# addresses are checked when the options are read, before any buffer
run 2 "$R: --listen: \"999.1.1.1\" is not an IPv4 or IPv6 address" recv -i lo -l 999.1.1.1
run 2 "$S: --connect: \"999.1.1.1\" is not an IPv4 or IPv6 address" send -i lo -c 999.1.1.1
# probe and restore name what is wrong instead of printing their usage
P="devmemtcp probe" phelp="(see 'devmemtcp probe --help')"
T="devmemtcp restore" thelp="(see 'devmemtcp restore --help')"
run 2 "$P: unexpected argument \"extra\" $phelp" probe lo extra
run 2 "$P: unknown option \"--bogus\" $phelp" probe lo --bogus
run 2 "$P: --run-dir needs a value $phelp" probe lo --run-dir
run 2 "$P: IFACE, the interface to probe, is missing $phelp" probe --json
run 2 "$T: unexpected argument \"extra\" $thelp" restore lo extra
run 2 "$T: unknown option \"-x\" $thelp" restore lo -x
run 2 "$T: IFACE, the interface to restore, is missing $thelp" restore --all
# the fix the program prints is the program's (lo has no RSS table)
"$tool" probe lo >"$out" 2>"$err"
want="    fix: use a NIC with RSS, or steer other traffic away yourself and run devmemtcp recv without --setup"
if ! grep -qxF -- "$want" "$out"; then
	echo "FAIL: devmemtcp probe lo: no line \"$want\""
	sed 's/^/  got: /' "$out"
	fail=1
fi
# probe --json: schema 1, booleans as booleans, null for unknown (lo's
# header split, RSS table and driver), the fixes as in the text
"$tool" probe lo --json >"$out" 2>"$err"
if ! python3 - "$out" <<'PY'; then
import json, sys
r = json.load(open(sys.argv[1]))
def want(key, ok, what):
    if key not in r or not ok(r[key]):
        sys.exit("FAIL: devmemtcp probe lo --json: %s is %r, want %s" % (key, r.get(key, "missing"), what))
isbool = lambda v: isinstance(v, bool)
isint = lambda v: isinstance(v, int) and not isinstance(v, bool)
want("schema", lambda v: v == 1, "1")
for k in ("bind_rx", "bind_tx", "xdp", "cap_net_admin", "queue_use_reported", "ntuple", "ntuple_fixed"):
    want(k, isbool, "a boolean")
for k in ("rss_contexts", "zcrx", "zcrx_dmabuf", "try_bind"):
    want(k, lambda v: v is None or isbool(v), "a boolean or null")
for k in ("rx_queues", "tx_queues", "ntuple_rules", "ntuple_table_size", "rss_context_count",
          "xsk_queues", "dmabuf_queues", "io_uring_queues", "udmabuf_limit_mb", "optmem_max",
          "drm_nodes", "nowners", "hds_thresh", "hds_thresh_max"):
    want(k, lambda v: v is None or (isint(v) and v >= 0), "a number >= 0 or null")
for k in ("tcp_data_split", "rss_table_size", "driver"):
    want(k, lambda v: v is None, "null (lo)")
want("try_bind", lambda v: v is None, "null (not asked)")
want("broker", lambda v: isinstance(v["used"], bool) and v["state"] in ("answered", "none", "failed")
     and (v["allowed"] is None or isbool(v["allowed"])), "an object with used, state, allowed")
fixes = [p["fix"] for p in r["problems"]]
want("problems", lambda v: "use a NIC with RSS, or steer other traffic away yourself and run devmemtcp recv without --setup" in fixes,
     "the RSS fix the program's way")
PY
	fail=1
fi

# valid numbers still get through to the first real step
export DEVMEMTCP_UDMABUF_DEV=/nonexistent/udmabuf
run 1 "$R: $nodev" recv -i lo -q 0,1 -p 65535 -b 64K -e 1G --validate=7
run 1 "$S: $nodev" send -i lo -c 127.0.0.1 -p 1 -n 0 -P 2 -b 2M -C 1M -z 4096

[ $fail = 0 ] && echo "PASS: the devmemtcp program's errors and usage"
exit $fail

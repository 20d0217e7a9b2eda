#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The emulated devmem NIC's test environment, sourced by the emu suite's
# scripts (tests/emu/README.md): the vm tests' topology on a veth pair --
# dsim0 (10.77.0.1, fd77::1) in network namespace dmtA, dsim1 (10.77.0.2,
# fd77::2) in dmtB, 16 queues each -- inside a mount namespace of its own
# (so the names and /run/devmemtcp collide with nothing), the emulator's
# state in a fresh directory, and both NICs emulated.
#
#   EMU_BUILD=BUILDDIR [EMU_LAYOUT="emuctl add options for dsim1"] . tests/emu/emu-env.sh
#
# Then: emu CMD... runs CMD with the emulator preloaded; rx CMD... and
# tx CMD... run it in dmtB or dmtA (rx_bg CMD... & in the background, $!
# its pid); nic_state prints dsim1's state;
# emu_done checks that no binding, page or unmodelled request is left and
# returns its status.  Needs root (exit 77 otherwise: a skip).
set -eu

if [ "$(id -u)" != 0 ]; then
	echo "emu: needs root (network namespaces, veth): skipped"
	exit 77
fi
: "${EMU_BUILD:?set EMU_BUILD to the build directory}"
EMU_BUILD=$(cd "$EMU_BUILD" && pwd)
if [ -z "${EMU_NS:-}" ]; then
	# again, in a mount namespace of our own
	export EMU_NS=1
	exec unshare -m sh -c 'mount --make-rprivate / && mkdir -p /run/netns &&
		mount -t tmpfs tmpfs /run/netns && exec sh "$0" "$@"' "$0" "$@"
fi

emu_lib=$EMU_BUILD/tests/emu/libdevmemtcp-emu.so
emuctl=$EMU_BUILD/tests/emu/emuctl
EMU_DIR=$(mktemp -d /dev/shm/devmemtcp-emu.XXXXXX)
export DEVMEMTCP_EMU=$EMU_DIR/state DEVMEMTCP_RUN_DIR=$EMU_DIR/run DEVMEMTCP_LOG=none
mkdir -m 700 "$EMU_DIR/run"

emu_cleanup() {
	ip netns del dmtA 2>/dev/null || true
	ip netns del dmtB 2>/dev/null || true
	rm -rf "$EMU_DIR"
}
trap emu_cleanup EXIT

ip netns add dmtA
ip netns add dmtB
ip -n dmtA link add dsim0 numtxqueues 16 numrxqueues 16 type veth \
	peer name dsim1 netns dmtB numtxqueues 16 numrxqueues 16
for ns in dmtA dmtB; do ip -n $ns link set lo up; done
ip -n dmtA addr add 10.77.0.1/24 dev dsim0
ip -n dmtB addr add 10.77.0.2/24 dev dsim1
ip -n dmtA addr add fd77::1/64 dev dsim0 nodad
ip -n dmtB addr add fd77::2/64 dev dsim1 nodad
ip -n dmtA link set dsim0 up
ip -n dmtB link set dsim1 up

"$emuctl" create "$DEVMEMTCP_EMU"
# shellcheck disable=SC2086
"$emuctl" add dsim1 --netns dmtB ${EMU_LAYOUT:-}
"$emuctl" add dsim0 --netns dmtA

# a sanitizer build's emulator needs its runtimes loaded first
emu_pre=$(ldd "$emu_lib" | sed -n 's/^[[:space:]]*\(libasan\|libubsan\)[^ ]* => \([^ ]*\).*/\2/p' |
	tr '\n' ':')$emu_lib
[ "$emu_pre" = "$emu_lib" ] || export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
emu() { LD_PRELOAD=$emu_pre "$@"; }
rx() { LD_PRELOAD=$emu_pre ip netns exec dmtB "$@"; }
tx() { LD_PRELOAD=$emu_pre ip netns exec dmtA "$@"; }
# in the background (rx_bg CMD... &): $! is CMD's pid
rx_bg() { LD_PRELOAD=$emu_pre exec ip netns exec dmtB "$@"; }
tx_bg() { LD_PRELOAD=$emu_pre exec ip netns exec dmtA "$@"; }
nic_state() { "$emuctl" show dsim1 --netns dmtB; }
emu_stat() { "$emuctl" stats | sed -n "s/^$1=//p"; }

# Nothing left: no binding, no page held, nothing unmodelled.
emu_done() {
	if ! "$emuctl" check; then
		"$emuctl" stats
		return 1
	fi
	echo "emu: no binding or page left, every request modelled"
}

# Wait until FILE holds PATTERN (a receiver's "ready" line), at most 20 s.
wait_for() {
	i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 200 ]; then
			echo "emu: no '$2' in $1 after 20 s:"
			cat "$1"
			return 1
		fi
		sleep 0.1
	done
}

# SPDX-License-Identifier: GPL-2.0-only
# Shared by the guest scripts (sourced).  They run in the vm runner's guest
# (sim/vm/run.sh), which has loaded devmemsim, as
#   SMOKE=<devmem_smoke> VM_HARNESS=<vm-harness> sh -e guest-X.sh
# with ip and ethtool from PATH (trixie's: ethtool >= 6.7 sets tcp-data-split).
S=${SMOKE:?SMOKE must name the devmem_smoke program}

# The pair: dsim0 into netns "a" with 10.0.0.1/24, dsim1 into netns RX_NS
# or, when it is empty, left here, with 10.0.0.2/24; both up.  V6=1 adds
# fd00::1/64 and fd00::2/64.
pair_up() { # [RX_NS]
	RX_NS=${1:-}
	ip netns add a
	ip link set dsim0 netns a
	if [ -n "$RX_NS" ]; then
		ip netns add "$RX_NS"
		ip link set dsim1 netns "$RX_NS"
	fi
	ip -n a addr add 10.0.0.1/24 dev dsim0
	rx_ip addr add 10.0.0.2/24 dev dsim1
	if [ "${V6:-0}" = 1 ]; then
		ip -n a addr add fd00::1/64 dev dsim0 nodad
		rx_ip addr add fd00::2/64 dev dsim1 nodad
	fi
	ip -n a link set lo up
	ip -n a link set dsim0 up
	rx_ip link set dsim1 up
}

# ip in the receiver's namespace
rx_ip() {
	if [ -n "$RX_NS" ]; then ip -n "$RX_NS" "$@"; else ip "$@"; fi
}

# Wait until the receiver logging to FILE is bound and listening (or failed).
wait_listen() { # FILE...
	i=0
	while [ $i -lt 200 ] && ! cat "$@" 2>/dev/null | grep -q "listening\|failed"; do
		sleep 0.1; i=$((i + 1))
	done
}

# Kernel warnings, bugs and oopses so far.
kernel_trouble() {
	dmesg | grep -A40 -E "WARNING|BUG|Oops" | head -80
}

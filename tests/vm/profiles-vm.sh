#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The driver profiles of the simulated NIC in one boot (the vm suite's
# vm-profiles-* tests, through tests/vm/run-vm.sh with --hugepages):
#   VM_HARNESS=B/tests/vm/vm-harness sh tests/vm/profiles-vm.sh B/tests/vm
# For each of gve, bnxt, mlx5 and fbnic the module is loaded anew with that
# profile: the rows of sim/module/PROFILES.md (test-profile PROFILE rows),
# the library's probe and setup (test-profile PROFILE lib), and on kernels
# where the driver has devmem (7.3) 16 MiB received and every byte checked
# (test-e2e transfer, and multiflow over two queues), devmem TX (test-tx-devmem)
# and devmemtcp selftest between the two devices, with the receiving
# device's configuration as it was afterwards.  The default profile is
# loaded again at the end; each phase's time is printed.
set -eu
vm=$1
tool=$vm/../../tools/devmemtcp
prof_only=${PROFILES:-gve bnxt mlx5 fbnic}

load() {
	"$VM_HARNESS" down
	rmmod devmemsim
	modprobe devmemsim "$@"
	"$VM_HARNESS" up >/dev/null
}

nic_state() {
	ip netns exec dmtB sh -c "ethtool -g dsim1; ethtool -l dsim1;
		ethtool -k dsim1 | grep -E '^(ntuple-filters|receive-hashing|rx-gro-hw):';
		ethtool -x dsim1; ethtool -n dsim1 2>&1;
		$tool probe dsim1 --json | grep -o '\"hds_thresh\":[-0-9]*'"
}

t0=$(date +%s)
phase() {
	now=$(date +%s)
	echo "== profile $p: $1 ($((now - t0)) s so far)"
}

for p in $prof_only; do
	load profile="$p"
	phase rows
	"$vm/test-profile" "$p" rows
	load profile="$p"
	phase lib
	"$vm/test-profile" "$p" lib
	"$VM_HARNESS" kernel-at-least 7.3 || continue
	load profile="$p"
	# mlx5 splits headers only with hardware GRO: the fix probe names
	[ "$p" = mlx5 ] && ip netns exec dmtB ethtool -K dsim1 rx-gro-hw on
	before=$(nic_state)
	phase "receive 16 MiB"
	"$vm/test-e2e" --bytes 16M --buf 8M --flow-bytes 1M transfer multiflow
	phase "devmem TX"
	"$vm/test-tx-devmem" --setup --quick --bytes 8M
	after=$(nic_state)
	if [ "$before" != "$after" ]; then
		echo "profile $p: the NIC was not restored:"
		printf '%s\n' "$before" >/tmp/nic-before
		printf '%s\n' "$after" >/tmp/nic-after
		diff /tmp/nic-before /tmp/nic-after || true
		exit 1
	fi
	echo "profile $p: NIC restored"
done
load
phase done
echo "profiles: ok"

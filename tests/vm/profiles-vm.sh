#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The driver profiles of the simulated NIC in one boot (the vm suite's
# vm-profiles-* tests, through tests/vm/run-vm.sh with --hugepages):
#   VM_HARNESS=B/tests/vm/vm-harness sh tests/vm/profiles-vm.sh B/tests/vm
# For each of gve, bnxt, mlx5 and fbnic the module is loaded anew with that
# profile: the rows of sim/module/PROFILES.md (test-profile PROFILE rows);
# loaded anew, the library's probe and setup (test-profile PROFILE lib), and
# on kernels where the driver has devmem (7.3) 16 MiB received and every
# byte checked (test-e2e transfer, and multiflow over two queues), devmem
# TX (test-tx-devmem) and the receiving device's state as it was
# afterwards.  The default profile is loaded again at the end; each
# phase's time is printed.
set -eu
vm=$1

# The module anew with the profile: the devices go back into the
# topology's namespaces (which outlive them) in three ip(8) processes.
load() {
	rmmod devmemsim
	modprobe devmemsim "$@"
	ip -b - <<-EOT
	link set dsim0 netns dmtA
	link set dsim1 netns dmtB
	EOT
	ip -n dmtA -b - <<-EOT
	addr add 10.77.0.1/24 dev dsim0
	addr add fd77::1/64 dev dsim0 nodad
	link set dsim0 up
	EOT
	ip -n dmtB -b - <<-EOT
	addr add 10.77.0.2/24 dev dsim1
	addr add fd77::2/64 dev dsim1 nodad
	link set dsim1 up
	EOT
}

t0=$(date +%s)
phase() {
	echo "== profile $p: $1 ($(($(date +%s) - t0)) s so far)"
}

"$VM_HARNESS" up >/dev/null
for p in ${PROFILES:-gve bnxt mlx5 fbnic}; do
	load profile="$p"
	phase rows
	"$vm/test-profile" "$p" rows
	load profile="$p"
	phase lib
	"$vm/test-profile" "$p" lib
	"$VM_HARNESS" kernel-at-least 7.3 || continue
	# lib left the device as it found it (mlx5: with hardware GRO on,
	# the fix probe names)
	before=$("$vm/test-profile" "$p" state)
	phase "receive 16 MiB"
	"$vm/test-e2e" --bytes 16M --buf 8M --flow-bytes 1M transfer multiflow
	phase "devmem TX"
	"$vm/test-tx-devmem" --setup --quick --bytes 8M
	after=$("$vm/test-profile" "$p" state)
	if [ "$before" != "$after" ]; then
		echo "profile $p: the device's state changed:"
		printf '%s\n' "$before" >/tmp/nic-before
		printf '%s\n' "$after" >/tmp/nic-after
		diff /tmp/nic-before /tmp/nic-after || true
		exit 1
	fi
	echo "profile $p: the device is as it was"
done
p=default
load
"$VM_HARNESS" down
phase done
echo "profiles: ok"

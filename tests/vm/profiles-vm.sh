#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The driver profiles of the simulated NIC in one boot (the vm suite's
# vm-profiles-* tests, through tests/vm/run-vm.sh with --hugepages):
#   VM_HARNESS=B/tests/vm/vm-harness sh tests/vm/profiles-vm.sh B/tests/vm
# For each of gve, bnxt, mlx5 and fbnic the module is loaded anew with that
# profile: the rows of sim/module/PROFILES.md (test-profile PROFILE rows);
# loaded anew, the library's probe and setup (test-profile PROFILE lib), on
# kernels where the driver has devmem (7.3) 16 MiB received and every byte
# checked (test-e2e transfer, and multiflow over two queues), then
# devmemtcp selftest between the two devices (dsim1 tested, the peer on
# dsim0): RX and devmem TX checked byte by byte, the refusals, the restore;
# on 6.12 its report must say that setup failed and the device is as it
# was.  The receiving device's state must be as before all this.  The
# default profile is loaded again at the end; each phase's time is printed.
set -eu
vm=$1
tool=$vm/../../tools/devmemtcp

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

# devmemtcp selftest of dsim1 against a peer on dsim0: its report
selftest() {
	ip netns exec dmtA "$tool" selftest --serve --once 2>/dev/null &
	srv=$!
	rc=0
	ip netns exec dmtB "$tool" selftest dsim1 --peer 10.77.0.1 --bytes 16M --json \
		>/tmp/selftest.json || rc=$?
	wait $srv || true
	cat /tmp/selftest.json
	case $1 in
	gve) drv=gve ;; bnxt) drv=bnxt_en ;; mlx5) drv=mlx5_core ;; *) drv=$1 ;;
	esac
	want="\"driver\":\"$drv\""
	grep -q "$want" /tmp/selftest.json || { echo "selftest: no $want"; exit 1; }
	grep -q '"name":"restore","result":"ok"' /tmp/selftest.json ||
		{ echo "selftest: the restore failed"; exit 1; }
	if "$VM_HARNESS" kernel-at-least 7.3; then
		for s in peer setup rx refuse-rebind refuse-channels tx; do
			grep -q "\"name\":\"$s\",\"result\":\"ok\"" /tmp/selftest.json ||
				{ echo "selftest: step $s did not pass"; exit 1; }
		done
		[ $rc = 0 ] || { echo "selftest: exit status $rc"; exit 1; }
	else
		# no devmem with these drivers on 6.12: setup fails, says why
		grep -q '"name":"setup","result":"failed"' /tmp/selftest.json &&
			[ $rc = 1 ] || { echo "selftest on 6.12: exit status $rc"; exit 1; }
	fi
	echo "selftest: ok"
}

"$VM_HARNESS" up >/dev/null
for p in ${PROFILES:-gve bnxt mlx5 fbnic}; do
	load profile="$p"
	phase rows
	"$vm/test-profile" "$p" rows
	load profile="$p"
	phase lib
	"$vm/test-profile" "$p" lib
	# lib left the device as it found it (mlx5: with hardware GRO on,
	# the fix probe names)
	before=$("$vm/test-profile" "$p" state)
	if "$VM_HARNESS" kernel-at-least 7.3; then
		phase "receive 16 MiB"
		"$vm/test-e2e" --bytes 16M --buf 8M --flow-bytes 1M transfer multiflow
	fi
	phase selftest
	selftest "$p"
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

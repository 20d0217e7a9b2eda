#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# vm: README.md's C example (readme-c-1, built from the README's own block)
# run as a user would: in netns dmtB it sets up dsim1 for TCP port 5201,
# takes one connection and receives it; dsim0 (dmtA) sends 32 MiB of plain
# TCP.  It must print "received 33554432 bytes", exit 0, and leave dsim1
# with no owner (its devmemtcp_nic_close() undid the setup).
set -u
here=$(cd "$(dirname "$0")" && pwd)
harness=$here/vm-harness
ex=$here/readme-c-1
fail() { echo "readme-vm: FAIL: $*"; exit 1; }
built=$("$harness" up) || fail "namespace setup"
[ "$built" = built ] && trap '"$harness" down' EXIT
ip netns exec dmtB "$ex" dsim1 >/tmp/readme-vm.log 2>&1 &
pid=$!
ip netns exec dmtB "$harness" wait-listen 5201 || { cat /tmp/readme-vm.log; fail "the example does not listen on port 5201"; }
ip netns exec dmtA "$here/vm-sender" 10.77.0.2 5201 32M || fail "vm-sender"
wait $pid; rc=$?
cat /tmp/readme-vm.log
[ $rc = 0 ] || fail "the example exited $rc"
grep -qx "received 33554432 bytes" /tmp/readme-vm.log || fail "no \"received 33554432 bytes\""
owners=$(ip netns exec dmtB "$here/../../tools/devmemtcp" probe dsim1 --json |
	sed -n 's/.*"nowners":\([0-9a-z]*\).*/\1/p')
[ "$owners" = 0 ] || fail "dsim1 has $owners owners after the example ended"
echo "readme-vm: PASS: README.md's C example received 32 MiB and put dsim1 back"

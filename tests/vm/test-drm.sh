#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# vm (generic kernel, run-vm.sh generic BUILDDIR --module vgem): the DRM
# provider on vgem, end to end, over the vm topology (dsim0 in dmtA sends to
# dsim1 in dmtB):
#  1. test-drm dsim1 all: probe, nodes and errors, a GEM handle of our own,
#     64 MiB of devmem RX into a vgem buffer (every byte checked, none linear);
#  2. test-drm-tx --setup: devmem TX from a vgem buffer to a plain receiver;
#  3. the devmemtcp program: 'send --provider drm' to
#     'recv --provider drm --setup -v' (vgem to vgem, every byte checked),
#     and 'probe' naming vgem's nodes;
# then both NICs exactly as before (ethtool is the oracle) and no binding left.
# Usage: test-drm.sh [PATH/TO/devmemtcp]
set -u
here=$(cd "$(dirname "$0")" && pwd)
tool=${1:-$here/../../tools/devmemtcp}
harness=$here/vm-harness
fail() { echo "test-drm: FAIL: $*"; exit 1; }

modprobe vgem || fail "modprobe vgem: this kernel has no vgem (the generic flavour has)"
ls /dev/dri/card* /dev/dri/renderD* >/dev/null 2>&1 || fail "vgem loaded but no node under /dev/dri"
built=$("$harness" up) || fail "namespace setup"
[ "$built" = built ] && trap '"$harness" down' EXIT

# everything ethtool shows that a NIC setup or a binding may change
state() {
	for d in dmtA:dsim0 dmtB:dsim1; do
		ns=${d%%:*} dev=${d#*:}
		ip netns exec "$ns" sh -c "ethtool -g $dev; ethtool -l $dev; ethtool -k $dev |
			grep -E '^(ntuple-filters|receive-hashing):'; ethtool -x $dev;
			ethtool -n $dev 2>&1; $tool probe $dev --json |
			grep -oE '\"(hds_thresh|dmabuf_queues)\":[0-9a-z]*'"
	done
}
before=$(state)

"$here/test-drm" dsim1 all || fail "test-drm"
"$here/test-drm-tx" --setup --bytes 32M || fail "test-drm-tx"

# the program: DRM buffer to DRM buffer, 16 MiB in 4097-byte pieces
ip netns exec dmtB "$tool" recv -i dsim1 -p 5411 -l 10.77.0.2 -s -v -e 16777216 \
	--provider drm >/tmp/drm-recv.log 2>&1 &
rpid=$!
ip netns exec dmtB "$harness" wait-listen 5411 || fail "no receiver on port 5411"
ip netns exec dmtA "$tool" send -i dsim0 -c 10.77.0.2 -p 5411 -n 16M -z 4097 \
	--provider drm || fail "devmemtcp send --provider drm"
wait $rpid; rc=$?
cat /tmp/drm-recv.log
[ $rc = 0 ] || fail "devmemtcp recv --provider drm exited $rc"
grep -q '^bound [0-9]*-byte DRM buffer to dsim1' /tmp/drm-recv.log || fail "recv did not bind a DRM buffer"
grep -q '^linear bytes: *0$' /tmp/drm-recv.log || fail "linear bytes in the tool's receive"
out=$(ip netns exec dmtB "$tool" probe dsim1)
echo "$out" | grep '^DRM '
echo "$out" | grep -q '^DRM  *.*/dev/dri/card[0-9]* (vgem)' || fail "probe does not name vgem's card node"

after=$(state)
[ "$before" = "$after" ] || {
	echo "before:"; echo "$before"; echo "after:"; echo "$after"
	fail "a NIC is not as it was"
}
echo "test-drm: PASS: vgem buffers: 64 MiB devmem RX, 32 MiB TX to a plain receiver, 16 MiB tool to tool; NICs as before"
exit 0

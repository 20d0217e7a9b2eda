# SPDX-License-Identifier: GPL-2.0-only
# Guest side of the generic-kernel smoke test (sim/vm/run.sh --kernel generic
# --module vgem; see lib.sh for how it runs): the generic flavour's vgem
# loads and gives a DRM card and render node (the DRM buffer provider is
# tested there), and devmemsim receives over devmem on this kernel as on the
# cloud ones (guest-rx.sh, 16 MiB).
set -e
modprobe vgem
ls /dev/dri/card* /dev/dri/renderD* >/dev/null
for n in /sys/kernel/debug/dri/*/name; do
	grep -q "^vgem " "$n" && vgem=1
done
[ "${vgem:-0}" = 1 ] || { echo "no DRM device of vgem"; exit 1; }
echo "vgem: $(ls /dev/dri | tr '\n' ' ')"
BYTES=16M sh -e "$(dirname "$0")/guest-rx.sh"

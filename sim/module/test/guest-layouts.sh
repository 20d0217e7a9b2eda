# SPDX-License-Identifier: GPL-2.0-only
# Guest side: the RX buffer layouts of devmemsim with the raw devmem
# sequence (see lib.sh for how it runs; the runner reserves huge pages with
# --hugepages).  For each layout the module is loaded again with its
# parameters, 8 MiB go through devmem RX on queue 3 and are validated, and
# the receiving queue's counters show the buffers per NIC page; parameters
# that contradict each other are refused.  NIC pages of 16 KiB (kernels
# with the bind-rx rx-page-size, 7.3 here): a udmabuf of 4 KiB pages is refused (its sg
# entries are not aligned to the NIC page), a NIC page the device does not
# offer is refused with the device's message, and one of huge pages works.
set -e
BYTES=8M
. "$(dirname "$0")/lib.sh"

setup() { # module parameters...
	modprobe devmemsim "$@"
	pair_up
	ethtool -G dsim1 tcp-data-split on
	# hds-thresh 0 (6.14 has it; 6.12 does not)
	if "$VM_HARNESS" kernel-at-least 6.14; then $S rings dsim1 -1 0 >/dev/null; fi
	ethtool -X dsim1 equal 2
	ethtool -N dsim1 flow-type tcp4 dst-ip 10.0.0.2 dst-port 5201 action 3
}

# unloading takes the devices out of namespace "a" (nothing may hold the
# module: no binding, no page left)
teardown() {
	rmmod devmemsim
	ip netns del a
}

# 8 MiB through devmem RX on queue 3 (env for devmem_smoke: RX_PAGE_SIZE)
transfer() {
	$S rx dsim1 3 5201 $BYTES >/tmp/rx.log 2>&1 &
	rx=$!
	wait_listen /tmp/rx.log
	ip netns exec a $S tx 10.0.0.2 5201 $BYTES >/dev/null
	wait $rx || { cat /tmp/rx.log; return 1; }
	cat /tmp/rx.log
}

# queue 3's buffers per NIC page, times 10
bufs_per_page10() {
	ethtool -S dsim1 | awk '$1 == "rx3_bufs:" { b = $2 } $1 == "rx3_pages:" { p = $2 }
		END { print p ? int(b * 10 / p) : 0 }'
}

rmmod devmemsim		# the runner loaded it with the defaults

for layout in "rx_buf_size=1024 40" "rx_buf_size=2048 20" "rx_pack=1 rx_mix=1 30"; do
	params=${layout% *} want=${layout##* }
	echo "=== $params"
	# shellcheck disable=SC2086
	setup $params
	transfer
	r=$(bufs_per_page10)
	echo "$params: $((r / 10)).$((r % 10)) buffers per NIC page"
	[ "$r" -ge $((want - 2)) ] || { echo "expected about $((want / 10)) or more"; exit 1; }
	teardown
done

echo "=== parameters refused"
# (parent=pci: this machine has no edu or pci-testdev device)
for params in rx_buf_size=3000 rx_buf_size=512 "rx_buf_size=2048 rx_pack=1" parent=usb parent=pci; do
	# shellcheck disable=SC2086
	if modprobe devmemsim $params 2>/dev/null; then
		echo "modprobe devmemsim $params succeeded"
		exit 1
	fi
done
dmesg | grep devmemsim: | tail -n5

echo "=== 16 KiB NIC pages"
setup rx_pack=1
if "$VM_HARNESS" kernel-at-least 7.3; then
	RX_PAGE_SIZE=16384 HUGETLB=0 $S bindfail dsim1 3 2>/tmp/err.log
	cat /tmp/err.log
	grep -q "extack: dmabuf sg entry .* not aligned to niov size" /tmp/err.log
	RX_PAGE_SIZE=131072 $S bindfail dsim1 3 2>/tmp/err.log
	cat /tmp/err.log
	grep -q "extack: rx_page_size 131072 not supported: a power of two from 4096 to 65536" /tmp/err.log
	RX_PAGE_SIZE=16384 transfer
	grep "rx3: .* page 4096" /sys/kernel/debug/devmemsim/dsim1/state
	r=$(bufs_per_page10)
	echo "16 KiB NIC pages, packed: $((r / 10)).$((r % 10)) buffers per NIC page"
	[ "$r" -ge 100 ]
else
	RX_PAGE_SIZE=16384 $S bindfail dsim1 3 2>&1
	echo "$(uname -r): no rx-page-size (7.3 has it): bind-rx refuses the attribute"
fi
teardown
kernel_trouble
echo LAYOUTS-OK

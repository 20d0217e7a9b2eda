#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# emu suite: the library end to end in one RX buffer layout of the
# emulated NIC, as tests/vm/layout-vm.sh does over the simulated NIC in the
# VM: test-e2e's transfer (16 MiB through an 8 MiB buffer, its fragment
# layout report checked against the layout) and multi-flow test, then the
# data loader (examples/dataloader.c, receiver and sender, CPU copies; with
# --gpu also on the fake CUDA driver through the CUDA shim, once for each
# way the emulator copies into CUDA memory), every byte checked by the
# programs themselves.  Here: every token came back, no
# binding is left, the NIC's state is as it was, nothing went unmodelled.
#
#   EMU_BUILD=BUILDDIR sh tests/emu/emu-layout.sh default|buf2k|mixed|page16k [--gpu]
set -eu
layout=$1
gpu=${2:-}
e2e_opts=
huge=0
case $layout in
default) EMU_LAYOUT= ;;
buf2k) EMU_LAYOUT="--rx-buf-size 2048" ;;
mixed) EMU_LAYOUT="--pack --mix" ;;
page16k) EMU_LAYOUT="--pack" e2e_opts="--rx-page-size 16384" huge=40 ;;
*) echo "unknown layout $layout"; exit 2 ;;
esac
. "$(dirname "$0")/emu-env.sh"
B=$EMU_BUILD

if [ $huge -gt 0 ]; then
	# 16 KiB NIC pages need a dma-buf of 2 MiB huge pages (as run.sh
	# --hugepages for the VM): reserve what is missing, give it back after
	hp=/proc/sys/vm/nr_hugepages
	had=$(cat $hp)
	free=$(sed -n 's/^HugePages_Free: *//p' /proc/meminfo)
	if [ "$free" -lt $huge ]; then
		echo $((had + huge - free)) >$hp
		trap 'echo $had >$hp; emu_cleanup' EXIT
	fi
	if [ "$(sed -n 's/^HugePages_Free: *//p' /proc/meminfo)" -lt $huge ]; then
		echo "emu: cannot reserve $huge huge pages of 2 MiB for 16 KiB NIC pages"
		exit 1
	fi
fi

before=$(nic_state)
# shellcheck disable=SC2086
emu "$B/tests/vm/test-e2e" --bytes 16M --buf 8M --flow-bytes 1M $e2e_opts transfer multiflow

loader() {
	log=$EMU_DIR/loader-$1.log
	shift
	port=5301
	rx_bg "$B/tests/gpu/dataloader" -l $port -i dsim1 "$@" >"$log" 2>&1 &
	pid=$!
	wait_for "$log" binding || { kill $pid; return 1; }
	tx "$B/tests/gpu/dataloader" -s 10.77.0.2 -p $port -n 40
	rc=0
	wait $pid || rc=$?
	cat "$log"
	[ $rc = 0 ] && grep -q "received (.*): 40 samples, .* 0 bad" "$log"
}
# shellcheck disable=SC2086
loader cpu --cpu ${e2e_opts}
if [ "$gpu" = --gpu ]; then
	# the GPU path on the fake driver (host memory): the library's CUDA
	# provider through the shim, the program's own libcuda.so.1 calls
	mkdir -p "$EMU_DIR/cuda"
	ln -s "$B/tests/lib/fakecuda/libfakecuda.so" "$EMU_DIR/cuda/libcuda.so.1"
	# each way the emulator copies into CUDA memory (DEVMEMTCP_EMU_COPY):
	# the scatter kernel (the fake driver runs its source) makes one
	# transfer and one launch per placing; runs one transfer a call
	for way in scatter runs batch; do
		p0=$(emu_stat copies) c0=$(emu_stat copy_calls) x0=$(emu_stat copy_xfers)
		b0=$(emu_stat copy_bytes)
		# shellcheck disable=SC2086
		LD_LIBRARY_PATH=$EMU_DIR/cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
		DEVMEMTCP_LIBCUDA=$B/tests/emu/libdevmemtcp-emucuda.so DEVMEMTCP_EMU_COPY=$way \
			loader gpu-$way ${e2e_opts}
		p=$(($(emu_stat copies) - p0)) c=$(($(emu_stat copy_calls) - c0))
		x=$(($(emu_stat copy_xfers) - x0)) b=$(($(emu_stat copy_bytes) - b0))
		echo "emu: $way: $p buffers into GPU memory in $c calls, $x transfers of $((b / (x > 0 ? x : 1))) bytes each"
		ok=1
		[ "$x" -gt 0 ] && [ "$x" -le "$p" ] || ok=0
		case $way in
		scatter) [ "$c" = $((2 * x)) ] && [ "$p" -gt "$c" ] || ok=0 ;;
		runs) [ "$c" = "$x" ] || ok=0 ;;
		esac
		if [ $ok = 0 ]; then
			echo "emu: $way: not the copies it makes"
			exit 1
		fi
	done
fi

after=$(nic_state)
if [ "$before" != "$after" ]; then
	echo "emu: the NIC was not restored:"
	printf '%s\n' "$before" >"$EMU_DIR/before"
	printf '%s\n' "$after" >"$EMU_DIR/after"
	diff "$EMU_DIR/before" "$EMU_DIR/after" || true
	exit 1
fi
echo "emu: NIC restored"
emu_done

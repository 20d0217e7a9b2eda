#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# emu suite (and the GPU machine's one-GPU run): the NCCL plugin's devmem
# paths over the emulated devmem NIC (tests/emu, README there), two ranks
# as NCCL's proxies drive them (test-nccl-net), a process each in its own
# network namespace: rank 0 on dsim0 in dmtA, rank 1 on dsim1 in dmtB.
#   1. host memory: devmem RX into a udmabuf, devmem TX from a udmabuf
#      registered with regMrDmaBuf (table v11);
#   1b. NCCL_DEVMEMTCP_RX=0, _TX=0, _NQUEUES, _LINEAR_SIZE and their effect;
#   2. GPU memory: devmem RX into a CUDA buffer gathered by the plugin
#      into CUDA receive buffers, devmem TX from a CUDA buffer the
#      library exported (table v10);
#   3. the same with NCCL's device unpack (table v11): the harness plays
#      NCCL's kernel, copying each receive's queue entries, and hands
#      receives back with irecvConsumed; the queue's depth checked;
#   4. GPU memory with a library that has no gather kernels (built without
#      nvcc, as distributions build it; here a test hook makes a build
#      with them act so): the plugin copies through host memory what it
#      would gather, and says so once.
# Every byte is checked, every byte of every comm went through devmem RX
# and TX (the plugin's per-comm counters), and afterwards no binding,
# token or page is left and both NICs are as found.
#   EMU_BUILD=BUILDDIR sh nccl/tests/emu-nccl.sh [--driver LIBCUDA] [--bytes N]
#                                                 [--no-kernels]
# --driver: the libcuda.so.1 of the GPU steps: tests/lib/fakecuda/libfakecuda.so
# (default: host memory, the gather kernels run on the CPU), or "system"
# for the machine's driver (the GPU machine).  --no-kernels: the build has
# no gather kernels (-Dcuda=disabled): steps 2 and 3 expect the copies of
# step 4.
set -eu
# first: it runs this script again in a mount namespace of its own, with
# the arguments as given
. "$(dirname "$0")/../../tests/emu/emu-env.sh"
driver=$EMU_BUILD/tests/lib/fakecuda/libfakecuda.so bytes=64M nok=
while [ $# -gt 0 ]; do
	case $1 in
	--driver) driver=$2; shift 2 ;;
	--bytes) bytes=$2; shift 2 ;;
	--no-kernels) nok=--no-gather; shift ;;
	*) echo "usage: emu-nccl.sh [--driver LIBCUDA|system] [--bytes N] [--no-kernels]"; exit 2 ;;
	esac
done
B=$EMU_BUILD
harness=$B/nccl/tests/test-nccl-net
plugin=$B/nccl/libnccl-net-devmemtcp.so
ranks="--fork --ns0 dmtA --if0 dsim0 --ns1 dmtB --if1 dsim1"
both() { "$emuctl" show dsim0 --netns dmtA; "$emuctl" show dsim1 --netns dmtB; }
before=$(both)
export NCCL_DEVMEMTCP_ENABLE=1 NCCL_DEVMEMTCP_BUFFER_SIZE=32M

step() { # name, then the command
	name=$1
	shift
	t0=$(date +%s.%N)
	if ! "$@" >"$EMU_DIR/$name.log" 2>&1; then
		cat "$EMU_DIR/$name.log"
		echo "emu-nccl: $name FAILED"
		exit 1
	fi
	grep -E '^rank [01]: |^rank [01] v|PASS' "$EMU_DIR/$name.log"
	echo "emu-nccl: $name passed in $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $t0 }") s"
	[ "$(both)" = "$before" ] || { echo "emu-nccl: $name left the NICs changed"; both; exit 1; }
	"$emuctl" check >/dev/null || { "$emuctl" stats; echo "emu-nccl: $name left a binding or page"; exit 1; }
}

step host env NCCL_DEVMEMTCP_MEM=host \
	LD_PRELOAD="$emu_pre" "$harness" "$plugin" $ranks --devmem --dmabuf-tx \
	--version 11 --bytes "$bytes" --quiet

# The variables that act on devmem (devmemtcp-nccl(7)), host memory, 4 MiB:
# RX=0 receives with plain TCP and leaves the NIC alone, TX=0 sends the
# dma-buf registrations with plain TCP; NQUEUES sets up that many queues
# and LINEAR_SIZE bounds every devmem receive call (the close line's
# largest call is exactly it).
step env-rx0 env NCCL_DEVMEMTCP_MEM=host NCCL_DEVMEMTCP_RX=0 \
	LD_PRELOAD="$emu_pre" "$harness" "$plugin" $ranks --devmem --dmabuf-tx \
	--version 11 --bytes 4M --quiet
step env-tx0 env NCCL_DEVMEMTCP_MEM=host NCCL_DEVMEMTCP_TX=0 \
	LD_PRELOAD="$emu_pre" "$harness" "$plugin" $ranks --devmem --dmabuf-tx \
	--version 11 --bytes 4M --quiet
step env-queues env NCCL_DEVMEMTCP_MEM=host NCCL_DEVMEMTCP_NQUEUES=3 \
	NCCL_DEVMEMTCP_LINEAR_SIZE=4K \
	LD_PRELOAD="$emu_pre" "$harness" "$plugin" $ranks --devmem --dmabuf-tx \
	--version 11 --bytes 4M --quiet

# CUDA memory: the library reaches the driver through the emulator's shim,
# which tells the emulator what each export stands for; CUDA registrations
# are exported by the library for devmem TX (a test hook: the emulator
# cannot read what another exporter made)
if [ "$driver" != system ]; then
	mkdir -p "$EMU_DIR/cuda"
	ln -s "$driver" "$EMU_DIR/cuda/libcuda.so.1"
	export LD_LIBRARY_PATH=$EMU_DIR/cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export DEVMEMTCP_LIBCUDA=$B/tests/emu/libdevmemtcp-emucuda.so
export DEVMEMTCP_TEST_NCCL_TX_EXPORT=1 NCCL_DEVMEMTCP_MEM=cuda
step gpu-gather env LD_PRELOAD="$emu_pre" "$harness" "$plugin" $ranks --devmem \
	--dmabuf-tx --gpu --version 10 --bytes "$bytes" --quiet $nok
step gpu-unpack env LD_PRELOAD="$emu_pre" "$harness" "$plugin" $ranks --devmem \
	--dmabuf-tx --gpu --unpack --version 11 --bytes "$bytes" --quiet $nok
# 4 MiB each way and the grouped receive, every devmem byte copied through
# host memory
step gpu-no-kernels env DEVMEMTCP_TEST_NO_GATHER_KERNELS=1 LD_PRELOAD="$emu_pre" \
	"$harness" "$plugin" $ranks --devmem --dmabuf-tx --gpu --version 10 \
	--bytes 4M --quiet --no-gather
echo "emu-nccl: both NICs as found"
emu_done

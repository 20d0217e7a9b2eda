#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# examples/dataloader.c (--synthetic, its GPU path) with a libcuda.so.1
# that lacks one entry point it uses (cuMemAlloc_v2; cuda-stub.c built with
# DMT_STUB_LOADER), the library's own CUDA calls on the fake driver
# ($DEVMEMTCP_LIBCUDA): it must say which entry point is missing and exit
# 1, never call through a null pointer.
#   sh dataloader-cuda.sh DATALOADER STUB
set -u
loader=$1
stub=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ln -s "$stub" "$dir/libcuda.so.1"
LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$loader" --synthetic -n 1 >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
want="GPU: libcuda.so.1 has no cuMemAlloc_v2: the driver is too old for this example"
if [ $rc != 1 ]; then
	echo "FAIL: dataloader exited with $rc, not 1"
	exit 1
fi
if ! grep -qxF "$want" "$dir/out"; then
	echo "FAIL: no line \"$want\""
	exit 1
fi
echo "PASS: the missing entry point named"

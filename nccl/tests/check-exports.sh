#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The plugin exports exactly NCCL's four table symbols, as data objects.
# usage: check-exports.sh libnccl-net-devmemtcp.so
set -eu
# (const tables with pointers live in .data.rel.ro: nm says D or R)
got=$(nm -D --defined-only "$1" | awk '{ sub(/R/, "D", $2); print $2, $3 }' | sort)
want=$(printf 'D ncclNetPlugin_v10\nD ncclNetPlugin_v11\nD ncclNetPlugin_v8\nD ncclNetPlugin_v9\n')
if [ "$got" != "$want" ]; then
	echo "FAIL: $1 exports:"
	echo "$got"
	echo "expected:"
	echo "$want"
	exit 1
fi
echo "PASS: $1 exports the tables ncclNetPlugin_v8 .. _v11 and nothing else"

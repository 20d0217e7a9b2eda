#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# A program linked with the static library (libdevmemtcp.a) that asks for
# CUDA memory reaches the real CUDA provider: the message is the CUDA
# loader's (here for a libcuda path that does not exist, through the test
# builds' DEVMEMTCP_LIBCUDA), never "built without the CUDA provider".
# With "gpu" (on a machine with an NVIDIA GPU and driver) the real
# libcuda.so.1 is loaded instead and the 1 MiB CUDA buffer must be made.
# usage: check-static.sh SRCDIR BUILDDIR [gpu]
set -eu
src=$1 build=$2 mode=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/prog.c" <<'PROG'
#include <devmemtcp.h>
#include <stdio.h>
int main(void)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_CUDA,
		       .size = 1 << 20);
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf;
	int ret;

	if (devmemtcp_ctx_new(NULL, &ctx))
		return 1;
	ret = devmemtcp_buf_new(ctx, &o, &buf);
	printf("%d %s\n", ret, devmemtcp_ctx_errmsg(ctx));
	if (!ret)
		devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	return 0;
}
PROG
san=
ldd "$build/lib/libdevmemtcp.so" | grep -q libasan && san="-fsanitize=address,undefined"
# the libraries the static library needs are those the shared one links
# (libmnl, libdrm when built with it, ...): no pkg-config, whose .pc only an
# installed build has
libs=$(readelf -d "$build/lib/libdevmemtcp.so" |
	sed -n 's/.*Shared library: \[lib\([^]]*\)\.so\.[0-9.]*\]$/-l\1/p' | grep -Ev '^-l(c|asan|ubsan)$')
${CC:-cc} $san -I"$src/include" -o "$tmp/prog" "$tmp/prog.c" \
	"$build/lib/libdevmemtcp.a" $libs -pthread
if ldd "$tmp/prog" | grep -q libdevmemtcp; then
	echo "check-static: the program links the shared library, not libdevmemtcp.a"
	exit 1
fi
if [ "$mode" = gpu ]; then
	out=$("$tmp/prog")
	echo "static program, real libcuda: $out"
	[ "${out%% *}" = 0 ] || { echo "check-static: no CUDA buffer from a static link"; exit 1; }
	exit 0
fi
out=$(DEVMEMTCP_LIBCUDA=/nonexistent/libcuda.so.1 "$tmp/prog")
echo "static program: $out"
case $out in
*"built without"*)
	echo "check-static: the static library does not reach the CUDA provider"
	exit 1 ;;
"-2 /nonexistent/libcuda.so.1 not found ("*"): install the NVIDIA driver (it ships libcuda.so.1) or use another provider")
	;;
*)
	echo "check-static: expected the CUDA loader's message for a missing libcuda"
	exit 1 ;;
esac

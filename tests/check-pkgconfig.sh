#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Build a program outside the tree against the library through pkg-config
# (the uninstalled .pc Meson writes), run it, and check it links the
# shared library.
set -eu
src=$1 build=$2
. "$src/tests/need-tool.sh"
need_tool pkg-config pkg-config
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/prog.c" <<'PROG'
#include <devmemtcp.h>
#include <stdio.h>
int main(void)
{
	struct devmemtcp_ctx *ctx;
	if (devmemtcp_ctx_new(NULL, &ctx))
		return 1;
	printf("%s\n", devmemtcp_version());
	devmemtcp_ctx_free(ctx);
	return 0;
}
PROG
export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cflags=$(pkg-config --cflags devmemtcp)
libs=$(pkg-config --libs devmemtcp)
# a sanitizer build of the library needs the program built the same way
san=
ldd "$build/lib/libdevmemtcp.so" | grep -q libasan && san="-fsanitize=address,undefined"
${CC:-cc} $san $cflags -o "$tmp/prog" "$tmp/prog.c" $libs
out=$(LD_LIBRARY_PATH="$build/lib" "$tmp/prog")
echo "pkg-config build ran, library version $out"
LD_LIBRARY_PATH="$build/lib" ldd "$tmp/prog" | grep -q 'libdevmemtcp.so.0' ||
	{ echo "the program does not link libdevmemtcp.so.0"; exit 1; }

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Regenerate tests/abi/libdevmemtcp.abi, the ABI baseline of the `abi` test,
# from a build of libdevmemtcp.so.0 without test hooks and with -g: BUILDDIR
# (default build-abi in the source tree) is configured for that when it does
# not exist, only the library is built, and what changed against the old
# baseline is printed before it is replaced.  doc/ABI.md says when to run it.
# usage: tests/abi/update-baseline.sh [BUILDDIR]
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
b=${1:-$src/build-abi}
if [ ! -d "$b" ]; then
	meson setup "$b" "$src" -Dbuildtype=debugoptimized -Dtest_hooks=false \
		-Dtests=disabled -Dpython=disabled -Dcuda=disabled -Dvm_tests=false >/dev/null
fi
if [ "$(meson introspect "$b" --buildoptions |
	python3 -c 'import json, sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "test_hooks"][0])')" != False ]; then
	echo "update-baseline: $b is configured with -Dtest_hooks=true; the baseline comes from a build without them" >&2
	exit 1
fi
meson compile -C "$b" lib/devmemtcp:shared_library >/dev/null
lib=$b/lib/libdevmemtcp.so.0
echo "update-baseline: changes against the committed baseline:"
python3 "$src/tests/abi/check-abi.py" "$src" "$lib" || true
python3 "$src/tests/abi/check-abi.py" --update "$src" "$lib"

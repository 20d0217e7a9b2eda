#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The symbol map, the public header, the exported symbols, the man pages
# and the tests agree: every exported function has a map entry, a
# declaration, a man page and a test that calls it.
set -eu
src=$1 lib=$2
fail=0
map=$(sed -n 's/^[[:space:]]*\(devmemtcp_[a-z0-9_]*\);.*/\1/p' "$src/lib/devmemtcp.map" | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort -u)
declared=$(grep -o '\bdevmemtcp_[a-z0-9_]*(' "$src/include/devmemtcp.h" | tr -d '(' | sort -u)
for s in $map; do
	echo "$exported" | grep -qx "$s" || { echo "in the map but not exported: $s"; fail=1; }
	echo "$declared" | grep -qx "$s" || { echo "in the map but not declared in devmemtcp.h: $s"; fail=1; }
	[ -f "$src/man/man3/$s.3" ] || { echo "no man page man/man3/$s.3"; fail=1; }
	grep -rqw "$s" "$src/tests" --include='*.c' --include='*.cpp' --include='*.cu' ||
		{ echo "no test calls $s"; fail=1; }
	grep -q "CALL(${s#devmemtcp_})" "$src/tests/unit/test-errno.c" ||
		{ echo "tests/unit/test-errno.c does not check that $s keeps errno"; fail=1; }
	grep -q "'man3/$s.3'" "$src/man/meson.build" ||
		{ echo "man/meson.build does not install man3/$s.3"; fail=1; }
done
# the errno policy lives in DMT_KEEP_ERRNO: every exported function starts with it
for f in $(find "$src/lib" -name '*.c' | sort); do
	awk -v f="${f##*/}" '
		/^DEVMEMTCP_EXPORT/ { name = $0; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name); want = 1; next }
		want && /^\{/ { getline; if ($0 !~ /^\tDMT_KEEP_ERRNO;/) { print f ": " name " does not start with DMT_KEEP_ERRNO"; bad = 1 } want = 0 }
		END { exit bad }' "$f" || fail=1
done
for s in $exported; do
	echo "$map" | grep -qx "$s" || { echo "exported but not in the map: $s"; fail=1; }
done
# the Debian symbols file lists the same symbols (dpkg-gensymbols fails the
# package build on a difference, far later than this test)
debsyms=$(sed -n 's/^ \(devmemtcp_[a-z0-9_]*\)@.*/\1/p' "$src/debian/libdevmemtcp0.symbols" | sort -u)
for s in $map; do
	echo "$debsyms" | grep -qx "$s" || { echo "in the map but not in debian/libdevmemtcp0.symbols: $s"; fail=1; }
done
for s in $debsyms; do
	echo "$map" | grep -qx "$s" || { echo "in debian/libdevmemtcp0.symbols but not in the map: $s"; fail=1; }
done
for s in $declared; do
	case $s in devmemtcp_done_fn|devmemtcp_log_fn) continue ;; esac
	echo "$map" | grep -qx "$s" || { echo "declared but not in the map: $s"; fail=1; }
done
# the map's version node matches the project version's major.minor
ver=$(sed -n "s/^  version: '\([0-9]*\)\.\([0-9]*\).*/\1.\2/p" "$src/meson.build" | head -1)
grep -q "^DEVMEMTCP_$ver {" "$src/lib/devmemtcp.map" ||
	{ echo "lib/devmemtcp.map has no node DEVMEMTCP_$ver for version $ver (meson.build)"; fail=1; }
n=$(echo "$map" | wc -l)
[ $fail = 0 ] && echo "$n symbols: map, header, exports, man pages and tests agree"
exit $fail

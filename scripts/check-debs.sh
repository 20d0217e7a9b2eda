#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The Debian packages (debian/), as a distribution would build them: the
# committed tree (git archive, what meson dist packs) unpacked in a
# temporary directory, dpkg-buildpackage -b -us -uc there (its dh_auto_test
# runs the unit tests of a build without test hooks), lintian on the result,
# which must say no error and no warning (the overrides are in debian/ with
# their reasons), each package's file list, and its copyright file.  Writes
# the .deb files to OUTDIR (default a temporary directory, removed).
# usage: scripts/check-debs.sh [OUTDIR]     exit 0, 1 failed, 77 skipped
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/need-tool.sh"
need_tool dpkg-buildpackage dpkg-dev
need_tool dh debhelper
need_tool lintian lintian
need_tool git git
tmp=$(mktemp -d "${TMPDIR:-/tmp}/devmemtcp-debs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out=${1:-$tmp/out}
mkdir -p "$out"
fail() { echo "check-debs: $*"; exit 1; }
t0=$(date +%s)

if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
	echo "check-debs: note: the tree has uncommitted changes; the packages are built from what is committed"
fi
version=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$src/debian/changelog")
dir=$tmp/libdevmemtcp-$version
git -C "$src" archive --format=tar --prefix="libdevmemtcp-$version/" HEAD | tar -x -C "$tmp"
dpkg-checkbuilddeps "$dir/debian/control" 2>"$tmp/deps" ||
	{ cat "$tmp/deps"; fail "build dependencies missing (scripts/deps.sh installs them)"; }
# no -dbgsym packages: nothing here uses them, and they take time
(cd "$dir" && DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }noddebs" \
	dpkg-buildpackage -b -us -uc -Jauto) >"$tmp/build.log" 2>&1 ||
	{ tail -80 "$tmp/build.log"; fail "dpkg-buildpackage failed (log above)"; }
t1=$(date +%s)
# what the package build's test step ran
sed -n '/^Ok:/,/^Timeout:/p' "$tmp/build.log" | tr -s ' ' | paste -sd ' ' | sed 's/^/check-debs: dh_auto_test: /'
if grep -q "No tests defined" "$tmp/build.log"; then
	fail "dh_auto_test found no tests"
fi
echo "check-debs: dpkg-buildpackage $((t1 - t0)) s"
changes=$(ls "$tmp"/libdevmemtcp_*.changes)
# (--show-overrides would make an overridden error fail the run)
lintian --fail-on error,warning --display-info "$changes" >"$tmp/lintian" 2>&1 && lrc=0 || lrc=$?
echo "check-debs: lintian ($(($(date +%s) - t1)) s):"
sed 's/^/  /' "$tmp/lintian"
for o in "$dir"/debian/*.lintian-overrides; do
	echo "check-debs: overridden (debian/${o##*/}):"
	grep -v '^#' "$o" | sed 's/^/  /'
done
[ "$lrc" = 0 ] || fail "lintian reports errors or warnings"
for deb in "$tmp"/*.deb; do
	p=$(dpkg-deb -f "$deb" Package)
	# its files (not directories; the functions' pages counted)
	list=$(dpkg-deb -c "$deb" | awk '{ print $6 ($7 ? " " $7 " " $8 : "") }' | grep -v '/$')
	echo "check-debs: $(basename "$deb"):"
	echo "$list" | grep -v '/man3/' | sed 's/^/  /'
	n=$(echo "$list" | grep -c '/man3/' || true)
	[ "$n" = 0 ] || echo "  ./usr/share/man/man3/: $n pages"
	echo "$list" | grep -qx "\./usr/share/doc/$p/copyright" || fail "$p has no copyright file"
	cp "$deb" "$out/"
done
echo "check-debs: OK in $(($(date +%s) - t0)) s"

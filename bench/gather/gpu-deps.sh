#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Run on the build machine (Debian, with the packages scripts/deps.sh
# installs): put the Debian packages that bench/gather/gpu-run.sh unpacks
# on the GPU machine (which lacks them) into bench/.gpu-deps/ (ignored by
# git; carry it there).  Downloads nothing: a package's .deb comes from
# apt's cache when it is there, else it is rebuilt from the installed
# package's files (dpkg -L) with dpkg-deb.
# usage: bench/gather/gpu-deps.sh
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/bench/.gpu-deps
pkgs="libmnl0 libmnl-dev libcmocka0 libcmocka-dev libnl-3-200 libnl-3-dev
libnl-genl-3-200 libnl-genl-3-dev"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# rebuild PKG's .deb from its installed files
repack() {
	pkg=$1 ver=$2 root=$tmp/$1
	mkdir -p "$root/DEBIAN"
	dpkg-query -L "$pkg" | while read -r f; do
		if [ -f "$f" ] || [ -L "$f" ]; then
			mkdir -p "$root$(dirname "$f")"
			cp -a "$f" "$root$f"
		fi
	done
	dpkg-query -W -f='Package: ${Package}\nVersion: ${Version}\nArchitecture: ${Architecture}\nMaintainer: ${Maintainer}\nDescription: ${binary:Summary} (rebuilt from the installed files)\n' \
		"$pkg" >"$root/DEBIAN/control"
	dpkg-deb --root-owner-group -Zxz --build "$root" \
		"$out/${pkg}_${ver}_rebuilt.deb" >/dev/null
}

rm -rf "$out"
mkdir -p "$out"
for pkg in $pkgs; do
	ver=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null) || {
		echo "gpu-deps: $pkg is not installed: run scripts/deps.sh first" >&2
		exit 1
	}
	# apt's file names escape the epoch's colon
	deb=/var/cache/apt/archives/${pkg}_$(echo "$ver" | sed 's/:/%3a/')_$(dpkg-query -W -f='${Architecture}' "$pkg").deb
	if [ -f "$deb" ]; then
		cp "$deb" "$out/"
	else
		repack "$pkg" "$ver"
	fi
done
ls "$out"
du -sh "$out"

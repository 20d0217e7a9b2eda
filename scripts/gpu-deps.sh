#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Run on the build machine (Debian, with the packages scripts/deps.sh
# installs): put the Debian packages that the GPU machine's scripts need and
# that machine lacks into .gpu-deps/ (ignored by git; carry it there), as
# .deb files: libmnl, cmocka and libnl-genl-3 with their -dev packages (the
# library, its tests), and pytest with the pure-Python packages it imports
# (the Python binding's tests).  scripts/gpu-env.sh unpacks them there.
# One script for every GPU run: bench/gather/gpu-run.sh,
# python/tests/gpu-run.sh, nccl/tests/gpu-allreduce.sh, tests/emu/gpu-run.sh.
# Downloads nothing: a package's .deb comes from apt's cache when it is
# there, else it is rebuilt from the installed package's files (dpkg -L).
# usage: scripts/gpu-deps.sh
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/.gpu-deps
pkgs="libmnl0 libmnl-dev libcmocka0 libcmocka-dev libnl-3-200 libnl-3-dev
libnl-genl-3-200 libnl-genl-3-dev iproute2 libbpf1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The Debian packages owning the pure-Python modules pytest imports.
pypkgs=$(/usr/bin/python3 - <<'PY'
import subprocess, sys
import pytest, _pytest.pytester  # noqa: F401  (pull in the lazily imported parts)
root = "/usr/lib/python3/dist-packages/"
files = sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())})
owners = set()
for f in files:
    if not f.startswith(root) or "_distutils_hack" in f:
        continue
    r = subprocess.run(["dpkg-query", "-S", f], capture_output=True, text=True)
    if r.returncode == 0:
        owners.add(r.stdout.split(":")[0])
print(" ".join(sorted(owners)))
PY
)
[ -n "$pypkgs" ] || {
	echo "gpu-deps: python3-pytest is not installed: run scripts/deps.sh first" >&2
	exit 1
}

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
for pkg in $pkgs $pypkgs; do
	ver=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null) || {
		echo "gpu-deps: $pkg is not installed: run scripts/deps.sh first" >&2
		exit 1
	}
	# apt's file names escape the epoch's colon
	deb=/var/cache/apt/archives/${pkg}_$(echo "$ver" | sed 's/:/%3a/')_$(dpkg-query -W -f='${Architecture}' "$pkg").deb
	if [ -f "$deb" ]; then
		cp "$deb" "$out/"
	elif ! (cd "$out" && apt-get download -qq "$pkg=$ver" >/dev/null 2>&1); then
		repack "$pkg" "$ver"
	fi
done
ls "$out"
du -sh "$out"

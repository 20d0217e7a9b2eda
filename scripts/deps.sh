#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Install what building and testing libdevmemtcp needs on Debian/Ubuntu
# (bookworm or newer), as root.  Idempotent: installs only what is missing.
set -eu
# ethtool: the host suite's oracle for NIC state (not only the vm suite's)
# clang, libclang-rt-dev: libFuzzer and the sanitizer runtimes of clang (the
# fuzz harnesses, tests/fuzz; clang-14 and libclang-rt-14-dev on bookworm)
# python3-torch: PyTorch on the CPU (1.13 on bookworm) for the emu suite's
# Python loader (examples/python/torch_loader.py on the emulated NIC)
# abigail-tools: abidw and abidiff, the abi test (tests/abi)
# dpkg-dev, debhelper, dh-python, lintian, systemd (its pkg-config file), git: the
# Debian packages and the sdist (scripts/check-debs.sh, check-wheel.sh)
pkgs="meson ninja-build pkg-config gcc g++ libmnl-dev libcmocka-dev
libnl-genl-3-dev libdrm-dev valgrind iproute2 ethtool python3
qemu-system-x86 debootstrap busybox-static cpio zstd kmod
python3-dev python3-venv python3-pip python3-mesonpy python3-pytest python3-numpy
patchelf clang libclang-rt-dev python3-torch
abigail-tools dpkg-dev debhelper dh-python lintian systemd git"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages:$missing; run as root to install them" >&2
	exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null

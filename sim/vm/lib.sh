# Shared helpers for sim/vm/*.sh (sourced, not executed).
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT

VM_CACHE=${DEVMEMTCP_VM_CACHE:-/var/cache/devmemtcp-vm}
VM_ROOT=$VM_CACHE/trixie-root
VM_KERNELS=$VM_CACHE/kernels
VM_KERNELS_TXT=$VM_CACHE/kernels.txt
VM_SUITE=trixie
# Packages the chroot needs for out-of-tree kernel module builds (and a few
# userspace tools whose newer versions are copied into the guest).
VM_CHROOT_PKGS="gcc-14,make,libc6-dev,libelf-dev,kmod,iproute2,ethtool,bc,flex,bison,libssl-dev,xz-utils,zstd"

vm_log() { printf '[devmemtcp-vm] %s\n' "$*" >&2; }

# Print a script's usage, the comment block after its first line (without
# the license line), and exit with status (default 2).
vm_usage() { # script [status]
	awk 'NR == 1 { next } !/^#/ { exit } /SPDX-License-Identifier/ { next }
		{ sub(/^# ?/, ""); print }' "$1"
	exit "${2:-2}"
}
vm_die() { printf '[devmemtcp-vm] error: %s\n' "$*" >&2; exit 1; }

# Mirror for debootstrap: the first non-security Debian URI of this machine's
# apt configuration (deb822 or one-line format). Empty means debootstrap's default.
vm_host_mirror() {
	local f uri=""
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		uri=$(awk '
			/^[[:space:]]*$/ { if (u != "" && s !~ /security/ && t ~ /deb( |$)/) { print u; exit } u=""; s=""; t=""; next }
			/^URIs:/ { u=$2 } /^Suites:/ { s=$0 } /^Types:/ { t=$0 " " }
			END { if (u != "" && s !~ /security/ && t ~ /deb( |$)/) print u }' "$f" | head -n1)
		[ -n "$uri" ] && break
	done
	if [ -z "$uri" ]; then
		for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
			[ -r "$f" ] || continue
			uri=$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' "$f")
			[ -n "$uri" ] && break
		done
	fi
	printf '%s\n' "$uri"
}

# umount, waiting a little for lingering processes (apt methods), else lazily
vm_umount() {
	local i
	for i in 1 2 3 4 5; do
		umount "$1" 2>/dev/null && return 0
		sleep 0.2
	done
	umount -l "$1"
}

# Run a command inside the chroot with /proc (and /dev) mounted; unmounts after.
vm_chroot() {
	local rc=0 mounted_proc=0 mounted_dev=0
	if ! mountpoint -q "$VM_ROOT/proc"; then
		mount -t proc proc "$VM_ROOT/proc" && mounted_proc=1
	fi
	if ! mountpoint -q "$VM_ROOT/dev"; then
		mount --bind /dev "$VM_ROOT/dev" && mounted_dev=1
	fi
	LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		chroot "$VM_ROOT" "$@" || rc=$?
	[ $mounted_dev = 1 ] && vm_umount "$VM_ROOT/dev"
	[ $mounted_proc = 1 ] && vm_umount "$VM_ROOT/proc"
	return $rc
}

# Serialize everything that writes into the cache.
vm_lock() {
	mkdir -p "$VM_CACHE"
	exec 9>"$VM_CACHE/.lock"
	flock 9
}

# kernels.txt lookups
vm_kernel_release() { # label -> uname -r
	[ -r "$VM_KERNELS_TXT" ] || vm_die "$VM_KERNELS_TXT missing: run sim/vm/prepare.sh"
	awk -v l="$1" '$1 == l { print $2; exit }' "$VM_KERNELS_TXT"
}

#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Prepare the cached pieces the VM runner needs (idempotent):
#   host tools, a debootstrapped trixie tree with gcc-14, and three Debian
#   kernels: two cloud kernels (trixie's 6.12 "lts" and the newest
#   trixie-backports one "newest") and the newest trixie-backports kernel of
#   the generic flavour ("generic": it has DRM and vgem, the cloud kernels
#   have none), each with its headers (in the tree) and its vmlinuz + modules.
# Cache: ${DEVMEMTCP_VM_CACHE:-/var/cache/devmemtcp-vm}.
# Options: --refresh   re-resolve the newest kernels (apt-get update in the tree)
#                      even when kernels.txt already names installed ones.
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

refresh=${DEVMEMTCP_VM_REFRESH:-0}
for a in "$@"; do
	case $a in
	--refresh) refresh=1 ;;
	-h|--help) vm_usage "$0" 0 ;;
	*) vm_die "unknown argument: $a" ;;
	esac
done

[ "$(id -u)" = 0 ] || vm_die "prepare.sh needs root (debootstrap, chroot, mount)"
vm_lock
t0=$(date +%s)
stage() { local now; now=$(date +%s); vm_log "$1 ($((now - t0)) s)"; }

# (a) host packages -----------------------------------------------------------
need=()
for p in debootstrap qemu-system-x86 busybox-static cpio zstd xz-utils iproute2 ethtool kmod; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$st" = "install ok installed" ] || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	vm_log "installing host packages: ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
stage "host packages ok"

# (b) debootstrap trixie ------------------------------------------------------
stamp=$VM_ROOT/.devmemtcp-root
if [ "$(cat "$stamp" 2>/dev/null)" != "$VM_SUITE $VM_CHROOT_PKGS" ]; then
	if [ -x "$VM_ROOT/usr/bin/apt-get" ] && [ -e "$VM_ROOT/.devmemtcp-base" ]; then
		# tree exists, package list changed: add what is missing
		vm_chroot apt-get install -y -qq --no-install-recommends ${VM_CHROOT_PKGS//,/ } >/dev/null
	else
		mirror=$(vm_host_mirror)
		vm_log "debootstrap $VM_SUITE (mirror: ${mirror:-debootstrap default})"
		tmp=$VM_ROOT.tmp
		ok=0
		for try in 1 2 3; do
			# a failed debootstrap can leave proc/sys mounted in the target
			awk -v t="$tmp/" 'index($2, t) == 1 { print $2 }' /proc/mounts | sort -r |
				while read -r m; do umount -l "$m"; done
			rm -rf "$tmp"
			if debootstrap --variant=minbase --include="$VM_CHROOT_PKGS" \
				"$VM_SUITE" "$tmp" ${mirror:+"$mirror"} >"$VM_CACHE/debootstrap.log" 2>&1; then
				ok=1; break
			fi
			vm_log "debootstrap attempt $try failed"
			sleep $((try * 5))
		done
		[ $ok = 1 ] || { tail -n 30 "$VM_CACHE/debootstrap.log" >&2; vm_die "debootstrap failed (log: $VM_CACHE/debootstrap.log)"; }
		touch "$tmp/.devmemtcp-base"
		rm -rf "$VM_ROOT"
		mv "$tmp" "$VM_ROOT"
		# kernel/initramfs hooks must never run in the tree
		printf '#!/bin/sh\nexit 101\n' >"$VM_ROOT/usr/sbin/policy-rc.d"
		chmod +x "$VM_ROOT/usr/sbin/policy-rc.d"
		mkdir -p "$VM_ROOT/etc/kernel"
		printf 'do_initrd = no\ndo_bootloader = no\n' >"$VM_ROOT/etc/kernel-img.conf"
	fi
	echo "$VM_SUITE $VM_CHROOT_PKGS" >"$stamp"
fi
cp -L /etc/resolv.conf "$VM_ROOT/etc/resolv.conf" 2>/dev/null || true
stage "trixie tree ok: $VM_ROOT"

# (c) kernels -----------------------------------------------------------------
# Download a kernel package and the linux-*<kv>* packages it depends on
# (first alternative, recursively) and extract them (dpkg -x) under DEST in
# the tree. Nothing gets configured.
fetch_linux_closure() { # pkg dest kv
	local todo=("$1") dest=$2 kv=$3 p deb deps d
	local -A seen=()
	while [ ${#todo[@]} -gt 0 ]; do
		p=${todo[0]}
		todo=("${todo[@]:1}")
		[ -n "${seen[$p]:-}" ] && continue
		seen[$p]=1
		vm_chroot sh -c "cd /var/tmp/kimg && apt-get download -o APT::Sandbox::User=root -qq '$p' >/dev/null" ||
			{ sleep 5; vm_chroot sh -c "cd /var/tmp/kimg && apt-get download -o APT::Sandbox::User=root -qq '$p' >/dev/null"; } ||
			vm_die "apt-get download $p failed"
		deb=$(ls "$VM_ROOT/var/tmp/kimg/${p}_"*.deb | head -n1)
		vm_chroot dpkg -x "/var/tmp/kimg/${deb##*/}" "$dest"
		deps=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -E 's/\|.*//; s/\(.*\)//; s/[[:space:]]//g')
		for d in $deps; do
			case $d in linux-*"$kv"*) todo+=("$d") ;; esac
		done
	done
}

kernel_ok() { # uname-r -> installed (image extracted + headers in the tree)?
	[ -s "$VM_KERNELS/$1/vmlinuz" ] && [ -d "$VM_KERNELS/$1/lib/modules/$1" ] &&
		[ -f "$VM_ROOT/usr/src/linux-headers-$1/Makefile" ]
}
have_all=0
if [ "$refresh" != 1 ] && [ -s "$VM_KERNELS_TXT" ]; then
	have_all=1
	for l in lts newest generic; do
		r=$(awk -v l=$l '$1 == l { print $2 }' "$VM_KERNELS_TXT")
		{ [ -n "$r" ] && kernel_ok "$r"; } || have_all=0
	done
fi

if [ $have_all = 0 ]; then
	# trixie-backports on the mirror the tree already uses
	src_mirror=$(awk '$1 == "deb" { print $2; exit }' "$VM_ROOT/etc/apt/sources.list" 2>/dev/null || true)
	if [ -z "$src_mirror" ]; then
		src_mirror=$(awk '/^URIs:/ { print $2; exit }' "$VM_ROOT"/etc/apt/sources.list.d/*.sources 2>/dev/null || true)
	fi
	[ -n "$src_mirror" ] || vm_die "cannot find the tree's mirror in its apt sources"
	echo "deb $src_mirror $VM_SUITE-backports main" >"$VM_ROOT/etc/apt/sources.list.d/backports.list"
	vm_log "apt-get update in the tree"
	vm_chroot apt-get update -qq >/dev/null
	dep_image() { # metapackage [apt-cache options] -> linux-image-<release> it depends on
		local meta=$1
		shift
		vm_chroot apt-cache depends "$@" "$meta" |
			awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
	}
	# the newer of the metapackage's kernel and the newest linux-image-<ver>-amd64
	# of the flavour (cloud, or "" for generic) of any ABI, in case the
	# metapackage lags
	newest_image() { # metapackage flavour
		local pkg cand
		pkg=$(dep_image "$1" -t "$VM_SUITE-backports")
		cand=$(vm_chroot apt-cache pkgnames linux-image- |
			grep -E "^linux-image-[0-9][^ ]*-${2:+$2-}amd64\$" |
			if [ -n "$2" ]; then cat; else grep -vE -- '-(cloud|rt)-amd64$'; fi |
			sort -V | tail -n1)
		if [ -n "$cand" ] && [ "$(printf '%s\n%s\n' "$pkg" "$cand" | sort -V | tail -n1)" = "$cand" ]; then
			pkg=$cand
		fi
		printf '%s\n' "$pkg"
	}
	lts_pkg=$(dep_image linux-image-cloud-amd64)
	new_pkg=$(newest_image linux-image-cloud-amd64 cloud)
	gen_pkg=$(newest_image linux-image-amd64 "")
	[ -n "$lts_pkg" ] || vm_die "no trixie linux-image-cloud-amd64 found"
	[ -n "$new_pkg" ] || vm_die "no trixie-backports cloud kernel found"
	[ -n "$gen_pkg" ] || vm_die "no trixie-backports generic kernel found"
	lts_rel=${lts_pkg#linux-image-}
	new_rel=${new_pkg#linux-image-}
	gen_rel=${gen_pkg#linux-image-}
	vm_log "kernels: lts=$lts_rel newest=$new_rel generic=$gen_rel"
	for rel in "$lts_rel" "$new_rel" "$gen_rel"; do
		kernel_ok "$rel" && continue
		vm_log "installing kernel $rel (image extracted, headers installed)"
		# Everything by download + extract only, so no maintainer script runs
		# (6.12's headers depend on the image, whose hooks build an initramfs).
		# The headers' other dependencies (gcc-14, make, libelf-dev ...) are in
		# the tree. 7.x splits the image into linux-{base,binary,modules}-<rel>:
		# follow the versioned linux-* dependencies of each package.
		kv=${rel%-amd64}
		kv=${kv%-cloud}
		rm -rf "$VM_ROOT/var/tmp/kimg"
		mkdir -p "$VM_ROOT/var/tmp/kimg/x"
		fetch_linux_closure "linux-image-$rel" /var/tmp/kimg/x "$kv"
		fetch_linux_closure "linux-headers-$rel" / "$kv"
		x=$VM_ROOT/var/tmp/kimg/x
		dst=$VM_KERNELS/$rel
		rm -rf "$dst.tmp"
		mkdir -p "$dst.tmp/lib/modules"
		if [ -d "$x/usr/lib/modules/$rel" ]; then
			mv "$x/usr/lib/modules/$rel" "$dst.tmp/lib/modules/$rel"
		else
			mv "$x/lib/modules/$rel" "$dst.tmp/lib/modules/$rel"
		fi
		m=$dst.tmp/lib/modules/$rel
		# 6.12 keeps vmlinuz/config in /boot; 7.x in the modules directory
		for f in vmlinuz config System.map; do
			if [ -e "$m/$f" ]; then
				mv "$m/$f" "$dst.tmp/$f"
			elif [ -e "$x/boot/$f-$rel" ]; then
				cp "$x/boot/$f-$rel" "$dst.tmp/$f"
			fi
		done
		[ -s "$dst.tmp/vmlinuz" ] && [ -s "$dst.tmp/config" ] || vm_die "no vmlinuz/config in linux-image-$rel"
		rm -f "$m/build" "$m/source"
		# the image's postinst would run depmod: do it here (host kmod reads .ko.xz)
		depmod -b "$dst.tmp" "$rel"
		dpkg-deb -f "$(ls "$VM_ROOT"/var/tmp/kimg/linux-image-${rel}_*.deb)" Version >"$dst.tmp/version"
		rm -rf "$dst" "$VM_ROOT/var/tmp/kimg"
		mv "$dst.tmp" "$dst"
	done
	printf 'lts %s\nnewest %s\ngeneric %s\n' "$lts_rel" "$new_rel" "$gen_rel" >"$VM_KERNELS_TXT.tmp"
	mv "$VM_KERNELS_TXT.tmp" "$VM_KERNELS_TXT"
fi
stage "kernels ok: $(tr '\n' ' ' <"$VM_KERNELS_TXT")"

# config report ---------------------------------------------------------------
report=$VM_CACHE/config-report.txt
if [ ! -s "$report" ] || [ "$report" -ot "$VM_KERNELS_TXT" ]; then
	{
		while read -r label rel; do
			echo "== $label $rel ($(cat "$VM_KERNELS/$rel/version" 2>/dev/null))"
			grep -E '^(# )?CONFIG_(UDMABUF|PAGE_POOL[A-Z_]*|NET_DEVMEM|DMA_SHARED_BUFFER|DMABUF_[A-Z_]*|DEBUG_FS|DEBUG_FS_ALLOW_ALL|VIRTIO|VIRTIO_PCI|VIRTIO_CONSOLE|SERIAL_8250|SERIAL_8250_CONSOLE|MEMFD_CREATE|NETDEVSIM|VETH|GENERIC_ALLOCATOR|DEBUG_INFO_BTF_MODULES|MODULE_SIG_FORCE|MODULE_COMPRESS_[A-Z]*|RD_ZSTD|RD_GZIP|BLK_DEV_INITRD|NET_NS|IOMMU_SUPPORT|IOMMU_DMA|INTEL_IOMMU|IOMMU_DEFAULT_[A-Z_]*|HUGETLBFS|DRM|DRM_VGEM|DRM_GEM_SHMEM_HELPER|SWIOTLB|KASAN|PROVE_LOCKING)[= ]' \
				"$VM_KERNELS/$rel/config" | sed 's/^/  /'
		done <"$VM_KERNELS_TXT"
	} >"$report"
fi
stage "done; config report: $report"

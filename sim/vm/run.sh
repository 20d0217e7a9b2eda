#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Boot one of the cached Debian kernels under QEMU (-nic none) with an
# initramfs, load the simulated NIC module, run a shell command, and exit
# with that command's status.
#
# Usage: run.sh --kernel lts|newest|generic|<uname-r> [options] -- COMMAND...
#   --timeout S        kill QEMU after S seconds (default 600); exit 1
#   --payload PATH     file or directory to copy into the guest at the same
#                      absolute path, with every shared library its ELF files
#                      need (per ldd) and the dynamic loader; repeatable
#   --builddir DIR     where build-module.sh put sim/<uname-r>/*.ko
#                      (default <repo>/build)
#   --no-sim           do not load devmemsim (it is still in the image)
#   --sim-args "A=1"   module parameters for devmemsim
#   --iommu            q35 machine with QEMU's emulated Intel IOMMU (strict
#                      DMA translation in the guest) and two PCI edu devices,
#                      which devmemsim takes as its parents (parent=pci)
#   --hugepages N      reserve N 2 MiB huge pages in the guest (hugetlb memfd,
#                      e.g. udmabufs for NIC pages larger than 4 KiB)
#   --module NAME      also put in-tree module NAME (with deps) in the image;
#                      repeatable (veth is always there)
#   --out DIR          the guest's /out (also $DEVMEMTCP_VM_OUT) is copied
#                      back to DIR after COMMAND (through a virtio disk)
#   --mem MB           guest memory (default 2048)
#   --smp N            guest CPUs (default 2)
#   --udmabuf-mb N     udmabuf.size_limit_mb (default 1024; kernel default 64)
#   --dmesg            always print the guest's dmesg after COMMAND
#                      (it is printed anyway when COMMAND fails)
#   --append ARGS      extra kernel command line
#   --keep             keep the per-run work directory (prints its path)
# COMMAND is one shell command line (/bin/sh = dash; bash is there), run in the caller's
# working directory when the payload put that directory in the guest, else /.
# Env: DEVMEMTCP_VM_CACHE, DEVMEMTCP_VM_ACCEL=kvm|tcg (default: kvm if
#      /dev/kvm is usable), DEVMEMTCP_VM_LOG=FILE (raw console log copy).
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/lib.sh"

usage() { vm_usage "$0" "${1:-2}"; }
kernel="" timeout=600 builddir=$repo/build sim=1 sim_args="" out="" mem=2048 smp=2
udmabuf_mb=1024 dmesg=0 append="" keep=0 iommu=0 hugepages=0
payloads=() modules=(veth virtio_blk)
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--payload) payloads+=("$2"); shift 2 ;;
	--builddir) builddir=$2; shift 2 ;;
	--no-sim) sim=0; shift ;;
	--sim-args) sim_args=$2; shift 2 ;;
	--iommu) iommu=1; shift ;;
	--hugepages) hugepages=$2; shift 2 ;;
	--module) modules+=("$2"); shift 2 ;;
	--out) out=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--udmabuf-mb) udmabuf_mb=$2; shift 2 ;;
	--dmesg) dmesg=1; shift ;;
	--append) append=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	-h|--help) usage 0 ;;
	--) shift; break ;;
	*) vm_log "unknown argument: $1"; usage ;;
	esac
done
[ -n "$kernel" ] || { vm_log "--kernel is required"; usage; }
[ $# -gt 0 ] || { vm_log "no COMMAND after --"; usage; }
command_line="$*"

case $kernel in
lts|newest|generic) rel=$(vm_kernel_release "$kernel") ;;
*) rel=$kernel ;;
esac
[ -n "$rel" ] || vm_die "kernel '$kernel' not in $VM_KERNELS_TXT"
kdir=$VM_KERNELS/$rel
[ -s "$kdir/vmlinuz" ] || vm_die "no kernel $rel in $VM_KERNELS: run sim/vm/prepare.sh"
[ -d "$builddir" ] && builddir=$(cd "$builddir" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/devmemtcp-vm.XXXXXX")
cleanup() {
	# interrupted (meson timeout, ^C): stop QEMU through its timeout(1)
	if [ -s "$work/qpid" ]; then
		kill -TERM "$(cat "$work/qpid")" 2>/dev/null && sleep 1
		kill -KILL "$(cat "$work/qpid")" 2>/dev/null
	fi
	true
	if [ $keep = 1 ]; then vm_log "work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# copy FILE (dereferenced) into ROOT at its host path, and, for ELF files,
# every library ldd names plus the loader
declare -A copied=()
copy_file() { # root path
	local root=$1 p=$2 dst
	[ -n "${copied[$root$p]:-}" ] && return 0
	copied[$root$p]=1
	dst=$root$(realpath -m "$(dirname "$p")")/$(basename "$p")
	mkdir -p "$(dirname "$dst")"
	cp -L --preserve=mode "$p" "$dst"
}
copy_elf_deps() { # root file
	local lib deps missing
	[ "$(head -c4 "$2" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ] || return 0
	deps=$(ldd "$2" 2>&1) || true
	# "libx.so.1 => not found", "version `GLIBC_2.38' not found": no library
	# to copy, and the guest could not run it
	missing=$(printf '%s\n' "$deps" | { grep 'not found' || true; } | sed 's/^[[:space:]]*//' | paste -sd ';' -)
	[ -z "$missing" ] ||
		vm_die "payload $2 cannot run in the guest: $missing: build it against this machine's libraries, or give the missing ones as payloads"
	for lib in $(printf '%s\n' "$deps" | awk '/=> \// { print $3 } /^[[:space:]]*\// { print $1 }'); do
		copy_file "$1" "$lib"
	done
}
copy_with_deps() { # root path
	local f
	if [ -d "$2" ]; then
		while IFS= read -r -d '' f; do
			copy_file "$1" "$f"
			copy_elf_deps "$1" "$f"
		done < <(find "$2" \( -name '*.p' -o -name meson-logs -o -name meson-private \) -prune -o \
			\( -type f -o -type l \) ! -name '*.o' ! -name '*.a' -print0)
	else
		copy_file "$1" "$2"
		copy_elf_deps "$1" "$2"
	fi
}

# base initramfs (cached): busybox, /init, ip + ethtool of this host and of trixie
base_key=$( {
	cat "$0" "$here/lib.sh" "$here/init"
	dpkg-query -W -f='${Package} ${Version}\n' busybox-static iproute2 ethtool libc6 2>/dev/null
	cat "$VM_ROOT/.devmemtcp-root" 2>/dev/null
	chroot "$VM_ROOT" dpkg-query -W -f='${Package} ${Version}\n' iproute2 ethtool libc6 2>/dev/null
} | sha256sum | cut -c1-16)
base=$VM_CACHE/initramfs/base-$base_key.cpio
if [ ! -s "$base" ]; then
	vm_lock
	if [ ! -s "$base" ]; then
		t0=$(date +%s%N)
		r=$work/base
		mkdir -p "$r"/{usr/bin,usr/sbin,usr/lib,usr/lib64,usr/local/sbin,proc,sys,dev,run,tmp,root,etc,out,devmemtcp}
		ln -s usr/bin "$r/bin"; ln -s usr/sbin "$r/sbin"; ln -s usr/lib "$r/lib"; ln -s usr/lib64 "$r/lib64"
		mkdir -p "$r/var"; ln -s ../run "$r/var/run"; ln -s ../tmp "$r/var/tmp"
		chmod 1777 "$r/tmp"
		# this host's ip/ethtool (bookworm) at their host paths
		for t in /usr/bin/ip /usr/sbin/ethtool; do
			[ -x "$t" ] && copy_with_deps "$r" "$t"
		done
		# dash as /bin/sh, and bash: Debian's static busybox prefers its applets
		# over PATH in its own shell, which would hide the real ip(8)
		copy_with_deps "$r" /usr/bin/dash
		copy_with_deps "$r" /usr/bin/bash
		ln -s dash "$r/usr/bin/sh"
		cp /bin/busybox "$r/usr/bin/busybox"
		for a in $(/bin/busybox --list-full); do
			a=${a#usr/}
			d=usr/${a%%/*}; [ "$a" = "${a#*/}" ] && d=usr/bin
			n=${a##*/}
			[ -e "$r/usr/bin/$n" ] || [ -e "$r/usr/sbin/$n" ] || ln -s /usr/bin/busybox "$r/$d/$n"
		done
		# trixie's newer ip/ethtool (ethtool >= 6.7 sets tcp-data-split), first in PATH
		tr=$r/opt/trixie
		for t in /usr/sbin/ip /usr/sbin/ethtool; do
			mkdir -p "$tr$(dirname "$t")"
			cp -L "$VM_ROOT$t" "$tr$t"
			for lib in $(chroot "$VM_ROOT" ldd "$t" | awk '/=> \// { print $3 } /^[[:space:]]*\// { print $1 }'); do
				rl=$(chroot "$VM_ROOT" realpath "$lib")
				mkdir -p "$tr/usr/lib/x86_64-linux-gnu"
				cp -L "$VM_ROOT$rl" "$tr/usr/lib/x86_64-linux-gnu/$(basename "$lib")"
			done
			n=$(basename "$t")
			cat >"$r/usr/local/sbin/$n" <<-EOF
			#!/bin/sh
			exec /opt/trixie/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --argv0 $n \\
			 --library-path /opt/trixie/usr/lib/x86_64-linux-gnu /opt/trixie$t "\$@"
			EOF
			chmod +x "$r/usr/local/sbin/$n"
		done
		printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/etc/passwd"
		printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
		printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$r/etc/hosts"
		: >"$r/etc/fstab"
		install -m 755 "$here/init" "$r/init"
		mkdir -p "$VM_CACHE/initramfs"
		(cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) >"$base.tmp"
		mv "$base.tmp" "$base"
		# older bases (other script versions); runs copy theirs at start
		find "$VM_CACHE/initramfs" -name 'base-*.cpio' ! -name "${base##*/}" -mmin +30 -delete 2>/dev/null || true
		rm -rf "$r"
		vm_log "base initramfs built in $((($(date +%s%N) - t0) / 1000000)) ms: $base"
	fi
	exec 9>&-
fi

# per-run part: modules of this kernel, devmemsim, payload, the command
r=$work/run
mkdir -p "$r/devmemtcp"
mroot=$r/usr/lib/modules/$rel # not lib/: the base has lib -> usr/lib
msrc=$kdir/lib/modules/$rel
mkdir -p "$mroot"
cp "$msrc"/modules.builtin "$msrc"/modules.builtin.modinfo "$msrc"/modules.order "$mroot/" 2>/dev/null || true
add_module() { # name -> copy it and its deps, uncompressed, from the kernel tree
	local path
	# builtin (tristate in modules.builtin; bool ones only show in .modinfo)
	grep -q "/${1//_/[-_]}\.ko" "$msrc/modules.builtin" && return 0
	tr '\0' '\n' <"$msrc/modules.builtin.modinfo" | grep -q "^${1//-/_}\." && return 0
	path=$(modinfo -b "$kdir" -k "$rel" -n "$1" 2>/dev/null) || return 1
	case $path in
	/*) ;;
	*) return 0 ;; # (builtin)
	esac
	local relpath=${path#"$msrc"/}
	local dst=$mroot/${relpath%.xz}
	dst=${dst%.zst}
	[ -e "$dst" ] && return 0
	mkdir -p "$(dirname "$dst")"
	case $path in
	*.xz) xz -dc "$path" >"$dst" ;;
	*.zst) zstd -qdc "$path" >"$dst" ;;
	*) cp "$path" "$dst" ;;
	esac
	local d
	for d in $(modinfo -F depends "$path" | tr ',' ' '); do add_module "$d"; done
}
for m in udmabuf "${modules[@]}"; do
	add_module "$m" || vm_log "warning: module $m not found for $rel"
done
simdir=$builddir/sim/$rel
if ls "$simdir"/*.ko >/dev/null 2>&1; then
	mkdir -p "$mroot/extra"
	cp "$simdir"/*.ko "$mroot/extra/"
	for k in "$simdir"/*.ko; do
		for d in $(modinfo -F depends "$k" | tr ',' ' '); do add_module "$d" || true; done
	done
elif [ $sim = 1 ]; then
	vm_die "no module in $simdir: run sim/vm/build-module.sh $builddir (or pass --no-sim)"
fi
depmod -b "$r/usr" "$rel"

for p in ${payloads[@]+"${payloads[@]}"}; do
	[ -e "$p" ] || vm_die "payload $p does not exist"
	copy_with_deps "$r" "$(realpath -s "$p")"
done

# with the IOMMU the simulated NICs hang off the PCI devices behind it
[ $iommu = 1 ] && sim_args="parent=pci $sim_args"
cwd=/
[ -d "$r$PWD" ] && cwd=$PWD
printf '%s\n' "$command_line" >"$r/devmemtcp/cmd.sh"
{
	printf 'VM_SIM=%s\n' "$sim"
	printf 'VM_SIM_ARGS=%q\n' "$sim_args"
	printf 'VM_CWD=%q\n' "$cwd"
	printf 'VM_DMESG=%s\n' "$dmesg"
	printf 'VM_OUT=%s\n' "$([ -n "$out" ] && echo 1 || echo 0)"
	printf 'VM_UDMABUF_MB=%s\n' "$udmabuf_mb"
	printf 'VM_KERNEL_LABEL=%q\n' "$kernel"
} >"$r/devmemtcp/env"
(cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) >"$work/run.cpio"
cat "$base" "$work/run.cpio" >"$work/initrd"

# QEMU ------------------------------------------------------------------------
# KVM when it can boot these kernels. /dev/kvm being there is not enough: under
# some nested hypervisors (e.g. a shadow-paging KVM such as PVM) the kernel's
# zstd decompressor hits an instruction KVM cannot emulate ("KVM internal
# error ... emulation failure") and the VM hangs. So probe once per host
# kernel + guest kernel, cache the verdict, and fall back to TCG.
probe_kvm() { # -> 0 if a KVM guest reaches /init
	local p=$work/probe pl=$work/probe.log pid i
	mkdir -p "$p"
	cp /bin/busybox "$p/busybox"
	printf '#!/busybox sh\n/busybox echo DEVMEMTCP-VM-PROBE-OK\n/busybox poweroff -f\n' >"$p/init"
	chmod +x "$p/init"
	(cd "$p" && printf '%s\n' init busybox | cpio --quiet -o -H newc -R 0:0) >"$work/probe.cpio"
	qemu-system-x86_64 -nic none -display none -serial "file:$pl" -monitor none -no-reboot \
		-enable-kvm -cpu host -m 512 -smp 1 -kernel "$kdir/vmlinuz" -initrd "$work/probe.cpio" \
		-append "console=ttyS0 panic=-1 quiet rdinit=/init" </dev/null >"$pl.qemu" 2>&1 &
	pid=$!
	for i in $(seq 1 150); do
		sleep 0.2
		if grep -aq DEVMEMTCP-VM-PROBE-OK "$pl" 2>/dev/null; then
			wait "$pid" 2>/dev/null; return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null || grep -aqi 'internal error\|emulation failure' "$pl.qemu"; then
			break
		fi
	done
	kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
	return 1
}
accel=${DEVMEMTCP_VM_ACCEL:-}
if [ -z "$accel" ]; then
	accel=tcg
	if [ -c /dev/kvm ] && (exec 3<>/dev/kvm) 2>/dev/null; then
		verdict=$VM_CACHE/accel/$(uname -r)--$rel
		if [ ! -s "$verdict" ]; then
			mkdir -p "$VM_CACHE/accel"
			if probe_kvm; then echo kvm >"$verdict"; else echo tcg >"$verdict"; fi
			vm_log "KVM probe for $rel on host $(uname -r): $(cat "$verdict")"
		fi
		accel=$(cat "$verdict")
	fi
fi
if [ "$accel" = kvm ]; then
	qaccel=(-enable-kvm -cpu host)
else
	qaccel=(-accel tcg,thread=single -cpu max)	# multi-threaded TCG crashed 7.3 early in boot (int3 in sched_clock_cpu)
fi
kargs="console=ttyS0 panic=-1 oops=panic quiet mitigations=off rdinit=/init udmabuf.size_limit_mb=$udmabuf_mb"
if [ "$hugepages" != 0 ]; then kargs="$kargs hugepagesz=2M hugepages=$hugepages"; fi
qmachine=()
if [ $iommu = 1 ]; then
	# the IOMMU first (QEMU wants it before the devices it translates for);
	# strict: an unmapped IOVA is gone at once, so a stale one faults
	qmachine=(-M q35 -device intel-iommu -device edu -device edu)
	kargs="$kargs intel_iommu=on iommu.passthrough=0 iommu.strict=1"
fi
qemu=(qemu-system-x86_64 -nic none -nographic -serial stdio -monitor none -no-reboot
	"${qaccel[@]}" ${qmachine[@]+"${qmachine[@]}"} -m "$mem" -smp "$smp"
	-kernel "$kdir/vmlinuz" -initrd "$work/initrd"
	-append "$kargs $append")
# qboot: a minimal firmware that boots -kernel faster and quieter than SeaBIOS
qboot=/usr/share/qemu/qboot.rom
[ -r "$qboot" ] && [ "${DEVMEMTCP_VM_SEABIOS:-0}" != 1 ] && qemu+=(-bios "$qboot")
if [ -n "$out" ]; then
	truncate -s 1G "$work/out.img"
	qemu+=(-drive "file=$work/out.img,format=raw,if=virtio,cache=unsafe")
fi

log=$work/console.log
vm_log "booting $rel ($kernel, $accel): $command_line"
t0=$(date +%s%N)
set +e
{
	timeout -k 5 "$timeout" "${qemu[@]}" </dev/null 2>&1 &
	echo $! >"$work/qpid"
	wait $!
	echo $? >"$work/qrc"
} | tee "$log" | sed -u 's/\r$//'
rm -f "$work/qpid"
qrc=$(cat "$work/qrc" 2>/dev/null || echo 1)
set -e
secs=$(( ($(date +%s%N) - t0) / 1000000 ))
[ -n "${DEVMEMTCP_VM_LOG:-}" ] && cp "$log" "$DEVMEMTCP_VM_LOG"
status=$(tr -d '\r' <"$log" | sed -n 's/^DEVMEMTCP-VM-EXIT=\([0-9][0-9]*\)$/\1/p' | tail -n1)
if [ -n "$out" ]; then
	mkdir -p "$out"
	tar -xf "$work/out.img" -C "$out" 2>/dev/null || vm_log "warning: nothing came back for --out"
fi
if [ -z "$status" ]; then
	if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
		vm_log "timeout after ${timeout}s on $rel: guest killed"
	else
		vm_log "no exit marker from the guest on $rel (qemu status $qrc): crash or panic?"
	fi
	exit 1
fi
vm_log "$rel ($kernel): exit $status after $((secs / 1000)).$(printf %03d $((secs % 1000))) s"
exit "$status"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Quick QEMU smoke test of devmemsim, independent of sim/vm.
#
#   qemu-smoke.sh ROOT VMLINUZ KO GUEST_SCRIPT [OUTDIR]
#
# ROOT: a trixie tree (binaries ethtool, ip and their libraries are taken
# from it); VMLINUZ: the kernel; KO: devmemsim.ko built for it;
# GUEST_SCRIPT: shell script run as root inside the guest (busybox sh) with
# /devmemsim.ko and /devmem_smoke (built from devmem_smoke.c with ROOT's
# gcc, static) available.  Its exit status is printed as "GUEST-RC=<n>"
# and becomes this script's exit status.  No network leaves the guest
# (-nic none).
set -euo pipefail

ROOT=$1 KERNEL=$2 KO=$3 SCRIPT=$4
OUT=${5:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
BUSYBOX=${BUSYBOX:-$(command -v busybox)}

IR=$OUT/initramfs
rm -rf "$IR"
mkdir -p "$IR"/{bin,sbin,usr/bin,usr/sbin,lib64,lib/x86_64-linux-gnu,proc,sys,dev,run,tmp,etc,var/run}
cp "$BUSYBOX" "$IR/bin/busybox"
cp "$KO" "$IR/devmemsim.ko"
cp "$SCRIPT" "$IR/guest.sh"

# static test binary, built in ROOT
mkdir -p "$ROOT/tmp/dsim-smoke"
cp "$HERE/devmem_smoke.c" "$ROOT/tmp/dsim-smoke/"
chroot "$ROOT" ${CC:-gcc-14} -O2 -Wall -static -o /tmp/dsim-smoke/devmem_smoke /tmp/dsim-smoke/devmem_smoke.c
cp "$ROOT/tmp/dsim-smoke/devmem_smoke" "$IR/devmem_smoke"

for b in /usr/sbin/ethtool /usr/bin/ip; do
	cp "$ROOT$b" "$IR$b"
	for l in $(chroot "$ROOT" ldd "$b" | awk '/=>/ {print $3} /ld-linux/ {print $1}'); do
		mkdir -p "$IR$(dirname "$l")"
		cp -L "$ROOT$l" "$IR$l"
	done
done

cat > "$IR/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs run /run
mount -t tmpfs tmp /tmp
mount -t debugfs debugfs /sys/kernel/debug
echo "=== guest: $(uname -r)"
sh -e /guest.sh
echo "GUEST-RC=$?"
poweroff -f
EOF
chmod +x "$IR/init"
(cd "$IR" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT/initramfs.gz"

# KVM cannot boot these kernels under some nested hypervisors ("emulation
# failure" in the decompressor): TCG by default, ACCEL=kvm to try KVM.
if [ "${ACCEL:-tcg}" = kvm ]; then accel=(-enable-kvm -cpu host); else accel=(-accel tcg,thread=single -cpu max); fi
timeout ${TIMEOUT:-600} qemu-system-x86_64 "${accel[@]}" -smp 2 -m 2048 \
	-nic none -nographic -no-reboot \
	-kernel "$KERNEL" -initrd "$OUT/initramfs.gz" \
	-append "console=ttyS0 panic=-1 oops=panic quiet loglevel=4" | tee "$OUT/console.log"
rc=$(sed -n 's/.*GUEST-RC=\([0-9]*\).*/\1/p' "$OUT/console.log" | tail -1)
exit "${rc:-99}"

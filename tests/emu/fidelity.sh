#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The emulated NIC's fidelity, checked rather than assumed: the same
# program (tests/vm/test-e2e: the refused bind with header split off, the
# transfer with its fragment layout report and tokens, the refused bind on
# a busy queue, page starvation) in each RX buffer layout, once on the
# real kernel with the simulated NIC in the VM and once on the emulated
# NIC here; tests/emu/fidelity-table.py puts the library-visible results
# side by side.
#
#   sh tests/emu/fidelity.sh vm BUILDDIR OUTDIR [KERNEL]   (needs the VM cache)
#   sh tests/emu/fidelity.sh emu BUILDDIR OUTDIR
#   python3 tests/emu/fidelity-table.py OUTDIR
# Each layout's output goes to OUTDIR/{vm,emu}-LAYOUT.log; the emulation
# also runs the mixed layout with TSO frames of 17 segments on its wire
# (emu-mixed-tso17.log), the size the VM's slow sender makes.
set -eu
where=$1 build=$(cd "$2" && pwd) out=$3 kernel=${4:-newest}
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
tests="hds-off transfer busy starve"
opts="--bytes 16M --buf 8M --flow-bytes 1M"
layouts="default buf2k mixed page16k"
# the emulated wire with the VM's TSO frames too (tso17, see fidelity-table.py)
[ "$where" = emu ] && layouts="$layouts mixed-tso17"
for layout in $layouts; do
	extra= sim= vm= tso=
	case $layout in
	buf2k) sim="rx_buf_size=2048" emu="--rx-buf-size 2048" ;;
	mixed) sim="rx_pack=1 rx_mix=1" emu="--pack --mix" ;;
	mixed-tso17) emu="--pack --mix" tso=17 ;;
	page16k) sim="rx_pack=1" emu="--pack" extra="--rx-page-size 16384" vm="--hugepages 48" ;;
	*) emu= ;;
	esac
	log=$out/$where-$layout.log
	echo "fidelity: $where $layout -> $log"
	if [ "$where" = vm ]; then
		# shellcheck disable=SC2086
		"$src/tests/vm/run-vm.sh" "$kernel" "$build" ${sim:+--sim-args "$sim"} $vm \
			"$build/tests/vm/test-e2e $opts $extra $tests" >"$log" 2>&1 || true
	else
		if [ "$layout" = page16k ]; then
			# the emu suite's reservation of 2 MiB pages, for the test's
			# hugetlb udmabuf
			hp=/proc/sys/vm/nr_hugepages
			had=$(cat $hp)
			echo $((had + 8)) >$hp
		fi
		cat >"$out/emu-run.sh" <<-EOF
			EMU_LAYOUT="$emu"
			. "$src/tests/emu/emu-env.sh"
			[ -n "$tso" ] && "\$emuctl" tso dsim1 $tso --netns dmtB
			# shellcheck disable=SC2086
			emu "\$EMU_BUILD/tests/vm/test-e2e" $opts $extra $tests
			emu_done
		EOF
		EMU_BUILD=$build sh "$out/emu-run.sh" >"$log" 2>&1 || true
		[ "$layout" = page16k ] && echo "$had" >$hp
		rm -f "$out/emu-run.sh"
	fi
	grep -E "^(PASS|FAIL) " "$log" | tr '\n' ' '
	echo
done

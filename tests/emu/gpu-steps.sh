#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The emulated-NIC part of tests/emu/gpu-run.sh (items 1, 2 and 4 of its
# report), in the emulator's test environment (emu-env.sh): per RX buffer
# layout the data loader's receiver and sender with samples gathered into
# GPU memory and checked, the NIC as found and every token back after each,
# then bench/emu-nic; bench/emu-nic again with the emulator's other ways of
# copying (DEVMEMTCP_EMU_COPY=runs, batch) and with a plain socket (the
# bound); then the Python loader and DLPack views on CUDA.
# Writes RESULT lines to $EMU_RESULTS and each step's log to $EMU_LOGS.
#   EMU_BUILD=B EMU_PYTHONPATH=P EMU_RESULTS=F EMU_LOGS=D sh tests/emu/gpu-steps.sh PYTHON SAMPLES BENCH_BYTES [fake]
set -eu
py=$1 samples=$2 bench_bytes=$3 fake=${4:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/tests/emu/emu-env.sh"
B=$EMU_BUILD
t0=$(date +%s)
say() { echo "[gpu-steps +$(($(date +%s) - t0))s] $*" >&2; }
if [ -n "$fake" ]; then
	# no GPU: the fake driver (host memory) for the program's own calls
	mkdir -p "$EMU_DIR/cuda"
	ln -s "$B/tests/lib/fakecuda/libfakecuda.so" "$EMU_DIR/cuda/libcuda.so.1"
	export LD_LIBRARY_PATH=$EMU_DIR/cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export DEVMEMTCP_LIBCUDA=$B/tests/emu/libdevmemtcp-emucuda.so
initial=$(nic_state)
port=5800
# set_layout L: dsim1's RX buffer layout L; $page: the option it needs
set_layout() {
	page=
	case $1 in
	default) "$emuctl" layout dsim1 --netns dmtB ;;
	buf2k) "$emuctl" layout dsim1 --netns dmtB --rx-buf-size 2048 ;;
	mixed) "$emuctl" layout dsim1 --netns dmtB --pack --mix ;;
	page16k) "$emuctl" layout dsim1 --netns dmtB --pack; page="--rx-page-size 16384" ;;
	esac
}
# copy_result LAYOUT WAY LOG: a RESULT copy line from a bench log
copy_result() {
	bl=$(grep '^EMU-NIC ' "$3" || echo "EMU-NIC label=$1 gbps=0")
	echo "RESULT copy layout=$1 way=$2 ok=$4 $(echo "${bl#EMU-NIC }" | sed 's/label=[^ ]* //')" >>"$EMU_RESULTS"
}
for layout in default buf2k mixed page16k; do
	set_layout $layout
	before=$(nic_state)
	port=$((port + 10))
	log=$EMU_LOGS/loader-$layout.log
	say "$layout: data loader, $samples samples gathered into GPU memory"
	s0=$(date +%s.%N)
	# shellcheck disable=SC2086
	rx_bg "$B/tests/gpu/dataloader" -l $port -i dsim1 $page >"$log" 2>&1 &
	pid=$!
	ok=1
	wait_for "$log" binding || ok=0
	if [ $ok = 1 ]; then
		tx "$B/tests/gpu/dataloader" -s 10.77.0.2 -p $port -n "$samples" >>"$log" 2>&1 || ok=0
	fi
	wait $pid || ok=0
	s1=$(date +%s.%N)
	line=$(grep "received (GPU gather)" "$log" || echo "received (GPU gather): 0 samples, 0 bytes, 1 bad")
	bytes=$(echo "$line" | sed 's/.*samples, \([0-9]*\) bytes.*/\1/')
	bad=$(echo "$line" | sed 's/.* \([0-9]*\) bad.*/\1/')
	grep -q "received (GPU gather): $samples samples, .* 0 bad" "$log" || ok=0
	held=$("$emuctl" stats | sed -n 's/^pages_held=//p')
	"$emuctl" check >>"$log" 2>&1 || ok=0
	same=1
	[ "$(nic_state)" = "$before" ] || { same=0; ok=0; nic_state >>"$log"; }
	say "$layout: $line; pages held after: $held; NIC as found: $same"
	say "$layout: bench/emu-nic, $bench_bytes bytes"
	# shellcheck disable=SC2086
	rx "$B/bench/emu-nic" --bytes "$bench_bytes" --port $((port + 5)) --label "$layout" $page \
		>"$EMU_LOGS/bench-$layout.log" 2>&1 || ok=0
	bl=$(grep '^EMU-NIC ' "$EMU_LOGS/bench-$layout.log" || echo "EMU-NIC label=$layout gbps=0")
	gbps=$(echo "$bl" | sed -n 's/.* gbps=\([0-9.]*\).*/\1/p')
	"$emuctl" check >>"$EMU_LOGS/bench-$layout.log" 2>&1 || ok=0
	say "$layout: ${gbps:-?} GB/s into GPU memory"
	bbad=$(echo "$bl" | sed -n 's/.* bad=\([0-9]*\).*/\1/p')
	copy_result $layout scatter "$EMU_LOGS/bench-$layout.log" $ok
	echo "RESULT layout=$layout ok=$ok bytes=$bytes bad=$((bad + ${bbad:-1})) tokens_outstanding=$held nic_as_found=$same loader_s=$(awk "BEGIN { printf \"%.1f\", $s1 - $s0 }") gbps=${gbps:-0} $(echo "${bl#EMU-NIC }" | sed 's/\([a-z_]*\)=/bench_\1=/g')" >>"$EMU_RESULTS"
done

# the other ways the emulator copies into GPU memory (DEVMEMTCP_EMU_COPY;
# scatter, the default, above), then the bound of any NIC emulated by
# copies: the same sender through a plain socket into pinned memory and
# one host-to-device copy per receive, no emulation
for layout in default buf2k mixed page16k; do
	set_layout $layout
	for way in runs batch; do
		port=$((port + 1))
		log=$EMU_LOGS/bench-$layout-$way.log
		ok=1
		# shellcheck disable=SC2086
		rx env DEVMEMTCP_EMU_COPY=$way "$B/bench/emu-nic" --bytes "$bench_bytes" --port $port \
			--label "$layout-$way" $page >"$log" 2>&1 || ok=0
		"$emuctl" check >>"$log" 2>&1 || ok=0
		copy_result $layout $way "$log" $ok
		say "$layout, $way: $(sed -n 's/.* gbps=\([0-9.]*\).*/\1/p' "$log") GB/s into GPU memory"
	done
done
"$emuctl" layout dsim1 --netns dmtB
ok=1
rx "$B/bench/emu-nic" --plain --bytes "$bench_bytes" --port $((port + 1)) --label plain \
	>"$EMU_LOGS/bench-plain.log" 2>&1 || ok=0
bl=$(grep '^EMU-NIC-PLAIN ' "$EMU_LOGS/bench-plain.log" || echo "EMU-NIC-PLAIN label=plain gbps=0")
echo "RESULT plain ok=$ok $(echo "${bl#EMU-NIC-PLAIN }" | sed 's/label=[^ ]* //')" >>"$EMU_RESULTS"
say "plain socket and one copy per receive, no emulation: $(echo "$bl" | sed -n 's/.* gbps=\([0-9.]*\).*/\1/p') GB/s"

# the Python loader and views on CUDA (the fake driver has no PyTorch:
# PyTorch on the CPU; without PyTorch at all, the loader is skipped)
dev=
[ -z "$fake" ] && dev=cuda
log=$EMU_LOGS/torch-loader.log
n=$((samples / 8 < 400 ? samples / 8 : 400))
export PYTHONPATH=$EMU_PYTHONPATH PYTHONDONTWRITEBYTECODE=1
if [ -n "$fake" ] && ! "$py" -c 'import torch' >"$log" 2>&1; then
	say "Python loader: skipped: no PyTorch in $py"
	echo "RESULT torch ok=skip skipped: no PyTorch in $py" >>"$EMU_RESULTS"
else
	say "Python loader: torch_loader.py, $n samples into ${dev:-CPU} tensors"
	# shellcheck disable=SC2046
	rx_bg "$py" "$src/examples/python/torch_loader.py" -l 5901 -i dsim1 -n $n $([ -z "$dev" ] && echo --cpu) >"$log" 2>&1 &
	pid=$!
	ok=1
	wait_for "$log" binding || ok=0
	[ $ok = 1 ] && { tx "$py" "$src/examples/python/sender.py" samples 10.77.0.2 5901 -n $n >>"$log" 2>&1 || ok=0; }
	wait $pid || ok=0
	grep -q "received (.*): $n samples, .* 0 bad" "$log" || ok=0
	"$emuctl" check >>"$log" 2>&1 || ok=0
	say "Python loader: $(grep 'received (' "$log" || echo failed)"
	echo "RESULT torch ok=$ok $(grep 'received (' "$log" | tr -s ' ' || true)" >>"$EMU_RESULTS"
fi
log=$EMU_LOGS/views.log
if [ -n "$fake" ] && ! "$py" -c 'import numpy' >"$log" 2>&1; then
	say "views: skipped: no numpy in $py"
	echo "RESULT views ok=skip skipped: no numpy in $py" >>"$EMU_RESULTS"
else
	say "DLPack views of single fragments (${dev:-host})"
	rx_bg "$py" "$src/tests/emu/views.py" -l 5911 -i dsim1 --bytes 16777216 ${dev:+--cuda} >"$log" 2>&1 &
	pid=$!
	ok=1
	wait_for "$log" binding || ok=0
	[ $ok = 1 ] && { tx "$py" "$src/examples/python/sender.py" stream 10.77.0.2 5911 16M >>"$log" 2>&1 || ok=0; }
	wait $pid || ok=0
	"$emuctl" check >>"$log" 2>&1 || ok=0
	say "views: $(grep '^views:' "$log" || echo failed)"
	echo "RESULT views ok=$ok $(grep '^views:' "$log" || true)" >>"$EMU_RESULTS"
fi
[ "$(nic_state)" = "$initial" ] || echo "RESULT nic ok=0 the NIC was not restored" >>"$EMU_RESULTS"
"$emuctl" stats >"$EMU_LOGS/emu-stats.txt"
emu_done

#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# On a machine with two NVIDIA GPUs, PyTorch and NCCL: build the plugin,
# run torch.distributed all_reduce with 2 ranks through it and through
# NCCL's own socket transport (P2P and SHM off, so every byte crosses the
# network transport), check the results and NCCL's log, and write the bus
# bandwidth table as markdown.
#
# usage: nccl/tests/gpu-allreduce.sh [RESULT.md]
#   RESULT.md   default bench/results/nccl-allreduce-h200.md; with $OUT set
#               (the device runner), the table and the logs go there too
# Env: PYTHON (default /opt/torch/.venv/bin/python), BUILD (build directory,
#      default build-nccl-gpu), SIZES (bytes, comma-separated), ROUNDS (2),
#      SIZES_CUDA (sizes of the CUDA-pointer run), BUILD_ONLY=1 (stop after
#      building).
# libmnl: the system's if pkg-config knows it, else Debian's libmnl0 and
# libmnl-dev packages from .gpu-deps/ (scripts/gpu-deps.sh), unpacked here
# by scripts/gpu-env.sh.
# Exit: 0 when every run passed its checks, 1 otherwise.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-/opt/torch/.venv/bin/python}
result=${1:-$src/bench/results/nccl-allreduce-h200.md}
build=${BUILD:-$src/build-nccl-gpu}
sizes=${SIZES:-1048576,4194304,16777216,67108864,268435456}
rounds=${ROUNDS:-2}
work=$(mktemp -d "${TMPDIR:-/tmp}/nccl-allreduce.XXXXXX")
log() { echo "[gpu-allreduce] $*" >&2; }
die() { log "$*"; exit 1; }

# ---- libmnl without the system's packages --------------------------------
if ! pkg-config --exists libmnl 2>/dev/null; then
	. "$src/scripts/gpu-env.sh"
	gpu_deps "$src" "$work/deps" || die "unpacking .gpu-deps failed"
	pkg-config --exists libmnl ||
		die "no libmnl here and none in .gpu-deps: run scripts/gpu-deps.sh on the build machine and carry .gpu-deps"
fi

# ---- build ------------------------------------------------------------------
log "building the plugin in $build"
rm -rf "$build"
meson setup "$build" "$src" -Dtests=disabled -Dcuda=disabled -Ddrm=disabled \
	-Dvm_tests=false >"$work/meson-setup.log" 2>&1 ||
	{ cat "$work/meson-setup.log"; die "meson setup failed"; }
ninja -C "$build" nccl/libnccl-net-devmemtcp.so >"$work/ninja.log" 2>&1 ||
	{ cat "$work/ninja.log"; die "build failed"; }
plugin=$build/nccl/libnccl-net-devmemtcp.so
if ldd "$plugin" | grep -q 'not found'; then
	ldd "$plugin"
	die "the plugin's libraries are not all found"
fi
log "built $plugin"
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0

# ---- runs ---------------------------------------------------------------------
declare -A desc=(
	[plugin]="libnccl-net-devmemtcp.so (NCCL_NET=DevmemTCP, NCCL_DEVMEMTCP_IFNAME==lo), plain TCP path, host buffers"
	[socket]="NCCL's built-in socket transport (NCCL_NET=Socket, NCCL_NET_PLUGIN=none, NCCL_SOCKET_IFNAME=lo)"
	[plugin-cuda]="the plugin with NCCL_DEVMEMTCP_CUDA_PTR=1 and NCCL_NET_GDR_LEVEL=SYS: NCCL hands it GPU buffers (dma-buf registrations), which it copies through host memory"
)
cfg_env() {
	case $1 in
	plugin) echo "NCCL_NET_PLUGIN=$plugin NCCL_NET=DevmemTCP NCCL_DEVMEMTCP_IFNAME==lo" ;;
	socket) echo "NCCL_NET_PLUGIN=none NCCL_NET=Socket" ;;
	plugin-cuda) echo "NCCL_NET_PLUGIN=$plugin NCCL_NET=DevmemTCP NCCL_DEVMEMTCP_IFNAME==lo NCCL_DEVMEMTCP_CUDA_PTR=1 NCCL_NET_GDR_LEVEL=SYS" ;;
	esac
}

# What NCCL's log must show for a configuration; prints the lines kept as
# evidence, returns the reasons it failed on fd 3.
check_log() { # config logs...
	local cfg=$1 net
	shift
	cat "$@" >"$work/all.log" 2>/dev/null || true
	grep -h -E 'NET/Plugin|Using network|NET/DevmemTCP|via NET/' "$work/all.log" |
		sed 's/^[^ ]* //' | sort -u | head -40
	case $cfg in
	socket) net=Socket ;;
	*) net=DevmemTCP
	   grep -q "Loaded net plugin DevmemTCP" "$work/all.log" ||
		echo "NCCL did not load the plugin" >&3
	   grep -q "NET/DevmemTCP: send comm .*plain TCP" "$work/all.log" ||
		echo "the plugin did not log the path of its connections" >&3 ;;
	esac
	grep -q "Using network $net" "$work/all.log" ||
		echo "NCCL did not say 'Using network $net'" >&3
	grep -q "via NET/$net/" "$work/all.log" ||
		echo "no channel went 'via NET/$net'" >&3
	# NCCL decides whether to hand GPU buffers to the network; say so
	# when it did not (not a failure of the plugin)
	if [ "$cfg" = plugin-cuda ] && ! grep -q "via NET/$net/[0-9]*/GDRDMA" "$work/all.log"; then
		echo "note: no channel went via NET/$net/*/GDRDMA: NCCL kept host buffers, the plugin's CUDA path was not exercised"
	fi
}

run_one() { # config round [sizes] [seconds]
	local cfg=$1 rnd=$2 tag=$1-$2 status=ok sz=${3:-$sizes} limit=${4:-300}
	local -a why=()
	log "run $tag (sizes $sz, at most $limit s)"
	env $(cfg_env "$cfg") NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
		NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
		NCCL_DEBUG_FILE="$work/$tag.%h.%p.nccl.log" \
		timeout "$limit" "$py" -m torch.distributed.run --standalone --nproc_per_node 2 \
		"$src/nccl/tests/allreduce.py" run "$work/$tag.json" "$sz" \
		>"$work/$tag.out" 2>&1 || { status=failed; why+=("torchrun exited with an error (see $tag.out)"); }
	mapfile -t more < <(check_log "$cfg" "$work/$tag".*.nccl.log 3>&1 >"$work/$tag.evidence")
	why+=("${more[@]}")
	# keep the evidence of every run, also when a later one hangs
	if [ -n "${OUT:-}" ]; then
		mkdir -p "$OUT/logs"
		cp "$work/$tag".* "$OUT/logs/" 2>/dev/null || true
	fi
	"$py" "$src/nccl/tests/allreduce.py" annotate "$work/$tag.json" "$cfg" "$rnd" \
		"$status" "$work/$tag.evidence" "${why[@]}" || {
		log "run $tag FAILED: ${why[*]:-wrong results}"
		tail -20 "$work/$tag.out" >&2
		return 1
	}
}

fail=0
for ((r = 1; r <= rounds; r++)); do
	run_one plugin "$r" || fail=1
	run_one socket "$r" || fail=1
done
# the CUDA-pointer configuration copies through host memory: smaller sizes
run_one plugin-cuda 1 "${SIZES_CUDA:-1048576,16777216}" 150 || fail=1

# ---- report -------------------------------------------------------------------
configs_json=$(printf '"%s": "%s",' plugin "${desc[plugin]}" socket "${desc[socket]}" \
	plugin-cuda "${desc[plugin-cuda]}")
cat >"$work/context.json" <<EOF
{"date": "$(date -u '+%Y-%m-%d %H:%M UTC')", "host": "$(hostname)", "rounds": $rounds,
 "configs": {${configs_json%,}}}
EOF
mkdir -p "$(dirname "$result")"
"$py" "$src/nccl/tests/allreduce.py" report "$result" "$work/context.json" "$work"/*-[0-9].json
cat "$result"
if [ -n "${OUT:-}" ]; then
	cp "$result" "$OUT/"
	mkdir -p "$OUT/logs"
	cp "$work"/*.out "$work"/*.json "$work"/*.nccl.log "$OUT/logs/" 2>/dev/null || true
fi
log "work directory: $work"
exit $fail

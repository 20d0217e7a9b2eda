#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Every test suite of libdevmemtcp, from a fresh clone on a fresh machine
# (as root): dependencies, a normal build with the unit, host, emu, vm and gpu
# suites, an ASan/UBSan build with unit and host (and the NCCL plugin over
# the emulated NIC), the Python package's own test build (python/, the
# library bundled) with its suites, valgrind over unit and
# host, the libFuzzer harnesses for a fixed budget, the multi-threaded
# tests under ThreadSanitizer, a production build checked for test hooks
# with the tests that need none (the ABI against its baseline), the Python
# wheel built from the sdist and the Debian packages with lintian
# (scripts/check-wheel.sh, scripts/check-debs.sh), and the receive hot-path
# benchmark.  Ends with one line
# "N passed, N failed, N skipped".
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
sh scripts/deps.sh || exit 1
B=${BUILD:-build-test}
S=${BUILD_SAN:-build-san}
P=${BUILD_PROD:-build-prod}
F=${BUILD_FUZZ:-build-fuzz}
T=${BUILD_TSAN:-build-tsan}
Y=${BUILD_PYTHON:-build-python}
status=0
# this run's test logs (a step that does not run leaves none to count)
logs=$(mktemp -d "${TMPDIR:-/tmp}/devmemtcp-testlogs.XXXXXX") || exit 1
trap 'rm -rf "$logs"' EXIT
t_start=$(date +%s)
# each step says when it starts, in seconds since the run began
step() { echo; echo "=== [$(($(date +%s) - t_start)) s] $*"; }

step "build ($B)"
[ -d "$B" ] || meson setup "$B" -Dtest_hooks=true >/dev/null || exit 1
ninja -C "$B" || exit 1

step "unit, host, emu, vm and gpu suites"
meson test -C "$B" --print-errorlogs --suite unit --suite host --suite nccl --suite python --suite emu --suite vm --suite gpu || status=1
cp "$B/meson-logs/testlog.json" "$logs/main.json" 2>/dev/null

step "ASan/UBSan build ($S): unit and host suites, the Python binding's races"
[ -d "$S" ] || meson setup "$S" --native-file build-dev.ini -Dcuda=disabled >/dev/null || exit 1
ninja -C "$S" || exit 1
meson test -C "$S" --print-errorlogs --suite unit --suite host --suite nccl --suite races || status=1
cp "$S/meson-logs/testlog.json" "$logs/san.json" 2>/dev/null
# the NCCL plugin over the emulated NIC, with a library without gather kernels
meson test -C "$S" --print-errorlogs --logbase testlog-emu emu-nccl || status=1
cp "$S/meson-logs/testlog-emu.json" "$logs/san-emu.json" 2>/dev/null

step "the Python package's own test build ($Y: python/ with the library bundled statically, as python/tests/gpu-run.sh builds it on the GPU machine)"
[ -d "$Y" ] || meson setup "$Y" python -Dtest_hooks=true >/dev/null || exit 1
ninja -C "$Y" || exit 1
meson test -C "$Y" --print-errorlogs || status=1
cp "$Y/meson-logs/testlog.json" "$logs/python-own.json" 2>/dev/null

step "valgrind: unit and host suites"
meson test -C "$B" --print-errorlogs --suite unit --suite host \
	--no-suite gpu --wrap="$top/tests/valgrind-wrap.sh" \
	--timeout-multiplier 5 || status=1
cp "$B/meson-logs/testlog-valgrind-wrap.sh.json" "$logs/valgrind.json" 2>/dev/null

step "fuzzing ($F): every harness for 100k executions or 30 s, two at a time"
[ -d "$F" ] || meson setup "$F" --native-file build-fuzz.ini >/dev/null || exit 1
ninja -C "$F" || exit 1
t0=$(date +%s)
meson test -C "$F" --print-errorlogs --suite fuzz --num-processes 2 || status=1
# one line per harness: executions, exec/s, edges, features
grep '^fuzz-' "$F/meson-logs/testlog.txt"
echo "fuzz step: $(($(date +%s) - t0)) s"
cp "$F/meson-logs/testlog.json" "$logs/fuzz.json" 2>/dev/null

step "ThreadSanitizer ($T): the multi-threaded tests (suite tsan)"
[ -d "$T" ] || meson setup "$T" --native-file build-tsan.ini >/dev/null || exit 1
ninja -C "$T" || exit 1
t0=$(date +%s)
meson test -C "$T" --print-errorlogs --suite tsan || status=1
echo "tsan step: $(($(date +%s) - t0)) s"
cp "$T/meson-logs/testlog.json" "$logs/tsan.json" 2>/dev/null

step "production build ($P): no test hooks, environment read with secure_getenv; its unit suite (the ABI)"
[ -d "$P" ] || meson setup "$P" -Dcuda=disabled >/dev/null || exit 1
ninja -C "$P" || exit 1
if sh tests/check-production.sh "$P"; then r=OK; else r=FAIL; status=1; fi
echo "{\"name\": \"production\", \"result\": \"$r\"}" >"$logs/production.json"
meson test -C "$P" --print-errorlogs --suite unit || status=1
cp "$P/meson-logs/testlog.json" "$logs/prod.json" 2>/dev/null

step "packages: the wheel from the sdist, the Debian packages and lintian"
: >"$logs/packages.json"
for s in wheel debs; do
	t0=$(date +%s)
	if sh "scripts/check-$s.sh"; then r=OK; else
		case $? in 77) r=SKIP ;; *) r=FAIL; status=1 ;; esac
	fi
	echo "$s step: $(($(date +%s) - t0)) s"
	echo "{\"name\": \"package-$s\", \"result\": \"$r\"}" >>"$logs/packages.json"
done

step "benchmark: receive hot path (ratios against one DONTNEED per fragment and unmerged 128-token batches)"
"$B/bench/rx-hotpath" --frags 1048576 || status=1

python3 - "$logs/main.json" "$logs/san.json" "$logs/san-emu.json" "$logs/valgrind.json" \
	"$logs/fuzz.json" "$logs/tsan.json" "$logs/production.json" "$logs/prod.json" "$logs/packages.json" \
	"$logs/python-own.json" <<'PY'
import json, sys
p = f = s = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        r = json.loads(line).get("result")
        if r == "OK": p += 1
        elif r == "SKIP": s += 1
        elif r in ("EXPECTEDFAIL",): p += 1
        else: f += 1
print()
print("%d passed, %d failed, %d skipped" % (p, f, s))
PY
echo "total: $(($(date +%s) - t_start)) s"
exit $status

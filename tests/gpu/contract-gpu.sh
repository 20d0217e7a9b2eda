#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# On a machine with an NVIDIA GPU: the checks of the library's contract
# that need one.  The gpu suite (devmemtcp_gpu_release_after through a
# receive handle on a loopback TCP pair, CUDA buffers), the unit suite
# (thread-safe release, options, messages) and a static link of a program
# that makes a real CUDA buffer through libdevmemtcp.a.
# usage: tests/gpu/contract-gpu.sh [BUILDDIR]   (from the source tree)
set -eu
b=${1:-build-gpu}
[ -d "$b" ] || meson setup "$b" -Dtest_hooks=true
ninja -C "$b"
status=0
meson test -C "$b" --print-errorlogs --suite gpu --suite unit || status=1
sh tests/check-static.sh . "$b" gpu || status=1
exit $status

#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# The main job, inside the guest: dsim0 (namespace dmtA) sends 64 MiB of the
# test pattern over plain TCP to dsim1 (namespace dmtB), where
# 'devmemtcp recv --setup' prepares the simulated NIC, binds a udmabuf,
# receives with devmem TCP, validates every byte and reports.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tool=$(cd "$here/../../tools" && pwd)/devmemtcp
bytes=${MAIN_JOB_BYTES:-64M}
"$here/vm-harness" up >/dev/null || exit 1
echo "== devmemtcp main job: $(uname -r), simulated NIC dsim0 -> dsim1, $bytes"
ip netns exec dmtB "$tool" recv -i dsim1 --setup -p 5201 --validate --expect "$bytes" -b 32M &
recv=$!
ip netns exec dmtA "$here/vm-sender" 10.77.0.2 5201 "$bytes" || { kill $recv; exit 1; }
wait $recv
status=$?
echo "== NIC after the job (restored by devmemtcp_nic_close):"
ip netns exec dmtB "$tool" probe dsim1 | sed -n '1,12p'
exit $status

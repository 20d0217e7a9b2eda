#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# One entry for everything the VM suite needs (idempotent, cached):
#   prepare.sh (host tools, trixie tree, kernels) + build-module.sh (devmemsim
#   for each kernel into <builddir>/sim/<uname-r>/).
# Usage: all.sh [builddir]     (default <repo>/build)
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/prepare.sh"
"$here/build-module.sh" "$@"

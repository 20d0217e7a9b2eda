#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# meson install's script in a build with test hooks (meson.build): its
# targets install nothing, and this says why.
echo "meson install: this build has test hooks (-Dtest_hooks=true: fault injection and test-only knobs), which an installed library must not have, so it installs nothing; install from a build directory configured without them (meson setup build, as the README says for packagers)" >&2
exit 1

# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Sourced by test scripts: need_tool PROGRAM PACKAGE.  A missing program is
# a skip (exit 77) saying which and where it comes from on a developer's
# machine, and a failure under CI=true, where scripts/deps.sh installs it
# (a skip there would hide a hole).
need_tool() {
	command -v "$1" >/dev/null 2>&1 && return 0
	if [ "${CI:-}" = true ]; then
		echo "${0##*/}: $1 not found (Debian: apt install $2); under CI=true scripts/deps.sh installs it, so this fails"
		exit 1
	fi
	echo "${0##*/}: skipped: $1 not found (Debian: apt install $2)"
	exit 77
}

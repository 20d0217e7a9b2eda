#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# meson test --wrap for the valgrind pass: run compiled test programs under
# valgrind (memcheck: invalid accesses, uninitialised bytes passed to the
# kernel, definite leaks), and shell-script tests as they are.
# valgrind.supp next to this script holds the few findings that are not
# bugs, each with its reason.
supp="$(cd "$(dirname "$0")" && pwd)/valgrind.supp"
case "$(head -c 4 "$1" 2>/dev/null)" in
"$(printf '\177ELF')")
	exec valgrind --quiet --error-exitcode=99 --leak-check=full \
		--errors-for-leak-kinds=definite --trace-children=no \
		--suppressions="$supp" "$@" ;;
*)
	exec "$@" ;;
esac

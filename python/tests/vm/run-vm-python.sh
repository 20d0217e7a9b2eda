#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# vm suite: the Python binding's tests (python/tests/vm) inside the QEMU
# guest of kernel lts|newest with the simulated NIC.  The guest gets a small
# Python tree (mkpyroot.py: this machine's interpreter, its standard library
# and pytest), the build tree's devmemtcp package with the library, the
# tests, the example sender and README.md's Python example, each at its host
# path, and libgcc_s (which glibc loads when a thread exits at interpreter
# shutdown).  Afterwards the
# simulated NIC's module must unload: no binding or page was left behind.
# The guest is booted by tests/vm/run-vm.sh, the one VM entry point.
# usage: run-vm-python.sh lts|newest BUILDDIR
set -eu
src=$(cd "$(dirname "$0")/../../.." && pwd)
kernel=$1 build=$(cd "$2" && pwd)
root=$build/python/vm-python
/usr/bin/python3 "$src/python/tests/vm/mkpyroot.py" "$root" >&2
# README.md's Python block, which test_vm.py runs as a user would
readme=$build/python/readme-python-1.py
/usr/bin/python3 "$src/tests/check-readme.py" "$src" "$build" --extract "$readme"
exec "$src/tests/vm/run-vm.sh" "$kernel" "$build" \
	--payload "$root" --payload "$build/python/src" --payload "$readme" \
	--payload "$src/python/tests" --payload "$src/examples/python" \
	--payload "$(/usr/bin/python3 -c 'import ctypes.util, os; print(os.path.realpath("/lib/x86_64-linux-gnu/" + ctypes.util.find_library("gcc_s")))')" \
	"PYTHONPATH=$build/python/src PYTHONDONTWRITEBYTECODE=1 DEVMEMTCP_README_PY=$readme $root/bin/python3 $src/python/tests/pytest-run.py -v -s -rs $src/python/tests/vm && rmmod devmemsim && echo 'devmemsim unloaded: no binding or page leaked'"

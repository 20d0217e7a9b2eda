#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# meson install --destdir of this build, into a temporary directory.
#  - A build with test hooks: the install fails with the message that says
#    why, and installs nothing.
#  - A build without: every file lands under the prefix, but for the two
#    places systemd and the FHS decide when the prefix is /usr (the units'
#    directory from systemd's pkg-config file, sysconfdir /etc), and the
#    files a packager expects are there.
# usage: check-install.sh SRCDIR BUILDDIR hooks|plain
set -eu
src=$1 build=$2 mode=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the build's options (what meson introspect --buildoptions says)
eval "$(python3 - "$build/meson-info/intro-buildoptions.json" <<'PY'
import json, shlex, sys
o = {x["name"]: x["value"] for x in json.load(open(sys.argv[1]))}
for k in ("prefix", "sysconfdir", "libdir", "includedir", "bindir", "sbindir", "mandir",
          "systemdsystemunitdir"):
    print("opt_%s=%s" % (k, shlex.quote(str(o.get(k, "")))))
PY
)"
intro() { eval "echo \"\$opt_$1\""; }
prefix=$(intro prefix)
fail=0
if meson install -C "$build" --no-rebuild --destdir "$tmp/root" >"$tmp/out" 2>&1; then rc=0; else rc=$?; fi
files=$(cd "$tmp" && find root \( -type f -o -type l \) 2>/dev/null | sed 's|^root||' | sort)
if [ "$mode" = hooks ]; then
	want="meson install: this build has test hooks (-Dtest_hooks=true: fault injection and test-only knobs), which an installed library must not have, so it installs nothing; install from a build directory configured without them (meson setup build, as the README says for packagers)"
	[ "$rc" != 0 ] || { echo "check-install: meson install of a build with test hooks succeeded"; fail=1; }
	grep -qxF "$want" "$tmp/out" || { echo "check-install: meson install did not say: $want"; cat "$tmp/out"; fail=1; }
	left=$files
	if [ -n "$left" ]; then
		echo "check-install: a build with test hooks installed:"
		echo "$left"
		fail=1
	fi
	[ $fail = 0 ] && echo "check-install: refused, nothing of the library installed"
	exit $fail
fi
[ "$rc" = 0 ] || { echo "check-install: meson install failed (exit $rc):"; cat "$tmp/out"; exit 1; }
# a directory option, absolute
dir() { d=$(intro "$1"); case $d in /*) echo "$d" ;; *) echo "$prefix/$d" ;; esac; }
sysconfdir=$(dir sysconfdir) libdir=$(dir libdir)
unitdir=$(intro systemdsystemunitdir)
if [ -z "$unitdir" ] && [ "$prefix" = /usr ] && pkg-config --exists systemd 2>/dev/null; then
	unitdir=$(pkg-config --variable=systemdsystemunitdir systemd)
fi
for f in $files; do
	case $f in
	"$prefix"/*) ;;
	"$sysconfdir"/devmemtcp/broker.conf) ;;
	"$unitdir"/devmemtcp-broker.service | "$unitdir"/devmemtcp-broker.socket) ;;
	*) echo "check-install: $f is outside the prefix $prefix"; fail=1 ;;
	esac
done
for want in "$libdir/libdevmemtcp.so.0" "$libdir/libdevmemtcp.so" "$libdir/libdevmemtcp.a" \
	"$libdir/pkgconfig/devmemtcp.pc" "$(dir includedir)/devmemtcp.h" "$(dir bindir)/devmemtcp" \
	"$(dir sbindir)/devmemtcp-broker" "$sysconfdir/devmemtcp/broker.conf" \
	"$(dir mandir)/man1/devmemtcp.1" "$(dir mandir)/man7/devmemtcp.7"; do
	echo "$files" | grep -qxF "$want" || { echo "check-install: $want was not installed"; fail=1; }
done
echo "$files" | grep -q '/devmemtcp-broker\.socket$' ||
	{ echo "check-install: the broker's socket unit was not installed"; fail=1; }
[ $fail = 0 ] && echo "check-install: $(echo "$files" | wc -l) files, all under $prefix (sysconfdir $sysconfdir)"
exit $fail

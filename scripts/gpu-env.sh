#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
# Sourced by the GPU machine's scripts (bench/gather/gpu-run.sh,
# python/tests/gpu-run.sh, nccl/tests/gpu-allreduce.sh, tests/emu/gpu-run.sh):
#
#   . "$src/scripts/gpu-env.sh"; gpu_deps "$src" ROOT || exit 2
#
# unpacks every .deb of $src/.gpu-deps/ (made by scripts/gpu-deps.sh on the
# build machine and carried along) into ROOT, afresh, and points the
# compiler, the linker, the loader and pkg-config at it (their pkg-config
# files rewritten to ROOT); where the machine has no pkg-config, a
# stand-in answers for those files.  GPU_DEPS_PYTHONPATH is then the
# directory of the unpacked pure-Python packages (pytest).  Without
# .gpu-deps it says so and uses the machine's own libraries.  POSIX sh.

gpu_deps_log() { echo "[gpu-deps] $*" >&2; }

# unpack DEB into DIR: dpkg-deb where there is one, else the ar archive's
# data.tar.* through Python
gpu_deb_x() {
	if command -v dpkg-deb >/dev/null; then
		dpkg-deb -x "$1" "$2"
		return
	fi
	python3 - "$1" "$2" <<-'PY'
		import io, sys, tarfile
		data = open(sys.argv[1], "rb").read()
		assert data[:8] == b"!<arch>\n", "not a .deb"
		pos = 8
		while pos < len(data):
		    name = data[pos:pos + 16].decode().strip().rstrip("/")
		    size = int(data[pos + 48:pos + 58].decode().strip())
		    body = data[pos + 60:pos + 60 + size]
		    if name.startswith("data.tar"):
		        tarfile.open(fileobj=io.BytesIO(body)).extractall(sys.argv[2])
		        sys.exit(0)
		    pos += 60 + size + (size & 1)
		sys.exit("no data.tar in " + sys.argv[1])
	PY
}

gpu_pkgconfig_shim() {
	mkdir -p "$1/bin"
	cat >"$1/bin/pkg-config" <<-'PY'
		#!/usr/bin/env python3
		# The part of pkg-config that meson and the static-link check ask
		# for, over PKG_CONFIG_PATH.
		import os, re, sys
		def find(name):
		    path = os.environ.get("PKG_CONFIG_PATH", "").split(":") + [
		        "/usr/local/lib/x86_64-linux-gnu/pkgconfig", "/usr/local/lib/pkgconfig",
		        "/usr/local/share/pkgconfig", "/usr/lib/x86_64-linux-gnu/pkgconfig",
		        "/usr/lib/pkgconfig", "/usr/share/pkgconfig"]
		    for d in path:
		        for f in (name + "-uninstalled.pc", name + ".pc"):
		            if d and os.path.exists(os.path.join(d, f)):
		                return os.path.join(d, f)
		def load(name):
		    p = find(name)
		    if p:
		            v, f = {}, {}
		            for line in open(p):
		                line = line.strip()
		                m = re.match(r"^([A-Za-z0-9_.]+)\s*=\s*(.*)$", line)
		                k = re.match(r"^([A-Za-z.]+):\s*(.*)$", line)
		                sub = lambda s: re.sub(r"\$\{(\w+)\}", lambda x: v.get(x.group(1), ""), s)
		                if m: v[m.group(1)] = sub(m.group(2))
		                elif k: f[k.group(1)] = sub(k.group(2))
		            return v, f
		    return None
		args = sys.argv[1:]
		if "--version" in args: print("0.29.2"); sys.exit(0)
		opts = [a for a in args if a.startswith("--")]
		static = "--static" in opts
		pkgs = [a for a in args if not a.startswith("--") and not re.match(r"^[<>=!]", a) and not re.match(r"^[0-9]", a)]
		def walk(name, acc, seen):
		    if name in seen: return True
		    seen.add(name)
		    r = load(name)
		    if not r: return False
		    acc.append(r)
		    names = lambda k: [q for q in re.split(r"[,\s]+", r[1].get(k, "")) if q and not re.match(r"^[<>=!0-9]", q)]
		    if not all(walk(q, acc, seen) for q in names("Requires")): return False
		    # a private requirement that is not here: its libraries are not
		    # needed unless the link is static, and then the link says so
		    for q in names("Requires.private") if static else []:
		        walk(q, acc, seen)
		    return True
		def libs(r):
		    return r[1].get("Libs", "") + (" " + r[1].get("Libs.private", "") if static else "")
		out = []
		for p in pkgs:
		    acc = []
		    if not walk(p, acc, set()):
		        if "--print-errors" in opts or "--exists" not in opts:
		            sys.stderr.write("Package %s was not found\n" % p)
		        sys.exit(1)
		    for o in opts:
		        if o == "--modversion": out.append(acc[0][1].get("Version", ""))
		        elif o == "--cflags": out += [r[1].get("Cflags", "") for r in acc]
		        elif o == "--cflags-only-I": out += [w for r in acc for w in r[1].get("Cflags", "").split() if w.startswith("-I")]
		        elif o == "--libs": out += [libs(r) for r in acc]
		        elif o == "--libs-only-l": out += [w for r in acc for w in libs(r).split() if w.startswith("-l")]
		        elif o == "--libs-only-L": out += [w for r in acc for w in libs(r).split() if w.startswith("-L")]
		        elif o.startswith("--variable="): out.append(acc[0][0].get(o.split("=", 1)[1], ""))
		print(" ".join(s for s in out if s))
	PY
	chmod +x "$1/bin/pkg-config"
	PATH=$1/bin:$PATH
	export PATH
	gpu_deps_log "no pkg-config on this machine: a stand-in over PKG_CONFIG_PATH"
}

# gpu_deps SRC ROOT
gpu_deps() {
	gd_src=$1
	gd_root=$2
	gd_arch=x86_64-linux-gnu
	rm -rf "$gd_root"
	mkdir -p "$gd_root"
	command -v pkg-config >/dev/null || gpu_pkgconfig_shim "$gd_root"
	GPU_DEPS_PYTHONPATH=
	set -- "$gd_src"/.gpu-deps/*.deb
	if [ ! -e "$1" ]; then
		gpu_deps_log "no .deb files in $gd_src/.gpu-deps (made by scripts/gpu-deps.sh on the build machine and carried): using the machine's libraries"
		return 0
	fi
	for d in "$@"; do
		gpu_deb_x "$d" "$gd_root" || return 1
	done
	mkdir -p "$gd_root/usr/lib/$gd_arch"
	[ -d "$gd_root/lib/$gd_arch" ] && cp -a "$gd_root/lib/$gd_arch/." "$gd_root/usr/lib/$gd_arch/"
	for pc in "$gd_root/usr/lib/$gd_arch/pkgconfig"/*.pc; do
		[ -f "$pc" ] && sed -i "s|/usr|$gd_root/usr|g" "$pc"
	done
	PKG_CONFIG_PATH=$gd_root/usr/lib/$gd_arch/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
	LD_LIBRARY_PATH=$gd_root/usr/lib/$gd_arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	LIBRARY_PATH=$gd_root/usr/lib/$gd_arch${LIBRARY_PATH:+:$LIBRARY_PATH}
	CPATH=$gd_root/usr/include${CPATH:+:$CPATH}
	# programs the machine may lack (ip, for the emulated NIC's veth pair),
	# after the machine's own
	PATH=$PATH:$gd_root/usr/sbin:$gd_root/usr/bin:$gd_root/sbin:$gd_root/bin
	export PKG_CONFIG_PATH LD_LIBRARY_PATH LIBRARY_PATH CPATH PATH
	[ -d "$gd_root/usr/lib/python3/dist-packages" ] &&
		GPU_DEPS_PYTHONPATH=$gd_root/usr/lib/python3/dist-packages
	gpu_deps_log "libraries from $(for d in "$@"; do basename "$d"; done | tr '\n' ' ')"
}

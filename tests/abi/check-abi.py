#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The ABI of libdevmemtcp.so.0 against the committed baseline.

usage: check-abi.py SRCDIR LIBRARY           the `abi` test (unit suite)
       check-abi.py --update SRCDIR LIBRARY  write LIBRARY's ABI as the baseline
                                             (tests/abi/update-baseline.sh does it
                                             from a build without test hooks)

abidw (libabigail) describes LIBRARY's exported functions and the public types
they reach, from its DWARF (the library must be built with -g); abidiff compares
that with tests/abi/libdevmemtcp.abi.  Any ABI change fails: abidiff's bit 4
(a change) as well as bit 8 (an incompatible one, which it sets only for removed
symbols).  tests/abi/libdevmemtcp.abignore lets through what doc/ABI.md calls
compatible: new functions, and fields appended to the structs that start with
`size_t sz`.  libabigail's "inserted at end" suppression also hides any other
change of such a struct, so this script checks those structs itself: every
field of the baseline keeps its name (a reserved field may get one), offset and
type (compared in depth, through pointers and arrays), and the struct does not
shrink.

A missing abidw/abidiff is a skip (exit 77) saying so, and a failure under
CI=true, where scripts/deps.sh installs abigail-tools.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

# One place for abidw's options: the baseline and the test use the same.
#  --headers-dir + --drop-private-types: types not defined in the public
#    header are opaque (the library's own structs behind its handles);
#  --exported-interfaces-only: the exported functions, not every internal one;
#  no paths, no DT_NEEDED (libdrm is optional): the description depends only
#    on the header, the symbol map and the architecture.
ABIDW_OPTS = ["--drop-private-types", "--exported-interfaces-only",
              "--no-corpus-path", "--no-comp-dir-path", "--short-locs",
              "--no-elf-needed"]
ABIDIFF_CHANGE, ABIDIFF_INCOMPATIBLE = 4, 8


def skip_or_fail(reason):
    if os.environ.get("CI") == "true":
        print("abi: %s (CI=true: scripts/deps.sh installs it, so this is a failure)" % reason)
        sys.exit(1)
    print("abi: skipped: %s" % reason)
    sys.exit(77)


def abidw(src, lib, out):
    r = subprocess.run(["abidw", "--headers-dir", os.path.join(src, "include")] +
                       ABIDW_OPTS + ["--out-file", out, lib],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        print("abi: abidw %s failed (exit %d):\n%s" % (lib, r.returncode, r.stdout))
        sys.exit(1)


class Corpus:
    """An abidw XML file: its types by id, its structs by name."""

    def __init__(self, path):
        self.root = ET.parse(path).getroot()
        self.types = {}
        self.structs = {}
        for e in self.root.iter():
            tid = e.get("id")
            if tid:
                self.types[tid] = e
            if e.tag == "class-decl" and e.get("is-declaration-only") != "yes":
                # the same struct may be described once per translation unit
                self.structs.setdefault(e.get("name"), e)

    def members(self, cls):
        """[(name, offset in bits, type id)] of a struct or union, in order."""
        out = []
        for dm in cls.findall("data-member"):
            v = dm.find("var-decl")
            out.append((v.get("name"), int(dm.get("layout-offset-in-bits", "0")),
                        v.get("type-id")))
        return out

    def sz_structs(self):
        """The structs whose first field is size_t sz at offset 0."""
        names = set()
        for name, cls in self.structs.items():
            m = self.members(cls)
            if m and m[0][0] == "sz" and m[0][1] == 0 and \
               self.canon(m[0][2]) in ("size_t=unsigned long int/64",):
                names.add(name)
        return names

    def canon(self, tid, seen=()):
        """A type as a string that differs iff its layout or meaning does."""
        e = self.types.get(tid)
        if e is None:
            return "?" + str(tid)
        tag = e.tag
        if tag == "type-decl":
            return "%s/%s" % (e.get("name"), e.get("size-in-bits", "?"))
        if tag == "typedef-decl":
            return "%s=%s" % (e.get("name"), self.canon(e.get("type-id"), seen)) \
                if e.get("name") == "size_t" else self.canon(e.get("type-id"), seen)
        if tag == "qualified-type-def":
            q = "".join(k + " " for k in ("const", "volatile", "restrict") if e.get(k) == "yes")
            return q + self.canon(e.get("type-id"), seen)
        if tag in ("pointer-type-def", "reference-type-def"):
            return self.canon(e.get("type-id"), seen) + "*"
        if tag == "array-type-def":
            dims = "".join("[%s]" % s.get("length", "?") for s in e.findall("subrange"))
            return self.canon(e.get("element-type-id"), seen) + dims
        if tag == "enum-decl":
            base = e.find("underlying-type")
            vals = ",".join("%s=%s" % (x.get("name"), x.get("value"))
                            for x in e.findall("enumerator"))
            return "enum %s:%s{%s}" % (e.get("name"), self.canon(base.get("type-id"), seen)
                                       if base is not None else "?", vals)
        if tag in ("class-decl", "union-decl"):
            kind = "union" if tag == "union-decl" else "struct"
            name = e.get("name") or ""
            if e.get("is-declaration-only") == "yes":
                full = self.structs.get(name) if tag == "class-decl" else None
                if full is None:
                    return "%s %s" % (kind, name)
                e = full
            key = (kind, name)
            if name and key in seen:
                return "%s %s" % (kind, name)
            inner = ";".join("%s@%d:%s" % (n, off, self.canon(t, seen + (key,)))
                             for n, off, t in self.members(e))
            return "%s %s/%s{%s}" % (kind, name, e.get("size-in-bits", "?"), inner)
        if tag == "function-type":
            params = ",".join(self.canon(p.get("type-id"), seen)
                              for p in e.findall("parameter"))
            ret = e.find("return")
            return "fn(%s)->%s" % (params, self.canon(ret.get("type-id"), seen)
                                   if ret is not None else "?")
        return "%s:%s" % (tag, e.get("name", ""))


def suppressed_sz_structs(path):
    """The struct names the sz suppression of the .abignore file lists."""
    text = open(path).read()
    m = re.search(r"label = fields appended to sz structs.*?name_regexp = \^devmemtcp_\(([^)]*)\)\$",
                  text, re.S)
    if not m:
        print("abi: %s has no 'fields appended to sz structs' suppression" % path)
        sys.exit(1)
    return {"devmemtcp_" + n for n in m.group(1).split("|")}


def check_sz_prefix(old, new):
    """Each sz struct of the baseline is a prefix of the new one."""
    bad = []
    for name in sorted(old.sz_structs()):
        o = old.structs[name]
        n = new.structs.get(name)
        if n is None:
            bad.append("struct %s: gone from the exported interface" % name)
            continue
        osz, nsz = int(o.get("size-in-bits")), int(n.get("size-in-bits"))
        if nsz < osz:
            bad.append("struct %s: size %d -> %d bits (fields may only be appended)" %
                       (name, osz, nsz))
        om, nm = old.members(o), new.members(n)
        for i, (mname, off, tid) in enumerate(om):
            if i >= len(nm):
                bad.append("struct %s: field '%s' removed" % (name, mname))
                continue
            nname, noff, ntid = nm[i]
            # a reserved field (zero for every caller) may be given a name
            if mname.startswith("reserved") and off == noff:
                mname = nname
            if (mname, off) != (nname, noff):
                bad.append("struct %s: field %d was '%s' at bit %d, is '%s' at bit %d "
                           "(fields may only be appended)" % (name, i, mname, off, nname, noff))
                continue
            ot, nt = old.canon(tid), new.canon(ntid)
            if ot != nt:
                bad.append("struct %s: field '%s' changed type:\n      was %s\n      is  %s" %
                           (name, mname, ot, nt))
    return bad


def main(argv):
    update = argv[1:2] == ["--update"]
    if update:
        argv = argv[1:]
    if len(argv) != 3:
        print(__doc__)
        return 2
    src, lib = argv[1], argv[2]
    here = os.path.join(src, "tests", "abi")
    baseline = os.path.join(here, "libdevmemtcp.abi")
    supp = os.path.join(here, "libdevmemtcp.abignore")
    for tool in ("abidw", "abidiff"):
        if not shutil.which(tool):
            skip_or_fail("%s not found (Debian: apt install abigail-tools)" % tool)
    with tempfile.TemporaryDirectory() as tmp:
        cur = os.path.join(tmp, "current.abi")
        abidw(src, lib, cur)
        new = Corpus(cur)
        if not any(new.root.iter("function-decl")):
            skip_or_fail("%s has no debug information: build it with -g "
                         "(buildtype debug or debugoptimized)" % lib)
        if update:
            shutil.copyfile(cur, baseline)
            print("abi: wrote %s from %s" % (baseline, lib))
            return 0
        old = Corpus(baseline)
        if old.root.get("architecture") != new.root.get("architecture"):
            print("abi: skipped: the baseline describes %s, this library is %s" %
                  (old.root.get("architecture"), new.root.get("architecture")))
            return 77
        fail = 0
        listed = suppressed_sz_structs(supp)
        for what, corpus in (("the baseline", old), ("the library", new)):
            have = corpus.sz_structs()
            if have != listed:
                print("abi: %s list of structs starting with size_t sz is not %s's: "
                      "not listed: %s; listed but without sz: %s" %
                      (os.path.basename(supp), what, ", ".join(sorted(have - listed)) or "none",
                       ", ".join(sorted(listed - have)) or "none"))
                fail = 1
        r = subprocess.run(["abidiff", "--suppressions", supp, baseline, cur],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(r.stdout, end="")
        if r.returncode & 3:
            print("abi: abidiff failed (exit %d)" % r.returncode)
            fail = 1
        elif r.returncode & (ABIDIFF_CHANGE | ABIDIFF_INCOMPATIBLE):
            print("abi: the ABI changed (abidiff exit %d: %s)" % (r.returncode,
                  "incompatible" if r.returncode & ABIDIFF_INCOMPATIBLE else "changed"))
            fail = 1
        bad = check_sz_prefix(old, new)
        for b in bad:
            print("abi: " + b)
        if bad:
            fail = 1
    if fail:
        print("abi: %s differs from tests/abi/libdevmemtcp.abi.  An intended change: "
              "see doc/ABI.md (a new soname, or a compatible addition), then "
              "tests/abi/update-baseline.sh" % lib)
        return 1
    print("abi: %s matches tests/abi/libdevmemtcp.abi (%d functions)" %
          (lib, sum(1 for _ in new.root.iter("elf-symbol"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

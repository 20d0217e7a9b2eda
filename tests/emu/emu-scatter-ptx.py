#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The emulated NIC's scatter kernel as PTX text (a test tool).

  emu-scatter-ptx.py write [NVCC]   emu-scatter.cu -> emu-scatter-ptx.h (by hand,
                                    after a change to the kernel)
  emu-scatter-ptx.py check [NVCC]   the emu suite's emu-scatter-ptx test: ptxas
                                    assembles the header's text for sm_80 and
                                    sm_90, and where NVCC is the release that
                                    wrote the header, the header is what the
                                    kernel's source gives today

The build needs no nvcc: emu-mem.c loads the header's text with
cuModuleLoadData and the driver compiles it for the GPU it runs on.  The
text declares PTX ISA 7.0 (CUDA 11.0 drivers and later) whatever release of
nvcc wrote it; ptxas refuses an instruction that needs a later one.
Exit 77 (a skip) where there is no ptxas.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "emu-scatter.cu")
HDR = os.path.join(HERE, "emu-scatter-ptx.h")
ISA = "7.0"


def find_tool(name, given=None):
    if given:
        return given
    return shutil.which(name) or (os.path.exists("/usr/local/cuda/bin/" + name) and
                                  "/usr/local/cuda/bin/" + name) or None


def nvcc_ptx(nvcc):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "s.ptx")
        subprocess.run([nvcc, "-ptx", "-arch=compute_75", "-O3", SRC, "-o", out], check=True)
        ptx = open(out).read()
    ptx, n = re.subn(r"^\.version \d+\.\d+$", ".version " + ISA, ptx, flags=re.M)
    if n != 1:
        sys.exit("emu-scatter-ptx: no .version line in nvcc's PTX")
    return ptx


def header(ptx):
    lines = ['/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */',
             '/* The scatter kernel of emu-scatter.cu as PTX text, written by',
             ' * emu-scatter-ptx.py: do not edit, run "emu-scatter-ptx.py write". */',
             '#ifndef DEVMEMTCP_EMU_SCATTER_PTX_H',
             '#define DEVMEMTCP_EMU_SCATTER_PTX_H',
             '',
             '#define EMU_SCATTER_KERNEL "dmt_emu_scatter"',
             '',
             'static const char emu_scatter_ptx[] =']
    for line in ptx.splitlines():
        lines.append('\t"%s\\n"' % line.replace("\\", "\\\\").replace('"', '\\"'))
    lines[-1] += ";"
    lines += ["", "#endif", ""]
    return "\n".join(lines)


def header_ptx():
    body = open(HDR).read().split("emu_scatter_ptx[] =\n", 1)[1]
    parts = []
    for line in body.splitlines():
        m = re.match(r'^\t"((?:[^"\\]|\\.)*)"(;?)$', line)
        if not m:
            break
        parts.append(re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1),
                            m.group(1)))
        if m.group(2):
            break
    return "".join(parts)


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    given = sys.argv[2] if len(sys.argv) > 2 else None
    nvcc = find_tool("nvcc", given)
    if sys.argv[1] == "write":
        if not nvcc:
            sys.exit("emu-scatter-ptx: no nvcc (name it: emu-scatter-ptx.py write /path/to/nvcc)")
        open(HDR, "w").write(header(nvcc_ptx(nvcc)))
        print("wrote", HDR)
        return 0
    ptxas = find_tool("ptxas", os.path.join(os.path.dirname(nvcc), "ptxas") if nvcc else None)
    if not ptxas or not os.path.exists(ptxas):
        print("emu-scatter-ptx: no ptxas (CUDA toolkit): skipped")
        return 77
    ptx = header_ptx()
    if ".entry dmt_emu_scatter(" not in ptx or "\n.version %s\n" % ISA not in ptx:
        print("emu-scatter-ptx: emu-scatter-ptx.h has no PTX %s entry dmt_emu_scatter" % ISA)
        return 1
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "s.ptx")
        open(f, "w").write(ptx)
        for arch in ("sm_80", "sm_90"):
            r = subprocess.run([ptxas, "-arch=" + arch, f, "-o", os.path.join(d, "s.cubin")],
                               capture_output=True, text=True)
            if r.returncode:
                print("emu-scatter-ptx: ptxas -arch=%s refuses emu-scatter-ptx.h's text:\n%s"
                      % (arch, r.stderr))
                return 1
            print("emu-scatter-ptx: ptxas -arch=%s assembles it" % arch)
    release = re.search(r"Cuda compilation tools, release ([\d.]+)", ptx)
    if nvcc and release:
        v = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
        if "release %s," % release.group(1) in v:
            if nvcc_ptx(nvcc) != ptx:
                print("emu-scatter-ptx: emu-scatter-ptx.h is not what emu-scatter.cu gives: "
                      "run tests/emu/emu-scatter-ptx.py write")
                return 1
            print("emu-scatter-ptx: the header is emu-scatter.cu's PTX (nvcc %s)" % release.group(1))
        else:
            print("emu-scatter-ptx: nvcc here is not release %s: the header's source not compared"
                  % release.group(1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

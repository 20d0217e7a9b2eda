#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The plugin's declarations of NCCL's unpack queue against NCCL's own.

  check-unpack-layout.py TEST-NCCL-UNPACK NCCL-GIT-DIR [TAG...]

reads src/device/network/unpack/unpack_defs.h and net_device.h of each tag
(default: every tag from v2.19.1-1 on) with `git show`, computes the
offsets of the fields the plugin uses by C's layout rules (LP64), and
compares them with the table `TEST-NCCL-UNPACK layout` prints.  Nothing of
NCCL's is copied: its text is only read here.  A maintainer's check when a
new NCCL release comes out (add its row to nccl/unpack.c's table when it
passes); exit 0 when every tag agrees.
"""
import re
import subprocess
import sys

SIZES = {"uint32_t": 4, "uint64_t": 8, "int": 4, "size_t": 8, "void*": 8,
         "ncclNetDeviceType": 4}


def show(git, tag, path):
    r = subprocess.run(["git", "-C", git, "show", f"{tag}:{path}"],
                       capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def defines(text):
    d = {}
    text = text.replace("\\\n", " ")
    for m in re.finditer(r"^\s*#define\s+(\w+)\s+([^\n]*?)\s*(//.*)?$", text, re.M):
        d[m.group(1)] = m.group(2)
    return d


def value(expr, d, depth=0):
    expr = re.sub(r"\b([A-Z_][A-Z0-9_]*)\b",
                  lambda m: f"({value(d[m.group(1)], d, depth + 1)})" if m.group(1) in d else m.group(1),
                  expr)
    return int(eval(expr.replace("/", "//"), {}))


def body(text, head):
    m = re.search(head + r"\s*\{(.*?)\}\s*\w*\s*;", text, re.S)
    if not m:
        raise ValueError(f"no {head}")
    return [f.strip() for f in re.sub(r"//[^\n]*", "", m.group(1)).split(";") if f.strip()]


def layout(defs_text, dev_text):
    d = defines(defs_text)
    d.update(defines(dev_text))
    out = {}
    # union loadMeta: its struct member gives the offsets, alignas(16)
    fields = body(defs_text, r"struct")  # the anonymous struct inside loadMeta
    off = 0
    for f in fields:
        t, n = f.rsplit(None, 1)
        off = (off + SIZES[t] - 1) // SIZES[t] * SIZES[t]
        out[f"loadMeta.{n}"] = off
        off += SIZES[t]
    out["sizeof(union loadMeta)"] = max(16, off)
    out["_Alignof(union loadMeta)"] = 16 if "alignas(16)" in defs_text else 8
    depth = value("NCCL_NET_DEVICE_UNPACK_MAX_QUEUE_DEPTH", d)
    pages = value("NET_UNPACK_MAX_SLICE_PAGES", d)
    out["NCCL_NET_DEVICE_UNPACK_MAX_QUEUE_DEPTH"] = depth
    out["NET_UNPACK_MAX_SLICE_PAGES"] = pages
    meta = body(defs_text, r"struct netUnpackMeta")
    if not (re.match(r"loadMeta mem\[NCCL_NET_DEVICE_UNPACK_MAX_QUEUE_DEPTH\]\[NET_UNPACK_MAX_SLICE_PAGES\]", meta[0])
            and re.match(r"uint64_t cnt\[NCCL_NET_DEVICE_UNPACK_MAX_QUEUE_DEPTH\]", meta[1]) and len(meta) == 2):
        raise ValueError(f"struct netUnpackMeta is {meta}")
    out["netUnpackMeta.mem"] = 0
    out["netUnpackMeta.mem[1]"] = pages * 16
    out["netUnpackMeta.cnt"] = depth * pages * 16
    out["sizeof(struct netUnpackMeta)"] = depth * pages * 16 + depth * 8
    h = [re.sub(r"\s*\*\s*", "* ", f).split() for f in body(defs_text, r"struct unpackNetDeviceHandle")]
    want = [["struct", "netUnpackMeta*", "meta"], ["void*", "bounce_buf"], ["uint64_t", "head"]]
    if h != want:
        raise ValueError(f"struct unpackNetDeviceHandle is {h}")
    out.update({"unpackNetDeviceHandle.meta": 0, "unpackNetDeviceHandle.bounce_buf": 8,
                "unpackNetDeviceHandle.head": 16, "sizeof(struct unpackNetDeviceHandle)": 24})
    off = 0
    for f in body(dev_text, r"typedef struct"):
        t, n = re.sub(r"\s*\*\s*", "* ", f).rsplit(None, 1)
        size = SIZES[t]
        off = (off + size - 1) // size * size
        out[f"ncclNetDeviceHandle_v7_t.{n}"] = off
        off += size
    m = re.search(r"NCCL_NET_DEVICE_UNPACK\s*=\s*(\d+)", dev_text)
    out["NCCL_NET_DEVICE_UNPACK"] = int(m.group(1))
    out["NCCL_NET_DEVICE_UNPACK_VERSION"] = value("NCCL_NET_DEVICE_UNPACK_VERSION", d)
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    test, git, tags = sys.argv[1], sys.argv[2], sys.argv[3:]
    ours = {}
    for line in subprocess.run([test, "layout"], capture_output=True, text=True).stdout.splitlines():
        m = re.match(r"^(.+?)\s+(\d+)\s+(\d+)$", line)
        if m:
            ours[m.group(1)] = int(m.group(2))
    if not tags:
        all_tags = subprocess.run(["git", "-C", git, "tag"], capture_output=True, text=True).stdout.split()
        key = lambda t: [int(x) for x in re.findall(r"\d+", t)]
        tags = sorted((t for t in all_tags if re.match(r"^v2\.\d+\.\d+-\d+$", t) and key(t) >= [2, 19, 1, 1]), key=key)
    bad = 0
    for tag in tags:
        defs = show(git, tag, "src/device/network/unpack/unpack_defs.h")
        dev = show(git, tag, "src/include/nccl_device/net_device.h") or show(git, tag, "src/include/net_device.h")
        if not defs or not dev:
            print(f"{tag}: no unpack queue")
            bad += 1
            continue
        try:
            theirs = layout(defs, dev)
        except (ValueError, KeyError) as e:
            print(f"{tag}: cannot read the layout: {e}")
            bad += 1
            continue
        diff = {k: (ours.get(k), v) for k, v in theirs.items() if ours.get(k) != v}
        print(f"{tag}: {'agrees' if not diff else 'DIFFERS ' + str(diff)} ({len(theirs)} fields and constants)")
        bad += bool(diff)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

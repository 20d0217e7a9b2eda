#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Name the samples of bench-rxpipe's BENCH_PROF file: per row, the share
of each stage and the functions that took the most samples in it.

usage: prof-report.py PROFILE [TOP]

Run it on the machine that ran the benchmark (it reads the binaries the
mappings name with nm).  Samples outside every mapping's symbols count
under the mapping's file name.
"""
import bisect
import collections
import os
import subprocess
import sys

ROWS = ["256K d2d", "256K default", "256K pipeline", "256K pipeline x4",
        "256K pipeline graphs", "256K pipeline general parse", "1448 d2d",
        "1448 default", "1448 pipeline", "1448 pipeline x4",
        "1448 pipeline graphs", "1448 pipeline general parse"]
STAGES = ["recv", "gpu step", "release", "other"]


def symbols(path, cache={}):
    if path in cache:
        return cache[path]
    syms = []
    for args in (["nm", "-n", "--defined-only"], ["nm", "-D", "-n", "--defined-only"]):
        try:
            out = subprocess.run(args + [path], capture_output=True, text=True,
                                 check=False).stdout
        except OSError:
            break
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tTwW":
                syms.append((int(parts[0], 16), parts[2]))
        if syms:
            break
    syms.sort()
    cache[path] = ([a for a, _ in syms], [n for _, n in syms])
    return cache[path]


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    samples, maps = [], []
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines) and lines[i] != "maps":
        r, s, pc = lines[i].split()
        samples.append((int(r), int(s), int(pc, 16)))
        i += 1
    for line in lines[i + 1:]:
        parts = line.split()
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        maps.append((lo, hi, int(parts[2], 16), parts[5]))
    maps.sort()
    starts = [m[0] for m in maps]

    def name(pc):
        k = bisect.bisect_right(starts, pc) - 1
        if k < 0 or pc >= maps[k][1]:
            return "?"
        lo, _, off, file = maps[k]
        addrs, names = symbols(file)
        v = pc - lo + off
        j = bisect.bisect_right(addrs, v) - 1
        base = os.path.basename(file)
        return f"{names[j]} ({base})" if j >= 0 else base

    by_row = collections.defaultdict(list)
    for r, s, pc in samples:
        by_row[r].append((s, pc))
    print(f"# {len(samples)} samples, 20 us of the thread's CPU each")
    for r in sorted(by_row):
        rs = by_row[r]
        st = collections.Counter(s for s, _ in rs)
        label = ROWS[r] if r < len(ROWS) else str(r)
        print(f"\n## {label}: {len(rs)} samples; " + ", ".join(
            f"{STAGES[s]} {100 * st[s] / len(rs):.0f}%" for s in sorted(st)))
        for s in sorted(st):
            c = collections.Counter(name(pc) for ss, pc in rs if ss == s)
            print(f"- {STAGES[s]}: " + "; ".join(
                f"{n} {100 * v / len(rs):.1f}%" for n, v in c.most_common(top)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The fidelity table of the emulated NIC (a test tool): tests/emu/fidelity.sh's
logs of tests/vm/test-e2e in each RX buffer layout, on the simulated NIC in
the VM and on the emulated NIC, side by side, in Markdown.  Exact agreement
is required of the errno and message of every refusal and of the bytes;
the fragment layout within a tolerance (the segment sizes on the wire
depend on the sender: its writes end segments short, and its TSO frames,
about 1 ms of data at its pacing rate, bound how far rx_mix's pieces
reach); the receive counts, which depend on timing alone, are shown and
not judged.

  fidelity-table.py OUTDIR
"""

import os
import re
import sys

LAYOUTS = [("default", "default", "one NIC page per buffer"),
           ("buf2k", "buf2k", "rx_buf_size=2048"),
           ("mixed", "mixed", "rx_pack=1 rx_mix=1; the emulated wire's TSO frames of 45 segments"),
           ("mixed", "mixed-tso17", "rx_pack=1 rx_mix=1; the emulated wire's TSO frames of 17 "
            "segments, as the VM's sender sizes them"),
           ("page16k", "page16k", "16 KiB NIC pages, rx_pack=1")]


def parse(path):
    r = {}
    if not os.path.exists(path):
        return None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        m = re.match(r"(hds-off|busy): bind-rx returned (-?\d+): (.*)", line)
        if m:
            r[m.group(1)] = (int(m.group(2)), m.group(3))
        m = re.match(r"layout: NIC page (\d+): (\d+) frags, (\d+) bytes, (\d+) page visits \(([\d.]+) frags each\)", line)
        if m:
            r["page"], r["frags"], r["bytes"] = m.group(1), int(m.group(2)), int(m.group(3))
            r["per_visit"] = float(m.group(5))
        m = re.match(r"layout: offset in page: at 0 ([\d.]+)%, distinct (\d+), 64-byte aligned ([\d.]+)%, 8-byte aligned ([\d.]+)%; by eighths of the page \(%\): (.*)", line)
        if m:
            r["at0"], r["distinct"], r["al64"] = float(m.group(1)), int(m.group(2)), float(m.group(3))
            r["eighths"] = [float(x) for x in m.group(5).split()]
        m = re.match(r"layout: frag bytes: min (\d+), mean ([\d.]+), max (\d+), under 64: ([\d.]+)%", line)
        if m:
            r["fmin"], r["fmean"], r["fmax"], r["small"] = (int(m.group(1)), float(m.group(2)),
                                                            int(m.group(3)), float(m.group(4)))
        m = re.match(r"layout: tokens per DONTNEED ([\d.]+) .* frags per receive ([\d.]+)", line)
        if m:
            r["tpd"], r["fpr"] = float(m.group(1)), float(m.group(2))
        m = re.match(r"transfer: tokens from (\d+), highest (\d+)", line)
        if m:
            r["tok_first"], r["tok_high"] = int(m.group(1)), int(m.group(2))
        m = re.match(r"starve: receive returned (-?\d+) \(([^)]*)\) after (\d+) bytes with (\d+) tokens held; rx-alloc-fail (\d+)", line)
        if m:
            r["starve"] = (int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)))
        m = re.match(r"starve: stalled at (\d+) bytes, then all (\d+) bytes arrived intact", line)
        if m:
            r["starve_ok"] = int(m.group(2))
        m = re.match(r"(PASS|FAIL) (\S+)$", line)
        if m:
            r.setdefault("results", []).append("%s %s" % (m.group(2), m.group(1)))
    return r


def fmt_eighths(e):
    return " ".join("%.0f" % x for x in e) if e else "-"


def row(name, vm, emu, verdict):
    print("| %s | %s | %s | %s |" % (name, vm, emu, verdict))


def near(a, b, tol):
    return a is not None and b is not None and abs(a - b) <= tol


def main():
    out = sys.argv[1]
    bad = 0
    for layout, elayout, desc in LAYOUTS:
        vm, emu = parse(os.path.join(out, "vm-%s.log" % layout)), parse(os.path.join(out, "emu-%s.log" % elayout))
        print("\n### %s (%s)\n" % (elayout, desc))
        if vm is None or emu is None:
            print("(no %s log)" % ("VM" if vm is None else "emulation"))
            bad += 1
            continue
        print("| | simulated NIC in the VM | emulated NIC | agree |")
        print("|---|---|---|---|")

        def g(r, k, f="%s"):
            return f % r[k] if k in r else "-"

        def judge(ok):
            nonlocal bad
            bad += not ok
            return "yes" if ok else "**no**"
        row("test results", ", ".join(vm.get("results", [])), ", ".join(emu.get("results", [])),
            judge(vm.get("results") == emu.get("results")))
        row("bytes (every one checked)", g(vm, "bytes"), g(emu, "bytes"),
            judge(vm.get("bytes") == emu.get("bytes") == 16 << 20))
        row("fragments", g(vm, "frags"), g(emu, "frags"),
            judge(near(vm.get("frags"), emu.get("frags"), 0.1 * vm.get("frags", 0))))
        row("offset in NIC page: at 0 / distinct / 64-byte aligned",
            "%s %% / %s / %s %%" % (g(vm, "at0"), g(vm, "distinct"), g(vm, "al64")),
            "%s %% / %s / %s %%" % (g(emu, "at0"), g(emu, "distinct"), g(emu, "al64")),
            # how many distinct offsets packed pages show depends on how many
            # short segments the sender's writes made: judged where the
            # layout alone decides it
            judge(near(vm.get("at0"), emu.get("at0"), 3) and near(vm.get("al64"), emu.get("al64"), 5)
                  and (vm.get("distinct", 0) > 2 or vm.get("distinct") == emu.get("distinct"))))
        row("offsets by eighths of the page (%)", fmt_eighths(vm.get("eighths")),
            fmt_eighths(emu.get("eighths")),
            judge(vm.get("eighths") is not None and emu.get("eighths") is not None and
                  all(near(a, b, 3) for a, b in zip(vm["eighths"], emu["eighths"]))))
        row("fragments per NIC page visit", g(vm, "per_visit"), g(emu, "per_visit"),
            judge(near(vm.get("per_visit"), emu.get("per_visit"), 0.08 * vm.get("per_visit", 1))))
        row("fragment bytes min / mean / max (under 64 B)",
            "%s / %s / %s (%s %%)" % (g(vm, "fmin"), g(vm, "fmean"), g(vm, "fmax"), g(vm, "small")),
            "%s / %s / %s (%s %%)" % (g(emu, "fmin"), g(emu, "fmean"), g(emu, "fmax"), g(emu, "small")),
            judge(vm.get("fmax") == emu.get("fmax") and near(vm.get("fmean"), emu.get("fmean"), 0.08 * vm.get("fmean", 1))
                  and near(vm.get("small"), emu.get("small"), 3)))
        row("tokens: first, highest", "%s, %s" % (g(vm, "tok_first"), g(vm, "tok_high")),
            "%s, %s" % (g(emu, "tok_first"), g(emu, "tok_high")),
            judge(vm.get("tok_first") == emu.get("tok_first")))
        row("tokens per DONTNEED, fragments per receive (timing)",
            "%s, %s" % (g(vm, "tpd"), g(vm, "fpr")), "%s, %s" % (g(emu, "tpd"), g(emu, "fpr")), "not judged")
        for k, what in (("hds-off", "bind with header split off"), ("busy", "bind on a busy queue")):
            a, b = vm.get(k), emu.get(k)
            row("%s: errno, message" % what, "%s: %s" % a if a else "-", "%s: %s" % b if b else "-",
                judge(a is not None and a == b))
        a, b = vm.get("starve"), emu.get("starve")

        def sv(s, ok):
            if not s:
                return "-"
            return "receive %d (%s) after %d bytes, %d tokens held, rx-alloc-fail %d; %s" % (
                s[0], s[1], s[2], s[3], s[4], "then all %d bytes intact" % ok if ok else "bytes lost")
        row("out of pages (2 MiB buffer, every token held)", sv(a, vm.get("starve_ok")),
            sv(b, emu.get("starve_ok")),
            judge(a is not None and b is not None and a[0] == b[0] and a[4] > 0 and b[4] > 0 and
                  vm.get("starve_ok") == emu.get("starve_ok") and near(a[2], b[2], 0.2 * a[2])))
    print("\n%d disagreements" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Per-call cost of Rx.recv() + Fragments.release() through Python against
devmemtcp_rx_recv() + devmemtcp_rx_release() through the C API, in the same
process, on the same fake devmem kernel (synthetic fragments, see
tests/emu/fakedevmem.c).  Both sides make the same calls into the
library and the same (fake) recvmsg and SO_DEVMEM_DONTNEED; the difference
is what the binding adds.  Target: at most 2 us per call more than C.

usage: python-rx.py [--iterations N] [--repeat R]
Needs the test build's package on PYTHONPATH and LD_PRELOAD of
libdevmemtcp-emu.so (meson test --benchmark --suite python sets both).
"""

import argparse
import socket
import statistics
import time

import devmemtcp as dm
from devmemtcp import _testing as fake

BINDING = 1
SIZE = 64 << 20


def frags_of(n):
    # scattered 4 KiB pages, as a NIC's page pool hands them out
    return [((i * 7919) % (SIZE // 4096) * 4096, 4096) for i in range(n)]


def python_loop(rx, iters):
    recv = rx.recv
    t0 = time.perf_counter_ns()
    for _ in range(iters):
        recv().release()
    return (time.perf_counter_ns() - t0) / iters


def python_with_loop(rx, iters):
    recv = rx.recv
    t0 = time.perf_counter_ns()
    for _ in range(iters):
        with recv() as f:
            pass
    return (time.perf_counter_ns() - t0) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()

    ls = socket.create_server(("127.0.0.1", 0))
    peer = socket.create_connection(ls.getsockname())
    conn, _ = ls.accept()
    cfd = conn.dup()  # the C side's own descriptor
    ctx = dm.Context()
    # the fake kernel's fragments carry no bytes: a memfd stands in for the
    # dma-buf, and the addresses are never dereferenced
    imp = dm.Buffer(ctx, SIZE, "import", fd=fake.dmabuf_stand_in(SIZE),
                    segments=[(0, SIZE, 0x7f0000000000)], view_cap=SIZE)
    rx = dm.Rx(ctx, conn)
    rx.add_buf(BINDING, imp)
    fake.attach(rx, BINDING)
    fake.attach(cfd, BINDING)
    print("# Rx.recv + release through Python vs devmemtcp_rx_recv + devmemtcp_rx_release in C,")
    print("# same process, fake kernel; %d calls per run, best of %d; releases from any thread: %s"
          % (a.iterations, a.repeat, dm.RELEASE_ANY_THREAD))
    print("%-10s %10s %12s %12s %12s %10s" % ("frags/call", "C ns", "Python ns", "with-block",
                                                  "overhead ns", "target"))
    worst = 0.0
    for n in (1, 16, 256):
        f = frags_of(n)
        fake.cycle(rx, f)
        fake.cycle(cfd, f)
        c, p, w = [], [], []
        for _ in range(a.repeat):
            c.append(fake.bench_c(cfd, a.iterations, 1024, 4 << 20, BINDING, SIZE))
            p.append(python_loop(rx, a.iterations))
            w.append(python_with_loop(rx, a.iterations))
        cb, pb, wb = min(c), min(p), min(w)
        over = pb - cb
        worst = max(worst, over, wb - cb)
        print("%-10d %10.0f %12.0f %12.0f %12.0f %10s   (median C %.0f, Python %.0f)"
              % (n, cb, pb, wb, over, "<= 2000", statistics.median(c), statistics.median(p)))
    rx.flush()
    st = fake.stats(rx)
    assert st["outstanding"] == 0 and st["bad"] == 0, st
    print("# worst overhead %.0f ns per call: %s" % (worst, "within" if worst <= 2000 else "ABOVE"),
          "the 2 us target")
    rx.close()
    peer.close()


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Reference counting: 100k receive/release cycles leave memory flat
(tracemalloc and RSS) and no token outstanding, in the kernel's books and
in the library's."""

import gc
import os
import tracemalloc

import numpy as np
import pytest

CYCLES = 100_000
# AddressSanitizer keeps freed memory in quarantine: RSS says nothing then
# (its own checks stand in for it)
ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")
RSS_LIMIT = 1 << 40 if ASAN else 1 << 20
FRAGS = [(i * 4096, 4096) for i in range(8)] + [(0, 200, 1)]


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def explicit(rx):
    f = rx.recv()
    f.release()


def with_block(rx):
    with rx.recv() as f:
        f.nbytes


def collected(rx):
    f = rx.recv()
    f[3]
    f.linear
    del f


def gathered(rx):
    f = rx.recv()
    f.ranges()
    f.gather_into(DST)


DST = np.zeros(9 * 4096, np.uint8)


def run(rx, step, n):
    for _ in range(n):
        step(rx)


@pytest.mark.parametrize("step", [explicit, with_block, collected, gathered])
def test_flat_memory(rx, fake, hostmem, step):
    fake.cycle(rx, FRAGS)
    run(rx, step, 5000)                  # warm up caches, arenas, freelists
    gc.collect()
    tracemalloc.start()
    r0 = rss()
    t0, _ = tracemalloc.get_traced_memory()
    run(rx, step, CYCLES)
    gc.collect()
    t1, _ = tracemalloc.get_traced_memory()
    r1 = rss()
    tracemalloc.stop()
    print("%s: tracemalloc %+d bytes, RSS %+d KiB over %d cycles"
          % (step.__name__, t1 - t0, (r1 - r0) // 1024, CYCLES))
    assert t1 - t0 < 16 << 10
    assert r1 - r0 < RSS_LIMIT
    rx.flush()
    st = fake.stats(rx)
    assert st["outstanding"] == 0 and st["bad"] == 0
    assert st["freed"] == st["frags"] == 8 * (CYCLES + 5000)
    assert rx.stats()["tokens_outstanding"] == 0
    assert hostmem.buf.held == 0


def test_flat_memory_dlpack_views(rx, fake, hostmem):
    """Views made and dropped: 20k cycles through numpy."""
    fake.cycle(rx, [(0, 4096), (4096, 4096)])

    def step(r):
        f = r.recv()
        a = np.from_dlpack(f)
        f.release()
        del a

    run(rx, step, 2000)
    gc.collect()
    tracemalloc.start()
    r0 = rss()
    t0, _ = tracemalloc.get_traced_memory()
    run(rx, step, 20_000)
    gc.collect()
    t1, _ = tracemalloc.get_traced_memory()
    r1 = rss()
    tracemalloc.stop()
    print("views: tracemalloc %+d bytes, RSS %+d KiB" % (t1 - t0, (r1 - r0) // 1024))
    assert t1 - t0 < 16 << 10 and r1 - r0 < RSS_LIMIT
    rx.flush()
    st = fake.stats(rx)
    assert (st["outstanding"], st["bad"], st["freed"]) == (0, 0, 2 * 22_000)

# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""fork(): a parent holds fragments of a receiver and a buffer while
children fork, receive on handles of their own, try the parent's, let go of
everything and exit.  No child hands back a parent's token (the fake
kernel's books, copied into each child, count every DONTNEED the child
makes), a child's call on the parent's receiver raises devmemtcp.Error with
EBADFD and the message saying why, and the parent's fragments go back after
the children are gone, once each (python/README.md, "fork")."""

import errno
import gc
import sys

import pytest

import devmemtcp as dm
from conftest import BINDING, FORK_REFUSED, Conn, fake_rx, in_child


def test_fork_children_never_return_parents_tokens(ctx, rx, hostmem, fake):
    fake.push(rx, [(0, 4096), (8192, 4096), (0, 100, fake.LINEAR), (65536, 4096)])
    held = rx.recv()
    assert hostmem.buf.held == 3 * 4096
    parent = fake.stats(rx)
    assert parent["outstanding"] == 3

    def child(k):
        unraisable = []
        sys.unraisablehook = unraisable.append
        # the parent's receiver: refused, saying why
        fake.push(rx, [(16384, 4096)])
        with pytest.raises(dm.Error) as e:
            rx.recv()
        # ERRORS devmemtcp_rx_recv EBADFD
        assert e.value.errno == errno.EBADFD
        assert e.value.strerror == FORK_REFUSED % ("devmemtcp_rx_recv", "receiver")
        # views of what the parent received still read (the memory is
        # shared); handing the tokens back is refused
        assert held.read()[:4096] == hostmem.mem[0:4096]
        with pytest.raises(dm.Error) as e:
            held.release()
        # ERRORS devmemtcp_rx_release EBADFD
        assert e.value.errno == errno.EBADFD
        assert e.value.strerror == FORK_REFUSED % ("devmemtcp_rx_release", "receiver")
        with pytest.raises(dm.Error) as e:
            rx.flush()
        # ERRORS devmemtcp_rx_flush EBADFD
        assert e.value.errno == errno.EBADFD
        assert e.value.strerror == FORK_REFUSED % ("devmemtcp_rx_flush", "receiver")
        # work of its own, on the inherited context and buffer
        conn = Conn()
        with fake_rx(ctx, conn.server, hostmem.buf) as mine:
            fake.push(mine, [(4096 * (20 + k), 4096)])
            with mine.recv() as f:
                assert f.read() == hostmem.mem[4096 * (20 + k):4096 * (21 + k)]
            mine.flush()
            st = fake.stats(mine)
            assert st["outstanding"] == 0 and st["freed"] == 1, st
        conn.close()
        # letting go of the parent's: only this process's copies go
        rx.close()
        hostmem.buf.close()
        gc.collect()
        st = fake.stats(conn_fd)
        assert st["dontneed_calls"] == parent["dontneed_calls"], st
        assert st["outstanding"] == 3 and st["freed"] == parent["freed"], st
        assert not unraisable, [u.exc_value for u in unraisable]

    conn_fd = rx.fileno()
    for k in range(3):
        out = in_child(lambda: child(k))
        assert out == "", out

    # the parent's are out still, and go back once each
    assert fake.stats(rx)["outstanding"] == 3
    assert hostmem.buf.held == 3 * 4096
    held.release()
    rx.flush()
    st = fake.stats(rx)
    assert st["outstanding"] == 0 and st["bad"] == 0
    assert st["freed"] == parent["freed"] + 3
    assert hostmem.buf.held == 0
    fake.push(rx, [(0, 4096)])
    with rx.recv() as f:
        assert f.read() == hostmem.mem[0:4096]


def test_fork_child_drops_parents_fragments_silently(rx, hostmem, fake):
    """A child that lets the parent's Fragments be collected (a DataLoader
    worker exiting) prints nothing and returns nothing."""
    fake.push(rx, [(0, 4096), (4096, 4096)])
    held = rx.recv()
    before = fake.stats(rx)

    def child():
        nonlocal held
        unraisable = []
        sys.unraisablehook = unraisable.append
        del held
        gc.collect()
        st = fake.stats(conn_fd)
        assert st["dontneed_calls"] == before["dontneed_calls"], st
        assert not unraisable, [u.exc_value for u in unraisable]

    conn_fd = rx.fileno()
    assert in_child(child) == ""
    assert fake.stats(rx)["outstanding"] == 2
    held.release()
    rx.flush()
    assert fake.stats(rx)["outstanding"] == 0

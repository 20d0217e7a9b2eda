# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Object lifecycles: close() is deterministic and idempotent, closed
objects refuse use, and what something still uses outlives close()."""

import errno
import gc
import os

import pytest

import devmemtcp as dm
from conftest import BINDING


def test_context_close():
    c = dm.Context()
    assert not c.closed
    c.close()
    c.close()
    assert c.closed
    with pytest.raises(ValueError, match="^operation on a closed Context$"):
        c.queues("lo")
    with pytest.raises(ValueError, match="^operation on a closed Context$"):
        dm.Rx(c, 0)


def test_with_closes(ctx, hostmem, conn):
    with dm.Rx(ctx, conn.server) as r:
        assert not r.closed
    assert r.closed
    with pytest.raises(ValueError, match="^operation on a closed Rx$"):
        r.recv()
    for op in (r.stats, r.flush, r.fileno, lambda: r.add_buf(1, hostmem.buf)):
        with pytest.raises(ValueError, match="^operation on a closed Rx$"):
            op()
    with hostmem.buf as b:
        pass
    assert b.closed
    with pytest.raises(ValueError, match="^operation on a closed Buffer$"):
        b.read(0, 1)


def test_rx_keeps_its_own_descriptor(ctx, conn, fake, hostmem):
    """The receiver works on a duplicate: closing the caller's socket
    object does not pull the descriptor (and the tokens) from under it."""
    r = dm.Rx(ctx, conn.server)
    fd = r.fileno()
    assert fd != conn.server.fileno()
    r.add_buf(BINDING, hostmem.buf)
    fake.attach(r, BINDING)
    conn.server.close()
    fake.push(r, [(0, 4096)])
    with r.recv() as f:
        assert f.nbytes == 4096
    r.close()
    with pytest.raises(OSError) as e:
        os.fstat(fd)
    assert e.value.errno == errno.EBADF
    fake.detach(fd)


def test_rx_close_with_live_fragments(ctx, conn, fake, hostmem):
    """close() with fragments still alive: the receiver is closed for use,
    the tokens go back when the fragments go, then the descriptor closes."""
    r = dm.Rx(ctx, conn.server)
    fd = r.fileno()
    r.add_buf(BINDING, hostmem.buf)
    fake.attach(r, BINDING)
    fake.push(r, [(0, 4096), (4096, 4096)])
    f = r.recv()
    r.close()
    assert r.closed
    os.fstat(fd)                  # still open: f holds the receiver
    assert fake.stats(fd)["outstanding"] == 2
    data = f.read()
    assert data == hostmem.mem[0:8192]
    f.release()
    st = fake.stats(fd)
    assert (st["outstanding"], st["freed"], st["bad"]) == (0, 2, 0)
    with pytest.raises(OSError):
        os.fstat(fd)
    fake.detach(fd)


def test_buffer_close_while_used(ctx, conn, fake, hostmem):
    """A buffer closed while a receiver maps through it stays alive."""
    r = dm.Rx(ctx, conn.server)
    r.add_buf(BINDING, hostmem.buf)
    fake.attach(r, BINDING)
    hostmem.buf.close()
    fake.push(r, [(12288, 4096)])
    with r.recv() as f:
        assert f[0].addr == hostmem.base + 12288
        assert f.read() == hostmem.mem[12288:16384]
    fd = r.fileno()
    r.close()
    fake.detach(fd)


def test_context_close_while_objects_live(conn, fake):
    c = dm.Context()
    r = dm.Rx(c, conn.server)
    c.close()
    fake.attach(r, 1)
    fake.push(r, [(0, 4096)])
    with r.recv() as f:
        assert f[0].flags == dm.FRAG_FOREIGN
    fd = r.fileno()
    r.close()
    fake.detach(fd)


def test_garbage_collected_objects(ctx, conn, fake, hostmem):
    r = dm.Rx(ctx, conn.server)
    fd = r.fileno()
    r.add_buf(BINDING, hostmem.buf)
    fake.attach(r, BINDING)
    fake.push(r, [(0, 4096)])
    f = r.recv()
    del r
    gc.collect()
    assert fake.stats(fd)["outstanding"] == 1
    del f
    gc.collect()
    assert fake.stats(fd)["outstanding"] == 0
    with pytest.raises(OSError):
        os.fstat(fd)
    fake.detach(fd)


def test_binding_needs_a_factory():
    with pytest.raises(TypeError, match=r"^use Binding.rx\(\) or Binding.tx\(\)$"):
        dm.Binding()


def test_reinit_refused(ctx):
    with pytest.raises(RuntimeError, match="^Context is already initialised$"):
        ctx.__init__()


def test_buffer_properties(hostmem):
    b = hostmem.buf
    assert b.size == hostmem.size and b.fd == hostmem.fd
    assert b.provider == dm.PROVIDER_IMPORT
    assert b.device == (dm.kDLCPU, 0)
    assert b.segments == [(0, hostmem.size, hostmem.base)]
    assert b.addr(4096) == hostmem.base + 4096
    assert b.view_cap == hostmem.size // 2
    b.view_cap = 12345
    assert b.view_cap == 12345


def test_queues_of_loopback(ctx):
    q = ctx.queues("lo")
    assert {(x.type, x.id) for x in q} >= {(dm.QUEUE_RX, 0), (dm.QUEUE_TX, 0)}
    assert all(x.ifindex == 1 and x.dmabuf_id == 0 for x in q)
    assert ctx.queues(1) == q

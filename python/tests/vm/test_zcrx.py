# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""vm suite: io_uring zero-copy receive (Zcrx, Rx(..., zcrx=z)) through the
real kernel and the simulated NIC, in the QEMU guest; the same checks as
tests/vm/test-zcrx.c: every payload byte against the sender's pattern,
the fragments and tokens counted, the NIC and its queues as before.
Kernels before 6.15 check the EOPNOTSUPP and its message."""

import contextlib
import errno
import gc
import os
import socket
import struct
import threading
import time

import pytest

import devmemtcp as dm
from test_vm import IF, RX_ADDR, expect, kernel, nic_state, send
from test_vm import setup_module  # noqa: F401  (the namespaces, this process in dmtB)

QUEUE = 3
BUF_SIZE = 32 << 20

needs_zcrx = pytest.mark.skipif(kernel() < 615, reason="io_uring zcrx needs Linux 6.15")


@pytest.fixture
def ctx():
    with dm.Context() as c:
        yield c


def io_uring_queues(ctx):
    return [q.id for q in ctx.queues(IF) if q.io_uring]


def test_zcrx_support(ctx):
    """Before 6.15 the clear EOPNOTSUPP; from 6.15 the probe says yes."""
    if kernel() >= 615:
        p = dm.Nic.probe(ctx, IF)
        print("zcrx support: probe on %s: io_uring_queues %d"
              % (os.uname().release, p["io_uring_queues"]))
        assert p["io_uring_queues"] == 0
        return
    with dm.Buffer(ctx, 1 << 20) as buf:
        with pytest.raises(dm.Error) as e:
            dm.Zcrx(ctx, IF, QUEUE, buf)
    print("zcrx support:", e.value)
    assert e.value.errno == errno.EOPNOTSUPP
    assert e.value.strerror == (
        "io_uring zero-copy receive needs Linux 6.15 (6.16 for dma-buf areas): "
        "this kernel is %s" % os.uname().release)


def transfer(ctx, port, total, dmabuf_area):
    before = nic_state(ctx)
    t0 = time.monotonic()
    flows = ["tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port)]
    with dm.Nic(ctx, IF, queues=[QUEUE], flows=flows), \
            dm.Buffer(ctx, BUF_SIZE) as buf, \
            dm.Zcrx(ctx, IF, QUEUE, buf, dmabuf_area=dmabuf_area) as z:
        assert (z.ifname, z.queue, z.buffer) == (IF, QUEUE, buf)
        assert io_uring_queues(ctx) == [QUEUE]
        ls = socket.create_server((RX_ADDR, port))
        sender = send(port, total)
        conn, _ = ls.accept()
        ls.close()
        pos = recvs = 0
        with conn, dm.Rx(ctx, conn, zcrx=z, max_bytes=1 << 20) as rx:
            while True:
                f = rx.recv()
                if not f:
                    break
                for fr in f:
                    assert fr.flags == 0 and 0 < fr.len and fr.offset + fr.len <= BUF_SIZE, fr
                    assert fr.binding_id == 0
                data = f.read()
                assert data == expect(pos, len(data)), "bad bytes at stream offset %d" % pos
                pos += len(data)
                recvs += 1
                f.release()
            assert sender.wait(60) == 0
            rx.flush()
            rs = rx.stats()
            st = z.stats()
        secs = time.monotonic() - t0
        print("zcrx %s: %d bytes in %d receives, every byte checked: %d frags, %d bytes, "
              "%d completions, %d io_uring_enter, %d refills (%d waiting), held max %d, "
              "copy fallbacks %d, area %d x %d B, %.1f s"
              % ("dma-buf area" if dmabuf_area else "user-memory area", pos, recvs,
                 st["frags"], st["bytes"], st["completions"], st["enter_calls"],
                 st["refills"], st["refill_waiting"], st["held_max"], st["copy_count"],
                 st["area_buffers"], st["buffer_size"], secs))
        assert pos == total and st["bytes"] == total
        assert st["dmabuf_area"] == (1 if dmabuf_area else 0)
        assert rs["frags"] == st["frags"] and rs["dmabuf_bytes"] == total
        assert rs["linear_bytes"] == 0
        assert rs["tokens_outstanding"] == 0 and rs["tokens_released"] == rs["frags"]
        # more bytes than the area: buffers went round through the refill ring
        assert st["held"] == 0 and st["refills"] + st["refill_waiting"] == st["frags"]
        assert st["frags"] >= total // 4096
        assert st["steering_misses"] == 0 and rs["steering_misses"] == 0
        assert st["copy_count"] <= 0
        assert st["enter_calls"] < st["frags"]
        assert buf.held == 0
    # the queue is released when close() returns: the NIC is as before
    assert io_uring_queues(ctx) == []
    assert nic_state(ctx) == before


@needs_zcrx
def test_zcrx_transfer(ctx):
    """64 MiB through a user-memory area of a 32 MiB udmabuf."""
    transfer(ctx, 7101, 64 << 20, False)


@needs_zcrx
@pytest.mark.skipif(kernel() < 616, reason="dma-buf areas need Linux 6.16")
def test_zcrx_transfer_dmabuf_area(ctx):
    """The same through the udmabuf registered as a dma-buf area."""
    transfer(ctx, 7102, 64 << 20, True)


@needs_zcrx
def test_zcrx_outlives_close(ctx):
    """Zcrx.close() while a receiver uses it: the receiver keeps the ring
    until it is closed, and receives to the end."""
    port, total = 7103, 4 << 20
    flows = ["tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port)]
    with dm.Nic(ctx, IF, queues=[QUEUE], flows=flows), dm.Buffer(ctx, BUF_SIZE) as buf:
        z = dm.Zcrx(ctx, IF, QUEUE, buf)
        conn = rx = None
        try:
            ls = socket.create_server((RX_ADDR, port))
            sender = send(port, total)
            conn, _ = ls.accept()
            ls.close()
            rx = dm.Rx(ctx, conn, zcrx=z)
            assert z.wait(timeout=30) == 1      # the sender's first bytes
            z.close()
            assert z.closed
            with pytest.raises(ValueError):
                z.stats()
            assert io_uring_queues(ctx) == [QUEUE]
            pos = 0
            while True:
                with rx.recv() as f:
                    if not f:
                        break
                    data = f.read()
                    assert data == expect(pos, len(data))
                    pos += len(data)
            assert pos == total and sender.wait(60) == 0
            rx.close()          # the last reference: the queue goes back now
            assert io_uring_queues(ctx) == []
        finally:
            for o in (rx, conn, z):
                if o is not None:
                    o.close()
        print("zcrx after close(): %d bytes checked, queue released with the receiver" % pos)


@needs_zcrx
def test_zcrx_recv_timeout(ctx):
    """A zcrx receiver honours timeouts as a devmem one does: recv(timeout=)
    and the socket's settimeout() raise TimeoutError (errno ETIMEDOUT) when
    nothing came within them (completions of another socket of the ring do
    not extend the wait), SO_RCVTIMEO on a blocking socket likewise; the
    socket's flags and SO_RCVTIMEO are as they were; then the stream is
    received whole."""
    port, total = 7108, 1 << 20
    flows = ["tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port),
             "tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port + 1)]
    with dm.Nic(ctx, IF, queues=[QUEUE], flows=flows), \
            dm.Buffer(ctx, BUF_SIZE) as buf, dm.Zcrx(ctx, IF, QUEUE, buf) as z:
        ls = socket.create_server((RX_ADDR, port))
        ls2 = socket.create_server((RX_ADDR, port + 1))
        sender = send(port, total, delay=8.0)    # connects now, sends in 8 s
        conn, _ = ls.accept()
        other = send(port + 1, total)            # the ring's other socket: at once
        conn2, _ = ls2.accept()
        ls.close()
        ls2.close()
        with conn, conn2, dm.Rx(ctx, conn, zcrx=z) as rx, dm.Rx(ctx, conn2, zcrx=z) as rx2:
            rcvtimeo = conn.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)
            for timeout, slack in ((0, 0.5), (0.3, 1.5)):
                t0 = time.monotonic()
                with pytest.raises(dm.TimeoutError) as e:
                    rx.recv(timeout=timeout)
                took = time.monotonic() - t0
                assert e.value.errno == errno.ETIMEDOUT
                assert isinstance(e.value, TimeoutError)
                assert e.value.strerror == "Rx.recv: no data within the timeout"
                assert timeout <= took < timeout + slack, took
            assert conn.getblocking() and conn.gettimeout() is None
            assert conn.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16) == rcvtimeo
            conn.settimeout(0.3)
            t0 = time.monotonic()
            with pytest.raises(dm.TimeoutError) as e:
                rx.recv()
            assert 0.3 <= time.monotonic() - t0 < 1.8
            assert e.value.strerror == "Rx.recv: no data within the socket's timeout (settimeout())"
            assert conn.gettimeout() == 0.3
            conn.settimeout(None)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                            struct.pack("ll", 0, 300000))
            t0 = time.monotonic()
            with pytest.raises(dm.TimeoutError) as e:
                rx.recv()
            assert 0.3 <= time.monotonic() - t0 < 1.8
            assert e.value.strerror == "Rx.recv: no data within the socket's SO_RCVTIMEO"
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, rcvtimeo)
            # the other socket's bytes came meanwhile, and are its own
            pos2 = 0
            while True:
                with rx2.recv() as f:
                    if not f:
                        break
                    data = f.read()
                    assert data == expect(pos2, len(data))
                    pos2 += len(data)
            assert pos2 == total and other.wait(60) == 0
            # and a timeout long enough takes the delayed sender's first bytes
            pos = 0
            while pos < total:
                with rx.recv(timeout=60) as f:
                    assert f, "end of stream at %d" % pos
                    data = f.read()
                    assert data == expect(pos, len(data)), "bad bytes at %d" % pos
                    pos += len(data)
            with rx.recv(timeout=60) as f:
                assert not f
            assert sender.wait(60) == 0
    print("zcrx timeouts: recv(timeout=0/0.3), settimeout(0.3), SO_RCVTIMEO 0.3 s expired "
          "as asked; %d + %d bytes checked" % (pos2, pos))


@needs_zcrx
def test_zcrx_errors(ctx):
    """The library's errors with errno and message: a second handle on the
    queue, a queue out of range, another thread driving the ring."""
    flows = ["tcp4 dst-ip %s dst-port 7104" % RX_ADDR]
    with dm.Nic(ctx, IF, queues=[QUEUE], flows=flows), \
            dm.Buffer(ctx, BUF_SIZE) as buf, dm.Zcrx(ctx, IF, QUEUE, buf) as z:
        with pytest.raises(dm.Error) as e:
            dm.Zcrx(ctx, IF, QUEUE, buf)
        assert e.value.errno == errno.EEXIST
        assert e.value.strerror == (
            "queue %d of %s already has a memory provider (a dma-buf binding or another zcrx), "
            "or an XDP program is attached to %s: pick another queue or release it"
            % (QUEUE, IF, IF))
        with pytest.raises(dm.Error) as e:
            dm.Zcrx(ctx, IF, 99, buf)
        assert e.value.errno == errno.ERANGE
        assert e.value.strerror == (
            "%s has no RX queue 99: pick a queue below its RX queue count (ethtool -l %s)"
            % (IF, IF))
        # this thread drives the ring from now on
        t0 = time.monotonic()
        assert z.wait(timeout=0.2) == 0
        assert time.monotonic() - t0 >= 0.15
        got = []

        def other():
            try:
                z.wait(timeout=0)
            except dm.Error as ex:
                got.append(ex)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        print("zcrx errors: another thread:", got[0])
        assert got[0].errno == errno.EBUSY
        assert got[0].strerror == (
            "the zcrx handle of %s queue %d is driven by another thread: receive on all its "
            "sockets from that one thread (io_uring single issuer)" % (IF, QUEUE))
    assert io_uring_queues(ctx) == []
    # header split is off again: the kernel refuses, the library says why
    with dm.Buffer(ctx, 1 << 20) as buf:
        with pytest.raises(dm.Error) as e:
            dm.Zcrx(ctx, IF, QUEUE, buf)
    assert e.value.errno == errno.EINVAL
    assert e.value.strerror == (
        "header split is off on %s: enable it (ethtool -G %s tcp-data-split on) or set "
        "the NIC up with devmemtcp_nic_open()" % (IF, IF))


# ---- races, forced with the extension's test points (test builds) ---------

ext = dm._devmemtcp
needs_hooks = pytest.mark.skipif(not hasattr(ext, "_test_park"),
                                 reason="needs the test points (-Dtest_hooks=true)")


def freed(what):
    return ext._test_freed().get(what, 0)


@contextlib.contextmanager
def parked(point, fn, *args, **kw):
    """fn(*args, **kw) on another thread, held at test point `point`
    (without the GIL) for the block; yields the list that gets its result."""
    out = []

    def run():
        try:
            out.append(fn(*args, **kw))
        except BaseException as e:  # noqa: B036 - handed to the test
            out.append(e)

    ext._test_park(point)
    t = threading.Thread(target=run)
    t.start()
    try:
        while not ext._test_wait_parked(0.05):
            assert t.is_alive(), "the call ended without reaching %s: %r" % (point, out)
        yield out
    finally:
        ext._test_resume()
        t.join(30)
    assert not t.is_alive()


@needs_zcrx
@needs_hooks
def test_zcrx_wait_and_recv_vs_close(ctx):
    """Zcrx.close() while wait() runs without the GIL on another thread,
    and Rx.close() with Zcrx.close() while recv() does: the call finishes
    on the handles it started with, which are freed (the queue released)
    when it returns, not before."""
    port, total = 7105, 1 << 20
    flows = ["tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port)]
    gc.collect()
    with dm.Nic(ctx, IF, queues=[QUEUE], flows=flows), dm.Buffer(ctx, BUF_SIZE) as buf:
        for _ in range(10):
            z = dm.Zcrx(ctx, IF, QUEUE, buf)
            n0 = freed("Zcrx")
            with parked("Zcrx.wait", z.wait, timeout=0) as out:
                z.close()
                assert z.closed and freed("Zcrx") == n0
                assert io_uring_queues(ctx) == [QUEUE]
            assert out == [0]
            assert freed("Zcrx") == n0 + 1 and io_uring_queues(ctx) == []
        z = dm.Zcrx(ctx, IF, QUEUE, buf)
        ls = socket.create_server((RX_ADDR, port))
        sender = send(port, total)
        conn, _ = ls.accept()
        ls.close()
        rx = dm.Rx(ctx, conn, zcrx=z)
        n0 = (freed("Rx"), freed("Zcrx"))
        with parked("Rx.recv", rx.recv) as out:
            rx.close()
            z.close()
            assert (freed("Rx"), freed("Zcrx")) == n0
            assert io_uring_queues(ctx) == [QUEUE]
        f = out[0]
        assert isinstance(f, dm.Fragments) and f.nbytes > 0, f
        data = f.read()
        assert data == expect(0, len(data))
        # the Fragments holds the receiver, the receiver the ring
        assert (freed("Rx"), freed("Zcrx")) == n0
        f.release()
        assert (freed("Rx"), freed("Zcrx")) == (n0[0] + 1, n0[1] + 1)
        assert io_uring_queues(ctx) == []
        conn.close()
        sender.wait(60)     # reset by the close: its status does not matter
        print("zcrx races: wait and recv vs close, %d bytes of the first receive checked"
              % len(data))


@needs_zcrx
@needs_hooks
def test_zcrx_frees_release_the_gil(ctx):
    """The last reference of a zcrx receiver may block (the cancel of its
    socket's receive, the ring's wait for the kernel to release the
    queue): dropped by a Fragments' release after Rx.close() and
    Zcrx.close(), or by the collection of an Rx never closed, it is dropped
    without the GIL: parked there, this thread runs on; then the receiver
    and the ring are freed and the queue released."""
    port, total = 7109, 1 << 20
    flows = ["tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port),
             "tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port + 1)]
    gc.collect()
    with dm.Nic(ctx, IF, queues=[QUEUE], flows=flows), dm.Buffer(ctx, BUF_SIZE) as buf:
        for k, how in enumerate(("release", "collect")):
            z = dm.Zcrx(ctx, IF, QUEUE, buf)
            ls = socket.create_server((RX_ADDR, port + k))
            sender = send(port + k, total)
            conn, _ = ls.accept()
            ls.close()
            rx = dm.Rx(ctx, conn, zcrx=z)
            f = rx.recv()
            assert f.read() == expect(0, f.nbytes)
            n0 = (freed("Rx"), freed("Zcrx"))
            z.close()
            if how == "release":
                rx.close()
                drop = f.release
            else:
                f.release()
                held = [rx]
                del rx
                drop = held.clear
            with parked("Rx.free(zcrx)", drop) as out:
                # this thread holds the GIL meanwhile
                assert (freed("Rx"), freed("Zcrx")) == n0
                assert io_uring_queues(ctx) == [QUEUE]
            assert out == [None]
            assert (freed("Rx"), freed("Zcrx")) == (n0[0] + 1, n0[1] + 1)
            assert io_uring_queues(ctx) == []
            conn.close()
            sender.wait(60)     # reset by the close: its status does not matter
            print("zcrx free by %s: without the GIL, the queue released after" % how)

# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""vm suite: the binding over the real kernel devmem path and the simulated
NIC, in the QEMU guest (python/tests/vm/run-vm-python.sh).  The sender is
examples/python/sender.py in namespace dmtA (dsim0, 10.77.0.1); this
process moves itself into dmtB (dsim1, 10.77.0.2)."""

import ctypes
import errno
import faulthandler
import gc
import os
import re
import socket
import subprocess
import sys
import threading
import time

from array import array

import pytest

import devmemtcp as dm
from devmemtcp._pattern import pattern
from conftest import Legacy, Versioned, capi, spinner

IF = "dsim1"
RX_ADDR = "10.77.0.2"
HERE = os.path.dirname(os.path.abspath(__file__))
SENDER = os.path.join(HERE, "..", "..", "..", "examples", "python", "sender.py")


def setup_module():
    """The two namespaces of the vm suite, and this process in dmtB."""
    if not os.path.exists("/var/run/netns/dmtB"):
        for cmd in ("netns add dmtA", "netns add dmtB",
                    "link set dsim0 netns dmtA", "link set dsim1 netns dmtB",
                    "-n dmtA addr add 10.77.0.1/24 dev dsim0",
                    "-n dmtB addr add 10.77.0.2/24 dev dsim1",
                    "-n dmtA link set dsim0 up", "-n dmtB link set dsim1 up",
                    "-n dmtA link set lo up", "-n dmtB link set lo up"):
            subprocess.run(["ip"] + cmd.split(), check=True)
    enter_ns("dmtB")


def send(port, nbytes, delay=0.0):
    return subprocess.Popen(["ip", "netns", "exec", "dmtA", sys.executable, SENDER,
                             "stream", RX_ADDR, str(port),
                             str(nbytes), "--delay", str(delay)])


def expect(pos, n):
    """n bytes of the pattern from stream position pos."""
    return pattern(pos, n)


def kernel():
    major, minor = os.uname().release.split(".")[:2]
    return int(major) * 100 + int(minor)


@pytest.fixture
def ctx():
    with dm.Context() as c:
        yield c


def nic_state(ctx):
    p = dm.Nic.probe(ctx, IF)
    keys = ("tcp_data_split", "hds_thresh", "ntuple", "ntuple_rules",
            "rss_context_count", "dmabuf_queues", "rx_queues")
    return {k: p[k] for k in keys}


def test_bind_with_header_split_off(ctx):
    """First: nothing has turned header split on yet."""
    with dm.Buffer(ctx, 1 << 20) as buf:
        with pytest.raises(dm.Error) as e:
            dm.Binding.rx(ctx, IF, [3], buf)
    print("bind-rx:", e.value)
    if kernel() >= 614:
        assert e.value.errno == errno.EINVAL
        assert e.value.strerror == (
            'bind-rx on dsim1 failed: enable header split on dsim1: ethtool -G dsim1 '
            'tcp-data-split on (or use devmemtcp_nic_open()) (kernel: "tcp-data-split is disabled")')
    else:
        assert e.value.strerror.startswith("bind-rx on dsim1 failed")


def test_errors_carry_errno_and_message(ctx):
    with pytest.raises(dm.Error) as e:
        dm.Nic(ctx, "dsim9")
    assert e.value.errno == errno.ENODEV
    assert e.value.strerror == 'no interface "dsim9" in this network namespace (see ip link show)'
    with dm.Buffer(ctx, 1 << 20) as buf:
        if kernel() < 616:
            with pytest.raises(dm.Error) as e:
                dm.Binding.tx(ctx, IF, buf)
            assert e.value.errno == errno.EOPNOTSUPP
            assert e.value.strerror == (
                "bind-tx on dsim1 failed: this kernel (%s) has no bind-tx netlink command: "
                "devmem TX needs Linux 6.16 or newer (RX works from 6.12)" % os.uname().release)
        with pytest.raises(dm.Error) as e:
            dm.Nic(ctx, IF, queues=[3], flows=["tcp4 dst-port 6000 queue 1"], buf=buf)
        assert e.value.errno == errno.ERANGE
        assert e.value.strerror == ("dsim1: flow 0: queue index 1 is out of range: "
                                    "the handle has 1 devmem queues (indexes 0-0)")
    assert nic_state(ctx)["dmabuf_queues"] == 0


def test_udmabuf_buffer(ctx):
    with dm.Buffer(ctx, 4 << 20) as b:
        assert b.provider == dm.PROVIDER_UDMABUF and b.device == (dm.kDLCPU, 0)
        assert b.size == 4 << 20 and len(b.segments) == 1
        b.write(4096, b"devmem" * 100)
        assert b.read(4096, 600) == b"devmem" * 100
        cap = b.__dlpack__(max_version=(1, 0))
        m = Versioned.from_address(capi.PyCapsule_GetPointer(cap, b"dltensor_versioned"))
        t = m.dl_tensor
        assert (t.device_type, t.ndim, t.shape[0]) == (dm.kDLCPU, 1, 4 << 20)
        assert t.data == b.segments[0][2]
        assert ctypes.string_at(t.data + 4096, 12) == b"devmemdevmem"
        del cap


def test_receive_64mib_through_the_binding(ctx):
    """64 MiB over the simulated NIC into a udmabuf, every byte checked,
    the NIC set up and restored from Python, no token left behind, and a
    second Python thread running while recv() waits."""
    total = 64 << 20
    port = 6601
    before = nic_state(ctx)
    with dm.Buffer(ctx, 32 << 20) as buf, \
            dm.Nic(ctx, IF, queues=[3], flows=["tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port)],
                   buf=buf) as nic:
        during = nic_state(ctx)
        assert nic.queues == (3,) and nic.binding_id > 0
        assert during["tcp_data_split"] == 2     # on
        assert during["hds_thresh"] == (0 if before["hds_thresh"] >= 0 else -1)
        if before["ntuple_rules"] >= 0:
            assert during["ntuple_rules"] == before["ntuple_rules"] + 1
        bound = [q for q in ctx.queues(IF) if q.type == dm.QUEUE_RX and q.dmabuf_id]
        assert [(q.id, q.dmabuf_id) for q in bound] == [(3, nic.binding_id)]

        ls = socket.create_server((RX_ADDR, port))
        sender = send(port, total, delay=1.0)
        conn, _ = ls.accept()
        ls.close()
        with conn, dm.Rx(ctx, conn, max_bytes=1 << 20) as rx:
            rx.add_buf(nic, buf)
            pos, n, st = receive_checked(rx, sender)
            assert buf.held == 0
        print("received %d bytes in %d receives: %d dma-buf bytes in %d fragments, %d linear, "
              "%d tokens released in %d DONTNEED calls, outstanding max %d"
              % (pos, n, st["dmabuf_bytes"], st["frags"], st["linear_bytes"],
                 st["tokens_released"], st["dontneed_calls"], st["tokens_outstanding_max"]))
        assert pos == total and st["bytes"] == total
        assert st["dmabuf_bytes"] > total // 2 and st["steering_misses"] == 0
        assert st["foreign_frags"] == 0
        assert st["tokens_outstanding"] == 0 and st["tokens_released"] == st["frags"]
    gc.collect()
    assert nic_state(ctx) == before
    assert not [q for q in ctx.queues(IF) if q.dmabuf_id]


def receive_checked(rx, sender):
    """Receive to the end, checking every byte; a second thread spins
    while the first receive waits for the (delayed) sender."""
    with spinner() as spins:
        t0 = time.monotonic()
        f = rx.recv()                    # waits ~1 s for the sender
        waited = time.monotonic() - t0
    print("first recv waited %.2f s; the other thread ran %d iterations meanwhile"
          % (waited, spins[0]))
    assert waited > 0.5 and spins[0] > 1000
    pos, n, how = 0, 0, 0
    while f:
        data = f.read()
        assert data == expect(pos, len(data)), "bad bytes at stream offset %d" % pos
        pos += len(data)
        # let go in every way the binding allows
        if how == 0:
            f.release()
        elif how == 1:
            with f:
                pass
        else:
            del f
        how = (how + 1) % 3
        n += 1
        f = rx.recv()
    assert sender.wait(60) == 0
    return pos, n, rx.stats()


def test_views_and_gather_over_the_nic(ctx):
    """Fragments of the real kernel as kDLCPU DLPack views and gathered
    into host memory; tokens held by views go back when the views do."""
    port = 6602
    total = 8 << 20
    with dm.Buffer(ctx, 16 << 20) as buf, \
            dm.Nic(ctx, IF, queues=[2], flows=["tcp4 dst-port %d" % port], buf=buf) as nic:
        ls = socket.create_server((RX_ADDR, port))
        sender = send(port, total)
        conn, _ = ls.accept()
        ls.close()
        with dm.Rx(ctx, conn, max_bytes=256 << 10) as rx:
            rx.add_buf(nic, buf)
            pos = views = gathered = 0
            held = []
            while True:
                # a part of one packet is one device range: a view; more is
                # gathered into host memory through a DLPack producer
                f = rx.recv(max_bytes=1000 if (views + gathered) % 2 else None)
                if not f:
                    break
                try:
                    cap = f.__dlpack__()
                except BufferError:
                    a = array("B", bytes(f.nbytes))
                    assert f.gather_into(_ByteView(a)) == len(a)
                    assert a.tobytes() == expect(pos, len(a))
                    gathered += 1
                    pos += len(a)
                    continue
                t = Legacy.from_address(capi.PyCapsule_GetPointer(cap, b"dltensor")).dl_tensor
                assert ctypes.string_at(t.data, t.shape[0]) == expect(pos, t.shape[0])
                pos += t.shape[0]
                views += 1
                f.release()
                held.append(cap)            # the view keeps the tokens
                del cap
                if len(held) == 4:
                    assert rx.stats()["tokens_outstanding"] > 0
                    held.clear()
            assert sender.wait(60) == 0
            print("%d bytes: %d receives viewed in place, %d gathered" % (pos, views, gathered))
            assert pos == total and views > 0 and gathered > 0
            held.clear()
            rx.flush()
            assert rx.stats()["tokens_outstanding"] == 0
        conn.close()


class _ByteView:
    """A writable host array as a DLPack producer (no numpy in the guest)."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack_device__(self):
        return (dm.kDLCPU, 0)

    def __dlpack__(self, stream=None, max_version=None):
        addr, n = self.arr.buffer_info()
        return _host_capsule(addr, n, self.arr)


_keep = {}


def _host_capsule(addr, n, owner):
    """A legacy DLPack capsule over n bytes at addr, built with ctypes."""
    m = Legacy()
    shape = (ctypes.c_int64 * 1)(n)
    m.dl_tensor.data = addr
    m.dl_tensor.device_type, m.dl_tensor.device_id = dm.kDLCPU, 0
    m.dl_tensor.ndim = 1
    m.dl_tensor.code, m.dl_tensor.bits, m.dl_tensor.lanes = 1, 8, 1
    m.dl_tensor.shape = shape

    @ctypes.CFUNCTYPE(None, ctypes.POINTER(Legacy))
    def deleter(p):
        _keep.pop(ctypes.addressof(p.contents), None)

    m.deleter = deleter
    _keep[ctypes.addressof(m)] = (m, shape, deleter, owner)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(m), b"dltensor", None)


def enter_ns(name):
    """Move the calling thread into network namespace `name`."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/var/run/netns/" + name, os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000):          # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), "setns " + name)
    finally:
        os.close(fd)


def test_send_from_a_dmabuf():
    """Tx: 8 MiB sent from a udmabuf bound with bind-tx on dsim0 (a thread
    in namespace dmtA), received as plain TCP here and checked; every
    range reported done once.  Kernels before 6.16 refuse bind-tx."""
    port, total, slot = 6603, 8 << 20, 1 << 20
    ls = socket.create_server((RX_ADDR, port))
    ls.settimeout(60)                   # a failed sender must not hang us
    got = bytearray()
    result = {}

    def send_side():
        try:
            enter_ns("dmtA")
            with dm.Context() as c, dm.Buffer(c, 4 << 20) as buf:
                if kernel() < 616:
                    try:
                        dm.Binding.tx(c, "dsim0", buf)
                    except dm.Error as e:
                        result["refused"] = e
                    return
                with dm.Binding.tx(c, "dsim0", buf) as b, socket.socket() as s:
                    result["unconnected"] = tx_refused(c, s, b)
                    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                        result["udp"] = tx_refused(c, u, b)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"dsim0")
                    s.connect((RX_ADDR, port))
                    with dm.Tx(c, s, b) as tx:
                        send_ring(tx, buf, result)
        except BaseException as e:      # reported by the test's thread
            result["error"] = e

    def tx_refused(c, sock, b):
        with pytest.raises(dm.Error) as e:
            dm.Tx(c, sock, b)
        return e.value

    def send_ring(tx, buf, result):
        """total bytes through a ring of 4 slots, each rewritten only
        after its previous send was reported done."""
        busy, done, pos = {}, [], 0

        def reap():
            result["progress"] = (pos, dict(busy), tx.stats())
            tx.wait(5000)
            for d in tx.reap():
                done.append(d)
                # a report may cover several sends, adjacent in the buffer
                o, end = d.offset, d.offset + d.len
                while o < end:
                    k = o // slot
                    n = min(end, (k + 1) * slot) - o
                    busy[k] -= n
                    if not busy[k]:
                        del busy[k]
                    o += n

        while pos < total:
            k = (pos // slot) % 4
            while k in busy:
                reap()
            buf.write(k * slot, expect(pos, slot))
            busy[k] = slot
            assert tx.send([(k * slot, slot // 2), (k * slot + slot // 2, slot // 2)]) == slot
            pos += slot
        while busy:
            reap()
        result["stats"] = tx.stats()
        result["done"] = done

    th = threading.Thread(target=send_side, daemon=True)
    th.start()
    try:
        if kernel() >= 616:
            conn, _ = ls.accept()
            conn.settimeout(60)
            while True:
                b = conn.recv(1 << 20)
                if not b:
                    break
                got += b
            conn.close()
    except OSError:
        faulthandler.dump_traceback(all_threads=True)   # where the sender is
        print("received %d bytes; sender at %s" % (len(got), result.get("progress")))
        raise
    th.join(120)
    ls.close()
    if "error" in result:
        raise result["error"]
    if kernel() < 616:
        e = result["refused"]
        assert e.errno == errno.EOPNOTSUPP and "needs Linux 6.16" in e.strerror
        return
    # a Tx takes connected TCP sockets only
    for key, eno, why in (
            ("unconnected", errno.ENOTCONN, "is not connected (Transport endpoint is not connected): "
             "connect() it first, or pass the socket accept() returns"),
            ("udp", errno.EPROTOTYPE, "is not a TCP socket (a datagram socket): "
             "devmem TX needs a connected TCP socket (IPv4 or IPv6)")):
        e = result[key]
        assert e.errno == eno, e
        assert re.fullmatch(r"devmemtcp_tx_new: fd \d+ " + re.escape(why), e.strerror), e.strerror
    st = result["stats"]
    print("tx: %d bytes in %d sendmsg calls, %d completions (%d copied), %d ranges done"
          % (st["bytes_sent"], st["sendmsg_calls"], st["completions"],
             st["copied_completions"], st["ranges_done"]))
    assert len(got) == total and bytes(got) == expect(0, total)
    assert st["bytes_sent"] == total and st["bytes_done"] == total
    assert st["sends_in_flight"] == 0 and st["bytes_in_flight"] == 0
    assert sum(d.len for d in result["done"]) == total


README_PY = os.environ.get("DEVMEMTCP_README_PY")


@pytest.mark.skipif(not README_PY, reason="DEVMEMTCP_README_PY names no README block "
                    "(python/tests/vm/run-vm-python.sh extracts it)")
def test_readme_example(ctx):
    """README.md's Python block, run as a user runs it: it sets dsim1 up for
    TCP port 5201, receives one connection, prints what it received, and
    puts the NIC back as it found it."""
    before = nic_state(ctx)
    nbytes = 8 << 20
    p = subprocess.Popen([sys.executable, README_PY, IF], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    s = send(5201, nbytes)   # the sender retries its connect until the example listens
    out, err = p.communicate(timeout=120)
    assert s.wait(60) == 0
    assert p.returncode == 0, err
    assert out == "received %d bytes\n" % nbytes, (out, err)
    assert nic_state(ctx) == before

# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Threads: a blocking receive releases the GIL, and tokens can go back
from other threads (DLPack deleters) while a receive waits."""

import ctypes
import threading
import time

import numpy as np

import devmemtcp as dm
from conftest import spinner


def test_gil_released_during_blocking_recv(rx, conn):
    timer = threading.Timer(0.5, conn.client.sendall, [b"x" * 1000])
    timer.start()
    with spinner() as count:
        t0 = time.monotonic()
        f = rx.recv()
        waited = time.monotonic() - t0
    timer.join()
    assert waited >= 0.4
    assert f.linear == b"x" * len(f.linear) and len(f.linear) > 0
    # a pure-Python loop makes ~10**6 iterations per 0.1 s; a held GIL, none
    assert count[0] > 10000, count[0]
    f.release()


def while_recv_waits(rx, conn, fn):
    """Run fn on another thread while a third waits in rx.recv(): fn must
    return within a second, the receive still waiting.  Then wake the
    receive with plain bytes.  Returns what fn returned."""
    got, out = [], []
    receiver = threading.Thread(target=lambda: got.append(rx.recv()))
    receiver.start()
    time.sleep(0.2)
    assert receiver.is_alive()             # waiting on the socket
    t0 = time.monotonic()
    helper = threading.Thread(target=lambda: out.append(fn()))
    helper.start()
    helper.join(5)
    assert not helper.is_alive() and time.monotonic() - t0 < 1.0
    assert out and receiver.is_alive()
    conn.client.sendall(b"wake")
    receiver.join(5)
    assert got and got[0].linear == b"wake"
    got[0].release()
    return out[0]


def test_release_from_another_thread_during_recv(rx, conn, fake):
    """The receiving thread waits in recv(); another thread drops the last
    view of earlier fragments (the deleter runs there, without the GIL)
    and flushes: the tokens reach the kernel while recv waits."""
    fake.push(rx, [(0, 4096), (4096, 4096)])
    f = rx.recv()
    cap = f.__dlpack__()
    ptr = ctypes.pythonapi.PyCapsule_GetPointer
    ptr.restype = ctypes.c_void_p
    ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
    from conftest import Legacy
    m = Legacy.from_address(ptr(cap, b"dltensor"))
    ctypes.pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ctypes.pythonapi.PyCapsule_SetName(cap, b"used_dltensor")
    del cap
    f.release()

    def drop_and_flush():
        m.deleter(ctypes.pointer(m))
        rx.flush()
        return fake.stats(rx)["outstanding"]

    assert while_recv_waits(rx, conn, drop_and_flush) == 0
    assert fake.stats(rx)["bad"] == 0


def test_views_deleted_on_other_threads(rx, fake):
    """Many views of many receives, dropped on threads that are not the
    receiving one, in parallel with further receives."""
    arrays = []
    for i in range(64):
        fake.push(rx, [(i * 4096, 4096)])
        with rx.recv() as f:
            arrays.append(np.from_dlpack(f))
    threads = [threading.Thread(target=lambda a=arrays[i::8]: a.clear()) for i in range(8)]
    arrays = None
    for t in threads:
        t.start()
    for _ in range(100):
        fake.push(rx, [(0, 4096)])
        with rx.recv():
            pass
    for t in threads:
        t.join()
    rx.flush()
    st = fake.stats(rx)
    assert (st["outstanding"], st["bad"], st["freed"]) == (0, 0, 164)


def test_concurrent_receivers(rx, fake):
    """Two threads calling recv() on one receiver take turns."""
    fake.cycle(rx, [(0, 4096), (4096, 4096)])
    seen = []

    def loop():
        for _ in range(2000):
            with rx.recv() as f:
                seen.append(len(f))

    ts = [threading.Thread(target=loop) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen == [2] * 4000
    rx.flush()
    st = fake.stats(rx)
    assert (st["outstanding"], st["bad"], st["freed"]) == (0, 0, 8000)
    assert dm.RELEASE_ANY_THREAD is True


def test_add_buf_and_stats_during_recv(ctx, rx, conn, fake):
    """While a receive waits on the socket, another thread registers a
    buffer and reads the statistics without waiting for data; the next
    receive maps the new binding's fragments through that buffer."""
    from conftest import HostMem
    other = HostMem(ctx, 1 << 20)

    def add_and_count():
        rx.add_buf(9, other.buf)
        return rx.stats()["recv_calls"]

    assert while_recv_waits(rx, conn, add_and_count) == 0
    fake.attach(rx, 9)
    fake.push(rx, [(8192, 4096)])
    with rx.recv() as f:
        assert [(x.offset, x.addr, x.binding_id) for x in f] == [(8192, other.base + 8192, 9)]
        assert bytes(f.read()) == other.mem[8192:12288]
    rx.flush()
    assert (fake.stats(rx)["outstanding"], fake.stats(rx)["bad"]) == (0, 0)
    other.close()


def test_add_buf_from_many_threads(rx, hostmem):
    """A receiver takes 16 buffers, however many threads register them."""
    errors = []

    def add(ids):
        for i in ids:
            try:
                rx.add_buf(i, hostmem.buf)
            except ValueError as e:
                errors.append(str(e))

    ts = [threading.Thread(target=add, args=(range(100 + k * 6, 106 + k * 6),)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == ["a receiver takes at most 16 buffers"] * 9

# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Races between a call that uses an object and release() or close() of
that object, forced rather than hoped for.

A call that released the GIL is parked at a test point of the extension
(test builds only: dmtpy_test_point) while the test releases or closes, from
another thread, what the call uses; then it is let go.  A call that runs
Python code (an argument's __index__, a DLPack producer, a garbage
collector callback) is given code that does the release or close itself.
What must hold each time: no use after free (this file runs under
AddressSanitizer in the sanitizer build: `meson test -C build-san
python-races`); the call finishes with what it took (it takes an object
where it checks that it is open, before anything of the above); the
release or close takes effect when the call ends (the extension counts
the handles it frees: _test_freed()), and the tokens go back then, exactly
once (the fake kernel's books).  Each race runs ROUNDS times."""

import contextlib
import ctypes
import gc
import os
import sys
import threading

import numpy as np
import pytest

import devmemtcp as dm
from conftest import BINDING, HostMem, expected_bytes, fake_rx

ROUNDS = 300
ext = dm._devmemtcp
FAKE_CUDA = hasattr(ctypes.CDLL(os.environ["DEVMEMTCP_LIBCUDA"]), "fakecuda_calls") \
    if os.environ.get("DEVMEMTCP_LIBCUDA") else False
NOSUCH = "dmtnosuch0"
# dma-buf fragments, then linear bytes (a steering miss) between them
FRAGS = [(8192, 4096), (0, 100, 1), (65536, 1448)]
DMABUF_BYTES = 4096 + 1448


@pytest.fixture(autouse=True)
def no_stray_collections():
    """Objects of earlier tests collected in the middle of a round would
    move the counts of freed handles: collect first, then not at all."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def freed(what):
    return ext._test_freed().get(what, 0)


@contextlib.contextmanager
def parked(point, fn, *args, **kw):
    """Run fn(*args, **kw) on another thread, held at the extension's test
    point `point` (without the GIL) for the duration of the block; then
    let it go and wait for it.  Yields a list that gets what fn returned
    or raised."""
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
        t.join(10)
    assert not t.is_alive()


def result(out):
    assert len(out) == 1
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def outcome(fn, *args, **kw):
    """What a call gives, in a form two calls can be compared by."""
    try:
        r = fn(*args, **kw)
    except dm.Error as e:
        return ("Error", e.errno, e.strerror)
    return r


def same_outcome(r, ref):
    if isinstance(r, dm.Error):
        r = ("Error", r.errno, r.strerror)
    if isinstance(ref, dict):
        assert isinstance(r, dict) and r.keys() == ref.keys()
    else:
        assert r == ref


def host_buffer(ctx, mem):
    """Another Buffer over the memory of mem (a HostMem)."""
    return dm.Buffer(ctx, mem.size, "import", fd=mem.fd, keep_fd=True,
                     segments=[(0, mem.size, mem.base)], dl_device=(dm.kDLCPU, 0))


UDMABUF = os.path.exists("/dev/udmabuf")


def io_buffer(ctx, mem):
    """A Buffer for read/readinto/write: a udmabuf where the machine has
    them; else one over mem, which the CPU cannot read through the library
    (an imported dma-buf is not mapped): the calls then fail, after using
    the buffer all the same."""
    return dm.Buffer(ctx, 1 << 20) if UDMABUF else host_buffer(ctx, mem)


class Books:
    """The fake kernel's token books of a receiver, round after round."""

    def __init__(self, rx, fake):
        self.rx, self.fake, self.back = rx, fake, 0

    def unchanged(self):
        self.rx.flush()
        st = self.fake.stats(self.rx)
        assert (st["freed"], st["bad"]) == (self.back, 0), "tokens went back while in use"

    def all_back(self, n):
        self.rx.flush()
        self.back += n
        st = self.fake.stats(self.rx)
        assert (st["freed"], st["outstanding"], st["bad"]) == (self.back, 0, 0)


# ---- fragments: release() while a call reads them ------------------------

def test_read_vs_release(rx, hostmem, fake):
    """release() while read() copies without the GIL: the tokens stay out,
    and the bytes held, until the copy is done; then they go back once."""
    books, pos = Books(rx, fake), 0
    for _ in range(ROUNDS):
        fake.push(rx, FRAGS)
        f = rx.recv()
        want = expected_bytes(hostmem.mem, FRAGS, pos)
        pos += f.nbytes
        with parked("Fragments.read", f.read) as out:
            f.release()
            assert f.released
            books.unchanged()
            assert hostmem.buf.held == DMABUF_BYTES
        assert result(out) == want
        books.all_back(2)
        assert hostmem.buf.held == 0


def test_gather_into_cpu_vs_release(rx, hostmem, fake):
    books, pos = Books(rx, fake), 0
    for _ in range(ROUNDS):
        fake.push(rx, FRAGS)
        f = rx.recv()
        want = expected_bytes(hostmem.mem, FRAGS, pos)
        pos += f.nbytes
        dst = np.zeros(f.nbytes + 8, np.uint8)
        with parked("Fragments.gather_into(cpu)", f.gather_into, dst) as out:
            f.release()
            books.unchanged()
            assert hostmem.buf.held == DMABUF_BYTES
        assert result(out) == len(want)
        assert dst.tobytes() == want + bytes(8)
        books.all_back(2)
        assert f.released and hostmem.buf.held == 0


@pytest.mark.skipif(not FAKE_CUDA, reason="needs the fake CUDA driver ($DEVMEMTCP_LIBCUDA, set by `meson test python-races`)")
def test_gather_into_cuda_vs_release(ctx, conn, fake):
    """The same on the CUDA path (the fake driver: host memory stands in for
    device memory): the release waits for the gather, which queues its own
    release after the stream's work."""
    src = HostMem(ctx, 1 << 20, device=(dm.kDLCUDA, 0))
    dst = HostMem(ctx, 1 << 16, device=(dm.kDLCUDA, 0))
    with fake_rx(ctx, conn.server, src.buf) as r:
        books, pos = Books(r, fake), 0
        for _ in range(ROUNDS):
            fake.push(r, FRAGS)
            f = r.recv()
            want = expected_bytes(src.mem, FRAGS, pos)
            pos += f.nbytes
            with parked("Fragments.gather_into(cuda)", f.gather_into, dst.buf) as out:
                f.release()
                books.unchanged()
                assert src.buf.held == DMABUF_BYTES
            r0 = out[0]
            if isinstance(r0, dm.Error):
                # a library built without nvcc has no gather kernels
                assert "built without the gather kernels" in r0.strerror
            else:
                assert r0 == len(want) and dst.mem[:len(want)] == want
            books.all_back(2)
            assert f.released and src.buf.held == 0
    dst.close()
    src.close()


# ---- handles: close() while a call uses them --------------------------------

@pytest.mark.parametrize("op", ["read", "readinto", "write"])
def test_buffer_io_vs_close(ctx, hostmem, op):
    """Buffer.close() while read/readinto/write runs without the GIL: the
    buffer is freed when the call is done, not before, and the call gives
    what it gives on an open buffer."""
    for i in range(ROUNDS):
        b = io_buffer(ctx, hostmem)
        off = (i * 4096) % ((1 << 20) - 4096)
        data = os.urandom(4096)
        into = bytearray(4096)
        call = {"read": (b.read, off, 4096), "readinto": (b.readinto, off, into),
                "write": (b.write, off, data)}[op]
        if UDMABUF:
            b.write(off, data)
        ref = outcome(*call)
        into[:] = bytes(4096)
        n0 = freed("Buffer")
        with parked("Buffer." + op, *call) as out:
            b.close()
            assert b.closed and freed("Buffer") == n0
        same_outcome(out[0], ref)
        assert freed("Buffer") == n0 + 1
        if UDMABUF and op != "write":
            assert ref == (data if op == "read" else 4096)
            assert op == "read" or into == data


@pytest.mark.parametrize("op", ["queues", "qstats"])
def test_context_query_vs_close(op):
    """Context.close() while queues()/qstats() asks the kernel without the
    GIL: the context is freed when the call is done, and the call gives
    what it gives on an open context."""
    with dm.Context() as c:
        ref = outcome(getattr(c, op), "lo")
    for _ in range(ROUNDS):
        c = dm.Context()
        n0 = freed("Context")
        with parked("Context." + op, getattr(c, op), "lo") as out:
            c.close()
            assert c.closed and freed("Context") == n0
        same_outcome(out[0], ref)
        assert freed("Context") == n0 + 1


def test_recv_vs_close(ctx, conn, hostmem, fake):
    """Rx.close() while recv() waits: the receive completes; the receiver
    (its descriptor) lives on while its Fragments do."""
    for _ in range(ROUNDS):
        r = dm.Rx(ctx, conn.server)
        fd = r.fileno()
        r.add_buf(BINDING, hostmem.buf)
        fake.attach(r, BINDING)
        fake.push(r, [(4096, 4096)])
        n0 = freed("Rx")
        with parked("Rx.recv", r.recv) as out:
            r.close()
            assert r.closed and freed("Rx") == n0
        f = result(out)
        assert f.read() == hostmem.mem[4096:8192]
        os.fstat(fd)
        assert freed("Rx") == n0
        f.release()
        st = fake.stats(fd)
        assert (st["freed"], st["outstanding"], st["bad"]) == (1, 0, 0)
        assert freed("Rx") == n0 + 1
        with pytest.raises(OSError):
            os.fstat(fd)
        fake.detach(fd)


def test_add_buf_vs_close(ctx, conn, hostmem):
    """The buffer and the receiver closed while add_buf() registers one with
    the other: both are freed once the call is done, the receiver first."""
    for _ in range(ROUNDS):
        r = dm.Rx(ctx, conn.server)
        b = host_buffer(ctx, hostmem)
        n0 = (freed("Rx"), freed("Buffer"))
        with parked("Rx.add_buf", r.add_buf, 5, b) as out:
            b.close()
            r.close()
            assert (freed("Rx"), freed("Buffer")) == n0
        assert result(out) is None
        assert (freed("Rx"), freed("Buffer")) == (n0[0] + 1, n0[1] + 1)


# each setup call: whether it uses the buffer b besides the context c
# (mem: the HostMem b is made over, d: a run directory)
SETUP = {
    "Buffer()": (False, lambda c, b, mem, d: host_buffer(c, mem)),
    "Gpu()": (False, lambda c, b, mem, d: dm.Gpu(c, 0, slots=1, max_frags=16)),
    "Binding": (True, lambda c, b, mem, d: dm.Binding.rx(c, "lo", 0, b)),
    "Nic()": (True, lambda c, b, mem, d: dm.Nic(c, NOSUCH, buf=b, run_dir=d)),
    "Nic.probe": (False, lambda c, b, mem, d: dm.Nic.probe(c, NOSUCH)),
    "Nic.recover": (False, lambda c, b, mem, d: dm.Nic.recover(c, NOSUCH, run_dir=d)),
    "Zcrx()": (True, lambda c, b, mem, d: dm.Zcrx(c, "lo", 0, b)),
}


@pytest.mark.parametrize("point", SETUP)
def test_setup_vs_close(hostmem, point, tmp_path):
    """Context.close() (and Buffer.close()) while a constructor or a NIC
    call runs without the GIL: they are freed once nothing made by the
    call holds them, and the call gives what it gives otherwise."""
    uses_buf, call = SETUP[point]
    with dm.Context() as c:
        ref = outcome(call, c, hostmem.buf, hostmem, str(tmp_path))
        if not isinstance(ref, tuple):
            ref.close()
            ref = type(ref)
    for _ in range(ROUNDS):
        c = dm.Context()
        b = host_buffer(c, hostmem)
        n0 = (freed("Context"), freed("Buffer"))
        with parked(point, call, c, b, hostmem, str(tmp_path)) as out:
            b.close()
            c.close()
            assert (freed("Context"), freed("Buffer")) == (n0[0], n0[1] + (not uses_buf))
        r = out[0]
        if isinstance(ref, type):
            assert type(r) is ref
            assert freed("Context") == n0[0]        # the new object holds it
            r.close()
        else:
            same_outcome(r, ref)
        made = isinstance(r, dm.Buffer)
        assert (freed("Context"), freed("Buffer")) == (n0[0] + 1, n0[1] + 1 + made)
    assert os.listdir(tmp_path) == []


# ---- Python code that runs inside a call ----------------------------------

class Closer:
    """An integer argument whose conversion (__index__) first closes or
    releases obj: Python code running inside the call."""

    def __init__(self, obj, value):
        self.obj, self.value, self.ran = obj, value, 0

    def __index__(self):
        self.ran += 1
        (self.obj.release if isinstance(self.obj, dm.Fragments) else self.obj.close)()
        return self.value

    def __getitem__(self, i):       # as a max_version sequence
        return self.__index__() if i == 0 else 0

    def __len__(self):
        return 2


def test_argument_closes_the_object(ctx, conn, hostmem, fake):
    """An argument whose conversion closes the object the method is called
    on: the method, which took the object first, completes, and the object
    is freed when it returns.  (Buffer.readinto and write take no argument
    that runs Python code before Python 3.12's __buffer__.)"""
    with dm.Context() as c:
        want = {"queues": c.queues("lo"), "qstats": outcome(c.qstats, "lo", queue=0)}
    calls = {"queues": lambda c, o: c.queues(o),
             "qstats": lambda c, o: c.qstats("lo", queue=o)}
    with io_buffer(ctx, hostmem) as b:
        want["read"] = outcome(b.read, 4096, 16)
    for _ in range(ROUNDS):
        b = io_buffer(ctx, hostmem)
        n0 = freed("Buffer")
        o = Closer(b, 16)
        same_outcome(outcome(b.read, 4096, o), want["read"])
        assert o.ran == 1 and b.closed and freed("Buffer") == n0 + 1
        for name, call in calls.items():
            c = dm.Context()
            n0 = freed("Context")
            o = Closer(c, 1 if name == "queues" else 0)
            same_outcome(outcome(call, c, o), want[name])
            assert o.ran == 1 and c.closed and freed("Context") == n0 + 1
        r = dm.Rx(ctx, conn.server)
        fd = r.fileno()
        r.add_buf(BINDING, hostmem.buf)
        fake.attach(r, BINDING)
        fake.push(r, [(0, 4096)])
        n0 = freed("Rx")
        o = Closer(r, 4096)
        f = r.recv(max_bytes=o)
        assert o.ran == 1 and r.closed and freed("Rx") == n0
        assert f.read() == hostmem.mem[:4096]
        f.release()
        assert freed("Rx") == n0 + 1
        st = fake.stats(fd)
        assert (st["freed"], st["outstanding"], st["bad"]) == (1, 0, 0)
        fake.detach(fd)


class ClosingNic(dm.Nic):
    """A Nic whose binding_id (read by Rx.add_buf) closes the receiver and
    the buffer first."""

    def __init__(self, *close):
        self.to_close = close        # no Nic.__init__: never opened

    @property
    def binding_id(self):
        for o in self.to_close:
            o.close()
        return 5


def test_add_buf_binding_id_closes_both(ctx, conn, hostmem):
    """Rx.add_buf(nic, buf) where reading nic.binding_id closes the
    receiver and the buffer: the call completes on what it was given, and
    both are freed when it returns."""
    for _ in range(ROUNDS):
        r = dm.Rx(ctx, conn.server)
        b = host_buffer(ctx, hostmem)
        n0 = (freed("Rx"), freed("Buffer"))
        assert r.add_buf(ClosingNic(r, b), b) is None
        assert r.closed and b.closed
        assert (freed("Rx"), freed("Buffer")) == (n0[0] + 1, n0[1] + 1)


class ReleasingDst:
    """A gather destination (numpy's bytes) whose __dlpack_device__ first
    releases the Fragments being gathered."""

    def __init__(self, f, n):
        self.f, self.a = f, np.zeros(n, np.uint8)

    def __dlpack_device__(self):
        self.f.release()
        return self.a.__dlpack_device__()

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**{k: v for k, v in kw.items() if k == "stream"})


def test_gather_dst_releases_the_fragments(rx, hostmem, fake):
    """gather_into(dst) where dst's DLPack methods release the Fragments:
    the gather completes with the bytes, and the tokens go back when it is
    done, once."""
    books, pos = Books(rx, fake), 0
    for _ in range(ROUNDS):
        fake.push(rx, FRAGS)
        f = rx.recv()
        want = expected_bytes(hostmem.mem, FRAGS, pos)
        pos += f.nbytes
        dst = ReleasingDst(f, f.nbytes)
        assert f.gather_into(dst) == len(want)
        assert f.released and dst.a.tobytes() == want
        books.all_back(2)


def test_dlpack_max_version_releases(ctx, rx, hostmem, fake):
    """Fragments.__dlpack__(max_version=...) whose reading releases the
    Fragments, and Buffer.__dlpack__ whose reading closes the buffer: the
    capsule holds what it views, until it goes."""
    books = Books(rx, fake)
    for _ in range(ROUNDS):
        fake.push(rx, [(0, 4096)])
        f = rx.recv()
        cap = f.__dlpack__(max_version=Closer(f, 1))
        assert f.released
        books.unchanged()
        assert hostmem.buf.held == 4096
        del cap
        books.all_back(1)
        assert hostmem.buf.held == 0
        b = host_buffer(ctx, hostmem)
        n0 = freed("Buffer")
        cap = b.__dlpack__(max_version=Closer(b, 1))
        assert b.closed and freed("Buffer") == n0
        del cap
        assert freed("Buffer") == n0 + 1


class ClosingSock:
    """A socket whose fileno() first closes obj (Rx() asks for it)."""

    def __init__(self, sock, obj):
        self.sock, self.obj = sock, obj

    def fileno(self):
        self.obj.close()
        return self.sock.fileno()


def test_rx_socket_closes_context(conn):
    """Rx(ctx, sock) where sock.fileno() closes the context: the receiver
    is made, and holds the context until it closes."""
    for _ in range(ROUNDS):
        c = dm.Context()
        n0 = freed("Context")
        r = dm.Rx(c, ClosingSock(conn.server, c))
        assert c.closed and freed("Context") == n0
        r.close()
        assert freed("Context") == n0 + 1


@pytest.mark.skipif(not FAKE_CUDA, reason="needs the fake CUDA driver ($DEVMEMTCP_LIBCUDA, set by `meson test python-races`)")
def test_rx_socket_closes_gpu(ctx, conn):
    """Rx(ctx, sock, gpu=g) where sock.fileno() closes g: the receiver is
    made with g, which it holds until it closes."""
    for _ in range(ROUNDS):
        g = dm.Gpu(ctx, 0, slots=1, max_frags=16)
        n0 = freed("Gpu")
        r = dm.Rx(ctx, ClosingSock(conn.server, g), gpu=g)
        assert g.closed and freed("Gpu") == n0
        r.close()
        assert freed("Gpu") == n0 + 1


class Counted:
    """A container the collector counts (lists and tuples may come from a
    free list, which it does not count)."""


def during_collection(act, target):
    """Call target() with the garbage collector set to run at the first
    container that target allocates, where a callback calls act() first.
    Returns what target returned, and whether act ran inside it."""
    state = {"armed": False, "ran": False}

    def cb(phase, info):
        if phase == "start" and state["armed"]:
            state["armed"] = False
            state["ran"] = True
            act()

    old = gc.get_threshold()
    gc.callbacks.append(cb)
    gc.set_threshold(1)
    gc.enable()
    try:
        gc.collect(0)                # new containers counted: 0
        keep = Counted()             # noqa: F841 - 1: the next one collects
        state["armed"] = True
        r = target()
        ran, state["armed"] = state["ran"], False
    finally:
        gc.disable()
        gc.set_threshold(*old)
        gc.callbacks.remove(cb)
    return r, ran


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="since Python 3.12 the collector runs between bytecodes, never inside a call")
def test_collector_releases_during_item(rx, hostmem, fake):
    """A garbage collector callback that runs inside Fragments[i] (its
    result is a container) and releases the Fragments: the item holds
    what the fragment was."""
    books = Books(rx, fake)
    for _ in range(ROUNDS):
        fake.push(rx, [(12288, 4096)])
        f = rx.recv()
        item, ran = during_collection(f.release, lambda: f[0])
        assert ran and f.released
        # every earlier token went back: the fake kernel hands out token 0
        assert tuple(item) == (12288, hostmem.base + 12288, 4096, 0, BINDING, 0)
        books.all_back(1)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="since Python 3.12 the collector runs between bytecodes, never inside a call")
def test_collector_closes_during_segments(ctx, hostmem):
    """The same inside Buffer.segments, closing the buffer."""
    for _ in range(ROUNDS):
        b = host_buffer(ctx, hostmem)
        n0 = freed("Buffer")
        # the list it returns must not come from the free list of lists
        drain = [[] for _ in range(100)]
        segs, ran = during_collection(b.close, lambda: b.segments)
        del drain
        assert ran and b.closed and freed("Buffer") == n0 + 1
        assert segs == [(0, hostmem.size, hostmem.base)]

# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The CUDA stream a gather runs on and a view's release waits for, on a
machine without a GPU: the fake CUDA driver (tests/lib/fakecuda, loaded as
$DEVMEMTCP_LIBCUDA with manual streams by `meson test python-cuda-streams`)
logs the stream of every launch, copy and event, and holds a stream's work
back while the test keeps the stream busy.  Host memory imported as a kDLCUDA buffer stands
in for device memory; the fake gather kernel copies it, so bytes are checked
too.  Covered: stream objects of each kind (ints, .cuda_stream, .ptr,
__cuda_stream__), DLPack's numbers for the default streams (None, 1, 2, -1),
and deleters on other threads."""

import contextlib
import ctypes
import errno
import os
import threading

import pytest

import devmemtcp as dm
from conftest import Conn, HostMem, Versioned, capi, expected_bytes, fake_rx

LIB = os.environ.get("DEVMEMTCP_LIBCUDA", "")
fc = ctypes.CDLL(LIB) if LIB else None
if not hasattr(fc, "fakecuda_calls") or os.environ.get("DEVMEMTCP_FAKE_CUDA_STREAMS") != "manual":
    raise RuntimeError("these tests need the fake CUDA driver with manual streams: run them with "
                       "`meson test python-cuda-streams`, which sets DEVMEMTCP_LIBCUDA and "
                       "DEVMEMTCP_FAKE_CUDA_STREAMS=manual")
fc.fakecuda_busy.argtypes = fc.fakecuda_finish.argtypes = fc.fakecuda_idle.argtypes = [ctypes.c_uint64]
fc.fakecuda_calls.restype = fc.fakecuda_modules.restype = ctypes.c_uint64


class Call(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint32), ("tid", ctypes.c_uint32), ("stream", ctypes.c_uint64)]


fc.fakecuda_call.argtypes = [ctypes.c_uint64, ctypes.POINTER(Call)]
LAUNCH, RECORD, COPY, CTX_SYNC, STREAM_SYNC, EVENT_SYNC, MEMOP = range(1, 8)
KIND = {LAUNCH: "launch", RECORD: "record", COPY: "copy", CTX_SYNC: "ctx-sync",
        STREAM_SYNC: "stream-sync", EVENT_SYNC: "event-sync", MEMOP: "memop"}

LEGACY, PER_THREAD = 1, 2
capi.PyCapsule_New.restype = ctypes.py_object
capi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
CAPSULE = b"dltensor_versioned"


def calls_since(mark):
    """(kind, stream, thread id) of each driver call since mark; NULL and
    CU_STREAM_LEGACY are both the legacy default stream (LEGACY)."""
    out = []
    for i in range(mark, fc.fakecuda_calls()):
        c = Call()
        assert fc.fakecuda_call(i, ctypes.byref(c)), "the fake driver's log wrapped"
        out.append((KIND[c.kind], c.stream or LEGACY, c.tid))
    return out


class Log:
    """The driver calls made inside the block."""

    def __enter__(self):
        self.mark = fc.fakecuda_calls()
        return self

    def __exit__(self, *exc):
        self.calls = calls_since(self.mark)

    def kinds(self, *kinds):
        return [c for c in self.calls if c[0] in kinds]


class FakeCudaArray:
    """A writable kDLCUDA array of n bytes (host memory that the fake driver
    takes for device memory) as a DLPack producer that notes the stream
    each __dlpack__ call names."""

    def __init__(self, n):
        self.n = n
        self.mem = (ctypes.c_uint8 * n)()
        self.shape = (ctypes.c_int64 * 1)(n)
        self.strides = None
        self.streams = []
        self.deleted = 0
        self.keep = []

    def __dlpack_device__(self):
        return (dm.kDLCUDA, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        m = Versioned(major=1, minor=0)
        t = m.dl_tensor
        t.data = ctypes.addressof(self.mem)
        t.device_type, t.device_id, t.ndim = dm.kDLCUDA, 0, 1
        t.code, t.bits, t.lanes = 1, 8, 1
        t.shape = self.shape
        t.strides = self.strides

        def deleter(_):
            self.deleted += 1

        m.deleter = dict(Versioned._fields_)["deleter"](deleter)
        self.keep.append(m)
        return capi.PyCapsule_New(ctypes.addressof(m), CAPSULE, None)

    def bytes(self, n):
        return bytes(self.mem[:n])


@pytest.fixture
def cmem(ctx):
    h = HostMem(ctx, 1 << 20, device=(dm.kDLCUDA, 0))
    yield h
    h.close()


@pytest.fixture
def crx(ctx, conn, cmem):
    """A receiver of fragments in cmem (a kDLCUDA buffer), with no Gpu yet:
    the first gather or view makes it."""
    with fake_rx(ctx, conn.server, cmem.buf) as r:
        yield r


@pytest.fixture(scope="module")
def kernels():
    """Whether this libdevmemtcp has the gather kernels (a module to load)."""
    with dm.Context() as c, dm.Gpu(c, 0):
        pass
    return fc.fakecuda_modules() > 0


def settle(r, fake):
    r.flush()
    return fake.stats(r)["outstanding"]


def released_only_when_done(r, fake, n, key):
    """The n tokens stay out while stream key (the stream the release must
    wait for) is busy, and go back once it is done."""
    assert not fc.fakecuda_idle(key)
    assert settle(r, fake) == n
    fc.fakecuda_finish(key)
    assert settle(r, fake) == 0
    assert fake.stats(r)["bad"] == 0


def gathered(f, dst, stream, kernels):
    """gather_into(dst, stream); without the kernels, the library says so."""
    if kernels:
        assert f.gather_into(dst, stream) == f.nbytes
        return True
    with pytest.raises(dm.Error, match="built without the gather kernels"):
        f.gather_into(dst, stream)
    return False


class CudaStreamAttr:
    """PyTorch's streams before the stream protocol: .cuda_stream."""

    def __init__(self, h):
        self.cuda_stream = h


class StreamProtocol:
    """The CUDA stream protocol (cuda.core, PyTorch, CuPy): __cuda_stream__()."""

    def __init__(self, h):
        self.h = h

    def __cuda_stream__(self):
        return (0, self.h)


class PtrAttr:
    """CuPy's streams: .ptr (0: the null stream, the legacy default one)."""

    def __init__(self, h):
        self.ptr = h


# stream argument, and the stream the gather must run on (its DLPack
# number, given to dst's __dlpack__ too) and the release wait for
STREAMS = [
    (None, LEGACY),
    (0, LEGACY),
    (1, LEGACY),
    (2, PER_THREAD),
    (0x7f0010, 0x7f0010),
    (CudaStreamAttr(0x7f0020), 0x7f0020),
    (StreamProtocol(0x7f0030), 0x7f0030),
    (PtrAttr(0x7f0040), 0x7f0040),
    (PtrAttr(0), LEGACY),
    (StreamProtocol(2), PER_THREAD),
]


# how the gather reaches the device, and what it queues: a receive's few
# descriptors travel inline with the launch (no slot, no slot event); in
# a pinned slot (a test build's DEVMEMTCP_GATHER_MODE=ring) the slot's
# reuse waits for an event recorded after the launch
LAUNCHES = {"inline": ["launch"], "ring": ["launch", "record"]}


@pytest.mark.parametrize("mode", LAUNCHES)
@pytest.mark.parametrize("arg,key", STREAMS,
                         ids=lambda v: type(v).__name__ if not isinstance(v, int) else hex(v))
def test_gather_runs_and_releases_on_the_given_stream(crx, cmem, fake, kernels, arg, key,
                                                      mode, monkeypatch):
    if mode == "ring":
        monkeypatch.setenv("DEVMEMTCP_GATHER_MODE", "ring")   # read when crx's Gpu is made
    frags = [(8192, 4096), (0, 5000, fake.LINEAR), (65536, 1448), (4096, 100)]
    fake.push(crx, frags)
    f = crx.recv()
    assert f.__dlpack_device__() == (dm.kDLCUDA, 0)
    dst = FakeCudaArray(f.nbytes + 16)
    fc.fakecuda_busy(key)
    with Log() as log:
        done = gathered(f, dst, arg, kernels)
    assert dst.streams == [key] and dst.deleted == 1
    if not done:
        assert not f.released
        fc.fakecuda_finish(key)
        return
    assert f.released
    # queued behind the stream's work: nothing written yet
    assert dst.bytes(dst.n) == bytes(dst.n)
    # the kernel, which places the linear bytes too (from the handle's
    # staging: no copy of its own), with the release's fence
    # (devmemtcp_gpu_gather_recv: the tokens wait for the gather only): all
    # on the stream
    assert [c[0] for c in log.calls] == LAUNCHES[mode] + ["record"]
    assert {c[1] for c in log.calls} == {key}
    released_only_when_done(crx, fake, 3, key)
    # the stream got to them: the bytes, and nothing past them
    assert dst.bytes(f.nbytes) == expected_bytes(cmem.mem, frags)
    assert dst.bytes(dst.n)[f.nbytes:] == bytes(16)


def test_gather_waits_for_the_views_stream_and_its_own(crx, fake, kernels):
    """A view still reads the bytes: the release waits for the gather's
    stream and for the view's (named at export, fenced at deletion)."""
    if not kernels:
        pytest.skip("this libdevmemtcp has no gather kernels (built without nvcc)")
    fake.push(crx, [(0, 4096), (4096, 4096)])
    f = crx.recv()
    view, gather = 0x7f0100, 0x7f0200
    fc.fakecuda_busy(view)
    fc.fakecuda_busy(gather)
    cap = f.__dlpack__(stream=view, max_version=(1, 0))
    dst = FakeCudaArray(8192)
    with Log() as log:
        f.gather_into(dst, gather)
        del cap                        # never consumed: its destructor deletes
    assert [(c[0], c[1]) for c in log.kinds("launch", "record")] == [
        ("launch", gather), ("record", gather), ("record", view)]
    assert settle(crx, fake) == 2
    fc.fakecuda_finish(view)
    assert settle(crx, fake) == 2
    fc.fakecuda_finish(gather)
    assert settle(crx, fake) == 0


def export(f, stream):
    """A consumer's import: __dlpack__(stream=...), the capsule renamed
    "used_..."; returns the managed tensor, whose deleter the test calls."""
    cap = f.__dlpack__(stream=stream, max_version=(1, 0))
    m = Versioned.from_address(capi.PyCapsule_GetPointer(cap, CAPSULE))
    assert m.dl_tensor.device_type == dm.kDLCUDA
    assert capi.PyCapsule_SetName(cap, b"used_dltensor_versioned") == 0
    return m


def delete_on(m, thread):
    """Run m's deleter (without the GIL: ctypes drops it) here or on a new
    thread; returns the native id of the thread it ran on."""
    if not thread:
        m.deleter(ctypes.pointer(m))
        return threading.get_native_id()
    who = []

    def run():
        who.append(threading.get_native_id())
        m.deleter(ctypes.pointer(m))

    th = threading.Thread(target=run)
    th.start()
    th.join(10)
    assert not th.is_alive() and who
    return who[0]


# stream named at export, the stream fenced and waited for, and whether the
# deleter runs on another thread (the per-thread stream on another thread:
# test_per_thread_stream_deleted_elsewhere)
VIEWS = [(0x7f0300, 0x7f0300), (1, LEGACY), (None, LEGACY)]
VIEWS = [v + (t,) for v in VIEWS for t in (False, True)] + [(2, PER_THREAD, False)]


@pytest.mark.parametrize("stream,key,thread", VIEWS,
                         ids=lambda v: str(v) if isinstance(v, bool) or v is None else hex(v))
def test_view_released_after_its_streams_work(crx, fake, stream, key, thread):
    fake.push(crx, [(0, 4096), (4096, 4096)])
    f = crx.recv()
    m = export(f, stream)
    f.release()
    fc.fakecuda_busy(key)
    with Log() as log:
        tid = delete_on(m, thread)
    assert log.calls == [("record", key, tid)]
    released_only_when_done(crx, fake, 2, key)


def test_per_thread_stream_deleted_elsewhere(crx, fake):
    """Stream 2 is each thread's own default stream: a deleter on another
    thread cannot fence the exporting thread's, so it waits for the device
    before the tokens go back."""
    fake.push(crx, [(0, 4096)])
    f = crx.recv()
    m = export(f, 2)
    f.release()
    fc.fakecuda_busy(PER_THREAD)            # this thread's per-thread stream
    with Log() as log:
        tid = delete_on(m, True)
    assert tid != threading.get_native_id()
    assert [(c[0], c[2]) for c in log.calls] == [("ctx-sync", tid)]
    assert fc.fakecuda_idle(PER_THREAD)     # waited for, not overtaken
    assert settle(crx, fake) == 0


def test_no_stream_waits_for_the_device(crx, fake):
    """stream=-1: the consumer synchronises itself; the deleter waits for
    the whole device before the tokens go back."""
    fake.push(crx, [(0, 4096)])
    f = crx.recv()
    m = export(f, -1)
    f.release()
    fc.fakecuda_busy(0x7f0400)
    with Log() as log:
        delete_on(m, False)
    assert [c[0] for c in log.calls] == ["ctx-sync"]
    assert fc.fakecuda_idle(0x7f0400)
    assert settle(crx, fake) == 0


def test_legacy_stream_does_not_cover_a_non_blocking_one(crx, fake):
    """DLPack's None (and 1) name the legacy default stream: work the
    consumer queued on a non-blocking stream of its own is not waited for.
    A consumer on such a stream must name it (torch.from_dlpack and
    cupy.from_dlpack pass their current stream)."""
    fake.push(crx, [(0, 4096)])
    f = crx.recv()
    m = export(f, None)
    f.release()
    fc.fakecuda_busy(0x7f0500)
    delete_on(m, False)
    assert settle(crx, fake) == 0 and not fc.fakecuda_idle(0x7f0500)
    fc.fakecuda_finish(0x7f0500)


def test_one_gpu_made_up_front_serves_every_receiver(ctx, cmem, fake, kernels):
    """Rx(gpu=g): the receivers make no Gpu of their own, so their first
    gathers and views load no kernels (which may wait for the device)."""
    with dm.Gpu(ctx, 0) as g, contextlib.ExitStack() as stack:
        loaded = fc.fakecuda_modules()
        conns = [Conn() for _ in range(2)]
        for c in conns:
            stack.callback(c.close)
        rxs = [stack.enter_context(fake_rx(ctx, c.server, cmem.buf, gpu=g)) for c in conns]
        for r in rxs:
            fake.push(r, [(0, 4096), (8192, 4096)])
            fake.push(r, [(4096, 4096)])
        for r in rxs:
            dst = FakeCudaArray(8192)
            if gathered(r.recv(), dst, 0x7f0600, kernels):
                assert dst.bytes(8192) == cmem.mem[0:4096] + cmem.mem[8192:12288]
            view = export(r.recv(), 0x7f0600)
            delete_on(view, False)
        assert fc.fakecuda_modules() == loaded
        for r in rxs:
            assert settle(r, fake) == 0


def test_errors_survive_the_dst_deleter(crx, fake):
    """The dst's deleter runs on the error paths too, and may run Python
    code (here a ctypes callback): the error raised is still the one the
    caller gets, the deleter ran once, and the tokens stay held."""
    fake.push(crx, [(0, 4096), (4096, 4096)])
    f = crx.recv()
    small = FakeCudaArray(4096)
    with pytest.raises(dm.Error) as e:
        f.gather_into(small, 0x7f0700)
    assert e.value.errno == errno.ENOSPC
    assert e.value.strerror == "the fragments hold 8192 bytes but dst only 4096: give more room"
    assert small.deleted == 1 and not f.released
    strided = FakeCudaArray(8192)
    strided.strides = (ctypes.c_int64 * 1)(2)
    with pytest.raises(BufferError, match=r"^dst must be contiguous \(C order\)$"):
        f.gather_into(strided, 0x7f0700)
    assert strided.deleted == 1 and not f.released
    f.release()
    assert settle(crx, fake) == 0


def test_recv_into_gathers_and_releases_in_one_call(crx, cmem, fake, kernels):
    """recv_into: one receive gathered into dst at offset on the stream,
    the tokens handed back by the gather (gather_release: its fence with
    the launch, nothing after); the destination imported once while the
    same object comes back."""
    if not kernels:
        pytest.skip("this libdevmemtcp has no gather kernels (built without nvcc)")
    key = 0x5100
    dst = FakeCudaArray(3 * 8192 + 100)
    frags = [[(8192, 4096), (0, 4096)], [(65536, 1448), (4096, 100), (0, 2000, fake.LINEAR)]]
    for fr in frags:
        fake.push(crx, fr)
    fc.fakecuda_busy(key)
    with Log() as log:
        assert crx.recv_into(dst, 0, key) == 8192
        assert crx.recv_into(dst, offset=8192, stream=key) == 1448 + 100 + 2000
    assert dst.streams == [key] and dst.deleted == 0        # imported once
    # the second receive's linear bytes in its own launch: no copy
    assert [c[0] for c in log.calls] == ["launch", "record", "launch", "record"]
    assert {c[1] for c in log.calls} == {key}
    released_only_when_done(crx, fake, 4, key)
    want = expected_bytes(cmem.mem, frags[0]) + expected_bytes(cmem.mem, frags[1], 8192)
    assert dst.bytes(8192 + 3548) == want
    # another destination: the first one's import goes
    other = FakeCudaArray(4096)
    fake.push(crx, [(0, 4096), (4096, 4096)])
    fake.push(crx, [(8192, 10)])
    assert crx.recv_into(other, stream=key) == 4096          # its room, no more
    assert dst.deleted == 1 and other.streams == [key]
    assert crx.recv_into(other, stream=key) == 4096
    assert crx.recv_into(dst, stream=key) == 10
    assert other.deleted == 1 and dst.streams == [key, key]


def test_gpu_flags(ctx):
    with dm.Gpu(ctx, 0) as g:
        assert (g.graphs, g.persistent) == (False, False)
    with dm.Gpu(ctx, 0, graphs=True) as g:
        assert (g.graphs, g.persistent) == (True, False)


def test_coalesced_gathers_wait_for_flush(ctx, conn, cmem, fake, kernels):
    """Gpu(coalesce_bytes=...): recv_into's gathers wait in the handle's
    batch, and their tokens with them; flush() queues them as one launch
    on their stream, the tokens going back once that stream is done."""
    if not kernels:
        pytest.skip("this libdevmemtcp has no gather kernels (built without nvcc)")
    key = 0x5200
    frags = [[(8192, 4096)], [(0, 4096), (65536, 1448)]]
    with dm.Gpu(ctx, 0, coalesce_bytes=1 << 20, coalesce_us=10_000_000) as g, \
            fake_rx(ctx, conn.server, cmem.buf, gpu=g) as r:
        assert g.coalesce_bytes == 1 << 20
        dst = FakeCudaArray(3 * 4096)
        for fr in frags:
            fake.push(r, fr)
        fc.fakecuda_busy(key)
        with Log() as log:
            assert r.recv_into(dst, 0, key) == 4096
            assert r.recv_into(dst, 4096, key) == 4096 + 1448
        assert log.kinds("launch") == []
        assert settle(r, fake) == 3                 # held by the batch
        assert dst.bytes(dst.n) == bytes(dst.n)      # nothing written yet
        with Log() as log:
            assert g.flush() == 2
        assert [c[0] for c in log.calls] == ["launch", "record"]
        assert {c[1] for c in log.calls} == {key}
        assert g.flush() == 0
        released_only_when_done(r, fake, 3, key)
        want = expected_bytes(cmem.mem, frags[0]) + expected_bytes(cmem.mem, frags[1], 4096)
        assert dst.bytes(4096 + 4096 + 1448) == want


def test_coalesce_limits(ctx):
    with dm.Gpu(ctx, 0) as g:
        assert g.coalesce_bytes == 0 and g.flush() == 0
    with pytest.raises(dm.Error) as e:
        dm.Gpu(ctx, 0, coalesce_bytes=(64 << 20) + 1)
    assert e.value.errno == errno.EINVAL
    assert e.value.strerror == ("devmemtcp_gpu_new: opts.coalesce_bytes 67108865 is above "
                                "67108864 (64 MiB): a batch that large only delays its bytes")
    g = dm.Gpu(ctx, 0, coalesce_bytes=4096)
    g.close()
    with pytest.raises(ValueError):
        g.flush()

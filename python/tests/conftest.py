# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Fixtures shared by the python suite (host/), its vm tests (vm/) and the
GPU tests (gpu/).  Synthetic fragments come from the fake devmem kernel
(devmemtcp._testing, test builds only)."""

import contextlib
import ctypes
import mmap
import os
import socket
import threading
import traceback

import pytest

import devmemtcp as dm

BINDING = 7

# The DLPack ABI, for tests that act as a consumer themselves.
capi = ctypes.pythonapi
capi.PyCapsule_GetName.restype = ctypes.c_char_p
capi.PyCapsule_GetName.argtypes = [ctypes.py_object]
capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capi.PyCapsule_SetName.restype = ctypes.c_int
capi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class Versioned(ctypes.Structure):
    pass


Versioned._fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                      ("manager_ctx", ctypes.c_void_p),
                      ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(Versioned))),
                      ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


class Legacy(ctypes.Structure):
    pass


Legacy._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                   ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(Legacy)))]


def pytest_report_header(config):
    return ["devmemtcp %s from %s (library %s, releases from any thread: %s)"
            % (dm.__version__, os.path.dirname(dm.__file__), dm.version(),
               dm.RELEASE_ANY_THREAD)]


@pytest.fixture
def fake():
    from devmemtcp import _testing
    return _testing


@pytest.fixture
def ctx():
    with dm.Context() as c:
        yield c


class Conn:
    """A connected loopback TCP pair: rx side `server`, peer `client`."""

    def __init__(self):
        ls = socket.create_server(("127.0.0.1", 0))
        self.client = socket.create_connection(ls.getsockname())
        self.server, _ = ls.accept()
        ls.close()

    def close(self):
        self.client.close()
        self.server.close()


@pytest.fixture
def conn():
    c = Conn()
    yield c
    c.close()


class HostMem:
    """Host memory standing in for a dma-buf: a memfd mapping (which test
    builds take as a dma-buf, see _testing.dmabuf_stand_in), imported as
    a Buffer whose segment addresses are CPU addresses (kDLCPU; or device
    addresses of the fake CUDA driver, device=(kDLCUDA, 0))."""

    def __init__(self, ctx, size, device=(dm.kDLCPU, 0), **kw):
        from devmemtcp import _testing
        self.size = size
        self.fd = _testing.dmabuf_stand_in(size)
        self.mem = mmap.mmap(self.fd, size)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        self.mem[:] = os.urandom(size)
        self.buf = dm.Buffer(ctx, size, "import", fd=self.fd, keep_fd=True,
                             segments=[(0, size, self.base)],
                             dl_device=device, **kw)

    def close(self):
        self.buf.close()
        os.close(self.fd)
        # the mapping stays: views made in a failing test may still point at it


@pytest.fixture
def hostmem(ctx):
    h = HostMem(ctx, 4 << 20)
    yield h
    h.close()


@contextlib.contextmanager
def fake_rx(ctx, sock, buf, **kw):
    """A receiver over sock with buf registered as BINDING, its receives
    answered by the fake kernel; kw go to Rx."""
    from devmemtcp import _testing
    r = dm.Rx(ctx, sock, **kw)
    try:
        r.add_buf(BINDING, buf)
        _testing.attach(r, BINDING)
        yield r
    finally:
        fd = r.fileno()
        r.close()
        _testing.detach(fd)


@pytest.fixture
def rx(ctx, conn, hostmem, fake):
    """A receiver over conn.server with hostmem registered as BINDING, its
    receives answered by the fake kernel."""
    with fake_rx(ctx, conn.server, hostmem.buf) as r:
        yield r


def expected_bytes(mem, frags, stream_pos=0):
    """What a receive of frags [(offset, len[, LINEAR])] holds in order."""
    out = bytearray()
    from devmemtcp import _testing
    for f in frags:
        if len(f) > 2 and f[2] & _testing.LINEAR:
            out += _testing.pattern(stream_pos + len(out), f[1])
        else:
            out += mem[f[0]:f[0] + f[1]]
    return bytes(out)


@contextlib.contextmanager
def spinner():
    """A second Python thread counting while the block runs: yields a list
    whose item 0 is the count, final once the block is left."""
    stop = threading.Event()
    count = [0]

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        yield count
    finally:
        stop.set()
        t.join()


# The message a call on a parent's handle gets in a forked child: % (the
# function, the handle: "receiver", "TX handle", ...).
FORK_REFUSED = ("%s: this %s was made by a parent of this process (inherited across "
                "fork()): a child never receives on, releases tokens of, or undoes the NIC "
                "setup of its parent's handles, which stay the parent's; make new ones in "
                "the child")


def in_child(fn):
    """Run fn() in a forked child; its failure (a traceback), as text, or
    ''."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        msg = b""
        try:
            fn()
        except BaseException:
            msg = traceback.format_exc().encode()
        os.write(w, msg or b"")
        os._exit(1 if msg else 0)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), status
    assert (os.WEXITSTATUS(status) == 0) == (out == b""), (status, out)
    return out.decode()

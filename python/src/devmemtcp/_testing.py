# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Synthetic fragments for tests and benchmarks (test builds only).

The fake devmem kernel (libdevmemtcp-emu.so, built from
tests/emu/fakedevmem.c, the emulated devmem NIC's library) must be
preloaded into the interpreter: ``LD_PRELOAD=.../libdevmemtcp-emu.so``.  It answers recvmsg(MSG_SOCK_DEVMEM)
and SO_DEVMEM_DONTNEED on the sockets attached to it, as the kernel would,
and keeps the kernel's side of the token books.
"""

import ctypes
import os

from ._pattern import pattern  # noqa: F401 (the stream pattern, for the tests)

LINEAR = 1


class Frag(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_uint64), ("len", ctypes.c_uint32),
                ("flags", ctypes.c_uint32)]


class Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "recvs", "frags", "bytes", "dontneed_calls", "freed", "bad",
        "outstanding", "outstanding_max")]

    def asdict(self):
        return {n: getattr(self, n) for n, _ in self._fields_}


def _load():
    lib = ctypes.CDLL(None)
    try:
        active = lib.fakedev_active
    except AttributeError:
        raise RuntimeError(
            "the fake devmem kernel is not loaded: run with "
            "LD_PRELOAD=<builddir>/tests/emu/libdevmemtcp-emu.so "
            "(meson test --suite python does)") from None
    active.restype = ctypes.c_int
    if not active():
        raise RuntimeError("libdevmemtcp-emu.so is loaded but not preloaded: "
                           "it must come through LD_PRELOAD")
    lib.fakedev_attach.argtypes = [ctypes.c_int, ctypes.c_uint32]
    lib.fakedev_detach.argtypes = [ctypes.c_int]
    for f in (lib.fakedev_push, lib.fakedev_cycle):
        f.argtypes = [ctypes.c_int, ctypes.POINTER(Frag), ctypes.c_size_t]
    lib.fakedev_stats.argtypes = [ctypes.c_int, ctypes.POINTER(Stats)]
    lib.fakedev_bench_c.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64,
                                    ctypes.c_uint32, ctypes.c_uint32,
                                    ctypes.c_uint32, ctypes.c_uint64]
    lib.fakedev_bench_c.restype = ctypes.c_double
    lib.fakedev_bench_pipeline_c.argtypes = [
        ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32,
        ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint32,
        ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
    lib.fakedev_bench_pipeline_c.restype = ctypes.c_double
    return lib


_lib = _load()


def _check(ret):
    if ret < 0:
        raise OSError(-ret, os.strerror(-ret))
    return ret


def _frags(frags):
    arr = (Frag * max(len(frags), 1))()
    for i, f in enumerate(frags):
        if len(f) == 2:
            arr[i] = Frag(f[0], f[1], 0)
        else:
            arr[i] = Frag(f[0], f[1], f[2])
    return arr, len(frags)


def dmabuf_stand_in(size):
    """A memfd of size bytes for an import Buffer, which must be a dma-buf:
    test builds of the library take a memfd instead while
    DEVMEMTCP_TEST_DMABUF_MEMFD=1, set here for the whole process (a test
    of the refusal unsets it).  Returns the descriptor."""
    os.environ["DEVMEMTCP_TEST_DMABUF_MEMFD"] = "1"
    fd = os.memfd_create("devmemtcp-test")
    os.ftruncate(fd, size)
    return fd


def fileno(sock):
    return sock if isinstance(sock, int) else sock.fileno()


def attach(sock, binding_id=1):
    """Fake devmem receives on sock (an Rx, a socket or a descriptor):
    fragments of binding binding_id."""
    _check(_lib.fakedev_attach(fileno(sock), binding_id))


def detach(sock):
    _check(_lib.fakedev_detach(fileno(sock)))


def push(sock, frags):
    """Queue one receive: frags is [(offset, len) or (offset, len, LINEAR)]."""
    arr, n = _frags(frags)
    _check(_lib.fakedev_push(fileno(sock), arr, n))


def cycle(sock, frags):
    """Repeat this receive forever once the queue is empty."""
    arr, n = _frags(frags)
    _check(_lib.fakedev_cycle(fileno(sock), arr, n))


def stats(sock):
    """The fake kernel's books: tokens out ('outstanding'), returned
    ('freed'), returned while not out ('bad'), DONTNEED calls, ..."""
    st = Stats()
    _check(_lib.fakedev_stats(fileno(sock), ctypes.byref(st)))
    return st.asdict()


def bench_c(sock, iterations, max_frags, max_bytes, binding_id, size):
    """Nanoseconds per devmemtcp_rx_recv + devmemtcp_rx_release through
    the C API on sock (attached, with a cycle)."""
    buf_fd = dmabuf_stand_in(size)
    try:
        r = _lib.fakedev_bench_c(fileno(sock), buf_fd, iterations, max_frags,
                                 max_bytes, binding_id, size)
    finally:
        os.close(buf_fd)
    if r < 0:
        raise OSError(int(-r), os.strerror(int(-r)))
    return r


def bench_pipeline_c(sock, buf_fd, iterations, max_frags, max_bytes, binding_id,
                     size, buf_addr, device, gpu_flags, dst, dst_len, stream):
    """Nanoseconds per devmemtcp_rx_recv + devmemtcp_gpu_gather_release of
    one receive into [dst, dst + dst_len) on stream through the C API on
    sock (attached, with a cycle), the stream synchronised once at the end;
    buf_fd is imported as the binding's buffer at device address buf_addr."""
    r = _lib.fakedev_bench_pipeline_c(fileno(sock), buf_fd, iterations, max_frags,
                                      max_bytes, binding_id, size, buf_addr, device,
                                      gpu_flags, dst, dst_len, stream)
    if r < 0:
        raise OSError(int(-r), os.strerror(int(-r)))
    return r

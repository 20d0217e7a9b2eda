#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The receive pipeline through Python against the same loop in C, in one
process on one thread: a receive of 4 KiB fragments from the fake devmem
kernel (tests/emu/fakedevmem.c), gathered into a preallocated destination
on one CUDA stream, its tokens handed back; the stream synchronised once at
the end.  C: devmemtcp_rx_recv + devmemtcp_gpu_gather_release
(fakedev_bench_pipeline_c).  Python: Rx.recv_into(dst, 0, stream) (the same
two library calls in one Python call), and beside it Rx.recv() +
Fragments.gather_into(dst, stream) (a Fragments object per receive, the
destination imported through DLPack at each call).  Median of --repeat
runs of --iterations receives, per receive size, with the default launches
and with CUDA graphs (Gpu(graphs=True), DEVMEMTCP_GPU_GRAPHS).  Targets:
Python >= 90 % of C at 1 MiB receives, >= 80 % at 256 KiB.

usage: python-pipeline.py [--fake] [--iterations N] [--repeat R] [--out FILE]

Real mode: PyTorch with CUDA; the NIC's buffer and the destination are
torch tensors on device 0, the stream a torch.cuda.Stream.  --fake: the
fake CUDA driver ($DEVMEMTCP_LIBCUDA, tests/lib/fakecuda; with
DEVMEMTCP_FAKE_CUDA_NOCOPY=1 its kernels copy nothing): host memory stands for device
memory, so what is measured is the CPU cost per receive of each side, the
binding's overhead.  Needs the test build's package on PYTHONPATH and
LD_PRELOAD of libdevmemtcp-emu.so.  --out writes the Markdown report, which
ends with one line per size:
  SUMMARY pypipe size=1MiB c_gbps=X py_gbps=Y ratio=Y/X
"""

import argparse
import ctypes
import os
import socket
import statistics
import sys
import time

import devmemtcp as dm
from devmemtcp import _testing as fake

BINDING = 1
SIZE = 64 << 20
PAGE = 4096
SIZES = ((256 << 10, "256KiB", 0.80), (1 << 20, "1MiB", 0.90))
GRAPHS = 1 << 2      # DEVMEMTCP_GPU_GRAPHS


def frags_of(nbytes):
    # scattered 4 KiB pages, as a NIC's page pool hands them out
    pages = SIZE // PAGE
    return [((i * 7919) % pages * PAGE, PAGE) for i in range(nbytes // PAGE)]


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
_capi = ctypes.pythonapi
_capi.PyCapsule_New.restype = ctypes.py_object
_capi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_LIVE = {}     # the structs of imports not yet deleted, by address


@Versioned._fields_[3][1]
def _deleter(m):
    _LIVE.pop(ctypes.addressof(m.contents), None)


class HostDst:
    """Host memory the fake CUDA driver takes for device memory, as a
    kDLCUDA DLPack producer."""

    def __init__(self, n):
        self.n = n
        self.mem = (ctypes.c_uint8 * n)()
        self.shape = (ctypes.c_int64 * 1)(n)

    @property
    def addr(self):
        return ctypes.addressof(self.mem)

    def __dlpack_device__(self):
        return (dm.kDLCUDA, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        m = Versioned(major=1, minor=0)
        t = m.dl_tensor
        t.data = self.addr
        t.device_type, t.device_id, t.ndim = dm.kDLCUDA, 0, 1
        t.code, t.bits, t.lanes = 1, 8, 1
        t.shape = self.shape
        m.deleter = _deleter
        _LIVE[ctypes.addressof(m)] = m
        return _capi.PyCapsule_New(ctypes.addressof(m), b"dltensor_versioned", None)


class Fake:
    """--fake: the fake CUDA driver."""
    name = "fake CUDA driver (tests/lib/fakecuda)"

    def __init__(self):
        lib = os.environ.get("DEVMEMTCP_LIBCUDA", "")
        self.cu = ctypes.CDLL(lib) if lib else None
        if not hasattr(self.cu, "fakecuda_calls"):
            sys.exit("--fake needs DEVMEMTCP_LIBCUDA=<builddir>/tests/lib/fakecuda/libfakecuda.so")
        self.nic_mem = (ctypes.c_uint8 * SIZE)()
        self.nic_addr = ctypes.addressof(self.nic_mem)
        self.stream = self.stream_handle = 0x5100

    def dst(self, n):
        d = HostDst(n)
        return d, d.addr

    def sync(self):
        self.cu.cuStreamSynchronize(ctypes.c_void_p(self.stream_handle))


class Torch:
    name = "?"

    def __init__(self):
        import torch
        self.torch = torch
        if not torch.cuda.is_available():
            sys.exit("no CUDA device for PyTorch: use --fake")
        self.name = "%s, PyTorch %s (CUDA %s)" % (torch.cuda.get_device_name(0),
                                                  torch.__version__, torch.version.cuda)
        self.nic = torch.empty(SIZE, dtype=torch.uint8, device="cuda:0")
        self.nic_addr = self.nic.data_ptr()
        self.stream = torch.cuda.Stream(0)
        self.stream_handle = self.stream.cuda_stream

    def dst(self, n):
        t = self.torch.empty(n, dtype=self.torch.uint8, device="cuda:0")
        return t, t.data_ptr()

    def sync(self):
        self.stream.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out")
    a = ap.parse_args()
    env = Fake() if a.fake else Torch()

    ls = socket.create_server(("127.0.0.1", 0))
    peer = socket.create_connection(ls.getsockname())
    conn, _ = ls.accept()
    cfd = conn.dup()  # the C side's own descriptor
    ctx = dm.Context()
    stand_in = fake.dmabuf_stand_in(SIZE)
    buf = dm.Buffer(ctx, SIZE, "import", fd=stand_in, keep_fd=True,
                    segments=[(0, SIZE, env.nic_addr)], dl_device=(dm.kDLCUDA, 0),
                    view_cap=SIZE)
    lines = []

    def out(s=""):
        print(s, flush=True)
        lines.append(s)

    out("# Python pipeline against C, same run")
    out()
    out("%s; one thread; a receive of 4 KiB fragments (fake kernel), gathered into one "
        "preallocated destination on one stream, tokens handed back; the stream "
        "synchronised once at the end; median of %d runs of %d receives."
        % (env.name, a.repeat, a.iterations))
    out("C: devmemtcp_rx_recv + devmemtcp_gpu_gather_release.  Python `recv_into`: "
        "Rx.recv_into(dst, 0, stream), the same two calls in one Python call; "
        "`recv+gather_into`: Rx.recv() + Fragments.gather_into(dst, stream) "
        "(a Fragments per receive, dst imported at each call).")
    out()
    out("| receive | launches | C us | C GB/s | recv_into us | GB/s | % of C "
        "| recv+gather_into us | GB/s | % of C |")
    out("|---|---|---|---|---|---|---|---|---|---|")
    summary = []
    ok = True
    for size, label, target in SIZES:
        f = frags_of(size)
        for flags, lname in ((0, "default"), (GRAPHS, "graphs")):
            dst, dst_addr = env.dst(size)
            gpu = dm.Gpu(ctx, 0, graphs=bool(flags))
            rx = dm.Rx(ctx, conn, gpu=gpu, max_frags=1024, max_bytes=size)
            rx.add_buf(BINDING, buf)
            fake.attach(rx, BINDING)
            fake.attach(cfd, BINDING)
            fake.cycle(rx, f)
            fake.cycle(cfd, f)
            stream = env.stream
            c, p, g = [], [], []
            for _ in range(a.repeat):
                c.append(fake.bench_pipeline_c(cfd, stand_in, a.iterations, 1024, size,
                                               BINDING, SIZE, env.nic_addr, 0, flags,
                                               dst_addr, size, env.stream_handle) / 1e3)
                recv_into = rx.recv_into
                t0 = time.perf_counter_ns()
                for _ in range(a.iterations):
                    recv_into(dst, 0, stream)
                env.sync()
                p.append((time.perf_counter_ns() - t0) / a.iterations / 1e3)
                recv = rx.recv
                t0 = time.perf_counter_ns()
                for _ in range(a.iterations):
                    recv().gather_into(dst, stream)
                env.sync()
                g.append((time.perf_counter_ns() - t0) / a.iterations / 1e3)
            cm, pm, gm = (statistics.median(x) for x in (c, p, g))
            gbps = lambda us: size / us / 1e3    # noqa: E731
            out("| %s | %s | %.2f | %.1f | %.2f | %.1f | %.0f %% | %.2f | %.1f | %.0f %% |"
                % (label, lname, cm, gbps(cm), pm, gbps(pm), 100 * cm / pm,
                   gm, gbps(gm), 100 * cm / gm))
            if flags == 0:
                summary.append("SUMMARY pypipe size=%s c_gbps=%.2f py_gbps=%.2f ratio=%.3f"
                               % (label, gbps(cm), gbps(pm), cm / pm))
                ok = ok and cm / pm >= target
            fd = rx.fileno()
            rx.close()
            fake.detach(fd)
            fake.detach(cfd)
            gpu.close()
    out()
    out("Targets: Python >= 90 %% of C at 1 MiB receives, >= 80 %% at 256 KiB (default "
        "launches): %s." % ("met" if ok else "NOT met"))
    out()
    for s in summary:
        out(s)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")
    buf.close()
    ctx.close()
    peer.close()


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""PyTorch data loading over Linux Device Memory TCP.

Importing this module imports PyTorch; ``import devmemtcp`` alone never
does, and the rest of the package works without it.

A *flow* is a pair of TCP connections from one sender: a control
connection to ``port + 1`` carrying each sample's size (4 bytes, big
endian) and a data connection to ``port`` carrying the samples' bytes back
to back, which the NIC steers to a queue with a dma-buf bound: the payload
lands in device memory (or a udmabuf, ``device="cpu"``) and is gathered
into each sample's tensor without passing through the CPU.
(``examples/python/sender.py samples HOST PORT`` is such a sender.)

Two ways to read flows, for two cases:

:class:`DevmemSamples` -- an ``IterableDataset`` for ``DataLoader`` workers.
    The flows are split across the workers (``get_worker_info()``): worker
    *w* of *W* takes ``ports[w::W]``, and sets up its own NIC queue, flows
    and buffer (through ``devmemtcp-broker`` when the process lacks
    CAP_NET_ADMIN: the library chooses).  Nothing is set up before the
    worker iterates, so the objects never cross a fork.  Use it for CPU
    tensors (``device="cpu"``: a udmabuf, the CPU copies), with the default
    *fork* start method or with *spawn*.  For CUDA tensors a worker needs
    CUDA of its own: a *forked* worker cannot initialise CUDA once the
    parent has (PyTorch refuses: "Cannot re-initialize CUDA in forked
    subprocess"), so use ``multiprocessing_context="spawn"``, and every
    sample then crosses to the main process as a CUDA IPC handle (the
    tensor is not copied, but each one costs an IPC export, an open in the
    main process and a reference kept by the worker until the consumer
    frees it, and the worker's allocator cannot reuse the memory until
    then) -- which is what the next class avoids.

:class:`ThreadedReader` -- the main process reads every flow, one thread
    per flow.  The receive releases the GIL while it waits and while the
    library gathers, so threads read in parallel with the training loop;
    samples are CUDA tensors of the main process, on the CUDA stream each
    thread gathers on, handed over with an event the consumer's stream
    waits for: no inter-process copy, no IPC, one CUDA context.  Use it
    for GPU training.

Both yield ``torch.uint8`` tensors of one sample each, or with
``meta=True`` tuples ``(port, index, tensor)`` (the flow's data port, the
sample's number on that flow).
"""

import contextlib
import queue as _queue
import socket
import struct
import threading

import torch

from . import _devmemtcp as _dm

__all__ = ["DevmemSamples", "ThreadedReader", "assemble", "MAX_SAMPLE"]

MAX_SAMPLE = 1 << 20


def _read_exact(f, n):
    b = f.read(n)
    return b if len(b) == n else None


def assemble(rx, sizes, device, stream=None, max_sample=MAX_SAMPLE):
    """Yield one tensor per size read from ``sizes`` (a binary file object,
    the control connection), filled from the devmem receiver ``rx``.
    ``device``: a torch.device; ``stream``: the CUDA stream the gathers
    run on (None: the current stream; ignored for CPU tensors).  Each
    receive asks for no more than the rest of the current sample, so none
    straddles two samples, and lands straight in the sample's tensor
    (``Rx.recv_into``: the tokens go back when the gather has read them).
    """
    device = torch.device(device)
    cuda = device.type == "cuda"
    if cuda and stream is None:
        stream = torch.cuda.current_stream(device)
    while True:
        hdr = _read_exact(sizes, 4)
        if hdr is None:
            return
        size = struct.unpack("!I", hdr)[0]
        if not 0 < size <= max_sample:
            raise ValueError("bad sample size %d on the control connection "
                             "(at most %d)" % (size, max_sample))
        sample = torch.empty(size, dtype=torch.uint8, device=device)
        filled = 0
        while filled < size:
            n = rx.recv_into(sample, filled, stream if cuda else None,
                             max_bytes=size - filled)
            if not n:
                raise EOFError("the data connection ended inside a sample "
                               "(%d of %d bytes)" % (filled, size))
            filled += n
        if cuda:
            # the allocator keeps the memory until the gathers are done
            sample.record_stream(stream)
        yield sample


class _Flows:
    """The receiving end of some flows on one NIC queue: a context, a
    buffer bound to the queue, the flows steered there, the listening
    sockets; connections accepted flow by flow."""

    def __init__(self, es, ifname, ports, device, buf_size, queue, gpu=None,
                 on_ready=None):
        self.device = torch.device(device)
        self.ctx = es.enter_context(_dm.Context())
        if self.device.type == "cuda":
            self.buf = es.enter_context(_dm.Buffer(self.ctx, buf_size, "cuda",
                                                   device=self.device.index or 0))
        else:
            self.buf = es.enter_context(_dm.Buffer(self.ctx, buf_size, "udmabuf"))
        self.nic = es.enter_context(_dm.Nic(
            self.ctx, ifname, queues=None if queue is None else [queue],
            flows=["tcp4 dst-port %d" % p for p in ports], buf=self.buf))
        self.listen = {}
        for p in ports:
            self.listen[p] = (es.enter_context(socket.create_server(("", p + 1))),
                              es.enter_context(socket.create_server(("", p))))
        self.gpu = gpu
        self.conns = []
        if on_ready:
            on_ready(self.nic, ports)

    def samples(self, es, port, max_sample, stream=None):
        lctrl, ldata = self.listen[port]
        ctrl = es.enter_context(lctrl.accept()[0])
        data = es.enter_context(ldata.accept()[0])
        self.conns += [ctrl, data]
        rx = es.enter_context(_dm.Rx(self.ctx, data, gpu=self.gpu))
        rx.add_buf(self.nic, self.buf)
        yield from assemble(rx, es.enter_context(ctrl.makefile("rb")), self.device,
                            stream, max_sample)


def _ports(ports):
    ports = [ports] if isinstance(ports, int) else list(ports)
    if not ports or any(not 0 < p < 65535 for p in ports):
        raise ValueError("ports: data ports between 1 and 65534 (control on port + 1)")
    return ports


class DevmemSamples(torch.utils.data.IterableDataset):
    """Samples of the flows on ``ports`` of ``ifname`` (see the module's
    documentation), split across DataLoader workers.

    ``device``: "cpu" (a udmabuf; CPU tensors) or a CUDA device (its
    memory; spawn the workers).  ``buf_size``: each worker's buffer.
    ``queue``: the RX queue of a single worker (default: the library picks
    a free one per worker).  ``on_ready(nic, ports)`` is called in each
    worker once its flows are steered and its sockets listen.
    """

    def __init__(self, ifname, ports, *, device="cpu", buf_size=64 << 20,
                 queue=None, meta=False, max_sample=MAX_SAMPLE, on_ready=None):
        super().__init__()
        self.ifname, self.ports = ifname, _ports(ports)
        self.device, self.buf_size, self.queue = str(device), buf_size, queue
        self.meta, self.max_sample, self.on_ready = meta, max_sample, on_ready

    def worker_ports(self):
        """The ports this process reads: all of them in the main process,
        ``ports[id::num_workers]`` in a DataLoader worker."""
        info = torch.utils.data.get_worker_info()
        if info is None:
            return list(self.ports)
        return self.ports[info.id::info.num_workers]

    def __iter__(self):
        mine = self.worker_ports()
        if not mine:
            return
        info = torch.utils.data.get_worker_info()
        if self.queue is not None and info is not None and info.num_workers > 1:
            raise ValueError("queue= names one RX queue: with several workers "
                             "let the library pick one per worker")
        with contextlib.ExitStack() as es:
            flows = _Flows(es, self.ifname, mine, self.device, self.buf_size,
                           self.queue, on_ready=self.on_ready)
            for port in mine:
                with contextlib.ExitStack() as fes:
                    for i, t in enumerate(flows.samples(fes, port, self.max_sample)):
                        yield (port, i, t) if self.meta else t


class ThreadedReader:
    """Read the flows on ``ports`` of ``ifname`` in this process, one
    thread per flow, each with its own NIC queue, buffer and (for CUDA) its
    own stream; iterate to get the samples as they are complete, from any
    flow (in order within a flow).  ``depth``: samples held per flow
    before its thread waits for the consumer.  A context manager: leaving
    it (or close()) stops the threads and undoes the NIC setup.  An error
    in a thread is raised by the iteration.

    ``device``: a CUDA device (the point of this class) or "cpu".
    ``gpu``: a devmemtcp.Gpu for the gathers (default: one per receiver).
    """

    _END = object()

    def __init__(self, ifname, ports, *, device="cuda", buf_size=64 << 20,
                 depth=8, meta=False, max_sample=MAX_SAMPLE, gpu=None,
                 on_ready=None):
        self.ifname, self.ports = ifname, _ports(ports)
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.meta, self.max_sample = meta, max_sample
        self._es = contextlib.ExitStack()
        self._q = _queue.Queue()
        self._room = {p: threading.Semaphore(depth) for p in self.ports}
        self._stop = threading.Event()
        self._threads = []
        self._running = len(self.ports)
        try:
            self._flows = [_Flows(self._es, ifname, [p], self.device, buf_size, None,
                                  gpu=gpu, on_ready=on_ready) for p in self.ports]
        except BaseException:
            self._es.close()
            raise
        for p, fl in zip(self.ports, self._flows):
            t = threading.Thread(target=self._run, args=(p, fl), daemon=True,
                                 name="devmemtcp-flow-%d" % p)
            self._threads.append(t)
            t.start()

    def _run(self, port, flows):
        cuda = self.device.type == "cuda"
        try:
            stream = torch.cuda.Stream(self.device) if cuda else None
            with contextlib.ExitStack() as es:
                for i, t in enumerate(flows.samples(es, port, self.max_sample, stream)):
                    ev = None
                    if cuda:
                        ev = torch.cuda.Event()
                        ev.record(stream)
                    while not self._room[port].acquire(timeout=0.1):
                        if self._stop.is_set():
                            return
                    self._q.put((port, i, t, ev))
                    if self._stop.is_set():
                        return
            self._q.put((port, None, self._END, None))
        except BaseException as e:  # handed to the consumer
            self._q.put((port, None, e, None))

    def __iter__(self):
        return self

    def __next__(self):
        while self._running:
            port, i, t, ev = self._q.get()
            if t is self._END:
                self._running -= 1
                continue
            if isinstance(t, BaseException):
                self._running -= 1
                self.close()
                raise t
            self._room[port].release()
            if ev is not None:
                # the consumer's stream reads the sample after its gathers
                torch.cuda.current_stream(self.device).wait_event(ev)
            return (port, i, t) if self.meta else t
        raise StopIteration

    def close(self):
        """Stop the threads (a thread waiting for data is woken by closing
        its sockets) and undo the NIC setup."""
        self._stop.set()
        for fl in getattr(self, "_flows", ()):
            socks = [s for pair in fl.listen.values() for s in pair] + fl.conns
            for s in socks:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=10)
        self._es.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

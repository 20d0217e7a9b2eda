#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""A PyTorch IterableDataset whose samples arrive over the network straight
into GPU memory (Linux Device Memory TCP), as examples/dataloader.c does.

A plain TCP control connection carries the size of every sample; the devmem
connection carries the payload, which lands in a dma-buf the CPU never
reads.  Each receive asks for no more than the rest of the current sample,
so a receive never straddles two samples, and its fragments are gathered
on a CUDA stream straight into the sample's tensor; the NIC gets its
buffers back once that gather has run.

  receiver: torch_loader.py -l PORT -i IFNAME [-q QUEUE] [--cpu] [-n SAMPLES]
  sender:   sender.py samples HOST PORT [-n SAMPLES]   (or examples/dataloader -s)

The receiver prepares the NIC (header split, the data port's flow steered
to QUEUE, default the last RX queue, the buffer bound there) and undoes it
at the end; it needs CAP_NET_ADMIN.  --cpu receives into a udmabuf and
yields CPU tensors, for machines without a GPU (e.g. the simulated NIC).
"""

import argparse
import contextlib
import socket
import struct
import sys

import torch

import devmemtcp as dm

MAX_SAMPLE = 1 << 20


def read_exact(f, n):
    b = f.read(n)
    return b if len(b) == n else None


def assemble(rx, sizes, device, stream):
    """Yield one tensor per size read from `sizes` (a binary file), filled
    from the devmem receiver `rx`.  device: a torch device; stream: the
    CUDA stream the gathers run on (None for CPU tensors)."""
    while True:
        hdr = read_exact(sizes, 4)
        if hdr is None:
            return
        size = struct.unpack("!I", hdr)[0]
        if not 0 < size <= MAX_SAMPLE:
            raise ValueError("bad sample size %d on the control connection" % size)
        sample = torch.empty(size, dtype=torch.uint8, device=device)
        filled = 0
        while filled < size:
            frags = rx.recv(max_bytes=size - filled)
            if not frags:
                raise EOFError("the stream ended inside a sample")
            # packs the fragments on `stream`; the tokens go back after it
            filled += frags.gather_into(sample[filled:], stream)
        if stream is not None:
            # the consumer's stream reads the sample after the gathers, and
            # the allocator keeps its memory until they are done
            torch.cuda.current_stream(device).wait_stream(stream)
            sample.record_stream(stream)
        yield sample


class DevmemSamples(torch.utils.data.IterableDataset):
    """Samples received on `port` of `ifname` (sizes on port + 1).  Use
    with DataLoader(ds, batch_size=None) in the main process: the NIC, the
    sockets and the GPU stream live in the iterating process."""

    def __init__(self, ifname, port, *, queue=None, device=0, cpu=False,
                 buf_size=64 << 20, on_ready=None):
        self.ifname, self.port, self.queue = ifname, port, queue
        self.device = torch.device("cpu") if cpu else torch.device("cuda", device)
        self.cpu, self.buf_size, self.on_ready = cpu, buf_size, on_ready

    def __iter__(self):
        with contextlib.ExitStack() as es:
            ctx = es.enter_context(dm.Context())
            if self.cpu:
                buf = es.enter_context(dm.Buffer(ctx, self.buf_size, "udmabuf"))
            else:
                buf = es.enter_context(dm.Buffer(ctx, self.buf_size, "cuda",
                                                 device=self.device.index))
            nic = es.enter_context(dm.Nic(
                ctx, self.ifname,
                queues=None if self.queue is None else [self.queue],
                flows=["tcp4 dst-port %d" % self.port], buf=buf))
            lctrl = es.enter_context(socket.create_server(("", self.port + 1)))
            ldata = es.enter_context(socket.create_server(("", self.port)))
            if self.on_ready:
                self.on_ready(nic)
            ctrl = es.enter_context(lctrl.accept()[0])
            data = es.enter_context(ldata.accept()[0])
            rx = es.enter_context(dm.Rx(ctx, data))
            rx.add_buf(nic, buf)
            stream = None if self.cpu else torch.cuda.Stream(self.device)
            yield from assemble(rx, ctrl.makefile("rb"), self.device, stream)
            st = rx.stats()
            print("%d fragments in device memory, %d linear bytes, %d steering misses"
                  % (st["frags"], st["linear_bytes"], st["steering_misses"]))


def expected(sample, size, device):
    """examples/dataloader.c's pattern of a sample, computed on device."""
    k = torch.arange(size, dtype=torch.int64, device=device)
    return ((31 * k + (k >> 8) + 218 * sample) & 255).to(torch.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-l", "--listen", type=int, required=True, help="data port (sizes on +1)")
    ap.add_argument("-i", "--ifname", required=True)
    ap.add_argument("-q", "--queue", type=int)
    ap.add_argument("-n", "--samples", type=int, default=200)
    ap.add_argument("--cpu", action="store_true", help="udmabuf and CPU tensors")
    a = ap.parse_args()

    ds = DevmemSamples(a.ifname, a.listen, queue=a.queue, cpu=a.cpu,
                       on_ready=lambda nic: print(
                           "%s: binding %d on queue %s; samples on port %d, sizes on port %d"
                           % (a.ifname, nic.binding_id, nic.queues, a.listen, a.listen + 1),
                           flush=True))
    done = nbytes = bad = 0
    for i, sample in enumerate(torch.utils.data.DataLoader(ds, batch_size=None)):
        # here a trainer would take the sample; we check it
        if not torch.equal(sample, expected(i, sample.numel(), sample.device)):
            bad += 1
        done += 1
        nbytes += sample.numel()
    print("received (%s): %d samples, %d bytes, %d bad"
          % ("CPU" if a.cpu else "GPU gather", done, nbytes, bad))
    return 0 if done == a.samples and not bad else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Training samples that arrive over the network straight into GPU memory
(Linux Device Memory TCP), through devmemtcp.torch, as examples/dataloader.c
does in C.

A plain TCP control connection carries the size of every sample; the devmem
connection carries the payload, which lands in a dma-buf the CPU never
reads and is gathered on a CUDA stream straight into each sample's tensor;
the NIC gets its buffers back once the gather has read them.

  receiver: torch_loader.py -l PORT -i IFNAME [-q QUEUE] [--cpu] [-n SAMPLES]
                            [-f FLOWS] [-w WORKERS | --threads]
  sender:   sender.py samples HOST PORT [-n SAMPLES]   (one per flow: PORT, PORT+2, ...)

With -f FLOWS the data ports are PORT, PORT + 2, ... (sizes on each + 1).
-w WORKERS reads them in DataLoader workers (devmemtcp.torch.DevmemSamples,
each worker its own queue, flows and buffer; CPU tensors, or CUDA with
--spawn); --threads reads them in this process, one thread per flow
(devmemtcp.torch.ThreadedReader: CUDA tensors without inter-process
copies).  The receiver prepares the NIC (header split, each flow steered
to a queue, the buffer bound there) and undoes it at the end; it needs
CAP_NET_ADMIN, or devmemtcp-broker.  --cpu receives into a udmabuf and
yields CPU tensors, for machines without a GPU (e.g. the simulated NIC).
"""

import argparse
import sys

import torch

from devmemtcp import torch as dmt


def expected(sample, size, device):
    """examples/dataloader.c's pattern of a sample, computed on device."""
    k = torch.arange(size, dtype=torch.int64, device=device)
    return ((31 * k + (k >> 8) + 218 * sample) & 255).to(torch.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-l", "--listen", type=int, required=True, help="data port (sizes on +1)")
    ap.add_argument("-i", "--ifname", required=True)
    ap.add_argument("-q", "--queue", type=int, help="the RX queue (one flow, no workers)")
    ap.add_argument("-n", "--samples", type=int, default=200, help="samples per flow")
    ap.add_argument("-f", "--flows", type=int, default=1)
    ap.add_argument("-w", "--workers", type=int, default=0, help="DataLoader workers")
    ap.add_argument("--spawn", action="store_true", help="spawn the workers (CUDA)")
    ap.add_argument("--threads", action="store_true", help="one thread per flow, here")
    ap.add_argument("--cpu", action="store_true", help="udmabuf and CPU tensors")
    a = ap.parse_args()

    device = "cpu" if a.cpu else "cuda:0"
    ports = [a.listen + 2 * i for i in range(a.flows)]

    def ready(nic, ports):
        print("%s: binding %d on queue %s; samples on ports %s, sizes on ports + 1"
              % (a.ifname, nic.binding_id, nic.queues, ports), flush=True)

    if a.threads:
        loader = dmt.ThreadedReader(a.ifname, ports, device=device, meta=True,
                                    on_ready=ready)
    else:
        ds = dmt.DevmemSamples(a.ifname, ports, device=device, queue=a.queue,
                               meta=True, on_ready=ready)
        loader = torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=a.workers,
            multiprocessing_context="spawn" if a.spawn else None)
    done = nbytes = bad = 0
    for port, i, sample in loader:
        # here a trainer would take the sample; we check it
        if not torch.equal(sample, expected(i, sample.numel(), sample.device)):
            bad += 1
        done += 1
        nbytes += sample.numel()
    if a.threads:
        loader.close()
    print("received (%s): %d samples, %d bytes, %d bad"
          % ("CPU" if a.cpu else "GPU gather", done, nbytes, bad))
    return 0 if done == a.samples * a.flows and not bad else 1


if __name__ == "__main__":
    sys.exit(main())

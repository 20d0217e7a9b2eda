#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Received fragments viewed in place through DLPack, for the emulated NIC's
runs (a test tool): a stream of the pattern "byte i is i % 251"
(sender.py stream) received one fragment at a time, each viewed with
torch.from_dlpack on the GPU (--cuda: CUDA memory) or numpy.from_dlpack
(a udmabuf), compared with the pattern where it lives, and let go.

  views.py -l PORT -i IFNAME [--bytes N] [--cuda]
"""

import argparse
import socket
import sys

import devmemtcp as dm
from devmemtcp._pattern import PERIOD, pattern


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-l", "--listen", type=int, required=True)
    ap.add_argument("-i", "--ifname", required=True)
    ap.add_argument("--bytes", type=int, default=8 << 20)
    ap.add_argument("--cuda", action="store_true")
    a = ap.parse_args()
    if a.cuda:
        import torch
        dev = torch.device("cuda", 0)
        period = torch.tensor(list(pattern(0, PERIOD)), dtype=torch.uint8, device=dev)
    else:
        import numpy
    views = bad = got = 0
    with dm.Context() as ctx, \
            dm.Buffer(ctx, 64 << 20, "cuda" if a.cuda else "udmabuf") as buf, \
            dm.Nic(ctx, a.ifname, flows=["tcp4 dst-port %d" % a.listen], buf=buf) as nic, \
            socket.create_server(("", a.listen)) as ls:
        print("%s: binding %d on queue %s; stream on port %d"
              % (a.ifname, nic.binding_id, nic.queues, a.listen), flush=True)
        conn, _ = ls.accept()
        with conn, dm.Rx(ctx, conn) as rx:
            rx.add_buf(nic, buf)
            while got < a.bytes:
                frags = rx.recv(max_frags=1)
                if not frags:
                    break
                n = frags.nbytes
                if a.cuda:
                    t = torch.from_dlpack(frags)
                    want = period[(torch.arange(n, device=dev) + got) % PERIOD]
                    ok = t.device == dev and bool(torch.equal(t.reshape(-1), want))
                    del t
                else:
                    v = numpy.from_dlpack(frags)
                    ok = v.tobytes() == pattern(got, n)
                    del v
                frags.release()
                bad += not ok
                views += 1
                got += n
    print("views: %d fragments viewed in place (%s), %d bytes, %d bad"
          % (views, "torch.from_dlpack, CUDA" if a.cuda else "numpy.from_dlpack, host", got, bad))
    return 0 if got == a.bytes and not bad else 1


if __name__ == "__main__":
    sys.exit(main())

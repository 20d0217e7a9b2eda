#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""A consumer that stalls, for the emulated NIC's fault runs (a test tool):
it receives a stream of the pattern "byte i is i % 251" (sender.py stream)
on a devmem receiver, but the thread that checks and gives back what
arrived starts only STALL seconds late, so every token stays held and the
NIC runs out of pages meanwhile (page-pool starvation) while recv() waits
for them.  Every byte is checked once the consumer runs, on the GPU with
--cuda (torch), else by reading the buffer.  Prints the bytes, the largest
number of bytes held at once, and the receiver's statistics.

  stall.py -l PORT -i IFNAME [--bytes N] [--buf N] [--stall S] [--cuda]
"""

import argparse
import queue
import socket
import sys
import threading
import time

import devmemtcp as dm
from devmemtcp._pattern import PERIOD, pattern


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-l", "--listen", type=int, required=True)
    ap.add_argument("-i", "--ifname", required=True)
    ap.add_argument("--bytes", type=int, default=16 << 20)
    ap.add_argument("--buf", type=int, default=2 << 20)
    ap.add_argument("--stall", type=float, default=1.5)
    ap.add_argument("--cuda", action="store_true")
    a = ap.parse_args()

    if a.cuda:
        import torch
        dev = torch.device("cuda", 0)
        stream = torch.cuda.Stream(dev)
        period = torch.tensor(list(pattern(0, PERIOD)), dtype=torch.uint8, device=dev)
    work = queue.Queue()
    state = {"pos": 0, "bad": 0, "held": 0, "held_max": 0}
    lock = threading.Lock()

    def check(frags):
        """The bytes of frags at stream position pos are the pattern."""
        pos, n = state["pos"], frags.nbytes
        if a.cuda:
            dst = torch.empty(n, dtype=torch.uint8, device=dev)
            frags.gather_into(dst, stream)
            stream.synchronize()
            want = period[(torch.arange(n, device=dev) + pos) % PERIOD]
            ok = bool(torch.equal(dst, want))
        else:
            got = frags.read()
            frags.release()
            ok = got == pattern(pos, n)
        state["bad"] += not ok
        state["pos"] += n

    def consumer():
        time.sleep(a.stall)
        while True:
            frags = work.get()
            if frags is None:
                return
            with lock:
                state["held"] -= frags.nbytes
            check(frags)

    with dm.Context() as ctx, \
            dm.Buffer(ctx, a.buf, "cuda" if a.cuda else "udmabuf") as buf, \
            dm.Nic(ctx, a.ifname, flows=["tcp4 dst-port %d" % a.listen], buf=buf) as nic, \
            socket.create_server(("", a.listen)) as ls:
        print("%s: binding %d on queue %s; stream on port %d"
              % (a.ifname, nic.binding_id, nic.queues, a.listen), flush=True)
        conn, _ = ls.accept()
        with conn, dm.Rx(ctx, conn) as rx:
            rx.add_buf(nic, buf)
            t = threading.Thread(target=consumer)
            t.start()
            got = 0
            while got < a.bytes:
                frags = rx.recv()
                if not frags:
                    break
                got += frags.nbytes
                with lock:
                    state["held"] += frags.nbytes
                    state["held_max"] = max(state["held_max"], state["held"])
                work.put(frags)
            work.put(None)
            t.join()
            st = rx.stats()
    print("stall: %d bytes received, %d checked, %d bad receives; at most %d bytes held at once (buffer %d); %s"
          % (got, state["pos"], state["bad"], state["held_max"], a.buf,
             ", ".join("%s %d" % kv for kv in sorted(st.items()) if kv[1])))
    return 0 if got == a.bytes and state["pos"] == a.bytes and not state["bad"] else 1


if __name__ == "__main__":
    sys.exit(main())

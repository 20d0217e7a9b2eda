#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""A plain-Python sender (no devmem needed on this side).

  sender.py samples HOST PORT [-n N] [--wait S]
      Training samples for torch_loader.py (or examples/dataloader.c): their
      sizes, 4-byte big-endian each, on a control connection to PORT + 1, and
      their bytes on the data connection to PORT.  Sample i has a size from
      the same generator as examples/dataloader.c and carries its pattern.

  sender.py stream HOST PORT BYTES[K|M|G] [--delay S]
      BYTES of the test pattern "stream byte i is i % 251" on one connection
      (the peer of the vm tests), after waiting S seconds once connected.
"""

import argparse
import socket
import struct
import sys
import time

MAX_SAMPLE = 1 << 20

# pattern(sample, k) of examples/dataloader.c:
#   (uint8_t)((k + sample * 7) * 31 + (k >> 8) + sample)
#     = 31 * (k & 255) + (k >> 8) + 218 * sample   (mod 256)
# so each 256-byte block is one of 256 rows, chosen by (k >> 8) + 218 * sample.
_ROWS = [bytes((31 * lo + c) & 255 for lo in range(256)) for c in range(256)]


def sample_bytes(sample, size):
    """The bytes of sample number `sample`, `size` long."""
    blocks = (size + 255) // 256
    shift = 218 * sample
    return b"".join(_ROWS[(hi + shift) & 255] for hi in range(blocks))[:size]


def sample_sizes(n):
    """The sizes of samples 0..n-1 (examples/dataloader.c's generator)."""
    seed = 42
    for _ in range(n):
        seed = (seed * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        yield 1 + (seed >> 33) % MAX_SAMPLE


def stream_bytes(pos, n, period=251):
    """n bytes of the stream pattern from position pos."""
    start = pos % period
    return (bytes(range(period)) * ((start + n) // period + 1))[start:start + n]


def connect(host, port, tries=100):
    for i in range(tries):
        try:
            return socket.create_connection((host, port))
        except OSError:
            if i == tries - 1:
                raise
            time.sleep(0.1)


def send_samples(host, port, n, wait=10.0):
    tries = max(1, int(wait * 10))
    ctrl = connect(host, port + 1, tries)
    data = connect(host, port, tries)
    total = 0
    for i, size in enumerate(sample_sizes(n)):
        ctrl.sendall(struct.pack("!I", size))
        data.sendall(sample_bytes(i, size))
        total += size
    data.close()
    ctrl.close()
    print("sent %d samples, %d bytes" % (n, total))


def send_stream(host, port, nbytes, delay):
    s = connect(host, port)
    if delay:
        time.sleep(delay)
    chunk = 1 << 20
    # the pattern from position 0, one period longer than a chunk, holds
    # every chunk whatever its position
    block = stream_bytes(0, chunk + 251)
    pos = 0
    while pos < nbytes:
        n = min(chunk, nbytes - pos)
        s.sendall(block[pos % 251:pos % 251 + n])
        pos += n
    s.close()


def size_arg(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text.rstrip("KMGkmg")) * mult


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("samples")
    s.add_argument("host")
    s.add_argument("port", type=int)
    s.add_argument("-n", type=int, default=200, help="samples (200)")
    s.add_argument("--wait", type=float, default=10.0,
                   help="seconds to retry connecting (10)")
    t = sub.add_parser("stream")
    t.add_argument("host")
    t.add_argument("port", type=int)
    t.add_argument("bytes", type=size_arg)
    t.add_argument("--delay", type=float, default=0)
    a = ap.parse_args()
    if a.mode == "samples":
        send_samples(a.host, a.port, a.n, a.wait)
    else:
        send_stream(a.host, a.port, a.bytes, a.delay)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The peer of a fault run (a test tool): examples/python/sender.py's
samples, then half of one more, then a reset (SO_LINGER 0) instead of a
close, as a peer that crashes mid-sample.

  fault-sender.py HOST PORT SAMPLES
"""

import os
import socket
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "examples", "python"))
import sender  # noqa: E402


def main():
    host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ctrl = sender.connect(host, port + 1)
    data = sender.connect(host, port)
    for i, size in enumerate(sender.sample_sizes(n + 1)):
        ctrl.sendall(struct.pack("!I", size))
        body = sender.sample_bytes(i, size)
        if i == n:
            data.sendall(body[:size // 2])
            break
        data.sendall(body)
    data.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    data.close()
    ctrl.close()
    print("fault-sender: %d samples and half of one more, then a reset" % n)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Write the seed corpus of every harness under corpus/<harness>/seed-*.

Seeds are what the parsers meet in real use: control buffers laid out as
the kernel's put_cmsg() lays them out (x86-64), the netlink replies
recorded from a real kernel (tests/unit/data/*.h), journals as the library
writes them, flows as the documentation spells them.  Reproducers of bugs
(crash-*, regress-*) are committed next to the seeds by hand and never
rewritten here.  Run from anywhere: python3 tests/fuzz/make-corpus.py
"""
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "unit", "data")

SOL_SOCKET, SOL_IP, SOL_IPV6 = 1, 0, 41
SCM_DEVMEM_LINEAR, SCM_DEVMEM_DMABUF = 78, 79
IP_RECVERR, IPV6_RECVERR = 11, 25
SO_EE_ORIGIN_ZEROCOPY = 5


def align(n):
    return (n + 7) & ~7


def cmsg(level, ctype, data):
    """One cmsg: 16-byte header (size_t len, int level, int type), data,
    padding to 8 (CMSG_SPACE)."""
    hdr = struct.pack("<Qii", 16 + len(data), level, ctype)
    body = hdr + data
    return body + b"\0" * (align(len(body)) - len(body))


def dmabuf(off, size, token, dmabuf_id):
    return cmsg(SOL_SOCKET, SCM_DEVMEM_DMABUF,
                struct.pack("<QIIII", off, size, token, dmabuf_id, 0))


def linear(size):
    return cmsg(SOL_SOCKET, SCM_DEVMEM_LINEAR,
                struct.pack("<QIIII", 0, size, 0, 0, 0))


def write(harness, name, data):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def cmsg_seeds():
    def seed(name, maxf, ret, ctrl):
        write("cmsg", name, struct.pack("<BI", maxf, ret) + ctrl)

    frags = b"".join(dmabuf(i * 4096, 4096, i, 7) for i in range(4))
    seed("dmabuf4", 64, 4 * 4096, frags)
    seed("interleaved", 64, 100 + 2 * 4096,
         linear(60) + dmabuf(0, 4096, 0, 7) + linear(40) +
         dmabuf(8192, 4096, 1, 7))
    seed("plain", 64, 1000, b"")
    seed("unknown-first", 64, 4096,
         cmsg(SOL_IP, 8, b"\1\0\0\0") + dmabuf(0, 4096, 3, 7))
    seed("too-many", 2, 3 * 4096, frags[:3 * 40])
    seed("truncated", 64, 4096, frags[:40 + 20])
    seed("mismatch", 64, 4097, frags[:40])


def rx_seeds():
    # batch, then per binding: nsegs, per seg (gap, len, addr u64), tail,
    # registered?; then steps (see fuzz-rx.c)
    bufs = b""
    for i in range(3):
        bufs += bytes([1]) + bytes([0, 2]) + struct.pack("<Q", (i + 1) << 32)
        bufs += bytes([0, 1])
    recv = bytes([0, 4, 64, 0])
    for i in range(4):
        recv += bytes([10]) + struct.pack("<H", 4095) + bytes([i % 3]) + \
            struct.pack("<H", i * 64) + struct.pack("<I", 0)
    write("rx", "recv-release", struct.pack("<H", 128) + bufs + recv +
          bytes([3, 4, 0, 0, 0, 0, 1, 0, 2, 0, 3, 0]) + bytes([7, 0]))
    write("rx", "recv-defer", struct.pack("<H", 0) + bufs + recv + recv +
          bytes([5, 8]) + b"".join(struct.pack("<H", i) for i in range(8)) +
          bytes([6, 0]))


def errqueue_seeds():
    def ee(errno, origin, code, lo, hi):
        return struct.pack("<IBBBBII", errno, origin, 0, code, 0, lo, hi)

    write("errqueue", "zerocopy-v4",
          cmsg(SOL_IP, IP_RECVERR, ee(0, SO_EE_ORIGIN_ZEROCOPY, 0, 0, 9)))
    write("errqueue", "copied-v6",
          cmsg(SOL_IPV6, IPV6_RECVERR, ee(0, SO_EE_ORIGIN_ZEROCOPY, 1, 5, 5)))
    write("errqueue", "icmp-after-other",
          cmsg(SOL_IP, 8, b"\0" * 12) +
          cmsg(SOL_IP, IP_RECVERR, ee(113, 2, 1, 0, 0) + b"\0" * 16))


def recorded_replies():
    """Every byte array of tests/unit/data/*.h, by name."""
    out = {}
    for fn in sorted(os.listdir(DATA)):
        if not fn.endswith(".h"):
            continue
        text = open(os.path.join(DATA, fn)).read()
        for m in re.finditer(r"static const unsigned char (\w+)\[\] = \{(.*?)\};",
                             text, re.S):
            out[m.group(1)] = bytes(int(x, 16) for x in
                                    re.findall(r"0x([0-9a-fA-F]{2})", m.group(2)))
    return out


def nl_seeds():
    rec = recorded_replies()
    for name, data in rec.items():
        write("nl", name, bytes([0]) + data)

    # nl-replies: (request, flags: 1 = answer this request) then chunks
    def replies(name, op, flags, *chunks):
        write("nl-replies", name, bytes([op, flags]) + b"".join(
            struct.pack("<H", len(c)) + c for c in chunks))

    replies("queue-dump", 0, 1, rec["rec_queue_dump_va"])
    replies("queue-list", 1, 1, rec["rec_queue_dump_va"])
    replies("qstats", 2, 0x05, rec["rec_queue_dump_va"])
    replies("bind-veth", 3, 1, rec["rec_bind_rx_veth"])
    replies("bind-noqueues", 3, 1, rec["rec_bind_rx_noqueues"])
    replies("rings", 4, 0x01, rec["rec_rings_get_va"])
    replies("channels", 4, 0x11, rec["rec_channels_get_va"])
    replies("features", 4, 0x21, rec["rec_features_get_va"])
    replies("rss", 4, 0x31, rec["rec_rss_get_va"])
    replies("rss-dump", 5, 0x51, rec["rec_rss_get_va"])
    replies("route", 6, 1, rec["rec_bind_rx_nodev"])
    replies("probe", 7, 1, rec["rec_queue_dump_va"], rec["rec_rings_get_va"],
            rec["rec_features_get_va"], rec["rec_rss_get_va"],
            rec["rec_channels_get_va"])


BASE = """devmemtcp-base 2
ifname dsim1
ifindex 7
netns 4026531840
tds 1
hds 256
ntuple 0
rss 8 0 1 2 3 4 5 6 7
rss-default 1
applied tds=2 hds=0 ntuple=1
applied-rss 8 0 1 2 3 4 5 0 1
end
"""


def journal_seeds():
    """The baseline as the NIC layer writes it; the owner files
    (seed-owner-*) were written by dmt_owner_format and are kept as they
    are."""
    write("journal", "base", BASE.encode())


def flow_seeds():
    for i, text in enumerate([
            "dst-ip 10.0.0.1 dst-port 5201",
            "tcp6 dst-ip 2001:db8::1/64 src-port 40000 queue 1",
            "src-ip 192.168.1.0/24 dst-port 80",
            "tcp4 dst-port 1",
            "tcp6 src-ip ::ffff:10.1.2.3 dst-ip fd77::2"]):
        write("flow", "text%d" % i, text.encode())


def program_seeds():
    # byte programs: any bytes are a program; a few starting shapes
    write("tokens", "recv-release",
          bytes([0, 0, 4]) + bytes([0, 32]) + b"\0" * 160 +
          bytes([2, 16]) + b"\x20\0\0" * 16 + bytes([7]))
    write("tokens", "defer", bytes([0, 0, 4]) + bytes([0, 32]) + b"\0" * 160 +
          bytes([4, 8]) + b"\x20\0\0" * 8 + bytes([5, 0, 6]))
    write("tokens", "small-batch", bytes([0, 3, 0]) + bytes([1, 60]) +
          b"\x01\0\0\0\0" * 60 + bytes([3, 60]) + b"\x20\0\0" * 60)
    write("txtrack", "send-complete",
          bytes([0, 250]) + (bytes([0, 4, 0, 1, 2]) + b"\xff\x0f" + b"\x01") * 4 +
          bytes([1, 0, 3, 0, 0, 2, 64]))
    write("txtrack", "wrap", bytes([0, 2]) + (bytes([0, 1, 0, 0, 64]) + b"\0\x10" + b"\x01") * 6 +
          bytes([1, 0, 5, 0, 0, 2, 16]))
    write("segments", "three", bytes([12, 3, 200]) +
          bytes([0, 4, 10, 8, 10, 20, 30, 100, 40]) + bytes(range(0, 250, 7)))
    write("segments", "one", bytes([0, 1, 16, 0, 16, 1]) + bytes([0, 15, 16, 17]))


def main():
    cmsg_seeds()
    rx_seeds()
    errqueue_seeds()
    nl_seeds()
    journal_seeds()
    flow_seeds()
    program_seeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())

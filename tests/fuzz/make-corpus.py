#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Write the seed corpus of every harness under corpus/<harness>/seed-*.

Seeds are what the parsers meet in real use: control buffers laid out as
the kernel's put_cmsg() lays them out (x86-64), the netlink replies
recorded from a real kernel (tests/unit/data/*.h), journals as the library
writes them, flows as the documentation spells them, the NCCL plugin's
handles, hellos and headers as it writes them.  Reproducers of bugs
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


# devmemtcp-broker protocol (lib/priv/broker.h): host order (x86-64), as
# dmt_brk_hdr_init and the client's requests lay it out.
BRK_MAGIC, BRK_VERSION = 0x424d5444, 2
BRK_OPEN, BRK_CLOSE, BRK_ADD_FLOW, BRK_REMOVE_FLOW = 1, 2, 3, 4
BRK_BIND_RX, BRK_BIND_TX, BRK_UDMABUF, BRK_POLICY = 5, 6, 7, 8
BRK_REPLY = 0x8000
BRK_OPEN_BIND, BRK_OPEN_NO_VERIFY = 4, 8
AF_INET, AF_INET6 = 2, 10


def brk_msg(rtype, body, seq=1, version=BRK_VERSION, magic=BRK_MAGIC, length=None):
    n = 16 + len(body) if length is None else length
    return struct.pack("<IHHII", magic, version, rtype, n, seq) + body


def brk_ifname(name):
    return name.encode() + b"\0" * (16 - len(name))


def brk_flow(family, dst, dport, src=b"", sport=0, queue=None, reserved=0):
    """struct dmt_brk_flow: addresses and masks of 16 bytes (IPv4 in the
    first 4), ports with whole masks when given."""
    def addr(a):
        return a + b"\0" * (16 - len(a))

    def mask(a):
        return b"\xff" * len(a) + b"\0" * (16 - len(a))

    return struct.pack("<II", family, 1 if queue is not None else 0) + \
        addr(src) + mask(src) + addr(dst) + mask(dst) + \
        struct.pack("<HHHHII", sport, 0xffff if sport else 0, dport,
                    0xffff if dport else 0, queue or 0, reserved)


def brk_open(ifname, flags=0, nqueues=0, ids=(), flows=(), page=0, nids=None):
    return struct.pack("<16sIIIIII", brk_ifname(ifname), flags, nqueues,
                       len(ids) if nids is None else nids, len(flows), page, 0) + \
        b"".join(struct.pack("<I", q) for q in ids) + b"".join(flows)


def brk_bind(ifindex, queues=(), page=0, flags=0, nqueues=None):
    return struct.pack("<IIII", ifindex, len(queues) if nqueues is None else nqueues,
                       page, flags) + b"".join(struct.pack("<I", q) for q in queues)


def brk_reply(rtype, seq, err=0, msg=b"", nfds=0, answer=b"", version=BRK_VERSION):
    """A reply: 1480 bytes (432 of answer), version 1's 1408 (360)."""
    size = 432 if version == BRK_VERSION else 360
    body = struct.pack("<iI", err, nfds) + msg + b"\0" * (1024 - len(msg)) + \
        answer + b"\0" * (size - len(answer))
    return brk_msg(rtype | BRK_REPLY, body, seq, version=version)


def broker_seeds():
    """One request of each type as the client library sends it, then
    edge cases; the first byte is the fds that came (bits 0-2; 5: a cut
    control buffer) and MSG_TRUNC (bit 3), see fuzz-broker-req.c."""
    def seed(name, msg, nfds=0, trunc=False):
        write("broker-req", name, bytes([nfds | (8 if trunc else 0)]) + msg)

    v4 = brk_flow(AF_INET, bytes([10, 0, 0, 2]), 5201)
    v6 = brk_flow(AF_INET6, bytes.fromhex("20010db8") + b"\0" * 11 + b"\1", 6000,
                  queue=15)
    seed("open", brk_msg(BRK_OPEN, brk_open("eth1", BRK_OPEN_BIND, 2, flows=[v4])), 1)
    seed("open-ids", brk_msg(BRK_OPEN, brk_open("eth1", 0, ids=[14, 15],
                                                flows=[v4, v6], page=16384), 7))
    seed("close", brk_msg(BRK_CLOSE, struct.pack("<II", 1, 0), 3))
    seed("add-flow", brk_msg(BRK_ADD_FLOW, struct.pack("<II", 1, 0) + v4, 4))
    seed("remove-flow", brk_msg(BRK_REMOVE_FLOW, struct.pack("<II", 1, 2), 5))
    seed("bind-rx", brk_msg(BRK_BIND_RX, brk_bind(5, [14, 15])), 1)
    seed("bind-tx", brk_msg(BRK_BIND_TX, brk_bind(5, flags=1)), 1)
    seed("udmabuf", brk_msg(BRK_UDMABUF, b"\0" * 8), 1)
    seed("policy", brk_msg(BRK_POLICY, brk_ifname("eth1")))
    # edge cases, each refused for one reason
    seed("edge-short", brk_msg(BRK_CLOSE, b"")[:10])
    seed("edge-magic", brk_msg(BRK_CLOSE, struct.pack("<II", 1, 0), magic=0x11223344))
    seed("edge-version", brk_msg(BRK_CLOSE, struct.pack("<II", 1, 0), version=3))
    seed("edge-version-1", brk_msg(BRK_POLICY, brk_ifname("eth1"), version=1))
    seed("edge-len", brk_msg(BRK_CLOSE, struct.pack("<II", 1, 0), length=8192))
    seed("edge-trunc", brk_msg(BRK_CLOSE, struct.pack("<II", 1, 0)), 0, True)
    seed("edge-oversize", brk_msg(BRK_BIND_RX, brk_bind(5, range(64)) + b"\0" * 7936))
    seed("edge-type", brk_msg(9, b""))
    seed("edge-counts", brk_msg(BRK_OPEN, brk_open("eth1", nqueues=65)))
    seed("edge-nids-body", brk_msg(BRK_OPEN, brk_open("eth1", ids=[1], nids=2)))
    seed("edge-ids-twice", brk_msg(BRK_OPEN, brk_open("eth1", ids=[3, 3])))
    seed("edge-id-range", brk_msg(BRK_BIND_RX, brk_bind(5, [4096])), 1)
    seed("edge-ifname-junk", brk_msg(BRK_POLICY, b"eth1\0x" + b"\0" * 10))
    seed("edge-ifname-full", brk_msg(BRK_POLICY, b"a" * 16))
    seed("edge-flow-family", brk_msg(BRK_ADD_FLOW, struct.pack("<II", 1, 0) +
                                     brk_flow(0, bytes(4), 80)))
    seed("edge-flow-reserved", brk_msg(BRK_ADD_FLOW, struct.pack("<II", 1, 0) +
                                       brk_flow(AF_INET, bytes(4), 80, reserved=1)))
    seed("edge-close-flow", brk_msg(BRK_CLOSE, struct.pack("<II", 1, 1)))
    seed("edge-bind-rx-none", brk_msg(BRK_BIND_RX, brk_bind(5)), 1)
    seed("edge-bind-tx-queues", brk_msg(BRK_BIND_TX, brk_bind(5, nqueues=1)), 1)
    seed("edge-ifindex", brk_msg(BRK_BIND_RX, brk_bind(0x80000000, [1])), 1)
    seed("edge-no-fd", brk_msg(BRK_UDMABUF, b"\0" * 8))
    seed("edge-extra-fd", brk_msg(BRK_POLICY, brk_ifname("eth1")), 1)
    seed("edge-ctrunc", brk_msg(BRK_BIND_TX, brk_bind(5)), 5)
    # fds that came, not counted yet (the broker's loop only peeked)
    seed("some-fds-udmabuf", brk_msg(BRK_UDMABUF, b"\0" * 8), 6)
    seed("some-fds-policy", brk_msg(BRK_POLICY, brk_ifname("eth1")), 6)
    seed("edge-open-flags", brk_msg(BRK_OPEN, brk_open("eth1", 0x20)))
    seed("edge-udmabuf-flags", brk_msg(BRK_UDMABUF, struct.pack("<II", 1, 0)), 1)
    # replies as the client checks them (an input of a reply's size)
    queues = struct.pack("<64I", *([14, 15] + [0] * 62))
    seed("reply-open", brk_reply(BRK_OPEN, 1, nfds=1, answer=struct.pack(
        "<IIIIIIQQ", 1, 9, 2, 7, 1, 3, 11, 8) + queues), 1)
    seed("reply-policy", brk_reply(BRK_POLICY, 2, answer=struct.pack(
        "<IIIIQII", 1, 2, 0, 1, 256 << 20, 0, 1) + struct.pack("<HH", 5201, 5299) +
        b"\0" * 60 + struct.pack("<II", 3, 1000) + b"/etc/devmemtcp/broker.conf"))
    seed("reply-refused", brk_reply(BRK_OPEN, 3, -13, b"devmemtcp-broker: uid 1000 "
                                    b"may not use eth1: no rule of /etc/devmemtcp/"
                                    b"broker.conf allows it"))
    # a rule with queue ids 3,5-7 (version 2's answer ends with them)
    conf = b"/etc/devmemtcp/broker.conf"
    seed("reply-policy-ids", brk_reply(BRK_POLICY, 4, answer=struct.pack(
        "<IIIIQII", 1, 4, 0, 0, 0, 1, 0) + b"\0" * 64 + struct.pack("<II", 5, 1000) +
        conf + b"\0" * (256 - len(conf)) + struct.pack("<II", 2, 0) +
        struct.pack("<HHHH", 3, 3, 5, 7)))
    # a broker of version 1 refusing a request of this version
    seed("reply-version-1", brk_reply(BRK_POLICY, 5, -93, b"devmemtcp-broker refused a "
                                      b"malformed request: protocol version 2: this "
                                      b"broker speaks version 1", version=1))


class Session:
    """A program for fuzz-broker-session.c, in the order the harness
    reads it: an op byte (client * 16 + what), the bytes that op reads,
    then those the fake operations read for their outcome (1: success)
    while the broker serves or the jobs run."""
    CONNECT, SEND, RUN, READ, DROP_HELD, HANG_UP, DEAD, SETTLE = 0, 2, 6, 8, 9, 10, 11, 12
    UIDS = {1000: 0, 1001: 1, 1002: 2, 1003: 3, 0: 4}

    def __init__(self):
        self.b = bytearray()

    def u8(self, *v):
        self.b += bytes(v)
        return self

    def op(self, client, what):
        return self.u8(client * 16 + what)

    def connect(self, client, uid, refused=False):
        return self.op(client, self.CONNECT).u8(0, self.UIDS[uid], 0 if refused else 1)

    @staticmethod
    def flow(port, queue=0):
        # AF_INET (not a raw family), no flags, 5000 + port % 16, whole
        # mask, queue
        return bytes([1, 1, 1, 1, port - 5000, 1, queue])

    def send(self, client, body, fds=()):
        """body: the type byte and its fields; fds: (kind, size) each,
        kind 0 a sealed memfd of 4096 * (1 + size) bytes, 1 unsealed,
        2 the client's socket, 3 a pipe."""
        self.op(client, self.SEND).u8(len(fds), 1, 0)
        self.b += body
        for kind, size in fds:
            self.u8(kind)
            if kind < 2:
                self.u8(size)
        return self

    @staticmethod
    def open(flags, ifidx, nqueues, flows=()):
        b = bytes([0, flags, 1, ifidx, 0, nqueues, len(flows)])
        for f in flows:
            b += f
        return b

    @staticmethod
    def open_ids(flags, ifidx, qbytes):
        # the queue at index i is (i * 3 + byte) % 8
        return bytes([0, flags, 1, ifidx, 1, len(qbytes), 0]) + bytes(qbytes)

    @staticmethod
    def close(handle):
        return bytes([1, handle])

    @classmethod
    def add_flow(cls, handle, port):
        return bytes([2, handle]) + cls.flow(port)

    @staticmethod
    def remove_flow(handle, flow):
        return bytes([3, handle, flow])

    @staticmethod
    def bind_rx(ifidx, qbytes):
        return bytes([4, ifidx, 0, len(qbytes) - 1]) + bytes(qbytes)

    @staticmethod
    def bind_tx(ifidx):
        return bytes([5, ifidx, 0])

    UDMABUF = bytes([6])

    @staticmethod
    def policy(ifidx):
        return bytes([7, ifidx])

    def raw(self, client, msg, nfds=0):
        self.op(client, self.SEND).u8(nfds, 0)
        self.b += struct.pack("<H", len(msg)) + msg
        for _ in range(nfds):
            self.u8(1, 0)
        return self


def session_seeds():
    """Programs for the broker's session: a user the policy names sets up
    with a buffer, binds, has udmabufs made and closes (its handle lingers
    while the binding lives); a user no rule names sends fds; the quota of
    udmabufs; an open without a buffer with flows; malformed requests."""
    def seed(name, prog):
        write("broker-session", name, bytes(prog.b))

    S = Session
    p = S().connect(0, 1000)
    p.send(0, S.open(4, 0, 1, [S.flow(5003)]), [(0, 3)]).op(0, S.RUN).u8(1).op(0, S.READ)
    p.send(0, S.bind_rx(0, [0]), [(0, 2)]).op(0, S.RUN).u8(1).op(0, S.READ)
    p.send(0, S.UDMABUF, [(0, 3)]).op(0, S.RUN).u8(1, 1).op(0, S.READ)
    p.send(0, S.bind_tx(0), [(0, 1)]).op(0, S.RUN).u8(1).op(0, S.READ)
    p.send(0, S.close(1)).op(0, S.READ).op(0, S.DROP_HELD).u8(0).op(0, S.SETTLE).u8(1)
    p.op(0, S.HANG_UP).u8(1)
    seed("set-up-and-linger", p)

    p = S().connect(1, 0).send(1, S.bind_rx(0, [0]), [(3, 0)]).op(1, S.RUN).op(1, S.READ)
    p.send(1, S.UDMABUF, [(2, 0)]).op(1, S.RUN).op(1, S.READ)
    p.send(1, S.policy(0)).op(1, S.READ)
    seed("unnamed-fds", p)

    p = S().connect(2, 1000)
    for _ in range(2):
        p.send(2, S.UDMABUF, [(0, 15)]).op(2, S.RUN).u8(1, 1).op(2, S.READ)
    # the third is over udmabuf-total: refused before it is made
    p.send(2, S.UDMABUF, [(0, 15)]).op(2, S.RUN).u8(1).op(2, S.READ)
    p.op(2, S.DROP_HELD).u8(0)
    p.send(2, S.UDMABUF, [(0, 15)]).op(2, S.RUN).u8(1, 1).op(2, S.READ)
    seed("udmabuf-quota", p)

    p = S().connect(3, 1001).send(3, S.open(0, 1, 1, [S.flow(5006)])).u8(1).op(3, S.READ)
    p.send(3, S.add_flow(1, 5005)).u8(1, 3).op(3, S.READ)
    p.send(3, S.add_flow(1, 5012)).op(3, S.READ)
    p.send(3, S.remove_flow(1, 0)).u8(1).op(3, S.READ)
    p.send(3, S.close(1)).u8(1, 1).op(3, S.READ)
    p.send(3, S.open(0, 2, 3)).op(3, S.READ)
    seed("open-flows", p)

    p = S().connect(4, 1002).raw(4, b"abcd").op(4, S.READ)
    p.connect(5, 1003, refused=True).send(5, S.policy(2)).op(5, S.READ)
    p.connect(0, 1003).send(0, S.open(0, 2, 1), [(0, 0)]).op(0, S.READ)
    p.op(0, S.DEAD).send(0, S.policy(2)).op(0, S.READ)
    seed("refused", p)

    # uid 1002's rule on fz1 names queues 1,3-4: by count refused, by id
    # one it names, one it does not
    p = S().connect(6, 1002).send(6, S.open(0, 1, 1)).op(6, S.READ)
    p.send(6, S.open_ids(0, 1, [3])).u8(1).op(6, S.READ)
    p.send(6, S.open_ids(0, 1, [2])).op(6, S.READ)
    p.send(6, S.close(1)).u8(1, 1).op(6, S.READ)
    seed("queue-ids", p)


POLICY = """# devmemtcp-broker policy
allow group ml interface eth1 queues 2 ports 5201-5299 udmabuf 256M tx
allow user loader interface eth1,eth2 queues 8 ports 6000-6999,7000
\tallow   uid 1001\tinterface * ports any udmabuf 1G
allow gid 100 interface eth3 udmabuf 65536 udmabuf-total 1M
allow everyone interface eth1 queues 1 ports 5201

"""


def policy_seeds():
    """The example of broker.conf, every keyword, and files refused for
    one reason each."""
    write("broker-policy", "example", open(os.path.join(
        HERE, "..", "..", "broker", "broker.conf"), "rb").read())
    write("broker-policy", "every-keyword", POLICY.encode())
    write("broker-policy", "empty", b"")
    write("broker-policy", "no-newline", b"allow uid 0 interface lo tx")
    for name, text in [
            ("edge-long-line", "allow everyone interface " + "a" * 1000 + "\n"),
            ("edge-nul", "allow everyone interface eth1\0\n"),
            ("edge-twice", "allow everyone interface eth1 queues 1 queues 2\n"),
            ("edge-overlap", "allow everyone interface eth1 ports 1-10,10-20\n"),
            ("edge-range", "allow everyone interface eth1 ports 5-5\n"),
            ("edge-unknown", "allow everyone interface eth1 rx\n"),
            ("edge-no-interface", "allow user a.b-c_d queues 2\n"),
            ("edge-uid-max", "allow uid 4294967295 interface eth1\n"),
            ("edge-leading-zero", "allow uid 01 interface eth1\n"),
            ("edge-name", "allow user -x interface eth1\n"),
            ("edge-ifname", "allow everyone interface eth1,,eth2\n"),
            ("edge-if-twice", "allow everyone interface eth1,eth1\n"),
            ("edge-ifs", "allow everyone interface " +
             ",".join("e%d" % i for i in range(33)) + "\n"),
            ("edge-ports", "allow everyone interface eth1 ports " +
             ",".join(str(i) for i in range(1, 18)) + "\n"),
            ("edge-queues", "allow everyone interface eth1 queues 65\n"),
            ("queue-ids", "allow everyone interface eth1 queues 3,5-7\n"),
            ("queue-id-one", "allow everyone interface eth1 queues 4-4\n"),
            ("queue-ids-many", "allow everyone interface eth1 queues 0-4095\n"),
            ("edge-queue-reversed", "allow everyone interface eth1 queues 7-5\n"),
            ("edge-queue-overlap", "allow everyone interface eth1 queues 3-5,5\n"),
            ("edge-queue-max", "allow everyone interface eth1 queues 4096-4096\n"),
            ("edge-queue-empty", "allow everyone interface eth1 queues 3,,5\n"),
            ("edge-queue-ranges", "allow everyone interface eth1 queues " +
             ",".join(str(2 * i) for i in range(17)) + "\n"),
            ("edge-size", "allow everyone interface eth1 udmabuf 1025G\n"),
            ("edge-total-less", "allow everyone interface eth1 udmabuf 2M udmabuf-total 1M\n"),
            ("edge-total-alone", "allow everyone interface eth1 udmabuf-total 1M\n"),
            ("edge-deny", "deny everyone interface eth1\n"),
            ("edge-crlf", "allow everyone interface eth1\r\n"),
            ("edge-comment", "allow everyone interface eth1 # comment\n")]:
        write("broker-policy", name, text.encode())

# The NCCL plugin's wire format (nccl/wire.h): handles as listen writes
# them, hellos and headers as connect and isend write them.
DMTN_HANDLE_MAGIC, DMTN_HELLO_MAGIC, DMTN_MSG_MAGIC = 0x444d544e, 0x444d5448, 0x444d544d
AF_INET, AF_INET6 = 2, 10


def nccl_handle(family=AF_INET, addr=b"\x7f\0\0\x01", cport=40000, dport=40001,
                nonce=0x1122334455667788, scope=0, magic=DMTN_HANDLE_MAGIC,
                version=1, stage=b""):
    h = struct.pack("<IHH", magic, version, family) + addr.ljust(16, b"\0")
    h += struct.pack(">HH", cport, dport) + struct.pack("<IQ", scope, nonce)
    h += stage.ljust(16, b"\0")
    return h.ljust(128, b"\0")


def nccl_hello(dport, nonce, magic=DMTN_HELLO_MAGIC):
    return struct.pack("<IH", magic, 1) + struct.pack(">H", dport) + struct.pack("<Q", nonce)


def nccl_msg(tag, size, magic=DMTN_MSG_MAGIC):
    return struct.pack("<IiQ", magic, tag, size)


def nccl_seeds():
    nonce = 0x1122334455667788
    hello = nccl_hello(50000, nonce) + struct.pack("<Q", nonce)
    msg = nccl_msg(0, 4096)

    def hs(name, handle, program=b"", hello=hello, msg=msg):
        write("nccl-handshake", name, handle + hello + msg + program)

    def op(code, buf, *args):
        return bytes([(buf << 3) | code]) + b"".join(args)

    def connect(buf, finished):
        return op(1, buf, bytes([finished]))

    v4, v6 = nccl_handle(), nccl_handle(AF_INET6, bytes.fromhex("20010db8" + "0" * 22 + "01"))
    hs("listen-ipv4", v4, connect(0, 0) + connect(0, 0) + connect(0, 1))
    hs("listen-ipv6", v6, connect(0, 0) + connect(0, 1))
    hs("two-buffers", v4, connect(0, 0) + connect(1, 0) + connect(1, 1) + connect(0, 1))
    hs("copy-in-progress", v4, connect(0, 0) + op(3, 0, b"\x01") + connect(1, 1) + connect(0, 1))
    hs("peer-connector-bytes", nccl_handle(stage=struct.pack("<QQ", 0x4141414141414141, 1)),
       connect(0, 1) + op(4, 1, struct.pack("<QQB", 7, 1, 0)) + connect(1, 1))
    hs("forged-slot", v4, connect(0, 0) + op(3, 0, b"\x02") + op(4, 2, struct.pack("<QQB", 0, 0, 3)) +
       connect(2, 1) + connect(0, 1))
    hs("changed-peer-byte", v4, connect(0, 0) + op(5, 0, b"\x21\x01") + connect(0, 1))
    hs("drain", v4, connect(0, 0) + connect(1, 0) + op(6, 0) + connect(0, 1))
    hs("listen-op", v4, op(0, 3, struct.pack("<HHQBI", 1234, 5678, 99, 0, 0x010203)) +
       connect(3, 0) + op(0, 4, struct.pack("<HHQBB", 1, 2, 3, 1, 9)) + connect(4, 1) + connect(3, 1))
    hs("foreign", nccl_handle(magic=0x12345678))
    hs("version-2", nccl_handle(version=2))
    hs("family-unix", nccl_handle(family=1))
    hs("v4-bytes-after", nccl_handle(addr=b"\x7f\0\0\x01\x01"))
    for name, addr in [("unspecified", b"\0\0\0\0"), ("multicast", b"\xe0\0\0\x01"),
                       ("broadcast", b"\xff\xff\xff\xff")]:
        hs("addr-" + name, nccl_handle(addr=addr))
    for name, addr in [("unspecified", b""), ("multicast", bytes.fromhex("ff02" + "0" * 26 + "01")),
                       ("link-local", bytes.fromhex("fe80" + "0" * 26 + "01")),
                       ("v4-mapped", bytes.fromhex("0" * 20 + "ffff7f000001"))]:
        hs("addr6-" + name, nccl_handle(AF_INET6, addr))
    hs("scope", nccl_handle(AF_INET6, bytes.fromhex("20010db8" + "0" * 22 + "01"), scope=2))
    hs("port-0", nccl_handle(cport=0))
    hs("ports-same", nccl_handle(dport=40000))
    hs("nonce-0", nccl_handle(nonce=0))
    hs("reserved", nccl_handle()[:127] + b"\x01")
    hs("hello-other-nonce", v4, hello=nccl_hello(50000, nonce ^ 1) + struct.pack("<Q", nonce))
    hs("hello-port-0", v4, hello=nccl_hello(0, nonce) + struct.pack("<Q", nonce))
    hs("msg-foreign", v4, msg=nccl_msg(0, 1, magic=0x41414141))

    # nccl-msg: flags (1 control closed, 2 data closed), headers, a cut
    # one, the data length, the receives, a byte per receive posted
    # (1: test what is queued)
    def header(tag, size, kind=0):
        return bytes([(tag << 4) | kind]) + struct.pack("<I", size)

    def recv(bufs):
        # 9 buffers, one more than maxRecvs: refused, 8 are read
        out = bytes([len(bufs) - 1])
        for cap, tag in bufs[:8]:
            out += struct.pack("<IB", cap, tag)
        return out

    def ms(name, flags, headers, dlen, recvs, cut=b"", tests=None):
        body = bytes([flags, len(headers)]) + b"".join(headers)
        body += (bytes([1, len(cut) - 1]) + cut) if cut else b"\0"
        body += struct.pack("<I", dlen) + bytes([len(recvs)])
        body += b"".join(recv(r) for r in recvs)
        body += bytes(tests if tests is not None else [1] * len(recvs))
        write("nccl-msg", name, body)

    ms("one", 0, [header(0, 100)], 100, [[(200, 0)]])
    ms("grouped", 0, [header(t, 10 * (t + 1)) for t in range(4)], 100,
       [[(50, 3), (50, 2), (50, 1), (50, 0)]])
    ms("in-order", 0, [header(0, s) for s in (0, 1, 300, 17, 0, 255)], 573,
       [[(300, 0)] for _ in range(6)], tests=[0, 1, 0, 1, 0, 1])
    ms("too-large", 0, [header(0, 300)], 300, [[(100, 0)]])
    ms("tag-nobody", 0, [header(2, 10)], 10, [[(50, 0), (50, 1)]])
    ms("foreign-header", 0, [header(0, 10), bytes([7]) + struct.pack("<III", 5, 0x41414141, 0)], 10,
       [[(50, 0)], [(50, 0)]])
    ms("huge-size", 0, [bytes([6]) + struct.pack("<IQ", 0, 1 << 63)], 0, [[(100, 0)]])
    ms("data-cut", 2, [header(0, 100)], 60, [[(100, 0)]])
    ms("ctrl-closed-waiting", 1, [header(0, 5)], 5, [[(10, 0)], [(10, 0)]])
    ms("cut-header", 1, [header(0, 5)], 5, [[(10, 0)], [(10, 0)]], cut=b"\x4d\x54\x4d\x44\0\0")
    ms("more-than-maxrecvs", 0, [header(0, 5)], 5, [[(10, 0)] * 9, [(10, 0)]])
    ms("no-receive", 3, [header(0, 5), header(0, 6)], 11, [[(10, 0)]])
    ms("many", 0, [header(i % 4, (i * 37) % 300) for i in range(40)],
       sum((i * 37) % 300 for i in range(40)),
       [[(300, 0)], [(300, 0), (300, 1), (300, 2), (300, 3)], [(300, 1)] * 8,
        [(300, 2)], [(299, 0), (300, 3)]] + [[(300, 0)]] * 7)


def main():
    cmsg_seeds()
    rx_seeds()
    errqueue_seeds()
    nl_seeds()
    journal_seeds()
    flow_seeds()
    program_seeds()
    broker_seeds()
    policy_seeds()
    nccl_seeds()
    session_seeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())

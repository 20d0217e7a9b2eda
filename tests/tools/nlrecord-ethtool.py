#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Record ethtool generic netlink replies of the running kernel as C arrays
for tests/unit/test-ethtool.c (tests/unit/data/ethtool-replies.h).  Run as
root inside a fresh network namespace holding a veth pair va/vb with 4 RX
and 3 TX queues:

    ip netns add rec
    ip -n rec link add va numrxqueues 4 numtxqueues 3 type veth peer name vb
    ip netns exec rec python3 tests/tools/nlrecord-ethtool.py > tests/unit/data/ethtool-replies.h
"""
import os, socket, struct

NETLINK_GENERIC = 16
NETLINK_EXT_ACK, NETLINK_CAP_ACK = 11, 10
SOL_NETLINK = 270
F_REQUEST, F_ACK, F_DUMP = 1, 4, 0x300

s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
s.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
s.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)
s.bind((0, 0))
portid = s.getsockname()[0]
seq = 200

def attr(t, payload):
    l = 4 + len(payload)
    return struct.pack("HH", l, t) + payload + b"\0" * ((4 - l % 4) % 4)

def msg(family, cmd, flags, attrs):
    global seq
    seq += 1
    body = struct.pack("BBH", cmd, 1, 0) + attrs
    return struct.pack("IHHII", 16 + len(body), family, flags, seq, 0) + body

def talk(m):
    s.send(m)
    out = b""
    while True:
        d = s.recv(65536)
        out += d
        off = 0
        done = False
        while off < len(d):
            l, t = struct.unpack_from("IH", d, off)
            if t in (2, 3):  # ERROR, DONE
                done = True
            off += (l + 3) & ~3
        if done:
            return out

def family(name):
    r = talk(msg(0x10, 3, F_REQUEST | F_ACK, attr(2, name.encode() + b"\0")))
    off = 16 + 4
    while off < struct.unpack_from("I", r, 0)[0]:
        l, t = struct.unpack_from("HH", r, off)
        if t == 1:
            return struct.unpack_from("H", r, off + 4)[0]
        off += (l + 3) & ~3
    raise SystemExit("no family " + name)

def emit(name, data, comment):
    print("/* %s */" % comment)
    print("static const unsigned char %s[] = {" % name)
    for i in range(0, len(data), 12):
        print("\t" + " ".join("0x%02x," % b for b in data[i:i + 12]))
    print("};")
    print("#define %s_SEQ %du" % (name.upper(), seq))
    print()

def header(ifindex, flags=0):
    h = attr(1, struct.pack("I", ifindex))
    if flags:
        h += attr(3, struct.pack("I", flags))
    return attr(1 | 0x8000, h)

fam = family("ethtool")
va = socket.if_nametoindex("va")
print("/* Recorded from Linux %s by tests/tools/nlrecord-ethtool.py; portid %d. */" % (os.uname().release, portid))
print("#define REC_ETH_PORTID %du" % portid)
print("#define REC_ETHTOOL_FAMILY %du" % fam)
print("#define REC_ETH_VA_IFINDEX %du" % va)
print()
emit("rec_channels_get_va", talk(msg(fam, 17, F_REQUEST | F_ACK, header(va))),
     "CHANNELS_GET veth va (rx 4, tx 3): reply + ack")
emit("rec_features_get_va", talk(msg(fam, 11, F_REQUEST | F_ACK, header(va))),
     "FEATURES_GET veth va, verbose bitsets: reply + ack")
emit("rec_rings_get_va", talk(msg(fam, 15, F_REQUEST | F_ACK, header(va))),
     "RINGS_GET veth va: EOPNOTSUPP")
emit("rec_rss_get_va", talk(msg(fam, 38, F_REQUEST | F_ACK, header(va))),
     "RSS_GET veth va: EOPNOTSUPP")
bit = attr(1 | 0x8000, attr(2, b"rx-ntuple-filter\0") + attr(3, b""))
want = attr(3 | 0x8000, attr(3 | 0x8000, bit))
emit("rec_features_set_ntuple_va", talk(msg(fam, 12, F_REQUEST | F_ACK, header(va, 2) + want)),
     "FEATURES_SET rx-ntuple-filter on, veth va (fixed off)")

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Record generic netlink replies of the running kernel as C arrays, for the
unit tests that parse them (tests/unit/data/*.h).  Run as root inside a
fresh network namespace holding a veth pair named va/vb:

    ip netns add rec; ip -n rec link add va type veth peer name vb; ip -n rec link set va up; ip -n rec link set vb up
    ip netns exec rec python3 tests/tools/nlrecord.py > tests/unit/data/netdev-replies.h
"""
import os, socket, struct, sys

NETLINK_GENERIC = 16
NETLINK_EXT_ACK, NETLINK_CAP_ACK = 11, 10
SOL_NETLINK = 270
F_REQUEST, F_ACK, F_DUMP = 1, 4, 0x300

s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
s.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
s.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)
s.bind((0, 0))
portid = s.getsockname()[0]
seq = 100

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
            return struct.unpack_from("H", r, off + 4)[0], r
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

fam, ctrl_reply = family("netdev")
print("/* Recorded from Linux %s by tests/tools/nlrecord.py; portid %d. */" % (os.uname().release, portid))
print("#define REC_PORTID %du" % portid)
print("#define REC_NETDEV_FAMILY %du" % fam)
print()
emit("rec_getfamily_netdev", ctrl_reply, "CTRL_CMD_GETFAMILY netdev: reply + ack")
va = socket.if_nametoindex("va")
print("#define REC_VA_IFINDEX %du" % va)
emit("rec_queue_dump_va", talk(msg(fam, 10, F_REQUEST | F_DUMP, attr(2, struct.pack("I", va)))),
     "QUEUE_GET dump of veth va (1 rx + 1 tx queue)")
memfd = os.memfd_create("rec")
q = attr(1, struct.pack("I", 0)) + attr(3, struct.pack("I", 0))
bind = attr(1, struct.pack("I", va)) + attr(3, struct.pack("I", memfd)) + attr(2 | 0x8000, q)
emit("rec_bind_rx_veth", talk(msg(fam, 13, F_REQUEST | F_ACK, bind)),
     "BIND_RX on veth va queue 0: the driver has no queue API")
bind = attr(1, struct.pack("I", 999)) + attr(3, struct.pack("I", memfd)) + attr(2 | 0x8000, q)
emit("rec_bind_rx_nodev", talk(msg(fam, 13, F_REQUEST | F_ACK, bind)),
     "BIND_RX on ifindex 999: no such device")
bind = attr(1, struct.pack("I", va)) + attr(3, struct.pack("I", memfd))
emit("rec_bind_rx_noqueues", talk(msg(fam, 13, F_REQUEST | F_ACK, bind)),
     "BIND_RX without queues: missing attribute")

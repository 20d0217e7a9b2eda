# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Raw generic netlink for the reply recorders (nlrecord.py,
nlrecord-ethtool.py): one socket with extended acks, request building,
reading until the ack or the end of a dump, and printing replies as C
arrays with the sequence number the parser must expect."""
import socket, struct

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


def start_seq(n):
    global seq
    seq = n


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


def family_reply(name):
    """The id of genl family name and the raw CTRL_CMD_GETFAMILY reply."""
    r = talk(msg(0x10, 3, F_REQUEST | F_ACK, attr(2, name.encode() + b"\0")))
    off = 16 + 4
    while off < struct.unpack_from("I", r, 0)[0]:
        l, t = struct.unpack_from("HH", r, off)
        if t == 1:
            return struct.unpack_from("H", r, off + 4)[0], r
        off += (l + 3) & ~3
    raise SystemExit("no family " + name)


def family(name):
    return family_reply(name)[0]


def emit(name, data, comment):
    print("/* %s */" % comment)
    print("static const unsigned char %s[] = {" % name)
    for i in range(0, len(data), 12):
        print("\t" + " ".join("0x%02x," % b for b in data[i:i + 12]))
    print("};")
    print("#define %s_SEQ %du" % (name.upper(), seq))
    print()

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Record generic netlink replies of the running kernel as C arrays, for the
unit tests that parse them (tests/unit/data/*.h).  Run as root inside a
fresh network namespace holding a veth pair named va/vb:

    ip netns add rec; ip -n rec link add va type veth peer name vb; ip -n rec link set va up; ip -n rec link set vb up
    ip netns exec rec python3 tests/tools/nlrecord.py > tests/unit/data/netdev-replies.h
"""
import os, socket, struct

import nlrec
from nlrec import attr, emit, family, msg, talk, F_ACK, F_DUMP, F_REQUEST

nlrec.start_seq(100)
portid = nlrec.portid


fam, ctrl_reply = nlrec.family_reply("netdev")
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

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

import nlrec
from nlrec import attr, emit, family, msg, talk, F_ACK, F_DUMP, F_REQUEST

nlrec.start_seq(200)
portid = nlrec.portid


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

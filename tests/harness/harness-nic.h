/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The harness for the vm tests of the NIC layer (tests/vm/test-nic-*.c).
 * Each is a program "test-nic-X IFACE" run as root in the guest with the
 * simulated NIC.  NIC state is compared through the ethtool program (an
 * oracle independent of the library): rings, channels, the ntuple feature,
 * the RSS table and every RSS context, and the ntuple rules.
 */
#ifndef DEVMEMTCP_HARNESS_NIC_H
#define DEVMEMTCP_HARNESS_NIC_H

#include "devmemtcp.h"
#include "harness.h"

/* The opening of every NIC test: IFACE from the arguments (found in this
 * namespace or in the vm topology's, which is then entered), up; a
 * context that logs nothing in *ctx; nothing left by an earlier test.
 * 0, 2 (usage), T_EXIT_SKIP without root or the ethtool program,
 * T_EXIT_FAIL (printed). */
int nic_init(int argc, char **argv, struct devmemtcp_ctx **ctx, const char **ifname);

/* Everything ethtool shows that the NIC layer may change (malloc'ed). */
char *nic_dump(void);
/* Does the dump have "key<whitespace>value" (ethtool pads with tabs)? */
bool dump_has(const char *dump, const char *key, const char *value);
/* 0 when equal; else print the first differing line and return T_EXIT_FAIL. */
int nic_same(const char *before, const char *after, const char *when);

/* What most setups of these tests ask for: a 32 MiB udmabuf, an IPv4 and
 * an IPv6 flow to the receiver's addresses and the port, two queues. */
struct nic_setup {
	struct devmemtcp_flow flows[2];
	struct devmemtcp_buf *buf;
	struct devmemtcp_nic_opts opts;
};
/* Fill s (with a udmabuf unless with_buf is false); 0 or T_EXIT_FAIL. */
int nic_setup_new(struct nic_setup *s, int port, bool with_buf);
void nic_setup_free(struct nic_setup *s);

/* Run the devmemtcp program with args; its output in out, its exit status
 * returned. */
int nic_run_tool(char *out, size_t len, const char *args);

#endif

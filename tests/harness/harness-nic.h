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

/* What a devmem receiver saw: bytes, payload bytes that arrived as
 * ordinary (linear) data, the stream offset of the first byte off the
 * pattern (-1 none), the longest wait for data once it flowed (s). */
struct nic_rx_result {
	uint64_t bytes;
	uint64_t linear;
	int64_t bad_at;
	double max_gap;
	double max_gap_at;	/* t_now() when it ended */
	uint32_t slow;		/* waits over 0.25 s */
};

/* Accept one connection on lfd and receive it to its end into buf (bound
 * as binding), every byte checked against the stream pattern; tokens are
 * returned as it goes.  tick, when not NULL, is called after the first
 * data arrived.  0, or T_EXIT_FAIL (printed). */
int nic_receive(struct devmemtcp_ctx *ctx, int lfd, struct devmemtcp_buf *buf,
		uint32_t binding, struct nic_rx_result *r, void (*tick)(void *),
		void *arg);
/* The RX queues the default RSS table uses, as a bit mask (read with the
 * SIOCETHTOOL ioctl, not through the library); 0 when it cannot be read. */
uint64_t nic_rss_queues(void);
/* The ntuple rules (read with SIOCETHTOOL): their count, and in ports[]
 * the TCP destination port of each of the first max; -1 on failure. */
int nic_rule_ports(int *ports, int max);

#endif

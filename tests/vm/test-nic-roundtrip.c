// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-roundtrip IFACE: setup (2 queues, an IPv4 and an IPv6 flow, a
 * udmabuf bound) then close leaves rings, channels, features, the RSS table,
 * RSS contexts and the ntuple rules exactly as they were; while open, the
 * NIC shows header split on, the rules, and the binding on both queues.
 * Prints the setup cost in netlink round trips and ioctls.
 */
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness-nic.h"

static struct devmemtcp_ctx *ctx;
static const char *ifname;

int main(int argc, char **argv)
{
	struct nic_setup s;
	struct devmemtcp_nic *nic;
	struct devmemtcp_queue q[64];
	DEVMEMTCP_OPTS(nic_stats, st);
	const uint32_t *queues;
	char *before, *during, *after;
	int n, bound = 0, rounds;

	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	before = nic_dump();
	T_TRY(nic_setup_new(&s, 5201, true));

	for (rounds = 0; rounds < 2; rounds++) {
		struct devmemtcp_nic_opts o = s.opts;

		/* the second round without a context: one queue per flow */
		if (rounds)
			o.flags = DEVMEMTCP_NIC_NO_RSS_CONTEXT;
		T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "open: %s",
			devmemtcp_ctx_errmsg(ctx));
		T_CHECK(devmemtcp_nic_queues(nic, &queues) == 2, "queues");
		during = nic_dump();
		T_CHECK(dump_has(during, "TCP data split:", "on"), "header split not on:\n%s", during);
		if (strstr(during, "HDS thresh:"))
			T_CHECK(dump_has(during, "HDS thresh:", "0\n"), "hds-thresh not 0:\n%s", during);
		T_CHECK(strstr(during, "Total 2 rules"), "rules:\n%s", during);
		T_CHECK(strstr(during, "Dest port: 5201"), "flow:\n%s", during);
		n = devmemtcp_queue_list(ctx, (int)if_nametoindex(ifname), q, 64);
		for (int i = 0; i < n && i < 64; i++)
			if (q[i].type == DEVMEMTCP_QUEUE_RX && q[i].dmabuf_id &&
			    q[i].dmabuf_id == devmemtcp_binding_id(devmemtcp_nic_binding(nic)))
				bound++;
		T_CHECK(bound == 2 * (rounds + 1), "bound queues %d", bound);
		/* flows come and go on the live handle */
		{
			struct devmemtcp_flow g;
			char t[96];
			int id;

			snprintf(t, sizeof(t), "tcp6 src-ip %s/64 dst-port 5299 queue 1", VM_TX_ADDR6);
			T_CHECK(devmemtcp_flow_parse(t, &g) == 0, "parse");
			id = devmemtcp_nic_add_flow(nic, &g);
			T_CHECK(id == 2, "add_flow %d: %s", id, devmemtcp_nic_errmsg(nic));
			free(during);
			during = nic_dump();
			T_CHECK(strstr(during, "Total 3 rules") && strstr(during, "Dest port: 5299"),
				"added rule:\n%s", during);
			T_CHECK(devmemtcp_nic_remove_flow(nic, 0) == 0, "remove: %s",
				devmemtcp_nic_errmsg(nic));
			free(during);
			during = nic_dump();
			T_CHECK(strstr(during, "Total 2 rules"), "removed rule:\n%s", during);
		}
		T_CHECK(devmemtcp_nic_stats(nic, &st) == 0, "stats");
		printf("setup (%s): %llu netlink round trips, %llu ioctls, %u changes\n",
		       rounds ? "no context" : "RSS context",
		       (unsigned long long)st.setup_round_trips,
		       (unsigned long long)st.setup_ioctls, st.steps);
		if (!rounds)
			T_CHECK(st.rss_context > 0, "no RSS context created");
		T_CHECK(devmemtcp_nic_close(nic) == 0, "close: %s", devmemtcp_ctx_errmsg(ctx));
		after = nic_dump();
		T_TRY(nic_same(before, after, "after close"));
		free(during);
		free(after);
	}
	n = devmemtcp_queue_list(ctx, (int)if_nametoindex(ifname), q, 64);
	for (int i = 0; i < n && i < 64; i++)
		T_CHECK(!q[i].dmabuf_id, "queue %u still bound", q[i].id);
	nic_setup_free(&s);
	printf("roundtrip: state identical after two setups\n");
	return 0;
}

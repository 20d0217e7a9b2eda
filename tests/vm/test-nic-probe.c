// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-probe IFACE: the probe on the simulated NIC reports what it has
 * (driver, queues, header split, hds-thresh on 6.14+, ntuple, RSS), the
 * problems with their fixes (header split off), and with --try-bind binds
 * and releases a udmabuf, leaving no binding and nothing changed; the
 * program's --json output carries the same facts.
 */
#include <net/if.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness-nic.h"

static struct devmemtcp_ctx *ctx;
static const char *ifname;

int main(int argc, char **argv)
{
	struct devmemtcp_probe p = { .sz = sizeof(p) };
	DEVMEMTCP_OPTS(probe_opts, po, .flags = DEVMEMTCP_PROBE_TRY_BIND);
	const struct devmemtcp_probe_problem *pr;
	struct devmemtcp_queue q[64];
	char what[160], fix[320], cmd[128], out[8192], *before, *after;
	int n, kv = t_kernel_version();
	struct devmemtcp_nic *nic;

	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	snprintf(cmd, sizeof(cmd), "ethtool -G %s tcp-data-split off", ifname);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	before = nic_dump();
	n = devmemtcp_nic_probe(ctx, ifname, NULL, &p);
	T_CHECK(n >= 1 && n == (int)p.nproblems, "probe: %d %s", n, devmemtcp_ctx_errmsg(ctx));
	T_CHECK(strcmp(p.driver, "devmemsim") == 0, "driver %s", p.driver);
	T_CHECK(p.has_bind_rx, "no bind-rx");
	T_CHECK(p.has_bind_tx == (kv >= 616), "bind-tx %d on %d", p.has_bind_tx, kv);
	T_CHECK(p.rx_queues == 16 && p.tx_queues == 16, "queues %d/%d", p.rx_queues, p.tx_queues);
	T_CHECK(p.queue_use_reported == (kv >= 617), "queue use reported %d on %d",
		p.queue_use_reported, kv);
	T_CHECK(p.nowners == 0, "%d owners", p.nowners);
	T_CHECK(p.tcp_data_split == 1, "tcp-data-split %d", p.tcp_data_split);
	if (kv >= 614)
		T_CHECK(p.hds_thresh >= 0 && p.hds_thresh_max > 0, "hds %lld/%lld",
			(long long)p.hds_thresh, (long long)p.hds_thresh_max);
	T_CHECK(p.ntuple == 1 && p.ntuple_fixed == 0, "ntuple %d", p.ntuple);
	T_CHECK(p.ntuple_rules == 0 && p.ntuple_table_size > 0, "rules %d of %d",
		p.ntuple_rules, p.ntuple_table_size);
	T_CHECK(p.rss_table_size > 0, "rss %d", p.rss_table_size);
	T_CHECK(!p.xdp && p.xsk_queues == 0 && p.dmabuf_queues == 0, "xdp/providers");
	T_CHECK(p.udmabuf_limit_mb > 0 && p.cap_net_admin, "host");
	snprintf(what, sizeof(what), "header split (tcp-data-split) is off on %s", ifname);
	snprintf(fix, sizeof(fix),
		 "ethtool -G %s tcp-data-split on (devmemtcp_nic_open() does it and undoes it)", ifname);
	pr = t_probe_problem(&p, what);
	T_CHECK(pr && strcmp(pr->fix, fix) == 0, "no problem \"%s\"", what);
	T_CHECK(p.try_bind == 0, "try-bind without the flag");

	/* --try-bind with header split on and hds-thresh 0: a handle without
	 * flows or buffer does exactly that (ethtool here may not know
	 * hds-thresh) */
	{
		DEVMEMTCP_OPTS(nic_opts, o, .flags = DEVMEMTCP_NIC_KEEP_RSS);

		T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "open: %s",
			devmemtcp_ctx_errmsg(ctx));
	}
	free(before);
	before = nic_dump();
	memset(&p, 0, sizeof(p));
	p.sz = sizeof(p);
	T_CHECK(devmemtcp_nic_probe(ctx, ifname, &po, &p) >= 0, "probe");
	T_CHECK(p.try_bind == 1, "try-bind %d: %s", p.try_bind, p.try_bind_msg);
	printf("probe: %s\n", p.try_bind_msg);
	/* the handle is an owner; try-bind took a queue nobody owns */
	T_CHECK(p.nowners == 1 && p.owners[0].pid == getpid() && p.owners[0].alive &&
		p.owners[0].nqueues == 1 && p.owners[0].queues[0] == 15 &&
		strcmp(p.owners[0].comm, "test-nic-probe") == 0,
		"owners %d: pid %d queue %u", p.nowners, p.owners[0].pid, p.owners[0].queues[0]);
	T_CHECK(strstr(p.try_bind_msg, "to RX queue 14 "), "try-bind: %s", p.try_bind_msg);
	n = devmemtcp_queue_list(ctx, (int)if_nametoindex(ifname), q, 64);
	for (int i = 0; i < n && i < 64; i++)
		T_CHECK(!q[i].dmabuf_id, "queue %u still bound", q[i].id);
	after = nic_dump();
	T_TRY(nic_same(before, after, "after probe --try-bind"));

	snprintf(cmd, sizeof(cmd), "probe %s --json", ifname);
	T_CHECK(nic_run_tool(out, sizeof(out), cmd) <= 1, "%s", out);
	T_CHECK(strstr(out, "\"driver\":\"devmemsim\"") && strstr(out, "\"tcp_data_split\":\"on\"") &&
		strstr(out, "\"rx_queues\":16,") && strstr(out, "\"nowners\":1,\"owners\":[{\"pid\":"),
		"json: %s", out);
	T_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	printf("probe: ok\n");
	return 0;
}

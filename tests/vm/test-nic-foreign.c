// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-foreign IFACE: rules of others.  A rule more specific than our
 * flow at a lower location (matched first, as a leftover 5-tuple rule of
 * another tool would be) makes the setup fail with -EEXIST naming it and
 * the fix, and leaves nothing behind; DEVMEMTCP_NIC_ALLOW_SHADOW accepts
 * it.  An ntuple rule and a custom RSS table set by someone else (ethtool)
 * before setup are untouched while the handle lives and after it closes;
 * a flow with the same match as that rule, matched before it, is accepted.
 * Queues an administrator's rule or RSS context feeds are refused by id
 * (EBUSY naming the rule or context and the fix) and never picked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness-nic.h"

static struct devmemtcp_ctx *ctx;
static const char *ifname;

/* A 5-tuple rule at location 0 captures part of our flow. */
static int shadowed(struct nic_setup *setup)
{
	struct devmemtcp_nic *nic;
	char cmd[256], want[512], *before, *after;

	snprintf(cmd, sizeof(cmd),
		 "ethtool -K %s ntuple on && ethtool -N %s flow-type tcp4 src-ip %s dst-ip %s dst-port 5204 action 1 loc 0",
		 ifname, ifname, VM_TX_ADDR4, VM_RX_ADDR4);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	before = nic_dump();
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &setup->opts, &nic) == -EEXIST, "not EEXIST");
	snprintf(want, sizeof(want),
		 "flow 0 (tcp4 *:* -> %s:5204): rule 0 on %s (tcp4 %s:* -> %s:5204 queue 1) matches these packets first "
		 "and steers them elsewhere: delete it (ethtool -N %s delete 0) or pass DEVMEMTCP_NIC_ALLOW_SHADOW",
		 VM_RX_ADDR4, ifname, VM_TX_ADDR4, VM_RX_ADDR4, ifname);
	T_CHECK(strstr(devmemtcp_ctx_errmsg(ctx), want), "message: %s", devmemtcp_ctx_errmsg(ctx));
	printf("foreign: %s\n", devmemtcp_ctx_errmsg(ctx));
	after = nic_dump();
	T_TRY(nic_same(before, after, "after the refused setup"));
	free(after);
	setup->opts.flags = DEVMEMTCP_NIC_ALLOW_SHADOW;
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &setup->opts, &nic) == 0, "open: %s",
		devmemtcp_ctx_errmsg(ctx));
	T_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	setup->opts.flags = 0;
	after = nic_dump();
	T_TRY(nic_same(before, after, "after a setup that accepted the shadowing rule"));
	free(before);
	free(after);
	snprintf(cmd, sizeof(cmd), "ethtool -N %s delete 0", ifname);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	return 0;
}

/* An administrator's rule to queue 14 and RSS context over 12 and 13:
 * those queues are refused by id and skipped when picking. */
static int fed_by_others(void)
{
	static const uint32_t q14 = 14, q13 = 13;
	DEVMEMTCP_OPTS(nic_opts, o, .queues = &q14, .nqueues = 1);
	struct devmemtcp_nic *nic;
	const uint32_t *q;
	char cmd[256], out[512], want[512], *before, *after;
	const char *msg;
	unsigned int id = 0;
	double t0 = t_now();

	snprintf(cmd, sizeof(cmd),
		 "ethtool -K %s ntuple on && ethtool -N %s flow-type tcp4 dst-port 7777 action 14 loc 6",
		 ifname, ifname);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "ethtool -X %s context new start 12 equal 2", ifname);
	t_capture(out, sizeof(out), cmd);
	T_CHECK(sscanf(out, "New RSS context is %u", &id) == 1 && id, "%s: %s", cmd, out);
	before = nic_dump();

	/* ERRORS devmemtcp_nic_open EBUSY */
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == -EBUSY, "queue 14 not refused");
	msg = devmemtcp_ctx_errmsg(ctx);
	snprintf(want, sizeof(want), "%s: RX queue 14 of %s receives the packets of ntuple rule 6 (tcp4 ",
		 ifname, ifname);
	T_CHECK(strncmp(msg, want, strlen(want)) == 0, "message: %s", msg);
	snprintf(want, sizeof(want),
		 "7777 queue 14), which no devmemtcp owner made: pick another queue, or delete the rule (ethtool -N %s delete 6)",
		 ifname);
	T_CHECK(strstr(msg, want), "message: %s", msg);
	printf("foreign: %s\n", msg);
	o.queues = &q13;
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == -EBUSY, "queue 13 not refused");
	snprintf(want, sizeof(want),
		 "%s: RX queue 13 of %s is in RSS context %u, which no devmemtcp owner made: "
		 "pick another queue, or delete the context and the rules that use it (ethtool -X %s context %u delete)",
		 ifname, ifname, id, ifname, id);
	T_CHECK(strcmp(devmemtcp_ctx_errmsg(ctx), want) == 0, "message: %s", devmemtcp_ctx_errmsg(ctx));
	printf("foreign: %s\n", devmemtcp_ctx_errmsg(ctx));
	o.queues = NULL;
	o.nqueues = 2;
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "open: %s", devmemtcp_ctx_errmsg(ctx));
	T_CHECK(devmemtcp_nic_queues(nic, &q) == 2 && q[0] == 11 && q[1] == 15,
		"picked queues %u and %u, not 11 and 15", q[0], q[1]);
	T_CHECK(devmemtcp_nic_close(nic) == 0, "close: %s", devmemtcp_ctx_errmsg(ctx));
	after = nic_dump();
	T_TRY(nic_same(before, after, "after close, with a rule and a context of someone else's"));
	snprintf(cmd, sizeof(cmd), "ethtool -N %s delete 6 && ethtool -X %s context %u delete",
		 ifname, ifname, id);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	printf("foreign: queues 12-14, which someone else's rule and context feed, refused and skipped (%.1f s)\n",
	       t_now() - t0);
	free(before);
	free(after);
	return 0;
}

int main(int argc, char **argv)
{
	struct nic_setup setup;
	struct devmemtcp_flow ssh;
	struct devmemtcp_nic *nic;
	char cmd[256], *before, *after, out[4096], rule_before[1024];
	int id;

	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	T_TRY(nic_setup_new(&setup, 5204, false));
	T_TRY(shadowed(&setup));
	snprintf(cmd, sizeof(cmd),
		 "ethtool -K %s ntuple on && ethtool -N %s flow-type tcp4 dst-port 22 action 1 loc 5 && "
		 "ethtool -X %s weight 1 2 3 4", ifname, ifname, ifname);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "ethtool -n %s rule 5", ifname);
	t_capture(rule_before, sizeof(rule_before), cmd);
	before = nic_dump();

	T_CHECK(devmemtcp_nic_open(ctx, ifname, &setup.opts, &nic) == 0, "open: %s",
		devmemtcp_ctx_errmsg(ctx));
	t_capture(out, sizeof(out), cmd);
	T_CHECK(strcmp(out, rule_before) == 0, "foreign rule changed:\n%s", out);
	/* the same match as the foreign rule, but ours goes first (the
	 * simulated NIC puts it at the lowest free location) */
	devmemtcp_flow_parse("dst-port 22", &ssh);
	id = devmemtcp_nic_add_flow(nic, &ssh);
	T_CHECK(id == 2, "add_flow: %d %s", id, devmemtcp_nic_errmsg(nic));
	T_CHECK(devmemtcp_nic_remove_flow(nic, id) == 0, "remove_flow: %s", devmemtcp_nic_errmsg(nic));
	T_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	after = nic_dump();
	T_TRY(nic_same(before, after, "after close, with a foreign rule and table"));
	snprintf(cmd, sizeof(cmd), "ethtool -N %s delete 5 && ethtool -X %s default", ifname, ifname);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	printf("foreign: rule 5 and the custom table untouched\n");
	return fed_by_others();
}

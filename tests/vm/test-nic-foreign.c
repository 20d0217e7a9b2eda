// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-foreign IFACE: an ntuple rule and a custom RSS table set by
 * someone else (ethtool) before setup are untouched while the handle lives
 * and after it closes; a flow matching the foreign rule is refused with
 * -EEXIST naming it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness-nic.h"

static struct devmemtcp_ctx *ctx;
static const char *ifname;

int main(int argc, char **argv)
{
	struct nic_setup setup;
	struct devmemtcp_flow ssh;
	struct devmemtcp_nic *nic;
	char cmd[256], *before, *after, out[4096], rule_before[1024];

	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	snprintf(cmd, sizeof(cmd),
		 "ethtool -K %s ntuple on && ethtool -N %s flow-type tcp4 dst-port 22 action 1 loc 5 && "
		 "ethtool -X %s weight 1 2 3 4", ifname, ifname, ifname);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "ethtool -n %s rule 5", ifname);
	t_capture(rule_before, sizeof(rule_before), cmd);
	before = nic_dump();

	T_TRY(nic_setup_new(&setup, 5204, false));
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &setup.opts, &nic) == 0, "open: %s",
		devmemtcp_ctx_errmsg(ctx));
	t_capture(out, sizeof(out), cmd);
	T_CHECK(strcmp(out, rule_before) == 0, "foreign rule changed:\n%s", out);
	/* a flow with the same match as the foreign rule */
	devmemtcp_flow_parse("dst-port 22", &ssh);
	T_CHECK(devmemtcp_nic_add_flow(nic, &ssh) == -EEXIST, "not EEXIST");
	snprintf(out, sizeof(out),
		 "adding a flow on %s: flow 2 (tcp4 *:* -> *:22 context %u) matches the same packets as rule 5, which this handle does not own: "
		 "delete it (ethtool -N %s delete 5) or change the flow",
		 ifname, (unsigned)({ DEVMEMTCP_OPTS(nic_stats, s); devmemtcp_nic_stats(nic, &s); s.rss_context; }), ifname);
	T_CHECK(strcmp(devmemtcp_nic_errmsg(nic), out) == 0, "message: %s",
		devmemtcp_nic_errmsg(nic));
	T_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	after = nic_dump();
	T_TRY(nic_same(before, after, "after close, with a foreign rule and table"));
	snprintf(cmd, sizeof(cmd), "ethtool -N %s delete 5 && ethtool -X %s default", ifname, ifname);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	printf("foreign: rule 5 and the custom table untouched\n");
	return 0;
}

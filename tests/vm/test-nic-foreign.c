// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-foreign IFACE: an ntuple rule and a custom RSS table set by
 * someone else (ethtool) before setup are untouched while the handle lives
 * and after it closes; a flow matching the foreign rule is refused with
 * -EEXIST naming it.
 */
#include "nicvm.h"

int main(int argc, char **argv)
{
	struct devmemtcp_flow f[2], ssh;
	struct devmemtcp_nic *nic;
	char cmd[256], *before, *after, out[4096], rule_before[1024];
	FILE *p;
	size_t n;

	nicvm_init(argc, argv);
	snprintf(cmd, sizeof(cmd),
		 "ethtool -K %s ntuple on && ethtool -N %s flow-type tcp4 dst-port 22 action 1 loc 5 && "
		 "ethtool -X %s weight 1 2 3 4", ifname, ifname, ifname);
	VM_CHECK(system(cmd) == 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "ethtool -n %s rule 5", ifname);
	p = popen(cmd, "r");
	n = fread(rule_before, 1, sizeof(rule_before) - 1, p);
	rule_before[n] = '\0';
	pclose(p);
	before = nic_dump();

	nic_two_flows(f, 5204);
	{
		DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2);

		VM_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "open: %s",
			 devmemtcp_ctx_errmsg(ctx));
	}
	p = popen(cmd, "r");
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	pclose(p);
	VM_CHECK(strcmp(out, rule_before) == 0, "foreign rule changed:\n%s", out);
	/* a flow with the same match as the foreign rule */
	devmemtcp_flow_parse("dst-port 22", &ssh);
	VM_CHECK(devmemtcp_nic_add_flow(nic, &ssh) == -EEXIST, "not EEXIST");
	snprintf(out, sizeof(out),
		 "adding a flow on %s: flow 2 (tcp4 *:* -> *:22 context %u) matches the same packets as rule 5, which this handle does not own: "
		 "delete it (ethtool -N %s delete 5) or change the flow",
		 ifname, (unsigned)({ DEVMEMTCP_OPTS(nic_stats, s); devmemtcp_nic_stats(nic, &s); s.rss_context; }), ifname);
	VM_CHECK(strcmp(devmemtcp_nic_errmsg(nic), out) == 0, "message: %s",
		 devmemtcp_nic_errmsg(nic));
	VM_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	after = nic_dump();
	if (nic_same(before, after, "after close, with a foreign rule and table"))
		return 1;
	snprintf(cmd, sizeof(cmd), "ethtool -N %s delete 5 && ethtool -X %s default", ifname, ifname);
	VM_CHECK(system(cmd) == 0, "%s", cmd);
	printf("foreign: rule 5 and the custom table untouched\n");
	return 0;
}

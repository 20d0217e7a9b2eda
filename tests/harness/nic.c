// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The harness for the NIC-layer vm tests; see harness-nic.h. */
#include <libgen.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness-nic.h"

static struct devmemtcp_ctx *nic_ctx;
static const char *nic_ifname;
static char tool[PATH_MAX];

char *nic_dump(void)
{
	char cmd[PATH_MAX + 1024], *buf = NULL;
	size_t len = 0;
	FILE *p, *m = open_memstream(&buf, &len);
	int c;

	snprintf(cmd, sizeof(cmd),
		 "IF=%s; ethtool -g $IF; ethtool -l $IF; "
		 "ethtool -k $IF | grep -E '^(ntuple-filters|receive-hashing):'; "
		 "ethtool -x $IF; for c in 1 2 3 4 5 6 7; do ethtool -x $IF context $c 2>/dev/null; done; "
		 "ethtool -n $IF 2>&1; "
		 /* hds-thresh, which older ethtool programs do not show */
		 "%s probe $IF --json | grep -o '\"hds_thresh\":[-0-9]*'",
		 nic_ifname, tool);
	p = popen(cmd, "r");
	while (p && (c = fgetc(p)) != EOF)
		fputc(c, m);
	if (p)
		pclose(p);
	fclose(m);
	return buf;
}

bool dump_has(const char *dump, const char *key, const char *value)
{
	const char *p = strstr(dump, key);

	if (!p)
		return false;
	p += strlen(key);
	p += strspn(p, " \t");
	return strncmp(p, value, strlen(value)) == 0;
}

int nic_same(const char *before, const char *after, const char *when)
{
	const char *a = before, *b = after;

	if (strcmp(before, after) == 0)
		return 0;
	while (*a && *a == *b) {
		const char *na = strchr(a, '\n'), *nb = strchr(b, '\n');

		if (!na || !nb || na - a != nb - b || strncmp(a, b, (size_t)(na - a)))
			break;
		a = na + 1;
		b = nb + 1;
	}
	fprintf(stderr, "FAIL: %s: NIC state differs from before\n  before: %.*s\n  after:  %.*s\n",
		when, (int)strcspn(a, "\n"), a, (int)strcspn(b, "\n"), b);
	return T_EXIT_FAIL;
}

/* After vm_topology() the pair lives in the namespaces: enter the one
 * that has ifname. */
static bool find_iface(const char *ifname)
{
	if (!if_nametoindex(ifname) && vm_enter(VM_RX_NS) == 0 &&
	    !if_nametoindex(ifname))
		vm_enter(VM_TX_NS);
	return if_nametoindex(ifname) != 0;
}

int nic_init(int argc, char **argv, struct devmemtcp_ctx **ctx, const char **ifname)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	char self[PATH_MAX];

	if (argc < 2) {
		fprintf(stderr, "usage: %s IFACE\n", argv[0]);
		return 2;
	}
	nic_ifname = argv[1];
	if (geteuid() != 0)
		T_SKIP("needs root");
	if (t_run("ethtool --version >/dev/null 2>&1"))
		T_SKIP("the ethtool program (the state oracle) is not in the guest");
	T_CHECK(find_iface(nic_ifname), "no interface %s", nic_ifname);
	/* queues of a device that is down take no binding */
	T_CHECK(t_run("ip link set %s up", nic_ifname) == 0, "ip link set %s up", nic_ifname);
	snprintf(self, sizeof(self), "%s", argv[0]);
	snprintf(tool, sizeof(tool), "%s/../../tools/devmemtcp", dirname(self));
	T_CHECK(devmemtcp_ctx_new(&co, &nic_ctx) == 0, "ctx");
	unsetenv("DEVMEMTCP_NIC_FAIL_STEP");
	unsetenv("DEVMEMTCP_NIC_CRASH_STEP");
	/* start clean: nothing left by an earlier test */
	devmemtcp_nic_recover(nic_ctx, nic_ifname, NULL);
	*ctx = nic_ctx;
	*ifname = nic_ifname;
	return 0;
}

int nic_setup_new(struct nic_setup *s, int port, bool with_buf)
{
	char t[128];

	memset(s, 0, sizeof(*s));
	snprintf(t, sizeof(t), "dst-ip %s dst-port %d", VM_RX_ADDR4, port);
	devmemtcp_flow_parse(t, &s->flows[0]);
	snprintf(t, sizeof(t), "tcp6 dst-ip %s dst-port %d", VM_RX_ADDR6, port);
	devmemtcp_flow_parse(t, &s->flows[1]);
	if (with_buf)
		T_CHECK(t_udmabuf(nic_ctx, 32u << 20, &s->buf) == 0, "udmabuf");
	s->opts = (struct devmemtcp_nic_opts){ .sz = sizeof(s->opts), .nqueues = 2,
					       .flows = s->flows, .nflows = 2,
					       .buf = s->buf };
	return 0;
}

void nic_setup_free(struct nic_setup *s)
{
	devmemtcp_buf_free(s->buf);
	s->buf = NULL;
}

int nic_run_tool(char *out, size_t len, const char *args)
{
	char cmd[PATH_MAX + 256];

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", tool, args);
	return t_capture(out, len, cmd);
}

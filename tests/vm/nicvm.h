/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Shared by the vm tests of the NIC layer (tests/vm/test-nic-*.c).  Each is a
 * program "test-nic-X IFACE" run as root in the guest with the simulated NIC;
 * exit 0 pass, 1 fail, 77 skip.  NIC state is compared through the ethtool
 * program (an oracle independent of the library): rings, channels, the
 * ntuple feature, the RSS table and every RSS context, and the ntuple rules.
 */
#ifndef DEVMEMTCP_NICVM_H
#define DEVMEMTCP_NICVM_H

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devmemtcp.h"
#include "pattern.h"
#include "vmlib.h"

#define PATTERN_PERIOD PATTERN_PERIOD_DEFAULT

static struct devmemtcp_ctx *ctx;
static const char *ifname;
static char tool[PATH_MAX];

static void nicvm_quiet(void *user, int level, const char *msg)
{
}

/* Everything ethtool shows that the NIC layer may change. */
static __attribute__((unused)) char *nic_dump(void)
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
		 ifname, tool);
	p = popen(cmd, "r");
	while (p && (c = fgetc(p)) != EOF)
		fputc(c, m);
	if (p)
		pclose(p);
	fclose(m);
	return buf;
}

/* Does the dump have "key<whitespace>value" (ethtool pads with tabs)? */
static __attribute__((unused)) bool dump_has(const char *dump, const char *key,
					     const char *value)
{
	const char *p = strstr(dump, key);

	if (!p)
		return false;
	p += strlen(key);
	p += strspn(p, " \t");
	return strncmp(p, value, strlen(value)) == 0;
}

/* 0 when equal; else print the first differing line and return 1. */
static __attribute__((unused)) int nic_same(const char *before, const char *after, const char *when)
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
	return 1;
}

static int nicvm_init(int argc, char **argv)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = nicvm_quiet);
	char self[PATH_MAX];

	if (argc < 2) {
		fprintf(stderr, "usage: %s IFACE\n", argv[0]);
		exit(2);
	}
	ifname = argv[1];
	if (geteuid() != 0) {
		printf("SKIP: needs root\n");
		exit(77);
	}
	if (system("ethtool --version >/dev/null 2>&1")) {
		printf("SKIP: the ethtool program (the state oracle) is not in the guest\n");
		exit(77);
	}
	/* After vm_topology() the pair lives in namespaces dmtA/dmtB. */
	if (!if_nametoindex(ifname) && vm_enter("dmtB") == 0 &&
	    !if_nametoindex(ifname))
		vm_enter("dmtA");
	if (!if_nametoindex(ifname)) {
		fprintf(stderr, "FAIL: no interface %s\n", ifname);
		exit(1);
	}
	/* queues of a device that is down take no binding */
	snprintf(self, sizeof(self), "ip link set %s up", ifname);
	if (system(self)) {
		fprintf(stderr, "FAIL: %s\n", self);
		exit(1);
	}
	snprintf(self, sizeof(self), "%s", argv[0]);
	snprintf(tool, sizeof(tool), "%s/../../tools/devmemtcp", dirname(self));
	if (devmemtcp_ctx_new(&co, &ctx)) {
		fprintf(stderr, "FAIL: ctx\n");
		exit(1);
	}
	unsetenv("DEVMEMTCP_NIC_FAIL_STEP");
	unsetenv("DEVMEMTCP_NIC_CRASH_STEP");
	/* start clean: nothing left by an earlier test */
	devmemtcp_nic_recover(ctx, ifname, NULL);
	return 0;
}

static __attribute__((unused)) struct devmemtcp_buf *nic_udmabuf(uint64_t size)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = size);
	struct devmemtcp_buf *buf;

	if (devmemtcp_buf_new(ctx, &o, &buf)) {
		fprintf(stderr, "udmabuf: %s\n", devmemtcp_ctx_errmsg(ctx));
		return NULL;
	}
	return buf;
}

/* An IPv4 and an IPv6 flow to the receiver's addresses. */
static __attribute__((unused)) void nic_two_flows(struct devmemtcp_flow f[2], int port)
{
	char t[128];

	snprintf(t, sizeof(t), "dst-ip %s dst-port %d", VM_RX_ADDR4, port);
	devmemtcp_flow_parse(t, &f[0]);
	snprintf(t, sizeof(t), "tcp6 dst-ip %s dst-port %d", VM_RX_ADDR6, port);
	devmemtcp_flow_parse(t, &f[1]);
}

/* Run the devmemtcp program; its output in out, exit status returned. */
static __attribute__((unused)) int run_tool(char *out, size_t len, const char *args)
{
	char cmd[PATH_MAX + 256];
	FILE *p;
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", tool, args);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The harness for the NIC-layer vm tests; see harness-nic.h. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness-nic.h"
#include "pattern.h"

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

int nic_receive(struct devmemtcp_ctx *ctx, int lfd, struct devmemtcp_buf *buf,
		uint32_t binding, struct nic_rx_result *r, void (*tick)(void *),
		void *arg)
{
	enum { MAX_FRAGS = 1024, LINEAR = 1 << 20 };
	struct devmemtcp_frag *frags = calloc(MAX_FRAGS, sizeof(*frags));
	uint8_t *linear = malloc(LINEAR), *tmp = malloc(65536);
	struct devmemtcp_rx *rx = NULL;
	double last = 0;
	int fd = -1, n, ret = T_EXIT_FAIL;

	memset(r, 0, sizeof(*r));
	r->bad_at = -1;
	if (!frags || !linear || !tmp)
		goto out;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "FAIL: receiver: accept: %s\n", strerror(errno));
		goto out;
	}
	if (devmemtcp_rx_new(ctx, fd, NULL, &rx) || devmemtcp_rx_add_buf(rx, binding, buf)) {
		fprintf(stderr, "FAIL: receiver: rx: %s\n",
			rx ? devmemtcp_rx_errmsg(rx) : devmemtcp_ctx_errmsg(ctx));
		goto out;
	}
	while ((n = devmemtcp_rx_recv(rx, frags, MAX_FRAGS, linear, LINEAR)) > 0) {
		double now = t_now();

		if (last && now - last > r->max_gap) {
			r->max_gap = now - last;
			r->max_gap_at = now;
		}
		r->slow += last && now - last > 0.25;
		if (!last && tick)
			tick(arg);
		last = now;
		for (int i = 0; i < n; i++) {
			const struct devmemtcp_frag *f = &frags[i];
			const uint8_t *src = tmp;
			long at;

			if (f->flags & DEVMEMTCP_FRAG_LINEAR) {
				src = linear + f->offset;
				r->linear += f->len;
			} else if (devmemtcp_buf_read(buf, f->offset, tmp, f->len)) {
				fprintf(stderr, "FAIL: receiver: %s\n", devmemtcp_buf_errmsg(buf));
				goto out;
			}
			at = r->bad_at < 0 ? pattern_check(src, f->len, r->bytes,
							   PATTERN_PERIOD_DEFAULT) : -1;
			if (at >= 0)
				r->bad_at = (int64_t)(r->bytes + (uint64_t)at);
			r->bytes += f->len;
		}
		if (devmemtcp_rx_release(rx, frags, (size_t)n)) {
			fprintf(stderr, "FAIL: receiver: %s\n", devmemtcp_rx_errmsg(rx));
			goto out;
		}
	}
	if (n < 0)
		fprintf(stderr, "FAIL: receiver: recv: %s\n", devmemtcp_rx_errmsg(rx));
	else
		ret = 0;
out:
	devmemtcp_rx_free(rx);
	if (fd >= 0)
		close(fd);
	free(frags);
	free(linear);
	free(tmp);
	return ret;
}

static int eth_ioctl(void *data)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", nic_ifname);
	ifr.ifr_data = data;
	ret = ioctl(fd, SIOCETHTOOL, &ifr);
	close(fd);
	return ret;
}

uint64_t nic_rss_queues(void)
{
	struct ethtool_rxfh_indir *t = calloc(1, sizeof(*t) + 4096 * sizeof(uint32_t));
	uint64_t mask = 0;

	if (!t)
		return 0;
	t->cmd = ETHTOOL_GRXFHINDIR;	/* size 0: how big it is */
	if (eth_ioctl(t) == 0 && t->size && t->size <= 4096) {
		t->cmd = ETHTOOL_GRXFHINDIR;
		if (eth_ioctl(t) == 0)
			for (uint32_t i = 0; i < t->size; i++)
				if (t->ring_index[i] < 64)
					mask |= 1ull << t->ring_index[i];
	}
	free(t);
	return mask;
}

int nic_rule_ports(int *ports, int max)
{
	struct ethtool_rxnfc cnt = { .cmd = ETHTOOL_GRXCLSRLCNT }, *all;
	int n;

	if (eth_ioctl(&cnt))
		return -1;
	all = calloc(1, sizeof(*all) + cnt.rule_cnt * sizeof(uint32_t));
	if (!all)
		return -1;
	all->cmd = ETHTOOL_GRXCLSRLALL;
	all->rule_cnt = cnt.rule_cnt;
	if (eth_ioctl(all)) {
		free(all);
		return -1;
	}
	n = (int)all->rule_cnt;
	for (int i = 0; i < n && i < max; i++) {
		struct ethtool_rxnfc r = { .cmd = ETHTOOL_GRXCLSRULE };

		r.fs.location = all->rule_locs[i];
		ports[i] = eth_ioctl(&r) ? -1 : ntohs(r.fs.h_u.tcp_ip4_spec.pdst);
	}
	free(all);
	return n;
}

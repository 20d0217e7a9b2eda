// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The harness for the devmem TX vm tests: arguments and opening; see harness-tx.h. */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness-tx.h"

static void usage(void)
{
	printf("usage: %s [--setup] [--tx-if IF] [--tx-addr A] [--tx-ns NS]\n"
	       "       [--rx-if IF] [--rx-addr A] [--rx-ns NS] [--bytes N] [--port P] [--quick]\n",
	       program_invocation_short_name);
}

/* -1: parsed; else what main() returns (usage printed) */
static int parse_args(struct tx_args *a, int argc, char **argv, const struct tx_desc *d)
{
	static const struct option opts[] = {
		{ "tx-if", required_argument, NULL, 1 },
		{ "rx-if", required_argument, NULL, 2 },
		{ "tx-addr", required_argument, NULL, 3 },
		{ "rx-addr", required_argument, NULL, 4 },
		{ "tx-ns", required_argument, NULL, 5 },
		{ "rx-ns", required_argument, NULL, 6 },
		{ "bytes", required_argument, NULL, 7 },
		{ "port", required_argument, NULL, 8 },
		{ "setup", no_argument, NULL, 9 },
		{ "quick", no_argument, NULL, 10 },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int c;

	*a = (struct tx_args){ VM_TX_IF, VM_RX_IF, VM_TX_ADDR4, VM_RX_ADDR4, NULL,
			       NULL, d->bytes, d->port, false, false };
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 1: a->tx_if = optarg; break;
		case 2: a->rx_if = optarg; break;
		case 3: a->tx_addr = optarg; break;
		case 4: a->rx_addr = optarg; break;
		case 5: a->tx_ns = optarg; break;
		case 6: a->rx_ns = optarg; break;
		case 7: a->bytes = t_parse_bytes(optarg); break;
		case 8: a->port = atoi(optarg); break;
		case 9: a->setup = true; break;
		case 10: a->quick = true; break;
		default:
			usage();
			return c == 'h' ? T_EXIT_PASS : 2;
		}
	}
	return -1;
}

/* An address --setup was asked for that the topology does not have. */
static int add_addr(const char *ns, const char *ifname, const char *addr,
		    const char *ours4, const char *ours6)
{
	bool v6 = strchr(addr, ':');

	if (!strcmp(addr, ours4) || !strcmp(addr, ours6))
		return 0;
	return t_run("ip -n %s addr add %s/%s dev %s%s", ns, addr, v6 ? "64" : "24",
		     ifname, v6 ? " nodad" : "");
}

/* Two namespaces with one device each, so that traffic between the two
 * addresses really crosses the (simulated) wire. */
static int setup_ns(struct tx_args *a)
{
	int built = vm_topology(a->tx_if, a->rx_if);

	T_CHECK(built >= 0, "--setup: could not build the namespaces");
	if (built)
		atexit(vm_topology_remove);
	T_CHECK(!add_addr(VM_TX_NS, a->tx_if, a->tx_addr, VM_TX_ADDR4, VM_TX_ADDR6) &&
		!add_addr(VM_RX_NS, a->rx_if, a->rx_addr, VM_RX_ADDR4, VM_RX_ADDR6),
		"--setup: could not add %s / %s", a->tx_addr, a->rx_addr);
	a->tx_ns = VM_TX_NS;
	a->rx_ns = VM_RX_NS;
	return 0;
}

/*
 * bind-tx on the sender's device.  On a kernel without devmem TX, the test
 * is that the library says so clearly: -EOPNOTSUPP and "needs Linux 6.16";
 * then t->b stays NULL and the test has passed.
 */
static int bind_tx_or_explain(struct tx_test *t)
{
	const char *rel = t_kernel_release(), *ifname = t->a.tx_if;
	bool has = t_kernel_version() >= 616;
	int ifindex = (int)if_nametoindex(ifname), r;
	struct devmemtcp_binding *b = NULL;

	T_CHECK(ifindex, "no interface %s in the sender's namespace", ifname);
	r = devmemtcp_bind_tx(t->ctx, ifindex, t->buf, NULL, &b);
	if (!has) {
		T_CHECK(r == -EOPNOTSUPP,
			"kernel %s has no devmem TX: expected -EOPNOTSUPP from devmemtcp_bind_tx, got %d (%s)",
			rel, r, devmemtcp_ctx_errmsg(t->ctx));
		T_CHECK(strstr(devmemtcp_ctx_errmsg(t->ctx), "needs Linux 6.16"),
			"kernel %s: -EOPNOTSUPP but the message does not say \"needs Linux 6.16\": %s",
			rel, devmemtcp_ctx_errmsg(t->ctx));
		t_note("PASS (kernel %s without devmem TX): devmemtcp_bind_tx -> -EOPNOTSUPP: %s",
		       rel, devmemtcp_ctx_errmsg(t->ctx));
		return 0;
	}
	T_CHECK(r == 0, "devmemtcp_bind_tx on %s (kernel %s): %d: %s", ifname,
		rel, r, devmemtcp_ctx_errmsg(t->ctx));
	t_note("bind-tx on %s: binding %u", ifname, devmemtcp_binding_id(b));
	t->b = b;
	return 0;
}

static int open_sender(struct tx_test *t, const struct tx_desc *d)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_level = DEVMEMTCP_LOG_WARN);
	uint32_t provider = d->provider ? d->provider : DEVMEMTCP_PROVIDER_UDMABUF;
	int r;

	T_CHECK(!t->a.tx_ns || vm_enter(t->a.tx_ns) == 0, "entering netns %s: %s",
		t->a.tx_ns, strerror(errno));
	r = devmemtcp_ctx_new(&o, &t->ctx);
	T_CHECK(r == 0, "devmemtcp_ctx_new: %s", strerror(-r));
	r = t_buf(t->ctx, provider, d->buf_size, &t->buf);
	/* udmabuf is this machine's; a DRM test runs where the device is */
	if ((r == -ENOENT || r == -EOPNOTSUPP) && provider == DEVMEMTCP_PROVIDER_UDMABUF)
		T_SKIP("no udmabuf: %s", devmemtcp_ctx_errmsg(t->ctx));
	T_CHECK(r == 0, "buffer");
	return bind_tx_or_explain(t);
}

int tx_main(int argc, char **argv, const struct tx_desc *d)
{
	struct tx_test t = { 0 };
	int r = parse_args(&t.a, argc, argv, d);

	if (r >= 0)
		return r;
	if (t.a.setup)
		T_TRY(setup_ns(&t.a));
	signal(SIGPIPE, SIG_IGN);
	r = open_sender(&t, d);
	if (!r && t.b)
		r = d->run(&t);
	devmemtcp_binding_close(t.b);
	devmemtcp_buf_free(t.buf);
	devmemtcp_ctx_free(t.ctx);
	return r;
}

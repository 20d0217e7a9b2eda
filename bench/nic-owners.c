// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Setup cost of one more owner of a NIC: the netlink round trips and
 * SIOCETHTOOL ioctls of devmemtcp_nic_open() and devmemtcp_nic_close()
 * (and their time, files and lock included) when 0, 3 or 7 other owners
 * hold queues and flows of the interface.  Runs against the unit tests'
 * in-memory NIC (tests/lib/fake-nic.h), which counts the calls the real
 * ethtool layer would make (an RSS dump or get, rings, features and
 * channels: one netlink round trip each; a rule listing: two ioctls plus
 * one per rule); compared in the same run with the first owner, which
 * also records and finally restores the baseline.  The run directory is
 * on tmpfs (/dev/shm) like /run.
 *
 * usage: nic-owners [--rounds N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fake-nic.h"

static struct fake_nic nic;
static struct devmemtcp_ctx *ctx;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* An owner of one queue with one flow to port. */
static struct devmemtcp_nic *own(int port)
{
	char text[64];
	struct devmemtcp_flow f;
	DEVMEMTCP_OPTS(nic_opts, o, .flows = &f, .nflows = 1);
	struct devmemtcp_nic *h;

	snprintf(text, sizeof(text), "dst-port %d", port);
	devmemtcp_flow_parse(text, &f);
	if (devmemtcp_nic_open(ctx, "eth0", &o, &h)) {
		fprintf(stderr, "open: %s\n", devmemtcp_ctx_errmsg(ctx));
		exit(1);
	}
	return h;
}

struct cost {
	double nl, io, us;
};

/* The average cost of one open and one close with others already there. */
static void measure(int others, int rounds, struct cost *open_c, struct cost *close_c)
{
	struct devmemtcp_nic *bg[8], *h;

	for (int i = 0; i < others; i++)
		bg[i] = own(7000 + i);
	memset(open_c, 0, sizeof(*open_c));
	memset(close_c, 0, sizeof(*close_c));
	for (int r = 0; r < rounds; r++) {
		int nl = nic.nl_calls, io = nic.ioctls;
		double t = now_us();

		h = own(9000);
		open_c->us += now_us() - t;
		open_c->nl += nic.nl_calls - nl;
		open_c->io += nic.ioctls - io;
		nl = nic.nl_calls;
		io = nic.ioctls;
		t = now_us();
		if (devmemtcp_nic_close(h)) {
			fprintf(stderr, "close: %s\n", devmemtcp_ctx_errmsg(ctx));
			exit(1);
		}
		close_c->us += now_us() - t;
		close_c->nl += nic.nl_calls - nl;
		close_c->io += nic.ioctls - io;
	}
	for (int i = 0; i < others; i++)
		devmemtcp_nic_close(bg[i]);
	open_c->nl /= rounds;
	open_c->io /= rounds;
	open_c->us /= rounds;
	close_c->nl /= rounds;
	close_c->io /= rounds;
	close_c->us /= rounds;
}

int main(int argc, char **argv)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_level = DEVMEMTCP_LOG_NONE);
	static const int owners[] = { 1, 4, 8 };
	struct cost o[3], c[3];
	char dir[] = "/dev/shm/dmt-bench-XXXXXX", cmd[96];
	int rounds = 50;

	if (argc == 3 && strcmp(argv[1], "--rounds") == 0)
		rounds = atoi(argv[2]);
	if (rounds < 1 || (!mkdtemp(dir) && (strcpy(dir, "/tmp/dmt-bench-XXXXXX"), !mkdtemp(dir)))) {
		fprintf(stderr, "usage: nic-owners [--rounds N] (and a writable /dev/shm or /tmp)\n");
		return 2;
	}
	setenv("DEVMEMTCP_RUN_DIR", dir, 1);
	if (devmemtcp_ctx_new(&co, &ctx))
		return 1;
	fake_init(&nic);
	nic.nrx = 16;	/* 8 owners of a queue each, and some left */
	for (int i = 0; i < FAKE_INDIR; i++)
		nic.indir[i] = (uint32_t)i % nic.nrx;
	for (int k = 0; k < 3; k++)
		measure(owners[k] - 1, rounds, &o[k], &c[k]);
	printf("# one more owner (1 queue, 1 flow) of an interface with 16 RX queues, average of %d rounds, run dir on %s\n",
	       rounds, strncmp(dir, "/dev/shm", 8) ? "/tmp" : "tmpfs");
	printf("owners  open: netlink  ioctls      us   close: netlink  ioctls      us\n");
	for (int k = 0; k < 3; k++)
		printf("%6d  %13.1f %7.1f %7.0f  %14.1f %7.1f %7.0f\n", owners[k], o[k].nl,
		       o[k].io, o[k].us, c[k].nl, c[k].io, c[k].us);
	printf("ratio 8/1 owners: open netlink %.2fx, ioctls %.2fx; close netlink %.2fx, ioctls %.2fx\n",
	       o[2].nl / o[0].nl, o[2].io / o[0].io, c[2].nl / c[0].nl, c[2].io / c[0].io);
	devmemtcp_ctx_free(ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) ? 1 : 0;
}

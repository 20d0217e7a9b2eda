// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-busy IFACE: while one process owns a queue of IFACE, a second
 * process asking for that queue gets -EBUSY naming the owner's pid and
 * program, and one asking for any queue gets another one; once the owner
 * is killed, the next open undoes what it left, and the NIC ends as it
 * began.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness-nic.h"

static struct devmemtcp_ctx *ctx;
static const char *ifname;

int main(int argc, char **argv)
{
	struct nic_setup s;
	struct devmemtcp_nic *nic;
	const uint32_t *q;
	char *before, *after, want[256];
	uint32_t held;
	int p[2], st;
	pid_t child;

	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	before = nic_dump();
	T_TRY(nic_setup_new(&s, 5203, false));
	T_CHECK(pipe(p) == 0, "pipe");
	child = fork();
	if (child == 0) {
		s.opts.nqueues = 1;
		if (devmemtcp_nic_open(ctx, ifname, &s.opts, &nic))
			_exit(3);
		devmemtcp_nic_queues(nic, &q);
		(void)!write(p[1], q, sizeof(*q));
		pause();
		_exit(0);
	}
	T_CHECK(read(p[0], &held, sizeof(held)) == sizeof(held), "holder did not set up: %d",
		waitpid(child, &st, 0));
	{
		DEVMEMTCP_OPTS(nic_opts, o, .queues = &held, .nqueues = 1);

		T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == -EBUSY, "not EBUSY");
	}
	snprintf(want, sizeof(want),
		 "%s: RX queue %u of %s is owned by pid %d (test-nic-busy): pick another queue, "
		 "or let the library pick free ones (queues = NULL)",
		 ifname, held, ifname, child);
	T_CHECK(strcmp(devmemtcp_ctx_errmsg(ctx), want) == 0, "message: %s",
		devmemtcp_ctx_errmsg(ctx));
	printf("busy: %s\n", want);
	{
		DEVMEMTCP_OPTS(nic_opts, o);

		T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "open: %s",
			devmemtcp_ctx_errmsg(ctx));
		T_CHECK(devmemtcp_nic_queues(nic, &q) == 1 && q[0] != held, "queue %u", q[0]);
		printf("busy: a second owner got queue %u\n", q[0]);
		T_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	}
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	{
		DEVMEMTCP_OPTS(nic_opts, o);

		T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "open: %s",
			devmemtcp_ctx_errmsg(ctx));
		T_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	}
	after = nic_dump();
	return nic_same(before, after, "after the owner died and the next owner came and went");
}

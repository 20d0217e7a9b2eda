// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-busy IFACE: while one process holds a setup of IFACE, a second
 * gets -EBUSY naming the holder's pid and program; once the holder is
 * killed, the next open recovers its changes (DEVMEMTCP_NIC_RECOVER).
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
	char *before, *after, want[256], c;
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
		(void)!write(p[1], "x", 1);
		pause();
		_exit(0);
	}
	T_CHECK(read(p[0], &c, 1) == 1, "holder did not set up: %d", waitpid(child, &st, 0));
	{
		DEVMEMTCP_OPTS(nic_opts, o, .queues = (const uint32_t[]){ 3 }, .nqueues = 1);

		T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == -EBUSY, "not EBUSY");
	}
	snprintf(want, sizeof(want),
		 "%s is in use for devmem by pid %d (test-nic-busy): stop that process or wait for it to close its handle",
		 ifname, child);
	T_CHECK(strcmp(devmemtcp_ctx_errmsg(ctx), want) == 0, "message: %s",
		devmemtcp_ctx_errmsg(ctx));
	printf("busy: %s\n", want);
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	{
		DEVMEMTCP_OPTS(nic_opts, o, .flags = DEVMEMTCP_NIC_RECOVER);

		T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "open: %s",
			devmemtcp_ctx_errmsg(ctx));
		T_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	}
	after = nic_dump();
	return nic_same(before, after, "after the holder died and was recovered");
}

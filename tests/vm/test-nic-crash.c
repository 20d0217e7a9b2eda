// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-crash IFACE (the receiver, dsim1): a receiver that set up the NIC
 * (flows, RSS context, udmabuf bound) and is killed with SIGKILL while a
 * transfer runs leaves its files; "devmemtcp restore IFACE" puts the NIC
 * back exactly, and so does the next open (and close) of anyone.  Then a
 * crash at every step of the setup (DEVMEMTCP_NIC_CRASH_STEP=N) is
 * recovered exactly.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness-nic.h"
#include "pattern.h"

#define PORT 5205

static struct devmemtcp_ctx *ctx;
static const char *ifname;

/* Set up, accept, receive until killed. */
static void receiver(int ready)
{
	struct nic_setup setup;
	struct devmemtcp_nic *nic;
	struct devmemtcp_rx *rx;
	struct devmemtcp_frag frags[256];
	static char linear[1 << 16];
	int l, s, n, told = 0;

	if (nic_setup_new(&setup, PORT, true) ||
	    devmemtcp_nic_open(ctx, ifname, &setup.opts, &nic))
		_exit(3);
	l = t_listen(VM_RX_ADDR4, PORT);
	(void)!write(ready, "s", 1);
	s = accept(l, NULL, NULL);
	if (s < 0 || devmemtcp_rx_new(ctx, s, NULL, &rx))
		_exit(4);
	devmemtcp_rx_add_buf(rx, devmemtcp_binding_id(devmemtcp_nic_binding(nic)), setup.buf);
	while ((n = devmemtcp_rx_recv(rx, frags, 256, linear, sizeof(linear))) > 0) {
		if (!told) {
			(void)!write(ready, "r", 1);	/* mid-transfer now */
			told = 1;
		}
		devmemtcp_rx_release(rx, frags, (size_t)n);
	}
	_exit(5);
}

static int crash_and_restore(const char *before, int round)
{
	struct devmemtcp_nic *nic;
	struct vm_sender *snd;
	char c, want[512], out[1024], *after;
	int p[2], st;
	pid_t child;

	T_CHECK(pipe(p) == 0, "pipe");
	child = fork();
	if (child == 0) {
		close(p[0]);
		receiver(p[1]);
	}
	close(p[1]);
	T_CHECK(read(p[0], &c, 1) == 1 && c == 's', "receiver did not set up (%d)",
		waitpid(child, &st, 0) > 0 ? WEXITSTATUS(st) : -1);
	snd = vm_send_start(VM_RX_ADDR4, PORT, 1ull << 30, PATTERN_PERIOD_DEFAULT);
	T_CHECK(read(p[0], &c, 1) == 1 && c == 'r', "receiver got nothing");
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	T_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "receiver status %d", st);
	vm_send_wait(snd);	/* fails: the peer is gone */
	close(p[0]);

	if (round == 0) {
		char args[64];

		snprintf(args, sizeof(args), "restore %s", ifname);
		T_CHECK(nic_run_tool(out, sizeof(out), args) == 0, "restore: %s", out);
		snprintf(want, sizeof(want), "%s: restored\n", ifname);
		T_CHECK(strcmp(out, want) == 0, "restore said: %s", out);
	} else {
		T_CHECK(devmemtcp_nic_open(ctx, ifname, NULL, &nic) == 0, "open: %s",
			devmemtcp_ctx_errmsg(ctx));
		T_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	}
	after = nic_dump();
	T_TRY(nic_same(before, after, round ? "after the next open and close" : "after devmemtcp restore"));
	free(after);
	return 0;
}

int main(int argc, char **argv)
{
	char *before, *after, num[16], when[64];
	int step, st;

	signal(SIGPIPE, SIG_IGN);	/* the sender writes to a dead peer */
	T_CHECK(vm_topology(VM_TX_IF, VM_RX_IF) >= 0, "topology");
	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	before = nic_dump();
	for (int round = 0; round < 2; round++)
		T_TRY(crash_and_restore(before, round));
	printf("crash: SIGKILL mid-transfer recovered by restore and by the next open\n");

	for (step = 1; step < 32; step++) {
		struct nic_setup setup;
		pid_t child;

		T_TRY(nic_setup_new(&setup, PORT, true));
		snprintf(num, sizeof(num), "%d", step);
		child = fork();
		if (child == 0) {
			struct devmemtcp_nic *nic;

			setenv("DEVMEMTCP_NIC_CRASH_STEP", num, 1);
			if (devmemtcp_nic_open(ctx, ifname, &setup.opts, &nic))
				_exit(3);
			_exit(devmemtcp_nic_close(nic) ? 4 : 0);
		}
		waitpid(child, &st, 0);
		nic_setup_free(&setup);
		if (WIFEXITED(st)) {
			T_CHECK(WEXITSTATUS(st) == 0, "step %d: child exit %d", step, WEXITSTATUS(st));
			break;	/* past the last step */
		}
		T_CHECK(devmemtcp_nic_recover(ctx, ifname, NULL) == 1, "step %d: recover: %s",
			step, devmemtcp_ctx_errmsg(ctx));
		after = nic_dump();
		snprintf(when, sizeof(when), "crash at step %d", step);
		T_TRY(nic_same(before, after, when));
		free(after);
	}
	T_CHECK(step > 4, "only %d steps", step - 1);
	printf("crash: a crash at each of %d steps recovered exactly\n", step - 1);
	return 0;
}

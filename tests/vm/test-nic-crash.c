// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-crash IFACE (the receiver, dsim1): a receiver that set up the NIC
 * (flows, RSS context, udmabuf bound) and is killed with SIGKILL while a
 * transfer runs leaves a journal; the next open reports it (-ESTALE naming
 * the dead pid), "devmemtcp restore IFACE" puts the NIC back exactly, and so
 * does an open with DEVMEMTCP_NIC_RECOVER.  Then a crash at every step of
 * the setup (DEVMEMTCP_NIC_CRASH_STEP=N) is recovered exactly.
 */
#include <pthread.h>

#include "nicvm.h"

#define PORT 5205

/* Set up, accept, receive until killed. */
static void receiver(int ready)
{
	struct devmemtcp_flow f[2];
	struct devmemtcp_buf *buf = nic_udmabuf(32u << 20);
	struct devmemtcp_nic *nic;
	struct devmemtcp_rx *rx;
	struct devmemtcp_frag frags[256];
	static char linear[1 << 16];
	int l, s, n, told = 0;

	nic_two_flows(f, PORT);
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2, .buf = buf);
	if (!buf || devmemtcp_nic_open(ctx, ifname, &o, &nic))
		_exit(3);
	l = vm_listen(VM_RX_ADDR4, PORT);
	(void)!write(ready, "s", 1);
	s = accept(l, NULL, NULL);
	if (s < 0 || devmemtcp_rx_new(ctx, s, NULL, &rx))
		_exit(4);
	devmemtcp_rx_add_buf(rx, devmemtcp_binding_id(devmemtcp_nic_binding(nic)), buf);
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

	VM_CHECK(pipe(p) == 0, "pipe");
	child = fork();
	if (child == 0) {
		close(p[0]);
		receiver(p[1]);
	}
	close(p[1]);
	VM_CHECK(read(p[0], &c, 1) == 1 && c == 's', "receiver did not set up (%d)",
		 waitpid(child, &st, 0) > 0 ? WEXITSTATUS(st) : -1);
	snd = vm_send_start(VM_RX_ADDR4, PORT, 1ull << 30, PATTERN_PERIOD);
	VM_CHECK(read(p[0], &c, 1) == 1 && c == 'r', "receiver got nothing");
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	VM_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "receiver status %d", st);
	vm_send_wait(snd);	/* fails: the peer is gone */
	close(p[0]);

	VM_CHECK(devmemtcp_nic_open(ctx, ifname, NULL, &nic) == -ESTALE, "not ESTALE");
	snprintf(want, sizeof(want),
		 "%s has changes left by pid %d (test-nic-crash), which ended without undoing them "
		 "(journal /run/devmemtcp/%s.journal): run 'devmemtcp restore %s' or open with DEVMEMTCP_NIC_RECOVER",
		 ifname, child, ifname, ifname);
	VM_CHECK(strcmp(devmemtcp_ctx_errmsg(ctx), want) == 0, "message: %s",
		 devmemtcp_ctx_errmsg(ctx));
	if (round == 0) {
		char args[64];

		snprintf(args, sizeof(args), "restore %s", ifname);
		VM_CHECK(run_tool(out, sizeof(out), args) == 0, "restore: %s", out);
		snprintf(want, sizeof(want), "%s: restored\n", ifname);
		VM_CHECK(strcmp(out, want) == 0, "restore said: %s", out);
	} else {
		DEVMEMTCP_OPTS(nic_opts, o, .flags = DEVMEMTCP_NIC_RECOVER);

		VM_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "open: %s",
			 devmemtcp_ctx_errmsg(ctx));
		VM_CHECK(devmemtcp_nic_close(nic) == 0, "close");
	}
	after = nic_dump();
	if (nic_same(before, after, round ? "after open with RECOVER" : "after devmemtcp restore"))
		return 1;
	free(after);
	return 0;
}

int main(int argc, char **argv)
{
	struct devmemtcp_flow f[2];
	char *before, *after, num[16], when[64];
	int step, st;

	signal(SIGPIPE, SIG_IGN);	/* the sender writes to a dead peer */
	if (vm_topology()) {
		fprintf(stderr, "FAIL: topology\n");
		return 1;
	}
	nicvm_init(argc, argv);
	before = nic_dump();
	for (int round = 0; round < 2; round++)
		if (crash_and_restore(before, round))
			return 1;
	printf("crash: SIGKILL mid-transfer recovered by restore and by open\n");

	nic_two_flows(f, PORT);
	for (step = 1; step < 32; step++) {
		struct devmemtcp_buf *buf = nic_udmabuf(32u << 20);
		pid_t child;

		snprintf(num, sizeof(num), "%d", step);
		child = fork();
		if (child == 0) {
			DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2,
				       .buf = buf);
			struct devmemtcp_nic *nic;

			setenv("DEVMEMTCP_NIC_CRASH_STEP", num, 1);
			if (devmemtcp_nic_open(ctx, ifname, &o, &nic))
				_exit(3);
			_exit(devmemtcp_nic_close(nic) ? 4 : 0);
		}
		waitpid(child, &st, 0);
		devmemtcp_buf_free(buf);
		if (WIFEXITED(st)) {
			VM_CHECK(WEXITSTATUS(st) == 0, "step %d: child exit %d", step, WEXITSTATUS(st));
			break;	/* past the last step */
		}
		VM_CHECK(devmemtcp_nic_recover(ctx, ifname, NULL) == 1, "step %d: recover: %s",
			 step, devmemtcp_ctx_errmsg(ctx));
		after = nic_dump();
		snprintf(when, sizeof(when), "crash at step %d", step);
		if (nic_same(before, after, when))
			return 1;
		free(after);
	}
	VM_CHECK(step > 4, "only %d steps", step - 1);
	printf("crash: a crash at each of %d steps recovered exactly\n", step - 1);
	return 0;
}

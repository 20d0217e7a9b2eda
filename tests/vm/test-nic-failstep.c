// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-failstep IFACE: DEVMEMTCP_NIC_FAIL_STEP=N fails the N-th change of
 * a setup (flows, RSS context, bind-rx); for every N the failed open leaves
 * the NIC identical and names the step; the first N past the last change
 * succeeds, and its close leaves the NIC identical too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness-nic.h"

static struct devmemtcp_ctx *ctx;
static const char *ifname;

int main(int argc, char **argv)
{
	struct nic_setup s;
	struct devmemtcp_nic *nic;
	char *before, *after, num[16], want[64];
	int step;

	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	before = nic_dump();
	T_TRY(nic_setup_new(&s, 5202, true));
	for (step = 1; step < 32; step++) {
		int err;

		snprintf(num, sizeof(num), "%d", step);
		setenv("DEVMEMTCP_NIC_FAIL_STEP", num, 1);
		err = devmemtcp_nic_open(ctx, ifname, &s.opts, &nic);
		unsetenv("DEVMEMTCP_NIC_FAIL_STEP");
		after = nic_dump();
		if (err == 0) {
			T_CHECK(devmemtcp_nic_close(nic) == 0, "close");
			free(after);
			after = nic_dump();
			T_TRY(nic_same(before, after, "close after the last step"));
			break;
		}
		T_CHECK(err == -EIO, "step %d: %d %s", step, err, devmemtcp_ctx_errmsg(ctx));
		snprintf(want, sizeof(want), "DEVMEMTCP_NIC_FAIL_STEP=%d;", step);
		T_CHECK(strstr(devmemtcp_ctx_errmsg(ctx), want), "step %d: %s", step,
			devmemtcp_ctx_errmsg(ctx));
		printf("step %d: %s\n", step, devmemtcp_ctx_errmsg(ctx));
		T_TRY(nic_same(before, after, devmemtcp_ctx_errmsg(ctx)));
		free(after);
	}
	T_CHECK(step >= 5 && step < 32, "%d steps", step - 1);
	nic_setup_free(&s);
	printf("failstep: %d steps, each undone exactly\n", step - 1);
	return 0;
}

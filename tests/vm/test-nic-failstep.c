// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-nic-failstep IFACE: DEVMEMTCP_NIC_FAIL_STEP=N fails the N-th change of
 * a setup (flows, RSS context, bind-rx); for every N the failed open leaves
 * the NIC identical and names the step; the first N past the last change
 * succeeds, and its close leaves the NIC identical too.
 */
#include "nicvm.h"

int main(int argc, char **argv)
{
	struct devmemtcp_flow f[2];
	struct devmemtcp_buf *buf;
	struct devmemtcp_nic *nic;
	char *before, *after, num[16], want[64];
	int step;

	nicvm_init(argc, argv);
	before = nic_dump();
	buf = nic_udmabuf(32u << 20);
	VM_CHECK(buf, "udmabuf");
	nic_two_flows(f, 5202);
	for (step = 1; step < 32; step++) {
		DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2, .flows = f, .nflows = 2,
			       .buf = buf);
		int err;

		snprintf(num, sizeof(num), "%d", step);
		setenv("DEVMEMTCP_NIC_FAIL_STEP", num, 1);
		err = devmemtcp_nic_open(ctx, ifname, &o, &nic);
		unsetenv("DEVMEMTCP_NIC_FAIL_STEP");
		after = nic_dump();
		if (err == 0) {
			VM_CHECK(devmemtcp_nic_close(nic) == 0, "close");
			free(after);
			after = nic_dump();
			if (nic_same(before, after, "close after the last step"))
				return 1;
			break;
		}
		VM_CHECK(err == -EIO, "step %d: %d %s", step, err, devmemtcp_ctx_errmsg(ctx));
		snprintf(want, sizeof(want), "DEVMEMTCP_NIC_FAIL_STEP=%d;", step);
		VM_CHECK(strstr(devmemtcp_ctx_errmsg(ctx), want), "step %d: %s", step,
			 devmemtcp_ctx_errmsg(ctx));
		printf("step %d: %s\n", step, devmemtcp_ctx_errmsg(ctx));
		if (nic_same(before, after, devmemtcp_ctx_errmsg(ctx)))
			return 1;
		free(after);
	}
	VM_CHECK(step >= 5 && step < 32, "%d steps", step - 1);
	devmemtcp_buf_free(buf);
	printf("failstep: %d steps, each undone exactly\n", step - 1);
	return 0;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * devmemtcp_nic_rank on synthetic sysfs trees ($DEVMEMTCP_TEST_SYSFS):
 * directories for the PCI functions under their host bridges, the
 * bus/pci/devices and class/net/IF/device links, numa_node files.  Bus
 * numbers are invented; the shapes follow two documented layouts:
 *
 * - eight GPUs and eight compute NICs, each GPU with its NIC below one
 *   PCIe switch, four switches per CPU socket: the DGX H100 as NVIDIA's
 *   "DGX H100/H200 System User Guide" describes it (each ConnectX-7
 *   compute port and its GPU on one PCIe switch, nvidia-smi topo -m: PIX);
 * - a two-socket server without switches, each slot wired to one CPU's
 *   root port: a GPU on socket 1, a two-port NIC on socket 0, a NIC on
 *   socket 1, a function of the GPU's card, a virtio interface and lo, as
 *   the slot tables of Dell's "PowerEdge R750 Technical Guide" wire them
 *   (slots to CPU 1 or CPU 2).
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctxfixture.h"
#include "sysfsfixture.h"
#include "devmemtcp.h"

static struct devmemtcp_ctx *ctx;
static char root[64];

/* A PCI function at devices/<chain> (tests/lib/sysfsfixture.h). */
static void pci(const char *chain, int numa)
{
	assert_int_equal(sysfix_pci(root, chain, numa), 0);
}

/* Interface ifname whose device is devices/<chain> ("" for none). */
static void net(const char *ifname, const char *chain)
{
	assert_int_equal(sysfix_net(root, ifname, chain), 0);
}

static int setup(void **state)
{
	snprintf(root, sizeof(root), "/tmp/dmt-topo-XXXXXX");
	if (!mkdtemp(root) || ctxfix_ctx_silent(&ctx))
		return -1;
	setenv("DEVMEMTCP_TEST_SYSFS", root, 1);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	devmemtcp_ctx_free(ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd);
}

static int fresh(void **state)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s/devices %s/bus %s/class", root, root, root);
	return system(cmd);
}

/* Eight GPUs and eight NICs: socket s has host bridges for pairs 4s..4s+3;
 * pair k: root port, switch upstream and two downstream ports, the GPU
 * and the NIC. */
static void dgx(char gpu_bdf[8][16])
{
	static const unsigned int hb[8] = { 0x15, 0x37, 0x48, 0x59, 0x97, 0xb7, 0xc7, 0xd7 };

	for (int k = 0; k < 8; k++) {
		unsigned int b = hb[k];
		char base[160], chain[320], ifname[16];

		snprintf(base, sizeof(base),
			 "pci0000:%02x/0000:%02x:01.0/0000:%02x:00.0", b, b, b + 1);
		snprintf(chain, sizeof(chain), "%s/0000:%02x:00.0/0000:%02x:00.0",
			 base, b + 2, b + 3);
		pci(chain, k / 4);	/* the GPU */
		snprintf(gpu_bdf[k], 16, "0000:%02x:00.0", b + 3);
		snprintf(chain, sizeof(chain), "%s/0000:%02x:01.0/0000:%02x:00.0",
			 base, b + 2, b + 4);
		pci(chain, k / 4);	/* the NIC */
		snprintf(ifname, sizeof(ifname), "ibp%ds0", b + 4);
		net(ifname, chain);
	}
	net("lo", "");
}

static void test_dgx_each_gpu_its_switch_nic(void **state)
{
	struct devmemtcp_nic_rank r[16];
	char gpu[8][16], want[16];

	dgx(gpu);
	for (int k = 0; k < 8; k++) {
		static const unsigned int hb[8] = { 0x15, 0x37, 0x48, 0x59,
						    0x97, 0xb7, 0xc7, 0xd7 };
		int same = 0, other = 0;

		assert_int_equal(devmemtcp_nic_rank(ctx, gpu[k], r, 16), 8);
		snprintf(want, sizeof(want), "ibp%ds0", hb[k] + 4);
		assert_string_equal(r[0].ifname, want);
		snprintf(want, sizeof(want), "0000:%02x:00.0", hb[k] + 4);
		assert_string_equal(r[0].pci, want);
		assert_int_equal(r[0].distance, DEVMEMTCP_PCI_SAME_SWITCH);
		assert_int_equal(r[0].numa_node, k / 4);
		for (int i = 1; i < 8; i++) {
			assert_int_not_equal(r[i].distance, DEVMEMTCP_PCI_SAME_SWITCH);
			if (r[i].distance == DEVMEMTCP_PCI_SAME_NUMA) {
				assert_int_equal(r[i].numa_node, k / 4);
				assert_int_equal(other, 0);	/* nearer first */
				same++;
			} else {
				assert_int_equal(r[i].distance, DEVMEMTCP_PCI_OTHER);
				assert_int_equal(r[i].numa_node, 1 - k / 4);
				other++;
			}
		}
		assert_int_equal(same, 3);
		assert_int_equal(other, 4);
	}
	/* fewer slots than interfaces: the nearest, and the count */
	assert_int_equal(devmemtcp_nic_rank(ctx, gpu[5], r, 1), 8);
	assert_string_equal(r[0].ifname, "ibp187s0");
	assert_int_equal(devmemtcp_nic_rank(ctx, gpu[5], NULL, 0), 8);
}

static void test_two_sockets(void **state)
{
	struct devmemtcp_nic_rank r[8];

	assert_int_equal(sysfix_two_sockets(root), 0);

	assert_int_equal(devmemtcp_nic_rank(ctx, "0000:81:00.0", r, 8), 5);
	assert_string_equal(r[0].ifname, "enp129s0f1");
	assert_int_equal(r[0].distance, DEVMEMTCP_PCI_SAME_ROOT_PORT);
	assert_string_equal(r[1].ifname, "ens5f0");
	assert_int_equal(r[1].distance, DEVMEMTCP_PCI_SAME_NUMA);
	assert_int_equal(r[1].numa_node, 1);
	for (int i = 2; i < 5; i++)
		assert_int_equal(r[i].distance, DEVMEMTCP_PCI_OTHER);
	assert_string_equal(r[2].ifname, "ens1f0");
	assert_string_equal(r[3].ifname, "ens1f1");
	assert_string_equal(r[4].ifname, "eth0");
	assert_string_equal(r[4].pci, "0000:00:04.0");	/* virtio's PCI function */
	assert_int_equal(r[4].numa_node, 0);
	/* from socket 0's virtio function: the NIC of its socket first */
	assert_int_equal(devmemtcp_nic_rank(ctx, "0000:00:04.0", r, 8), 5);
	assert_string_equal(r[0].ifname, "eth0");
	assert_int_equal(r[0].distance, DEVMEMTCP_PCI_SAME_ROOT_PORT);
	assert_string_equal(r[1].ifname, "ens1f0");
	assert_int_equal(r[1].distance, DEVMEMTCP_PCI_SAME_NUMA);
}

static void test_errors(void **state)
{
	struct devmemtcp_nic_rank r[2];
	char want[256];

	/* ERRORS devmemtcp_nic_rank EINVAL */
	assert_int_equal(devmemtcp_nic_rank(ctx, "1b:00.0", r, 2), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_nic_rank: \"1b:00.0\" is not a PCI address: give the device's domain:bus:device.function, as \"0000:1b:00.0\" (lspci -D)");
	assert_int_equal(devmemtcp_nic_rank(ctx, "0000:1b:00.0", NULL, 2), -EINVAL);
	/* ERRORS devmemtcp_nic_rank ENODEV */
	assert_int_equal(devmemtcp_nic_rank(ctx, "0000:1b:00.0", r, 2), -ENODEV);
	snprintf(want, sizeof(want),
		 "devmemtcp_nic_rank: no PCI device 0000:1b:00.0 in %s/bus/pci/devices: check the address with lspci -D",
		 root);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx), want);
	/* ERRORS devmemtcp_nic_near_gpu EINVAL */
	assert_int_equal(devmemtcp_nic_near_gpu(ctx, -1, r, 2), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_nic_near_gpu: GPU -1: give a CUDA device ordinal (0, 1, ...)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_dgx_each_gpu_its_switch_nic, fresh),
		cmocka_unit_test_setup(test_two_sockets, fresh),
		cmocka_unit_test_setup(test_errors, fresh),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

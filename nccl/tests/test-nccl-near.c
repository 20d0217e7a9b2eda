// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Without NCCL_DEVMEMTCP_IFNAME the plugin keeps the interfaces nearest
 * the GPU whose CUDA context is current (dmtn_devices_near_gpu, through
 * devmemtcp_nic_near_gpu), on the synthetic sysfs trees of the library's
 * topology test (tests/unit/test-topo.c, $DEVMEMTCP_TEST_SYSFS): the
 * two-socket server without switches (a GPU on socket 1 with a function of
 * its card on its root port, a NIC on another root port of socket 1, a
 * two-port NIC and a virtio interface on socket 0).  The plugin's driver
 * and the library's is the fake CUDA driver (tests/lib/fakecuda): the
 * plugin's as libcuda.so.1 (its context is made current here), the
 * library's as $DEVMEMTCP_LIBCUDA, the same file, so one driver whose GPU
 * sits at $DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID.
 *   test-nccl-near LIBFAKECUDA
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devmemtcp.h"
#include "check.h"
#include "plugin.h"
#include "sysfsfixture.h"

static char root[64];
static char info[8][512];
static int ninfo;


static void capture(enum nccl_log_level level, unsigned long flags,
		    const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	(void)flags;
	(void)file;
	(void)line;
	if (level != NCCL_LOG_INFO || ninfo == 8)
		return;
	va_start(ap, fmt);
	vsnprintf(info[ninfo++], sizeof(info[0]), fmt, ap);
	va_end(ap);
}

/* A PCI function at devices/<chain> (tests/lib/sysfsfixture.h, as
 * test-topo.c makes them). */
static void pci(const char *chain, int numa)
{
	int ret = sysfix_pci(root, chain, numa);

	CHECK(!ret, "PCI function %s: %s", chain, strerror(-ret));
}

static void two_sockets(void)
{
	int ret = sysfix_two_sockets(root);

	CHECK(!ret, "the two-socket tree: %s", strerror(-ret));
	/* a second GPU's slot: socket 0, the two-port NIC's root port */
	pci("pci0000:00/0000:00:03.0/0000:03:00.0", 0);
}

/* The plugin's devices, as dmtn_devices_find would list them: names (and
 * a pci_path the plugin frees for those it leaves out). */
static int devices(struct dmtn_dev *d, const char *const *names)
{
	int n = 0;

	for (; names[n]; n++) {
		memset(&d[n], 0, sizeof(d[n]));
		snprintf(d[n].name, sizeof(d[n].name), "%s", names[n]);
		d[n].pci_path = strdup(names[n]);
	}
	return n;
}

/* The device list after the choice, "a b c". */
static const char *listed(const struct dmtn_dev *d, int n)
{
	static char out[256];

	out[0] = 0;
	for (int i = 0; i < n; i++)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? " " : "",
			 d[i].name);
	return out;
}

static void choose(const char *bus_id, const char *const *names, const char *want,
		   const char *want_info)
{
	struct dmtn_dev d[DMTN_MAX_DEVS];
	int n = devices(d, names), k;

	if (bus_id)
		setenv("DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID", bus_id, 1);
	else
		unsetenv("DEVMEMTCP_FAKE_CUDA_PCI_BUS_ID");
	ninfo = 0;
	k = dmtn_devices_near_gpu(d, n);
	CHECK(!strcmp(listed(d, k), want), "GPU at %s: devices \"%s\", want \"%s\"",
	      bus_id ? bus_id : "(none)", listed(d, k), want);
	/* the plugin's line last (the library's own message may come first) */
	CHECK(ninfo >= 1 && !strcmp(info[ninfo - 1], want_info),
	      "GPU at %s: %d INFO lines, the last \"%s\", want \"%s\"",
	      bus_id ? bus_id : "(none)", ninfo, ninfo ? info[ninfo - 1] : "", want_info);
	dmtn_devices_free(d, k);
}

int main(int argc, char **argv)
{
	static const char *const all[] = { "ens1f0", "ens1f1", "eth0", "ens5f0", "enp129s0f1",
					   "veth1", NULL };
	static const char *const virt[] = { "veth1", "dsim0", NULL };
	int (*init)(unsigned int), (*retain)(void **, int), (*push)(void *), (*pop)(void **);
	void *lib, *cctx;
	char cmd[128];

	if (argc != 2) {
		fprintf(stderr, "usage: test-nccl-near LIBFAKECUDA (tests/lib/fakecuda/libfakecuda.so)\n");
		return 2;
	}
	snprintf(root, sizeof(root), "/tmp/dmt-nccl-near-XXXXXX");
	if (!mkdtemp(root))
		return 1;
	setenv("DEVMEMTCP_TEST_SYSFS", root, 1);
	setenv("DEVMEMTCP_LIBCUDA", argv[1], 1);
	two_sockets();
	dmtn.log = capture;

	/* no CUDA context current: every interface */
	choose("0000:81:00.0", all, "ens1f0 ens1f1 eth0 ens5f0 enp129s0f1 veth1",
	       "NET/DevmemTCP: no NCCL_DEVMEMTCP_IFNAME and no CUDA context current: every interface is a device");

	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CHECK(lib, "libcuda.so.1 (the fake CUDA driver): %s", dlerror());
	if (!lib)
		return 1;
	*(void **)&init = dlsym(lib, "cuInit");
	*(void **)&retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
	*(void **)&push = dlsym(lib, "cuCtxPushCurrent_v2");
	*(void **)&pop = dlsym(lib, "cuCtxPopCurrent_v2");
	CHECK(init && retain && push && pop && !init(0) && !retain(&cctx, 0) && !push(cctx),
	      "the fake driver's context");

	/* the GPU on socket 1: the function of its card on its root port */
	choose("0000:81:00.0", all, "enp129s0f1",
	       "NET/DevmemTCP: no NCCL_DEVMEMTCP_IFNAME: GPU 0 (the current CUDA context's) is nearest to enp129s0f1 (below the same root port); 5 other interfaces left out");
	/* on socket 0, below the two-port NIC's root port: both ports */
	choose("0000:03:00.0", all, "ens1f0 ens1f1",
	       "NET/DevmemTCP: no NCCL_DEVMEMTCP_IFNAME: GPU 0 (the current CUDA context's) is nearest to ens1f0, ens1f1 (below the same root port); 4 other interfaces left out");
	/* the nearest of the interfaces found (the nearer one has no
	 * address, say): the same NUMA node's */
	choose("0000:81:00.0", (const char *const[]){ "ens1f0", "ens5f0", "eth0", NULL }, "ens5f0",
	       "NET/DevmemTCP: no NCCL_DEVMEMTCP_IFNAME: GPU 0 (the current CUDA context's) is nearest to ens5f0 (on the same NUMA node); 2 other interfaces left out");
	/* interfaces on no PCI device (veth, the emulated NICs): all */
	choose("0000:81:00.0", virt, "veth1 dsim0",
	       "NET/DevmemTCP: no NCCL_DEVMEMTCP_IFNAME: none of the interfaces is a PCI device, so none is known to be near GPU 0: every interface is a device");
	/* a GPU whose PCI address the driver does not give: all, and why */
	choose(NULL, all, "ens1f0 ens1f1 eth0 ens5f0 enp129s0f1 veth1",
	       "NET/DevmemTCP: no NCCL_DEVMEMTCP_IFNAME: the interfaces nearest GPU 0 are unknown, every interface is a device: cuDeviceGetPCIBusId failed: CUDA_ERROR_NOT_FOUND (fake-cuda error)");

	pop(&cctx);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd))
		failures++;
	printf("%s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}

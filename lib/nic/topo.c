// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The NIC nearest a device: network interfaces ranked by their PCIe
 * distance from a PCI function (a GPU), from sysfs.  A device's place is
 * the chain of PCI functions from its host bridge down to it, as the
 * resolved /sys/bus/pci/devices/ADDR link shows it
 * (/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0):
 * two devices whose chains share two or more functions below one host
 * bridge sit below one PCIe switch (a root port, then the switch's
 * upstream port); sharing only the first, below one root port; else the
 * NUMA nodes sysfs gives decide.  Test builds read another tree from
 * $DEVMEMTCP_TEST_SYSFS.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf/cuda.h"
#include "core/internal.h"
#include "core/testhooks.h"

#define MAX_DEPTH 16

struct place {
	char host[32];			/* "pci0000:15" */
	char chain[MAX_DEPTH][16];	/* PCI functions, root port first */
	int depth;
	int numa;
};

static const char *sysfs(void)
{
	const char *root = dmt_hook_env("DEVMEMTCP_TEST_SYSFS");

	return root && *root ? root : "/sys";
}

/* "0000:1b:00.0" */
static bool is_bdf(const char *s)
{
	unsigned int d, b, v, f;
	char end;

	return strlen(s) == 12 &&
	       sscanf(s, "%4x:%2x:%2x.%1x%c", &d, &b, &v, &f, &end) == 4;
}

static int read_numa(const char *bdf)
{
	char path[PATH_MAX];
	FILE *f;
	int n = -1;

	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node", sysfs(), bdf);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &n) != 1)
		n = -1;
	fclose(f);
	return n < 0 ? -1 : n;
}

/* The place of the device whose sysfs link is path: its chain up to the
 * last PCI function on the way (a virtio device's PCI function, say).
 * 0, or -ENODEV when path does not lead to a PCI device. */
static int place_of(const char *path, struct place *p)
{
	char real[PATH_MAX], *save = NULL, *c;
	bool in = false;

	memset(p, 0, sizeof(*p));
	if (!realpath(path, real))
		return -ENODEV;
	for (c = strtok_r(real, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!in) {
			if (!strncmp(c, "pci", 3) && strchr(c, ':')) {
				snprintf(p->host, sizeof(p->host), "%s", c);
				in = true;
			}
			continue;
		}
		if (!is_bdf(c) || p->depth == MAX_DEPTH)
			break;
		snprintf(p->chain[p->depth++], sizeof(p->chain[0]), "%s", c);
	}
	if (!p->depth)
		return -ENODEV;
	p->numa = read_numa(p->chain[p->depth - 1]);
	return 0;
}

static int common(const struct place *a, const struct place *b)
{
	int n = 0;

	if (strcmp(a->host, b->host))
		return 0;
	while (n < a->depth && n < b->depth && !strcmp(a->chain[n], b->chain[n]))
		n++;
	return n;
}

static int distance(const struct place *dev, const struct place *nic, int shared)
{
	if (shared >= 2)
		return DEVMEMTCP_PCI_SAME_SWITCH;
	if (shared == 1)
		return DEVMEMTCP_PCI_SAME_ROOT_PORT;
	return dev->numa == nic->numa ? DEVMEMTCP_PCI_SAME_NUMA : DEVMEMTCP_PCI_OTHER;
}

struct ranked {
	struct devmemtcp_nic_rank r;
	int shared;
};

static int rank_cmp(const void *x, const void *y)
{
	const struct ranked *a = x, *b = y;

	if (a->r.distance != b->r.distance)
		return a->r.distance - b->r.distance;
	if (a->shared != b->shared)
		return b->shared - a->shared;
	return strcmp(a->r.ifname, b->r.ifname);
}

static int rank_impl(struct devmemtcp_ctx *ctx, const char *pci_dev,
		     struct devmemtcp_nic_rank *ranks, size_t max)
{
	struct ranked *all = NULL;
	size_t n = 0, cap = 0;
	char path[PATH_MAX];
	struct place dev;
	struct dirent *e;
	DIR *d;

	if (!ctx)
		return dmt_err(NULL, NULL, -EINVAL, "devmemtcp_nic_rank: ctx is NULL");
	if (!pci_dev || !is_bdf(pci_dev))
		return dmt_ctx_err(ctx, -EINVAL,
				   "devmemtcp_nic_rank: \"%s\" is not a PCI address: give the device's domain:bus:device.function, as \"0000:1b:00.0\" (lspci -D)",
				   pci_dev ? pci_dev : "(null)");
	if (max && !ranks)
		return dmt_ctx_err(ctx, -EINVAL, "devmemtcp_nic_rank: ranks is NULL with max > 0");
	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", sysfs(), pci_dev);
	if (place_of(path, &dev))
		return dmt_ctx_err(ctx, -ENODEV,
				   "devmemtcp_nic_rank: no PCI device %s in %s/bus/pci/devices: check the address with lspci -D",
				   pci_dev, sysfs());
	snprintf(path, sizeof(path), "%s/class/net", sysfs());
	d = opendir(path);
	if (!d)
		return dmt_ctx_err(ctx, -ENOENT, "devmemtcp_nic_rank: cannot read %s: %s",
				   path, strerror(errno));
	while ((e = readdir(d))) {
		struct place nic;
		struct ranked *r;

		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(all->r.ifname))
			continue;
		snprintf(path, sizeof(path), "%s/class/net/%s/device", sysfs(), e->d_name);
		if (place_of(path, &nic))
			continue;	/* not on PCI: lo, veth, bridges */
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct ranked *m = realloc(all, ncap * sizeof(*all));

			if (!m) {
				free(all);
				closedir(d);
				return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_nic_rank");
			}
			all = m;
			cap = ncap;
		}
		r = &all[n++];
		memset(r, 0, sizeof(*r));
		memcpy(r->r.ifname, e->d_name, strlen(e->d_name));	/* < 16, NUL from memset */
		snprintf(r->r.pci, sizeof(r->r.pci), "%s", nic.chain[nic.depth - 1]);
		r->shared = common(&dev, &nic);
		r->r.distance = distance(&dev, &nic, r->shared);
		r->r.numa_node = nic.numa;
	}
	closedir(d);
	if (n)
		qsort(all, n, sizeof(*all), rank_cmp);
	for (size_t i = 0; i < n && i < max; i++)
		ranks[i] = all[i].r;
	free(all);
	return n > INT_MAX ? INT_MAX : (int)n;
}

DEVMEMTCP_EXPORT int devmemtcp_nic_rank(struct devmemtcp_ctx *ctx, const char *pci_dev,
					struct devmemtcp_nic_rank *ranks, size_t max)
{
	DMT_KEEP_ERRNO;
	return rank_impl(ctx, pci_dev, ranks, max);
}

DEVMEMTCP_EXPORT int devmemtcp_nic_near_gpu(struct devmemtcp_ctx *ctx, int gpu,
					    struct devmemtcp_nic_rank *ranks, size_t max)
{
	DMT_KEEP_ERRNO;
	const struct dmt_cuda *cu;
	char id[32], bdf[16];
	unsigned int dom, bus, dev, fn;
	CUdevice d;
	CUresult r;
	int ret;

	if (!ctx)
		return dmt_err(NULL, NULL, -EINVAL, "devmemtcp_nic_near_gpu: ctx is NULL");
	if (gpu < 0)
		return dmt_ctx_err(ctx, -EINVAL,
				   "devmemtcp_nic_near_gpu: GPU %d: give a CUDA device ordinal (0, 1, ...)", gpu);
	cu = dmt_cuda_get(ctx, &ctx->err, &ret);
	if (!cu)
		return ret;
	if (!cu->cuDeviceGetPCIBusId)
		return dmt_ctx_err(ctx, -EOPNOTSUPP,
				   "devmemtcp_nic_near_gpu: this CUDA driver has no cuDeviceGetPCIBusId: give the GPU's PCI address to devmemtcp_nic_rank() (nvidia-smi --query-gpu=pci.bus_id --format=csv)");
	r = cu->cuDeviceGet(&d, gpu);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(ctx, &ctx->err, r, "cuDeviceGet",
				    ": no such CUDA device (nvidia-smi -L lists them; CUDA_VISIBLE_DEVICES renumbers them)");
	r = cu->cuDeviceGetPCIBusId(id, sizeof(id), d);
	if (r != CUDA_SUCCESS)
		return dmt_cuda_err(ctx, &ctx->err, r, "cuDeviceGetPCIBusId", NULL);
	if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
		return dmt_ctx_err(ctx, -EPROTO,
				   "devmemtcp_nic_near_gpu: CUDA gave \"%s\" as GPU %d's PCI address, which is not domain:bus:device.function",
				   id, gpu);
	snprintf(bdf, sizeof(bdf), "%04x:%02x:%02x.%x", dom & 0xffff, bus & 0xff,
		 dev & 0x1f, fn & 7);
	return rank_impl(ctx, bdf, ranks, max);
}

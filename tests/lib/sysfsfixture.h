/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Test toolkit: synthetic sysfs trees for the PCIe topology functions
 * (devmemtcp_nic_rank, devmemtcp_nic_near_gpu; the library reads them at
 * $DEVMEMTCP_TEST_SYSFS in test builds).  A PCI function lives at
 * ROOT/devices/<chain> (host bridge first, '/'-separated, the function
 * last) with its numa_node and its ROOT/bus/pci/devices link; an interface
 * at ROOT/class/net/<ifname>, its device link pointing at a chain.  Each
 * returns 0 or a negative errno; the tests assert it their own way.
 */
#ifndef DMT_TEST_SYSFSFIXTURE_H
#define DMT_TEST_SYSFSFIXTURE_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p path */
static inline int sysfix_mkdirs(const char *path)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0755) && errno != EEXIST)
				return -errno;
			*s = '/';
		}
	return mkdir(p, 0755) && errno != EEXIST ? -errno : 0;
}

/* The PCI function at ROOT/devices/<chain> on NUMA node numa. */
static inline int sysfix_pci(const char *root, const char *chain, int numa)
{
	char dir[PATH_MAX], link[PATH_MAX], f[PATH_MAX + 16];
	const char *bdf = strrchr(chain, '/');
	FILE *fp;
	int ret;

	if (!bdf)
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%s/devices/%s", root, chain);
	snprintf(link, sizeof(link), "%s/bus/pci/devices", root);
	ret = sysfix_mkdirs(dir);
	if (!ret)
		ret = sysfix_mkdirs(link);
	if (ret)
		return ret;
	snprintf(f, sizeof(f), "%s/numa_node", dir);
	fp = fopen(f, "w");
	if (!fp)
		return -errno;
	fprintf(fp, "%d\n", numa);
	if (fclose(fp))
		return -EIO;
	snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", root, bdf + 1);
	return symlink(dir, link) ? -errno : 0;
}

/* Interface ifname, its device ROOT/devices/<chain> (NULL or "": none). */
static inline int sysfix_net(const char *root, const char *ifname, const char *chain)
{
	char dir[PATH_MAX], link[PATH_MAX + 16], target[PATH_MAX];
	int ret;

	snprintf(dir, sizeof(dir), "%s/class/net/%s", root, ifname);
	ret = sysfix_mkdirs(dir);
	if (ret || !chain || !*chain)
		return ret;
	snprintf(target, sizeof(target), "%s/devices/%s", root, chain);
	ret = sysfix_mkdirs(target);
	if (ret)
		return ret;
	snprintf(link, sizeof(link), "%s/device", dir);
	return symlink(target, link) ? -errno : 0;
}

/*
 * Two sockets (test-topo, test-nccl-near): on socket 1 a GPU at
 * 0000:81:00.0 on a root port, a function of its card beside it
 * (enp129s0f1), a NIC on another root port (ens5f0); on socket 0 a
 * two-port NIC (ens1f0, ens1f1) and a virtio interface (eth0); lo.
 */
static inline int sysfix_two_sockets(const char *root)
{
	static const struct {
		const char *ifname;	/* NULL: a PCI function */
		const char *chain;
		int numa;
	} t[] = {
		{ NULL, "pci0000:80/0000:80:02.0/0000:81:00.0", 1 },	/* the GPU */
		{ NULL, "pci0000:80/0000:80:02.0/0000:81:00.1", 1 },
		{ "enp129s0f1", "pci0000:80/0000:80:02.0/0000:81:00.1", 1 },
		{ NULL, "pci0000:80/0000:80:03.0/0000:82:00.0", 1 },
		{ "ens5f0", "pci0000:80/0000:80:03.0/0000:82:00.0", 1 },
		{ NULL, "pci0000:00/0000:00:03.0/0000:02:00.0", 0 },
		{ NULL, "pci0000:00/0000:00:03.0/0000:02:00.1", 0 },
		{ "ens1f0", "pci0000:00/0000:00:03.0/0000:02:00.0", 0 },
		{ "ens1f1", "pci0000:00/0000:00:03.0/0000:02:00.1", 0 },
		{ NULL, "pci0000:00/0000:00:04.0", 0 },
		{ "eth0", "pci0000:00/0000:00:04.0/virtio1", 0 },
		{ "lo", "", 0 },
	};
	int ret = 0;

	for (size_t i = 0; !ret && i < sizeof(t) / sizeof(t[0]); i++)
		ret = t[i].ifname ? sysfix_net(root, t[i].ifname, t[i].chain)
				  : sysfix_pci(root, t[i].chain, t[i].numa);
	return ret;
}

#endif

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Environment knobs (NCCL style, NCCL_DEVMEMTCP_*) and the devices: one per
 * network interface that is up, has an address and matches the interface
 * list.  Variables are read with secure_getenv(): a training launcher may
 * run with file capabilities (CAP_NET_ADMIN for devmem setup).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "plugin.h"

static int env_bool(const char *name, bool def, bool *out)
{
	const char *v = secure_getenv(name);

	*out = def;
	if (!v || !*v)
		return 0;
	if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true")) {
		*out = true;
		return 0;
	}
	if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false")) {
		*out = false;
		return 0;
	}
	DMTN_WARN("%s=%s: use 1 or 0", name, v);
	return -EINVAL;
}

/* A byte count or number with an optional K, M or G suffix (powers of 2). */
static int env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max,
		   uint64_t *out)
{
	const char *v = secure_getenv(name);
	unsigned long long n;
	char *end;

	*out = def;
	if (!v || !*v)
		return 0;
	errno = 0;
	n = strtoull(v, &end, 0);
	switch (*end) {
	case 'k': case 'K': n <<= 10; end++; break;
	case 'm': case 'M': n <<= 20; end++; break;
	case 'g': case 'G': n <<= 30; end++; break;
	}
	if (errno || *end || v[0] == '-' || n < min || n > max) {
		DMTN_WARN("%s=%s: expected a number from %llu to %llu (K, M, G suffixes allowed)",
			  name, v, (unsigned long long)min,
			  (unsigned long long)max);
		return -EINVAL;
	}
	*out = n;
	return 0;
}

static int env_mem(enum dmtn_mem *out)
{
	const char *v = secure_getenv("NCCL_DEVMEMTCP_MEM");

	*out = DMTN_MEM_AUTO;
	if (!v || !*v || !strcasecmp(v, "auto"))
		return 0;
	if (!strcasecmp(v, "host")) {
		*out = DMTN_MEM_HOST;
		return 0;
	}
	if (!strcasecmp(v, "cuda")) {
		*out = DMTN_MEM_CUDA;
		return 0;
	}
	DMTN_WARN("NCCL_DEVMEMTCP_MEM=%s: use auto, host or cuda", v);
	return -EINVAL;
}

static int env_family(int *out)
{
	const char *v = secure_getenv("NCCL_DEVMEMTCP_FAMILY");

	*out = 0;
	if (!v || !*v)
		return 0;
	if (!strcasecmp(v, "AF_INET") || !strcmp(v, "4")) {
		*out = AF_INET;
		return 0;
	}
	if (!strcasecmp(v, "AF_INET6") || !strcmp(v, "6")) {
		*out = AF_INET6;
		return 0;
	}
	DMTN_WARN("NCCL_DEVMEMTCP_FAMILY=%s: use AF_INET or AF_INET6", v);
	return -EINVAL;
}

/* "LO-HI": the data ports listen may use (a devmemtcp-broker policy allows
 * flows to some ports only); unset: any. */
static int env_ports(uint16_t *lo, uint16_t *hi)
{
	const char *v = secure_getenv("NCCL_DEVMEMTCP_PORT_RANGE");
	unsigned long a, b;
	char *end;

	*lo = *hi = 0;
	if (!v || !*v)
		return 0;
	errno = 0;
	a = strtoul(v, &end, 10);
	if (!errno && *end == '-' && end != v) {
		const char *p = end + 1;

		b = strtoul(p, &end, 10);
		if (!errno && !*end && end != p && a >= 1 && a <= b && b <= 65535 &&
		    isdigit((unsigned char)*v) && isdigit((unsigned char)*p)) {
			*lo = (uint16_t)a;
			*hi = (uint16_t)b;
			return 0;
		}
	}
	DMTN_WARN("NCCL_DEVMEMTCP_PORT_RANGE=%s: use LO-HI, two port numbers from 1 to 65535, LO not above HI",
		  v);
	return -EINVAL;
}

int dmtn_cfg_read(struct dmtn_cfg *cfg)
{
	const char *ifname = secure_getenv("NCCL_DEVMEMTCP_IFNAME");
	uint64_t nq, mr;
	int ret = 0;

	memset(cfg, 0, sizeof(*cfg));
	ret |= env_bool("NCCL_DEVMEMTCP_ENABLE", false, &cfg->devmem);
	ret |= env_bool("NCCL_DEVMEMTCP_RX", true, &cfg->rx);
	ret |= env_bool("NCCL_DEVMEMTCP_TX", true, &cfg->tx);
	ret |= env_bool("NCCL_DEVMEMTCP_CUDA_PTR", false, &cfg->cuda_ptr);
	ret |= env_bool("NCCL_DEVMEMTCP_RECOVER", true, &cfg->recover);
	ret |= env_bool("NCCL_DEVMEMTCP_UNPACK", false, &cfg->unpack);
	ret |= env_bool("NCCL_DEVMEMTCP_THREADS", true, &cfg->threads);
	ret |= env_u64("NCCL_DEVMEMTCP_NQUEUES", 1, 1, 64, &nq);
	ret |= env_u64("NCCL_DEVMEMTCP_BUFFER_SIZE", 64ull << 20, 1ull << 20,
		       1ull << 40, &cfg->buf_size);
	ret |= env_u64("NCCL_DEVMEMTCP_LINEAR_SIZE", 1ull << 20, 4096,
		       1ull << 30, &cfg->linear_size);
	ret |= env_u64("NCCL_DEVMEMTCP_MAX_RECVS", DMTN_MAX_RECVS, 1,
		       DMTN_MAX_RECVS, &mr);
	ret |= env_mem(&cfg->mem);
	ret |= env_family(&cfg->family);
	ret |= env_ports(&cfg->port_lo, &cfg->port_hi);
	if (ifname) {
		if (strlen(ifname) >= sizeof(cfg->ifname)) {
			DMTN_WARN("NCCL_DEVMEMTCP_IFNAME is longer than %zu characters",
				  sizeof(cfg->ifname) - 1);
			ret = -EINVAL;
		} else {
			strcpy(cfg->ifname, ifname);
		}
	}
	/* devmemtcp_nic_open always undoes what a dead process left on the
	 * interface (DEVMEMTCP_NIC_RECOVER changes nothing): say so rather
	 * than let 0 look obeyed */
	if (!ret && !cfg->recover)
		DMTN_WARN("NCCL_DEVMEMTCP_RECOVER=0 changes nothing: devmemtcp_nic_open always undoes what a dead process left on an interface before setting it up; unset it");
	cfg->nqueues = (uint32_t)nq;
	cfg->max_recvs = (int)mr;
	return ret ? -EINVAL : 0;
}

/*
 * The syntax of NCCL_SOCKET_IFNAME: comma-separated entries, each a name
 * prefix, or an exact name after '='; a leading '^' makes the whole list
 * one of interfaces to leave out.
 */
bool dmtn_ifname_match(const char *list, const char *name)
{
	bool exclude = false, exact = false, hit = false;
	const char *p = list;

	if (*p == '^') {
		exclude = true;
		p++;
	}
	if (*p == '=') {
		exact = true;
		p++;
	}
	while (*p && !hit) {
		size_t len = strcspn(p, ",");

		if (len && (exact ? strlen(name) == len && !strncmp(p, name, len)
				  : !strncmp(p, name, len)))
			hit = true;
		p += len;
		if (*p == ',')
			p++;
	}
	return exclude ? !hit : hit;
}

static bool default_interface(const char *name, bool allow_lo)
{
	if (!strncmp(name, "lo", 2))
		return allow_lo;
	return strncmp(name, "docker", 6) && strncmp(name, "virbr", 5);
}

static bool usable_addr(const struct ifaddrs *ifa, int family)
{
	const struct sockaddr_in6 *s6;

	if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP))
		return false;
	if (ifa->ifa_addr->sa_family != AF_INET &&
	    ifa->ifa_addr->sa_family != AF_INET6)
		return false;
	if (family && ifa->ifa_addr->sa_family != family)
		return false;
	if (ifa->ifa_addr->sa_family == AF_INET6) {
		s6 = (const struct sockaddr_in6 *)ifa->ifa_addr;
		if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
			return false;
	}
	return true;
}

/* Is the sysfs device directory dir a PCI device? */
static bool is_pci(const char *dir)
{
	char link[PATH_MAX], target[PATH_MAX];
	ssize_t n;

	if ((size_t)snprintf(link, sizeof(link), "%s/subsystem", dir) >= sizeof(link))
		return false;
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = 0;
	n = (ssize_t)strlen(target);
	return n >= 8 && !strcmp(target + n - 8, "/bus/pci");
}

/*
 * The PCI device an interface sits on, for NCCL's topology (which pairs
 * GPUs with the NICs nearest them): the interface's device, or its closest
 * PCI ancestor (a virtio NIC's device is the virtio device on a PCI one);
 * NULL for interfaces on no PCI device (veth, a platform device), which
 * NCCL attaches to the CPU.
 */
char *dmtn_pci_path(const char *ifname)
{
	char path[PATH_MAX];
	char *p, *slash;

	snprintf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
	p = realpath(path, NULL);
	while (p && strncmp(p, "/sys/devices/", 13) == 0) {
		if (is_pci(p))
			return p;
		slash = strrchr(p, '/');
		*slash = 0;
	}
	free(p);
	return NULL;
}

static void dev_fill(struct dmtn_dev *d, const struct ifaddrs *ifa)
{
	char path[PATH_MAX];
	FILE *f;

	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", ifa->ifa_name);
	d->ifindex = (int)if_nametoindex(ifa->ifa_name);
	d->addrlen = ifa->ifa_addr->sa_family == AF_INET
			     ? sizeof(struct sockaddr_in)
			     : sizeof(struct sockaddr_in6);
	memcpy(&d->addr, ifa->ifa_addr, d->addrlen);
	d->pci_path = dmtn_pci_path(d->name);
	d->speed = 10000;	/* virtual interfaces report none */
	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", d->name);
	f = fopen(path, "re");
	if (f) {
		int s;

		if (fscanf(f, "%d", &s) == 1 && s > 0)
			d->speed = s;
		fclose(f);
	}
}

static int find_pass(const struct dmtn_cfg *cfg, struct ifaddrs *all,
		     struct dmtn_dev *devs, int max, int family, bool allow_lo)
{
	int n = 0;

	for (struct ifaddrs *ifa = all; ifa && n < max; ifa = ifa->ifa_next) {
		bool seen = false;

		if (!usable_addr(ifa, family))
			continue;
		if (cfg->ifname[0] ? !dmtn_ifname_match(cfg->ifname, ifa->ifa_name)
				   : !default_interface(ifa->ifa_name, allow_lo))
			continue;
		for (int i = 0; i < n; i++)
			seen |= !strcmp(devs[i].name, ifa->ifa_name);
		if (!seen)
			dev_fill(&devs[n++], ifa);
	}
	return n;
}

int dmtn_devices_find(const struct dmtn_cfg *cfg, struct dmtn_dev *devs,
		      int max)
{
	struct ifaddrs *all;
	int n;

	if (getifaddrs(&all)) {
		DMTN_WARN("getifaddrs: %s", strerror(errno));
		return -errno;
	}
	/* IPv4 first, as NCCL's socket transport does, unless told */
	n = find_pass(cfg, all, devs, max, cfg->family ? cfg->family : AF_INET,
		      false);
	if (!n && !cfg->family)
		n = find_pass(cfg, all, devs, max, AF_INET6, false);
	if (!n && !cfg->ifname[0])
		n = find_pass(cfg, all, devs, max, cfg->family, true);
	freeifaddrs(all);
	return n;
}

void dmtn_devices_free(struct dmtn_dev *devs, int n)
{
	for (int i = 0; i < n; i++) {
		free(devs[i].pci_path);
		devs[i].pci_path = NULL;
	}
}

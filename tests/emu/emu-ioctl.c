// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The emulated NIC's ioctls and files: SIOCETHTOOL for the driver info,
 * RSS (and RSS contexts) and ntuple rules as the simulated NIC and the
 * kernel's ethtool core answer them; /dev/udmabuf where the machine has
 * none (the dma-buf is the memfd itself, DMA_BUF_IOCTL_SYNC a no-op on
 * it); the sim's module parameters (/sys/module/devmemsim/parameters) and
 * fault knobs (/sys/kernel/debug/devmemsim/IF/) as files.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "emu.h"
#include "uapi.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif
/* include/uapi/linux/udmabuf.h: _IOW('u', 0x43, struct udmabuf_create_list) */
#define UDMABUF_CREATE_LIST_ 0x40087543
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/* ---- ethtool ioctls ---------------------------------------------------------- */

static int rxnfc_get(struct emu_nic *n, struct ethtool_rxnfc *info)
{
	uint32_t cnt = 0;

	switch (info->cmd) {
	case ETHTOOL_GRXRINGS:
		info->data = n->nq;
		return 0;
	case ETHTOOL_GRXCLSRLCNT:
		info->rule_cnt = n->nrules;
		info->data = EMU_MAX_RULES | RX_CLS_LOC_SPECIAL;
		return 0;
	case ETHTOOL_GRXCLSRULE:
		if (info->fs.location >= EMU_MAX_RULES)
			return -EINVAL;
		if (!n->rules[info->fs.location].used)
			return -ENOENT;
		info->fs = n->rules[info->fs.location].fs;
		if (info->fs.flow_type & FLOW_RSS)
			info->rss_context = n->rules[info->fs.location].rss_ctx;
		return 0;
	case ETHTOOL_GRXCLSRLALL:
		info->data = EMU_MAX_RULES;
		for (uint32_t i = 0; i < EMU_MAX_RULES; i++) {
			if (!n->rules[i].used)
				continue;
			if (cnt >= info->rule_cnt)
				return -EMSGSIZE;
			info->rule_locs[cnt++] = i;
		}
		info->rule_cnt = cnt;
		return 0;
	}
	return 1;
}

/* The sim's dsim_check_fs and the core's checks of an inserted rule. */
static int rule_check(struct emu_nic *n, const struct ethtool_rxnfc *info)
{
	const struct ethtool_rx_flow_spec *fs = &info->fs;
	uint32_t type = fs->flow_type & ~(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS);
	static const uint8_t zero[sizeof(struct ethtool_flow_ext)];

	switch (type) {
	case TCP_V4_FLOW:
	case UDP_V4_FLOW:
	case TCP_V6_FLOW:
	case UDP_V6_FLOW:
	case IP_USER_FLOW:
	case IPV6_USER_FLOW:
		break;
	default:
		return -EOPNOTSUPP;
	}
	if ((fs->flow_type & (FLOW_EXT | FLOW_MAC_EXT)) &&
	    memcmp(&fs->m_ext, zero, sizeof(zero)))
		return -EOPNOTSUPP;
	if ((fs->flow_type & FLOW_RSS) &&
	    (info->rss_context >= EMU_MAX_CTX ||
	     (info->rss_context && !n->ctx_used[info->rss_context])))
		return -EINVAL;	/* the core: no such context */
	if (fs->ring_cookie == RX_CLS_FLOW_DISC)
		return 0;
	if (ethtool_get_flow_spec_ring_vf(fs->ring_cookie))
		return -EINVAL;
	if (ethtool_get_flow_spec_ring(fs->ring_cookie) >= n->nq)
		return -EINVAL;
	return 0;
}

static int rule_insert(struct emu_nic *n, struct ethtool_rxnfc *info)
{
	uint32_t loc = info->fs.location;
	int err;

	if (!n->ntuple)
		return -EOPNOTSUPP;
	err = rule_check(n, info);
	if (err)
		return err;
	if (loc == RX_CLS_LOC_ANY || loc == RX_CLS_LOC_FIRST) {
		for (loc = 0; loc < EMU_MAX_RULES && n->rules[loc].used; loc++)
			;
	} else if (loc == RX_CLS_LOC_LAST) {
		for (loc = EMU_MAX_RULES; loc-- > 0 && n->rules[loc].used;)
			;
		if (loc == UINT32_MAX)
			loc = EMU_MAX_RULES;
	}
	if (loc >= EMU_MAX_RULES)
		return info->fs.location >= RX_CLS_LOC_LAST ? -ENOSPC : -EINVAL;
	if (!n->rules[loc].used)
		n->nrules++;
	n->rules[loc].used = 1;
	n->rules[loc].fs = info->fs;
	n->rules[loc].fs.location = loc;
	n->rules[loc].rss_ctx = (info->fs.flow_type & FLOW_RSS) ? info->rss_context : 0;
	info->fs.location = loc;
	return 0;
}

static bool ctx_in_use(const struct emu_nic *n, uint32_t ctx)
{
	for (int i = 0; i < EMU_MAX_RULES; i++)
		if (n->rules[i].used && (n->rules[i].fs.flow_type & FLOW_RSS) &&
		    n->rules[i].rss_ctx == ctx)
			return true;
	return false;
}

/* ETHTOOL_GRSSH (the core's ethtool_get_rxfh). */
static int rssh_get(struct emu_nic *n, struct ethtool_rxfh *rxfh)
{
	uint32_t ui = rxfh->indir_size, uk = rxfh->key_size, ctx = rxfh->rss_context;

	if (rxfh->rsvd8[1] || rxfh->rsvd32)
		return -EINVAL;
	rxfh->indir_size = EMU_INDIR;
	rxfh->key_size = EMU_KEY;
	rxfh->hfunc = EMU_RSS_HASH_TOP;
	rxfh->rsvd8[0] = 0;	/* input_xfrm */
	if ((ui && ui != EMU_INDIR) || (uk && uk != EMU_KEY))
		return -EINVAL;
	if (ctx && (ctx >= EMU_MAX_CTX || !n->ctx_used[ctx]))
		return -ENOENT;
	if (ui)
		memcpy(rxfh->rss_config, ctx ? n->ctx_indir[ctx] : n->indir, sizeof(n->indir));
	if (uk)
		memcpy((uint8_t *)rxfh->rss_config + ui * 4, n->key, EMU_KEY);
	return 0;
}

/* ETHTOOL_SRSSH (ethtool_set_rxfh and the sim's context ops): indir_size
 * 0 resets the default table, or deletes a context; rss_context
 * ETH_RXFH_CONTEXT_ALLOC creates one (its id written back). */
static int rssh_set(struct emu_nic *n, struct ethtool_rxfh *rxfh)
{
	uint32_t ni = rxfh->indir_size, ctx = rxfh->rss_context;
	bool create = ctx == ETH_RXFH_CONTEXT_ALLOC;
	const uint32_t *in = rxfh->rss_config;

	if (rxfh->rsvd8[1] || rxfh->rsvd32)
		return -EINVAL;
	if (rxfh->rsvd8[0] != 0xff && rxfh->rsvd8[0] != 0)
		return emu_unmodelled("ETHTOOL_SRSSH with input_xfrm %u on %s",
				      rxfh->rsvd8[0], n->ifname);
	if (rxfh->hfunc && rxfh->hfunc != EMU_RSS_HASH_TOP)
		return -EOPNOTSUPP;	/* "only the Toeplitz hash is supported" */
	if ((ni != ETH_RXFH_INDIR_NO_CHANGE && ni && ni != EMU_INDIR) ||
	    (rxfh->key_size && rxfh->key_size != EMU_KEY))
		return -EINVAL;
	if (rxfh->key_size && (ctx || create))
		return -EOPNOTSUPP;	/* "RSS contexts share the device key" */
	if (ni == EMU_INDIR)
		for (uint32_t i = 0; i < EMU_INDIR; i++)
			if (in[i] >= n->nq)
				return -EINVAL;
	if (create) {
		for (ctx = 1; ctx < EMU_MAX_CTX && n->ctx_used[ctx]; ctx++)
			;
		if (ctx >= EMU_MAX_CTX)
			return -EBUSY;
		if (ni == EMU_INDIR)
			memcpy(n->ctx_indir[ctx], in, sizeof(n->indir));
		else
			emu_fill_indir(n->ctx_indir[ctx], n->nq);
		n->ctx_used[ctx] = 1;
		rxfh->rss_context = ctx;
		return 0;
	}
	if (ctx) {
		if (ctx >= EMU_MAX_CTX || !n->ctx_used[ctx])
			return -ENOENT;
		if (!ni) {
			if (ctx_in_use(n, ctx))
				return -EBUSY;	/* "RSS context is used by an ntuple rule" */
			n->ctx_used[ctx] = 0;
			return 0;
		}
		if (ni == EMU_INDIR)
			memcpy(n->ctx_indir[ctx], in, sizeof(n->indir));
		return 0;
	}
	if (!ni) {
		emu_fill_indir(n->indir, n->nq);
		n->rxfh_configured = 0;
	} else if (ni == EMU_INDIR) {
		memcpy(n->indir, in, sizeof(n->indir));
		n->rxfh_configured = 1;
	}
	if (rxfh->key_size)
		memcpy(n->key, (uint8_t *)in + (ni == EMU_INDIR ? EMU_INDIR * 4 : 0), EMU_KEY);
	return 0;
}

static int ethtool_ioctl(int fd, struct ifreq *ifr, int *ret)
{
	uint32_t cmd;
	int nic, err = 0;
	struct emu_nic *n;
	char name[IFNAMSIZ + 1];

	memcpy(name, ifr->ifr_name, IFNAMSIZ);
	name[IFNAMSIZ] = 0;
	nic = emu_nic_by_name(emu_fd_netns(fd), name);
	if (nic < 0)
		return 0;
	n = &emu_sh->nics[nic];
	memcpy(&cmd, ifr->ifr_data, sizeof(cmd));
	switch (cmd) {
	case ETHTOOL_GDRVINFO: {
		struct ethtool_drvinfo *di = (void *)ifr->ifr_data;

		memset(di, 0, sizeof(*di));
		di->cmd = cmd;
		snprintf(di->driver, sizeof(di->driver), "devmemsim");
		snprintf(di->version, sizeof(di->version), "emu");
		snprintf(di->bus_info, sizeof(di->bus_info), "devmemtcp-emu.%d", nic);
		break;
	}
	case ETHTOOL_GLINK: {
		struct ethtool_value *v = (void *)ifr->ifr_data;

		v->data = 1;
		break;
	}
	case ETHTOOL_GCHANNELS: {
		struct ethtool_channels *c = (void *)ifr->ifr_data;

		memset(c, 0, sizeof(*c));
		c->cmd = cmd;
		c->max_combined = n->nq;
		c->combined_count = n->nq;
		break;
	}
	case ETHTOOL_GRXRINGS:
	case ETHTOOL_GRXCLSRLCNT:
	case ETHTOOL_GRXCLSRULE:
	case ETHTOOL_GRXCLSRLALL:
		emu_lock();
		err = rxnfc_get(n, (void *)ifr->ifr_data);
		emu_unlock();
		break;
	case ETHTOOL_SRXCLSRLINS:
	case ETHTOOL_SRXCLSRLDEL: {
		struct ethtool_rxnfc *info = (void *)ifr->ifr_data;

		if (!emu_cap_net_admin()) {
			err = -EPERM;
			break;
		}
		emu_lock();
		if (cmd == ETHTOOL_SRXCLSRLINS) {
			err = rule_insert(n, info);
		} else if (info->fs.location >= EMU_MAX_RULES) {
			err = -EINVAL;
		} else if (!n->rules[info->fs.location].used) {
			err = -ENOENT;
		} else {
			memset(&n->rules[info->fs.location], 0, sizeof(n->rules[0]));
			n->nrules--;
		}
		emu_unlock();
		break;
	}
	case ETHTOOL_GRSSH:
		emu_lock();
		err = rssh_get(n, (void *)ifr->ifr_data);
		emu_unlock();
		break;
	case ETHTOOL_SRSSH:
		if (!emu_cap_net_admin()) {
			err = -EPERM;
			break;
		}
		emu_lock();
		err = rssh_set(n, (void *)ifr->ifr_data);
		emu_unlock();
		break;
	default:
		err = emu_unmodelled("SIOCETHTOOL command %#x on %s", cmd, n->ifname);
	}
	if (err > 0)
		err = emu_unmodelled("SIOCETHTOOL command %#x on %s", cmd, n->ifname);
	if (err < 0) {
		errno = -err;
		*ret = -1;
	} else {
		*ret = 0;
	}
	return 1;
}

/* ---- udmabuf --------------------------------------------------------------------- */

#define MAX_DEVFD 64

static pthread_mutex_t ud_lock = PTHREAD_MUTEX_INITIALIZER;
static int devfds[MAX_DEVFD];	/* fd + 1 of our /dev/udmabuf stand-ins */

/* The dma-bufs made here: shmem or hugetlbfs memfds (by inode). */
#define MAX_DMABUFS 256
static struct {
	uint64_t dev, ino, size;
	bool huge;
} dmabufs[MAX_DMABUFS];

static bool udmabuf_emulated(void)
{
	const char *e = getenv("DEVMEMTCP_EMU_UDMABUF");

	if (e && !strcmp(e, "0"))
		return false;
	if (e && !strcmp(e, "1"))
		return true;
	return access("/dev/udmabuf", F_OK) != 0;
}

static long udmabuf_limit_mb(void)
{
	const char *e = getenv("DEVMEMTCP_EMU_UDMABUF_MB");

	return e && atol(e) > 0 ? atol(e) : 64;
}

int emu_open_udmabuf(const char *path, int flags, int *ret)
{
	int fd;

	if (!emu_on() || strcmp(path, "/dev/udmabuf") || !udmabuf_emulated())
		return 0;
	fd = emu_real.open("/dev/null", O_RDWR | (flags & O_CLOEXEC));
	if (fd >= 0) {
		pthread_mutex_lock(&ud_lock);
		for (int i = 0; i < MAX_DEVFD; i++)
			if (!devfds[i]) {
				devfds[i] = fd + 1;
				break;
			}
		pthread_mutex_unlock(&ud_lock);
	}
	*ret = fd;
	return 1;
}

static bool is_devfd(int fd)
{
	bool yes = false;

	pthread_mutex_lock(&ud_lock);
	for (int i = 0; i < MAX_DEVFD; i++)
		yes |= devfds[i] == fd + 1;
	pthread_mutex_unlock(&ud_lock);
	return yes;
}

static int dmabuf_index(int fd)
{
	struct stat st;
	int idx = -1;

	if (fstat(fd, &st))
		return -1;
	pthread_mutex_lock(&ud_lock);
	for (int i = 0; i < MAX_DMABUFS; i++)
		if (dmabufs[i].ino == (uint64_t)st.st_ino && dmabufs[i].dev == (uint64_t)st.st_dev) {
			idx = i;
			break;
		}
	pthread_mutex_unlock(&ud_lock);
	return idx;
}

bool emu_is_dmabuf_fd(int fd)
{
	return dmabuf_index(fd) >= 0;
}

/* The emulated udmabuf of fd: its size and backing, false if not ours. */
bool emu_udmabuf_of(int fd, uint64_t *size, bool *huge)
{
	int i = dmabuf_index(fd);

	if (i < 0)
		return false;
	*size = dmabufs[i].size;
	*huge = dmabufs[i].huge;
	return true;
}

void emu_fd_closed(int fd)
{
	pthread_mutex_lock(&ud_lock);
	for (int i = 0; i < MAX_DEVFD; i++)
		if (devfds[i] == fd + 1)
			devfds[i] = 0;
	pthread_mutex_unlock(&ud_lock);
}

/* UDMABUF_CREATE as drivers/dma-buf/udmabuf.c checks it. */
static int udmabuf_create(const struct dmt_udmabuf_create *c)
{
	struct statfs sfs;
	struct stat st;
	char path[64];
	int seals, fd, slot = -1;

	if (c->flags & ~DMT_UDMABUF_FLAGS_CLOEXEC)
		return -EINVAL;
	if (fstatfs((int)c->memfd, &sfs) || fstat((int)c->memfd, &st))
		return -EBADF;
	if (sfs.f_type != TMPFS_MAGIC && sfs.f_type != HUGETLBFS_MAGIC)
		return -EBADFD;
	seals = fcntl((int)c->memfd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK) || (seals & F_SEAL_WRITE))
		return -EINVAL;
	if ((c->offset | c->size) & 4095 || !c->size ||
	    c->offset + c->size > (uint64_t)st.st_size)
		return -EINVAL;
	if (c->size > (uint64_t)udmabuf_limit_mb() << 20)
		return -EINVAL;
	if (c->offset || c->size != (uint64_t)st.st_size)
		return emu_unmodelled("UDMABUF_CREATE of part of a memfd (offset %llu, %llu of %lld bytes)",
				      (unsigned long long)c->offset,
				      (unsigned long long)c->size, (long long)st.st_size);
	/* the dma-buf: a file description of its own on the same pages */
	snprintf(path, sizeof(path), "/proc/self/fd/%u", c->memfd);
	fd = emu_real.open(path, O_RDWR | ((c->flags & DMT_UDMABUF_FLAGS_CLOEXEC) ? O_CLOEXEC : 0));
	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&ud_lock);
	for (int i = 0; i < MAX_DMABUFS && slot < 0; i++)
		if (!dmabufs[i].ino)
			slot = i;
	if (slot >= 0) {
		dmabufs[slot].dev = st.st_dev;
		dmabufs[slot].ino = st.st_ino;
		dmabufs[slot].size = c->size;
		dmabufs[slot].huge = sfs.f_type == HUGETLBFS_MAGIC;
	}
	pthread_mutex_unlock(&ud_lock);
	if (slot < 0) {
		emu_real.close(fd);
		return emu_unmodelled("more than %d udmabufs", MAX_DMABUFS);
	}
	return fd;
}

int emu_ioctl(int fd, unsigned long req, void *arg, int *ret)
{
	int r;

	if (!emu_on())
		return 0;
	if (req == SIOCETHTOOL && arg)
		return ethtool_ioctl(fd, arg, ret);
	if (req == DMT_UDMABUF_CREATE && is_devfd(fd)) {
		r = udmabuf_create(arg);
		if (r < 0) {
			errno = -r;
			r = -1;
		}
		*ret = r;
		return 1;
	}
	if (req == UDMABUF_CREATE_LIST_ && is_devfd(fd)) {
		*ret = emu_unmodelled("UDMABUF_CREATE_LIST");
		errno = EOPNOTSUPP;
		*ret = -1;
		return 1;
	}
	if ((req == DMT_DMA_BUF_IOCTL_SYNC || req == DMT_DMA_BUF_SET_NAME) &&
	    emu_is_dmabuf_fd(fd)) {
		if (req == DMT_DMA_BUF_IOCTL_SYNC) {
			const struct dmt_dma_buf_sync *s = arg;

			if (s->flags & ~(uint64_t)(DMT_DMA_BUF_SYNC_RW | DMT_DMA_BUF_SYNC_END) ||
			    !(s->flags & DMT_DMA_BUF_SYNC_RW)) {
				errno = EINVAL;
				*ret = -1;
				return 1;
			}
		}
		*ret = 0;
		return 1;
	}
	return 0;
}

/* ---- the sim's parameters and knobs as files -------------------------------------- */

/* The NIC the sim's module-wide parameters describe: dsim1 (the
 * receiver) when emulated, else the first one. */
static struct emu_nic *param_nic(void)
{
	struct emu_nic *first = NULL;

	for (int i = 0; i < EMU_MAX_NICS; i++) {
		if (!emu_sh->nics[i].used)
			continue;
		if (!strcmp(emu_sh->nics[i].ifname, "dsim1"))
			return &emu_sh->nics[i];
		if (!first)
			first = &emu_sh->nics[i];
	}
	return first;
}

static FILE *text_file(const char *text)
{
	FILE *f = fmemopen(NULL, 128, "w+");

	if (f) {
		fputs(text, f);
		rewind(f);
	}
	return f;
}

struct knob {
	int nic;
	char name[32];
	char buf[64];
	size_t len;
};

static ssize_t knob_write(void *c, const char *buf, size_t size)
{
	struct knob *k = c;
	size_t n = size < sizeof(k->buf) - 1 - k->len ? size : sizeof(k->buf) - 1 - k->len;

	memcpy(k->buf + k->len, buf, n);
	k->len += n;
	k->buf[k->len] = 0;
	return (ssize_t)size;
}

static int knob_close(void *c)
{
	struct knob *k = c;
	unsigned long long v = strtoull(k->buf, NULL, 0);
	struct emu_nic *n = &emu_sh->nics[k->nic];

	emu_lock();
	if (!strcmp(k->name, "corrupt_offset"))
		n->corrupt_offset = v;
	else if (!strcmp(k->name, "fail_alloc"))
		n->fail_alloc = (uint32_t)v;
	emu_unlock();
	free(k);
	return 0;
}

void *emu_fopen(const char *path, const char *mode, bool *handled)
{
	static const char params[] = "/sys/module/devmemsim/parameters/";
	static const char knobs[] = "/sys/kernel/debug/devmemsim/";
	char text[64], ifname[32], name[32];
	struct emu_nic *n;

	*handled = false;
	if (!emu_on() || !path)
		return NULL;
	if (!strcmp(path, "/sys/module/udmabuf/parameters/size_limit_mb") &&
	    udmabuf_emulated()) {
		*handled = true;
		snprintf(text, sizeof(text), "%ld\n", udmabuf_limit_mb());
		return text_file(text);
	}
	if (!strncmp(path, params, sizeof(params) - 1)) {
		const char *p = path + sizeof(params) - 1;

		*handled = true;
		n = param_nic();
		if (!n) {
			errno = ENOENT;
			return NULL;
		}
		if (!strcmp(p, "rx_buf_size"))
			snprintf(text, sizeof(text), "%u\n", n->rx_buf_size);
		else if (!strcmp(p, "rx_pack"))
			snprintf(text, sizeof(text), "%c\n", n->rx_pack ? 'Y' : 'N');
		else if (!strcmp(p, "rx_mix"))
			snprintf(text, sizeof(text), "%c\n", n->rx_mix ? 'Y' : 'N');
		else if (!strcmp(p, "num_queues"))
			snprintf(text, sizeof(text), "%u\n", n->nq);
		else {
			emu_unmodelled("the sim's module parameter %s", p);
			errno = ENOENT;
			return NULL;
		}
		return text_file(text);
	}
	if (!strncmp(path, knobs, sizeof(knobs) - 1) &&
	    sscanf(path + sizeof(knobs) - 1, "%31[^/]/%31s", ifname, name) == 2) {
		struct knob *k;
		int nic = -1;

		*handled = true;
		for (int i = 0; i < EMU_MAX_NICS && nic < 0; i++)
			if (emu_sh->nics[i].used && !strcmp(emu_sh->nics[i].ifname, ifname))
				nic = i;
		if (nic < 0) {
			errno = ENOENT;
			return NULL;
		}
		if (!strcmp(name, "layout") && mode[0] == 'r') {
			/* the sim's default profile: its layout is its module
			 * parameters' (sim/module/debugfs.c, "layout") */
			n = &emu_sh->nics[nic];
			snprintf(text, sizeof(text), "buf_size %u pack %d align 0 mix %d\n",
				 n->rx_buf_size, n->rx_pack ? 1 : 0, n->rx_mix ? 1 : 0);
			return text_file(text);
		}
		if (strcmp(name, "corrupt_offset") && strcmp(name, "fail_alloc")) {
			emu_unmodelled("the sim's knob %s", name);
			errno = EOPNOTSUPP;
			return NULL;
		}
		if (mode[0] == 'r') {
			n = &emu_sh->nics[nic];
			snprintf(text, sizeof(text), "%llu\n", !strcmp(name, "fail_alloc") ?
				 (unsigned long long)n->fail_alloc :
				 (unsigned long long)n->corrupt_offset);
			return text_file(text);
		}
		k = calloc(1, sizeof(*k));
		if (!k)
			return NULL;
		k->nic = nic;
		snprintf(k->name, sizeof(k->name), "%s", name);
		return fopencookie(k, "w", (cookie_io_functions_t){ .write = knob_write,
								    .close = knob_close });
	}
	return NULL;
}

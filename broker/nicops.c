// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * What devmemtcp-broker's requests do, through the library (struct
 * brk_ops of session.h): the NIC layer with the client recorded as the
 * owner (dmt_serve_nic_open), bind-rx and bind-tx whose netlink socket goes
 * to the client, UDMABUF_CREATE over the client's memfd, queue-get for
 * bindings still on a handle's queues.
 *
 * The loop and the helper threads call these: the library's context is
 * one (its last message, its query socket), so every call that uses it
 * holds ctx_lock.  Every fd a client sent is looked at before the kernel
 * is asked to use it, first in ways that cannot sleep whatever the file
 * is (its /proc/self/fd link and fdinfo, F_GET_SEALS), and only once it
 * is known to be a dma-buf or a memfd in ways that ask its file system
 * (fstat, fstatfs), which for a FUSE file would wait on its daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "config.h"	/* DMT_TEST_HOOKS */
#include "nicops.h"
#include "priv/broker.h"

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

static struct devmemtcp_ctx *ctx_of(struct brk *b)
{
	return b->priv;
}

static void ctx_msg(struct devmemtcp_ctx *ctx, char *msg)
{
	snprintf(msg, DMT_BRK_ERRMSG_MAX, "%s", devmemtcp_ctx_errmsg(ctx));
}

static int fail(char *msg, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *msg, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, DMT_BRK_ERRMSG_MAX, fmt, ap);
	va_end(ap);
	return code;
}

/* What fd is, as /proc/self/fd says ("/dmabuf:", "/memfd:name"). */
static void fd_kind(int fd, char *link, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, len - 1);
	link[n > 0 ? n : 0] = '\0';
}

/* The size of dma-buf fd from its fdinfo, which only a dma-buf has
 * ("size:" with "exp_name:", the exporter), read without asking the file
 * (fdinfo shows what the kernel holds): 0 when fd is not one. */
static uint64_t dmabuf_size(int fd)
{
	char path[64], line[160];
	unsigned long long size = 0;
	bool exporter = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "exp_name:", 9))
			exporter = true;
		else if (sscanf(line, "size: %llu", &size) != 1 && !strchr(line, '\n'))
			break;	/* a line longer than ours: not a dma-buf's */
	}
	fclose(f);
	return exporter ? size : 0;
}

/* A client's dma-buf as a buffer of ours: a dma-buf it must be (its
 * /proc/self/fd link and its fdinfo say so, which a FUSE file named
 * "/dmabuf:..." cannot fake), its size the dma-buf's. */
static int import_dmabuf(struct devmemtcp_ctx *ctx, int fd, struct devmemtcp_buf **buf,
			 char *msg)
{
	char kind[128];
	uint64_t size;
	int ret;

	fd_kind(fd, kind, sizeof(kind));
	size = strncmp(kind, "/dmabuf:", 8) ? 0 : dmabuf_size(fd);
	if (!size)
		return fail(msg, -EBADF, "devmemtcp-broker: the fd sent is not a dma-buf (%.60s)",
			    kind[0] ? kind : "unknown");
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .flags = DEVMEMTCP_BUF_KEEP_FD, .fd = fd, .size = size);
	ret = devmemtcp_buf_new(ctx, &o, buf);
	if (ret)
		ctx_msg(ctx, msg);
	return ret;
}

/* The binding's netlink socket for the client (a copy: ours is closed
 * here, so the binding lives exactly as long as the client's). */
static int hand_over(struct devmemtcp_binding *bnd, int *fd, uint32_t *id, char *msg)
{
	int ret;

	if (!bnd)
		return 0;
	ret = dmt_serve_hand_over(bnd, fd, id);
	if (ret)
		return fail(msg, ret, "devmemtcp-broker: a copy of the binding's socket: %s",
			    strerror(-ret));
	return 0;
}

static void open_reply(struct devmemtcp_nic *nic, struct dmt_brk_open_reply *r)
{
	DEVMEMTCP_OPTS(nic_stats, st);
	const uint32_t *q;
	int n = devmemtcp_nic_queues(nic, &q);

	r->nqueues = n <= 0 ? 0 : n < DMT_BRK_MAX_QUEUES ? (uint32_t)n : DMT_BRK_MAX_QUEUES;
	if (r->nqueues)
		memcpy(r->queues, q, r->nqueues * sizeof(uint32_t));
	devmemtcp_nic_stats(nic, &st);
	r->steps = st.steps;
	r->rules = st.rules;
	r->rss_context = st.rss_context;
	r->setup_round_trips = st.setup_round_trips;
	r->setup_ioctls = st.setup_ioctls;
}

static int op_open(struct brk *b, const char *ifname, const struct devmemtcp_nic_opts *opts,
		   int dmabuf, pid_t pid, uint64_t start, void **nicp,
		   struct dmt_brk_open_reply *r, int *nl_fd, char *msg)
{
	struct devmemtcp_ctx *ctx = ctx_of(b);
	struct devmemtcp_nic_opts o = *opts;
	struct devmemtcp_buf *buf = NULL;
	struct devmemtcp_nic *nic;
	int ret;

	*nl_fd = -1;
	pthread_mutex_lock(&ctx_lock);
	if (dmabuf >= 0) {
		ret = import_dmabuf(ctx, dmabuf, &buf, msg);
		if (ret)
			goto out;
		o.buf = buf;
	}
	ret = dmt_serve_nic_open(ctx, ifname, &o, pid, start, &nic);
	devmemtcp_buf_free(buf);	/* the binding keeps its own reference */
	if (ret) {
		ctx_msg(ctx, msg);
		goto out;
	}
	open_reply(nic, r);
	ret = hand_over(dmt_serve_take_binding(nic), nl_fd, &r->binding_id, msg);
	if (ret) {
		devmemtcp_nic_close(nic);
		goto out;
	}
	*nicp = nic;
out:
	pthread_mutex_unlock(&ctx_lock);
	return ret;
}

static int op_close(struct brk *b, void *nic, char *msg)
{
	int ret;

	pthread_mutex_lock(&ctx_lock);
	ret = devmemtcp_nic_close(nic);
	if (ret)
		ctx_msg(ctx_of(b), msg);
	pthread_mutex_unlock(&ctx_lock);
	return ret;
}

static void op_forget(struct brk *b, void *nic)
{
	dmt_serve_forget(nic);
}

static int op_add_flow(struct brk *b, void *nic, const struct devmemtcp_flow *f, char *msg)
{
	int ret;

	pthread_mutex_lock(&ctx_lock);
	ret = devmemtcp_nic_add_flow(nic, f);
	if (ret < 0)
		snprintf(msg, DMT_BRK_ERRMSG_MAX, "%s", devmemtcp_nic_errmsg(nic));
	pthread_mutex_unlock(&ctx_lock);
	return ret;
}

static int op_remove_flow(struct brk *b, void *nic, int id, char *msg)
{
	int ret;

	pthread_mutex_lock(&ctx_lock);
	ret = devmemtcp_nic_remove_flow(nic, id);
	if (ret < 0)
		snprintf(msg, DMT_BRK_ERRMSG_MAX, "%s", devmemtcp_nic_errmsg(nic));
	pthread_mutex_unlock(&ctx_lock);
	return ret;
}

static int op_bind(struct brk *b, bool tx, int ifindex, const uint32_t *queues, size_t n,
		   int dmabuf, uint32_t rx_page_size, bool verify, int *nl_fd, uint32_t *id,
		   char *msg)
{
	DEVMEMTCP_OPTS(bind_opts, bo, .rx_page_size = rx_page_size, .no_verify = !verify);
	struct devmemtcp_ctx *ctx = ctx_of(b);
	struct devmemtcp_binding *bnd;
	struct devmemtcp_buf *buf;
	int ret;

	*nl_fd = -1;
	pthread_mutex_lock(&ctx_lock);
	ret = import_dmabuf(ctx, dmabuf, &buf, msg);
	if (ret)
		goto out;
	ret = tx ? devmemtcp_bind_tx(ctx, ifindex, buf, &bo, &bnd)
		 : devmemtcp_bind_rx(ctx, ifindex, queues, n, buf, &bo, &bnd);
	devmemtcp_buf_free(buf);
	if (ret)
		ctx_msg(ctx, msg);
	else
		ret = hand_over(bnd, nl_fd, id, msg);
out:
	pthread_mutex_unlock(&ctx_lock);
	return ret;
}

/* The client's memfd, as UDMABUF_CREATE takes it and as the policy
 * allows: shmem or hugetlbfs, sealed against shrinking and growing, of at
 * most max bytes, every page allocated (by the client, who pays for it). */
static int memfd_ok(int memfd, uint64_t max, struct stat *st, char *msg)
{
	long page = sysconf(_SC_PAGESIZE);
	struct statfs sfs;
	char kind[128];
	int seals;

	/* F_GET_SEALS answers for shmem and hugetlbfs files only, and asks
	 * no file system: after it, fstatfs and fstat cannot sleep */
	fd_kind(memfd, kind, sizeof(kind));
	seals = fcntl(memfd, F_GET_SEALS);
	if (seals < 0 || strncmp(kind, "/memfd:", 7) || fstatfs(memfd, &sfs) ||
	    (sfs.f_type != TMPFS_MAGIC && sfs.f_type != HUGETLBFS_MAGIC) || fstat(memfd, st))
		return fail(msg, -EBADF, "devmemtcp-broker: the fd sent for a udmabuf is not a memfd (%.60s)",
			    kind[0] ? kind : "unknown");
	if ((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW) ||
	    seals & F_SEAL_WRITE)
		return fail(msg, -EINVAL,
			    "devmemtcp-broker: the memfd must be sealed with F_SEAL_SHRINK and F_SEAL_GROW, not F_SEAL_WRITE (seals 0x%x)",
			    seals);
	if (st->st_size <= 0 || st->st_size % page || (uint64_t)st->st_size > max)
		return fail(msg, st->st_size > 0 && (uint64_t)st->st_size > max ? -E2BIG : -EINVAL,
			    "devmemtcp-broker: a udmabuf of %lld bytes: it must be a multiple of %ld bytes and at most %llu (the policy's udmabuf)",
			    (long long)st->st_size, page, (unsigned long long)max);
	if ((uint64_t)st->st_blocks * 512 < (uint64_t)st->st_size)
		return fail(msg, -EINVAL,
			    "devmemtcp-broker: the memfd's pages are not all allocated (%lld of %lld bytes): fallocate it first",
			    (long long)st->st_blocks * 512, (long long)st->st_size);
	return 0;
}

static int op_udmabuf_size(struct brk *b, int memfd, uint64_t max, uint64_t *size, char *msg)
{
	struct stat st;
	int ret = memfd_ok(memfd, max, &st, msg);

	if (!ret)
		*size = (uint64_t)st.st_size;
	return ret;
}

/*
 * UDMABUF_CREATE by the broker: the udmabuf pins the memfd's pages for as
 * long as it lives, and a page the memfd does not have yet is allocated
 * by the ioctl, charged to the broker (its memory cgroup), not to the
 * client.  memfd_ok found every page allocated, but the seals it accepts
 * do not stop the client from punching holes (fallocate(PUNCH_HOLE) needs
 * F_SEAL_WRITE or F_SEAL_FUTURE_WRITE to be refused, and the client must
 * be able to write its buffer; UDMABUF_CREATE refuses both), so that
 * check only catches a client that forgot to allocate: one racing it has
 * the broker pay.  What bounds that is the session's count of the bytes
 * of the udmabufs each user has alive (udmabuf-total), whoever paid for
 * the pages.
 */
static int op_udmabuf(struct brk *b, int memfd, uint64_t size, int *dmabuf, int *keep,
		      char *msg)
{
	int dev, ret;

	*dmabuf = *keep = -1;
#if DMT_TEST_HOOKS
	/* tests where no /dev/udmabuf is: a pipe stands in, the client's end
	 * the write end, ours the read end (POLLHUP: the client's are gone) */
	if (dmt_serve_hook_env("DEVMEMTCP_TEST_BROKER_FAKE_UDMABUF")) {
		int p[2];

		if (pipe2(p, O_CLOEXEC))
			return fail(msg, -errno, "devmemtcp-broker: a pipe: %s", strerror(errno));
		*keep = p[0];
		*dmabuf = p[1];
		return 0;
	}
#endif
	dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return fail(msg, -errno, "devmemtcp-broker: cannot open /dev/udmabuf: %s",
			    strerror(errno));
	*dmabuf = dmt_serve_udmabuf(dev, memfd, size);
	ret = *dmabuf < 0 ? -errno : 0;
	close(dev);
	if (ret)
		return fail(msg, ret, "devmemtcp-broker: UDMABUF_CREATE of %llu bytes failed: %s",
			    (unsigned long long)size, strerror(-ret));
	*keep = fcntl(*dmabuf, F_DUPFD_CLOEXEC, 3);
	if (*keep < 0) {
		ret = -errno;
		close(*dmabuf);
		*dmabuf = -1;
		return fail(msg, ret, "devmemtcp-broker: a copy of the udmabuf: %s", strerror(-ret));
	}
	return 0;
}

/* Anyone but the broker holds the dma-buf of keep: its fdinfo's count of
 * references (the fds, the mappings, the bindings and messages in flight
 * that hold it) is more than the broker's own. */
static int op_buf_alive(struct brk *b, int keep)
{
	char path[64], line[128];
	long count = -1;
	struct stat st;
	FILE *f;

#if DMT_TEST_HOOKS
	if (!fstat(keep, &st) && S_ISFIFO(st.st_mode)) {	/* the stand-in */
		struct pollfd pfd = { .fd = keep, .events = POLLIN };

		return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP) ? 0 : 1;
	}
#else
	(void)st;
#endif
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", keep);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "count: %ld", &count) == 1)
			break;
	fclose(f);
	return count < 0 ? -ENOENT : count > 1;
}

static int op_bound(struct brk *b, int ifindex, const uint32_t *queues, size_t n)
{
	struct devmemtcp_queue *q = calloc(512, sizeof(*q));
	int nq, bound = 0;

	if (!q)
		return -ENOMEM;
	pthread_mutex_lock(&ctx_lock);
	nq = devmemtcp_queue_list(ctx_of(b), ifindex, q, 512);
	pthread_mutex_unlock(&ctx_lock);
	for (int i = 0; i < nq && i < 512 && !bound; i++)
		for (size_t k = 0; k < n; k++)
			if (q[i].type == DEVMEMTCP_QUEUE_RX && q[i].id == queues[k] &&
			    q[i].dmabuf_id)
				bound = 1;
	free(q);
	return nq < 0 ? nq : bound;
}

static int op_ifindex(struct brk *b, const char *ifname)
{
	return (int)if_nametoindex(ifname);
}

static int op_ifname(struct brk *b, int ifindex, char *name)
{
	return ifindex > 0 && if_indextoname((unsigned int)ifindex, name) ? 0 : -ENODEV;
}

static bool op_alive(pid_t pid, uint64_t start)
{
	uint64_t now;
	bool zombie;

	return dmt_serve_proc_start(pid, &now, &zombie) == 0 && !zombie && now == start;
}

const struct brk_ops brk_nic_ops = {
	.open = op_open,
	.close = op_close,
	.forget = op_forget,
	.add_flow = op_add_flow,
	.remove_flow = op_remove_flow,
	.bind = op_bind,
	.udmabuf_size = op_udmabuf_size,
	.udmabuf = op_udmabuf,
	.buf_alive = op_buf_alive,
	.bound = op_bound,
	.ifindex = op_ifindex,
	.ifname = op_ifname,
	.alive = op_alive,
};

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * io_uring zero-copy receive, its control-plane half (nic/zcrx_ifq.h):
 * what the kernel offers, the ring, the registration of one interface
 * queue with an area over a buffer and the explanation of a refusal
 * (rings settings through ethtool), the queue's NAPI id and release
 * through queue-get, and the teardown.  The handle it makes is driven by
 * the receive half (rx/zcrx.c).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "buf/buf.h"
#include "core/fork.h"
#include "ethtool.h"
#include "netdev.h"
#include "rx/zcrx.h"
#include "zcrx_ifq.h"

_Static_assert(sizeof(struct dmt_io_uring_params) == 120, "io_uring_params");
_Static_assert(sizeof(struct dmt_io_uring_region_desc) == 64, "region_desc");
_Static_assert(sizeof(struct dmt_zcrx_area_reg) == 48, "zcrx_area_reg");
_Static_assert(sizeof(struct dmt_zcrx_ifq_reg) == 96, "zcrx_ifq_reg");
_Static_assert(sizeof(struct dmt_zcrx_event_desc) == 96, "zcrx_event_desc");
_Static_assert(sizeof(struct dmt_io_uring_query_hdr) == 40, "query_hdr");
_Static_assert(offsetof(struct dmt_zcrx_ifq_reg, zcrx_id) == 64, "ifq_reg zcrx_id");

#define QUEUE_RELEASE_MS 5000	/* teardown: wait this long for queue-get */

/* ---- system calls ---------------------------------------------------------- */

static int sys_setup(uint32_t entries, struct dmt_io_uring_params *p)
{
	long r = syscall(__NR_io_uring_setup, entries, p);

	return r < 0 ? -errno : (int)r;
}

/* ---- what the kernel offers ------------------------------------------------ */

static int kernel_version(char *release, size_t len)
{
	struct utsname u;

	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "unknown");
	snprintf(release, len, "%s", u.release);
	return dmt_kernel_version(u.release);
}

#define KV_ZCRX 0x060f00	/* 6.15 */
#define KV_DMABUF 0x061000	/* 6.16 */

/* The flags of the handle's ring; R_DISABLED so that the thread that drives
 * it later becomes its single issuer; TASKRUN_FLAG so that a look without
 * waiting needs no system call when no completion is pending. */
#define RING_FLAGS                                                             \
	(DMT_IORING_SETUP_SINGLE_ISSUER | DMT_IORING_SETUP_DEFER_TASKRUN |    \
	 DMT_IORING_SETUP_CQE32 | DMT_IORING_SETUP_R_DISABLED |               \
	 DMT_IORING_SETUP_NO_SQARRAY | DMT_IORING_SETUP_SUBMIT_ALL |          \
	 DMT_IORING_SETUP_TASKRUN_FLAG)

static const char *const need_msg =
	"io_uring zero-copy receive needs Linux 6.15 (6.16 for dma-buf areas)";

/* A failed io_uring_setup in words; returns the errno to report. */
static int setup_failed(struct dmt_err *err, int ret, const char *release,
			int kv)
{
	if (ret == -ENOSYS)
		return dmt_err_set(err, -EOPNOTSUPP,
				   "%s: this kernel (%s) has no io_uring at all",
				   need_msg, release);
	if (ret == -EPERM)
		return dmt_err_set(err, -EPERM,
				   "io_uring_setup: EPERM: io_uring is disabled for this process (sysctl kernel.io_uring_disabled; with 1, add the user to kernel.io_uring_group)");
	if (ret == -EINVAL && kv < KV_ZCRX)
		return dmt_err_set(err, -EOPNOTSUPP,
				   "%s: this kernel is %s", need_msg, release);
	return dmt_err_set(err, ret, "io_uring_setup failed: %s",
			   dmt_errno_name(ret));
}

/* Does the ring's kernel have IORING_OP_RECV_ZC?  0, or -EOPNOTSUPP with
 * the message on err. */
static int probe_recv_zc(int fd, struct dmt_err *err, const char *release,
			 int kv)
{
	size_t len = sizeof(struct dmt_io_uring_probe) +
		     256 * sizeof(struct dmt_io_uring_probe_op);
	struct dmt_io_uring_probe *p = dmt_calloc(1, len);
	bool ok;
	int ret;

	if (!p)
		return dmt_err_set(err, -ENOMEM, "out of memory");
	ret = dmt_zcrx_sys_register(fd, DMT_IORING_REGISTER_PROBE, p, 256);
	ok = ret == 0 && p->last_op >= DMT_IORING_OP_RECV_ZC &&
	     (p->ops[DMT_IORING_OP_RECV_ZC].flags & DMT_IO_URING_OP_SUPPORTED);
	free(p);
	if (ok)
		return 0;
	if (ret == -ENOMEM)
		return dmt_err_set(err, ret, "IORING_REGISTER_PROBE: out of memory");
	if (kv >= KV_ZCRX && ret == 0)
		return dmt_err_set(err, -EOPNOTSUPP,
				   "this kernel (%s) has no io_uring zero-copy receive: it was built without CONFIG_IO_URING_ZCRX",
				   release);
	return dmt_err_set(err, -EOPNOTSUPP, "%s: this kernel is %s", need_msg,
			   release);
}

/* IORING_REGISTER_QUERY (no ring) for zcrx: 0 with *q filled, or errno. */
static int query_zcrx(struct dmt_io_uring_query_zcrx *q)
{
	struct dmt_io_uring_query_hdr h = {
		.query_data = (uint64_t)(uintptr_t)q,
		.query_op = DMT_IO_URING_QUERY_ZCRX,
		.size = sizeof(*q),
	};
	int ret;

	memset(q, 0, sizeof(*q));
	ret = dmt_zcrx_sys_register(-1, DMT_IORING_REGISTER_QUERY, &h, 0);
	if (ret < 0)
		return ret;
	return h.result < 0 ? h.result : 0;
}

int dmt_zcrx_support(struct dmt_zcrx_support *s)
{
	struct dmt_io_uring_params p = { .flags = RING_FLAGS };
	struct dmt_io_uring_query_zcrx q;
	struct dmt_err err = { 0 };
	char release[65];
	int kv = kernel_version(release, sizeof(release)), fd, ret;

	memset(s, 0, sizeof(*s));
	s->zcrx = s->dmabuf = -1;
	fd = sys_setup(2, &p);
	if (fd < 0) {
		ret = setup_failed(&err, fd, release, kv);
		if (ret == -EOPNOTSUPP)
			s->zcrx = s->dmabuf = 0;
		snprintf(s->msg, sizeof(s->msg), "%.*s", (int)sizeof(s->msg) - 1, err.msg);
		return 0;
	}
	ret = probe_recv_zc(fd, &err, release, kv);
	close(fd);
	if (ret == -ENOMEM)
		return ret;
	s->zcrx = ret == 0;
	snprintf(s->msg, sizeof(s->msg), "%.*s", (int)sizeof(s->msg) - 1, err.msg);
	if (!s->zcrx) {
		s->dmabuf = 0;
		return 0;
	}
	/* the query (6.18) says it; before it, the release does */
	if (query_zcrx(&q) == 0)
		s->dmabuf = !!(q.area_flags & DMT_IORING_ZCRX_AREA_DMABUF);
	else
		s->dmabuf = kv >= KV_DMABUF;
	return 0;
}

/* ---- setup ------------------------------------------------------------------- */

/* A handle whose setup failed: its socket, then the rest. */
static void zcrx_free_setup(struct devmemtcp_zcrx *z)
{
	dmt_nl_close(z->nl);
	dmt_zcrx_destroy(z);
}


static uint32_t pow2_at_least(uint64_t n, uint32_t lo, uint32_t hi)
{
	uint32_t v = lo;

	while (v < n && v < hi)
		v <<= 1;
	return v;
}

/* Map part of the ring (*p NULL on failure, message on ctx->err). */
static int ring_map(struct devmemtcp_zcrx *z, void **p, size_t len, uint64_t off,
		    const char *what)
{
	int ret;

	*p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		  z->ring_fd, (off_t)off);
	if (*p != MAP_FAILED)
		return 0;
	ret = -errno;
	*p = NULL;
	return dmt_err_set(&z->ctx->err, ret, "mmap of the io_uring %s failed: %s",
			   what, dmt_errno_name(ret));
}

static int ring_setup(struct devmemtcp_zcrx *z, uint32_t cq_entries,
		      const char *release, int kv)
{
	struct dmt_io_uring_params p = {
		.flags = RING_FLAGS | DMT_IORING_SETUP_CQSIZE | DMT_IORING_SETUP_CLAMP,
		.cq_entries = cq_entries,
	};
	uint8_t *rings;
	int fd, ret;

	fd = sys_setup(DMT_ZCRX_SQ_ENTRIES, &p);
	if (fd < 0)
		return setup_failed(&z->ctx->err, fd, release, kv);
	z->ring_fd = fd;
	ret = probe_recv_zc(fd, &z->ctx->err, release, kv);
	if (ret)
		return ret;
	if (!(p.features & DMT_IORING_FEAT_SINGLE_MMAP) ||
	    !(p.features & DMT_IORING_FEAT_EXT_ARG))
		return dmt_err_set(&z->ctx->err, -EOPNOTSUPP, "%s: this kernel is %s",
				   need_msg, release);
	/* one mapping holds both rings (SINGLE_MMAP); the CQEs come last */
	z->rings_len = p.cq_off.cqes + (size_t)p.cq_entries * DMT_ZCRX_CQE_SIZE;
	ret = ring_map(z, &z->rings, z->rings_len, DMT_IORING_OFF_SQ_RING, "rings");
	if (ret)
		return ret;
	z->sqes_len = (size_t)p.sq_entries * sizeof(*z->sqes);
	ret = ring_map(z, (void **)&z->sqes, z->sqes_len, DMT_IORING_OFF_SQES, "SQEs");
	if (ret)
		return ret;
	rings = z->rings;
	z->sq_head = (uint32_t *)(rings + p.sq_off.head);
	z->sq_tail = (uint32_t *)(rings + p.sq_off.tail);
	z->sq_flags = (uint32_t *)(rings + p.sq_off.flags);
	z->sq_mask = *(uint32_t *)(rings + p.sq_off.ring_mask);
	z->sq_entries = p.sq_entries;
	z->sq_local = *z->sq_tail;
	z->cq_head = (uint32_t *)(rings + p.cq_off.head);
	z->cq_tail = (uint32_t *)(rings + p.cq_off.tail);
	z->cq_mask = *(uint32_t *)(rings + p.cq_off.ring_mask);
	z->cq_entries = p.cq_entries;
	z->cqes = rings + p.cq_off.cqes;
	return 0;
}

/* Which kind of area: device memory and DEVMEMTCP_ZCRX_DMABUF_AREA give a
 * dma-buf area; host memory a user-memory area over its CPU mapping (the
 * same pages, so area offsets are dma-buf offsets). */
static int area_choose(struct devmemtcp_zcrx *z, uint32_t flags,
		       const char *release, int kv)
{
	z->dmabuf_area = (flags & DEVMEMTCP_ZCRX_DMABUF_AREA) || !z->buf->cpu_map;
	if (z->dmabuf_area && kv && kv < KV_DMABUF)
		return dmt_err_set(&z->ctx->err, -EOPNOTSUPP,
				   "%s: this kernel is %s, which takes only host memory (a user-memory area)%s",
				   need_msg, release,
				   z->buf->cpu_map ? ": leave out DEVMEMTCP_ZCRX_DMABUF_AREA"
						   : "");
	if (z->dmabuf_area && z->buf->fd < 0)
		return dmt_err_set(&z->ctx->err, -EINVAL,
				   "the buffer has no dma-buf fd to register as a zcrx area");
	z->area_size = z->buf->size;
	return 0;
}

/* Explain a failed IORING_REGISTER_ZCRX_IFQ on ctx->err; the errno. */
static int register_failed(struct devmemtcp_zcrx *z, int ret, const char *release,
			   int kv)
{
	struct dmt_err *err = &z->ctx->err;
	const char *name = z->ifname;
	struct dmt_rings r = { 0 };
	struct dmt_err eerr = { 0 };
	struct dmt_eth e;

	switch (ret) {
	case -EPERM:
		return dmt_err_set(err, ret,
				   "registering a zcrx queue needs CAP_NET_ADMIN: run as root or give the program CAP_NET_ADMIN");
	case -ENODEV:
		return dmt_err_set(err, ret,
				   "ifindex %d is no interface of this thread's network namespace",
				   z->ifindex);
	case -ERANGE:
		return dmt_err_set(err, ret,
				   "%s has no RX queue %u: pick a queue below its RX queue count (ethtool -l %s)",
				   name, z->queue, name);
	case -EEXIST:
		return dmt_err_set(err, ret,
				   "queue %u of %s already has a memory provider (a dma-buf binding or another zcrx), or an XDP program is attached to %s: pick another queue or release it",
				   z->queue, name, name);
	case -EBUSY:
		return dmt_err_set(err, ret, "queue %u of %s is used by AF_XDP: pick another queue",
				   z->queue, name);
	case -EOPNOTSUPP:
		return dmt_err_set(err, ret,
				   "%s cannot do zero-copy receive: its driver lacks the queue management API or a DMA device (drivers with it: bnxt_en, mlx5, gve, fbnic)",
				   name);
	case -EFAULT:
		return dmt_err_set(err, ret,
				   "the kernel could not pin the buffer's memory as a user-memory area: register it as a dma-buf area (DEVMEMTCP_ZCRX_DMABUF_AREA)");
	case -ENOMEM:
		return dmt_err_set(err, ret,
				   "registering the %llu-byte zcrx area failed: out of memory, or RLIMIT_MEMLOCK is too small for it (ulimit -l)",
				   (unsigned long long)z->area_size);
	case -EINVAL:
		break;
	default:
		return dmt_err_set(err, ret, "IORING_REGISTER_ZCRX_IFQ on %s queue %u failed: %s",
				   name, z->queue, dmt_errno_name(ret));
	}
	/* EINVAL: most often header split; read the rings to say so */
	if (z->dmabuf_area && kv && kv < KV_DMABUF)
		return dmt_err_set(err, -EOPNOTSUPP, "%s: this kernel is %s",
				   need_msg, release);
	if (dmt_eth_init(&e, &eerr, z->nl, name) == 0) {
		if (e.ops->rings_get(&e, &r))
			r.has_tds = false;
		dmt_eth_fini(&e);
	}
	if (r.has_tds && r.tds != DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED)
		return dmt_err_set(err, ret,
				   "header split is off on %s: enable it (ethtool -G %s tcp-data-split on) or set the NIC up with devmemtcp_nic_open()",
				   name, name);
	if (r.has_hds && r.hds_thresh)
		return dmt_err_set(err, ret,
				   "hds-thresh is %u on %s: set it to 0 (ethtool -G %s hds-thresh 0) or set the NIC up with devmemtcp_nic_open()",
				   r.hds_thresh, name, name);
	return dmt_err_set(err, ret,
			   "IORING_REGISTER_ZCRX_IFQ on %s queue %u failed: EINVAL (kernel %s)",
			   name, z->queue, release);
}

static int register_ifq(struct devmemtcp_zcrx *z, const char *release, int kv)
{
	struct dmt_zcrx_area_reg area = {
		.addr = z->dmabuf_area ? 0 : (uint64_t)(uintptr_t)z->buf->cpu_map,
		.len = z->area_size,
		.flags = z->dmabuf_area ? DMT_IORING_ZCRX_AREA_DMABUF : 0,
		.dmabuf_fd = z->dmabuf_area ? (uint32_t)z->buf->fd : 0,
	};
	struct dmt_io_uring_region_desc rd = {
		.user_addr = (uint64_t)(uintptr_t)z->region,
		.size = z->region_len,
		.flags = DMT_IORING_MEM_REGION_TYPE_USER,
	};
	struct dmt_zcrx_ifq_reg reg = {
		.if_idx = (uint32_t)z->ifindex,
		.if_rxq = z->queue,
		.rq_entries = z->rq_entries,
		.area_ptr = (uint64_t)(uintptr_t)&area,
		.region_ptr = (uint64_t)(uintptr_t)&rd,
	};
	size_t stats_off = DMT_ZCRX_RQ_HDR_ROOM + (size_t)z->rq_entries * sizeof(struct dmt_zcrx_rqe);
	struct dmt_zcrx_event_desc ev = {
		.flags = DMT_ZCRX_EVENT_DESC_FLAG_STATS,
		.stats_offset = stats_off,
	};
	struct dmt_io_uring_query_zcrx q;
	uint8_t *base = z->region;
	int ret;

	/* copy statistics where the kernel offers them (zcrx events) */
	if (query_zcrx(&q) == 0 && (q.features & DMT_ZCRX_FEATURE_EVENT))
		reg.event_desc = (uint64_t)(uintptr_t)&ev;
	ret = dmt_zcrx_sys_register(z->ring_fd, DMT_IORING_REGISTER_ZCRX_IFQ, &reg, 1);
	if (ret < 0)
		return register_failed(z, ret, release, kv);
	z->zcrx_id = reg.zcrx_id;
	z->area_token = area.rq_area_token;
	z->buf_size = reg.rx_buf_len ? reg.rx_buf_len : (uint32_t)sysconf(_SC_PAGESIZE);
	if (reg.offsets.rqes > DMT_ZCRX_RQ_HDR_ROOM)
		return dmt_err_set(&z->ctx->err, -EPROTO,
				   "the kernel put the refill ring's entries at offset %u, beyond the %u bytes this library leaves for its header",
				   reg.offsets.rqes, DMT_ZCRX_RQ_HDR_ROOM);
	z->rq_head = (uint32_t *)(base + reg.offsets.head);
	z->rq_tail = (uint32_t *)(base + reg.offsets.tail);
	z->rqes = (struct dmt_zcrx_rqe *)(base + reg.offsets.rqes);
	z->rq_local = *z->rq_tail;
	if (reg.event_desc)
		z->kstats = (const struct dmt_zcrx_kstats *)(base + stats_off);
	return 0;
}

/* The queue's NAPI id (for the steering check) and whether queue-get shows
 * the io_uring provider on it: 1 shown, 0 not, or a negative errno. */
static int queue_state(struct devmemtcp_zcrx *z, uint32_t *napi_id)
{
	struct devmemtcp_queue q[256];
	int n, shown = 0;

	n = dmt_queue_list(z->nl, z->ifindex, q, ARRAY_SIZE(q));
	if (n < 0)
		return n;
	for (int i = 0; i < n && i < (int)ARRAY_SIZE(q); i++) {
		if (q[i].type != DEVMEMTCP_QUEUE_RX || q[i].id != z->queue)
			continue;
		if (napi_id)
			*napi_id = q[i].napi_id;
		shown = q[i].io_uring;
	}
	return shown;
}

static int zcrx_args_check(struct devmemtcp_ctx *ctx, int ifindex,
			   struct devmemtcp_buf *buf,
			   const struct devmemtcp_zcrx_opts *opts,
			   struct devmemtcp_zcrx **zp)
{
	uint32_t flags, rq, cq;
	int ret;

	if (!zp)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_zcrx_new: zcrx pointer is NULL");
	*zp = NULL;
	ret = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_zcrx_opts);
	if (ret)
		return ret;
	if (ifindex <= 0 || !buf)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_zcrx_new: ifindex %d, buf %p: pass if_nametoindex() of the interface and a buffer",
			       ifindex, (void *)buf);
	flags = DMT_OPT(opts, devmemtcp_zcrx_opts, flags, 0);
	rq = DMT_OPT(opts, devmemtcp_zcrx_opts, rq_entries, 0);
	cq = DMT_OPT(opts, devmemtcp_zcrx_opts, cq_entries, 0);
	if (flags & ~(uint32_t)DEVMEMTCP_ZCRX_DMABUF_AREA)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_zcrx_new: unknown flags %#x", flags);
	if ((rq & (rq - 1)) || rq > DMT_ZCRX_RQ_MAX || (cq & (cq - 1)) || cq > 65536)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_zcrx_new: rq_entries %u and cq_entries %u must be 0 or powers of two (at most %u and 65536)",
			       rq, cq, DMT_ZCRX_RQ_MAX);
	if (!buf->size || buf->size & ((uint64_t)sysconf(_SC_PAGESIZE) - 1))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_zcrx_new: the buffer's size %llu is not a multiple of the page size",
			       (unsigned long long)buf->size);
	return 0;
}

static int zcrx_setup(struct devmemtcp_zcrx *z, const struct devmemtcp_zcrx_opts *opts)
{
	uint64_t nbufs;
	uint32_t rq = DMT_OPT(opts, devmemtcp_zcrx_opts, rq_entries, 0);
	uint32_t cq = DMT_OPT(opts, devmemtcp_zcrx_opts, cq_entries, 0);
	char release[65];
	int kv = kernel_version(release, sizeof(release)), ret;

	ret = area_choose(z, DMT_OPT(opts, devmemtcp_zcrx_opts, flags, 0), release, kv);
	if (ret)
		return ret;
	nbufs = z->area_size / (uint64_t)sysconf(_SC_PAGESIZE);
	/* The handle's own socket: queue-get must ask the network namespace
	 * the queue was registered in, also from devmemtcp_zcrx_free on
	 * another thread. */
	ret = dmt_nl_open(&z->nl, NETLINK_GENERIC);
	if (ret)
		return dmt_err_set(&z->ctx->err, ret,
				   "cannot open a generic netlink socket: %s",
				   dmt_errno_name(ret));
	/* enough CQEs for every buffer twice between two looks at the CQ */
	ret = ring_setup(z, cq ? cq : pow2_at_least(2 * nbufs, 256, 65536),
			 release, kv);
	if (ret)
		return ret;
	/* room to give every buffer back at once */
	z->rq_entries = rq ? rq : pow2_at_least(nbufs, 64, DMT_ZCRX_RQ_MAX);
	ret = dmt_zcrx_region_alloc(z);
	if (ret)
		return dmt_err_set(&z->ctx->err, ret,
				   "no memory for the %zu-byte refill ring",
				   z->region_len);
	ret = register_ifq(z, release, kv);
	if (ret)
		return ret;
	ret = queue_state(z, &z->napi_id);
	if (ret == 0)
		dmt_log(z->ctx, DEVMEMTCP_LOG_WARN,
			"zcrx: queue-get does not show the io_uring provider on %s queue %u",
			z->ifname, z->queue);
	return 0;
}

DEVMEMTCP_EXPORT int devmemtcp_zcrx_new(struct devmemtcp_ctx *ctx, int ifindex,
					uint32_t queue, struct devmemtcp_buf *buf,
					const struct devmemtcp_zcrx_opts *opts,
					struct devmemtcp_zcrx **zp)
{
	DMT_KEEP_ERRNO;
	struct devmemtcp_zcrx *z;
	int ret;

	if (!ctx)
		return -EINVAL;
	ret = zcrx_args_check(ctx, ifindex, buf, opts, zp);
	if (ret)
		return ret;
	z = dmt_calloc(1, sizeof(*z));
	if (!z)
		return dmt_err(ctx, &ctx->err, -ENOMEM, "devmemtcp_zcrx_new: out of memory");
	z->ctx = ctx;
	z->ring_fd = -1;
	z->refs = 1;
	z->fork_gen = dmt_fork_gen();
	z->ifindex = ifindex;
	z->queue = queue;
	z->buf = buf;
	z->free_slot = DMT_ZCRX_NO_SLOT;
	z->st.sz = sizeof(z->st);
	dmt_ifname(ifindex, z->ifname);
	pthread_mutex_init(&z->lock, NULL);
	ret = zcrx_setup(z, opts);
	if (ret) {
		ctx->err.code = ret;
		dmt_err_log(ctx, &ctx->err);
		zcrx_free_setup(z);
		return ret;
	}
	*zp = z;
	return 0;
}

/* ---- teardown --------------------------------------------------------------- */

/* After the ring is closed the kernel releases the queue in a work item:
 * wait until queue-get stops showing the provider, so that a NIC restore
 * that follows finds the queue free. */
static void wait_queue_released(struct devmemtcp_zcrx *z)
{
	struct timespec nap = { 0, 5 * 1000 * 1000 };
	int ret = 1;

	for (int i = 0; i < QUEUE_RELEASE_MS / 5 && ret > 0; i++) {
		ret = queue_state(z, NULL);
		if (ret > 0)
			nanosleep(&nap, NULL);
	}
	if (ret > 0)
		dmt_log(z->ctx, DEVMEMTCP_LOG_WARN,
			"zcrx: %s queue %u still shows the io_uring provider %d s after the ring was closed",
			z->ifname, z->queue, QUEUE_RELEASE_MS / 1000);
}

DEVMEMTCP_EXPORT void devmemtcp_zcrx_free(struct devmemtcp_zcrx *z)
{
	DMT_KEEP_ERRNO;
	bool forked;

	if (!z)
		return;
	pthread_mutex_lock(&z->lock);
	z->closed = true;
	/* the ring's mappings hold its file: unmap them before the close */
	if (z->rings) {
		munmap(z->sqes, z->sqes_len);
		munmap(z->rings, z->rings_len);
		z->sqes = NULL;
		z->rings = NULL;
		close(z->ring_fd);
		z->ring_fd = -1;
	}
	pthread_mutex_unlock(&z->lock);
	/* a parent's in a forked child: closing this process's copies of
	 * the ring and the socket releases nothing (the parent's stay open),
	 * so there is nothing to wait for and nothing to report */
	forked = dmt_forked(z->fork_gen);
	if (z->nl && !forked)
		wait_queue_released(z);
	dmt_nl_close(z->nl);
	z->nl = NULL;
	pthread_mutex_lock(&z->lock);
	if (z->st.sockets && !forked)
		dmt_log(z->ctx, DEVMEMTCP_LOG_WARN,
			"devmemtcp_zcrx_free: %llu receive handles still use the zcrx handle: their receives fail with ESHUTDOWN; free them",
			(unsigned long long)z->st.sockets);
	dmt_zcrx_put_unlock(z);
}

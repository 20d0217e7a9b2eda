// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Transmit from device memory: sendmsg(MSG_ZEROCOPY) with an
 * SCM_DEVMEM_DMABUF cmsg whose iovecs carry dma-buf offsets, and the
 * MSG_ERRQUEUE completions that say when a range may be rewritten.  The
 * binding it sends through comes from bind-tx in lib/nic/netdev.c.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <libmnl/libmnl.h>
#include <linux/errqueue.h>
#include <linux/rtnetlink.h>

#include "core/fork.h"
#include "nic/netdev.h"
#include "nl/nl.h"
#include "tx.h"

#ifndef SO_BINDTODEVICE
#define SO_BINDTODEVICE 25
#endif

#define DELIVER_BATCH 64

/* ---- the handle --------------------------------------------------------- */

static ssize_t real_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return sendmsg(fd, msg, flags);
}

static ssize_t real_recvmsg(int fd, struct msghdr *msg, int flags)
{
	return recvmsg(fd, msg, flags);
}

int dmt_tx_init(struct devmemtcp_tx *tx, struct devmemtcp_ctx *ctx, int fd,
		int family, uint32_t binding_id, int bound_ifindex,
		uint64_t buf_size, const struct devmemtcp_tx_opts *opts)
{
	uint64_t call = DMT_OPT(opts, devmemtcp_tx_opts, max_call_bytes,
				DMT_TX_DEFAULT_CALL_BYTES);

	memset(tx, 0, sizeof(*tx));
	tx->ctx = ctx;
	tx->fork_gen = dmt_fork_gen();
	tx->fd = fd;
	tx->family = family;
	tx->binding_id = binding_id;
	tx->bound_ifindex = bound_ifindex;
	tx->buf_size = buf_size;
	tx->max_iovs = DMT_OPT(opts, devmemtcp_tx_opts, max_iovs,
			       DMT_TX_MAX_IOVS);
	if (tx->max_iovs > DMT_TX_MAX_IOVS)
		tx->max_iovs = DMT_TX_MAX_IOVS;
	/* the kernel moves at most MAX_RW_COUNT (INT_MAX & PAGE_MASK) */
	tx->max_call_bytes = call > (1ull << 30) ? (1ull << 30) : call;
	tx->iov = dmt_calloc(tx->max_iovs, sizeof(*tx->iov));
	if (!tx->iov)
		return -ENOMEM;
	dmt_tx_track_init(&tx->track, 0,
			  DMT_OPT(opts, devmemtcp_tx_opts, done_fn, NULL),
			  DMT_OPT(opts, devmemtcp_tx_opts, done_user, NULL));
	tx->st.sz = sizeof(tx->st);
	tx->sys_sendmsg = real_sendmsg;
	tx->sys_recvmsg = real_recvmsg;
	tx->sys_poll = poll;
	return 0;
}

void dmt_tx_fini(struct devmemtcp_tx *tx)
{
	dmt_tx_track_fini(&tx->track);
	free(tx->iov);
	tx->iov = NULL;
}

DEVMEMTCP_EXPORT int devmemtcp_tx_new(struct devmemtcp_ctx *ctx, int fd,
				      const struct devmemtcp_binding *binding,
				      const struct devmemtcp_tx_opts *opts,
				      struct devmemtcp_tx **txp)
{
	DMT_KEEP_ERRNO;
	struct devmemtcp_tx *tx;
	int domain = 0, one = 1, ret;

	if (!ctx)
		return -EINVAL;
	if (!txp)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_tx_new: tx pointer is NULL");
	*txp = NULL;
	ret = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_tx_opts);
	if (ret)
		return ret;
	if (!binding)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_tx_new: binding is NULL: bind the buffer with devmemtcp_bind_tx() first");
	if (!binding->tx)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_tx_new: binding %u is an RX binding: sending needs one made by devmemtcp_bind_tx()",
			       binding->id);
	if (dmt_forked(binding->fork_gen))
		return dmt_fork_refuse(ctx, &ctx->err, "devmemtcp_tx_new", "binding");
	ret = dmt_tcp_check(ctx, "devmemtcp_tx_new", "devmem TX", fd, &domain);
	if (ret)
		return ret;
	if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one))) {
		ret = -errno;
		return dmt_err(ctx, &ctx->err, ret,
			       "devmemtcp_tx_new: setsockopt(SO_ZEROCOPY) on fd %d failed: %s: the kernel lacks MSG_ZEROCOPY (Linux 4.14) or the socket is not TCP",
			       fd, strerror(-ret));
	}
	tx = dmt_malloc(sizeof(*tx));
	if (!tx)
		return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_tx_new");
	ret = dmt_tx_init(tx, ctx, fd, domain, binding->id, binding->ifindex,
			  binding->buf ? devmemtcp_buf_size(binding->buf) : 0,
			  opts);
	if (ret) {
		dmt_tx_fini(tx);
		free(tx);
		return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_tx_new");
	}
	*txp = tx;
	return 0;
}

DEVMEMTCP_EXPORT void devmemtcp_tx_free(struct devmemtcp_tx *tx)
{
	DMT_KEEP_ERRNO;
	if (!tx)
		return;
	/* a parent's in a forked child too: only memory (the socket is the
	 * caller's, completions not reaped stay in its error queue) */
	dmt_tx_fini(tx);
	free(tx);
}

DEVMEMTCP_EXPORT const char *devmemtcp_tx_errmsg(const struct devmemtcp_tx *tx)
{
	DMT_KEEP_ERRNO;
	return tx ? tx->err.msg : "";
}

DEVMEMTCP_EXPORT int devmemtcp_tx_fd(const struct devmemtcp_tx *tx)
{
	DMT_KEEP_ERRNO;
	return tx ? tx->fd : -EINVAL;
}

/* Hand queued ranges to the callback, if there is one.  Returns how many. */
static int deliver(struct devmemtcp_tx *tx)
{
	struct devmemtcp_tx_done batch[DELIVER_BATCH];
	int total = 0;
	size_t n;

	if (!tx->track.done_fn || tx->in_callback)
		return 0;
	tx->in_callback = true;
	while ((n = dmt_tx_track_pop(&tx->track, batch, DELIVER_BATCH))) {
		tx->track.done_fn(tx->track.done_user, batch, n);
		total += (int)n;
	}
	tx->in_callback = false;
	return total;
}

int dmt_tx_drain(struct devmemtcp_tx *tx)
{
	/* the error, the offender's address, and room for IP_PKTINFO & co */
	union {
		char buf[512];
		struct cmsghdr align;
	} ctrl;
	struct dmt_tx_notif nt;
	int total = 0, ret;

	if (tx->held) {
		ret = dmt_tx_track_complete(&tx->track, tx->held_notif.lo,
					    tx->held_notif.hi,
					    tx->held_notif.copied);
		if (ret < 0)
			return dmt_err(tx->ctx, &tx->err, ret,
				       "out of memory queueing completed ranges (the completion is kept; call again)");
		tx->held = false;
		total += ret;
	}
	for (;;) {
		struct msghdr msg = { 0 };
		ssize_t r;

		msg.msg_control = ctrl.buf;
		msg.msg_controllen = sizeof(ctrl.buf);
		r = tx->sys_recvmsg(tx->fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return total;
			ret = -errno;
			return dmt_err(tx->ctx, &tx->err, ret,
				       "recvmsg(MSG_ERRQUEUE) on fd %d failed: %s",
				       tx->fd, strerror(-ret));
		}
		ret = dmt_tx_parse_errqueue(&msg, &nt);
		if (ret <= 0 || !nt.zerocopy) {
			dmt_log(tx->ctx, DEVMEMTCP_LOG_DEBUG,
				"fd %d: error-queue message that is not a zero-copy completion (origin %u, errno %d) skipped",
				tx->fd, nt.origin, nt.ee_errno);
			continue;
		}
		if (nt.ee_errno)
			tx->track.errored_notifications++;
		ret = dmt_tx_track_complete(&tx->track, nt.lo, nt.hi,
					    nt.copied);
		if (ret < 0) {
			/* the kernel will not send it again: keep it */
			tx->held = true;
			tx->held_notif = nt;
			return dmt_err(tx->ctx, &tx->err, ret,
				       "out of memory queueing completed ranges (the completion is kept; call again)");
		}
		if (nt.copied && !tx->warned_copied) {
			tx->warned_copied = true;
			dmt_log(tx->ctx, DEVMEMTCP_LOG_WARN,
				"fd %d: the kernel copied sends %u..%u instead of sending them zero-copy (SO_EE_CODE_ZEROCOPY_COPIED)",
				tx->fd, nt.lo, nt.hi);
		}
		total += ret;
	}
}

/* Wait up to timeout_ms (< 0: forever) for the error queue.  1 when
 * something may be there, 0 on timeout, negative errno on a socket error
 * (SO_ERROR) or poll failure. */
static int wait_err(struct devmemtcp_tx *tx, int timeout_ms)
{
	struct pollfd p = { .fd = tx->fd, .events = 0 };
	int ret;

	ret = tx->sys_poll(&p, 1, timeout_ms);
	if (ret < 0)
		return errno == EINTR ? 1 : -errno;
	if (!ret)
		return 0;
	if (p.revents & POLLNVAL)
		return -EBADF;
	if (!(p.revents & POLLERR)) {
		/* POLLHUP alone: the peer is gone; completions still come
		 * as the skbs are freed, so look again shortly */
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
	}
	return 1;
}

/* The socket reported POLLERR but the error queue was empty: sk_err. */
static int socket_error(struct devmemtcp_tx *tx)
{
	int e = 0;
	socklen_t len = sizeof(e);

	if (getsockopt(tx->fd, SOL_SOCKET, SO_ERROR, &e, &len) || !e)
		return 0;
	return dmt_err(tx->ctx, &tx->err, -e,
		       "fd %d: the connection failed (%s) with %llu sends (%llu bytes) not yet completed",
		       tx->fd, strerror(e),
		       (unsigned long long)tx->track.in_flight,
		       (unsigned long long)tx->track.bytes_in_flight);
}

DEVMEMTCP_EXPORT int devmemtcp_tx_wait(struct devmemtcp_tx *tx, int timeout_ms)
{
	DMT_KEEP_ERRNO;
	int64_t deadline = timeout_ms >= 0 ? dmt_now_ms() + timeout_ms : 0;
	int got = 0, ret;

	if (!tx)
		return dmt_err(NULL, NULL, -EINVAL, "devmemtcp_tx_wait: tx is NULL");
	if (dmt_forked(tx->fork_gen))
		return dmt_fork_refuse(tx->ctx, &tx->err, "devmemtcp_tx_wait", "TX handle");
	for (;;) {
		ret = dmt_tx_drain(tx);
		if (ret < 0)
			return ret;
		got += ret;
		if (got) {
			deliver(tx);
			return got;
		}
		if (!tx->track.in_flight) {
			deliver(tx);
			return 0;
		}
		if (timeout_ms >= 0) {
			int64_t left = deadline - dmt_now_ms();

			if (left <= 0) {
				/* recorded, not logged: polling with a short
				 * timeout is normal use */
				return dmt_err_set(&tx->err, -ETIMEDOUT,
						   "fd %d: no completion within %d ms (%llu sends, %llu bytes in flight): is the peer reading?",
						   tx->fd, timeout_ms,
						   (unsigned long long)tx->track.in_flight,
						   (unsigned long long)tx->track.bytes_in_flight);
			}
			ret = wait_err(tx, (int)left);
		} else {
			ret = wait_err(tx, -1);
		}
		if (ret < 0)
			return dmt_err(tx->ctx, &tx->err, ret,
				       "poll on fd %d failed: %s", tx->fd,
				       strerror(-ret));
		if (ret > 0) {
			ret = dmt_tx_drain(tx);
			if (ret < 0)
				return ret;
			got += ret;
			if (!ret && !got) {
				ret = socket_error(tx);
				if (ret < 0)
					return ret;
			}
			if (got) {
				deliver(tx);
				return got;
			}
		}
	}
}

DEVMEMTCP_EXPORT int devmemtcp_tx_reap(struct devmemtcp_tx *tx,
				       struct devmemtcp_tx_done *out,
				       size_t max)
{
	DMT_KEEP_ERRNO;
	int ret;

	if (!tx)
		return dmt_err(NULL, NULL, -EINVAL, "devmemtcp_tx_reap: tx is NULL");
	if (dmt_forked(tx->fork_gen))
		return dmt_fork_refuse(tx->ctx, &tx->err, "devmemtcp_tx_reap", "TX handle");
	if (max && !out)
		return dmt_err(tx->ctx, &tx->err, -EINVAL,
			       "devmemtcp_tx_reap: out is NULL with max %zu",
			       max);
	ret = dmt_tx_drain(tx);
	if (ret < 0)
		return ret;
	if (tx->track.done_fn)
		return deliver(tx);
	return (int)dmt_tx_track_pop(&tx->track, out,
				     max > INT_MAX ? INT_MAX : max);
}

DEVMEMTCP_EXPORT int devmemtcp_tx_stats(const struct devmemtcp_tx *tx,
					struct devmemtcp_tx_stats *stats)
{
	DMT_KEEP_ERRNO;
	struct devmemtcp_tx_stats s;

	if (!tx || !stats || stats->sz < sizeof(size_t))
		return -EINVAL;
	s = tx->st;
	s.notifications = tx->track.notifications;
	s.completions = tx->track.completions;
	s.copied_completions = tx->track.copied_completions;
	s.ranges_done = tx->track.ranges_done;
	s.bytes_done = tx->track.bytes_done;
	s.sends_in_flight = tx->track.in_flight;
	s.bytes_in_flight = tx->track.bytes_in_flight;
	s.unknown_completions = tx->track.unknown_completions;
	dmt_copy_out(stats, &s, sizeof(s));
	return 0;
}

/* ---- -ENODEV: which device does the route use? -------------------------- */

static int route_attr_cb(const struct nlattr *attr, void *data)
{
	if (mnl_attr_get_type(attr) == RTA_OIF &&
	    mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
		*(int *)data = (int)mnl_attr_get_u32(attr);
	return MNL_CB_OK;
}

static int route_cb(const struct nlmsghdr *nlh, void *data)
{
	if (nlh->nlmsg_type != RTM_NEWROUTE)
		return MNL_CB_OK;
	mnl_attr_parse(nlh, sizeof(struct rtmsg), route_attr_cb, data);
	return MNL_CB_OK;
}

/* The addresses of the socket's route: from its local address to its
 * peer, a v4-mapped IPv6 pair as IPv4. */
struct route_key {
	unsigned char family;
	size_t alen;
	const void *dst, *src;
};

static void route_key(const struct sockaddr_storage *peer,
		      const struct sockaddr_storage *self, struct route_key *k)
{
	const struct sockaddr_in *p4 = (const void *)peer, *s4 = (const void *)self;
	const struct in6_addr *d = &((const struct sockaddr_in6 *)peer)->sin6_addr;
	const struct in6_addr *s = &((const struct sockaddr_in6 *)self)->sin6_addr;

	if (peer->ss_family == AF_INET) {
		*k = (struct route_key){ AF_INET, 4, &p4->sin_addr,
					 &s4->sin_addr };
	} else if (IN6_IS_ADDR_V4MAPPED(d)) {
		*k = (struct route_key){ AF_INET, 4, &d->s6_addr[12],
					 &s->s6_addr[12] };
	} else {
		*k = (struct route_key){ AF_INET6, 16, d, s };
	}
}

/* RTM_GETROUTE for the socket's peer (from its local address): the
 * output interface index, or a negative errno. */
static int route_oif(int fd)
{
	struct sockaddr_storage peer, self;
	socklen_t plen = sizeof(peer), slen = sizeof(self);
	char buf[256];
	struct route_key k;
	struct nlmsghdr *nlh;
	struct rtmsg *rtm;
	struct dmt_nl *nl;
	int oif = 0, ret;

	if (getpeername(fd, (struct sockaddr *)&peer, &plen) ||
	    getsockname(fd, (struct sockaddr *)&self, &slen))
		return -errno;
	route_key(&peer, &self, &k);
	nlh = dmt_nl_msg(buf, RTM_GETROUTE, 0);
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = k.family;
	rtm->rtm_dst_len = (unsigned char)(k.alen * 8);
	mnl_attr_put(nlh, RTA_DST, k.alen, k.dst);
	mnl_attr_put(nlh, RTA_SRC, k.alen, k.src);
	/* A socket of its own: the question is rtnetlink's (the context's
	 * socket is generic netlink), asked once after a send failed with
	 * ENODEV, from whichever thread sends. */
	ret = dmt_nl_open(&nl, NETLINK_ROUTE);
	if (ret)
		return ret;
	ret = dmt_nl_talk(nl, nlh, route_cb, &oif);
	dmt_nl_close(nl);
	if (ret)
		return ret;
	return oif > 0 ? oif : -ENOENT;
}

int dmt_tx_explain_enodev(struct devmemtcp_tx *tx)
{
	char bound[DMT_IFNAME_MAX], dev[IF_NAMESIZE] = "", how[64];
	socklen_t len = sizeof(dev);
	int oif;

	dmt_ifname(tx->bound_ifindex, bound);
	if (!getsockopt(tx->fd, SOL_SOCKET, SO_BINDTODEVICE, dev, &len) &&
	    len > 0 && dev[0]) {
		dev[sizeof(dev) - 1] = '\0';
		snprintf(how, sizeof(how), "socket is bound (SO_BINDTODEVICE) to");
	} else {
		oif = route_oif(tx->fd);
		if (oif > 0 && if_indextoname((unsigned int)oif, dev))
			snprintf(how, sizeof(how), "socket's route leaves through");
		else
			dev[0] = '\0';
	}
	if (!dev[0])
		return dmt_err(tx->ctx, &tx->err, -ENODEV,
			       "sendmsg on fd %d failed with ENODEV: the socket's route does not leave through %s, to which the dma-buf is bound (binding %u), or %s went away: SO_BINDTODEVICE the socket to %s / fix the route",
			       tx->fd, bound, tx->binding_id, bound, bound);
	if (!strcmp(dev, bound))
		return dmt_err(tx->ctx, &tx->err, -ENODEV,
			       "sendmsg on fd %d failed with ENODEV: the %s %s, the device the dma-buf is bound to (binding %u), yet the kernel refused it: the binding's device went away or was re-created; bind again",
			       tx->fd, how, dev, tx->binding_id);
	return dmt_err(tx->ctx, &tx->err, -ENODEV,
		       "sendmsg on fd %d failed with ENODEV: the %s %s but the dma-buf is bound to %s (binding %u): SO_BINDTODEVICE the socket to %s / fix the route to the peer so it leaves through %s",
		       tx->fd, how, dev, bound, tx->binding_id, bound, bound);
}

/* ---- sending ------------------------------------------------------------ */

static int explain_send(struct devmemtcp_tx *tx, int err)
{
	switch (err) {
	case -ENODEV:
		return dmt_tx_explain_enodev(tx);
	case -EINVAL:
		return dmt_err(tx->ctx, &tx->err, err,
			       "sendmsg(MSG_ZEROCOPY, SCM_DEVMEM_DMABUF) on fd %d failed with EINVAL: the kernel does not know TX binding %u (closed, or an RX binding), SO_ZEROCOPY is off, or the kernel predates devmem TX (Linux 6.16)",
			       tx->fd, tx->binding_id);
	case -EOPNOTSUPP:
		return dmt_err(tx->ctx, &tx->err, err,
			       "sendmsg with SCM_DEVMEM_DMABUF on fd %d failed with EOPNOTSUPP: this kernel cannot send from device memory: devmem TX needs Linux 6.16 or newer",
			       tx->fd);
	case -EFAULT:
		return dmt_err(tx->ctx, &tx->err, err,
			       "sendmsg on fd %d failed with EFAULT: an offset lies outside the dma-buf as bound (binding %u, %llu bytes)",
			       tx->fd, tx->binding_id,
			       (unsigned long long)tx->buf_size);
	case -EHOSTUNREACH:
	case -ENETUNREACH:
		return dmt_err(tx->ctx, &tx->err, err,
			       "sendmsg on fd %d failed: %s: no route to the peer",
			       tx->fd, strerror(-err));
	case -EMSGSIZE:
		return dmt_err(tx->ctx, &tx->err, err,
			       "sendmsg on fd %d failed with EMSGSIZE: more pieces than one packet may carry (MAX_SKB_FRAGS): merge adjacent pieces or lower max_iovs",
			       tx->fd);
	case -EPIPE:
	case -ECONNRESET:
		return dmt_err(tx->ctx, &tx->err, err,
			       "sendmsg on fd %d failed: %s: the connection is closed; in-flight ranges complete as the kernel frees them",
			       tx->fd, strerror(-err));
	default:
		return dmt_err(tx->ctx, &tx->err, err,
			       "sendmsg(MSG_ZEROCOPY) on fd %d failed: %s",
			       tx->fd, strerror(-err));
	}
}

/* ENOBUFS: the socket's option memory is full of unreported completions.
 * Read them (waiting when the queue is empty).  0 to retry, or errno. */
static int wait_nobufs(struct devmemtcp_tx *tx)
{
	int ret = dmt_tx_drain(tx);

	if (ret < 0)
		return ret;
	tx->st.nobufs_waits++;
	if (ret) {
		deliver(tx);
		return 0;
	}
	if (!tx->track.in_flight)
		return dmt_err(tx->ctx, &tx->err, -ENOBUFS,
			       "sendmsg(MSG_ZEROCOPY) on fd %d failed with ENOBUFS with nothing in flight: raise net.core.optmem_max",
			       tx->fd);
	/* block like a full send buffer would: until the peer ACKs */
	ret = devmemtcp_tx_wait(tx, -1);
	return ret < 0 ? ret : 0;
}

/* sendmsg failed with err: 0 to try again, else what the send returns
 * (after the bytes already sent). */
static int send_failed(struct devmemtcp_tx *tx, unsigned int flags, int err)
{
	if (err == -EINTR)
		return 0;
	if (err == -ENOBUFS && !(flags & DEVMEMTCP_TX_DONTWAIT))
		return wait_nobufs(tx);
	if (err == -EAGAIN || err == -EWOULDBLOCK || err == -ENOBUFS)
		return err;
	return explain_send(tx, err);
}

DEVMEMTCP_EXPORT ssize_t devmemtcp_tx_send(struct devmemtcp_tx *tx,
					   const struct devmemtcp_tx_piece *pieces,
					   size_t n, unsigned int flags)
{
	DMT_KEEP_ERRNO;
	char ctrl[DMT_TX_CTRL_SIZE] __attribute__((aligned(8)));
	struct dmt_tx_cursor cur = { 0, 0 };
	uint64_t total, sent = 0, bytes;
	int mflags = MSG_ZEROCOPY | MSG_NOSIGNAL;
	size_t bad, niov;
	ssize_t r;
	int ret;

	if (!tx)
		return -EINVAL;
	if (dmt_forked(tx->fork_gen))
		return dmt_fork_refuse(tx->ctx, &tx->err, "devmemtcp_tx_send", "TX handle");
	if (flags & ~(unsigned int)(DEVMEMTCP_TX_DONTWAIT | DEVMEMTCP_TX_MORE))
		return dmt_err(tx->ctx, &tx->err, -EINVAL,
			       "devmemtcp_tx_send: unknown flags 0x%x",
			       flags & ~(unsigned int)(DEVMEMTCP_TX_DONTWAIT |
						       DEVMEMTCP_TX_MORE));
	if (n && !pieces)
		return dmt_err(tx->ctx, &tx->err, -EINVAL,
			       "devmemtcp_tx_send: pieces is NULL with n %zu", n);
	if (dmt_tx_check_pieces(pieces, n, tx->buf_size, &bad, &total))
		return dmt_err(tx->ctx, &tx->err, -ERANGE,
			       "devmemtcp_tx_send: piece %zu [%llu, +%llu) does not lie inside the %llu-byte dma-buf: pass offsets and lengths within the bound buffer",
			       bad, (unsigned long long)pieces[bad].offset,
			       (unsigned long long)pieces[bad].len,
			       (unsigned long long)tx->buf_size);
	if (total > SSIZE_MAX)
		return dmt_err(tx->ctx, &tx->err, -E2BIG,
			       "devmemtcp_tx_send: %llu bytes in one call: send at most SSIZE_MAX",
			       (unsigned long long)total);
	if (flags & DEVMEMTCP_TX_DONTWAIT)
		mflags |= MSG_DONTWAIT;
	if (flags & DEVMEMTCP_TX_MORE)
		mflags |= MSG_MORE;
	tx->st.send_calls++;
	for (;;) {
		struct msghdr msg = { 0 };

		niov = dmt_tx_fill_iov(pieces, n, &cur, tx->iov, tx->max_iovs,
				       tx->max_call_bytes, &bytes);
		if (!niov)
			break;
		if (dmt_tx_track_reserve(&tx->track, niov)) {
			if (sent)
				return (ssize_t)sent;
			return dmt_err_nomem(tx->ctx, &tx->err,
					     "devmemtcp_tx_send: tracking the completions");
		}
		msg.msg_iov = tx->iov;
		msg.msg_iovlen = niov;
		dmt_tx_put_cmsg(&msg, ctrl, sizeof(ctrl), tx->binding_id);
		r = tx->sys_sendmsg(tx->fd, &msg, mflags);
		if (r < 0) {
			ret = send_failed(tx, flags, -errno);
			if (!ret)
				continue;
			return sent ? (ssize_t)sent : ret;
		}
		if (!r)
			break;	/* cannot happen with bytes > 0; never spin */
		dmt_tx_track_sent(&tx->track, tx->iov, niov, (uint64_t)r);
		tx->st.sendmsg_calls++;
		tx->st.bytes_sent += (uint64_t)r;
		dmt_tx_advance(pieces, n, &cur, (uint64_t)r);
		sent += (uint64_t)r;
		if ((uint64_t)r < bytes) {
			tx->st.partial_sends++;
			if (flags & DEVMEMTCP_TX_DONTWAIT)
				break;
		}
	}
	return (ssize_t)sent;
}

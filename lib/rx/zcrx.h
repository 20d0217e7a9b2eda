/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: io_uring zero-copy receive (zcrx), the second receive backend,
 * its receive half (zcrx.c).  It owns struct devmemtcp_zcrx (made by the
 * control-plane half, nic/zcrx_ifq.c: the ring, the registration of one
 * interface queue with an area over a buffer, teardown): the completion
 * parser, the refill ring and the queue of releases that wait for room in
 * it, the table of fragments handed out (their ids are the tokens), the
 * sockets registered on the handle with the fragments their completions
 * brought, the ring's thread, and a fake handle for the tests.  The receive layer (rx.c) calls it for
 * sockets made with opts.zcrx: dmt_zcrx_recv replaces recvmsg, and
 * dmt_zcrx_refill is the token manager's return function, so releases,
 * deferred releases and statistics stay rx.c's.  It reads buffers (buf.h)
 * and never touches netlink or the NIC.
 *
 * Threads: one thread drives the ring (SQ, CQ, io_uring_enter): the first
 * that receives or waits on the handle.  Releases may come from any
 * thread; they write the refill ring under the handle's lock (no system
 * call), or queue when it is full, and the ring's thread drains that queue
 * before it waits.
 */
#ifndef DEVMEMTCP_ZCRX_H
#define DEVMEMTCP_ZCRX_H

#include <stdbool.h>
#include <stdint.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/uapi.h"

/* ---- the completion parser (pure, fuzzed) -------------------------------- */

enum dmt_zcrx_cqe_kind {
	DMT_ZCRX_CQE_DATA = 1,	/* bytes [off, off + len) of the area */
	DMT_ZCRX_CQE_END,	/* the receive ended: end of stream (res 0) */
	DMT_ZCRX_CQE_ERROR,	/* the receive ended with the error res */
};

struct dmt_zcrx_completion {
	uint64_t user_data;
	uint64_t off;		/* DATA: offset in the area (area bits removed) */
	uint32_t len;		/* DATA: bytes */
	int32_t res;		/* the CQE's result */
	uint32_t flags;		/* the CQE's flags */
};

/*
 * One 32-byte completion of a multishot IORING_OP_RECV_ZC as the kernel
 * writes it into a CQE32 ring: struct io_uring_cqe (user_data, res, flags)
 * then struct io_uring_zcrx_cqe (off with the area's token in bits 48..63,
 * pad).  area_token is the registered area's rq_area_token, area_size its
 * bytes, buf_size the area's buffer size (a power of two): a data
 * completion lies inside one buffer.  A pure function of its arguments
 * (no state, no allocation).  Returns the kind with *out filled, or
 * -EPROTO when the bytes cannot be a completion of a receive into this
 * area (data without IORING_CQE_F_MORE, another area, bytes outside the
 * area or across a buffer boundary, a positive result that ends the
 * receive).
 */
int dmt_zcrx_cqe_parse(const void *cqe, uint64_t area_token,
		       uint64_t area_size, uint32_t buf_size,
		       struct dmt_zcrx_completion *out);

/* ---- for the receive layer --------------------------------------------- */

struct dmt_zcrx_sock;

/* Register the TCP socket fd on z (armed later by the ring's thread).
 * 0 or a negative errno with the message on err. */
int dmt_zcrx_sock_new(struct devmemtcp_zcrx *z, int fd, struct dmt_err *err,
		      struct dmt_zcrx_sock **s);
/* Unregister: fragments received but not taken go back to the kernel, an
 * armed receive is cancelled (now on the ring's thread, else by it later). */
void dmt_zcrx_sock_free(struct dmt_zcrx_sock *s);
/* In a forked child, for a parent's socket: only this process's memory
 * goes (no refill, no cancel, no system call); the handle's reference is
 * dropped. */
void dmt_zcrx_sock_forget(struct dmt_zcrx_sock *s);

/*
 * The receive of a zcrx socket (the ring's thread): up to max fragments of
 * at most len bytes together (the first whatever its length), each with
 * its token (a fragment id of the handle), area offset (the buffer's
 * offset), device address and length.  Waits as recvmsg would on the
 * socket: not when it is non-blocking now, at most its SO_RCVTIMEO
 * (-EAGAIN after it).  Returns their number, 0 at the end of the
 * stream, or a negative errno (-EAGAIN: nothing yet) with the message on
 * err.  *miss: the flow arrives on another queue (the kernel copied).
 */
int dmt_zcrx_recv(struct dmt_zcrx_sock *s, struct devmemtcp_frag *frags,
		  size_t max, size_t len, struct dmt_err *err, bool *miss);

/* Put the last n fragments dmt_zcrx_recv handed out back in front of
 * s's queue (the caller could not account for them). */
void dmt_zcrx_unget(struct dmt_zcrx_sock *s, const struct devmemtcp_frag *frags,
		    size_t n);

/*
 * The token manager's return function for a zcrx socket (arg: the
 * struct dmt_zcrx_sock): the fragments of the token ranges go back to the
 * kernel through the refill ring.  Any thread.  Returns the number freed.
 */
int dmt_zcrx_refill(void *arg, const struct dmt_dmabuf_token *t, size_t n);

/* ---- unit tests: a handle whose kernel is the test ---------------------- */

/*
 * The rings of a fake handle, in plain memory: the test reads the SQEs
 * between *sq_head and *sq_tail and advances *sq_head, writes CQE32s and
 * advances *cq_tail, and takes refill entries between *rq_head and *rq_tail
 * (advancing *rq_head), as the kernel does.
 */
struct dmt_zcrx_fake_rings {
	struct dmt_io_uring_sqe *sqes;
	uint32_t *sq_head, *sq_tail;
	uint32_t sq_entries;
	uint8_t *cqes;
	uint32_t *cq_head, *cq_tail;
	uint32_t cq_entries;
	struct dmt_zcrx_rqe *rqes;
	uint32_t *rq_head, *rq_tail;
	uint32_t rq_entries;
	uint64_t area_token;
};

/* A handle over buf without io_uring or NIC (rq_entries a power of two):
 * the calling thread is the ring's, and where the handle would wait in
 * io_uring_enter it reads what the test put in the rings and goes on.
 * Free it with devmemtcp_zcrx_free().  Test builds only. */
int dmt_zcrx_fake_new(struct devmemtcp_ctx *ctx, struct devmemtcp_buf *buf,
		      uint32_t rq_entries, struct devmemtcp_zcrx **z,
		      struct dmt_zcrx_fake_rings *rings);

/* ---- the handle, for its control-plane half (nic/zcrx_ifq.c) ----------- */

#define DMT_ZCRX_CQE_SIZE 32		/* IORING_SETUP_CQE32 */
#define DMT_ZCRX_SQ_ENTRIES 64		/* arms and cancels only */
#define DMT_ZCRX_RQ_MAX 32768		/* the kernel's IO_RQ_MAX_ENTRIES */
#define DMT_ZCRX_RQ_HDR_ROOM 4096	/* head and tail: two cache lines on any arch */
#define DMT_ZCRX_NO_SLOT UINT32_MAX

struct dmt_zcrx_slot;
struct dmt_nl;

/* The kernel's view of a zcrx handle: made and registered by the control
 * plane (nic/zcrx_ifq.c: devmemtcp_zcrx_new, devmemtcp_zcrx_free),
 * driven by the receive half (zcrx.c). */
struct devmemtcp_zcrx {
	struct devmemtcp_ctx *ctx;
	struct dmt_err err;
	/* Slots, the refill ring, the waiting queue, the sockets, statistics
	 * and the life cycle below; the SQ and CQ belong to the ring's thread. */
	pthread_mutex_t lock;
	unsigned refs;		/* the handle and each socket */
	bool closed;		/* devmemtcp_zcrx_free ran */
	unsigned int fork_gen;	/* core/fork.h: a parent's in a forked child
				 * is neither driven nor refilled */
	int ring_fd;
	bool enabled;
	pthread_t thread;	/* the ring's thread once enabled */
	/* submission and completion queues */
	void *fake_mem;		/* unit tests: the rings in plain memory */
	void *rings;
	size_t rings_len;
	struct dmt_io_uring_sqe *sqes;
	size_t sqes_len;
	uint32_t *sq_head, *sq_tail, *sq_flags;
	uint32_t sq_mask, sq_entries, sq_local;
	uint32_t *cq_head, *cq_tail;
	uint32_t cq_mask, cq_entries;
	const uint8_t *cqes;
	/* the queue and its area */
	int ifindex;
	uint32_t queue;
	char ifname[DMT_IFNAME_MAX];
	/* queue-get and rings-get, opened in the namespace of the ifindex */
	struct dmt_nl *nl;
	uint32_t zcrx_id;
	uint32_t napi_id;	/* of the queue, 0: unknown */
	struct devmemtcp_buf *buf;
	bool dmabuf_area;
	uint64_t area_token;
	uint64_t area_size;
	uint32_t buf_size;
	/* the refill ring, in a region of our memory */
	void *region;
	size_t region_len;
	uint32_t *rq_head, *rq_tail;
	struct dmt_zcrx_rqe *rqes;
	uint32_t rq_entries, rq_local;
	const struct dmt_zcrx_kstats *kstats;	/* NULL: not reported */
	/* releases that found the refill ring full */
	struct dmt_zcrx_rqe *waiting;
	size_t nwaiting, waiting_cap;
	/* fragments handed out */
	struct dmt_zcrx_slot *slots;
	uint32_t nslots, free_slot;
	/* sockets (NULL holes) */
	struct dmt_zcrx_sock **socks;
	uint32_t nsocks;
	uint32_t gen;
	struct devmemtcp_zcrx_stats st;
};

static inline int dmt_zcrx_sys_register(int fd, uint32_t op, void *arg, uint32_t nr)
{
	long r = syscall(__NR_io_uring_register, fd, op, arg, nr);

	return r < 0 ? -errno : (int)r;
}

/* The refill ring's memory (its header, rq_entries entries and the
 * kernel's copy statistics after them): 0 or -ENOMEM. */
int dmt_zcrx_region_alloc(struct devmemtcp_zcrx *z);
/* Everything of z, z included (the control plane closed its socket). */
void dmt_zcrx_destroy(struct devmemtcp_zcrx *z);
/* Drop a reference with the lock held (released here); the last one
 * destroys z. */
void dmt_zcrx_put_unlock(struct devmemtcp_zcrx *z);

#endif

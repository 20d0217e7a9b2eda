/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: io_uring zero-copy receive (zcrx), the second receive backend,
 * beside the receive layer (6).  It owns struct devmemtcp_zcrx: the
 * io_uring and its rings, the registration of one interface queue with an
 * area over a buffer, the refill ring and the queue of releases that wait
 * for room in it, the table of fragments handed out (their ids are the
 * tokens), and the sockets registered on the handle with the fragments
 * their completions brought.  The receive layer (rx.c) calls it for
 * sockets made with opts.zcrx: dmt_zcrx_recv replaces recvmsg, and
 * dmt_zcrx_refill is the token manager's return function, so releases,
 * deferred releases and statistics stay rx.c's.  It reads buffers (buf.h),
 * asks queue-get for the queue's NAPI id and release (netdev.h) and reads
 * the rings settings to explain a refused registration (ethtool.h).
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

/*
 * The receive of a zcrx socket (the ring's thread): up to max fragments of
 * at most len bytes together (the first whatever its length), each with
 * its token (a fragment id of the handle), area offset (the buffer's
 * offset), device address and length.  Blocks unless the socket was
 * non-blocking when registered.  Returns their number, 0 at the end of the
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

/* ---- for probe --------------------------------------------------------- */

struct dmt_zcrx_support {
	int zcrx;		/* 1 this kernel has it, 0 no, -1 unknown */
	int dmabuf;		/* dma-buf areas: 1, 0, -1 */
	char msg[160];		/* why not, or "" */
};

/* What this kernel offers (a small ring, no registration): 0, or -ENOMEM
 * when the answer is unknown for lack of memory. */
int dmt_zcrx_support(struct dmt_zcrx_support *s);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the tx layer, the devmem send data path.  It owns the send
 * handle: iovecs of dma-buf offsets under an SCM_DEVMEM_DMABUF cmsg, the
 * MSG_ZEROCOPY completion tracking (track.c, pure, fuzzed), and the
 * explanation of send errors (tx.c).
 * It reads the binding made by bind-tx in the netdev layer and asks the
 * nl layer (rtnetlink) for a route when explaining ENODEV; nothing below
 * it calls it.
 */
#ifndef DEVMEMTCP_TX_H
#define DEVMEMTCP_TX_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core/internal.h"
#include "core/uapi.h"

/* include/uapi/linux/uio.h: the kernel rejects more iovs per call. */
#define DMT_TX_MAX_IOVS 1024
/* Bytes per sendmsg unless opts say otherwise: one completion covers one
 * sendmsg, so smaller calls free ranges sooner; 4 MiB keeps the syscall
 * count per GiB at 256. */
#define DMT_TX_DEFAULT_CALL_BYTES (4ull << 20)

/* include/uapi/linux/errqueue.h, each on its own */
#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif

/* ---- sending: where we are in the caller's piece list ------------------ */

struct dmt_tx_cursor {
	size_t piece;		/* index of the current piece */
	uint64_t off;		/* bytes of it already sent */
};

/*
 * Fill at most max_iovs iovecs with the bytes at cur, at most max_bytes in
 * total; iov_base is the dma-buf offset.  Empty pieces are skipped.
 * Returns the number of iovecs (0 at the end of the list) and their total
 * in *bytes.
 */
size_t dmt_tx_fill_iov(const struct devmemtcp_tx_piece *pieces, size_t n,
		       const struct dmt_tx_cursor *cur, struct iovec *iov,
		       size_t max_iovs, uint64_t max_bytes, uint64_t *bytes);
/* Move cur forward by bytes (what sendmsg returned). */
void dmt_tx_advance(const struct devmemtcp_tx_piece *pieces, size_t n,
		    struct dmt_tx_cursor *cur, uint64_t bytes);
/*
 * Check every piece lies inside a buffer of size bytes: 0, or -ERANGE with
 * *bad the index of the first piece that does not (or whose end
 * overflows).  *total gets the sum of lengths.
 */
int dmt_tx_check_pieces(const struct devmemtcp_tx_piece *pieces, size_t n,
			uint64_t size, size_t *bad, uint64_t *total);
/*
 * Put the SOL_SOCKET/SCM_DEVMEM_DMABUF cmsg carrying binding id into ctrl
 * (at least CMSG_SPACE(4) bytes, zeroed here) and point msg at it.
 */
void dmt_tx_put_cmsg(struct msghdr *msg, void *ctrl, size_t ctrl_size,
		     uint32_t binding_id);
#define DMT_TX_CTRL_SIZE CMSG_SPACE(sizeof(uint32_t))

/* ---- completion tracking ------------------------------------------------ */

/* One sendmsg that moved bytes: its sequence number and its ranges. */
struct dmt_tx_rec {
	uint64_t first;		/* absolute index of its first range */
	uint32_t nranges;
	bool done;
};

struct dmt_tx_track {
	/* records, a ring indexed by seq - head_seq */
	struct dmt_tx_rec *recs;
	size_t rec_cap;		/* power of two */
	size_t rec_head;	/* ring slot of head_seq */
	size_t nrecs;		/* head_seq .. head_seq + nrecs - 1 recorded */
	uint32_t head_seq;	/* oldest recorded sequence number */
	uint32_t next_seq;	/* what the next sendmsg will get */
	/* ranges of all records, a ring indexed by absolute index */
	struct devmemtcp_tx_piece *ranges;
	size_t range_cap;	/* power of two */
	uint64_t range_head;	/* absolute index of the oldest kept */
	uint64_t range_tail;	/* absolute index one past the newest */
	/* completed ranges not yet reaped (when there is no callback) */
	struct devmemtcp_tx_done *done;
	size_t done_head, done_len, done_cap;
	devmemtcp_tx_done_fn done_fn;
	void *done_user;
	/* counters */
	uint64_t in_flight;	/* recorded sendmsg calls not completed */
	uint64_t bytes_in_flight;
	uint64_t notifications;
	uint64_t completions;
	uint64_t copied_completions;
	uint64_t unknown_completions;	/* seqs not in flight (dup/foreign) */
	uint64_t ranges_done;
	uint64_t bytes_done;
	uint64_t errored_notifications;	/* ee_errno != 0 */
	bool fail_alloc;	/* unit tests: the next done-queue growth fails */
};

void dmt_tx_track_init(struct dmt_tx_track *t, uint32_t first_seq,
		       devmemtcp_tx_done_fn fn, void *user);
void dmt_tx_track_fini(struct dmt_tx_track *t);
/*
 * One sendmsg returned sent > 0 bytes of the iovecs iov[0..niov): record
 * the ranges it covered (contiguous ones merged) under next_seq, which is
 * then incremented.  Call dmt_tx_track_reserve first: then it cannot fail.
 * 0, or -ENOMEM without a reservation (next_seq is incremented anyway:
 * the kernel consumed the number, and its ranges are lost).
 */
int dmt_tx_track_sent(struct dmt_tx_track *t, const struct iovec *iov,
		      size_t niov, uint64_t sent);
/*
 * The kernel completed sequence numbers lo..hi (inclusive, wrapping);
 * copied: SO_EE_CODE_ZEROCOPY_COPIED.  Puts each range of those records
 * on the done queue once (contiguous ranges merged).  Returns the number
 * of ranges queued, or -ENOMEM (the queue could not grow; nothing is
 * marked, so a repeated notification would still find them).
 */
int dmt_tx_track_complete(struct dmt_tx_track *t, uint32_t lo, uint32_t hi,
			  bool copied);
/* Move up to max completed ranges off the done queue into out (out may be
 * NULL with max 0).  Returns how many were moved. */
size_t dmt_tx_track_pop(struct dmt_tx_track *t, struct devmemtcp_tx_done *out,
			size_t max);
/* Reserve room so that the next dmt_tx_track_sent of up to niov iovecs
 * cannot fail.  0 or -ENOMEM. */
int dmt_tx_track_reserve(struct dmt_tx_track *t, size_t niov);

/* What one MSG_ERRQUEUE message said. */
struct dmt_tx_notif {
	bool zerocopy;		/* an SO_EE_ORIGIN_ZEROCOPY notification */
	bool copied;
	uint32_t lo, hi;
	int ee_errno;		/* from sock_extended_err */
	uint8_t origin;
};

/*
 * Parse the control buffer of a recvmsg(MSG_ERRQUEUE): the first
 * SOL_IP/IP_RECVERR or SOL_IPV6/IPV6_RECVERR cmsg.  Returns 1 with *n
 * filled, 0 when the message carries no extended error (or none that lies
 * inside msg_controllen), -EBADMSG when a RECVERR cmsg is too short.
 */
int dmt_tx_parse_errqueue(const struct msghdr *msg, struct dmt_tx_notif *n);

/* ---- the handle ----------------------------------------------------------- */

struct devmemtcp_tx {
	struct devmemtcp_ctx *ctx;
	struct dmt_err err;
	int fd;
	int family;		/* AF_INET or AF_INET6 of the socket */
	uint32_t binding_id;
	int bound_ifindex;
	uint64_t buf_size;
	size_t max_iovs;
	uint64_t max_call_bytes;
	struct iovec *iov;	/* max_iovs entries */
	struct dmt_tx_track track;
	struct devmemtcp_tx_stats st;
	unsigned int fork_gen;	/* core/fork.h */
	bool in_callback;
	bool warned_copied;
	/* a completion read from the kernel that could not be queued (out of
	 * memory): retried first by the next drain, never dropped */
	bool held;
	struct dmt_tx_notif held_notif;	/* delivering to done_fn: no nested delivery */
	/* the system calls, replaced by the unit tests */
	ssize_t (*sys_sendmsg)(int fd, const struct msghdr *msg, int flags);
	ssize_t (*sys_recvmsg)(int fd, struct msghdr *msg, int flags);
	int (*sys_poll)(struct pollfd *fds, nfds_t n, int timeout);
};

/*
 * Set up tx around fd without touching the socket (no SO_ZEROCOPY, no
 * checks): what devmemtcp_tx_new does after its checks, for unit tests.
 */
int dmt_tx_init(struct devmemtcp_tx *tx, struct devmemtcp_ctx *ctx, int fd,
		int family, uint32_t binding_id, int bound_ifindex,
		uint64_t buf_size, const struct devmemtcp_tx_opts *opts);
void dmt_tx_fini(struct devmemtcp_tx *tx);

/* Read every queued MSG_ERRQUEUE message without blocking.  Returns the
 * number of ranges completed, or a negative errno. */
int dmt_tx_drain(struct devmemtcp_tx *tx);

/* Explain an -ENODEV from sendmsg: name the device the socket's route
 * leaves through (SO_BINDTODEVICE, else RTM_GETROUTE to the peer). */
int dmt_tx_explain_enodev(struct devmemtcp_tx *tx);

#endif

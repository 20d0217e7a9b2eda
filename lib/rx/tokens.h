/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: the token manager (part of the receive layer).  It owns the tokens one
 * socket holds and their return to the kernel: which tokens are
 * outstanding, consecutive ones merged into ranges, batches kept within
 * the kernel's SO_DEVMEM_DONTNEED limits (128 ranges, 1024 frags), partial
 * returns retried, and releases deferred until a completion says the bytes
 * were consumed.  It stands alone: it knows no socket and no receiver; the
 * return itself is a callback (dmt_dontneed_fn) its owner gives it, and the
 * receive layer (rx.h) is its user.  It calls nothing but libc and those
 * callbacks.
 */
#ifndef DEVMEMTCP_TOKENS_H
#define DEVMEMTCP_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"
#include "core/uapi.h"

/* Hands tokens back to the kernel: returns the number of frags freed or a
 * negative errno.  The receive layer's is setsockopt(SO_DEVMEM_DONTNEED)
 * on its socket. */
typedef int (*dmt_dontneed_fn)(void *arg, const struct dmt_dmabuf_token *t,
			       size_t n);

struct dmt_deferred {
	devmemtcp_done_fn done;
	void *arg;
	size_t nranges;		/* ranges of this entry in dranges[] */
	size_t ntokens;		/* the tokens they hold */
};

/*
 * Tokens are indices of the socket's xarray, allocated lowest first, so
 * they stay below the number of fragments held; the bitmap covers them.
 * A token at or above DMT_TOKENS_DENSE (4 Mi, a 512 KiB bitmap: 16 GiB of
 * 4 KiB fragments held by one socket) is kept in a sorted list instead, so
 * that its value never sizes an allocation and it is never lost.
 */
#define DMT_TOKENS_DENSE (1u << 22)

struct dmt_tokens {
	uint64_t *bits;		/* bit t set: token t outstanding (t < DENSE) */
	size_t nwords;
	uint32_t *sparse;	/* outstanding tokens >= DENSE, sorted */
	size_t nsparse, sparse_cap;
	uint64_t outstanding;
	uint64_t outstanding_max;
	/* queued for release, merged into ranges */
	struct dmt_dmabuf_token pending[DMT_MAX_DONTNEED_TOKENS];
	size_t npending;
	uint32_t pending_frags;
	uint32_t batch;		/* flush at this many frags, <= 1024 */
	/* deferred releases, FIFO; their tokens back to back in dranges,
	 * consecutive ones merged (a receive's tokens are mostly one run:
	 * its release queues a range at a time) */
	struct dmt_deferred *dq;
	size_t dq_head, dq_len, dq_cap;
	struct dmt_dmabuf_token *dranges;
	size_t dt_head, dt_len, dt_cap;
	uint64_t deferred_pending;
	/* tokens the caller released that a failed DONTNEED kept from the
	 * kernel, beyond what pending holds: sent by the next flush */
	uint32_t *backlog;
	size_t bl_head, bl_len, bl_cap;
	/* counters */
	uint64_t released;
	uint64_t dontneed_calls;
	uint64_t partial_returns;
	uint64_t lost;		/* tokens the kernel did not know */
	dmt_dontneed_fn dontneed;
	void *dontneed_arg;
};

void dmt_tokens_init(struct dmt_tokens *t, uint32_t batch,
		     dmt_dontneed_fn fn, void *arg);
void dmt_tokens_fini(struct dmt_tokens *t);
/* A fragment with this token was received.  -EEXIST if it already was
 * outstanding (the kernel never does that), -ENOMEM. */
int dmt_tokens_received_slow(struct dmt_tokens *t, uint32_t token);

static inline int dmt_tokens_received(struct dmt_tokens *t, uint32_t token)
{
	size_t w = token / 64;
	uint64_t m = 1ull << (token % 64);

	if (__builtin_expect(w >= t->nwords || (t->bits[w] & m), 0))
		return dmt_tokens_received_slow(t, token);
	t->bits[w] |= m;
	t->outstanding++;
	return 0;
}

/* Tokens held: outstanding, queued for release (pending or in the
 * backlog), or deferred.  After a batch of dmt_tokens_received(),
 * dmt_tokens_update_max() updates their high-water mark. */
static inline uint64_t dmt_tokens_held(const struct dmt_tokens *t)
{
	return t->outstanding + t->pending_frags + t->deferred_pending +
	       (t->bl_len - t->bl_head);
}

static inline void dmt_tokens_update_max(struct dmt_tokens *t)
{
	uint64_t held = dmt_tokens_held(t);

	if (held > t->outstanding_max)
		t->outstanding_max = held;
}
bool dmt_tokens_is_outstanding(const struct dmt_tokens *t, uint32_t token);
/*
 * Take the tokens of frags out of the outstanding set, all or nothing:
 * returns 0, or -EINVAL with *bad set to the index of the first fragment
 * whose token is not outstanding (or repeats).  LINEAR entries are skipped.
 */
int dmt_tokens_take(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
		    size_t n, size_t *bad);
/*
 * Queue one taken token for release (may flush).  0, or the negative errno
 * of a failed flush: the token is queued all the same.  A queued token is
 * never dropped: when DONTNEED fails it waits, with the batch, for the next
 * flush (or, with no memory to keep it queued, goes back to the
 * outstanding set, where dmt_tokens_release_all() finds it).
 */
int dmt_tokens_queue(struct dmt_tokens *t, uint32_t token);
/* take + queue in one pass over frags (-EINVAL from take: nothing taken),
 * then a flush if the batch is due.  A flush's errno means every token
 * was taken and queued all the same. */
int dmt_tokens_release(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
		       size_t n, size_t *bad);
/* Give queued tokens to the kernel, retrying partial returns, until none
 * is queued.  Returns the number freed or a negative errno (the tokens not
 * given stay queued). */
int dmt_tokens_flush(struct dmt_tokens *t);
/* Defer already-taken tokens until done(arg) says so. */
int dmt_tokens_defer(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
		     size_t n, devmemtcp_done_fn done, void *arg);
/* dmt_tokens_take then dmt_tokens_defer in one pass: 0, -ENOMEM (nothing
 * taken) or -EINVAL with *bad set as dmt_tokens_take sets it (nothing
 * taken, nothing deferred). */
int dmt_tokens_take_defer(struct dmt_tokens *t,
			  const struct devmemtcp_frag *frags, size_t n,
			  devmemtcp_done_fn done, void *arg, size_t *bad);
/* Poll deferred entries in order (blocking when wait) and queue the tokens
 * of finished ones.  Returns the number of tokens queued, or the errno of
 * a done() (a failed flush on the way is left for the next flush). */
int dmt_tokens_poll(struct dmt_tokens *t, bool wait);
/* Queue every outstanding token (not the deferred ones): the number
 * queued, or a flush's errno after queueing them all. */
int dmt_tokens_queue_all(struct dmt_tokens *t);
/* Wait for the deferred releases and queue their tokens, then queue every
 * outstanding token.  A done that fails keeps its entry's tokens and its
 * errno is returned, after the others were queued all the same. */
int dmt_tokens_release_all(struct dmt_tokens *t);

#endif

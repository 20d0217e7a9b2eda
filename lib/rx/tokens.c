// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Token manager: which tokens this socket holds, merging consecutive ones
 * into ranges, batching SO_DEVMEM_DONTNEED within the kernel's limits (128
 * ranges, 1024 frags per call), retrying partial returns, and deferring
 * release until a completion says the bytes were consumed.
 */
#include <stdlib.h>
#include <string.h>

#include "tokens.h"

void dmt_tokens_init(struct dmt_tokens *t, uint32_t batch, dmt_dontneed_fn fn,
		     void *arg)
{
	memset(t, 0, sizeof(*t));
	if (!batch || batch > DMT_MAX_DONTNEED_FRAGS)
		batch = DMT_MAX_DONTNEED_FRAGS;
	t->batch = batch;
	t->dontneed = fn;
	t->dontneed_arg = arg;
}

void dmt_tokens_fini(struct dmt_tokens *t)
{
	free(t->bits);
	free(t->sparse);
	free(t->dq);
	free(t->dranges);
	free(t->backlog);
	memset(t, 0, sizeof(*t));
}

static int grow_bits(struct dmt_tokens *t, uint32_t token)
{
	size_t need = (size_t)token / 64 + 1, n = t->nwords ? t->nwords : 64;
	uint64_t *bits;

	while (n < need)
		n *= 2;
	bits = dmt_realloc(t->bits, n * sizeof(*bits));
	if (!bits)
		return -ENOMEM;
	memset(bits + t->nwords, 0, (n - t->nwords) * sizeof(*bits));
	t->bits = bits;
	t->nwords = n;
	return 0;
}

/* Index of the first entry of the sparse list >= token. */
static size_t sparse_pos(const struct dmt_tokens *t, uint32_t token)
{
	size_t lo = 0, hi = t->nsparse;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->sparse[mid] < token)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool sparse_has(const struct dmt_tokens *t, uint32_t token)
{
	size_t i = sparse_pos(t, token);

	return i < t->nsparse && t->sparse[i] == token;
}

/* Add a token >= DMT_TOKENS_DENSE: 0, -EEXIST or -ENOMEM.  Cannot fail
 * for a token just taken out (the room is still there). */
static int sparse_add(struct dmt_tokens *t, uint32_t token)
{
	size_t i = sparse_pos(t, token);

	if (i < t->nsparse && t->sparse[i] == token)
		return -EEXIST;
	if (t->nsparse == t->sparse_cap) {
		size_t cap = t->sparse_cap ? t->sparse_cap * 2 : 16;
		uint32_t *v = dmt_realloc(t->sparse, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->sparse = v;
		t->sparse_cap = cap;
	}
	memmove(t->sparse + i + 1, t->sparse + i,
		(t->nsparse - i) * sizeof(*t->sparse));
	t->sparse[i] = token;
	t->nsparse++;
	return 0;
}

static bool sparse_take(struct dmt_tokens *t, uint32_t token)
{
	size_t i = sparse_pos(t, token);

	if (i == t->nsparse || t->sparse[i] != token)
		return false;
	memmove(t->sparse + i, t->sparse + i + 1,
		(t->nsparse - i - 1) * sizeof(*t->sparse));
	t->nsparse--;
	return true;
}

bool dmt_tokens_is_outstanding(const struct dmt_tokens *t, uint32_t token)
{
	size_t w = token / 64;

	if (token >= DMT_TOKENS_DENSE)
		return sparse_has(t, token);
	return w < t->nwords && (t->bits[w] >> (token % 64)) & 1;
}

int dmt_tokens_received_slow(struct dmt_tokens *t, uint32_t token)
{
	size_t w = token / 64;
	uint64_t m = 1ull << (token % 64);
	int ret;

	if (token >= DMT_TOKENS_DENSE) {
		ret = sparse_add(t, token);
		if (!ret)
			t->outstanding++;
		return ret;
	}
	if (w >= t->nwords && grow_bits(t, token))
		return -ENOMEM;
	if (t->bits[w] & m)
		return -EEXIST;
	/* held by us: outstanding, queued, or waiting on a completion */
	return dmt_tokens_received(t, token);
}

/* The tokens of frags, LINEAR entries skipped, into out in order as
 * ranges of consecutive tokens; how many ranges (*ntok: tokens). */
static size_t ranges_of(const struct devmemtcp_frag *frags, size_t n,
			struct dmt_dmabuf_token *out, size_t *ntok)
{
	uint32_t rs = 0, rc = 0;
	size_t k = 0, taken = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t tok = frags[i].token;

		if (frags[i].flags & DEVMEMTCP_FRAG_LINEAR)
			continue;
		taken++;
		if (tok - rs == rc) {	/* (the first: rs and rc 0, tok 0) */
			rc++;
			continue;
		}
		if (rc)
			out[k++] = (struct dmt_dmabuf_token){ rs, rc };
		rs = tok;
		rc = 1;
	}
	if (rc)
		out[k++] = (struct dmt_dmabuf_token){ rs, rc };
	*ntok = taken;
	return k;
}

/* dmt_tokens_take one token at a time: what the fast path falls back to
 * on anything but the common case, with the same result. */
static int take_slow(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
		     size_t n, size_t *bad)
{
	uint64_t *bits = t->bits;
	size_t nwords = t->nwords, i, taken = 0;

	/* locals: frags may alias nothing here, but the compiler can't know */
	for (i = 0; i < n; i++) {
		uint32_t tok = frags[i].token;
		size_t w = tok / 64;
		uint64_t m = 1ull << (tok % 64);

		if (frags[i].flags & DEVMEMTCP_FRAG_LINEAR)
			continue;
		if (w >= nwords || !(bits[w] & m)) {
			/* the bitmap never reaches DENSE: look there last */
			if (tok < DMT_TOKENS_DENSE || !sparse_take(t, tok))
				goto undo;
			taken++;
			continue;
		}
		bits[w] &= ~m;
		taken++;
	}
	t->outstanding -= taken;
	return 0;
undo:
	*bad = i;
	while (i--) {
		uint32_t tok = frags[i].token;

		if (frags[i].flags & DEVMEMTCP_FRAG_LINEAR)
			continue;
		if (tok >= DMT_TOKENS_DENSE)
			sparse_add(t, tok);	/* the room is there */
		else
			bits[tok / 64] |= 1ull << (tok % 64);
	}
	return -EINVAL;
}

/* The bits of word w that tokens [rs, end) hold. */
static inline uint64_t range_mask(size_t w, uint64_t rs, uint64_t end)
{
	uint64_t base = (uint64_t)w * 64;
	uint64_t lo = rs > base ? rs - base : 0;
	uint64_t hi = end < base + 64 ? end - base : 64;

	return (hi - lo == 64 ? ~0ull : (1ull << (hi - lo)) - 1) << lo;
}

/* Take the consecutive tokens [rs, rs + rc) out of the bitmap, all or
 * none: false when one lies outside it or is not outstanding. */
static inline bool take_range(uint64_t *bits, size_t nwords, uint32_t rs,
			      uint32_t rc)
{
	uint64_t end = (uint64_t)rs + rc;
	size_t w0 = rs / 64, w1 = (size_t)((end - 1) / 64);

	if (w1 >= nwords)
		return false;
	for (size_t w = w0; w <= w1; w++) {
		uint64_t m = range_mask(w, rs, end);

		if ((bits[w] & m) != m)
			return false;
	}
	for (size_t w = w0; w <= w1; w++)
		bits[w] &= ~range_mask(w, rs, end);
	return true;
}

/*
 * The tokens of a receive come in runs of consecutive tokens: a fragment
 * costs a compare with the run's next token, and each run is tested and
 * taken a bitmap word at a time when it ends.  No token repeats inside a
 * run; one repeated from an earlier run is no longer outstanding when its
 * run is taken.  A token outside the bitmap, one not outstanding or one
 * repeated puts back the runs taken and leaves it to take_slow, which
 * finds the fragment to blame.  out, when not NULL, gets the runs, in
 * order (*nout of them, *ntok tokens).
 */
static inline __attribute__((always_inline)) int
take_runs(struct dmt_tokens *t, const struct devmemtcp_frag *frags, size_t n,
	  struct dmt_dmabuf_token *out, size_t *nout, size_t *ntok,
	  size_t *bad)
{
	uint64_t *bits = t->bits;
	size_t nwords = t->nwords, i, i0 = 0, taken = 0, k = 0;
	uint32_t rs = 0, rc = 0;	/* the run, from frags[i0] */

	for (i = 0; i < n; i++) {
		uint32_t tok = frags[i].token;

		if (frags[i].flags & DEVMEMTCP_FRAG_LINEAR)
			continue;
		if (rc && tok - rs == rc) {
			rc++;
			continue;
		}
		if (rc) {
			if (!take_range(bits, nwords, rs, rc))
				goto slow;
			taken += rc;
			if (out)
				out[k++] = (struct dmt_dmabuf_token){ rs, rc };
		}
		rs = tok;
		rc = 1;
		i0 = i;
	}
	if (rc) {
		if (!take_range(bits, nwords, rs, rc))
			goto slow;
		taken += rc;
		if (out)
			out[k++] = (struct dmt_dmabuf_token){ rs, rc };
	}
	t->outstanding -= taken;
	if (out) {
		*nout = k;
		*ntok = taken;
	}
	return 0;
slow:
	/* the runs before frags[i0] were taken: put them back */
	for (i = 0; i < i0; i++)
		if (!(frags[i].flags & DEVMEMTCP_FRAG_LINEAR))
			bits[frags[i].token / 64] |= 1ull << (frags[i].token % 64);
	if (out) {
		/* the whole call goes through the slow pass: nothing stays
		 * taken when it fails */
		int ret = take_slow(t, frags, n, bad);

		if (ret)
			return ret;
		*nout = ranges_of(frags, n, out, ntok);
		return 0;
	}
	return take_slow(t, frags, n, bad);
}

int dmt_tokens_take(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
		    size_t n, size_t *bad)
{
	return take_runs(t, frags, n, NULL, NULL, NULL, bad);
}

/*
 * Keep a queued token that a failed DONTNEED kept from the kernel for the
 * next flush.  Without memory for it, it goes back to the outstanding set
 * (it was received, so its word exists), where dmt_tokens_release_all()
 * finds it: either way it is never dropped.
 */
static void backlog_add(struct dmt_tokens *t, uint32_t token)
{
	if (t->bl_head && t->bl_len == t->bl_cap) {
		memmove(t->backlog, t->backlog + t->bl_head,
			(t->bl_len - t->bl_head) * sizeof(*t->backlog));
		t->bl_len -= t->bl_head;
		t->bl_head = 0;
	}
	if (t->bl_len == t->bl_cap) {
		size_t cap = t->bl_cap ? t->bl_cap * 2 : 1024;
		uint32_t *v = dmt_realloc(t->backlog, cap * sizeof(*v));

		if (!v) {
			t->bits[token / 64] |= 1ull << (token % 64);
			t->outstanding++;
			return;
		}
		t->backlog = v;
		t->bl_cap = cap;
	}
	t->backlog[t->bl_len++] = token;
}

/* Move backlog tokens into the batch while it has room. */
static void backlog_refill(struct dmt_tokens *t)
{
	while (t->bl_head < t->bl_len && t->pending_frags < t->batch) {
		uint32_t tok = t->backlog[t->bl_head];
		struct dmt_dmabuf_token *last =
			t->npending ? &t->pending[t->npending - 1] : NULL;

		if (last && last->token_start + last->token_count == tok) {
			last->token_count++;
		} else if (t->npending < DMT_MAX_DONTNEED_TOKENS) {
			t->pending[t->npending].token_start = tok;
			t->pending[t->npending].token_count = 1;
			t->npending++;
		} else {
			break;
		}
		t->pending_frags++;
		t->bl_head++;
	}
	if (t->bl_head == t->bl_len)
		t->bl_head = t->bl_len = 0;
}

/* Send the batch, retrying partial returns: the number freed, or a
 * negative errno with the batch kept. */
static int flush_batch(struct dmt_tokens *t)
{
	uint32_t want = t->pending_frags;
	int freed_total = 0, ret;

	/*
	 * The kernel frees what it knows and skips unknown tokens (counted as
	 * inspected).  Our batches stay within its 1024-frag budget, so a
	 * short count means some were unknown, or (6.12.0) it stopped early:
	 * send the same batch again, since tokens freed the first time are now
	 * unknown and skipped, until nothing more is freed.
	 */
	for (int attempt = 0; attempt < 8; attempt++) {
		ret = t->dontneed(t->dontneed_arg, t->pending, t->npending);
		t->dontneed_calls++;
		if (ret < 0) {
			if (ret == -EINTR)
				continue;
			return ret;	/* keep the batch for a later flush */
		}
		freed_total += ret;
		if ((uint32_t)freed_total >= want || ret == 0)
			break;
		t->partial_returns++;
	}
	t->released += (uint32_t)freed_total < want ? (uint32_t)freed_total : want;
	if ((uint32_t)freed_total < want)
		t->lost += want - (uint32_t)freed_total;
	t->npending = 0;
	t->pending_frags = 0;
	return freed_total;
}

/* The batch, then the backlog, batch by batch. */
static int flush_backlog(struct dmt_tokens *t)
{
	int total = 0, ret;

	for (;;) {
		backlog_refill(t);
		if (!t->npending)
			return total;
		ret = flush_batch(t);
		if (ret < 0)
			return ret;
		total += ret;
	}
}

int dmt_tokens_flush(struct dmt_tokens *t)
{
	/* a backlog only exists after a failed flush: keep it off the
	 * common path */
	if (__builtin_expect(t->bl_len != 0, 0))
		return flush_backlog(t);
	if (!t->npending)
		return 0;
	return flush_batch(t);
}

int dmt_tokens_queue(struct dmt_tokens *t, uint32_t token)
{
	struct dmt_dmabuf_token *last =
		t->npending ? &t->pending[t->npending - 1] : NULL;
	bool merge = last && last->token_start + last->token_count == token;
	int ret;

	if (t->pending_frags >= t->batch ||
	    (!merge && t->npending == DMT_MAX_DONTNEED_TOKENS)) {
		ret = dmt_tokens_flush(t);
		if (ret < 0) {
			backlog_add(t, token);
			return ret;
		}
		merge = false;	/* the batch is empty now */
	}
	if (merge) {
		last->token_count++;
	} else {
		t->pending[t->npending].token_start = token;
		t->pending[t->npending].token_count = 1;
		t->npending++;
	}
	t->pending_frags++;
	return 0;
}

/* After a failed flush: the rest of frags, taken already, to the backlog
 * without trying the kernel again. */
static void backlog_rest(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
			 size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(frags[i].flags & DEVMEMTCP_FRAG_LINEAR))
			backlog_add(t, frags[i].token);
}

/*
 * Queue the taken tokens of frags (LINEAR entries skipped), in order.  The
 * last pending range grows in registers while tokens are consecutive and
 * the batch has room, and is written back otherwise.  0, or the errno of a
 * failed flush with *stop the index of the fragment whose token it left in
 * the backlog (those after it are the caller's).
 */
static inline __attribute__((always_inline)) int
queue_seq(struct dmt_tokens *t, const struct devmemtcp_frag *frags, size_t n,
	  size_t *stop)
{
	uint32_t start = 0, count = 0, room;
	int ret;

	if (t->npending) {
		start = t->pending[t->npending - 1].token_start;
		count = t->pending[t->npending - 1].token_count;
	}
	room = t->batch - t->pending_frags;
	for (size_t i = 0; i < n; i++) {
		uint32_t tok = frags[i].token;

		if (frags[i].flags & DEVMEMTCP_FRAG_LINEAR)
			continue;
		if (count && start + count == tok && room) {
			count++;
			room--;
			continue;
		}
		if (count)
			t->pending[t->npending - 1].token_count = count;
		start = tok;
		count = 1;
		if (room && t->npending < DMT_MAX_DONTNEED_TOKENS) {
			/* a new range, with room for it */
			t->pending[t->npending].token_start = tok;
			t->npending++;
			room--;
			continue;
		}
		t->pending_frags = t->batch - room;
		ret = dmt_tokens_queue(t, tok);	/* flushes first */
		if (ret < 0) {
			*stop = i;
			return ret;
		}
		room = t->batch - t->pending_frags;
	}
	if (count)
		t->pending[t->npending - 1].token_count = count;
	t->pending_frags = t->batch - room;
	return 0;
}

int dmt_tokens_release(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
		       size_t n, size_t *bad)
{
	int ret = dmt_tokens_take(t, frags, n, bad);
	size_t i;

	if (ret)
		return ret;
	ret = queue_seq(t, frags, n, &i);
	if (ret < 0) {
		backlog_rest(t, frags + i + 1, n - i - 1);
		return ret;
	}
	/* due: hand the batch over now rather than at the next call */
	if (__builtin_expect(t->pending_frags == t->batch, 0)) {
		ret = dmt_tokens_flush(t);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Room in the range vector for n more ranges and in the queue for one
 * more entry: 0 or -ENOMEM. */
static int defer_room(struct dmt_tokens *t, size_t n)
{
	/* compact the range vector when its dead head dominates */
	if (t->dt_head && t->dt_head >= t->dt_len / 2) {
		memmove(t->dranges, t->dranges + t->dt_head,
			(t->dt_len - t->dt_head) * sizeof(*t->dranges));
		t->dt_len -= t->dt_head;
		t->dt_head = 0;
	}
	/* room for a range per fragment: counting the ranges first costs a
	 * pass */
	if (t->dt_len + n > t->dt_cap) {
		size_t cap = t->dt_cap ? t->dt_cap : 1024;
		struct dmt_dmabuf_token *v;

		while (cap < t->dt_len + n)
			cap *= 2;
		v = dmt_realloc(t->dranges, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->dranges = v;
		t->dt_cap = cap;
	}
	if (t->dq_len == t->dq_cap) {
		size_t cap = t->dq_cap ? t->dq_cap * 2 : 64;
		struct dmt_deferred *q = dmt_malloc(cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		for (size_t i = 0; i < t->dq_len; i++)
			q[i] = t->dq[(t->dq_head + i) % t->dq_cap];
		free(t->dq);
		t->dq = q;
		t->dq_head = 0;
		t->dq_cap = cap;
	}
	return 0;
}

/* The nr ranges (ntok tokens) written past dt_len wait for done(arg). */
static void defer_push(struct dmt_tokens *t, size_t nr, size_t ntok,
		       devmemtcp_done_fn done, void *arg)
{
	t->dt_len += nr;
	t->dq[(t->dq_head + t->dq_len) % t->dq_cap] =
		(struct dmt_deferred){ done, arg, nr, ntok };
	t->dq_len++;
	t->deferred_pending += ntok;
}

int dmt_tokens_defer(struct dmt_tokens *t, const struct devmemtcp_frag *frags,
		     size_t n, devmemtcp_done_fn done, void *arg)
{
	size_t nr = 0, k = 0;
	int ret = defer_room(t, n);

	if (ret)
		return ret;
	/* (dranges is NULL until the first token: n is 0 then) */
	if (n)
		nr = ranges_of(frags, n, t->dranges + t->dt_len, &k);
	defer_push(t, nr, k, done, arg);
	return 0;
}

int dmt_tokens_take_defer(struct dmt_tokens *t,
			  const struct devmemtcp_frag *frags, size_t n,
			  devmemtcp_done_fn done, void *arg, size_t *bad)
{
	size_t nr = 0, k = 0;
	int ret = defer_room(t, n);

	if (ret)
		return ret;
	/* (dranges is NULL until the first token: n is 0 then) */
	if (n) {
		ret = take_runs(t, frags, n, t->dranges + t->dt_len, &nr, &k,
				bad);
		if (ret)
			return ret;
	}
	defer_push(t, nr, k, done, arg);
	return 0;
}

/*
 * Queue @tok for release, or, once a flush has failed (*err set), keep it in
 * the backlog without flushing: the failure is the next flush's to report.
 */
static void queue_or_keep(struct dmt_tokens *t, uint32_t tok, int *err)
{
	int ret;

	if (*err) {
		backlog_add(t, tok);
		return;
	}
	ret = dmt_tokens_queue(t, tok);
	if (ret < 0)
		*err = ret;
}

/* queue_or_keep for the tokens of the ranges r[0..n), in order, a range
 * (or as much of it as the batch has room for) at a time. */
static void queue_ranges_or_keep(struct dmt_tokens *t,
				 const struct dmt_dmabuf_token *r, size_t n,
				 int *err)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t start = r[i].token_start, count = r[i].token_count;

		while (count && !*err) {
			struct dmt_dmabuf_token *last =
				t->npending ? &t->pending[t->npending - 1] : NULL;
			bool merge = last && last->token_start +
						     last->token_count == start;
			uint32_t room = t->batch - t->pending_frags, k;
			int ret;

			if (!room ||
			    (!merge && t->npending == DMT_MAX_DONTNEED_TOKENS)) {
				/* the batch is full: it goes first */
				ret = dmt_tokens_flush(t);
				if (ret < 0)
					*err = ret;
				continue;
			}
			k = count < room ? count : room;
			if (merge)
				last->token_count += k;
			else
				t->pending[t->npending++] =
					(struct dmt_dmabuf_token){ start, k };
			t->pending_frags += k;
			start += k;
			count -= k;
		}
		for (; count; count--)
			backlog_add(t, start++);
	}
}

int dmt_tokens_poll(struct dmt_tokens *t, bool wait)
{
	int queued = 0, failed = 0, ret;

	while (t->dq_len) {
		struct dmt_deferred *d = &t->dq[t->dq_head];

		ret = d->done(d->arg, wait);
		if (ret < 0)
			return ret;
		if (ret == 0)
			break;	/* in order: later entries wait behind it */
		if (d->nranges)	/* (dranges is NULL until the first token) */
			queue_ranges_or_keep(t, t->dranges + t->dt_head,
					     d->nranges, &failed);
		t->dt_head += d->nranges;
		t->deferred_pending -= d->ntokens;
		queued += (int)d->ntokens;
		t->dq_head = (t->dq_head + 1) % t->dq_cap;
		t->dq_len--;
	}
	if (!t->dq_len)
		t->dt_head = t->dt_len = 0;
	return queued;
}

int dmt_tokens_queue_all(struct dmt_tokens *t)
{
	int queued = 0, err = 0;

	for (size_t w = 0; w < t->nwords; w++) {
		/* a copy: a token that cannot be kept queued comes back here */
		uint64_t word = t->bits[w];

		t->bits[w] = 0;
		t->outstanding -= (uint64_t)__builtin_popcountll(word);
		while (word) {
			uint32_t tok = (uint32_t)(w * 64) +
				       (uint32_t)__builtin_ctzll(word);

			word &= word - 1;
			queued++;
			queue_or_keep(t, tok, &err);
		}
	}
	/* the tokens too large for the bitmap */
	while (t->nsparse) {
		uint32_t tok = t->sparse[--t->nsparse];

		t->outstanding--;
		queued++;
		queue_or_keep(t, tok, &err);
	}
	return err ? err : queued;
}

int dmt_tokens_release_all(struct dmt_tokens *t)
{
	int polled = dmt_tokens_poll(t, true), queued;

	/* a failed done keeps its own tokens, not the others */
	queued = dmt_tokens_queue_all(t);
	if (polled < 0)
		return polled;
	return queued < 0 ? queued : polled + queued;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The pure half of transmit: building a send (the iovecs of dma-buf
 * offsets and the SCM_DEVMEM_DMABUF cmsg), tracking which ranges each
 * send covered and which the kernel's MSG_ERRQUEUE completions release,
 * and parsing one completion.  No system calls: the handle, sending and
 * waiting are in tx.c; the unit tests and the fuzz harness drive this.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <linux/errqueue.h>

#include "tx.h"

/* ---- building a send ---------------------------------------------------- */

size_t dmt_tx_fill_iov(const struct devmemtcp_tx_piece *pieces, size_t n,
		       const struct dmt_tx_cursor *cur, struct iovec *iov,
		       size_t max_iovs, uint64_t max_bytes, uint64_t *bytes)
{
	uint64_t off = cur->off, total = 0;
	size_t i = cur->piece, k = 0;

	for (; i < n && k < max_iovs && total < max_bytes; i++, off = 0) {
		uint64_t left = pieces[i].len - off;

		if (!left)
			continue;
		if (left > max_bytes - total)
			left = max_bytes - total;
		iov[k].iov_base = (void *)(uintptr_t)(pieces[i].offset + off);
		iov[k].iov_len = (size_t)left;
		k++;
		total += left;
	}
	*bytes = total;
	return k;
}

void dmt_tx_advance(const struct devmemtcp_tx_piece *pieces, size_t n,
		    struct dmt_tx_cursor *cur, uint64_t bytes)
{
	while (cur->piece < n) {
		uint64_t left = pieces[cur->piece].len - cur->off;

		if (bytes < left) {
			cur->off += bytes;
			return;
		}
		bytes -= left;
		cur->piece++;
		cur->off = 0;
	}
}

int dmt_tx_check_pieces(const struct devmemtcp_tx_piece *pieces, size_t n,
			uint64_t size, size_t *bad, uint64_t *total)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++) {
		if (pieces[i].offset > size ||
		    pieces[i].len > size - pieces[i].offset ||
		    pieces[i].offset + pieces[i].len > UINTPTR_MAX) {
			*bad = i;
			return -ERANGE;
		}
		sum += pieces[i].len;
	}
	*total = sum;
	return 0;
}

void dmt_tx_put_cmsg(struct msghdr *msg, void *ctrl, size_t ctrl_size,
		     uint32_t binding_id)
{
	struct cmsghdr *cm;

	memset(ctrl, 0, ctrl_size);
	msg->msg_control = ctrl;
	msg->msg_controllen = CMSG_SPACE(sizeof(binding_id));
	cm = CMSG_FIRSTHDR(msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_DEVMEM_DMABUF;
	/* The kernel wants exactly CMSG_LEN(4): a bare __u32, no struct. */
	cm->cmsg_len = CMSG_LEN(sizeof(binding_id));
	memcpy(CMSG_DATA(cm), &binding_id, sizeof(binding_id));
}

/* ---- completion tracking ------------------------------------------------ */

void dmt_tx_track_init(struct dmt_tx_track *t, uint32_t first_seq,
		       devmemtcp_tx_done_fn fn, void *user)
{
	memset(t, 0, sizeof(*t));
	t->head_seq = first_seq;
	t->next_seq = first_seq;
	t->done_fn = fn;
	t->done_user = user;
}

void dmt_tx_track_fini(struct dmt_tx_track *t)
{
	free(t->recs);
	free(t->ranges);
	free(t->done);
	memset(t, 0, sizeof(*t));
}

static size_t pow2_at_least(size_t n, size_t min)
{
	size_t c = min;

	while (c < n)
		c *= 2;
	return c;
}

int dmt_tx_track_reserve(struct dmt_tx_track *t, size_t niov)
{
	size_t need, cap;

	if (t->nrecs + 1 > t->rec_cap) {
		struct dmt_tx_rec *r;

		cap = pow2_at_least(t->nrecs + 1, 64);
		r = dmt_malloc(cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		for (size_t i = 0; i < t->nrecs; i++)
			r[i] = t->recs[(t->rec_head + i) & (t->rec_cap - 1)];
		free(t->recs);
		t->recs = r;
		t->rec_cap = cap;
		t->rec_head = 0;
	}
	need = (size_t)(t->range_tail - t->range_head) + niov;
	if (need > t->range_cap) {
		struct devmemtcp_tx_piece *p;

		cap = pow2_at_least(need, 256);
		p = dmt_malloc(cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		for (uint64_t a = t->range_head; a < t->range_tail; a++)
			p[a & (cap - 1)] = t->ranges[a & (t->range_cap - 1)];
		free(t->ranges);
		t->ranges = p;
		t->range_cap = cap;
	}
	return 0;
}

int dmt_tx_track_sent(struct dmt_tx_track *t, const struct iovec *iov,
		      size_t niov, uint64_t sent)
{
	struct dmt_tx_rec *rec;
	size_t used = 0;
	uint32_t seq = t->next_seq++;

	if (dmt_tx_track_reserve(t, niov))
		return -ENOMEM;
	if (!t->nrecs)
		t->head_seq = seq;
	rec = &t->recs[(t->rec_head + t->nrecs) & (t->rec_cap - 1)];
	rec->first = t->range_tail;
	rec->nranges = 0;
	rec->done = false;
	for (size_t i = 0; i < niov && used < sent; i++) {
		uint64_t off = (uintptr_t)iov[i].iov_base;
		uint64_t len = iov[i].iov_len;
		struct devmemtcp_tx_piece *last;

		if (len > sent - used)
			len = sent - used;
		if (!len)
			continue;
		used += len;
		last = rec->nranges
			       ? &t->ranges[(t->range_tail - 1) &
					    (t->range_cap - 1)]
			       : NULL;
		if (last && last->offset + last->len == off) {
			last->len += len;
			continue;
		}
		t->ranges[t->range_tail & (t->range_cap - 1)] =
			(struct devmemtcp_tx_piece){ off, len };
		t->range_tail++;
		rec->nranges++;
	}
	t->nrecs++;
	t->in_flight++;
	t->bytes_in_flight += used;
	return 0;
}

static int done_reserve(struct dmt_tx_track *t, size_t more)
{
	struct devmemtcp_tx_done *d;
	size_t cap;

	if (t->fail_alloc) {
		t->fail_alloc = false;
		return -ENOMEM;
	}
	if (t->done_head && t->done_head + t->done_len + more > t->done_cap) {
		memmove(t->done, t->done + t->done_head,
			t->done_len * sizeof(*t->done));
		t->done_head = 0;
	}
	if (t->done_len + more <= t->done_cap)
		return 0;
	cap = pow2_at_least(t->done_len + more, 64);
	d = dmt_realloc(t->done, cap * sizeof(*d));
	if (!d)
		return -ENOMEM;
	t->done = d;
	t->done_cap = cap;
	return 0;
}

static void done_push(struct dmt_tx_track *t, const struct devmemtcp_tx_piece *r,
		      uint32_t seq, uint32_t flags)
{
	struct devmemtcp_tx_done *last;

	if (t->done_len) {
		last = &t->done[t->done_head + t->done_len - 1];
		if (last->flags == flags && last->offset + last->len == r->offset) {
			last->len += r->len;
			return;
		}
	}
	t->done[t->done_head + t->done_len++] =
		(struct devmemtcp_tx_done){ r->offset, r->len, seq, flags };
}

/* Records start..end (indexes from the head) that lo..hi covers.  Returns
 * false when the two do not meet. */
static bool window(const struct dmt_tx_track *t, uint32_t lo, uint32_t hi,
		   size_t *start, size_t *end)
{
	uint32_t span = hi - lo;
	uint32_t off_lo = lo - t->head_seq, off_hi = hi - t->head_seq;

	if (!t->nrecs)
		return false;
	if (off_lo < t->nrecs)
		*start = off_lo;
	else if ((uint32_t)(t->head_seq - lo) <= span)
		*start = 0;	/* lo is before the head, hi at or after it */
	else
		return false;
	if (off_hi < t->nrecs && off_hi >= *start)
		*end = off_hi;
	else if (off_hi < *start)
		return false;
	else
		*end = t->nrecs - 1;
	return true;
}

int dmt_tx_track_complete(struct dmt_tx_track *t, uint32_t lo, uint32_t hi,
			  bool copied)
{
	uint64_t total = (uint64_t)(uint32_t)(hi - lo) + 1, known = 0;
	size_t start, end, need = 0;
	uint32_t flags = copied ? DEVMEMTCP_TX_DONE_COPIED : 0;
	int emitted = 0;

	if (!window(t, lo, hi, &start, &end)) {
		t->notifications++;
		t->unknown_completions += total;
		return 0;
	}
	for (size_t i = start; i <= end; i++) {
		const struct dmt_tx_rec *r =
			&t->recs[(t->rec_head + i) & (t->rec_cap - 1)];

		if (!r->done)
			need += r->nranges;
	}
	if (done_reserve(t, need))
		return -ENOMEM;
	t->notifications++;
	for (size_t i = start; i <= end; i++) {
		struct dmt_tx_rec *r =
			&t->recs[(t->rec_head + i) & (t->rec_cap - 1)];
		uint32_t seq = t->head_seq + (uint32_t)i;

		if (r->done)
			continue;	/* a duplicate: counted as unknown */
		known++;
		r->done = true;
		t->in_flight--;
		t->completions++;
		if (copied)
			t->copied_completions++;
		for (uint32_t k = 0; k < r->nranges; k++) {
			const struct devmemtcp_tx_piece *p =
				&t->ranges[(r->first + k) & (t->range_cap - 1)];

			t->bytes_in_flight -= p->len;
			t->bytes_done += p->len;
			done_push(t, p, seq, flags);
			emitted++;
		}
	}
	t->unknown_completions += total - known;
	t->ranges_done += (uint64_t)emitted;
	/* drop finished records from the head */
	while (t->nrecs && t->recs[t->rec_head].done) {
		const struct dmt_tx_rec *r = &t->recs[t->rec_head];

		t->range_head = r->first + r->nranges;
		t->rec_head = (t->rec_head + 1) & (t->rec_cap - 1);
		t->nrecs--;
		t->head_seq++;
	}
	if (!t->nrecs) {
		t->range_head = t->range_tail;
		t->head_seq = t->next_seq;
	}
	return emitted;
}

size_t dmt_tx_track_pop(struct dmt_tx_track *t, struct devmemtcp_tx_done *out,
			size_t max)
{
	size_t n = t->done_len < max ? t->done_len : max;

	if (n)
		memcpy(out, t->done + t->done_head, n * sizeof(*out));
	t->done_head += n;
	t->done_len -= n;
	if (!t->done_len)
		t->done_head = 0;
	return n;
}

int dmt_tx_parse_errqueue(const struct msghdr *msg, struct dmt_tx_notif *n)
{
	const char *end = (const char *)msg->msg_control + msg->msg_controllen;
	struct sock_extended_err ee;
	struct cmsghdr *cm;

	memset(n, 0, sizeof(*n));
	/* only cmsgs that lie wholly inside msg_controllen (CMSG_FIRSTHDR
	 * checks the header, not the length) */
	for (cm = dmt_cmsg_first(msg); cm; cm = dmt_cmsg_next(cm, end)) {
		if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
		      (cm->cmsg_level == SOL_IPV6 &&
		       cm->cmsg_type == IPV6_RECVERR)))
			continue;
		if (cm->cmsg_len < CMSG_LEN(sizeof(ee)))
			return -EBADMSG;
		memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
		n->origin = ee.ee_origin;
		n->ee_errno = (int)ee.ee_errno;
		if (ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY) {
			n->zerocopy = true;
			n->copied = ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED;
			n->lo = ee.ee_info;
			n->hi = ee.ee_data;
		}
		return 1;
	}
	return 0;
}

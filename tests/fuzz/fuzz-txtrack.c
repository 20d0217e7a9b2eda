// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The TX completion tracker (dmt_tx_track_*, lib/tx/tx.c) against a model:
 * a map from the sequence numbers of sends in flight to the ranges each
 * covered.  A program of sends (partial, empty pieces, adjacent pieces),
 * completions of any sub-range of sequence numbers (late, repeated,
 * unknown, wrapping past 2^32) and reaps; every range must come back once,
 * in sequence order, when its send completes, and the counters must agree.
 */
#include <stddef.h>
#include <sys/uio.h>

#include "fuzz.h"
#include "tx.h"

#define MAX_SENDS 2048
#define MAX_DONE (MAX_SENDS * 16)

struct msend {
	uint32_t seq;
	struct devmemtcp_tx_piece r[16];
	uint32_t nr;
	uint64_t bytes;
	bool done;
};

struct prog {
	struct fz f;
	struct dmt_tx_track t;
	size_t ns, first;		/* first: oldest not completed */
	size_t qh, ql;
	uint64_t in_flight, bytes, completions, copied, unknown, ranges;
	/* written before read: not cleared between inputs */
	struct msend s[MAX_SENDS];	/* every send, in order */
	struct devmemtcp_tx_done q[MAX_DONE];	/* expected done queue */
};

static void send_one(struct prog *p)
{
	struct iovec iov[16];
	size_t niov = 1 + fz_u8(&p->f) % 16;
	uint64_t total = 0, sent, off = (uint64_t)fz_u16(&p->f) << 12;
	struct msend *m;

	if (p->ns == MAX_SENDS)
		return;
	m = &p->s[p->ns];
	for (size_t i = 0; i < niov; i++) {
		uint8_t how = fz_u8(&p->f);

		if (how & 1)	/* not adjacent to the previous piece */
			off += (uint64_t)(how >> 1) << 12;
		iov[i].iov_base = (void *)(uintptr_t)off;
		iov[i].iov_len = how < 16 ? 0 : (size_t)(1 + fz_u16(&p->f));
		off += iov[i].iov_len;
		total += iov[i].iov_len;
	}
	sent = total ? 1 + fz_u32(&p->f) % total : 0;
	if (fz_u8(&p->f) & 1)
		sent = total;
	if (!sent)
		return;	/* sendmsg moved nothing: not recorded */
	FZ_CHECK(dmt_tx_track_reserve(&p->t, niov) == 0);
	m->seq = p->t.next_seq;
	FZ_CHECK(dmt_tx_track_sent(&p->t, iov, niov, sent) == 0);
	/* the model: the bytes sent, adjacent pieces merged */
	m->nr = 0;
	m->bytes = sent;
	m->done = false;
	for (size_t i = 0, used = 0; i < niov && used < sent; i++) {
		uint64_t len = iov[i].iov_len, o = (uintptr_t)iov[i].iov_base;

		if (len > sent - used)
			len = sent - used;
		if (!len)
			continue;
		used += len;
		if (m->nr && m->r[m->nr - 1].offset + m->r[m->nr - 1].len == o)
			m->r[m->nr - 1].len += len;
		else
			m->r[m->nr++] = (struct devmemtcp_tx_piece){ o, len };
	}
	p->ns++;
	p->in_flight++;
	p->bytes += sent;
}

static void push(struct prog *p, const struct devmemtcp_tx_piece *r,
		 uint32_t seq, uint32_t flags)
{
	struct devmemtcp_tx_done *last = p->ql ? &p->q[p->qh + p->ql - 1] : NULL;

	if (last && last->flags == flags && last->offset + last->len == r->offset) {
		last->len += r->len;
		return;
	}
	FZ_CHECK(p->qh + p->ql < MAX_DONE);
	p->q[p->qh + p->ql++] =
		(struct devmemtcp_tx_done){ r->offset, r->len, seq, flags };
}

static void complete(struct prog *p)
{
	uint8_t how = fz_u8(&p->f);
	uint32_t span = fz_u8(&p->f) % 64, lo;
	bool copied = how & 1;
	bool fail = how >= 240;
	uint64_t known = 0, emitted = 0;
	int ret;

	if (how & 2 || !p->ns)
		lo = fz_u32(&p->f);		/* anywhere */
	else	/* near what was sent */
		lo = p->s[p->ns - 1].seq - (uint32_t)(fz_u16(&p->f) % (p->ns + 8));
	p->t.fail_alloc = fail;
	ret = dmt_tx_track_complete(&p->t, lo, lo + span, copied);
	if (ret == -ENOMEM) {
		FZ_CHECK(fail);
		return;		/* nothing marked */
	}
	for (size_t i = p->first; i < p->ns; i++) {
		struct msend *m = &p->s[i];

		if ((uint32_t)(m->seq - lo) > span || m->done)
			continue;
		m->done = true;
		known++;
		for (uint32_t k = 0; k < m->nr; k++)
			push(p, &m->r[k], m->seq,
			     copied ? DEVMEMTCP_TX_DONE_COPIED : 0);
		emitted += m->nr;
		p->bytes -= m->bytes;
	}
	/* a completion that meets nothing in flight fails no allocation */
	FZ_CHECK(ret >= 0);
	FZ_CHECK((uint64_t)ret == emitted);
	p->t.fail_alloc = false;
	p->in_flight -= known;
	p->completions += known;
	if (copied)
		p->copied += known;
	p->unknown += (uint64_t)span + 1 - known;
	p->ranges += emitted;
	while (p->first < p->ns && p->s[p->first].done)
		p->first++;
}

static void reap(struct prog *p)
{
	struct devmemtcp_tx_done out[64];
	size_t max = fz_u8(&p->f) % 65, n;

	n = dmt_tx_track_pop(&p->t, max ? out : NULL, max);
	FZ_CHECK(n == (max < p->ql ? max : p->ql));
	FZ_CHECK(!n || memcmp(out, &p->q[p->qh], n * sizeof(*out)) == 0);
	p->qh += n;
	p->ql -= n;
	if (!p->ql)
		p->qh = 0;
}

static void check(const struct prog *p)
{
	FZ_CHECK(p->t.in_flight == p->in_flight);
	FZ_CHECK(p->t.bytes_in_flight == p->bytes);
	FZ_CHECK(p->t.completions == p->completions);
	FZ_CHECK(p->t.copied_completions == p->copied);
	FZ_CHECK(p->t.unknown_completions == p->unknown);
	FZ_CHECK(p->t.ranges_done == p->ranges);
	FZ_CHECK(p->t.done_len == p->ql);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct prog prog;
	struct prog *p = &prog;

	memset(p, 0, offsetof(struct prog, s));
	p->f = fz_init(data, size);
	/* start anywhere, often just before the sequence numbers wrap */
	dmt_tx_track_init(&p->t, fz_u8(&p->f) & 1 ? fz_u32(&p->f)
						  : (uint32_t)-fz_u8(&p->f),
			  NULL, NULL);
	for (int steps = 0; fz_left(&p->f) && steps < 8192; steps++) {
		switch (fz_u8(&p->f) % 3) {
		case 0:
			send_one(p);
			break;
		case 1:
			complete(p);
			break;
		case 2:
			reap(p);
			break;
		}
		check(p);
	}
	dmt_tx_track_fini(&p->t);
	return 0;
}

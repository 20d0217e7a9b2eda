// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The harness for the devmem TX vm tests: the slot ring sender; see harness-tx.h. */
#include <inttypes.h>
#include <linux/tcp.h>	/* tcp_info with tcpi_bytes_acked */
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness-tx.h"
#include "pattern.h"

static uint64_t bytes_acked(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return UINT64_MAX;
	return ti.tcpi_bytes_acked;
}

/* A report that must never happen: kept (the first) for the next
 * sender_*() call to fail with. */
__attribute__((format(printf, 2, 3)))
static void broken(struct sender *s, const char *fmt, ...)
{
	va_list ap;

	if (s->broken[0])
		return;
	va_start(ap, fmt);
	vsnprintf(s->broken, sizeof(s->broken), fmt, ap);
	va_end(ap);
}

/* Bytes [off, off + seg) of slot sl reported free: count those whose
 * stream position the peer has not ACKed yet. */
static void check_acked(struct sender *s, const struct slot *sl, uint64_t off,
			uint64_t seg, uint64_t acked)
{
	for (size_t p = 0; p < sl->npieces; p++) {
		const struct slot_piece *pc = &sl->pieces[p];
		uint64_t lo = off > pc->off ? off : pc->off;
		uint64_t hi = off + seg < pc->off + pc->len ? off + seg : pc->off + pc->len;

		if (lo >= hi)
			continue;
		if (pc->pos + (hi - pc->off) > acked) {
			s->early += hi - lo;
			snprintf(s->why, sizeof(s->why),
				 "stream bytes up to %" PRIu64 " reported free with only %" PRIu64 " ACKed",
				 pc->pos + (hi - pc->off), acked);
		}
	}
}

/* Library callback: ranges free again.  Each must belong to a busy slot,
 * never be reported twice, and already be ACKed by the peer. */
static void on_done(void *user, const struct devmemtcp_tx_done *d, size_t n)
{
	struct sender *s = user;
	uint64_t acked = bytes_acked(s->fd);

	for (size_t i = 0; i < n; i++) {
		uint64_t off = d[i].offset, end = off + d[i].len;

		s->ranges++;
		if (d[i].flags & DEVMEMTCP_TX_DONE_COPIED)
			s->copied_ranges++;
		while (off < end) {
			size_t k = (size_t)(off / s->slot_size);
			uint64_t slot_end = (k + 1) * s->slot_size, seg;
			struct slot *sl;

			if (k >= s->nslots) {
				broken(s, "done range at %" PRIu64 " beyond the ring", off);
				return;
			}
			sl = &s->slots[k];
			seg = (end < slot_end ? end : slot_end) - off;
			if (!sl->busy) {
				broken(s, "range [%" PRIu64 ", +%" PRIu64 ") reported free but slot %zu has nothing in flight",
				       off, seg, k);
				return;
			}
			check_acked(s, sl, off, seg, acked);
			sl->done += seg;
			s->reported += seg;
			if (sl->done > sl->bytes) {
				broken(s, "slot %zu: %" PRIu64 " bytes reported free of %" PRIu64 " sent (a range reported twice)",
				       k, sl->done, sl->bytes);
				return;
			}
			if (sl->done == sl->bytes)
				sl->busy = false;
			off += seg;
		}
	}
}

int sender_open(struct sender *s, struct devmemtcp_ctx *ctx, int fd,
		struct devmemtcp_binding *b, uint64_t slot_size, size_t nslots,
		size_t max_pieces, uint64_t call_bytes)
{
	DEVMEMTCP_OPTS(tx_opts, o, .done_fn = on_done, .done_user = s,
		       .max_call_bytes = call_bytes);
	int r;

	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->slot_size = slot_size;
	s->slots = calloc(nslots, sizeof(*s->slots));
	T_CHECK(s->slots, "out of memory");
	s->nslots = nslots;
	for (size_t i = 0; i < nslots; i++) {
		s->slots[i].pieces = calloc(max_pieces, sizeof(struct slot_piece));
		T_CHECK(s->slots[i].pieces, "out of memory");
	}
	r = devmemtcp_tx_new(ctx, fd, b, &o, &s->tx);
	T_CHECK(r == 0, "devmemtcp_tx_new: %s", devmemtcp_ctx_errmsg(ctx));
	return 0;
}

int sender_claim(struct sender *s, size_t k)
{
	while (s->slots[k].busy) {
		int r = devmemtcp_tx_wait(s->tx, 20000);

		T_CHECK(!s->broken[0], "%s", s->broken);
		T_CHECK(r >= 0, "devmemtcp_tx_wait: %s", devmemtcp_tx_errmsg(s->tx));
	}
	return 0;
}

int sender_send(struct sender *s, size_t k)
{
	struct slot *sl = &s->slots[k];
	struct devmemtcp_tx_piece *p = malloc(sl->npieces * sizeof(*p));
	ssize_t r;

	T_CHECK(p, "out of memory");
	sl->bytes = 0;
	sl->done = 0;
	for (size_t i = 0; i < sl->npieces; i++) {
		p[i] = (struct devmemtcp_tx_piece){ sl->pieces[i].off, sl->pieces[i].len };
		sl->bytes += sl->pieces[i].len;
	}
	sl->busy = true;
	r = devmemtcp_tx_send(s->tx, p, sl->npieces, 0);
	free(p);
	T_CHECK(!s->broken[0], "%s", s->broken);
	T_CHECK(r == (ssize_t)sl->bytes, "devmemtcp_tx_send of %zu pieces (%" PRIu64 " bytes): %zd: %s",
		sl->npieces, sl->bytes, r, devmemtcp_tx_errmsg(s->tx));
	return 0;
}

static int check_stats(struct sender *s, const struct devmemtcp_tx_stats *st, uint64_t total)
{
	T_CHECK(st->bytes_sent == total, "sent %" PRIu64 " of %" PRIu64 " bytes",
		st->bytes_sent, total);
	T_CHECK(st->completions == st->sendmsg_calls && !st->sends_in_flight,
		"%" PRIu64 " sendmsg calls but %" PRIu64 " completions (%" PRIu64 " in flight)",
		st->sendmsg_calls, st->completions, st->sends_in_flight);
	T_CHECK(st->bytes_done == total && s->reported == total,
		"%" PRIu64 " / %" PRIu64 " bytes reported free of %" PRIu64,
		st->bytes_done, s->reported, total);
	T_CHECK(!st->unknown_completions, "%" PRIu64 " completions for sequence numbers never sent",
		st->unknown_completions);
	T_CHECK(!s->early, "%" PRIu64 " bytes reported free before the peer ACKed them: %s",
		s->early, s->why);
	return 0;
}

int sender_finish(struct sender *s, uint64_t total)
{
	DEVMEMTCP_OPTS(tx_stats, st);
	int r;

	while ((r = devmemtcp_tx_wait(s->tx, 20000)) > 0)
		T_CHECK(!s->broken[0], "%s", s->broken);
	T_CHECK(!s->broken[0], "%s", s->broken);
	T_CHECK(r >= 0, "waiting for the last completions: %s", devmemtcp_tx_errmsg(s->tx));
	devmemtcp_tx_stats(s->tx, &st);
	t_note("sender: %" PRIu64 " bytes in %" PRIu64 " sendmsg calls (%" PRIu64 " partial, %" PRIu64 " ENOBUFS waits); %" PRIu64 " notifications completed %" PRIu64 " calls (%" PRIu64 " copied), %" PRIu64 " ranges free",
	       st.bytes_sent, st.sendmsg_calls, st.partial_sends,
	       st.nobufs_waits, st.notifications, st.completions,
	       st.copied_completions, st.ranges_done);
	T_TRY(check_stats(s, &st, total));
	if (st.copied_completions)
		t_note("note: the kernel copied %" PRIu64 " sends instead of zero-copy",
		       st.copied_completions);
	for (size_t i = 0; i < s->nslots; i++)
		T_CHECK(!s->slots[i].busy, "slot %zu still busy after the last completion", i);
	return 0;
}

void sender_close(struct sender *s)
{
	devmemtcp_tx_free(s->tx);
	for (size_t i = 0; i < s->nslots; i++)
		free(s->slots[i].pieces);
	free(s->slots);
}

static int ring_slot(struct tx_test *t, struct sender *s, size_t k, uint8_t *stage,
		     uint64_t *pos, tx_fill_fn *fill, void *arg)
{
	T_TRY(sender_claim(s, k));
	fill(&s->slots[k], k, stage, pos, t->a.bytes, arg);
	T_CHECK(!devmemtcp_buf_write(t->buf, (uint64_t)k * s->slot_size, stage, s->slot_size),
		"buf_write: %s", devmemtcp_buf_errmsg(t->buf));
	return sender_send(s, k);
}

static int ring_send(struct tx_test *t, struct sender *s, tx_fill_fn *fill, void *arg)
{
	uint8_t *stage = malloc(s->slot_size);
	uint64_t pos = 0;
	int r = 0;

	T_CHECK(stage, "out of memory");
	for (size_t k = 0; !r && pos < t->a.bytes; k = (k + 1) % s->nslots)
		r = ring_slot(t, s, k, stage, &pos, fill, arg);
	free(stage);
	return r ? r : sender_finish(s, t->a.bytes);
}

void tx_fill_spaced(struct slot *sl, size_t k, uint8_t *stage, uint64_t *pos,
		    uint64_t total, void *arg)
{
	const struct tx_spaced *sp = arg;
	uint64_t base = (uint64_t)k * sp->slot, cur = base + sp->first;

	memset(stage, 0xee, sp->slot);
	sl->npieces = 0;
	while (sl->npieces < sp->max && *pos < total) {
		uint64_t len = total - *pos < sp->len ? total - *pos : sp->len;

		pattern_fill(stage + (cur - base), len, *pos, PATTERN_PERIOD_DEFAULT);
		sl->pieces[sl->npieces++] = (struct slot_piece){ cur, len, *pos };
		*pos += len;
		cur += len + sp->gap;
	}
}

int tx_ring_transfer(struct tx_test *t, const struct rx_spec *spec, uint64_t slot_size,
		     size_t nslots, size_t max_pieces, tx_fill_fn *fill, void *arg,
		     struct rx_result *r)
{
	struct sender s;
	struct rx_proc rp;
	int fd, ret;

	T_TRY(rx_start(&t->a, spec, 1, &rp));
	fd = t_connect(t->a.rx_addr, spec->port, t->a.tx_if);
	T_CHECK(fd >= 0, "connect");
	ret = sender_open(&s, t->ctx, fd, t->b, slot_size, nslots, max_pieces, 0);
	if (!ret)
		ret = ring_send(t, &s, fill, arg);
	sender_close(&s);
	close(fd);
	T_TRY(ret);
	T_TRY(rx_next(&rp, r));
	return rx_wait(&rp);
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The token manager (lib/rx/tokens.c) against a model of the socket's tokens
 * (model.h): a program of receives, releases (valid, repeated, stale),
 * deferred releases (take then defer, or both in one call) completing in
 * any order, polls, flushes, and a kernel that stops at 1024 frags, is
 * interrupted or fails.  A token must reach
 * the kernel only after the user gave it back (and its deferred release
 * said done), every refused release must change nothing, and after
 * release_all every token the kernel handed out must have been returned.
 */
#include "fuzz.h"
#include "model.h"
#include "tokens.h"

#define MAX_LIVE 2048		/* fragments the user holds at once */
#define MAX_DEFER 64

struct deferred {
	uint32_t *toks;
	size_t n;
	bool done;		/* the consumer finished */
	bool finished;		/* done() said so to the library */
};

struct prog {
	struct fz f;
	struct model m;
	struct dmt_tokens t;
	uint32_t live[MAX_LIVE];	/* tokens the user holds */
	size_t nlive;
	struct deferred d[MAX_DEFER];
	size_t nd;
	size_t dhead;		/* first not finished (the library's order) */
};

static struct prog *P;

static int done_fn(void *arg, bool wait)
{
	struct deferred *d = &P->d[(uintptr_t)arg];

	/* FIFO: the library asks about the oldest unfinished entry first */
	FZ_CHECK(!d->finished);
	FZ_CHECK((uintptr_t)arg == P->dhead);
	if (wait)
		d->done = true;
	if (!d->done)
		return 0;
	d->finished = true;
	P->dhead++;
	for (size_t i = 0; i < d->n; i++)
		model_set(&P->m, d->toks[i], TOK_RELEASED);
	return 1;
}

static void receive(struct prog *p)
{
	uint32_t k = fz_u8(&p->f) % 64;

	for (uint32_t i = 0; i < k && p->nlive < MAX_LIVE; i++) {
		uint8_t how = fz_u8(&p->f);
		uint32_t tok = model_new_token(&p->m, how >= 250, fz_u32(&p->f));

		FZ_CHECK(!dmt_tokens_is_outstanding(&p->t, tok));
		FZ_CHECK(dmt_tokens_received(&p->t, tok) == 0);
		dmt_tokens_update_max(&p->t);
		FZ_CHECK(dmt_tokens_is_outstanding(&p->t, tok));
		model_set(&p->m, tok, TOK_USER);
		p->live[p->nlive++] = tok;
	}
}

/* Fragments for a release: live tokens picked by the input (often the
 * one received after the entry before's, as a receive's come: runs of
 * consecutive tokens), now and then a LINEAR entry, a repeat or a token
 * the user does not hold.  Returns the index of the first entry that
 * makes the release invalid, or n. */
static size_t pick(struct prog *p, struct devmemtcp_frag *fr, size_t n,
		   size_t *idx)
{
	size_t bad = n, prev = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		uint8_t how = fz_u8(&p->f);
		size_t li = p->nlive ? fz_u16(&p->f) % p->nlive : 0;

		if (how >= 128 && prev + 1 < p->nlive)
			li = prev + 1;
		prev = li;

		memset(&fr[i], 0, sizeof(fr[i]));
		idx[i] = SIZE_MAX;
		if (how < 8) {
			fr[i].flags = DEVMEMTCP_FRAG_LINEAR;
			fr[i].token = fz_u32(&p->f);	/* ignored */
			continue;
		}
		if (how < 12 || !p->nlive) {
			fr[i].token = fz_u32(&p->f) % (MODEL_LOW * 2);
			/* by chance one the user holds: that entry goes */
			for (size_t k = 0; k < p->nlive; k++)
				if (p->live[k] == fr[i].token)
					idx[i] = k;
		} else {
			fr[i].token = p->live[li];
			idx[i] = li;
		}
		if (bad == n && model_get(&p->m, fr[i].token) != TOK_USER)
			bad = i;
		for (size_t k = 0; k < i && bad == n; k++)
			if (!(fr[k].flags & DEVMEMTCP_FRAG_LINEAR) &&
			    fr[k].token == fr[i].token)
				bad = i;
	}
	return bad;
}

/* Drop the live entries that were released (indexes in idx). */
static void forget(struct prog *p, const size_t *idx, size_t n)
{
	bool *gone = calloc(p->nlive ? p->nlive : 1, 1);
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (idx[i] != SIZE_MAX)
			gone[idx[i]] = true;
	for (size_t i = 0; i < p->nlive; i++)
		if (!gone[i])
			p->live[k++] = p->live[i];
	p->nlive = k;
	free(gone);
}

static void release(struct prog *p, bool defer)
{
	struct devmemtcp_frag fr[64] = { 0 };
	size_t idx[64], n = fz_u8(&p->f) % 65, bad = 0, want;
	bool fused = defer && fz_u8(&p->f) % 2;	/* dmt_tokens_take_defer */
	int ret;

	if (defer && p->nd == MAX_DEFER)
		return;
	want = pick(p, fr, n, idx);
	/* the user gives them up before the call: it may flush them */
	for (size_t i = 0; i < n && want == n; i++)
		if (!(fr[i].flags & DEVMEMTCP_FRAG_LINEAR))
			model_set(&p->m, fr[i].token,
				  defer ? TOK_DEFERRED : TOK_RELEASED);
	if (!defer) {
		ret = dmt_tokens_release(&p->t, fr, n, &bad);
	} else if (fused) {
		ret = dmt_tokens_take_defer(&p->t, fr, n, done_fn,
					    (void *)(uintptr_t)p->nd, &bad);
	} else {
		ret = dmt_tokens_take(&p->t, fr, n, &bad);
	}
	if (want < n) {
		FZ_CHECK(ret == -EINVAL && bad == want);
		/* nothing changed */
		for (size_t i = 0; i < p->nlive; i++)
			FZ_CHECK(dmt_tokens_is_outstanding(&p->t, p->live[i]));
		return;
	}
	if (ret == -ENOMEM && p->m.fail_call)
		ret = 0;	/* the kernel failed; the tokens stay queued */
	FZ_CHECK(ret == 0);
	for (size_t i = 0; i < n; i++)
		if (!(fr[i].flags & DEVMEMTCP_FRAG_LINEAR))
			FZ_CHECK(!dmt_tokens_is_outstanding(&p->t, fr[i].token));
	if (defer) {
		struct deferred *d = &p->d[p->nd];

		d->toks = malloc((n ? n : 1) * sizeof(*d->toks));
		d->n = 0;
		for (size_t i = 0; i < n; i++)
			if (!(fr[i].flags & DEVMEMTCP_FRAG_LINEAR))
				d->toks[d->n++] = fr[i].token;
		FZ_CHECK(fused || dmt_tokens_defer(&p->t, fr, n, done_fn,
						   (void *)(uintptr_t)p->nd) == 0);
		p->nd++;
	}
	forget(p, idx, n);
}

static void step(struct prog *p)
{
	int ret;

	switch (fz_u8(&p->f) % 9) {
	case 0:
	case 1:
		receive(p);
		break;
	case 2:
	case 3:
		release(p, false);
		break;
	case 4:
		release(p, true);
		break;
	case 5:		/* a consumer finishes (in any order) */
		if (p->nd)
			p->d[fz_u8(&p->f) % p->nd].done = true;
		break;
	case 6:
		ret = dmt_tokens_poll(&p->t, false);
		FZ_CHECK(ret >= 0 || (p->m.fail_call && ret == -ENOMEM));
		break;
	case 7:
		ret = dmt_tokens_flush(&p->t);
		FZ_CHECK(ret >= 0 || (p->m.fail_call && ret == -ENOMEM));
		break;
	case 8:
		p->m.eintr_next = fz_u8(&p->f) & 1;
		break;
	}
	FZ_CHECK(p->t.outstanding == p->nlive);
	/* a token's value costs at most 1 MiB of bitmap */
	FZ_CHECK(p->t.nwords * sizeof(*p->t.bits) <= (1u << 20));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prog *p = calloc(1, sizeof(*p));
	uint8_t cfg;
	int ret;

	if (!p)
		abort();
	P = p;
	p->f = fz_init(data, size);
	cfg = fz_u8(&p->f);
	/* a failing kernel only when asked: (cfg >> 4) - 7 is the call */
	p->m.fail_call = cfg >= 0x80 ? (uint32_t)(cfg >> 4) - 7 : 0;
	dmt_tokens_init(&p->t, fz_u16(&p->f) % 1100, model_dontneed, &p->m);
	for (int steps = 0; fz_left(&p->f) && steps < 4096; steps++)
		step(p);
	/* the end of a receiver: the user gives every token back */
	p->m.fail_call = 0;
	for (size_t i = 0; i < p->nlive; i++)
		model_set(&p->m, p->live[i], TOK_RELEASED);
	p->nlive = 0;
	for (int tries = 0;; tries++) {
		ret = dmt_tokens_release_all(&p->t);
		if (ret >= 0)
			ret = dmt_tokens_flush(&p->t);
		if (ret >= 0 && !p->t.npending)
			break;
		FZ_CHECK(tries < 8);
	}
	FZ_CHECK(dmt_tokens_release_all(&p->t) == 0);
	FZ_CHECK(p->dhead == p->nd);
	if (p->m.held)
		fprintf(stderr, "%llu tokens never returned to the kernel\n",
			(unsigned long long)p->m.held);
	FZ_CHECK(p->m.held == 0);
	FZ_CHECK(p->t.outstanding == 0);
	dmt_tokens_fini(&p->t);
	for (size_t i = 0; i < p->nd; i++)
		free(p->d[i].toks);
	free(p);
	return 0;
}

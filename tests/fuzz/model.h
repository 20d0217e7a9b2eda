/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The model the token harnesses check the library against: the tokens the
 * kernel holds for one socket, each with who has it (the user, a deferred
 * release, or nobody: given back by the user, waiting for
 * SO_DEVMEM_DONTNEED), and the kernel's side of SO_DEVMEM_DONTNEED.  The
 * kernel hands out the lowest free token (an xarray index), or sometimes a
 * large one the input names.
 */
#ifndef DEVMEMTCP_FUZZ_MODEL_H
#define DEVMEMTCP_FUZZ_MODEL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "fuzz.h"
#include "uapi.h"

enum tok_state {
	TOK_FREE = 0,		/* the kernel does not hold it */
	TOK_USER,		/* in a fragment the user holds */
	TOK_DEFERRED,		/* in a deferred release not yet done */
	TOK_RELEASED,		/* given back by the user: may be returned */
};

/*
 * A kernel whose SO_DEVMEM_DONTNEED fails (ENOMEM) at a call the input
 * picks.  Off until a failed call keeps every token it did not return
 * (DESIGN.md, reliability rules): today dmt_tokens_release loses the
 * tokens it had taken but not yet queued, and the harnesses report that
 * within seconds (3 of 4 tokens lost: batch 1, the first call failing).
 */
#define MODEL_KERNEL_FAILS 0

#define MODEL_SLOTS (1u << 13)	/* twice the distinct large tokens per input */
#define MODEL_LOW 4096		/* tokens below this are looked up directly */

struct model {
	/* open addressing, never deleted: a token's state goes back to FREE */
	uint32_t key[MODEL_SLOTS];
	uint8_t state[MODEL_SLOTS];
	bool used[MODEL_SLOTS];
	uint32_t nused;
	uint8_t low[MODEL_LOW];	/* state of tokens < MODEL_LOW */
	uint64_t held;		/* tokens not FREE */
	/* the kernel's DONTNEED */
	uint32_t fail_call;	/* fail this call (1-based), 0 never */
	uint32_t calls;
	bool eintr_next;
	uint64_t freed;
	const char *bad;	/* set when the library returned a token it must not */
};

static inline uint8_t *model_slot(struct model *m, uint32_t tok, bool add)
{
	uint32_t h;

	if (tok < MODEL_LOW)
		return &m->low[tok];
	h = (tok * 2654435761u) & (MODEL_SLOTS - 1);
	while (m->used[h]) {
		if (m->key[h] == tok)
			return &m->state[h];
		h = (h + 1) & (MODEL_SLOTS - 1);
	}
	if (!add)
		return NULL;
	FZ_CHECK(m->nused < MODEL_SLOTS / 2);
	m->used[h] = true;
	m->key[h] = tok;
	m->state[h] = TOK_FREE;
	m->nused++;
	return &m->state[h];
}

static inline enum tok_state model_get(struct model *m, uint32_t tok)
{
	uint8_t *s = model_slot(m, tok, false);

	return s ? (enum tok_state)*s : TOK_FREE;
}

static inline void model_set(struct model *m, uint32_t tok, enum tok_state st)
{
	uint8_t *s = model_slot(m, tok, true);

	if (*s == TOK_FREE && st != TOK_FREE)
		m->held++;
	else if (*s != TOK_FREE && st == TOK_FREE)
		m->held--;
	*s = (uint8_t)st;
}

/* The token the kernel hands out next: the lowest free one, or big. */
static inline uint32_t model_new_token(struct model *m, bool big, uint32_t v)
{
	if (big && v >= MODEL_LOW && model_get(m, v) == TOK_FREE &&
	    m->nused < MODEL_SLOTS / 4)
		return v;
	for (uint32_t t = 0; t < MODEL_LOW; t++)
		if (m->low[t] == TOK_FREE)
			return t;
	for (uint32_t t = MODEL_LOW;; t++)
		if (model_get(m, t) == TOK_FREE)
			return t;
}

/* sock_devmem_dontneed(): frees the tokens it holds, skips others, looks
 * at no more than 1024 frags per call. */
static inline int model_dontneed(void *arg, const struct dmt_dmabuf_token *t,
				 size_t n)
{
	struct model *m = arg;
	uint32_t inspected = 0;
	int freed = 0;

	m->calls++;
	FZ_CHECK(n >= 1 && n <= DMT_MAX_DONTNEED_TOKENS);
	if (m->eintr_next) {
		m->eintr_next = false;
		return -EINTR;
	}
	if (MODEL_KERNEL_FAILS && m->fail_call && m->calls == m->fail_call)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		FZ_CHECK(t[i].token_count >= 1);
		for (uint32_t k = 0; k < t[i].token_count; k++) {
			uint32_t tok = t[i].token_start + k;
			enum tok_state st = model_get(m, tok);

			if (st == TOK_USER || st == TOK_DEFERRED)
				m->bad = st == TOK_USER
						 ? "a token the user still holds was returned to the kernel"
						 : "a token of an unfinished deferred release was returned to the kernel";
			FZ_CHECK(st != TOK_USER && st != TOK_DEFERRED);
			if (++inspected > DMT_MAX_DONTNEED_FRAGS)
				return freed;
			if (st == TOK_RELEASED) {
				model_set(m, tok, TOK_FREE);
				freed++;
				m->freed++;
			}
		}
	}
	return freed;
}

#endif

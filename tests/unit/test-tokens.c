// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Token manager: merging, kernel batch limits, partial returns, double
 * release refusal, deferred release. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tokens.h"

/* A fake kernel: a set of live tokens, the per-call limits of
 * sock_devmem_dontneed(), and an optional cap to force partial returns. */
struct fake_kernel {
	uint8_t live[8192];
	int calls;
	int cap;		/* free at most this many per call (0: no cap) */
	size_t max_ranges_seen;
	uint32_t max_frags_seen;
	int fail;		/* return this errno once */
	int fail_at;		/* return fail_err from this call (1: the first) */
	int fail_err;
	/* the ranges of every call that reached the kernel, in order */
	struct dmt_dmabuf_token log[64];
	size_t nlog;
};

static int fake_dontneed(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	struct fake_kernel *k = arg;
	uint32_t frags = 0;
	int freed = 0;

	k->calls++;
	if (k->fail_at && k->calls == k->fail_at)
		return k->fail_err;
	if (k->fail) {
		int e = k->fail;

		k->fail = 0;
		return e;
	}
	if (n > DMT_MAX_DONTNEED_TOKENS)
		return -EINVAL;
	if (n > k->max_ranges_seen)
		k->max_ranges_seen = n;
	for (size_t i = 0; i < n && k->nlog < 64; i++)
		k->log[k->nlog++] = t[i];
	for (size_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < t[i].token_count; j++) {
			uint32_t tok = t[i].token_start + j;

			if (++frags > DMT_MAX_DONTNEED_FRAGS)
				goto out;
			if (k->cap && freed == k->cap)
				goto out;
			if (tok < sizeof(k->live) && k->live[tok]) {
				k->live[tok] = 0;
				freed++;
			}
		}
	}
out:
	if (frags > k->max_frags_seen)
		k->max_frags_seen = frags;
	return freed;
}

static struct fake_kernel *k;
static struct dmt_tokens T;

static int setup(void **state)
{
	k = calloc(1, sizeof(*k));
	dmt_tokens_init(&T, 0, fake_dontneed, k);
	return 0;
}

static int teardown(void **state)
{
	dmt_tokens_fini(&T);
	free(k);
	return 0;
}

/* The kernel hands out tokens: mark them live on both sides. */
static void receive(struct devmemtcp_frag *f, uint32_t tok)
{
	memset(f, 0, sizeof(*f));
	f->token = tok;
	f->len = 4096;
	k->live[tok] = 1;
	assert_int_equal(dmt_tokens_received(&T, tok), 0);
	dmt_tokens_update_max(&T);
}

static int live_count(void)
{
	int n = 0;

	for (size_t i = 0; i < sizeof(k->live); i++)
		n += k->live[i];
	return n;
}

static void release(struct devmemtcp_frag *f, size_t n)
{
	size_t bad;

	assert_int_equal(dmt_tokens_take(&T, f, n, &bad), 0);
	for (size_t i = 0; i < n; i++)
		if (!(f[i].flags & DEVMEMTCP_FRAG_LINEAR))
			assert_int_equal(dmt_tokens_queue(&T, f[i].token), 0);
}

static void test_merge_in_order(void **state)
{
	struct devmemtcp_frag f[640];

	for (uint32_t i = 0; i < 640; i++)
		receive(&f[i], i);
	release(f, 640);
	/* one range, no syscall yet (640 < 1024) */
	assert_int_equal(T.npending, 1);
	assert_int_equal(T.pending[0].token_start, 0);
	assert_int_equal(T.pending[0].token_count, 640);
	assert_int_equal(k->calls, 0);
	assert_int_equal(dmt_tokens_flush(&T), 640);
	assert_int_equal(k->calls, 1);
	assert_int_equal(live_count(), 0);
	assert_int_equal(T.released, 640);
	assert_int_equal(T.outstanding, 0);
}

static void test_frag_limit(void **state)
{
	static struct devmemtcp_frag f[3000];

	for (uint32_t i = 0; i < 3000; i++)
		receive(&f[i], i);
	release(f, 3000);
	assert_int_equal(dmt_tokens_flush(&T), 3000 - 2 * 1024);
	/* batches never exceed the kernel's 1024-frag budget */
	assert_int_equal(k->calls, 3);
	assert_true(k->max_frags_seen <= 1024);
	assert_int_equal(live_count(), 0);
	assert_int_equal(T.partial_returns, 0);
}

static void test_range_limit(void **state)
{
	static struct devmemtcp_frag f[600];

	/* even tokens only: nothing merges, 128 ranges per call */
	for (uint32_t i = 0; i < 300; i++)
		receive(&f[i], 2 * i);
	release(f, 300);
	dmt_tokens_flush(&T);
	assert_int_equal(k->calls, 3);	/* 128 + 128 + 44 */
	assert_int_equal(k->max_ranges_seen, 128);
	assert_int_equal(live_count(), 0);
}

static void test_partial_return_retried(void **state)
{
	struct devmemtcp_frag f[100];

	for (uint32_t i = 0; i < 100; i++)
		receive(&f[i], i);
	k->cap = 30;	/* the kernel stops early every call */
	release(f, 100);
	assert_int_equal(dmt_tokens_flush(&T), 100);
	assert_int_equal(k->calls, 4);	/* 30 + 30 + 30 + 10 */
	assert_int_equal(T.partial_returns, 3);
	assert_int_equal(live_count(), 0);
	assert_int_equal(T.released, 100);
	assert_int_equal(T.lost, 0);
}

static void test_unknown_tokens_not_looping(void **state)
{
	struct devmemtcp_frag f[4];

	for (uint32_t i = 0; i < 4; i++)
		receive(&f[i], i);
	k->live[2] = 0;	/* the kernel forgot one (socket reset, say) */
	release(f, 4);
	assert_int_equal(dmt_tokens_flush(&T), 3);
	assert_int_equal(k->calls, 2);	/* retry finds nothing more: stop */
	assert_int_equal(T.lost, 1);
}

static void test_double_release_refused(void **state)
{
	struct devmemtcp_frag f[3], again[2];
	size_t bad = 99;

	for (uint32_t i = 0; i < 3; i++)
		receive(&f[i], 10 + i);
	release(f, 1);
	/* f[1] is fine but f[0] is not outstanding: nothing may be taken */
	again[0] = f[1];
	again[1] = f[0];
	assert_int_equal(dmt_tokens_take(&T, again, 2, &bad), -EINVAL);
	assert_int_equal(bad, 1);
	assert_true(dmt_tokens_is_outstanding(&T, 11));
	assert_int_equal(T.outstanding, 2);
	/* the same token twice in one call is refused too */
	again[0] = f[2];
	again[1] = f[2];
	assert_int_equal(dmt_tokens_take(&T, again, 2, &bad), -EINVAL);
	assert_int_equal(bad, 1);
	assert_true(dmt_tokens_is_outstanding(&T, 12));
	/* a token never received */
	again[0].token = 4000;
	assert_int_equal(dmt_tokens_take(&T, again, 1, &bad), -EINVAL);
}

/*
 * Runs of tokens in several words of the bitmap, the words revisited: a
 * bad token in a later run (repeated from a run already taken, or never
 * received) puts back every run taken before it, and a good call takes
 * them all.
 */
static void test_take_runs(void **state)
{
	static const uint32_t toks[] = { 3, 4, 5, 64, 65, 200, 6, 66, 201, 7 };
	enum { N = sizeof(toks) / sizeof(toks[0]) };
	struct devmemtcp_frag f[N + 1];
	size_t bad = 99;

	(void)state;
	for (uint32_t i = 0; i < N; i++)
		receive(&f[i], toks[i]);
	assert_int_equal(T.outstanding, N);
	f[N] = f[1];	/* token 4 again, after 5 runs were taken */
	assert_int_equal(dmt_tokens_take(&T, f, N + 1, &bad), -EINVAL);
	assert_int_equal(bad, N);
	assert_int_equal(T.outstanding, N);
	for (uint32_t i = 0; i < N; i++)
		assert_true(dmt_tokens_is_outstanding(&T, toks[i]));
	f[N].token = 202;	/* never received, in a word taken before */
	assert_int_equal(dmt_tokens_take(&T, f, N + 1, &bad), -EINVAL);
	assert_int_equal(bad, N);
	for (uint32_t i = 0; i < N; i++)
		assert_true(dmt_tokens_is_outstanding(&T, toks[i]));
	f[2].token = 4;	/* a repeat inside one run */
	assert_int_equal(dmt_tokens_take(&T, f, N, &bad), -EINVAL);
	assert_int_equal(bad, 2);
	f[2].token = 5;
	assert_int_equal(T.outstanding, N);
	assert_int_equal(dmt_tokens_take(&T, f, N, &bad), 0);
	assert_int_equal(T.outstanding, 0);
	for (uint32_t i = 0; i < N; i++)
		assert_false(dmt_tokens_is_outstanding(&T, toks[i]));
}

/* A run of consecutive tokens across a bitmap word: taken whole or not
 * at all, the fragment to blame named. */
static void test_take_run_across_words(void **state)
{
	struct devmemtcp_frag f[11];
	size_t bad = 99;

	(void)state;
	for (uint32_t i = 0; i < 11; i++)
		if (i != 8)
			receive(&f[i], 60 + i);
	f[8] = f[7];
	f[8].token = 68;	/* never received: the run's second word */
	assert_int_equal(dmt_tokens_take(&T, f, 11, &bad), -EINVAL);
	assert_int_equal(bad, 8);
	assert_int_equal(T.outstanding, 10);
	for (uint32_t i = 0; i < 11; i++)
		assert_int_equal(dmt_tokens_is_outstanding(&T, 60 + i), i != 8);
	receive(&f[8], 68);
	assert_int_equal(dmt_tokens_take(&T, f, 11, &bad), 0);
	assert_int_equal(T.outstanding, 0);
	assert_int_equal(T.bits[0] | T.bits[1], 0);
	assert_int_equal(dmt_tokens_take(&T, f + 5, 1, &bad), -EINVAL);
	assert_int_equal(bad, 0);
}

static void test_linear_skipped(void **state)
{
	struct devmemtcp_frag f[2];
	size_t bad;

	receive(&f[0], 5);
	memset(&f[1], 0, sizeof(f[1]));
	f[1].flags = DEVMEMTCP_FRAG_LINEAR;
	f[1].token = 5;	/* ignored: linear entries carry no token */
	assert_int_equal(dmt_tokens_take(&T, f, 2, &bad), 0);
	assert_int_equal(T.outstanding, 0);
}

static void test_received_twice(void **state)
{
	struct devmemtcp_frag f;

	receive(&f, 77);
	assert_int_equal(dmt_tokens_received(&T, 77), -EEXIST);
	assert_int_equal(T.outstanding, 1);
}

struct completion {
	int done;
	int polls;
	int waited;
};

static int done_fn(void *arg, bool wait)
{
	struct completion *c = arg;

	c->polls++;
	if (wait && !c->done) {
		c->waited++;
		c->done = 1;
	}
	return c->done;
}

static void test_deferred(void **state)
{
	struct devmemtcp_frag f[6];
	struct completion a = { 0 }, b = { 0 };
	size_t bad;

	for (uint32_t i = 0; i < 6; i++)
		receive(&f[i], i);
	assert_int_equal(dmt_tokens_take(&T, f, 3, &bad), 0);
	assert_int_equal(dmt_tokens_defer(&T, f, 3, done_fn, &a), 0);
	assert_int_equal(dmt_tokens_take(&T, f + 3, 3, &bad), 0);
	assert_int_equal(dmt_tokens_defer(&T, f + 3, 3, done_fn, &b), 0);
	assert_int_equal(T.deferred_pending, 6);
	/* nothing completes: nothing is released */
	assert_int_equal(dmt_tokens_poll(&T, false), 0);
	dmt_tokens_flush(&T);
	assert_int_equal(live_count(), 6);
	/* b completes first, but a holds the head: release in order */
	b.done = 1;
	assert_int_equal(dmt_tokens_poll(&T, false), 0);
	assert_int_equal(b.polls, 0);
	a.done = 1;
	assert_int_equal(dmt_tokens_poll(&T, false), 6);
	assert_int_equal(dmt_tokens_flush(&T), 6);
	assert_int_equal(live_count(), 0);
	assert_int_equal(T.deferred_pending, 0);
	/* finished entries are not polled again */
	assert_int_equal(dmt_tokens_poll(&T, false), 0);
	assert_int_equal(a.polls, 3);
	assert_int_equal(b.polls, 1);
}

static void test_release_all_waits(void **state)
{
	struct devmemtcp_frag f[5];
	struct completion a = { 0 };
	size_t bad;

	for (uint32_t i = 0; i < 5; i++)
		receive(&f[i], 100 + i);
	assert_int_equal(dmt_tokens_take(&T, f, 2, &bad), 0);
	assert_int_equal(dmt_tokens_defer(&T, f, 2, done_fn, &a), 0);
	assert_int_equal(dmt_tokens_release_all(&T), 5);
	assert_int_equal(a.waited, 1);
	assert_int_equal(dmt_tokens_flush(&T), 5);
	assert_int_equal(live_count(), 0);
	assert_int_equal(T.outstanding, 0);
}

static void test_flush_error_keeps_batch(void **state)
{
	struct devmemtcp_frag f[3];

	for (uint32_t i = 0; i < 3; i++)
		receive(&f[i], i);
	release(f, 3);
	k->fail = -ENOMEM;
	assert_int_equal(dmt_tokens_flush(&T), -ENOMEM);
	assert_int_equal(T.pending_frags, 3);	/* kept for the next flush */
	assert_int_equal(dmt_tokens_flush(&T), 3);
	assert_int_equal(live_count(), 0);
}

/*
 * A SO_DEVMEM_DONTNEED that fails in the middle of a release: the release
 * reports it, but every token the caller handed over stays with the
 * manager and reaches the kernel at the next flush.  (Once, 3000 released
 * with the third call failing left 2744 pinned until the socket closed.)
 */
static void test_failed_dontneed_keeps_tokens(void **state)
{
	static struct devmemtcp_frag f[3000];
	size_t bad = 0;

	/* even tokens: nothing merges, a batch of 128 ranges per call */
	for (uint32_t i = 0; i < 3000; i++)
		receive(&f[i], 2 * i);
	k->fail_at = 3;
	k->fail_err = -ENOMEM;
	assert_int_equal(dmt_tokens_release(&T, f, 3000, &bad), -ENOMEM);
	assert_int_equal(T.outstanding, 0);	/* all handed over */
	assert_true(dmt_tokens_flush(&T) > 0);
	assert_int_equal(live_count(), 0);
	assert_int_equal(T.released, 3000);
	assert_int_equal(T.lost, 0);
	/* a second release of the same fragments is refused: they are gone */
	assert_int_equal(dmt_tokens_release(&T, f, 1, &bad), -EINVAL);
}

/* The same failure inside release_all: nothing is dropped either. */
static void test_failed_dontneed_in_release_all(void **state)
{
	static struct devmemtcp_frag f[3000];

	for (uint32_t i = 0; i < 3000; i++)
		receive(&f[i], 2 * i);
	k->fail_at = 2;
	k->fail_err = -EFAULT;
	assert_int_equal(dmt_tokens_release_all(&T), -EFAULT);
	assert_true(dmt_tokens_release_all(&T) >= 0);
	assert_true(dmt_tokens_flush(&T) >= 0);
	assert_int_equal(live_count(), 0);
	assert_int_equal(T.released, 3000);
	assert_int_equal(T.outstanding, 0);
}

/* Every later call keeps failing: the tokens wait, counted as held. */
static void test_dontneed_keeps_failing(void **state)
{
	static struct devmemtcp_frag f[1600];
	size_t bad = 0;

	for (uint32_t i = 0; i < 1600; i++)
		receive(&f[i], 2 * i);
	k->fail = -EIO;
	release(f, 100);
	assert_int_equal(dmt_tokens_flush(&T), -EIO);
	for (int i = 0; i < 5; i++) {
		k->fail_at = k->calls + 1;
		k->fail_err = -EIO;
		assert_int_equal(dmt_tokens_release(&T, f + 100 + 300 * i, 300, &bad),
				 -EIO);
	}
	assert_int_equal(live_count(), 1600);
	assert_int_equal(T.released, 0);
	k->fail_at = 0;
	assert_int_equal(dmt_tokens_flush(&T), 1600);
	assert_int_equal(live_count(), 0);
	assert_int_equal(T.released, 1600);
}

/*
 * Finished deferred releases queued by a poll whose DONTNEED fails half-way
 * (tokens apart, so nothing merges: a call per 128): the poll queues them
 * all, the failure is the next flush's, and that flush returns every one.
 * Their LINEAR neighbours hold no token and are not deferred.
 */
static void test_failed_dontneed_in_poll(void **state)
{
	static struct devmemtcp_frag f[3001];
	struct completion a = { .done = 1 }, b = { .done = 1 };
	size_t bad;

	for (uint32_t i = 0; i < 3000; i++)
		receive(&f[i], 2 * i);
	f[3000] = f[1999];
	f[1999] = (struct devmemtcp_frag){ .len = 100,
					   .flags = DEVMEMTCP_FRAG_LINEAR };
	assert_int_equal(dmt_tokens_take(&T, f, 3001, &bad), 0);
	assert_int_equal(dmt_tokens_defer(&T, f, 2000, done_fn, &a), 0);
	assert_int_equal(dmt_tokens_defer(&T, f + 2000, 1001, done_fn, &b), 0);
	assert_int_equal(T.deferred_pending, 3000);
	k->fail_at = 3;
	k->fail_err = -ENOMEM;
	assert_int_equal(dmt_tokens_poll(&T, false), 3000);
	assert_int_equal(k->calls, 3);
	assert_int_equal(T.deferred_pending, 0);
	assert_int_equal(live_count(), 3000 - 2 * DMT_MAX_DONTNEED_TOKENS);
	assert_int_equal(dmt_tokens_flush(&T), 3000 - 2 * DMT_MAX_DONTNEED_TOKENS);
	assert_int_equal(live_count(), 0);
	assert_int_equal(T.released, 3000);
	assert_int_equal(T.lost, 0);
	assert_int_equal(dmt_tokens_held(&T), 0);
}

/*
 * A deferred release of nothing (only linear fragments, or none) before
 * any token was deferred: no token vector yet.  It is polled in order
 * like any other and queues nothing (it once computed an offset from the
 * vector's NULL, which clang's UBSan reports in the fuzzing build; fuzz-tokens found it).
 */
static void test_defer_nothing_first(void **state)
{
	struct devmemtcp_frag lin = { .len = 100, .flags = DEVMEMTCP_FRAG_LINEAR };
	struct completion a = { .done = 1 }, b = { .done = 1 };

	assert_int_equal(dmt_tokens_defer(&T, &lin, 1, done_fn, &a), 0);
	assert_int_equal(dmt_tokens_defer(&T, NULL, 0, done_fn, &b), 0);
	assert_int_equal(T.deferred_pending, 0);
	assert_int_equal(dmt_tokens_poll(&T, false), 0);
	assert_int_equal(a.polls + b.polls, 2);
	assert_int_equal(T.dq_len, 0);
	assert_int_equal(k->calls, 0);
}

/*
 * A gathered receive's tokens are deferred as ranges of consecutive
 * tokens, and queued a range at a time when their release comes: cut
 * where a batch is full (1024 fragments a call), in order, every token
 * once; a failed call keeps its batch and the rest wait in the backlog.
 * A token repeated from an earlier range refuses the whole call.
 */
static void test_deferred_ranges(void **state)
{
	static struct devmemtcp_frag f[3001];
	struct completion a = { .done = 1 }, b = { .done = 1 };
	size_t bad = 99;

	(void)state;
	for (uint32_t i = 0; i < 3000; i++)
		receive(&f[i], 10 + i);
	/* a linear entry inside the run: no token, the run goes on */
	memmove(&f[1001], &f[1000], 2000 * sizeof(*f));
	f[1000] = (struct devmemtcp_frag){ .len = 100,
					   .flags = DEVMEMTCP_FRAG_LINEAR };
	assert_int_equal(dmt_tokens_take_defer(&T, f, 2001, done_fn, &a, &bad),
			 0);
	assert_int_equal(dmt_tokens_take_defer(&T, f + 2001, 1000, done_fn, &b,
					       &bad), 0);
	assert_int_equal(T.outstanding, 0);
	assert_int_equal(T.deferred_pending, 3000);
	assert_int_equal(T.dt_len, 2);	/* one range each */
	k->fail_at = 2;
	k->fail_err = -ENOMEM;
	assert_int_equal(dmt_tokens_poll(&T, false), 3000);
	/* the first batch went, the second failed and is kept, the rest
	 * waits behind it */
	assert_int_equal(k->calls, 2);
	assert_int_equal(T.deferred_pending, 0);
	assert_int_equal(live_count(), 3000 - 1024);
	assert_int_equal(T.pending_frags, 1024);
	assert_int_equal(T.bl_len - T.bl_head, 3000 - 2048);
	assert_int_equal(dmt_tokens_held(&T), 3000 - 1024);
	assert_int_equal(dmt_tokens_flush(&T), 3000 - 1024);
	assert_int_equal(live_count(), 0);
	assert_int_equal(T.released, 3000);
	assert_int_equal(T.lost, 0);
	assert_int_equal(dmt_tokens_held(&T), 0);
	assert_int_equal(k->max_frags_seen, 1024);
	/* every range the kernel saw: [10, 1034), [1034, 2058) (sent again
	 * after the failure), then the backlog's tokens, merged */
	assert_int_equal(k->log[0].token_start, 10);
	assert_int_equal(k->log[0].token_count, 1024);
	assert_int_equal(k->log[1].token_start, 1034);
	assert_int_equal(k->log[1].token_count, 1024);
	assert_int_equal(k->log[2].token_start, 2058);
	assert_int_equal(k->log[2].token_count, 3010 - 2058);
	assert_int_equal(k->nlog, 3);

	/* 5 6 7 then 3 4 5: 5 repeats, from the range before */
	for (uint32_t i = 0; i < 5; i++)
		receive(&f[i], i < 3 ? 5 + i : i);
	f[5] = f[0];
	assert_int_equal(dmt_tokens_take_defer(&T, f, 6, done_fn, &a, &bad),
			 -EINVAL);
	assert_int_equal(bad, 5);
	assert_int_equal(T.outstanding, 5);
	assert_int_equal(T.deferred_pending, 0);
	assert_int_equal(T.dq_len, 0);
}

static int done_fails(void *arg, bool wait)
{
	(*(int *)arg)++;
	return -EIO;
}

/*
 * A deferred release whose done fails keeps its own tokens (whether their
 * bytes were consumed is unknown), but does not hold back the others:
 * release_all reports the failure after queueing every other token.
 */
static void test_failing_done_holds_only_its_tokens(void **state)
{
	struct devmemtcp_frag f[7];
	size_t bad;
	int calls = 0;

	for (uint32_t i = 0; i < 7; i++)
		receive(&f[i], 40 + i);
	assert_int_equal(dmt_tokens_take(&T, f, 2, &bad), 0);
	assert_int_equal(dmt_tokens_defer(&T, f, 2, done_fails, &calls), 0);
	assert_int_equal(dmt_tokens_release_all(&T), -EIO);
	assert_int_equal(calls, 1);
	assert_int_equal(dmt_tokens_flush(&T), 5);
	assert_int_equal(live_count(), 2);
	assert_true(k->live[40] && k->live[41]);
	assert_int_equal(T.deferred_pending, 2);
	assert_int_equal(T.outstanding, 0);
	/* polled again later, it still holds them */
	assert_int_equal(dmt_tokens_poll(&T, false), -EIO);
	assert_int_equal(T.deferred_pending, 2);
}

static void test_high_water(void **state)
{
	struct devmemtcp_frag f[10];

	for (uint32_t i = 0; i < 10; i++)
		receive(&f[i], i);
	release(f, 4);
	receive(&f[0], 20);
	assert_int_equal(T.outstanding_max, 11);	/* 10 held + 1 new */
}

/* Every token handed back, in order (a kernel that frees them all). */
struct returned {
	uint32_t tok[16];
	int n;
};

static int record_dontneed(void *arg, const struct dmt_dmabuf_token *t,
			   size_t n)
{
	struct returned *r = arg;
	int freed = 0;

	for (size_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < t[i].token_count; j++, freed++)
			if (r->n < 16)
				r->tok[r->n++] = t[i].token_start + j;
	return freed;
}

/*
 * Kernel tokens are small xarray indices, but nothing stops a large one:
 * its value must not size the bitmap (0xfffffff0 allocated 512 MiB), and
 * it must be kept, released and returned like any other.  Reproducer:
 * tests/fuzz/corpus/tokens/regress-large-token.
 */
static void test_large_token_bounded(void **state)
{
	static const uint32_t big[] = { 0xfffffff0u, 0x80000000u, 1u << 30 };
	struct devmemtcp_frag f[4];
	struct returned r = { 0 };
	struct dmt_tokens t;
	size_t bad;

	dmt_tokens_init(&t, 0, record_dontneed, &r);
	memset(f, 0, sizeof(f));
	for (int i = 0; i < 3; i++) {
		f[i].token = big[i];
		assert_int_equal(dmt_tokens_received(&t, big[i]), 0);
	}
	f[3].token = 5;
	assert_int_equal(dmt_tokens_received(&t, 5), 0);
	/* a token's value costs at most 1 MiB of bitmap */
	assert_true(t.nwords * sizeof(*t.bits) <= (1u << 20));
	assert_int_equal(t.outstanding, 4);
	for (int i = 0; i < 4; i++)
		assert_true(dmt_tokens_is_outstanding(&t, f[i].token));
	assert_false(dmt_tokens_is_outstanding(&t, 0xfffffff1u));
	assert_int_equal(dmt_tokens_received(&t, big[0]), -EEXIST);
	assert_int_equal(t.outstanding, 4);

	/* released like any token; twice is refused and changes nothing */
	assert_int_equal(dmt_tokens_release(&t, f, 2, &bad), 0);
	assert_false(dmt_tokens_is_outstanding(&t, big[0]));
	assert_int_equal(dmt_tokens_release(&t, &f[1], 3, &bad), -EINVAL);
	assert_int_equal(bad, 0);
	assert_true(dmt_tokens_is_outstanding(&t, big[2]));
	assert_true(dmt_tokens_is_outstanding(&t, 5));
	assert_int_equal(dmt_tokens_flush(&t), 2);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.tok[0], big[0]);
	assert_int_equal(r.tok[1], big[1]);
	/* and returned at the end */
	assert_int_equal(dmt_tokens_release_all(&t), 2);
	assert_int_equal(dmt_tokens_flush(&t), 2);
	assert_int_equal(r.n, 4);
	assert_true((r.tok[2] == 5 && r.tok[3] == big[2]) ||
		    (r.tok[2] == big[2] && r.tok[3] == 5));
	assert_int_equal(t.outstanding, 0);
	dmt_tokens_fini(&t);
}

int main(void)
{
#define T_(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T_(test_merge_in_order),
		T_(test_deferred_ranges),
		T_(test_take_run_across_words),
		T_(test_frag_limit),
		T_(test_range_limit),
		T_(test_partial_return_retried),
		T_(test_unknown_tokens_not_looping),
		T_(test_double_release_refused),
		T_(test_take_runs),
		T_(test_linear_skipped),
		T_(test_received_twice),
		T_(test_deferred),
		T_(test_release_all_waits),
		T_(test_flush_error_keeps_batch),
		T_(test_high_water),
		T_(test_failed_dontneed_keeps_tokens),
		T_(test_failed_dontneed_in_release_all),
		T_(test_failed_dontneed_in_poll),
		T_(test_defer_nothing_first),
		T_(test_dontneed_keeps_failing),
		T_(test_failing_done_holds_only_its_tokens),
		T_(test_large_token_bounded),
	};

	return cmocka_run_group_tests_name("tokens", tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Threads on one receive handle (also run under ThreadSanitizer): releases
 * from other threads while the receiving thread is blocked in
 * devmemtcp_rx_recv, and a receiving thread racing releasing threads
 * (devmemtcp_rx_release, _release_after, _flush) without a token lost or
 * returned twice.  Tokens come from control buffers laid out as the kernel
 * lays them out, fed to the receive processing (as the benchmark does);
 * the token return goes to a counting stand-in for the kernel.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "buf.h"
#include "cmsgfixture.h"
#include "harness.h"
#include "rx.h"

#define CMSG_FRAG CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg))
#define NTOKENS (1u << 17)
#define PER_RECV 64

/* The kernel's side: how often each token came back. */
static struct {
	pthread_mutex_t lock;
	uint8_t returned[NTOKENS];
	unsigned long calls;
	pthread_t last_caller;
} kern = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int stub_dontneed(void *arg, const struct dmt_dmabuf_token *t, size_t n)
{
	int freed = 0;

	pthread_mutex_lock(&kern.lock);
	kern.calls++;
	kern.last_caller = pthread_self();
	for (size_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < t[i].token_count; j++) {
			uint32_t tok = t[i].token_start + j;

			if (tok < NTOKENS && kern.returned[tok] < 255)
				kern.returned[tok]++;
			freed++;
		}
	}
	pthread_mutex_unlock(&kern.lock);
	return freed;
}

static struct devmemtcp_ctx *ctx;
static struct devmemtcp_buf *buf;
static struct devmemtcp_rx *rx;
static int sv[2];

static int setup_with(uint32_t release_batch)
{
	DEVMEMTCP_OPTS(rx_opts, ro, .release_batch = release_batch);
	struct devmemtcp_segment seg = { 0, 1ull << 30, 0x7f0000000000 };

	memset(kern.returned, 0, sizeof(kern.returned));
	kern.calls = 0;
	if (devmemtcp_ctx_new(NULL, &ctx) || t_tcp_pair(sv) ||
	    dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf))
		return -1;
	buf->size = seg.len;
	if (dmt_buf_set_segments(buf, &seg, 1) ||
	    devmemtcp_rx_new(ctx, sv[1], &ro, &rx) ||
	    devmemtcp_rx_add_buf(rx, 1, buf))
		return -1;
	dmt_rx_tokens(rx)->dontneed = stub_dontneed;
	return 0;
}

static int setup_batch1(void **state)
{
	return setup_with(1);
}

static int setup_default(void **state)
{
	return setup_with(0);
}

static int teardown(void **state)
{
	devmemtcp_rx_free(rx);
	devmemtcp_buf_free(buf);
	close(sv[0]);
	close(sv[1]);
	devmemtcp_ctx_free(ctx);
	return 0;
}

/* n fragments with tokens first.. as one recvmsg's control messages, put
 * through the receive processing into frags. */
static int feed(uint32_t first, uint32_t n, struct devmemtcp_frag *frags)
{
	char ctrl[PER_RECV * CMSG_FRAG] __attribute__((aligned(8)));
	struct msghdr msg = { .msg_control = ctrl, .msg_controllen = n * CMSG_FRAG };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	for (uint32_t i = 0; i < n; i++, cm = CMSG_NXTHDR(&msg, cm)) {
		struct dmt_dmabuf_cmsg d = {
			.frag_offset = (uint64_t)(first + i) * 4096,
			.frag_size = 4096,
			.frag_token = first + i,
			.dmabuf_id = 1,
		};

		cmsgfix_dmabuf(cm, &d);
	}
	return dmt_rx_process(rx, &msg, (size_t)n * 4096, frags, n);
}

static void check_returned_once(uint32_t ntokens)
{
	DEVMEMTCP_OPTS(rx_stats, st);

	for (uint32_t i = 0; i < ntokens; i++)
		if (kern.returned[i] != 1)
			fail_msg("token %u came back %u times", i, kern.returned[i]);
	for (uint32_t i = ntokens; i < NTOKENS; i++)
		assert_int_equal(kern.returned[i], 0);
	assert_int_equal(devmemtcp_rx_stats(rx, &st), 0);
	assert_int_equal(st.tokens_outstanding, 0);
	assert_int_equal(st.tokens_released, ntokens);
	assert_int_equal(st.frags, ntokens);
}

/* ---- releases while the receiving thread blocks ------------------------- */

struct blocked_recv {
	int ret;
	bool returned;
	struct devmemtcp_frag frags[8];
	char linear[64];
};

static void *recv_main(void *arg)
{
	struct blocked_recv *b = arg;

	b->ret = devmemtcp_rx_recv(rx, b->frags, 8, b->linear, sizeof(b->linear));
	__atomic_store_n(&b->returned, true, __ATOMIC_RELEASE);
	return NULL;
}

struct releaser {
	const struct devmemtcp_frag *frags;
	size_t n;
	int ret;
};

static void *release_main(void *arg)
{
	struct releaser *r = arg;

	for (size_t i = 0; i < r->n && !r->ret; i++)
		r->ret = devmemtcp_rx_release(rx, &r->frags[i], 1);
	return NULL;
}

/*
 * With release_batch 1 every release is due at once: threads releasing
 * while another thread is blocked in devmemtcp_rx_recv hand their tokens
 * to the kernel themselves, without waiting for that receive to return.
 */
static void test_release_while_recv_blocks(void **state)
{
	struct devmemtcp_frag f[PER_RECV];
	struct blocked_recv b = { 0 };
	struct releaser r[2] = { { f, PER_RECV / 2 }, { f + PER_RECV / 2, PER_RECV / 2 } };
	pthread_t rt, wt[2];
	struct timespec pause = { 0, 50 * 1000 * 1000 };
	unsigned long calls;
	bool returned, by_receiver;

	assert_int_equal(feed(0, PER_RECV, f), PER_RECV);
	assert_int_equal(pthread_create(&rt, NULL, recv_main, &b), 0);
	nanosleep(&pause, NULL);	/* let it block in recvmsg */
	for (int i = 0; i < 2; i++)
		if (pthread_create(&wt[i], NULL, release_main, &r[i]))
			r[i].ret = -EAGAIN, r[i].n = 0, wt[i] = pthread_self();
	for (int i = 0; i < 2; i++)
		if (!pthread_equal(wt[i], pthread_self()))
			pthread_join(wt[i], NULL);
	returned = __atomic_load_n(&b.returned, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&kern.lock);
	calls = kern.calls;
	by_receiver = pthread_equal(kern.last_caller, rt);
	pthread_mutex_unlock(&kern.lock);
	/* unblock the receive before any check can end the test */
	assert_int_equal(write(sv[0], "x", 1), 1);
	pthread_join(rt, NULL);
	for (int i = 0; i < 2; i++)
		assert_int_equal(r[i].ret, 0);
	/* every token went back while the receive was still blocked, handed
	 * to the kernel by the releasing threads */
	assert_false(returned);
	assert_int_equal(calls, PER_RECV);
	assert_false(by_receiver);
	assert_int_equal(b.ret, 1);
	assert_int_equal(b.frags[0].flags, DEVMEMTCP_FRAG_LINEAR);
	assert_int_equal(b.linear[0], 'x');
	assert_int_equal(devmemtcp_rx_flush(rx), 0);
	check_returned_once(PER_RECV);
}

/* ---- a receiving thread racing releasing threads ------------------------ */

#define ROUNDS (NTOKENS / PER_RECV)
#define NWORKERS 3

/* Received batches waiting for a releasing thread. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct devmemtcp_frag (*batches)[PER_RECV];
	unsigned head, tail;	/* tail: batches received */
	bool done;
} work = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };

/* A deferred release's completion: done once its worker says so. */
struct completion {
	int state;		/* 0 pending, 1 done (atomic) */
};

static int completion_done(void *arg, bool wait)
{
	struct completion *c = arg;

	while (wait && !__atomic_load_n(&c->state, __ATOMIC_ACQUIRE))
		sched_yield();
	return __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
}

static void *producer_main(void *arg)
{
	long failed = 0;

	for (unsigned i = 0; i < ROUNDS; i++) {
		if (feed(i * PER_RECV, PER_RECV, work.batches[i]) != PER_RECV)
			failed++;
		/* what devmemtcp_rx_recv does before it blocks */
		if (i % 4 == 0 && devmemtcp_rx_flush(rx) < 0)
			failed++;
		pthread_mutex_lock(&work.lock);
		work.tail = i + 1;
		pthread_cond_broadcast(&work.cond);
		pthread_mutex_unlock(&work.lock);
	}
	pthread_mutex_lock(&work.lock);
	work.done = true;
	pthread_cond_broadcast(&work.cond);
	pthread_mutex_unlock(&work.lock);
	return (void *)failed;
}

static void *worker_main(void *arg)
{
	struct completion *c = arg;	/* one per batch */
	long failed = 0;

	for (;;) {
		unsigned i;

		pthread_mutex_lock(&work.lock);
		while (work.head == work.tail && !work.done)
			pthread_cond_wait(&work.cond, &work.lock);
		if (work.head == work.tail) {
			pthread_mutex_unlock(&work.lock);
			break;
		}
		i = work.head++;
		pthread_mutex_unlock(&work.lock);
		switch (i % 3) {
		case 0:
			failed += devmemtcp_rx_release(rx, work.batches[i], PER_RECV) != 0;
			break;
		case 1:
			failed += devmemtcp_rx_release_after(rx, work.batches[i], PER_RECV,
							     completion_done, &c[i]) != 0;
			__atomic_store_n(&c[i].state, 1, __ATOMIC_RELEASE);
			break;
		case 2:
			failed += devmemtcp_rx_release(rx, work.batches[i], PER_RECV / 2) != 0;
			failed += devmemtcp_rx_release(rx, work.batches[i] + PER_RECV / 2,
						       PER_RECV / 2) != 0;
			failed += devmemtcp_rx_flush(rx) < 0;
			break;
		}
	}
	return (void *)failed;
}

static void test_recv_races_releases(void **state)
{
	struct completion *c = calloc(ROUNDS, sizeof(*c));
	pthread_t p, w[NWORKERS];
	void *failed;

	work.batches = calloc(ROUNDS, sizeof(*work.batches));
	work.head = work.tail = 0;
	work.done = false;
	assert_non_null(c);
	assert_non_null(work.batches);
	assert_int_equal(pthread_create(&p, NULL, producer_main, NULL), 0);
	for (int i = 0; i < NWORKERS; i++)
		assert_int_equal(pthread_create(&w[i], NULL, worker_main, c), 0);
	pthread_join(p, &failed);
	assert_int_equal((long)failed, 0);
	for (int i = 0; i < NWORKERS; i++) {
		pthread_join(w[i], &failed);
		assert_int_equal((long)failed, 0);
	}
	assert_true(devmemtcp_rx_release_all(rx) >= 0);
	check_returned_once(NTOKENS);
	free(work.batches);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_release_while_recv_blocks,
						setup_batch1, teardown),
		cmocka_unit_test_setup_teardown(test_recv_races_releases,
						setup_default, teardown),
	};

	return cmocka_run_group_tests_name("rx-threads", tests, NULL, NULL);
}

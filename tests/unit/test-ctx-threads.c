// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Threads on one context (also run under ThreadSanitizer): the queries
 * documented as callable from several threads at once (devmemtcp_queue_list,
 * devmemtcp_qstats_get) record and log their messages one at a time, so
 * the log callback only ever sees whole messages; devmemtcp_bind_tx from
 * several threads leaves the context's logging as it was.
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
#include <cmocka.h>

#include "devmemtcp.h"

#define ROUNDS 20000

static const char queue_msg[] =
	"devmemtcp_queue_list: ifindex -1 and 0 entries at (nil): pass an ifindex from if_nametoindex() and an array for max entries";
static const char qstats_msg[] =
	"devmemtcp_qstats_get: stats is NULL or its sz is not set: set .sz = sizeof(struct devmemtcp_qstats)";
static const char bind_tx_msg[] =
	"devmemtcp_bind_tx: ifindex 0 is not an interface: get it with if_nametoindex()";

/* What the log callback saw; it runs with the context's lock held when
 * the library is right, so plain counters would do, but a torn message
 * must not become a crash in the test itself. */
static struct {
	pthread_mutex_t lock;
	unsigned long calls, torn;
	char first_torn[1024];
} seen = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void log_check(void *user, int level, const char *msg)
{
	char copy[1024];

	snprintf(copy, sizeof(copy), "%s", msg);
	pthread_mutex_lock(&seen.lock);
	seen.calls++;
	if (strcmp(copy, queue_msg) && strcmp(copy, qstats_msg) &&
	    strcmp(copy, bind_tx_msg)) {
		if (!seen.torn++)
			snprintf(seen.first_torn, sizeof(seen.first_torn), "%s", copy);
	}
	pthread_mutex_unlock(&seen.lock);
}

static struct devmemtcp_ctx *ctx;

static void *queries_main(void *arg)
{
	long bad = 0;

	for (int i = 0; i < ROUNDS; i++) {
		if ((intptr_t)arg) {
			bad += devmemtcp_qstats_get(ctx, 1, DEVMEMTCP_QUEUE_RX, 0,
						    NULL) != -EINVAL;
		} else {
			bad += devmemtcp_queue_list(ctx, -1, NULL, 0) != -EINVAL;
		}
	}
	return (void *)bad;
}

static void reset_log(void)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = log_check,
		       .log_level = DEVMEMTCP_LOG_ERR);

	seen.calls = seen.torn = 0;
	seen.first_torn[0] = '\0';
	assert_int_equal(devmemtcp_ctx_new(&o, &ctx), 0);
}

static void test_queries_log_whole_messages(void **state)
{
	pthread_t t[4];
	void *bad;

	reset_log();
	for (intptr_t i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, queries_main,
						(void *)(i % 2)), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &bad);
		assert_int_equal((long)bad, 0);
	}
	assert_int_equal(seen.calls, 4 * ROUNDS);
	if (seen.torn)
		fail_msg("%lu torn messages, the first: \"%s\"", seen.torn,
			 seen.first_torn);
	/* the last message is one of the two, whole */
	assert_true(!strcmp(devmemtcp_ctx_errmsg(ctx), queue_msg) ||
		    !strcmp(devmemtcp_ctx_errmsg(ctx), qstats_msg));
	devmemtcp_ctx_free(ctx);
}

static void *bind_tx_main(void *arg)
{
	struct devmemtcp_binding *b;
	long bad = 0;

	for (int i = 0; i < ROUNDS / 10; i++)
		bad += devmemtcp_bind_tx(ctx, 0, NULL, NULL, &b) != -ENODEV;
	return (void *)bad;
}

/* Once, bind-tx turned logging off around its own call and back on after:
 * two threads could leave it off for good. */
static void test_bind_tx_keeps_logging(void **state)
{
	pthread_t t[4];
	void *bad;

	reset_log();
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, bind_tx_main, NULL), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &bad);
		assert_int_equal((long)bad, 0);
	}
	/* each failure was logged once, whole */
	assert_int_equal(seen.calls, 4 * (ROUNDS / 10));
	assert_int_equal(seen.torn, 0);
	/* and logging is still on */
	assert_int_equal(devmemtcp_queue_list(ctx, -1, NULL, 0), -EINVAL);
	assert_int_equal(seen.calls, 4 * (ROUNDS / 10) + 1);
	devmemtcp_ctx_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_queries_log_whole_messages),
		cmocka_unit_test(test_bind_tx_keeps_logging),
	};

	return cmocka_run_group_tests_name("ctx-threads", tests, NULL, NULL);
}

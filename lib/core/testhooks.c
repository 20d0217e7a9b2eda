// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* Test-build hooks (lib/core/testhooks.h); compiled only with -Dtest_hooks=true. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "testhooks.h"

static atomic_long countdown;	/* > 0: fail when it reaches 0 */
static atomic_bool sticky;
static atomic_long made;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

const char *dmt_hook_env(const char *name)
{
	return secure_getenv(name);
}

int dmt_hook_env_int(const char *name)
{
	const char *v = dmt_hook_env(name);
	char *end;
	long n;

	if (!v || !*v)
		return 0;
	n = strtol(v, &end, 10);
	return *end || n < 0 || n > INT_MAX ? 0 : (int)n;
}

static void alloc_env(void)
{
	int n = dmt_hook_env_int("DEVMEMTCP_TEST_FAIL_ALLOC");

	if (n > 0)
		atomic_store(&countdown, n);
}

bool dmt_hook_alloc_fail(void)
{
	long c;

	pthread_once(&env_once, alloc_env);
	atomic_fetch_add(&made, 1);
	if (atomic_load(&sticky) && atomic_load(&countdown) == 0)
		return true;
	c = atomic_load(&countdown);
	while (c > 0) {
		if (atomic_compare_exchange_weak(&countdown, &c, c - 1))
			return c == 1;
	}
	return false;
}

long dmt_test_alloc_fail(long nth, bool stick)
{
	pthread_once(&env_once, alloc_env);
	atomic_store(&sticky, false);
	atomic_store(&countdown, nth > 0 ? nth : 0);
	atomic_store(&sticky, nth > 0 && stick);
	return atomic_exchange(&made, 0);
}

void dmt_hook_delay(const char *name)
{
	int ms = dmt_hook_env_int(name);
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	if (ms > 0)
		nanosleep(&ts, NULL);
}

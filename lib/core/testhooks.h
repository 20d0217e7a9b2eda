/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Private: test-build hooks (meson -Dtest_hooks=true).
 *
 * Fault injection (fail or crash at a setup step, fail the N-th
 * allocation, delay inside a critical section) and test-only knobs (another
 * udmabuf device, gather kernel variants) that the test suites and
 * benchmarks need.  Installed builds leave the option off: then every hook
 * below is a constant the compiler removes, so no environment variable can
 * make a privileged program fail, stall or crash on purpose.  Hooks read
 * DEVMEMTCP_TEST_* / DEVMEMTCP_* variables with secure_getenv().  Any layer
 * may call these; they call nothing of the library.
 */
#ifndef DEVMEMTCP_TESTHOOKS_H
#define DEVMEMTCP_TESTHOOKS_H

#include <stdbool.h>

#include "config.h"

#if DMT_TEST_HOOKS
/* Value of an environment variable (test builds only), NULL when unset. */
const char *dmt_hook_env(const char *name);
/* Its value as a non-negative int, 0 when unset or not a number. */
int dmt_hook_env_int(const char *name);
/* True when this allocation must fail (see dmt_test_alloc_fail). */
bool dmt_hook_alloc_fail(void);
/* Sleep for $name milliseconds when set (interleaving tests). */
void dmt_hook_delay(const char *name);

/*
 * Tests: fail the nth allocation from now (1: the next one), and every one
 * after it when sticky; 0 disarms.  DEVMEMTCP_TEST_FAIL_ALLOC=N arms it
 * at the first allocation of a process.  Returns the number of allocations
 * made since the previous call.
 */
long dmt_test_alloc_fail(long nth, bool sticky);
#else
static inline const char *dmt_hook_env(const char *name)
{
	(void)name;
	return 0;
}
static inline int dmt_hook_env_int(const char *name)
{
	(void)name;
	return 0;
}
static inline bool dmt_hook_alloc_fail(void)
{
	return false;
}
static inline void dmt_hook_delay(const char *name)
{
	(void)name;
}
#endif

#endif

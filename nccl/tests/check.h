/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The plugin's unit tests without cmocka (they link the plugin's sources):
 * CHECK(cond, fmt, ...) prints what failed and counts it in failures, and
 * the test goes on; main returns failures ? 1 : 0.
 */
#ifndef DMTN_TEST_CHECK_H
#define DMTN_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("FAIL %s:%d: %s: ", __func__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
			failures++;                                            \
		}                                                              \
	} while (0)

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Shared by the allocation-failure walks (test-alloc.c in tests/unit and
 * tests/host, test-gpu-alloc.c in tests/gpu): arming the N-th allocation's
 * failure, the check of an out-of-memory message, a connected TCP pair
 * over loopback, and fragments with tokens fed through the receive path
 * with a kernel that frees whatever it is given.  Include after cmocka.h.
 */
#ifndef DEVMEMTCP_TEST_ALLOCFIXTURE_H
#define DEVMEMTCP_TEST_ALLOCFIXTURE_H

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmsgfixture.h"
#include "rx.h"

/* Arming needs the test hooks; the rest serves builds without them too
 * (test-rx.c). */
#if DMT_TEST_HOOKS
/* Arm the failure of the n-th allocation from now (0: none); ctx's last
 * message is cleared, so that none is taken for the call's own. */
static inline void alloc_arm(struct devmemtcp_ctx *ctx, long n)
{
	dmt_err_clear(&ctx->err);
	dmt_test_alloc_fail(n, false);
}

/* The same, and every allocation after it fails too: memory stays out. */
static inline void alloc_arm_sticky(struct devmemtcp_ctx *ctx, long n)
{
	dmt_err_clear(&ctx->err);
	dmt_test_alloc_fail(n, true);
}

/* Disarm; true when the armed allocation was reached (and failed). */
static inline bool alloc_injected(long n)
{
	return dmt_test_alloc_fail(0, false) >= n;
}
#endif

/* The message of a call that ran out of memory: ours say so, or give
 * strerror's words for ENOMEM; never blame something else. */
static inline void alloc_expect_oom(const char *path, long n, const char *msg)
{
	if (!strstr(msg, "out of memory") && !strstr(msg, strerror(ENOMEM)))
		fail_msg("%s, allocation %ld failed: the message does not say out of memory: \"%s\"",
			 path, n, msg);
	if (strstr(msg, "unreadable") || strstr(msg, "malformed"))
		fail_msg("%s, allocation %ld failed: the message blames something else: \"%s\"",
			 path, n, msg);
}

/* The walk reached n: the path made n - 1 allocations. */
static inline void alloc_walked(const char *path, long n)
{
	print_message("%s: %ld allocation%s, each failure -ENOMEM\n", path,
		      n - 1, n == 2 ? "" : "s");
}

/* A connected TCP pair over loopback: *peer gets the other end. */
static inline int alloc_tcp_pair(int *peer)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c;

	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	*peer = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(*peer >= 0);
	close(l);
	return c;
}

/* Tokens the kernel got back (alloc_dontneed frees whatever it is given). */
static int alloc_returned;

static inline int alloc_dontneed(void *arg, const struct dmt_dmabuf_token *t,
				 size_t n)
{
	int freed = 0;

	(void)arg;
	for (size_t i = 0; i < n; i++)
		freed += (int)t[i].token_count;
	alloc_returned += freed;
	return freed;
}

/* ntok dma-buf fragments of binding 9 with tokens 0..ntok-1 through rx's
 * receive path, as the kernel lays out their cmsgs; the tokens go back
 * through alloc_dontneed. */
static inline void alloc_receive_tokens(struct devmemtcp_rx *rx,
					struct devmemtcp_frag *f, size_t ntok)
{
	size_t space = CMSG_SPACE(sizeof(struct dmt_dmabuf_cmsg));
	char *ctrl = calloc(ntok, space);
	struct msghdr msg = { .msg_control = ctrl,
			      .msg_controllen = ntok * space };

	assert_non_null(ctrl);
	dmt_rx_tokens(rx)->dontneed = alloc_dontneed;
	alloc_returned = 0;
	for (size_t i = 0; i < ntok; i++) {
		struct cmsghdr *cm = (struct cmsghdr *)(ctrl + i * space);
		struct dmt_dmabuf_cmsg c = { i * 4096, 4096, (uint32_t)i, 9, 0 };

		cmsgfix_dmabuf(cm, &c);
	}
	assert_int_equal(dmt_rx_process(rx, &msg, ntok * 4096, f, ntok),
			 (int)ntok);
	free(ctrl);
}

#endif

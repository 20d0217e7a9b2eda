/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * What a forked child inherits (core: every layer calls it): every handle
 * records the fork generation of the process that made it; fork() increments the
 * generation in the child (pthread_atfork, fork.c).  A handle of another
 * generation is a parent's: the child never receives on it, never hands
 * its tokens back (the socket is shared: the parent's tokens would go),
 * never undoes its NIC setup and never calls CUDA for it (CUDA does not
 * survive fork); such calls fail with EBADFD, and freeing it only closes
 * the child's copies of its descriptors and frees its memory.  Calls that
 * touch nothing shared (statistics, messages, views) work.
 */
#ifndef DMT_FORK_H
#define DMT_FORK_H

#include <stdatomic.h>
#include <stdbool.h>

struct devmemtcp_ctx;
struct dmt_err;

extern atomic_uint dmt_fork_generation;

/* The generation of this process, for a handle being made. */
static inline unsigned int dmt_fork_gen(void)
{
	return atomic_load_explicit(&dmt_fork_generation, memory_order_relaxed);
}

/* The handle made at generation gen belongs to a parent of this process. */
static inline bool dmt_forked(unsigned int gen)
{
	return gen != dmt_fork_gen();
}

/* -EBADFD with the message saying why, on err (fn: the public call,
 * what: "receiver", "NIC handle", ...). */
int dmt_fork_refuse(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		    const char *fn, const char *what);

#endif

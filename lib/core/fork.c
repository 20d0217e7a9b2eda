// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* What a forked child inherits: the generation, and the refusal (fork.h). */
#include <errno.h>
#include <pthread.h>

#include "fork.h"
#include "internal.h"

atomic_uint dmt_fork_generation;

static void fork_child(void)
{
	atomic_fetch_add_explicit(&dmt_fork_generation, 1, memory_order_relaxed);
}

/* At load, before any handle exists: every fork() from then on (glibc's
 * fork() runs the handlers; Python's os.fork() calls it) is seen. */
__attribute__((constructor)) static void fork_init(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

int dmt_fork_refuse(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		    const char *fn, const char *what)
{
	return dmt_err(ctx, err, -EBADFD,
		       "%s: this %s was made by a parent of this process (inherited across fork()): a child never receives on, releases tokens of, or undoes the NIC setup of its parent's handles, which stay the parent's; make new ones in the child",
		       fn, what);
}

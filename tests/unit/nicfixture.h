/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Shared by the tests of the NIC layer in the unit and host suites: a
 * private run directory with a context that logs nothing and a child process that holds an interface's lock.
 */
#ifndef DEVMEMTCP_TEST_NICFIXTURE_H
#define DEVMEMTCP_TEST_NICFIXTURE_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devmemtcp.h"
#include "harness.h"
#include "nic.h"

/* A fresh directory /tmp/<prefix>-XXXXXX, its name in dir; 0 or -1. */
static inline int nicfix_mkdir(char *dir, size_t len, const char *prefix)
{
	snprintf(dir, len, "/tmp/%s-XXXXXX", prefix);
	return mkdtemp(dir) ? 0 : -1;
}

static inline int nicfix_rmdir(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

/* A fresh run directory, made the library's (DEVMEMTCP_RUN_DIR), and a
 * context that logs nothing; 0 or -1. */
static inline int nicfix_setup(char *dir, size_t len, const char *prefix,
			       struct devmemtcp_ctx **ctx)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);

	if (nicfix_mkdir(dir, len, prefix))
		return -1;
	setenv("DEVMEMTCP_RUN_DIR", dir, 1);
	return devmemtcp_ctx_new(&co, ctx);
}

static inline int nicfix_teardown(const char *dir, struct devmemtcp_ctx *ctx)
{
	devmemtcp_ctx_free(ctx);
	return nicfix_rmdir(dir);
}

/* dir as the library opens its run directory, for the tests' own reads
 * and writes of its files (reopened on each call; aborts on failure). */
static inline struct dmt_rundir *nicfix_rd(const char *dir)
{
	static struct dmt_rundir rd = { .fd = -1 };
	struct dmt_err e;

	dmt_rundir_close(&rd);
	if (dmt_rundir_open(&rd, dir, true, &e) < 0) {
		fprintf(stderr, "%s\n", e.msg);
		abort();
	}
	return &rd;
}

/* A child that holds <dir>/<ifname>.lock until nicfix_kill(): its pid
 * once it holds the lock, or -1. */
static inline pid_t nicfix_lock_child(const char *dir, const char *ifname)
{
	pid_t child;
	int p[2];
	char c;

	if (pipe(p))
		return -1;
	child = fork();
	if (child == 0) {
		struct dmt_err e;
		int fd;
		pid_t h;

		if (dmt_lock_take(nicfix_rd(dir), ifname, &fd, &h, NULL, 0, &e) < 0)
			_exit(1);
		(void)!write(p[1], "x", 1);
		alarm(60);	/* never outlive a failed test for long */
		pause();
		_exit(0);
	}
	close(p[1]);
	if (child > 0 && read(p[0], &c, 1) != 1) {
		/* it could not take the lock and is gone */
		waitpid(child, NULL, 0);
		child = -1;
	}
	close(p[0]);
	return child;
}

static inline void nicfix_kill(pid_t child)
{
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

#endif

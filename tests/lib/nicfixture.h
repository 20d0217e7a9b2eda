/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Shared by the tests of the NIC layer in the unit and host suites: a
 * private run directory with a context that logs nothing and a child process that holds an interface's lock.
 */
#ifndef DEVMEMTCP_TEST_NICFIXTURE_H
#define DEVMEMTCP_TEST_NICFIXTURE_H

#include <signal.h>
#include <stdarg.h>
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

/* Remove the files of dir that the shell pattern glob matches. */
static inline int nicfix_rm(const char *dir, const char *glob)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -f %s/%s", dir, glob);
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

/* What the library logged at warning level and above (nicfix_capture as
 * log_fn); emptied by the tests. */
static char nicfix_logged[8192];

static inline void nicfix_capture(void *user, int level, const char *msg)
{
	size_t n = strlen(nicfix_logged);

	if (level <= DEVMEMTCP_LOG_WARN)
		snprintf(nicfix_logged + n, sizeof(nicfix_logged) - n, "%s\n", msg);
}

/* A fresh run directory (DEVMEMTCP_RUN_DIR) with a context that keeps
 * warnings in nicfix_logged; 0 or -1. */
static inline int nicfix_setup_logged(char *dir, size_t len, const char *prefix,
				      struct devmemtcp_ctx **ctx)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = nicfix_capture,
		       .log_level = DEVMEMTCP_LOG_WARN);

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

/* The file of an owner that is gone (a pid that exited), holding no
 * queue, rule or context; its name in name.  The dead pid, or -1. */
static inline pid_t nicfix_dead_owner(const char *dir, const char *ifname,
				      int ifindex, uint64_t netns, char *name,
				      size_t len)
{
	struct dmt_owner o = { .start = 1, .handle = 1, .ifindex = ifindex,
			       .netns = netns };
	struct dmt_err e;
	pid_t dead = fork();
	char *text;
	size_t n;
	int err;

	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	o.pid = dead;
	snprintf(o.comm, sizeof(o.comm), "loader");
	snprintf(o.ifname, sizeof(o.ifname), "%s", ifname);
	dmt_owner_name(&o, name, len);
	if (dmt_owner_format(&o, &text, &n) < 0)
		return -1;
	err = dmt_file_write(nicfix_rd(dir), name, text, n, &e);
	free(text);
	return err < 0 ? -1 : dead;
}

/* Any file of ifname in dir but its lock: a baseline or an owner's. */
static inline bool nicfix_files_left(const char *dir, const char *ifname)
{
	char prefix[IF_NAMESIZE + 2], lock[IF_NAMESIZE + 8], **names;
	struct dmt_err e;
	bool any = false;
	size_t n;

	snprintf(prefix, sizeof(prefix), "%s.", ifname);
	snprintf(lock, sizeof(lock), "%s.lock", ifname);
	if (dmt_rundir_list(nicfix_rd(dir), prefix, &names, &n, &e) < 0)
		abort();
	for (size_t i = 0; i < n; i++) {
		any |= strcmp(names[i], lock) != 0;
		free(names[i]);
	}
	free(names);
	return any;
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

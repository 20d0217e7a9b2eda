// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The run directory and its files are root's state, so they are treated as
 * hostile input: a directory the library creates is 0700 and its files
 * 0600; a directory others can write, or a symbolic link, is refused; a
 * symbolic link, FIFO or oversized file in place of one of its files is
 * refused without following, blocking on or reading it; running out of
 * memory while reading one is not called a malformed journal.  Runs the
 * NIC layer against the in-memory NIC (fake-nic.h).
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctxfixture.h"
#include "fake-nic.h"
#include "nicfixture.h"

static struct fake_nic *nic_state;
static struct devmemtcp_ctx *ctx;
static char top[64], run[128], victim[128];

static int setup(void **state)
{
	nic_state = fake_shared();
	if (!nic_state)
		return -1;
	return nicfix_setup(top, sizeof(top), "dmt-rundir", &ctx);
}

static int teardown(void **state)
{
	return nicfix_teardown(top, ctx);
}

/* A fresh top/run that does not exist yet, and a victim file outside it. */
static int each(void **state)
{
	char cmd[256];
	FILE *f;

	fake_init(nic_state);
	snprintf(cmd, sizeof(cmd), "rm -rf %s/run %s/victim", top, top);
	if (system(cmd))
		return -1;
	chmod(top, 0755);
	snprintf(run, sizeof(run), "%s/run", top);
	snprintf(victim, sizeof(victim), "%s/victim", top);
	f = fopen(victim, "w");
	if (!f)
		return -1;
	fputs("precious\n", f);
	return fclose(f);
}

static int open_close(const char *dir)
{
	DEVMEMTCP_OPTS(nic_opts, o, .run_dir = dir);
	struct devmemtcp_nic *nic;
	int err = devmemtcp_nic_open(ctx, "eth0", &o, &nic);

	if (err == 0)
		err = devmemtcp_nic_close(nic);
	return err;
}

static int recover(const char *dir)
{
	DEVMEMTCP_OPTS(nic_opts, o, .run_dir = dir);

	return devmemtcp_nic_recover(ctx, "eth0", &o);
}

static void assert_victim_intact(void)
{
	char buf[64] = "";
	FILE *f = fopen(victim, "r");

	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "precious\n");
}


static mode_t mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode;
}

/* The directory the library creates is its owner's alone, and so is every
 * file in it: no local user can open the lock file and hold its flock. */
static void test_created_modes(void **state)
{
	DEVMEMTCP_OPTS(nic_opts, o, .run_dir = run);
	struct devmemtcp_nic *nic;
	struct dirent *d;
	char path[PATH_MAX];
	int files = 0;
	DIR *dp;

	assert_int_equal(devmemtcp_nic_open(ctx, "eth0", &o, &nic), 0);
	assert_true(S_ISDIR(mode_of(run)));
	assert_int_equal(mode_of(run) & 07777, 0700);
	snprintf(path, sizeof(path), "%s/eth0.lock", run);
	assert_int_equal(mode_of(path) & 07777, 0600);
	dp = opendir(run);
	assert_non_null(dp);
	while ((d = readdir(dp))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", run, d->d_name);
		assert_true(S_ISREG(mode_of(path)));
		assert_int_equal(mode_of(path) & 07777, 0600);
		files++;
	}
	closedir(dp);
	assert_true(files >= 2);	/* the lock and a journal */
	assert_int_equal(devmemtcp_nic_close(nic), 0);
}

static void test_dir_writable_by_others(void **state)
{
	static const mode_t modes[] = { 0777, 0770, 01777, 0702 };

	assert_int_equal(mkdir(run, 0700), 0);
	for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
		assert_int_equal(chmod(run, modes[i]), 0);
		/* ERRORS devmemtcp_nic_open EACCES */
		assert_int_equal(open_close(run), -EACCES);
		ctxfix_expect_errmsg(ctx, "the run directory %s is writable by group or others (mode %04o): "
				     "make it writable by its owner only (chmod 0700 %s) or use another one",
				     run, (unsigned)modes[i], run);
		/* ERRORS devmemtcp_nic_recover EACCES */
		assert_int_equal(recover(run), -EACCES);
		ctxfix_expect_errmsg(ctx, "the run directory %s is writable by group or others (mode %04o): "
				     "make it writable by its owner only (chmod 0700 %s) or use another one",
				     run, (unsigned)modes[i], run);
	}
	assert_int_equal(chmod(run, 0700), 0);
	assert_int_equal(open_close(run), 0);
}

static void test_dir_symlink(void **state)
{
	char real[160];

	snprintf(real, sizeof(real), "%s/real", top);
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(symlink(real, run), 0);
	assert_int_equal(open_close(run), -EACCES);
	ctxfix_expect_errmsg(ctx, "the run directory %s is a symbolic link or not a directory: "
			     "use a real directory owned by root, not writable by others", run);
	assert_int_equal(recover(run), -EACCES);
	/* nothing was made through the link */
	assert_int_equal(rmdir(real), 0);
}

static void plant_link(const char *name)
{
	char path[PATH_MAX];

	assert_true(snprintf(path, sizeof(path), "%s/%s", run, name) < (int)sizeof(path));
	assert_int_equal(symlink(victim, path), 0);
}

/* Symbolic links in place of the library's files: never followed, so
 * root never truncates or overwrites the file they point at. */
static void test_symlinked_files(void **state)
{
	char path[PATH_MAX];

	assert_int_equal(mkdir(run, 0700), 0);
	plant_link("eth0.lock");
	assert_int_equal(open_close(run), -EACCES);
	ctxfix_expect_errmsg(ctx, "%s/eth0.lock is a symbolic link, not a file devmemtcp made: remove it", run);
	assert_int_equal(recover(run), -EACCES);
	assert_victim_intact();
	snprintf(path, sizeof(path), "%s/eth0.lock", run);
	assert_int_equal(unlink(path), 0);

	/* in place of the baseline, read before anything is written */
	plant_link("eth0.base");
	assert_int_equal(open_close(run), -EACCES);
	ctxfix_expect_errmsg(ctx, "%s/eth0.base is a symbolic link, not a file devmemtcp made: remove it", run);
	assert_victim_intact();
	snprintf(path, sizeof(path), "%s/eth0.base", run);
	assert_int_equal(unlink(path), 0);

	/* names an owner's file would have: listed and refused, never
	 * written through */
	{
		uint64_t start;
		bool zombie;

		assert_int_equal(dmt_proc_start(getpid(), &start, &zombie), 0);
		for (int h = 1; h <= 64; h++) {
			snprintf(path, sizeof(path), "eth0.owner.%d.%llu.%d", getpid(),
				 (unsigned long long)start, h);
			plant_link(path);
		}
	}
	plant_link("eth0.journal.tmp");
	assert_int_equal(open_close(run), -EACCES);
	assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), " is a symbolic link, not a file devmemtcp made: remove it"));
	assert_victim_intact();
	assert_int_equal(mode_of(victim) & 07777, 0644);
}

/* A FIFO where a journal is read: refused at once, not waited on. */
static void test_fifo(void **state)
{
	char path[PATH_MAX];
	int status;
	pid_t pid;

	assert_int_equal(mkdir(run, 0700), 0);
	snprintf(path, sizeof(path), "%s/eth0.journal", run);
	assert_int_equal(mkfifo(path, 0600), 0);
	snprintf(path, sizeof(path), "%s/eth0.base", run);
	assert_int_equal(mkfifo(path, 0600), 0);
	pid = fork();
	if (pid == 0) {
		int r;

		alarm(10);	/* a hang fails the test instead of hanging it */
		r = recover(run);
		if (r != -EACCES)
			_exit(2);
		_exit(strstr(devmemtcp_ctx_errmsg(ctx),
			     " is a FIFO, not a file devmemtcp made: remove it") ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A huge file in place of a journal is not read into memory. */
static void test_big_file(void **state)
{
	char path[PATH_MAX];
	FILE *f;

	assert_int_equal(mkdir(run, 0700), 0);
	snprintf(path, sizeof(path), "%s/eth0.base", run);
	f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 0; i < 2 << 20; i += 8)
		fputs("garbage\n", f);
	fclose(f);
	assert_int_equal(chmod(path, 0600), 0);
	/* ERRORS devmemtcp_nic_recover EFBIG */
	assert_int_equal(recover(run), -EFBIG);
	ctxfix_expect_errmsg(ctx, "%s/eth0.base has 2097152 bytes, more than the 1048576 a devmemtcp file has: remove it",
			     run);
	/* ERRORS devmemtcp_nic_open EFBIG */
	assert_int_equal(open_close(run), -EFBIG);
	ctxfix_expect_errmsg(ctx, "%s/eth0.base has 2097152 bytes, more than the 1048576 a devmemtcp file has: remove it",
			     run);
}

/* Only the last component of the run directory is created: a missing
 * parent is a mistake to report.  A path through a file is no directory:
 * refused like a symbolic link, never followed or created. */
static void test_dir_unusable(void **state)
{
	/* the caller named the directory: the fix is about it, not about
	 * root or DEVMEMTCP_RUN_DIR */
	static const char missing[] =
		"cannot open the run directory %s (the run_dir option): it or a parent is missing "
		"(only the last component is created: create its parent, or pass another run_dir)";
	static const char notdir[] =
		"the run directory %s is a symbolic link or not a directory: "
		"use a real directory owned by root, not writable by others";
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/missing/run", top);
	/* ERRORS devmemtcp_nic_open ENOENT */
	assert_int_equal(open_close(path), -ENOENT);
	ctxfix_expect_errmsg(ctx, missing, path);
	/* ERRORS devmemtcp_nic_recover ENOENT */
	assert_int_equal(recover(path), -ENOENT);
	ctxfix_expect_errmsg(ctx, missing, path);
	snprintf(path, sizeof(path), "%s/run", victim);
	assert_int_equal(open_close(path), -EACCES);
	ctxfix_expect_errmsg(ctx, notdir, path);
	assert_int_equal(recover(path), -EACCES);
	ctxfix_expect_errmsg(ctx, notdir, path);
	assert_int_equal(open_close(victim), -EACCES);
	ctxfix_expect_errmsg(ctx, notdir, victim);
	assert_victim_intact();
}

/* A journal left by a process killed after its setup. */
static void crashed_owner(void)
{
	DEVMEMTCP_OPTS(nic_opts, o, .run_dir = run, .nqueues = 2);
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct devmemtcp_nic *nic;

		if (devmemtcp_nic_open(ctx, "eth0", &o, &nic))
			_exit(3);
		raise(SIGKILL);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
}

/* Running out of memory while reading a journal is not a malformed
 * journal: the message says what happened. */
static void test_enomem_is_not_malformed(void **state)
{
	int n, r, nomem = 0;

	assert_int_equal(mkdir(run, 0700), 0);
	crashed_owner();
	for (n = 1; n < 200; n++) {
		dmt_test_alloc_fail(n, false);
		r = recover(run);
		dmt_test_alloc_fail(0, false);
		if (r >= 0)
			break;
		assert_int_equal(r, -ENOMEM);
		assert_null(strstr(devmemtcp_ctx_errmsg(ctx), "unreadable"));
		assert_null(strstr(devmemtcp_ctx_errmsg(ctx), "malformed"));
		assert_non_null(strstr(devmemtcp_ctx_errmsg(ctx), "out of memory"));
		nomem++;
	}
	assert_int_equal(r, 1);
	assert_true(nomem >= 2);
	assert_int_equal(recover(run), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_created_modes, each),
		cmocka_unit_test_setup(test_dir_writable_by_others, each),
		cmocka_unit_test_setup(test_dir_symlink, each),
		cmocka_unit_test_setup(test_symlinked_files, each),
		cmocka_unit_test_setup(test_fifo, each),
		cmocka_unit_test_setup(test_big_file, each),
		cmocka_unit_test_setup(test_dir_unusable, each),
		cmocka_unit_test_setup(test_enomem_is_not_malformed, each),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

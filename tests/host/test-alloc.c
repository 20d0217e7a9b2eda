// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Allocation-failure injection over the setup paths that talk to this
 * machine's kernel (tests/unit/test-alloc.c has the others): bind-rx and
 * bind-tx on a veth (which cannot bind: the allocations before the
 * kernel's refusal still count), queue and statistics queries through a
 * fresh context, the NIC probe and the NIC setup.  For N = 1, 2, ... the
 * N-th allocation fails until the path gets as far as it does without an
 * injected failure; every failing N must return -ENOMEM with a message
 * that says out of memory (or, for an allocation that only refines an
 * explanation, exactly what the path gives without the failure), and
 * leave no descriptor behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "buf.h"
#include "devmemtcp.h"
#include "harness.h"
#include "allocfixture.h"

static struct devmemtcp_ctx *ctx;
static int va;
static char dir[64];

/* What a call gave: its result, message and (probe) report. */
struct outcome {
	int ret;
	char msg[1024];
	struct devmemtcp_probe report;
};

/* A path: set up, arm the n-th allocation (arm()), make the call, clean
 * up; true when the armed allocation was reached. */
typedef bool (*path_fn)(long n, struct outcome *o);

static void record(struct outcome *o, int ret, const char *msg)
{
	o->ret = ret;
	snprintf(o->msg, sizeof(o->msg), "%s", msg);
}

/*
 * N = 1, 2, ... until the path completes without an injected failure.
 * Each failing N gives -ENOMEM with a message that says out of memory
 * (ours, or strerror's words), or exactly what the path gives without
 * the failure (an allocation that only refines an explanation, such as
 * bind-tx asking which of two causes it is); and no descriptor is left.
 */
static void walk(const char *path, path_fn run)
{
	struct outcome *want = calloc(1, sizeof(*want));
	struct outcome *got = calloc(1, sizeof(*got));
	int fds = t_count_fds(), same = 0;
	long n;

	run(0, want);
	assert_int_not_equal(want->ret, -ENOMEM);
	for (n = 1;; n++) {
		memset(got, 0, sizeof(*got));
		if (!run(n, got))
			break;
		if (got->ret == -ENOMEM) {
			alloc_expect_oom(path, n, got->msg);
		} else if (!memcmp(got, want, sizeof(*got))) {
			same++;
		} else {
			fail_msg("%s, allocation %ld failed: it returned %d (\"%s\"), neither -ENOMEM nor what it returns without the failure (%d: \"%s\")",
				 path, n, got->ret, got->msg, want->ret, want->msg);
		}
		assert_int_equal(t_count_fds(), fds);
	}
	/* and the path works as before afterwards */
	assert_int_equal(got->ret, want->ret);
	print_message("%s: %ld allocations, each failure -ENOMEM (%d only refine and give the same result); then %s\n",
		      path, n - 1, same,
		      want->ret < 0 ? strerror(-want->ret) : "success");
	free(want);
	free(got);
}

/* A buffer over a memfd (the kernel refuses it, after our allocations). */
static struct devmemtcp_buf *memfd_buf(void)
{
	struct devmemtcp_segment seg = { 0, 1 << 20, 1ull << 40 };
	struct devmemtcp_buf *buf;

	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf), 0);
	buf->fd = memfd_create("dmt-alloc", MFD_CLOEXEC);
	assert_true(buf->fd >= 0);
	buf->own_fd = true;
	buf->size = 1 << 20;
	assert_int_equal(dmt_buf_set_segments(buf, &seg, 1), 0);
	return buf;
}

static bool bind_path(long n, struct outcome *o, bool tx)
{
	struct devmemtcp_buf *buf = memfd_buf();
	struct devmemtcp_binding *b = (void *)1;
	uint32_t q = 1;
	bool hit;
	int ret;

	alloc_arm(ctx, n);
	ret = tx ? devmemtcp_bind_tx(ctx, va, buf, NULL, &b)
		 : devmemtcp_bind_rx(ctx, va, &q, 1, buf, NULL, &b);
	hit = alloc_injected(n);
	record(o, ret, devmemtcp_ctx_errmsg(ctx));
	/* veth has no devmem: nothing is ever bound */
	assert_null(b);
	devmemtcp_buf_free(buf);
	return hit;
}

static bool bind_rx_path(long n, struct outcome *o)
{
	return bind_path(n, o, false);
}

static bool bind_tx_path(long n, struct outcome *o)
{
	return bind_path(n, o, true);
}

static void test_bind_rx(void **state)
{
	walk("devmemtcp_bind_rx", bind_rx_path);
}

static void test_bind_tx(void **state)
{
	walk("devmemtcp_bind_tx", bind_tx_path);
}

/* A query on a fresh context opens its netlink socket first. */
static bool query_path(long n, struct outcome *o, bool stats)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);
	struct devmemtcp_qstats st = { .sz = sizeof(st) };
	struct devmemtcp_queue q[16];
	struct devmemtcp_ctx *c;
	bool hit;
	int ret;

	assert_int_equal(devmemtcp_ctx_new(&co, &c), 0);
	alloc_arm(ctx, n);
	ret = stats ? devmemtcp_qstats_get(c, va, DEVMEMTCP_QUEUE_RX, -1, &st)
		    : devmemtcp_queue_list(c, va, q, 16);
	hit = alloc_injected(n);
	record(o, ret, devmemtcp_ctx_errmsg(c));
	devmemtcp_ctx_free(c);
	return hit;
}

static bool queue_list_path(long n, struct outcome *o)
{
	return query_path(n, o, false);
}

static bool qstats_path(long n, struct outcome *o)
{
	return query_path(n, o, true);
}

static void test_queries(void **state)
{
	walk("devmemtcp_queue_list", queue_list_path);
	walk("devmemtcp_qstats_get", qstats_path);
}

static bool probe_path(long n, struct outcome *o)
{
	bool hit;
	int ret;

	o->report.sz = sizeof(o->report);
	alloc_arm(ctx, n);
	ret = devmemtcp_nic_probe(ctx, "va", NULL, &o->report);
	hit = alloc_injected(n);
	record(o, ret, ret < 0 ? devmemtcp_ctx_errmsg(ctx) : "");
	return hit;
}

static void test_probe(void **state)
{
	walk("devmemtcp_nic_probe", probe_path);
}

/* Files the NIC layer keeps for va: its owners' files and the baseline
 * (the lock file stays, empty, by design). */
static int va_files(void)
{
	struct dirent *d;
	DIR *dp = opendir(dir);
	int n = 0;

	assert_non_null(dp);
	while ((d = readdir(dp)))
		n += !strncmp(d->d_name, "va.owner.", 9) || !strcmp(d->d_name, "va.base");
	closedir(dp);
	return n;
}

/* veth cannot be set up (no header split): the refusal comes after the
 * lock, the owners' files and the queue plan, whose allocations all
 * count; no owner or base file may be left. */
static bool nic_open_path(long n, struct outcome *o)
{
	struct devmemtcp_nic *nic = NULL;
	bool hit;
	int ret;

	alloc_arm(ctx, n);
	ret = devmemtcp_nic_open(ctx, "va", NULL, &nic);
	hit = alloc_injected(n);
	record(o, ret, devmemtcp_ctx_errmsg(ctx));
	assert_null(nic);
	assert_int_equal(va_files(), 0);
	return hit;
}

static void test_nic_open(void **state)
{
	walk("devmemtcp_nic_open", nic_open_path);
}

static int setup(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = t_quiet);

	snprintf(dir, sizeof(dir), "/tmp/dmt-halloc-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	setenv("DEVMEMTCP_RUN_DIR", dir, 1);
	return devmemtcp_ctx_new(&co, &ctx);
}

static int teardown(void **state)
{
	char cmd[128];

	dmt_test_alloc_fail(0, false);
	devmemtcp_ctx_free(ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bind_rx),
		cmocka_unit_test(test_bind_tx),
		cmocka_unit_test(test_queries),
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_nic_open),
	};

	T_TRY(host_netns(&va));
	return cmocka_run_group_tests_name("host-alloc", tests, setup, teardown);
}

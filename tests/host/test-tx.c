// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * host suite, devmem TX: bind-tx against this machine's kernel inside a
 * network namespace the test creates.  veth has no netmem TX: on a kernel
 * with bind-tx (6.16+) the library must surface the kernel's "Driver does
 * not support netmem TX"; on an older kernel it must say "needs Linux 6.16"
 * (found from the netdev family's op list).  No fds leak either way.
 * Also: a failed bind-tx logs once, and the ENODEV explanation finds the
 * socket's route over rtnetlink.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "devmemtcp.h"
#include "harness.h"
#include "buf.h"
#include "tx.h"

static struct devmemtcp_ctx *ctx;
static struct devmemtcp_buf *buf;
static int va;

static bool kernel_has_bind_tx(void)
{
	return t_kernel_version() >= 616;
}

static void test_bind_tx_veth(void **state)
{
	struct devmemtcp_binding *b = (void *)1;
	const char *m;
	int before;

	/* a first failure, so that whatever a context opens once is open
	 * before the fds are counted */
	devmemtcp_bind_tx(ctx, va, buf, NULL, &b);
	before = t_count_fds();

	/* ERRORS devmemtcp_bind_tx EOPNOTSUPP */
	assert_int_equal(devmemtcp_bind_tx(ctx, va, buf, NULL, &b), -EOPNOTSUPP);
	assert_null(b);
	m = devmemtcp_ctx_errmsg(ctx);
	print_message("%s\n", m);
	if (kernel_has_bind_tx()) {
		assert_string_equal(m, "bind-tx on va failed: the driver of va cannot send from device memory (va): use a NIC whose driver supports devmem TX (gve, fbnic, bnxt, mlx5) (kernel: \"Driver does not support netmem TX\")");
	} else {
		char want[256];

		snprintf(want, sizeof(want),
			 "bind-tx on va failed: this kernel (%s) has no bind-tx netlink command: devmem TX needs Linux 6.16 or newer (RX works from 6.12)",
			 t_kernel_release());
		assert_string_equal(m, want);
	}
	/* the binding's netlink socket is gone again */
	assert_int_equal(t_count_fds(), before);
}

static void test_bind_tx_args(void **state)
{
	struct devmemtcp_binding *b = NULL;
	DEVMEMTCP_OPTS(bind_opts, o, .rx_page_size = 65536);

	/* ERRORS devmemtcp_bind_tx ENODEV */
	assert_int_equal(devmemtcp_bind_tx(ctx, 0, buf, NULL, &b), -ENODEV);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_bind_tx: ifindex 0 is not an interface: get it with if_nametoindex()");
	/* ERRORS devmemtcp_bind_tx EINVAL */
	assert_int_equal(devmemtcp_bind_tx(ctx, va, NULL, NULL, &b), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_bind_tx: buf is NULL: create one with devmemtcp_buf_new()");
	assert_int_equal(devmemtcp_bind_tx(ctx, va, buf, NULL, NULL), -EINVAL);
	assert_int_equal(devmemtcp_bind_tx(ctx, va, buf, &o, &b), -EINVAL);
	/* an interface index nobody has: the kernel's ENODEV, explained */
	assert_int_equal(devmemtcp_bind_tx(ctx, 99999, buf, NULL, &b),
			 kernel_has_bind_tx() ? -ENODEV : -EOPNOTSUPP);
}

/* Every message a context logs, counted. */
struct logs {
	pthread_mutex_t lock;
	int n;
	char last[1024];
};

static void count_log(void *user, int level, const char *msg)
{
	struct logs *l = user;

	pthread_mutex_lock(&l->lock);
	l->n++;
	snprintf(l->last, sizeof(l->last), "%s", msg);
	pthread_mutex_unlock(&l->lock);
}

static struct devmemtcp_ctx *counting_ctx(struct logs *l)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = count_log, .log_user = l,
		       .log_level = DEVMEMTCP_LOG_ERR);
	struct devmemtcp_ctx *c;

	assert_int_equal(devmemtcp_ctx_new(&o, &c), 0);
	return c;
}

/* A failed bind-tx logs once, the message devmemtcp_ctx_errmsg() gives:
 * after the kernel said no, and when an argument is wrong. */
static void test_bind_tx_logs_once(void **state)
{
	struct logs l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct devmemtcp_ctx *c = counting_ctx(&l);
	struct devmemtcp_binding *b;

	assert_int_equal(devmemtcp_bind_tx(c, va, buf, NULL, &b), -EOPNOTSUPP);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.last, devmemtcp_ctx_errmsg(c));
	assert_non_null(strstr(l.last, "bind-tx on va failed"));
	assert_int_equal(devmemtcp_bind_tx(c, va, NULL, NULL, &b), -EINVAL);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.last, devmemtcp_ctx_errmsg(c));
	assert_int_equal(devmemtcp_bind_tx(c, 0, buf, NULL, &b), -ENODEV);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.last,
			    "devmemtcp_bind_tx: ifindex 0 is not an interface: get it with if_nametoindex()");
	devmemtcp_ctx_free(c);
}

struct querier {
	pthread_t t;
	struct devmemtcp_ctx *c;
	int failed;
};

static void *querier_main(void *arg)
{
	struct querier *q = arg;
	struct devmemtcp_queue qs[4];

	for (int i = 0; i < 100; i++)
		q->failed += devmemtcp_queue_list(q->c, 99999, qs, 4) == -ENODEV;
	return NULL;
}

/* A query failing on another thread while bind-tx runs on the same
 * context is logged: bind-tx keeps its own intermediate failures quiet
 * without turning the context's logging off. */
static void test_bind_tx_leaves_logging_on(void **state)
{
	struct logs l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct querier q = { .c = counting_ctx(&l) };
	struct devmemtcp_binding *b;
	int binds = 0;

	assert_int_equal(pthread_create(&q.t, NULL, querier_main, &q), 0);
	for (int i = 0; i < 50; i++)
		binds += devmemtcp_bind_tx(q.c, va, buf, NULL, &b) == -EOPNOTSUPP;
	pthread_join(q.t, NULL);
	assert_int_equal(binds, 50);
	assert_int_equal(q.failed, 100);
	assert_int_equal(l.n, 50 + 100);
	devmemtcp_ctx_free(q.c);
}

/* A TCP connection to ourselves on lo: the client end, or -1. */
static int loopback_conn(int family, const char *addr, int *server)
{
	struct sockaddr_storage a = { 0 };
	socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in)
					  : sizeof(struct sockaddr_in6);
	int l = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int c = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.ss_family = (sa_family_t)family;
	if (family == AF_INET)
		inet_pton(AF_INET, addr, &((struct sockaddr_in *)&a)->sin_addr);
	else
		inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&a)->sin6_addr);
	if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, len) ||
	    listen(l, 1) || getsockname(l, (struct sockaddr *)&a, &len) ||
	    connect(c, (struct sockaddr *)&a, len))
		return -1;
	*server = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	close(l);
	return c;
}

/* The ENODEV explanation asks rtnetlink for the socket's route: lo here,
 * for IPv4, IPv6 and IPv4 on an IPv6 socket alike. */
static void test_enodev_names_the_route(void **state)
{
	static const struct {
		int family;
		const char *addr;
	} peers[] = { { AF_INET, "127.0.0.1" }, { AF_INET6, "::1" },
		      { AF_INET6, "::ffff:127.0.0.1" } };
	struct devmemtcp_tx tx;
	char want[512];
	int fd, server = -1, lo = (int)if_nametoindex("lo");

	for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++) {
		fd = loopback_conn(peers[i].family, peers[i].addr, &server);
		assert_true(fd >= 0 && server >= 0);
		assert_int_equal(dmt_tx_init(&tx, ctx, fd, peers[i].family, 7,
					     va, 1 << 20, NULL), 0);
		assert_int_equal(dmt_tx_explain_enodev(&tx), -ENODEV);
		snprintf(want, sizeof(want),
			 "sendmsg on fd %d failed with ENODEV: the socket's route leaves through lo but the dma-buf is bound to va (binding 7): SO_BINDTODEVICE the socket to va / fix the route to the peer so it leaves through va",
			 fd);
		assert_string_equal(tx.err.msg, want);
		/* bound to the device the route takes: the binding is stale */
		tx.bound_ifindex = lo;
		assert_int_equal(dmt_tx_explain_enodev(&tx), -ENODEV);
		snprintf(want, sizeof(want),
			 "sendmsg on fd %d failed with ENODEV: the socket's route leaves through lo, the device the dma-buf is bound to (binding 7), yet the kernel refused it: the binding's device went away or was re-created; bind again",
			 fd);
		assert_string_equal(tx.err.msg, want);
		dmt_tx_fini(&tx);
		close(server);
		close(fd);
	}
}

static int setup(void **state)
{
	if (devmemtcp_ctx_new(NULL, &ctx) ||
	    dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf))
		return -1;
	/* bind-tx refuses veth before it looks at the dma-buf */
	buf->size = 1 << 20;
	return 0;
}

static int teardown(void **state)
{
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bind_tx_veth),
		cmocka_unit_test(test_bind_tx_args),
		cmocka_unit_test(test_bind_tx_logs_once),
		cmocka_unit_test(test_bind_tx_leaves_logging_on),
		cmocka_unit_test(test_enodev_names_the_route),
	};

	T_TRY(host_netns(&va));
	return cmocka_run_group_tests_name("host-tx", tests, setup, teardown);
}

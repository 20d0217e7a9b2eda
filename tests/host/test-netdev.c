// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * host suite: this machine's kernel, as root, inside a network and mount
 * namespace the test creates (nothing outside it is touched).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include "ctxfixture.h"
#include "devmemtcp.h"
#include "netdev.h"
#include "nl.h"
#include "uapi.h"
#include "harness.h"

static struct devmemtcp_ctx *ctx;
static int va;

static int count_sysfs(const char *ifname, const char *prefix)
{
	char path[128];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/sys/class/net/%s/queues", ifname);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

static int setup(void **state)
{
	return devmemtcp_ctx_new(NULL, &ctx);
}

static int teardown(void **state)
{
	devmemtcp_ctx_free(ctx);
	return 0;
}

static void test_family(void **state)
{
	struct dmt_nl *nl;
	uint16_t id = 0, eth = 0;

	assert_int_equal(dmt_nl_open(&nl, NETLINK_GENERIC), 0);
	assert_int_equal(dmt_nl_netdev_family(nl, &id), 0);
	assert_true(id >= 16);	/* dynamic genl ids start above GENL_MIN_ID */
	assert_int_equal(dmt_nl_ethtool_family(nl, &eth), 0);
	assert_true(eth >= 16 && eth != id);
	assert_int_equal(dmt_nl_family(nl, "no-such-family", &id), -ENOENT);
	dmt_nl_close(nl);
}

static void test_queue_list_sysfs(void **state)
{
	struct devmemtcp_queue q[16];
	int n, rx = 0, tx = 0;

	n = devmemtcp_queue_list(ctx, va, q, 16);
	assert_int_equal(n, 4 + 3);
	for (int i = 0; i < n; i++) {
		assert_int_equal(q[i].ifindex, va);
		assert_int_equal(q[i].dmabuf_id, 0);
		if (q[i].type == DEVMEMTCP_QUEUE_RX)
			assert_int_equal(q[i].id, rx++);
		else
			assert_int_equal(q[i].id, tx++);
	}
	assert_int_equal(rx, count_sysfs("va", "rx-"));
	assert_int_equal(tx, count_sysfs("va", "tx-"));
	/* a short array still reports the total */
	assert_int_equal(devmemtcp_queue_list(ctx, va, q, 2), 7);
	/* ERRORS devmemtcp_queue_list ENODEV */
	assert_int_equal(devmemtcp_queue_list(ctx, 99999, q, 16), -ENODEV);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "no network interface has index 99999: check the name with 'ip link'");
	/* ERRORS devmemtcp_queue_list EINVAL */
	assert_int_equal(devmemtcp_queue_list(ctx, 0, q, 16), -EINVAL);
	ctxfix_expect_errmsg(ctx,
			     "devmemtcp_queue_list: ifindex 0 and 16 entries at %p: pass an ifindex from if_nametoindex() and an array for max entries",
			     (void *)q);
}

/* A kernel without the netdev family (before 6.9 for queue-get): a test
 * build looks another name up instead, which no kernel has. */
static void test_no_netdev_family(void **state)
{
	struct devmemtcp_queue q[8];
	struct devmemtcp_ctx *c;

	setenv("DEVMEMTCP_TEST_NETDEV_FAMILY", "no-such-family", 1);
	assert_int_equal(devmemtcp_ctx_new(NULL, &c), 0);
	/* ERRORS devmemtcp_queue_list EOPNOTSUPP */
	assert_int_equal(devmemtcp_queue_list(c, va, q, 8), -EOPNOTSUPP);
	assert_string_equal(devmemtcp_ctx_errmsg(c),
			    "the kernel has no \"netdev\" generic netlink family: devmem TCP needs Linux 6.12 or newer (bind-tx 6.16)");
	devmemtcp_ctx_free(c);
	unsetenv("DEVMEMTCP_TEST_NETDEV_FAMILY");
}

/* veth keeps no per-queue statistics. */
static void test_qstats_unsupported(void **state)
{
	struct devmemtcp_qstats st = { .sz = sizeof(st) };

	/* ERRORS devmemtcp_qstats_get EOPNOTSUPP */
	assert_int_equal(devmemtcp_qstats_get(ctx, va, DEVMEMTCP_QUEUE_RX, 0, &st), -EOPNOTSUPP);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "the driver of va reports no queue statistics (no netdev_stat_ops)");
}

/* The oracle: libnl-genl-3 reads the same queues on its own. */
struct oracle {
	struct devmemtcp_queue q[16];
	int n;
};

static int oracle_cb(struct nl_msg *msg, void *arg)
{
	struct oracle *o = arg;
	struct nlattr *tb[DMT_NETDEV_A_QUEUE_LEASE + 1];
	struct devmemtcp_queue *q = &o->q[o->n++];

	memset(q, 0, sizeof(*q));
	genlmsg_parse(nlmsg_hdr(msg), 0, tb, DMT_NETDEV_A_QUEUE_LEASE, NULL);
	if (tb[DMT_NETDEV_A_QUEUE_ID])
		q->id = nla_get_u32(tb[DMT_NETDEV_A_QUEUE_ID]);
	if (tb[DMT_NETDEV_A_QUEUE_TYPE])
		q->type = nla_get_u32(tb[DMT_NETDEV_A_QUEUE_TYPE]);
	if (tb[DMT_NETDEV_A_QUEUE_IFINDEX])
		q->ifindex = nla_get_u32(tb[DMT_NETDEV_A_QUEUE_IFINDEX]);
	if (tb[DMT_NETDEV_A_QUEUE_NAPI_ID])
		q->napi_id = nla_get_u32(tb[DMT_NETDEV_A_QUEUE_NAPI_ID]);
	if (tb[DMT_NETDEV_A_QUEUE_DMABUF])
		q->dmabuf_id = nla_get_u32(tb[DMT_NETDEV_A_QUEUE_DMABUF]);
	return NL_OK;
}

static void test_libnl_oracle(void **state)
{
	struct nl_sock *sk = nl_socket_alloc();
	struct devmemtcp_queue mine[16];
	struct oracle o = { .n = 0 };
	struct nl_msg *msg;
	int fam, n;

	assert_non_null(sk);
	assert_int_equal(genl_connect(sk), 0);
	fam = genl_ctrl_resolve(sk, "netdev");
	assert_true(fam > 0);
	msg = nlmsg_alloc();
	genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, fam, 0, NLM_F_DUMP,
		    DMT_NETDEV_CMD_QUEUE_GET, 1);
	nla_put_u32(msg, DMT_NETDEV_A_QUEUE_IFINDEX, (uint32_t)va);
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, oracle_cb, &o);
	assert_true(nl_send_auto(sk, msg) >= 0);
	assert_int_equal(nl_recvmsgs_default(sk), 0);
	nlmsg_free(msg);
	nl_socket_free(sk);

	n = devmemtcp_queue_list(ctx, va, mine, 16);
	assert_int_equal(n, o.n);
	for (int i = 0; i < n; i++) {
		assert_int_equal(mine[i].id, o.q[i].id);
		assert_int_equal(mine[i].type, o.q[i].type);
		assert_int_equal(mine[i].ifindex, o.q[i].ifindex);
		assert_int_equal(mine[i].napi_id, o.q[i].napi_id);
		assert_int_equal(mine[i].dmabuf_id, o.q[i].dmabuf_id);
	}
}

static struct devmemtcp_buf *memfd_buf(void)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .size = 1 << 20);
	struct devmemtcp_buf *buf;

	/* a memfd stands in for a dma-buf (test builds): the bind is
	 * refused by the driver before the kernel looks at it */
	o.fd = memfd_create("not-a-dmabuf", MFD_CLOEXEC);
	assert_true(o.fd >= 0);
	assert_int_equal(ftruncate(o.fd, 1 << 20), 0);
	setenv("DEVMEMTCP_TEST_DMABUF_MEMFD", "1", 1);
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), 0);
	return buf;
}

static void test_bind_veth_unsupported(void **state)
{
	struct devmemtcp_buf *buf = memfd_buf();
	struct devmemtcp_binding *b = (void *)1;
	uint32_t q = 0;

	/* ERRORS devmemtcp_bind_rx EOPNOTSUPP */
	assert_int_equal(devmemtcp_bind_rx(ctx, va, &q, 1, buf, NULL, &b),
			 -EOPNOTSUPP);
	assert_null(b);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "bind-rx on va failed: the driver of va does not support devmem TCP (it lacks the queue management API / unreadable netmem), or the kernel predates bind-rx (Linux 6.12)");
	devmemtcp_buf_free(buf);
}

static void test_bind_arg_checks(void **state)
{
	struct devmemtcp_buf *buf = memfd_buf();
	struct devmemtcp_binding *b;
	uint32_t q[2] = { 1, 1 }, *many;

	/* ERRORS devmemtcp_bind_rx EINVAL */
	assert_int_equal(devmemtcp_bind_rx(ctx, va, q, 2, buf, NULL, &b), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_bind_rx: queue 1 is listed twice: list each queue once");
	assert_int_equal(devmemtcp_bind_rx(ctx, va, NULL, 0, buf, NULL, &b), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_bind_rx: no queues given: pass at least one RX queue index");
	/* a queue past the NIC's count, which queue-get gives: named with
	 * the count (va: 4 RX queues) before the kernel is asked */
	q[0] = 99;
	/* ERRORS devmemtcp_bind_rx ERANGE */
	assert_int_equal(devmemtcp_bind_rx(ctx, va, q, 1, buf, NULL, &b), -ERANGE);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_bind_rx: RX queue 99 is out of range: va has 4 RX queues (0-3); pick a lower index or add channels with ethtool -L");
	q[0] = 1;
	/* ERRORS devmemtcp_bind_rx ENODEV */
	assert_int_equal(devmemtcp_bind_rx(ctx, 0, q, 1, buf, NULL, &b), -ENODEV);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_bind_rx: ifindex 0 is not an interface: get it with if_nametoindex()");
	assert_int_equal(devmemtcp_bind_rx(ctx, va, q, 1, NULL, NULL, &b), -EINVAL);
	/* more queues than any NIC has: refused before anything is sent */
	many = calloc(4097, sizeof(*many));
	assert_non_null(many);
	for (uint32_t i = 0; i < 4097; i++)
		many[i] = i;
	/* ERRORS devmemtcp_bind_rx E2BIG */
	assert_int_equal(devmemtcp_bind_rx(ctx, va, many, 4097, buf, NULL, &b), -E2BIG);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_bind_rx: 4097 queues is more than any NIC has");
	free(many);
	DEVMEMTCP_OPTS(bind_opts, bo, .rx_page_size = 12288);
	assert_int_equal(devmemtcp_bind_rx(ctx, va, q, 1, buf, &bo, &b), -EINVAL);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "devmemtcp_bind_rx: rx_page_size 12288 is not a power of two: use 0 (page size) or a power of two such as 65536");
	/* a vanished interface: the kernel's ENODEV, explained */
	assert_int_equal(devmemtcp_bind_rx(ctx, 99999, q, 1, buf, NULL, &b), -ENODEV);
	assert_string_equal(devmemtcp_ctx_errmsg(ctx),
			    "bind-rx failed: no network interface has index 99999 (or it went away): check the name with 'ip link'");
	devmemtcp_buf_free(buf);
}

static int logged;
static char last_log[1024];

static void count_log(void *user, int level, const char *msg)
{
	logged++;
	snprintf(last_log, sizeof(last_log), "%s", msg);
}

/* A failed bind-rx logs once, the message devmemtcp_ctx_errmsg() gives,
 * wherever it failed: an argument, the options, the kernel. */
static void test_bind_logs_once(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, co, .log_fn = count_log,
		       .log_level = DEVMEMTCP_LOG_ERR);
	DEVMEMTCP_OPTS(bind_opts, bo);
	struct devmemtcp_buf *buf = memfd_buf();
	struct devmemtcp_binding *b;
	struct devmemtcp_ctx *c;
	uint32_t q = 0;

	assert_int_equal(devmemtcp_ctx_new(&co, &c), 0);
	bo.sz = 1;	/* too small to be a size: the options check says so */
	logged = 0;
	assert_int_equal(devmemtcp_bind_rx(c, va, &q, 1, buf, NULL, &b),
			 -EOPNOTSUPP);
	assert_int_equal(logged, 1);
	assert_string_equal(last_log, devmemtcp_ctx_errmsg(c));
	assert_int_equal(devmemtcp_bind_rx(c, va, &q, 0, buf, NULL, &b), -EINVAL);
	assert_int_equal(logged, 2);
	assert_string_equal(last_log,
			    "devmemtcp_bind_rx: no queues given: pass at least one RX queue index");
	assert_int_equal(devmemtcp_bind_rx(c, va, &q, 1, buf, &bo, &b), -EINVAL);
	assert_int_equal(logged, 3);
	assert_string_equal(last_log, devmemtcp_ctx_errmsg(c));
	assert_int_equal(devmemtcp_bind_rx(c, va, &q, 1, buf, NULL, NULL), -EINVAL);
	assert_int_equal(logged, 4);
	assert_string_equal(last_log, "devmemtcp_bind_rx: binding pointer is NULL");
	devmemtcp_ctx_free(c);
	devmemtcp_buf_free(buf);
}

static void test_udmabuf_missing(void **state)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = 1 << 20);
	struct devmemtcp_buf *buf;
	const char *dev = "/dev/udmabuf";

	if (access(dev, F_OK) == 0) {
		/* present here: point the library at a node that is not */
		dev = "/dev/udmabuf-missing";
		setenv("DEVMEMTCP_UDMABUF_DEV", dev, 1);
	}
	assert_int_equal(devmemtcp_buf_new(ctx, &o, &buf), -ENOENT);
	ctxfix_expect_errmsg(ctx,
			     "udmabuf: %s does not exist: load the module with 'modprobe udmabuf' (kernel option CONFIG_UDMABUF)",
			     dev);
	unsetenv("DEVMEMTCP_UDMABUF_DEV");
}

static void test_bind_without_cap_net_admin(void **state)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct d[2];
		struct devmemtcp_binding *b;
		struct devmemtcp_buf *buf;
		uint32_t q = 0;
		int ret;

		syscall(SYS_capget, &h, d);
		d[0].effective &= ~(1u << CAP_NET_ADMIN);
		if (syscall(SYS_capset, &h, d))
			_exit(3);
		buf = memfd_buf();
		ret = devmemtcp_bind_rx(ctx, va, &q, 1, buf, NULL, &b);
		/* ERRORS devmemtcp_bind_rx EPERM */
		if (ret != -EPERM)
			_exit(4);
		if (strcmp(devmemtcp_ctx_errmsg(ctx),
			   "bind-rx on va failed: permission denied: bind-rx needs CAP_NET_ADMIN; run as root or grant it (setcap cap_net_admin+ep PROGRAM)"))
			_exit(5);
		devmemtcp_buf_free(buf);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_no_fd_leaks(void **state)
{
	struct devmemtcp_ctx *c;
	struct devmemtcp_binding *b;
	struct devmemtcp_queue q[8];
	uint32_t queue = 0;
	int before = t_count_fds();

	for (int i = 0; i < 20; i++) {
		struct devmemtcp_buf *buf;

		assert_int_equal(devmemtcp_ctx_new(NULL, &c), 0);
		assert_int_equal(devmemtcp_queue_list(c, va, q, 8), 7);
		DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
			       .size = 4096);
		o.fd = memfd_create("x", MFD_CLOEXEC);
		assert_int_equal(ftruncate(o.fd, 4096), 0);
		setenv("DEVMEMTCP_TEST_DMABUF_MEMFD", "1", 1);
		assert_int_equal(devmemtcp_buf_new(c, &o, &buf), 0);
		assert_int_equal(devmemtcp_bind_rx(c, va, &queue, 1, buf, NULL, &b),
				 -EOPNOTSUPP);
		devmemtcp_buf_free(buf);	/* closes the imported fd */
		devmemtcp_ctx_free(c);
	}
	assert_int_equal(t_count_fds(), before);
}

static void test_tcp_steering_miss(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	struct devmemtcp_frag f[8];
	struct devmemtcp_rx *rx;
	char lin[4096], msg[1000];
	int l, c, s, got = 0, n;
	DEVMEMTCP_OPTS(rx_stats, st);

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(s >= 0);
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (char)(i * 7);
	assert_int_equal(write(c, msg, sizeof(msg)), (ssize_t)sizeof(msg));
	close(c);
	assert_int_equal(devmemtcp_rx_new(ctx, s, NULL, &rx), 0);
	while ((n = devmemtcp_rx_recv(rx, f, 8, lin + got, sizeof(lin) - (size_t)got)) > 0) {
		/* loopback is never devmem: plain data, one linear entry */
		assert_int_equal(n, 1);
		assert_int_equal(f[0].flags, DEVMEMTCP_FRAG_LINEAR);
		got += (int)f[0].len;
	}
	assert_int_equal(n, 0);
	assert_int_equal(got, sizeof(msg));
	assert_memory_equal(lin, msg, sizeof(msg));
	assert_int_equal(devmemtcp_rx_stats(rx, &st), 0);
	assert_true(st.steering_misses >= 1);
	assert_int_equal(st.frags, 0);
	assert_int_equal(st.bytes, sizeof(msg));
	devmemtcp_rx_free(rx);
	close(s);
	close(l);
}

struct lister {
	pthread_t t;
	int bad;
};

static void *lister_main(void *arg)
{
	struct lister *l = arg;
	struct devmemtcp_queue q[16];

	for (int i = 0; i < 200; i++)
		l->bad += devmemtcp_queue_list(ctx, va, q, 16) != 7 ||
			  q[0].ifindex != (uint32_t)va;
	return NULL;
}

/* Queries on one context from many threads at once: each gets its own
 * answer (the context's netlink socket is shared and serialised). */
static void test_queries_from_threads(void **state)
{
	struct lister l[8];

	memset(l, 0, sizeof(l));
	for (int i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&l[i].t, NULL, lister_main, &l[i]), 0);
	for (int i = 0; i < 8; i++) {
		pthread_join(l[i].t, NULL);
		assert_int_equal(l[i].bad, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_family),
		cmocka_unit_test(test_queue_list_sysfs),
		cmocka_unit_test(test_no_netdev_family),
		cmocka_unit_test(test_qstats_unsupported),
		cmocka_unit_test(test_libnl_oracle),
		cmocka_unit_test(test_bind_veth_unsupported),
		cmocka_unit_test(test_bind_arg_checks),
		cmocka_unit_test(test_bind_logs_once),
		cmocka_unit_test(test_udmabuf_missing),
		cmocka_unit_test(test_bind_without_cap_net_admin),
		cmocka_unit_test(test_no_fd_leaks),
		cmocka_unit_test(test_tcp_steering_miss),
		cmocka_unit_test(test_queries_from_threads),
	};

	T_TRY(host_netns(&va));
	return cmocka_run_group_tests_name("host-netdev", tests, setup, teardown);
}

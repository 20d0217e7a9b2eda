// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * "errno is left untouched" (devmemtcp(7)), for every exported function:
 * each entry of calls[] runs one function on paths that make system calls
 * and fail (a non-socket fd, a missing device, loopback that cannot do
 * devmem) or succeed, with errno set to a sentinel first, and checks the
 * sentinel is still there.  tests/check-symbols.sh checks that every
 * symbol of lib/devmemtcp.map has an entry here.
 */
#include <errno.h>
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

#define SENTINEL 4242

static struct devmemtcp_ctx *ctx;
static char run_dir[] = "/tmp/devmemtcp-errno-XXXXXX";

static void quiet(void *user, int level, const char *msg)
{
	(void)user;
	(void)level;
	(void)msg;
}

/* One call per exported function (some functions several times). */
static void c_version(void) { (void)devmemtcp_version(); }
static void c_ctx_new(void)
{
	struct devmemtcp_ctx *c = NULL;
	DEVMEMTCP_OPTS(ctx_opts, bad, .log_level = 3);

	bad.sz = 3;
	(void)devmemtcp_ctx_new(&bad, &c);
	(void)devmemtcp_ctx_new(NULL, NULL);
	if (devmemtcp_ctx_new(NULL, &c) == 0)
		devmemtcp_ctx_free(c);
}
static void c_ctx_free(void) { devmemtcp_ctx_free(NULL); }
static void c_ctx_errmsg(void) { (void)devmemtcp_ctx_errmsg(ctx); }
static void c_queue_list(void)
{
	struct devmemtcp_queue q[4];

	(void)devmemtcp_queue_list(ctx, 1, q, 4);	/* lo: a netlink query */
	(void)devmemtcp_queue_list(ctx, 1 << 30, q, 4);	/* ENODEV */
}
static void c_qstats_get(void)
{
	struct devmemtcp_qstats s = { .sz = sizeof(s) };

	(void)devmemtcp_qstats_get(ctx, 1, 0, -1, &s);
	(void)devmemtcp_qstats_get(ctx, 1 << 30, 0, 0, &s);
}
static void c_buf_new(void)
{
	struct devmemtcp_buf *b = NULL;
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT,
		       .fd = 0, .size = 4096, .flags = DEVMEMTCP_BUF_KEEP_FD);
	DEVMEMTCP_OPTS(buf_opts, u, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = 1 << 20);
	/* libdrm on a file that is not a DRM node, and node discovery */
	DEVMEMTCP_OPTS(buf_opts, d, .provider = DEVMEMTCP_PROVIDER_DRM,
		       .size = 1 << 20, .drm_path = "/dev/null");
	DEVMEMTCP_OPTS(buf_opts, dd, .provider = DEVMEMTCP_PROVIDER_DRM,
		       .size = 1 << 20);

	if (devmemtcp_buf_new(ctx, &o, &b) == 0)
		devmemtcp_buf_free(b);
	if (devmemtcp_buf_new(ctx, &u, &b) == 0)
		devmemtcp_buf_free(b);
	if (devmemtcp_buf_new(ctx, &d, &b) == 0)
		devmemtcp_buf_free(b);
	if (devmemtcp_buf_new(ctx, &dd, &b) == 0)
		devmemtcp_buf_free(b);
	(void)devmemtcp_buf_new(NULL, &u, &b);
}
static void c_buf_free(void) { devmemtcp_buf_free(NULL); }
static void c_buf_errmsg(void) { (void)devmemtcp_buf_errmsg(NULL); }
static void c_buf_fd(void) { (void)devmemtcp_buf_fd(NULL); }
static void c_buf_size(void) { (void)devmemtcp_buf_size(NULL); }
static void c_buf_provider(void) { (void)devmemtcp_buf_provider(NULL); }
static void c_buf_segments(void)
{
	const struct devmemtcp_segment *s;

	(void)devmemtcp_buf_segments(NULL, &s);
}
static void c_buf_addr(void)
{
	uint64_t a;

	(void)devmemtcp_buf_addr(NULL, 0, &a);
}
static void c_buf_read(void)
{
	char x;

	(void)devmemtcp_buf_read(NULL, 0, &x, 1);
}
static void c_buf_write(void)
{
	char x = 0;

	(void)devmemtcp_buf_write(NULL, 0, &x, 1);
}
static void c_bind_rx(void)
{
	struct devmemtcp_binding *b = NULL;
	uint32_t q = 0;

	(void)devmemtcp_bind_rx(ctx, 1, &q, 1, NULL, NULL, &b);
	(void)devmemtcp_bind_rx(ctx, 1 << 30, &q, 1, NULL, NULL, &b);
}
static void c_binding_close(void) { devmemtcp_binding_close(NULL); }
static void c_binding_id(void) { (void)devmemtcp_binding_id(NULL); }
static void c_binding_buf(void) { (void)devmemtcp_binding_buf(NULL); }
static void c_rx_new(void)
{
	struct devmemtcp_rx *rx = NULL;

	/* stdin is not a TCP socket: the check makes a system call */
	if (devmemtcp_rx_new(ctx, 0, NULL, &rx) == 0)
		devmemtcp_rx_free(rx);
	(void)devmemtcp_rx_new(ctx, -1, NULL, &rx);
	(void)devmemtcp_rx_new(ctx, 1 << 20, NULL, &rx);
}
static void c_rx_free(void) { devmemtcp_rx_free(NULL); }
static void c_rx_errmsg(void) { (void)devmemtcp_rx_errmsg(NULL); }
static void c_rx_fd(void) { (void)devmemtcp_rx_fd(NULL); }
static void c_rx_add_buf(void) { (void)devmemtcp_rx_add_buf(NULL, 1, NULL); }
static void c_rx_recv(void)
{
	struct devmemtcp_frag f[4];
	char lin[16];

	(void)devmemtcp_rx_recv(NULL, f, 4, lin, sizeof(lin));
}
static void c_rx_release(void) { (void)devmemtcp_rx_release(NULL, NULL, 1); }
static int never(void *arg, bool wait)
{
	(void)arg;
	(void)wait;
	return 1;
}
static void c_rx_release_after(void)
{
	(void)devmemtcp_rx_release_after(NULL, NULL, 1, never, NULL);
}
static void c_rx_flush(void) { (void)devmemtcp_rx_flush(NULL); }
static void c_rx_release_all(void) { (void)devmemtcp_rx_release_all(NULL); }
static void c_rx_stats(void)
{
	struct devmemtcp_rx_stats s = { .sz = sizeof(s) };

	(void)devmemtcp_rx_stats(NULL, &s);
}
static void c_flow_parse(void)
{
	struct devmemtcp_flow f;

	(void)devmemtcp_flow_parse("tcp4 dst-port 5201", &f);
	(void)devmemtcp_flow_parse("tcp4 dst-ip 300.1.1.1", &f);
	(void)devmemtcp_flow_parse(NULL, &f);
}
static void c_nic_open(void)
{
	struct devmemtcp_nic *n = NULL;
	DEVMEMTCP_OPTS(nic_opts, o, .run_dir = run_dir);

	/* lo cannot do header split: probing it takes netlink and ioctls */
	if (devmemtcp_nic_open(ctx, "lo", &o, &n) == 0)
		devmemtcp_nic_close(n);
	(void)devmemtcp_nic_open(ctx, "nonexistent0", &o, &n);
}
static void c_nic_close(void) { (void)devmemtcp_nic_close(NULL); }
static void c_nic_errmsg(void) { (void)devmemtcp_nic_errmsg(NULL); }
static void c_nic_queues(void)
{
	const uint32_t *q;

	(void)devmemtcp_nic_queues(NULL, &q);
}
static void c_nic_binding(void) { (void)devmemtcp_nic_binding(NULL); }
static void c_nic_add_flow(void) { (void)devmemtcp_nic_add_flow(NULL, NULL); }
static void c_nic_remove_flow(void) { (void)devmemtcp_nic_remove_flow(NULL, 0); }
static void c_nic_stats(void)
{
	struct devmemtcp_nic_stats s = { .sz = sizeof(s) };

	(void)devmemtcp_nic_stats(NULL, &s);
}
static void c_nic_recover(void)
{
	DEVMEMTCP_OPTS(nic_opts, o, .run_dir = run_dir);

	(void)devmemtcp_nic_recover(ctx, "lo", &o);	/* no journal */
	(void)devmemtcp_nic_recover(ctx, "nonexistent0", &o);
}
static void c_nic_probe(void)
{
	struct devmemtcp_probe *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	p->sz = sizeof(*p);
	(void)devmemtcp_nic_probe(ctx, "lo", NULL, p);
	(void)devmemtcp_nic_probe(ctx, "nonexistent0", NULL, p);
	free(p);
}
static void c_nic_rank(void)
{
	struct devmemtcp_nic_rank r[4];

	(void)devmemtcp_nic_rank(ctx, "0000:00:00.0", r, 4);
	(void)devmemtcp_nic_rank(ctx, "bad", r, 4);
}
static void c_nic_near_gpu(void)
{
	struct devmemtcp_nic_rank r[4];

	(void)devmemtcp_nic_near_gpu(ctx, -1, r, 4);
	(void)devmemtcp_nic_near_gpu(ctx, 0, r, 4);	/* no CUDA here, or a GPU */
}
static void c_bind_tx(void)
{
	struct devmemtcp_binding *b = NULL;

	(void)devmemtcp_bind_tx(ctx, 1, NULL, NULL, &b);
}
static void c_tx_new(void)
{
	struct devmemtcp_tx *tx = NULL;

	if (devmemtcp_tx_new(ctx, 0, NULL, NULL, &tx) == 0)
		devmemtcp_tx_free(tx);
}
static void c_tx_free(void) { devmemtcp_tx_free(NULL); }
static void c_tx_errmsg(void) { (void)devmemtcp_tx_errmsg(NULL); }
static void c_tx_fd(void) { (void)devmemtcp_tx_fd(NULL); }
static void c_tx_send(void)
{
	struct devmemtcp_tx_piece p = { 0, 1 };

	(void)devmemtcp_tx_send(NULL, &p, 1, 0);
}
static void c_tx_reap(void)
{
	struct devmemtcp_tx_done d[2];

	(void)devmemtcp_tx_reap(NULL, d, 2);
}
static void c_tx_wait(void) { (void)devmemtcp_tx_wait(NULL, 0); }
static void c_tx_stats(void)
{
	struct devmemtcp_tx_stats s = { .sz = sizeof(s) };

	(void)devmemtcp_tx_stats(NULL, &s);
}
static void c_gpu_new(void)
{
	struct devmemtcp_gpu *g = NULL;

	/* without a GPU (or driver) this fails after dlopen and friends */
	if (devmemtcp_gpu_new(ctx, NULL, &g) == 0)
		devmemtcp_gpu_free(g);
}
static void c_gpu_free(void) { devmemtcp_gpu_free(NULL); }
static void c_gpu_errmsg(void) { (void)devmemtcp_gpu_errmsg(NULL); }
static void c_gpu_gather(void)
{
	(void)devmemtcp_gpu_gather(NULL, NULL, 0, NULL, 0, NULL);
}
static void c_gpu_view(void)
{
	struct devmemtcp_frag f = { .offset = 0, .addr = 4096, .len = 10 };
	struct devmemtcp_gpu_iov iov[1];

	(void)devmemtcp_gpu_view(NULL, &f, 1, iov, 1);
	(void)devmemtcp_gpu_view(NULL, NULL, 1, iov, 1);
}
static void c_gpu_fence_new(void)
{
	struct devmemtcp_gpu_fence *f;

	(void)devmemtcp_gpu_fence_new(NULL, NULL, &f);
}
static void c_gpu_fence_done(void) { (void)devmemtcp_gpu_fence_done(NULL, false); }
static void c_gpu_gather_release(void)
{
	(void)devmemtcp_gpu_gather_release(NULL, NULL, NULL, 0, NULL, 0, NULL);
}

static void c_gpu_gather_recv(void)
{
	(void)devmemtcp_gpu_gather_recv(NULL, NULL, NULL, 0, NULL, 0, NULL, 0,
					NULL);
}
static void c_gpu_flush(void) { (void)devmemtcp_gpu_flush(NULL); }
static void c_gpu_release_after(void)
{
	(void)devmemtcp_gpu_release_after(NULL, NULL, NULL, 0, NULL);
}
static void c_zcrx_new(void)
{
	struct devmemtcp_zcrx *z = NULL;
	struct devmemtcp_buf *b = NULL;
	int fd;

	/* lo: io_uring setup, probe and a registration the kernel refuses
	 * (no CAP_NET_ADMIN, no queue API, or no zcrx at all) */
	if (t_memfd_buf(ctx, 1 << 20, &fd, &b) == 0) {
		if (devmemtcp_zcrx_new(ctx, 1, 0, b, NULL, &z) == 0)
			devmemtcp_zcrx_free(z);
		devmemtcp_buf_free(b);
	}
	if (fd >= 0)
		close(fd);
	(void)devmemtcp_zcrx_new(ctx, 1, 0, NULL, NULL, &z);
}
static void c_zcrx_free(void) { devmemtcp_zcrx_free(NULL); }
static void c_zcrx_errmsg(void) { (void)devmemtcp_zcrx_errmsg(NULL); }
static void c_zcrx_wait(void) { (void)devmemtcp_zcrx_wait(NULL, 0); }
static void c_zcrx_stats(void)
{
	struct devmemtcp_zcrx_stats s = { .sz = sizeof(s) };

	(void)devmemtcp_zcrx_stats(NULL, &s);
}

#define CALL(name) { #name, c_##name }
static const struct {
	const char *name;
	void (*fn)(void);
} calls[] = {
	CALL(version), CALL(ctx_new), CALL(ctx_free), CALL(ctx_errmsg),
	CALL(queue_list), CALL(qstats_get), CALL(buf_new), CALL(buf_free),
	CALL(buf_errmsg), CALL(buf_fd), CALL(buf_size), CALL(buf_provider),
	CALL(buf_segments), CALL(buf_addr), CALL(buf_read), CALL(buf_write),
	CALL(bind_rx), CALL(binding_close), CALL(binding_id),
	CALL(binding_buf), CALL(rx_new), CALL(rx_free), CALL(rx_errmsg),
	CALL(rx_fd), CALL(rx_add_buf), CALL(rx_recv), CALL(rx_release),
	CALL(rx_release_after), CALL(rx_flush), CALL(rx_release_all),
	CALL(rx_stats), CALL(flow_parse), CALL(nic_open), CALL(nic_close),
	CALL(nic_errmsg), CALL(nic_queues), CALL(nic_binding),
	CALL(nic_add_flow), CALL(nic_remove_flow), CALL(nic_stats),
	CALL(nic_recover), CALL(nic_probe), CALL(nic_rank), CALL(nic_near_gpu), CALL(bind_tx), CALL(tx_new),
	CALL(tx_free), CALL(tx_errmsg), CALL(tx_fd), CALL(tx_send),
	CALL(tx_reap), CALL(tx_wait), CALL(tx_stats), CALL(gpu_new),
	CALL(gpu_free), CALL(gpu_errmsg), CALL(gpu_gather), CALL(gpu_view),
	CALL(gpu_fence_new), CALL(gpu_fence_done), CALL(gpu_release_after),
	CALL(gpu_gather_release), CALL(gpu_gather_recv), CALL(gpu_flush),
	CALL(zcrx_new), CALL(zcrx_free), CALL(zcrx_errmsg), CALL(zcrx_wait),
	CALL(zcrx_stats),
};

static void test_errno_untouched(void **state)
{
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		errno = SENTINEL;
		calls[i].fn();
		if (errno != SENTINEL) {
			fprintf(stderr, "devmemtcp_%s changed errno to %d (%s)\n",
				calls[i].name, errno, strerror(errno));
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

static int setup(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = quiet);

	(void)state;
	if (!mkdtemp(run_dir))
		return -1;
	return devmemtcp_ctx_new(&o, &ctx);
}

static int teardown(void **state)
{
	(void)state;
	devmemtcp_ctx_free(ctx);
	rmdir(run_dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errno_untouched),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

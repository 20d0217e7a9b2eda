// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * test-contract IFACE: promises of the man pages that need a devmem NIC
 * (the simulated one), on whichever kernel the guest runs:
 *  - a binding keeps its buffer alive: devmemtcp_buf_free() drops only the
 *    caller's reference, devmemtcp_binding_buf() stays usable, and the
 *    buffer goes with the binding;
 *  - import takes a real dma-buf (here a udmabuf's) up to its size, and
 *    refuses a larger size;
 *  - bind-rx with header split off names header split, on kernels that
 *    check it first (6.14+) and on those whose driver refuses afterwards
 *    (6.12); rx_page_size on a kernel without it is EOPNOTSUPP (on one
 *    with it, the kernel's refusal names rx_page_size);
 *  - bind-tx's argument errors are EINVAL on every kernel, also on one
 *    without bind-tx (6.12), as documented;
 *  - what a bind is refused with (a queue out of range: ERANGE from the
 *    library, which counts queue-get's RX queues first; one with a
 *    binding, one an AF_XDP socket uses, a dma-buf fd that is gone), a
 *    binding queue-get does not show, a setup
 *    with a buffer on a device that is down, statistics of a queue the
 *    driver has not: the errno and the message the pages document.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness-nic.h"

static struct devmemtcp_ctx *ctx;
static const char *ifname;

static int test_binding_keeps_buffer(void)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 1);
	struct devmemtcp_binding *b;
	struct devmemtcp_buf *buf, *bb;
	struct devmemtcp_nic *nic;
	const uint32_t *q;
	char back[6];
	int fd;

	T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "nic_open: %s",
		devmemtcp_ctx_errmsg(ctx));
	T_CHECK(devmemtcp_nic_queues(nic, &q) == 1, "one queue");
	T_CHECK(t_udmabuf(ctx, 4u << 20, &buf) == 0, "udmabuf");
	fd = devmemtcp_buf_fd(buf);
	T_CHECK(devmemtcp_bind_rx(ctx, (int)if_nametoindex(ifname), q, 1, buf,
				  NULL, &b) == 0,
		"bind_rx: %s", devmemtcp_ctx_errmsg(ctx));
	devmemtcp_buf_free(buf);
	/* the binding's reference keeps the buffer, and its dma-buf fd */
	T_CHECK(fcntl(fd, F_GETFD) >= 0, "the dma-buf fd was closed by buf_free while bound");
	bb = devmemtcp_binding_buf(b);
	T_CHECK(bb == buf, "binding_buf %p, not the bound buffer %p", (void *)bb, (void *)buf);
	T_CHECK(devmemtcp_buf_size(bb) == 4u << 20, "size %llu",
		(unsigned long long)devmemtcp_buf_size(bb));
	T_CHECK(devmemtcp_buf_write(bb, 4096, "hello", 6) == 0, "write: %s",
		devmemtcp_buf_errmsg(bb));
	T_CHECK(devmemtcp_buf_read(bb, 4096, back, 6) == 0 && !strcmp(back, "hello"),
		"read back");
	/* the last reference goes with the binding */
	devmemtcp_binding_close(b);
	T_CHECK(fcntl(fd, F_GETFD) < 0 && errno == EBADF,
		"the dma-buf fd is still open after the binding closed");
	T_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close: %s", devmemtcp_ctx_errmsg(ctx));
	t_note("PASS: a binding keeps its buffer until it closes");
	return 0;
}

static int test_import_size(void)
{
	DEVMEMTCP_OPTS(buf_opts, o, .provider = DEVMEMTCP_PROVIDER_IMPORT);
	struct devmemtcp_buf *src, *imp;
	char want[256];

	T_CHECK(t_udmabuf(ctx, 1u << 20, &src) == 0, "udmabuf");
	o.fd = dup(devmemtcp_buf_fd(src));
	o.size = (1u << 20) + 4096;
	T_CHECK(devmemtcp_buf_new(ctx, &o, &imp) == -EINVAL, "a size past the dma-buf's end was taken");
	snprintf(want, sizeof(want),
		 "import: opts.size %u is larger than the dma-buf (%u bytes): pass its size (lseek(fd, 0, SEEK_END) gives it)",
		 (1u << 20) + 4096, 1u << 20);
	T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx), want), "message: %s", devmemtcp_ctx_errmsg(ctx));
	/* refused: the fd is still the caller's */
	T_CHECK(fcntl(o.fd, F_GETFD) >= 0, "a refused import closed the fd");
	o.size = 1u << 20;
	T_CHECK(devmemtcp_buf_new(ctx, &o, &imp) == 0, "import of the udmabuf: %s",
		devmemtcp_ctx_errmsg(ctx));
	T_CHECK(devmemtcp_buf_size(imp) == 1u << 20, "size");
	devmemtcp_buf_free(imp);	/* closes the dup */
	devmemtcp_buf_free(src);
	t_note("PASS: import takes a udmabuf's dma-buf up to its size");
	return 0;
}

static int test_bind_messages(void)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 1);
	DEVMEMTCP_OPTS(bind_opts, bo, .rx_page_size = 8192);
	int ifindex = (int)if_nametoindex(ifname), ret;
	struct devmemtcp_binding *b;
	struct devmemtcp_buf *buf;
	struct devmemtcp_nic *nic;
	uint32_t q = 0;
	char want[512];
	const uint32_t *qs;

	T_CHECK(t_udmabuf(ctx, 4u << 20, &buf) == 0, "udmabuf");
	/* header split off (the simulated NIC's default) */
	T_CHECK(t_run("ethtool -G %s tcp-data-split off", ifname) == 0, "ethtool -G");
	ret = devmemtcp_bind_rx(ctx, ifindex, &q, 1, buf, NULL, &b);
	if (t_kernel_version() >= 614) {
		T_CHECK(ret == -EINVAL, "bind with header split off: %d", ret);
		snprintf(want, sizeof(want),
			 "bind-rx on %s failed: enable header split on %s: ethtool -G %s tcp-data-split on (or use devmemtcp_nic_open()) (kernel: \"tcp-data-split is disabled\")",
			 ifname, ifname, ifname);
	} else {
		T_CHECK(ret == -ENODATA, "bind with header split off: %d", ret);
		snprintf(want, sizeof(want),
			 "bind-rx on %s failed: the driver restarted the queue but its page pool did not take the dma-buf: turn header split on (ethtool -G %s tcp-data-split on; Linux 6.12 and 6.13 bind without checking it), or the driver lacks unreadable-netmem support",
			 ifname, ifname);
	}
	T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx), want), "message: %s",
		devmemtcp_ctx_errmsg(ctx));
	/* header split on: rx_page_size this kernel or driver cannot use */
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "nic_open: %s",
		devmemtcp_ctx_errmsg(ctx));
	T_CHECK(devmemtcp_nic_queues(nic, &qs) == 1, "one queue");
	ret = devmemtcp_bind_rx(ctx, ifindex, qs, 1, buf, &bo, &b);
	if (t_kernel_version() >= 614) {
		/* a kernel with the attribute checks the buffer's pages
		 * (4 KiB here) or the driver's support, and says which */
		T_CHECK(ret == -EINVAL || ret == -EOPNOTSUPP, "rx_page_size 8192: %d (%s)",
			ret, devmemtcp_ctx_errmsg(ctx));
		T_CHECK(strstr(devmemtcp_ctx_errmsg(ctx), "rx_page_size"),
			"message: %s", devmemtcp_ctx_errmsg(ctx));
	} else {
		T_CHECK(ret == -EOPNOTSUPP, "rx_page_size 8192: %d (%s)", ret,
			devmemtcp_ctx_errmsg(ctx));
		snprintf(want, sizeof(want),
			 "bind-rx on %s failed: this kernel (%s) has no rx-page-size for bind-rx (NETDEV_A_DMABUF_RX_PAGE_SIZE): leave rx_page_size 0 (kernel: \"Unknown attribute type\")",
			 ifname, t_kernel_release());
		T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx), want), "message: %s",
			devmemtcp_ctx_errmsg(ctx));
	}
	T_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close: %s", devmemtcp_ctx_errmsg(ctx));
	/* bind-tx: a NULL buffer is an argument error whatever the kernel */
	ret = devmemtcp_bind_tx(ctx, ifindex, NULL, NULL, &b);
	T_CHECK(ret == -EINVAL, "bind_tx without a buffer: %d (%s)", ret,
		devmemtcp_ctx_errmsg(ctx));
	T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx),
			"devmemtcp_bind_tx: buf is NULL: create one with devmemtcp_buf_new()"),
		"message: %s", devmemtcp_ctx_errmsg(ctx));
	devmemtcp_buf_free(buf);
	t_note("PASS: bind messages name header split and rx_page_size");
	return 0;
}

/* ret and the context's message are want_ret and want. */
static int expect(int ret, int want_ret, const char *want)
{
	printf("refusals: %d: %s\n", ret, devmemtcp_ctx_errmsg(ctx));
	T_CHECK(ret == want_ret, "expected %d, got %d: %s", want_ret, ret,
		devmemtcp_ctx_errmsg(ctx));
	T_CHECK(!strcmp(devmemtcp_ctx_errmsg(ctx), want), "message: %s",
		devmemtcp_ctx_errmsg(ctx));
	return 0;
}

static int test_kernel_refusals(void)
{
	DEVMEMTCP_OPTS(nic_opts, o, .nqueues = 2);
	int ifindex = (int)if_nametoindex(ifname), xsk, fd, saved, ret;
	struct devmemtcp_qstats st = { .sz = sizeof(st) };
	struct devmemtcp_binding *b, *b2;
	struct devmemtcp_buf *buf;
	struct devmemtcp_nic *nic;
	const uint32_t *q;
	uint32_t far = 99, nrx = 0;
	struct devmemtcp_queue ql[64];
	int nq;
	char want[512];

	T_CHECK(t_udmabuf(ctx, 4u << 20, &buf) == 0, "udmabuf");
	T_CHECK(devmemtcp_nic_open(ctx, ifname, &o, &nic) == 0, "nic_open: %s",
		devmemtcp_ctx_errmsg(ctx));
	T_CHECK(devmemtcp_nic_queues(nic, &q) == 2, "two queues");
	/* a queue out of range: the library counts the RX queues queue-get
	 * shows and refuses before the kernel does (which says ERANGE with a
	 * text on 6.12, EINVAL without one later) */
	nq = devmemtcp_queue_list(ctx, ifindex, ql, 64);
	T_CHECK(nq > 0 && nq <= 64, "queue_list: %d", nq);
	for (int i = 0; i < nq; i++)
		nrx += ql[i].type == DEVMEMTCP_QUEUE_RX;
	/* ERRORS devmemtcp_bind_rx ERANGE */
	snprintf(want, sizeof(want),
		 "devmemtcp_bind_rx: RX queue 99 is out of range: %s has %u RX queues (0-%u); pick a lower index or add channels with ethtool -L",
		 ifname, nrx, nrx - 1);
	T_TRY(expect(devmemtcp_bind_rx(ctx, ifindex, &far, 1, buf, NULL, &b), -ERANGE, want));
	/* ERRORS devmemtcp_bind_rx EEXIST */
	T_CHECK(devmemtcp_bind_rx(ctx, ifindex, &q[0], 1, buf, NULL, &b) == 0, "bind_rx: %s",
		devmemtcp_ctx_errmsg(ctx));
	snprintf(want, sizeof(want),
		 "bind-rx on %s failed: a queue of %s already has a dma-buf or io_uring bound: close that binding first or pick other queues (devmemtcp probe %s) (kernel: \"designated queue already memory provider bound\")",
		 ifname, ifname, ifname);
	T_TRY(expect(devmemtcp_bind_rx(ctx, ifindex, &q[0], 1, buf, NULL, &b2), -EEXIST, want));
	devmemtcp_binding_close(b);
	/* a driver that does not install the binding (test builds) */
	setenv("DEVMEMTCP_TEST_BIND_UNSEEN", "1", 1);
	/* ERRORS devmemtcp_bind_rx EIO */
	snprintf(want, sizeof(want),
		 "bind-rx on %s: queue-get does not list RX queue %u after binding it", ifname, q[1]);
	T_TRY(expect(devmemtcp_bind_rx(ctx, ifindex, &q[1], 1, buf, NULL, &b), -EIO, want));
	unsetenv("DEVMEMTCP_TEST_BIND_UNSEEN");
	/* undone: the queue takes a binding again */
	T_CHECK(devmemtcp_bind_rx(ctx, ifindex, &q[1], 1, buf, NULL, &b) == 0, "bind_rx: %s",
		devmemtcp_ctx_errmsg(ctx));
	devmemtcp_binding_close(b);
	/* ERRORS devmemtcp_bind_rx EBUSY */
	xsk = t_xsk_bind(ifindex, q[1]);
	T_CHECK(xsk >= 0, "AF_XDP socket on queue %u", q[1]);
	snprintf(want, sizeof(want),
		 "bind-rx on %s failed: an AF_XDP socket uses a queue of %s: close it or pick other queues (devmemtcp probe %s) (kernel: \"designated queue already in use by AF_XDP\")",
		 ifname, ifname, ifname);
	T_TRY(expect(devmemtcp_bind_rx(ctx, ifindex, &q[1], 1, buf, NULL, &b), -EBUSY, want));
	close(xsk);
	/* the socket's buffer pool leaves the queue from a work item: the
	 * queue takes a binding again within a second */
	for (int i = 0; (ret = devmemtcp_bind_rx(ctx, ifindex, &q[1], 1, buf, NULL, &b)) == -EBUSY &&
			i < 100; i++)
		usleep(10000);
	T_CHECK(ret == 0, "bind_rx after the AF_XDP socket closed: %s", devmemtcp_ctx_errmsg(ctx));
	devmemtcp_binding_close(b);
	/* ERRORS devmemtcp_qstats_get ENOENT */
	snprintf(want, sizeof(want),
		 "%s reports no statistics for RX queue 99: check the queue index with devmemtcp_queue_list()",
		 ifname);
	T_TRY(expect(devmemtcp_qstats_get(ctx, ifindex, DEVMEMTCP_QUEUE_RX, 99, &st), -ENOENT, want));
	T_CHECK(devmemtcp_nic_close(nic) == 0, "nic_close: %s", devmemtcp_ctx_errmsg(ctx));
	/* a dma-buf fd closed behind the buffer's back (put back after) */
	if (t_kernel_version() >= 616) {
		fd = devmemtcp_buf_fd(buf);
		saved = dup(fd);
		close(fd);
		/* ERRORS devmemtcp_bind_tx EBADF */
		snprintf(want, sizeof(want),
			 "bind-tx on %s failed: the dma-buf fd is not valid: pass the fd of a live dma-buf (devmemtcp_buf_fd())",
			 ifname);
		T_TRY(expect(devmemtcp_bind_tx(ctx, ifindex, buf, NULL, &b), -EBADF, want));
		T_CHECK(dup2(saved, fd) == fd, "dup2");
		close(saved);
	}
	/* a device that is down takes no binding */
	T_CHECK(t_run("ip link set %s down", ifname) == 0, "ip link set down");
	o.buf = buf;
	/* ERRORS devmemtcp_nic_open ENETDOWN */
	snprintf(want, sizeof(want),
		 "setting up %s for devmem failed at bind-rx: %s is down, so its queues cannot take a binding: bring it up first (ip link set %s up); the 3 finished steps were undone",
		 ifname, ifname, ifname);
	T_TRY(expect(devmemtcp_nic_open(ctx, ifname, &o, &nic), -ENETDOWN, want));
	T_CHECK(t_run("ip link set %s up", ifname) == 0, "ip link set up");
	devmemtcp_buf_free(buf);
	t_note("PASS: the kernel's refusals, errno and message");
	return 0;
}

int main(int argc, char **argv)
{
	T_TRY(nic_init(argc, argv, &ctx, &ifname));
	T_TRY(test_binding_keeps_buffer());
	T_TRY(test_import_size());
	T_TRY(test_bind_messages());
	T_TRY(test_kernel_refusals());
	devmemtcp_ctx_free(ctx);
	return T_EXIT_PASS;
}

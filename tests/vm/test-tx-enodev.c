// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm test 4: a socket whose route leaves through another device than the
 * one the dma-buf is bound to: sendmsg fails with ENODEV and the library's
 * message names both devices and the fix.  Three routes: loopback (found
 * with RTM_GETROUTE), loopback with SO_BINDTODEVICE (read back with
 * getsockopt), and a veth pair between the two namespaces when veth is
 * available.  Finally the same binding sends over its own device.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness-tx.h"
#include "pattern.h"

#define PERIOD PATTERN_PERIOD_DEFAULT
/* the veth pair's own subnet, apart from the simulated pair's */
#define VETH_TX_ADDR "10.78.0.1"
#define VETH_RX_ADDR "10.78.0.2"

static int expect_enodev(struct tx_test *t, int fd, const char *dev, const char *how)
{
	const struct devmemtcp_tx_piece p = { 4096, 1000 };
	const char *bound = t->a.tx_if, *m;
	DEVMEMTCP_OPTS(tx_stats, st);
	struct devmemtcp_tx *tx;
	char want[512];
	ssize_t r;

	T_CHECK(devmemtcp_tx_new(t->ctx, fd, t->b, NULL, &tx) == 0, "devmemtcp_tx_new: %s",
		devmemtcp_ctx_errmsg(t->ctx));
	r = devmemtcp_tx_send(tx, &p, 1, 0);
	m = devmemtcp_tx_errmsg(tx);
	/* ERRORS devmemtcp_tx_send ENODEV */
	T_CHECK(r == -ENODEV, "%s: expected -ENODEV, got %zd (%s)", dev, r, m);
	snprintf(want, sizeof(want),
		 "sendmsg on fd %d failed with ENODEV: the socket%s %s but the dma-buf is bound to %s (binding %u): SO_BINDTODEVICE the socket to %s / fix the route to the peer so it leaves through %s",
		 fd, strstr(how, "route") ? "'s route leaves through" : " is bound (SO_BINDTODEVICE) to",
		 dev, bound, devmemtcp_binding_id(t->b), bound, bound);
	T_CHECK(!strcmp(m, want), "%s: the message does not name %s, %s and the fix: %s", dev, dev,
		bound, m);
	devmemtcp_tx_stats(tx, &st);
	T_CHECK(!st.bytes_sent && !st.sends_in_flight && devmemtcp_tx_wait(tx, 100) == 0,
		"%s: a failed send left something in flight", dev);
	t_note("ok: via %s: -ENODEV: %s", dev, m);
	devmemtcp_tx_free(tx);
	return 0;
}

/* 1, 2: a connection over loopback, bound to bind_dev unless NULL */
static int via_loopback(struct tx_test *t, int port, const char *bind_dev, const char *how)
{
	int lfd = t_listen("127.0.0.1", port), fd, sfd, r;

	T_CHECK(lfd >= 0, "listen");
	fd = t_connect("127.0.0.1", port, bind_dev);
	T_CHECK(fd >= 0, "connect");
	sfd = accept(lfd, NULL, NULL);
	r = expect_enodev(t, fd, "lo", how);
	close(fd);
	close(sfd);
	close(lfd);
	return r;
}

/* 3. a veth pair between the namespaces (when veth is there) */
static int via_veth(struct tx_test *t, bool *ran)
{
	const struct rx_spec spec = { RX_PLAIN, false, t->a.port + 2 };
	struct tx_args v = t->a;
	struct rx_result r;
	struct rx_proc rp;
	int fd, ret;

	*ran = t->a.tx_ns && t->a.rx_ns &&
	       !t_run("ip link add dmt-v0 type veth peer name dmt-v1 netns %s 2>/dev/null && "
		      "ip addr add " VETH_TX_ADDR "/24 dev dmt-v0 && ip link set dmt-v0 up && "
		      "ip -n %s addr add " VETH_RX_ADDR "/24 dev dmt-v1 && ip -n %s link set dmt-v1 up",
		      t->a.rx_ns, t->a.rx_ns, t->a.rx_ns);
	if (!*ran) {
		t_note("veth case not run (needs --tx-ns/--rx-ns or --setup, and veth)");
		return 0;
	}
	v.rx_addr = VETH_RX_ADDR;
	ret = rx_start(&v, &spec, 1, &rp);
	if (!ret) {
		fd = t_connect(VETH_RX_ADDR, t->a.port + 2, NULL);
		ret = fd < 0 ? T_EXIT_FAIL : expect_enodev(t, fd, "dmt-v0", "route leaves through");
		close(fd);
		if (!ret)
			ret = rx_next(&rp, &r);
		if (!ret)
			ret = rx_wait(&rp);
	}
	t_run("ip link del dmt-v0 2>/dev/null");
	return ret;
}

/* 4. the same binding over its own device works */
static int via_own_device(struct tx_test *t)
{
	const struct rx_spec spec = { RX_PLAIN, true, t->a.port + 3 };
	const struct devmemtcp_tx_piece p = { 0, 65536 };
	static uint8_t stage[65536];
	struct devmemtcp_tx *tx;
	struct rx_result r;
	struct rx_proc rp;
	int fd;

	pattern_fill(stage, 65536, 0, PERIOD);
	T_CHECK(!devmemtcp_buf_write(t->buf, 0, stage, 65536), "buf_write: %s",
		devmemtcp_buf_errmsg(t->buf));
	T_TRY(rx_start(&t->a, &spec, 1, &rp));
	fd = t_connect(t->a.rx_addr, t->a.port + 3, t->a.tx_if);
	T_CHECK(fd >= 0, "connect");
	T_CHECK(devmemtcp_tx_new(t->ctx, fd, t->b, NULL, &tx) == 0, "devmemtcp_tx_new: %s",
		devmemtcp_ctx_errmsg(t->ctx));
	T_CHECK(devmemtcp_tx_send(tx, &p, 1, 0) == 65536, "send over %s: %s", t->a.tx_if,
		devmemtcp_tx_errmsg(tx));
	while (devmemtcp_tx_wait(tx, 10000) > 0)
		;
	devmemtcp_tx_free(tx);
	close(fd);
	T_TRY(rx_next(&rp, &r));
	T_TRY(rx_wait(&rp));
	T_CHECK(r.ok && r.bytes == 65536, "control send over %s: %s (%" PRIu64 " bytes)",
		t->a.tx_if, r.msg, r.bytes);
	return 0;
}

static int run(struct tx_test *t)
{
	bool veth;

	T_TRY(via_loopback(t, t->a.port, NULL, "route leaves through"));
	T_TRY(via_loopback(t, t->a.port + 1, "lo", "SO_BINDTODEVICE) to"));
	T_TRY(via_veth(t, &veth));
	T_TRY(via_own_device(t));
	t_note("PASS: ENODEV explained for lo (route), lo (SO_BINDTODEVICE)%s; the binding sends over %s",
	       veth ? ", dmt-v0 (veth)" : "", t->a.tx_if);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct tx_desc d = { 1ull << 20, 5331, 1ull << 20, run };

	return tx_main(argc, argv, &d);
}

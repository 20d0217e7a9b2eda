// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm test 4: a socket whose route leaves through another device than the
 * one the dma-buf is bound to: sendmsg fails with ENODEV and the library's
 * message names both devices and the fix.  Three routes: loopback (found
 * with RTM_GETROUTE), loopback with SO_BINDTODEVICE (read back with
 * getsockopt), and a veth pair between the two namespaces when veth is
 * available.  Finally the same binding sends over its own device.
 */
#include "test-tx-common.h"

static void expect_enodev(struct devmemtcp_ctx *ctx,
			  struct devmemtcp_binding *b, int fd,
			  const char *dev, const char *bound, const char *how)
{
	const struct devmemtcp_tx_piece p = { 4096, 1000 };
	DEVMEMTCP_OPTS(tx_stats, st);
	struct devmemtcp_tx *tx;
	const char *m;
	ssize_t r;

	if (devmemtcp_tx_new(ctx, fd, b, NULL, &tx))
		fail("devmemtcp_tx_new: %s", devmemtcp_ctx_errmsg(ctx));
	r = devmemtcp_tx_send(tx, &p, 1, 0);
	m = devmemtcp_tx_errmsg(tx);
	if (r != -ENODEV)
		fail("%s: expected -ENODEV, got %zd (%s)", dev, r, m);
	if (!strstr(m, dev) || !strstr(m, bound) || !strstr(m, how) ||
	    !strstr(m, "SO_BINDTODEVICE"))
		fail("%s: the message does not name %s, %s and the fix: %s",
		     dev, dev, bound, m);
	devmemtcp_tx_stats(tx, &st);
	if (st.bytes_sent || st.sends_in_flight ||
	    devmemtcp_tx_wait(tx, 100) != 0)
		fail("%s: a failed send left something in flight", dev);
	note("ok: via %s: -ENODEV: %s", dev, m);
	devmemtcp_tx_free(tx);
}

static int loopback_pair(int port, int *lfd, const char *bind_dev)
{
	*lfd = listen_on("127.0.0.1", port);
	return connect_to("127.0.0.1", port, bind_dev);
}

int main(int argc, char **argv)
{
	struct targs a;
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf;
	struct devmemtcp_binding *b;
	struct rx_result r;
	struct rx_proc rp;
	int fd, lfd, sfd;
	bool veth = false;

	parse_args(&a, argc, argv, 1ull << 20, 5331);
	enter_ns(a.tx_ns);
	ctx = new_ctx();
	buf = new_udmabuf(ctx, 1ull << 20);
	b = bind_tx_or_explain(ctx, a.tx_if, buf);

	/* 1. loopback, found through the route */
	fd = loopback_pair(a.port, &lfd, NULL);
	sfd = accept(lfd, NULL, NULL);
	expect_enodev(ctx, b, fd, "lo", a.tx_if, "route leaves through");
	close(fd);
	close(sfd);
	close(lfd);
	/* 2. loopback with SO_BINDTODEVICE */
	fd = loopback_pair(a.port + 1, &lfd, "lo");
	sfd = accept(lfd, NULL, NULL);
	expect_enodev(ctx, b, fd, "lo", a.tx_if, "SO_BINDTODEVICE) to");
	close(fd);
	close(sfd);
	close(lfd);
	/* 3. a veth pair between the namespaces */
	if (a.tx_ns && a.rx_ns &&
	    !run("ip link add dmt-v0 type veth peer name dmt-v1 netns %s 2>/dev/null && "
		 "ip addr add 10.77.0.1/24 dev dmt-v0 && ip link set dmt-v0 up && "
		 "ip -n %s addr add 10.77.0.2/24 dev dmt-v1 && ip -n %s link set dmt-v1 up",
		 a.rx_ns, a.rx_ns, a.rx_ns)) {
		struct targs v = a;
		const struct rx_spec spec = { RX_PLAIN, false, a.port + 2 };

		v.rx_addr = "10.77.0.2";
		veth = true;
		rp = start_receiver(&v, &spec, 1);
		fd = connect_to("10.77.0.2", a.port + 2, NULL);
		expect_enodev(ctx, b, fd, "dmt-v0", a.tx_if,
			      "route leaves through");
		close(fd);
		r = receiver_result(&rp);
		receiver_wait(&rp);
		run("ip link del dmt-v0 2>/dev/null");
	} else {
		note("veth case not run (needs --tx-ns/--rx-ns or --setup, and veth)");
	}
	/* 4. the same binding over its own device works */
	{
		const struct rx_spec spec = { RX_PLAIN, true, a.port + 3 };
		const struct devmemtcp_tx_piece p = { 0, 65536 };
		struct devmemtcp_tx *tx;
		uint8_t *stage = malloc(65536);

		pattern_fill(stage, 65536, 0, PERIOD);
		if (devmemtcp_buf_write(buf, 0, stage, 65536))
			fail("buf_write: %s", devmemtcp_buf_errmsg(buf));
		rp = start_receiver(&a, &spec, 1);
		fd = connect_to(a.rx_addr, a.port + 3, a.tx_if);
		if (devmemtcp_tx_new(ctx, fd, b, NULL, &tx))
			fail("devmemtcp_tx_new: %s", devmemtcp_ctx_errmsg(ctx));
		if (devmemtcp_tx_send(tx, &p, 1, 0) != 65536)
			fail("send over %s: %s", a.tx_if, devmemtcp_tx_errmsg(tx));
		while (devmemtcp_tx_wait(tx, 10000) > 0)
			;
		devmemtcp_tx_free(tx);
		close(fd);
		r = receiver_result(&rp);
		receiver_wait(&rp);
		if (!r.ok || r.bytes != 65536)
			fail("control send over %s: %s (%" PRIu64 " bytes)",
			     a.tx_if, r.msg, r.bytes);
		free(stage);
	}
	note("PASS: ENODEV explained for lo (route), lo (SO_BINDTODEVICE)%s; the binding sends over %s",
	     veth ? ", dmt-v0 (veth)" : "", a.tx_if);
	devmemtcp_binding_close(b);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	return 0;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm test 1: library TX -> library RX across the simulated NIC pair.
 * 64 MiB of the stream pattern leave a 16 MiB udmabuf ring whose slots are
 * rewritten only after the library reported them free; the receiver
 * (header split, ntuple rule, bind-rx through devmemtcp_nic_open) checks
 * every byte.  Every sendmsg must be completed, every byte reported free
 * exactly once and only after the peer ACKed it.  Then 16 MiB in 16 KiB
 * sends with net.core.optmem_max at 1024, so that sendmsg keeps failing
 * with ENOBUFS and devmemtcp_tx_send must wait for completions.  Then
 * (unless --quick) the throughput of devmem TX -> devmem RX and of plain
 * TCP over the same pair, both without validation.  IPv6 with --tx-addr /
 * --rx-addr.  On kernels without devmem TX: -EOPNOTSUPP and "needs Linux
 * 6.16" is the test.
 */
#include "test-tx-common.h"

#define SLOT (1u << 20)
#define NSLOTS 16
#define PIECES_PER_SLOT 4

/* Stream [0, total) through the ring; write the pattern when validating. */
static double devmem_stream(struct sender *s, struct devmemtcp_buf *buf,
			    uint64_t total, bool write_pattern)
{
	uint8_t *stage = malloc(SLOT);
	uint64_t pos = 0;
	double t0 = now_s();

	for (size_t k = 0; pos < total; k = (k + 1) % NSLOTS) {
		struct slot *sl = &s->slots[k];
		uint64_t n = total - pos < SLOT ? total - pos : SLOT;
		uint64_t piece = (n + PIECES_PER_SLOT - 1) / PIECES_PER_SLOT;

		sender_claim(s, k);
		if (write_pattern) {
			pattern_fill(stage, n, pos, PERIOD);
			if (devmemtcp_buf_write(buf, (uint64_t)k * SLOT, stage, n))
				fail("buf_write: %s", devmemtcp_buf_errmsg(buf));
		}
		sl->npieces = 0;
		for (uint64_t o = 0; o < n; o += piece) {
			uint64_t len = n - o < piece ? n - o : piece;

			sl->pieces[sl->npieces++] = (struct slot_piece){
				(uint64_t)k * SLOT + o, len, pos + o };
		}
		sender_send(s, k);
		pos += n;
	}
	sender_finish(s, total);
	free(stage);
	return now_s() - t0;
}

/*
 * 1b. The socket's option memory holds one notification skb per sendmsg in
 * flight; with net.core.optmem_max tiny, sendmsg fails with ENOBUFS and
 * devmemtcp_tx_send must wait for completions and go on.  16 MiB in 16 KiB
 * calls, validated.
 */
static void optmem_phase(const struct targs *a, struct devmemtcp_ctx *ctx,
			 struct devmemtcp_buf *buf, struct devmemtcp_binding *b,
			 struct rx_proc *rp)
{
	const char *path = "/proc/sys/net/core/optmem_max";
	DEVMEMTCP_OPTS(tx_stats, st);
	uint64_t bytes = 16ull << 20;
	struct sender s;
	struct rx_result r;
	char old[32] = "";
	FILE *f;
	int fd;

	f = fopen(path, "r");
	if (!f || !fgets(old, sizeof(old), f))
		fail("%s: %s", path, strerror(errno));
	fclose(f);
	fd = connect_to(a->rx_addr, a->port + 3, a->tx_if);
	/* the namespace's limit, read when the socket allocates */
	f = fopen(path, "w");
	if (!f || fprintf(f, "1024\n") < 0 || fclose(f))
		fail("writing %s: %s", path, strerror(errno));
	sender_open(&s, ctx, fd, b, SLOT, NSLOTS, PIECES_PER_SLOT, 16384);
	devmem_stream(&s, buf, bytes, true);
	devmemtcp_tx_stats(s.tx, &st);
	sender_close(&s);
	close(fd);
	f = fopen(path, "w");
	if (!f || fputs(old, f) < 0 || fclose(f))
		fail("restoring %s: %s", path, strerror(errno));
	r = receiver_result(rp);
	if (!r.ok || r.bytes != bytes)
		fail("optmem run: %s, %" PRIu64 " bytes", r.msg, r.bytes);
	note("%s: optmem_max 1024: %" PRIu64 " sendmsg calls, %" PRIu64 " ENOBUFS waits, %" PRIu64 " MiB validated",
	     st.nobufs_waits ? "PASS" : "note (the kernel never said ENOBUFS)",
	     st.sendmsg_calls, st.nobufs_waits, bytes >> 20);
}

static double gbps(uint64_t bytes, double secs)
{
	return secs > 0 ? (double)bytes * 8 / secs / 1e9 : 0;
}

int main(int argc, char **argv)
{
	struct targs a;
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf;
	struct devmemtcp_binding *b;
	struct sender s;
	struct rx_result r;
	struct rx_proc rp;
	uint64_t thr_bytes;
	int fd;

	parse_args(&a, argc, argv, 64ull << 20, 5301);
	thr_bytes = a.bytes * 4;
	enter_ns(a.tx_ns);
	ctx = new_ctx();
	buf = new_udmabuf(ctx, (uint64_t)SLOT * NSLOTS);
	b = bind_tx_or_explain(ctx, a.tx_if, buf);
	{
		const struct rx_spec specs[] = {
			{ RX_DEVMEM, true, a.port },
			{ RX_DEVMEM, true, a.port + 3 },
			{ RX_DEVMEM, false, a.port + 1 },
			{ RX_PLAIN, false, a.port + 2 },
		};

		rp = start_receiver(&a, specs, a.quick ? 2 : 4);
	}

	/* 1. validated transfer */
	fd = connect_to(a.rx_addr, a.port, a.tx_if);
	sender_open(&s, ctx, fd, b, SLOT, NSLOTS, PIECES_PER_SLOT, 0);
	devmem_stream(&s, buf, a.bytes, true);
	sender_close(&s);
	close(fd);
	r = receiver_result(&rp);
	note("receiver: %" PRIu64 " bytes (%" PRIu64 " in %" PRIu64 " dma-buf fragments, %" PRIu64 " linear), %" PRIu64 " tokens returned, %s",
	     r.bytes, r.dmabuf_bytes, r.frags, r.linear_bytes,
	     r.tokens_released, r.ok ? "every byte valid" : r.msg);
	if (!r.ok)
		fail("validation: %s", r.msg);
	if (r.bytes != a.bytes)
		fail("received %" PRIu64 " of %" PRIu64 " bytes", r.bytes, a.bytes);
	if (r.dmabuf_bytes < a.bytes / 2)
		fail("only %" PRIu64 " of %" PRIu64 " bytes landed in the dma-buf: steering?",
		     r.dmabuf_bytes, a.bytes);
	note("PASS: %" PRIu64 " MiB devmem TX -> devmem RX validated, every completion received, no range free before its ACK",
	     a.bytes >> 20);

	optmem_phase(&a, ctx, buf, b, &rp);

	if (!a.quick) {
		/* 2. throughput: devmem TX -> devmem RX, no validation */
		double tx_s, rx_dev, rx_plain;
		uint8_t *plain = malloc(SLOT);
		uint64_t left;

		fd = connect_to(a.rx_addr, a.port + 1, a.tx_if);
		sender_open(&s, ctx, fd, b, SLOT, NSLOTS, PIECES_PER_SLOT, 0);
		tx_s = devmem_stream(&s, buf, thr_bytes, false);
		sender_close(&s);
		close(fd);
		r = receiver_result(&rp);
		if (!r.ok || r.bytes != thr_bytes)
			fail("throughput run (devmem): %s, %" PRIu64 " bytes",
			     r.msg, r.bytes);
		rx_dev = r.secs;
		/* 3. plain TCP over the same pair */
		pattern_fill(plain, SLOT, 0, PERIOD);
		fd = connect_to(a.rx_addr, a.port + 2, a.tx_if);
		for (left = thr_bytes; left;) {
			ssize_t n = send(fd, plain, left < SLOT ? left : SLOT, 0);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				fail("plain send: %s", strerror(errno));
			left -= (uint64_t)n;
		}
		close(fd);
		r = receiver_result(&rp);
		if (!r.ok || r.bytes != thr_bytes)
			fail("throughput run (plain): %s, %" PRIu64 " bytes",
			     r.msg, r.bytes);
		rx_plain = r.secs;
		note("THROUGHPUT (guest, %" PRIu64 " MiB each, receiver clock): devmem TX->devmem RX %.2f Gbit/s (sender incl. last completion %.2f Gbit/s); plain TCP %.2f Gbit/s",
		     thr_bytes >> 20, gbps(thr_bytes, rx_dev),
		     gbps(thr_bytes, tx_s), gbps(thr_bytes, rx_plain));
		free(plain);
	}
	receiver_wait(&rp);
	devmemtcp_binding_close(b);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	return 0;
}

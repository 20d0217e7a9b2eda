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
#define SLOT (1u << 20)
#define NSLOTS 16
#define PIECES_PER_SLOT 4

/* Stream [0, total) through the ring; write the pattern when validating.
 * The seconds it took in *secs unless NULL. */
static int devmem_stream(struct sender *s, struct devmemtcp_buf *buf,
			 uint64_t total, bool write_pattern, double *secs)
{
	static uint8_t stage[SLOT];
	uint64_t pos = 0;
	double t0 = t_now();

	for (size_t k = 0; pos < total; k = (k + 1) % NSLOTS) {
		struct slot *sl = &s->slots[k];
		uint64_t n = total - pos < SLOT ? total - pos : SLOT;
		uint64_t piece = (n + PIECES_PER_SLOT - 1) / PIECES_PER_SLOT;

		T_TRY(sender_claim(s, k));
		if (write_pattern) {
			pattern_fill(stage, n, pos, PERIOD);
			T_CHECK(!devmemtcp_buf_write(buf, (uint64_t)k * SLOT, stage, n),
				"buf_write: %s", devmemtcp_buf_errmsg(buf));
		}
		sl->npieces = 0;
		for (uint64_t o = 0; o < n; o += piece) {
			uint64_t len = n - o < piece ? n - o : piece;

			sl->pieces[sl->npieces++] = (struct slot_piece){
				(uint64_t)k * SLOT + o, len, pos + o };
		}
		T_TRY(sender_send(s, k));
		pos += n;
	}
	T_TRY(sender_finish(s, total));
	if (secs)
		*secs = t_now() - t0;
	return 0;
}

/* A connection to the receiver's next port, total bytes through the ring
 * on it (max_call_bytes call_bytes), the sender's stats in *st. */
static int devmem_connection(struct tx_test *t, int port, uint64_t total, bool validate,
			     uint64_t call_bytes, double *secs, struct devmemtcp_tx_stats *st)
{
	struct sender s;
	int fd = t_connect(t->a.rx_addr, port, t->a.tx_if), r;

	T_CHECK(fd >= 0, "connect");
	r = sender_open(&s, t->ctx, fd, t->b, SLOT, NSLOTS, PIECES_PER_SLOT, call_bytes);
	if (!r)
		r = devmem_stream(&s, t->buf, total, validate, secs);
	if (!r && st)
		devmemtcp_tx_stats(s.tx, st);
	sender_close(&s);
	close(fd);
	return r;
}

/* The receiver's next result: every one of bytes as expected. */
static int received_all(struct rx_proc *rp, uint64_t bytes, const char *what,
			struct rx_result *r)
{
	T_TRY(rx_next(rp, r));
	T_CHECK(r->ok && r->bytes == bytes, "%s: %s, %" PRIu64 " bytes", what, r->msg, r->bytes);
	return 0;
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	return !f || fputs(text, f) < 0 || fclose(f) ? -1 : 0;
}

/*
 * 1b. The socket's option memory holds one notification skb per sendmsg in
 * flight; with net.core.optmem_max tiny, sendmsg fails with ENOBUFS and
 * devmemtcp_tx_send must wait for completions and go on.  16 MiB in 16 KiB
 * calls, validated.
 */
static int optmem_phase(struct tx_test *t, struct rx_proc *rp)
{
	const char *path = "/proc/sys/net/core/optmem_max";
	DEVMEMTCP_OPTS(tx_stats, st);
	uint64_t bytes = 16ull << 20;
	struct sender s;
	struct rx_result r;
	char old[32] = "";
	FILE *f;
	int fd, ret;

	f = fopen(path, "r");
	T_CHECK(f && fgets(old, sizeof(old), f), "%s: %s", path, strerror(errno));
	fclose(f);
	fd = t_connect(t->a.rx_addr, t->a.port + 3, t->a.tx_if);
	T_CHECK(fd >= 0, "connect");
	/* the namespace's limit, read when the socket allocates */
	T_CHECK(!write_file(path, "1024\n"), "writing %s: %s", path, strerror(errno));
	ret = sender_open(&s, t->ctx, fd, t->b, SLOT, NSLOTS, PIECES_PER_SLOT, 16384);
	if (!ret)
		ret = devmem_stream(&s, t->buf, bytes, true, NULL);
	devmemtcp_tx_stats(s.tx, &st);
	sender_close(&s);
	close(fd);
	T_CHECK(!write_file(path, old), "restoring %s: %s", path, strerror(errno));
	T_TRY(ret);
	T_TRY(received_all(rp, bytes, "optmem run", &r));
	t_note("%s: optmem_max 1024: %" PRIu64 " sendmsg calls, %" PRIu64 " ENOBUFS waits, %" PRIu64 " MiB validated",
	       st.nobufs_waits ? "PASS" : "note (the kernel never said ENOBUFS)",
	       st.sendmsg_calls, st.nobufs_waits, bytes >> 20);
	return 0;
}

static double gbps(uint64_t bytes, double secs)
{
	return secs > 0 ? (double)bytes * 8 / secs / 1e9 : 0;
}

/* 3. plain TCP over the same pair */
static int plain_connection(struct tx_test *t, int port, uint64_t total)
{
	uint8_t *plain = malloc(SLOT);
	int fd = t_connect(t->a.rx_addr, port, t->a.tx_if);
	uint64_t left;

	T_CHECK(plain && fd >= 0, "connect");
	pattern_fill(plain, SLOT, 0, PERIOD);
	for (left = total; left;) {
		ssize_t n = send(fd, plain, left < SLOT ? left : SLOT, 0);

		if (n < 0 && errno == EINTR)
			continue;
		T_CHECK(n > 0, "plain send: %s", strerror(errno));
		left -= (uint64_t)n;
	}
	close(fd);
	free(plain);
	return 0;
}

/* 2. throughput: devmem TX -> devmem RX and plain TCP, no validation */
static int throughput(struct tx_test *t, struct rx_proc *rp)
{
	uint64_t bytes = t->a.bytes * 4;
	double tx_s, rx_dev;
	struct rx_result r;

	T_TRY(devmem_connection(t, t->a.port + 1, bytes, false, 0, &tx_s, NULL));
	T_TRY(received_all(rp, bytes, "throughput run (devmem)", &r));
	rx_dev = r.secs;
	T_TRY(plain_connection(t, t->a.port + 2, bytes));
	T_TRY(received_all(rp, bytes, "throughput run (plain)", &r));
	t_note("THROUGHPUT (guest, %" PRIu64 " MiB each, receiver clock): devmem TX->devmem RX %.2f Gbit/s (sender incl. last completion %.2f Gbit/s); plain TCP %.2f Gbit/s",
	       bytes >> 20, gbps(bytes, rx_dev), gbps(bytes, tx_s), gbps(bytes, r.secs));
	return 0;
}

static int run(struct tx_test *t)
{
	const struct rx_spec specs[] = {
		{ RX_DEVMEM, true, t->a.port },
		{ RX_DEVMEM, true, t->a.port + 3 },
		{ RX_DEVMEM, false, t->a.port + 1 },
		{ RX_PLAIN, false, t->a.port + 2 },
	};
	struct rx_result r;
	struct rx_proc rp;

	T_TRY(rx_start(&t->a, specs, t->a.quick ? 2 : 4, &rp));

	/* 1. validated transfer */
	T_TRY(devmem_connection(t, t->a.port, t->a.bytes, true, 0, NULL, NULL));
	T_TRY(rx_next(&rp, &r));
	t_note("receiver: %" PRIu64 " bytes (%" PRIu64 " in %" PRIu64 " dma-buf fragments, %" PRIu64 " linear), %" PRIu64 " tokens returned, %s",
	       r.bytes, r.dmabuf_bytes, r.frags, r.linear_bytes,
	       r.tokens_released, r.ok ? "every byte valid" : r.msg);
	T_CHECK(r.ok, "validation: %s", r.msg);
	T_CHECK(r.bytes == t->a.bytes, "received %" PRIu64 " of %" PRIu64 " bytes", r.bytes, t->a.bytes);
	T_CHECK(r.dmabuf_bytes >= t->a.bytes / 2,
		"only %" PRIu64 " of %" PRIu64 " bytes landed in the dma-buf: steering?",
		r.dmabuf_bytes, t->a.bytes);
	t_note("PASS: %" PRIu64 " MiB devmem TX -> devmem RX validated, every completion received, no range free before its ACK",
	       t->a.bytes >> 20);

	T_TRY(optmem_phase(t, &rp));
	if (!t->a.quick)
		T_TRY(throughput(t, &rp));
	return rx_wait(&rp);
}

int main(int argc, char **argv)
{
	static const struct tx_desc d = { 64ull << 20, 5301, (uint64_t)SLOT * NSLOTS, run };

	return tx_main(argc, argv, &d);
}

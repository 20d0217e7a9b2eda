// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm test 3: devmem TX from a udmabuf to an ordinary receiver (a plain
 * socket on the peer, no header split, no binding): the bytes arrive
 * intact.  Pieces start at odd offsets so that every packet straddles
 * net_iov (page) boundaries.
 */
#include "test-tx-common.h"

#define SLOT (1u << 20)
#define NSLOTS 8

int main(int argc, char **argv)
{
	struct targs a;
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf;
	struct devmemtcp_binding *b;
	struct sender s;
	struct rx_result r;
	struct rx_proc rp;
	uint8_t *stage = malloc(SLOT);
	uint64_t pos = 0;
	int fd;

	parse_args(&a, argc, argv, 16ull << 20, 5321);
	enter_ns(a.tx_ns);
	ctx = new_ctx();
	buf = new_udmabuf(ctx, (uint64_t)SLOT * NSLOTS);
	b = bind_tx_or_explain(ctx, a.tx_if, buf);
	{
		const struct rx_spec spec = { RX_PLAIN, true, a.port };

		rp = start_receiver(&a, &spec, 1);
	}
	fd = connect_to(a.rx_addr, a.port, a.tx_if);
	sender_open(&s, ctx, fd, b, SLOT, NSLOTS, 16, 0);
	for (size_t k = 0; pos < a.bytes; k = (k + 1) % NSLOTS) {
		struct slot *sl = &s.slots[k];
		uint64_t base = (uint64_t)k * SLOT, cur = base + 17;

		sender_claim(&s, k);
		memset(stage, 0xee, SLOT);
		sl->npieces = 0;
		/* 9 pieces of 100000 bytes with 13-byte gaps */
		while (sl->npieces < 9 && pos < a.bytes) {
			uint64_t len = a.bytes - pos < 100000 ? a.bytes - pos : 100000;

			pattern_fill(stage + (cur - base), len, pos, PERIOD);
			sl->pieces[sl->npieces++] =
				(struct slot_piece){ cur, len, pos };
			pos += len;
			cur += len + 13;
		}
		if (devmemtcp_buf_write(buf, base, stage, SLOT))
			fail("buf_write: %s", devmemtcp_buf_errmsg(buf));
		sender_send(&s, k);
	}
	sender_finish(&s, a.bytes);
	sender_close(&s);
	close(fd);
	r = receiver_result(&rp);
	receiver_wait(&rp);
	note("plain receiver: %" PRIu64 " bytes, %s", r.bytes,
	     r.ok ? "every byte valid" : r.msg);
	if (!r.ok)
		fail("validation: %s", r.msg);
	if (r.bytes != a.bytes)
		fail("received %" PRIu64 " of %" PRIu64 " bytes", r.bytes, a.bytes);
	note("PASS: %" PRIu64 " MiB from a udmabuf to an ordinary receiver, intact",
	     a.bytes >> 20);
	devmemtcp_binding_close(b);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	free(stage);
	return 0;
}

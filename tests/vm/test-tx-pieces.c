// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm test 2: many small pieces per send, like ncdevmem -z: unaligned
 * offsets, gaps between pieces (filled with poison the receiver would
 * notice), pieces crossing page boundaries, 1-byte and 3-byte pieces, and
 * sends of more than 1024 pieces (split by the library).  The receiver
 * (library devmem RX) checks every byte of the stream.
 */
#include "test-tx-common.h"

#define SLOT (256u << 10)
#define NSLOTS 16
#define MAX_PIECES 4096

static uint32_t rnd_state = 12345;

static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = { 1, 3, 7, 100, 1448, 4095, 4096, 4097,
					  9000, 20000 };
	struct targs a;
	struct devmemtcp_ctx *ctx;
	struct devmemtcp_buf *buf;
	struct devmemtcp_binding *b;
	struct sender s;
	struct rx_result r;
	struct rx_proc rp;
	uint8_t *stage = malloc(SLOT);
	uint64_t pos = 0, npieces = 0, crossing = 0, unaligned = 0, big = 0;
	int fd;

	parse_args(&a, argc, argv, 8ull << 20, 5311);
	enter_ns(a.tx_ns);
	ctx = new_ctx();
	buf = new_udmabuf(ctx, (uint64_t)SLOT * NSLOTS);
	b = bind_tx_or_explain(ctx, a.tx_if, buf);
	{
		const struct rx_spec spec = { RX_DEVMEM, true, a.port };

		rp = start_receiver(&a, &spec, 1);
	}
	fd = connect_to(a.rx_addr, a.port, a.tx_if);
	sender_open(&s, ctx, fd, b, SLOT, NSLOTS, MAX_PIECES, 0);
	for (size_t k = 0, round = 0; pos < a.bytes; k = (k + 1) % NSLOTS, round++) {
		struct slot *sl = &s.slots[k];
		uint64_t base = (uint64_t)k * SLOT, cur = base + rnd() % 61;
		bool tiny = round % 4 == 1;	/* 3-byte pieces, > 1024 per send */
		bool ones = round % 4 == 3;	/* 1-byte pieces */

		sender_claim(&s, k);
		memset(stage, 0xee, SLOT);	/* poison in the gaps */
		sl->npieces = 0;
		while (sl->npieces < MAX_PIECES && pos < a.bytes) {
			uint64_t len = tiny ? 3 : ones ? 1 : sizes[rnd() % 10];
			uint64_t gap = tiny || ones ? 1 + rnd() % 2
						    : (rnd() % 3 ? rnd() % 300 : 0);

			if (len > a.bytes - pos)
				len = a.bytes - pos;
			if (cur + len > base + SLOT)
				break;
			pattern_fill(stage + (cur - base), len, pos, PERIOD);
			sl->pieces[sl->npieces++] =
				(struct slot_piece){ cur, len, pos };
			crossing += cur / 4096 != (cur + len - 1) / 4096;
			unaligned += cur % 4096 != 0;
			pos += len;
			cur += len + gap;
		}
		if (sl->npieces > 1024)
			big++;
		npieces += sl->npieces;
		if (devmemtcp_buf_write(buf, base, stage, SLOT))
			fail("buf_write: %s", devmemtcp_buf_errmsg(buf));
		sender_send(&s, k);
	}
	sender_finish(&s, a.bytes);
	sender_close(&s);
	close(fd);
	r = receiver_result(&rp);
	receiver_wait(&rp);
	note("%" PRIu64 " pieces (%" PRIu64 " unaligned, %" PRIu64 " crossing a page, %" PRIu64 " sends of > 1024 pieces); receiver: %" PRIu64 " bytes, %" PRIu64 " dma-buf fragments, %" PRIu64 " linear bytes, %s",
	     npieces, unaligned, crossing, big, r.bytes, r.frags,
	     r.linear_bytes, r.ok ? "every byte valid" : r.msg);
	if (!r.ok)
		fail("validation: %s", r.msg);
	if (r.bytes != a.bytes)
		fail("received %" PRIu64 " of %" PRIu64 " bytes", r.bytes, a.bytes);
	if (!big || !crossing || !unaligned)
		fail("the piece generator did not cover every case");
	note("PASS: %" PRIu64 " small pieces sent and validated", npieces);
	devmemtcp_binding_close(b);
	devmemtcp_buf_free(buf);
	devmemtcp_ctx_free(ctx);
	free(stage);
	return 0;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm test 2: many small pieces per send, like ncdevmem -z: unaligned
 * offsets, gaps between pieces (filled with poison the receiver would
 * notice), pieces crossing page boundaries, 1-byte and 3-byte pieces, and
 * sends of more than 1024 pieces (split by the library).  The receiver
 * (library devmem RX) checks every byte of the stream.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "harness-tx.h"
#include "pattern.h"

#define PERIOD PATTERN_PERIOD_DEFAULT
#define SLOT (256u << 10)
#define NSLOTS 16
#define MAX_PIECES 4096

static uint32_t rnd_state = 12345;

static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

/* What the piece generator made. */
struct made {
	uint64_t npieces, crossing, unaligned, big;
	size_t round;
};

/* tx_fill_fn: the kind of pieces changes with every slot filled. */
static void make_pieces(struct slot *sl, size_t k, uint8_t *stage, uint64_t *pos,
			uint64_t total, void *arg)
{
	static const uint32_t sizes[] = { 1, 3, 7, 100, 1448, 4095, 4096, 4097,
					  9000, 20000 };
	struct made *m = arg;
	uint64_t base = (uint64_t)k * SLOT, cur = base + rnd() % 61;
	bool tiny = m->round % 4 == 1;	/* 3-byte pieces, > 1024 per send */
	bool ones = m->round % 4 == 3;	/* 1-byte pieces */

	m->round++;
	memset(stage, 0xee, SLOT);	/* poison in the gaps */
	sl->npieces = 0;
	while (sl->npieces < MAX_PIECES && *pos < total) {
		uint64_t len = tiny ? 3 : ones ? 1 : sizes[rnd() % 10];
		uint64_t gap = tiny || ones ? 1 + rnd() % 2
					    : (rnd() % 3 ? rnd() % 300 : 0);

		if (len > total - *pos)
			len = total - *pos;
		if (cur + len > base + SLOT)
			break;
		pattern_fill(stage + (cur - base), len, *pos, PERIOD);
		sl->pieces[sl->npieces++] = (struct slot_piece){ cur, len, *pos };
		m->crossing += cur / 4096 != (cur + len - 1) / 4096;
		m->unaligned += cur % 4096 != 0;
		*pos += len;
		cur += len + gap;
	}
	if (sl->npieces > 1024)
		m->big++;
	m->npieces += sl->npieces;
}

static int run(struct tx_test *t)
{
	const struct rx_spec spec = { RX_DEVMEM, true, t->a.port };
	struct made m = { 0 };
	struct rx_result r;

	T_TRY(tx_ring_transfer(t, &spec, SLOT, NSLOTS, MAX_PIECES, make_pieces, &m, &r));
	t_note("%" PRIu64 " pieces (%" PRIu64 " unaligned, %" PRIu64 " crossing a page, %" PRIu64 " sends of > 1024 pieces); receiver: %" PRIu64 " bytes, %" PRIu64 " dma-buf fragments, %" PRIu64 " linear bytes, %s",
	       m.npieces, m.unaligned, m.crossing, m.big, r.bytes, r.frags,
	       r.linear_bytes, r.ok ? "every byte valid" : r.msg);
	T_CHECK(r.ok, "validation: %s", r.msg);
	T_CHECK(r.bytes == t->a.bytes, "received %" PRIu64 " of %" PRIu64 " bytes", r.bytes, t->a.bytes);
	T_CHECK(m.big && m.crossing && m.unaligned, "the piece generator did not cover every case");
	t_note("PASS: %" PRIu64 " small pieces sent and validated", m.npieces);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct tx_desc d = { 8ull << 20, 5311, (uint64_t)SLOT * NSLOTS, run };

	return tx_main(argc, argv, &d);
}

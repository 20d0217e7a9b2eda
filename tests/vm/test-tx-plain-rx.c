// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm test 3: devmem TX from a udmabuf to an ordinary receiver (a plain
 * socket on the peer, no header split, no binding): the bytes arrive
 * intact.  Pieces start at odd offsets so that every packet straddles
 * net_iov (page) boundaries.
 */
#include <inttypes.h>

#include "harness-tx.h"

#define SLOT (1u << 20)
#define NSLOTS 8

static int run(struct tx_test *t)
{
	const struct rx_spec spec = { RX_PLAIN, true, t->a.port };
	/* 9 pieces of 100000 bytes with 13-byte gaps, from offset 17 */
	struct tx_spaced sp = { SLOT, 17, 100000, 13, 9 };
	struct rx_result r;

	T_TRY(tx_ring_transfer(t, &spec, SLOT, NSLOTS, 16, tx_fill_spaced, &sp, &r));
	t_note("plain receiver: %" PRIu64 " bytes, %s", r.bytes,
	       r.ok ? "every byte valid" : r.msg);
	T_CHECK(r.ok, "validation: %s", r.msg);
	T_CHECK(r.bytes == t->a.bytes, "received %" PRIu64 " of %" PRIu64 " bytes", r.bytes, t->a.bytes);
	t_note("PASS: %" PRIu64 " MiB from a udmabuf to an ordinary receiver, intact",
	       t->a.bytes >> 20);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct tx_desc d = { 16ull << 20, 5321, (uint64_t)SLOT * NSLOTS, run };

	return tx_main(argc, argv, &d);
}

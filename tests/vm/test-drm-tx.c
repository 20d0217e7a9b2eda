// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * vm test (generic kernel, vgem): devmem TX from a DRM buffer, a vgem dumb
 * buffer made by DEVMEMTCP_PROVIDER_DRM, to an ordinary receiver (a plain
 * socket on the peer): every byte arrives intact.  Before sending, the
 * dma-buf is checked to be a PRIME export of the DRM core ("exp_name: drm"
 * in its fdinfo) named after vgem by the library.  Pieces start at odd
 * offsets so that packets straddle page boundaries of the GEM object.
 * test-drm.sh checks both NICs are as they were afterwards.
 */
#include <inttypes.h>
#include <string.h>

#include "harness-tx.h"

#define SLOT (1u << 20)
#define NSLOTS 8

/* The buffer is vgem's: a DRM PRIME export the library named. */
static int check_exporter(struct devmemtcp_buf *buf)
{
	char v[64];
	int fd = devmemtcp_buf_fd(buf);

	T_CHECK(devmemtcp_buf_provider(buf) == DEVMEMTCP_PROVIDER_DRM, "provider %d",
		devmemtcp_buf_provider(buf));
	T_CHECK(t_fdinfo(fd, "exp_name", v, sizeof(v)) == 0 && !strcmp(v, "drm"),
		"dma-buf fd %d: exp_name is not drm", fd);
	T_CHECK(t_fdinfo(fd, "name", v, sizeof(v)) == 0 && !strcmp(v, "devmemtcp:vgem"),
		"dma-buf fd %d: name is not devmemtcp:vgem", fd);
	return 0;
}

static int run(struct tx_test *t)
{
	const struct rx_spec spec = { RX_PLAIN, true, t->a.port };
	/* 15 pieces of 65521 bytes (prime) with 7-byte gaps, from offset 11 */
	struct tx_spaced sp = { SLOT, 11, 65521, 7, 15 };
	struct rx_result r;

	T_TRY(check_exporter(t->buf));
	T_TRY(tx_ring_transfer(t, &spec, SLOT, NSLOTS, 16, tx_fill_spaced, &sp, &r));
	t_note("plain receiver: %" PRIu64 " bytes, %s", r.bytes,
	       r.ok ? "every byte valid" : r.msg);
	T_CHECK(r.ok, "validation: %s", r.msg);
	T_CHECK(r.bytes == t->a.bytes, "received %" PRIu64 " of %" PRIu64 " bytes", r.bytes,
		t->a.bytes);
	t_note("PASS: %" PRIu64 " MiB from a vgem buffer to an ordinary receiver, intact",
	       t->a.bytes >> 20);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct tx_desc d = { 32ull << 20, 5331, (uint64_t)SLOT * NSLOTS, run,
					  DEVMEMTCP_PROVIDER_DRM };

	return tx_main(argc, argv, &d);
}

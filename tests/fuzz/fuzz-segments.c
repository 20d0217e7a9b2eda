// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The segment table (dmt_buf_set_segments, dmt_segments_find,
 * devmemtcp_buf_addr) against a linear scan.  Input: the buffer size, up
 * to 64 segments {offset, len, addr}, then offsets to look up.  Segment
 * fields are small multiples of a unit the input picks, so that tables
 * are accepted often and lookups land on boundaries.
 */
#include <errno.h>

#include "buf.h"
#include "fuzz.h"

static uint64_t scaled(struct fz *f, uint64_t unit)
{
	uint8_t b = fz_u8(f);

	/* mostly small multiples of the unit, sometimes anything */
	return b < 240 ? (uint64_t)b * unit : fz_u64(f);
}

/* Index of the segment holding off, by looking at every one. */
static long linear_find(const struct devmemtcp_segment *s, size_t n,
			uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (off >= s[i].offset && off - s[i].offset < s[i].len)
			return (long)i;
	return -1;
}

static void check_table(const struct devmemtcp_buf *buf)
{
	for (size_t i = 0; i < buf->nsegs; i++) {
		const struct devmemtcp_segment *s = &buf->segs[i];

		FZ_CHECK(s->len && s->offset < buf->size &&
			 s->len <= buf->size - s->offset);
		FZ_CHECK(s->addr + s->len >= s->addr);
		if (i)
			FZ_CHECK(buf->segs[i - 1].offset + buf->segs[i - 1].len <=
				 s->offset);
	}
}

static void lookup(const struct devmemtcp_buf *buf, uint64_t off)
{
	long want = linear_find(buf->segs, buf->nsegs, off);
	uint64_t addr = 0xdead;
	int ret;

	FZ_CHECK(dmt_segments_find(buf->segs, buf->nsegs, off) == want);
	ret = devmemtcp_buf_addr(buf, off, &addr);
	if (want < 0) {
		FZ_CHECK(ret == -ERANGE);
	} else {
		FZ_CHECK(ret == 0);
		FZ_CHECK(addr == buf->segs[want].addr +
					 (off - buf->segs[want].offset));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = fz_init(data, size);
	struct devmemtcp_segment segs[64];
	struct devmemtcp_buf *buf;
	uint64_t unit = 1ull << (fz_u8(&f) % 40);
	size_t n = fz_u8(&f) % (ARRAY_SIZE(segs) + 1);
	int ret;

	if (dmt_buf_alloc(fz_ctx(), DEVMEMTCP_PROVIDER_IMPORT, &buf))
		abort();
	buf->size = scaled(&f, unit);
	for (size_t i = 0; i < n; i++) {
		segs[i].offset = scaled(&f, unit);
		segs[i].len = scaled(&f, unit);
		segs[i].addr = scaled(&f, unit);
	}
	ret = dmt_buf_set_segments(buf, segs, n);
	FZ_CHECK(ret == 0 || ret == -EINVAL);
	if (ret == 0) {
		FZ_CHECK(buf->nsegs == n);
		check_table(buf);
		/* every boundary and its neighbours, then the input's offsets */
		for (size_t i = 0; i < n; i++) {
			uint64_t o = buf->segs[i].offset, e = o + buf->segs[i].len;

			lookup(buf, o);
			lookup(buf, o - 1);
			lookup(buf, e - 1);
			lookup(buf, e);
		}
		while (fz_left(&f))
			lookup(buf, scaled(&f, unit));
	} else {
		FZ_CHECK(buf->nsegs == 0 && !buf->segs);
	}
	devmemtcp_buf_free(buf);
	return 0;
}

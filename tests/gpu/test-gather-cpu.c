// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The CPU side of a gather (suite unit, no GPU): the descriptors and
 * destination tables that dmt_gather_build writes, executed here on host
 * memory exactly as the kernel reads them, must put every byte where the
 * reference copy does, for random fragment sets, holes, destination cuts
 * and batch limits, and for buffers whose segment table maps neighbouring
 * dma-buf offsets to distant device addresses (a fragment crossing such a
 * boundary is two runs of device memory, never one).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "gather_index.h"
#include "gpu.h"

/* Fake device address spaces backed by host memory. */
#define SRC_BASE 0x100000000ull
#define SRC_SIZE (1u << 20)
#define DST_BASE 0x900000000ull
#define DST_SIZE (8u << 20)
#define POISON 0xa5

static uint8_t *src_mem, *dst_mem, *want;
static uint8_t *hits;	/* times each destination byte was written */
static uint64_t hits_lo, hits_hi;	/* the part of it touched */
static struct devmemtcp_ctx *ctx;
static struct dmt_err err;
static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t rnd_range(uint64_t lo, uint64_t hi)	/* [lo, hi] */
{
	return lo + rnd() % (hi - lo + 1);
}

static void quiet(void *user, int level, const char *msg)
{
}

static int setup(void **state)
{
	DEVMEMTCP_OPTS(ctx_opts, o, .log_fn = quiet);

	src_mem = malloc(SRC_SIZE);
	dst_mem = malloc(DST_SIZE);
	want = malloc(DST_SIZE);
	hits = calloc(1, DST_SIZE);
	if (!src_mem || !dst_mem || !want || !hits)
		return -1;
	for (size_t i = 0; i < SRC_SIZE; i++)
		src_mem[i] = (uint8_t)rnd();
	return devmemtcp_ctx_new(&o, &ctx);
}

static int teardown(void **state)
{
	free(src_mem);
	free(dst_mem);
	free(want);
	free(hits);
	devmemtcp_ctx_free(ctx);
	return 0;
}

static uint64_t out_addr(const struct dmt_gather_batch *b, uint32_t pos)
{
	return dmt_out_addr(b->dst, b->ndst, b->dst[0].bias, pos);
}

static void copy(uint64_t from, uint64_t to, uint64_t len)
{
	assert_true(from >= SRC_BASE && from + len <= SRC_BASE + SRC_SIZE);
	assert_true(to >= DST_BASE && to + len <= DST_BASE + DST_SIZE);
	memcpy(dst_mem + (to - DST_BASE), src_mem + (from - SRC_BASE), len);
	for (uint64_t k = 0; k < len; k++)
		hits[to - DST_BASE + k]++;
	if (to - DST_BASE < hits_lo)
		hits_lo = to - DST_BASE;
	if (to - DST_BASE + len > hits_hi)
		hits_hi = to - DST_BASE + len;
}

/* Slice part of split of descriptor e (16-byte multiples). */
static void copy_slice(const struct dmt_gather_batch *b,
		       const struct dmt_gather_desc *e, uint32_t split,
		       uint32_t part)
{
	uint64_t off;
	uint32_t len = dmt_slice(e->len, split, part, &off);

	if (len)
		copy(e->src + off, out_addr(b, e->pos) + off, len);
}

/* One block of a one-dimensional launch, as gather.cu's gather_block does
 * it: the descriptors its warps need are staged first (dmt_warp_range),
 * and every warp takes its own from what was staged. */
static void execute_block(const struct dmt_gather_batch *b,
			  const struct dmt_gather_geom *g, uint32_t vw0)
{
	uint32_t d0, d1;

	dmt_warp_range(vw0, g->wpb, b->nd, g->per, g->split, &d0, &d1);
	assert_true(d1 - d0 <= DMT_STAGE_MAX);
	for (uint32_t vw = vw0; vw < vw0 + g->wpb; vw++) {
		uint32_t first, part;
		uint32_t cnt = dmt_warp_share(vw, b->nd, g->per, g->split, &first, &part);

		if (cnt && g->split > 1) {
			assert_true(first >= d0 && first < d1);
			copy_slice(b, &b->desc[first], g->split, part);
			continue;
		}
		for (uint32_t k = first; k < first + cnt; k++) {
			assert_true(k >= d0 && k < d1);
			copy(b->desc[k].src, out_addr(b, b->desc[k].pos),
			     b->desc[k].len);
		}
	}
}

/*
 * What the kernel does with one launch, as gather.cu cuts it: block by
 * block of a one-dimensional grid (per descriptors a warp, or split warps
 * a descriptor in 16-byte multiples), or on the two-dimensional grid of an
 * inline launch that splits (warp w of block (x, y): slice y of descriptor
 * x * wpb + w), on host memory.
 */
static void execute(const struct dmt_gather_batch *b)
{
	static const uint32_t sms[] = { 1, 8, 132 };
	struct dmt_gather_geom g;
	uint32_t per = 0, split = 0;

	if (!b->nd)
		return;
	switch (rnd() % 4) {	/* the knobs of test builds, sometimes */
	case 0:
		split = (uint32_t)rnd_range(1, DMT_SPLIT_MAX);
		break;
	case 1:
		per = (uint32_t)rnd_range(1, 32);
		break;
	}
	dmt_gather_geometry(b->nd, b->bytes, sms[rnd() % 3], per, split, 0, &g);
	assert_true(g.per >= 1 && g.per <= 32);
	assert_true(g.split >= 1 && g.split <= DMT_SPLIT_MAX);
	assert_true(g.split == 1 || g.per == 1);
	assert_true(g.wpb >= 1 && g.wpb <= 8);
	assert_true((uint64_t)g.blocks * g.wpb >= g.warps);
	assert_int_equal(g.warps, (b->nd + g.per - 1) / g.per * g.split);
	assert_int_equal(g.gy, 1);
	assert_int_equal(g.gx, g.blocks);
	for (uint32_t k = 0; k < b->nd; k++) {
		assert_true(b->desc[k].len > 0);
		assert_true(b->desc[k].pos + (uint64_t)b->desc[k].len <= b->bytes);
	}
	if (rnd() % 3 == 0) {	/* from a slot */
		dmt_gather_geometry_staged(&g);
		assert_true(g.wpb >= (g.split < 8 ? g.split : 8));
		assert_true((uint64_t)g.blocks * g.wpb >= g.warps);
	} else if (rnd() % 2) {	/* as an inline launch */
		dmt_gather_geometry_2d(b->nd, &g);
		assert_int_equal(g.blocks, g.gx * g.gy);
		if (g.gy > 1) {
			assert_int_equal(g.gy, g.split);
			assert_true((uint64_t)g.gx * g.wpb >= b->nd);
			for (uint32_t x = 0; x < g.gx; x++)
				for (uint32_t y = 0; y < g.gy; y++)
					for (uint32_t w = 0; w < g.wpb; w++)
						if (x * g.wpb + w < b->nd)
							copy_slice(b, &b->desc[x * g.wpb + w],
								   g.split, y);
			return;
		}
	}
	for (uint32_t x = 0; x < g.gx; x++)
		execute_block(b, &g, x * g.wpb);
}

/* Linear bytes, when a gather places them: a staged copy of the linear
 * buffer at this fake device address (the source's upper half). */
#define LINEAR_BASE (SRC_BASE + SRC_SIZE / 2)
#define LINEAR_SIZE (SRC_SIZE / 2)

/* Gather batch after batch; returns the number of batches.  linear: the
 * linear fragments are placed from LINEAR_BASE (else holes). */
static int gather_cpu(const struct devmemtcp_frag *f, size_t n,
		      const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		      uint32_t max_desc, uint32_t max_dst, bool linear)
{
	struct dmt_gather_desc *desc = calloc(max_desc, sizeof(*desc));
	struct dmt_gather_dst *dst = calloc(max_dst, sizeof(*dst));
	struct dmt_gather_cursor cur = { 0 };
	int batches = 0;

	assert_non_null(desc);
	assert_non_null(dst);
	hits_lo = DST_SIZE;
	hits_hi = 0;
	while (cur.i < n) {
		struct dmt_gather_batch b = { .desc = desc, .dst = dst,
					      .max_desc = max_desc,
					      .max_dst = max_dst,
					      .linear = linear ? LINEAR_BASE : 0 };
		struct dmt_gather_cursor before = cur;

		assert_int_equal(dmt_gather_build(ctx, &err, f, n, dsts, ndst,
						  &cur, &b), 0);
		if (!batches)
			assert_int_equal(dmt_gather_check(ctx, &err, f, n, dsts,
							  ndst, &cur), 0);
		assert_true(b.nd <= max_desc);
		assert_true(b.ndst >= 1 && b.ndst <= max_dst);
		assert_true(b.bytes <= DMT_GATHER_POS_MAX);
		/* progress every time */
		assert_true(cur.i > before.i || cur.foff > before.foff);
		execute(&b);
		batches++;
	}
	for (uint64_t k = hits_lo; k < hits_hi; k++) {
		if (hits[k] > 1)
			fail_msg("destination byte %llu written %u times",
				 (unsigned long long)k, hits[k]);
		hits[k] = 0;
	}
	free(desc);
	free(dst);
	return batches;
}

/* Random fragments of the source, every 7th linear when holes. */
static uint64_t make_frags(struct devmemtcp_frag *f, size_t n, bool holes)
{
	uint64_t total = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t len;
		uint64_t off;

		switch (rnd() % 4) {
		case 0:
			len = 4096;
			break;
		case 1:
			len = 1448;
			break;
		case 2:
			len = (uint32_t)rnd_range(0, 64);
			break;
		default:
			len = (uint32_t)rnd_range(1, 20000);
		}
		off = rnd_range(0, SRC_SIZE - len);
		f[i] = (struct devmemtcp_frag){ .offset = off,
						.addr = SRC_BASE + off,
						.len = len, .token = (uint32_t)i };
		if (holes && i % 7 == 3)
			f[i] = (struct devmemtcp_frag){
				.offset = rnd_range(0, LINEAR_SIZE - len), .len = len,
				.flags = DEVMEMTCP_FRAG_LINEAR };
		total += len;
	}
	return total;
}

/* Destinations: total cut at random points, placed with random gaps. */
static size_t make_dsts(struct devmemtcp_gpu_iov *d, size_t max,
			uint64_t total, uint64_t spare)
{
	uint64_t at = 0, left = total + spare;
	size_t k = 0;

	for (; k + 1 < max && left; k++) {
		uint64_t len = rnd() % 3 ? rnd_range(0, left) : 0;

		at += rnd_range(0, 64);
		d[k] = (struct devmemtcp_gpu_iov){ DST_BASE + at, len };
		at += len;
		left -= len;
	}
	at += rnd_range(0, 64);
	d[k++] = (struct devmemtcp_gpu_iov){ DST_BASE + at, left };
	assert_true(at + left <= DST_SIZE);
	return k;
}

/* The reference: concatenate, cut into the destinations; holes keep the
 * poison, or take the linear bytes. */
static void reference(const struct devmemtcp_frag *f, size_t n,
		      const struct devmemtcp_gpu_iov *d, size_t ndst,
		      bool linear)
{
	size_t di = 0;
	uint64_t doff = 0;

	memset(want, POISON, DST_SIZE);
	for (size_t i = 0; i < n; i++) {
		for (uint32_t k = 0; k < f[i].len;) {
			uint64_t room, take;

			while (d[di].len == doff) {
				di++;
				doff = 0;
			}
			room = d[di].len - doff;
			take = f[i].len - k < room ? f[i].len - k : room;
			if (!(f[i].flags & DEVMEMTCP_FRAG_LINEAR))
				memcpy(want + (d[di].addr - DST_BASE) + doff,
				       src_mem + f[i].offset + k, take);
			else if (linear)
				memcpy(want + (d[di].addr - DST_BASE) + doff,
				       src_mem + (LINEAR_BASE - SRC_BASE) +
					       f[i].offset + k,
				       take);
			k += (uint32_t)take;
			doff += take;
		}
	}
}

static void run_case(size_t n, size_t maxdst, bool holes, uint32_t max_desc,
		     uint32_t max_dst, bool linear)
{
	struct devmemtcp_frag *f = calloc(n, sizeof(*f));
	struct devmemtcp_gpu_iov d[64];
	uint64_t total;
	size_t ndst;

	assert_non_null(f);
	assert_true(maxdst <= 64);
	total = make_frags(f, n, holes);
	ndst = make_dsts(d, maxdst, total, rnd() % 2 ? rnd_range(0, 5000) : 0);
	reference(f, n, d, ndst, linear);
	memset(dst_mem, POISON, DST_SIZE);
	gather_cpu(f, n, d, ndst, max_desc, max_dst, linear);
	if (memcmp(dst_mem, want, DST_SIZE)) {
		size_t bad = 0;

		while (dst_mem[bad] == want[bad])
			bad++;
		fail_msg("byte %zu differs (%zu frags, %zu dsts, max_desc %u, max_dst %u)",
			 bad, n, ndst, max_desc, max_dst);
	}
	free(f);
}

static void test_random_gathers(void **state)
{
	for (int r = 0; r < 300; r++) {
		size_t n = (size_t)rnd_range(1, 300);

		run_case(n, 1, r % 2, 1u << 18, DMT_GATHER_DST_MAX, false);
		run_case(n, (size_t)rnd_range(1, 64), r % 3 == 0, 1u << 18,
			 DMT_GATHER_DST_MAX, false);
		/* small batches: cuts at batch ends too */
		run_case(n, (size_t)rnd_range(1, 64), r % 2,
			 (uint32_t)rnd_range(1, 40), (uint32_t)rnd_range(1, 6),
			 false);
		/* linear fragments placed from their staged bytes */
		run_case(n, (size_t)rnd_range(1, 64), true,
			 r % 2 ? 1u << 18 : (uint32_t)rnd_range(1, 40),
			 r % 2 ? DMT_GATHER_DST_MAX : (uint32_t)rnd_range(1, 6),
			 true);
	}
}

/* One destination, whole fragments: one descriptor each, packed. */
static void test_descriptors_one_dst(void **state)
{
	const struct devmemtcp_frag f[] = {
		{ .addr = SRC_BASE + 0x1000, .len = 4096 },
		{ .len = 66, .flags = DEVMEMTCP_FRAG_LINEAR },
		{ .addr = SRC_BASE + 0x9000, .len = 0 },
		{ .addr = SRC_BASE + 0x5000, .len = 1448 },
	};
	const struct devmemtcp_gpu_iov dst = { DST_BASE + 100, 10000 };
	struct dmt_gather_desc desc[8];
	struct dmt_gather_dst dsts[2];
	struct dmt_gather_batch b = { desc, dsts, 8, 2 };
	struct dmt_gather_cursor cur = { 0 };

	assert_int_equal(dmt_gather_build(ctx, &err, f, 4, &dst, 1, &cur, &b), 0);
	assert_int_equal(cur.i, 4);
	assert_int_equal(b.nd, 2);
	assert_int_equal(b.ndst, 1);
	assert_int_equal(b.bytes, 4096 + 66 + 1448);
	assert_int_equal(dsts[0].start, 0);
	assert_int_equal(dsts[0].bias, DST_BASE + 100);
	assert_int_equal(desc[0].src, SRC_BASE + 0x1000);
	assert_int_equal(desc[0].len, 4096);
	assert_int_equal(desc[0].pos, 0);
	assert_int_equal(desc[1].src, SRC_BASE + 0x5000);
	assert_int_equal(desc[1].len, 1448);
	assert_int_equal(desc[1].pos, 4096 + 66);
}

/* With staged linear bytes, a linear fragment is a descriptor too, from
 * the staged copy at its offset; without, a hole. */
static void test_descriptors_linear(void **state)
{
	const struct devmemtcp_frag f[] = {
		{ .addr = SRC_BASE + 0x1000, .len = 4096 },
		{ .offset = 0, .len = 66, .flags = DEVMEMTCP_FRAG_LINEAR },
		{ .offset = 66, .len = 1000, .flags = DEVMEMTCP_FRAG_LINEAR },
		{ .addr = SRC_BASE + 0x5000, .len = 1448 },
	};
	const struct devmemtcp_gpu_iov dst[] = {
		{ DST_BASE + 100, 4096 + 500 },
		{ DST_BASE + 0x10000, 10000 },
	};
	struct dmt_gather_desc desc[8];
	struct dmt_gather_dst dsts[2];
	struct dmt_gather_batch b = { desc, dsts, 8, 2, .linear = LINEAR_BASE };
	struct dmt_gather_cursor cur = { 0 };

	(void)state;
	assert_int_equal(dmt_gather_build(ctx, &err, f, 4, dst, 2, &cur, &b), 0);
	assert_int_equal(cur.i, 4);
	assert_int_equal(b.nd, 5);
	assert_int_equal(b.ndst, 2);
	assert_int_equal(b.bytes, 4096 + 66 + 1000 + 1448);
	assert_int_equal(desc[1].src, LINEAR_BASE);
	assert_int_equal(desc[1].len, 66);
	assert_int_equal(desc[1].pos, 4096);
	/* the second linear fragment straddles the destinations */
	assert_int_equal(desc[2].src, LINEAR_BASE + 66);
	assert_int_equal(desc[2].len, 500 - 66);
	assert_int_equal(desc[2].pos, 4096 + 66);
	assert_int_equal(desc[3].src, LINEAR_BASE + 500);
	assert_int_equal(desc[3].len, 1066 - 500);
	assert_int_equal(desc[3].pos, 4096 + 500);
	assert_int_equal(dsts[1].start, 4096 + 500);
	assert_int_equal(desc[4].src, SRC_BASE + 0x5000);
	/* no staged bytes: holes */
	cur = (struct dmt_gather_cursor){ 0 };
	b = (struct dmt_gather_batch){ desc, dsts, 8, 2 };
	assert_int_equal(dmt_gather_build(ctx, &err, f, 4, dst, 2, &cur, &b), 0);
	assert_int_equal(b.nd, 2);
}

/* A fragment straddling two destinations becomes two descriptors. */
static void test_descriptors_cut_at_destination(void **state)
{
	const struct devmemtcp_frag f[] = {
		{ .addr = SRC_BASE + 0x1000, .len = 4096 },
	};
	const struct devmemtcp_gpu_iov dst[] = {
		{ DST_BASE + 0x10000, 1000 },
		{ DST_BASE + 0x20000, 0 },
		{ DST_BASE + 0x30000, 5000 },
	};
	struct dmt_gather_desc desc[8];
	struct dmt_gather_dst dsts[4];
	struct dmt_gather_batch b = { desc, dsts, 8, 4 };
	struct dmt_gather_cursor cur = { 0 };

	assert_int_equal(dmt_gather_build(ctx, &err, f, 1, dst, 3, &cur, &b), 0);
	assert_int_equal(b.nd, 2);
	assert_int_equal(b.ndst, 2);
	assert_int_equal(desc[0].src, SRC_BASE + 0x1000);
	assert_int_equal(desc[0].len, 1000);
	assert_int_equal(desc[0].pos, 0);
	assert_int_equal(desc[1].src, SRC_BASE + 0x1000 + 1000);
	assert_int_equal(desc[1].len, 3096);
	assert_int_equal(desc[1].pos, 1000);
	assert_int_equal(dsts[0].bias, DST_BASE + 0x10000);
	assert_int_equal(dsts[1].start, 1000);
	assert_int_equal(dsts[1].bias + 1000, DST_BASE + 0x30000);
}

static void test_errors(void **state)
{
	struct devmemtcp_frag f[] = {
		{ .addr = SRC_BASE, .len = 10 },
		{ .addr = 0, .offset = 0x3000, .len = 10, .binding_id = 4 },
	};
	const struct devmemtcp_gpu_iov dst = { DST_BASE, 19 };
	const struct devmemtcp_gpu_iov big = { DST_BASE, 100 };
	struct dmt_gather_desc desc[1];
	struct dmt_gather_dst dsts[1];
	struct dmt_gather_batch b = { desc, dsts, 1, 1 };
	struct dmt_gather_cursor cur = { 0 };

	assert_int_equal(dmt_gather_build(ctx, &err, f, 2, &big, 1, &cur, &b),
			 0);	/* batch full after the first: not reached */
	assert_int_equal(cur.i, 1);
	assert_int_equal(dmt_gather_check(ctx, &err, f, 2, &big, 1, &cur),
			 -EINVAL);
	assert_string_equal(err.msg,
			    "fragment 1 (binding 4, offset 0x3000) has no device address: register its binding's buffer with devmemtcp_rx_add_buf");
	f[1].addr = SRC_BASE + 0x3000;
	assert_int_equal(dmt_gather_check(ctx, &err, f, 2, &dst, 1, &cur),
			 -ENOSPC);
	assert_string_equal(err.msg,
			    "the fragments hold 20 bytes but the destinations only 19: give more room");
	cur = (struct dmt_gather_cursor){ 0 };
	b.max_desc = 1;
	assert_int_equal(dmt_gather_build(ctx, &err, f, 2, &dst, 1, &cur, &b), 0);
	assert_int_equal(dmt_gather_build(ctx, &err, f, 2, &dst, 1, &cur, &b),
			 -ENOSPC);
	cur = (struct dmt_gather_cursor){ 0 };
	assert_int_equal(dmt_gather_build(ctx, &err, f, 2, NULL, 0, &cur, &b),
			 -ENOSPC);
	assert_string_equal(err.msg,
			    "the fragments hold 20 bytes but the destinations only 0: give more room");
}

/* ---- segment tables: fragments crossing into a distant segment ----------- */

/*
 * A 64 KiB buffer whose 4 KiB pages are permuted over the source, plus one
 * boundary off the page grid (at 0x6800) and, for the gap test, a hole.
 */
#define PERM_SIZE 0x10000u

static struct devmemtcp_buf *perm_buf(bool gap)
{
	struct devmemtcp_segment segs[17];
	struct devmemtcp_buf *buf;
	size_t n = 0;

	for (uint64_t p = 0; p < 16; p++) {
		uint64_t off = p * 0x1000, len = 0x1000;

		if (p == 6)
			len = 0x800;	/* 0x6000..0x6800, then 0x6800..0x7000 */
		if (gap && p == 9)
			continue;	/* 0x9000..0xa000 has no address */
		segs[n++] = (struct devmemtcp_segment){
			off, len, SRC_BASE + 0x40000 + (p * 7 % 16) * 0x1000 };
		if (p == 6)
			segs[n++] = (struct devmemtcp_segment){
				0x6800, 0x800, SRC_BASE + 0x80000 + 0x100 };
	}
	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT, &buf), 0);
	buf->size = PERM_SIZE;
	assert_int_equal(dmt_buf_set_segments(buf, segs, n), 0);
	return buf;
}

/* Source byte at dma-buf offset off of buf (through its table). */
static uint8_t perm_byte(const struct devmemtcp_buf *buf, uint64_t off)
{
	uint64_t a;

	assert_int_equal(devmemtcp_buf_addr(buf, off, &a), 0);
	return src_mem[a - SRC_BASE];
}

static struct devmemtcp_frag perm_frag(const struct devmemtcp_buf *buf,
				       uint64_t off, uint32_t len)
{
	struct devmemtcp_frag f = { .offset = off, .len = len, .token = 1,
				    .binding_id = 1 };

	assert_int_equal(devmemtcp_buf_addr(buf, off, &f.addr), 0);
	return f;
}

/* Offset 0x800, 4 KiB: 2 KiB in page 0, 2 KiB in page 1. */
static void test_fragment_across_segments_is_two_descriptors(void **state)
{
	struct devmemtcp_buf *buf = perm_buf(false);
	const struct devmemtcp_frag f[] = {
		perm_frag(buf, 0x800, 0x1000),
		perm_frag(buf, 0x6400, 0x800),	/* across 0x6800 */
	};
	const struct devmemtcp_gpu_iov dst = { DST_BASE, 0x2000 };
	struct dmt_gather_desc desc[8];
	struct dmt_gather_dst dsts[1];
	struct dmt_gather_batch b = { desc, dsts, 8, 1 };
	struct dmt_gather_cursor cur = { 0 };

	assert_int_equal(dmt_gather_build(ctx, &err, f, 2, &dst, 1, &cur, &b), 0);
	assert_int_equal(b.nd, 4);
	assert_int_equal(desc[0].src, SRC_BASE + 0x40000 + 0x800);
	assert_int_equal(desc[0].len, 0x800);
	assert_int_equal(desc[0].pos, 0);
	assert_int_equal(desc[1].src, SRC_BASE + 0x40000 + 7 * 0x1000);
	assert_int_equal(desc[1].len, 0x800);
	assert_int_equal(desc[1].pos, 0x800);
	assert_int_equal(desc[2].src, SRC_BASE + 0x40000 + 10 * 0x1000 + 0x400);
	assert_int_equal(desc[2].len, 0x400);
	assert_int_equal(desc[2].pos, 0x1000);
	assert_int_equal(desc[3].src, SRC_BASE + 0x80000 + 0x100);
	assert_int_equal(desc[3].len, 0x400);
	assert_int_equal(desc[3].pos, 0x1400);
	devmemtcp_buf_free(buf);
}

static void test_view_splits_fragment_across_segments(void **state)
{
	struct devmemtcp_buf *buf = perm_buf(false);
	const struct devmemtcp_frag f[] = {
		perm_frag(buf, 0x800, 0x1000),
		perm_frag(buf, 0x6400, 0x800),
	};
	struct devmemtcp_gpu_iov iov[5];

	memset(iov, 0, sizeof(iov));
	assert_int_equal(devmemtcp_gpu_view(NULL, f, 2, iov, 5), 4);
	assert_int_equal(iov[0].addr, SRC_BASE + 0x40000 + 0x800);
	assert_int_equal(iov[0].len, 0x800);
	assert_int_equal(iov[1].addr, SRC_BASE + 0x40000 + 7 * 0x1000);
	assert_int_equal(iov[1].len, 0x800);
	assert_int_equal(iov[2].addr, SRC_BASE + 0x40000 + 10 * 0x1000 + 0x400);
	assert_int_equal(iov[2].len, 0x400);
	assert_int_equal(iov[3].addr, SRC_BASE + 0x80000 + 0x100);
	assert_int_equal(iov[3].len, 0x400);
	assert_int_equal(iov[4].len, 0);
	/* room for one: the count is still that of the pieces */
	assert_int_equal(devmemtcp_gpu_view(NULL, f, 1, iov, 1), 2);
	devmemtcp_buf_free(buf);
}

/* Bytes past the end of a segment that have no address: refused. */
static void test_fragment_into_a_gap_is_refused(void **state)
{
	struct devmemtcp_buf *buf = perm_buf(true);
	const struct devmemtcp_frag f[] = {
		perm_frag(buf, 0x100, 0x100),
		perm_frag(buf, 0x8800, 0x1000),	/* 0x9000.. is a gap */
	};
	const struct devmemtcp_gpu_iov dst = { DST_BASE, 0x2000 };
	struct devmemtcp_gpu_iov iov[4];
	struct dmt_gather_desc desc[8];
	struct dmt_gather_dst dsts[1];
	struct dmt_gather_batch b = { desc, dsts, 8, 1 };
	struct dmt_gather_cursor cur = { 0 };
	const char *want_msg =
		"fragment 1 (binding 1, offset 0x8800, 4096 bytes) runs into dma-buf offset 0x9000, which has no device address in its buffer's segment table: only the NIC's own fragments (which never cross a segment boundary) or fragments inside the table can be gathered";

	assert_int_equal(dmt_gather_build(ctx, &err, f, 2, &dst, 1, &cur, &b),
			 -EINVAL);
	assert_string_equal(err.msg, want_msg);
	cur = (struct dmt_gather_cursor){ 0 };
	assert_int_equal(dmt_gather_check(ctx, &err, f, 2, &dst, 1, &cur),
			 -EINVAL);
	assert_string_equal(err.msg, want_msg);
	assert_int_equal(devmemtcp_gpu_view(NULL, f, 2, iov, 4), -EINVAL);
	devmemtcp_buf_free(buf);
}

/* Random fragments anywhere in the permuted buffer, batches of any size. */
static void test_random_fragments_across_segments(void **state)
{
	struct devmemtcp_buf *buf = perm_buf(false);
	struct devmemtcp_frag f[64];

	for (int r = 0; r < 300; r++) {
		size_t n = (size_t)rnd_range(1, 64), ndst;
		struct devmemtcp_gpu_iov d[16];
		uint64_t total = 0, pos = 0;

		for (size_t i = 0; i < n; i++) {
			uint32_t len = (uint32_t)rnd_range(1, 3 * 0x1000);
			uint64_t off = rnd_range(0, PERM_SIZE - len);

			f[i] = perm_frag(buf, off, len);
			total += len;
		}
		ndst = make_dsts(d, (size_t)rnd_range(1, 16), total, 0);
		/* the reference through the table, byte by byte */
		memset(want, POISON, DST_SIZE);
		{
			size_t di = 0;
			uint64_t doff = 0;

			for (size_t i = 0; i < n; i++) {
				for (uint32_t k = 0; k < f[i].len; k++) {
					while (d[di].len == doff) {
						di++;
						doff = 0;
					}
					want[d[di].addr - DST_BASE + doff++] =
						perm_byte(buf, f[i].offset + k);
					pos++;
				}
			}
		}
		assert_int_equal(pos, total);
		memset(dst_mem, POISON, DST_SIZE);
		gather_cpu(f, n, d, ndst, r % 2 ? 1u << 18 : (uint32_t)rnd_range(1, 9),
			   r % 2 ? DMT_GATHER_DST_MAX : (uint32_t)rnd_range(1, 4),
			   false);
		if (memcmp(dst_mem, want, DST_SIZE))
			fail_msg("round %d: gathered bytes differ from the dma-buf's", r);
	}
	devmemtcp_buf_free(buf);
}

/* Only tables that are not one contiguous range are consulted, and only
 * while their buffer lives; a fragment of another mapping of the same
 * memory (its offset does not match the table's) is taken as it is. */
static void test_segment_index_lifetime(void **state)
{
	const struct devmemtcp_segment flat[] = {
		{ 0, 0x1000, SRC_BASE + 0x10000 },
		{ 0x1000, 0x1000, SRC_BASE + 0x11000 },
	};
	const struct devmemtcp_gpu_iov dst = { DST_BASE, 0x1000 };
	struct devmemtcp_buf *buf, *flat_buf;
	struct devmemtcp_frag f, other;
	struct devmemtcp_gpu_iov iov[3];

	assert_int_equal(dmt_segmap_grain(), 0);
	assert_int_equal(dmt_buf_alloc(ctx, DEVMEMTCP_PROVIDER_IMPORT,
				       &flat_buf), 0);
	flat_buf->size = 0x2000;
	assert_int_equal(dmt_buf_set_segments(flat_buf, flat, 2), 0);
	assert_int_equal(dmt_segmap_grain(), 0);

	buf = perm_buf(false);
	assert_int_equal(dmt_segmap_grain(), 0x100);
	f = perm_frag(buf, 0x800, 0x1000);
	/* the same device bytes named from another buffer's offset 0x5800 */
	other = (struct devmemtcp_frag){ .offset = 0x5800, .addr = f.addr,
					 .len = 0x1000 };
	assert_int_equal(devmemtcp_gpu_view(NULL, &f, 1, iov, 3), 2);
	assert_int_equal(devmemtcp_gpu_view(NULL, &other, 1, iov, 3), 1);
	assert_int_equal(iov[0].addr, f.addr);
	assert_int_equal(iov[0].len, 0x1000);
	{
		struct dmt_gather_desc desc[4];
		struct dmt_gather_dst dsts[1];
		struct dmt_gather_batch b = { desc, dsts, 4, 1 };
		struct dmt_gather_cursor cur = { 0 };

		assert_int_equal(dmt_gather_build(ctx, &err, &other, 1, &dst, 1,
						  &cur, &b), 0);
		assert_int_equal(b.nd, 1);
	}
	/* a new table for the same buffer replaces the old one */
	assert_int_equal(dmt_buf_set_segments(buf, flat, 2), 0);
	assert_int_equal(dmt_segmap_grain(), 0);
	devmemtcp_buf_free(buf);
	buf = perm_buf(false);
	assert_int_equal(dmt_segmap_grain(), 0x100);
	devmemtcp_buf_free(buf);
	assert_int_equal(dmt_segmap_grain(), 0);
	assert_int_equal(devmemtcp_gpu_view(NULL, &f, 1, iov, 3), 1);
	devmemtcp_buf_free(flat_buf);
}

/* Small batches are spread over many warps, large ones a few fragments
 * per warp; blocks shrink until there are enough for every SM. */
static void test_geometry(void **state)
{
	struct dmt_gather_geom g;

	/* 16 x 4 KiB on 132 SMs: 512-byte slices, one warp per block */
	dmt_gather_geometry(16, 16 * 4096, 132, 0, 0, 0, &g);
	assert_int_equal(g.per, 1);
	assert_int_equal(g.split, 8);
	assert_int_equal(g.warps, 128);
	assert_int_equal(g.wpb, 1);
	assert_int_equal(g.blocks, 128);
	/* 1024 x 4 KiB: about 1 KiB a warp */
	dmt_gather_geometry(1024, 1024 * 4096, 132, 0, 0, 0, &g);
	assert_int_equal(g.per, 1);
	assert_int_equal(g.split, 5);
	assert_int_equal(g.wpb, 8);
	/* 256 MiB of 4 KiB: two fragments a warp, as tuned at 1 GiB */
	dmt_gather_geometry(65536, 65536ull * 4096, 132, 0, 0, 0, &g);
	assert_int_equal(g.per, 2);
	assert_int_equal(g.split, 1);
	assert_int_equal(g.warps, 32768);
	assert_int_equal(g.wpb, 8);
	/* in between: one fragment a warp */
	dmt_gather_geometry(8192, 8192ull * 4096, 132, 0, 0, 0, &g);
	assert_int_equal(g.per, 1);
	assert_int_equal(g.split, 1);
	/* the knobs win; split > 1 means one descriptor a warp */
	dmt_gather_geometry(100, 100 * 4096, 132, 7, 3, 2, &g);
	assert_int_equal(g.per, 1);
	assert_int_equal(g.split, 3);
	assert_int_equal(g.wpb, 2);
	assert_int_equal(g.blocks, 150);
	dmt_gather_geometry(100, 100 * 4096, 132, 7, 0, 0, &g);
	assert_int_equal(g.per, 7);
	assert_int_equal(g.warps, 15);
	/* one tiny fragment */
	dmt_gather_geometry(1, 1, 132, 0, 0, 0, &g);
	assert_int_equal(g.warps, 1);
	assert_int_equal(g.blocks, 1);
	dmt_gather_geometry_2d(1, &g);
	assert_int_equal(g.gx, 1);
	assert_int_equal(g.gy, 1);
	/* inline launches that split: descriptors along x, slices along y */
	dmt_gather_geometry(16, 16 * 4096, 132, 0, 0, 0, &g);
	dmt_gather_geometry_2d(16, &g);
	assert_int_equal(g.gx, 16);
	assert_int_equal(g.gy, 8);
	assert_int_equal(g.blocks, 128);
	dmt_gather_geometry(100, 100 * 4096, 132, 0, 3, 2, &g);
	dmt_gather_geometry_2d(100, &g);
	assert_int_equal(g.gx, 50);
	assert_int_equal(g.gy, 3);
	assert_int_equal(g.blocks, 150);
	/* from a slot: the warps of a split share a block (one read) */
	dmt_gather_geometry(16, 16 * 4096, 132, 0, 0, 0, &g);
	dmt_gather_geometry_staged(&g);
	assert_int_equal(g.wpb, 8);
	assert_int_equal(g.blocks, 16);
	assert_int_equal(g.gx, 16);
	dmt_gather_geometry(100, 100 * 4096, 132, 0, 3, 0, &g);
	assert_int_equal(g.wpb, 2);
	dmt_gather_geometry_staged(&g);
	assert_int_equal(g.wpb, 3);
	assert_int_equal(g.blocks, 100);
	dmt_gather_geometry(65536, 65536ull * 4096, 132, 0, 0, 0, &g);
	dmt_gather_geometry_staged(&g);
	assert_int_equal(g.wpb, 8);
	assert_int_equal(g.blocks, 4096);
	/* one descriptor a warp or more: nothing to turn */
	dmt_gather_geometry(100, 100 * 4096, 132, 7, 0, 0, &g);
	dmt_gather_geometry_2d(100, &g);
	assert_int_equal(g.gy, 1);
	assert_int_equal(g.gx, g.blocks);
}

/* The descriptors a block stages: every one its warps take, none past
 * the launch's, never more than shared memory holds. */
static void test_warp_range(void **state)
{
	uint32_t d0, d1;

	(void)state;
	dmt_warp_range(0, 8, 100, 32, 1, &d0, &d1);
	assert_int_equal(d0, 0);
	assert_int_equal(d1, 100);
	dmt_warp_range(8, 8, 1000, 32, 1, &d0, &d1);
	assert_int_equal(d0, 256);
	assert_int_equal(d1, 512);
	/* split 3: warps 7..14 take descriptors 2..4 */
	dmt_warp_range(7, 8, 100, 1, 3, &d0, &d1);
	assert_int_equal(d0, 2);
	assert_int_equal(d1, 5);
	/* past the end: empty */
	dmt_warp_range(400, 8, 100, 1, 3, &d0, &d1);
	assert_int_equal(d0, 100);
	assert_int_equal(d1, 100);
	/* no overflow at the top of the range */
	dmt_warp_range(UINT32_MAX - 7, 8, UINT32_MAX, 32, 1, &d0, &d1);
	assert_int_equal(d0, UINT32_MAX);
	assert_int_equal(d1, UINT32_MAX);
	for (int i = 0; i < 10000; i++) {
		uint32_t n = (uint32_t)rnd_range(1, 100000);
		uint32_t split = (uint32_t)rnd_range(1, DMT_SPLIT_MAX);
		uint32_t per = split > 1 ? 1 : (uint32_t)rnd_range(1, 32);
		uint32_t warps = (uint32_t)rnd_range(1, 8);
		uint32_t vw0 = (uint32_t)rnd_range(0, (uint64_t)n * split / per);

		dmt_warp_range(vw0, warps, n, per, split, &d0, &d1);
		assert_true(d0 <= d1 && d1 <= n);
		assert_true(d1 - d0 <= DMT_STAGE_MAX);
		for (uint32_t w = vw0; w < vw0 + warps; w++) {
			uint64_t lo = split > 1 ? w / split : (uint64_t)w * per;
			uint64_t hi = split > 1 ? lo + 1 : lo + per;

			for (uint64_t d = lo; d < hi && d < n; d++)
				assert_true(d >= d0 && d < d1);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_warp_range),
		cmocka_unit_test(test_descriptors_one_dst),
		cmocka_unit_test(test_descriptors_linear),
		cmocka_unit_test(test_descriptors_cut_at_destination),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_random_gathers),
		cmocka_unit_test(test_fragment_across_segments_is_two_descriptors),
		cmocka_unit_test(test_view_splits_fragment_across_segments),
		cmocka_unit_test(test_fragment_into_a_gap_is_refused),
		cmocka_unit_test(test_random_fragments_across_segments),
		cmocka_unit_test(test_segment_index_lifetime),
	};
	const char *seed = getenv("DEVMEMTCP_TEST_SEED");

	if (seed)
		rng = strtoull(seed, NULL, 0) | 1;
	printf("seed %#llx\n", (unsigned long long)rng);
	return cmocka_run_group_tests(tests, setup, teardown);
}

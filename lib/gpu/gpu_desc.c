// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The gpu layer, the CPU side of a gather: the descriptors and destination
 * table of each launch, and the no-copy view.  Nothing here calls CUDA, so
 * the unit suite tests it on any machine.
 *
 * A fragment's bytes are one device range from its addr, unless its
 * buffer's segment table maps the offsets it covers to distant addresses
 * (a table the caller gave an import): then it is cut into the runs that
 * the buffer layer's segment index names (buf.h, dmt_segmap_run), one
 * descriptor or view entry per run.  The NIC's own fragments never cross
 * a segment boundary (bind and registration refuse tables off the page
 * grid); fragments a caller builds may.
 */
#include "buf/buf.h"
#include "gpu.h"

static int no_address(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		      const struct devmemtcp_frag *f, size_t i)
{
	return dmt_err(ctx, err, -EINVAL,
		       "fragment %zu (binding %u, offset %#llx) has no device address: register its binding's buffer with devmemtcp_rx_add_buf",
		       i, f->binding_id, (unsigned long long)f->offset);
}

/* -ENOSPC, with the totals of the whole gather in the message. */
static int no_room(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		   const struct devmemtcp_frag *frags, size_t n,
		   const struct devmemtcp_gpu_iov *dsts, size_t ndst)
{
	uint64_t need = 0, room = 0;

	for (size_t i = 0; i < n; i++)
		need += frags[i].len;
	for (size_t i = 0; i < ndst; i++)
		room += dsts[i].len;
	return dmt_err(ctx, err, -ENOSPC,
		       "the fragments hold %llu bytes but the destinations only %llu: give more room",
		       (unsigned long long)need, (unsigned long long)room);
}

static bool is_hole(const struct devmemtcp_frag *f)
{
	return f->flags & DEVMEMTCP_FRAG_LINEAR;
}

static int into_gap(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		    const struct devmemtcp_frag *f, size_t i, uint64_t foff)
{
	return dmt_err(ctx, err, -EINVAL,
		       "fragment %zu (binding %u, offset %#llx, %u bytes) runs into dma-buf offset %#llx, which has no device address in its buffer's segment table: only the NIC's own fragments (which never cross a segment boundary) or fragments inside the table can be gathered",
		       i, f->binding_id, (unsigned long long)f->offset, f->len,
		       (unsigned long long)(f->offset + foff));
}

/* Whether f's bytes may cross into another segment (grain g, buf.h). */
static bool may_cross(const struct devmemtcp_frag *f, uint64_t g)
{
	return g && (f->addr & (g - 1)) + f->len > g;
}

/* The segment index, read-locked while a gather or view uses it; the
 * grain (0: nothing to consult, no lock taken). */
static uint64_t segs_get(void)
{
	if (!dmt_segmap_grain())
		return 0;
	dmt_segmap_read_lock();
	return dmt_segmap_grain() ?: 1;
}

static void segs_put(uint64_t g)
{
	if (g)
		dmt_segmap_read_unlock();
}

/*
 * The common case, whole fragments into the room left in the current
 * destination: one descriptor per fragment, one pass.  Stops at the first
 * fragment that does not fit whole or may cross a segment boundary (the
 * general loop cuts it).  Keeps b->lo and b->hi, the device bytes read.
 */
static int build_one(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *frags, size_t n, uint64_t g,
		     uint64_t room, struct dmt_gather_cursor *cur,
		     struct dmt_gather_batch *b, uint64_t *posp)
{
	struct dmt_gather_desc *d = b->desc;
	uint64_t pos = *posp, limit = room, lo = b->lo, hi = b->hi;
	uint32_t nd = b->nd, max = b->max_desc;
	size_t i = cur->i;

	if (limit > DMT_GATHER_POS_MAX - pos)
		limit = DMT_GATHER_POS_MAX - pos;
	limit += pos;
	if (!g) {
		/* No segment table (the usual case): a loop of one test per
		 * fragment, up to the first that is not a plain whole piece
		 * with an address; the loop below takes that one on.
		 * Pointers, not indices: no address arithmetic per
		 * fragment. */
		const struct devmemtcp_frag *f = frags + i;
		const struct devmemtcp_frag *fe =
			frags + (n - i < (size_t)(max - nd) ? n : i + (max - nd));
		struct dmt_gather_desc *dp = d + nd;

		for (; f < fe; f++, dp++) {
			uint64_t addr = f->addr, len = f->len;

			/* len 0 wraps to the largest: one test for an empty
			 * fragment and one past the room, one for no
			 * address and a linear one */
			if (len - 1 >= limit - pos ||
			    ((addr == 0) | (f->flags & DEVMEMTCP_FRAG_LINEAR)))
				break;
			*dp = (struct dmt_gather_desc){ addr, (uint32_t)len,
							(uint32_t)pos };
			lo = addr < lo ? addr : lo;
			hi = addr + len > hi ? addr + len : hi;
			pos += len;
		}
		i = (size_t)(f - frags);
		nd = (uint32_t)(dp - d);
	}
	for (; i < n; i++) {
		const struct devmemtcp_frag *f = &frags[i];

		if (pos + f->len > limit)
			break;
		if (f->len && is_hole(f) && b->linear) {
			if (nd == max)
				break;
			d[nd++] = (struct dmt_gather_desc){ b->linear + f->offset,
							    f->len, (uint32_t)pos };
		} else if (!is_hole(f) && f->len) {
			if (nd == max || may_cross(f, g))
				break;
			if (!f->addr)
				return no_address(ctx, err, f, i);
			d[nd++] = (struct dmt_gather_desc){ f->addr, f->len,
							    (uint32_t)pos };
			lo = f->addr < lo ? f->addr : lo;
			hi = f->addr + f->len > hi ? f->addr + f->len : hi;
		}
		pos += f->len;
	}
	cur->doff += pos - *posp;
	cur->i = i;
	b->nd = nd;
	b->lo = lo;
	b->hi = hi;
	*posp = pos;
	return 0;
}

/* The first destination entry of a batch: where the gather stands. */
static void start_batch(const struct devmemtcp_gpu_iov *dsts, size_t ndst,
			struct dmt_gather_cursor *cur, struct dmt_gather_batch *b)
{
	b->nd = 0;
	b->ndst = 0;
	while (cur->di < ndst && cur->doff == dsts[cur->di].len) {
		cur->di++;
		cur->doff = 0;
	}
	b->dst[b->ndst++] = (struct dmt_gather_dst){
		b->pos0,
		cur->di < ndst ? dsts[cur->di].addr + cur->doff - b->pos0 : 0 };
}

/* The current destination is full: open the next non-empty one in b at
 * output position pos.  1: done, 0: b has no room for another entry. */
static int next_dst(const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		    size_t next, struct dmt_gather_cursor *cur,
		    struct dmt_gather_batch *b, uint64_t pos)
{
	if (b->ndst == b->max_dst)
		return 0;
	cur->di = next;
	cur->doff = 0;
	b->dst[b->ndst++] = (struct dmt_gather_dst){ pos, dsts[next].addr - pos };
	return 1;
}

/*
 * Place the bytes of f from cur->foff into the room left in the current
 * destination: a descriptor (cut where f's segment ends) or a hole.  1:
 * placed, 0: b is full, or a negative errno.
 */
static int put_piece(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *f, uint64_t g, uint64_t room,
		     struct dmt_gather_cursor *cur, struct dmt_gather_batch *b,
		     uint64_t *posp)
{
	uint64_t take = f->len - cur->foff, src = f->addr + cur->foff;

	if (take > room)
		take = room;
	if (take > DMT_GATHER_POS_MAX - *posp)
		take = DMT_GATHER_POS_MAX - *posp;
	if (!take)
		return 0;
	if (is_hole(f) && b->linear) {
		if (b->nd == b->max_desc)
			return 0;
		b->desc[b->nd++] = (struct dmt_gather_desc){
			b->linear + f->offset + cur->foff, (uint32_t)take,
			(uint32_t)*posp };
	} else if (!is_hole(f)) {
		if (b->nd == b->max_desc)
			return 0;
		if (!f->addr)
			return no_address(ctx, err, f, cur->i);
		if (may_cross(f, g) &&
		    dmt_segmap_run(f->offset, f->addr, cur->foff, take, &src,
				   &take))
			return into_gap(ctx, err, f, cur->i, cur->foff);
		b->desc[b->nd++] = (struct dmt_gather_desc){ src, (uint32_t)take,
							     (uint32_t)*posp };
		if (src < b->lo)
			b->lo = src;
		if (src + take > b->hi)
			b->hi = src + take;
	}
	*posp += take;
	cur->doff += take;
	cur->foff += take;
	return 1;
}

static int build(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		 const struct devmemtcp_frag *frags, size_t n,
		 const struct devmemtcp_gpu_iov *dsts, size_t ndst, uint64_t g,
		 struct dmt_gather_cursor *cur, struct dmt_gather_batch *b)
{
	uint64_t pos = b->pos0;
	int ret = 1;

	b->lo = UINT64_MAX;
	b->hi = 0;
	start_batch(dsts, ndst, cur, b);
	while (cur->i < n && ret > 0) {
		const struct devmemtcp_frag *f = &frags[cur->i];
		size_t next = cur->di + 1, i0 = cur->i;
		uint64_t room;

		if (cur->foff == f->len) {
			cur->i++;
			cur->foff = 0;
			continue;
		}
		if (cur->di == ndst)
			return no_room(ctx, err, frags, n, dsts, ndst);
		room = dsts[cur->di].len - cur->doff;
		if (!room) {
			while (next < ndst && !dsts[next].len)
				next++;
			if (next == ndst)
				return no_room(ctx, err, frags, n, dsts, ndst);
			ret = next_dst(dsts, ndst, next, cur, b, pos);
			continue;
		}
		if (!cur->foff) {
			ret = build_one(ctx, err, frags, n, g, room, cur, b,
					&pos);
			if (ret)
				return ret;
			ret = 1;
			if (cur->i != i0)
				continue;	/* whole fragments went in */
		}
		ret = put_piece(ctx, err, f, g, room, cur, b, &pos);
	}
	if (ret < 0)
		return ret;
	b->bytes = pos - b->pos0;
	return 0;
}

int dmt_gather_build(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *frags, size_t n,
		     const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		     struct dmt_gather_cursor *cur, struct dmt_gather_batch *b)
{
	uint64_t g = segs_get();
	int ret = build(ctx, err, frags, n, dsts, ndst, g, cur, b);

	segs_put(g);
	return ret;
}

/* Every byte of f from foff on has a device address. */
static int check_runs(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		      const struct devmemtcp_frag *f, size_t i, uint64_t foff)
{
	while (foff < f->len) {
		uint64_t src, run;

		if (dmt_segmap_run(f->offset, f->addr, foff, f->len - foff, &src,
				   &run))
			return into_gap(ctx, err, f, i, foff);
		foff += run;
	}
	return 0;
}

static int check(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		 const struct devmemtcp_frag *frags, size_t n,
		 const struct devmemtcp_gpu_iov *dsts, size_t ndst, uint64_t g,
		 const struct dmt_gather_cursor *cur)
{
	uint64_t need = 0, room = 0;

	for (size_t i = cur->i; i < n; i++) {
		const struct devmemtcp_frag *f = &frags[i];

		if (!f->addr && f->len && !is_hole(f))
			return no_address(ctx, err, f, i);
		if (!is_hole(f) && may_cross(f, g)) {
			int ret = check_runs(ctx, err, f, i,
					     i == cur->i ? cur->foff : 0);

			if (ret)
				return ret;
		}
		need += f->len;
	}
	need -= cur->foff;
	for (size_t i = cur->di; i < ndst; i++)
		room += dsts[i].len;
	room -= cur->di < ndst ? cur->doff : 0;
	if (need > room)
		return no_room(ctx, err, frags, n, dsts, ndst);
	return 0;
}

int dmt_gather_check(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *frags, size_t n,
		     const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		     const struct dmt_gather_cursor *cur)
{
	uint64_t g = segs_get();
	int ret = check(ctx, err, frags, n, dsts, ndst, g, cur);

	segs_put(g);
	return ret;
}

/* ---- launch geometry ------------------------------------------------------ */

/* Warps an SM keeps resident with 64 registers a thread (4 blocks of 8). */
#define GEOM_WARPS_PER_SM 32u
/* Large batches: bytes a warp copies, in 2 to 32 fragments.  Few: the last
 * wave of blocks ends soon after the others; not too few: fetching its
 * descriptors over PCIe stays a small part of a warp's life.  On an H200,
 * 2 fragments of 4 KiB, 4-8 of 1448 B and 2 of a mixed set (10 KiB on
 * average) were best (bench/results/gather-h200.md); one fragment per warp
 * was 4x slower. */
#define GEOM_BYTES_PER_WARP (8u << 10)
#define GEOM_PER_MIN 2u
/* Small batches: a warp's slice of a split fragment, at least (one row of
 * 32 lanes x 16 bytes). */
#define GEOM_SLICE_MIN 512u

static uint32_t clamp32(uint64_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : (uint32_t)v;
}

void dmt_gather_geometry(uint32_t nd, uint64_t bytes, uint32_t sms,
			 uint32_t per, uint32_t split, uint32_t wpb,
			 struct dmt_gather_geom *g)
{
	uint64_t avg = (bytes + nd - 1) / nd ?: 1, warps;
	/* bytes per warp when the batch fills every SM once */
	uint64_t fill = bytes / ((uint64_t)(sms ? sms : 1) * GEOM_WARPS_PER_SM);

	if (per || split) {
		g->split = clamp32(split, 1, DMT_SPLIT_MAX);
		g->per = g->split > 1 ? 1 : clamp32(per, 1, 32);
	} else if (fill >= GEOM_BYTES_PER_WARP) {
		g->split = 1;
		g->per = clamp32((GEOM_BYTES_PER_WARP + avg - 1) / avg,
				 GEOM_PER_MIN, 32);
	} else if (fill >= avg) {
		g->split = 1;
		g->per = clamp32(fill / avg, 1, 32);
	} else {
		uint64_t slice = fill > GEOM_SLICE_MIN ? fill : GEOM_SLICE_MIN;

		g->per = 1;
		g->split = clamp32((avg + slice - 1) / slice, 1, DMT_SPLIT_MAX);
	}
	warps = ((uint64_t)nd + g->per - 1) / g->per * g->split;
	g->warps = (uint32_t)warps;
	if (wpb) {
		g->wpb = clamp32(wpb, 1, 8);
	} else {
		/* halve the blocks until there are enough to reach every SM */
		g->wpb = 8;
		while (g->wpb > 1 && warps / g->wpb < sms)
			g->wpb /= 2;
	}
	g->blocks = (uint32_t)((warps + g->wpb - 1) / g->wpb);
	g->gx = g->blocks;
	g->gy = 1;
}

void dmt_gather_geometry_staged(struct dmt_gather_geom *g)
{
	uint32_t wpb = g->split < 8 ? g->split : 8;

	if (wpb <= g->wpb)
		return;
	g->wpb = wpb;
	g->blocks = (g->warps + wpb - 1) / wpb;
	g->gx = g->blocks;
}

void dmt_gather_geometry_2d(uint32_t nd, struct dmt_gather_geom *g)
{
	if (g->split < 2)
		return;
	g->gx = (nd + g->wpb - 1) / g->wpb;
	g->gy = g->split;
	g->blocks = g->gx * g->gy;
}

/* ---- the no-copy view ---------------------------------------------------- */

struct view {
	struct devmemtcp_gpu_iov *iov;
	size_t max;
	size_t cnt;
	uint64_t end;		/* end of the last range, stored or not */
};

/* Append [addr, addr + len), merged with the last range when adjacent. */
static bool view_add(struct view *v, uint64_t addr, uint64_t len)
{
	if (v->cnt && v->end == addr) {
		if (v->cnt <= v->max)
			v->iov[v->cnt - 1].len += len;
		v->end += len;
		return true;
	}
	v->end = addr + len;
	if (v->cnt < v->max)
		v->iov[v->cnt] = (struct devmemtcp_gpu_iov){ addr, len };
	return ++v->cnt <= dmt_gpu_view_max;
}

/* Views refuse more ranges than an int counts (tests lower it). */
size_t dmt_gpu_view_max = INT32_MAX;

/* With err NULL (no handle), the message is the thread's. */
static int view_fail(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     int code, const char *msg)
{
	return dmt_err(ctx, err, code, "%s", msg);
}

static int view(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		const struct devmemtcp_frag *frags, size_t n, uint64_t g,
		struct view *v)
{
	for (size_t i = 0; i < n; i++) {
		const struct devmemtcp_frag *f = &frags[i];
		uint64_t foff = 0;

		if (!f->len || is_hole(f))
			continue;
		if (!f->addr)
			return no_address(ctx, err, f, i);
		while (foff < f->len) {
			uint64_t src = f->addr + foff, run = f->len - foff;

			if (may_cross(f, g) &&
			    dmt_segmap_run(f->offset, f->addr, foff, run, &src,
					   &run))
				return into_gap(ctx, err, f, i, foff);
			if (!view_add(v, src, run))
				return view_fail(ctx, err, -EOVERFLOW,
						 "devmemtcp_gpu_view: more than 2^31 ranges: view fewer fragments at once");
			foff += run;
		}
	}
	return (int)v->cnt;
}

int dmt_gpu_view(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		 const struct devmemtcp_frag *frags, size_t n,
		 struct devmemtcp_gpu_iov *iov, size_t max)
{
	struct view v = { iov, max, 0, 0 };
	uint64_t g;
	int ret;

	if ((n && !frags) || (max && !iov))
		return view_fail(ctx, err, -EINVAL,
				 "devmemtcp_gpu_view: frags or iov is NULL with a non-zero count");
	g = segs_get();
	ret = view(ctx, err, frags, n, g, &v);
	segs_put(g);
	return ret;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * GPU layer (8), the CPU side of a gather: the descriptors and destination
 * table of each launch.  Nothing here calls CUDA, so the unit suite tests
 * it on any machine.
 */
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

/*
 * The common case, whole fragments into the room left in the current
 * destination: one descriptor per fragment, one pass.  Stops at the first
 * fragment that does not fit whole (the general loop cuts it).
 */
static int build_one(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *frags, size_t n,
		     uint64_t room, struct dmt_gather_cursor *cur,
		     struct dmt_gather_batch *b, uint64_t *posp)
{
	struct dmt_gather_desc *d = b->desc;
	uint64_t pos = *posp, limit = room;
	uint32_t nd = b->nd, max = b->max_desc;
	size_t i = cur->i;

	if (limit > DMT_GATHER_POS_MAX - pos)
		limit = DMT_GATHER_POS_MAX - pos;
	limit += pos;
	for (; i < n; i++) {
		const struct devmemtcp_frag *f = &frags[i];

		if (pos + f->len > limit)
			break;
		if (!is_hole(f) && f->len) {
			if (nd == max)
				break;
			if (!f->addr)
				return no_address(ctx, err, f, i);
			d[nd++] = (struct dmt_gather_desc){ f->addr, f->len,
							    (uint32_t)pos };
		}
		pos += f->len;
	}
	cur->doff += pos - *posp;
	cur->i = i;
	b->nd = nd;
	*posp = pos;
	return 0;
}

int dmt_gather_build(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *frags, size_t n,
		     const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		     struct dmt_gather_cursor *cur, struct dmt_gather_batch *b)
{
	uint64_t pos = 0;
	int ret;

	b->nd = 0;
	b->ndst = 0;
	while (cur->di < ndst && cur->doff == dsts[cur->di].len) {
		cur->di++;
		cur->doff = 0;
	}
	b->dst[b->ndst++] = (struct dmt_gather_dst){
		0, cur->di < ndst ? dsts[cur->di].addr + cur->doff : 0 };
	while (cur->i < n) {
		const struct devmemtcp_frag *f = &frags[cur->i];
		uint64_t take, rem = f->len - cur->foff, room;

		if (!rem) {
			cur->i++;
			cur->foff = 0;
			continue;
		}
		if (cur->di == ndst)
			return no_room(ctx, err, frags, n, dsts, ndst);
		room = dsts[cur->di].len - cur->doff;
		if (!room) {
			size_t next = cur->di + 1;

			while (next < ndst && !dsts[next].len)
				next++;
			if (next == ndst)
				return no_room(ctx, err, frags, n, dsts, ndst);
			if (b->ndst == b->max_dst)
				break;
			cur->di = next;
			cur->doff = 0;
			b->dst[b->ndst++] = (struct dmt_gather_dst){
				pos, dsts[next].addr - pos };
			continue;
		}
		if (!cur->foff) {
			ret = build_one(ctx, err, frags, n, room, cur, b, &pos);
			if (ret)
				return ret;
			if (cur->i == n)
				break;
			f = &frags[cur->i];
			rem = f->len;
			room = dsts[cur->di].len - cur->doff;
			if (!room)
				continue;
		}
		take = rem < room ? rem : room;
		if (take > DMT_GATHER_POS_MAX - pos)
			take = DMT_GATHER_POS_MAX - pos;
		if (!take)
			break;
		if (!is_hole(f)) {
			if (b->nd == b->max_desc)
				break;
			if (!f->addr)
				return no_address(ctx, err, f, cur->i);
			b->desc[b->nd++] = (struct dmt_gather_desc){
				f->addr + cur->foff, (uint32_t)take,
				(uint32_t)pos };
		}
		pos += take;
		cur->doff += take;
		cur->foff += take;
	}
	b->bytes = pos;
	return 0;
}

int dmt_gather_check(const struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const struct devmemtcp_frag *frags, size_t n,
		     const struct devmemtcp_gpu_iov *dsts, size_t ndst,
		     const struct dmt_gather_cursor *cur)
{
	uint64_t need = 0, room = 0;

	for (size_t i = cur->i; i < n; i++) {
		const struct devmemtcp_frag *f = &frags[i];

		if (!f->addr && f->len && !is_hole(f))
			return no_address(ctx, err, f, i);
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

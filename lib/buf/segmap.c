// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The buf layer: the process's segment tables that map neighbouring
 * dma-buf offsets to distant device addresses, indexed by device address,
 * so that the GPU layer can tell where a fragment's bytes really are.
 *
 * A fragment carries the device address of its first byte only.  When its
 * bytes cross into another segment of such a table, the rest is elsewhere:
 * the gather and the view ask here for the runs of device memory.  A
 * fragment is recognised by its first byte: a segment holding addr whose
 * offset-to-address difference is the fragment's (offset - addr).  Tables
 * that are one contiguous range (every buffer a provider makes) are not
 * kept, so with none registered the hot path reads one word.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

struct segtab {
	const void *owner;
	struct devmemtcp_segment *segs;	/* sorted by offset */
	size_t n;
};

struct segent {			/* one segment, in address order */
	uint64_t addr;
	uint64_t len;
	uint64_t offset;
	size_t tab;
};

long dmt_segments_find(const struct devmemtcp_segment *segs, size_t n,
		       uint64_t off)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (off < segs[mid].offset)
			hi = mid;
		else if (off - segs[mid].offset >= segs[mid].len)
			lo = mid + 1;
		else
			return (long)mid;
	}
	return -1;
}

static pthread_rwlock_t segmap_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct segtab *tabs;
static size_t ntabs;
static struct segent *ents;
static size_t nents;
static uint64_t max_len;
uint64_t dmt_segmap_grain_;

static bool contiguous(const struct devmemtcp_segment *s, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (s[i - 1].offset + s[i - 1].len != s[i].offset ||
		    s[i - 1].addr + s[i - 1].len != s[i].addr)
			return false;
	return true;
}

static int ent_cmp(const void *a, const void *b)
{
	const struct segent *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static size_t total_segs(void)
{
	size_t total = 0;

	for (size_t t = 0; t < ntabs; t++)
		total += tabs[t].n;
	return total;
}

/* Index every table's segments into e (room for all of them) and publish
 * the grain; under the write lock. */
static void reindex(struct segent *e)
{
	uint64_t bits = 0;
	size_t k = 0;

	max_len = 0;
	for (size_t t = 0; t < ntabs; t++) {
		for (size_t i = 0; i < tabs[t].n; i++) {
			const struct devmemtcp_segment *s = &tabs[t].segs[i];

			e[k++] = (struct segent){ s->addr, s->len, s->offset, t };
			bits |= s->addr | s->len;
			if (s->len > max_len)
				max_len = s->len;
		}
	}
	if (k)
		qsort(e, k, sizeof(*e), ent_cmp);
	if (ents != e)
		free(ents);
	ents = k ? e : NULL;
	if (!k)
		free(e);
	nents = k;
	/* every segment's addr and len are multiples of the grain */
	__atomic_store_n(&dmt_segmap_grain_, k ? bits & -bits : 0,
			 __ATOMIC_RELEASE);
}

static long find_owner(const void *owner)
{
	for (size_t t = 0; t < ntabs; t++)
		if (tabs[t].owner == owner)
			return (long)t;
	return -1;
}

static void remove_at(size_t t)
{
	free(tabs[t].segs);
	tabs[t] = tabs[--ntabs];
}

int dmt_segmap_set(const void *owner, const struct devmemtcp_segment *segs,
		   size_t n)
{
	bool keep = n > 1 && !contiguous(segs, n);
	struct devmemtcp_segment *copy = NULL;
	struct segent *e = NULL;
	struct segtab *v;
	size_t total;
	long old;

	if (keep) {
		copy = dmt_malloc(n * sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, segs, n * sizeof(*copy));
	}
	pthread_rwlock_wrlock(&segmap_lock);
	old = find_owner(owner);
	if (!keep && old < 0) {
		pthread_rwlock_unlock(&segmap_lock);
		return 0;
	}
	/* allocate first: a failure changes nothing */
	total = total_segs() - (old >= 0 ? tabs[old].n : 0) + (keep ? n : 0);
	if (keep) {
		v = dmt_realloc(tabs, (ntabs + 1) * sizeof(*v));
		if (!v)
			goto err_nomem;
		tabs = v;
	}
	if (total) {
		e = dmt_malloc(total * sizeof(*e));
		if (!e)
			goto err_nomem;
	}
	if (old >= 0)
		remove_at((size_t)old);
	if (keep)
		tabs[ntabs++] = (struct segtab){ owner, copy, n };
	reindex(e);
	pthread_rwlock_unlock(&segmap_lock);
	return 0;

err_nomem:
	pthread_rwlock_unlock(&segmap_lock);
	free(copy);
	return -ENOMEM;
}

void dmt_segmap_drop(const void *owner)
{
	long t;

	pthread_rwlock_wrlock(&segmap_lock);
	t = find_owner(owner);
	if (t >= 0) {
		remove_at((size_t)t);
		reindex(ents);	/* fewer entries: the array has room */
	}
	pthread_rwlock_unlock(&segmap_lock);
}

void dmt_segmap_read_lock(void)
{
	pthread_rwlock_rdlock(&segmap_lock);
}

void dmt_segmap_read_unlock(void)
{
	pthread_rwlock_unlock(&segmap_lock);
}

/* The table whose segment holds addr with the fragment's offset, or -1. */
static long find_table(uint64_t off, uint64_t addr)
{
	size_t lo = 0, hi = nents;

	while (lo < hi) {	/* first entry starting after addr */
		size_t mid = lo + (hi - lo) / 2;

		if (ents[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* segments of different tables may overlap: look back as far as the
	 * longest one reaches */
	while (lo-- > 0 && addr - ents[lo].addr < max_len) {
		const struct segent *e = &ents[lo];

		if (addr - e->addr < e->len && off - e->offset == addr - e->addr)
			return (long)e->tab;
	}
	return -1;
}

int dmt_segmap_run(uint64_t off, uint64_t addr, uint64_t foff, uint64_t len,
		   uint64_t *src, uint64_t *run)
{
	long t = find_table(off, addr);
	const struct segtab *tab;
	uint64_t at = off + foff, left;
	long i;

	*src = addr + foff;
	*run = len;
	if (t < 0)
		return 0;	/* not a table of ours: as the caller says */
	tab = &tabs[t];
	i = dmt_segments_find(tab->segs, tab->n, at);
	if (i < 0)
		return -ERANGE;
	*src = tab->segs[i].addr + (at - tab->segs[i].offset);
	left = tab->segs[i].offset + tab->segs[i].len - at;
	if (left < len)
		*run = left;
	return 0;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The fragment layout of a receive (frag-layout.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "frag-layout.h"

void layout_init(struct layout *l, uint32_t page)
{
	memset(l, 0, sizeof(*l));
	l->page = page;
	l->len_min = UINT32_MAX;
	l->last_page = UINT64_MAX;
	l->seen = calloc(page / 8, 1);
}

void layout_free(struct layout *l)
{
	free(l->seen);
	l->seen = NULL;
}

/* A page visit ends: count its fragments. */
static void layout_end_run(struct layout *l)
{
	static const uint64_t top[] = { 1, 2, 3, 4, 8, 16, 32, UINT64_MAX };
	int b = 0;

	if (!l->run)
		return;
	while (l->run > top[b])
		b++;
	l->runs[b]++;
	l->visits++;
	l->run = 0;
}

void layout_add(struct layout *l, uint64_t offset, uint32_t len)
{
	uint64_t page = offset / l->page;
	uint32_t in = (uint32_t)(offset % l->page);

	l->frags++;
	l->bytes += len;
	l->at_zero += in == 0;
	l->align8 += in % 8 == 0;
	l->align64 += in % 64 == 0;
	l->eighth[in / (l->page / 8)]++;
	l->small += len < 64;
	l->straddle += in + len > l->page;
	l->len_min = len < l->len_min ? len : l->len_min;
	l->len_max = len > l->len_max ? len : l->len_max;
	if (l->seen && !(l->seen[in / 8] & (1u << (in % 8)))) {
		l->seen[in / 8] |= (uint8_t)(1u << (in % 8));
		l->distinct++;
	}
	if (page != l->last_page)
		layout_end_run(l);
	l->last_page = page;
	l->run++;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0;
}

void layout_print(struct layout *l, const struct devmemtcp_rx_stats *st)
{
	static const char *const run_names[] = { "1", "2", "3", "4", "5-8", "9-16", "17-32", "33+" };
	char line[512];
	int n = 0;

	layout_end_run(l);
	printf("layout: NIC page %u: %llu frags, %llu bytes, %llu page visits (%.2f frags each)\n",
	       l->page, (unsigned long long)l->frags, (unsigned long long)l->bytes,
	       (unsigned long long)l->visits, l->visits ? (double)l->frags / (double)l->visits : 0);
	for (int i = 0; i < 8; i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %.1f", pct(l->eighth[i], l->frags));
	printf("layout: offset in page: at 0 %.1f%%, distinct %llu, 64-byte aligned %.1f%%, 8-byte aligned %.1f%%; by eighths of the page (%%):%s\n",
	       pct(l->at_zero, l->frags), (unsigned long long)l->distinct,
	       pct(l->align64, l->frags), pct(l->align8, l->frags), line);
	n = 0;
	for (int i = 0; i < 8; i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %s:%.1f", run_names[i],
			      pct(l->runs[i], l->visits));
	printf("layout: frags per page visit (%% of visits):%s\n", line);
	printf("layout: frag bytes: min %u, mean %.1f, max %u, under 64: %.1f%%\n",
	       l->frags ? l->len_min : 0, l->frags ? (double)l->bytes / (double)l->frags : 0,
	       l->len_max, pct(l->small, l->frags));
	printf("layout: tokens per DONTNEED %.1f (%llu tokens, %llu calls), frags per receive %.1f (%llu receives)\n",
	       st->dontneed_calls ? (double)st->tokens_released / (double)st->dontneed_calls : 0,
	       (unsigned long long)st->tokens_released, (unsigned long long)st->dontneed_calls,
	       st->recv_calls ? (double)st->frags / (double)st->recv_calls : 0,
	       (unsigned long long)st->recv_calls);
}

/* A module parameter of the simulated NIC (0 when unreadable). */
static unsigned long sim_param(const char *name)
{
	char path[128], v[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/devmemsim/parameters/%s", name);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(v, sizeof(v), f))
			v[0] = 0;
		fclose(f);
	}
	return v[0] == 'Y' ? 1 : strtoul(v, NULL, 0);
}

/* The receiving device's layout now, from its debugfs "layout" file
 * (driver profiles, gve's rx-buf-len); false when there is none. */
static bool sim_layout(unsigned long *buf, unsigned long *pack, unsigned long *align,
		       unsigned long *mix)
{
	FILE *f = fopen("/sys/kernel/debug/devmemsim/" VM_RX_IF "/layout", "r");
	bool ok;

	if (!f)
		return false;
	ok = fscanf(f, "buf_size %lu pack %lu align %lu mix %lu", buf, pack, align, mix) == 4;
	fclose(f);
	return ok;
}

/* The layout the fragments show is the one the simulated NIC was loaded
 * with: one NIC page per buffer, fixed-size buffers, or packed payloads
 * (at a driver's step: mlx5's strides, fbnic's 128 bytes). */
int layout_check(const struct layout *l)
{
	unsigned long buf = sim_param("rx_buf_size"), pack = sim_param("rx_pack");
	unsigned long mix = sim_param("rx_mix"), align = 0;
	double per_visit = l->visits ? (double)l->frags / (double)l->visits : 0;

	sim_layout(&buf, &pack, &align, &mix);
	if (buf >= l->page)	/* a buffer per NIC page (gve's 4096) */
		buf = 0;

	T_CHECK(l->frags > 0, "no fragments");
	T_CHECK(l->straddle == 0, "%llu fragments cross a NIC page end",
		(unsigned long long)l->straddle);
	if (buf) {
		for (uint32_t in = 0; l->seen && in < l->page; in++)
			T_CHECK(!(l->seen[in / 8] & (1u << (in % 8))) || in % buf == 0,
				"rx_buf_size %lu: a fragment at offset %u of its page", buf, in);
		T_CHECK(l->len_max <= buf, "rx_buf_size %lu: a fragment of %u bytes", buf,
			l->len_max);
		T_CHECK(l->at_zero < l->frags && per_visit > 1.5,
			"rx_buf_size %lu: %.2f fragments per page", buf, per_visit);
	} else if (pack && align) {
		for (uint32_t in = 0; l->seen && in < l->page; in++)
			T_CHECK(!(l->seen[in / 8] & (1u << (in % 8))) || in % align == 0,
				"payloads at %lu-byte steps: a fragment at offset %u of its page",
				align, in);
		T_CHECK(l->at_zero < l->frags && per_visit > 1.5,
			"payloads at %lu-byte steps: %.2f fragments per page", align, per_visit);
	} else if (pack) {
		/* packed payloads start wherever the previous one ended:
		 * many offsets (one NIC page per buffer has 1, fixed-size
		 * buffers page/size on one grid, which the branch above
		 * checks), several fragments per page */
		T_CHECK(l->distinct > 16 && per_visit > 2.0,
			"rx_pack: %llu distinct offsets, %.2f fragments per page",
			(unsigned long long)l->distinct, per_visit);
	} else {
		T_CHECK(l->at_zero == l->frags, "one NIC page per buffer, yet %llu of %llu fragments at an offset",
			(unsigned long long)(l->frags - l->at_zero), (unsigned long long)l->frags);
	}
	if (mix)
		T_CHECK(l->small > 0 && l->len_min < 64,
			"rx_mix: no fragment under 64 bytes (min %u)", l->len_min);
	return 0;
}

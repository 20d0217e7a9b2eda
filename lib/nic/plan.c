// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The planners of the NIC layer (nic.h, "plan"): which queues a new owner
 * gets, the default RSS table that keeps traffic off them, an RSS
 * context's table, and the shared settings the owners need
 * (dmt_derive_shared).  Pure functions of their arguments, unit-tested
 * (test-nic-plan.c, test-nic-owners.c); the setup (nic.c) and the owners'
 * shared settings (owners.c, shared.c) call them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nic.h"
#include "core/uapi.h"

int dmt_plan_queues(uint32_t nrx, const uint32_t *req, uint32_t nreq,
		    uint32_t k, bool allow_all, uint32_t *out, char *why,
		    size_t whylen)
{
	if (req) {
		if (nreq == 0) {
			snprintf(why, whylen, "the queue list is empty: give at least one RX queue");
			return -EINVAL;
		}
		for (uint32_t i = 0; i < nreq; i++) {
			if (req[i] >= nrx) {
				snprintf(why, whylen,
					 "RX queue %u is out of range: the interface has %u RX queues (0-%u); "
					 "pick a lower index or add channels with ethtool -L",
					 req[i], nrx, nrx ? nrx - 1 : 0);
				return -ERANGE;
			}
			for (uint32_t j = 0; j < i; j++) {
				if (req[j] == req[i]) {
					snprintf(why, whylen,
						 "RX queue %u is listed twice: list each queue once",
						 req[i]);
					return -EINVAL;
				}
			}
			out[i] = req[i];
		}
		k = nreq;
	} else {
		if (k == 0)
			k = 1;
		if (k > nrx) {
			snprintf(why, whylen,
				 "%u devmem queues asked for but the interface has %u RX queues: "
				 "ask for fewer or add channels with ethtool -L",
				 k, nrx);
			return -ERANGE;
		}
		for (uint32_t i = 0; i < k; i++)
			out[i] = nrx - k + i;
	}
	if (k >= nrx && !allow_all) {
		snprintf(why, whylen,
			 "all %u RX queues would be devmem queues, leaving none for other traffic: "
			 "use fewer queues or add channels with ethtool -L",
			 nrx);
		return -EINVAL;
	}
	return (int)k;
}

static bool in_set(uint32_t v, const uint32_t *set, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

bool dmt_rss_is_default(const uint32_t *cur, uint32_t n, uint32_t nrx)
{
	if (!nrx)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (cur[i] != i % nrx)
			return false;
	return true;
}

int dmt_plan_rss(const uint32_t *cur, uint32_t n, uint32_t nrx,
		 const uint32_t *queues, uint32_t k, uint32_t *out)
{
	uint32_t others[4096], nothers = 0, r = 0;
	bool changed = false, def = dmt_rss_is_default(cur, n, nrx);

	for (uint32_t q = 0; q < nrx && nothers < ARRAY_SIZE(others); q++)
		if (!in_set(q, queues, k))
			others[nothers++] = q;
	if (!nothers)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (def)
			out[i] = others[i % nothers];
		else if (in_set(cur[i], queues, k))
			out[i] = others[r++ % nothers];
		else
			out[i] = cur[i];
		changed |= out[i] != cur[i];
	}
	return changed;
}

void dmt_plan_ctx(uint32_t n, const uint32_t *queues, uint32_t k, uint32_t *out)
{
	for (uint32_t i = 0; i < n; i++)
		out[i] = queues[i % k];
}

bool dmt_in_list(uint32_t v, const uint32_t *set, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

/* q is a queue of an owner that keeps RSS on its queues. */
static bool kept_in_rss(uint32_t q, const struct dmt_owner *const *owners, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (owners[i]->keep_rss && dmt_in_list(q, owners[i]->queues, owners[i]->nqueues))
			return true;
	return false;
}

int dmt_derive_shared(const struct dmt_base *b, uint32_t nrx,
		      const struct dmt_owner *const *owners, size_t n,
		      const uint32_t *bound, uint32_t nbound, bool more_rules,
		      struct dmt_shared *t)
{
	const struct dmt_shared *bl = &b->baseline, *keep;
	bool rules = more_rules;
	uint32_t *uni, k = 0, held = 0;
	int err = dmt_shared_copy(t, bl);

	if (err < 0 || (n == 0 && nbound == 0))
		return err;
	uni = dmt_calloc(nrx ? nrx : 1, sizeof(*uni));
	if (!uni) {
		dmt_shared_free(t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct dmt_owner *o = owners[i];

		rules |= o->nrules > 0;
		for (uint32_t q = 0; !o->keep_rss && q < o->nqueues; q++)
			if (o->queues[q] < nrx && !dmt_in_list(o->queues[q], uni, k))
				uni[k++] = o->queues[q];
	}
	/* whoever has them: their bytes go where someone can read them */
	for (uint32_t i = 0; i < nbound; i++) {
		if (bound[i] >= nrx || kept_in_rss(bound[i], owners, n))
			continue;
		held++;
		if (!dmt_in_list(bound[i], uni, k))
			uni[k++] = bound[i];
	}
	if (n == 0 && held == 0) {
		free(uni);
		return 0;	/* the baseline */
	}
	/* also when the baseline did not show it (mlx5_core until set) */
	t->tds = DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED;
	t->hds = bl->hds < 0 ? -1 : 0;
	t->ntuple = bl->ntuple || rules;
	/* No queue left for the rest: the table stays as the owners last
	 * set it (only an owner with keep_rss may take every queue). */
	keep = b->applied.rss_size == bl->rss_size ? &b->applied : bl;
	if (k && bl->rss_size &&
	    dmt_plan_rss(bl->rss, bl->rss_size, nrx, uni, k, t->rss) < 0)
		memcpy(t->rss, keep->rss, bl->rss_size * 4);
	free(uni);
	return 0;
}

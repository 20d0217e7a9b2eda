// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The NIC journal parser and writer (lib/journal.c) as a round trip: any
 * text the parser accepts must format to a text that parses to the same
 * journal, and formatting that journal again must give the same text.
 * A journal a crashed process left is what a later process undoes from:
 * an accepted journal that cannot be written back, or changes meaning
 * when it is, loses that evidence.
 *
 * The journal functions are reached only through the adapter below, so
 * that a new journal format is a change of these few lines.
 */
#include <errno.h>

#include "fuzz.h"
#include "nic.h"

/* ---- adapter: the journal format under test ----------------------------- */

typedef struct dmt_journal journal_t;

static int j_parse(const char *text, size_t len, journal_t *j)
{
	return dmt_journal_parse(text, len, j, NULL);
}

static int j_format(const journal_t *j, char **text, size_t *len)
{
	return dmt_journal_format(j, text, len);
}

static void j_free(journal_t *j)
{
	dmt_journal_free(j);
}

static bool same_list(const uint32_t *a, uint32_t na, const uint32_t *b,
		      uint32_t nb)
{
	return na == nb && (!na || memcmp(a, b, na * sizeof(*a)) == 0);
}

/* Field by field (pointers compared by what they point at). */
static bool j_equal(const journal_t *a, const journal_t *b)
{
	if (a->pid != b->pid || strcmp(a->comm, b->comm) ||
	    strcmp(a->ifname, b->ifname) || a->ifindex != b->ifindex ||
	    a->netns != b->netns ||
	    !same_list(a->queues, a->nqueues, b->queues, b->nqueues))
		return false;
	if (a->have_prior != b->have_prior || a->has_tds != b->has_tds ||
	    a->tds != b->tds || a->has_hds != b->has_hds || a->hds != b->hds ||
	    a->ntuple_on != b->ntuple_on || a->rss_default != b->rss_default ||
	    !same_list(a->rss_indir, a->rss_size, b->rss_indir, b->rss_size) ||
	    !same_list(a->prior_ctx, a->nprior_ctx, b->prior_ctx,
		       b->nprior_ctx) ||
	    !same_list(a->prior_rules, a->nprior_rules, b->prior_rules,
		       b->nprior_rules))
		return false;
	if (a->changed != b->changed ||
	    !same_list(a->rss_set, a->rss_set_size, b->rss_set,
		       b->rss_set_size) ||
	    a->ctx_id != b->ctx_id ||
	    !same_list(a->ctx_indir, a->ctx_size, b->ctx_indir, b->ctx_size) ||
	    a->nrules != b->nrules)
		return false;
	for (uint32_t i = 0; i < a->nrules; i++) {
		const struct dmt_jrule *x = &a->rules[i], *y = &b->rules[i];

		if (x->id != y->id || x->placed != y->placed ||
		    x->location != y->location ||
		    x->rss_context != y->rss_context ||
		    memcmp(&x->fs, &y->fs, sizeof(x->fs)))
			return false;
	}
	return true;
}

/* ---- the harness --------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	journal_t j, k, l;
	char *text, *again;
	size_t len, len2;
	int ret;

	ret = j_parse((const char *)data, size, &j);
	FZ_CHECK(ret == 0 || ret == -EBADMSG);
	if (ret)
		return 0;
	FZ_CHECK(j_format(&j, &text, &len) == 0);
	FZ_CHECK(strlen(text) == len);
	ret = j_parse(text, len, &k);
	if (ret)
		fprintf(stderr, "journal written back unparsable:\n%s", text);
	FZ_CHECK(ret == 0);
	FZ_CHECK(j_equal(&j, &k));
	FZ_CHECK(j_format(&k, &again, &len2) == 0);
	FZ_CHECK(len == len2 && memcmp(text, again, len) == 0);
	/* and the formatted text is a fixed point of the parser too */
	FZ_CHECK(j_parse(again, len2, &l) == 0 && j_equal(&k, &l));
	j_free(&j);
	j_free(&k);
	j_free(&l);
	free(text);
	free(again);
	return 0;
}

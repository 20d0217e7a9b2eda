// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The devmemtcp-broker policy file (broker/policy.c,
 * devmemtcp-broker.conf(5)) on arbitrary text.  A file is refused whole
 * (-EBADMSG with a line of the file and a reason, nothing kept) or taken
 * with every rule in range; its canonical text (dmt_policy_format) parses
 * to the same rules and formats to the same bytes.  Then the questions
 * the broker asks of a policy: names resolved through a lookup that knows
 * some of them, the rule that applies to a caller on an interface (the
 * first that names both, as a linear scan finds it), the largest udmabuf
 * and udmabuf-total, and which flows a rule lets through.
 */
#include <errno.h>

#include "fuzz.h"
#include "policy.h"

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > DMT_POL_MAX_NAME || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.",
			    s[i]))
			return false;
	return true;
}

static void check_rule(const struct dmt_pol_rule *r)
{
	FZ_CHECK(r->who <= DMT_POL_EVERYONE);
	if (r->who == DMT_POL_USER || r->who == DMT_POL_GROUP)
		FZ_CHECK(valid_name(r->name));
	if (r->who == DMT_POL_UID || r->who == DMT_POL_GID)
		FZ_CHECK(r->id < UINT32_MAX);
	FZ_CHECK(r->any_if != (r->nifs > 0));
	FZ_CHECK(r->nifs <= DMT_POL_MAX_IFS);
	for (uint32_t i = 0; i < r->nifs; i++) {
		size_t n = strnlen(r->ifs[i], IF_NAMESIZE);

		FZ_CHECK(n > 0 && n < IF_NAMESIZE);
		FZ_CHECK(!strpbrk(r->ifs[i], " \t,/:"));
		for (uint32_t k = 0; k < i; k++)
			FZ_CHECK(strcmp(r->ifs[k], r->ifs[i]) != 0);
	}
	FZ_CHECK(r->queues >= 1 && r->queues <= DMT_POL_MAX_QUEUES);
	FZ_CHECK(r->nqranges <= DMT_POL_MAX_QRANGES);
	for (uint32_t i = 0; i < r->nqranges; i++) {
		uint64_t named = 0;

		FZ_CHECK(r->qranges[i][0] <= r->qranges[i][1] &&
			 r->qranges[i][1] <= DMT_POL_MAX_QID);
		for (uint32_t k = 0; k < i; k++)
			FZ_CHECK(r->qranges[i][1] < r->qranges[k][0] ||
				 r->qranges[i][0] > r->qranges[k][1]);
		FZ_CHECK(dmt_policy_queue_ok(r, r->qranges[i][0]) &&
			 dmt_policy_queue_ok(r, r->qranges[i][1]));
		for (uint32_t k = 0; k < r->nqranges; k++)
			named += r->qranges[k][1] - r->qranges[k][0] + 1;
		/* the count is how many it names, at most the most at once */
		FZ_CHECK(r->queues == (named < DMT_POL_MAX_QUEUES ? named : DMT_POL_MAX_QUEUES));
	}
	FZ_CHECK(!r->any_port || !r->nports);
	FZ_CHECK(r->nports <= DMT_POL_MAX_PORTS);
	for (uint32_t i = 0; i < r->nports; i++) {
		FZ_CHECK(r->ports[i][0] >= 1 && r->ports[i][0] <= r->ports[i][1]);
		for (uint32_t k = 0; k < i; k++)
			FZ_CHECK(r->ports[i][1] < r->ports[k][0] || r->ports[i][0] > r->ports[k][1]);
	}
	FZ_CHECK(r->udmabuf <= DMT_POL_MAX_UDMABUF);
	FZ_CHECK(r->udmabuf_total <= DMT_POL_MAX_UDMABUF);
	FZ_CHECK(!r->udmabuf_total || (r->udmabuf && r->udmabuf_total >= r->udmabuf));
}

/* Two rules say the same, line numbers aside. */
static bool same_rule(const struct dmt_pol_rule *a, const struct dmt_pol_rule *b)
{
	if (a->who != b->who || strcmp(a->name, b->name) || a->id != b->id ||
	    a->any_if != b->any_if || a->nifs != b->nifs || a->queues != b->queues ||
	    a->any_port != b->any_port || a->nports != b->nports || a->nqranges != b->nqranges ||
	    a->udmabuf != b->udmabuf || a->udmabuf_total != b->udmabuf_total || a->tx != b->tx)
		return false;
	for (uint32_t i = 0; i < a->nifs; i++)
		if (strcmp(a->ifs[i], b->ifs[i]))
			return false;
	for (uint32_t i = 0; i < a->nports; i++)
		if (a->ports[i][0] != b->ports[i][0] || a->ports[i][1] != b->ports[i][1])
			return false;
	for (uint32_t i = 0; i < a->nqranges; i++)
		if (a->qranges[i][0] != b->qranges[i][0] || a->qranges[i][1] != b->qranges[i][1])
			return false;
	return true;
}

/* Names of one letter are unknown, others resolve to their length (a
 * user) or 1000 + their length (a group). */
static int lookup(bool group, const char *name, uint32_t *id)
{
	size_t n = strlen(name);

	if (n == 1)
		return -ENOENT;
	*id = (uint32_t)n + (group ? 1000 : 0);
	return 0;
}

/* The model: does rule r name the caller (uid, gid), and ifname. */
static bool names_who(const struct dmt_pol_rule *r, uint32_t uid, uint32_t gid)
{
	return r->who == DMT_POL_EVERYONE ||
	       ((r->who == DMT_POL_USER || r->who == DMT_POL_UID) && r->id == uid) ||
	       ((r->who == DMT_POL_GROUP || r->who == DMT_POL_GID) && r->id == gid);
}

static bool names_if(const struct dmt_pol_rule *r, const char *ifname)
{
	bool ifs = r->any_if;

	for (uint32_t i = 0; i < r->nifs && !ifs; i++)
		ifs = !strcmp(r->ifs[i], ifname);
	return ifs;
}

/* Which flows rule r lets through: a whole destination port inside one
 * of its ranges, or any flow with "ports any". */
static void check_flows(const struct dmt_pol_rule *r)
{
	struct devmemtcp_flow f = { .family = AF_INET, .dst_port_mask = 0xffff };

	for (uint32_t k = 0; k < r->nports; k++) {
		f.dst_port = r->ports[k][0];
		FZ_CHECK(dmt_policy_flow_ok(r, &f));
		f.dst_port = r->ports[k][1];
		FZ_CHECK(dmt_policy_flow_ok(r, &f));
	}
	f.dst_port = 0;
	FZ_CHECK(dmt_policy_flow_ok(r, &f) == r->any_port);
	f.dst_port_mask = 0;
	FZ_CHECK(dmt_policy_flow_ok(r, &f) == r->any_port);
}

/* For the caller each rule names (its id as uid and gid) on the rule's
 * first interface (or one no rule lists): the broker's answers against a
 * linear scan. */
static void check_questions(const struct dmt_policy *p)
{
	for (size_t i = 0; i < p->n; i++) {
		const struct dmt_pol_rule *r = &p->rules[i];
		uint32_t id = r->who == DMT_POL_EVERYONE ? 4242 : r->id;
		struct dmt_pol_who_is w = { .uid = id, .gids = &id, .ngids = 1 };
		const char *ifname = r->nifs ? r->ifs[0] : "none0";
		const struct dmt_pol_rule *want = NULL, *trule = NULL, *got;
		uint64_t udmabuf = 0, total = 0;

		for (size_t k = 0; k < p->n; k++) {
			const struct dmt_pol_rule *o = &p->rules[k];
			/* udmabuf-total: as given, else 4 times udmabuf */
			uint64_t t = o->udmabuf_total ? o->udmabuf_total
				     : o->udmabuf > DMT_POL_MAX_UDMABUF / 4 ? DMT_POL_MAX_UDMABUF
									    : o->udmabuf * 4;

			if (!want && names_who(o, id, id) && names_if(o, ifname))
				want = o;
			if (names_who(o, id, id) && o->udmabuf > udmabuf)
				udmabuf = o->udmabuf;
			if (names_who(o, id, id) && o->udmabuf && t > total) {
				total = t;
				trule = o;
			}
		}
		FZ_CHECK(want && want <= r);
		FZ_CHECK(dmt_policy_match(p, &w, ifname) == want);
		FZ_CHECK(dmt_policy_udmabuf(p, &w) == udmabuf);
		FZ_CHECK(dmt_policy_udmabuf_total(p, &w, &got) == total && got == trule);
		FZ_CHECK(total >= udmabuf);
		check_flows(r);
	}
}

static void check_resolve(struct dmt_policy *p)
{
	unsigned int line = 12345;
	size_t bad = p->n;
	char why[256];
	int ret;

	for (size_t i = 0; i < p->n && bad == p->n; i++)
		if ((p->rules[i].who == DMT_POL_USER || p->rules[i].who == DMT_POL_GROUP) &&
		    strlen(p->rules[i].name) == 1)
			bad = i;
	memset(why, 0xa5, sizeof(why));
	ret = dmt_policy_resolve(p, lookup, &line, why, sizeof(why));
	if (bad < p->n) {
		FZ_CHECK(ret == -ENOENT);
		FZ_CHECK(line == p->rules[bad].line);
		FZ_CHECK(memchr(why, 0, sizeof(why)) && strstr(why, p->rules[bad].name));
		return;
	}
	FZ_CHECK(ret == 0 && line == 12345);
	for (size_t i = 0; i < p->n; i++)
		if (p->rules[i].who == DMT_POL_USER || p->rules[i].who == DMT_POL_GROUP)
			FZ_CHECK(p->rules[i].id == strlen(p->rules[i].name) +
				 (p->rules[i].who == DMT_POL_GROUP ? 1000 : 0));
	check_questions(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dmt_policy p, k;
	unsigned int line, lines = 1;
	char why[256], *text, *again;
	size_t len, alen;
	int ret;

	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	memset(why, 0xa5, sizeof(why));
	ret = dmt_policy_parse((const char *)data, size, &p, &line, why, sizeof(why));
	FZ_CHECK(ret == 0 || ret == -EBADMSG || ret == -ENOMEM);
	FZ_CHECK(memchr(why, 0, sizeof(why)) != NULL);
	if (ret) {
		FZ_CHECK(p.n == 0 && p.rules == NULL);
		FZ_CHECK(ret == -ENOMEM || (line >= 1 && line <= lines && why[0]));
		return 0;
	}
	FZ_CHECK(line == 0);
	FZ_CHECK(p.n <= DMT_POL_MAX_RULES);
	for (size_t i = 0; i < p.n; i++) {
		check_rule(&p.rules[i]);
		FZ_CHECK(p.rules[i].line >= 1 && p.rules[i].line <= lines);
		FZ_CHECK(i == 0 || p.rules[i].line > p.rules[i - 1].line);
	}

	/* the canonical text: same rules, same bytes again */
	FZ_CHECK(dmt_policy_format(&p, &text, &len) == 0);
	FZ_CHECK(strlen(text) == len);
	ret = dmt_policy_parse(text, len, &k, &line, why, sizeof(why));
	if (ret)
		fprintf(stderr, "canonical text refused at line %u (%s):\n%s", line, why, text);
	FZ_CHECK(ret == 0 && k.n == p.n);
	for (size_t i = 0; i < p.n; i++) {
		FZ_CHECK(same_rule(&p.rules[i], &k.rules[i]));
		FZ_CHECK(k.rules[i].line == i + 1);
	}
	FZ_CHECK(dmt_policy_format(&k, &again, &alen) == 0);
	FZ_CHECK(alen == len && memcmp(again, text, len) == 0);
	free(again);
	free(text);
	dmt_policy_free(&k);

	check_resolve(&p);
	dmt_policy_free(&p);
	FZ_CHECK(p.n == 0 && p.rules == NULL);
	return 0;
}

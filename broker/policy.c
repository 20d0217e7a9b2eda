// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The policy file of devmemtcp-broker (policy.h, devmemtcp-broker.conf(5)):
 *
 *   # comment
 *   allow WHO interface IF[,IF...]|* [queues N|Q-R[,...]] [ports P[-Q][,...]|any]
 *         [udmabuf SIZE] [udmabuf-total SIZE] [tx]
 *
 * WHO is "user NAME", "uid N", "group NAME", "gid N" or "everyone".
 * "queues 2" is a count; "queues 3,5-7" (a list, or one range: a single
 * queue is "4-4") names the RX queue ids the caller may ask for, and the
 * count is how many it names (at most DMT_POL_MAX_QUEUES).  One
 * rule per line, words separated by blanks, each keyword once, numbers in
 * plain decimal.  Anything else refuses the whole file with its line.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

/* One line being parsed: its words. */
struct words {
	char *w[64];
	size_t n;
};

static int fail(char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Split line (modified) into words; more than fit is an error. */
static int split(char *line, struct words *ws, char *why, size_t whylen)
{
	char *p = line;

	ws->n = 0;
	for (;;) {
		while (is_blank(*p))
			p++;
		if (!*p)
			return 0;
		if (ws->n == sizeof(ws->w) / sizeof(ws->w[0]))
			return fail(why, whylen, "more than %zu words", ws->n);
		ws->w[ws->n++] = p;
		while (*p && !is_blank(*p))
			p++;
		if (*p)
			*p++ = '\0';
	}
}

/* Plain decimal (no sign, no leading zero) in [lo, hi]. */
static bool number(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
	uint64_t x = 0;

	if (!*s || (s[0] == '0' && s[1]))
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	if (x < lo || x > hi)
		return false;
	*v = x;
	return true;
}

static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > DMT_POL_MAX_NAME || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

/* An interface name as the kernel takes it. */
static bool ifname_ok(const char *s, size_t n)
{
	if (!n || n >= IF_NAMESIZE || (n == 1 && s[0] == '.') ||
	    (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '/' || s[i] == ':' || s[i] == ',')
			return false;
	return true;
}

static int parse_who(struct words *ws, size_t *i, struct dmt_pol_rule *r, char *why,
		     size_t whylen)
{
	const char *kind = ws->w[*i];
	uint64_t v;

	if (!strcmp(kind, "everyone")) {
		r->who = DMT_POL_EVERYONE;
		(*i)++;
		return 0;
	}
	if (*i + 1 >= ws->n)
		return fail(why, whylen, "\"allow\" wants user NAME, uid N, group NAME, gid N or everyone");
	if (!strcmp(kind, "user") || !strcmp(kind, "group")) {
		if (!name_ok(ws->w[*i + 1]))
			return fail(why, whylen, "\"%.40s\" is not a %s name (letters, digits, '_', '-', '.', at most %d)",
				    ws->w[*i + 1], kind, DMT_POL_MAX_NAME);
		r->who = kind[0] == 'u' ? DMT_POL_USER : DMT_POL_GROUP;
		snprintf(r->name, sizeof(r->name), "%s", ws->w[*i + 1]);
	} else if (!strcmp(kind, "uid") || !strcmp(kind, "gid")) {
		if (!number(ws->w[*i + 1], 0, UINT32_MAX - 1, &v))
			return fail(why, whylen, "\"%.40s\" is not a %s (0 to %u)", ws->w[*i + 1],
				    kind, UINT32_MAX - 1);
		r->who = kind[0] == 'u' ? DMT_POL_UID : DMT_POL_GID;
		r->id = (uint32_t)v;
	} else {
		return fail(why, whylen, "\"allow\" wants user NAME, uid N, group NAME, gid N or everyone, not \"%.40s\"",
			    kind);
	}
	*i += 2;
	return 0;
}

static int parse_ifs(char *s, struct dmt_pol_rule *r, char *why, size_t whylen)
{
	if (!strcmp(s, "*")) {
		r->any_if = true;
		return 0;
	}
	for (char *p = s;;) {
		size_t n = strcspn(p, ",");

		if (!ifname_ok(p, n))
			return fail(why, whylen, "\"%.*s\" is not an interface name", (int)(n > 40 ? 40 : n), p);
		if (r->nifs == DMT_POL_MAX_IFS)
			return fail(why, whylen, "more than %d interfaces in one rule", DMT_POL_MAX_IFS);
		memcpy(r->ifs[r->nifs], p, n);
		r->ifs[r->nifs][n] = '\0';
		for (uint32_t k = 0; k < r->nifs; k++)
			if (!strcmp(r->ifs[k], r->ifs[r->nifs]))
				return fail(why, whylen, "interface %s is listed twice", r->ifs[k]);
		r->nifs++;
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

static int parse_ports(char *s, struct dmt_pol_rule *r, char *why, size_t whylen)
{
	if (!strcmp(s, "any")) {
		r->any_port = true;
		return 0;
	}
	for (char *p = s;;) {
		char *end = p + strcspn(p, ","), *dash, save = *end;
		uint64_t lo, hi;

		*end = '\0';
		dash = strchr(p, '-');
		if (dash)
			*dash = '\0';
		if (!number(p, 1, 65535, &lo) || !number(dash ? dash + 1 : p, 1, 65535, &hi) ||
		    hi < lo || (dash && hi == lo))
			return fail(why, whylen, "ports: a port is 1-65535, a range P-Q with P < Q, ranges separated by ','");
		if (r->nports == DMT_POL_MAX_PORTS)
			return fail(why, whylen, "more than %d port ranges in one rule", DMT_POL_MAX_PORTS);
		for (uint32_t k = 0; k < r->nports; k++)
			if (lo <= r->ports[k][1] && hi >= r->ports[k][0])
				return fail(why, whylen, "port ranges %u-%u and %u-%u overlap",
					    r->ports[k][0], r->ports[k][1], (unsigned int)lo, (unsigned int)hi);
		r->ports[r->nports][0] = (uint16_t)lo;
		r->ports[r->nports][1] = (uint16_t)hi;
		r->nports++;
		if (!save)
			return 0;
		p = end + 1;
	}
}

/* "queues": a count, or queue ids in ranges (a ',' or '-' makes a list). */
static int parse_queues(char *s, struct dmt_pol_rule *r, char *why, size_t whylen)
{
	static const char usage[] =
		"queues: a count from 1 to %d, or queue ids Q[-R][,...] from 0 to %d with Q <= R (queues 3,5-7; one queue: queues 4-4)";
	uint64_t v, total = 0;

	if (!strpbrk(s, ",-")) {
		if (!number(s, 1, DMT_POL_MAX_QUEUES, &v))
			return fail(why, whylen, usage, DMT_POL_MAX_QUEUES, DMT_POL_MAX_QID);
		r->queues = (uint32_t)v;
		return 0;
	}
	for (char *p = s;;) {
		char *end = p + strcspn(p, ","), *dash, save = *end;
		uint64_t lo, hi;

		*end = '\0';
		dash = strchr(p, '-');
		if (dash)
			*dash = '\0';
		if (!number(p, 0, DMT_POL_MAX_QID, &lo) ||
		    !number(dash ? dash + 1 : p, 0, DMT_POL_MAX_QID, &hi) || hi < lo)
			return fail(why, whylen, usage, DMT_POL_MAX_QUEUES, DMT_POL_MAX_QID);
		if (r->nqranges == DMT_POL_MAX_QRANGES)
			return fail(why, whylen, "more than %d queue ranges in one rule", DMT_POL_MAX_QRANGES);
		for (uint32_t k = 0; k < r->nqranges; k++)
			if (lo <= r->qranges[k][1] && hi >= r->qranges[k][0])
				return fail(why, whylen, "queue ranges %u-%u and %u-%u overlap",
					    r->qranges[k][0], r->qranges[k][1], (unsigned int)lo,
					    (unsigned int)hi);
		r->qranges[r->nqranges][0] = (uint32_t)lo;
		r->qranges[r->nqranges][1] = (uint32_t)hi;
		r->nqranges++;
		total += hi - lo + 1;
		if (!save)
			break;
		p = end + 1;
	}
	r->queues = total < DMT_POL_MAX_QUEUES ? (uint32_t)total : DMT_POL_MAX_QUEUES;
	return 0;
}

/* "64M": bytes, a K/M/G suffix (powers of 1024) or none; at most 1 TiB. */
static int parse_size(const char *key, char *s, uint64_t *v, char *why, size_t whylen)
{
	size_t n = strlen(s);
	unsigned int shift = 0;

	if (n && (s[n - 1] == 'K' || s[n - 1] == 'M' || s[n - 1] == 'G')) {
		shift = s[n - 1] == 'K' ? 10 : s[n - 1] == 'M' ? 20 : 30;
		s[n - 1] = '\0';
	}
	if (!number(s, 1, DMT_POL_MAX_UDMABUF >> shift, v))
		return fail(why, whylen, "%s: a size in bytes with K, M or G, from 1 to 1024G", key);
	*v <<= shift;
	return 0;
}

/* The keywords after WHO; each at most once, interface required. */
static int parse_keys(struct words *ws, size_t i, struct dmt_pol_rule *r, char *why,
		      size_t whylen)
{
	static const char *const keys[] = { "interface", "queues", "ports", "udmabuf", "tx",
					    "udmabuf-total" };
	bool seen[6] = { false };
	int err = 0;

	while (i < ws->n && !err) {
		size_t k;

		for (k = 0; k < 6 && strcmp(ws->w[i], keys[k]); k++)
			;
		if (k == 6)
			return fail(why, whylen, "unknown word \"%.40s\" (interface, queues, ports, udmabuf, udmabuf-total, tx)",
				    ws->w[i]);
		if (seen[k])
			return fail(why, whylen, "\"%s\" given twice", keys[k]);
		seen[k] = true;
		if (k == 4) {
			r->tx = true;
			i++;
			continue;
		}
		if (i + 1 >= ws->n)
			return fail(why, whylen, "\"%s\" wants a value", keys[k]);
		if (k == 0)
			err = parse_ifs(ws->w[i + 1], r, why, whylen);
		else if (k == 1)
			err = parse_queues(ws->w[i + 1], r, why, whylen);
		else if (k == 2)
			err = parse_ports(ws->w[i + 1], r, why, whylen);
		else if (k == 3)
			err = parse_size(keys[k], ws->w[i + 1], &r->udmabuf, why, whylen);
		else
			err = parse_size(keys[k], ws->w[i + 1], &r->udmabuf_total, why, whylen);
		i += 2;
	}
	if (!err && !seen[0])
		return fail(why, whylen, "a rule names its interfaces (interface IF[,IF...] or interface *)");
	if (!err && r->udmabuf_total && !r->udmabuf)
		return fail(why, whylen, "udmabuf-total without udmabuf: the rule lets the broker make no udmabuf");
	if (!err && r->udmabuf_total && r->udmabuf_total < r->udmabuf)
		return fail(why, whylen, "udmabuf-total is less than udmabuf: no udmabuf of that size could be made");
	return err;
}

static int parse_rule(char *line, struct dmt_pol_rule *r, char *why, size_t whylen)
{
	struct words ws;
	size_t i = 1;
	int err = split(line, &ws, why, whylen);

	if (err)
		return err;
	if (strcmp(ws.w[0], "allow"))
		return fail(why, whylen, "a rule starts with \"allow\", not \"%.40s\"", ws.w[0]);
	if (ws.n < 2)
		return fail(why, whylen, "\"allow\" wants user NAME, uid N, group NAME, gid N or everyone");
	r->queues = 1;
	err = parse_who(&ws, &i, r, why, whylen);
	if (!err)
		err = parse_keys(&ws, i, r, why, whylen);
	return err;
}

/* Blank or a comment. */
static bool empty_line(const char *s)
{
	while (is_blank(*s))
		s++;
	return !*s || *s == '#';
}

static int add_rule(struct dmt_policy *p, const struct dmt_pol_rule *r)
{
	struct dmt_pol_rule *v = realloc(p->rules, (p->n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	p->rules = v;
	v[p->n++] = *r;
	return 0;
}

int dmt_policy_parse(const char *text, size_t len, struct dmt_policy *p,
		     unsigned int *line, char *why, size_t whylen)
{
	char buf[DMT_POL_MAX_LINE + 1];
	size_t pos = 0;
	int err = 0;

	memset(p, 0, sizeof(*p));
	*line = 0;
	why[0] = '\0';
	while (pos < len && !err) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		struct dmt_pol_rule r;

		++*line;
		if (n > DMT_POL_MAX_LINE)
			err = fail(why, whylen, "longer than %d bytes", DMT_POL_MAX_LINE);
		else if (memchr(text + pos, '\0', n))
			err = fail(why, whylen, "a NUL byte");
		if (err)
			break;
		memcpy(buf, text + pos, n);
		buf[n] = '\0';
		pos += n + (nl != NULL);
		if (empty_line(buf))
			continue;
		memset(&r, 0, sizeof(r));
		r.line = *line;
		err = parse_rule(buf, &r, why, whylen);
		if (!err && p->n == DMT_POL_MAX_RULES)
			err = fail(why, whylen, "more than %d rules", DMT_POL_MAX_RULES);
		if (!err)
			err = add_rule(p, &r);
	}
	if (err) {
		dmt_policy_free(p);
		return err;
	}
	*line = 0;
	return 0;
}

void dmt_policy_free(struct dmt_policy *p)
{
	free(p->rules);
	p->rules = NULL;
	p->n = 0;
}

/* ---- the canonical text ---------------------------------------------- */

static void fmt_size(FILE *f, const char *key, uint64_t v)
{
	static const char sfx[] = "GMK";

	for (int i = 0; i < 3; i++) {
		unsigned int shift = 30 - 10 * (unsigned int)i;

		if (!(v & ((1ull << shift) - 1))) {
			fprintf(f, " %s %llu%c", key, (unsigned long long)(v >> shift), sfx[i]);
			return;
		}
	}
	fprintf(f, " %s %llu", key, (unsigned long long)v);
}

static void fmt_rule(FILE *f, const struct dmt_pol_rule *r)
{
	static const char *const who[] = { "user", "uid", "group", "gid", "everyone" };

	fprintf(f, "allow %s", who[r->who]);
	if (r->who == DMT_POL_USER || r->who == DMT_POL_GROUP)
		fprintf(f, " %s", r->name);
	else if (r->who != DMT_POL_EVERYONE)
		fprintf(f, " %u", r->id);
	fprintf(f, " interface ");
	if (r->any_if)
		fputc('*', f);
	for (uint32_t i = 0; i < r->nifs; i++)
		fprintf(f, "%s%s", i ? "," : "", r->ifs[i]);
	if (r->nqranges) {
		char q[DMT_POL_MAX_QRANGES * 12];

		dmt_policy_queues_str(r, q, sizeof(q));
		fprintf(f, " queues %s", q);
	} else {
		fprintf(f, " queues %u", r->queues);
	}
	if (r->any_port)
		fprintf(f, " ports any");
	for (uint32_t i = 0; i < r->nports; i++) {
		fprintf(f, "%s%u", i ? "," : " ports ", r->ports[i][0]);
		if (r->ports[i][1] != r->ports[i][0])
			fprintf(f, "-%u", r->ports[i][1]);
	}
	if (r->udmabuf)
		fmt_size(f, "udmabuf", r->udmabuf);
	if (r->udmabuf_total)
		fmt_size(f, "udmabuf-total", r->udmabuf_total);
	fprintf(f, "%s\n", r->tx ? " tx" : "");
}

int dmt_policy_format(const struct dmt_policy *p, char **out, size_t *len)
{
	FILE *f = open_memstream(out, len);

	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++)
		fmt_rule(f, &p->rules[i]);
	if (fclose(f))
		return -ENOMEM;
	return 0;
}

/* ---- names and matching -------------------------------------------- */

int dmt_policy_resolve(struct dmt_policy *p, dmt_pol_lookup_fn lookup,
		       unsigned int *line, char *why, size_t whylen)
{
	for (size_t i = 0; i < p->n; i++) {
		struct dmt_pol_rule *r = &p->rules[i];
		bool group = r->who == DMT_POL_GROUP;
		int err;

		if (r->who != DMT_POL_USER && !group)
			continue;
		err = lookup(group, r->name, &r->id);
		if (err) {
			*line = r->line;
			snprintf(why, whylen, "no %s \"%s\" (%s)", group ? "group" : "user", r->name,
				 err == -ENOENT ? "unknown name" : strerror(-err));
			return err == -ENOENT ? -ENOENT : err;
		}
	}
	return 0;
}

static bool names_caller(const struct dmt_pol_rule *r, const struct dmt_pol_who_is *w)
{
	switch (r->who) {
	case DMT_POL_EVERYONE:
		return true;
	case DMT_POL_USER:
	case DMT_POL_UID:
		return r->id == w->uid;
	case DMT_POL_GROUP:
	case DMT_POL_GID:
		for (size_t i = 0; i < w->ngids; i++)
			if (w->gids[i] == r->id)
				return true;
	}
	return false;
}

static bool names_if(const struct dmt_pol_rule *r, const char *ifname)
{
	if (r->any_if)
		return true;
	for (uint32_t i = 0; i < r->nifs; i++)
		if (!strcmp(r->ifs[i], ifname))
			return true;
	return false;
}

const struct dmt_pol_rule *dmt_policy_match(const struct dmt_policy *p,
					    const struct dmt_pol_who_is *w,
					    const char *ifname)
{
	for (size_t i = 0; i < p->n; i++)
		if (names_caller(&p->rules[i], w) && names_if(&p->rules[i], ifname))
			return &p->rules[i];
	return NULL;
}

uint64_t dmt_policy_udmabuf(const struct dmt_policy *p, const struct dmt_pol_who_is *w)
{
	uint64_t max = 0;

	for (size_t i = 0; i < p->n; i++)
		if (names_caller(&p->rules[i], w) && p->rules[i].udmabuf > max)
			max = p->rules[i].udmabuf;
	return max;
}

uint64_t dmt_policy_rule_total(const struct dmt_pol_rule *r)
{
	if (r->udmabuf_total)
		return r->udmabuf_total;
	return r->udmabuf > DMT_POL_MAX_UDMABUF / DMT_POL_UDMABUF_TOTAL_TIMES
		       ? DMT_POL_MAX_UDMABUF
		       : r->udmabuf * DMT_POL_UDMABUF_TOTAL_TIMES;
}

uint64_t dmt_policy_udmabuf_total(const struct dmt_policy *p, const struct dmt_pol_who_is *w,
				  const struct dmt_pol_rule **rule)
{
	uint64_t max = 0;

	*rule = NULL;
	for (size_t i = 0; i < p->n; i++) {
		uint64_t t = dmt_policy_rule_total(&p->rules[i]);

		if (names_caller(&p->rules[i], w) && p->rules[i].udmabuf && t > max) {
			max = t;
			*rule = &p->rules[i];
		}
	}
	return max;
}

bool dmt_policy_queue_ok(const struct dmt_pol_rule *r, uint32_t id)
{
	if (!r->nqranges)
		return true;
	for (uint32_t i = 0; i < r->nqranges; i++)
		if (id >= r->qranges[i][0] && id <= r->qranges[i][1])
			return true;
	return false;
}

void dmt_policy_queues_str(const struct dmt_pol_rule *r, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < r->nqranges && off < len; i++) {
		int n;

		if (r->qranges[i][0] == r->qranges[i][1] && r->nqranges > 1)
			n = snprintf(buf + off, len - off, "%s%u", i ? "," : "", r->qranges[i][0]);
		else
			n = snprintf(buf + off, len - off, "%s%u-%u", i ? "," : "",
				     r->qranges[i][0], r->qranges[i][1]);
		if (n < 0)
			return;
		off += (size_t)n;
	}
}

bool dmt_policy_flow_ok(const struct dmt_pol_rule *r, const struct devmemtcp_flow *f)
{
	if (r->any_port)
		return true;
	if (f->dst_port_mask != 0xffff)
		return false;
	for (uint32_t i = 0; i < r->nports; i++)
		if (f->dst_port >= r->ports[i][0] && f->dst_port <= r->ports[i][1])
			return true;
	return false;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The files of the NIC layer under the run directory (lib/nic/nic.h): their
 * text formats (IF.base, IF.owner.PID.START.N: small text files, so that
 * an operator can read what a dead process left behind; pure functions,
 * fuzzed): formatting and strict, canonical parsing.  The run directory,
 * its files and the interface lock are in rundir.c.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "nic.h"

/* ---------------------------------------------------------------------- */
/* the many-owners formats: strict, canonical, pure                        */

void dmt_shared_free(struct dmt_shared *s)
{
	free(s->rss);
	s->rss = NULL;
	s->rss_size = 0;
}

int dmt_shared_copy(struct dmt_shared *dst, const struct dmt_shared *src)
{
	*dst = *src;
	dst->rss = NULL;
	if (!src->rss_size)
		return 0;
	dst->rss = dmt_malloc(src->rss_size * sizeof(uint32_t));
	if (!dst->rss) {
		dst->rss_size = 0;
		return -ENOMEM;
	}
	memcpy(dst->rss, src->rss, src->rss_size * sizeof(uint32_t));
	return 0;
}

void dmt_base_free(struct dmt_base *b)
{
	dmt_shared_free(&b->baseline);
	dmt_shared_free(&b->applied);
	dmt_shared_free(&b->applying);
	memset(b, 0, sizeof(*b));
}

void dmt_owner_free(struct dmt_owner *o)
{
	free(o->queues);
	free(o->ctx_before);
	free(o->ctx_indir);
	for (uint32_t i = 0; i < o->nrules; i++)
		free(o->rules[i].before);
	free(o->rules);
	memset(o, 0, sizeof(*o));
}

bool dmt_ifname_valid(const char *s, size_t n)
{
	if (n == 0 || n >= IF_NAMESIZE)
		return false;
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '/' || s[i] == ':')
			return false;
	return true;
}

void dmt_owner_name(const struct dmt_owner *o, char *name, size_t len)
{
	snprintf(name, len, "%s.owner.%ld.%llu.%u", o->ifname, (long)o->pid,
		 (unsigned long long)o->start, o->handle);
}

/* ---- formatting ---- */

static void fmt_list(FILE *f, const uint32_t *v, uint32_t n)
{
	fprintf(f, "%u", n);
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, " %u", v[i]);
}

static void fmt_opt_int(FILE *f, long long v)
{
	if (v < 0)
		fputc('-', f);
	else
		fprintf(f, "%lld", v);
}

static void fmt_shared_line(FILE *f, const char *key, const struct dmt_shared *sh)
{
	fprintf(f, "%s tds=", key);
	fmt_opt_int(f, sh->tds);
	fprintf(f, " hds=");
	fmt_opt_int(f, sh->hds);
	fprintf(f, " ntuple=%d\n%s-rss ", sh->ntuple, key);
	fmt_list(f, sh->rss, sh->rss_size);
	fputc('\n', f);
}

static const char *const theirs_names[] = { "tds", "hds", "ntuple", "rss" };

static FILE *fmt_open(char **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	return dmt_hook_alloc_fail() ? NULL : open_memstream(out, len);
}

static int fmt_close(FILE *f, char **out)
{
	if (fclose(f) != 0 || !*out) {
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void fmt_where(FILE *f, const char *ifname, int ifindex, uint64_t netns)
{
	fprintf(f, "ifname %s\nifindex %d\nnetns %llu\n", ifname, ifindex,
		(unsigned long long)netns);
}

int dmt_base_format(const struct dmt_base *b, char **out, size_t *len)
{
	const struct dmt_shared *bl = &b->baseline;
	FILE *f = fmt_open(out, len);

	if (!f)
		return -ENOMEM;
	fprintf(f, "devmemtcp-base %d\n", DMT_FORMAT_VERSION);
	fmt_where(f, b->ifname, b->ifindex, b->netns);
	fprintf(f, "tds ");
	fmt_opt_int(f, bl->tds);
	fprintf(f, "\nhds ");
	fmt_opt_int(f, bl->hds);
	fprintf(f, "\nntuple %d\nrss ", bl->ntuple);
	fmt_list(f, bl->rss, bl->rss_size);
	fprintf(f, "\nrss-default %d\n", b->rss_default);
	fmt_shared_line(f, "applied", &b->applied);
	if (b->has_applying)
		fmt_shared_line(f, "applying", &b->applying);
	if (b->theirs) {
		fprintf(f, "theirs");
		for (size_t i = 0; i < ARRAY_SIZE(theirs_names); i++)
			if (b->theirs & (1u << i))
				fprintf(f, " %s", theirs_names[i]);
		fputc('\n', f);
	}
	fprintf(f, "end\n");
	return fmt_close(f, out);
}

static void fmt_hex(FILE *f, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", b[i]);
}

/* comm as one word: blanks and non-printables replaced, "?" when empty */
static void fmt_comm(FILE *f, const char *comm)
{
	if (!comm[0])
		fputc('?', f);
	for (const char *p = comm; *p; p++)
		fputc(*p > ' ' && *p <= '~' ? *p : '_', f);
}

int dmt_owner_format(const struct dmt_owner *o, char **out, size_t *len)
{
	FILE *f = fmt_open(out, len);

	if (!f)
		return -ENOMEM;
	fprintf(f, "devmemtcp-owner %d\npid %ld\nstart %llu\nhandle %u\ncomm ",
		DMT_FORMAT_VERSION, (long)o->pid,
		(unsigned long long)o->start, o->handle);
	fmt_comm(f, o->comm);
	fputc('\n', f);
	fmt_where(f, o->ifname, o->ifindex, o->netns);
	fprintf(f, "state %s\nkeep-rss %d\nqueues ",
		o->closed ? "closed" : "open", o->keep_rss);
	fmt_list(f, o->queues, o->nqueues);
	fputc('\n', f);
	if (o->ctx != DMT_CTX_NONE) {
		if (o->ctx == DMT_CTX_PLACED) {
			fprintf(f, "context %u", o->ctx_id);
		} else {
			fprintf(f, "context pending before ");
			fmt_list(f, o->ctx_before, o->nctx_before);
		}
		fprintf(f, " table ");
		fmt_list(f, o->ctx_indir, o->ctx_size);
		fputc('\n', f);
	}
	for (uint32_t i = 0; i < o->nrules; i++) {
		const struct dmt_orule *r = &o->rules[i];

		fprintf(f, "rule %u ", r->id);
		if (r->placed)
			fprintf(f, "placed %u ", r->location);
		else
			fprintf(f, "pending ");
		fprintf(f, "ctx %u spec ", r->rss_context);
		fmt_hex(f, &r->fs, sizeof(r->fs));
		if (!r->placed) {
			fprintf(f, " before ");
			fmt_list(f, r->before, r->nbefore);
		}
		fputc('\n', f);
	}
	fprintf(f, "end\n");
	return fmt_close(f, out);
}

/* ---- parsing: one line at a time, one token at a time ---- */

struct parser {
	const char *p, *end;	/* the rest of the text */
	int line;		/* number of the current line */
	const char *lp, *le;	/* the rest of the current line */
	int err;		/* first error: -EBADMSG or -ENOMEM */
};

static int bad(struct parser *ps)
{
	if (!ps->err)
		ps->err = -EBADMSG;
	return ps->err;
}

/* The next line ("...\n"), made current; false (and an error) at the end
 * of the text or on a line without its newline. */
static bool next_line(struct parser *ps)
{
	const char *nl;

	if (ps->err)
		return false;
	if (ps->p == ps->end || !(nl = memchr(ps->p, '\n', (size_t)(ps->end - ps->p)))) {
		ps->line++;
		bad(ps);
		return false;
	}
	ps->line++;
	ps->lp = ps->p;
	ps->le = nl;
	ps->p = nl + 1;
	return true;
}

/* The next token of the current line: one space between tokens, none at
 * either end, no control bytes. */
static bool token(struct parser *ps, const char **t, size_t *n)
{
	const char *q = ps->lp;

	if (ps->err || q >= ps->le)
		return bad(ps), false;
	while (q < ps->le && *q != ' ') {
		if ((unsigned char)*q < ' ' || *q == 0x7f)
			return bad(ps), false;
		q++;
	}
	*t = ps->lp;
	*n = (size_t)(q - ps->lp);
	if (*n == 0)
		return bad(ps), false;
	if (q < ps->le) {
		q++;		/* the space */
		if (q == ps->le)
			return bad(ps), false;	/* trailing blank */
	}
	ps->lp = q;
	return true;
}

static bool tok_is(const char *t, size_t n, const char *word)
{
	return strlen(word) == n && memcmp(t, word, n) == 0;
}

static bool word(struct parser *ps, const char *w)
{
	const char *t;
	size_t n;

	if (!token(ps, &t, &n))
		return false;
	if (!tok_is(t, n, w))
		return bad(ps), false;
	return true;
}

static bool line_end(struct parser *ps)
{
	if (ps->err || ps->lp != ps->le)
		return bad(ps), false;
	return true;
}

/* The next line starts with key (not consumed). */
static bool peek_key(const struct parser *ps, const char *key)
{
	size_t k = strlen(key);

	return !ps->err && (size_t)(ps->end - ps->p) > k &&
	       memcmp(ps->p, key, k) == 0 && ps->p[k] == ' ';
}

/* Canonical decimal: "0" or no leading zero, at most max. */
static bool num_text(struct parser *ps, const char *t, size_t n, uint64_t max,
		     uint64_t *v)
{
	uint64_t x = 0;

	if (n == 0 || n > 20 || (n > 1 && t[0] == '0'))
		return bad(ps), false;
	for (size_t i = 0; i < n; i++) {
		unsigned d;

		if (t[i] < '0' || t[i] > '9')
			return bad(ps), false;
		d = (unsigned)(t[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return bad(ps), false;
		x = x * 10 + d;
	}
	if (x > max)
		return bad(ps), false;
	*v = x;
	return true;
}

static bool num(struct parser *ps, uint64_t min, uint64_t max, uint64_t *v)
{
	const char *t;
	size_t n;

	if (!token(ps, &t, &n) || !num_text(ps, t, n, max, v))
		return false;
	if (*v < min)
		return bad(ps), false;
	return true;
}

static bool u32(struct parser *ps, uint32_t min, uint32_t *v)
{
	uint64_t x;

	if (!num(ps, min, UINT32_MAX, &x))
		return false;
	*v = (uint32_t)x;
	return true;
}

/* "N v1 .. vN", *v malloc'd (distinct values when unique) */
static bool list(struct parser *ps, uint32_t **v, uint32_t *n, bool unique)
{
	uint32_t cnt;
	uint32_t *a;

	if (!u32(ps, 0, &cnt))
		return false;
	if (cnt > DMT_LIST_MAX)
		return bad(ps), false;
	a = dmt_calloc(cnt ? cnt : 1, sizeof(*a));
	if (!a) {
		ps->err = -ENOMEM;
		return false;
	}
	for (uint32_t i = 0; i < cnt; i++) {
		if (!u32(ps, 0, &a[i]))
			goto fail;
		for (uint32_t k = 0; unique && k < i; k++)
			if (a[k] == a[i]) {
				bad(ps);
				goto fail;
			}
	}
	*v = a;
	*n = cnt;
	return true;
fail:
	free(a);
	return false;
}

/* A line "key ..." whose key is expected here. */
static bool key_line(struct parser *ps, const char *key)
{
	return next_line(ps) && word(ps, key);
}

static bool header(struct parser *ps, const char *magic)
{
	uint64_t v;

	if (!key_line(ps, magic) || !num(ps, 0, UINT32_MAX, &v) || !line_end(ps))
		return false;
	if (v != DMT_FORMAT_VERSION)
		return bad(ps), false;
	return true;
}

static bool where(struct parser *ps, char *ifname, int *ifindex, uint64_t *netns)
{
	const char *t;
	size_t n;
	uint64_t v;

	if (!key_line(ps, "ifname") || !token(ps, &t, &n) || !line_end(ps))
		return false;
	if (!dmt_ifname_valid(t, n))
		return bad(ps), false;
	memcpy(ifname, t, n);
	ifname[n] = '\0';
	if (!key_line(ps, "ifindex") || !num(ps, 1, INT_MAX, &v) || !line_end(ps))
		return false;
	*ifindex = (int)v;
	return key_line(ps, "netns") && num(ps, 1, UINT64_MAX, netns) &&
	       line_end(ps);
}

/* "-" (stored as -1) or a number up to max */
static bool opt_num_text(struct parser *ps, const char *t, size_t n,
			 uint64_t max, int64_t *v)
{
	uint64_t x;

	if (n == 1 && t[0] == '-') {
		*v = -1;
		return true;
	}
	if (!num_text(ps, t, n, max, &x))
		return false;
	*v = (int64_t)x;
	return true;
}

static bool opt_num(struct parser *ps, uint64_t max, int64_t *v)
{
	const char *t;
	size_t n;

	return token(ps, &t, &n) && opt_num_text(ps, t, n, max, v);
}

/* "name=V" with V "-" or a number up to max */
static bool assign(struct parser *ps, const char *name, uint64_t max, int64_t *v)
{
	size_t k = strlen(name);
	const char *t;
	size_t n;

	if (!token(ps, &t, &n))
		return false;
	if (n <= k + 1 || memcmp(t, name, k) || t[k] != '=')
		return bad(ps), false;
	return opt_num_text(ps, t + k + 1, n - k - 1, max, v);
}

/* "KEY tds=T hds=H ntuple=N" and "KEY-rss N v..." */
static bool shared_lines(struct parser *ps, const char *key, struct dmt_shared *sh)
{
	char rkey[32];
	int64_t tds, hds, nt;

	if (!key_line(ps, key) || !assign(ps, "tds", 255, &tds) ||
	    !assign(ps, "hds", UINT32_MAX, &hds) ||
	    !assign(ps, "ntuple", 1, &nt) || !line_end(ps))
		return false;
	if (nt < 0)
		return bad(ps), false;
	sh->tds = (int)tds;
	sh->hds = hds;
	sh->ntuple = (int)nt;
	snprintf(rkey, sizeof(rkey), "%s-rss", key);
	return key_line(ps, rkey) && list(ps, &sh->rss, &sh->rss_size, false) &&
	       line_end(ps);
}

static bool bool_line(struct parser *ps, const char *key, bool *v)
{
	uint64_t x;

	if (!key_line(ps, key) || !num(ps, 0, 1, &x) || !line_end(ps))
		return false;
	*v = x;
	return true;
}

static bool theirs_line(struct parser *ps, uint32_t *theirs)
{
	size_t next = 0;

	if (!key_line(ps, "theirs"))
		return false;
	do {
		const char *t;
		size_t n;

		if (!token(ps, &t, &n))
			return false;
		/* each name once, in the fixed order */
		while (next < ARRAY_SIZE(theirs_names) &&
		       !tok_is(t, n, theirs_names[next]))
			next++;
		if (next == ARRAY_SIZE(theirs_names))
			return bad(ps), false;
		*theirs |= 1u << next++;
	} while (ps->lp < ps->le);
	return true;
}

static bool end_of_text(struct parser *ps)
{
	if (!key_line(ps, "end") || !line_end(ps))
		return false;
	if (ps->p != ps->end) {
		ps->line++;
		return bad(ps), false;	/* something after "end" */
	}
	return true;
}

static void parser_init(struct parser *ps, const char *text, size_t len)
{
	memset(ps, 0, sizeof(*ps));
	ps->p = text;
	ps->end = text + len;
}

static int parse_done(struct parser *ps, int *bad_line)
{
	if (bad_line)
		*bad_line = ps->err ? ps->line : 0;
	return ps->err;
}

int dmt_base_parse(const char *text, size_t len, struct dmt_base *b,
		   int *bad_line)
{
	struct dmt_shared *bl = &b->baseline;
	struct parser ps;
	uint64_t nt;
	int64_t v;

	memset(b, 0, sizeof(*b));
	parser_init(&ps, text, len);
	if (header(&ps, "devmemtcp-base") &&
	    where(&ps, b->ifname, &b->ifindex, &b->netns) &&
	    key_line(&ps, "tds") && opt_num(&ps, 255, &v) && line_end(&ps)) {
		bl->tds = (int)v;
		if (key_line(&ps, "hds") && opt_num(&ps, UINT32_MAX, &bl->hds) &&
		    line_end(&ps) && key_line(&ps, "ntuple") &&
		    num(&ps, 0, 1, &nt) && line_end(&ps)) {
			bl->ntuple = (int)nt;
			if (key_line(&ps, "rss") &&
			    list(&ps, &bl->rss, &bl->rss_size, false) &&
			    line_end(&ps) &&
			    bool_line(&ps, "rss-default", &b->rss_default) &&
			    shared_lines(&ps, "applied", &b->applied)) {
				if (peek_key(&ps, "applying")) {
					b->has_applying = true;
					shared_lines(&ps, "applying", &b->applying);
				}
				if (peek_key(&ps, "theirs"))
					theirs_line(&ps, &b->theirs);
				end_of_text(&ps);
			}
		}
	}
	if (ps.err)
		dmt_base_free(b);
	return parse_done(&ps, bad_line);
}

static bool comm_line(struct parser *ps, char *comm, size_t len)
{
	const char *t;
	size_t n;

	if (!key_line(ps, "comm") || !token(ps, &t, &n) || !line_end(ps))
		return false;
	if (n >= len)
		return bad(ps), false;
	for (size_t i = 0; i < n; i++)
		if (t[i] <= ' ' || t[i] > '~')
			return bad(ps), false;
	memcpy(comm, t, n);
	comm[n] = '\0';
	return true;
}

static bool hex(struct parser *ps, void *out, size_t size)
{
	uint8_t *b = out;
	const char *t;
	size_t n;

	if (!token(ps, &t, &n))
		return false;
	if (n != 2 * size)
		return bad(ps), false;
	for (size_t i = 0; i < n; i++) {
		char c = t[i];
		int d = c >= '0' && c <= '9' ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (d < 0)
			return bad(ps), false;
		b[i / 2] = (uint8_t)(i % 2 ? b[i / 2] | d : d << 4);
	}
	return true;
}

/* "context ID table ..." or "context pending before ... table ..." */
static bool context_line(struct parser *ps, struct dmt_owner *o)
{
	const char *t;
	size_t n;
	const char *save;

	if (!key_line(ps, "context"))
		return false;
	save = ps->lp;
	if (!token(ps, &t, &n))
		return false;
	if (tok_is(t, n, "pending")) {
		o->ctx = DMT_CTX_PENDING;
		if (!word(ps, "before") ||
		    !list(ps, &o->ctx_before, &o->nctx_before, true))
			return false;
	} else {
		ps->lp = save;
		o->ctx = DMT_CTX_PLACED;
		if (!u32(ps, 1, &o->ctx_id))
			return false;
	}
	return word(ps, "table") && list(ps, &o->ctx_indir, &o->ctx_size, false) &&
	       line_end(ps);
}

static bool rule_line(struct parser *ps, struct dmt_owner *o)
{
	struct dmt_orule r = { 0 }, *v;
	const char *t;
	size_t n;

	if (o->nrules >= DMT_LIST_MAX)
		return bad(ps), false;
	if (!key_line(ps, "rule") || !u32(ps, 0, &r.id) || !token(ps, &t, &n))
		return false;
	if (tok_is(t, n, "placed")) {
		r.placed = true;
		if (!u32(ps, 0, &r.location))
			return false;
	} else if (!tok_is(t, n, "pending")) {
		return bad(ps), false;
	}
	if (!word(ps, "ctx") || !u32(ps, 0, &r.rss_context) || !word(ps, "spec") ||
	    !hex(ps, &r.fs, sizeof(r.fs)))
		return false;
	if (!r.placed && (!word(ps, "before") ||
			  !list(ps, &r.before, &r.nbefore, true)))
		return false;
	if (!line_end(ps))
		goto fail;
	v = dmt_realloc(o->rules, (o->nrules + 1) * sizeof(*v));
	if (!v) {
		ps->err = -ENOMEM;
		goto fail;
	}
	o->rules = v;
	o->rules[o->nrules++] = r;
	return true;
fail:
	free(r.before);
	return false;
}

static bool owner_head(struct parser *ps, struct dmt_owner *o)
{
	uint64_t v;
	const char *t;
	size_t n;

	if (!header(ps, "devmemtcp-owner") || !key_line(ps, "pid") ||
	    !num(ps, 1, DMT_PID_MAX, &v) || !line_end(ps))
		return false;
	o->pid = (pid_t)v;
	if (!key_line(ps, "start") || !num(ps, 0, UINT64_MAX, &o->start) ||
	    !line_end(ps) || !key_line(ps, "handle") || !u32(ps, 1, &o->handle) ||
	    !line_end(ps) || !comm_line(ps, o->comm, sizeof(o->comm)) ||
	    !where(ps, o->ifname, &o->ifindex, &o->netns) ||
	    !key_line(ps, "state") || !token(ps, &t, &n) || !line_end(ps))
		return false;
	if (tok_is(t, n, "closed"))
		o->closed = true;
	else if (!tok_is(t, n, "open"))
		return bad(ps), false;
	return bool_line(ps, "keep-rss", &o->keep_rss) &&
	       key_line(ps, "queues") &&
	       list(ps, &o->queues, &o->nqueues, true) && line_end(ps);
}

int dmt_owner_parse(const char *text, size_t len, struct dmt_owner *o,
		    int *bad_line)
{
	struct parser ps;

	memset(o, 0, sizeof(*o));
	parser_init(&ps, text, len);
	if (owner_head(&ps, o)) {
		if (peek_key(&ps, "context"))
			context_line(&ps, o);
		while (peek_key(&ps, "rule") && rule_line(&ps, o))
			;
		end_of_text(&ps);
	}
	if (ps.err)
		dmt_owner_free(o);
	return parse_done(&ps, bad_line);
}

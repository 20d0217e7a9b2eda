// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The files of the NIC layer under the run directory (lib/nic.h): their
 * text formats (IF.base, IF.owner.PID.START.N: small text files, so that
 * an operator can read what a dead process left behind; pure functions,
 * fuzzed), the run directory and its files opened as hostile input, files
 * replaced atomically (O_EXCL temporary, fsync, rename, fsync of the
 * directory), and the interface lock.
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

#if DMT_TEST_HOOKS
int dmt_test_lock_wait_ms;
#endif

/* ---------------------------------------------------------------------- */
/* the many-owners formats: strict, canonical, pure                        */

void dmt_shared_free(struct dmt_shared *s)
{
	free(s->rss);
	s->rss = NULL;
	s->rss_size = 0;
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

/* ---------------------------------------------------------------------- */
/* the run directory and its files                                         */

static const char *file_type(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFDIR: return "a directory";
	case S_IFIFO: return "a FIFO";
	case S_IFSOCK: return "a socket";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFLNK: return "a symbolic link";
	default: return "not a regular file";
	}
}

static int dir_checks(struct dmt_rundir *rd, const struct stat *st,
		      struct dmt_err *err)
{
	uid_t me = geteuid();

	if (st->st_uid != 0 && st->st_uid != me)
		return dmt_err_set(err, -EACCES,
				   "the run directory %s is owned by uid %u, not by root or this user (uid %u): "
				   "use a directory owned by root (or by uid %u), not writable by others",
				   rd->path, (unsigned)st->st_uid, (unsigned)me,
				   (unsigned)me);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return dmt_err_set(err, -EACCES,
				   "the run directory %s is writable by group or others (mode %04o): "
				   "make it writable by its owner only (chmod 0700 %s) or use another one",
				   rd->path, (unsigned)(st->st_mode & 07777),
				   rd->path);
	rd->uid = st->st_uid;
	return 0;
}

/*
 * Whose directory path is and what to do when it cannot be used: the
 * default one is root's (a user sets DEVMEMTCP_RUN_DIR instead); one the
 * caller named, through the run_dir option or DEVMEMTCP_RUN_DIR, is
 * theirs to fix.
 */
static const char *rundir_whose(const char *path)
{
	const char *env = secure_getenv("DEVMEMTCP_RUN_DIR");

	if (!strcmp(path, DMT_RUN_DIR))
		return "";
	if (env && !strcmp(path, env))
		return " (DEVMEMTCP_RUN_DIR)";
	return " (the run_dir option)";
}

static const char *rundir_fix(const char *path, int e)
{
	if (!strcmp(path, DMT_RUN_DIR) && geteuid() != 0)
		return "run as root, or set DEVMEMTCP_RUN_DIR to a directory of yours that only you can write";
	if (e == -ENOENT)
		return "only the last component is created: create its parent, or pass another run_dir";
	return "use a directory this user can write and others cannot, or pass another run_dir";
}

int dmt_rundir_open(struct dmt_rundir *rd, const char *path, bool create,
		    struct dmt_err *err)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	struct stat st;
	int e;

	rd->fd = -1;
	if (strlen(path) >= sizeof(rd->path))
		return dmt_err_set(err, -ENAMETOOLONG,
				   "the run directory name is too long (%zu bytes)",
				   strlen(path));
	snprintf(rd->path, sizeof(rd->path), "%s", path);
	rd->fd = open(path, flags);
	if (rd->fd < 0 && errno == ENOENT && create) {
		/* Only the last component: parents that are missing are
		 * a mistake to report, not to paper over. */
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			goto fail;
		rd->fd = open(path, flags);
	}
	if (rd->fd < 0)
		goto fail;
	if (fstat(rd->fd, &st) < 0)
		goto fail;
	e = dir_checks(rd, &st, err);
	if (e < 0)
		dmt_rundir_close(rd);
	return e;
fail:
	e = -errno;
	dmt_rundir_close(rd);
	if (e == -ELOOP || e == -ENOTDIR)
		return dmt_err_set(err, -EACCES,
				   "the run directory %s is a symbolic link or not a directory: "
				   "use a real directory owned by root, not writable by others",
				   path);
	return dmt_err_set(err, e, "cannot open the run directory %s%s: %s (%s)",
			   path, rundir_whose(path),
			   e == -ENOENT ? "it or a parent is missing" : strerror(-e),
			   rundir_fix(path, e));
}

void dmt_rundir_close(struct dmt_rundir *rd)
{
	if (rd->fd >= 0)
		close(rd->fd);
	rd->fd = -1;
}

/* A file of the run directory that we may read or write: a regular file
 * of the directory's owner that others cannot write (the lock file: that
 * others cannot open at all, or they could hold its flock). */
static int file_checks(const struct dmt_rundir *rd, const char *name, int fd,
		       mode_t others, struct dmt_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return dmt_err_set(err, -errno, "%s/%s: fstat: %s", rd->path,
				   name, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return dmt_err_set(err, -EACCES,
				   "%s/%s is %s, not a file devmemtcp made: remove it",
				   rd->path, name, file_type(st.st_mode));
	if (st.st_uid != rd->uid)
		return dmt_err_set(err, -EACCES,
				   "%s/%s is owned by uid %u, not by the run directory's owner (uid %u): remove it",
				   rd->path, name, (unsigned)st.st_uid,
				   (unsigned)rd->uid);
	if (st.st_mode & others)
		return dmt_err_set(err, -EACCES,
				   "%s/%s can be %s by others (mode %04o): remove it while no process uses devmemtcp on this interface",
				   rd->path, name,
				   others & (S_IRGRP | S_IROTH) ? "opened" : "written",
				   (unsigned)(st.st_mode & 07777));
	if (st.st_size > DMT_FILE_MAX)
		return dmt_err_set(err, -EFBIG,
				   "%s/%s has %lld bytes, more than the %d a devmemtcp file has: remove it",
				   rd->path, name, (long long)st.st_size,
				   DMT_FILE_MAX);
	return 0;
}

static int open_fail(const struct dmt_rundir *rd, const char *name,
		     struct dmt_err *err)
{
	int e = -errno;

	if (e == -ELOOP)
		return dmt_err_set(err, -EACCES,
				   "%s/%s is a symbolic link, not a file devmemtcp made: remove it",
				   rd->path, name);
	if (e == -ENXIO)
		return dmt_err_set(err, -EACCES,
				   "%s/%s is not a regular file (a FIFO or socket): remove it",
				   rd->path, name);
	return dmt_err_set(err, e, "cannot open %s/%s: %s", rd->path, name,
			   strerror(-e));
}

int dmt_file_read(const struct dmt_rundir *rd, const char *name, char **text,
		  size_t *len, struct dmt_err *err)
{
	char *buf = NULL;
	size_t n = 0;
	int fd, e;

	*text = NULL;
	*len = 0;
	/* O_NONBLOCK: a FIFO put in our place must not hang us. */
	fd = openat(rd->fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return -ENOENT;
	if (fd < 0)
		return open_fail(rd, name, err);
	e = file_checks(rd, name, fd, S_IWGRP | S_IWOTH, err);
	if (e < 0)
		goto out;
	buf = dmt_malloc(DMT_FILE_MAX + 1);
	if (!buf) {
		e = dmt_err_set(err, -ENOMEM, "reading %s/%s: out of memory",
				rd->path, name);
		goto out;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, DMT_FILE_MAX + 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			e = dmt_err_set(err, -errno, "reading %s/%s: %s",
					rd->path, name, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > DMT_FILE_MAX) {
			e = dmt_err_set(err, -EFBIG,
					"%s/%s has more than the %d bytes a devmemtcp file has: remove it",
					rd->path, name, DMT_FILE_MAX);
			goto out;
		}
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return e;
}

int dmt_file_same(const struct dmt_rundir *rd, const char *name,
		  const char *text, size_t len, struct dmt_err *err)
{
	char buf[4096];
	size_t off = 0;
	int fd, e, same = 1;

	fd = openat(rd->fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return -ENOENT;
	if (fd < 0)
		return open_fail(rd, name, err);
	e = file_checks(rd, name, fd, S_IWGRP | S_IWOTH, err);
	while (!e && same) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			e = dmt_err_set(err, -errno, "reading %s/%s: %s", rd->path, name,
					strerror(errno));
			break;
		}
		if (r == 0) {
			same = off == len;
			break;
		}
		same = (size_t)r <= len - off && memcmp(buf, text + off, (size_t)r) == 0;
		off += (size_t)r;
	}
	close(fd);
	return e < 0 ? e : same;
}

/* A name no one else uses: ".NAME.XXXXXXXX" with random hex. */
static void temp_name(char *tmp, size_t len, const char *name)
{
	static atomic_uint seq;
	uint64_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL) ^
		    atomic_fetch_add(&seq, 1);
	snprintf(tmp, len, ".%s.%016llx", name, (unsigned long long)r);
}

static int write_all(int fd, const char *text, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		off += (size_t)w;
	}
	return 0;
}

/* The file's text in pieces, written one after the other. */
static int file_write_pieces(const struct dmt_rundir *rd, const char *name,
			     const struct iovec *piece, int npieces,
			     struct dmt_err *err)
{
	char tmp[NAME_MAX + 1];
	int fd, e = 0;

	temp_name(tmp, sizeof(tmp), name);
	fd = openat(rd->fd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		e = -errno;
		return dmt_err_set(err, e, "cannot create %s/%s%s: %s (%s)",
				   rd->path, tmp, rundir_whose(rd->path),
				   strerror(-e), rundir_fix(rd->path, e));
	}
	for (int i = 0; i < npieces && !e; i++)
		e = write_all(fd, piece[i].iov_base, piece[i].iov_len);
	if (!e && fsync(fd) < 0)
		e = -errno;
	close(fd);
	if (!e && renameat(rd->fd, tmp, rd->fd, name) < 0)
		e = -errno;
	if (e < 0) {
		unlinkat(rd->fd, tmp, 0);
		return dmt_err_set(err, e, "cannot write %s/%s: %s", rd->path,
				   name, strerror(-e));
	}
	/* The rename itself must survive a crash of the machine too. */
	fsync(rd->fd);
	return 0;
}

int dmt_file_write(const struct dmt_rundir *rd, const char *name,
		   const char *text, size_t len, struct dmt_err *err)
{
	struct iovec all = { (void *)text, len };

	return file_write_pieces(rd, name, &all, 1, err);
}

int dmt_owner_write_closed(const struct dmt_rundir *rd, const char *name,
			   const char *text, size_t len, struct dmt_err *err)
{
	static const char open_line[] = "\nstate open\n";
	const char *p = memmem(text, len, open_line, sizeof(open_line) - 1);
	size_t head, tail;
	struct iovec piece[3];

	if (!p)		/* closed already */
		return dmt_file_write(rd, name, text, len, err);
	/* "...\nstate " "closed" "\nkeep-rss ..." */
	head = (size_t)(p - text) + strlen("\nstate ");
	tail = head + strlen("open");
	piece[0] = (struct iovec){ (void *)text, head };
	piece[1] = (struct iovec){ (void *)"closed", strlen("closed") };
	piece[2] = (struct iovec){ (void *)(text + tail), len - tail };
	return file_write_pieces(rd, name, piece, 3, err);
}

int dmt_file_remove(const struct dmt_rundir *rd, const char *name)
{
	if (unlinkat(rd->fd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int dmt_rundir_list(const struct dmt_rundir *rd, const char *prefix,
		    char ***names, size_t *n, struct dmt_err *err)
{
	size_t plen = strlen(prefix), cap = 0;
	struct dirent *d;
	char **v = NULL;
	int fd, e = 0;
	DIR *dp;

	*names = NULL;
	*n = 0;
	fd = openat(rd->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dp = fd < 0 ? NULL : fdopendir(fd);
	if (!dp) {
		e = -errno;
		if (fd >= 0)
			close(fd);
		return dmt_err_set(err, e, "cannot list %s: %s", rd->path, strerror(-e));
	}
	while ((d = readdir(dp))) {
		if (strncmp(d->d_name, prefix, plen))
			continue;
		if (*n == cap) {
			char **nv = dmt_realloc(v, (cap = cap ? 2 * cap : 8) * sizeof(*v));

			if (!nv) {
				e = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[*n] = dmt_strdup(d->d_name);
		if (!v[*n]) {
			e = -ENOMEM;
			break;
		}
		(*n)++;
	}
	closedir(dp);
	if (e < 0) {
		for (size_t i = 0; i < *n; i++)
			free(v[i]);
		free(v);
		*n = 0;
		return dmt_err_set(err, e, "listing %s: out of memory", rd->path);
	}
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_names);
	*names = v;
	return 0;
}

static void read_holder(int fd, pid_t *holder, char *comm, size_t comm_len)
{
	char buf[128];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long pid = 0;
	char c[64] = "";

	*holder = 0;
	if (comm_len)
		comm[0] = '\0';
	if (n <= 0)
		return;
	buf[n] = '\0';
	if (sscanf(buf, "%ld %63s", &pid, c) >= 1) {
		*holder = (pid_t)pid;
		if (comm_len)
			snprintf(comm, comm_len, "%s", c);
	}
}

/* Our comm with blanks replaced, as one word of the lock file. */
static void self_comm(char *comm, size_t len)
{
	dmt_self_comm(comm, len);
	for (char *p = comm; *p; p++)
		if (isspace((unsigned char)*p) || !isprint((unsigned char)*p))
			*p = '_';
}

/* flock with a bounded wait: a few ms between tries, growing. */
static int flock_wait(int fd, int wait_ms)
{
	struct timespec start, now;
	long slept_ms, pause_us = 200;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct timespec ts;

		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		clock_gettime(CLOCK_MONOTONIC, &now);
		slept_ms = (now.tv_sec - start.tv_sec) * 1000 +
			   (now.tv_nsec - start.tv_nsec) / 1000000;
		if (slept_ms >= wait_ms)
			return -EBUSY;
		ts.tv_sec = 0;
		ts.tv_nsec = pause_us * 1000;
		nanosleep(&ts, NULL);
		if (pause_us < 4000)	/* short: polling is not fair */
			pause_us *= 2;
	}
}

int dmt_lock_wait_ms(void)
{
#if DMT_TEST_HOOKS
	int ms = dmt_hook_env_int("DEVMEMTCP_TEST_LOCK_WAIT_MS");

	if (dmt_test_lock_wait_ms)
		return dmt_test_lock_wait_ms;
	if (ms)
		return ms;
#endif
	return DMT_LOCK_WAIT_MS;
}

int dmt_lock_take(const struct dmt_rundir *rd, const char *ifname, int *fdp,
		  pid_t *holder, char *holder_comm, size_t comm_len,
		  struct dmt_err *err)
{
	char name[IF_NAMESIZE + 8], line[128], comm[64];
	int fd, n, e;

	*fdp = -1;
	*holder = 0;
	if (comm_len)
		holder_comm[0] = '\0';
	snprintf(name, sizeof(name), "%s.lock", ifname);
	/* O_RDWR on a file only the owner may open: nobody else can hold
	 * its flock (flock works on read-only descriptors too). */
	fd = openat(rd->fd, name,
		    O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
	if (fd < 0)
		return open_fail(rd, name, err);
	e = file_checks(rd, name, fd, 077, err);
	if (e < 0)
		goto err_close;
	e = flock_wait(fd, dmt_lock_wait_ms());
	if (e == -EBUSY) {
		read_holder(fd, holder, holder_comm, comm_len);
		dmt_err_set(err, -EBUSY, "%s/%s is held", rd->path, name);
		goto err_close;
	}
	if (e < 0) {
		dmt_err_set(err, e, "flock %s/%s: %s", rd->path, name,
			    strerror(-e));
		goto err_close;
	}
	self_comm(comm, sizeof(comm));
	n = snprintf(line, sizeof(line), "%ld %s\n", (long)getpid(), comm);
	if (ftruncate(fd, 0) < 0 || pwrite(fd, line, (size_t)n, 0) != n) {
		e = dmt_err_set(err, -errno, "writing %s/%s: %s", rd->path,
				name, strerror(errno));
		goto err_close;
	}
	*fdp = fd;
	return 0;
err_close:
	close(fd);
	return e;
}

void dmt_lock_release(int fd)
{
	/* Leave the lock file itself: unlinking it while another process
	 * waits on the old inode would let two holders exist. */
	if (fd >= 0)
		close(fd);
}

uint64_t dmt_netns_id(void)
{
	struct stat st;

	if (stat("/proc/thread-self/ns/net", &st) == 0 ||
	    stat("/proc/self/ns/net", &st) == 0)
		return (uint64_t)st.st_ino;
	return 0;
}

const char *dmt_run_dir(const char *opt_dir)
{
	const char *env;

	if (opt_dir && *opt_dir)
		return opt_dir;
	env = secure_getenv("DEVMEMTCP_RUN_DIR");
	if (env && *env)
		return env;
	return DMT_RUN_DIR;
}

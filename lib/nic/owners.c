// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The owners of an interface (HACKING.md, "The NIC layer: many owners per
 * interface").  Each devmemtcp_nic handle is an owner with its own file
 * IF.owner.PID.START.N; the shared settings (header split, hds-thresh,
 * ntuple, the default RSS table) are derived (plan.c, dmt_derive_shared)
 * from the baseline in IF.base and the live owners (and the queues
 * queue-get shows bound, which never go back into the default table), and
 * changed only where the device still shows what the owners last wrote.  Everything here runs under the
 * interface lock (struct dmt_op); nic.c drives it.  Undoing an owner and
 * the dead owners are undo.c; the shared settings on the device shared.c;
 * whether two rules overlap flow.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netdev.h"
#include "nic.h"
#include "core/uapi.h"

#define MAX_OWNER_FILES 1024

#if DMT_TEST_HOOKS
int (*dmt_test_queue_list)(int ifindex, struct devmemtcp_queue *q, size_t max);
#endif

/* queue-get on the operation's interface: the kernel's answer, or the
 * test's; 0 queues without a netlink socket (a fake NIC). */
static int op_queue_list(const struct dmt_op *op, struct devmemtcp_queue *q,
			 size_t max)
{
#if DMT_TEST_HOOKS
	if (dmt_test_queue_list)
		return dmt_test_queue_list(op->e->ifindex, q, max);
#endif
	return op->nl ? dmt_queue_list(op->nl, op->e->ifindex, q, max) : 0;
}

/* ---------------------------------------------------------------------- */
/* processes                                                               */

int dmt_proc_start(pid_t pid, uint64_t *start, bool *zombie)
{
	char path[64], buf[1024], *p, *end;
	long threads = 0;
	bool z;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return errno == ESRCH ? -ENOENT : -errno;
	buf[n] = '\0';
	/* "pid (comm) S f4 ... f20 f21 f22": comm may hold blanks and ')' */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EBADMSG;
	z = p[2] == 'Z' || p[2] == 'X' || p[2] == 'x';
	p += 2;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EBADMSG;
		p++;
		if (field + 1 == 20)
			threads = strtol(p, NULL, 10);
	}
	/* A leader that called pthread_exit() shows Z while its other
	 * threads, which share its descriptors, run on: field 20 counts
	 * them with it. */
	*zombie = z && threads <= 1;
	*start = strtoull(p, &end, 10);
	return end == p ? -EBADMSG : 0;
}

bool dmt_owner_alive(const struct dmt_owner *o)
{
	uint64_t start;
	bool zombie;
	int err;

	if (o->closed)
		return false;
	err = dmt_proc_start(o->pid, &start, &zombie);
	if (err == -ENOENT)
		return false;
	if (err < 0)
		return true;	/* cannot tell: never undo a live owner */
	return !zombie && start == o->start;
}

/* ---------------------------------------------------------------------- */
/* the shared settings                                                     */

/* dst's table becomes a copy of src's */
int dmt_shared_copy_table(struct dmt_shared *dst, const struct dmt_shared *src)
{
	uint32_t *t = NULL;

	if (src->rss_size) {
		t = dmt_malloc(src->rss_size * sizeof(uint32_t));
		if (!t)
			return -ENOMEM;
		memcpy(t, src->rss, src->rss_size * sizeof(uint32_t));
	}
	free(dst->rss);
	dst->rss = t;
	dst->rss_size = src->rss_size;
	return 0;
}

bool dmt_shared_same_table(const struct dmt_shared *a, const struct dmt_shared *b)
{
	return a->rss_size == b->rss_size &&
	       (!a->rss_size || memcmp(a->rss, b->rss, a->rss_size * 4) == 0);
}


/* ---------------------------------------------------------------------- */
/* the operation: lock, files, hooks                                       */

int dmt_op_step(struct dmt_op *op, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(op->doing, sizeof(op->doing), fmt, ap);
	va_end(ap);
	op->step++;
#if DMT_TEST_HOOKS
	if (op->crash_step && op->step == op->crash_step)
		raise(SIGKILL);
	if (op->fail_step && op->step == op->fail_step)
		return dmt_err_set(op->err, -EIO, "failure injected by %s=%d",
				   op->hook_name ? op->hook_name : "the test",
				   op->fail_step);
#endif
	return 0;
}

void dmt_op_report(struct dmt_op *op, const char *fmt, ...)
{
	size_t n = strlen(op->report);
	va_list ap;

	if (n && n + 2 < sizeof(op->report)) {
		memcpy(op->report + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(op->report + n, sizeof(op->report) - n, fmt, ap);
	va_end(ap);
}

int dmt_op_begin(struct dmt_op *op, struct devmemtcp_ctx *ctx,
		 struct dmt_eth *e, struct dmt_nl *nl, const char *run_dir,
		 struct dmt_err *err)
{
	struct dmt_err why = { 0 };
	char comm[64];
	pid_t holder;
	int ret;

	memset(op, 0, sizeof(*op));
	op->ctx = ctx;
	op->e = e;
	op->nl = nl;
	op->err = err;
	op->lock_fd = -1;
	op->nrules = -1;
	op->nqget = -1;
	op->nctxs = -1;
	dmt_err_clear(err);
	ret = dmt_rundir_open(&op->rd, run_dir, true, err);
	if (ret < 0)
		return ret;
	ret = dmt_lock_take(&op->rd, e->ifname, &op->lock_fd, &holder, comm,
			    sizeof(comm), &why);
	if (ret == -EBUSY)
		return dmt_err_set(err, -EBUSY,
				   "%s: pid %ld (%s) holds %s/%s.lock and has not let go for %d ms: "
				   "if that process hangs, stop it",
				   e->ifname, (long)holder, comm[0] ? comm : "unknown",
				   op->rd.path, e->ifname, dmt_lock_wait_ms());
	if (ret < 0)
		return dmt_err_set(err, ret, "%s", why.msg);
	op->locked = true;
#if DMT_TEST_HOOKS
	/* let two processes really interleave in here */
	dmt_hook_delay("DEVMEMTCP_TEST_LOCK_DELAY_MS");
#endif
	return 0;
}

static void free_loaded(struct dmt_op *op)
{
	for (size_t i = 0; i < op->nowners; i++)
		dmt_owner_free(&op->owners[i]);
	free(op->owners);
	free(op->alive);
	op->owners = NULL;
	op->alive = NULL;
	op->nowners = 0;
	dmt_base_free(&op->base);
	op->have_base = false;
	free(op->rules);
	op->rules = NULL;
	op->nrules = -1;
	free(op->qget);
	op->qget = NULL;
	op->nqget = -1;
	dmt_op_contexts_changed(op);
	dmt_rss_free(&op->rss);
	op->have_rings = op->have_feat = op->have_rss = false;
}

void dmt_op_end(struct dmt_op *op)
{
	if (op->report[0])
		dmt_log(op->ctx, DEVMEMTCP_LOG_WARN, "%s", op->report);
	op->report[0] = '\0';
	free_loaded(op);
	dmt_lock_release(op->lock_fd);
	op->lock_fd = -1;
	op->locked = false;
	dmt_rundir_close(&op->rd);
}

int dmt_op_save_base(struct dmt_op *op)
{
	char name[IF_NAMESIZE + 8], *text;
	size_t len;
	int err = dmt_base_format(&op->base, &text, &len);

	if (err < 0)
		return dmt_err_set(op->err, err, "writing %s/%s.base: out of memory",
				   op->rd.path, op->e->ifname);
	snprintf(name, sizeof(name), "%s.base", op->e->ifname);
	err = dmt_file_write(&op->rd, name, text, len, op->err);
	free(text);
	return err;
}

int dmt_op_save_owner(struct dmt_op *op, const struct dmt_owner *o,
		      char **keep, size_t *keep_len)
{
	char name[NAME_MAX + 1], *text;
	size_t len;
	int err = dmt_owner_format(o, &text, &len);

	dmt_owner_name(o, name, sizeof(name));
	if (err < 0)
		return dmt_err_set(op->err, err, "writing %s/%s: out of memory",
				   op->rd.path, name);
	err = dmt_file_write(&op->rd, name, text, len, op->err);
	if (!err && keep) {
		*keep = text;
		*keep_len = len;
		return 0;
	}
	free(text);
	return err;
}

/* A journal belongs to this interface of this namespace, as it is now. */
static int check_where(struct dmt_op *op, const char *file, const char *ifname,
		       int ifindex, uint64_t netns)
{
	const struct dmt_eth *e = op->e;
	uint64_t ns = dmt_netns_id();

	if (strcmp(ifname, e->ifname))
		return dmt_err_set(op->err, -ESTALE,
				   "%s/%s was written for %s, not %s: nothing of it is applied (delete it if it is stale)",
				   op->rd.path, file, ifname, e->ifname);
	if (netns != ns)
		return dmt_err_set(op->err, -EXDEV,
				   "%s/%s was written in network namespace net:[%llu], this is net:[%llu]: "
				   "run devmemtcp restore %s in that namespace (ip netns exec NAME ...)",
				   op->rd.path, file, (unsigned long long)netns,
				   (unsigned long long)ns, e->ifname);
	if (ifindex != e->ifindex)
		return dmt_err_set(op->err, -ESTALE,
				   "%s/%s was written when %s had ifindex %d; it has %d now (the device was replaced): "
				   "nothing of it is applied; delete it once the old device's settings no longer matter",
				   op->rd.path, file, e->ifname, ifindex, e->ifindex);
	return 0;
}

static int malformed(struct dmt_op *op, const char *file, int err, int line)
{
	if (err == -ENOMEM)
		return dmt_err_set(op->err, err, "reading %s/%s: out of memory",
				   op->rd.path, file);
	return dmt_err_set(op->err, err,
			   "%s/%s is malformed (line %d): undo what it records by hand, then delete it",
			   op->rd.path, file, line);
}

static int load_base(struct dmt_op *op)
{
	char name[IF_NAMESIZE + 8], *text;
	struct stat st;
	size_t len;
	int err, line;

	snprintf(name, sizeof(name), "%s.base", op->e->ifname);
	err = dmt_file_read(&op->rd, name, &text, &len, op->err);
	if (err == -ENOENT)
		err = 0;
	else if (err == 0) {
		err = dmt_base_parse(text, len, &op->base, &line);
		free(text);
		if (err < 0)
			return malformed(op, name, err, line);
		op->have_base = true;
		err = check_where(op, name, op->base.ifname, op->base.ifindex,
				  op->base.netns);
	}
	if (err < 0)
		return err;
	/* the single-owner journal of earlier versions */
	snprintf(name, sizeof(name), "%s.journal", op->e->ifname);
	if (fstatat(op->rd.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return dmt_err_set(op->err, -ESTALE,
				   "%s/%s was written by an older libdevmemtcp (journal version 1): "
				   "undo its changes with that version's 'devmemtcp restore %s' or by hand, then delete it",
				   op->rd.path, name, op->e->ifname);
	return 0;
}

int dmt_op_load_owner(struct dmt_op *op, const char *name, struct dmt_owner *o)
{
	char *text, expect[NAME_MAX + 1];
	size_t len;
	int err, line;

	err = dmt_file_read(&op->rd, name, &text, &len, op->err);
	if (err < 0)
		return err;
	err = dmt_owner_parse(text, len, o, &line);
	free(text);
	if (err < 0)
		return malformed(op, name, err, line);
	err = check_where(op, name, o->ifname, o->ifindex, o->netns);
	dmt_owner_name(o, expect, sizeof(expect));
	if (!err && strcmp(expect, name))
		err = dmt_err_set(op->err, -EBADMSG,
				  "%s/%s records the owner %s: nothing of it is applied (delete it if it is stale)",
				  op->rd.path, name, expect);
	if (err < 0)
		dmt_owner_free(o);
	return err;
}

int dmt_op_load(struct dmt_op *op, const char *me_name)
{
	char **names = NULL, prefix[IF_NAMESIZE + 8];
	size_t n = 0;
	int err;

	free_loaded(op);
	err = load_base(op);
	if (err < 0)
		return err;
	snprintf(prefix, sizeof(prefix), "%s.owner.", op->e->ifname);
	err = dmt_rundir_list(&op->rd, prefix, &names, &n, op->err);
	if (err < 0)
		return err;
	if (n > MAX_OWNER_FILES) {
		err = dmt_err_set(op->err, -EMFILE,
				  "%s has %zu owner files of %s, more than %d: something is wrong",
				  op->rd.path, n, op->e->ifname, MAX_OWNER_FILES);
		goto out;
	}
	op->owners = dmt_calloc(n ? n : 1, sizeof(*op->owners));
	op->alive = dmt_calloc(n ? n : 1, sizeof(*op->alive));
	if (!op->owners || !op->alive) {
		err = dmt_err_set(op->err, -ENOMEM, "reading the owners of %s: out of memory",
				  op->e->ifname);
		goto out;
	}
	for (size_t i = 0; i < n && !err; i++) {
		struct dmt_owner *o = &op->owners[op->nowners];

		if (me_name && strcmp(names[i], me_name) == 0)
			continue;
		err = dmt_op_load_owner(op, names[i], o);
		if (err == -ENOENT) {	/* removed since the listing */
			err = 0;
			continue;
		}
		if (!err)
			op->alive[op->nowners++] = dmt_owner_alive(o);
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return err;
}

int dmt_op_rules(struct dmt_op *op)
{
	size_t n = 0;
	int err;

	if (op->nrules >= 0)
		return 0;
	err = op->e->ops->rule_list(op->e, &op->rules, &n, NULL);
	if (err == -EOPNOTSUPP) {
		op->rules = NULL;
		n = 0;
		err = 0;
	}
	if (err < 0)
		return err;
	op->nrules = (long)n;
	return 0;
}

int dmt_op_contexts(struct dmt_op *op)
{
	size_t n = 0;
	int err;

	if (op->nctxs >= 0)
		return 0;
	err = op->e->ops->rss_dump(op->e, &op->ctxs, &n);
	if (err == -EOPNOTSUPP) {
		op->ctxs = NULL;
		n = 0;
		err = 0;
	}
	if (err < 0)
		return err;
	op->nctxs = (long)n;
	return 0;
}

void dmt_op_contexts_changed(struct dmt_op *op)
{
	for (long i = 0; i < op->nctxs; i++)
		dmt_rss_free(&op->ctxs[i]);
	free(op->ctxs);
	op->ctxs = NULL;
	op->nctxs = -1;
}

int dmt_op_queue_get(struct dmt_op *op)
{
	int n;

	if (op->nqget >= 0)
		return 0;
	op->qget = dmt_calloc(512, sizeof(*op->qget));
	if (!op->qget)
		return dmt_err_set(op->err, -ENOMEM, "queue-get on %s: out of memory",
				   op->e->ifname);
	n = op_queue_list(op, op->qget, 512);
	if (n == -ENOENT || n == -EOPNOTSUPP)
		n = 0;	/* no netdev family: no binding either */
	if (n < 0) {
		free(op->qget);
		op->qget = NULL;
		return dmt_err_set(op->err, n,
				   "queue-get on %s failed (%s): cannot tell which RX queues carry a binding",
				   op->e->ifname, dmt_errno_name(n));
	}
	op->nqget = n < 512 ? n : 512;
	return 0;
}

/* What queue-get shows on RX queue q: "dma-buf 7", "io_uring zcrx", "an
 * AF_XDP socket"; false when nothing. */
bool dmt_op_queue_bound(const struct dmt_op *op, uint32_t q, char *what, size_t len)
{
	for (int i = 0; i < op->nqget; i++) {
		const struct devmemtcp_queue *x = &op->qget[i];

		if (x->type != DEVMEMTCP_QUEUE_RX || x->id != q ||
		    !(x->dmabuf_id || x->io_uring || x->xsk))
			continue;
		if (x->dmabuf_id)
			snprintf(what, len, "dma-buf %u", x->dmabuf_id);
		else
			snprintf(what, len, "%s", x->io_uring ? "io_uring zcrx" : "an AF_XDP socket");
		return true;
	}
	return false;
}

/* The RX queues queue-get shows bound (*list malloc'd). */
int dmt_op_bound_queues(struct dmt_op *op, uint32_t **list, uint32_t *n)
{
	char what[32];
	int err = dmt_op_queue_get(op);

	*list = NULL;
	*n = 0;
	if (err < 0)
		return err;
	*list = dmt_calloc(op->nqget ? (size_t)op->nqget : 1, sizeof(**list));
	if (!*list)
		return dmt_err_set(op->err, -ENOMEM, "%s: out of memory", op->e->ifname);
	for (int i = 0; i < op->nqget; i++)
		if (op->qget[i].type == DEVMEMTCP_QUEUE_RX &&
		    dmt_op_queue_bound(op, op->qget[i].id, what, sizeof(what)) &&
		    !dmt_in_list(op->qget[i].id, *list, *n))
			(*list)[(*n)++] = op->qget[i].id;
	return 0;
}

int dmt_op_dev_rings(struct dmt_op *op, struct dmt_rings *r)
{
	int err;

	if (!op->have_rings) {
		err = op->e->ops->rings_get(op->e, &op->rings);
		if (err < 0)
			return err;
		op->have_rings = true;
	}
	*r = op->rings;
	return 0;
}

int dmt_op_dev_ntuple(struct dmt_op *op, struct dmt_feature *f)
{
	int err;

	if (!op->have_feat) {
		err = op->e->ops->feature_get(op->e, DMT_NTUPLE_FEATURE, &op->feat);
		if (err < 0)
			return err;
		op->have_feat = true;
	}
	*f = op->feat;
	return 0;
}

int dmt_op_dev_rss(struct dmt_op *op, const struct dmt_rss **rss)
{
	if (!op->have_rss) {
		dmt_rss_free(&op->rss);
		op->rss_err = op->e->ops->rss_get(op->e, 0, &op->rss);
		op->have_rss = true;
	}
	*rss = &op->rss;
	return op->rss_err;
}

long dmt_op_find_rule(const struct dmt_op *op, uint32_t loc)
{
	for (long i = 0; i < op->nrules; i++)
		if (op->rules[i].location == loc)
			return i;
	return -1;
}

void dmt_op_forget_rule(struct dmt_op *op, long i)
{
	op->rules[i] = op->rules[--op->nrules];
}

/* The device's rule at i is the rule r we inserted. */
bool dmt_rule_is(const struct dmt_rule *d, const struct dmt_orule *r)
{
	return dmt_spec_equal(&d->fs, &r->fs) &&
	       (!(r->fs.flow_type & FLOW_RSS) || d->rss_context == r->rss_context);
}

bool dmt_table_is(const struct dmt_rss *rss, const struct dmt_owner *o)
{
	return rss->indir_size == o->ctx_size &&
	       memcmp(rss->indir, o->ctx_indir, o->ctx_size * 4) == 0;
}

/* ---------------------------------------------------------------------- */
/* queues                                                                  */

int dmt_op_count_rx(struct dmt_op *op)
{
	struct dmt_eth *e = op->e;
	struct dmt_channels ch;
	uint32_t rx, tx;
	int err = e->ops->channels_get(e, &ch);

	if (err == 0 && ch.rx + ch.combined) {
		op->nrx = ch.rx + ch.combined;
		return 0;
	}
	if (op->nl) {
		struct devmemtcp_queue q[256];
		int nq = dmt_queue_list(op->nl, e->ifindex, q, ARRAY_SIZE(q));

		op->nrx = 0;
		for (int i = 0; i < nq && i < (int)ARRAY_SIZE(q); i++)
			op->nrx += q[i].type == DEVMEMTCP_QUEUE_RX;
		if (!op->nrx && dmt_sysfs_queues(e->ifname, &rx, &tx) == 0)
			op->nrx = rx;
		if (op->nrx)
			return 0;
	}
	return err < 0 ? err : -EOPNOTSUPP;
}

/* Who has each queue: an owner's index, FREE, or what feeds it that no
 * owner made: a binding queue-get shows (ref: the queue-get entry), a rule
 * (ref: its index in op->rules), an RSS context (ref: its id). */
enum { Q_FREE = -1, Q_OUTSIDE = -2, Q_RULE = -3, Q_CONTEXT = -4 };

struct qslot {
	int32_t who;
	uint32_t ref;
};

static void mark(struct qslot *m, uint32_t nrx, uint32_t q, int32_t who, uint32_t ref)
{
	if (q < nrx && m[q].who == Q_FREE)
		m[q] = (struct qslot){ who, ref };
}

/* The device's rule d is one an owner recorded: at the location of a
 * placed rule, or with the content of a pending one at a new location. */
static bool owners_rule(const struct dmt_op *op, const struct dmt_rule *d)
{
	for (size_t i = 0; i < op->nowners; i++) {
		const struct dmt_owner *o = &op->owners[i];

		for (uint32_t k = 0; k < o->nrules; k++) {
			const struct dmt_orule *r = &o->rules[k];

			if (r->placed ? r->location == d->location
				      : dmt_rule_is(d, r) && !dmt_in_list(d->location, r->before, r->nbefore))
				return true;
		}
	}
	return false;
}

/* The device's context c is one an owner created (or, pending, the one
 * new context with its table). */
static bool owners_context(const struct dmt_op *op, const struct dmt_rss *c)
{
	for (size_t i = 0; i < op->nowners; i++) {
		const struct dmt_owner *o = &op->owners[i];

		if (o->ctx == DMT_CTX_PLACED && o->ctx_id == c->context)
			return true;
		if (o->ctx == DMT_CTX_PENDING && dmt_table_is(c, o) &&
		    !dmt_in_list(c->context, o->ctx_before, o->nctx_before))
			return true;
	}
	return false;
}

static const struct dmt_rss *find_context(const struct dmt_op *op, uint32_t id)
{
	for (long i = 0; i < op->nctxs; i++)
		if (op->ctxs[i].context == id)
			return &op->ctxs[i];
	return NULL;
}

/* The queues rules and contexts of nobody's deliver into: an
 * administrator's steering, which a devmem owner would read. */
static void map_foreign(struct dmt_op *op, struct qslot *m)
{
	for (long i = 0; i < op->nrules; i++) {
		const struct dmt_rule *d = &op->rules[i];
		uint64_t cookie = d->fs.ring_cookie;
		const struct dmt_rss *c;

		if (cookie == RX_CLS_FLOW_DISC || (cookie >> 32) || owners_rule(op, d))
			continue;	/* dropped, to a VF, or an owner's */
		if (!(d->fs.flow_type & FLOW_RSS)) {
			mark(m, op->nrx, (uint32_t)cookie, Q_RULE, (uint32_t)i);
			continue;
		}
		/* to a context: its queues, shifted by the ring (plain RSS
		 * when both are 0, which the default table decides) */
		if ((!d->rss_context && !(uint32_t)cookie) ||
		    !(c = find_context(op, d->rss_context)))
			continue;
		for (uint32_t k = 0; k < c->indir_size; k++)
			mark(m, op->nrx, c->indir[k] + (uint32_t)cookie, Q_RULE, (uint32_t)i);
	}
	for (long i = 0; i < op->nctxs; i++) {
		const struct dmt_rss *c = &op->ctxs[i];

		if (!c->context || owners_context(op, c))
			continue;
		for (uint32_t k = 0; k < c->indir_size; k++)
			mark(m, op->nrx, c->indir[k], Q_CONTEXT, c->context);
	}
}

static int queue_map(struct dmt_op *op, struct qslot *m, char *why, size_t whylen)
{
	int err;

	for (uint32_t q = 0; q < op->nrx; q++)
		m[q] = (struct qslot){ Q_FREE, 0 };
	for (size_t i = 0; i < op->nowners; i++)
		for (uint32_t k = 0; k < op->owners[i].nqueues; k++)
			if (op->owners[i].queues[k] < op->nrx)
				m[op->owners[i].queues[k]].who = (int32_t)i;
	err = dmt_op_queue_get(op);
	if (err < 0) {
		snprintf(why, whylen, "%s", op->err->msg);
		return err;
	}
	for (int i = 0; i < op->nqget; i++) {
		char what[32];

		if (op->qget[i].type == DEVMEMTCP_QUEUE_RX &&
		    dmt_op_queue_bound(op, op->qget[i].id, what, sizeof(what)))
			mark(m, op->nrx, op->qget[i].id, Q_OUTSIDE, (uint32_t)i);
	}
	err = dmt_op_rules(op);
	if (err < 0) {
		snprintf(why, whylen, "cannot read the ntuple rules of %s: %s", op->e->ifname,
			 err == -ENOMEM ? "out of memory" : dmt_errno_name(err));
		return err;
	}
	err = dmt_op_contexts(op);
	if (err < 0) {
		snprintf(why, whylen, "cannot read the RSS contexts of %s: %s", op->e->ifname,
			 err == -ENOMEM ? "out of memory" : dmt_errno_name(err));
		return err;
	}
	map_foreign(op, m);
	return 0;
}

/* "16 in all, 12 owned by 3 processes, 1 in use outside devmemtcp, 2 fed
 * by ntuple rules or RSS contexts outside devmemtcp, 1 kept for other
 * traffic" */
static void queue_summary(const struct dmt_op *op, const struct qslot *m,
			  uint32_t keep, char *buf, size_t len)
{
	uint32_t owned = 0, outside = 0, fed = 0, procs = 0;
	size_t o = 0;

	for (uint32_t q = 0; q < op->nrx; q++) {
		owned += m[q].who >= 0;
		outside += m[q].who == Q_OUTSIDE;
		fed += m[q].who == Q_RULE || m[q].who == Q_CONTEXT;
	}
	for (size_t i = 0; i < op->nowners; i++) {
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = op->owners[k].pid == op->owners[i].pid;
		procs += !seen && op->owners[i].nqueues;
	}
	o += (size_t)snprintf(buf + o, len - o, "%u in all, %u owned by %u process%s",
			      op->nrx, owned, procs, procs == 1 ? "" : "es");
	if (outside && o < len)
		o += (size_t)snprintf(buf + o, len - o, ", %u in use outside devmemtcp", outside);
	if (fed && o < len)
		o += (size_t)snprintf(buf + o, len - o,
				      ", %u fed by ntuple rules or RSS contexts outside devmemtcp", fed);
	if (keep && o < len)
		snprintf(buf + o, len - o, ", %u kept for other traffic", keep);
}

/* Why queue q, which m says is not free, cannot be had. */
static int taken(const struct dmt_op *op, const struct qslot *m, uint32_t q,
		 char *why, size_t whylen)
{
	const char *ifname = op->e->ifname;
	const struct dmt_rule *d;
	char what[160];

	switch (m[q].who) {
	case Q_OUTSIDE:
		dmt_op_queue_bound(op, q, what, sizeof(what));
		snprintf(why, whylen,
			 "RX queue %u of %s has %s on it, which no devmemtcp owner put there: pick another queue",
			 q, ifname, what);
		break;
	case Q_RULE:
		d = &op->rules[m[q].ref];
		dmt_spec_str(&d->fs, d->rss_context, what, sizeof(what));
		snprintf(why, whylen,
			 "RX queue %u of %s receives the packets of ntuple rule %u (%s), which no devmemtcp owner made: "
			 "pick another queue, or delete the rule (ethtool -N %s delete %u)",
			 q, ifname, d->location, what, ifname, d->location);
		break;
	case Q_CONTEXT:
		snprintf(why, whylen,
			 "RX queue %u of %s is in RSS context %u, which no devmemtcp owner made: "
			 "pick another queue, or delete the context and the rules that use it (ethtool -X %s context %u delete)",
			 q, ifname, m[q].ref, ifname, m[q].ref);
		break;
	default:
		snprintf(why, whylen,
			 "RX queue %u of %s is owned by pid %ld (%s): pick another queue, or let the library pick free ones (queues = NULL)",
			 q, ifname, (long)op->owners[m[q].who].pid, op->owners[m[q].who].comm);
		break;
	}
	return -EBUSY;
}

static int plan_explicit(struct dmt_op *op, const struct qslot *m,
			 const uint32_t *req, uint32_t nreq, bool allow_all,
			 uint32_t *out, char *why, size_t whylen)
{
	const char *ifname = op->e->ifname;
	uint32_t nfree = 0;
	char sum[256];
	int n = dmt_plan_queues(op->nrx, req, nreq, nreq, true, out, why, whylen);

	if (n < 0)
		return n;
	for (uint32_t i = 0; i < nreq; i++)
		if (m[req[i]].who != Q_FREE)
			return taken(op, m, req[i], why, whylen);
	for (uint32_t q = 0; q < op->nrx; q++)
		nfree += m[q].who == Q_FREE;
	if (allow_all || nfree > nreq)
		return n;
	if (nfree == op->nrx)
		return dmt_plan_queues(op->nrx, req, nreq, nreq, false, out, why, whylen);
	queue_summary(op, m, 1, sum, sizeof(sum));
	snprintf(why, whylen, "%s has %u free RX queues (%s): ask for at most %u",
		 ifname, nfree ? nfree - 1 : 0, sum, nfree ? nfree - 1 : 0);
	return -ENOSPC;
}

static int plan_free(struct dmt_op *op, const struct qslot *m, uint32_t k,
		     bool allow_all, uint32_t *out, char *why, size_t whylen)
{
	uint32_t nfree = 0, keep = allow_all ? 0 : 1, avail, got = 0;
	char sum[256];

	if (k == 0)
		k = 1;
	for (uint32_t q = 0; q < op->nrx; q++)
		nfree += m[q].who == Q_FREE;
	if (k > op->nrx || nfree == op->nrx)	/* nobody else: the old words */
		return dmt_plan_queues(op->nrx, NULL, 0, k, allow_all, out, why, whylen);
	avail = nfree > keep ? nfree - keep : 0;
	if (k > avail) {
		queue_summary(op, m, nfree ? keep : 0, sum, sizeof(sum));
		snprintf(why, whylen, "%s has %u free RX queues (%s): ask for at most %u",
			 op->e->ifname, avail, sum, avail);
		return -ENOSPC;
	}
	/* the highest-numbered free ones, in ascending order */
	for (uint32_t q = op->nrx; q-- > 0 && got < k;)
		if (m[q].who == Q_FREE)
			out[k - 1 - got++] = q;
	return (int)k;
}

int dmt_op_plan_queues(struct dmt_op *op, const uint32_t *req, uint32_t nreq,
		       uint32_t k, bool allow_all, uint32_t *out, char *why,
		       size_t whylen)
{
	struct qslot *m = dmt_calloc(op->nrx ? op->nrx : 1, sizeof(*m));
	int n;

	if (!m) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	n = queue_map(op, m, why, whylen);
	if (n == 0 && req)
		n = plan_explicit(op, m, req, nreq, allow_all, out, why, whylen);
	else if (n == 0)
		n = plan_free(op, m, k, allow_all, out, why, whylen);
	free(m);
	return n;
}

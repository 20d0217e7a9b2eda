// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The owners of an interface (HACKING.md, "The NIC layer: many owners per
 * interface").  Each devmemtcp_nic handle is an owner with its own file
 * IF.owner.PID.START.N; the shared settings (header split, hds-thresh,
 * ntuple, the default RSS table) are derived from the baseline in IF.base
 * and the live owners (and the queues queue-get shows bound, which never
 * go back into the default table), and changed only where the device
 * still shows what the owners last wrote.  Everything here runs under the
 * interface lock (struct dmt_op); nic.c drives it.
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
/* flows                                                                   */

/* Some value matches both (value a under mask ma, b under mb)? */
static bool fields_meet(const void *a, const void *ma, const void *b,
			const void *mb, size_t n)
{
	const uint8_t *x = a, *mx = ma, *y = b, *my = mb;

	for (size_t i = 0; i < n; i++)
		if ((x[i] ^ y[i]) & mx[i] & my[i])
			return false;
	return true;
}

#define MEET(a, ma, b, mb) fields_meet(&(a), &(ma), &(b), &(mb), sizeof(a))

static uint32_t base_type(const struct ethtool_rx_flow_spec *fs)
{
	return fs->flow_type & ~(uint32_t)(FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS);
}

/* The L4 part of a TCP match (ports, protocol TCP) against an IP rule's
 * protocol and first four bytes of the L4 header (where the ports are). */
static bool l4_meets(const __be16 *psrc, const __be16 *pdst, const __be16 *mpsrc,
		     const __be16 *mpdst, const uint8_t *proto, const uint8_t *mproto,
		     const __be32 *l4, const __be32 *ml4)
{
	uint8_t ports[4], pmask[4], tcp = IPPROTO_TCP, all = 0xff;

	memcpy(ports, psrc, 2);
	memcpy(ports + 2, pdst, 2);
	memcpy(pmask, mpsrc, 2);
	memcpy(pmask + 2, mpdst, 2);
	return fields_meet(&tcp, &all, proto, mproto, 1) &&
	       fields_meet(ports, pmask, l4, ml4, 4);
}

/* tcp (a) against an IP rule (b) of the same family. */
static bool tcp4_meets_ip4(const struct ethtool_rx_flow_spec *a,
			   const struct ethtool_rx_flow_spec *b)
{
	const struct ethtool_tcpip4_spec *h = &a->h_u.tcp_ip4_spec, *m = &a->m_u.tcp_ip4_spec;
	const struct ethtool_usrip4_spec *u = &b->h_u.usr_ip4_spec, *um = &b->m_u.usr_ip4_spec;

	return MEET(h->ip4src, m->ip4src, u->ip4src, um->ip4src) &&
	       MEET(h->ip4dst, m->ip4dst, u->ip4dst, um->ip4dst) &&
	       MEET(h->tos, m->tos, u->tos, um->tos) &&
	       l4_meets(&h->psrc, &h->pdst, &m->psrc, &m->pdst, &u->proto,
			&um->proto, &u->l4_4_bytes, &um->l4_4_bytes);
}

static bool tcp6_meets_ip6(const struct ethtool_rx_flow_spec *a,
			   const struct ethtool_rx_flow_spec *b)
{
	const struct ethtool_tcpip6_spec *h = &a->h_u.tcp_ip6_spec, *m = &a->m_u.tcp_ip6_spec;
	const struct ethtool_usrip6_spec *u = &b->h_u.usr_ip6_spec, *um = &b->m_u.usr_ip6_spec;

	return MEET(h->ip6src, m->ip6src, u->ip6src, um->ip6src) &&
	       MEET(h->ip6dst, m->ip6dst, u->ip6dst, um->ip6dst) &&
	       MEET(h->tclass, m->tclass, u->tclass, um->tclass) &&
	       l4_meets(&h->psrc, &h->pdst, &m->psrc, &m->pdst, &u->l4_proto,
			&um->l4_proto, &u->l4_4_bytes, &um->l4_4_bytes);
}

bool dmt_spec_overlap(const struct ethtool_rx_flow_spec *a,
		      const struct ethtool_rx_flow_spec *b)
{
	uint32_t ta = base_type(a), tb = base_type(b);

	if (ta == TCP_V4_FLOW && tb == TCP_V4_FLOW) {
		const struct ethtool_tcpip4_spec *x = &a->h_u.tcp_ip4_spec, *mx = &a->m_u.tcp_ip4_spec;
		const struct ethtool_tcpip4_spec *y = &b->h_u.tcp_ip4_spec, *my = &b->m_u.tcp_ip4_spec;

		return MEET(x->ip4src, mx->ip4src, y->ip4src, my->ip4src) &&
		       MEET(x->ip4dst, mx->ip4dst, y->ip4dst, my->ip4dst) &&
		       MEET(x->psrc, mx->psrc, y->psrc, my->psrc) &&
		       MEET(x->pdst, mx->pdst, y->pdst, my->pdst) &&
		       MEET(x->tos, mx->tos, y->tos, my->tos);
	}
	if (ta == TCP_V6_FLOW && tb == TCP_V6_FLOW) {
		const struct ethtool_tcpip6_spec *x = &a->h_u.tcp_ip6_spec, *mx = &a->m_u.tcp_ip6_spec;
		const struct ethtool_tcpip6_spec *y = &b->h_u.tcp_ip6_spec, *my = &b->m_u.tcp_ip6_spec;

		return MEET(x->ip6src, mx->ip6src, y->ip6src, my->ip6src) &&
		       MEET(x->ip6dst, mx->ip6dst, y->ip6dst, my->ip6dst) &&
		       MEET(x->psrc, mx->psrc, y->psrc, my->psrc) &&
		       MEET(x->pdst, mx->pdst, y->pdst, my->pdst) &&
		       MEET(x->tclass, mx->tclass, y->tclass, my->tclass);
	}
	if (ta == TCP_V4_FLOW && tb == IP_USER_FLOW)
		return tcp4_meets_ip4(a, b);
	if (tb == TCP_V4_FLOW && ta == IP_USER_FLOW)
		return tcp4_meets_ip4(b, a);
	if (ta == TCP_V6_FLOW && tb == IPV6_USER_FLOW)
		return tcp6_meets_ip6(a, b);
	if (tb == TCP_V6_FLOW && ta == IPV6_USER_FLOW)
		return tcp6_meets_ip6(b, a);
	return false;
}

/* ---------------------------------------------------------------------- */
/* the shared settings                                                     */

static bool in_list(uint32_t v, const uint32_t *set, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

static int copy_shared(struct dmt_shared *dst, const struct dmt_shared *src)
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

/* dst's table becomes a copy of src's */
static int copy_table(struct dmt_shared *dst, const struct dmt_shared *src)
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

static bool same_table(const struct dmt_shared *a, const struct dmt_shared *b)
{
	return a->rss_size == b->rss_size &&
	       (!a->rss_size || memcmp(a->rss, b->rss, a->rss_size * 4) == 0);
}

/* q is a queue of an owner that keeps RSS on its queues. */
static bool kept_in_rss(uint32_t q, const struct dmt_owner *const *owners, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (owners[i]->keep_rss && in_list(q, owners[i]->queues, owners[i]->nqueues))
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
	int err = copy_shared(t, bl);

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
			if (o->queues[q] < nrx && !in_list(o->queues[q], uni, k))
				uni[k++] = o->queues[q];
	}
	/* whoever has them: their bytes go where someone can read them */
	for (uint32_t i = 0; i < nbound; i++) {
		if (bound[i] >= nrx || kept_in_rss(bound[i], owners, n))
			continue;
		held++;
		if (!in_list(bound[i], uni, k))
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

static int save_base(struct dmt_op *op)
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
static bool queue_bound(const struct dmt_op *op, uint32_t q, char *what, size_t len)
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
static int bound_queues(struct dmt_op *op, uint32_t **list, uint32_t *n)
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
		    queue_bound(op, op->qget[i].id, what, sizeof(what)) &&
		    !in_list(op->qget[i].id, *list, *n))
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

static long find_rule(const struct dmt_op *op, uint32_t loc)
{
	for (long i = 0; i < op->nrules; i++)
		if (op->rules[i].location == loc)
			return i;
	return -1;
}

static void forget_rule(struct dmt_op *op, long i)
{
	op->rules[i] = op->rules[--op->nrules];
}

/* The device's rule at i is the rule r we inserted. */
static bool rule_is(const struct dmt_rule *d, const struct dmt_orule *r)
{
	return dmt_spec_equal(&d->fs, &r->fs) &&
	       (!(r->fs.flow_type & FLOW_RSS) || d->rss_context == r->rss_context);
}

/* ---------------------------------------------------------------------- */
/* undo an owner's rules and context                                       */

static int delete_rule(struct dmt_op *op, long i)
{
	uint32_t loc = op->rules[i].location;
	int err = dmt_op_step(op, "deleting the rule at location %u", loc);

	if (!err)
		err = op->e->ops->rule_delete(op->e, loc);
	if (err == -ENOENT)
		err = 0;
	if (err < 0)
		return err;
	op->changes++;
	forget_rule(op, i);
	return 0;
}

/* One rule of o: deleted where it is still ours, else left and reported. */
static int undo_rule(struct dmt_op *op, const struct dmt_owner *o,
		     const struct dmt_orule *r)
{
	const char *ifname = op->e->ifname;
	long i, hit = -1, hits = 0;

	if (r->placed) {
		i = find_rule(op, r->location);
		if (i < 0)
			return 0;	/* gone already */
		if (rule_is(&op->rules[i], r))
			return delete_rule(op, i);
		dmt_op_report(op, "rule at location %u on %s differs from what pid %ld (%s) inserted: left alone",
			      r->location, ifname, (long)o->pid, o->comm);
		return 0;
	}
	/* pending: the insert may or may not have happened */
	for (i = 0; i < op->nrules; i++) {
		if (in_list(op->rules[i].location, r->before, r->nbefore) ||
		    !rule_is(&op->rules[i], r))
			continue;
		hit = i;
		hits++;
	}
	if (hits == 1)
		return delete_rule(op, hit);
	if (hits > 1)
		dmt_op_report(op, "%ld rules on %s match the rule pid %ld (%s) was inserting: left alone",
			      hits, ifname, (long)o->pid, o->comm);
	return 0;
}

static int undo_rules(struct dmt_op *op, struct dmt_owner *o)
{
	int err = dmt_op_rules(op);

	while (!err && o->nrules) {
		struct dmt_orule *r = &o->rules[o->nrules - 1];

		err = undo_rule(op, o, r);
		if (err < 0)
			break;
		free(r->before);
		r->before = NULL;
		o->nrules--;
	}
	return err;
}

static bool table_is(const struct dmt_rss *rss, const struct dmt_owner *o)
{
	return rss->indir_size == o->ctx_size &&
	       memcmp(rss->indir, o->ctx_indir, o->ctx_size * 4) == 0;
}

static int delete_ctx(struct dmt_op *op, const struct dmt_owner *o, uint32_t id)
{
	int err = dmt_op_step(op, "deleting RSS context %u", id);

	if (!err)
		err = op->e->ops->rss_ctx_delete(op->e, id);
	dmt_op_contexts_changed(op);
	if (err == -ENOENT)
		return 0;
	if (err == -EBUSY) {
		dmt_op_report(op, "RSS context %u on %s that pid %ld (%s) created is still used by rules: left alone",
			      id, op->e->ifname, (long)o->pid, o->comm);
		return 0;
	}
	if (!err)
		op->changes++;
	return err;
}

static int undo_placed_ctx(struct dmt_op *op, const struct dmt_owner *o)
{
	struct dmt_rss cur = { 0 };
	bool ours;
	int err;

	snprintf(op->doing, sizeof(op->doing), "RSS context %u", o->ctx_id);
	err = op->e->ops->rss_get(op->e, o->ctx_id, &cur);
	ours = err == 0 && table_is(&cur, o);

	dmt_rss_free(&cur);
	if (err == -ENOENT)
		return 0;
	if (err == -ENOMEM || err == -ENOBUFS || err == -EAGAIN || err == -EINTR)
		/* cannot tell yet: the record stays for the next attempt */
		return dmt_err_set(op->err, err,
				   "reading RSS context %u on %s: %s", o->ctx_id,
				   op->e->ifname, dmt_errno_name(err));
	if (err < 0) {
		/* cannot tell: leave it rather than delete what may not be ours */
		dmt_op_report(op, "RSS context %u on %s that pid %ld (%s) created cannot be read (%s): left alone",
			      o->ctx_id, op->e->ifname, (long)o->pid, o->comm,
			      dmt_errno_name(err));
		return 0;
	}
	if (ours)
		return delete_ctx(op, o, o->ctx_id);
	dmt_op_report(op, "RSS context %u on %s differs from what pid %ld (%s) created: left alone",
		      o->ctx_id, op->e->ifname, (long)o->pid, o->comm);
	return 0;
}

/* Created or not when the owner died: the one new context with our
 * table, if there is exactly one. */
static int undo_pending_ctx(struct dmt_op *op, const struct dmt_owner *o)
{
	struct dmt_rss *list = NULL;
	uint32_t id = 0, hits = 0;
	size_t n = 0;
	int err = op->e->ops->rss_dump(op->e, &list, &n);

	if (err == -EOPNOTSUPP)
		return 0;
	if (err < 0)
		return err;
	for (size_t i = 0; i < n; i++) {
		if (list[i].context && !in_list(list[i].context, o->ctx_before, o->nctx_before) &&
		    table_is(&list[i], o)) {
			id = list[i].context;
			hits++;
		}
		dmt_rss_free(&list[i]);
	}
	free(list);
	if (hits == 1)
		return delete_ctx(op, o, id);
	if (hits > 1)
		dmt_op_report(op, "%u RSS contexts on %s match the one pid %ld (%s) was creating: left alone",
			      hits, op->e->ifname, (long)o->pid, o->comm);
	return 0;
}

int dmt_op_undo_owner(struct dmt_op *op, struct dmt_owner *o, bool *gone)
{
	int err = 0;

	*gone = false;
	if (o->nrules)
		err = undo_rules(op, o);
	if (!err && o->ctx == DMT_CTX_PLACED)
		err = undo_placed_ctx(op, o);
	else if (!err && o->ctx == DMT_CTX_PENDING)
		err = undo_pending_ctx(op, o);
	if (err < 0)
		return err;
	o->ctx = DMT_CTX_NONE;
	*gone = true;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* dead owners                                                             */

static void drop_owner(struct dmt_op *op, size_t i)
{
	dmt_owner_free(&op->owners[i]);
	op->owners[i] = op->owners[op->nowners - 1];
	op->alive[i] = op->alive[op->nowners - 1];
	op->nowners--;
}

/* A queue of o still carries a binding, which some process holds (o's
 * own, a child that inherited the netlink socket, one it was passed to,
 * a thread of a leader that exited): o's steering stays, reported. */
static bool owner_held(struct dmt_op *op, const struct dmt_owner *o)
{
	char what[32];

	for (uint32_t k = 0; k < o->nqueues; k++) {
		if (!queue_bound(op, o->queues[k], what, sizeof(what)))
			continue;
		dmt_op_report(op, "the setup of %s by pid %ld (%s) stays: RX queue %u still carries %s "
			      "(its process, or one that inherited or was passed the binding, holds it); "
			      "its rules and RSS context stay, and its queues stay out of the default RSS table, until the binding is gone",
			      op->e->ifname, (long)o->pid, o->comm, o->queues[k], what);
		return true;
	}
	return false;
}

int dmt_op_clean(struct dmt_op *op, bool all)
{
	int first = 0;

	for (size_t i = 0; i < op->nowners;) {
		struct dmt_owner *o = &op->owners[i];
		char name[NAME_MAX + 1];
		bool gone;
		int err;

		if (op->alive[i] && !all) {
			i++;
			continue;
		}
		err = dmt_op_queue_get(op);
		if (err < 0) {
			/* cannot tell whether its binding lives: it stays */
			if (!first)
				first = err;
			i++;
			continue;
		}
		if (owner_held(op, o)) {
			i++;
			continue;
		}
		dmt_owner_name(o, name, sizeof(name));
		op->undid = true;
		err = dmt_op_undo_owner(op, o, &gone);
		if (!err && gone) {
			dmt_log(op->ctx, DEVMEMTCP_LOG_INFO,
				"%s: undid what pid %ld (%s) left (%s)", op->e->ifname,
				(long)o->pid, o->comm, name);
			dmt_file_remove(&op->rd, name);
			drop_owner(op, i);
			continue;
		}
		/* keep what is left for the next attempt; its queues stay
		 * claimed meanwhile */
		o->closed = true;
		op->alive[i] = false;
		dmt_op_save_owner(op, o, NULL, NULL);
		if (!first)
			first = dmt_err_set(op->err, err,
					    "undoing what pid %ld (%s) left on %s failed at %s: %s",
					    (long)o->pid, o->comm, op->e->ifname,
					    op->doing, dmt_errno_name(err));
		i++;
	}
	return first;
}

/* ---------------------------------------------------------------------- */
/* the shared settings on the device                                       */

/* The first owner: the baseline, before any change. */
static int snapshot_base(struct dmt_op *op)
{
	struct dmt_eth *e = op->e;
	struct dmt_base *b = &op->base;
	struct dmt_shared *bl = &b->baseline;
	const struct dmt_rss *rss;
	struct dmt_rings r;
	struct dmt_feature f;
	int err;

	memset(b, 0, sizeof(*b));
	snprintf(b->ifname, sizeof(b->ifname), "%s", e->ifname);
	b->ifindex = e->ifindex;
	b->netns = dmt_netns_id();
	err = dmt_op_dev_rings(op, &r);
	if (err < 0)
		return err;
	bl->tds = r.has_tds ? r.tds : -1;
	bl->hds = r.has_hds ? (int64_t)r.hds_thresh : -1;
	err = dmt_op_dev_ntuple(op, &f);
	if (err < 0)
		return err;
	bl->ntuple = f.active;
	err = dmt_op_dev_rss(op, &rss);
	if (err == 0 && rss->indir_size) {
		struct dmt_shared now = { .rss = rss->indir, .rss_size = rss->indir_size };

		err = copy_table(bl, &now);
	} else if (err == -EOPNOTSUPP) {
		err = 0;
	}
	if (err < 0)
		return err;
	b->rss_default = bl->rss_size && dmt_rss_is_default(bl->rss, bl->rss_size, op->nrx);
	err = copy_shared(&b->applied, bl);
	if (!err)
		err = save_base(op);
	if (err < 0) {
		dmt_base_free(b);
		return err;
	}
	op->have_base = true;
	return 0;
}

static const char *const setting_names[] = {
	"tcp-data-split", "hds-thresh", "rx-ntuple-filter", "the default RSS table",
};

static void theirs(struct dmt_op *op, uint32_t bit)
{
	int i = __builtin_ctz(bit);

	op->base.theirs |= bit;
	dmt_op_report(op, "%s of %s was changed by someone else since devmemtcp set it: left alone, also when the last owner goes",
		      setting_names[i], op->e->ifname);
}

/* tcp-data-split as the journal has it: -1 when not shown */
static int shown_tds(const struct dmt_rings *r)
{
	return r->has_tds ? r->tds : -1;
}

/* A change of an earlier operation that did not finish (a crash): what
 * the device shows now is either the old value or the new one, both
 * ours; anything else is someone else's. */
static int settle(struct dmt_op *op)
{
	struct dmt_base *b = &op->base;
	struct dmt_shared *a = &b->applied, *g = &b->applying;
	const struct dmt_rss *cur;
	struct dmt_rings r;
	struct dmt_feature f;
	int err;

	if (!b->has_applying)
		return 0;
	err = dmt_op_dev_rings(op, &r);
	if (err < 0)
		return err;
	if (!(b->theirs & DMT_S_TDS) && shown_tds(&r) != a->tds) {
		if (shown_tds(&r) == g->tds)
			a->tds = g->tds;
		else
			theirs(op, DMT_S_TDS);
	}
	if (r.has_hds && !(b->theirs & DMT_S_HDS) && r.hds_thresh != a->hds) {
		if (r.hds_thresh == g->hds)
			a->hds = g->hds;
		else
			theirs(op, DMT_S_HDS);
	}
	err = dmt_op_dev_ntuple(op, &f);
	if (err < 0)
		return err;
	if (!(b->theirs & DMT_S_NTUPLE) && f.active != a->ntuple) {
		if (f.active == g->ntuple)
			a->ntuple = g->ntuple;
		else
			theirs(op, DMT_S_NTUPLE);
	}
	if (a->rss_size && !(b->theirs & DMT_S_RSS)) {
		struct dmt_shared now = { 0 };

		err = dmt_op_dev_rss(op, &cur);
		if (err < 0)
			return err;
		now.rss = cur->indir;
		now.rss_size = cur->indir_size;
		if (!same_table(&now, a)) {
			if (same_table(&now, g))
				err = copy_table(a, g);
			else
				theirs(op, DMT_S_RSS);
		}
		if (err < 0)
			return err;
	}
	dmt_shared_free(g);
	b->has_applying = false;
	return 0;
}

static int change_rings(struct dmt_op *op, const struct dmt_shared *t,
			bool restoring)
{
	struct dmt_base *b = &op->base;
	const struct dmt_shared *a = &b->applied;
	struct dmt_eth *e = op->e;
	bool tds = !(b->theirs & DMT_S_TDS) && t->tds != a->tds;
	/* a baseline not shown is restored as auto */
	int want = t->tds < 0 ? DMT_ETHTOOL_TCP_DATA_SPLIT_UNKNOWN : t->tds;
	bool hds = !(b->theirs & DMT_S_HDS) && t->hds >= 0 && t->hds != a->hds;
	struct dmt_rings r;
	int err;

	snprintf(op->doing, sizeof(op->doing), "header split");
	err = dmt_op_dev_rings(op, &r);
	if (err < 0)
		return err;
	if (tds && shown_tds(&r) != a->tds) {
		if (shown_tds(&r) != t->tds)
			theirs(op, DMT_S_TDS);
		tds = false;
	}
	if (hds && r.has_hds && r.hds_thresh != a->hds) {
		if (r.hds_thresh != t->hds)
			theirs(op, DMT_S_HDS);
		hds = false;
	}
	if (!tds && !hds)
		return 0;
	/* The kernel's bind-rx checks the header split a user configured, not
	 * the one a driver shows: bnxt_en (with hardware GRO) and fbnic show
	 * "on" while the configuration is still auto.  So "on" goes along
	 * with hds-thresh, and back, to auto first, with it. */
	if (!(b->theirs & DMT_S_TDS) && t->tds == DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED &&
	    a->tds == DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED && shown_tds(&r) == a->tds)
		tds = true;
	err = dmt_op_step(op, "header split");
	if (err < 0)
		return err;
	op->have_rings = false;
	if (restoring && tds) {
		/* "auto" first, as ethtool does: a driver whose default
		 * matched the old state is left in its default mode. */
		err = e->ops->rings_set(e, DMT_ETHTOOL_TCP_DATA_SPLIT_UNKNOWN,
					hds ? t->hds : -1);
		if (err == 0)
			err = e->ops->rings_get(e, &r);
		if (err == 0 && shown_tds(&r) != t->tds && t->tds >= 0)
			err = e->ops->rings_set(e, t->tds, -1);
		else if (err < 0)
			err = e->ops->rings_set(e, want, hds ? t->hds : -1);
	} else {
		err = e->ops->rings_set(e, tds ? want : -1, hds ? t->hds : -1);
		if (err == -EINVAL && e->nl && strstr(e->nl->extack, "GRO HW is disabled")) {
			/* mlx5_core splits headers only with hardware GRO */
			char why[sizeof(e->err->msg)];

			snprintf(why, sizeof(why), "%s", e->err->msg);
			dmt_err_set(e->err, err, "%s: turn hardware GRO on first (ethtool -K %s rx-gro-hw on)",
				    why, e->ifname);
		}
	}
	if (!err)
		op->changes++;
	return err;
}

static int change_rss(struct dmt_op *op, const struct dmt_shared *t)
{
	struct dmt_base *b = &op->base;
	struct dmt_eth *e = op->e;
	const struct dmt_rss *cur;
	struct dmt_shared now = { 0 };
	bool ours, done;
	int err;

	snprintf(op->doing, sizeof(op->doing), "RSS table");
	err = dmt_op_dev_rss(op, &cur);
	if (err < 0)
		return err;
	now.rss = cur->indir;
	now.rss_size = cur->indir_size;
	ours = same_table(&now, &b->applied);
	done = same_table(&now, t);
	if (!ours) {
		if (!done)
			theirs(op, DMT_S_RSS);
		return 0;
	}
	err = dmt_op_step(op, "RSS table");
	if (err < 0)
		return err;
	op->have_rss = false;
	if (b->rss_default && same_table(t, &b->baseline))
		err = e->ops->rss_set(e, 0, NULL, 0);	/* the driver's own */
	else
		err = e->ops->rss_set(e, 0, t->rss, t->rss_size);
	if (!err)
		op->changes++;
	return err;
}

/* Turning ntuple filters off deletes every rule on most drivers: with
 * rules of others there, it stays on (and *t says so). */
static int change_ntuple(struct dmt_op *op, struct dmt_shared *t)
{
	struct dmt_base *b = &op->base;
	struct dmt_eth *e = op->e;
	struct dmt_feature f;
	int err;

	snprintf(op->doing, sizeof(op->doing), "ntuple feature");
	err = dmt_op_dev_ntuple(op, &f);
	if (err < 0)
		return err;
	if (f.active != b->applied.ntuple) {
		if (f.active != t->ntuple)
			theirs(op, DMT_S_NTUPLE);
		return 0;
	}
	if (t->ntuple && (!f.present || !f.hw || f.nochange))
		return dmt_err_set(op->err, -EOPNOTSUPP,
				   "%s cannot turn on ntuple filters (rx-ntuple-filter is %s): "
				   "devmem needs a NIC whose driver supports ntuple flow steering",
				   e->ifname, !f.present ? "unknown" : "off [fixed]");
	if (!t->ntuple) {
		err = dmt_op_rules(op);
		if (err < 0)
			return err;
		if (op->nrules > 0) {
			dmt_op_report(op, "rx-ntuple-filter stays on: %s has %ld ntuple rules devmemtcp did not make, which turning it off would delete",
				      e->ifname, op->nrules);
			t->ntuple = 1;
			return 0;
		}
	}
	err = dmt_op_step(op, "ntuple feature");
	op->have_feat = false;
	if (!err)
		err = e->ops->feature_set(e, DMT_NTUPLE_FEATURE, t->ntuple);
	if (!err)
		op->changes++;
	return err;
}

/* Bring the device from applied to t: write-ahead, change in a safe
 * order, commit.  With restoring (no owner left) the order is reversed. */
static int apply_shared(struct dmt_op *op, struct dmt_shared *t, bool restoring)
{
	struct dmt_base *b = &op->base;
	const struct dmt_shared *a = &b->applied;
	bool rings = (!(b->theirs & DMT_S_TDS) && t->tds != a->tds) ||
		     (!(b->theirs & DMT_S_HDS) && t->hds != a->hds);
	bool ntuple = !(b->theirs & DMT_S_NTUPLE) && t->ntuple != a->ntuple;
	bool rss = !(b->theirs & DMT_S_RSS) && !same_table(t, a);
	int err;

	if (!rings && !ntuple && !rss)
		return 0;
	err = copy_shared(&b->applying, t);
	if (err < 0)
		return err;
	b->has_applying = true;
	err = save_base(op);
	if (err < 0)
		return err;
	if (!restoring) {
		if (rings)
			err = change_rings(op, t, false);
		if (!err && rss)
			err = change_rss(op, t);
		if (!err && ntuple)
			err = change_ntuple(op, t);
	} else {
		if (ntuple)
			err = change_ntuple(op, t);
		if (!err && rss)
			err = change_rss(op, t);
		if (!err && rings)
			err = change_rings(op, t, true);
	}
	if (err < 0)
		return err;	/* applying stays: either value is ours */
	/* committed: what is theirs keeps its last applied value */
	if (!(b->theirs & DMT_S_RSS)) {
		err = copy_table(&b->applied, t);
		if (err < 0)
			return err;
	}
	if (!(b->theirs & DMT_S_TDS))
		b->applied.tds = t->tds;
	if (!(b->theirs & DMT_S_HDS))
		b->applied.hds = t->hds;
	if (!(b->theirs & DMT_S_NTUPLE))
		b->applied.ntuple = t->ntuple;
	dmt_shared_free(&b->applying);
	b->has_applying = false;
	return restoring ? 0 : save_base(op);
}

static bool same_shared(const struct dmt_shared *a, const struct dmt_shared *b)
{
	return a->tds == b->tds && a->hds == b->hds && a->ntuple == b->ntuple &&
	       same_table(a, b);
}

/* Nobody is left, but a bound queue keeps the shared settings from
 * going back: say which, and that IF.base stays. */
static void report_held(struct dmt_op *op, const uint32_t *bound, uint32_t nbound)
{
	char what[32];

	for (uint32_t i = 0; i < nbound; i++) {
		if (!queue_bound(op, bound[i], what, sizeof(what)))
			continue;
		dmt_op_report(op, "RX queue %u of %s still carries %s although no devmemtcp owner is left: "
			      "the default RSS table stays off it, and %s/%s.base stays, until it is gone "
			      "(then the next open, close or devmemtcp restore %s puts the rest back)",
			      bound[i], op->e->ifname, what, op->rd.path, op->e->ifname,
			      op->e->ifname);
		return;
	}
}

int dmt_op_reconcile(struct dmt_op *op, const struct dmt_owner *me,
		     bool more_rules)
{
	const struct dmt_owner **list;
	struct dmt_shared t = { 0 };
	char name[IF_NAMESIZE + 8];
	uint32_t *bound = NULL, nbound = 0;
	bool restoring = false;
	size_t n = 0;
	int err;

	snprintf(op->doing, sizeof(op->doing), "the shared settings");
	list = dmt_calloc(op->nowners + 1, sizeof(*list));
	if (!list)
		return dmt_err_set(op->err, -ENOMEM, "%s: out of memory", op->e->ifname);
	for (size_t i = 0; i < op->nowners; i++)
		list[n++] = &op->owners[i];
	if (me)
		list[n++] = me;
	err = 0;
	if (n == 0 && !op->have_base)
		goto out;
	if (!op->nrx)
		err = dmt_op_count_rx(op);
	if (!err)
		err = bound_queues(op, &bound, &nbound);
	if (!err && !op->have_base)
		err = snapshot_base(op);
	if (!err)
		err = settle(op);
	if (!err)
		err = dmt_derive_shared(&op->base, op->nrx, list, n, bound, nbound,
					more_rules, &t);
	restoring = !err && n == 0 && same_shared(&t, &op->base.baseline);
	if (!err)
		err = apply_shared(op, &t, restoring);
	if (!err && restoring) {
		snprintf(name, sizeof(name), "%s.base", op->e->ifname);
		err = dmt_file_remove(&op->rd, name);
		dmt_base_free(&op->base);
		op->have_base = false;
		op->undid = true;
	} else if (!err && n == 0) {
		report_held(op, bound, nbound);
	}
	dmt_shared_free(&t);
out:
	free(bound);
	free(list);
	if (err < 0 && !op->err->msg[0])
		dmt_err_set(op->err, err, "%s", dmt_errno_name(err));
	return err;
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
				      : rule_is(d, r) && !in_list(d->location, r->before, r->nbefore))
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
		if (o->ctx == DMT_CTX_PENDING && table_is(c, o) &&
		    !in_list(c->context, o->ctx_before, o->nctx_before))
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
		    queue_bound(op, op->qget[i].id, what, sizeof(what)))
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
		queue_bound(op, q, what, sizeof(what));
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

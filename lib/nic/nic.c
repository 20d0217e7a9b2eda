// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Transactional NIC setup for one owner of an interface among several
 * (HACKING.md, "The NIC layer"): open = under the interface lock, undo
 * what dead owners left, plan this owner's queues, write its file, bring
 * the shared settings to what the owners need, create its RSS context and
 * rules (each written pending first); then bind-rx outside the lock.
 * Close, a failed open and devmemtcp_nic_recover() undo in reverse.  The
 * owners' model and the shared settings are lib/nic/owners.c; the files and
 * the lock lib/nic/journal.c and rundir.c (nic.h); the handle's owner file
 * handle.c, flows as rules rules.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf/buf.h"
#include "core/fork.h"
#include "core/privops.h"
#include "netdev.h"
#include "nic.h"
#include "core/uapi.h"

#if DMT_TEST_HOOKS
int dmt_nic_fail_step;
int dmt_nic_crash_step;
int dmt_test_nic_close_fail_step;
int dmt_test_nic_close_crash_step;
#endif

/* ---------------------------------------------------------------------- */
/* open / close                                                            */

static const struct dmt_nic_ops local_ops;

void dmt_nic_free(struct devmemtcp_nic *nic)
{
	if (!nic)
		return;
	devmemtcp_binding_close(nic->binding);
	dmt_eth_fini(&nic->eth);
	dmt_nl_close(nic->nl);
	dmt_owner_free(&nic->me);
	free(nic->text);
	free(nic);
}

/* The real ethtool layer needs a netlink socket (the unit tests' fake NIC
 * does not); e->nl borrows it, the caller closes it.  One of the handle's
 * own, not the context's: an operation holds it across the run
 * directory's lock (up to 10 s), and its round trips are the handle's
 * (devmemtcp_nic_stats). */
static int eth_nl_open(struct devmemtcp_ctx *ctx, struct dmt_eth *e,
		       struct dmt_nl **nl)
{
	int err;

	if (e->ops != &dmt_eth_real_ops)
		return 0;
	err = dmt_nl_open(nl, NETLINK_GENERIC);
	if (err < 0)
		return dmt_err(ctx, &ctx->err, err,
			       "cannot open a generic netlink socket: %s",
			       dmt_errno_name(err));
	e->nl = *nl;
	return 0;
}

int dmt_nic_check_open(struct devmemtcp_ctx *ctx,
		       const struct devmemtcp_nic_opts *opts,
		       struct devmemtcp_nic **nicp)
{
	const uint32_t known = DEVMEMTCP_NIC_RECOVER | DEVMEMTCP_NIC_NO_RSS_CONTEXT |
			       DEVMEMTCP_NIC_KEEP_RSS | DEVMEMTCP_NIC_ALLOW_SHADOW |
			       DEVMEMTCP_NIC_BROKER;
	int err;

	if (!nicp)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_nic_open: nic pointer is NULL");
	*nicp = NULL;
	err = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_nic_opts);
	if (err)
		return err;
	if (DMT_OPT(opts, devmemtcp_nic_opts, flags, 0) & ~known)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_nic_open: unknown flags 0x%x",
			       DMT_OPT(opts, devmemtcp_nic_opts, flags, 0) & ~known);
	if (DMT_OPT(opts, devmemtcp_nic_opts, nflows, 0) &&
	    !DMT_OPT(opts, devmemtcp_nic_opts, flows, NULL))
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_nic_open: nflows is %zu but flows is NULL",
			       DMT_OPT(opts, devmemtcp_nic_opts, nflows, 0));
	/* before anything is allocated for them */
	if (DMT_OPT(opts, devmemtcp_nic_opts, nqueues, 0) > DMT_MAX_QUEUES)
		return dmt_err(ctx, &ctx->err, -E2BIG,
			       "devmemtcp_nic_open: nqueues %u is more than any NIC has (at most %u queues)",
			       DMT_OPT(opts, devmemtcp_nic_opts, nqueues, 0),
			       DMT_MAX_QUEUES);
	return 0;
}

/* A handle on ifname with its ethtool layer, nothing changed or locked. */
static int nic_new(struct devmemtcp_ctx *ctx, const char *ifname,
		   const struct devmemtcp_nic_opts *opts,
		   struct devmemtcp_nic **nicp)
{
	struct devmemtcp_nic *nic = dmt_calloc(1, sizeof(*nic));
	int err;

	if (nic)
		nic->fork_gen = dmt_fork_gen();
	if (!nic)
		return dmt_err(ctx, &ctx->err, -ENOMEM,
			       "devmemtcp_nic_open: out of memory");
	nic->ctx = ctx;
	nic->ops = &local_ops;
	nic->flags = DMT_OPT(opts, devmemtcp_nic_opts, flags, 0);
#if DMT_TEST_HOOKS
	nic->fail_step = dmt_nic_fail_step
				 ? dmt_nic_fail_step
				 : dmt_hook_env_int("DEVMEMTCP_NIC_FAIL_STEP");
	nic->crash_step = dmt_nic_crash_step
				  ? dmt_nic_crash_step
				  : dmt_hook_env_int("DEVMEMTCP_NIC_CRASH_STEP");
#endif
	snprintf(nic->run_dir, sizeof(nic->run_dir), "%s",
		 dmt_run_dir(DMT_OPT(opts, devmemtcp_nic_opts, run_dir, NULL)));
	err = dmt_eth_init(&nic->eth, &nic->eerr, NULL, ifname);
	if (err < 0)
		dmt_err(ctx, &ctx->err, err, "%s", nic->eerr.msg);
	else
		err = eth_nl_open(ctx, &nic->eth, &nic->nl);
	if (err < 0) {
		dmt_nic_free(nic);
		return err;
	}
	*nicp = nic;
	return 0;
}

/* Who this owner is: the process (or, for the broker, its client), a
 * handle number of its own, where. */
static atomic_uint handles;

void dmt_nic_handle_base(unsigned int base)
{
	unsigned int cur = atomic_load(&handles);

	while (cur < base && !atomic_compare_exchange_weak(&handles, &cur, base))
		;
}

static int identity(struct devmemtcp_nic *nic, pid_t pid, uint64_t start)
{
	struct dmt_owner *me = &nic->me;
	char path[64];
	FILE *f;

	me->pid = pid;
	me->start = start;
	me->handle = atomic_fetch_add(&handles, 1) + 1;
	if (pid == getpid()) {
		dmt_self_comm(me->comm, sizeof(me->comm));
	} else {
		snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
		f = fopen(path, "re");
		snprintf(me->comm, sizeof(me->comm), "?");
		if (f) {
			if (fgets(me->comm, sizeof(me->comm), f))
				me->comm[strcspn(me->comm, "\n")] = '\0';
			fclose(f);
		}
	}
	memcpy(me->ifname, nic->eth.ifname, sizeof(me->ifname));
	me->ifindex = nic->eth.ifindex;
	me->netns = dmt_netns_id();
	me->keep_rss = !!(nic->flags & DEVMEMTCP_NIC_KEEP_RSS);
	dmt_owner_name(me, nic->name, sizeof(nic->name));
	return 0;
}

static int no_header_split(struct devmemtcp_nic *nic)
{
	return dmt_err_set(&nic->eerr, -EOPNOTSUPP,
			   "%s does not support header split (tcp-data-split): "
			   "devmem TCP needs a driver with header split and queue management "
			   "(gve, bnxt_en, mlx5, fbnic)",
			   nic->eth.ifname);
}

/* What devmem needs of the driver, told before anything is changed:
 * header split, and an RSS table (unless the caller keeps RSS).  With
 * owners there, the baseline says. */
static int check_support(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	struct dmt_eth *e = &nic->eth;
	bool tds, rss = true;
	struct dmt_rings r;
	int err = 0;

	if (op->have_base) {
		tds = true;	/* the first owner's check passed */
		rss = op->base.baseline.rss_size > 0;
	} else {
		/* tcp-data-split not shown is tried: mlx5_core shows it only
		 * once it is set (a driver without it refuses, below) */
		err = dmt_op_dev_rings(op, &r);
		tds = err == 0;
		nic->tds_unreported = err == 0 && !r.has_tds;
		if (err == -EOPNOTSUPP)
			err = 0;
		if (!err && tds && !(nic->flags & DEVMEMTCP_NIC_KEEP_RSS)) {
			const struct dmt_rss *cur;

			err = dmt_op_dev_rss(op, &cur);
			rss = err == 0 && cur->indir_size;
			if (err == -EOPNOTSUPP)
				err = 0;
		}
	}
	if (err < 0)
		return err;
	if (!tds)
		return no_header_split(nic);
	if (!rss && !(nic->flags & DEVMEMTCP_NIC_KEEP_RSS))
		return dmt_err_set(&nic->eerr, -EOPNOTSUPP,
				   "%s has no RSS indirection table, so other traffic cannot be kept off the devmem queues: "
				   "pass DEVMEMTCP_NIC_KEEP_RSS if you steer it some other way",
				   e->ifname);
	return 0;
}

/* The devmem queues (opts, or free ones) and whether flows go to an RSS
 * context over them. */
static int plan_queues(struct devmemtcp_nic *nic, struct dmt_op *op,
		       const struct devmemtcp_nic_opts *opts)
{
	const uint32_t *req = DMT_OPT(opts, devmemtcp_nic_opts, queues, NULL);
	uint32_t k = DMT_OPT(opts, devmemtcp_nic_opts, nqueues, 0), room = k;
	char why[512];
	int nq;

	/* a count over the NIC's is refused with the count asked for; the
	 * array need not be larger than the NIC */
	if (!req && room > op->nrx)
		room = op->nrx + 1;
	nic->me.queues = dmt_calloc(room ? room : 1, sizeof(uint32_t));
	if (!nic->me.queues)
		return dmt_err(nic->ctx, &nic->ctx->err, -ENOMEM, "%s: out of memory",
			       nic->eth.ifname);
	nq = dmt_op_plan_queues(op, req, k, k,
				!!(nic->flags & DEVMEMTCP_NIC_KEEP_RSS),
				nic->me.queues, why, sizeof(why));
	if (nq < 0)
		return dmt_err(nic->ctx, &nic->ctx->err, nq, "%s: %s",
			       nic->eth.ifname, why);
	nic->me.nqueues = (uint32_t)nq;
	nic->use_ctx = nq > 1 && !(nic->flags & DEVMEMTCP_NIC_NO_RSS_CONTEXT);
	return 0;
}

/* An RSS context over the devmem queues, journalled as pending (with the
 * contexts there now) before it is created. */
static int apply_ctx(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	struct dmt_eth *e = &nic->eth;
	struct dmt_owner *me = &nic->me;
	uint32_t n = op->base.baseline.rss_size ? op->base.baseline.rss_size : 128;
	int err;

	snprintf(op->doing, sizeof(op->doing), "RSS context");
	if (!nic->use_ctx)
		return 0;
	me->ctx_indir = dmt_calloc(n, sizeof(uint32_t));
	me->ctx_before = dmt_calloc(DMT_LIST_MAX, sizeof(uint32_t));
	if (!me->ctx_indir || !me->ctx_before)
		return dmt_err_set(&nic->eerr, -ENOMEM, "out of memory");
	me->ctx_size = n;
	dmt_plan_ctx(n, me->queues, me->nqueues, me->ctx_indir);
	err = dmt_op_contexts(op);	/* planning read them */
	if (err < 0)
		return err;
	for (long i = 0; i < op->nctxs; i++)
		if (op->ctxs[i].context && me->nctx_before < DMT_LIST_MAX)
			me->ctx_before[me->nctx_before++] = op->ctxs[i].context;
	me->ctx = DMT_CTX_PENDING;
	err = dmt_nic_save(nic, op);
	if (!err)
		err = dmt_op_step(op, "RSS context");
	if (!err) {
		err = e->ops->rss_ctx_create(e, me->ctx_indir, n, &me->ctx_id);
		dmt_op_contexts_changed(op);
	}
	if (err == -EOPNOTSUPP || err == -EINVAL || err == -EBUSY) {
		/* No additional contexts (EBUSY: every id of the driver's
		 * taken, fbnic has one): steer flows to queues. */
		dmt_log(nic->ctx, DEVMEMTCP_LOG_INFO,
			"%s: no RSS contexts (%s), steering each flow to one queue",
			e->ifname, dmt_errno_name(err));
		dmt_err_clear(&nic->eerr);
		me->ctx = DMT_CTX_NONE;
		nic->use_ctx = false;
		return dmt_nic_save(nic, op);
	}
	if (err < 0)
		return err;
	op->changes++;
	me->ctx = DMT_CTX_PLACED;
	free(me->ctx_before);
	me->ctx_before = NULL;
	me->nctx_before = 0;
	return dmt_nic_save(nic, op);
}

/* Under the lock: the shared settings with this owner, its context and
 * its rules. */
static int apply(struct devmemtcp_nic *nic, struct dmt_op *op,
		 const struct devmemtcp_nic_opts *opts)
{
	size_t nflows = DMT_OPT(opts, devmemtcp_nic_opts, nflows, 0);
	const struct devmemtcp_flow *flows =
		DMT_OPT(opts, devmemtcp_nic_opts, flows, NULL);
	int err;

	err = dmt_op_reconcile(op, &nic->me, nflows > 0);
	if (!err)
		err = apply_ctx(nic, op);
	for (size_t i = 0; i < nflows && !err; i++) {
		err = dmt_nic_add_rule(nic, op, &flows[i], i);
		if (err > 0)
			err = 0;
	}
	return err;
}

/* Undo this owner's rules and context and remove its file; what cannot
 * be undone stays in the file, marked closed, for the next operation of
 * anyone.  A failure's message on nic->eerr. */
static int undo_own(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	bool gone = false;
	int err, e2;

	dmt_err_clear(&nic->eerr);	/* the callers keep the cause */
	err = dmt_op_undo_owner(op, &nic->me, &gone);
	if (!err && gone) {
		err = dmt_file_remove(&op->rd, nic->name);
		if (err < 0)
			dmt_err_set(&nic->eerr, err, "cannot remove %s/%s: %s",
				    op->rd.path, nic->name, dmt_errno_name(err));
		else
			nic->saved = false;
	}
	if (err < 0 && !nic->eerr.msg[0])
		dmt_err_set(&nic->eerr, err, "%s", dmt_errno_name(err));
	if (err < 0 || !gone) {
		e2 = dmt_nic_mark_closed(nic, op);
		if (!err)
			err = e2;
	}
	return err;
}

/* undo_own(), then the shared settings to what the others need, also
 * when that failed (whose message stays the one given).  Without the
 * others' files (unread: why not) the shared settings, which need every
 * owner's file, wait for the next operation. */
int dmt_nic_leave(struct devmemtcp_nic *nic, struct dmt_op *op,
		 const struct dmt_err *unread)
{
	char doing[sizeof(op->doing)];
	struct dmt_err first;
	int err = undo_own(nic, op);

	if (unread && err < 0)
		return err;
	if (unread) {
		nic->eerr = *unread;
		if (!nic->eerr.msg[0])
			dmt_err_set(&nic->eerr, unread->code, "%s",
				    dmt_errno_name(unread->code));
		return unread->code;
	}
	if (!err)
		return dmt_op_reconcile(op, nic->saved ? &nic->me : NULL, false);
	first = nic->eerr;
	memcpy(doing, op->doing, sizeof(doing));
	dmt_op_reconcile(op, nic->saved ? &nic->me : NULL, false);
	nic->eerr = first;
	memcpy(op->doing, doing, sizeof(doing));
	return err;
}

/* Apply failed at op->doing: undo this owner's steps and say both
 * (unread: the owners' files could not be read again, see dmt_nic_leave()). */
static int rollback(struct devmemtcp_nic *nic, struct dmt_op *op, int err,
		    const struct dmt_err *unread)
{
	struct devmemtcp_ctx *ctx = nic->ctx;
	struct dmt_err cause = nic->eerr;
	const char *ifname = nic->eth.ifname;
	char doing[sizeof(op->doing)], hint[256];
	uint32_t done = op->changes;

	memcpy(doing, op->doing, sizeof(doing));
	if (!cause.msg[0])
		dmt_err_set(&cause, err, "%s", dmt_errno_name(err));
	devmemtcp_binding_close(nic->binding);
	nic->binding = NULL;
	op->fail_step = op->crash_step = 0;
	if (dmt_nic_leave(nic, op, unread) < 0) {
		dmt_nic_finish_hint(nic, hint, sizeof(hint));
		return dmt_err(ctx, &ctx->err, err,
			       "setting up %s for devmem failed at %s: %s; "
			       "undoing the finished steps failed too (%s): %s",
			       ifname, doing, cause.msg, nic->eerr.msg, hint);
	}
	return dmt_err(ctx, &ctx->err, err,
		       "setting up %s for devmem failed at %s: %s; "
		       "the %u finished steps were undone",
		       ifname, doing, cause.msg, done);
}

uint64_t dmt_nic_binding_rt(const struct devmemtcp_nic *nic)
{
	return nic->binding && nic->binding->nl ? nic->binding->nl->round_trips : 0;
}

/* bind-rx outside the lock: the binding is this owner's alone. */
static int bind_queues(struct devmemtcp_nic *nic, struct dmt_op *op,
		const struct devmemtcp_nic_opts *opts)
{
	struct devmemtcp_buf *buf = DMT_OPT(opts, devmemtcp_nic_opts, buf, NULL);
	struct dmt_eth *e = &nic->eth;
	int err;

	snprintf(op->doing, sizeof(op->doing), "bind-rx");
	if (!buf)
		return 0;
	if (dmt_eth_is_up(e) == 0)
		return dmt_err_set(&nic->eerr, -ENETDOWN,
				   "%s is down, so its queues cannot take a binding: bring it up first (ip link set %s up)",
				   e->ifname, e->ifname);
	err = dmt_op_step(op, "bind-rx");
	if (err < 0)
		return err;
	err = devmemtcp_bind_rx(nic->ctx, e->ifindex, nic->me.queues,
				nic->me.nqueues, buf,
				DMT_OPT(opts, devmemtcp_nic_opts, bind_opts, NULL),
				&nic->binding);
	if (err < 0)
		return dmt_err_set(&nic->eerr, err, "%s", nic->ctx->err.msg);
	op->changes++;
	return 0;
}

/* The lock again, to undo a failed bind. */
static int rollback_bind(struct devmemtcp_nic *nic, struct dmt_op *op, int err)
{
	struct dmt_err cause = nic->eerr, unread;
	char doing[sizeof(op->doing)], hint[256];
	uint32_t done = op->changes;
	int ret;

	memcpy(doing, op->doing, sizeof(doing));
	ret = dmt_op_begin(op, nic->ctx, &nic->eth, nic->nl, nic->run_dir, &nic->eerr);
	if (!ret)
		ret = dmt_op_load(op, nic->name);
	if (ret < 0 && !op->locked) {
		dmt_op_end(op);
		dmt_nic_finish_hint(nic, hint, sizeof(hint));
		return dmt_err(nic->ctx, &nic->ctx->err, err,
			       "setting up %s for devmem failed at %s: %s; undoing the finished steps failed too (%s): %s",
			       nic->eth.ifname, doing, cause.msg, nic->eerr.msg, hint);
	}
	unread = nic->eerr;
	unread.code = ret;
	nic->eerr = cause;
	memcpy(op->doing, doing, sizeof(doing));
	op->changes = done;
	ret = rollback(nic, op, err, ret < 0 ? &unread : NULL);
	dmt_op_end(op);
	return ret;
}

/* Setup cost, for devmemtcp_nic_stats() and the log. */
static void opened(struct devmemtcp_nic *nic, const struct dmt_op *op,
		   uint64_t rt0, uint64_t io0)
{
	nic->setup_rt = dmt_nic_nl_rt(nic) - rt0 + dmt_nic_binding_rt(nic);
	nic->setup_ioctls = nic->eth.ioctls - io0;
	nic->setup_steps = op->changes;
	dmt_log(nic->ctx, DEVMEMTCP_LOG_INFO,
		"%s ready for devmem on %u queues: %u changes, %llu netlink round trips, %llu ioctls",
		nic->eth.ifname, nic->me.nqueues, op->changes,
		(unsigned long long)nic->setup_rt,
		(unsigned long long)nic->setup_ioctls);
}

/* Under the lock: clean up after dead owners, plan, write this owner's
 * file, apply. */
static int open_locked(struct devmemtcp_nic *nic, struct dmt_op *op,
		       const struct devmemtcp_nic_opts *opts)
{
	struct devmemtcp_ctx *ctx = nic->ctx;
	int err = dmt_op_load(op, nic->name);

	if (err < 0)
		return dmt_err(ctx, &ctx->err, err, "%s", nic->eerr.msg);
	if (dmt_op_clean(op, false) < 0)	/* what is left stays claimed */
		dmt_op_report(op, "%s", nic->eerr.msg);
	err = dmt_op_count_rx(op);
	if (err < 0)
		return dmt_nic_report(nic, err, "cannot set up devmem");
	nic->nrx = op->nrx;
	err = plan_queues(nic, op, opts);
	if (err < 0)
		return err;
	err = dmt_nic_check_flows(nic, DMT_OPT(opts, devmemtcp_nic_opts, flows, NULL),
			  DMT_OPT(opts, devmemtcp_nic_opts, nflows, 0));
	if (err < 0)
		return dmt_err(ctx, &ctx->err, err, "%s: %s", nic->eth.ifname,
			       nic->eerr.msg);
	err = check_support(nic, op);
	if (err < 0)
		return dmt_nic_report(nic, err, "cannot set up devmem");
	err = dmt_nic_save(nic, op);
	if (err < 0)
		return dmt_nic_report(nic, err, "cannot set up devmem");
	err = apply(nic, op, opts);
	if (err == -EOPNOTSUPP && nic->tds_unreported && !op->changes &&
	    !strcmp(op->doing, "header split")) {
		/* tcp-data-split was not shown and cannot be set: nothing
		 * changed, the device has none */
		op->fail_step = op->crash_step = 0;
		dmt_nic_leave(nic, op, NULL);
		no_header_split(nic);
		return dmt_nic_report(nic, -EOPNOTSUPP, "cannot set up devmem");
	}
	if (err < 0)
		return rollback(nic, op, err, NULL);
	return 0;
}

int dmt_nic_open_as(struct devmemtcp_ctx *ctx, const char *ifname,
		    const struct devmemtcp_nic_opts *opts, pid_t pid,
		    uint64_t start, struct devmemtcp_nic **nicp)
{
	struct devmemtcp_nic *nic = NULL;
	struct dmt_op op;
	uint64_t rt0, io0;
	int err;

	err = dmt_nic_check_open(ctx, opts, nicp);
	if (err)
		return err;
	err = nic_new(ctx, ifname, opts, &nic);
	if (err)
		return err;
	identity(nic, pid, start);
	rt0 = dmt_nic_nl_rt(nic);
	io0 = nic->eth.ioctls;
	err = dmt_op_begin(&op, ctx, &nic->eth, nic->nl, nic->run_dir, &nic->eerr);
	if (err < 0) {
		dmt_err(ctx, &ctx->err, err, "%s", nic->eerr.msg);
		dmt_op_end(&op);
		dmt_nic_free(nic);
		return err;
	}
#if DMT_TEST_HOOKS
	op.fail_step = nic->fail_step;
	op.crash_step = nic->crash_step;
	op.hook_name = "DEVMEMTCP_NIC_FAIL_STEP";
#endif
	err = open_locked(nic, &op, opts);
	dmt_op_end(&op);
	if (!err) {
		err = bind_queues(nic, &op, opts);
		if (err < 0)
			err = rollback_bind(nic, &op, err);
	}
	if (err < 0) {
		dmt_nic_free(nic);
		return err;
	}
	opened(nic, &op, rt0, io0);
	*nicp = nic;
	return 0;
}

DEVMEMTCP_EXPORT int devmemtcp_nic_open(struct devmemtcp_ctx *ctx,
					const char *ifname,
					const struct devmemtcp_nic_opts *opts,
					struct devmemtcp_nic **nicp)
{
	DMT_KEEP_ERRNO;

	if (!ctx)
		return -EINVAL;
	return ctx->priv->nic_open(ctx, ifname, opts, nicp);
}

int dmt_nic_open_self(struct devmemtcp_ctx *ctx, const char *ifname,
		      const struct devmemtcp_nic_opts *opts,
		      struct devmemtcp_nic **nicp)
{
	uint64_t start = 0;
	bool zombie;

	if (dmt_proc_start(getpid(), &start, &zombie) < 0)
		return dmt_err(ctx, &ctx->err, -EIO,
			       "cannot read this process's start time (/proc/self/stat): is /proc mounted?");
	return dmt_nic_open_as(ctx, ifname, opts, getpid(), start, nicp);
}

int dmt_nic_new_remote(struct devmemtcp_ctx *ctx, const struct dmt_nic_ops *ops,
		       size_t state, struct devmemtcp_nic **nicp)
{
	struct devmemtcp_nic *nic = dmt_calloc(1, sizeof(*nic) + state);

	if (!nic)
		return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_nic_open");
	nic->ctx = ctx;
	nic->fork_gen = dmt_fork_gen();
	nic->ops = ops;
	nic->remote = state ? nic + 1 : NULL;
	nic->eth.ioctl_fd = -1;
	*nicp = nic;
	return 0;
}



DEVMEMTCP_EXPORT int devmemtcp_nic_close(struct devmemtcp_nic *nic)
{
	DMT_KEEP_ERRNO;

	if (!nic)
		return 0;
	if (dmt_forked(nic->fork_gen)) {
		/* a parent's: its binding, flows and NIC settings stay the
		 * parent's; our copies of its sockets close, nothing else */
		nic->ops->free(nic);
		return 0;
	}
	/* the binding first: header split cannot go off under it */
	devmemtcp_binding_close(nic->binding);
	nic->binding = NULL;
	return nic->ops->close(nic);
}

/* Close a setup made here: this owner's rules and context, its file, the
 * shared settings. */
static int local_close(struct devmemtcp_nic *nic)
{
	struct dmt_err unread;
	struct dmt_op op;
	char hint[256], msg[DMT_ERRMSG_MAX];
	int err, own;

	err = dmt_nic_handle_op(nic, &op);
#if DMT_TEST_HOOKS
	op.fail_step = dmt_test_nic_close_fail_step
			       ? dmt_test_nic_close_fail_step
			       : dmt_hook_env_int("DEVMEMTCP_TEST_NIC_CLOSE_FAIL_STEP");
	op.crash_step = dmt_test_nic_close_crash_step
				? dmt_test_nic_close_crash_step
				: dmt_hook_env_int("DEVMEMTCP_TEST_NIC_CLOSE_CRASH_STEP");
	op.hook_name = "DEVMEMTCP_TEST_NIC_CLOSE_FAIL_STEP";
#endif
	/* without the others' files, still this owner's own changes */
	unread = nic->eerr;
	unread.code = err;
	/* only what this owner's file still records is its own */
	own = op.locked ? dmt_nic_own_file(nic, &op) : 0;
	if (own == 1) {
		dmt_nic_stale_msg(nic, &op, msg, sizeof(msg));
		dmt_op_report(&op, "%s; only what it records now is undone", msg);
	} else if (own < 0) {
		if (err < 0)
			nic->eerr = unread;
		else
			err = own;
	}
	if (op.locked && own >= 0) {
		char doing[sizeof(op.doing)];
		int e2;

		memcpy(doing, op.doing, sizeof(doing));
		e2 = dmt_nic_leave(nic, &op, err < 0 ? &unread : NULL);
		if (err < 0) {	/* the first failure is the one named */
			nic->eerr = unread;
			memcpy(op.doing, doing, sizeof(doing));
		} else {
			err = e2;
		}
	}
	if (err < 0) {
		dmt_nic_finish_hint(nic, hint, sizeof(hint));
		dmt_err(nic->ctx, &nic->ctx->err, err,
			"closing the devmem setup of %s failed%s%s: %s; what is left is recorded in %s: %s",
			nic->eth.ifname, op.doing[0] ? " at " : "", op.doing,
			nic->eerr.msg[0] ? nic->eerr.msg : dmt_errno_name(err),
			nic->run_dir, hint);
	}
	dmt_op_end(&op);
	dmt_nic_free(nic);
	return err;
}

DEVMEMTCP_EXPORT const char *devmemtcp_nic_errmsg(const struct devmemtcp_nic *nic)
{
	DMT_KEEP_ERRNO;
	return nic ? nic->err.msg : "";
}

DEVMEMTCP_EXPORT int devmemtcp_nic_queues(const struct devmemtcp_nic *nic,
					  const uint32_t **queues)
{
	DMT_KEEP_ERRNO;
	if (!nic)
		return dmt_err(NULL, NULL, -EINVAL, "devmemtcp_nic_queues: nic is NULL");
	if (queues)
		*queues = nic->me.queues;
	return (int)nic->me.nqueues;
}

DEVMEMTCP_EXPORT struct devmemtcp_binding *
devmemtcp_nic_binding(const struct devmemtcp_nic *nic)
{
	DMT_KEEP_ERRNO;
	return nic ? nic->binding : NULL;
}

DEVMEMTCP_EXPORT int devmemtcp_nic_add_flow(struct devmemtcp_nic *nic,
					    const struct devmemtcp_flow *flow)
{
	DMT_KEEP_ERRNO;

	if (!nic)
		return -EINVAL;
	if (dmt_forked(nic->fork_gen))
		return dmt_fork_refuse(nic->ctx, &nic->err, "devmemtcp_nic_add_flow", "NIC handle");
	if (!flow)
		return dmt_err(nic->ctx, &nic->err, -EINVAL,
			       "devmemtcp_nic_add_flow: flow is NULL");
	return nic->ops->add_flow(nic, flow);
}

DEVMEMTCP_EXPORT int devmemtcp_nic_stats(const struct devmemtcp_nic *nic,
					 struct devmemtcp_nic_stats *stats)
{
	DMT_KEEP_ERRNO;
	struct devmemtcp_nic_stats s;

	if (!nic || !stats || stats->sz < sizeof(size_t))
		return dmt_err(NULL, NULL, -EINVAL,
			       "devmemtcp_nic_stats: nic or stats is NULL, or stats->sz is not set: set .sz = sizeof(struct devmemtcp_nic_stats)");
	memset(&s, 0, sizeof(s));
	s.setup_round_trips = nic->setup_rt;
	s.setup_ioctls = nic->setup_ioctls;
	s.round_trips = dmt_nic_nl_rt(nic) + dmt_nic_binding_rt(nic);
	s.ioctls = nic->eth.ioctls;
	s.steps = nic->setup_steps;
	s.rules = nic->ops->flows(nic);
	s.rss_context = nic->me.ctx == DMT_CTX_PLACED ? nic->me.ctx_id : 0;
	dmt_copy_out(stats, &s, sizeof(s));
	return 0;
}

static uint32_t local_flows(const struct devmemtcp_nic *nic)
{
	return nic->me.nrules;
}

static const struct dmt_nic_ops local_ops = {
	.close = local_close,
	.free = dmt_nic_free,
	.add_flow = dmt_nic_local_add_flow,
	.remove_flow = dmt_nic_local_remove_flow,
	.flows = local_flows,
};

struct devmemtcp_binding *dmt_nic_take_binding(struct devmemtcp_nic *nic)
{
	struct devmemtcp_binding *b = nic->binding;

	nic->binding = NULL;
	return b;
}

void dmt_nic_forget(struct devmemtcp_nic *nic)
{
	dmt_nic_free(nic);
}

/* eth_init failed: with files for a device this namespace does not have,
 * say so rather than guess. */
static int recover_no_device(struct devmemtcp_ctx *ctx, const char *dir,
			     const char *ifname, int err,
			     const struct dmt_err *eerr)
{
	char prefix[IF_NAMESIZE + 2], **names = NULL;
	struct dmt_err why = { 0 };
	struct dmt_rundir rd;
	size_t n = 0;

	if (err != -ENODEV || dmt_rundir_open(&rd, dir, false, &why) < 0)
		return dmt_err(ctx, &ctx->err, err, "%s", eerr->msg);
	snprintf(prefix, sizeof(prefix), "%s.", ifname);
	dmt_rundir_list(&rd, prefix, &names, &n, &why);
	dmt_rundir_close(&rd);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (n == 0)
		return dmt_err(ctx, &ctx->err, err, "%s", eerr->msg);
	/* The device and its settings are gone (or in another namespace):
	 * nothing to undo here, and guessing is wrong. */
	return dmt_err(ctx, &ctx->err, err,
		       "%s: %s has devmemtcp files of %s (%s.*) but this network namespace has no such interface: "
		       "restore where the interface is, or delete the files if it is gone for good",
		       eerr->msg, dir, ifname, ifname);
}

DEVMEMTCP_EXPORT int devmemtcp_nic_recover(struct devmemtcp_ctx *ctx,
					   const char *ifname,
					   const struct devmemtcp_nic_opts *opts)
{
	DMT_KEEP_ERRNO;
	const uint32_t known = DEVMEMTCP_NIC_RECOVER_ALL;
	struct dmt_nl *nl = NULL;
	struct dmt_err eerr = { 0 };
	struct dmt_eth e;
	struct dmt_op op;
	const char *dir;
	uint32_t flags;
	int err;

	if (!ctx)
		return -EINVAL;
	err = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_nic_opts);
	if (err)
		return err;
	flags = DMT_OPT(opts, devmemtcp_nic_opts, flags, 0);
	if (flags & ~known)
		return dmt_err(ctx, &ctx->err, -EINVAL,
			       "devmemtcp_nic_recover: flags 0x%x: only DEVMEMTCP_NIC_RECOVER_ALL applies",
			       flags & ~known);
	dir = dmt_run_dir(DMT_OPT(opts, devmemtcp_nic_opts, run_dir, NULL));
	err = dmt_eth_init(&e, &eerr, NULL, ifname);
	if (err < 0) {
		err = recover_no_device(ctx, dir, ifname, err, &eerr);
		dmt_eth_fini(&e);
		return err;
	}
	err = eth_nl_open(ctx, &e, &nl);
	if (err < 0)
		goto out;
	err = dmt_op_begin(&op, ctx, &e, nl, dir, &eerr);
	if (!err)
		err = dmt_op_load(&op, NULL);
	if (!err)
		err = dmt_op_clean(&op, flags & DEVMEMTCP_NIC_RECOVER_ALL);
	if (!err)
		err = dmt_op_reconcile(&op, NULL, false);
	if (err < 0)
		dmt_err(ctx, &ctx->err, err, "%s", eerr.msg);
	else
		err = op.undid || op.changes;
	dmt_op_end(&op);
out:
	dmt_eth_fini(&e);
	dmt_nl_close(nl);
	return err;
}

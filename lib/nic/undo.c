// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Undoing an owner of an interface (owners.c has the model): its rules,
 * then its RSS context (placed or still pending), each only where the
 * device still shows what the owner's file says it made; and the dead
 * owners an operation finds, cleaned before it plans.  Runs under the
 * interface lock (struct dmt_op).
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
	dmt_op_forget_rule(op, i);
	return 0;
}

/* One rule of o: deleted where it is still ours, else left and reported. */
static int undo_rule(struct dmt_op *op, const struct dmt_owner *o,
		     const struct dmt_orule *r)
{
	const char *ifname = op->e->ifname;
	long i, hit = -1, hits = 0;

	if (r->placed) {
		i = dmt_op_find_rule(op, r->location);
		if (i < 0)
			return 0;	/* gone already */
		if (dmt_rule_is(&op->rules[i], r))
			return delete_rule(op, i);
		dmt_op_report(op, "rule at location %u on %s differs from what pid %ld (%s) inserted: left alone",
			      r->location, ifname, (long)o->pid, o->comm);
		return 0;
	}
	/* pending: the insert may or may not have happened */
	for (i = 0; i < op->nrules; i++) {
		if (dmt_in_list(op->rules[i].location, r->before, r->nbefore) ||
		    !dmt_rule_is(&op->rules[i], r))
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
	ours = err == 0 && dmt_table_is(&cur, o);

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
		if (list[i].context && !dmt_in_list(list[i].context, o->ctx_before, o->nctx_before) &&
		    dmt_table_is(&list[i], o)) {
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
		if (!dmt_op_queue_bound(op, o->queues[k], what, sizeof(what)))
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

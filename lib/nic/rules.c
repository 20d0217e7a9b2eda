// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Flows on a NIC handle as ntuple rules: checking a flow against the
 * handle's queues, its own rules and the other owners' (a rule that would
 * shadow or be shadowed), placing a rule (journalled pending first) and
 * taking it out again; devmemtcp_nic_add_flow and _remove_flow for a
 * handle of this process.  The transaction they run in is nic.c's.
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

/* ---------------------------------------------------------------------- */
/* flows on a handle                                                       */

static bool spec_match_same(const struct ethtool_rx_flow_spec *a,
			    const struct ethtool_rx_flow_spec *b)
{
	uint32_t ta = a->flow_type & ~(uint32_t)FLOW_RSS;
	uint32_t tb = b->flow_type & ~(uint32_t)FLOW_RSS;

	return ta == tb && memcmp(&a->h_u, &b->h_u, sizeof(a->h_u)) == 0 &&
	       memcmp(&a->m_u, &b->m_u, sizeof(a->m_u)) == 0;
}

/* Everything about a flow that can be checked without the NIC: flags,
 * queue index, family, fields; *fs gets its match. */
static int flow_check(struct devmemtcp_nic *nic,
		      const struct devmemtcp_flow *flow, size_t index,
		      struct ethtool_rx_flow_spec *fs)
{
	uint32_t nq = nic->me.nqueues;
	int err;

	if (flow->flags & ~(uint32_t)DEVMEMTCP_FLOW_QUEUE)
		return dmt_err_set(&nic->eerr, -EINVAL,
				   "flow %zu: unknown flags 0x%x", index, flow->flags);
	if ((flow->flags & DEVMEMTCP_FLOW_QUEUE) && flow->queue >= nq)
		return dmt_err_set(&nic->eerr, -ERANGE,
				   "flow %zu: queue index %u is out of range: the handle has %u devmem queues (indexes 0-%u)",
				   index, flow->queue, nq, nq - 1);
	err = dmt_flow_to_spec(flow, 0, false, fs);
	if (err == -EAFNOSUPPORT)
		return dmt_err_set(&nic->eerr, -EAFNOSUPPORT,
				   "flow %zu: family %d is neither AF_INET nor AF_INET6",
				   index, flow->family);
	if (err < 0)
		return dmt_err_set(&nic->eerr, -EINVAL,
				   "flow %zu matches every TCP packet: give at least one address or port with a non-zero mask",
				   index);
	return 0;
}

/* "tcp4 *:* -> 10.0.0.1:5201": the match without the action */
static void match_str(const struct ethtool_rx_flow_spec *fs, char *desc, size_t len)
{
	char *cut;

	dmt_spec_str(fs, 0, desc, len);
	cut = strstr(desc, (fs->flow_type & FLOW_RSS) ? " context" : " queue");
	if (cut)
		*cut = '\0';
}

int dmt_nic_check_flows(struct devmemtcp_nic *nic,
		       const struct devmemtcp_flow *flows, size_t n)
{
	struct ethtool_rx_flow_spec *fs = dmt_calloc(n ? n : 1, sizeof(*fs));
	char desc[160];
	int err = 0;

	if (!fs)
		return dmt_err_set(&nic->eerr, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !err; i++) {
		err = flow_check(nic, &flows[i], i, &fs[i]);
		for (size_t k = 0; k < i && !err; k++) {
			if (!spec_match_same(&fs[k], &fs[i]))
				continue;
			match_str(&fs[i], desc, sizeof(desc));
			err = dmt_err_set(&nic->eerr, -EEXIST,
					  "flow %zu (%s) matches the same packets as flow %zu of this handle: remove one of them",
					  i, desc, k);
		}
	}
	free(fs);
	return err;
}

/* The rule of a flow: to the flow's queue (or the next one round-robin)
 * or to the RSS context. */
static int flow_spec(struct devmemtcp_nic *nic, const struct devmemtcp_flow *flow,
		     size_t index, bool to_ctx, struct ethtool_rx_flow_spec *fs)
{
	uint32_t queue;
	int err = flow_check(nic, flow, index, fs);

	if (err < 0)
		return err;
	if (flow->flags & DEVMEMTCP_FLOW_QUEUE)
		queue = nic->me.queues[flow->queue];
	else
		queue = nic->me.queues[nic->rr % nic->me.nqueues];
	dmt_flow_to_spec(flow, queue, to_ctx, fs);
	return 0;
}

/* A flow of this handle with the same match. */
static int check_own_rules(struct devmemtcp_nic *nic,
			   const struct ethtool_rx_flow_spec *fs, size_t index)
{
	char desc[160];

	for (uint32_t i = 0; i < nic->me.nrules; i++) {
		if (!spec_match_same(&nic->me.rules[i].fs, fs))
			continue;
		match_str(fs, desc, sizeof(desc));
		return dmt_err_set(&nic->eerr, -EEXIST,
				   "flow %zu (%s) matches the same packets as flow %u of this handle: remove one of them",
				   index, desc, nic->me.rules[i].id);
	}
	return 0;
}

/* Owners' flows are disjoint: a packet both match would go to whichever
 * rule the NIC applies first, and so to the wrong process. */
static int check_owners_flows(struct devmemtcp_nic *nic, struct dmt_op *op,
			      const struct ethtool_rx_flow_spec *fs, size_t index)
{
	char desc[160], theirs[160];

	for (size_t i = 0; i < op->nowners; i++) {
		const struct dmt_owner *o = &op->owners[i];

		for (uint32_t k = 0; k < o->nrules; k++) {
			if (!dmt_spec_overlap(&o->rules[k].fs, fs))
				continue;
			match_str(fs, desc, sizeof(desc));
			match_str(&o->rules[k].fs, theirs, sizeof(theirs));
			return dmt_err_set(&nic->eerr, -EEXIST,
					   "flow %zu (%s) overlaps flow %u (%s) of pid %ld (%s) on %s: "
					   "each process must steer packets no other one does",
					   index, desc, o->rules[k].id, theirs,
					   (long)o->pid, o->comm, nic->eth.ifname);
		}
	}
	return 0;
}

/* A rule at loc belongs to an owner (this one included). */
static bool owners_location(const struct dmt_op *op, const struct dmt_owner *me,
			    uint32_t loc)
{
	for (size_t i = 0; i <= op->nowners; i++) {
		const struct dmt_owner *o = i < op->nowners ? &op->owners[i] : me;

		for (uint32_t k = 0; k < o->nrules; k++)
			if (o->rules[k].placed && o->rules[k].location == loc)
				return true;
	}
	return false;
}

/* Does the device's rule d deliver to this owner (its queues or
 * context)? */
static bool steers_to_me(const struct dmt_rule *d, const struct dmt_owner *me)
{
	uint64_t cookie = d->fs.ring_cookie;

	if (cookie == RX_CLS_FLOW_DISC)
		return false;
	if (d->fs.flow_type & FLOW_RSS)
		return me->ctx == DMT_CTX_PLACED && d->rss_context == me->ctx_id;
	if (cookie >> 32)
		return false;	/* to a VF */
	for (uint32_t i = 0; i < me->nqueues; i++)
		if (me->queues[i] == (uint32_t)cookie)
			return true;
	return false;
}

/* Our rule went to loc: a rule of nobody's matched before it (a lower
 * location) that overlaps it and steers elsewhere captures (part of) the
 * flow, which would then arrive as ordinary data. */
static int check_shadow(struct devmemtcp_nic *nic, struct dmt_op *op,
			const struct ethtool_rx_flow_spec *fs, uint32_t loc,
			size_t index)
{
	char desc[160], theirs[160];

	if (nic->flags & DEVMEMTCP_NIC_ALLOW_SHADOW)
		return 0;
	for (long i = 0; i < op->nrules; i++) {
		const struct dmt_rule *d = &op->rules[i];

		if (d->location >= loc || owners_location(op, &nic->me, d->location) ||
		    !dmt_spec_overlap(&d->fs, fs) || steers_to_me(d, &nic->me))
			continue;
		match_str(fs, desc, sizeof(desc));
		dmt_spec_str(&d->fs, d->rss_context, theirs, sizeof(theirs));
		return dmt_err_set(&nic->eerr, -EEXIST,
				   "flow %zu (%s): rule %u on %s (%s) matches these packets first and steers them elsewhere: "
				   "delete it (ethtool -N %s delete %u) or pass DEVMEMTCP_NIC_ALLOW_SHADOW",
				   index, desc, d->location, nic->eth.ifname, theirs,
				   nic->eth.ifname, d->location);
	}
	return 0;
}

/* Journal the rule as pending before inserting it, with the locations
 * used now: a crash inside the insert leaves an entry that recovery finds
 * by its content among the new ones. */
static int journal_rule(struct devmemtcp_nic *nic, struct dmt_op *op,
			const struct ethtool_rx_flow_spec *fs, bool to_ctx,
			struct dmt_orule **rp)
{
	struct dmt_owner *me = &nic->me;
	struct dmt_orule *v, *r;
	int err;

	v = dmt_realloc(me->rules, (me->nrules + 1) * sizeof(*v));
	if (!v)
		return dmt_err_set(&nic->eerr, -ENOMEM, "out of memory");
	me->rules = v;
	r = &me->rules[me->nrules];
	memset(r, 0, sizeof(*r));
	r->before = dmt_calloc(op->nrules > 0 ? (size_t)op->nrules : 1, sizeof(uint32_t));
	if (!r->before)
		return dmt_err_set(&nic->eerr, -ENOMEM, "out of memory");
	for (long i = 0; i < op->nrules; i++)
		r->before[r->nbefore++] = op->rules[i].location;
	r->id = nic->next_flow_id;
	r->fs = *fs;
	r->rss_context = to_ctx ? me->ctx_id : 0;
	me->nrules++;
	err = dmt_nic_save(nic, op);
	if (err < 0) {
		me->nrules--;
		free(r->before);
		return err;
	}
	*rp = r;
	return 0;
}

/* Room for one more rule in the operation's copy of the device's rules,
 * made before the insert: once the rule is on the device, recording it
 * there must not fail, or undo, which trusts that copy, would take the
 * rule for gone and leave it (and the context it uses). */
static int reserve_rule(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	struct dmt_rule *v = dmt_realloc(op->rules, ((size_t)op->nrules + 1) * sizeof(*v));

	if (!v)
		return dmt_err_set(&nic->eerr, -ENOMEM, "out of memory");
	op->rules = v;
	return 0;
}

/* Remember our new rule among the device's (in the reserved room). */
static void note_rule(struct dmt_op *op, const struct dmt_orule *r)
{
	struct dmt_rule *d = &op->rules[op->nrules++];

	d->location = r->location;
	d->rss_context = r->rss_context;
	d->fs = r->fs;
}

/* Our rule at the end of the list is taken out again (where it is). */
static void unplace_rule(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	struct dmt_orule *r = &nic->me.rules[nic->me.nrules - 1];
	struct dmt_owner one = nic->me;
	char doing[sizeof(op->doing)];
	uint32_t changes = op->changes;
	bool gone;

	/* the step that failed is what the message names */
	memcpy(doing, op->doing, sizeof(doing));
	one.rules = r;
	one.nrules = 1;
	one.ctx = DMT_CTX_NONE;
	if (dmt_op_undo_owner(op, &one, &gone) == 0 && gone)
		nic->me.nrules--;
	dmt_nic_save(nic, op);
	memcpy(op->doing, doing, sizeof(doing));
	op->changes = changes;
}

/* One ntuple rule for flow: the flow id, or a negative errno (message on
 * nic->eerr).  A rule whose insert failed stays pending in the journal. */
int dmt_nic_add_rule(struct devmemtcp_nic *nic, struct dmt_op *op,
		    const struct devmemtcp_flow *flow, size_t index)
{
	struct ethtool_rx_flow_spec fs;
	struct dmt_orule *r = NULL;
	uint32_t loc = RX_CLS_LOC_ANY;
	bool to_ctx = nic->use_ctx && !(flow->flags & DEVMEMTCP_FLOW_QUEUE);
	int err;

	snprintf(op->doing, sizeof(op->doing), "ntuple rule for flow %zu", index);
	err = flow_spec(nic, flow, index, to_ctx, &fs);
	if (!err)
		err = check_own_rules(nic, &fs, index);
	if (!err)
		err = check_owners_flows(nic, op, &fs, index);
	if (!err)
		err = dmt_op_rules(op);
	if (!err)
		err = reserve_rule(nic, op);
	if (!err)
		err = journal_rule(nic, op, &fs, to_ctx, &r);
	if (!err)
		err = dmt_op_step(op, "ntuple rule for flow %zu", index);
	if (!err)
		err = nic->eth.ops->rule_insert(&nic->eth, &fs, r->rss_context, &loc);
	if (err < 0)
		return err;
	/* on the device: recorded in memory first, where nothing can fail */
	op->changes++;
	r->placed = true;
	r->location = loc;
	r->fs.location = loc;
	free(r->before);
	r->before = NULL;
	r->nbefore = 0;
	note_rule(op, r);
	err = dmt_nic_save(nic, op);
	if (!err)
		err = check_shadow(nic, op, &r->fs, loc, index);
	if (err == -EEXIST) {
		struct dmt_err why = nic->eerr;

		unplace_rule(nic, op);
		nic->eerr = why;
		return err;
	}
	if (err < 0)
		return err;
	if (!(flow->flags & DEVMEMTCP_FLOW_QUEUE))
		nic->rr++;
	return (int)nic->next_flow_id++;
}

int dmt_nic_local_add_flow(struct devmemtcp_nic *nic, const struct devmemtcp_flow *flow)
{
	struct dmt_op op;
	int ret, stale = 0;

	ret = dmt_nic_handle_op(nic, &op);
	if (!ret)
		ret = stale = dmt_nic_check_own_file(nic, &op);
	if (!ret)
		ret = dmt_op_reconcile(&op, &nic->me, true);
	if (!ret)
		ret = dmt_nic_add_rule(nic, &op, flow, nic->next_flow_id);
	if (ret < 0) {
		/* A rule whose insert failed stays journalled as pending:
		 * undo it now rather than leave it for close. */
		if (!stale && nic->me.nrules && !nic->me.rules[nic->me.nrules - 1].placed) {
			struct dmt_err why = nic->eerr;

			unplace_rule(nic, &op);
			nic->eerr = why;
		}
		dmt_err(nic->ctx, &nic->err, ret, "adding a flow on %s: %s",
			nic->eth.ifname,
			nic->eerr.msg[0] ? nic->eerr.msg : dmt_errno_name(ret));
	}
	dmt_op_end(&op);
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_nic_remove_flow(struct devmemtcp_nic *nic,
					       int flow_id)
{
	DMT_KEEP_ERRNO;

	if (!nic)
		return dmt_err(NULL, NULL, -EINVAL, "devmemtcp_nic_remove_flow: nic is NULL");
	if (dmt_forked(nic->fork_gen))
		return dmt_fork_refuse(nic->ctx, &nic->err, "devmemtcp_nic_remove_flow", "NIC handle");
	return nic->ops->remove_flow(nic, flow_id);
}

int dmt_nic_local_remove_flow(struct devmemtcp_nic *nic, int flow_id)
{
	struct dmt_owner one;
	struct dmt_op op;
	uint32_t i;
	bool gone = false;
	int err;

	for (i = 0; i < nic->me.nrules; i++)
		if ((int)nic->me.rules[i].id == flow_id && nic->me.rules[i].placed)
			break;
	if (i == nic->me.nrules)
		return dmt_err(nic->ctx, &nic->err, -ENOENT,
			       "flow %d is not a flow of this handle: use the id devmemtcp_nic_add_flow() returned",
			       flow_id);
	err = dmt_nic_handle_op(nic, &op);
	if (!err)
		err = dmt_nic_check_own_file(nic, &op);
	if (!err) {
		one = nic->me;
		one.rules = &nic->me.rules[i];
		one.nrules = 1;
		one.ctx = DMT_CTX_NONE;
		err = dmt_op_undo_owner(&op, &one, &gone);
	}
	if (!err) {
		struct dmt_orule *r = &nic->me.rules[i];

		free(r->before);
		memmove(r, r + 1, (nic->me.nrules - i - 1) * sizeof(*r));
		nic->me.nrules--;
		err = dmt_nic_save(nic, &op);
	}
	if (!err)
		err = dmt_op_reconcile(&op, &nic->me, false);
	if (err < 0)
		dmt_err(nic->ctx, &nic->err, err, "removing flow %d on %s: %s",
			flow_id, nic->eth.ifname,
			nic->eerr.msg[0] ? nic->eerr.msg : dmt_errno_name(err));
	dmt_op_end(&op);
	return err;
}

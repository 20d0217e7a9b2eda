// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Transactional NIC setup for one owner of an interface among several
 * (HACKING.md, "The NIC layer"): open = under the interface lock, undo
 * what dead owners left, plan this owner's queues, write its file, bring
 * the shared settings to what the owners need, create its RSS context and
 * rules (each written pending first); then bind-rx outside the lock.
 * Close, a failed open and devmemtcp_nic_recover() undo in reverse.  The
 * owners' model and the shared settings are lib/owners.c; the files and
 * the lock lib/journal.c (nic.h).
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

#include "broker.h"
#include "buf.h"
#include "netdev.h"
#include "fork.h"
#include "nic.h"
#include "uapi.h"

#if DMT_TEST_HOOKS
int dmt_nic_fail_step;
int dmt_nic_crash_step;
int dmt_test_nic_close_fail_step;
int dmt_test_nic_close_crash_step;
#endif

struct devmemtcp_nic {
	struct devmemtcp_ctx *ctx;
	struct dmt_err err;		/* last failed operation on the handle */
	struct dmt_err eerr;		/* the detail of the layers below */
	struct dmt_nl *nl;
	struct dmt_eth eth;
	char run_dir[PATH_MAX];
	struct dmt_owner me;		/* this owner's journal */
	char name[NAME_MAX + 1];	/* its file */
	bool saved;			/* the file exists */
	bool marked;			/* it says closed */
	bool stale;			/* someone else undid (some of) it */
	char *text;			/* what it says */
	size_t text_len;
	uint32_t nrx;
	uint32_t flags;
	bool use_ctx;
	bool tds_unreported;	/* rings shown without tcp-data-split */
	uint32_t next_flow_id;
	uint32_t rr;
	struct devmemtcp_binding *binding;
	int fail_step, crash_step;
	uint64_t setup_rt, setup_ioctls;
	uint32_t setup_steps;
	struct dmt_brk *brk;		/* set up by devmemtcp-broker: its connection */
	uint32_t brk_handle;		/* ... and its handle there */
	uint32_t brk_rules;
	unsigned int fork_gen;		/* fork.h */
};

/* ---------------------------------------------------------------------- */
/* plan                                                                    */

int dmt_plan_queues(uint32_t nrx, const uint32_t *req, uint32_t nreq,
		    uint32_t k, bool allow_all, uint32_t *out, char *why,
		    size_t whylen)
{
	if (req) {
		if (nreq == 0) {
			snprintf(why, whylen, "the queue list is empty: give at least one RX queue");
			return -EINVAL;
		}
		for (uint32_t i = 0; i < nreq; i++) {
			if (req[i] >= nrx) {
				snprintf(why, whylen,
					 "RX queue %u is out of range: the interface has %u RX queues (0-%u); "
					 "pick a lower index or add channels with ethtool -L",
					 req[i], nrx, nrx ? nrx - 1 : 0);
				return -ERANGE;
			}
			for (uint32_t j = 0; j < i; j++) {
				if (req[j] == req[i]) {
					snprintf(why, whylen,
						 "RX queue %u is listed twice: list each queue once",
						 req[i]);
					return -EINVAL;
				}
			}
			out[i] = req[i];
		}
		k = nreq;
	} else {
		if (k == 0)
			k = 1;
		if (k > nrx) {
			snprintf(why, whylen,
				 "%u devmem queues asked for but the interface has %u RX queues: "
				 "ask for fewer or add channels with ethtool -L",
				 k, nrx);
			return -ERANGE;
		}
		for (uint32_t i = 0; i < k; i++)
			out[i] = nrx - k + i;
	}
	if (k >= nrx && !allow_all) {
		snprintf(why, whylen,
			 "all %u RX queues would be devmem queues, leaving none for other traffic: "
			 "use fewer queues or add channels with ethtool -L",
			 nrx);
		return -EINVAL;
	}
	return (int)k;
}

static bool in_set(uint32_t v, const uint32_t *set, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

bool dmt_rss_is_default(const uint32_t *cur, uint32_t n, uint32_t nrx)
{
	if (!nrx)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (cur[i] != i % nrx)
			return false;
	return true;
}

int dmt_plan_rss(const uint32_t *cur, uint32_t n, uint32_t nrx,
		 const uint32_t *queues, uint32_t k, uint32_t *out)
{
	uint32_t others[4096], nothers = 0, r = 0;
	bool changed = false, def = dmt_rss_is_default(cur, n, nrx);

	for (uint32_t q = 0; q < nrx && nothers < ARRAY_SIZE(others); q++)
		if (!in_set(q, queues, k))
			others[nothers++] = q;
	if (!nothers)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (def)
			out[i] = others[i % nothers];
		else if (in_set(cur[i], queues, k))
			out[i] = others[r++ % nothers];
		else
			out[i] = cur[i];
		changed |= out[i] != cur[i];
	}
	return changed;
}

void dmt_plan_ctx(uint32_t n, const uint32_t *queues, uint32_t k, uint32_t *out)
{
	for (uint32_t i = 0; i < n; i++)
		out[i] = queues[i % k];
}

/* ---------------------------------------------------------------------- */
/* steps, journal                                                          */

static uint64_t nl_rt(const struct devmemtcp_nic *nic)
{
	return nic->nl ? nic->nl->round_trips : 0;
}

static int save_me(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	char *text;
	size_t len;
	int err = dmt_op_save_owner(op, &nic->me, &text, &len);

	if (err < 0)
		return err;
	free(nic->text);
	nic->text = text;
	nic->text_len = len;
	nic->saved = true;
	nic->marked = nic->me.closed;
	return 0;
}

/* This owner is gone although its process lives: its file says closed,
 * so that the next operation of anyone undoes what is left.  Without
 * the memory to write what is left, the text written last is marked: it
 * has everything on the device (each change is written before it is
 * made), and what is gone since is found gone. */
static int mark_closed(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	struct dmt_err why = nic->eerr;
	int err;

	nic->me.closed = true;
	if (!nic->saved)
		return 0;
	err = save_me(nic, op);
	if (err == -ENOMEM)
		err = dmt_owner_write_closed(&op->rd, nic->name, nic->text,
					     nic->text_len, &nic->eerr);
	if (err < 0)
		return err;
	nic->marked = true;
	nic->eerr = why;	/* the failure that made this necessary */
	return 0;
}

/* "this handle's setup of eth0 was undone by someone else (...): its
 * file DIR/NAME is gone or no longer what it wrote" */
static void stale_msg(const struct devmemtcp_nic *nic, const struct dmt_op *op,
		      char *buf, size_t len)
{
	if (snprintf(buf, len,
		     "this handle's setup of %s was undone by someone else (devmemtcp restore --all, say): "
		     "its file %s/%s is gone or no longer what it wrote",
		     nic->eth.ifname, op->rd.path, nic->name) < 0)
		buf[0] = '\0';
}

/* Nothing of this owner is on the device any more. */
static void forget_steering(struct dmt_owner *me)
{
	for (uint32_t i = 0; i < me->nrules; i++)
		free(me->rules[i].before);
	free(me->rules);
	me->rules = NULL;
	me->nrules = 0;
	free(me->ctx_before);
	me->ctx_before = NULL;
	me->nctx_before = 0;
	me->ctx = DMT_CTX_NONE;
}

/*
 * Under the lock: is this owner's file still what it last wrote?  Someone
 * else may have undone its setup since (restore --all; the next operation
 * after a failed one marked it closed): then what the file records now,
 * nothing when it is gone, is all that is this owner's, and a rule where
 * its rule was may be another owner's identical one.  0 when the file is
 * as written (or was never written); 1 when it is not, or was not before
 * (nic->stale), nic->me then being what the file records; or a negative
 * errno (message on nic->eerr).
 */
static int own_file(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	struct dmt_owner o;
	char *text;
	size_t len;
	int ret;

	if (!nic->saved)
		return nic->stale;
	ret = dmt_file_same(&op->rd, nic->name, nic->text, nic->text_len, &nic->eerr);
	if (ret == 1)
		return nic->stale;
	if (ret == 0)
		ret = dmt_op_load_owner(op, nic->name, &o);
	if (ret == -ENOENT) {
		forget_steering(&nic->me);
		nic->saved = false;
		nic->stale = true;
		return 1;
	}
	if (ret < 0)
		return ret;
	/* rewritten by whoever undid part of it: that is what is left */
	ret = dmt_owner_format(&o, &text, &len);
	if (ret < 0) {
		dmt_owner_free(&o);
		return dmt_err_set(&nic->eerr, ret, "reading %s/%s: out of memory",
				   op->rd.path, nic->name);
	}
	dmt_owner_free(&nic->me);
	nic->me = o;
	free(nic->text);
	nic->text = text;
	nic->text_len = len;
	nic->marked = o.closed;
	nic->stale = true;
	return 1;
}

/* Who finishes what a failed open or close left. */
static void finish_hint(const struct devmemtcp_nic *nic, char *buf, size_t len)
{
	const char *ifname = nic->eth.ifname;

	if (nic->saved && !nic->marked)	/* an owner whose process lives */
		snprintf(buf, len,
			 "the next open or close on %s after this process ends, or 'devmemtcp restore --all %s', finishes it",
			 ifname, ifname);
	else
		snprintf(buf, len,
			 "the next open or close on %s, or 'devmemtcp restore %s', finishes it",
			 ifname, ifname);
}

/* Compose "what failed" on ctx from nic->eerr. */
static int report(struct devmemtcp_nic *nic, int code, const char *what)
{
	return dmt_err(nic->ctx, &nic->ctx->err, code, "%s: %s", what,
		       nic->eerr.msg[0] ? nic->eerr.msg : dmt_errno_name(code));
}

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

static int check_flows(struct devmemtcp_nic *nic,
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
	err = save_me(nic, op);
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
	save_me(nic, op);
	memcpy(op->doing, doing, sizeof(doing));
	op->changes = changes;
}

/* One ntuple rule for flow: the flow id, or a negative errno (message on
 * nic->eerr).  A rule whose insert failed stays pending in the journal. */
static int add_rule(struct devmemtcp_nic *nic, struct dmt_op *op,
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
	err = save_me(nic, op);
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

/* ---------------------------------------------------------------------- */
/* open / close                                                            */

static void nic_free(struct devmemtcp_nic *nic)
{
	if (!nic)
		return;
	devmemtcp_binding_close(nic->binding);
	dmt_eth_fini(&nic->eth);
	dmt_nl_close(nic->nl);
	dmt_brk_close(nic->brk);
	dmt_owner_free(&nic->me);
	free(nic->text);
	free(nic);
}

/* The real ethtool layer needs a netlink socket (the unit tests' fake NIC
 * does not); e->nl borrows it, the caller closes it. */
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

static int check_open_args(struct devmemtcp_ctx *ctx,
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
		nic_free(nic);
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
	err = save_me(nic, op);
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
		return save_me(nic, op);
	}
	if (err < 0)
		return err;
	op->changes++;
	me->ctx = DMT_CTX_PLACED;
	free(me->ctx_before);
	me->ctx_before = NULL;
	me->nctx_before = 0;
	return save_me(nic, op);
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
		err = add_rule(nic, op, &flows[i], i);
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
		e2 = mark_closed(nic, op);
		if (!err)
			err = e2;
	}
	return err;
}

/* undo_own(), then the shared settings to what the others need, also
 * when that failed (whose message stays the one given).  Without the
 * others' files (unread: why not) the shared settings, which need every
 * owner's file, wait for the next operation. */
static int leave(struct devmemtcp_nic *nic, struct dmt_op *op,
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
 * (unread: the owners' files could not be read again, see leave()). */
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
	if (leave(nic, op, unread) < 0) {
		finish_hint(nic, hint, sizeof(hint));
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

static uint64_t binding_rt(const struct devmemtcp_nic *nic)
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
		finish_hint(nic, hint, sizeof(hint));
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
	nic->setup_rt = nl_rt(nic) - rt0 + binding_rt(nic);
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
		return report(nic, err, "cannot set up devmem");
	nic->nrx = op->nrx;
	err = plan_queues(nic, op, opts);
	if (err < 0)
		return err;
	err = check_flows(nic, DMT_OPT(opts, devmemtcp_nic_opts, flows, NULL),
			  DMT_OPT(opts, devmemtcp_nic_opts, nflows, 0));
	if (err < 0)
		return dmt_err(ctx, &ctx->err, err, "%s: %s", nic->eth.ifname,
			       nic->eerr.msg);
	err = check_support(nic, op);
	if (err < 0)
		return report(nic, err, "cannot set up devmem");
	err = save_me(nic, op);
	if (err < 0)
		return report(nic, err, "cannot set up devmem");
	err = apply(nic, op, opts);
	if (err == -EOPNOTSUPP && nic->tds_unreported && !op->changes &&
	    !strcmp(op->doing, "header split")) {
		/* tcp-data-split was not shown and cannot be set: nothing
		 * changed, the device has none */
		op->fail_step = op->crash_step = 0;
		leave(nic, op, NULL);
		no_header_split(nic);
		return report(nic, -EOPNOTSUPP, "cannot set up devmem");
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

	err = check_open_args(ctx, opts, nicp);
	if (err)
		return err;
	err = nic_new(ctx, ifname, opts, &nic);
	if (err)
		return err;
	identity(nic, pid, start);
	rt0 = nl_rt(nic);
	io0 = nic->eth.ioctls;
	err = dmt_op_begin(&op, ctx, &nic->eth, nic->nl, nic->run_dir, &nic->eerr);
	if (err < 0) {
		dmt_err(ctx, &ctx->err, err, "%s", nic->eerr.msg);
		dmt_op_end(&op);
		nic_free(nic);
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
		nic_free(nic);
		return err;
	}
	opened(nic, &op, rt0, io0);
	*nicp = nic;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* through devmemtcp-broker                                                */

/* What the broker's open gave this handle: queues, binding, setup cost. */
static int remote_opened(struct devmemtcp_nic *nic, const char *ifname,
			 const struct dmt_brk_open_reply *r, int fd,
			 struct devmemtcp_buf *buf)
{
	nic->me.queues = dmt_calloc(r->nqueues ? r->nqueues : 1, sizeof(uint32_t));
	if (!nic->me.queues) {
		if (fd >= 0)
			close(fd);
		return dmt_err_set(&nic->eerr, -ENOMEM, "devmemtcp_nic_open: out of memory");
	}
	memcpy(nic->me.queues, r->queues, r->nqueues * sizeof(uint32_t));
	nic->me.nqueues = r->nqueues;
	nic->me.ctx = r->rss_context ? DMT_CTX_PLACED : DMT_CTX_NONE;
	nic->me.ctx_id = r->rss_context;
	nic->brk_handle = r->handle;
	nic->brk_rules = r->rules;
	nic->setup_rt = r->setup_round_trips;
	nic->setup_ioctls = r->setup_ioctls;
	nic->setup_steps = r->steps;
	snprintf(nic->eth.ifname, sizeof(nic->eth.ifname), "%s", ifname);
	nic->eth.ifindex = (int)if_nametoindex(ifname);
	if (fd < 0)
		return 0;
	return dmt_binding_adopt(nic->ctx, &nic->eerr, false, nic->eth.ifindex,
				 nic->me.queues, nic->me.nqueues, buf, fd, r->binding_id,
				 &nic->binding);
}

/* The handle set up by devmemtcp-broker for this process (devmemtcp(7),
 * "Privileges"): the broker owns the NIC state on the process's behalf
 * for as long as the handle's connection to it lives. */
static int open_remote(struct devmemtcp_ctx *ctx, const char *ifname,
		       const struct devmemtcp_nic_opts *opts,
		       struct devmemtcp_nic **nicp)
{
	struct devmemtcp_buf *buf = DMT_OPT(opts, devmemtcp_nic_opts, buf, NULL);
	const struct devmemtcp_bind_opts *bo =
		DMT_OPT(opts, devmemtcp_nic_opts, bind_opts, NULL);
	uint32_t page = DMT_OPT(bo, devmemtcp_bind_opts, rx_page_size, 0);
	struct dmt_brk_open_reply r;
	struct devmemtcp_nic *nic;
	int fd, err;

	err = check_open_args(ctx, opts, nicp);
	if (err)
		return err;
	/* the broker sees the dma-buf, not its segments */
	if (buf && dmt_buf_check_pages(buf, page ? page : (uint64_t)sysconf(_SC_PAGESIZE),
				       page, "devmemtcp_nic_open", &ctx->err))
		return dmt_err_log(ctx, &ctx->err);
	nic = dmt_calloc(1, sizeof(*nic));
	if (!nic)
		return dmt_err_nomem(ctx, &ctx->err, "devmemtcp_nic_open");
	nic->ctx = ctx;
	nic->fork_gen = dmt_fork_gen();
	nic->eth.ioctl_fd = -1;
	err = dmt_brk_open(&nic->eerr, ifname, opts, &nic->brk, &r, &fd);
	if (!err)
		err = remote_opened(nic, ifname, &r, fd, buf);
	if (err) {
		dmt_err(ctx, &ctx->err, err, "%s", nic->eerr.msg);
		nic_free(nic);
		return err;
	}
	*nicp = nic;
	return 0;
}

/* close, add_flow, remove_flow of a broker's handle; message on the
 * handle (close: the context). */
static int remote_call(struct devmemtcp_nic *nic, unsigned int type, uint32_t flow_id,
		       const struct devmemtcp_flow *flow)
{
	int ret = dmt_brk_handle_call(nic->brk, &nic->eerr, type, nic->brk_handle,
				      flow_id, flow);

	if (ret < 0)
		dmt_err(nic->ctx, type == DMT_BRK_CLOSE ? &nic->ctx->err : &nic->err, ret,
			"%s", nic->eerr.msg);
	else if (type == DMT_BRK_ADD_FLOW)
		nic->brk_rules++;
	else if (type == DMT_BRK_REMOVE_FLOW)
		nic->brk_rules--;
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_nic_open(struct devmemtcp_ctx *ctx,
					const char *ifname,
					const struct devmemtcp_nic_opts *opts,
					struct devmemtcp_nic **nicp)
{
	DMT_KEEP_ERRNO;
	uint64_t start = 0;
	bool zombie;
	int ret;

	if (!ctx)
		return -EINVAL;
	if (dmt_brk_wanted(DMT_OPT(opts, devmemtcp_nic_opts, flags, 0) & DEVMEMTCP_NIC_BROKER))
		return open_remote(ctx, ifname, opts, nicp);
	if (dmt_proc_start(getpid(), &start, &zombie) < 0)
		return dmt_err(ctx, &ctx->err, -EIO,
			       "cannot read this process's start time (/proc/self/stat): is /proc mounted?");
	ret = dmt_nic_open_as(ctx, ifname, opts, getpid(), start, nicp);
	if ((ret == -EACCES || ret == -EPERM) && !dmt_cap_net_admin()) {
		/* refused for want of privilege, and no broker to ask: say
		 * both ways out, not only the run directory's */
		char why[DMT_ERRMSG_MAX / 2];

		snprintf(why, sizeof(why), "%s", devmemtcp_ctx_errmsg(ctx));
		ret = dmt_err(ctx, &ctx->err, -EPERM,
			      "devmemtcp_nic_open on %s: no CAP_NET_ADMIN and no broker: start devmemtcp-broker (systemctl start devmemtcp-broker.socket; its socket is %s) or run with CAP_NET_ADMIN (%s)",
			      ifname ? ifname : "(null)", dmt_brk_path(), why);
	}
	return ret;
}

/* Lock for an operation on a live handle; the message on the handle. */
static int handle_op(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	int err = dmt_op_begin(op, nic->ctx, &nic->eth, nic->nl, nic->run_dir,
			       &nic->eerr);

	if (!err)
		err = dmt_op_load(op, nic->name);
	if (!err && dmt_op_clean(op, false) < 0)
		dmt_op_report(op, "%s", nic->eerr.msg);
	op->nrx = nic->nrx;
	return err;
}

/* For add_flow and remove_flow: -ESTALE when someone else undid this
 * owner's setup (own_file). */
static int check_own_file(struct devmemtcp_nic *nic, struct dmt_op *op)
{
	char msg[DMT_ERRMSG_MAX];
	int ret = own_file(nic, op);

	if (ret <= 0)
		return ret;
	stale_msg(nic, op, msg, sizeof(msg));
	return dmt_err_set(&nic->eerr, -ESTALE, "%s; close the handle and open a new one", msg);
}

DEVMEMTCP_EXPORT int devmemtcp_nic_close(struct devmemtcp_nic *nic)
{
	DMT_KEEP_ERRNO;
	struct dmt_err unread;
	struct dmt_op op;
	char hint[256], msg[DMT_ERRMSG_MAX];
	int err, own;

	if (!nic)
		return 0;
	if (dmt_forked(nic->fork_gen)) {
		/* a parent's: its binding, flows and NIC settings stay the
		 * parent's; our copies of its sockets close, nothing else */
		nic_free(nic);
		return 0;
	}
	/* the binding first: header split cannot go off under it */
	devmemtcp_binding_close(nic->binding);
	nic->binding = NULL;
	if (nic->brk) {
		err = remote_call(nic, DMT_BRK_CLOSE, 0, NULL);
		nic_free(nic);
		return err;
	}
	err = handle_op(nic, &op);
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
	own = op.locked ? own_file(nic, &op) : 0;
	if (own == 1) {
		stale_msg(nic, &op, msg, sizeof(msg));
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
		e2 = leave(nic, &op, err < 0 ? &unread : NULL);
		if (err < 0) {	/* the first failure is the one named */
			nic->eerr = unread;
			memcpy(op.doing, doing, sizeof(doing));
		} else {
			err = e2;
		}
	}
	if (err < 0) {
		finish_hint(nic, hint, sizeof(hint));
		dmt_err(nic->ctx, &nic->ctx->err, err,
			"closing the devmem setup of %s failed%s%s: %s; what is left is recorded in %s: %s",
			nic->eth.ifname, op.doing[0] ? " at " : "", op.doing,
			nic->eerr.msg[0] ? nic->eerr.msg : dmt_errno_name(err),
			nic->run_dir, hint);
	}
	dmt_op_end(&op);
	nic_free(nic);
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
	struct dmt_op op;
	int ret, stale = 0;

	if (!nic)
		return -EINVAL;
	if (dmt_forked(nic->fork_gen))
		return dmt_fork_refuse(nic->ctx, &nic->err, "devmemtcp_nic_add_flow", "NIC handle");
	if (!flow)
		return dmt_err(nic->ctx, &nic->err, -EINVAL,
			       "devmemtcp_nic_add_flow: flow is NULL");
	if (nic->brk)
		return remote_call(nic, DMT_BRK_ADD_FLOW, 0, flow);
	ret = handle_op(nic, &op);
	if (!ret)
		ret = stale = check_own_file(nic, &op);
	if (!ret)
		ret = dmt_op_reconcile(&op, &nic->me, true);
	if (!ret)
		ret = add_rule(nic, &op, flow, nic->next_flow_id);
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
	struct dmt_owner one;
	struct dmt_op op;
	uint32_t i;
	bool gone = false;
	int err;

	if (!nic)
		return dmt_err(NULL, NULL, -EINVAL, "devmemtcp_nic_remove_flow: nic is NULL");
	if (dmt_forked(nic->fork_gen))
		return dmt_fork_refuse(nic->ctx, &nic->err, "devmemtcp_nic_remove_flow", "NIC handle");
	if (nic->brk)
		return flow_id < 0 ? dmt_err(nic->ctx, &nic->err, -ENOENT,
					     "flow %d is not a flow of this handle: use the id devmemtcp_nic_add_flow() returned",
					     flow_id)
				   : remote_call(nic, DMT_BRK_REMOVE_FLOW, (uint32_t)flow_id, NULL);
	for (i = 0; i < nic->me.nrules; i++)
		if ((int)nic->me.rules[i].id == flow_id && nic->me.rules[i].placed)
			break;
	if (i == nic->me.nrules)
		return dmt_err(nic->ctx, &nic->err, -ENOENT,
			       "flow %d is not a flow of this handle: use the id devmemtcp_nic_add_flow() returned",
			       flow_id);
	err = handle_op(nic, &op);
	if (!err)
		err = check_own_file(nic, &op);
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
		err = save_me(nic, &op);
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
	s.round_trips = nl_rt(nic) + binding_rt(nic);
	s.ioctls = nic->eth.ioctls;
	s.steps = nic->setup_steps;
	s.rules = nic->brk ? nic->brk_rules : nic->me.nrules;
	s.rss_context = nic->me.ctx == DMT_CTX_PLACED ? nic->me.ctx_id : 0;
	dmt_copy_out(stats, &s, sizeof(s));
	return 0;
}

struct devmemtcp_binding *dmt_nic_take_binding(struct devmemtcp_nic *nic)
{
	struct devmemtcp_binding *b = nic->binding;

	nic->binding = NULL;
	return b;
}

void dmt_nic_forget(struct devmemtcp_nic *nic)
{
	nic_free(nic);
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

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Transactional NIC setup: open = recover (undo what a dead process left)
 * + plan (queues, flows, a snapshot of the prior state) + apply (each
 * change journalled before it is made, bind-rx last); close, a failed open
 * and devmemtcp_nic_recover() undo in reverse.  The journal and the lock
 * are lib/journal.c (nic.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netdev.h"
#include "nic.h"
#include "uapi.h"

#if DMT_TEST_HOOKS
int dmt_nic_fail_step;
int dmt_nic_crash_step;
#endif

struct nic_flow_slot;

struct devmemtcp_nic {
	struct devmemtcp_ctx *ctx;
	struct dmt_err err;		/* last failed operation on the handle */
	struct dmt_err eerr;		/* the ethtool layer's detail */
	struct dmt_nl *nl;
	struct dmt_eth eth;
	char run_dir[PATH_MAX];
	int lock_fd;
	struct dmt_journal j;
	uint32_t nrx;
	uint32_t flags;
	bool use_ctx;
	bool have_rules;		/* foreign rules snapshotted */
	bool journal_dirty;		/* the file exists */
	uint32_t next_flow_id;
	uint32_t rr;
	struct devmemtcp_binding *binding;
	int step;
	int fail_step, crash_step;
	char doing[64];			/* the step being attempted */
	uint64_t setup_rt, setup_ioctls;
	uint32_t steps, setup_steps;
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
/* flows                                                                   */

/* devmemtcp_flow_parse() is in flow.c. */

/* ---------------------------------------------------------------------- */
/* steps, journal                                                          */

static const char *journal_errname(int err)
{
	return err == -EBADMSG ? "malformed" : dmt_errno_name(err);
}

static uint64_t nl_rt(const struct devmemtcp_nic *nic)
{
	return nic->nl ? nic->nl->round_trips : 0;
}

static int jsave(struct devmemtcp_nic *nic)
{
	int err = dmt_journal_write(nic->run_dir, nic->eth.ifname, &nic->j);

	if (err == -ENOMEM)
		return dmt_err_set(&nic->eerr, err,
				   "cannot write the journal %s/%s.journal: out of memory",
				   nic->run_dir, nic->eth.ifname);
	if (err < 0)
		return dmt_err_set(&nic->eerr, err,
				   "cannot write the journal %s/%s.journal: %s "
				   "(run as root, or set DEVMEMTCP_RUN_DIR to a writable directory)",
				   nic->run_dir, nic->eth.ifname, dmt_errno_name(err));
	nic->journal_dirty = true;
	return 0;
}

/* Before each change: the test hooks, then the journal. */
static void doing(struct devmemtcp_nic *nic, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void doing(struct devmemtcp_nic *nic, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(nic->doing, sizeof(nic->doing), fmt, ap);
	va_end(ap);
}

static int step_begin(struct devmemtcp_nic *nic)
{
	nic->step++;
#if DMT_TEST_HOOKS
	if (nic->crash_step && nic->step == nic->crash_step)
		raise(SIGKILL);
	if (nic->fail_step && nic->step == nic->fail_step)
		return dmt_err_set(&nic->eerr, -EIO,
				   "failure injected by DEVMEMTCP_NIC_FAIL_STEP=%d",
				   nic->fail_step);
#endif
	return jsave(nic);
}

/* ---------------------------------------------------------------------- */
/* undo                                                                    */

static bool spec_match_same(const struct ethtool_rx_flow_spec *a,
			    const struct ethtool_rx_flow_spec *b)
{
	uint32_t ta = a->flow_type & ~(uint32_t)FLOW_RSS;
	uint32_t tb = b->flow_type & ~(uint32_t)FLOW_RSS;

	return ta == tb && memcmp(&a->h_u, &b->h_u, sizeof(a->h_u)) == 0 &&
	       memcmp(&a->m_u, &b->m_u, sizeof(a->m_u)) == 0;
}

static int restore_rings(struct dmt_eth *e, const struct dmt_journal *j)
{
	struct dmt_rings r;
	int64_t hds = j->has_hds ? (int64_t)j->hds : -1;
	int err;

	/* Header split on with hds-thresh 0 is what we set; anything else
	 * was set by someone since (or is the old state already). */
	err = e->ops->rings_get(e, &r);
	if (err < 0)
		return err;
	if (r.has_tds && (r.tds != DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED ||
			  (r.has_hds && r.hds_thresh != 0)))
		return 0;

	if (!j->has_tds)
		return e->ops->rings_set(e, -1, hds);
	/* "auto" first, as ethtool does: a driver whose default matched the
	 * old state is left in its default mode, not pinned to it. */
	err = e->ops->rings_set(e, DMT_ETHTOOL_TCP_DATA_SPLIT_UNKNOWN, hds);
	if (err < 0)
		return e->ops->rings_set(e, j->tds, hds);
	err = e->ops->rings_get(e, &r);
	if (err < 0)
		return err;
	if (r.has_tds && r.tds != j->tds)
		return e->ops->rings_set(e, j->tds, -1);
	return 0;
}

static int keep_first(int first, int err)
{
	return first ? first : err;
}

/*
 * Delete journal rule r while it is still ours: at the location we got,
 * with our flow type and action (drivers may normalise the match fields
 * they report); when the location is unknown (a crash inside the insert),
 * by its full match, never a rule that existed before.  rules: what the
 * NIC has now.
 */
static int undo_rule(struct dmt_eth *e, const struct dmt_journal *j,
		     const struct dmt_jrule *r, const struct dmt_rule *rules,
		     size_t nrules, bool recovering)
{
	uint32_t type = r->fs.flow_type & ~(uint32_t)FLOW_RSS;

	for (size_t i = 0; (r->placed || recovering) && i < nrules; i++) {
		const struct ethtool_rx_flow_spec *fs = &rules[i].fs;

		if (r->placed) {
			if (rules[i].location != r->location)
				continue;
			if ((fs->flow_type & ~(uint32_t)(FLOW_RSS | FLOW_EXT)) == type &&
			    fs->ring_cookie == r->fs.ring_cookie)
				return e->ops->rule_delete(e, r->location);
			return 0;	/* replaced by someone else's */
		}
		if (!spec_match_same(fs, &r->fs) ||
		    fs->ring_cookie != r->fs.ring_cookie ||
		    in_set(rules[i].location, j->prior_rules, j->nprior_rules))
			continue;
		return e->ops->rule_delete(e, rules[i].location);
	}
	return 0;
}

/* The ntuple rules, newest first; each leaves the journal once gone. */
static int undo_rules(struct dmt_eth *e, struct dmt_journal *j,
		      bool recovering)
{
	struct dmt_rule *rules = NULL;
	size_t nrules = 0;
	int first = 0, err;

	if (!j->nrules)
		return 0;
	err = e->ops->rule_list(e, &rules, &nrules, NULL);
	if (err < 0) {
		first = err;
		rules = NULL;
		nrules = 0;
	}
	while (j->nrules) {
		err = undo_rule(e, j, &j->rules[j->nrules - 1], rules, nrules,
				recovering);
		if (err < 0) {
			first = keep_first(first, err);
			break;
		}
		j->nrules--;
	}
	free(rules);
	return first;
}

/* A crash inside the create left no context id: find ours by its table,
 * never a context that existed before. */
static int undo_ctx_by_table(struct dmt_eth *e, const struct dmt_journal *j)
{
	struct dmt_rss *list;
	size_t n;
	int err = e->ops->rss_dump(e, &list, &n);

	if (err < 0)
		return err;
	for (size_t i = 0; i < n; i++) {
		if (!list[i].context ||
		    in_set(list[i].context, j->prior_ctx, j->nprior_ctx) ||
		    list[i].indir_size != j->ctx_size ||
		    memcmp(list[i].indir, j->ctx_indir, j->ctx_size * 4))
			continue;
		err = e->ops->rss_ctx_delete(e, list[i].context);
		break;
	}
	for (size_t i = 0; i < n; i++)
		dmt_rss_free(&list[i]);
	free(list);
	return err;
}

static int undo_ctx(struct dmt_eth *e, const struct dmt_journal *j,
		    bool recovering)
{
	if (j->ctx_id)
		return e->ops->rss_ctx_delete(e, j->ctx_id);
	return recovering ? undo_ctx_by_table(e, j) : 0;
}

/* Turning ntuple filters off flushes every rule on most drivers: leave
 * them on while someone else has rules. */
static int undo_ntuple(struct dmt_eth *e, const struct dmt_journal *j)
{
	struct dmt_rule *rules = NULL;
	size_t nrules = 0;
	int err = e->ops->rule_list(e, &rules, &nrules, NULL);

	free(rules);
	if (err < 0)
		return err;
	if (nrules)
		return 0;
	return e->ops->feature_set(e, DMT_NTUPLE_FEATURE, j->ntuple_on);
}

/* Still the default table we set?  If someone changed it since, it is
 * theirs now: leave it. */
static int undo_rss(struct dmt_eth *e, const struct dmt_journal *j)
{
	struct dmt_rss cur = { 0 };
	int err = e->ops->rss_get(e, 0, &cur);
	bool theirs = err == 0 && j->rss_set_size &&
		      (cur.indir_size != j->rss_set_size ||
		       memcmp(cur.indir, j->rss_set, j->rss_set_size * 4));

	dmt_rss_free(&cur);
	if (err < 0)
		return err;
	if (theirs)
		return 0;
	if (j->rss_default)
		return e->ops->rss_set(e, 0, NULL, 0);
	return e->ops->rss_set(e, 0, j->rss_indir, j->rss_size);
}

/* One undo step's outcome: done (its bit leaves j->changed) or the first
 * error kept. */
static int undo_step(struct dmt_journal *j, uint32_t bit, int err, int first)
{
	if (err < 0)
		return keep_first(first, err);
	j->changed &= ~bit;
	return first;
}

int dmt_nic_undo(struct dmt_eth *e, struct dmt_journal *j, bool recovering)
{
	int first = undo_rules(e, j, recovering);

	if (j->changed & DMT_J_CTX)
		first = undo_step(j, DMT_J_CTX, undo_ctx(e, j, recovering),
				  first);
	if ((j->changed & DMT_J_NTUPLE) && !first)
		first = undo_step(j, DMT_J_NTUPLE, undo_ntuple(e, j), first);
	if (j->changed & DMT_J_RSS)
		first = undo_step(j, DMT_J_RSS, undo_rss(e, j), first);
	if (j->changed & DMT_J_RINGS)
		first = undo_step(j, DMT_J_RINGS, restore_rings(e, j), first);
	return first;
}

/* ---------------------------------------------------------------------- */
/* flows on a handle                                                       */

static int ensure_ntuple(struct devmemtcp_nic *nic)
{
	struct dmt_feature f;
	int err;

	if (nic->j.changed & DMT_J_NTUPLE)
		return 0;
	doing(nic, "ntuple feature");
	err = nic->eth.ops->feature_get(&nic->eth, DMT_NTUPLE_FEATURE, &f);
	if (err < 0)
		return err;
	if (f.active)
		return 0;
	if (!f.present || !f.hw || f.nochange)
		return dmt_err_set(&nic->eerr, -EOPNOTSUPP,
				   "%s cannot turn on ntuple filters (rx-ntuple-filter is %s): "
				   "devmem needs a NIC whose driver supports ntuple flow steering",
				   nic->eth.ifname,
				   !f.present ? "unknown" : "off [fixed]");
	nic->j.ntuple_on = false;
	err = step_begin(nic);
	if (err < 0)
		return err;
	nic->j.changed |= DMT_J_NTUPLE;
	err = jsave(nic);
	if (err < 0)
		return err;
	err = nic->eth.ops->feature_set(&nic->eth, DMT_NTUPLE_FEATURE, true);
	if (err < 0)
		return err;
	nic->steps++;
	return 0;
}

/* Everything about a flow that can be checked without the NIC: flags,
 * queue index, family, fields; *fs gets its match. */
static int flow_check(struct devmemtcp_nic *nic,
		      const struct devmemtcp_flow *flow, size_t index,
		      struct ethtool_rx_flow_spec *fs)
{
	uint32_t nq = nic->j.nqueues;
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

static int check_flows(struct devmemtcp_nic *nic,
		       const struct devmemtcp_flow *flows, size_t n)
{
	struct ethtool_rx_flow_spec *fs = dmt_calloc(n ? n : 1, sizeof(*fs));
	char desc[160];
	int err = 0;

	if (!fs)
		return -ENOMEM;
	for (size_t i = 0; i < n && !err; i++) {
		err = flow_check(nic, &flows[i], i, &fs[i]);
		for (size_t k = 0; k < i && !err; k++) {
			if (!spec_match_same(&fs[k], &fs[i]))
				continue;
			dmt_spec_str(&fs[i], 0, desc, sizeof(desc));
			*strstr(desc, " queue") = '\0';
			err = dmt_err_set(&nic->eerr, -EEXIST,
					  "flow %zu (%s) matches the same packets as flow %zu of this handle: remove one of them",
					  i, desc, k);
		}
	}
	free(fs);
	return err;
}

/*
 * The match of a flow and its message text: the rule to the flow's queue
 * (or the next one round-robin) or to the RSS context.  Checks what can be
 * checked without the NIC.
 */
static int flow_spec(struct devmemtcp_nic *nic, const struct devmemtcp_flow *flow,
		     size_t index, bool to_ctx, struct ethtool_rx_flow_spec *fs,
		     char *desc, size_t desclen)
{
	uint32_t queue;
	int err = flow_check(nic, flow, index, fs);

	if (err < 0)
		return err;
	if (flow->flags & DEVMEMTCP_FLOW_QUEUE)
		queue = nic->j.queues[flow->queue];
	else
		queue = nic->j.queues[nic->rr % nic->j.nqueues];
	dmt_flow_to_spec(flow, queue, to_ctx, fs);
	dmt_spec_str(fs, nic->j.ctx_id, desc, desclen);
	return 0;
}

/* A flow of this handle with the same match. */
static int check_own_rules(struct devmemtcp_nic *nic,
			   const struct ethtool_rx_flow_spec *fs, bool to_ctx,
			   size_t index, char *desc)
{
	for (uint32_t i = 0; i < nic->j.nrules; i++) {
		char *cut = strstr(desc, to_ctx ? " context" : " queue");

		if (!spec_match_same(&nic->j.rules[i].fs, fs))
			continue;
		if (cut)
			*cut = '\0';
		return dmt_err_set(&nic->eerr, -EEXIST,
				   "flow %zu (%s) matches the same packets as flow %u of this handle: remove one of them",
				   index, desc, nic->j.rules[i].id);
	}
	return 0;
}

/* The first time: the rules that existed before (never touched by undo). */
static int remember_prior_rules(struct devmemtcp_nic *nic,
				const struct dmt_rule *rules, size_t n)
{
	uint32_t *locs;

	if (nic->have_rules)
		return 0;
	locs = dmt_calloc(n ? n : 1, sizeof(*locs));
	if (!locs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		locs[i] = rules[i].location;
	free(nic->j.prior_rules);
	nic->j.prior_rules = locs;
	nic->j.nprior_rules = (uint32_t)n;
	nic->have_rules = true;
	return 0;
}

static bool rule_is_ours(const struct devmemtcp_nic *nic, uint32_t location)
{
	for (uint32_t k = 0; k < nic->j.nrules; k++)
		if (nic->j.rules[k].placed && nic->j.rules[k].location == location)
			return true;
	return false;
}

/*
 * The rules there now.  A rule owned by someone else with the same match
 * would make the outcome depend on rule order, so refuse rather than guess.
 */
static int check_foreign_rules(struct devmemtcp_nic *nic,
			       const struct ethtool_rx_flow_spec *fs,
			       size_t index, const char *desc)
{
	struct dmt_rule *rules;
	size_t n;
	int err = nic->eth.ops->rule_list(&nic->eth, &rules, &n, NULL);

	if (err == -EOPNOTSUPP)
		return dmt_err_set(&nic->eerr, err,
				   "%s has no ntuple flow steering (ETHTOOL_GRXCLSRLCNT: EOPNOTSUPP): "
				   "devmem needs a NIC whose driver supports ntuple filters",
				   nic->eth.ifname);
	if (err < 0)
		return err;
	err = remember_prior_rules(nic, rules, n);
	for (size_t i = 0; i < n && !err; i++) {
		uint32_t l = rules[i].location;

		if (!rule_is_ours(nic, l) && spec_match_same(&rules[i].fs, fs))
			err = dmt_err_set(&nic->eerr, -EEXIST,
					  "flow %zu (%s) matches the same packets as rule %u, which this handle does not own: "
					  "delete it (ethtool -N %s delete %u) or change the flow",
					  index, desc, l, nic->eth.ifname, l);
	}
	free(rules);
	return err;
}

/* Journal the rule as pending before inserting it: a crash inside the
 * insert leaves an entry that recovery finds by its match. */
static int journal_rule(struct devmemtcp_nic *nic,
			const struct ethtool_rx_flow_spec *fs, bool to_ctx,
			struct dmt_jrule **rp)
{
	struct dmt_jrule *v, *r;
	int err;

	v = dmt_realloc(nic->j.rules, (nic->j.nrules + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	nic->j.rules = v;
	err = step_begin(nic);
	if (err < 0)
		return err;
	r = &nic->j.rules[nic->j.nrules];
	memset(r, 0, sizeof(*r));
	r->id = nic->next_flow_id;
	r->fs = *fs;
	r->rss_context = to_ctx ? nic->j.ctx_id : 0;
	r->location = RX_CLS_LOC_ANY;
	nic->j.nrules++;
	err = jsave(nic);
	if (err < 0) {
		nic->j.nrules--;
		return err;
	}
	*rp = r;
	return 0;
}

/* One ntuple rule for flow: the flow id, or a negative errno (message on
 * nic->eerr). */
static int add_flow(struct devmemtcp_nic *nic, const struct devmemtcp_flow *flow,
		    size_t index)
{
	struct ethtool_rx_flow_spec fs;
	struct dmt_jrule *r;
	uint32_t loc = RX_CLS_LOC_ANY;
	bool to_ctx = nic->use_ctx && !(flow->flags & DEVMEMTCP_FLOW_QUEUE);
	char desc[160];
	int err;

	doing(nic, "ntuple rule for flow %zu", index);
	err = flow_spec(nic, flow, index, to_ctx, &fs, desc, sizeof(desc));
	if (!err)
		err = check_own_rules(nic, &fs, to_ctx, index, desc);
	if (!err)
		err = ensure_ntuple(nic);
	if (err)
		return err;
	doing(nic, "ntuple rule for flow %zu", index);
	err = check_foreign_rules(nic, &fs, index, desc);
	if (!err)
		err = journal_rule(nic, &fs, to_ctx, &r);
	if (err)
		return err;
	err = nic->eth.ops->rule_insert(&nic->eth, &fs, r->rss_context, &loc);
	if (err < 0)
		return err;	/* r stays "pending": undo knows nothing was placed */
	r->placed = true;
	r->location = loc;
	r->fs.location = loc;
	if (!(flow->flags & DEVMEMTCP_FLOW_QUEUE))
		nic->rr++;
	nic->next_flow_id++;
	nic->steps++;
	err = jsave(nic);
	if (err < 0)
		return err;
	return (int)r->id;
}

/* What failed: the layer's message, else the errno's name (an allocation
 * that failed leaves no message). */
static const char *detail(const struct dmt_err *e, int code)
{
	return e->msg[0] ? e->msg : dmt_errno_name(code);
}

/* Compose "what failed at which step" on ctx from nic->eerr. */
static int report(struct devmemtcp_nic *nic, int code, const char *what)
{
	return dmt_err(nic->ctx, &nic->ctx->err, code, "%s: %s", what,
		       detail(&nic->eerr, code));
}

/* ---------------------------------------------------------------------- */
/* open / close                                                            */

static void nic_free(struct devmemtcp_nic *nic)
{
	if (!nic)
		return;
	devmemtcp_binding_close(nic->binding);
	dmt_lock_release(nic->lock_fd, nic->run_dir, nic->eth.ifname);
	dmt_eth_fini(&nic->eth);
	dmt_nl_close(nic->nl);
	dmt_journal_free(&nic->j);
	free(nic);
}

/* Undo a stale journal of a dead process while holding the lock. */
static int recover_locked(const struct devmemtcp_ctx *ctx, struct dmt_eth *e,
			  const char *dir, struct dmt_journal *j,
			  struct dmt_err *err)
{
	uint64_t ns = dmt_netns_id();
	int ret;

	/* Interface names are per network namespace; the journal directory
	 * is not.  Never apply another namespace's journal to this one's
	 * device of the same name. */
	if (j->netns && ns && j->netns != ns)
		return dmt_err_set(err, -EXDEV,
				   "the journal was written by pid %ld (%s) in network namespace net:[%llu], this is net:[%llu]: "
				   "run devmemtcp restore %s in that namespace (ip netns exec NAME ...)",
				   (long)j->pid, j->comm, (unsigned long long)j->netns,
				   (unsigned long long)ns, e->ifname);
	if (j->ifindex && j->ifindex != e->ifindex)
		dmt_log(ctx, DEVMEMTCP_LOG_WARN,
			"%s had ifindex %d when pid %ld changed it and has %d now: restoring anyway",
			e->ifname, j->ifindex, (long)j->pid, e->ifindex);
	ret = dmt_nic_undo(e, j, true);
	if (ret < 0) {
		/* keep what is left for the next attempt */
		dmt_journal_write(dir, e->ifname, j);
		return ret;
	}
	dmt_journal_remove(dir, e->ifname);
	dmt_log(ctx, DEVMEMTCP_LOG_INFO,
		"%s: undid the changes of pid %ld (%s)", e->ifname,
		(long)j->pid, j->comm);
	return 1;
}

static int take_lock(struct devmemtcp_ctx *ctx, struct dmt_err *err,
		     const char *dir, const char *ifname, int *fd)
{
	char comm[64];
	pid_t holder;
	int ret = dmt_lock_take(dir, ifname, fd, &holder, comm, sizeof(comm));

	if (ret == -EBUSY)
		return dmt_err(ctx, err, -EBUSY,
			       "%s is in use for devmem by pid %ld (%s): stop that process or wait for it to close its handle",
			       ifname, (long)holder, comm[0] ? comm : "unknown");
	if (ret < 0)
		return dmt_err(ctx, err, ret,
			       "cannot take the lock %s/%s.lock: %s "
			       "(run as root, or set DEVMEMTCP_RUN_DIR to a writable directory)",
			       dir, ifname, dmt_errno_name(ret));
	return 0;
}

static int count_rx_queues(struct devmemtcp_nic *nic)
{
	struct dmt_eth *e = &nic->eth;
	struct dmt_channels ch;
	int err;

	err = e->ops->channels_get(e, &ch);
	if (err == 0) {
		nic->nrx = ch.rx + ch.combined;
	} else if (e->ops == &dmt_eth_real_ops) {
		struct devmemtcp_queue q[256];
		int nq = dmt_queue_list(nic->nl, e->ifindex, q, ARRAY_SIZE(q));

		uint32_t rx, tx;

		nic->nrx = 0;
		for (int i = 0; i < nq && i < (int)ARRAY_SIZE(q); i++)
			nic->nrx += q[i].type == DEVMEMTCP_QUEUE_RX;
		if (!nic->nrx && dmt_sysfs_queues(e->ifname, &rx, &tx) == 0)
			nic->nrx = rx;
		if (!nic->nrx)
			return err;
	} else {
		return err;
	}
	return 0;
}

static int snapshot(struct devmemtcp_nic *nic, bool want_rss)
{
	struct dmt_eth *e = &nic->eth;
	struct dmt_rings r;
	struct dmt_rss *list = NULL;
	size_t n = 0;
	int err;

	err = e->ops->rings_get(e, &r);
	if (err == -EOPNOTSUPP || (err == 0 && !r.has_tds))
		return dmt_err_set(&nic->eerr, -EOPNOTSUPP,
				   "%s does not support header split (tcp-data-split): "
				   "devmem TCP needs a driver with header split and queue management "
				   "(gve, bnxt_en, mlx5, fbnic)",
				   e->ifname);
	if (err < 0)
		return err;
	nic->j.has_tds = r.has_tds;
	nic->j.tds = r.tds;
	nic->j.has_hds = r.has_hds;
	nic->j.hds = r.hds_thresh;
	if (want_rss) {
		err = e->ops->rss_dump(e, &list, &n);
		if (err == -EOPNOTSUPP)
			return dmt_err_set(&nic->eerr, -EOPNOTSUPP,
					   "%s has no RSS indirection table, so other traffic cannot be kept off the devmem queues: "
					   "pass DEVMEMTCP_NIC_KEEP_RSS if you steer it some other way",
					   e->ifname);
		if (err < 0)
			return err;
		for (size_t i = 0; i < n; i++) {
			if (list[i].context == 0 && !nic->j.rss_indir) {
				nic->j.rss_indir = list[i].indir;
				nic->j.rss_size = list[i].indir_size;
				list[i].indir = NULL;
			} else if (list[i].context) {
				uint32_t *v = dmt_realloc(nic->j.prior_ctx,
					(nic->j.nprior_ctx + 1) * sizeof(*v));

				if (!v) {
					err = -ENOMEM;
					break;
				}
				nic->j.prior_ctx = v;
				v[nic->j.nprior_ctx++] = list[i].context;
			}
		}
		for (size_t i = 0; i < n; i++)
			dmt_rss_free(&list[i]);
		free(list);
		if (err < 0)
			return err;
		nic->j.rss_default = dmt_rss_is_default(nic->j.rss_indir,
							nic->j.rss_size, nic->nrx);
	}
	nic->j.have_prior = true;
	return 0;
}

/* 1. header split on, hds-thresh 0 */
static int apply_rings(struct devmemtcp_nic *nic)
{
	struct dmt_eth *e = &nic->eth;
	struct dmt_journal *j = &nic->j;
	int err;

	doing(nic, "header split");
	if (j->tds == DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED &&
	    (!j->has_hds || j->hds == 0))
		return 0;
	err = step_begin(nic);
	if (err < 0)
		return err;
	j->changed |= DMT_J_RINGS;
	err = jsave(nic);
	if (!err)
		err = e->ops->rings_set(e, DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED,
					j->has_hds ? 0 : -1);
	if (err < 0)
		return err;
	nic->steps++;
	return 0;
}

/* Journal the default table t, then set it. */
static int set_default_rss(struct devmemtcp_nic *nic, const uint32_t *t)
{
	struct dmt_journal *j = &nic->j;
	int err = step_begin(nic);

	if (err < 0)
		return err;
	j->changed |= DMT_J_RSS;
	free(j->rss_set);
	j->rss_set = dmt_malloc(j->rss_size * sizeof(uint32_t));
	if (!j->rss_set)
		return -ENOMEM;
	memcpy(j->rss_set, t, j->rss_size * sizeof(uint32_t));
	j->rss_set_size = j->rss_size;
	err = jsave(nic);
	if (!err)
		err = nic->eth.ops->rss_set(&nic->eth, 0, t, j->rss_size);
	if (!err)
		nic->steps++;
	return err;
}

/* 2. default RSS table off the devmem queues */
static int apply_rss(struct devmemtcp_nic *nic)
{
	struct dmt_journal *j = &nic->j;
	uint32_t *t;
	int ch, err = 0;

	doing(nic, "RSS table");
	if ((nic->flags & DEVMEMTCP_NIC_KEEP_RSS) || !j->rss_size)
		return 0;
	t = dmt_calloc(j->rss_size, sizeof(*t));
	if (!t)
		return -ENOMEM;
	ch = dmt_plan_rss(j->rss_indir, j->rss_size, nic->nrx, j->queues,
			  j->nqueues, t);
	if (ch < 0)
		err = dmt_err_set(&nic->eerr, -EINVAL,
				  "no RX queue is left for other traffic");
	else if (ch > 0)
		err = set_default_rss(nic, t);
	free(t);
	return err < 0 ? err : 0;
}

/* 3. an RSS context over the devmem queues */
static int apply_ctx(struct devmemtcp_nic *nic)
{
	struct dmt_eth *e = &nic->eth;
	struct dmt_journal *j = &nic->j;
	uint32_t n = j->rss_size ? j->rss_size : 128;
	int err;

	doing(nic, "RSS context");
	if (!nic->use_ctx)
		return 0;
	j->ctx_indir = dmt_calloc(n, sizeof(uint32_t));
	if (!j->ctx_indir)
		return -ENOMEM;
	j->ctx_size = n;
	dmt_plan_ctx(n, j->queues, j->nqueues, j->ctx_indir);
	err = step_begin(nic);
	if (err < 0)
		return err;
	j->changed |= DMT_J_CTX;
	j->ctx_id = 0;
	err = jsave(nic);
	if (err < 0)
		return err;
	err = e->ops->rss_ctx_create(e, j->ctx_indir, n, &j->ctx_id);
	if (err == -EOPNOTSUPP || err == -EINVAL) {
		/* No additional contexts: steer flows to queues. */
		dmt_log(nic->ctx, DEVMEMTCP_LOG_INFO,
			"%s: no RSS contexts (%s), steering each flow to one queue",
			e->ifname, dmt_errno_name(err));
		j->changed &= ~(uint32_t)DMT_J_CTX;
		free(j->ctx_indir);
		j->ctx_indir = NULL;
		j->ctx_size = 0;
		nic->use_ctx = false;
		return jsave(nic);
	}
	if (err < 0)
		return err;
	nic->steps++;
	return jsave(nic);
}

/* 5. bind-rx, verified with queue-get */
static int apply_bind(struct devmemtcp_nic *nic, struct devmemtcp_buf *buf,
		      const struct devmemtcp_bind_opts *bo)
{
	struct dmt_eth *e = &nic->eth;
	int err;

	doing(nic, "bind-rx");
	if (dmt_eth_is_up(e) == 0)
		return dmt_err_set(&nic->eerr, -ENETDOWN,
				   "%s is down, so its queues cannot take a binding: bring it up first (ip link set %s up)",
				   e->ifname, e->ifname);
	err = step_begin(nic);
	if (err < 0)
		return err;
	err = devmemtcp_bind_rx(nic->ctx, e->ifindex, nic->j.queues,
				nic->j.nqueues, buf, bo, &nic->binding);
	if (err < 0)
		return dmt_err_set(&nic->eerr, err, "%s", nic->ctx->err.msg);
	nic->steps++;
	return 0;
}

/* The changes, in a safe order, each journalled before it is made. */
static int apply(struct devmemtcp_nic *nic, const struct devmemtcp_nic_opts *opts)
{
	size_t nflows = DMT_OPT(opts, devmemtcp_nic_opts, nflows, 0);
	const struct devmemtcp_flow *flows =
		DMT_OPT(opts, devmemtcp_nic_opts, flows, NULL);
	struct devmemtcp_buf *buf = DMT_OPT(opts, devmemtcp_nic_opts, buf, NULL);
	int err;

	err = apply_rings(nic);
	if (!err)
		err = apply_rss(nic);
	if (!err)
		err = apply_ctx(nic);
	/* 4. one ntuple rule per flow */
	for (size_t i = 0; i < nflows && !err; i++) {
		err = add_flow(nic, &flows[i], i);
		if (err > 0)
			err = 0;
	}
	if (!err && buf)
		err = apply_bind(nic, buf,
				 DMT_OPT(opts, devmemtcp_nic_opts, bind_opts, NULL));
	return err;
}

static int journal_unreadable(struct devmemtcp_ctx *ctx, const char *dir,
			      const char *ifname, int err)
{
	if (err == -ENOMEM)
		return dmt_err(ctx, &ctx->err, err,
			       "reading the journal %s/%s.journal: out of memory",
			       dir, ifname);
	return dmt_err(ctx, &ctx->err, err,
		       "the journal %s/%s.journal is unreadable (%s): restore the NIC by hand, then delete it",
		       dir, ifname, journal_errname(err));
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
			       DEVMEMTCP_NIC_KEEP_RSS;
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

	if (!nic) {
		dmt_err_nomem(ctx, &ctx->err, ifname);
		return -ENOMEM;	/* as a constant: callers rely on *nicp */
	}
	nic->ctx = ctx;
	nic->lock_fd = -1;
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

/* Recover: take the interface lock; a journal left by a process that
 * ended without undoing its changes is undone (DEVMEMTCP_NIC_RECOVER) or
 * refused. */
static int open_recover(struct devmemtcp_nic *nic)
{
	struct devmemtcp_ctx *ctx = nic->ctx;
	const char *ifname = nic->eth.ifname;
	struct dmt_journal old;
	int err;

	err = take_lock(ctx, &ctx->err, nic->run_dir, ifname, &nic->lock_fd);
	if (err < 0)
		return err;
	err = dmt_journal_read(nic->run_dir, ifname, &old);
	if (err == -ENOENT)
		return 0;
	if (err < 0)
		return journal_unreadable(ctx, nic->run_dir, ifname, err);
	if (!(nic->flags & DEVMEMTCP_NIC_RECOVER)) {
		err = dmt_err(ctx, &ctx->err, -ESTALE,
			      "%s has changes left by pid %ld (%s), which ended without undoing them "
			      "(journal %s/%s.journal): run 'devmemtcp restore %s' or open with DEVMEMTCP_NIC_RECOVER",
			      ifname, (long)old.pid, old.comm, nic->run_dir,
			      ifname, ifname);
	} else {
		err = recover_locked(ctx, &nic->eth, nic->run_dir, &old,
				     &nic->eerr);
		if (err < 0)
			dmt_err(ctx, &ctx->err, err,
				"recovering the stale journal of %s failed: %s",
				ifname, nic->eerr.msg);
	}
	dmt_journal_free(&old);
	return err < 0 ? err : 0;
}

/* The devmem queues (opts or the last ones) and whether flows go to an
 * RSS context over them. */
static int plan_queues(struct devmemtcp_nic *nic,
		       const struct devmemtcp_nic_opts *opts)
{
	const uint32_t *req = DMT_OPT(opts, devmemtcp_nic_opts, queues, NULL);
	uint32_t k = DMT_OPT(opts, devmemtcp_nic_opts, nqueues, 0);
	char why[256];
	int nq;

	nic->j.queues = dmt_calloc(k ? k : 1, sizeof(uint32_t));
	if (!nic->j.queues)
		return dmt_err_nomem(nic->ctx, &nic->ctx->err, nic->eth.ifname);
	nq = dmt_plan_queues(nic->nrx, req, k, k,
			     !!(nic->flags & DEVMEMTCP_NIC_KEEP_RSS),
			     nic->j.queues, why, sizeof(why));
	if (nq < 0)
		return dmt_err(nic->ctx, &nic->ctx->err, nq, "%s: %s",
			       nic->eth.ifname, why);
	nic->j.nqueues = (uint32_t)nq;
	nic->use_ctx = nq > 1 && !(nic->flags & DEVMEMTCP_NIC_NO_RSS_CONTEXT);
	return 0;
}

/* Plan: who we are, the queues and flows, the prior state; the journal
 * exists before the first change. */
static int plan(struct devmemtcp_nic *nic, const struct devmemtcp_nic_opts *opts)
{
	struct devmemtcp_ctx *ctx = nic->ctx;
	int err;

	nic->j.pid = getpid();
	dmt_self_comm(nic->j.comm, sizeof(nic->j.comm));
	memcpy(nic->j.ifname, nic->eth.ifname, sizeof(nic->j.ifname));
	nic->j.ifindex = nic->eth.ifindex;
	nic->j.netns = dmt_netns_id();
	err = count_rx_queues(nic);
	if (err < 0)
		return report(nic, err, "cannot set up devmem");
	err = plan_queues(nic, opts);
	if (err < 0)
		return err;
	err = check_flows(nic, DMT_OPT(opts, devmemtcp_nic_opts, flows, NULL),
			  DMT_OPT(opts, devmemtcp_nic_opts, nflows, 0));
	if (err < 0)
		return dmt_err(ctx, &ctx->err, err, "%s: %s", nic->eth.ifname,
			       detail(&nic->eerr, err));
	err = snapshot(nic, !(nic->flags & DEVMEMTCP_NIC_KEEP_RSS));
	if (err == 0)
		err = jsave(nic);
	if (err < 0)
		return report(nic, err, "cannot set up devmem");
	return 0;
}

/* Apply failed at nic->doing: undo the finished steps and say both. */
static int rollback(struct devmemtcp_nic *nic, int err)
{
	struct devmemtcp_ctx *ctx = nic->ctx;
	struct dmt_err cause = nic->eerr;
	const char *ifname = nic->eth.ifname;

	devmemtcp_binding_close(nic->binding);
	nic->binding = NULL;
	if (dmt_nic_undo(&nic->eth, &nic->j, false) < 0) {
		dmt_journal_write(nic->run_dir, ifname, &nic->j);
		return dmt_err(ctx, &ctx->err, err,
			       "setting up %s for devmem failed at %s: %s; "
			       "undoing the finished steps failed too (%s): run 'devmemtcp restore %s'",
			       ifname, nic->doing, detail(&cause, err),
			       nic->eerr.msg, ifname);
	}
	dmt_journal_remove(nic->run_dir, ifname);
	return dmt_err(ctx, &ctx->err, err,
		       "setting up %s for devmem failed at %s: %s; "
		       "the %u finished steps were undone",
		       ifname, nic->doing, detail(&cause, err), nic->steps);
}

static uint64_t binding_rt(const struct devmemtcp_nic *nic)
{
	return nic->binding && nic->binding->nl ? nic->binding->nl->round_trips : 0;
}

/* Setup cost, for devmemtcp_nic_stats() and the log. */
static void opened(struct devmemtcp_nic *nic, uint64_t rt0, uint64_t io0)
{
	nic->setup_rt = nl_rt(nic) - rt0 + binding_rt(nic);
	nic->setup_ioctls = nic->eth.ioctls - io0;
	nic->setup_steps = nic->steps;
	dmt_log(nic->ctx, DEVMEMTCP_LOG_INFO,
		"%s ready for devmem on %u queues: %u changes, %llu netlink round trips, %llu ioctls",
		nic->eth.ifname, nic->j.nqueues, nic->steps,
		(unsigned long long)nic->setup_rt,
		(unsigned long long)nic->setup_ioctls);
}

DEVMEMTCP_EXPORT int devmemtcp_nic_open(struct devmemtcp_ctx *ctx,
					const char *ifname,
					const struct devmemtcp_nic_opts *opts,
					struct devmemtcp_nic **nicp)
{
	DMT_KEEP_ERRNO;
	struct devmemtcp_nic *nic;
	uint64_t rt0, io0;
	int err;

	if (!ctx)
		return -EINVAL;
	err = check_open_args(ctx, opts, nicp);
	if (err)
		return err;
	err = nic_new(ctx, ifname, opts, &nic);
	if (err)
		return err;
	rt0 = nl_rt(nic);
	io0 = nic->eth.ioctls;
	err = open_recover(nic);
	if (!err)
		err = plan(nic, opts);
	if (!err) {
		err = apply(nic, opts);
		if (err < 0)
			err = rollback(nic, err);
	}
	if (err < 0) {
		nic_free(nic);
		return err;
	}
	opened(nic, rt0, io0);
	*nicp = nic;
	return 0;
}

DEVMEMTCP_EXPORT int devmemtcp_nic_close(struct devmemtcp_nic *nic)
{
	DMT_KEEP_ERRNO;
	int err;

	if (!nic)
		return 0;
	devmemtcp_binding_close(nic->binding);
	nic->binding = NULL;
	err = dmt_nic_undo(&nic->eth, &nic->j, false);
	if (err < 0) {
		dmt_journal_write(nic->run_dir, nic->eth.ifname, &nic->j);
		dmt_err(nic->ctx, &nic->ctx->err, err,
			"restoring %s failed: %s; the journal is kept: run 'devmemtcp restore %s'",
			nic->eth.ifname, nic->eerr.msg, nic->eth.ifname);
	} else {
		dmt_journal_remove(nic->run_dir, nic->eth.ifname);
	}
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
		return -EINVAL;
	if (queues)
		*queues = nic->j.queues;
	return (int)nic->j.nqueues;
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
	int ret;

	if (!nic)
		return -EINVAL;
	if (!flow)
		return dmt_err(nic->ctx, &nic->err, -EINVAL,
			       "devmemtcp_nic_add_flow: flow is NULL");
	dmt_err_clear(&nic->eerr);
	ret = add_flow(nic, flow, nic->next_flow_id);
	if (ret < 0) {
		/* A rule whose insert failed stays journalled as pending;
		 * drop it so close does not look for it. */
		if (nic->j.nrules && !nic->j.rules[nic->j.nrules - 1].placed) {
			nic->j.nrules--;
			jsave(nic);
		}
		return dmt_err(nic->ctx, &nic->err, ret, "adding a flow on %s: %s",
			       nic->eth.ifname,
			       nic->eerr.msg[0] ? nic->eerr.msg : dmt_errno_name(ret));
	}
	return ret;
}

DEVMEMTCP_EXPORT int devmemtcp_nic_remove_flow(struct devmemtcp_nic *nic,
					       int flow_id)
{
	DMT_KEEP_ERRNO;
	int err;

	if (!nic)
		return -EINVAL;
	for (uint32_t i = 0; i < nic->j.nrules; i++) {
		struct dmt_jrule *r = &nic->j.rules[i];

		if ((int)r->id != flow_id || !r->placed)
			continue;
		dmt_err_clear(&nic->eerr);
		err = nic->eth.ops->rule_delete(&nic->eth, r->location);
		if (err < 0)
			return dmt_err(nic->ctx, &nic->err, err,
				       "removing flow %d on %s: %s", flow_id,
				       nic->eth.ifname, nic->eerr.msg);
		memmove(r, r + 1, (nic->j.nrules - i - 1) * sizeof(*r));
		nic->j.nrules--;
		err = jsave(nic);
		if (err < 0)
			return dmt_err(nic->ctx, &nic->err, err, "%s",
				       nic->eerr.msg);
		return 0;
	}
	return dmt_err(nic->ctx, &nic->err, -ENOENT,
		       "flow %d is not a flow of this handle: use the id devmemtcp_nic_add_flow() returned",
		       flow_id);
}

DEVMEMTCP_EXPORT int devmemtcp_nic_stats(const struct devmemtcp_nic *nic,
					 struct devmemtcp_nic_stats *stats)
{
	DMT_KEEP_ERRNO;
	struct devmemtcp_nic_stats s;

	if (!nic || !stats || stats->sz < sizeof(size_t))
		return -EINVAL;
	memset(&s, 0, sizeof(s));
	s.setup_round_trips = nic->setup_rt;
	s.setup_ioctls = nic->setup_ioctls;
	s.round_trips = nl_rt(nic) + binding_rt(nic);
	s.ioctls = nic->eth.ioctls;
	s.steps = nic->setup_steps;
	s.rules = nic->j.nrules;
	s.rss_context = nic->j.ctx_id;
	dmt_copy_out(stats, &s, sizeof(s));
	return 0;
}

/* eth_init failed: with a journal for a device this namespace does not
 * have, say so rather than guess. */
static int recover_no_device(struct devmemtcp_ctx *ctx, const char *dir,
			     const char *ifname, int err,
			     const struct dmt_err *eerr)
{
	struct dmt_journal j;

	if (err != -ENODEV || dmt_journal_read(dir, ifname, &j) != 0)
		return dmt_err(ctx, &ctx->err, err, "%s", eerr->msg);
	/* The device and its settings are gone (or in another namespace):
	 * nothing to undo here, and guessing is wrong. */
	dmt_err(ctx, &ctx->err, err,
		"%s: the journal %s/%s.journal of pid %ld (%s) names no interface in this network namespace: "
		"restore where the interface is, or delete the journal if it is gone for good",
		eerr->msg, dir, ifname, (long)j.pid, j.comm);
	dmt_journal_free(&j);
	return err;
}

/* Under the lock: undo what the journal of e's interface records. */
static int recover_journal(struct devmemtcp_ctx *ctx, struct dmt_eth *e,
			   const char *dir, struct dmt_err *eerr)
{
	struct dmt_journal j;
	int err = dmt_journal_read(dir, e->ifname, &j);

	if (err == -ENOENT)
		return 0;
	if (err < 0)
		return journal_unreadable(ctx, dir, e->ifname, err);
	err = recover_locked(ctx, e, dir, &j, eerr);
	if (err < 0)
		dmt_err(ctx, &ctx->err, err,
			"undoing the changes pid %ld (%s) left on %s failed: %s; the journal is kept",
			(long)j.pid, j.comm, e->ifname, eerr->msg);
	dmt_journal_free(&j);
	return err;
}

DEVMEMTCP_EXPORT int devmemtcp_nic_recover(struct devmemtcp_ctx *ctx,
					   const char *ifname,
					   const struct devmemtcp_nic_opts *opts)
{
	DMT_KEEP_ERRNO;
	struct dmt_nl *nl = NULL;
	struct dmt_eth e;
	struct dmt_err eerr = { 0 };
	const char *dir;
	int fd = -1, err;

	if (!ctx)
		return -EINVAL;
	err = DMT_OPTS_CHECK(ctx, &ctx->err, opts, devmemtcp_nic_opts);
	if (err)
		return err;
	dir = dmt_run_dir(DMT_OPT(opts, devmemtcp_nic_opts, run_dir, NULL));
	err = dmt_eth_init(&e, &eerr, NULL, ifname);
	if (err < 0) {
		err = recover_no_device(ctx, dir, ifname, err, &eerr);
		goto out;
	}
	err = eth_nl_open(ctx, &e, &nl);
	if (!err)
		err = take_lock(ctx, &ctx->err, dir, ifname, &fd);
	if (!err)
		err = recover_journal(ctx, &e, dir, &eerr);
out:
	dmt_lock_release(fd, dir, ifname);
	dmt_eth_fini(&e);
	dmt_nl_close(nl);
	return err;
}

// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The shared settings of an interface on the device (owners.c has the
 * model and derives what they should be): the baseline snapshot, which
 * settings are someone else's now, and changing header split,
 * hds-thresh, the default RSS table and ntuple to what the owners need,
 * only where the device still shows what the owners last wrote
 * (dmt_op_reconcile).  Runs under the interface lock (struct dmt_op).
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

		err = dmt_shared_copy_table(bl, &now);
	} else if (err == -EOPNOTSUPP) {
		err = 0;
	}
	if (err < 0)
		return err;
	b->rss_default = bl->rss_size && dmt_rss_is_default(bl->rss, bl->rss_size, op->nrx);
	err = dmt_shared_copy(&b->applied, bl);
	if (!err)
		err = dmt_op_save_base(op);
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
		if (!dmt_shared_same_table(&now, a)) {
			if (dmt_shared_same_table(&now, g))
				err = dmt_shared_copy_table(a, g);
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
	ours = dmt_shared_same_table(&now, &b->applied);
	done = dmt_shared_same_table(&now, t);
	if (!ours) {
		if (!done)
			theirs(op, DMT_S_RSS);
		return 0;
	}
	err = dmt_op_step(op, "RSS table");
	if (err < 0)
		return err;
	op->have_rss = false;
	if (b->rss_default && dmt_shared_same_table(t, &b->baseline))
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
	bool rss = !(b->theirs & DMT_S_RSS) && !dmt_shared_same_table(t, a);
	int err;

	if (!rings && !ntuple && !rss)
		return 0;
	err = dmt_shared_copy(&b->applying, t);
	if (err < 0)
		return err;
	b->has_applying = true;
	err = dmt_op_save_base(op);
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
		err = dmt_shared_copy_table(&b->applied, t);
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
	return restoring ? 0 : dmt_op_save_base(op);
}

static bool same_shared(const struct dmt_shared *a, const struct dmt_shared *b)
{
	return a->tds == b->tds && a->hds == b->hds && a->ntuple == b->ntuple &&
	       dmt_shared_same_table(a, b);
}

/* Nobody is left, but a bound queue keeps the shared settings from
 * going back: say which, and that IF.base stays. */
static void report_held(struct dmt_op *op, const uint32_t *bound, uint32_t nbound)
{
	char what[32];

	for (uint32_t i = 0; i < nbound; i++) {
		if (!dmt_op_queue_bound(op, bound[i], what, sizeof(what)))
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
		err = dmt_op_bound_queues(op, &bound, &nbound);
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

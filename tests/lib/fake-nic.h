/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * An in-memory NIC behind the ethtool layer's ops table, for running the
 * transactional setup of lib/nic/nic.c without privileges or hardware.  It
 * behaves like the drivers the library targets: header split and hds-thresh
 * in rings, an RSS table of 64 entries, RSS contexts, an ntuple table of
 * 32 rules with driver-chosen locations, and rejects what they reject.
 * Its queue-get (dmt_test_queue_list) shows what the test puts on its
 * queues: a dma-buf binding, io_uring, AF_XDP.
 */
#ifndef FAKE_NIC_H
#define FAKE_NIC_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ethtool.h"
#include "nic.h"
#include "uapi.h"

#define FAKE_INDIR 64
#define FAKE_CTX 4
#define FAKE_RULES 32
#define FAKE_QUEUES 16

/* What ethtool shows as tcp-data-split (the kernel checks what was
 * configured, tds_cfg, whatever is shown): */
enum fake_tds_show {
	FAKE_TDS_CFG,		/* the configuration, auto meaning tds_default */
	FAKE_TDS_ALWAYS_ON,	/* on whatever is configured; off refused (fbnic,
				 * and bnxt while hardware GRO is on) */
	FAKE_TDS_CFG_ONLY,	/* the configuration, nothing while auto (mlx5) */
};

struct fake_nic {
	/* state compared by fake_dump */
	uint32_t nrx;
	bool has_tds, has_hds;
	uint8_t tds_cfg;		/* what the user set: 0 = auto */
	uint8_t tds_default;		/* what auto means for this driver */
	enum fake_tds_show tds_show;
	uint32_t hds, hds_max;
	bool ntuple_hw, ntuple_on;
	bool rss;
	bool indir_user;		/* IFF_RXFH_CONFIGURED */
	uint32_t indir[FAKE_INDIR];
	bool ctx_supported;
	struct { bool used; uint32_t indir[FAKE_INDIR]; } ctx[FAKE_CTX + 1];
	bool rules_supported, special_locs;
	struct { bool used; uint32_t rss_ctx; struct ethtool_rx_flow_spec fs; } rule[FAKE_RULES];
	/* what queue-get shows on RX queue i (set by the tests) */
	struct { uint32_t dmabuf; bool io_uring, xsk; } q[FAKE_QUEUES];
	/* not state */
	int calls, changes;
	int nl_calls, ioctls;		/* as the real layer would make them */
	int fail_op_at;			/* fail the n-th change ... */
	int fail_errno;			/* ... with this errno (0: EIO) */
	int kill_after_change;		/* SIGKILL right after the n-th change */
	bool kill_after_insert;		/* SIGKILL right after a rule insert */
};

static struct fake_nic *FN(struct dmt_eth *e)
{
	return e->priv;
}

static uint8_t fake_tds(const struct fake_nic *n)
{
	if (n->tds_show == FAKE_TDS_ALWAYS_ON)
		return DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED;
	return n->tds_cfg ? n->tds_cfg : n->tds_default;
}

static int fake_change(struct fake_nic *n)
{
	n->changes++;
	if (!n->fail_op_at || n->changes != n->fail_op_at)
		return 0;
	return n->fail_errno ? -n->fail_errno : -EIO;
}

/* A change was made: the moment between it and the journal's record. */
static void fake_changed(struct fake_nic *n)
{
	if (n->kill_after_change && n->changes == n->kill_after_change)
		raise(SIGKILL);
}

static int f_rings_get(struct dmt_eth *e, struct dmt_rings *r)
{
	struct fake_nic *n = FN(e);

	n->calls++;
	n->nl_calls++;
	memset(r, 0, sizeof(*r));
	r->rx = r->rx_max = 1024;
	r->has_tds = n->has_tds && (n->tds_show != FAKE_TDS_CFG_ONLY || n->tds_cfg);
	r->tds = n->has_tds ? fake_tds(n) : 0;
	r->has_hds = r->has_hds_max = n->has_hds;
	r->hds_thresh = n->hds;
	r->hds_thresh_max = n->hds_max;
	return 0;
}

static int f_rings_set(struct dmt_eth *e, int tds, int64_t hds)
{
	struct fake_nic *n = FN(e);
	int err = fake_change(n);

	n->calls++;
	n->nl_calls++;
	if (err)
		return dmt_err_set(e->err, err, "rings-set on %s failed: %s", e->ifname,
				   dmt_errno_name(err));
	if (tds >= 0 && !n->has_tds)
		return dmt_err_set(e->err, -EOPNOTSUPP, "rings-set on %s failed: EOPNOTSUPP", e->ifname);
	if (tds == DMT_ETHTOOL_TCP_DATA_SPLIT_DISABLED && n->tds_show == FAKE_TDS_ALWAYS_ON)
		return dmt_err_set(e->err, -EINVAL, "rings-set on %s failed: EINVAL", e->ifname);
	if (hds >= 0 && (!n->has_hds || hds > n->hds_max))
		return dmt_err_set(e->err, -ERANGE, "rings-set on %s failed: ERANGE", e->ifname);
	if (tds >= 0)
		n->tds_cfg = (uint8_t)tds;
	if (hds >= 0)
		n->hds = (uint32_t)hds;
	fake_changed(n);
	return 0;
}

static int f_channels_get(struct dmt_eth *e, struct dmt_channels *c)
{
	memset(c, 0, sizeof(*c));
	c->combined = c->combined_max = FN(e)->nrx;
	FN(e)->calls++;
	FN(e)->nl_calls++;
	return 0;
}

static int f_feature_get(struct dmt_eth *e, const char *name, struct dmt_feature *f)
{
	struct fake_nic *n = FN(e);

	n->calls++;
	n->nl_calls++;
	memset(f, 0, sizeof(*f));
	if (strcmp(name, DMT_NTUPLE_FEATURE))
		return 0;
	f->present = true;
	f->hw = n->ntuple_hw;
	f->nochange = !n->ntuple_hw;
	f->active = f->wanted = n->ntuple_on;
	return 0;
}

static int f_feature_set(struct dmt_eth *e, const char *name, bool on)
{
	struct fake_nic *n = FN(e);
	int err = fake_change(n);

	n->calls++;
	n->nl_calls++;
	if (err)
		return dmt_err_set(e->err, err, "features-set on %s failed: %s", e->ifname,
				   dmt_errno_name(err));
	if (!n->ntuple_hw)
		return -EOPNOTSUPP;
	if (!on)	/* like most drivers: turning ntuple off flushes rules */
		memset(n->rule, 0, sizeof(n->rule));
	n->ntuple_on = on;
	fake_changed(n);
	return 0;
}

static int f_rss_get(struct dmt_eth *e, uint32_t context, struct dmt_rss *rss)
{
	struct fake_nic *n = FN(e);
	const uint32_t *t;

	n->calls++;
	n->nl_calls++;
	memset(rss, 0, sizeof(*rss));
	if (!n->rss)
		return -EOPNOTSUPP;
	if (context > FAKE_CTX || (context && !n->ctx[context].used))
		return -ENOENT;
	t = context ? n->ctx[context].indir : n->indir;
	/* allocated as the real layer does: the allocation walks count it */
	rss->indir = dmt_malloc(sizeof(n->indir));
	if (!rss->indir)
		return -ENOMEM;
	rss->context = context;
	rss->indir_size = FAKE_INDIR;
	memcpy(rss->indir, t, sizeof(n->indir));
	return 0;
}

static int f_rss_dump(struct dmt_eth *e, struct dmt_rss **list, size_t *cnt)
{
	struct fake_nic *n = FN(e);
	struct dmt_rss *v;
	size_t k = 0;
	int err = 0;

	*list = NULL;
	*cnt = 0;
	if (!n->rss) {
		n->calls++;
		return -EOPNOTSUPP;
	}
	v = dmt_calloc(FAKE_CTX + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t c = 0; c <= FAKE_CTX && !err; c++)
		if (c == 0 || n->ctx[c].used)
			err = f_rss_get(e, c, &v[k++]);
	n->calls -= (int)k - 1;		/* one dump */
	n->nl_calls -= (int)k - 1;
	if (err < 0) {
		for (size_t i = 0; i < k; i++)
			free(v[i].indir);
		free(v);
		return err;
	}
	*list = v;
	*cnt = k;
	return 0;
}

static int f_rss_set(struct dmt_eth *e, uint32_t context, const uint32_t *indir, uint32_t cnt)
{
	struct fake_nic *n = FN(e);
	int err = fake_change(n);

	n->calls++;
	n->nl_calls++;
	if (err)
		return dmt_err_set(e->err, err, "rss-set on %s failed: %s", e->ifname,
				   dmt_errno_name(err));
	if (!n->rss || context)
		return -EOPNOTSUPP;
	if (cnt == 0) {
		for (uint32_t i = 0; i < FAKE_INDIR; i++)
			n->indir[i] = i % n->nrx;
		n->indir_user = false;
		fake_changed(n);
		return 0;
	}
	if (cnt != FAKE_INDIR)
		return -EINVAL;
	for (uint32_t i = 0; i < cnt; i++)
		if (indir[i] >= n->nrx)
			return -EINVAL;
	memcpy(n->indir, indir, sizeof(n->indir));
	n->indir_user = true;
	fake_changed(n);
	return 0;
}

static int f_ctx_create(struct dmt_eth *e, const uint32_t *indir, uint32_t cnt, uint32_t *id)
{
	struct fake_nic *n = FN(e);
	int err = fake_change(n);

	n->calls++;
	n->ioctls++;
	if (err)
		return dmt_err_set(e->err, err, "create RSS context on %s failed: %s", e->ifname,
				   dmt_errno_name(err));
	if (!n->ctx_supported)
		return -EOPNOTSUPP;
	for (uint32_t c = 1; c <= FAKE_CTX; c++) {
		if (n->ctx[c].used)
			continue;
		n->ctx[c].used = true;
		memcpy(n->ctx[c].indir, indir, sizeof(n->indir));
		*id = c;
		fake_changed(n);
		return 0;
	}
	return -EBUSY;	/* the kernel: no context id left (xa_alloc) */
}

static int f_ctx_delete(struct dmt_eth *e, uint32_t id)
{
	struct fake_nic *n = FN(e);
	int err;

	n->calls++;
	n->ioctls++;
	if (id == 0 || id > FAKE_CTX || !n->ctx[id].used)
		return -ENOENT;
	err = fake_change(n);
	if (err)
		return dmt_err_set(e->err, err, "delete RSS context on %s failed: %s", e->ifname,
				   dmt_errno_name(err));
	for (int i = 0; i < FAKE_RULES; i++)
		if (n->rule[i].used && n->rule[i].rss_ctx == id)
			return -EBUSY;	/* the kernel refuses: rules use it */
	n->ctx[id].used = false;
	memset(n->ctx[id].indir, 0, sizeof(n->indir));
	fake_changed(n);
	return 0;
}

static int f_rule_insert(struct dmt_eth *e, const struct ethtool_rx_flow_spec *fs,
			 uint32_t rss_ctx, uint32_t *loc)
{
	struct fake_nic *n = FN(e);
	int err = fake_change(n);

	n->calls++;
	n->ioctls++;
	if (err)
		return dmt_err_set(e->err, err, "ETHTOOL_SRXCLSRLINS on %s failed: %s", e->ifname,
				   dmt_errno_name(err));
	if (!n->rules_supported || !n->ntuple_on)
		return -EOPNOTSUPP;
	if ((fs->flow_type & FLOW_RSS) ? (rss_ctx > FAKE_CTX || !n->ctx[rss_ctx].used)
				       : fs->ring_cookie >= n->nrx)
		return -EINVAL;
	/* like mlx5 and others: the highest free location */
	for (int i = FAKE_RULES - 1; i >= 0; i--) {
		if (n->rule[i].used)
			continue;
		n->rule[i].used = true;
		n->rule[i].rss_ctx = (fs->flow_type & FLOW_RSS) ? rss_ctx : 0;
		n->rule[i].fs = *fs;
		n->rule[i].fs.location = (uint32_t)i;
		*loc = (uint32_t)i;
		if (n->kill_after_insert)
			raise(SIGKILL);	/* before the journal has the location */
		fake_changed(n);
		return 0;
	}
	/* what the library says when it finds no free location */
	return dmt_err_set(e->err, -ENOSPC,
			   "the ntuple rule table of %s is full (%d of %d rules): "
			   "delete rules with ethtool -N %s delete LOC",
			   e->ifname, FAKE_RULES, FAKE_RULES, e->ifname);
}

static int f_rule_delete(struct dmt_eth *e, uint32_t loc)
{
	struct fake_nic *n = FN(e);
	int err;

	n->calls++;
	n->ioctls++;
	if (loc >= FAKE_RULES || !n->rule[loc].used)
		return -ENOENT;
	err = fake_change(n);
	if (err)
		return dmt_err_set(e->err, err, "ETHTOOL_SRXCLSRLDEL on %s failed: %s", e->ifname,
				   dmt_errno_name(err));
	memset(&n->rule[loc], 0, sizeof(n->rule[loc]));
	fake_changed(n);
	return 0;
}

static int f_rule_list(struct dmt_eth *e, struct dmt_rule **rules, size_t *cnt, uint32_t *size)
{
	struct fake_nic *n = FN(e);
	struct dmt_rule *v;
	size_t k = 0;

	n->calls++;
	*rules = NULL;
	*cnt = 0;
	if (!n->rules_supported)
		return -EOPNOTSUPP;
	v = dmt_calloc(FAKE_RULES, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (int i = 0; i < FAKE_RULES; i++) {
		if (!n->rule[i].used)
			continue;
		v[k].location = (uint32_t)i;
		v[k].rss_context = n->rule[i].rss_ctx;
		v[k].fs = n->rule[i].fs;
		k++;
	}
	*rules = v;
	*cnt = k;
	n->ioctls += 2 + (int)k;	/* GRXCLSRLCNT, GRXCLSRLALL, GRXCLSRULE each */
	if (size)
		*size = FAKE_RULES;
	return 0;
}

/* queue-get, answered for the NIC of the last fake_init() */
static struct fake_nic *fake_queues_of;

static int f_queue_list(int ifindex, struct devmemtcp_queue *q, size_t max)
{
	struct fake_nic *n = fake_queues_of;

	(void)ifindex;
	n->calls++;
	n->nl_calls++;
	for (uint32_t i = 0; i < n->nrx && i < FAKE_QUEUES && i < max; i++)
		q[i] = (struct devmemtcp_queue){ .id = i, .type = DEVMEMTCP_QUEUE_RX,
						 .dmabuf_id = n->q[i].dmabuf,
						 .io_uring = n->q[i].io_uring,
						 .xsk = n->q[i].xsk };
	return (int)n->nrx;
}

static const struct dmt_eth_ops fake_ops = {
	.rings_get = f_rings_get,
	.rings_set = f_rings_set,
	.channels_get = f_channels_get,
	.feature_get = f_feature_get,
	.feature_set = f_feature_set,
	.rss_get = f_rss_get,
	.rss_dump = f_rss_dump,
	.rss_set = f_rss_set,
	.rss_ctx_create = f_ctx_create,
	.rss_ctx_delete = f_ctx_delete,
	.rule_insert = f_rule_insert,
	.rule_delete = f_rule_delete,
	.rule_list = f_rule_list,
};

/* A bnxt-like NIC: 8 queues, header split off, hds-thresh 256. */
static void fake_init(struct fake_nic *n)
{
	memset(n, 0, sizeof(*n));
	n->nrx = 8;
	n->has_tds = n->has_hds = true;
	n->tds_default = DMT_ETHTOOL_TCP_DATA_SPLIT_DISABLED;
	n->hds = 256;
	n->hds_max = 1023;
	n->ntuple_hw = true;
	n->rss = true;
	for (uint32_t i = 0; i < FAKE_INDIR; i++)
		n->indir[i] = i % n->nrx;
	n->ctx_supported = true;
	n->rules_supported = true;
	dmt_eth_ops_override = &fake_ops;
	dmt_eth_priv_override = n;
	fake_queues_of = n;
	dmt_test_queue_list = f_queue_list;
}

/* A fake NIC in shared memory, so that forked owners and the test see one
 * device (initialised by fake_init()); NULL on failure. */
static inline struct fake_nic *fake_shared(void)
{
	void *n = mmap(NULL, sizeof(struct fake_nic), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return n == MAP_FAILED ? NULL : n;
}

/* Everything ethtool would show, as text, for "identical" comparisons. */
static inline void fake_dump(const struct fake_nic *n, char *buf, size_t len)
{
	size_t o = 0;

#define P(...) o += (size_t)snprintf(buf + o, o < len ? len - o : 0, __VA_ARGS__)
	P("rx %u tds cfg %u shows %u hds %u ntuple %d\nrss%s:", n->nrx,
	  n->tds_cfg, fake_tds(n), n->hds, n->ntuple_on,
	  n->indir_user ? " (user)" : "");
	for (int i = 0; i < FAKE_INDIR; i++)
		P(" %u", n->indir[i]);
	for (int c = 1; c <= FAKE_CTX; c++) {
		if (!n->ctx[c].used)
			continue;
		P("\ncontext %d:", c);
		for (int i = 0; i < FAKE_INDIR; i++)
			P(" %u", n->ctx[c].indir[i]);
	}
	for (int i = 0; i < FAKE_RULES; i++) {
		char s[160];

		if (!n->rule[i].used)
			continue;
		dmt_spec_str(&n->rule[i].fs, n->rule[i].rss_ctx, s, sizeof(s));
		P("\nrule %d: %s", i, s);
	}
#undef P
}

#endif

// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim fault injection and diagnosis: the debugfs knobs in
 * /sys/kernel/debug/devmemsim/<ifname>/ (corrupt_offset, drop_every,
 * fail_alloc, fail_restart, payload_bytes, dma_faults, dma_remapped, state)
 * and the hooks through which the receive path (rx.c) and queue restarts
 * (netdev.c) obey them.
 * Every knob acts on frames received by its device; the directory keeps
 * the name the device had at load time.
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#include "devmemsim.h"

#include <linux/debugfs.h>
#include <linux/seq_file.h>

enum {
	DSIM_CORRUPT_OFF,
	DSIM_CORRUPT_ARMED,	/* waiting for the SYN of the next connection */
	DSIM_CORRUPT_TRACKING,	/* waiting for the byte */
};

static struct dentry *dsim_dbg_root;

/* ------------------------------------------------------------------ */
/* datapath hooks                                                      */

static bool dsim_same_flow(const struct dsim_flow *a, const struct dsim_flow *b)
{
	return a->v6 == b->v6 && a->sport == b->sport && a->dport == b->dport &&
	       !memcmp(a->saddr, b->saddr, sizeof(a->saddr)) &&
	       !memcmp(a->daddr, b->daddr, sizeof(a->daddr));
}

/*
 * corrupt_offset = N: the N-th payload byte (1-based TCP stream offset) of
 * the first TCP connection whose SYN this device receives after the knob was
 * written is XOR'ed with 0xff, once; then the knob reads 0 again.
 * Returns the offset of that byte inside this frame's payload, or -1.
 */
int dsim_fault_corrupt_pos(struct dsim_priv *priv, const struct dsim_flow *fl,
			   const struct tcphdr *th, unsigned int plen)
{
	int pos = -1;

	spin_lock(&priv->fault_lock);
	priv->payload_seen += plen;
	if (priv->corrupt_state == DSIM_CORRUPT_ARMED && th->syn && !th->ack) {
		priv->ct_flow = *fl;
		priv->ct_seq = ntohl(th->seq) + (u32)priv->corrupt_offset;
		priv->corrupt_state = DSIM_CORRUPT_TRACKING;
	} else if (priv->corrupt_state == DSIM_CORRUPT_TRACKING && plen &&
		   dsim_same_flow(fl, &priv->ct_flow)) {
		u32 d = priv->ct_seq - ntohl(th->seq);

		if (d < plen)
			pos = d;
	}
	spin_unlock(&priv->fault_lock);
	return pos;
}

void dsim_fault_corrupt_apply(struct dsim_priv *priv, u8 *byte)
{
	spin_lock(&priv->fault_lock);
	if (priv->corrupt_state == DSIM_CORRUPT_TRACKING) {
		*byte ^= 0xff;
		pr_info("%s: corrupted stream byte %llu (seq %u)\n",
			netdev_name(priv->dev), priv->corrupt_offset, priv->ct_seq);
		priv->corrupt_state = DSIM_CORRUPT_OFF;
		priv->corrupt_offset = 0;
	}
	spin_unlock(&priv->fault_lock);
}

/* drop_every = N: true for every N-th received frame. */
bool dsim_fault_drop(struct dsim_priv *priv)
{
	bool drop = false;
	u32 every = READ_ONCE(priv->drop_every);

	if (!every)
		return false;
	spin_lock(&priv->fault_lock);
	priv->frames_seen++;
	if (priv->frames_seen % every == 0)
		drop = true;
	spin_unlock(&priv->fault_lock);
	return drop;
}

/* fail_alloc = N: true for the next N page-pool allocations. */
bool dsim_fault_alloc(struct dsim_priv *priv)
{
	return atomic_add_unless(&priv->fail_alloc, -1, 0);
}

/* fail_restart = N: true for the next N queue memory allocations. */
bool dsim_fault_restart(struct dsim_priv *priv)
{
	return atomic_add_unless(&priv->fail_restart, -1, 0);
}

/* ------------------------------------------------------------------ */
/* knobs                                                               */

static u64 dsim_fault_read(struct dsim_priv *priv, const u64 *field)
{
	u64 val;

	spin_lock_bh(&priv->fault_lock);
	val = *field;
	spin_unlock_bh(&priv->fault_lock);
	return val;
}

static int dsim_corrupt_get(void *data, u64 *val)
{
	struct dsim_priv *priv = data;

	*val = dsim_fault_read(priv, &priv->corrupt_offset);
	return 0;
}

static int dsim_corrupt_set(void *data, u64 val)
{
	struct dsim_priv *priv = data;

	if (val > U32_MAX)	/* inside the first 4 GiB of the stream */
		return -EINVAL;
	spin_lock_bh(&priv->fault_lock);
	priv->corrupt_offset = val;
	priv->corrupt_state = val ? DSIM_CORRUPT_ARMED : DSIM_CORRUPT_OFF;
	priv->payload_seen = 0;
	spin_unlock_bh(&priv->fault_lock);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(dsim_corrupt_fops, dsim_corrupt_get, dsim_corrupt_set,
			 "%llu\n");

static int dsim_drop_get(void *data, u64 *val)
{
	struct dsim_priv *priv = data;

	*val = READ_ONCE(priv->drop_every);
	return 0;
}

static int dsim_drop_set(void *data, u64 val)
{
	struct dsim_priv *priv = data;

	if (val > U32_MAX)
		return -EINVAL;
	spin_lock_bh(&priv->fault_lock);
	priv->frames_seen = 0;
	WRITE_ONCE(priv->drop_every, val);
	spin_unlock_bh(&priv->fault_lock);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(dsim_drop_fops, dsim_drop_get, dsim_drop_set, "%llu\n");

static int dsim_payload_get(void *data, u64 *val)
{
	struct dsim_priv *priv = data;

	*val = dsim_fault_read(priv, &priv->payload_seen);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(dsim_payload_fops, dsim_payload_get, NULL, "%llu\n");

/* dma_faults, dma_remapped: an atomic64_t counter, read-only */
static int dsim_counter_get(void *data, u64 *val)
{
	*val = atomic64_read(data);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(dsim_counter_fops, dsim_counter_get, NULL, "%llu\n");

/* "state": queue internals, to diagnose stalls */
static void dsim_state_queue(struct seq_file *m, struct dsim_priv *priv,
			     unsigned int i)
{
	struct net_device *dev = priv->dev;
	struct dsim_rq *rq = &priv->rq[i];
	u64 r[DSIM_NR_CTRS], t[DSIM_NR_CTRS];

	dsim_stats_read(&rq->stats, r);
	dsim_stats_read(&priv->tq[i].stats, t);
	seq_printf(m, "rx%u: backlog %u napi_on %d napi_state 0x%lx pp %d mp %d page %lu packets %llu alloc_fail %llu drops %llu bufs %llu pages %llu\n",
		   i, skb_queue_len(&rq->backlog), rq->napi_on,
		   READ_ONCE(rq->napi.state), !!rq->pp,
		   i < dev->real_num_rx_queues && dsim_rxq_has_mp(dev, i),
		   PAGE_SIZE << rq->page_order,
		   r[DSIM_PACKETS], r[DSIM_ALLOC_FAIL], r[DSIM_DROPS],
		   r[DSIM_BUFS], r[DSIM_PAGES]);
	if (i < dev->num_tx_queues)
		seq_printf(m, "tx%u: stopped %d packets %llu drops %llu\n", i,
			   netif_tx_queue_stopped(netdev_get_tx_queue(dev, i)),
			   t[DSIM_PACKETS], t[DSIM_DROPS]);
}

static int dsim_state_show(struct seq_file *m, void *v)
{
	struct dsim_priv *priv = m->private;
	struct net_device *dev = priv->dev;
	unsigned int i;
	char lo[64];

	dsim_layout_str(&priv->layout, lo, sizeof(lo));
	seq_printf(m, "%s: running %d real_rx %u real_tx %u hds %d hds_thresh %u rules %u\n",
		   netdev_name(dev), netif_running(dev), dev->real_num_rx_queues,
		   dev->real_num_tx_queues, READ_ONCE(priv->hds),
		   READ_ONCE(priv->hds_thresh), priv->nrules);
	seq_printf(m, "parent %s dma %s dma_faults %lld dma_remapped %lld rx_buffers %s\n",
		   dev_name(priv->dmadev), dsim_dma_mode(priv),
		   (long long)atomic64_read(&priv->dma_faults),
		   (long long)atomic64_read(&priv->dma_remapped), lo);
	seq_printf(m, "profile %s\n", dsim_prof->name);
	for (i = 0; i < priv->nq; i++)
		dsim_state_queue(m, priv, i);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(dsim_state);

/* "layout": where payloads land now, for the tests' layout checks:
 * "buf_size N pack 0|1 align N mix 0|1" */
static int dsim_layout_show(struct seq_file *m, void *v)
{
	struct dsim_priv *priv = m->private;
	const struct dsim_layout *lo = &priv->layout;

	seq_printf(m, "buf_size %u pack %d align %u mix %d\n", READ_ONCE(lo->buf_size),
		   lo->pack, lo->align, lo->mix);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(dsim_layout);

void dsim_debugfs_init(void)
{
	dsim_dbg_root = debugfs_create_dir(DSIM_DRV_NAME, NULL);
}

void dsim_debugfs_add(struct dsim_priv *priv)
{
	if (IS_ERR_OR_NULL(dsim_dbg_root))
		return;
	priv->dbg = debugfs_create_dir(netdev_name(priv->dev), dsim_dbg_root);
	debugfs_create_file_unsafe("corrupt_offset", 0600, priv->dbg, priv,
				   &dsim_corrupt_fops);
	debugfs_create_file_unsafe("drop_every", 0600, priv->dbg, priv,
				   &dsim_drop_fops);
	debugfs_create_file_unsafe("payload_bytes", 0400, priv->dbg, priv,
				   &dsim_payload_fops);
	debugfs_create_file_unsafe("dma_faults", 0400, priv->dbg,
				   &priv->dma_faults, &dsim_counter_fops);
	debugfs_create_file_unsafe("dma_remapped", 0400, priv->dbg,
				   &priv->dma_remapped, &dsim_counter_fops);
	debugfs_create_atomic_t("fail_restart", 0600, priv->dbg,
				&priv->fail_restart);
	debugfs_create_atomic_t("fail_alloc", 0600, priv->dbg, &priv->fail_alloc);
	debugfs_create_file("state", 0400, priv->dbg, priv, &dsim_state_fops);
	debugfs_create_file("layout", 0400, priv->dbg, priv, &dsim_layout_fops);
}

void dsim_debugfs_remove(struct dsim_priv *priv)
{
	debugfs_remove_recursive(priv->dbg);
	priv->dbg = NULL;
}

void dsim_debugfs_exit(void)
{
	debugfs_remove_recursive(dsim_dbg_root);
}
